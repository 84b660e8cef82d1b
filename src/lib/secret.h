/* API token secrets: "pdk_" and 43 base64url characters (32 random bytes). Only the SHA-256 of
 * the whole secret string is ever stored or compared; comparisons take constant time. */
#pragma once
#include <stdbool.h>
#include <stddef.h>

#define SECRET_PREFIX   "pdk_"
#define SECRET_LEN      (4 + 43)
#define SECRET_HASH_HEX 64 /* characters, without the NUL */

/* A new secret from getrandom(); ret gets SECRET_LEN characters and a NUL. */
int secret_new(char ret[static SECRET_LEN + 1]);
/* Does s look like a secret (prefix, length, alphabet)? Says nothing about validity. */
bool secret_format_ok(const char *s);
/* Lowercase hex SHA-256 of the len bytes of secret, NUL-terminated. */
void secret_hash_hex(const char *secret, size_t len, char ret[static SECRET_HASH_HEX + 1]);
/* a == b for two hashes, in time that does not depend on where they differ. */
bool secret_hash_equal(const char *a, const char *b);

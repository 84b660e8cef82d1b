/* Standard base64 (RFC 4648, padded): exec stdin goes up encoded, output chunks that are not
 * UTF-8 come down encoded. */
#pragma once

#include <stddef.h>

/* Bytes needed to encode len bytes, with the terminating NUL. */
size_t base64_encoded_size(size_t len);
/* Encode into out (base64_encoded_size(len) bytes); returns the length without the NUL. */
size_t base64_encode(const void *data, size_t len, char *out);
/* Decode in place-safe into out (at least len*3/4 bytes). Returns the decoded length, or -1 on
 * a character outside the alphabet or bad padding. */
long base64_decode(const char *in, size_t len, unsigned char *out);

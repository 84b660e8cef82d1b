/* The WebSocket opening handshake (RFC 6455 §4), shared by paddockd and the CLI. Framing itself
 * is wslay's. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#define WS_KEY_LEN    24 /* base64 of 16 random bytes */
#define WS_ACCEPT_LEN 28 /* base64 of a SHA-1 digest */

/* Is key a Sec-WebSocket-Key as the RFC requires (base64 of exactly 16 bytes)? */
bool ws_key_valid(const char *key);
/* Sec-WebSocket-Accept for key: base64(SHA-1(key + the RFC's GUID)), NUL-terminated. */
void ws_accept_for(const char *key, char out[WS_ACCEPT_LEN + 1]);
/* A fresh random key for a client. */
int ws_key_new(char out[WS_KEY_LEN + 1]);

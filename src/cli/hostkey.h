/* Server certificate identities for TLS connections (tls.c): SHA-256 fingerprints of the
 * certificate's DER bytes, written "sha256:AB:CD:..." (what `paddock system` and the daemon's
 * log show), a pinned one (--fingerprint), and trust on first use with a known_hosts file:
 * $XDG_CONFIG_HOME/paddock/known_hosts, else ~/.config/paddock/known_hosts, one
 * "HOST:PORT sha256:..." a line, directory 0700, file 0600. */
#pragma once

#include "cli/transport.h"

#include <stdint.h>

#define HOSTKEY_LEN      32
#define HOSTKEY_TEXT_MAX (7 + HOSTKEY_LEN * 3) /* "sha256:" + "AB:" * 32, the last ':' a NUL */

/* The SHA-256 of der. */
void hostkey_digest(const void *der, size_t len, uint8_t ret[HOSTKEY_LEN]);
void hostkey_format(const uint8_t key[HOSTKEY_LEN], char out[HOSTKEY_TEXT_MAX]);
/* "sha256:AB:CD:..." (prefix optional, colons optional, any case). 0 or -EINVAL. */
int hostkey_parse(const char *s, uint8_t ret[HOSTKEY_LEN]);

/* Does key match ep's pinned fingerprint (compared in constant time)? 0, or -1 after
 * printing why. */
int hostkey_check_pin(const struct endpoint *ep, const uint8_t key[HOSTKEY_LEN]);
/* Trust on first use: 0 when key is the one known_hosts has for ep's HOST:PORT, or was
 * accepted now (--trust-new, or the user said yes on a terminal) and stored; -1 after
 * printing why (a different key: a loud warning naming the file and line to edit). */
int hostkey_check_known(const struct endpoint *ep, const uint8_t key[HOSTKEY_LEN]);

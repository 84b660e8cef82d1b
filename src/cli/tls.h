/* TLS to a remote paddockd (its gateway), client side, with GnuTLS. TLS 1.2 and 1.3 only.
 *
 * GnuTLS is loaded with dlopen on the first TLS connection, not linked: linking it made every
 * start of the CLI, local ones included, about 1.2 ms slower (loading it and the libraries it
 * needs, and its implicit global initialisation), on a 4 ms `paddock exec` round trip.
 *
 * The server's certificate is checked before anything is sent (hostkey.c): against the CA
 * file (chain and host name) with --ca-cert, against the pinned SHA-256 with --fingerprint,
 * else against ~/.config/paddock/known_hosts (trust on first use). Never skipped. */
#pragma once

#include "cli/transport.h"

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* Handshake on the connected socket fd (blocking, with a deadline) and check the server's
 * certificate for ep. On failure prints why and returns -1 (the fd is the caller's to close);
 * a refused certificate also sets transport_refused(). */
int tls_open(int fd, const struct endpoint *ep, struct tls **ret);
void tls_close(struct tls *t);

/* As transport_read / transport_write. */
ssize_t tls_read(struct tls *t, void *buf, size_t len, bool nonblock);
ssize_t tls_write(struct tls *t, const void *buf, size_t len, bool nonblock);
/* Decrypted bytes waiting (poll on the fd does not see them). */
bool tls_pending(const struct tls *t);

/* Shared libraries the CLI loads on first use instead of at every start (lazylib.c): libwslay
 * for WebSocket framing (`exec -t`, `shell`) and libnettle for the SHA-1 of the WebSocket
 * handshake and the SHA-256 of TLS host keys. GnuTLS is loaded the same way by tls.c. */
#pragma once

/* Load the library if not done yet: 0, or -1 after printing why (it is missing, or lacks a
 * function we call). After a failure, later calls fail again without printing. */
int lazy_wslay(void);
int lazy_nettle(void);

/* WebSockets as paddockd and the CLI both speak them: the opening handshake (RFC 6455 §4) and
 * the socket side of a wslay session. Framing itself is wslay's. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <wslay/wslay.h>

#define WS_KEY_LEN    24 /* base64 of 16 random bytes */
#define WS_ACCEPT_LEN 28 /* base64 of a SHA-1 digest */

/* Is key a Sec-WebSocket-Key as the RFC requires (base64 of exactly 16 bytes)? */
bool ws_key_valid(const char *key);
/* Sec-WebSocket-Accept for key: base64(SHA-1(key + the RFC's GUID)), NUL-terminated. */
void ws_accept_for(const char *key, char out[WS_ACCEPT_LEN + 1]);
/* A fresh random key for a client. */
int ws_key_new(char out[WS_KEY_LEN + 1]);

/* The socket under a wslay session, and the bytes read past the HTTP head before wslay took
 * over (the peer's first frames may have come with it); those are handed to wslay first. */
struct ws_io {
        int fd; /* its owner's: ws_io_done does not close it */
        char *extra;
        size_t extra_len, extra_off;
};

/* Start io on fd with a copy of extra. -ENOMEM. */
int ws_io_init(struct ws_io *io, int fd, const void *extra, size_t extra_len);
void ws_io_done(struct ws_io *io);
/* Are read-ahead bytes still waiting for wslay (which no poll will announce)? */
bool ws_io_has_extra(const struct ws_io *io);

/* The bodies of wslay's recv and send callbacks. Neither ever blocks (MSG_DONTWAIT, whatever
 * the fd's own mode): an empty socket or a full one is WSLAY_ERR_WOULDBLOCK, and the caller's
 * poll loop comes back when it is ready. The peer's end or a socket error is
 * WSLAY_ERR_CALLBACK_FAILURE. When to stop reading for backpressure is the caller's. */
ssize_t ws_io_recv(struct ws_io *io, wslay_event_context_ptr ctx, uint8_t *buf, size_t len);
ssize_t ws_io_send(struct ws_io *io, wslay_event_context_ptr ctx, const uint8_t *data, size_t len,
                   int flags);
/* wslay's genmask callback: masking keys from getrandom (clients mask every frame). */
int ws_genmask(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, void *user);

/* Queue one whole message (opcode 1 text, 2 binary); wslay copies buf. -ENOMEM. */
int ws_queue_msg(wslay_event_context_ptr ctx, int opcode, const void *buf, size_t len);

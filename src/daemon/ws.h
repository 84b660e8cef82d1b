/* WebSocket connections on upgraded HTTP connections (RFC 6455, framing by wslay), driven by
 * the event loop. Messages are whole (wslay reassembles fragments) and size-limited; pings are
 * answered; a close from the client is answered and ends the connection.
 *
 * Flow control is the owner's: ws_queued() says how much is waiting to go out, ws_pause_read()
 * stops taking messages in. */
#pragma once
#include "daemon/http.h"
#include "daemon/loop.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define WS_MAX_MESSAGE (1u << 20) /* a longer message closes the connection (1009) */

struct ws_conn;

struct ws_ops {
        /* opcode 1 (text) or 2 (binary) */
        void (*message)(void *data, int opcode, const uint8_t *msg, size_t len);
        /* The queue of outgoing messages went empty (e.g. to resume a paused producer). */
        void (*drained)(void *data);
        /* The connection is over (closed by either side or broken); ws_conn is freed right
         * after this returns. Runs exactly once, never from inside a ws_* call. */
        void (*closed)(void *data);
};

/* Take over the upgraded socket; the bytes already read are handled first. */
int ws_conn_new(struct loop *l, int fd, const char *extra, size_t extra_len,
                struct http_upgraded *u, const struct ws_ops *ops, void *data,
                struct ws_conn **ret);
int ws_send(struct ws_conn *c, int opcode, const void *buf, size_t len);
size_t ws_queued(struct ws_conn *c);
void ws_pause_read(struct ws_conn *c, bool pause);
/* Send a close frame after everything queued; the connection ends once it went out (or after
 * a short grace if the client never answers). */
void ws_close(struct ws_conn *c, uint16_t code, const char *reason);

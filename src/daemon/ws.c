#include "daemon/ws.h"
#include "daemon/log.h"
#include "lib/util.h"
#include "lib/websocket.h"

#include <sys/epoll.h>
#include <sys/socket.h>
#include <wslay/wslay.h>

#define WS_CLOSE_GRACE_MS 2000

struct ws_conn {
        struct loop *loop;
        struct ws_io io; /* its fd is u's */
        struct http_upgraded *u;
        struct loop_source *src;
        struct loop_timer *close_timer, *finish_timer;
        wslay_event_context_ptr ctx;
        const struct ws_ops *ops;
        void *data;
        bool paused, closing, close_queued, finished;
        bool in_recv; /* inside wslay_event_recv: its callbacks must not send */
        uint16_t close_code;
        char close_reason[64];
};

/* wslay sends control frames ahead of queued messages: the close goes in only once every
 * message before it has gone out. */
static void queue_close_when_drained(struct ws_conn *c)
{
        if (!c->closing || c->close_queued || wslay_event_get_queued_msg_count(c->ctx))
                return;
        c->close_queued = true;
        wslay_event_queue_close(c->ctx, c->close_code, (const uint8_t *)c->close_reason,
                                strlen(c->close_reason));
}

/* Reading stops while the client does not take what we send: every PING it sends queues a
 * PONG, every bad control message an error, and a client that never reads must not make that
 * queue grow without bound. */
#define WS_SEND_BACKLOG_BYTES (1u << 20)
#define WS_SEND_BACKLOG_MSGS 1024u

static bool send_backlogged(struct ws_conn *c)
{
        return wslay_event_get_queued_msg_length(c->ctx) > WS_SEND_BACKLOG_BYTES ||
               wslay_event_get_queued_msg_count(c->ctx) > WS_SEND_BACKLOG_MSGS;
}

/* The socket side is lib/websocket.c's, as in the CLI. What is ours is backpressure: the CLI
 * has one connection and blocks in poll, but here one client must not make the daemon queue
 * without bound, so reading stops while it is paused or backlogged. */
static ssize_t on_recv(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, int flags, void *user)
{
        struct ws_conn *c = user;
        /* Paused by a handler during this very recv loop, or backlogged: stop here, not at
         * the next EAGAIN (the rest of a burst stays in the socket). */
        if (c->paused || send_backlogged(c)) {
                wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
                return -1;
        }
        return ws_io_recv(&c->io, ctx, buf, len);
}

static ssize_t on_send(wslay_event_context_ptr ctx, const uint8_t *data, size_t len, int flags,
                       void *user)
{
        struct ws_conn *c = user;
        return ws_io_send(&c->io, ctx, data, len, flags);
}

static void on_msg(wslay_event_context_ptr ctx, const struct wslay_event_on_msg_recv_arg *arg,
                   void *user)
{
        struct ws_conn *c = user;
        if (c->closing || c->finished)
                return;
        if (arg->opcode == WSLAY_TEXT_FRAME || arg->opcode == WSLAY_BINARY_FRAME)
                c->ops->message(c->data, arg->opcode, arg->msg, arg->msg_length);
}

static const struct wslay_event_callbacks callbacks = {
    .recv_callback = on_recv,
    .send_callback = on_send,
    .genmask_callback = ws_genmask,
    .on_msg_recv_callback = on_msg,
};

static void conn_free(struct ws_conn *c)
{
        loop_remove(c->src);
        loop_cancel_timer(c->close_timer);
        loop_cancel_timer(c->finish_timer);
        wslay_event_context_free(c->ctx);
        http_upgraded_close(c->u);
        ws_io_done(&c->io);
        free(c);
}

/* Tell the owner and free, from a timer so no caller's stack still holds c. */
static void on_finish(struct loop_timer *t, void *data)
{
        struct ws_conn *c = data;
        c->finish_timer = NULL;
        c->ops->closed(c->data);
        conn_free(c);
}

static void finish(struct ws_conn *c)
{
        if (c->finished)
                return;
        c->finished = true;
        loop_set_events(c->src, 0);
        c->finish_timer = loop_add_timer(c->loop, 0, on_finish, c);
        if (!c->finish_timer) {
                /* Out of memory: there is no better moment than now. */
                c->ops->closed(c->data);
                conn_free(c);
        }
}

static void update_events(struct ws_conn *c)
{
        if (c->finished)
                return;
        bool want_read = wslay_event_want_read(c->ctx) && !c->paused;
        bool want_write = wslay_event_want_write(c->ctx);
        if (!want_read && !want_write) {
                finish(c);
                return;
        }
        if (want_write && send_backlogged(c))
                want_read = false; /* until the client takes what is queued */
        /* While paused, not even RDHUP: a half-closed peer would wake us in a loop. */
        loop_set_events(c->src,
                        (want_read ? EPOLLIN | EPOLLRDHUP : 0) | (want_write ? EPOLLOUT : 0));
}

/* Send what wslay holds, as far as the socket takes it. */
static void flush_out(struct ws_conn *c)
{
        if (c->finished)
                return;
        size_t before = wslay_event_get_queued_msg_count(c->ctx);
        if (wslay_event_send(c->ctx) != 0) {
                finish(c);
                return;
        }
        if (before && !wslay_event_get_queued_msg_count(c->ctx) && c->ops->drained && !c->closing)
                c->ops->drained(c->data);
        if (c->closing && !c->close_queued) {
                queue_close_when_drained(c);
                if (c->close_queued && wslay_event_send(c->ctx) != 0) {
                        finish(c);
                        return;
                }
        }
        update_events(c);
}

static void pump(struct ws_conn *c, uint32_t events)
{
        if (c->finished)
                return;
        if (events & (EPOLLHUP | EPOLLERR)) {
                finish(c);
                return;
        }
        bool extra_left = ws_io_has_extra(&c->io);
        if (((events & (EPOLLIN | EPOLLRDHUP)) || extra_left) && !c->paused) {
                c->in_recv = true;
                int r = wslay_event_recv(c->ctx);
                c->in_recv = false;
                if (r != 0) {
                        finish(c);
                        return;
                }
        }
        flush_out(c);
}

static void on_io(struct loop_source *src, int fd, uint32_t events, void *data)
{
        pump(data, events);
}

int ws_conn_new(struct loop *l, int fd, const char *extra, size_t extra_len,
                struct http_upgraded *u, const struct ws_ops *ops, void *data, struct ws_conn **ret)
{
        struct ws_conn *c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        *c = (struct ws_conn){.loop = l, .u = u, .ops = ops, .data = data};
        if (ws_io_init(&c->io, fd, extra, extra_len) < 0) {
                free(c);
                return -ENOMEM;
        }
        if (wslay_event_context_server_init(&c->ctx, &callbacks, c) != 0) {
                ws_io_done(&c->io);
                free(c);
                return -ENOMEM;
        }
        wslay_event_config_set_max_recv_msg_length(c->ctx, WS_MAX_MESSAGE);
        int fl = fcntl(fd, F_GETFL);
        if (fl >= 0)
                fcntl(fd, F_SETFL, fl | O_NONBLOCK);
        /* EPOLLOUT fires at once, so the bytes that came with the request (which epoll will
         * not announce) are looked at right away. */
        int r = loop_add_fd(l, fd, EPOLLIN | EPOLLRDHUP | EPOLLOUT, on_io, c, &c->src);
        if (r < 0) {
                wslay_event_context_free(c->ctx);
                ws_io_done(&c->io);
                free(c);
                return r;
        }
        *ret = c;
        return 0;
}

int ws_send(struct ws_conn *c, int opcode, const void *buf, size_t len)
{
        if (c->finished || c->closing)
                return -EPIPE;
        int r = ws_queue_msg(c->ctx, opcode, buf, len);
        if (r < 0)
                return r;
        /* Keystroke echo is latency-bound: write now rather than one loop turn later. */
        if (!c->in_recv) {
                flush_out(c);
                return 0;
        }
        loop_set_events(c->src,
                        ((wslay_event_want_read(c->ctx) && !c->paused) ? EPOLLIN | EPOLLRDHUP : 0) |
                            EPOLLOUT);
        return 0;
}

size_t ws_queued(struct ws_conn *c)
{
        return wslay_event_get_queued_msg_length(c->ctx);
}

void ws_pause_read(struct ws_conn *c, bool pause)
{
        if (c->paused == pause || c->finished)
                return;
        c->paused = pause;
        update_events(c);
}

static void on_close_grace(struct loop_timer *t, void *data)
{
        struct ws_conn *c = data;
        c->close_timer = NULL;
        finish(c);
}

void ws_close(struct ws_conn *c, uint16_t code, const char *reason)
{
        if (c->finished || c->closing)
                return;
        c->closing = true;
        c->close_code = code;
        snprintf(c->close_reason, sizeof(c->close_reason), "%s", reason ? reason : "");
        queue_close_when_drained(c);
        c->close_timer = loop_add_timer(c->loop, WS_CLOSE_GRACE_MS, on_close_grace, c);
        c->paused = false;
        loop_set_events(c->src, EPOLLIN | EPOLLRDHUP | EPOLLOUT);
}

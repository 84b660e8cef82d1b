#include "cli/wsclient.h"
#include "cli/client.h"
#include "cli/lazylib.h"
#include "lib/http1.h"
#include "lib/websocket.h"
#include "lib/util.h"

#include <poll.h>
#include <strings.h>

/* One read of the handshake's answer; the head itself may be up to HTTP1_MAX_HEAD. */
#define READ_SIZE          (16u << 10)
#define MAX_ERROR_BODY     (64u << 10)
#define UPGRADE_TIMEOUT_MS 60000
#define REFUSAL_TIMEOUT_MS 5000

/* wslay hands our callbacks the user pointer of the session; the connection is found through
 * a per-process pointer, since there is only ever one in the CLI. Neither callback ever blocks:
 * an empty or full connection is WSLAY_ERR_WOULDBLOCK and tty_session.c's poll loop comes back;
 * unlike paddockd we never stop reading for backpressure: tty_session.c stops taking keys
 * itself while output is queued. */
static struct wsc *the_conn;

static ssize_t io_failed(wslay_event_context_ptr ctx, ssize_t err)
{
        wslay_event_set_error(ctx,
                              err == -EAGAIN ? WSLAY_ERR_WOULDBLOCK : WSLAY_ERR_CALLBACK_FAILURE);
        return -1;
}

static ssize_t on_recv(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, int flags, void *user)
{
        ssize_t n = transport_read(&the_conn->conn, buf, len, true);
        if (n == 0)
                return io_failed(ctx, -ECONNRESET); /* the peer is gone */
        return n < 0 ? io_failed(ctx, n) : n;
}

static ssize_t on_send(wslay_event_context_ptr ctx, const uint8_t *data, size_t len, int flags,
                       void *user)
{
        ssize_t n = transport_write(&the_conn->conn, data, len, true);
        return n < 0 ? io_failed(ctx, n) : n;
}

/* The daemon's answer to the Upgrade request, parsed by the same strict parser as every other
 * response (lib/http1.c): a 101 with the right Sec-WebSocket-Accept, or a refusal whose JSON
 * error is kept (up to MAX_ERROR_BODY) to be printed. */
struct handshake {
        struct http1 parser;
        char accept[WS_ACCEPT_LEN + 1]; /* Sec-WebSocket-Accept, when given once and that long */
        int accepts;                    /* how many Sec-WebSocket-Accept fields came */
        bool upgrade_websocket;         /* Upgrade: websocket */
        bool head_in;                   /* the final response's head is in (its status holds) */
        char *body;                     /* of a refusal, NUL-terminated */
        size_t body_len;
};

static bool name_is(const char *name, size_t len, const char *want)
{
        return len == strlen(want) && strncasecmp(name, want, len) == 0;
}

static int on_field(const char *name, size_t name_len, const char *value, size_t value_len,
                    void *userdata)
{
        struct handshake *h = userdata;
        if (name_is(name, name_len, "Sec-WebSocket-Accept")) {
                h->accepts++;
                if (value_len < sizeof(h->accept)) {
                        memcpy(h->accept, value, value_len);
                        h->accept[value_len] = 0;
                }
        } else if (name_is(name, name_len, "Upgrade")) {
                h->upgrade_websocket = name_is(value, value_len, "websocket");
        }
        return 0;
}

static int on_body(const char *data, size_t len, void *userdata)
{
        struct handshake *h = userdata;
        h->head_in = true;
        if (h->body_len + len > MAX_ERROR_BODY)
                return -EFBIG; /* enough for a message: stop reading there */
        memcpy(h->body + h->body_len, data, len);
        h->body_len += len;
        h->body[h->body_len] = 0;
        return 0;
}

/* Read and parse the answer until it is complete (a 101 ends at its head), the connection
 * ends, or it goes quiet (UPGRADE_TIMEOUT_MS for the head, REFUSAL_TIMEOUT_MS between pieces
 * of a refusal's body). 0, or -errno (-EPROTO / -E2BIG: h->parser.why says what was wrong;
 * -EFBIG: a refusal's body was cut at MAX_ERROR_BODY). Bytes after a 101 are given back to
 * the connection: they are the daemon's first frames. */
static int read_answer(struct transport *conn, struct handshake *h, char *buf, size_t cap)
{
        for (;;) {
                int timeout = http1_head_done(&h->parser) ? REFUSAL_TIMEOUT_MS : UPGRADE_TIMEOUT_MS;
                int r = transport_wait(conn, POLLIN, timeout);
                if (r == 0)
                        return -ETIMEDOUT;
                if (r < 0)
                        return r;
                ssize_t n = transport_read(conn, buf, cap, true);
                if (n == -EAGAIN)
                        continue;
                if (n == 0 || n == -ECONNRESET)
                        return http1_eof(&h->parser);
                if (n < 0)
                        return (int)n;
                r = http1_feed(&h->parser, buf, (size_t)n, on_body, h);
                if (r < 0)
                        return r;
                h->head_in = http1_head_done(&h->parser);
                if (http1_complete(&h->parser)) {
                        size_t used = h->parser.used;
                        if (h->parser.status == 101)
                                return transport_unread(conn, buf + used, (size_t)n - used);
                        return 0;
                }
        }
}

/* A refused handshake: the daemon's JSON error message, else its status. */
static void print_refusal(const struct handshake *h)
{
        json_t *j = h->body_len ? json_loadb(h->body, h->body_len, 0, NULL) : NULL;
        const char *msg =
            json_string_value(json_object_get(json_object_get(j, "error"), "message"));
        if (msg && *msg)
                fprintf(stderr, "paddock: %.*s\n", (int)strcspn(msg, "\r\n"), msg);
        else
                fprintf(stderr, "paddock: paddockd answered HTTP %d\n", h->parser.status);
        json_decref(j);
}

/* Send the Upgrade request and read the answer. 0 when the daemon switched protocols, else -1
 * after printing why. */
static int handshake(struct client *client, struct transport *conn, const char *path)
{
        char key[WS_KEY_LEN + 1], accept[WS_ACCEPT_LEN + 1];
        if (ws_key_new(key) < 0) {
                fprintf(stderr, "paddock: no randomness for the WebSocket key\n");
                return -1;
        }
        ws_accept_for(key, accept);
        _cleanup_free_ char *common = client_headers(client);
        _cleanup_free_ char *req = NULL;
        if (!common || asprintf(&req,
                                "GET %s HTTP/1.1\r\n%sUser-Agent: paddock-cli\r\n"
                                "Upgrade: websocket\r\nConnection: Upgrade\r\n"
                                "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n",
                                path, common, key) < 0) {
                req = NULL;
                fprintf(stderr, "paddock: out of memory\n");
                return -1;
        }
        int r = transport_write_all(conn, req, strlen(req));
        if (r < 0) {
                fprintf(stderr, "paddock: request to paddockd failed: %s\n", strerror(-r));
                return -1;
        }
        struct handshake h = {};
        http1_init(&h.parser);
        h.parser.upgrade = true;
        h.parser.on_field = on_field;
        h.parser.field_data = &h;
        _cleanup_free_ char *buf = malloc(READ_SIZE);
        h.body = malloc(MAX_ERROR_BODY + 1);
        if (!buf || !h.body) {
                free(h.body);
                fprintf(stderr, "paddock: out of memory\n");
                return -1;
        }
        h.body[0] = 0;
        r = read_answer(conn, &h, buf, READ_SIZE);
        int status = h.head_in ? h.parser.status : 0;
        if (status && status != 101) {
                /* A refusal, even when its body was cut short: say what there is of it. */
                print_refusal(&h);
                r = -1;
        } else if (r < 0) {
                fprintf(stderr, "paddock: request to paddockd failed: %s\n",
                        r == -EPROTO || r == -E2BIG ? h.parser.why : strerror(-r));
        } else if (!h.upgrade_websocket || h.accepts != 1 || strcmp(h.accept, accept) != 0) {
                fprintf(stderr, "paddock: paddockd answered the WebSocket handshake wrongly\n");
                r = -1;
        }
        http1_done(&h.parser);
        free(h.body);
        return r < 0 ? -1 : 0;
}

int wsc_open(struct client *client, const char *path, const struct wslay_event_callbacks *callbacks,
             void *user, struct wsc *ret)
{
        struct wsc w = {.conn.fd = -EBADF};
        /* Both libraries before connecting: one that is missing is said before any request. */
        if (lazy_wslay() < 0 || lazy_nettle() < 0 || client_connect(client, &w.conn) < 0)
                return -1;
        if (handshake(client, &w.conn, path) < 0)
                goto fail;
        struct wslay_event_callbacks cb = *callbacks;
        cb.recv_callback = on_recv;
        cb.send_callback = on_send;
        cb.genmask_callback = ws_genmask;
        if (wslay_event_context_client_init(&w.ctx, &cb, user) != 0) {
                fprintf(stderr, "paddock: out of memory\n");
                goto fail;
        }
        wslay_event_config_set_max_recv_msg_length(w.ctx, 16u << 20);
        *ret = w;
        the_conn = ret;
        return 0;
fail:
        transport_close(&w.conn);
        return -1;
}

void wsc_close(struct wsc *w)
{
        if (w->ctx)
                wslay_event_context_free(w->ctx);
        w->ctx = NULL;
        transport_close(&w->conn);
        if (the_conn == w)
                the_conn = NULL;
}

int wsc_send(struct wsc *w, int opcode, const void *buf, size_t len)
{
        return ws_queue_msg(w->ctx, opcode, buf, len);
}

int wsc_send_json(struct wsc *w, json_t *j)
{
        char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
        json_decref(j);
        if (!text)
                return -ENOMEM;
        int r = wsc_send(w, 1, text, strlen(text));
        free(text);
        return r;
}

#include "cli/wsclient.h"
#include "cli/client.h"
#include "lib/websocket.h"
#include "lib/util.h"

#include <poll.h>
#include <strings.h>

#define MAX_RESPONSE_HEAD    (16u << 10)
#define MAX_ERROR_BODY       (64u << 10)
#define HANDSHAKE_TIMEOUT_MS 60000

/* wslay hands our callbacks the user pointer of the session; the connection is found through
 * a per-process pointer, since there is only ever one in the CLI. Neither callback ever blocks:
 * an empty or full connection is WSLAY_ERR_WOULDBLOCK and tty_session.c's poll loop comes back;
 * unlike paddockd we never stop reading for backpressure: tty_session.c stops taking keys
 * itself while output is queued. */
static struct wsc *the_conn;

static ssize_t io_failed(wslay_event_context_ptr ctx, ssize_t err)
{
        wslay_event_set_error(ctx, err == -EAGAIN ? WSLAY_ERR_WOULDBLOCK
                                                  : WSLAY_ERR_CALLBACK_FAILURE);
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

/* Read until the end of the response head (or the connection's end); blocking with a timeout. */
static ssize_t read_head(struct transport *conn, char *buf, size_t cap, size_t *ret_head_len)
{
        size_t len = 0;
        for (;;) {
                buf[len] = 0;
                char *end = strstr(buf, "\r\n\r\n");
                if (end) {
                        *ret_head_len = (size_t)(end - buf) + 4;
                        return (ssize_t)len;
                }
                if (len + 1 >= cap)
                        return -E2BIG;
                int r = transport_wait(conn, POLLIN, HANDSHAKE_TIMEOUT_MS);
                if (r == 0)
                        return -ETIMEDOUT;
                if (r < 0)
                        return r;
                ssize_t n = transport_read(conn, buf + len, cap - 1 - len, true);
                if (n == -EAGAIN)
                        continue;
                if (n < 0)
                        return n;
                if (n == 0)
                        return -ECONNRESET;
                len += (size_t)n;
        }
}

/* The value of header name in head (case-insensitive), copied to out. */
static bool find_header(const char *head, const char *name, char *out, size_t outlen)
{
        size_t nlen = strlen(name);
        for (const char *line = strstr(head, "\r\n"); line; line = strstr(line, "\r\n")) {
                line += 2;
                if (strncasecmp(line, name, nlen) == 0 && line[nlen] == ':') {
                        const char *v = line + nlen + 1;
                        v += strspn(v, " \t");
                        size_t n = strcspn(v, "\r\n");
                        while (n && (v[n - 1] == ' ' || v[n - 1] == '\t'))
                                n--;
                        snprintf(out, outlen, "%.*s", (int)n, v);
                        return true;
                }
        }
        return false;
}

/* A refused handshake: the daemon's JSON error, read to its end. */
static void print_refusal(struct transport *conn, const char *head, const char *body,
                          size_t body_len)
{
        long status = strtol(head + 9, NULL, 10);
        char cl[32];
        size_t want = find_header(head, "Content-Length", cl, sizeof(cl)) ? strtoul(cl, NULL, 10)
                                                                          : MAX_ERROR_BODY;
        if (want > MAX_ERROR_BODY)
                want = MAX_ERROR_BODY;
        char *b = malloc(want + 1);
        if (!b) {
                fprintf(stderr, "paddock: paddockd answered HTTP %ld\n", status);
                return;
        }
        size_t len = body_len < want ? body_len : want;
        memcpy(b, body, len);
        while (len < want) {
                if (transport_wait(conn, POLLIN, 5000) <= 0)
                        break;
                ssize_t n = transport_read(conn, b + len, want - len, true);
                if (n == -EAGAIN)
                        continue;
                if (n <= 0)
                        break;
                len += (size_t)n;
        }
        b[len] = 0;
        json_t *j = json_loadb(b, len, 0, NULL);
        const char *msg =
            json_string_value(json_object_get(json_object_get(j, "error"), "message"));
        if (msg)
                fprintf(stderr, "paddock: %.*s\n", (int)strcspn(msg, "\r\n"), msg);
        else
                fprintf(stderr, "paddock: paddockd answered HTTP %ld\n", status);
        json_decref(j);
        free(b);
}

int wsc_open(struct client *client, const char *path,
             const struct wslay_event_callbacks *callbacks, void *user, struct wsc *ret)
{
        struct wsc w = {.conn.fd = -EBADF};
        _cleanup_free_ char *buf = NULL;
        char key[WS_KEY_LEN + 1], accept[WS_ACCEPT_LEN + 1];
        if (ws_key_new(key) < 0) {
                fprintf(stderr, "paddock: no randomness for the WebSocket key\n");
                return -1;
        }
        ws_accept_for(key, accept);
        if (client_connect(client, &w.conn) < 0)
                return -1;
        _cleanup_free_ char *common = client_headers(client);
        char *req = NULL;
        if (!common || asprintf(&req,
                                "GET %s HTTP/1.1\r\n%sUser-Agent: paddock-cli\r\n"
                                "Upgrade: websocket\r\nConnection: Upgrade\r\n"
                                "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n",
                                path, common, key) < 0) {
                fprintf(stderr, "paddock: out of memory\n");
                goto fail;
        }
        int r = transport_write_all(&w.conn, req, strlen(req));
        free(req);
        if (r < 0) {
                fprintf(stderr, "paddock: request to paddockd failed: %s\n", strerror(-r));
                goto fail;
        }
        buf = malloc(MAX_RESPONSE_HEAD);
        if (!buf) {
                fprintf(stderr, "paddock: out of memory\n");
                goto fail;
        }
        size_t head_len = 0;
        ssize_t len = read_head(&w.conn, buf, MAX_RESPONSE_HEAD, &head_len);
        if (len < 0) {
                fprintf(stderr, "paddock: request to paddockd failed: %s\n",
                        len == -E2BIG ? "response head too large" : strerror((int)-len));
                goto fail;
        }
        if (strncmp(buf, "HTTP/1.1 101", 12) != 0) {
                if (strncmp(buf, "HTTP/1.", 7) == 0 && head_len > 12) {
                        buf[head_len - 2] = 0;
                        print_refusal(&w.conn, buf, buf + head_len, (size_t)len - head_len);
                } else {
                        fprintf(stderr, "paddock: paddockd did not answer in HTTP\n");
                }
                goto fail;
        }
        char got[64] = "";
        buf[head_len - 2] = 0;
        if (!find_header(buf, "Sec-WebSocket-Accept", got, sizeof(got)) || strcmp(got, accept)) {
                fprintf(stderr, "paddock: paddockd answered the WebSocket handshake wrongly\n");
                goto fail;
        }
        /* The daemon's first frames may have come with the head. */
        if (transport_unread(&w.conn, buf + head_len, (size_t)len - head_len) < 0) {
                fprintf(stderr, "paddock: out of memory\n");
                goto fail;
        }
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

#include "cli/wsclient.h"
#include "cli/client.h"
#include "lib/websocket.h"
#include "lib/util.h"

#include <poll.h>
#include <strings.h>
#include <sys/socket.h>

#define MAX_RESPONSE_HEAD    (16u << 10)
#define MAX_ERROR_BODY       (64u << 10)
#define HANDSHAKE_TIMEOUT_MS 60000

/* wslay hands our callbacks the user pointer of the session; the socket is found through a
 * per-process pointer, since there is only ever one connection in the CLI. The socket side is
 * lib/websocket.c's, as in paddockd; unlike paddockd we never stop reading for backpressure:
 * tty_session.c polls the socket and stops taking keys itself while output is queued. */
static struct wsc *the_conn;

static ssize_t on_recv(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, int flags, void *user)
{
        return ws_io_recv(&the_conn->io, ctx, buf, len);
}

static ssize_t on_send(wslay_event_context_ptr ctx, const uint8_t *data, size_t len, int flags,
                       void *user)
{
        return ws_io_send(&the_conn->io, ctx, data, len, flags);
}

/* Read until the end of the response head (or the connection's end); blocking with a timeout. */
static ssize_t read_head(int fd, char *buf, size_t cap, size_t *ret_head_len)
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
                struct pollfd p = {.fd = fd, .events = POLLIN};
                int r = poll(&p, 1, HANDSHAKE_TIMEOUT_MS);
                if (r == 0)
                        return -ETIMEDOUT;
                if (r < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                ssize_t n = recv(fd, buf + len, cap - 1 - len, 0);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
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
static void print_refusal(int fd, const char *head, const char *body, size_t body_len)
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
                struct pollfd p = {.fd = fd, .events = POLLIN};
                if (poll(&p, 1, 5000) <= 0)
                        break;
                ssize_t n = recv(fd, b + len, want - len, 0);
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

int wsc_open(const char *socket_path, const char *path,
             const struct wslay_event_callbacks *callbacks, void *user, struct wsc *ret)
{
        _cleanup_close_ int fd = client_connect(socket_path);
        if (fd == -ENAMETOOLONG) {
                fprintf(stderr, "paddock: socket path too long: %s\n", socket_path);
                return -1;
        }
        if (fd < 0) {
                fprintf(stderr, "paddock: cannot connect to paddockd at %s: %s\n", socket_path,
                        strerror(-fd));
                return -1;
        }
        char key[WS_KEY_LEN + 1], accept[WS_ACCEPT_LEN + 1];
        if (ws_key_new(key) < 0) {
                fprintf(stderr, "paddock: no randomness for the WebSocket key\n");
                return -1;
        }
        ws_accept_for(key, accept);
        char *req = NULL;
        if (asprintf(&req,
                     "GET %s HTTP/1.1\r\nHost: localhost\r\nUser-Agent: paddock-cli\r\n"
                     "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: %s\r\n"
                     "Sec-WebSocket-Version: 13\r\n%s\r\n",
                     path, key, client_auth_header()) < 0) {
                fprintf(stderr, "paddock: out of memory\n");
                return -1;
        }
        int r = write_all(fd, req, strlen(req));
        free(req);
        if (r < 0) {
                fprintf(stderr, "paddock: request to paddockd at %s failed: %s\n", socket_path,
                        strerror(-r));
                return -1;
        }
        char *buf = malloc(MAX_RESPONSE_HEAD);
        if (!buf) {
                fprintf(stderr, "paddock: out of memory\n");
                return -1;
        }
        size_t head_len = 0;
        ssize_t len = read_head(fd, buf, MAX_RESPONSE_HEAD, &head_len);
        if (len < 0) {
                fprintf(stderr, "paddock: request to paddockd at %s failed: %s\n", socket_path,
                        len == -E2BIG ? "response head too large" : strerror((int)-len));
                free(buf);
                return -1;
        }
        if (strncmp(buf, "HTTP/1.1 101", 12) != 0) {
                if (strncmp(buf, "HTTP/1.", 7) == 0 && head_len > 12) {
                        buf[head_len - 2] = 0;
                        print_refusal(fd, buf, buf + head_len, (size_t)len - head_len);
                } else {
                        fprintf(stderr, "paddock: paddockd did not answer in HTTP\n");
                }
                free(buf);
                return -1;
        }
        char got[64] = "";
        buf[head_len - 2] = 0;
        if (!find_header(buf, "Sec-WebSocket-Accept", got, sizeof(got)) || strcmp(got, accept)) {
                fprintf(stderr, "paddock: paddockd answered the WebSocket handshake wrongly\n");
                free(buf);
                return -1;
        }
        struct wsc w = {};
        r = ws_io_init(&w.io, fd, buf + head_len, (size_t)len - head_len);
        free(buf);
        if (r < 0) {
                fprintf(stderr, "paddock: out of memory\n");
                return -1;
        }
        struct wslay_event_callbacks cb = *callbacks;
        cb.recv_callback = on_recv;
        cb.send_callback = on_send;
        cb.genmask_callback = ws_genmask;
        if (wslay_event_context_client_init(&w.ctx, &cb, user) != 0) {
                ws_io_done(&w.io);
                fprintf(stderr, "paddock: out of memory\n");
                return -1;
        }
        wslay_event_config_set_max_recv_msg_length(w.ctx, 16u << 20);
        w.io.fd = TAKE_FD(fd);
        *ret = w;
        the_conn = ret;
        return 0;
}

void wsc_close(struct wsc *w)
{
        if (w->ctx)
                wslay_event_context_free(w->ctx);
        w->ctx = NULL;
        if (w->io.fd >= 0)
                close(w->io.fd);
        w->io.fd = -EBADF;
        ws_io_done(&w->io);
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

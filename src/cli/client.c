#include "cli/client.h"
#include "lib/http1.h"
#include "cli/transport.h"
#include "lib/strbuf.h"
#include "lib/util.h"

#include <signal.h>

/* A buffered response larger than this is not something paddockd sends; refuse to hoard it. */
#define MAX_BUFFERED_BODY (64u << 20)
/* One read from the socket, and one piece of a streamed upload. */
#define IO_SIZE (64u << 10)
/* Room before an upload piece for its chunk-size line ("ffffffffffffffff\r\n"). */
#define CHUNK_HEAD_ROOM 18

struct transfer {
        const struct request *req;
        struct response *resp;
        size_t body_cap;
        struct http1 parser;
        bool aborted; /* a sink or source stopped the transfer and has said why */
        bool too_large;
};

int client_open(struct client *c, const char *socket_path)
{
        *c = (struct client){.socket_path = socket_path};
        return 0;
}

void client_close(struct client *c)
{
        c->socket_path = NULL;
}

/* As RFC 3986 wants for a path segment or query value: all but the unreserved characters as
 * %XX (upper-case hex), bytes >= 0x80 included. */
char *client_escape(struct client *c, const char *s)
{
        static const char hex[] = "0123456789ABCDEF";
        size_t len = strlen(s);
        char *out = malloc(len * 3 + 1), *o = out;
        if (!out)
                return NULL;
        for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
                if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                    (*p >= '0' && *p <= '9') || *p == '-' || *p == '.' || *p == '_' || *p == '~') {
                        *o++ = (char)*p;
                } else {
                        *o++ = '%';
                        *o++ = hex[*p >> 4];
                        *o++ = hex[*p & 15];
                }
        }
        *o = 0;
        return out;
}

void response_done(struct response *r)
{
        free(r->body);
        if (r->json)
                json_decref(r->json);
        memset(r, 0, sizeof(*r));
}

/* The daemon as messages name it. */
static const char *client_name(const struct client *c)
{
        static char buf[320];
        return c->remote ? endpoint_name(c->remote, buf, sizeof(buf)) : c->socket_path;
}

static bool status_ok(long status)
{
        return status >= 200 && status < 300;
}

static int buffer_append(struct transfer *t, const char *data, size_t len)
{
        struct response *r = t->resp;
        if (r->len + len > MAX_BUFFERED_BODY) {
                t->too_large = true;
                return -EFBIG;
        }
        /* The response keeps the bytes; the transfer, how much room they have. */
        struct strbuf b = {.data = r->body, .len = r->len, .cap = t->body_cap};
        if (strbuf_add(&b, data, len) < 0)
                return -ENOMEM;
        r->body = b.data;
        r->len = b.len;
        t->body_cap = b.cap;
        return 0;
}

static int take_body(const char *data, size_t len, void *userdata)
{
        struct transfer *t = userdata;
        /* Error responses are always buffered, so they can be printed as one message. */
        if (t->req->sink && status_ok(t->parser.status)) {
                if (!t->req->sink(data, len, t->req->sink_data)) {
                        t->aborted = true;
                        return -ECANCELED;
                }
                return 0;
        }
        return buffer_append(t, data, len);
}

int client_connect(const struct client *c, struct transport *ret)
{
        struct endpoint local;
        const struct endpoint *ep = c->remote;
        if (!ep) {
                endpoint_unix(c->socket_path, &local);
                ep = &local;
        }
        return transport_open(ep, ret);
}

char *client_headers(const struct client *c)
{
        char *h = NULL;
        if (asprintf(&h, "Host: %s\r\n%s%s%s", c->remote ? c->remote->authority : "localhost",
                     c->token ? "Authorization: Bearer " : "", c->token ? c->token : "",
                     c->token ? "\r\n" : "") < 0)
                return NULL;
        return h;
}

/* Request line and headers, the way libcurl sent them before: a JSON body is
 * application/json unless said otherwise, a POST without a body has Content-Length: 0. */
static char *request_head(const struct client *c, const struct request *req)
{
        const char *ct = req->content_type;
        char framing[64] = "";
        int r = 0;
        if (req->source && req->source_size >= 0)
                r = BUF_PRINTF(framing, "Content-Length: %lld\r\n", (long long)req->source_size);
        else if (req->source)
                r = BUF_PRINTF(framing, "Transfer-Encoding: chunked\r\n");
        else if (req->body || strcmp(req->method, "POST") == 0)
                r = BUF_PRINTF(framing, "Content-Length: %zu\r\n", req->body ? req->body_len : 0);
        if (r < 0)
                return NULL;
        if (req->body && !req->source && !ct)
                ct = "application/json";
        _cleanup_free_ char *common = client_headers(c);
        char *head;
        if (!common || asprintf(&head,
                                "%s %s HTTP/1.1\r\n%sUser-Agent: paddock-cli\r\n"
                                "Accept: */*\r\n%s%s%s%s\r\n",
                                req->method, req->path, common, ct && *ct ? "Content-Type: " : "",
                                ct && *ct ? ct : "", ct && *ct ? "\r\n" : "", framing) < 0)
                return NULL;
        return head;
}

/* Nothing in a request line may end it early or smuggle in a header. */
static bool request_line_ok(const struct request *req)
{
        for (const char *s = req->method; *s; s++)
                if (*s < 'A' || *s > 'Z')
                        return false;
        for (const unsigned char *s = (const unsigned char *)req->path; *s; s++)
                if (*s <= ' ' || *s == 0x7f)
                        return false;
        return req->method[0] && req->path[0] == '/';
}

/* A streamed body: source_size bytes as they are, or chunked. -ECANCELED when the source
 * stopped (and said why), -ENODATA when it ended before the announced size. */
static int send_source(struct transport *conn, struct transfer *t)
{
        const struct request *req = t->req;
        bool chunked = req->source_size < 0;
        uint64_t left = chunked ? 0 : (uint64_t)req->source_size;
        _cleanup_free_ char *buf = malloc(CHUNK_HEAD_ROOM + IO_SIZE + 2);
        if (!buf)
                return -ENOMEM;
        char *data = buf + CHUNK_HEAD_ROOM;
        for (;;) {
                size_t want = IO_SIZE;
                if (!chunked) {
                        if (left == 0)
                                return 0;
                        if (left < want)
                                want = (size_t)left;
                }
                ssize_t n = req->source(data, want, req->source_data);
                if (n < 0 || (size_t)n > want) {
                        t->aborted = true;
                        return -ECANCELED;
                }
                if (n == 0)
                        return chunked ? transport_write_all(conn, "0\r\n\r\n", 5) : -ENODATA;
                if (!chunked) {
                        left -= (uint64_t)n;
                        int r = transport_write_all(conn, data, (size_t)n);
                        if (r < 0)
                                return r;
                        continue;
                }
                char size[CHUNK_HEAD_ROOM + 1];
                int k = BUF_PRINTF(size, "%zx\r\n", (size_t)n);
                if (k < 0)
                        return k;
                memcpy(data - k, size, (size_t)k);
                memcpy(data + n, "\r\n", 2);
                int r = transport_write_all(conn, data - k, (size_t)k + (size_t)n + 2);
                if (r < 0)
                        return r;
        }
}

static int send_request(struct client *c, struct transport *conn, struct transfer *t)
{
        const struct request *req = t->req;
        _cleanup_free_ char *head = request_head(c, req);
        if (!head)
                return -ENOMEM;
        size_t head_len = strlen(head);
        size_t body_len = req->body && !req->source ? req->body_len : 0;
        /* A small body goes out in the same write as the head: one segment, so paddockd reads
         * the whole request in one turn of its loop instead of waking again for the body. */
        if (body_len > 0 && body_len <= IO_SIZE) {
                _cleanup_free_ char *all = malloc(head_len + body_len);
                if (!all)
                        return -ENOMEM;
                memcpy(all, head, head_len);
                memcpy(all + head_len, req->body, body_len);
                return transport_write_all(conn, all, head_len + body_len);
        }
        int r = transport_write_all(conn, head, head_len);
        if (r < 0)
                return r;
        if (req->source)
                return send_source(conn, t);
        if (body_len > 0)
                return transport_write_all(conn, req->body, body_len);
        return 0;
}

static int read_response(struct transport *conn, struct transfer *t)
{
        _cleanup_free_ char *buf = malloc(IO_SIZE);
        if (!buf)
                return -ENOMEM;
        while (!http1_complete(&t->parser)) {
                ssize_t n = transport_read(conn, buf, IO_SIZE, false);
                /* A reset after the daemon's answer came in is its end; but a body that runs
                 * until the connection closes is cut short by a reset (or a TLS stream ended
                 * without close_notify), not complete. */
                if (n == -ECONNRESET && t->parser.state == HTTP1_BODY_CLOSE)
                        return -ECONNRESET;
                if (n == 0 || n == -ECONNRESET)
                        return http1_eof(&t->parser);
                if (n < 0)
                        return (int)n;
                int r = http1_feed(&t->parser, buf, (size_t)n, take_body, t);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* One request on a connection of its own: connecting to a unix socket costs microseconds,
 * and a fresh connection can never be one the daemon is just closing as idle. */
static int transfer(struct client *c, struct transfer *t, struct transport *conn)
{
        if (client_connect(c, conn) < 0)
                return -1;
        int r = send_request(c, conn, t);
        if (t->aborted)
                return -1;
        const char *why = NULL;
        if (r == -ENODATA)
                why = "the request body ended before its announced size";
        else if (r < 0 && r != -EPIPE && r != -ECONNRESET)
                why = strerror(-r);
        if (!why) {
                /* Also after a failed send: paddockd may have refused the request before
                 * reading all of it, and said why. */
                int sent = r;
                r = read_response(conn, t);
                if (t->aborted)
                        return -1;
                if (t->too_large) {
                        fprintf(stderr, "paddock: response from paddockd is larger than %u MiB\n",
                                MAX_BUFFERED_BODY >> 20);
                        return -1;
                }
                if (r < 0 && sent < 0)
                        why = strerror(-sent);
                else if (r == -EPROTO || r == -E2BIG)
                        why = t->parser.why;
                else if (r < 0)
                        why = strerror(-r);
        }
        if (why) {
                fprintf(stderr, "paddock: request to paddockd at %s failed: %s\n",
                        client_name(c), why);
                return -1;
        }
        return 0;
}

int client_perform(struct client *c, const struct request *req, struct response *ret)
{
        struct response resp = {};
        struct transfer t = {.req = req, .resp = &resp};
        if (!request_line_ok(req)) {
                fprintf(stderr, "paddock: request to paddockd at %s failed: bad request path\n",
                        client_name(c));
                return -1;
        }
        http1_init(&t.parser);
        t.parser.head_request = strcmp(req->method, "HEAD") == 0;
        /* Sinks write to pipes whose reader may be gone: they want EPIPE, not death (libcurl
         * did the same around each transfer). */
        struct sigaction ignore = {.sa_handler = SIG_IGN}, saved;
        bool restore = sigaction(SIGPIPE, &ignore, &saved) == 0;
        struct transport conn = {.fd = -EBADF};
        int r = transfer(c, &t, &conn);
        transport_close(&conn);
        if (restore)
                sigaction(SIGPIPE, &saved, NULL);
        if (r == 0) {
                resp.status = t.parser.status;
                if (resp.body)
                        resp.json = json_loadb(resp.body, resp.len, 0, NULL);
                *ret = resp;
        } else {
                response_done(&resp);
        }
        http1_done(&t.parser);
        return r;
}

void client_print_error(const struct response *r)
{
        json_t *err = r->json ? json_object_get(r->json, "error") : NULL;
        const char *msg = json_string_value(json_object_get(err, "message"));
        if (!msg && json_is_string(err))
                msg = json_string_value(err);
        if (msg && *msg) {
                /* One line, whatever the daemon sent. */
                int n = (int)strcspn(msg, "\r\n");
                fprintf(stderr, "paddock: %.*s\n", n, msg);
                return;
        }
        const char *body = r->body ? r->body : "";
        int n = (int)strcspn(body, "\r\n");
        if (n > 200)
                n = 200;
        if (n > 0)
                fprintf(stderr, "paddock: paddockd answered HTTP %ld: %.*s\n", r->status, n, body);
        else
                fprintf(stderr, "paddock: paddockd answered HTTP %ld\n", r->status);
}

int client_call(struct client *c, const char *method, const char *path, const json_t *body,
                struct response *ret)
{
        char *text = NULL;
        if (body) {
                text = json_dumps(body, JSON_COMPACT);
                if (!text) {
                        fprintf(stderr, "paddock: out of memory\n");
                        return -1;
                }
        }
        struct request req = {
            .method = method,
            .path = path,
            .body = text,
            .body_len = text ? strlen(text) : 0,
        };
        struct response resp = {};
        int r = client_perform(c, &req, &resp);
        free(text);
        if (r < 0)
                return -1;
        if (!status_ok(resp.status)) {
                client_print_error(&resp);
                response_done(&resp);
                return -1;
        }
        *ret = resp;
        return 0;
}

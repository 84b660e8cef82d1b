/* paddock mcp --http ADDRESS:PORT: MCP's streamable HTTP transport, the stateless subset.
 *
 * One endpoint, /mcp. A POST carries one JSON-RPC message: a request is answered with
 * application/json (one response, no event stream), a notification or a response with 202 and
 * no body. GET (a server-initiated event stream) and DELETE (ending a session) are 405: the
 * server sends nothing unasked and keeps no sessions, so there is no Mcp-Session-Id.
 *
 * Who the caller is stays paddockd's business: every POST must carry Authorization: Bearer,
 * and that token (not the CLI's own) goes with each API request the call makes, so the
 * daemon's tokens, quotas and ownership apply as they do to any client. Without that rule
 * anyone who can reach the port would act as whoever started `paddock mcp` (root, often).
 *
 * Listening is on loopback only (the token travels in clear text; remote agents reach the
 * daemon's TLS gateway instead), and a request whose Origin is not a loopback one is refused
 * (a web page's fetch must not reach it: DNS rebinding). One connection at a time, one request
 * per connection (Connection: close): a tool call is a blocking request to the daemon anyway.
 * A client that stalls is cut off after IO_TIMEOUT_S. */
#include "cli/mcp_server.h"
#include "lib/jsonutil.h"
#include "lib/util.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>

#define HEAD_MAX     (64u << 10)
#define BODY_MAX     (16u << 20)
#define IO_TIMEOUT_S 30

struct http_req {
        char *head; /* request line and headers, NUL-terminated, lines split in place */
        size_t head_len;
        char *body;
        size_t body_len;
        const char *method, *target;
        const char *authorization, *origin, *version, *content_type;
        const char *content_length, *transfer_encoding;
};

static void http_req_done(struct http_req *q)
{
        free(q->head);
        free(q->body);
}

static int send_reply(int fd, int status, const char *reason, const char *extra_headers,
                      const char *ct, const char *body)
{
        size_t len = body ? strlen(body) : 0;
        _cleanup_free_ char *head = NULL;
        if (asprintf(&head,
                     "HTTP/1.1 %d %s\r\n%s%s%s%sContent-Length: %zu\r\n"
                     "Cache-Control: no-store\r\nConnection: close\r\n\r\n",
                     status, reason, extra_headers ? extra_headers : "", ct ? "Content-Type: " : "",
                     ct ? ct : "", ct ? "\r\n" : "", len) < 0)
                return -ENOMEM;
        int r = write_all(fd, head, strlen(head));
        if (r >= 0 && len)
                r = write_all(fd, body, len);
        return r;
}

static int send_json(int fd, int status, const char *reason, const json_t *msg)
{
        _cleanup_free_ char *text = json_dumps(msg, JSON_COMPACT);
        if (!text)
                return send_reply(fd, 500, "Internal Server Error", NULL, NULL, NULL);
        return send_reply(fd, status, reason, NULL, "application/json", text);
}

/* A JSON-RPC error without id as the body of an HTTP error. */
static int send_error(int fd, int status, const char *reason, const char *extra, const char *msg)
{
        _cleanup_json_ json_t *e = mcp_error(NULL, MCP_INVALID_REQUEST, msg);
        _cleanup_free_ char *text = e ? json_dumps(e, JSON_COMPACT) : NULL;
        return send_reply(fd, status, reason, extra, text ? "application/json" : NULL, text);
}

/* Read the head (up to the blank line) and the body (Content-Length). 0, or the HTTP status to
 * refuse the request with, or -errno when the connection failed. */
static int read_request(int fd, struct http_req *q)
{
        q->head = malloc(HEAD_MAX + 1);
        if (!q->head)
                return -ENOMEM;
        size_t got = 0;
        char *end = NULL;
        while (!end) {
                if (got == HEAD_MAX)
                        return 431;
                ssize_t n = read(fd, q->head + got, HEAD_MAX - got);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        return n < 0 ? -errno : -ECONNRESET;
                got += (size_t)n;
                q->head[got] = 0;
                end = strstr(q->head, "\r\n\r\n");
        }
        size_t head_len = (size_t)(end - q->head) + 4;
        size_t early = got - head_len; /* body bytes that came with the head */
        *end = 0;
        q->head_len = head_len;

        /* Request line: METHOD SP TARGET SP HTTP/1.x */
        char *line_end = strstr(q->head, "\r\n");
        char *headers = line_end ? line_end + 2 : end;
        if (line_end)
                *line_end = 0;
        char *sp1 = strchr(q->head, ' ');
        char *sp2 = sp1 ? strchr(sp1 + 1, ' ') : NULL;
        if (!sp1 || !sp2 || strncmp(sp2 + 1, "HTTP/1.", 7) != 0)
                return 400;
        *sp1 = *sp2 = 0;
        q->method = q->head;
        q->target = sp1 + 1;
        for (char *h = headers; h && h < end && *h;) {
                char *next = strstr(h, "\r\n");
                if (next)
                        *next = 0;
                char *colon = strchr(h, ':');
                if (!colon)
                        return 400;
                *colon = 0;
                char *v = colon + 1;
                while (*v == ' ' || *v == '\t')
                        v++;
                for (char *t = v + strlen(v); t > v && (t[-1] == ' ' || t[-1] == '\t');)
                        *--t = 0;
                static const struct {
                        const char *name;
                        size_t off;
                } known[] = {
                    {"authorization", offsetof(struct http_req, authorization)},
                    {"origin", offsetof(struct http_req, origin)},
                    {"mcp-protocol-version", offsetof(struct http_req, version)},
                    {"content-type", offsetof(struct http_req, content_type)},
                    {"content-length", offsetof(struct http_req, content_length)},
                    {"transfer-encoding", offsetof(struct http_req, transfer_encoding)},
                };
                for (size_t i = 0; i < ELEMENTSOF(known); i++)
                        if (strcasecmp(h, known[i].name) == 0)
                                *(const char **)((char *)q + known[i].off) = v;
                h = next ? next + 2 : NULL;
        }
        if (q->transfer_encoding)
                return 501; /* chunked uploads: clients send a Content-Length for one message */
        if (strcmp(q->method, "POST") != 0)
                return 0;
        if (!q->content_length)
                return 411;
        char *e;
        errno = 0;
        unsigned long long len = strtoull(q->content_length, &e, 10);
        if (errno || *e || e == q->content_length || q->content_length[0] == '-')
                return 400;
        if (len > BODY_MAX)
                return 413;
        if (early > len)
                return 400; /* pipelining: not with Connection: close */
        q->body = malloc(len + 1);
        if (!q->body)
                return -ENOMEM;
        memcpy(q->body, end + 4, early);
        if (len > early) {
                ssize_t n = read_full(fd, q->body + early, len - early);
                if (n < 0)
                        return (int)n;
                if ((size_t)n != len - early)
                        return -ECONNRESET;
        }
        q->body[len] = 0;
        q->body_len = len;
        return 0;
}

/* http(s)://127.0.0.1[:port], localhost or [::1]: what a local client's page could be. */
static bool origin_ok(const char *origin)
{
        const char *host = strstr(origin, "://");
        if (!host)
                return false; /* "null" (a sandboxed page, a file) included */
        host += 3;
        static const char *const loopback[] = {"127.0.0.1", "localhost", "[::1]"};
        for (size_t i = 0; i < ELEMENTSOF(loopback); i++) {
                size_t n = strlen(loopback[i]);
                if (strncmp(host, loopback[i], n) == 0 && (host[n] == 0 || host[n] == ':'))
                        return true;
        }
        return false;
}

static const char *status_reason(int status)
{
        switch (status) {
        case 400:
                return "Bad Request";
        case 411:
                return "Length Required";
        case 413:
                return "Content Too Large";
        case 431:
                return "Request Header Fields Too Large";
        case 501:
                return "Not Implemented";
        default:
                return "Error";
        }
}

/* One JSON-RPC message of an accepted POST, its calls made as the caller's token. */
static void answer(const struct client *client, int fd, const struct http_req *q, const char *token)
{
        struct client as_caller = *client;
        as_caller.token = token;
        struct mcp_server per_request = {.backend = mcp_client_backend(&as_caller)};
        _cleanup_json_ json_t *msg = json_loadb(q->body, q->body_len, 0, NULL);
        _cleanup_json_ json_t *reply = mcp_server_handle(&per_request, q->body, q->body_len);
        if (!reply) {
                send_reply(fd, 202, "Accepted", NULL, NULL, NULL);
                return;
        }
        /* A message we could not take (bad JSON, not a request) is also an HTTP error. */
        bool refused = !mcp_is_request(msg) && json_object_get(reply, "error");
        send_json(fd, refused ? 400 : 200, refused ? "Bad Request" : "OK", reply);
}

static void serve_connection(struct client *client, int fd)
{
        struct http_req q = {};
        int r = read_request(fd, &q);
        if (r < 0)
                goto out;
        if (r > 0) {
                send_error(fd, r, status_reason(r), NULL, "malformed HTTP request");
                goto out;
        }
        size_t path_len = strcspn(q.target, "?");
        if (path_len != 4 || strncmp(q.target, "/mcp", 4) != 0) {
                send_error(fd, 404, "Not Found", NULL, "no such endpoint: use /mcp");
                goto out;
        }
        if (q.origin && !origin_ok(q.origin)) {
                send_error(fd, 403, "Forbidden", NULL, "Origin not allowed");
                goto out;
        }
        if (strcmp(q.method, "POST") != 0) {
                send_error(fd, 405, "Method Not Allowed", "Allow: POST\r\n",
                           "only POST: this server sends no event streams and keeps no sessions");
                goto out;
        }
        const char *token = NULL;
        if (q.authorization && strncasecmp(q.authorization, "Bearer ", 7) == 0)
                token = q.authorization + 7;
        while (token && *token == ' ')
                token++;
        if (!token || !*token) {
                send_error(fd, 401, "Unauthorized", "WWW-Authenticate: Bearer\r\n",
                           "an API token is required: Authorization: Bearer <token>");
                goto out;
        }
        if (q.version && !mcp_version_known(q.version)) {
                send_error(fd, 400, "Bad Request", NULL, "unsupported MCP-Protocol-Version");
                goto out;
        }
        answer(client, fd, &q, token);
out:
        http_req_done(&q);
}

/* ADDRESS:PORT or [V6]:PORT, loopback only. */
static int listen_on(const char *address)
{
        char host[256];
        const char *colon = strrchr(address, ':');
        if (!colon || (size_t)(colon - address) >= sizeof(host) || !colon[1]) {
                fprintf(stderr, "paddock mcp: --http wants ADDRESS:PORT, e.g. 127.0.0.1:8765\n");
                return -1;
        }
        memcpy(host, address, (size_t)(colon - address));
        host[colon - address] = 0;
        if (host[0] == '[' && host[strlen(host) - 1] == ']') {
                memmove(host, host + 1, strlen(host) - 2);
                host[strlen(host) - 2] = 0;
        }
        struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV}, *ai;
        int r = getaddrinfo(host, colon + 1, &hints, &ai);
        if (r != 0) {
                fprintf(stderr, "paddock mcp: --http %s: %s\n", address, gai_strerror(r));
                return -1;
        }
        int fd = -1;
        for (struct addrinfo *a = ai; a; a = a->ai_next) {
                bool loop =
                    (a->ai_family == AF_INET &&
                     (ntohl(((struct sockaddr_in *)a->ai_addr)->sin_addr.s_addr) >> 24) == 127) ||
                    (a->ai_family == AF_INET6 &&
                     IN6_IS_ADDR_LOOPBACK(&((struct sockaddr_in6 *)a->ai_addr)->sin6_addr));
                if (!loop) {
                        fprintf(stderr,
                                "paddock mcp: --http %s: not a loopback address (tokens "
                                "would travel in clear text; remote agents use paddockd's "
                                "TLS listener)\n",
                                address);
                        break;
                }
                fd = socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
                int one = 1;
                if (fd >= 0 && setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) == 0 &&
                    bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, 16) == 0)
                        break;
                fprintf(stderr, "paddock mcp: --http %s: %s\n", address, strerror(errno));
                if (fd >= 0)
                        close(fd);
                fd = -1;
        }
        freeaddrinfo(ai);
        return fd;
}

int mcp_serve_http(struct client *client, const char *address)
{
        _cleanup_close_ int lfd = listen_on(address);
        if (lfd < 0)
                return -1;
        struct sockaddr_storage sa;
        socklen_t sl = sizeof(sa);
        char name[INET6_ADDRSTRLEN] = "?";
        int port = 0;
        if (getsockname(lfd, (struct sockaddr *)&sa, &sl) == 0) {
                if (sa.ss_family == AF_INET6) {
                        struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&sa;
                        inet_ntop(AF_INET6, &a6->sin6_addr, name, sizeof(name));
                        port = ntohs(a6->sin6_port);
                } else {
                        struct sockaddr_in *a4 = (struct sockaddr_in *)&sa;
                        inet_ntop(AF_INET, &a4->sin_addr, name, sizeof(name));
                        port = ntohs(a4->sin_port);
                }
        }
        fprintf(stderr, "paddock mcp: serving MCP at http://%s%s%s:%d/mcp\n",
                sa.ss_family == AF_INET6 ? "[" : "", name, sa.ss_family == AF_INET6 ? "]" : "",
                port);
        for (;;) {
                int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
                if (fd < 0) {
                        if (errno == EINTR || errno == ECONNABORTED)
                                continue;
                        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
                            errno == ENOMEM) {
                                usleep(100000); /* out of something: let it come back */
                                continue;
                        }
                        fprintf(stderr, "paddock mcp: accept: %s\n", strerror(errno));
                        return -1;
                }
                struct timeval tv = {.tv_sec = IO_TIMEOUT_S};
                (void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
                (void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
                serve_connection(client, fd);
                close(fd);
        }
}

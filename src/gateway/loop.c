/* The gateway's event loop: one epoll, everything non-blocking, level-triggered.
 *
 * Each client connection has up to two sockets: the client's (TLS or plain) and, once its
 * first request passed the token check, a socketpair to the engine whose other end went to
 * paddockd over the control socket. Three bounded buffers sit between them:
 *
 *   client --(cin: decrypted bytes)--> parser --(eout: canonical requests)--> engine
 *   client <-------------(cout: the engine's bytes, verbatim)--------------- engine
 *
 * A side is read only while the buffer it fills has room, so a peer that does not drain
 * stops the other side (backpressure) and a connection never holds more than the three
 * buffers. conn_pump() makes every possible step until none is left, then conn_watch() sets
 * the epoll interest to exactly what could make progress.
 *
 * Responses are not parsed. Two consequences: an error the gateway produces itself after
 * requests went to the engine waits until the engine has finished (we half-close the engine
 * socket and send our error after its EOF); and after an Upgrade request the next bytes from
 * the engine are taken as that request's status line (clients may not pipeline behind an
 * Upgrade, RFC 9110 7.8). */
#include "gateway/gateway.h"
#include "gateway/reqparse.h"
#include "gateway/tokens.h"
#include "lib/jsonutil.h"
#include "lib/util.h"

#include <arpa/inet.h>
#include <gnutls/crypto.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>

#define MAX_CONNS        1024
#define MAX_CONNS_PER_IP 64
#define HANDSHAKE_MS     (10 * 1000)
#define HEAD_MS          (10 * 1000)
#define IDLE_MS          (60 * 1000)
/* After a first request the gateway cannot tell a keep-alive pause from a response that pauses
 * (an exec printing nothing for minutes, an event stream, a watch): it does not parse
 * responses. Such a connection may be silent this long. */
#define SERVED_IDLE_MS   (60 * 60 * 1000)
#define LINGER_MS        (2 * 1000)
#define CIN_CAP          (RP_HEAD_MAX + 4096)
#define EOUT_CAP         (32 * 1024)
#define COUT_CAP         (32 * 1024)
#define CONTROL_MAX      (1 << 20)

enum watch_kind { W_LISTEN, W_CONTROL, W_CLIENT, W_ENGINE };

struct conn;

struct watch {
        enum watch_kind kind;
        int fd;
        uint32_t events; /* the current epoll interest */
        bool registered; /* in the epoll set (only while events != 0, see watch_set) */
        struct conn *c;  /* W_CLIENT, W_ENGINE */
        bool tls;        /* W_LISTEN */
};

struct buf {
        char *p;
        size_t off, len, cap;
};

enum conn_state {
        S_HEAD,         /* waiting for (more of) a request head */
        S_BODY,         /* relaying a request body */
        S_UPGRADE_WAIT, /* an Upgrade request went out: client bytes wait for the status line */
        S_BLIND,        /* after 101: bytes both ways, unparsed */
        S_DRAIN,        /* no more requests: relay the engine's rest, then close */
};

struct conn {
        struct conn *prev, *next;
        struct watch wc, we; /* client socket, engine socket (fd -1 until the first request) */
        gnutls_session_t tls;
        bool handshaken;
        enum conn_state state;
        struct buf cin, eout, cout;
        size_t scanned; /* reqparse_head_ready's position */
        struct reqbody body;
        bool keep_alive;      /* after the current body, another request may follow */
        bool client_eof, engine_eof, engine_shut;
        bool close_when_flushed;
        bool forwarded;       /* a request went to the engine and it has not answered since */
        bool served;          /* a request went to the engine at some time */
        char *pending_error;  /* our own response, sent after the engine's EOF */
        size_t pending_error_len;
        char sniff[12];       /* the start of the engine's answer to an Upgrade request */
        size_t sniff_len;
        uint64_t created_ms, head_start_ms, active_ms;
        bool dead;
        bool again;           /* stopped with work left: pump again after this round */
        bool lingering;       /* our side is shut: discarding what the client still sends */
        uint64_t linger_ms;
        bool has_token;
        char token_name[64];
        uint8_t token_hash[TOKEN_HASH_LEN];
        char ip[INET6_ADDRSTRLEN];
        char peer[INET6_ADDRSTRLEN + 10];
};

static struct {
        int epfd;
        struct watch control;
        struct watch listeners[GW_MAX_LISTEN];
        size_t n_listeners;
        gnutls_certificate_credentials_t cred;
        gnutls_priority_t prio;
        struct conn *conns, *dead;
        size_t n_conns, max_conns;
        struct gw_tokens tokens;
        int64_t next_expiry; /* unix s of the earliest token expiry, 0 = none */
        bool any_again;      /* some connection has c->again set */
        char *control_buf;
} gw;

static uint64_t mono_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static int64_t unix_s(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return ts.tv_sec;
}

/* --- buffers ------------------------------------------------------------------------------ */

static int buf_init(struct buf *b, size_t cap)
{
        b->p = malloc(cap);
        b->off = b->len = 0;
        b->cap = cap;
        return b->p ? 0 : -ENOMEM;
}

static char *buf_data(struct buf *b)
{
        return b->p + b->off;
}

/* Contiguous free space at the end, moving the data to the front when that helps. */
static size_t buf_space(struct buf *b)
{
        if (b->off > 0 && b->off + b->len + 4096 > b->cap) {
                memmove(b->p, b->p + b->off, b->len);
                b->off = 0;
        }
        return b->cap - b->off - b->len;
}

static char *buf_tail(struct buf *b)
{
        return b->p + b->off + b->len;
}

static void buf_consume(struct buf *b, size_t n)
{
        b->off += n;
        b->len -= n;
        if (b->len == 0)
                b->off = 0;
}

static bool buf_append(struct buf *b, const char *s, size_t n)
{
        if (buf_space(b) < n)
                return false;
        memcpy(buf_tail(b), s, n);
        b->len += n;
        return true;
}

/* --- epoll -------------------------------------------------------------------------------- */

/* An fd with no interest leaves the epoll set: epoll reports EPOLLHUP and EPOLLERR even for
 * an empty mask, and a closed engine socket waiting for a slow client would spin the loop. */
static int watch_set(struct watch *w, uint32_t events)
{
        if (w->fd < 0 || (w->registered && w->events == events) || (!w->registered && !events))
                return 0;
        struct epoll_event ev = { .events = events, .data.ptr = w };
        int op = !events ? EPOLL_CTL_DEL : w->registered ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;
        if (epoll_ctl(gw.epfd, op, w->fd, &ev) < 0)
                return -errno;
        w->registered = events != 0;
        w->events = events;
        return 0;
}

static int watch_add(struct watch *w, uint32_t events)
{
        w->registered = false;
        return watch_set(w, events);
}

/* --- connections -------------------------------------------------------------------------- */

/* Closing frees nothing yet: later events of the same epoll batch may still point at the
 * connection. conn_reap() frees the closed ones between batches. */
static void conn_close(struct conn *c)
{
        if (c->dead)
                return;
        c->dead = true;
        /* close() drops the fds from the epoll set. */
        if (c->wc.fd >= 0)
                close(c->wc.fd);
        if (c->we.fd >= 0)
                close(c->we.fd);
        c->wc.fd = c->we.fd = -1;
        if (c->prev)
                c->prev->next = c->next;
        else
                gw.conns = c->next;
        if (c->next)
                c->next->prev = c->prev;
        gw.n_conns--;
        c->prev = NULL;
        c->next = gw.dead;
        gw.dead = c;
}

static void conn_reap(void)
{
        while (gw.dead) {
                struct conn *c = gw.dead;
                gw.dead = c->next;
                if (c->tls)
                        gnutls_deinit(c->tls);
                free(c->cin.p);
                free(c->eout.p);
                free(c->cout.p);
                free(c->pending_error);
                free(c);
        }
}

static size_t conns_from(const char *ip)
{
        /* A linear scan: at most MAX_CONNS string compares per accepted connection. */
        size_t n = 0;
        for (struct conn *c = gw.conns; c; c = c->next)
                n += strcmp(c->ip, ip) == 0;
        return n;
}

static void peer_name(const struct sockaddr_storage *ss, char *ip, size_t ip_size, char *peer,
                      size_t peer_size)
{
        if (ss->ss_family == AF_INET6) {
                const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)ss;
                if (IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr)) {
                        inet_ntop(AF_INET, &s6->sin6_addr.s6_addr[12], ip, (socklen_t)ip_size);
                        snprintf(peer, peer_size, "%s:%u", ip, ntohs(s6->sin6_port));
                } else {
                        inet_ntop(AF_INET6, &s6->sin6_addr, ip, (socklen_t)ip_size);
                        snprintf(peer, peer_size, "[%s]:%u", ip, ntohs(s6->sin6_port));
                }
        } else {
                const struct sockaddr_in *s4 = (const struct sockaddr_in *)ss;
                inet_ntop(AF_INET, &s4->sin_addr, ip, (socklen_t)ip_size);
                snprintf(peer, peer_size, "%s:%u", ip, ntohs(s4->sin_port));
        }
}

static int conn_new(int fd, bool tls, const struct sockaddr_storage *ss)
{
        struct conn *c = calloc(1, sizeof(*c));
        if (!c) {
                close(fd);
                return -ENOMEM;
        }
        c->wc = (struct watch){ .kind = W_CLIENT, .fd = fd, .c = c };
        c->we = (struct watch){ .kind = W_ENGINE, .fd = -1, .c = c };
        c->next = gw.conns;
        if (gw.conns)
                gw.conns->prev = c;
        gw.conns = c;
        gw.n_conns++;
        peer_name(ss, c->ip, sizeof(c->ip), c->peer, sizeof(c->peer));
        c->created_ms = c->active_ms = mono_ms();
        c->handshaken = !tls;
        if (buf_init(&c->cin, CIN_CAP) < 0 || buf_init(&c->eout, EOUT_CAP) < 0 ||
            buf_init(&c->cout, COUT_CAP) < 0)
                goto fail;
        if (tls) {
                if (gnutls_init(&c->tls, GNUTLS_SERVER | GNUTLS_NONBLOCK | GNUTLS_NO_SIGNAL) < 0)
                        goto fail;
                if (gnutls_priority_set(c->tls, gw.prio) < 0 ||
                    gnutls_credentials_set(c->tls, GNUTLS_CRD_CERTIFICATE, gw.cred) < 0)
                        goto fail;
                gnutls_transport_set_int(c->tls, fd);
        }
        if (watch_add(&c->wc, EPOLLIN) < 0)
                goto fail;
        return 0;
fail:
        conn_close(c);
        return -ENOMEM;
}

/* --- client I/O (TLS or plain) -------------------------------------------------------------- */

/* > 0 bytes, 0 EOF, -EAGAIN, other -errno fatal. */
static ssize_t client_recv(struct conn *c, char *p, size_t n)
{
        if (!c->tls) {
                ssize_t k = recv(c->wc.fd, p, n, 0);
                if (k < 0)
                        return errno == EINTR ? -EAGAIN : -errno;
                return k;
        }
        ssize_t k = gnutls_record_recv(c->tls, p, n);
        if (k >= 0)
                return k;
        if (k == GNUTLS_E_AGAIN || k == GNUTLS_E_INTERRUPTED)
                return -EAGAIN;
        if (k == GNUTLS_E_PREMATURE_TERMINATION)
                return 0;
        return -EPROTO;
}

static ssize_t client_send(struct conn *c, const char *p, size_t n)
{
        if (!c->tls) {
                ssize_t k = send(c->wc.fd, p, n, MSG_NOSIGNAL);
                if (k < 0)
                        return errno == EINTR ? -EAGAIN : -errno;
                return k;
        }
        /* After GNUTLS_E_AGAIN GnuTLS finishes the record it already encrypted and reports its
         * length; the buffer only grows at the end, so passing its start again is correct. */
        ssize_t k = gnutls_record_send(c->tls, p, n);
        if (k >= 0)
                return k;
        if (k == GNUTLS_E_AGAIN || k == GNUTLS_E_INTERRUPTED)
                return -EAGAIN;
        return -EPIPE;
}

/* --- our own responses ---------------------------------------------------------------------- */

static const char *reason(int status)
{
        switch (status) {
        case 400: return "Bad Request";
        case 401: return "Unauthorized";
        case 414: return "URI Too Long";
        case 429: return "Too Many Requests";
        case 431: return "Request Header Fields Too Large";
        case 503: return "Service Unavailable";
        default: return "Error";
        }
}

/* Ends the connection with an error of ours, in the engine's JSON shape. It goes out after
 * whatever the engine still has to say about earlier requests. */
static void conn_fail(struct conn *c, int status, const char *code, const char *message,
                      const char *extra_headers)
{
        char body[256], *resp = NULL;
        int blen = snprintf(body, sizeof(body), "{\"error\":{\"code\":\"%s\",\"message\":\"%s\"}}\n",
                            code, message);
        int n = asprintf(&resp,
                         "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
                         "%sConnection: close\r\n\r\n%s",
                         status, reason(status), blen, extra_headers ? extra_headers : "", body);
        c->state = S_DRAIN;
        buf_consume(&c->cin, c->cin.len);
        if (n < 0) {
                c->close_when_flushed = true;
                return;
        }
        free(c->pending_error);
        c->pending_error = resp;
        c->pending_error_len = (size_t)n;
        if (c->we.fd >= 0 && !c->engine_shut) {
                shutdown(c->we.fd, SHUT_WR);
                c->engine_shut = true;
        }
}

/* --- the engine connection ------------------------------------------------------------------ */

static int engine_connect(struct conn *c)
{
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
                return -errno;
        char msg[160];
        int n = snprintf(msg, sizeof(msg), "{\"op\":\"connect\",\"peer\":\"%s\"}", c->peer);
        union {
                struct cmsghdr h;
                char b[CMSG_SPACE(sizeof(int))];
        } u = { 0 };
        struct iovec iov = { .iov_base = msg, .iov_len = (size_t)n };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.b,
                             .msg_controllen = sizeof(u.b) };
        struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(cm), &sv[1], sizeof(int));
        ssize_t k = sendmsg(gw.control.fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
        int err = errno;
        close(sv[1]);
        if (k < 0) {
                close(sv[0]);
                return -err;
        }
        /* Our end non-blocking: the socketpair was made without SOCK_NONBLOCK so the engine's
         * end keeps blocking semantics; use MSG_DONTWAIT on every call instead of fcntl. */
        c->we.fd = sv[0]; /* conn_watch() adds it to the epoll set */
        return 0;
}

/* --- requests ------------------------------------------------------------------------------- */

/* The token check, the rate limit, then the head goes out. RP_OK, or conn_fail was called. */
/* E2B's SDKs (docs/e2b.md): a header field's value, or NULL. */
static const struct rp_field *e2b_field(const struct rp_head *h, const char *name)
{
        size_t n = strlen(name);
        for (size_t i = 0; i < h->n_fields; i++)
                if (h->fields[i].name_len == n && !strncasecmp(h->fields[i].name, name, n))
                        return &h->fields[i];
        return NULL;
}

/* envd requests (E2b-Sandbox-Id) carry the sandbox's access token, which only the engine can
 * check; they pass without an API token, through one gateway-wide bucket so that nobody can
 * flood the engine with them: E2B_ENVD_RATE a second, bursts of twice that. */
#define E2B_ENVD_RATE 500.0
static bool e2b_envd_take(void)
{
        static double level = 2 * E2B_ENVD_RATE;
        static uint64_t last;
        uint64_t now = mono_ms();
        level += (double)(now - last) * E2B_ENVD_RATE / 1000.0;
        last = now;
        if (level > 2 * E2B_ENVD_RATE)
                level = 2 * E2B_ENVD_RATE;
        if (level < 1.0)
                return false;
        level -= 1.0;
        return true;
}

static int handle_head(struct conn *c, const struct rp_head *h)
{
        const char *secret;
        size_t secret_len;
        const struct rp_field *key = NULL;
        if (!reqparse_bearer(h, &secret, &secret_len)) {
                /* E2B: X-API-Key is a token like a Bearer one (the engine checks it again). */
                if ((key = e2b_field(h, "x-api-key")) && key->value_len > 0 &&
                    key->value_len <= RP_SECRET_MAX) {
                        secret = key->value;
                        secret_len = key->value_len;
                } else if (e2b_field(h, "e2b-sandbox-id")) {
                        if (!e2b_envd_take()) {
                                conn_fail(c, 429, "rate_limited", "too many sandbox requests",
                                          "Retry-After: 1\r\n");
                                return 429;
                        }
                        goto forward;
                } else {
                        conn_fail(c, 401, "unauthorized", "a bearer token is required",
                                  "WWW-Authenticate: Bearer\r\n");
                        return 401;
                }
        }
        struct gw_token *tok = tokens_find(&gw.tokens, secret, secret_len, unix_s());
        if (!tok) {
                conn_fail(c, 401, "unauthorized", "invalid or expired token",
                          "WWW-Authenticate: Bearer error=\"invalid_token\"\r\n");
                return 401;
        }
        c->has_token = true;
        snprintf(c->token_name, sizeof(c->token_name), "%s", tok->name);
        memcpy(c->token_hash, tok->hash, TOKEN_HASH_LEN);
        unsigned retry;
        if (tokens_take(tok, mono_ms(), &retry) < 0) {
                char hdr[64];
                char msg[160];
                snprintf(hdr, sizeof(hdr), "Retry-After: %u\r\n", retry);
                snprintf(msg, sizeof(msg), "rate limit of token %s exceeded (%g requests/s)",
                         tok->name, tok->rate);
                conn_fail(c, 429, "rate_limited", msg, hdr);
                return 429;
        }
forward:
        if (c->we.fd < 0) {
                int r = engine_connect(c);
                if (r < 0) {
                        gw_log("handing a connection to the engine: %s", strerror(-r));
                        conn_fail(c, 503, "unavailable", "the engine is not accepting connections",
                                  NULL);
                        return 503;
                }
        }
        ssize_t n = reqparse_emit_head(h, c->peer, buf_tail(&c->eout), buf_space(&c->eout));
        if (n < 0) {
                conn_fail(c, 431, "invalid_argument", "request head too large", NULL);
                return 431;
        }
        c->eout.len += (size_t)n;
        c->forwarded = true;
        c->served = true;
        return RP_OK;
}

/* Moves what it can from cin towards the engine. True when something changed. */
static bool process_input(struct conn *c)
{
        switch (c->state) {
        case S_HEAD: {
                if (c->cin.len == 0)
                        return false;
                if (c->head_start_ms == 0)
                        c->head_start_ms = mono_ms();
                if (!reqparse_head_ready(buf_data(&c->cin), c->cin.len, &c->scanned))
                        return false;
                struct rp_head h;
                int r = reqparse_head(buf_data(&c->cin), c->cin.len, &h);
                if (r == RP_MORE)
                        return false;
                if (r != RP_OK) {
                        conn_fail(c, r, "invalid_argument", h.error, NULL);
                        return true;
                }
                /* The canonical head must fit in eout at once; wait for the engine to drain. */
                if (buf_space(&c->eout) < RP_EMIT_MAX(h.head_len) && c->eout.len > 0)
                        return false;
                if (handle_head(c, &h) != RP_OK)
                        return true;
                buf_consume(&c->cin, h.head_len);
                c->scanned = 0;
                c->head_start_ms = 0;
                c->keep_alive = h.keep_alive;
                reqbody_init(&c->body, &h);
                if (h.upgrade) {
                        c->state = S_UPGRADE_WAIT;
                        c->sniff_len = 0;
                } else {
                        c->state = S_BODY;
                }
                return true;
        }
        case S_BODY: {
                if (reqbody_done(&c->body)) {
                        c->state = c->keep_alive ? S_HEAD : S_DRAIN;
                        if (c->state == S_DRAIN)
                                buf_consume(&c->cin, c->cin.len);
                        return true;
                }
                size_t used, made, space = buf_space(&c->eout);
                if (c->cin.len == 0 || space < 32)
                        return false;
                int r = reqbody_feed(&c->body, buf_data(&c->cin), c->cin.len, buf_tail(&c->eout),
                                     space, &used, &made);
                if (r != RP_OK) {
                        /* Part of the body is already with the engine: cut it off. */
                        c->close_when_flushed = true;
                        c->state = S_DRAIN;
                        return true;
                }
                buf_consume(&c->cin, used);
                c->eout.len += made;
                return used > 0 || made > 0 || reqbody_done(&c->body);
        }
        case S_BLIND: {
                size_t n = c->cin.len, space = buf_space(&c->eout);
                if (n > space)
                        n = space;
                if (n == 0)
                        return false;
                buf_append(&c->eout, buf_data(&c->cin), n);
                buf_consume(&c->cin, n);
                return true;
        }
        case S_UPGRADE_WAIT:
        case S_DRAIN:
                return false;
        }
        return false;
}

/* The engine's first bytes after an Upgrade request decide: 101 -> blind relay both ways;
 * anything else -> that response is the last on this connection. */
static void sniff_upgrade(struct conn *c, const char *p, size_t n, bool eof)
{
        size_t take = sizeof(c->sniff) - c->sniff_len;
        if (take > n)
                take = n;
        memcpy(c->sniff + c->sniff_len, p, take);
        c->sniff_len += take;
        if (c->sniff_len < sizeof(c->sniff) && !eof)
                return;
        if (c->sniff_len == sizeof(c->sniff) &&
            (memcmp(c->sniff, "HTTP/1.1 101", 12) == 0 || memcmp(c->sniff, "HTTP/1.0 101", 12) == 0)) {
                c->state = S_BLIND;
                return;
        }
        c->state = S_DRAIN;
        buf_consume(&c->cin, c->cin.len);
        if (!c->engine_shut) {
                shutdown(c->we.fd, SHUT_WR);
                c->engine_shut = true;
        }
}

/* --- the pump ------------------------------------------------------------------------------- */

static bool client_readable_state(const struct conn *c)
{
        return !c->client_eof && c->state != S_DRAIN && !c->close_when_flushed;
}

/* A graceful end: close_notify, then shut our direction and read (and drop) what the client
 * still sends for a moment before closing. Closing with unread bytes would make the kernel
 * send a reset, and a reset can destroy the response the client has not read yet (a 401 to a
 * request whose body we did not read, say). */
static bool conn_linger(struct conn *c)
{
        if (c->tls)
                (void)gnutls_bye(c->tls, GNUTLS_SHUT_WR); /* best effort, non-blocking */
        if (shutdown(c->wc.fd, SHUT_WR) < 0)
                return false;
        if (c->we.fd >= 0) {
                close(c->we.fd); /* also leaves the epoll set */
                c->we.fd = -1;
                c->we.registered = false;
        }
        c->lingering = true;
        c->linger_ms = mono_ms();
        return true;
}

/* Returns false when the connection is gone. */
static bool conn_step(struct conn *c, bool *progress)
{
        uint64_t now = mono_ms();
        if (c->lingering) {
                char junk[4096];
                ssize_t k = recv(c->wc.fd, junk, sizeof(junk), MSG_DONTWAIT);
                if (k == 0 || (k < 0 && errno != EAGAIN && errno != EINTR))
                        return false;
                if (k > 0)
                        *progress = true;
                return true;
        }
        /* client -> cin */
        if (client_readable_state(c) && buf_space(&c->cin) > 0) {
                ssize_t k = client_recv(c, buf_tail(&c->cin), buf_space(&c->cin));
                if (k > 0) {
                        c->cin.len += (size_t)k;
                        c->active_ms = now;
                        *progress = true;
                } else if (k == 0) {
                        c->client_eof = true;
                        *progress = true;
                } else if (k != -EAGAIN) {
                        return false;
                }
        }
        if (process_input(c))
                *progress = true;

        /* eout -> engine */
        if (c->we.fd >= 0 && c->eout.len > 0 && !c->engine_shut) {
                ssize_t k = send(c->we.fd, buf_data(&c->eout), c->eout.len, MSG_DONTWAIT | MSG_NOSIGNAL);
                if (k > 0) {
                        buf_consume(&c->eout, (size_t)k);
                        *progress = true;
                } else if (k < 0 && errno != EAGAIN && errno != EINTR) {
                        return false;
                }
        }
        /* engine -> cout */
        if (c->we.fd >= 0 && !c->engine_eof && buf_space(&c->cout) > 0) {
                size_t space = buf_space(&c->cout);
                ssize_t k = recv(c->we.fd, buf_tail(&c->cout), space, MSG_DONTWAIT);
                if (k > 0) {
                        if (c->state == S_UPGRADE_WAIT)
                                sniff_upgrade(c, buf_tail(&c->cout), (size_t)k, false);
                        c->cout.len += (size_t)k;
                        c->active_ms = now;
                        c->forwarded = false;
                        *progress = true;
                } else if (k == 0 || (errno != EAGAIN && errno != EINTR)) {
                        c->engine_eof = true;
                        if (c->state == S_UPGRADE_WAIT)
                                sniff_upgrade(c, NULL, 0, true);
                        *progress = true;
                }
        }
        /* cout -> client */
        if (c->handshaken && c->cout.len > 0) {
                ssize_t k = client_send(c, buf_data(&c->cout), c->cout.len);
                if (k > 0) {
                        buf_consume(&c->cout, (size_t)k);
                        c->active_ms = now;
                        *progress = true;
                } else if (k != -EAGAIN) {
                        return false;
                }
        }

        /* Ends. */
        if (c->cout.len == 0) {
                if (c->pending_error && (c->we.fd < 0 || c->engine_eof)) {
                        buf_append(&c->cout, c->pending_error, c->pending_error_len);
                        free(c->pending_error);
                        c->pending_error = NULL;
                        c->close_when_flushed = true;
                        *progress = true;
                        return true;
                }
                if ((c->close_when_flushed || c->engine_eof) && !c->pending_error) {
                        *progress = true;
                        return conn_linger(c);
                }
        }
        if (c->client_eof) {
                /* Between requests, or blind: pass the half-close on; the engine answers what
                 * it has and closes. */
                if (c->state == S_BLIND || (c->state == S_HEAD && c->cin.len == 0)) {
                        if (c->we.fd < 0)
                                return false;
                        if (c->eout.len == 0 && !c->engine_shut) {
                                shutdown(c->we.fd, SHUT_WR);
                                c->engine_shut = true;
                                *progress = true;
                        }
                } else if (c->state == S_DRAIN) {
                        /* The engine was told "Connection: close" (or was shut): it ends. */
                        if (c->we.fd < 0 && !c->pending_error)
                                return false;
                } else if (c->state != S_UPGRADE_WAIT) {
                        return false; /* EOF in the middle of a request */
                }
        }
        return true;
}

/* The epoll interest that matches what conn_step could do next. */
static bool conn_watch(struct conn *c)
{
        uint32_t ec = 0, ee = 0;
        if (c->lingering) {
                ec = EPOLLIN;
        } else if (!c->handshaken) {
                ec = gnutls_record_get_direction(c->tls) ? EPOLLOUT : EPOLLIN;
        } else {
                if (client_readable_state(c) && c->cin.cap - c->cin.len > 0)
                        ec |= EPOLLIN;
                if (c->cout.len > 0)
                        ec |= EPOLLOUT;
        }
        if (c->we.fd >= 0) {
                if (!c->engine_eof && c->cout.cap - c->cout.len > 0)
                        ee |= EPOLLIN;
                if (c->eout.len > 0 && !c->engine_shut)
                        ee |= EPOLLOUT;
        }
        return watch_set(&c->wc, ec) >= 0 && watch_set(&c->we, ee) >= 0;
}

static void conn_pump(struct conn *c)
{
        if (!c->handshaken) {
                int r = gnutls_handshake(c->tls);
                if (r == GNUTLS_E_AGAIN || r == GNUTLS_E_INTERRUPTED) {
                        if (!conn_watch(c))
                                conn_close(c);
                        return;
                }
                if (r < 0) {
                        conn_close(c); /* not TLS, or not a TLS we speak */
                        return;
                }
                c->handshaken = true;
        }
        /* At most 64 steps at a time, so one busy connection cannot starve the others; one
         * that could go on is pumped again after this round of events (c->again), because
         * what is left may be invisible to epoll (bytes decrypted inside GnuTLS, or in cin). */
        c->again = false;
        for (int round = 0; round < 64; round++) {
                bool progress = false;
                if (!conn_step(c, &progress)) {
                        conn_close(c);
                        return;
                }
                if (!progress && !(c->tls && !c->lingering &&
                                   gnutls_record_check_pending(c->tls) > 0 &&
                                   buf_space(&c->cin) > 0 && client_readable_state(c)))
                        break;
                if (round == 63)
                        c->again = gw.any_again = true;
        }
        if (!conn_watch(c))
                conn_close(c);
}

/* --- tokens and revocation ------------------------------------------------------------------ */

/* Closes every connection whose last request used a token that is gone, changed or expired:
 * its WebSockets and streams end with it. */
static void revoke_sweep(void)
{
        int64_t now = unix_s();
        size_t closed = 0;
        for (struct conn *c = gw.conns, *next; c; c = next) {
                next = c->next;
                if (c->has_token && !tokens_valid(&gw.tokens, c->token_name, c->token_hash, now)) {
                        conn_close(c);
                        closed++;
                }
        }
        if (closed)
                gw_log("closed %zu connection(s) of revoked or expired tokens", closed);
        gw.next_expiry = tokens_next_expiry(&gw.tokens, now);
}

static int control_read(void)
{
        union {
                struct cmsghdr h;
                char b[CMSG_SPACE(16 * sizeof(int))];
        } u;
        struct iovec iov = { .iov_base = gw.control_buf, .iov_len = CONTROL_MAX };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.b,
                             .msg_controllen = sizeof(u.b) };
        ssize_t n = recvmsg(gw.control.fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
        if (n < 0)
                return errno == EAGAIN || errno == EINTR ? 0 : -errno;
        if (n == 0)
                return 1; /* paddockd is gone */
        /* The engine sends no fds; close any that came anyway. */
        for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm))
                if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS)
                        for (size_t i = 0; i < (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++) {
                                int fd;
                                memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
                                close(fd);
                        }
        /* A table we cannot read fails closed: no token is valid until the next good one (the
         * old table might still hold a token that was just revoked). */
        if ((mh.msg_flags & MSG_TRUNC) ||
            tokens_load(&gw.tokens, gw.control_buf, (size_t)n, mono_ms()) < 0) {
                gw_log("%s control message: every token refused until the next table",
                       (mh.msg_flags & MSG_TRUNC) ? "oversized" : "malformed");
                tokens_free(&gw.tokens);
        } else {
                gw_log("token table: %zu token(s)", gw.tokens.n);
        }
        revoke_sweep();
        return 0;
}

/* --- accept and timers ---------------------------------------------------------------------- */

static void accept_some(struct watch *l)
{
        for (int i = 0; i < 64; i++) {
                struct sockaddr_storage ss;
                socklen_t sl = sizeof(ss);
                int fd = accept4(l->fd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
                if (fd < 0 && errno == ECONNABORTED)
                        continue; /* died in the queue */
                if (fd < 0)
                        return;
                char ip[INET6_ADDRSTRLEN], peer[INET6_ADDRSTRLEN + 10];
                peer_name(&ss, ip, sizeof(ip), peer, sizeof(peer));
                /* Over a limit: accepted and closed at once, so the backlog does not fill. */
                if (gw.n_conns >= gw.max_conns || conns_from(ip) >= MAX_CONNS_PER_IP) {
                        close(fd);
                        continue;
                }
                if (conn_new(fd, l->tls, &ss) < 0)
                        continue;
                conn_pump(gw.conns);
        }
}

/* Once a second: handshakes, heads and idle connections that took too long. */
static void timeout_sweep(void)
{
        uint64_t now = mono_ms();
        for (struct conn *c = gw.conns, *next; c; c = next) {
                next = c->next;
                bool late = false;
                if (c->lingering)
                        late = now - c->linger_ms > LINGER_MS;
                else if (!c->handshaken)
                        late = now - c->created_ms > HANDSHAKE_MS;
                else if (c->state == S_HEAD && c->head_start_ms)
                        late = now - c->head_start_ms > HEAD_MS;
                /* Idle: nothing buffered, nothing awaited from the engine. Before any request
                 * that is IDLE_MS; after one, a pause may be a response's (SERVED_IDLE_MS). */
                else if (c->state == S_HEAD && !c->forwarded && c->cin.len == 0 &&
                         c->eout.len == 0 && c->cout.len == 0)
                        late = now - c->active_ms > (c->served ? SERVED_IDLE_MS : IDLE_MS);
                if (late)
                        conn_close(c);
        }
}

int gw_loop_init(const struct gw_config *cfg)
{
        gw.epfd = epoll_create1(EPOLL_CLOEXEC);
        if (gw.epfd < 0)
                return -errno;
        /* Each connection holds two fds (client, engine) and briefly a third (the engine's end
         * until it is sent): raise the soft limit to the hard one, and take no more connections
         * than fit, so accept never fails with EMFILE (which would spin the level-triggered
         * listener). */
        struct rlimit rl;
        if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
                return -errno;
        rl.rlim_cur = rl.rlim_max;
        (void)setrlimit(RLIMIT_NOFILE, &rl);
        if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
                return -errno;
        gw.max_conns = rl.rlim_cur > 64 + 2 * MAX_CONNS ? MAX_CONNS : (rl.rlim_cur - 64) / 2;
        if (rl.rlim_cur <= 64 + 2 * 8)
                return -EMFILE;
        gw_log("at most %zu connections, %d per client address", gw.max_conns, MAX_CONNS_PER_IP);
        gw.cred = cfg->cred;
        gw.prio = cfg->prio;
        gw.control_buf = malloc(CONTROL_MAX);
        if (!gw.control_buf)
                return -ENOMEM;
        gw.control = (struct watch){ .kind = W_CONTROL, .fd = cfg->control_fd };
        int r = watch_add(&gw.control, EPOLLIN);
        if (r < 0)
                return r;
        for (size_t i = 0; i < cfg->n_listen; i++) {
                struct watch *w = &gw.listeners[gw.n_listeners++];
                *w = (struct watch){ .kind = W_LISTEN, .fd = cfg->listen[i].fd, .tls = cfg->listen[i].tls };
                int fl = fcntl(w->fd, F_GETFL);
                if (fl < 0 || fcntl(w->fd, F_SETFL, fl | O_NONBLOCK) < 0)
                        return -errno;
                r = watch_add(w, EPOLLIN);
                if (r < 0)
                        return r;
        }
        /* GnuTLS sets up lazily on first use (random generator, priority cache); do it now,
         * while the filters that would forbid its set-up syscalls are not loaded yet. */
        if (gw.cred) {
                gnutls_session_t s;
                if (gnutls_init(&s, GNUTLS_SERVER | GNUTLS_NONBLOCK) >= 0) {
                        gnutls_priority_set(s, gw.prio);
                        gnutls_credentials_set(s, GNUTLS_CRD_CERTIFICATE, gw.cred);
                        gnutls_deinit(s);
                }
        }
        uint8_t h[TOKEN_HASH_LEN];
        gnutls_hash_fast(GNUTLS_DIG_SHA256, "", 0, h);
        /* jansson seeds its hash function from /dev/urandom on first use: seed it now. */
        size_t seed = 0;
        while (seed == 0)
                if (getrandom(&seed, sizeof(seed), 0) < 0 && errno != EINTR)
                        return -errno;
        json_object_seed(seed);
        return 0;
}

int gw_loop_run(void)
{
        uint64_t last_sweep = mono_ms();
        for (;;) {
                int timeout = gw.any_again ? 0 : 1000;
                if (gw.next_expiry) {
                        int64_t left = (gw.next_expiry - unix_s()) * 1000;
                        if (left < timeout)
                                timeout = left < 0 ? 0 : (int)left;
                }
                struct epoll_event evs[64];
                int n = epoll_wait(gw.epfd, evs, (int)ELEMENTSOF(evs), timeout);
                if (n < 0 && errno != EINTR)
                        return -errno;
                for (int i = 0; i < n; i++) {
                        struct watch *w = evs[i].data.ptr;
                        switch (w->kind) {
                        case W_CONTROL: {
                                int r = control_read();
                                if (r < 0)
                                        return r;
                                if (r > 0)
                                        return 0; /* at once: no goodbyes to clients */
                                break;
                        }
                        case W_LISTEN:
                                accept_some(w);
                                break;
                        case W_CLIENT:
                                /* EPOLLERR: reset; EPOLLHUP: both directions gone. */
                                if (!w->c->dead && (evs[i].events & (EPOLLERR | EPOLLHUP)))
                                        conn_close(w->c);
                                if (!w->c->dead)
                                        conn_pump(w->c);
                                break;
                        case W_ENGINE:
                                if (!w->c->dead)
                                        conn_pump(w->c);
                                break;
                        }
                }
                if (gw.next_expiry && unix_s() >= gw.next_expiry)
                        revoke_sweep();
                if (gw.any_again) {
                        gw.any_again = false;
                        for (struct conn *c = gw.conns, *next; c; c = next) {
                                next = c->next; /* c may close (it stays valid until the reap) */
                                if (c->again)
                                        conn_pump(c);
                        }
                }
                uint64_t now = mono_ms();
                if (now - last_sweep >= 1000) {
                        last_sweep = now;
                        timeout_sweep();
                }
                conn_reap();
        }
}

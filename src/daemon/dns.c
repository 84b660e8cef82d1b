/* The environments' DNS resolver on the event loop; see dns.h. Message format work is in
 * lib/dnsmsg.c; this file is sockets, timers and the life of a query:
 *
 *   client (UDP datagram or TCP connection) --parse, decide--> local reply
 *                                            \--> pending: one connected UDP socket per
 *                                                 attempt, timer, next upstream on failure
 *                                                 --> learned() for each A/AAAA --> reply
 *
 * One file on purpose (~800 lines): UDP clients, TCP connections and upstream attempts are
 * one state machine around struct pending (a TCP connection owns its query in flight, a
 * reply may free the connection), and splitting it would put that ownership in two places.
 */
#include "daemon/dns.h"
#include "daemon/log.h"
#include "lib/dnsmsg.h"
#include "lib/util.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>

#define RESOLV_CONF_CHECK_MS 5000
#define RESOLV_CONF_MAX      65536
#define UDP_BATCH            64    /* datagrams read per wake-up, so TCP and upstreams get turns */
#define ACCEPT_PAUSE_MS      1000  /* after EMFILE/ENFILE: stop accepting for a while */
#define WARN_INTERVAL_MS     10000 /* warnings an environment can trigger at will: one per */

/* A warning at most every WARN_INTERVAL_MS per resolver: queries can trigger these, and a
 * flood of queries must not become a flood of log lines. */
#define warn_ratelimited(r, ...)                                                                   \
        do {                                                                                       \
                uint64_t _now = now_ms();                                                          \
                if (_now - (r)->last_warn_ms >= WARN_INTERVAL_MS || (r)->last_warn_ms == 0) {      \
                        (r)->last_warn_ms = _now;                                                  \
                        log_warn(__VA_ARGS__);                                                     \
                }                                                                                  \
        } while (0)

/* Doubly linked lists (queries in flight, connections): x goes in first, or out. */
#define LIST_PUSH(head, x)                                                                         \
        do {                                                                                       \
                (x)->prev = NULL;                                                                  \
                (x)->next = (head);                                                                \
                if (head)                                                                          \
                        (head)->prev = (x);                                                        \
                (head) = (x);                                                                      \
        } while (0)
#define LIST_UNLINK(head, x)                                                                       \
        do {                                                                                       \
                if ((x)->prev)                                                                     \
                        (x)->prev->next = (x)->next;                                               \
                else                                                                               \
                        (head) = (x)->next;                                                        \
                if ((x)->next)                                                                     \
                        (x)->next->prev = (x)->prev;                                               \
        } while (0)

struct tcp_conn;

/* One query forwarded upstream. */
struct pending {
        struct dns_resolver *r;
        struct pending *prev, *next;
        struct dns_query q; /* the client's */
        struct in_addr src;
        bool learn;
        char env[DNS_ENV_NAME_MAX];
        uint16_t port;
        /* Where the answer goes: conn (TCP) or client (UDP). */
        struct tcp_conn *conn;
        struct sockaddr_in client;
        size_t attempt; /* index into r->upstreams */
        uint16_t upstream_id;
        int fd;
        struct loop_source *src_io;
        struct loop_timer *timer;
};

struct tcp_conn {
        struct dns_resolver *r;
        struct tcp_conn *prev, *next;
        int fd;
        struct loop_source *src;
        struct loop_timer *timer;
        struct in_addr peer;
        struct pending *pending; /* the query being answered upstream, if any */
        uint8_t *out;            /* length-prefixed reply being written, if any */
        size_t out_len, out_pos;
        size_t in_len;
        uint8_t in[2 + DNS_QUERY_MAX];
};

struct dns_resolver {
        struct loop *loop;
        const struct dns_policy *policy;
        void *ctx;
        int udp_fd, tcp_fd;
        struct loop_source *udp_src, *tcp_src;
        struct loop_timer *accept_timer;
        uint64_t last_warn_ms;

        char *resolv_conf;
        struct stat conf_st;
        uint64_t conf_checked_ms;
        struct sockaddr_storage upstreams[DNS_MAX_UPSTREAMS];
        size_t n_upstreams;

        struct pending *pending;
        size_t n_pending;
        struct tcp_conn *conns;
        size_t n_conns;

        uint8_t buf[65536]; /* upstream answers; the largest UDP payload fits */
};

/* ---- upstream list -------------------------------------------------------------------- */

static bool same_file(const struct stat *a, const struct stat *b)
{
        return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
               a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

static int load_resolv_conf(struct dns_resolver *r)
{
        struct stat st;
        if (stat(r->resolv_conf, &st) < 0)
                return -errno;
        _cleanup_free_ char *text = NULL;
        int k = read_file_at(AT_FDCWD, r->resolv_conf, RESOLV_CONF_MAX, &text);
        if (k < 0)
                return k;
        size_t n = 0;
        dns_resolv_conf_parse(text, r->upstreams, DNS_MAX_UPSTREAMS, &n);
        if (n == 0) {
                /* glibc's default when resolv.conf names no server. */
                struct sockaddr_in *sin = (struct sockaddr_in *)&r->upstreams[0];
                *sin = (struct sockaddr_in){.sin_family = AF_INET,
                                            .sin_port = htons(DNS_PORT),
                                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
                n = 1;
        }
        r->n_upstreams = n;
        r->conf_st = st;
        return 0;
}

/* Re-read resolv.conf if it changed; at most one stat() every RESOLV_CONF_CHECK_MS. A file that
 * vanished or became unreadable keeps the last good list. */
static void maybe_reload(struct dns_resolver *r)
{
        uint64_t now = now_ms();
        if (now - r->conf_checked_ms < RESOLV_CONF_CHECK_MS)
                return;
        r->conf_checked_ms = now;
        struct stat st;
        if (stat(r->resolv_conf, &st) < 0 || same_file(&st, &r->conf_st))
                return;
        int k = load_resolv_conf(r);
        if (k < 0)
                log_warn("dns: re-reading %s: %s", r->resolv_conf, strerror(-k));
        else
                log_info("dns: %s changed, %zu upstream(s)", r->resolv_conf, r->n_upstreams);
}

/* ---- sending replies ------------------------------------------------------------------ */

static void conn_free(struct tcp_conn *c);
static void conn_resume(struct tcp_conn *c);
static int conn_arm_timer(struct tcp_conn *c);

static void udp_send(struct dns_resolver *r, const struct sockaddr_in *to, const uint8_t *msg,
                     size_t len)
{
        /* A full socket buffer drops the reply, as the network could: clients retry. */
        if (sendto(r->udp_fd, msg, len, MSG_DONTWAIT | MSG_NOSIGNAL, (const struct sockaddr *)to,
                   sizeof(*to)) < 0 &&
            errno != EAGAIN)
                log_debug("dns: reply to %s: %m", inet_ntoa(to->sin_addr));
}

/* Put msg, length-prefixed, in the connection's (empty) output buffer. 0, or -errno after
 * which c is gone. */
static int conn_queue(struct tcp_conn *c, const uint8_t *msg, size_t len)
{
        if (len > UINT16_MAX || c->out) {
                conn_free(c);
                return -EINVAL;
        }
        c->out = malloc(2 + len);
        if (!c->out) {
                conn_free(c);
                return -ENOMEM;
        }
        c->out[0] = (uint8_t)(len >> 8);
        c->out[1] = (uint8_t)len;
        memcpy(c->out + 2, msg, len);
        c->out_len = 2 + len;
        c->out_pos = 0;
        return conn_arm_timer(c); /* the client has this long to take the reply */
}

/* Send an answer that arrived later (from upstream, or a timeout) on the connection. Never
 * called from inside conn_resume(), so no recursion through pipelined queries. */
static void conn_send(struct tcp_conn *c, const uint8_t *msg, size_t len)
{
        if (conn_queue(c, msg, len) >= 0)
                conn_resume(c);
}

/* A reply without records to q, to whoever asked. */
static void reply_code(struct dns_resolver *r, const struct dns_query *q, uint8_t rcode,
                       uint16_t extra_flags, const struct sockaddr_in *udp_client,
                       struct tcp_conn *conn)
{
        uint8_t out[DNS_HEADER_SIZE + DNS_NAME_WIRE_MAX + 4 + 11];
        size_t len;
        if (dns_build_reply(q, rcode, extra_flags, out, sizeof(out), &len) < 0) {
                if (conn)
                        conn_free(conn);
                return;
        }
        if (conn)
                conn_send(conn, out, len);
        else
                udp_send(r, udp_client, out, len);
}

/* ---- queries in flight ---------------------------------------------------------------- */

static void pending_close_attempt(struct pending *p)
{
        loop_remove(p->src_io);
        p->src_io = NULL;
        loop_cancel_timer(p->timer);
        p->timer = NULL;
        if (p->fd >= 0)
                close(p->fd);
        p->fd = -EBADF;
}

static void pending_free(struct pending *p)
{
        if (!p)
                return;
        struct dns_resolver *r = p->r;
        pending_close_attempt(p);
        if (p->conn)
                p->conn->pending = NULL;
        LIST_UNLINK(r->pending, p);
        r->n_pending--;
        free(p);
}

/* Unlink p from its connection before replying on it: sending may free the connection, and
 * with it the connection's pending query, which must then no longer be p. */
static struct tcp_conn *pending_detach(struct pending *p)
{
        struct tcp_conn *c = p->conn;
        if (c)
                c->pending = NULL;
        p->conn = NULL;
        return c;
}

/* Answer p with rcode (no records) and forget it. */
static void pending_fail(struct pending *p, uint8_t rcode)
{
        struct tcp_conn *c = pending_detach(p);
        reply_code(p->r, &p->q, rcode, 0, &p->client, c);
        pending_free(p);
}

static void pending_io(struct loop_source *s, int fd, uint32_t events, void *data);
static void pending_timeout(struct loop_timer *t, void *data);

/* The EDNS payload size to advertise upstream for q: none if the client sent no OPT (so the
 * answer fits its 512 bytes); else its size, capped at what crosses any path unfragmented.
 * Over TCP the client takes anything: the cap alone. */
static uint16_t upstream_edns_size(const struct dns_query *q, bool tcp)
{
        if (!q->edns)
                return 0;
        uint16_t size =
            tcp || q->edns_udp_size > DNS_EDNS_UDP_MAX ? DNS_EDNS_UDP_MAX : q->edns_udp_size;
        return size < DNS_UDP_PLAIN_MAX ? DNS_UDP_PLAIN_MAX : size;
}

/* Send p to the upstream at p->attempt, or the next one that takes it. -EHOSTUNREACH when
 * there is none left. */
static int pending_send(struct pending *p)
{
        struct dns_resolver *r = p->r;
        for (; p->attempt < r->n_upstreams; p->attempt++) {
                pending_close_attempt(p);
                const struct sockaddr_storage *up = &r->upstreams[p->attempt];
                socklen_t up_len = up->ss_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                                             : sizeof(struct sockaddr_in);

                uint16_t id;
                if (getrandom(&id, sizeof(id), 0) != sizeof(id))
                        return -EIO;
                uint8_t msg[DNS_HEADER_SIZE + DNS_NAME_WIRE_MAX + 4 + 11];
                size_t len;
                if (dns_build_query(&p->q, id, upstream_edns_size(&p->q, p->conn), msg, sizeof(msg),
                                    &len) < 0)
                        return -EIO;

                /* connect() picks a random ephemeral source port and makes the kernel drop
                 * datagrams from anyone but this upstream. */
                _cleanup_close_ int fd =
                    socket(up->ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
                if (fd < 0) {
                        int e = errno;
                        warn_ratelimited(r, "dns: upstream socket: %s", strerror(e));
                        errno = e;
                        return -errno;
                }
                if (connect(fd, (const struct sockaddr *)up, up_len) < 0 ||
                    send(fd, msg, len, MSG_NOSIGNAL) != (ssize_t)len) {
                        log_debug("dns: upstream %zu: %m", p->attempt);
                        continue;
                }
                p->timer = loop_add_timer(r->loop, DNS_UPSTREAM_TIMEOUT_MS, pending_timeout, p);
                if (!p->timer)
                        return -ENOMEM;
                int k = loop_add_fd(r->loop, fd, EPOLLIN, pending_io, p, &p->src_io);
                if (k < 0)
                        return k;
                p->fd = TAKE_FD(fd);
                p->upstream_id = id;
                return 0;
        }
        return -EHOSTUNREACH;
}

static void pending_next(struct pending *p)
{
        p->attempt++;
        if (pending_send(p) < 0)
                pending_fail(p, DNS_RCODE_SERVFAIL);
}

static void pending_timeout(struct loop_timer *t, void *data)
{
        struct pending *p = data;
        p->timer = NULL; /* the loop frees a timer as it fires */
        log_debug("dns: upstream %zu timed out for %s", p->attempt, p->q.name);
        pending_next(p);
}

/* A valid upstream answer in msg: learn, then relay with the client's id. */
static void pending_answer(struct pending *p, uint8_t *msg, size_t len, const struct dns_a *a,
                           size_t n_a, bool more, uint16_t flags)
{
        struct dns_resolver *r = p->r;

        if (p->learn && DNS_RCODE(flags) == DNS_RCODE_NOERROR && r->policy->learned) {
                if (more)
                        warn_ratelimited(r, "dns: %s: over %d A/AAAA records, learning the first",
                                         p->q.name, DNS_LEARN_MAX);
                for (size_t i = 0; i < n_a; i++)
                        r->policy->learned(r->ctx, p->env, &a[i], p->port, a[i].ttl ? a[i].ttl : 1);
        }

        msg[0] = (uint8_t)(p->q.id >> 8);
        msg[1] = (uint8_t)p->q.id;
        struct tcp_conn *c = pending_detach(p);
        if (c)
                conn_send(c, msg, len);
        else {
                size_t limit = DNS_UDP_PLAIN_MAX;
                if (p->q.edns && p->q.edns_udp_size > limit)
                        limit = p->q.edns_udp_size;
                if (len > limit)
                        reply_code(r, &p->q, DNS_RCODE_NOERROR, DNS_FLAG_TC, &p->client, NULL);
                else
                        udp_send(r, &p->client, msg, len);
        }
        pending_free(p);
}

static void pending_io(struct loop_source *s, int fd, uint32_t events, void *data)
{
        struct pending *p = data;
        struct dns_resolver *r = p->r;

        for (;;) {
                ssize_t n = recv(fd, r->buf, sizeof(r->buf), MSG_TRUNC);
                if (n < 0) {
                        if (errno == EAGAIN || errno == EINTR)
                                return;
                        /* ECONNREFUSED from an ICMP port unreachable, and the like. */
                        log_debug("dns: upstream %zu: %m", p->attempt);
                        pending_next(p);
                        return;
                }
                if ((size_t)n > sizeof(r->buf))
                        continue;

                struct dns_a a[DNS_LEARN_MAX];
                size_t n_a;
                bool more;
                uint16_t flags;
                if (dns_parse_response(r->buf, (size_t)n, p->upstream_id, &p->q, a, ELEMENTSOF(a),
                                       &n_a, &more, &flags) < 0) {
                        log_debug("dns: ignoring a bad answer from upstream %zu", p->attempt);
                        continue;
                }

                uint8_t rcode = DNS_RCODE(flags);
                if (rcode != DNS_RCODE_NOERROR && rcode != DNS_RCODE_NXDOMAIN) {
                        bool last = p->attempt + 1 >= r->n_upstreams;
                        bool has_question = r->buf[4] != 0 || r->buf[5] != 0;
                        if (!last)
                                pending_next(p);
                        else if (!has_question)
                                pending_fail(p, DNS_RCODE_SERVFAIL);
                        else
                                pending_answer(p, r->buf, (size_t)n, a, 0, false, flags);
                        return;
                }
                pending_answer(p, r->buf, (size_t)n, a, n_a, more, flags);
                return;
        }
}

static size_t pending_from(struct dns_resolver *r, struct in_addr src)
{
        size_t n = 0;
        for (struct pending *p = r->pending; p; p = p->next)
                n += p->src.s_addr == src.s_addr;
        return n;
}

/* ---- a query arrives ------------------------------------------------------------------ */

enum query_result {
        QUERY_REPLY,   /* reply in out[0..*ret_len) */
        QUERY_PENDING, /* forwarded: the answer comes later */
        QUERY_DROP,    /* nothing to say (not a query at all) */
};

/* Room for any reply handle_query() makes itself: header, question, OPT. */
#define LOCAL_REPLY_MAX (DNS_HEADER_SIZE + DNS_NAME_WIRE_MAX + 4 + 11)

/* Decide about one query message from src: a reply of our own in out, or a pending query that
 * will answer udp_client (UDP) or conn (TCP) later. Sends nothing itself, so that the TCP code
 * can take pipelined queries in a loop rather than by recursion. */
static enum query_result handle_query(struct dns_resolver *r, const uint8_t *msg, size_t len,
                                      struct in_addr src, const struct sockaddr_in *udp_client,
                                      struct tcp_conn *conn, uint8_t out[LOCAL_REPLY_MAX],
                                      size_t *ret_len)
{
        struct dns_query q;
        int k = dns_parse_query(msg, len, &q);
        if (k < 0) {
                uint8_t rcode = k == -EOPNOTSUPP ? DNS_RCODE_NOTIMP : DNS_RCODE_FORMERR;
                /* Fails for runts and responses: never answered. */
                if (dns_build_header_reply(msg, len, rcode, out, LOCAL_REPLY_MAX, ret_len) < 0)
                        return QUERY_DROP;
                return QUERY_REPLY;
        }

        uint8_t rcode;
        if (q.qclass != DNS_CLASS_IN || q.qtype == DNS_TYPE_AXFR || q.qtype == DNS_TYPE_IXFR) {
                rcode = DNS_RCODE_REFUSED;
                goto reply;
        }

        char env[DNS_ENV_NAME_MAX] = "";
        uint16_t port = 0;
        enum dns_verdict v =
            r->policy->decide(r->ctx, src, q.name, q.qtype, env, sizeof(env), &port);
        env[sizeof(env) - 1] = '\0';
        if (v == DNS_IGNORE)
                return QUERY_DROP;
        if (v == DNS_NXDOMAIN) {
                rcode = DNS_RCODE_NXDOMAIN;
                goto reply;
        }
        if (v != DNS_FORWARD && v != DNS_FORWARD_LEARN) {
                rcode = DNS_RCODE_REFUSED;
                goto reply;
        }
        rcode = DNS_RCODE_SERVFAIL;
        if (r->n_pending >= DNS_MAX_PENDING || pending_from(r, src) >= DNS_MAX_PENDING_PER_SOURCE) {
                log_debug("dns: too many queries in flight, SERVFAIL for %s", q.name);
                goto reply;
        }
        maybe_reload(r);

        struct pending *p = calloc(1, sizeof(*p));
        if (!p)
                goto reply;
        *p = (struct pending){.r = r,
                              .q = q,
                              .src = src,
                              .learn = v == DNS_FORWARD_LEARN,
                              .port = port,
                              .fd = -EBADF};
        memcpy(p->env, env, sizeof(env));
        if (udp_client)
                p->client = *udp_client;
        LIST_PUSH(r->pending, p);
        r->n_pending++;
        p->conn = conn;
        if (pending_send(p) < 0) {
                pending_free(p); /* before linking it to conn: no reply through it */
                goto reply;
        }
        if (conn)
                conn->pending = p;
        return QUERY_PENDING;

reply:
        if (dns_build_reply(&q, rcode, 0, out, LOCAL_REPLY_MAX, ret_len) < 0)
                return QUERY_DROP;
        return QUERY_REPLY;
}

/* ---- UDP ------------------------------------------------------------------------------ */

static void udp_io(struct loop_source *s, int fd, uint32_t events, void *data)
{
        struct dns_resolver *r = data;
        for (int i = 0; i < UDP_BATCH; i++) {
                uint8_t msg[DNS_QUERY_MAX];
                struct sockaddr_in from;
                socklen_t from_len = sizeof(from);
                ssize_t n =
                    recvfrom(fd, msg, sizeof(msg), MSG_TRUNC, (struct sockaddr *)&from, &from_len);
                if (n < 0) {
                        if (errno != EAGAIN && errno != EINTR)
                                log_debug("dns: udp receive: %m");
                        return;
                }
                if ((size_t)n > sizeof(msg) || from_len != sizeof(from) ||
                    from.sin_family != AF_INET || from.sin_port == 0)
                        continue;
                uint8_t out[LOCAL_REPLY_MAX];
                size_t out_len;
                if (handle_query(r, msg, (size_t)n, from.sin_addr, &from, NULL, out, &out_len) ==
                    QUERY_REPLY)
                        udp_send(r, &from, out, out_len);
        }
}

/* ---- TCP ------------------------------------------------------------------------------ */

static void conn_timeout(struct loop_timer *t, void *data)
{
        struct tcp_conn *c = data;
        c->timer = NULL; /* the loop frees a timer as it fires */
        conn_free(c);
}

/* (Re)start the connection's deadline. 0, or -ENOMEM after which c is gone: without a timer
 * nothing bounds how long a connection may sit. */
static int conn_arm_timer(struct tcp_conn *c)
{
        loop_cancel_timer(c->timer);
        c->timer = loop_add_timer(c->r->loop, DNS_TCP_TIMEOUT_MS, conn_timeout, c);
        if (!c->timer) {
                conn_free(c);
                return -ENOMEM;
        }
        return 0;
}

static void conn_free(struct tcp_conn *c)
{
        struct dns_resolver *r = c->r;
        if (c->pending) {
                c->pending->conn = NULL;
                pending_free(c->pending);
        }
        loop_cancel_timer(c->timer);
        loop_remove(c->src);
        close(c->fd);
        free(c->out);
        LIST_UNLINK(r->conns, c);
        r->n_conns--;
        free(c);
}

/* Move the connection along: flush the reply; then, with nothing in flight, take the next
 * buffered query (pipelining, RFC 7766) or wait for more bytes. May free c. */
static void conn_resume(struct tcp_conn *c)
{
        for (;;) {
                if (c->out) {
                        while (c->out_pos < c->out_len) {
                                ssize_t n =
                                    send(c->fd, c->out + c->out_pos, c->out_len - c->out_pos,
                                         MSG_DONTWAIT | MSG_NOSIGNAL);
                                if (n < 0 && errno == EAGAIN) {
                                        loop_set_events(c->src, EPOLLOUT);
                                        return;
                                }
                                if (n < 0 && errno == EINTR)
                                        continue;
                                if (n <= 0) {
                                        conn_free(c);
                                        return;
                                }
                                c->out_pos += (size_t)n;
                        }
                        free(c->out);
                        c->out = NULL;
                        if (conn_arm_timer(c) < 0) /* idle: the next query has this long */
                                return;
                }
                if (c->pending) {
                        loop_set_events(c->src, 0); /* errors and hang-ups still come */
                        return;
                }
                if (c->in_len < 2) {
                        loop_set_events(c->src, EPOLLIN);
                        return;
                }
                size_t mlen = (size_t)c->in[0] << 8 | c->in[1];
                if (mlen < DNS_HEADER_SIZE || mlen > DNS_QUERY_MAX) {
                        conn_free(c);
                        return;
                }
                if (c->in_len < 2 + mlen) {
                        loop_set_events(c->src, EPOLLIN);
                        return;
                }

                /* A whole query. */
                uint8_t out[LOCAL_REPLY_MAX];
                size_t out_len;
                enum query_result res =
                    handle_query(c->r, c->in + 2, mlen, c->peer, NULL, c, out, &out_len);
                c->in_len -= 2 + mlen;
                memmove(c->in, c->in + 2 + mlen, c->in_len);
                if (res == QUERY_DROP) {
                        conn_free(c);
                        return;
                }
                if (res == QUERY_PENDING) {
                        loop_cancel_timer(c->timer); /* upstream timeouts bound this wait */
                        c->timer = NULL;
                        continue;
                }
                if (conn_queue(c, out, out_len) < 0)
                        return;
        }
}

static void conn_io(struct loop_source *s, int fd, uint32_t events, void *data)
{
        struct tcp_conn *c = data;

        if (events & (EPOLLERR | EPOLLHUP)) {
                conn_free(c); /* no one left to answer */
                return;
        }
        if (c->out) {
                if (events & EPOLLOUT)
                        conn_resume(c);
                return;
        }
        if (!(events & EPOLLIN) || c->pending)
                return;
        ssize_t n = recv(fd, c->in + c->in_len, sizeof(c->in) - c->in_len, MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return;
        if (n <= 0) {
                conn_free(c);
                return;
        }
        c->in_len += (size_t)n;
        conn_resume(c);
}

static void accept_resume(struct loop_timer *t, void *data)
{
        struct dns_resolver *r = data;
        r->accept_timer = NULL;
        loop_set_events(r->tcp_src, EPOLLIN);
}

static void tcp_accept(struct loop_source *s, int fd, uint32_t events, void *data)
{
        struct dns_resolver *r = data;
        for (int i = 0; i < DNS_MAX_TCP; i++) {
                struct sockaddr_in peer;
                socklen_t peer_len = sizeof(peer);
                _cleanup_close_ int cfd =
                    accept4(fd, (struct sockaddr *)&peer, &peer_len, SOCK_NONBLOCK | SOCK_CLOEXEC);
                if (cfd < 0) {
                        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
                            errno == ENOMEM) {
                                /* Level-triggered: without a pause this would spin. */
                                warn_ratelimited(r, "dns: accept: %m; pausing TCP");
                                r->accept_timer =
                                    loop_add_timer(r->loop, ACCEPT_PAUSE_MS, accept_resume, r);
                                if (r->accept_timer)
                                        loop_set_events(r->tcp_src, 0);
                        }
                        return;
                }
                if (r->n_conns >= DNS_MAX_TCP || peer.sin_family != AF_INET)
                        continue; /* closed: the client retries */

                struct tcp_conn *c = calloc(1, sizeof(*c));
                if (!c)
                        continue;
                *c = (struct tcp_conn){.r = r, .fd = -EBADF, .peer = peer.sin_addr};
                if (loop_add_fd(r->loop, cfd, EPOLLIN, conn_io, c, &c->src) < 0) {
                        free(c);
                        continue;
                }
                c->fd = TAKE_FD(cfd);
                LIST_PUSH(r->conns, c);
                r->n_conns++;
                (void)conn_arm_timer(c); /* the whole first query within the timeout */
        }
}

/* ---- start, stop ---------------------------------------------------------------------- */

static int listen_socket(int type, struct in_addr addr, uint16_t port, int *ret)
{
        _cleanup_close_ int fd = socket(AF_INET, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        int one = 1;
        if (setsockopt(fd, IPPROTO_IP, IP_FREEBIND, &one, sizeof(one)) < 0)
                return -errno;
        if (type == SOCK_STREAM && setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0)
                return -errno;
        struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(port), .sin_addr = addr};
        if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0)
                return -errno;
        if (type == SOCK_STREAM && listen(fd, 64) < 0)
                return -errno;
        *ret = TAKE_FD(fd);
        return 0;
}

int dns_resolver_start(struct loop *l, struct in_addr listen_addr, uint16_t listen_port,
                       const char *resolv_conf, const struct dns_policy *p, void *ctx,
                       struct dns_resolver **ret)
{
        if (!l || !resolv_conf || !p || !p->decide || !ret)
                return -EINVAL;
        struct dns_resolver *r = calloc(1, sizeof(*r));
        if (!r)
                return -ENOMEM;
        *r = (struct dns_resolver){.loop = l,
                                   .policy = p,
                                   .ctx = ctx,
                                   .udp_fd = -EBADF,
                                   .tcp_fd = -EBADF,
                                   .conf_checked_ms = now_ms()};
        int k = -ENOMEM;
        r->resolv_conf = strdup(resolv_conf);
        if (!r->resolv_conf)
                goto fail;
        k = load_resolv_conf(r);
        if (k < 0)
                goto fail;
        k = listen_socket(SOCK_DGRAM, listen_addr, listen_port, &r->udp_fd);
        if (k < 0)
                goto fail;
        k = listen_socket(SOCK_STREAM, listen_addr, listen_port, &r->tcp_fd);
        if (k < 0)
                goto fail;
        k = loop_add_fd(l, r->udp_fd, EPOLLIN, udp_io, r, &r->udp_src);
        if (k < 0)
                goto fail;
        k = loop_add_fd(l, r->tcp_fd, EPOLLIN, tcp_accept, r, &r->tcp_src);
        if (k < 0)
                goto fail;
        *ret = r;
        return 0;
fail:
        dns_resolver_stop(r);
        return k;
}

void dns_resolver_stop(struct dns_resolver *r)
{
        if (!r)
                return;
        while (r->conns)
                conn_free(r->conns); /* frees the connection's pending query too */
        while (r->pending)
                pending_free(r->pending);
        loop_cancel_timer(r->accept_timer);
        loop_remove(r->udp_src);
        loop_remove(r->tcp_src);
        if (r->udp_fd >= 0)
                close(r->udp_fd);
        if (r->tcp_fd >= 0)
                close(r->tcp_fd);
        free(r->resolv_conf);
        free(r);
}

/* Integration test of the environments' resolver (src/daemon/dns.c) on the real event loop,
 * over real sockets, in a fresh network namespace of a forked child (root, or any user where
 * unprivileged user namespaces are allowed; skipped otherwise):
 *
 *   fake upstream 127.0.0.2:53   answers A 198.51.100.7 TTL 5 to anything
 *   silent upstream 127.0.0.4:53 reads and never answers
 *   nothing on 127.0.0.3:53      (ICMP port unreachable)
 *   resolver 127.0.0.1:5353      policy: from 127.0.0.1 "*.example.com" learned (env "envA"),
 *                                anything else NXDOMAIN; from 127.0.0.6 everything forwarded
 *                                ("open"); from 127.0.0.7 no answer (an environment whose
 *                                network is being set up); any other source REFUSED.
 *
 * The unit-test build links only libpaddock.a, and the resolver lives in the daemon (it is
 * event-loop glue around lib/dnsmsg.c), so its sources are compiled into this file. Make does
 * not see that dependency: rebuild this test after editing them. */
#include "../../src/daemon/dns.c"
#include "../../src/daemon/log.c"
#include "../../src/daemon/loop.c"

#include "unit.h"

#include <net/if.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/wait.h>

#define RESOLVER_PORT 5353

#define RUN_R RUN_ARG

static struct loop *L;

/* ---- the fake upstreams --------------------------------------------------------------- */

struct upstream {
        int fd;
        bool silent;
        bool spoof_first; /* send a wrong-id and a wrong-question answer before the real one */
        unsigned queries;
        uint16_t last_id;
        bool last_edns;
        uint16_t last_edns_size;
};

static struct upstream good = {.fd = -1}, silent = {.fd = -1, .silent = true};

static void put_a(uint8_t *b, size_t *n, uint32_t addr_be, uint32_t ttl)
{
        static const uint8_t rr[] = {0xc0, 0x0c, 0, DNS_TYPE_A, 0, DNS_CLASS_IN};
        memcpy(b + *n, rr, sizeof(rr));
        *n += sizeof(rr);
        b[(*n)++] = (uint8_t)(ttl >> 24);
        b[(*n)++] = (uint8_t)(ttl >> 16);
        b[(*n)++] = (uint8_t)(ttl >> 8);
        b[(*n)++] = (uint8_t)ttl;
        b[(*n)++] = 0;
        b[(*n)++] = 4;
        memcpy(b + *n, &addr_be, 4);
        *n += 4;
}

static void upstream_io(struct loop_source *s, int fd, uint32_t events, void *data)
{
        struct upstream *u = data;
        uint8_t q[512], a[600];
        struct sockaddr_in from;
        socklen_t fl = sizeof(from);
        ssize_t n = recvfrom(fd, q, sizeof(q), 0, (struct sockaddr *)&from, &fl);
        if (n < 0)
                return;
        u->queries++;
        struct dns_query dq;
        if (dns_parse_query(q, (size_t)n, &dq) < 0)
                return;
        u->last_id = dq.id;
        u->last_edns = dq.edns;
        u->last_edns_size = dq.edns_udp_size;
        if (u->silent)
                return;

        /* Header + question as asked, one A record (owner: pointer to the question). */
        size_t len = 12 + dq.wire_len + 4;
        memcpy(a, q, len);
        a[2] = 0x81; /* QR, RD */
        a[3] = 0x80; /* RA, NOERROR */
        a[6] = 0, a[7] = 1, a[8] = a[9] = a[10] = a[11] = 0;

        if (u->spoof_first) {
                uint8_t bad[600];
                size_t bl = len;
                memcpy(bad, a, len);
                put_a(bad, &bl, htonl(0x06060606), 5);
                bad[1] ^= 1; /* wrong id */
                sendto(fd, bad, bl, 0, (struct sockaddr *)&from, fl);
                bad[1] ^= 1;
                bad[13] ^= 0x01; /* right id, another question */
                sendto(fd, bad, bl, 0, (struct sockaddr *)&from, fl);
        }
        if (dq.qtype == DNS_TYPE_AAAA) {
                /* 2001:db8::7, TTL 7 */
                static const uint8_t rr[] = {0xc0, 0x0c, 0, DNS_TYPE_AAAA, 0, DNS_CLASS_IN,
                                             0,    0,    0, 7,             0, 16,
                                             0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0,
                                             0,    0,    0,    0,    0, 0, 0, 7};
                memcpy(a + len, rr, sizeof(rr));
                len += sizeof(rr);
        } else
                put_a(a, &len, htonl(0xc6336407), 5); /* 198.51.100.7 */
        sendto(fd, a, len, 0, (struct sockaddr *)&from, fl);
}

static int udp_bound(const char *ip, uint16_t port)
{
        int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(port)};
        inet_pton(AF_INET, ip, &sin.sin_addr);
        if (fd < 0 || bind(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0) {
                perror("bind");
                CHECK(!"bind");
        }
        return fd;
}

/* ---- the policy ----------------------------------------------------------------------- */

struct learned {
        unsigned n;
        char env[DNS_ENV_NAME_MAX];
        int family;
        struct in_addr addr;
        struct in6_addr addr6;
        uint16_t port;
        uint32_t ttl;
        bool reply_already_there; /* the client could read its answer before we were told */
};

static struct learned learned;
static unsigned decided;
static int client_fd = -1; /* the client socket of the query in progress */

static enum dns_verdict decide(void *ctx, struct in_addr src, const char *qname, uint16_t qtype,
                               char *env, size_t env_len, uint16_t *port)
{
        decided++;
        if (src.s_addr == htonl(0x7f000006))
                return DNS_FORWARD;
        if (src.s_addr == htonl(0x7f000007))
                return DNS_IGNORE;
        if (src.s_addr != htonl(INADDR_LOOPBACK))
                return DNS_REFUSE;
        if (!dns_name_match("*.example.com", qname))
                return DNS_NXDOMAIN;
        snprintf(env, env_len, "envA");
        *port = 443;
        return DNS_FORWARD_LEARN;
}

static void on_learned(void *ctx, const char *env, const struct dns_a *rec, uint16_t port,
                       uint32_t ttl)
{
        learned.n++;
        snprintf(learned.env, sizeof(learned.env), "%s", env);
        learned.family = rec->family;
        if (rec->family == AF_INET6)
                learned.addr6 = rec->addr6;
        else
                learned.addr = rec->addr;
        learned.port = port;
        learned.ttl = ttl;
        uint8_t b;
        if (client_fd >= 0 && recv(client_fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) >= 0)
                learned.reply_already_there = true;
}

static const struct dns_policy policy = {.decide = decide, .learned = on_learned};

/* ---- clients -------------------------------------------------------------------------- */

struct answer {
        uint8_t b[4096];
        ssize_t n; /* -1: nothing came */
        uint64_t ms;
};

static void quit_io(struct loop_source *s, int fd, uint32_t events, void *data)
{
        loop_quit(L);
}

static void quit_timer(struct loop_timer *t, void *data)
{
        *(bool *)data = true;
        loop_quit(L);
}

/* Run the loop until fd is readable or timeout_ms pass. */
static bool run_until_readable(int fd, uint64_t timeout_ms)
{
        bool timed_out = false;
        struct loop_source *s = NULL;
        if (loop_add_fd(L, fd, EPOLLIN, quit_io, NULL, &s) < 0)
                return false;
        struct loop_timer *t = loop_add_timer(L, timeout_ms, quit_timer, &timed_out);
        L->quit = false; /* this file includes loop.c: restart a loop that was quit */
        loop_run(L);
        loop_remove(s);
        if (!timed_out)
                loop_cancel_timer(t);
        return !timed_out;
}

static size_t make_query(uint8_t *b, uint16_t id, const char *name, uint16_t qtype, bool edns)
{
        size_t n = 0;
        const uint8_t hdr[12] = {(uint8_t)(id >> 8), (uint8_t)id, 0x01, 0, 0, 1, 0, 0, 0, 0, 0,
                                 edns ? 1 : 0};
        memcpy(b, hdr, 12);
        n = 12;
        while (*name) {
                const char *dot = strchr(name, '.');
                size_t l = dot ? (size_t)(dot - name) : strlen(name);
                b[n++] = (uint8_t)l;
                memcpy(b + n, name, l);
                n += l;
                name += l + (dot ? 1 : 0);
        }
        b[n++] = 0;
        b[n++] = (uint8_t)(qtype >> 8);
        b[n++] = (uint8_t)qtype;
        b[n++] = 0;
        b[n++] = DNS_CLASS_IN;
        if (edns) {
                const uint8_t opt[11] = {0, 0, DNS_TYPE_OPT, 0x10, 0x00, 0, 0, 0, 0, 0, 0};
                memcpy(b + n, opt, 11);
                n += 11;
        }
        return n;
}

/* Send msg over UDP from src_ip to port, return what comes back. */
static void ask_raw(const char *src_ip, uint16_t port, const uint8_t *msg, size_t len,
                    uint64_t timeout_ms, struct answer *ret)
{
        ret->n = -1;
        int fd = udp_bound(src_ip, 0);
        struct sockaddr_in to = {.sin_family = AF_INET,
                                 .sin_port = htons(port),
                                 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        CHECK(sendto(fd, msg, len, 0, (struct sockaddr *)&to, sizeof(to)) == (ssize_t)len);
        client_fd = fd;
        uint64_t start = now_ms();
        if (run_until_readable(fd, timeout_ms))
                ret->n = recv(fd, ret->b, sizeof(ret->b), 0);
        ret->ms = now_ms() - start;
        if (ret->n < 0)
                ret->b[3] = 0xff; /* no rcode to match by accident */
        client_fd = -1;
        close(fd);
}

static void ask(const char *src_ip, uint16_t port, uint16_t id, const char *name, uint16_t qtype,
                struct answer *ret)
{
        uint8_t q[512];
        size_t len = make_query(q, id, name, qtype, false);
        ask_raw(src_ip, port, q, len, 5000, ret);
}

static uint16_t ans_id(const struct answer *a)
{
        return (uint16_t)(a->b[0] << 8 | a->b[1]);
}
static int ans_rcode(const struct answer *a)
{
        return a->b[3] & 0xf;
}
static int ans_count(const struct answer *a)
{
        return a->b[6] << 8 | a->b[7];
}

/* The single A record of an answer from the good upstream. */
static bool ans_is_good_a(const struct answer *a)
{
        if (a->n < 16 || ans_count(a) != 1)
                return false;
        return memcmp(a->b + a->n - 4, "\xc6\x33\x64\x07", 4) == 0;
}

/* ---- the tests ------------------------------------------------------------------------ */

static struct dns_resolver *start(const char *conf_text, uint16_t port)
{
        char path[] = "/tmp/paddock-test-resolv.XXXXXX";
        int fd = mkstemp(path);
        CHECK(fd >= 0);
        CHECK(write_all(fd, conf_text, strlen(conf_text)) == 0);
        close(fd);
        struct dns_resolver *r = NULL;
        struct in_addr lo = {htonl(INADDR_LOOPBACK)};
        CHECK_EQ_INT(dns_resolver_start(L, lo, port, path, &policy, NULL, &r), 0);
        unlink(path);
        return r;
}

static void test_dns_allowed_a(struct dns_resolver *r)
{
        struct answer a;
        unsigned before = good.queries;
        learned = (struct learned){0};
        ask("127.0.0.1", RESOLVER_PORT, 0x1234, "Api.Example.com", DNS_TYPE_A, &a);
        CHECK(a.n > 0);
        CHECK_EQ_INT(ans_id(&a), 0x1234);
        CHECK_EQ_INT(ans_rcode(&a), DNS_RCODE_NOERROR);
        CHECK(ans_is_good_a(&a));
        CHECK(a.n > 16 && memcmp(a.b + 12, "\3Api\7Example\3com", 17) == 0); /* case kept */
        CHECK_EQ_INT(good.queries, before + 1);
        CHECK(good.last_id != 0x1234 || good.queries > 1); /* a fresh id (1/65536 flake) */
        CHECK(!good.last_edns);                            /* the client had no OPT */
        CHECK_EQ_INT(learned.n, 1);
        CHECK_EQ_STR(learned.env, "envA");
        CHECK_EQ_STR(inet_ntoa(learned.addr), "198.51.100.7");
        CHECK_EQ_INT(learned.port, 443);
        CHECK_EQ_INT(learned.ttl, 5);
        CHECK(!learned.reply_already_there);
}

static void test_dns_edns(struct dns_resolver *r)
{
        struct answer a;
        uint8_t q[512];
        size_t len = make_query(q, 0x777, "www.example.com", DNS_TYPE_A, true); /* 4096 */
        ask_raw("127.0.0.1", RESOLVER_PORT, q, len, 5000, &a);
        CHECK(ans_is_good_a(&a));
        CHECK(good.last_edns);
        CHECK_EQ_INT(good.last_edns_size, DNS_EDNS_UDP_MAX);
}

static void test_dns_denied(struct dns_resolver *r)
{
        struct answer a;
        unsigned before = good.queries;
        learned = (struct learned){0};
        ask("127.0.0.1", RESOLVER_PORT, 0x2222, "evil.com", DNS_TYPE_A, &a);
        CHECK(a.n >= 12);
        CHECK_EQ_INT(ans_id(&a), 0x2222);
        CHECK_EQ_INT(ans_rcode(&a), DNS_RCODE_NXDOMAIN);
        CHECK_EQ_INT(ans_count(&a), 0);
        /* The bare domain is not covered by "*.example.com". */
        ask("127.0.0.1", RESOLVER_PORT, 0x2223, "example.com", DNS_TYPE_A, &a);
        CHECK_EQ_INT(ans_rcode(&a), DNS_RCODE_NXDOMAIN);
        CHECK_EQ_INT(good.queries, before);
        CHECK_EQ_INT(learned.n, 0);
}

/* AAAA is forwarded like A, and its answer learned (as IPv6) before the reply leaves. */
static void test_dns_aaaa(struct dns_resolver *r)
{
        struct answer a;
        unsigned before = good.queries;
        learned = (struct learned){0};
        ask("127.0.0.1", RESOLVER_PORT, 0x3333, "api.example.com", DNS_TYPE_AAAA, &a);
        CHECK(a.n >= 12);
        CHECK_EQ_INT(ans_id(&a), 0x3333);
        CHECK_EQ_INT(ans_rcode(&a), DNS_RCODE_NOERROR);
        CHECK_EQ_INT(ans_count(&a), 1);
        CHECK_EQ_INT(good.queries, before + 1);
        CHECK_EQ_INT(learned.n, 1);
        CHECK_EQ_INT(learned.family, AF_INET6);
        char s6[INET6_ADDRSTRLEN];
        CHECK_EQ_STR(inet_ntop(AF_INET6, &learned.addr6, s6, sizeof(s6)), "2001:db8::7");
        CHECK_EQ_INT(learned.port, 443);
        CHECK_EQ_INT(learned.ttl, 7);
        CHECK(!learned.reply_already_there);
        /* Not on the list: NXDOMAIN for AAAA as for A, nothing asked upstream. */
        ask("127.0.0.1", RESOLVER_PORT, 0x3334, "evil.com", DNS_TYPE_AAAA, &a);
        CHECK_EQ_INT(ans_rcode(&a), DNS_RCODE_NXDOMAIN);
        CHECK_EQ_INT(good.queries, before + 1);
}

static void test_dns_sources(struct dns_resolver *r)
{
        struct answer a;
        unsigned before = good.queries;
        learned = (struct learned){0};
        ask("127.0.0.5", RESOLVER_PORT, 0x4444, "api.example.com", DNS_TYPE_A, &a);
        CHECK(a.n >= 12);
        CHECK_EQ_INT(ans_rcode(&a), DNS_RCODE_REFUSED);
        CHECK_EQ_INT(good.queries, before);

        /* "open": forwarded, nothing learned. */
        ask("127.0.0.6", RESOLVER_PORT, 0x4445, "anything.org", DNS_TYPE_A, &a);
        CHECK(ans_is_good_a(&a));
        CHECK_EQ_INT(ans_id(&a), 0x4445);
        CHECK_EQ_INT(good.queries, before + 1);
        CHECK_EQ_INT(learned.n, 0);

        /* Its network still being set up: no answer at all (the client asks again), and
         * nothing asked upstream. */
        uint8_t q[512];
        size_t len = make_query(q, 0x4446, "api.example.com", DNS_TYPE_A, false);
        ask_raw("127.0.0.7", RESOLVER_PORT, q, len, 300, &a);
        CHECK_EQ_INT((int)a.n, -1);
        CHECK_EQ_INT(good.queries, before + 1);
}

static void test_dns_malformed(struct dns_resolver *r)
{
        struct answer a;
        unsigned d = decided;
        /* A header, then a compression loop: FORMERR, header only. */
        uint8_t bad[] = {0x55, 0x66, 0x01, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0xc0, 0x0c, 0, 1, 0, 1};
        ask_raw("127.0.0.1", RESOLVER_PORT, bad, sizeof(bad), 2000, &a);
        CHECK_EQ_INT(a.n, 12);
        CHECK_EQ_INT(ans_id(&a), 0x5566);
        CHECK_EQ_INT(ans_rcode(&a), DNS_RCODE_FORMERR);
        /* Another opcode: NOTIMP. */
        uint8_t status[32];
        size_t len = make_query(status, 0x5567, "a.example.com", DNS_TYPE_A, false);
        status[2] = 2 << 3;
        ask_raw("127.0.0.1", RESOLVER_PORT, status, len, 2000, &a);
        CHECK_EQ_INT(ans_rcode(&a), DNS_RCODE_NOTIMP);
        /* A response or a runt: no answer at all. */
        len = make_query(status, 0x5568, "a.example.com", DNS_TYPE_A, false);
        status[2] |= 0x80;
        ask_raw("127.0.0.1", RESOLVER_PORT, status, len, 300, &a);
        CHECK_EQ_INT(a.n, -1);
        ask_raw("127.0.0.1", RESOLVER_PORT, bad, 5, 300, &a);
        CHECK_EQ_INT(a.n, -1);
        /* CHAOS class: REFUSED without asking the policy. */
        len = make_query(status, 0x5569, "version.bind", DNS_TYPE_TXT, false);
        status[len - 1] = 3;
        ask_raw("127.0.0.1", RESOLVER_PORT, status, len, 2000, &a);
        CHECK_EQ_INT(ans_rcode(&a), DNS_RCODE_REFUSED);
        CHECK_EQ_INT(decided, d);
}

static void test_dns_spoofed_answers(struct dns_resolver *r)
{
        struct answer a;
        learned = (struct learned){0};
        good.spoof_first = true;
        ask("127.0.0.1", RESOLVER_PORT, 0x6666, "api.example.com", DNS_TYPE_A, &a);
        good.spoof_first = false;
        CHECK(ans_is_good_a(&a));
        CHECK_EQ_INT(learned.n, 1);
        CHECK_EQ_STR(inet_ntoa(learned.addr), "198.51.100.7");
}

/* Read one length-prefixed message from a TCP socket, driving the loop. */
static bool tcp_read_msg(int fd, struct answer *a)
{
        size_t got = 0, want = 2;
        uint8_t buf[2 + sizeof(a->b)];
        while (got < want) {
                if (!run_until_readable(fd, 5000))
                        return false;
                ssize_t n = recv(fd, buf + got, want - got, MSG_DONTWAIT);
                if (n <= 0)
                        return false;
                got += (size_t)n;
                if (got == 2 && want == 2)
                        want = 2 + (size_t)(buf[0] << 8 | buf[1]);
                if (want > sizeof(buf))
                        return false;
        }
        a->n = (ssize_t)(want - 2);
        memcpy(a->b, buf + 2, want - 2);
        return true;
}

static int tcp_connect(const char *src_ip, uint16_t port)
{
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in from = {.sin_family = AF_INET},
                           to = {.sin_family = AF_INET, .sin_port = htons(port)};
        inet_pton(AF_INET, src_ip, &from.sin_addr);
        to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        CHECK(bind(fd, (struct sockaddr *)&from, sizeof(from)) == 0);
        /* Loopback: the kernel completes the handshake before the server accepts. */
        CHECK(connect(fd, (struct sockaddr *)&to, sizeof(to)) == 0);
        return fd;
}

static void test_dns_tcp(struct dns_resolver *r)
{
        struct answer a;
        learned = (struct learned){0};
        int fd = tcp_connect("127.0.0.1", RESOLVER_PORT);

        /* Two queries in one write (pipelined): the forwarded one, then a local NXDOMAIN. */
        uint8_t buf[1024];
        size_t n1 = make_query(buf + 2, 0x7001, "tcp.example.com", DNS_TYPE_A, false);
        buf[0] = 0;
        buf[1] = (uint8_t)n1;
        size_t n2 = make_query(buf + 2 + n1 + 2, 0x7002, "evil.com", DNS_TYPE_A, false);
        buf[2 + n1] = 0;
        buf[2 + n1 + 1] = (uint8_t)n2;
        CHECK(write_all(fd, buf, 2 + n1 + 2 + n2) == 0);

        client_fd = fd;
        CHECK(tcp_read_msg(fd, &a));
        client_fd = -1;
        CHECK_EQ_INT(ans_id(&a), 0x7001);
        CHECK(ans_is_good_a(&a));
        CHECK_EQ_INT(learned.n, 1);
        CHECK(!learned.reply_already_there);
        CHECK(tcp_read_msg(fd, &a));
        CHECK_EQ_INT(ans_id(&a), 0x7002);
        CHECK_EQ_INT(ans_rcode(&a), DNS_RCODE_NXDOMAIN);

        /* A query in two pieces on the same connection. */
        size_t n3 = make_query(buf + 2, 0x7003, "api.example.com", DNS_TYPE_AAAA, false);
        buf[0] = 0;
        buf[1] = (uint8_t)n3;
        CHECK(write_all(fd, buf, 5) == 0);
        CHECK(!run_until_readable(fd, 100));
        CHECK(write_all(fd, buf + 5, 2 + n3 - 5) == 0);
        CHECK(tcp_read_msg(fd, &a));
        CHECK_EQ_INT(ans_id(&a), 0x7003);
        CHECK_EQ_INT(ans_count(&a), 1); /* forwarded: the upstream's AAAA */
        close(fd);

        /* An oversized length prefix: the connection is closed. */
        fd = tcp_connect("127.0.0.1", RESOLVER_PORT);
        CHECK(write_all(fd, "\xff\xff", 2) == 0);
        CHECK(run_until_readable(fd, 2000));
        CHECK_EQ_INT(recv(fd, buf, sizeof(buf), MSG_DONTWAIT), 0);
        close(fd);

        close(fd);
}

static void test_dns_failover(void)
{
        struct answer a;
        /* Nothing listening on the first: ICMP refuses at once, the second answers. */
        struct dns_resolver *r = start("nameserver 127.0.0.3\nnameserver 127.0.0.2\n", 5354);
        ask("127.0.0.1", 5354, 0x8001, "api.example.com", DNS_TYPE_A, &a);
        CHECK(ans_is_good_a(&a));
        CHECK(a.ms < 1000);
        dns_resolver_stop(r);

        /* The first never answers: after DNS_UPSTREAM_TIMEOUT_MS the second. */
        unsigned before = silent.queries;
        r = start("nameserver 127.0.0.4\nnameserver 127.0.0.2\n", 5354);
        ask("127.0.0.1", 5354, 0x8002, "api.example.com", DNS_TYPE_A, &a);
        CHECK(ans_is_good_a(&a));
        CHECK(a.ms >= DNS_UPSTREAM_TIMEOUT_MS - 100 && a.ms < DNS_UPSTREAM_TIMEOUT_MS + 1500);
        CHECK_EQ_INT(silent.queries, before + 1);
        dns_resolver_stop(r);

        /* Only a silent one: SERVFAIL after the timeout. */
        r = start("nameserver 127.0.0.4\n", 5354);
        ask("127.0.0.1", 5354, 0x8003, "api.example.com", DNS_TYPE_A, &a);
        CHECK(a.n >= 12);
        CHECK_EQ_INT(ans_rcode(&a), DNS_RCODE_SERVFAIL);
        CHECK(a.ms >= DNS_UPSTREAM_TIMEOUT_MS - 100);

        /* A TCP client that resets its connection while its query is upstream: both go. */
        int tfd = tcp_connect("127.0.0.1", 5354);
        uint8_t q[512];
        size_t len = make_query(q + 2, 0x8004, "a.example.com", DNS_TYPE_A, false);
        q[0] = 0;
        q[1] = (uint8_t)len;
        CHECK(write_all(tfd, q, 2 + len) == 0);
        CHECK(!run_until_readable(tfd, 200));
        CHECK_EQ_INT(r->n_pending, 1);
        CHECK_EQ_INT(r->n_conns, 1);
        struct linger lg = {.l_onoff = 1, .l_linger = 0};
        CHECK(setsockopt(tfd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)) == 0);
        close(tfd);
        int ufd = udp_bound("127.0.0.1", 0);
        CHECK(!run_until_readable(ufd, 200));
        CHECK_EQ_INT(r->n_pending, 0);
        CHECK_EQ_INT(r->n_conns, 0);

        /* Stopping with queries in flight and a connection open frees everything (ASan). */
        len = make_query(q, 0x8005, "a.example.com", DNS_TYPE_A, false);
        struct sockaddr_in to = {.sin_family = AF_INET,
                                 .sin_port = htons(5354),
                                 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        CHECK(sendto(ufd, q, len, 0, (struct sockaddr *)&to, sizeof(to)) == (ssize_t)len);
        tfd = tcp_connect("127.0.0.1", 5354);
        CHECK(!run_until_readable(ufd, 200));
        CHECK_EQ_INT(r->n_pending, 1);
        CHECK_EQ_INT(r->n_conns, 1);
        dns_resolver_stop(r);
        close(ufd);
        close(tfd);

        /* An unreadable resolv.conf is an error at start. */
        struct in_addr lo = {htonl(INADDR_LOOPBACK)};
        CHECK_EQ_INT(dns_resolver_start(L, lo, 5354, "/nonexistent/resolv.conf", &policy, NULL, &r),
                     -ENOENT);
}

static void test_dns_reload(void)
{
        /* resolv.conf changes (DHCP, resolvconf): the new servers are used. */
        char path[] = "/tmp/paddock-test-resolv.XXXXXX";
        int fd = mkstemp(path);
        CHECK(write_all(fd, "nameserver 127.0.0.4\n", 21) == 0);
        close(fd);
        struct dns_resolver *r = NULL;
        struct in_addr lo = {htonl(INADDR_LOOPBACK)};
        CHECK_EQ_INT(dns_resolver_start(L, lo, 5354, path, &policy, NULL, &r), 0);
        if (!r)
                return;
        char tmp[64];
        snprintf(tmp, sizeof(tmp), "%s.new", path);
        fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        CHECK(write_all(fd, "nameserver 127.0.0.2\n", 21) == 0);
        close(fd);
        CHECK(rename(tmp, path) == 0);
        r->conf_checked_ms = 0; /* instead of waiting RESOLV_CONF_CHECK_MS */
        struct answer a;
        ask("127.0.0.1", 5354, 0x9001, "api.example.com", DNS_TYPE_A, &a);
        CHECK(ans_is_good_a(&a));
        CHECK(a.ms < 1000);

        /* Removed: the last good list stays. */
        unlink(path);
        r->conf_checked_ms = 0;
        ask("127.0.0.1", 5354, 0x9002, "api.example.com", DNS_TYPE_A, &a);
        CHECK(ans_is_good_a(&a));
        dns_resolver_stop(r);
}

static void test_dns_freebind(void)
{
        /* The gateway address need not exist yet. */
        struct dns_resolver *r = NULL;
        struct in_addr gw;
        inet_pton(AF_INET, "10.77.0.1", &gw);
        char path[] = "/tmp/paddock-test-resolv.XXXXXX";
        int fd = mkstemp(path);
        close(fd);
        CHECK_EQ_INT(dns_resolver_start(L, gw, 53, path, &policy, NULL, &r), 0);
        unlink(path);
        CHECK(r && r->n_upstreams == 1); /* empty file: 127.0.0.1 as glibc */
        dns_resolver_stop(r);
}

/* ---- harness -------------------------------------------------------------------------- */

static int lo_up(void)
{
        int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        struct ifreq ifr = {0};
        snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
        int r = 0;
        if (ioctl(fd, SIOCGIFFLAGS, &ifr) < 0)
                r = -errno;
        ifr.ifr_flags |= IFF_UP;
        if (r == 0 && ioctl(fd, SIOCSIFFLAGS, &ifr) < 0)
                r = -errno;
        close(fd);
        return r;
}

static void run_in_netns(void)
{
        CHECK_EQ_INT(lo_up(), 0);
        CHECK_EQ_INT(loop_new(&L), 0);
        log_set_level(LOG_ERROR);

        good.fd = udp_bound("127.0.0.2", 53);
        silent.fd = udp_bound("127.0.0.4", 53);
        struct loop_source *good_src = NULL, *silent_src = NULL;
        CHECK_EQ_INT(loop_add_fd(L, good.fd, EPOLLIN, upstream_io, &good, &good_src), 0);
        CHECK_EQ_INT(loop_add_fd(L, silent.fd, EPOLLIN, upstream_io, &silent, &silent_src), 0);

        struct dns_resolver *r = start("# test\nnameserver 127.0.0.2\n", RESOLVER_PORT);
        if (!r)
                return;
        RUN_R(test_dns_allowed_a, r);
        RUN_R(test_dns_edns, r);
        RUN_R(test_dns_denied, r);
        RUN_R(test_dns_aaaa, r);
        RUN_R(test_dns_sources, r);
        RUN_R(test_dns_malformed, r);
        RUN_R(test_dns_spoofed_answers, r);
        RUN_R(test_dns_tcp, r);
        dns_resolver_stop(r);
        RUN(test_dns_failover);
        RUN(test_dns_reload);
        RUN(test_dns_freebind);
        loop_remove(good_src);
        loop_remove(silent_src);
        close(good.fd);
        close(silent.fd);
        loop_free(L);
}

static int skip_all(void)
{
        UNIT_SKIP_ALL("no network namespace (%s)", strerror(errno));
}

static int child_main(void)
{
        run_in_netns();
        UNIT_EXIT();
}

int main(void)
{
        fflush(NULL);
        pid_t pid = fork();
        if (pid < 0)
                return 1;
        if (pid == 0) {
                /* A network namespace of our own: as root directly, else inside a user
                 * namespace (which grants the capabilities over the new network namespace). */
                if (unshare(CLONE_NEWNET) < 0 && unshare(CLONE_NEWUSER | CLONE_NEWNET) < 0) {
                        exit(skip_all());
                }
                exit(child_main());
        }
        int status;
        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR)
                        return 1;
        if (!WIFEXITED(status)) {
                fprintf(stderr, "  FAIL test_dns child died (status %#x)\n", status);
                return 1;
        }
        return WEXITSTATUS(status);
}

/* The gateway's strict request parser (src/gateway/reqparse.c) and token table
 * (src/gateway/tokens.c): what is accepted, what the engine then receives, and every
 * rejection the gateway promises (docs/security.md "Gateway request parsing"). */
#include "unit.h"
#include "gateway/reqparse.h"
#include "gateway/ingress.h"
#include "gateway/gateway.h"
#include "gateway/tokens.h"

#include <errno.h>
#include <fcntl.h>
#include <gnutls/crypto.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

static int parse(const char *s, struct rp_head *h)
{
        return reqparse_head(s, strlen(s), h);
}

static int status_of(const char *s)
{
        struct rp_head h;
        return parse(s, &h);
}

static char *emit(const char *s, const char *peer)
{
        static char out[RP_HEAD_MAX + 512];
        struct rp_head h;
        if (parse(s, &h) != RP_OK)
                return NULL;
        ssize_t n = reqparse_emit_head(&h, peer, out, sizeof(out));
        if (n < 0)
                return NULL;
        out[n] = '\0';
        return out;
}

static void test_gateway_parse__valid_get(void)
{
        struct rp_head h;
        const char *s = "GET /v1/envs?x=1 HTTP/1.1\r\nHost: gw\r\nAccept:  */* \r\n\r\nrest";
        CHECK_EQ_INT(parse(s, &h), RP_OK);
        CHECK_EQ_INT(h.head_len, strlen(s) - 4);
        CHECK_EQ_INT(h.method_len, 3);
        CHECK(strncmp(h.target, "/v1/envs?x=1", h.target_len) == 0 && h.target_len == 12);
        CHECK_EQ_INT(h.minor, 1);
        CHECK_EQ_INT(h.n_fields, 2);
        CHECK(strncmp(h.fields[1].value, "*/*", h.fields[1].value_len) == 0);
        CHECK_EQ_INT(h.fields[1].value_len, 3);
        CHECK(h.keep_alive);
        CHECK(!h.upgrade);
        CHECK_EQ_INT(h.body, RP_BODY_NONE);
}

static void test_gateway_parse__incomplete_is_more(void)
{
        CHECK_EQ_INT(status_of(""), RP_MORE);
        CHECK_EQ_INT(status_of("GET / HTTP/1.1\r\nHost: a\r\n"), RP_MORE);
        CHECK_EQ_INT(status_of("GET / HTTP/1.1\r\nHost: a\r\n\r"), RP_MORE);
}

static void test_gateway_parse__emit_is_canonical(void)
{
        const char *s = "POST /x HTTP/1.1\r\nHost: gw\r\nConnection: keep-alive, X-Drop\r\n"
                        "Keep-Alive: 5\r\nPaddock-Peer: 6.6.6.6:1\r\npaddock-peer: 7.7.7.7:1\r\n"
                        "Authorization: Bearer pdk_abc\r\nContent-Length: 0003\r\nTE: trailers\r\n\r\n";
        CHECK_EQ_STR(emit(s, "10.0.0.1:5555"),
                     "POST /x HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer pdk_abc\r\n"
                     "Content-Length: 3\r\nPaddock-Peer: 10.0.0.1:5555\r\n\r\n");
        CHECK_EQ_STR(emit("GET / HTTP/1.0\r\n\r\n", "[::1]:2"),
                     "GET / HTTP/1.0\r\nConnection: close\r\nPaddock-Peer: [::1]:2\r\n\r\n");
        CHECK_EQ_STR(emit("GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", "p"),
                     "GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\nPaddock-Peer: p\r\n\r\n");
        CHECK_EQ_STR(emit("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: Chunked\r\n\r\n", "p"),
                     "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nPaddock-Peer: p\r\n\r\n");
        struct rp_head h;
        CHECK_EQ_INT(parse("GET / HTTP/1.1\r\nHost: a\r\n\r\n", &h), RP_OK);
        char small[20];
        CHECK_EQ_INT(reqparse_emit_head(&h, "p", small, sizeof(small)), -ENOSPC);
}

static void test_gateway_parse__upgrade(void)
{
        struct rp_head h;
        CHECK_EQ_INT(parse("GET /ws HTTP/1.1\r\nHost: a\r\nConnection: keep-alive, Upgrade\r\n"
                           "Upgrade: websocket\r\nSec-WebSocket-Key: k\r\n\r\n", &h), RP_OK);
        CHECK(h.upgrade);
        CHECK_EQ_STR(emit("GET /ws HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n", "p"),
                     "GET /ws HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
                     "Paddock-Peer: p\r\n\r\n");
        /* Upgrade without Connection: upgrade is not an upgrade (and is dropped). */
        CHECK_EQ_INT(parse("GET /ws HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\n\r\n", &h), RP_OK);
        CHECK(!h.upgrade);
        CHECK_EQ_INT(status_of("POST /ws HTTP/1.1\r\nHost: a\r\nConnection: upgrade\r\n"
                               "Upgrade: websocket\r\nContent-Length: 1\r\n\r\n"), 400);
}

static void test_gateway_parse__line_endings(void)
{
        CHECK_EQ_INT(status_of("GET / HTTP/1.1\nHost: a\r\n\r\n"), 400);
        CHECK_EQ_INT(status_of("GET / HTTP/1.1\r\nHost: a\n\r\n"), 400);
        CHECK_EQ_INT(status_of("GET / HTTP/1.1\r\nHost: a\r\n\n"), 400);
        CHECK_EQ_INT(status_of("GET / HTTP/1.1\rHost: a\r\n\r\n"), 400);
        CHECK_EQ_INT(status_of("GET / HTTP/1.1\r\nHost: a\rb\r\n\r\n"), 400);
        CHECK_EQ_INT(status_of("\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n"), 400);
}

static void test_gateway_parse__request_line(void)
{
        CHECK_EQ_INT(status_of("GET / HTTP/1.2\r\nHost: a\r\n\r\n"), 400);
        CHECK_EQ_INT(status_of("GET / HTTP/2.0\r\nHost: a\r\n\r\n"), 400);
        CHECK_EQ_INT(status_of("GET / http/1.1\r\nHost: a\r\n\r\n"), 400);
        CHECK_EQ_INT(status_of("GET  / HTTP/1.1\r\nHost: a\r\n\r\n"), 400);
        CHECK_EQ_INT(status_of("GET / HTTP/1.1 \r\nHost: a\r\n\r\n"), 400);
        CHECK_EQ_INT(status_of("GET http://a/ HTTP/1.1\r\nHost: a\r\n\r\n"), 400);
        CHECK_EQ_INT(status_of("GET * HTTP/1.1\r\nHost: a\r\n\r\n"), 400);
        CHECK_EQ_INT(status_of("GET /a#b HTTP/1.1\r\nHost: a\r\n\r\n"), 400);
        CHECK_EQ_INT(status_of("GET /a\x7f HTTP/1.1\r\nHost: a\r\n\r\n"), 400);
        CHECK_EQ_INT(status_of("G(T / HTTP/1.1\r\nHost: a\r\n\r\n"), 400);
        CHECK_EQ_INT(status_of("GET /\r\nHost: a\r\n\r\n"), 400);
}

static void test_gateway_parse__fields(void)
{
        CHECK_EQ_INT(status_of("GET / HTTP/1.1\r\nHost: a\r\nX: a\r\n b\r\n\r\n"), 400);  /* obs-fold */
        CHECK_EQ_INT(status_of("GET / HTTP/1.1\r\nHost: a\r\nX : b\r\n\r\n"), 400);       /* space before : */
        CHECK_EQ_INT(status_of("GET / HTTP/1.1\r\nHost: a\r\n: b\r\n\r\n"), 400);
        CHECK_EQ_INT(status_of("GET / HTTP/1.1\r\nHost: a\r\nX(y): b\r\n\r\n"), 400);
        CHECK_EQ_INT(status_of("GET / HTTP/1.1\r\nHost: a\r\nNoColon\r\n\r\n"), 400);
        CHECK_EQ_INT(status_of("GET / HTTP/1.1\r\nHost: a\r\nX: a\x01z\r\n\r\n"), 400);
        CHECK_EQ_INT(status_of("GET / HTTP/1.1\r\nHost: a\r\nX: a\x7fz\r\n\r\n"), 400);
        CHECK_EQ_INT(status_of("GET / HTTP/1.1\r\nHost: a\r\nX: a\tz \xc3\xa9\r\n\r\n"), RP_OK);
        CHECK_EQ_INT(status_of("GET / HTTP/1.1\r\n\r\n"), 400);                          /* no Host */
        CHECK_EQ_INT(status_of("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"), 400);
        CHECK_EQ_INT(status_of("GET / HTTP/1.0\r\n\r\n"), RP_OK);
        CHECK_EQ_INT(status_of("GET / HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer x\r\n"
                               "Authorization: Bearer y\r\n\r\n"), 400);
}

static void test_gateway_parse__framing(void)
{
        struct rp_head h;
        CHECK_EQ_INT(status_of("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n"
                               "Transfer-Encoding: chunked\r\n\r\n"), 400);
        CHECK_EQ_INT(status_of("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n"
                               "Content-Length: 3\r\n\r\n"), 400);
        CHECK_EQ_INT(status_of("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3, 3\r\n\r\n"), 400);
        CHECK_EQ_INT(status_of("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: +3\r\n\r\n"), 400);
        CHECK_EQ_INT(status_of("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0x3\r\n\r\n"), 400);
        CHECK_EQ_INT(status_of("POST / HTTP/1.1\r\nHost: a\r\nContent-Length:\r\n\r\n"), 400);
        CHECK_EQ_INT(status_of("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1234567890123456\r\n\r\n"), 400);
        CHECK_EQ_INT(status_of("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"), 400);
        CHECK_EQ_INT(status_of("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n"
                               "Transfer-Encoding: chunked\r\n\r\n"), 400);
        CHECK_EQ_INT(status_of("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: identity\r\n\r\n"), 400);
        CHECK_EQ_INT(status_of("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n"), 400);
        CHECK_EQ_INT(parse("POST / HTTP/1.1\r\nHost: a\r\ncontent-length: 123456789012345\r\n\r\n", &h), RP_OK);
        CHECK_EQ_INT(h.body, RP_BODY_LENGTH);
        CHECK(h.content_length == 123456789012345ULL);
        CHECK_EQ_INT(parse("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: CHUNKED\r\n\r\n", &h), RP_OK);
        CHECK_EQ_INT(h.body, RP_BODY_CHUNKED);
}

static void test_gateway_parse__limits(void)
{
        static char big[RP_HEAD_MAX + 64];
        /* A request line over the limit: 414, even before the head ends. */
        memset(big, 'a', sizeof(big));
        memcpy(big, "GET /", 5);
        CHECK_EQ_INT(reqparse_head(big, RP_LINE_MAX + 1, &(struct rp_head){ 0 }), 414);
        /* A head over 16 KiB: 431. */
        int n = snprintf(big, sizeof(big), "GET / HTTP/1.1\r\nHost: a\r\nX: ");
        memset(big + n, 'b', sizeof(big) - (size_t)n);
        CHECK_EQ_INT(reqparse_head(big, sizeof(big), &(struct rp_head){ 0 }), 431);
        /* 100 fields pass, 101 do not. */
        char *s = malloc(8192), *p = s;
        p += sprintf(p, "GET / HTTP/1.1\r\n");
        for (int i = 0; i < 99; i++)
                p += sprintf(p, "X-%d: v\r\n", i);
        p += sprintf(p, "Host: a\r\n");
        strcpy(p, "\r\n");
        CHECK_EQ_INT(status_of(s), RP_OK);
        p += sprintf(p, "X-last: v\r\n");
        strcpy(p, "\r\n");
        CHECK_EQ_INT(status_of(s), 431);
        free(s);
}

static void test_gateway_parse__head_ready_incremental(void)
{
        const char *s = "GET / HTTP/1.1\r\nHost: a\r\n\r\n";
        size_t scanned = 0, len = strlen(s);
        for (size_t i = 1; i < len; i++)
                CHECK(!reqparse_head_ready(s, i, &scanned));
        CHECK(reqparse_head_ready(s, len, &scanned));
        scanned = 0;
        CHECK(reqparse_head_ready("GET /\n", 6, &scanned)); /* bare LF: answer at once */
        scanned = 0;
        CHECK(reqparse_head_ready("GET /\rx", 7, &scanned));
        static char line[RP_LINE_MAX + 2];
        memset(line, 'a', sizeof(line));
        scanned = 0;
        CHECK(!reqparse_head_ready(line, RP_LINE_MAX, &scanned));
        CHECK(reqparse_head_ready(line, RP_LINE_MAX + 1, &scanned));
}

static void test_gateway_parse__bearer(void)
{
        struct rp_head h;
        const char *t;
        size_t n;
        CHECK_EQ_INT(parse("GET / HTTP/1.1\r\nHost: a\r\nAuthorization: bearer pdk_a-b_c==\r\n\r\n", &h), RP_OK);
        CHECK(reqparse_bearer(&h, &t, &n));
        CHECK(n == 11 && strncmp(t, "pdk_a-b_c==", n) == 0);
        const char *bad[] = {
                "Authorization: Basic dXNlcjpw\r\n", "Authorization: Bearer\r\n",
                "Authorization: Bearer  x\r\n", "Authorization: Bearer a=b\r\n",
                "Authorization: Bearer a b\r\n", "Authorization: Bearerx\r\n", "",
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                char req[256];
                snprintf(req, sizeof(req), "GET / HTTP/1.1\r\nHost: a\r\n%s\r\n", bad[i]);
                CHECK_EQ_INT(parse(req, &h), RP_OK);
                CHECK(!reqparse_bearer(&h, &t, &n));
        }
}

/* Feeds the body in pieces of `step` bytes into an output of `cap` bytes at a time. */
static int feed_all(const char *head, const char *body, size_t step, size_t cap, char *out,
                    size_t *ret_len)
{
        struct rp_head h;
        if (parse(head, &h) != RP_OK)
                return -1;
        struct reqbody b;
        reqbody_init(&b, &h);
        size_t len = strlen(body), pos = 0, o = 0;
        for (int guard = 0; guard < 100000 && !reqbody_done(&b) && pos < len; guard++) {
                size_t n = len - pos < step ? len - pos : step;
                size_t used, made;
                int r = reqbody_feed(&b, body + pos, n, out + o, cap, &used, &made);
                if (r != RP_OK)
                        return r;
                pos += used;
                o += made;
        }
        out[o] = '\0';
        *ret_len = pos;
        return reqbody_done(&b) ? RP_OK : RP_MORE;
}

static void test_gateway_parse__chunked_reemitted(void)
{
        const char *head = "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n";
        const char *body = "0003\r\nabc\r\nA\r\n0123456789\r\n0\r\nX-Trailer: 1\r\n\r\nNEXT";
        const char *want = "3\r\nabc\r\na\r\n0123456789\r\n0\r\n\r\n";
        static const size_t steps[] = { 1, 2, 7, 1000 };
        for (size_t i = 0; i < 4; i++) {
                char out[256];
                size_t used = 0;
                CHECK_EQ_INT(feed_all(head, body, steps[i], 32, out, &used), RP_OK);
                CHECK_EQ_STR(out, want);
                CHECK_EQ_INT(used, strlen(body) - 4); /* the next request is left alone */
        }
        char out[256];
        size_t used;
        CHECK_EQ_INT(feed_all(head, "3;ext=1\r\nabc\r\n0\r\n\r\n", 100, 64, out, &used), 400);
        CHECK_EQ_INT(feed_all(head, "3\nabc\r\n0\r\n\r\n", 100, 64, out, &used), 400);
        CHECK_EQ_INT(feed_all(head, "3\r\nabcd\r\n0\r\n\r\n", 100, 64, out, &used), 400);
        CHECK_EQ_INT(feed_all(head, "3\r\nabc\n0\r\n\r\n", 100, 64, out, &used), 400);
        CHECK_EQ_INT(feed_all(head, "1000000000000000\r\n", 100, 64, out, &used), 400);
        CHECK_EQ_INT(feed_all(head, " 3\r\nabc\r\n0\r\n\r\n", 100, 64, out, &used), 400);
        CHECK_EQ_INT(feed_all(head, "\r\n", 100, 64, out, &used), 400);
        CHECK_EQ_INT(feed_all(head, "0\r\n\r\n", 1, 64, out, &used), RP_OK);
        CHECK_EQ_STR(out, "0\r\n\r\n");
}

static void test_gateway_parse__length_body_passes_through(void)
{
        char out[64];
        size_t used;
        CHECK_EQ_INT(feed_all("PUT / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\n", "hello, next",
                              2, 32, out, &used), RP_OK);
        CHECK_EQ_STR(out, "hello");
        CHECK_EQ_INT(used, 5);
        struct rp_head h;
        struct reqbody b;
        CHECK_EQ_INT(parse("PUT / HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n", &h), RP_OK);
        reqbody_init(&b, &h);
        CHECK(reqbody_done(&b));
}

static void hex(const char *secret, char out[65])
{
        uint8_t d[32];
        gnutls_hash_fast(GNUTLS_DIG_SHA256, secret, strlen(secret), d);
        for (int i = 0; i < 32; i++)
                sprintf(out + 2 * i, "%02x", d[i]);
}

static void test_gateway_tokens__lookup_expiry_and_rate(void)
{
        char ha[65], hb[65], msg[512];
        hex("pdk_a", ha);
        hex("pdk_b", hb);
        snprintf(msg, sizeof(msg),
                 "{\"op\":\"tokens\",\"tokens\":[{\"name\":\"a\",\"hash\":\"%s\",\"admin\":false,"
                 "\"rate\":2.0,\"expires_at\":0},{\"name\":\"b\",\"hash\":\"%s\",\"rate\":0,"
                 "\"expires_at\":1000}]}", ha, hb);
        struct gw_tokens t = { 0 };
        CHECK_EQ_INT(tokens_load(&t, msg, strlen(msg), 0), 0);
        CHECK_EQ_INT(t.n, 2);
        struct gw_token *a = tokens_find(&t, "pdk_a", 5, 2000);
        CHECK(a && strcmp(a->name, "a") == 0);
        CHECK(tokens_find(&t, "pdk_b", 5, 999) != NULL);
        CHECK(tokens_find(&t, "pdk_b", 5, 1000) == NULL); /* expired */
        CHECK(tokens_find(&t, "pdk_c", 5, 0) == NULL);
        CHECK(tokens_valid(&t, "b", t.v[1].hash, 999));
        CHECK(!tokens_valid(&t, "b", t.v[1].hash, 1000));
        CHECK(!tokens_valid(&t, "a", t.v[1].hash, 0));
        CHECK_EQ_INT(tokens_next_expiry(&t, 0), 1000);
        CHECK_EQ_INT(tokens_next_expiry(&t, 1000), 0);
        /* rate 2/s, burst 2: two now, the third waits; refilled after a second. */
        unsigned retry = 0;
        CHECK_EQ_INT(tokens_take(a, 0, &retry), 0);
        CHECK_EQ_INT(tokens_take(a, 0, &retry), 0);
        CHECK_EQ_INT(tokens_take(a, 0, &retry), -EAGAIN);
        CHECK_EQ_INT(retry, 1);
        CHECK_EQ_INT(tokens_take(a, 500, &retry), 0);
        /* A new table keeps the bucket of an unchanged token. */
        CHECK_EQ_INT(tokens_load(&t, msg, strlen(msg), 500), 0);
        a = tokens_find(&t, "pdk_a", 5, 0);
        CHECK_EQ_INT(tokens_take(a, 500, &retry), -EAGAIN);
        /* rate 0.1/s: Retry-After rounds up to whole seconds (a fresh table: no carried bucket). */
        tokens_free(&t);
        snprintf(msg, sizeof(msg), "{\"op\":\"tokens\",\"tokens\":[{\"name\":\"a\",\"hash\":\"%s\","
                                   "\"rate\":0.1}]}", ha);
        CHECK_EQ_INT(tokens_load(&t, msg, strlen(msg), 0), 0);
        a = tokens_find(&t, "pdk_a", 5, 0);
        CHECK_EQ_INT(tokens_take(a, 0, &retry), 0);
        CHECK_EQ_INT(tokens_take(a, 0, &retry), -EAGAIN);
        CHECK_EQ_INT(retry, 10);
        /* Malformed tables are refused and the old one stays. */
        CHECK_EQ_INT(tokens_load(&t, "{\"tokens\":[{\"name\":\"x\",\"hash\":\"zz\"}]}", 37, 0), -EINVAL);
        CHECK_EQ_INT(tokens_load(&t, "nope", 4, 0), -EINVAL);
        CHECK_EQ_INT(t.n, 1);
        tokens_free(&t);
}

/* Runs fn in a child; returns its wait status. */
static int in_child(void (*fn)(void))
{
        pid_t pid = fork();
        if (pid == 0) {
                fn();
                _exit(0);
        }
        int st = 0;
        waitpid(pid, &st, 0);
        return st;
}

static void landlocked_open(void)
{
        int r = gw_landlock();
        if (r == -EOPNOTSUPP)
                _exit(77);
        if (r <= 0)
                _exit(2);
        int fd = open("/etc/passwd", O_RDONLY | O_CLOEXEC);
        _exit(fd < 0 && errno == EACCES ? 0 : 3);
}

static void seccomped_getppid(void)
{
        if (gw_seccomp() < 0)
                _exit(2);
        char b[1];
        (void)!write(-1, b, 0); /* allowed: fails with EBADF, the process lives */
        (void)getppid();        /* not on the list: killed */
        _exit(4);
}

static void test_gateway_confine__no_files_and_the_allowlist(void)
{
        int st = in_child(landlocked_open);
        if (WIFEXITED(st) && WEXITSTATUS(st) == 77) {
                SKIP("no Landlock in this kernel");
        } else {
                CHECK(WIFEXITED(st));
                CHECK_EQ_INT(WEXITSTATUS(st), 0);
        }
        st = in_child(seccomped_getppid);
        CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGSYS);
}


/* Preview URLs (src/gateway/ingress.c): which Hosts are an environment's port, the
 * credentials found, and what the environment receives. */
static bool match(const char *hostline, struct ingress_target *t)
{
        static char req[512];
        struct rp_head h;
        snprintf(req, sizeof(req), "GET / HTTP/1.1\r\nHost: %s\r\n\r\n", hostline);
        return parse(req, &h) == RP_OK && ingress_match(&h, "preview.test", t);
}

static void test_gateway_ingress__match(void)
{
        struct ingress_target t;
        CHECK(match("8080-web.preview.test", &t) && t.port == 8080 && strcmp(t.env, "web") == 0);
        CHECK(match("3000-My_Box-2.PREVIEW.Test:8443", &t) && t.port == 3000 &&
              strcmp(t.env, "my_box-2") == 0);
        CHECK(match("65535-a.preview.test", &t) && t.port == 65535);
        CHECK(!match("65536-a.preview.test", &t));
        CHECK(!match("0-a.preview.test", &t));
        CHECK(!match("080-a.preview.test", &t));
        CHECK(!match("8080.preview.test", &t));
        CHECK(!match("8080-.preview.test", &t));
        CHECK(!match("8080--a.preview.test", &t));
        CHECK(!match("8080-a.b.preview.test", &t));
        CHECK(!match("preview.test", &t));
        CHECK(!match("8080-a.preview.test.evil", &t));
        CHECK(!match("8080-a.xpreview.test", &t));
        CHECK(!match("8080-a.preview.test:", &t));
        CHECK(!match("8080-a.preview.test:80x", &t));
        CHECK(!match("127.0.0.1:8443", &t));
        CHECK(!match("[::1]:8443", &t));

        /* E2B's envd port with E2b-Sandbox-Id is the API's; without it, a preview. */
        struct rp_head h;
        CHECK_EQ_INT(parse("GET /health HTTP/1.1\r\nHost: 49983-sbx1.preview.test\r\n"
                           "E2b-Sandbox-Id: sbx1\r\n\r\n", &h), RP_OK);
        CHECK(ingress_match(&h, "preview.test", &t) && ingress_is_envd(&h, &t));
        CHECK_EQ_INT(parse("GET /health HTTP/1.1\r\nHost: 49983-sbx1.preview.test\r\n\r\n", &h),
                     RP_OK);
        CHECK(ingress_match(&h, "preview.test", &t) && !ingress_is_envd(&h, &t));
        CHECK_EQ_INT(parse("GET / HTTP/1.1\r\nHost: 3000-sbx1.preview.test\r\n"
                           "E2b-Sandbox-Id: sbx1\r\n\r\n", &h), RP_OK);
        CHECK(ingress_match(&h, "preview.test", &t) && !ingress_is_envd(&h, &t));
}

static void test_gateway_ingress__credentials_and_head(void)
{
        static const char secret[] = "pdk_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";
        char req[1024], out[2048], loc[256];
        struct rp_head h;
        const char *v;
        size_t n;
        snprintf(req, sizeof(req),
                 "POST /x?a=1&paddock_token=%s&b=2 HTTP/1.1\r\nHost: 1-a.preview.test\r\n"
                 "Authorization: Bearer %s\r\nCookie: x=1; paddock_token=%s ;y=2\r\n"
                 "e2b-traffic-access-token: tt\r\nX-Forwarded-For: 6.6.6.6\r\n"
                 "Paddock-Peer: 1.2.3.4:5\r\nContent-Length: 3\r\n\r\n",
                 secret, secret, secret);
        CHECK_EQ_INT(parse(req, &h), RP_OK);
        CHECK(ingress_secret(&h, &v, &n) && n == strlen(secret) && !memcmp(v, secret, n));
        CHECK(ingress_traffic_token(&h, &v, &n) && n == 2 && !memcmp(v, "tt", 2));
        CHECK(ingress_query_secret(&h, &v, &n, loc, sizeof(loc)) && n == strlen(secret));
        CHECK_EQ_STR(loc, "/x?a=1&b=2");
        ssize_t k = ingress_emit_head(&h, "10.0.0.1", true, out, sizeof(out));
        CHECK(k > 0);
        out[k > 0 ? k : 0] = '\0';
        CHECK(strstr(out, "POST /x?a=1&paddock_token=") == out); /* the target as sent */
        CHECK(strstr(out, "Host: 1-a.preview.test\r\n") != NULL);
        CHECK(strstr(out, "Authorization") == NULL);
        CHECK(strstr(out, "Cookie: x=1; y=2\r\n") != NULL);
        CHECK(strstr(out, "e2b-traffic") == NULL && strstr(out, "6.6.6.6") == NULL);
        CHECK(strstr(out, "Paddock-Peer") == NULL);
        CHECK(strstr(out, "Content-Length: 3\r\nX-Forwarded-For: 10.0.0.1\r\n"
                          "X-Forwarded-Proto: https\r\n\r\n") != NULL);
        CHECK_EQ_INT(ingress_emit_head(&h, "10.0.0.1", true, out, 40), -ENOSPC);

        /* Another Bearer credential is the application's: kept, and not Paddock's. */
        CHECK_EQ_INT(parse("GET /?paddock_token=nope HTTP/1.1\r\nHost: 1-a.preview.test\r\n"
                           "Authorization: Bearer app-secret\r\nCookie: paddock_token=x\r\n"
                           "Connection: Upgrade\r\nUpgrade: websocket\r\n\r\n", &h), RP_OK);
        CHECK(!ingress_secret(&h, &v, &n));
        CHECK(!ingress_traffic_token(&h, &v, &n));
        CHECK(!ingress_query_secret(&h, &v, &n, loc, sizeof(loc)));
        k = ingress_emit_head(&h, "::1", false, out, sizeof(out));
        CHECK(k > 0);
        out[k > 0 ? k : 0] = '\0';
        CHECK(strstr(out, "Authorization: Bearer app-secret\r\n") != NULL);
        CHECK(strstr(out, "Cookie") == NULL); /* only paddock_token was there */
        CHECK(strstr(out, "Connection: Upgrade\r\nUpgrade: websocket\r\n") != NULL);
        CHECK(strstr(out, "X-Forwarded-Proto: http\r\n") != NULL);
}

int main(void)
{
        RUN(test_gateway_parse__valid_get);
        RUN(test_gateway_ingress__match);
        RUN(test_gateway_ingress__credentials_and_head);
        RUN(test_gateway_parse__incomplete_is_more);
        RUN(test_gateway_parse__emit_is_canonical);
        RUN(test_gateway_parse__upgrade);
        RUN(test_gateway_parse__line_endings);
        RUN(test_gateway_parse__request_line);
        RUN(test_gateway_parse__fields);
        RUN(test_gateway_parse__framing);
        RUN(test_gateway_parse__limits);
        RUN(test_gateway_parse__head_ready_incremental);
        RUN(test_gateway_parse__bearer);
        RUN(test_gateway_parse__chunked_reemitted);
        RUN(test_gateway_parse__length_body_passes_through);
        RUN(test_gateway_tokens__lookup_expiry_and_rate);
        RUN(test_gateway_confine__no_files_and_the_allowlist);
        UNIT_EXIT();
}

/* The CLI's HTTP/1.1 client: the response parser (src/lib/http1.c) fed whole, byte by byte and
 * malformed; then client.c against a fake paddockd on a real unix socket (a forked child that
 * answers with canned bytes): chunked uploads, a daemon that closes mid-body, an early answer
 * to an upload it will not read, and signals arriving while the client waits; then the
 * WebSocket handshake (wsclient.c) against good, refusing and broken answers.
 *
 * The unit-test build links only libpaddock.a, and the client lives in the CLI, so its sources
 * are compiled into this file (as test_supervise.c does with daemon files). */
#include "../../src/cli/client.c"
#include "../../src/cli/hostkey.c"
#include "lib/http1.h"
#include "../../src/cli/tls.c"
#include "../../src/cli/transport.c"
#include "../../src/cli/wsclient.c"

/* This build links libwslay and libnettle (LIB_LIBS), so the CLI's loaders of them stand idle;
 * src/cli/lazylib.c itself, whose forwarders would shadow the libraries, is left out. */
int lazy_wslay(void)
{
        return 0;
}

int lazy_nettle(void)
{
        return 0;
}

#include "unit.h"

#include <ctype.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>

/* ---- the parser ------------------------------------------------------------------------- */

struct got {
        char body[1 << 16];
        size_t len;
        int stop_after; /* > 0: the body function fails once this many bytes came */
};

static int collect(const char *data, size_t len, void *userdata)
{
        struct got *g = userdata;
        if (g->len + len > sizeof(g->body))
                return -ENOSPC;
        memcpy(g->body + g->len, data, len);
        g->len += len;
        if (g->stop_after > 0 && g->len >= (size_t)g->stop_after)
                return -ECANCELED;
        return 0;
}

/* Parse text fed in pieces of step bytes (0: whole), then the connection's end when eof.
 * Returns the first error, or 0; p is left for the caller to inspect (and to http1_done). */
static int parse_in_steps(struct http1 *p, const char *text, size_t len, size_t step, bool eof,
                          struct got *g)
{
        http1_init(p);
        if (step == 0)
                step = len ? len : 1;
        for (size_t off = 0; off < len; off += step) {
                size_t n = len - off < step ? len - off : step;
                int r = http1_feed(p, text + off, n, collect, g);
                if (r < 0)
                        return r;
        }
        return eof ? http1_eof(p) : 0;
}

/* Parse text at every step size from 1 to 7 and whole; all must agree on status and body. */
static void check_parses(const char *text, int status, const char *body, bool eof)
{
        static const size_t steps[] = {0, 1, 2, 3, 5, 7};
        for (size_t i = 0; i < ELEMENTSOF(steps); i++) {
                struct http1 p;
                struct got g = {};
                int r = parse_in_steps(&p, text, strlen(text), steps[i], eof, &g);
                CHECK_EQ_INT(r, 0);
                CHECK(http1_complete(&p));
                CHECK_EQ_INT(p.status, status);
                CHECK_EQ_INT(g.len, strlen(body));
                CHECK(g.len == strlen(body) && memcmp(g.body, body, g.len) == 0);
                if (r < 0)
                        fprintf(stderr, "  (step %zu: %s)\n", steps[i], p.why);
                http1_done(&p);
        }
}

/* text must fail with err at every step size (the connection's end included). */
static void check_fails(const char *text, size_t len, int err)
{
        static const size_t steps[] = {0, 1, 3};
        for (size_t i = 0; i < ELEMENTSOF(steps); i++) {
                struct http1 p;
                struct got g = {};
                int r = parse_in_steps(&p, text, len, steps[i], true, &g);
                if (r != err)
                        fprintf(stderr, "  for %.60s (step %zu): %d (%s)\n", text, steps[i], r,
                                p.why ? p.why : "-");
                CHECK_EQ_INT(r, err);
                CHECK(!http1_complete(&p));
                CHECK(r == 0 || p.why != NULL);
                /* A failed parser stays failed. */
                CHECK_EQ_INT(http1_feed(&p, "x", 1, collect, &g), r);
                http1_done(&p);
        }
}

#define FAILS(text, err) check_fails((text), sizeof(text) - 1, (err))

static void test_http1_content_length(void)
{
        check_parses("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n"
                     "\r\n{\"a\": true}",
                     200, "{\"a\": true}", false);
        /* Bytes after the end are not body. */
        check_parses("HTTP/1.1 404 Not Found\r\ncontent-length: 2\r\n\r\nabEXTRA", 404, "ab", false);
        check_parses("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", 200, "", false);
        /* The same length twice is one length; an empty reason phrase is allowed. */
        check_parses("HTTP/1.1 201 \r\nContent-Length: 3\r\nContent-Length:3  \r\n\r\nxyz", 201,
                     "xyz", false);
        check_parses("HTTP/1.1 200\r\nContent-Length: 3\r\n\r\nxyz", 200, "xyz", false);
        check_parses("HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\nq", 200, "q", false);
}

static void test_http1_chunked(void)
{
        check_parses("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                     "5\r\nhello\r\n1;name=value\r\n \r\nA\r\n0123456789\r\n0\r\n\r\n",
                     200, "hello 0123456789", false);
        /* Upper and lower case hex, leading zeros, an extension after blanks, a trailer. */
        check_parses("HTTP/1.1 200 OK\r\ntransfer-encoding: CHUNKED\r\n\r\n"
                     "00000001\r\na\r\nf ;x\r\n0123456789abcde\r\n0\r\nX-Trailer: yes\r\n\r\n",
                     200, "a0123456789abcde", false);
        /* NDJSON as paddockd streams exec output. */
        check_parses("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: keep-alive\r\n"
                     "\r\n1c\r\n{\"stream\":\"stdout\",\"d\":\"x\"}\n\r\n"
                     "e\r\n{\"exit_code\":0\r\n2\r\n}\n\r\n0\r\n\r\n",
                     200, "{\"stream\":\"stdout\",\"d\":\"x\"}\n{\"exit_code\":0}\n", false);
        /* The largest size that fits is a size (the body is then cut off, an error). */
        FAILS("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n7fffffffffffffff\r\nabc",
              -EPROTO);
}

static void test_http1_no_body(void)
{
        check_parses("HTTP/1.1 204 No Content\r\nContent-Length: 10\r\n\r\n", 204, "", false);
        check_parses("HTTP/1.1 304 Not Modified\r\nTransfer-Encoding: chunked\r\n\r\n", 304, "",
                     false);
        struct http1 p;
        http1_init(&p);
        p.head_request = true;
        struct got g = {};
        const char *t = "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n";
        CHECK_EQ_INT(http1_feed(&p, t, strlen(t), collect, &g), 0);
        CHECK(http1_complete(&p));
        CHECK_EQ_INT(g.len, 0);
        http1_done(&p);
}

static void test_http1_interim(void)
{
        check_parses("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 100 Continue\r\nX: y\r\n\r\n"
                     "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
                     200, "ok", false);
        /* An interim response's headers do not frame the final one's body. */
        check_parses("HTTP/1.1 103 Early Hints\r\nContent-Length: 5\r\n\r\n"
                     "HTTP/1.1 200 OK\r\n\r\nuntil the end",
                     200, "until the end", true);
        FAILS("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n", -EPROTO);
}

/* The fields an on_field function saw, as "name=value;" each. */
struct fields {
        char seen[512];
        size_t len;
        int count, stop_at; /* stop_at > 0: refuse that field */
};

static int record_field(const char *name, size_t name_len, const char *value, size_t value_len,
                        void *userdata)
{
        struct fields *f = userdata;
        int n = snprintf(f->seen + f->len, sizeof(f->seen) - f->len, "%.*s=%.*s;", (int)name_len,
                         name, (int)value_len, value);
        if (n > 0 && (size_t)n < sizeof(f->seen) - f->len)
                f->len += (size_t)n;
        if (++f->count == f->stop_at)
                return -ECANCELED;
        return 0;
}

/* With upgrade set, a 101 is the final answer and ends at its empty line: what follows is the
 * new protocol's (used says where it starts). Interim fields are not reported. */
static void test_http1_upgrade(void)
{
        static const char t[] = "HTTP/1.1 100 Continue\r\nX-Interim: 1\r\n\r\n"
                                "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                                "Connection: Upgrade\r\nSec-WebSocket-Accept:  abc= \r\n\r\n"
                                "\x81\x02hi";
        static const size_t steps[] = {1, 2, 3, 5, 7, sizeof(t) - 1};
        for (size_t i = 0; i < ELEMENTSOF(steps); i++) {
                struct http1 p;
                http1_init(&p);
                p.upgrade = true;
                struct fields f = {};
                p.on_field = record_field;
                p.field_data = &f;
                struct got g = {};
                size_t off = 0, end = 0;
                while (off < sizeof(t) - 1 && !http1_complete(&p)) {
                        size_t n = sizeof(t) - 1 - off < steps[i] ? sizeof(t) - 1 - off : steps[i];
                        CHECK_EQ_INT(http1_feed(&p, t + off, n, collect, &g), 0);
                        end = off + p.used;
                        off += n;
                }
                CHECK(http1_complete(&p));
                CHECK_EQ_INT(p.status, 101);
                CHECK_EQ_INT(end, sizeof(t) - 1 - 4);
                CHECK_EQ_INT(g.len, 0);
                CHECK_EQ_STR(f.seen, "Upgrade=websocket;Connection=Upgrade;"
                                     "Sec-WebSocket-Accept=abc=;");
                http1_done(&p);
        }
        /* Asked to switch, refused: an ordinary response, body and all. */
        struct http1 p;
        http1_init(&p);
        p.upgrade = true;
        struct got g = {};
        const char *no = "HTTP/1.1 403 Forbidden\r\nContent-Length: 2\r\n\r\nno";
        CHECK_EQ_INT(http1_feed(&p, no, strlen(no), collect, &g), 0);
        CHECK(http1_complete(&p) && p.status == 403 && g.len == 2);
        CHECK_EQ_INT(p.used, strlen(no));
        http1_done(&p);
        /* Still strict about what frames a body, and a field function can stop the parse. */
        http1_init(&p);
        p.upgrade = true;
        const char *bad = "HTTP/1.1 101 Switching\r\nTransfer-Encoding: gzip\r\n\r\n";
        CHECK_EQ_INT(http1_feed(&p, bad, strlen(bad), collect, &g), -EPROTO);
        http1_done(&p);
        http1_init(&p);
        struct fields f = {.stop_at = 2};
        p.on_field = record_field;
        p.field_data = &f;
        const char *ok = "HTTP/1.1 200 OK\r\nA: 1\r\nB: 2\r\nC: 3\r\nContent-Length: 0\r\n\r\n";
        CHECK_EQ_INT(http1_feed(&p, ok, strlen(ok), collect, &g), -ECANCELED);
        CHECK(!http1_complete(&p) && f.count == 2);
        CHECK_EQ_INT(http1_feed(&p, "x", 1, collect, &g), -ECANCELED);
        http1_done(&p);
}

static void test_http1_close_delimited(void)
{
        check_parses("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nall of this", 200, "all of this",
                     true);
        struct http1 p;
        struct got g = {};
        const char *t = "HTTP/1.1 200 OK\r\nConnection: Keep-Alive, close\r\n\r\n";
        CHECK_EQ_INT(parse_in_steps(&p, t, strlen(t), 0, false, &g), 0);
        CHECK(p.close && !http1_complete(&p) && http1_head_done(&p));
        CHECK_EQ_INT(http1_eof(&p), 0);
        CHECK(http1_complete(&p));
        http1_done(&p);
}

static void test_http1_bad_status_line(void)
{
        FAILS("HTTP/1.1 200OK\r\n\r\n", -EPROTO);
        FAILS("HTTP/1.2 200 OK\r\n\r\n", -EPROTO);
        FAILS("HTTP/2 200 OK\r\n\r\n", -EPROTO);
        FAILS("http/1.1 200 OK\r\n\r\n", -EPROTO);
        FAILS("HTTP/1.1  200 OK\r\n\r\n", -EPROTO);
        FAILS("HTTP/1.1 20 OK\r\n\r\n", -EPROTO);
        FAILS("HTTP/1.1 2000 OK\r\n\r\n", -EPROTO);
        FAILS("HTTP/1.1 -20 OK\r\n\r\n", -EPROTO);
        FAILS("HTTP/1.1 099 Low\r\n\r\n", -EPROTO);
        FAILS("HTTP/1.1 600 High\r\n\r\n", -EPROTO);
        FAILS("HTTP/1.1 200 O\x01K\r\n\r\n", -EPROTO);
        FAILS("HTTP/1.1 200 OK\n\r\n", -EPROTO); /* a bare LF */
        FAILS("HTTP/1.1 200 OK\r\r\n\r\n", -EPROTO);
        FAILS("\r\nHTTP/1.1 200 OK\r\n\r\n", -EPROTO);
        FAILS("SSH-2.0-OpenSSH\r\n", -EPROTO);
        FAILS("HTTP/1.1 200 OK\0\r\n\r\n", -EPROTO);
}

static void test_http1_bad_headers(void)
{
        FAILS("HTTP/1.1 200 OK\r\nNo colon here\r\n\r\n", -EPROTO);
        FAILS("HTTP/1.1 200 OK\r\nName : space before colon\r\n\r\n", -EPROTO);
        FAILS("HTTP/1.1 200 OK\r\n: no name\r\n\r\n", -EPROTO);
        FAILS("HTTP/1.1 200 OK\r\nA: b\r\n folded\r\n\r\n", -EPROTO);
        FAILS("HTTP/1.1 200 OK\r\nA: b\x7f\r\n\r\n", -EPROTO);
        FAILS("HTTP/1.1 200 OK\r\nA: b\rc\r\n\r\n", -EPROTO);
        FAILS("HTTP/1.1 200 OK\r\nA: b\nc: d\r\n\r\n", -EPROTO);
        FAILS("HTTP/1.1 200 OK\r\nA: b\0c\r\n\r\n", -EPROTO);
        FAILS("HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", -EPROTO);
        FAILS("HTTP/1.1 200 OK\r\nContent-Length: +1\r\n\r\nx", -EPROTO);
        FAILS("HTTP/1.1 200 OK\r\nContent-Length: 0x10\r\n\r\n", -EPROTO);
        FAILS("HTTP/1.1 200 OK\r\nContent-Length: 1 2\r\n\r\n", -EPROTO);
        FAILS("HTTP/1.1 200 OK\r\nContent-Length: 1,1\r\n\r\n", -EPROTO);
        FAILS("HTTP/1.1 200 OK\r\nContent-Length:\r\n\r\n", -EPROTO);
        FAILS("HTTP/1.1 200 OK\r\nContent-Length: 9223372036854775808\r\n\r\n", -EPROTO);
        FAILS("HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999999\r\n\r\n", -EPROTO);
        FAILS("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nxx", -EPROTO);
        FAILS("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
              -EPROTO);
        FAILS("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", -EPROTO);
        FAILS("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n"
              "\r\n0\r\n\r\n",
              -EPROTO);
        FAILS("HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", -EPROTO);
}

#define CHUNKED_HEAD "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"

static void test_http1_bad_chunks(void)
{
        FAILS(CHUNKED_HEAD "\r\n", -EPROTO);                   /* no size */
        FAILS(CHUNKED_HEAD "-1\r\nx\r\n0\r\n\r\n", -EPROTO);    /* negative */
        FAILS(CHUNKED_HEAD "+1\r\nx\r\n0\r\n\r\n", -EPROTO);
        FAILS(CHUNKED_HEAD "0x1\r\nx\r\n0\r\n\r\n", -EPROTO);   /* a prefix */
        FAILS(CHUNKED_HEAD " 1\r\nx\r\n0\r\n\r\n", -EPROTO);    /* leading blank */
        FAILS(CHUNKED_HEAD "1 \r\nx\r\n0\r\n\r\n", -EPROTO);    /* trailing blank alone */
        FAILS(CHUNKED_HEAD "g\r\nx\r\n0\r\n\r\n", -EPROTO);     /* not hex */
        FAILS(CHUNKED_HEAD "1g\r\nx\r\n0\r\n\r\n", -EPROTO);
        FAILS(CHUNKED_HEAD "1;\x01\r\nx\r\n0\r\n\r\n", -EPROTO);
        FAILS(CHUNKED_HEAD "8000000000000000\r\n", -EPROTO);   /* 2^63 */
        FAILS(CHUNKED_HEAD "ffffffffffffffff\r\n", -EPROTO);   /* 2^64 - 1 */
        FAILS(CHUNKED_HEAD "10000000000000000\r\n", -EPROTO);  /* wraps to 0 in 64 bits */
        FAILS(CHUNKED_HEAD "1\r\nxy\r\n0\r\n\r\n", -EPROTO);    /* longer than its size */
        FAILS(CHUNKED_HEAD "1\r\nx0\r\n\r\n", -EPROTO);         /* no CRLF after the data */
        FAILS(CHUNKED_HEAD "1\r\nx\n0\r\n\r\n", -EPROTO);
        FAILS(CHUNKED_HEAD "1\nx\r\n0\r\n\r\n", -EPROTO);
        FAILS(CHUNKED_HEAD "0\r\nbad trailer\r\n\r\n", -EPROTO);
}

/* Leading zeros make no size too large. */
static void test_http1_leading_zeros(void)
{
        check_parses(CHUNKED_HEAD "000000000000000000000001\r\nx\r\n0\r\n\r\n", 200, "x", false);
}

static void test_http1_head_limit(void)
{
        /* Just under the limit is a head; one byte more is refused. */
        const char *start = "HTTP/1.1 200 OK\r\n";
        const char *end = "Content-Length: 2\r\n\r\nok";
        size_t fixed = strlen(start) + strlen("X: \r\n") + strlen("Content-Length: 2\r\n\r\n");
        size_t fill = HTTP1_MAX_HEAD - fixed;
        char *t = malloc(HTTP1_MAX_HEAD + 64);
        int n = sprintf(t, "%sX: ", start);
        memset(t + n, 'v', fill);
        n += (int)fill;
        n += sprintf(t + n, "\r\n%s", end);
        struct http1 p;
        struct got g = {};
        CHECK_EQ_INT(parse_in_steps(&p, t, (size_t)n, 4096, false, &g), 0);
        CHECK(http1_complete(&p) && g.len == 2);
        http1_done(&p);
        /* One byte more. */
        n = sprintf(t, "%sX: ", start);
        memset(t + n, 'v', fill + 1);
        n += (int)fill + 1;
        n += sprintf(t + n, "\r\n%s", end);
        CHECK_EQ_INT(parse_in_steps(&p, t, (size_t)n, 4096, false, &g), -E2BIG);
        http1_done(&p);
        /* One line that never ends. */
        memset(t, 'H', HTTP1_MAX_HEAD + 1);
        CHECK_EQ_INT(parse_in_steps(&p, t, HTTP1_MAX_HEAD + 1, 1000, false, &g), -E2BIG);
        http1_done(&p);
        /* Many small headers, and 100 Continue over and over: all count. */
        http1_init(&p);
        int r = 0;
        for (int i = 0; i < 100000 && r == 0; i++)
                r = http1_feed(&p, "HTTP/1.1 100 Continue\r\n\r\n", 25, collect, &g);
        CHECK_EQ_INT(r, -E2BIG);
        http1_done(&p);
        http1_init(&p);
        r = http1_feed(&p, start, strlen(start), collect, &g);
        for (int i = 0; i < 100000 && r == 0; i++)
                r = http1_feed(&p, "A: b\r\n", 6, collect, &g);
        CHECK_EQ_INT(r, -E2BIG);
        http1_done(&p);
        /* And a trailer as long. */
        http1_init(&p);
        r = http1_feed(&p, CHUNKED_HEAD "0\r\n", strlen(CHUNKED_HEAD "0\r\n"), collect, &g);
        for (int i = 0; i < 100000 && r == 0; i++)
                r = http1_feed(&p, "A: b\r\n", 6, collect, &g);
        CHECK_EQ_INT(r, -E2BIG);
        http1_done(&p);
        /* A chunk-size line with endless extensions. */
        http1_init(&p);
        r = http1_feed(&p, CHUNKED_HEAD "1", strlen(CHUNKED_HEAD "1"), collect, &g);
        for (int i = 0; i < 10000 && r == 0; i++)
                r = http1_feed(&p, ";a=b", 4, collect, &g);
        CHECK_EQ_INT(r, -EPROTO);
        http1_done(&p);
        free(t);
}

static void test_http1_truncated(void)
{
        FAILS("", -EPROTO);
        FAILS("HTTP/1.1 200", -EPROTO);
        FAILS("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n", -EPROTO);
        FAILS("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n12345", -EPROTO);
        FAILS(CHUNKED_HEAD, -EPROTO);
        FAILS(CHUNKED_HEAD "5\r\nhel", -EPROTO);
        FAILS(CHUNKED_HEAD "5\r\nhello", -EPROTO);
        FAILS(CHUNKED_HEAD "5\r\nhello\r\n", -EPROTO);
        FAILS(CHUNKED_HEAD "5\r\nhello\r\n0\r\n", -EPROTO); /* no end of the trailer */
        FAILS("HTTP/1.1 100 Continue\r\n\r\n", -EPROTO);
        struct http1 p;
        struct got g = {};
        CHECK_EQ_INT(parse_in_steps(&p, "", 0, 0, true, &g), -EPROTO);
        CHECK_EQ_STR(p.why, "connection closed without a response");
        http1_done(&p);
        const char *t = "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n12345";
        CHECK_EQ_INT(parse_in_steps(&p, t, strlen(t), 0, true, &g), -EPROTO);
        CHECK_EQ_STR(p.why, "connection closed before the end of the response body");
        http1_done(&p);
}

static void test_http1_receiver_stops(void)
{
        struct http1 p;
        struct got g = {.stop_after = 3};
        const char *t = CHUNKED_HEAD "5\r\nhello\r\n0\r\n\r\n";
        CHECK_EQ_INT(parse_in_steps(&p, t, strlen(t), 0, false, &g), -ECANCELED);
        CHECK_EQ_INT(http1_feed(&p, "x", 1, collect, &g), -ECANCELED);
        http1_done(&p);
}

/* Every single-byte change and every cut of a valid response: an answer or an error, never a
 * crash, and never more body than was sent. */
static void test_http1_mutations(void)
{
        const char *valid = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                            "5;e=1\r\nhello\r\n3\r\nabc\r\n0\r\nT: 1\r\n\r\n";
        size_t len = strlen(valid);
        static const char repl[] = {'\0', '\r', '\n', ' ', ':', ';', '0', 'f', 'z', '-', '\x80'};
        char buf[256];
        int complete = 0, failed = 0;
        for (size_t i = 0; i < len; i++) {
                for (size_t k = 0; k < sizeof(repl); k++) {
                        memcpy(buf, valid, len);
                        buf[i] = repl[k];
                        struct http1 p;
                        struct got g = {};
                        int r = parse_in_steps(&p, buf, len, 1 + i % 5, true, &g);
                        CHECK(g.len <= len);
                        if (r == 0)
                                complete++;
                        else
                                failed++;
                        http1_done(&p);
                }
                struct http1 p;
                struct got g = {};
                CHECK_EQ_INT(parse_in_steps(&p, valid, i, 0, true, &g), -EPROTO);
                http1_done(&p);
        }
        CHECK(complete > 0 && failed > 0);
}

/* ---- the client against a fake daemon --------------------------------------------------- */

static char sock_dir[64], sock_path[128], req_path[128];

struct script {
        const char *until;  /* read the request until it ends with this */
        bool dont_read;     /* answer at once, reading nothing (a refusal of an upload) */
        const char *answer; /* then write this ... */
        size_t answer_len;  /* (0: strlen) */
        int delay_ms;       /* ... after this long */
        bool ws_accept;     /* answer is a format: its %s is the Sec-WebSocket-Accept due */
};

/* A child that accepts one connection on sock_path, plays s, and exits; the request it read is
 * left in req_path. */
static pid_t fake_daemon(const struct script *s)
{
        int l = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        strcpy(sa.sun_path, sock_path);
        unlink(sock_path);
        if (l < 0 || bind(l, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(l, 1) < 0) {
                perror("fake daemon");
                exit(1);
        }
        pid_t pid = fork();
        if (pid != 0) {
                close(l);
                return pid;
        }
        int fd = accept(l, NULL, NULL);
        size_t cap = 32u << 20, len = 0;
        char *req = malloc(cap);
        if (fd < 0 || !req)
                _exit(1);
        size_t ulen = s->until ? strlen(s->until) : 0;
        while (!s->dont_read && len < cap) {
                if (len >= ulen && ulen && memcmp(req + len - ulen, s->until, ulen) == 0)
                        break;
                ssize_t n = read(fd, req + len, ulen ? 1 : cap - len);
                if (n <= 0)
                        break;
                len += (size_t)n;
        }
        FILE *f = fopen(req_path, "w");
        if (f) {
                fwrite(req, 1, len, f);
                fclose(f);
        }
        if (s->delay_ms)
                usleep((useconds_t)s->delay_ms * 1000);
        char *answer = NULL;
        if (s->ws_accept) {
                req[len < cap ? len : cap - 1] = 0;
                const char *k = strstr(req, "\r\nSec-WebSocket-Key: ");
                char key[WS_KEY_LEN + 1] = "", accept[WS_ACCEPT_LEN + 1];
                if (k)
                        snprintf(key, sizeof(key), "%s", k + 21);
                ws_accept_for(key, accept);
                /* Every "%s" of the answer becomes the accept value. */
                answer = malloc(strlen(s->answer) * (WS_ACCEPT_LEN + 1) + 1);
                if (!answer)
                        _exit(1);
                char *o = answer;
                for (const char *a = s->answer; *a; a++) {
                        if (a[0] == '%' && a[1] == 's') {
                                o = stpcpy(o, accept);
                                a++;
                        } else {
                                *o++ = *a;
                        }
                }
                *o = 0;
        }
        if (answer)
                write_all(fd, answer, strlen(answer));
        else if (s->answer)
                write_all(fd, s->answer, s->answer_len ? s->answer_len : strlen(s->answer));
        _exit(0);
}

static int reap(pid_t pid)
{
        int st;
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
                ;
        return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static char *request_seen(void)
{
        char *text = NULL;
        if (read_file_at(AT_FDCWD, req_path, 64u << 20, &text) < 0)
                return strdup("");
        return text;
}

static void test_client_call(void)
{
        struct script s = {.until = "\r\n\r\n",
                           .answer = "HTTP/1.1 200 OK\r\nContent-Length: 15\r\n\r\n{\"name\": \"a b\"}"};
        pid_t pid = fake_daemon(&s);
        struct client c;
        client_open(&c, sock_path);
        struct response resp = {};
        CHECK_EQ_INT(client_call(&c, "GET", "/v1/envs/a%20b", NULL, &resp), 0);
        CHECK_EQ_INT(resp.status, 200);
        CHECK_EQ_STR(json_string_value(json_object_get(resp.json, "name")), "a b");
        response_done(&resp);
        CHECK_EQ_INT(reap(pid), 0);
        char *seen = request_seen();
        CHECK(strstr(seen, "GET /v1/envs/a%20b HTTP/1.1\r\nHost: localhost\r\n") == seen);
        CHECK(!strstr(seen, "Content-Length") && !strstr(seen, "Content-Type"));
        free(seen);

        /* A JSON body is application/json with its length; a POST without one says 0. */
        s.until = "}";
        pid = fake_daemon(&s);
        json_t *body = json_pack("{s:s}", "k", "v");
        CHECK_EQ_INT(client_call(&c, "PATCH", "/v1/x", body, &resp), 0);
        json_decref(body);
        response_done(&resp);
        reap(pid);
        seen = request_seen();
        CHECK(strstr(seen, "PATCH /v1/x HTTP/1.1\r\n") == seen);
        CHECK(strstr(seen, "\r\nContent-Type: application/json\r\n"));
        CHECK(strstr(seen, "\r\nContent-Length: 9\r\n\r\n{\"k\":\"v\"}"));
        free(seen);
        s.until = "\r\n\r\n";
        pid = fake_daemon(&s);
        CHECK_EQ_INT(client_call(&c, "POST", "/v1/envs/a/start", NULL, &resp), 0);
        response_done(&resp);
        reap(pid);
        seen = request_seen();
        CHECK(strstr(seen, "\r\nContent-Length: 0\r\n\r\n") && !strstr(seen, "Content-Type"));
        free(seen);
        client_close(&c);
}

static void test_client_errors(void)
{
        struct client c;
        client_open(&c, sock_path);
        struct response resp = {};
        /* A daemon's refusal: client_call fails, client_perform reports the status. */
        struct script s = {.until = "\r\n\r\n",
                           .answer = "HTTP/1.1 404 Not Found\r\nContent-Length: 49\r\n\r\n"
                                     "{\"error\":{\"code\":\"not_found\",\"message\":\"no env\"}}"};
        pid_t pid = fake_daemon(&s);
        struct request req = {.method = "GET", .path = "/v1/envs/x"};
        CHECK_EQ_INT(client_perform(&c, &req, &resp), 0);
        CHECK_EQ_INT(resp.status, 404);
        CHECK_EQ_STR(json_string_value(json_object_get(json_object_get(resp.json, "error"), "code")),
                     "not_found");
        response_done(&resp);
        reap(pid);
        /* Closed mid-body, closed without answering, garbage, and nobody listening. */
        static const char *const bad[] = {
            "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{\"a\":",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10\r\n0123",
            "",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n-5\r\nabc\r\n",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n7ffffffffffffffff\r\n",
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                s.answer = bad[i];
                pid = fake_daemon(&s);
                CHECK_EQ_INT(client_perform(&c, &req, &resp), -1);
                CHECK(resp.body == NULL && resp.status == 0);
                reap(pid);
        }
        unlink(sock_path);
        CHECK_EQ_INT(client_perform(&c, &req, &resp), -1);
        struct client far;
        char longpath[200];
        memset(longpath, 'x', sizeof(longpath) - 1);
        longpath[sizeof(longpath) - 1] = 0;
        client_open(&far, longpath);
        CHECK_EQ_INT(client_perform(&far, &req, &resp), -1);
        /* Nothing reaches the wire that would end the request line early. */
        struct request evil = {.method = "GET", .path = "/v1/x HTTP/1.1\r\nX: y"};
        CHECK_EQ_INT(client_perform(&c, &evil, &resp), -1);
}

struct sunk {
        char data[256];
        size_t len;
        bool stop;
};

static bool sink(const char *data, size_t len, void *userdata)
{
        struct sunk *k = userdata;
        if (k->len + len <= sizeof(k->data)) {
                memcpy(k->data + k->len, data, len);
                k->len += len;
        }
        return !k->stop;
}

static void test_client_sink(void)
{
        struct client c;
        client_open(&c, sock_path);
        struct script s = {.until = "\r\n\r\n",
                           .answer = "HTTP/1.1 100 Continue\r\n\r\n"
                                     "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                                     "6\r\nline1\n\r\n6\r\nline2\n\r\n0\r\n\r\n"};
        pid_t pid = fake_daemon(&s);
        struct sunk k = {};
        struct request req = {.method = "GET", .path = "/v1/s", .sink = sink, .sink_data = &k};
        struct response resp = {};
        CHECK_EQ_INT(client_perform(&c, &req, &resp), 0);
        CHECK_EQ_INT(resp.status, 200);
        CHECK(resp.body == NULL);
        CHECK(k.len == 12 && memcmp(k.data, "line1\nline2\n", 12) == 0);
        response_done(&resp);
        reap(pid);
        /* An error response is buffered, not sunk. */
        s.answer = "HTTP/1.1 409 Conflict\r\nContent-Length: 4\r\n\r\nbusy";
        pid = fake_daemon(&s);
        k.len = 0;
        CHECK_EQ_INT(client_perform(&c, &req, &resp), 0);
        CHECK(resp.status == 409 && k.len == 0 && resp.len == 4 && !strcmp(resp.body, "busy"));
        response_done(&resp);
        reap(pid);
        /* A sink that stops ends the transfer. */
        s.answer = "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nstop!\n";
        pid = fake_daemon(&s);
        k = (struct sunk){.stop = true};
        CHECK_EQ_INT(client_perform(&c, &req, &resp), -1);
        reap(pid);
}

struct pieces {
        const char *const *piece;
        size_t next, count;
        bool fail_at_end;
};

static ssize_t source(char *buf, size_t len, void *userdata)
{
        struct pieces *p = userdata;
        if (p->next == p->count)
                return p->fail_at_end ? -1 : 0;
        size_t n = strlen(p->piece[p->next]);
        if (n > len)
                n = len;
        memcpy(buf, p->piece[p->next++], n);
        return (ssize_t)n;
}

static void test_client_upload(void)
{
        struct client c;
        client_open(&c, sock_path);
        static const char *const parts[] = {"hello ", "", "world"};
        struct script s = {.until = "\r\n0\r\n\r\n",
                           .answer = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"};
        pid_t pid = fake_daemon(&s);
        /* An empty piece is the source's end: the body is "hello " and the last chunk. */
        struct pieces src = {.piece = parts, .count = 3};
        struct request req = {.method = "POST", .path = "/v1/u", .source = source,
                              .source_data = &src, .source_size = -1,
                              .content_type = "application/octet-stream"};
        struct response resp = {};
        CHECK_EQ_INT(client_perform(&c, &req, &resp), 0);
        CHECK_EQ_INT(resp.status, 200);
        response_done(&resp);
        reap(pid);
        char *seen = request_seen();
        CHECK(strstr(seen, "\r\nContent-Type: application/octet-stream\r\n"));
        CHECK(strstr(seen, "\r\nTransfer-Encoding: chunked\r\n\r\n6\r\nhello \r\n0\r\n\r\n"));
        free(seen);

        /* A sized body: exactly that many bytes, however the source cuts them. */
        static const char *const sized[] = {"abc", "defg"};
        src = (struct pieces){.piece = sized, .count = 2};
        req.method = "PUT";
        req.source_size = 7;
        s.until = "defg";
        pid = fake_daemon(&s);
        CHECK_EQ_INT(client_perform(&c, &req, &resp), 0);
        response_done(&resp);
        reap(pid);
        seen = request_seen();
        CHECK(strstr(seen, "PUT /v1/u HTTP/1.1\r\n") == seen);
        CHECK(strstr(seen, "\r\nContent-Length: 7\r\n\r\nabcdefg"));
        CHECK(!strstr(seen, "chunked"));
        free(seen);

        /* A source that ends early, or fails: no success. */
        src = (struct pieces){.piece = sized, .count = 1};
        pid = fake_daemon(&s);
        CHECK_EQ_INT(client_perform(&c, &req, &resp), -1);
        kill(pid, SIGKILL);
        reap(pid);
        src = (struct pieces){.piece = sized, .count = 1, .fail_at_end = true};
        req.source_size = -1;
        pid = fake_daemon(&s);
        CHECK_EQ_INT(client_perform(&c, &req, &resp), -1);
        kill(pid, SIGKILL);
        reap(pid);
}

struct zeros {
        uint64_t left;
};

static ssize_t zeros_source(char *buf, size_t len, void *userdata)
{
        struct zeros *z = userdata;
        if (len > z->left)
                len = (size_t)z->left;
        memset(buf, 0, len);
        z->left -= len;
        return (ssize_t)len;
}

/* The daemon refuses an upload before reading it (413) and closes: its answer is what counts,
 * not the broken pipe. */
static void test_client_early_answer(void)
{
        struct client c;
        client_open(&c, sock_path);
        struct script s = {.dont_read = true,
                           .answer = "HTTP/1.1 413 Payload Too Large\r\nConnection: close\r\n"
                                     "Content-Length: 9\r\n\r\ntoo large"};
        pid_t pid = fake_daemon(&s);
        struct zeros z = {.left = 16u << 20};
        struct request req = {.method = "PUT", .path = "/v1/u", .source = zeros_source,
                              .source_data = &z, .source_size = 16u << 20,
                              .content_type = "application/octet-stream"};
        struct response resp = {};
        CHECK_EQ_INT(client_perform(&c, &req, &resp), 0);
        CHECK_EQ_INT(resp.status, 413);
        CHECK(resp.body && !strcmp(resp.body, "too large"));
        CHECK(z.left > 0);
        response_done(&resp);
        reap(pid);
}

static volatile sig_atomic_t alarms;

static void on_alarm(int sig)
{
        alarms++;
}

/* Signals without SA_RESTART while the client connects, sends and waits: no failure. */
static void test_client_eintr(void)
{
        struct sigaction sa = {.sa_handler = on_alarm}, old;
        sigaction(SIGALRM, &sa, &old);
        struct itimerval every = {.it_interval = {0, 1000}, .it_value = {0, 1000}};
        setitimer(ITIMER_REAL, &every, NULL);
        struct client c;
        client_open(&c, sock_path);
        struct script s = {.until = "\r\n\r\n", .delay_ms = 100,
                           .answer = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"};
        pid_t pid = fake_daemon(&s);
        struct response resp = {};
        struct request req = {.method = "GET", .path = "/v1/slow"};
        CHECK_EQ_INT(client_perform(&c, &req, &resp), 0);
        CHECK(resp.status == 200 && resp.len == 2);
        response_done(&resp);
        struct itimerval off = {};
        setitimer(ITIMER_REAL, &off, NULL);
        sigaction(SIGALRM, &old, NULL);
        CHECK(alarms > 5);
        reap(pid);
}

static void test_client_escape(void)
{
        struct client c;
        client_open(&c, sock_path);
        char *e = client_escape(&c, "a b/c?d=e&f%g~h-i_j.k\xc3\xa9\n");
        CHECK_EQ_STR(e, "a%20b%2Fc%3Fd%3De%26f%25g~h-i_j.k%C3%A9%0A");
        free(e);
        e = client_escape(&c, "");
        CHECK_EQ_STR(e, "");
        free(e);
}

/* ---- the WebSocket handshake (wsclient.c) ------------------------------------------------- */

static const struct wslay_event_callbacks no_callbacks;

static void test_wsc_handshake(void)
{
        struct client c;
        client_open(&c, sock_path);
        /* Switched: the frame bytes that came with the head are read first. */
        struct script s = {.until = "\r\n\r\n", .ws_accept = true,
                           .answer = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                                     "Connection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n"
                                     "\x81\x02hi"};
        pid_t pid = fake_daemon(&s);
        struct wsc w;
        CHECK_EQ_INT(wsc_open(&c, "/v1/envs/a/exec/ws", &no_callbacks, NULL, &w), 0);
        char buf[8] = "";
        CHECK_EQ_INT(transport_read(&w.conn, buf, sizeof(buf), false), 4);
        CHECK(memcmp(buf, "\x81\x02hi", 4) == 0);
        wsc_close(&w);
        reap(pid);
        char *seen = request_seen();
        CHECK(strstr(seen, "GET /v1/envs/a/exec/ws HTTP/1.1\r\n") == seen);
        CHECK(strstr(seen, "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"));
        free(seen);

        /* Refusals and broken answers all fail, with a message. */
        static const char *const bad[] = {
            /* the daemon's refusal, chunked or not */
            "HTTP/1.1 404 Not Found\r\nContent-Length: 49\r\n\r\n"
            "{\"error\":{\"code\":\"not_found\",\"message\":\"no env\"}}",
            "HTTP/1.1 409 Conflict\r\nTransfer-Encoding: chunked\r\n\r\n"
            "b\r\n{\"error\":{}\r\n1\r\n}\r\n0\r\n\r\n",
            /* a refusal cut off mid-body */
            "HTTP/1.1 500 Oops\r\nTransfer-Encoding: chunked\r\n\r\nfffffff\r\nxxxx",
            /* a wrong, missing, doubled or overlong accept; no Upgrade header */
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
            "Sec-WebSocket-Accept: AAAAAAAAAAAAAAAAAAAAAAAAAAA=\r\n\r\n",
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n",
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
            "Sec-WebSocket-Accept: %s\r\nSec-WebSocket-Accept: %s\r\n\r\n",
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
            "Sec-WebSocket-Accept: %sAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\r\n\r\n",
            "HTTP/1.1 101 Switching Protocols\r\nSec-WebSocket-Accept: %s\r\n\r\n",
            /* not HTTP, a bare LF, a cut head, nothing */
            "SSH-2.0-OpenSSH_9.6\r\n",
            "HTTP/1.1 101 Switching Protocols\nUpgrade: websocket\n\n",
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: webs",
            "",
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                s.answer = bad[i];
                pid = fake_daemon(&s);
                w = (struct wsc){};
                CHECK_EQ_INT(wsc_open(&c, "/v1/envs/a/exec/ws", &no_callbacks, NULL, &w), -1);
                CHECK(w.ctx == NULL);
                reap(pid);
        }
        /* A head that never ends is cut off at the parser's limit. */
        size_t big = HTTP1_MAX_HEAD + 1024;
        char *huge = malloc(big + 1);
        memcpy(huge, "HTTP/1.1 101 Switching Protocols\r\nX: ", 37);
        memset(huge + 37, 'a', big - 37);
        huge[big] = 0;
        s = (struct script){.until = "\r\n\r\n", .answer = huge};
        pid = fake_daemon(&s);
        CHECK_EQ_INT(wsc_open(&c, "/v1/envs/a/exec/ws", &no_callbacks, NULL, &w), -1);
        reap(pid);
        free(huge);
        client_close(&c);
}

/* ---- --host URLs and fingerprints (transport.c, hostkey.c) --------------------------------- */

static void test_endpoint_parse(void)
{
        struct endpoint ep;
        const char *why = NULL;
        CHECK_EQ_INT(endpoint_parse("https://Build1.Example.NET:7443", &ep, &why), 0);
        CHECK(ep.kind == TRANSPORT_TLS);
        CHECK_EQ_STR(ep.host, "build1.example.net");
        CHECK_EQ_STR(ep.authority, "build1.example.net:7443");
        CHECK_EQ_INT(endpoint_parse("https://10.0.0.1/", &ep, &why), 0);
        CHECK_EQ_STR(ep.authority, "10.0.0.1:443");
        CHECK_EQ_INT(endpoint_parse("https://[0:0::1]:8443", &ep, &why), 0);
        CHECK_EQ_STR(ep.host, "::1");
        CHECK_EQ_STR(ep.authority, "[::1]:8443");
        CHECK_EQ_INT(endpoint_parse("http://127.0.0.1:8080", &ep, &why), 0);
        CHECK(ep.kind == TRANSPORT_TCP);
        CHECK_EQ_INT(endpoint_parse("http://[::1]:80", &ep, &why), 0);
        CHECK_EQ_INT(endpoint_parse("unix:///run/p.sock", &ep, &why), 0);
        CHECK(ep.kind == TRANSPORT_UNIX);
        CHECK_EQ_STR(ep.socket_path, "/run/p.sock");
        static const char *const bad[] = {
            "http://10.0.0.1:80", "http://localhost:80", "http://[2001:db8::1]:80",
            "https://", "https://:1", "https://h:0", "https://h:65536", "https://h:1x",
            "https://h:1/v1", "https://h?x", "https://u@h:1", "https://a:b:1", "https://[::1",
            "https://[nothex]:1", "https://[::1]x", "https://h o:1", "ftp://h:1", "unix://rel",
            "h:1",
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                why = NULL;
                CHECK_EQ_INT(endpoint_parse(bad[i], &ep, &why), -EINVAL);
                CHECK(why != NULL);
        }
}

static void test_hostkey_text(void)
{
        uint8_t k[HOSTKEY_LEN], back[HOSTKEY_LEN];
        for (size_t i = 0; i < HOSTKEY_LEN; i++)
                k[i] = (uint8_t)(i * 37 + 5);
        char text[HOSTKEY_TEXT_MAX];
        hostkey_format(k, text);
        CHECK_EQ_INT((int)strlen(text), HOSTKEY_TEXT_MAX - 1);
        CHECK(strncmp(text, "sha256:05:2A:4F:", 16) == 0);
        CHECK_EQ_INT(hostkey_parse(text, back), 0);
        CHECK(memcmp(k, back, HOSTKEY_LEN) == 0);
        /* without the prefix, without colons, in lower case */
        char bare[HOSTKEY_LEN * 2 + 1], *o = bare;
        for (const char *s = text + 7; *s; s++)
                if (*s != ':')
                        *o++ = (char)tolower((unsigned char)*s);
        *o = 0;
        memset(back, 0, sizeof(back));
        CHECK_EQ_INT(hostkey_parse(bare, back), 0);
        CHECK(memcmp(k, back, HOSTKEY_LEN) == 0);
        CHECK_EQ_INT(hostkey_parse("sha256:AB:CD", back), -EINVAL);
        CHECK_EQ_INT(hostkey_parse("", back), -EINVAL);
        char longer[HOSTKEY_TEXT_MAX + 4];
        snprintf(longer, sizeof(longer), "%s:00", text);
        CHECK_EQ_INT(hostkey_parse(longer, back), -EINVAL);
        text[10] = 'G';
        CHECK_EQ_INT(hostkey_parse(text, back), -EINVAL);
}

int main(void)
{
        RUN(test_endpoint_parse);
        RUN(test_hostkey_text);
        RUN(test_http1_content_length);
        RUN(test_http1_chunked);
        RUN(test_http1_no_body);
        RUN(test_http1_interim);
        RUN(test_http1_upgrade);
        RUN(test_http1_close_delimited);
        RUN(test_http1_bad_status_line);
        RUN(test_http1_bad_headers);
        RUN(test_http1_bad_chunks);
        RUN(test_http1_leading_zeros);
        RUN(test_http1_head_limit);
        RUN(test_http1_truncated);
        RUN(test_http1_receiver_stops);
        RUN(test_http1_mutations);

        strcpy(sock_dir, "/tmp/paddock-http-test-XXXXXX");
        if (!mkdtemp(sock_dir)) {
                perror("mkdtemp");
                return 1;
        }
        snprintf(sock_path, sizeof(sock_path), "%s/sock", sock_dir);
        snprintf(req_path, sizeof(req_path), "%s/request", sock_dir);
        /* The client's own messages ("paddock: request to paddockd ... failed") are expected
         * below, on stderr. */
        RUN(test_client_call);
        RUN(test_client_errors);
        RUN(test_client_sink);
        RUN(test_client_upload);
        RUN(test_client_early_answer);
        RUN(test_client_eintr);
        RUN(test_client_escape);
        RUN(test_wsc_handshake);
        unlink(sock_path);
        unlink(req_path);
        rmdir(sock_dir);
        UNIT_EXIT();
}

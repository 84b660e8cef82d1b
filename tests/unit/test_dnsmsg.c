/* Unit tests of src/lib/dnsmsg.c: parsing of hostile DNS queries and upstream answers, the
 * messages the resolver builds, allow-list name matching, resolv.conf, and a mutation fuzz
 * loop (run it under ASan/UBSan:
 *   make BUILD=build/asan SAN="-fsanitize=address,undefined" build/asan/tests/test_dnsmsg). */
#include "lib/dnsmsg.h"
#include "lib/util.h"

#include "unit.h"

#include <arpa/inet.h>

/* ---- building test packets by hand ---------------------------------------------------- */

struct pkt {
        uint8_t b[1024];
        size_t n;
};

static void p8(struct pkt *p, uint8_t v)
{
        if (p->n < sizeof(p->b))
                p->b[p->n++] = v;
}

static void p16(struct pkt *p, uint16_t v)
{
        p8(p, (uint8_t)(v >> 8));
        p8(p, (uint8_t)v);
}

static void p32(struct pkt *p, uint32_t v)
{
        p16(p, (uint16_t)(v >> 16));
        p16(p, (uint16_t)v);
}

static void pbytes(struct pkt *p, const void *d, size_t n)
{
        for (size_t i = 0; i < n; i++)
                p8(p, ((const uint8_t *)d)[i]);
}

/* Dotted name in wire form, uncompressed, root label included. */
static void pname(struct pkt *p, const char *name)
{
        while (*name) {
                const char *dot = strchr(name, '.');
                size_t n = dot ? (size_t)(dot - name) : strlen(name);
                p8(p, (uint8_t)n);
                pbytes(p, name, n);
                name += n + (dot ? 1 : 0);
        }
        p8(p, 0);
}

static void pheader(struct pkt *p, uint16_t id, uint16_t flags, uint16_t qd, uint16_t an,
                    uint16_t ns, uint16_t ar)
{
        p->n = 0;
        p16(p, id);
        p16(p, flags);
        p16(p, qd);
        p16(p, an);
        p16(p, ns);
        p16(p, ar);
}

static void popt(struct pkt *p, uint16_t udp_size, uint16_t flags)
{
        p8(p, 0);
        p16(p, DNS_TYPE_OPT);
        p16(p, udp_size);
        p32(p, flags); /* ext rcode 0, version 0, flags */
        p16(p, 0);
}

static void make_query(struct pkt *p, uint16_t id, const char *name, uint16_t qtype, bool edns)
{
        pheader(p, id, DNS_FLAG_RD, 1, 0, 0, edns ? 1 : 0);
        pname(p, name);
        p16(p, qtype);
        p16(p, DNS_CLASS_IN);
        if (edns)
                popt(p, 4096, DNS_EDNS_FLAG_DO);
}

/* ---- queries -------------------------------------------------------------------------- */

static void test_dnsmsg_query__valid(void)
{
        struct pkt p;
        struct dns_query q;
        make_query(&p, 0x1234, "Api.Example.COM", DNS_TYPE_A, false);
        CHECK_EQ_INT(dns_parse_query(p.b, p.n, &q), 0);
        CHECK_EQ_INT(q.id, 0x1234);
        CHECK(q.flags & DNS_FLAG_RD);
        CHECK_EQ_STR(q.name, "api.example.com");
        CHECK_EQ_INT(q.qtype, DNS_TYPE_A);
        CHECK_EQ_INT(q.qclass, DNS_CLASS_IN);
        CHECK(!q.edns);
        /* The wire form keeps the client's case. */
        CHECK_EQ_INT(q.wire_len, 17);
        CHECK(memcmp(q.wire, "\3Api\7Example\3COM\0", 17) == 0);

        make_query(&p, 7, "_dmarc.my-host1.example", DNS_TYPE_TXT, true);
        CHECK_EQ_INT(dns_parse_query(p.b, p.n, &q), 0);
        CHECK_EQ_STR(q.name, "_dmarc.my-host1.example");
        CHECK_EQ_INT(q.qtype, DNS_TYPE_TXT);
        CHECK(q.edns);
        CHECK_EQ_INT(q.edns_udp_size, 4096);
        CHECK_EQ_INT(q.edns_flags, DNS_EDNS_FLAG_DO);

        /* The root. */
        pheader(&p, 1, 0, 1, 0, 0, 0);
        p8(&p, 0);
        p16(&p, DNS_TYPE_NS);
        p16(&p, DNS_CLASS_IN);
        CHECK_EQ_INT(dns_parse_query(p.b, p.n, &q), 0);
        CHECK_EQ_STR(q.name, "");

        /* Trailing garbage after the last record is ignored. */
        make_query(&p, 7, "a.b", DNS_TYPE_A, false);
        p16(&p, 0xdead);
        CHECK_EQ_INT(dns_parse_query(p.b, p.n, &q), 0);
}

static void test_dnsmsg_query__truncated(void)
{
        struct pkt p;
        struct dns_query q;
        make_query(&p, 1, "api.example.com", DNS_TYPE_A, true);
        CHECK_EQ_INT(dns_parse_query(p.b, p.n, &q), 0);
        /* Every proper prefix: the OPT record is announced, so none is whole. */
        for (size_t n = 0; n < p.n; n++)
                CHECK_EQ_INT(dns_parse_query(p.b, n, &q), -EBADMSG);
        CHECK_EQ_INT(dns_parse_query(NULL, 0, &q), -EBADMSG);
}

static void test_dnsmsg_query__compression(void)
{
        struct pkt p;
        struct dns_query q;

        /* The question name is a pointer to itself. */
        pheader(&p, 1, 0, 1, 0, 0, 0);
        p16(&p, 0xc00c);
        p16(&p, DNS_TYPE_A);
        p16(&p, DNS_CLASS_IN);
        CHECK_EQ_INT(dns_parse_query(p.b, p.n, &q), -EBADMSG);

        /* Into the header. */
        pheader(&p, 1, 0, 1, 0, 0, 0);
        p16(&p, 0xc002);
        p16(&p, DNS_TYPE_A);
        p16(&p, DNS_CLASS_IN);
        CHECK_EQ_INT(dns_parse_query(p.b, p.n, &q), -EBADMSG);

        /* Forwards. */
        pheader(&p, 1, 0, 1, 0, 0, 0);
        p16(&p, 0xc000 | 16);
        p16(&p, DNS_TYPE_A);
        p16(&p, DNS_CLASS_IN);
        pname(&p, "a");
        CHECK_EQ_INT(dns_parse_query(p.b, p.n, &q), -EBADMSG);

        /* A loop through a label: backwards each time, "a" repeated forever; the 255-byte cap
         * stops it. The record owner at 12+7 = 19 is label "a" then a pointer back to 19. */
        pheader(&p, 1, 0, 1, 1, 0, 0);
        pname(&p, "x");
        p16(&p, DNS_TYPE_A);
        p16(&p, DNS_CLASS_IN);
        CHECK_EQ_INT(p.n, 19);
        p8(&p, 1);
        p8(&p, 'a');
        p16(&p, 0xc000 | 19);
        p16(&p, DNS_TYPE_A);
        p16(&p, DNS_CLASS_IN);
        p32(&p, 0);
        p16(&p, 0);
        CHECK_EQ_INT(dns_parse_query(p.b, p.n, &q), -EBADMSG);

        /* Two pointers pointing at each other. */
        pheader(&p, 1, 0, 1, 1, 0, 0);
        pname(&p, "x");
        p16(&p, DNS_TYPE_A);
        p16(&p, DNS_CLASS_IN);
        p16(&p, 0xc000 | 21); /* at 19 -> 21: forwards */
        p16(&p, 0xc000 | 19); /* at 21 -> 19 */
        CHECK_EQ_INT(dns_parse_query(p.b, p.n, &q), -EBADMSG);

        /* A legitimate pointer in a record is fine: answer owner -> question name. */
        pheader(&p, 1, 0, 1, 1, 0, 0);
        pname(&p, "x");
        p16(&p, DNS_TYPE_A);
        p16(&p, DNS_CLASS_IN);
        p16(&p, 0xc00c);
        p16(&p, DNS_TYPE_A);
        p16(&p, DNS_CLASS_IN);
        p32(&p, 0);
        p16(&p, 0);
        CHECK_EQ_INT(dns_parse_query(p.b, p.n, &q), 0);
}

static void test_dnsmsg_query__name_limits(void)
{
        struct pkt p;
        struct dns_query q;
        char l63[64], l61[62], l62[63], name[300];
        memset(l63, 'a', 63);
        l63[63] = 0;
        memset(l61, 'b', 61);
        l61[61] = 0;
        memset(l62, 'b', 62);
        l62[62] = 0;

        /* 1+63 + 1+63 + 1+63 + 1+61 + 1 = 255 bytes: the longest name. */
        snprintf(name, sizeof(name), "%s.%s.%s.%s", l63, l63, l63, l61);
        make_query(&p, 1, name, DNS_TYPE_A, false);
        CHECK_EQ_INT(dns_parse_query(p.b, p.n, &q), 0);
        CHECK_EQ_INT(strlen(q.name), 253);
        CHECK_EQ_INT(q.wire_len, 255);
        CHECK_EQ_STR(q.name, name);

        /* One more byte. */
        snprintf(name, sizeof(name), "%s.%s.%s.%s", l63, l63, l63, l62);
        make_query(&p, 1, name, DNS_TYPE_A, false);
        CHECK_EQ_INT(dns_parse_query(p.b, p.n, &q), -EBADMSG);

        /* 128 one-letter labels: 257 bytes. */
        name[0] = 0;
        for (int i = 0; i < 128; i++)
                strcat(name, i ? ".a" : "a");
        make_query(&p, 1, name, DNS_TYPE_A, false);
        CHECK_EQ_INT(dns_parse_query(p.b, p.n, &q), -EBADMSG);

        /* A 64-byte label: length byte 0x40 is a reserved label type. */
        pheader(&p, 1, 0, 1, 0, 0, 0);
        p8(&p, 64);
        for (int i = 0; i < 64; i++)
                p8(&p, 'a');
        p8(&p, 0);
        p16(&p, DNS_TYPE_A);
        p16(&p, DNS_CLASS_IN);
        CHECK_EQ_INT(dns_parse_query(p.b, p.n, &q), -EBADMSG);
        /* 0x80 likewise. */
        p.b[12] = 0x80;
        CHECK_EQ_INT(dns_parse_query(p.b, p.n, &q), -EBADMSG);
}

static void test_dnsmsg_query__bad_bytes(void)
{
        struct pkt p;
        struct dns_query q;
        /* One label "a.example" under "com": must not read as a subdomain of example.com. */
        pheader(&p, 1, 0, 1, 0, 0, 0);
        p8(&p, 9);
        pbytes(&p, "a.example", 9);
        p8(&p, 3);
        pbytes(&p, "com", 3);
        p8(&p, 0);
        p16(&p, DNS_TYPE_A);
        p16(&p, DNS_CLASS_IN);
        CHECK_EQ_INT(dns_parse_query(p.b, p.n, &q), -EBADMSG);

        static const char *const bad[] = {"a b.com", "a\\.com", "a*.com", "\xc3\xa9.com",
                                          "a\x01.com"};
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                make_query(&p, 1, bad[i], DNS_TYPE_A, false);
                CHECK_EQ_INT(dns_parse_query(p.b, p.n, &q), -EBADMSG);
        }
        /* An embedded NUL in a label. */
        pheader(&p, 1, 0, 1, 0, 0, 0);
        p8(&p, 3);
        pbytes(&p, "a\0b", 3);
        p8(&p, 0);
        p16(&p, DNS_TYPE_A);
        p16(&p, DNS_CLASS_IN);
        CHECK_EQ_INT(dns_parse_query(p.b, p.n, &q), -EBADMSG);
}

static void test_dnsmsg_query__header(void)
{
        struct pkt p;
        struct dns_query q;

        /* Two questions, or none. */
        pheader(&p, 1, 0, 2, 0, 0, 0);
        pname(&p, "a.com");
        p16(&p, DNS_TYPE_A);
        p16(&p, DNS_CLASS_IN);
        pname(&p, "b.com");
        p16(&p, DNS_TYPE_A);
        p16(&p, DNS_CLASS_IN);
        CHECK_EQ_INT(dns_parse_query(p.b, p.n, &q), -EBADMSG);
        pheader(&p, 1, 0, 0, 0, 0, 0);
        CHECK_EQ_INT(dns_parse_query(p.b, p.n, &q), -EBADMSG);

        /* A response is not a query. */
        make_query(&p, 1, "a.com", DNS_TYPE_A, false);
        p.b[2] |= 0x80;
        CHECK_EQ_INT(dns_parse_query(p.b, p.n, &q), -EBADMSG);

        /* Opcode STATUS (2), UPDATE (5). */
        make_query(&p, 1, "a.com", DNS_TYPE_A, false);
        p.b[2] = 2 << 3;
        CHECK_EQ_INT(dns_parse_query(p.b, p.n, &q), -EOPNOTSUPP);
        p.b[2] = 5 << 3;
        CHECK_EQ_INT(dns_parse_query(p.b, p.n, &q), -EOPNOTSUPP);

        /* Two OPT records; an OPT not owned by the root; an OPT in the answer section. */
        pheader(&p, 1, 0, 1, 0, 0, 2);
        pname(&p, "a.com");
        p16(&p, DNS_TYPE_A);
        p16(&p, DNS_CLASS_IN);
        popt(&p, 1232, 0);
        popt(&p, 1232, 0);
        CHECK_EQ_INT(dns_parse_query(p.b, p.n, &q), -EBADMSG);
        pheader(&p, 1, 0, 1, 0, 0, 1);
        pname(&p, "a.com");
        p16(&p, DNS_TYPE_A);
        p16(&p, DNS_CLASS_IN);
        pname(&p, "x");
        p16(&p, DNS_TYPE_OPT);
        p16(&p, 1232);
        p32(&p, 0);
        p16(&p, 0);
        CHECK_EQ_INT(dns_parse_query(p.b, p.n, &q), -EBADMSG);
        pheader(&p, 1, 0, 1, 1, 0, 0);
        pname(&p, "a.com");
        p16(&p, DNS_TYPE_A);
        p16(&p, DNS_CLASS_IN);
        popt(&p, 1232, 0);
        CHECK_EQ_INT(dns_parse_query(p.b, p.n, &q), -EBADMSG);

        /* An OPT with options (a cookie) is fine; its data is skipped. */
        pheader(&p, 1, 0, 1, 0, 0, 1);
        pname(&p, "a.com");
        p16(&p, DNS_TYPE_A);
        p16(&p, DNS_CLASS_IN);
        p8(&p, 0);
        p16(&p, DNS_TYPE_OPT);
        p16(&p, 1400);
        p32(&p, 0);
        p16(&p, 12);
        p16(&p, 10); /* COOKIE */
        p16(&p, 8);
        pbytes(&p, "01234567", 8);
        CHECK_EQ_INT(dns_parse_query(p.b, p.n, &q), 0);
        CHECK(q.edns);
        CHECK_EQ_INT(q.edns_udp_size, 1400);
        /* ...but its data may not run past the end. */
        p.n -= 1;
        CHECK_EQ_INT(dns_parse_query(p.b, p.n, &q), -EBADMSG);
}

/* ---- building ------------------------------------------------------------------------- */

static void test_dnsmsg_build__replies(void)
{
        struct pkt p;
        struct dns_query q;
        uint8_t buf[512];
        size_t len, n_a;
        bool more;
        uint16_t flags;
        struct dns_a a[4];

        static const uint8_t codes[] = {DNS_RCODE_NOERROR, DNS_RCODE_NXDOMAIN, DNS_RCODE_REFUSED,
                                        DNS_RCODE_SERVFAIL};
        for (int edns = 0; edns <= 1; edns++)
                for (size_t i = 0; i < ELEMENTSOF(codes); i++) {
                        make_query(&p, 0xbeef, "WWW.Example.com", DNS_TYPE_A, edns);
                        CHECK_EQ_INT(dns_parse_query(p.b, p.n, &q), 0);
                        CHECK_EQ_INT(dns_build_reply(&q, codes[i], 0, buf, sizeof(buf), &len), 0);
                        CHECK_EQ_INT(len, 12 + q.wire_len + 4 + (edns ? 11 : 0));
                        CHECK_EQ_INT(
                            dns_parse_response(buf, len, 0xbeef, &q, a, 4, &n_a, &more, &flags), 0);
                        CHECK_EQ_INT(DNS_RCODE(flags), codes[i]);
                        CHECK(flags & DNS_FLAG_QR);
                        CHECK(flags & DNS_FLAG_RD);
                        CHECK(flags & DNS_FLAG_RA);
                        CHECK(!(flags & DNS_FLAG_TC));
                        CHECK_EQ_INT(n_a, 0);
                        CHECK(!more);
                        /* Counts: 1 question, no answers, an OPT iff the query had one. */
                        CHECK_EQ_INT(buf[5], 1);
                        CHECK_EQ_INT(buf[7], 0);
                        CHECK_EQ_INT(buf[11], edns);
                        /* The question echoed with the client's case. */
                        CHECK(memcmp(buf + 12, q.wire, q.wire_len) == 0);
                        /* The OPT echoes DO. */
                        if (edns)
                                CHECK_EQ_INT(buf[len - 4], 0x80);
                }

        /* TC flag for "ask again over TCP"; opcode/rcode bits in extra_flags are ignored. */
        CHECK_EQ_INT(
            dns_build_reply(&q, DNS_RCODE_NOERROR, DNS_FLAG_TC | 0x780f, buf, sizeof(buf), &len),
            0);
        CHECK_EQ_INT(dns_parse_response(buf, len, 0xbeef, &q, a, 4, &n_a, &more, &flags), 0);
        CHECK(flags & DNS_FLAG_TC);
        CHECK_EQ_INT(DNS_RCODE(flags), 0);
        CHECK_EQ_INT(DNS_OPCODE(flags), 0);

        CHECK_EQ_INT(dns_build_reply(&q, 0, 0, buf, 20, &len), -ENOBUFS);
}

static void test_dnsmsg_build__query(void)
{
        struct pkt p;
        struct dns_query q, q2;
        uint8_t buf[512];
        size_t len;

        make_query(&p, 0x1111, "Api.Example.com", DNS_TYPE_A, true);
        CHECK_EQ_INT(dns_parse_query(p.b, p.n, &q), 0);
        CHECK_EQ_INT(dns_build_query(&q, 0x4242, 1232, buf, sizeof(buf), &len), 0);
        CHECK_EQ_INT(dns_parse_query(buf, len, &q2), 0);
        CHECK_EQ_INT(q2.id, 0x4242);
        CHECK(q2.flags & DNS_FLAG_RD);
        CHECK_EQ_STR(q2.name, "api.example.com");
        CHECK(q2.wire_len == q.wire_len && memcmp(q2.wire, q.wire, q.wire_len) == 0);
        CHECK(q2.edns);
        CHECK_EQ_INT(q2.edns_udp_size, 1232);
        CHECK_EQ_INT(q2.edns_flags, DNS_EDNS_FLAG_DO);

        CHECK_EQ_INT(dns_build_query(&q, 0x4243, 0, buf, sizeof(buf), &len), 0);
        CHECK_EQ_INT(dns_parse_query(buf, len, &q2), 0);
        CHECK(!q2.edns);
        CHECK_EQ_INT(len, 12 + q.wire_len + 4);
        CHECK_EQ_INT(dns_build_query(&q, 1, 0, buf, 12, &len), -ENOBUFS);

        /* The longest name still fits the resolver's fixed buffers. */
        char name[300], l63[64];
        memset(l63, 'a', 63);
        l63[63] = 0;
        snprintf(name, sizeof(name), "%s.%s.%s.%.61s", l63, l63, l63, l63);
        make_query(&p, 1, name, DNS_TYPE_A, true);
        CHECK_EQ_INT(dns_parse_query(p.b, p.n, &q), 0);
        CHECK_EQ_INT(dns_build_query(&q, 1, 1232, buf, 12 + 255 + 4 + 11, &len), 0);
        CHECK_EQ_INT(dns_build_reply(&q, 3, 0, buf, 12 + 255 + 4 + 11, &len), 0);
}

static void test_dnsmsg_build__header_reply(void)
{
        uint8_t buf[64];
        size_t len;
        /* A header with a nonsense body. */
        uint8_t msg[] = {0xab, 0xcd, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
        CHECK_EQ_INT(
            dns_build_header_reply(msg, sizeof(msg), DNS_RCODE_FORMERR, buf, sizeof(buf), &len), 0);
        CHECK_EQ_INT(len, 12);
        CHECK_EQ_INT(buf[0], 0xab);
        CHECK_EQ_INT(buf[1], 0xcd);
        CHECK_EQ_INT(buf[2], 0x81); /* QR, RD */
        CHECK_EQ_INT(buf[3], 0x80 | DNS_RCODE_FORMERR);
        for (int i = 4; i < 12; i++)
                CHECK_EQ_INT(buf[i], 0);
        /* Never answer a response, nor a runt. */
        msg[2] |= 0x80;
        CHECK_EQ_INT(dns_build_header_reply(msg, sizeof(msg), 1, buf, sizeof(buf), &len), -EBADMSG);
        CHECK_EQ_INT(dns_build_header_reply(msg, 11, 1, buf, sizeof(buf), &len), -EBADMSG);
}

/* ---- responses ------------------------------------------------------------------------ */

/* The answer to "api.example.com A": CNAME to edge.cdn.example.net, two A records of the
 * target (compressed: owner -> the CNAME data), an AAAA, an A of class CH (not learned), an
 * NS in authority and an A in additional (neither learned), and an OPT. */
static void sample_response(struct pkt *p, uint16_t id, uint16_t flags)
{
        pheader(p, id, DNS_FLAG_QR | DNS_FLAG_RD | DNS_FLAG_RA | flags, 1, 5, 1, 2);
        pname(p, "api.example.com"); /* at 12 */
        p16(p, DNS_TYPE_A);
        p16(p, DNS_CLASS_IN);

        p16(p, 0xc00c); /* api.example.com CNAME */
        p16(p, DNS_TYPE_CNAME);
        p16(p, DNS_CLASS_IN);
        p32(p, 300);
        size_t rdlen_at = p->n;
        p16(p, 0);
        size_t target = p->n; /* "edge.cdn" + pointer to "example" of the question... */
        p8(p, 4);
        pbytes(p, "edge", 4);
        p8(p, 3);
        pbytes(p, "cdn", 3);
        p8(p, 7);
        pbytes(p, "example", 7);
        p8(p, 3);
        pbytes(p, "net", 3);
        p8(p, 0);
        p->b[rdlen_at + 1] = (uint8_t)(p->n - target);

        p16(p, 0xc000 | (uint16_t)target); /* edge.cdn.example.net A 198.51.100.7 TTL 60 */
        p16(p, DNS_TYPE_A);
        p16(p, DNS_CLASS_IN);
        p32(p, 60);
        p16(p, 4);
        pbytes(p, "\xc6\x33\x64\x07", 4);

        p16(p, 0xc000 | (uint16_t)target); /* ... A 203.0.113.9, TTL with the top bit set */
        p16(p, DNS_TYPE_A);
        p16(p, DNS_CLASS_IN);
        p32(p, 0x80000010);
        p16(p, 4);
        pbytes(p, "\xcb\x00\x71\x09", 4);

        p16(p, 0xc000 | (uint16_t)target); /* AAAA */
        p16(p, DNS_TYPE_AAAA);
        p16(p, DNS_CLASS_IN);
        p32(p, 60);
        p16(p, 16);
        pbytes(p, "\x20\x01\x0d\xb8\0\0\0\0\0\0\0\0\0\0\0\1", 16);

        p16(p, 0xc000 | (uint16_t)target); /* class CH: not an Internet address */
        p16(p, DNS_TYPE_A);
        p16(p, 3);
        p32(p, 60);
        p16(p, 4);
        pbytes(p, "\x01\x02\x03\x04", 4);

        p16(p, 0xc000 | 16); /* authority: example.com NS ns.example.com */
        p16(p, DNS_TYPE_NS);
        p16(p, DNS_CLASS_IN);
        p32(p, 3600);
        p16(p, 5);
        p8(p, 2);
        pbytes(p, "ns", 2);
        p16(p, 0xc000 | 16);

        pname(p, "ns.example.com"); /* additional: its A, not learned */
        p16(p, DNS_TYPE_A);
        p16(p, DNS_CLASS_IN);
        p32(p, 3600);
        p16(p, 4);
        pbytes(p, "\x05\x06\x07\x08", 4);
        popt(p, 1232, 0);
}

static void sample_query(struct dns_query *q)
{
        struct pkt p;
        make_query(&p, 0x5555, "api.example.com", DNS_TYPE_A, true);
        CHECK_EQ_INT(dns_parse_query(p.b, p.n, q), 0);
}

static void test_dnsmsg_response__a_records(void)
{
        struct pkt p;
        struct dns_query q;
        struct dns_a a[8];
        size_t n_a;
        bool more;
        uint16_t flags;
        sample_query(&q);
        sample_response(&p, 0x9999, 0);

        CHECK_EQ_INT(dns_parse_response(p.b, p.n, 0x9999, &q, a, 8, &n_a, &more, &flags), 0);
        CHECK_EQ_INT(n_a, 3); /* two A and one AAAA; not the CH one, not the additional one */
        CHECK(!more);
        CHECK_EQ_INT(DNS_RCODE(flags), DNS_RCODE_NOERROR);
        CHECK_EQ_INT(a[0].family, AF_INET);
        CHECK_EQ_STR(inet_ntoa(a[0].addr), "198.51.100.7");
        CHECK_EQ_INT(a[0].ttl, 60);
        CHECK_EQ_INT(a[1].family, AF_INET);
        CHECK_EQ_STR(inet_ntoa(a[1].addr), "203.0.113.9");
        CHECK_EQ_INT(a[1].ttl, 0);
        char a6[INET6_ADDRSTRLEN];
        CHECK_EQ_INT(a[2].family, AF_INET6);
        CHECK_EQ_STR(inet_ntop(AF_INET6, &a[2].addr6, a6, sizeof(a6)), "2001:db8::1");
        CHECK_EQ_INT(a[2].ttl, 60);

        /* Room for one: the other is reported as not fitting. */
        CHECK_EQ_INT(dns_parse_response(p.b, p.n, 0x9999, &q, a, 1, &n_a, &more, &flags), 0);
        CHECK_EQ_INT(n_a, 1);
        CHECK(more);
        CHECK_EQ_INT(dns_parse_response(p.b, p.n, 0x9999, &q, NULL, 0, &n_a, &more, NULL), 0);
        CHECK_EQ_INT(n_a, 0);
        CHECK(more);
}

static void test_dnsmsg_response__validation(void)
{
        struct pkt p;
        struct dns_query q;
        struct dns_a a[8];
        size_t n_a;
        bool more;
        uint16_t flags;
        sample_query(&q);

        sample_response(&p, 0x9999, 0);
        CHECK_EQ_INT(dns_parse_response(p.b, p.n, 0x999a, &q, a, 8, &n_a, &more, &flags), -EBADMSG);

        /* QR clear. */
        p.b[2] &= 0x7f;
        CHECK_EQ_INT(dns_parse_response(p.b, p.n, 0x9999, &q, a, 8, &n_a, &more, &flags), -EBADMSG);

        /* Another name, type, class; the same name in other case is the same question. */
        sample_response(&p, 0x9999, 0);
        p.b[13] = 'b';
        CHECK_EQ_INT(dns_parse_response(p.b, p.n, 0x9999, &q, a, 8, &n_a, &more, &flags), -EBADMSG);
        p.b[13] = 'A';
        p.b[18] = 'X';
        CHECK_EQ_INT(dns_parse_response(p.b, p.n, 0x9999, &q, a, 8, &n_a, &more, &flags), 0);
        sample_response(&p, 0x9999, 0);
        p.b[12 + 17 + 1] = DNS_TYPE_AAAA;
        CHECK_EQ_INT(dns_parse_response(p.b, p.n, 0x9999, &q, a, 8, &n_a, &more, &flags), -EBADMSG);
        sample_response(&p, 0x9999, 0);
        p.b[12 + 17 + 3] = 3;
        CHECK_EQ_INT(dns_parse_response(p.b, p.n, 0x9999, &q, a, 8, &n_a, &more, &flags), -EBADMSG);

        /* Two questions. */
        sample_response(&p, 0x9999, 0);
        p.b[5] = 2;
        CHECK_EQ_INT(dns_parse_response(p.b, p.n, 0x9999, &q, a, 8, &n_a, &more, &flags), -EBADMSG);

        /* Cut anywhere inside the records: bad, unless TC is set. */
        sample_response(&p, 0x9999, 0);
        for (size_t n = 0; n < p.n; n++)
                CHECK_EQ_INT(dns_parse_response(p.b, n, 0x9999, &q, a, 8, &n_a, &more, &flags),
                             -EBADMSG);
        sample_response(&p, 0x9999, DNS_FLAG_TC);
        size_t cut = 12 + 17 + 4 + 12 + 22 + 16 + 2; /* inside the second A record */
        CHECK_EQ_INT(dns_parse_response(p.b, cut, 0x9999, &q, a, 8, &n_a, &more, &flags), 0);
        CHECK_EQ_INT(n_a, 1);
        CHECK(flags & DNS_FLAG_TC);
        /* ...but the question must be whole even then. */
        CHECK_EQ_INT(dns_parse_response(p.b, 12 + 10, 0x9999, &q, a, 8, &n_a, &more, &flags),
                     -EBADMSG);

        /* No question: only as an error without answers. */
        pheader(&p, 0x9999, DNS_FLAG_QR | DNS_RCODE_REFUSED, 0, 0, 0, 0);
        CHECK_EQ_INT(dns_parse_response(p.b, p.n, 0x9999, &q, a, 8, &n_a, &more, &flags), 0);
        CHECK_EQ_INT(DNS_RCODE(flags), DNS_RCODE_REFUSED);
        pheader(&p, 0x9999, DNS_FLAG_QR | DNS_RCODE_NOERROR, 0, 0, 0, 0);
        CHECK_EQ_INT(dns_parse_response(p.b, p.n, 0x9999, &q, a, 8, &n_a, &more, &flags), -EBADMSG);
        pheader(&p, 0x9999, DNS_FLAG_QR | DNS_RCODE_NXDOMAIN, 0, 0, 0, 0);
        CHECK_EQ_INT(dns_parse_response(p.b, p.n, 0x9999, &q, a, 8, &n_a, &more, &flags), -EBADMSG);

        /* A compression loop in an answer. */
        pheader(&p, 0x9999, DNS_FLAG_QR, 1, 1, 0, 0);
        pname(&p, "api.example.com");
        p16(&p, DNS_TYPE_A);
        p16(&p, DNS_CLASS_IN);
        size_t at = p.n;
        p8(&p, 1);
        p8(&p, 'a');
        p16(&p, 0xc000 | (uint16_t)at);
        p16(&p, DNS_TYPE_A);
        p16(&p, DNS_CLASS_IN);
        p32(&p, 1);
        p16(&p, 4);
        p32(&p, 0x01020304);
        q.edns = false;
        CHECK_EQ_INT(dns_parse_response(p.b, p.n, 0x9999, &q, a, 8, &n_a, &more, &flags), -EBADMSG);
}

/* ---- names, resolv.conf --------------------------------------------------------------- */

static void test_dnsmsg_name_match(void)
{
        CHECK(dns_name_match("api.example.com", "api.example.com"));
        CHECK(dns_name_match("API.example.com.", "api.Example.COM"));
        CHECK(!dns_name_match("api.example.com", "x.api.example.com"));
        CHECK(!dns_name_match("api.example.com", "example.com"));
        CHECK(dns_name_match("*.example.com", "api.example.com"));
        CHECK(dns_name_match("*.example.com", "a.b.example.com"));
        CHECK(dns_name_match("*.example.com", "A.EXAMPLE.COM."));
        CHECK(!dns_name_match("*.example.com", "example.com"));
        CHECK(!dns_name_match("*.example.com", "badexample.com"));
        CHECK(!dns_name_match("*.example.com", ".example.com"));
        CHECK(!dns_name_match("*.example.com", "example.com.evil.net"));
        CHECK(!dns_name_match("*.", "com"));
        CHECK(!dns_name_match("*", "com"));
        CHECK(!dns_name_match("", ""));
        CHECK(!dns_name_match(NULL, "a"));
}

static void test_dnsmsg_resolv_conf(void)
{
        struct sockaddr_storage ss[3];
        size_t n = 99;
        const char *text = "# generated\n"
                           "search corp.example\n"
                           "nameserver 127.0.0.53\n"
                           "  nameserver\t10.0.0.2  # comment\r\n"
                           ";nameserver 9.9.9.9\n"
                           "nameserver fe80::1%eth0\n"
                           "nameserver 2001:db8::53\n"
                           "nameserver not-an-address\n"
                           "nameserver 8.8.8.8\n"
                           "nameserver 1.1.1.1"; /* no final newline; over the max anyway */
        CHECK_EQ_INT(dns_resolv_conf_parse(text, ss, 3, &n), 0);
        CHECK_EQ_INT(n, 3);
        const struct sockaddr_in *s0 = (const void *)&ss[0], *s1 = (const void *)&ss[1];
        const struct sockaddr_in6 *s2 = (const void *)&ss[2];
        CHECK_EQ_INT(s0->sin_family, AF_INET);
        CHECK_EQ_STR(inet_ntoa(s0->sin_addr), "127.0.0.53");
        CHECK_EQ_INT(ntohs(s0->sin_port), 53);
        CHECK_EQ_STR(inet_ntoa(s1->sin_addr), "10.0.0.2");
        CHECK_EQ_INT(s2->sin6_family, AF_INET6);
        CHECK_EQ_INT(ntohs(s2->sin6_port), 53);

        CHECK_EQ_INT(dns_resolv_conf_parse("", ss, 3, &n), 0);
        CHECK_EQ_INT(n, 0);
        CHECK_EQ_INT(dns_resolv_conf_parse("nameserver 1.1.1.1", ss, 3, &n), 0);
        CHECK_EQ_INT(n, 1);
}

/* ---- fuzzing -------------------------------------------------------------------------- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;

static uint32_t rnd(void)
{
        rng_state ^= rng_state << 13;
        rng_state ^= rng_state >> 7;
        rng_state ^= rng_state << 17;
        return (uint32_t)(rng_state >> 11);
}

static void mutate(uint8_t *b, size_t *n, size_t cap)
{
        int k = 1 + (int)(rnd() % 6);
        for (int i = 0; i < k; i++) {
                switch (rnd() % 6) {
                case 0: /* random byte */
                        if (*n)
                                b[rnd() % *n] = (uint8_t)rnd();
                        break;
                case 1: /* bit flip */
                        if (*n)
                                b[rnd() % *n] ^= (uint8_t)(1u << (rnd() % 8));
                        break;
                case 2: /* a compression pointer anywhere */
                        if (*n >= 2) {
                                size_t at = rnd() % (*n - 1);
                                b[at] = (uint8_t)(0xc0 | (rnd() % 2));
                                b[at + 1] = (uint8_t)rnd();
                        }
                        break;
                case 3: /* truncate */
                        if (*n)
                                *n = rnd() % *n;
                        break;
                case 4: /* a count */
                        if (*n >= 12)
                                b[4 + (rnd() % 8)] = (uint8_t)(rnd() % 4 ? rnd() % 4 : rnd());
                        break;
                case 5: /* grow with junk */
                        while (*n < cap && rnd() % 4)
                                b[(*n)++] = (uint8_t)rnd();
                        break;
                }
        }
}

static void test_dnsmsg_fuzz(void)
{
        struct pkt query, resp;
        make_query(&query, 0x1234, "api.example.com", DNS_TYPE_A, true);
        sample_response(&resp, 0x9999, 0);
        struct dns_query sample_q;
        sample_query(&sample_q);

        unsigned ok_q = 0, ok_r = 0;
        for (int iter = 0; iter < 200000; iter++) {
                /* Exact-size heap copies so ASan sees any read past the end. */
                const struct pkt *src = iter % 2 ? &resp : &query;
                uint8_t work[1024];
                size_t n = src->n;
                memcpy(work, src->b, n);
                mutate(work, &n, sizeof(work));
                uint8_t *m = malloc(n ? n : 1);
                if (!m)
                        return;
                memcpy(m, work, n);

                struct dns_query q;
                if (dns_parse_query(m, n, &q) == 0) {
                        ok_q++;
                        CHECK(strlen(q.name) <= 253);
                        CHECK(q.wire_len >= 1 && q.wire_len <= 255);
                        uint8_t out[12 + 255 + 4 + 11];
                        size_t len;
                        CHECK_EQ_INT(dns_build_reply(&q, 3, 0, out, sizeof(out), &len), 0);
                        CHECK_EQ_INT(dns_build_query(&q, 1, 1232, out, sizeof(out), &len), 0);
                        struct dns_query q2;
                        CHECK_EQ_INT(dns_parse_query(out, len, &q2), 0);
                        CHECK_EQ_STR(q2.name, q.name);
                }
                uint8_t hdr[12];
                size_t hl;
                (void)dns_build_header_reply(m, n, 1, hdr, sizeof(hdr), &hl);

                struct dns_a a[4];
                size_t n_a;
                bool more;
                uint16_t flags;
                uint16_t id = n >= 2 ? (uint16_t)(m[0] << 8 | m[1]) : 0;
                if (dns_parse_response(m, n, id, &sample_q, a, ELEMENTSOF(a), &n_a, &more,
                                       &flags) == 0) {
                        ok_r++;
                        CHECK(n_a <= ELEMENTSOF(a));
                }
                free(m);
        }
        /* The mutations are mild enough that some still parse: the loop exercises both the
         * accept and the reject paths. */
        CHECK(ok_q > 100);
        CHECK(ok_r > 100);
}

int main(void)
{
        RUN(test_dnsmsg_query__valid);
        RUN(test_dnsmsg_query__truncated);
        RUN(test_dnsmsg_query__compression);
        RUN(test_dnsmsg_query__name_limits);
        RUN(test_dnsmsg_query__bad_bytes);
        RUN(test_dnsmsg_query__header);
        RUN(test_dnsmsg_build__replies);
        RUN(test_dnsmsg_build__query);
        RUN(test_dnsmsg_build__header_reply);
        RUN(test_dnsmsg_response__a_records);
        RUN(test_dnsmsg_response__validation);
        RUN(test_dnsmsg_name_match);
        RUN(test_dnsmsg_resolv_conf);
        RUN(test_dnsmsg_fuzz);
        UNIT_EXIT();
}

/* DNS messages (lib/dnsmsg.c): queries from inside an environment and responses from upstream.
 * The first byte picks the role; the rest is the message. As a query: parsed, and when it
 * parses, the upstream query and our own replies are built from it. As a response: validated
 * against a query for example.com (type A, or AAAA when bit 1 of the first byte is set) with
 * the id the message carries, as paddockd's resolver does. */
#include "fuzz.h"
#include "lib/dnsmsg.h"

static void as_query(const uint8_t *msg, size_t len)
{
        struct dns_query q;
        uint8_t out[1500];
        size_t n;
        if (dns_parse_query(msg, len, &q) == 0) {
                FUZZ_ASSERT(strlen(q.name) < sizeof(q.name));
                FUZZ_ASSERT(q.wire_len <= DNS_NAME_WIRE_MAX);
                FUZZ_ASSERT(dns_build_query(&q, 0x1234, DNS_EDNS_UDP_MAX, out, 300, &n) == 0);
                struct dns_query again;
                FUZZ_ASSERT(dns_parse_query(out, n, &again) == 0);
                FUZZ_ASSERT(strcmp(again.name, q.name) == 0);
                (void)dns_build_reply(&q, DNS_RCODE_REFUSED, 0, out, sizeof(out), &n);
                (void)dns_build_reply(&q, DNS_RCODE_NOERROR, DNS_FLAG_TC, out, 40, &n);
        }
        (void)dns_build_header_reply(msg, len, DNS_RCODE_FORMERR, out, sizeof(out), &n);
}

static void as_response(const uint8_t *msg, size_t len, bool aaaa)
{
        static const uint8_t query[] = {0,   0,   1,   0,   0,   1,   0,   0,   0,   0,
                                        0,   0,   7,   'e', 'x', 'a', 'm', 'p', 'l', 'e',
                                        3,   'c', 'o', 'm', 0,   0,   1,   0,   1};
        uint8_t qbuf[sizeof(query)];
        memcpy(qbuf, query, sizeof(query));
        if (aaaa)
                qbuf[sizeof(qbuf) - 3] = DNS_TYPE_AAAA;
        struct dns_query q;
        FUZZ_ASSERT(dns_parse_query(qbuf, sizeof(qbuf), &q) == 0);
        uint16_t id = len >= 2 ? (uint16_t)(msg[0] << 8 | msg[1]) : 0;
        struct dns_a a[4];
        size_t n_a = 99;
        bool more;
        uint16_t flags;
        if (dns_parse_response(msg, len, id, &q, a, 4, &n_a, &more, &flags) == 0) {
                FUZZ_ASSERT(n_a <= 4);
                for (size_t i = 0; i < n_a; i++)
                        FUZZ_ASSERT(a[i].family == AF_INET || a[i].family == AF_INET6);
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        if (size < 1)
                return 0;
        /* A copy exactly as long as the message, so reading past its end is caught. */
        uint8_t *msg = malloc(size - 1 ? size - 1 : 1);
        if (!msg)
                abort();
        memcpy(msg, data + 1, size - 1);
        if (data[0] & 1)
                as_response(msg, size - 1, data[0] & 2);
        else
                as_query(msg, size - 1);
        free(msg);
        return 0;
}

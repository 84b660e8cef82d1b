/* DNS messages (RFC 1035, EDNS0 of RFC 6891) as paddockd's resolver needs them: parse a client
 * query, build the query sent upstream and the replies the resolver makes itself, validate an
 * upstream response and pull the A records out of its answer section. No I/O, no allocation.
 *
 * Every input is hostile (it comes from inside an environment, or from the network): every
 * length, label and compression pointer is bounds-checked; a name is at most 255 bytes on the
 * wire however it is compressed; compression pointers may only point backwards and never into
 * the header, which, with the 255-byte cap, makes pointer loops impossible to follow for long.
 *
 * Names handed to policy code are in presentation form, lower-case, without the trailing dot
 * ("api.example.com"; "" is the root), restricted to letters, digits, '-' and '_': a query for
 * a name with any other byte in a label (a '.' inside a label above all, which would make
 * "a.example" + "com" print like a subdomain of example.com) is rejected as malformed. */
#pragma once
#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define DNS_HEADER_SIZE   12
#define DNS_NAME_WIRE_MAX 255 /* bytes on the wire, uncompressed, root label included */
#define DNS_NAME_TEXT_MAX 254 /* buffer for the presentation form: 253 characters + NUL */
#define DNS_LABEL_MAX     63
#define DNS_UDP_PLAIN_MAX 512  /* reply size limit of a client without EDNS */
#define DNS_EDNS_UDP_MAX  1232 /* what we advertise: fits any path MTU without fragments */
#define DNS_PORT          53

/* Header flag bits (second 16-bit word, host order). */
#define DNS_FLAG_QR       0x8000
#define DNS_FLAG_AA       0x0400
#define DNS_FLAG_TC       0x0200
#define DNS_FLAG_RD       0x0100
#define DNS_FLAG_RA       0x0080
#define DNS_FLAG_AD       0x0020
#define DNS_FLAG_CD       0x0010
#define DNS_OPCODE(flags) (((flags) >> 11) & 0xf)
#define DNS_RCODE(flags)  ((flags)&0xf)
#define DNS_EDNS_FLAG_DO  0x8000

enum {
        DNS_RCODE_NOERROR = 0,
        DNS_RCODE_FORMERR = 1,
        DNS_RCODE_SERVFAIL = 2,
        DNS_RCODE_NXDOMAIN = 3,
        DNS_RCODE_NOTIMP = 4,
        DNS_RCODE_REFUSED = 5,
};

enum {
        DNS_TYPE_A = 1,
        DNS_TYPE_NS = 2,
        DNS_TYPE_CNAME = 5,
        DNS_TYPE_SOA = 6,
        DNS_TYPE_PTR = 12,
        DNS_TYPE_MX = 15,
        DNS_TYPE_TXT = 16,
        DNS_TYPE_AAAA = 28,
        DNS_TYPE_OPT = 41,
        DNS_TYPE_IXFR = 251,
        DNS_TYPE_AXFR = 252,
        DNS_TYPE_ANY = 255,
};

#define DNS_CLASS_IN 1

/* A client's query, as dns_parse_query() found it. */
struct dns_query {
        uint16_t id;
        uint16_t flags;
        uint16_t qtype;
        uint16_t qclass;
        char name[DNS_NAME_TEXT_MAX]; /* lower-case, no trailing dot, "" for the root */
        /* The question name as the client sent it (case preserved for clients that randomise
         * it, RFC draft "0x20"), uncompressed, root label included. */
        uint8_t wire[DNS_NAME_WIRE_MAX];
        size_t wire_len;
        bool edns;              /* an OPT record was present */
        uint16_t edns_udp_size; /* its advertised UDP payload size (only if edns) */
        uint16_t edns_flags;    /* its flags (DNS_EDNS_FLAG_DO) */
};

/* One A or AAAA record of an answer section. ttl follows RFC 2181 §8: a value with the top
 * bit set reads as 0. */
struct dns_a {
        int family; /* AF_INET (A: addr) or AF_INET6 (AAAA: addr6) */
        union {
                struct in_addr addr;
                struct in6_addr addr6;
        };
        uint32_t ttl;
};

/* Parse a query: header, exactly one question, then every record (an/ns/ar) bounds-checked;
 * at most one OPT record, in the additional section, owned by the root. Bytes after the last
 * record are ignored. Returns 0, -EBADMSG for anything malformed (truncated, compression loop,
 * name over 255 bytes, reserved label type, a label byte outside [A-Za-z0-9_-], QR set, qdcount
 * other than 1), -EOPNOTSUPP for an opcode other than QUERY. */
int dns_parse_query(const uint8_t *msg, size_t len, struct dns_query *ret);

/* The query paddockd sends upstream for q: id, q's RD/CD/AD flags, q's question as the client
 * wrote it, and an OPT record (no options, q's DO bit) advertising edns_udp_size, or none when
 * edns_udp_size is 0. Client EDNS options (cookies, client subnet, padding) are not forwarded.
 * Returns 0, -ENOBUFS if size is too small (300 bytes always suffice). */
int dns_build_query(const struct dns_query *q, uint16_t id, uint16_t edns_udp_size, uint8_t *buf,
                    size_t size, size_t *ret_len);

/* A reply to q without records: q's id, QR|RA, q's RD/CD, extra_flags (e.g. DNS_FLAG_TC), rcode;
 * q's question echoed; an OPT record (DNS_EDNS_UDP_MAX, q's DO bit) if q had one. Empty
 * NOERROR, NXDOMAIN, REFUSED, SERVFAIL, or a TC=1 "ask again over TCP". 0 or -ENOBUFS. */
int dns_build_reply(const struct dns_query *q, uint8_t rcode, uint16_t extra_flags, uint8_t *buf,
                    size_t size, size_t *ret_len);

/* A header-only reply (FORMERR, NOTIMP) to a query too broken to parse: id, opcode and RD
 * copied from its header, all counts 0. -EBADMSG if msg is shorter than a header or is itself
 * a response (never answer a response: that is how reflection loops start), -ENOBUFS. */
int dns_build_header_reply(const uint8_t *msg, size_t len, uint8_t rcode, uint8_t *buf, size_t size,
                           size_t *ret_len);

/* Validate msg as the upstream answer to q sent with id: same id, QR set, opcode QUERY, one
 * question equal to q's (name compared case-insensitively, type and class exactly), and every
 * record of every section well-formed (a truncated (TC) message may stop short: the records
 * that are whole count). A response with no question is accepted only as an error (rcode
 * other than NOERROR/NXDOMAIN, no answers): servers do send FORMERR/REFUSED like that.
 * A records (class IN, 4 bytes of data) and AAAA records (class IN, 16 bytes) of the answer
 * section, whatever their owner name, are stored in a[0..max_a) in message order; *ret_n_a is how many were stored, *ret_more whether more did not fit.
 * *ret_flags gets the header flags (rcode, TC...). Returns 0 or -EBADMSG. */
int dns_parse_response(const uint8_t *msg, size_t len, uint16_t id, const struct dns_query *q,
                       struct dns_a *a, size_t max_a, size_t *ret_n_a, bool *ret_more,
                       uint16_t *ret_flags);

/* Allow-list matching on presentation names (case-insensitive, a trailing dot on either side
 * ignored): "host" matches exactly that name; "*.domain" matches every name with at least one
 * more label in front of domain, and not domain itself (list "domain" separately for that). */
bool dns_name_match(const char *pattern, const char *name);

/* The "nameserver ADDR" lines of resolv.conf text: IPv4 and IPv6 literals, port 53; lines
 * starting with '#' or ';', other keywords, and addresses that do not parse (e.g. with a
 * "%scope") are skipped. Fills up to max addresses; *ret_n is how many. Always 0. */
int dns_resolv_conf_parse(const char *text, struct sockaddr_storage *addrs, size_t max,
                          size_t *ret_n);

/* DNS message parsing and building for paddockd's resolver; see dnsmsg.h. */
#include "lib/dnsmsg.h"
#include "lib/util.h"

#include <arpa/inet.h>

/* ---- byte access ---------------------------------------------------------------------- */

static uint16_t get16(const uint8_t *p)
{
        return (uint16_t)(p[0] << 8 | p[1]);
}

static uint32_t get32(const uint8_t *p)
{
        return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void put16(uint8_t *p, uint16_t v)
{
        p[0] = (uint8_t)(v >> 8);
        p[1] = (uint8_t)v;
}

static uint8_t ascii_lower(uint8_t c)
{
        return c >= 'A' && c <= 'Z' ? (uint8_t)(c + ('a' - 'A')) : c;
}

/* ---- names ---------------------------------------------------------------------------- */

/* Maximum compression pointers followed in one name. Loops cannot get past the 255-byte cap
 * anyway (every pointer goes strictly backwards, so a cycle must add labels to the output); this
 * only bounds the work for chains of pointers to pointers. */
#define MAX_POINTER_HOPS 64

/* Read the (possibly compressed) name at *off. Writes its uncompressed wire form, root label
 * included, to wire (DNS_NAME_WIRE_MAX bytes) and its length to *ret_wire_len, and advances
 * *off past the name as stored (after the first pointer, if any). -EBADMSG if it runs past the
 * end, uses a reserved label type (0x40/0x80, so also any "label" longer than 63), points
 * forwards, into the header or at itself, or exceeds 255 bytes. */
static int read_name(const uint8_t *msg, size_t len, size_t *off, uint8_t *wire,
                     size_t *ret_wire_len)
{
        size_t pos = *off, out = 0, after = 0;
        unsigned hops = 0;

        for (;;) {
                if (pos >= len)
                        return -EBADMSG;
                uint8_t c = msg[pos];
                if ((c & 0xc0) == 0xc0) {
                        if (pos + 2 > len)
                                return -EBADMSG;
                        size_t target = (size_t)(c & 0x3f) << 8 | msg[pos + 1];
                        if (target >= pos || target < DNS_HEADER_SIZE || ++hops > MAX_POINTER_HOPS)
                                return -EBADMSG;
                        if (after == 0)
                                after = pos + 2;
                        pos = target;
                        continue;
                }
                if (c & 0xc0)
                        return -EBADMSG;
                if (c == 0) {
                        if (out + 1 > DNS_NAME_WIRE_MAX)
                                return -EBADMSG;
                        wire[out++] = 0;
                        break;
                }
                /* The label, plus the root label that must still follow, must fit. */
                if (pos + 1 + c > len || out + 1 + c + 1 > DNS_NAME_WIRE_MAX)
                        return -EBADMSG;
                memcpy(wire + out, msg + pos, 1 + (size_t)c);
                out += 1 + (size_t)c;
                pos += 1 + (size_t)c;
        }
        *off = after ? after : pos + 1;
        *ret_wire_len = out;
        return 0;
}

static bool host_char(uint8_t c)
{
        return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

/* Presentation form of a wire name (from read_name, so well-formed): lower-case, no trailing
 * dot. -EBADMSG for a byte outside [A-Za-z0-9_-]. 253 characters + NUL always fit. */
static int wire_to_text(const uint8_t *wire, size_t wire_len, char *text)
{
        size_t i = 0, o = 0;
        while (i < wire_len && wire[i] != 0) {
                uint8_t n = wire[i++];
                if (o > 0)
                        text[o++] = '.';
                for (uint8_t k = 0; k < n; k++) {
                        uint8_t c = ascii_lower(wire[i++]);
                        if (!host_char(c))
                                return -EBADMSG;
                        text[o++] = (char)c;
                }
        }
        text[o] = '\0';
        return 0;
}

static bool wire_equal_nocase(const uint8_t *a, size_t a_len, const uint8_t *b, size_t b_len)
{
        if (a_len != b_len)
                return false;
        /* Length bytes are <= 63, below 'A', so lower-casing them changes nothing. */
        for (size_t i = 0; i < a_len; i++)
                if (ascii_lower(a[i]) != ascii_lower(b[i]))
                        return false;
        return true;
}

/* ---- records -------------------------------------------------------------------------- */

struct rr {
        uint8_t owner[DNS_NAME_WIRE_MAX];
        size_t owner_len;
        uint16_t type, class;
        uint32_t ttl;
        uint16_t rdlength;
        size_t rdata; /* offset of the data in the message */
};

/* Read one resource record at *off, checking that its data lies inside the message. */
static int read_rr(const uint8_t *msg, size_t len, size_t *off, struct rr *rr)
{
        size_t pos = *off;
        int r = read_name(msg, len, &pos, rr->owner, &rr->owner_len);
        if (r < 0)
                return r;
        if (len - pos < 10)
                return -EBADMSG;
        rr->type = get16(msg + pos);
        rr->class = get16(msg + pos + 2);
        rr->ttl = get32(msg + pos + 4);
        rr->rdlength = get16(msg + pos + 8);
        pos += 10;
        if (len - pos < rr->rdlength)
                return -EBADMSG;
        rr->rdata = pos;
        *off = pos + rr->rdlength;
        return 0;
}

/* ---- queries -------------------------------------------------------------------------- */

int dns_parse_query(const uint8_t *msg, size_t len, struct dns_query *ret)
{
        if (!msg || len < DNS_HEADER_SIZE)
                return -EBADMSG;

        struct dns_query q = {.id = get16(msg), .flags = get16(msg + 2)};
        if (q.flags & DNS_FLAG_QR)
                return -EBADMSG;
        if (DNS_OPCODE(q.flags) != 0)
                return -EOPNOTSUPP;
        if (get16(msg + 4) != 1)
                return -EBADMSG;
        unsigned an = get16(msg + 6), ns = get16(msg + 8), ar = get16(msg + 10);

        size_t pos = DNS_HEADER_SIZE;
        int r = read_name(msg, len, &pos, q.wire, &q.wire_len);
        if (r < 0)
                return r;
        r = wire_to_text(q.wire, q.wire_len, q.name);
        if (r < 0)
                return r;
        if (len - pos < 4)
                return -EBADMSG;
        q.qtype = get16(msg + pos);
        q.qclass = get16(msg + pos + 2);
        pos += 4;

        /* Queries carry no answers or authority in practice; walk them anyway so that a
         * well-formed query with them still finds its OPT record. 3 * 65535 records at most,
         * each at least 11 bytes, so the message length bounds the loop long before that. */
        for (unsigned i = 0; i < an + ns + ar; i++) {
                struct rr rr;
                r = read_rr(msg, len, &pos, &rr);
                if (r < 0)
                        return r;
                if (rr.type != DNS_TYPE_OPT)
                        continue;
                if (i < an + ns || q.edns || rr.owner_len != 1)
                        return -EBADMSG;
                q.edns = true;
                q.edns_udp_size = rr.class;
                q.edns_flags = (uint16_t)rr.ttl;
        }

        *ret = q;
        return 0;
}

/* Header + question + optional OPT record. */
static int build(uint16_t id, uint16_t flags, const struct dns_query *q, uint16_t edns_udp_size,
                 uint8_t *buf, size_t size, size_t *ret_len)
{
        size_t need = DNS_HEADER_SIZE + q->wire_len + 4 + (edns_udp_size ? 11 : 0);
        if (!buf || size < need || q->wire_len == 0 || q->wire_len > DNS_NAME_WIRE_MAX)
                return -ENOBUFS;

        memset(buf, 0, DNS_HEADER_SIZE);
        put16(buf, id);
        put16(buf + 2, flags);
        put16(buf + 4, 1);
        put16(buf + 10, edns_udp_size ? 1 : 0);
        size_t pos = DNS_HEADER_SIZE;
        memcpy(buf + pos, q->wire, q->wire_len);
        pos += q->wire_len;
        put16(buf + pos, q->qtype);
        put16(buf + pos + 2, q->qclass);
        pos += 4;
        if (edns_udp_size) {
                buf[pos] = 0; /* root owner */
                put16(buf + pos + 1, DNS_TYPE_OPT);
                put16(buf + pos + 3, edns_udp_size);
                buf[pos + 5] = 0; /* extended rcode */
                buf[pos + 6] = 0; /* version */
                put16(buf + pos + 7, q->edns_flags & DNS_EDNS_FLAG_DO);
                put16(buf + pos + 9, 0); /* no options */
                pos += 11;
        }
        *ret_len = pos;
        return 0;
}

int dns_build_query(const struct dns_query *q, uint16_t id, uint16_t edns_udp_size, uint8_t *buf,
                    size_t size, size_t *ret_len)
{
        uint16_t flags = q->flags & (DNS_FLAG_RD | DNS_FLAG_CD | DNS_FLAG_AD);
        return build(id, flags, q, edns_udp_size, buf, size, ret_len);
}

int dns_build_reply(const struct dns_query *q, uint8_t rcode, uint16_t extra_flags, uint8_t *buf,
                    size_t size, size_t *ret_len)
{
        uint16_t flags = DNS_FLAG_QR | DNS_FLAG_RA | (q->flags & (DNS_FLAG_RD | DNS_FLAG_CD)) |
                         (extra_flags & ~0x780f) | (rcode & 0xf);
        return build(q->id, flags, q, q->edns ? DNS_EDNS_UDP_MAX : 0, buf, size, ret_len);
}

int dns_build_header_reply(const uint8_t *msg, size_t len, uint8_t rcode, uint8_t *buf, size_t size,
                           size_t *ret_len)
{
        if (!msg || len < DNS_HEADER_SIZE)
                return -EBADMSG;
        uint16_t qflags = get16(msg + 2);
        if (qflags & DNS_FLAG_QR)
                return -EBADMSG;
        if (!buf || size < DNS_HEADER_SIZE)
                return -ENOBUFS;
        memset(buf, 0, DNS_HEADER_SIZE);
        memcpy(buf, msg, 2);
        put16(buf + 2,
              DNS_FLAG_QR | DNS_FLAG_RA | (qflags & (0x7800 | DNS_FLAG_RD)) | (rcode & 0xf));
        *ret_len = DNS_HEADER_SIZE;
        return 0;
}

/* ---- responses ------------------------------------------------------------------------ */

int dns_parse_response(const uint8_t *msg, size_t len, uint16_t id, const struct dns_query *q,
                       struct dns_a *a, size_t max_a, size_t *ret_n_a, bool *ret_more,
                       uint16_t *ret_flags)
{
        if (!msg || len < DNS_HEADER_SIZE || get16(msg) != id)
                return -EBADMSG;
        uint16_t flags = get16(msg + 2);
        if (!(flags & DNS_FLAG_QR) || DNS_OPCODE(flags) != 0)
                return -EBADMSG;
        unsigned qd = get16(msg + 4), an = get16(msg + 6), ns = get16(msg + 8),
                 ar = get16(msg + 10);
        uint8_t rcode = DNS_RCODE(flags);
        bool truncated = flags & DNS_FLAG_TC;

        size_t pos = DNS_HEADER_SIZE;
        if (qd == 0) {
                if (rcode == DNS_RCODE_NOERROR || rcode == DNS_RCODE_NXDOMAIN || an != 0)
                        return -EBADMSG;
        } else if (qd == 1) {
                uint8_t wire[DNS_NAME_WIRE_MAX];
                size_t wire_len;
                int r = read_name(msg, len, &pos, wire, &wire_len);
                if (r < 0)
                        return r;
                if (len - pos < 4 || !wire_equal_nocase(wire, wire_len, q->wire, q->wire_len) ||
                    get16(msg + pos) != q->qtype || get16(msg + pos + 2) != q->qclass)
                        return -EBADMSG;
                pos += 4;
        } else
                return -EBADMSG;

        size_t n = 0;
        bool more = false;
        for (unsigned i = 0; i < an + ns + ar; i++) {
                struct rr rr;
                int r = read_rr(msg, len, &pos, &rr);
                if (r < 0) {
                        if (truncated)
                                break;
                        return r;
                }
                bool is_a = rr.type == DNS_TYPE_A && rr.rdlength == 4;
                bool is_aaaa = rr.type == DNS_TYPE_AAAA && rr.rdlength == 16;
                if (i >= an || !(is_a || is_aaaa) || rr.class != DNS_CLASS_IN)
                        continue;
                if (n >= max_a) {
                        more = true;
                        continue;
                }
                memset(&a[n], 0, sizeof(a[n]));
                a[n].family = is_a ? AF_INET : AF_INET6;
                if (is_a)
                        memcpy(&a[n].addr, msg + rr.rdata, 4);
                else
                        memcpy(&a[n].addr6, msg + rr.rdata, 16);
                a[n].ttl = rr.ttl & 0x80000000u ? 0 : rr.ttl;
                n++;
        }

        *ret_n_a = n;
        if (ret_more)
                *ret_more = more;
        if (ret_flags)
                *ret_flags = flags;
        return 0;
}

/* ---- policy helpers ------------------------------------------------------------------- */

/* Length without one trailing dot. */
static size_t name_len(const char *s)
{
        size_t n = strlen(s);
        return n > 0 && s[n - 1] == '.' ? n - 1 : n;
}

bool dns_name_match(const char *pattern, const char *name)
{
        if (!pattern || !name)
                return false;
        size_t pl = name_len(pattern), nl = name_len(name);
        if (pl >= 2 && pattern[0] == '*' && pattern[1] == '.') {
                const char *domain = pattern + 2;
                size_t dl = pl - 2;
                /* At least one character and the dot in front of the domain. */
                if (dl == 0 || nl < dl + 2 || name[nl - dl - 1] != '.' || name[0] == '.')
                        return false;
                return strncasecmp(name + nl - dl, domain, dl) == 0;
        }
        return pl == nl && pl > 0 && strncasecmp(pattern, name, pl) == 0;
}

int dns_resolv_conf_parse(const char *text, struct sockaddr_storage *addrs, size_t max,
                          size_t *ret_n)
{
        size_t n = 0;
        const char *line = text;
        while (line && *line) {
                const char *eol = strchr(line, '\n');
                size_t ll = eol ? (size_t)(eol - line) : strlen(line);
                const char *next = eol ? eol + 1 : NULL;

                char buf[128];
                if (ll >= sizeof(buf) || n >= max) {
                        line = next;
                        continue;
                }
                memcpy(buf, line, ll);
                buf[ll] = '\0';
                line = next;

                char *save = NULL;
                const char *kw = strtok_r(buf, " \t\r", &save);
                if (!kw || strcmp(kw, "nameserver") != 0)
                        continue;
                const char *addr = strtok_r(NULL, " \t\r#;", &save);
                if (!addr)
                        continue;

                struct sockaddr_storage ss = {0};
                struct sockaddr_in *sin = (struct sockaddr_in *)&ss;
                struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;
                if (inet_pton(AF_INET, addr, &sin->sin_addr) == 1) {
                        sin->sin_family = AF_INET;
                        sin->sin_port = htons(DNS_PORT);
                } else if (inet_pton(AF_INET6, addr, &sin6->sin6_addr) == 1) {
                        sin6->sin6_family = AF_INET6;
                        sin6->sin6_port = htons(DNS_PORT);
                } else
                        continue;
                addrs[n++] = ss;
        }
        *ret_n = n;
        return 0;
}

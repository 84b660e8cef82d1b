#include "lib/netaddr.h"
#include "lib/util.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

/* IPv4 special-purpose ranges, in order of the table (host byte order). */
static const struct {
        uint32_t net;
        unsigned prefix;
        enum netaddr_class cls;
} v4_ranges[] = {
    {0x00000000, 8, NETADDR_UNSPECIFIED}, /* 0.0.0.0/8 "this network" */
    {0x0a000000, 8, NETADDR_PRIVATE},     /* 10.0.0.0/8 */
    {0x64400000, 10, NETADDR_SHARED},     /* 100.64.0.0/10 carrier-grade NAT */
    {0x7f000000, 8, NETADDR_LOOPBACK},    /* 127.0.0.0/8 */
    {0xa9fe0000, 16, NETADDR_LINK_LOCAL}, /* 169.254.0.0/16, metadata services */
    {0xac100000, 12, NETADDR_PRIVATE},    /* 172.16.0.0/12 */
    {0xc0000000, 24, NETADDR_RESERVED},   /* 192.0.0.0/24 IETF protocol assignments */
    {0xc0586300, 24, NETADDR_RESERVED},   /* 192.88.99.0/24 6to4 relay anycast */
    {0xc0a80000, 16, NETADDR_PRIVATE},    /* 192.168.0.0/16 */
    {0xc6120000, 15, NETADDR_RESERVED},   /* 198.18.0.0/15 benchmarking */
    {0xe0000000, 4, NETADDR_MULTICAST},   /* 224.0.0.0/4 */
    {0xf0000000, 4, NETADDR_RESERVED},    /* 240.0.0.0/4, 255.255.255.255 */
};

enum netaddr_class netaddr_classify_v4(uint32_t addr_be)
{
        uint32_t a = ntohl(addr_be);
        for (size_t i = 0; i < ELEMENTSOF(v4_ranges); i++) {
                uint32_t mask = ~0u << (32 - v4_ranges[i].prefix);
                if ((a & mask) == v4_ranges[i].net)
                        return v4_ranges[i].cls;
        }
        return NETADDR_PUBLIC; /* documentation ranges included: see netaddr.h */
}

static bool v6_prefix(const uint8_t a[16], const uint8_t *p, unsigned bits)
{
        unsigned bytes = bits / 8, rest = bits % 8;
        if (memcmp(a, p, bytes) != 0)
                return false;
        return rest == 0 || ((a[bytes] ^ p[bytes]) & (uint8_t)(0xff << (8 - rest))) == 0;
}

static enum netaddr_class embedded_v4(const uint8_t *p)
{
        uint32_t be;
        memcpy(&be, p, 4);
        return netaddr_classify_v4(be);
}

enum netaddr_class netaddr_classify_v6(const uint8_t a[16])
{
        static const uint8_t zero[16] = {0};
        static const uint8_t mapped[12] = {[10] = 0xff, [11] = 0xff};
        static const uint8_t nat64[12] = {0x00, 0x64, 0xff, 0x9b};
        static const uint8_t nat64_local[6] = {0x00, 0x64, 0xff, 0x9b, 0x00, 0x01};
        static const uint8_t ietf[3] = {0x20, 0x01, 0x00}; /* 2001::/23 */
        static const uint8_t sixtofour[2] = {0x20, 0x02};  /* 2002::/16 */

        if (v6_prefix(a, zero, 120)) { /* ::, ::1 and the unassigned rest of ::/120 */
                if (a[15] > 1)
                        return NETADDR_RESERVED;
                return a[15] ? NETADDR_LOOPBACK : NETADDR_UNSPECIFIED;
        }
        if (v6_prefix(a, mapped, 96))
                return embedded_v4(a + 12);
        if (v6_prefix(a, nat64, 96))
                return embedded_v4(a + 12);
        if (v6_prefix(a, nat64_local, 48))
                return NETADDR_PRIVATE;
        if ((a[0] & 0xfe) == 0xfc) /* fc00::/7 unique local */
                return NETADDR_PRIVATE;
        if (a[0] == 0xfe && (a[1] & 0xc0) == 0x80) /* fe80::/10 */
                return NETADDR_LINK_LOCAL;
        if (a[0] == 0xfe && (a[1] & 0xc0) == 0xc0) /* fec0::/10 site-local (deprecated) */
                return NETADDR_PRIVATE;
        if (a[0] == 0xff)
                return NETADDR_MULTICAST;
        if ((a[0] & 0xe0) != 0x20) /* outside 2000::/3: ::/96 v4-compatible, 100::/64, ... */
                return NETADDR_RESERVED;
        if (v6_prefix(a, ietf, 23)) /* Teredo, benchmarking, ORCHID, ... */
                return NETADDR_RESERVED;
        if (v6_prefix(a, sixtofour, 16))
                return embedded_v4(a + 2);
        return NETADDR_PUBLIC;
}

enum netaddr_class netaddr_classify(const struct sockaddr *sa, size_t len)
{
        if (sa && sa->sa_family == AF_INET && len >= sizeof(struct sockaddr_in))
                return netaddr_classify_v4(((const struct sockaddr_in *)sa)->sin_addr.s_addr);
        if (sa && sa->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6))
                return netaddr_classify_v6(((const struct sockaddr_in6 *)sa)->sin6_addr.s6_addr);
        return NETADDR_RESERVED;
}

const char *netaddr_class_name(enum netaddr_class c)
{
        switch (c) {
        case NETADDR_PUBLIC:
                return "public";
        case NETADDR_UNSPECIFIED:
                return "unspecified (\"this network\")";
        case NETADDR_LOOPBACK:
                return "loopback";
        case NETADDR_PRIVATE:
                return "private";
        case NETADDR_LINK_LOCAL:
                return "link-local";
        case NETADDR_SHARED:
                return "shared (carrier-grade NAT)";
        case NETADDR_MULTICAST:
                return "multicast";
        case NETADDR_RESERVED:
                return "reserved";
        }
        return "reserved";
}

void netaddr_format(const struct sockaddr *sa, size_t len, char *buf, size_t buflen)
{
        const void *a = NULL;
        if (sa && sa->sa_family == AF_INET && len >= sizeof(struct sockaddr_in))
                a = &((const struct sockaddr_in *)sa)->sin_addr;
        else if (sa && sa->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6))
                a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
        if (!a || !inet_ntop(sa->sa_family, a, buf, (socklen_t)buflen))
                snprintf(buf, buflen, "(address family %d)", sa ? sa->sa_family : -1);
}

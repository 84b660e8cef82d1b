/* What kind of address a socket address is, for deciding where the daemon may connect on
 * someone else's behalf (registry pulls: docs/security.md, "registry destinations").
 *
 * NETADDR_PUBLIC is what is left after every special-purpose range of the IANA registries
 * (RFC 6890 and successors) that is not globally reachable, plus the documentation ranges
 * (192.0.2.0/24, 198.51.100.0/24, 203.0.113.0/24, 2001:db8::/32, 3fff::/20): those are never
 * routed on the internet, so a host only reaches them when its admin configured them, and the
 * integration tests use them as a "public" registry inside their network namespace.
 *
 * IPv6 is public only inside 2000::/3 (global unicast), minus its special blocks. Forms that
 * carry an IPv4 address are judged by that address: v4-mapped ::ffff:a.b.c.d, NAT64
 * 64:ff9b::/96 and 6to4 2002:AABB:CCDD::/48. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

enum netaddr_class {
        NETADDR_PUBLIC,
        NETADDR_UNSPECIFIED, /* 0.0.0.0/8 ("this network"), :: */
        NETADDR_LOOPBACK,    /* 127.0.0.0/8, ::1 */
        NETADDR_PRIVATE,     /* 10/8, 172.16/12, 192.168/16, fc00::/7, fec0::/10, 64:ff9b:1::/48 */
        NETADDR_LINK_LOCAL,  /* 169.254/16 (cloud metadata 169.254.169.254), fe80::/10 */
        NETADDR_SHARED,      /* 100.64.0.0/10, carrier-grade NAT */
        NETADDR_MULTICAST,   /* 224/4, ff00::/8 */
        NETADDR_RESERVED,    /* everything else not globally reachable (240/4, 198.18/15, ...) */
};

/* An IPv4 address in network byte order (as in struct in_addr). */
enum netaddr_class netaddr_classify_v4(uint32_t addr_be);
enum netaddr_class netaddr_classify_v6(const uint8_t addr[16]);
/* AF_INET or AF_INET6; anything else (or too short) is NETADDR_RESERVED. */
enum netaddr_class netaddr_classify(const struct sockaddr *sa, size_t len);

/* "private", "loopback", "link-local", ... for messages. */
const char *netaddr_class_name(enum netaddr_class c);

/* The address of sa as text (no port): "10.1.2.3", "fe80::1". buf of at least 64 bytes. */
void netaddr_format(const struct sockaddr *sa, size_t len, char *buf, size_t buflen);

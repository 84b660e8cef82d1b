/* Egress policy of one environment: mode, allow rules, bandwidth, links. Pure parsing and
 * matching, no I/O: the daemon stores it as JSON, the DNS resolver asks it about names, the
 * firewall gets its CIDR rules. */
#pragma once
#include "lib/nft.h"
#include "lib/paddock.h"

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NETPOLICY_MAX_RULES 256
#define NETPOLICY_MAX_LINKS 64

enum allow_kind { ALLOW_HOST, ALLOW_WILDCARD, ALLOW_CIDR };

struct allow_rule {
        enum allow_kind kind;
        char host[254];        /* HOST: "api.example.com"; WILDCARD: "example.com" (for *.) */
        int family;            /* CIDR: AF_INET or AF_INET6 */
        struct in_addr addr;   /* CIDR, AF_INET */
        struct in6_addr addr6; /* CIDR, AF_INET6 */
        uint8_t prefix;
        uint16_t port;         /* 0 = any */
};

struct netpolicy {
        enum net_mode mode;
        struct allow_rule *rules; /* malloc'd, n_rules <= NETPOLICY_MAX_RULES */
        size_t n_rules;
        uint64_t egress_bps, ingress_bps; /* 0 = unlimited */
        char (*links)[NAME_BUF_SIZE];     /* malloc'd environment names */
        size_t n_links;
};

void netpolicy_clear(struct netpolicy *p); /* frees rules and links, keeps the struct */

int netpolicy_mode_parse(const char *s, enum net_mode *ret);
const char *netpolicy_mode_name(enum net_mode m);
/* One rule: "host[:port]", "*.domain[:port]", "a.b.c.d[/n][:port]", and IPv6 networks as
 * "[v6addr[/n]]:port", "[v6addr[/n]]" or "v6addr[/n]" (no port without brackets: the last
 * group of an address is not a port). Lower-cases names; host bits of networks cleared. */
int netpolicy_rule_parse(const char *s, struct allow_rule *ret);
/* Canonical text of a rule (round-trips through netpolicy_rule_parse). */
void netpolicy_rule_format(const struct allow_rule *r, char *buf, size_t len);
/* Is qname (lower-case, no trailing dot) allowed? Sets the port of the first matching rule
 * (0 = any). */
bool netpolicy_allows_name(const struct netpolicy *p, const char *qname, uint16_t *ret_port);
/* The CIDR rules as firewall rules; returns the count written (at most max). */
size_t netpolicy_cidrs(const struct netpolicy *p, struct nft_cidr_rule *out, size_t max);

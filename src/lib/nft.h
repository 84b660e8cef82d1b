/* Paddock's firewall: one nftables table that Paddock owns ("inet <name>"), through libnftables.
 * Never touches any other table; starting or stopping never flushes anyone else's rules.
 *
 * Base chains (in the table): prerouting (nat: published ports DNAT), postrouting (nat:
 * masquerade of the environments' subnet out of any non-environment interface), input (filter:
 * from environment veths only DNS to the resolver address is accepted, everything else to the
 * host is dropped), forward (filter: traffic from each environment's veth jumps to its own
 * chain, or for an open environment without links goes to the shared chain "open_env";
 * traffic to an environment is accepted only if established/related, or from a linked
 * environment, or DNATed by a published port). Per environment with an allow policy or links:
 * chain "env_<name>" and sets "allow4_<name>" (ipv4_addr, timeout: learned addresses, any port)
 * and "allowp4_<name>" (ipv4_addr . inet_service, timeout: learned address+port); listed CIDRs
 * are rules. An open environment without links: its veth in set "open_envs", no chain.
 * <name> is escaped for nft ('_' -> "__", '.' -> "_d", '-' -> "_h").
 *
 * Modes: none (no veth exists, nothing here); open (drop to RFC1918, CGNAT 100.64/10,
 * link-local incl. 169.254.169.254, 100.100.100.200, loopback, multicast, the environments'
 * subnet unless linked; accept the rest); allow (drop the forbidden ranges above first, then
 * accept only destinations in the allow set or matching listed CIDR[:port] rules). Every drop of
 * an environment's traffic is counted in a named counter "denied_<name>".
 *
 * IPv6 (when the table has a v6 subnet) mirrors all of it: set forbidden6 (loopback,
 * unspecified, v4-mapped/compatible, NAT64 prefixes, ULA fc00::/7 incl. fd00:ec2::254,
 * link-local, site-local, multicast, discard, the environments' v6 subnet), per-environment
 * sets "allow6_<name>" / "allowp6_<name>", NAT66 masquerade of the v6 subnet, and in the input
 * chain only neighbour discovery from environments (MLD and router solicitations are dropped
 * without being counted: the kernel sends them by itself). */
#pragma once
#include "lib/paddock.h"

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct nft;

enum net_mode { NET_NONE, NET_OPEN, NET_ALLOW };

struct nft_cidr_rule {
        int family;             /* AF_INET (0 reads as AF_INET) or AF_INET6 */
        struct in_addr addr;    /* AF_INET */
        struct in6_addr addr6;  /* AF_INET6 */
        uint8_t prefix;         /* 0..32, or 0..128 for AF_INET6 */
        uint16_t port;          /* 0 = any */
};

/* A published port the caller knows it added (nft_env_remove_known). */
struct nft_port {
        const char *proto; /* "tcp" or "udp" */
        uint16_t host_port;
        struct in_addr addr;
        uint16_t port;
};

struct nft_env {
        const char *name;        /* environment name (validated [A-Za-z0-9_.-]) */
        const char *host_ifname;
        struct in_addr addr;
        enum net_mode mode;
        const struct nft_cidr_rule *cidrs; /* allow mode: listed CIDRs / hosts */
        size_t n_cidrs;
        const struct in_addr *links;       /* addresses of linked environments (both ways) */
        size_t n_links;
        struct in6_addr addr6;             /* its IPv6 address (only if the table has IPv6) */
        const struct in6_addr *links6;     /* IPv6 addresses of linked environments */
        size_t n_links6;
        bool flush_learned;                /* the allow list changed: forget DNS-learned addresses */
};

/* Create (or re-create) the table; subnet e.g. 10.77.0.0/16; resolver = the gateway address.
 * subnet6/prefix6: the environments' IPv6 subnet, or NULL for an IPv4-only table (every IPv6
 * packet of an environment is dropped). */
int nft_open(const char *table, struct in_addr subnet, uint8_t prefix, struct in_addr resolver,
             const struct in6_addr *subnet6, uint8_t prefix6, struct nft **ret);
void nft_close(struct nft *n);
/* Text of libnftables' last error on n (NULL after a success); valid until the next call. */
const char *nft_last_error(struct nft *n);
/* Delete the whole table (daemon uninstall / tests). */
int nft_destroy_table(struct nft *n);
/* Install or replace everything for one environment, atomically. */
int nft_env_apply(struct nft *n, const struct nft_env *e);
/* Between these two, nft_env_apply and nft_port_add only check and queue their transaction
 * (returning 0); nft_batch_end runs the queue, many at a time, and returns the first error
 * (each refused one is retried alone, so the others still get their rules). For re-applying
 * every environment at once (daemon start): each libnftables call costs a refresh of its
 * cache of the whole table, so one call per environment would be quadratic. */
int nft_batch_begin(struct nft *n);
int nft_batch_end(struct nft *n);
/* Remove everything of an environment, finding its map entries and published ports by listing
 * the maps (orphan cleanup: the caller knows only the name). */
int nft_env_remove(struct nft *n, const char *name);
/* The same without any listing, when the caller knows the environment's host interface and
 * the published ports it added: deletes exactly those in one transaction (falls back to
 * nft_env_remove when the table holds anything else referring to the environment). */
int nft_env_remove_known(struct nft *n, const char *name, const char *host_ifname,
                         const struct nft_port *ports, size_t n_ports);
/* Delete whatever the table holds for link ifname (its entries in envs, envctr, open_envs),
 * before a link of that name comes up: a new owner of the name starts with nothing (dropped)
 * until its own policy is applied, never with a stale entry's. */
int nft_link_forget(struct nft *n, const char *ifname);
/* Add learned addresses (DNS answers) to the environment's allow set for ttl seconds. port 0
 * = the listed domain allowed any port; otherwise that port only. */
int nft_env_allow_addr(struct nft *n, const char *name, struct in_addr a, uint16_t port,
                       uint32_t ttl_s);
int nft_env_allow_addr6(struct nft *n, const char *name, const struct in6_addr *a, uint16_t port,
                        uint32_t ttl_s);
/* Packets dropped for one environment (its "denied_<e>" counter): one netlink get of that
 * object, never a listing (constant cost however many environments there are). */
int nft_env_denied(struct nft *n, const char *name, uint64_t *ret_packets);
/* Every environment's denied counter in one netlink dump, sorted by name (for
 * nft_denied_find); the caller frees *ret. */
struct nft_denied {
        char name[NAME_BUF_SIZE];
        uint64_t packets;
};
int nft_denied_all(struct nft *n, struct nft_denied **ret, size_t *ret_n);
const struct nft_denied *nft_denied_find(const struct nft_denied *all, size_t n, const char *name);
/* Published ports: host TCP/UDP port -> env address:port. */
int nft_port_add(struct nft *n, const char *env, const char *proto, uint16_t host_port,
                 struct in_addr addr, uint16_t port);
int nft_port_remove(struct nft *n, const char *proto, uint16_t host_port);
/* How many environment changes went through raw netlink instead of libnftables (tests). */
unsigned long nft_fast_changes(const struct nft *n);
/* Names of environments that have anything in the table: a chain or a counter (for orphan
 * cleanup). */
int nft_env_list(struct nft *n, char ***ret_names, size_t *ret_n);

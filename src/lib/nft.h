/* Paddock's firewall: one nftables table that Paddock owns ("inet <name>"), through libnftables.
 * Never touches any other table; starting or stopping never flushes anyone else's rules.
 *
 * Base chains (in the table): prerouting (nat: published ports DNAT), postrouting (nat:
 * masquerade of the environments' subnet out of any non-environment interface), input (filter:
 * from environment veths only DNS to the resolver address is accepted, everything else to the
 * host is dropped), forward (filter: traffic from each environment's veth jumps to its own
 * chain; traffic to an environment is accepted only if established/related, or from a linked
 * environment, or DNATed by a published port). Per environment: chain "env_<name>" and sets
 * "allow4_<name>" (ipv4_addr, timeout: learned addresses, any port) and "allowp4_<name>"
 * (ipv4_addr . inet_service, timeout: learned address+port); listed CIDRs are rules.
 * <name> is escaped for nft ('_' -> "__", '.' -> "_d", '-' -> "_h").
 *
 * Modes: none (no veth exists, nothing here); open (drop to RFC1918, CGNAT 100.64/10,
 * link-local incl. 169.254.169.254, 100.100.100.200, loopback, multicast, the environments'
 * subnet unless linked; accept the rest); allow (drop the forbidden ranges above first, then
 * accept only destinations in the allow set or matching listed CIDR[:port] rules). Every drop of
 * an environment's traffic is counted in a named counter "denied_<name>". */
#pragma once
#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct nft;

enum net_mode { NET_NONE, NET_OPEN, NET_ALLOW };

struct nft_cidr_rule {
        struct in_addr addr;
        uint8_t prefix;   /* 0..32 */
        uint16_t port;    /* 0 = any */
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
        bool flush_learned;                /* the allow list changed: forget DNS-learned addresses */
};

/* Create (or re-create) the table; subnet e.g. 10.77.0.0/16; resolver = the gateway address. */
int nft_open(const char *table, struct in_addr subnet, uint8_t prefix, struct in_addr resolver,
             struct nft **ret);
void nft_close(struct nft *n);
/* Text of libnftables' last error on n (NULL after a success); valid until the next call. */
const char *nft_last_error(struct nft *n);
/* Delete the whole table (daemon uninstall / tests). */
int nft_destroy_table(struct nft *n);
/* Install or replace everything for one environment, atomically. */
int nft_env_apply(struct nft *n, const struct nft_env *e);
int nft_env_remove(struct nft *n, const char *name);
/* Add learned addresses (DNS answers) to the environment's allow set for ttl seconds. port 0
 * = the listed domain allowed any port; otherwise that port only. */
int nft_env_allow_addr(struct nft *n, const char *name, struct in_addr a, uint16_t port,
                       uint32_t ttl_s);
int nft_env_denied(struct nft *n, const char *name, uint64_t *ret_packets);
/* Published ports: host TCP/UDP port -> env address:port. */
int nft_port_add(struct nft *n, const char *env, const char *proto, uint16_t host_port,
                 struct in_addr addr, uint16_t port);
int nft_port_remove(struct nft *n, const char *proto, uint16_t host_port);
/* Names of environments that have chains in the table (for orphan cleanup). */
int nft_env_list(struct nft *n, char ***ret_names, size_t *ret_n);

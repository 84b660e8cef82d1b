/* An open environment's firewall objects added and removed as raw nf_tables netlink messages,
 * one kernel transaction each, without libnftables (nft.c's fast path; internal to
 * src/lib/nft*.c).
 *
 * Why: libnftables 1.0.6 fetches every chain, set and stateful object of the table before any
 * "add rule" or "add element", and again after every change (its cache is tied to the kernel's
 * generation): with one chain and one counter per environment, each create and destroy paid a
 * dump that grew with the number of environments (~2 ms each at 1,000; perf, 2026-12-02).
 * Here nothing is read back: the messages name every object, and the rules are the kernel's
 * own encoding of a template chain that nft.c writes with libnftables (same generator as every
 * other environment's chain), dumped once at open, with only the environment's addresses and
 * counter name put in. */
#pragma once
#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>

struct nft_fast;

/* The names of one environment's objects (nft.c's struct env_names, by field). */
struct nft_fast_env {
        const char *chain, *counter, *comment;
        const char *sets[4]; /* its learned sets, deleted if there (a former allow policy) */
        const char *ifname;
        struct in_addr addr;
        const struct in6_addr *addr6; /* NULL without IPv6 */
};

/* Read the rules of template chain tmpl_chain in table "inet table" (written with tmpl_addr,
 * tmpl_addr6 when the table has IPv6, and counter tmpl_counter) and check that the kernel
 * takes NFT_MSG_DESTROY* (Linux 6.3+). -EOPNOTSUPP when either is not so: then nft.c keeps to
 * libnftables. */
int nft_fast_open(const char *table, const char *tmpl_chain, const char *tmpl_counter,
                  struct in_addr tmpl_addr, const struct in6_addr *tmpl_addr6,
                  struct nft_fast **ret);
void nft_fast_free(struct nft_fast *f);

/* One transaction: counter (kept if there), chain (created or flushed) with the template's
 * rules, the learned sets deleted, map entries "envs" (ifname: jump chain) and "envctr"
 * (ifname: counter). -EBUSY/-EEXIST: an entry of ifname points elsewhere. */
int nft_fast_apply(struct nft_fast *f, const struct nft_fast_env *e);
/* One transaction: the map entries of ifname, the chain, the sets, the counter, each only if
 * there. -EBUSY: something else still refers to the chain or counter (nothing was changed). */
int nft_fast_remove(struct nft_fast *f, const struct nft_fast_env *e);

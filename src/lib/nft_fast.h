/* An open environment's firewall objects added and removed as raw nf_tables netlink messages,
 * one kernel transaction each, without libnftables (nft.c's fast path; internal to
 * src/lib/nft*.c).
 *
 * Why: libnftables 1.0.6 fetches every chain, set and stateful object of the table before any
 * "add rule" or "add element", and again after every change (its cache is tied to the kernel's
 * generation): with one counter per environment, each create and destroy paid a dump that grew
 * with the number of environments (~2 ms each at 1,000; perf, 2026-12-02). Here nothing is read
 * back: the messages name every object. An open environment without links has no chain of its
 * own (it shares chain open_env, see nft.c), so these are elements and a counter only. */
#pragma once
#include <stdbool.h>
#include <stddef.h>

struct nft_fast;

/* The names of one environment's objects (nft.c's struct env_names, by field). */
struct nft_fast_env {
        const char *chain, *counter;
        const char *sets[4]; /* its learned sets, deleted if there (a former allow policy) */
        const char *ifname;
};

/* Open the netfilter socket and check that the kernel takes NFT_MSG_DESTROY* (Linux 6.3+):
 * -EOPNOTSUPP when it does not; then nft.c keeps to libnftables. */
int nft_fast_open(const char *table, struct nft_fast **ret);
void nft_fast_free(struct nft_fast *f);

/* One transaction: counter (kept if there); the jump entry of ifname in "envs", the chain and
 * the learned sets of an earlier policy, each deleted if there; entries "envctr" (ifname:
 * counter; Linux 6.18 replaces an entry naming another counter, a kernel that refused it with
 * -EBUSY or -EEXIST would send nft.c the listing way) and "open_envs" (ifname). -EBUSY:
 * another link still jumps to the chain. */
int nft_fast_apply(struct nft_fast *f, const struct nft_fast_env *e);
/* One transaction: the entries of ifname in envs, envctr and open_envs, each only if there. */
int nft_fast_forget(struct nft_fast *f, const char *ifname);
/* One transaction: the entries of ifname, the chain, the sets, the counter, each only if
 * there. -EBUSY: something else still refers to the chain or counter (nothing was changed). */
int nft_fast_remove(struct nft_fast *f, const struct nft_fast_env *e);

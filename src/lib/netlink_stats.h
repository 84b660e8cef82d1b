/* Traffic counters of links, read over rtnetlink: the byte and packet counts of the host side
 * of every environment's veth, for listings and /metrics.
 *
 * Cost: one RTM_GETLINK dump filtered by the kernel to veths (about 1.3 KiB of messages per
 * link, with statistics), so reading 1,000 environments is one syscall round of a few
 * milliseconds, never one request per environment. One link by name is one request. */
#pragma once
#include <stddef.h>
#include <stdint.h>

/* Seen from the link itself: rx is what arrived on it (for an environment's host-side veth,
 * what the environment sent), tx what left through it (what the environment received). */
struct link_stats {
        char name[16];
        uint64_t rx_bytes, tx_bytes, rx_packets, tx_packets;
};

/* Every veth whose name starts with prefix and is name_len bytes long (0: any length), sorted
 * by name (for link_stats_find). *ret is malloc'd (the caller frees it; non-NULL also when
 * none matched). */
int netlink_veth_stats(const char *prefix, size_t name_len, struct link_stats **ret, size_t *ret_n);
/* One link by name; -ENODEV if there is none. */
int netlink_link_stats(const char *ifname, struct link_stats *ret);
/* The entry named name in a sorted array, or NULL (binary search). */
const struct link_stats *link_stats_find(const struct link_stats *all, size_t n, const char *name);

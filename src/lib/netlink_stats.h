/* Traffic counters of links, read over rtnetlink: the byte and packet counts of the host side
 * of every environment's veth, for listings and /metrics.
 *
 * Cost: one RTM_GETSTATS dump of every link's counters (netlink_stats_all), so reading 1,000
 * environments is one syscall round of a few milliseconds, never one request per environment;
 * one link by name is one SIOCGIFINDEX and one request. netlink_veth_stats (a link dump
 * filtered to veths, with names) is the older way and costs O(N^2) in the kernel, see below. */
#pragma once
#include <stddef.h>
#include <stdint.h>

/* Seen from the link itself: rx is what arrived on it (for an environment's host-side veth,
 * what the environment sent), tx what left through it (what the environment received). */
struct link_stats {
        char name[16]; /* "" from netlink_stats_all */
        int ifindex;   /* netlink_stats_all, netlink_link_stats */
        uint64_t rx_bytes, tx_bytes, rx_packets, tx_packets;
};

/* Every veth whose name starts with prefix and is name_len bytes long (0: any length), sorted
 * by name (for link_stats_find). *ret is malloc'd (the caller frees it; non-NULL also when
 * none matched). */
int netlink_veth_stats(const char *prefix, size_t name_len, struct link_stats **ret, size_t *ret_n);
/* One link by name; -ENODEV if there is none. One RTM_GETSTATS request (no link message: see
 * netlink_stats_all). */
int netlink_link_stats(const char *ifname, struct link_stats *ret);
/* Every link of the namespace, by index (sorted: link_stats_by_index), without names: one
 * RTM_GETSTATS dump of only the 64-bit counters (~200 bytes a link). A link dump would be
 * bigger, and for a veth whose peer lives in another namespace the kernel looks up that
 * namespace's id by walking every id it has: N veths cost O(N^2) there (~20 ms at 1,000). */
int netlink_stats_all(struct link_stats **ret, size_t *ret_n);
const struct link_stats *link_stats_by_index(const struct link_stats *all, size_t n, int ifindex);
/* A link's index by name (SIOCGIFINDEX, a hash lookup); -ENODEV if there is none. */
int netlink_ifindex(const char *ifname);
/* The entry named name in a sorted array, or NULL (binary search). */
const struct link_stats *link_stats_find(const struct link_stats *all, size_t n, const char *name);

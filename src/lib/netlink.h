/* Links, addresses, routes and traffic shaping over rtnetlink (libmnl). No `ip`/`tc` at run time.
 *
 * Network model (docs/network.md): routed veth per environment. The host side of every environment's
 * veth carries the same gateway address (e.g. 10.77.0.1/32, like Calico's 169.254.1.1) and a
 * /32 route to the environment's address; the environment side ("eth0") carries the
 * environment's address /32, an on-link route to the gateway and a default route via it. The
 * daemon's DNS resolver listens on the gateway address.
 *
 * IPv6 (when ipv6 is set) is routed the same way: the host side carries the link-local
 * gateway fe80::1 and a /128 route to the environment's address; the environment side carries
 * its address /128 and a default route via fe80::1. Every address is added with IFA_F_NODAD
 * (usable at once) and neither side generates link-local addresses or listens to router
 * advertisements, so nothing but these addresses and routes exists. Without ipv6, IPv6 is
 * switched off inside the environment. */
#pragma once
#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct veth_config {
        const char *host_ifname; /* e.g. "pdk3a9f0c1" (<= 15 chars) */
        const char *env_ifname;  /* "eth0" */
        int env_netns_fd;        /* the environment's network namespace */
        struct in_addr gateway;  /* host side, shared by all environments */
        struct in_addr addr;     /* the environment's address */
        unsigned mtu;            /* 0 = default (1500) */
        bool ipv6;               /* also configure addr6 and the v6 default route */
        struct in6_addr addr6;   /* the environment's IPv6 address (only with ipv6) */
        int host_conf6_fd;       /* /proc/sys/net/ipv6/conf of the caller's namespace, opened
                                  * once (cheaper than a path per knob); 0 (unset): by path */
        bool env_ipv6_set;       /* the environment's IPv6 settings were made at its start
                                  * (lib/spawn.h, enum spawn_net): not written here again */
};

/* The IPv6 settings of an environment's namespace, below /proc/sys/net/ipv6/conf/, before its
 * link is added: without IPv6 for it, off (`off` values; NULL: not written), so that no IPv6
 * path (link-local, SLAAC) exists at all; with it, on but without generated link-local
 * addresses or router advertisements (`on` values), so that its only v6 address and routes are
 * the ones the link adds. "default" covers links made later, "all" the existing ones. Written
 * by PID 1's setup (lib/spawn.c) or else by netlink_veth_create. */
struct netlink_ipv6_knob {
        const char *path, *off, *on;
};
#define NETLINK_IPV6_KNOBS 5
extern const struct netlink_ipv6_knob netlink_ipv6_knobs[NETLINK_IPV6_KNOBS];

/* The host side's IPv6 address on every veth: the environments' v6 default gateway. */
#define NETLINK_GATEWAY6 "fe80::1"


/* Create the pair in the caller's network namespace, move the peer into env_netns_fd, configure
 * both sides as described above and set them up. On failure nothing is left behind. */
int netlink_veth_create(const struct veth_config *c);
/* Delete a link in the caller's namespace; -ENODEV if absent. */
int netlink_link_delete(const char *ifname);
bool netlink_link_exists(const char *ifname);
/* Remove the host side's routes to an environment's addresses (addr/32, addr6/128 unless NULL)
 * from ifname, leaving the link itself. Cheap, unlike deleting a link (which waits for RCU
 * grace periods: 10-30 ms here); for a link that the kernel deletes anyway, with its
 * environment's namespace, in the background. -ENODEV if there is no such link. */
int netlink_env_routes_delete(const char *ifname, struct in_addr addr,
                              const struct in6_addr *addr6);
/* Names of links in the caller's namespace starting with prefix (for orphan cleanup). Caller
 * frees each name and the array. */
int netlink_links_with_prefix(const char *prefix, char ***ret_names, size_t *ret_n);
/* Bring "lo" up inside netns_fd (or the caller's namespace when netns_fd < 0). */
int netlink_loopback_up(int netns_fd);

/* Bandwidth shaping on the host side of an environment's veth, in bits per second; 0 removes
 * the limit. egress = traffic leaving the environment (shaped on the host veth's ingress via an
 * ifb device "<host_ifname>i" and mirred redirect); ingress = traffic to the environment
 * (tbf/htb root qdisc on the host veth). Changeable at any time. */
int tc_set_bandwidth(const char *host_ifname, uint64_t egress_bps, uint64_t ingress_bps);

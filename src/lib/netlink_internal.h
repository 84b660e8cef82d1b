/* Shared between netlink.c (links, addresses, routes) and tc.c (qdiscs, filters, ifb): one
 * rtnetlink socket wrapper on libmnl and the link helpers both need.
 *
 * Every request carries NLM_F_ACK (or is a dump ending in NLMSG_DONE), and nl_talk() reads until
 * that ACK/DONE, so a socket never holds stale replies between requests. Callbacks never abort
 * a transaction: they record their own error in their userdata and keep consuming. */
#pragma once
#include "lib/util.h"

#include <libmnl/libmnl.h>
#include <linux/if.h>
#include <stdbool.h>
#include <stdint.h>

/* Receive buffer: large enough for any single dump skb the kernel builds (it sizes them by the
 * reader's buffer, up to 32 KiB). */
#define NL_RECV_SIZE 32768
/* Send buffer: our requests are a few hundred bytes. */
#define NL_SEND_SIZE 4096

struct nl {
        struct mnl_socket *sock;
        uint32_t portid;
        uint32_t seq;
};

/* An rtnetlink socket in the caller's network namespace. */
int nl_open(struct nl *ret);
/* An rtnetlink socket bound to netns_fd's namespace (the caller's when netns_fd < 0): the
 * thread joins netns_fd for the socket() call only and always returns to its own namespace. */
int nl_open_in_netns(int netns_fd, struct nl *ret);
void nl_close(struct nl *nl);
#define _cleanup_nl_ _cleanup_(nl_close)

/* Start a request in buf (NL_SEND_SIZE bytes): header with the next sequence number and
 * NLM_F_REQUEST | flags. */
struct nlmsghdr *nl_request(struct nl *nl, void *buf, uint16_t type, uint16_t flags);
/* Send nlh and read until its ACK or NLMSG_DONE; cb (may be NULL) sees every data message.
 * Returns 0 or the kernel's -errno. */
int nl_talk(struct nl *nl, struct nlmsghdr *nlh, mnl_cb_t cb, void *userdata);

/* Interface names: 1..IFNAMSIZ-1 bytes. */
bool nl_ifname_valid(const char *name);

struct nl_link {
        int ifindex;
        unsigned mtu;
        unsigned flags;      /* IFF_* */
        char kind[IFNAMSIZ]; /* IFLA_INFO_KIND ("veth", "ifb"), "" when none */
};
/* Look a link up by name; -ENODEV if absent. */
int nl_link_get(struct nl *nl, const char *name, struct nl_link *ret);
/* Create a link of a kind that needs no IFLA_INFO_DATA ("ifb", "dummy"); -EEXIST if taken. */
int nl_link_add(struct nl *nl, const char *name, const char *kind);
/* Set IFF_UP. */
int nl_link_up(struct nl *nl, int ifindex);
/* Delete a link by name; -ENODEV if absent. */
int nl_link_del(struct nl *nl, const char *name);

/* tbf parameters for a rate in bits per second on a link of the given MTU (0 = 1500); see
 * tc.c for the reasoning. Exposed for the unit test of the arithmetic. */
#define TBF_BURST_MS   10            /* bucket: 10 ms of traffic */
#define TBF_LATENCY_MS 50            /* queue: up to 50 ms of traffic beyond the bucket */
#define TBF_MIN_LIMIT  (16u * 1024u) /* queue floor, bytes (~11 frames, 130 ms at 1 mbit/s) */
#define TBF_MAX_BYTES  (1u << 30)    /* cap for bucket and queue, bytes */
struct tc_tbf_params {
        uint64_t rate;  /* bytes per second */
        uint32_t burst; /* bytes */
        uint32_t limit; /* bytes */
};
void tc_tbf_params(uint64_t bps, unsigned mtu, struct tc_tbf_params *ret);

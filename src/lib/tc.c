/* Bandwidth shaping of one environment, on the host side of its veth, over rtnetlink (libmnl).
 *
 *   to the environment ("ingress"):    host veth root ── tbf 1: ──▶ veth ──▶ eth0
 *   from the environment ("egress"):   eth0 ──▶ host veth ingress ffff: ── u32 match-all
 *                                        ── mirred egress redirect ──▶ ifb "<veth>i" root tbf 1:
 *                                        ──▶ back into the host stack as if from the veth
 *
 * A qdisc only shapes what it transmits, and a veth's host side transmits only the traffic
 * going to the environment; what the environment sends arrives on the host side's receive path,
 * where the ingress qdisc can only police (drop), not queue. Redirecting that traffic through an
 * ifb gives it a transmit queue to shape, so TCP from the environment sees a queue with a rate,
 * not a policer's bursts of loss.
 *
 * The environment cannot touch any of this: it lives in the host's namespace. The u32 filter
 * with the match-all key (mask 0) is used rather than matchall because cls_u32 is in every
 * distribution kernel and matchall is not (it is missing on the build machines). */
#include "lib/netlink.h"
#include "lib/netlink_internal.h"
#include "lib/util.h"

#include <arpa/inet.h>
#include <linux/if_ether.h>
#include <linux/pkt_cls.h>
#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>
#include <linux/tc_act/tc_mirred.h>

#define TBF_HANDLE     TC_H_MAKE(1U << 16, 0)     /* "1:" */
#define INGRESS_HANDLE TC_H_MAKE(TC_H_INGRESS, 0) /* "ffff:" */
#define FILTER_PRIO    1U
#define FILTER_HANDLE  0x80000800U /* u32 "800::800": first node of the root hash table */
#define IFB_SUFFIX     "i"

/* ------------------------------------------------------------ rate math */

void tc_tbf_params(uint64_t bps, unsigned mtu, struct tc_tbf_params *ret)
{
        /* bytes per second, at least 1: tbf cannot express less */
        uint64_t rate = bps / 8 ? bps / 8 : 1;
        unsigned frame = (mtu ? mtu : 1500) + ETH_HLEN;

        /* Bucket: TBF_BURST_MS of traffic, i.e. at least rate/HZ for every HZ >= 100 (the
         * classic rule: a bucket smaller than one timer tick's worth of tokens cannot reach
         * the rate), and at least two full frames: a frame larger than the bucket could never
         * be sent (bigger GSO packets are split into frames by tbf itself). The bucket is also
         * the burst an idle environment may send at line rate: 10 ms of traffic is harmless. */
        uint64_t burst = rate * TBF_BURST_MS / 1000;
        if (burst < 2ULL * frame)
                burst = 2ULL * frame;
        if (burst > TBF_MAX_BYTES)
                burst = TBF_MAX_BYTES;

        /* Queue: the bucket plus TBF_LATENCY_MS of traffic at the rate (tc's "latency"), at
         * least TBF_MIN_LIMIT. Measured here with one TCP stream, 1-200 mbit/s: this lands at
         * 95-96% of the rate, which is the goodput of a full link (1448 payload bytes per
         * 1514 on the wire). A queue of a fixed 32-64 KiB instead was worse at low rates
         * (1 mbit/s fell to 0.4-0.8): 250-500 ms of queueing outruns TCP's early RTO estimate
         * and the spurious timeouts collapse the window. Short queues also keep interactive
         * traffic usable while a download runs. */
        uint64_t limit = burst + rate * TBF_LATENCY_MS / 1000;
        if (limit < TBF_MIN_LIMIT)
                limit = TBF_MIN_LIMIT;
        if (limit > TBF_MAX_BYTES)
                limit = TBF_MAX_BYTES;

        *ret = (struct tc_tbf_params){
            .rate = rate,
            .burst = (uint32_t)burst,
            .limit = (uint32_t)limit,
        };
}

/* ------------------------------------------------------------- requests */

static struct nlmsghdr *tc_request(struct nl *nl, void *buf, uint16_t type, uint16_t flags,
                                   int ifindex, uint32_t parent, uint32_t handle, uint32_t info)
{
        struct nlmsghdr *nlh = nl_request(nl, buf, type, flags | NLM_F_ACK);
        struct tcmsg *tcm = mnl_nlmsg_put_extra_header(nlh, sizeof(*tcm));
        tcm->tcm_family = AF_UNSPEC;
        tcm->tcm_ifindex = ifindex;
        tcm->tcm_parent = parent;
        tcm->tcm_handle = handle;
        tcm->tcm_info = info;
        return nlh;
}

/* Root tbf on ifindex, created or changed in place (an existing tbf 1: keeps its queue). */
static int tbf_replace(struct nl *nl, int ifindex, uint64_t bps, unsigned mtu)
{
        struct tc_tbf_params p;
        tc_tbf_params(bps, mtu, &p);

        struct tc_tbf_qopt q = {
            /* ETHERNET: the kernel computes transmit times itself, no rate table needed */
            .rate = {.linklayer = TC_LINKLAYER_ETHERNET,
                     .rate = p.rate > UINT32_MAX ? UINT32_MAX : (uint32_t)p.rate},
            .limit = p.limit,
        };
        char buf[NL_SEND_SIZE];
        struct nlmsghdr *nlh = tc_request(nl, buf, RTM_NEWQDISC, NLM_F_CREATE | NLM_F_REPLACE,
                                          ifindex, TC_H_ROOT, TBF_HANDLE, 0);
        mnl_attr_put_strz(nlh, TCA_KIND, "tbf");
        struct nlattr *opts = mnl_attr_nest_start(nlh, TCA_OPTIONS);
        mnl_attr_put(nlh, TCA_TBF_PARMS, sizeof(q), &q);
        /* The bucket in bytes (the kernel derives tc_tbf_qopt.buffer from it). */
        mnl_attr_put_u32(nlh, TCA_TBF_BURST, p.burst);
        /* 4 GiB/s and up (> 34 Gbit/s) does not fit tc_ratespec.rate. */
        if (p.rate > UINT32_MAX)
                mnl_attr_put_u64(nlh, TCA_TBF_RATE64, p.rate);
        mnl_attr_nest_end(nlh, opts);
        return nl_talk(nl, nlh, NULL, NULL);
}

static int qdisc_delete(struct nl *nl, int ifindex, uint32_t parent, uint32_t handle)
{
        char buf[NL_SEND_SIZE];
        struct nlmsghdr *nlh = tc_request(nl, buf, RTM_DELQDISC, 0, ifindex, parent, handle, 0);
        int r = nl_talk(nl, nlh, NULL, NULL);
        /* ENOENT: nothing but the built-in default (noqueue / no ingress qdisc) is there. */
        return r == -ENOENT ? 0 : r;
}

static int ingress_qdisc_add(struct nl *nl, int ifindex)
{
        char buf[NL_SEND_SIZE];
        /* No EXCL: an existing ingress ffff: is fine and is left as it is. */
        struct nlmsghdr *nlh = tc_request(nl, buf, RTM_NEWQDISC, NLM_F_CREATE, ifindex,
                                          TC_H_INGRESS, INGRESS_HANDLE, 0);
        mnl_attr_put_strz(nlh, TCA_KIND, "ingress");
        return nl_talk(nl, nlh, NULL, NULL);
}

/* On the ingress qdisc of ifindex: every packet, any protocol, redirected to the transmit
 * side of ifb_index. A fixed prio and handle make this a replace of the same filter each time
 * (cls_u32 swaps the node atomically), so changing the ifb never opens an unshaped gap. */
static int redirect_filter_replace(struct nl *nl, int ifindex, int ifb_index)
{
        char sel_buf[sizeof(struct tc_u32_sel) + sizeof(struct tc_u32_key)] = {};
        struct tc_u32_sel sel = {.flags = TC_U32_TERMINAL, .nkeys = 1};
        struct tc_u32_key key = {}; /* mask 0, value 0 at offset 0: matches everything */
        memcpy(sel_buf, &sel, sizeof(sel));
        memcpy(sel_buf + sizeof(sel), &key, sizeof(key));

        struct tc_mirred mirred = {
            .action = TC_ACT_STOLEN, /* the packet now belongs to the ifb */
            .eaction = TCA_EGRESS_REDIR,
            .ifindex = (uint32_t)ifb_index,
        };

        char buf[NL_SEND_SIZE];
        struct nlmsghdr *nlh = tc_request(nl, buf, RTM_NEWTFILTER, NLM_F_CREATE | NLM_F_REPLACE,
                                          ifindex, INGRESS_HANDLE, FILTER_HANDLE,
                                          TC_H_MAKE(FILTER_PRIO << 16, htons(ETH_P_ALL)));
        mnl_attr_put_strz(nlh, TCA_KIND, "u32");
        struct nlattr *opts = mnl_attr_nest_start(nlh, TCA_OPTIONS);
        mnl_attr_put(nlh, TCA_U32_SEL, sizeof(sel_buf), sel_buf);
        struct nlattr *acts = mnl_attr_nest_start(nlh, TCA_U32_ACT);
        struct nlattr *act = mnl_attr_nest_start(nlh, 1); /* first action in the list */
        mnl_attr_put_strz(nlh, TCA_ACT_KIND, "mirred");
        struct nlattr *aopts = mnl_attr_nest_start(nlh, TCA_ACT_OPTIONS);
        mnl_attr_put(nlh, TCA_MIRRED_PARMS, sizeof(mirred), &mirred);
        mnl_attr_nest_end(nlh, aopts);
        mnl_attr_nest_end(nlh, act);
        mnl_attr_nest_end(nlh, acts);
        mnl_attr_nest_end(nlh, opts);
        return nl_talk(nl, nlh, NULL, NULL);
}

/* ------------------------------------------------------------ directions */

/* Traffic to the environment: the host veth's own transmit queue. */
static int set_ingress(struct nl *nl, const struct nl_link *veth, uint64_t bps)
{
        if (bps == 0)
                return qdisc_delete(nl, veth->ifindex, TC_H_ROOT, 0);
        return tbf_replace(nl, veth->ifindex, bps, veth->mtu);
}

/* Undo the egress set-up: filter first (by deleting the ingress qdisc that holds it), so no
 * packet is ever redirected to an ifb that is gone (mirred would drop it), then the ifb.
 * Handle 0, not ffff:, because once an ingress qdisc has been deleted the kernel shows the
 * built-in one in its place, whose handle 0 would not match (-EINVAL instead of -ENOENT). */
static int egress_teardown(struct nl *nl, const struct nl_link *veth, const char *ifb)
{
        int r = qdisc_delete(nl, veth->ifindex, TC_H_INGRESS, 0);
        if (r < 0)
                return r;
        r = nl_link_del(nl, ifb);
        return r == -ENODEV ? 0 : r;
}

/* Traffic from the environment: through the ifb. Order matters: the ifb is shaped before any
 * packet is redirected to it. */
static int set_egress(struct nl *nl, const struct nl_link *veth, const char *ifb, uint64_t bps)
{
        if (bps == 0)
                return egress_teardown(nl, veth, ifb);

        bool created = false;
        struct nl_link l;
        int r = nl_link_get(nl, ifb, &l);
        if (r == -ENODEV) {
                r = nl_link_add(nl, ifb, "ifb");
                if (r < 0)
                        return r;
                created = true;
                r = nl_link_get(nl, ifb, &l);
        }
        if (r < 0)
                goto fail;
        if (strcmp(l.kind, "ifb") != 0) {
                r = -EEXIST; /* the name is taken by something that is not ours */
                goto fail;
        }
        if (!(l.flags & IFF_UP) && (r = nl_link_up(nl, l.ifindex)) < 0)
                goto fail;
        r = tbf_replace(nl, l.ifindex, bps, veth->mtu);
        if (r < 0)
                goto fail;
        r = ingress_qdisc_add(nl, veth->ifindex);
        if (r < 0)
                goto fail;
        r = redirect_filter_replace(nl, veth->ifindex, l.ifindex);
        if (r < 0) {
                /* A filter we cannot replace (say, one in a foreign u32 hash table): start over
                 * with a fresh ingress qdisc, once. */
                r = qdisc_delete(nl, veth->ifindex, TC_H_INGRESS, 0);
                if (r == 0)
                        r = ingress_qdisc_add(nl, veth->ifindex);
                if (r == 0)
                        r = redirect_filter_replace(nl, veth->ifindex, l.ifindex);
                if (r < 0)
                        goto fail;
        }
        return 0;
fail:
        /* A first set-up that failed half-way goes back to unshaped and clean; a change of an
         * existing set-up that failed keeps the previous, working one. */
        if (created)
                (void)egress_teardown(nl, veth, ifb);
        return r;
}

int tc_set_bandwidth(const char *host_ifname, uint64_t egress_bps, uint64_t ingress_bps)
{
        if (!nl_ifname_valid(host_ifname))
                return -EINVAL;
        /* Egress shaping needs room for the suffix in the name; without it there is no ifb
         * that could exist, so removing the limit is still fine. */
        char ifb[IFNAMSIZ + 1];
        bool ifb_fits = (size_t)snprintf(ifb, sizeof(ifb), "%s" IFB_SUFFIX, host_ifname) < IFNAMSIZ;
        if (!ifb_fits && egress_bps > 0)
                return -ENAMETOOLONG;

        _cleanup_nl_ struct nl nl = {};
        int r = nl_open(&nl);
        if (r < 0)
                return r;
        struct nl_link veth;
        r = nl_link_get(&nl, host_ifname, &veth);
        if (r < 0)
                return r;
        r = set_ingress(&nl, &veth, ingress_bps);
        if (r < 0)
                return r;
        if (!ifb_fits)
                return 0;
        return set_egress(&nl, &veth, ifb, egress_bps);
}

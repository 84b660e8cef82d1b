/* Links, addresses and routes over rtnetlink (libmnl); see netlink.h for the network model.
 *
 * The environment side is configured through a second rtnetlink socket that lives in the
 * environment's network namespace: a socket stays bound to the namespace it was created in, so
 * the daemon enters the namespace only for socket() (and for opening its /proc/sys/net files)
 * and returns at once. That is safe because the daemon is single-threaded; setns() moves the
 * calling thread only. */
#include "lib/netlink.h"
#include "lib/netlink_internal.h"
#include "lib/util.h"

#include <arpa/inet.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <linux/veth.h>
#include <time.h>

/* ------------------------------------------------------------------ socket */

int nl_open(struct nl *ret)
{
        struct mnl_socket *sock = mnl_socket_open2(NETLINK_ROUTE, SOCK_CLOEXEC);
        if (!sock)
                return negative_errno();
        if (mnl_socket_bind(sock, 0, MNL_SOCKET_AUTOPID) < 0) {
                int r = negative_errno();
                mnl_socket_close(sock);
                return r;
        }
        /* Errors echo only the header of our request, not the whole request. */
        int one = 1;
        (void)mnl_socket_setsockopt(sock, NETLINK_CAP_ACK, &one, sizeof(one));
        *ret = (struct nl){
            .sock = sock,
            .portid = mnl_socket_get_portid(sock),
            .seq = (uint32_t)time(NULL),
        };
        return 0;
}

void nl_close(struct nl *nl)
{
        if (nl->sock) {
                int saved = errno;
                mnl_socket_close(nl->sock);
                errno = saved;
                nl->sock = NULL;
        }
}

static int open_cb(void *userdata)
{
        return nl_open(userdata);
}

int nl_open_in_netns(int netns_fd, struct nl *ret)
{
        if (netns_fd < 0)
                return nl_open(ret);
        struct nl nl = {};
        int r = netns_run(netns_fd, open_cb, &nl);
        if (r < 0)
                return r;
        *ret = nl;
        return 0;
}

struct nlmsghdr *nl_request(struct nl *nl, void *buf, uint16_t type, uint16_t flags)
{
        memset(buf, 0, NL_SEND_SIZE);
        struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
        nlh->nlmsg_type = type;
        nlh->nlmsg_flags = NLM_F_REQUEST | flags;
        nlh->nlmsg_seq = ++nl->seq;
        return nlh;
}

int nl_talk(struct nl *nl, struct nlmsghdr *nlh, mnl_cb_t cb, void *userdata)
{
        if (mnl_socket_sendto(nl->sock, nlh, nlh->nlmsg_len) < 0)
                return negative_errno();
        _cleanup_free_ char *buf = malloc(NL_RECV_SIZE);
        if (!buf)
                return -ENOMEM;
        for (;;) {
                ssize_t n = mnl_socket_recvfrom(nl->sock, buf, NL_RECV_SIZE);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return negative_errno();
                }
                /* -1: an NLMSG_ERROR with an error (errno = its code) or a malformed reply;
                 * 0 (MNL_CB_STOP): the ACK or NLMSG_DONE; 1: more to come. */
                int r = mnl_cb_run(buf, (size_t)n, nlh->nlmsg_seq, nl->portid, cb, userdata);
                if (r < 0)
                        return negative_errno();
                if (r == MNL_CB_STOP)
                        return 0;
        }
}

bool nl_ifname_valid(const char *name)
{
        return name && name[0] && strlen(name) < IFNAMSIZ;
}

/* ------------------------------------------------------------------- links */

struct link_query {
        struct nl_link link;
        bool found;
};

static int linkinfo_kind(const struct nlattr *linkinfo, char kind[IFNAMSIZ])
{
        const struct nlattr *a;
        mnl_attr_for_each_nested(a, linkinfo)
        {
                if (mnl_attr_get_type(a) == IFLA_INFO_KIND &&
                    mnl_attr_validate(a, MNL_TYPE_NUL_STRING) == 0)
                        snprintf(kind, IFNAMSIZ, "%s", mnl_attr_get_str(a));
        }
        return 0;
}

static int link_get_cb(const struct nlmsghdr *nlh, void *userdata)
{
        struct link_query *q = userdata;
        if (nlh->nlmsg_type != RTM_NEWLINK)
                return MNL_CB_OK;
        const struct ifinfomsg *ifi = mnl_nlmsg_get_payload(nlh);
        q->link = (struct nl_link){.ifindex = ifi->ifi_index, .flags = ifi->ifi_flags};
        const struct nlattr *a;
        mnl_attr_for_each(a, nlh, sizeof(*ifi))
        {
                switch (mnl_attr_get_type(a)) {
                case IFLA_MTU:
                        if (mnl_attr_validate(a, MNL_TYPE_U32) == 0)
                                q->link.mtu = mnl_attr_get_u32(a);
                        break;
                case IFLA_LINKINFO:
                        if (mnl_attr_validate(a, MNL_TYPE_NESTED) == 0)
                                linkinfo_kind(a, q->link.kind);
                        break;
                }
        }
        q->found = true;
        return MNL_CB_OK;
}

int nl_link_get(struct nl *nl, const char *name, struct nl_link *ret)
{
        if (!nl_ifname_valid(name))
                return -EINVAL;
        char buf[NL_SEND_SIZE];
        struct nlmsghdr *nlh = nl_request(nl, buf, RTM_GETLINK, NLM_F_ACK);
        struct ifinfomsg *ifi = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifi));
        ifi->ifi_family = AF_UNSPEC;
        mnl_attr_put_strz(nlh, IFLA_IFNAME, name);
        /* Leave out statistics and VF data: we want the header, MTU and kind. */
        mnl_attr_put_u32(nlh, IFLA_EXT_MASK, RTEXT_FILTER_SKIP_STATS);
        struct link_query q = {};
        int r = nl_talk(nl, nlh, link_get_cb, &q);
        if (r < 0)
                return r;
        if (!q.found)
                return -ENODEV;
        *ret = q.link;
        return 0;
}

int nl_link_add(struct nl *nl, const char *name, const char *kind)
{
        if (!nl_ifname_valid(name))
                return -EINVAL;
        char buf[NL_SEND_SIZE];
        struct nlmsghdr *nlh =
            nl_request(nl, buf, RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL | NLM_F_ACK);
        struct ifinfomsg *ifi = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifi));
        ifi->ifi_family = AF_UNSPEC;
        mnl_attr_put_strz(nlh, IFLA_IFNAME, name);
        struct nlattr *linkinfo = mnl_attr_nest_start(nlh, IFLA_LINKINFO);
        mnl_attr_put_strz(nlh, IFLA_INFO_KIND, kind);
        mnl_attr_nest_end(nlh, linkinfo);
        return nl_talk(nl, nlh, NULL, NULL);
}

int nl_link_up(struct nl *nl, int ifindex)
{
        char buf[NL_SEND_SIZE];
        struct nlmsghdr *nlh = nl_request(nl, buf, RTM_SETLINK, NLM_F_ACK);
        struct ifinfomsg *ifi = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifi));
        ifi->ifi_family = AF_UNSPEC;
        ifi->ifi_index = ifindex;
        ifi->ifi_flags = IFF_UP;
        ifi->ifi_change = IFF_UP;
        return nl_talk(nl, nlh, NULL, NULL);
}

int nl_link_del(struct nl *nl, const char *name)
{
        if (!nl_ifname_valid(name))
                return -EINVAL;
        char buf[NL_SEND_SIZE];
        struct nlmsghdr *nlh = nl_request(nl, buf, RTM_DELLINK, NLM_F_ACK);
        struct ifinfomsg *ifi = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifi));
        ifi->ifi_family = AF_UNSPEC;
        mnl_attr_put_strz(nlh, IFLA_IFNAME, name);
        return nl_talk(nl, nlh, NULL, NULL);
}

static int link_up_by_name(struct nl *nl, const char *name)
{
        struct nl_link l;
        int r = nl_link_get(nl, name, &l);
        if (r < 0)
                return r;
        return nl_link_up(nl, l.ifindex);
}

/* ------------------------------------------------------- addresses, routes */

static int addr_add(struct nl *nl, int ifindex, struct in_addr a)
{
        char buf[NL_SEND_SIZE];
        /* REPLACE: adding what is already there is not an error. */
        struct nlmsghdr *nlh =
            nl_request(nl, buf, RTM_NEWADDR, NLM_F_CREATE | NLM_F_REPLACE | NLM_F_ACK);
        struct ifaddrmsg *ifa = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifa));
        ifa->ifa_family = AF_INET;
        ifa->ifa_prefixlen = 32;
        ifa->ifa_scope = RT_SCOPE_UNIVERSE;
        ifa->ifa_index = (unsigned)ifindex;
        mnl_attr_put(nlh, IFA_LOCAL, sizeof(a), &a);
        mnl_attr_put(nlh, IFA_ADDRESS, sizeof(a), &a);
        return nl_talk(nl, nlh, NULL, NULL);
}

struct route {
        int oif;
        struct in_addr dst;
        unsigned char dst_len;
        const struct in_addr *gateway; /* NULL: on-link (scope link) */
        const struct in_addr *prefsrc; /* NULL: kernel's choice */
};

static int route_add(struct nl *nl, const struct route *rt)
{
        char buf[NL_SEND_SIZE];
        /* EXCL: an existing route to the same destination means an address collision. */
        struct nlmsghdr *nlh =
            nl_request(nl, buf, RTM_NEWROUTE, NLM_F_CREATE | NLM_F_EXCL | NLM_F_ACK);
        struct rtmsg *rtm = mnl_nlmsg_put_extra_header(nlh, sizeof(*rtm));
        rtm->rtm_family = AF_INET;
        rtm->rtm_dst_len = rt->dst_len;
        rtm->rtm_table = RT_TABLE_MAIN;
        rtm->rtm_protocol = RTPROT_STATIC;
        rtm->rtm_scope = rt->gateway ? RT_SCOPE_UNIVERSE : RT_SCOPE_LINK;
        rtm->rtm_type = RTN_UNICAST;
        if (rt->dst_len > 0)
                mnl_attr_put(nlh, RTA_DST, sizeof(rt->dst), &rt->dst);
        if (rt->gateway)
                mnl_attr_put(nlh, RTA_GATEWAY, sizeof(*rt->gateway), rt->gateway);
        if (rt->prefsrc)
                mnl_attr_put(nlh, RTA_PREFSRC, sizeof(*rt->prefsrc), rt->prefsrc);
        mnl_attr_put_u32(nlh, RTA_OIF, (uint32_t)rt->oif);
        return nl_talk(nl, nlh, NULL, NULL);
}

/* IPv6: NODAD makes the address usable at once (no second of "tentative"); nothing else can
 * hold it on a point-to-point veth. A link-local address (the gateway's, on the host side) gets
 * no fe80::/64 prefix route: nothing on the host routes to a link-local address through a veth
 * (neighbour discovery needs no route), and every veth's copy of that route went into one fib6
 * node, a list walked at each add and delete (fib6_add_rt2node, ~1% of a networked create's
 * samples at 2,000). */
static int addr6_add(struct nl *nl, int ifindex, const struct in6_addr *a, unsigned char prefix)
{
        uint32_t flags = IFA_F_NODAD | (IN6_IS_ADDR_LINKLOCAL(a) ? IFA_F_NOPREFIXROUTE : 0);
        char buf[NL_SEND_SIZE];
        struct nlmsghdr *nlh =
            nl_request(nl, buf, RTM_NEWADDR, NLM_F_CREATE | NLM_F_REPLACE | NLM_F_ACK);
        struct ifaddrmsg *ifa = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifa));
        ifa->ifa_family = AF_INET6;
        ifa->ifa_prefixlen = prefix;
        ifa->ifa_flags = IFA_F_NODAD;
        ifa->ifa_scope = IN6_IS_ADDR_LINKLOCAL(a) ? RT_SCOPE_LINK : RT_SCOPE_UNIVERSE;
        ifa->ifa_index = (unsigned)ifindex;
        mnl_attr_put(nlh, IFA_LOCAL, sizeof(*a), a);
        mnl_attr_put(nlh, IFA_ADDRESS, sizeof(*a), a);
        mnl_attr_put_u32(nlh, IFA_FLAGS, flags);
        return nl_talk(nl, nlh, NULL, NULL);
}

/* dst NULL: the default route. gateway NULL: on-link. */
static int route6_add(struct nl *nl, int oif, const struct in6_addr *dst, unsigned char dst_len,
                      const struct in6_addr *gateway)
{
        char buf[NL_SEND_SIZE];
        struct nlmsghdr *nlh =
            nl_request(nl, buf, RTM_NEWROUTE, NLM_F_CREATE | NLM_F_EXCL | NLM_F_ACK);
        struct rtmsg *rtm = mnl_nlmsg_put_extra_header(nlh, sizeof(*rtm));
        rtm->rtm_family = AF_INET6;
        rtm->rtm_dst_len = dst ? dst_len : 0;
        rtm->rtm_table = RT_TABLE_MAIN;
        rtm->rtm_protocol = RTPROT_STATIC;
        rtm->rtm_scope = RT_SCOPE_UNIVERSE;
        rtm->rtm_type = RTN_UNICAST;
        if (dst)
                mnl_attr_put(nlh, RTA_DST, sizeof(*dst), dst);
        if (gateway)
                mnl_attr_put(nlh, RTA_GATEWAY, sizeof(*gateway), gateway);
        mnl_attr_put_u32(nlh, RTA_OIF, (uint32_t)oif);
        return nl_talk(nl, nlh, NULL, NULL);
}

static struct in6_addr gateway6(void)
{
        struct in6_addr a;
        (void)inet_pton(AF_INET6, NETLINK_GATEWAY6, &a);
        return a;
}

/* IPv6 settings of one link (/proc/sys/net/ipv6/conf/<ifname>/..., of the caller's
 * namespace), written while it is down: no generated link-local address (it would go through
 * DAD and be one more address to police) and no router advertisements. conf_fd > 0: that
 * conf/ directory, opened once by the caller: by path, each write looked "net" up among every
 * namespace's dentry of that name under /proc/sys (proc_sys_compare), ~1 ms for the four at
 * 2,000 environments (bench/netns_floor.py). */
static int link_ipv6_quiet(int conf_fd, const char *ifname)
{
        static const struct {
                const char *knob, *value;
        } knobs[] = {
            {"disable_ipv6", "0"}, {"addr_gen_mode", "1"}, {"accept_ra", "0"}, {"autoconf", "0"}};
        if (!nl_ifname_valid(ifname) || strchr(ifname, '/') || ifname[0] == '.')
                return -EINVAL;
        for (size_t i = 0; i < ELEMENTSOF(knobs); i++) {
                char path[128];
                int r = conf_fd > 0
                            ? BUF_PRINTF(path, "%s/%s", ifname, knobs[i].knob)
                            : BUF_PRINTF(path, "/proc/sys/net/ipv6/conf/%s/%s", ifname, knobs[i].knob);
                if (r >= 0)
                        r = write_file_at(conf_fd > 0 ? conf_fd : AT_FDCWD, path, knobs[i].value);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* -------------------------------------------------------------------- veth */

static int veth_add(struct nl *nl, const struct veth_config *c, unsigned mtu)
{
        char buf[NL_SEND_SIZE];
        struct nlmsghdr *nlh =
            nl_request(nl, buf, RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL | NLM_F_ACK);
        struct ifinfomsg *ifi = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifi));
        ifi->ifi_family = AF_UNSPEC;
        mnl_attr_put_strz(nlh, IFLA_IFNAME, c->host_ifname);
        mnl_attr_put_u32(nlh, IFLA_MTU, mtu);
        struct nlattr *linkinfo = mnl_attr_nest_start(nlh, IFLA_LINKINFO);
        mnl_attr_put_strz(nlh, IFLA_INFO_KIND, "veth");
        struct nlattr *data = mnl_attr_nest_start(nlh, IFLA_INFO_DATA);
        struct nlattr *peer = mnl_attr_nest_start(nlh, VETH_INFO_PEER);
        /* VETH_INFO_PEER holds a whole ifinfomsg followed by the peer's attributes. The peer is
         * born in the environment's namespace: it never exists on the host side. */
        struct ifinfomsg *pifi = mnl_nlmsg_get_payload_tail(nlh);
        nlh->nlmsg_len += MNL_ALIGN(sizeof(*pifi));
        memset(pifi, 0, sizeof(*pifi));
        pifi->ifi_family = AF_UNSPEC;
        mnl_attr_put_strz(nlh, IFLA_IFNAME, c->env_ifname);
        mnl_attr_put_u32(nlh, IFLA_NET_NS_FD, (uint32_t)c->env_netns_fd);
        mnl_attr_put_u32(nlh, IFLA_MTU, mtu);
        mnl_attr_nest_end(nlh, peer);
        mnl_attr_nest_end(nlh, data);
        mnl_attr_nest_end(nlh, linkinfo);
        return nl_talk(nl, nlh, NULL, NULL);
}

/* One end of the pair: addr/32 and (addr6 not NULL) addr6/prefix6 on ifname, then the link up.
 * Its index, for the routes, which need the device up. */
static int side_up(struct nl *nl, const char *ifname, struct in_addr addr,
                   const struct in6_addr *addr6, unsigned char prefix6, int *ret_ifindex)
{
        struct nl_link l;
        int r = nl_link_get(nl, ifname, &l);
        if (r < 0)
                return r;
        r = addr_add(nl, l.ifindex, addr);
        if (r < 0)
                return r;
        if (addr6 && (r = addr6_add(nl, l.ifindex, addr6, prefix6)) < 0)
                return r;
        r = nl_link_up(nl, l.ifindex);
        if (r < 0)
                return r;
        *ret_ifindex = l.ifindex;
        return 0;
}

/* Host side: gateway/32, up, then the /32 route to the environment. The route names the
 * gateway as source so that replies to the environment, e.g. from the DNS resolver, always
 * come from the address it knows. */
static int configure_host_side(struct nl *nl, const struct veth_config *c)
{
        struct in6_addr gw6 = gateway6();
        int ifindex, r;
        if (c->ipv6 && (r = link_ipv6_quiet(c->host_conf6_fd, c->host_ifname)) < 0)
                return r;
        r = side_up(nl, c->host_ifname, c->gateway, c->ipv6 ? &gw6 : NULL, 64, &ifindex);
        if (r < 0)
                return r;
        struct route to_env = {.oif = ifindex, .dst = c->addr, .dst_len = 32, .prefsrc = &c->gateway};
        r = route_add(nl, &to_env);
        if (r < 0 || !c->ipv6)
                return r;
        return route6_add(nl, ifindex, &c->addr6, 128, NULL);
}

/* Environment side: addr/32, up, an on-link /32 to the gateway and the default route via it. */
static int configure_env_side(struct nl *nl, const struct veth_config *c)
{
        int ifindex;
        int r = side_up(nl, c->env_ifname, c->addr, c->ipv6 ? &c->addr6 : NULL, 128, &ifindex);
        if (r < 0)
                return r;
        r = route_add(nl, &(struct route){.oif = ifindex, .dst = c->gateway, .dst_len = 32});
        if (r < 0)
                return r;
        r = route_add(nl, &(struct route){.oif = ifindex, .gateway = &c->gateway});
        if (r < 0 || !c->ipv6)
                return r;
        struct in6_addr gw6 = gateway6();
        return route6_add(nl, ifindex, NULL, 0, &gw6);
}

struct env_open {
        struct nl nl;
        bool ipv6;
        bool ipv6_set; /* already done by PID 1's setup */
};

const struct netlink_ipv6_knob netlink_ipv6_knobs[NETLINK_IPV6_KNOBS] = {
    {"default/disable_ipv6", "1", "0"},
    {"all/disable_ipv6", "1", "0"},
    {"default/addr_gen_mode", NULL, "1"},
    {"default/accept_ra", NULL, "0"},
    {"default/autoconf", NULL, "0"},
};

/* Runs inside the environment's namespace: its rtnetlink socket and, unless PID 1's setup made
 * them, the IPv6 settings (netlink_ipv6_knobs): /proc/sys/net shows the namespace of whoever
 * opens the file, hence here. No /proc/sys/net/ipv6 means no IPv6 in the kernel: fine without,
 * an error with. The knobs are written relative to one open of conf/: a path lookup of
 * /proc/sys/net compares against every namespace's "net" dentry, so one lookup per environment
 * instead of five. */
static int env_open_cb(void *userdata)
{
        struct env_open *e = userdata;
        if (e->ipv6_set)
                return nl_open(&e->nl);
        const struct netlink_ipv6_knob *knobs = netlink_ipv6_knobs;
        _cleanup_close_ int conf = open("/proc/sys/net/ipv6/conf", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (conf < 0 && (errno != ENOENT || e->ipv6))
                return -errno;
        for (size_t i = 0; conf >= 0 && i < NETLINK_IPV6_KNOBS; i++) {
                const char *v = e->ipv6 ? knobs[i].on : knobs[i].off;
                if (!v)
                        continue;
                int r = write_file_at(conf, knobs[i].path, v);
                if (r < 0 && (r != -ENOENT || e->ipv6))
                        return r;
        }
        return nl_open(&e->nl);
}

int netlink_veth_create(const struct veth_config *c)
{
        if (!c || !nl_ifname_valid(c->host_ifname) || !nl_ifname_valid(c->env_ifname) ||
            c->env_netns_fd < 0 || c->gateway.s_addr == htonl(INADDR_ANY) ||
            c->addr.s_addr == htonl(INADDR_ANY) || c->gateway.s_addr == c->addr.s_addr)
                return -EINVAL;
        unsigned mtu = c->mtu ? c->mtu : 1500;

        _cleanup_nl_ struct nl host = {};
        int r = nl_open(&host);
        if (r < 0)
                return r;
        /* Everything in the environment that can fail before the link exists, first. */
        struct env_open e = {.ipv6 = c->ipv6, .ipv6_set = c->env_ipv6_set};
        r = netns_run(c->env_netns_fd, env_open_cb, &e);
        if (r < 0)
                return r;
        _cleanup_nl_ struct nl env = e.nl;
        r = link_up_by_name(&env, "lo");
        if (r < 0)
                return r;

        r = veth_add(&host, c, mtu);
        if (r < 0)
                return r; /* nothing was created: the kernel makes both ends or neither */
        r = configure_host_side(&host, c);
        if (r < 0)
                goto fail;
        r = configure_env_side(&env, c);
        if (r < 0)
                goto fail;
        return 0;
fail:
        /* Deleting one end of a veth deletes the other, with its addresses and routes. */
        (void)nl_link_del(&host, c->host_ifname);
        return r;
}

/* ------------------------------------------------------------ other verbs */

int netlink_link_delete(const char *ifname)
{
        if (!nl_ifname_valid(ifname))
                return -EINVAL;
        _cleanup_nl_ struct nl nl = {};
        int r = nl_open(&nl);
        if (r < 0)
                return r;
        r = nl_link_del(&nl, ifname);
        /* The ifb that tc_set_bandwidth() made for this link ("<ifname>i") would outlive it
         * with its qdisc: remove it too, if it really is an ifb. Also when the veth is already
         * gone (-ENODEV): a veth dies with its environment's namespace, its ifb does not. */
        char ifb[IFNAMSIZ + 1];
        struct nl_link l;
        if ((size_t)snprintf(ifb, sizeof(ifb), "%si", ifname) < IFNAMSIZ &&
            nl_link_get(&nl, ifb, &l) == 0 && strcmp(l.kind, "ifb") == 0)
                (void)nl_link_del(&nl, ifb);
        return r;
}

static int route_del(struct nl *nl, int family, int oif, const void *dst, size_t len,
                     unsigned char dst_len)
{
        char buf[NL_SEND_SIZE];
        struct nlmsghdr *nlh = nl_request(nl, buf, RTM_DELROUTE, NLM_F_ACK);
        struct rtmsg *rtm = mnl_nlmsg_put_extra_header(nlh, sizeof(*rtm));
        rtm->rtm_family = (unsigned char)family;
        rtm->rtm_dst_len = dst_len;
        rtm->rtm_table = RT_TABLE_MAIN;
        rtm->rtm_scope = RT_SCOPE_NOWHERE; /* any scope */
        mnl_attr_put(nlh, RTA_DST, len, dst);
        mnl_attr_put_u32(nlh, RTA_OIF, (uint32_t)oif);
        return nl_talk(nl, nlh, NULL, NULL);
}

int netlink_env_routes_delete(const char *ifname, struct in_addr addr,
                              const struct in6_addr *addr6)
{
        if (!nl_ifname_valid(ifname))
                return -EINVAL;
        _cleanup_nl_ struct nl nl = {};
        int r = nl_open(&nl);
        if (r < 0)
                return r;
        struct nl_link l;
        r = nl_link_get(&nl, ifname, &l);
        if (r < 0)
                return r;
        r = route_del(&nl, AF_INET, l.ifindex, &addr, sizeof(addr), 32);
        if (r < 0 && r != -ESRCH)
                return r;
        if (addr6) {
                r = route_del(&nl, AF_INET6, l.ifindex, addr6, sizeof(*addr6), 128);
                if (r < 0 && r != -ESRCH && r != -ENOENT)
                        return r;
        }
        return 0;
}

bool netlink_link_exists(const char *ifname)
{
        _cleanup_nl_ struct nl nl = {};
        struct nl_link l;
        return nl_open(&nl) == 0 && nl_link_get(&nl, ifname, &l) == 0;
}

struct name_list {
        const char *prefix;
        char **names;
        size_t n, allocated;
        int error;
        bool interrupted;
};

static int list_cb(const struct nlmsghdr *nlh, void *userdata)
{
        struct name_list *l = userdata;
        if (nlh->nlmsg_flags & NLM_F_DUMP_INTR)
                l->interrupted = true;
        if (nlh->nlmsg_type != RTM_NEWLINK || l->error < 0)
                return MNL_CB_OK;
        const struct nlattr *a;
        mnl_attr_for_each(a, nlh, sizeof(struct ifinfomsg))
        {
                if (mnl_attr_get_type(a) != IFLA_IFNAME ||
                    mnl_attr_validate(a, MNL_TYPE_NUL_STRING) < 0)
                        continue;
                const char *name = mnl_attr_get_str(a);
                if (strncmp(name, l->prefix, strlen(l->prefix)) != 0)
                        continue;
                if (l->n + 1 >= l->allocated) {
                        size_t na = l->allocated ? l->allocated * 2 : 16;
                        char **nn = realloc(l->names, na * sizeof(*nn));
                        if (!nn) {
                                l->error = -ENOMEM;
                                return MNL_CB_OK;
                        }
                        l->names = nn;
                        l->allocated = na;
                }
                if (!(l->names[l->n] = strdup(name))) {
                        l->error = -ENOMEM;
                        return MNL_CB_OK;
                }
                l->names[++l->n] = NULL;
        }
        return MNL_CB_OK;
}

static void name_list_free(struct name_list *l)
{
        for (size_t i = 0; i < l->n; i++)
                free(l->names[i]);
        free(l->names);
        *l = (struct name_list){.prefix = l->prefix};
}

int netlink_links_with_prefix(const char *prefix, char ***ret_names, size_t *ret_n)
{
        if (!prefix || !ret_names || !ret_n)
                return -EINVAL;
        _cleanup_nl_ struct nl nl = {};
        int r = nl_open(&nl);
        if (r < 0)
                return r;
        struct name_list l = {.prefix = prefix};
        /* A dump that raced a link change says so (NLM_F_DUMP_INTR): take it again. */
        for (int attempt = 0;; attempt++) {
                char buf[NL_SEND_SIZE];
                struct nlmsghdr *nlh = nl_request(&nl, buf, RTM_GETLINK, NLM_F_DUMP);
                struct ifinfomsg *ifi = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifi));
                ifi->ifi_family = AF_UNSPEC;
                mnl_attr_put_u32(nlh, IFLA_EXT_MASK, RTEXT_FILTER_SKIP_STATS);
                r = nl_talk(&nl, nlh, list_cb, &l);
                if (r == 0)
                        r = l.error;
                if (r == 0 && !l.interrupted)
                        break;
                name_list_free(&l);
                if (r < 0)
                        return r;
                if (attempt == 4)
                        return -EAGAIN;
        }
        if (!l.names && !(l.names = calloc(1, sizeof(char *))))
                return -ENOMEM;
        *ret_names = l.names; /* NULL-terminated as well as counted */
        *ret_n = l.n;
        return 0;
}

int netlink_loopback_up(int netns_fd)
{
        _cleanup_nl_ struct nl nl = {};
        int r = nl_open_in_netns(netns_fd, &nl);
        if (r < 0)
                return r;
        return link_up_by_name(&nl, "lo");
}

/* Link traffic counters over rtnetlink: see netlink_stats.h. */
#include "lib/netlink_stats.h"
#include "lib/netlink_internal.h"

#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>

struct stats_list {
        const char *prefix;
        size_t name_len;
        const char *only; /* a single link's name, or NULL */
        struct link_stats *items;
        size_t n, allocated;
        int error;
        bool interrupted;
};

static void stats_of(const struct nlattr *a, struct link_stats *s)
{
        /* rtnl_link_stats64 starts with rx/tx packets, rx/tx bytes; an older kernel's attribute
         * may be shorter than today's struct, so copy only what it carries. */
        struct rtnl_link_stats64 st = {0};
        size_t len = mnl_attr_get_payload_len(a);
        memcpy(&st, mnl_attr_get_payload(a), len < sizeof(st) ? len : sizeof(st));
        s->rx_bytes = st.rx_bytes;
        s->tx_bytes = st.tx_bytes;
        s->rx_packets = st.rx_packets;
        s->tx_packets = st.tx_packets;
}

static int stats_cb(const struct nlmsghdr *nlh, void *userdata)
{
        struct stats_list *l = userdata;
        if (nlh->nlmsg_flags & NLM_F_DUMP_INTR)
                l->interrupted = true;
        if (nlh->nlmsg_type != RTM_NEWLINK || l->error < 0)
                return MNL_CB_OK;
        struct link_stats s = {0};
        bool named = false, counted = false;
        const struct nlattr *a;
        mnl_attr_for_each(a, nlh, sizeof(struct ifinfomsg))
        {
                if (mnl_attr_get_type(a) == IFLA_IFNAME &&
                    mnl_attr_validate(a, MNL_TYPE_NUL_STRING) >= 0) {
                        const char *name = mnl_attr_get_str(a);
                        size_t len = strlen(name);
                        if (len >= sizeof(s.name))
                                return MNL_CB_OK;
                        if (l->only ? strcmp(name, l->only) != 0
                                    : strncmp(name, l->prefix, strlen(l->prefix)) != 0 ||
                                          (l->name_len && len != l->name_len))
                                return MNL_CB_OK;
                        memcpy(s.name, name, len + 1);
                        named = true;
                } else if (mnl_attr_get_type(a) == IFLA_STATS64) {
                        stats_of(a, &s);
                        counted = true;
                }
        }
        if (!named || !counted)
                return MNL_CB_OK;
        if (l->n == l->allocated) {
                size_t na = l->allocated ? l->allocated * 2 : 64;
                struct link_stats *nn = realloc(l->items, na * sizeof(*nn));
                if (!nn) {
                        l->error = -ENOMEM;
                        return MNL_CB_OK;
                }
                l->items = nn;
                l->allocated = na;
        }
        l->items[l->n++] = s;
        return MNL_CB_OK;
}

static int by_name(const void *a, const void *b)
{
        return strcmp(((const struct link_stats *)a)->name, ((const struct link_stats *)b)->name);
}

int netlink_veth_stats(const char *prefix, size_t name_len, struct link_stats **ret, size_t *ret_n)
{
        if (!prefix || !ret || !ret_n)
                return -EINVAL;
        _cleanup_nl_ struct nl nl = {};
        int r = nl_open(&nl);
        if (r < 0)
                return r;
        struct stats_list l = {.prefix = prefix, .name_len = name_len};
        /* A dump that raced a link change says so (NLM_F_DUMP_INTR): take it again. */
        for (int attempt = 0;; attempt++) {
                char buf[NL_SEND_SIZE];
                struct nlmsghdr *nlh = nl_request(&nl, buf, RTM_GETLINK, NLM_F_DUMP);
                struct ifinfomsg *ifi = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifi));
                ifi->ifi_family = AF_UNSPEC;
                /* The kernel leaves out every link of another kind (ifb, the uplink's
                 * physical devices) before building its message. */
                struct nlattr *info = mnl_attr_nest_start(nlh, IFLA_LINKINFO);
                mnl_attr_put_strz(nlh, IFLA_INFO_KIND, "veth");
                mnl_attr_nest_end(nlh, info);
                r = nl_talk(&nl, nlh, stats_cb, &l);
                if (r == 0)
                        r = l.error;
                if (r == 0 && !l.interrupted)
                        break;
                free(l.items);
                l = (struct stats_list){.prefix = prefix, .name_len = name_len};
                if (r < 0)
                        return r;
                if (attempt == 4)
                        return -EAGAIN;
        }
        if (!l.items && !(l.items = calloc(1, sizeof(*l.items))))
                return -ENOMEM;
        qsort(l.items, l.n, sizeof(*l.items), by_name);
        *ret = l.items;
        *ret_n = l.n;
        return 0;
}

/* RTM_GETSTATS answers: the link's index and its 64-bit counters, nothing else (no name, no
 * peer namespace id: a link dump fills those, and for a veth whose peer is in another namespace
 * the id costs a walk over every namespace id, so dumping N veths cost O(N^2)). */
static int index_cb(const struct nlmsghdr *nlh, void *userdata)
{
        struct stats_list *l = userdata;
        if (nlh->nlmsg_flags & NLM_F_DUMP_INTR)
                l->interrupted = true;
        if (nlh->nlmsg_type != RTM_NEWSTATS || l->error < 0 ||
            mnl_nlmsg_get_payload_len(nlh) < sizeof(struct if_stats_msg))
                return MNL_CB_OK;
        const struct if_stats_msg *m = mnl_nlmsg_get_payload(nlh);
        struct link_stats s = {.ifindex = (int)m->ifindex};
        bool counted = false;
        const struct nlattr *a;
        mnl_attr_for_each(a, nlh, sizeof(*m))
        {
                if (mnl_attr_get_type(a) == IFLA_STATS_LINK_64) {
                        stats_of(a, &s);
                        counted = true;
                }
        }
        if (!counted)
                return MNL_CB_OK;
        if (l->n == l->allocated) {
                size_t na = l->allocated ? l->allocated * 2 : 64;
                struct link_stats *nn = realloc(l->items, na * sizeof(*nn));
                if (!nn) {
                        l->error = -ENOMEM;
                        return MNL_CB_OK;
                }
                l->items = nn;
                l->allocated = na;
        }
        l->items[l->n++] = s;
        return MNL_CB_OK;
}

static struct nlmsghdr *stats_request(struct nl *nl, void *buf, uint16_t flags, int ifindex)
{
        struct nlmsghdr *nlh = nl_request(nl, buf, RTM_GETSTATS, flags);
        struct if_stats_msg *m = mnl_nlmsg_put_extra_header(nlh, sizeof(*m));
        m->family = AF_UNSPEC;
        m->ifindex = (uint32_t)ifindex;
        m->filter_mask = IFLA_STATS_FILTER_BIT(IFLA_STATS_LINK_64);
        return nlh;
}

static int by_index(const void *a, const void *b)
{
        int x = ((const struct link_stats *)a)->ifindex, y = ((const struct link_stats *)b)->ifindex;
        return x < y ? -1 : x > y;
}

int netlink_stats_all(struct link_stats **ret, size_t *ret_n)
{
        if (!ret || !ret_n)
                return -EINVAL;
        _cleanup_nl_ struct nl nl = {};
        int r = nl_open(&nl);
        if (r < 0)
                return r;
        struct stats_list l = {0};
        for (int attempt = 0;; attempt++) {
                char buf[NL_SEND_SIZE];
                r = nl_talk(&nl, stats_request(&nl, buf, NLM_F_DUMP, 0), index_cb, &l);
                if (r == 0)
                        r = l.error;
                if (r == 0 && !l.interrupted)
                        break;
                free(l.items);
                l = (struct stats_list){0};
                if (r < 0)
                        return r;
                if (attempt == 4)
                        return -EAGAIN;
        }
        if (!l.items && !(l.items = calloc(1, sizeof(*l.items))))
                return -ENOMEM;
        qsort(l.items, l.n, sizeof(*l.items), by_index);
        *ret = l.items;
        *ret_n = l.n;
        return 0;
}

int netlink_ifindex(const char *ifname)
{
        if (!ifname || !nl_ifname_valid(ifname))
                return -EINVAL;
        _cleanup_close_ int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        struct ifreq ifr = {0};
        memcpy(ifr.ifr_name, ifname, strlen(ifname) + 1);
        if (ioctl(fd, SIOCGIFINDEX, &ifr) < 0)
                return errno == ENODEV ? -ENODEV : -errno;
        return ifr.ifr_ifindex;
}

const struct link_stats *link_stats_by_index(const struct link_stats *all, size_t n, int ifindex)
{
        struct link_stats key = {.ifindex = ifindex};
        return bsearch(&key, all, n, sizeof(*all), by_index);
}

int netlink_link_stats(const char *ifname, struct link_stats *ret)
{
        if (!ifname || !nl_ifname_valid(ifname) || !ret)
                return -EINVAL;
        int ifindex = netlink_ifindex(ifname);
        if (ifindex < 0)
                return ifindex;
        _cleanup_nl_ struct nl nl = {};
        int r = nl_open(&nl);
        if (r < 0)
                return r;
        char buf[NL_SEND_SIZE];
        struct stats_list l = {0};
        r = nl_talk(&nl, stats_request(&nl, buf, NLM_F_ACK, ifindex), index_cb, &l);
        if (r == 0)
                r = l.error;
        if (r == 0 && l.n == 0)
                r = -ENODEV;
        if (r == 0) {
                *ret = l.items[0];
                snprintf(ret->name, sizeof(ret->name), "%s", ifname);
        }
        free(l.items);
        return r;
}

const struct link_stats *link_stats_find(const struct link_stats *all, size_t n, const char *name)
{
        struct link_stats key = {0};
        if (!name || strlen(name) >= sizeof(key.name))
                return NULL;
        strcpy(key.name, name);
        return bsearch(&key, all, n, sizeof(*all), by_name);
}

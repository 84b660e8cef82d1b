/* Raw nf_tables netlink for an open environment's objects: see nft_fast.h for why.
 *
 * A transaction is one nfnetlink batch (BATCH_BEGIN, the messages, BATCH_END): the kernel applies
 * all of it or none. Every message asks for an acknowledgement; the answer to the last one ends
 * the reading, and the first error in between is the transaction's. No message here adds a rule
 * or an element with a jump, so no commit of these makes the kernel validate the table. */
#include "lib/nft_fast.h"
#include "lib/util.h"

#include <arpa/inet.h>
#include <libmnl/libmnl.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netlink.h>
#include <net/if.h>
#include <sys/socket.h>
#include <time.h>

/* linux/netfilter/nf_tables.h of Linux 6.3+ (the installed headers may be older): delete if
 * there, no error if not. */
#define MSG_DESTROYCHAIN   27
#define MSG_DESTROYSET     29
#define MSG_DESTROYSETELEM 30
#define MSG_DESTROYOBJ     31

#define FAST_BUF_SIZE  65536 /* one transaction; an open environment's is well under 1 KiB */
#define FAST_RECV_SIZE 32768
#define MSG_ROOM       4096  /* left free before starting a message */

struct nft_fast {
        char table[64];
        struct mnl_socket *nl;
        uint32_t portid, seq;
        char *buf; /* FAST_BUF_SIZE: the batch being built */
        size_t off;
        uint32_t last_seq;
        bool full;
};

void nft_fast_free(struct nft_fast *f)
{
        if (!f)
                return;
        if (f->nl)
                mnl_socket_close(f->nl);
        free(f->buf);
        free(f);
}

/* ------------------------------------------------------------ building a batch */

static struct nlmsghdr *msg(struct nft_fast *f, uint16_t type, uint16_t flags, uint16_t res_id)
{
        if (f->off + MSG_ROOM > FAST_BUF_SIZE) {
                f->full = true;
                f->off = 0; /* keep building somewhere; the batch is refused at send */
        }
        struct nlmsghdr *nlh = mnl_nlmsg_put_header(f->buf + f->off);
        nlh->nlmsg_type = type;
        nlh->nlmsg_flags = NLM_F_REQUEST | flags;
        nlh->nlmsg_seq = f->last_seq = ++f->seq;
        struct nfgenmsg *g = mnl_nlmsg_put_extra_header(nlh, sizeof(*g));
        g->nfgen_family = type == NFNL_MSG_BATCH_BEGIN || type == NFNL_MSG_BATCH_END
                              ? AF_UNSPEC
                              : NFPROTO_INET;
        g->version = NFNETLINK_V0;
        g->res_id = htons(res_id);
        return nlh;
}

/* The message is complete: account for it. */
static void msg_end(struct nft_fast *f, struct nlmsghdr *nlh)
{
        f->off += nlh->nlmsg_len;
}

static void batch_begin(struct nft_fast *f)
{
        f->off = 0;
        f->full = false;
        msg_end(f, msg(f, NFNL_MSG_BATCH_BEGIN, 0, NFNL_SUBSYS_NFTABLES));
}

static struct nlmsghdr *nft_msg(struct nft_fast *f, int type, uint16_t flags)
{
        return msg(f, (uint16_t)((NFNL_SUBSYS_NFTABLES << 8) | type), flags | NLM_F_ACK, 0);
}

/* Send the batch; the first error of its messages, or 0. The kernel handles a batch inside
 * the send: every answer is queued before sendto() returns, so reading never waits (a batch
 * refused as a whole answers only its first message: no answer for the last one is -EIO). */
static int batch_run(struct nft_fast *f)
{
        uint32_t last = f->last_seq;
        msg_end(f, msg(f, NFNL_MSG_BATCH_END, 0, NFNL_SUBSYS_NFTABLES));
        if (f->full)
                return -ENOBUFS;
        if (mnl_socket_sendto(f->nl, f->buf, f->off) < 0)
                return negative_errno();
        _cleanup_free_ char *rb = malloc(FAST_RECV_SIZE);
        if (!rb)
                return -ENOMEM;
        int first = 0;
        for (;;) {
                ssize_t n = recv(mnl_socket_get_fd(f->nl), rb, FAST_RECV_SIZE, MSG_DONTWAIT);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno == EAGAIN || errno == EWOULDBLOCK)
                                return first ? first : -EIO;
                        return first ? first : negative_errno();
                }
                int len = (int)n;
                for (struct nlmsghdr *h = (struct nlmsghdr *)rb; mnl_nlmsg_ok(h, len);
                     h = mnl_nlmsg_next(h, &len)) {
                        if (h->nlmsg_type != NLMSG_ERROR)
                                continue;
                        const struct nlmsgerr *e = mnl_nlmsg_get_payload(h);
                        if (e->error && !first)
                                first = e->error;
                        if (h->nlmsg_seq == last)
                                return first;
                }
        }
}

int nft_fast_open(const char *table, struct nft_fast **ret)
{
        struct nft_fast *f = calloc(1, sizeof(*f));
        if (!f)
                return -ENOMEM;
        int r = -ENOMEM;
        if (snprintf(f->table, sizeof(f->table), "%s", table) >= (int)sizeof(f->table)) {
                r = -EINVAL;
                goto fail;
        }
        f->buf = malloc(FAST_BUF_SIZE);
        if (!f->buf)
                goto fail;
        f->nl = mnl_socket_open2(NETLINK_NETFILTER, SOCK_CLOEXEC);
        if (!f->nl || mnl_socket_bind(f->nl, 0, MNL_SOCKET_AUTOPID) < 0) {
                r = negative_errno();
                goto fail;
        }
        int one = 1;
        (void)mnl_socket_setsockopt(f->nl, NETLINK_CAP_ACK, &one, sizeof(one));
        f->portid = mnl_socket_get_portid(f->nl);
        f->seq = (uint32_t)time(NULL);

        /* A kernel without NFT_MSG_DESTROY* refuses this batch. */
        batch_begin(f);
        struct nlmsghdr *nlh = nft_msg(f, MSG_DESTROYSET, 0);
        mnl_attr_put_strz(nlh, NFTA_SET_TABLE, f->table);
        mnl_attr_put_strz(nlh, NFTA_SET_NAME, "pdk_probe_absent");
        msg_end(f, nlh);
        if (batch_run(f) != 0) {
                r = -EOPNOTSUPP;
                goto fail;
        }
        *ret = f;
        return 0;
fail:
        nft_fast_free(f);
        return r;
}

/* ------------------------------------------------------------ an environment */

/* ifname as nftables keys it: IFNAMSIZ bytes, zero-padded. */
static void put_ifname_key(struct nlmsghdr *nlh, const char *ifname)
{
        char key[IFNAMSIZ] = {0};
        memcpy(key, ifname, strnlen(ifname, IFNAMSIZ - 1));
        struct nlattr *k = mnl_attr_nest_start(nlh, NFTA_SET_ELEM_KEY);
        mnl_attr_put(nlh, NFTA_DATA_VALUE, sizeof(key), key);
        mnl_attr_nest_end(nlh, k);
}

/* One element of an ifname-keyed set or map: type NEWSETELEM (data: a counter, or none for a
 * set) or DESTROYSETELEM (key only). No jump: that would make the kernel validate the table. */
static void put_map_elem(struct nft_fast *f, int type, const char *map, const char *ifname,
                         const char *counter)
{
        struct nlmsghdr *nlh = nft_msg(f, type, type == NFT_MSG_NEWSETELEM ? NLM_F_CREATE : 0);
        mnl_attr_put_strz(nlh, NFTA_SET_ELEM_LIST_TABLE, f->table);
        mnl_attr_put_strz(nlh, NFTA_SET_ELEM_LIST_SET, map);
        struct nlattr *list = mnl_attr_nest_start(nlh, NFTA_SET_ELEM_LIST_ELEMENTS);
        struct nlattr *el = mnl_attr_nest_start(nlh, NFTA_LIST_ELEM);
        put_ifname_key(nlh, ifname);
        if (counter)
                mnl_attr_put_strz(nlh, NFTA_SET_ELEM_OBJREF, counter);
        mnl_attr_nest_end(nlh, el);
        mnl_attr_nest_end(nlh, list);
        msg_end(f, nlh);
}

static void put_named(struct nft_fast *f, int type, uint16_t flags, uint16_t table_attr,
                      uint16_t name_attr, const char *name)
{
        struct nlmsghdr *nlh = nft_msg(f, type, flags);
        mnl_attr_put_strz(nlh, table_attr, f->table);
        mnl_attr_put_strz(nlh, name_attr, name);
        msg_end(f, nlh);
}

static void put_sets_destroy(struct nft_fast *f, const struct nft_fast_env *e)
{
        for (size_t i = 0; i < 4; i++)
                put_named(f, MSG_DESTROYSET, 0, NFTA_SET_TABLE, NFTA_SET_NAME, e->sets[i]);
}

int nft_fast_apply(struct nft_fast *f, const struct nft_fast_env *e)
{
        if (!f || !e)
                return -EINVAL;
        batch_begin(f);

        /* the counter: kept with its totals when it is there (a counter has no update) */
        struct nlmsghdr *nlh = nft_msg(f, NFT_MSG_NEWOBJ, NLM_F_CREATE);
        mnl_attr_put_strz(nlh, NFTA_OBJ_TABLE, f->table);
        mnl_attr_put_strz(nlh, NFTA_OBJ_NAME, e->counter);
        mnl_attr_put_u32(nlh, NFTA_OBJ_TYPE, htonl(NFT_OBJECT_COUNTER));
        struct nlattr *d = mnl_attr_nest_start(nlh, NFTA_OBJ_DATA);
        mnl_attr_put_u64(nlh, NFTA_COUNTER_BYTES, 0);
        mnl_attr_put_u64(nlh, NFTA_COUNTER_PACKETS, 0);
        mnl_attr_nest_end(nlh, d);
        msg_end(f, nlh);

        /* The chain of an earlier policy (links, an allow list, a daemon before the shared
         * chain) goes with the link's jump to it and its learned sets: the interface is this
         * environment's. Refused (EBUSY) while another link still jumps to the chain. */
        put_map_elem(f, MSG_DESTROYSETELEM, "envs", e->ifname, NULL);
        put_named(f, MSG_DESTROYCHAIN, 0, NFTA_CHAIN_TABLE, NFTA_CHAIN_NAME, e->chain);
        put_sets_destroy(f, e);
        /* -EBUSY when the link's entry names another counter */
        put_map_elem(f, NFT_MSG_NEWSETELEM, "envctr", e->ifname, e->counter);
        put_map_elem(f, NFT_MSG_NEWSETELEM, "open_envs", e->ifname, NULL);
        return batch_run(f);
}

/* The entries keyed by ifname, whatever they point to. */
static void put_link_forget(struct nft_fast *f, const char *ifname)
{
        put_map_elem(f, MSG_DESTROYSETELEM, "envs", ifname, NULL);
        put_map_elem(f, MSG_DESTROYSETELEM, "envctr", ifname, NULL);
        put_map_elem(f, MSG_DESTROYSETELEM, "open_envs", ifname, NULL);
}

int nft_fast_forget(struct nft_fast *f, const char *ifname)
{
        if (!f || !ifname)
                return -EINVAL;
        batch_begin(f);
        put_link_forget(f, ifname);
        return batch_run(f);
}

int nft_fast_remove(struct nft_fast *f, const struct nft_fast_env *e)
{
        if (!f || !e)
                return -EINVAL;
        batch_begin(f);
        /* The interface is going away, and a "pdk*" interface without an entry is dropped. */
        put_link_forget(f, e->ifname);
        /* Refused (EBUSY) while anything else refers to them: the caller looks for it. */
        put_named(f, MSG_DESTROYCHAIN, 0, NFTA_CHAIN_TABLE, NFTA_CHAIN_NAME, e->chain);
        put_sets_destroy(f, e);
        struct nlmsghdr *nlh = nft_msg(f, MSG_DESTROYOBJ, 0);
        mnl_attr_put_strz(nlh, NFTA_OBJ_TABLE, f->table);
        mnl_attr_put_strz(nlh, NFTA_OBJ_NAME, e->counter);
        mnl_attr_put_u32(nlh, NFTA_OBJ_TYPE, htonl(NFT_OBJECT_COUNTER));
        msg_end(f, nlh);
        return batch_run(f);
}

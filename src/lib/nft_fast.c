/* Raw nf_tables netlink for an open environment's objects: see nft_fast.h for why.
 *
 * A transaction is one nfnetlink batch (BATCH_BEGIN, the messages, BATCH_END): the kernel applies
 * all of it or none. Every message asks for an acknowledgement; the answer to the last one ends
 * the reading, and the first error in between is the transaction's.
 *
 * Safety of the template: nft.c writes chain tmpl_chain with the same generator as every
 * environment's chain (env_chain_rules), for a made-up environment with address tmpl_addr
 * (outside the pool: the subnet's broadcast address) and counter tmpl_counter. The kernel's dump
 * of those rules is kept as it came. nft_fast_open() accepts it only if each template constant
 * occurs exactly where expected: one "cmp" with tmpl_addr, one with tmpl_addr6 when the table
 * has IPv6, and the counter only as an "objref" by name; and no anonymous set (its elements
 * would not be copied) and no jump. Putting an environment in replaces exactly those values
 * (same lengths for the addresses; the objref expression is rebuilt around the new name). */
#include "lib/nft_fast.h"
#include "lib/util.h"

#include <arpa/inet.h>
#include <endian.h>
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

#define FAST_BUF_SIZE  65536 /* one transaction; an open environment's is ~3 KiB */
#define FAST_RECV_SIZE 32768
#define MSG_ROOM       4096  /* left free before starting a message */

struct tmpl_rule {
        void *expr; /* payload of NFTA_RULE_EXPRESSIONS, as dumped */
        size_t len;
};

struct nft_fast {
        char table[64];
        struct mnl_socket *nl;
        uint32_t portid, seq;
        struct tmpl_rule *rules;
        size_t n_rules;
        char tmpl_counter[256];
        uint8_t tmpl4[4], tmpl6[16];
        bool ipv6;
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
        for (size_t i = 0; i < f->n_rules; i++)
                free(f->rules[i].expr);
        free(f->rules);
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

/* ------------------------------------------------------------ the template */

static int attr_cb(const struct nlattr *a, void *data)
{
        const struct nlattr **tb = ((const struct nlattr ***)data)[0];
        uint16_t max = (uint16_t)(uintptr_t)((const struct nlattr ***)data)[1];
        uint16_t t = mnl_attr_get_type(a);
        if (t <= max)
                tb[t] = a;
        return MNL_CB_OK;
}

/* tb[0..max] = the attributes of the nest a (or of nlh's payload after the nfgenmsg). */
static int parse_nest(const struct nlattr *a, const struct nlattr **tb, uint16_t max)
{
        memset(tb, 0, (max + 1u) * sizeof(*tb));
        const void *arg[2] = {tb, (void *)(uintptr_t)max};
        return mnl_attr_parse_nested(a, attr_cb, arg) < 0 ? -EINVAL : 0;
}

static int parse_msg(const struct nlmsghdr *nlh, const struct nlattr **tb, uint16_t max)
{
        memset(tb, 0, (max + 1u) * sizeof(*tb));
        const void *arg[2] = {tb, (void *)(uintptr_t)max};
        return mnl_attr_parse(nlh, sizeof(struct nfgenmsg), attr_cb, arg) < 0 ? -EINVAL : 0;
}

static const char *str_attr(const struct nlattr *a)
{
        return a && mnl_attr_validate(a, MNL_TYPE_NUL_STRING) == 0 ? mnl_attr_get_str(a) : NULL;
}

/* The value of a "cmp" expression's data (NULL if it has none). */
static struct nlattr *cmp_value(const struct nlattr *data)
{
        const struct nlattr *tb[NFTA_CMP_MAX + 1], *d[NFTA_DATA_MAX + 1];
        if (parse_nest(data, tb, NFTA_CMP_MAX) < 0 || !tb[NFTA_CMP_DATA] ||
            parse_nest(tb[NFTA_CMP_DATA], d, NFTA_DATA_MAX) < 0)
                return NULL;
        return (struct nlattr *)d[NFTA_DATA_VALUE];
}

struct tmpl_count {
        int addr4, addr6, counter, bad;
};

/* Check one rule's expressions against the template rules above. */
static void tmpl_check(const struct nft_fast *f, const void *expr, size_t len,
                       struct tmpl_count *c)
{
        const struct nlattr *attr;
        mnl_attr_for_each_payload(expr, len)
        {
                const struct nlattr *el = attr;
                const struct nlattr *tb[NFTA_EXPR_MAX + 1];
                const char *name;
                if (mnl_attr_get_type(el) != NFTA_LIST_ELEM || parse_nest(el, tb, NFTA_EXPR_MAX) < 0 ||
                    !(name = str_attr(tb[NFTA_EXPR_NAME])) || !tb[NFTA_EXPR_DATA]) {
                        c->bad++;
                        continue;
                }
                if (strcmp(name, "cmp") == 0) {
                        const struct nlattr *v = cmp_value(tb[NFTA_EXPR_DATA]);
                        size_t vl = v ? mnl_attr_get_payload_len(v) : 0;
                        if (vl == 4 && memcmp(mnl_attr_get_payload(v), f->tmpl4, 4) == 0)
                                c->addr4++;
                        if (vl == 16 && memcmp(mnl_attr_get_payload(v), f->tmpl6, 16) == 0)
                                c->addr6++;
                } else if (strcmp(name, "objref") == 0) {
                        const struct nlattr *o[NFTA_OBJREF_MAX + 1];
                        const char *on;
                        if (parse_nest(tb[NFTA_EXPR_DATA], o, NFTA_OBJREF_MAX) < 0 ||
                            !(on = str_attr(o[NFTA_OBJREF_IMM_NAME])) || !o[NFTA_OBJREF_IMM_TYPE] ||
                            o[NFTA_OBJREF_SET_NAME] ||
                            o[NFTA_OBJREF_SET_ID] || strcmp(on, f->tmpl_counter) != 0)
                                c->bad++;
                        else
                                c->counter++;
                } else if (strcmp(name, "lookup") == 0 || strcmp(name, "dynset") == 0) {
                        const struct nlattr *l[NFTA_LOOKUP_MAX + 1];
                        const char *sn;
                        /* named sets only: "__set%d" is an anonymous one */
                        if (strcmp(name, "dynset") == 0 ||
                            parse_nest(tb[NFTA_EXPR_DATA], l, NFTA_LOOKUP_MAX) < 0 ||
                            !(sn = str_attr(l[NFTA_LOOKUP_SET])) || strncmp(sn, "__", 2) == 0)
                                c->bad++;
                } else if (strcmp(name, "immediate") == 0) {
                        const struct nlattr *im[NFTA_IMMEDIATE_MAX + 1], *d[NFTA_DATA_MAX + 1];
                        const struct nlattr *v[NFTA_VERDICT_MAX + 1];
                        if (parse_nest(tb[NFTA_EXPR_DATA], im, NFTA_IMMEDIATE_MAX) < 0 ||
                            !im[NFTA_IMMEDIATE_DATA] ||
                            parse_nest(im[NFTA_IMMEDIATE_DATA], d, NFTA_DATA_MAX) < 0)
                                c->bad++;
                        else if (d[NFTA_DATA_VERDICT] &&
                                 (parse_nest(d[NFTA_DATA_VERDICT], v, NFTA_VERDICT_MAX) < 0 ||
                                  v[NFTA_VERDICT_CHAIN] || v[NFTA_VERDICT_CHAIN_ID]))
                                c->bad++; /* a jump or goto */
                }
        }
}

struct dump_ctx {
        struct nft_fast *f;
        const char *chain;
        int error;
};

static int rule_cb(const struct nlmsghdr *nlh, void *data)
{
        struct dump_ctx *d = data;
        const struct nlattr *tb[NFTA_RULE_MAX + 1];
        const char *chain;
        if (d->error)
                return MNL_CB_OK;
        if (parse_msg(nlh, tb, NFTA_RULE_MAX) < 0 || !(chain = str_attr(tb[NFTA_RULE_CHAIN])) ||
            strcmp(chain, d->chain) != 0 || !tb[NFTA_RULE_EXPRESSIONS]) {
                d->error = -EINVAL;
                return MNL_CB_OK;
        }
        struct nft_fast *f = d->f;
        struct tmpl_rule *p = reallocarray(f->rules, f->n_rules + 1, sizeof(*p));
        if (!p) {
                d->error = -ENOMEM;
                return MNL_CB_OK;
        }
        f->rules = p;
        size_t len = mnl_attr_get_payload_len(tb[NFTA_RULE_EXPRESSIONS]);
        void *copy = malloc(len ? len : 1);
        if (!copy) {
                d->error = -ENOMEM;
                return MNL_CB_OK;
        }
        memcpy(copy, mnl_attr_get_payload(tb[NFTA_RULE_EXPRESSIONS]), len);
        f->rules[f->n_rules++] = (struct tmpl_rule){copy, len};
        return MNL_CB_OK;
}

/* Every rule of the template chain, in order. */
static int tmpl_dump(struct nft_fast *f, const char *chain)
{
        f->off = 0;
        f->full = false;
        struct nlmsghdr *nlh =
            msg(f, (NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_GETRULE, NLM_F_DUMP, 0);
        mnl_attr_put_strz(nlh, NFTA_RULE_TABLE, f->table);
        mnl_attr_put_strz(nlh, NFTA_RULE_CHAIN, chain);
        if (mnl_socket_sendto(f->nl, nlh, nlh->nlmsg_len) < 0)
                return negative_errno();
        _cleanup_free_ char *rb = malloc(FAST_RECV_SIZE);
        if (!rb)
                return -ENOMEM;
        struct dump_ctx d = {.f = f, .chain = chain};
        for (;;) {
                ssize_t n = mnl_socket_recvfrom(f->nl, rb, FAST_RECV_SIZE);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return negative_errno();
                }
                int r = mnl_cb_run(rb, (size_t)n, nlh->nlmsg_seq, f->portid, rule_cb, &d);
                if (r < 0)
                        return negative_errno();
                if (r == MNL_CB_STOP)
                        return d.error;
        }
}

int nft_fast_open(const char *table, const char *tmpl_chain, const char *tmpl_counter,
                  struct in_addr tmpl_addr, const struct in6_addr *tmpl_addr6,
                  struct nft_fast **ret)
{
        struct nft_fast *f = calloc(1, sizeof(*f));
        if (!f)
                return -ENOMEM;
        int r = -ENOMEM;
        if (snprintf(f->table, sizeof(f->table), "%s", table) >= (int)sizeof(f->table) ||
            snprintf(f->tmpl_counter, sizeof(f->tmpl_counter), "%s", tmpl_counter) >=
                (int)sizeof(f->tmpl_counter)) {
                r = -EINVAL;
                goto fail;
        }
        memcpy(f->tmpl4, &tmpl_addr, 4);
        f->ipv6 = tmpl_addr6 != NULL;
        if (tmpl_addr6)
                memcpy(f->tmpl6, tmpl_addr6, 16);
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

        if ((r = tmpl_dump(f, tmpl_chain)) < 0)
                goto fail;
        struct tmpl_count c = {0};
        for (size_t i = 0; i < f->n_rules; i++)
                tmpl_check(f, f->rules[i].expr, f->rules[i].len, &c);
        if (f->n_rules == 0 || c.bad || c.addr4 != 1 || c.addr6 != (f->ipv6 ? 1 : 0) ||
            c.counter < 1) {
                r = -EOPNOTSUPP;
                goto fail;
        }
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

/* The template's rule with e's addresses and counter, appended to chain e->chain. */
static void put_rule(struct nft_fast *f, const struct tmpl_rule *t, const struct nft_fast_env *e)
{
        struct nlmsghdr *nlh = nft_msg(f, NFT_MSG_NEWRULE, NLM_F_CREATE | NLM_F_APPEND);
        mnl_attr_put_strz(nlh, NFTA_RULE_TABLE, f->table);
        mnl_attr_put_strz(nlh, NFTA_RULE_CHAIN, e->chain);
        struct nlattr *list = mnl_attr_nest_start(nlh, NFTA_RULE_EXPRESSIONS);
        const struct nlattr *attr;
        mnl_attr_for_each_payload(t->expr, t->len)
        {
                const struct nlattr *el = attr;
                const struct nlattr *tb[NFTA_EXPR_MAX + 1];
                if (parse_nest(el, tb, NFTA_EXPR_MAX) < 0) /* checked at open */
                        continue;
                const char *name = str_attr(tb[NFTA_EXPR_NAME]);
                const struct nlattr *data = tb[NFTA_EXPR_DATA];
                struct nlattr *ne = mnl_attr_nest_start(nlh, NFTA_LIST_ELEM);
                mnl_attr_put_strz(nlh, NFTA_EXPR_NAME, name);
                if (strcmp(name, "objref") == 0) {
                        struct nlattr *nd = mnl_attr_nest_start(nlh, NFTA_EXPR_DATA);
                        const struct nlattr *o[NFTA_OBJREF_MAX + 1];
                        (void)parse_nest(data, o, NFTA_OBJREF_MAX);
                        mnl_attr_put(nlh, NFTA_OBJREF_IMM_TYPE,
                                     mnl_attr_get_payload_len(o[NFTA_OBJREF_IMM_TYPE]),
                                     mnl_attr_get_payload(o[NFTA_OBJREF_IMM_TYPE]));
                        mnl_attr_put_strz(nlh, NFTA_OBJREF_IMM_NAME, e->counter);
                        mnl_attr_nest_end(nlh, nd);
                } else {
                        struct nlattr *copy = mnl_nlmsg_get_payload_tail(nlh);
                        mnl_attr_put(nlh, data->nla_type, mnl_attr_get_payload_len(data),
                                     mnl_attr_get_payload(data));
                        struct nlattr *v = strcmp(name, "cmp") == 0 ? cmp_value(copy) : NULL;
                        size_t vl = v ? mnl_attr_get_payload_len(v) : 0;
                        if (vl == 4 && memcmp(mnl_attr_get_payload(v), f->tmpl4, 4) == 0)
                                memcpy(mnl_attr_get_payload(v), &e->addr, 4);
                        else if (vl == 16 && e->addr6 &&
                                 memcmp(mnl_attr_get_payload(v), f->tmpl6, 16) == 0)
                                memcpy(mnl_attr_get_payload(v), e->addr6, 16);
                }
                mnl_attr_nest_end(nlh, ne);
        }
        mnl_attr_nest_end(nlh, list);
        msg_end(f, nlh);
}

/* ifname as nftables keys it: IFNAMSIZ bytes, zero-padded. */
static void put_ifname_key(struct nlmsghdr *nlh, const char *ifname)
{
        char key[IFNAMSIZ] = {0};
        memcpy(key, ifname, strnlen(ifname, IFNAMSIZ - 1));
        struct nlattr *k = mnl_attr_nest_start(nlh, NFTA_SET_ELEM_KEY);
        mnl_attr_put(nlh, NFTA_DATA_VALUE, sizeof(key), key);
        mnl_attr_nest_end(nlh, k);
}

/* One element of an ifname-keyed map: type NEWSETELEM (data: jump chain, or counter) or
 * DESTROYSETELEM (key only). */
static void put_map_elem(struct nft_fast *f, int type, const char *map, const char *ifname,
                         const char *jump, const char *counter)
{
        struct nlmsghdr *nlh = nft_msg(f, type, type == NFT_MSG_NEWSETELEM ? NLM_F_CREATE : 0);
        mnl_attr_put_strz(nlh, NFTA_SET_ELEM_LIST_TABLE, f->table);
        mnl_attr_put_strz(nlh, NFTA_SET_ELEM_LIST_SET, map);
        struct nlattr *list = mnl_attr_nest_start(nlh, NFTA_SET_ELEM_LIST_ELEMENTS);
        struct nlattr *el = mnl_attr_nest_start(nlh, NFTA_LIST_ELEM);
        put_ifname_key(nlh, ifname);
        if (jump) {
                struct nlattr *d = mnl_attr_nest_start(nlh, NFTA_SET_ELEM_DATA);
                struct nlattr *v = mnl_attr_nest_start(nlh, NFTA_DATA_VERDICT);
                mnl_attr_put_u32(nlh, NFTA_VERDICT_CODE, htonl((uint32_t)NFT_JUMP));
                mnl_attr_put_strz(nlh, NFTA_VERDICT_CHAIN, jump);
                mnl_attr_nest_end(nlh, v);
                mnl_attr_nest_end(nlh, d);
        }
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
        if (!f || !e || (f->ipv6 && !e->addr6) || strlen(e->comment) > 250)
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

        /* the chain, with its comment as nftables writes it (udata TLV: type 0 = comment) */
        nlh = nft_msg(f, NFT_MSG_NEWCHAIN, NLM_F_CREATE);
        mnl_attr_put_strz(nlh, NFTA_CHAIN_TABLE, f->table);
        mnl_attr_put_strz(nlh, NFTA_CHAIN_NAME, e->chain);
        uint8_t udata[2 + 256];
        size_t cl = strlen(e->comment) + 1;
        udata[0] = 0;
        udata[1] = (uint8_t)cl;
        memcpy(udata + 2, e->comment, cl);
        mnl_attr_put(nlh, NFTA_CHAIN_USERDATA, 2 + cl, udata);
        msg_end(f, nlh);

        /* flushed and refilled in this transaction: no packet sees it half-built */
        put_named(f, NFT_MSG_DELRULE, 0, NFTA_RULE_TABLE, NFTA_RULE_CHAIN, e->chain);
        for (size_t i = 0; i < f->n_rules; i++)
                put_rule(f, &f->rules[i], e);
        /* an open environment learns nothing: the sets of a former allow policy go, now that
         * the rules that used them are gone */
        put_sets_destroy(f, e);
        put_map_elem(f, NFT_MSG_NEWSETELEM, "envs", e->ifname, e->chain, NULL);
        put_map_elem(f, NFT_MSG_NEWSETELEM, "envctr", e->ifname, NULL, e->counter);
        return batch_run(f);
}

int nft_fast_remove(struct nft_fast *f, const struct nft_fast_env *e)
{
        if (!f || !e)
                return -EINVAL;
        batch_begin(f);
        /* The entries keyed by this environment's interface, whatever they point to: the
         * interface is going away, and a "pdk*" interface without an entry is dropped. */
        put_map_elem(f, MSG_DESTROYSETELEM, "envs", e->ifname, NULL, NULL);
        put_map_elem(f, MSG_DESTROYSETELEM, "envctr", e->ifname, NULL, NULL);
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

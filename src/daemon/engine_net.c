/* The engine's networking: each environment's address (lowest free in the subnet, kept for
 * its life), bringing its network up at start or adoption and changing it on a policy patch,
 * links (symmetric: both peers' firewalls are updated), the resolver's view of which address
 * is which environment, and published ports. The kernel side (veth, nftables, tc) is
 * network.c; this file decides what to ask of it. */
#include "daemon/engine_internal.h"
#include "daemon/log.h"
#include "lib/util.h"

#include <arpa/inet.h>

/* The gateway is subnet+1; environments take subnet+2 upwards, lowest free first. The engine
 * keeps a bitmap of the addresses held (addr_used, a bit per address from addr_first), read
 * from the list once at the first allocation and kept by env_append/env_unlink/ensure_addr
 * since: an allocation looks at a word or two (addr_hint), not at every environment. */
static int addr_bit(struct engine *e, struct in_addr a, size_t *ret)
{
        uint32_t h = ntohl(a.s_addr);
        if (!e->addr_first || h < e->addr_first)
                return -ERANGE;
        *ret = h - e->addr_first;
        return 0;
}

static int addr_grow(struct engine *e, size_t bit)
{
        if (bit / 64 < e->addr_words)
                return 0;
        size_t words = e->addr_words ? e->addr_words : 16;
        while (words <= bit / 64)
                words *= 2;
        uint64_t *w = realloc(e->addr_used, words * sizeof(*w));
        if (!w)
                return -ENOMEM;
        memset(w + e->addr_words, 0, (words - e->addr_words) * sizeof(*w));
        e->addr_used = w;
        e->addr_words = words;
        return 0;
}

void addr_mark(struct engine *e, struct in_addr a, bool used)
{
        size_t bit;
        if (addr_bit(e, a, &bit) < 0)
                return; /* not read yet (or not one of ours) */
        if (used) {
                if (addr_grow(e, bit) < 0) {
                        e->addr_first = 0; /* out of memory: read the list again next time */
                        return;
                }
                e->addr_used[bit / 64] |= 1ull << (bit % 64);
        } else if (bit / 64 < e->addr_words) {
                e->addr_used[bit / 64] &= ~(1ull << (bit % 64));
                if (bit / 64 < e->addr_hint)
                        e->addr_hint = bit / 64;
        }
}

static int addr_read(struct engine *e)
{
        free(e->addr_used);
        e->addr_used = NULL;
        e->addr_words = e->addr_hint = 0;
        e->addr_first = ntohl(network_gateway(e->net).s_addr) + 1;
        if (addr_grow(e, e->n_envs) < 0) {
                e->addr_first = 0;
                return -ENOMEM;
        }
        for (struct env *v = e->envs; v && e->addr_first; v = v->next)
                if (v->addr.s_addr)
                        addr_mark(e, v->addr, true);
        if (e->addr_first)
                creating_addrs_mark(e); /* held from their link on (env_addr_set) */
        return e->addr_first ? 0 : -ENOMEM;
}

static int alloc_addr(struct engine *e, struct in_addr *ret)
{
        if (!e->addr_first) {
                int r = addr_read(e);
                if (r < 0)
                        return r;
        }
        size_t w = e->addr_hint;
        while (w < e->addr_words && e->addr_used[w] == UINT64_MAX)
                w++;
        e->addr_hint = w;
        size_t bit = w * 64;
        if (w < e->addr_words)
                bit += (size_t)__builtin_ctzll(~e->addr_used[w]);
        struct in_addr a = {.s_addr = htonl(e->addr_first + (uint32_t)bit)};
        struct in_addr next = {.s_addr = htonl(e->addr_first + (uint32_t)bit + 1)};
        if (bit >= UINT32_MAX - e->addr_first || !network_in_subnet(e->net, a) ||
            !network_in_subnet(e->net, next))
                return -ENOSPC; /* bit+1 outside means bit is the broadcast address */
        *ret = a;
        return 0;
}

static bool policy_links(const struct env *v, const char *name)
{
        for (size_t i = 0; i < v->net.n_links; i++)
                if (strcmp(v->net.links[i], name) == 0)
                        return true;
        return false;
}

/* Are v and o linked? Links are symmetric, and hold only between environments of the same
 * owner: a token cannot reach another token's environment by naming it. */
static bool linked(const struct env *v, const struct env *o)
{
        return (policy_links(v, o->row.name) || policy_links(o, v->row.name)) &&
               strcmp(v->row.owner, o->row.owner) == 0;
}

/* Addresses v may talk to: those it links and those that link it (links are symmetric). */
static size_t link_addrs(struct engine *e, const struct env *v, struct in_addr *out, size_t max)
{
        size_t n = 0;
        if (!e->n_linking && !v->net.n_links)
                return 0; /* nobody links anybody (v may not be listed yet: its own count) */
        /* links hold within one owner: its list, not every environment */
        for (struct env *o = engine_next_owned(e, v->row.owner, NULL); o && n < max;
             o = engine_next_owned(e, v->row.owner, o))
                if (o != v && o->addr.s_addr && linked(v, o))
                        out[n++] = o->addr;
        return n;
}

static int env_netns_fd(const struct env *v)
{
        char path[64];
        if (BUF_PRINTF(path, "/proc/%lld/ns/net", (long long)v->row.pid) < 0)
                return -ENAMETOOLONG;
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        /* The pidfd pins the process: if it is still alive, the pid was not reused. */
        if (sys_pidfd_send_signal(v->pidfd, 0, 0) < 0) {
                close(fd);
                return -ESRCH;
        }
        return fd;
}

int ensure_addr(struct engine *e, struct env *v)
{
        if (v->addr.s_addr)
                return 0;
        int r = alloc_addr(e, &v->addr);
        if (r < 0)
                return r;
        inet_ntop(AF_INET, &v->addr, v->row.ip, sizeof(v->row.ip));
        env_addr_set(e, v);
        return 0;
}

static int port_cmp(const void *a, const void *b)
{
        const struct port_row *x = a, *y = b;
        int c = strcmp(x->env, y->env);
        if (c)
                return c;
        if (x->host_port != y->host_port)
                return x->host_port < y->host_port ? -1 : 1;
        return strcmp(x->proto, y->proto);
}

/* The published ports of v (pointers into e->ports, valid until the next change), in the
 * order the state lists them (host port, protocol). Reads the ports table again only after a
 * change (ports_gen). */
static int env_ports(struct engine *e, const struct env *v, const struct port_row **ret,
                     size_t *ret_n)
{
        if (!e->ports || e->ports_read_gen != e->ports_gen) {
                struct port_row *rows = NULL;
                size_t n = 0;
                uint64_t gen = e->ports_gen;
                int r = state_port_list(e->cfg.state, NULL, &rows, &n);
                if (r < 0)
                        return r;
                if (!rows && !(rows = calloc(1, sizeof(*rows))))
                        return -ENOMEM; /* an empty list is a valid cache too */
                qsort(rows, n, sizeof(*rows), port_cmp);
                free(e->ports);
                e->ports = rows;
                e->n_ports = n;
                e->ports_read_gen = gen;
        }
        /* lower bound of v's name */
        size_t lo = 0, hi = e->n_ports;
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (strcmp(e->ports[mid].env, v->row.name) < 0)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        size_t end = lo;
        while (end < e->n_ports && strcmp(e->ports[end].env, v->row.name) == 0)
                end++;
        *ret = e->ports + lo;
        *ret_n = end - lo;
        return 0;
}

bool env_has_ports(struct engine *e, const struct env *v)
{
        const struct port_row *rows;
        size_t n = 0;
        return env_ports(e, v, &rows, &n) >= 0 && n > 0;
}

/* ensure_addr, saying why it failed. */
static int net_addr(struct engine *e, struct env *v, char *err, size_t errlen)
{
        int r = ensure_addr(e, v);
        if (r < 0)
                snprintf(err, errlen, "no free address in the environments' subnet");
        return r;
}

int env_net_link(struct engine *e, struct env *v, char *err, size_t errlen)
{
        if (!e->net || v->net.mode == NET_NONE || v->pidfd < 0)
                return 0;
        int r = net_addr(e, v, err, errlen);
        if (r < 0)
                return r;
        _cleanup_close_ int ns = env_netns_fd(v);
        if (ns < 0) {
                snprintf(err, errlen, "network namespace: %s", strerror(-ns));
                return ns;
        }
        return network_env_link(e->net, v->row.name, ns, v->addr, &v->net, v->net_set_at_start,
                                err, errlen);
}

int env_net_policy(struct engine *e, struct env *v, char *err, size_t errlen)
{
        if (!e->net || v->net.mode == NET_NONE || v->pidfd < 0)
                return 0;
        struct in_addr links[NETPOLICY_MAX_LINKS * 2];
        size_t nl = link_addrs(e, v, links, ELEMENTSOF(links));
        int r = network_env_policy(e->net, v->row.name, v->addr, &v->net, links, nl, err, errlen);
        if (r < 0)
                return r;
        /* Published ports leave the firewall with the environment's other entries at stop. */
        const struct port_row *ports;
        size_t np = 0;
        if (env_ports(e, v, &ports, &np) >= 0)
                for (size_t i = 0; i < np; i++)
                        network_port_add(e->net, v->row.name, ports[i].proto, ports[i].host_port,
                                         v->addr, ports[i].port);
        return 0;
}

/* adopt: keep a veth that survived a daemon restart instead of cutting connections. */
int env_net_up(struct engine *e, struct env *v, bool adopt, bool flush_learned, char *err,
               size_t errlen)
{
        if (!e->net || v->net.mode == NET_NONE || v->pidfd < 0)
                return 0;
        if (adopt && network_link_present(e->net, v->row.name)) {
                int r = net_addr(e, v, err, errlen);
                if (r < 0)
                        return r;
                struct in_addr links[NETPOLICY_MAX_LINKS * 2];
                size_t nl = link_addrs(e, v, links, ELEMENTSOF(links));
                return network_env_update(e->net, v->row.name, v->addr, &v->net, links, nl,
                                          flush_learned, err, errlen);
        }
        int r = env_net_link(e, v, err, errlen);
        return r < 0 ? r : env_net_policy(e, v, err, errlen);
}

/* Environments linked with v apply their firewall again (their peer's address changed). */
void reapply_linked(struct engine *e, struct env *v)
{
        if (!e->n_linking && !v->net.n_links)
                return; /* nobody links anybody (v may be unlinked already: its own count) */
        for (struct env *o = engine_next_owned(e, v->row.owner, NULL); o;
             o = engine_next_owned(e, v->row.owner, o)) {
                if (o == v || o->pidfd < 0 || o->net.mode == NET_NONE)
                        continue;
                if (!linked(o, v))
                        continue;
                char err[256];
                struct in_addr links[NETPOLICY_MAX_LINKS * 2];
                size_t nl = link_addrs(e, o, links, ELEMENTSOF(links));
                if (network_env_update(e->net, o->row.name, o->addr, &o->net, links, nl, false,
                                       err, sizeof(err)) < 0)
                        log_warn("%s: updating links: %s", o->row.name, err);
        }
}

static const struct netpolicy *env_by_addr(void *ctx, struct in_addr a, char *name, size_t len,
                                           bool *pending)
{
        struct engine *e = ctx;
        struct env *v = engine_find_addr(e, a);
        if (!v) /* a create in progress: not listed until its start is on disk */
                v = creating_by_addr(e, a);
        *pending = v && v->net_pending;
        if (!v || v->pidfd < 0 || *pending)
                return NULL;
        snprintf(name, len, "%s", v->row.name);
        return &v->net;
}

/* Two environments with one interface name would share one link: the second's start deletes
 * the first's (network_env_link). The name is keyed (lib/ifname.h), so only chance makes such
 * a pair (44 bits: about one host in 10^7 with 2,000 environments), or a client that can
 * compute the unkeyed names an earlier daemon's state directory keeps; either way the second
 * create is refused. The message does not name the other environment: it may be another
 * token's. */
int engine_ifname_check(struct engine *e, const char *name, char ifname[16], char *err,
                        size_t errlen)
{
        ifname[0] = 0;
        if (!e->net)
                return 0;
        network_ifname(e->net, name, ifname);
        if (!engine_find_ifname(e, ifname) && !creating_by_ifname(e, ifname))
                return 0;
        snprintf(err, errlen, "the name %s cannot be used on this host: its network interface "
                 "name (%s) is another environment's; choose another name", name, ifname);
        return -EEXIST;
}

void engine_set_network(struct engine *e, struct network *n)
{
        e->net = n;
        if (!n)
                return;
        for (struct env *v = e->envs; v; v = v->next) {
                char ifname[16];
                network_ifname(n, v->row.name, ifname);
                struct env *other = engine_find_ifname(e, ifname);
                if (other)
                        log_warn("%s and %s have one interface name (%s): only one of them can "
                                 "run networked at a time (the other's start is refused)",
                                 other->row.name, v->row.name, ifname);
                env_ifname_set(e, v, ifname);
        }
}

struct network_envs engine_network_envs(struct engine *e)
{
        return (struct network_envs){.by_addr = env_by_addr, .ctx = e};
}

/* dir/resolv.conf (its path in path) naming the gateway's resolver, or none when there is no
 * network. A failed write leaves the environment without one, as a host without DNS. */
int write_resolv_conf(struct engine *e, const char *dir, char *path, size_t len)
{
        char text[64];
        int r = buf_printf(path, len, "%s/resolv.conf", dir);
        if (r < 0)
                return r;
        struct in_addr gw = e->net ? network_gateway(e->net) : (struct in_addr){0};
        snprintf(text, sizeof(text), "nameserver %s\n", e->net ? inet_ntoa(gw) : "127.0.0.1");
        _cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd >= 0)
                (void)!write(fd, text, strlen(text));
        return 0;
}

bool engine_has_network(const struct engine *e)
{
        return e->net != NULL;
}

const struct netpolicy *env_netpolicy(const struct env *v)
{
        return &v->net;
}

int engine_port_add(struct engine *e, struct env *v, const char *proto, uint16_t host_port,
                    uint16_t port, char *err, size_t errlen)
{
        if (!e->net || v->net.mode == NET_NONE) {
                snprintf(err, errlen, "%s has no network (mode none): publish needs open or allow",
                         v->row.name);
                return -ENOEXEC;
        }
        int r = ensure_addr(e, v);
        if (r < 0) {
                snprintf(err, errlen, "no free address");
                return r;
        }
        struct port_row row = {.host_port = host_port, .port = port};
        snprintf(row.proto, sizeof(row.proto), "%s", proto);
        snprintf(row.env, sizeof(row.env), "%s", v->row.name);
        env_save(e, v);
        e->ports_gen++;
        r = state_port_insert(e->cfg.state, &row);
        if (r < 0) {
                if (r == -EEXIST)
                        snprintf(err, errlen, "host port %u/%s is already published", host_port,
                                 proto);
                else
                        snprintf(err, errlen, "recording the port: %s", strerror(-r));
                return r;
        }
        r = network_port_add(e->net, v->row.name, proto, host_port, v->addr, port);
        if (r < 0) {
                state_port_delete(e->cfg.state, proto, host_port);
                snprintf(err, errlen, "firewall: %s", strerror(-r));
                return r;
        }
        engine_idle_watch(e, v); /* idle-paused: its connections wake it from now on */
        return r;
}

int engine_port_remove(struct engine *e, struct env *v, const char *proto, uint16_t host_port)
{
        struct port_row *rows = NULL;
        size_t n = 0;
        int r = state_port_list(e->cfg.state, v->row.name, &rows, &n);
        if (r < 0)
                return r;
        bool found = false;
        for (size_t i = 0; i < n; i++)
                found |= rows[i].host_port == host_port && !strcmp(rows[i].proto, proto);
        free(rows);
        if (!found)
                return -ENOENT;
        if (e->net)
                network_port_remove(e->net, proto, host_port);
        e->ports_gen++;
        return state_port_delete(e->cfg.state, proto, host_port);
}

json_t *engine_ports_json(struct engine *e, struct env *v)
{
        json_t *arr = json_array();
        const struct port_row *rows;
        size_t n = 0;
        if (env_ports(e, v, &rows, &n) < 0)
                return arr;
        for (size_t i = 0; i < n; i++)
                json_array_append_new(arr, json_pack("{s:s,s:i,s:i}", "proto", rows[i].proto,
                                                     "host_port", rows[i].host_port, "port",
                                                     rows[i].port));
        return arr;
}

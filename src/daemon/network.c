/* The host side of environments' networking (see network.h): each environment's routed veth,
 * its firewall entries and bandwidth, published ports (remembered so that a stop removes exactly
 * its own) and the DNS resolver. The engine decides what to ask (engine_net.c); this file
 * carries it out through lib/netlink, lib/nft and lib/tc. */
#include "daemon/network.h"
#include "daemon/dns.h"
#include "daemon/log.h"
#include "lib/ifname.h"
#include "lib/netlink.h"
#include "lib/nft.h"
#include "lib/paddock.h"
#include "lib/util.h"

#include <arpa/inet.h>

struct network {
        struct network_config cfg;
        struct network_envs envs;
        struct in_addr gateway;
        struct ifnamer names; /* the environments' host-side interface names */
        struct nft *nft;
        struct dns_resolver *dns;
        /* Published ports added through this daemon, so that taking an environment down
         * deletes exactly those without listing the firewall's maps. */
        struct known_port {
                char env[NAME_BUF_SIZE];
                char proto[4];
                struct in_addr addr;
                uint16_t host_port, port;
        } *ports;
        size_t n_ports;
        bool ports_untracked; /* one could not be remembered: always list the maps */
        /* Every environment's denied counter from one netlink dump, for listings: reading
         * them one by one would cost a round trip each; kept DENIED_CACHE_MS. */
        struct nft_denied *denied;
        size_t n_denied;
        uint64_t denied_at_ms; /* 0: none yet */
        /* /proc/sys/net/ipv4/conf and ipv6/conf of the daemon's namespace, opened once (see
         * route_localnet) */
        int conf_fd, conf6_fd;
};

#define DENIED_CACHE_MS 1000

void network_ifname(const struct network *n, const char *env, char out[16])
{
        ifnamer_name(&n->names, env, out);
}

struct in_addr network_gateway(const struct network *n)
{
        return n->gateway;
}

bool network_in_subnet(const struct network *n, struct in_addr a)
{
        uint32_t mask = n->cfg.prefix ? ~0u << (32 - n->cfg.prefix) : 0;
        return (ntohl(a.s_addr) & mask) == ntohl(n->cfg.subnet.s_addr);
}

bool network_addr6(const struct network *n, struct in_addr a, struct in6_addr *ret)
{
        if (!n->cfg.ipv6)
                return false;
        uint32_t mask = n->cfg.prefix ? ~0u << (32 - n->cfg.prefix) : 0;
        uint32_t host = htonl(ntohl(a.s_addr) & ~mask);
        struct in6_addr r = n->cfg.subnet6;
        /* The subnet's prefix ends at or before bit 96 + v4 prefix (checked at start): the host
         * part fits in the last 32 bits without touching it. */
        uint32_t last;
        memcpy(&last, &r.s6_addr[12], 4);
        last |= host;
        memcpy(&r.s6_addr[12], &last, 4);
        *ret = r;
        return true;
}

/* DNS policy: open environments get everything forwarded; allow environments only their
 * names, with every answer added to their firewall set before the reply leaves. */
static enum dns_verdict dns_decide(void *ctx, struct in_addr src, const char *qname,
                                   uint16_t qtype, char *env, size_t env_len, uint16_t *port)
{
        struct network *n = ctx;
        bool pending = false;
        const struct netpolicy *p = n->envs.by_addr(n->envs.ctx, src, env, env_len, &pending);
        if (pending)
                return DNS_IGNORE;
        if (!p || p->mode == NET_NONE)
                return DNS_REFUSE;
        if (p->mode == NET_OPEN)
                return DNS_FORWARD;
        return netpolicy_allows_name(p, qname, port) ? DNS_FORWARD_LEARN : DNS_NXDOMAIN;
}

static void dns_learned(void *ctx, const char *env, const struct dns_a *rec, uint16_t port,
                        uint32_t ttl)
{
        struct network *n = ctx;
        ttl = ttl < 5 ? 5 : ttl;
        int r;
        if (rec->family == AF_INET6) {
                if (!n->cfg.ipv6)
                        return; /* no IPv6 here: nothing to open */
                r = nft_env_allow_addr6(n->nft, env, &rec->addr6, port, ttl);
        } else
                r = nft_env_allow_addr(n->nft, env, rec->addr, port, ttl);
        if (r < 0)
                log_warn("%s: allowing resolved address: %s", env, strerror(-r));
}

static const struct dns_policy dns_policy = {.decide = dns_decide, .learned = dns_learned};

int network_new(const struct network_config *c, const struct network_envs *envs,
                struct network **ret, char *err, size_t errlen)
{
        struct network *n = calloc(1, sizeof(*n));
        if (!n)
                return -ENOMEM;
        n->cfg = *c;
        n->envs = *envs;
        n->conf_fd = open("/proc/sys/net/ipv4/conf", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        n->conf6_fd = c->ipv6 ? open("/proc/sys/net/ipv6/conf", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
                              : -EBADF;
        enum ifnamer_source names_from;
        int r = ifnamer_open(c->root, &n->names, &names_from);
        if (r < 0) {
                if (r == -EBADMSG)
                        snprintf(err, errlen, "interface names: %s/%s is not a file of a %d-byte "
                                 "key", c->root, IFNAME_KEY_FILE, IFNAME_KEY_LEN);
                else if (r == -EPERM)
                        snprintf(err, errlen, "interface names: %s/%s must be root's and mode "
                                 "0600", c->root, IFNAME_KEY_FILE);
                else
                        snprintf(err, errlen, "interface names: %s/%s: %s", c->root,
                                 IFNAME_KEY_FILE, strerror(-r));
                closep(&n->conf_fd);
                closep(&n->conf6_fd);
                free(n);
                return r;
        }
        if (names_from == IFNAMER_KEY_MADE)
                log_info("made the key for interface names (%s/%s)", c->root, IFNAME_KEY_FILE);
        else if (names_from == IFNAMER_UNKEYED_KEPT)
                log_warn("interface names stay unkeyed (an earlier daemon's, which a client can "
                         "compute) while its environments' links are up: the first start without "
                         "any makes the key (docs/network.md)");
        n->gateway.s_addr = htonl(ntohl(c->subnet.s_addr) + 1);
        r = nft_open(c->table, c->subnet, c->prefix, n->gateway, c->ipv6 ? &c->subnet6 : NULL,
                         c->prefix6, &n->nft);
        if (r < 0) {
                snprintf(err, errlen, "nftables table %s: %s", c->table, strerror(-r));
                closep(&n->conf_fd);
                closep(&n->conf6_fd);
                free(n);
                return r;
        }
        r = dns_resolver_start(c->loop, n->gateway, 53, c->resolv_conf, &dns_policy, n, &n->dns);
        if (r < 0) {
                snprintf(err, errlen, "DNS resolver on %s:53: %s", inet_ntoa(n->gateway),
                         strerror(-r));
                nft_close(n->nft);
                closep(&n->conf_fd);
                closep(&n->conf6_fd);
                free(n);
                return r;
        }
        *ret = n;
        return 0;
}

void network_free(struct network *n)
{
        if (!n)
                return;
        dns_resolver_stop(n->dns);
        nft_close(n->nft); /* the table stays: running environments keep their policy */
        closep(&n->conf_fd);
        closep(&n->conf6_fd);
        free(n->ports);
        free(n->denied);
        free(n);
}

/* Published ports answer on the host's 127.0.0.1 too (nft.c's output and postrouting rules):
 * a connection from 127.0.0.1 DNATed to an environment leaves through its veth, which the
 * kernel allows only with route_localnet on that veth. Set on each environment's link only
 * (never conf/all: that would accept 127.0.0.0/8 on every interface). What it opens, that the
 * veth accepts packets to or from 127.0.0.0/8, is closed by the firewall: the input chain drops
 * every new packet from a "pdk*" link except DNS to the resolver, and the forward policy drops
 * any source but the environment's own address (docs/network.md). */
/* Relative to conf_fd: every network namespace has its own "net", "ipv4" and "conf" dentries
 * under the one /proc/sys, same name and parent, so looking them up by path compares against
 * all of them (proc_sys_compare), a cost that grew with the number of environments (~0.6 ms at
 * 300 networked ones). Below conf/ the names are this namespace's own. */
static int route_localnet(struct network *n, const char *ifname)
{
        char path[80];
        if (n->conf_fd >= 0) {
                if (BUF_PRINTF(path, "%s/route_localnet", ifname) < 0)
                        return -ENAMETOOLONG;
                return write_file_at(n->conf_fd, path, "1");
        }
        if (BUF_PRINTF(path, "/proc/sys/net/ipv4/conf/%s/route_localnet", ifname) < 0)
                return -ENAMETOOLONG;
        return write_file_at(AT_FDCWD, path, "1");
}

static int apply_policy(struct network *n, const char *env, struct in_addr addr,
                        const struct netpolicy *p, const struct in_addr *links, size_t n_links,
                        bool flush_learned, char *err, size_t errlen)
{
        char ifname[16];
        network_ifname(n, env, ifname);
        struct in6_addr links6[NETPOLICY_MAX_LINKS * 2];
        size_t n_links6 = 0;
        for (size_t i = 0; i < n_links && n_links6 < ELEMENTSOF(links6); i++)
                if (network_addr6(n, links[i], &links6[n_links6]))
                        n_links6++;
        struct nft_cidr_rule cidrs[NETPOLICY_MAX_RULES];
        struct nft_env e = {.name = env,
                            .host_ifname = ifname,
                            .addr = addr,
                            .mode = p->mode,
                            .cidrs = cidrs,
                            .n_cidrs = netpolicy_cidrs(p, cidrs, NETPOLICY_MAX_RULES),
                            .links = links,
                            .n_links = n_links,
                            .links6 = links6,
                            .n_links6 = n_links6,
                            .flush_learned = flush_learned};
        network_addr6(n, addr, &e.addr6);
        int r = nft_env_apply(n->nft, &e);
        if (r < 0) {
                snprintf(err, errlen, "firewall: %s", strerror(-r));
                return r;
        }
        if (p->mode == NET_NONE)
                return 0;
        r = route_localnet(n, ifname);
        if (r < 0)
                log_warn("%s: route_localnet on %s: %s (published ports will not answer on "
                         "127.0.0.1)", env, ifname, strerror(-r));
        r = tc_set_bandwidth(ifname, p->egress_bps, p->ingress_bps);
        if (r < 0)
                snprintf(err, errlen, "bandwidth: %s", strerror(-r));
        return r;
}

bool network_has_ipv6(const struct network *n)
{
        return n->cfg.ipv6;
}

int network_env_link(struct network *n, const char *env, int netns_fd, struct in_addr addr,
                     const struct netpolicy *p, bool ipv6_set, char *err, size_t errlen)
{
        if (p->mode == NET_NONE)
                return 0;
        char ifname[16];
        network_ifname(n, env, ifname);
        if (netlink_link_exists(ifname))
                netlink_link_delete(ifname);
        /* Whatever the firewall still holds for the name (an entry that outlived its removal)
         * must not apply to the new link before its own policy does: until then it is dropped. */
        int r = nft_link_forget(n->nft, ifname);
        if (r < 0) {
                snprintf(err, errlen, "firewall: %s", strerror(-r));
                return r;
        }
        struct veth_config vc = {.host_ifname = ifname,
                                 .env_ifname = "eth0",
                                 .env_netns_fd = netns_fd,
                                 .gateway = n->gateway,
                                 .addr = addr,
                                 .host_conf6_fd = n->conf6_fd > 0 ? n->conf6_fd : 0,
                                 .env_ipv6_set = ipv6_set};
        vc.ipv6 = network_addr6(n, addr, &vc.addr6);
        r = netlink_veth_create(&vc);
        if (r < 0)
                snprintf(err, errlen, "network link: %s", strerror(-r));
        return r;
}

int network_env_policy(struct network *n, const char *env, struct in_addr addr,
                       const struct netpolicy *p, const struct in_addr *links, size_t n_links,
                       char *err, size_t errlen)
{
        if (p->mode == NET_NONE)
                return 0;
        int r = apply_policy(n, env, addr, p, links, n_links, true, err, errlen);
        if (r < 0)
                network_env_down(n, env);
        return r;
}

int network_env_update(struct network *n, const char *env, struct in_addr addr,
                       const struct netpolicy *p, const struct in_addr *links, size_t n_links,
                       bool flush_learned, char *err, size_t errlen)
{
        return apply_policy(n, env, addr, p, links, n_links, flush_learned, err, errlen);
}

static void env_firewall_down(struct network *n, const char *env, const char *ifname);

void network_env_down(struct network *n, const char *env)
{
        char ifname[16];
        network_ifname(n, env, ifname);
        netlink_link_delete(ifname); /* its ifb too */
        env_firewall_down(n, env, ifname);
}

void network_env_gone(struct network *n, const char *env, struct in_addr addr)
{
        char ifname[16], ifb[20];
        network_ifname(n, env, ifname);
        struct in6_addr a6;
        bool v6 = network_addr6(n, addr, &a6);
        if (addr.s_addr)
                (void)netlink_env_routes_delete(ifname, addr, v6 ? &a6 : NULL);
        /* The ifb lives in this namespace, not the environment's: it does not go by itself. */
        snprintf(ifb, sizeof(ifb), "%si", ifname);
        if (netlink_link_exists(ifb))
                netlink_link_delete(ifb);
        env_firewall_down(n, env, ifname);
}

static void env_firewall_down(struct network *n, const char *env, const char *ifname)
{
        struct nft_port ports[64];
        size_t np = 0;
        bool all_known = !n->ports_untracked;
        for (size_t i = 0; i < n->n_ports; i++) {
                const struct known_port *k = &n->ports[i];
                if (strcmp(k->env, env) != 0)
                        continue;
                if (np == ELEMENTSOF(ports)) {
                        all_known = false; /* too many to pass: let nft find them */
                        break;
                }
                ports[np++] = (struct nft_port){
                    .proto = k->proto, .host_port = k->host_port, .addr = k->addr, .port = k->port};
        }
        int r = all_known ? nft_env_remove_known(n->nft, env, ifname, ports, np)
                          : nft_env_remove(n->nft, env);
        if (r < 0 && r != -ENOENT)
                log_warn("%s: removing firewall entries: %s", env, strerror(-r));
        /* The published ports are gone with the firewall entries; the records (state) stay. */
        size_t o = 0;
        for (size_t i = 0; i < n->n_ports; i++)
                if (strcmp(n->ports[i].env, env) != 0)
                        n->ports[o++] = n->ports[i];
        n->n_ports = o;
}

static void known_port_forget(struct network *n, const char *proto, uint16_t host_port)
{
        for (size_t i = 0; i < n->n_ports; i++)
                if (n->ports[i].host_port == host_port && strcmp(n->ports[i].proto, proto) == 0) {
                        n->ports[i] = n->ports[--n->n_ports];
                        return;
                }
}

uint64_t network_env_denied(struct network *n, const char *env, bool cached)
{
        uint64_t v = 0;
        if (!cached) {
                nft_env_denied(n->nft, env, &v);
                return v;
        }
        uint64_t now = now_ms();
        if (!n->denied_at_ms || now - n->denied_at_ms >= DENIED_CACHE_MS) {
                struct nft_denied *all = NULL;
                size_t cnt = 0;
                if (nft_denied_all(n->nft, &all, &cnt) < 0)
                        return 0;
                free(n->denied);
                n->denied = all;
                n->n_denied = cnt;
                n->denied_at_ms = now;
        }
        const struct nft_denied *d = nft_denied_find(n->denied, n->n_denied, env);
        return d ? d->packets : 0;
}

int network_port_add(struct network *n, const char *env, const char *proto, uint16_t host_port,
                     struct in_addr addr, uint16_t port)
{
        int r = nft_port_add(n->nft, env, proto, host_port, addr, port);
        if (r < 0)
                return r;
        /* Remembering is an optimisation: without it network_env_down lists the maps. */
        known_port_forget(n, proto, host_port);
        struct known_port *np = realloc(n->ports, (n->n_ports + 1) * sizeof(*np));
        if (!np) {
                n->ports_untracked = true;
                return 0;
        }
        n->ports = np;
        struct known_port *k = &n->ports[n->n_ports++];
        *k = (struct known_port){.addr = addr, .host_port = host_port, .port = port};
        snprintf(k->env, sizeof(k->env), "%s", env);
        snprintf(k->proto, sizeof(k->proto), "%s", proto);
        return 0;
}

int network_port_remove(struct network *n, const char *proto, uint16_t host_port)
{
        known_port_forget(n, proto, host_port);
        return nft_port_remove(n->nft, proto, host_port);
}

static bool sorted_has(char *const *sorted, size_t n, const char *s)
{
        return n && bsearch(&s, sorted, n, sizeof(char *), str_ptr_cmp) != NULL;
}

/* Sorted copies of the kept names and of their interface names, so that each environment and link
 * found is looked up in O(log n): startup with thousands of environments stays linear. */
void network_remove_orphans(struct network *n, const char *const *keep, size_t n_keep)
{
        _cleanup_free_ char **names_kept = calloc(n_keep + 1, sizeof(char *));
        _cleanup_free_ char **ifs_kept = calloc(n_keep + 1, sizeof(char *));
        _cleanup_free_ char (*ifbuf)[16] = calloc(n_keep + 1, 16);
        if (!names_kept || !ifs_kept || !ifbuf)
                return;
        for (size_t k = 0; k < n_keep; k++) {
                names_kept[k] = (char *)keep[k];
                network_ifname(n, keep[k], ifbuf[k]);
                ifs_kept[k] = ifbuf[k];
        }
        qsort(names_kept, n_keep, sizeof(char *), str_ptr_cmp);
        qsort(ifs_kept, n_keep, sizeof(char *), str_ptr_cmp);

        char **names = NULL;
        size_t count = 0;
        int r = nft_env_list(n->nft, &names, &count);
        if (r < 0) {
                log_warn("listing the firewall's environments: %s (orphaned entries stay)",
                         strerror(-r));
        } else {
                for (size_t i = 0; i < count; i++) {
                        if (!sorted_has(names_kept, n_keep, names[i])) {
                                log_info("removing orphaned firewall entries of %s", names[i]);
                                nft_env_remove(n->nft, names[i]);
                        }
                        free(names[i]);
                }
                free(names);
        }
        if (netlink_links_with_prefix("pdk", &names, &count) < 0)
                return;
        for (size_t i = 0; i < count; i++) {
                /* An environment's links: its veth and its ifb (the veth's name and "i"). Which
                 * daemon made one cannot be told: a link of our shape that no environment kept
                 * claims is taken for ours. */
                char base[16];
                if (ifname_base(names[i], base) && !sorted_has(ifs_kept, n_keep, base)) {
                        log_info("removing orphaned interface %s", names[i]);
                        netlink_link_delete(names[i]);
                }
                free(names[i]);
        }
        free(names);
}

void network_batch_begin(struct network *n)
{
        (void)nft_batch_begin(n->nft);
}

void network_batch_end(struct network *n)
{
        int r = nft_batch_end(n->nft);
        if (r < 0)
                log_warn("re-applying firewall rules: %s", strerror(-r));
}

bool network_link_present(struct network *n, const char *env)
{
        char ifname[16];
        network_ifname(n, env, ifname);
        return netlink_link_exists(ifname);
}

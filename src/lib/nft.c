/* Paddock's nftables table, driven through libnftables (never the nft binary).
 *
 * Every change is ruleset text generated here from validated input only (names checked against
 * fixed alphabets, addresses printed by inet_ntop, numbers by printf) and handed to ONE
 * nft_run_cmd_from_buffer() call: libnftables sends all its commands as one netlink batch, which
 * the kernel applies as one transaction — all of it or none of it. Reads use JSON output, parsed
 * with jansson. Only "table inet <table>" is ever named; there is no "flush ruleset" here.
 *
 * Layout (names as created; <e> is the encoded environment name, see env_encode()):
 *
 *   set forbidden4        ipv4_addr, interval: RFC1918, CGNAT, link-local (metadata
 *                         169.254.169.254), 100.100.100.200, loopback, 0/8, multicast, class E
 *                         and the environments' subnet. Filled by nft_open().
 *   set forbidden6        ipv6_addr, interval (only with a v6 subnet): see forbidden6[] below,
 *                         and the environments' v6 subnet.
 *   sets tcp_udp, dns_ports  constants ({tcp, udp}, {53, 853}) the policy chains look up.
 *   map envs              iifname -> verdict "jump env_<e>": the traffic of each environment
 *                         with a chain of its own (allow policy, links) dispatched in one lookup.
 *   set open_envs         iifname: the links of open environments without links, which share
 *                         chain open_env.
 *   map envctr            iifname -> counter "denied_<e>": drops in the shared chains (input,
 *                         open_env) are counted per environment too.
 *   map pub_tcp, pub_udp  host port -> address . port (DNAT targets), element comment
 *                         "env:<name>" so an environment's ports go away with it.
 *   chain prerouting      nat, dstnat: published ports, for addresses of this host only.
 *   chain output          nat, -100: the same for connections made by the host itself, to any
 *                         of its addresses, 127.0.0.1 included (a reverse proxy on the host).
 *                         A loopback-sourced packet may leave through a veth only with
 *                         route_localnet on that veth (network.c sets it on each "pdk*" link
 *                         only, never on "all"); postrouting then rewrites its source.
 *   chain postrouting     nat, srcnat: masquerade the subnet (and v6 subnet: NAT66) out of every
 *                         non-environment link; masquerade 127.0.0.0/8 into a "pdk*" link (the
 *                         environment sees the gateway address, never a loopback one).
 *   chain input           filter, 0, policy accept (a shared host): from "pdk*" IPv4 whose source
 *                         does not route back out of that link (spoofed) dropped first (chain
 *                         spoofed: counted as the link's environment's denied traffic); then
 *                         only DNS to the resolver, IPv6 neighbour discovery and replies to the
 *                         host's own connections; MLD/router solicitations dropped uncounted;
 *                         rest dropped.
 *   chain forward         filter, 0, policy accept: from "pdk*" -> vmap @envs, then goto open_env
 *                         for a link in @open_envs (a veth in neither is dropped); to "pdk*"
 *                         only established/related or DNATed (and no IPv6 at all without a v6
 *                         subnet).
 *   chain open_env        every open environment without links, see open_env_chain(); chain
 *                         denied counts (envctr) and drops for it.
 *   chain env_<e>         per environment with an allow policy or links (comment "env:<name>"),
 *                         see env_chain_rules().
 *   sets allow4_<e>       (allow policy only) ipv4_addr, timeout: learned addresses, any port.
 *        allowp4_<e>      ipv4_addr . inet_service, timeout: learned address + port pairs.
 *        allow6_<e>, allowp6_<e>  the same for IPv6 (only with a v6 subnet).
 *   counter denied_<e>    every drop of this environment's traffic, v4 and v6; every
 *                         environment has one (nft_env_list finds them by it).
 *
 * Fast path: an open environment without links (the common create and destroy) is a counter and
 * two elements, no rule and no jump, so its commit does not make the kernel validate the table
 * (the libnftables way below still adds and deletes a jump to clear an earlier policy's: a
 * validation on kernels before 6.3, in batches at daemon start and on fallbacks); it goes
 * through nft_fast.c as raw nf_tables netlink, one batch, without libnftables and so
 * without its cache refresh. When the kernel refuses that batch (another link still jumps to the
 * chain of an earlier policy, or refers to the counter), the same change is made here the
 * libnftables way below.
 *
 * Costs: one netlink batch per call, and no listing on the common paths: nft_env_apply re-adds the
 * environment's map entries (a no-op when they are there) and nft_env_remove_known deletes exactly
 * what the caller says it added (adding each element first, so deleting what is gone cannot fail).
 * Either lists the maps (envs, envctr, pub_*) only when the kernel refuses that picture (an entry
 * pointing elsewhere: EBUSY); nft_env_remove (orphans) always lists them, and nft_env_list lists
 * chain headers and dumps the counters only. What remains per call is libnftables' own cache
 * refresh of the table's chains, sets and counters, which 1.0.6 redoes after every change (~0.5 ms
 * with a few environments, ~9 ms with 1,000 when each had 1 chain, 2 or 4 sets and 1 counter; an
 * open environment now has no sets and no chain, and there are no anonymous sets: the constants are
 * the shared sets tcp_udp and dns_ports), and the kernel's validation of the whole table on a
 * commit that adds a rule or a jump (nft_chain_validate, every chain reachable from the base
 * chains: one per environment with an allow policy or links). Re-applying many environments at once
 * goes through nft_batch_begin/end (one refresh per BATCH_MAX). Counters are read over netlink
 * without libnftables (nft_env_denied: one get; nft_denied_all: one dump of all), never by a
 * "list", which would fetch every rule of the table.
 * A struct nft is not thread-safe: calls on it must be serialized, and one
 * process should own a table (listing-then-changing assumes nobody else edits it meanwhile).
 *
 * Why one file of ~1,600 lines: it is one thing, the text of one table. The base ruleset, the
 * per-environment chains, sets and map entries and the published ports refer to each other by
 * name (the maps the base chains look up are filled per environment, the env_<e> chains jump
 * into sets made next to them), and every safety argument above ("only validated names reach
 * the text", "all or nothing", "what remove deletes is what apply added") is checked by reading
 * the generators side by side. Split, each half would need the other's names and layout. */
#include "lib/jsonutil.h"
#include "lib/nft.h"
#include "lib/nft_fast.h"
#include "lib/paddock.h"
#include "lib/util.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <dirent.h>
#include <endian.h>
#include <jansson.h>
#include <libmnl/libmnl.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netlink.h>
#include <nftables/libnftables.h>
#include <stdarg.h>
#include <sys/socket.h>

#define ENV_NAME_MAX NAME_LEN_MAX
#define ENV_ENC_MAX  (2 * ENV_NAME_MAX) /* every character may take two */
#define OBJ_NAME_MAX (8 + ENV_ENC_MAX)  /* "allowp4_" + encoded; kernel limit is 255 */
#define TABLE_MAX    32
#define IFNAME_MAX   15
#define TTL_MAX_S    86400u /* learned addresses live one day at most */
#define VETH_PREFIX  "pdk"
#define NFT_RECV_SIZE 32768 /* the kernel sizes dump skbs by the reader's buffer, up to 32 KiB */

struct nft {
        struct nft_ctx *ctx;
        char table[TABLE_MAX + 1];
        uint32_t subnet; /* host order, masked */
        uint32_t mask;   /* host order */
        bool ipv6;       /* environments have IPv6: subnet6/prefix6 are set */
        struct in6_addr subnet6;
        uint8_t prefix6;
        char *error;     /* text of the last libnftables error, or NULL */
        struct mnl_socket *nl; /* netfilter netlink, for reading counters (lazily opened) */
        uint32_t nl_seq;
        bool batching;          /* nft_batch_begin: queue applies and port adds */
        struct batch_item *batch;
        size_t n_batch;
        int batch_error;        /* of a queue run early (see batch_settle), for nft_batch_end */
        struct nft_fast *fast;  /* open environments without libnftables; NULL: not here */
        unsigned long n_fast;   /* changes made through it */
};

/* One queued transaction (see nft_batch_begin): its commands, self-contained, and for an
 * environment's apply its name and interface (to redo it the listing way if it is refused). */
struct batch_item {
        char *text;
        char name[ENV_NAME_MAX + 1]; /* "" for a published port */
        char ifname[IFNAME_MAX + 1];
};

/* Transactions per kernel batch when flushing a queue: one libnftables cache refresh serves
 * them all, and a refused batch is redone one by one, so keep it bounded. */
#define BATCH_MAX 128

/* Names of one environment's objects. */
struct env_names {
        char name[ENV_NAME_MAX + 1];
        char chain[OBJ_NAME_MAX + 1];
        char allow4[OBJ_NAME_MAX + 1];
        char allowp4[OBJ_NAME_MAX + 1];
        char allow6[OBJ_NAME_MAX + 1];
        char allowp6[OBJ_NAME_MAX + 1];
        char counter[OBJ_NAME_MAX + 1];
};

/* ---------------------------------------------------------------- validation and names */

static bool env_name_char(char c)
{
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               c == '_' || c == '.' || c == '-';
}

static bool table_char(char c)
{
        return isalnum((unsigned char)c) || c == '_';
}

/* s is between min and max bytes long and every byte passes ok. */
static bool name_shape_ok(const char *s, size_t min, size_t max, bool (*ok)(char))
{
        if (!s)
                return false;
        size_t len = strnlen(s, max + 1);
        if (len < min || len > max)
                return false;
        for (size_t i = 0; i < len; i++)
                if (!ok(s[i]))
                        return false;
        return true;
}

static bool env_name_valid(const char *s)
{
        return name_shape_ok(s, 1, ENV_NAME_MAX, env_name_char);
}

/* Host side veth: the rules match "pdk*", so anything else would escape them. */
static bool ifname_valid(const char *s)
{
        return name_shape_ok(s, strlen(VETH_PREFIX) + 1, IFNAME_MAX, env_name_char) &&
               strncmp(s, VETH_PREFIX, 3) == 0;
}

static bool table_name_valid(const char *s)
{
        return name_shape_ok(s, 1, TABLE_MAX, table_char) && isalpha((unsigned char)s[0]);
}

/* Environment names may hold '.' and '-', which we keep out of nft identifiers. Rather than
 * mapping them to '_' plus a hash (which two crafted names could still collide on), escape
 * injectively: '_' -> "__", '.' -> "_d", '-' -> "_h". Distinct names give distinct chains,
 * and the real name can be read back from the chain name alone (nft 1.0.6's JSON output omits
 * chain comments, so the "env:<name>" comment is for people reading `nft list`). */
static int env_encode(const char *name, char ret[static ENV_ENC_MAX + 1])
{
        if (!env_name_valid(name))
                return -EINVAL;
        size_t o = 0;
        for (const char *p = name; *p; p++) {
                if (*p == '_' || *p == '.' || *p == '-') {
                        ret[o++] = '_';
                        ret[o++] = *p == '_' ? '_' : *p == '.' ? 'd' : 'h';
                } else
                        ret[o++] = *p;
        }
        ret[o] = 0;
        return 0;
}

static bool env_decode(const char *enc, char ret[static ENV_NAME_MAX + 1])
{
        size_t o = 0;
        for (const char *p = enc; *p; p++) {
                char c = *p;
                if (c == '_') {
                        p++;
                        c = *p == '_' ? '_' : *p == 'd' ? '.' : *p == 'h' ? '-' : 0;
                        if (!c)
                                return false;
                } else if (!isalnum((unsigned char)c))
                        return false;
                if (o >= ENV_NAME_MAX)
                        return false;
                ret[o++] = c;
        }
        ret[o] = 0;
        return o > 0;
}

static int env_names(const char *name, struct env_names *ret)
{
        char enc[ENV_ENC_MAX + 1];
        int r = env_encode(name, enc);
        if (r < 0)
                return r;
        snprintf(ret->name, sizeof(ret->name), "%s", name);
        snprintf(ret->chain, sizeof(ret->chain), "env_%s", enc);
        snprintf(ret->allow4, sizeof(ret->allow4), "allow4_%s", enc);
        snprintf(ret->allowp4, sizeof(ret->allowp4), "allowp4_%s", enc);
        snprintf(ret->allow6, sizeof(ret->allow6), "allow6_%s", enc);
        snprintf(ret->allowp6, sizeof(ret->allowp6), "allowp6_%s", enc);
        snprintf(ret->counter, sizeof(ret->counter), "denied_%s", enc);
        return 0;
}

static const char *ip4(struct in_addr a, char buf[static INET_ADDRSTRLEN])
{
        return inet_ntop(AF_INET, &a, buf, INET_ADDRSTRLEN);
}

static const char *ip6(const struct in6_addr *a, char buf[static INET6_ADDRSTRLEN])
{
        return inet_ntop(AF_INET6, a, buf, INET6_ADDRSTRLEN);
}

/* a with every bit after the first prefix bits cleared. */
static struct in6_addr mask6(const struct in6_addr *a, uint8_t prefix)
{
        struct in6_addr r = *a;
        for (unsigned i = 0; i < 16; i++) {
                unsigned bits = prefix > i * 8 ? prefix - i * 8 : 0;
                r.s6_addr[i] &= bits >= 8 ? 0xff : (uint8_t)(0xff00 >> bits);
        }
        return r;
}

static bool in_subnet6(const struct nft *n, const struct in6_addr *a)
{
        struct in6_addr m = mask6(a, n->prefix6);
        return memcmp(&m, &n->subnet6, sizeof(m)) == 0;
}

static uint32_t prefix_mask(uint8_t prefix)
{
        return prefix == 0 ? 0 : 0xffffffffu << (32 - prefix);
}

static bool in_subnet(const struct nft *n, struct in_addr a)
{
        return (ntohl(a.s_addr) & n->mask) == n->subnet;
}

/* ---------------------------------------------------------------- text buffer */

struct sbuf {
        char *s;
        size_t len, cap;
        bool oom;
};

static void sbuf_done(struct sbuf *b)
{
        free(b->s);
}

static void sb(struct sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb(struct sbuf *b, const char *fmt, ...)
{
        if (b->oom)
                return;
        for (;;) {
                va_list ap;
                va_start(ap, fmt);
                int k = vsnprintf(b->s ? b->s + b->len : NULL, b->s ? b->cap - b->len : 0, fmt, ap);
                va_end(ap);
                if (k < 0) {
                        b->oom = true;
                        return;
                }
                if (b->s && b->len + (size_t)k < b->cap) {
                        b->len += (size_t)k;
                        return;
                }
                size_t cap = b->cap ? b->cap : 1024;
                while (cap <= b->len + (size_t)k)
                        cap *= 2;
                char *s = realloc(b->s, cap);
                if (!s) {
                        b->oom = true;
                        return;
                }
                b->s = s;
                b->cap = cap;
        }
}

/* ---------------------------------------------------------------- running commands */

static void set_error(struct nft *n, const char *text)
{
        free(n->error);
        n->error = text && *text ? strdup(text) : NULL;
}

/* libnftables reports kernel errors as "Could not process rule: <strerror>" and cache lookups
 * as "Error: <strerror>"; give the caller the errno where it is one it can act on (-ENOENT:
 * no such environment/port, -EEXIST: port taken, -EPERM: not privileged). Anything else: the
 * text did not parse (-EINVAL, a bug here) or the kernel refused it for another reason. */
static int errno_from_text(const char *err)
{
        static const int known[] = {ENOENT,     EEXIST,       EBUSY,  EPERM,  ENOMEM,
                                    ENOBUFS,    ENOSPC,       E2BIG,  ERANGE, EMSGSIZE,
                                    EOPNOTSUPP, EAFNOSUPPORT, EACCES, EINVAL};
        if (!err || !*err)
                return -EIO;
        for (size_t i = 0; i < ELEMENTSOF(known); i++)
                if (strstr(err, strerror(known[i])))
                        return -known[i];
        if (strstr(err, "Could not process rule"))
                return -EIO;
        return -EINVAL;
}

/* Run one buffer of commands (one kernel transaction). With ret_out, JSON output is asked for
 * and returned (malloc'd). */
static int run(struct nft *n, const char *cmds, char **ret_out)
{
        nft_ctx_output_set_flags(n->ctx, ret_out ? NFT_CTX_OUTPUT_JSON : 0);
        int rc = nft_run_cmd_from_buffer(n->ctx, cmds);
        /* Fetching a buffer also rewinds it: read both every time, so no stale text lingers. */
        const char *out = nft_ctx_get_output_buffer(n->ctx);
        const char *err = nft_ctx_get_error_buffer(n->ctx);
        if (rc != 0) {
                set_error(n, err);
                return errno_from_text(err);
        }
        set_error(n, NULL);
        if (ret_out) {
                char *s = strdup(out ? out : "");
                if (!s)
                        return -ENOMEM;
                *ret_out = s;
        }
        return 0;
}

static int run_sbuf(struct nft *n, struct sbuf *b)
{
        if (b->oom)
                return -ENOMEM;
        if (!b->s)
                return 0;
        return run(n, b->s, NULL);
}

/* Run a list command; return its "nftables" array (owned by *ret_root). */
static int list_json(struct nft *n, const char *cmd, json_t **ret_root, json_t **ret_items)
{
        _cleanup_free_ char *out = NULL;
        int r = run(n, cmd, &out);
        if (r < 0)
                return r;
        _cleanup_json_ json_t *root = json_loads(out, JSON_DISABLE_EOF_CHECK, NULL);
        json_t *items = root ? json_object_get(root, "nftables") : NULL;
        if (!json_is_array(items)) {
                set_error(n, "unexpected JSON output from libnftables");
                return -EIO;
        }
        *ret_root = TAKE_PTR(root);
        *ret_items = items;
        return 0;
}

/* The "elem" array of map <name> in our table (NULL when empty). */
static int list_map(struct nft *n, const char *map, json_t **ret_root, json_t **ret_elems)
{
        struct sbuf b = {0};
        sb(&b, "list map inet %s %s", n->table, map);
        if (b.oom) {
                sbuf_done(&b);
                return -ENOMEM;
        }
        json_t *root, *items;
        int r = list_json(n, b.s, &root, &items);
        sbuf_done(&b);
        if (r < 0)
                return r;
        json_t *elems = NULL;
        size_t i;
        json_t *it;
        json_array_foreach(items, i, it)
        {
                json_t *m = json_object_get(it, "map");
                if (m)
                        elems = json_object_get(m, "elem");
        }
        *ret_root = root;
        *ret_elems = json_is_array(elems) ? elems : NULL;
        return 0;
}

/* libnftables opens its netlink socket in nft_ctx_new() without SOCK_CLOEXEC and offers no way
 * to ask for it; mark every netfilter netlink socket of ours that lacks the flag. (A fork+exec
 * in another thread between the two calls could still inherit it; open at startup.) */
static void netfilter_sockets_cloexec(void)
{
        DIR *d = opendir("/proc/self/fd");
        if (!d)
                return;
        struct dirent *de;
        while ((de = readdir(d))) {
                char *end;
                long fd = strtol(de->d_name, &end, 10);
                if (*end || fd < 0 || fd == dirfd(d))
                        continue;
                int fl = fcntl((int)fd, F_GETFD);
                if (fl < 0 || (fl & FD_CLOEXEC))
                        continue;
                int v;
                socklen_t l = sizeof(v);
                if (getsockopt((int)fd, SOL_SOCKET, SO_DOMAIN, &v, &l) < 0 || v != AF_NETLINK)
                        continue;
                l = sizeof(v);
                if (getsockopt((int)fd, SOL_SOCKET, SO_PROTOCOL, &v, &l) < 0 ||
                    v != NETLINK_NETFILTER)
                        continue;
                (void)fcntl((int)fd, F_SETFD, fl | FD_CLOEXEC);
        }
        closedir(d);
}

/* ---------------------------------------------------------------- table */

static const char *const forbidden4[] = {
    "0.0.0.0/8",      "10.0.0.0/8",    "100.64.0.0/10",  "100.100.100.200", "127.0.0.0/8",
    "169.254.0.0/16", "172.16.0.0/12", "192.168.0.0/16", "224.0.0.0/4",     "240.0.0.0/4",
};

/* IPv6 destinations no environment may reach (besides the v6 subnet, added by nft_open).
 * ::/96 holds the unspecified address, loopback and the deprecated v4-compatible range;
 * ::ffff:0:0/96 (v4-mapped) and the NAT64 prefixes would lead to IPv4 addresses, private ones
 * included; fc00::/7 is ULA (with AWS's metadata fd00:ec2::254). Documentation ranges
 * (2001:db8::/32) are not blocked: nothing routes them on the internet. */
static const char *const forbidden6[] = {
    "::/96",          "::ffff:0:0/96", "64:ff9b::/96", "64:ff9b:1::/48", "100::/64",
    "fc00::/7",       "fe80::/10",     "fec0::/10",    "ff00::/8",
};

/* An interval set refilled from scratch: the fixed list plus the environments' own subnet. */
static void forbidden_set(struct sbuf *b, const char *t, const char *set, const char *type,
                          const char *const *list, size_t n, const char *subnet)
{
        sb(b, "add set inet %s %s { type %s; flags interval; auto-merge; }\n", t, set, type);
        sb(b, "flush set inet %s %s\n", t, set);
        sb(b, "add element inet %s %s { ", t, set);
        for (size_t i = 0; i < n; i++)
                sb(b, "%s, ", list[i]);
        sb(b, "%s }\n", subnet);
}

/* Chain open_env: the policy of every open environment without links, one chain for all of
 * them, reached from forward for the links in set open_envs. What differs between two such
 * environments is their address and their counter. The address is checked by the route back,
 * as the input chain does: the daemon's only routes into the environments' subnet through a
 * link are the /32 and /128 of that link's environment (netlink.c), so a source in the subnet
 * that routes back out of the link it came in on is that environment's (a route added by hand
 * into the subnet through a "pdk*" link would widen this). The counter is looked up by link in
 * envctr (chain "denied"). An environment is then two elements and a counter: adding it adds
 * no rule and no jump, either of which makes the kernel validate the whole table at the commit
 * (nf_tables_validate walks every chain reachable from the base chains). Same order and
 * verdicts as env_chain_rules() for an open environment without links. */
static void open_env_chain(struct sbuf *b, const char *t, const char *subnet,
                           const char *subnet6)
{
        /* Counted as the link's environment's denied traffic; a link without a counter entry
         * (none is ever added without one, in one transaction) is still dropped. */
        sb(b, "add chain inet %s denied\n", t);
        sb(b, "flush chain inet %s denied\n", t);
        sb(b, "add rule inet %s denied counter name iifname map @envctr drop\n", t);
        sb(b, "add rule inet %s denied counter drop\n", t);

        const char *ch = "open_env";
        sb(b, "add chain inet %s %s\n", t, ch);
        sb(b, "flush chain inet %s %s\n", t, ch);
        if (subnet6)
                sb(b, "add rule inet %s %s ip6 saddr != %s goto denied\n", t, ch, subnet6);
        else
                sb(b, "add rule inet %s %s meta nfproto ipv6 goto denied\n", t, ch);
        sb(b, "add rule inet %s %s ip saddr != %s goto denied\n", t, ch, subnet);
        sb(b, "add rule inet %s %s fib saddr . iif oif missing goto denied\n", t, ch);
        sb(b, "add rule inet %s %s ct state established,related accept\n", t, ch);
        sb(b, "add rule inet %s %s ip daddr @forbidden4 goto denied\n", t, ch);
        if (subnet6)
                sb(b, "add rule inet %s %s ip6 daddr @forbidden6 goto denied\n", t, ch);
        sb(b, "add rule inet %s %s meta l4proto @tcp_udp th dport @dns_ports goto denied\n", t,
           ch);
        sb(b, "add rule inet %s %s accept\n", t, ch);
}

/* Base chains are (re)created and flushed in the same transaction that refills them, so
 * re-running nft_open (daemon restart, changed subnet or resolver) swaps the rules atomically
 * and leaves per-environment chains, sets, counters and the maps' entries alone. */
static void base_ruleset(struct sbuf *b, const char *t, const char *subnet, const char *resolver,
                         const char *subnet6)
{
        sb(b, "add table inet %s\n", t);
        if (subnet6)
                forbidden_set(b, t, "forbidden6", "ipv6_addr", forbidden6, ELEMENTSOF(forbidden6),
                              subnet6);
        forbidden_set(b, t, "forbidden4", "ipv4_addr", forbidden4, ELEMENTSOF(forbidden4), subnet);

        /* Constants the environments' chains look up, named and shared: an anonymous set in
         * every chain would be two more sets per environment in libnftables' cache, which it
         * refreshes on every change (see "batches"). */
        sb(b, "add set inet %s tcp_udp { type inet_proto; }\n", t);
        sb(b, "add element inet %s tcp_udp { tcp, udp }\n", t);
        sb(b, "add set inet %s dns_ports { type inet_service; }\n", t);
        sb(b, "add element inet %s dns_ports { 53, 853 }\n", t);
        sb(b, "add map inet %s envs { type ifname : verdict; }\n", t);
        sb(b, "add set inet %s open_envs { type ifname; }\n", t);
        sb(b, "add map inet %s envctr { type ifname : counter; }\n", t);
        sb(b, "add map inet %s pub_tcp { type inet_service : ipv4_addr . inet_service; }\n", t);
        sb(b, "add map inet %s pub_udp { type inet_service : ipv4_addr . inet_service; }\n", t);

        static const struct {
                const char *name, *spec;
        } chains[] = {
            {"prerouting", "type nat hook prerouting priority dstnat; policy accept;"},
            {"output", "type nat hook output priority -100; policy accept;"},
            {"postrouting", "type nat hook postrouting priority srcnat; policy accept;"},
            {"input", "type filter hook input priority 0; policy accept;"},
            {"forward", "type filter hook forward priority 0; policy accept;"},
        };
        for (size_t i = 0; i < ELEMENTSOF(chains); i++) {
                sb(b, "add chain inet %s %s { %s }\n", t, chains[i].name, chains[i].spec);
                sb(b, "flush chain inet %s %s\n", t, chains[i].name);
        }
        /* Spoofed traffic to the host (input, below): counted as its link's environment's
         * denied traffic; a link without a counter (not set up yet) falls to the plain drop. */
        sb(b, "add chain inet %s spoofed\n", t);
        sb(b, "flush chain inet %s spoofed\n", t);
        sb(b, "add rule inet %s spoofed counter name iifname map @envctr drop\n", t);
        sb(b, "add rule inet %s spoofed counter drop\n", t);
        open_env_chain(b, t, subnet, subnet6);
        /* The template chain and counter nft_fast.c copied an open environment's chain from,
         * left by a daemon before the shared chain above: nothing refers to them. */
        sb(b, "add chain inet %s tmpl_open\ndelete chain inet %s tmpl_open\n", t, t);
        sb(b, "add counter inet %s tmpl_denied\ndelete counter inet %s tmpl_denied\n", t, t);

        /* Published ports: only for this host's own addresses, or a connection from an
         * environment (or anything routed through the host) to some remote host:PORT would be
         * redirected too. */
        sb(b,
           "add rule inet %s prerouting fib daddr type local dnat ip to tcp dport map @pub_tcp\n",
           t);
        sb(b,
           "add rule inet %s prerouting fib daddr type local dnat ip to udp dport map @pub_udp\n",
           t);
        sb(b, "add rule inet %s output fib daddr type local dnat ip to tcp dport map @pub_tcp\n",
           t);
        sb(b, "add rule inet %s output fib daddr type local dnat ip to udp dport map @pub_udp\n",
           t);
        /* 127.0.0.1:PORT on the host, DNATed above: the environment must not see (or answer
         * to) a loopback address. */
        sb(b,
           "add rule inet %s postrouting ip saddr 127.0.0.0/8 oifname \"" VETH_PREFIX
           "*\" masquerade\n",
           t);

        sb(b,
           "add rule inet %s postrouting ip saddr %s oifname != \"" VETH_PREFIX "*\" masquerade\n",
           t, subnet);
        if (subnet6)
                sb(b,
                   "add rule inet %s postrouting ip6 saddr %s oifname != \"" VETH_PREFIX
                   "*\" masquerade\n",
                   t, subnet6);

#define RULE_IN "add rule inet %s input iifname \"" VETH_PREFIX "*\" "
        /* A source that does not route back out of the link it came in on (the route to each
         * environment's address names its link) is spoofed. An environment cannot write its
         * source (no CAP_NET_RAW or CAP_NET_ADMIN in its network namespace), but the resolver
         * tells environments apart by source address and must not rely on that alone: such a
         * query would be answered as another environment's (opening its allow sets, taking its
         * share of queries in flight) or its answer sent to any address on the internet.
         * One lookup per packet: the counting is in chain "spoofed". */
        sb(b, RULE_IN "meta nfproto ipv4 fib saddr . iif oif missing jump spoofed\n", t);
        sb(b, RULE_IN "ip daddr %s udp dport 53 accept\n", t, resolver);
        sb(b, RULE_IN "ip daddr %s tcp dport 53 accept\n", t, resolver);
        sb(b, RULE_IN "ct state established,related accept\n", t);
        if (subnet6) {
                /* Neighbour discovery with the gateway fe80::1 (hop limit 255: from the link
                 * itself). MLD reports and router solicitations are the kernel's own chatter:
                 * dropped, but not counted as denied connections. */
                sb(b,
                   RULE_IN "icmpv6 type { nd-neighbor-solicit, nd-neighbor-advert } "
                           "ip6 hoplimit 255 accept\n",
                   t);
                sb(b,
                   RULE_IN "icmpv6 type { mld-listener-report, mld2-listener-report, "
                           "mld-listener-done, nd-router-solicit } drop\n",
                   t);
        }
        sb(b, RULE_IN "counter name iifname map @envctr drop\n", t);
        sb(b, RULE_IN "counter drop\n", t);
#undef RULE_IN
#define RULE_FI "add rule inet %s forward iifname \"" VETH_PREFIX "*\" "
#define RULE_FO "add rule inet %s forward oifname \"" VETH_PREFIX "*\" "
        sb(b, RULE_FI "iifname vmap @envs\n", t);
        sb(b, RULE_FI "iifname @open_envs goto open_env\n", t);
        sb(b, RULE_FI "counter drop\n", t); /* a veth without an environment entry: fail closed */
        if (!subnet6)
                sb(b, RULE_FO "meta nfproto ipv6 drop\n", t);
        sb(b, RULE_FO "ct state established,related accept\n", t);
        sb(b, RULE_FO "ct status dnat accept\n", t);
        sb(b, RULE_FO "counter drop\n", t);
#undef RULE_FI
#undef RULE_FO
}

int nft_open(const char *table, struct in_addr subnet, uint8_t prefix, struct in_addr resolver,
             const struct in6_addr *subnet6, uint8_t prefix6, struct nft **ret)
{
        if (!table_name_valid(table) || prefix == 0 || prefix > 32 || !ret)
                return -EINVAL;
        /* The v6 subnet must hold every v4 host part (network.c maps one onto the other). */
        if (subnet6 && (prefix6 < 8 || prefix6 > 128 - (32 - prefix)))
                return -EINVAL;

        struct nft *n = calloc(1, sizeof(*n));
        if (!n)
                return -ENOMEM;
        snprintf(n->table, sizeof(n->table), "%s", table);
        n->mask = prefix_mask(prefix);
        n->subnet = ntohl(subnet.s_addr) & n->mask;
        if (subnet6) {
                n->ipv6 = true;
                n->prefix6 = prefix6;
                n->subnet6 = mask6(subnet6, prefix6);
        }

        n->ctx = nft_ctx_new(NFT_CTX_DEFAULT);
        if (!n->ctx) {
                free(n);
                return -ENOMEM;
        }
        netfilter_sockets_cloexec();
        if (nft_ctx_buffer_output(n->ctx) < 0 || nft_ctx_buffer_error(n->ctx) < 0) {
                nft_close(n);
                return -ENOMEM;
        }

        char net[INET_ADDRSTRLEN], res[INET_ADDRSTRLEN], subnet_s[INET_ADDRSTRLEN + 4];
        snprintf(subnet_s, sizeof(subnet_s), "%s/%u", ip4((struct in_addr){htonl(n->subnet)}, net),
                 prefix);
        char net6[INET6_ADDRSTRLEN], subnet6_s[INET6_ADDRSTRLEN + 5];
        if (n->ipv6)
                snprintf(subnet6_s, sizeof(subnet6_s), "%s/%u", ip6(&n->subnet6, net6), n->prefix6);
        struct sbuf b = {0};
        base_ruleset(&b, n->table, subnet_s, ip4(resolver, res), n->ipv6 ? subnet6_s : NULL);
        int r = run_sbuf(n, &b);
        sbuf_done(&b);
        if (r < 0) {
                nft_close(n);
                return r;
        }
        /* Without it (a kernel before 6.3) every change goes through libnftables: slower with
         * many environments, the same table. */
        if (nft_fast_open(n->table, &n->fast) < 0)
                n->fast = NULL;
        *ret = n;
        return 0;
}

void nft_close(struct nft *n)
{
        if (!n)
                return;
        if (n->ctx)
                nft_ctx_free(n->ctx);
        if (n->nl)
                mnl_socket_close(n->nl);
        nft_fast_free(n->fast);
        for (size_t i = 0; i < n->n_batch; i++)
                free(n->batch[i].text);
        free(n->batch);
        free(n->error);
        free(n);
}

const char *nft_last_error(struct nft *n)
{
        return n ? n->error : NULL;
}

int nft_destroy_table(struct nft *n)
{
        if (!n)
                return -EINVAL;
        /* "add" first: deleting a table that is already gone is not an error here. */
        struct sbuf b = {0};
        sb(&b, "add table inet %s\ndelete table inet %s\n", n->table, n->table);
        int r = run_sbuf(n, &b);
        sbuf_done(&b);
        return r;
}

/* ---------------------------------------------------------------- environments */

/* The chain of an environment with an allow policy or links. Order matters:
 *   1. spoofed sources (and IPv6 when the table has none): drop, counted;
 *   2. replies of connections already accepted: accept;
 *   3. linked environments: accept (they are inside the subnet, which 4 drops);
 *   4. forbidden ranges: drop, counted — before any allow rule, so an allowed name that resolves
 *      to a private or metadata address stays blocked;
 *   5. open: accept; allow: learned addresses, learned address.port pairs, listed CIDR[:port],
 *      then drop, counted.
 * "ip ..." matches only IPv4 packets and "ip6 ..." only IPv6 ones, so each family passes
 * through its own half of every step. */
static void env_chain_rules(struct sbuf *b, const struct nft *n, const struct env_names *nm,
                            const struct nft_env *e)
{
        char a[INET6_ADDRSTRLEN];
        const char *t = n->table, *ch = nm->chain, *ctr = nm->counter;

        if (n->ipv6)
                sb(b, "add rule inet %s %s ip6 saddr != %s counter name %s drop\n", t, ch,
                   ip6(&e->addr6, a), ctr);
        else
                sb(b, "add rule inet %s %s meta nfproto ipv6 counter name %s drop\n", t, ch, ctr);
        sb(b, "add rule inet %s %s ip saddr != %s counter name %s drop\n", t, ch, ip4(e->addr, a),
           ctr);
        sb(b, "add rule inet %s %s ct state established,related accept\n", t, ch);
        if (e->n_links > 0) {
                sb(b, "add rule inet %s %s ip daddr { ", t, ch);
                for (size_t i = 0; i < e->n_links; i++)
                        sb(b, "%s%s", i ? ", " : "", ip4(e->links[i], a));
                sb(b, " } accept\n");
        }
        if (n->ipv6 && e->n_links6 > 0) {
                sb(b, "add rule inet %s %s ip6 daddr { ", t, ch);
                for (size_t i = 0; i < e->n_links6; i++)
                        sb(b, "%s%s", i ? ", " : "", ip6(&e->links6[i], a));
                sb(b, " } accept\n");
        }
        sb(b, "add rule inet %s %s ip daddr @forbidden4 counter name %s drop\n", t, ch, ctr);
        if (n->ipv6)
                sb(b, "add rule inet %s %s ip6 daddr @forbidden6 counter name %s drop\n", t, ch,
                   ctr);
        /* DNS (and DNS over TLS) only through the daemon's resolver, which is reached through
         * the input chain: no resolving around the policy, no tunnelling through other
         * resolvers. Either family. */
        sb(b, "add rule inet %s %s meta l4proto @tcp_udp th dport @dns_ports counter name %s "
              "drop\n",
           t, ch, ctr);

        if (e->mode == NET_OPEN) {
                sb(b, "add rule inet %s %s accept\n", t, ch);
                return;
        }
        sb(b, "add rule inet %s %s ip daddr @%s accept\n", t, ch, nm->allow4);
        sb(b, "add rule inet %s %s meta l4proto @tcp_udp ip daddr . th dport @%s accept\n", t,
           ch, nm->allowp4);
        if (n->ipv6) {
                sb(b, "add rule inet %s %s ip6 daddr @%s accept\n", t, ch, nm->allow6);
                sb(b, "add rule inet %s %s meta l4proto @tcp_udp ip6 daddr . th dport @%s accept\n",
                   t, ch, nm->allowp6);
        }
        /* Listed CIDRs are rules, not an interval set: they may overlap, and timeouts (needed by
         * the learned sets) and intervals do not mix well on older kernels. */
        for (size_t i = 0; i < e->n_cidrs; i++) {
                const struct nft_cidr_rule *c = &e->cidrs[i];
                bool v6 = c->family == AF_INET6;
                if (v6 && !n->ipv6)
                        continue; /* IPv6 is dropped above anyway */
                sb(b, "add rule inet %s %s", t, ch);
                if (c->prefix > 0 && v6) {
                        struct in6_addr net = mask6(&c->addr6, c->prefix);
                        sb(b, " ip6 daddr %s/%u", ip6(&net, a), c->prefix);
                } else if (c->prefix > 0) {
                        struct in_addr net = {
                            htonl(ntohl(c->addr.s_addr) & prefix_mask(c->prefix))};
                        sb(b, " ip daddr %s/%u", ip4(net, a), c->prefix);
                } else
                        sb(b, " meta nfproto %s", v6 ? "ipv6" : "ipv4");
                if (c->port)
                        sb(b, " meta l4proto @tcp_udp th dport %u", c->port);
                sb(b, " accept\n");
        }
        sb(b, "add rule inet %s %s counter name %s drop\n", t, ch, ctr);
}

/* Key of element i of a listed map: ["key", data] or [{"elem": {"val": key, ...}}, data]. */
static json_t *elem_key(json_t *pair, json_t **ret_comment)
{
        json_t *k = json_array_get(pair, 0);
        json_t *el = json_object_get(k, "elem");
        if (ret_comment)
                *ret_comment = el ? json_object_get(el, "comment") : NULL;
        return el ? json_object_get(el, "val") : k;
}

/* Delete ifname from a set of links if it is there ("add" first: never an error). */
static void set_leave(struct sbuf *b, const struct nft *n, const char *set, const char *ifname)
{
        sb(b, "add element inet %s %s { \"%s\" }\n", n->table, set, ifname);
        sb(b, "delete element inet %s %s { \"%s\" }\n", n->table, set, ifname);
}

/* Append "delete element" commands for entries of an ifname map: those whose key is ifname
 * (about to be re-added) and those whose data is ours (stale: the environment's veth got
 * another name, or it is going away; NULL: by key only). map: "envs" (data {"jump": {"target":
 * chain}}) or "envctr" (data "counter name"). also: a set of links (open_envs) each such key
 * leaves too. */
static int drop_ifname_entries(struct nft *n, struct sbuf *b, const char *map, const char *ours,
                               const char *ifname, const char *also)
{
        _cleanup_json_ json_t *root = NULL;
        json_t *elems;
        int r = list_map(n, map, &root, &elems);
        if (r < 0)
                return r;
        size_t i;
        json_t *pair;
        json_array_foreach(elems, i, pair)
        {
                const char *key = json_string_value(elem_key(pair, NULL));
                json_t *data = json_array_get(pair, 1);
                const char *target = json_is_string(data)
                                         ? json_string_value(data)
                                         : json_string_value(json_object_get(
                                               json_object_get(data, "jump"), "target"));
                if (!key || !ifname_valid(key))
                        continue;
                if ((!ifname || strcmp(key, ifname) != 0) &&
                    (!ours || !target || strcmp(target, ours) != 0))
                        continue;
                sb(b, "delete element inet %s %s { \"%s\" }\n", n->table, map, key);
                if (also)
                        set_leave(b, n, also, key);
        }
        return 0;
}

/* Append "delete element" commands for the published ports of an environment. */
static int drop_env_ports(struct nft *n, struct sbuf *b, const char *map, const char *name)
{
        _cleanup_json_ json_t *root = NULL;
        json_t *elems;
        int r = list_map(n, map, &root, &elems);
        if (r < 0)
                return r;
        char want[ENV_NAME_MAX + 5];
        if ((r = BUF_PRINTF(want, "env:%s", name)) < 0)
                return r;
        size_t i;
        json_t *pair;
        json_array_foreach(elems, i, pair)
        {
                json_t *comment;
                json_t *key = elem_key(pair, &comment);
                const char *c = json_string_value(comment);
                if (json_is_integer(key) && c && strcmp(c, want) == 0)
                        sb(b, "delete element inet %s %s { %lld }\n", n->table, map,
                           (long long)json_integer_value(key));
        }
        return 0;
}

/* The environment's learned sets: created if missing, emptied when flush. The v6 ones only
 * when the table has IPv6, or when all (for deleting them: a daemon that ran with IPv6 before
 * may have left them). */
static void env_sets(struct sbuf *b, const struct nft *n, const struct env_names *nm, bool flush,
                     bool all)
{
        static const char *const types[] = {"ipv4_addr", "ipv4_addr . inet_service", "ipv6_addr",
                                            "ipv6_addr . inet_service"};
        const char *names[] = {nm->allow4, nm->allowp4, nm->allow6, nm->allowp6};
        for (size_t i = 0; i < (n->ipv6 || all ? 4u : 2u); i++) {
                sb(b, "add set inet %s %s { type %s; flags timeout; }\n", n->table, names[i],
                   types[i]);
                if (flush)
                        sb(b, "flush set inet %s %s\n", n->table, names[i]);
        }
}

/* Delete the environment's learned sets, all four (a daemon that ran with IPv6 before may have
 * left the v6 ones); "add" before each "delete" makes deleting what is not there a no-op. */
static void env_sets_delete(struct sbuf *b, const struct nft *n, const struct env_names *nm)
{
        env_sets(b, n, nm, false, true);
        sb(b, "delete set inet %s %s\n", n->table, nm->allow4);
        sb(b, "delete set inet %s %s\n", n->table, nm->allowp4);
        sb(b, "delete set inet %s %s\n", n->table, nm->allow6);
        sb(b, "delete set inet %s %s\n", n->table, nm->allowp6);
}

static int env_valid(const struct nft *n, const struct nft_env *e)
{
        if (!ifname_valid(e->host_ifname) || !in_subnet(n, e->addr) || (e->n_links && !e->links) ||
            (e->n_cidrs && !e->cidrs) || (e->n_links6 && !e->links6))
                return -EINVAL;
        if (n->ipv6 && !in_subnet6(n, &e->addr6))
                return -EINVAL;
        /* A link is another environment: never a way to open a forbidden range. */
        for (size_t i = 0; i < e->n_links; i++)
                if (!in_subnet(n, e->links[i]))
                        return -EINVAL;
        for (size_t i = 0; i < e->n_links6; i++)
                if (!n->ipv6 || !in_subnet6(n, &e->links6[i]))
                        return -EINVAL;
        for (size_t i = 0; i < e->n_cidrs; i++)
                if (e->cidrs[i].prefix > (e->cidrs[i].family == AF_INET6 ? 128 : 32))
                        return -EINVAL;
        return 0;
}

/* ---------------------------------------------------------------- batches
 *
 * Every libnftables call that adds rules or elements first refreshes its cache of the table's
 * chains, sets and objects (libnftables 1.0.6 refetches after any change): a cost that grows
 * with the number of environments. Re-applying every environment at daemon start, one call
 * each, was therefore quadratic; queued, BATCH_MAX of them share one refresh. */

static int batch_flush(struct nft *n);

static int batch_queue(struct nft *n, struct sbuf *b, const char *name, const char *ifname)
{
        if (b->oom) {
                sbuf_done(b);
                return -ENOMEM;
        }
        struct batch_item *p = reallocarray(n->batch, n->n_batch + 1, sizeof(*p));
        if (!p) {
                sbuf_done(b);
                return -ENOMEM;
        }
        n->batch = p;
        struct batch_item *it = &n->batch[n->n_batch++];
        it->text = TAKE_PTR(b->s);
        snprintf(it->name, sizeof(it->name), "%s", name);
        snprintf(it->ifname, sizeof(it->ifname), "%s", ifname);
        return n->n_batch >= BATCH_MAX ? batch_flush(n) : 0;
}

/* An environment's queued apply that the kernel refused (an entry of its interface points
 * elsewhere): the same text after deleting the stale map entries, found by listing. */
static int batch_redo_listed(struct nft *n, const struct batch_item *it)
{
        struct env_names nm;
        int r = env_names(it->name, &nm);
        if (r < 0)
                return r;
        struct sbuf b = {0};
        r = drop_ifname_entries(n, &b, "envs", nm.chain, it->ifname, NULL);
        if (r >= 0)
                r = drop_ifname_entries(n, &b, "envctr", nm.counter, it->ifname, "open_envs");
        if (r >= 0) {
                sb(&b, "%s", it->text);
                r = run_sbuf(n, &b);
        }
        sbuf_done(&b);
        return r;
}

/* All queued transactions as one; if the kernel refuses that, each on its own (so one bad
 * environment does not keep the others from their rules). Returns the first error. */
static int batch_flush(struct nft *n)
{
        size_t cnt = n->n_batch;
        struct batch_item *items = TAKE_PTR(n->batch);
        n->n_batch = 0;
        if (!cnt)
                return 0;
        struct sbuf all = {0};
        for (size_t i = 0; i < cnt; i++)
                sb(&all, "%s", items[i].text);
        int r = run_sbuf(n, &all), first = 0;
        sbuf_done(&all);
        for (size_t i = 0; i < cnt; i++) {
                if (r < 0) {
                        int k = run(n, items[i].text, NULL);
                        if ((k == -EBUSY || k == -EEXIST) && items[i].name[0])
                                k = batch_redo_listed(n, &items[i]);
                        if (k < 0 && first == 0)
                                first = k;
                }
                free(items[i].text);
        }
        free(items);
        return first;
}

int nft_batch_begin(struct nft *n)
{
        if (!n || n->batching)
                return -EINVAL;
        n->batching = true;
        return 0;
}

int nft_batch_end(struct nft *n)
{
        if (!n || !n->batching)
                return -EINVAL;
        int r = batch_flush(n);
        if (n->batch_error < 0 && r >= 0)
                r = n->batch_error;
        n->batch_error = 0;
        n->batching = false;
        return r;
}

/* A change that is not queued runs after what is: otherwise a removal made while batching
 * would be undone by the environment's apply queued before it. */
static void batch_settle(struct nft *n)
{
        if (!n->batching || !n->n_batch)
                return;
        int r = batch_flush(n);
        if (r < 0 && n->batch_error == 0)
                n->batch_error = r;
}

/* An open environment without links has no chain of its own: its link is in set open_envs
 * and shares chain open_env (see open_env_chain()). */
static bool env_shared(const struct nft_env *e)
{
        return e->mode == NET_OPEN && e->n_links == 0 && e->n_links6 == 0;
}

/* One transaction. listed: find and delete stale map entries by listing the maps first (the
 * slow path, see nft_env_apply). */
static int env_apply(struct nft *n, const struct nft_env *e, const struct env_names *nm,
                     bool listed)
{
        const char *t = n->table, *ifname = e->host_ifname;
        struct sbuf b = {0};
        /* The counter survives re-applies (denied totals across daemon restarts); the learned
         * sets are emptied when the caller says the allow list changed (a new list must revoke
         * what the old one let in) and kept otherwise (restart, bandwidth, links). */
        sb(&b, "add counter inet %s %s\n", t, nm->counter);
        if (listed) {
                int r = drop_ifname_entries(n, &b, "envs", nm->chain, ifname, NULL);
                if (r >= 0)
                        r = drop_ifname_entries(n, &b, "envctr", nm->counter, ifname, "open_envs");
                if (r < 0) {
                        sbuf_done(&b);
                        return r;
                }
        }
        if (env_shared(e)) {
                /* The chain of an earlier policy goes, with the jump of the link to it: added
                 * first, so that deleting it cannot fail (EBUSY when the link jumps elsewhere:
                 * then the listing way, which dropped it above). */
                sb(&b, "add chain inet %s %s\n", t, nm->chain);
                if (!listed) {
                        sb(&b, "add element inet %s envs { \"%s\" : jump %s }\n", t, ifname,
                           nm->chain);
                        sb(&b, "delete element inet %s envs { \"%s\" }\n", t, ifname);
                }
                sb(&b, "delete chain inet %s %s\n", t, nm->chain);
                env_sets_delete(&b, n, nm);
                sb(&b, "add element inet %s open_envs { \"%s\" }\n", t, ifname);
        } else {
                /* The chain is flushed and refilled in the same transaction, so no packet ever
                 * sees a half-built or empty chain. */
                if (e->mode == NET_ALLOW)
                        env_sets(&b, n, nm, e->flush_learned, false);
                sb(&b, "add chain inet %s %s { comment \"env:%s\"; }\n", t, nm->chain, nm->name);
                sb(&b, "flush chain inet %s %s\n", t, nm->chain);
                env_chain_rules(&b, n, nm, e);
                /* An open environment learns nothing: no sets. Those of an earlier allow policy
                 * (or of a daemon before this one) go here, after the flush above dropped the
                 * rules using them. */
                if (e->mode == NET_OPEN)
                        env_sets_delete(&b, n, nm);
                set_leave(&b, n, "open_envs", ifname);
                sb(&b, "add element inet %s envs { \"%s\" : jump %s }\n", t, ifname, nm->chain);
        }
        sb(&b, "add element inet %s envctr { \"%s\" : \"%s\" }\n", t, ifname, nm->counter);
        if (!listed && n->batching)
                return batch_queue(n, &b, nm->name, ifname);
        int r = run_sbuf(n, &b);
        sbuf_done(&b);
        return r;
}

static struct nft_fast_env fast_env(const struct env_names *nm, const char *ifname)
{
        return (struct nft_fast_env){
            .chain = nm->chain,
            .counter = nm->counter,
            .sets = {nm->allow4, nm->allowp4, nm->allow6, nm->allowp6},
            .ifname = ifname,
        };
}

/* Fast path without any listing: re-adding a map entry with the same data is a no-op, so
 * nothing has to be looked up when the interface keeps its entry (re-apply) or has none (new).
 * The kernel refuses (EBUSY, EEXIST) when the interface's entry points elsewhere, or when
 * another link still jumps to the chain the apply deletes: then the maps are listed and stale
 * entries replaced (the slow path). */
int nft_env_apply(struct nft *n, const struct nft_env *e)
{
        if (!n || !e)
                return -EINVAL;
        if (e->mode == NET_NONE)
                return nft_env_remove(n, e->name);
        if (e->mode != NET_OPEN && e->mode != NET_ALLOW)
                return -EINVAL;

        struct env_names nm;
        int r = env_names(e->name, &nm);
        if (r < 0)
                return r;
        r = env_valid(n, e);
        if (r < 0)
                return r;
        if (n->fast && !n->batching && env_shared(e)) {
                struct nft_fast_env fe = fast_env(&nm, e->host_ifname);
                r = nft_fast_apply(n->fast, &fe);
                set_error(n, r < 0 ? strerror(-r) : NULL);
                if (r >= 0) {
                        n->n_fast++;
                        return r;
                }
                /* refused as a whole: the same through libnftables, which lists the maps
                 * when an entry of the interface points elsewhere */
        }
        r = env_apply(n, e, &nm, false);
        if (r == -EBUSY || r == -EEXIST)
                r = env_apply(n, e, &nm, true);
        return r;
}

/* "add" before each "delete" makes deleting what is not there a no-op. */
static void env_objects_delete(struct sbuf *b, const struct nft *n, const struct env_names *nm)
{
        const char *t = n->table;
        sb(b, "add chain inet %s %s\ndelete chain inet %s %s\n", t, nm->chain, t, nm->chain);
        env_sets_delete(b, n, nm);
        sb(b, "add counter inet %s %s\ndelete counter inet %s %s\n", t, nm->counter, t,
           nm->counter);
}

/* Removing an environment that has nothing here is not an error (orphan cleanup and
 * NET_NONE re-applies are idempotent). */
int nft_env_remove(struct nft *n, const char *name)
{
        if (!n)
                return -EINVAL;
        struct env_names nm;
        int r = env_names(name, &nm);
        if (r < 0)
                return r;
        batch_settle(n);
        struct sbuf b = {0};
        /* References first: map entries jumping to the chain or naming the counter. */
        r = drop_ifname_entries(n, &b, "envs", nm.chain, NULL, NULL);
        if (r >= 0)
                r = drop_ifname_entries(n, &b, "envctr", nm.counter, NULL, "open_envs");
        if (r >= 0)
                r = drop_env_ports(n, &b, "pub_tcp", nm.name);
        if (r >= 0)
                r = drop_env_ports(n, &b, "pub_udp", nm.name);
        if (r < 0) {
                sbuf_done(&b);
                return r;
        }
        env_objects_delete(&b, n, &nm);
        r = run_sbuf(n, &b);
        sbuf_done(&b);
        return r;
}

static const char *port_map(const char *proto);

/* Each delete is preceded by an add of what the caller says is there: a no-op when it is,
 * a fresh element when it is not (so the delete cannot fail), EBUSY when the key holds other
 * data — then the caller was wrong and the listing path sorts it out. */
int nft_env_remove_known(struct nft *n, const char *name, const char *host_ifname,
                         const struct nft_port *ports, size_t n_ports)
{
        if (!n || (n_ports && !ports))
                return -EINVAL;
        struct env_names nm;
        int r = env_names(name, &nm);
        if (r < 0)
                return r;
        if (!ifname_valid(host_ifname))
                return nft_env_remove(n, name);
        batch_settle(n);
        /* Without published ports: the map entries of the interface, the chain, the sets and
         * the counter, each if there, in one netlink batch (no libnftables, no cache). Refused
         * when something else still refers to the chain or counter: the listing way below. */
        if (n->fast && n_ports == 0) {
                struct nft_fast_env fe = fast_env(&nm, host_ifname);
                r = nft_fast_remove(n->fast, &fe);
                set_error(n, r < 0 ? strerror(-r) : NULL);
                if (r >= 0) {
                        n->n_fast++;
                        return r;
                }
        }
        const char *t = n->table;
        struct sbuf b = {0};
        sb(&b, "add chain inet %s %s\n", t, nm.chain);
        sb(&b, "add counter inet %s %s\n", t, nm.counter);
        sb(&b, "add element inet %s envs { \"%s\" : jump %s }\n", t, host_ifname, nm.chain);
        sb(&b, "delete element inet %s envs { \"%s\" }\n", t, host_ifname);
        sb(&b, "add element inet %s envctr { \"%s\" : \"%s\" }\n", t, host_ifname, nm.counter);
        sb(&b, "delete element inet %s envctr { \"%s\" }\n", t, host_ifname);
        set_leave(&b, n, "open_envs", host_ifname);
        for (size_t i = 0; i < n_ports; i++) {
                const char *map = port_map(ports[i].proto);
                char a[INET_ADDRSTRLEN];
                if (!map || !ports[i].host_port || !ports[i].port || !in_subnet(n, ports[i].addr)) {
                        sbuf_done(&b);
                        return nft_env_remove(n, name);
                }
                sb(&b, "add element inet %s %s { %u comment \"env:%s\" : %s . %u }\n", t, map,
                   ports[i].host_port, nm.name, ip4(ports[i].addr, a), ports[i].port);
                sb(&b, "delete element inet %s %s { %u }\n", t, map, ports[i].host_port);
        }
        env_objects_delete(&b, n, &nm);
        r = run_sbuf(n, &b);
        sbuf_done(&b);
        /* Anything else still referring to the chain or counter (an entry under another
         * interface name, a port we were not told about) fails the transaction as a whole. */
        if (r < 0)
                r = nft_env_remove(n, name);
        return r;
}

int nft_link_forget(struct nft *n, const char *ifname)
{
        if (!n || !ifname_valid(ifname))
                return -EINVAL;
        batch_settle(n);
        int r;
        if (n->fast) {
                r = nft_fast_forget(n->fast, ifname);
                set_error(n, r < 0 ? strerror(-r) : NULL);
                if (r >= 0) {
                        n->n_fast++;
                        return r;
                }
        }
        struct sbuf b = {0};
        r = drop_ifname_entries(n, &b, "envs", NULL, ifname, NULL);
        if (r >= 0)
                r = drop_ifname_entries(n, &b, "envctr", NULL, ifname, NULL);
        if (r >= 0) {
                set_leave(&b, n, "open_envs", ifname);
                r = run_sbuf(n, &b);
        }
        sbuf_done(&b);
        return r;
}

/* A new answer replaces the element's timeout (delete + add in one transaction; the leading
 * add makes the delete valid when the element is new). The kernel would otherwise keep the old
 * expiry on a plain "add". The most recent answer wins, even if shorter. */
static int allow_key(struct nft *n, const char *name, const char *addr, bool v6, uint16_t port,
                     uint32_t ttl_s)
{
        struct env_names nm;
        int r = env_names(name, &nm);
        if (r < 0)
                return r;
        uint32_t ttl = ttl_s < 1 ? 1 : ttl_s > TTL_MAX_S ? TTL_MAX_S : ttl_s;
        char key[INET6_ADDRSTRLEN + 10];
        if (port)
                snprintf(key, sizeof(key), "%s . %u", addr, port);
        else
                snprintf(key, sizeof(key), "%s", addr);
        const char *set = v6 ? (port ? nm.allowp6 : nm.allow6) : (port ? nm.allowp4 : nm.allow4);
        const char *t = n->table;

        struct sbuf b = {0};
        sb(&b, "add element inet %s %s { %s }\n", t, set, key);
        sb(&b, "delete element inet %s %s { %s }\n", t, set, key);
        sb(&b, "add element inet %s %s { %s timeout %us }\n", t, set, key, ttl);
        r = run_sbuf(n, &b);
        sbuf_done(&b);
        return r;
}

int nft_env_allow_addr(struct nft *n, const char *name, struct in_addr a, uint16_t port,
                       uint32_t ttl_s)
{
        if (!n)
                return -EINVAL;
        char as[INET_ADDRSTRLEN];
        return allow_key(n, name, ip4(a, as), false, port, ttl_s);
}

int nft_env_allow_addr6(struct nft *n, const char *name, const struct in6_addr *a, uint16_t port,
                        uint32_t ttl_s)
{
        if (!n || !a)
                return -EINVAL;
        if (!n->ipv6)
                return -EAFNOSUPPORT;
        char as[INET6_ADDRSTRLEN];
        return allow_key(n, name, ip6(a, as), true, port, ttl_s);
}

/* ---------------------------------------------------------------- counters over netlink
 *
 * Reading counters does not go through libnftables: any "list" there refreshes its cache of the
 * whole table first (every chain with its rules: tens of thousands of lines with a thousand
 * environments), so reading one environment's counter cost time in proportion to all of them.
 * Here one NFT_MSG_GETOBJ asks the kernel directly: for one counter by name (a hash lookup in
 * the kernel), or a dump of every counter of the table (one pass, ~100 bytes per counter). */

/* The netfilter netlink socket, opened on first use and kept (one per struct nft). */
static int counters_socket(struct nft *n)
{
        if (n->nl)
                return 0;
        struct mnl_socket *s = mnl_socket_open2(NETLINK_NETFILTER, SOCK_CLOEXEC);
        if (!s)
                return negative_errno();
        if (mnl_socket_bind(s, 0, MNL_SOCKET_AUTOPID) < 0) {
                int r = negative_errno();
                mnl_socket_close(s);
                return r;
        }
        n->nl = s;
        return 0;
}

struct counter_reply {
        char counter[OBJ_NAME_MAX + 1]; /* single get: the name asked for */
        uint64_t packets;
        bool found;
        struct nft_denied *all; /* dump: every "denied_<e>" counter, grown as they come */
        size_t n_all, cap_all;
        int error;
};

static int counter_attr_cb(const struct nlattr *a, void *data)
{
        const struct nlattr **tb = data;
        int type = mnl_attr_get_type(a);
        if (type <= NFTA_OBJ_MAX)
                tb[type] = a;
        return MNL_CB_OK;
}

static int counter_data_cb(const struct nlattr *a, void *data)
{
        const struct nlattr **tb = data;
        int type = mnl_attr_get_type(a);
        if (type <= NFTA_COUNTER_MAX)
                tb[type] = a;
        return MNL_CB_OK;
}

/* One NFT_MSG_NEWOBJ of a counter: its name and packets. */
static int counter_msg_cb(const struct nlmsghdr *nlh, void *data)
{
        struct counter_reply *q = data;
        const struct nlattr *tb[NFTA_OBJ_MAX + 1] = {0};
        const struct nlattr *ctr[NFTA_COUNTER_MAX + 1] = {0};
        if (mnl_attr_parse(nlh, sizeof(struct nfgenmsg), counter_attr_cb, tb) < 0 ||
            !tb[NFTA_OBJ_NAME] || !tb[NFTA_OBJ_DATA] ||
            mnl_attr_validate(tb[NFTA_OBJ_NAME], MNL_TYPE_NUL_STRING) < 0 ||
            mnl_attr_parse_nested(tb[NFTA_OBJ_DATA], counter_data_cb, ctr) < 0 ||
            !ctr[NFTA_COUNTER_PACKETS] ||
            mnl_attr_validate(ctr[NFTA_COUNTER_PACKETS], MNL_TYPE_U64) < 0)
                return MNL_CB_OK; /* not a counter we understand: skip it */
        const char *name = mnl_attr_get_str(tb[NFTA_OBJ_NAME]);
        uint64_t packets = be64toh(mnl_attr_get_u64(ctr[NFTA_COUNTER_PACKETS]));
        if (!q->all && q->counter[0]) {
                if (strcmp(name, q->counter) == 0) {
                        q->packets = packets;
                        q->found = true;
                }
                return MNL_CB_OK;
        }
        char env[ENV_NAME_MAX + 1];
        if (strncmp(name, "denied_", 7) != 0 || !env_decode(name + 7, env))
                return MNL_CB_OK;
        if (q->n_all == q->cap_all) {
                size_t cap = q->cap_all ? 2 * q->cap_all : 64;
                struct nft_denied *p = reallocarray(q->all, cap, sizeof(*p));
                if (!p) {
                        q->error = -ENOMEM;
                        return MNL_CB_OK;
                }
                q->all = p;
                q->cap_all = cap;
        }
        struct nft_denied *d = &q->all[q->n_all++];
        snprintf(d->name, sizeof(d->name), "%s", env);
        d->packets = packets;
        return MNL_CB_OK;
}

/* GETOBJ of type counter in our table: one by name, or (name NULL) a dump of all. */
static int counters_query(struct nft *n, const char *name, struct counter_reply *q)
{
        int r = counters_socket(n);
        if (r < 0)
                return r;
        char req[512];
        struct nlmsghdr *nlh = mnl_nlmsg_put_header(req);
        nlh->nlmsg_type = (NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_GETOBJ;
        nlh->nlmsg_flags = NLM_F_REQUEST | (name ? NLM_F_ACK : NLM_F_DUMP);
        nlh->nlmsg_seq = ++n->nl_seq;
        struct nfgenmsg *nfg = mnl_nlmsg_put_extra_header(nlh, sizeof(*nfg));
        nfg->nfgen_family = NFPROTO_INET;
        nfg->version = NFNETLINK_V0;
        nfg->res_id = 0;
        mnl_attr_put_strz(nlh, NFTA_OBJ_TABLE, n->table);
        if (name)
                mnl_attr_put_strz(nlh, NFTA_OBJ_NAME, name);
        mnl_attr_put_u32(nlh, NFTA_OBJ_TYPE, htonl(NFT_OBJECT_COUNTER));
        if (mnl_socket_sendto(n->nl, nlh, nlh->nlmsg_len) < 0)
                return negative_errno();
        uint32_t portid = mnl_socket_get_portid(n->nl);
        _cleanup_free_ char *buf = malloc(NFT_RECV_SIZE);
        if (!buf)
                return -ENOMEM;
        for (;;) {
                ssize_t len = mnl_socket_recvfrom(n->nl, buf, NFT_RECV_SIZE);
                if (len < 0) {
                        if (errno == EINTR)
                                continue;
                        return negative_errno();
                }
                /* -1: an NLMSG_ERROR (errno = its code); 0: the ACK or NLMSG_DONE. */
                r = mnl_cb_run(buf, (size_t)len, nlh->nlmsg_seq, portid, counter_msg_cb, q);
                if (r < 0)
                        return negative_errno();
                if (r == MNL_CB_STOP)
                        return q->error;
        }
}

int nft_env_denied(struct nft *n, const char *name, uint64_t *ret_packets)
{
        if (!n || !ret_packets)
                return -EINVAL;
        struct env_names nm;
        int r = env_names(name, &nm);
        if (r < 0)
                return r;
        struct counter_reply q = {0};
        snprintf(q.counter, sizeof(q.counter), "%s", nm.counter);
        r = counters_query(n, nm.counter, &q);
        if (r >= 0 && !q.found)
                r = -ENOENT;
        set_error(n, r < 0 ? strerror(-r) : NULL);
        if (r < 0)
                return r;
        *ret_packets = q.packets;
        return 0;
}

static int denied_cmp(const void *a, const void *b)
{
        return strcmp(((const struct nft_denied *)a)->name, ((const struct nft_denied *)b)->name);
}

int nft_denied_all(struct nft *n, struct nft_denied **ret, size_t *ret_n)
{
        if (!n || !ret || !ret_n)
                return -EINVAL;
        struct counter_reply q = {0};
        int r = counters_query(n, NULL, &q);
        set_error(n, r < 0 ? strerror(-r) : NULL);
        if (r < 0) {
                free(q.all);
                return r;
        }
        if (q.n_all)
                qsort(q.all, q.n_all, sizeof(*q.all), denied_cmp);
        *ret = q.all;
        *ret_n = q.n_all;
        return 0;
}

const struct nft_denied *nft_denied_find(const struct nft_denied *all, size_t n, const char *name)
{
        struct nft_denied key;
        if (!name || snprintf(key.name, sizeof(key.name), "%s", name) >= (int)sizeof(key.name))
                return NULL;
        return n ? bsearch(&key, all, n, sizeof(*all), denied_cmp) : NULL;
}

/* Names of environments with a chain (chain headers only: no rules, no set elements) or a
 * counter (an open environment without links has only that): cheap even with many. */
int nft_env_list(struct nft *n, char ***ret_names, size_t *ret_n)
{
        if (!n || !ret_names || !ret_n)
                return -EINVAL;
        json_t *root, *items;
        int r = list_json(n, "list chains inet", &root, &items);
        if (r < 0)
                return r;
        _cleanup_json_ json_t *owner = root;
        _cleanup_free_ struct nft_denied *ctr = NULL;
        size_t n_ctr = 0;
        if ((r = nft_denied_all(n, &ctr, &n_ctr)) < 0)
                return r; /* the caller logs it: half a list would leave entries behind */

        size_t cnt = 0, i;
        char **names = calloc(json_array_size(items) + n_ctr + 1, sizeof(char *));
        if (!names)
                return -ENOMEM;
        json_t *it;
        json_array_foreach(items, i, it)
        {
                json_t *c = json_object_get(it, "chain");
                const char *tbl = json_string_value(json_object_get(c, "table"));
                const char *fam = json_string_value(json_object_get(c, "family"));
                const char *cn = json_string_value(json_object_get(c, "name"));
                char real[ENV_NAME_MAX + 1];
                if (!tbl || !fam || !cn || strcmp(tbl, n->table) != 0 || strcmp(fam, "inet") != 0 ||
                    strncmp(cn, "env_", 4) != 0 || !env_decode(cn + 4, real))
                        continue;
                if (!(names[cnt++] = strdup(real)))
                        goto oom;
        }
        for (i = 0; i < n_ctr; i++)
                if (!(names[cnt++] = strdup(ctr[i].name)))
                        goto oom;
        size_t o = str_sort_unique(names, cnt); /* one name per environment: most have both */
        names[o] = NULL;
        *ret_names = names;
        *ret_n = o;
        return 0;
oom:
        for (i = 0; i < cnt; i++)
                free(names[i]);
        free(names);
        return -ENOMEM;
}

/* ---------------------------------------------------------------- published ports */

static const char *port_map(const char *proto)
{
        if (!proto)
                return NULL;
        if (strcmp(proto, "tcp") == 0)
                return "pub_tcp";
        if (strcmp(proto, "udp") == 0)
                return "pub_udp";
        return NULL;
}

/* Same port to the same target again: no-op. Port already published elsewhere: -EEXIST. */
int nft_port_add(struct nft *n, const char *env, const char *proto, uint16_t host_port,
                 struct in_addr addr, uint16_t port)
{
        const char *map = port_map(proto);
        if (!n || !map || !env_name_valid(env) || host_port == 0 || port == 0)
                return -EINVAL;
        if (!in_subnet(n, addr))
                return -EINVAL;
        char a[INET_ADDRSTRLEN];
        struct sbuf b = {0};
        sb(&b, "add element inet %s %s { %u comment \"env:%s\" : %s . %u }\n", n->table, map,
           host_port, env, ip4(addr, a), port);
        if (n->batching)
                return batch_queue(n, &b, "", "");
        int r = run_sbuf(n, &b);
        sbuf_done(&b);
        return r;
}

int nft_port_remove(struct nft *n, const char *proto, uint16_t host_port)
{
        const char *map = port_map(proto);
        if (!n || !map || host_port == 0)
                return -EINVAL;
        struct sbuf b = {0};
        sb(&b, "delete element inet %s %s { %u }\n", n->table, map, host_port);
        int r = run_sbuf(n, &b);
        sbuf_done(&b);
        return r;
}

unsigned long nft_fast_changes(const struct nft *n)
{
        return n ? n->n_fast : 0;
}

/* Networking of environments (docs/network.md): addresses, the routed veth, the firewall table, the
 * DNS resolver and bandwidth. The engine calls this; it calls lib/netlink, lib/nft and dns. */
#pragma once
#include "daemon/loop.h"
#include "lib/netpolicy.h"

#include <jansson.h>
#include <netinet/in.h>
#include <stdbool.h>

struct network;

struct network_config {
        struct loop *loop;
        const char *root;        /* names host interfaces uniquely per state directory */
        struct in_addr subnet;   /* default 10.77.0.0/16 */
        uint8_t prefix;
        bool ipv6;               /* environments get IPv6 too */
        struct in6_addr subnet6; /* their v6 subnet (ipv6 only); an environment's v6 address is
                                  * subnet6 + the host part of its v4 address */
        uint8_t prefix6;
        const char *table;       /* nftables table, default "paddock" */
        const char *resolv_conf; /* upstream resolvers, default /etc/resolv.conf */
};

/* What the network layer needs to know about environments (implemented by the engine). */
struct network_envs {
        /* The running environment with this address, or NULL; fills its policy. NULL with
         * *pending set: an environment whose network is being set up has it (its queries are
         * left unanswered: the client asks again). */
        const struct netpolicy *(*by_addr)(void *ctx, struct in_addr a, char *name, size_t len,
                                           bool *pending);
        void *ctx;
};

int network_new(const struct network_config *c, const struct network_envs *envs,
                struct network **ret, char *err, size_t errlen);
void network_free(struct network *n);
struct in_addr network_gateway(const struct network *n);
bool network_in_subnet(const struct network *n, struct in_addr a);
/* The IPv6 address that goes with an environment's v4 address; false when there is no IPv6. */
bool network_addr6(const struct network *n, struct in_addr a, struct in6_addr *ret);
/* Host-side interface name of an environment (lib/ifname.h). */
void network_ifname(const struct network *n, const char *env, char out[16]);

/* Whether environments get IPv6 (a v6 subnet): what PID 1's setup prepares (enum spawn_net). */
bool network_has_ipv6(const struct network *n);
/* Bring an environment's network up in two halves, which a caller may run in turns of their
 * own: the link (veth into its netns), then the policy (firewall entries, bandwidth). Until the
 * policy is in, the link (the veth, its end in the environment addressed and routed) reaches
 * nothing but the resolver: the forward chain drops a "pdk*" link without an entry, and only
 * replies and DNATed traffic go to one (nft.c). A failed policy takes the link down too. ipv6_set: the environment's IPv6 settings were made by its PID 1's setup
 * (lib/spawn.h), not to be written again. */
int network_env_link(struct network *n, const char *env, int netns_fd, struct in_addr addr,
                     const struct netpolicy *p, bool ipv6_set, char *err, size_t errlen);
int network_env_policy(struct network *n, const char *env, struct in_addr addr,
                       const struct netpolicy *p, const struct in_addr *links, size_t n_links,
                       char *err, size_t errlen);
/* Change the policy of an environment whose network is up (firewall + bandwidth).
 * flush_learned: the allow list changed, so addresses learned through DNS are forgotten. */
int network_env_update(struct network *n, const char *env, struct in_addr addr,
                       const struct netpolicy *p, const struct in_addr *links, size_t n_links,
                       bool flush_learned, char *err, size_t errlen);
/* Remove host-side pieces (veth if still there, ifb, firewall entries). Idempotent. */
void network_env_down(struct network *n, const char *env);
/* The same for an environment whose processes are all gone (its network namespace is dying):
 * the kernel deletes the veth pair with the namespace, so only the routes to addr go now (the
 * address may be handed out again at once), which saves the daemon's thread the 10-30 ms a
 * link deletion waits. A link still there later (something kept the namespace alive) has no
 * firewall entry (its traffic is dropped) and goes at the next start of the same environment
 * or of the daemon. */
void network_env_gone(struct network *n, const char *env, struct in_addr addr);
/* Packets of env's traffic dropped so far. cached (listings): from one dump of every
 * environment's counter, at most a second old; otherwise read now (one netlink get). */
uint64_t network_env_denied(struct network *n, const char *env, bool cached);

int network_port_add(struct network *n, const char *env, const char *proto, uint16_t host_port,
                     struct in_addr addr, uint16_t port);
int network_port_remove(struct network *n, const char *proto, uint16_t host_port);

bool network_link_present(struct network *n, const char *env);

/* Between these, firewall changes of environments and published ports are queued and then made
 * many at a time (daemon start re-applying all: one at a time would cost O(n^2)). A queued
 * change that fails is logged at the end, not reported to its caller. */
void network_batch_begin(struct network *n);
void network_batch_end(struct network *n);

/* Startup: remove host interfaces and firewall entries of environments not in keep[]. */
void network_remove_orphans(struct network *n, const char *const *keep, size_t n_keep);

/* The environments' DNS resolver (docs/network.md): the only DNS server an environment can reach,
 * at the gateway address, port 53, UDP and TCP, on the daemon's event loop.
 *
 * For each query the policy decides, by source address and name:
 *   DNS_REFUSE         REFUSED (unknown source: not an environment's address).
 *   DNS_IGNORE         no answer at all (an environment whose firewall is not in yet, for a
 *                      turn of the loop): over UDP its client asks again after its timeout
 *                      (glibc's: 5 s); a TCP connection is closed.
 *   DNS_NXDOMAIN       NXDOMAIN, no records, nothing sent upstream. NXDOMAIN rather than
 *                      REFUSED because that is what programs expect of a name that "does not
 *                      exist": resolvers give up at once instead of trying the next server or
 *                      search domain, and error messages read "unknown host".
 *   DNS_FORWARD        forwarded upstream, answer relayed unchanged ("open" mode).
 *   DNS_FORWARD_LEARN  "allow" mode, name on the list: forwarded, and every A and AAAA
 *                      record of the answer section (whatever its owner: the end of a CNAME
 *                      chain) is reported through learned() BEFORE the answer is sent, so the
 *                      address is in the environment's nft allow set when the client sees it.
 *                      Only NOERROR answers are learned; at most DNS_LEARN_MAX records each.
 *                      Answers are relayed unchanged: a forbidden address (private, metadata,
 *                      ULA...) is learned like any other and stays blocked by the firewall,
 *                      which drops forbidden destinations before it looks at learned ones.
 * Classes other than IN and zone transfers (AXFR/IXFR) are REFUSED whatever the policy.
 * Malformed queries get a header-only FORMERR (NOTIMP for other opcodes); responses are never
 * answered.
 *
 * Upstreams are the "nameserver" lines of a resolv.conf (IPv4 and IPv6; loopback ones too: the
 * daemon runs in the host network namespace), re-read when the file changes (checked at most
 * every few seconds), 127.0.0.1 when it names none (as glibc does). Each attempt uses a new
 * UDP socket connect()ed to the upstream (a fresh kernel-chosen random source port; the kernel
 * drops datagrams from any other address) and a fresh getrandom() query id; the answer must
 * carry that id, QR and the same question (case-insensitive), and is relayed with the client's
 * id. An attempt that times out (DNS_UPSTREAM_TIMEOUT_MS), is refused (ICMP), or answers
 * SERVFAIL/REFUSED/NOTIMP/FORMERR moves on to the next upstream; after the last one the client
 * gets SERVFAIL (or that last error answer).
 *
 * EDNS: a client's OPT record is not forwarded as is: the upstream query carries our own OPT
 * (no options, the client's DO bit, payload size min(client's, 1232)) when the client had one,
 * none otherwise, so the upstream answer fits what the client can take. If it still does not
 * (an upstream ignoring the size), a UDP client gets an empty TC=1 reply and retries over TCP.
 * TCP clients are forwarded over UDP too; a truncated upstream answer is relayed as is.
 *
 * Limits: DNS_MAX_PENDING queries in flight (DNS_MAX_PENDING_PER_SOURCE per source address;
 * excess: SERVFAIL), each holding one socket; DNS_MAX_TCP connections (excess closed at
 * once), one query at a time each, DNS_TCP_TIMEOUT_MS to send a whole query or to take the
 * reply; queries over DNS_QUERY_MAX bytes are dropped. So the daemon needs RLIMIT_NOFILE above
 * DNS_MAX_PENDING + DNS_MAX_TCP + its other fds. Memory: about 0.7 KiB per query in flight,
 * 4.2 KiB per TCP connection (+ the reply being written), 65 KiB for the resolver itself.
 *
 * What the policy must know: the source address is what the packet says. Environments must
 * not be able to spoof another's address (rp_filter / nft rule on each veth); the resolver
 * trusts it. */
#pragma once
#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon/loop.h"
#include "lib/dnsmsg.h"
#include "lib/paddock.h"

#define DNS_MAX_PENDING            1024
#define DNS_MAX_PENDING_PER_SOURCE 256
#define DNS_MAX_TCP                64
#define DNS_TCP_TIMEOUT_MS         10000
#define DNS_UPSTREAM_TIMEOUT_MS    2000
#define DNS_MAX_UPSTREAMS          8
#define DNS_QUERY_MAX              4096
#define DNS_LEARN_MAX              128
#define DNS_ENV_NAME_MAX           NAME_BUF_SIZE /* holds a name with its NUL */

enum dns_verdict { DNS_REFUSE, DNS_NXDOMAIN, DNS_FORWARD, DNS_FORWARD_LEARN, DNS_IGNORE };

struct dns_policy {
        /* Decide for a query from src for qname (lower-case, no trailing dot, only
         * [a-z0-9_-] and dots; "" is the root) of type qtype. For DNS_FORWARD_LEARN, fill env
         * (a NUL-terminated environment name, env_len = DNS_ENV_NAME_MAX) and *port (0 = any)
         * to be passed back to learned(). dns_name_match() (lib/dnsmsg.h) implements the
         * "host" / "*.domain" matching. Called once per query, on the loop. */
        enum dns_verdict (*decide)(void *ctx, struct in_addr src, const char *qname, uint16_t qtype,
                                   char *env, size_t env_len, uint16_t *port);
        /* An A or AAAA record (rec->family) of an answer to a DNS_FORWARD_LEARN query: add
         * its address (port) to env's allow set for ttl seconds, synchronously: the answer is
         * sent when this returns.
         * ttl is the record's TTL (RFC 2181: top bit set reads as 0) raised to at least 1
         * (an nft element with timeout 0 would never expire); a floor long enough for
         * programs that cache past the TTL is the receiver's choice. May be NULL. */
        void (*learned)(void *ctx, const char *env, const struct dns_a *rec, uint16_t port,
                        uint32_t ttl);
};

struct dns_resolver;

/* Listen on listen_addr:listen_port, UDP and TCP, with IP_FREEBIND (the gateway address may
 * not be on any interface until the first environment's link is up). resolv_conf is read now
 * (an unreadable file is an error) and again when it changes. p and ctx must outlive the
 * resolver. Returns 0 or -errno. */
int dns_resolver_start(struct loop *l, struct in_addr listen_addr, uint16_t listen_port,
                       const char *resolv_conf, const struct dns_policy *p, void *ctx,
                       struct dns_resolver **ret);
/* Close everything; queries in flight are dropped unanswered. NULL is fine. */
void dns_resolver_stop(struct dns_resolver *r);

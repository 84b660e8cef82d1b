/* The daemon's side of the network gateway (privilege separation).
 *
 * `paddockd --listen ADDR:PORT` does not put TLS or a network-facing HTTP parser into the root
 * process. The daemon binds the listening sockets as root and hands them, with the
 * certificate and key as open fds, to `paddock-gateway` (src/gateway), which it forks and
 * execs as an unprivileged uid with no capabilities (not even in the bounding set),
 * no_new_privs, a new session and nothing else open. The gateway terminates TLS, parses each
 * request's head, checks tokens and rate limits as a first filter, and passes each client
 * connection to the engine as the engine's end of a socketpair, over one SOCK_SEQPACKET
 * control socket:
 *
 *   gateway -> engine   {"op":"connect","peer":"IP:PORT"} + SCM_RIGHTS (one stream socket)
 *   engine -> gateway   {"op":"tokens","tokens":[...]}    the whole token table
 *
 * The engine serves HTTP on those sockets with a second http_server (.gateway = true, no
 * listen socket), where every request must carry a token the engine verifies again: the
 * gateway is trusted to say who the network peer is (Paddock-Peer), never who the caller is.
 *
 * This file: parsing and binding the listen addresses, choosing the gateway's uid, spawning and
 * supervising the gateway (restarted with a backoff when it dies; supervise.c holds its
 * pidfd), and the engine's end of the control socket. */
#pragma once
#include "daemon/http.h"
#include "daemon/loop.h"

#include <jansson.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

/* The gateway's uid and gid when there is no --gateway-user and no system user
 * `paddock-gateway`: above every environment's id range (userns.h: UID_RANGE_FIRST +
 * UID_RANGE_SLOTS * UID_RANGE_SIZE = 1049624576) and below 2^31 (ids that tools mistake for
 * negative numbers), so no environment's uid can ever map onto it. */
#define GATEWAY_FALLBACK_ID 2147483632u /* 0x7ffffff0 */

#define GATEWAY_MAX_LISTEN 16

struct gateway_listen {
        char text[INET6_ADDRSTRLEN + 10]; /* "ADDR:PORT" or "[ADDR]:PORT", as a client writes it */
        char ip[INET6_ADDRSTRLEN];
        struct sockaddr_storage sa;
        socklen_t sa_len;
        bool tls; /* false: --listen-plain (loopback only) */
        int fd;   /* bound and listening (gateway_bind), else -EBADF */
};

/* "A.B.C.D:PORT" or "[IPV6]:PORT", nothing else (no names, no zone ids, port 1..65535). A
 * plain listener (tls false) must be a loopback address. err gets a message for the user. */
int gateway_parse_listen(const char *s, bool tls, struct gateway_listen *ret, char *err,
                         size_t errlen);
/* Bind and listen (SO_REUSEADDR; IPV6_V6ONLY for IPv6): sets l->fd. */
int gateway_bind(struct gateway_listen *l);

/* The gateway's ids: spec (a user name or a numeric uid), else the system user
 * `paddock-gateway`, else GATEWAY_FALLBACK_ID. Never root. */
int gateway_resolve_user(const char *spec, uid_t *ret_uid, gid_t *ret_gid, char *err,
                         size_t errlen);

struct gateway_config {
        struct loop *loop;
        struct http_server *http; /* .gateway = true, listen_fd -1: gets the connections */
        int exe_fd;               /* paddock-gateway, opened by the caller (stays the caller's) */
        uid_t uid;
        gid_t gid;
        const struct gateway_listen *listen; /* copied; the fds stay the caller's */
        size_t n_listen;
        const char *cert_path, *key_path; /* opened anew for every start of the gateway */
        const char *fingerprint;          /* "sha256:..." for GET /v1/system */
        /* Preview URLs (ingress.h): called with each {"op":"ingress",...} request of the
         * gateway started as epoch; must lead to one gateway_ingress_answer. NULL: refused. */
        void (*ingress)(void *ctx, unsigned epoch, json_t *msg);
        void *ingress_ctx;
};

struct gateway;

/* Spawn the gateway and supervise it. */
int gateway_start(const struct gateway_config *cfg, struct gateway **ret);
/* Close the control socket (the gateway exits at its EOF), reap it (SIGKILL after 2 s). */
void gateway_stop(struct gateway *g);

/* The token table the gateway filters with (the engine re-verifies every request anyway). */
struct gateway_token {
        char name[64];
        char hash_hex[65]; /* SHA-256 of the whole secret, lowercase hex */
        bool admin;
        double rate;        /* requests per second, 0 = unlimited */
        int64_t expires_at; /* unix seconds, 0 = never */
};
/* Replace the table: sent now and again after every restart of the gateway. */
void gateway_set_tokens(struct gateway *g, const struct gateway_token *t, size_t n);

/* --domain: the DNS name under which PORT-NAME.DOMAIN reaches an environment's port through
 * the listener (preview URLs). -EINVAL for a name that is not a DNS name. */
int gateway_set_domain(const char *domain);
/* The domain, or NULL when none was given. */
const char *gateway_domain(void);

/* The answer to an ingress request: status 0 with fd (the connected socket, sent, the caller
 * keeps and closes its copy), or an HTTP status with an error code and message. Dropped when
 * the gateway that asked (epoch) is gone. */
void gateway_ingress_answer(unsigned epoch, uint64_t id, int status, const char *code,
                            const char *message, int fd);

/* The "gateway" object of GET /v1/system: {"listen":[...],"listen_plain":[...],
 * "tls_fingerprint":"sha256:...","domain":"DOMAIN"|null}, or JSON null without --listen. */
json_t *gateway_system_json(void);

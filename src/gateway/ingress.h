/* Preview URLs in the gateway (docs/network.md "Preview URLs"): a request whose Host is
 * PORT-NAME.DOMAIN goes to TCP port PORT of environment NAME instead of the API.
 *
 * The gateway never connects anywhere itself (Landlock and seccomp forbid it): it asks the
 * engine over the control socket and the engine, after its checks, connects and passes the
 * connected socket back:
 *
 *   gateway -> engine  {"op":"ingress","id":N,"env":NAME,"port":P,"peer":"IP:PORT",
 *                       "secret":"pdk_...","traffic_token":"..."}   (the last two optional)
 *   engine -> gateway  {"op":"ingress","id":N,"status":0} + SCM_RIGHTS (the connected socket)
 *                  or  {"op":"ingress","id":N,"status":502,"code":"...","message":"..."}
 *
 * Then the request head goes to the environment (ingress_emit_head) and the bytes are relayed
 * like an engine connection's, upgrades (WebSockets) included. This file holds the pure parts:
 * matching the Host, finding the credentials, writing the head. loop.c holds the state. */
#pragma once
#include "gateway/reqparse.h"

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define INGRESS_NAME_MAX 63
#define INGRESS_TOKEN_MAX 256 /* the longest e2b-traffic-access-token passed on */

struct ingress_target {
        char env[INGRESS_NAME_MAX + 1]; /* lowercase, as the Host spells it */
        unsigned port;                  /* 1..65535 */
};

/* True when h's Host is PORT-NAME.DOMAIN (case-insensitive, an optional :PORT after it):
 * PORT a decimal 1..65535 without leading zeros, NAME letters, digits, '-' and '_' (no dot),
 * DOMAIN the lowercase domain given. Anything else is for the API. */
bool ingress_match(const struct rp_head *h, const char *domain, struct ingress_target *ret);

/* E2B's SDK without E2B_SANDBOX_URL sends envd's calls to 49983-ID.DOMAIN with E2b-Sandbox-Id:
 * those are the API's (the engine's envd), not a preview of port 49983. */
#define INGRESS_ENVD_PORT 49983
bool ingress_is_envd(const struct rp_head *h, const struct ingress_target *t);

/* The Paddock token of a preview request: `Authorization: Bearer pdk_...` or the cookie
 * paddock_token=pdk_... (a Bearer credential of another form is the application's own). */
bool ingress_secret(const struct rp_head *h, const char **ret, size_t *ret_len);

/* A browser's way in: `?paddock_token=pdk_...` in the target. Sets the secret and writes to
 * loc the target without that parameter (for a redirect that turns it into a cookie). False
 * when there is none, or loc (cap bytes) is too small. */
bool ingress_query_secret(const struct rp_head *h, const char **ret, size_t *ret_len, char *loc,
                          size_t cap);

/* The value of the e2b-traffic-access-token field, if any (at most INGRESS_TOKEN_MAX bytes). */
bool ingress_traffic_token(const struct rp_head *h, const char **ret, size_t *ret_len);

/* The head as the environment receives it: the request line as parsed; every field except
 * hop-by-hop ones, Paddock-Peer, X-Forwarded-For/-Proto, e2b-traffic-access-token, an
 * Authorization: Bearer pdk_... and the paddock_token cookie (Paddock's credentials never reach an
 * environment); then our framing, "Connection: close" when the client's request is its last, or
 * the Upgrade, and X-Forwarded-For: IP, X-Forwarded-Proto: https|http.
 * Returns the length, or -ENOSPC when cap is too small (RP_EMIT_MAX(head_len) is enough). */
ssize_t ingress_emit_head(const struct rp_head *h, const char *ip, bool tls, char *out, size_t cap);

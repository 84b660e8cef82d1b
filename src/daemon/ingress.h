/* Preview URLs, the engine's side (docs/network.md "Preview URLs"): the network gateway asks
 * for a connection to PORT of environment NAME for a request whose Host is PORT-NAME.DOMAIN
 * (src/gateway/ingress.h has the protocol); the engine checks the caller and the environment,
 * connects to the environment's address on its bridge and hands the connected socket back.
 * The gateway itself can connect nowhere.
 *
 * Who may: a Paddock token (Bearer or the paddock_token cookie) that may see the environment;
 * anyone, when the environment's ingress policy says public; or whoever sends the
 * environment's traffic access token (header e2b-traffic-access-token). Without a policy an
 * environment is not public and has no traffic token. */
#pragma once
#include <jansson.h>
#include <stdbool.h>

struct engine;

/* The E2B control plane's hook (network.allowPublicTraffic): public true lets anyone reach the
 * environment's ports through preview URLs; token_hash (the lowercase hex SHA-256 of a traffic
 * access token, or NULL) lets whoever sends that token in e2b-traffic-access-token. Kept with
 * the environment (its directory: gone with it; not copied by a fork) and read at every
 * preview request. -ENOENT for an unknown environment, -EINVAL for a malformed hash. */
int ingress_set_policy(struct engine *e, const char *env, bool public, const char *token_hash);

/* gateway_config.ingress: one {"op":"ingress",...} request of the gateway started as `epoch`
 * (gateway.h). ctx is the engine. Always answered (gateway_ingress_answer), within
 * INGRESS_CONNECT_MS. */
#define INGRESS_CONNECT_MS 5000
void ingress_request(void *ctx, unsigned epoch, json_t *msg);

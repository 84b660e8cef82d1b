/* API tokens: the table of the daemon's tokens, kept in memory over the state database and
 * found by secret through an index of their hashes (no SQL per request), plus the sessions
 * (streams, WebSockets, waiting requests) each token has open, which end when the token is
 * revoked or expires.
 *
 * Limits are 0 for "none". A token_row pointer handed out is valid until the next change of
 * the table (create, remove): use it at once, keep the name. */
#pragma once
#include "daemon/loop.h"
#include "lib/secret.h"
#include "lib/state.h"

#include <jansson.h>

struct tokens;
struct token_session;

int tokens_open(struct state *s, struct loop *l, struct tokens **ret);
void tokens_free(struct tokens *t);

/* Record row (name, admin, limits, rate, expires_at; created_at and hash are filled in) with a
 * new secret, returned in ret_secret: the only time it exists outside the client.
 * -EEXIST if the name is taken. */
int tokens_create(struct tokens *t, struct token_row *row, char ret_secret[static SECRET_LEN + 1]);
/* Revoke: delete the record and end the token's open sessions. -ENOENT if there is none. */
int tokens_remove(struct tokens *t, const char *name);
/* The token whose secret this is, if it has not expired; else NULL. The secret is hashed and
 * its hash compared in constant time. */
const struct token_row *tokens_find_secret(struct tokens *t, const char *secret);
const struct token_row *tokens_find(struct tokens *t, const char *name);
/* Iterate in name order: pass NULL for the first. */
const struct token_row *tokens_next(struct tokens *t, const struct token_row *prev);
bool token_expired(const struct token_row *row, int64_t now);

/* The table as the network gateway wants it: {"op":"tokens","tokens":[{"name","hash","admin",
 * "rate","expires_at"},...]} (expires_at unix seconds, 0 = never). NULL when out of memory. */
json_t *tokens_gateway_json(struct tokens *t);

/* fn(data) runs after every change of the table: a token made or revoked, or one expired (the
 * network gateway gets the whole table again then). */
void tokens_set_changed_hook(struct tokens *t, void (*fn)(void *data), void *data);

/* Something of token name that must end with it: end(data) runs once if the token is revoked
 * or expires while the session is registered. The owner removes (frees) the session when it
 * is over, also after end ran. */
struct token_session *tokens_session_add(struct tokens *t, const char *name,
                                         void (*end)(void *data), void *data);
void tokens_session_remove(struct tokens *t, struct token_session *s);

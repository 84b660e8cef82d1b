/* The gateway's copy of the engine's token table: SHA-256 of each secret, expiry, rate.
 * The gateway's check is a first filter (the engine verifies every token again); it exists
 * so that unauthenticated traffic and over-rate clients never reach the privileged process. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TOKEN_HASH_LEN 32

struct gw_token {
        char name[64];
        uint8_t hash[TOKEN_HASH_LEN];
        int64_t expires_at; /* unix s, 0 = never */
        double rate;        /* requests per second, 0 = unlimited */
        double bucket;      /* requests available now (token bucket, burst max(1, rate)) */
        uint64_t bucket_ms; /* when bucket was last refilled */
};

struct gw_tokens {
        struct gw_token *v;
        size_t n;
};

/* Replaces the table with the one in an engine {"op":"tokens","tokens":[...]} message.
 * Buckets of tokens that keep their name and hash carry over. -EINVAL on a malformed message
 * (the old table stays). */
int tokens_load(struct gw_tokens *t, const char *json, size_t len, uint64_t now_ms);
void tokens_free(struct gw_tokens *t);

/* SHA-256 of the secret, compared in constant time with every entry; NULL when no entry
 * matches or the match has expired at now_s. */
struct gw_token *tokens_find(struct gw_tokens *t, const char *secret, size_t len, int64_t now_s);

/* True when a token with this name and hash is still in the table and not expired. */
bool tokens_valid(const struct gw_tokens *t, const char *name, const uint8_t hash[TOKEN_HASH_LEN],
                  int64_t now_s);

/* Takes one request from the token's bucket: 0, or -EAGAIN with the whole seconds (>= 1)
 * until one is available in *ret_retry_s. */
int tokens_take(struct gw_token *tok, uint64_t now_ms, unsigned *ret_retry_s);

/* The earliest expires_at after now_s among the entries, 0 if none expires. */
int64_t tokens_next_expiry(const struct gw_tokens *t, int64_t now_s);

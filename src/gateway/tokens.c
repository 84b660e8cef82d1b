/* Token table, lookup and rate limiting (tokens.h). */
#include "gateway/tokens.h"
#include "lib/jsonutil.h"
#include "lib/util.h"

#include <gnutls/crypto.h>
#include <math.h>

static int unhex(char c)
{
        return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
               : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                      : -1;
}

static int parse_hash(const char *s, uint8_t out[TOKEN_HASH_LEN])
{
        if (!s || strlen(s) != 2 * TOKEN_HASH_LEN)
                return -EINVAL;
        for (size_t i = 0; i < TOKEN_HASH_LEN; i++) {
                int hi = unhex(s[2 * i]), lo = unhex(s[2 * i + 1]);
                if (hi < 0 || lo < 0)
                        return -EINVAL;
                out[i] = (uint8_t)(hi << 4 | lo);
        }
        return 0;
}

static bool equal_ct(const uint8_t *a, const uint8_t *b, size_t n)
{
        uint8_t d = 0;
        for (size_t i = 0; i < n; i++)
                d |= a[i] ^ b[i];
        return d == 0;
}

static double burst(double rate)
{
        return rate < 1 ? 1 : rate;
}

int tokens_load(struct gw_tokens *t, const char *json, size_t len, uint64_t now_ms)
{
        _cleanup_json_ json_t *msg = json_loadb(json, len, 0, NULL);
        json_t *arr = msg ? json_object_get(msg, "tokens") : NULL;
        if (!json_is_array(arr))
                return -EINVAL;
        size_t n = json_array_size(arr);
        _cleanup_free_ struct gw_token *v = calloc(n ? n : 1, sizeof(*v));
        if (!v)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                json_t *e = json_array_get(arr, i);
                const char *name = json_string_value(json_object_get(e, "name"));
                json_t *rate = json_object_get(e, "rate"), *exp = json_object_get(e, "expires_at");
                if (!name || strlen(name) >= sizeof(v[i].name) ||
                    parse_hash(json_string_value(json_object_get(e, "hash")), v[i].hash) < 0 ||
                    (rate && !json_is_number(rate)) || (exp && !json_is_integer(exp)))
                        return -EINVAL;
                snprintf(v[i].name, sizeof(v[i].name), "%s", name);
                v[i].rate = rate ? json_number_value(rate) : 0;
                if (!(v[i].rate >= 0) || !isfinite(v[i].rate))
                        return -EINVAL;
                v[i].expires_at = exp ? json_integer_value(exp) : 0;
                v[i].bucket = burst(v[i].rate);
                v[i].bucket_ms = now_ms;
                for (size_t k = 0; k < t->n; k++) {
                        const struct gw_token *o = &t->v[k];
                        if (strcmp(o->name, v[i].name) == 0 &&
                            memcmp(o->hash, v[i].hash, TOKEN_HASH_LEN) == 0) {
                                v[i].bucket = fmin(o->bucket, burst(v[i].rate));
                                v[i].bucket_ms = o->bucket_ms;
                        }
                }
        }
        free(t->v);
        t->v = TAKE_PTR(v);
        t->n = n;
        return 0;
}

void tokens_free(struct gw_tokens *t)
{
        free(t->v);
        t->v = NULL;
        t->n = 0;
}

static bool expired(const struct gw_token *tok, int64_t now_s)
{
        return tok->expires_at > 0 && tok->expires_at <= now_s;
}

struct gw_token *tokens_find(struct gw_tokens *t, const char *secret, size_t len, int64_t now_s)
{
        uint8_t h[TOKEN_HASH_LEN];
        if (gnutls_hash_fast(GNUTLS_DIG_SHA256, secret, len, h) < 0)
                return NULL;
        /* No early exit: the time taken does not depend on which entry matched. */
        struct gw_token *found = NULL;
        for (size_t i = 0; i < t->n; i++)
                if (equal_ct(h, t->v[i].hash, TOKEN_HASH_LEN))
                        found = &t->v[i];
        return found && !expired(found, now_s) ? found : NULL;
}

bool tokens_valid(const struct gw_tokens *t, const char *name, const uint8_t hash[TOKEN_HASH_LEN],
                  int64_t now_s)
{
        for (size_t i = 0; i < t->n; i++)
                if (strcmp(t->v[i].name, name) == 0 &&
                    memcmp(t->v[i].hash, hash, TOKEN_HASH_LEN) == 0)
                        return !expired(&t->v[i], now_s);
        return false;
}

int tokens_take(struct gw_token *tok, uint64_t now_ms, unsigned *ret_retry_s)
{
        if (tok->rate <= 0)
                return 0;
        if (now_ms > tok->bucket_ms) {
                tok->bucket = fmin(burst(tok->rate),
                                   tok->bucket + (double)(now_ms - tok->bucket_ms) / 1000.0 * tok->rate);
                tok->bucket_ms = now_ms;
        }
        if (tok->bucket >= 1) {
                tok->bucket -= 1;
                return 0;
        }
        double wait = ceil((1 - tok->bucket) / tok->rate);
        *ret_retry_s = wait < 1 ? 1 : wait > 86400 ? 86400 : (unsigned)wait;
        return -EAGAIN;
}

int64_t tokens_next_expiry(const struct gw_tokens *t, int64_t now_s)
{
        int64_t next = 0;
        for (size_t i = 0; i < t->n; i++) {
                int64_t e = t->v[i].expires_at;
                if (e > now_s && (next == 0 || e < next))
                        next = e;
        }
        return next;
}

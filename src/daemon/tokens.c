/* The token table. Tokens are few and change rarely; requests are many. So the table is a
 * sorted array rebuilt on every change, and an open-addressing index over the hashes (its
 * slot from the hash's first hex digits, which SHA-256 spreads evenly) finds a secret's token
 * in one hash and one or two constant-time comparisons. */
#include "daemon/tokens.h"
#include "daemon/log.h"
#include "lib/util.h"

#include <ctype.h>

struct token_session {
        struct token_session *next, *prev;
        char name[NAME_BUF_SIZE];
        void (*end)(void *data);
        void *data;
        bool ended;
};

struct tokens {
        struct state *state;
        struct loop *loop;
        struct token_row *rows; /* sorted by name */
        size_t n;
        size_t *index;  /* n_index slots of row number + 1; 0 = empty */
        size_t n_index; /* a power of two, at least twice n */
        struct loop_timer *expiry;
        struct loop_timer *sweep; /* ends the sessions of a revoked token */
        struct token_session *sessions;
        void (*changed)(void *data);
        void *changed_data;
};

bool token_expired(const struct token_row *row, int64_t now)
{
        return row->expires_at != 0 && row->expires_at <= now;
}

static size_t hash_slot(const char *hex, size_t n_index)
{
        uint64_t h = 0;
        for (size_t i = 0; i < 16 && hex[i]; i++)
                h = h << 4 |
                    (uint64_t)(isdigit((unsigned char)hex[i]) ? hex[i] - '0' : hex[i] - 'a' + 10);
        return (size_t)h & (n_index - 1);
}

static int index_build(struct tokens *t)
{
        size_t want = 16;
        while (want < 2 * t->n)
                want *= 2;
        size_t *idx = calloc(want, sizeof(*idx));
        if (!idx)
                return -ENOMEM;
        for (size_t i = 0; i < t->n; i++) {
                size_t s = hash_slot(t->rows[i].hash, want);
                while (idx[s])
                        s = (s + 1) & (want - 1);
                idx[s] = i + 1;
        }
        free(t->index);
        t->index = idx;
        t->n_index = want;
        return 0;
}

/* End the sessions of every token that is gone or expired. end() may remove sessions (or add
 * some): start over after each one. */
static void end_sessions(struct tokens *t)
{
        int64_t now = wall_s();
        for (bool again = true; again;) {
                again = false;
                for (struct token_session *s = t->sessions; s; s = s->next) {
                        if (s->ended)
                                continue;
                        const struct token_row *row = tokens_find(t, s->name);
                        if (row && !token_expired(row, now))
                                continue;
                        s->ended = true;
                        s->end(s->data);
                        again = true;
                        break;
                }
        }
}

/* Revocation answers its own request first; the sessions end right after, from the loop
 * (not from inside the HTTP server's handler of another connection). */
static void on_sweep(struct loop_timer *timer, void *data)
{
        struct tokens *t = data;
        t->sweep = NULL;
        end_sessions(t);
}

static void on_expiry(struct loop_timer *timer, void *data);

/* The timer at the next expiry still ahead. */
static void expiry_arm(struct tokens *t)
{
        loop_cancel_timer(t->expiry);
        t->expiry = NULL;
        int64_t now = wall_s(), next = 0;
        for (size_t i = 0; i < t->n; i++) {
                int64_t x = t->rows[i].expires_at;
                if (x > now && (!next || x < next))
                        next = x;
        }
        if (next && t->loop)
                t->expiry = loop_add_timer(t->loop, (uint64_t)(next - now) * 1000, on_expiry, t);
}

static void changed(struct tokens *t)
{
        if (t->changed)
                t->changed(t->changed_data);
}

static void on_expiry(struct loop_timer *timer, void *data)
{
        struct tokens *t = data;
        t->expiry = NULL;
        int64_t now = wall_s();
        size_t k = 0;
        for (size_t i = 0; i < t->n; i++)
                if (token_expired(&t->rows[i], now) && t->rows[i].expires_at > now - 5) {
                        log_info("token %s expired: ending its sessions", t->rows[i].name);
                        k++;
                }
        end_sessions(t);
        expiry_arm(t);
        if (k)
                changed(t);
}

int tokens_open(struct state *s, struct loop *l, struct tokens **ret)
{
        struct tokens *t = calloc(1, sizeof(*t));
        if (!t)
                return -ENOMEM;
        t->state = s;
        t->loop = l;
        int r = state_token_list(s, &t->rows, &t->n);
        if (r >= 0)
                r = index_build(t);
        if (r < 0) {
                tokens_free(t);
                return r;
        }
        expiry_arm(t);
        *ret = t;
        return 0;
}

void tokens_free(struct tokens *t)
{
        if (!t)
                return;
        loop_cancel_timer(t->expiry);
        loop_cancel_timer(t->sweep);
        while (t->sessions) {
                struct token_session *s = t->sessions;
                t->sessions = s->next;
                free(s);
        }
        free(t->rows);
        free(t->index);
        free(t);
}

/* Reload rows from the database: the one truth, also after a failed change. */
static int reload(struct tokens *t)
{
        struct token_row *rows = NULL;
        size_t n = 0;
        int r = state_token_list(t->state, &rows, &n);
        if (r < 0)
                return r;
        free(t->rows);
        t->rows = rows;
        t->n = n;
        r = index_build(t);
        expiry_arm(t);
        return r;
}

int tokens_create(struct tokens *t, struct token_row *row, char ret_secret[static SECRET_LEN + 1])
{
        if (tokens_find(t, row->name))
                return -EEXIST;
        char secret[SECRET_LEN + 1];
        int r = secret_new(secret);
        if (r < 0)
                return r;
        secret_hash_hex(secret, strlen(secret), row->hash);
        row->created_at = wall_s();
        r = state_token_insert(t->state, row);
        if (r >= 0)
                r = reload(t);
        if (r < 0) {
                explicit_bzero(secret, sizeof(secret));
                return r;
        }
        memcpy(ret_secret, secret, sizeof(secret));
        explicit_bzero(secret, sizeof(secret));
        log_info("token %s created%s", row->name, row->admin ? " (admin)" : "");
        changed(t);
        return 0;
}

int tokens_remove(struct tokens *t, const char *name)
{
        int r = state_token_delete(t->state, name);
        if (r < 0)
                return r;
        r = reload(t);
        if (r < 0)
                log_error("tokens: reloading after revoking %s: %s", name, strerror(-r));
        log_info("token %s revoked: ending its sessions", name);
        if (t->loop && !t->sweep)
                t->sweep = loop_add_timer(t->loop, 0, on_sweep, t);
        if (!t->loop || !t->sweep)
                end_sessions(t);
        changed(t);
        return 0;
}

const struct token_row *tokens_find_secret(struct tokens *t, const char *secret)
{
        char hash[SECRET_HASH_HEX + 1];
        secret_hash_hex(secret, strlen(secret), hash);
        const struct token_row *hit = NULL;
        for (size_t s = hash_slot(hash, t->n_index); t->index[s]; s = (s + 1) & (t->n_index - 1)) {
                const struct token_row *row = &t->rows[t->index[s] - 1];
                if (secret_hash_equal(row->hash, hash)) {
                        hit = row;
                        break;
                }
        }
        return hit && !token_expired(hit, wall_s()) ? hit : NULL;
}

const struct token_row *tokens_find(struct tokens *t, const char *name)
{
        size_t lo = 0, hi = t->n;
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                int c = strcmp(t->rows[mid].name, name);
                if (!c)
                        return &t->rows[mid];
                if (c < 0)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return NULL;
}

const struct token_row *tokens_next(struct tokens *t, const struct token_row *prev)
{
        size_t i = prev ? (size_t)(prev - t->rows) + 1 : 0;
        return i < t->n ? &t->rows[i] : NULL;
}

json_t *tokens_gateway_json(struct tokens *t)
{
        json_t *arr = json_array();
        for (size_t i = 0; arr && i < t->n; i++) {
                const struct token_row *row = &t->rows[i];
                if (json_array_append_new(arr, json_pack("{s:s,s:s,s:b,s:f,s:I}", "name", row->name,
                                                         "hash", row->hash, "admin", row->admin,
                                                         "rate", row->rate, "expires_at",
                                                         (json_int_t)row->expires_at)) < 0) {
                        json_decref(arr);
                        return NULL;
                }
        }
        return arr ? json_pack("{s:s,s:o}", "op", "tokens", "tokens", arr) : NULL;
}

void tokens_set_changed_hook(struct tokens *t, void (*fn)(void *data), void *data)
{
        t->changed = fn;
        t->changed_data = data;
}

struct token_session *tokens_session_add(struct tokens *t, const char *name,
                                         void (*end)(void *data), void *data)
{
        struct token_session *s = calloc(1, sizeof(*s));
        if (!s)
                return NULL;
        snprintf(s->name, sizeof(s->name), "%s", name);
        s->end = end;
        s->data = data;
        s->next = t->sessions;
        if (s->next)
                s->next->prev = s;
        t->sessions = s;
        return s;
}

void tokens_session_remove(struct tokens *t, struct token_session *s)
{
        if (!s)
                return;
        if (s->next)
                s->next->prev = s->prev;
        if (s->prev)
                s->prev->next = s->next;
        else
                t->sessions = s->next;
        free(s);
}


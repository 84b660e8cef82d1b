/* /v1/tokens (admin only) and what tokens limit: the quotas of an agent's environments.
 *
 *   POST   /v1/tokens          {name, admin?, max_envs?, max_cpus?, max_memory?, max_disk?,
 *                               rate?, expires?}  -> 201 the token and its secret (only here)
 *   GET    /v1/tokens          -> {"tokens":[...]} without secrets or hashes
 *   DELETE /v1/tokens/{name}   revoke: its sessions end at once
 *
 * Quotas are checked and spent in one step of the single-threaded engine: a create or fork
 * inserts the environment before its handler returns, so the next request already counts it
 * and parallel creates can never pass a limit together. */
#include "daemon/api.h"
#include "daemon/events.h"
#include "daemon/log.h"
#include "daemon/tokens.h"
#include "lib/jsonutil.h"
#include "lib/parse.h"
#include "lib/util.h"

#include <math.h>
#include <stdarg.h>

static json_t *time_json(int64_t t)
{
        char buf[RFC3339_SIZE];
        return t ? json_string(format_rfc3339(t, buf)) : json_null();
}

static json_t *max_json(uint64_t v)
{
        return v ? json_integer((json_int_t)v) : json_null();
}

static json_t *token_json(const struct token_row *t)
{
        return json_pack("{s:s,s:b,s:o,s:o,s:o,s:o,s:f,s:o,s:o,s:b}", "name", t->name, "admin",
                         t->admin, "max_envs", max_json(t->max_envs), "max_cpus",
                         t->max_cpus ? json_real((double)t->max_cpus / 1000.0) : json_null(),
                         "max_memory", max_json(t->max_memory), "max_disk", max_json(t->max_disk),
                         "rate", t->rate, "created_at", time_json(t->created_at), "expires_at",
                         time_json(t->expires_at), "expired", token_expired(t, wall_s()));
}

/* Token management is for administrators: the local socket, or a token made --admin. */
bool api_require_admin(struct request *r, const char *what)
{
        struct caller c;
        api_caller(r, &c);
        if (c.admin)
                return true;
        http_reply_error(r, 403, "forbidden", "token %s may not %s (an admin token can)", c.token,
                         what);
        return false;
}

/* "10/s", "10", 10 or 2.5: requests per second; 0 = unlimited. */
static bool parse_rate(struct request *r, json_t *j, double *ret)
{
        double v = -1;
        if (json_is_number(j)) {
                v = json_number_value(j);
        } else if (json_is_string(j)) {
                const char *s = json_string_value(j);
                char *end;
                errno = 0;
                v = strtod(s, &end);
                if (end == s || errno || (strcmp(end, "") && strcmp(end, "/s")))
                        v = -1;
        }
        if (!isfinite(v) || v < 0 || v > 1e6) {
                http_reply_error(r, 400, "invalid_argument",
                                 "rate: requests per second, like 10/s or 0.5 (0 = unlimited)");
                return false;
        }
        *ret = v;
        return true;
}

static void tokens_create_handler(struct request *r, struct engine *e)
{
        static const char *const fields[] = {"name",     "admin",      "max_envs",
                                             "max_cpus", "max_memory", "max_disk",
                                             "rate",     "expires",    NULL};
        _cleanup_json_ json_t *body = req_json_object(r);
        if (!body || !api_known_fields(r, body, fields))
                return;
        struct token_row row = {0};
        json_t *j = json_object_get(body, "name");
        if (!json_is_string(j) || !name_is_valid(json_string_value(j))) {
                http_reply_error(r, 400, "invalid_argument",
                                 "name: required; 1-%d letters, digits, '-', '_' or '.', "
                                 "starting with a letter or digit",
                                 NAME_LEN_MAX);
                return;
        }
        snprintf(row.name, sizeof(row.name), "%s", json_string_value(j));
        if ((j = json_object_get(body, "admin")) && !json_is_null(j)) {
                if (!json_is_boolean(j)) {
                        http_reply_error(r, 400, "invalid_argument",
                                         "admin: must be true or false");
                        return;
                }
                row.admin = json_is_true(j);
        }
        if ((j = json_object_get(body, "max_envs")) && !json_is_null(j) &&
            !api_count(r, j, "max_envs", 0, MAX_ENVS, &row.max_envs))
                return;
        if ((j = json_object_get(body, "max_cpus")) && !json_is_null(j) &&
            !api_cpus(r, j, "max_cpus", &row.max_cpus))
                return;
        if ((j = json_object_get(body, "max_memory")) && !json_is_null(j) &&
            !api_size(r, j, "max_memory", &row.max_memory))
                return;
        if ((j = json_object_get(body, "max_disk")) && !json_is_null(j) &&
            !api_size(r, j, "max_disk", &row.max_disk))
                return;
        if ((j = json_object_get(body, "rate")) && !json_is_null(j) && !parse_rate(r, j, &row.rate))
                return;
        uint64_t expires = 0;
        if ((j = json_object_get(body, "expires")) && !json_is_null(j)) {
                if (!api_duration(r, j, "expires", &expires))
                        return;
                if (expires == 0 || expires > 100ull * 365 * 86400) {
                        http_reply_error(r, 400, "invalid_argument",
                                         "expires: from 1s to 100 years (leave it out: never)");
                        return;
                }
                row.expires_at = wall_s() + (int64_t)expires;
        }
        char secret[SECRET_LEN + 1];
        int rc = tokens_create(engine_tokens(e), &row, secret);
        if (rc == -EEXIST) {
                http_reply_error(r, 409, "conflict", "a token named %s already exists", row.name);
                return;
        }
        if (rc < 0) {
                http_reply_errno(r, rc, "creating token %s: %s", row.name, strerror(-rc));
                return;
        }
        json_t *out = token_json(tokens_find(engine_tokens(e), row.name));
        json_object_set_new(out, "secret", json_string(secret));
        explicit_bzero(secret, sizeof(secret));
        http_reply_json(r, 201, out);
}

void api_tokens(struct request *r, struct engine *e)
{
        if (!api_require_admin(r, "manage tokens"))
                return;
        if (!strcmp(req_method(r), "POST")) {
                tokens_create_handler(r, e);
                return;
        }
        json_t *arr = json_array();
        struct tokens *t = engine_tokens(e);
        for (const struct token_row *row = tokens_next(t, NULL); row; row = tokens_next(t, row))
                json_array_append_new(arr, token_json(row));
        http_reply_json(r, 200, json_pack("{s:o}", "tokens", arr));
}

void api_token_delete(struct request *r, struct engine *e, const char *name)
{
        if (!api_require_admin(r, "manage tokens"))
                return;
        int rc = name_is_valid(name) ? tokens_remove(engine_tokens(e), name) : -ENOENT;
        if (rc == -ENOENT)
                http_reply_error(r, 404, "not_found", "no such token: %s", name);
        else if (rc < 0)
                http_reply_errno(r, rc, "revoking token %s: %s", name, strerror(-rc));
        else
                http_reply_json(r, 200, json_pack("{s:s}", "deleted", name));
}

/* ---------------------------------------------------------------- quotas */

void api_quota_refused(struct request *r, const char *limit, const char *message)
{
        log_info("quota: token %s refused by %s on %s %s", req_actor(r), limit, req_method(r),
                 req_path(r));
        events_quota_refused(req_actor(r), limit, message);
}

static void cpus_text(uint64_t millis, char *buf, size_t len)
{
        snprintf(buf, len, "%g", (double)millis / 1000.0);
}

static void size_text(uint64_t bytes, char *buf, size_t len)
{
        if (bytes && bytes % (1ull << 30) == 0)
                snprintf(buf, len, "%lluG", (unsigned long long)(bytes >> 30));
        else if (bytes && bytes % (1ull << 20) == 0)
                snprintf(buf, len, "%lluM", (unsigned long long)(bytes >> 20));
        else
                snprintf(buf, len, "%llu bytes", (unsigned long long)bytes);
}

static bool refuse(struct request *r, const char *limit, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static bool refuse(struct request *r, const char *limit, const char *fmt, ...)
{
        char msg[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        api_quota_refused(r, limit, msg);
        http_reply_error(r, 403, "quota_exceeded", "%s", msg);
        return false;
}

/* What a token's environments hold: CPUs and memory only while running. */
struct quota_use {
        uint64_t n, cpus, mem, disk;
};

static void quota_count(struct quota_use *u, const struct env *o, bool running)
{
        const struct cgroup_limits *l = env_limits(o);
        u->n++;
        if (running) {
                u->cpus += l->cpu_millis == CG_UNLIMITED ? 0 : l->cpu_millis;
                u->mem += l->memory_bytes == CG_UNLIMITED ? 0 : l->memory_bytes;
        }
        u->disk += env_kind(o) == KIND_COMPUTER ? env_disk_bytes(o) : 0;
}

bool api_quota_ok(struct request *r, struct engine *e, const struct quota_ask *q)
{
        struct caller c;
        api_caller(r, &c);
        const struct token_row *t = c.token[0] ? tokens_find(engine_tokens(e), c.token) : NULL;
        if (!t)
                return true; /* the local administrator has no quotas */
        if (!t->max_envs && !t->max_cpus && !t->max_memory && !t->max_disk)
                return true; /* nothing to count: not even the token's own environments */
        struct quota_use u = {0};
        /* Only the token's own environments (the engine keeps a list per owner). */
        for (struct env *o = engine_next_owned(e, t->name, NULL); o;
             o = engine_next_owned(e, t->name, o))
                if (o != q->env && !strcmp(env_owner(o), t->name))
                        quota_count(&u, o, env_running(o) || env_starting(o));
        /* Creates still starting count as running environments already. */
        for (struct env *o = engine_next_creating(e, NULL); o; o = engine_next_creating(e, o))
                if (!strcmp(env_owner(o), t->name))
                        quota_count(&u, o, true);
        uint64_t n = u.n, cpus = u.cpus, mem = u.mem, disk = u.disk;
        char a[32], b[32], d[32];
        if (q->new_env && t->max_envs && n + 1 > t->max_envs)
                return refuse(r, "max-envs", "token %s: max-envs %llu reached (%llu environments)",
                              t->name, (unsigned long long)t->max_envs, (unsigned long long)n);
        if (q->running && t->max_cpus) {
                cpus_text(t->max_cpus, a, sizeof(a));
                if (q->limits.cpu_millis == CG_UNLIMITED)
                        return refuse(r, "max-cpus",
                                      "token %s has max-cpus %s: set a cpus limit on the "
                                      "environment (--cpus)",
                                      t->name, a);
                if (cpus + q->limits.cpu_millis > t->max_cpus) {
                        cpus_text(cpus, b, sizeof(b));
                        cpus_text(q->limits.cpu_millis, d, sizeof(d));
                        return refuse(r, "max-cpus",
                                      "token %s: max-cpus %s exceeded (%s in use by running "
                                      "environments + %s asked)",
                                      t->name, a, b, d);
                }
        }
        if (q->running && t->max_memory) {
                size_text(t->max_memory, a, sizeof(a));
                if (q->limits.memory_bytes == CG_UNLIMITED)
                        return refuse(r, "max-memory",
                                      "token %s has max-memory %s: set a memory limit on the "
                                      "environment (--memory)",
                                      t->name, a);
                if (mem + q->limits.memory_bytes > t->max_memory) {
                        size_text(mem, b, sizeof(b));
                        size_text(q->limits.memory_bytes, d, sizeof(d));
                        return refuse(r, "max-memory",
                                      "token %s: max-memory %s exceeded (%s in use by running "
                                      "environments + %s asked)",
                                      t->name, a, b, d);
                }
        }
        if (q->computer && t->max_disk) {
                size_text(t->max_disk, a, sizeof(a));
                if (!q->disk)
                        return refuse(r, "max-disk",
                                      "token %s has max-disk %s: set a disk limit on the "
                                      "computer (--disk)",
                                      t->name, a);
                if (disk + q->disk > t->max_disk) {
                        size_text(disk, b, sizeof(b));
                        size_text(q->disk, d, sizeof(d));
                        return refuse(r, "max-disk",
                                      "token %s: max-disk %s exceeded (%s given to its computers "
                                      "+ %s asked)",
                                      t->name, a, b, d);
                }
        }
        return true;
}

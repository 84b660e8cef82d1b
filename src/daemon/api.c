#include "daemon/api.h"
#include "daemon/e2b.h"
#include "daemon/metrics.h"
#include "daemon/audit.h"
#include "daemon/events.h"
#include "daemon/tokens.h"
#include "lib/parse.h"
#include "lib/util.h"

#include <math.h>
#include <strings.h>

/* PUT /v1/envs/{name}/files and /archive: file uploads of any size (api_files.c). */
static bool is_files_upload(const char *path)
{
        static const char prefix[] = "/v1/envs/";
        if (strncmp(path, prefix, sizeof(prefix) - 1) != 0)
                return false;
        const char *name = path + sizeof(prefix) - 1, *slash = strchr(name, '/');
        if (!slash || slash == name)
                return false;
        return !strcmp(slash, "/files") || !strcmp(slash, "/files/") ||
               !strcmp(slash, "/archive") || !strcmp(slash, "/archive/");
}

/* exec with a raw body: the body is the command's stdin (any size), the request is in ?spec= */
static bool is_exec_with_stdin(const char *path, const char *content_type)
{
        size_t n = strlen(path);
        return content_type && !strncmp(content_type, "application/octet-stream", 24) &&
               !strncmp(path, "/v1/envs/", 9) && n > 14 && !strcmp(path + n - 5, "/exec");
}

bool api_wants_spool(const char *method, const char *path, const char *content_type)
{
        if (e2b_wants_spool(method, path, content_type))
                return true;
        if (strcmp(method, "PUT") == 0 && is_files_upload(path))
                return true;
        if (strcmp(method, "POST") == 0 && is_exec_with_stdin(path, content_type))
                return true;
        /* Image uploads are tars; a JSON body there is a pull or build request. */
        return strcmp(method, "POST") == 0 && strcmp(path, "/v1/images") == 0 &&
               !(content_type && !strncmp(content_type, "application/json", 16));
}

static bool value_text(json_t *j, char *buf, size_t len)
{
        if (json_is_string(j)) {
                snprintf(buf, len, "%s", json_string_value(j));
                return true;
        }
        if (json_is_integer(j) && json_integer_value(j) >= 0) {
                snprintf(buf, len, "%lld", (long long)json_integer_value(j));
                return true;
        }
        if (json_is_real(j) && json_real_value(j) >= 0 && isfinite(json_real_value(j))) {
                snprintf(buf, len, "%.6f", json_real_value(j));
                return true;
        }
        return false;
}

bool api_known_fields(struct request *r, json_t *obj, const char *const *allowed)
{
        const char *k;
        json_t *v;
        json_object_foreach(obj, k, v)
        {
                bool ok = false;
                for (size_t i = 0; allowed[i] && !ok; i++)
                        ok = strcmp(k, allowed[i]) == 0;
                if (!ok) {
                        http_reply_error(r, 400, "invalid_argument", "unknown field \"%.64s\"", k);
                        return false;
                }
        }
        return true;
}

bool api_size(struct request *r, json_t *j, const char *field, uint64_t *ret)
{
        char text[64];
        if (!value_text(j, text, sizeof(text)) || parse_size(text, ret) < 0) {
                http_reply_error(r, 400, "invalid_argument",
                                 "%s: invalid size (use bytes or a unit: 512M, 2G)", field);
                return false;
        }
        return true;
}

bool api_duration(struct request *r, json_t *j, const char *field, uint64_t *ret_s)
{
        char text[64];
        if (!value_text(j, text, sizeof(text)) || parse_duration_s(text, ret_s) < 0) {
                http_reply_error(r, 400, "invalid_argument",
                                 "%s: invalid duration (use seconds or a unit: 90s, 30m, 24h)",
                                 field);
                return false;
        }
        return true;
}

bool api_cpus(struct request *r, json_t *j, const char *field, uint64_t *ret)
{
        char text[64];
        if (!value_text(j, text, sizeof(text)) || parse_cpus(text, ret) < 0) {
                http_reply_error(r, 400, "invalid_argument",
                                 "%s: invalid CPU count (a number from 0.01, e.g. 0.5 or 2)", field);
                return false;
        }
        return true;
}

bool api_count(struct request *r, json_t *j, const char *field, uint64_t min, uint64_t max,
               uint64_t *ret)
{
        uint64_t v = 0;
        bool ok = false;
        if (json_is_integer(j) && json_integer_value(j) >= 0) {
                v = (uint64_t)json_integer_value(j);
                ok = true;
        } else if (json_is_string(j)) {
                const char *s = json_string_value(j);
                size_t len = strlen(s);
                ok = len > 0 && len < 19 && strspn(s, "0123456789") == len;
                if (ok)
                        v = strtoull(s, NULL, 10);
        }
        if (!ok) {
                http_reply_error(r, 400, "invalid_argument", "%s: must be a whole number", field);
                return false;
        }
        if (v < min || v > max) {
                http_reply_error(r, 400, "invalid_argument", "%s: must be between %llu and %llu",
                                 field, (unsigned long long)min, (unsigned long long)max);
                return false;
        }
        *ret = v;
        return true;
}

/* ---------------------------------------------------------------- the route table */

/* Split "/v1/envs/NAME/processes/ID/ACTION" into at most 6 segments; 99 when longer. A trailing
 * slash adds no segment; "//" makes an empty one. */
#define MAX_SEGMENTS 6
static size_t split_path(const char *path, char seg[MAX_SEGMENTS][128])
{
        size_t n = 0;
        const char *p = path;
        while (*p == '/')
                p++;
        while (*p && n < MAX_SEGMENTS) {
                const char *end = strchr(p, '/');
                size_t len = end ? (size_t)(end - p) : strlen(p);
                if (len >= 128)
                        return 99;
                memcpy(seg[n], p, len);
                seg[n][len] = 0;
                n++;
                if (!end) {
                        p += len;
                        break;
                }
                p = end + 1;
                if (!*p)
                        break;
        }
        return *p && n == MAX_SEGMENTS ? 99 : n;
}

/* What an adapter gets: the environment of a /v1/envs/{name}/... route (looked up and known to
 * exist), the route's other {placeholders} in the order they appear in the pattern (NULL past
 * them), and the fixed argument of the route's entry. */
struct route_call {
        struct request *r;
        struct engine *e;
        struct env *v;
        const char *arg[MAX_SEGMENTS]; /* point into seg */
        const char *what;
        char seg[MAX_SEGMENTS][128];   /* the path's segments */
};

enum {
        /* The environment is looked up before the method is checked, so a wrong method on a
         * missing environment answers 404: how these resources have always answered. */
        ROUTE_ENV_FIRST = 1 << 0,
        /* The handler checks the method itself (api_procs.c words its own 405s and looks the
         * process up first): a wrong method on this path is passed to it, not answered here. */
        ROUTE_OWN_METHODS = 1 << 1,
        /* Administrators only (changes images, manages tokens): an agent token gets 403, after
         * the environment lookup, so another token's environment stays a 404. */
        ROUTE_ADMIN = 1 << 2,
};

struct api_route_entry {
        struct api_route route;
        void (*call)(const struct route_call *c);
        const char *what; /* the adapter's fixed argument: an action, a sub-resource */
        unsigned flags;
};

/* Thin adapters: today's handlers with today's arguments. */
static void system_get(const struct route_call *c)
{
        api_system(c->r, c->e);
}

static void images_list(const struct route_call *c)
{
        api_images_list(c->r, c->e);
}

static void images_import(const struct route_call *c)
{
        api_images_import(c->r, c->e);
}

static void image_delete(const struct route_call *c)
{
        api_image_delete(c->r, c->e, c->arg[0]);
}

static void image_get(const struct route_call *c)
{
        api_image_get(c->r, c->e, c->arg[0], c->what);
}

static void envs_list(const struct route_call *c)
{
        api_envs_list(c->r, c->e);
}

static void envs_create(const struct route_call *c)
{
        api_envs_create(c->r, c->e);
}

static void env_get(const struct route_call *c)
{
        api_env_get(c->r, c->e, c->v);
}

static void env_patch(const struct route_call *c)
{
        api_env_patch(c->r, c->e, c->v);
}

static void env_delete(const struct route_call *c)
{
        api_env_delete(c->r, c->e, c->v);
}

static void env_action(const struct route_call *c)
{
        api_env_action(c->r, c->e, c->v, c->what);
}

static void env_exec(const struct route_call *c)
{
        api_env_exec(c->r, c->e, c->v);
}

static void env_exec_ws(const struct route_call *c)
{
        api_env_exec_ws(c->r, c->e, c->v);
}

static void files(const struct route_call *c)
{
        api_env_files(c->r, c->e, c->v, "files", c->what);
}

static void archive(const struct route_call *c)
{
        api_env_files(c->r, c->e, c->v, "archive", NULL);
}

static void files_watch(const struct route_call *c)
{
        api_env_watch(c->r, c->e, c->v);
}

static void ports(const struct route_call *c)
{
        api_env_ports(c->r, c->e, c->v, c->arg[0]);
}

static void processes(const struct route_call *c)
{
        api_env_processes(c->r, c->e, c->v, c->arg[0], c->what);
}

static void snapshots(const struct route_call *c)
{
        api_env_snapshots(c->r, c->e, c->v, c->arg[0]);
}

static void storage_action(const struct route_call *c)
{
        api_env_storage_action(c->r, c->e, c->v, c->what);
}

static void metrics_get(const struct route_call *c)
{
        api_metrics(c->r, c->e);
}

static void audit_get(const struct route_call *c)
{
        api_audit_get(c->r, c->e);
}

static void events_get(const struct route_call *c)
{
        api_events_get(c->r, c->e);
}

static void tokens_route(const struct route_call *c)
{
        api_tokens(c->r, c->e);
}

static void token_delete(const struct route_call *c)
{
        api_token_delete(c->r, c->e, c->arg[0]);
}

static void mcp_post(const struct route_call *c)
{
        api_mcp(c->r, c->e);
}

#define ENV_FIRST ROUTE_ENV_FIRST
#define PROCS     (ROUTE_ENV_FIRST | ROUTE_OWN_METHODS)
/* Every route of the API. A pattern is literal segments and {placeholders}; one that starts
 * with /v1/envs/{name} names an environment. docs/API.md has a heading for each entry
 * (tests/integration/test_docs.py compares it with `paddockd --routes`). */
static const struct api_route_entry routes[] = {
    {{"GET", "/v1/system"}, system_get, NULL, 0},
    {{"GET", "/v1/images"}, images_list, NULL, 0},
    {{"POST", "/v1/images"}, images_import, NULL, ROUTE_ADMIN},
    {{"DELETE", "/v1/images/{name}"}, image_delete, NULL, ROUTE_ADMIN},
    {{"GET", "/v1/images/{name}/export"}, image_get, "export", 0},
    {{"GET", "/v1/envs"}, envs_list, NULL, 0},
    {{"POST", "/v1/envs"}, envs_create, NULL, 0},
    {{"GET", "/v1/envs/{name}"}, env_get, NULL, 0},
    {{"PATCH", "/v1/envs/{name}"}, env_patch, NULL, 0},
    {{"DELETE", "/v1/envs/{name}"}, env_delete, NULL, 0},
    {{"POST", "/v1/envs/{name}/start"}, env_action, "start", 0},
    {{"POST", "/v1/envs/{name}/stop"}, env_action, "stop", 0},
    {{"POST", "/v1/envs/{name}/restart"}, env_action, "restart", 0},
    {{"POST", "/v1/envs/{name}/pause"}, env_action, "pause", 0},
    {{"POST", "/v1/envs/{name}/resume"}, env_action, "resume", 0},
    {{"POST", "/v1/envs/{name}/exec"}, env_exec, NULL, 0},
    {{"GET", "/v1/envs/{name}/exec/ws"}, env_exec_ws, NULL, ENV_FIRST},
    {{"GET", "/v1/envs/{name}/processes"}, processes, NULL, PROCS},
    {{"GET", "/v1/envs/{name}/processes/{id}"}, processes, NULL, PROCS},
    {{"DELETE", "/v1/envs/{name}/processes/{id}"}, processes, NULL, PROCS},
    {{"GET", "/v1/envs/{name}/processes/{id}/output"}, processes, "output", PROCS},
    {{"GET", "/v1/envs/{name}/processes/{id}/wait"}, processes, "wait", PROCS},
    {{"POST", "/v1/envs/{name}/processes/{id}/wait"}, processes, "wait", PROCS},
    {{"POST", "/v1/envs/{name}/processes/{id}/signal"}, processes, "signal", PROCS},
    {{"GET", "/v1/envs/{name}/files"}, files, NULL, ENV_FIRST},
    {{"PUT", "/v1/envs/{name}/files"}, files, NULL, ENV_FIRST},
    {{"DELETE", "/v1/envs/{name}/files"}, files, NULL, ENV_FIRST},
    {{"GET", "/v1/envs/{name}/files/list"}, files, "list", ENV_FIRST},
    {{"GET", "/v1/envs/{name}/files/stat"}, files, "stat", ENV_FIRST},
    {{"POST", "/v1/envs/{name}/files/mkdir"}, files, "mkdir", ENV_FIRST},
    {{"POST", "/v1/envs/{name}/files/move"}, files, "move", ENV_FIRST},
    {{"GET", "/v1/envs/{name}/files/watch"}, files_watch, NULL, ENV_FIRST},
    {{"GET", "/v1/envs/{name}/archive"}, archive, NULL, ENV_FIRST},
    {{"PUT", "/v1/envs/{name}/archive"}, archive, NULL, ENV_FIRST},
    {{"GET", "/v1/envs/{name}/ports"}, ports, NULL, ENV_FIRST},
    {{"POST", "/v1/envs/{name}/ports"}, ports, NULL, ENV_FIRST},
    {{"DELETE", "/v1/envs/{name}/ports/{host_port}"}, ports, NULL, ENV_FIRST},
    {{"GET", "/v1/envs/{name}/snapshots"}, snapshots, NULL, ENV_FIRST},
    {{"POST", "/v1/envs/{name}/snapshots"}, snapshots, NULL, ENV_FIRST},
    {{"DELETE", "/v1/envs/{name}/snapshots/{snap}"}, snapshots, NULL, ENV_FIRST},
    {{"POST", "/v1/envs/{name}/restore"}, storage_action, "restore", ENV_FIRST},
    {{"POST", "/v1/envs/{name}/fork"}, storage_action, "fork", ENV_FIRST},
    {{"POST", "/v1/envs/{name}/commit"}, storage_action, "commit", ENV_FIRST | ROUTE_ADMIN},
    {{"GET", "/metrics"}, metrics_get, NULL, 0},
    {{"GET", "/v1/audit"}, audit_get, NULL, 0},
    {{"GET", "/v1/events"}, events_get, NULL, 0},
    {{"GET", "/v1/tokens"}, tokens_route, NULL, 0},
    {{"POST", "/v1/tokens"}, tokens_route, NULL, 0},
    {{"DELETE", "/v1/tokens/{name}"}, token_delete, NULL, 0},
    {{"POST", "/mcp"}, mcp_post, NULL, 0},
};
#undef ENV_FIRST
#undef PROCS

size_t api_routes_count(void)
{
        return ELEMENTSOF(routes);
}

const struct api_route *api_route_at(size_t i)
{
        return i < ELEMENTSOF(routes) ? &routes[i].route : NULL;
}

/* Does pattern match the n segments of a path? Then *ret_env is the {name} segment of a
 * /v1/envs/{name} route (else NULL) and ret_arg the other placeholders' segments, in order. */
static bool pattern_match(const char *pattern, char seg[MAX_SEGMENTS][128], size_t n,
                          const char **ret_env, const char *ret_arg[MAX_SEGMENTS])
{
        const char *p = pattern, *env = NULL, *arg[MAX_SEGMENTS] = {NULL};
        size_t i = 0, nargs = 0;
        while (*p == '/')
                p++;
        for (; *p; i++) {
                size_t len = strcspn(p, "/");
                if (i >= n)
                        return false;
                if (p[0] == '{') {
                        if (i == 2 && !strcmp(seg[1], "envs"))
                                env = seg[i];
                        else
                                arg[nargs++] = seg[i];
                } else if (strlen(seg[i]) != len || strncmp(p, seg[i], len) != 0) {
                        return false;
                }
                p += len;
                p += *p == '/';
        }
        if (i != n)
                return false;
        *ret_env = env;
        memcpy(ret_arg, arg, sizeof(arg));
        return true;
}

struct api_later {
        struct request *req; /* NULL once the client went away */
};

static void later_request_gone(void *data)
{
        struct api_later *l = data;
        l->req = NULL;
}

struct api_later *api_later(struct request *r)
{
        struct api_later *l = calloc(1, sizeof(*l));
        if (!l)
                return NULL;
        l->req = r;
        req_on_free(r, later_request_gone, l);
        http_defer(r);
        return l;
}

struct request *api_later_take(struct api_later *l)
{
        struct request *r = l->req;
        if (r)
                req_on_free(r, NULL, NULL);
        free(l);
        /* Answered meanwhile (the client hung up: 499), though not freed yet: nothing more may
         * run for it. */
        return r && !req_status(r) ? r : NULL;
}

void api_caller(const struct request *r, struct caller *ret)
{
        ret->admin = req_actor_admin(r);
        snprintf(ret->token, sizeof(ret->token), "%s", req_actor(r));
}

bool caller_sees_env(const struct caller *c, const struct env *v)
{
        return c->admin || strcmp(env_owner(v), c->token) == 0;
}

void api_request_answering(struct request *r, void *engine)
{
        audit_request_answering(r);
}

/* A request of a token that is still going when its handler returns (a stream, a deferred
 * answer): a revoked or expired token ends it. */
static void end_request(void *data)
{
        http_abort(data, "token revoked or expired");
}

static void track_request(struct request *r, struct engine *e)
{
        if (!req_actor(r)[0] || !req_lingers(r))
                return;
        struct token_session *s = tokens_session_add(engine_tokens(e), req_actor(r), end_request, r);
        if (s)
                req_set_session(r, s); /* removed when the request is over, without a search */
        else
                http_abort(r, "out of memory");
}

void api_request_done(struct request *r, void *engine)
{
        metrics_request_done(r);
        audit_request_done(r);
        tokens_session_remove(engine_tokens(engine), req_session(r));
        api_idle_done(r, engine);
}

/* Who is asking: Authorization: Bearer <secret> (or, without an Authorization field,
 * X-API-Key: <secret>, as E2B's SDKs send it) names a token; neither is the local
 * administrator on the local socket and refused on a gateway connection. Replies 401 and
 * returns false when the caller cannot be trusted. */
bool api_resolve_caller(struct request *r, struct engine *e)
{
        const char *auth = req_header(r, "Authorization");
        const char *key = req_header(r, "X-API-Key"); /* E2B's SDKs: the same secret */
        if (!auth && key) {
                const struct token_row *t =
                        secret_format_ok(key) ? tokens_find_secret(engine_tokens(e), key) : NULL;
                if (!t) {
                        http_reply_error(r, 401, "unauthorized", "invalid or expired API key");
                        return false;
                }
                req_set_actor(r, t->name, t->admin);
                return true;
        }
        if (!auth) {
                if (!req_from_gateway(r)) {
                        req_set_actor(r, "", true);
                        return true;
                }
                http_reply_error(r, 401, "unauthorized",
                                 "a token is required: Authorization: Bearer <token>");
                return false;
        }
        if (strncasecmp(auth, "Bearer ", 7) != 0) {
                http_reply_error(r, 401, "unauthorized",
                                 "malformed Authorization header: use Bearer <token>");
                return false;
        }
        const char *secret = auth + 7;
        secret += strspn(secret, " ");
        const struct token_row *t =
                secret_format_ok(secret) ? tokens_find_secret(engine_tokens(e), secret) : NULL;
        if (!t) {
                http_reply_error(r, 401, "unauthorized", "invalid or expired token");
                return false;
        }
        req_set_actor(r, t->name, t->admin);
        return true;
}

static struct env *find_env(struct request *r, struct engine *e, const char *name)
{
        struct caller c;
        api_caller(r, &c);
        struct env *v = name_is_valid(name) ? engine_find(e, name) : NULL;
        if (v && !caller_sees_env(&c, v))
                v = NULL; /* another token's: indistinguishable from a missing one */
        if (!v)
                http_reply_error(r, 404, "not_found", "no such environment: %s", name);
        return v;
}

/* Unknown path: 404. Known path, other method: 405 (or the handler's own answer, see
 * ROUTE_OWN_METHODS). The environment is looked up after the method check, or before it for
 * ROUTE_ENV_FIRST routes. */
/* Who calls, which route, which environment, and may the caller use them: fills c and
 * ret_hit, or answers (401, 403, 404, 405) and returns false. */
static bool route_request(struct request *r, struct route_call *c,
                          const struct api_route_entry **ret_hit)
{
        if (!api_resolve_caller(r, c->e))
                return false;
        size_t n = split_path(req_path(r), c->seg);
        const struct api_route_entry *hit = NULL, *known = NULL; /* known: the path matches */
        const char *env = NULL;

        if (n > MAX_SEGMENTS)
                n = 0; /* a segment too long, or too many of them: matches nothing */
        for (size_t i = 0; i < ELEMENTSOF(routes) && !hit; i++) {
                if (!pattern_match(routes[i].route.pattern, c->seg, n, &env, c->arg))
                        continue;
                if (!known)
                        known = &routes[i]; /* the entries of one pattern share these flags
                                               (all but ROUTE_ADMIN, read from the hit) */
                if (!strcmp(routes[i].route.method, req_method(r)))
                        hit = &routes[i];
        }
        if (!known) {
                http_reply_error(r, 404, "not_found", "no such route: %s", req_path(r));
                return false;
        }
        if (env && (hit || (known->flags & ROUTE_ENV_FIRST))) {
                c->v = find_env(r, c->e, env);
                if (!c->v)
                        return false;
        }
        if (!hit && (known->flags & ROUTE_OWN_METHODS))
                hit = known;
        if (!hit) {
                http_reply_error(r, 405, "method_not_allowed", "%s is not allowed on %s",
                                 req_method(r), req_path(r));
                return false;
        }
        /* One on its way out (engine_destroy_async) can be looked at and deleted, no more. */
        if (c->v && env_deleting(c->v) && hit->call != env_get && hit->call != env_delete) {
                http_reply_error(r, 409, "conflict", "%s is being deleted", env_name(c->v));
                return false;
        }
        /* One starting (engine_start_async) can be looked at, deleted and stopped (either
         * overtakes the start); exec and files wait for it to run (api_idle_before); the rest
         * is refused. */
        if (c->v && env_starting(c->v) && strcmp(req_method(r), "GET") &&
            hit->call != env_delete && !(hit->call == env_action && !strcmp(hit->what, "stop")) &&
            !api_idle_waits(hit->route.pattern)) {
                http_reply_error(r, 409, "conflict", "%s is starting; try again once it runs",
                                 env_name(c->v));
                return false;
        }
        c->what = hit->what;
        req_set_route(r, hit->route.pattern, env);
        if ((hit->flags & ROUTE_ADMIN) &&
            !api_require_admin(r, c->v ? "commit environments to images" : "change images"))
                return false;
        *ret_hit = hit;
        return true;
}

void api_handle(struct request *r, void *ctx)
{
        struct route_call c = {.r = r, .e = ctx};
        const struct api_route_entry *hit = NULL;
        if (e2b_handle(r, ctx))
                return;
        if (!route_request(r, &c, &hit))
                return;
        if (!api_idle_before(r, c.e, c.v, hit->route.pattern))
                return;
        hit->call(&c);
        track_request(r, c.e);
}

void api_request_head(struct request *r, void *ctx)
{
        struct route_call c = {.r = r, .e = ctx};
        const struct api_route_entry *hit = NULL;
        if (e2b_head(r, ctx))
                return;
        route_request(r, &c, &hit); /* a refusal answers now; the body is then never stored */
}

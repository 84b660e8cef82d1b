/* The HTTP API. Parses and validates requests, calls the engine, renders JSON.
 * No syscalls here beyond what the http layer does: the engine interface is the boundary. */
#pragma once
#include "daemon/engine.h"
#include "daemon/http.h"

void api_handle(struct request *r, void *engine);
/* http_config.head: the head of a request whose body is spooled (an upload) has arrived. The
 * caller, route and environment are checked now, so a refused upload is never stored. */
void api_request_head(struct request *r, void *engine);
/* http_config.done: a request is over (audit log, metrics). */
void api_request_done(struct request *r, void *engine);
/* http_config.answering: an answer is about to go out (the audit log records it). */
void api_request_answering(struct request *r, void *engine);

/* Who sends a request, resolved by api_handle before any handler runs. The local socket
 * without a token is the administrator; a token is an administrator only if made --admin. */
struct caller {
        bool admin;
        char token[NAME_BUF_SIZE]; /* the token's name; "" = the local administrator */
};
void api_caller(const struct request *r, struct caller *ret);
/* Who is asking (Authorization: Bearer, or X-API-Key with the same secret): sets the actor,
 * or replies 401 and returns false. */
bool api_resolve_caller(struct request *r, struct engine *e);
/* May this caller see and act on v? (Another token's environment answers 404.) */
bool caller_sees_env(const struct caller *c, const struct env *v);
bool api_wants_spool(const char *method, const char *path, const char *content_type);

/* The route table api_handle dispatches on, read-only (paddockd --routes prints it).
 * pattern is like /v1/envs/{name}/files/list: literal segments and {placeholders}. */
struct api_route {
        const char *method;
        const char *pattern;
};
size_t api_routes_count(void);
/* The i-th route, or NULL past the end. */
const struct api_route *api_route_at(size_t i);

/* Handlers, one file per resource. */
void api_envs_list(struct request *r, struct engine *e);
void api_envs_create(struct request *r, struct engine *e);
void api_env_get(struct request *r, struct engine *e, struct env *v);
void api_env_patch(struct request *r, struct engine *e, struct env *v);
void api_env_delete(struct request *r, struct engine *e, struct env *v);
void api_env_action(struct request *r, struct engine *e, struct env *v, const char *action);
void api_env_exec(struct request *r, struct engine *e, struct env *v);
/* GET /v1/envs/{name}/exec/ws: an interactive terminal session over a WebSocket. */
void api_env_exec_ws(struct request *r, struct engine *e, struct env *v);
/* cmd of an exec request: a non-empty array of strings without NUL bytes. argv is malloc'd,
 * its strings are borrowed from cmd. Replies 400 and returns false otherwise. */
bool api_exec_argv(struct request *r, json_t *cmd, char ***ret);
/* /v1/envs/{name}/files[/list|stat|mkdir|move] and /archive (resource "files" or "archive",
 * sub the fifth path segment or NULL). */
void api_env_files(struct request *r, struct engine *e, struct env *v, const char *resource,
                   const char *sub);
/* GET /v1/envs/{name}/files/watch?path=DIR[&recursive=0]: an NDJSON stream of changes. */
void api_env_watch(struct request *r, struct engine *e, struct env *v);
/* GET/POST /v1/envs/{name}/ports, DELETE /v1/envs/{name}/ports/{host_port}?proto=tcp */
void api_env_ports(struct request *r, struct engine *e, struct env *v, const char *host_port);
bool api_network(struct request *r, json_t *j, struct netpolicy *p);
/* /v1/envs/{name}/processes[/{id}[/output|wait|signal]] */
void api_env_processes(struct request *r, struct engine *e, struct env *v, const char *id,
                       const char *action);
/* /v1/envs/{name}/snapshots[/{snap}] and POST /v1/envs/{name}/restore|fork|commit */
void api_env_snapshots(struct request *r, struct engine *e, struct env *v, const char *snap);
void api_env_storage_action(struct request *r, struct engine *e, struct env *v, const char *action);
/* Starts a create (engine_create_async, engine_fork: start gets the function and data to
 * pass them) whose answer to r is 201 with the new environment once it runs, or its error;
 * the client may hang up meanwhile (the create goes on). <0: nothing started, r not
 * answered, err says why. */
typedef int (*api_create_start_fn)(void *data, engine_created_fn done, void *done_data,
                                   struct env_creating **ret, char *err, size_t errlen);
int api_answer_when_created(struct request *r, const char *name, api_create_start_fn start,
                            void *start_data, char *err, size_t errlen);
void api_images_list(struct request *r, struct engine *e);
void api_images_import(struct request *r, struct engine *e);
/* GET /v1/images/{name}/{sub}: sub "export" streams the image as a tar. */
void api_image_get(struct request *r, struct engine *e, const char *name, const char *sub);
void api_image_delete(struct request *r, struct engine *e, const char *name);
void api_system(struct request *r, struct engine *e);
/* POST /mcp: the MCP tools over streamable HTTP (api_mcp.c). */
void api_mcp(struct request *r, struct engine *e);
/* /v1/tokens and /v1/tokens/{name} (api_tokens.c), administrators only. */
void api_tokens(struct request *r, struct engine *e);
void api_token_delete(struct request *r, struct engine *e, const char *name);
/* Is the caller an administrator? Else 403 forbidden "token T may not <what>". */
bool api_require_admin(struct request *r, const char *what);

/* The caller's token quotas (api_tokens.c). env: the environment the request changes (its own
 * figures are left out of the sums; NULL for a new one); new_env: one more environment;
 * running: it runs with limits afterwards (cpus and memory are checked); computer: its disk
 * limit disk counts towards max-disk. On refusal replies 403 quota_exceeded naming the limit
 * and the numbers, calls api_quota_refused and returns false. */
struct quota_ask {
        const struct env *env;
        bool new_env, running, computer;
        struct cgroup_limits limits;
        uint64_t disk;
};
bool api_quota_ok(struct request *r, struct engine *e, const struct quota_ask *q);

/* A request answered by a callback that may run after its client went away (the waiter of an
 * engine_destroy_async, say): api_later defers r (NULL: out of memory, r not deferred);
 * api_later_take, in the callback or when starting the work failed, gives r back, or NULL
 * once the client is gone or r was answered otherwise, and frees the handle. */
struct api_later;
struct api_later *api_later(struct request *r);
struct request *api_later_take(struct api_later *l);
/* Called at every quota refusal; limit is "max-envs", "max-cpus", "max-memory" or "max-disk". */
/* Idle stop (api_idle.c): before a handler, count the request as activity of its environment
 * and wake it if the route needs it running (false: answered with an error); when it is over,
 * count it again (a long request). */
bool api_idle_before(struct request *r, struct engine *e, struct env *v, const char *pattern);
/* Whether the route waits for an environment that is starting (or stopped by the idle timer)
 * rather than being refused: exec (a terminal's upgrade too), files, archive. */
bool api_idle_waits(const char *pattern);
/* When v is starting, or stopped by the idle timer: r is deferred, v started (or its start
 * joined), and r dispatched again (api_handle) once it runs, or answered with the error
 * (E2B's format with e2b). true: r is taken care of; false: v runs or is not idle. */
bool api_wake_later(struct request *r, struct engine *e, struct env *v, bool e2b);
void api_idle_done(struct request *r, struct engine *e);
void api_quota_refused(struct request *r, const char *limit, const char *message);

/* Shared value parsers: a JSON value that is a string with units or a plain number.
 * On failure they reply 400 naming the field and return false. */
bool api_size(struct request *r, json_t *j, const char *field, uint64_t *ret);
/* Every key of obj is one of allowed (NULL-terminated); else 400 naming the first stranger. */
bool api_known_fields(struct request *r, json_t *obj, const char *const *allowed);
bool api_duration(struct request *r, json_t *j, const char *field, uint64_t *ret_s);
bool api_cpus(struct request *r, json_t *j, const char *field, uint64_t *ret_millis);
bool api_string_map(struct request *r, json_t *j, const char *field, bool (*key_ok)(const char *));
bool api_env_map(struct request *r, json_t *j, const char *field);
bool api_count(struct request *r, json_t *j, const char *field, uint64_t min, uint64_t max,
               uint64_t *ret);

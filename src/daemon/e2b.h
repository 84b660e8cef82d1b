/* The E2B drop-in: the unmodified e2b SDK talks to Paddock (docs/e2b.md).
 *
 * Two surfaces share the daemon's listener. The control plane (/v2/sandboxes,
 * /sandboxes/{id}/...) is REST with X-API-Key = a Paddock token (e2b_api.c). The in-sandbox
 * "envd" surface is named by the E2b-Sandbox-Id header and authenticated by the sandbox's
 * X-Access-Token: plain routes /health and /files (e2b_envd.c) and the Connect-RPC services
 * process.Process and filesystem.Filesystem (e2b_rpc*.c). An E2B sandbox is a Paddock
 * environment whose name is the sandbox id. */
#pragma once
#include "daemon/engine.h"
#include "daemon/http.h"

#include <stdbool.h>

/* Answers the request if it belongs to E2B (true), else leaves it to the Paddock API. */
bool e2b_handle(struct request *r, struct engine *e);
/* http_config.head's E2B half, for spooled uploads: true when the request is E2B's (a refusal
 * is then answered). */
bool e2b_head(struct request *r, struct engine *e);
/* http_config.wants_spool's E2B half: envd uploads (POST /files) are spooled to a file. */
bool e2b_wants_spool(const char *method, const char *path, const char *content_type);

/* An envd request's sandbox, checked: it exists, runs, is not paused, and the request
 * carries its access token. */
struct e2b_target {
        struct env *env;
        char user[33]; /* Basic-auth user or ?username=, else the sandbox's default user */
        char home[256]; /* that user's home: relative paths start there */
};
/* Fills t, or answers (401 bad token, 502 unknown/paused/dead sandbox) and returns < 0. */
int e2b_envd_target(struct request *r, struct engine *e, struct e2b_target *t);

/* The Connect-RPC services: path is "process.Process/Start" and the like. */
void e2b_rpc_dispatch(struct request *r, struct engine *e, const struct e2b_target *t,
                      const char *path);

/* ---- shared by the E2B files (e2b.c, e2b_api.c, e2b_envd.c) */

/* E2B's REST error body: {"code":<status>,"message":"..."} (the SDK reads the number). */
void e2b_reply_error(struct request *r, unsigned status, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
/* The control plane (e2b_api.c): answers and returns true for /v2/sandboxes... and
 * /sandboxes/..., else false. */
bool e2b_api_handle(struct request *r, struct engine *e);
/* envd's plain routes (e2b_envd.c): GET /health, GET|POST /files. False: not one of them. */
bool e2b_envd_handle(struct request *r, struct engine *e, const struct e2b_target *t);
/* The E2B record of environment id: its default user and home, its access-token hashes.
 * -ENOENT when it was not made through the E2B API. */
struct e2b_row;
int e2b_sandbox_record(struct engine *e, const char *id, struct e2b_row *ret);
/* Does token (X-Access-Token) match one of the sandbox's hashes (constant time)? */
bool e2b_token_matches(const struct e2b_row *b, const char *token);
/* At create: make the E2B user (passwd, group, home) in a writable environment that lacks it,
 * home owned by owner ("uid:gid"), then call done (0 or -errno, a message). Runs file helpers inside the environment. */
typedef void (*e2b_done_fn)(void *data, int err, const char *msg);
int e2b_envd_make_user(struct engine *e, struct env *v, const char *passwd, const char *group,
                       const char *home, const char *owner, e2b_done_fn done, void *data);

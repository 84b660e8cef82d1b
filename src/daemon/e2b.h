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
/* http_config.wants_spool's E2B half: envd uploads (POST /files) are spooled to a file. */
bool e2b_wants_spool(const char *method, const char *path, const char *content_type);

/* An envd request's sandbox, checked: it exists, runs, is not paused, and the request
 * carries its access token. */
struct e2b_target {
        struct env *env;
        char user[33]; /* Basic-auth user or ?username=, else the sandbox's default user */
};
/* Fills t, or answers (401 bad token, 502 unknown/paused/dead sandbox) and returns < 0. */
int e2b_envd_target(struct request *r, struct engine *e, struct e2b_target *t);

/* The Connect-RPC services: path is "process.Process/Start" and the like. */
void e2b_rpc_dispatch(struct request *r, struct engine *e, const struct e2b_target *t,
                      const char *path);

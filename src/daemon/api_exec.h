/* What the two exec endpoints (api_exec.c: POST exec; api_exec_ws.c: GET exec/ws) share. */
#pragma once
#include "daemon/exec.h"
#include "daemon/http.h"

/* env, cwd, user and timeout of an exec request into rq (borrowing body's strings). Replies 400
 * and returns false on bad input. */
bool api_exec_options(struct request *r, json_t *body, struct exec_request *rq);

/* An interactive terminal session with a command in an environment (paddock shell, exec -t),
 * over GET /v1/envs/{name}/exec/ws. */
#pragma once

#include "cli/cli.h"

#include <jansson.h>
#include <stdbool.h>

/* spec: the exec request (cmd, env, cwd, user, timeout; cols, rows and TERM are added here).
 * With forward_stdin the local terminal is switched to raw mode (restored on every way out)
 * and every key goes to the session; standard input must then be a terminal. Returns the
 * command's exit code, or EXIT_FAIL / EXIT_USAGE after printing why. */
int tty_session_run(struct cli *cli, const char *name, json_t *spec, bool forward_stdin);

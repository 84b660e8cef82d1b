/* The output stream of a command, as paddockd sends it for exec with "stream":true and for a
 * background process's output: NDJSON lines {"stdout":..} / {"stderr":..} (base64 with
 * "encoding":"base64" when not UTF-8), an {"error":{..}} line when the daemon gives up, and a
 * last {"exit_code":..,"timed_out":..} once the command has exited.
 *
 * Each chunk is written to fd 1 or 2 the moment its line is complete, with no stdio buffering
 * in between, so a long-running command shows progress live. */
#pragma once

#include "cli/client.h"
#include "cli/lines.h"

#include <stdbool.h>

struct procout {
        const char *verb; /* names the verb in messages: "exec", "logs" */
        struct lines lines;
        bool have_exit, timed_out, truncated;
        int exit_code; /* 0-255; valid when have_exit */
        long long duration_ms;
        bool broken_pipe; /* whoever read our output went away: stop quietly */
        bool failed;      /* said why on stderr */
};

void procout_init(struct procout *o, const char *verb);
void procout_done(struct procout *o);

/* Send req (its sink is filled in here) and write the stream out as it arrives. 0 when the
 * stream ended cleanly (have_exit says whether it carried an exit line); -1 after printing why
 * (nothing is printed when broken_pipe is set). */
int procout_perform(struct client *c, struct request *req, struct procout *o);

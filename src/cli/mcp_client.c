/* The backend of `paddock mcp`'s tools: each API request goes to paddockd through the CLI's
 * client (the unix socket, or a remote daemon over TLS with a token). */
#include "cli/mcp_server.h"
#include "lib/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int client_backend_perform(void *data, const struct mcp_request *req,
                                  struct mcp_response *ret, char **ret_why)
{
        struct client *c = data;
        struct request creq = {
            .method = req->method,
            .path = req->path,
            .body = req->body,
            .body_len = req->body_len,
            .content_type = req->content_type,
        };
        /* client_perform says on stderr why a daemon could not be reached. stdout carries the
         * protocol, and the agent should read the reason too: catch what it writes (stderr is
         * an assignable FILE * in glibc) and pass it on to the real stderr as well. */
        char *said = NULL;
        size_t said_len = 0;
        FILE *mem = open_memstream(&said, &said_len);
        FILE *real_stderr = stderr;
        if (mem)
                stderr = mem;
        struct response resp = {};
        int r = client_perform(c, &creq, &resp);
        stderr = real_stderr;
        if (mem)
                fclose(mem);
        if (said && *said)
                fputs(said, stderr);
        if (r < 0) {
                const char *why = said && *said ? said : "request to paddockd failed\n";
                if (strncmp(why, "paddock: ", 9) == 0)
                        why += 9;
                *ret_why = strndup(why, strcspn(why, "\n"));
                free(said);
                return -1;
        }
        free(said);
        /* The body is always there as text for the tools (client_perform leaves it NULL for an
         * empty answer). */
        if (!resp.body) {
                resp.body = strdup("");
                resp.len = 0;
                if (!resp.body) {
                        response_done(&resp);
                        *ret_why = strdup("out of memory");
                        return -1;
                }
        }
        *ret = (struct mcp_response){
            .status = resp.status, .body = resp.body, .len = resp.len, .json = resp.json};
        return 0;
}

static void client_backend_sleep(void *data, unsigned ms)
{
        usleep(ms * 1000);
}

struct mcp_backend mcp_client_backend(struct client *c)
{
        return (struct mcp_backend){
            .perform = client_backend_perform, .sleep_ms = client_backend_sleep, .data = c};
}

/* paddock mcp: a Model Context Protocol server on stdin/stdout, for agents (desktop
 * assistants, coding agents) that want Paddock's environments as tools.
 *
 * The stdio transport of MCP: JSON-RPC 2.0, one message per line each way; stdout carries
 * nothing else (messages for people go to stderr). Requests are answered one at a time, in
 * order: each tool call is one or two requests to paddockd (the unix socket, or --host with
 * --token), so there is nothing to run in parallel that the daemon would not serialise anyway.
 * That also means a notifications/cancelled can only arrive after the call it names has been
 * answered; it is ignored, as the protocol allows. */
#include "cli/cli.h"
#include "cli/mcp_server.h"
#include "cli/opts.h"
#include "lib/jsonutil.h"
#include "lib/util.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>

/* The longest message accepted; a longer line is skipped whole and answered with a parse
 * error. Files travel inside messages (write_file), so this is generous. */
#define MCP_LINE_MAX (16u << 20)
#define READ_SIZE    (64u << 10)

enum {
        OPT_HTTP = OPT_FIRST_VERB_OPTION,
};

static const char mcp_help[] =
    "Usage: paddock mcp [--http ADDRESS:PORT]\n"
    "\n"
    "Serve the Model Context Protocol on stdin/stdout (one JSON-RPC message a line), so an MCP\n"
    "client (a desktop assistant, a coding agent) can create environments, run commands, read\n"
    "and write files, snapshot, fork and destroy them as tools. Each tool call is a request to\n"
    "paddockd: the local socket, or a remote daemon with --host and --token (or PADDOCK_HOST,\n"
    "PADDOCK_TOKEN) given before 'mcp'. See docs/mcp.md.\n"
    "\n"
    "  --http ADDRESS:PORT   serve MCP's streamable HTTP at POST /mcp on this address instead\n"
    "                        (a client's Authorization: Bearer token is passed on to paddockd)\n";

static int write_message(const json_t *msg)
{
        _cleanup_free_ char *text = json_dumps(msg, JSON_COMPACT);
        if (!text)
                return -ENOMEM;
        size_t n = strlen(text);
        text[n] = '\n'; /* replaces the NUL: write n + 1 bytes */
        return write_all(STDOUT_FILENO, text, n + 1);
}

struct reader {
        struct mcp_server *server;
        char *buf;
        size_t len;
        bool skipping; /* inside a line longer than MCP_LINE_MAX */
        int error;
};

static void answer(struct reader *rd, json_t *reply)
{
        if (reply && rd->error == 0)
                rd->error = write_message(reply);
        json_decref(reply);
}

static void take_line(struct reader *rd, const char *line, size_t len)
{
        while (len > 0 && (line[len - 1] == '\r' || line[len - 1] == ' ' || line[len - 1] == '\t'))
                len--;
        if (len == 0)
                return; /* blank lines are not messages */
        answer(rd, mcp_server_handle(rd->server, line, len));
}

/* Split what was read into lines; keep an incomplete tail for the next read. */
static void feed(struct reader *rd, const char *data, size_t n)
{
        while (n > 0 && rd->error == 0) {
                const char *nl = memchr(data, '\n', n);
                size_t take = nl ? (size_t)(nl - data) : n;
                if (!rd->skipping && rd->len + take > MCP_LINE_MAX) {
                        rd->skipping = true;
                        rd->len = 0;
                }
                if (!rd->skipping) {
                        char *grown = realloc(rd->buf, rd->len + take + 1);
                        if (!grown) {
                                rd->error = -ENOMEM;
                                return;
                        }
                        rd->buf = grown;
                        memcpy(rd->buf + rd->len, data, take);
                        rd->len += take;
                }
                if (!nl)
                        return;
                if (rd->skipping) {
                        fprintf(stderr, "paddock mcp: skipped a message longer than %u MiB\n",
                                MCP_LINE_MAX >> 20);
                        answer(rd, mcp_error(NULL, MCP_PARSE_ERROR,
                                             "message longer than 16 MiB: not read"));
                        rd->skipping = false;
                } else {
                        take_line(rd, rd->buf, rd->len);
                }
                rd->len = 0;
                data += take + 1;
                n -= take + 1;
        }
}

static int serve_stdio(struct mcp_server *server)
{
        struct reader rd = {.server = server};
        _cleanup_free_ char *chunk = malloc(READ_SIZE);
        if (!chunk)
                return -ENOMEM;
        for (;;) {
                ssize_t n = read(STDIN_FILENO, chunk, READ_SIZE);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0) {
                        rd.error = -errno;
                        break;
                }
                if (n == 0) {
                        if (!rd.skipping && rd.len > 0 && rd.error == 0)
                                take_line(&rd, rd.buf, rd.len);
                        break;
                }
                feed(&rd, chunk, (size_t)n);
                if (rd.error < 0)
                        break;
        }
        free(rd.buf);
        return rd.error;
}

/* A remote daemon is asked once before serving, so that its certificate is checked with the
 * CLI's usual messages on standard error, and the question whether to trust an unknown one
 * (only asked on a terminal) comes now, not inside a tool call whose output is captured. A
 * failure is only reported: each tool call tries again and says why it failed. */
static void probe_remote(struct client *client)
{
        struct request req = {.method = "GET", .path = "/v1/system"};
        struct response resp = {};
        if (client_perform(client, &req, &resp) == 0 && (resp.status < 200 || resp.status > 299))
                client_print_error(&resp);
        response_done(&resp);
}

static int mcp_option(void *userdata, int c, const char *verb)
{
        (void)verb;
        if (c != OPT_HTTP)
                return 0;
        *(const char **)userdata = optarg;
        return -1;
}

int cmd_mcp(struct cli *cli, int argc, char **argv)
{
        static const struct option options[] = {
            {"http", required_argument, NULL, OPT_HTTP},
            CLI_COMMON_OPTIONS,
            {},
        };
        static const struct verb_syntax syntax = {.verb = "mcp",
                                                  .help = mcp_help,
                                                  .shortopts = ":h",
                                                  .options = options,
                                                  .own = mcp_option};
        const char *http = NULL;
        int r = opts_parse(cli, argc, argv, &syntax, &http);
        if (r >= 0)
                return r;
        struct client *client = cli_client(cli);
        if (!client)
                return EXIT_FAIL;
        /* A client that goes away while we answer is the end, not a signal death. */
        signal(SIGPIPE, SIG_IGN);
        if (client->remote)
                probe_remote(client);
        if (http)
                return mcp_serve_http(client, http) < 0 ? EXIT_FAIL : EXIT_OK;
        struct mcp_server server = {.backend = mcp_client_backend(client)};
        r = serve_stdio(&server);
        if (r < 0 && r != -EPIPE) {
                fprintf(stderr, "paddock mcp: %s\n", strerror(-r));
                return EXIT_FAIL;
        }
        return EXIT_OK;
}

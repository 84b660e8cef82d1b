/* paddock exec NAME [OPTIONS] [--] CMD [ARG...]: run a command in an environment and exit with
 * its exit code.
 *
 * The request asks for "stream":true, so the daemon answers with NDJSON as output arrives,
 * written out live by procout.c. With -d the request asks for "detach":true instead: the daemon
 * answers 201 with the background process it started (see cmd_procs.c) and we exit at once.
 *
 * Options are read up to the first operand that is not an option after NAME (or up to "--"),
 * so `paddock exec box ls -l` runs `ls -l`. */
#include "cli/cli.h"
#include "cli/envpath.h"
#include "cli/opts.h"
#include "cli/output.h"
#include "cli/procout.h"
#include "cli/tty_session.h"
#include "lib/util.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* paddockd takes JSON request bodies up to 8 MiB (stdin with -i is streamed separately). */
#define API_BODY_MAX (8u << 20)

enum {
        OPT_TIMEOUT = OPT_FIRST_VERB_OPTION,
        OPT_MAX_OUTPUT,
};

static const char exec_help[] =
    "Usage: paddock exec NAME [OPTIONS] [--] CMD [ARG...]\n"
    "\n"
    "Run a command in an environment, showing its output as it comes, and exit with the\n"
    "command's exit code (128+N when killed by signal N).\n"
    "\n"
    "  -d, --detach          run it in the background: print its process id and exit 0 at\n"
    "                        once (see paddock ps, logs, wait, kill)\n"
    "  -i, --interactive     send standard input to the command (any size, streamed)\n"
    "  -t, --tty             run it in a terminal inside the environment; with -i (-it) an\n"
    "                        interactive session: the local terminal goes raw and every key\n"
    "                        goes in (standard input must be a terminal); -t alone only\n"
    "                        shows the output as a terminal does\n"
    "  -e, --env K=V         environment variable (repeatable; -e K passes K's value here)\n"
    "  -w, --workdir DIR     working directory inside the environment\n"
    "  -u, --user USER       user name or UID[:GID] to run as (default root)\n"
    "  --timeout DURATION    kill the command after e.g. 30s or 10m\n"
    "  --max-output SIZE     most output kept, e.g. 16M\n"
    "  --json                wait, then print the whole result as JSON (with -d: the\n"
    "                        process object)\n";

static const struct option exec_options[] = {
    {"detach", no_argument, NULL, 'd'},
    {"interactive", no_argument, NULL, 'i'},
    {"tty", no_argument, NULL, 't'},
    PROCESS_OPTIONS,
    {"timeout", required_argument, NULL, OPT_TIMEOUT},
    {"max-output", required_argument, NULL, OPT_MAX_OUTPUT},
    CLI_COMMON_OPTIONS,
    {},
};

struct exec_opts {
        bool detach, interactive, tty;
        const char *timeout;
        json_t *body;
};

static int exec_option(void *userdata, int c, const char *verb)
{
        struct exec_opts *o = userdata;
        switch (c) {
        case 'd':
                o->detach = true;
                return -1;
        case 'i':
                o->interactive = true;
                return -1;
        case 't':
                o->tty = true;
                return -1;
        case OPT_TIMEOUT:
        case OPT_MAX_OUTPUT: {
                const char *key = c == OPT_TIMEOUT ? "timeout" : "max_output";
                if (c == OPT_TIMEOUT)
                        o->timeout = optarg;
                json_t *v = json_string(optarg);
                if (!v || json_object_set_new(o->body, key, v) < 0)
                        return usage_error(verb, "value '%s' is not valid UTF-8", optarg);
                return -1;
        }
        default:
                return process_option(o->body, c, verb, true);
        }
}

/* Options, NAME, options, then the command: either after "--" or from the first operand that
 * is not an option. getopt runs in POSIX order ("+") so it stops there instead of permuting
 * the command's own options in front. */
static int parse_exec_args(struct cli *cli, int argc, char **argv, struct exec_opts *o,
                           const char **ret_name, int *ret_cmd_index)
{
        const char *name = NULL;
        opts_reset();
        for (int round = 0; round < 2; round++) {
                int last = optind > 0 ? optind : 1, c;
                while ((c = getopt_long(argc, argv, "+:hdite:w:u:", exec_options, NULL)) != -1) {
                        int r = exec_option(o, c, "exec");
                        if (r == 0)
                                r = opts_common(cli, c, argv, "exec", exec_help);
                        if (r >= 0)
                                return r;
                        last = optind;
                }
                /* getopt consumed a "--" (as opposed to stopping at an operand): what follows
                 * is all operands. */
                bool dashdash = optind == last + 1 && strcmp(argv[last], "--") == 0;
                if (name)
                        break;
                if (optind >= argc)
                        return usage_error("exec", "missing NAME");
                name = argv[optind++];
                if (dashdash)
                        break;
        }
        if (optind >= argc)
                return usage_error("exec", "missing the command to run (paddock exec %s -- CMD)",
                                   name);
        *ret_name = name;
        *ret_cmd_index = optind;
        return -1;
}

/* The end of a run: what the stream's last line said, on stderr, and the exit code. */
static int finish(const struct procout *x, const struct exec_opts *o)
{
        if (x->truncated)
                fprintf(stderr, "paddock: exec: output was truncated (see --max-output)\n");
        if (x->timed_out) {
                if (o->timeout)
                        fprintf(stderr, "paddock: exec timed out after %s\n", o->timeout);
                else if (x->duration_ms % 1000 == 0)
                        fprintf(stderr, "paddock: exec timed out after %llds\n",
                                x->duration_ms / 1000);
                else
                        fprintf(stderr, "paddock: exec timed out after %.1fs\n",
                                (double)x->duration_ms / 1000);
        }
        return x->exit_code;
}

/* With -i the body is standard input itself, streamed as it is read (any size, binary), and
 * the exec request travels in ?spec=. Without -i the body is the JSON request. */
static bool stdin_as_body;

static ssize_t stdin_source(char *buf, size_t len, void *userdata)
{
        for (;;) {
                ssize_t n = read(STDIN_FILENO, buf, len);
                if (n >= 0)
                        return n;
                if (errno != EINTR) {
                        fprintf(stderr, "paddock: exec: reading stdin: %s\n", strerror(errno));
                        return -1;
                }
        }
}

static void set_exec_body(struct request *req, const char *body)
{
        if (!stdin_as_body) {
                req->body = body;
                req->body_len = strlen(body);
                return;
        }
        req->body = NULL;
        req->source = stdin_source;
        req->source_size = -1;
        req->content_type = "application/octet-stream";
}

static int run_streamed(struct client *client, const char *path, const char *body,
                        const struct exec_opts *o)
{
        struct procout x;
        procout_init(&x, "exec");
        struct request req = {
            .method = "POST",
            .path = path,
        };
        set_exec_body(&req, body);
        int r = EXIT_FAIL;
        if (procout_perform(client, &req, &x) < 0) {
                if (x.broken_pipe)
                        r = 128 + SIGPIPE;
        } else if (!x.have_exit) {
                fprintf(stderr, "paddock: exec: paddockd ended the output stream without an "
                                "exit code\n");
        } else {
                r = finish(&x, o);
        }
        procout_done(&x);
        return r;
}

/* POST the request, buffering the answer. -1 after printing why. */
static int post_buffered(struct client *client, const char *path, const char *body,
                         struct response *ret)
{
        struct request req = {
            .method = "POST",
            .path = path,
        };
        set_exec_body(&req, body);
        struct response resp = {};
        if (client_perform(client, &req, &resp) < 0)
                return -1;
        if (resp.status < 200 || resp.status >= 300) {
                client_print_error(&resp);
                response_done(&resp);
                return -1;
        }
        *ret = resp;
        return 0;
}

/* --json: one buffered request; print the daemon's answer, still exit with the command's code. */
static int run_buffered(struct client *client, const char *path, const char *body)
{
        struct response resp = {};
        if (post_buffered(client, path, body, &resp) < 0)
                return EXIT_FAIL;
        output_raw(&resp);
        json_int_t c = json_integer_value(json_object_get(resp.json, "exit_code"));
        response_done(&resp);
        return c < 0 || c > 255 ? 255 : (int)c;
}

/* -d: the daemon answers 201 with the process object as soon as the command has started. */
static int run_detached(struct client *client, const char *path, const char *body, bool json)
{
        struct response resp = {};
        if (post_buffered(client, path, body, &resp) < 0)
                return EXIT_FAIL;
        const json_t *id = json_object_get(resp.json, "id");
        if (json)
                output_raw(&resp);
        else if (json_is_integer(id))
                printf("%lld\n", (long long)json_integer_value(id));
        else
                output_raw(&resp); /* not what we expect: show what it is */
        response_done(&resp);
        return EXIT_OK;
}

int cmd_exec(struct cli *cli, int argc, char **argv)
{
        struct exec_opts o = {.body = json_object()};
        const char *name = NULL;
        int cmd_index = 0, r;
        char *path = NULL, *text = NULL;

        r = parse_exec_args(cli, argc, argv, &o, &name, &cmd_index);
        if (r >= 0)
                goto out;
        if (o.tty && (o.detach || cli->json)) {
                r = usage_error("exec", "-t does not go with %s", o.detach ? "-d" : "--json");
                goto out;
        }
        json_t *cmd = json_array();
        json_object_set_new(o.body, "cmd", cmd);
        for (int i = cmd_index; i < argc; i++)
                if (json_array_append_new(cmd, json_string(argv[i])) < 0) {
                        r = usage_error("exec", "argument '%s' is not valid UTF-8", argv[i]);
                        goto out;
                }
        if (o.tty) {
                /* A terminal session over the WebSocket endpoint (tty_session.c). */
                json_object_del(o.body, "max_output");
                r = tty_session_run(cli, name, o.body, o.interactive);
                goto out;
        }
        if (o.detach)
                json_object_set_new(o.body, "detach", json_true());
        else
                json_object_set_new(o.body, "stream", json_boolean(!cli->json));

        r = EXIT_FAIL;
        struct client *client = cli_client(cli);
        if (!client)
                goto out;
        path = env_path(client, name, "exec", NULL);
        if (!path)
                goto out;
        text = json_dumps(o.body, JSON_COMPACT);
        if (!text) {
                fprintf(stderr, "paddock: out of memory\n");
                goto out;
        }
        if (o.interactive) {
                char *spec = client_escape(client, text);
                char *full = NULL;
                if (!spec || asprintf(&full, "%s?spec=%s", path, spec) < 0) {
                        free(spec);
                        fprintf(stderr, "paddock: out of memory\n");
                        goto out;
                }
                free(spec);
                free(path);
                path = full;
                stdin_as_body = true;
        }
        if (strlen(text) > API_BODY_MAX) {
                fprintf(stderr, "paddock: exec: the request is larger than the 8 MiB paddockd "
                                "accepts\n");
                goto out;
        }
        if (o.detach)
                r = run_detached(client, path, text, cli->json);
        else if (cli->json)
                r = run_buffered(client, path, text);
        else
                r = run_streamed(client, path, text, &o);
out:
        free(text);
        free(path);
        json_decref(o.body);
        return r;
}

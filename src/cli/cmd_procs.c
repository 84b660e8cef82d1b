/* paddock ps NAME | logs NAME ID [-f] | kill NAME ID... [-s SIG] | wait NAME ID |
 * forget NAME ID...: the background processes of an environment, started with `exec -d`.
 *
 * The daemon keeps each one's record (state, exit code) and its newest 1 MiB of output in
 * memory until it is forgotten, the environment is destroyed or paddockd restarts. logs prints
 * the output the same way exec does (procout.c); wait exits with the process's exit code, as
 * exec would have. */
#include "cli/calls.h"
#include "cli/cli.h"
#include "cli/envpath.h"
#include "cli/opts.h"
#include "cli/output.h"
#include "cli/procout.h"
#include "lib/util.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char ps_help[] =
    "Usage: paddock ps NAME [--json]\n"
    "\n"
    "List the background processes of environment NAME (started with 'paddock exec -d'):\n"
    "id, state, exit code, start time and command. Records of finished processes stay until\n"
    "forgotten (the oldest go first beyond 64 per environment).\n"
    "\n"
    "  --json   print the daemon's answer as JSON\n";

static const char logs_help[] =
    "Usage: paddock logs NAME ID [-f]\n"
    "\n"
    "Print the output of background process ID (its newest 1 MiB), standard output and\n"
    "standard error to ours.\n"
    "\n"
    "  -f, --follow   keep printing output as it comes until the process exits\n"
    "  --json         print the daemon's NDJSON stream as it is\n";

static const char kill_help[] =
    "Usage: paddock kill NAME ID... [-s SIGNAL]\n"
    "\n"
    "Send a signal to background processes. Prints each ID signalled.\n"
    "\n"
    "  -s, --signal SIGNAL   TERM (default), KILL, INT, HUP, QUIT, USR1, USR2, STOP, CONT,\n"
    "                        ALRM, WINCH (SIG prefix optional), or a number\n"
    "  --json                print each process as JSON\n";

static const char wait_help[] =
    "Usage: paddock wait NAME ID\n"
    "\n"
    "Wait until background process ID has exited, then exit with its exit code (128+N when\n"
    "killed by signal N). Prints nothing.\n"
    "\n"
    "  --json   print the result (exit code, duration, timed out) as JSON\n";

static const char forget_help[] =
    "Usage: paddock forget NAME ID...\n"
    "\n"
    "Drop the records and output of finished background processes. Prints each ID removed.\n";

enum { OPT_SIGNAL = OPT_FIRST_VERB_OPTION };

static const struct option logs_options[] = {
    {"follow", no_argument, NULL, 'f'},
    CLI_COMMON_OPTIONS,
    {},
};

static const struct option kill_options[] = {
    {"signal", required_argument, NULL, 's'},
    CLI_COMMON_OPTIONS,
    {},
};

struct procs_args {
        bool follow;
        const char *signal;
};

static int procs_option(void *userdata, int c, const char *verb)
{
        struct procs_args *a = userdata;
        if (c == 'f')
                a->follow = true;
        else if (c == 's')
                a->signal = optarg;
        else
                return 0;
        return -1;
}

/* Options anywhere among the operands; then NAME and at least min_ids, at most max_ids IDs
 * (max_ids -1: any number). -1 to go on with NAME at argv[optind], else the exit code. */
static int parse_args(struct cli *cli, int argc, char **argv, const char *verb, const char *help,
                      const char *shortopts, const struct option *options, int min_ids, int max_ids,
                      struct procs_args *a)
{
        const struct verb_syntax syntax = {
            .verb = verb,
            .help = help,
            .shortopts = shortopts,
            .options = options,
            .own = procs_option,
            OPERANDS_NAMES,
        };
        int r = opts_parse(cli, argc, argv, &syntax, a);
        if (r < 0)
                r = opts_operands(argc, argv, verb, 1 + min_ids, max_ids < 0 ? -1 : 1 + max_ids,
                                  "missing the process ID");
        if (r >= 0)
                return r;
        for (int i = optind + 1; i < argc; i++) {
                const char *id = argv[i];
                if (!*id || strspn(id, "0123456789") != strlen(id) || strlen(id) > 10)
                        return usage_error(verb, "'%s' is not a process ID", id);
        }
        return -1;
}

/* "/v1/envs/NAME/processes[/ID[/action]][?query]". NULL after saying so. */
static char *proc_path(struct client *c, const char *name, const char *id, const char *action,
                       const char *query)
{
        char suffix[64]; /* an ID has at most 10 digits (parse_args) */
        if (BUF_PRINTF(suffix, "processes%s%s%s%s", id ? "/" : "", id ? id : "", action ? "/" : "",
                       action ? action : "") < 0) {
                fprintf(stderr, "paddock: process ID too long\n");
                return NULL;
        }
        return env_path(c, name, suffix, query);
}

static const char *state_cell(const json_t *p)
{
        if (json_is_true(json_object_get(p, "timed_out")))
                return "timed out";
        return json_string_value(json_object_get(p, "state"));
}

static int proc_row(struct table *t, const json_t *p, time_t now)
{
        char id[32], code[32], started[32];
        time_t ts;
        const json_t *exit_code = json_object_get(p, "exit_code");
        snprintf(id, sizeof(id), "%lld", (long long)json_integer_value(json_object_get(p, "id")));
        snprintf(code, sizeof(code), "%lld", (long long)json_integer_value(exit_code));
        const char *cells[] = {
            id,
            state_cell(p),
            json_is_integer(exit_code) ? code : NULL,
            json_timestamp(json_object_get(p, "started_at"), &ts) == 0
                ? human_ago(ts, now, started, sizeof(started))
                : NULL,
            json_string_value(json_object_get(p, "cmd")),
        };
        return table_add(t, cells);
}

int cmd_ps(struct cli *cli, int argc, char **argv)
{
        struct procs_args a = {};
        int r = parse_args(cli, argc, argv, "ps", ps_help, NULL, NULL, 0, 0, &a);
        if (r >= 0)
                return r;
        struct client *client = cli_client(cli);
        char *path = client ? proc_path(client, argv[optind], NULL, NULL, NULL) : NULL;
        static const char *const headers[] = {"ID", "STATE", "EXIT", "STARTED", "CMD"};
        r = call_print_list(cli, path, "processes", headers, ELEMENTSOF(headers), proc_row);
        free(path);
        return r;
}

/* --json: the NDJSON exactly as it arrives. */
static bool raw_sink(const char *data, size_t len, void *userdata)
{
        int r = write_all(STDOUT_FILENO, data, len);
        if (r < 0 && r != -EPIPE)
                fprintf(stderr, "paddock: logs: cannot write output: %s\n", strerror(-r));
        *(int *)userdata = r;
        return r >= 0;
}

static int logs_raw(struct client *client, const char *path)
{
        int wr = 0;
        struct request req = {.method = "GET", .path = path, .sink = raw_sink, .sink_data = &wr};
        struct response resp = {};
        int r = EXIT_FAIL;
        if (client_perform(client, &req, &resp) < 0) {
                if (wr == -EPIPE)
                        r = 128 + SIGPIPE;
        } else if (resp.status < 200 || resp.status >= 300) {
                client_print_error(&resp);
        } else {
                r = EXIT_OK;
        }
        response_done(&resp);
        return r;
}

int cmd_logs(struct cli *cli, int argc, char **argv)
{
        struct procs_args a = {};
        int r = parse_args(cli, argc, argv, "logs", logs_help, ":hf", logs_options, 1, 1, &a);
        if (r >= 0)
                return r;
        const char *name = argv[optind], *id = argv[optind + 1];
        struct client *client = cli_client(cli);
        char *path =
            client ? proc_path(client, name, id, "output", a.follow ? "follow=1" : NULL) : NULL;
        if (!path)
                return EXIT_FAIL;
        if (cli->json) {
                r = logs_raw(client, path);
                free(path);
                return r;
        }
        struct procout o;
        procout_init(&o, "logs");
        struct request req = {.method = "GET", .path = path};
        r = EXIT_FAIL;
        if (procout_perform(client, &req, &o) < 0) {
                if (o.broken_pipe)
                        r = 128 + SIGPIPE;
        } else if (a.follow && !o.have_exit) {
                /* Following ends at the exit line, unless the record went away meanwhile. */
                fprintf(stderr, "paddock: logs: process %s of %s was removed before it exited\n",
                        id, name);
        } else {
                r = EXIT_OK;
        }
        procout_done(&o);
        free(path);
        return r;
}

/* A signal as the daemon takes it: a number, or a name with or without SIG. */
static json_t *signal_json(const char *s)
{
        if (*s && strspn(s, "0123456789") == strlen(s) && strlen(s) <= 3)
                return json_integer(atoi(s));
        return json_string(s);
}

/* One request per ID, going on after failures; print each ID, or the answer with --json. */
static int for_each_id(struct cli *cli, int argc, char **argv, const char *method,
                       const char *action, const json_t *body)
{
        struct client *client = cli_client(cli);
        if (!client)
                return EXIT_FAIL;
        const char *name = argv[optind];
        int r = EXIT_OK;
        for (int i = optind + 1; i < argc; i++) {
                char *path = proc_path(client, name, argv[i], action, NULL);
                if (call_one(cli, method, path, body, argv[i]) != EXIT_OK)
                        r = EXIT_FAIL;
                free(path);
        }
        return r;
}

int cmd_kill(struct cli *cli, int argc, char **argv)
{
        struct procs_args a = {.signal = "TERM"};
        int r = parse_args(cli, argc, argv, "kill", kill_help, ":hs:", kill_options, 1, -1, &a);
        if (r >= 0)
                return r;
        json_t *body = json_pack("{s:o}", "signal", signal_json(a.signal));
        if (!body)
                return usage_error("kill", "'%s' is not a signal", a.signal);
        r = for_each_id(cli, argc, argv, "POST", "signal", body);
        json_decref(body);
        return r;
}

int cmd_wait(struct cli *cli, int argc, char **argv)
{
        struct procs_args a = {};
        int r = parse_args(cli, argc, argv, "wait", wait_help, NULL, NULL, 1, 1, &a);
        if (r >= 0)
                return r;
        struct client *client = cli_client(cli);
        char *path =
            client ? proc_path(client, argv[optind], argv[optind + 1], "wait", NULL) : NULL;
        struct response resp = {};
        r = EXIT_FAIL;
        if (!path || client_call(client, "POST", path, NULL, &resp) < 0)
                goto out;
        if (cli->json)
                output_raw(&resp);
        const json_t *code = json_object_get(resp.json, "exit_code");
        if (!json_is_integer(code)) {
                fprintf(stderr, "paddock: wait: unexpected answer from paddockd (no exit code)\n");
                goto out;
        }
        json_int_t c = json_integer_value(code);
        r = c < 0 || c > 255 ? 255 : (int)c;
out:
        response_done(&resp);
        free(path);
        return r;
}

int cmd_forget(struct cli *cli, int argc, char **argv)
{
        struct procs_args a = {};
        int r = parse_args(cli, argc, argv, "forget", forget_help, NULL, NULL, 1, -1, &a);
        if (r >= 0)
                return r;
        return for_each_id(cli, argc, argv, "DELETE", NULL, NULL);
}

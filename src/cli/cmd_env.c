/* paddock ls / inspect / rm / start / stop / restart / pause / resume: reading and changing the
 * state of environments. Verbs that take several names go on after a failure and exit 1 if
 * any failed. */
#include "cli/calls.h"
#include "cli/cli.h"
#include "cli/envpath.h"
#include "cli/opts.h"
#include "cli/output.h"
#include "lib/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum {
        OPT_LABEL = OPT_FIRST_VERB_OPTION,
        OPT_TIMEOUT,
};

static const char ls_help[] =
    "Usage: paddock ls [--label K=V]... [--json]\n"
    "\n"
    "List environments: name, kind, state, IP address (- when it has none), image, limits,\n"
    "age and expiry.\n"
    "\n"
    "  --label K=V   only those with this label (repeatable: all must match)\n"
    "  --json        print the daemon's answer as JSON\n";

static const char inspect_help[] =
    "Usage: paddock inspect NAME... [--json]\n"
    "\n"
    "Show an environment: state, kind, limits, usage, times, network.\n"
    "\n"
    "  --json   print the daemon's answer unformatted\n";

static const char rm_help[] = "Usage: paddock rm [-f] NAME...\n"
                              "\n"
                              "Destroy environments and everything in them.\n"
                              "\n"
                              "  -f, --force   also when running (it is stopped first)\n";

static const char lifecycle_help[] =
    "Usage: paddock start|stop|restart|pause|resume NAME... [--timeout DURATION]\n"
    "\n"
    "Start, stop, restart, freeze or thaw environments.\n"
    "\n"
    "  --timeout DURATION   stop, restart: how long to wait after SIGTERM before SIGKILL\n"
    "  --json               print each environment as JSON instead of its name\n";

static const struct option ls_options[] = {
    {"label", required_argument, NULL, OPT_LABEL},
    CLI_COMMON_OPTIONS,
    {},
};

static const struct option rm_options[] = {
    {"force", no_argument, NULL, 'f'},
    CLI_COMMON_OPTIONS,
    {},
};

static const struct option lifecycle_options[] = {
    {"timeout", required_argument, NULL, OPT_TIMEOUT},
    CLI_COMMON_OPTIONS,
    {},
};

/* Append "&key=escaped(value)" (no '&' the first time) to *query. */
static int query_add(struct client *c, char **query, const char *key, const char *value)
{
        char *esc = client_escape(c, value);
        char *n = NULL;
        if (esc && asprintf(&n, "%s%s%s=%s", *query ? *query : "", *query ? "&" : "", key, esc) < 0)
                n = NULL;
        free(esc);
        if (!n)
                return -1;
        free(*query);
        *query = n;
        return 0;
}

static const char *size_cell(const json_t *v, char *buf, size_t len)
{
        if (json_is_integer(v))
                return human_size((uint64_t)json_integer_value(v), buf, len);
        return json_string_value(v); /* NULL prints as "-" */
}

static const char *number_cell(const json_t *v, char *buf, size_t len)
{
        if (json_is_integer(v))
                snprintf(buf, len, "%lld", (long long)json_integer_value(v));
        else if (json_is_real(v))
                snprintf(buf, len, "%g", json_real_value(v));
        else
                return json_string_value(v);
        return buf;
}

static int env_row(struct table *t, const json_t *env, time_t now)
{
        const json_t *limits = json_object_get(env, "limits");
        const json_t *net = json_object_get(env, "network");
        char cpus[32], mem[32], pids[32], created[32], expires[32], state[48];
        time_t ts;
        /* paused or stopped by its idle timeout: "paused(idle)", "stopped(idle)" */
        const char *st = json_string_value(json_object_get(env, "state"));
        if (st && json_is_string(json_object_get(env, "idled_at")))
                snprintf(state, sizeof(state), "%s(idle)", st);
        else
                snprintf(state, sizeof(state), "%s", st ? st : "");
        const char *cells[] = {
            json_string_value(json_object_get(env, "name")),
            json_string_value(json_object_get(env, "kind")),
            st ? state : NULL,
            json_string_value(json_object_get(net, "ip")), /* null before it has one */
            json_string_value(json_object_get(env, "image")),
            number_cell(json_object_get(limits, "cpus"), cpus, sizeof(cpus)),
            size_cell(json_object_get(limits, "memory"), mem, sizeof(mem)),
            number_cell(json_object_get(limits, "pids"), pids, sizeof(pids)),
            json_timestamp(json_object_get(env, "created_at"), &ts) == 0
                ? human_ago(ts, now, created, sizeof(created))
                : NULL,
            json_timestamp(json_object_get(env, "expires_at"), &ts) == 0
                ? human_until(ts, now, expires, sizeof(expires))
                : NULL,
        };
        return table_add(t, cells);
}

struct ls_opts {
        char **labels;
        size_t n_labels;
};

static int ls_option(void *userdata, int c, const char *verb)
{
        struct ls_opts *o = userdata;
        if (c != OPT_LABEL)
                return 0;
        if (!strchr(optarg, '=') || optarg[0] == '=')
                return usage_error(verb, "--label wants K=V, not '%s'", optarg);
        o->labels[o->n_labels++] = optarg;
        return -1;
}

static const struct verb_syntax ls_syntax = {
    .verb = "ls",
    .help = ls_help,
    .options = ls_options,
    .own = ls_option,
};

int cmd_ls(struct cli *cli, int argc, char **argv)
{
        struct ls_opts o = {.labels = calloc((size_t)argc, sizeof(char *))};
        char *query = NULL, *path = NULL;

        if (!o.labels)
                return EXIT_FAIL;
        int r = opts_parse(cli, argc, argv, &ls_syntax, &o);
        if (r >= 0)
                goto out;

        r = EXIT_FAIL;
        struct client *client = cli_client(cli);
        if (!client)
                goto out;
        for (size_t i = 0; i < o.n_labels; i++)
                if (query_add(client, &query, "label", o.labels[i]) < 0)
                        goto out;
        if (asprintf(&path, "/v1/envs%s%s", query ? "?" : "", query ? query : "") < 0) {
                path = NULL;
                goto out;
        }
        static const char *const headers[] = {"NAME", "KIND",   "STATE", "IP",      "IMAGE",
                                              "CPUS", "MEMORY", "PIDS",  "CREATED", "EXPIRES"};
        r = call_print_list(cli, path, "envs", headers, ELEMENTSOF(headers), env_row);
out:
        free(query);
        free(path);
        free(o.labels);
        return r;
}

/* One request per NAME: print each result, go on after failures. */
static int for_each_name(struct cli *cli, int argc, char **argv, const char *method,
                         const char *suffix, const char *query, bool print_object)
{
        struct client *client = cli_client(cli);
        if (!client)
                return EXIT_FAIL;
        int r = EXIT_OK;
        for (int i = optind; i < argc; i++) {
                char *path = env_path(client, argv[i], suffix, query);
                if (call_one(cli, method, path, NULL, print_object ? NULL : argv[i]) != EXIT_OK)
                        r = EXIT_FAIL;
                free(path);
        }
        return r;
}

static const struct verb_syntax inspect_syntax = {
    .verb = "inspect",
    .help = inspect_help,
    OPERANDS_NAMES,
};

int cmd_inspect(struct cli *cli, int argc, char **argv)
{
        int r = opts_parse(cli, argc, argv, &inspect_syntax, NULL);
        if (r >= 0)
                return r;
        return for_each_name(cli, argc, argv, "GET", NULL, NULL, true);
}

static int rm_option(void *userdata, int c, const char *verb)
{
        if (c != 'f')
                return 0;
        *(bool *)userdata = true;
        return -1;
}

static const struct verb_syntax rm_syntax = {
    .verb = "rm",
    .help = rm_help,
    .shortopts = ":hf",
    .options = rm_options,
    .own = rm_option,
    OPERANDS_NAMES,
};

int cmd_rm(struct cli *cli, int argc, char **argv)
{
        bool force = false;
        int r = opts_parse(cli, argc, argv, &rm_syntax, &force);
        if (r >= 0)
                return r;
        return for_each_name(cli, argc, argv, "DELETE", NULL, force ? "force=1" : NULL, false);
}

static int timeout_option(void *userdata, int c, const char *verb)
{
        if (c != OPT_TIMEOUT)
                return 0;
        *(const char **)userdata = optarg;
        return -1;
}

int cmd_lifecycle(struct cli *cli, int argc, char **argv)
{
        const char *verb = argv[0]; /* start, stop, restart, pause or resume */
        const char *timeout = NULL;
        const struct verb_syntax syntax = {
            .verb = verb,
            .help = lifecycle_help,
            .options = lifecycle_options,
            .own = timeout_option,
            OPERANDS_NAMES,
        };
        int r = opts_parse(cli, argc, argv, &syntax, &timeout);
        if (r >= 0)
                return r;
        bool stops = strcmp(verb, "stop") == 0 || strcmp(verb, "restart") == 0;
        if (timeout && !stops)
                return usage_error(verb, "--timeout only applies to stop and restart");

        char *query = NULL;
        if (timeout) {
                struct client *client = cli_client(cli);
                if (!client || query_add(client, &query, "timeout", timeout) < 0)
                        return EXIT_FAIL;
        }
        r = for_each_name(cli, argc, argv, "POST", verb, query, false);
        free(query);
        return r;
}

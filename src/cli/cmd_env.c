/* paddock ls / inspect / rm / start / stop / restart / pause / resume: reading and changing the
 * state of environments. Verbs that take several names go on after a failure and exit 1 if
 * any failed. */
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

static const struct option inspect_options[] = {
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

static int add_env_row(struct table *t, const json_t *env, time_t now)
{
        const json_t *limits = json_object_get(env, "limits");
        const json_t *net = json_object_get(env, "network");
        char cpus[32], mem[32], pids[32], created[32], expires[32];
        time_t ts;
        const char *cells[] = {
            json_string_value(json_object_get(env, "name")),
            json_string_value(json_object_get(env, "kind")),
            json_string_value(json_object_get(env, "state")),
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

static int print_env_table(const json_t *envs)
{
        static const char *const headers[] = {"NAME", "KIND",   "STATE", "IP",      "IMAGE",
                                              "CPUS", "MEMORY", "PIDS",  "CREATED", "EXPIRES"};
        struct table *t = table_new(headers, ELEMENTSOF(headers));
        if (!t)
                goto oom;
        time_t now = time(NULL);
        size_t i;
        const json_t *env;
        json_array_foreach(envs, i, env)
        {
                if (add_env_row(t, env, now) < 0)
                        goto oom;
        }
        table_print(t);
        table_free(t);
        return EXIT_OK;
oom:
        table_free(t);
        fprintf(stderr, "paddock: out of memory\n");
        return EXIT_FAIL;
}

int cmd_ls(struct cli *cli, int argc, char **argv)
{
        const char *verb = "ls";
        char **labels = calloc((size_t)argc, sizeof(char *));
        size_t n_labels = 0;
        char *query = NULL, *path = NULL;
        struct response resp = {};
        int r, c;

        if (!labels)
                return EXIT_FAIL;
        opts_reset();
        while ((c = getopt_long(argc, argv, ":h", ls_options, NULL)) != -1) {
                if (c == OPT_LABEL) {
                        if (!strchr(optarg, '=') || optarg[0] == '=') {
                                r = usage_error(verb, "--label wants K=V, not '%s'", optarg);
                                goto out;
                        }
                        labels[n_labels++] = optarg;
                        continue;
                }
                r = opts_common(cli, c, argv, verb, ls_help);
                if (r >= 0)
                        goto out;
        }
        if (optind < argc) {
                r = usage_error(verb, "unexpected argument '%s'", argv[optind]);
                goto out;
        }

        r = EXIT_FAIL;
        struct client *client = cli_client(cli);
        if (!client)
                goto out;
        for (size_t i = 0; i < n_labels; i++)
                if (query_add(client, &query, "label", labels[i]) < 0)
                        goto out;
        if (asprintf(&path, "/v1/envs%s%s", query ? "?" : "", query ? query : "") < 0) {
                path = NULL;
                goto out;
        }
        if (client_call(client, "GET", path, NULL, &resp) < 0)
                goto out;
        if (cli->json) {
                output_raw(&resp);
                r = EXIT_OK;
                goto out;
        }
        const json_t *envs = json_object_get(resp.json, "envs");
        if (!json_is_array(envs)) {
                fprintf(stderr, "paddock: unexpected answer from paddockd (no \"envs\" list)\n");
                goto out;
        }
        r = print_env_table(envs);
out:
        response_done(&resp);
        free(query);
        free(path);
        free(labels);
        return r;
}

/* Parse the options of a verb that takes one or more NAMEs; flag() takes the verb's own options
 * (0 when it took c). -1 to go on with the names from optind on, else the exit code. */
static int parse_names(struct cli *cli, int argc, char **argv, const char *verb, const char *help,
                       const char *shortopts, const struct option *options,
                       int (*flag)(int c, void *ud), void *ud)
{
        int c;
        opts_reset();
        while ((c = getopt_long(argc, argv, shortopts, options, NULL)) != -1) {
                if (flag && flag(c, ud) == 0)
                        continue;
                int r = opts_common(cli, c, argv, verb, help);
                if (r >= 0)
                        return r;
        }
        if (optind >= argc)
                return usage_error(verb, "missing NAME");
        return -1;
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
                const char *name = argv[i];
                char *path = env_path(client, name, suffix, query);
                struct response resp = {};
                if (!path || client_call(client, method, path, NULL, &resp) < 0) {
                        r = EXIT_FAIL;
                } else if (print_object || cli->json) {
                        output_object(&resp, cli->json);
                } else {
                        printf("%s\n", name);
                }
                fflush(stdout);
                response_done(&resp);
                free(path);
        }
        return r;
}

int cmd_inspect(struct cli *cli, int argc, char **argv)
{
        int r = parse_names(cli, argc, argv, "inspect", inspect_help, ":h", inspect_options, NULL,
                            NULL);
        if (r >= 0)
                return r;
        return for_each_name(cli, argc, argv, "GET", NULL, NULL, true);
}

static int rm_flag(int c, void *ud)
{
        if (c != 'f')
                return -1;
        *(bool *)ud = true;
        return 0;
}

int cmd_rm(struct cli *cli, int argc, char **argv)
{
        bool force = false;
        int r = parse_names(cli, argc, argv, "rm", rm_help, ":hf", rm_options, rm_flag, &force);
        if (r >= 0)
                return r;
        return for_each_name(cli, argc, argv, "DELETE", NULL, force ? "force=1" : NULL, false);
}

struct lifecycle_opts {
        const char *timeout;
};

static int lifecycle_flag(int c, void *ud)
{
        if (c != OPT_TIMEOUT)
                return -1;
        ((struct lifecycle_opts *)ud)->timeout = optarg;
        return 0;
}

int cmd_lifecycle(struct cli *cli, int argc, char **argv)
{
        const char *verb = argv[0]; /* start, stop, restart, pause or resume */
        struct lifecycle_opts o = {};
        int r = parse_names(cli, argc, argv, verb, lifecycle_help, ":h", lifecycle_options,
                            lifecycle_flag, &o);
        if (r >= 0)
                return r;
        bool stops = strcmp(verb, "stop") == 0 || strcmp(verb, "restart") == 0;
        if (o.timeout && !stops)
                return usage_error(verb, "--timeout only applies to stop and restart");

        char *query = NULL;
        if (o.timeout) {
                struct client *client = cli_client(cli);
                if (!client || query_add(client, &query, "timeout", o.timeout) < 0)
                        return EXIT_FAIL;
        }
        r = for_each_name(cli, argc, argv, "POST", verb, query, false);
        free(query);
        return r;
}

/* paddock events [--env NAME] [--type T[,T...]] [--json]: what happens to environments, printed
 * live until Ctrl-C (GET /v1/events, an NDJSON stream read piece by piece; every line goes out
 * as soon as it is complete). */
#include "cli/cli.h"
#include "cli/calls.h"
#include "cli/opts.h"
#include "lib/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char events_help[] =
    "Usage: paddock events [--env NAME] [--type TYPE[,TYPE...]] [--json]\n"
    "\n"
    "Print events as they happen, one line each: TIME TYPE ENV DETAIL, until interrupted.\n"
    "Types: created started stopped paused resumed oom expired deleted snapshot fork restore\n"
    "exec_started exec_exited quota_refused. A token sees only its own environments' events.\n"
    "If this reader falls too far behind, the daemon ends the stream (exit status 1, after\n"
    "'paddock: events: fell behind, events were lost').\n"
    "\n"
    "  --env NAME      only events of environment NAME\n"
    "  --type TYPES    only events of these types (comma-separated, or repeat the option)\n"
    "  --json          print the daemon's NDJSON lines as they are\n";

enum { OPT_ENV = OPT_FIRST_VERB_OPTION, OPT_TYPE };

static const struct option events_options[] = {
    {"env", required_argument, NULL, OPT_ENV},
    {"type", required_argument, NULL, OPT_TYPE},
    CLI_COMMON_OPTIONS,
    {},
};

struct events_args {
        const char *env;
        char types[512];
};

static int events_option(void *userdata, int c, const char *verb)
{
        struct events_args *a = userdata;
        if (c == OPT_ENV) {
                a->env = optarg;
                return -1;
        }
        if (c != OPT_TYPE)
                return 0;
        size_t n = strlen(a->types);
        if (n + strlen(optarg) + 2 > sizeof(a->types))
                return usage_error(verb, "too many --type values");
        snprintf(a->types + n, sizeof(a->types) - n, "%s%s", n ? "," : "", optarg);
        return -1;
}

static const struct verb_syntax events_syntax = {
    .verb = "events",
    .help = events_help,
    .options = events_options,
    .own = events_option,
};

struct events_out {
        bool json, overflow;
};

static bool standard_field(const char *k)
{
        return !strcmp(k, "time") || !strcmp(k, "type") || !strcmp(k, "env");
}

static int print_event(const char *line, size_t len, void *data)
{
        struct events_out *o = data;
        json_t *j = json_loadb(line, len, 0, NULL);
        const char *type = json_string_value(json_object_get(j, "type"));
        int r = 0;
        if (!type) {
                fprintf(stderr, "paddock: events: unreadable line from paddockd\n");
                r = -EPROTO;
        } else if (!strcmp(type, "overflow")) {
                o->overflow = true;
        } else if (o->json) {
                r = printf("%.*s\n", (int)len, line) < 0 ? -EIO : 0;
        } else {
                const char *env = json_string_value(json_object_get(j, "env"));
                r = printf("%-24s  %-13s  %-20s ",
                           json_string_value(json_object_get(j, "time")) ?: "-", type,
                           env && *env ? env : "-") < 0
                        ? -EIO
                        : 0;
                const char *k;
                json_t *v;
                json_object_foreach(j, k, v)
                {
                        if (r < 0 || standard_field(k))
                                continue;
                        char *t = json_is_string(v) ? NULL
                                                    : json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
                        if (printf(" %s=%s", k,
                                   json_is_string(v) ? json_string_value(v)
                                   : t               ? t
                                                     : "?") < 0)
                                r = -EIO;
                        free(t);
                }
                if (r >= 0 && printf("\n") < 0)
                        r = -EIO;
        }
        json_decref(j);
        return r;
}

int cmd_events(struct cli *cli, int argc, char **argv)
{
        struct events_args a = {};
        int r = opts_parse(cli, argc, argv, &events_syntax, &a);
        if (r >= 0)
                return r;
        struct client *client = cli_client(cli);
        if (!client)
                return EXIT_FAIL;
        char *env = a.env ? client_escape(client, a.env) : NULL;
        char *types = a.types[0] ? client_escape(client, a.types) : NULL;
        char *path = NULL;
        if ((a.env && !env) || (a.types[0] && !types) ||
            asprintf(&path, "/v1/events%s%s%s%s%s%s", env || types ? "?" : "", env ? "env=" : "",
                     env ? env : "", env && types ? "&" : "", types ? "type=" : "",
                     types ? types : "") < 0) {
                fprintf(stderr, "paddock: out of memory\n");
                free(env);
                free(types);
                return EXIT_FAIL;
        }
        free(env);
        free(types);
        struct events_out o = {.json = cli->json};
        if (!o.json) {
                printf("%-24s  %-13s  %-20s  %s\n", "TIME", "TYPE", "ENV", "DETAIL");
                fflush(stdout);
        }
        r = call_stream_lines(cli, path, "events", print_event, &o);
        if (r == EXIT_OK && o.overflow) {
                fprintf(stderr, "paddock: events: fell behind, events were lost\n");
                r = EXIT_FAIL;
        } /* else EXIT_OK: the daemon shut down */
        free(path);
        return r;
}

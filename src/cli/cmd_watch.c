/* paddock watch NAME PATH [--no-recursive] [--json]: the changes below a directory inside an
 * environment, printed as they happen until Ctrl-C or the end of the stream (the environment
 * stopped, or the directory was removed).
 *
 * One GET of /v1/envs/NAME/files/watch, an NDJSON stream read piece by piece. Every line goes
 * out as soon as it is complete (stdout is flushed per piece: a pipe reader sees events live,
 * and Ctrl-C, which ends us by the default action, loses nothing already received). The
 * daemon's empty keep-alive lines are not printed. */
#include "cli/cli.h"
#include "cli/envpath.h"
#include "cli/calls.h"
#include "cli/opts.h"
#include "lib/base64.h"
#include "lib/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char watch_help[] =
    "Usage: paddock watch NAME PATH [--no-recursive] [--json]\n"
    "\n"
    "Print the changes below directory PATH inside environment NAME as they happen, one line\n"
    "'EVENT PATH' each (create, modify, delete, move_from, move_to, attrib), until interrupted\n"
    "or the environment stops. Directories below PATH are watched too, new ones as they appear\n"
    "(at most 8192, 32 levels deep); symlinks are never followed. A line 'overflow' means that\n"
    "events were lost because they came faster than they were read.\n"
    "\n"
    "  --no-recursive   watch PATH itself only\n"
    "  --json           print the daemon's NDJSON lines as they are\n";

enum { OPT_NO_RECURSIVE = OPT_FIRST_VERB_OPTION };

static const struct option watch_options[] = {
    {"no-recursive", no_argument, NULL, OPT_NO_RECURSIVE},
    CLI_COMMON_OPTIONS,
    {},
};

/* "EVENT PATH\n" (a base64 path decoded), or the line itself with --json. */
static int print_line(const char *line, size_t len, void *data)
{
        if (*(const bool *)data)
                return printf("%.*s\n", (int)len, line) < 0 ? -EIO : 0;
        json_error_t err;
        json_t *j = json_loadb(line, len, 0, &err);
        const char *event = json_string_value(json_object_get(j, "event"));
        const json_t *path = json_object_get(j, "path");
        int r = 0;
        if (!event) {
                fprintf(stderr, "paddock: watch: unreadable line from paddockd: %s\n",
                        j ? "no event" : err.text);
                r = -EPROTO;
        } else if (!json_is_string(path)) {
                r = printf("%s\n", event) < 0 ? -EIO : 0; /* overflow */
        } else if (json_is_string(json_object_get(j, "encoding"))) {
                size_t n = json_string_length(path);
                unsigned char *buf = malloc(n / 4 * 3 + 3);
                long m = buf ? base64_decode(json_string_value(path), n, buf) : -1;
                if (m < 0) {
                        fprintf(stderr, "paddock: watch: bad base64 path from paddockd\n");
                        r = -EPROTO;
                } else if (printf("%s %.*s\n", event, (int)m, (const char *)buf) < 0) {
                        r = -EIO;
                }
                free(buf);
        } else {
                r = printf("%s %s\n", event, json_string_value(path)) < 0 ? -EIO : 0;
        }
        json_decref(j);
        return r;
}

static int no_recursive_option(void *userdata, int c, const char *verb)
{
        if (c != OPT_NO_RECURSIVE)
                return 0;
        *(bool *)userdata = false;
        return -1;
}

static const struct verb_syntax watch_syntax = {
    .verb = "watch",
    .help = watch_help,
    .options = watch_options,
    .own = no_recursive_option,
    OPERANDS(2, 2, "needs NAME and PATH"),
};

int cmd_watch(struct cli *cli, int argc, char **argv)
{
        bool recursive = true;
        int r = opts_parse(cli, argc, argv, &watch_syntax, &recursive);
        if (r >= 0)
                return r;
        const char *name = argv[optind], *dir = argv[optind + 1];
        if (dir[0] != '/')
                return usage_error("watch", "PATH must be absolute (inside the environment)");
        struct client *client = cli_client(cli);
        if (!client)
                return EXIT_FAIL;
        char *esc = client_escape(client, dir), *query = NULL, *path = NULL;
        if (esc && asprintf(&query, "path=%s%s", esc, recursive ? "" : "&recursive=0") < 0)
                query = NULL;
        free(esc);
        if (!query) {
                fprintf(stderr, "paddock: out of memory\n");
                return EXIT_FAIL;
        }
        path = env_path(client, name, "files/watch", query);
        free(query);
        if (!path)
                return EXIT_FAIL;
        bool json = cli->json;
        r = call_stream_lines(cli, path, "watch", print_line, &json);
        /* EXIT_OK: the environment stopped, or PATH went away */
        free(path);
        return r;
}

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
#include "cli/lines.h"
#include "cli/opts.h"
#include "lib/base64.h"
#include "lib/util.h"

#include <signal.h>
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

struct watch_out {
        bool json;
        bool broken_pipe, failed;
        struct lines lines;
};

/* "EVENT PATH\n" (a base64 path decoded), or the line itself with --json. */
static int print_line(struct watch_out *o, const char *line, size_t len)
{
        if (o->json)
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

static int on_line(char *line, size_t len, void *userdata)
{
        struct watch_out *o = userdata;
        if (len == 0)
                return 0; /* keep-alive */
        int r = print_line(o, line, len);
        if (r < 0)
                o->failed = true;
        return r;
}

static bool sink(const char *data, size_t len, void *userdata)
{
        struct watch_out *o = userdata;
        int r = lines_feed(&o->lines, data, len, on_line, o);
        if (r >= 0 && fflush(stdout) != 0)
                r = -errno;
        if (r == -EPIPE)
                o->broken_pipe = true;
        else if (r < 0 && !o->failed)
                fprintf(stderr, "paddock: watch: cannot write output: %s\n", strerror(-r));
        o->failed |= r < 0;
        return r >= 0;
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
        struct watch_out o = {.json = cli->json, .lines = {.max = 1u << 20}};
        struct request req = {.method = "GET", .path = path, .sink = sink, .sink_data = &o};
        struct response resp = {};
        r = EXIT_FAIL;
        if (client_perform(client, &req, &resp) < 0) {
                if (o.broken_pipe)
                        r = 128 + SIGPIPE;
        } else if (resp.status < 200 || resp.status >= 300) {
                client_print_error(&resp);
        } else if (lines_finish(&o.lines, on_line, &o) >= 0 && fflush(stdout) == 0) {
                r = EXIT_OK; /* the environment stopped, or PATH went away */
        }
        response_done(&resp);
        lines_done(&o.lines);
        free(path);
        return r;
}

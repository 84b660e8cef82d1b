#include "cli/calls.h"

#include "cli/lines.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

int call_print_list(struct cli *cli, const char *path, const char *key, const char *const *headers,
                    size_t n_cols, list_row_fn row)
{
        struct client *client = cli_client(cli);
        struct response resp = {};
        struct table *t = NULL;
        int r = EXIT_FAIL;
        if (!client || !path || client_call(client, "GET", path, NULL, &resp) < 0)
                goto out;
        if (cli->json) {
                output_raw(&resp);
                r = EXIT_OK;
                goto out;
        }
        const json_t *items = json_object_get(resp.json, key);
        if (!json_is_array(items)) {
                fprintf(stderr, "paddock: unexpected answer from paddockd (no \"%s\" list)\n", key);
                goto out;
        }
        t = table_new(headers, n_cols);
        if (!t)
                goto oom;
        time_t now = time(NULL);
        size_t i;
        const json_t *item;
        json_array_foreach(items, i, item)
        {
                if (row(t, item, now) < 0)
                        goto oom;
        }
        table_print(t);
        r = EXIT_OK;
        goto out;
oom:
        fprintf(stderr, "paddock: out of memory\n");
out:
        table_free(t);
        response_done(&resp);
        return r;
}

int call_one(struct cli *cli, const char *method, const char *path, const json_t *body,
             const char *plain)
{
        struct client *client = cli_client(cli);
        struct response resp = {};
        int r = EXIT_FAIL;
        if (client && path && client_call(client, method, path, body, &resp) == 0) {
                if (!plain || cli->json)
                        output_object(&resp, cli->json);
                else
                        printf("%s\n", plain);
                r = EXIT_OK;
        }
        fflush(stdout);
        response_done(&resp);
        return r;
}

int call_delete_each(struct cli *cli, const char *prefix, int argc, char **argv)
{
        struct client *client = cli_client(cli);
        if (!client)
                return EXIT_FAIL;
        int r = EXIT_OK;
        for (int i = optind; i < argc; i++) {
                char *esc = client_escape(client, argv[i]);
                char *path = NULL;
                if (!esc || asprintf(&path, "%s/%s", prefix, esc) < 0)
                        path = NULL;
                if (call_one(cli, "DELETE", path, NULL, argv[i]) != EXIT_OK)
                        r = EXIT_FAIL;
                free(path);
                free(esc);
        }
        return r;
}

struct line_stream {
        const char *verb;
        line_print_fn print;
        void *data;
        struct lines lines;
        bool failed, broken_pipe;
};

static int stream_line(char *line, size_t len, void *userdata)
{
        struct line_stream *st = userdata;
        if (len == 0)
                return 0; /* keep-alive */
        int r = st->print(line, len, st->data);
        if (r < 0)
                st->failed = true;
        return r;
}

static bool stream_sink(const char *data, size_t len, void *userdata)
{
        struct line_stream *st = userdata;
        int r = lines_feed(&st->lines, data, len, stream_line, st);
        if (r >= 0 && fflush(stdout) != 0)
                r = -errno;
        if (r == -EPIPE)
                st->broken_pipe = true;
        else if (r < 0 && !st->failed)
                fprintf(stderr, "paddock: %s: cannot write output: %s\n", st->verb, strerror(-r));
        st->failed |= r < 0;
        return r >= 0;
}

int call_stream_lines(struct cli *cli, const char *path, const char *verb, line_print_fn print,
                      void *data)
{
        struct client *client = cli_client(cli);
        if (!client)
                return EXIT_FAIL;
        struct line_stream st = {.verb = verb, .print = print, .data = data,
                                 .lines = {.max = 1u << 20}};
        struct request req = {.method = "GET", .path = path, .sink = stream_sink, .sink_data = &st};
        struct response resp = {};
        int r = EXIT_FAIL;
        if (client_perform(client, &req, &resp) < 0) {
                if (st.broken_pipe)
                        r = 128 + SIGPIPE;
        } else if (resp.status < 200 || resp.status >= 300) {
                client_print_error(&resp);
        } else if (lines_finish(&st.lines, stream_line, &st) >= 0 && fflush(stdout) == 0) {
                r = EXIT_OK;
        }
        response_done(&resp);
        lines_done(&st.lines);
        return r;
}

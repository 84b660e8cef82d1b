#include "cli/calls.h"

#include <getopt.h>
#include <stdio.h>

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

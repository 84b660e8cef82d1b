/* paddock snapshot NAME [SNAP] | snapshot ls NAME | snapshot rm NAME SNAP...
 * paddock restore NAME SNAP | fork NAME NEW [--snapshot SNAP] | commit NAME IMAGE
 *
 * Copy-on-write copies of a computer's disk (btrfs driver). A running computer is frozen for
 * the moment its snapshot is taken; restore wants it stopped. */
#include "cli/cli.h"
#include "cli/envpath.h"
#include "cli/opts.h"
#include "cli/output.h"
#include "lib/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char snapshot_help[] =
    "Usage: paddock snapshot NAME [SNAP]      take a snapshot (name: snap-DATE-TIME)\n"
    "       paddock snapshot ls NAME          list the snapshots of NAME\n"
    "       paddock snapshot rm NAME SNAP...  remove snapshots\n"
    "\n"
    "A snapshot is a read-only copy-on-write copy of a computer's disk, taken in\n"
    "milliseconds; a running computer is frozen while it is taken, so the copy is\n"
    "consistent. Use it with 'paddock restore' and 'paddock fork --snapshot'.\n";

static const char restore_help[] =
    "Usage: paddock restore NAME SNAP\n"
    "\n"
    "Replace the disk of the stopped computer NAME by its snapshot SNAP (the snapshot\n"
    "stays). A running computer must be stopped first.\n";

static const char fork_help[] =
    "Usage: paddock fork NAME NEW [--snapshot SNAP]\n"
    "\n"
    "Create and start computer NEW as a copy of NAME (as it is now, or its snapshot SNAP),\n"
    "with the same image, limits, variables, labels and network policy, and its own ids and\n"
    "address. The copy is copy-on-write: it costs almost no disk until it changes.\n"
    "\n"
    "  --snapshot SNAP   copy this snapshot of NAME instead of its current disk\n"
    "  --json            print the new environment as JSON\n";

static const char commit_help[] =
    "Usage: paddock commit NAME IMAGE\n"
    "\n"
    "Turn the disk of computer NAME into the new read-only image IMAGE (a running computer\n"
    "is frozen for the moment it takes); 'paddock image ls' lists it.\n";

enum { OPT_SNAPSHOT = OPT_FIRST_VERB_OPTION };

static const struct option common_options[] = {
    CLI_COMMON_OPTIONS,
    {},
};

static const struct option fork_options[] = {
    {"snapshot", required_argument, NULL, OPT_SNAPSHOT},
    CLI_COMMON_OPTIONS,
    {},
};

/* Parse the common options; -1 to go on, else the exit code. */
static int parse(struct cli *cli, int argc, char **argv, const char *verb, const char *help,
                 const struct option *options, const char **ret_snapshot)
{
        int c;
        opts_reset();
        while ((c = getopt_long(argc, argv, ":h", options, NULL)) != -1) {
                if (c == OPT_SNAPSHOT && ret_snapshot) {
                        *ret_snapshot = optarg;
                        continue;
                }
                int r = opts_common(cli, c, argv, verb, help);
                if (r >= 0)
                        return r;
        }
        return -1;
}

static int operands(const char *verb, int argc, int min, int max, const char *missing)
{
        int n = argc - optind;
        if (n < min)
                return usage_error(verb, "missing %s", missing);
        if (max >= 0 && n > max)
                return usage_error(verb, "unexpected argument");
        return -1;
}

/* POST body to NAME's suffix; print field of the answer (or all of it with --json). */
static int post(struct cli *cli, const char *name, const char *suffix, json_t *body,
                const char *field)
{
        struct client *client = cli_client(cli);
        char *path = client ? env_path(client, name, suffix, NULL) : NULL;
        struct response resp = {};
        int r = EXIT_FAIL;
        if (body && path && client_call(client, "POST", path, body, &resp) == 0) {
                if (cli->json)
                        output_raw(&resp);
                else
                        printf("%s\n", json_string_value(json_object_get(resp.json, field)));
                r = EXIT_OK;
        }
        response_done(&resp);
        free(path);
        json_decref(body);
        return r;
}

static int snapshot_ls(struct cli *cli, int argc, char **argv)
{
        const char *verb = "snapshot ls";
        int r = parse(cli, argc, argv, verb, snapshot_help, common_options, NULL);
        if (r < 0)
                r = operands(verb, argc, 1, 1, "NAME");
        if (r >= 0)
                return r;
        struct client *client = cli_client(cli);
        char *path = client ? env_path(client, argv[optind], "snapshots", NULL) : NULL;
        struct response resp = {};
        r = EXIT_FAIL;
        if (!path || client_call(client, "GET", path, NULL, &resp) < 0)
                goto out;
        if (cli->json) {
                output_raw(&resp);
                r = EXIT_OK;
                goto out;
        }
        const json_t *snaps = json_object_get(resp.json, "snapshots");
        static const char *const headers[] = {"SNAPSHOT", "CREATED"};
        struct table *t = table_new(headers, ELEMENTSOF(headers));
        r = t ? EXIT_OK : EXIT_FAIL;
        size_t i;
        const json_t *s;
        time_t now = time(NULL);
        json_array_foreach(snaps, i, s)
        {
                char ago[32] = "-";
                time_t when;
                if (json_timestamp(json_object_get(s, "created_at"), &when) == 0)
                        human_ago(when, now, ago, sizeof(ago));
                const char *cells[] = {json_string_value(json_object_get(s, "name")), ago};
                if (!t || table_add(t, cells) < 0) {
                        r = EXIT_FAIL;
                        break;
                }
        }
        if (r == EXIT_OK)
                table_print(t);
        table_free(t);
out:
        response_done(&resp);
        free(path);
        return r;
}

static int snapshot_rm(struct cli *cli, int argc, char **argv)
{
        const char *verb = "snapshot rm";
        int r = parse(cli, argc, argv, verb, snapshot_help, common_options, NULL);
        if (r < 0)
                r = operands(verb, argc, 2, -1, "NAME and SNAP");
        if (r >= 0)
                return r;
        struct client *client = cli_client(cli);
        if (!client)
                return EXIT_FAIL;
        r = EXIT_OK;
        for (int i = optind + 1; i < argc; i++) {
                char *snap = client_escape(client, argv[i]);
                char suffix[600];
                snprintf(suffix, sizeof(suffix), "snapshots/%s", snap ? snap : "");
                free(snap);
                char *path = env_path(client, argv[optind], suffix, NULL);
                struct response resp = {};
                if (!path || client_call(client, "DELETE", path, NULL, &resp) < 0)
                        r = EXIT_FAIL;
                else if (!cli->json)
                        printf("%s\n", argv[i]);
                else
                        output_raw(&resp);
                response_done(&resp);
                free(path);
        }
        return r;
}

int cmd_snapshot(struct cli *cli, int argc, char **argv)
{
        /* "snapshot ls X" / "snapshot rm X S": subcommands when followed by operands (an
         * environment named "ls" is still "paddock snapshot ls"). */
        if (argc >= 3 && (!strcmp(argv[1], "ls") || !strcmp(argv[1], "list")))
                return snapshot_ls(cli, argc - 1, argv + 1);
        if (argc >= 3 && (!strcmp(argv[1], "rm") || !strcmp(argv[1], "remove")))
                return snapshot_rm(cli, argc - 1, argv + 1);
        const char *verb = "snapshot";
        int r = parse(cli, argc, argv, verb, snapshot_help, common_options, NULL);
        if (r < 0)
                r = operands(verb, argc, 1, 2, "NAME");
        if (r >= 0)
                return r;
        json_t *body = json_object();
        if (argc - optind == 2)
                json_object_set_new(body, "name", json_string(argv[optind + 1]));
        return post(cli, argv[optind], "snapshots", body, "name");
}

int cmd_restore(struct cli *cli, int argc, char **argv)
{
        int r = parse(cli, argc, argv, "restore", restore_help, common_options, NULL);
        if (r < 0)
                r = operands("restore", argc, 2, 2, "NAME and SNAP");
        if (r >= 0)
                return r;
        json_t *body = json_object();
        json_object_set_new(body, "snapshot", json_string(argv[optind + 1]));
        return post(cli, argv[optind], "restore", body, "name");
}

int cmd_fork(struct cli *cli, int argc, char **argv)
{
        const char *snap = NULL;
        int r = parse(cli, argc, argv, "fork", fork_help, fork_options, &snap);
        if (r < 0)
                r = operands("fork", argc, 2, 2, "NAME and NEW");
        if (r >= 0)
                return r;
        json_t *body = json_object();
        json_object_set_new(body, "name", json_string(argv[optind + 1]));
        if (snap)
                json_object_set_new(body, "snapshot", json_string(snap));
        return post(cli, argv[optind], "fork", body, "name");
}

int cmd_commit(struct cli *cli, int argc, char **argv)
{
        int r = parse(cli, argc, argv, "commit", commit_help, common_options, NULL);
        if (r < 0)
                r = operands("commit", argc, 2, 2, "NAME and IMAGE");
        if (r >= 0)
                return r;
        json_t *body = json_object();
        json_object_set_new(body, "image", json_string(argv[optind + 1]));
        return post(cli, argv[optind], "commit", body, "name");
}

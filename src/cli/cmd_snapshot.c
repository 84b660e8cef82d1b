/* paddock snapshot NAME [SNAP] | snapshot ls NAME | snapshot rm NAME SNAP...
 * paddock restore NAME SNAP | fork NAME NEW [--snapshot SNAP] | commit NAME IMAGE
 *
 * Copy-on-write copies of a computer's disk (btrfs driver). A running computer is frozen for
 * the moment its snapshot is taken; restore wants it stopped. */
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

static const struct option fork_options[] = {
    {"snapshot", required_argument, NULL, OPT_SNAPSHOT},
    CLI_COMMON_OPTIONS,
    {},
};

static int snapshot_option(void *userdata, int c, const char *verb)
{
        if (c != OPT_SNAPSHOT)
                return 0;
        *(const char **)userdata = optarg;
        return -1;
}

/* The common options (and fork's --snapshot, when ret_snapshot), then min to max operands
 * (these verbs do not name the extra one). -1 to go on, else the exit code. */
static int parse(struct cli *cli, int argc, char **argv, const char *verb, const char *help,
                 int min, int max, const char *missing, const char **ret_snapshot)
{
        const struct verb_syntax syntax = {
            .verb = verb,
            .help = help,
            .options = ret_snapshot ? fork_options : NULL,
            .own = ret_snapshot ? snapshot_option : NULL,
            .max = -1,
        };
        int r = opts_parse(cli, argc, argv, &syntax, ret_snapshot);
        if (r >= 0)
                return r;
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

static int snapshot_row(struct table *t, const json_t *s, time_t now)
{
        char ago[32] = "-";
        time_t when;
        if (json_timestamp(json_object_get(s, "created_at"), &when) == 0)
                human_ago(when, now, ago, sizeof(ago));
        const char *cells[] = {json_string_value(json_object_get(s, "name")), ago};
        return table_add(t, cells);
}

static int snapshot_ls(struct cli *cli, int argc, char **argv)
{
        int r = parse(cli, argc, argv, "snapshot ls", snapshot_help, 1, 1, "NAME", NULL);
        if (r >= 0)
                return r;
        struct client *client = cli_client(cli);
        char *path = client ? env_path(client, argv[optind], "snapshots", NULL) : NULL;
        static const char *const headers[] = {"SNAPSHOT", "CREATED"};
        r = call_print_list(cli, path, "snapshots", headers, ELEMENTSOF(headers), snapshot_row);
        free(path);
        return r;
}

static int snapshot_rm(struct cli *cli, int argc, char **argv)
{
        int r = parse(cli, argc, argv, "snapshot rm", snapshot_help, 2, -1, "NAME and SNAP", NULL);
        if (r >= 0)
                return r;
        struct client *client = cli_client(cli);
        if (!client)
                return EXIT_FAIL;
        r = EXIT_OK;
        for (int i = optind + 1; i < argc; i++) {
                char *snap = client_escape(client, argv[i]), *suffix = NULL, *path = NULL;
                if (snap && asprintf(&suffix, "snapshots/%s", snap) >= 0)
                        path = env_path(client, argv[optind], suffix, NULL);
                else
                        suffix = NULL;
                if (call_one(cli, "DELETE", path, NULL, argv[i]) != EXIT_OK)
                        r = EXIT_FAIL;
                free(path);
                free(suffix);
                free(snap);
        }
        return r;
}

int cmd_snapshot(struct cli *cli, int argc, char **argv)
{
        /* "snapshot ls X" / "snapshot rm X S": subcommands when followed by operands (an
         * environment named "ls" is still "paddock snapshot ls"). */
        static const struct subverb subs[] = {
            {"ls", snapshot_ls},
            {"list", snapshot_ls},
            {"rm", snapshot_rm},
            {"remove", snapshot_rm},
        };
        const struct subverb *sub =
            argc >= 3 ? subverb_find(subs, ELEMENTSOF(subs), argv[1]) : NULL;
        if (sub)
                return sub->run(cli, argc - 1, argv + 1);
        int r = parse(cli, argc, argv, "snapshot", snapshot_help, 1, 2, "NAME", NULL);
        if (r >= 0)
                return r;
        json_t *body = json_object();
        if (argc - optind == 2)
                json_object_set_new(body, "name", json_string(argv[optind + 1]));
        return post(cli, argv[optind], "snapshots", body, "name");
}

/* restore, fork and commit: NAME and one more operand, POSTed as {key: operand} to NAME's
 * route; the new or restored environment's name is printed. */
struct pair_verb {
        const char *verb, *help, *missing, *route, *key;
};

static int pair_verb_run(struct cli *cli, int argc, char **argv, const struct pair_verb *v,
                         bool takes_snapshot)
{
        const char *snap = NULL;
        int r = parse(cli, argc, argv, v->verb, v->help, 2, 2, v->missing,
                      takes_snapshot ? &snap : NULL);
        if (r >= 0)
                return r;
        json_t *body = json_object();
        json_object_set_new(body, v->key, json_string(argv[optind + 1]));
        if (snap)
                json_object_set_new(body, "snapshot", json_string(snap));
        return post(cli, argv[optind], v->route, body, "name");
}

int cmd_restore(struct cli *cli, int argc, char **argv)
{
        static const struct pair_verb v = {"restore", restore_help, "NAME and SNAP", "restore",
                                           "snapshot"};
        return pair_verb_run(cli, argc, argv, &v, false);
}

int cmd_fork(struct cli *cli, int argc, char **argv)
{
        static const struct pair_verb v = {"fork", fork_help, "NAME and NEW", "fork", "name"};
        return pair_verb_run(cli, argc, argv, &v, true);
}

int cmd_commit(struct cli *cli, int argc, char **argv)
{
        static const struct pair_verb v = {"commit", commit_help, "NAME and IMAGE", "commit",
                                           "image"};
        return pair_verb_run(cli, argc, argv, &v, false);
}

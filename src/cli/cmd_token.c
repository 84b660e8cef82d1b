/* paddock token create NAME [OPTIONS] | token ls | token rm NAME...
 *
 * API tokens for agents and remote clients (administrators only). The secret is printed once,
 * by create; the daemon keeps only its hash. */
#include "cli/calls.h"
#include "cli/cli.h"
#include "cli/opts.h"
#include "cli/output.h"
#include "lib/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char token_help[] =
    "Usage: paddock token create NAME [OPTIONS]   make a token; prints its secret once\n"
    "       paddock token ls                      list tokens (never their secrets)\n"
    "       paddock token rm NAME...              revoke tokens: their sessions end at once\n"
    "\n"
    "A token is sent as 'Authorization: Bearer SECRET' (the CLI sends $PADDOCK_TOKEN).\n"
    "An agent token sees and acts only on the environments it created, may use images\n"
    "but not change them, and is held to its quotas. Managing tokens needs an\n"
    "administrator: the local socket without a token, or a token made with --admin.\n";

static const char token_create_help[] =
    "Usage: paddock token create NAME [OPTIONS]\n"
    "\n"
    "Make the token NAME and print its secret: it is shown this once and cannot be\n"
    "shown again (the daemon stores only its SHA-256).\n"
    "\n"
    "  --admin             an administrator token (sees everything, manages tokens)\n"
    "  --max-envs N        at most N environments at a time\n"
    "  --max-cpus N        at most N CPUs summed over its running environments\n"
    "  --max-memory SIZE   at most SIZE of memory summed over its running environments\n"
    "  --max-disk SIZE     at most SIZE of disk limits summed over its computers\n"
    "  --rate N/s          at most N requests per second (through the network gateway)\n"
    "  --expires DUR       the token stops working after DUR (90m, 24h, 30d)\n"
    "  --json              print the token and its secret as JSON\n";

static const char token_ls_help[] = "Usage: paddock token ls [--json]\n"
                                    "\n"
                                    "List the tokens with their limits; secrets are never shown.\n";

static const char token_rm_help[] =
    "Usage: paddock token rm NAME...\n"
    "\n"
    "Revoke tokens: requests with them are refused from now on, and their open shells,\n"
    "exec sessions and streams end at once.\n";

enum {
        OPT_ADMIN = OPT_FIRST_VERB_OPTION,
        OPT_MAX_ENVS,
        OPT_MAX_CPUS,
        OPT_MAX_MEMORY,
        OPT_MAX_DISK,
        OPT_RATE,
        OPT_EXPIRES,
};

static const struct option create_options[] = {
    {"admin", no_argument, NULL, OPT_ADMIN},
    {"max-envs", required_argument, NULL, OPT_MAX_ENVS},
    {"max-cpus", required_argument, NULL, OPT_MAX_CPUS},
    {"max-memory", required_argument, NULL, OPT_MAX_MEMORY},
    {"max-disk", required_argument, NULL, OPT_MAX_DISK},
    {"rate", required_argument, NULL, OPT_RATE},
    {"expires", required_argument, NULL, OPT_EXPIRES},
    CLI_COMMON_OPTIONS,
    {},
};

/* The option's value goes to the API as the string given: the daemon checks it. */
static int create_option(void *userdata, int c, const char *verb)
{
        static const struct {
                int opt;
                const char *field;
        } fields[] = {
            {OPT_MAX_ENVS, "max_envs"}, {OPT_MAX_CPUS, "max_cpus"}, {OPT_MAX_MEMORY, "max_memory"},
            {OPT_MAX_DISK, "max_disk"}, {OPT_RATE, "rate"},         {OPT_EXPIRES, "expires"}};
        json_t *body = userdata;
        if (c == OPT_ADMIN)
                return json_object_set_new(body, "admin", json_true()) < 0 ? EXIT_FAIL : -1;
        for (size_t i = 0; i < ELEMENTSOF(fields); i++)
                if (c == fields[i].opt)
                        return json_object_set_new(body, fields[i].field, json_string(optarg)) < 0
                                   ? EXIT_FAIL
                                   : -1;
        return 0;
}

static const struct verb_syntax token_create_syntax = {
    .verb = "token create",
    .help = token_create_help,
    .options = create_options,
    .own = create_option,
    OPERANDS_NAME,
};

static int token_create(struct cli *cli, int argc, char **argv)
{
        _cleanup_(json_decrefp) json_t *body = json_object();
        if (!body)
                return EXIT_FAIL;
        int r = opts_parse(cli, argc, argv, &token_create_syntax, body);
        if (r >= 0)
                return r;
        json_object_set_new(body, "name", json_string(argv[optind]));
        struct client *client = cli_client(cli);
        struct response resp = {};
        r = EXIT_FAIL;
        if (client && client_call(client, "POST", "/v1/tokens", body, &resp) == 0) {
                if (cli->json) {
                        output_raw(&resp);
                } else {
                        printf("%s\n", json_string_value(json_object_get(resp.json, "secret")));
                        fprintf(stderr,
                                "paddock: token %s created. Keep the secret above: it cannot be "
                                "shown again.\n",
                                argv[optind]);
                }
                r = EXIT_OK;
        }
        fflush(stdout);
        response_done(&resp);
        return r;
}

/* "envs=5 cpus=2 memory=4G disk=20G", or "-" when the token has no limits. */
static void limits_text(const json_t *t, char *buf, size_t len)
{
        static const char *const keys[][2] = {{"max_envs", "envs"},
                                              {"max_cpus", "cpus"},
                                              {"max_memory", "memory"},
                                              {"max_disk", "disk"}};
        size_t used = 0;
        buf[0] = 0;
        for (size_t i = 0; i < ELEMENTSOF(keys) && used < len; i++) {
                const json_t *v = json_object_get(t, keys[i][0]);
                char val[32];
                if (json_is_integer(v) && i >= 2)
                        human_size((uint64_t)json_integer_value(v), val, sizeof(val));
                else if (json_is_integer(v))
                        snprintf(val, sizeof(val), "%lld", (long long)json_integer_value(v));
                else if (json_is_real(v))
                        snprintf(val, sizeof(val), "%g", json_real_value(v));
                else
                        continue;
                int n =
                    snprintf(buf + used, len - used, "%s%s=%s", used ? " " : "", keys[i][1], val);
                used += n > 0 ? (size_t)n : 0;
        }
        if (!buf[0])
                snprintf(buf, len, "-");
}

static int token_row(struct table *t, const json_t *tok, time_t now)
{
        char limits[160], rate[32] = "-", expires[48] = "never", created[32] = "-";
        limits_text(tok, limits, sizeof(limits));
        double rps = json_number_value(json_object_get(tok, "rate"));
        if (rps > 0)
                snprintf(rate, sizeof(rate), "%g/s", rps);
        time_t when;
        if (json_is_true(json_object_get(tok, "expired")))
                snprintf(expires, sizeof(expires), "expired");
        else if (json_timestamp(json_object_get(tok, "expires_at"), &when) == 0)
                snprintf(expires, sizeof(expires), "%s",
                         json_string_value(json_object_get(tok, "expires_at")));
        if (json_timestamp(json_object_get(tok, "created_at"), &when) == 0)
                human_ago(when, now, created, sizeof(created));
        const char *cells[] = {json_string_value(json_object_get(tok, "name")),
                               json_is_true(json_object_get(tok, "admin")) ? "yes" : "no",
                               limits,
                               rate,
                               expires,
                               created};
        return table_add(t, cells);
}

static const struct verb_syntax token_ls_syntax = {
    .verb = "token ls",
    .help = token_ls_help,
};

static int token_ls(struct cli *cli, int argc, char **argv)
{
        int r = opts_parse(cli, argc, argv, &token_ls_syntax, NULL);
        if (r >= 0)
                return r;
        static const char *const headers[] = {"NAME", "ADMIN",   "LIMITS",
                                              "RATE", "EXPIRES", "CREATED"};
        return call_print_list(cli, "/v1/tokens", "tokens", headers, ELEMENTSOF(headers),
                               token_row);
}

static const struct verb_syntax token_rm_syntax = {
    .verb = "token rm",
    .help = token_rm_help,
    OPERANDS_NAMES,
};

static int token_rm(struct cli *cli, int argc, char **argv)
{
        int r = opts_parse(cli, argc, argv, &token_rm_syntax, NULL);
        if (r >= 0)
                return r;
        return call_delete_each(cli, "/v1/tokens", argc, argv);
}

int cmd_token(struct cli *cli, int argc, char **argv)
{
        static const struct subverb subs[] = {{"create", token_create},
                                              {"ls", token_ls},
                                              {"list", token_ls},
                                              {"rm", token_rm},
                                              {"remove", token_rm}};
        return subverb_dispatch(cli, argc, argv, "token", token_help,
                                "missing COMMAND (create, ls or rm)", subs, ELEMENTSOF(subs));
}

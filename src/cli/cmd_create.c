/* paddock create / paddock update: build the JSON body of POST /v1/envs and PATCH
 * /v1/envs/NAME from options. Sizes, durations, rates and CPU counts go up as the strings the
 * user typed: the daemon parses them and names the field it rejects. */
#include "cli/cli.h"
#include "cli/envpath.h"
#include "cli/netopts.h"
#include "cli/opts.h"
#include "cli/output.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
        OPT_COMPUTER = OPT_FIRST_VERB_OPTION,
        OPT_SANDBOX,
        OPT_IMAGE,
        OPT_CPUS,
        OPT_MEMORY,
        OPT_SWAP,
        OPT_PIDS,
        OPT_DISK,
        OPT_TTL,
        OPT_ENV,
        OPT_LABEL,
        OPT_AUTOSTART,
        OPT_NO_AUTOSTART,
        OPT_DISK_READ_BPS,
        OPT_DISK_WRITE_BPS,
        OPT_DISK_READ_IOPS,
        OPT_DISK_WRITE_IOPS,
        OPT_IDLE_TIMEOUT,
        OPT_IDLE_ACTION,
};

#define IO_HELP                                                                                    \
        "  --disk-read-bps RATE  disk reads per second in bytes, e.g. 10M (0: no limit)\n"          \
        "  --disk-write-bps RATE disk writes per second in bytes, e.g. 10M (0: no limit)\n"         \
        "  --disk-read-iops N    disk read operations per second (0: no limit)\n"                  \
        "  --disk-write-iops N   disk write operations per second (0: no limit)\n"          \
        "  --idle-timeout DURATION  pause or stop it after this long without activity (exec,\n" \
        "                        shell, files, background output, network traffic; 0: never)\n" \
        "  --idle-action pause|stop  what idle does (default: pause a sandbox, stop a\n"      \
        "                        computer); the next exec or file request wakes it\n"


static const char create_help[] =
    "Usage: paddock create NAME [OPTIONS]\n"
    "\n"
    "Create an environment and print its name. A sandbox unless --computer is given.\n"
    "\n"
    "  --computer            a persistent, full Linux machine\n"
    "  --sandbox             a locked-down, throw-away box (the default)\n"
    "  --image IMG           image to start from (default: default)\n"
    "  --cpus N              CPU limit, e.g. 0.5 or 2\n"
    "  --memory SIZE         memory limit, e.g. 512M or 2G\n"
    "  --swap SIZE           swap allowed on top of memory\n"
    "  --pids N              most processes at once\n"
    "  --disk SIZE           disk limit: a computer's disk quota (btrfs driver); a\n"
    "                        sandbox's /tmp and /workspace size each (default 256M)\n"
    "  --net MODE            network: none (loopback only), open (internet, never the host\n"
    "                        or private ranges) or allow (only --allow destinations);\n"
    "                        default open for a computer, none for a sandbox\n"
    "  --allow RULE          a destination --net allow lets through: HOST[:PORT],\n"
    "                        *.DOMAIN[:PORT], A.B.C.D[/N][:PORT], [V6ADDR[/N]]:PORT or\n"
    "                        V6ADDR[/N] (repeatable; implies --net allow when --net is\n"
    "                        not given)\n"
    "  --bandwidth RATE      bandwidth each way, e.g. 10mbit, 500kbit, 1gbit\n"
    "  --egress-bandwidth RATE\n"
    "                        upload only (wins over --bandwidth)\n"
    "  --ingress-bandwidth RATE\n"
    "                        download only (wins over --bandwidth)\n"
    "  --link NAME           may talk to environment NAME, and it to this one (repeatable)\n"
    "  --ttl DURATION        destroy after e.g. 90s, 30m, 24h (0: never)\n"
    "  --env K=V             environment variable of every process (repeatable)\n"
    "  --label K=V           label to select environments by (repeatable)\n"
    IO_HELP
    "  --autostart           start again whenever paddockd starts\n"
    "  --json                print the created environment as JSON\n";

static const char update_help[] =
    "Usage: paddock update NAME [OPTIONS]\n"
    "\n"
    "Change limits or the TTL of an environment; a running one gets them at once.\n"
    "\n"
    "  --cpus N              CPU limit, e.g. 0.5 or 2\n"
    "  --memory SIZE         memory limit, e.g. 512M or 2G\n"
    "  --swap SIZE           swap allowed on top of memory\n"
    "  --pids N              most processes at once\n"
    "  --ttl DURATION        destroy this long from now (0: never)\n"
    "  --disk SIZE|none      disk limit: computers at once, sandboxes while stopped\n"
    IO_HELP
    "  --autostart           start again whenever paddockd starts\n"
    "  --no-autostart        do not\n"
    "  --json                print the updated environment as JSON\n"
    "\n"
    "Network policy, bandwidth and links: 'paddock net NAME [OPTIONS]'.\n";

#define LIMIT_OPTIONS                                                                              \
        {"cpus", required_argument, NULL, OPT_CPUS},                                               \
            {"memory", required_argument, NULL, OPT_MEMORY},                                       \
            {"swap", required_argument, NULL, OPT_SWAP},                                           \
            {"pids", required_argument, NULL, OPT_PIDS},                                           \
            {"ttl", required_argument, NULL, OPT_TTL},                                             \
            {"disk-read-bps", required_argument, NULL, OPT_DISK_READ_BPS},                         \
            {"disk-write-bps", required_argument, NULL, OPT_DISK_WRITE_BPS},                       \
            {"disk-read-iops", required_argument, NULL, OPT_DISK_READ_IOPS},                       \
            {"disk-write-iops", required_argument, NULL, OPT_DISK_WRITE_IOPS},                     \
            {"idle-timeout", required_argument, NULL, OPT_IDLE_TIMEOUT},                           \
            {"idle-action", required_argument, NULL, OPT_IDLE_ACTION},                             \
        {                                                                                          \
                "autostart", no_argument, NULL, OPT_AUTOSTART                                      \
        }

static const struct option create_options[] = {
    {"computer", no_argument, NULL, OPT_COMPUTER},
    {"sandbox", no_argument, NULL, OPT_SANDBOX},
    {"image", required_argument, NULL, OPT_IMAGE},
    {"disk", required_argument, NULL, OPT_DISK},
    {"net", required_argument, NULL, OPT_NET_MODE},
    NET_OPTIONS,
    {"env", required_argument, NULL, OPT_ENV},
    {"label", required_argument, NULL, OPT_LABEL},
    LIMIT_OPTIONS,
    CLI_COMMON_OPTIONS,
    {},
};

static const struct option update_options[] = {
    LIMIT_OPTIONS,
    {"disk", required_argument, NULL, OPT_DISK},
    {"no-autostart", no_argument, NULL, OPT_NO_AUTOSTART},
    CLI_COMMON_OPTIONS,
    {},
};

/* obj[key] = value as a JSON string; -1 when value is not UTF-8. */
static int set_string(json_t *obj, const char *key, const char *value)
{
        json_t *v = json_string(value);
        if (!v)
                return -1; /* not UTF-8 */
        return json_object_set_new(obj, key, v);
}

/* A count: a plain decimal number. Anything else goes up as typed and the daemon names it. */
static json_t *count_value(const char *s)
{
        if (*s >= '0' && *s <= '9' && strlen(s) <= 18 && strspn(s, "0123456789") == strlen(s))
                return json_integer(strtoll(s, NULL, 10));
        return json_string(s);
}

/* The options create and update share. -1 when handled; 0 when c is not one of them; else
 * the exit code. */
static int limit_option(json_t *body, int c, const char *verb)
{
        const char *key;
        switch (c) {
        case OPT_CPUS:
                key = "cpus";
                break;
        case OPT_MEMORY:
                key = "memory";
                break;
        case OPT_SWAP:
                key = "swap";
                break;
        case OPT_TTL:
                key = "ttl";
                break;
        case OPT_IDLE_TIMEOUT:
                key = "idle_timeout";
                break;
        case OPT_IDLE_ACTION:
                key = "idle_action";
                break;
        case OPT_PIDS: {
                json_t *v = count_value(optarg);
                if (!v || json_object_set_new(body, "pids", v) < 0)
                        return usage_error(verb, "bad value for --pids");
                return -1;
        }
        case OPT_AUTOSTART:
        case OPT_NO_AUTOSTART:
                json_object_set_new(body, "autostart", json_boolean(c == OPT_AUTOSTART));
                return -1;
        case OPT_DISK_READ_BPS:
        case OPT_DISK_WRITE_BPS:
        case OPT_DISK_READ_IOPS:
        case OPT_DISK_WRITE_IOPS: {
                static const char *const keys[] = {"read_bps", "write_bps", "read_iops",
                                                   "write_iops"};
                bool iops = c == OPT_DISK_READ_IOPS || c == OPT_DISK_WRITE_IOPS;
                json_t *v = !strcmp(optarg, "none") ? json_integer(0)
                            : iops                  ? count_value(optarg)
                                                    : json_string(optarg);
                if (!v || json_object_set_new(json_child(body, "io"),
                                              keys[c - OPT_DISK_READ_BPS], v) < 0)
                        return usage_error(verb, "bad value for --disk-%.*s-%s",
                                           (int)strcspn(keys[c - OPT_DISK_READ_BPS], "_"),
                                           keys[c - OPT_DISK_READ_BPS],
                                           iops ? "iops" : "bps");
                return -1;
        }
        default:
                return 0;
        }
        if (set_string(body, key, optarg) < 0)
                return usage_error(verb, "--%s value is not valid UTF-8", key);
        return -1;
}

static int create_option(json_t *body, int c, const char *verb)
{
        switch (c) {
        case OPT_COMPUTER:
        case OPT_SANDBOX: {
                const char *kind = c == OPT_COMPUTER ? "computer" : "sandbox";
                const char *had = json_string_value(json_object_get(body, "kind"));
                if (had && strcmp(had, kind) != 0)
                        return usage_error(verb, "--computer and --sandbox exclude each other");
                json_object_set_new(body, "kind", json_string(kind));
                return -1;
        }
        case OPT_IMAGE:
                if (set_string(body, "image", optarg) < 0)
                        return usage_error(verb, "--image value is not valid UTF-8");
                return -1;
        case OPT_DISK:
                if (set_string(body, "disk", optarg) < 0)
                        return usage_error(verb, "--disk value is not valid UTF-8");
                return -1;
        case OPT_ENV:
        case OPT_LABEL: {
                if (kv_add(json_child(body, c == OPT_ENV ? "env" : "labels"), optarg) < 0)
                        return usage_error(verb, "--%s wants K=V, not '%s'",
                                           c == OPT_ENV ? "env" : "label", optarg);
                return -1;
        }
        default:
                return limit_option(body, c, verb);
        }
}

/* Print the environment the daemon answered with: its name, or all of it with --json. */
static void print_env(struct cli *cli, const struct response *resp, const char *fallback_name)
{
        if (cli->json) {
                output_raw(resp);
                return;
        }
        const char *name = json_string_value(json_object_get(resp->json, "name"));
        printf("%s\n", name ? name : fallback_name);
}

struct create_opts {
        json_t *body;
        struct netopts net;
};

static int create_own(void *userdata, int c, const char *verb)
{
        struct create_opts *o = userdata;
        int r = netopts_option(&o->net, c, verb);
        return r == 0 ? create_option(o->body, c, verb) : r;
}

static const struct verb_syntax create_syntax = {
    .verb = "create",
    .help = create_help,
    .options = create_options,
    .own = create_own,
    OPERANDS_NAME,
};

int cmd_create(struct cli *cli, int argc, char **argv)
{
        const char *verb = create_syntax.verb;
        struct create_opts o = {.body = json_object()};
        int r = opts_parse(cli, argc, argv, &create_syntax, &o);
        if (r >= 0)
                goto out;
        const char *name = argv[optind];
        json_t *network;
        r = netopts_json(&o.net, verb, &network);
        if (r >= 0)
                goto out;
        if (network) {
                /* --allow alone means --net allow (the daemon's rule too; said here so the
                 * request reads as what it does). */
                if (json_object_get(network, "allow") && !json_object_get(network, "mode"))
                        json_object_set_new(network, "mode", json_string("allow"));
                json_object_set_new(o.body, "network", network);
        }
        /* The name first, for whoever reads the request in a log. */
        json_t *full = json_object();
        if (set_string(full, "name", name) < 0) {
                json_decref(full);
                r = usage_error(verb, "NAME is not valid UTF-8");
                goto out;
        }
        json_object_update(full, o.body);
        json_decref(o.body);
        o.body = full;

        struct client *client = cli_client(cli);
        struct response resp = {};
        r = EXIT_FAIL;
        if (client && client_call(client, "POST", "/v1/envs", o.body, &resp) == 0) {
                print_env(cli, &resp, name);
                response_done(&resp);
                r = EXIT_OK;
        }
out:
        netopts_done(&o.net);
        json_decref(o.body);
        return r;
}

static int update_own(void *userdata, int c, const char *verb)
{
        json_t *body = userdata;
        if (c != OPT_DISK)
                return limit_option(body, c, verb);
        json_t *v = !strcmp(optarg, "none") ? json_null() : json_string(optarg);
        if (!v)
                return usage_error(verb, "--disk value is not valid UTF-8");
        json_object_set_new(body, "disk", v);
        return -1;
}

static const struct verb_syntax update_syntax = {
    .verb = "update",
    .help = update_help,
    .options = update_options,
    .own = update_own,
    OPERANDS_NAME,
};

int cmd_update(struct cli *cli, int argc, char **argv)
{
        const char *verb = update_syntax.verb;
        json_t *body = json_object();
        int r = opts_parse(cli, argc, argv, &update_syntax, body);
        if (r < 0 && json_object_size(body) == 0)
                r = usage_error(verb, "nothing to change");
        if (r >= 0)
                goto out;
        const char *name = argv[optind];

        r = EXIT_FAIL;
        struct client *client = cli_client(cli);
        char *path = client ? env_path(client, name, NULL, NULL) : NULL;
        struct response resp = {};
        if (path && client_call(client, "PATCH", path, body, &resp) == 0) {
                print_env(cli, &resp, name);
                response_done(&resp);
                r = EXIT_OK;
        }
        free(path);
out:
        json_decref(body);
        return r;
}

/* paddock net NAME [OPTIONS]: show or change an environment's network.
 *
 * Without options: GET /v1/envs/NAME and print its "network" section. With options: PATCH
 * /v1/envs/NAME {"network": {...}} with only the fields given (the daemon keeps the rest), then
 * print the section as it now is, so the effect of the change is on screen. */
#include "cli/cli.h"
#include "cli/envpath.h"
#include "cli/netopts.h"
#include "cli/opts.h"
#include "cli/output.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char net_help[] =
    "Usage: paddock net NAME [OPTIONS]\n"
    "\n"
    "Without options, show the network of an environment: mode, address, gateway, allowed\n"
    "destinations, links, bandwidth, packets dropped by the policy so far, published ports.\n"
    "With options, change it, also while running, and show the result. Only what is given\n"
    "changes; a list given replaces the old one.\n"
    "\n"
    "  --mode MODE           none (loopback only), open (internet, never the host or private\n"
    "                        ranges) or allow (only the allowed destinations)\n"
    "  --allow RULE          allow HOST[:PORT], *.DOMAIN[:PORT], A.B.C.D[/N][:PORT],\n"
    "                        [V6ADDR[/N]]:PORT or V6ADDR[/N] (any port);\n"
    "                        repeat for several: together they replace the list\n"
    "  --clear-allow         empty the allow list\n"
    "  --bandwidth RATE      bandwidth each way, e.g. 10mbit, 500kbit (0: no limit)\n"
    "  --egress-bandwidth RATE\n"
    "                        upload only (wins over --bandwidth)\n"
    "  --ingress-bandwidth RATE\n"
    "                        download only (wins over --bandwidth)\n"
    "  --link NAME           may talk to environment NAME, and it to this one; repeat for\n"
    "                        several: together they replace the list\n"
    "  --clear-links         remove all links\n"
    "  --json                print the environment as the daemon returns it\n"
    "\n"
    "--allow or --clear-allow without --mode also sets mode allow.\n"
    "Published ports: 'paddock port'.\n";

static const struct option net_options[] = {
    {"mode", required_argument, NULL, OPT_NET_MODE},
    {"clear-allow", no_argument, NULL, OPT_NET_CLEAR_ALLOW},
    {"clear-links", no_argument, NULL, OPT_NET_CLEAR_LINKS},
    NET_OPTIONS,
    CLI_COMMON_OPTIONS,
    {},
};

#define LABEL_WIDTH 11

/* "label      first" and each further item on its own line under the first; "-" when empty. */
static void print_list(const char *label, const json_t *arr)
{
        size_t i;
        const json_t *v;
        if (json_array_size(arr) == 0) {
                printf("%-*s-\n", LABEL_WIDTH, label);
                return;
        }
        json_array_foreach(arr, i, v)
        {
                const char *s = json_string_value(v);
                printf("%-*s%s\n", LABEL_WIDTH, i == 0 ? label : "", s ? s : "?");
        }
}

static const char *rate_cell(const json_t *v, char *buf, size_t len)
{
        if (!json_is_integer(v) || json_integer_value(v) <= 0)
                return "no limit";
        return human_rate((uint64_t)json_integer_value(v), buf, len);
}

static void print_network(const json_t *env)
{
        const json_t *net = json_object_get(env, "network");
        const json_t *bw = json_object_get(net, "bandwidth");
        const char *ip = json_string_value(json_object_get(net, "ip"));
        const char *gw = json_string_value(json_object_get(net, "gateway"));
        const char *ip6 = json_string_value(json_object_get(net, "ip6"));
        const char *mode = json_string_value(json_object_get(net, "mode"));
        char eg[32], in[32];

        printf("%-*s%s\n", LABEL_WIDTH, "mode", mode ? mode : "-");
        printf("%-*s%s\n", LABEL_WIDTH, "ip", ip ? ip : "-");
        printf("%-*s%s\n", LABEL_WIDTH, "gateway", gw ? gw : "-");
        if (ip6)
                printf("%-*s%s (gateway fe80::1)\n", LABEL_WIDTH, "ip6", ip6);
        print_list("allow", json_object_get(net, "allow"));
        print_list("links", json_object_get(net, "links"));
        printf("%-*segress %s, ingress %s\n", LABEL_WIDTH, "bandwidth",
               rate_cell(json_object_get(bw, "egress"), eg, sizeof(eg)),
               rate_cell(json_object_get(bw, "ingress"), in, sizeof(in)));
        const json_t *denied = json_object_get(net, "denied");
        if (json_is_integer(denied))
                printf("%-*s%lld packet%s\n", LABEL_WIDTH, "denied",
                       (long long)json_integer_value(denied),
                       json_integer_value(denied) == 1 ? "" : "s");
        else
                printf("%-*s-\n", LABEL_WIDTH, "denied");

        const json_t *ports = json_object_get(net, "ports");
        size_t i;
        const json_t *p;
        if (json_array_size(ports) == 0)
                printf("%-*s-\n", LABEL_WIDTH, "ports");
        json_array_foreach(ports, i, p)
        {
                const char *proto = json_string_value(json_object_get(p, "proto"));
                printf("%-*s%lld -> %lld/%s\n", LABEL_WIDTH, i == 0 ? "ports" : "",
                       (long long)json_integer_value(json_object_get(p, "host_port")),
                       (long long)json_integer_value(json_object_get(p, "port")),
                       proto ? proto : "tcp");
        }
}

static const struct verb_syntax net_syntax = {
    .verb = "net",
    .help = net_help,
    .options = net_options,
    .own = netopts_option,
    OPERANDS_NAME,
};

int cmd_net(struct cli *cli, int argc, char **argv)
{
        const char *verb = net_syntax.verb;
        struct netopts o = {};
        json_t *body = NULL;
        char *path = NULL;
        struct response resp = {};
        int r = opts_parse(cli, argc, argv, &net_syntax, &o);
        if (r >= 0)
                goto out;
        const char *name = argv[optind];
        json_t *net; /* NULL: show only */
        r = netopts_json(&o, verb, &net);
        if (r >= 0)
                goto out;
        if (net) {
                body = json_object();
                json_object_set_new(body, "network", net);
        }

        r = EXIT_FAIL;
        struct client *client = cli_client(cli);
        path = client ? env_path(client, name, NULL, NULL) : NULL;
        if (!path || client_call(client, body ? "PATCH" : "GET", path, body, &resp) < 0)
                goto out;
        if (cli->json)
                output_raw(&resp);
        else
                print_network(resp.json);
        r = EXIT_OK;
out:
        response_done(&resp);
        free(path);
        json_decref(body);
        netopts_done(&o);
        return r;
}

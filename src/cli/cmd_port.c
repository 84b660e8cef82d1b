/* paddock port add NAME HOSTPORT:PORT[/tcp|/udp]... | ls NAME | rm NAME HOSTPORT[/tcp|/udp]...
 * paddock port url NAME PORT
 *
 * Published ports: connections to HOSTPORT on the host go to PORT of the environment (DNAT in
 * the daemon's firewall table). Every operand is checked before anything is sent, so a typo
 * in the third of three changes nothing; after that, add and rm go on past a refused one and
 * exit 1 if any was. */
#include "cli/calls.h"
#include "cli/cli.h"
#include "cli/envpath.h"
#include "cli/opts.h"
#include "cli/output.h"
#include "lib/util.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char port_help[] =
    "Usage: paddock port COMMAND NAME ...\n"
    "\n"
    "Publish ports of an environment on the host (it needs network mode open or allow).\n"
    "\n"
    "  add NAME HOSTPORT:PORT[/tcp|/udp]...   host port HOSTPORT goes to PORT inside\n"
    "  ls NAME                                list published ports\n"
    "  rm NAME HOSTPORT[/tcp|/udp]...         stop publishing\n"
    "  url NAME PORT                          the preview URL of PORT through the listener\n"
    "\n"
    "  --json                                 print the daemon's answer as JSON\n";

static const char port_add_help[] =
    "Usage: paddock port add NAME HOSTPORT:PORT[/tcp|/udp]...\n"
    "\n"
    "Publish PORT of environment NAME as HOSTPORT on the host (tcp unless /udp is given).\n"
    "Ports are 1-65535. Prints each published HOSTPORT:PORT/PROTO.\n";

static const char port_ls_help[] = "Usage: paddock port ls NAME [--json]\n"
                                   "\n"
                                   "List the ports of NAME published on the host.\n";

static const char port_rm_help[] =
    "Usage: paddock port rm NAME HOSTPORT[/tcp|/udp]...\n"
    "\n"
    "Stop publishing host port HOSTPORT (tcp unless /udp is given). Prints each one removed.\n";

static const char port_url_help[] =
    "Usage: paddock port url NAME PORT [--json]\n"
    "\n"
    "Print the preview URL of port PORT of environment NAME: https://PORT-NAME.DOMAIN/ on the\n"
    "daemon's listener (paddockd --domain DOMAIN --listen ...; http:// on a --listen-plain\n"
    "one, with the listener's port unless it is 443 or 80). Opening it needs a token that may\n"
    "see NAME (Authorization: Bearer, or the paddock_token cookie), unless the environment\n"
    "was made public.\n";

struct port_spec {
        unsigned host_port, port; /* port 0 when not given (rm) */
        const char *proto;
};

/* A port number: 1-65535, decimal digits only. */
static bool parse_port(const char *s, size_t len, unsigned *ret)
{
        if (len == 0 || len > 5 || strspn(s, "0123456789") < len)
                return false;
        unsigned v = 0;
        for (size_t i = 0; i < len; i++)
                v = v * 10 + (unsigned)(s[i] - '0');
        if (v == 0 || v > 65535)
                return false;
        *ret = v;
        return true;
}

/* "H:P[/proto]" (with_target) or "H[/proto]". A usage error names what is wrong. */
static int parse_spec(const char *verb, const char *arg, bool with_target, struct port_spec *ret)
{
        const char *form = with_target ? "HOSTPORT:PORT[/tcp|/udp]" : "HOSTPORT[/tcp|/udp]";
        struct port_spec s = {.proto = "tcp"};
        const char *slash = strchr(arg, '/');
        size_t len = slash ? (size_t)(slash - arg) : strlen(arg);
        if (slash) {
                if (strcmp(slash + 1, "tcp") == 0)
                        s.proto = "tcp";
                else if (strcmp(slash + 1, "udp") == 0)
                        s.proto = "udp";
                else
                        return usage_error(verb, "'%s': protocol is tcp or udp", arg);
        }
        const char *colon = memchr(arg, ':', len);
        if (with_target && !colon)
                return usage_error(verb, "'%s': want %s", arg, form);
        if (!with_target && colon)
                return usage_error(verb, "'%s': want %s (only the host port)", arg, form);
        size_t hlen = colon ? (size_t)(colon - arg) : len;
        if (!parse_port(arg, hlen, &s.host_port))
                return usage_error(verb, "'%s': host port must be a number 1-65535", arg);
        if (colon && !parse_port(colon + 1, len - hlen - 1, &s.port))
                return usage_error(verb, "'%s': port must be a number 1-65535", arg);
        *ret = s;
        return -1;
}

/* add and rm: NAME, then one or more specs, all parsed before the first request. */
static int port_change(struct cli *cli, int argc, char **argv, bool add)
{
        const char *verb = add ? "port add" : "port rm";
        const struct verb_syntax syntax = {
            .verb = verb,
            .help = add ? port_add_help : port_rm_help,
            OPERANDS_NAMES,
        };
        int r = opts_parse(cli, argc, argv, &syntax, NULL);
        if (r < 0)
                r = opts_operands(argc, argv, verb, 2, -1,
                                  add ? "missing HOSTPORT:PORT" : "missing HOSTPORT");
        if (r >= 0)
                return r;
        const char *name = argv[optind];
        size_t n = (size_t)(argc - optind - 1);
        struct port_spec *specs = calloc(n, sizeof(*specs));
        if (!specs)
                return EXIT_FAIL;
        for (size_t i = 0; i < n; i++) {
                r = parse_spec(verb, argv[optind + 1 + i], add, &specs[i]);
                if (r >= 0)
                        goto out;
        }

        r = EXIT_FAIL;
        struct client *client = cli_client(cli);
        if (!client)
                goto out;
        r = EXIT_OK;
        for (size_t i = 0; i < n; i++) {
                const struct port_spec *s = &specs[i];
                char suffix[32], query[16], line[32];
                char *path = NULL;
                json_t *body = NULL;
                /* Ports have at most 5 digits and the protocol is tcp or udp: these fit. */
                if (add && BUF_PRINTF(line, "%u:%u/%s", s->host_port, s->port, s->proto) >= 0) {
                        path = env_path(client, name, "ports", NULL);
                        body = json_pack("{s:i,s:i,s:s}", "host_port", (int)s->host_port, "port",
                                         (int)s->port, "proto", s->proto);
                } else if (!add && BUF_PRINTF(line, "%u/%s", s->host_port, s->proto) >= 0 &&
                           BUF_PRINTF(suffix, "ports/%u", s->host_port) >= 0 &&
                           BUF_PRINTF(query, "proto=%s", s->proto) >= 0) {
                        path = env_path(client, name, suffix, query);
                }
                if ((add && !body) ||
                    call_one(cli, add ? "POST" : "DELETE", path, body, line) != EXIT_OK)
                        r = EXIT_FAIL;
                json_decref(body);
                free(path);
        }
out:
        free(specs);
        return r;
}

static int port_add(struct cli *cli, int argc, char **argv)
{
        return port_change(cli, argc, argv, true);
}

static int port_rm(struct cli *cli, int argc, char **argv)
{
        return port_change(cli, argc, argv, false);
}

static int port_row(struct table *t, const json_t *p, time_t now)
{
        char host[16], port[16];
        snprintf(host, sizeof(host), "%lld",
                 (long long)json_integer_value(json_object_get(p, "host_port")));
        snprintf(port, sizeof(port), "%lld",
                 (long long)json_integer_value(json_object_get(p, "port")));
        const char *cells[] = {host, port, json_string_value(json_object_get(p, "proto"))};
        return table_add(t, cells);
}

static const struct verb_syntax port_ls_syntax = {
    .verb = "port ls",
    .help = port_ls_help,
    OPERANDS_NAME,
};

static int port_ls(struct cli *cli, int argc, char **argv)
{
        int r = opts_parse(cli, argc, argv, &port_ls_syntax, NULL);
        if (r >= 0)
                return r;
        struct client *client = cli_client(cli);
        char *path = client ? env_path(client, argv[optind], "ports", NULL) : NULL;
        static const char *const headers[] = {"HOST", "PORT", "PROTO"};
        r = call_print_list(cli, path, "ports", headers, ELEMENTSOF(headers), port_row);
        free(path);
        return r;
}

static const struct verb_syntax port_url_syntax = {
    .verb = "port url",
    .help = port_url_help,
    OPERANDS(2, 2, "missing NAME and PORT"),
};

/* The port of "ADDR:PORT" or "[ADDR]:PORT" as the daemon writes its listeners. */
static unsigned listen_port(const char *text)
{
        const char *colon = text ? strrchr(text, ':') : NULL;
        unsigned v = 0;
        return colon && parse_port(colon + 1, strlen(colon + 1), &v) ? v : 0;
}

static int port_url(struct cli *cli, int argc, char **argv)
{
        int r = opts_parse(cli, argc, argv, &port_url_syntax, NULL);
        if (r >= 0)
                return r;
        const char *name = argv[optind], *port_arg = argv[optind + 1];
        unsigned port;
        if (!parse_port(port_arg, strlen(port_arg), &port))
                return usage_error("port url", "'%s': port must be a number 1-65535", port_arg);
        size_t nl = strlen(name);
        if (nl == 0 || nl > 63 || strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                               "0123456789-_") != nl) {
                fprintf(stderr, "paddock: port url: '%s' cannot be part of a host name (preview "
                                "URLs need names of letters, digits, - and _)\n", name);
                return EXIT_FAIL;
        }
        struct client *client = cli_client(cli);
        struct response resp = {};
        if (!client || client_call(client, "GET", "/v1/system", NULL, &resp) < 0)
                return EXIT_FAIL;
        const json_t *gw = json_object_get(resp.json, "gateway");
        const char *domain = json_string_value(json_object_get(gw, "domain"));
        const char *tls = json_string_value(json_array_get(json_object_get(gw, "listen"), 0));
        const char *plain = json_string_value(json_array_get(json_object_get(gw, "listen_plain"), 0));
        r = EXIT_FAIL;
        if (!json_is_object(gw) || (!tls && !plain))
                fprintf(stderr, "paddock: port url: the daemon has no listener (paddockd --listen "
                                "ADDR:PORT, with --domain DOMAIN)\n");
        else if (!domain)
                fprintf(stderr, "paddock: port url: the daemon has no preview domain (paddockd "
                                "--domain DOMAIN)\n");
        else {
                unsigned lp = listen_port(tls ? tls : plain);
                char at[16] = "";
                if (lp && lp != (tls ? 443u : 80u))
                        snprintf(at, sizeof(at), ":%u", lp);
                char *url = NULL;
                if (asprintf(&url, "%s://%u-%s.%s%s/", tls ? "https" : "http", port, name, domain,
                             at) >= 0) {
                        for (char *p = url; *p; p++)
                                *p = (char)tolower((unsigned char)*p);
                        if (cli->json) {
                                json_t *j = json_pack("{s:s}", "url", url);
                                char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
                                if (text)
                                        printf("%s\n", text);
                                free(text);
                                json_decref(j);
                        } else {
                                printf("%s\n", url);
                        }
                        free(url);
                        r = EXIT_OK;
                }
        }
        response_done(&resp);
        return r;
}

int cmd_port(struct cli *cli, int argc, char **argv)
{
        static const struct subverb subs[] = {{"add", port_add},
                                              {"ls", port_ls},
                                              {"list", port_ls},
                                              {"rm", port_rm},
                                              {"url", port_url},
                                              {"remove", port_rm}};
        return subverb_dispatch(cli, argc, argv, "port", port_help,
                                "missing COMMAND (add, ls, rm or url)", subs, ELEMENTSOF(subs));
}

/* Which daemon the CLI talks to, and as whom: the global options --host, --token,
 * --fingerprint, --ca-cert, --trust-new and their PADDOCK_* variables (options win). With
 * neither --host nor PADDOCK_HOST (or with --socket given), the local unix socket. */
#include "cli/cli.h"
#include "cli/hostkey.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A token goes into a header line: visible ASCII only, so it cannot end the line early. */
static bool token_ok(const char *t)
{
        if (!*t)
                return false;
        for (const unsigned char *s = (const unsigned char *)t; *s; s++)
                if (*s <= ' ' || *s >= 0x7f)
                        return false;
        return true;
}

static int bad(const char *what, const char *value, const char *why)
{
        fprintf(stderr, "paddock: %s '%s': %s\n", what, value, why);
        return EXIT_USAGE;
}

static int check_host(const char *what, const char *url, struct endpoint *ret)
{
        const char *why = NULL;
        if (endpoint_parse(url, ret, &why) < 0)
                return bad(what, url, why);
        return -1;
}

static int check_fingerprint(const char *what, const char *fp)
{
        uint8_t key[HOSTKEY_LEN];
        if (hostkey_parse(fp, key) < 0)
                return bad(what, fp, "want sha256: and 32 hex bytes (sha256:AB:CD:...)");
        return -1;
}

int remote_option(struct cli *cli, int argc, char **argv, int *i)
{
        static const char *const names[] = {"--host", "--token", "--fingerprint", "--ca-cert"};
        const char *a = argv[*i];
        if (strcmp(a, "--trust-new") == 0) {
                cli->trust_new = true;
                return -1;
        }
        const char *value = NULL;
        size_t k = 0;
        for (; k < sizeof(names) / sizeof(names[0]); k++) {
                size_t n = strlen(names[k]);
                if (strncmp(a, names[k], n) != 0)
                        continue;
                if (a[n] == '=') {
                        value = a + n + 1;
                        break;
                }
                if (a[n] == 0) {
                        if (*i + 1 >= argc) {
                                fprintf(stderr, "paddock: option needs a value: '%s' (see "
                                                "'paddock --help')\n", a);
                                return EXIT_USAGE;
                        }
                        value = argv[++*i];
                        break;
                }
        }
        if (!value) {
                fprintf(stderr, "paddock: unknown option '%s' (see 'paddock --help')\n", a);
                return EXIT_USAGE;
        }
        switch (k) {
        case 0:
                cli->host = value;
                cli->host_from_cmdline = true;
                return check_host("--host", value, &cli->remote);
        case 1:
                cli->token = value;
                return token_ok(value) ? -1 : bad("--token", "...", "not a token");
        case 2:
                cli->fingerprint = value;
                return check_fingerprint("--fingerprint", value);
        default:
                cli->ca_cert = value;
                return -1;
        }
}

static const char *env(const char *name)
{
        const char *v = getenv(name);
        return v && *v ? v : NULL;
}

int remote_setup(struct cli *cli, struct client *c)
{
        const char *host = cli->host;
        if (!host && !cli->socket_from_cmdline)
                host = env("PADDOCK_HOST");
        if (cli->host_from_cmdline && cli->socket_from_cmdline) {
                fprintf(stderr, "paddock: give --host or --socket, not both\n");
                return -1;
        }
        const char *token = cli->token ? cli->token : env("PADDOCK_TOKEN");
        if (token && !token_ok(token)) {
                fprintf(stderr, "paddock: PADDOCK_TOKEN is not a token\n");
                return -1;
        }
        /* The daemon treats a token on its unix socket as acting as that token. */
        c->token = token;
        if (!host)
                return 0;
        if (!cli->host_from_cmdline && check_host("PADDOCK_HOST", host, &cli->remote) >= 0)
                return -1;
        struct endpoint *ep = &cli->remote;
        if (ep->kind == TRANSPORT_UNIX) {
                c->socket_path = ep->socket_path;
                return 0;
        }
        ep->fingerprint = cli->fingerprint ? cli->fingerprint : env("PADDOCK_FINGERPRINT");
        if (!cli->fingerprint && ep->fingerprint &&
            check_fingerprint("PADDOCK_FINGERPRINT", ep->fingerprint) >= 0)
                return -1;
        ep->ca_cert = cli->ca_cert ? cli->ca_cert : env("PADDOCK_CA_CERT");
        const char *tn = env("PADDOCK_TRUST_NEW");
        ep->trust_new = cli->trust_new || (tn && strcmp(tn, "0") != 0);
        c->remote = ep;
        return 0;
}

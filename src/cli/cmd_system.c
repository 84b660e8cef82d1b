/* paddock system: what the daemon reports about itself and the host.
 * paddock daemon [ARGS]: become paddockd, so one binary name is enough to remember. */
#include "cli/cli.h"
#include "cli/opts.h"
#include "cli/output.h"
#include "lib/util.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char system_help[] =
    "Usage: paddock system [--json]\n"
    "\n"
    "Show the daemon's version, cgroup mode, kernel features, state directory and counts.\n"
    "When the daemon listens for remote clients, also the SHA-256 fingerprint of its TLS\n"
    "certificate, what `paddock --fingerprint` takes.\n";

static const struct verb_syntax system_syntax = {.verb = "system", .help = system_help};

int cmd_system(struct cli *cli, int argc, char **argv)
{
        int r = opts_parse(cli, argc, argv, &system_syntax, NULL);
        if (r >= 0)
                return r;
        struct client *client = cli_client(cli);
        struct response resp = {};
        if (!client || client_call(client, "GET", "/v1/system", NULL, &resp) < 0)
                return EXIT_FAIL;
        output_object(&resp, cli->json);
        const char *fp = json_string_value(
            json_object_get(json_object_get(resp.json, "gateway"), "tls_fingerprint"));
        if (fp && !cli->json)
                printf("TLS fingerprint: %s\n", fp);
        response_done(&resp);
        return EXIT_OK;
}

/* paddockd beside this binary (an unpacked build tree, /usr/bin), else the first on PATH. */
static void exec_paddockd(char **args)
{
        char self[PATH_MAX];
        ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
        if (n > 0 && (size_t)n < sizeof(self) - 1) { /* else it may have been cut short */
                self[n] = 0;
                char *slash = strrchr(self, '/');
                if (slash) {
                        *slash = 0;
                        _cleanup_free_ char *beside = path_join(*self ? self : "/", "paddockd");
                        if (beside && access(beside, X_OK) == 0)
                                execv(beside, args);
                }
        }
        execvp("paddockd", args);
}

int cmd_daemon(struct cli *cli, int argc, char **argv)
{
        /* Every argument after "daemon" is paddockd's, --help included; a --socket given to
         * paddock before "daemon" is passed on too. */
        size_t n = (size_t)argc + 3;
        char **args = calloc(n, sizeof(char *));
        if (!args) {
                fprintf(stderr, "paddock: out of memory\n");
                return EXIT_FAIL;
        }
        size_t k = 0;
        args[k++] = "paddockd";
        if (cli->socket_from_cmdline) {
                args[k++] = "--socket";
                args[k++] = (char *)cli->socket_path;
        }
        for (int i = 1; i < argc; i++)
                args[k++] = argv[i];
        args[k] = NULL;
        fflush(NULL);
        exec_paddockd(args);
        fprintf(stderr, "paddock: cannot run paddockd: %s\n", strerror(errno));
        free(args);
        return EXIT_FAIL;
}

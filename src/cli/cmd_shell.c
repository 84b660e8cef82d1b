/* paddock shell NAME [-u USER] [-w DIR] [-e K=V]...: an interactive login shell inside an
 * environment (bash when the image has one, else sh; the daemon decides, inside). The session
 * is tty_session.c's; we exit with the shell's exit code. */
#include "cli/cli.h"
#include "cli/opts.h"
#include "cli/tty_session.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char shell_help[] =
    "Usage: paddock shell NAME [-u USER] [-w DIR] [-e K=V]...\n"
    "\n"
    "Open an interactive shell in a terminal inside environment NAME: bash -l when the image\n"
    "has bash, sh -l otherwise. Keys (Ctrl-C, Ctrl-D, Ctrl-Z included) act inside; window size\n"
    "changes follow. Exits with the shell's exit code. Standard input must be a terminal.\n"
    "Leaving (or losing the connection) hangs the terminal up: what still runs in the session\n"
    "gets SIGHUP and is killed 2 s later; use 'paddock exec -d' for work that must outlive it.\n"
    "\n"
    "  -u, --user USER       user name or UID[:GID] (default root)\n"
    "  -w, --workdir DIR     working directory (default the user's home)\n"
    "  -e, --env K=V         environment variable (repeatable)\n";

static const struct option shell_options[] = {
    {"user", required_argument, NULL, 'u'},
    {"workdir", required_argument, NULL, 'w'},
    {"env", required_argument, NULL, 'e'},
    CLI_COMMON_OPTIONS,
    {},
};

int cmd_shell(struct cli *cli, int argc, char **argv)
{
        json_t *spec = json_object();
        int c, r = EXIT_USAGE;
        opts_reset();
        while ((c = getopt_long(argc, argv, ":hu:w:e:", shell_options, NULL)) != -1) {
                if (c == 'u' || c == 'w') {
                        json_t *v = json_string(optarg);
                        if (!v) {
                                r = usage_error("shell", "value '%s' is not valid UTF-8", optarg);
                                goto out;
                        }
                        json_object_set_new(spec, c == 'u' ? "user" : "cwd", v);
                        continue;
                }
                if (c == 'e') {
                        json_t *env = json_object_get(spec, "env");
                        if (!env) {
                                env = json_object();
                                json_object_set_new(spec, "env", env);
                        }
                        if (kv_add(env, optarg) < 0) {
                                r = usage_error("shell", "-e wants K=V, not '%s'", optarg);
                                goto out;
                        }
                        continue;
                }
                int e = opts_common(cli, c, argv, "shell", shell_help);
                if (e >= 0) {
                        r = e;
                        goto out;
                }
        }
        if (argc - optind != 1) {
                r = usage_error("shell", argc - optind < 1 ? "missing NAME" : "too many operands");
                goto out;
        }
        r = tty_session_run(cli, argv[optind], spec, true);
out:
        json_decref(spec);
        return r;
}

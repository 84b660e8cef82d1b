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
    PROCESS_OPTIONS,
    CLI_COMMON_OPTIONS,
    {},
};

static int shell_option(void *userdata, int c, const char *verb)
{
        return process_option(userdata, c, verb, false);
}

static const struct verb_syntax shell_syntax = {
    .verb = "shell",
    .help = shell_help,
    .shortopts = ":hu:w:e:",
    .options = shell_options,
    .own = shell_option,
    .max = -1,
};

int cmd_shell(struct cli *cli, int argc, char **argv)
{
        json_t *spec = json_object();
        int r = opts_parse(cli, argc, argv, &shell_syntax, spec);
        if (r < 0 && argc - optind != 1)
                r = usage_error("shell", argc - optind < 1 ? "missing NAME" : "too many operands");
        if (r < 0)
                r = tty_session_run(cli, argv[optind], spec, true);
        json_decref(spec);
        return r;
}

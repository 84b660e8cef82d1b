#include "cli/opts.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void opts_reset(void)
{
        optind = 0; /* glibc: 0 re-initialises, including the permutation state */
        opterr = 0; /* we word the errors ourselves */
}

int usage_error(const char *verb, const char *fmt, ...)
{
        va_list ap;
        fprintf(stderr, "paddock: %s: ", verb);
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fprintf(stderr, " (see 'paddock %s --help')\n", verb);
        return EXIT_USAGE;
}

int opts_common(struct cli *cli, int c, char **argv, const char *verb, const char *help)
{
        switch (c) {
        case OPT_SOCKET:
                cli->socket_path = optarg;
                cli->socket_from_cmdline = true;
                return -1;
        case OPT_JSON:
                cli->json = true;
                return -1;
        case 'h':
                fputs(help, stdout);
                return EXIT_OK;
        case ':':
        case '?': {
                /* getopt leaves the offending word just before optind; for a short option in a
                 * group ("-ix") only optopt names it. */
                const char *word = optind > 0 ? argv[optind - 1] : NULL;
                char name[64];
                if (word && strncmp(word, "--", 2) == 0)
                        snprintf(name, sizeof(name), "%.*s", (int)strcspn(word, "="), word);
                else
                        snprintf(name, sizeof(name), "-%c", optopt);
                if (c == ':')
                        return usage_error(verb, "option '%s' needs a value", name);
                return usage_error(verb, "unknown option '%s'", name);
        }
        default:
                return usage_error(verb, "unexpected option");
        }
}

int kv_add(json_t *obj, const char *arg)
{
        const char *eq = strchr(arg, '=');
        if (!eq || eq == arg)
                return -1;
        json_t *v = json_string(eq + 1);
        if (!v)
                return -1; /* not UTF-8 */
        return json_object_setn_new(obj, arg, (size_t)(eq - arg), v) < 0 ? -1 : 0;
}

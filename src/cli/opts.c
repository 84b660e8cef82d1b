#include "cli/opts.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
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

int opts_parse(struct cli *cli, int argc, char **argv, const struct verb_syntax *syntax,
               void *userdata)
{
        static const struct option common_only[] = {
            CLI_COMMON_OPTIONS,
            {},
        };
        const struct verb_syntax *s = syntax;
        int c;
        opts_reset();
        while ((c = getopt_long(argc, argv, s->shortopts ? s->shortopts : ":h",
                                s->options ? s->options : common_only, NULL)) != -1) {
                int r = s->own ? s->own(userdata, c, s->verb) : 0;
                if (r == 0)
                        r = opts_common(cli, c, argv, s->verb, s->help);
                if (r >= 0)
                        return r;
        }
        return opts_operands(argc, argv, s->verb, s->min, s->max, s->missing);
}

int opts_operands(int argc, char **argv, const char *verb, int min, int max, const char *missing)
{
        if (argc - optind < min)
                return usage_error(verb, "%s", missing);
        if (max >= 0 && argc - optind > max)
                return usage_error(verb, "unexpected argument '%s'", argv[optind + max]);
        return -1;
}

const struct subverb *subverb_find(const struct subverb *subs, size_t n_subs, const char *name)
{
        for (size_t i = 0; i < n_subs; i++)
                if (strcmp(subs[i].name, name) == 0)
                        return &subs[i];
        return NULL;
}

int subverb_dispatch(struct cli *cli, int argc, char **argv, const char *verb, const char *help,
                     const char *missing, const struct subverb *subs, size_t n_subs)
{
        /* Options before the sub-verb: only the common ones ("paddock port --json ls X"). */
        int i = 1;
        for (; i < argc && argv[i][0] == '-'; i++) {
                if (strcmp(argv[i], "--json") == 0) {
                        cli->json = true;
                } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
                        fputs(help, stdout);
                        return EXIT_OK;
                } else if (strcmp(argv[i], "--socket") == 0 && i + 1 < argc) {
                        cli->socket_path = argv[++i];
                        cli->socket_from_cmdline = true;
                } else {
                        return usage_error(verb, "unknown option '%s'", argv[i]);
                }
        }
        if (i >= argc)
                return usage_error(verb, "%s", missing);
        const struct subverb *s = subverb_find(subs, n_subs, argv[i]);
        if (!s)
                return usage_error(verb, "unknown command '%s'", argv[i]);
        return s->run(cli, argc - i, argv + i);
}

int process_option(json_t *spec, int c, const char *verb, bool pass_env)
{
        if (c == 'u' || c == 'w') {
                json_t *v = json_string(optarg);
                if (!v || json_object_set_new(spec, c == 'u' ? "user" : "cwd", v) < 0)
                        return usage_error(verb, "value '%s' is not valid UTF-8", optarg);
                return -1;
        }
        if (c != 'e')
                return 0;
        json_t *env = json_child(spec, "env");
        if (!pass_env || strchr(optarg, '=')) {
                if (kv_add(env, optarg) < 0)
                        return usage_error(verb, "-e wants K=V, not '%s'", optarg);
                return -1;
        }
        /* -e K: pass on this shell's value, like docker does. */
        const char *v = getenv(optarg);
        if (!v)
                return usage_error(verb, "-e %s: %s is not set here", optarg, optarg);
        json_object_set_new(env, optarg, json_string(v));
        return -1;
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

json_t *json_child(json_t *obj, const char *key)
{
        json_t *child = json_object_get(obj, key);
        if (!child) {
                child = json_object();
                if (json_object_set_new(obj, key, child) < 0)
                        return NULL;
        }
        return child;
}

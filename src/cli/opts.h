/* Command-line helpers every verb shares: the options all verbs take (--socket, --json,
 * --help), the option loop, operand counts, usage errors, sub-verb dispatch and K=V
 * arguments. Verbs parse with getopt_long, which permutes, so options may stand before or after
 * NAME and everything after "--" is an operand. */
#pragma once

#include "cli/cli.h"

#include <getopt.h>
#include <jansson.h>
#include <stddef.h>

enum {
        OPT_SOCKET = 0x100,
        OPT_JSON,
        OPT_FIRST_VERB_OPTION = 0x200, /* verbs number their long-only options from here */
};

#define CLI_COMMON_OPTIONS                                                                         \
        {"socket", required_argument, NULL, OPT_SOCKET}, {"json", no_argument, NULL, OPT_JSON},    \
        {                                                                                          \
                "help", no_argument, NULL, 'h'                                                     \
        }

/* A verb's own options, given each getopt_long result c before the common ones: -1 when it took
 * c (optarg holds its value), 0 when c is not one of its options, else the exit code to return
 * (after a usage error). */
typedef int (*opts_own_fn)(void *userdata, int c, const char *verb);

/* What a verb takes. A field left zero means: shortopts ":h", only the common options, none of
 * its own, no operands. */
struct verb_syntax {
        const char *verb; /* as usage errors name it: "image ls" */
        const char *help;
        const char *shortopts;
        const struct option *options;
        opts_own_fn own; /* given userdata */
        int min, max;    /* operands after the options; max -1: any number, checked by the verb */
        const char *missing; /* the usage error for fewer than min: "missing NAME" */
};

/* The operand fields of a verb_syntax; most verbs take one NAME, or one or more. */
#define OPERANDS(lo, hi, missing_msg) .min = (lo), .max = (hi), .missing = (missing_msg)
#define OPERANDS_NAME                 OPERANDS(1, 1, "missing NAME")
#define OPERANDS_NAMES                OPERANDS(1, -1, "missing NAME")

/* The option loop of a verb (getopt_long; each option goes to the verb's own function, then to
 * opts_common), then the operand count. -1 when the operands from optind on are what the verb
 * takes; else the exit code to return (EXIT_OK after --help, EXIT_USAGE after a usage error). */
int opts_parse(struct cli *cli, int argc, char **argv, const struct verb_syntax *syntax,
               void *userdata);

/* At least min operands from optind (else the usage error `missing`, e.g. "missing NAME") and
 * at most max (-1: any; else "unexpected argument 'X'"). -1 when they fit, else EXIT_USAGE. */
int opts_operands(int argc, char **argv, const char *verb, int min, int max, const char *missing);

/* Call first thing in a verb: makes the next getopt_long start over on this argv. opts_parse
 * does. */
void opts_reset(void);

/* For a getopt_long result c that the verb does not know itself: the common options and
 * getopt's errors. -1 when handled and parsing goes on; otherwise the exit code to return
 * (EXIT_OK after printing help, EXIT_USAGE after a one-line hint). */
int opts_common(struct cli *cli, int c, char **argv, const char *verb, const char *help);

/* "paddock: VERB: MESSAGE (see 'paddock VERB --help')" on stderr; returns EXIT_USAGE. */
int usage_error(const char *verb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A verb, or a sub-verb of one: argv[0] is its own name. */
struct subverb {
        const char *name;
        int (*run)(struct cli *cli, int argc, char **argv);
};

/* The entry of subs named name, or NULL. */
const struct subverb *subverb_find(const struct subverb *subs, size_t n_subs, const char *name);

/* A verb made of sub-verbs, "paddock VERB [--json] [--socket PATH] SUB ARGS...": the common
 * options before SUB (--help prints help), then SUB's function with argv from SUB on. A missing
 * SUB is the usage error `missing`, e.g. "missing COMMAND (add, ls or rm)". */
int subverb_dispatch(struct cli *cli, int argc, char **argv, const char *verb, const char *help,
                     const char *missing, const struct subverb *subs, size_t n_subs);

/* The options exec and shell share, about the process they start: -e K=V, -w DIR, -u USER. */
#define PROCESS_OPTIONS                                                                            \
        {"env", required_argument, NULL, 'e'}, {"workdir", required_argument, NULL, 'w'},          \
        {                                                                                          \
                "user", required_argument, NULL, 'u'                                               \
        }

/* For c of PROCESS_OPTIONS: record it in the request spec ("env", "cwd", "user") and return
 * -1; 0 when c is not one of them; else the exit code after a usage error. "-e K" without '='
 * passes on our own K when pass_env, else it is an error. */
int process_option(json_t *spec, int c, const char *verb, bool pass_env);

/* Add "K=V" to obj as K: "V". -1 when arg has no '=' or an empty key. */
int kv_add(json_t *obj, const char *arg);
/* The object obj[key], made on first use; NULL when out of memory. */
json_t *json_child(json_t *obj, const char *key);

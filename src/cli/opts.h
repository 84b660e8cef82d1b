/* Command-line helpers every verb shares: the options all verbs take (--socket, --json,
 * --help), usage errors, and K=V arguments. Verbs parse with getopt_long, which permutes, so
 * options may stand before or after NAME and everything after "--" is an operand. */
#pragma once

#include "cli/cli.h"

#include <getopt.h>
#include <jansson.h>

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

/* Call first thing in a verb: makes the next getopt_long start over on this argv. */
void opts_reset(void);

/* For a getopt_long result c that the verb does not know itself: the common options and
 * getopt's errors. -1 when handled and parsing goes on; otherwise the exit code to return
 * (EXIT_OK after printing help, EXIT_USAGE after a one-line hint). */
int opts_common(struct cli *cli, int c, char **argv, const char *verb, const char *help);

/* "paddock: VERB: MESSAGE (see 'paddock VERB --help')" on stderr; returns EXIT_USAGE. */
int usage_error(const char *verb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Add "K=V" to obj as K: "V". -1 when arg has no '=' or an empty key. */
int kv_add(json_t *obj, const char *arg);

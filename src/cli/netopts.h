/* The network options create and net share, and the "network" object they become:
 *
 *   {"mode": "none|open|allow", "allow": [RULE...], "bandwidth": {"egress": R, "ingress": R},
 *    "links": [NAME...]}
 *
 * Only what was given goes up, so a PATCH leaves the other fields as they are. Lists are whole:
 * the --allow and --link values replace the environment's list; --clear-allow and --clear-links
 * send []. Rules, rates and names go up as typed and the daemon names the one it rejects; the
 * mode is checked here because it is a closed set. */
#pragma once

#include "cli/opts.h"

#include <jansson.h>
#include <stdbool.h>

enum {
        /* Past any verb's own options (which count up from OPT_FIRST_VERB_OPTION). */
        OPT_NET_MODE = OPT_FIRST_VERB_OPTION + 0x80,
        OPT_NET_ALLOW,
        OPT_NET_CLEAR_ALLOW,
        OPT_NET_BANDWIDTH,
        OPT_NET_EGRESS,
        OPT_NET_INGRESS,
        OPT_NET_LINK,
        OPT_NET_CLEAR_LINKS,
};

/* The options both verbs take; create names the mode --net, net names it --mode. */
#define NET_OPTIONS                                                                                \
        {"allow", required_argument, NULL, OPT_NET_ALLOW},                                         \
            {"bandwidth", required_argument, NULL, OPT_NET_BANDWIDTH},                             \
            {"egress-bandwidth", required_argument, NULL, OPT_NET_EGRESS},                         \
            {"ingress-bandwidth", required_argument, NULL, OPT_NET_INGRESS},                       \
        {                                                                                          \
                "link", required_argument, NULL, OPT_NET_LINK                                      \
        }

struct netopts {
        const char *mode;
        json_t *allow; /* array, or NULL when neither --allow nor --clear-allow */
        bool clear_allow;
        const char *bandwidth; /* both directions ... */
        const char *egress;    /* ... unless one is given on its own, whatever the order */
        const char *ingress;
        json_t *links;
        bool clear_links;
};

/* An opts_own_fn over a struct netopts: -1 when c was a network option and is recorded; 0 when
 * it is not one; else the exit code (a usage error). */
int netopts_option(void *netopts, int c, const char *verb);

/* The "network" object in *ret, NULL when no network option was given: -1. EXIT_USAGE after
 * printing a usage error. */
int netopts_json(const struct netopts *o, const char *verb, json_t **ret);

void netopts_done(struct netopts *o);

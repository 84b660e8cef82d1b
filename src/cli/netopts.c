#include "cli/netopts.h"

#include <stdlib.h>
#include <string.h>

static bool mode_valid(const char *m)
{
        return !strcmp(m, "none") || !strcmp(m, "open") || !strcmp(m, "allow");
}

/* Append s to the list *arr, made on first use. -1 when s is not UTF-8 (or out of memory). */
static int list_add(json_t **arr, const char *s)
{
        if (!*arr && !(*arr = json_array()))
                return -1;
        json_t *v = json_string(s);
        if (!v)
                return -1;
        return json_array_append_new(*arr, v);
}

int netopts_option(void *netopts, int c, const char *verb)
{
        struct netopts *o = netopts;
        switch (c) {
        case OPT_NET_MODE:
                if (!mode_valid(optarg))
                        return usage_error(verb, "network mode is none, open or allow, not '%s'",
                                           optarg);
                o->mode = optarg;
                return -1;
        case OPT_NET_ALLOW:
                if (list_add(&o->allow, optarg) < 0)
                        return usage_error(verb, "--allow value is not valid UTF-8");
                return -1;
        case OPT_NET_CLEAR_ALLOW:
                o->clear_allow = true;
                return -1;
        case OPT_NET_BANDWIDTH:
                o->bandwidth = optarg;
                return -1;
        case OPT_NET_EGRESS:
                o->egress = optarg;
                return -1;
        case OPT_NET_INGRESS:
                o->ingress = optarg;
                return -1;
        case OPT_NET_LINK:
                if (list_add(&o->links, optarg) < 0)
                        return usage_error(verb, "--link value is not valid UTF-8");
                return -1;
        case OPT_NET_CLEAR_LINKS:
                o->clear_links = true;
                return -1;
        default:
                return 0;
        }
}

/* A rate as the daemon takes it: "0" is the integer 0 (no limit), since the daemon's rate
 * strings need a unit; anything else goes up as typed. NULL when not UTF-8. */
static json_t *rate_value(const char *s)
{
        if (strspn(s, "0") == strlen(s) && *s)
                return json_integer(0);
        return json_string(s);
}

static int set_rate(json_t *bw, const char *key, const char *rate, const char *verb)
{
        json_t *v = rate_value(rate);
        if (!v || json_object_set_new(bw, key, v) < 0) {
                usage_error(verb, "bandwidth value is not valid UTF-8");
                return -1;
        }
        return 0;
}

int netopts_json(const struct netopts *o, const char *verb, json_t **ret)
{
        if (o->clear_allow && o->allow)
                return usage_error(verb, "--clear-allow and --allow exclude each other");
        if (o->clear_links && o->links)
                return usage_error(verb, "--clear-links and --link exclude each other");
        json_t *net = json_object();
        if (!net)
                return EXIT_USAGE;
        if (o->mode)
                json_object_set_new(net, "mode", json_string(o->mode));
        if (o->allow)
                json_object_set(net, "allow", o->allow);
        else if (o->clear_allow)
                json_object_set_new(net, "allow", json_array());
        const char *egress = o->egress ? o->egress : o->bandwidth;
        const char *ingress = o->ingress ? o->ingress : o->bandwidth;
        if (egress || ingress) {
                json_t *bw = json_object();
                json_object_set_new(net, "bandwidth", bw);
                if ((egress && set_rate(bw, "egress", egress, verb) < 0) ||
                    (ingress && set_rate(bw, "ingress", ingress, verb) < 0)) {
                        json_decref(net);
                        return EXIT_USAGE;
                }
        }
        if (o->links)
                json_object_set(net, "links", o->links);
        else if (o->clear_links)
                json_object_set_new(net, "links", json_array());
        if (json_object_size(net) == 0) {
                json_decref(net);
                net = NULL;
        }
        *ret = net;
        return -1;
}

void netopts_done(struct netopts *o)
{
        json_decref(o->allow);
        json_decref(o->links);
        o->allow = o->links = NULL;
}

/* Prometheus metrics (GET /metrics, docs/API.md) and the usage counters `paddock stats` reads.
 *
 *   metrics.c      engine side: every environment's counters (cgroup, disk, veth, firewall),
 *                  environments by state and kind, the veth counters cache
 *   api_metrics.c  API side: the route, who sees what, request counts and latencies
 *
 * Cost of a scrape: per environment the cgroup files of cgroup_env_stats and, for a computer,
 * one disk-usage call, taken in slices of ~0.5 ms between which the loop serves other clients;
 * for all of them together one netlink dump of the veths and one of the firewall's counters
 * (each cached for a second). The environments by state and kind are counters the engine
 * keeps. Nothing per request but a few additions. */
#pragma once
#include "daemon/engine.h"
#include "daemon/http.h"
#include "lib/netlink_stats.h"

#include <stdbool.h>
#include <stdio.h>

/* The done hook's part: count a finished request (method, route pattern, status) and its
 * latency. No allocation. */
void metrics_request_done(const struct request *r);
/* GET /metrics */
void api_metrics(struct request *r, struct engine *e);

/* Traffic of v's host-side veth, seen from the environment: rx = received by it, tx = sent.
 * listed: from the dump shared by every environment (at most a second old); else read for v
 * alone. Zeros for an environment without a veth (not running, network "none"). */
void metrics_env_net(struct engine *e, struct env *v, bool listed, struct link_stats *ret);

/* The per-environment families: readings taken one environment at a time (metrics_envs_add,
 * from an engine_pass, so a scrape of thousands never holds the loop for long), copied with
 * the labels they need, then written all at once. */
struct metrics_envs;
struct metrics_envs *metrics_envs_new(void);
int metrics_envs_add(struct metrics_envs *m, struct engine *e, struct env *v);
int metrics_envs_write(struct metrics_envs *m, FILE *f); /* once, at the end */
void metrics_envs_free(struct metrics_envs *m);
/* The daemon's own families: environments by state and kind (of those m has; the
 * administrator's scrape adds every environment), helpers, build info. */
void metrics_write_daemon(struct engine *e, const struct metrics_envs *m, FILE *f);

/* The Prometheus text format's label value escaping (\\, \", \n). */
void metrics_label_value(FILE *f, const char *s);

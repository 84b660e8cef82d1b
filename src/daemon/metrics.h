/* Prometheus metrics (GET /metrics, docs/API.md) and the usage counters `paddock stats` reads.
 *
 *   metrics.c      engine side: every environment's counters (cgroup, disk, veth, firewall),
 *                  environments by state and kind, the veth counters cache
 *   api_metrics.c  API side: the route, who sees what, request counts and latencies
 *
 * Cost of a scrape: per environment the cgroup files of cgroup_env_stats and, for a computer,
 * one disk-usage call; for all of them together one netlink dump of the veths and one of the
 * firewall's counters (each cached for a second). Nothing per request but a few additions. */
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

/* Write the per-environment families for the environments sees() accepts, and with
 * daemon_wide the daemon's own (environments by state and kind, helpers, build info). */
typedef bool (*metrics_sees_fn)(const struct env *v, const void *ctx);
int metrics_write_envs(struct engine *e, FILE *f, metrics_sees_fn sees, const void *ctx);
void metrics_write_daemon(struct engine *e, FILE *f);

/* The Prometheus text format's label value escaping (\\, \", \n). */
void metrics_label_value(FILE *f, const char *s);

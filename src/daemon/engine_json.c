/* The JSON views of the engine: one environment (its spec, state, usage, disk and network) and
 * the daemon as a whole (`paddock system`). What the API returns for these is built here
 * and nowhere else, so its shape is in one place. */
#include "daemon/engine_internal.h"
#include "daemon/lxcfs.h"
#include "daemon/metrics.h"
#include "lib/confine.h"
#include "lib/userns.h"
#include "lib/util.h"

#include <arpa/inet.h>
#include <sys/resource.h>
#include <sys/sysmacros.h>

static json_t *time_json(int64_t t)
{
        char buf[RFC3339_SIZE];
        return t ? json_string(format_rfc3339(t, buf)) : json_null();
}

static json_t *io_value(uint64_t v, bool nulls)
{
        return v ? json_integer((json_int_t)v) : nulls ? json_null() : json_integer(0);
}

json_t *env_io_json(const struct cgroup_limits *l, bool shown)
{
        json_t *j = json_pack("{s:o,s:o,s:o,s:o}", "read_bps", io_value(l->io_read_bps, shown),
                              "write_bps", io_value(l->io_write_bps, shown), "read_iops",
                              io_value(l->io_read_iops, shown), "write_iops",
                              io_value(l->io_write_iops, shown));
        if (j && shown) {
                char dev[32];
                snprintf(dev, sizeof(dev), "%u:%u", major(l->io_dev), minor(l->io_dev));
                json_object_set_new(j, "device", l->io_dev ? json_string(dev) : json_null());
        }
        return j;
}

#define COUNTERS_FRESH_MS 1000

void engine_env_counters(struct engine *e, struct env *v, bool listed, struct env_counters *ret)
{
        uint64_t now = now_ms();
        if (listed && v->counters_at_ms && now - v->counters_at_ms < COUNTERS_FRESH_MS) {
                *ret = v->counters;
                return;
        }
        struct env_counters c = {0};
        c.cg_ok = v->pidfd >= 0 && /* a stopped environment has no groups */
                  cgroup_env_stats(e->cfg.cgroups, v->cgname, &c.cg) >= 0;
        char dir[4096];
        c.disk_ok = v->kind == KIND_COMPUTER &&
                    env_dir(e, v->row.name, NULL, dir, sizeof(dir)) >= 0 &&
                    e->cfg.storage->ops->usage(e->cfg.storage, dir, &c.disk) >= 0;
        v->counters = c;
        v->counters_at_ms = now;
        *ret = c;
}

/* listed: part of a listing of many environments, where counters may be a second old (one
 * read serves all of them) instead of read for this one alone. */
static json_t *env_json(struct engine *e, struct env *v, bool listed)
{
        json_t *cpus = v->limits.cpu_millis == CG_UNLIMITED
                               ? json_null()
                               : json_real((double)v->limits.cpu_millis / 1000.0);
        json_t *limits = json_pack("{s:o,s:o,s:o,s:o}", "cpus", cpus, "memory",
                                   limit_json(v->limits.memory_bytes), "swap",
                                   limit_json(v->limits.swap_bytes), "pids",
                                   limit_json(v->limits.pids));
        json_t *usage = json_null();
        json_int_t ooms = 0;
        struct env_counters cnt;
        engine_env_counters(e, v, listed, &cnt); /* a stopped computer's disk too */
        if (v->pidfd >= 0) {
                const struct cgroup_stats st = cnt.cg;
                if (cnt.cg_ok) {
                        struct link_stats ns;
                        metrics_env_net(e, v, listed, &ns);
                        usage = json_pack("{s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I}", "memory",
                                          (json_int_t)st.memory_current, "memory_peak",
                                          (json_int_t)st.memory_peak, "pids",
                                          (json_int_t)st.pids_current, "cpu_usage_us",
                                          (json_int_t)st.cpu_usage_us, "oom_kills",
                                          (json_int_t)st.oom_kills, "net_rx_bytes",
                                          (json_int_t)ns.rx_bytes, "net_tx_bytes",
                                          (json_int_t)ns.tx_bytes, "net_rx_packets",
                                          (json_int_t)ns.rx_packets, "net_tx_packets",
                                          (json_int_t)ns.tx_packets);
                        ooms = (json_int_t)st.oom_kills;
                }
        }
        json_t *disk_limit = v->kind == KIND_SANDBOX ? json_integer((json_int_t)v->tmp_bytes)
                             : v->disk_bytes         ? json_integer((json_int_t)v->disk_bytes)
                                                     : json_null();
        json_t *disk_used = cnt.disk_ok ? json_integer((json_int_t)cnt.disk) : json_null();
        const char *state = env_state(v);
        json_t *net = netpolicy_json(&v->net);
        json_object_set_new(net, "ip", v->addr.s_addr ? json_string(v->row.ip) : json_null());
        if (e->net && v->addr.s_addr) {
                struct in_addr gw = network_gateway(e->net);
                json_object_set_new(net, "gateway", json_string(inet_ntoa(gw)));
        }
        struct in6_addr a6;
        char a6s[INET6_ADDRSTRLEN];
        json_object_set_new(net, "ip6",
                            e->net && v->addr.s_addr && network_addr6(e->net, v->addr, &a6)
                                ? json_string(inet_ntop(AF_INET6, &a6, a6s, sizeof(a6s)))
                                : json_null());
        uint64_t denied = e->net && v->pidfd >= 0 && v->net.mode != NET_NONE
                                  ? network_env_denied(e->net, v->row.name, listed)
                                  : 0;
        json_object_set_new(net, "denied", json_integer((json_int_t)denied));
        json_object_set_new(net, "ports", engine_ports_json(e, v));
        json_t *j = json_pack("{s:s,s:s,s:s,s:s,s:o,s:o,s:o,s:o,s:o,s:I,s:b,s:O,s:O,s:o,s:I,s:I,"
                         "s:o,s:I}",
                         "name", v->row.name, "kind", v->row.kind, "image", v->row.image, "state",
                         state, "pid", v->row.pid ? json_integer(v->row.pid) : json_null(),
                         "created_at", time_json(v->row.created_at), "expires_at",
                         time_json(v->row.expires_at), "limits", limits, "usage", usage,
                         "oom_kills", ooms, "autostart", v->row.autostart, "labels", v->labels,
                         "env", v->vars, "network", net, "uid_base",
                         (json_int_t)v->row.uid_base, "uid_count", (json_int_t)UID_RANGE_SIZE,
                         "ttl", v->ttl_s ? json_integer((json_int_t)v->ttl_s) : json_null(),
                         "tmp_size", (json_int_t)v->tmp_bytes);
        /* The token that made it (null: the administrator). An agent sees only its own. */
        json_object_set_new(j, "owner",
                            v->row.owner[0] ? json_string(v->row.owner) : json_null());
        /* limit: a computer's quota, a sandbox's /tmp and /workspace size each; used: bytes
         * the computer wrote itself (shared image data not counted), where the driver knows */
        json_t *disk = json_pack("{s:o,s:o}", "limit", disk_limit, "used", disk_used);
        if (j)
                json_object_set_new(j, "disk", disk);
        else
                json_decref(disk);
        /* disk I/O limits, null = none; device: the block device they apply to (MAJ:MIN), known
         * while the environment runs with a limit */
        if (j)
                json_object_set_new(j, "io", env_io_json(&v->limits, true));
        /* idle stop: the timeout in seconds (null: never), what it does, and when the idle
         * timer paused or stopped it (null: it did not, or it was resumed or started since) */
        if (j)
                json_object_update_new(
                    j, json_pack("{s:o,s:s,s:o}", "idle_timeout",
                                 v->idle_timeout_s ? json_integer((json_int_t)v->idle_timeout_s)
                                                   : json_null(),
                                 "idle_action", v->idle_stop ? "stop" : "pause", "idled_at",
                                 time_json(v->idled_at)));
        return j;
}

json_t *engine_env_json(struct engine *e, struct env *v)
{
        return env_json(e, v, false);
}

json_t *engine_env_json_listed(struct engine *e, struct env *v)
{
        return env_json(e, v, true);
}

/* Open files the daemon wants for MAX_ENVS running environments (a pidfd each) with room for
 * connections, execs and helpers; below it, a fallback is reported. */
#define NOFILE_WANTED (MAX_ENVS + 1024)

/* What this host's kernel or set-up makes the daemon do instead of the best way (item 6 of the
 * operations issue): one sentence each, [] when none. */
static json_t *fallbacks_json(const struct engine *e, const struct storage_info *si)
{
        json_t *a = json_array();
        char buf[768];
        if (e->cfg.cgroup_scope_error) {
                snprintf(buf, sizeof(buf),
                         "no systemd scope for the environments (%s): they run below the "
                         "daemon's own cgroup, and systemd before 254 cannot restart the service "
                         "while any runs", e->cfg.cgroup_scope_error);
                json_array_append_new(a, json_string(buf));
        }
        if (!strcmp(si->driver, "btrfs") && !strcmp(si->quota, "qgroups"))
                json_array_append_new(a, json_string(
                    "btrfs qgroups instead of simple quotas (kernel before 6.7): accounting "
                    "with rescans, and a computer's usage may count image data it shares"));
        if (si->shifted)
                json_array_append_new(a, json_string(
                    "no idmapped mounts: each environment's files are chowned to its id range "
                    "when it is created"));
        struct rlimit rl;
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < NOFILE_WANTED) {
                snprintf(buf, sizeof(buf),
                         "open files limited to %llu (hard limit): fewer than %d environments "
                         "may run at once; raise LimitNOFILE or the hard ulimit -n",
                         (unsigned long long)rl.rlim_cur, MAX_ENVS);
                json_array_append_new(a, json_string(buf));
        }
        int abi = landlock_abi();
        if (abi <= 0) {
                json_array_append_new(a, json_string(
                    "no Landlock: sandboxes are confined by their mounts and seccomp only"));
        } else if (abi < 5) {
                snprintf(buf, sizeof(buf), "Landlock ABI %d: sandboxes' file rules without%s%s%s",
                         abi, abi < 2 ? " cross-directory rename and link control," : "",
                         abi < 3 ? " truncate control," : "", " device ioctl control");
                json_array_append_new(a, json_string(buf));
        }
        return a;
}

json_t *engine_system_json(struct engine *e)
{
        size_t running = e->n_running; /* kept by env_set_pidfd: no walk per request */
        struct storage_info si = storage_info(e->cfg.storage);
        json_t *storage = json_pack("{s:s,s:s,s:s,s:s,s:I,s:I,s:s}", "driver", si.driver, "pool",
                                    si.pool, "backing", si.backing, "quota", si.quota, "size",
                                    (json_int_t)si.size, "used", (json_int_t)si.used,
                                    "ownership",
                                    si.shifted    ? "shifted at create (chown)"
                                    : si.idmapped ? "idmapped mounts"
                                                  : "unavailable");
        json_t *j = json_pack("{s:s,s:s,s:i,s:b,s:s,s:o,s:s,s:I,s:I,s:s}", "version", e->cfg.version,
                         "cgroup_mode",
                         cgroup_mode_name(cgroup_manager_mode(e->cfg.cgroups)), "landlock_abi",
                         landlock_abi(), "idmapped_mounts", si.idmapped, "storage_driver",
                         si.driver, "storage", storage, "root", e->cfg.root, "envs",
                         (json_int_t)e->n_envs, "running", (json_int_t)running, "network",
                         e->net ? "routed" : "unavailable");
        /* the limits-aware /proc view inside environments (lxcfs) */
        if (j)
                json_object_set_new(j, "lxcfs", json_string(lxcfs_status(e->cfg.lxcfs)));
        if (j)
                json_object_set_new(j, "fallbacks", fallbacks_json(e, &si));
        /* where environments' cgroups are made: a systemd scope, else the daemon's own group */
        if (j)
                json_object_set_new(j, "cgroup_scope", e->cfg.cgroup_scope
                                                           ? json_string(e->cfg.cgroup_scope)
                                                           : json_null());
        /* RLIMIT_NOFILE: its soft limit now (raised to the hard one at start, main.c), the hard
         * one, and the soft one the daemon was started with */
        struct rlimit rl;
        if (j && getrlimit(RLIMIT_NOFILE, &rl) == 0)
                json_object_set_new(j, "open_files",
                                    json_pack("{s:I,s:I,s:I}", "limit", (json_int_t)rl.rlim_cur,
                                              "hard", (json_int_t)rl.rlim_max, "at_start",
                                              (json_int_t)e->cfg.nofile_at_start));
        /* idle stop since the daemon started (engine_idle.c) */
        if (j)
                json_object_set_new(j, "idle",
                                    json_pack("{s:I,s:I,s:I,s:I}", "paused",
                                              (json_int_t)e->idle_paused, "stopped",
                                              (json_int_t)e->idle_stopped, "woken",
                                              (json_int_t)e->idle_woken, "watched",
                                              (json_int_t)e->idle_n));
        return j;
}

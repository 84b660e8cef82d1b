/* One lxcfs instance per daemon: a FUSE file system whose /proc/meminfo, /proc/cpuinfo,
 * /proc/stat, /proc/uptime, /proc/loadavg, /proc/swaps and /proc/diskstats answer for the cgroup
 * of the process that reads them. Each environment gets those files bound read-only over its
 * own (src/lib/rootfs.c), so `top`, procps `free` and runtimes that read /proc see the
 * environment's limits. (/sys/devices/system/cpu/online comes from a file the daemon writes per
 * environment; see engine_lifecycle.c.)
 *
 * It runs at /run/paddock/<subtree>-lxcfs/mnt (the directory private, 0700; <subtree> is the
 * daemon's name for its state directory, "paddock-1a2b3c4d") in a session of its own and
 * outlives the daemon while environments run (they read through the mount); a restarted daemon
 * adopts it through its pid file. The daemon restarts it when it dies (environments started
 * before that keep a dead view: their files then fail with ENOTCONN until they restart).
 * Missing or failing, it only costs the virtualized view: environments start without it and
 * `paddock system` says so. */
#pragma once
#include <stdbool.h>

struct loop;
struct lxcfs;

/* Start (or adopt) lxcfs for the daemon named name. Never fails the daemon: *ret is always set;
 * check lxcfs_dir. */
void lxcfs_start(struct loop *loop, const char *name, struct lxcfs **ret);
/* Its mount point while it serves, else NULL. */
const char *lxcfs_dir(const struct lxcfs *l);
/* "running", "stopped", "not installed", "failed: ..." for `paddock system`; valid until the
 * next call. */
const char *lxcfs_status(struct lxcfs *l);
/* At shutdown: keep = environments still run (leave it serving them); else stop and unmount. */
void lxcfs_free(struct lxcfs *l, bool keep);

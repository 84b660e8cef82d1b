/* cgroup v2 backend: the unified hierarchy only.
 *
 * Layout: <own>/<subtree>/<env>[/<sub>]. Controllers reach the env groups through two
 * subtree_control writes, <own> and <own>/<subtree>. The env group itself never gets
 * controllers enabled below it: it holds the environment's PID 1, and a non-root group with
 * processes may have children (the exec sub-groups) only while its subtree_control is empty.
 * Limits on <env> still bound everything below it. */
#include "lib/cgroup_internal.h"
#include "lib/util.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>

static const char *const v2_wanted[] = {"cpu", "memory", "pids", "io"};

/* How long cgroup_env_freeze waits for the kernel to report the group frozen. Tasks in
 * uninterruptible sleep (NFS, FUSE) can hold it up for good, so the wait is bounded. */
#define FREEZE_WAIT_MS 1000

/* "+cpu +memory +pids" for the wanted controllers that `avail` offers and `enabled` lacks. */
static void missing_controllers(const char *avail, const char *enabled, char *buf, size_t size)
{
        buf[0] = 0;
        for (size_t i = 0; i < ELEMENTSOF(v2_wanted); i++) {
                const char *c = v2_wanted[i];
                if ((avail && !cg_has_token(avail, c, " \t\n")) ||
                    cg_has_token(enabled, c, " \t\n"))
                        continue;
                size_t len = strlen(buf);
                snprintf(buf + len, size - len, "%s+%s", len ? " " : "", c);
        }
}

/* The daemon is the only process in <own>: move it into <own>/<subtree>-daemon, a leaf we
 * create, so that <own> may hand controllers down (the "no internal processes" rule). Under
 * systemd with Delegate=yes this is the usual situation. Anyone else in <own> would keep it
 * busy anyway, and is not ours to move: then -EBUSY. */
static int move_self_to_leaf(struct cgroup_manager *m)
{
        int own = m->hier[0].own_fd;
        _cleanup_free_ char *procs = NULL;
        int r = cg_read_all(own, "cgroup.procs", &procs);
        if (r < 0)
                return r;
        pid_t self = getpid();
        for (char *p = procs; *p;) {
                char *end;
                long v = strtol(p, &end, 10);
                if (end == p)
                        break;
                if (v != self)
                        return -EBUSY;
                p = end;
        }
        char leaf[256];
        if ((size_t)snprintf(leaf, sizeof(leaf), "%s-daemon", m->subtree) >= sizeof(leaf))
                return -ENAMETOOLONG;
        if (mkdirat(own, leaf, 0755) < 0 && errno != EEXIST)
                return -errno;
        _cleanup_close_ int lfd =
                openat(own, leaf, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (lfd < 0)
                return -errno;
        char buf[24];
        snprintf(buf, sizeof(buf), "%d", (int)self);
        return cg_write(lfd, "cgroup.procs", buf);
}

static int v2_setup(struct cgroup_manager *m)
{
        const struct cg_hier *h = &m->hier[0];
        int own = h->own_fd;
        _cleanup_free_ char *avail = NULL, *enabled = NULL, *sub_enabled = NULL;
        int r = cg_read_all(own, "cgroup.controllers", &avail);
        if (r < 0)
                return r;
        r = cg_read_all(own, "cgroup.subtree_control", &enabled);
        if (r < 0)
                return r;
        /* Write only what is missing: re-enabling is harmless to the kernel, but a delegated
         * group owned by systemd is best left untouched when nothing needs to change. */
        char add[64];
        missing_controllers(avail, enabled, add, sizeof(add));
        if (add[0]) {
                r = cg_write(own, "cgroup.subtree_control", add);
                if (r == -EBUSY && m->real) {
                        r = move_self_to_leaf(m);
                        if (r >= 0)
                                r = cg_write(own, "cgroup.subtree_control", add);
                }
                if (r < 0)
                        return r;
        }
        /* Then <subtree>, so that env groups get the controllers: it can enable what <own>
         * hands down, i.e. what was enabled before plus what was just added. */
        r = cg_read_all(h->subtree_fd, "cgroup.subtree_control", &sub_enabled);
        if (r < 0)
                return r;
        char offered[256], add2[64];
        snprintf(offered, sizeof(offered), "%s %s", enabled, add);
        missing_controllers(offered, sub_enabled, add2, sizeof(add2));
        if (add2[0])
                return cg_write(h->subtree_fd, "cgroup.subtree_control", add2);
        return 0;
}
static void io_value(char *buf, size_t size, const char *key, uint64_t v)
{
        if (v)
                snprintf(buf, size, " %s=%llu", key, (unsigned long long)v);
        else
                snprintf(buf, size, " %s=max", key);
}

/* io.max: one line "MAJ:MIN rbps=N wbps=N riops=N wiops=N" per device, "max" lifts a limit
 * (all four max removes the device's line). The io controller must be enabled in the subtree
 * (v2_wanted); without it there is no io.max, which is fine while nothing is limited. v2
 * throttling is hierarchical, so exec sub-groups stay within the env's limit. */
static int set_io(int fd, const struct cgroup_limits *l)
{
        if (!l->io_dev)
                return 0;
        char line[256], rb[32], wb[32], ri[32], wi[32];
        io_value(rb, sizeof(rb), "rbps", l->io_read_bps);
        io_value(wb, sizeof(wb), "wbps", l->io_write_bps);
        io_value(ri, sizeof(ri), "riops", l->io_read_iops);
        io_value(wi, sizeof(wi), "wiops", l->io_write_iops);
        snprintf(line, sizeof(line), "%u:%u%s%s%s%s", major(l->io_dev), minor(l->io_dev), rb, wb,
                 ri, wi);
        int r = cg_write(fd, "io.max", line);
        if (r == -ENOENT)
                r = cgroup_limits_have_io(l) ? -EOPNOTSUPP : 0;
        return r;
}

static int v2_set_limits(struct cgroup_manager *m, const char *env, const struct cgroup_limits *l)
{
        _cleanup_close_ int fd = -EBADF;
        int r = cg_open_group(&m->hier[0], env, NULL, false, &fd);
        if (r < 0)
                return r;

        /* cpu.max "QUOTA PERIOD": 1000 millicpus = one period's worth of quota. The kernel
         * refuses quotas below 1 ms. cpu.weight stays at its default (100): every env gets an
         * equal share under contention, the cap is what the user asked for. */
        char cpu[64];
        if (l->cpu_millis == CG_UNLIMITED)
                snprintf(cpu, sizeof(cpu), "max %llu", CG_CPU_PERIOD_US);
        else {
                uint64_t quota = l->cpu_millis * (CG_CPU_PERIOD_US / 1000);
                snprintf(cpu, sizeof(cpu), "%llu %llu",
                         (unsigned long long)(quota < 1000 ? 1000 : quota), CG_CPU_PERIOD_US);
        }
        /* Not again what the group has (a new one: "max 100000"): each write walks every cpu
         * group on the host. */
        r = cg_write_changed(fd, "cpu.max", cpu);
        if (r == -ENOENT)
                r = l->cpu_millis == CG_UNLIMITED ? 0 : -EOPNOTSUPP;
        if (r < 0)
                return r;

        /* memory.max only. memory.high would throttle (reclaim-stall) well before the hard
         * limit, which surprises users more than a clean OOM kill at the limit. */
        r = cg_write_limit(fd, "memory.max", l->memory_bytes, "max");
        if (r < 0)
                return r;
        /* Without swap accounting (swapaccount=0, or no CONFIG_MEMCG_SWAP) there is no
         * memory.swap.max; swap then cannot be limited and is best-effort, as on v1. */
        r = cg_write_limit(fd, "memory.swap.max", l->swap_bytes, "max");
        if (r < 0 && r != -EOPNOTSUPP)
                return r;
        r = cg_write_limit(fd, "pids.max", l->pids, "max");
        if (r < 0)
                return r;
        return set_io(fd, l);
}

static int v2_freeze(struct cgroup_manager *m, const char *env, const char *sub, bool frozen)
{
        _cleanup_close_ int fd = -EBADF;
        int r = cg_open_group(&m->hier[0], env, sub, false, &fd);
        if (r < 0)
                return r;
        r = cg_write(fd, "cgroup.freeze", frozen ? "1" : "0");
        if (r == -ENOENT)
                return -EOPNOTSUPP; /* kernel < 5.2 */
        if (r < 0)
                return r;
        /* Freezing finishes asynchronously; "frozen 1" in cgroup.events says when. Thawing is
         * immediate enough not to wait for. */
        if (!frozen || !cg_file_exists(fd, "cgroup.events"))
                return 0;
        for (unsigned waited = 0; waited < FREEZE_WAIT_MS; waited += 2) {
                uint64_t v;
                if (cg_read_keyed_u64(fd, "cgroup.events", "frozen", &v) < 0 || v == 1)
                        return 0;
                cg_sleep_ms(2);
        }
        /* Not frozen in time: thawed again, not left half-frozen while the caller believes
         * the freeze failed (a pause reports the error and the environment stays running). */
        (void)cg_write(fd, "cgroup.freeze", "0");
        return -EBUSY;
}

static int v2_kill_fast(struct cgroup_manager *m, const char *env, const char *sub)
{
        _cleanup_close_ int fd = -EBADF;
        int r = cg_open_group(&m->hier[0], env, sub, false, &fd);
        if (r < 0)
                return r;
        r = cg_write(fd, "cgroup.kill", "1");
        return r == -ENOENT ? -EOPNOTSUPP : r; /* cgroup.kill: kernel >= 5.14 */
}

/* A statistic whose file is missing (controller not enabled, memory.peak before 5.19) reads
 * as 0; anything else that goes wrong is an error. */
static int stat_u64(int fd, const char *file, const char *key, uint64_t *ret)
{
        int r = key ? cg_read_keyed_u64(fd, file, key, ret) : cg_read_u64(fd, file, ret);
        return r == -ENOENT || r == -ENODATA ? 0 : r;
}

static int v2_stats(struct cgroup_manager *m, const char *env, struct cgroup_stats *ret)
{
        _cleanup_close_ int fd = -EBADF;
        int r = cg_open_group(&m->hier[0], env, NULL, false, &fd);
        if (r < 0)
                return r;
        if ((r = stat_u64(fd, "memory.current", NULL, &ret->memory_current)) < 0 ||
            (r = stat_u64(fd, "memory.peak", NULL, &ret->memory_peak)) < 0 ||
            (r = stat_u64(fd, "pids.current", NULL, &ret->pids_current)) < 0 ||
            (r = stat_u64(fd, "cpu.stat", "usage_usec", &ret->cpu_usage_us)) < 0 ||
            (r = stat_u64(fd, "memory.events", "oom_kill", &ret->oom_kills)) < 0)
                return r;
        return 0;
}

static int v2_oom_kills(struct cgroup_manager *m, const char *env, uint64_t *ret)
{
        _cleanup_close_ int fd = -EBADF;
        int r = cg_open_group(&m->hier[0], env, NULL, false, &fd);
        return r < 0 ? r : stat_u64(fd, "memory.events", "oom_kill", ret);
}

const struct cgroup_ops cgroup_v2_ops = {
        .setup = v2_setup,
        .set_limits = v2_set_limits,
        .freeze = v2_freeze,
        .kill_fast = v2_kill_fast,
        .stats = v2_stats,
        .oom_kills = v2_oom_kills,
};

/* cgroup v1 backend, also used for the hybrid layout.
 *
 * Each v1 controller hierarchy (co-mounted ones such as "cpu,cpuacct" count once) gets the
 * same <own>/<subtree>/<env>[/<sub>] directories, each below the group the daemon runs in
 * in that hierarchy. Limits go to the hierarchy of their controller. v1 has no
 * "no internal processes" rule, so there is no delegation step.
 *
 * On hybrid hosts the controller-less cgroup2 mount gets the same directories too: it carries
 * no limits, but offers cgroup.kill (one write kills the whole group, no pid races) and
 * cgroup.freeze, which behave better than the v1 freezer (frozen tasks still die on SIGKILL). */
#include "lib/cgroup_internal.h"
#include "lib/util.h"

#include <dirent.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#define FREEZE_WAIT_MS 1000

static int open_ctl_group(struct cgroup_manager *m, const char *controller, const char *env,
                          const char *sub, int *ret_fd)
{
        const struct cg_hier *h = cg_find_hier(m, controller);
        if (!h)
                return -EOPNOTSUPP;
        return cg_open_group(h, env, sub, false, ret_fd);
}

static int set_cpu(struct cgroup_manager *m, const char *env, uint64_t millis)
{
        _cleanup_close_ int fd = -EBADF;
        int r = open_ctl_group(m, "cpu", env, NULL, &fd);
        if (r == -EOPNOTSUPP && millis == CG_UNLIMITED)
                return 0;
        if (r < 0)
                return r;
        /* Each write of the quota or period walks every cpu group on the host (the kernel's
         * schedulability check), so what a new group has already (no quota, the default
         * period) is not written again. */
        if (millis == CG_UNLIMITED) {
                r = cg_write_changed(fd, "cpu.cfs_quota_us", "-1");
                return r == -ENOENT ? 0 : r;
        }
        /* The period first: the quota is checked against it. Quotas below 1 ms are refused. */
        uint64_t cur = 0;
        if (cg_read_u64(fd, "cpu.cfs_period_us", &cur) < 0 || cur != CG_CPU_PERIOD_US) {
                char period[24];
                snprintf(period, sizeof(period), "%llu", CG_CPU_PERIOD_US);
                r = cg_write(fd, "cpu.cfs_period_us", period);
                if (r < 0)
                        return r == -ENOENT ? -EOPNOTSUPP : r;
        }
        uint64_t quota = millis * (CG_CPU_PERIOD_US / 1000);
        return cg_write_limit(fd, "cpu.cfs_quota_us", quota < 1000 ? 1000 : quota, "-1");
}

static int set_memory(struct cgroup_manager *m, const char *env, uint64_t mem, uint64_t swap)
{
        _cleanup_close_ int fd = -EBADF;
        int r = open_ctl_group(m, "memory", env, NULL, &fd);
        if (r == -EOPNOTSUPP && mem == CG_UNLIMITED)
                return 0;
        if (r < 0)
                return r;
        /* memsw is memory+swap and the kernel keeps memsw >= limit at every step: lowering
         * goes limit first, raising goes memsw first. Rather than read the old values, try
         * limit first and on EINVAL (new limit above the old memsw) swap the order.
         * memory.memsw.* only exists with swap accounting; without it swap is unlimited. */
        bool memsw = cg_file_exists(fd, "memory.memsw.limit_in_bytes");
        uint64_t total = mem == CG_UNLIMITED || swap == CG_UNLIMITED || mem + swap < mem
                                 ? CG_UNLIMITED
                                 : mem + swap;
        r = cg_write_limit(fd, "memory.limit_in_bytes", mem, "-1");
        if (r == -EINVAL && memsw) {
                r = cg_write_limit(fd, "memory.memsw.limit_in_bytes", total, "-1");
                if (r < 0)
                        return r;
                return cg_write_limit(fd, "memory.limit_in_bytes", mem, "-1");
        }
        if (r < 0 || !memsw)
                return r;
        return cg_write_limit(fd, "memory.memsw.limit_in_bytes", total, "-1");
}

static int set_pids(struct cgroup_manager *m, const char *env, uint64_t pids)
{
        _cleanup_close_ int fd = -EBADF;
        int r = open_ctl_group(m, "pids", env, NULL, &fd);
        if (r == -EOPNOTSUPP && pids == CG_UNLIMITED)
                return 0;
        if (r < 0)
                return r;
        return cg_write_limit(fd, "pids.max", pids, "max");
}

/* blkio.throttle.*_device take "MAJ:MIN VALUE" per device; 0 removes the rule. v1 throttling
 * is flat (a group's limit does not bound its children), which is why exec sub-groups are never
 * made in the blkio hierarchy: every process of the environment shares its one group. */
static int set_io(struct cgroup_manager *m, const char *env, const struct cgroup_limits *l)
{
        if (!l->io_dev)
                return 0;
        _cleanup_close_ int fd = -EBADF;
        int r = open_ctl_group(m, "blkio", env, NULL, &fd);
        if (r == -EOPNOTSUPP && !cgroup_limits_have_io(l))
                return 0;
        if (r < 0)
                return r;
        const struct {
                const char *file;
                uint64_t v;
        } w[] = {{"blkio.throttle.read_bps_device", l->io_read_bps},
                 {"blkio.throttle.write_bps_device", l->io_write_bps},
                 {"blkio.throttle.read_iops_device", l->io_read_iops},
                 {"blkio.throttle.write_iops_device", l->io_write_iops}};
        for (size_t i = 0; i < ELEMENTSOF(w); i++) {
                char buf[64];
                snprintf(buf, sizeof(buf), "%u:%u %llu", major(l->io_dev), minor(l->io_dev),
                         (unsigned long long)w[i].v);
                r = cg_write(fd, w[i].file, buf);
                if (r == -ENOENT)
                        r = w[i].v ? -EOPNOTSUPP : 0;
                if (r < 0)
                        return r;
        }
        return 0;
}

static int v1_set_limits(struct cgroup_manager *m, const char *env, const struct cgroup_limits *l)
{
        int r = set_cpu(m, env, l->cpu_millis);
        if (r < 0)
                return r;
        r = set_memory(m, env, l->memory_bytes, l->swap_bytes);
        if (r < 0)
                return r;
        r = set_pids(m, env, l->pids);
        if (r < 0)
                return r;
        return set_io(m, env, l);
}

/* A v1 cpuset group accepts tasks only once cpuset.cpus and cpuset.mems are set: the subtree
 * copies the daemon's own group's, and clone_children makes every env group below start with
 * the subtree's. */
static int setup_cpuset(const struct cg_hier *h)
{
        static const char *const files[] = {"cpuset.cpus", "cpuset.mems"};
        for (size_t i = 0; i < ELEMENTSOF(files); i++) {
                _cleanup_free_ char *have = NULL, *own = NULL;
                if (cg_read_all(h->subtree_fd, files[i], &have) >= 0 && have[0] && have[0] != '\n')
                        continue;
                if (cg_read_all(h->own_fd, files[i], &own) < 0)
                        continue; /* a test directory without the file */
                own[strcspn(own, "\n")] = 0;
                int r = cg_write(h->subtree_fd, files[i], own);
                if (r < 0)
                        return r;
        }
        return cg_file_exists(h->subtree_fd, "cgroup.clone_children")
                       ? cg_write(h->subtree_fd, "cgroup.clone_children", "1")
                       : 0;
}

static int v1_setup(struct cgroup_manager *m)
{
        const struct cg_hier *cs = cg_find_hier(m, "cpuset");
        if (cs) {
                int q = setup_cpuset(cs);
                if (q < 0)
                        return q;
        }
        /* Before 5.16 (or with an old systemd) memory.use_hierarchy may be 0, and then an exec
         * sub-group would escape its env's memory limit. Our subtree has no children yet on
         * first start, which is when the flag can still be set. */
        const struct cg_hier *h = cg_find_hier(m, "memory");
        uint64_t v;
        if (!h || cg_read_u64(h->subtree_fd, "memory.use_hierarchy", &v) < 0 || v == 1)
                return 0;
        return cg_write(h->subtree_fd, "memory.use_hierarchy", "1");
}

static int wait_state(int fd, const char *file, const char *key, const char *want)
{
        for (unsigned waited = 0; waited < FREEZE_WAIT_MS; waited += 2) {
                if (key) {
                        uint64_t v;
                        if (cg_read_keyed_u64(fd, file, key, &v) < 0 || v == 1)
                                return 0;
                } else {
                        _cleanup_free_ char *s = NULL;
                        if (cg_read_all(fd, file, &s) < 0 || !strncmp(s, want, strlen(want)))
                                return 0;
                }
                cg_sleep_ms(2);
        }
        return -EBUSY;
}

/* Thawing through cgroup.freeze also clears a v1 freezer someone else set on the group (an
 * admin, another tool): v1-frozen tasks would not even die of SIGKILL, so neither a resume nor
 * a kill (cg_kill_until_empty) would get anywhere. */
static void thaw_v1_freezer(struct cgroup_manager *m, const char *env, const char *sub)
{
        _cleanup_close_ int fd = -EBADF;
        if (open_ctl_group(m, "freezer", env, sub, &fd) == 0)
                (void)cg_write(fd, "freezer.state", "THAWED");
}

static int v1_freeze(struct cgroup_manager *m, const char *env, const char *sub, bool frozen)
{
        _cleanup_close_ int fd = -EBADF;
        const struct cg_hier *u = cg_find_hier(m, NULL);
        if (u) {
                int r = cg_open_group(u, env, sub, false, &fd);
                if (r < 0 && r != -ENOENT)
                        return r;
                if (r == 0 && cg_file_exists(fd, "cgroup.freeze")) {
                        r = cg_write(fd, "cgroup.freeze", frozen ? "1" : "0");
                        if (r == 0 && !frozen)
                                thaw_v1_freezer(m, env, sub);
                        if (r < 0 || !frozen || !cg_file_exists(fd, "cgroup.events"))
                                return r;
                        r = wait_state(fd, "cgroup.events", "frozen", NULL);
                        if (r < 0) /* not left half-frozen: see v2_freeze */
                                (void)cg_write(fd, "cgroup.freeze", "0");
                        return r;
                }
                closep(&fd);
        }
        /* The v1 freezer: FREEZING until every task is caught, then FROZEN. */
        int r = open_ctl_group(m, "freezer", env, sub, &fd);
        if (r < 0)
                return r;
        r = cg_write(fd, "freezer.state", frozen ? "FROZEN" : "THAWED");
        if (r < 0)
                return r == -ENOENT ? -EOPNOTSUPP : r;
        return frozen ? wait_state(fd, "freezer.state", NULL, "FROZEN") : 0;
}

static int v1_kill_fast(struct cgroup_manager *m, const char *env, const char *sub)
{
        const struct cg_hier *u = cg_find_hier(m, NULL);
        if (!u)
                return -EOPNOTSUPP;
        _cleanup_close_ int fd = -EBADF;
        int r = cg_open_group(u, env, sub, false, &fd);
        if (r < 0)
                return r;
        r = cg_write(fd, "cgroup.kill", "1");
        return r == -ENOENT ? -EOPNOTSUPP : r;
}

/* Missing controller or file reads as 0, like on v2. */
/* One file of the group, opened by "ENV/FILE" from the subtree (no open and close of the
 * group's directory: a listing reads this for every environment). env is a checked name (no
 * "/" or ".."); cgroupfs has no symlinks. A missing file or group reads as 0, like a missing
 * file did (v1_stats has found the memory group before). */
static int stat_u64(struct cgroup_manager *m, const char *controller, const char *env,
                    const char *file, const char *key, uint64_t *ret)
{
        const struct cg_hier *h = cg_find_hier(m, controller);
        if (!h)
                return 0;
        if (!cg_name_valid(env))
                return -EINVAL;
        char path[PATH_MAX];
        if (BUF_PRINTF(path, "%s/%s", env, file) < 0)
                return -ENAMETOOLONG;
        int r = key ? cg_read_keyed_u64(h->subtree_fd, path, key, ret)
                    : cg_read_u64(h->subtree_fd, path, ret);
        return r == -ENOENT || r == -ENODATA ? 0 : r;
}

/* v1 counts an OOM kill only in the victim's own group (v2 propagates it upwards), and the
 * victim may sit in an exec sub-group: add up the whole env. */
static int sum_oom_kills(int dirfd, uint64_t *sum, int depth)
{
        uint64_t v = 0;
        int r = cg_read_keyed_u64(dirfd, "memory.oom_control", "oom_kill", &v);
        if (r < 0 && r != -ENOENT && r != -ENODATA)
                return r;
        *sum += r < 0 ? 0 : v;
        if (depth >= 32)
                return 0;
        /* A directory's link count is 2 + its subdirectories on cgroupfs (kernfs): 2 means no
         * sub-group, and the listing of its ~40 control files is skipped (most environments,
         * most of the time: exec sub-groups exist only while commands run). */
        struct stat st;
        if (fstat(dirfd, &st) == 0 && st.st_nlink == 2)
                return 0;
        _cleanup_closedir_ DIR *d = NULL;
        r = opendir_at(dirfd, ".", &d);
        if (r < 0)
                return r;
        FOREACH_DIRENT(de, d)
        {
                if (de->d_name[0] == '.' || (de->d_type != DT_DIR && de->d_type != DT_UNKNOWN))
                        continue;
                _cleanup_close_ int cfd = openat(dirfd, de->d_name,
                                                 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (cfd >= 0 && (r = sum_oom_kills(cfd, sum, depth + 1)) < 0)
                        break;
        }
        return r;
}

static int v1_stats(struct cgroup_manager *m, const char *env, struct cgroup_stats *ret)
{
        uint64_t cpu_ns = 0;
        int r;
        /* The memory group is opened once for its three files. */
        _cleanup_close_ int mem = -EBADF;
        r = open_ctl_group(m, "memory", env, NULL, &mem);
        if (r < 0 && r != -EOPNOTSUPP)
                return r;
        if (mem >= 0 &&
            (((r = cg_read_u64(mem, "memory.usage_in_bytes", &ret->memory_current)) < 0 &&
              r != -ENOENT && r != -ENODATA) ||
             ((r = cg_read_u64(mem, "memory.max_usage_in_bytes", &ret->memory_peak)) < 0 &&
              r != -ENOENT && r != -ENODATA)))
                return r;
        if ((r = stat_u64(m, "pids", env, "pids.current", NULL, &ret->pids_current)) < 0 ||
            (r = stat_u64(m, "cpuacct", env, "cpuacct.usage", NULL, &cpu_ns)) < 0)
                return r;
        ret->cpu_usage_us = cpu_ns / 1000;
        /* "oom_kill N" (since 4.13) in memory.oom_control, next to oom_kill_disable. */
        return mem >= 0 ? sum_oom_kills(mem, &ret->oom_kills, 0) : 0;
}

static int v1_oom_kills(struct cgroup_manager *m, const char *env, uint64_t *ret)
{
        _cleanup_close_ int mem = -EBADF;
        int r = open_ctl_group(m, "memory", env, NULL, &mem);
        if (r == -EOPNOTSUPP)
                return 0;
        return r < 0 ? r : sum_oom_kills(mem, ret, 0);
}

const struct cgroup_ops cgroup_v1_ops = {
        .setup = v1_setup,
        .set_limits = v1_set_limits,
        .freeze = v1_freeze,
        .kill_fast = v1_kill_fast,
        .stats = v1_stats,
        .oom_kills = v1_oom_kills,
};

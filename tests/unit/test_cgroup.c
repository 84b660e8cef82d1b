/* cgroup manager tests.
 *
 * Most run against a temporary directory laid out like /sys/fs/cgroup: interface files are
 * pre-created as regular files (mkdir in a plain directory makes none), so what the backend
 * writes can be read back. One test runs against the real /sys/fs/cgroup, as root, when the
 * host is hybrid or v2, and removes everything it made even when a check fails. */
#include <sys/sysmacros.h>
#include "lib/cgroup.h"
#include "lib/util.h"
#include "unit.h"

#include <signal.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>

static char tmp_root[256];

/* ---------------------------------------------------------------- fixtures */

static const char *pathf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static const char *pathf(const char *fmt, ...)
{
        static char bufs[8][1024];
        static int next;
        char *b = bufs[next++ % 8];
        int n = snprintf(b, sizeof(bufs[0]), "%s/", tmp_root);
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(b + n, sizeof(bufs[0]) - (size_t)n, fmt, ap);
        va_end(ap);
        return b;
}

/* The same, relative to the temp root (what put/get/exists take). */
static const char *relf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static const char *relf(const char *fmt, ...)
{
        static char bufs[8][1024];
        static int next;
        char *b = bufs[next++ % 8];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(b, sizeof(bufs[0]), fmt, ap);
        va_end(ap);
        return b;
}

/* Create a file (and its parent directories) under the temp root with some content. */
static void put(const char *rel, const char *content)
{
        char dir[1024];
        snprintf(dir, sizeof(dir), "%s", pathf("%s", rel));
        char *slash = strrchr(dir, '/');
        *slash = 0;
        if (mkdir_p_at(AT_FDCWD, dir, 0755) < 0) {
                fprintf(stderr, "  mkdir %s: %m\n", dir);
                exit(2);
        }
        FILE *f = fopen(pathf("%s", rel), "we");
        if (!f) {
                fprintf(stderr, "  create %s: %m\n", rel);
                exit(2);
        }
        fputs(content, f);
        fclose(f);
}

/* Contents of a file under the temp root with the trailing newline dropped; "(missing)". */
static const char *get(const char *rel)
{
        static char bufs[4][256];
        static int next;
        char *b = bufs[next++ % 4];
        FILE *f = fopen(pathf("%s", rel), "re");
        if (!f)
                return "(missing)";
        size_t n = fread(b, 1, sizeof(bufs[0]) - 1, f);
        fclose(f);
        b[n] = 0;
        if (n && b[n - 1] == '\n')
                b[n - 1] = 0;
        return b;
}

/* Bytes in a file under the temp root (-1: missing): tells a value the kernel printed with its
 * newline from one cg_write wrote without. */
static long size_of(const char *rel)
{
        struct stat st;
        return stat(pathf("%s", rel), &st) == 0 ? (long)st.st_size : -1;
}

static bool exists(const char *rel)
{
        struct stat st;
        return stat(pathf("%s", rel), &st) == 0;
}

static void tmp_setup(void)
{
        snprintf(tmp_root, sizeof(tmp_root), "/tmp/paddock-test-cgroup-XXXXXX");
        if (!mkdtemp(tmp_root)) {
                perror("mkdtemp");
                exit(2);
        }
}

static void tmp_teardown(void)
{
        rm_rf_at(AT_FDCWD, tmp_root);
}

#define SUB "paddock-test"
#define MIB (1024ull * 1024)

static const struct cgroup_limits limits_a = {
        .cpu_millis = 1500, .memory_bytes = 512 * MIB, .swap_bytes = 256 * MIB, .pids = 100};
static const struct cgroup_limits limits_none = {.cpu_millis = CG_UNLIMITED,
                                                 .memory_bytes = CG_UNLIMITED,
                                                 .swap_bytes = CG_UNLIMITED,
                                                 .pids = CG_UNLIMITED};

/* v2: sysfs root with the daemon in /agent/x. */
static void layout_v2(void)
{
        put("cgroup.controllers", "cpuset cpu io memory hugetlb pids rdma misc\n");
        put("cgroup.subtree_control", "cpu io memory pids\n");
        put("cgroup.procs", "");
        put("agent/x/cgroup.controllers", "cpu io memory pids\n");
        put("agent/x/cgroup.subtree_control", "");
        put("agent/x/cgroup.procs", "");
        put("agent/x/" SUB "/cgroup.subtree_control", "");
        static const char *const files[] = {"cpu.max", "memory.max", "memory.swap.max",
                                            "pids.max", "cgroup.procs", "cgroup.kill",
                                            "cgroup.freeze", "io.max"};
        for (size_t i = 0; i < ELEMENTSOF(files); i++)
                put(relf("agent/x/" SUB "/e1/%s", files[i]), "");
        put("agent/x/" SUB "/e1/exec1/cgroup.procs", "");
        put("self", "0::/agent/x\n");
}

/* v1: co-mounted cpu,cpuacct; the daemon in /agent/x everywhere except cpuset. */
static const char *const v1_dirs[] = {"memory", "pids", "cpu,cpuacct", "freezer", "blkio"};

static void layout_v1(void)
{
        for (size_t i = 0; i < ELEMENTSOF(v1_dirs); i++) {
                put(relf("%s/cgroup.procs", v1_dirs[i]), "");
                put(relf("%s/agent/x/cgroup.procs", v1_dirs[i]), "");
                put(relf("%s/agent/x/" SUB "/e1/cgroup.procs", v1_dirs[i]), "");
                put(relf("%s/agent/x/" SUB "/e1/exec1/cgroup.procs", v1_dirs[i]), "");
                put(relf("%s/agent/x/" SUB "/e1/tasks", v1_dirs[i]), "");
        }
        put("cpuset/cgroup.procs", "");
        put("cpuset/cpuset.cpus", "0-3\n");
        put("cpuset/" SUB "/cpuset.cpus", "");
        put("cpuset/" SUB "/cgroup.clone_children", "0");
        put("cpuset/" SUB "/e1/cgroup.procs", "");
        put("memory/agent/x/" SUB "/e1/memory.limit_in_bytes", "");
        put("memory/agent/x/" SUB "/e1/memory.memsw.limit_in_bytes", "");
        put("cpu,cpuacct/agent/x/" SUB "/e1/cpu.cfs_period_us", "");
        put("cpu,cpuacct/agent/x/" SUB "/e1/cpu.cfs_quota_us", "");
        put("pids/agent/x/" SUB "/e1/pids.max", "");
        put("freezer/agent/x/" SUB "/e1/freezer.state", "");
        static const char *const blk[] = {"read_bps", "write_bps", "read_iops", "write_iops"};
        for (size_t i = 0; i < ELEMENTSOF(blk); i++)
                put(relf("blkio/agent/x/" SUB "/e1/blkio.throttle.%s_device", blk[i]), "");
        put("self", "12:name=systemd:/agent/x\n"
                    "11:cpuset:/\n"
                    "8:pids:/agent/x\n"
                    "6:freezer:/agent/x\n"
                    "4:memory:/agent/x\n"
                    "3:cpu,cpuacct:/agent/x\n"
                    "2:blkio:/agent/x\n");
}

/* hybrid: v1 as above plus a controller-less cgroup2 at unified/, with the daemon at /agent/y
 * there (a different path than in v1, as happens under systemd). */
static void layout_hybrid(void)
{
        layout_v1();
        put("unified/cgroup.procs", "");
        put("unified/cgroup.controllers", "");
        put("unified/agent/y/cgroup.procs", "");
        put("unified/agent/y/" SUB "/e1/cgroup.procs", "");
        put("unified/agent/y/" SUB "/e1/cgroup.kill", "");
        put("unified/agent/y/" SUB "/e1/cgroup.freeze", "");
        put("unified/agent/y/" SUB "/e1/exec1/cgroup.procs", "");
        FILE *f = fopen(pathf("self"), "ae");
        fputs("0::/agent/y\n", f);
        fclose(f);
}

static struct cgroup_manager *new_manager(int *ret_r)
{
        struct cgroup_manager *m = NULL;
        *ret_r = cgroup_manager_new(tmp_root, pathf("self"), SUB, &m);
        return m;
}

/* ---------------------------------------------------------------- detection, names */

static void test_cgroup_detect__none(void)
{
        tmp_setup();
        put("self", "0::/\n");
        struct cgroup_manager *m = (struct cgroup_manager *)0x1;
        CHECK_EQ_INT(cgroup_manager_new(tmp_root, pathf("self"), SUB, &m), -EOPNOTSUPP);
        CHECK(m == (struct cgroup_manager *)0x1); /* ret untouched on failure */
        tmp_teardown();
}

static void test_cgroup_detect__modes(void)
{
        int r;
        tmp_setup();
        layout_v2();
        struct cgroup_manager *m = new_manager(&r);
        CHECK_EQ_INT(r, 0);
        if (m) {
                CHECK_EQ_INT(cgroup_manager_mode(m), CGROUP_V2);
                CHECK_EQ_STR(cgroup_mode_name(cgroup_manager_mode(m)), "v2");
        }
        cgroup_manager_free(m);
        tmp_teardown();

        tmp_setup();
        layout_v1();
        m = new_manager(&r);
        CHECK_EQ_INT(r, 0);
        if (m)
                CHECK_EQ_STR(cgroup_mode_name(cgroup_manager_mode(m)), "v1");
        cgroup_manager_free(m);
        tmp_teardown();

        tmp_setup();
        layout_hybrid();
        m = new_manager(&r);
        CHECK_EQ_INT(r, 0);
        if (m)
                CHECK_EQ_STR(cgroup_mode_name(cgroup_manager_mode(m)), "hybrid");
        cgroup_manager_free(m);
        tmp_teardown();

        /* A cgroup2 mount but no "0::" line: nothing to use it with, plain v1. */
        tmp_setup();
        layout_v1();
        put("unified/cgroup.procs", "");
        m = new_manager(&r);
        CHECK_EQ_INT(r, 0);
        if (m)
                CHECK_EQ_INT(cgroup_manager_mode(m), CGROUP_V1);
        cgroup_manager_free(m);
        tmp_teardown();
}

static void test_cgroup_names__rejected(void)
{
        int r;
        tmp_setup();
        layout_v2();
        struct cgroup_manager *m = new_manager(&r);
        CHECK_EQ_INT(r, 0);
        if (!m)
                goto out;
        static const char *const bad[] = {"",      "..",      "../x",   "a/b", "memory.max",
                                          "tasks", ".hidden", "cgroup.procs", "-x"};
        for (size_t i = 0; i < ELEMENTSOF(bad); i++)
                CHECK_EQ_INT(cgroup_env_create(m, bad[i], &limits_none), -EINVAL);
        CHECK_EQ_INT(cgroup_env_join(m, "e1", "../../x", false), -EINVAL);
        bool placed;
        CHECK_EQ_INT(cgroup_env_clone(m, "e1", "../x", 0, NULL, &placed), -EINVAL);
        CHECK(!exists("x") && !exists("agent/x/x"));
        /* A zero cap is an unset field, not a limit. */
        struct cgroup_limits zero = limits_a;
        zero.memory_bytes = 0;
        CHECK_EQ_INT(cgroup_env_create(m, "e1", &zero), -EINVAL);
        struct cgroup_manager *m2 = NULL;
        CHECK_EQ_INT(cgroup_manager_new(tmp_root, pathf("self"), "../up", &m2), -EINVAL);
        CHECK(!m2);
out:
        cgroup_manager_free(m);
        tmp_teardown();
}

/* ---------------------------------------------------------------- v2 */

static void test_cgroup_v2__delegation(void)
{
        int r;
        tmp_setup();
        layout_v2();
        struct cgroup_manager *m = new_manager(&r);
        CHECK_EQ_INT(r, 0);
        cgroup_manager_free(m);
        CHECK_EQ_STR(get("agent/x/cgroup.subtree_control"), "+cpu +memory +pids +io");
        CHECK_EQ_STR(get("agent/x/" SUB "/cgroup.subtree_control"), "+cpu +memory +pids +io");
        /* Nothing above or beside the own group is touched. */
        CHECK_EQ_STR(get("cgroup.subtree_control"), "cpu io memory pids");
        CHECK(!exists(SUB));
        CHECK(!exists("agent/x/" SUB "-daemon"));

        /* Already enabled (as the kernel shows it): no write at all. */
        put("agent/x/cgroup.subtree_control", "cpu io memory pids\n");
        put("agent/x/" SUB "/cgroup.subtree_control", "cpu io memory pids\n");
        m = new_manager(&r);
        CHECK_EQ_INT(r, 0);
        cgroup_manager_free(m);
        CHECK_EQ_STR(get("agent/x/cgroup.subtree_control"), "cpu io memory pids");
        CHECK_EQ_STR(get("agent/x/" SUB "/cgroup.subtree_control"), "cpu io memory pids");

        /* Partly enabled, and a controller the own group does not offer: only the rest. */
        put("agent/x/cgroup.controllers", "memory pids\n");
        put("agent/x/cgroup.subtree_control", "memory\n");
        put("agent/x/" SUB "/cgroup.subtree_control", "");
        m = new_manager(&r);
        CHECK_EQ_INT(r, 0);
        cgroup_manager_free(m);
        CHECK_EQ_STR(get("agent/x/cgroup.subtree_control"), "+pids");
        CHECK_EQ_STR(get("agent/x/" SUB "/cgroup.subtree_control"), "+memory +pids");
        tmp_teardown();
}

/* A scope delegated to the daemon elsewhere (systemd): environments go below it, the daemon's
 * own group (a systemd service's) is not written at all, so systemd may start a new main
 * process there; and only on v2. */
static void test_cgroup_v2__delegated_elsewhere(void)
{
        int r;
        tmp_setup();
        layout_v2();
        put("p.slice/s.scope/cgroup.controllers", "cpu io memory pids\n");
        put("p.slice/s.scope/cgroup.subtree_control", "");
        put("p.slice/s.scope/cgroup.procs", "");
        put("p.slice/s.scope/" SUB "/cgroup.subtree_control", "");
        struct cgroup_manager *m = NULL;
        r = cgroup_manager_new_delegated(tmp_root, pathf("self"), "/p.slice/s.scope", SUB, &m);
        CHECK_EQ_INT(r, 0);
        CHECK(exists("p.slice/s.scope/" SUB));
        cgroup_manager_free(m);
        CHECK_EQ_STR(get("p.slice/s.scope/cgroup.subtree_control"), "+cpu +memory +pids +io");
        CHECK_EQ_STR(get("agent/x/cgroup.subtree_control"), "");
        CHECK(!exists("agent/x/" SUB "-daemon"));

        m = (struct cgroup_manager *)0x1;
        CHECK_EQ_INT(cgroup_manager_new_delegated(tmp_root, pathf("self"), "p.slice", SUB, &m),
                     -EINVAL);
        CHECK_EQ_INT(cgroup_manager_new_delegated(tmp_root, pathf("self"), "/p.slice/../agent",
                                                  SUB, &m),
                     -EINVAL);
        tmp_teardown();

        tmp_setup();
        layout_v1();
        m = (struct cgroup_manager *)0x1;
        CHECK_EQ_INT(cgroup_manager_new_delegated(tmp_root, pathf("self"), "/p.slice/s.scope",
                                                  SUB, &m),
                     -EINVAL);
        tmp_teardown();
}

static void test_cgroup_v2__limits(void)
{
        int r;
        tmp_setup();
        layout_v2();
        struct cgroup_manager *m = new_manager(&r);
        CHECK_EQ_INT(r, 0);
        if (!m)
                goto out;
        CHECK_EQ_INT(cgroup_env_create(m, "e1", &limits_a), 0);
        CHECK_EQ_STR(get("agent/x/" SUB "/e1/cpu.max"), "150000 100000");
        CHECK_EQ_STR(get("agent/x/" SUB "/e1/memory.max"), "536870912");
        CHECK_EQ_STR(get("agent/x/" SUB "/e1/memory.swap.max"), "268435456");
        CHECK_EQ_STR(get("agent/x/" SUB "/e1/pids.max"), "100");
        CHECK(!exists("agent/x/" SUB "/e1/memory.high")); /* memory.max only */
        CHECK_EQ_STR(get("agent/x/" SUB "/e1/io.max"), ""); /* no I/O limits: not written */

        struct cgroup_limits io = limits_a;
        io.io_write_bps = 10 * MIB;
        io.io_read_iops = 200;
        CHECK_EQ_INT(cgroup_env_set_limits(m, "e1", &io), -EINVAL); /* no device */
        io.io_dev = makedev(7, 3);
        CHECK_EQ_INT(cgroup_env_set_limits(m, "e1", &io), 0);
        CHECK_EQ_STR(get("agent/x/" SUB "/e1/io.max"),
                     "7:3 rbps=max wbps=10485760 riops=200 wiops=max");
        io.io_write_bps = io.io_read_iops = 0;
        CHECK_EQ_INT(cgroup_env_set_limits(m, "e1", &io), 0);
        CHECK_EQ_STR(get("agent/x/" SUB "/e1/io.max"), "7:3 rbps=max wbps=max riops=max wiops=max");

        struct cgroup_limits l = limits_a;
        l.cpu_millis = 250;
        l.swap_bytes = 0;
        CHECK_EQ_INT(cgroup_env_set_limits(m, "e1", &l), 0);
        CHECK_EQ_STR(get("agent/x/" SUB "/e1/cpu.max"), "25000 100000");
        CHECK_EQ_STR(get("agent/x/" SUB "/e1/memory.swap.max"), "0");

        CHECK_EQ_INT(cgroup_env_set_limits(m, "e1", &limits_none), 0);
        CHECK_EQ_STR(get("agent/x/" SUB "/e1/cpu.max"), "max 100000");
        CHECK_EQ_INT(size_of("agent/x/" SUB "/e1/cpu.max"), 10); /* written */
        /* What the group has already is not written again (each cpu.max write walks every
         * cpu group of the host): the kernel's own "max 100000\n" stays as it was. */
        put("agent/x/" SUB "/e1/cpu.max", "max 100000\n");
        CHECK_EQ_INT(cgroup_env_set_limits(m, "e1", &limits_none), 0);
        CHECK_EQ_INT(size_of("agent/x/" SUB "/e1/cpu.max"), 11);
        CHECK_EQ_STR(get("agent/x/" SUB "/e1/memory.max"), "max");
        CHECK_EQ_STR(get("agent/x/" SUB "/e1/memory.swap.max"), "max");
        CHECK_EQ_STR(get("agent/x/" SUB "/e1/pids.max"), "max");

        /* A group we make ourselves: below the own group and the subtree, never the root. */
        CHECK_EQ_INT(cgroup_env_create(m, "e2", &limits_none), 0);
        CHECK(exists("agent/x/" SUB "/e2"));
        CHECK(!exists("e2") && !exists(SUB) && !exists("agent/e2") && !exists("agent/x/e2"));

        /* A real limit where the controller file is absent fails, and rolls the group back. */
        CHECK_EQ_INT(cgroup_env_create(m, "e3", &limits_a), -EOPNOTSUPP);
        CHECK(!exists("agent/x/" SUB "/e3"));
        CHECK_EQ_INT(cgroup_env_set_limits(m, "nope", &limits_a), -ENOENT);

        char **names = NULL;
        size_t n = 0;
        CHECK_EQ_INT(cgroup_list_envs(m, &names, &n), 0);
        CHECK_EQ_INT(n, 2);
        if (n == 2) {
                CHECK_EQ_STR(names[0], "e1");
                CHECK_EQ_STR(names[1], "e2");
        }
        for (size_t i = 0; i < n; i++)
                free(names[i]);
        free(names);
out:
        cgroup_manager_free(m);
        tmp_teardown();
}

static void test_cgroup_v2__stats(void)
{
        int r;
        tmp_setup();
        layout_v2();
        put("agent/x/" SUB "/e1/memory.events",
            "low 0\nhigh 0\nmax 17\noom 3\noom_kill 2\noom_group_kill 0\n");
        put("agent/x/" SUB "/e1/cpu.stat", "usage_usec 123456\nuser_usec 100000\n"
                                           "system_usec 23456\n");
        put("agent/x/" SUB "/e1/memory.current", "1048576\n");
        put("agent/x/" SUB "/e1/memory.peak", "2097152\n");
        put("agent/x/" SUB "/e1/pids.current", "3\n");
        struct cgroup_manager *m = new_manager(&r);
        CHECK_EQ_INT(r, 0);
        if (!m)
                goto out;
        struct cgroup_stats st;
        CHECK_EQ_INT(cgroup_env_stats(m, "e1", &st), 0);
        CHECK_EQ_INT(st.oom_kills, 2);
        CHECK_EQ_INT(st.cpu_usage_us, 123456);
        CHECK_EQ_INT(st.memory_current, 1048576);
        CHECK_EQ_INT(st.memory_peak, 2097152);
        CHECK_EQ_INT(st.pids_current, 3);
        CHECK_EQ_INT(cgroup_env_stats(m, "nope", &st), -ENOENT);
        uint64_t kills = 0;
        CHECK_EQ_INT(cgroup_env_oom_kills(m, "e1", &kills), 0);
        CHECK_EQ_INT(kills, 2);
        CHECK_EQ_INT(cgroup_env_oom_kills(m, "nope", &kills), -ENOENT);
out:
        cgroup_manager_free(m);
        tmp_teardown();
}

static void test_cgroup_v2__attach_freeze_destroy(void)
{
        int r;
        char self[24];
        snprintf(self, sizeof(self), "%d", (int)getpid());
        tmp_setup();
        layout_v2();
        struct cgroup_manager *m = new_manager(&r);
        CHECK_EQ_INT(r, 0);
        if (!m)
                goto out;
        CHECK_EQ_INT(cgroup_env_create(m, "e1", &limits_a), 0);
        /* Not placed by the clone: the calling process writes itself ("0"). */
        CHECK_EQ_INT(cgroup_env_join(m, "e1", "exec1", false), 0);
        CHECK_EQ_STR(get("agent/x/" SUB "/e1/exec1/cgroup.procs"), "0");
        CHECK_EQ_STR(get("agent/x/" SUB "/e1/cgroup.procs"), "");
        /* Placed by the clone: nothing left to write on v2. */
        put("agent/x/" SUB "/e1/exec1/cgroup.procs", self);
        CHECK_EQ_INT(cgroup_env_join(m, "e1", "exec1", true), 0);
        CHECK_EQ_STR(get("agent/x/" SUB "/e1/exec1/cgroup.procs"), self);
        /* No controllers below the env group: it holds PID 1 (no internal processes rule). */
        CHECK(!exists("agent/x/" SUB "/e1/cgroup.subtree_control"));
        CHECK_EQ_INT(cgroup_env_join(m, "nope", NULL, false), -ENOENT);

        CHECK_EQ_INT(cgroup_env_freeze(m, "e1", true), 0);
        CHECK_EQ_STR(get("agent/x/" SUB "/e1/cgroup.freeze"), "1");
        CHECK_EQ_INT(cgroup_env_freeze(m, "e1", false), 0);
        CHECK_EQ_STR(get("agent/x/" SUB "/e1/cgroup.freeze"), "0");

        /* Empty group: kill has nothing to do. */
        put("agent/x/" SUB "/e1/exec1/cgroup.procs", "");
        CHECK_EQ_INT(cgroup_env_kill(m, "e1", NULL), 0);
        CHECK_EQ_STR(get("agent/x/" SUB "/e1/cgroup.kill"), "");

        /* A group that never empties (a regular file listing only ourselves, whom the kill
         * loop must never signal): cgroup.kill, then the freeze+SIGKILL fallback, then -EBUSY
         * after the timeout, and the group is thawed again. */
        put("agent/x/" SUB "/e1/exec1/cgroup.procs", self);
        put("agent/x/" SUB "/e1/exec1/cgroup.kill", "");
        put("agent/x/" SUB "/e1/exec1/cgroup.freeze", "");
        CHECK_EQ_INT(cgroup_env_kill(m, "e1", "exec1"), -EBUSY);
        CHECK_EQ_STR(get("agent/x/" SUB "/e1/exec1/cgroup.kill"), "1");
        CHECK_EQ_STR(get("agent/x/" SUB "/e1/exec1/cgroup.freeze"), "0");
        CHECK_EQ_STR(get("agent/x/" SUB "/e1/cgroup.kill"), "");

        /* Prune never kills: a group with a process stays, an empty one goes. */
        CHECK_EQ_INT(cgroup_env_prune(m, "e1", "exec1"), -EBUSY);
        CHECK(exists("agent/x/" SUB "/e1/exec1"));
        CHECK_EQ_INT(cgroup_env_prune(m, "e1", "gone"), 0);
        CHECK_EQ_INT(cgroup_env_join(m, "e1", "exec2", false), -ENOENT); /* no cgroup.procs */
        CHECK_EQ_INT(cgroup_env_prune(m, "e1", "exec2"), 0);
        CHECK(!exists("agent/x/" SUB "/e1/exec2"));

        put("agent/x/" SUB "/e1/exec1/cgroup.procs", "");
        CHECK_EQ_INT(cgroup_env_destroy(m, "e1", "exec1"), 0);
        CHECK(!exists("agent/x/" SUB "/e1/exec1"));
        CHECK(exists("agent/x/" SUB "/e1"));
        CHECK_EQ_INT(cgroup_env_destroy(m, "e1", NULL), 0);
        CHECK(!exists("agent/x/" SUB "/e1"));
        CHECK(exists("agent/x/" SUB));
        CHECK_EQ_INT(cgroup_env_destroy(m, "e1", NULL), -ENOENT);
out:
        cgroup_manager_free(m);
        tmp_teardown();
}

/* ---------------------------------------------------------------- v1 / hybrid */

static void test_cgroup_v1__limits(void)
{
        int r;
        tmp_setup();
        layout_v1();
        struct cgroup_manager *m = new_manager(&r);
        CHECK_EQ_INT(r, 0);
        if (!m)
                goto out;
        CHECK_EQ_INT(cgroup_env_create(m, "e1", &limits_a), 0);
        CHECK_EQ_STR(get("cpu,cpuacct/agent/x/" SUB "/e1/cpu.cfs_period_us"), "100000");
        CHECK_EQ_STR(get("cpu,cpuacct/agent/x/" SUB "/e1/cpu.cfs_quota_us"), "150000");
        /* a period that differs (someone changed it) is put back: the quota is relative to it */
        put("cpu,cpuacct/agent/x/" SUB "/e1/cpu.cfs_period_us", "50000");
        CHECK_EQ_INT(cgroup_env_set_limits(m, "e1", &limits_a), 0);
        CHECK_EQ_STR(get("cpu,cpuacct/agent/x/" SUB "/e1/cpu.cfs_period_us"), "100000");
        CHECK_EQ_STR(get("memory/agent/x/" SUB "/e1/memory.limit_in_bytes"), "536870912");
        CHECK_EQ_STR(get("memory/agent/x/" SUB "/e1/memory.memsw.limit_in_bytes"), "805306368");
        CHECK_EQ_STR(get("pids/agent/x/" SUB "/e1/pids.max"), "100");

        struct cgroup_limits io = limits_a;
        io.io_dev = makedev(7, 3);
        io.io_read_bps = 5 * MIB;
        io.io_write_iops = 50;
        CHECK_EQ_INT(cgroup_env_set_limits(m, "e1", &io), 0);
        CHECK_EQ_STR(get("blkio/agent/x/" SUB "/e1/blkio.throttle.read_bps_device"), "7:3 5242880");
        CHECK_EQ_STR(get("blkio/agent/x/" SUB "/e1/blkio.throttle.write_bps_device"), "7:3 0");
        CHECK_EQ_STR(get("blkio/agent/x/" SUB "/e1/blkio.throttle.read_iops_device"), "7:3 0");
        CHECK_EQ_STR(get("blkio/agent/x/" SUB "/e1/blkio.throttle.write_iops_device"), "7:3 50");

        struct cgroup_limits l = limits_a;
        l.swap_bytes = 0;
        CHECK_EQ_INT(cgroup_env_set_limits(m, "e1", &l), 0);
        CHECK_EQ_STR(get("memory/agent/x/" SUB "/e1/memory.memsw.limit_in_bytes"), "536870912");
        l.swap_bytes = CG_UNLIMITED;
        CHECK_EQ_INT(cgroup_env_set_limits(m, "e1", &l), 0);
        CHECK_EQ_STR(get("memory/agent/x/" SUB "/e1/memory.memsw.limit_in_bytes"), "-1");

        CHECK_EQ_INT(cgroup_env_set_limits(m, "e1", &limits_none), 0);
        CHECK_EQ_STR(get("cpu,cpuacct/agent/x/" SUB "/e1/cpu.cfs_quota_us"), "-1");
        CHECK_EQ_INT(size_of("cpu,cpuacct/agent/x/" SUB "/e1/cpu.cfs_quota_us"), 2); /* written */
        /* A new group's "-1\n" is not written again: each write walks every cpu group. */
        put("cpu,cpuacct/agent/x/" SUB "/e1/cpu.cfs_quota_us", "-1\n");
        CHECK_EQ_INT(cgroup_env_set_limits(m, "e1", &limits_none), 0);
        CHECK_EQ_INT(size_of("cpu,cpuacct/agent/x/" SUB "/e1/cpu.cfs_quota_us"), 3);
        CHECK_EQ_STR(get("memory/agent/x/" SUB "/e1/memory.limit_in_bytes"), "-1");
        CHECK_EQ_STR(get("memory/agent/x/" SUB "/e1/memory.memsw.limit_in_bytes"), "-1");
        CHECK_EQ_STR(get("pids/agent/x/" SUB "/e1/pids.max"), "max");

        /* Without swap accounting there is no memsw file, and none is made up. */
        put("memory/agent/x/" SUB "/e4/memory.limit_in_bytes", "");
        put("cpu,cpuacct/agent/x/" SUB "/e4/cpu.cfs_period_us", "");
        put("cpu,cpuacct/agent/x/" SUB "/e4/cpu.cfs_quota_us", "");
        put("pids/agent/x/" SUB "/e4/pids.max", "");
        CHECK_EQ_INT(cgroup_env_create(m, "e4", &limits_a), 0);
        CHECK_EQ_STR(get("memory/agent/x/" SUB "/e4/memory.limit_in_bytes"), "536870912");
        CHECK(!exists("memory/agent/x/" SUB "/e4/memory.memsw.limit_in_bytes"));

        /* Our own groups: in every hierarchy used, below own/subtree, never the root. */
        CHECK_EQ_INT(cgroup_env_create(m, "e2", &limits_none), 0);
        for (size_t i = 0; i < ELEMENTSOF(v1_dirs); i++) {
                CHECK(exists(relf("%s/agent/x/" SUB "/e2", v1_dirs[i])));
                CHECK(!exists(relf("%s/e2", v1_dirs[i])));
                CHECK(!exists(relf("%s/" SUB, v1_dirs[i])));
        }
        /* cpuset: the daemon sits at its root there; env groups below the subtree (for lxcfs),
         * which inherits the root's cpus/mems and hands them down */
        CHECK(exists("cpuset/" SUB "/e2") && !exists("cpuset/agent"));
        CHECK_EQ_STR(get("cpuset/" SUB "/cpuset.cpus"), "0-3");
        CHECK_EQ_STR(get("cpuset/" SUB "/cgroup.clone_children"), "1");
        CHECK(!exists("cpu") && !exists("cpuacct"));
out:
        cgroup_manager_free(m);
        tmp_teardown();
}

static void test_cgroup_v1__stats(void)
{
        int r;
        tmp_setup();
        layout_v1();
        put("memory/agent/x/" SUB "/e1/memory.oom_control",
            "oom_kill_disable 0\nunder_oom 0\noom_kill 5\n");
        put("memory/agent/x/" SUB "/e1/memory.usage_in_bytes", "4096\n");
        put("memory/agent/x/" SUB "/e1/memory.max_usage_in_bytes", "8192\n");
        put("cpu,cpuacct/agent/x/" SUB "/e1/cpuacct.usage", "2500000\n");
        put("pids/agent/x/" SUB "/e1/pids.current", "7\n");
        struct cgroup_manager *m = new_manager(&r);
        CHECK_EQ_INT(r, 0);
        if (!m)
                goto out;
        struct cgroup_stats st;
        CHECK_EQ_INT(cgroup_env_stats(m, "e1", &st), 0);
        CHECK_EQ_INT(st.oom_kills, 5);
        CHECK_EQ_INT(st.memory_current, 4096);
        CHECK_EQ_INT(st.memory_peak, 8192);
        CHECK_EQ_INT(st.cpu_usage_us, 2500);
        CHECK_EQ_INT(st.pids_current, 7);
        /* an exec sub-group's kills count too (v1 does not add them up itself) */
        put("memory/agent/x/" SUB "/e1/x-1/memory.oom_control",
            "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n");
        CHECK_EQ_INT(cgroup_env_stats(m, "e1", &st), 0);
        CHECK_EQ_INT(st.oom_kills, 7);
        uint64_t kills = 0;
        CHECK_EQ_INT(cgroup_env_oom_kills(m, "e1", &kills), 0);
        CHECK_EQ_INT(kills, 7);
out:
        cgroup_manager_free(m);
        tmp_teardown();
}

static void test_cgroup_v1__attach_freeze_destroy(void)
{
        int r;
        char self[24];
        snprintf(self, sizeof(self), "%d", (int)getpid());
        tmp_setup();
        layout_v1();
        struct cgroup_manager *m = new_manager(&r);
        CHECK_EQ_INT(r, 0);
        if (!m)
                goto out;
        CHECK_EQ_INT(cgroup_env_create(m, "e1", &limits_a), 0);
        /* v1: the thread moves itself through `tasks` ("0"), never cgroup.procs, whose write
         * takes the kernel's global lock (an RCU grace period). */
        CHECK_EQ_INT(cgroup_env_join(m, "e1", NULL, false), 0);
        for (size_t i = 0; i < ELEMENTSOF(v1_dirs); i++) {
                CHECK_EQ_STR(get(relf("%s/agent/x/" SUB "/e1/tasks", v1_dirs[i])), "0");
                CHECK_EQ_STR(get(relf("%s/agent/x/" SUB "/e1/cgroup.procs", v1_dirs[i])), "");
        }
        CHECK_EQ_STR(get("memory/agent/x/cgroup.procs"), ""); /* own group untouched */

        CHECK_EQ_INT(cgroup_env_freeze(m, "e1", true), 0);
        CHECK_EQ_STR(get("freezer/agent/x/" SUB "/e1/freezer.state"), "FROZEN");
        CHECK_EQ_INT(cgroup_env_freeze(m, "e1", false), 0);
        CHECK_EQ_STR(get("freezer/agent/x/" SUB "/e1/freezer.state"), "THAWED");

        for (size_t i = 0; i < ELEMENTSOF(v1_dirs); i++)
                put(relf("%s/agent/x/" SUB "/e1/cgroup.procs", v1_dirs[i]), "");
        put("cpuset/" SUB "/e1/cgroup.procs", "");
        CHECK_EQ_INT(cgroup_env_destroy(m, "e1", NULL), 0);
        for (size_t i = 0; i < ELEMENTSOF(v1_dirs); i++) {
                CHECK(!exists(relf("%s/agent/x/" SUB "/e1", v1_dirs[i])));
                CHECK(exists(relf("%s/agent/x/" SUB, v1_dirs[i])));
        }
out:
        cgroup_manager_free(m);
        tmp_teardown();
}

static void test_cgroup_hybrid__unified_mirror(void)
{
        int r;
        char self[24];
        snprintf(self, sizeof(self), "%d", (int)getpid());
        tmp_setup();
        layout_hybrid();
        struct cgroup_manager *m = new_manager(&r);
        CHECK_EQ_INT(r, 0);
        if (!m)
                goto out;
        CHECK_EQ_INT(cgroup_env_create(m, "e1", &limits_a), 0);
        CHECK_EQ_STR(get("memory/agent/x/" SUB "/e1/memory.limit_in_bytes"), "536870912");
        CHECK_EQ_INT(cgroup_env_create(m, "e2", &limits_none), 0);
        CHECK(exists("unified/agent/y/" SUB "/e2"));
        CHECK(!exists("unified/" SUB) && !exists("unified/agent/x"));

        CHECK_EQ_INT(cgroup_env_join(m, "e1", "exec1", false), 0);
        CHECK_EQ_STR(get("unified/agent/y/" SUB "/e1/exec1/cgroup.procs"), "0");
        /* v1 controllers get no per-exec group: the process joins the env group there. */
        CHECK_EQ_STR(get("memory/agent/x/" SUB "/e1/tasks"), "0");
        /* Cloned into the unified group already: only the v1 hierarchies are written. */
        put("unified/agent/y/" SUB "/e1/exec1/cgroup.procs", "");
        put("memory/agent/x/" SUB "/e1/tasks", "");
        CHECK_EQ_INT(cgroup_env_join(m, "e1", "exec1", true), 0);
        CHECK_EQ_STR(get("unified/agent/y/" SUB "/e1/exec1/cgroup.procs"), "");
        CHECK_EQ_STR(get("memory/agent/x/" SUB "/e1/tasks"), "0");

        /* Freezing goes through cgroup.freeze of the cgroup2 mirror, not the v1 freezer. */
        CHECK_EQ_INT(cgroup_env_freeze(m, "e1", true), 0);
        CHECK_EQ_STR(get("unified/agent/y/" SUB "/e1/cgroup.freeze"), "1");
        CHECK_EQ_STR(get("freezer/agent/x/" SUB "/e1/freezer.state"), "");
        CHECK_EQ_INT(cgroup_env_freeze(m, "e1", false), 0);
        CHECK_EQ_STR(get("unified/agent/y/" SUB "/e1/cgroup.freeze"), "0");

        char **names = NULL;
        size_t n = 0;
        CHECK_EQ_INT(cgroup_list_envs(m, &names, &n), 0);
        CHECK_EQ_INT(n, 2);
        for (size_t i = 0; i < n; i++)
                free(names[i]);
        free(names);

        static const char *const all[] = {"memory/agent/x", "pids/agent/x", "cpu,cpuacct/agent/x",
                                          "freezer/agent/x", "blkio/agent/x", "unified/agent/y",
                                          "cpuset"};
        for (size_t i = 0; i < ELEMENTSOF(all); i++) {
                put(relf("%s/" SUB "/e1/cgroup.procs", all[i]), "");
                put(relf("%s/" SUB "/e1/exec1/cgroup.procs", all[i]), "");
        }
        CHECK_EQ_INT(cgroup_env_destroy(m, "e1", NULL), 0);
        for (size_t i = 0; i < ELEMENTSOF(all); i++)
                CHECK(!exists(relf("%s/" SUB "/e1", all[i])));
out:
        cgroup_manager_free(m);
        tmp_teardown();
}

/* ---------------------------------------------------------------- the real thing */

struct real_ctx {
        char subtree[64];
        char self_cgroup[4096]; /* our /proc/self/cgroup before the manager ran */
        pid_t kids[3];
};

/* Split a /proc/PID/cgroup line "ID:controllers:/path" in place. */
static bool split_cgroup_line(char *line, char **ret_ctl, char **ret_path)
{
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2)
                return false;
        *c1 = *c2 = 0;
        *ret_ctl = c1 + 1;
        *ret_path = c2 + 1;
        return true;
}

/* The group directory of the subtree in the hierarchy of one /proc/self/cgroup line. */
static void subtree_dir(char *buf, size_t size, const char *id, const char *ctl, const char *own,
                        bool v2, const char *subtree)
{
        if (!strcmp(own, "/"))
                own = "";
        if (!strcmp(id, "0"))
                snprintf(buf, size, "/sys/fs/cgroup%s%s/%s", v2 ? "" : "/unified", own, subtree);
        else
                snprintf(buf, size, "/sys/fs/cgroup/%s%s/%s", ctl, own, subtree);
}

/* The env group path of pid in the hierarchy whose /proc/PID/cgroup line starts with prefix
 * ("4:memory:" style, matched on the controller list; "0::" for unified). */
static bool proc_cgroup_path(pid_t pid, const char *controllers, char *buf, size_t size)
{
        char path[64], content[4096];
        snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
        FILE *f = fopen(path, "re");
        if (!f)
                return false;
        size_t n = fread(content, 1, sizeof(content) - 1, f);
        fclose(f);
        content[n] = 0;
        char *save = NULL, *ctl, *cg;
        for (char *line = strtok_r(content, "\n", &save); line;
             line = strtok_r(NULL, "\n", &save)) {
                if (!split_cgroup_line(line, &ctl, &cg) || strcmp(ctl, controllers))
                        continue;
                snprintf(buf, size, "%s", cg);
                return true;
        }
        return false;
}

static bool ends_with(const char *s, const char *suffix)
{
        size_t a = strlen(s), b = strlen(suffix);
        return a >= b && !strcmp(s + a - b, suffix);
}

/* Forked child: attach to env/sub, report the result, then wait to be killed (or allocate
 * until the OOM killer comes when hog is set). */
/* Whether the last spawn_attached child was born in its cgroup2 group (CLONE_INTO_CGROUP). */
static bool last_placed;

static pid_t spawn_attached(struct cgroup_manager *m, const char *env, const char *sub, bool hog)
{
        int p[2];
        if (pipe2(p, O_CLOEXEC) < 0)
                return -1;
        /* The daemon's way: born in the cgroup2 group where there is one, then the rest. */
        bool placed;
        pid_t pid = cgroup_env_clone(m, env, sub, 0, NULL, &placed);
        if (pid < 0) {
                fprintf(stderr, "  clone: %s\n", strerror(-pid));
                close(p[0]);
                close(p[1]);
                return -1;
        }
        if (pid == 0) {
                close(p[0]);
                int msg[2] = {cgroup_env_join(m, env, sub, placed), placed};
                (void)!write(p[1], msg, sizeof(msg));
                int r = msg[0];
                close(p[1]);
                if (r < 0)
                        _exit(1);
                if (hog) {
                        for (size_t i = 0; i < 1024; i++) {
                                char *b = malloc(MIB);
                                if (b)
                                        memset(b, 1, MIB);
                        }
                        _exit(3); /* not reached below a 64M limit */
                }
                for (;;)
                        pause();
        }
        close(p[1]);
        int msg[2] = {-1, 0};
        if (pid > 0 && read(p[0], msg, sizeof(msg)) != sizeof(msg))
                msg[0] = -1;
        int r = msg[0];
        last_placed = msg[1];
        close(p[0]);
        if (pid > 0 && r != 0) {
                fprintf(stderr, "  child attach: %s\n", strerror(-r));
                waitpid(pid, NULL, 0);
                return -1;
        }
        return pid;
}

static void real_cleanup(struct real_ctx *c, struct cgroup_manager *m, bool v2)
{
        for (size_t i = 0; i < ELEMENTSOF(c->kids); i++) {
                if (c->kids[i] > 0) {
                        kill(c->kids[i], SIGKILL);
                        waitpid(c->kids[i], NULL, 0);
                        c->kids[i] = 0;
                }
        }
        if (m)
                (void)cgroup_env_destroy(m, "e", NULL);
        cgroup_manager_free(m);
        /* Remove the subtree the manager made in each hierarchy: rmdir only, so nothing
         * that is not empty and ours can go. The leaf a v2 daemon moved itself into stays
         * while we are in it; the delegated scope it lives in takes it along. */
        char buf[4096];
        snprintf(buf, sizeof(buf), "%s", c->self_cgroup);
        char *save = NULL, *ctl, *own;
        for (char *line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
                if (!split_cgroup_line(line, &ctl, &own) || !strncmp(ctl, "name=", 5))
                        continue;
                char dir[4200];
                subtree_dir(dir, sizeof(dir) - 8, line, ctl, own, v2, c->subtree);
                size_t len = strlen(dir);
                static const char *const kids[] = {"/e/x1", "/e/hog", "/e"};
                for (size_t i = 0; i < ELEMENTSOF(kids); i++) {
                        snprintf(dir + len, sizeof(dir) - len, "%s", kids[i]);
                        (void)rmdir(dir);
                }
                dir[len] = 0;
                (void)rmdir(dir);
        }
}

/* Create an env on a real cgroup tree, run processes in it and in a sub-group, check the
 * kernel's view, OOM, freeze, kill and destroy. */
static void real_lifecycle(const char *root, const char *name, bool want_v1)
{
        struct real_ctx c;
        memset(&c, 0, sizeof(c));
        snprintf(c.subtree, sizeof(c.subtree), "paddock-unittest-%d%s", (int)getpid(),
                 want_v1 ? "-v1" : "");
        FILE *f = fopen("/proc/self/cgroup", "re");
        if (!f)
                return;
        size_t n = fread(c.self_cgroup, 1, sizeof(c.self_cgroup) - 1, f);
        fclose(f);
        c.self_cgroup[n] = 0;

        struct cgroup_manager *m = NULL;
        int r = cgroup_manager_new(root, "/proc/self/cgroup", c.subtree, &m);
        if (r == -EBUSY || r == -EOPNOTSUPP) {
                /* v2 without a delegated group of our own (e.g. a login session scope). */
                SKIP("manager: %s (no delegated cgroup of our own)", strerror(-r));
                real_cleanup(&c, NULL, true);
                return;
        }
        CHECK_EQ_INT(r, 0);
        if (r < 0)
                return;
        enum cgroup_mode mode = cgroup_manager_mode(m);
        bool v2 = mode == CGROUP_V2;
        if ((mode == CGROUP_V1) != want_v1) {
                SKIP("%s host", cgroup_mode_name(mode));
                goto out;
        }
        printf("     %s: %s\n", name, cgroup_mode_name(mode));

        const struct cgroup_limits l = {.cpu_millis = 500, .memory_bytes = 64 * MIB,
                                        .swap_bytes = 0, .pids = 16};
        CHECK_EQ_INT(cgroup_env_create(m, "e", &l), 0);
        c.kids[0] = spawn_attached(m, "e", NULL, false);
        CHECK(c.kids[0] > 0);
        /* Where there is a cgroup2 hierarchy the child is born in its group (the kernels we
         * run on all have CLONE_INTO_CGROUP): the join then never takes the global lock. */
        CHECK_EQ_INT(last_placed, mode != CGROUP_V1);
        if (c.kids[0] <= 0)
                goto out;

        char want[128], path[4096], file[4400];
        snprintf(want, sizeof(want), "/%s/e", c.subtree);
        const char *mem_ctl = v2 ? "" : "memory";
        CHECK(proc_cgroup_path(c.kids[0], mem_ctl, path, sizeof(path)));
        CHECK(ends_with(path, want));
        if (!v2) {
                CHECK(proc_cgroup_path(c.kids[0], "pids", path, sizeof(path)) &&
                      ends_with(path, want));
                if (mode == CGROUP_HYBRID)
                        CHECK(proc_cgroup_path(c.kids[0], "", path, sizeof(path)) &&
                              ends_with(path, want));
        }

        /* The limits as the kernel holds them. */
        proc_cgroup_path(c.kids[0], mem_ctl, path, sizeof(path));
        snprintf(file, sizeof(file), "/sys/fs/cgroup%s%s/%s", v2 ? "" : "/memory", path,
                 v2 ? "memory.max" : "memory.limit_in_bytes");
        char *val = NULL;
        CHECK_EQ_INT(read_file_at(AT_FDCWD, file, 64, &val), 0);
        CHECK(val && strtoull(val, NULL, 10) == 67108864ull);
        free(val);
        val = NULL;
        proc_cgroup_path(c.kids[0], v2 ? "" : "pids", path, sizeof(path));
        snprintf(file, sizeof(file), "/sys/fs/cgroup%s%s/pids.max", v2 ? "" : "/pids", path);
        CHECK_EQ_INT(read_file_at(AT_FDCWD, file, 64, &val), 0);
        CHECK(val && atoi(val) == 16);
        free(val);

        /* An exec sub-group beside PID 1's group; killing it leaves the env alone. */
        c.kids[1] = spawn_attached(m, "e", "x1", false);
        CHECK(c.kids[1] > 0);
        if (c.kids[1] > 0) {
                /* The sub-group exists only where groups are killed (unified, or the v1
                 * freezer); under the memory controller the exec joins the env group. */
                snprintf(want, sizeof(want), "/%s/e%s", c.subtree, v2 ? "/x1" : "");
                CHECK(proc_cgroup_path(c.kids[1], mem_ctl, path, sizeof(path)) &&
                      ends_with(path, want));
                snprintf(want, sizeof(want), "/%s/e/x1", c.subtree);
                if (mode == CGROUP_HYBRID)
                        CHECK(proc_cgroup_path(c.kids[1], "", path, sizeof(path)) &&
                              ends_with(path, want));
                CHECK_EQ_INT(cgroup_env_kill(m, "e", "x1"), 0);
                int status = 0;
                CHECK_EQ_INT(waitpid(c.kids[1], &status, 0), c.kids[1]);
                CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
                c.kids[1] = 0;
                CHECK(kill(c.kids[0], 0) == 0);
                CHECK_EQ_INT(cgroup_env_prune(m, "e", "x1"), 0);
                CHECK_EQ_INT(cgroup_env_prune(m, "e", NULL), -EBUSY);
        }
        struct cgroup_stats st = {0};
        CHECK_EQ_INT(cgroup_env_stats(m, "e", &st), 0);
        CHECK_EQ_INT(st.pids_current, 1);
        CHECK(st.memory_current > 0);

        /* Over the memory limit with no swap: the OOM killer, counted in the stats. */
        c.kids[2] = spawn_attached(m, "e", "hog", true);
        if (c.kids[2] > 0) {
                int status = 0;
                CHECK_EQ_INT(waitpid(c.kids[2], &status, 0), c.kids[2]);
                CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
                c.kids[2] = 0;
                CHECK_EQ_INT(cgroup_env_stats(m, "e", &st), 0);
                CHECK(st.oom_kills >= 1);
        }

        CHECK_EQ_INT(cgroup_env_freeze(m, "e", true), 0);
        CHECK_EQ_INT(cgroup_env_freeze(m, "e", false), 0);

        CHECK_EQ_INT(cgroup_env_kill(m, "e", NULL), 0);
        int status = 0;
        CHECK_EQ_INT(waitpid(c.kids[0], &status, 0), c.kids[0]);
        CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
        c.kids[0] = 0;

        proc_cgroup_path(getpid(), mem_ctl, path, sizeof(path));
        CHECK_EQ_INT(cgroup_env_destroy(m, "e", NULL), 0);
        char **names = NULL;
        size_t nn = 9;
        CHECK_EQ_INT(cgroup_list_envs(m, &names, &nn), 0);
        CHECK_EQ_INT(nn, 0);
        free(names);
        /* Gone in every hierarchy we used. */
        snprintf(file, sizeof(file), "%s", c.self_cgroup);
        char *save = NULL, *ctl, *own;
        for (char *line = strtok_r(file, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
                if (!split_cgroup_line(line, &ctl, &own) || !strncmp(ctl, "name=", 5) ||
                    !strcmp(ctl, "cpuset") || !strcmp(ctl, "devices") ||
                    (mode == CGROUP_V1 && !strcmp(line, "0")))
                        continue;
                char dir[4400];
                subtree_dir(dir, sizeof(dir) - 8, line, ctl, own, v2, c.subtree);
                struct stat sst;
                if (stat(dir, &sst) < 0)
                        fprintf(stderr, "  missing %s\n", dir);
                CHECK(stat(dir, &sst) == 0); /* the subtree stays until the daemon goes */
                strncat(dir, "/e", sizeof(dir) - strlen(dir) - 1);
                CHECK(stat(dir, &sst) < 0 && errno == ENOENT);
        }
out:
        real_cleanup(&c, m, v2);
}

static void test_cgroup_real__lifecycle(void)
{
        if (geteuid() != 0) {
                SKIP("not root");
                return;
        }
        real_lifecycle("/sys/fs/cgroup", "test_cgroup_real__lifecycle", false);
}

/* Pure v1 on a hybrid host: a directory of symlinks to the real v1 hierarchies, without the
 * cgroup2 mount, makes the manager use the freezer + SIGKILL loop for real. */
static void test_cgroup_real__v1_only(void)
{
        static const char *const hier[] = {"cpu", "cpuacct", "memory", "pids", "freezer", "blkio"};
        struct statfs sfs;
        if (geteuid() != 0 || statfs("/sys/fs/cgroup/memory", &sfs) < 0 ||
            sfs.f_type != 0x27e0eb) {
                SKIP("not root or no v1 memory hierarchy");
                return;
        }
        tmp_setup();
        for (size_t i = 0; i < ELEMENTSOF(hier); i++) {
                char target[64];
                snprintf(target, sizeof(target), "/sys/fs/cgroup/%s", hier[i]);
                if (access(target, F_OK) == 0 && symlink(target, pathf("%s", hier[i])) < 0)
                        perror("symlink");
        }
        real_lifecycle(tmp_root, "test_cgroup_real__v1_only", true);
        tmp_teardown();
}

int main(void)
{
        RUN(test_cgroup_detect__none);
        RUN(test_cgroup_detect__modes);
        RUN(test_cgroup_names__rejected);
        RUN(test_cgroup_v2__delegation);
        RUN(test_cgroup_v2__delegated_elsewhere);
        RUN(test_cgroup_v2__limits);
        RUN(test_cgroup_v2__stats);
        RUN(test_cgroup_v2__attach_freeze_destroy);
        RUN(test_cgroup_v1__limits);
        RUN(test_cgroup_v1__stats);
        RUN(test_cgroup_v1__attach_freeze_destroy);
        RUN(test_cgroup_hybrid__unified_mirror);
        RUN(test_cgroup_real__lifecycle);
        RUN(test_cgroup_real__v1_only);
        UNIT_EXIT();
}

/* cgroup operations that are the same for every backend: the file helpers, group names, the
 * mirrored group directories (create, limits, attach), kill-until-empty, freeze, stats, removal
 * (destroy, prune) and listing. Finding the layout and the daemon's own group is
 * cgroup_discover.c; the v1/v2 differences live in cgroup_v1.c / cgroup_v2.c behind struct
 * cgroup_ops. */
#include "lib/cgroup_internal.h"
#include "lib/util.h"

#include <dirent.h>
#include <linux/sched.h>
#include <limits.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <time.h>

/* Bounds of the kill loop: give the kernel this long to tear processes down (exit of a large
 * address space takes tens of ms), re-signal stragglers this often. The whole loop blocks its
 * caller, so run it in a helper when latency matters. */
#define KILL_TIMEOUT_MS  5000
#define KILL_RESIGNAL_MS 100
#define MAX_DEPTH        32

/* ---------------------------------------------------------------- file helpers */

int cg_write(int dirfd, const char *name, const char *value)
{
        _cleanup_close_ int fd = openat(dirfd, name, O_WRONLY | O_TRUNC | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return -errno;
        /* One write(2): cgroup files parse the value of each write separately. */
        size_t len = strlen(value);
        ssize_t n = write(fd, value, len);
        if (n < 0)
                return -errno;
        return (size_t)n == len ? 0 : -EIO;
}

int cg_write_changed(int dirfd, const char *name, const char *value)
{
        _cleanup_free_ char *have = NULL;
        if (cg_read_all(dirfd, name, &have) == 0) {
                size_t len = strcspn(have, "\n");
                if (len == strlen(value) && !strncmp(have, value, len))
                        return 0;
        }
        return cg_write(dirfd, name, value);
}

int cg_write_limit(int dirfd, const char *name, uint64_t v, const char *unlimited_str)
{
        char buf[32];
        if (v == CG_UNLIMITED)
                snprintf(buf, sizeof(buf), "%s", unlimited_str);
        else
                snprintf(buf, sizeof(buf), "%llu", (unsigned long long)v);
        int r = cg_write(dirfd, name, buf);
        if (r == -ENOENT)
                return v == CG_UNLIMITED ? 0 : -EOPNOTSUPP;
        return r;
}

int cg_read_all(int dirfd, const char *name, char **ret)
{
        /* cgroup.procs of a busy group and mountinfo of a busy host run past any fixed size;
         * the cap only guards against a runaway file. */
        const size_t cap = 16u << 20;
        _cleanup_close_ int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return -errno;
        size_t size = 4096, len = 0;
        _cleanup_free_ char *buf = malloc(size);
        if (!buf)
                return -ENOMEM;
        for (;;) {
                size_t want = size - len - 1;
                ssize_t n = read_full(fd, buf + len, want);
                if (n < 0)
                        return (int)n;
                len += (size_t)n;
                if ((size_t)n < want)
                        break; /* end of file */
                if (size >= cap)
                        return -EFBIG;
                char *nbuf = realloc(buf, size * 2);
                if (!nbuf)
                        return -ENOMEM;
                buf = nbuf;
                size *= 2;
        }
        buf[len] = 0;
        *ret = TAKE_PTR(buf);
        return 0;
}

static int parse_u64(const char *s, uint64_t *ret)
{
        while (*s == ' ' || *s == '\t')
                s++;
        if (!strncmp(s, "max", 3)) {
                *ret = CG_UNLIMITED;
                return 0;
        }
        if (*s < '0' || *s > '9')
                return -EINVAL;
        char *end;
        errno = 0;
        unsigned long long v = strtoull(s, &end, 10);
        if (errno)
                return -errno;
        *ret = v;
        return 0;
}

int cg_read_u64(int dirfd, const char *name, uint64_t *ret)
{
        _cleanup_free_ char *s = NULL;
        int r = cg_read_all(dirfd, name, &s);
        if (r < 0)
                return r;
        uint64_t v;
        r = parse_u64(s, &v);
        if (r < 0)
                return r;
        *ret = v;
        return 0;
}

int cg_read_keyed_u64(int dirfd, const char *name, const char *key, uint64_t *ret)
{
        _cleanup_free_ char *s = NULL;
        int r = cg_read_all(dirfd, name, &s);
        if (r < 0)
                return r;
        size_t klen = strlen(key);
        for (char *line = s; *line;) {
                if (!strncmp(line, key, klen) && (line[klen] == ' ' || line[klen] == '\t')) {
                        uint64_t v;
                        r = parse_u64(line + klen, &v);
                        if (r < 0)
                                return r;
                        *ret = v;
                        return 0;
                }
                char *nl = strchr(line, '\n');
                if (!nl)
                        break;
                line = nl + 1;
        }
        return -ENODATA;
}

bool cg_has_token(const char *list, const char *word, const char *seps)
{
        size_t wlen = strlen(word);
        const char *p = list;
        while (*p) {
                p += strspn(p, seps);
                size_t n = strcspn(p, seps);
                /* subtree_control reads "cpu memory"; "+cpu" is what we write: accept both. */
                const char *t = p;
                size_t tn = n;
                if (tn > 0 && *t == '+') {
                        t++;
                        tn--;
                }
                if (tn == wlen && !strncmp(t, word, wlen))
                        return true;
                p += n;
        }
        return false;
}

bool cg_file_exists(int dirfd, const char *name)
{
        return faccessat(dirfd, name, F_OK, AT_SYMLINK_NOFOLLOW) == 0;
}

bool cg_is_cgroupfs(int fd)
{
        struct statfs sfs;
        if (fstatfs(fd, &sfs) < 0)
                return false;
        return (uint32_t)sfs.f_type == CG_CGROUP_SUPER_MAGIC ||
               (uint32_t)sfs.f_type == CG_CGROUP2_SUPER_MAGIC;
}

void cg_sleep_ms(unsigned ms)
{
        struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                ;
}

/* ---------------------------------------------------------------- names and groups */

bool cg_name_valid(const char *name)
{
        /* Prefixes of interface files in either version: a group named "memory.max" would
         * fail to be created at best and be confused with the file at worst. */
        static const char *const reserved[] = {
                "cgroup", "cpu",     "cpuacct", "cpuset",  "memory",     "memsw", "pids",
                "io",     "blkio",   "freezer", "devices", "hugetlb",    "rdma",  "misc",
                "net_cls", "net_prio", "perf_event", "tasks", "notify_on_release",
                "release_agent", "irq",
        };
        if (!name || !*name || strlen(name) > 128)
                return false;
        if (name[0] == '.' || name[0] == '-')
                return false;
        for (const char *p = name; *p; p++) {
                char c = *p;
                if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '_' || c == '-' || c == '.'))
                        return false;
        }
        size_t plen = strcspn(name, ".");
        for (size_t i = 0; i < ELEMENTSOF(reserved); i++)
                if (strlen(reserved[i]) == plen && !strncmp(name, reserved[i], plen))
                        return false;
        return true;
}

int cg_open_group(const struct cg_hier *h, const char *env, const char *sub, bool create,
                  int *ret_fd)
{
        _cleanup_close_ int efd =
                openat(h->subtree_fd, env, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (efd < 0)
                return -errno;
        if (!sub) {
                *ret_fd = TAKE_FD(efd);
                return 0;
        }
        if (create && mkdirat(efd, sub, 0755) < 0 && errno != EEXIST)
                return -errno;
        int fd = openat(efd, sub, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        *ret_fd = fd;
        return 0;
}

const struct cg_hier *cg_find_hier(const struct cgroup_manager *m, const char *controller)
{
        for (size_t i = 0; i < m->n_hier; i++) {
                const struct cg_hier *h = &m->hier[i];
                if (!controller ? h->unified
                                : !h->unified && cg_has_token(h->controllers, controller, ","))
                        return h;
        }
        return NULL;
}

static bool names_valid(const char *env, const char *sub)
{
        return cg_name_valid(env) && (!sub || cg_name_valid(sub));
}

/* ---------------------------------------------------------------- generic operations */

static int limits_valid(const struct cgroup_limits *l)
{
        /* Zero CPU, memory or pids can never run anything: most likely an unset field. */
        if (!l || l->cpu_millis == 0 || l->memory_bytes == 0 || l->pids == 0)
                return -EINVAL;
        if (l->cpu_millis != CG_UNLIMITED && l->cpu_millis > UINT64_MAX / 100)
                return -ERANGE;
        /* I/O limits need the device they apply to. */
        if (cgroup_limits_have_io(l) && !l->io_dev)
                return -EINVAL;
        return 0;
}

int cgroup_env_create(struct cgroup_manager *m, const char *env, const struct cgroup_limits *l)
{
        if (!names_valid(env, NULL))
                return -EINVAL;
        int r = limits_valid(l);
        if (r < 0)
                return r;
        bool created[CG_MAX_HIER] = {false};
        for (size_t i = 0; i < m->n_hier; i++) {
                if (mkdirat(m->hier[i].subtree_fd, env, 0755) == 0)
                        created[i] = true;
                else if (errno != EEXIST) {
                        r = -errno;
                        goto rollback;
                }
        }
        r = m->ops->set_limits(m, env, l);
        if (r < 0)
                goto rollback;
        return 0;
rollback:
        /* Only what this call made; a group that already existed belongs to a live env. */
        for (size_t i = 0; i < m->n_hier; i++)
                if (created[i])
                        (void)unlinkat(m->hier[i].subtree_fd, env, AT_REMOVEDIR);
        return r;
}

int cgroup_env_set_limits(struct cgroup_manager *m, const char *env, const struct cgroup_limits *l)
{
        if (!names_valid(env, NULL))
                return -EINVAL;
        int r = limits_valid(l);
        if (r < 0)
                return r;
        return m->ops->set_limits(m, env, l);
}

/* Per-exec sub-groups exist only to kill one exec's process tree, so they are made only in the
 * hierarchy that can kill a group: the unified one (v2, hybrid) or the freezer (pure v1).
 * Elsewhere the process joins the env group itself. Each v1 mkdir costs about a millisecond and
 * kernel memory, and exec is a hot path. */
static bool hier_tracks_subs(const struct cgroup_manager *m, const struct cg_hier *h)
{
        if (m->mode == CGROUP_V2 || h->unified)
                return true;
        return m->mode == CGROUP_V1 && cg_has_token(h->controllers, "freezer", ",");
}

/* Joining without the global lock. A write of a pid to cgroup.procs takes the kernel's
 * cgroup_threadgroup_rwsem for writing, which waits for an RCU grace period: 5-15 ms on an idle
 * machine, all of it seen by the loop or the exec waiting for the child. Two ways around it:
 *  - a v1 hierarchy: the child writes "0" to `tasks`, moving only itself, the one thread of a
 *    freshly cloned process; the kernel skips the global lock for that;
 *  - cgroup2 (v2, or hybrid's unified hierarchy): the parent clones the child straight into the
 *    group (CLONE_INTO_CGROUP), which takes the lock only for reading. */
int cgroup_env_join(struct cgroup_manager *m, const char *env, const char *sub, bool placed)
{
        if (!names_valid(env, sub))
                return -EINVAL;
        for (size_t i = 0; i < m->n_hier; i++) {
                const struct cg_hier *h = &m->hier[i];
                if (h->unified && placed)
                        continue;
                _cleanup_close_ int fd = -EBADF;
                const char *s = sub && hier_tracks_subs(m, h) ? sub : NULL;
                int r = cg_open_group(h, env, s, true, &fd);
                if (r < 0)
                        return r;
                r = h->unified ? -ENOENT : cg_write(fd, "tasks", "0");
                if (r == -ENOENT) /* cgroup2 (not placed: an old kernel), or a test directory */
                        r = cg_write(fd, "cgroup.procs", "0");
                if (r < 0)
                        return r;
        }
        return 0;
}

pid_t cgroup_env_clone(struct cgroup_manager *m, const char *env, const char *sub,
                       uint64_t flags, int *pidfd, bool *placed)
{
        *placed = false;
        if (!names_valid(env, sub))
                return -EINVAL;
        /* With CLONE_PARENT the child inherits its exit signal from the caller, and clone3
         * refuses one of its own. */
        struct clone_args args = {.flags = flags,
                                  .exit_signal = (flags & CLONE_PARENT) ? 0 : SIGCHLD,
                                  .pidfd = (uint64_t)(uintptr_t)pidfd};
        const struct cg_hier *u = m->real ? cg_find_hier(m, NULL) : NULL;
        _cleanup_close_ int fd = -EBADF;
        if (u && cg_open_group(u, env, sub, true, &fd) == 0) {
                args.flags |= CLONE_INTO_CGROUP;
                args.cgroup = (uint64_t)fd;
                *placed = true; /* the child's copy says so too */
                pid_t pid = (pid_t)syscall(SYS_clone3, &args, sizeof(args));
                if (pid >= 0)
                        return pid;
                /* A kernel before 5.7, or a group the kernel will not put a process in:
                 * the child joins by itself below. */
                *placed = false;
                args.flags &= ~(uint64_t)CLONE_INTO_CGROUP;
                args.cgroup = 0;
        }
        pid_t pid = (pid_t)syscall(SYS_clone3, &args, sizeof(args));
        return pid < 0 ? -errno : pid;
}

struct pid_set {
        pid_t *p;
        size_t n, cap;
};

static int pid_set_add(struct pid_set *s, pid_t pid)
{
        for (size_t i = 0; i < s->n; i++)
                if (s->p[i] == pid)
                        return 0;
        if (s->n == s->cap) {
                size_t cap = s->cap ? s->cap * 2 : 64;
                pid_t *p = realloc(s->p, cap * sizeof(*p));
                if (!p)
                        return -ENOMEM;
                s->p = p;
                s->cap = cap;
        }
        s->p[s->n++] = pid;
        return 0;
}

/* Pids in the group behind dirfd and in all its descendants. */
static int collect_pids(int dirfd, struct pid_set *s, int depth)
{
        if (depth > MAX_DEPTH)
                return -ELOOP;
        _cleanup_free_ char *procs = NULL;
        int r = cg_read_all(dirfd, "cgroup.procs", &procs);
        if (r < 0 && r != -ENOENT)
                return r;
        for (char *p = procs; p && *p;) {
                char *end;
                long v = strtol(p, &end, 10);
                if (end == p)
                        break;
                /* 0: a process outside our pid namespace; never anything we can signal. */
                if (v > 0 && v <= INT_MAX && (r = pid_set_add(s, (pid_t)v)) < 0)
                        return r;
                p = end;
        }
        _cleanup_closedir_ DIR *d = NULL;
        r = opendir_at(dirfd, ".", &d);
        if (r < 0)
                return r;
        FOREACH_DIRENT(de, d)
        {
                if (de->d_name[0] == '.' || !dirent_is_dir(dirfd, de))
                        continue;
                _cleanup_close_ int cfd = openat(dirfd, de->d_name,
                                                 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (cfd < 0 && errno != ENOENT)
                        r = -errno;
                else if (cfd >= 0)
                        r = collect_pids(cfd, s, depth + 1);
                if (r < 0)
                        break;
        }
        return r;
}

/* Pids of env/sub in every hierarchy; -ENOENT if the group exists in none. */
static int collect_all(struct cgroup_manager *m, const char *env, const char *sub,
                       struct pid_set *s)
{
        bool found = false;
        s->n = 0;
        for (size_t i = 0; i < m->n_hier; i++) {
                _cleanup_close_ int fd = -EBADF;
                int r = cg_open_group(&m->hier[i], env, sub, false, &fd);
                if (r == -ENOENT)
                        continue;
                if (r < 0)
                        return r;
                found = true;
                r = collect_pids(fd, s, 0);
                if (r < 0)
                        return r;
        }
        return found ? 0 : -ENOENT;
}

static void signal_pids(const struct pid_set *s)
{
        pid_t self = getpid();
        for (size_t i = 0; i < s->n; i++) {
                /* The group holds only processes we placed there; the guards are for the day
                 * it does not (a stale test file, a misdirected attach): never pid 1 or us. */
                if (s->p[i] <= 1 || s->p[i] == self)
                        continue;
                (void)kill(s->p[i], SIGKILL);
        }
}

int cg_kill_until_empty(struct cgroup_manager *m, const char *env, const char *sub)
{
        struct pid_set s = {0};
        uint64_t start = now_ms(), last_signal = 0;
        bool signalled = false, fast_tried = false;
        unsigned delay = 1;
        int r;
        for (;;) {
                r = collect_all(m, env, sub, &s);
                if (r < 0 || s.n == 0)
                        break;
                uint64_t now = now_ms();
                if (now - start > KILL_TIMEOUT_MS) {
                        r = -EBUSY;
                        break;
                }
                if (!fast_tried) {
                        fast_tried = true;
                        if (m->ops->kill_fast(m, env, sub) == 0) {
                                signalled = true;
                                last_signal = now;
                        }
                }
                if (!signalled || now - last_signal >= KILL_RESIGNAL_MS) {
                        /* Frozen, nothing forks or exits between reading the pids and signalling
                         * them, so no pid is reused under us. v1-frozen tasks act on SIGKILL
                         * only once thawed; v2-frozen ones die right away. */
                        int fr = m->ops->freeze(m, env, sub, true);
                        r = collect_all(m, env, sub, &s);
                        if (r >= 0)
                                signal_pids(&s);
                        /* Thaw even after a timed-out freeze: a half-frozen group would keep
                         * the signalled tasks (v1) from dying. */
                        if (fr != -EOPNOTSUPP)
                                (void)m->ops->freeze(m, env, sub, false);
                        if (r < 0)
                                break;
                        signalled = true;
                        last_signal = now_ms();
                }
                cg_sleep_ms(delay);
                delay = delay < 16 ? delay * 2 : 20;
        }
        free(s.p);
        return r;
}

int cgroup_env_kill(struct cgroup_manager *m, const char *env, const char *sub)
{
        if (!names_valid(env, sub))
                return -EINVAL;
        return cg_kill_until_empty(m, env, sub);
}

int cgroup_env_kill_nowait(struct cgroup_manager *m, const char *env, const char *sub)
{
        if (!names_valid(env, sub))
                return -EINVAL;
        if (m->ops->kill_fast(m, env, sub) == 0)
                return 0;
        return cg_kill_until_empty(m, env, sub);
}

/* rmdir name below parentfd, children first. cgroupfs lists interface files that rmdir takes
 * along; a test directory holds regular files that have to go first. */
static int rmdir_tree(int parentfd, const char *name, int depth, bool wait_busy)
{
        if (depth > MAX_DEPTH)
                return -ELOOP;
        _cleanup_closedir_ DIR *d = NULL;
        int r = opendir_at(parentfd, name, &d);
        if (r < 0)
                return r;
        bool cgfs = cg_is_cgroupfs(dirfd(d));
        struct stat st;
        if (fstat(dirfd(d), &st) < 0)
                return -errno;
        FOREACH_DIRENT(de, d)
        {
                /* cgroupfs names its interface files DT_REG: nothing to do for them, and no
                 * fstatat each (a v1 memory group alone has about 30; a destroy walks every
                 * hierarchy). */
                if (cgfs && de->d_type != DT_DIR && de->d_type != DT_UNKNOWN)
                        continue;
                struct stat cst;
                if (fstatat(dirfd(d), de->d_name, &cst, AT_SYMLINK_NOFOLLOW) < 0)
                        continue;
                if (S_ISDIR(cst.st_mode)) {
                        if (cst.st_dev != st.st_dev) {
                                r = -EBUSY; /* a mount point: never descend */
                                continue;
                        }
                        int q = rmdir_tree(dirfd(d), de->d_name, depth + 1, wait_busy);
                        if (q < 0 && q != -ENOENT)
                                r = q;
                } else if (!cgfs && unlinkat(dirfd(d), de->d_name, 0) < 0 && errno != ENOENT) {
                        r = -errno;
                }
        }
        closedir(TAKE_PTR(d));
        if (r < 0)
                return r;
        /* The last task leaving and the group becoming removable are not one atomic step on
         * every kernel: retry EBUSY briefly. */
        for (int tries = 0;; tries++) {
                if (unlinkat(parentfd, name, AT_REMOVEDIR) == 0)
                        return 0;
                if (errno != EBUSY || !wait_busy || tries >= 50)
                        return -errno;
                cg_sleep_ms(2);
        }
}

/* Remove env (sub NULL) or env/sub in every hierarchy; where it is missing already is fine.
 * wait_busy: retry a group that is still busy for a moment (its last task leaving). *found:
 * whether it existed anywhere. */
static int rmdir_everywhere(struct cgroup_manager *m, const char *env, const char *sub,
                            bool wait_busy, bool *found)
{
        int r = 0;
        *found = false;
        for (size_t i = 0; i < m->n_hier; i++) {
                const struct cg_hier *h = &m->hier[i];
                _cleanup_close_ int efd = -EBADF;
                int parent = h->subtree_fd;
                if (sub) {
                        int q = cg_open_group(h, env, NULL, false, &efd);
                        if (q == -ENOENT)
                                continue;
                        if (q < 0)
                                return q;
                        parent = efd;
                }
                int q = rmdir_tree(parent, sub ? sub : env, 0, wait_busy);
                if (q != -ENOENT)
                        *found = true;
                if (q < 0 && q != -ENOENT)
                        r = q;
        }
        return r;
}

int cgroup_env_destroy(struct cgroup_manager *m, const char *env, const char *sub)
{
        if (!names_valid(env, sub))
                return -EINVAL;
        /* Mostly the group is empty by now (PID 1 or the slot reaped): the kernel refuses to
         * remove a populated group, so a removal that succeeds everywhere needs no listing of
         * every hierarchy's tasks first. */
        bool found;
        if (rmdir_everywhere(m, env, sub, false, &found) == 0)
                return found ? 0 : -ENOENT;
        int r = cg_kill_until_empty(m, env, sub);
        if (r < 0)
                return r == -ENOENT ? 0 : r; /* -ENOENT: removed everywhere meanwhile */
        return rmdir_everywhere(m, env, sub, true, &found);
}

int cgroup_env_prune(struct cgroup_manager *m, const char *env, const char *sub)
{
        if (!names_valid(env, sub))
                return -EINVAL;
        struct pid_set s = {0};
        int r = collect_all(m, env, sub, &s);
        free(s.p);
        if (r == -ENOENT)
                return 0;
        if (r < 0)
                return r;
        if (s.n > 0)
                return -EBUSY;
        /* A process attached after the check makes rmdir fail with EBUSY, which is the
         * answer then too: nothing is killed and nothing populated goes. */
        bool found;
        return rmdir_everywhere(m, env, sub, true, &found);
}

size_t cgroup_manager_fds(const struct cgroup_manager *m, int *fds, size_t max)
{
        size_t n = 0;
        for (size_t i = 0; i < m->n_hier && n < max; i++)
                if (m->hier[i].subtree_fd >= 0)
                        fds[n++] = m->hier[i].subtree_fd;
        return n;
}

int cgroup_env_holds_only(struct cgroup_manager *m, const char *env, const char *sub, pid_t pid)
{
        if (!names_valid(env, sub) || pid <= 0)
                return -EINVAL;
        struct pid_set s = {0};
        int r = collect_all(m, env, sub, &s);
        bool only = r >= 0 && s.n == 1 && s.p[0] == pid;
        free(s.p);
        return r < 0 ? r : only;
}

int cgroup_env_freeze(struct cgroup_manager *m, const char *env, bool frozen)
{
        if (!names_valid(env, NULL))
                return -EINVAL;
        return m->ops->freeze(m, env, NULL, frozen);
}

int cgroup_env_stats(struct cgroup_manager *m, const char *env, struct cgroup_stats *ret)
{
        if (!names_valid(env, NULL) || !ret)
                return -EINVAL;
        struct cgroup_stats st = {0};
        int r = m->ops->stats(m, env, &st);
        if (r < 0)
                return r;
        *ret = st;
        return 0;
}

int cgroup_env_oom_kills(struct cgroup_manager *m, const char *env, uint64_t *ret)
{
        if (!names_valid(env, NULL) || !ret)
                return -EINVAL;
        uint64_t n = 0;
        int r = m->ops->oom_kills(m, env, &n);
        if (r < 0)
                return r;
        *ret = n;
        return 0;
}

struct name_list {
        char **v;
        size_t n, cap;
};

static int name_list_add(struct name_list *l, const char *name)
{
        if (l->n == l->cap) {
                size_t cap = l->cap ? l->cap * 2 : 16;
                char **v = realloc(l->v, cap * sizeof(*v));
                if (!v)
                        return -ENOMEM;
                l->v = v;
                l->cap = cap;
        }
        if (!(l->v[l->n] = strdup(name)))
                return -ENOMEM;
        l->n++;
        return 0;
}

int cgroup_list_envs(struct cgroup_manager *m, char ***ret_names, size_t *ret_n)
{
        /* The union over hierarchies: a crash during create can leave a group in only some.
         * Sorted, then the duplicates dropped: thousands of names in each of up to seven
         * hierarchies, at every start and stop. */
        struct name_list l = {0};
        int r = 0;
        for (size_t i = 0; i < m->n_hier && r >= 0; i++) {
                _cleanup_closedir_ DIR *d = NULL;
                if ((r = opendir_at(m->hier[i].subtree_fd, ".", &d)) < 0)
                        break;
                FOREACH_DIRENT(de, d)
                {
                        if (!cg_name_valid(de->d_name) || !dirent_is_dir(dirfd(d), de))
                                continue;
                        if ((r = name_list_add(&l, de->d_name)) < 0)
                                break;
                }
        }
        if (r < 0) {
                for (size_t k = 0; k < l.n; k++)
                        free(l.v[k]);
                free(l.v);
                return r;
        }
        size_t n = str_sort_unique(l.v, l.n);
        *ret_names = l.v;
        *ret_n = n;
        return 0;
}

bool cgroup_controllers_shown(const char *controllers)
{
        static const char *const shown[] = {"cpu", "cpuacct", "memory", "pids", "blkio"};
        for (const char *c = controllers; *c;) {
                size_t len = strcspn(c, ",");
                for (size_t i = 0; i < ELEMENTSOF(shown); i++)
                        if (strlen(shown[i]) == len && !strncmp(c, shown[i], len))
                                return true;
                c += len;
                if (*c == ',')
                        c++;
        }
        return false;
}

int cgroup_env_view_trees(struct cgroup_manager *m, const char *env,
                          struct cgroup_view_tree ret[CGROUP_VIEW_MAX], size_t *ret_n)
{
        *ret_n = 0;
        if (!names_valid(env, NULL))
                return -EINVAL;
        if (!m->real)
                return 0;
        struct mount_attr ro = {.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID |
                                            MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC};
        int r = 0;
        for (size_t i = 0; i < m->n_hier && *ret_n < CGROUP_VIEW_MAX; i++) {
                const struct cg_hier *h = &m->hier[i];
                if (h->unified || !cgroup_controllers_shown(h->controllers))
                        continue;
                struct cgroup_view_tree *t = &ret[*ret_n];
                if (buf_printf(t->controllers, sizeof(t->controllers), "%s", h->controllers) < 0) {
                        r = -ENAMETOOLONG;
                        break;
                }
                /* No AT_RECURSIVE: a cgroup file system has no mounts below a group. */
                t->fd = open_tree(h->subtree_fd, env, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC |
                                                          AT_SYMLINK_NOFOLLOW);
                if (t->fd < 0) {
                        r = -errno;
                        break;
                }
                ++*ret_n;
                if (mount_setattr(t->fd, "", AT_EMPTY_PATH, &ro, sizeof(ro)) < 0) {
                        r = -errno;
                        break;
                }
        }
        if (r < 0) {
                for (size_t i = 0; i < *ret_n; i++)
                        close(ret[i].fd);
                *ret_n = 0;
        }
        return r;
}

/* cgroup manager: detection of the layout, finding the daemon's own group in each hierarchy,
 * the subtree Paddock owns below it, and the work that is the same for every backend
 * (mirrored group directories, attach, kill-until-empty, removal, listing). The v1/v2
 * differences live in cgroup_v1.c / cgroup_v2.c behind struct cgroup_ops. */
#include "lib/cgroup_internal.h"
#include "lib/util.h"

#include <dirent.h>
#include <limits.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <time.h>

/* The v1 controllers Paddock places environments in. cpuset needs cpus/mems copied into every
 * new group before it accepts tasks and devices/net_cls/perf_event add nothing here, so those
 * hierarchies keep the daemon's own group. */
static const char *const v1_wanted[] = {"cpu", "cpuacct", "memory", "pids", "freezer", "blkio"};

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
                if (len + 1 >= size) {
                        if (size >= cap)
                                return -EFBIG;
                        char *nbuf = realloc(buf, size * 2);
                        if (!nbuf)
                                return -ENOMEM;
                        buf = nbuf;
                        size *= 2;
                }
                ssize_t n = read(fd, buf + len, size - len - 1);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (n == 0)
                        break;
                len += (size_t)n;
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

/* ---------------------------------------------------------------- /proc/self/cgroup */

struct self_entry {
        unsigned id;
        char *controllers; /* points into the buffer */
        char *path;
};

/* Lines "ID:controllers:/path"; "0::/path" is the unified hierarchy. Paths may contain ':'
 * themselves, so only the first two colons split. Entries point into buf. */
static int parse_self_cgroup(char *buf, struct self_entry *e, size_t max, size_t *ret_n)
{
        size_t n = 0;
        char *save = NULL;
        for (char *line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
                char *c1 = strchr(line, ':');
                char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
                if (!c2 || c2[1] != '/')
                        return -EBADMSG;
                *c1 = *c2 = 0;
                char *end;
                errno = 0;
                unsigned long id = strtoul(line, &end, 10);
                if (errno || end == line || *end)
                        return -EBADMSG;
                if (n == max)
                        return -E2BIG;
                e[n++] = (struct self_entry){(unsigned)id, c1 + 1, c2 + 1};
        }
        *ret_n = n;
        return 0;
}

static const struct self_entry *self_find(const struct self_entry *e, size_t n, bool unified)
{
        for (size_t i = 0; i < n; i++)
                if (unified ? e[i].id == 0 && !e[i].controllers[0] : e[i].id != 0)
                        return &e[i];
        return NULL;
}

/* ---------------------------------------------------------------- /proc/self/mountinfo */

static void unescape_octal(char *s)
{
        char *w = s;
        for (char *r = s; *r; r++) {
                if (r[0] == '\\' && r[1] >= '0' && r[1] <= '3' && r[2] >= '0' && r[2] <= '7' &&
                    r[3] >= '0' && r[3] <= '7') {
                        *w++ = (char)((r[1] - '0') * 64 + (r[2] - '0') * 8 + (r[3] - '0'));
                        r += 3;
                } else {
                        *w++ = *r;
                }
        }
        *w = 0;
}

static bool path_is_below(const char *path, const char *base)
{
        size_t n = strlen(base);
        return !strncmp(path, base, n) && (path[n] == '/' || path[n] == 0);
}

/* Find the mount of a hierarchy below sysfs_root: a cgroup2 mount (controllers NULL) or a v1
 * mount whose super options carry every controller of the list. On success ret_mp / ret_root
 * are the mount point and the mount's root within the hierarchy (not "/" inside containers
 * that bind-mount their own part of the tree). -ENOENT if there is none. */
static int find_mount(const char *mountinfo, const char *sysfs_root, const char *controllers,
                      char **ret_mp, char **ret_root)
{
        _cleanup_free_ char *copy = strdup(mountinfo);
        if (!copy)
                return -ENOMEM;
        char *save = NULL;
        for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
                char *f[6], *s2 = NULL, *tok;
                size_t nf = 0;
                for (tok = strtok_r(line, " ", &s2); tok && nf < 6; tok = strtok_r(NULL, " ", &s2))
                        f[nf++] = tok;
                if (nf < 6)
                        continue;
                while (tok && strcmp(tok, "-"))
                        tok = strtok_r(NULL, " ", &s2);
                char *fstype = strtok_r(NULL, " ", &s2);
                char *source = strtok_r(NULL, " ", &s2);
                char *super = strtok_r(NULL, " ", &s2);
                if (!fstype || !source || !super)
                        continue;
                if (strcmp(fstype, controllers ? "cgroup" : "cgroup2"))
                        continue;
                if (controllers) {
                        bool all = true;
                        _cleanup_free_ char *cl = strdup(controllers);
                        if (!cl)
                                return -ENOMEM;
                        char *s3 = NULL;
                        for (char *c = strtok_r(cl, ",", &s3); c; c = strtok_r(NULL, ",", &s3))
                                all = all && cg_has_token(super, c, ",");
                        if (!all)
                                continue;
                }
                unescape_octal(f[3]);
                unescape_octal(f[4]);
                if (!path_is_below(f[4], sysfs_root))
                        continue;
                char *mp = strdup(f[4]), *root = strdup(f[3]);
                if (!mp || !root) {
                        free(mp);
                        free(root);
                        return -ENOMEM;
                }
                *ret_mp = mp;
                *ret_root = root;
                return 0;
        }
        return -ENOENT;
}

/* ---------------------------------------------------------------- detection */

static int detect_mode(int rootfd, enum cgroup_mode *ret_mode, bool *ret_real)
{
        static const char *const v1_dirs[] = {"memory", "pids", "cpu", "cpuacct", "cpu,cpuacct",
                                               "freezer", "blkio"};
        struct statfs sfs;
        if (fstatfs(rootfd, &sfs) < 0)
                return -errno;
        if ((uint32_t)sfs.f_type == CG_CGROUP2_SUPER_MAGIC) {
                *ret_mode = CGROUP_V2;
                *ret_real = true;
                return 0;
        }
        if (cg_file_exists(rootfd, "cgroup.controllers")) {
                /* A test directory laid out like a unified mount. */
                *ret_mode = CGROUP_V2;
                *ret_real = false;
                return 0;
        }
        bool v1 = false, real = false;
        for (size_t i = 0; i < ELEMENTSOF(v1_dirs); i++) {
                _cleanup_close_ int fd =
                        openat(rootfd, v1_dirs[i], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (fd < 0 || !cg_file_exists(fd, "cgroup.procs"))
                        continue;
                v1 = true;
                real = real || cg_is_cgroupfs(fd);
        }
        if (!v1)
                return -EOPNOTSUPP;
        bool unified = false;
        _cleanup_close_ int ufd = openat(rootfd, "unified", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (ufd >= 0 && cg_file_exists(ufd, "cgroup.procs")) {
                /* On a real host an empty "unified" directory is not a cgroup2 mount. */
                if (!real || (fstatfs(ufd, &sfs) == 0 &&
                              (uint32_t)sfs.f_type == CG_CGROUP2_SUPER_MAGIC))
                        unified = true;
        }
        *ret_mode = unified ? CGROUP_HYBRID : CGROUP_V1;
        *ret_real = real;
        return 0;
}

/* ---------------------------------------------------------------- manager */

struct discover_ctx {
        int rootfd;
        const char *root_real; /* canonical sysfs_root, for matching mount points */
        const char *mountinfo; /* NULL if unreadable */
};

/* The path comes from the kernel, but refuse ".." components rather than trust a test file. */
static bool path_safe(const char *path)
{
        for (const char *p = path; *p;) {
                size_t n = strcspn(p, "/");
                if (n == 2 && p[0] == '.' && p[1] == '.')
                        return false;
                p += n;
                p += strspn(p, "/");
        }
        return true;
}

/* Open the mount of one hierarchy and the daemon's own group in it. */
static int open_own_group(const struct discover_ctx *c, const char *controllers,
                          const char *own_path, int *ret_fd)
{
        _cleanup_free_ char *mp = NULL, *mroot = NULL;
        _cleanup_close_ int mfd = -EBADF;
        int r = c->mountinfo ? find_mount(c->mountinfo, c->root_real, controllers, &mp, &mroot)
                             : -ENOENT;
        if (r == -ENOMEM)
                return r;
        if (r == 0) {
                mfd = open(mp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (mfd < 0)
                        return -errno;
                /* A mount of a sub-tree (container) shows our path including the mount root. */
                if (strcmp(mroot, "/")) {
                        if (!path_is_below(own_path, mroot))
                                return -ENOENT;
                        own_path += strlen(mroot);
                }
        } else if (!controllers) {
                mfd = openat(c->rootfd, "unified", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        } else {
                /* A test directory (or a mount table we could not read): <root>/<controllers>,
                 * then <root>/<controller> for each member of a co-mounted list. */
                mfd = openat(c->rootfd, controllers, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                _cleanup_free_ char *cl = strdup(controllers);
                if (!cl)
                        return -ENOMEM;
                char *s = NULL;
                for (char *ctl = strtok_r(cl, ",", &s); ctl && mfd < 0;
                     ctl = strtok_r(NULL, ",", &s))
                        mfd = openat(c->rootfd, ctl, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        }
        if (mfd < 0)
                return -ENOENT;

        while (*own_path == '/')
                own_path++;
        if (!*own_path) {
                *ret_fd = TAKE_FD(mfd);
                return 0;
        }
        if (!path_safe(own_path))
                return -EINVAL;
        int fd = openat(mfd, own_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        *ret_fd = fd;
        return 0;
}

/* Create <own>/<subtree> (existing is fine: a restarted daemon finds its environments there)
 * and record the hierarchy. Takes own_fd. */
static int add_hier(struct cgroup_manager *m, int own_fd, const char *controllers, bool unified)
{
        _cleanup_close_ int ofd = own_fd;
        if (m->n_hier == CG_MAX_HIER)
                return -E2BIG;
        bool created = mkdirat(ofd, m->subtree, 0755) == 0;
        if (!created && errno != EEXIST)
                return -errno;
        struct cg_hier *h = &m->hier[m->n_hier];
        *h = (struct cg_hier){.unified = unified, .subtree_fd = -EBADF, .own_fd = -EBADF,
                              .created = created};
        m->n_hier++; /* from here on cgroup_manager_new's failure path undoes the mkdir */
        h->own_fd = TAKE_FD(ofd);
        h->subtree_fd = openat(h->own_fd, m->subtree,
                               O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (h->subtree_fd < 0)
                return -errno;
        h->controllers = strdup(controllers);
        return h->controllers ? 0 : -ENOMEM;
}

/* The own-group fds are needed only while setting up; on failure, take back the subtree
 * directories this call made (rmdir: only while still empty). */
static void release_own_fds(struct cgroup_manager *m, bool undo)
{
        for (size_t i = 0; i < m->n_hier; i++) {
                struct cg_hier *h = &m->hier[i];
                if (undo && h->created && h->own_fd >= 0)
                        (void)unlinkat(h->own_fd, m->subtree, AT_REMOVEDIR);
                closep(&h->own_fd);
                h->own_fd = -EBADF;
        }
}

static bool wanted_v1(const char *controllers)
{
        for (size_t i = 0; i < ELEMENTSOF(v1_wanted); i++)
                if (cg_has_token(controllers, v1_wanted[i], ","))
                        return true;
        return false;
}

static int discover(struct cgroup_manager *m, const struct discover_ctx *c,
                    const struct self_entry *e, size_t n)
{
        int r;
        if (m->mode == CGROUP_V2) {
                const struct self_entry *u = self_find(e, n, true);
                if (!u)
                        return -ENOENT;
                /* A daemon that moved itself into <subtree>-daemon (see cgroup_v2.c) and was
                 * restarted from there still owns the subtree next to that leaf. */
                _cleanup_free_ char *own = strdup(u->path);
                if (!own)
                        return -ENOMEM;
                char *slash = strrchr(own, '/');
                size_t sl = strlen(m->subtree);
                if (slash && !strncmp(slash + 1, m->subtree, sl) &&
                    !strcmp(slash + 1 + sl, "-daemon"))
                        slash[slash == own ? 1 : 0] = 0;
                /* The unified mount is sysfs_root itself. */
                _cleanup_free_ char *mp = NULL, *mroot = NULL;
                const char *own_path = own;
                if (c->mountinfo &&
                    find_mount(c->mountinfo, c->root_real, NULL, &mp, &mroot) == 0 &&
                    !strcmp(mp, c->root_real) && strcmp(mroot, "/")) {
                        if (!path_is_below(own, mroot))
                                return -ENOENT;
                        own_path += strlen(mroot);
                }
                while (*own_path == '/')
                        own_path++;
                if (!path_safe(own_path))
                        return -EINVAL;
                _cleanup_close_ int fd = openat(c->rootfd, *own_path ? own_path : ".",
                                                O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (fd < 0)
                        return -errno;
                return add_hier(m, TAKE_FD(fd), "", true);
        }

        for (size_t i = 0; i < n; i++) {
                if (e[i].id == 0 || !wanted_v1(e[i].controllers))
                        continue;
                _cleanup_close_ int fd = -EBADF;
                r = open_own_group(c, e[i].controllers, e[i].path, &fd);
                if (r == -ENOENT)
                        continue; /* controller listed but not mounted: not used */
                if (r < 0)
                        return r;
                r = add_hier(m, TAKE_FD(fd), e[i].controllers, false);
                if (r < 0)
                        return r;
        }
        if (m->n_hier == 0)
                return -ENOENT;
        if (m->mode == CGROUP_HYBRID) {
                const struct self_entry *u = self_find(e, n, true);
                _cleanup_close_ int fd = -EBADF;
                r = u ? open_own_group(c, NULL, u->path, &fd) : -ENOENT;
                if (r == -ENOENT) {
                        /* No usable cgroup2 group: plain v1 (freezer-based kill). */
                        m->mode = CGROUP_V1;
                        return 0;
                }
                if (r < 0)
                        return r;
                r = add_hier(m, TAKE_FD(fd), "", true);
                if (r < 0)
                        return r;
        }
        return 0;
}

int cgroup_manager_new(const char *sysfs_root, const char *self_cgroup, const char *subtree,
                       struct cgroup_manager **ret)
{
        if (!sysfs_root || !self_cgroup || !cg_name_valid(subtree))
                return -EINVAL;
        _cleanup_close_ int rootfd = open(sysfs_root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (rootfd < 0)
                return -errno;
        _cleanup_free_ char *root_real = realpath(sysfs_root, NULL);
        if (!root_real)
                return -errno;

        _cleanup_free_ char *self = NULL, *mountinfo = NULL;
        struct self_entry e[32];
        size_t n;
        struct cgroup_manager *m = calloc(1, sizeof(*m));
        if (!m)
                return -ENOMEM;
        int r = -ENOMEM;
        m->subtree = strdup(subtree);
        if (!m->subtree)
                goto fail;
        r = detect_mode(rootfd, &m->mode, &m->real);
        if (r < 0)
                goto fail;

        r = cg_read_all(AT_FDCWD, self_cgroup, &self);
        if (r < 0)
                goto fail;
        r = parse_self_cgroup(self, e, ELEMENTSOF(e), &n);
        if (r < 0)
                goto fail;
        /* Mount points only matter for the real tree; a test directory has none. */
        if (m->real && cg_read_all(AT_FDCWD, "/proc/self/mountinfo", &mountinfo) < 0)
                mountinfo = NULL;
        r = discover(m, &(struct discover_ctx){rootfd, root_real, mountinfo}, e, n);
        if (r < 0)
                goto fail;

        m->ops = m->mode == CGROUP_V2 ? &cgroup_v2_ops : &cgroup_v1_ops;
        r = m->ops->setup(m);
        if (r < 0)
                goto fail;
        release_own_fds(m, false);
        *ret = m;
        return 0;
fail:
        release_own_fds(m, true);
        cgroup_manager_free(m);
        return r;
}

void cgroup_manager_remove_if_empty(struct cgroup_manager *m)
{
        for (size_t i = 0; i < m->n_hier; i++) {
                if (m->hier[i].subtree_fd < 0)
                        continue;
                _cleanup_close_ int parent =
                        openat(m->hier[i].subtree_fd, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                /* rmdir refuses a group with children or processes: that is the check. */
                if (parent >= 0)
                        unlinkat(parent, m->subtree, AT_REMOVEDIR);
        }
}

void cgroup_manager_free(struct cgroup_manager *m)
{
        if (!m)
                return;
        for (size_t i = 0; i < m->n_hier; i++) {
                closep(&m->hier[i].subtree_fd);
                closep(&m->hier[i].own_fd);
                free(m->hier[i].controllers);
        }
        free(m->subtree);
        free(m);
}

enum cgroup_mode cgroup_manager_mode(const struct cgroup_manager *m)
{
        return m->mode;
}

const char *cgroup_mode_name(enum cgroup_mode mode)
{
        switch (mode) {
        case CGROUP_V2:
                return "v2";
        case CGROUP_HYBRID:
                return "hybrid";
        case CGROUP_V1:
                return "v1";
        }
        return "unknown";
}

/* ---------------------------------------------------------------- generic operations */

static int limits_valid(const struct cgroup_limits *l)
{
        /* Zero CPU, memory or pids can never run anything: most likely an unset field. */
        if (!l || l->cpu_millis == 0 || l->memory_bytes == 0 || l->pids == 0)
                return -EINVAL;
        if (l->cpu_millis != CG_UNLIMITED && l->cpu_millis > UINT64_MAX / 100)
                return -ERANGE;
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

int cgroup_env_attach(struct cgroup_manager *m, const char *env, const char *sub, pid_t pid)
{
        if (!names_valid(env, sub) || pid < 0)
                return -EINVAL;
        char buf[24];
        snprintf(buf, sizeof(buf), "%d", (int)(pid ? pid : getpid()));
        /* Every hierarchy in turn; a failure part-way leaves the process in some of them, which
         * is why the callers attach from a helper that exits on error. The unified group comes
         * last on hybrid: it carries no limits, only kill/freeze. */
        for (size_t i = 0; i < m->n_hier; i++) {
                _cleanup_close_ int fd = -EBADF;
                const char *s = sub && hier_tracks_subs(m, &m->hier[i]) ? sub : NULL;
                int r = cg_open_group(&m->hier[i], env, s, true, &fd);
                if (r < 0)
                        return r;
                r = cg_write(fd, "cgroup.procs", buf);
                if (r < 0)
                        return r;
        }
        return 0;
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
        FOREACH_DIRENT(de, d) {
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

/* rmdir name below parentfd, children first. cgroupfs lists interface files that rmdir takes
 * along; a test directory holds regular files that have to go first. */
static int rmdir_tree(int parentfd, const char *name, int depth)
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
        FOREACH_DIRENT(de, d) {
                struct stat cst;
                if (fstatat(dirfd(d), de->d_name, &cst, AT_SYMLINK_NOFOLLOW) < 0)
                        continue;
                if (S_ISDIR(cst.st_mode)) {
                        if (cst.st_dev != st.st_dev) {
                                r = -EBUSY; /* a mount point: never descend */
                                continue;
                        }
                        int q = rmdir_tree(dirfd(d), de->d_name, depth + 1);
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
                if (errno != EBUSY || tries >= 50)
                        return -errno;
                cg_sleep_ms(2);
        }
}

/* Remove env (sub NULL) or env/sub in every hierarchy; where it is missing already is fine. */
static int rmdir_everywhere(struct cgroup_manager *m, const char *env, const char *sub)
{
        int r = 0;
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
                int q = rmdir_tree(parent, sub ? sub : env, 0);
                if (q < 0 && q != -ENOENT)
                        r = q;
        }
        return r;
}

int cgroup_env_destroy(struct cgroup_manager *m, const char *env, const char *sub)
{
        if (!names_valid(env, sub))
                return -EINVAL;
        int r = cg_kill_until_empty(m, env, sub);
        if (r < 0)
                return r; /* -ENOENT: the group exists in no hierarchy */
        return rmdir_everywhere(m, env, sub);
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
        return rmdir_everywhere(m, env, sub);
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

static int cmp_str(const void *a, const void *b)
{
        return strcmp(*(char *const *)a, *(char *const *)b);
}

int cgroup_list_envs(struct cgroup_manager *m, char ***ret_names, size_t *ret_n)
{
        /* The union over hierarchies: a crash during create can leave a group in only some. */
        char **names = NULL;
        size_t n = 0, cap = 0;
        int r = 0;
        for (size_t i = 0; i < m->n_hier && r >= 0; i++) {
                _cleanup_closedir_ DIR *d = NULL;
                if ((r = opendir_at(m->hier[i].subtree_fd, ".", &d)) < 0)
                        break;
                FOREACH_DIRENT(de, d) {
                        if (!cg_name_valid(de->d_name) || !dirent_is_dir(dirfd(d), de))
                                continue;
                        bool dup = false;
                        for (size_t k = 0; k < n && !dup; k++)
                                dup = !strcmp(names[k], de->d_name);
                        if (dup)
                                continue;
                        if (n == cap) {
                                size_t ncap = cap ? cap * 2 : 16;
                                char **nn = realloc(names, ncap * sizeof(*nn));
                                if (!nn) {
                                        r = -ENOMEM;
                                        break;
                                }
                                names = nn;
                                cap = ncap;
                        }
                        if (!(names[n] = strdup(de->d_name))) {
                                r = -ENOMEM;
                                break;
                        }
                        n++;
                }
        }
        if (r < 0) {
                for (size_t k = 0; k < n; k++)
                        free(names[k]);
                free(names);
                return r;
        }
        if (n > 1)
                qsort(names, n, sizeof(*names), cmp_str);
        *ret_names = names;
        *ret_n = n;
        return 0;
}

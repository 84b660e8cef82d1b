/* cgroup discovery: which layout the host has (v2, v1, hybrid), where each hierarchy is mounted
 * (/proc/self/mountinfo), the daemon's own group in each (/proc/self/cgroup), and the subtree
 * Paddock owns below it; cgroup_manager_new puts that together (the v2 delegation check is the
 * backend's setup step) and the manager's lifetime ends here too. */
#include "lib/cgroup_internal.h"
#include "lib/util.h"

#include <sys/stat.h>
#include <sys/vfs.h>

/* The v1 controllers Paddock places environments in. cpuset carries no limit of ours, but lxcfs
 * reads an environment's CPU quota at the path of its cpuset group, so environments get one
 * there too (the subtree inherits the daemon's cpus/mems and hands them down with
 * cgroup.clone_children, see v1_setup). devices/net_cls/perf_event add nothing here, so those
 * hierarchies keep the daemon's own group. */
static const char *const v1_wanted[] = {"cpu", "cpuacct", "memory", "pids", "freezer", "blkio",
                                        "cpuset"};

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
        const char *v2_own;    /* cgroup_manager_new_delegated: the group to use, else NULL */
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
                 * restarted from there still owns the subtree next to that leaf. A group
                 * delegated to it elsewhere (a systemd scope) replaces its own. */
                _cleanup_free_ char *own = strdup(c->v2_own ? c->v2_own : u->path);
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

static int manager_new(const char *sysfs_root, const char *self_cgroup, const char *v2_own,
                       const char *subtree, struct cgroup_manager **ret)
{
        if (!sysfs_root || !self_cgroup || !cg_name_valid(subtree) ||
            (v2_own && v2_own[0] != '/'))
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
        if (v2_own && m->mode != CGROUP_V2) {
                r = -EINVAL;
                goto fail;
        }
        r = discover(m, &(struct discover_ctx){rootfd, root_real, mountinfo, v2_own}, e, n);
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

int cgroup_manager_new(const char *sysfs_root, const char *self_cgroup, const char *subtree,
                       struct cgroup_manager **ret)
{
        return manager_new(sysfs_root, self_cgroup, NULL, subtree, ret);
}

int cgroup_manager_new_delegated(const char *sysfs_root, const char *self_cgroup, const char *own,
                                 const char *subtree, struct cgroup_manager **ret)
{
        return manager_new(sysfs_root, self_cgroup, own, subtree, ret);
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

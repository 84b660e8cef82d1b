#include "lib/rootfs.h"
#include "lib/netlink.h"
#include "lib/util.h"

#include <linux/openat2.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>

const char *const rootfs_required_dirs[] = {"proc", "sys", "dev", "tmp", "workspace", "root",
                                            "etc",  "run", "var", NULL};

/* Resolve rel inside root without following any symlink. */
static int open_in_root(int root_fd, const char *rel, int flags)
{
        struct open_how how = {
                .flags = (uint64_t)(flags | O_CLOEXEC | O_NOFOLLOW),
                .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
        };
        int fd = (int)syscall(SYS_openat2, root_fd, rel, &how, sizeof(how));
        return fd < 0 ? -errno : fd;
}

/* Attach the detached mount mnt_fd onto the directory or file target_fd. */
static int attach(int mnt_fd, int target_fd)
{
        if (move_mount(mnt_fd, "", target_fd, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) <
            0)
                return -errno;
        return 0;
}

/* A fresh superblock of fstype with string options, as a detached mount. */
static int new_fs(const char *fstype, const char *const *opts, unsigned attrs)
{
        _cleanup_close_ int fs = fsopen(fstype, FSOPEN_CLOEXEC);
        if (fs < 0)
                return -errno;
        for (size_t i = 0; opts && opts[i]; i += 2)
                if (fsconfig(fs, FSCONFIG_SET_STRING, opts[i], opts[i + 1], 0) < 0)
                        return -errno;
        if (fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
                return -errno;
        int mnt = fsmount(fs, FSMOUNT_CLOEXEC, attrs);
        return mnt < 0 ? -errno : mnt;
}

/* Mount a new fstype instance on root/rel. */
static int mount_fs_at(int root_fd, const char *rel, const char *fstype, const char *const *opts,
                       unsigned attrs)
{
        _cleanup_close_ int target = open_in_root(root_fd, rel, O_PATH | O_DIRECTORY);
        if (target < 0)
                return target;
        _cleanup_close_ int mnt = new_fs(fstype, opts, attrs);
        if (mnt < 0)
                return mnt;
        return attach(mnt, target);
}

/* ---- the shared sysfs (rootfs_sysfs_share) ---------------------------------------------- */

#define SYSFS_ATTRS (MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC)

static struct {
        int mnt;   /* a detached sysfs of netns, read-only; keeps its superblock */
        int netns; /* an empty network namespace, loopback up; kept alive by this fd and its
                    * copies in the daemon's helpers (a superblock does not hold it) */
        bool cloned; /* the kernel clones mnt (else a root's sysfs is mounted in netns) */
} shared_sysfs = {-EBADF, -EBADF, false};

int rootfs_sysfs_share(bool *cloned)
{
        /* In this thread and back (thread-self: setns moves the thread), not in a thread of its
         * own: a first thread would leave glibc taking the process for multithreaded for good. */
        _cleanup_close_ int self = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
        if (self < 0)
                return -errno;
        if (unshare(CLONE_NEWNET) < 0)
                return -errno;
        int netns = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
        int r = netns < 0 ? -errno : 0;
        if (r >= 0) /* like an environment's own: its /sys/class/net/lo says up */
                r = netlink_loopback_up(-1);
        int mnt = r >= 0 ? new_fs("sysfs", NULL, SYSFS_ATTRS) : -EBADF;
        if (r >= 0 && mnt < 0)
                r = mnt;
        /* As lib/util.c's netns_run: going on in the wrong namespace is never an option. */
        if (setns(self, CLONE_NEWNET) < 0)
                abort();
        if (r < 0) {
                closep(&mnt);
                closep(&netns);
                return r;
        }
        _cleanup_close_ int probe =
            getenv("PADDOCK_TEST_NO_DETACHED_CLONE")
                ? -EBADF
                : open_tree(mnt, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
        closep(&shared_sysfs.mnt);
        closep(&shared_sysfs.netns);
        shared_sysfs.mnt = mnt;
        shared_sysfs.netns = netns;
        shared_sysfs.cloned = probe >= 0;
        *cloned = shared_sysfs.cloned;
        return 0;
}

static int sysfs_context(void *fs)
{
        *(int *)fs = fsopen("sysfs", FSOPEN_CLOEXEC);
        return *(int *)fs < 0 ? -errno : 0;
}

/* The shared sysfs as a detached mount for one root: a clone, or a mount made in the shared
 * namespace (the superblock is chosen at fsopen, by the caller's network namespace then). */
static int shared_sysfs_mount(void)
{
        if (shared_sysfs.cloned) {
                int t = open_tree(shared_sysfs.mnt, "",
                                  OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
                if (t >= 0)
                        return t;
                /* probed in the daemon's mount namespace, not this one: the other way */
        }
        _cleanup_close_ int fs = -EBADF;
        int r = netns_run(shared_sysfs.netns, sysfs_context, &fs);
        if (r < 0)
                return r;
        if (fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
                return -errno;
        int mnt = fsmount(fs, FSMOUNT_CLOEXEC, SYSFS_ATTRS);
        return mnt < 0 ? -errno : mnt;
}

static int mount_sysfs(int root_fd, const struct rootfs_config *c)
{
        if (!c->sysfs_shared || shared_sysfs.mnt < 0)
                return mount_fs_at(root_fd, "sys", "sysfs", NULL, SYSFS_ATTRS);
        _cleanup_close_ int target = open_in_root(root_fd, "sys", O_PATH | O_DIRECTORY);
        if (target < 0)
                return target;
        _cleanup_close_ int mnt = shared_sysfs_mount();
        if (mnt < 0)
                return mnt;
        return attach(mnt, target);
}

/* An idmapped (and otherwise attributed) clone of the tree at path, detached; userns_fd < 0:
 * no idmap (a tree already owned by the environment's ids). */
static int idmapped_tree(const char *path, int userns_fd, uint64_t attrs)
{
        _cleanup_close_ int t = open_tree(AT_FDCWD, path, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
        if (t < 0)
                return -errno;
        struct mount_attr a = {
                .attr_set = (userns_fd >= 0 ? MOUNT_ATTR_IDMAP : 0) | attrs,
                .userns_fd = userns_fd >= 0 ? (uint64_t)userns_fd : 0,
        };
        if (mount_setattr(t, "", AT_EMPTY_PATH, &a, sizeof(a)) < 0)
                return -errno;
        return TAKE_FD(t);
}

static int mount_root_sandbox(const struct rootfs_config *c, int root_dir_fd)
{
        _cleanup_close_ int t = idmapped_tree(c->tree ? c->tree : c->image_rootfs,
                                              c->shifted ? -EBADF : c->userns_fd,
                                              MOUNT_ATTR_RDONLY | MOUNT_ATTR_NODEV |
                                                      MOUNT_ATTR_NOSUID);
        if (t < 0)
                return t;
        return attach(t, root_dir_fd);
}

static int mount_root_computer(const struct rootfs_config *c, int root_dir_fd)
{
        if (c->tree) {
                /* Its own copy-on-write tree, owned by 0..65535 on disk like the image. */
                _cleanup_close_ int t = idmapped_tree(c->tree, c->shifted ? -EBADF : c->userns_fd,
                                                      MOUNT_ATTR_NODEV);
                if (t < 0)
                        return t;
                return attach(t, root_dir_fd);
        }
        char lower[4096], upper[4096], work[4096];
        int r;
        if ((r = BUF_PRINTF(lower, "%s/lower", c->env_dir)) < 0 ||
            (r = BUF_PRINTF(upper, "%s/upper", c->overlay_dir ? c->overlay_dir : c->env_dir)) < 0 ||
            (r = BUF_PRINTF(work, "%s/work", c->overlay_dir ? c->overlay_dir : c->env_dir)) < 0)
                return r;
        /* The idmapped image is only visible inside this mount namespace, at env_dir/lower. */
        _cleanup_close_ int t = idmapped_tree(c->image_rootfs, c->userns_fd, MOUNT_ATTR_RDONLY);
        if (t < 0)
                return t;
        if (move_mount(t, "", AT_FDCWD, lower, MOVE_MOUNT_F_EMPTY_PATH) < 0)
                return -errno;
        /* The upper layer is not idmapped: overlay works in it with the mounter's (host root)
         * credentials, which an idmapped mount could not represent. Its files are owned by the
         * environment's host range instead. */
        const char *const o[] = {"lowerdir", lower, "upperdir", upper, "workdir", work, NULL};
        _cleanup_close_ int mnt = new_fs("overlay", o, MOUNT_ATTR_NODEV);
        if (mnt < 0)
                return mnt;
        return attach(mnt, root_dir_fd);
}

static int setup_dev(int root_fd, const struct rootfs_config *c)
{
        char uid[16], gid_tty[16], size[32];
        snprintf(uid, sizeof(uid), "%u", c->uid_base);
        snprintf(gid_tty, sizeof(gid_tty), "%u", c->uid_base + 5);
        const char *const devopts[] = {"mode", "0755", "size", "65536", "uid", uid, "gid", uid,
                                       NULL};
        int r = mount_fs_at(root_fd, "dev", "tmpfs", devopts, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC);
        if (r < 0)
                return r;
        _cleanup_close_ int dev = open_in_root(root_fd, "dev", O_PATH | O_DIRECTORY);
        if (dev < 0)
                return dev;
        _cleanup_close_ int devdir = openat(dev, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (devdir < 0)
                return -errno;
        /* Only harmless character devices, bound from the host: no disks, no /dev/mem. */
        static const char *const nodes[] = {"null", "zero", "full", "random", "urandom", "tty",
                                            NULL};
        for (size_t i = 0; nodes[i]; i++) {
                char host[64];
                if (BUF_PRINTF(host, "/dev/%s", nodes[i]) < 0)
                        return -ENAMETOOLONG;
                _cleanup_close_ int f = openat(devdir, nodes[i],
                                               O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
                if (f < 0)
                        return -errno;
                _cleanup_close_ int target = openat(devdir, nodes[i], O_PATH | O_CLOEXEC);
                _cleanup_close_ int t = open_tree(AT_FDCWD, host, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
                if (t < 0 || target < 0)
                        return -errno;
                struct mount_attr a = {.attr_set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC};
                if (mount_setattr(t, "", AT_EMPTY_PATH, &a, sizeof(a)) < 0)
                        return -errno;
                if ((r = attach(t, target)) < 0)
                        return r;
        }
        static const char *const links[][2] = {
                {"fd", "/proc/self/fd"},     {"stdin", "/proc/self/fd/0"},
                {"stdout", "/proc/self/fd/1"}, {"stderr", "/proc/self/fd/2"},
                {"ptmx", "pts/ptmx"},        {"core", "/proc/kcore"},
        };
        for (size_t i = 0; i < ELEMENTSOF(links); i++)
                if (symlinkat(links[i][1], devdir, links[i][0]) < 0)
                        return -errno;
        if (mkdirat(devdir, "pts", 0755) < 0 || mkdirat(devdir, "shm", 01777) < 0 ||
            mkdirat(devdir, "mqueue", 0755) < 0)
                return -errno;
        /* Ownership of what we made: the environment's root. */
        if (fchownat(devdir, "shm", c->uid_base, c->uid_base, AT_SYMLINK_NOFOLLOW) < 0 ||
            fchmodat(devdir, "shm", 01777, 0) < 0)
                return -errno;
        const char *const ptsopts[] = {"newinstance", NULL, "ptmxmode", "0666", "mode", "0620",
                                       "gid",         gid_tty, NULL};
        _cleanup_close_ int pts_fs = fsopen("devpts", FSOPEN_CLOEXEC);
        if (pts_fs < 0)
                return -errno;
        for (size_t i = 0; ptsopts[i]; i += 2) {
                int q = ptsopts[i + 1]
                                ? fsconfig(pts_fs, FSCONFIG_SET_STRING, ptsopts[i], ptsopts[i + 1], 0)
                                : fsconfig(pts_fs, FSCONFIG_SET_FLAG, ptsopts[i], NULL, 0);
                if (q < 0)
                        return -errno;
        }
        if (fsconfig(pts_fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
                return -errno;
        _cleanup_close_ int pts = fsmount(pts_fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC);
        _cleanup_close_ int pts_target = openat(devdir, "pts", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (pts < 0 || pts_target < 0)
                return -errno;
        if ((r = attach(pts, pts_target)) < 0)
                return r;
        snprintf(size, sizeof(size), "%llu", (unsigned long long)c->shm_bytes);
        const char *const shmopts[] = {"mode", "1777", "size", size, "uid", uid, "gid", uid, NULL};
        return mount_fs_at(root_fd, "dev/shm", "tmpfs", shmopts,
                           MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
}

/* Kernel interfaces that leak host activity (interrupt counts, timers, the scheduler, keys,
 * kernel memory) or reach hardware, hidden as Docker's default does. Whether each is a file or
 * a directory depends on the kernel, so the mask follows what is there: a file gets /dev/null
 * bound read-only over it (reads return nothing), a directory an empty read-only tmpfs. A path
 * the running kernel lacks is skipped: procfs and the read-only sysfs cannot gain entries from
 * inside, and nothing inside can mount. */
static const char *const masked_paths[] = {
        "proc/interrupts", "proc/kcore",  "proc/keys",    "proc/timer_list",
        "proc/sched_debug", "proc/latency_stats", "proc/timer_stats",
        "proc/acpi",       "proc/scsi",   "proc/asound",
        "sys/firmware",    "sys/devices/virtual/powercap", "sys/kernel/debug",
        NULL,
};

/* Host-wide knobs and triggers: visible, but read-only (with everything mounted below them). */
static const char *const readonly_paths[] = {
        "proc/bus", "proc/fs", "proc/irq", "proc/sys", "proc/sysrq-trigger", NULL,
};

/* Every mask is made here, in a mount namespace owned by the host's user namespace, so the
 * environment (whose root has capabilities only in its own user namespace) can never unmount
 * or remount it. Were it ever to create a mount namespace of its own (seccomp forbids that),
 * the kernel would copy these mounts locked (MNT_LOCKED) and refuse a fresh procfs or sysfs
 * there, since the existing ones are not fully visible (mount_too_revealing).
 * The masked directories share one empty tmpfs: the first is a fresh superblock, the others
 * are clones of its mount (*empty_dir), read-only like it. A superblock costs its creation
 * here and its shutdown when the environment ends (~10 mask-free superblocks otherwise). */
static int mask_one(int root_fd, const char *rel, int *empty_dir)
{
        _cleanup_close_ int target = open_in_root(root_fd, rel, O_PATH);
        if (target == -ENOENT)
                return 0;
        if (target < 0)
                return target;
        struct stat st;
        if (fstat(target, &st) < 0)
                return -errno;
        const unsigned attrs = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC |
                               (S_ISDIR(st.st_mode) ? MOUNT_ATTR_NODEV : 0);
        _cleanup_close_ int t = -EBADF;
        if (S_ISDIR(st.st_mode) && *empty_dir < 0) {
                const char *const o[] = {"size", "0", "nr_inodes", "1", "mode", "0555", NULL};
                t = new_fs("tmpfs", o, attrs);
                if (t < 0)
                        return t;
                int r = attach(t, target);
                if (r < 0)
                        return r;
                /* Still the (now attached) mount: the next directories clone it. */
                *empty_dir = TAKE_FD(t);
                return 0;
        }
        t = S_ISDIR(st.st_mode)
                    ? open_tree(*empty_dir, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH)
                    : open_tree(AT_FDCWD, "/dev/null", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
        if (t < 0)
                return -errno;
        struct mount_attr a = {.attr_set = attrs};
        if (mount_setattr(t, "", AT_EMPTY_PATH, &a, sizeof(a)) < 0)
                return -errno;
        return attach(t, target);
}

static int readonly_one(int root_fd, const char *rel)
{
        _cleanup_close_ int target = open_in_root(root_fd, rel, O_PATH);
        if (target == -ENOENT)
                return 0;
        if (target < 0)
                return target;
        _cleanup_close_ int t = open_tree(target, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC |
                                                         AT_EMPTY_PATH | AT_RECURSIVE);
        if (t < 0)
                return -errno;
        struct mount_attr a = {.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID |
                                           MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC};
        if (mount_setattr(t, "", AT_EMPTY_PATH | AT_RECURSIVE, &a, sizeof(a)) < 0)
                return -errno;
        return attach(t, target);
}

static int mask_proc(int root_fd)
{
        _cleanup_close_ int empty_dir = -EBADF;
        int r;
        for (size_t i = 0; masked_paths[i]; i++)
                if ((r = mask_one(root_fd, masked_paths[i], &empty_dir)) < 0)
                        return r;
        for (size_t i = 0; readonly_paths[i]; i++)
                if ((r = readonly_one(root_fd, readonly_paths[i])) < 0)
                        return r;
        return 0;
}

/* The daemon's resolver for this environment. Skipped when the image has no regular
 * /etc/resolv.conf to cover (a symlink there is never followed). */
static int bind_resolv_conf(int root_fd, const char *host_file)
{
        _cleanup_close_ int target = open_in_root(root_fd, "etc/resolv.conf", O_PATH);
        if (target < 0)
                return 0;
        struct stat st;
        if (fstat(target, &st) < 0 || !S_ISREG(st.st_mode))
                return 0;
        _cleanup_close_ int t = open_tree(AT_FDCWD, host_file, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
        if (t < 0)
                return -errno;
        struct mount_attr a = {.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID |
                                           MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC};
        if (mount_setattr(t, "", AT_EMPTY_PATH, &a, sizeof(a)) < 0)
                return -errno;
        return attach(t, target);
}

/* Files lxcfs answers per reading cgroup (limits, the environment's own uptime and load): bound
 * read-only over the kernel's host-wide figures. Best effort: an entry lxcfs or the kernel lacks
 * is skipped, and a failing lxcfs leaves the kernel's files in place. Not lxcfs' own
 * sys/devices/system/cpu/online: the kernel caches that FUSE file's size from its first (short)
 * read by anyone, so "0-1" reads as "0-" after a 1-CPU environment read "0"; the daemon writes
 * a file of its own per environment instead (cpu_online). */
static const char *const lxcfs_files[] = {
        "proc/cpuinfo", "proc/meminfo", "proc/stat",  "proc/uptime",
        "proc/loadavg", "proc/swaps",   "proc/diskstats", NULL,
};

/* check: access(src) first, a request to lxcfs that fails when it is gone (see bind_lxcfs). */
static void bind_file_ro(int root_fd, const char *src, const char *rel, bool check)
{
        _cleanup_close_ int target = open_in_root(root_fd, rel, O_PATH);
        if (target < 0 || (check && access(src, R_OK) < 0))
                return;
        _cleanup_close_ int t = open_tree(AT_FDCWD, src, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
        if (t < 0)
                return;
        struct mount_attr a = {.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID |
                                           MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC};
        if (mount_setattr(t, "", AT_EMPTY_PATH, &a, sizeof(a)) < 0)
                return;
        (void)attach(t, target);
}

/* Whether lxcfs answers is asked once, by the first file's access() (a FUSE round trip to
 * lxcfs, which says yes to any of its read-only proc files: it checks liveness, not the file):
 * one per file cost 7 round trips per start, on a loaded 2-core host about 0.3 ms. A file this
 * lxcfs lacks still fails its open_tree and is skipped. */
static void bind_lxcfs(int root_fd, const char *lxcfs_dir)
{
        for (size_t i = 0; lxcfs_files[i]; i++) {
                char src[4200];
                if (BUF_PRINTF(src, "%s/%s", lxcfs_dir, lxcfs_files[i]) < 0)
                        return;
                if (i == 0 && access(src, R_OK) < 0 && errno != ENOENT)
                        return; /* lxcfs is gone: the kernel's files stay */
                bind_file_ro(root_fd, src, lxcfs_files[i], false);
        }
}

/* Controllers whose groups Paddock limits: their v1 hierarchies are shown inside. */
/* One v1 hierarchy (controllers "cpu,cpuacct") at sysfs/cgroup/<controllers>, rooted at the
 * environment's group (the spawning child already is in the environment's cgroup namespace,
 * whose root is that group), read-only. */
static int new_cgroup_v1(const char *controllers)
{
        _cleanup_close_ int fs = fsopen("cgroup", FSOPEN_CLOEXEC);
        if (fs < 0)
                return -errno;
        char buf[256];
        snprintf(buf, sizeof(buf), "%s", controllers);
        char *save = NULL;
        for (char *c = strtok_r(buf, ",", &save); c; c = strtok_r(NULL, ",", &save))
                if (fsconfig(fs, FSCONFIG_SET_FLAG, c, NULL, 0) < 0)
                        return -errno;
        if (fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
                return -errno;
        int mnt = fsmount(fs, FSMOUNT_CLOEXEC,
                          MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
                                  MOUNT_ATTR_NOEXEC);
        return mnt < 0 ? -errno : mnt;
}

/* tree: the group as a detached mount (cgroup_env_view_trees), or -EBADF: a new mount of the
 * hierarchy (its get_tree walks every group on the host, under the kernel's cgroup lock). */
static int mount_cgroup_v1(int cg_fd, const char *controllers, int tree)
{
        if (mkdirat(cg_fd, controllers, 0555) < 0 && errno != EEXIST)
                return -errno;
        _cleanup_close_ int own = -EBADF;
        if (tree < 0) {
                own = new_cgroup_v1(controllers);
                if (own < 0)
                        return own;
        }
        int mnt = tree >= 0 ? tree : own;
        _cleanup_close_ int target = openat(cg_fd, controllers, O_PATH | O_DIRECTORY | O_NOFOLLOW |
                                                                   O_CLOEXEC);
        if (target < 0)
                return -errno;
        int r = attach(mnt, target);
        if (r < 0)
                return r;
        /* "cpu" and "cpuacct" name the co-mounted "cpu,cpuacct", as on the host */
        if (strchr(controllers, ',')) {
                char buf[256], *save = NULL;
                snprintf(buf, sizeof(buf), "%s", controllers);
                for (char *c = strtok_r(buf, ",", &save); c; c = strtok_r(NULL, ",", &save))
                        if (symlinkat(controllers, cg_fd, c) < 0 && errno != EEXIST)
                                return -errno;
        }
        return 0;
}

/* /sys/fs/cgroup: the environment's own cgroup, read-only, so that runtimes reading their limits
 * (JVM, Go, .NET, Node) find them. v2: the unified hierarchy rooted at its group. v1 and hybrid:
 * a read-only tmpfs holding each hierarchy Paddock limits, each rooted at its group. Mounted
 * read-only from outside the environment's user namespace: nothing inside can remount them, and
 * the files belong to host root anyway. */
static int mount_cgroup_view(int root_fd, const struct rootfs_config *c)
{
        /* One read into the stack. The child is in the cgroup namespace rooted at its own
         * groups, so every line is short ("4:memory:/"). */
        char text[4096], v1[8][128];
        _cleanup_close_ int fd = open("/proc/self/cgroup", O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        ssize_t len = read_full(fd, text, sizeof(text) - 1);
        if (len < 0)
                return (int)len;
        if ((size_t)len == sizeof(text) - 1)
                return -EFBIG;
        text[len] = 0;
        size_t n_v1 = 0;
        bool unified = false;
        char *save_line = NULL;
        for (char *line = strtok_r(text, "\n", &save_line); line;
             line = strtok_r(NULL, "\n", &save_line)) {
                char *a = strchr(line, ':'), *b = a ? strchr(a + 1, ':') : NULL;
                if (!a || !b)
                        continue;
                *b = 0;
                const char *ctl = a + 1;
                if (!*ctl)
                        unified = true;
                else if (strncmp(ctl, "name=", 5) && cgroup_controllers_shown(ctl) &&
                         n_v1 < ELEMENTSOF(v1) && strlen(ctl) < sizeof(v1[0]))
                        snprintf(v1[n_v1++], sizeof(v1[0]), "%s", ctl);
        }
        unsigned ro = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC;
        if (c->n_cgroup_trees)
                n_v1 = 0; /* the trees given instead */
        else if (!n_v1)
                return unified ? mount_fs_at(root_fd, "sys/fs/cgroup", "cgroup2", NULL, ro) : 0;
        const char *const o[] = {"mode", "0755", "size", "65536", NULL};
        int r = mount_fs_at(root_fd, "sys/fs/cgroup", "tmpfs", o,
                            MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC);
        if (r < 0)
                return r;
        _cleanup_close_ int cg = open_in_root(root_fd, "sys/fs/cgroup", O_RDONLY | O_DIRECTORY);
        if (cg < 0)
                return cg;
        for (size_t i = 0; i < c->n_cgroup_trees; i++)
                if ((r = mount_cgroup_v1(cg, c->cgroup_trees[i].controllers,
                                         c->cgroup_trees[i].fd)) < 0)
                        return r;
        for (size_t i = 0; i < n_v1; i++)
                if ((r = mount_cgroup_v1(cg, v1[i], -EBADF)) < 0)
                        return r;
        struct mount_attr a = {.attr_set = MOUNT_ATTR_RDONLY};
        return mount_setattr(cg, "", AT_EMPTY_PATH, &a, sizeof(a)) < 0 ? -errno : 0;
}

static int write_sysctl(int root_fd, const struct rootfs_sysctl *k)
{
        char rel[256];
        int r = BUF_PRINTF(rel, "proc/sys/%s", k->path);
        if (r < 0)
                return r;
        _cleanup_close_ int fd = open_in_root(root_fd, rel, O_WRONLY);
        if (fd < 0)
                return k->optional && fd == -ENOENT ? 0 : fd;
        r = write_all(fd, k->value, strlen(k->value));
        return k->optional ? 0 : r;
}

static int enter_root(int root_fd)
{
        /* pivot_root(".", ".") stacks the old root on top of the new one; detaching "."
         * afterwards removes the old root, leaving no path back to the host. */
        if (fchdir(root_fd) < 0)
                return -errno;
        if (syscall(SYS_pivot_root, ".", ".") < 0)
                return -errno;
        if (umount2(".", MNT_DETACH) < 0)
                return -errno;
        if (chdir("/") < 0)
                return -errno;
        return 0;
}

int rootfs_enter(const struct rootfs_config *c, const char **ret_step)
{
        const char *step = "make mounts private";
        int r = 0;
        char rootdir[4096];
        _cleanup_close_ int root_dir = -EBADF, root = -EBADF;

        if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) {
                r = -errno;
                goto fail;
        }
        step = "root mount point";
        if ((r = BUF_PRINTF(rootdir, "%s/rootfs", c->env_dir)) < 0)
                goto fail;
        root_dir = open(rootdir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (root_dir < 0) {
                r = -errno;
                goto fail;
        }
        step = !c->writable ? "idmapped read-only root" : c->tree ? "idmapped root" : "overlay root";
        r = c->writable ? mount_root_computer(c, root_dir) : mount_root_sandbox(c, root_dir);
        if (r < 0)
                goto fail;
        /* Reopen: the fd taken before the mount still points at the covered directory. */
        root = open(rootdir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (root < 0) {
                r = -errno;
                goto fail;
        }
        step = "/proc";
        if ((r = mount_fs_at(root, "proc", "proc", NULL,
                             MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC)) < 0)
                goto fail;
        for (const struct rootfs_sysctl *k = c->sysctls; k && k->path; k++) {
                step = k->path;
                if ((r = write_sysctl(root, k)) < 0)
                        goto fail;
        }
        step = "/sys";
        if ((r = mount_sysfs(root, c)) < 0)
                goto fail;
        step = "/dev";
        if ((r = setup_dev(root, c)) < 0)
                goto fail;
        if (!c->writable) {
                char uid[16], size[32], inodes[32];
                snprintf(uid, sizeof(uid), "%u", c->uid_base);
                snprintf(size, sizeof(size), "%llu", (unsigned long long)c->tmp_bytes);
                /* Inodes cost kernel memory outside the size limit: one per 4 KiB of size, at
                 * least 1024 (tmpfs' own default is half the host's RAM pages). */
                uint64_t n_inodes = c->tmp_bytes / 4096 < 1024 ? 1024 : c->tmp_bytes / 4096;
                snprintf(inodes, sizeof(inodes), "%llu", (unsigned long long)n_inodes);
                const char *const tmp[] = {"mode", "1777", "size", size, "nr_inodes", inodes,
                                           "uid", uid, "gid", uid, NULL};
                const char *const ws[] = {"mode", "0755", "size", size, "nr_inodes", inodes,
                                          "uid", uid, "gid", uid, NULL};
                step = "/tmp";
                if ((r = mount_fs_at(root, "tmp", "tmpfs", tmp,
                                     MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV)) < 0)
                        goto fail;
                step = "/workspace";
                if ((r = mount_fs_at(root, "workspace", "tmpfs", ws,
                                     MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV)) < 0)
                        goto fail;
        }
        step = "/sys/fs/cgroup";
        if ((r = mount_cgroup_view(root, c)) < 0)
                goto fail;
        step = "mask /proc and /sys";
        if ((r = mask_proc(root)) < 0)
                goto fail;
        if (c->lxcfs_dir)
                bind_lxcfs(root, c->lxcfs_dir);
        if (c->cpu_online)
                bind_file_ro(root, c->cpu_online, "sys/devices/system/cpu/online", true);
        step = "/etc/resolv.conf";
        if (c->resolv_conf && (r = bind_resolv_conf(root, c->resolv_conf)) < 0)
                goto fail;
        step = "pivot_root";
        if ((r = enter_root(root)) < 0)
                goto fail;
        return 0;
fail:
        *ret_step = step;
        return r;
}

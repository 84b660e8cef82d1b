/* The btrfs driver: images are read-only subvolumes, a computer's disk is a writable snapshot
 * of its image (copy-on-write: milliseconds, and only what it changes costs space), snapshots
 * are read-only snapshots of that. Disk limits are quota groups of the environment's subvolume:
 * simple quotas (Linux 6.7+: only extents the subvolume itself wrote count, no rescans) or
 * classic qgroups on older kernels.
 *
 * When the state directory is not on btrfs, the pool is a sparse file R/pool.img, formatted
 * once with mkfs.btrfs and loop-mounted at R/pool. Running computers keep the filesystem busy
 * through their own mounts, so the pool stays mounted when the daemon stops; a restarted
 * daemon reuses the mount, or re-mounts the loop device still attached to the file (a second
 * device with the same filesystem id would confuse btrfs). */
#include "lib/btrfs.h"
#include "lib/loopdev.h"
#include "lib/storage.h"
#include "lib/util.h"

#include <libgen.h>
#include <linux/btrfs.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#define DEFAULT_POOL_BYTES (16ull << 30)
#define MIN_POOL_BYTES (256ull << 20)

static int open_dir(const char *path)
{
        int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        return fd < 0 ? -errno : fd;
}

static int find_mkfs(char *buf, size_t len)
{
        static const char *const candidates[] = {"/usr/sbin/mkfs.btrfs", "/sbin/mkfs.btrfs",
                                                 "/usr/bin/mkfs.btrfs", NULL};
        for (size_t i = 0; candidates[i]; i++)
                if (access(candidates[i], X_OK) == 0)
                        return buf_printf(buf, len, "%s", candidates[i]) < 0 ? -ENAMETOOLONG : 0;
        return -ENOENT;
}

/* A new pool file, formatted; made under a temporary name so a crash never leaves a file
 * that looks like a pool but is not one. */
static int make_pool_file(struct storage *s, const char *file, char *err, size_t errlen)
{
        char tmp[2300], mkfs[64];
        if (BUF_PRINTF(tmp, "%s.new", file) < 0) {
                snprintf(err, errlen, "%s: path too long", file);
                return -ENAMETOOLONG;
        }
        if (find_mkfs(mkfs, sizeof(mkfs)) < 0) {
                snprintf(err, errlen, "mkfs.btrfs not found (install btrfs-progs, or use --storage dir)");
                return -ENOENT;
        }
        uint64_t size = s->pool_bytes ? s->pool_bytes : DEFAULT_POOL_BYTES;
        struct statvfs sv;
        if (!s->pool_bytes && statvfs(s->root, &sv) == 0 &&
            (uint64_t)sv.f_blocks * sv.f_frsize / 2 < size)
                size = (uint64_t)sv.f_blocks * sv.f_frsize / 2;
        if (size < MIN_POOL_BYTES)
                size = MIN_POOL_BYTES;
        unlink(tmp);
        _cleanup_close_ int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd < 0 || ftruncate(fd, (off_t)size) < 0) {
                snprintf(err, errlen, "creating %s: %s", tmp, strerror(errno));
                unlink(tmp);
                return -errno;
        }
        const char *const argv[] = {mkfs, "-q", "-f", "-L", "paddock", tmp, NULL};
        int r = storage_run(argv);
        if (r >= 0 && fsync(fd) < 0)
                r = -errno;
        if (r >= 0 && rename(tmp, file) < 0)
                r = -errno;
        if (r < 0) {
                snprintf(err, errlen, "formatting the pool file %s failed", tmp);
                unlink(tmp);
        }
        return r;
}

static bool is_mounted_btrfs(const char *pool, const char *root)
{
        struct stat a, b;
        _cleanup_close_ int fd = open(pool, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        return fd >= 0 && btrfs_is_btrfs(fd) && fstat(fd, &a) == 0 && stat(root, &b) == 0 &&
               a.st_dev != b.st_dev;
}

static int mount_pool(struct storage *s, char *err, size_t errlen)
{
        char file[2200];
        if (BUF_PRINTF(file, "%s/pool.img", s->root) < 0) {
                snprintf(err, errlen, "%s: path too long", s->root);
                return -ENAMETOOLONG;
        }
        if (mkdir(s->pool, 0700) < 0 && errno != EEXIST) {
                snprintf(err, errlen, "%s: %s", s->pool, strerror(errno));
                return -errno;
        }
        if (is_mounted_btrfs(s->pool, s->root))
                return 0;
        int r;
        if (access(file, F_OK) < 0 && (r = make_pool_file(s, file, err, errlen)) < 0)
                return r;
        char dev[64];
        _cleanup_close_ int hold = -EBADF;
        r = loopdev_find(file, dev, sizeof(dev));
        if (r == -ENOENT)
                r = loopdev_attach(file, dev, sizeof(dev), &hold);
        if (r < 0) {
                snprintf(err, errlen, "loop device for %s: %s", file, strerror(-r));
                return r;
        }
        if (mount(dev, s->pool, "btrfs", MS_NOATIME | MS_NODEV, NULL) < 0) {
                r = -errno;
                snprintf(err, errlen, "mounting %s on %s: %s", dev, s->pool, strerror(-r));
                return r;
        }
        return 0;
}

/* R/images and R/envs point into the pool (made as empty directories by nothing else). */
static int link_into_pool(struct storage *s, const char *sub, char *err, size_t errlen)
{
        char target[2300], link[2300], rel[64];
        if (BUF_PRINTF(target, "%s/%s", s->pool, sub) < 0 ||
            BUF_PRINTF(link, "%s/%s", s->root, sub) < 0 || BUF_PRINTF(rel, "pool/%s", sub) < 0) {
                snprintf(err, errlen, "%s: path too long", s->root);
                return -ENAMETOOLONG;
        }
        if (mkdir(target, 0700) < 0 && errno != EEXIST)
                goto fail;
        struct stat st;
        if (lstat(link, &st) == 0) {
                if (S_ISLNK(st.st_mode))
                        return 0;
                if (!S_ISDIR(st.st_mode) || rmdir(link) < 0) /* an empty directory: replace */
                        goto fail;
        }
        if (symlink(rel, link) < 0)
                goto fail;
        return 0;
fail:
        snprintf(err, errlen, "%s: %s", link, strerror(errno));
        return -errno;
}

/* Which quota mode the filesystem runs: sysfs says (Linux 6.7+); else qgroups. */
static void read_quota_mode(struct storage *s, int fd)
{
        struct btrfs_ioctl_fs_info_args fi = {0};
        snprintf(s->quota_mode, sizeof(s->quota_mode), "qgroups");
        if (ioctl(fd, BTRFS_IOC_FS_INFO, &fi) < 0)
                return;
        char uuid[40], path[128];
        const unsigned char *u = fi.fsid;
        snprintf(uuid, sizeof(uuid),
                 "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1],
                 u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14],
                 u[15]);
        char *m = NULL;
        if (BUF_PRINTF(path, "/sys/fs/btrfs/%s/qgroups/mode", uuid) >= 0 &&
            read_file_at(AT_FDCWD, path, 32, &m) >= 0) {
                if (!strncmp(m, "squota", 6))
                        snprintf(s->quota_mode, sizeof(s->quota_mode), "simple quotas");
                free(m);
        }
}

static int btrfs_open(struct storage *s, char *err, size_t errlen)
{
        int r;
        if (BUF_PRINTF(s->pool, "%s/pool", s->root) < 0) {
                snprintf(err, errlen, "%s: path too long", s->root);
                return -ENAMETOOLONG;
        }
        _cleanup_close_ int rootfd = open_dir(s->root);
        if (rootfd < 0) {
                snprintf(err, errlen, "%s: %s", s->root, strerror(-rootfd));
                return rootfd;
        }
        if (btrfs_is_btrfs(rootfd)) {
                s->info.backing = "host btrfs";
                if (mkdir(s->pool, 0700) < 0 && errno != EEXIST) {
                        snprintf(err, errlen, "%s: %s", s->pool, strerror(errno));
                        return -errno;
                }
        } else {
                s->info.backing = "pool file";
                if ((r = mount_pool(s, err, errlen)) < 0)
                        return r;
        }
        if ((r = link_into_pool(s, "images", err, errlen)) < 0 ||
            (r = link_into_pool(s, "envs", err, errlen)) < 0)
                return r;
        _cleanup_close_ int pool = open_dir(s->pool);
        if (pool < 0) {
                snprintf(err, errlen, "%s: %s", s->pool, strerror(-pool));
                return pool;
        }
        if ((r = btrfs_quota_enable(pool, true)) < 0 && (r = btrfs_quota_enable(pool, false)) < 0) {
                snprintf(err, errlen, "enabling btrfs quotas: %s", strerror(-r));
                return r;
        }
        read_quota_mode(s, pool);
        rm_rf_at(pool, "spares"); /* made ahead of time by the last run: nothing to keep */
        s->info.pool = s->pool;
        s->info.quota = s->quota_mode;
        s->info.live_disk_limits = true;
        s->info.idmapped = storage_probe_idmap(s->pool);
        s->info.shifted = !s->info.idmapped;
        return 0;
}

static int disk_fd(const char *env_dir)
{
        char p[4200];
        if (BUF_PRINTF(p, "%s/disk", env_dir) < 0)
                return -ENAMETOOLONG;
        return open_dir(p);
}

static int btrfs_set_quota(struct storage *s, const char *env_dir, uint64_t bytes)
{
        _cleanup_close_ int fd = disk_fd(env_dir);
        if (fd < 0)
                return fd;
        uint64_t id;
        int r = btrfs_subvol_id(fd, &id);
        return r < 0 ? r : btrfs_qgroup_limit(fd, id, bytes);
}

static int btrfs_usage(struct storage *s, const char *env_dir, uint64_t *ret_bytes)
{
        _cleanup_close_ int fd = disk_fd(env_dir);
        if (fd < 0)
                return fd;
        uint64_t id;
        int r = btrfs_subvol_id(fd, &id);
        return r < 0 ? r : btrfs_qgroup_usage(fd, id, ret_bytes);
}

/* env_dir/disk := writable snapshot of src; limited to disk_bytes when set. */
static int snapshot_into(struct storage *s, const char *src, const char *env_dir,
                         const char *name, uint64_t disk_bytes)
{
        _cleanup_close_ int from = open_dir(src), env = open_dir(env_dir);
        if (from < 0)
                return from;
        if (env < 0)
                return env;
        if (!btrfs_is_subvolume(from))
                return -EMEDIUMTYPE;
        int r = btrfs_snapshot(from, env, name, false);
        if (r < 0 || !disk_bytes)
                return r;
        _cleanup_close_ int d = -EBADF;
        if ((d = openat(env, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
                return -errno;
        uint64_t id;
        if ((r = btrfs_subvol_id(d, &id)) < 0)
                return r;
        return btrfs_qgroup_limit(d, id, disk_bytes);
}

/* Without idmapped mounts, a copy is chowned from its source's id range to its own. */
static int copy_for(struct storage *s, const char *src, const char *env_dir, uint32_t src_base,
                    uint32_t uid_base, uint64_t disk_bytes)
{
        int r = snapshot_into(s, src, env_dir, "disk", disk_bytes);
        if (r < 0 || !s->info.shifted)
                return r;
        char disk[4200];
        if (BUF_PRINTF(disk, "%s/disk", env_dir) < 0)
                return -ENAMETOOLONG;
        return storage_shift_tree(disk, src_base, uid_base);
}

/* Spares: <pool>/spares/<subvolume id of the image>, a writable snapshot of that image made
 * while nobody waits (the id of a deleted subvolume is never given out again, so a spare
 * never outlives its image's identity). Swept at every start. */
static int spare_name(const char *image_rootfs, char *buf, size_t len)
{
        _cleanup_close_ int img = open_dir(image_rootfs);
        if (img < 0)
                return img;
        uint64_t id;
        int r = btrfs_subvol_id(img, &id);
        if (r < 0)
                return r;
        return buf_printf(buf, len, "%llu", (unsigned long long)id) < 0 ? -ENAMETOOLONG : 0;
}

static int spares_dir(struct storage *s)
{
        char p[2200];
        if (BUF_PRINTF(p, "%s/spares", s->pool) < 0)
                return -ENAMETOOLONG;
        if (mkdir(p, 0700) < 0 && errno != EEXIST)
                return -errno;
        return open_dir(p);
}

/* The spares directory, the name image_rootfs's spare has in it, and dir (the other end of
 * the move or snapshot) opened. */
static int spare_open(struct storage *s, const char *image_rootfs, const char *dir,
                      char name[static 32], int *ret_spares, int *ret_dir)
{
        int r = spare_name(image_rootfs, name, 32);
        if (r < 0)
                return r;
        _cleanup_close_ int spares = spares_dir(s), other = open_dir(dir);
        if (spares < 0)
                return spares;
        if (other < 0)
                return other;
        *ret_spares = TAKE_FD(spares);
        *ret_dir = TAKE_FD(other);
        return 0;
}

static int take_spare(struct storage *s, const char *image_rootfs, const char *env_dir)
{
        char name[32];
        _cleanup_close_ int spares = -EBADF, env = -EBADF;
        int r = spare_open(s, image_rootfs, env_dir, name, &spares, &env);
        if (r < 0)
                return r;
        return renameat(spares, name, env, "disk") < 0 ? -errno : 0;
}

static int btrfs_spare_target(struct storage *s, const char *image_rootfs, int *ret_from,
                              int *ret_dir, char name[static 32])
{
        if (s->info.shifted)
                return 1; /* each copy is chowned for its own range: nothing to share */
        _cleanup_close_ int spares = -EBADF, from = -EBADF;
        int r = spare_open(s, image_rootfs, image_rootfs, name, &spares, &from);
        if (r < 0)
                return r;
        struct stat st;
        if (fstatat(spares, name, &st, AT_SYMLINK_NOFOLLOW) == 0)
                return 1;
        *ret_from = TAKE_FD(from);
        *ret_dir = TAKE_FD(spares);
        return 0;
}

static int btrfs_prepare_spare(struct storage *s, const char *image_rootfs)
{
        char name[32];
        int from = -EBADF, spares = -EBADF;
        int r = btrfs_spare_target(s, image_rootfs, &from, &spares, name);
        if (r != 0)
                return r < 0 ? r : 0;
        r = btrfs_snapshot(from, spares, name, false);
        close(from);
        close(spares);
        return r;
}

static void btrfs_drop_spares(struct storage *s)
{
        _cleanup_close_ int pool = open_dir(s->pool);
        if (pool >= 0)
                rm_rf_at(pool, "spares");
}

static int btrfs_env_create(struct storage *s, const char *env_dir, const char *image_rootfs,
                            uint32_t uid_base, uint64_t disk_bytes)
{
        if (!s->info.shifted && take_spare(s, image_rootfs, env_dir) == 0)
                return disk_bytes ? btrfs_set_quota(s, env_dir, disk_bytes) : 0;
        return copy_for(s, image_rootfs, env_dir, 0, uid_base, disk_bytes);
}

static int btrfs_env_clone(struct storage *s, const char *src, const char *env_dir,
                           uint32_t src_base, uint32_t uid_base, uint64_t disk_bytes)
{
        return copy_for(s, src, env_dir, src_base, uid_base, disk_bytes);
}

static int btrfs_take_snapshot(struct storage *s, const char *env_dir, const char *dst_dir,
                               const char *name, uint32_t unshift_base)
{
        int r = mkdir_p_at(AT_FDCWD, dst_dir, 0700);
        if (r < 0)
                return r;
        _cleanup_close_ int from = disk_fd(env_dir), dst = open_dir(dst_dir);
        if (from < 0)
                return from;
        if (dst < 0)
                return dst;
        if (!s->info.shifted || !unshift_base)
                return btrfs_snapshot(from, dst, name, true);
        /* A commit of a chowned tree: back to 0..65535 before it turns read-only. */
        if ((r = btrfs_snapshot(from, dst, name, false)) < 0)
                return r;
        char path[4400];
        if (BUF_PRINTF(path, "%s/%s", dst_dir, name) < 0)
                return -ENAMETOOLONG;
        _cleanup_close_ int snap = -EBADF;
        if ((r = storage_shift_tree(path, unshift_base, 0)) < 0 ||
            (snap = open_dir(path)) < 0 || (r = btrfs_subvol_set_readonly(snap, true)) < 0)
                return r < 0 ? r : snap;
        return 0;
}

/* disk is replaced in two renames; recover() finishes or undoes the swap after a crash. */
static int btrfs_restore(struct storage *s, const char *env_dir, const char *snapshot,
                         uint64_t disk_bytes)
{
        _cleanup_close_ int env = open_dir(env_dir);
        if (env < 0)
                return env;
        rm_rf_at(env, ".restore-new");
        int r = snapshot_into(s, snapshot, env_dir, ".restore-new", disk_bytes);
        if (r < 0)
                return r;
        if (renameat(env, "disk", env, ".restore-old") < 0)
                return -errno;
        test_crash_point("restore-swap");
        if (renameat(env, ".restore-new", env, "disk") < 0)
                return -errno;
        return rm_rf_at(env, ".restore-old");
}

static int btrfs_recover(struct storage *s, const char *env_dir)
{
        _cleanup_close_ int env = open_dir(env_dir);
        if (env < 0)
                return env;
        struct stat st;
        bool have_disk = fstatat(env, "disk", &st, AT_SYMLINK_NOFOLLOW) == 0;
        if (!have_disk && fstatat(env, ".restore-new", &st, AT_SYMLINK_NOFOLLOW) == 0 &&
            renameat(env, ".restore-new", env, "disk") < 0)
                return -errno;
        int r = rm_rf_at(env, ".restore-new");
        int q = rm_rf_at(env, ".restore-old");
        return r < 0 ? r : q;
}

static int btrfs_destroy(struct storage *s, const char *env_dir)
{
        return 0; /* rm_rf_at deletes subvolumes */
}

static int split_path(const char *path, char *dir, size_t len, const char **ret_base)
{
        const char *slash = strrchr(path, '/');
        if (!slash || (size_t)(slash - path) >= len)
                return -EINVAL;
        memcpy(dir, path, (size_t)(slash - path));
        dir[slash - path] = 0;
        *ret_base = slash + 1;
        return 0;
}

static int btrfs_image_prepare(struct storage *s, const char *rootfs)
{
        char dir[4096];
        const char *base;
        int r = split_path(rootfs, dir, sizeof(dir), &base);
        if (r < 0)
                return r;
        _cleanup_close_ int d = open_dir(dir);
        if (d < 0)
                return d;
        if ((r = btrfs_subvol_create(d, base)) < 0)
                return r;
        if (fchmodat(d, base, 0755, 0) < 0)
                return -errno;
        /* A decompression bomb (from an archive or a registry) stops at the image limit with
         * EDQUOT instead of filling the pool every environment writes to. */
        uint64_t limit = s->image_max_bytes ? s->image_max_bytes : storage_info(s).size / 2;
        if (!limit)
                return 0;
        _cleanup_close_ int fd = openat(d, base, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        uint64_t id;
        if ((r = btrfs_subvol_id(fd, &id)) < 0)
                return r;
        return btrfs_qgroup_limit(fd, id, limit);
}

static int btrfs_image_seal(struct storage *s, const char *rootfs)
{
        _cleanup_close_ int fd = open_dir(rootfs);
        if (fd < 0)
                return fd;
        return btrfs_subvol_set_readonly(fd, true);
}

static int btrfs_root(struct storage *s, const char *env_dir, struct rootfs_config *rc, char *buf,
                      size_t len)
{
        int r = buf_printf(buf, len, "%s/disk", env_dir);
        if (r < 0)
                return r;
        rc->tree = buf;
        rc->shifted = s->info.shifted;
        return 0;
}

const struct storage_ops storage_btrfs_ops = {
        .name = "btrfs",
        .open = btrfs_open,
        .env_create = btrfs_env_create,
        .env_clone = btrfs_env_clone,
        .snapshot = btrfs_take_snapshot,
        .restore = btrfs_restore,
        .set_quota = btrfs_set_quota,
        .usage = btrfs_usage,
        .destroy = btrfs_destroy,
        .recover = btrfs_recover,
        .prepare_spare = btrfs_prepare_spare,
        .spare_target = btrfs_spare_target,
        .drop_spares = btrfs_drop_spares,
        .image_prepare = btrfs_image_prepare,
        .image_seal = btrfs_image_seal,
        .root = btrfs_root,
};

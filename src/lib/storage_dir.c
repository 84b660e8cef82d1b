/* The dir driver: plain directories and overlayfs, for hosts without btrfs. An image is a
 * directory; a computer is an overlay of its idmapped image (lower) and its own upper
 * directory, which holds only what it changed. The upper directory is not idmapped (overlayfs
 * writes there with the mounter's credentials), so its files belong to the environment's host
 * id range. No copy-on-write snapshots: snapshot, fork and commit need the btrfs driver.
 *
 * A disk limit is a sparse ext4 image per computer (env_dir/disk.img, mkfs.ext4 once, ~10 ms),
 * loop-mounted at env_dir/disk, which then holds upper/ and work/: the filesystem's size is the
 * limit and its inode table bounds the number of files. It stays mounted while the
 * environment exists (also across daemon restarts; remounted after a reboot) and can grow
 * while the computer is stopped, never shrink. */
#include "lib/loopdev.h"
#include "lib/storage.h"
#include "lib/util.h"

#include <linux/loop.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#ifndef EXT4_IOC_RESIZE_FS
#define EXT4_IOC_RESIZE_FS _IOW('f', 16, uint64_t)
#endif

static int path_in(char *buf, size_t len, const char *dir, const char *name)
{
        int r = buf_printf(buf, len, "%s/%s", dir, name);
        return r < 0 ? r : 0;
}

static bool has_disk_image(const char *env_dir)
{
        char img[4200];
        return path_in(img, sizeof(img), env_dir, "disk.img") >= 0 && access(img, F_OK) == 0;
}

static bool is_mount_point(const char *path)
{
        struct statx sx;
        return statx(AT_FDCWD, path, AT_SYMLINK_NOFOLLOW, STATX_INO, &sx) == 0 &&
               (sx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) &&
               (sx.stx_attributes & STATX_ATTR_MOUNT_ROOT);
}

/* Attach env_dir/disk.img and mount it on env_dir/disk (made if missing). */
static int mount_disk(const char *env_dir)
{
        char img[4200], mnt[4200], dev[64];
        int r;
        if ((r = path_in(img, sizeof(img), env_dir, "disk.img")) < 0 ||
            (r = path_in(mnt, sizeof(mnt), env_dir, "disk")) < 0)
                return r;
        if (mkdir(mnt, 0700) < 0 && errno != EEXIST)
                return -errno;
        if (is_mount_point(mnt))
                return 0;
        _cleanup_close_ int hold = -EBADF;
        r = loopdev_find(img, dev, sizeof(dev));
        if (r == -ENOENT)
                r = loopdev_attach(img, dev, sizeof(dev), &hold);
        if (r < 0)
                return r;
        return mount(dev, mnt, "ext4", MS_NOATIME | MS_NODEV, NULL) < 0 ? -errno : 0;
}

static int make_disk(const char *env_dir, uint32_t uid_base, uint64_t bytes)
{
        char img[4200], owner[64];
        int r = path_in(img, sizeof(img), env_dir, "disk.img");
        if (r < 0)
                return r;
        {
                _cleanup_close_ int fd = open(img, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
                if (fd < 0 || ftruncate(fd, (off_t)bytes) < 0)
                        return -errno;
        }
        if ((r = BUF_PRINTF(owner, "root_owner=%u:%u", uid_base, uid_base)) < 0)
                return r;
        const char *mkfs = access("/usr/sbin/mkfs.ext4", X_OK) == 0 ? "/usr/sbin/mkfs.ext4"
                                                                     : "/sbin/mkfs.ext4";
        /* No reserved blocks (the limit is the limit), no journal (a throw-away upper layer
         * does not need one and it would cost 4 MiB of a small disk). */
        const char *const argv[] = {mkfs, "-q", "-F", "-m", "0", "-O", "^has_journal", "-E",
                                    owner, img, NULL};
        if ((r = storage_run(argv)) < 0)
                return r;
        return mount_disk(env_dir);
}

static int dir_open(struct storage *s, char *err, size_t errlen)
{
        static const char *const subs[] = {"envs", "images"};
        for (size_t i = 0; i < ELEMENTSOF(subs); i++) {
                char p[2200];
                if (path_in(p, sizeof(p), s->root, subs[i]) < 0) {
                        snprintf(err, errlen, "%s: path too long", s->root);
                        return -ENAMETOOLONG;
                }
                if (mkdir(p, 0700) < 0 && errno != EEXIST) {
                        snprintf(err, errlen, "%s: %s", p, strerror(errno));
                        return -errno;
                }
        }
        s->info.pool = s->root;
        s->info.backing = "host directory";
        s->info.quota = "ext4 image per computer";
        s->info.live_disk_limits = false;
        s->info.idmapped = storage_probe_idmap(s->root);
        return 0;
}

static int dir_env_create(struct storage *s, const char *env_dir, const char *image_rootfs,
                          uint32_t uid_base, uint64_t disk_bytes)
{
        _cleanup_close_ int env = open(env_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (env < 0)
                return -errno;
        if (mkdirat(env, "lower", 0700) < 0)
                return -errno;
        int r;
        if (disk_bytes && (r = make_disk(env_dir, uid_base, disk_bytes)) < 0)
                return r;
        _cleanup_close_ int base = disk_bytes ? openat(env, "disk", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
                                              : fcntl(env, F_DUPFD_CLOEXEC, 3);
        if (base < 0)
                return -errno;
        if (mkdirat(base, "upper", 0755) < 0 || mkdirat(base, "work", 0700) < 0)
                return -errno;
        /* The upper layer's root is the environment's "/": owned by its root user. */
        if (fchownat(base, "upper", uid_base, uid_base, 0) < 0)
                return -errno;
        return 0;
}

static int dir_unsupported(void)
{
        return -EOPNOTSUPP;
}

static int dir_env_clone(struct storage *s, const char *src, const char *env_dir,
                         uint32_t src_base, uint32_t uid_base, uint64_t disk_bytes)
{
        return dir_unsupported();
}

static int dir_snapshot(struct storage *s, const char *env_dir, const char *dst_dir,
                        const char *name, uint32_t unshift_base)
{
        return dir_unsupported();
}

static int dir_restore(struct storage *s, const char *env_dir, const char *snapshot,
                       uint64_t disk_bytes)
{
        return dir_unsupported();
}

/* Grow the ext4 image of a stopped computer: unmount, grow file and filesystem, mount again.
 * (Online growth needs CAP_SYS_RESOURCE, which hosts like ours withhold even from root.) */
static int dir_set_quota(struct storage *s, const char *env_dir, uint64_t bytes)
{
        char img[4200], mnt[4200], dev[64];
        int r;
        if (!has_disk_image(env_dir))
                return bytes ? -EOPNOTSUPP : 0;
        if (!bytes)
                return -EOPNOTSUPP; /* its disk cannot stop being a filesystem of some size */
        if ((r = path_in(img, sizeof(img), env_dir, "disk.img")) < 0 ||
            (r = path_in(mnt, sizeof(mnt), env_dir, "disk")) < 0)
                return r;
        struct stat st;
        if (stat(img, &st) < 0)
                return -errno;
        if (bytes < (uint64_t)st.st_size)
                return -EOPNOTSUPP;
        if (bytes == (uint64_t)st.st_size)
                return 0;
        if (is_mount_point(mnt) && umount(mnt) < 0)
                return -errno;
        /* The loop device leaves with its last user, a moment later. */
        for (int i = 0; i < 200 && loopdev_find(img, dev, sizeof(dev)) == 0; i++)
                usleep(10 * 1000);
        if (truncate(img, (off_t)bytes) < 0)
                r = -errno;
        const char *const fsck[] = {"/usr/sbin/e2fsck", "-f", "-p", img, NULL};
        const char *const resize[] = {"/usr/sbin/resize2fs", img, NULL};
        if (r >= 0)
                r = storage_run(fsck);
        if (r >= 0)
                r = storage_run(resize);
        int q = mount_disk(env_dir);
        return r < 0 ? r : q;
}

static int dir_usage(struct storage *s, const char *env_dir, uint64_t *ret_bytes)
{
        char mnt[4200];
        struct statvfs sv;
        int r = path_in(mnt, sizeof(mnt), env_dir, "disk");
        if (r < 0)
                return r;
        if (!has_disk_image(env_dir) || statvfs(mnt, &sv) < 0)
                return -EOPNOTSUPP;
        *ret_bytes = (uint64_t)(sv.f_blocks - sv.f_bfree) * sv.f_frsize;
        return 0;
}

/* Before rm -rf: the mount of its disk (lazily: a dying environment may still hold it; the
 * loop device goes with the last user). */
static int dir_destroy(struct storage *s, const char *env_dir)
{
        char mnt[4200];
        int r = path_in(mnt, sizeof(mnt), env_dir, "disk");
        if (r < 0)
                return r;
        if (is_mount_point(mnt) && umount2(mnt, MNT_DETACH) < 0)
                return -errno;
        return 0;
}

/* After a reboot the disk of a computer is mounted again. */
static int dir_recover(struct storage *s, const char *env_dir)
{
        return has_disk_image(env_dir) ? mount_disk(env_dir) : 0;
}

static int dir_image_prepare(struct storage *s, const char *rootfs)
{
        return mkdir(rootfs, 0755) < 0 ? -errno : 0;
}

static int dir_image_seal(struct storage *s, const char *rootfs)
{
        return 0;
}

static int dir_root(struct storage *s, const char *env_dir, struct rootfs_config *rc, char *buf,
                    size_t len)
{
        rc->tree = NULL; /* overlay of env_dir/lower and upper, work in env_dir or its disk */
        if (!has_disk_image(env_dir))
                return 0;
        int r = path_in(buf, len, env_dir, "disk");
        if (r < 0)
                return r;
        rc->overlay_dir = buf;
        return mount_disk(env_dir);
}

const struct storage_ops storage_dir_ops = {
        .name = "dir",
        .open = dir_open,
        .env_create = dir_env_create,
        .env_clone = dir_env_clone,
        .snapshot = dir_snapshot,
        .restore = dir_restore,
        .set_quota = dir_set_quota,
        .usage = dir_usage,
        .destroy = dir_destroy,
        .recover = dir_recover,
        .image_prepare = dir_image_prepare,
        .image_seal = dir_image_seal,
        .root = dir_root,
};

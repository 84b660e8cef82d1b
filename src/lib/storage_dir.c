/* The dir driver: plain directories and overlayfs, for hosts without btrfs. An image is a
 * directory; a computer is an overlay of its idmapped image (lower) and its own upper
 * directory, which holds only what it changed. The upper directory is not idmapped (overlayfs
 * writes there with the mounter's credentials), so its files belong to the environment's host
 * id range. No copy-on-write snapshots: snapshot, fork and commit need the btrfs driver. */
#include "lib/storage.h"
#include "lib/util.h"

#include <sys/stat.h>

static int dir_open(struct storage *s, char *err, size_t errlen)
{
        static const char *const subs[] = {"envs", "images"};
        for (size_t i = 0; i < ELEMENTSOF(subs); i++) {
                char p[2200];
                snprintf(p, sizeof(p), "%s/%s", s->root, subs[i]);
                if (mkdir(p, 0700) < 0 && errno != EEXIST) {
                        snprintf(err, errlen, "%s: %s", p, strerror(errno));
                        return -errno;
                }
        }
        s->info.pool = s->root;
        s->info.backing = "host directory";
        s->info.quota = "none (the dir driver has no disk limits)";
        s->info.idmapped = storage_probe_idmap(s->root);
        return 0;
}

static int dir_env_create(struct storage *s, const char *env_dir, const char *image_rootfs,
                          uint32_t uid_base, uint64_t disk_bytes)
{
        if (disk_bytes)
                return -EOPNOTSUPP;
        _cleanup_close_ int env = open(env_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (env < 0)
                return -errno;
        if (mkdirat(env, "lower", 0700) < 0 || mkdirat(env, "upper", 0755) < 0 ||
            mkdirat(env, "work", 0700) < 0)
                return -errno;
        /* The upper layer's root is the environment's "/": owned by its root user. */
        if (fchownat(env, "upper", uid_base, uid_base, 0) < 0)
                return -errno;
        return 0;
}

static int dir_unsupported(void)
{
        return -EOPNOTSUPP;
}

static int dir_env_clone(struct storage *s, const char *src, const char *env_dir,
                         uint64_t disk_bytes)
{
        return dir_unsupported();
}

static int dir_snapshot(struct storage *s, const char *env_dir, const char *dst_dir,
                        const char *name)
{
        return dir_unsupported();
}

static int dir_restore(struct storage *s, const char *env_dir, const char *snapshot,
                       uint64_t disk_bytes)
{
        return dir_unsupported();
}

static int dir_set_quota(struct storage *s, const char *env_dir, uint64_t bytes)
{
        return bytes ? dir_unsupported() : 0;
}

static int dir_usage(struct storage *s, const char *env_dir, uint64_t *ret_bytes)
{
        return -EOPNOTSUPP;
}

static int dir_nothing(struct storage *s, const char *env_dir)
{
        return 0;
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
        rc->tree = NULL; /* overlay of env_dir/{lower,upper,work} */
        return 0;
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
        .destroy = dir_nothing,
        .recover = dir_nothing,
        .image_prepare = dir_image_prepare,
        .image_seal = dir_image_seal,
        .root = dir_root,
};

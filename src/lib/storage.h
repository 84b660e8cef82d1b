/* Storage drivers: where environments' disks live and how they are copied.
 *
 * A small ops table (as LXC's storage backends) behind one interface; the engine never knows
 * which driver it talks to. Layout under the state directory R, the same for both drivers:
 *   R/images/NAME/rootfs   an image (btrfs: a read-only subvolume)
 *   R/envs/NAME/           an environment's directory; its writable tree is
 *                          disk/ (btrfs: a subvolume) or upper/ + work/ (dir: overlayfs)
 *   R/envs/NAME/snapshots/SNAP   read-only snapshots (btrfs)
 * With btrfs, R/images and R/envs are symlinks into the pool (R/pool), which is the host
 * filesystem when R is on btrfs, else a sparse file R/pool.img loop-mounted at R/pool.
 *
 * Files on disk stay owned by ids 0..65535; environments see them through idmapped mounts.
 * Library code: no logging; every failure is -errno plus a message in err. */
#pragma once
#include "lib/rootfs.h"

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>

struct storage_config {
        const char *root;    /* state directory (absolute, resolved) */
        const char *driver;  /* "btrfs", "dir", or NULL: what R already uses, else btrfs */
        uint64_t pool_bytes; /* size of a new pool file; 0 = default */
        uint64_t image_max_bytes; /* what one image may hold on disk; 0 = default */
};

struct storage_info {
        const char *driver;     /* "btrfs" | "dir" */
        const char *pool;       /* where the pool is mounted (btrfs) or R */
        const char *backing;    /* "pool file" | "host btrfs" | "host directory" */
        const char *quota;      /* "simple quotas" | "qgroups" | "ext4 image per environment" */
        uint64_t size, used;    /* bytes of the pool's filesystem */
        bool idmapped;          /* idmapped mounts work on the pool */
        bool live_disk_limits;  /* a running computer's disk limit can change */
        bool shifted;           /* no idmapped mounts: trees are chowned to each env's range */
};

struct storage;

struct storage_ops {
        const char *name;
        int (*open)(struct storage *s, char *err, size_t errlen);
        /* The writable tree of a new computer in env_dir, a copy of image_rootfs. */
        int (*env_create)(struct storage *s, const char *env_dir, const char *image_rootfs,
                          uint32_t uid_base, uint64_t disk_bytes);
        /* The writable tree of a new computer, a copy of src (an env dir's tree or a snapshot). */
        int (*env_clone)(struct storage *s, const char *src, const char *env_dir,
                         uint32_t src_base, uint32_t uid_base, uint64_t disk_bytes);
        /* A read-only copy of env_dir's tree as dst_dir/name; with ownership shifting and
         * unshift_base set (commit), its owners go back from that range to 0..65535. */
        int (*snapshot)(struct storage *s, const char *env_dir, const char *dst_dir,
                        const char *name, uint32_t unshift_base);
        /* Replace env_dir's tree by a writable copy of snapshot. */
        int (*restore)(struct storage *s, const char *env_dir, const char *snapshot,
                       uint64_t disk_bytes);
        int (*set_quota)(struct storage *s, const char *env_dir, uint64_t bytes);
        int (*usage)(struct storage *s, const char *env_dir, uint64_t *ret_bytes);
        /* Undo what rm -rf of env_dir cannot (mounts); then the caller removes env_dir. */
        int (*destroy)(struct storage *s, const char *env_dir);
        /* At startup: finish or roll back a half-done restore, remount what a reboot lost. */
        int (*recover)(struct storage *s, const char *env_dir);
        /* Make ahead of time what env_create needs for image_rootfs, so that a create finds it
         * ready (btrfs: a spare snapshot; renaming it into place commits no transaction).
         * NULL where nothing helps. drop_spares: forget them all (an image goes away). */
        int (*prepare_spare)(struct storage *s, const char *image_rootfs);
        /* prepare_spare in two halves, so that a process made at start-up can do the slow one
         * without a fork of the daemon per computer: the image's subvolume and the spares
         * directory opened and the spare's name chosen; 1 (nothing opened) when there is
         * nothing to make. The caller then makes the spare with btrfs_snapshot(*ret_from,
         * *ret_dir, name, false) and closes both. */
        int (*spare_target)(struct storage *s, const char *image_rootfs, int *ret_from,
                            int *ret_dir, char name[static 32]);
        void (*drop_spares)(struct storage *s);
        int (*image_prepare)(struct storage *s, const char *rootfs);
        int (*image_seal)(struct storage *s, const char *rootfs);
        /* How a computer's root is mounted (fills the rootfs_config fields of the driver). */
        int (*root)(struct storage *s, const char *env_dir, struct rootfs_config *rc,
                    char *buf, size_t len);
};

struct storage {
        const struct storage_ops *ops;
        char root[2048];
        char pool[2100];
        uint64_t pool_bytes;
        uint64_t image_max_bytes; /* 0: no limit */
        struct storage_info info;
        char quota_mode[32];
};

extern const struct storage_ops storage_btrfs_ops;
extern const struct storage_ops storage_dir_ops;

int storage_open(const struct storage_config *c, struct storage **ret, char *err, size_t errlen);
void storage_free(struct storage *s);
/* Current figures (size/used change). */
struct storage_info storage_info(struct storage *s);
/* Whether the driver can snapshot, fork and commit. */
bool storage_can_snapshot(const struct storage *s);

/* When the tree at path (a snapshot) was made. */
int storage_created_at(const char *path, int64_t *ret_sec);
/* Run argv (absolute program path) and wait; its output goes to /dev/null. */
int storage_run(const char *const *argv);
/* chown every inode below path (not following symlinks, not leaving its filesystem) whose
 * owner or group lies in from..from+65535 to the same place in to..to+65535, keeping setuid and
 * setgid bits. Hard links are seen twice but moved once. */
int storage_shift_tree(const char *path, uint32_t from, uint32_t to);
/* Does idmapping a mount of path work here (kernel and filesystem)? */
bool storage_probe_idmap(const char *path);

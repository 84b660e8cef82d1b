#include "lib/btrfs.h"
#include "lib/util.h"

#include <linux/btrfs.h>
#include <linux/btrfs_tree.h>
#include <linux/magic.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/vfs.h>

/* Linux 6.7; Debian 12's headers predate it. */
#ifndef BTRFS_QUOTA_CTL_ENABLE_SIMPLE_QUOTA
#define BTRFS_QUOTA_CTL_ENABLE_SIMPLE_QUOTA 4
#endif

bool btrfs_is_btrfs(int fd)
{
        struct statfs sf;
        return fstatfs(fd, &sf) == 0 && sf.f_type == BTRFS_SUPER_MAGIC;
}

bool btrfs_is_subvolume(int fd)
{
        struct stat st;
        return fstat(fd, &st) == 0 && S_ISDIR(st.st_mode) &&
               st.st_ino == BTRFS_FIRST_FREE_OBJECTID && btrfs_is_btrfs(fd);
}

static int set_name(char *dst, size_t len, const char *name)
{
        if (!name || !*name || strchr(name, '/') || strlen(name) >= len || !strcmp(name, ".") ||
            !strcmp(name, ".."))
                return -EINVAL;
        strcpy(dst, name);
        return 0;
}

int btrfs_subvol_create(int dirfd, const char *name)
{
        struct btrfs_ioctl_vol_args_v2 a = {0};
        int r = set_name(a.name, sizeof(a.name), name);
        if (r < 0)
                return r;
        return ioctl(dirfd, BTRFS_IOC_SUBVOL_CREATE_V2, &a) < 0 ? -errno : 0;
}

int btrfs_snapshot(int src_fd, int dirfd, const char *name, bool rdonly)
{
        struct btrfs_ioctl_vol_args_v2 a = {.fd = src_fd, .flags = rdonly ? BTRFS_SUBVOL_RDONLY : 0};
        int r = set_name(a.name, sizeof(a.name), name);
        if (r < 0)
                return r;
        return ioctl(dirfd, BTRFS_IOC_SNAP_CREATE_V2, &a) < 0 ? -errno : 0;
}

int btrfs_subvol_delete(int dirfd, const char *name)
{
        struct btrfs_ioctl_vol_args a = {0};
        int r = set_name(a.name, sizeof(a.name), name);
        if (r < 0)
                return r;
        return ioctl(dirfd, BTRFS_IOC_SNAP_DESTROY, &a) < 0 ? -errno : 0;
}

int btrfs_subvol_set_readonly(int fd, bool rdonly)
{
        uint64_t flags;
        if (ioctl(fd, BTRFS_IOC_SUBVOL_GETFLAGS, &flags) < 0)
                return -errno;
        flags = rdonly ? flags | BTRFS_SUBVOL_RDONLY : flags & ~(uint64_t)BTRFS_SUBVOL_RDONLY;
        return ioctl(fd, BTRFS_IOC_SUBVOL_SETFLAGS, &flags) < 0 ? -errno : 0;
}

int btrfs_subvol_id(int fd, uint64_t *ret_id)
{
        struct btrfs_ioctl_ino_lookup_args a = {.treeid = 0, .objectid = BTRFS_FIRST_FREE_OBJECTID};
        if (ioctl(fd, BTRFS_IOC_INO_LOOKUP, &a) < 0)
                return -errno;
        *ret_id = a.treeid;
        return 0;
}

int btrfs_quota_enable(int fd, bool simple)
{
        struct btrfs_ioctl_quota_ctl_args a = {
                .cmd = simple ? BTRFS_QUOTA_CTL_ENABLE_SIMPLE_QUOTA : BTRFS_QUOTA_CTL_ENABLE};
        return ioctl(fd, BTRFS_IOC_QUOTA_CTL, &a) < 0 ? -errno : 0;
}

int btrfs_qgroup_limit(int fd, uint64_t subvol_id, uint64_t bytes)
{
        /* (u64)-1 is the kernel's "clear this limit". */
        uint64_t v = bytes ? bytes : (uint64_t)-1;
        struct btrfs_ioctl_qgroup_limit_args a = {
                .qgroupid = subvol_id, /* level 0: the id itself */
                .lim = {.flags = BTRFS_QGROUP_LIMIT_MAX_RFER | BTRFS_QGROUP_LIMIT_MAX_EXCL,
                        .max_rfer = v,
                        .max_excl = v},
        };
        return ioctl(fd, BTRFS_IOC_QGROUP_LIMIT, &a) < 0 ? -errno : 0;
}

int btrfs_qgroup_usage(int fd, uint64_t subvol_id, uint64_t *ret_bytes)
{
        /* One item: (0, QGROUP_INFO, subvol_id) in the quota tree. */
        struct btrfs_ioctl_search_args a = {
                .key = {.tree_id = BTRFS_QUOTA_TREE_OBJECTID,
                        .min_objectid = 0,
                        .max_objectid = 0,
                        .min_type = BTRFS_QGROUP_INFO_KEY,
                        .max_type = BTRFS_QGROUP_INFO_KEY,
                        .min_offset = subvol_id,
                        .max_offset = subvol_id,
                        .max_transid = (uint64_t)-1,
                        .nr_items = 1},
        };
        if (ioctl(fd, BTRFS_IOC_TREE_SEARCH, &a) < 0)
                return -errno;
        if (a.key.nr_items < 1)
                return -ENOENT;
        const struct btrfs_ioctl_search_header *h = (const void *)a.buf;
        if (h->len < sizeof(struct btrfs_qgroup_info_item))
                return -EIO;
        const struct btrfs_qgroup_info_item *item = (const void *)(a.buf + sizeof(*h));
        *ret_bytes = le64toh(item->rfer);
        return 0;
}

int btrfs_subvol_otime(int fd, int64_t *ret_sec)
{
        struct btrfs_ioctl_get_subvol_info_args a;
        memset(&a, 0, sizeof(a));
        if (ioctl(fd, BTRFS_IOC_GET_SUBVOL_INFO, &a) < 0)
                return -errno;
        *ret_sec = (int64_t)a.otime.sec;
        return 0;
}

int btrfs_sync(int fd)
{
        return ioctl(fd, BTRFS_IOC_SYNC, 0) < 0 ? -errno : 0;
}

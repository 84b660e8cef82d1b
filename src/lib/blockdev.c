#include "lib/blockdev.h"
#include "lib/btrfs.h"
#include "lib/util.h"

#include <linux/btrfs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

/* btrfs: the one member device's node, e.g. /dev/loop3. */
static int btrfs_member(int fd, dev_t *ret)
{
        struct btrfs_ioctl_fs_info_args fi = {0};
        if (ioctl(fd, BTRFS_IOC_FS_INFO, &fi) < 0)
                return -errno;
        if (fi.num_devices != 1)
                return -EXDEV;
        for (uint64_t id = 1; id <= fi.max_id; id++) {
                struct btrfs_ioctl_dev_info_args di = {.devid = id};
                if (ioctl(fd, BTRFS_IOC_DEV_INFO, &di) < 0) {
                        if (errno == ENODEV)
                                continue;
                        return -errno;
                }
                struct stat st;
                if (stat((const char *)di.path, &st) < 0)
                        return -errno;
                if (!S_ISBLK(st.st_mode))
                        return -ENODEV;
                *ret = st.st_rdev;
                return 0;
        }
        return -ENODEV;
}

/* A partition's disk: /sys/dev/block/M:m/partition exists, and ../dev names the disk. */
static dev_t whole_disk(dev_t d)
{
        char path[128], buf[32];
        snprintf(path, sizeof(path), "/sys/dev/block/%u:%u/partition", major(d), minor(d));
        if (access(path, F_OK) < 0)
                return d;
        snprintf(path, sizeof(path), "/sys/dev/block/%u:%u/../dev", major(d), minor(d));
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return d;
        ssize_t n = read(fd, buf, sizeof(buf) - 1);
        if (n <= 0)
                return d;
        buf[n] = 0;
        unsigned ma, mi;
        if (sscanf(buf, "%u:%u", &ma, &mi) != 2)
                return d;
        return makedev(ma, mi);
}

int blockdev_of_path(const char *path, dev_t *ret)
{
        _cleanup_close_ int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        struct stat st;
        if (fstat(fd, &st) < 0)
                return -errno;
        dev_t d = st.st_dev;
        if (btrfs_is_btrfs(fd)) {
                int r = btrfs_member(fd, &d);
                if (r < 0)
                        return r;
        } else if (major(d) == 0)
                return -ENODEV;
        char sys[128];
        snprintf(sys, sizeof(sys), "/sys/dev/block/%u:%u", major(d), minor(d));
        if (access(sys, F_OK) < 0)
                return -ENODEV;
        *ret = whole_disk(d);
        return 0;
}

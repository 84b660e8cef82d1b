/* Which block device carries the writes made below a path: what disk I/O limits (io.max,
 * blkio.throttle.*) must name. */
#pragma once
#include <sys/types.h>

/* The whole-disk block device behind the file system holding path: st_dev for ordinary block
 * file systems (ext4 on a loop device, xfs on a disk), the member device for btrfs (whose st_dev
 * is an anonymous number; a multi-device btrfs gives -EXDEV), and a partition's parent disk
 * (throttling applies to whole disks). -ENODEV for file systems without one (tmpfs, overlayfs
 * where the caller should ask about the upper layer). */
int blockdev_of_path(const char *path, dev_t *ret);

/* Loop devices through the kernel interface alone (LOOP_CTL_GET_FREE + LOOP_CONFIGURE, no
 * losetup). Devices are attached with autoclear: the kernel detaches them when the last user
 * (a mounted filesystem) lets go, so an unmount is the whole cleanup. */
#pragma once
#include <stddef.h>

/* Attach the regular file at path to a free loop device; its path goes into ret_dev and an
 * open fd of it into ret_fd: keep that open until the device is mounted, or autoclear detaches
 * it at once. */
int loopdev_attach(const char *path, char *ret_dev, size_t len, int *ret_fd);
/* The loop device that already has path (by its resolved name) as its backing file;
 * -ENOENT if none. */
int loopdev_find(const char *path, char *ret_dev, size_t len);
/* Detach dev (LOOP_CLR_FD); with autoclear set this only marks it for detaching. */
int loopdev_detach(const char *dev);

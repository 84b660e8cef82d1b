#include "lib/loopdev.h"
#include "lib/util.h"

#include <dirent.h>
#include <limits.h>
#include <linux/loop.h>
#include <sys/ioctl.h>

int loopdev_attach(const char *path, char *ret_dev, size_t len, int *ret_fd)
{
        _cleanup_close_ int file = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
        if (file < 0)
                return -errno;
        _cleanup_close_ int ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
        if (ctl < 0)
                return -errno;
        /* Another process may take the same free device between the two calls: retry. */
        for (int attempt = 0; attempt < 16; attempt++) {
                int n = ioctl(ctl, LOOP_CTL_GET_FREE);
                if (n < 0)
                        return -errno;
                char dev[32];
                if (BUF_PRINTF(dev, "/dev/loop%d", n) < 0)
                        return -ENAMETOOLONG;
                _cleanup_close_ int lfd = open(dev, O_RDWR | O_CLOEXEC);
                if (lfd < 0)
                        return -errno;
                struct loop_config c = {
                        .fd = (unsigned)file,
                        .info = {.lo_flags = LO_FLAGS_AUTOCLEAR},
                };
                if (ioctl(lfd, LOOP_CONFIGURE, &c) < 0) {
                        if (errno == EBUSY)
                                continue;
                        return -errno;
                }
                if (strlen(dev) >= len)
                        return -ENAMETOOLONG;
                strcpy(ret_dev, dev);
                *ret_fd = TAKE_FD(lfd);
                return 0;
        }
        return -EBUSY;
}

int loopdev_find(const char *path, char *ret_dev, size_t len)
{
        _cleanup_free_ char *want = realpath(path, NULL);
        if (!want)
                return -errno;
        _cleanup_closedir_ DIR *d = NULL;
        int r = opendir_at(AT_FDCWD, "/sys/block", &d);
        if (r < 0)
                return r;
        r = -ENOENT;
        FOREACH_DIRENT(de, d)
        {
                if (strncmp(de->d_name, "loop", 4) != 0)
                        continue;
                char p[300];
                if (BUF_PRINTF(p, "%s/loop/backing_file", de->d_name) < 0)
                        continue;
                char *s = NULL;
                if (read_file_at(dirfd(d), p, PATH_MAX + 2, &s) < 0)
                        continue;
                s[strcspn(s, "\n")] = 0;
                bool match = strcmp(s, want) == 0;
                free(s);
                if (match) {
                        if (strlen(de->d_name) + 6 >= len) {
                                r = -ENAMETOOLONG;
                        } else {
                                snprintf(ret_dev, len, "/dev/%s", de->d_name);
                                r = 0;
                        }
                        break;
                }
        }
        return r;
}

int loopdev_detach(const char *dev)
{
        _cleanup_close_ int fd = open(dev, O_RDWR | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        return ioctl(fd, LOOP_CLR_FD) < 0 ? -errno : 0;
}

#include "lib/pty.h"
#include "lib/util.h"

#include <linux/openat2.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <termios.h>

#ifndef TIOCGPTPEER
#define TIOCGPTPEER _IO('T', 0x41)
#endif

int pty_open_here(int *ret_master, int *ret_slave)
{
        /* /dev/ptmx is a symlink the environment may replace: go to the devpts instance
         * directly, refusing symlinks and magic links, and without blocking on a FIFO. */
        struct open_how how = {
            .flags = O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC,
            .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
        };
        _cleanup_close_ int root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (root < 0)
                return -errno;
        _cleanup_close_ int master =
            (int)syscall(SYS_openat2, root, "dev/pts/ptmx", &how, sizeof(how));
        if (master < 0)
                return -errno;
        unsigned n;
        /* Only a real pty multiplexer answers TIOCGPTN. */
        if (ioctl(master, TIOCGPTN, &n) < 0)
                return -ENOTTY;
        int unlock = 0;
        if (ioctl(master, TIOCSPTLCK, &unlock) < 0)
                return -errno;
        int slave = ioctl(master, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
        if (slave < 0)
                return -errno;
        *ret_master = TAKE_FD(master);
        *ret_slave = slave;
        return 0;
}

int pty_set_size(int fd, unsigned cols, unsigned rows)
{
        if (cols == 0 || rows == 0)
                return 0;
        struct winsize ws = {.ws_row = (unsigned short)rows, .ws_col = (unsigned short)cols};
        return ioctl(fd, TIOCSWINSZ, &ws) < 0 ? -errno : 0;
}

int fd_send(int sock, int fd)
{
        char byte = 'F';
        struct iovec iov = {.iov_base = &byte, .iov_len = 1};
        union {
                char buf[CMSG_SPACE(sizeof(int))];
                struct cmsghdr align;
        } u = {};
        struct msghdr msg = {.msg_iov = &iov,
                             .msg_iovlen = 1,
                             .msg_control = u.buf,
                             .msg_controllen = sizeof(u.buf)};
        struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(cm), &fd, sizeof(int));
        for (;;) {
                if (sendmsg(sock, &msg, MSG_NOSIGNAL) == 1)
                        return 0;
                if (errno != EINTR)
                        return -errno;
        }
}

int fd_recv(int sock, int *ret_fd)
{
        char byte;
        struct iovec iov = {.iov_base = &byte, .iov_len = 1};
        union {
                char buf[CMSG_SPACE(sizeof(int) * 4)];
                struct cmsghdr align;
        } u;
        struct msghdr msg = {.msg_iov = &iov,
                             .msg_iovlen = 1,
                             .msg_control = u.buf,
                             .msg_controllen = sizeof(u.buf)};
        ssize_t n;
        do
                n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
        while (n < 0 && errno == EINTR);
        if (n < 0)
                return errno == EAGAIN || errno == EWOULDBLOCK ? -EAGAIN : -errno;
        if (n == 0)
                return -EPIPE;
        int fd = -EBADF, extra = 0;
        for (struct cmsghdr *cm = CMSG_FIRSTHDR(&msg); cm; cm = CMSG_NXTHDR(&msg, cm)) {
                if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
                        continue;
                size_t k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                for (size_t i = 0; i < k; i++) {
                        int f;
                        memcpy(&f, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
                        if (fd < 0)
                                fd = f;
                        else {
                                close(f);
                                extra++;
                        }
                }
        }
        if (fd < 0 || extra || (msg.msg_flags & MSG_CTRUNC) || byte != 'F') {
                if (fd >= 0)
                        close(fd);
                return -EBADMSG;
        }
        *ret_fd = fd;
        return 0;
}

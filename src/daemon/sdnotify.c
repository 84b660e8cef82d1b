/* sd_notify(3) by hand: see sdnotify.h. */
#include "daemon/sdnotify.h"
#include "lib/util.h"

#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static struct sockaddr_un notify_addr;
static socklen_t notify_len;

void sd_notify_init(void)
{
        const char *p = getenv("NOTIFY_SOCKET");
        size_t n = p ? strlen(p) : 0;
        /* A path, or an abstract name written with a leading '@'. */
        if (n >= 2 && n < sizeof(notify_addr.sun_path) && (p[0] == '/' || p[0] == '@')) {
                notify_addr.sun_family = AF_UNIX;
                memcpy(notify_addr.sun_path, p, n);
                if (p[0] == '@')
                        notify_addr.sun_path[0] = 0;
                notify_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n +
                                         (p[0] == '/'));
        }
        unsetenv("NOTIFY_SOCKET");
}

void sd_notify_send(const char *state)
{
        if (!notify_len)
                return;
        _cleanup_close_ int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return;
        (void)!sendto(fd, state, strlen(state), MSG_NOSIGNAL, (struct sockaddr *)&notify_addr,
                      notify_len);
}

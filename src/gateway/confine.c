/* Confinement of the gateway after start-up: Landlock denies every filesystem access (and TCP
 * bind/connect where the kernel knows them), and a seccomp allowlist keeps only the syscalls
 * of the event loop. The gateway already runs as its own uid with no capabilities and
 * no_new_privs (paddockd starts it so); these two walls mean that a bug in TLS or HTTP parsing
 * yields a process that can only shuffle bytes between sockets it already holds. */
#include "gateway/gateway.h"
#include "lib/util.h"

#include <linux/landlock.h>
#include <seccomp.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>

/* The installed uapi header may predate these (Debian 12 ships Landlock ABI 2). */
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)
#endif
#ifndef LANDLOCK_ACCESS_FS_IOCTL_DEV
#define LANDLOCK_ACCESS_FS_IOCTL_DEV (1ULL << 15)
#endif
#define ACCESS_NET_BIND_TCP    (1ULL << 0)
#define ACCESS_NET_CONNECT_TCP (1ULL << 1)
#define SCOPE_ABSTRACT_UNIX    (1ULL << 0)
#define SCOPE_SIGNAL           (1ULL << 1)

/* The ABI 6 layout of struct landlock_ruleset_attr; older kernels accept a shorter size. */
struct ruleset_attr {
        uint64_t handled_access_fs;
        uint64_t handled_access_net;
        uint64_t scoped;
};

int gw_landlock(void)
{
        long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
        if (abi <= 0)
                return -EOPNOTSUPP;
        struct ruleset_attr attr = {
                .handled_access_fs = (LANDLOCK_ACCESS_FS_MAKE_SYM << 1) - 1, /* ABI 1: bits 0..12 */
        };
        if (abi >= 2)
                attr.handled_access_fs |= LANDLOCK_ACCESS_FS_REFER;
        if (abi >= 3)
                attr.handled_access_fs |= LANDLOCK_ACCESS_FS_TRUNCATE;
        if (abi >= 5)
                attr.handled_access_fs |= LANDLOCK_ACCESS_FS_IOCTL_DEV;
        if (abi >= 4)
                attr.handled_access_net = ACCESS_NET_BIND_TCP | ACCESS_NET_CONNECT_TCP;
        if (abi >= 6)
                attr.scoped = SCOPE_ABSTRACT_UNIX | SCOPE_SIGNAL;
        size_t size = abi >= 6 ? sizeof(attr) : abi >= 4 ? 2 * sizeof(uint64_t) : sizeof(uint64_t);
        /* No rules: every handled access is denied. */
        _cleanup_close_ int fd = (int)syscall(SYS_landlock_create_ruleset, &attr, size, 0);
        if (fd < 0)
                return -errno;
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                return -errno;
        if (syscall(SYS_landlock_restrict_self, fd, 0) < 0)
                return -errno;
        return (int)abi;
}

/* What the loop does after start-up, measured by running the integration test under strace:
 * epoll, accept4, reading and writing sockets (GnuTLS uses recvfrom/sendto), socketpair and
 * sendmsg for each engine connection, recvmsg on the control socket, time, randomness (GnuTLS
 * nonces, key shares), memory, and abort's path for a failed assertion. */
static const char *const allowed[] = {
        "read", "write", "readv", "writev", "recvfrom", "sendto", "recvmsg", "sendmsg",
        "close", "shutdown", "accept4", "epoll_wait", "epoll_pwait", "epoll_pwait2", "epoll_ctl",
        "clock_gettime", "clock_getres", "gettimeofday", "time", "getrandom", "futex", "brk",
        "mmap", "munmap", "mremap", "mprotect", "madvise", "exit_group", "exit", "rt_sigreturn",
        "rt_sigprocmask", "restart_syscall", "getpid", "gettid", "tgkill",
};

static void releasep(scmp_filter_ctx *ctx)
{
        if (*ctx)
                seccomp_release(*ctx);
}

int gw_seccomp(void)
{
        __attribute__((cleanup(releasep))) scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_KILL_PROCESS);
        if (!ctx)
                return -ENOMEM;
        for (size_t i = 0; i < ELEMENTSOF(allowed); i++) {
                int nr = seccomp_syscall_resolve_name(allowed[i]);
                if (nr == __NR_SCMP_ERROR)
                        continue;
                int r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0);
                if (r < 0)
                        return r;
        }
        /* Only unix socketpairs, for the engine connections. */
        int r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socketpair), 2,
                                 SCMP_A0(SCMP_CMP_EQ, (uint64_t)AF_UNIX),
                                 SCMP_A1(SCMP_CMP_EQ, (uint64_t)(SOCK_STREAM | SOCK_CLOEXEC)));
        if (r < 0)
                return r;
        return seccomp_load(ctx);
}

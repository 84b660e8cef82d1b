/* Seccomp filters for the two confinement profiles, built with libseccomp.
 *
 * Both start from an allowlist modelled on Docker's default profile (moby
 * profiles/seccomp/default.json), written for x86_64 only: the filter holds the native
 * architecture alone and kills the process on any other (i386 `int $0x80`, x32), because every
 * compat ABI is a second, less-audited syscall table. Anything not listed fails with EPERM;
 * numbers above the newest syscall libseccomp knows fail with ENOSYS, so a libc that probes a
 * syscall newer than this list falls back instead of treating EPERM as a hard error.
 *
 * Arguments that the kernel truncates to 32 bits (socket's domain, personality) are compared
 * only with exact 64-bit equality or unsigned less-than, never "not equal": a value with junk in
 * the high half would pass a NE test and then be truncated by the kernel into the blocked one. */
#include "lib/confine.h"
#include "lib/util.h"

#include <linux/fs.h>
#include <sched.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <seccomp.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/personality.h>
#include <sys/socket.h>
#include <sys/ioctl.h>

/* What both profiles allow unconditionally: Docker's list minus io_uring (a large, often
 * exploited kernel surface that Docker itself later dropped) and minus what is gated per
 * profile below. Names libseccomp does not know are skipped at build time. */
static const char *const allow_common[] = {
        /* files and directories */
        "access", "chdir", "chmod", "chown", "close", "close_range", "copy_file_range", "creat",
        "dup", "dup2", "dup3", "faccessat", "faccessat2", "fadvise64", "fallocate", "fchdir",
        "fchmod", "fchmodat", "fchmodat2", "fchown", "fchownat", "fcntl", "fdatasync", "flock",
        "fstat", "fstatfs", "fsync", "ftruncate", "futimesat", "getcwd", "getdents", "getdents64",
        "lchown", "link", "linkat", "lseek", "lstat", "mkdir", "mkdirat", "mknod", "mknodat",
        "newfstatat", "open", "openat", "openat2", "pread64", "preadv", "preadv2", "pwrite64",
        "pwritev", "pwritev2", "read", "readahead", "readlink", "readlinkat", "readv", "rename",
        "renameat", "renameat2", "rmdir", "sendfile", "splice", "stat", "statfs", "statx",
        "symlink", "symlinkat", "sync", "sync_file_range", "syncfs", "tee", "truncate", "umask",
        "unlink", "unlinkat", "utime", "utimensat", "utimes", "vmsplice", "write", "writev",
        "cachestat",
        /* extended attributes */
        "fgetxattr", "flistxattr", "fremovexattr", "fsetxattr", "getxattr", "lgetxattr",
        "listxattr", "llistxattr", "lremovexattr", "lsetxattr", "removexattr", "setxattr",
        /* event notification and polling */
        "epoll_create", "epoll_create1", "epoll_ctl", "epoll_ctl_old", "epoll_pwait",
        "epoll_pwait2", "epoll_wait", "epoll_wait_old", "eventfd", "eventfd2", "fanotify_mark",
        "inotify_add_watch", "inotify_init", "inotify_init1", "inotify_rm_watch", "pipe",
        "pipe2", "poll", "ppoll", "pselect6", "select", "signalfd", "signalfd4", "timerfd_create",
        "timerfd_gettime", "timerfd_settime",
        /* POSIX AIO (io_uring is deliberately absent) */
        "io_cancel", "io_destroy", "io_getevents", "io_pgetevents", "io_setup", "io_submit",
        /* ioctl: allow_ioctl() */
        /* memory */
        "brk", "madvise", "map_shadow_stack", "membarrier", "memfd_create", "memfd_secret",
        "mincore", "mlock", "mlock2", "mlockall", "mmap", "mprotect", "mremap", "mseal", "msync",
        "munlock", "munlockall", "munmap", "pkey_alloc", "pkey_free", "pkey_mprotect",
        "remap_file_pages",
        /* processes, threads, signals */
        "arch_prctl", "capget", "capset", "execve", "execveat", "exit", "exit_group", "fork",
        "futex", "futex_requeue", "futex_wait", "futex_waitv", "futex_wake", "get_robust_list",
        "get_thread_area", "getcpu", "getitimer", "getpgid", "getpgrp", "getpid", "getppid",
        "getpriority", "getrlimit", "getrusage", "getsid", "gettid", "ioprio_get", "ioprio_set",
        "kill", "pause", "pidfd_open", "pidfd_send_signal", "prctl", "prlimit64",
        "process_mrelease", "restart_syscall", "rseq", "rt_sigaction", "rt_sigpending",
        "rt_sigprocmask", "rt_sigqueueinfo", "rt_sigreturn", "rt_sigsuspend", "rt_sigtimedwait",
        "rt_tgsigqueueinfo", "sched_get_priority_max", "sched_get_priority_min",
        "sched_getaffinity", "sched_getattr", "sched_getparam", "sched_getscheduler",
        "sched_rr_get_interval", "sched_setaffinity", "sched_setattr", "sched_setparam",
        "sched_setscheduler", "sched_yield", "seccomp", "set_robust_list", "set_thread_area",
        "set_tid_address", "setitimer", "setpgid", "setpriority", "setrlimit", "setsid",
        "sigaltstack", "tgkill", "tkill", "vfork", "wait4", "waitid",
        /* credentials: uid 0 of a user namespace switching among its own mapped ids */
        "getegid", "geteuid", "getgid", "getgroups", "getresgid", "getresuid", "getuid",
        "setfsgid", "setfsuid", "setgid", "setgroups", "setregid", "setresgid", "setresuid",
        "setreuid", "setuid",
        /* Landlock: allowed so a process may restrict itself further, and so the order of
         * seccomp and Landlock in confine_apply() does not matter */
        "landlock_add_rule", "landlock_create_ruleset", "landlock_restrict_self",
        /* time (setting the clock is left to CAP_SYS_TIME, which no profile has) */
        "adjtimex", "alarm", "clock_adjtime", "clock_getres", "clock_gettime",
        "clock_nanosleep", "gettimeofday", "nanosleep", "time", "timer_create", "timer_delete",
        "timer_getoverrun", "timer_gettime", "timer_settime", "times",
        /* sockets (socket(2) itself is filtered by family below) */
        "accept", "accept4", "bind", "connect", "getpeername", "getsockname", "getsockopt",
        "listen", "recvfrom", "recvmmsg", "recvmsg", "sendmmsg", "sendmsg", "sendto",
        "setsockopt", "shutdown", "socketpair",
        /* System V and POSIX IPC (private to the environment's IPC namespace) */
        "mq_getsetattr", "mq_notify", "mq_open", "mq_timedreceive", "mq_timedsend", "mq_unlink",
        "msgctl", "msgget", "msgrcv", "msgsnd", "semctl", "semget", "semop", "semtimedop",
        "shmat", "shmctl", "shmdt", "shmget",
        /* system information */
        "sysinfo", "uname",
};

/* Computers only: debuggers (gdb, strace) and what root of a full machine expects. The
 * kernel still applies its ptrace access checks; all of it stays inside the user namespace. */
static const char *const allow_computer[] = {
        "ptrace", "process_vm_readv", "process_vm_writev", "chroot", "name_to_handle_at",
        "modify_ldt",
};

/* personality(2) values Docker allows: query (0xffffffff), PER_LINUX, PER_LINUX32 and their
 * UNAME26 variants. Anything else (READ_IMPLIES_EXEC, ...) weakens memory protections. */
static const unsigned long personality_common[] = { 0x0, 0x8, 0x20000, 0x20008, 0xffffffff };

/* Every namespace flag clone(2) accepts. CLONE_NEWTIME shares its bit with the exit signal in
 * clone(2), so it is added only for unshare(2). */
#define CLONE_NS_FLAGS                                                                             \
        ((uint64_t)(CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC |                  \
                    CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET))
#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif

/* Syscall numbers above this are treated as "newer than the list" and answered with ENOSYS.
 * x86_64 numbers are below 512; the x32 range above is killed as a foreign ABI anyway. */
#define NR_SCAN_LIMIT 512

static void seccomp_releasep(scmp_filter_ctx *ctx)
{
        if (*ctx)
                seccomp_release(*ctx);
}

static int allow_names(scmp_filter_ctx ctx, const char *const *names, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                int nr = seccomp_syscall_resolve_name(names[i]);
                if (nr == __NR_SCMP_ERROR)
                        continue; /* unknown to this libseccomp: falls under the ENOSYS range */
                int r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int allow_personality(scmp_filter_ctx ctx, enum confine_profile p)
{
        for (size_t i = 0; i < ELEMENTSOF(personality_common); i++) {
                int r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(personality), 1,
                                         SCMP_A0(SCMP_CMP_EQ, personality_common[i]));
                if (r < 0)
                        return r;
        }
        if (p == PROFILE_COMPUTER) {
                /* gdb turns ASLR off for its inferior; the kernel clears this flag again on a
                 * setuid exec, so it cannot weaken a privileged program. */
                int r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(personality), 1,
                                         SCMP_A0(SCMP_CMP_EQ, (uint64_t)ADDR_NO_RANDOMIZE));
                if (r < 0)
                        return r;
        }
        return 0;
}

/* socket(2) for every family except AF_VSOCK (host/hypervisor sockets, as in Docker). Written
 * as "below 40" plus the known families above it, so a domain with high bits set is refused. */
static int allow_socket(scmp_filter_ctx ctx)
{
        int r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 1,
                                 SCMP_A0(SCMP_CMP_LT, (uint64_t)AF_VSOCK));
        if (r < 0)
                return r;
        for (uint64_t af = AF_VSOCK + 1; af < AF_MAX; af++) {
                r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 1,
                                     SCMP_A0(SCMP_CMP_EQ, af));
                if (r < 0)
                        return r;
        }
        return 0;
}

/* ioctl(2) with every request but
 * - TIOCSTI (push bytes into a terminal's input, as if typed) and TIOCLINUX (the console's
 *   selection paste does the same): a process must not type into a terminal, whoever reads it;
 * - btrfs' own ioctls (type 0x94): creating a subvolume or snapshot inside an environment would
 *   make a tree outside its disk quota (a new subvolume has a quota group of its own), and the
 *   rest (balance, devices, quotas, send) is host administration. The generic clone and dedupe
 *   ioctls that share the type stay: `cp --reflink` works and allocates nothing.
 *
 * The request is an unsigned int to the kernel, so only its low 32 bits may decide: junk in the
 * high half must not carry a refused request past an allow rule. libseccomp's comparisons (its
 * "32-bit" ones included) test all 64 bits except SCMP_CMP_MASKED_EQ, an unconditional allow
 * cannot be combined with a refusal for the same syscall, and allow rules are OR-ed. So the
 * allowed set is written as masked prefixes "(a1 & mask) == value": walking the bits (the type
 * byte first, so the whole btrfs type is one subtree), each subtree without a refused request
 * becomes one rule (about 45 rules). */
#define BTRFS_IOC_TYPE 0x94u
static const uint32_t ioctl_refused[] = {TIOCSTI, TIOCLINUX};
static const uint32_t ioctl_btrfs_shared[] = {FICLONE, FICLONERANGE, FIDEDUPERANGE};
static const int ioctl_bit_order[32] = {15, 14, 13, 12, 11, 10, 9, 8, 31, 30, 29, 28, 27, 26, 25, 24,
                                        23, 22, 21, 20, 19, 18, 17, 16, 7,  6,  5,  4,  3,  2,  1, 0};

static bool ioctl_subtree_refuses(uint32_t mask, uint32_t value)
{
        for (size_t i = 0; i < ELEMENTSOF(ioctl_refused); i++)
                if ((ioctl_refused[i] & mask) == value)
                        return true;
        if ((((BTRFS_IOC_TYPE << 8) ^ value) & mask & 0xff00u) != 0)
                return false; /* no request of the btrfs type in here */
        if (mask != 0xffffffffu)
                return true; /* two or more btrfs requests: not all of them shared ones */
        for (size_t i = 0; i < ELEMENTSOF(ioctl_btrfs_shared); i++)
                if (ioctl_btrfs_shared[i] == value)
                        return false;
        return true;
}

static int allow_ioctl_below(scmp_filter_ctx ctx, uint32_t mask, uint32_t value, int depth)
{
        if (!ioctl_subtree_refuses(mask, value))
                return seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(ioctl), 1,
                                        SCMP_A1(SCMP_CMP_MASKED_EQ, mask, value));
        if (depth == 32)
                return 0; /* exactly a refused request: the default action answers EPERM */
        uint32_t bit = 1u << ioctl_bit_order[depth];
        int r = allow_ioctl_below(ctx, mask | bit, value, depth + 1);
        if (r < 0)
                return r;
        return allow_ioctl_below(ctx, mask | bit, value | bit, depth + 1);
}

static int allow_ioctl(scmp_filter_ctx ctx)
{
        return allow_ioctl_below(ctx, 0, 0, 0);
}

/* Process creation: clone(2) without namespace flags; clone3(2) fails with ENOSYS because
 * its flags sit in memory a filter cannot read, and glibc then falls back to clone(2).
 * Computers may also unshare(2) non-namespace state (CLONE_FILES, CLONE_FS, CLONE_SYSVSEM);
 * sandboxes may not unshare at all. Neither may create a user namespace, which would hand
 * back a full capability set over fresh kernel attack surface. */
static int add_clone_rules(scmp_filter_ctx ctx, enum confine_profile p)
{
        int r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(clone), 1,
                                 SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_NS_FLAGS, 0));
        if (r < 0)
                return r;
        r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
        if (r < 0)
                return r;
        if (p == PROFILE_COMPUTER) {
                r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(unshare), 1,
                                     SCMP_A0(SCMP_CMP_MASKED_EQ,
                                             CLONE_NS_FLAGS | (uint64_t)CLONE_NEWTIME, 0));
                if (r < 0)
                        return r;
        }
        return 0;
}

/* ENOSYS for every number above the newest syscall this libseccomp can name. */
static int add_enosys_tail(scmp_filter_ctx ctx)
{
        int newest = 0;
        for (int nr = NR_SCAN_LIMIT - 1; nr >= 0; nr--) {
                char *name = seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE, nr);
                if (name) {
                        free(name);
                        newest = nr;
                        break;
                }
        }
        for (int nr = newest + 1; nr < NR_SCAN_LIMIT; nr++) {
                int r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), nr, 0);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int build_filter(enum confine_profile p, scmp_filter_ctx *ret)
{
        __attribute__((cleanup(seccomp_releasep))) scmp_filter_ctx ctx = NULL;
        int r;

        if (p != PROFILE_COMPUTER && p != PROFILE_SANDBOX)
                return -EINVAL;

        ctx = seccomp_init(SCMP_ACT_ERRNO(EPERM));
        if (!ctx)
                return -ENOMEM;

        /* seccomp_init() holds only the native arch; a foreign one kills the whole process
         * rather than a thread, so nothing half-dead keeps running. */
        r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
        if (r < 0)
                return r;
        /* no_new_privs is decided by confine_apply(), not as a side effect of loading:
         * computers must keep setuid binaries (su, sudo) working. */
        r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0);
        if (r < 0)
                return r;
        /* A binary tree keeps ~300 syscall rules at a handful of comparisons per call. */
        (void)seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2);
        /* Report the kernel's errno from seccomp_load() instead of -ECANCELED. */
        (void)seccomp_attr_set(ctx, SCMP_FLTATR_API_SYSRAWRC, 1);

        r = allow_names(ctx, allow_common, ELEMENTSOF(allow_common));
        if (r < 0)
                return r;
        if (p == PROFILE_COMPUTER) {
                r = allow_names(ctx, allow_computer, ELEMENTSOF(allow_computer));
                if (r < 0)
                        return r;
        }
        r = allow_personality(ctx, p);
        if (r < 0)
                return r;
        r = allow_socket(ctx);
        if (r < 0)
                return r;
        r = allow_ioctl(ctx);
        if (r < 0)
                return r;
        r = add_clone_rules(ctx, p);
        if (r < 0)
                return r;
        r = add_enosys_tail(ctx);
        if (r < 0)
                return r;

        *ret = TAKE_PTR(ctx);
        return 0;
}

/* Compiled BPF per profile. libseccomp compiles a filter in user space each time (several ms);
 * the daemon compiles both once at start and every fork inherits the result. */
static struct sock_filter *compiled[2];
static size_t compiled_len[2];

int seccomp_precompile(void)
{
        for (int p = 0; p < 2; p++) {
                __attribute__((cleanup(seccomp_releasep))) scmp_filter_ctx ctx = NULL;
                int r = build_filter((enum confine_profile)p, &ctx);
                if (r < 0)
                        return r;
                _cleanup_close_ int fd = memfd_create("seccomp-bpf", MFD_CLOEXEC);
                if (fd < 0)
                        return -errno;
                r = seccomp_export_bpf(ctx, fd);
                if (r < 0)
                        return r;
                off_t size = lseek(fd, 0, SEEK_END);
                if (size <= 0 || size % (off_t)sizeof(struct sock_filter) ||
                    size > (off_t)(BPF_MAXINSNS * sizeof(struct sock_filter)))
                        return -EIO;
                struct sock_filter *prog = malloc((size_t)size);
                if (!prog)
                        return -ENOMEM;
                if (pread(fd, prog, (size_t)size, 0) != size) {
                        free(prog);
                        return -EIO;
                }
                free(compiled[p]);
                compiled[p] = prog;
                compiled_len[p] = (size_t)size / sizeof(struct sock_filter);
        }
        return 0;
}

int seccomp_apply(enum confine_profile p)
{
        if ((p == PROFILE_COMPUTER || p == PROFILE_SANDBOX) && compiled[p]) {
                struct sock_fprog fprog = {.len = (unsigned short)compiled_len[p],
                                           .filter = compiled[p]};
                return syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &fprog) < 0 ? -errno : 0;
        }
        __attribute__((cleanup(seccomp_releasep))) scmp_filter_ctx ctx = NULL;
        int r = build_filter(p, &ctx);
        if (r < 0)
                return r;
        r = seccomp_load(ctx);
        return r < 0 ? r : 0;
}

int confine_export_pfc(enum confine_profile p, int fd)
{
        __attribute__((cleanup(seccomp_releasep))) scmp_filter_ctx ctx = NULL;
        int r = build_filter(p, &ctx);
        if (r < 0)
                return r;
        r = seccomp_export_pfc(ctx, fd);
        return r < 0 ? r : 0;
}

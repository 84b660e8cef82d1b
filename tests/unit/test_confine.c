/* Behavioural tests of the confinement profiles (caps, no_new_privs, Landlock, seccomp).
 *
 * Each test applies a profile in a forked child that first enters a fresh user namespace as
 * uid 0 with a full capability set: the position PID 1 of an environment is in when
 * confine_apply() runs. The child then probes the kernel and reports through its exit code
 * (number of failed CHECKs) or its death signal.
 *
 * A refused syscall proves nothing by itself: without capabilities the kernel says EPERM on
 * its own for many of them. So every probe uses arguments for which the unconfined kernel
 * answers something else (EFAULT, EINVAL, success...), and test_confine_control__* checks that
 * in an unconfined child; only then does EPERM under a profile show the filter at work. */
#include "lib/confine.h"
#include "lib/util.h"
#include "unit.h"

#include <linux/securebits.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <termios.h>

#ifndef AF_VSOCK
#define AF_VSOCK 40
#endif
#define X32_SYSCALL_BIT 0x40000000L

/* Docker's default capability set as the kernel prints it (CapBnd of `docker run`). */
#define DOCKER_CAPS_MASK 0x00000000a80425fbULL


/* ---- child harness -------------------------------------------------------------------- */

typedef void (*child_fn)(void *arg);

/* Runs fn in a forked child and returns its raw wait status (or -errno). CHECK failures inside
 * the child are printed there and become its exit code. */
static int run_child(child_fn fn, void *arg)
{
        fflush(NULL);
        pid_t pid = fork();
        if (pid < 0)
                return -errno;
        if (pid == 0) {
                unit_failures = 0;
                fn(arg);
                fflush(NULL);
                _exit(unit_failures > 100 ? 100 : unit_failures);
        }
        int status;
        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR)
                        return -errno;
        return status;
}

#define CHECK_CHILD_OK(expr)                                                                       \
        do {                                                                                       \
                int _st = (expr);                                                                  \
                CHECK(_st >= 0 && WIFEXITED(_st) && WEXITSTATUS(_st) == 0);                        \
        } while (0)

/* uid 0 with every capability of a new user namespace, mapped onto our own (host) ids.
 * As in the daemon, a process outside writes the maps: mapping host uid 0 needs CAP_SETFCAP
 * in the parent namespace, which the unshared process itself no longer has there. */
static void enter_userns(void)
{
        int sync[2];
        if (pipe2(sync, O_CLOEXEC) < 0) {
                CHECK(!"pipe2");
                return;
        }
        pid_t target = getpid();
        pid_t helper = fork();
        if (helper < 0) {
                CHECK(!"fork");
                return;
        }
        if (helper == 0) {
                char c, path[64], map[64];
                close(sync[1]);
                if (read(sync[0], &c, 1) != 1)
                        _exit(1); /* the target could not unshare */
                snprintf(path, sizeof(path), "/proc/%d/uid_map", (int)target);
                snprintf(map, sizeof(map), "0 %u 1", (unsigned)getuid());
                if (write_file_at(AT_FDCWD, path, map) < 0)
                        _exit(2);
                snprintf(path, sizeof(path), "/proc/%d/gid_map", (int)target);
                snprintf(map, sizeof(map), "0 %u 1", (unsigned)getgid());
                _exit(write_file_at(AT_FDCWD, path, map) < 0 ? 3 : 0);
        }
        close(sync[0]);
        bool unshared = unshare(CLONE_NEWUSER) == 0;
        if (!unshared)
                fprintf(stderr, "  note: no user namespace (%s), confining as host root\n",
                        strerror(errno));
        else
                CHECK(write(sync[1], "x", 1) == 1);
        close(sync[1]);
        int status;
        CHECK(waitpid(helper, &status, 0) == helper);
        if (unshared)
                CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0 && getuid() == 0);
}

static int confine_in_userns(enum confine_profile p)
{
        const char *step = NULL;
        enter_userns();
        int r = confine_apply(p, &step);
        if (r < 0)
                fprintf(stderr, "  confine_apply failed at %s: %s\n", step ? step : "?",
                        strerror(-r));
        return r;
}

/* A field of /proc/self/status as a number (hex for the Cap* lines), -1 if absent. */
static long long status_field(const char *key)
{
        _cleanup_free_ char *text = NULL;
        if (read_file_at(AT_FDCWD, "/proc/self/status", 16384, &text) < 0)
                return -1;
        size_t klen = strlen(key);
        for (char *line = text; line && *line;
             line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
                if (strncmp(line, key, klen) != 0 || line[klen] != ':')
                        continue;
                int base = strncmp(key, "Cap", 3) == 0 ? 16 : 10;
                return strtoll(line + klen + 1, NULL, base);
        }
        return -1;
}

/* Runs `sh -c script` from inside the (confined) child and captures its stdout. */
static int run_shell(const char *script, char *out, size_t size)
{
        int p[2];
        if (pipe2(p, O_CLOEXEC) < 0)
                return -errno;
        pid_t pid = fork();
        if (pid < 0)
                return -errno;
        if (pid == 0) {
                dup2(p[1], STDOUT_FILENO);
                execl("/bin/sh", "sh", "-c", script, (char *)NULL);
                _exit(127);
        }
        close(p[1]);
        ssize_t n = read_full(p[0], out, size - 1);
        close(p[0]);
        out[n > 0 ? n : 0] = '\0';
        int status;
        if (waitpid(pid, &status, 0) < 0)
                return -errno;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* ---- probes ----------------------------------------------------------------------------- */

/* Expected result meaning "the filter let it through": whatever the kernel says, but neither
 * of the filter's answers. */
#define PASSES (-1)

struct probe {
        const char *name;
        int (*call)(void); /* 0 on success, else errno */
        int sandbox;       /* errno under PROFILE_SANDBOX, or PASSES */
        int computer;      /* errno under PROFILE_COMPUTER, or PASSES */
};

static int errno_of(long r)
{
        return r < 0 ? errno : 0;
}

static int probe_unshare_userns(void)
{
        return errno_of(unshare(CLONE_NEWUSER));
}
static int probe_unshare_files(void)
{
        return errno_of(unshare(CLONE_FILES));
}
static int probe_mount(void)
{
        return errno_of(syscall(SYS_mount, NULL, NULL, NULL, 0, NULL)); /* kernel: EFAULT */
}
static int probe_pivot_root(void)
{
        return errno_of(syscall(SYS_pivot_root, NULL, NULL)); /* root: EFAULT */
}
static int probe_chroot(void)
{
        return errno_of(syscall(SYS_chroot, NULL)); /* EFAULT before the capability check */
}
static int probe_setns(void)
{
        return errno_of(setns(-1, 0)); /* EBADF */
}
static int probe_keyctl(void)
{
        return errno_of(syscall(SYS_keyctl, 0x7fff, 0, 0, 0, 0)); /* EOPNOTSUPP */
}
static int probe_add_key(void)
{
        return errno_of(syscall(SYS_add_key, NULL, NULL, NULL, 0, 0)); /* EFAULT */
}
static int probe_bpf(void)
{
        return errno_of(syscall(SYS_bpf, 0x7fff, NULL, 0)); /* EINVAL */
}
static int probe_io_uring_setup(void)
{
        return errno_of(syscall(SYS_io_uring_setup, 1, NULL)); /* EFAULT */
}
static int probe_perf_event_open(void)
{
        return errno_of(syscall(SYS_perf_event_open, NULL, 0, -1, -1, 0)); /* EFAULT */
}
static int probe_userfaultfd(void)
{
        return errno_of(syscall(SYS_userfaultfd, ~0U)); /* EINVAL */
}
static int probe_ptrace(void)
{
        /* Not tracing our parent: ESRCH. (TRACEME has side effects; tested separately.) */
        return errno_of(ptrace(PTRACE_CONT, getppid(), 0, 0));
}
static int probe_process_vm_readv(void)
{
        return errno_of(syscall(SYS_process_vm_readv, getpid(), NULL, 0, NULL, 0, 0)); /* 0 */
}
static int probe_personality(void)
{
        /* READ_IMPLIES_EXEC: succeeds unconfined, outside Docker's harmless set. */
        return errno_of(personality(READ_IMPLIES_EXEC));
}
static int probe_name_to_handle_at(void)
{
        return errno_of(syscall(SYS_name_to_handle_at, AT_FDCWD, NULL, NULL, NULL, 0));
}
static int probe_open_by_handle_at(void)
{
        return errno_of(syscall(SYS_open_by_handle_at, -1, NULL, 0));
}
static int probe_clone3(void)
{
        return errno_of(syscall(SYS_clone3, NULL, 0)); /* EINVAL: size too small */
}
static int probe_clone_newns(void)
{
        /* CLONE_NEWNS|CLONE_FS is rejected with EINVAL before any capability check. */
        long r = syscall(SYS_clone, CLONE_NEWNS | CLONE_FS | SIGCHLD, NULL, NULL, NULL, 0);
        if (r == 0)
                _exit(0);
        if (r > 0)
                waitpid((pid_t)r, NULL, 0);
        return errno_of(r);
}
static int probe_socket_vsock(void)
{
        int fd = socket(AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd >= 0)
                close(fd);
        return errno_of(fd);
}
static int probe_socket_vsock_high_bits(void)
{
        /* The kernel truncates the domain to int: junk in the high half must not sneak past. */
        long fd = syscall(SYS_socket, (1L << 32) | AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd >= 0)
                close((int)fd);
        return errno_of(fd);
}
static int probe_socket_inet(void)
{
        int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fd >= 0)
                close(fd);
        return errno_of(fd);
}
static int probe_unknown_syscall(void)
{
        return errno_of(syscall(511)); /* newer than any list: must be ENOSYS, not EPERM */
}

static const struct probe probes[] = {
        { "unshare(CLONE_NEWUSER)", probe_unshare_userns, EPERM, EPERM },
        { "unshare(CLONE_FILES)", probe_unshare_files, EPERM, PASSES },
        { "mount", probe_mount, EPERM, EPERM },
        { "pivot_root", probe_pivot_root, EPERM, EPERM },
        { "chroot", probe_chroot, EPERM, PASSES },
        { "setns", probe_setns, EPERM, EPERM },
        { "keyctl", probe_keyctl, EPERM, EPERM },
        { "add_key", probe_add_key, EPERM, EPERM },
        { "bpf", probe_bpf, EPERM, EPERM },
        { "io_uring_setup", probe_io_uring_setup, EPERM, EPERM },
        { "perf_event_open", probe_perf_event_open, EPERM, EPERM },
        { "userfaultfd", probe_userfaultfd, EPERM, EPERM },
        { "ptrace", probe_ptrace, EPERM, PASSES },
        { "process_vm_readv", probe_process_vm_readv, EPERM, PASSES },
        { "personality(READ_IMPLIES_EXEC)", probe_personality, EPERM, EPERM },
        { "name_to_handle_at", probe_name_to_handle_at, EPERM, PASSES },
        { "open_by_handle_at", probe_open_by_handle_at, EPERM, EPERM },
        { "clone3", probe_clone3, ENOSYS, ENOSYS },
        { "clone(CLONE_NEWNS)", probe_clone_newns, EPERM, EPERM },
        { "socket(AF_VSOCK)", probe_socket_vsock, EPERM, EPERM },
        { "socket(AF_VSOCK|1<<32)", probe_socket_vsock_high_bits, EPERM, EPERM },
        { "socket(AF_INET)", probe_socket_inet, PASSES, PASSES },
        { "syscall 511", probe_unknown_syscall, ENOSYS, ENOSYS },
};

/* Runs one probe in a child of its own, so its side effects (a new user namespace, a changed
 * personality) cannot change the next probe's answer. Returns the probe's errno. */
static int probe_in_child(const struct probe *pr)
{
        fflush(NULL);
        pid_t pid = fork();
        if (pid == 0)
                _exit(pr->call() & 0xff);
        int status;
        if (pid < 0 || waitpid(pid, &status, 0) != pid)
                return -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void check_probe(const struct probe *pr, int expected)
{
        int got = probe_in_child(pr);
        if (got < 0 || (expected == PASSES ? (got == EPERM || got == ENOSYS) : got != expected)) {
                fprintf(stderr, "  FAIL probe %s: got %s, expected %s\n", pr->name,
                        got ? strerror(got) : "success",
                        expected == PASSES ? "the kernel's own answer" : strerror(expected));
                unit_failures++;
        }
}

/* ---- children ----------------------------------------------------------------------------- */

static void child_control_probes(void *arg)
{
        for (size_t i = 0; i < ELEMENTSOF(probes); i++) {
                int got = probe_in_child(&probes[i]);
                /* ENOSYS is the kernel's own answer only for the unknown number. */
                bool ok = got >= 0 && got != EPERM &&
                          (got != ENOSYS || probes[i].call == probe_unknown_syscall);
                if (!ok) {
                        fprintf(stderr, "  FAIL control %s: unconfined kernel says %s\n",
                                probes[i].name, strerror(got));
                        unit_failures++;
                }
        }
}

static void child_profile_probes(void *arg)
{
        enum confine_profile p = *(enum confine_profile *)arg;
        if (confine_in_userns(p) < 0) {
                unit_failures++;
                return;
        }
        for (size_t i = 0; i < ELEMENTSOF(probes); i++)
                check_probe(&probes[i], p == PROFILE_SANDBOX ? probes[i].sandbox
                                                             : probes[i].computer);
}

static void child_sandbox_state(void *arg)
{
        if (confine_in_userns(PROFILE_SANDBOX) < 0) {
                unit_failures++;
                return;
        }
        CHECK_EQ_INT(status_field("CapInh"), 0);
        CHECK_EQ_INT(status_field("CapPrm"), 0);
        CHECK_EQ_INT(status_field("CapEff"), 0);
        CHECK_EQ_INT(status_field("CapBnd"), 0);
        CHECK_EQ_INT(status_field("CapAmb"), 0);
        CHECK_EQ_INT(status_field("NoNewPrivs"), 1);
        CHECK_EQ_INT(status_field("Seccomp"), 2);

        int bits = prctl(PR_GET_SECUREBITS, 0, 0, 0, 0);
        CHECK(bits >= 0 && (bits & SECBIT_NOROOT) && (bits & SECBIT_NOROOT_LOCKED));
        CHECK(bits >= 0 && (bits & SECBIT_NO_SETUID_FIXUP_LOCKED) && !(bits & SECBIT_KEEP_CAPS));
        /* Locked: even an attempt to clear them fails. */
        CHECK(prctl(PR_SET_SECUREBITS, 0, 0, 0, 0) < 0);

        /* What still has to work: processes, identity, pipes, sockets pairs. */
        CHECK(getpid() > 0);
        pid_t pid = fork();
        if (pid == 0)
                _exit(42);
        int status = 0;
        CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 42);
        int sv[2];
        CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
        CHECK(ptrace(PTRACE_TRACEME, 0, 0, 0) < 0 && errno == EPERM);
}

/* A shell started under the sandbox gets nothing back from exec as uid 0 and can use /tmp. */
static void child_sandbox_exec(void *arg)
{
        if (confine_in_userns(PROFILE_SANDBOX) < 0) {
                unit_failures++;
                return;
        }
        char out[512];
        int r = run_shell("f=/tmp/paddock-confine-$$ && echo hello >$f && cat $f && rm $f && "
                          "grep -E '^(CapEff|NoNewPrivs)' /proc/self/status",
                          out, sizeof(out));
        CHECK_EQ_INT(r, 0);
        CHECK_EQ_STR(out, "hello\nCapEff:\t0000000000000000\nNoNewPrivs:\t1\n");
}

static void child_computer_state(void *arg)
{
        if (confine_in_userns(PROFILE_COMPUTER) < 0) {
                unit_failures++;
                return;
        }
        CHECK_EQ_INT(status_field("CapBnd"), DOCKER_CAPS_MASK);
        CHECK_EQ_INT(status_field("CapEff"), DOCKER_CAPS_MASK);
        CHECK_EQ_INT(status_field("CapPrm"), DOCKER_CAPS_MASK);
        CHECK_EQ_INT(status_field("CapInh"), 0);
        CHECK_EQ_INT(status_field("CapAmb"), 0);
        CHECK_EQ_INT(status_field("NoNewPrivs"), 0); /* setuid programs keep working */
        CHECK_EQ_INT(status_field("Seccomp"), 2);

        /* uid 0 exec regains exactly the bounding set, as root in a Docker container does. */
        char out[256];
        CHECK_EQ_INT(run_shell("grep '^CapEff' /proc/self/status", out, sizeof(out)), 0);
        CHECK_EQ_STR(out, "CapEff:\t00000000a80425fb\n");

        /* Last: after TRACEME any signal to us would stop us for the test process. */
        CHECK_EQ_INT(ptrace(PTRACE_TRACEME, 0, 0, 0), 0);
}

static long int80_getpid(void)
{
        long ret;
        __asm__ volatile("int $0x80" : "=a"(ret) : "a"(20L) : "memory", "r8", "r9", "r10", "r11");
        return ret;
}

static void child_int80(void *arg)
{
        if (arg && confine_in_userns(*(enum confine_profile *)arg) < 0)
                _exit(100);
        _exit(int80_getpid() == getpid() ? 0 : 1);
}

static void child_x32(void *arg)
{
        if (confine_in_userns(*(enum confine_profile *)arg) < 0)
                _exit(100);
        syscall(X32_SYSCALL_BIT | SYS_getpid);
        _exit(0);
}

struct landlock_paths {
        const char *outside_file; /* existing, writable by DAC, outside the sandbox's scratch */
        const char *outside_new;  /* does not exist, in a writable directory */
        bool full_confine;        /* false: caps + nnp + seccomp only, the control */
};

static void child_landlock(void *arg)
{
        const struct landlock_paths *lp = arg;
        if (lp->full_confine) {
                if (confine_in_userns(PROFILE_SANDBOX) < 0) {
                        unit_failures++;
                        return;
                }
        } else {
                enter_userns();
                CHECK_EQ_INT(caps_apply(PROFILE_SANDBOX), 0);
                CHECK_EQ_INT(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), 0);
                CHECK_EQ_INT(seccomp_apply(PROFILE_SANDBOX), 0);
        }
        int expect = lp->full_confine ? EACCES : 0;

        int fd = open(lp->outside_file, O_WRONLY | O_CLOEXEC);
        CHECK_EQ_INT(fd < 0 ? errno : 0, expect);
        if (fd >= 0)
                close(fd);
        fd = open(lp->outside_new, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        CHECK_EQ_INT(fd < 0 ? errno : 0, expect);
        if (fd >= 0) {
                close(fd);
                unlink(lp->outside_new);
        }
        if (lp->full_confine && landlock_abi() >= 3)
                CHECK(truncate(lp->outside_file, 0) < 0 && errno == EACCES);

        /* Reading and executing stay possible everywhere. */
        fd = open(lp->outside_file, O_RDONLY | O_CLOEXEC);
        CHECK(fd >= 0);
        if (fd >= 0)
                close(fd);
        CHECK(access("/bin/sh", X_OK) == 0);

        /* Scratch space and the null device stay writable. */
        char tmp[] = "/tmp/paddock-test-landlock-XXXXXX";
        fd = mkostemp(tmp, O_CLOEXEC);
        CHECK(fd >= 0);
        if (fd >= 0) {
                CHECK_EQ_INT(write(fd, "x", 1), 1);
                CHECK_EQ_INT(ftruncate(fd, 0), 0);
                close(fd);
                CHECK_EQ_INT(unlink(tmp), 0);
        }
        fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
        CHECK(fd >= 0 && write(fd, "x", 1) == 1);
        if (fd >= 0)
                close(fd);
}

/* Terminal injection: TIOCSTI and TIOCLINUX fail with EPERM under both profiles, on a pipe
 * (where the unconfined kernel says ENOTTY) and on a real pty slave (where root's TIOCSTI would
 * work), also with junk in the high half of the request; every other terminal ioctl still
 * works. arg NULL: the unconfined control. */
static void child_tiocsti(void *arg)
{
        const enum confine_profile *p = arg;
        int master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
        CHECK(master >= 0);
        if (master < 0)
                return;
        CHECK(grantpt(master) == 0 && unlockpt(master) == 0);
        const char *name = ptsname(master);
        int slave = name ? open(name, O_RDWR | O_NOCTTY | O_CLOEXEC) : -1;
        CHECK(slave >= 0);
        int pfd[2];
        CHECK(pipe2(pfd, O_CLOEXEC) == 0);
        if (p && confine_in_userns(*p) < 0) {
                unit_failures++;
                return;
        }
        char c = 'x';
        errno = 0;
        CHECK_EQ_INT(ioctl(pfd[0], TIOCSTI, &c) < 0 ? errno : 0, p ? EPERM : ENOTTY);
        errno = 0;
        CHECK_EQ_INT(ioctl(pfd[0], TIOCLINUX, &c) < 0 ? errno : 0, p ? EPERM : ENOTTY);
        /* The kernel uses the request's low 32 bits: junk above must not get TIOCSTI through
         * (unfiltered, the pipe answers ENOTTY). */
        for (int i = 0; i < 2; i++) {
                unsigned long req = (i ? 0xdead00000000UL : 0x100000000UL) | TIOCSTI;
                errno = 0;
                long hi = syscall(SYS_ioctl, pfd[0], req, &c);
                CHECK_EQ_INT(hi < 0 ? errno : 0, p ? EPERM : ENOTTY);
        }
        if (p) {
                errno = 0;
                CHECK_EQ_INT(ioctl(slave, TIOCSTI, &c) < 0 ? errno : 0, EPERM);
                /* Nothing arrived as input on the terminal. */
                int avail = -1;
                CHECK(ioctl(slave, FIONREAD, &avail) == 0 && avail == 0);
        }
        /* Every other request passes the filter: the kernel answers (ENOTTY on a pipe, or
         * success), never the filter's EPERM; with junk in the high half too. */
        static const unsigned long others[] = {0, 1, 0x541b, 0x541d, 0x5411, 0x5413, 0x5402,
                                               0x5421, 0x5451, 0x80045430, 0x7fffffff,
                                               0x80000000, 0xffffffff, 0xdeadbeef, 0x4012,
                                               0x5412 ^ 0x10000, 0x541c ^ 0x80000000};
        int refused = 0;
        for (size_t i = 0; i < ELEMENTSOF(others); i++)
                for (int hi = 0; hi < 2; hi++) {
                        int v = 0;
                        unsigned long req = others[i] | (hi ? 0x300000000UL : 0);
                        errno = 0;
                        if (syscall(SYS_ioctl, pfd[0], req, &v) < 0 && errno == EPERM) {
                                fprintf(stderr, "  ioctl 0x%lx refused\n", req);
                                refused++;
                        }
                }
        for (unsigned long req = 0x5400; req < 0x5500; req++) {
                int v = 0;
                errno = 0;
                if (req != TIOCSTI && req != TIOCLINUX &&
                    syscall(SYS_ioctl, pfd[0], req, &v) < 0 && errno == EPERM)
                        refused++;
        }
        CHECK_EQ_INT(refused, 0);
        /* The neighbours of the refused requests, and the usual ones, still work. */
        struct winsize ws = {.ws_row = 24, .ws_col = 80};
        CHECK_EQ_INT(ioctl(slave, TIOCSWINSZ, &ws), 0);
        CHECK_EQ_INT(ioctl(slave, TIOCGWINSZ, &ws), 0);
        CHECK(ws.ws_col == 80);
        int n;
        CHECK_EQ_INT(ioctl(pfd[0], FIONREAD, &n), 0);
        struct termios t;
        CHECK_EQ_INT(tcgetattr(slave, &t), 0);
        close(slave);
        close(master);
}

/* btrfs' own ioctls (type 0x94) fail with EPERM under both profiles, also with junk in the high
 * half; the generic clone/dedupe ioctls of the same type and terminal ioctls still reach the
 * kernel (a pipe answers them with ENOTTY/EINVAL/EBADF..., never the filter's EPERM). Both
 * refusals share one rule set, so this also checks that neither opens a hole in the other.
 * arg NULL: the unconfined control. */
static void child_btrfs_ioctls(void *arg)
{
        const enum confine_profile *p = arg;
        int pfd[2];
        CHECK(pipe2(pfd, O_CLOEXEC) == 0);
        if (p && confine_in_userns(*p) < 0) {
                unit_failures++;
                return;
        }
        static const unsigned long refused[] = {0x50009401 /* SNAP_CREATE */,
                                                0x5000940e /* SUBVOL_CREATE */,
                                                0x50009418 /* SUBVOL_CREATE_V2 */, 0x9400,
                                                0xc4009428 /* QUOTA_CTL-like */, 0x940f};
        for (size_t i = 0; i < ELEMENTSOF(refused); i++)
                for (int hi = 0; hi < 2; hi++) {
                        char buf[64] = {0};
                        unsigned long req = refused[i] | (hi ? 0x500000000UL : 0);
                        errno = 0;
                        long r = syscall(SYS_ioctl, pfd[0], req, buf);
                        CHECK_EQ_INT(r < 0 ? errno : 0, p ? EPERM : ENOTTY);
                }
        static const unsigned long allowed[] = {FICLONE, FICLONERANGE, FIDEDUPERANGE, FIONREAD,
                                                0x9300, 0x9500, 0x1494, 0x5412 ^ 0x8000};
        for (size_t i = 0; i < ELEMENTSOF(allowed); i++) {
                char buf[64] = {0};
                errno = 0;
                long r = syscall(SYS_ioctl, pfd[0], allowed[i], buf);
                if (r < 0 && errno == EPERM)
                        fprintf(stderr, "  ioctl 0x%lx refused\n", allowed[i]);
                CHECK(!(r < 0 && errno == EPERM));
        }
        char c = 'x';
        errno = 0;
        CHECK_EQ_INT(ioctl(pfd[0], TIOCSTI, &c) < 0 ? errno : 0, p ? EPERM : ENOTTY);
        close(pfd[0]);
        close(pfd[1]);
}

/* ---- tests --------------------------------------------------------------------------------- */

static void test_confine_control__probes_are_not_refused_unconfined(void)
{
        CHECK_CHILD_OK(run_child(child_control_probes, NULL));
}

static void test_confine_sandbox__blocks_dangerous_syscalls(void)
{
        enum confine_profile p = PROFILE_SANDBOX;
        CHECK_CHILD_OK(run_child(child_profile_probes, &p));
}

static void test_confine_sandbox__drops_everything(void)
{
        CHECK_CHILD_OK(run_child(child_sandbox_state, NULL));
}

static void test_confine_sandbox__shell_runs(void)
{
        CHECK_CHILD_OK(run_child(child_sandbox_exec, NULL));
}

static void test_confine_computer__docker_like(void)
{
        enum confine_profile p = PROFILE_COMPUTER;
        CHECK_CHILD_OK(run_child(child_profile_probes, &p));
        CHECK_CHILD_OK(run_child(child_computer_state, NULL));
}

static void test_confine_seccomp__foreign_abi_kills(void)
{
        int control = run_child(child_int80, NULL);
        if (control >= 0 && WIFEXITED(control) && WEXITSTATUS(control) == 0) {
                enum confine_profile profiles[] = { PROFILE_SANDBOX, PROFILE_COMPUTER };
                for (size_t i = 0; i < ELEMENTSOF(profiles); i++) {
                        int st = run_child(child_int80, &profiles[i]);
                        CHECK(st >= 0 && WIFSIGNALED(st) && WTERMSIG(st) == SIGSYS);
                }
        } else {
                /* The x32 half below still runs; the i386 half is reported skipped. */
                SKIP("no i386 emulation in this kernel (int $0x80 does not work)");
        }

        /* x32 numbers arrive with the native audit arch: the filter itself must refuse them. */
        enum confine_profile p = PROFILE_SANDBOX;
        int st = run_child(child_x32, &p);
        CHECK(st >= 0 && WIFSIGNALED(st) && WTERMSIG(st) == SIGSYS);
}

static void test_confine_landlock__writes_only_to_scratch(void)
{
        if (landlock_abi() <= 0) {
                SKIP("kernel without Landlock");
                return;
        }
        /* The test runs on the host, where /tmp is scratch: the forbidden file must live
         * elsewhere. /var/tmp unless it is (a link to) /tmp, else the working directory. */
        char dir[4096];
        if (!realpath("/var/tmp", dir) || strncmp(dir, "/tmp", 4) == 0 ||
            strncmp(dir, "/dev/shm", 8) == 0) {
                if (!getcwd(dir, sizeof(dir))) {
                        CHECK(!"no directory outside /tmp");
                        return;
                }
        }
        char file[4200], fresh[4208];
        snprintf(file, sizeof(file), "%s/paddock-test-landlock-XXXXXX", dir);
        int fd = mkostemp(file, O_CLOEXEC);
        CHECK(fd >= 0);
        if (fd < 0)
                return;
        close(fd);
        snprintf(fresh, sizeof(fresh), "%s.new", file);

        struct landlock_paths control = { file, fresh, false };
        CHECK_CHILD_OK(run_child(child_landlock, &control));
        struct landlock_paths confined = { file, fresh, true };
        CHECK_CHILD_OK(run_child(child_landlock, &confined));

        unlink(fresh);
        unlink(file);
}

static void test_confine_seccomp__no_terminal_injection(void)
{
        CHECK_CHILD_OK(run_child(child_tiocsti, NULL));
        enum confine_profile profiles[] = {PROFILE_SANDBOX, PROFILE_COMPUTER};
        for (size_t i = 0; i < ELEMENTSOF(profiles); i++)
                CHECK_CHILD_OK(run_child(child_tiocsti, &profiles[i]));
}

static void test_confine_seccomp__no_btrfs_ioctls(void)
{
        CHECK_CHILD_OK(run_child(child_btrfs_ioctls, NULL));
        enum confine_profile profiles[] = {PROFILE_SANDBOX, PROFILE_COMPUTER};
        for (size_t i = 0; i < ELEMENTSOF(profiles); i++)
                CHECK_CHILD_OK(run_child(child_btrfs_ioctls, &profiles[i]));
}

static void test_confine_seccomp__export_pfc(void)
{
        for (int k = 0; k < 2; k++) {
                enum confine_profile p = k ? PROFILE_COMPUTER : PROFILE_SANDBOX;
                _cleanup_close_ int fd = memfd_create("pfc", MFD_CLOEXEC);
                CHECK(fd >= 0);
                CHECK_EQ_INT(confine_export_pfc(p, fd), 0);
                off_t size = lseek(fd, 0, SEEK_END);
                CHECK(size > 1000);
                if (size <= 0 || size > (1 << 22))
                        continue;
                _cleanup_free_ char *text = calloc(1, (size_t)size + 1);
                CHECK(text && pread(fd, text, (size_t)size, 0) == size);
                if (!text)
                        continue;
                CHECK(strstr(text, "action KILL_PROCESS")); /* foreign architectures */
                CHECK(strstr(text, "action ERRNO(1)"));     /* the default */
                CHECK(strstr(text, "\"clone3\""));
                CHECK(strstr(text, "action ERRNO(38)")); /* clone3 and newer-than-list */
                CHECK(strstr(text, "\"execve\""));
                /* Refused syscalls have no rule of their own: they fall to the default. */
                CHECK(!strstr(text, "\"keyctl\""));
                CHECK(!strstr(text, "\"io_uring_setup\""));
                CHECK(!strstr(text, "\"bpf\""));
                if (p == PROFILE_SANDBOX)
                        CHECK(!strstr(text, "\"ptrace\"") && !strstr(text, "\"unshare\""));
                else
                        CHECK(strstr(text, "\"ptrace\"") && strstr(text, "\"unshare\""));
        }
        CHECK_EQ_INT(confine_export_pfc((enum confine_profile)42, STDOUT_FILENO), -EINVAL);
}

/* The daemon compiles the filters once and children load the cached BPF: same behaviour. */
static void test_confine_seccomp__precompiled_same_behaviour(void)
{
        CHECK_EQ_INT(seccomp_precompile(), 0);
        enum confine_profile profiles[] = {PROFILE_SANDBOX, PROFILE_COMPUTER};
        for (size_t i = 0; i < ELEMENTSOF(profiles); i++) {
                CHECK_CHILD_OK(run_child(child_profile_probes, &profiles[i]));
                int st = run_child(child_int80, &profiles[i]);
                CHECK(st >= 0 && WIFSIGNALED(st) && WTERMSIG(st) == SIGSYS);
        }
        CHECK_CHILD_OK(run_child(child_sandbox_state, NULL));
        CHECK_CHILD_OK(run_child(child_sandbox_exec, NULL));
        CHECK_CHILD_OK(run_child(child_computer_state, NULL));
}

int main(void)
{
        if (geteuid() != 0) {
                /* The control probes assume a root caller (pivot_root, bpf answer EPERM to
                 * anyone else), and so does confining in a child. */
                UNIT_SKIP_ALL("needs root");
        }
        RUN(test_confine_control__probes_are_not_refused_unconfined);
        RUN(test_confine_sandbox__blocks_dangerous_syscalls);
        RUN(test_confine_sandbox__drops_everything);
        RUN(test_confine_sandbox__shell_runs);
        RUN(test_confine_computer__docker_like);
        RUN(test_confine_seccomp__foreign_abi_kills);
        RUN(test_confine_landlock__writes_only_to_scratch);
        RUN(test_confine_seccomp__no_terminal_injection);
        RUN(test_confine_seccomp__no_btrfs_ioctls);
        RUN(test_confine_seccomp__export_pfc);
        RUN(test_confine_seccomp__precompiled_same_behaviour); /* last: it fills the cache */
        UNIT_EXIT();
}

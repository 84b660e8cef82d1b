#include "lib/spawn.h"
#include "lib/util.h"

#include <grp.h>
#include <linux/sched.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>

int loopback_up(void)
{
        _cleanup_close_ int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (s < 0)
                return -errno;
        struct ifreq ifr = {0};
        strcpy(ifr.ifr_name, "lo");
        if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0)
                return -errno;
        ifr.ifr_flags |= IFF_UP;
        if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0)
                return -errno;
        return 0;
}

static int become_root_in_userns(int userns_fd)
{
        if (setns(userns_fd, CLONE_NEWUSER) < 0)
                return -errno;
        if (setresgid(0, 0, 0) < 0 || setgroups(0, NULL) < 0 || setresuid(0, 0, 0) < 0)
                return -errno;
        return 0;
}

static void child_fail(int report_fd, const char *step, int err)
{
        char msg[256];
        int n = snprintf(msg, sizeof(msg), "%s: %s", step, strerror(-err));
        (void)!write(report_fd, msg, (size_t)n);
        _exit(1);
}

/* Runs in the clone: host root, fresh namespaces except the user namespace. Never returns.
 * It shares the daemon's memory (env_spawn): it may only touch its own stack, read c, and
 * make system calls; nothing here (rootfs_enter included) allocates except libcap inside
 * caps_apply, whose cap_get_proc/cap_free pair completes while the daemon sleeps in poll. */
static _Noreturn void child_main(const struct spawn_config *c, int report_fd)
{
        const char *step;
        int r;

        /* The daemon's handlers (copied: no CLONE_SIGHAND) go before the mask inherited from
         * env_spawn is cleared, so none of them ever runs here on the daemon's memory. Die
         * with the daemon only while setting up; once paddock-init runs we are independent. */
        reset_signals();
        child_nofile_apply();
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() == 1)
                _exit(1);
        /* A session of its own, without a controlling terminal: otherwise the environment
         * shares the daemon's, and whoever started paddockd in a terminal would hand it over
         * (open /dev/tty, tcsetpgrp: its keystrokes, its screen). */
        if (setsid() < 0)
                child_fail(report_fd, "new session", -errno);

        if ((r = cgroup_env_attach(c->cgroups, c->cgroup_name, NULL, 0)) < 0)
                child_fail(report_fd, "join cgroup", r);
        /* The network namespace belongs to the host's user namespace, so the environment's
         * root has no CAP_NET_BIND_SERVICE there: let it bind low ports and ping anyway. */
        if ((r = write_file_at(AT_FDCWD, "/proc/sys/net/ipv4/ip_unprivileged_port_start", "0")) < 0)
                child_fail(report_fd, "ip_unprivileged_port_start", r);
        write_file_at(AT_FDCWD, "/proc/sys/net/ipv4/ping_group_range", "0 2147483647");
        if (unshare(CLONE_NEWCGROUP) < 0)
                child_fail(report_fd, "cgroup namespace", -errno);
        if ((r = rootfs_enter(&c->rootfs, &step)) < 0)
                child_fail(report_fd, step, r);
        /* PID 1 must not hold the daemon's stdio (its log file, its terminal): the
         * environment's own /dev/null instead. */
        int null = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (null < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0 || dup2(null, 2) < 0)
                child_fail(report_fd, "stdio", -errno);
        close(null);
        if (sethostname(c->hostname, strlen(c->hostname)) < 0)
                child_fail(report_fd, "hostname", -errno);
        if ((r = loopback_up()) < 0)
                child_fail(report_fd, "loopback", r);
        if ((r = become_root_in_userns(c->rootfs.userns_fd)) < 0)
                child_fail(report_fd, "user namespace", r);
        if (c->profile == PROFILE_SANDBOX) {
                struct rlimit core = {0, 0};
                setrlimit(RLIMIT_CORE, &core);
        }
        if ((r = confine_apply_exec(c->profile, c->init_fd, &step)) < 0)
                child_fail(report_fd, step, r);
        prctl(PR_SET_PDEATHSIG, 0);
        int keep[] = {report_fd, c->init_fd};
        close_fds_from(3, keep, ELEMENTSOF(keep));
        char *argv[] = {"paddock-init", NULL};
        syscall(SYS_execveat, c->init_fd, "", argv, c->init_envp, AT_EMPTY_PATH);
        child_fail(report_fd, "exec paddock-init", -errno);
        _exit(1);
}

/* The child's stack, made once and reused: env_spawn is not reentrant (the daemon is single
 * threaded and waits for each child's exec), and its pages stay faulted in between creates. */
#define SPAWN_STACK_SIZE (256u * 1024u)
static char *spawn_stack;

static int map_spawn_stack(void)
{
        if (spawn_stack)
                return 0;
        void *p = mmap(NULL, SPAWN_STACK_SIZE, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED)
                return -errno;
        /* The lowest page stays unmapped: a guard against running into other mappings. */
        if (mprotect(p, 4096, PROT_NONE) < 0) {
                int e = -errno;
                munmap(p, SPAWN_STACK_SIZE);
                return e;
        }
        spawn_stack = p;
        return 0;
}

struct child_args {
        const struct spawn_config *c;
        int rd, wr;
};

static int child_start(void *data)
{
        const struct child_args *a = data;
        close(a->rd);
        child_main(a->c, a->wr);
}

int env_spawn(const struct spawn_config *c, struct spawn_result *ret, char *errbuf, size_t errlen)
{
        int r = map_spawn_stack();
        if (r < 0) {
                snprintf(errbuf, errlen, "spawn stack: %s", strerror(-r));
                return r;
        }
        int pipefd[2];
        if (pipe2(pipefd, O_CLOEXEC) < 0)
                return -errno;
        _cleanup_close_ int rd = pipefd[0], wr = pipefd[1];

        /* CLONE_VM: the child runs on the daemon's memory, on spawn_stack, instead of a copy
         * of it. A copy meant duplicating the page tables of the daemon's ~300 mappings at the
         * clone (~1 ms) and tearing them down again at the execve (~0.5 ms, with a TLB
         * shootdown), every create. Sharing is safe because the daemon does nothing but poll
         * the report pipe below until the child has exec'd (the pipe's EOF: the kernel
         * switches to the new memory before it closes O_CLOEXEC fds) or has been killed and
         * reaped; c and the stack outlive it. Not CLONE_VFORK: a child stuck in setup (a hung
         * lxcfs answering the access() in bind_lxcfs) must not hang the daemon, which gives
         * up after 30 s. The child shares errno (TLS) too: the daemon reads errno below only
         * after its own failed calls, and has no signal handlers (signalfd) to interrupt poll.
         * Signals are blocked across the clone so no daemon handler runs in the child before
         * child_main resets them. An OOM kill of a process sharing our memory would take the
         * daemon with it (the kernel kills every user of the victim's mm): the child's cgroup
         * is new and empty, at least 8 MiB, and setup charges it only some kernel memory. */
        struct child_args args = {.c = c, .rd = rd, .wr = wr};
        int pidfd = -1;
        int flags = CLONE_VM | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWUTS | CLONE_NEWIPC |
                    CLONE_NEWNET | CLONE_PIDFD | SIGCHLD;
        sigset_t all, old;
        sigfillset(&all);
        sigprocmask(SIG_SETMASK, &all, &old);
        /* glibc's clone() hands CLONE_PIDFD's fd back through parent_tid. */
        pid_t pid = clone(child_start, spawn_stack + SPAWN_STACK_SIZE, flags, &args, &pidfd);
        int e = errno;
        sigprocmask(SIG_SETMASK, &old, NULL);
        if (pid < 0) {
                snprintf(errbuf, errlen, "clone: %s", strerror(e));
                return -e;
        }
        _cleanup_close_ int pfd = pidfd;
        close(TAKE_FD(wr));

        /* Wait for EOF (exec done) or an error message; setup takes milliseconds. */
        char msg[256];
        size_t got = 0;
        for (;;) {
                struct pollfd p = {.fd = rd, .events = POLLIN};
                int n = poll(&p, 1, 30000);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0) {
                        snprintf(errbuf, errlen, "environment setup timed out");
                        goto kill_child;
                }
                ssize_t k = read(rd, msg + got, sizeof(msg) - 1 - got);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        break;
                got += (size_t)k;
                if (got == sizeof(msg) - 1)
                        break;
        }
        if (got > 0) {
                msg[got] = 0;
                snprintf(errbuf, errlen, "%s", msg);
                goto kill_child;
        }
        uint64_t st;
        r = proc_start_time(pid, &st);
        if (r < 0) {
                snprintf(errbuf, errlen, "environment exited during start");
                goto kill_child;
        }
        ret->pid = pid;
        ret->pidfd = TAKE_FD(pfd);
        ret->start_time = st;
        return 0;

kill_child:
        sys_pidfd_send_signal(pfd, SIGKILL, 0);
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
                ;
        return -EIO;
}

#include "lib/spawn.h"
#include "lib/netlink.h"
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

/* Runs in the clone: host root, fresh namespaces except the user namespace. Never returns. */
static _Noreturn void child_main(const struct spawn_config *c, int report_fd, bool placed)
{
        const char *step;
        int r;

        /* Die with the daemon only while setting up; once paddock-init runs we are independent. */
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

        if ((r = cgroup_env_join(c->cgroups, c->cgroup_name, NULL, placed)) < 0)
                child_fail(report_fd, "join cgroup", r);
        /* Its groups for /sys/fs/cgroup, taken while still in the daemon's mount namespace. */
        struct cgroup_view_tree trees[CGROUP_VIEW_MAX];
        struct rootfs_config rootfs = c->rootfs;
        if ((r = cgroup_env_view_trees(c->cgroups, c->cgroup_name, trees,
                                       &rootfs.n_cgroup_trees)) < 0)
                child_fail(report_fd, "cgroup view", r);
        rootfs.cgroup_trees = trees;
        /* The network namespace belongs to the host's user namespace, so the environment's
         * root has no CAP_NET_BIND_SERVICE there: let it bind low ports and ping anyway.
         * Then IPv6 as its link will need it (enum spawn_net): "default" covers the link added
         * later, "all" the existing ones; a kernel without IPv6 is fine only without it. */
        struct rootfs_sysctl knobs[3 + NETLINK_IPV6_KNOBS] = {
                {"net/ipv4/ip_unprivileged_port_start", "0", false},
                {"net/ipv4/ping_group_range", "0 2147483647", true},
        };
        char v6_paths[NETLINK_IPV6_KNOBS][64];
        size_t n_knobs = 2;
        bool v6 = c->net == SPAWN_NET_V6;
        for (size_t i = 0; c->net != SPAWN_NET_NONE && i < NETLINK_IPV6_KNOBS; i++) {
                const struct netlink_ipv6_knob *k = &netlink_ipv6_knobs[i];
                const char *value = v6 ? k->on : k->off;
                if (value && BUF_PRINTF(v6_paths[i], "net/ipv6/conf/%s", k->path) >= 0)
                        knobs[n_knobs++] = (struct rootfs_sysctl){v6_paths[i], value, !v6};
        }
        knobs[n_knobs] = (struct rootfs_sysctl){NULL, NULL, false};
        rootfs.sysctls = knobs;
        /* Made here rather than by the clone, whose caller waits: a network namespace's set-up
         * and a copy of the host's mount table both take longer the more environments exist.
         * Still host root in the host's user namespace: they belong to it, as before. */
        if (unshare(CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWNET) < 0)
                child_fail(report_fd, "namespaces", -errno);
        if (unshare(CLONE_NEWCGROUP) < 0)
                child_fail(report_fd, "cgroup namespace", -errno);
        if ((r = rootfs_enter(&rootfs, &step)) < 0)
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

int env_spawn_start(const struct spawn_config *c, struct spawn_pending *ret, char *errbuf,
                    size_t errlen)
{
        if (c->make_cgroup) {
                int r = cgroup_env_create(c->cgroups, c->cgroup_name, c->make_cgroup);
                if (r < 0) {
                        snprintf(errbuf, errlen, "cgroup: %s", strerror(-r));
                        return r;
                }
        }
        int pipefd[2];
        if (pipe2(pipefd, O_CLOEXEC) < 0)
                return -errno;
        _cleanup_close_ int rd = pipefd[0], wr = pipefd[1];

        int pidfd = -1;
        bool placed;
        /* CLONE_NEWPID only: the other namespaces are child_main's. */
        uint64_t flags = CLONE_NEWPID | CLONE_PIDFD | (c->clone_parent ? CLONE_PARENT : 0);
        pid_t pid = cgroup_env_clone(c->cgroups, c->cgroup_name, NULL, flags, &pidfd, &placed);
        if (pid < 0) {
                snprintf(errbuf, errlen, "clone3: %s", strerror(-pid));
                return pid;
        }
        if (pid == 0) {
                close(rd);
                child_main(c, wr, placed);
        }
        *ret = (struct spawn_pending){.pid = pid, .pidfd = pidfd, .report_fd = TAKE_FD(rd)};
        return 0;
}

void env_spawn_abandon(struct spawn_pending *p)
{
        if (p->pid <= 0)
                return;
        sys_pidfd_send_signal(p->pidfd, SIGKILL, 0);
        while (waitpid(p->pid, NULL, 0) < 0 && errno == EINTR)
                ;
        close(p->pidfd);
        close(p->report_fd);
        *p = (struct spawn_pending){.pidfd = -EBADF, .report_fd = -EBADF};
}

int env_spawn_finish(struct spawn_pending *p, int timeout_ms, struct spawn_result *ret,
                     char *errbuf, size_t errlen)
{
        /* EOF (exec done) or an error message (then the child exits); setup takes ms. */
        char msg[256];
        size_t got = 0;
        for (;;) {
                struct pollfd pf = {.fd = p->report_fd, .events = POLLIN};
                int n = poll(&pf, 1, timeout_ms);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0) {
                        snprintf(errbuf, errlen, "environment setup timed out");
                        goto kill_child;
                }
                ssize_t k = read(p->report_fd, msg + got, sizeof(msg) - 1 - got);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        break;
                got += (size_t)k;
                if (got == sizeof(msg) - 1)
                        break;
                timeout_ms = SPAWN_REPORT_END_MS; /* the rest of the message, then EOF */
        }
        if (got > 0) {
                msg[got] = 0;
                snprintf(errbuf, errlen, "%s", msg);
                goto kill_child;
        }
        /* EOF is also what a child killed during its setup leaves, and it leaves it before it
         * is a zombie (a dying task closes its files first): ask whether it has exited (without
         * reaping it), then whether it is exiting. */
        siginfo_t si = {0};
        struct proc_stat st;
        if ((waitid(P_PIDFD, (id_t)p->pidfd, &si, WEXITED | WNOHANG | WNOWAIT) == 0 &&
             si.si_pid != 0) ||
            proc_stat(p->pid, &st) < 0 || (st.flags & PROC_FLAG_EXITING)) {
                snprintf(errbuf, errlen, "environment exited during start");
                goto kill_child;
        }
        close(p->report_fd);
        *ret = (struct spawn_result){.pid = p->pid, .pidfd = p->pidfd, .start_time = st.start_time};
        *p = (struct spawn_pending){.pidfd = -EBADF, .report_fd = -EBADF};
        return 0;

kill_child:
        env_spawn_abandon(p);
        return -EIO;
}

int env_spawn(const struct spawn_config *c, struct spawn_result *ret, char *errbuf, size_t errlen)
{
        struct spawn_pending p;
        int r = env_spawn_start(c, &p, errbuf, errlen);
        return r < 0 ? r : env_spawn_finish(&p, SPAWN_SETUP_MS, ret, errbuf, errlen);
}

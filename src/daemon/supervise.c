/* The helper supervisor: see supervise.h for a helper's life. */
#include "daemon/supervise.h"
#include "daemon/log.h"
#include "lib/files.h"
#include "lib/util.h"

#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/wait.h>

struct supervise {
        struct loop *loop;
        char *label;
        struct cgroup_manager *cgroups;
        char *cg, *sub;
        bool collect_data, keep_cgroup;
        unsigned *count;
        const struct supervise_ops *ops;
        void *data;
        int pidfd, status_fd, data_fd, bound_fd;
        struct loop_source *pid_src, *status_src, *data_src, *bound_src;
        struct loop_timer *timer;
        bool reaped, exited, timed_out, parked, abandoned, bound_gone;
        bool files_status; /* a files helper: status messages are parsed here */
        struct files_status_reader freader;
        unsigned busy; /* inside an owner's callback: free later */
        struct supervise_exit exit;
};

/* Helpers between a successful supervise_start and their exit: one counter for the daemon
 * (one thread), read by GET /metrics. */
static unsigned n_running;

unsigned supervise_running(void)
{
        return n_running;
}

static void close_src(struct loop_source **src, int *fd)
{
        loop_remove(*src);
        *src = NULL;
        if (*fd >= 0)
                close(*fd);
        *fd = -EBADF;
}

static void supervise_free(struct supervise *s)
{
        close_src(&s->pid_src, &s->pidfd);
        close_src(&s->status_src, &s->status_fd);
        close_src(&s->data_src, &s->data_fd);
        close_src(&s->bound_src, &s->bound_fd);
        loop_cancel_timer(s->timer);
        if (s->count)
                (*s->count)--;
        free(s->label);
        free(s->cg);
        free(s->sub);
        free(s);
}

/* After an owner's callback: it may have let go meanwhile. */
static void leave(struct supervise *s)
{
        s->busy--;
        if (!s->busy && s->abandoned && s->exited)
                supervise_free(s);
}

/* Nobody wants the bytes any more, but a helper that is left to finish must not block on a
 * full pipe: read and drop. false at EOF or error. */
static bool discard(int fd)
{
        char buf[4096];
        for (;;) {
                ssize_t n = read(fd, buf, sizeof(buf));
                if (n > 0)
                        continue;
                if (n < 0 && errno == EINTR)
                        continue;
                return n < 0 && errno == EAGAIN;
        }
}

static void forward_files_status(void *ctx, const struct files_status *st)
{
        struct supervise *s = ctx;
        if (!s->abandoned)
                s->ops->files_status(s->data, st);
}

static bool take_status(struct supervise *s)
{
        if (s->files_status)
                return files_status_read(s->status_fd, &s->freader, forward_files_status, s);
        if (s->abandoned || !s->ops->status)
                return discard(s->status_fd);
        return s->ops->status(s->data, s->status_fd);
}

static bool take_data(struct supervise *s)
{
        if (s->abandoned || !s->ops->data)
                return discard(s->data_fd);
        return s->ops->data(s->data, s->data_fd);
}

static void on_status(struct loop_source *src, int fd, uint32_t events, void *data)
{
        struct supervise *s = data;
        s->busy++;
        if (!take_status(s))
                close_src(&s->status_src, &s->status_fd);
        leave(s);
}

static void on_data_collect(struct loop_source *src, int fd, uint32_t events, void *data)
{
        struct supervise *s = data;
        s->busy++;
        if (!take_data(s))
                close_src(&s->data_src, &s->data_fd);
        leave(s);
}

/* A pulled pipe has bytes again (or its end): the consumer pulls. */
static void on_data_ready(struct loop_source *src, int fd, uint32_t events, void *data)
{
        struct supervise *s = data;
        loop_remove(s->data_src);
        s->data_src = NULL;
        if (!s->parked || s->abandoned || !s->ops->wake)
                return;
        s->parked = false;
        s->busy++;
        s->ops->wake(s->data);
        leave(s);
}

static void record_exit(struct supervise *s, const siginfo_t *si)
{
        s->reaped = true;
        s->exit.signaled = si->si_code != CLD_EXITED;
        s->exit.status = si->si_status;
}

static void on_exit_ready(struct loop_source *src, int fd, uint32_t events, void *data)
{
        struct supervise *s = data;
        if (!s->reaped) {
                siginfo_t si = {0};
                if (waitid(P_PIDFD, (id_t)s->pidfd, &si, WEXITED | WNOHANG) < 0) {
                        si.si_code = CLD_KILLED;
                        si.si_status = SIGKILL;
                } else if (si.si_pid == 0) {
                        return; /* not yet */
                }
                record_exit(s, &si);
        }
        n_running--;
        s->exited = true;
        s->exit.timed_out = s->timed_out;
        /* The bound process's end may have killed the helper before on_bound_exit ran. */
        struct pollfd p = {.fd = s->bound_fd, .events = POLLIN};
        s->exit.bound_gone = s->bound_gone || (s->bound_fd >= 0 && poll(&p, 1, 0) > 0);
        close_src(&s->bound_src, &s->bound_fd);
        close_src(&s->pid_src, &s->pidfd);
        loop_cancel_timer(s->timer);
        s->timer = NULL;
        s->busy++;
        /* Everything it wrote is in the pipes now. */
        if (s->status_fd >= 0) {
                take_status(s);
                close_src(&s->status_src, &s->status_fd);
        }
        if (s->collect_data && s->data_fd >= 0) {
                take_data(s);
                close_src(&s->data_src, &s->data_fd);
        } else {
                loop_remove(s->data_src); /* a parked reader is woken below */
                s->data_src = NULL;
        }
        if (s->cgroups && (!s->keep_cgroup || s->abandoned)) {
                int r = cgroup_env_prune(s->cgroups, s->cg, s->sub);
                if (r < 0 && r != -ENOENT)
                        log_debug("%s: removing cgroup %s: %s", s->label, s->sub, strerror(-r));
        }
        if (!s->abandoned) {
                /* A reader parked on the empty pipe must look again and see the end. */
                if (s->parked && s->ops->wake) {
                        s->parked = false;
                        s->ops->wake(s->data);
                }
                if (!s->abandoned && s->ops->exit)
                        s->ops->exit(s->data, &s->exit);
        }
        leave(s);
}

/* The process the helper is bound to is gone: so is everything the helper works for. */
static void on_bound_exit(struct loop_source *src, int fd, uint32_t events, void *data)
{
        struct supervise *s = data;
        loop_remove(s->bound_src);
        s->bound_src = NULL;
        s->bound_gone = true;
        supervise_kill(s);
}

static void on_deadline(struct loop_timer *t, void *data)
{
        struct supervise *s = data;
        s->timer = NULL;
        s->timed_out = true;
        /* The whole tree of the helper, including anything it put in the background. */
        if (s->cgroups) {
                int r = cgroup_env_kill_nowait(s->cgroups, s->cg, s->sub);
                if (r < 0 && r != -ENOENT)
                        log_warn("%s: killing a timed-out helper: %s", s->label, strerror(-r));
        }
        supervise_kill(s);
        if (!s->abandoned && s->ops->timeout) {
                s->busy++;
                s->ops->timeout(s->data);
                leave(s);
        }
}

static void kill_and_reap(const struct supervise_spec *spec, int pidfd)
{
        if (pidfd < 0)
                return;
        sys_pidfd_send_signal(pidfd, SIGKILL, 0);
        while (waitid(P_PIDFD, (id_t)pidfd, &(siginfo_t){0}, WEXITED) < 0 && errno == EINTR)
                ;
        if (spec->cgroups)
                cgroup_env_prune(spec->cgroups, spec->cgroup_name, spec->cgroup_sub);
}

int supervise_start(const struct supervise_spec *spec, const struct supervise_child *child,
                    struct supervise **ret)
{
        struct supervise *s = calloc(1, sizeof(*s));
        int r = -ENOMEM;
        if (!s)
                goto fail;
        *s = (struct supervise){.loop = spec->loop,
                                .cgroups = spec->cgroups,
                                .collect_data = spec->collect_data,
                                .keep_cgroup = spec->keep_cgroup,
                                .files_status = spec->files_status,
                                .ops = spec->ops,
                                .data = spec->data,
                                .pidfd = child->pidfd,
                                .status_fd = child->status_fd,
                                .data_fd = child->data_fd,
                                .bound_fd = -EBADF};
        s->label = strdup(spec->label ? spec->label : "helper");
        if (spec->cgroups) {
                s->cg = strdup(spec->cgroup_name);
                s->sub = strdup(spec->cgroup_sub);
        }
        if (!s->label || (spec->cgroups && (!s->cg || !s->sub)))
                goto fail;
        if (s->status_fd >= 0)
                fcntl(s->status_fd, F_SETFL, O_NONBLOCK);
        if (s->data_fd >= 0)
                fcntl(s->data_fd, F_SETFL, O_NONBLOCK);
        r = loop_add_fd(s->loop, s->pidfd, EPOLLIN, on_exit_ready, s, &s->pid_src);
        if (r >= 0 && s->status_fd >= 0)
                r = loop_add_fd(s->loop, s->status_fd, EPOLLIN, on_status, s, &s->status_src);
        if (r >= 0 && s->collect_data && s->data_fd >= 0)
                r = loop_add_fd(s->loop, s->data_fd, EPOLLIN, on_data_collect, s, &s->data_src);
        if (r >= 0 && spec->bound_pidfd > 0) {
                s->bound_fd = fcntl(spec->bound_pidfd, F_DUPFD_CLOEXEC, 3);
                r = s->bound_fd < 0 ? -errno
                                    : loop_add_fd(s->loop, s->bound_fd, EPOLLIN, on_bound_exit, s,
                                                  &s->bound_src);
        }
        /* A helper given a deadline never runs without one. */
        if (r >= 0 && spec->timeout_ms &&
            !(s->timer = loop_add_timer(s->loop, spec->timeout_ms, on_deadline, s)))
                r = -ENOMEM;
        if (r < 0)
                goto fail;
        s->count = spec->count;
        if (s->count)
                (*s->count)++;
        n_running++;
        *ret = s;
        return 0;
fail:
        kill_and_reap(spec, child->pidfd);
        if (s) {
                supervise_free(s); /* closes the child's fds */
        } else {
                int fds[] = {child->pidfd, child->status_fd, child->data_fd};
                for (size_t i = 0; i < ELEMENTSOF(fds); i++)
                        closep(&fds[i]);
        }
        return r;
}

int supervise_fork(const struct supervise_spec *spec, bool status_pipe, bool data_pipe,
                   supervise_child_fn fn, void *arg, struct supervise **ret)
{
        int st[2] = {-EBADF, -EBADF}, dt[2] = {-EBADF, -EBADF};
        int r = 0;
        if ((status_pipe && pipe2(st, O_CLOEXEC) < 0) || (data_pipe && pipe2(dt, O_CLOEXEC) < 0)) {
                r = -errno;
                for (int i = 0; i < 2; i++) {
                        closep(&st[i]);
                        closep(&dt[i]);
                }
                return r;
        }
        pid_t daemon_pid = getpid();
        pid_t pid = fork();
        if (pid == 0) {
                closep(&st[0]);
                closep(&dt[0]);
                fn(arg, daemon_pid, st[1], dt[1]);
                _exit(127);
        }
        if (pid < 0)
                r = -errno;
        closep(&st[1]);
        closep(&dt[1]);
        int pidfd = pid > 0 ? sys_pidfd_open(pid, 0) : -EBADF;
        if (pid > 0 && pidfd < 0) {
                /* Cannot happen for our own unreaped child; keep the invariant anyway. */
                r = pidfd;
                kill(pid, SIGKILL);
                while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
                        ;
        }
        if (r < 0) {
                closep(&st[0]);
                closep(&dt[0]);
                return r;
        }
        struct supervise_child c = {.pidfd = pidfd, .status_fd = st[0], .data_fd = dt[0]};
        return supervise_start(spec, &c, ret);
}

ssize_t supervise_read(struct supervise *s, char *buf, size_t max)
{
        if (s->data_fd < 0)
                return -EPIPE;
        bool eof = false;
        for (;;) {
                ssize_t n = read(s->data_fd, buf, max);
                if (n > 0)
                        return n;
                if (n == 0) {
                        eof = true;
                        break;
                }
                if (errno == EINTR)
                        continue;
                if (errno != EAGAIN)
                        return -errno;
                break;
        }
        /* Empty. Once the helper has exited nothing more can come (a process forked meanwhile
         * may hold a copy of the write end, so EOF alone is not the end); at EOF before that,
         * its exit (and its status) follows soon. */
        if (s->exited)
                return -EPIPE;
        s->parked = true;
        if (!eof && !s->data_src) {
                int r = loop_add_fd(s->loop, s->data_fd, EPOLLIN, on_data_ready, s, &s->data_src);
                if (r < 0)
                        return r;
        }
        return 0;
}

void supervise_cancel_deadline(struct supervise *s)
{
        loop_cancel_timer(s->timer);
        s->timer = NULL;
}

int supervise_signal(struct supervise *s, int sig)
{
        if (s->reaped || s->pidfd < 0)
                return -ESRCH;
        return sys_pidfd_send_signal(s->pidfd, sig, 0);
}

void supervise_kill(struct supervise *s)
{
        if (s && !s->reaped && s->pidfd >= 0)
                sys_pidfd_send_signal(s->pidfd, SIGKILL, 0);
}

bool supervise_exited(const struct supervise *s)
{
        return s->exited;
}

const struct supervise_exit *supervise_exit_info(const struct supervise *s)
{
        return s->reaped ? &s->exit : NULL;
}

bool supervise_reap_now(struct supervise *s, unsigned wait_ms)
{
        if (s->reaped || s->pidfd < 0)
                return s->reaped;
        struct pollfd p = {.fd = s->pidfd, .events = POLLIN};
        if (poll(&p, 1, (int)wait_ms) <= 0)
                return false;
        siginfo_t si = {0};
        if (waitid(P_PIDFD, (id_t)s->pidfd, &si, WEXITED | WNOHANG) == 0 && si.si_pid)
                record_exit(s, &si);
        return s->reaped;
}

void supervise_abandon(struct supervise *s, bool kill)
{
        if (!s)
                return;
        s->abandoned = true;
        s->parked = false;
        if (kill)
                supervise_kill(s);
        if (!s->collect_data)
                close_src(&s->data_src, &s->data_fd); /* nobody pulls any more */
        if (s->exited && !s->busy)
                supervise_free(s);
}

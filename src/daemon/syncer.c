/* The sync process (syncer.h). The loop's side keeps the queue; the process only answers "the
 * fd you named is synced (or the snapshot you named is made), with this result", one request at
 * a time. */
#include "daemon/syncer.h"
#include "daemon/log.h"
#include "daemon/loop.h"
#include "lib/btrfs.h"
#include "lib/util.h"

#include <linux/sched.h>
#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>

/* How long syncer_free lets a running sync finish. */
#define SYNCER_END_MS 5000

enum sync_kind {
        SYNC_DATA,     /* fdatasync of fd (syncer_after) */
        SYNC_FS,       /* a btrfs commit of fd's file system (syncer_fs_after) */
        SYNC_SNAPSHOT, /* a snapshot of the subvolume fd as name in dirfd (syncer_snapshot) */
};

struct syncer_wait {
        struct syncer *owner;
        int fd;
        enum sync_kind kind;
        int dirfd;                         /* SYNC_SNAPSHOT */
        char name[SYNCER_SNAPSHOT_NAME_MAX]; /* SYNC_SNAPSHOT */
        syncer_fn fn;
        void *data;
        bool in_flight; /* covered by the sync that runs now */
        struct syncer_wait *next;
};

struct syncer {
        struct loop *loop;
        const char *name;   /* the process's, "paddockd-sync" (a string constant) */
        pid_t pid;          /* the sync process; 0 once reaped */
        int pidfd;
        int req_w, req_r;   /* loop → process: the fd to sync */
        int done_w, done_r; /* process → loop: its result */
        struct loop_source *done_src, *exit_src;
        bool running; /* a sync is in flight */
        unsigned long syncs; /* started so far (the unit test counts the group commits) */
        /* PADDOCK_TEST_SYNC_DELAY_MS: each sync waits this long first, so that a test can
         * hold a create at its sync (test_create_async.py). Read once, before the clone. */
        struct timespec test_delay;
        struct syncer_wait *waits; /* in order of arrival */
        /* Answered by the sync that just ended, each taken off before its function runs: a
         * function may still cancel one of the others (syncer_cancel looks here too). */
        struct syncer_wait *answering;
};

/* A request on the pipe (well below PIPE_BUF: one write, never split). */
struct sync_req {
        int fd;
        int kind;
        int dirfd;
        char name[SYNCER_SNAPSHOT_NAME_MAX];
};

static int sync_one(const struct sync_req *q)
{
        switch (q->kind) {
        case SYNC_FS:
                return btrfs_sync(q->fd);
        case SYNC_SNAPSHOT:
                return btrfs_snapshot(q->fd, q->dirfd, q->name, false);
        default:
                return fdatasync(q->fd) < 0 ? -errno : 0;
        }
}

static struct sync_req req_of(const struct syncer_wait *w)
{
        struct sync_req q = {.fd = w->fd, .kind = (int)w->kind, .dirfd = w->dirfd};
        memcpy(q.name, w->name, sizeof(q.name));
        return q;
}

/* The process: a copy of the daemon's memory at syncer_new, the daemon's fd table itself.
 * Nothing here closes an fd (it would close the daemon's) or allocates. */
static _Noreturn void sync_main(const struct syncer *s, pid_t daemon)
{
        sigset_t all;
        sigfillset(&all);
        sigprocmask(SIG_SETMASK, &all, NULL); /* the daemon's signals are the daemon's */
        prctl(PR_SET_NAME, s->name);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != daemon)
                _exit(0); /* the daemon died before the line above */
        for (;;) {
                struct sync_req q;
                ssize_t n = read(s->req_r, &q, sizeof(q));
                if (n < 0 && errno == EINTR)
                        continue;
                if (n != (ssize_t)sizeof(q) || q.fd < 0)
                        _exit(0); /* syncer_free's request to end (or the pipe is gone) */
                if (q.kind != SYNC_SNAPSHOT && (s->test_delay.tv_sec || s->test_delay.tv_nsec))
                        nanosleep(&s->test_delay, NULL);
                q.name[sizeof(q.name) - 1] = 0;
                int result = sync_one(&q);
                while (write(s->done_w, &result, sizeof(result)) < 0 && errno == EINTR)
                        ;
        }
}

/* Answers and frees w (taken off the queue by the caller). */
static void answer(struct syncer_wait *w, int result)
{
        syncer_fn fn = w->fn;
        void *fn_data = w->data;
        free(w);
        fn(result, fn_data);
}

/* Starts a sync for the oldest waiting request and every other one on the same fd (a
 * snapshot is a job of its own). */
static void start_next(struct syncer *s)
{
        if (s->running || !s->waits || !s->pid)
                return;
        struct sync_req q = req_of(s->waits);
        s->waits->in_flight = true;
        for (struct syncer_wait *w = s->waits->next; w && q.kind != SYNC_SNAPSHOT; w = w->next)
                if (w->fd == q.fd && (int)w->kind == q.kind)
                        w->in_flight = true;
        s->running = true;
        s->syncs++;
        /* One request at a time in a pipe: the write cannot block or be short. */
        while (write(s->req_w, &q, sizeof(q)) < 0 && errno == EINTR)
                ;
}

/* Takes the in-flight requests off the queue, in order. */
static struct syncer_wait *take_in_flight(struct syncer *s)
{
        struct syncer_wait *taken = NULL, **tail = &taken;
        for (struct syncer_wait **pp = &s->waits; *pp;) {
                struct syncer_wait *w = *pp;
                if (w->in_flight) {
                        *pp = w->next;
                        w->next = NULL;
                        *tail = w;
                        tail = &w->next;
                } else {
                        pp = &w->next;
                }
        }
        return taken;
}

static void on_done(struct loop_source *src, int fd, uint32_t events, void *data)
{
        (void)src;
        (void)events;
        struct syncer *s = data;
        int result;
        if (read(fd, &result, sizeof(result)) != (ssize_t)sizeof(result))
                return;
        s->running = false;
        /* Take the answered ones off first: a function may add or cancel others. */
        s->answering = take_in_flight(s);
        start_next(s);
        while (s->answering) {
                struct syncer_wait *w = s->answering;
                s->answering = w->next;
                answer(w, result);
        }
}

/* The process died (killed by someone: it never exits on its own while the daemon runs).
 * Everything still waiting is synced here, in the loop, and so is every later request
 * (syncer_after answers -ESRCH). */
static void on_process_exit(struct loop_source *src, int fd, uint32_t events, void *data)
{
        (void)src;
        (void)fd;
        (void)events;
        struct syncer *s = data;
        siginfo_t si = {0};
        waitid(P_PIDFD, (id_t)s->pidfd, &si, WEXITED | WNOHANG);
        log_error("the %s process (pid %d) is gone (%s %d): what it had queued runs in the loop",
                  s->name, (int)s->pid, si.si_code == CLD_EXITED ? "exit" : "signal",
                  si.si_status);
        s->pid = 0;
        loop_remove(s->exit_src);
        s->exit_src = NULL;
        s->running = false;
        while (s->waits) {
                struct syncer_wait *w = s->waits;
                s->waits = w->next;
                struct sync_req q = req_of(w);
                answer(w, sync_one(&q));
        }
}

static void close_pipes(struct syncer *s)
{
        closep(&s->req_r);
        closep(&s->req_w);
        closep(&s->done_r);
        closep(&s->done_w);
}

int syncer_new(struct loop *l, const char *name, struct syncer **ret)
{
        struct syncer *s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        *s = (struct syncer){.loop = l, .name = name, .pidfd = -EBADF, .req_r = -EBADF,
                             .req_w = -EBADF, .done_r = -EBADF, .done_w = -EBADF};
        const char *delay = getenv("PADDOCK_TEST_SYNC_DELAY_MS");
        if (delay) {
                unsigned long ms = strtoul(delay, NULL, 10);
                s->test_delay = (struct timespec){.tv_sec = (time_t)(ms / 1000),
                                                  .tv_nsec = (long)(ms % 1000) * 1000000L};
        }
        int req[2], done[2], r;
        if (pipe2(req, O_CLOEXEC) < 0) {
                r = -errno;
                free(s);
                return r;
        }
        s->req_r = req[0];
        s->req_w = req[1];
        if (pipe2(done, O_CLOEXEC | O_NONBLOCK) < 0) {
                r = -errno;
                close_pipes(s);
                free(s);
                return r;
        }
        s->done_r = done[0];
        s->done_w = done[1];
        pid_t daemon = getpid();
        int pidfd = -EBADF;
        struct clone_args args = {.flags = CLONE_FILES | CLONE_PIDFD,
                                  .pidfd = (uint64_t)(uintptr_t)&pidfd,
                                  .exit_signal = SIGCHLD};
        pid_t pid = (pid_t)syscall(SYS_clone3, &args, sizeof(args));
        if (pid == 0)
                sync_main(s, daemon);
        if (pid < 0) {
                r = -errno;
                close_pipes(s);
                free(s);
                return r;
        }
        s->pid = pid;
        s->pidfd = pidfd;
        if ((r = loop_add_fd(l, s->done_r, EPOLLIN, on_done, s, &s->done_src)) < 0 ||
            (r = loop_add_fd(l, s->pidfd, EPOLLIN, on_process_exit, s, &s->exit_src)) < 0) {
                syncer_free(s);
                return r;
        }
        *ret = s;
        return 0;
}

void syncer_free(struct syncer *s)
{
        if (!s)
                return;
        loop_remove(s->exit_src);
        loop_remove(s->done_src);
        if (s->pid) {
                /* An fd of -1 asks it to end after the sync it may be running (closing our end
                 * would not do: it shares our fd table, so it holds the same end). */
                struct sync_req end = {.fd = -1};
                while (write(s->req_w, &end, sizeof(end)) < 0 && errno == EINTR)
                        ;
                /* A sync still running ends first; one stuck on a dead disk is not waited for
                 * long (killed, it ends when the kernel lets it). */
                struct pollfd p = {.fd = s->pidfd, .events = POLLIN};
                while (poll(&p, 1, SYNCER_END_MS) < 0 && errno == EINTR)
                        ;
                int flags = WEXITED;
                if (!(p.revents & POLLIN)) {
                        log_warn("the %s process (pid %d) is still at work: killed, not "
                                 "waited for", s->name, (int)s->pid);
                        sys_pidfd_send_signal(s->pidfd, SIGKILL, 0);
                        flags |= WNOHANG; /* whoever inherits it reaps it */
                }
                while (waitid(P_PIDFD, (id_t)s->pidfd, &(siginfo_t){0}, flags) < 0 &&
                       errno == EINTR)
                        ;
        }
        closep(&s->pidfd);
        close_pipes(s);
        while (s->waits) {
                struct syncer_wait *w = s->waits;
                s->waits = w->next;
                free(w);
        }
        free(s);
}

static int queue(struct syncer *s, const struct syncer_wait *job, struct syncer_wait **ret)
{
        if (!s || !s->pid)
                return -ESRCH;
        struct syncer_wait *w = calloc(1, sizeof(*w));
        if (!w)
                return -ENOMEM;
        *w = *job;
        w->owner = s;
        struct syncer_wait **pp = &s->waits;
        while (*pp)
                pp = &(*pp)->next;
        *pp = w;
        /* One that arrives while a sync runs waits for the next: the running one may have
         * started before this request's write. */
        start_next(s);
        if (ret)
                *ret = w;
        return 0;
}

int syncer_after(struct syncer *s, int fd, syncer_fn fn, void *data, struct syncer_wait **ret)
{
        return queue(s, &(struct syncer_wait){.fd = fd, .kind = SYNC_DATA, .fn = fn, .data = data},
                     ret);
}

int syncer_fs_after(struct syncer *s, int fd, syncer_fn fn, void *data, struct syncer_wait **ret)
{
        return queue(s, &(struct syncer_wait){.fd = fd, .kind = SYNC_FS, .fn = fn, .data = data},
                     ret);
}

int syncer_snapshot(struct syncer *s, int src_fd, int dirfd, const char *name, syncer_fn fn,
                    void *data, struct syncer_wait **ret)
{
        struct syncer_wait w = {.fd = src_fd, .kind = SYNC_SNAPSHOT, .dirfd = dirfd, .fn = fn,
                                .data = data};
        if (!name || !*name || strchr(name, '/') || strlen(name) >= sizeof(w.name))
                return -EINVAL;
        memcpy(w.name, name, strlen(name) + 1);
        return queue(s, &w, ret);
}

static bool unqueue(struct syncer_wait **head, struct syncer_wait *w)
{
        for (struct syncer_wait **pp = head; *pp; pp = &(*pp)->next)
                if (*pp == w) {
                        *pp = w->next;
                        free(w);
                        return true;
                }
        return false;
}

void syncer_cancel(struct syncer_wait *w)
{
        if (w && !unqueue(&w->owner->waits, w))
                unqueue(&w->owner->answering, w);
}

pid_t syncer_pid(const struct syncer *s)
{
        return s ? s->pid : 0;
}

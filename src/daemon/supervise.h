/* One supervisor for every process the daemon forks to do a job for a client: file operations
 * and watches (lib/files.c enters the environment), exec sessions (lib/join.c), image jobs and
 * exports, and the spare disks made ahead of creates (host helpers, supervise_fork).
 *
 * A helper's life:
 *   fork      the caller forks it (files_spawn; an exec slot clones a command) and hands
 *             over its pidfd and the read ends of up to two pipes (supervise_start), or
 *             supervise_fork forks a host helper itself. From then on the supervisor owns
 *             those fds.
 *   pipes     status: small messages (files' status records, an image job's lines), read by
 *             the owner's status callback whenever the pipe is readable and once more after
 *             exit. data: bulk output, either collected from the loop (data callback) or
 *             pulled by a consumer (supervise_read; the wake callback says when to pull again):
 *             a consumer that does not pull leaves the pipe full and the helper blocked, so
 *             nothing is buffered in the daemon.
 *   deadline  an optional timer: when it fires, the helper's cgroup (when it has one) and the
 *             helper are killed and the exit is reported as timed out.
 *   binding   optionally to another process (a watch to its environment's PID 1): when that
 *             one exits, the helper is killed too.
 *   exit      the pidfd becomes readable: the helper is reaped (waitid P_PIDFD), the status
 *             pipe drained, a collected data pipe drained and closed, the helper's own exec
 *             cgroup (ENV/SUB) removed, then the exit callback runs.
 *   cleanup   the owner lets go with supervise_abandon, at any time (inside a callback too):
 *             no callback runs after that; a running helper is killed or left to finish, and
 *             is still reaped and its cgroup removed. The supervisor frees itself.
 *
 * An exec session hands over only its pidfd: its stdin, stdout/stderr and terminal (three
 * pipes and a pty, with output caps and back-pressure both ways) stay exec.c's.
 *
 * Costs: one small allocation, 1-4 fds and as many epoll sources, one timer per helper; the
 * data pipe's kernel buffer (64 KiB by default) is all that is buffered for a pulled stream.
 * Callbacks run from the event loop and must not block. Nothing here speaks HTTP: whoever
 * serves a stream passes the wake callback as its sink. */
#pragma once
#include "daemon/loop.h"
#include "lib/cgroup.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct supervise;
struct files_status;

struct supervise_exit {
        bool signaled; /* killed by a signal (status is the signal), else exited (status) */
        int status;
        bool timed_out; /* the deadline passed and the supervisor killed it */
        bool bound_gone; /* the process it was bound to (spec.bound_pidfd) had exited */
};

/* The exit code as a shell shows it: the status, or 128+N for signal N. */
static inline int supervise_exit_code(const struct supervise_exit *x)
{
        return x->signaled ? 128 + x->status : x->status;
}

static inline bool supervise_exit_ok(const struct supervise_exit *x)
{
        return !x->signaled && x->status == 0;
}

struct supervise_ops {
        /* The status pipe is readable (and once more right after exit): read what is there
         * (the fd is non-blocking). false: done with it (EOF or error), close it. */
        bool (*status)(void *data, int fd);
        /* spec.files_status (supervise_files) instead: each status message, parsed. */
        void (*files_status)(void *data, const struct files_status *st);
        /* Collected data (spec.collect_data): the same for the data pipe. */
        bool (*data)(void *data, int fd);
        /* A pulled data pipe (supervise_read said 0): more bytes, or the end, can be read. */
        void (*wake)(void *data);
        /* The deadline passed; the helper is being killed (its exit follows). May be NULL. */
        void (*timeout)(void *data);
        /* Reaped, pipes drained, cgroup removed. The data pipe of a pulled stream stays open
         * until it is read to its end or the owner lets go. */
        void (*exit)(void *data, const struct supervise_exit *x);
};

struct supervise_spec {
        struct loop *loop;
        const char *label; /* for logs: "ENV: files" */
        /* The helper's own cgroup (ENV/SUB, made by whoever forked it): killed with it on the
         * deadline, removed after its exit. cgroups NULL: a host helper without one. */
        struct cgroup_manager *cgroups;
        const char *cgroup_name, *cgroup_sub;
        uint64_t timeout_ms; /* 0: no deadline */
        bool keep_cgroup;    /* not removed after the exit: the owner reuses or removes it */
        bool collect_data;   /* read the data pipe from the loop (ops->data), not supervise_read */
        bool files_status;   /* status messages are lib/files.h's: parsed, ops->files_status */
        unsigned *count;     /* incremented while the helper or its owner lives, or NULL */
        /* Bind the helper to another process (an environment's PID 1): when that one exits,
         * the helper is killed. <= 0 (a zeroed spec): not bound. It is duplicated. */
        int bound_pidfd;
        const struct supervise_ops *ops;
        void *data;
};

struct supervise_child {
        int pidfd;     /* a child of the daemon, not yet reaped */
        int status_fd; /* read ends, or -EBADF */
        int data_fd;
};

/* Watch a forked helper. Takes the child's fds in every case; on failure (-errno) the helper
 * is killed, reaped and its cgroup removed, and no callback runs. */
int supervise_start(const struct supervise_spec *spec, const struct supervise_child *child,
                    struct supervise **ret);

/* Fork a host helper (no environment, no cgroup) and supervise it. fn runs in the child with
 * the daemon's pid and the write ends of the pipes asked for (else -EBADF); it must not return.
 * Every other fd of the daemon is still open in it: fn closes them (image_helper_init). */
typedef void (*supervise_child_fn)(void *arg, pid_t daemon_pid, int status_fd, int data_fd);
int supervise_fork(const struct supervise_spec *spec, bool status_pipe, bool data_pipe,
                   supervise_child_fn fn, void *arg, struct supervise **ret);

/* Pull from the data pipe: > 0 bytes; 0 nothing now (ops->wake follows when there is); -EPIPE
 * the end: the pipe is empty or at EOF and the helper has exited (supervise_exit_info says
 * how); another -errno: a read error. */
ssize_t supervise_read(struct supervise *s, char *buf, size_t max);

/* supervise_files.c. Files helpers (lib/files.h) in environment v, in their own exec cgroup KIND-N below v's.
 * spec gives ops, data, timeout_ms, collect_data and count; the rest comes from v (bind: to its
 * PID 1). Status messages arrive parsed (ops->files_status), none after the owner let go. On
 * failure a message for the client is in err ("starting the file helper: ..."). */
struct engine;
struct env;
struct files_request;
int supervise_files(struct engine *e, struct env *v, const char *kind, const char *noun,
                    const struct files_request *rq, bool bind, const struct supervise_spec *spec,
                    struct supervise **ret, char *err, size_t errlen);

/* The first byte is out: the deadline no longer applies. */
void supervise_cancel_deadline(struct supervise *s);
int supervise_signal(struct supervise *s, int sig); /* -ESRCH once it has exited */
void supervise_kill(struct supervise *s);            /* SIGKILL, if still running */
bool supervise_exited(const struct supervise *s);
/* NULL until the helper has been reaped. */
const struct supervise_exit *supervise_exit_info(const struct supervise *s);
/* Reap now, waiting up to wait_ms for the exit, without running the exit callback (that still
 * follows from the loop). For a caller that must know the process is gone before it goes on.
 * true when reaped. */
bool supervise_reap_now(struct supervise *s, unsigned wait_ms);

/* The owner lets go: no more callbacks. kill: SIGKILL a helper still running (else it runs to
 * its end). Either way it is reaped and its cgroup removed before the supervisor frees itself.
 * NULL is fine. */
void supervise_abandon(struct supervise *s, bool kill);

/* Helpers started and not yet exited, of every kind (GET /metrics). */
unsigned supervise_running(void);

/* GET /v1/envs/{name}/files/watch?path=DIR[&recursive=0]: the changes below DIR as an NDJSON
 * stream, until the client goes away, the environment stops or DIR itself is removed.
 *
 * One files helper per watch (FILES_WATCH: lib/files.c enters the environment, lib/
 * files_watch.c watches), in a child cgroup of the environment ("watch-N"), so its inotify
 * watches and its pipe are charged to the environment and its stop kills the helper with
 * everything else. This file only moves bytes: the helper writes whole lines into its pipe
 * (1 MiB) and MHD pulls from it as fast as the client reads -- nothing is buffered here, and a
 * client that falls behind makes the helper drop events (it says so once, "overflow").
 *
 * How a watch ends, and who reaps the helper (always on_helper_exit, from its pidfd):
 *   - the client disconnects: stream_closed kills the helper. A suspended (idle) stream only
 *     learns of it when it next writes: the helper sends an empty line after 5 s of silence.
 *   - the environment's PID 1 exits: on_env_exit kills the helper (the removal of the
 *     environment's cgroups would as well); the stream ends after what was queued.
 *   - DIR is removed: the helper reports "delete" for it and exits; the stream ends.
 *   - the helper fails or dies otherwise: the stream is cut off without its last chunk.
 * Errors before the first byte (no such directory, not a directory, not running) are JSON. */
#include "daemon/api.h"
#include "daemon/log.h"
#include "lib/files.h"
#include "lib/util.h"

#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/wait.h>

#define WATCH_MAX_ACTIVE  64 /* helpers, each one inotify instance of a user's 128 */
#define WATCH_MAX_PER_ENV 16
#define WATCH_SETUP_MS    (60u * 1000) /* the first scan of up to 8192 directories */

struct watch {
        struct engine *eng;
        struct request *req; /* NULL once answered with an error or the stream is closed */
        char env[64], cg[80], sub[32];
        char path[FILES_PATH_MAX];
        int pidfd, status_fd, data_fd, env_fd;
        struct loop_source *pid_src, *status_src, *data_src, *env_src;
        struct loop_timer *timer;
        bool exited, streaming, timed_out, env_gone, killed_by_signal;
        int exit_status;
        struct files_status done;
        bool has_done;
        struct files_status_reader status; /* a status message being received */
        int refs; /* the helper (until reaped) and the request (until answered or closed) */
        struct watch *next;
};

static struct watch *watches;
static unsigned active;

static void close_src(struct loop_source **src, int *fd)
{
        loop_remove(*src);
        *src = NULL;
        if (*fd >= 0)
                close(*fd);
        *fd = -EBADF;
}

static void watch_unref(struct watch *w)
{
        if (--w->refs > 0)
                return;
        close_src(&w->pid_src, &w->pidfd);
        close_src(&w->status_src, &w->status_fd);
        close_src(&w->data_src, &w->data_fd);
        close_src(&w->env_src, &w->env_fd);
        loop_cancel_timer(w->timer);
        for (struct watch **p = &watches; *p; p = &(*p)->next)
                if (*p == w) {
                        *p = w->next;
                        break;
                }
        free(w);
        active--;
}

static void kill_helper(struct watch *w)
{
        if (!w->exited && w->pidfd >= 0)
                sys_pidfd_send_signal(w->pidfd, SIGKILL, 0);
}

/* ------------------------------------------------------------------------------ the stream */

static void on_data(struct loop_source *s, int fd, uint32_t events, void *data)
{
        struct watch *w = data;
        loop_remove(w->data_src);
        w->data_src = NULL;
        if (w->req)
                http_stream_wake(w->req);
}

/* The environment stopped, or the directory went away (the helper said so and exited 0):
 * the stream ends. Anything else cuts it short, so that the client can tell. */
static bool ended_badly(struct watch *w)
{
        if (w->env_gone)
                return false;
        /* The stop's cgroup kill may have reached the helper before on_env_exit ran. */
        struct pollfd p = {.fd = w->env_fd, .events = POLLIN};
        if (w->env_fd >= 0 && poll(&p, 1, 0) > 0)
                return false;
        return w->killed_by_signal || w->exit_status != 0 || !w->has_done || w->done.err < 0;
}

/* MHD pulls: straight from the pipe into its buffer. */
static ssize_t stream_read(void *data, char *buf, size_t max)
{
        struct watch *w = data;
        if (w->data_fd < 0)
                return -1;
        for (;;) {
                ssize_t n = read(w->data_fd, buf, max);
                if (n > 0)
                        return n;
                if (n == 0)
                        return -1;
                if (errno == EINTR)
                        continue;
                if (errno != EAGAIN)
                        return -1;
                break;
        }
        /* Empty. Once the helper has exited nothing more can come (a process forked meanwhile
         * may hold a copy of the write end, so EOF alone is not enough). */
        if (w->exited)
                return ended_badly(w) ? -2 : -1;
        if (!w->data_src &&
            loop_add_fd(engine_loop(w->eng), w->data_fd, EPOLLIN, on_data, w, &w->data_src) < 0)
                return -1;
        return 0;
}

static void stream_closed(void *data)
{
        struct watch *w = data;
        w->req = NULL;
        close_src(&w->data_src, &w->data_fd);
        kill_helper(w); /* the client is gone, or the helper already is */
        watch_unref(w);
}

static const struct http_stream_ops stream_ops = {.read = stream_read, .closed = stream_closed};

static void start_stream(struct watch *w)
{
        loop_cancel_timer(w->timer);
        w->timer = NULL;
        if (!w->req || w->streaming)
                return;
        w->streaming = true;
        /* The request's reference now belongs to the stream: stream_closed drops it. */
        req_on_free(w->req, NULL, NULL);
        http_reply_stream(w->req, 200, "application/x-ndjson", &stream_ops, w);
}

/* ------------------------------------------------------------------------------ the helper */

/* Before the stream started: the one answer, an error. */
static void finish(struct watch *w)
{
        struct request *r = w->req;
        if (!r || w->streaming)
                return;
        w->req = NULL;
        req_on_free(r, NULL, NULL);
        if (w->timed_out)
                http_reply_error(r, 503, "unavailable", "%s: setting up the watch timed out",
                                 w->path);
        else if (w->env_gone)
                http_reply_error(r, 409, "conflict", "%s stopped", w->env);
        else if (w->has_done && w->done.err < 0)
                http_reply_errno(r, w->done.err, "%s",
                                 w->done.msg[0] ? w->done.msg : strerror(-w->done.err));
        else
                http_reply_error(r, 500, "internal", "the watch helper died (%s %d)",
                                 w->killed_by_signal ? "signal" : "exit status", w->exit_status);
        watch_unref(w);
}

static void take_status(void *ctx, const struct files_status *st)
{
        struct watch *w = ctx;
        if (st->phase == FILES_READY && !w->has_done) {
                start_stream(w);
        } else if (st->phase == FILES_DONE && !w->has_done) {
                w->done = *st;
                w->done.msg[sizeof(w->done.msg) - 1] = 0;
                w->has_done = true;
        }
}

static void on_status(struct loop_source *s, int fd, uint32_t events, void *data)
{
        struct watch *w = data;
        if (!files_status_read(w->status_fd, &w->status, take_status, w))
                close_src(&w->status_src, &w->status_fd);
}

static void on_helper_exit(struct loop_source *s, int fd, uint32_t events, void *data)
{
        struct watch *w = data;
        siginfo_t si = {0};
        if (waitid(P_PIDFD, (id_t)w->pidfd, &si, WEXITED | WNOHANG) < 0) {
                si.si_code = CLD_KILLED;
                si.si_status = SIGKILL;
        } else if (si.si_pid == 0) {
                return; /* not yet */
        }
        w->exited = true;
        w->killed_by_signal = si.si_code != CLD_EXITED;
        w->exit_status = si.si_status;
        close_src(&w->pid_src, &w->pidfd);
        loop_remove(w->env_src); /* the fd stays: ended_badly asks it */
        w->env_src = NULL;
        loop_cancel_timer(w->timer);
        w->timer = NULL;
        if (w->status_fd >= 0) {
                /* everything it wrote is in the pipe now */
                files_status_read(w->status_fd, &w->status, take_status, w);
                close_src(&w->status_src, &w->status_fd);
        }
        int r = cgroup_env_prune(engine_cgroups(w->eng), w->cg, w->sub);
        if (r < 0 && r != -ENOENT)
                log_debug("%s: removing cgroup %s: %s", w->env, w->sub, strerror(-r));
        if (w->streaming) {
                if (w->has_done && w->done.err < 0)
                        log_warn("%s: watch of %s ended: %s", w->env, w->path, w->done.msg);
                /* A reader parked on the empty pipe must look again and see the end. */
                loop_remove(w->data_src);
                w->data_src = NULL;
                if (w->req)
                        http_stream_wake(w->req);
        } else {
                close_src(&w->data_src, &w->data_fd);
                finish(w);
        }
        watch_unref(w);
}

/* The environment's PID 1 is gone: so is everything the watch could report. */
static void on_env_exit(struct loop_source *s, int fd, uint32_t events, void *data)
{
        struct watch *w = data;
        loop_remove(w->env_src);
        w->env_src = NULL;
        w->env_gone = true;
        kill_helper(w);
}

static void on_timeout(struct loop_timer *t, void *data)
{
        struct watch *w = data;
        w->timer = NULL;
        w->timed_out = true;
        log_warn("%s: setting up a watch of %s timed out; killing its helper", w->env, w->path);
        kill_helper(w);
}

static void on_request_gone(void *data)
{
        struct watch *w = data;
        w->req = NULL;
        kill_helper(w);
        watch_unref(w);
}

/* ------------------------------------------------------------------------------ the request */

static bool q_path(struct request *r, char *out)
{
        const char *s = req_query(r, "path");
        int rc = s ? files_path_normalize(s, out, FILES_PATH_MAX) : -EINVAL;
        if (rc == -ENAMETOOLONG || rc == -ENOBUFS)
                http_reply_error(r, 400, "invalid_argument",
                                 "path: longer than %d bytes, or a name longer than 255",
                                 FILES_PATH_MAX - 1);
        else if (rc < 0)
                http_reply_error(r, 400, "invalid_argument",
                                 "path: required, an absolute path inside the environment");
        return rc >= 0;
}

static bool q_recursive(struct request *r, bool *ret)
{
        const char *s = req_query(r, "recursive");
        if (!s || !*s || !strcmp(s, "1") || !strcmp(s, "true") || !strcmp(s, "yes"))
                *ret = true;
        else if (!strcmp(s, "0") || !strcmp(s, "false") || !strcmp(s, "no"))
                *ret = false;
        else {
                http_reply_error(r, 400, "invalid_argument", "recursive: use 1 or 0");
                return false;
        }
        return true;
}

static unsigned watches_of(const char *env)
{
        unsigned n = 0;
        for (struct watch *w = watches; w; w = w->next)
                n += !strcmp(w->env, env);
        return n;
}

/* Fork the helper and wire it to the loop. Answers r on failure (and frees w). */
static bool start_helper(struct request *r, struct engine *e, struct env *v, struct watch *w,
                         bool recursive)
{
        struct files_request rq = {.op = FILES_WATCH,
                                   .path = w->path,
                                   .upload_fd = -EBADF,
                                   .mode = -1,
                                   .recursive = recursive};
        struct files_target t = {.env_pidfd = env_pidfd(v),
                                 .cgroups = engine_cgroups(e),
                                 .cgroup_name = w->cg,
                                 .cgroup_sub = w->sub};
        struct files_child c;
        int rc = files_spawn(&t, &rq, &c);
        if (rc < 0) {
                http_reply_errno(r, rc, "starting the watch helper: %s", strerror(-rc));
                free(w);
                return false;
        }
        w->pidfd = c.pidfd;
        w->status_fd = c.status_fd;
        w->data_fd = c.data_fd;
        fcntl(w->status_fd, F_SETFL, O_NONBLOCK);
        fcntl(w->data_fd, F_SETFL, O_NONBLOCK);
        w->env_fd = fcntl(env_pidfd(v), F_DUPFD_CLOEXEC, 3);
        rc = w->env_fd < 0 ? -errno : 0;
        struct loop *l = engine_loop(e);
        if (rc >= 0)
                rc = loop_add_fd(l, w->pidfd, EPOLLIN, on_helper_exit, w, &w->pid_src);
        if (rc >= 0)
                rc = loop_add_fd(l, w->status_fd, EPOLLIN, on_status, w, &w->status_src);
        if (rc >= 0)
                rc = loop_add_fd(l, w->env_fd, EPOLLIN, on_env_exit, w, &w->env_src);
        if (rc < 0) {
                sys_pidfd_send_signal(w->pidfd, SIGKILL, 0);
                waitid(P_PIDFD, (id_t)w->pidfd, &(siginfo_t){0}, WEXITED);
                cgroup_env_prune(engine_cgroups(e), w->cg, w->sub);
                http_reply_errno(r, rc, "watching the watch helper: %s", strerror(-rc));
                close_src(&w->pid_src, &w->pidfd);
                close_src(&w->status_src, &w->status_fd);
                close_src(&w->data_src, &w->data_fd);
                close_src(&w->env_src, &w->env_fd);
                free(w);
                return false;
        }
        return true;
}

void api_env_watch(struct request *r, struct engine *e, struct env *v)
{
        if (strcmp(req_method(r), "GET") != 0) {
                http_reply_error(r, 405, "method_not_allowed", "%s is not allowed on %s",
                                 req_method(r), req_path(r));
                return;
        }
        struct watch *w = calloc(1, sizeof(*w));
        if (!w) {
                http_reply_errno(r, -ENOMEM, "out of memory");
                return;
        }
        bool recursive = true;
        if (!q_path(r, w->path) || !q_recursive(r, &recursive)) {
                free(w);
                return;
        }
        if (!env_running(v) || env_paused(v)) {
                http_reply_error(r, 409, "conflict", "%s is %s", env_name(v),
                                 env_running(v) ? "paused" : "not running");
                free(w);
                return;
        }
        if (active >= WATCH_MAX_ACTIVE || watches_of(env_name(v)) >= WATCH_MAX_PER_ENV) {
                http_reply_error(r, 503, "unavailable",
                                 "too many watches (limit %d, %d per environment)",
                                 WATCH_MAX_ACTIVE, WATCH_MAX_PER_ENV);
                free(w);
                return;
        }
        w->eng = e;
        w->pidfd = w->status_fd = w->data_fd = w->env_fd = -EBADF;
        snprintf(w->env, sizeof(w->env), "%s", env_name(v));
        snprintf(w->cg, sizeof(w->cg), "%s", env_cgroup(v));
        snprintf(w->sub, sizeof(w->sub), "watch-%u", env_next_exec_id(v));
        if (!start_helper(r, e, v, w, recursive))
                return;
        active++;
        w->refs = 2;
        w->req = r;
        w->next = watches;
        watches = w;
        w->timer = loop_add_timer(engine_loop(e), WATCH_SETUP_MS, on_timeout, w);
        req_on_free(r, on_request_gone, w);
        http_defer(r);
}

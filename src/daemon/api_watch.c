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
 * How a watch ends (the supervisor, supervise.h, always reaps the helper):
 *   - the client disconnects: stream_closed kills the helper. A suspended (idle) stream only
 *     learns of it when it next writes: the helper sends an empty line after 5 s of silence.
 *   - the environment's PID 1 exits: the supervisor kills the helper bound to it (the removal
 *     of the environment's cgroups would as well); the stream ends after what was queued.
 *   - DIR is removed: the helper reports "delete" for it and exits; the stream ends.
 *   - the helper fails or dies otherwise: the stream is cut off without its last chunk.
 * Errors before the first byte (no such directory, not a directory, not running) are JSON. */
#include "daemon/api.h"
#include "daemon/log.h"
#include "daemon/supervise.h"
#include "lib/files.h"
#include "lib/paddock.h"
#include "lib/util.h"

#define WATCH_MAX_ACTIVE  64 /* helpers, each one inotify instance of a user's 128 */
#define WATCH_MAX_PER_ENV 16
#define WATCH_SETUP_MS    (60u * 1000) /* the first scan of up to 8192 directories */

/* One watch request: lives until it is answered with an error or its stream is closed. The
 * helper is the supervisor's (supervise.h), bound to the environment's PID 1. */
struct watch {
        struct request *req;
        struct supervise *sv; /* the helper */
        char env[NAME_BUF_SIZE];
        char path[FILES_PATH_MAX];
        bool streaming;
        struct files_status done;
        bool has_done;
        struct watch *next;
};

static struct watch *watches;
static unsigned active; /* helpers running, or requests waiting for them */

static void watch_free(struct watch *w)
{
        supervise_abandon(w->sv, true); /* the client is gone, or the helper already is */
        for (struct watch **p = &watches; *p; p = &(*p)->next)
                if (*p == w) {
                        *p = w->next;
                        break;
                }
        free(w);
}

/* ------------------------------------------------------------------------------ the stream */

/* The environment stopped, or the directory went away (the helper said so and exited 0):
 * the stream ends. Anything else cuts it short, so that the client can tell. */
static bool ended_badly(struct watch *w, const struct supervise_exit *x)
{
        if (!x)
                return true;
        if (x->bound_gone)
                return false;
        return !supervise_exit_ok(x) || !w->has_done || w->done.err < 0;
}

/* MHD pulls: straight from the pipe into its buffer. */
static ssize_t stream_read(void *data, char *buf, size_t max)
{
        struct watch *w = data;
        ssize_t n = supervise_read(w->sv, buf, max);
        if (n != -EPIPE)
                return n >= 0 ? n : -1;
        return ended_badly(w, supervise_exit_info(w->sv)) ? -2 : -1;
}

static void stream_closed(void *data)
{
        watch_free(data);
}

static const struct http_stream_ops stream_ops = {.read = stream_read, .closed = stream_closed};

static void start_stream(struct watch *w)
{
        supervise_cancel_deadline(w->sv);
        if (w->streaming)
                return;
        w->streaming = true;
        /* The request now belongs to the stream: stream_closed ends the watch. */
        req_on_free(w->req, NULL, NULL);
        http_reply_stream(w->req, 200, "application/x-ndjson", &stream_ops, w);
}

/* ------------------------------------------------------------------------------ the helper */

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


static void on_wake(void *data)
{
        struct watch *w = data;
        http_stream_wake(w->req);
}

/* Before the stream started: the one answer, an error. */
static void on_helper_exit(void *data, const struct supervise_exit *x)
{
        struct watch *w = data;
        if (w->streaming) {
                if (w->has_done && w->done.err < 0)
                        log_warn("%s: watch of %s ended: %s", w->env, w->path, w->done.msg);
                return; /* the stream ends when its reader sees the end (supervise woke it) */
        }
        struct request *r = w->req;
        req_on_free(r, NULL, NULL);
        if (x->timed_out)
                http_reply_error(r, 503, "unavailable", "%s: setting up the watch timed out",
                                 w->path);
        else if (x->bound_gone)
                http_reply_error(r, 409, "conflict", "%s stopped", w->env);
        else if (w->has_done && w->done.err < 0)
                http_reply_errno(r, w->done.err, "%s",
                                 w->done.msg[0] ? w->done.msg : strerror(-w->done.err));
        else
                http_reply_error(r, 500, "internal", "the watch helper died (%s %d)",
                                 x->signaled ? "signal" : "exit status", x->status);
        watch_free(w);
}

static void on_timeout(void *data)
{
        struct watch *w = data;
        log_warn("%s: setting up a watch of %s timed out; killing its helper", w->env, w->path);
}

static const struct supervise_ops helper_ops = {
    .files_status = take_status, .wake = on_wake, .timeout = on_timeout, .exit = on_helper_exit};

static void on_request_gone(void *data)
{
        watch_free(data);
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
        w->req = r;
        snprintf(w->env, sizeof(w->env), "%s", env_name(v));
        struct files_request rq = {.op = FILES_WATCH,
                                   .path = w->path,
                                   .upload_fd = -EBADF,
                                   .mode = -1,
                                   .recursive = recursive};
        struct supervise_spec spec = {
            .timeout_ms = WATCH_SETUP_MS, .count = &active, .ops = &helper_ops, .data = w};
        char err[512];
        int rc =
            supervise_files(e, v, "watch", "watch", &rq, true, &spec, &w->sv, err, sizeof(err));
        if (rc < 0) {
                http_reply_errno(r, rc, "%s", err);
                free(w);
                return;
        }
        w->next = watches;
        watches = w;
        req_on_free(r, on_request_gone, w);
        http_defer(r);
}

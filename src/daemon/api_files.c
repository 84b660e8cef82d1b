/* Files API: GET|PUT|DELETE /v1/envs/{name}/files, GET files/list and files/stat,
 * POST files/mkdir and files/move, GET|PUT /v1/envs/{name}/archive.
 *
 * Each request becomes one job: a helper forked by lib/files.c that enters the environment
 * (see files.h for how, and why that keeps every path inside it). This file has two parts: the
 * job driver, which watches the helper's pidfd and pipes from the event loop and never blocks
 * on them, and the request handlers, which validate parameters and turn the helper's status
 * messages into HTTP answers. Reads and archives are streamed straight from the helper's pipe
 * to the client: MHD pulls, the pipe fills, the helper blocks -- nothing is buffered here. */
#include "daemon/api.h"
#include "daemon/log.h"
#include "lib/base64.h"
#include "lib/files.h"
#include "lib/parse.h"
#include "lib/util.h"

#include <signal.h>
#include <sys/epoll.h>
#include <sys/wait.h>
#include <time.h>

#define FILES_MAX_ACTIVE       64
#define FILES_TIMEOUT_MS       (60u * 1000)      /* metadata; streams until their first byte */
#define FILES_LONG_TIMEOUT_MS  (30u * 60 * 1000) /* uploads and recursive removal */
#define FILES_MAX_RECORD_BYTES (8u << 20)        /* list: 10000 records of at most ~300 bytes */

static unsigned active_jobs;

struct files_job {
        struct engine *eng;
        struct request *req; /* NULL once answered or gone */
        enum files_op op;
        bool sandbox;
        char env[64], cg[80], sub[32];
        char path[FILES_PATH_MAX], to[FILES_PATH_MAX];
        int pidfd, status_fd, data_fd;
        struct loop_source *pid_src, *status_src, *data_src;
        struct loop_timer *timer;
        bool exited, timed_out, streaming;
        int exit_status; /* CLD_EXITED: code; else the signal */
        bool killed_by_signal;
        struct files_status done;
        bool has_done;
        struct files_status_reader status; /* a status message being received */
        char *data; /* list/stat records */
        size_t data_len, data_cap;
        bool data_overflow;
        int refs; /* the helper (until reaped) and the request (until answered or gone) */
};

static bool is_stream_op(enum files_op op)
{
        return op == FILES_READ || op == FILES_ARCHIVE_OUT;
}

static bool is_record_op(enum files_op op)
{
        return op == FILES_LIST || op == FILES_STAT;
}

static void close_src(struct loop_source **src, int *fd)
{
        loop_remove(*src);
        *src = NULL;
        if (*fd >= 0)
                close(*fd);
        *fd = -EBADF;
}

static void job_unref(struct files_job *j)
{
        if (--j->refs > 0)
                return;
        close_src(&j->pid_src, &j->pidfd);
        close_src(&j->status_src, &j->status_fd);
        close_src(&j->data_src, &j->data_fd);
        loop_cancel_timer(j->timer);
        free(j->data);
        free(j);
        active_jobs--;
}

static void kill_helper(struct files_job *j)
{
        if (!j->exited && j->pidfd >= 0)
                sys_pidfd_send_signal(j->pidfd, SIGKILL, 0);
}

/* ------------------------------------------------------------------------------ JSON */

static json_t *text_json(const char *s, size_t len, bool b64)
{
        if (!b64)
                return json_stringn(s, len);
        char *enc = malloc(base64_encoded_size(len));
        if (!enc)
                return NULL;
        size_t n = base64_encode(s, len, enc);
        json_t *j = json_stringn(enc, n);
        free(enc);
        return j;
}

/* A path echoed back: the caller's own string, valid UTF-8 or left out (null). */
static json_t *path_json(const char *p)
{
        size_t len = strlen(p);
        return utf8_valid(p, len) ? json_stringn(p, len) : json_null();
}

static json_t *time_json(int64_t t)
{
        char buf[32];
        time_t tt = (time_t)t;
        struct tm tm;
        if (!gmtime_r(&tt, &tm))
                return json_null();
        strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
        return json_string(buf);
}

/* Names and targets that are not UTF-8 travel base64, with "encoding":"base64" (as in exec). */
static json_t *entry_json(const struct files_entry *e, const char *name, const char *target,
                          bool full)
{
        bool b64 = !utf8_valid(name, e->name_len) || !utf8_valid(target, e->target_len);
        json_t *o = json_object();
        if (!o)
                return NULL;
        json_object_set_new(o, "name", text_json(name, e->name_len, b64));
        json_object_set_new(o, "type", json_string(files_type_name(e->type)));
        json_object_set_new(o, "size", json_integer((json_int_t)e->size));
        json_object_set_new(o, "mode", json_integer((json_int_t)e->mode));
        json_object_set_new(o, "mtime", time_json(e->mtime));
        if (full) {
                json_object_set_new(o, "uid", json_integer((json_int_t)e->uid));
                json_object_set_new(o, "gid", json_integer((json_int_t)e->gid));
                if (e->type == FILES_T_SYMLINK)
                        json_object_set_new(o, "target", text_json(target, e->target_len, b64));
        }
        if (b64)
                json_object_set_new(o, "encoding", json_string("base64"));
        return o;
}

struct rec {
        struct files_entry e;
        const char *name, *target;
};

static int rec_cmp(const void *a, const void *b)
{
        const struct rec *x = a, *y = b;
        size_t n = x->e.name_len < y->e.name_len ? x->e.name_len : y->e.name_len;
        int c = memcmp(x->name, y->name, n);
        return c ? c : (int)x->e.name_len - (int)y->e.name_len;
}

/* The records the helper sent, sorted by name (bytewise). NULL on a malformed stream. */
static json_t *records_json(struct files_job *j, bool full, size_t *ret_n)
{
        size_t n = 0, off = 0;
        struct files_entry e;
        const char *name, *target;
        int r;
        while ((r = files_entry_next(j->data, j->data_len, &off, &e, &name, &target)) > 0)
                n++;
        if (r < 0)
                return NULL;
        struct rec *recs = calloc(n ? n : 1, sizeof(*recs));
        if (!recs)
                return NULL;
        off = 0;
        for (size_t i = 0; i < n; i++)
                files_entry_next(j->data, j->data_len, &off, &recs[i].e, &recs[i].name,
                                 &recs[i].target);
        qsort(recs, n, sizeof(*recs), rec_cmp);
        json_t *arr = json_array();
        for (size_t i = 0; arr && i < n; i++)
                json_array_append_new(arr,
                                      entry_json(&recs[i].e, recs[i].name, recs[i].target, full));
        free(recs);
        *ret_n = n;
        return arr;
}

/* ------------------------------------------------------------------------------ answers */

/* http.c's errno table, with a hint for the most common surprise of a sandbox. */
static void reply_failure(struct files_job *j, struct request *r, int err, const char *msg)
{
        if (!msg || !*msg)
                msg = strerror(-err);
        if (err == -EROFS && j->sandbox)
                http_reply_error(r, 403, "forbidden",
                                 "%s (a sandbox can write only below /tmp and /workspace)", msg);
        else
                http_reply_errno(r, err, "%s", msg);
}

static void reply_success(struct files_job *j, struct request *r)
{
        json_t *body = NULL;
        size_t n = 0;
        switch (j->op) {
        case FILES_WRITE:
                body = json_pack("{s:o,s:I}", "path", path_json(j->path), "size",
                                 (json_int_t)j->done.value);
                break;
        case FILES_REMOVE:
                body = json_pack("{s:o}", "deleted", path_json(j->path));
                break;
        case FILES_MKDIR:
                body = json_pack("{s:o}", "path", path_json(j->path));
                break;
        case FILES_MOVE:
                body = json_pack("{s:o,s:o}", "from", path_json(j->path), "to", path_json(j->to));
                break;
        case FILES_ARCHIVE_IN:
                body = json_pack("{s:o,s:I,s:I}", "path", path_json(j->path), "entries",
                                 (json_int_t)j->done.count, "bytes", (json_int_t)j->done.value);
                break;
        case FILES_LIST: {
                json_t *arr = j->data_overflow ? NULL : records_json(j, false, &n);
                if (arr)
                        body = json_pack("{s:o,s:o,s:b}", "path", path_json(j->path), "entries",
                                         arr, "truncated", j->done.count != 0);
                break;
        }
        case FILES_STAT: {
                json_t *arr = j->data_overflow ? NULL : records_json(j, true, &n);
                if (arr && n == 1) {
                        body = json_incref(json_array_get(arr, 0));
                        json_object_del(body, "name");
                        json_object_set_new(body, "path", path_json(j->path));
                }
                json_decref(arr);
                break;
        }
        case FILES_READ:
        case FILES_ARCHIVE_OUT:
        case FILES_WATCH: /* api_watch.c */
                break;
        }
        if (!body)
                http_reply_error(r, 500, "internal", "malformed answer from the file helper");
        else
                http_reply_json(r, 200, body);
}

/* After the helper is gone: the one answer of a non-streaming request. */
static void finish(struct files_job *j)
{
        struct request *r = j->req;
        if (!r)
                return;
        j->req = NULL;
        req_on_free(r, NULL, NULL);
        if (j->timed_out)
                http_reply_error(r, 503, "unavailable", "%s: the file operation timed out",
                                 j->path);
        else if (!j->has_done)
                http_reply_error(r, 500, "internal", "the file helper died (%s %d)",
                                 j->killed_by_signal ? "signal" : "exit status", j->exit_status);
        else if (j->done.err < 0)
                reply_failure(j, r, j->done.err, j->done.msg);
        else
                reply_success(j, r);
        job_unref(j);
}

/* ------------------------------------------------------------------------------ streams */

static void on_stream_data(struct loop_source *s, int fd, uint32_t events, void *data)
{
        struct files_job *j = data;
        loop_remove(j->data_src);
        j->data_src = NULL;
        if (j->req)
                http_stream_wake(j->req);
}

/* MHD pulls: straight from the pipe into its buffer. */
static ssize_t stream_read(void *data, char *buf, size_t max)
{
        struct files_job *j = data;
        if (j->data_fd < 0)
                return -1;
        for (;;) {
                ssize_t n = read(j->data_fd, buf, max);
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
        /* Empty. Once the helper has exited, nothing more can come (another forked process
         * may still hold a copy of the write end, so EOF alone is not enough). */
        if (j->exited) {
                /* A helper that failed half-way must not look like a complete file or tar. */
                bool failed = j->killed_by_signal || j->exit_status != 0 ||
                              (j->has_done && j->done.err < 0);
                return failed ? -2 : -1;
        }
        if (!j->data_src && loop_add_fd(engine_loop(j->eng), j->data_fd, EPOLLIN, on_stream_data, j,
                                        &j->data_src) < 0)
                return -1;
        return 0;
}

static void stream_closed(void *data)
{
        struct files_job *j = data;
        j->req = NULL;
        close_src(&j->data_src, &j->data_fd);
        kill_helper(j); /* finished: harmless; client gone: nobody reads the rest */
        job_unref(j);
}

static const struct http_stream_ops stream_ops = {.read = stream_read, .closed = stream_closed};

static void start_stream(struct files_job *j)
{
        if (j->streaming)
                return;
        loop_cancel_timer(j->timer);
        j->timer = NULL;
        if (!j->req) {
                kill_helper(j);
                return;
        }
        struct request *r = j->req;
        j->streaming = true;
        /* The request's reference now belongs to the stream: stream_closed drops it. */
        req_on_free(r, NULL, NULL);
        http_reply_stream(
            r, 200, j->op == FILES_ARCHIVE_OUT ? "application/x-tar" : "application/octet-stream",
            &stream_ops, j);
}

/* ------------------------------------------------------------------------------ the helper */

static void take_status(void *ctx, const struct files_status *st)
{
        struct files_job *j = ctx;
        if (st->phase == FILES_READY && is_stream_op(j->op) && !j->has_done) {
                start_stream(j);
        } else if (st->phase == FILES_DONE && !j->has_done) {
                j->done = *st;
                j->done.msg[sizeof(j->done.msg) - 1] = 0;
                j->has_done = true;
        }
}

static void on_status(struct loop_source *s, int fd, uint32_t events, void *data)
{
        struct files_job *j = data;
        if (!files_status_read(j->status_fd, &j->status, take_status, j))
                close_src(&j->status_src, &j->status_fd);
}

static bool read_records(struct files_job *j)
{
        char buf[65536];
        for (;;) {
                ssize_t n = read(j->data_fd, buf, sizeof(buf));
                if (n > 0) {
                        if (j->data_overflow || j->data_len + (size_t)n > FILES_MAX_RECORD_BYTES) {
                                j->data_overflow = true;
                                continue;
                        }
                        if (j->data_len + (size_t)n > j->data_cap) {
                                size_t cap = j->data_cap ? j->data_cap * 2 : 65536;
                                while (cap < j->data_len + (size_t)n)
                                        cap *= 2;
                                char *nd = realloc(j->data, cap);
                                if (!nd) {
                                        j->data_overflow = true;
                                        continue;
                                }
                                j->data = nd;
                                j->data_cap = cap;
                        }
                        memcpy(j->data + j->data_len, buf, (size_t)n);
                        j->data_len += (size_t)n;
                        continue;
                }
                if (n < 0 && errno == EINTR)
                        continue;
                return n < 0 && errno == EAGAIN;
        }
}

static void on_records(struct loop_source *s, int fd, uint32_t events, void *data)
{
        struct files_job *j = data;
        if (!read_records(j))
                close_src(&j->data_src, &j->data_fd);
}

static void on_helper_exit(struct loop_source *s, int fd, uint32_t events, void *data)
{
        struct files_job *j = data;
        siginfo_t si = {0};
        if (waitid(P_PIDFD, (id_t)j->pidfd, &si, WEXITED | WNOHANG) < 0) {
                si.si_code = CLD_KILLED;
                si.si_status = SIGKILL;
        } else if (si.si_pid == 0) {
                return; /* not yet */
        }
        j->exited = true;
        j->killed_by_signal = si.si_code != CLD_EXITED;
        j->exit_status = si.si_status;
        close_src(&j->pid_src, &j->pidfd);
        loop_cancel_timer(j->timer);
        j->timer = NULL;
        /* Everything it wrote is in the pipes now. */
        if (j->status_fd >= 0) {
                files_status_read(j->status_fd, &j->status, take_status, j);
                close_src(&j->status_src, &j->status_fd);
        }
        int r = cgroup_env_prune(engine_cgroups(j->eng), j->cg, j->sub);
        if (r < 0 && r != -ENOENT)
                log_debug("%s: removing cgroup %s: %s", j->env, j->sub, strerror(-r));
        if (j->streaming) {
                if (j->has_done && j->done.err < 0)
                        log_warn("%s: %s: stream ended early: %s", j->env, j->path, j->done.msg);
                /* A reader parked on the empty pipe must look again and see the end. */
                loop_remove(j->data_src);
                j->data_src = NULL;
                if (j->req)
                        http_stream_wake(j->req);
        } else {
                if (j->data_fd >= 0 && is_record_op(j->op))
                        read_records(j);
                close_src(&j->data_src, &j->data_fd);
                finish(j);
        }
        job_unref(j);
}

static void on_timeout(struct loop_timer *t, void *data)
{
        struct files_job *j = data;
        j->timer = NULL;
        j->timed_out = true;
        log_warn("%s: file operation on %s timed out; killing its helper", j->env, j->path);
        kill_helper(j);
}

static void on_request_gone(void *data)
{
        struct files_job *j = data;
        j->req = NULL;
        /* Reads are pointless now; changes run to their end (a killed write leaves its
         * temporary file behind). */
        if (is_stream_op(j->op) || is_record_op(j->op))
                kill_helper(j);
        job_unref(j);
}

/* Answers r (now or later) in every case. rq's paths point into j. */
static void start_job(struct request *r, struct engine *e, struct env *v, struct files_job *j,
                      struct files_request *rq)
{
        if (!env_running(v) || env_paused(v)) {
                http_reply_error(r, 409, "conflict", "%s is %s", env_name(v),
                                 env_running(v) ? "paused" : "not running");
                free(j);
                return;
        }
        if (active_jobs >= FILES_MAX_ACTIVE) {
                http_reply_error(r, 503, "unavailable",
                                 "too many file operations in progress (limit %d)",
                                 FILES_MAX_ACTIVE);
                free(j);
                return;
        }
        j->eng = e;
        j->op = rq->op;
        j->sandbox = env_kind(v) == KIND_SANDBOX;
        j->pidfd = j->status_fd = j->data_fd = -EBADF;
        snprintf(j->env, sizeof(j->env), "%s", env_name(v));
        snprintf(j->cg, sizeof(j->cg), "%s", env_cgroup(v));
        snprintf(j->sub, sizeof(j->sub), "files-%u", env_next_exec_id(v));
        struct files_target t = {.env_pidfd = env_pidfd(v),
                                 .cgroups = engine_cgroups(e),
                                 .cgroup_name = j->cg,
                                 .cgroup_sub = j->sub};
        struct files_child c;
        int rc = files_spawn(&t, rq, &c);
        if (rc < 0) {
                http_reply_errno(r, rc, "starting the file helper: %s", strerror(-rc));
                free(j);
                return;
        }
        active_jobs++;
        j->refs = 2;
        j->req = r;
        j->pidfd = c.pidfd;
        j->status_fd = c.status_fd;
        j->data_fd = c.data_fd;
        fcntl(j->status_fd, F_SETFL, O_NONBLOCK);
        if (j->data_fd >= 0)
                fcntl(j->data_fd, F_SETFL, O_NONBLOCK);
        struct loop *l = engine_loop(e);
        rc = loop_add_fd(l, j->pidfd, EPOLLIN, on_helper_exit, j, &j->pid_src);
        if (rc >= 0)
                rc = loop_add_fd(l, j->status_fd, EPOLLIN, on_status, j, &j->status_src);
        if (rc >= 0 && is_record_op(j->op))
                rc = loop_add_fd(l, j->data_fd, EPOLLIN, on_records, j, &j->data_src);
        if (rc < 0) {
                sys_pidfd_send_signal(j->pidfd, SIGKILL, 0);
                waitid(P_PIDFD, (id_t)j->pidfd, &(siginfo_t){0}, WEXITED);
                cgroup_env_prune(engine_cgroups(e), j->cg, j->sub);
                http_reply_errno(r, rc, "watching the file helper: %s", strerror(-rc));
                j->refs = 1;
                job_unref(j);
                return;
        }
        bool long_op = j->op == FILES_WRITE || j->op == FILES_ARCHIVE_IN || j->op == FILES_REMOVE;
        j->timer =
            loop_add_timer(l, long_op ? FILES_LONG_TIMEOUT_MS : FILES_TIMEOUT_MS, on_timeout, j);
        req_on_free(r, on_request_gone, j);
        http_defer(r);
}

/* ------------------------------------------------------------------------------ requests */

static bool q_path(struct request *r, const char *key, char *out)
{
        const char *s = req_query(r, key);
        int rc = s ? files_path_normalize(s, out, FILES_PATH_MAX) : -EINVAL;
        if (rc == -ENAMETOOLONG || rc == -ENOBUFS) {
                http_reply_error(r, 400, "invalid_argument",
                                 "%s: longer than %d bytes, or a name longer than 255", key,
                                 FILES_PATH_MAX - 1);
                return false;
        }
        if (rc < 0) {
                http_reply_error(r, 400, "invalid_argument",
                                 "%s: required, an absolute path inside the environment", key);
                return false;
        }
        return true;
}

static bool q_bool(struct request *r, const char *key, bool def, bool *ret)
{
        const char *s = req_query(r, key);
        if (!s || !*s)
                *ret = def;
        else if (!strcmp(s, "1") || !strcmp(s, "true") || !strcmp(s, "yes"))
                *ret = true;
        else if (!strcmp(s, "0") || !strcmp(s, "false") || !strcmp(s, "no"))
                *ret = false;
        else {
                http_reply_error(r, 400, "invalid_argument", "%s: use 1 or 0", key);
                return false;
        }
        return true;
}

static bool q_mode(struct request *r, int *ret)
{
        const char *s = req_query(r, "mode");
        if (!s)
                return true;
        size_t len = strlen(s);
        if (len == 0 || len > 5 || strspn(s, "01234567") != len || strtoul(s, NULL, 8) > 07777) {
                http_reply_error(r, 400, "invalid_argument",
                                 "mode: octal permission bits, e.g. 0644 (at most 07777)");
                return false;
        }
        *ret = (int)strtoul(s, NULL, 8);
        return true;
}

static bool q_user(struct request *r, const char **ret)
{
        const char *u = req_query(r, "user");
        if (!u)
                return true;
        if (!*u || strlen(u) > 64) {
                http_reply_error(r, 400, "invalid_argument", "user: a user name, uid or uid:gid");
                return false;
        }
        *ret = u;
        return true;
}

static bool q_max(struct request *r, uint64_t *ret)
{
        const char *s = req_query(r, "max");
        uint64_t v;
        if (!s)
                return true;
        if (parse_size(s, &v) < 0 || v > FILES_DEFAULT_MAX_READ) {
                http_reply_error(r, 400, "invalid_argument",
                                 "max: a size up to 1G (bytes or a unit: 512M)");
                return false;
        }
        *ret = v;
        return true;
}

static bool upload(struct request *r, struct files_request *rq)
{
        rq->upload_fd = req_spool_fd(r);
        if (rq->upload_fd < 0) {
                http_reply_error(r, 503, "unavailable", "cannot store the upload");
                return false;
        }
        return true;
}

static bool json_path(struct request *r, json_t *body, const char *key, char *out)
{
        json_t *v = json_object_get(body, key);
        const char *s = json_string_value(v);
        int rc = s && strlen(s) == json_string_length(v)
                     ? files_path_normalize(s, out, FILES_PATH_MAX)
                     : -EINVAL;
        if (rc < 0) {
                http_reply_error(r, 400, "invalid_argument", "%s: %s", key,
                                 rc == -EINVAL ? "required, an absolute path inside the environment"
                                               : "path too long");
                return false;
        }
        return true;
}

static bool parse_move(struct request *r, struct files_job *j, struct files_request *rq)
{
        json_t *body = req_json_object(r);
        if (!body)
                return false;
        bool ok = false;
        const char *k;
        json_t *v;
        json_object_foreach(body, k, v)
        {
                if (strcmp(k, "from") && strcmp(k, "to") && strcmp(k, "overwrite")) {
                        http_reply_error(r, 400, "invalid_argument", "unknown field \"%.64s\"", k);
                        goto out;
                }
        }
        if (!json_path(r, body, "from", j->path) || !json_path(r, body, "to", j->to))
                goto out;
        v = json_object_get(body, "overwrite");
        if (v && !json_is_boolean(v)) {
                http_reply_error(r, 400, "invalid_argument", "overwrite: must be true or false");
                goto out;
        }
        rq->overwrite = json_is_true(v);
        ok = true;
out:
        json_decref(body);
        return ok;
}

/* Which operation this is, or an answer (404/405) and -1. */
static int route(struct request *r, const char *resource, const char *sub)
{
        const char *m = req_method(r);
        bool get = !strcmp(m, "GET"), put = !strcmp(m, "PUT"), post = !strcmp(m, "POST");
        int op = -1;
        bool known = true;
        if (!strcmp(resource, "archive")) {
                known = !sub;
                op = get ? FILES_ARCHIVE_OUT : put ? FILES_ARCHIVE_IN : -1;
        } else if (!sub) {
                op = get                    ? FILES_READ
                     : put                  ? FILES_WRITE
                     : !strcmp(m, "DELETE") ? FILES_REMOVE
                                            : -1;
        } else if (!strcmp(sub, "list")) {
                op = get ? FILES_LIST : -1;
        } else if (!strcmp(sub, "stat")) {
                op = get ? FILES_STAT : -1;
        } else if (!strcmp(sub, "mkdir")) {
                op = post ? FILES_MKDIR : -1;
        } else if (!strcmp(sub, "move")) {
                op = post ? FILES_MOVE : -1;
        } else {
                known = false;
        }
        if (!known) {
                http_reply_error(r, 404, "not_found", "no such route: %s", req_path(r));
                return -1;
        }
        if (op < 0)
                http_reply_error(r, 405, "method_not_allowed", "%s is not allowed on %s", m,
                                 req_path(r));
        return op;
}

void api_env_files(struct request *r, struct engine *e, struct env *v, const char *resource,
                   const char *sub)
{
        int op = route(r, resource, sub);
        if (op < 0)
                return;
        struct files_job *j = calloc(1, sizeof(*j));
        if (!j) {
                http_reply_errno(r, -ENOMEM, "out of memory");
                return;
        }
        struct files_request rq = {.op = (enum files_op)op,
                                   .path = j->path,
                                   .to = j->to,
                                   .upload_fd = -EBADF,
                                   .max_bytes = FILES_DEFAULT_MAX_READ,
                                   .mode = -1};
        bool ok = op == FILES_MOVE ? parse_move(r, j, &rq) : q_path(r, "path", j->path);
        switch (op) {
        case FILES_READ:
                ok = ok && q_max(r, &rq.max_bytes);
                break;
        case FILES_WRITE:
                ok = ok && q_mode(r, &rq.mode) && q_bool(r, "parents", true, &rq.parents) &&
                     q_user(r, &rq.user) && upload(r, &rq);
                break;
        case FILES_REMOVE:
                ok = ok && q_bool(r, "recursive", false, &rq.recursive);
                break;
        case FILES_MKDIR:
                ok = ok && q_mode(r, &rq.mode) && q_bool(r, "parents", false, &rq.parents) &&
                     q_user(r, &rq.user);
                break;
        case FILES_ARCHIVE_IN:
                ok = ok && q_bool(r, "parents", true, &rq.parents) && q_user(r, &rq.user) &&
                     upload(r, &rq);
                break;
        default:
                break;
        }
        if (!ok) {
                free(j);
                return;
        }
        start_job(r, e, v, j, &rq);
}

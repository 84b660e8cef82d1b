/* Files API: GET|PUT|DELETE /v1/envs/{name}/files, GET files/list and files/stat,
 * POST files/mkdir and files/move, GET|PUT /v1/envs/{name}/archive.
 *
 * Each request becomes one job: a helper forked by lib/files.c that enters the environment
 * (see files.h for how, and why that keeps every path inside it), watched by the supervisor
 * (supervise.h) from the event loop. This file validates parameters and turns the helper's
 * status messages and records into HTTP answers. Reads and archives are streamed straight from
 * the helper's pipe to the client: MHD pulls, the pipe fills, the helper blocks -- nothing is
 * buffered here. */
#include "daemon/api.h"
#include "daemon/exec.h"
#include "daemon/log.h"
#include "daemon/supervise.h"
#include "lib/base64.h"
#include "lib/files.h"
#include "lib/paddock.h"
#include "lib/parse.h"
#include "lib/strbuf.h"
#include "lib/util.h"

#define FILES_MAX_ACTIVE       64
#define FILES_TIMEOUT_MS       (60u * 1000)      /* metadata; streams until their first byte */
#define FILES_LONG_TIMEOUT_MS  (30u * 60 * 1000) /* uploads and recursive removal */
#define FILES_MAX_RECORD_BYTES (8u << 20)        /* list: 10000 records of at most ~300 bytes */

static unsigned active_jobs; /* helpers running, or requests waiting for them */

/* One request: lives until it is answered, its stream is closed or the client is gone. The
 * helper is the supervisor's (supervise.h); a write whose client went away runs to its end. */
struct files_job {
        struct request *req;
        struct supervise *sv; /* the helper */
        enum files_op op;
        bool sandbox, streaming;
        char env[NAME_BUF_SIZE];
        char path[FILES_PATH_MAX], to[FILES_PATH_MAX];
        struct files_status done;
        bool has_done;
        struct strbuf data; /* list/stat records */
        bool data_overflow;
};

static bool is_stream_op(enum files_op op)
{
        return op == FILES_READ || op == FILES_ARCHIVE_OUT;
}

static bool is_record_op(enum files_op op)
{
        return op == FILES_LIST || op == FILES_STAT;
}

/* The request is over. kill: the helper's work is of no use any more. */
static void job_free(struct files_job *j, bool kill)
{
        supervise_abandon(j->sv, kill);
        strbuf_free(&j->data);
        free(j);
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
        char buf[RFC3339_SIZE];
        return format_rfc3339(t, buf)[0] ? json_string(buf) : json_null();
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
        while ((r = files_entry_next(j->data.data, j->data.len, &off, &e, &name, &target)) > 0)
                n++;
        if (r < 0)
                return NULL;
        struct rec *recs = calloc(n ? n : 1, sizeof(*recs));
        if (!recs)
                return NULL;
        off = 0;
        for (size_t i = 0; i < n; i++)
                files_entry_next(j->data.data, j->data.len, &off, &recs[i].e, &recs[i].name,
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
static void finish(struct files_job *j, const struct supervise_exit *x)
{
        struct request *r = j->req;
        req_on_free(r, NULL, NULL);
        if (x->timed_out)
                http_reply_error(r, 503, "unavailable", "%s: the file operation timed out",
                                 j->path);
        else if (!j->has_done)
                http_reply_error(r, 500, "internal", "the file helper died (%s %d)",
                                 x->signaled ? "signal" : "exit status", x->status);
        else if (j->done.err < 0)
                reply_failure(j, r, j->done.err, j->done.msg);
        else
                reply_success(j, r);
        job_free(j, false);
}

/* ------------------------------------------------------------------------------ streams */

/* MHD pulls: straight from the pipe into its buffer. */
static ssize_t stream_read(void *data, char *buf, size_t max)
{
        struct files_job *j = data;
        ssize_t n = supervise_read(j->sv, buf, max);
        if (n != -EPIPE)
                return n >= 0 ? n : -1;
        /* A helper that failed half-way must not look like a complete file or tar. */
        const struct supervise_exit *x = supervise_exit_info(j->sv);
        bool failed = !x || !supervise_exit_ok(x) || (j->has_done && j->done.err < 0);
        return failed ? -2 : -1;
}

static void stream_closed(void *data)
{
        /* finished: killing is harmless; client gone: nobody reads the rest */
        job_free(data, true);
}

static const struct http_stream_ops stream_ops = {.read = stream_read, .closed = stream_closed};

static void start_stream(struct files_job *j)
{
        if (j->streaming)
                return;
        supervise_cancel_deadline(j->sv);
        struct request *r = j->req;
        j->streaming = true;
        /* The request now belongs to the stream: stream_closed ends the job. */
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


static bool on_records(void *data, int fd)
{
        struct files_job *j = data;
        char buf[65536];
        for (;;) {
                ssize_t n = read(fd, buf, sizeof(buf));
                if (n > 0) {
                        if (j->data_overflow || j->data.len + (size_t)n > FILES_MAX_RECORD_BYTES ||
                            strbuf_add(&j->data, buf, (size_t)n) < 0)
                                j->data_overflow = true;
                        continue;
                }
                if (n < 0 && errno == EINTR)
                        continue;
                return n < 0 && errno == EAGAIN;
        }
}

static void on_helper_exit(void *data, const struct supervise_exit *x)
{
        struct files_job *j = data;
        if (!j->streaming)
                finish(j, x);
        else if (j->has_done && j->done.err < 0)
                log_warn("%s: %s: stream ended early: %s", j->env, j->path, j->done.msg);
        /* a stream ends when its reader sees the end (supervise woke it) */
}

static void on_timeout(void *data)
{
        struct files_job *j = data;
        log_warn("%s: file operation on %s timed out; killing its helper", j->env, j->path);
}

static const struct supervise_ops helper_ops = {.files_status = take_status,
                                                .data = on_records,
                                                .timeout = on_timeout,
                                                .exit = on_helper_exit};

static void on_stream_wake(void *data)
{
        struct files_job *j = data;
        http_stream_wake(j->req);
}

static const struct supervise_ops stream_helper_ops = {.files_status = take_status,
                                                       .wake = on_stream_wake,
                                                       .timeout = on_timeout,
                                                       .exit = on_helper_exit};

static void on_request_gone(void *data)
{
        struct files_job *j = data;
        /* Reads are pointless now; changes run to their end (a killed write leaves its
         * temporary file behind). */
        job_free(j, is_stream_op(j->op) || is_record_op(j->op));
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
        j->op = rq->op;
        j->sandbox = env_kind(v) == KIND_SANDBOX;
        j->req = r;
        snprintf(j->env, sizeof(j->env), "%s", env_name(v));
        bool long_op = j->op == FILES_WRITE || j->op == FILES_ARCHIVE_IN || j->op == FILES_REMOVE;
        struct supervise_spec spec = {
            .timeout_ms = long_op ? FILES_LONG_TIMEOUT_MS : FILES_TIMEOUT_MS,
            .collect_data = is_record_op(j->op),
            .count = &active_jobs,
            .ops = is_stream_op(j->op) ? &stream_helper_ops : &helper_ops,
            .data = j};
        char err[512];
        int rc = supervise_files(e, v, "files", "file", rq, false, &spec, &j->sv, err, sizeof(err));
        if (rc < 0) {
                http_reply_errno(r, rc, "%s", err);
                free(j);
                return;
        }
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
        if (!*u || strlen(u) > EXEC_USER_MAX) {
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

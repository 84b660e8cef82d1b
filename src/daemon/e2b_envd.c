/* envd's plain routes for E2B sandboxes (docs/e2b.md): GET /health, GET /files (the raw
 * bytes), POST /files (multipart, one part per file, or a raw body, maybe gzip'ed). Every file
 * operation is a files helper (lib/files.h, through supervise_files) that resolves its path
 * inside the environment; this file only turns E2B's requests into files_requests, one after
 * another, and the results into E2B's answers. The E2B user is made here too, at create. */
#include "daemon/e2b.h"
#include "daemon/log.h"
#include "daemon/supervise.h"
#include "lib/files.h"
#include "lib/util.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define E2B_FILES_MAX_PARTS  100               /* files in one POST /files */
#define E2B_FILES_MAX_ACTIVE 64                /* helpers and requests waiting for them */
#define E2B_FILES_TIMEOUT_MS (30u * 60 * 1000) /* one request, all its files */

static unsigned active_jobs;

/* ------------------------------------------------------------------- errors and paths */

static unsigned status_of(int err)
{
        unsigned st;
        const char *code;
        http_status_of_errno(err, &st, &code);
        return st;
}

/* E2B's path rules: absolute, "~/x" or relative to home. */
static int resolve_path(const struct e2b_target *t, const char *in, char *out)
{
        char joined[FILES_PATH_MAX];
        int n;
        if (!in || !*in)
                return -EINVAL;
        if (in[0] == '/')
                n = snprintf(joined, sizeof(joined), "%s", in);
        else if (!strcmp(in, "~"))
                n = snprintf(joined, sizeof(joined), "%s", t->home);
        else if (!strncmp(in, "~/", 2))
                n = snprintf(joined, sizeof(joined), "%s/%s", t->home, in + 2);
        else
                n = snprintf(joined, sizeof(joined), "%s/%s", t->home, in);
        if (n < 0 || (size_t)n >= sizeof(joined))
                return -ENAMETOOLONG;
        return files_path_normalize(joined, out, FILES_PATH_MAX);
}

/* ------------------------------------------------------------------- a chain of helpers */

struct step {
        struct files_request rq;
        char path[FILES_PATH_MAX];
        int fd;        /* its own upload (make_user's texts), or -EBADF: the chain's */
        bool exist_ok; /* mkdir of what exists is fine */
};

struct chain {
        struct request *req; /* NULL: the client went away (or none: make_user) */
        struct engine *eng;
        char env[NAME_BUF_SIZE];
        char user[33];
        struct supervise *sv;
        struct step *steps;
        size_t n, next, cap;
        int upload_fd;        /* the request's spooled body, shared by its steps (or -EBADF) */
        uint64_t deadline_ms; /* the whole chain's (now_ms), 0: none */
        struct files_status done;
        bool has_done;
        uint32_t uid_base;
        e2b_done_fn cb; /* make_user */
        void *cb_data;
};

static void chain_free(struct chain *c)
{
        for (size_t i = 0; i < c->n; i++)
                if (c->steps[i].fd >= 0)
                        close(c->steps[i].fd);
        if (c->upload_fd >= 0)
                close(c->upload_fd);
        free(c->steps);
        free(c);
}

static void chain_gone(void *data)
{
        struct chain *c = data;
        c->req = NULL; /* the writes run to their end */
}

static void chain_end(struct chain *c, int err, const char *msg)
{
        if (c->req) {
                req_on_free(c->req, NULL, NULL);
                if (err < 0) {
                        e2b_reply_error(c->req, status_of(err), "%s", msg);
                } else {
                        json_t *arr = json_array();
                        for (size_t i = 0; i < c->n; i++) {
                                const char *p = c->steps[i].path, *slash = strrchr(p, '/');
                                json_array_append_new(arr, json_pack("{s:s,s:s,s:s}", "path", p,
                                                                     "name", slash ? slash + 1 : p,
                                                                     "type", "file"));
                        }
                        http_reply_json(c->req, 200, arr);
                }
        }
        if (c->cb)
                c->cb(c->cb_data, err, msg);
        chain_free(c);
}

static void chain_run(struct chain *c);

static void chain_status(void *data, const struct files_status *st)
{
        struct chain *c = data;
        if (st->phase == FILES_DONE && !c->has_done) {
                c->done = *st;
                c->done.msg[sizeof(c->done.msg) - 1] = 0;
                c->has_done = true;
        }
}

static void chain_exit(void *data, const struct supervise_exit *x)
{
        struct chain *c = data;
        supervise_abandon(c->sv, false);
        c->sv = NULL;
        struct step *s = &c->steps[c->next - 1];
        if (s->fd >= 0) {
                close(s->fd);
                s->fd = -EBADF;
        }
        if (x->timed_out)
                chain_end(c, -ETIMEDOUT, "the file operation timed out");
        else if (!c->has_done)
                chain_end(c, -EIO, "the file helper died");
        else if (c->done.err < 0 && !(s->exist_ok && c->done.err == -EEXIST))
                chain_end(c, c->done.err, c->done.msg[0] ? c->done.msg : strerror(-c->done.err));
        else
                chain_run(c);
}

static const struct supervise_ops chain_ops = {.files_status = chain_status, .exit = chain_exit};

static void chain_run(struct chain *c)
{
        if (c->next == c->n) {
                chain_end(c, 0, NULL);
                return;
        }
        struct env *v = engine_find(c->eng, c->env);
        if (!v || !env_running(v) || env_paused(v) || env_deleting(v) ||
            env_uid_base(v) != c->uid_base) {
                chain_end(c, -ENOENT, "the sandbox is not running");
                return;
        }
        uint64_t now = now_ms();
        if (c->deadline_ms && now >= c->deadline_ms) {
                chain_end(c, -ETIMEDOUT, "the upload took too long");
                return;
        }
        struct step *s = &c->steps[c->next++];
        s->rq.path = s->path;
        s->rq.upload_fd = s->fd >= 0 ? s->fd : c->upload_fd;
        c->has_done = false;
        struct supervise_spec spec = {.timeout_ms = c->deadline_ms ? c->deadline_ms - now
                                                                   : E2B_FILES_TIMEOUT_MS,
                                      .count = &active_jobs,
                                      .ops = &chain_ops,
                                      .data = c};
        char err[512];
        int rc = supervise_files(c->eng, v, "files", "file", &s->rq, false, &spec, &c->sv, err,
                                 sizeof(err));
        if (rc < 0)
                chain_end(c, rc, err);
}

static struct chain *chain_new(struct engine *e, struct env *v, size_t n)
{
        struct chain *c = calloc(1, sizeof(*c));
        if (!c)
                return NULL;
        if (!(c->steps = calloc(n ? n : 1, sizeof(*c->steps)))) {
                free(c);
                return NULL;
        }
        for (size_t i = 0; i < n; i++)
                c->steps[i].fd = -EBADF;
        c->upload_fd = -EBADF;
        c->cap = n ? n : 1;
        c->eng = e;
        c->uid_base = env_uid_base(v); /* the same environment, not a new one of that name */
        snprintf(c->env, sizeof(c->env), "%s", env_name(v));
        return c;
}

static int memfd_with(const char *text)
{
        int fd = memfd_create("e2b-file", MFD_CLOEXEC);
        if (fd < 0)
                return -errno;
        size_t len = strlen(text);
        if (write_all(fd, text, len) < 0 || lseek(fd, 0, SEEK_SET) < 0) {
                int r = -errno;
                close(fd);
                return r;
        }
        return fd;
}

int e2b_envd_make_user(struct engine *e, struct env *v, const char *passwd, const char *group,
                       const char *home, const char *owner, e2b_done_fn done, void *data)
{
        struct chain *c = chain_new(e, v, 3);
        if (!c)
                return -ENOMEM;
        c->cb = done;
        c->cb_data = data;
        const char *texts[2] = {passwd, group}, *paths[2] = {"/etc/passwd", "/etc/group"};
        for (size_t i = 0; i < 2; i++) {
                if (!texts[i])
                        continue;
                struct step *s = &c->steps[c->n++];
                s->rq = (struct files_request){.op = FILES_WRITE, .mode = 0644, .parents = true};
                snprintf(s->path, sizeof(s->path), "%s", paths[i]);
                if ((s->fd = memfd_with(texts[i])) < 0) {
                        int r = s->fd;
                        chain_free(c);
                        return r;
                }
        }
        struct step *s = &c->steps[c->n++];
        snprintf(c->user, sizeof(c->user), "%s", owner);
        s->rq = (struct files_request){
            .op = FILES_MKDIR, .mode = 0750, .parents = true, .user = c->user, .upload_fd = -EBADF};
        s->exist_ok = true;
        if (files_path_normalize(home, s->path, sizeof(s->path)) < 0) {
                chain_free(c);
                return -EINVAL;
        }
        chain_run(c);
        return 0;
}

/* ------------------------------------------------------------------- GET /files */

struct reader {
        struct request *req;
        struct supervise *sv;
        bool streaming, has_done;
        struct files_status done;
        char path[FILES_PATH_MAX];
};

static void reader_free(struct reader *j, bool kill)
{
        supervise_abandon(j->sv, kill);
        free(j);
}

static ssize_t reader_read(void *data, char *buf, size_t max)
{
        struct reader *j = data;
        ssize_t n = supervise_read(j->sv, buf, max);
        if (n != -EPIPE)
                return n >= 0 ? n : -1;
        const struct supervise_exit *x = supervise_exit_info(j->sv);
        bool failed = !x || !supervise_exit_ok(x) || (j->has_done && j->done.err < 0);
        return failed ? -2 : -1;
}

static void reader_closed(void *data)
{
        reader_free(data, true);
}

static const struct http_stream_ops reader_stream = {.read = reader_read, .closed = reader_closed};

static void reader_status(void *data, const struct files_status *st)
{
        struct reader *j = data;
        if (st->phase == FILES_READY && !j->has_done && !j->streaming) {
                supervise_cancel_deadline(j->sv);
                j->streaming = true;
                req_on_free(j->req, NULL, NULL);
                http_reply_stream(j->req, 200, "application/octet-stream", &reader_stream, j);
        } else if (st->phase == FILES_DONE && !j->has_done) {
                j->done = *st;
                j->done.msg[sizeof(j->done.msg) - 1] = 0;
                j->has_done = true;
        }
}

static void reader_wake(void *data)
{
        struct reader *j = data;
        http_stream_wake(j->req);
}

static void reader_exit(void *data, const struct supervise_exit *x)
{
        struct reader *j = data;
        if (j->streaming)
                return; /* the stream ends when its reader sees the end */
        req_on_free(j->req, NULL, NULL);
        if (j->has_done && j->done.err < 0)
                e2b_reply_error(j->req, status_of(j->done.err), "%s",
                                j->done.msg[0] ? j->done.msg : strerror(-j->done.err));
        else
                e2b_reply_error(j->req, x->timed_out ? 502 : 500, "reading %s failed", j->path);
        reader_free(j, false);
}

static const struct supervise_ops reader_ops = {
    .files_status = reader_status, .wake = reader_wake, .exit = reader_exit};

static void reader_gone(void *data)
{
        reader_free(data, true);
}

static void files_get(struct request *r, struct engine *e, const struct e2b_target *t)
{
        if (active_jobs >= E2B_FILES_MAX_ACTIVE) {
                e2b_reply_error(r, 503, "too many file operations in progress");
                return;
        }
        struct reader *j = calloc(1, sizeof(*j));
        if (!j) {
                e2b_reply_error(r, 500, "out of memory");
                return;
        }
        int rc = resolve_path(t, req_query(r, "path"), j->path);
        if (rc < 0) {
                e2b_reply_error(r, 400, "path: required, absolute or relative to %s", t->home);
                free(j);
                return;
        }
        j->req = r;
        struct files_request rq = {.op = FILES_READ,
                                   .path = j->path,
                                   .upload_fd = -EBADF,
                                   .max_bytes = FILES_DEFAULT_MAX_READ,
                                   .mode = -1};
        struct supervise_spec spec = {
            .timeout_ms = 60000, .count = &active_jobs, .ops = &reader_ops, .data = j};
        char err[512];
        if ((rc = supervise_files(e, t->env, "files", "file", &rq, false, &spec, &j->sv, err,
                                  sizeof(err))) < 0) {
                e2b_reply_error(r, 500, "%s", err);
                free(j);
                return;
        }
        req_on_free(r, reader_gone, j);
        http_defer(r);
}

/* ------------------------------------------------------------------- POST /files */

/* undici escapes '"', CR and LF in a filename as %22, %0D, %0A: only those are undone */
static void filename_unescape(const char *in, size_t len, char *out, size_t outlen)
{
        static const struct {
                const char *esc;
                char c;
        } map[] = {{"%22", '"'}, {"%0D", '\r'}, {"%0A", '\n'}};
        size_t o = 0;
        for (size_t i = 0; i < len && o + 1 < outlen; i++) {
                bool done = false;
                for (size_t k = 0; k < ELEMENTSOF(map) && !done && i + 2 < len; k++) {
                        if (!strncasecmp(in + i, map[k].esc, 3)) {
                                out[o++] = map[k].c;
                                i += 2;
                                done = true;
                        }
                }
                if (!done)
                        out[o++] = in[i];
        }
        out[o] = 0;
}

/* The value of param (name="...") in a header line [h, end), unescaped into out. */
static bool header_param(const char *h, const char *end, const char *param, char *out,
                         size_t outlen)
{
        size_t pl = strlen(param);
        for (const char *p = h; p + pl + 2 <= end; p++) {
                if ((p == h || p[-1] == ' ' || p[-1] == ';') && !strncasecmp(p, param, pl) &&
                    p[pl] == '=' && p[pl + 1] == '"') {
                        const char *v = p + pl + 2, *q = memchr(v, '"', (size_t)(end - v));
                        if (!q)
                                return false;
                        filename_unescape(v, (size_t)(q - v), out, outlen);
                        return true;
                }
        }
        return false;
}

struct part {
        uint64_t off, len;
        char name[64];
        char filename[FILES_PATH_MAX];
};

/* The next part of a multipart body m[0..size) after *pos (just past a delimiter line);
 * 1 and *ret, 0 at the closing delimiter, -EINVAL for a malformed body. */
static int next_part(const char *m, size_t size, const char *delim, size_t dl, size_t *pos,
                     struct part *ret)
{
        const char *end = m + size, *p = m + *pos;
        if (end - p >= 2 && p[0] == '-' && p[1] == '-')
                return 0;
        if (end - p < 2 || p[0] != '\r' || p[1] != '\n')
                return -EINVAL;
        p += 2;
        const char *hend = memmem(p, (size_t)(end - p), "\r\n\r\n", 4);
        if (!hend)
                return -EINVAL;
        ret->name[0] = ret->filename[0] = 0;
        for (const char *l = p; l < hend;) {
                const char *le = memmem(l, (size_t)(hend + 2 - l), "\r\n", 2);
                if (!le)
                        le = hend;
                if (le - l > 20 && !strncasecmp(l, "Content-Disposition:", 20)) {
                        header_param(l, le, "name", ret->name, sizeof(ret->name));
                        header_param(l, le, "filename", ret->filename, sizeof(ret->filename));
                }
                l = le + 2;
        }
        const char *data = hend + 4;
        char needle[132];
        snprintf(needle, sizeof(needle), "\r\n%s", delim);
        const char *dend = memmem(data, (size_t)(end - data), needle, dl + 2);
        if (!dend)
                return -EINVAL;
        ret->off = (uint64_t)(data - m);
        ret->len = (uint64_t)(dend - data);
        *pos = (size_t)(dend + 2 + dl - m);
        return 1;
}

/* One step per part named "file" of the multipart body in fd (its filename the target, unless
 * the query has a path), each writing its byte range of the body: nothing is copied here.
 * Returns 0, or -errno with a message in err. */
static int parse_multipart(struct chain *c, int fd, const char *ctype, const struct e2b_target *t,
                           const char *qpath, char *err, size_t errlen)
{
        const char *b = ctype ? strcasestr(ctype, "boundary=") : NULL;
        char delim[128];
        if (!b) {
                snprintf(err, errlen, "multipart body without a boundary");
                return -EINVAL;
        }
        b += 9;
        bool quoted = *b == '"';
        size_t bl = quoted ? strcspn(b + 1, "\"") : strcspn(b, "; ");
        if (bl == 0 || bl > 100) {
                snprintf(err, errlen, "bad multipart boundary");
                return -EINVAL;
        }
        snprintf(delim, sizeof(delim), "--%.*s", (int)bl, quoted ? b + 1 : b);
        size_t dl = strlen(delim);
        struct stat st;
        if (fstat(fd, &st) < 0)
                return -errno;
        size_t size = (size_t)st.st_size;
        if (size == 0) {
                snprintf(err, errlen, "empty multipart body");
                return -EINVAL;
        }
        const char *m = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED)
                return -errno;
        const char *first = memmem(m, size, delim, dl);
        size_t pos = first ? (size_t)(first - m) + dl : size;
        int r = first ? 1 : -EINVAL;
        struct part *part = malloc(sizeof(*part));
        if (!part)
                r = -ENOMEM;
        while (r > 0 && (r = next_part(m, size, delim, dl, &pos, part)) > 0) {
                if (strcmp(part->name, "file"))
                        continue;
                if (c->n >= E2B_FILES_MAX_PARTS) {
                        snprintf(err, errlen, "at most %d files in one request",
                                 E2B_FILES_MAX_PARTS);
                        r = -E2BIG;
                        break;
                }
                if (c->n == c->cap) {
                        size_t cap = c->cap * 2;
                        struct step *ns = reallocarray(c->steps, cap, sizeof(*ns));
                        if (!ns) {
                                r = -ENOMEM;
                                break;
                        }
                        c->steps = ns;
                        c->cap = cap;
                }
                struct step *s = &c->steps[c->n];
                s->fd = -EBADF;
                const char *target = qpath && *qpath ? qpath : part->filename;
                if (resolve_path(t, target, s->path) < 0) {
                        snprintf(err, errlen, "invalid path \"%.200s\"", target);
                        r = -EINVAL;
                        break;
                }
                s->rq = (struct files_request){.op = FILES_WRITE,
                                               .mode = -1,
                                               .parents = true,
                                               .user = c->user,
                                               .upload_range = true,
                                               .upload_off = part->off,
                                               .upload_len = part->len};
                c->n++;
        }
        free(part);
        munmap((void *)m, size);
        if (r == -EINVAL && !err[0])
                snprintf(err, errlen, "malformed multipart body");
        if (r >= 0 && c->n == 0) {
                snprintf(err, errlen, "no part named \"file\" in the body");
                r = -EINVAL;
        }
        return r < 0 ? r : 0;
}

static int dup_cloexec(int fd)
{
        int d = fcntl(fd, F_DUPFD_CLOEXEC, 3);
        return d < 0 ? -errno : d;
}

static void files_post(struct request *r, struct engine *e, const struct e2b_target *t)
{
        int spool = req_spool_fd(r);
        if (spool < 0) {
                e2b_reply_error(r, 503, "cannot store the upload");
                return;
        }
        if (active_jobs >= E2B_FILES_MAX_ACTIVE) {
                e2b_reply_error(r, 503, "too many file operations in progress");
                return;
        }
        const char *ctype = req_header(r, "Content-Type");
        const char *qpath = req_query(r, "path");
        const char *enc = req_header(r, "Content-Encoding");
        bool multipart = ctype && !strncasecmp(ctype, "multipart/form-data", 19);
        struct chain *c = chain_new(e, t->env, multipart ? 4 : 1);
        if (!c) {
                e2b_reply_error(r, 500, "out of memory");
                return;
        }
        snprintf(c->user, sizeof(c->user), "%s", t->user);
        c->deadline_ms = now_ms() + E2B_FILES_TIMEOUT_MS;
        char err[512] = "";
        int rc = c->upload_fd = dup_cloexec(spool);
        if (rc < 0) {
                snprintf(err, sizeof(err), "the upload: %s", strerror(-rc));
        } else if (multipart) {
                rc = parse_multipart(c, spool, ctype, t, qpath, err, sizeof(err));
        } else if ((rc = resolve_path(t, qpath, c->steps[0].path)) < 0) {
                snprintf(err, sizeof(err), "path: required for a raw upload");
        } else if (enc && strcasecmp(enc, "gzip") && strcasecmp(enc, "identity")) {
                snprintf(err, sizeof(err), "Content-Encoding %.32s: only gzip", enc);
                rc = -EINVAL;
        } else {
                bool gz = enc && !strcasecmp(enc, "gzip");
                c->steps[0].rq = (struct files_request){
                    .op = FILES_WRITE, .mode = -1, .parents = true, .user = c->user, .gunzip = gz};
                c->n = 1;
        }
        if (rc < 0) {
                e2b_reply_error(r, status_of(rc), "%s", err[0] ? err : strerror(-rc));
                chain_free(c);
                return;
        }
        c->req = r;
        req_on_free(r, chain_gone, c);
        http_defer(r);
        chain_run(c);
}

/* ------------------------------------------------------------------- routing */

bool e2b_envd_handle(struct request *r, struct engine *e, const struct e2b_target *t)
{
        const char *path = req_path(r), *m = req_method(r);
        if (!strcmp(path, "/health")) {
                req_set_route(r, "/health", env_name(t->env));
                http_reply_data(r, 204, NULL, NULL, 0, NULL);
                return true;
        }
        if (strcmp(path, "/files"))
                return false;
        req_set_route(r, "/files", env_name(t->env));
        if (!strcmp(m, "GET"))
                files_get(r, e, t);
        else if (!strcmp(m, "POST"))
                files_post(r, e, t);
        else
                e2b_reply_error(r, 405, "%s is not allowed on /files", m);
        return true;
}

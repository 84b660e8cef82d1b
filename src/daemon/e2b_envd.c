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

#include <archive.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define E2B_FILES_MAX_PARTS 1000
#define E2B_FILES_TIMEOUT_MS (30u * 60 * 1000)

static unsigned active_jobs;

/* ------------------------------------------------------------------- errors and paths */

static unsigned status_of(int err)
{
        switch (-err) {
        case ENOENT:
        case ENOTDIR:
                return 404;
        case EISDIR:
        case EINVAL:
        case ENAMETOOLONG:
        case ELOOP:
                return 400;
        case EACCES:
        case EPERM:
        case EROFS:
                return 403;
        case ENOSPC:
        case EDQUOT:
        case EFBIG:
                return 507;
        case EEXIST:
                return 409;
        default:
                return 500;
        }
}

/* E2B's path rules: absolute, "~/x" or relative to home. */
static int resolve_path(const struct e2b_target *t, const char *in, char *out)
{
        char joined[FILES_PATH_MAX];
        if (!in || !*in)
                return -EINVAL;
        if (in[0] == '/')
                snprintf(joined, sizeof(joined), "%s", in);
        else if (!strcmp(in, "~"))
                snprintf(joined, sizeof(joined), "%s", t->home);
        else if (!strncmp(in, "~/", 2))
                snprintf(joined, sizeof(joined), "%s/%s", t->home, in + 2);
        else if (snprintf(joined, sizeof(joined), "%s/%s", t->home, in) >= (int)sizeof(joined))
                return -ENAMETOOLONG;
        return files_path_normalize(joined, out, FILES_PATH_MAX);
}

/* ------------------------------------------------------------------- a chain of helpers */

struct step {
        struct files_request rq;
        char path[FILES_PATH_MAX];
        int fd;
        bool exist_ok; /* mkdir of what exists is fine */
};

struct chain {
        struct request *req; /* NULL: the client went away (or none: make_user) */
        struct engine *eng;
        char env[NAME_BUF_SIZE];
        char user[33];
        struct supervise *sv;
        struct step *steps;
        size_t n, next;
        struct files_status done;
        bool has_done;
        e2b_done_fn cb; /* make_user */
        void *cb_data;
};

static void chain_free(struct chain *c)
{
        for (size_t i = 0; i < c->n; i++)
                if (c->steps[i].fd >= 0)
                        close(c->steps[i].fd);
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
                                json_array_append_new(
                                    arr, json_pack("{s:s,s:s,s:s}", "path", p, "name",
                                                   slash ? slash + 1 : p, "type", "file"));
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
                return chain_end(c, -ETIMEDOUT, "the file operation timed out");
        if (!c->has_done)
                return chain_end(c, -EIO, "the file helper died");
        if (c->done.err < 0 && !(s->exist_ok && c->done.err == -EEXIST))
                return chain_end(c, c->done.err, c->done.msg[0] ? c->done.msg : strerror(-c->done.err));
        chain_run(c);
}

static const struct supervise_ops chain_ops = {.files_status = chain_status, .exit = chain_exit};

static void chain_run(struct chain *c)
{
        if (c->next == c->n)
                return chain_end(c, 0, NULL);
        struct env *v = engine_find(c->eng, c->env);
        if (!v || !env_running(v) || env_paused(v))
                return chain_end(c, -ENOENT, "the sandbox is not running");
        struct step *s = &c->steps[c->next++];
        s->rq.path = s->path;
        s->rq.upload_fd = s->fd;
        c->has_done = false;
        struct supervise_spec spec = {.timeout_ms = E2B_FILES_TIMEOUT_MS,
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
        c->eng = e;
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
        struct supervise_spec spec = {.timeout_ms = 60000,
                                      .count = &active_jobs,
                                      .ops = &reader_ops,
                                      .data = j};
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

static int tmpfile_in(struct engine *e)
{
        char dir[4200];
        if (BUF_PRINTF(dir, "%s/tmp", engine_root(e)) < 0)
                return -ENAMETOOLONG;
        int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
        return fd < 0 ? -errno : fd;
}

/* bytes [off, off+len) of src into a new temporary file, positioned at 0 */
static int copy_range(struct engine *e, int src, uint64_t off, uint64_t len)
{
        int fd = tmpfile_in(e);
        if (fd < 0)
                return fd;
        loff_t in = (loff_t)off;
        while (len > 0) {
                ssize_t n = copy_file_range(src, &in, fd, NULL, len, 0);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0) {
                        int r = n < 0 ? -errno : -EIO;
                        close(fd);
                        return r;
                }
                len -= (uint64_t)n;
        }
        if (lseek(fd, 0, SEEK_SET) < 0) {
                int r = -errno;
                close(fd);
                return r;
        }
        return fd;
}

/* gunzip the whole of src into a new temporary file */
static int gunzip_to_tmp(struct engine *e, int src)
{
        int fd = tmpfile_in(e);
        if (fd < 0)
                return fd;
        struct archive *a = archive_read_new();
        int r = -ENOMEM;
        if (!a)
                goto fail;
        archive_read_support_filter_gzip(a);
        archive_read_support_format_raw(a);
        struct archive_entry *ent;
        r = -EINVAL;
        if (archive_read_open_fd(a, src, 65536) != ARCHIVE_OK ||
            archive_read_next_header(a, &ent) != ARCHIVE_OK)
                goto fail;
        char buf[65536];
        uint64_t total = 0;
        for (;;) {
                la_ssize_t n = archive_read_data(a, buf, sizeof(buf));
                if (n == 0)
                        break;
                if (n < 0)
                        goto fail;
                total += (uint64_t)n;
                if (total > FILES_MAX_WRITE) {
                        r = -EFBIG;
                        goto fail;
                }
                if (write_all(fd, buf, (size_t)n) < 0) {
                        r = -errno;
                        goto fail;
                }
        }
        archive_read_free(a);
        if (lseek(fd, 0, SEEK_SET) < 0) {
                r = -errno;
                close(fd);
                return r;
        }
        return fd;
fail:
        if (a)
                archive_read_free(a);
        close(fd);
        return r;
}

/* undici escapes '"', CR and LF in a filename as %22, %0D, %0A: only those are undone */
static void filename_unescape(const char *in, size_t len, char *out, size_t outlen)
{
        size_t o = 0;
        for (size_t i = 0; i < len && o + 1 < outlen; i++) {
                if (in[i] == '%' && i + 2 < len) {
                        if (!strncmp(in + i, "%22", 3)) {
                                out[o++] = '"', i += 2;
                                continue;
                        }
                        if (!strncasecmp(in + i, "%0D", 3)) {
                                out[o++] = '\r', i += 2;
                                continue;
                        }
                        if (!strncasecmp(in + i, "%0A", 3)) {
                                out[o++] = '\n', i += 2;
                                continue;
                        }
                }
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

/* The multipart body in fd: one step per part named "file" (its filename the target, unless
 * the query has a path). Returns the count or -errno with a message. */
static int parse_multipart(struct engine *e, struct chain *c, int fd, const char *ctype,
                           const struct e2b_target *t, const char *qpath, char *err,
                           size_t errlen)
{
        const char *b = ctype ? strcasestr(ctype, "boundary=") : NULL;
        char delim[128];
        if (!b) {
                snprintf(err, errlen, "multipart body without a boundary");
                return -EINVAL;
        }
        b += 9;
        size_t bl = *b == '"' ? strcspn(b + 1, "\"") : strcspn(b, "; ");
        if (bl == 0 || bl > 100) {
                snprintf(err, errlen, "bad multipart boundary");
                return -EINVAL;
        }
        snprintf(delim, sizeof(delim), "--%.*s", (int)bl, *b == '"' ? b + 1 : b);
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
        const char *end = m + size;
        const char *p = memmem(m, size, delim, dl);
        int r = 0;
        while (p) {
                p += dl;
                if (end - p >= 2 && p[0] == '-' && p[1] == '-')
                        break; /* the closing delimiter */
                if (end - p < 2 || p[0] != '\r' || p[1] != '\n') {
                        r = -EINVAL;
                        break;
                }
                p += 2;
                const char *hend = memmem(p, (size_t)(end - p), "\r\n\r\n", 4);
                if (!hend) {
                        r = -EINVAL;
                        break;
                }
                char name[64] = "", fname[FILES_PATH_MAX] = "";
                for (const char *l = p; l < hend;) {
                        const char *le = memmem(l, (size_t)(hend + 2 - l), "\r\n", 2);
                        if (!le)
                                le = hend;
                        if (le - l > 20 && !strncasecmp(l, "Content-Disposition:", 20)) {
                                header_param(l, le, "name", name, sizeof(name));
                                header_param(l, le, "filename", fname, sizeof(fname));
                        }
                        l = le + 2;
                }
                const char *data = hend + 4;
                char needle[132];
                snprintf(needle, sizeof(needle), "\r\n%s", delim);
                const char *dend = memmem(data, (size_t)(end - data), needle, dl + 2);
                if (!dend) {
                        r = -EINVAL;
                        break;
                }
                if (!strcmp(name, "file")) {
                        if (c->n >= E2B_FILES_MAX_PARTS) {
                                snprintf(err, errlen, "at most %d files", E2B_FILES_MAX_PARTS);
                                r = -E2BIG;
                                break;
                        }
                        struct step *s = &c->steps[c->n];
                        const char *target = qpath && *qpath ? qpath : fname;
                        if (resolve_path(t, target, s->path) < 0) {
                                snprintf(err, errlen, "invalid path \"%.200s\"", target);
                                r = -EINVAL;
                                break;
                        }
                        s->fd = copy_range(e, fd, (uint64_t)(data - m), (uint64_t)(dend - data));
                        if (s->fd < 0) {
                                r = s->fd;
                                break;
                        }
                        s->rq = (struct files_request){.op = FILES_WRITE,
                                                       .mode = -1,
                                                       .parents = true,
                                                       .user = c->user};
                        c->n++;
                }
                p = dend + 2;
        }
        munmap((void *)m, size);
        if (r == -EINVAL && !err[0])
                snprintf(err, errlen, "malformed multipart body");
        if (r >= 0 && c->n == 0) {
                snprintf(err, errlen, "no part named \"file\" in the body");
                r = -EINVAL;
        }
        return r < 0 ? r : (int)c->n;
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
        const char *ctype = req_header(r, "Content-Type");
        const char *qpath = req_query(r, "path");
        bool multipart = ctype && !strncasecmp(ctype, "multipart/form-data", 19);
        struct chain *c = chain_new(e, t->env, multipart ? E2B_FILES_MAX_PARTS : 1);
        if (!c) {
                e2b_reply_error(r, 500, "out of memory");
                return;
        }
        snprintf(c->user, sizeof(c->user), "%s", t->user);
        char err[512] = "";
        int rc;
        if (multipart) {
                rc = parse_multipart(e, c, spool, ctype, t, qpath, err, sizeof(err));
        } else {
                struct step *s = &c->steps[0];
                const char *enc = req_header(r, "Content-Encoding");
                rc = resolve_path(t, qpath, s->path);
                if (rc < 0)
                        snprintf(err, sizeof(err), "path: required for a raw upload");
                else if (enc && !strcasecmp(enc, "gzip"))
                        rc = s->fd = gunzip_to_tmp(e, spool);
                else if (enc && strcasecmp(enc, "identity"))
                        rc = -EINVAL, snprintf(err, sizeof(err), "Content-Encoding %.32s: only gzip", enc);
                else
                        rc = s->fd = dup_cloexec(spool);
                if (s->fd >= 0 && rc >= 0) {
                        s->rq = (struct files_request){
                            .op = FILES_WRITE, .mode = -1, .parents = true, .user = c->user};
                        c->n = 1;
                }
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

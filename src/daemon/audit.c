/* The audit log (see audit.h for the format and the durability promise). One process-wide
 * log: the daemon is single-threaded, so a record is built and written in one go. */
#include "daemon/audit.h"
#include "daemon/log.h"
#include "daemon/syncer.h"
#include "lib/parse.h"
#include "lib/util.h"

#include <sys/stat.h>
#include <time.h>

static struct {
        int dirfd, fd;
        uint64_t size; /* of the current file */
        uint64_t max_size;
        unsigned keep;
        struct loop *loop;
        struct loop_timer *sync; /* armed while records are unsynced */
        struct syncer *syncer;   /* runs the fdatasync off the loop; NULL: in place */
        struct syncer_wait *syncing; /* the one sync asked of it and not answered yet */
        bool warned;             /* a write failure is logged once until a write works */
} audit = {.dirfd = -EBADF, .fd = -EBADF};

const char *audit_format_time(int64_t unix_s, unsigned ms, char buf[static AUDIT_TIME_SIZE])
{
        struct tm tm;
        time_t t = (time_t)unix_s;
        char tmp[64];
        if (!gmtime_r(&t, &tm))
                memset(&tm, 0, sizeof(tm));
        snprintf(tmp, sizeof(tmp), "%04d-%02d-%02dT%02d:%02d:%02d.%03uZ",
                 (tm.tm_year + 1900) % 10000, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
                 tm.tm_sec, ms % 1000);
        snprintf(buf, AUDIT_TIME_SIZE, "%.24s", tmp);
        return buf;
}

const char *audit_time_now(char buf[static AUDIT_TIME_SIZE])
{
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return audit_format_time(ts.tv_sec, (unsigned)(ts.tv_nsec / 1000000), buf);
}

/* ------------------------------------------------------------------------------ the file */

static int open_current(void)
{
        int fd = openat(audit.dirfd, "audit.log",
                        O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
                return -errno;
        struct stat st;
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
                int r = S_ISREG(st.st_mode) ? -errno : -EINVAL;
                close(fd);
                return r;
        }
        if ((st.st_mode & 07777) != 0600)
                (void)fchmod(fd, 0600); /* an older or hand-made file: private again */
        /* A torn last line (a short write: the disk filled) would swallow the next record:
         * end it first. */
        char last;
        if (st.st_size > 0 && pread(fd, &last, 1, st.st_size - 1) == 1 && last != '\n' &&
            write(fd, "\n", 1) == 1)
                st.st_size++;
        audit.fd = fd;
        audit.size = (uint64_t)st.st_size;
        return 0;
}

static void on_synced(int result, void *data)
{
        (void)data;
        audit.syncing = NULL; /* answered: freed */
        if (result < 0)
                log_warn("audit: fdatasync: %s", strerror(-result));
}

/* The sync process runs it while the loop serves others (in place without one). One at a
 * time: while one is asked and not answered, the timer tries again later. */
static void on_sync(struct loop_timer *t, void *data)
{
        (void)t;
        (void)data;
        audit.sync = NULL;
        if (audit.fd < 0)
                return;
        if (audit.syncing) {
                audit.sync = loop_add_timer(audit.loop, AUDIT_SYNC_MS, on_sync, NULL);
                return;
        }
        if (audit.syncer &&
            syncer_after(audit.syncer, audit.fd, on_synced, NULL, &audit.syncing) >= 0)
                return;
        if (fdatasync(audit.fd) < 0)
                log_warn("audit: fdatasync: %m");
}

/* The fd is synced and closed here: an answer for it no longer matters. */
static void forget_sync(void)
{
        syncer_cancel(audit.syncing);
        audit.syncing = NULL;
}

/* audit.log -> audit.log.1 -> ... -> audit.log.(keep-1); the oldest is removed. */
static int rotate(void)
{
        if (audit.fd >= 0) {
                forget_sync();
                (void)fdatasync(audit.fd);
                close(audit.fd);
                audit.fd = -EBADF;
        }
        char from[32], to[32];
        if (audit.keep <= 1) {
                (void)unlinkat(audit.dirfd, "audit.log", 0);
        } else {
                snprintf(to, sizeof(to), "audit.log.%u", audit.keep - 1);
                (void)unlinkat(audit.dirfd, to, 0);
                for (unsigned i = audit.keep - 1; i >= 1; i--) {
                        if (i == 1)
                                snprintf(from, sizeof(from), "audit.log");
                        else
                                snprintf(from, sizeof(from), "audit.log.%u", i - 1);
                        snprintf(to, sizeof(to), "audit.log.%u", i);
                        if (renameat(audit.dirfd, from, audit.dirfd, to) < 0 && errno != ENOENT)
                                log_warn("audit: rotating %s: %m", from);
                }
        }
        int r = open_current();
        if (r >= 0)
                (void)fsync(audit.dirfd); /* the renames and the new file */
        return r;
}

/* One record, one write(2): O_APPEND makes the line land whole at the end. */
static void write_record(json_t *rec)
{
        char *text = json_dumps(rec, JSON_COMPACT | JSON_ENSURE_ASCII | JSON_PRESERVE_ORDER);
        json_decref(rec);
        if (!text || audit.dirfd < 0) {
                free(text);
                return;
        }
        size_t len = strlen(text);
        text[len++] = '\n'; /* replaces the NUL; the buffer is not a string any more */
        if (audit.fd < 0 || (audit.size > 0 && audit.size + len > audit.max_size)) {
                /* Full: rotate. Not open (an earlier failure): try again, rotating nothing. */
                int r = audit.fd >= 0 ? rotate() : open_current();
                if (r < 0) {
                        if (!audit.warned)
                                log_error("audit: cannot open audit.log: %s", strerror(-r));
                        audit.warned = true;
                        free(text);
                        return;
                }
        }
        ssize_t n = write(audit.fd, text, len);
        free(text);
        if (n != (ssize_t)len) {
                if (!audit.warned)
                        log_error("audit: writing a record: %s",
                                  n < 0 ? strerror(errno) : "short write");
                audit.warned = true;
                if (n > 0)
                        audit.size += (uint64_t)n;
                return;
        }
        audit.warned = false;
        audit.size += len;
        if (!audit.sync)
                audit.sync = loop_add_timer(audit.loop, AUDIT_SYNC_MS, on_sync, NULL);
}

int audit_open(const struct audit_config *cfg)
{
        char dir[4200];
        int r = BUF_PRINTF(dir, "%s/audit", cfg->root);
        if (r < 0)
                return r;
        if (mkdir(dir, 0700) < 0 && errno != EEXIST)
                return -errno;
        int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (dfd < 0)
                return -errno;
        (void)fchmod(dfd, 0700);
        audit.dirfd = dfd;
        audit.max_size = cfg->max_size ? cfg->max_size : AUDIT_DEFAULT_MAX_SIZE;
        audit.keep = cfg->keep ? cfg->keep : AUDIT_DEFAULT_KEEP;
        audit.loop = cfg->loop;
        audit.syncer = cfg->syncer;
        if ((r = open_current()) < 0) {
                close(audit.dirfd);
                audit.dirfd = -EBADF;
        }
        return r;
}

void audit_close(void)
{
        loop_cancel_timer(audit.sync);
        audit.sync = NULL;
        forget_sync();
        audit.syncer = NULL;
        if (audit.fd >= 0) {
                (void)fdatasync(audit.fd);
                close(audit.fd);
        }
        if (audit.dirfd >= 0)
                close(audit.dirfd);
        audit.fd = audit.dirfd = -EBADF;
}

/* ------------------------------------------------------------------------------ records */

json_t *audit_argv_json(char *const *argv, size_t max, bool *ret_truncated)
{
        json_t *a = json_array();
        size_t used = 0;
        bool cut = false;
        for (size_t i = 0; a && argv && argv[i]; i++) {
                size_t len = strlen(argv[i]);
                if (used + len > max) {
                        size_t room = max - used;
                        if (room > 0)
                                json_array_append_new(
                                    a, json_stringn(argv[i], utf8_whole_prefix(argv[i], room)));
                        cut = true;
                        break;
                }
                used += len;
                json_t *j = json_string(argv[i]);
                json_array_append_new(a, j ? j : json_string("?"));
        }
        if (ret_truncated)
                *ret_truncated = cut;
        return a;
}

/* The fields every record starts with, from the request. */
static json_t *record_head(const struct request *r, unsigned status, double elapsed_s)
{
        char now[AUDIT_TIME_SIZE], action[320];
        const char *route = req_route(r);
        snprintf(action, sizeof(action), "%s %.300s", req_method(r),
                 route[0] ? route : req_path(r));
        json_t *rec = json_pack("{s:s,s:s}", "time", audit_time_now(now), "token", req_actor(r));
        const char *peer = req_from_gateway(r) ? req_header(r, "Paddock-Peer") : NULL;
        if (rec && peer)
                json_object_set_new(rec, "peer", json_stringn(peer, strnlen(peer, 64)));
        if (rec) {
                json_t *j = json_string(action); /* NULL for a path that is not UTF-8 */
                json_object_set_new(rec, "action", j ? j : json_string("?"));
                json_object_set_new(rec, "env", json_string(req_env(r)));
                json_object_set_new(rec, "status", json_integer(status));
                json_object_set_new(rec, "duration_ms",
                                    json_integer((json_int_t)(elapsed_s * 1000.0 + 0.5)));
        }
        return rec;
}

static void add_notes(json_t *rec, json_t *notes)
{
        const char *k;
        json_t *v;
        json_object_foreach(notes, k, v)
        {
                if (!json_object_get(rec, k))
                        json_object_set(rec, k, v);
        }
}

/* What a request asked for, in the fields people look for, never values that may hold secrets
 * (environment variables, stdin, labels) or file contents. */
static const char *const body_fields[] = {
    "name",     "kind",       "image",    "cpus",      "memory",  "swap",
    "pids",     "disk",       "ttl",      "autostart", "network", "host_port",
    "port",     "proto",      "snapshot", "from",      "to",      "overwrite",
    "signal",   "pull",       "build",    "insecure",  "admin",   "max_envs",
    "max_cpus", "max_memory", "max_disk", "rate",      "expires", NULL,
};

static void add_string(json_t *rec, const char *key, const char *s)
{
        size_t n = strnlen(s, 4096);
        if (!json_object_get(rec, key) && utf8_valid(s, n))
                json_object_set_new(rec, key, json_stringn(s, utf8_whole_prefix(s, n)));
}

static void add_request_details(json_t *rec, const struct request *r)
{
        const char *route = req_route(r);
        /* The resource a pattern names beyond its environment: /v1/tokens/{name},
         * /v1/envs/{name}/snapshots/{snap}, ... */
        size_t placeholders = 0;
        for (const char *p = route; (p = strchr(p, '{')); p++)
                placeholders++;
        if (!strncmp(route, "/v1/envs/{name}", 15))
                placeholders--;
        if (placeholders > 0)
                add_string(rec, "target", req_path(r));
        if (!strncmp(route, "/v1/envs/{name}/exec", 20))
                return; /* exec: argv and exit code only, never stdin */
        const char *q = req_query(r, "path");
        if (q)
                add_string(rec, "path", q);
        if ((q = req_query(r, "name")))
                add_string(rec, "name", q);
        struct stat st;
        if (req_spool_fd(r) >= 0 && fstat(req_spool_fd(r), &st) == 0)
                json_object_set_new(rec, "size", json_integer((json_int_t)st.st_size));
        size_t len;
        const char *body = req_body(r, &len);
        if (len == 0 || len > (64u << 10) || body[0] != '{')
                return;
        json_t *j = json_loadb(body, len, 0, NULL);
        /* A create names its environment in the body: file the record under it. */
        const char *name = json_string_value(json_object_get(j, "name"));
        if (!strcmp(route, "/v1/envs") && name && name_is_valid(name))
                json_object_set_new(rec, "env", json_string(name));
        for (size_t i = 0; body_fields[i]; i++) {
                json_t *v = json_object_get(j, body_fields[i]);
                if (v && !json_object_get(rec, body_fields[i]))
                        json_object_set(rec, body_fields[i], v);
        }
        json_decref(j);
}

static bool is_mutating(const struct request *r)
{
        return strcmp(req_method(r), "GET") != 0 && strcmp(req_method(r), "HEAD") != 0;
}

/* Answers whose record the exec writes when its command ends: a buffered exec answers 200
 * only then (and if its client went away first, never); a streamed one answers 200 and a
 * terminal session 101 as the command starts. Errors are recorded as answered. */
static bool recorded_by_exec(const struct request *r)
{
        unsigned s = req_status(r);
        const char *route = req_route(r);
        if (!strcmp(route, "/v1/envs/{name}/exec"))
                return !strcmp(req_method(r), "POST") && (s == 0 || s == 200);
        if (!strcmp(route, "/v1/envs/{name}/exec/ws"))
                return s == 0 || s == 101;
        return false;
}

static void record_request(struct request *r)
{
        json_t *rec = record_head(r, req_status(r), req_elapsed_s(r));
        if (!rec)
                return;
        add_notes(rec, req_notes(r));
        add_request_details(rec, r);
        write_record(rec);
}

void audit_request_answering(struct request *r)
{
        if (is_mutating(r) && !recorded_by_exec(r))
                record_request(r);
}

void audit_request_done(struct request *r)
{
        /* Answered requests were recorded as their answer went out. */
        if (req_status(r) == 0 && is_mutating(r) && !recorded_by_exec(r))
                record_request(r);
}

struct audit_exec {
        json_t *rec; /* the head, with status and duration still to come */
        uint64_t started_ms;
        double elapsed_before_s; /* of the request when the exec began */
        unsigned status;
};

struct audit_exec *audit_exec_begin(struct request *r, char *const *argv)
{
        struct audit_exec *a = calloc(1, sizeof(*a));
        if (!a)
                return NULL;
        bool cut = false;
        req_set_note(r, "argv", audit_argv_json(argv, AUDIT_ARGV_MAX, &cut));
        if (cut)
                req_set_note(r, "argv_truncated", json_true());
        a->rec = record_head(r, 0, 0);
        if (!a->rec) {
                free(a);
                return NULL;
        }
        add_notes(a->rec, req_notes(r));
        a->started_ms = now_ms();
        a->elapsed_before_s = req_elapsed_s(r);
        /* What the client is told when it runs: 101 for a terminal, 201 for a background
         * process, 200 for the rest. */
        a->status = !strcmp(req_method(r), "GET")             ? 101
                    : json_object_get(req_notes(r), "detach") ? 201
                                                              : 200;
        return a;
}

void audit_exec_end(struct audit_exec *a, const struct exec_result *res)
{
        if (!a)
                return;
        char now[AUDIT_TIME_SIZE];
        json_object_set_new(a->rec, "time", json_string(audit_time_now(now)));
        json_object_set_new(a->rec, "status", json_integer(a->status));
        uint64_t ms = (uint64_t)(a->elapsed_before_s * 1000.0) + (now_ms() - a->started_ms);
        json_object_set_new(a->rec, "duration_ms", json_integer((json_int_t)ms));
        json_object_set_new(a->rec, "exit_code", json_integer(res->exit_code));
        json_object_set_new(a->rec, "exec_ms", json_integer((json_int_t)res->duration_ms));
        if (res->timed_out)
                json_object_set_new(a->rec, "timed_out", json_true());
        write_record(a->rec);
        a->rec = NULL;
        free(a);
}

void audit_exec_free(struct audit_exec *a)
{
        if (!a)
                return;
        json_decref(a->rec);
        free(a);
}

/* ------------------------------------------------------------------------------ queries */

static bool record_matches(json_t *rec, const struct audit_filter *f)
{
        if (f->env && strcmp(json_string_value(json_object_get(rec, "env")) ?: "", f->env) != 0)
                return false;
        if (f->token &&
            strcmp(json_string_value(json_object_get(rec, "token")) ?: "\x01", f->token) != 0)
                return false;
        return true;
}

/* Most lines of a query's walk are not wanted: tell from the raw text where that is certain.
 * A record starts with its time ({"time":"...", written so), and names are plain characters,
 * so "env":"NAME" appears verbatim in a record about NAME. */
enum { PRE_MAYBE, PRE_SKIP, PRE_OLDER };

static bool has_field(const char *line, size_t len, const char *key, const char *value)
{
        char needle[128];
        int n = snprintf(needle, sizeof(needle), "\"%s\":\"%s\"", key, value);
        return n < 0 || (size_t)n >= sizeof(needle) || memmem(line, len, needle, (size_t)n);
}

static int precheck(const char *line, size_t len, const struct audit_filter *f)
{
        static const char head[] = "{\"time\":\"";
        size_t h = sizeof(head) - 1;
        if (f->since[0] && len > h + AUDIT_TIME_SIZE - 1 && !memcmp(line, head, h) &&
            memcmp(line + h, f->since, AUDIT_TIME_SIZE - 1) < 0)
                return PRE_OLDER;
        if (f->env && !has_field(line, len, "env", f->env))
                return PRE_SKIP;
        if (f->token && !has_field(line, len, "token", f->token))
                return PRE_SKIP;
        return PRE_MAYBE;
}

/* The last max_bytes of dirfd/name (a file bigger than that is read from a line start). */
static int read_tail(int dirfd, const char *name, uint64_t max_bytes, char **ret, size_t *ret_len)
{
        _cleanup_close_ int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return -errno;
        struct stat st;
        if (fstat(fd, &st) < 0)
                return -errno;
        uint64_t size = (uint64_t)st.st_size, off = size > max_bytes ? size - max_bytes : 0;
        char *buf = malloc(size - off + 1);
        if (!buf)
                return -ENOMEM;
        ssize_t n = pread(fd, buf, size - off, (off_t)off);
        if (n < 0) {
                free(buf);
                return -errno;
        }
        buf[n] = 0;
        *ret = buf;
        *ret_len = (size_t)n;
        return 0;
}

/* Walks the files newest first, each from its end, and stops at the first record older than
 * since or when limit records matched: the work is bounded by the log's size cap. */
int audit_query(const struct audit_filter *f, json_t **ret_records)
{
        if (audit.dirfd < 0)
                return -ENOENT;
        json_t *found = json_array(); /* newest first while collecting */
        if (!found)
                return -ENOMEM;
        bool stop = false;
        /* Files grow past max_size only by one record; a reconfigured cap reads what it can. */
        uint64_t max_read = audit.max_size + (64u << 10);
        for (unsigned i = 0; i < audit.keep && !stop; i++) {
                char name[32];
                if (i == 0)
                        snprintf(name, sizeof(name), "audit.log");
                else
                        snprintf(name, sizeof(name), "audit.log.%u", i);
                char *buf = NULL;
                size_t len = 0;
                int r = read_tail(audit.dirfd, name, max_read, &buf, &len);
                if (r == -ENOENT)
                        continue;
                if (r < 0) {
                        json_decref(found);
                        return r;
                }
                /* Lines from the last one back; a partial first line (from read_tail's cut or
                 * a torn write) fails to parse and is skipped. */
                size_t end = len;
                while (end > 0 && !stop) {
                        size_t start = end - 1;
                        while (start > 0 && buf[start - 1] != '\n')
                                start--;
                        size_t line_len = end - start;
                        if (line_len > 0 && buf[start + line_len - 1] == '\n')
                                line_len--;
                        const char *line = buf + start;
                        end = start;
                        int cheap = precheck(line, line_len, f);
                        if (cheap == PRE_OLDER) {
                                stop = true;
                                continue;
                        }
                        if (cheap == PRE_SKIP || line_len == 0)
                                continue;
                        json_t *rec = json_loadb(line, line_len, 0, NULL);
                        const char *t = json_string_value(json_object_get(rec, "time"));
                        if (t && f->since[0] && strcmp(t, f->since) < 0)
                                stop = true;
                        else if (t && record_matches(rec, f)) {
                                json_array_append(found, rec);
                                stop = json_array_size(found) >= f->limit;
                        }
                        json_decref(rec);
                }
                free(buf);
        }
        /* Oldest first. */
        json_t *out = json_array();
        for (size_t i = json_array_size(found); out && i > 0; i--)
                json_array_append(out, json_array_get(found, i - 1));
        json_decref(found);
        if (!out)
                return -ENOMEM;
        *ret_records = out;
        return 0;
}

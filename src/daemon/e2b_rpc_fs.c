/* envd's filesystem.Filesystem service (docs/e2b.md) on the daemon's files machinery:
 * every operation is one or more files helpers (lib/files.c: each enters the environment and
 * resolves every path inside it, never on the host), run one after the other from the loop.
 * Owner and group names come from the environment's own /etc/passwd and /etc/group, read the
 * same way and kept for a few seconds per environment. WatchDir is a FILES_WATCH helper
 * (as GET files/watch) whose NDJSON lines become Connect envelopes. */
#include "daemon/e2b_connect.h"
#include "daemon/exec.h"
#include "daemon/log.h"
#include "daemon/supervise.h"
#include "lib/files.h"
#include "lib/paddock.h"
#include "lib/util.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define FS_TIMEOUT_MS        (60u * 1000)
#define FS_LONG_TIMEOUT_MS   (30u * 60 * 1000)
#define FS_MAX_DATA          (8u << 20)
#define FS_IDS_MAX_BYTES     (1u << 20)
#define FS_IDS_TTL_MS        5000
#define FS_IDS_EVICT_MS      (3 * FS_LONG_TIMEOUT_MS)
#define FS_MAX_ACTIVE        64
#define FS_LIST_MAX_ENTRIES  FILES_LIST_MAX
#define FS_LIST_MAX_DEPTH    64
#define FS_WATCH_MAX_ACTIVE  64

static unsigned active;

/* ------------------------------------------------------------------------------ names */

struct idcache {
        char env[NAME_BUF_SIZE];
        uint64_t at;
        char *passwd, *group;
        struct idcache *next;
};
static struct idcache *idcaches;

static struct idcache *idcache_get(const char *env, bool fresh_only)
{
        for (struct idcache *c = idcaches; c; c = c->next)
                if (!strcmp(c->env, env))
                        return !fresh_only || now_ms() - c->at < FS_IDS_TTL_MS ? c : NULL;
        return NULL;
}

static void idcache_set(const char *env, char *passwd, char *group)
{
        /* Forget the names of other environments unused for long (gone ones too); longer
         * than any operation that may still be reading them. */
        for (struct idcache **q = &idcaches; *q;) {
                struct idcache *o = *q;
                if (strcmp(o->env, env) != 0 && now_ms() - o->at >= FS_IDS_EVICT_MS) {
                        *q = o->next;
                        free(o->passwd);
                        free(o->group);
                        free(o);
                } else {
                        q = &o->next;
                }
        }
        struct idcache *c = idcache_get(env, false);
        if (!c) {
                c = calloc(1, sizeof(*c));
                if (!c) {
                        free(passwd);
                        free(group);
                        return;
                }
                snprintf(c->env, sizeof(c->env), "%s", env);
                c->next = idcaches;
                idcaches = c;
        }
        free(c->passwd);
        free(c->group);
        c->passwd = passwd;
        c->group = group;
        c->at = now_ms();
}

/* The name of id in a passwd- or group-format text (field 3 is the id), else NULL. */
static bool id_name(const char *text, uint32_t id, char *out, size_t len)
{
        for (const char *l = text; l && *l;) {
                const char *end = strchr(l, '\n');
                size_t n = end ? (size_t)(end - l) : strlen(l);
                const char *c1 = memchr(l, ':', n);
                const char *c2 = c1 ? memchr(c1 + 1, ':', n - (size_t)(c1 + 1 - l)) : NULL;
                if (c2) {
                        char num[16];
                        const char *c3 = memchr(c2 + 1, ':', n - (size_t)(c2 + 1 - l));
                        size_t nl = c3 ? (size_t)(c3 - c2 - 1) : n - (size_t)(c2 + 1 - l);
                        if (nl > 0 && nl < sizeof(num)) {
                                memcpy(num, c2 + 1, nl);
                                num[nl] = 0;
                                if (strspn(num, "0123456789") == nl &&
                                    strtoul(num, NULL, 10) == id && (size_t)(c1 - l) < len &&
                                    c1 > l) {
                                        memcpy(out, l, (size_t)(c1 - l));
                                        out[c1 - l] = 0;
                                        return true;
                                }
                        }
                }
                l = end ? end + 1 : NULL;
        }
        return false;
}

static bool user_exists(const char *passwd, const char *user)
{
        size_t ul = strlen(user);
        for (const char *l = passwd; l && *l;) {
                if (!strncmp(l, user, ul) && l[ul] == ':')
                        return true;
                l = strchr(l, '\n');
                l = l ? l + 1 : NULL;
        }
        return false;
}

/* ------------------------------------------------------------------------------ EntryInfo */

/* Go's FileMode.String(): type letters (d, L, ...), setuid/setgid/sticky (u, g, t), rwx. */
static void go_perm_string(uint32_t type, uint32_t mode, char *out)
{
        size_t n = 0;
        if (type == FILES_T_DIR)
                out[n++] = 'd';
        if (type == FILES_T_SYMLINK)
                out[n++] = 'L';
        if (mode & 04000)
                out[n++] = 'u';
        if (mode & 02000)
                out[n++] = 'g';
        if (mode & 01000)
                out[n++] = 't';
        if (n == 0)
                out[n++] = '-';
        const char *rwx = "rwxrwxrwx";
        for (int i = 0; i < 9; i++)
                out[n++] = (mode & (1u << (8 - i))) ? rwx[i] : '-';
        out[n] = 0;
}

static json_t *entry_info(const char *env, const struct files_entry *e, const char *path,
                          const char *name, size_t name_len, const char *target)
{
        static const char *const types[] = {"FILE_TYPE_FILE", "FILE_TYPE_DIRECTORY",
                                            "FILE_TYPE_SYMLINK", "FILE_TYPE_FILE"};
        char perm[16], owner[64], group[64], t[RFC3339_SIZE + 8], size[24];
        go_perm_string(e->type, e->mode, perm);
        struct idcache *c = idcache_get(env, false);
        if (!c || !id_name(c->passwd, e->uid, owner, sizeof(owner)))
                snprintf(owner, sizeof(owner), "%u", e->uid);
        if (!c || !id_name(c->group, e->gid, group, sizeof(group)))
                snprintf(group, sizeof(group), "%u", e->gid);
        format_rfc3339(e->mtime, t);
        snprintf(size, sizeof(size), "%llu", (unsigned long long)e->size);
        json_t *o = json_object();
        json_object_set_new(o, "name", utf8_valid(name, name_len) ? json_stringn(name, name_len)
                                                                    : json_string("?"));
        json_object_set_new(o, "type", json_string(types[e->type < 4 ? e->type : 0]));
        json_object_set_new(o, "path", utf8_valid(path, strlen(path)) ? json_string(path)
                                                                        : json_string("?"));
        json_object_set_new(o, "size", json_string(size));
        json_object_set_new(o, "mode", json_integer(e->mode & 0777));
        json_object_set_new(o, "permissions", json_string(perm));
        json_object_set_new(o, "owner", json_string(owner));
        json_object_set_new(o, "group", json_string(group));
        if (t[0])
                json_object_set_new(o, "modifiedTime", json_string(t));
        if (e->type == FILES_T_SYMLINK && target && utf8_valid(target, e->target_len))
                json_object_set_new(o, "symlinkTarget", json_stringn(target, e->target_len));
        return o;
}

/* ------------------------------------------------------------------------------ helper jobs */

enum fs_call { C_STAT, C_LIST, C_MKDIR, C_MOVE, C_REMOVE };

/* One RPC: a sequence of helpers. step() runs after each helper (and first with no result). */
struct fsop {
        struct request *req; /* NULL once the client is gone */
        struct engine *eng;
        enum fs_call call;
        char env[NAME_BUF_SIZE];
        char user[33];
        struct supervise *sv;
        int stage;
        /* the last helper's result */
        struct files_status done;
        bool has_done, timed_out;
        char *data;
        size_t len, cap;
        bool overflow;
        /* arguments and state */
        char path[FILES_PATH_MAX], to[FILES_PATH_MAX];
        char *passwd, *group; /* being read */
        unsigned depth;
        /* ListDir: the directories still to list (paths, NUL-separated) with their levels */
        char **queue;
        unsigned *levels;
        size_t qn, qi;
        json_t *entries;
};

static void fsop_free(struct fsop *f)
{
        supervise_abandon(f->sv, f->req == NULL && (f->call == C_STAT || f->call == C_LIST));
        for (size_t i = 0; i < f->qn; i++)
                free(f->queue[i]);
        free(f->queue);
        free(f->levels);
        free(f->data);
        free(f->passwd);
        free(f->group);
        json_decref(f->entries);
        free(f);
        active--;
}

static void step(struct fsop *f);

static void take_status(void *ctx, const struct files_status *st)
{
        struct fsop *f = ctx;
        if (st->phase == FILES_DONE && !f->has_done) {
                f->done = *st;
                f->done.msg[sizeof(f->done.msg) - 1] = 0;
                f->has_done = true;
        }
}

static bool on_data(void *ctx, int fd)
{
        struct fsop *f = ctx;
        char buf[65536];
        for (;;) {
                ssize_t n = read(fd, buf, sizeof(buf));
                if (n > 0) {
                        if (f->overflow || f->len + (size_t)n + 1 > FS_MAX_DATA) {
                                f->overflow = true;
                                continue;
                        }
                        if (f->len + (size_t)n + 1 > f->cap) {
                                size_t cap = f->cap ? f->cap * 2 : 65536;
                                while (cap < f->len + (size_t)n + 1)
                                        cap *= 2;
                                char *nd = realloc(f->data, cap);
                                if (!nd) {
                                        f->overflow = true;
                                        continue;
                                }
                                f->data = nd;
                                f->cap = cap;
                        }
                        memcpy(f->data + f->len, buf, (size_t)n);
                        f->len += (size_t)n;
                        f->data[f->len] = 0;
                        continue;
                }
                if (n < 0 && errno == EINTR)
                        continue;
                return n < 0 && errno == EAGAIN;
        }
}

static void on_exit_cb(void *ctx, const struct supervise_exit *x)
{
        struct fsop *f = ctx;
        supervise_abandon(f->sv, false);
        f->sv = NULL;
        f->timed_out = x->timed_out;
        if (!f->has_done) {
                f->done.err = x->timed_out ? -ETIMEDOUT : -EIO;
                snprintf(f->done.msg, sizeof(f->done.msg), "%s",
                         x->timed_out ? "the file operation timed out" : "the file helper died");
        }
        if (!f->req) {
                fsop_free(f);
                return;
        }
        step(f);
}

static const struct supervise_ops fs_ops = {
        .files_status = take_status, .data = on_data, .exit = on_exit_cb};

static void on_request_gone(void *data)
{
        struct fsop *f = data;
        f->req = NULL;
        if (!f->sv)
                fsop_free(f);
        /* else: the helper finishes (changes run to their end), then the op is freed */
}

/* Answer (body stolen; NULL is {}) and end the op. The request is let go of first. */
static void finish(struct fsop *f, json_t *body)
{
        struct request *r = f->req;
        req_on_free(r, NULL, NULL);
        f->req = NULL;
        fsop_free(f);
        rpc_reply(r, body);
}

static void fail(struct fsop *f, const char *code, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
static void fail(struct fsop *f, const char *code, const char *fmt, ...)
{
        char msg[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        struct request *r = f->req;
        req_on_free(r, NULL, NULL);
        f->req = NULL;
        fsop_free(f);
        rpc_error(r, code, "%s", msg);
}

static void fail_helper(struct fsop *f)
{
        const char *code = rpc_code_of_errno(f->done.err);
        if (f->done.err == -EBUSY)
                code = "invalid_argument";
        fail(f, code, "%s", f->done.msg[0] ? f->done.msg : strerror(-f->done.err));
}

/* Start the next helper; false when it could not (answered). */
static bool run(struct fsop *f, const struct files_request *rq)
{
        struct env *v = engine_find(f->eng, f->env);
        if (!v || !env_running(v) || env_paused(v) || env_deleting(v)) {
                fail(f, "unavailable", "sandbox %s is not running", f->env);
                return false;
        }
        f->has_done = false;
        f->overflow = false;
        f->len = 0;
        memset(&f->done, 0, sizeof(f->done));
        bool long_op = rq->op == FILES_REMOVE || rq->op == FILES_MOVE;
        struct supervise_spec spec = {.timeout_ms = long_op ? FS_LONG_TIMEOUT_MS : FS_TIMEOUT_MS,
                                      .collect_data = rq->op == FILES_LIST ||
                                                      rq->op == FILES_STAT ||
                                                      rq->op == FILES_READ,
                                      .ops = &fs_ops,
                                      .data = f};
        char err[512];
        int rc = supervise_files(f->eng, v, "files", "file", rq, false, &spec, &f->sv, err,
                                 sizeof(err));
        if (rc < 0) {
                fail(f, rpc_code_of_errno(rc), "%s", err);
                return false;
        }
        return true;
}

static bool run_op(struct fsop *f, enum files_op op, const char *path)
{
        struct files_request rq = {.op = op, .path = path, .upload_fd = -EBADF, .mode = -1,
                                   .max_bytes = FS_IDS_MAX_BYTES};
        return run(f, &rq);
}

/* The one record of a STAT, or NULL. */
static bool stat_record(struct fsop *f, struct files_entry *e, const char **name,
                        const char **target)
{
        size_t off = 0;
        return !f->overflow && files_entry_next(f->data, f->len, &off, e, name, target) == 1;
}

static json_t *stat_entry(struct fsop *f, const char *path)
{
        struct files_entry e;
        const char *name, *target;
        if (!stat_record(f, &e, &name, &target))
                return NULL;
        const char *slash = strrchr(path, '/');
        const char *base = slash && slash[1] ? slash + 1 : "/";
        return entry_info(f->env, &e, path, base, strlen(base), target);
}

/* The owner of what MakeDir and Move create: the call's user, root when the environment has
 * no such user (the default "user" of a plain Paddock image). */
static const char *owner_user(struct fsop *f)
{
        struct idcache *c = idcache_get(f->env, false);
        if (!strcmp(f->user, "root") || !c || !user_exists(c->passwd, f->user))
                return NULL;
        return f->user;
}

static void parent_of(const char *path, char *out)
{
        const char *name;
        if (files_path_split(path, out, FILES_PATH_MAX, &name) < 0)
                snprintf(out, FILES_PATH_MAX, "/");
}

/* ListDir: add the directory's records; queue subdirectories for the next level. */
static bool list_take(struct fsop *f, const char *dir, unsigned level)
{
        size_t off = 0;
        struct files_entry e;
        const char *name, *target;
        int r;
        while ((r = files_entry_next(f->data, f->len, &off, &e, &name, &target)) > 0) {
                if (json_array_size(f->entries) >= FS_LIST_MAX_ENTRIES)
                        return true;
                char path[FILES_PATH_MAX];
                if (snprintf(path, sizeof(path), "%s%s%.*s", dir, strcmp(dir, "/") ? "/" : "",
                             (int)e.name_len, name) >= (int)sizeof(path))
                        continue;
                json_array_append_new(f->entries,
                                      entry_info(f->env, &e, path, name, e.name_len, target));
                if (e.type == FILES_T_DIR && level < f->depth) {
                        char **q = realloc(f->queue, (f->qn + 1) * sizeof(*q));
                        if (!q)
                                return false;
                        f->queue = q;
                        unsigned *lv = realloc(f->levels, (f->qn + 1) * sizeof(*lv));
                        if (!lv)
                                return false;
                        f->levels = lv;
                        if (!(f->queue[f->qn] = strdup(path)))
                                return false;
                        f->levels[f->qn++] = level + 1;
                }
        }
        return r == 0;
}

static void reply_entry(struct fsop *f, const char *path)
{
        json_t *e = stat_entry(f, path);
        if (!e) {
                fail(f, "internal", "malformed answer from the file helper");
                return;
        }
        finish(f, json_pack("{s:o}", "entry", e));
}

/* Stages: 0 read passwd (when not cached), 1 read group, 2.. the call's own helpers. */
static void step(struct fsop *f)
{
        int stage = f->stage++;
        if (stage == 0) {
                if (idcache_get(f->env, true)) {
                        f->stage = 3;
                        step(f);
                        return;
                }
                run_op(f, FILES_READ, "/etc/passwd");
                return;
        }
        if (stage == 1) {
                f->passwd = strdup(f->has_done && f->done.err == 0 && f->data ? f->data : "");
                run_op(f, FILES_READ, "/etc/group");
                return;
        }
        if (stage == 2) {
                f->group = strdup(f->has_done && f->done.err == 0 && f->data ? f->data : "");
                if (f->passwd && f->group)
                        idcache_set(f->env, TAKE_PTR(f->passwd), TAKE_PTR(f->group));
                step(f); /* stage 3: the call's own first helper */
                return;
        }
        int s = stage - 3; /* the call's own stage */
        struct files_request rq = {.upload_fd = -EBADF, .mode = -1};
        switch (f->call) {
        case C_STAT:
                if (s == 0) {
                        run_op(f, FILES_STAT, f->path);
                } else if (f->done.err < 0) {
                        fail_helper(f);
                } else {
                        reply_entry(f, f->path);
                }
                return;
        case C_REMOVE:
                if (s == 0) {
                        rq.op = FILES_REMOVE;
                        rq.path = f->path;
                        rq.recursive = true;
                        run(f, &rq);
                } else if (f->done.err < 0 && f->done.err != -ENOENT) {
                        fail_helper(f);
                } else {
                        finish(f, NULL);
                }
                return;
        case C_MKDIR:
                if (s == 0) {
                        run_op(f, FILES_STAT, f->path);
                } else if (s == 1) {
                        struct files_entry e;
                        const char *name, *target;
                        if (f->done.err == 0 && stat_record(f, &e, &name, &target)) {
                                if (e.type == FILES_T_DIR)
                                        fail(f, "already_exists", "directory %s already exists",
                                             f->path);
                                else
                                        fail(f, "invalid_argument",
                                             "%s exists and is not a directory", f->path);
                                return;
                        }
                        if (f->done.err != -ENOENT) {
                                fail_helper(f);
                                return;
                        }
                        rq.op = FILES_MKDIR;
                        rq.path = f->path;
                        rq.parents = true;
                        rq.user = owner_user(f);
                        run(f, &rq);
                } else if (s == 2) {
                        if (f->done.err < 0)
                                fail_helper(f);
                        else
                                run_op(f, FILES_STAT, f->path);
                } else if (f->done.err < 0) {
                        fail_helper(f);
                } else {
                        reply_entry(f, f->path);
                }
                return;
        case C_MOVE:
                if (s == 0) {
                        run_op(f, FILES_STAT, f->path); /* the source must exist */
                } else if (s == 1) {
                        if (f->done.err < 0) {
                                fail_helper(f);
                                return;
                        }
                        char parent[FILES_PATH_MAX];
                        parent_of(f->to, parent);
                        rq.op = FILES_MKDIR;
                        rq.path = parent;
                        rq.parents = true;
                        rq.user = owner_user(f);
                        run(f, &rq);
                } else if (s == 2) {
                        if (f->done.err < 0) {
                                fail_helper(f);
                                return;
                        }
                        rq.op = FILES_MOVE;
                        rq.path = f->path;
                        rq.to = f->to;
                        rq.overwrite = true;
                        run(f, &rq);
                } else if (s == 3) {
                        if (f->done.err < 0)
                                fail_helper(f);
                        else
                                run_op(f, FILES_STAT, f->to);
                } else if (f->done.err < 0) {
                        fail_helper(f);
                } else {
                        reply_entry(f, f->to);
                }
                return;
        case C_LIST:
                if (s == 0) {
                        run_op(f, FILES_LIST, f->path);
                        return;
                }
                if (f->done.err < 0 && (s == 1 || f->done.err != -ENOENT)) {
                        if (s == 1 && f->done.err == -ENOTDIR)
                                fail(f, "invalid_argument", "%s is not a directory", f->path);
                        else if (s == 1)
                                fail_helper(f);
                        else
                                fail_helper(f);
                        return;
                }
                if (f->done.err == 0) {
                        const char *dir = s == 1 ? f->path : f->queue[f->qi - 1];
                        unsigned level = s == 1 ? 1 : f->levels[f->qi - 1];
                        if (!list_take(f, dir, level)) {
                                fail(f, "internal", "malformed answer from the file helper");
                                return;
                        }
                }
                if (f->qi < f->qn && json_array_size(f->entries) < FS_LIST_MAX_ENTRIES) {
                        f->qi++;
                        run_op(f, FILES_LIST, f->queue[f->qi - 1]);
                        return;
                }
                finish(f, json_pack("{s:O}", "entries", f->entries));
                return;
        }
}

/* A path of the call: absolute, or relative to the user's home ("~/x" too), as envd. */
static int call_path(const char *s, const char *home, char *out)
{
        char tmp[FILES_PATH_MAX];
        if (s[0] == '~' && (s[1] == '/' || s[1] == 0))
                s += s[1] ? 2 : 1;
        if (s[0] != '/') {
                if (snprintf(tmp, sizeof(tmp), "%s/%s", home[0] ? home : "/", s) >= (int)sizeof(tmp))
                        return -ENAMETOOLONG;
                s = tmp;
        }
        return files_path_normalize(s, out, FILES_PATH_MAX);
}

static bool json_path(struct request *r, json_t *body, const char *key, const char *home,
                      char *out)
{
        json_t *v = json_object_get(body, key);
        const char *s = json_string_value(v);
        int rc = s && *s && strlen(s) == json_string_length(v) ? call_path(s, home, out)
                                                                : -EINVAL;
        if (rc < 0)
                rpc_error(r, "invalid_argument", "%s: %s", key,
                          rc == -EINVAL ? "a path is required" : "path too long");
        return rc >= 0;
}

static void start_call(struct request *r, struct engine *e, const struct e2b_target *t,
                       enum fs_call call, json_t *body)
{
        if (active >= FS_MAX_ACTIVE) {
                rpc_error(r, "resource_exhausted", "too many file operations (limit %d)",
                          FS_MAX_ACTIVE);
                return;
        }
        struct fsop *f = calloc(1, sizeof(*f));
        if (!f) {
                rpc_error(r, "resource_exhausted", "out of memory");
                return;
        }
        f->req = r;
        f->eng = e;
        f->call = call;
        snprintf(f->env, sizeof(f->env), "%s", env_name(t->env));
        snprintf(f->user, sizeof(f->user), "%s", t->user);
        bool ok;
        if (call == C_MOVE)
                ok = json_path(r, body, "source", t->home, f->path) &&
                     json_path(r, body, "destination", t->home, f->to);
        else
                ok = json_path(r, body, "path", t->home, f->path);
        if (ok && call == C_LIST) {
                json_t *d = json_object_get(body, "depth");
                json_int_t depth = json_is_integer(d) ? json_integer_value(d) : 1;
                f->depth = depth < 1 ? 1 : depth > FS_LIST_MAX_DEPTH ? FS_LIST_MAX_DEPTH
                                                                     : (unsigned)depth;
                f->entries = json_array();
        }
        if (!ok) {
                json_decref(f->entries);
                free(f);
                return;
        }
        active++;
        req_on_free(r, on_request_gone, f);
        http_defer(r);
        step(f);
}

/* ------------------------------------------------------------------------------ WatchDir */

struct watch {
        struct engine *eng;
        struct supervise *sv;
        struct cstream *cs;  /* NULL until the watch is set up */
        struct request *req; /* until the stream opened */
        char env[NAME_BUF_SIZE];
        char path[FILES_PATH_MAX];
        struct files_status done;
        bool has_done;
        char line[8192];
        size_t line_len;
        bool skipping; /* a line longer than the buffer */
        struct loop_timer *keepalive, *deadline;
        uint64_t keepalive_ms, timeout_ms;
};
static unsigned watches;

static void watch_free(struct watch *w)
{
        supervise_abandon(w->sv, true);
        loop_cancel_timer(w->keepalive);
        loop_cancel_timer(w->deadline);
        if (w->req)
                req_on_free(w->req, NULL, NULL);
        free(w);
        watches--;
}

/* One NDJSON line of the helper into a FilesystemEvent. */
static void watch_line(struct watch *w, const char *line, size_t len)
{
        if (len == 0)
                return; /* the helper's own keepalive */
        json_error_t jerr;
        json_t *j = json_loadb(line, len, 0, &jerr);
        const char *ev = json_string_value(json_object_get(j, "event"));
        const char *path = json_string_value(json_object_get(j, "path"));
        const char *type = NULL;
        if (ev && !strcmp(ev, "create"))
                type = "EVENT_TYPE_CREATE";
        else if (ev && !strcmp(ev, "modify"))
                type = "EVENT_TYPE_WRITE";
        else if (ev && !strcmp(ev, "delete"))
                type = "EVENT_TYPE_REMOVE";
        else if (ev && !strcmp(ev, "move_from"))
                type = "EVENT_TYPE_RENAME";
        else if (ev && !strcmp(ev, "move_to"))
                type = "EVENT_TYPE_CREATE"; /* as fsnotify: the new name appears */
        else if (ev && !strcmp(ev, "attrib"))
                type = "EVENT_TYPE_CHMOD";
        if (type && path && !json_object_get(j, "encoding")) {
                size_t pl = strlen(w->path);
                const char *rel = path;
                if (!strcmp(w->path, "/"))
                        rel = path + 1;
                else if (!strncmp(path, w->path, pl) && path[pl] == '/')
                        rel = path + pl + 1;
                else if (!strcmp(path, w->path))
                        rel = "";
                cstream_send(w->cs, json_pack("{s:{s:s,s:s}}", "filesystem", "name", rel, "type",
                                              type));
        }
        json_decref(j);
}

static void on_watch_wake(void *data)
{
        struct watch *w = data;
        if (!w->cs)
                return;
        char buf[16384];
        ssize_t n;
        while ((n = supervise_read(w->sv, buf, sizeof(buf))) > 0) {
                for (ssize_t i = 0; i < n; i++) {
                        if (buf[i] == '\n') {
                                if (!w->skipping)
                                        watch_line(w, w->line, w->line_len);
                                w->line_len = 0;
                                w->skipping = false;
                        } else if (w->line_len < sizeof(w->line)) {
                                w->line[w->line_len++] = buf[i];
                        } else {
                                w->skipping = true;
                        }
                }
                if (cstream_queued(w->cs) > CSTREAM_HIGH_WATER)
                        return; /* the helper's pipe holds the rest (it drops and says so) */
        }
        if (n == -EPIPE) {
                /* The directory went away or the environment stopped: the stream ends. */
                struct cstream *cs = w->cs;
                w->cs = NULL;
                cstream_finish(cs);
                watch_free(w);
        }
}

static void watch_gone(void *data)
{
        struct watch *w = data;
        w->cs = NULL;
        watch_free(w);
}

static void watch_drained(void *data)
{
        on_watch_wake(data);
}

static const struct cstream_ops watch_cs_ops = {.gone = watch_gone, .drained = watch_drained};

static void on_watch_keepalive(struct loop_timer *t, void *data)
{
        struct watch *w = data;
        w->keepalive = loop_add_timer(engine_loop(w->eng), w->keepalive_ms, on_watch_keepalive, w);
        cstream_send(w->cs, json_pack("{s:{}}", "keepalive"));
}

static void on_watch_deadline(struct loop_timer *t, void *data)
{
        struct watch *w = data;
        w->deadline = NULL;
        struct cstream *cs = w->cs;
        w->cs = NULL;
        if (cs)
                cstream_end(cs, "deadline_exceeded", "the watch's deadline passed");
        watch_free(w);
}

static void watch_status(void *ctx, const struct files_status *st)
{
        struct watch *w = ctx;
        if (st->phase == FILES_READY && !w->cs && !w->has_done) {
                supervise_cancel_deadline(w->sv);
                struct request *r = w->req;
                req_on_free(r, NULL, NULL);
                w->req = NULL;
                w->cs = cstream_open(r, &watch_cs_ops, w);
                if (!w->cs) {
                        supervise_kill(w->sv);
                        return;
                }
                cstream_send(w->cs, json_pack("{s:{}}", "start"));
                struct loop *l = engine_loop(w->eng);
                if (w->keepalive_ms)
                        w->keepalive = loop_add_timer(l, w->keepalive_ms, on_watch_keepalive, w);
                if (w->timeout_ms)
                        w->deadline = loop_add_timer(l, w->timeout_ms, on_watch_deadline, w);
                on_watch_wake(w); /* pull until empty: the supervisor wakes us from then on */
        } else if (st->phase == FILES_DONE && !w->has_done) {
                w->done = *st;
                w->done.msg[sizeof(w->done.msg) - 1] = 0;
                w->has_done = true;
        }
}

static void watch_exit(void *ctx, const struct supervise_exit *x)
{
        struct watch *w = ctx;
        if (w->cs) {
                on_watch_wake(w); /* the rest, then the end */
                return;
        }
        if (!w->req) { /* opening the stream failed */
                watch_free(w);
                return;
        }
        struct request *r = w->req;
        req_on_free(r, NULL, NULL);
        w->req = NULL;
        int err = w->has_done && w->done.err < 0 ? w->done.err : 0;
        if (err == -ENOTDIR)
                rpc_stream_error(r, "invalid_argument", "%s is not a directory", w->path);
        else if (err)
                rpc_stream_error(r, rpc_code_of_errno(err), "%s",
                                 w->done.msg[0] ? w->done.msg : strerror(-err));
        else if (x->timed_out)
                rpc_stream_error(r, "unavailable", "%s: setting up the watch timed out", w->path);
        else
                rpc_stream_error(r, "unavailable", "the watch of %s ended", w->path);
        watch_free(w);
}

static const struct supervise_ops watch_ops = {
        .files_status = watch_status, .wake = on_watch_wake, .exit = watch_exit};

static void watch_request_gone(void *data)
{
        struct watch *w = data;
        w->req = NULL;
        watch_free(w);
}

static void start_watch(struct request *r, struct engine *e, const struct e2b_target *t)
{
        json_t *body = rpc_request_json(r, true);
        if (!body)
                return;
        char path[FILES_PATH_MAX];
        const char *s = json_string_value(json_object_get(body, "path"));
        bool recursive = json_is_true(json_object_get(body, "recursive"));
        int nrc = s && *s ? call_path(s, t->home, path) : -EINVAL;
        json_decref(body);
        if (nrc < 0) {
                rpc_stream_error(r, "invalid_argument", "path: required");
                return;
        }
        if (watches >= FS_WATCH_MAX_ACTIVE) {
                rpc_stream_error(r, "resource_exhausted", "too many watches (limit %d)",
                                 FS_WATCH_MAX_ACTIVE);
                return;
        }
        struct watch *w = calloc(1, sizeof(*w));
        if (!w) {
                rpc_stream_error(r, "resource_exhausted", "out of memory");
                return;
        }
        watches++;
        w->eng = e;
        w->req = r;
        snprintf(w->env, sizeof(w->env), "%s", env_name(t->env));
        snprintf(w->path, sizeof(w->path), "%s", path);
        w->keepalive_ms = rpc_keepalive_ms(r);
        w->timeout_ms = rpc_timeout_ms(r);
        struct files_request rq = {.op = FILES_WATCH, .path = w->path, .upload_fd = -EBADF,
                                   .mode = -1, .recursive = recursive};
        struct supervise_spec spec = {.timeout_ms = FS_TIMEOUT_MS, .ops = &watch_ops, .data = w};
        char err[512];
        int rc = supervise_files(e, t->env, "watch", "watch", &rq, true, &spec, &w->sv, err,
                                 sizeof(err));
        if (rc < 0) {
                rpc_stream_error(r, rpc_code_of_errno(rc), "%s", err);
                w->req = NULL;
                watch_free(w);
                return;
        }
        req_on_free(r, watch_request_gone, w);
        http_defer(r);
}

/* ------------------------------------------------------------------------------ dispatch */

void e2b_rpc_fs(struct request *r, struct engine *e, const struct e2b_target *t,
                const char *method)
{
        if (!strcmp(method, "WatchDir")) {
                start_watch(r, e, t);
                return;
        }
        static const struct {
                const char *name;
                enum fs_call call;
        } calls[] = {{"Stat", C_STAT},   {"ListDir", C_LIST}, {"MakeDir", C_MKDIR},
                     {"Move", C_MOVE},   {"Remove", C_REMOVE}};
        for (size_t i = 0; i < ELEMENTSOF(calls); i++) {
                if (strcmp(method, calls[i].name) != 0)
                        continue;
                json_t *body = rpc_request_json(r, false);
                if (body)
                        start_call(r, e, t, calls[i].call, body);
                json_decref(body);
                return;
        }
        rpc_error(r, "unimplemented", "filesystem.Filesystem/%s is not implemented", method);
}

/* /v1/images and /v1/system.
 *
 * POST /v1/images makes an image: a tar body (?name=) is imported; a JSON body
 * {"pull": REF, "name"?, "insecure"?} pulls from a registry; {"build": {"from", "packages",
 * "variant", "mirror"}, "name"} builds with mmdebstrap. All of them run as an image job
 * (image_job.h) and answer when it is done, or, with ?stream=1, at once with an NDJSON stream
 * of {"progress": TEXT} lines ending in {"image": {...}} or {"error": {...}}. A client that
 * goes away cancels its job.
 *
 * GET /v1/images/{name}/export?compression=none|gzip|zstd streams the image as a tar. */
#include "daemon/api.h"
#include "daemon/gateway.h"
#include "daemon/image_job.h"
#include "daemon/log.h"
#include "daemon/supervise.h"
#include "lib/image.h"
#include "lib/imageref.h"
#include "lib/util.h"
#include "lib/parse.h"

#include <errno.h>
#include <string.h>

#define PROGRESS_MAX_BUFFERED (1u << 20) /* a client that does not read loses progress lines */
#define MAX_EXPORTS           16         /* helpers packing images at once */

static unsigned active_exports; /* export helpers alive (supervise.h counts) */

/* ---------------------------------------------------------------- making an image */

struct image_req {
        struct engine *eng;
        struct request *req;   /* NULL once answered or gone */
        struct image_job *job; /* NULL once done */
        bool stream, finished;
        char *buf; /* NDJSON not yet read by the client */
        size_t len, off;
        int refs; /* the job and the request */
};

static void image_req_unref(struct image_req *c)
{
        if (--c->refs > 0)
                return;
        free(c->buf);
        free(c);
}

static void append_line(struct image_req *c, json_t *line, bool always)
{
        char *s = json_dumps(line, JSON_COMPACT);
        json_decref(line);
        if (!s)
                return;
        size_t n = strlen(s);
        if (!always && c->len - c->off + n > PROGRESS_MAX_BUFFERED) {
                free(s);
                return;
        }
        if (c->off > 0 && c->off == c->len)
                c->off = c->len = 0;
        char *nb = realloc(c->buf, c->len + n + 1);
        if (nb) {
                c->buf = nb;
                memcpy(c->buf + c->len, s, n);
                c->buf[c->len + n] = '\n';
                c->len += n + 1;
        }
        free(s);
        if (c->req)
                http_stream_wake(c->req);
}

static void on_progress(const char *line, void *data)
{
        struct image_req *c = data;
        if (c->stream && c->req)
                append_line(c, json_pack("{s:s}", "progress", line), false);
}

static void on_done(int r, const char *msg, json_t *image, void *data)
{
        struct image_req *c = data;
        c->job = NULL;
        c->finished = true;
        if (c->stream) {
                json_t *line;
                if (r < 0) {
                        unsigned status;
                        const char *code;
                        http_status_of_errno(r, &status, &code);
                        line = json_pack("{s:{s:s,s:s}}", "error", "code", code, "message",
                                         msg ? msg : strerror(-r));
                } else {
                        line = json_pack("{s:O}", "image", image);
                }
                if (c->req)
                        append_line(c, line, true);
                else
                        json_decref(line);
        } else if (c->req) {
                struct request *req = c->req;
                req_on_free(req, NULL, NULL);
                c->req = NULL;
                image_req_unref(c); /* the request's reference */
                if (r < 0)
                        http_reply_errno(req, r, "%s", msg ? msg : strerror(-r));
                else
                        http_reply_json(req, 201, json_incref(image));
        }
        image_req_unref(c); /* the job's reference */
}

static ssize_t progress_read(void *data, char *buf, size_t max)
{
        struct image_req *c = data;
        size_t n = take_pending(buf, max, c->buf, c->len, &c->off);
        if (n == 0)
                return c->finished ? -1 : 0;
        return (ssize_t)n;
}

static void request_gone(void *data)
{
        struct image_req *c = data;
        c->req = NULL;
        if (c->job)
                engine_image_cancel(c->job);
        image_req_unref(c);
}

static const struct http_stream_ops progress_ops = {.read = progress_read, .closed = request_gone};

/* Start the job through start(); answer now (stream) or when it is done. */
typedef int (*start_fn)(struct engine *e, const void *arg, const struct image_callbacks *cb,
                        struct image_job **ret_job, char *err, size_t errlen);

static void run_job(struct request *r, struct engine *e, start_fn start, const void *arg,
                    bool stream)
{
        struct image_req *c = calloc(1, sizeof(*c));
        if (!c) {
                http_reply_errno(r, -ENOMEM, "out of memory");
                return;
        }
        *c = (struct image_req){.eng = e, .req = r, .stream = stream, .refs = 2};
        struct image_callbacks cb = {.progress = on_progress, .done = on_done, .data = c};
        char err[512] = "";
        int rc = start(e, arg, &cb, &c->job, err, sizeof(err));
        if (rc < 0) {
                free(c);
                http_reply_errno(r, rc, "%s", err[0] ? err : strerror(-rc));
                return;
        }
        if (stream) {
                http_reply_stream(r, 200, "application/x-ndjson", &progress_ops, c);
        } else {
                req_on_free(r, request_gone, c);
                http_defer(r);
        }
}

static int start_import(struct engine *e, const void *arg, const struct image_callbacks *cb,
                        struct image_job **ret_job, char *err, size_t errlen)
{
        struct request *r = (struct request *)arg;
        return engine_image_import(e, req_query(r, "name"), req_spool_fd(r), cb, ret_job, err,
                                   errlen);
}

static int start_pull(struct engine *e, const void *arg, const struct image_callbacks *cb,
                      struct image_job **ret_job, char *err, size_t errlen)
{
        return engine_image_pull(e, arg, cb, ret_job, err, errlen);
}

static int start_build(struct engine *e, const void *arg, const struct image_callbacks *cb,
                       struct image_job **ret_job, char *err, size_t errlen)
{
        return engine_image_build(e, arg, cb, ret_job, err, errlen);
}

static bool query_flag(struct request *r, const char *key)
{
        const char *v = req_query(r, key);
        return v && (!strcmp(v, "1") || !strcmp(v, "true"));
}

static void images_pull(struct request *r, struct engine *e, json_t *body, bool stream)
{
        struct image_pull_spec spec = {};
        json_t *ref = json_object_get(body, "pull"), *name = json_object_get(body, "name");
        json_t *insecure = json_object_get(body, "insecure");
        struct image_ref parsed;
        char why[256] = "";
        if (!json_is_string(ref) ||
            image_ref_parse(json_string_value(ref), &parsed, why, sizeof(why)) < 0) {
                http_reply_error(r, 400, "invalid_argument", "pull: invalid image reference%s%s",
                                 why[0] ? ": " : "", why);
                return;
        }
        snprintf(spec.ref, sizeof(spec.ref), "%s", json_string_value(ref));
        if (name && !json_is_null(name)) {
                if (!json_is_string(name) || !name_is_valid(json_string_value(name))) {
                        http_reply_error(r, 400, "invalid_argument",
                                         "name: letters, digits, '-', '_', '.'");
                        return;
                }
                snprintf(spec.name, sizeof(spec.name), "%s", json_string_value(name));
        } else if (image_ref_default_name(&parsed, spec.name, sizeof(spec.name)) < 0) {
                http_reply_error(r, 400, "invalid_argument",
                                 "pull: no image name follows from %s; give one with name",
                                 spec.ref);
                return;
        }
        if (insecure && !json_is_boolean(insecure)) {
                http_reply_error(r, 400, "invalid_argument", "insecure: must be true or false");
                return;
        }
        spec.insecure = json_is_true(insecure); /* engine_image_pull checks the registry */
        run_job(r, e, start_pull, &spec, stream);
}

/* Debian package names: [a-z0-9][a-z0-9+.-]+ */
static bool package_valid(const char *p, size_t n)
{
        if (n < 2 || n > 63 || !((p[0] >= 'a' && p[0] <= 'z') || (p[0] >= '0' && p[0] <= '9')))
                return false;
        for (size_t i = 0; i < n; i++)
                if (!((p[i] >= 'a' && p[i] <= 'z') || (p[i] >= '0' && p[i] <= '9') || p[i] == '+' ||
                      p[i] == '.' || p[i] == '-'))
                        return false;
        return true;
}

static bool add_package(struct image_build_spec *s, const char *p, size_t n, size_t *count)
{
        size_t len = strlen(s->packages);
        if (!package_valid(p, n) || ++*count > IMAGE_BUILD_MAX_PACKAGES ||
            len + n + 2 > sizeof(s->packages))
                return false;
        if (len)
                s->packages[len++] = ',';
        memcpy(s->packages + len, p, n);
        s->packages[len + n] = 0;
        return true;
}

/* packages: ["a","b"] or "a,b" */
static bool build_packages(json_t *j, struct image_build_spec *s)
{
        size_t count = 0;
        if (!j || json_is_null(j))
                return true;
        if (json_is_string(j)) {
                const char *p = json_string_value(j);
                if (!*p)
                        return true;
                for (;;) {
                        const char *comma = strchr(p, ',');
                        size_t n = comma ? (size_t)(comma - p) : strlen(p);
                        if (!add_package(s, p, n, &count))
                                return false;
                        if (!comma)
                                return true;
                        p = comma + 1;
                }
        }
        if (!json_is_array(j))
                return false;
        size_t i;
        json_t *v;
        json_array_foreach(j, i, v)
        {
                if (!json_is_string(v) ||
                    !add_package(s, json_string_value(v), strlen(json_string_value(v)), &count))
                        return false;
        }
        return true;
}

static bool mirror_valid(const char *m)
{
        size_t n = strlen(m);
        if (n == 0 || n > 400)
                return false;
        if (!strncmp(m, "local:", 6))
                return name_is_valid(m + 6);
        if (strncmp(m, "http://", 7) && strncmp(m, "https://", 8))
                return false;
        for (const char *c = m; *c; c++)
                if (*c <= ' ' || *c > '~' || *c == '[' || *c == ']' || *c == '"' || *c == '\\')
                        return false;
        return true;
}

static const char *const variants[] = {"minbase",  "essential", "apt",    "required", "important",
                                       "standard", "extract",   "custom", NULL};

#define BAD(...)                                                                                   \
        do {                                                                                       \
                http_reply_error(r, 400, "invalid_argument", __VA_ARGS__);                         \
                return;                                                                            \
        } while (0)

static void images_build(struct request *r, struct engine *e, json_t *body, bool stream)
{
        static struct image_build_spec spec; /* ~13 KiB: not on the stack; copied at start */
        memset(&spec, 0, sizeof(spec));
        json_t *b = json_object_get(body, "build"), *name = json_object_get(body, "name");
        if (!json_is_object(b))
                BAD("build: an object {from, packages, variant, mirror}");
        const char *key;
        json_t *v;
        json_object_foreach(b, key, v)
        {
                if (strcmp(key, "from") && strcmp(key, "packages") && strcmp(key, "variant") &&
                    strcmp(key, "mirror"))
                        BAD("build: unknown field %s", key);
        }
        if (!json_is_string(name) || !name_is_valid(json_string_value(name)))
                BAD("name: required; letters, digits, '-', '_', '.'");
        snprintf(spec.name, sizeof(spec.name), "%s", json_string_value(name));
        const char *from = json_string_value(json_object_get(b, "from"));
        if (!from)
                from = "debian:bookworm";
        size_t slen = strncmp(from, "debian:", 7) ? 0 : strlen(from + 7);
        if (slen == 0 || slen >= sizeof(spec.suite) || from[7] < 'a' || from[7] > 'z' ||
            strspn(from + 7, "abcdefghijklmnopqrstuvwxyz-") != slen)
                BAD("from: debian:SUITE (debian:bookworm, debian:trixie, ...), not %.64s", from);
        snprintf(spec.suite, sizeof(spec.suite), "%s", from + 7);
        if (!build_packages(json_object_get(b, "packages"), &spec))
                BAD("packages: Debian package names (a list or a,b,c; at most %d)",
                    IMAGE_BUILD_MAX_PACKAGES);
        json_t *variant = json_object_get(b, "variant");
        if (variant && !json_is_null(variant)) {
                bool ok = false;
                for (size_t i = 0; json_is_string(variant) && variants[i]; i++)
                        ok |= !strcmp(json_string_value(variant), variants[i]);
                if (!ok)
                        BAD("variant: minbase, essential, apt, required, important, standard, "
                            "extract or custom");
                snprintf(spec.variant, sizeof(spec.variant), "%s", json_string_value(variant));
        }
        json_t *mirror = json_object_get(b, "mirror");
        if (mirror && !json_is_null(mirror)) {
                if (!json_is_string(mirror) || !mirror_valid(json_string_value(mirror)))
                        BAD("mirror: an http(s) URL of a Debian mirror, or local:NAME for a "
                            "repository in the daemon's mirrors directory");
                snprintf(spec.mirror, sizeof(spec.mirror), "%s", json_string_value(mirror));
        }
        run_job(r, e, start_build, &spec, stream);
}

void api_images_import(struct request *r, struct engine *e)
{
        bool stream = query_flag(r, "stream");
        if (req_spool_fd(r) < 0) { /* a JSON body: pull */
                json_t *body = req_json_object(r);
                if (!body)
                        return;
                static const char *const known[] = {"pull", "build", "name", "insecure", NULL};
                const char *key;
                json_t *v;
                json_object_foreach(body, key, v)
                {
                        bool ok = false;
                        for (size_t i = 0; known[i]; i++)
                                ok |= !strcmp(key, known[i]);
                        if (!ok) {
                                http_reply_error(r, 400, "invalid_argument", "unknown field: %s",
                                                 key);
                                json_decref(body);
                                return;
                        }
                }
                if (json_object_get(body, "pull") && json_object_get(body, "build"))
                        http_reply_error(r, 400, "invalid_argument", "pull or build, not both");
                else if (json_object_get(body, "pull"))
                        images_pull(r, e, body, stream);
                else if (json_object_get(body, "build"))
                        images_build(r, e, body, stream);
                else
                        http_reply_error(r, 400, "invalid_argument",
                                         "a JSON body needs pull or build (or send a tar to "
                                         "import)");
                json_decref(body);
                return;
        }
        const char *name = req_query(r, "name");
        if (!name || !name_is_valid(name)) {
                http_reply_error(r, 400, "invalid_argument",
                                 "name: required query parameter; letters, digits, '-', '_', '.'");
                return;
        }
        run_job(r, e, start_import, r, stream);
}

/* ---------------------------------------------------------------- export */

struct export_stream {
        struct request *req;
        struct supervise *sv;
};

static void on_export_wake(void *data)
{
        struct export_stream *x = data;
        http_stream_wake(x->req);
}

static const struct supervise_ops export_helper_ops = {.wake = on_export_wake};

static ssize_t export_read(void *data, char *buf, size_t max)
{
        struct export_stream *x = data;
        ssize_t n = supervise_read(x->sv, buf, max);
        if (n >= 0)
                return n;
        /* The end: the tar is whole only if the helper exited 0. */
        const struct supervise_exit *ex = supervise_exit_info(x->sv);
        return n == -EPIPE && ex && supervise_exit_ok(ex) ? -1 : -2;
}

static void export_closed(void *data)
{
        struct export_stream *x = data;
        supervise_abandon(x->sv, true); /* done already, or nobody reads */
        free(x);
}

static const struct http_stream_ops export_ops = {.read = export_read, .closed = export_closed};

static void image_export(struct request *r, struct engine *e, const char *name)
{
        const char *comp = req_query(r, "compression");
        enum image_compression c = IMAGE_TAR;
        if (comp && image_compression_from_string(comp, &c) < 0) {
                http_reply_error(r, 400, "invalid_argument", "compression: none, gzip or zstd");
                return;
        }
        if (active_exports >= MAX_EXPORTS) {
                http_reply_error(r, 503, "unavailable", "too many exports at once (%d)",
                                 MAX_EXPORTS);
                return;
        }
        struct export_stream *x = calloc(1, sizeof(*x));
        if (!x) {
                http_reply_errno(r, -ENOMEM, "out of memory");
                return;
        }
        x->req = r;
        char err[512] = "";
        int rc = name_is_valid(name) ? image_export_start(e, name, c, &export_helper_ops, x,
                                                          &active_exports, &x->sv, err,
                                                          sizeof(err))
                                     : -ENOENT;
        if (rc < 0) {
                free(x);
                http_reply_errno(r, rc, "%s", err[0] ? err : "image not found");
                return;
        }
        static const char *const types[] = {"application/x-tar", "application/gzip",
                                            "application/zstd"};
        http_reply_stream(r, 200, types[c], &export_ops, x);
}

/* ---------------------------------------------------------------- the rest */

void api_images_list(struct request *r, struct engine *e)
{
        http_reply_json(r, 200, json_pack("{s:o}", "images", engine_image_list(e)));
}

void api_image_get(struct request *r, struct engine *e, const char *name, const char *sub)
{
        if (sub && !strcmp(sub, "export"))
                image_export(r, e, name);
        else
                http_reply_error(r, 404, "not_found", "no such route: %s", req_path(r));
}

void api_image_delete(struct request *r, struct engine *e, const char *name)
{
        char err[512] = "";
        int rc = engine_image_delete(e, name, err, sizeof(err));
        if (rc < 0)
                http_reply_errno(r, rc, "%s", err);
        else
                http_reply_json(r, 200, json_pack("{s:s}", "deleted", name));
}

void api_system(struct request *r, struct engine *e)
{
        json_t *j = engine_system_json(e);
        struct caller c;
        api_caller(r, &c);
        if (!c.admin) {
                /* An agent counts only its own environments (others' are not its business):
                 * the counts the engine keeps per owner. */
                size_t n = 0, running = 0;
                engine_counts(e, c.token, &n, &running);
                json_object_set_new(j, "envs", json_integer((json_int_t)n));
                json_object_set_new(j, "running", json_integer((json_int_t)running));
        }
        json_object_set_new(j, "gateway", gateway_system_json());
        http_reply_json(r, 200, j);
}

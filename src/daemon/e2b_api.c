/* The E2B control plane (docs/e2b.md): /v2/sandboxes and /sandboxes/{id}/... over Paddock
 * environments. The API key is a Paddock token (X-API-Key, resolved like a Bearer token), so
 * an agent token sees only its own sandboxes and its quotas apply. What E2B keeps beside the
 * environment (template, metadata, access-token hashes, default user) is a row of
 * e2b_sandboxes, which goes with the environment's record whatever destroys it. */
#include "daemon/api.h"
#include "daemon/e2b.h"
#include "daemon/gateway.h"
#include "daemon/ingress.h"
#include "daemon/log.h"
#include "lib/netpolicy.h"
#include "lib/parse.h"
#include "lib/secret.h"
#include "lib/state.h"
#include "lib/util.h"

#include <ctype.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define E2B_ENVD_VERSION    "0.5.7"
#define E2B_DEFAULT_TIMEOUT 300         /* seconds, as E2B */
#define E2B_MAX_TIMEOUT     (7 * 86400) /* a week */
#define E2B_LIST_DEFAULT    100
#define E2B_LIST_MAX        1000
#define E2B_MAX_TOKENS      4               /* live access tokens per sandbox (connect adds one) */
#define E2B_METADATA_MAX    16384           /* bytes of JSON per sandbox */
#define E2B_PAUSED_KEEP     E2B_MAX_TIMEOUT /* a paused sandbox's deadline */
#define E2B_USER            "user"
#define E2B_HOME            "/home/user"

static int64_t wall_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static json_t *ms_json(int64_t ms)
{
        char buf[RFC3339_SIZE + 8];
        format_rfc3339(ms / 1000, buf);
        /* "...Z" -> "....mmmZ": E2B's timestamps carry milliseconds */
        size_t n = strlen(buf);
        if (n > 0 && buf[n - 1] == 'Z')
                snprintf(buf + n - 1, sizeof(buf) - n + 1, ".%03dZ", (int)(ms % 1000));
        return json_string(buf);
}

/* A new access token: 32 random bytes, base64url without padding (43 characters): a token
 * secret (lib/secret.h) without its prefix. */
static int new_access_token(char out[44], char hash[SECRET_HASH_HEX + 1])
{
        char secret[SECRET_LEN + 1];
        int r = secret_new(secret);
        if (r < 0)
                return r;
        memcpy(out, secret + strlen(SECRET_PREFIX), 44); /* 43 characters and the NUL */
        explicit_bzero(secret, sizeof(secret));
        secret_hash_hex(out, strlen(out), hash);
        return 0;
}

/* E2B-style sandbox ids: "i" and 19 lowercase letters and digits (a valid environment name). */
static int new_sandbox_id(char out[NAME_BUF_SIZE])
{
        static const char alphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";
        unsigned char raw[19];
        if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw))
                return -EIO;
        out[0] = 'i';
        for (size_t i = 0; i < sizeof(raw); i++)
                out[i + 1] = alphabet[raw[i] % 36];
        out[20] = 0;
        return 0;
}

/* ------------------------------------------------------------------- lookups and JSON */

struct sbx {
        struct env *v;
        struct e2b_row b;
};

static void sbx_clear(struct sbx *s)
{
        free(s->b.metadata);
        s->b.metadata = NULL;
}

/* The caller's sandbox id, or a 404 {"code":404} (missing, another token's, not E2B's). */
static bool find_sandbox(struct request *r, struct engine *e, const char *id, struct sbx *ret)
{
        struct caller c;
        api_caller(r, &c);
        struct env *v = name_is_valid(id) ? engine_find(e, id) : NULL;
        if (v && env_deleting(v))
                v = NULL; /* killed: its end is under way */
        if (v && caller_sees_env(&c, v) && e2b_sandbox_record(e, id, &ret->b) >= 0) {
                ret->v = v;
                return true;
        }
        e2b_reply_error(r, 404, "sandbox %s not found", id);
        return false;
}

/* One the idle timer paused or stopped is running for E2B: its envd requests are answered (they
 * wake it) and its deadline runs. */
static const char *sbx_state(const struct env *v)
{
        return (env_running(v) && !env_paused(v)) || env_idled(v) ? "running" : "paused";
}

static int64_t expires_ms(struct engine *e, struct env *v)
{
        json_t *j = engine_env_json_listed(e, v);
        const char *s = json_string_value(json_object_get(j, "expires_at"));
        int64_t t = 0;
        struct tm tm = {0};
        if (s && strptime(s, "%Y-%m-%dT%H:%M:%S", &tm))
                t = (int64_t)timegm(&tm) * 1000;
        json_decref(j);
        return t;
}

/* ListedSandbox / SandboxDetail (and, with token, the Sandbox of create and connect). */
static json_t *sandbox_json(struct engine *e, const struct sbx *s, const char *token)
{
        const struct cgroup_limits *l = env_limits(s->v);
        int64_t end = expires_ms(e, s->v);
        json_t *meta = json_loads(s->b.metadata, 0, NULL);
        const char *domain = gateway_domain();
        json_t *j = json_pack(
            "{s:s,s:s,s:s,s:s,s:o,s:o,s:s,s:I,s:I,s:s,s:o,s:o}", "sandboxID", s->b.id, "templateID",
            s->b.template_id, "alias", s->b.template_id, "clientID", "paddock", "startedAt",
            ms_json(s->b.started_at), "endAt", ms_json(end ? end : wall_ms()), "state",
            sbx_state(s->v), "cpuCount",
            (json_int_t)(l->cpu_millis == CG_UNLIMITED ? 1 : (l->cpu_millis + 999) / 1000),
            "memoryMB", (json_int_t)(l->memory_bytes == CG_UNLIMITED ? 0 : l->memory_bytes >> 20),
            "envdVersion", E2B_ENVD_VERSION, "metadata",
            json_is_object(meta) ? meta : json_object(), "domain",
            domain ? json_string(domain) : json_null());
        if (!json_is_object(meta))
                json_decref(meta);
        if (j) {
                enum net_mode mode = env_netpolicy(s->v)->mode;
                json_object_set_new(j, "allowInternetAccess", json_boolean(mode == NET_OPEN));
        }
        if (j && token) {
                json_object_set_new(j, "envdAccessToken", json_string(token));
                json_object_set_new(j, "trafficAccessToken", json_null());
        }
        return j;
}

/* ------------------------------------------------------------------- the E2B user */

/* A small file of the image (etc/passwd, etc/group), resolved inside the image's tree: 0 and
 * the text, -ENOENT when it has none, another -errno when it cannot be read whole (a symlink
 * out of the tree, not a regular file, over 1 MiB). */
static int read_image_file(struct engine *e, const char *image, const char *rel, char **ret)
{
        char dir[4096];
        if (BUF_PRINTF(dir, "%s/images/%s/rootfs", engine_root(e), image) < 0)
                return -ENAMETOOLONG;
        _cleanup_close_ int root = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (root < 0)
                return -errno;
        struct open_how how = {.flags = O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK,
                               .resolve =
                                   RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_SYMLINKS};
        _cleanup_close_ int fd = (int)syscall(SYS_openat2, root, rel, &how, sizeof(how));
        if (fd < 0)
                return -errno;
        struct stat st;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode))
                return -EINVAL;
        if (st.st_size >= (1 << 20))
                return -EFBIG;
        char *buf = malloc((size_t)st.st_size + 1);
        if (!buf)
                return -ENOMEM;
        ssize_t n = read_full(fd, buf, (size_t)st.st_size);
        if (n != st.st_size) {
                free(buf);
                return n < 0 ? (int)n : -EIO;
        }
        buf[n] = 0;
        *ret = buf;
        return 0;
}

/* Field f (0-based) of the line of name in a passwd/group text, or NULL. */
static bool db_field(const char *text, const char *name, int f, char *out, size_t outlen)
{
        size_t nl = strlen(name);
        for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
                if (strncmp(p, name, nl) || p[nl] != ':')
                        continue;
                const char *q = p;
                for (int i = 0; i < f && q; i++) {
                        q = strchr(q, ':');
                        q = q ? q + 1 : NULL;
                }
                if (!q)
                        return false;
                size_t len = strcspn(q, ":\n");
                snprintf(out, outlen, "%.*s", (int)len, q);
                return true;
        }
        return false;
}

/* Is id (field 2) used by any line? */
static bool db_id_used(const char *text, unsigned id)
{
        for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
                const char *q = strchr(p, ':');
                q = q ? strchr(q + 1, ':') : NULL;
                if (q && strtoul(q + 1, NULL, 10) == id && isdigit((unsigned char)q[1]))
                        return true;
        }
        return false;
}

/* The E2B user of an image: exists (home from passwd), or the passwd and group texts that
 * add it (uid/gid 1000 or the next free). */
struct e2b_user_plan {
        char user[33], home[256];
        char *passwd, *group; /* non-NULL: to be written */
        unsigned uid;
};

static void plan_user(struct engine *e, const char *image, bool writable, struct e2b_user_plan *p)
{
        _cleanup_free_ char *pw = NULL, *gr = NULL;
        int rp = read_image_file(e, image, "etc/passwd", &pw);
        int rg = read_image_file(e, image, "etc/group", &gr);
        snprintf(p->user, sizeof(p->user), E2B_USER);
        snprintf(p->home, sizeof(p->home), E2B_HOME);
        if (rp >= 0 && db_field(pw, E2B_USER, 5, p->home, sizeof(p->home)) && p->home[0] == '/')
                return;
        /* Only an image without the files gets new ones; one whose files cannot be read
         * whole is not rewritten (root would be lost): its default user is root. */
        if (rp == -ENOENT && (pw = strdup("root:x:0:0:root:/root:/bin/sh\n")))
                rp = 0;
        if (rg == -ENOENT && (gr = strdup("root:x:0:\n")))
                rg = 0;
        if (!writable || rp < 0 || rg < 0) {
                /* a read-only root cannot gain a user: root, at home where it may write */
                snprintf(p->user, sizeof(p->user), "root");
                snprintf(p->home, sizeof(p->home), writable ? "/root" : "/workspace");
                return;
        }
        unsigned id = 1000;
        while (db_id_used(pw, id) || db_id_used(gr, id))
                id++;
        p->uid = id;
        size_t pl = strlen(pw), gl = strlen(gr);
        bool pnl = pl && pw[pl - 1] != '\n', gnl = gl && gr[gl - 1] != '\n';
        if (asprintf(&p->passwd, "%s%s" E2B_USER ":x:%u:%u::" E2B_HOME ":/bin/bash\n", pw,
                     pnl ? "\n" : "", id, id) < 0)
                p->passwd = NULL;
        bool has_group = db_field(gr, E2B_USER, 0, (char[8]){0}, 8);
        if (has_group)
                p->group = NULL;
        else if (asprintf(&p->group, "%s%s" E2B_USER ":x:%u:\n", gr, gnl ? "\n" : "", id) < 0)
                p->group = NULL;
        if (!p->passwd) {
                snprintf(p->user, sizeof(p->user), "root");
                snprintf(p->home, sizeof(p->home), "/root");
        }
}

/* ------------------------------------------------------------------- create */

/* A sandbox being made: while its environment starts (engine_create_async), then while its
 * user is written (e2b_envd_make_user). Owned by whichever of those runs; the request only
 * points at it. */
struct create_ctx {
        struct request *req;             /* NULL once the client is gone */
        struct engine *eng;
        struct env_creating *creating;   /* until the environment runs */
        char id[NAME_BUF_SIZE];
        char template_id[NAME_BUF_SIZE];
        char *metadata;                  /* the request's metadata, as JSON text */
        bool public;                     /* network.allowPublicTraffic */
        struct e2b_user_plan plan;
        char token[44];
        char traffic[44]; /* network.allowPublicTraffic false: the traffic access token, else "" */
};

static void ctx_free(struct create_ctx *c)
{
        if (!c)
                return;
        explicit_bzero(c->token, sizeof(c->token));
        explicit_bzero(c->traffic, sizeof(c->traffic));
        free(c->metadata);
        free(c->plan.passwd);
        free(c->plan.group);
        free(c);
}

/* The client hung up. While the environment starts, the create goes on without it (as a
 * native create does: a Paddock environment that ends at its timeout, with no E2B record);
 * while its user is written, the sandbox is finished and kept. */
static void create_gone(void *data)
{
        struct create_ctx *c = data;
        if (c->creating) {
                engine_create_forget(c->creating);
                ctx_free(c);
                return;
        }
        c->req = NULL;
}

/* Answers the client (if still there) and takes the request's pointer back. */
static void create_answer_error(struct create_ctx *c, unsigned status, const char *msg)
{
        if (!c->req)
                return;
        req_on_free(c->req, NULL, NULL);
        e2b_reply_error(c->req, status, "%s", msg);
        c->req = NULL;
}

static void create_reply(struct create_ctx *c)
{
        if (!c->req)
                return;
        req_on_free(c->req, NULL, NULL);
        struct sbx s = {0};
        struct env *v = engine_find(c->eng, c->id);
        if (v && e2b_sandbox_record(c->eng, c->id, &s.b) >= 0) {
                s.v = v;
                json_t *j = sandbox_json(c->eng, &s, c->token);
                if (j && c->traffic[0]) /* only here: Paddock keeps its hash alone */
                        json_object_set_new(j, "trafficAccessToken", json_string(c->traffic));
                http_reply_json(c->req, 201, j);
                sbx_clear(&s);
        } else {
                e2b_reply_error(c->req, 500, "sandbox %s vanished while it was made", c->id);
        }
        c->req = NULL;
}

static void user_made(void *data, int err, const char *msg)
{
        struct create_ctx *c = data;
        struct env *v = engine_find(c->eng, c->id);
        if (err < 0) {
                log_warn("%s: making the E2B user: %s", c->id, msg);
                if (v)
                        engine_destroy(c->eng, v, true);
                char text[600];
                snprintf(text, sizeof(text), "making the sandbox's user: %s", msg);
                create_answer_error(c, 500, text);
        } else {
                create_reply(c);
        }
        ctx_free(c);
}

/* Its E2B record (access token, metadata, user) and its ingress policy. */
static int create_record(struct create_ctx *c)
{
        struct e2b_row b = {.started_at = wall_ms(), .metadata = c->metadata};
        snprintf(b.id, sizeof(b.id), "%s", c->id);
        snprintf(b.template_id, sizeof(b.template_id), "%s", c->template_id);
        snprintf(b.user, sizeof(b.user), "%s", c->plan.user);
        snprintf(b.home, sizeof(b.home), "%s", c->plan.home);
        int rc = new_access_token(c->token, b.token_hash);
        if (rc >= 0)
                rc = state_e2b_insert(engine_state(c->eng), &b);
        /* Preview URLs (getHost): public unless network.allowPublicTraffic is false; then
         * whoever sends the traffic access token in e2b-traffic-access-token (ingress.h). */
        char traffic_hash[SECRET_HASH_HEX + 1] = "";
        if (rc >= 0 && !c->public)
                rc = new_access_token(c->traffic, traffic_hash);
        if (rc >= 0)
                rc = ingress_set_policy(c->eng, c->id, c->public,
                                        c->public ? NULL : traffic_hash);
        return rc;
}

/* The environment runs (or could not be made): recorded, its user written, answered. */
static void sandbox_created(struct engine *e, struct env *v, int rc, const char *err, void *data)
{
        struct create_ctx *c = data;
        c->creating = NULL;
        if (rc < 0) {
                log_warn("e2b: create %s failed: %s", c->id, err);
                unsigned st;
                const char *code;
                http_status_of_errno(rc, &st, &code);
                create_answer_error(c, st, err);
                ctx_free(c);
                return;
        }
        if ((rc = create_record(c)) < 0) {
                engine_destroy(e, v, true);
                char text[128];
                snprintf(text, sizeof(text), "recording the sandbox: %s", strerror(-rc));
                create_answer_error(c, 500, text);
                ctx_free(c);
                return;
        }
        if (!c->plan.passwd) {
                create_reply(c);
                ctx_free(c);
                return;
        }
        char owner[32];
        snprintf(owner, sizeof(owner), "%u:%u", c->plan.uid, c->plan.uid);
        /* From here user_made answers and frees c, maybe before make_user returns. */
        rc = e2b_envd_make_user(e, v, c->plan.passwd, c->plan.group, c->plan.home, owner,
                                user_made, c);
        if (rc < 0) { /* user_made was not called */
                engine_destroy(e, v, true);
                char text[128];
                snprintf(text, sizeof(text), "making the sandbox's user: %s", strerror(-rc));
                create_answer_error(c, 500, text);
                ctx_free(c);
        }
}

static bool str_in_array(json_t *a, const char *s)
{
        size_t i;
        json_t *x;
        json_array_foreach(a, i, x) if (json_is_string(x) &&
                                        !strcmp(json_string_value(x), s)) return true;
        return false;
}

/* allow_internet_access and network.{allowOut,denyOut} as a Paddock policy. Paddock's is an
 * allow list: denyOut may only say "everything" (0.0.0.0/0), which allowOut then opens. */
static bool parse_network(struct request *r, struct engine *e, json_t *body, struct netpolicy *p)
{
        json_t *inet = json_object_get(body, "allow_internet_access");
        json_t *net = json_object_get(body, "network");
        json_t *allow = json_object_get(net, "allowOut"), *deny = json_object_get(net, "denyOut");
        p->mode = engine_has_network(e) ? NET_OPEN : NET_NONE;
        if (json_is_false(inet))
                p->mode = NET_NONE;
        if (net && !json_is_null(net) && !json_is_object(net)) {
                e2b_reply_error(r, 400, "network: must be an object");
                return false;
        }
        if ((allow && !json_is_array(allow)) || (deny && !json_is_array(deny))) {
                e2b_reply_error(r, 400, "network.allowOut and denyOut: arrays of strings");
                return false;
        }
        size_t nd = json_array_size(deny), na = json_array_size(allow);
        bool deny_all = str_in_array(deny, "0.0.0.0/0");
        if (nd > (deny_all ? 1u : 0u)) {
                e2b_reply_error(r, 400,
                                "network.denyOut: only \"0.0.0.0/0\" is supported (Paddock's "
                                "network policy is an allow list; see docs/e2b.md)");
                return false;
        }
        if (deny_all)
                p->mode = NET_NONE;
        if (na == 0 || !(deny_all || json_is_false(inet)))
                return true; /* allowOut without a deny has nothing to open */
        if (na > NETPOLICY_MAX_RULES || !(p->rules = calloc(na, sizeof(*p->rules)))) {
                e2b_reply_error(r, 400, "network.allowOut: at most %d entries",
                                NETPOLICY_MAX_RULES);
                return false;
        }
        for (size_t i = 0; i < na; i++) {
                const char *rule = json_string_value(json_array_get(allow, i));
                if (!rule || netpolicy_rule_parse(rule, &p->rules[p->n_rules]) < 0) {
                        e2b_reply_error(r, 400,
                                        "network.allowOut[%zu]: not a host, *.domain, "
                                        "address or CIDR",
                                        i);
                        return false;
                }
                p->n_rules++;
        }
        p->mode = NET_ALLOW;
        return true;
}

static bool metadata_ok(struct request *r, json_t *m)
{
        if (!json_is_object(m) || json_object_size(m) > 64) {
                e2b_reply_error(r, 400, "metadata: an object of at most 64 strings");
                return false;
        }
        _cleanup_free_ char *text = json_dumps(m, JSON_COMPACT);
        if (!text || strlen(text) > E2B_METADATA_MAX) {
                e2b_reply_error(r, 400, "metadata: at most %d bytes of JSON", E2B_METADATA_MAX);
                return false;
        }
        const char *k;
        json_t *x;
        json_object_foreach(m, k, x)
        {
                if (!*k || strlen(k) > 64 || !json_is_string(x) || json_string_length(x) > 4096 ||
                    strlen(json_string_value(x)) != json_string_length(x)) {
                        e2b_reply_error(r, 400,
                                        "metadata: keys of at most 64 bytes, string "
                                        "values of at most 4 KiB");
                        return false;
                }
        }
        return true;
}

static bool timeout_of(struct request *r, json_t *body, uint64_t *ret)
{
        json_t *t = json_object_get(body, "timeout");
        if (!t || json_is_null(t))
                return true;
        if (!json_is_integer(t) || json_integer_value(t) < 1 ||
            json_integer_value(t) > E2B_MAX_TIMEOUT) {
                e2b_reply_error(r, 400, "timeout: whole seconds from 1 to %d", E2B_MAX_TIMEOUT);
                return false;
        }
        *ret = (uint64_t)json_integer_value(t);
        return true;
}

static void sandbox_create(struct request *r, struct engine *e)
{
        json_t *body = req_json_object(r);
        if (!body)
                return;
        struct env_spec spec = {.kind = KIND_COMPUTER,
                                .limits = {.cpu_millis = 2000,
                                           .memory_bytes = 512ull << 20,
                                           .swap_bytes = CG_UNLIMITED,
                                           .pids = 1024},
                                .ttl_s = E2B_DEFAULT_TIMEOUT};
        struct create_ctx *ctx = NULL;
        const char *tmpl = json_string_value(json_object_get(body, "templateID"));
        json_t *meta = json_object_get(body, "metadata");
        json_t *vars = json_object_get(body, "envVars");
        if (!tmpl || !*tmpl)
                tmpl = "base";
        if (!strcmp(tmpl, "base"))
                snprintf(spec.image, sizeof(spec.image), "%s", engine_default_image(e));
        else if (name_is_valid(tmpl))
                snprintf(spec.image, sizeof(spec.image), "%s", tmpl);
        else {
                e2b_reply_error(r, 400, "templateID: not a valid image name");
                goto out;
        }
        if (!engine_image_exists(e, spec.image)) {
                e2b_reply_error(r, 404, "template %s not found (no image %s)", tmpl, spec.image);
                goto out;
        }
        if (meta && !json_is_null(meta) && !metadata_ok(r, meta))
                goto out;
        const char *kind = json_string_value(json_object_get(meta, "paddock.kind"));
        if (kind && !strcmp(kind, "sandbox"))
                spec.kind = KIND_SANDBOX;
        else if (kind && strcmp(kind, "computer")) {
                e2b_reply_error(r, 400, "metadata.paddock.kind: \"computer\" or \"sandbox\"");
                goto out;
        }
        if (vars && !json_is_null(vars) && !api_env_map(r, vars, "envVars"))
                goto out;
        spec.env = json_is_object(vars) ? vars : NULL;
        if (!timeout_of(r, body, &spec.ttl_s) || !parse_network(r, e, body, &spec.net))
                goto out;
        struct caller c;
        api_caller(r, &c);
        spec.owner = c.token;
        if (new_sandbox_id(spec.name) < 0) {
                e2b_reply_error(r, 500, "no randomness");
                goto out;
        }
        struct quota_ask q = {.new_env = true,
                              .running = true,
                              .computer = spec.kind == KIND_COMPUTER,
                              .limits = spec.limits};
        if (!api_quota_ok(r, e, &q))
                goto out;
        if (!(ctx = calloc(1, sizeof(*ctx)))) {
                e2b_reply_error(r, 500, "out of memory");
                goto out;
        }
        *ctx = (struct create_ctx){.req = r, .eng = e};
        snprintf(ctx->id, sizeof(ctx->id), "%s", spec.name);
        snprintf(ctx->template_id, sizeof(ctx->template_id), "%s", tmpl);
        ctx->public = !json_is_false(
                json_object_get(json_object_get(body, "network"), "allowPublicTraffic"));
        plan_user(e, spec.image, spec.kind == KIND_COMPUTER, &ctx->plan);
        ctx->metadata = json_is_object(meta) ? json_dumps(meta, JSON_COMPACT) : strdup("{}");
        if (!ctx->metadata) {
                e2b_reply_error(r, 500, "out of memory");
                goto out;
        }
        char err[512] = "";
        /* Answered once PID 1 runs (sandbox_created); the loop serves others meanwhile. */
        int rc = engine_create_async(e, &spec, sandbox_created, ctx, &ctx->creating, err,
                                     sizeof(err));
        spec.net.rules = NULL; /* moved into the environment, or freed with it */
        spec.net.links = NULL;
        if (rc < 0) {
                log_warn("e2b: create %s failed: %s", spec.name, err);
                unsigned st;
                const char *code;
                http_status_of_errno(rc, &st, &code);
                e2b_reply_error(r, st, "%s", err);
                goto out;
        }
        http_defer(r);
        req_on_free(r, create_gone, ctx);
        ctx = NULL; /* the create's now */
out:
        ctx_free(ctx);
        netpolicy_clear(&spec.net);
        json_decref(body);
}

/* ------------------------------------------------------------------- lifecycle */

static int set_ttl(struct engine *e, struct env *v, uint64_t ttl_s, char *err, size_t errlen)
{
        struct env_patch p = {.has_ttl = true, .ttl_s = ttl_s};
        return engine_patch(e, v, &p, err, errlen);
}

/* The end of a connect, the sandbox running: its deadline, one more access token, the answer
 * (status 200 or 201). */
static void connect_finish(struct request *r, struct engine *e, const char *id, unsigned status,
                           uint64_t timeout)
{
        struct sbx s = {0};
        char err[512] = "", token[44], hash[SECRET_HASH_HEX + 1];
        int rc;
        if (!find_sandbox(r, e, id, &s))
                return;
        int64_t end = expires_ms(e, s.v);
        if ((status == 201 || !end || end < wall_ms() + (int64_t)timeout * 1000) &&
            (rc = set_ttl(e, s.v, timeout, err, sizeof(err))) < 0) {
                e2b_reply_error(r, 500, "%s", err);
                goto out;
        }
        if ((rc = new_access_token(token, hash)) < 0) {
                e2b_reply_error(r, 500, "no randomness");
                goto out;
        }
        /* Keep the newest E2B_MAX_TOKENS - 1 hashes and add this one. */
        char list[sizeof(s.b.token_hash)];
        size_t keep = 0;
        const char *p = s.b.token_hash;
        snprintf(list, sizeof(list), "%s", hash);
        while (*p && keep < E2B_MAX_TOKENS - 1) {
                size_t len = strcspn(p, ",");
                size_t used = strlen(list);
                snprintf(list + used, sizeof(list) - used, ",%.*s", (int)len, p);
                keep++;
                p += len;
                p += *p == ',';
        }
        if ((rc = state_e2b_set_tokens(engine_state(e), id, list)) < 0) {
                e2b_reply_error(r, 500, "recording the token: %s", strerror(-rc));
                goto out;
        }
        http_reply_json(r, status, sandbox_json(e, &s, token));
out:
        explicit_bzero(token, sizeof(token));
        sbx_clear(&s);
}

/* A stopped sandbox's connect answers once it runs (engine_start_async): meanwhile the loop
 * serves others. */
struct connect_later {
        struct api_later *l;
        char id[NAME_BUF_SIZE];
        uint64_t timeout;
        unsigned status; /* the answer's once it runs */
};

static void on_connect_started(struct engine *e, struct env *v, int rc, const char *err,
                               void *data)
{
        (void)v;
        struct connect_later *c = data;
        struct request *r = api_later_take(c->l);
        if (r && rc < 0)
                e2b_reply_error(r, rc == -EBUSY ? 409 : 500, "resuming %s: %s", c->id, err);
        else if (r)
                connect_finish(r, e, c->id, c->status, c->timeout);
        free(c);
}

/* A connect that finds the sandbox starting (another connect, or a wake-up) waits for the same
 * start. */
static void connect_join_later(struct request *r, struct engine *e, struct env *v,
                               const char *id, uint64_t timeout, unsigned status)
{
        struct connect_later *c = calloc(1, sizeof(*c));
        if (c)
                c->l = api_later(r);
        if (!c || !c->l || engine_start_join(e, v, on_connect_started, c) < 0) {
                struct request *back = c && c->l ? api_later_take(c->l) : r;
                free(c);
                if (back)
                        e2b_reply_error(back, 500, "resuming %s: out of memory", id);
                return;
        }
        snprintf(c->id, sizeof(c->id), "%s", id);
        c->timeout = timeout;
        c->status = status;
}

/* A sandbox stopped by hand is started; one the idle timer stopped is woken (`wake`). */
static void connect_start_later(struct request *r, struct engine *e, struct env *v,
                                const char *id, uint64_t timeout, unsigned status, bool wake)
{
        struct connect_later *c = calloc(1, sizeof(*c));
        if (c)
                c->l = api_later(r);
        if (!c || !c->l) {
                free(c);
                e2b_reply_error(r, 500, "resuming %s: out of memory", id);
                return;
        }
        snprintf(c->id, sizeof(c->id), "%s", id);
        c->timeout = timeout;
        c->status = status;
        char err[512] = "";
        int rc = wake ? engine_idle_wake_async(e, v, on_connect_started, c, err, sizeof(err))
                      : engine_start_async(e, v, on_connect_started, c, err, sizeof(err));
        if (rc < 0) {
                struct request *back = api_later_take(c->l); /* not called */
                free(c);
                if (back)
                        e2b_reply_error(back, rc == -EBUSY ? 409 : 500, "resuming %s: %s", id,
                                        err);
        }
}

/* connect (and the older resume): running -> the deadline only grows, 200; paused -> thawed
 * with deadline now+timeout, 201; stopped -> started, 201, answered once it runs. Either way
 * one more access token. Paused or stopped by the idle timer is running for E2B (sbx_state):
 * woken, and answered as running (resume: 201). */
static void sandbox_connect(struct request *r, struct engine *e, const char *id, bool resume)
{
        json_t *body = req_json_object(r);
        if (!body)
                return;
        uint64_t timeout = E2B_DEFAULT_TIMEOUT;
        struct sbx s = {0};
        char err[512] = "";
        if (!timeout_of(r, body, &timeout) || !find_sandbox(r, e, id, &s))
                goto out;
        unsigned status = 200;
        int rc = 0;
        if (env_starting(s.v)) {
                connect_join_later(r, e, s.v, id, timeout,
                                   env_idled(s.v) && !resume ? 200 : 201);
                goto out;
        } else if (env_idled(s.v) && !env_running(s.v)) {
                connect_start_later(r, e, s.v, id, timeout, resume ? 201 : 200, true);
                goto out;
        } else if (env_idled(s.v)) {
                rc = engine_idle_wake(e, s.v, err, sizeof(err));
                if (rc == -EBUSY) {
                        e2b_reply_error(r, 409, "%s", err);
                        goto out;
                }
                status = resume ? 201 : 200;
        } else if (!env_running(s.v)) {
                struct quota_ask q = {.env = s.v, .running = true, .limits = *env_limits(s.v)};
                if (api_quota_ok(r, e, &q))
                        connect_start_later(r, e, s.v, id, timeout, 201, false);
                goto out;
        } else if (env_paused(s.v)) {
                rc = engine_pause(e, s.v, false);
                status = 201;
        } else if (resume) {
                e2b_reply_error(r, 409, "sandbox %s is already running", id);
                goto out;
        }
        if (rc < 0) {
                e2b_reply_error(r, 500, "resuming %s: %s", id, err[0] ? err : strerror(-rc));
                goto out;
        }
        connect_finish(r, e, id, status, timeout);
out:
        sbx_clear(&s);
        json_decref(body);
}

static void sandbox_get(struct request *r, struct engine *e, const char *id)
{
        struct sbx s = {0};
        if (!find_sandbox(r, e, id, &s))
                return;
        http_reply_json(r, 200, sandbox_json(e, &s, NULL));
        sbx_clear(&s);
}

/* A kill answers once the sandbox is gone, the loop serving others while it dies
 * (engine_destroy_async); meanwhile the sandbox is 404 to E2B calls (find_sandbox). */
static void on_killed(struct env *v, void *data)
{
        (void)v;
        struct request *r = api_later_take(data);
        if (r)
                http_reply_data(r, 204, NULL, NULL, 0, NULL);
}

static void sandbox_kill(struct request *r, struct engine *e, const char *id)
{
        struct sbx s = {0};
        if (!find_sandbox(r, e, id, &s))
                return;
        sbx_clear(&s);
        struct api_later *l = api_later(r);
        if (!l) {
                e2b_reply_error(r, 500, "killing %s: out of memory", id);
                return;
        }
        int rc = engine_destroy_async(e, s.v, on_killed, l);
        struct request *back = rc < 0 ? api_later_take(l) : NULL; /* on_killed was not called */
        if (back)
                e2b_reply_error(back, 500, "killing %s: %s", id, strerror(-rc));
}

static void sandbox_timeout(struct request *r, struct engine *e, const char *id)
{
        json_t *body = req_json_object(r);
        if (!body)
                return;
        uint64_t t = 0;
        struct sbx s = {0};
        char err[512];
        if (!json_is_integer(json_object_get(body, "timeout"))) {
                e2b_reply_error(r, 400, "timeout: required, whole seconds");
        } else if (timeout_of(r, body, &t) && find_sandbox(r, e, id, &s)) {
                if (env_paused(s.v) && !env_idled(s.v)) /* it applies from the resume */
                        http_reply_data(r, 204, NULL, NULL, 0, NULL);
                else if (set_ttl(e, s.v, t, err, sizeof(err)) < 0)
                        e2b_reply_error(r, 500, "%s", err);
                else
                        http_reply_data(r, 204, NULL, NULL, 0, NULL);
        }
        sbx_clear(&s);
        json_decref(body);
}

/* pause = Paddock's pause (every process frozen); the deadline becomes E2B_PAUSED_KEEP. One
 * the idle timer paused or stopped stays so, but as E2B's pause: requests no longer wake it.
 * One that is starting (a connect or a wake-up) has its start given up: it stays stopped,
 * which E2B sees as paused. */
static void sandbox_pause(struct request *r, struct engine *e, const char *id)
{
        struct sbx s = {0};
        char err[512];
        if (!find_sandbox(r, e, id, &s))
                return;
        sbx_clear(&s);
        bool starting = env_starting(s.v);
        if (starting)
                engine_stop(e, s.v, 0, NULL, NULL); /* overtakes the start */
        bool idled = env_idled(s.v) || starting;
        if (!idled && (!env_running(s.v) || env_paused(s.v))) {
                e2b_reply_error(r, 409, "sandbox %s is already paused", id);
                return;
        }
        int rc = idled ? 0 : engine_pause(e, s.v, true);
        if (rc >= 0)
                engine_idle_keep(e, s.v);
        if (rc >= 0) /* the running deadline stops; a paused sandbox is kept a week */
                rc = set_ttl(e, s.v, E2B_PAUSED_KEEP, err, sizeof(err));
        if (rc < 0)
                e2b_reply_error(r, 500, "pausing %s: %s", id, strerror(-rc));
        else
                http_reply_data(r, 204, NULL, NULL, 0, NULL);
}

/* One sample now: E2B keeps a history, Paddock reports the present. */
static void sandbox_metrics(struct request *r, struct engine *e, const char *id)
{
        struct sbx s = {0};
        if (!find_sandbox(r, e, id, &s))
                return;
        sbx_clear(&s);
        json_t *ej = engine_env_json(e, s.v);
        json_t *usage = json_object_get(ej, "usage");
        const struct cgroup_limits *l = env_limits(s.v);
        json_int_t mem = json_integer_value(json_object_get(usage, "memory"));
        json_int_t disk = json_integer_value(json_object_get(json_object_get(ej, "disk"), "used"));
        json_int_t dtot = json_integer_value(json_object_get(json_object_get(ej, "disk"), "limit"));
        int64_t t = wall_ms();
        json_t *arr = json_array();
        if (json_is_object(usage))
                json_array_append_new(
                    arr,
                    json_pack("{s:o,s:I,s:I,s:f,s:I,s:I,s:I,s:I,s:I}", "timestamp", ms_json(t),
                              "timestampUnix", (json_int_t)(t / 1000), "cpuCount",
                              (json_int_t)(l->cpu_millis == CG_UNLIMITED
                                               ? 1
                                               : (l->cpu_millis + 999) / 1000),
                              "cpuUsedPct", 0.0, "memUsed", mem, "memTotal",
                              (json_int_t)(l->memory_bytes == CG_UNLIMITED ? 0 : l->memory_bytes),
                              "memCache", (json_int_t)0, "diskUsed", disk, "diskTotal", dtot));
        json_decref(ej);
        http_reply_json(r, 200, arr);
}

/* ------------------------------------------------------------------- list */

static int hexval(int c)
{
        return isdigit(c) ? c - '0' : isxdigit(c) ? (tolower(c) - 'a' + 10) : -1;
}

/* Percent-decode s[0..n) into out (form rules: '+' is a space when plus). */
static void pct_decode(const char *s, size_t n, bool plus, char *out, size_t outlen)
{
        size_t o = 0;
        for (size_t i = 0; i < n && o + 1 < outlen; i++) {
                if (s[i] == '%' && i + 2 < n && hexval((unsigned char)s[i + 1]) >= 0 &&
                    hexval((unsigned char)s[i + 2]) >= 0) {
                        out[o++] = (char)(hexval((unsigned char)s[i + 1]) * 16 +
                                          hexval((unsigned char)s[i + 2]));
                        i += 2;
                } else {
                        out[o++] = plus && s[i] == '+' ? ' ' : s[i];
                }
        }
        out[o] = 0;
}

/* metadata=... after the query's own decoding: "k=v&k2=v2", each piece percent-encoded twice
 * more (docs/e2b.md). Returns an object of the wanted pairs, or NULL (400 answered). */
static json_t *metadata_filter(struct request *r, const char *q)
{
        json_t *want = json_object();
        for (const char *p = q; p && *p;) {
                size_t len = strcspn(p, "&");
                const char *eq = memchr(p, '=', len);
                char k1[1024], v1[4096], k2[1024], v2[4096];
                if (!eq || len >= 4096) {
                        json_decref(want);
                        e2b_reply_error(r, 400, "metadata: key=value pairs joined by &");
                        return NULL;
                }
                pct_decode(p, (size_t)(eq - p), true, k1, sizeof(k1));
                pct_decode(eq + 1, len - (size_t)(eq - p) - 1, true, v1, sizeof(v1));
                pct_decode(k1, strlen(k1), false, k2, sizeof(k2));
                pct_decode(v1, strlen(v1), false, v2, sizeof(v2));
                json_object_set_new(want, k2, json_string(v2));
                p += len;
                p += *p == '&';
        }
        return want;
}

static bool metadata_matches(const char *text, json_t *want)
{
        if (!json_object_size(want))
                return true;
        json_t *m = json_loads(text, 0, NULL);
        bool ok = json_is_object(m);
        const char *k;
        json_t *x;
        json_object_foreach(want, k, x)
        {
                const char *have = json_string_value(json_object_get(m, k));
                ok = ok && have && !strcmp(have, json_string_value(x));
        }
        json_decref(m);
        return ok;
}

static void sandboxes_list(struct request *r, struct engine *e)
{
        const char *q_limit = req_query(r, "limit"), *q_next = req_query(r, "nextToken");
        const char *q_state = req_query(r, "state"), *q_meta = req_query(r, "metadata");
        const char *q_tmpl = req_query(r, "template");
        size_t limit = E2B_LIST_DEFAULT;
        if (q_limit) {
                char *end;
                unsigned long l = strtoul(q_limit, &end, 10);
                if (!*q_limit || *end || l < 1 || l > E2B_LIST_MAX) {
                        e2b_reply_error(r, 400, "limit: 1 to %d", E2B_LIST_MAX);
                        return;
                }
                limit = l;
        }
        if (q_next && (!*q_next || !name_is_valid(q_next))) {
                e2b_reply_error(r, 400, "nextToken: not one this server gave");
                return;
        }
        bool want_running = !q_state || strstr(q_state, "running"),
             want_paused = !q_state || strstr(q_state, "paused");
        json_t *want = metadata_filter(r, q_meta);
        if (!want)
                return;
        struct caller c;
        api_caller(r, &c);
        json_t *arr = json_array();
        char after[NAME_BUF_SIZE], next[NAME_BUF_SIZE] = "";
        snprintf(after, sizeof(after), "%s", q_next ? q_next : "");
        /* Keyset pages of the table in id order, filtered here, until one more match than
         * asked for shows that another page exists. */
        size_t batch = limit + 1 < 64 ? 64 : limit + 1;
        bool more = false, end = false;
        while (!more && !end) {
                struct e2b_row *rows = NULL;
                size_t n = 0;
                int rc = state_e2b_list(engine_state(e), NULL, c.admin ? NULL : c.token, after,
                                        batch, &rows, &n);
                if (rc < 0) {
                        json_decref(arr);
                        json_decref(want);
                        e2b_reply_error(r, 500, "listing: %s", strerror(-rc));
                        return;
                }
                end = n < batch;
                for (size_t i = 0; i < n && !more; i++) {
                        snprintf(after, sizeof(after), "%s", rows[i].id);
                        struct env *v = engine_find(e, rows[i].id);
                        if (!v || env_deleting(v) || !caller_sees_env(&c, v))
                                continue;
                        bool running = !strcmp(sbx_state(v), "running");
                        if ((running ? !want_running : !want_paused) ||
                            !metadata_matches(rows[i].metadata, want) ||
                            (q_tmpl && *q_tmpl && strcmp(q_tmpl, rows[i].template_id)))
                                continue;
                        if (json_array_size(arr) == limit) {
                                more = true;
                                break;
                        }
                        struct sbx s = {.v = v, .b = rows[i]};
                        json_array_append_new(arr, sandbox_json(e, &s, NULL));
                        snprintf(next, sizeof(next), "%s", rows[i].id);
                }
                state_e2b_rows_free(rows, n);
        }
        json_decref(want);
        char *text = json_dumps(arr, JSON_COMPACT);
        json_decref(arr);
        const char *const hdrs[] = {"X-Next-Token", next, NULL};
        if (text)
                http_reply_data(r, 200, "application/json", text, strlen(text), more ? hdrs : NULL);
        else
                e2b_reply_error(r, 500, "out of memory");
        free(text);
}

/* ------------------------------------------------------------------- routing */

bool e2b_api_handle(struct request *r, struct engine *e)
{
        const char *path = req_path(r), *m = req_method(r);
        char id[128] = "", rest[32] = "";
        const char *pattern = NULL;
        bool v2 = !strncmp(path, "/v2/sandboxes", 13);
        const char *tail = v2 ? path + 13 : !strncmp(path, "/sandboxes", 10) ? path + 10 : NULL;
        if (!tail || (*tail && *tail != '/'))
                return false;
        if (*tail == '/') {
                tail++;
                size_t n = strcspn(tail, "/");
                if (n == 0 || n >= sizeof(id))
                        return false;
                memcpy(id, tail, n);
                id[n] = 0;
                tail += n;
                if (*tail == '/' &&
                    snprintf(rest, sizeof(rest), "%s", tail + 1) >= (int)sizeof(rest))
                        return false;
                if (*tail && *tail != '/')
                        return false;
        }
        if (!api_resolve_caller(r, e))
                return true;
        bool get = !strcmp(m, "GET"), post = !strcmp(m, "POST"), del = !strcmp(m, "DELETE");
        if (v2 && !id[0] && post) {
                pattern = "/v2/sandboxes";
                req_set_route(r, pattern, "");
                sandbox_create(r, e);
        } else if (v2 && !id[0] && get) {
                req_set_route(r, "/v2/sandboxes", "");
                sandboxes_list(r, e);
        } else if (v2 && id[0] && !strcmp(rest, "connect") && post) {
                req_set_route(r, "/v2/sandboxes/{sandboxID}/connect", id);
                sandbox_connect(r, e, id, false);
        } else if (!v2 && id[0] && !rest[0] && get) {
                req_set_route(r, "/sandboxes/{sandboxID}", id);
                sandbox_get(r, e, id);
        } else if (!v2 && id[0] && !rest[0] && del) {
                req_set_route(r, "/sandboxes/{sandboxID}", id);
                sandbox_kill(r, e, id);
        } else if (!v2 && id[0] && !strcmp(rest, "timeout") && post) {
                req_set_route(r, "/sandboxes/{sandboxID}/timeout", id);
                sandbox_timeout(r, e, id);
        } else if (!v2 && id[0] && !strcmp(rest, "pause") && post) {
                req_set_route(r, "/sandboxes/{sandboxID}/pause", id);
                sandbox_pause(r, e, id);
        } else if (!v2 && id[0] && !strcmp(rest, "resume") && post) {
                req_set_route(r, "/sandboxes/{sandboxID}/resume", id);
                sandbox_connect(r, e, id, true);
        } else if (!v2 && id[0] && !strcmp(rest, "metrics") && get) {
                req_set_route(r, "/sandboxes/{sandboxID}/metrics", id);
                sandbox_metrics(r, e, id);
        } else {
                e2b_reply_error(r, 404, "no such route: %s %s", m, path);
        }
        return true;
}

/* /v1/envs: create, list, inspect, patch, delete, start/stop/restart. */
#include "daemon/api.h"
#include "daemon/api_io.h"
#include "daemon/log.h"
#include "lib/jsonwrite.h"
#include "lib/paddock.h"
#include "lib/parse.h"
#include "lib/strbuf.h"
#include "lib/util.h"

#include <ctype.h>

#define MAX_MAP_ENTRIES 256
#define MIN_MEMORY (8ull << 20) /* below this even paddock-init and a shell cannot run */

static bool env_key_valid(const char *k)
{
        if (!k[0] || strlen(k) > 255 || isdigit((unsigned char)k[0]))
                return false;
        for (const char *p = k; *p; p++)
                if (!isalnum((unsigned char)*p) && *p != '_')
                        return false;
        return true;
}

static bool label_key_valid(const char *k)
{
        if (!k[0] || strlen(k) > 63)
                return false;
        for (const char *p = k; *p; p++)
                if (!isalnum((unsigned char)*p) && !strchr("-_./", *p))
                        return false;
        return true;
}

/* An object of string values with keys that pass key_ok. Replies 400 on failure. */
bool api_string_map(struct request *r, json_t *j, const char *field, bool (*key_ok)(const char *))
{
        if (!json_is_object(j)) {
                http_reply_error(r, 400, "invalid_argument", "%s: must be an object of strings",
                                 field);
                return false;
        }
        if (json_object_size(j) > MAX_MAP_ENTRIES) {
                http_reply_error(r, 400, "invalid_argument", "%s: at most %d entries", field,
                                 MAX_MAP_ENTRIES);
                return false;
        }
        const char *k;
        json_t *v;
        json_object_foreach(j, k, v)
        {
                if (!key_ok(k)) {
                        http_reply_error(r, 400, "invalid_argument", "%s: invalid key \"%.64s\"",
                                         field, k);
                        return false;
                }
                if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v) ||
                    json_string_length(v) > 32768) {
                        http_reply_error(r, 400, "invalid_argument",
                                         "%s.%s: must be a string (no NUL, at most 32 KiB)", field, k);
                        return false;
                }
        }
        return true;
}

/* Environment variables in all, as every process's execve gets them (PID 1's too): well below
 * what the kernel takes (a quarter of the stack limit, usually 2 MiB), leaving the rest to
 * the command's arguments. */
#define ENV_MAP_MAX_BYTES (1u << 20)

bool api_env_map(struct request *r, json_t *j, const char *field)
{
        if (!api_string_map(r, j, field, env_key_valid))
                return false;
        size_t total = 0;
        const char *k;
        json_t *v;
        json_object_foreach(j, k, v)
        {
                total += strlen(k) + 1 + json_string_length(v) + 1; /* "KEY=VALUE\0" */
        }
        if (total > ENV_MAP_MAX_BYTES) {
                http_reply_error(r, 413, "too_large", "%s: %zu bytes in all, at most %u", field,
                                 total, ENV_MAP_MAX_BYTES);
                return false;
        }
        return true;
}

/* calloc for n elements (at least one, so that an empty array is not NULL); replies 500 when
 * memory runs out. */
static void *new_array(struct request *r, size_t n, size_t size)
{
        void *a = calloc(n ? n : 1, size);
        if (!a)
                http_reply_errno(r, -ENOMEM, "out of memory");
        return a;
}

/* network: {"mode": "none|open|allow", "allow": ["host[:port]", "*.domain", "cidr[:port]"],
 * "bandwidth": {"egress": "10mbit", "ingress": ...} or "bandwidth": "10mbit", "links": [..]} */
bool api_network(struct request *r, json_t *j, struct netpolicy *p)
{
        if (!json_is_object(j)) {
                http_reply_error(r, 400, "invalid_argument", "network: must be an object");
                return false;
        }
        const char *k;
        json_t *v;
        json_object_foreach(j, k, v)
        {
                if (strcmp(k, "mode") && strcmp(k, "allow") && strcmp(k, "bandwidth") &&
                    strcmp(k, "links")) {
                        http_reply_error(r, 400, "invalid_argument",
                                         "network: unknown field \"%.64s\"", k);
                        return false;
                }
        }
        json_t *mode = json_object_get(j, "mode");
        if (mode && (!json_is_string(mode) ||
                     netpolicy_mode_parse(json_string_value(mode), &p->mode) < 0)) {
                http_reply_error(r, 400, "invalid_argument",
                                 "network.mode: must be \"none\", \"open\" or \"allow\"");
                return false;
        }
        json_t *allow = json_object_get(j, "allow");
        if (allow && !json_is_null(allow)) {
                size_t n = json_array_size(allow);
                if (!json_is_array(allow) || n > NETPOLICY_MAX_RULES) {
                        http_reply_error(r, 400, "invalid_argument",
                                         "network.allow: an array of at most %d rules",
                                         NETPOLICY_MAX_RULES);
                        return false;
                }
                free(p->rules);
                p->n_rules = 0;
                if (!(p->rules = new_array(r, n, sizeof(*p->rules))))
                        return false;
                for (size_t i = 0; i < n; i++) {
                        const char *rule = json_string_value(json_array_get(allow, i));
                        if (!rule || netpolicy_rule_parse(rule, &p->rules[p->n_rules]) < 0) {
                                http_reply_error(r, 400, "invalid_argument",
                                                 "network.allow[%zu]: use host[:port], "
                                                 "*.domain[:port], a.b.c.d[/n][:port] or "
                                                 "[v6addr[/n]]:port, v6addr[/n]",
                                                 i);
                                return false;
                        }
                        p->n_rules++;
                }
                if (!mode)
                        p->mode = NET_ALLOW;
        }
        json_t *bw = json_object_get(j, "bandwidth");
        if (bw && !json_is_null(bw)) {
                json_t *eg = json_is_object(bw) ? json_object_get(bw, "egress") : bw;
                json_t *in = json_is_object(bw) ? json_object_get(bw, "ingress") : bw;
                char text[64];
                for (int i = 0; i < 2; i++) {
                        json_t *x = i ? in : eg;
                        uint64_t *out = i ? &p->ingress_bps : &p->egress_bps;
                        if (!x || json_is_null(x))
                                continue;
                        if (json_is_integer(x) && json_integer_value(x) >= 0)
                                *out = (uint64_t)json_integer_value(x);
                        else if (!json_is_string(x) ||
                                 snprintf(text, sizeof(text), "%s", json_string_value(x)) >= 64 ||
                                 parse_rate_bps(text, out) < 0) {
                                http_reply_error(r, 400, "invalid_argument",
                                                 "network.bandwidth: a rate like 10mbit, 500kbit, 1gbit");
                                return false;
                        }
                }
        }
        json_t *links = json_object_get(j, "links");
        if (links && !json_is_null(links)) {
                size_t n = json_array_size(links);
                if (!json_is_array(links) || n > NETPOLICY_MAX_LINKS) {
                        http_reply_error(r, 400, "invalid_argument",
                                         "network.links: an array of environment names");
                        return false;
                }
                free(p->links);
                p->n_links = 0;
                if (!(p->links = new_array(r, n, sizeof(*p->links))))
                        return false;
                for (size_t i = 0; i < n; i++) {
                        const char *l = json_string_value(json_array_get(links, i));
                        if (!l || !name_is_valid(l)) {
                                http_reply_error(r, 400, "invalid_argument",
                                                 "network.links[%zu]: invalid environment name", i);
                                return false;
                        }
                        snprintf(p->links[p->n_links++], sizeof(p->links[0]), "%s", l);
                }
        }
        return true;
}

static bool parse_limits(struct request *r, json_t *body, struct cgroup_limits *l)
{
        json_t *j;
        if ((j = json_object_get(body, "cpus")) && !json_is_null(j) &&
            !api_cpus(r, j, "cpus", &l->cpu_millis))
                return false;
        if ((j = json_object_get(body, "memory")) && !json_is_null(j)) {
                if (!api_size(r, j, "memory", &l->memory_bytes))
                        return false;
                if (l->memory_bytes < MIN_MEMORY) {
                        http_reply_error(r, 400, "invalid_argument", "memory: at least 8M");
                        return false;
                }
        }
        if ((j = json_object_get(body, "swap")) && !json_is_null(j) &&
            !api_size(r, j, "swap", &l->swap_bytes))
                return false;
        if ((j = json_object_get(body, "pids")) && !json_is_null(j) &&
            !api_count(r, j, "pids", 4, 4194304, &l->pids))
                return false;
        return true;
}

/* "idle_timeout": a duration, 0 or null = never; "idle_action": "pause" or "stop". */
static bool parse_idle(struct request *r, json_t *body, bool *has_timeout, uint64_t *timeout,
                       bool *has_action, enum idle_action *action)
{
        json_t *j;
        if ((j = json_object_get(body, "idle_timeout"))) {
                *has_timeout = true;
                *timeout = 0;
                if (!json_is_null(j) && !api_duration(r, j, "idle_timeout", timeout))
                        return false;
        }
        if ((j = json_object_get(body, "idle_action"))) {
                const char *a = json_string_value(j);
                *has_action = true;
                if (a && !strcmp(a, "pause")) {
                        *action = IDLE_PAUSE;
                } else if (a && !strcmp(a, "stop")) {
                        *action = IDLE_STOP;
                } else {
                        http_reply_error(r, 400, "invalid_argument",
                                         "idle_action: must be \"pause\" or \"stop\"");
                        return false;
                }
        }
        return true;
}

/* A create waiting for its PID 1 (engine_create_async). */
struct create_wait {
        struct request *r;
        struct env_creating *creating;
        char name[NAME_BUF_SIZE];
};

static void created(struct engine *e, struct env *v, int rc, const char *err, void *data)
{
        struct create_wait *w = data;
        req_on_free(w->r, NULL, NULL);
        if (rc < 0) {
                log_warn("create %s failed: %s", w->name, err);
                http_reply_errno(w->r, rc, "%s", err);
        } else {
                http_reply_json(w->r, 201, engine_env_json(e, v));
        }
        free(w);
}

static void create_gone(void *data) /* the client hung up first: the create goes on */
{
        struct create_wait *w = data;
        engine_create_forget(w->creating);
        free(w);
}

struct create_args {
        struct engine *e;
        const struct env_spec *spec;
};

static int start_create(void *data, engine_created_fn done, void *done_data,
                        struct env_creating **ret, char *err, size_t errlen)
{
        const struct create_args *a = data;
        return engine_create_async(a->e, a->spec, done, done_data, ret, err, errlen);
}

int api_answer_when_created(struct request *r, const char *name, api_create_start_fn start,
                            void *start_data, char *err, size_t errlen)
{
        struct create_wait *w = calloc(1, sizeof(*w));
        if (!w) {
                snprintf(err, errlen, "out of memory");
                return -ENOMEM;
        }
        w->r = r;
        snprintf(w->name, sizeof(w->name), "%s", name);
        int rc = start(start_data, created, w, &w->creating, err, errlen);
        if (rc < 0) {
                free(w);
                return rc;
        }
        /* Answered once PID 1 runs; the loop serves other clients meanwhile. */
        http_defer(r);
        req_on_free(r, create_gone, w);
        return 0;
}

void api_envs_create(struct request *r, struct engine *e)
{
        static const char *const fields[] = {"name", "kind", "image", "cpus", "memory", "swap",
                                             "pids", "disk", "ttl", "env", "labels", "autostart",
                                             "network", "io", "idle_timeout", "idle_action",
                                             NULL};
        json_t *body = req_json_object(r);
        if (!body)
                return;
        struct env_spec spec = {.kind = KIND_SANDBOX,
                                .limits = {.cpu_millis = CG_UNLIMITED,
                                           .memory_bytes = CG_UNLIMITED,
                                           .swap_bytes = CG_UNLIMITED,
                                           .pids = CG_UNLIMITED}};
        json_t *j;
        if (!api_known_fields(r, body, fields))
                goto out;
        j = json_object_get(body, "name");
        if (!json_is_string(j) || !name_is_valid(json_string_value(j))) {
                http_reply_error(r, 400, "invalid_argument",
                                 "name: required; 1-%d letters, digits, '-', '_' or '.', "
                                 "starting with a letter or digit", NAME_LEN_MAX);
                goto out;
        }
        snprintf(spec.name, sizeof(spec.name), "%s", json_string_value(j));
        if ((j = json_object_get(body, "kind"))) {
                const char *k = json_string_value(j);
                if (k && !strcmp(k, "computer"))
                        spec.kind = KIND_COMPUTER;
                else if (!k || strcmp(k, "sandbox")) {
                        http_reply_error(r, 400, "invalid_argument",
                                         "kind: must be \"computer\" or \"sandbox\"");
                        goto out;
                }
        }
        snprintf(spec.image, sizeof(spec.image), "%s", engine_default_image(e));
        if ((j = json_object_get(body, "image"))) {
                if (!json_is_string(j) || !name_is_valid(json_string_value(j))) {
                        http_reply_error(r, 400, "invalid_argument", "image: invalid image name");
                        goto out;
                }
                snprintf(spec.image, sizeof(spec.image), "%s", json_string_value(j));
        }
        /* Safe defaults: a sandbox is small; every environment has a process limit. */
        if (spec.kind == KIND_SANDBOX) {
                spec.limits.cpu_millis = 1000;
                spec.limits.memory_bytes = 512ull << 20;
                spec.limits.pids = 256;
                spec.ttl_s = DEFAULT_SANDBOX_TTL_S;
        } else {
                spec.limits.pids = 4096;
        }
        if (!parse_limits(r, body, &spec.limits))
                goto out;
        if ((j = json_object_get(body, "ttl")) && !json_is_null(j) &&
            !api_duration(r, j, "ttl", &spec.ttl_s))
                goto out;
        bool has_idle_timeout = false, has_idle_action = false;
        if (!parse_idle(r, body, &has_idle_timeout, &spec.idle_timeout_s, &has_idle_action,
                        &spec.idle_action))
                goto out;
        if ((j = json_object_get(body, "disk")) && !json_is_null(j)) {
                /* computers: a quota on their disk; sandboxes: the size of /tmp and /workspace */
                uint64_t *dst = spec.kind == KIND_COMPUTER ? &spec.disk_bytes : &spec.tmp_bytes;
                if (!api_size(r, j, "disk", dst))
                        goto out;
                if (*dst < (1u << 20)) {
                        http_reply_error(r, 400, "invalid_argument", "disk: at least 1M");
                        goto out;
                }
        }
        if ((j = json_object_get(body, "env")) && !api_env_map(r, j, "env"))
                goto out;
        spec.env = j;
        if ((j = json_object_get(body, "labels")) &&
            !api_string_map(r, j, "labels", label_key_valid))
                goto out;
        spec.labels = j;
        if ((j = json_object_get(body, "autostart"))) {
                if (!json_is_boolean(j)) {
                        http_reply_error(r, 400, "invalid_argument", "autostart: must be true or false");
                        goto out;
                }
                spec.autostart = json_is_true(j);
        }
        spec.net.mode = spec.kind == KIND_COMPUTER && engine_has_network(e) ? NET_OPEN : NET_NONE;
        if ((j = json_object_get(body, "network")) && !json_is_null(j) &&
            !api_network(r, j, &spec.net))
                goto out;
        if ((j = json_object_get(body, "io")) && !json_is_null(j)) {
                bool has[4];
                uint64_t io[4];
                if (!api_io_limits(r, j, has, io))
                        goto out;
                spec.limits.io_read_bps = io[IO_READ_BPS];
                spec.limits.io_write_bps = io[IO_WRITE_BPS];
                spec.limits.io_read_iops = io[IO_READ_IOPS];
                spec.limits.io_write_iops = io[IO_WRITE_IOPS];
        }
        if (!json_object_get(body, "image") && !engine_image_exists(e, spec.image)) {
                http_reply_error(r, 404, "not_found",
                                 "no image given and the default image %s does not exist: "
                                 "build it (paddock image build %s --packages bash,python3,..."
                                 "; scripts/quickstart.sh does), import or pull one under that "
                                 "name, or name an image with --image",
                                 spec.image, spec.image);
                goto out;
        }
        struct caller c;
        api_caller(r, &c);
        spec.owner = c.token;
        /* Checked and spent in this same step: from here on the next request counts this
         * environment (listed, or a create in progress: engine_next_creating). */
        struct quota_ask q = {.new_env = true,
                              .running = true, /* a new environment starts at once */
                              .computer = spec.kind == KIND_COMPUTER,
                              .limits = spec.limits,
                              .disk = spec.disk_bytes};
        if (!api_quota_ok(r, e, &q))
                goto out;
        char err[512] = "";
        int rc = api_answer_when_created(r, spec.name, start_create,
                                         &(struct create_args){e, &spec}, err, sizeof(err));
        spec.net.rules = NULL; /* moved into the environment, or freed with it */
        spec.net.links = NULL;
        if (rc < 0) {
                log_warn("create %s failed: %s", spec.name, err);
                http_reply_errno(r, rc, "%s", err);
        }
out:
        netpolicy_clear(&spec.net);
        json_decref(body);
}

/* A listing in progress: each environment's JSON (with its cgroup and disk readings) is made
 * by an engine_pass, a slice per turn of the loop, so listing thousands never holds the loop
 * for long. */
struct listing {
        struct request *r;
        struct caller c;
        const char *labels[32];
        size_t n_labels;
        /* The answer's text, written one environment at a time (each serialised as soon as it
         * is made, so the end of the pass has no big document to dump). A plain growing
         * buffer, not a FILE: jansson hands its writer every token on its own (tens per
         * environment), and stdio's locked fwrite per token was a fifth of a listing's time. */
        struct strbuf text;
        size_t n;
        bool oom; /* out of memory, or a value that could not be written: answer 500 */
        struct engine_pass *pass;
};

static void listing_free(struct listing *l)
{
        engine_pass_cancel(l->pass);
        strbuf_free(&l->text);
        free(l);
}

/* Append to the answer (the buffer doubles: a listing of thousands grows a few dozen times). */
static int listing_put(const char *s, size_t k, void *data)
{
        struct listing *l = data;
        if (l->oom)
                return -1;
        if (strbuf_add(&l->text, s, k) < 0) {
                l->oom = true;
                return -1;
        }
        return 0;
}

static void listing_puts(struct listing *l, const char *s)
{
        (void)listing_put(s, strlen(s), l);
}

static void listing_each(struct engine *e, struct env *v, void *data)
{
        struct listing *l = data;
        bool match = caller_sees_env(&l->c, v);
        for (size_t i = 0; i < l->n_labels && match; i++) {
                char key[128];
                const char *eq = strchr(l->labels[i], '=');
                size_t klen = eq ? (size_t)(eq - l->labels[i]) : strlen(l->labels[i]);
                if (klen >= sizeof(key))
                        klen = sizeof(key) - 1;
                memcpy(key, l->labels[i], klen);
                key[klen] = 0;
                match = eq ? env_has_label(v, key, eq + 1) : false;
        }
        if (!match)
                return;
        json_t *j = engine_env_json_listed(e, v);
        if (j) {
                listing_puts(l, l->n++ ? "," : "");
                /* jansson's bytes without its per-value snprintf (lib/jsonwrite.h) */
                if (json_write_compact(j, listing_put, l) < 0)
                        l->oom = true;
        }
        json_decref(j);
}

/* {"envs":[...]} and a newline, as http_reply_json would have written it. */
static void listing_done(struct engine *e, void *data)
{
        (void)e;
        struct listing *l = data;
        struct request *r = l->r;
        l->pass = NULL;
        req_on_free(r, NULL, NULL);
        listing_puts(l, "]}\n");
        if (l->oom)
                http_reply_errno(r, -ENOMEM, "listing");
        else
                http_reply_text(r, 200, "application/json", TAKE_PTR(l->text.data), l->text.len);
        listing_free(l);
}

static void listing_gone(void *data) /* the client hung up first */
{
        listing_free(data);
}

void api_envs_list(struct request *r, struct engine *e)
{
        struct listing *l = calloc(1, sizeof(*l));
        if (!l) {
                http_reply_errno(r, -ENOMEM, "listing");
                return;
        }
        listing_puts(l, "{\"envs\":[");
        l->r = r;
        /* the label strings are the request's: it outlives the pass */
        l->n_labels = req_query_all(r, "label", l->labels, ELEMENTSOF(l->labels));
        api_caller(r, &l->c);
        struct engine_pass *p;
        int rr = engine_pass_start(e, l->c.admin ? NULL : l->c.token, listing_each, listing_done,
                                   l, &p);
        if (rr < 0) {
                listing_free(l);
                http_reply_errno(r, rr, "listing");
                return;
        }
        if (!p)
                return; /* answered already */
        l->pass = p;
        req_on_free(r, listing_gone, l);
        http_defer(r);
}

void api_env_get(struct request *r, struct engine *e, struct env *v)
{
        http_reply_json(r, 200, engine_env_json(e, v));
}

void api_env_patch(struct request *r, struct engine *e, struct env *v)
{
        static const char *const fields[] = {"cpus", "memory", "swap", "pids", "ttl", "autostart",
                                             "network", "disk", "io", "idle_timeout",
                                             "idle_action", NULL};
        json_t *body = req_json_object(r);
        if (!body)
                return;
        struct env_patch p = {0};
        struct cgroup_limits l = {.cpu_millis = CG_UNLIMITED,
                                  .memory_bytes = CG_UNLIMITED,
                                  .swap_bytes = CG_UNLIMITED,
                                  .pids = CG_UNLIMITED};
        json_t *j;
        if (!api_known_fields(r, body, fields) || !parse_limits(r, body, &l))
                goto out;
        if ((j = json_object_get(body, "io")) && !json_is_null(j) &&
            !api_io_limits(r, j, p.has_io, p.io))
                goto out;
        if (j && json_is_null(j)) /* "io": null removes every I/O limit */
                for (size_t i = 0; i < 4; i++)
                        p.has_io[i] = true;
        /* null clears a limit */
        p.has_cpus = json_object_get(body, "cpus") != NULL;
        p.cpus = l.cpu_millis;
        p.has_memory = json_object_get(body, "memory") != NULL;
        p.memory = l.memory_bytes;
        p.has_swap = json_object_get(body, "swap") != NULL;
        p.swap = l.swap_bytes;
        p.has_pids = json_object_get(body, "pids") != NULL;
        p.pids = l.pids;
        if ((j = json_object_get(body, "ttl"))) {
                p.has_ttl = true;
                if (!json_is_null(j) && !api_duration(r, j, "ttl", &p.ttl_s))
                        goto out;
        }
        if (!parse_idle(r, body, &p.has_idle_timeout, &p.idle_timeout_s, &p.has_idle_action,
                        &p.idle_action))
                goto out;
        if ((j = json_object_get(body, "disk"))) {
                p.has_disk = true; /* null: no limit */
                if (!json_is_null(j) && !api_size(r, j, "disk", &p.disk))
                        goto out;
                if (!json_is_null(j) && p.disk < (1u << 20)) {
                        http_reply_error(r, 400, "invalid_argument", "disk: at least 1M");
                        goto out;
                }
        }
        if ((j = json_object_get(body, "autostart"))) {
                if (!json_is_boolean(j)) {
                        http_reply_error(r, 400, "invalid_argument", "autostart: must be true or false");
                        goto out;
                }
                p.has_autostart = true;
                p.autostart = json_is_true(j);
        }
        if ((j = json_object_get(body, "network"))) {
                /* Start from the current policy: fields not given keep their value. */
                const struct netpolicy *cur = env_netpolicy(v);
                p.net.mode = cur->mode;
                p.net.egress_bps = cur->egress_bps;
                p.net.ingress_bps = cur->ingress_bps;
                p.net.rules = calloc(cur->n_rules ? cur->n_rules : 1, sizeof(*p.net.rules));
                p.net.links = calloc(cur->n_links ? cur->n_links : 1, sizeof(*p.net.links));
                if (!p.net.rules || !p.net.links) {
                        http_reply_errno(r, -ENOMEM, "out of memory");
                        goto out;
                }
                memcpy(p.net.rules, cur->rules, cur->n_rules * sizeof(*p.net.rules));
                memcpy(p.net.links, cur->links, cur->n_links * sizeof(*p.net.links));
                p.net.n_rules = cur->n_rules;
                p.net.n_links = cur->n_links;
                if (!api_network(r, j, &p.net))
                        goto out;
                p.has_net = true;
        }
        /* The limits it will have; a running environment's count against its token's quota. */
        struct quota_ask q = {.env = v,
                              .running = env_running(v),
                              .computer = env_kind(v) == KIND_COMPUTER,
                              .limits = *env_limits(v),
                              .disk = p.has_disk ? p.disk : env_disk_bytes(v)};
        if (p.has_cpus)
                q.limits.cpu_millis = p.cpus;
        if (p.has_memory)
                q.limits.memory_bytes = p.memory;
        if ((p.has_cpus || p.has_memory || p.has_disk) && !api_quota_ok(r, e, &q))
                goto out;
        char err[512] = "";
        int rc = engine_patch(e, v, &p, err, sizeof(err));
        if (p.has_net) {
                p.net.rules = NULL; /* moved into the environment */
                p.net.links = NULL;
        }
        if (rc < 0)
                http_reply_errno(r, rc, "%s", err[0] ? err : strerror(-rc));
        else
                http_reply_json(r, 200, engine_env_json(e, v));
out:
        netpolicy_clear(&p.net);
        json_decref(body);
}

/* A delete that answers once the environment is gone (engine_destroy_async): v is unlisted,
 * not yet freed. */
static void on_deleted(struct env *v, void *data)
{
        struct request *r = api_later_take(data);
        if (r)
                http_reply_json(r, 200, json_pack("{s:s}", "deleted", env_name(v)));
}

void api_env_delete(struct request *r, struct engine *e, struct env *v)
{
        const char *force = req_query(r, "force");
        bool f = force && (!strcmp(force, "1") || !strcmp(force, "true"));
        char name[NAME_BUF_SIZE];
        snprintf(name, sizeof(name), "%s", env_name(v));
        /* A running one (or one on its way out already): its processes die while the daemon
         * serves others, and the answer comes once it is gone. */
        if ((f && env_running(v)) || env_deleting(v)) {
                struct api_later *l = api_later(r);
                if (!l) {
                        http_reply_errno(r, -ENOMEM, "out of memory");
                        return;
                }
                int rc = engine_destroy_async(e, v, on_deleted, l);
                struct request *back = rc < 0 ? api_later_take(l) : NULL; /* not called */
                if (back)
                        http_reply_errno(back, rc, "%s: %s", name, strerror(-rc));
                return;
        }
        int rc = engine_destroy(e, v, f);
        if (rc == -EBUSY) {
                http_reply_error(r, 409, "conflict",
                                 "%s is %s; stop it first or use force (rm -f)", name,
                                 env_starting(v) ? "starting" : "running");
                return;
        }
        if (rc < 0) {
                http_reply_errno(r, rc, "%s: %s", name, strerror(-rc));
                return;
        }
        http_reply_json(r, 200, json_pack("{s:s}", "deleted", name));
}

/* stop and restart answer once the environment has stopped (and started again). */
struct action_ctx {
        struct request *req;
        struct engine *eng;
        bool restart;
};

static void on_request_gone(void *data)
{
        struct action_ctx *c = data;
        c->req = NULL;
}

/* A start (or a restart's) answers once PID 1 runs and its start is on disk; meanwhile the
 * environment is listed as "starting" and others are served. */
static void on_started(struct engine *e, struct env *v, int rc, const char *err, void *data)
{
        struct request *r = api_later_take(data);
        if (r && rc < 0)
                http_reply_errno(r, rc, "%s", err);
        else if (r)
                http_reply_json(r, 200, engine_env_json(e, v));
}

static void start_answered_later(struct request *r, struct engine *e, struct env *v)
{
        struct api_later *l = api_later(r);
        if (!l) {
                http_reply_errno(r, -ENOMEM, "out of memory");
                return;
        }
        char err[512] = "";
        int rc = engine_start_async(e, v, on_started, l, err, sizeof(err));
        struct request *back = rc < 0 ? api_later_take(l) : NULL; /* not called */
        if (back)
                http_reply_errno(back, rc, "%s", err);
}

static void on_stopped(struct env *v, void *data)
{
        struct action_ctx *c = data;
        struct engine *e = c->eng;
        if (!c->req) {
                free(c);
                return;
        }
        req_on_free(c->req, NULL, NULL);
        if (!engine_find(e, env_name(v))) {
                http_reply_error(c->req, 404, "not_found", "environment was removed");
        } else if (c->restart) {
                start_answered_later(c->req, e, v);
        } else {
                http_reply_json(c->req, 200, engine_env_json(e, v));
        }
        free(c);
}

void api_env_action(struct request *r, struct engine *e, struct env *v, const char *action)
{
        if (!strcmp(action, "pause") || !strcmp(action, "resume")) {
                int rc = engine_pause(e, v, action[0] == 'p');
                if (rc >= 0 && action[0] == 'p')
                        engine_idle_keep(e, v); /* paused by the idle timer: now by the caller */
                if (rc == -EBUSY)
                        http_reply_error(r, 409, "conflict", "%s is not running", env_name(v));
                else if (rc < 0)
                        http_reply_errno(r, rc, "%s: %s", action, strerror(-rc));
                else
                        http_reply_json(r, 200, engine_env_json(e, v));
                return;
        }
        /* Starting a stopped environment (also by restart) makes it count towards its
         * token's cpus and memory; a running one already does. */
        struct quota_ask q = {.env = v, .running = !env_running(v), .limits = *env_limits(v)};
        if ((!strcmp(action, "start") || !strcmp(action, "restart")) && !api_quota_ok(r, e, &q))
                return;
        if (!strcmp(action, "start")) {
                start_answered_later(r, e, v);
                return;
        }
        uint64_t timeout = 10;
        const char *t = req_query(r, "timeout");
        if (t && parse_duration_s(t, &timeout) < 0) {
                http_reply_error(r, 400, "invalid_argument", "timeout: invalid duration");
                return;
        }
        if (timeout > 3600)
                timeout = 3600;
        struct action_ctx *c = calloc(1, sizeof(*c));
        if (!c) {
                http_reply_errno(r, -ENOMEM, "out of memory");
                return;
        }
        *c = (struct action_ctx){.req = r, .eng = e, .restart = !strcmp(action, "restart")};
        if (!c->restart)
                engine_idle_keep(e, v); /* stopped by the idle timer: now by the caller */
        req_on_free(r, on_request_gone, c);
        http_defer(r);
        engine_stop(e, v, (unsigned)timeout, on_stopped, c);
}

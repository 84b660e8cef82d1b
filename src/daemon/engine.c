/* The engine's core: the list of environments and its accessors, the spec stored with each
 * environment (its JSON form and back), the variables every process of an environment starts
 * with, and engine_new/engine_free. The rest of the engine is split by concern (see
 * engine_internal.h); every change is written to the state database before it is
 * acknowledged, and the status column doubles as the journal for crash recovery:
 *   creating -> running <-> stopped -> (deleted)
 * A row found in "creating" or "deleting" at startup is a half-done operation and is rolled
 * back (everything it may have made is removed, engine_reconcile.c). */
#include "daemon/engine_internal.h"
#include "daemon/syncer.h"
#include "lib/parse.h"
#include "lib/util.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <strings.h>
#include <time.h>

/* ---- small accessors ------------------------------------------------------------------- */

void engine_set_destroy_hook(struct engine *e, void (*fn)(const char *name))
{
        e->destroyed = fn;
}

const char *env_name(const struct env *v)
{
        return v->row.name;
}

const char *env_state(const struct env *v)
{
        return v->starting ? "starting" : v->stopping ? "stopping" : v->row.status;
}

const char *env_owner(const struct env *v)
{
        return v->row.owner;
}

const struct cgroup_limits *env_limits(const struct env *v)
{
        return &v->limits;
}

struct tokens *engine_tokens(struct engine *e)
{
        return e->tokens;
}

bool env_running(const struct env *v)
{
        return v->pidfd >= 0;
}

bool env_ending(const struct env *v)
{
        return v->pidfd >= 0 && v->slot_gone_src;
}

bool env_deleting(const struct env *v)
{
        return v->deleting;
}

enum env_kind env_kind(const struct env *v)
{
        return v->kind;
}

struct loop *engine_loop(struct engine *e)
{
        return e->cfg.loop;
}

struct spawner *engine_spawner(struct engine *e)
{
        return e->cfg.spawner;
}

struct cgroup_manager *engine_cgroups(struct engine *e)
{
        return e->cfg.cgroups;
}

int env_pidfd(const struct env *v)
{
        return v->pidfd;
}

unsigned env_next_exec_id(struct env *v)
{
        return ++v->exec_seq;
}

struct exec_slot *env_exec_slot(const struct env *v)
{
        return v->exec_slot;
}

void env_counters_forget(struct env *v)
{
        v->counters_at_ms = 0;
}

void env_set_exec_slot(struct env *v, struct exec_slot *slot)
{
        v->exec_slot = slot;
}

/* FNV-1a of the name with its letters lowercased: names that differ only in case share a
 * bucket, so that engine_find_nocase looks in one bucket too. */
static size_t name_hash(const char *s)
{
        uint32_t h = FNV1A_INIT;
        for (; *s; s++) {
                h ^= (uint8_t)tolower((unsigned char)*s);
                h *= 16777619u;
        }
        return h;
}

struct env *engine_find(struct engine *e, const char *name)
{
        if (!e->n_buckets) { /* no table could be allocated: the slow way */
                for (struct env *v = e->envs; v; v = v->next)
                        if (strcmp(v->row.name, name) == 0)
                                return v;
                return NULL;
        }
        for (struct env *v = e->by_name[name_hash(name) & (e->n_buckets - 1)]; v; v = v->hnext)
                if (strcmp(v->row.name, name) == 0)
                        return v;
        return NULL;
}

struct env *engine_find_nocase(struct engine *e, const char *name)
{
        struct env *v = engine_find(e, name), *found = NULL;
        if (v)
                return v;
        v = e->n_buckets ? e->by_name[name_hash(name) & (e->n_buckets - 1)] : e->envs;
        for (; v; v = e->n_buckets ? v->hnext : v->next) {
                if (strcasecmp(v->row.name, name) != 0)
                        continue;
                if (found)
                        return NULL; /* ambiguous */
                found = v;
        }
        return found;
}

struct env *engine_next(struct engine *e, struct env *prev)
{
        return prev ? prev->next : e->envs;
}

bool env_has_label(const struct env *v, const char *key, const char *value)
{
        json_t *j = json_object_get(v->labels, key);
        return json_is_string(j) && strcmp(json_string_value(j), value) == 0;
}

/* cgroup directory of an environment: prefixed so that no name ("memory", "tasks", "cpu.x")
 * can collide with a cgroup interface file. */
const char *env_cgroup(const struct env *v)
{
        return v->cgname;
}

void cgroup_name_of(const char *name, char out[static CGROUP_NAME_SIZE])
{
        /* Names are at most NAME_LEN_MAX long: this always fits. */
        snprintf(out, CGROUP_NAME_SIZE, "env-%s", name);
}

int env_dir(const struct engine *e, const char *name, const char *sub, char *buf, size_t len)
{
        int n = buf_printf(buf, len, "%s/envs/%s%s%s", e->cfg.root, name, sub ? "/" : "",
                           sub ? sub : "");
        return n < 0 ? n : 0;
}

int image_rootfs(const struct engine *e, const char *image, char *buf, size_t len)
{
        int n = buf_printf(buf, len, "%s/images/%s/rootfs", e->cfg.root, image);
        return n < 0 ? n : 0;
}

int owner_note(const struct engine *e, const char *name, char *buf, size_t len)
{
        int n = buf_printf(buf, len, "%s\t%s", e->cfg.root, name);
        return n < 0 ? n : 0;
}

/* ---- spec (de)serialisation -------------------------------------------------------------- */

json_t *limit_json(uint64_t v)
{
        return v == CG_UNLIMITED ? json_null() : json_integer((json_int_t)v);
}

static uint64_t limit_of(json_t *j)
{
        return json_is_integer(j) ? (uint64_t)json_integer_value(j) : CG_UNLIMITED;
}

json_t *netpolicy_json(const struct netpolicy *p)
{
        json_t *allow = json_array(), *links = json_array();
        for (size_t i = 0; i < p->n_rules; i++) {
                char buf[300];
                netpolicy_rule_format(&p->rules[i], buf, sizeof(buf));
                json_array_append_new(allow, json_string(buf));
        }
        for (size_t i = 0; i < p->n_links; i++)
                json_array_append_new(links, json_string(p->links[i]));
        return json_pack("{s:s,s:o,s:o,s:{s:I,s:I}}", "mode", netpolicy_mode_name(p->mode),
                         "allow", allow, "links", links, "bandwidth", "egress",
                         (json_int_t)p->egress_bps, "ingress", (json_int_t)p->ingress_bps);
}

/* Stored policies were validated when they were accepted; bad entries are skipped. */
static void netpolicy_load(struct netpolicy *p, json_t *j)
{
        netpolicy_clear(p);
        if (netpolicy_mode_parse(json_string_value(json_object_get(j, "mode")), &p->mode) < 0)
                p->mode = NET_NONE;
        json_t *allow = json_object_get(j, "allow"), *links = json_object_get(j, "links");
        size_t n = json_array_size(allow), m = json_array_size(links);
        p->rules = calloc(n ? n : 1, sizeof(*p->rules));
        p->links = calloc(m ? m : 1, sizeof(*p->links));
        for (size_t i = 0; p->rules && i < n && p->n_rules < NETPOLICY_MAX_RULES; i++)
                if (netpolicy_rule_parse(json_string_value(json_array_get(allow, i)),
                                         &p->rules[p->n_rules]) >= 0)
                        p->n_rules++;
        for (size_t i = 0; p->links && i < m && p->n_links < NETPOLICY_MAX_LINKS; i++) {
                const char *l = json_string_value(json_array_get(links, i));
                if (l && strlen(l) <= NAME_LEN_MAX)
                        snprintf(p->links[p->n_links++], NAME_BUF_SIZE, "%s", l);
        }
        json_t *bw = json_object_get(j, "bandwidth");
        p->egress_bps = (uint64_t)json_integer_value(json_object_get(bw, "egress"));
        p->ingress_bps = (uint64_t)json_integer_value(json_object_get(bw, "ingress"));
}

char *spec_dump(const struct env *v)
{
        json_t *j = json_pack("{s:{s:o,s:o,s:o,s:o},s:O,s:O,s:I,s:I,s:o}", "limits",
                              "cpu_millis", limit_json(v->limits.cpu_millis), "memory",
                              limit_json(v->limits.memory_bytes), "swap",
                              limit_json(v->limits.swap_bytes), "pids",
                              limit_json(v->limits.pids), "env", v->vars, "labels", v->labels,
                              "ttl", (json_int_t)v->ttl_s, "tmp_size", (json_int_t)v->tmp_bytes,
                              "network", netpolicy_json(&v->net));
        if (j && v->disk_bytes)
                json_object_set_new(j, "disk", json_integer((json_int_t)v->disk_bytes));
        if (j && cgroup_limits_have_io(&v->limits))
                json_object_set_new(j, "io", env_io_json(&v->limits, false));
        if (j && v->idle_timeout_s)
                json_object_set_new(j, "idle", json_pack("{s:I,s:s,s:I}", "timeout",
                                                         (json_int_t)v->idle_timeout_s, "action",
                                                         v->idle_stop ? "stop" : "pause",
                                                         "idled_at", (json_int_t)v->idled_at));
        char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
        json_decref(j);
        return s;
}

static void spec_load(struct env *v)
{
        json_t *j = json_loads(v->row.spec ? v->row.spec : "{}", 0, NULL);
        json_t *l = json_object_get(j, "limits");
        v->limits.cpu_millis = limit_of(json_object_get(l, "cpu_millis"));
        v->limits.memory_bytes = limit_of(json_object_get(l, "memory"));
        v->limits.swap_bytes = limit_of(json_object_get(l, "swap"));
        v->limits.pids = limit_of(json_object_get(l, "pids"));
        v->vars = json_incref(json_object_get(j, "env"));
        v->labels = json_incref(json_object_get(j, "labels"));
        if (!v->vars)
                v->vars = json_object();
        if (!v->labels)
                v->labels = json_object();
        v->ttl_s = (uint64_t)json_integer_value(json_object_get(j, "ttl"));
        v->tmp_bytes = (uint64_t)json_integer_value(json_object_get(j, "tmp_size"));
        if (!v->tmp_bytes)
                v->tmp_bytes = DEFAULT_TMP_BYTES;
        v->disk_bytes = (uint64_t)json_integer_value(json_object_get(j, "disk"));
        json_t *io = json_object_get(j, "io");
        v->limits.io_read_bps = (uint64_t)json_integer_value(json_object_get(io, "read_bps"));
        v->limits.io_write_bps = (uint64_t)json_integer_value(json_object_get(io, "write_bps"));
        v->limits.io_read_iops = (uint64_t)json_integer_value(json_object_get(io, "read_iops"));
        v->limits.io_write_iops = (uint64_t)json_integer_value(json_object_get(io, "write_iops"));
        netpolicy_load(&v->net, json_object_get(j, "network"));
        json_t *idle = json_object_get(j, "idle");
        v->idle_timeout_s = (uint64_t)json_integer_value(json_object_get(idle, "timeout"));
        v->idle_stop = !strcmp(json_string_value(json_object_get(idle, "action")) ?: "", "stop");
        v->idled_at = json_integer_value(json_object_get(idle, "idled_at"));
        if (inet_pton(AF_INET, v->row.ip, &v->addr) != 1)
                v->addr.s_addr = 0;
        json_decref(j);
}

static int env_write_row(struct engine *e, struct env *v, bool synced)
{
        char *spec = spec_dump(v);
        if (!spec)
                return -ENOMEM;
        free(v->row.spec);
        v->row.spec = spec;
        return synced ? state_env_update(e->cfg.state, &v->row)
                      : state_env_update_unsynced(e->cfg.state, &v->row);
}

int env_save(struct engine *e, struct env *v)
{
        return env_write_row(e, v, true);
}

int env_save_unsynced(struct engine *e, struct env *v)
{
        return env_write_row(e, v, false);
}

void env_free(struct env *v)
{
        if (!v)
                return;
        syncer_cancel(v->deleting_sync);
        netpolicy_clear(&v->net);
        json_decref(v->vars);
        json_decref(v->labels);
        free(v->row.spec);
        free(v);
}

static size_t addr_hash(struct in_addr a)
{
        uint32_t h = ntohl(a.s_addr);
        return (size_t)(h * 2654435761u); /* consecutive addresses land in different buckets */
}

/* At least one bucket per environment (want): doubled, every environment rehashed, when they
 * would be outnumbered (amortized O(1) per append). by_name and by_addr grow together. */
static int buckets_grow(struct engine *e, size_t want)
{
        if (want <= e->n_buckets)
                return 0;
        size_t cap = e->n_buckets ? 2 * e->n_buckets : 64;
        struct env **b = calloc(cap, sizeof(*b));
        struct env **a = calloc(cap, sizeof(*a));
        struct env **f = calloc(cap, sizeof(*f));
        if (!b || !a || !f) {
                free(b);
                free(a);
                free(f);
                return -ENOMEM;
        }
        for (struct env *v = e->envs; v; v = v->next) {
                size_t i = name_hash(v->row.name) & (cap - 1);
                v->hnext = b[i];
                b[i] = v;
                if (v->addr.s_addr) {
                        i = addr_hash(v->addr) & (cap - 1);
                        v->anext = a[i];
                        a[i] = v;
                }
                if (v->ifname[0]) {
                        i = name_hash(v->ifname) & (cap - 1);
                        v->inext = f[i];
                        f[i] = v;
                }
        }
        free(e->by_name);
        free(e->by_addr);
        free(e->by_ifname);
        e->by_name = b;
        e->by_addr = a;
        e->by_ifname = f;
        e->n_buckets = cap;
        return 0;
}

static bool env_listed(const struct engine *e, const struct env *v)
{
        return v->prev || e->envs == v;
}

static void addr_unhash(struct engine *e, struct env *v)
{
        if (!e->n_buckets || !v->addr.s_addr)
                return;
        for (struct env **p = &e->by_addr[addr_hash(v->addr) & (e->n_buckets - 1)]; *p;
             p = &(*p)->anext)
                if (*p == v) {
                        *p = v->anext;
                        break;
                }
        v->anext = NULL;
}

void env_addr_set(struct engine *e, struct env *v)
{
        if (!v->addr.s_addr)
                return;
        /* Held from now on, listed or not: a create between its link and its listing must not
         * have its address handed to another (create_roll_back gives it back). */
        addr_mark(e, v->addr, true);
        if (!env_listed(e, v))
                return; /* env_append hashes it */
        if (!e->n_buckets)
                return;
        addr_unhash(e, v);
        size_t i = addr_hash(v->addr) & (e->n_buckets - 1);
        v->anext = e->by_addr[i];
        e->by_addr[i] = v;
}

struct env *engine_find_addr(struct engine *e, struct in_addr a)
{
        if (!e->n_buckets) {
                for (struct env *v = e->envs; v; v = v->next)
                        if (v->addr.s_addr == a.s_addr)
                                return v;
                return NULL;
        }
        for (struct env *v = e->by_addr[addr_hash(a) & (e->n_buckets - 1)]; v; v = v->anext)
                if (v->addr.s_addr == a.s_addr)
                        return v;
        return NULL;
}

static void ifname_hash_in(struct engine *e, struct env *v)
{
        if (!e->n_buckets || !v->ifname[0])
                return;
        size_t i = name_hash(v->ifname) & (e->n_buckets - 1);
        v->inext = e->by_ifname[i];
        e->by_ifname[i] = v;
}

static void ifname_unhash(struct engine *e, struct env *v)
{
        if (!e->n_buckets || !v->ifname[0])
                return;
        for (struct env **p = &e->by_ifname[name_hash(v->ifname) & (e->n_buckets - 1)]; *p;
             p = &(*p)->inext)
                if (*p == v) {
                        *p = v->inext;
                        break;
                }
        v->inext = NULL;
}

void env_ifname_set(struct engine *e, struct env *v, const char *ifname)
{
        if (env_listed(e, v))
                ifname_unhash(e, v);
        snprintf(v->ifname, sizeof(v->ifname), "%s", ifname);
        if (env_listed(e, v))
                ifname_hash_in(e, v);
}

struct env *engine_find_ifname(struct engine *e, const char *ifname)
{
        if (!e->n_buckets) {
                for (struct env *v = e->envs; v; v = v->next)
                        if (strcmp(v->ifname, ifname) == 0)
                                return v;
                return NULL;
        }
        for (struct env *v = e->by_ifname[name_hash(ifname) & (e->n_buckets - 1)]; v;
             v = v->inext)
                if (strcmp(v->ifname, ifname) == 0)
                        return v;
        return NULL;
}

bool engine_ifname_busy(struct engine *e, const struct env *v)
{
        if (!v->ifname[0])
                return false;
        struct env *o = e->n_buckets ? e->by_ifname[name_hash(v->ifname) & (e->n_buckets - 1)]
                                     : e->envs;
        for (; o; o = e->n_buckets ? o->inext : o->next)
                if (o != v && strcmp(o->ifname, v->ifname) == 0 &&
                    (o->pidfd >= 0 || o->starting) && o->net.mode != NET_NONE)
                        return true;
        return false;
}

void env_expiry_set(struct engine *e, struct env *v)
{
        if (v->row.expires_at && (!e->next_expiry || v->row.expires_at < e->next_expiry))
                e->next_expiry = v->row.expires_at;
}

static struct owner *owner_get(struct engine *e, const char *name, bool make)
{
        for (struct owner *o = e->owners; o; o = o->next)
                if (!strcmp(o->name, name))
                        return o;
        if (!make)
                return NULL;
        struct owner *o = calloc(1, sizeof(*o));
        if (!o)
                return NULL;
        snprintf(o->name, sizeof(o->name), "%s", name);
        o->next = e->owners;
        e->owners = o;
        return o;
}

static void owner_drop(struct engine *e, struct env *v)
{
        struct owner *o = v->owner;
        if (!o)
                return;
        *(v->oprev ? &v->oprev->onext : &o->envs) = v->onext;
        if (v->onext)
                v->onext->oprev = v->oprev;
        v->onext = v->oprev = NULL;
        v->owner = NULL;
        o->n_running -= v->pidfd >= 0;
        if (--o->n == 0) {
                for (struct owner **p = &e->owners; *p; p = &(*p)->next)
                        if (*p == o) {
                                *p = o->next;
                                break;
                        }
                free(o);
        }
}

static void owner_add(struct engine *e, struct env *v)
{
        struct owner *o = owner_get(e, v->row.owner, true);
        if (!o)
                return; /* out of memory: engine_next_owned falls back to the whole list */
        v->owner = o;
        v->oprev = NULL;
        v->onext = o->envs;
        if (o->envs)
                o->envs->oprev = v;
        o->envs = v;
        o->n++;
        o->n_running += v->pidfd >= 0;
}

void engine_counts(struct engine *e, const char *owner, size_t *ret_n, size_t *ret_running)
{
        if (!owner) {
                *ret_n = e->n_envs;
                *ret_running = e->n_running;
                return;
        }
        size_t n = 0, running = 0, listed = 0;
        for (struct owner *o = e->owners; o; o = o->next) {
                listed += o->n;
                if (!strcmp(o->name, owner)) {
                        n = o->n;
                        running = o->n_running;
                }
        }
        if (listed < e->n_envs) /* some have no owner's list (out of memory): the slow way */
                for (struct env *v = e->envs; v; v = v->next)
                        if (!v->owner && !strcmp(v->row.owner, owner)) {
                                n++;
                                running += v->pidfd >= 0;
                        }
        *ret_n = n;
        *ret_running = running;
}

void env_set_pidfd(struct engine *e, struct env *v, int fd)
{
        int delta = (fd >= 0) - (v->pidfd >= 0);
        v->pidfd = fd;
        v->counters_at_ms = 0; /* a new PID 1 (or none): its counters start again */
        if (!env_listed(e, v))
                return; /* env_append counts it */
        e->n_running += delta;
        if (v->owner)
                v->owner->n_running += delta;
}

/* ---- images in use ------------------------------------------------------------------------ */

static void image_use_add(struct engine *e, struct env *v)
{
        struct image_use *u = e->images;
        while (u && strcmp(u->name, v->row.image))
                u = u->next;
        if (!u) {
                if (!(u = calloc(1, sizeof(*u))))
                        return; /* engine_image_in_use counts the ones without the slow way */
                snprintf(u->name, sizeof(u->name), "%s", v->row.image);
                u->next = e->images;
                e->images = u;
        }
        u->n++;
        v->image_use = u;
}

static void image_use_drop(struct engine *e, struct env *v)
{
        struct image_use *u = v->image_use;
        v->image_use = NULL;
        if (!u || --u->n)
                return;
        for (struct image_use **p = &e->images; *p; p = &(*p)->next)
                if (*p == u) {
                        *p = u->next;
                        break;
                }
        free(u);
}

struct env *engine_next_owned(struct engine *e, const char *owner, struct env *prev)
{
        if (prev && !prev->owner) { /* the fallback below */
                for (struct env *v = prev->next; v; v = v->next)
                        if (!strcmp(v->row.owner, owner))
                                return v;
                return NULL;
        }
        if (prev)
                return prev->onext;
        struct owner *o = owner_get(e, owner, false);
        if (o)
                return o->envs;
        /* No list for it: either it owns nothing, or a list could not be made. */
        for (struct env *v = e->envs; v; v = v->next)
                if (!v->owner && !strcmp(v->row.owner, owner))
                        return v;
        return NULL;
}

void env_unlink(struct engine *e, struct env *v)
{
        engine_idle_forget(e, v);
        e->ports_gen++; /* its published ports go with its row */
        if (e->n_buckets)
                for (struct env **p = &e->by_name[name_hash(v->row.name) & (e->n_buckets - 1)];
                     *p; p = &(*p)->hnext)
                        if (*p == v) {
                                *p = v->hnext;
                                break;
                        }
        if (env_listed(e, v)) {
                addr_unhash(e, v);
                ifname_unhash(e, v);
                if (v->addr.s_addr && !engine_find_addr(e, v->addr))
                        addr_mark(e, v->addr, false);
                owner_drop(e, v);
                image_use_drop(e, v);
                e->n_running -= v->pidfd >= 0;
                e->n_linking -= v->net.n_links > 0;
                *(v->prev ? &v->prev->next : &e->envs) = v->next;
                *(v->next ? &v->next->prev : &e->envs_tail) = v->prev;
                e->n_envs--;
        }
        v->next = v->prev = v->hnext = v->anext = v->inext = NULL;
}

/* O(1): the list keeps its tail, the hash its buckets (grown before v is linked, so the
 * rehash does not see it; if growing fails the chains only get longer). */
void env_append(struct engine *e, struct env *v)
{
        e->ports_gen++; /* no cached port of an earlier namesake can be taken for v's */
        (void)buckets_grow(e, e->n_envs + 1);
        v->prev = e->envs_tail;
        v->next = NULL;
        *(e->envs_tail ? &e->envs_tail->next : &e->envs) = v;
        e->envs_tail = v;
        e->n_envs++;
        v->hnext = NULL;
        if (e->n_buckets) {
                size_t i = name_hash(v->row.name) & (e->n_buckets - 1);
                v->hnext = e->by_name[i];
                e->by_name[i] = v;
                if (v->addr.s_addr) {
                        i = addr_hash(v->addr) & (e->n_buckets - 1);
                        v->anext = e->by_addr[i];
                        e->by_addr[i] = v;
                }
                ifname_hash_in(e, v);
        }
        owner_add(e, v);
        image_use_add(e, v);
        e->n_running += v->pidfd >= 0;
        if (v->addr.s_addr)
                addr_mark(e, v->addr, true);
        env_expiry_set(e, v);
        e->n_linking += v->net.n_links > 0;
}

/* ---- environment variables -------------------------------------------------------------- */

static int envp_push(char ***arr, size_t *n, const char *k, const char *val)
{
        /* Replace an earlier definition of the same key. */
        size_t klen = strlen(k);
        char *s;
        if (asprintf(&s, "%s=%s", k, val) < 0)
                return -ENOMEM;
        for (size_t i = 0; i < *n; i++)
                if (strncmp((*arr)[i], k, klen) == 0 && (*arr)[i][klen] == '=') {
                        free((*arr)[i]);
                        (*arr)[i] = s;
                        return 0;
                }
        char **na = realloc(*arr, (*n + 2) * sizeof(char *));
        if (!na) {
                free(s);
                return -ENOMEM;
        }
        *arr = na;
        na[(*n)++] = s;
        na[*n] = NULL;
        return 0;
}

char **env_build_envp(const struct env *v, json_t *extra)
{
        char **arr = calloc(1, sizeof(char *));
        size_t n = 0;
        if (!arr)
                return NULL;
        envp_push(&arr, &n, "PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
        envp_push(&arr, &n, "HOSTNAME", v->row.name);
        envp_push(&arr, &n, "container", "paddock");
        json_t *objs[] = {v->vars, extra};
        for (size_t i = 0; i < ELEMENTSOF(objs); i++) {
                const char *k;
                json_t *val;
                json_object_foreach(objs[i], k, val)
                        if (json_is_string(val))
                                envp_push(&arr, &n, k, json_string_value(val));
        }
        return arr;
}

void envp_free(char **arr)
{
        for (size_t i = 0; arr && arr[i]; i++)
                free(arr[i]);
        free(arr);
}

/* ---- the engine: its environments loaded from the state database ---------------------------- */

int engine_new(const struct engine_config *cfg, struct engine **ret)
{
        struct engine *e = calloc(1, sizeof(*e));
        if (!e)
                return -ENOMEM;
        e->cfg = *cfg;
        e->pool_commit_fd = -EBADF;
        spare_init(e); /* its process a copy of the daemon while it is small */
        struct env_row *rows;
        size_t n;
        int r = state_env_list(cfg->state, &rows, &n);
        if (r < 0) {
                spare_free(e);
                free(e);
                return r;
        }
        for (size_t i = 0; i < n; i++) {
                struct env *v = calloc(1, sizeof(*v));
                if (!v) {
                        state_env_rows_free(rows, n);
                        engine_free(e);
                        return -ENOMEM;
                }
                v->eng = e;
                v->pidfd = -EBADF;
                v->row = rows[i];
                rows[i].spec = NULL; /* moved */
                v->kind = strcmp(v->row.kind, "computer") == 0 ? KIND_COMPUTER : KIND_SANDBOX;
                cgroup_name_of(v->row.name, v->cgname);
                spec_load(v);
                env_append(e, v);
        }
        state_env_rows_free(rows, n);
        if ((r = tokens_open(cfg->state, cfg->loop, &e->tokens)) < 0) {
                engine_free(e);
                return r;
        }
        *ret = e;
        return 0;
}

void engine_free(struct engine *e)
{
        if (!e)
                return;
        engine_creating_abandon(e);
        engine_starting_abandon(e);
        engine_autostart_free(e);
        loop_cancel_timer(e->sweep);
        engine_idle_free(e);
        engine_image_helpers_release(e);
        tokens_free(e->tokens);
        spare_free(e);
        closep(&e->pool_commit_fd); /* a commit it still waits for goes with the sync process */
        free(e->by_name);
        free(e->by_addr);
        free(e->by_ifname);
        while (e->owners) {
                struct owner *o = e->owners;
                e->owners = o->next;
                free(o);
        }
        while (e->images) {
                struct image_use *u = e->images;
                e->images = u->next;
                free(u);
        }
        free(e->addr_used);
        free(e->ports);
        while (e->envs) {
                struct env *v = e->envs;
                e->envs = v->next;
                loop_remove(v->exit_src);
                loop_cancel_timer(v->kill_timer);
                slot_watch_end(v);
                if (v->pidfd >= 0)
                        close(v->pidfd); /* environments keep running without us */
                struct waiter *w = v->waiters;
                while (w) {
                        struct waiter *next = w->next;
                        free(w);
                        w = next;
                }
                env_free(v);
        }
        free(e);
}


/* ---- what images.c needs ----------------------------------------------------------------- */

const char *engine_root(struct engine *e)
{
        return e->cfg.root;
}

const char *engine_uid_registry(struct engine *e)
{
        return e->cfg.uid_registry;
}

const char *engine_apt_dir(struct engine *e)
{
        return e->cfg.apt_dir ? e->cfg.apt_dir : "/etc/apt";
}

struct state *engine_state(struct engine *e)
{
        return e->cfg.state;
}

bool engine_image_in_use(struct engine *e, const char *name, int *ret_count)
{
        int n = 0;
        for (struct image_use *u = e->images; u; u = u->next)
                if (!strcmp(u->name, name))
                        n = (int)u->n;
        size_t counted = 0;
        for (struct image_use *u = e->images; u; u = u->next)
                counted += u->n;
        if (counted < e->n_envs) /* some could not be counted (out of memory): the slow way */
                for (struct env *v = e->envs; v; v = v->next)
                        n += !v->image_use && strcmp(v->row.image, name) == 0;
        for (struct env *v = engine_next_creating(e, NULL); v; v = engine_next_creating(e, v))
                n += strcmp(v->row.image, name) == 0; /* its PID 1 may be mounting it now */
        *ret_count = n;
        return n > 0;
}

/* ---- what engine_storage.c needs ------------------------------------------------------------ */

struct storage *engine_storage(struct engine *e)
{
        return e->cfg.storage;
}

int engine_env_dir(const struct engine *e, const char *name, char *buf, size_t len)
{
        return env_dir(e, name, NULL, buf, len);
}

uint64_t env_disk_bytes(const struct env *v)
{
        return v->disk_bytes;
}

uint32_t env_uid_base(const struct env *v)
{
        return v->row.uid_base;
}

void engine_env_spec(struct engine *e, const struct env *v, struct env_spec *ret)
{
        struct env_spec s = {.kind = v->kind,
                             .limits = v->limits,
                             .ttl_s = v->ttl_s,
                             .tmp_bytes = v->tmp_bytes,
                             .disk_bytes = v->disk_bytes,
                             .autostart = v->row.autostart,
                             .env = v->vars,
                             .labels = v->labels,
                             .idle_timeout_s = v->idle_timeout_s,
                             .idle_action = v->idle_stop ? IDLE_STOP : IDLE_PAUSE};
        snprintf(s.image, sizeof(s.image), "%s", v->row.image);
        json_t *net = netpolicy_json(&v->net);
        netpolicy_load(&s.net, net);
        json_decref(net);
        *ret = s;
}

void engine_mark_thawed(struct engine *e, struct env *v)
{
        if (strcmp(v->row.status, "paused") != 0)
                return;
        snprintf(v->row.status, sizeof(v->row.status), "running");
        env_save(e, v);
}

/* ---- passes over every environment, a slice per turn of the loop -------------------------- */

/* Short: a client's exec waits for up to a slice at each of its turns (request, answer) while
 * another lists thousands; at 2 ms its median was twice what it is at 0.5 ms (bench/README.md). */
#define PASS_SLICE_US 500

struct engine_pass {
        struct engine *e;
        engine_each_fn each;
        engine_pass_done_fn done;
        void *data;
        char (*names)[NAME_BUF_SIZE]; /* who was there when it started, in creation order */
        size_t n, next;
        struct loop_timer *timer;
};

static uint64_t mono_us(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* One slice; true when the pass is over. At least one environment per slice. */
static bool pass_slice(struct engine_pass *p)
{
        uint64_t end = mono_us() + PASS_SLICE_US;
        do {
                if (p->next >= p->n)
                        break;
                struct env *v = engine_find(p->e, p->names[p->next++]);
                if (v)
                        p->each(p->e, v, p->data);
        } while (mono_us() < end);
        return p->next >= p->n;
}

static void pass_free(struct engine_pass *p)
{
        loop_cancel_timer(p->timer);
        free(p->names);
        free(p);
}

static void pass_turn(struct loop_timer *t, void *data)
{
        (void)t;
        struct engine_pass *p = data;
        p->timer = NULL;
        if (!pass_slice(p)) {
                p->timer = loop_add_next_turn(p->e->cfg.loop, pass_turn, p);
                if (p->timer)
                        return;
                while (!pass_slice(p)) /* no timer: finish now rather than never */
                        ;
        }
        engine_pass_done_fn done = p->done;
        void *d = p->data;
        struct engine *e = p->e;
        pass_free(p);
        done(e, d);
}

/* The names a pass visits, in creation order: every environment's, or one owner's from its
 * own list (newest first there, so filled from the end) when every environment is on an
 * owner's list; a token's listing then costs what it owns, not what everyone owns. */
static size_t pass_names(struct engine *e, const char *owner, char (*names)[NAME_BUF_SIZE],
                         size_t cap)
{
        size_t n = 0, listed = 0;
        struct owner *mine = NULL;
        for (struct owner *o = owner ? e->owners : NULL; o; o = o->next) {
                listed += o->n;
                if (!strcmp(o->name, owner))
                        mine = o;
        }
        if (owner && listed == e->n_envs) {
                size_t k = mine && mine->n <= cap ? mine->n : 0;
                for (struct env *v = mine ? mine->envs : NULL; v && n < k; v = v->onext)
                        memcpy(names[k - 1 - n++], v->row.name, NAME_BUF_SIZE);
                return n;
        }
        for (struct env *v = e->envs; v && n < cap; v = v->next)
                if (!owner || !strcmp(v->row.owner, owner))
                        memcpy(names[n++], v->row.name, NAME_BUF_SIZE);
        return n;
}

int engine_pass_start(struct engine *e, const char *owner, engine_each_fn each,
                      engine_pass_done_fn done, void *data, struct engine_pass **ret)
{
        struct engine_pass *p = calloc(1, sizeof(*p));
        if (!p)
                return -ENOMEM;
        *p = (struct engine_pass){.e = e, .each = each, .done = done, .data = data};
        size_t n = e->n_envs;
        if (owner)
                engine_counts(e, owner, &n, &(size_t){0});
        p->names = calloc(n ? n : 1, sizeof(*p->names));
        if (!p->names) {
                free(p);
                return -ENOMEM;
        }
        p->n = pass_names(e, owner, p->names, n);
        if (pass_slice(p)) { /* small: all of it now, no turn of the loop in between */
                pass_free(p);
                *ret = NULL;
                done(e, data);
                return 0;
        }
        /* Each slice in a turn of its own: other clients are answered in between. */
        p->timer = loop_add_next_turn(e->cfg.loop, pass_turn, p);
        if (!p->timer) {
                pass_free(p);
                return -ENOMEM;
        }
        *ret = p;
        return 0;
}

void engine_pass_cancel(struct engine_pass *p)
{
        if (p)
                pass_free(p);
}

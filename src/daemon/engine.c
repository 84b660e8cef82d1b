/* Environment lifecycle. Every change is written to the state database before it is
 * acknowledged; the status column doubles as the journal for crash recovery:
 *   creating -> running <-> stopped -> (deleted)
 * A row found in "creating" or "deleting" at startup is a half-done operation and is rolled
 * back (everything it may have made is removed). */
#include "daemon/engine.h"
#include "daemon/log.h"
#include "lib/confine.h"
#include "lib/parse.h"
#include "lib/spawn.h"
#include "lib/userns.h"
#include "lib/util.h"

#include <dirent.h>
#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <time.h>
#include <sys/wait.h>

struct waiter {
        env_done_fn fn;
        void *data;
        struct waiter *next;
};

struct env {
        struct engine *eng;
        struct env_row row;
        enum env_kind kind;
        struct cgroup_limits limits;
        uint64_t ttl_s, tmp_bytes;
        json_t *vars;   /* environment variables */
        json_t *labels;
        int pidfd;
        bool is_child; /* we are its parent and must reap it */
        struct loop_source *exit_src;
        bool stopping;
        struct loop_timer *kill_timer;
        struct waiter *waiters;
        unsigned exec_seq;
        int active_execs;
        struct env *next;
};

struct engine {
        struct engine_config cfg;
        struct env *envs;
        size_t n_envs;
        struct loop_timer *sweep;
};

static void env_on_exit(struct loop_source *s, int fd, uint32_t events, void *data);

/* ---- small accessors ------------------------------------------------------------------- */

const char *env_name(const struct env *v)
{
        return v->row.name;
}

bool env_running(const struct env *v)
{
        return v->pidfd >= 0;
}

enum env_kind env_kind(const struct env *v)
{
        return v->kind;
}

struct loop *engine_loop(struct engine *e)
{
        return e->cfg.loop;
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

void env_exec_ref(struct env *v, int delta)
{
        v->active_execs += delta;
}

struct env *engine_find(struct engine *e, const char *name)
{
        for (struct env *v = e->envs; v; v = v->next)
                if (strcmp(v->row.name, name) == 0)
                        return v;
        return NULL;
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

static const char *kind_name(enum env_kind k)
{
        return k == KIND_COMPUTER ? "computer" : "sandbox";
}

static int env_dir(const struct engine *e, const char *name, const char *sub, char *buf, size_t len)
{
        int n = snprintf(buf, len, "%s/envs/%s%s%s", e->cfg.root, name, sub ? "/" : "", sub ? sub : "");
        return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

static void owner_note(const struct engine *e, const char *name, char *buf, size_t len)
{
        snprintf(buf, len, "%s\t%s", e->cfg.root, name);
}

/* ---- spec (de)serialisation -------------------------------------------------------------- */

static json_t *limit_json(uint64_t v)
{
        return v == CG_UNLIMITED ? json_null() : json_integer((json_int_t)v);
}

static uint64_t limit_of(json_t *j)
{
        return json_is_integer(j) ? (uint64_t)json_integer_value(j) : CG_UNLIMITED;
}

static char *spec_dump(const struct env *v)
{
        json_t *j = json_pack("{s:{s:o,s:o,s:o,s:o},s:O,s:O,s:I,s:I,s:{s:s}}", "limits",
                              "cpu_millis", limit_json(v->limits.cpu_millis), "memory",
                              limit_json(v->limits.memory_bytes), "swap",
                              limit_json(v->limits.swap_bytes), "pids",
                              limit_json(v->limits.pids), "env", v->vars, "labels", v->labels,
                              "ttl", (json_int_t)v->ttl_s, "tmp_size", (json_int_t)v->tmp_bytes,
                              "network", "mode", "none");
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
        json_decref(j);
}

static int env_save(struct engine *e, struct env *v)
{
        char *spec = spec_dump(v);
        if (!spec)
                return -ENOMEM;
        free(v->row.spec);
        v->row.spec = spec;
        return state_env_update(e->cfg.state, &v->row);
}

static void env_free(struct env *v)
{
        if (!v)
                return;
        json_decref(v->vars);
        json_decref(v->labels);
        free(v->row.spec);
        free(v);
}

static void env_unlink(struct engine *e, struct env *v)
{
        for (struct env **p = &e->envs; *p; p = &(*p)->next)
                if (*p == v) {
                        *p = v->next;
                        e->n_envs--;
                        return;
                }
}

static void env_append(struct engine *e, struct env *v)
{
        struct env **p = &e->envs;
        while (*p)
                p = &(*p)->next;
        v->next = NULL;
        *p = v;
        e->n_envs++;
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

static void envp_free(char **arr)
{
        for (size_t i = 0; arr && arr[i]; i++)
                free(arr[i]);
        free(arr);
}

/* ---- start / exit ------------------------------------------------------------------------ */

static int env_watch(struct engine *e, struct env *v)
{
        return loop_add_fd(e->cfg.loop, v->pidfd, EPOLLIN, env_on_exit, v, &v->exit_src);
}

static int env_spawn_now(struct engine *e, struct env *v, char *err, size_t errlen)
{
        char dir[4096], image[4096];
        int r = env_dir(e, v->row.name, NULL, dir, sizeof(dir));
        if (r < 0)
                return r;
        snprintf(image, sizeof(image), "%s/images/%s/rootfs", e->cfg.root, v->row.image);
        if (access(image, F_OK) < 0) {
                snprintf(err, errlen, "image %s is missing", v->row.image);
                return -ENOEXEC;
        }
        r = cgroup_env_create(e->cfg.cgroups, v->row.name, &v->limits);
        if (r < 0) {
                snprintf(err, errlen, "cgroup: %s", strerror(-r));
                return r;
        }
        _cleanup_close_ int userns = -EBADF;
        r = userns_create(v->row.uid_base, UID_RANGE_SIZE, &userns);
        if (r < 0) {
                snprintf(err, errlen, "user namespace: %s", strerror(-r));
                cgroup_env_destroy(e->cfg.cgroups, v->row.name, NULL);
                return r;
        }
        char **envp = env_build_envp(v, NULL);
        struct spawn_config sc = {
                .hostname = v->row.name,
                .profile = v->kind == KIND_SANDBOX ? PROFILE_SANDBOX : PROFILE_COMPUTER,
                .rootfs = {.image_rootfs = image,
                           .env_dir = dir,
                           .writable = v->kind == KIND_COMPUTER,
                           .userns_fd = userns,
                           .uid_base = v->row.uid_base,
                           .tmp_bytes = v->tmp_bytes,
                           .shm_bytes = DEFAULT_SHM_BYTES},
                .cgroups = e->cfg.cgroups,
                .cgroup_name = v->row.name,
                .init_fd = e->cfg.init_fd,
                .init_envp = envp,
        };
        struct spawn_result res;
        r = env_spawn(&sc, &res, err, errlen);
        envp_free(envp);
        if (r < 0) {
                cgroup_env_destroy(e->cfg.cgroups, v->row.name, NULL);
                return r;
        }
        v->pidfd = res.pidfd;
        v->is_child = true;
        v->row.pid = res.pid;
        v->row.pid_start = res.start_time;
        snprintf(v->row.status, sizeof(v->row.status), "running");
        r = env_watch(e, v);
        if (r >= 0)
                r = env_save(e, v);
        if (r < 0) {
                snprintf(err, errlen, "record start: %s", strerror(-r));
                sys_pidfd_send_signal(v->pidfd, SIGKILL, 0);
        }
        return r;
}

static void notify_waiters(struct env *v)
{
        struct waiter *w = v->waiters;
        v->waiters = NULL;
        while (w) {
                struct waiter *next = w->next;
                w->fn(v, w->data);
                free(w);
                w = next;
        }
}

/* PID 1 is gone: collect it, clear the cgroup, record "stopped". */
static void env_mark_stopped(struct engine *e, struct env *v)
{
        if (v->pidfd >= 0) {
                if (v->is_child) {
                        siginfo_t si;
                        waitid(P_PIDFD, (id_t)v->pidfd, &si, WEXITED | WNOHANG);
                }
                loop_remove(v->exit_src);
                v->exit_src = NULL;
                close(v->pidfd);
                v->pidfd = -EBADF;
        }
        loop_cancel_timer(v->kill_timer);
        v->kill_timer = NULL;
        v->stopping = false;
        int r = cgroup_env_destroy(e->cfg.cgroups, v->row.name, NULL);
        if (r < 0 && r != -ENOENT)
                log_warn("%s: removing cgroups: %s", v->row.name, strerror(-r));
        v->row.pid = 0;
        v->row.pid_start = 0;
        snprintf(v->row.status, sizeof(v->row.status), "stopped");
        r = env_save(e, v);
        if (r < 0)
                log_error("%s: recording stop: %s", v->row.name, strerror(-r));
}

static void env_on_exit(struct loop_source *s, int fd, uint32_t events, void *data)
{
        struct env *v = data;
        log_info("%s: stopped", v->row.name);
        env_mark_stopped(v->eng, v);
        notify_waiters(v);
}

/* Kill everything and wait (bounded) for PID 1 to be gone. */
static void env_kill_sync(struct engine *e, struct env *v)
{
        if (v->pidfd < 0)
                return;
        cgroup_env_kill(e->cfg.cgroups, v->row.name, NULL);
        sys_pidfd_send_signal(v->pidfd, SIGKILL, 0);
        struct pollfd p = {.fd = v->pidfd, .events = POLLIN};
        poll(&p, 1, 5000);
        env_mark_stopped(e, v);
        notify_waiters(v);
}

static void on_kill_timer(struct loop_timer *t, void *data)
{
        struct env *v = data;
        v->kill_timer = NULL;
        log_info("%s: did not stop in time, killing", v->row.name);
        cgroup_env_kill(v->eng->cfg.cgroups, v->row.name, NULL);
        sys_pidfd_send_signal(v->pidfd, SIGKILL, 0);
}

void engine_stop(struct engine *e, struct env *v, unsigned timeout_s, env_done_fn done, void *data)
{
        if (v->pidfd < 0) {
                if (done)
                        done(v, data);
                return;
        }
        if (done) {
                struct waiter *w = calloc(1, sizeof(*w));
                if (w) {
                        *w = (struct waiter){.fn = done, .data = data, .next = v->waiters};
                        v->waiters = w;
                }
        }
        if (v->stopping)
                return;
        v->stopping = true;
        log_info("%s: stopping", v->row.name);
        if (timeout_s == 0 || sys_pidfd_send_signal(v->pidfd, SIGTERM, 0) < 0)
                on_kill_timer(NULL, v);
        else
                v->kill_timer = loop_add_timer(e->cfg.loop, (uint64_t)timeout_s * 1000,
                                               on_kill_timer, v);
}

int engine_start(struct engine *e, struct env *v, char *err, size_t errlen)
{
        if (v->pidfd >= 0) {
                snprintf(err, errlen, "%s is already running", v->row.name);
                return -EALREADY;
        }
        int r = env_spawn_now(e, v, err, errlen);
        if (r >= 0)
                log_info("%s: started (pid %lld)", v->row.name, (long long)v->row.pid);
        return r;
}

/* ---- create / destroy ------------------------------------------------------------------- */

/* Remove everything an environment may own on the host; safe to repeat. */
static void env_remove_artifacts(struct engine *e, const char *name, uint32_t uid_base)
{
        char dir[4096];
        cgroup_env_destroy(e->cfg.cgroups, name, NULL);
        if (env_dir(e, name, NULL, dir, sizeof(dir)) >= 0) {
                int r = rm_rf_at(AT_FDCWD, dir);
                if (r < 0)
                        log_warn("%s: removing %s: %s", name, dir, strerror(-r));
        }
        if (uid_base)
                idrange_release(e->cfg.uid_registry, uid_base);
}

static int make_env_dirs(struct engine *e, struct env *v)
{
        char dir[4096], sub[4096];
        int r = env_dir(e, v->row.name, NULL, dir, sizeof(dir));
        if (r < 0)
                return r;
        if (mkdir(dir, 0700) < 0)
                return -errno;
        if ((r = env_dir(e, v->row.name, "rootfs", sub, sizeof(sub))) < 0)
                return r;
        if (mkdir(sub, 0755) < 0)
                return -errno;
        if (v->kind == KIND_SANDBOX)
                return 0;
        const char *subs[] = {"lower", "upper", "work"};
        for (size_t i = 0; i < ELEMENTSOF(subs); i++) {
                if ((r = env_dir(e, v->row.name, subs[i], sub, sizeof(sub))) < 0)
                        return r;
                if (mkdir(sub, i == 1 ? 0755 : 0700) < 0)
                        return -errno;
        }
        /* The upper layer's root is the environment's "/": owned by its root user. */
        if ((r = env_dir(e, v->row.name, "upper", sub, sizeof(sub))) < 0)
                return r;
        if (chown(sub, v->row.uid_base, v->row.uid_base) < 0)
                return -errno;
        return 0;
}

int engine_create(struct engine *e, const struct env_spec *spec, struct env **ret, char *err,
                  size_t errlen)
{
        if (engine_find(e, spec->name)) {
                snprintf(err, errlen, "an environment named %s already exists", spec->name);
                return -EEXIST;
        }
        if (e->n_envs >= MAX_ENVS) {
                snprintf(err, errlen, "too many environments (limit %d)", MAX_ENVS);
                return -EAGAIN;
        }
        if (!engine_image_exists(e, spec->image)) {
                snprintf(err, errlen, "image %s not found (see `paddock image ls`)", spec->image);
                return -ENOEXEC;
        }
        struct env *v = calloc(1, sizeof(*v));
        if (!v)
                return -ENOMEM;
        v->eng = e;
        v->pidfd = -EBADF;
        v->kind = spec->kind;
        v->limits = spec->limits;
        v->ttl_s = spec->ttl_s;
        v->tmp_bytes = spec->tmp_bytes ? spec->tmp_bytes : DEFAULT_TMP_BYTES;
        v->vars = spec->env ? json_deep_copy(spec->env) : json_object();
        v->labels = spec->labels ? json_deep_copy(spec->labels) : json_object();
        snprintf(v->row.name, sizeof(v->row.name), "%s", spec->name);
        snprintf(v->row.kind, sizeof(v->row.kind), "%s", kind_name(spec->kind));
        snprintf(v->row.image, sizeof(v->row.image), "%s", spec->image);
        snprintf(v->row.status, sizeof(v->row.status), "creating");
        v->row.created_at = wall_s();
        v->row.expires_at = spec->ttl_s ? v->row.created_at + (int64_t)spec->ttl_s : 0;
        v->row.autostart = spec->autostart;
        v->row.spec = spec_dump(v);

        char owner[4200];
        owner_note(e, spec->name, owner, sizeof(owner));
        int r = idrange_claim(e->cfg.uid_registry, owner, &v->row.uid_base);
        if (r < 0) {
                snprintf(err, errlen, "no free id range: %s", strerror(-r));
                env_free(v);
                return r;
        }
        /* Journal first: a crash from here on is rolled back at the next start. */
        r = state_env_insert(e->cfg.state, &v->row);
        if (r < 0) {
                snprintf(err, errlen, "record: %s", strerror(-r));
                idrange_release(e->cfg.uid_registry, v->row.uid_base);
                env_free(v);
                return r;
        }
        r = make_env_dirs(e, v);
        if (r < 0)
                snprintf(err, errlen, "environment directory: %s", strerror(-r));
        else
                r = env_spawn_now(e, v, err, errlen);
        if (r < 0) {
                env_remove_artifacts(e, v->row.name, v->row.uid_base);
                state_env_delete(e->cfg.state, v->row.name);
                env_free(v);
                return r;
        }
        env_append(e, v);
        log_info("%s: created %s from image %s (ids %u..%u)", v->row.name, v->row.kind,
                 v->row.image, v->row.uid_base, v->row.uid_base + UID_RANGE_SIZE - 1);
        *ret = v;
        return 0;
}

int engine_destroy(struct engine *e, struct env *v, bool force)
{
        if (v->pidfd >= 0) {
                if (!force)
                        return -EBUSY;
                env_kill_sync(e, v);
        }
        snprintf(v->row.status, sizeof(v->row.status), "deleting");
        env_save(e, v);
        env_remove_artifacts(e, v->row.name, v->row.uid_base);
        int r = state_env_delete(e->cfg.state, v->row.name);
        if (r < 0)
                log_error("%s: deleting record: %s", v->row.name, strerror(-r));
        log_info("%s: destroyed", v->row.name);
        env_unlink(e, v);
        notify_waiters(v);
        env_free(v);
        return 0;
}

int engine_patch(struct engine *e, struct env *v, const struct env_patch *p, char *err,
                 size_t errlen)
{
        struct cgroup_limits l = v->limits;
        if (p->has_cpus)
                l.cpu_millis = p->cpus;
        if (p->has_memory)
                l.memory_bytes = p->memory;
        if (p->has_swap)
                l.swap_bytes = p->swap;
        if (p->has_pids)
                l.pids = p->pids;
        if (v->pidfd >= 0) {
                int r = cgroup_env_set_limits(e->cfg.cgroups, v->row.name, &l);
                if (r < 0) {
                        snprintf(err, errlen, "applying limits: %s", strerror(-r));
                        return r;
                }
        }
        v->limits = l;
        if (p->has_ttl) {
                v->ttl_s = p->ttl_s;
                v->row.expires_at = p->ttl_s ? wall_s() + (int64_t)p->ttl_s : 0;
        }
        if (p->has_autostart)
                v->row.autostart = p->autostart;
        return env_save(e, v);
}

/* ---- JSON views ---------------------------------------------------------------------------- */

static json_t *time_json(int64_t t)
{
        if (!t)
                return json_null();
        char buf[32];
        struct tm tm;
        time_t tt = (time_t)t;
        gmtime_r(&tt, &tm);
        strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
        return json_string(buf);
}

json_t *engine_env_json(struct engine *e, struct env *v)
{
        json_t *cpus = v->limits.cpu_millis == CG_UNLIMITED
                               ? json_null()
                               : json_real((double)v->limits.cpu_millis / 1000.0);
        json_t *limits = json_pack("{s:o,s:o,s:o,s:o}", "cpus", cpus, "memory",
                                   limit_json(v->limits.memory_bytes), "swap",
                                   limit_json(v->limits.swap_bytes), "pids",
                                   limit_json(v->limits.pids));
        json_t *usage = json_null();
        json_int_t ooms = 0;
        if (v->pidfd >= 0) {
                struct cgroup_stats st;
                if (cgroup_env_stats(e->cfg.cgroups, v->row.name, &st) >= 0) {
                        usage = json_pack("{s:I,s:I,s:I,s:I,s:I}", "memory",
                                          (json_int_t)st.memory_current, "memory_peak",
                                          (json_int_t)st.memory_peak, "pids",
                                          (json_int_t)st.pids_current, "cpu_usage_us",
                                          (json_int_t)st.cpu_usage_us, "oom_kills",
                                          (json_int_t)st.oom_kills);
                        ooms = (json_int_t)st.oom_kills;
                }
        }
        const char *state = v->stopping ? "stopping" : v->row.status;
        return json_pack("{s:s,s:s,s:s,s:s,s:o,s:o,s:o,s:o,s:o,s:I,s:b,s:O,s:O,s:{s:s},s:I,s:I,"
                         "s:o,s:I}",
                         "name", v->row.name, "kind", v->row.kind, "image", v->row.image, "state",
                         state, "pid", v->row.pid ? json_integer(v->row.pid) : json_null(),
                         "created_at", time_json(v->row.created_at), "expires_at",
                         time_json(v->row.expires_at), "limits", limits, "usage", usage,
                         "oom_kills", ooms, "autostart", v->row.autostart, "labels", v->labels,
                         "env", v->vars, "network", "mode", "none", "uid_base",
                         (json_int_t)v->row.uid_base, "uid_count", (json_int_t)UID_RANGE_SIZE,
                         "ttl", v->ttl_s ? json_integer((json_int_t)v->ttl_s) : json_null(),
                         "tmp_size", (json_int_t)v->tmp_bytes);
}

json_t *engine_system_json(struct engine *e)
{
        size_t running = 0;
        for (struct env *v = e->envs; v; v = v->next)
                running += v->pidfd >= 0;
        return json_pack("{s:s,s:s,s:i,s:b,s:s,s:s,s:I,s:I,s:s}", "version", e->cfg.version,
                         "cgroup_mode",
                         cgroup_mode_name(cgroup_manager_mode(e->cfg.cgroups)), "landlock_abi",
                         landlock_abi(), "idmapped_mounts", 1, "storage_driver", "overlay",
                         "root", e->cfg.root, "envs", (json_int_t)e->n_envs, "running",
                         (json_int_t)running, "network", "none");
}

/* ---- startup, reconcile, TTL ----------------------------------------------------------------- */

int engine_new(const struct engine_config *cfg, struct engine **ret)
{
        struct engine *e = calloc(1, sizeof(*e));
        if (!e)
                return -ENOMEM;
        e->cfg = *cfg;
        struct env_row *rows;
        size_t n;
        int r = state_env_list(cfg->state, &rows, &n);
        if (r < 0) {
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
                spec_load(v);
                env_append(e, v);
        }
        state_env_rows_free(rows, n);
        *ret = e;
        return 0;
}

void engine_free(struct engine *e)
{
        if (!e)
                return;
        loop_cancel_timer(e->sweep);
        while (e->envs) {
                struct env *v = e->envs;
                e->envs = v->next;
                loop_remove(v->exit_src);
                loop_cancel_timer(v->kill_timer);
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

/* Re-find a running PID 1 by pid + start time; a recycled pid never matches. */
static int env_adopt(struct engine *e, struct env *v)
{
        uint64_t st;
        if (v->row.pid <= 0 || proc_start_time((pid_t)v->row.pid, &st) < 0 || st != v->row.pid_start)
                return -ESRCH;
        int fd = sys_pidfd_open((pid_t)v->row.pid, 0);
        if (fd < 0)
                return fd;
        /* Check again now that the pidfd pins the process. */
        if (proc_start_time((pid_t)v->row.pid, &st) < 0 || st != v->row.pid_start) {
                close(fd);
                return -ESRCH;
        }
        v->pidfd = fd;
        v->is_child = false;
        int r = env_watch(e, v);
        if (r < 0) {
                close(fd);
                v->pidfd = -EBADF;
        }
        return r;
}

static void sweep_expired(struct loop_timer *t, void *data)
{
        struct engine *e = data;
        int64_t now = wall_s();
        for (struct env *v = e->envs, *next; v; v = next) {
                next = v->next;
                if (v->row.expires_at && v->row.expires_at <= now && v->active_execs == 0) {
                        log_info("%s: time to live expired", v->row.name);
                        engine_destroy(e, v, true);
                }
        }
        e->sweep = loop_add_timer(e->cfg.loop, 1000, sweep_expired, e);
}

static bool known_env(struct engine *e, const char *name)
{
        return engine_find(e, name) != NULL;
}

/* Leftovers of environments that have no record: cgroups, directories, id claims. */
static void remove_orphans(struct engine *e)
{
        char **names = NULL;
        size_t n = 0;
        if (cgroup_list_envs(e->cfg.cgroups, &names, &n) >= 0) {
                for (size_t i = 0; i < n; i++) {
                        if (!known_env(e, names[i])) {
                                log_info("removing orphaned cgroup %s", names[i]);
                                cgroup_env_destroy(e->cfg.cgroups, names[i], NULL);
                        }
                        free(names[i]);
                }
                free(names);
        }
        char path[4096];
        snprintf(path, sizeof(path), "%s/envs", e->cfg.root);
        DIR *d = opendir(path);
        if (d) {
                struct dirent *de;
                while ((de = readdir(d)))
                        if (de->d_name[0] != '.' && !known_env(e, de->d_name)) {
                                log_info("removing orphaned directory envs/%s", de->d_name);
                                rm_rf_at(dirfd(d), de->d_name);
                        }
                closedir(d);
        }
        d = opendir(e->cfg.uid_registry);
        if (d) {
                char prefix[4200];
                int plen = snprintf(prefix, sizeof(prefix), "%s\t", e->cfg.root);
                struct dirent *de;
                while ((de = readdir(d))) {
                        char *note = NULL;
                        if (de->d_name[0] == '.' || read_file_at(dirfd(d), de->d_name, 4300, &note) < 0)
                                continue;
                        if (strncmp(note, prefix, (size_t)plen) == 0 && !known_env(e, note + plen)) {
                                log_info("releasing orphaned id range %s", de->d_name);
                                unlinkat(dirfd(d), de->d_name, 0);
                        }
                        free(note);
                }
                closedir(d);
        }
}

int engine_reconcile(struct engine *e)
{
        for (struct env *v = e->envs, *next; v; v = next) {
                next = v->next;
                if (strcmp(v->row.status, "creating") == 0 || strcmp(v->row.status, "deleting") == 0) {
                        log_info("%s: rolling back an interrupted %s", v->row.name,
                                 v->row.status[0] == 'c' ? "create" : "delete");
                        cgroup_env_kill(e->cfg.cgroups, v->row.name, NULL);
                        env_remove_artifacts(e, v->row.name, v->row.uid_base);
                        state_env_delete(e->cfg.state, v->row.name);
                        env_unlink(e, v);
                        env_free(v);
                        continue;
                }
                char owner[4200];
                owner_note(e, v->row.name, owner, sizeof(owner));
                idrange_reclaim(e->cfg.uid_registry, owner, v->row.uid_base);
                if (strcmp(v->row.status, "running") == 0) {
                        if (env_adopt(e, v) >= 0) {
                                log_info("%s: re-adopted running environment (pid %lld)",
                                         v->row.name, (long long)v->row.pid);
                        } else {
                                log_info("%s: PID 1 is gone; marking stopped", v->row.name);
                                cgroup_env_kill(e->cfg.cgroups, v->row.name, NULL);
                                env_mark_stopped(e, v);
                        }
                }
        }
        remove_orphans(e);
        int64_t now = wall_s();
        for (struct env *v = e->envs, *next; v; v = next) {
                next = v->next;
                if (v->row.expires_at && v->row.expires_at <= now) {
                        log_info("%s: expired while the daemon was down", v->row.name);
                        engine_destroy(e, v, true);
                        continue;
                }
                if (v->pidfd < 0 && v->row.autostart) {
                        char err[512];
                        if (engine_start(e, v, err, sizeof(err)) < 0)
                                log_error("%s: autostart failed: %s", v->row.name, err);
                }
        }
        e->sweep = loop_add_timer(e->cfg.loop, 1000, sweep_expired, e);
        return 0;
}

/* ---- what images.c needs ----------------------------------------------------------------- */

const char *engine_root(struct engine *e)
{
        return e->cfg.root;
}

struct state *engine_state(struct engine *e)
{
        return e->cfg.state;
}

bool engine_image_in_use(struct engine *e, const char *name, int *ret_count)
{
        int n = 0;
        for (struct env *v = e->envs; v; v = v->next)
                n += strcmp(v->row.image, name) == 0;
        *ret_count = n;
        return n > 0;
}

/* Environment lifecycle. Every change is written to the state database before it is
 * acknowledged; the status column doubles as the journal for crash recovery:
 *   creating -> running <-> stopped -> (deleted)
 * A row found in "creating" or "deleting" at startup is a half-done operation and is rolled
 * back (everything it may have made is removed). */
#include "daemon/engine.h"
#include "daemon/exec.h"
#include "daemon/log.h"
#include "daemon/network.h"
#include "lib/confine.h"
#include "lib/parse.h"
#include "lib/spawn.h"
#include "lib/userns.h"
#include "lib/util.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
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
        uint64_t ttl_s, tmp_bytes, disk_bytes;
        json_t *vars;   /* environment variables */
        json_t *labels;
        struct netpolicy net;
        struct in_addr addr; /* 0 until the environment first needs an address */
        char cgname[80];
        int pidfd;
        bool is_child; /* we are its parent and must reap it */
        struct loop_source *exit_src;
        bool stopping;
        bool paused;
        struct loop_timer *kill_timer;
        struct waiter *waiters;
        unsigned exec_seq;
        struct env *next;
};

struct engine {
        struct engine_config cfg;
        struct env *envs;
        size_t n_envs;
        struct loop_timer *sweep;
        struct loop_timer *spare_timer; /* makes the next computer's disk after a create */
        char spare_image[64];
        int spare_pidfd; /* the helper making it, or -1 */
        struct loop_source *spare_src;
        struct network *net; /* NULL: networking unavailable, every env is "none" */
        void (*destroyed)(const char *name);
};

void engine_set_destroy_hook(struct engine *e, void (*fn)(const char *name))
{
        e->destroyed = fn;
}

static void env_on_exit(struct loop_source *s, int fd, uint32_t events, void *data);
static void env_kill_sync(struct engine *e, struct env *v);

/* ---- small accessors ------------------------------------------------------------------- */

const char *env_name(const struct env *v)
{
        return v->row.name;
}

bool env_running(const struct env *v)
{
        return v->pidfd >= 0;
}

int engine_pause(struct engine *e, struct env *v, bool pause);

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

/* cgroup directory of an environment: prefixed so that no name ("memory", "tasks", "cpu.x")
 * can collide with a cgroup interface file. */
const char *env_cgroup(const struct env *v)
{
        return v->cgname;
}

static void cgroup_name_of(const char *name, char out[80])
{
        snprintf(out, 80, "env-%s", name);
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
                if (l && strlen(l) < 64)
                        snprintf(p->links[p->n_links++], 64, "%s", l);
        }
        json_t *bw = json_object_get(j, "bandwidth");
        p->egress_bps = (uint64_t)json_integer_value(json_object_get(bw, "egress"));
        p->ingress_bps = (uint64_t)json_integer_value(json_object_get(bw, "ingress"));
}

static char *spec_dump(const struct env *v)
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
        netpolicy_load(&v->net, json_object_get(j, "network"));
        if (inet_pton(AF_INET, v->row.ip, &v->addr) != 1)
                v->addr.s_addr = 0;
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
        netpolicy_clear(&v->net);
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

/* ---- networking -------------------------------------------------------------------------- */

static int alloc_addr(struct engine *e, struct in_addr *ret)
{
        struct in_addr gw = network_gateway(e->net);
        /* The gateway is subnet+1; environments take subnet+2 upwards, lowest free first. */
        for (uint32_t h = ntohl(gw.s_addr) + 1;; h++) {
                struct in_addr a = {.s_addr = htonl(h)};
                struct in_addr next = {.s_addr = htonl(h + 1)};
                if (!network_in_subnet(e->net, a) || !network_in_subnet(e->net, next))
                        return -ENOSPC; /* h+1 outside means h is the broadcast address */
                bool used = false;
                for (struct env *v = e->envs; v && !used; v = v->next)
                        used = v->addr.s_addr == a.s_addr;
                if (!used) {
                        *ret = a;
                        return 0;
                }
        }
}

static bool policy_links(const struct env *v, const char *name)
{
        for (size_t i = 0; i < v->net.n_links; i++)
                if (strcmp(v->net.links[i], name) == 0)
                        return true;
        return false;
}

/* Addresses v may talk to: those it links and those that link it (links are symmetric). */
static size_t link_addrs(struct engine *e, const struct env *v, struct in_addr *out, size_t max)
{
        size_t n = 0;
        for (struct env *o = e->envs; o && n < max; o = o->next)
                if (o != v && o->addr.s_addr &&
                    (policy_links(v, o->row.name) || policy_links(o, v->row.name)))
                        out[n++] = o->addr;
        return n;
}

static int env_netns_fd(const struct env *v)
{
        char path[64];
        snprintf(path, sizeof(path), "/proc/%lld/ns/net", (long long)v->row.pid);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        /* The pidfd pins the process: if it is still alive, the pid was not reused. */
        if (sys_pidfd_send_signal(v->pidfd, 0, 0) < 0) {
                close(fd);
                return -ESRCH;
        }
        return fd;
}

static int ensure_addr(struct engine *e, struct env *v)
{
        if (v->addr.s_addr)
                return 0;
        int r = alloc_addr(e, &v->addr);
        if (r < 0)
                return r;
        inet_ntop(AF_INET, &v->addr, v->row.ip, sizeof(v->row.ip));
        return 0;
}

/* adopt: keep a veth that survived a daemon restart instead of cutting connections. */
static int env_net_up(struct engine *e, struct env *v, bool adopt, bool flush_learned, char *err,
                      size_t errlen)
{
        if (!e->net || v->net.mode == NET_NONE || v->pidfd < 0)
                return 0;
        int r = ensure_addr(e, v);
        if (r < 0) {
                snprintf(err, errlen, "no free address in the environments' subnet");
                return r;
        }
        struct in_addr links[NETPOLICY_MAX_LINKS * 2];
        size_t nl = link_addrs(e, v, links, ELEMENTSOF(links));
        if (adopt && network_link_present(e->net, v->row.name))
                return network_env_update(e->net, v->row.name, v->addr, &v->net, links, nl,
                                          flush_learned, err, errlen);
        _cleanup_close_ int ns = env_netns_fd(v);
        if (ns < 0) {
                snprintf(err, errlen, "network namespace: %s", strerror(-ns));
                return ns;
        }
        r = network_env_up(e->net, v->row.name, ns, v->addr, &v->net, links, nl, err, errlen);
        if (r < 0)
                return r;
        /* Published ports leave the firewall with the environment's chain at stop. */
        struct port_row *ports = NULL;
        size_t np = 0;
        if (state_port_list(e->cfg.state, v->row.name, &ports, &np) >= 0)
                for (size_t i = 0; i < np; i++)
                        network_port_add(e->net, v->row.name, ports[i].proto, ports[i].host_port,
                                         v->addr, ports[i].port);
        free(ports);
        return 0;
}

/* Environments linked with v apply their firewall again (their peer's address changed). */
static void reapply_linked(struct engine *e, struct env *v)
{
        for (struct env *o = e->envs; o; o = o->next) {
                if (o == v || o->pidfd < 0 || o->net.mode == NET_NONE)
                        continue;
                if (!policy_links(o, v->row.name) && !policy_links(v, o->row.name))
                        continue;
                char err[256];
                struct in_addr links[NETPOLICY_MAX_LINKS * 2];
                size_t nl = link_addrs(e, o, links, ELEMENTSOF(links));
                if (network_env_update(e->net, o->row.name, o->addr, &o->net, links, nl, false,
                                       err, sizeof(err)) < 0)
                        log_warn("%s: updating links: %s", o->row.name, err);
        }
}

static const struct netpolicy *env_by_addr(void *ctx, struct in_addr a, char *name, size_t len)
{
        struct engine *e = ctx;
        for (struct env *v = e->envs; v; v = v->next)
                if (v->pidfd >= 0 && v->addr.s_addr == a.s_addr) {
                        snprintf(name, len, "%s", v->row.name);
                        return &v->net;
                }
        return NULL;
}

void engine_set_network(struct engine *e, struct network *n)
{
        e->net = n;
}

struct network_envs engine_network_envs(struct engine *e)
{
        return (struct network_envs){.by_addr = env_by_addr, .ctx = e};
}

static void write_resolv_conf(struct engine *e, const char *dir)
{
        char path[4200], text[64];
        snprintf(path, sizeof(path), "%s/resolv.conf", dir);
        struct in_addr gw = e->net ? network_gateway(e->net) : (struct in_addr){0};
        snprintf(text, sizeof(text), "nameserver %s\n", e->net ? inet_ntoa(gw) : "127.0.0.1");
        _cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd >= 0)
                (void)!write(fd, text, strlen(text));
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
        r = cgroup_env_create(e->cfg.cgroups, v->cgname, &v->limits);
        if (r < 0) {
                snprintf(err, errlen, "cgroup: %s", strerror(-r));
                return r;
        }
        _cleanup_close_ int userns = -EBADF;
        r = userns_create(v->row.uid_base, UID_RANGE_SIZE, &userns);
        if (r < 0) {
                snprintf(err, errlen, "user namespace: %s", strerror(-r));
                cgroup_env_destroy(e->cfg.cgroups, v->cgname, NULL);
                return r;
        }
        char resolv[4200];
        write_resolv_conf(e, dir);
        snprintf(resolv, sizeof(resolv), "%s/resolv.conf", dir);
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
                           .shm_bytes = DEFAULT_SHM_BYTES,
                           .resolv_conf = resolv},
                .cgroups = e->cfg.cgroups,
                .cgroup_name = v->cgname,
                .init_fd = e->cfg.init_fd,
                .init_envp = envp,
        };
        char tree[4200];
        if ((v->kind == KIND_COMPUTER || e->cfg.storage->info.shifted) &&
            (r = e->cfg.storage->ops->root(e->cfg.storage, dir, &sc.rootfs, tree, sizeof(tree))) < 0) {
                envp_free(envp);
                cgroup_env_destroy(e->cfg.cgroups, v->cgname, NULL);
                snprintf(err, errlen, "storage: %s", strerror(-r));
                return r;
        }
        struct spawn_result res;
        r = env_spawn(&sc, &res, err, errlen);
        envp_free(envp);
        if (r < 0) {
                cgroup_env_destroy(e->cfg.cgroups, v->cgname, NULL);
                return r;
        }
        v->pidfd = res.pidfd;
        v->is_child = true;
        v->row.pid = res.pid;
        v->row.pid_start = res.start_time;
        snprintf(v->row.status, sizeof(v->row.status), "running");
        r = env_net_up(e, v, false, true, err, errlen);
        if (r < 0) {
                env_kill_sync(e, v);
                return r;
        }
        if (e->net && v->net.mode != NET_NONE)
                reapply_linked(e, v); /* links are symmetric: peers accept the new address */
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
        /* Commands exec'd into it are our children (CLONE_PARENT): the pid namespace's end
         * killed them; reap them so the cgroup can empty. */
        exec_reap_env(v->row.name, 1000);
        int r = cgroup_env_destroy(e->cfg.cgroups, v->cgname, NULL);
        if (r < 0 && r != -ENOENT)
                log_warn("%s: removing cgroups: %s", v->row.name, strerror(-r));
        if (e->net && v->net.mode != NET_NONE)
                network_env_gone(e->net, v->row.name, v->addr); /* its processes are gone */
        v->row.pid = 0;
        v->row.pid_start = 0;
        v->paused = false;
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
        if (v->paused)
                engine_pause(e, v, false);
        /* Killing PID 1 ends the pid namespace: the kernel kills everything else in it. PID 1
         * finishes exiting only once every process of the namespace is reaped, and the commands
         * exec'd into it are our children (CLONE_PARENT): reap them while waiting. */
        sys_pidfd_send_signal(v->pidfd, SIGKILL, 0);
        for (uint64_t end = now_ms() + 5000; now_ms() < end;) {
                exec_reap_env(v->row.name, 0);
                struct pollfd p = {.fd = v->pidfd, .events = POLLIN};
                if (poll(&p, 1, 10) > 0)
                        break;
        }
        env_mark_stopped(e, v);
        notify_waiters(v);
}

static void on_kill_timer(struct loop_timer *t, void *data)
{
        struct env *v = data;
        v->kill_timer = NULL;
        log_info("%s: did not stop in time, killing", v->row.name);
        /* The end of PID 1 ends its pid namespace: the kernel kills everything in it. */
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
        if (v->paused)
                engine_pause(e, v, false);
        if (timeout_s == 0 || sys_pidfd_send_signal(v->pidfd, SIGTERM, 0) < 0)
                on_kill_timer(NULL, v);
        else
                v->kill_timer = loop_add_timer(e->cfg.loop, (uint64_t)timeout_s * 1000,
                                               on_kill_timer, v);
}

int engine_pause(struct engine *e, struct env *v, bool pause)
{
        if (v->pidfd < 0)
                return -EBUSY;
        if (v->paused == pause)
                return 0;
        int r = cgroup_env_freeze(e->cfg.cgroups, v->cgname, pause);
        if (r < 0)
                return r;
        v->paused = pause;
        snprintf(v->row.status, sizeof(v->row.status), "%s", pause ? "paused" : "running");
        log_info("%s: %s", v->row.name, pause ? "paused" : "resumed");
        return env_save(e, v);
}

bool env_paused(const struct env *v)
{
        return v->paused;
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
        char dir[4096], cg[80];
        cgroup_name_of(name, cg);
        cgroup_env_destroy(e->cfg.cgroups, cg, NULL);
        if (env_dir(e, name, NULL, dir, sizeof(dir)) >= 0) {
                e->cfg.storage->ops->destroy(e->cfg.storage, dir);
                int r = rm_rf_at(AT_FDCWD, dir);
                if (r < 0)
                        log_warn("%s: removing %s: %s", name, dir, strerror(-r));
        }
        if (uid_base)
                idrange_release(e->cfg.uid_registry, uid_base);
}

static void on_spare_made(struct loop_source *src, int fd, uint32_t events, void *data)
{
        struct engine *e = data;
        siginfo_t si = {0};
        if (waitid(P_PIDFD, (id_t)fd, &si, WEXITED | WNOHANG) == 0 && si.si_pid == 0)
                return;
        if (si.si_code != CLD_EXITED || si.si_status != 0)
                log_warn("image %s: preparing a spare disk failed", e->spare_image);
        loop_remove(e->spare_src);
        e->spare_src = NULL;
        close(e->spare_pidfd);
        e->spare_pidfd = -1;
}

/* The snapshot commits a btrfs transaction (5-15 ms): a helper makes it, so the event loop
 * keeps serving meanwhile. */
static void on_spare_timer(struct loop_timer *t, void *data)
{
        struct engine *e = data;
        e->spare_timer = NULL;
        if (e->spare_pidfd >= 0)
                return; /* one at a time; the next create asks again */
        struct storage *s = e->cfg.storage;
        char image[4200];
        snprintf(image, sizeof(image), "%s/images/%s/rootfs", e->cfg.root, e->spare_image);
        pid_t daemon_pid = getpid();
        pid_t pid = fork();
        if (pid == 0) {
                prctl(PR_SET_PDEATHSIG, SIGKILL);
                if (getppid() != daemon_pid)
                        _exit(1);
                close_fds_from(3, NULL, 0);
                int r = s->ops->prepare_spare(s, image);
                _exit(r < 0 && r != -ENOENT ? 1 : 0);
        }
        int pidfd = pid > 0 ? sys_pidfd_open(pid, 0) : -1;
        if (pidfd < 0 || loop_add_fd(e->cfg.loop, pidfd, EPOLLIN, on_spare_made, e,
                                     &e->spare_src) < 0) {
                if (pid > 0) {
                        kill(pid, SIGKILL);
                        waitpid(pid, NULL, 0);
                }
                if (pidfd >= 0)
                        close(pidfd);
                return;
        }
        e->spare_pidfd = pidfd;
}

/* After the create has answered (a timer, not this turn of the loop): the next computer of
 * this image finds its disk ready. */
static void schedule_spare(struct engine *e, const char *image)
{
        struct storage *s = e->cfg.storage;
        if (!s->ops->prepare_spare || e->spare_pidfd >= 0)
                return;
        snprintf(e->spare_image, sizeof(e->spare_image), "%s", image);
        if (!e->spare_timer)
                e->spare_timer = loop_add_timer(e->cfg.loop, 1, on_spare_timer, e);
}

static int make_env_dirs(struct engine *e, struct env *v, const char *from_tree,
                         uint32_t from_base)
{
        char dir[4096], sub[4096], image[4200];
        int r = env_dir(e, v->row.name, NULL, dir, sizeof(dir));
        if (r < 0)
                return r;
        if (mkdir(dir, 0700) < 0)
                return -errno;
        if ((r = env_dir(e, v->row.name, "rootfs", sub, sizeof(sub))) < 0)
                return r;
        if (mkdir(sub, 0755) < 0)
                return -errno;
        struct storage *s = e->cfg.storage;
        if (v->kind == KIND_SANDBOX && !s->info.shifted)
                return 0; /* its root is the idmapped image itself */
        snprintf(image, sizeof(image), "%s/images/%s/rootfs", e->cfg.root, v->row.image);
        r = from_tree ? s->ops->env_clone(s, from_tree, dir, from_base, v->row.uid_base,
                                          v->disk_bytes)
                      : s->ops->env_create(s, dir, image, v->row.uid_base, v->disk_bytes);
        if (r >= 0 && !from_tree)
                schedule_spare(e, v->row.image);
        test_crash_point("create-disk");
        return r;
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
        if (!e->cfg.storage->info.idmapped && !e->cfg.storage->info.shifted) {
                /* The dir driver cannot shift ownership (its lower layer is the shared image). */
                snprintf(err, errlen, "idmapped mounts do not work on this host's kernel or "
                         "storage pool, and environments need them (see `paddock system`)");
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
        v->disk_bytes = spec->kind == KIND_COMPUTER ? spec->disk_bytes : 0;
        v->vars = spec->env ? json_deep_copy(spec->env) : json_object();
        v->labels = spec->labels ? json_deep_copy(spec->labels) : json_object();
        v->net = spec->net; /* moved: the caller's arrays now belong to the environment */
        if (!e->net && v->net.mode != NET_NONE) {
                snprintf(err, errlen, "networking is not available on this daemon (see its log)");
                v->net.rules = NULL;
                v->net.links = NULL;
                env_free(v);
                return -ENOEXEC;
        }
        snprintf(v->row.name, sizeof(v->row.name), "%s", spec->name);
        cgroup_name_of(v->row.name, v->cgname);
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
        r = make_env_dirs(e, v, spec->from_tree, spec->from_base);
        if (spec->copied)
                spec->copied(spec->copied_data);
        if (r == -EOPNOTSUPP)
                snprintf(err, errlen, "the %s storage driver cannot copy environments (fork "
                         "needs the btrfs driver)", e->cfg.storage->ops->name);
        else if (r < 0)
                snprintf(err, errlen, "environment disk: %s", strerror(-r));
        else
                r = env_spawn_now(e, v, err, errlen);
        if (r < 0) {
                env_remove_artifacts(e, v->row.name, v->row.uid_base);
                state_env_delete(e->cfg.state, v->row.name);
                env_free(v);
                return r;
        }
        env_append(e, v);
        if (e->net && v->net.mode != NET_NONE)
                reapply_linked(e, v); /* now that it is listed, peers see its address */
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
        /* Its firewall chain and published ports went with its network when it stopped
         * (env_mark_stopped); the port rows go with the record (ON DELETE CASCADE). */
        env_remove_artifacts(e, v->row.name, v->row.uid_base);
        int r = state_env_delete(e->cfg.state, v->row.name);
        if (r < 0)
                log_error("%s: deleting record: %s", v->row.name, strerror(-r));
        log_info("%s: destroyed", v->row.name);
        if (e->destroyed)
                e->destroyed(v->row.name);
        env_unlink(e, v);
        /* Peers that were linked with it drop its address: whoever gets it next is a stranger. */
        if (e->net && v->addr.s_addr)
                reapply_linked(e, v);
        notify_waiters(v);
        env_free(v);
        return 0;
}

/* A computer's limit is a quota of its disk, applied at once (btrfs can change it live); a
 * sandbox's is the size of its tmpfs /tmp and /workspace, fixed while they are mounted. */
static int env_set_disk(struct engine *e, struct env *v, uint64_t bytes, char *err, size_t errlen)
{
        if (v->kind == KIND_SANDBOX) {
                if (v->pidfd >= 0) {
                        snprintf(err, errlen,
                                 "%s is running: a sandbox's disk (its /tmp and /workspace) "
                                 "can be resized only while it is stopped",
                                 v->row.name);
                        return -EBUSY;
                }
                v->tmp_bytes = bytes ? bytes : DEFAULT_TMP_BYTES;
                return 0;
        }
        if (v->pidfd >= 0 && !e->cfg.storage->info.live_disk_limits) {
                snprintf(err, errlen, "%s is running: the %s storage driver changes a computer's "
                         "disk limit only while it is stopped", v->row.name,
                         e->cfg.storage->ops->name);
                return -EBUSY;
        }
        char dir[4096];
        int r = env_dir(e, v->row.name, NULL, dir, sizeof(dir));
        if (r >= 0)
                r = e->cfg.storage->ops->set_quota(e->cfg.storage, dir, bytes);
        if (r == -EOPNOTSUPP) {
                snprintf(err, errlen,
                         "the %s storage driver cannot make this change (it sets a computer's "
                         "disk limit at create; it can grow it, never shrink or remove it)",
                         e->cfg.storage->ops->name);
                return r;
        }
        if (r < 0) {
                snprintf(err, errlen, "setting the disk limit: %s", strerror(-r));
                return r;
        }
        v->disk_bytes = bytes;
        return 0;
}

int engine_patch(struct engine *e, struct env *v, const struct env_patch *p, char *err,
                 size_t errlen)
{
        if (p->has_disk) {
                int r = env_set_disk(e, v, p->disk, err, errlen);
                if (r < 0)
                        return r;
        }
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
                int r = cgroup_env_set_limits(e->cfg.cgroups, v->cgname, &l);
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
        if (p->has_net) {
                if (!e->net && p->net.mode != NET_NONE) {
                        snprintf(err, errlen, "networking is not available on this daemon");
                        return -ENOEXEC;
                }
                enum net_mode old = v->net.mode;
                bool rules_changed = old != p->net.mode || v->net.n_rules != p->net.n_rules ||
                                     (p->net.n_rules &&
                                      memcmp(v->net.rules, p->net.rules,
                                             p->net.n_rules * sizeof(*p->net.rules)) != 0);
                netpolicy_clear(&v->net);
                v->net = p->net;
                int r = 0;
                if (v->pidfd >= 0 && e->net) {
                        if (v->net.mode == NET_NONE && old != NET_NONE)
                                network_env_down(e->net, v->row.name);
                        else if (v->net.mode != NET_NONE && old == NET_NONE)
                                r = env_net_up(e, v, false, true, err, errlen);
                        else if (v->net.mode != NET_NONE)
                                r = env_net_up(e, v, true, rules_changed, err, errlen);
                        reapply_linked(e, v);
                }
                int q = env_save(e, v);
                return r < 0 ? r : q;
        }
        return env_save(e, v);
}

bool engine_has_network(const struct engine *e)
{
        return e->net != NULL;
}

const struct netpolicy *env_netpolicy(const struct env *v)
{
        return &v->net;
}

int engine_port_add(struct engine *e, struct env *v, const char *proto, uint16_t host_port,
                    uint16_t port, char *err, size_t errlen)
{
        if (!e->net || v->net.mode == NET_NONE) {
                snprintf(err, errlen, "%s has no network (mode none): publish needs open or allow",
                         v->row.name);
                return -ENOEXEC;
        }
        int r = ensure_addr(e, v);
        if (r < 0) {
                snprintf(err, errlen, "no free address");
                return r;
        }
        struct port_row row = {.host_port = host_port, .port = port};
        snprintf(row.proto, sizeof(row.proto), "%s", proto);
        snprintf(row.env, sizeof(row.env), "%s", v->row.name);
        env_save(e, v);
        r = state_port_insert(e->cfg.state, &row);
        if (r < 0) {
                if (r == -EEXIST)
                        snprintf(err, errlen, "host port %u/%s is already published", host_port,
                                 proto);
                else
                        snprintf(err, errlen, "recording the port: %s", strerror(-r));
                return r;
        }
        r = network_port_add(e->net, v->row.name, proto, host_port, v->addr, port);
        if (r < 0) {
                state_port_delete(e->cfg.state, proto, host_port);
                snprintf(err, errlen, "firewall: %s", strerror(-r));
        }
        return r;
}

int engine_port_remove(struct engine *e, struct env *v, const char *proto, uint16_t host_port)
{
        struct port_row *rows = NULL;
        size_t n = 0;
        int r = state_port_list(e->cfg.state, v->row.name, &rows, &n);
        if (r < 0)
                return r;
        bool found = false;
        for (size_t i = 0; i < n; i++)
                found |= rows[i].host_port == host_port && !strcmp(rows[i].proto, proto);
        free(rows);
        if (!found)
                return -ENOENT;
        if (e->net)
                network_port_remove(e->net, proto, host_port);
        return state_port_delete(e->cfg.state, proto, host_port);
}

json_t *engine_ports_json(struct engine *e, struct env *v)
{
        json_t *arr = json_array();
        struct port_row *rows = NULL;
        size_t n = 0;
        if (state_port_list(e->cfg.state, v->row.name, &rows, &n) < 0)
                return arr;
        for (size_t i = 0; i < n; i++)
                json_array_append_new(arr, json_pack("{s:s,s:i,s:i}", "proto", rows[i].proto,
                                                     "host_port", rows[i].host_port, "port",
                                                     rows[i].port));
        free(rows);
        return arr;
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
                if (cgroup_env_stats(e->cfg.cgroups, v->cgname, &st) >= 0) {
                        usage = json_pack("{s:I,s:I,s:I,s:I,s:I}", "memory",
                                          (json_int_t)st.memory_current, "memory_peak",
                                          (json_int_t)st.memory_peak, "pids",
                                          (json_int_t)st.pids_current, "cpu_usage_us",
                                          (json_int_t)st.cpu_usage_us, "oom_kills",
                                          (json_int_t)st.oom_kills);
                        ooms = (json_int_t)st.oom_kills;
                }
        }
        json_t *disk_limit = v->kind == KIND_SANDBOX ? json_integer((json_int_t)v->tmp_bytes)
                             : v->disk_bytes         ? json_integer((json_int_t)v->disk_bytes)
                                                     : json_null();
        json_t *disk_used = json_null();
        char dir[4096];
        uint64_t used;
        if (v->kind == KIND_COMPUTER && env_dir(e, v->row.name, NULL, dir, sizeof(dir)) >= 0 &&
            e->cfg.storage->ops->usage(e->cfg.storage, dir, &used) >= 0)
                disk_used = json_integer((json_int_t)used);
        const char *state = v->stopping ? "stopping" : v->row.status;
        json_t *net = netpolicy_json(&v->net);
        json_object_set_new(net, "ip", v->addr.s_addr ? json_string(v->row.ip) : json_null());
        if (e->net && v->addr.s_addr) {
                struct in_addr gw = network_gateway(e->net);
                json_object_set_new(net, "gateway", json_string(inet_ntoa(gw)));
        }
        struct in6_addr a6;
        char a6s[INET6_ADDRSTRLEN];
        json_object_set_new(net, "ip6",
                            e->net && v->addr.s_addr && network_addr6(e->net, v->addr, &a6)
                                ? json_string(inet_ntop(AF_INET6, &a6, a6s, sizeof(a6s)))
                                : json_null());
        json_object_set_new(net, "denied",
                            json_integer(e->net && v->pidfd >= 0 && v->net.mode != NET_NONE
                                                 ? (json_int_t)network_env_denied(e->net, v->row.name)
                                                 : 0));
        json_object_set_new(net, "ports", engine_ports_json(e, v));
        json_t *j = json_pack("{s:s,s:s,s:s,s:s,s:o,s:o,s:o,s:o,s:o,s:I,s:b,s:O,s:O,s:o,s:I,s:I,"
                         "s:o,s:I}",
                         "name", v->row.name, "kind", v->row.kind, "image", v->row.image, "state",
                         state, "pid", v->row.pid ? json_integer(v->row.pid) : json_null(),
                         "created_at", time_json(v->row.created_at), "expires_at",
                         time_json(v->row.expires_at), "limits", limits, "usage", usage,
                         "oom_kills", ooms, "autostart", v->row.autostart, "labels", v->labels,
                         "env", v->vars, "network", net, "uid_base",
                         (json_int_t)v->row.uid_base, "uid_count", (json_int_t)UID_RANGE_SIZE,
                         "ttl", v->ttl_s ? json_integer((json_int_t)v->ttl_s) : json_null(),
                         "tmp_size", (json_int_t)v->tmp_bytes);
        /* limit: a computer's quota, a sandbox's /tmp and /workspace size each; used: bytes
         * the computer wrote itself (shared image data not counted), where the driver knows */
        json_t *disk = json_pack("{s:o,s:o}", "limit", disk_limit, "used", disk_used);
        if (j)
                json_object_set_new(j, "disk", disk);
        else
                json_decref(disk);
        return j;
}

json_t *engine_system_json(struct engine *e)
{
        size_t running = 0;
        for (struct env *v = e->envs; v; v = v->next)
                running += v->pidfd >= 0;
        struct storage_info si = storage_info(e->cfg.storage);
        json_t *storage = json_pack("{s:s,s:s,s:s,s:s,s:I,s:I,s:s}", "driver", si.driver, "pool",
                                    si.pool, "backing", si.backing, "quota", si.quota, "size",
                                    (json_int_t)si.size, "used", (json_int_t)si.used,
                                    "ownership",
                                    si.shifted    ? "shifted at create (chown)"
                                    : si.idmapped ? "idmapped mounts"
                                                  : "unavailable");
        return json_pack("{s:s,s:s,s:i,s:b,s:s,s:o,s:s,s:I,s:I,s:s}", "version", e->cfg.version,
                         "cgroup_mode",
                         cgroup_mode_name(cgroup_manager_mode(e->cfg.cgroups)), "landlock_abi",
                         landlock_abi(), "idmapped_mounts", si.idmapped, "storage_driver",
                         si.driver, "storage", storage, "root", e->cfg.root, "envs",
                         (json_int_t)e->n_envs, "running", (json_int_t)running, "network",
                         e->net ? "routed" : "unavailable");
}

/* ---- startup, reconcile, TTL ----------------------------------------------------------------- */

int engine_new(const struct engine_config *cfg, struct engine **ret)
{
        struct engine *e = calloc(1, sizeof(*e));
        if (!e)
                return -ENOMEM;
        e->cfg = *cfg;
        e->spare_pidfd = -1;
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
                cgroup_name_of(v->row.name, v->cgname);
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
        loop_cancel_timer(e->spare_timer);
        loop_remove(e->spare_src);
        if (e->spare_pidfd >= 0)
                close(e->spare_pidfd); /* the helper dies with us (PR_SET_PDEATHSIG) */
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
        if (proc_is_zombie((pid_t)v->row.pid))
                return -ESRCH; /* exited, not yet reaped by its new parent */
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
                /* Running execs do not extend the life of an expired environment. */
                if (v->row.expires_at && v->row.expires_at <= now) {
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
static void remove_network_orphans(struct engine *e)
{
        if (!e->net)
                return;
        const char **keep = calloc(e->n_envs + 1, sizeof(char *));
        size_t n = 0;
        if (!keep)
                return;
        for (struct env *v = e->envs; v; v = v->next)
                if (v->pidfd >= 0 && v->net.mode != NET_NONE)
                        keep[n++] = v->row.name;
        network_remove_orphans(e->net, keep, n);
        free(keep);
        /* Published ports of every environment whose network is up are (re)installed: the
         * table may be new. Not those of stopped ones: nothing would take them out again when
         * such an environment is removed, and its address may go to another one (they come
         * back at its start, env_net_up). */
        struct port_row *ports = NULL;
        size_t np = 0;
        if (state_port_list(e->cfg.state, NULL, &ports, &np) >= 0)
                for (size_t i = 0; i < np; i++) {
                        struct env *v = engine_find(e, ports[i].env);
                        if (v && v->addr.s_addr && v->pidfd >= 0 && v->net.mode != NET_NONE)
                                network_port_add(e->net, v->row.name, ports[i].proto,
                                                 ports[i].host_port, v->addr, ports[i].port);
                }
        free(ports);
}

static void remove_orphans(struct engine *e)
{
        remove_network_orphans(e);
        char **names = NULL;
        size_t n = 0;
        if (cgroup_list_envs(e->cfg.cgroups, &names, &n) >= 0) {
                for (size_t i = 0; i < n; i++) {
                        bool ours = strncmp(names[i], "env-", 4) == 0;
                        if (!ours || !known_env(e, names[i] + 4)) {
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
                                char orphan[4400];
                                snprintf(orphan, sizeof(orphan), "%s/%s", path, de->d_name);
                                e->cfg.storage->ops->destroy(e->cfg.storage, orphan);
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
                        cgroup_env_kill(e->cfg.cgroups, v->cgname, NULL);
                        env_remove_artifacts(e, v->row.name, v->row.uid_base);
                        state_env_delete(e->cfg.state, v->row.name);
                        env_unlink(e, v);
                        env_free(v);
                        continue;
                }
                char owner[4200];
                owner_note(e, v->row.name, owner, sizeof(owner));
                idrange_reclaim(e->cfg.uid_registry, owner, v->row.uid_base);
                if (!strcmp(v->row.status, "running") || !strcmp(v->row.status, "paused")) {
                        v->paused = !strcmp(v->row.status, "paused");
                        if (env_adopt(e, v) >= 0) {
                                log_info("%s: re-adopted running environment (pid %lld)",
                                         v->row.name, (long long)v->row.pid);
                                char err[512];
                                if (env_net_up(e, v, true, false, err, sizeof(err)) < 0)
                                        log_error("%s: restoring its network: %s", v->row.name, err);
                        } else {
                                log_info("%s: PID 1 is gone; marking stopped", v->row.name);
                                cgroup_env_kill(e->cfg.cgroups, v->cgname, NULL);
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
                             .labels = v->labels};
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

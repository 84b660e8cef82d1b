/* Startup and time: at start the daemon rolls back half-done creates and deletes (their rows
 * say "creating" / "deleting"), re-adopts environments whose PID 1 survived it (pid and start
 * time must both match), marks the others stopped, removes leftovers that have no record
 * (cgroups, directories, id claims, firewall state), destroys sandboxes that expired while it
 * was down and starts autostart computers (over turns, once it serves). Then a one-second
 * sweep destroys expired ones. */
#include "daemon/engine_internal.h"
#include "daemon/events.h"
#include "daemon/log.h"
#include "lib/userns.h"
#include "lib/util.h"

#include <dirent.h>

static int env_adopt(struct engine *e, struct env *v)
{
        struct proc_stat ps;
        if (v->row.pid <= 0 || proc_stat((pid_t)v->row.pid, &ps) < 0 ||
            ps.start_time != v->row.pid_start)
                return -ESRCH;
        if (proc_stat_gone(&ps))
                return -ESRCH; /* exited, not yet reaped by its new parent */
        uint64_t st;
        int fd = sys_pidfd_open((pid_t)v->row.pid, 0);
        if (fd < 0)
                return fd;
        /* Check again now that the pidfd pins the process. */
        if (proc_start_time((pid_t)v->row.pid, &st) < 0 || st != v->row.pid_start) {
                close(fd);
                return -ESRCH;
        }
        env_set_pidfd(e, v, fd);
        v->is_child = false;
        int r = env_watch(e, v);
        if (r < 0) {
                close(fd);
                env_set_pidfd(e, v, -EBADF);
        }
        return r;
}

/* Destroy every environment whose time to live is over (running execs do not extend it). */
static void destroy_expired(struct engine *e, const char *why)
{
        int64_t now = wall_s();
        if (!e->next_expiry || now < e->next_expiry)
                return; /* nothing can have expired: no walk over every environment */
        /* The walk finds the next expiry too; an environment gone since only made it early. */
        e->next_expiry = 0;
        for (struct env *v = e->envs, *next; v; v = next) {
                next = v->next;
                if (v->deleting) {
                        continue; /* engine_destroy_async finishes it */
                } else if (v->row.expires_at && v->row.expires_at <= now) {
                        log_info("%s: %s", v->row.name, why);
                        events_env("expired", v, NULL);
                        engine_destroy(e, v, true);
                } else {
                        env_expiry_set(e, v);
                }
        }
}

static void sweep_expired(struct loop_timer *t, void *data)
{
        struct engine *e = data;
        destroy_expired(e, "time to live expired");
        e->sweep = loop_add_timer(e->cfg.loop, 1000, sweep_expired, e);
}

/* Autostart: every stopped environment marked so is started once the daemon serves, over
 * turns of the loop (engine_start_async), AUTOSTART_PARALLEL at a time: after a host reboot
 * with a thousand of them the API answers at once (each is listed as "starting" until it
 * runs), rather than after every start in turn. */
#define AUTOSTART_PARALLEL 4

struct autostart {
        char (*names)[NAME_BUF_SIZE];
        size_t n, next, running;
};

static void autostart_next(struct engine *e);

static void on_autostarted(struct engine *e, struct env *v, int r, const char *err, void *data)
{
        char *name = data;
        if (r < 0 && r != -ECANCELED)
                log_error("%s: autostart failed: %s", name, err);
        free(name);
        if (!e->autostart)
                return;
        e->autostart->running--;
        if (r != -ECANCELED) /* the daemon stops: nothing more */
                autostart_next(e);
}

static void autostart_next(struct engine *e)
{
        struct autostart *a = e->autostart;
        while (a->next < a->n && a->running < AUTOSTART_PARALLEL) {
                const char *name = a->names[a->next++];
                struct env *v = engine_find(e, name);
                if (!v || v->pidfd >= 0 || !v->row.autostart)
                        continue; /* deleted, started by hand or changed meanwhile */
                char err[512], *mine = strdup(name);
                int r = mine ? engine_start_async(e, v, on_autostarted, mine, err, sizeof(err))
                             : -ENOMEM;
                if (r < 0) {
                        if (r != -EBUSY) /* starting or being deleted: not ours to start */
                                log_error("%s: autostart failed: %s", name,
                                          mine ? err : "out of memory");
                        free(mine);
                        continue;
                }
                a->running++;
        }
        if (a->next == a->n && a->running == 0)
                engine_autostart_free(e);
}

static void autostart_begin(struct engine *e)
{
        size_t n = 0;
        for (struct env *v = e->envs; v; v = v->next)
                n += v->pidfd < 0 && v->row.autostart;
        if (!n)
                return;
        struct autostart *a = calloc(1, sizeof(*a));
        if (a)
                a->names = calloc(n, sizeof(*a->names));
        if (!a || !a->names) {
                free(a);
                log_error("autostart: out of memory: %zu environments stay stopped", n);
                return;
        }
        for (struct env *v = e->envs; v && a->n < n; v = v->next)
                if (v->pidfd < 0 && v->row.autostart)
                        memcpy(a->names[a->n++], v->row.name, NAME_BUF_SIZE);
        log_info("autostart: starting %zu environments, %d at a time", n, AUTOSTART_PARALLEL);
        e->autostart = a;
        autostart_next(e);
}

void engine_autostart_free(struct engine *e)
{
        if (!e->autostart)
                return;
        free(e->autostart->names);
        free(e->autostart);
        e->autostart = NULL;
}

static bool known_env(struct engine *e, const char *name)
{
        return engine_find(e, name) != NULL;
}

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
        network_batch_begin(e->net);
        if (state_port_list(e->cfg.state, NULL, &ports, &np) >= 0)
                for (size_t i = 0; i < np; i++) {
                        struct env *v = engine_find(e, ports[i].env);
                        if (v && v->addr.s_addr && v->pidfd >= 0 && v->net.mode != NET_NONE)
                                network_port_add(e->net, v->row.name, ports[i].proto,
                                                 ports[i].host_port, v->addr, ports[i].port);
                }
        network_batch_end(e->net);
        free(ports);
}

static void remove_orphan_dirs(struct engine *e)
{
        _cleanup_free_ char *path = path_join(e->cfg.root, "envs");
        _cleanup_closedir_ DIR *d = path ? opendir(path) : NULL;
        if (!d)
                return;
        struct dirent *de;
        while ((de = readdir(d))) {
                if (de->d_name[0] == '.' || known_env(e, de->d_name))
                        continue;
                log_info("removing orphaned directory envs/%s", de->d_name);
                _cleanup_free_ char *orphan = path_join(path, de->d_name);
                if (orphan)
                        e->cfg.storage->ops->destroy(e->cfg.storage, orphan);
                rm_rf_at(dirfd(d), de->d_name);
        }
}

/* Id ranges claimed for this root (their note starts "ROOT\t", owner_note) by a name that has
 * no environment. */
static void remove_orphan_id_claims(struct engine *e)
{
        _cleanup_closedir_ DIR *d = opendir(e->cfg.uid_registry);
        char prefix[4200];
        int plen = BUF_PRINTF(prefix, "%s\t", e->cfg.root);
        if (!d || plen < 0)
                return;
        struct dirent *de;
        while ((de = readdir(d))) {
                _cleanup_free_ char *note = NULL;
                if (de->d_name[0] == '.' || read_file_at(dirfd(d), de->d_name, 4300, &note) < 0)
                        continue;
                if (strncmp(note, prefix, (size_t)plen) == 0 && !known_env(e, note + plen)) {
                        log_info("releasing orphaned id range %s", de->d_name);
                        unlinkat(dirfd(d), de->d_name, 0);
                }
        }
}

/* Leftovers of environments that have no record: firewall state, cgroups, directories, id
 * claims. */
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
        remove_orphan_dirs(e);
        remove_orphan_id_claims(e);
}

int engine_reconcile(struct engine *e)
{
        /* Re-adopted environments get their firewall applied again, all in a few batches. */
        if (e->net)
                network_batch_begin(e->net);
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
                if (owner_note(e, v->row.name, owner, sizeof(owner)) >= 0)
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
        if (e->net)
                network_batch_end(e->net);
        remove_orphans(e);
        destroy_expired(e, "expired while the daemon was down");
        autostart_begin(e);
        e->sweep = loop_add_timer(e->cfg.loop, 1000, sweep_expired, e);
        engine_idle_start(e);
        return 0;
}

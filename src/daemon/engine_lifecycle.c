/* An environment's life: start (cgroup, user namespace, disk, PID 1, network), the exit of
 * PID 1, stop with its grace period, pause; create (journal row first, then id range, disk and
 * start), destroy, and patch (limits, disk, TTL, policy). Each change is recorded before it is
 * acknowledged: the row's status is the journal engine_reconcile.c reads after a crash. */
#include "daemon/engine_internal.h"
#include "daemon/events.h"
#include "daemon/exec.h"
#include "daemon/log.h"
#include "daemon/lxcfs.h"
#include "daemon/spawner.h"
#include "lib/btrfs.h"
#include "daemon/syncer.h"
#include "lib/blockdev.h"
#include "lib/spawn.h"
#include "lib/userns.h"
#include "lib/util.h"

#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <sys/wait.h>

static void env_on_exit(struct loop_source *s, int fd, uint32_t events, void *data);
static void env_kill_sync(struct engine *e, struct env *v);
static void start_overtaken(struct engine *e, struct env *v, const char *why);

static const char *kind_name(enum env_kind k)
{
        return k == KIND_COMPUTER ? "computer" : "sandbox";
}

int env_watch(struct engine *e, struct env *v)
{
        return loop_add_fd(e->cfg.loop, v->pidfd, EPOLLIN, env_on_exit, v, &v->exit_src);
}

/* The block device that carries an environment's disk I/O, into l->io_dev: a computer's disk
 * (the btrfs pool's loop device, the dir driver's per-computer image, or the host disk holding
 * the state directory), a sandbox's image (sandboxes write only to tmpfs). Found when limits
 * first need it; each start finds it again (a per-computer image may get another loop device
 * after a reboot). */
static int env_io_device(struct engine *e, const struct env *v, struct cgroup_limits *l,
                         char *err, size_t errlen)
{
        if (!cgroup_limits_have_io(l) || l->io_dev)
                return 0;
        char path[4096];
        int r;
        if (v->kind == KIND_COMPUTER) {
                r = env_dir(e, v->row.name, "disk", path, sizeof(path));
                if (r >= 0 && access(path, F_OK) < 0)
                        r = env_dir(e, v->row.name, NULL, path, sizeof(path));
        } else
                r = image_rootfs(e, v->row.image, path, sizeof(path));
        if (r >= 0)
                r = blockdev_of_path(path, &l->io_dev);
        if (r < 0) {
                snprintf(err, errlen, "disk I/O limits: no block device found for %s: %s", path,
                         strerror(-r));
                return r == -ENODEV || r == -EXDEV ? -EOPNOTSUPP : r;
        }
        return 0;
}

/* env_dir/cpu-online, bound over the environment's /sys/devices/system/cpu/online: "0-N" for
 * ceil(its CPU limit) CPUs, at most the host's. glibc's get_nprocs (sysconf, os.cpu_count(),
 * many runtimes) reads it. Rewritten in place on update (a new inode would leave the bind on
 * the old one). */
static int env_write_cpu_online(struct engine *e, const struct env *v, uint64_t cpu_millis,
                                char *path, size_t len)
{
        int r = env_dir(e, v->row.name, "cpu-online", path, len);
        if (r < 0)
                return r;
        long host = sysconf(_SC_NPROCESSORS_ONLN);
        uint64_t n = host > 0 ? (uint64_t)host : 1;
        if (cpu_millis != CG_UNLIMITED && (cpu_millis + 999) / 1000 < n)
                n = (cpu_millis + 999) / 1000;
        char buf[32];
        int len2 = n > 1 ? snprintf(buf, sizeof(buf), "0-%llu\n", (unsigned long long)(n - 1))
                         : snprintf(buf, sizeof(buf), "0\n");
        _cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW,
                                      0444);
        if (fd < 0)
                return -errno;
        if (write(fd, buf, (size_t)len2) != len2)
                return -EIO;
        return 0;
}

/* The user namespace's throw-away child is killed but not waited for (on a busy host it must
 * first be scheduled to die: 3 ms of the loop's time per create at 2,000 environments); the
 * loop reaps it once its pidfd says it is gone. */
struct holder_corpse {
        struct userns_holder h;
        struct loop_source *src;
};

static void on_holder_gone(struct loop_source *s, int fd, uint32_t events, void *data)
{
        (void)fd;
        (void)events;
        struct holder_corpse *c = data;
        loop_remove(s);
        userns_holder_reap(&c->h);
        free(c);
}

static int userns_create_later(struct engine *e, uint32_t base, int *ret_fd)
{
        struct holder_corpse *c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        int r = userns_create_nowait(base, UID_RANGE_SIZE, ret_fd, &c->h);
        if (r < 0) {
                free(c);
                return r;
        }
        if (loop_add_fd(e->cfg.loop, c->h.pidfd, EPOLLIN, on_holder_gone, c, &c->src) < 0) {
                userns_holder_reap(&c->h);
                free(c);
        }
        return 0;
}

/* The first step of a start: its image there, its disk's device for I/O limits, and (make) its
 * cgroups; a start over turns leaves those to the clone (spawn_config.make_cgroup), which the
 * spawn process makes, off the loop. */
static int env_spawn_check(struct engine *e, struct env *v, bool make, char *err, size_t errlen)
{
        char image[4096];
        int r = image_rootfs(e, v->row.image, image, sizeof(image));
        if (r < 0) {
                snprintf(err, errlen, "%s: its paths are too long", v->row.name);
                return r;
        }
        if (access(image, F_OK) < 0) {
                snprintf(err, errlen, "image %s is missing", v->row.image);
                return -ENOEXEC;
        }
        v->limits.io_dev = 0;
        r = env_io_device(e, v, &v->limits, err, errlen);
        if (r < 0 || !make)
                return r;
        r = cgroup_env_create(e->cfg.cgroups, v->cgname, &v->limits);
        if (r < 0)
                snprintf(err, errlen, "cgroup: %s", strerror(-r));
        return r;
}

struct env_creating;
static int creating_spawn(struct env_creating *c, const struct spawn_config *sc);

/* The second: PID 1's child cloned (with its user namespace and disk); it sets up on its
 * own. On failure its cgroups go too. With `async` (a create or start over turns), the spawn
 * process clones it if it can: 1, and creating_spawned has the answer; else 0 with p. */
static int env_spawn_clone(struct engine *e, struct env *v, struct spawn_pending *p,
                           struct env_creating *async, char *err, size_t errlen)
{
        char dir[4096], image[4096], resolv[4200];
        int r = env_dir(e, v->row.name, NULL, dir, sizeof(dir));
        if (r >= 0)
                r = image_rootfs(e, v->row.image, image, sizeof(image));
        if (r >= 0)
                r = write_resolv_conf(e, dir, resolv, sizeof(resolv));
        if (r < 0) {
                snprintf(err, errlen, "%s: its paths are too long", v->row.name);
                cgroup_env_destroy(e->cfg.cgroups, v->cgname, NULL);
                return r;
        }
        char cpu_online[4200];
        bool have_online = env_write_cpu_online(e, v, v->limits.cpu_millis, cpu_online,
                                                sizeof(cpu_online)) >= 0;
        _cleanup_close_ int userns = -EBADF;
        r = userns_create_later(e, v->row.uid_base, &userns);
        if (r < 0) {
                snprintf(err, errlen, "user namespace: %s", strerror(-r));
                cgroup_env_destroy(e->cfg.cgroups, v->cgname, NULL);
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
                           .shm_bytes = DEFAULT_SHM_BYTES,
                           .resolv_conf = resolv,
                           .lxcfs_dir = lxcfs_dir(e->cfg.lxcfs),
                           .cpu_online = have_online ? cpu_online : NULL},
                .cgroups = e->cfg.cgroups,
                .cgroup_name = v->cgname,
                .init_fd = e->cfg.init_fd,
                .init_envp = envp,
                .net = !e->net || v->net.mode == NET_NONE ? SPAWN_NET_NONE
                       : network_has_ipv6(e->net)         ? SPAWN_NET_V6
                                                          : SPAWN_NET_V4,
                .make_cgroup = async ? &v->limits : NULL, /* env_spawn_check left them */
        };
        v->net_set_at_start = sc.net != SPAWN_NET_NONE;
        /* A computer is a whole machine (udev, systemd-networkd read /sys/class/net): its own. */
        sc.rootfs.sysfs_shared = v->kind == KIND_SANDBOX && sc.net == SPAWN_NET_NONE;
        char tree[4200];
        if ((v->kind == KIND_COMPUTER || e->cfg.storage->info.shifted) &&
            (r = e->cfg.storage->ops->root(e->cfg.storage, dir, &sc.rootfs, tree, sizeof(tree))) < 0) {
                envp_free(envp);
                cgroup_env_destroy(e->cfg.cgroups, v->cgname, NULL);
                snprintf(err, errlen, "storage: %s", strerror(-r));
                return r;
        }
        r = async ? creating_spawn(async, &sc) : -ESRCH;
        if (r == 0) {
                envp_free(envp);
                return 1;
        }
        if (r == -ESRCH || r == -E2BIG) /* no spawn process, or a request too big for it */
                r = env_spawn_start(&sc, p, err, errlen);
        else
                snprintf(err, errlen, "spawn: %s", strerror(-r));
        envp_free(envp);
        if (r < 0)
                cgroup_env_destroy(e->cfg.cgroups, v->cgname, NULL);
        return r;
}

/* PID 1 exec'd (waiting up to timeout_ms for its report): running, in memory only. On failure
 * nothing of it is left (its exec slot and cgroups removed). */
static int env_spawn_running(struct engine *e, struct env *v, struct spawn_pending *p,
                             int timeout_ms, char *err, size_t errlen)
{
        struct spawn_result res;
        int r = env_spawn_finish(p, timeout_ms, &res, err, errlen);
        if (r < 0) {
                exec_slot_discard(v);
                cgroup_env_destroy(e->cfg.cgroups, v->cgname, NULL);
                return r;
        }
        env_set_pidfd(e, v, res.pidfd);
        v->is_child = true;
        v->row.pid = res.pid;
        v->row.pid_start = res.start_time;
        snprintf(v->row.status, sizeof(v->row.status), "running");
        return 0;
}

/* Its network is up: linked peers accept its address, and its start is recorded.
 * `synced`: its record is on disk and its exit watched on return (on failure PID 1 is killed);
 * else the record is only written, and the caller watches it once a sync made the record
 * durable (creating_synced), or ends it on failure (creating_unrun). */
static int env_spawn_record(struct engine *e, struct env *v, bool synced, char *err,
                            size_t errlen)
{
        if (e->net && v->net.mode != NET_NONE)
                reapply_linked(e, v); /* links are symmetric: peers accept the new address */
        int r;
        if (!synced) {
                r = env_save_unsynced(e, v);
                if (r < 0)
                        snprintf(err, errlen, "record start: %s", strerror(-r));
                return r;
        }
        r = env_watch(e, v);
        if (r >= 0)
                r = env_save(e, v);
        if (r < 0) {
                snprintf(err, errlen, "record start: %s", strerror(-r));
                sys_pidfd_send_signal(v->pidfd, SIGKILL, 0);
        }
        return r;
}

/* PID 1's start in one go: running, its network up, recorded (synced) and watched. */
static int env_spawn_complete(struct engine *e, struct env *v, struct spawn_pending *p,
                              int timeout_ms, char *err, size_t errlen)
{
        int r = env_spawn_running(e, v, p, timeout_ms, err, errlen);
        if (r < 0)
                return r;
        r = env_net_up(e, v, false, true, err, errlen);
        if (r < 0) {
                env_kill_sync(e, v);
                return r;
        }
        return env_spawn_record(e, v, true, err, errlen);
}

static int env_spawn_begin(struct engine *e, struct env *v, struct spawn_pending *p, char *err,
                           size_t errlen)
{
        int r = env_spawn_check(e, v, true, err, errlen);
        return r < 0 ? r : env_spawn_clone(e, v, p, NULL, err, errlen);
}

static int env_spawn_now(struct engine *e, struct env *v, char *err, size_t errlen)
{
        struct spawn_pending p;
        int r = env_spawn_begin(e, v, &p, err, errlen);
        return r < 0 ? r : env_spawn_complete(e, v, &p, SPAWN_SETUP_MS, err, errlen);
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

void slot_watch_end(struct env *v)
{
        if (!v->slot_gone_src)
                return;
        loop_remove(v->slot_gone_src);
        v->slot_gone_src = NULL;
        close(v->slot_gone_fd);
}

void env_mark_stopped(struct engine *e, struct env *v)
{
        slot_watch_end(v);
        if (v->pidfd >= 0) {
                if (v->is_child) {
                        siginfo_t si;
                        waitid(P_PIDFD, (id_t)v->pidfd, &si, WEXITED | WNOHANG);
                }
                loop_remove(v->exit_src);
                v->exit_src = NULL;
                close(v->pidfd);
                env_set_pidfd(e, v, -EBADF);
        }
        loop_cancel_timer(v->kill_timer);
        v->kill_timer = NULL;
        v->stopping = false;
        /* Commands exec'd into it are our children (CLONE_PARENT): the pid namespace's end
         * killed them; reap them so the cgroup can empty. */
        exec_reap_env(v, 1000);
        exec_slot_discard(v);
        events_env_stopped(e, v); /* reads the OOM count: before the cgroup goes */
        int r = cgroup_env_destroy(e->cfg.cgroups, v->cgname, NULL);
        if (r < 0 && r != -ENOENT)
                log_warn("%s: removing cgroups: %s", v->row.name, strerror(-r));
        if (e->net && v->net.mode != NET_NONE)
                network_env_gone(e->net, v->row.name, v->addr); /* its processes are gone */
        v->row.pid = 0;
        v->row.pid_start = 0;
        v->paused = false;
        if (v->deleting)
                return; /* the record says "deleting" and goes next: nothing to write */
        snprintf(v->row.status, sizeof(v->row.status), "stopped");
        r = env_save(e, v);
        if (r < 0)
                log_error("%s: recording stop: %s", v->row.name, strerror(-r));
}

static void dying_step(struct env *v);
static bool slots_gone_later(struct env *v);

/* A stop or delete whose processes did not die in DYING_MAX_MS (a cgroup frozen from outside,
 * a task stuck in the kernel) has its cgroup killed and is finished the waiting way. */
#define DYING_MAX_MS 10000

static void stopped(struct env *v)
{
        log_info("%s: stopped", v->row.name);
        env_mark_stopped(v->eng, v); /* reaps the slots */
        notify_waiters(v);
}

/* The next of a stopping environment's exec slots is gone (on_slot_gone). */
static void stopped_step(struct env *v)
{
        if (!slots_gone_later(v))
                stopped(v);
}

static void on_stop_too_long(struct loop_timer *t, void *data)
{
        (void)t;
        struct env *v = data;
        v->kill_timer = NULL; /* fired */
        log_warn("%s: its exec slots still run %d s after PID 1 ended: killing its cgroup",
                 v->row.name, DYING_MAX_MS / 1000);
        /* Thaws a group frozen from outside and kills everything in it (bounded). */
        cgroup_env_kill(v->eng->cfg.cgroups, v->cgname, NULL);
        stopped(v);
}

/* PID 1 of an environment that is not being deleted has exited (a stop, or it ended on its
 * own): stopped once its exec slots, outside its pid namespace and killed now, are gone too
 * (slots_gone_later), rather than the loop waiting for them in env_mark_stopped. Meanwhile it
 * is "stopping" (a stop asked then waits for it; a delete takes over). */
static void env_on_exit(struct loop_source *s, int fd, uint32_t events, void *data)
{
        struct env *v = data;
        if (v->deleting) { /* engine_destroy_async's */
                dying_step(v);
                return;
        }
        if (!slots_gone_later(v)) {
                stopped(v);
                return;
        }
        v->stopping = true; /* also when it ended on its own: no longer running */
        loop_cancel_timer(v->kill_timer); /* a stop's SIGKILL for PID 1, gone already */
        v->kill_timer = loop_add_timer(v->eng->cfg.loop, DYING_MAX_MS, on_stop_too_long, v);
}

/* Kill everything and wait (bounded) for PID 1 to be gone. */
/* SIGKILL to PID 1, and a wait of at most 5 s (then its cgroup killed, and up to 1 s more) for
 * it to exit. Killing PID 1 ends the pid namespace: the kernel kills everything else in it.
 * PID 1 finishes exiting only once every process of the namespace is reaped, and the commands
 * exec'd into it are our children (CLONE_PARENT): they are reaped while waiting. The exec slot,
 * outside the namespace, is told first: its exit (a copy of an address space to tear down)
 * then overlaps PID 1's. */
static void pid1_kill_wait(struct engine *e, struct env *v)
{
        exec_slot_kill(v);
        sys_pidfd_send_signal(v->pidfd, SIGKILL, 0);
        bool gone = false;
        for (uint64_t end = now_ms() + 5000; now_ms() < end && !gone;) {
                exec_reap_env(v, 0);
                struct pollfd p = {.fd = v->pidfd, .events = POLLIN};
                gone = poll(&p, 1, 10) > 0;
        }
        if (!gone) {
                /* A group frozen from outside (v1-frozen tasks act on SIGKILL only once thawed)
                 * or a task stuck in the kernel: the cgroup's kill thaws the group and kills
                 * everything in it, the exec slots too, whose reaping would wait for them. */
                log_warn("%s: PID 1 did not die in 5 s: killing its cgroup", v->row.name);
                cgroup_env_kill(e->cfg.cgroups, v->cgname, NULL);
                exec_reap_env(v, 1000);
        }
}

static void env_kill_sync(struct engine *e, struct env *v)
{
        if (v->pidfd < 0)
                return;
        if (v->paused)
                engine_pause(e, v, false);
        pid1_kill_wait(e, v);
        env_mark_stopped(e, v);
        if (!v->deleting) /* else once it is unlisted (destroy_finish): none may restart it */
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
        start_overtaken(e, v, "stopped");
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
        if (v->stopping || v->deleting)
                return; /* done runs when it has stopped, or when it is gone */
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
        if (v->pidfd < 0 || (pause && v->deleting))
                return -EBUSY; /* a frozen environment would not die */
        if (v->paused == pause)
                return 0;
        int r = cgroup_env_freeze(e->cfg.cgroups, v->cgname, pause);
        if (r < 0)
                return r;
        v->paused = pause;
        snprintf(v->row.status, sizeof(v->row.status), "%s", pause ? "paused" : "running");
        log_info("%s: %s", v->row.name, pause ? "paused" : "resumed");
        if (!pause) { /* whoever resumes it, it is no longer idle */
                v->idled_at = 0;
                engine_idle_arm(e, v);
        }
        events_env(pause ? "paused" : "resumed", v, NULL);
        return env_save(e, v);
}

bool env_paused(const struct env *v)
{
        return v->paused;
}

/* Whether v may start: stopped, and neither starting nor being deleted. */
static int start_check(const struct env *v, char *err, size_t errlen)
{
        if (v->deleting) { /* a restart that waited for its stop, say */
                snprintf(err, errlen, "%s is being deleted", v->row.name);
                return -EBUSY;
        }
        if (v->starting) {
                snprintf(err, errlen, "%s is starting", v->row.name);
                return -EBUSY;
        }
        if (v->pidfd >= 0) {
                snprintf(err, errlen, "%s is already running", v->row.name);
                return -EALREADY;
        }
        if (v->net.mode != NET_NONE && engine_ifname_busy(v->eng, v)) {
                snprintf(err, errlen, "%s cannot start with its network while another "
                         "environment with its network interface name (%s) runs", v->row.name,
                         v->ifname);
                return -EEXIST;
        }
        return 0;
}

/* A start's end, PID 1 running, watched and recorded: said, and its idle clock runs. */
static void start_announce(struct engine *e, struct env *v)
{
        engine_idle_arm(e, v);
        log_info("%s: started (pid %lld)", v->row.name, (long long)v->row.pid);
        events_env("started", v, NULL);
}

int engine_start(struct engine *e, struct env *v, char *err, size_t errlen)
{
        int r = start_check(v, err, errlen);
        if (r < 0)
                return r;
        int64_t idled_at = v->idled_at;
        v->idled_at = 0; /* recorded with the start */
        r = env_spawn_now(e, v, err, errlen);
        if (r < 0) {
                v->idled_at = idled_at;
                return r;
        }
        start_announce(e, v);
        exec_slot_prewarm(e, v);
        return 0;
}

static void on_pool_committed(int result, void *data)
{
        (void)data;
        if (result < 0)
                log_debug("committing the storage pool: %s", strerror(-result));
}

/* A computer's disk is a btrfs subvolume: its deletion is freed by btrfs' cleaner only after a
 * transaction commit, which btrfs makes by itself within 30 s; one is asked for at once, so
 * that the space (and the quota) come back at once, but by the sync process: a commit holds
 * its caller for 5-50 ms. Always on the same fd, so that deletes meanwhile share the next
 * commit rather than queue one each. */
static void pool_commit_later(struct engine *e)
{
        if (e->pool_commit_fd < 0) {
                _cleanup_free_ char *envs = path_join(e->cfg.root, "envs");
                if (!envs || (e->pool_commit_fd = open(envs, O_RDONLY | O_DIRECTORY |
                                                                   O_CLOEXEC)) < 0)
                        return;
        }
        if (syncer_fs_after(e->cfg.syncer, e->pool_commit_fd, on_pool_committed, NULL, NULL) < 0)
                on_pool_committed(btrfs_sync(e->pool_commit_fd), NULL); /* in place */
}

void env_remove_artifacts(struct engine *e, const char *name, uint32_t uid_base)
{
        char dir[4096], cg[CGROUP_NAME_SIZE];
        cgroup_name_of(name, cg);
        cgroup_env_destroy(e->cfg.cgroups, cg, NULL);
        if (env_dir(e, name, NULL, dir, sizeof(dir)) >= 0) {
                e->cfg.storage->ops->destroy(e->cfg.storage, dir);
                bool subvolume = false;
                int r = rm_rf_at_unsynced(AT_FDCWD, dir, &subvolume);
                if (r < 0)
                        log_warn("%s: removing %s: %s", name, dir, strerror(-r));
                if (subvolume)
                        pool_commit_later(e);
        }
        char owner[4200];
        if (uid_base && owner_note(e, name, owner, sizeof(owner)) >= 0)
                idrange_release_owned(e->cfg.uid_registry, owner, uid_base);
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
        if ((r = image_rootfs(e, v->row.image, image, sizeof(image))) < 0)
                return r;
        r = from_tree ? s->ops->env_clone(s, from_tree, dir, from_base, v->row.uid_base,
                                          v->disk_bytes)
                      : s->ops->env_create(s, dir, image, v->row.uid_base, v->disk_bytes);
        if (r >= 0 && !from_tree)
                spare_schedule(e, v->row.image);
        test_crash_point("create-disk");
        return r;
}

/* A create that failed, or was abandoned at shutdown: its disk, directory, id range and
 * record go (PID 1's child and cgroups are already gone). */
static void create_roll_back(struct engine *e, struct env *v)
{
        exec_slot_discard(v); /* one made alongside PID 1 (exec_slot_early) */
        if (v->addr.s_addr && !engine_find_addr(e, v->addr))
                addr_mark(e, v->addr, false); /* held since its link (env_addr_set) */
        env_remove_artifacts(e, v->row.name, v->row.uid_base);
        state_env_delete(e->cfg.state, v->row.name);
        env_free(v);
}

/* A create's first step: the checks, the id range, the record, the disk. On failure nothing
 * is left. */
static int create_prepare(struct engine *e, const struct env_spec *spec, struct env **ret,
                          char *err, size_t errlen)
{
        if (engine_find(e, spec->name) || engine_creating_find(e, spec->name)) {
                snprintf(err, errlen, "an environment named %s already exists", spec->name);
                return -EEXIST;
        }
        char ifname[16];
        int r = engine_ifname_check(e, spec->name, ifname, err, errlen);
        if (r < 0)
                return r;
        if (e->n_envs + e->n_creating >= MAX_ENVS) {
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
        env_ifname_set(e, v, ifname);
        cgroup_name_of(v->row.name, v->cgname);
        snprintf(v->row.kind, sizeof(v->row.kind), "%s", kind_name(spec->kind));
        snprintf(v->row.image, sizeof(v->row.image), "%s", spec->image);
        snprintf(v->row.owner, sizeof(v->row.owner), "%s", spec->owner ? spec->owner : "");
        snprintf(v->row.status, sizeof(v->row.status), "creating");
        v->row.created_at = wall_s();
        v->row.expires_at = spec->ttl_s ? v->row.created_at + (int64_t)spec->ttl_s : 0;
        v->row.autostart = spec->autostart;
        v->idle_timeout_s = spec->idle_timeout_s;
        v->idle_stop = spec->idle_action == IDLE_STOP ||
                       (spec->idle_action == IDLE_DEFAULT && spec->kind == KIND_COMPUTER);
        v->row.spec = spec_dump(v);

        char owner[4200];
        r = owner_note(e, spec->name, owner, sizeof(owner));
        if (r >= 0)
                r = idrange_claim(e->cfg.uid_registry, owner, &v->row.uid_base);
        if (r < 0) {
                snprintf(err, errlen, "no free id range: %s", strerror(-r));
                env_free(v);
                return r;
        }
        /* Journal first: a crash from here on is rolled back at the next start. The row need
         * not be on disk yet: until the synced save of "running" (env_spawn_now, before the
         * answer) a crash may lose it, and the next start then removes what it left as
         * orphans (cgroup with PID 1 in it, directory, id claim: engine_reconcile.c), which is
         * the same roll-back. */
        r = state_env_insert_unsynced(e->cfg.state, &v->row);
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
        if (r < 0) {
                create_roll_back(e, v);
                return r;
        }
        *ret = v;
        return 0;
}

/* Its image and I/O device (its cgroups come with the clone). On failure everything of the
 * create is removed (v freed). */
static int create_check(struct engine *e, struct env *v, char *err, size_t errlen)
{
        int r = env_spawn_check(e, v, false, err, errlen);
        if (r < 0)
                create_roll_back(e, v);
        return r;
}

/* PID 1's clone (it sets up on its own; 1: by the spawn process, as env_spawn_clone). On
 * failure everything is removed (v freed). */
static int create_clone(struct engine *e, struct env *v, struct spawn_pending *p,
                        struct env_creating *c, char *err, size_t errlen)
{
        int r = env_spawn_clone(e, v, p, c, err, errlen);
        if (r < 0)
                create_roll_back(e, v);
        return r;
}

/* Asks the sync process to make what was written so far (v's unsynced row) durable, fn called
 * then; false if it cannot (none, or no fd for the log): sync_in_place. */
static bool sync_later(struct engine *e, syncer_fn fn, void *data, struct syncer_wait **ret)
{
        int wal = state_wal_fd(e->cfg.state);
        return wal >= 0 && e->cfg.syncer && syncer_after(e->cfg.syncer, wal, fn, data, ret) >= 0;
}

/* The same, in the loop: the log synced, or without an fd for it v's row written again with
 * a synced commit. 0 or -errno. */
static int sync_in_place(struct engine *e, struct env *v)
{
        int wal = state_wal_fd(e->cfg.state);
        if (wal >= 0)
                return fdatasync(wal) < 0 ? -errno : 0;
        return env_save(e, v);
}

/* A create's last step, its record durable and its PID 1 watched: listed and announced. */
static void create_listed(struct engine *e, struct env *v)
{
        env_append(e, v);
        if (e->net && v->net.mode != NET_NONE)
                reapply_linked(e, v); /* now that it is listed, peers see its address */
        log_info("%s: created %s from image %s (ids %u..%u)", v->row.name, v->row.kind,
                 v->row.image, v->row.uid_base, v->row.uid_base + UID_RANGE_SIZE - 1);
        events_env("created", v, json_pack("{s:s,s:s}", "kind", v->row.kind,
                                           "image", v->row.image));
        events_env("started", v, NULL);
        engine_idle_arm(e, v);
        exec_slot_go(v);
        exec_slot_prewarm(e, v); /* if it has none */
}


/* ---- creates that answer once PID 1 runs (engine_create_async) ----------------------------- */

/* Each step of an async create runs in a turn of its own, so that what other clients asked
 * meanwhile is answered between them: each is a millisecond or more of the kernel's work
 * (more on a busy host), and together they would hold the loop for all of it. */
enum creating_step {
        STEP_CHECK, /* its image and I/O device (create_check); its cgroups come with the clone */
        STEP_CLONE,  /* PID 1's clone (create_clone) */
        STEP_SLOT,   /* its exec slot listed (the spawn process's, made with PID 1) or cloned
                      * here; then PID 1's report is awaited */
        STEP_SETUP,  /* waiting for PID 1's report */
        STEP_NET,    /* PID 1 runs, its link is up: its firewall and bandwidth next (creating_end) */
        STEP_SYNC,   /* running, its record written: waiting for the disk (the syncer) */
        STEP_CLONING, /* STEP_CLONE asked the spawn process: waiting for its answer */
};

struct env_creating {
        struct engine *eng;
        struct env *v; /* not listed yet: found by engine_creating_find */
        enum creating_step step;
        struct spawn_pending p;   /* pid 0 until STEP_CLONE */
        struct loop_source *src; /* PID 1's report pipe, from STEP_SETUP */
        struct loop_timer *timer; /* the next step's turn; in STEP_SETUP its time limit */
        struct syncer_wait *wait; /* in STEP_SYNC */
        struct spawner_req *spawn_req; /* in STEP_CLONING */
        /* Cloned by the spawn process, and the exec slot that came with PID 1 (pid 0: none),
         * in the group slot_sub below the environment's, until STEP_SLOT lists it. */
        bool spawned;
        struct join_slot slot;
        char slot_sub[32];
        /* A listed environment's start (engine_start_async; v->starting), not a create: no
         * disk or record to make or roll back, and its idled_at as before it, kept if it
         * fails. */
        bool start;
        int64_t idled_at;
        struct start_joiner *joiners; /* a start's other callers (engine_start_join), in order */
        struct start_joiner **joiners_end; /* where the next one goes (NULL: &joiners) */
        unsigned link_waits; /* turns spent waiting for the previous run's link to go */
        engine_created_fn done;  /* NULL once the caller forgot it */
        void *data;
        /* A fork's source and snapshot ("": none), for its log line and "fork" event. */
        char fork_of[NAME_BUF_SIZE], fork_snapshot[NAME_BUF_SIZE];
        struct env_creating *next;
};

struct start_joiner {
        engine_created_fn fn;
        void *data;
        struct start_joiner *next;
};

/* A start's other callers hear what its first one heard (v NULL when r < 0); frees j. */
static void joiners_answer(struct engine *e, struct start_joiner *j, struct env *v, int r,
                           const char *err)
{
        while (j) {
                struct start_joiner *next = j->next;
                j->fn(e, r < 0 ? NULL : v, r, err, j->data);
                free(j);
                j = next;
        }
}

/* Who waits for a start ends: its first caller and the ones that joined, taken from it before
 * it is freed (callers_of), then answered (callers_answer, v NULL when r < 0). */
struct start_callers {
        engine_created_fn done;
        void *data;
        struct start_joiner *joiners;
};

static struct start_callers callers_of(const struct env_creating *c)
{
        return (struct start_callers){.done = c->done, .data = c->data, .joiners = c->joiners};
}

static void callers_answer(struct engine *e, const struct start_callers *k, struct env *v, int r,
                           const char *err)
{
        if (k->done)
                k->done(e, r < 0 ? NULL : v, r, err, k->data);
        joiners_answer(e, k->joiners, v, r, err);
}

/* A fork runs: said in the log, and to the source's watchers if it is still there. */
static void fork_announce(struct engine *e, const struct env_creating *c)
{
        const char *snap = c->fork_snapshot[0] ? c->fork_snapshot : NULL;
        log_info("%s: forked from %s%s%s", c->v->row.name, c->fork_of, snap ? " snapshot " : "",
                 snap ? snap : "");
        struct env *src = engine_find(e, c->fork_of);
        if (src)
                events_env("fork", src,
                           json_pack("{s:s,s:s?}", "to", c->v->row.name, "snapshot", snap));
}

static void creating_unlist(struct env_creating *c)
{
        struct engine *e = c->eng;
        if (c->start) {
                c->v->starting = NULL;
                e->n_starting--;
                return;
        }
        for (struct env_creating **pp = &e->creating; *pp; pp = &(*pp)->next)
                if (*pp == c) {
                        *pp = c->next;
                        break;
                }
        e->n_creating--;
}

/* The create's end: listed and answered, or (r < 0) rolled back and answered with err. */
static void creating_done(struct env_creating *c, int r, const char *err)
{
        struct engine *e = c->eng;
        creating_unlist(c);
        char name[NAME_BUF_SIZE];
        snprintf(name, sizeof(name), "%s", c->v->row.name);
        if (r < 0 && c->start) {
                if (c->v->idled_at != c->idled_at) { /* zeroed with its record of the start */
                        c->v->idled_at = c->idled_at; /* still stopped, as before */
                        env_save(e, c->v);
                }
        } else if (r < 0) {
                create_roll_back(e, c->v);
        } else if (c->start) {
                start_announce(e, c->v);
                exec_slot_go(c->v);
                exec_slot_prewarm(e, c->v); /* if it has none */
        } else {
                create_listed(e, c->v);
                if (c->fork_of[0])
                        fork_announce(e, c);
        }
        if (c->done)
                c->done(e, r < 0 ? NULL : c->v, r, err, c->data);
        else if (r < 0)
                log_warn("%s %s failed: %s", c->start ? "start" : "create", name, err);
        joiners_answer(e, c->joiners, c->v, r, err);
        free(c);
}

static void creating_unrun(struct env_creating *c);

/* Its record of the start is on disk (or the disk failed: said, and the create goes on; it
 * runs, and a host crash before the next synced write may lose it): its exit watched. */
static void creating_synced(struct env_creating *c, int result)
{
        struct engine *e = c->eng;
        if (result < 0)
                log_error("%s: the state database could not be synced (%s): a host crash may lose "
                          "this environment's record", c->v->row.name, strerror(-result));
        char err[512] = "";
        int r = env_watch(e, c->v);
        if (r < 0) {
                snprintf(err, sizeof(err), "record start: %s", strerror(-r));
                if (c->start)
                        env_kill_sync(e, c->v); /* its start is on disk: its stop is written */
                else
                        creating_unrun(c); /* never announced: its row goes with the roll back */
        }
        creating_done(c, r, err);
}

static void on_creating_synced(int result, void *data)
{
        struct env_creating *c = data;
        c->wait = NULL; /* answered: freed */
        creating_synced(c, result);
}

static void on_creating_step(struct loop_timer *t, void *data);

/* PID 1 runs with its network up: its start recorded without waiting for the disk, which the
 * sync process waits for while the loop serves others; in place without one. */
static void creating_record(struct env_creating *c)
{
        struct engine *e = c->eng;
        char err[512] = "";
        int r = env_spawn_record(e, c->v, false, err, sizeof(err));
        if (r < 0) {
                creating_unrun(c);
                creating_done(c, r, err);
                return;
        }
        if (sync_later(e, on_creating_synced, c, &c->wait)) {
                c->step = STEP_SYNC;
                return;
        }
        creating_synced(c, sync_in_place(e, c->v));
}

/* PID 1's report is in (or its time is up): it runs. A networked one gets its link in this
 * turn and its firewall and bandwidth in the next (STEP_NET): each is milliseconds of the
 * kernel's work at a large population. Until then the link reaches nothing but the resolver
 * (network.h), which leaves its queries unanswered (net_pending). */
static void creating_end(struct env_creating *c, int timeout_ms)
{
        struct engine *e = c->eng;
        loop_remove(c->src);
        c->src = NULL;
        loop_cancel_timer(c->timer);
        c->timer = NULL;
        char err[512] = "";
        if (c->start)
                c->v->idled_at = 0; /* recorded with the start (creating_done restores it) */
        int r = env_spawn_running(e, c->v, &c->p, timeout_ms, err, sizeof(err));
        if (r < 0) {
                creating_done(c, r, err);
                return;
        }
        if (!e->net || c->v->net.mode == NET_NONE) {
                creating_record(c);
                return;
        }
        c->step = STEP_NET;
        c->v->net_pending = true; /* its resolver waits for its firewall (env_by_addr) */
        r = env_net_link(e, c->v, err, sizeof(err));
        if (r >= 0) {
                c->timer = loop_add_next_turn(e->cfg.loop, on_creating_step, c);
                if (c->timer)
                        return;
                r = -ENOMEM;
                snprintf(err, sizeof(err), "out of memory");
        }
        creating_unrun(c);
        creating_done(c, r, err);
}

/* A PID 1 that ran but whose start is not announced: reaped whenever it ends. */
static void on_pid1_corpse(struct loop_source *s, int fd, uint32_t events, void *data)
{
        (void)events;
        (void)data;
        siginfo_t si;
        waitid(P_PIDFD, (id_t)fd, &si, WEXITED | WNOHANG);
        loop_remove(s);
        close(fd);
}

/* A PID 1 that runs but whose start is not recorded yet (its firewall or its record failed, or
 * a delete, stop or shutdown overtook it between its link and its firewall, STEP_NET): killed
 * and reaped, its network, exec slot and cgroups removed, and the environment as before the
 * start in memory. Not announced yet: no "stopped" event, nothing written (a create's row goes
 * with its roll back; a start's record still says stopped). The wait is env_kill_sync's
 * (bounded); a PID 1 held past it by a task stuck in the kernel (a stalled FUSE read) is reaped
 * by the loop when it ends. */
static void creating_unrun(struct env_creating *c)
{
        struct engine *e = c->eng;
        struct env *v = c->v;
        v->net_pending = false;
        pid1_kill_wait(e, v);
        siginfo_t si = {0};
        if ((waitid(P_PIDFD, (id_t)v->pidfd, &si, WEXITED | WNOHANG) < 0 || si.si_pid == 0) &&
            loop_add_fd(e->cfg.loop, v->pidfd, EPOLLIN, on_pid1_corpse, NULL, NULL) >= 0) {
                log_warn("%s: PID 1 (pid %lld) has not ended yet: reaped when it does",
                         v->row.name, (long long)v->row.pid);
                env_set_pidfd(e, v, -EBADF); /* the corpse's now */
        } else {
                close(v->pidfd);
                env_set_pidfd(e, v, -EBADF);
        }
        if (e->net && v->net.mode != NET_NONE)
                network_env_gone(e->net, v->row.name, v->addr);
        exec_slot_discard(v);
        cgroup_env_destroy(e->cfg.cgroups, v->cgname, NULL);
        v->row.pid = 0;
        v->row.pid_start = 0;
        snprintf(v->row.status, sizeof(v->row.status), "stopped");
        if (c->start)
                v->idled_at = c->idled_at; /* zeroed in memory only: its record is as before */
}

/* A create or start given up before its start is recorded (no loop slot for it, a delete or
 * stop, shutdown): its child killed and reaped, everything it made removed (a start's
 * environment stays, stopped). Not on the creating list (any more). */
static void creating_cancel(struct env_creating *c)
{
        loop_remove(c->src);
        loop_cancel_timer(c->timer);
        spawner_cancel(c->spawn_req); /* its child, if made, killed and reaped */
        join_slot_discard(&c->slot); /* one that came with PID 1, not listed yet */
        env_spawn_abandon(&c->p);
        if (c->step == STEP_NET) {
                log_info("%s: PID 1 killed before its firewall was in", c->v->row.name);
                creating_unrun(c);
        }
        exec_slot_discard(c->v);
        cgroup_env_destroy(c->eng->cfg.cgroups, c->v->cgname, NULL);
        if (!c->start) /* a start's environment stays as it was (idled_at is changed later) */
                create_roll_back(c->eng, c->v);
        free(c);
}

static void on_creating_report(struct loop_source *s, int fd, uint32_t events, void *data)
{
        (void)s;
        (void)fd;
        (void)events;
        creating_end(data, 0);
}

static void on_creating_timeout(struct loop_timer *t, void *data)
{
        (void)t;
        struct env_creating *c = data;
        c->timer = NULL; /* firing: it frees itself */
        creating_end(c, 0);
}

/* A step failed: the caller hears why, and nothing of the create (or start) is left.
 * `removed`: the step already removed everything (a create's environment freed, so its name
 * comes separately); else it is cancelled here. */
static void creating_fail(struct env_creating *c, const char *name, bool removed, int r,
                          const char *err)
{
        struct engine *e = c->eng;
        engine_created_fn done = c->done;
        void *done_data = c->data;
        bool start = c->start;
        struct start_joiner *joiners = c->joiners;
        creating_unlist(c);
        if (removed) {
                join_slot_discard(&c->slot);
                free(c);
        }
        else
                creating_cancel(c); /* PID 1's child and everything else removed; frees c */
        if (done)
                done(e, NULL, r, err, done_data);
        else
                log_warn("%s %s failed: %s", start ? "start" : "create", name, err);
        joiners_answer(e, joiners, NULL, r, err);
}

/* The host side of the environment's link from its previous run (a restart, or a create under
 * a name just deleted) is still there while the kernel tears the old network namespace down
 * in the background, tens of milliseconds on a busy host. Deleting it would hold the loop for
 * RCU grace periods (40-110 ms measured at 1,000 environments): it is waited for instead, before
 * anything of the start is made (so PID 1 gets its eth0 right after its setup, as always),
 * every LINK_WAIT_MS for at most LINK_WAIT_MAX turns; then network_env_link deletes it. */
#define LINK_WAIT_MS 5
#define LINK_WAIT_MAX 200

static bool old_link_lingers(struct env_creating *c)
{
        struct engine *e = c->eng;
        if (!e->net || c->v->net.mode == NET_NONE || c->link_waits >= LINK_WAIT_MAX ||
            !network_link_present(e->net, c->v->row.name))
                return false;
        c->link_waits++;
        c->timer = loop_add_timer(e->cfg.loop, LINK_WAIT_MS, on_creating_step, c);
        return c->timer != NULL;
}

/* Runs c->step, then arms the next one. */
static int run_creating_step(struct env_creating *c, char *err, size_t errlen, bool *removed)
{
        struct engine *e = c->eng;
        int r;
        *removed = c->step == STEP_CHECK || c->step == STEP_CLONE;
        switch (c->step) {
        case STEP_CHECK: /* a start's failure leaves nothing either */
                if (old_link_lingers(c))
                        return 0; /* this step again in LINK_WAIT_MS */
                r = c->start ? env_spawn_check(e, c->v, false, err, errlen)
                             : create_check(e, c->v, err, errlen);
                if (r < 0)
                        return r;
                break;
        case STEP_CLONE:
                r = c->start ? env_spawn_clone(e, c->v, &c->p, c, err, errlen)
                             : create_clone(e, c->v, &c->p, c, err, errlen);
                if (r < 0)
                        return r;
                if (r > 0) { /* creating_spawned goes on */
                        c->step = STEP_CLONING;
                        *removed = false;
                        return 0;
                }
                break;
        case STEP_SLOT:
                if (c->spawned)
                        exec_slot_adopt(e, c->v, c->slot_sub, &c->slot);
                else
                        exec_slot_early(e, c->v, c->p.pidfd);
                r = loop_add_fd(e->cfg.loop, c->p.report_fd, EPOLLIN, on_creating_report, c,
                                &c->src);
                c->timer = r < 0 ? NULL
                                 : loop_add_timer(e->cfg.loop, SPAWN_SETUP_MS, on_creating_timeout, c);
                if (!c->timer) {
                        snprintf(err, errlen, "out of memory");
                        return -ENOMEM;
                }
                c->step = STEP_SETUP; /* on_creating_report or on_creating_timeout goes on */
                return 0;
        case STEP_NET:
                r = env_net_policy(e, c->v, err, errlen);
                c->v->net_pending = false;
                if (r < 0) {
                        creating_unrun(c);
                        creating_done(c, r, err);
                } else {
                        creating_record(c);
                }
                return 0; /* c may be gone */
        case STEP_CLONING:
        case STEP_SETUP:
        case STEP_SYNC:
                return 0; /* not steps of their own */
        }
        *removed = false;
        c->step++;
        c->timer = loop_add_next_turn(e->cfg.loop, on_creating_step, c);
        if (!c->timer) {
                snprintf(err, errlen, "out of memory");
                return -ENOMEM;
        }
        return 0;
}

static void on_creating_step(struct loop_timer *t, void *data)
{
        (void)t;
        struct env_creating *c = data;
        c->timer = NULL; /* fired */
        char err[512] = "";
        char name[NAME_BUF_SIZE];
        snprintf(name, sizeof(name), "%s", c->v->row.name);
        bool removed;
        int r = run_creating_step(c, err, sizeof(err), &removed);
        if (r < 0)
                creating_fail(c, name, removed, r, err);
}

/* The spawn process's answer to STEP_CLONE: PID 1 sets up (STEP_SLOT next), or the create or
 * start fails as an in-place clone would have; if the process died, the clone is made in
 * place after all. */
static void creating_spawned(int r, struct spawn_pending *p, struct join_slot *slot,
                             const char *why, void *data)
{
        struct env_creating *c = data;
        struct engine *e = c->eng;
        c->spawn_req = NULL;
        char err[512];
        snprintf(err, sizeof(err), "%s", why);
        if (r == -ESRCH) {
                c->step = STEP_CLONE;
                c->timer = loop_add_next_turn(e->cfg.loop, on_creating_step, c);
                if (c->timer)
                        return;
                r = -ENOMEM;
                snprintf(err, sizeof(err), "out of memory");
        }
        char name[NAME_BUF_SIZE];
        snprintf(name, sizeof(name), "%s", c->v->row.name);
        if (r < 0) { /* as env_spawn_clone and create_clone clean up */
                cgroup_env_destroy(e->cfg.cgroups, c->v->cgname, NULL);
                if (!c->start)
                        create_roll_back(e, c->v);
                creating_fail(c, name, true, r, err);
                return;
        }
        c->p = *p;
        c->spawned = true;
        c->slot = *slot;
        c->step = STEP_SLOT;
        c->timer = loop_add_next_turn(e->cfg.loop, on_creating_step, c);
        if (!c->timer)
                creating_fail(c, name, false, -ENOMEM, "out of memory");
}

/* PID 1's clone, and its first exec slot with it (exec_slot_early_wanted), by the spawn
 * process. */
static int creating_spawn(struct env_creating *c, const struct spawn_config *sc)
{
        const char *sub = exec_slot_early_wanted(c->eng, c->v, c->slot_sub) ? c->slot_sub : NULL;
        return spawner_spawn(c->eng->cfg.spawner, sc, sub, creating_spawned, c, &c->spawn_req);
}

int engine_create_async(struct engine *e, const struct env_spec *spec, engine_created_fn done,
                        void *data, struct env_creating **ret, char *err, size_t errlen)
{
        struct env_creating *c = calloc(1, sizeof(*c));
        if (!c) {
                snprintf(err, errlen, "out of memory");
                return -ENOMEM;
        }
        *c = (struct env_creating){.eng = e, .done = done, .data = data,
                                   .p = {.pidfd = -EBADF, .report_fd = -EBADF},
                                   .slot = {.sock = -EBADF}};
        if (spec->fork_of)
                snprintf(c->fork_of, sizeof(c->fork_of), "%s", spec->fork_of);
        if (spec->fork_snapshot)
                snprintf(c->fork_snapshot, sizeof(c->fork_snapshot), "%s", spec->fork_snapshot);
        int r = create_prepare(e, spec, &c->v, err, errlen);
        if (r < 0) {
                free(c);
                return r;
        }
        /* Not in this turn: what other clients asked meanwhile is answered first. */
        c->step = STEP_CHECK;
        c->timer = loop_add_next_turn(e->cfg.loop, on_creating_step, c);
        if (!c->timer) {
                creating_cancel(c);
                snprintf(err, errlen, "out of memory");
                return -ENOMEM;
        }
        c->next = e->creating;
        e->creating = c;
        e->n_creating++;
        if (ret)
                *ret = c;
        return 0;
}

void engine_create_forget(struct env_creating *c)
{
        if (c)
                c->done = NULL;
}

struct env *engine_creating_find(struct engine *e, const char *name)
{
        for (struct env_creating *c = e->creating; c; c = c->next)
                if (!strcmp(c->v->row.name, name))
                        return c->v;
        return NULL;
}

struct env *creating_by_ifname(struct engine *e, const char *ifname)
{
        for (struct env_creating *c = e->creating; c; c = c->next)
                if (!strcmp(c->v->ifname, ifname))
                        return c->v;
        return NULL;
}

struct env *creating_by_addr(struct engine *e, struct in_addr a)
{
        if (!a.s_addr)
                return NULL; /* creates without one yet */
        for (struct env_creating *c = e->creating; c; c = c->next)
                if (c->v->addr.s_addr == a.s_addr)
                        return c->v;
        return NULL;
}

void creating_addrs_mark(struct engine *e)
{
        for (struct env_creating *c = e->creating; c; c = c->next)
                if (c->v->addr.s_addr)
                        addr_mark(e, c->v->addr, true);
}

struct env *engine_next_creating(struct engine *e, struct env *prev)
{
        struct env_creating *c = e->creating;
        if (prev)
                for (; c && c->v != prev; c = c->next)
                        ;
        if (prev && c)
                c = c->next;
        return c ? c->v : NULL;
}

void engine_creating_abandon(struct engine *e)
{
        while (e->creating) {
                struct env_creating *c = e->creating;
                e->creating = c->next;
                e->n_creating--;
                if (c->step != STEP_SYNC) {
                        creating_cancel(c);
                        continue;
                }
                /* It runs and its record is written: made durable here, it is kept like every
                 * listed environment at shutdown (it goes on running; the next start adopts
                 * it). Its caller is gone with the API. */
                syncer_cancel(c->wait);
                if (sync_in_place(e, c->v) < 0)
                        log_error("%s: the state database could not be synced: a host crash may "
                                  "lose this environment's record", c->v->row.name);
                env_append(e, c->v);
                free(c);
        }
}


/* ---- starts over turns (engine_start_async): a create's steps for a listed environment -- */

int engine_start_async(struct engine *e, struct env *v, engine_created_fn done, void *data,
                       char *err, size_t errlen)
{
        int r = start_check(v, err, errlen);
        if (r < 0)
                return r;
        struct env_creating *c = calloc(1, sizeof(*c));
        if (!c) {
                snprintf(err, errlen, "out of memory");
                return -ENOMEM;
        }
        *c = (struct env_creating){.eng = e, .v = v, .step = STEP_CHECK, .start = true,
                                   .idled_at = v->idled_at, .done = done, .data = data,
                                   .p = {.pidfd = -EBADF, .report_fd = -EBADF},
                                   .slot = {.sock = -EBADF}};
        /* Not in this turn: what other clients asked meanwhile is answered first. */
        c->timer = loop_add_next_turn(e->cfg.loop, on_creating_step, c);
        if (!c->timer) {
                free(c);
                snprintf(err, errlen, "out of memory");
                return -ENOMEM;
        }
        v->starting = c;
        e->n_starting++;
        log_info("%s: starting", v->row.name);
        return 0;
}

bool env_starting(const struct env *v)
{
        return v->starting != NULL;
}

int engine_start_join(struct engine *e, struct env *v, engine_created_fn done, void *data)
{
        (void)e;
        if (!v->starting)
                return -EINVAL;
        struct start_joiner *j = calloc(1, sizeof(*j));
        if (!j)
                return -ENOMEM;
        *j = (struct start_joiner){.fn = done, .data = data};
        struct env_creating *c = v->starting;
        *(c->joiners_end ? c->joiners_end : &c->joiners) = j;
        c->joiners_end = &j->next;
        return 0;
}

/* A start that a delete or a stop overtakes: given up before its start is recorded (v stays
 * stopped; a PID 1 already running is killed), or, once only the disk was awaited, watched from
 * now on so that the delete or stop ends it the usual way. Its caller hears why (`why`: "deleted", "stopped"). */
static void start_overtaken(struct engine *e, struct env *v, const char *why)
{
        struct env_creating *c = v->starting;
        if (!c)
                return;
        struct start_callers callers = callers_of(c);
        creating_unlist(c);
        if (c->step != STEP_SYNC) {
                creating_cancel(c);
        } else {
                syncer_cancel(c->wait);
                free(c);
                if (env_watch(e, v) < 0)
                        env_kill_sync(e, v); /* unwatched it could not be ended later */
        }
        char err[128];
        snprintf(err, sizeof(err), "%s was %s while it started", v->row.name, why);
        log_info("%s", err);
        callers_answer(e, &callers, v, -EBUSY, err);
}

void engine_starting_abandon(struct engine *e)
{
        for (struct env *v = e->envs; v && e->n_starting; v = v->next) {
                struct env_creating *c = v->starting;
                if (!c)
                        continue;
                struct start_callers callers = callers_of(c);
                bool runs = c->step == STEP_SYNC;
                creating_unlist(c);
                if (!runs) {
                        creating_cancel(c); /* still stopped, as before */
                } else {
                        /* PID 1 runs and its start is written: made durable here, it goes on
                         * running like every other (the next start adopts it). */
                        syncer_cancel(c->wait);
                        free(c);
                        if (sync_in_place(e, v) < 0)
                                log_error("%s: the state database could not be synced: a host "
                                          "crash may lose this start", v->row.name);
                }
                /* Their callers are gone with the API: told only so that they free what they
                 * hold, never to go on. */
                callers_answer(e, &callers, v, -ECANCELED, "the daemon is shutting down");
        }
}

/* The rest of a removal once nothing of the environment runs any more. */
static void destroy_finish(struct engine *e, struct env *v)
{
        /* Its firewall entries and published ports went with its network when it stopped
         * (env_mark_stopped); the port rows go with the record (ON DELETE CASCADE). */
        env_remove_artifacts(e, v->row.name, v->row.uid_base);
        int r = state_env_delete_unsynced(e->cfg.state, v->row.name);
        if (r < 0)
                log_error("%s: deleting record: %s", v->row.name, strerror(-r));
        log_info("%s: destroyed", v->row.name);
        events_env("deleted", v, NULL);
        if (e->destroyed)
                e->destroyed(v->row.name);
        env_unlink(e, v);
        /* Peers that were linked with it drop its address: whoever gets it next is a stranger. */
        if (e->net && v->addr.s_addr)
                reapply_linked(e, v);
        notify_waiters(v);
        env_free(v);
}

/* The "deleting" record is the journal entry: see engine_destroy. `synced` false: written
 * only, for the caller to make durable before anything is killed. */
static void record_deleting(struct engine *e, struct env *v, bool synced)
{
        if (v->paused)
                engine_pause(e, v, false); /* records "running": before "deleting" below */
        snprintf(v->row.status, sizeof(v->row.status), "deleting");
        if (synced)
                env_save(e, v);
        else
                env_save_unsynced(e, v);
        v->deleting = true;
}

int engine_destroy(struct engine *e, struct env *v, bool force)
{
        if ((v->pidfd >= 0 || v->starting) && !force && !v->deleting)
                return -EBUSY;
        start_overtaken(e, v, "deleted");
        /* One synced write for the whole destroy: "deleting" is the journal entry (a crash
         * from here on finishes the delete at the next start, PID 1 killed through its
         * cgroup), so stopping records nothing (v->deleting), and the row's removal need not
         * wait for the disk: lost in a crash, it is done again from "deleting" (the id range
         * is released again only if still claimed for this name: idrange_release_owned).
         * One that engine_destroy_async is removing is finished here, waiting. */
        if (!v->deleting) {
                record_deleting(e, v, true);
        } else if (v->deleting_sync) { /* engine_destroy_async's, still waiting for the disk */
                syncer_cancel(v->deleting_sync);
                v->deleting_sync = NULL;
                if (sync_in_place(e, v) < 0)
                        log_error("%s: the state database could not be synced: a host crash "
                                  "may undo this delete", v->row.name);
        }
        if (v->pidfd >= 0)
                env_kill_sync(e, v);
        destroy_finish(e, v);
        return 0;
}

/* PID 1 has exited (the whole pid namespace is gone). Its exec slots, outside the namespace
 * and killed with it, may still be ending: the last of them to exit tears down what is left
 * of the environment's namespaces (its mounts, with an RCU grace period: milliseconds). Their
 * pidfds say when, one at a time, rather than the loop waiting for them; then the stop or the
 * rest of the removal (a delete that overtakes a stop takes over here). */
static void on_slot_gone(struct loop_source *s, int fd, uint32_t events, void *data)
{
        (void)s;
        (void)fd;
        (void)events;
        struct env *v = data;
        if (v->deleting)
                dying_step(v);
        else
                stopped_step(v);
}

/* Kills v's exec slots; true when one is still alive and on_slot_gone will go on. */
static bool slots_gone_later(struct env *v)
{
        struct engine *e = v->eng;
        exec_slot_kill(v); /* also one made after the stop or delete began */
        loop_remove(v->exit_src); /* readable for good: it would fire every turn */
        v->exit_src = NULL;
        slot_watch_end(v);
        pid_t slot = exec_slot_alive(v);
        int fd = slot > 0 ? sys_pidfd_open(slot, 0) : -EBADF;
        if (fd >= 0) {
                if (loop_add_fd(e->cfg.loop, fd, EPOLLIN, on_slot_gone, v, &v->slot_gone_src) >= 0) {
                        v->slot_gone_fd = fd;
                        return true;
                }
                close(fd); /* then env_mark_stopped waits for it */
        }
        return false;
}

static void dying_step(struct env *v)
{
        if (slots_gone_later(v))
                return;
        env_mark_stopped(v->eng, v); /* reaps the slots */
        destroy_finish(v->eng, v);
}

static void on_dying_too_long(struct loop_timer *t, void *data)
{
        (void)t;
        struct env *v = data;
        v->kill_timer = NULL; /* fired */
        log_warn("%s: still dying after %d s: killing its cgroup", v->row.name,
                 DYING_MAX_MS / 1000);
        /* Thaws a group frozen from outside and kills everything in it (bounded). */
        int r = cgroup_env_kill(v->eng->cfg.cgroups, v->cgname, NULL);
        struct pollfd p = {.fd = v->pidfd, .events = POLLIN};
        if (r >= 0 && poll(&p, 1, 0) > 0) {
                dying_step(v); /* PID 1 is gone now: the usual way on */
                return;
        }
        engine_destroy(v->eng, v, true); /* in place, giving up on what will not die */
}

static void deleting_synced(struct engine *e, struct env *v, int result);

static void on_deleting_synced(int result, void *data)
{
        struct env *v = data;
        v->deleting_sync = NULL; /* answered: freed */
        deleting_synced(v->eng, v, result);
}

int engine_destroy_async(struct engine *e, struct env *v, env_done_fn done, void *data)
{
        struct waiter *w = calloc(1, sizeof(*w));
        if (!w)
                return -ENOMEM;
        /* First, so that the start's end (in place if it cannot be watched) cannot answer the
         * delete's caller before the environment is gone. */
        start_overtaken(e, v, "deleted");
        *w = (struct waiter){.fn = done, .data = data, .next = v->waiters};
        v->waiters = w;
        if (v->pidfd < 0)
                return engine_destroy(e, v, true); /* nothing to wait for; done is called */
        if (v->deleting)
                return 0; /* on its way already */
        /* Nothing is killed before "deleting" is on disk: the sync process waits for it while
         * the loop serves others (in place without one). Meanwhile the API refuses everything
         * but reading and deleting it (api.c), as while it dies. */
        record_deleting(e, v, false);
        log_info("%s: deleting", v->row.name);
        loop_cancel_timer(v->kill_timer); /* a stop's SIGKILL: the delete's comes after the sync */
        v->kill_timer = NULL;
        if (!sync_later(e, on_deleting_synced, v, &v->deleting_sync))
                deleting_synced(e, v, sync_in_place(e, v));
        return 0;
}

/* engine_destroy_async's "deleting" is durable (or the disk failed: said, and the delete goes
 * on; a host crash before the next synced write may bring the environment back stopped):
 * PID 1 and its exec slots are killed, and env_on_exit goes on (dying_step). */
static void deleting_synced(struct engine *e, struct env *v, int result)
{
        if (result < 0)
                log_error("%s: the state database could not be synced (%s): a host crash may "
                          "undo this delete", v->row.name, strerror(-result));
        if (v->pidfd < 0)
                return; /* it stopped on its own meanwhile: finished by env_on_exit */
        loop_cancel_timer(v->kill_timer); /* none since the delete began: never two */
        v->kill_timer = loop_add_timer(e->cfg.loop, DYING_MAX_MS, on_dying_too_long, v);
        /* PID 1's end ends its pid namespace; the commands exec'd into it, our children, are
         * reaped from the loop as they die, and then env_on_exit goes on (dying_step). */
        exec_slot_kill(v);
        if (sys_pidfd_send_signal(v->pidfd, SIGKILL, 0) < 0 && errno != ESRCH) {
                log_warn("%s: killing PID 1: %s", v->row.name, strerror(errno));
                engine_destroy(e, v, true); /* the waiting way, rather than half-deleted */
        }
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
        uint64_t *io[] = {&l.io_read_bps, &l.io_write_bps, &l.io_read_iops, &l.io_write_iops};
        for (size_t i = 0; i < ELEMENTSOF(io); i++)
                if (p->has_io[i])
                        *io[i] = p->io[i];
        if (v->pidfd >= 0) {
                int r = env_io_device(e, v, &l, err, errlen);
                if (r < 0)
                        return r;
                r = cgroup_env_set_limits(e->cfg.cgroups, v->cgname, &l);
                if (r < 0) {
                        snprintf(err, errlen, "applying limits: %s", strerror(-r));
                        return r;
                }
        }
        v->limits = l;
        if (p->has_cpus) {
                char path[4200];
                (void)env_write_cpu_online(e, v, l.cpu_millis, path, sizeof(path));
        }
        if (p->has_ttl) {
                v->ttl_s = p->ttl_s;
                v->row.expires_at = p->ttl_s ? wall_s() + (int64_t)p->ttl_s : 0;
                env_expiry_set(e, v);
        }
        if (p->has_autostart)
                v->row.autostart = p->autostart;
        if (p->has_idle_action)
                v->idle_stop = p->idle_action == IDLE_STOP ||
                               (p->idle_action == IDLE_DEFAULT && v->kind == KIND_COMPUTER);
        if (p->has_idle_timeout)
                v->idle_timeout_s = p->idle_timeout_s;
        if (p->has_idle_timeout || p->has_idle_action)
                engine_idle_arm(e, v); /* the clock starts again from now */
        if (p->has_net) {
                if (!e->net && p->net.mode != NET_NONE) {
                        snprintf(err, errlen, "networking is not available on this daemon");
                        return -ENOEXEC;
                }
                enum net_mode old = v->net.mode;
                if (old == NET_NONE && p->net.mode != NET_NONE && v->pidfd >= 0 &&
                    engine_ifname_busy(e, v)) {
                        snprintf(err, errlen, "%s cannot get a network while another "
                                 "environment with its network interface name (%s) runs",
                                 v->row.name, v->ifname);
                        return -EEXIST;
                }
                bool rules_changed = old != p->net.mode || v->net.n_rules != p->net.n_rules ||
                                     (p->net.n_rules &&
                                      memcmp(v->net.rules, p->net.rules,
                                             p->net.n_rules * sizeof(*p->net.rules)) != 0);
                e->n_linking -= v->net.n_links > 0;
                netpolicy_clear(&v->net);
                v->net = p->net;
                e->n_linking += v->net.n_links > 0;
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

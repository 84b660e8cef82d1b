/* The engine: environments and images, their lifecycle and their durable records.
 * The API layer calls only this interface (and exec.h); everything privileged or
 * kernel-facing happens below it. */
#pragma once
#include <stdio.h>
#include "daemon/loop.h"
#include "daemon/network.h"
#include "lib/netpolicy.h"
#include "lib/cgroup.h"
#include "lib/paddock.h"
#include "lib/state.h"
#include "lib/storage.h"

#include <jansson.h>
#include <stdbool.h>

enum env_kind { KIND_COMPUTER, KIND_SANDBOX };

#define DEFAULT_SANDBOX_TTL_S (60 * 60)
#define DEFAULT_TMP_BYTES (256ull << 20)
#define DEFAULT_SHM_BYTES (64ull << 20)
#define MAX_ENVS 4096

struct engine_config {
        const char *root;         /* state directory */
        const char *uid_registry; /* host-wide id range registry */
        const char *version;
        int init_fd;              /* paddock-init, opened once */
        struct cgroup_manager *cgroups;
        struct state *state;
        struct loop *loop;
        struct storage *storage;
        const char *apt_dir;      /* the host's apt configuration: image build's mirror, proxy */
        struct lxcfs *lxcfs;      /* the virtualized /proc files (daemon/lxcfs.h), or NULL */
        const char *cgroup_scope; /* the systemd scope environments are in (sdscope.h), or NULL */
        const char *cgroup_scope_error; /* why there is none where systemd wanted one, or NULL */
        unsigned long long nofile_at_start; /* RLIMIT_NOFILE soft limit paddockd was started with */
        /* Syncs the state database's log off the loop (a create's record of its start);
         * NULL if its process could not start: those syncs then happen in place. */
        struct syncer *syncer;
        /* Clones PID 1s for async creates and starts (spawner.h); NULL, or gone: in place. */
        struct spawner *spawner;
};

/* What an idle environment becomes: IDLE_DEFAULT is pause for a sandbox, stop for a computer. */
enum idle_action { IDLE_DEFAULT, IDLE_PAUSE, IDLE_STOP };

/* A validated create request. */
struct env_spec {
        char name[NAME_BUF_SIZE];
        enum env_kind kind;
        char image[NAME_BUF_SIZE];
        struct cgroup_limits limits;
        uint64_t ttl_s; /* 0 = none */
        uint64_t tmp_bytes;
        uint64_t disk_bytes; /* computers: disk limit, 0 = none */
        const char *from_tree; /* computers: copy this tree (fork) instead of the image */
        uint32_t from_base;    /* the id range from_tree belongs to (ownership shifting) */
        void (*copied)(void *data); /* with from_tree: called once the copy is made (or failed) */
        void *copied_data;
        /* A fork's source and snapshot (NULL: none): logged, and its "fork" event sent, once
         * the copy runs, whether or not the caller still waits. */
        const char *fork_of, *fork_snapshot;
        bool autostart;
        json_t *env;    /* object of string values (borrowed) */
        json_t *labels; /* object of string values (borrowed) */
        struct netpolicy net; /* moved into the environment by engine_create_async */
        const char *owner;    /* the creating token's name; NULL or "" = the administrator */
        uint64_t idle_timeout_s;   /* 0 = never idle (engine_idle.c) */
        enum idle_action idle_action;
};

struct engine;
struct tokens;
struct env;

int engine_new(const struct engine_config *cfg, struct engine **ret);
void engine_free(struct engine *e);
/* Startup: adopt running environments, clean half-done work, destroy expired sandboxes,
 * start autostart computers, arm the TTL sweep. */
int engine_reconcile(struct engine *e);

struct env *engine_find(struct engine *e, const char *name);
/* The environment of that name, else the only one whose name differs from it in case alone
 * (NULL when none or several do); one hash bucket either way. */
struct env *engine_find_nocase(struct engine *e, const char *name);
/* How many environments there are and how many run: every one (owner NULL) or one owner's;
 * kept counts, no walk. */
void engine_counts(struct engine *e, const char *owner, size_t *ret_n, size_t *ret_running);
/* Iterate: pass NULL to get the first. */
struct env *engine_next(struct engine *e, struct env *prev);
/* The same over the environments of one owner only (a token's name, "" = the administrator),
 * in no particular order: a token's quota check costs its own environments, not everyone's. */
struct env *engine_next_owned(struct engine *e, const char *owner, struct env *prev);
const char *env_name(const struct env *v);
/* The token that created it; "" = the administrator. */
const char *env_owner(const struct env *v);
bool env_running(const struct env *v);
/* Running, but its PID 1 has ended: its exec slots are ending before it is marked stopped (or
 * removed). Nothing can run in it any more. */
bool env_ending(const struct env *v);
/* Its cgroup limits (CG_UNLIMITED where none). */
const struct cgroup_limits *env_limits(const struct env *v);
/* The API's token table (tokens.h), loaded with the environments. */
struct tokens *engine_tokens(struct engine *e);
enum env_kind env_kind(const struct env *v);
bool env_has_label(const struct env *v, const char *key, const char *value);

/* Creates an environment without waiting for PID 1's setup (milliseconds, far more on a busy
 * host or on cgroup v1, whose first cgroup join of a process waits for an RCU grace period):
 * its steps take turns of the loop, the daemon serves other clients meanwhile, and done answers once PID 1 has exec'd (v listed) or the
 * create failed and was rolled back (v NULL, r and err). Until then the name is taken
 * (engine_creating_find) and the environment counts toward MAX_ENVS and quotas
 * (engine_next_creating). Returns < 0 with err when it failed at once (done is then never
 * called); otherwise done is called exactly once, never from inside this call. */
struct env_creating;
typedef void (*engine_created_fn)(struct engine *e, struct env *v, int r, const char *err,
                                  void *data);
int engine_create_async(struct engine *e, const struct env_spec *spec, engine_created_fn done,
                        void *data, struct env_creating **ret, char *err, size_t errlen);
/* The caller no longer wants the answer (its client hung up): the create goes on. */
void engine_create_forget(struct env_creating *c);
/* A create in progress under that name: its environment (not listed yet), else NULL. */
struct env *engine_creating_find(struct engine *e, const char *name);
/* The creates in progress, one after another (prev NULL: the first). */
struct env *engine_next_creating(struct engine *e, struct env *prev);
/* At shutdown: every create in progress is stopped and rolled back. */
void engine_creating_abandon(struct engine *e);
/* Starts a stopped environment in place, the whole of PID 1's setup in this call (the
 * daemon's own start-up and the idle wake-up, which need it running on return). */
int engine_start(struct engine *e, struct env *v, char *err, size_t errlen);
/* The same over turns of the loop, like engine_create_async's steps: v stays listed with
 * status "starting" (env_starting) until PID 1 runs and its record is durable; then done.
 * Returns < 0 with err when it cannot start at all (running, starting, being deleted; done is
 * never called); otherwise done is called exactly once, never from inside this call: with v
 * and r = 0 once it runs, or r < 0 and err (its setup failed, it was deleted meanwhile, or
 * the daemon stops). */
int engine_start_async(struct engine *e, struct env *v, engine_created_fn done, void *data,
                       char *err, size_t errlen);
bool env_starting(const struct env *v);
/* One more caller of v's start in progress (env_starting): done is called as the first
 * caller's is, after it. -EINVAL when it is not starting. */
int engine_start_join(struct engine *e, struct env *v, engine_created_fn done, void *data);
/* At shutdown: starts in progress are given up (the environment stays stopped), or kept
 * running when only the disk was still awaited; their callers hear -ECANCELED either way. */
void engine_starting_abandon(struct engine *e);
/* Asynchronous stop: SIGTERM, then SIGKILL to the whole cgroup after timeout_s. done runs
 * once the environment is stopped (at once if it already is). */
typedef void (*env_done_fn)(struct env *v, void *data);
void engine_stop(struct engine *e, struct env *v, unsigned timeout_s, env_done_fn done, void *data);
/* Freeze / thaw every process of a running environment. */
int engine_pause(struct engine *e, struct env *v, bool pause);
bool env_paused(const struct env *v);
/* Remove a stopped environment (or kill it first when force). */
int engine_destroy(struct engine *e, struct env *v, bool force);
/* Forced removal without waiting in the loop for the environment's processes to die: they are
 * killed now and the rest (record, disk, network) happens once PID 1 and the exec slots are
 * gone. done runs once it is removed: at once when it was not running (after the removal),
 * else from a later turn of the loop, after v is unlisted and before it is freed. Meanwhile v
 * stays listed with status "deleting" (env_deleting); a second call just waits too. */
int engine_destroy_async(struct engine *e, struct env *v, env_done_fn done, void *data);
/* Being removed by engine_destroy_async: nothing else may start in it or change it. */
bool env_deleting(const struct env *v);

struct env_patch {
        bool has_cpus, has_memory, has_swap, has_pids, has_ttl, has_autostart, has_net, has_disk;
        uint64_t cpus, memory, swap, pids, ttl_s, disk;
        bool autostart;
        struct netpolicy net; /* with has_net: replaces the policy (moved) */
        /* Disk I/O limits (IO_READ_BPS..): has_io[i] = given, io[i] = the new value, 0 = none */
        bool has_io[4];
        uint64_t io[4];
        bool has_idle_timeout, has_idle_action;
        uint64_t idle_timeout_s; /* 0 = none */
        enum idle_action idle_action;
};
enum { IO_READ_BPS, IO_WRITE_BPS, IO_READ_IOPS, IO_WRITE_IOPS };
int engine_patch(struct engine *e, struct env *v, const struct env_patch *p, char *err,
                 size_t errlen);

/* A pass over every environment that never holds the loop for long: each() runs for every
 * environment there when it starts (and still there when its turn comes), in creation order,
 * in slices of about 0.5 ms, one per turn of the loop, so other clients are served in between;
 * then done(). A pass that fits in one slice runs whole inside engine_pass_start (done()
 * included) and sets *ret to NULL; otherwise *ret is the pass, which engine_pass_cancel stops
 * (neither callback runs again; never from inside one of them). */
struct engine_pass;
typedef void (*engine_each_fn)(struct engine *e, struct env *v, void *data);
typedef void (*engine_pass_done_fn)(struct engine *e, void *data);
/* owner: only that owner's environments (its own list: the cost of what it owns); NULL:
 * every environment. */
int engine_pass_start(struct engine *e, const char *owner, engine_each_fn each,
                      engine_pass_done_fn done, void *data, struct engine_pass **ret);
void engine_pass_cancel(struct engine_pass *p);
/* Idle stop and wake-up (engine_idle.c). Activity: touch (one store), or hold while an exec
 * or shell session runs. */
void engine_idle_touch(struct engine *e, struct env *v);
void engine_idle_touch_name(struct engine *e, const char *name); /* NULL or unknown: nothing */
void engine_idle_hold(struct engine *e, const char *name, bool hold);
/* Paused or stopped by its idle timer (and not resumed or started since)? */
bool env_idled(const struct env *v);
int64_t env_idled_at(const struct env *v);
uint64_t env_idle_timeout(const struct env *v);
bool env_idle_stop(const struct env *v);
/* Undo what the idle timer did (resume or start): 1 woken, 0 nothing to do, < 0 failed
 * (err says why; -EBUSY while its idle stop is still under way). */
int engine_idle_wake(struct engine *e, struct env *v, char *err, size_t errlen);
/* The same for one the idle timer stopped (env_idled, not running), over turns of the loop
 * (engine_start_async): done once it runs or failed, never from inside this call. < 0 with
 * err when it cannot start (done never called). */
int engine_idle_wake_async(struct engine *e, struct env *v, engine_created_fn done, void *data,
                           char *err, size_t errlen);
/* An explicit pause or stop of what the idle timer paused or stopped: it is the caller's now,
 * and no request or connection wakes it. */
void engine_idle_keep(struct engine *e, struct env *v);
/* paddock_idle_total{action=...} and paddock_idle_watched, Prometheus text, for /metrics. */
void engine_idle_metrics(const struct engine *e, FILE *f);

json_t *engine_env_json(struct engine *e, struct env *v);
/* The same as one item of a listing: figures shared by all environments (firewall counters)
 * come from one read per second instead of one per environment. */
json_t *engine_env_json_listed(struct engine *e, struct env *v);
json_t *netpolicy_json(const struct netpolicy *p);
bool engine_has_network(const struct engine *e);
const struct netpolicy *env_netpolicy(const struct env *v);

/* Networking is attached after both exist (the resolver asks the engine about addresses). */
void engine_set_network(struct engine *e, struct network *n);
struct network_envs engine_network_envs(struct engine *e);

/* Published ports. */
int engine_port_add(struct engine *e, struct env *v, const char *proto, uint16_t host_port,
                    uint16_t port, char *err, size_t errlen);
int engine_port_remove(struct engine *e, struct env *v, const char *proto, uint16_t host_port);
json_t *engine_ports_json(struct engine *e, struct env *v);
json_t *engine_system_json(struct engine *e);

/* Images (images.c and image_*.c). import, pull and build fill a new image in a forked helper
 * (see image_job.h): they either fail at once (-errno and a message in err; done is not
 * called) or return 0 and a job whose done runs exactly once, later, from the event loop;
 * progress may run before that with one line of text at a time. */
typedef void (*image_done_fn)(int r, const char *msg, json_t *image, void *data);
typedef void (*image_progress_fn)(const char *line, void *data);
struct image_job;
struct image_callbacks {
        image_progress_fn progress; /* may be NULL */
        image_done_fn done;
        void *data;
};
int engine_image_import(struct engine *e, const char *name, int archive_fd,
                        const struct image_callbacks *cb, struct image_job **ret_job, char *err,
                        size_t errlen);
struct image_pull_spec {
        char ref[512];
        char name[NAME_BUF_SIZE]; /* empty: derived from ref */
        bool insecure; /* plain http, to a host paddockd --insecure-registry names only */
};
int engine_image_pull(struct engine *e, const struct image_pull_spec *spec,
                      const struct image_callbacks *cb, struct image_job **ret_job, char *err,
                      size_t errlen);
/* paddockd --allow-registry / --insecure-registry HOST[:PORT] (lib/registry.h), before any
 * pull: -EINVAL for a malformed one, -E2BIG for too many. */
int engine_allow_registry(const char *hostport, bool insecure);
#define IMAGE_BUILD_MAX_PACKAGES 200
struct image_build_spec {
        char name[NAME_BUF_SIZE];
        char suite[32];     /* debian:SUITE */
        char variant[16];   /* mmdebstrap --variant; minbase by default */
        char mirror[512];   /* http(s) URL of a Debian mirror, "local:NAME", or "" */
        char packages[IMAGE_BUILD_MAX_PACKAGES * 64]; /* comma-separated, checked */
};
int engine_image_build(struct engine *e, const struct image_build_spec *spec,
                       const struct image_callbacks *cb, struct image_job **ret_job, char *err,
                       size_t errlen);
/* Stop a running job: its helper is killed, done runs with -ECANCELED. */
void engine_image_cancel(struct image_job *j);
json_t *engine_image_list(struct engine *e);
/* The image of environments created without one ("default" unless paddockd --default-image). */
void engine_set_default_image(struct engine *e, const char *name);
const char *engine_default_image(struct engine *e);
int engine_image_delete(struct engine *e, const char *name, char *err, size_t errlen);
bool engine_image_exists(struct engine *e, const char *name);
/* An import, pull or build of this name is running (it owns images/.partial-NAME). */
bool engine_image_being_made(const char *name);

/* Called with the name of every environment destroyed (the API layer drops its records). */
void engine_set_destroy_hook(struct engine *e, void (*fn)(const char *name));

/* Shared with images.c */
const char *engine_root(struct engine *e);
/* The host-wide id range registry (image helpers claim their range there). */
const char *engine_uid_registry(struct engine *e);
const char *engine_apt_dir(struct engine *e);
struct state *engine_state(struct engine *e);
bool engine_image_in_use(struct engine *e, const char *name, int *ret_count);
void engine_images_cleanup(struct engine *e); /* interrupted imports, at startup */
/* Give the image helpers' id range back (the daemon stops). */
void engine_image_helpers_release(struct engine *e);

/* Storage (engine_storage.c): snapshots, restore, fork, commit. */
struct storage *engine_storage(struct engine *e);
/* Every spare disk goes (an image is removed: a spare shares its data), and one being made
 * goes too once it is done. */
void engine_spares_drop(struct engine *e);
int engine_env_dir(const struct engine *e, const char *name, char *buf, size_t len);
uint64_t env_disk_bytes(const struct env *v);
uint32_t env_uid_base(const struct env *v);
/* A create request that repeats v's kind, image, limits, variables, labels and policy; its
 * net arrays are new (engine_create_async takes them over, as from the API). */
void engine_env_spec(struct engine *e, const struct env *v, struct env_spec *ret);
json_t *engine_snapshot_list(struct engine *e, struct env *v);
int engine_snapshot(struct engine *e, struct env *v, const char *snap, json_t **ret, char *err,
                    size_t errlen);
int engine_snapshot_delete(struct engine *e, struct env *v, const char *snap, char *err,
                           size_t errlen);
int engine_restore(struct engine *e, struct env *v, const char *snap, char *err, size_t errlen);
/* The copy belongs to owner (a token name; "" = the administrator). The disk is copied in
 * this call; the copy then starts like engine_create_async's environment, and done is called
 * once it runs (or failed). <0: nothing was started, done is not called. */
int engine_fork(struct engine *e, struct env *v, const char *name, const char *snap,
                const char *owner, engine_created_fn done, void *data, struct env_creating **ret,
                char *err, size_t errlen);
int engine_commit(struct engine *e, struct env *v, const char *image, json_t **ret, char *err,
                  size_t errlen);
/* At startup: half-done restores and forks, unrecorded images. */
void engine_storage_reconcile(struct engine *e);
/* Record "running" for an environment the daemon froze and thawed again before adopting it. */
void engine_mark_thawed(struct engine *e, struct env *v);

/* For exec.c */
struct loop *engine_loop(struct engine *e);
struct cgroup_manager *engine_cgroups(struct engine *e);
struct spawner *engine_spawner(struct engine *e); /* NULL: none */
int env_pidfd(const struct env *v);
const char *env_cgroup(const struct env *v); /* its cgroup directory name */
unsigned env_next_exec_id(struct env *v);
/* The warm exec slot exec.c keeps for the environment, or NULL. */
struct exec_slot *env_exec_slot(const struct env *v);
void env_set_exec_slot(struct env *v, struct exec_slot *slot);
/* Something ran and ended in v (an exec): the next listing or scrape reads its counters anew
 * instead of reusing those of the last second (an OOM kill shows at once). */
void env_counters_forget(struct env *v);
/* The environment's base variables (PATH, HOSTNAME, its env) as a NULL-terminated
 * malloc'd array of "K=V" strings, with extra (an object) merged over them. */
char **env_build_envp(const struct env *v, json_t *extra);

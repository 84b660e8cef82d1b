/* What the engine's own files share and nobody else may see: the environment and engine
 * structs and the helpers one part of the engine calls in another. The interface for the rest
 * of the daemon is engine.h.
 *
 *   engine.c            accessors, the stored spec, environment variables, engine_new/free
 *   engine_lifecycle.c  start, stop, exit, pause; create, destroy, patch
 *   engine_net.c        addresses, the environment's network, links, published ports
 *   engine_json.c       the JSON views of an environment and of the daemon
 *   engine_reconcile.c  startup: roll back, adopt, remove orphans, autostart; the TTL sweep
 *   engine_storage.c    snapshots, restore, fork, commit; spare disks made ahead of time */
#pragma once
#include "daemon/engine.h"
#include "daemon/tokens.h"
#include "lib/paddock.h"

#include <netinet/in.h>

/* Longest cgroup directory name of an environment: "env-" and its name. */
#define CGROUP_NAME_SIZE (4 + NAME_BUF_SIZE)

/* At shutdown, after engine_starting_abandon: the autostarts not begun are forgotten. */
void engine_autostart_free(struct engine *e);

/* What an environment is doing now, for listings and metrics: its record's status, or
 * "starting" / "stopping" while those are under way (they are not written). */
const char *env_state(const struct env *v);

struct waiter {
        env_done_fn fn;
        void *data;
        struct waiter *next;
};

/* What a listing, an inspect and a scrape read of a running environment besides its record. */
struct env_counters {
        bool cg_ok; /* cg was read */
        struct cgroup_stats cg;
        bool disk_ok; /* disk was read (computers) */
        uint64_t disk; /* bytes its disk uses */
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
        char cgname[CGROUP_NAME_SIZE];
        int pidfd;
        bool is_child; /* we are its parent and must reap it */
        /* Its link is up and its firewall not in yet (a create's or start's STEP_NET): the
         * resolver leaves its queries unanswered meanwhile (it would learn into sets not made
         * yet). */
        bool net_pending;
        /* This run's PID 1 was started networked: its setup made its namespace's IPv6
         * settings (lib/spawn.h, enum spawn_net), which its link then needs not write. */
        bool net_set_at_start;
        struct loop_source *exit_src;
        bool stopping;
        bool paused;
        bool deleting; /* engine_destroy recorded "deleting": its stop records nothing */
        /* engine_destroy_async: "deleting" is written and PID 1 is killed once the sync
         * process made it durable (syncer.h); cancelled by env_free. */
        struct syncer_wait *deleting_sync;
        struct loop_timer *kill_timer;
        struct env_creating *starting; /* engine_start_async's steps, or NULL */
        /* Stopping, or deleting (engine_destroy_async), after PID 1's exit: the pidfd of an
         * exec slot still ending, on the loop (on_slot_gone); slot_gone_fd is only valid while
         * slot_gone_src is set. */
        struct loop_source *slot_gone_src;
        int slot_gone_fd;
        struct waiter *waiters;
        unsigned exec_seq;
        struct exec_slot *exec_slot; /* exec.c's warm helper for the next exec, or NULL */
        struct env_counters counters; /* as last read (engine_env_counters) */
        uint64_t counters_at_ms;      /* monotonic ms of that read, 0 = none */
        /* Idle stop (engine_idle.c). Stored in the spec: the timeout, the action, idled_at. */
        uint64_t idle_timeout_s; /* 0 = none */
        bool idle_stop;          /* stop when idle (else pause) */
        int64_t idled_at;        /* wall s when the idle timer paused or stopped it, 0 = not */
        uint64_t active_ms;      /* monotonic ms of its last activity */
        uint64_t idle_due;       /* monotonic ms when its heap entry comes due */
        uint64_t idle_packets;   /* rx + tx packets at the last look */
        uint64_t idle_opens;     /* paused by it: TCP connections accepted, at the last look */
        unsigned idle_holds;     /* running exec and shell sessions */
        size_t idle_slot;        /* index + 1 in the engine's idle heap, 0 = not in it */
        struct env *next, *prev; /* the engine's list, in creation order */
        struct env *hnext;       /* next in its by_name bucket */
        struct env *anext;       /* next in its by_addr bucket (only while it has an address) */
        struct env *inext;       /* next in its by_ifname bucket (only with an ifname) */
        /* Its host-side interface name ("" on a daemon without networking): no two
         * environments may share one (engine_ifname_check). */
        char ifname[16];
        struct env *onext, *oprev; /* its owner's list (struct owner) */
        struct owner *owner;
        struct image_use *image_use; /* its image's count (struct image_use) */
};

/* The environments of one owner (a token, or "" for the administrator), so that a token's
 * quota check walks its own environments, not everyone's. */
struct owner {
        char name[NAME_BUF_SIZE];
        struct env *envs;
        size_t n, n_running;
        struct owner *next;
};

/* How many environments use an image (few images: a short list), so that listing images and
 * removing one do not walk every environment. */
struct image_use {
        char name[NAME_BUF_SIZE];
        size_t n;
        struct image_use *next;
};

/* The next computer's disk, made after a create by the spare process (`paddockd-spare`, a
 * syncer made at start-up), or by a forked helper where that process is gone
 * (engine_storage.c). */
struct spare_disk {
        struct loop_timer *timer;
        char image[NAME_BUF_SIZE];
        struct syncer *maker;      /* the spare process, or NULL */
        struct syncer_wait *wait;  /* its snapshot under way, or NULL */
        int from_fd, dir_fd;       /* that snapshot's image and spares directory */
        struct supervise *sv;      /* the helper making it, or NULL */
        bool again; /* a create asked while one was being made: make another after it */
        unsigned drops, drops_at_start; /* engine_spares_drop calls: all of them, and those
                                         * before the one being made started */
};

struct engine {
        struct engine_config cfg;
        /* R/envs, opened at the first computer delete: the pool's btrfs commit after a deleted
         * disk is asked of the sync process on this one fd, so that a burst of deletes shares
         * commits (env_remove_artifacts). -EBADF until then. */
        int pool_commit_fd;
        struct env *envs;     /* in creation order (listings) */
        struct env *envs_tail;
        size_t n_envs;
        /* Creates whose PID 1 is still setting up (engine_create_async): not listed yet, but
         * their names are taken and they count toward the limits. */
        struct env_creating *creating;
        size_t n_creating;
        size_t n_starting; /* listed environments with v->starting (engine_start_async) */
        struct autostart *autostart; /* the autostart starts still to begin (engine_reconcile.c) */
        size_t n_running; /* listed environments whose PID 1 runs (pidfd >= 0) */
        /* By name: chained hash buckets (env.hnext), a power of two, at least n_envs, so a
         * lookup costs the same with 10 or 4,000 environments. */
        struct env **by_name;
        size_t n_buckets;
        /* By IPv4 address (the resolver asks for every query): chained on env.anext, as many
         * buckets as by_name. */
        struct env **by_addr;
        /* By host-side interface name (a create checks that its own is free): chained on
         * env.inext, as many buckets as by_name. */
        struct env **by_ifname;
        /* The owners with at least one environment (few: one per token in use). */
        struct owner *owners;
        struct image_use *images; /* the images with at least one environment */
        /* Addresses held, a bit per address from addr_first (the first after the gateway;
         * 0 until the first allocation reads them from the list), so that the next address
         * is found without a walk over every environment (engine_net.c). addr_hint: no word
         * before it has a free bit. */
        uint64_t *addr_used;
        size_t addr_words, addr_hint;
        uint32_t addr_first;
        /* No environment expires before this (unix s; 0: none has a time to live): the
         * one-second sweep looks at the list only once something may have expired. */
        int64_t next_expiry;
        /* Environments whose policy links others: with none (the usual case), a create or a
         * destroy has no peer to look for among all the others. */
        size_t n_linking;
        /* Every published port, sorted by environment, read from the state once per change
         * (ports_gen counts changes: a port added or removed, an environment gone with its
         * ports), so listing N environments does not scan the ports table N times. */
        struct port_row *ports;
        size_t n_ports;
        uint64_t ports_gen, ports_read_gen; /* ports valid while equal */
        struct loop_timer *sweep;
        struct spare_disk spare;
        struct network *net; /* NULL: networking unavailable, every env is "none" */
        void (*destroyed)(const char *name);
        struct tokens *tokens; /* the API's tokens, over the same database */
        /* Idle stop (engine_idle.c): a min-heap of environments by idle_due, one timer. */
        struct env **idle_heap;
        size_t idle_n, idle_cap;
        struct loop_timer *idle_timer;
        uint64_t idle_timer_due;
        uint64_t idle_paused, idle_stopped, idle_woken; /* since the daemon started */
};

/* engine.c */
void cgroup_name_of(const char *name, char out[static CGROUP_NAME_SIZE]);
/* R/envs/NAME, or R/envs/NAME/SUB when sub is not NULL; -ENAMETOOLONG if it does not fit. */
int env_dir(const struct engine *e, const char *name, const char *sub, char *buf, size_t len);
/* R/images/IMAGE/rootfs; -ENAMETOOLONG if it does not fit. */
int image_rootfs(const struct engine *e, const char *image, char *buf, size_t len);
/* The note an id range claim carries: "ROOT\tNAME" (remove_orphans matches the prefix). */
int owner_note(const struct engine *e, const char *name, char *buf, size_t len);
json_t *limit_json(uint64_t v);
char *spec_dump(const struct env *v);
/* {"read_bps":N,...} of l's disk I/O limits; shown (the API's view): null for none, plus the
 * "device"; else 0 for none (the stored spec). */
json_t *env_io_json(const struct cgroup_limits *l, bool shown);
int env_save(struct engine *e, struct env *v);
/* The same write without waiting for the disk (state_env_update_unsynced). */
int env_save_unsynced(struct engine *e, struct env *v);
void env_free(struct env *v);
void env_unlink(struct engine *e, struct env *v);
void env_append(struct engine *e, struct env *v);
/* PID 1's pidfd (or -EBADF when it is gone): keeps the running counts right. */
void env_set_pidfd(struct engine *e, struct env *v, int fd);
/* v got an address (ensure_addr) or a new expiry time (patch): keep the indexes right. */
void env_addr_set(struct engine *e, struct env *v);
void env_expiry_set(struct engine *e, struct env *v);
/* The environment holding address a (running or not), or NULL. */
struct env *engine_find_addr(struct engine *e, struct in_addr a);
/* v's host-side interface name (kept in the by_ifname index), and the environment that has
 * ifname, or NULL. */
void env_ifname_set(struct engine *e, struct env *v, const char *ifname);
struct env *engine_find_ifname(struct engine *e, const char *ifname);
/* Does another environment with v's interface name run or start with a network? (Such pairs
 * come from before keyed names: the second's link would replace the first's.) */
bool engine_ifname_busy(struct engine *e, const struct env *v);
/* May an environment be named name? -EEXIST (with err) when its host-side interface name is
 * another environment's, listed or being created; ifname gets it ("" without networking). */
int engine_ifname_check(struct engine *e, const char *name, char ifname[16], char *err,
                        size_t errlen);
void envp_free(char **arr);

/* engine_json.c: v's counters (cgroups only while it runs), read now; or, listed (part of a listing or a
 * scrape of many), as read within the last second: agents that poll the list, and Prometheus,
 * ask the kernel once a second, not once a request. */
void engine_env_counters(struct engine *e, struct env *v, bool listed, struct env_counters *ret);

/* engine_lifecycle.c */
int env_watch(struct engine *e, struct env *v);
/* PID 1 is gone: collect it, clear the cgroup, record "stopped". */
void env_mark_stopped(struct engine *e, struct env *v);
/* A delete's watch of an exec slot's end, if any, taken off the loop and closed. */
void slot_watch_end(struct env *v);
/* Remove everything an environment may own on the host; safe to repeat. */
void env_remove_artifacts(struct engine *e, const char *name, uint32_t uid_base);

/* Creates in progress (engine_lifecycle.c): the one with address a, or with interface name
 * ifname, or NULL; their addresses marked held (addr_mark). */
struct env *creating_by_addr(struct engine *e, struct in_addr a);
struct env *creating_by_ifname(struct engine *e, const char *ifname);
void creating_addrs_mark(struct engine *e);

/* engine_net.c */
int ensure_addr(struct engine *e, struct env *v);
/* a is held (used) or given back: the address bitmap (nothing before its first allocation). */
void addr_mark(struct engine *e, struct in_addr a, bool used);
/* Its network up: env_net_link (its address, the veth), then env_net_policy (firewall,
 * bandwidth, published ports; a failure takes the link down too). `adopt`: a veth that survived
 * a daemon restart is kept (its policy applied again) instead of cutting connections. */
int env_net_up(struct engine *e, struct env *v, bool adopt, bool flush_learned, char *err,
               size_t errlen);
int env_net_link(struct engine *e, struct env *v, char *err, size_t errlen);
int env_net_policy(struct engine *e, struct env *v, char *err, size_t errlen);
void reapply_linked(struct engine *e, struct env *v);
int write_resolv_conf(struct engine *e, const char *dir, char *path, size_t len);
bool env_has_ports(struct engine *e, const struct env *v); /* any published port */

/* engine_idle.c */
/* (Re)start its idle clock if it has a timeout and runs unpaused: create, start, resume,
 * PATCH, adoption. Else engine_idle_watch. */
void engine_idle_arm(struct engine *e, struct env *v);
/* Paused by the idle timer with a published port (after a daemon restart, or a port published
 * since): watch its connections, unless that is being done already. */
void engine_idle_watch(struct engine *e, struct env *v);
void engine_idle_forget(struct engine *e, struct env *v); /* leaving the engine */
void engine_idle_free(struct engine *e);
void engine_idle_start(struct engine *e); /* after reconcile: every environment */

/* engine_storage.c */
void spare_init(struct engine *e);
void spare_schedule(struct engine *e, const char *image);
void spare_free(struct engine *e);

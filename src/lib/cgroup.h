/* cgroup management behind a small ops table: one backend for cgroup v2, one for v1/hybrid.
 * Detected at run time. Everything is created below the cgroup the daemon itself runs in
 * (read from /proc/self/cgroup per hierarchy), in a subtree named by the daemon
 * (e.g. "paddock-1a2b3c4d"), never at a hierarchy's root, and nothing outside it is written. */
#pragma once
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

enum cgroup_mode {
        CGROUP_V2,     /* pure unified hierarchy */
        CGROUP_HYBRID, /* v1 controllers + a controller-less cgroup2 mount (cgroup.kill/freeze) */
        CGROUP_V1,     /* v1 only */
};

#define CG_UNLIMITED UINT64_MAX

struct cgroup_limits {
        uint64_t cpu_millis;   /* 1000 = one CPU; CG_UNLIMITED = no cap */
        uint64_t memory_bytes; /* CG_UNLIMITED = none */
        uint64_t swap_bytes;   /* swap on top of memory; CG_UNLIMITED = none; 0 = no swap */
        uint64_t pids;         /* CG_UNLIMITED = none */
        /* Disk I/O on one block device (io_dev; the whole disk, e.g. a loop device): bytes and
         * operations per second, 0 = no limit. io_dev may be 0 only while all four are 0. */
        uint64_t io_read_bps, io_write_bps, io_read_iops, io_write_iops;
        dev_t io_dev;
};

static inline bool cgroup_limits_have_io(const struct cgroup_limits *l)
{
        return l->io_read_bps || l->io_write_bps || l->io_read_iops || l->io_write_iops;
}

struct cgroup_stats {
        uint64_t memory_current;
        uint64_t memory_peak;  /* 0 if unknown */
        uint64_t pids_current;
        uint64_t cpu_usage_us;
        uint64_t oom_kills;    /* processes killed by the OOM killer in this group */
};

struct cgroup_manager;

/* sysfs_root: normally "/sys/fs/cgroup" (tests pass a temp dir laid out like one);
 * self_cgroup: normally "/proc/self/cgroup"; subtree: name of the daemon's subtree. */
int cgroup_manager_new(const char *sysfs_root, const char *self_cgroup, const char *subtree,
                       struct cgroup_manager **ret);
/* The same on a pure cgroup-v2 host, with environments below `own` (a path below sysfs_root,
 * "/paddock.slice/paddock-1234abcd.scope") instead of the daemon's own group: a group delegated
 * to the daemon by someone else (a systemd scope, see the daemon's sdscope.c). */
int cgroup_manager_new_delegated(const char *sysfs_root, const char *self_cgroup, const char *own,
                                 const char *subtree, struct cgroup_manager **ret);
void cgroup_manager_free(struct cgroup_manager *m);
/* At shutdown: remove the daemon's subtree where no environment group is left in it. */
void cgroup_manager_remove_if_empty(struct cgroup_manager *m);
enum cgroup_mode cgroup_manager_mode(const struct cgroup_manager *m);
const char *cgroup_mode_name(enum cgroup_mode mode);

/* Create the group for an environment (and its parents below the subtree) and apply limits. */
int cgroup_env_create(struct cgroup_manager *m, const char *env, const struct cgroup_limits *l);
/* Change limits of an existing group. */
int cgroup_env_set_limits(struct cgroup_manager *m, const char *env, const struct cgroup_limits *l);
/* The calling process joins env/sub (sub NULL: the env group; created if missing) in every
 * hierarchy without the kernel's global lock (see
 * cgroup.c): only a freshly cloned, single-threaded child may call it. placed: the child was
 * cloned into env/sub of the cgroup2 hierarchy already (cgroup_env_clone). */
int cgroup_env_join(struct cgroup_manager *m, const char *env, const char *sub, bool placed);
/* clone3(flags, SIGCHLD, pidfd when flags has CLONE_PIDFD) with the child born in env/sub of
 * the cgroup2 hierarchy where there is one (*placed, also in the child); without it if the
 * kernel refuses. fork() semantics otherwise: the parent's pid, 0 in the child, or -errno. The
 * child then calls cgroup_env_join(m, env, sub, *placed). */
pid_t cgroup_env_clone(struct cgroup_manager *m, const char *env, const char *sub,
                       uint64_t flags, int *pidfd, bool *placed);
/* SIGKILL every process in env/sub (sub NULL = the whole env) and wait until it is empty. */
int cgroup_env_kill(struct cgroup_manager *m, const char *env, const char *sub);
/* The same without waiting for the group to empty, where the kernel kills a whole group at once
 * (cgroup.kill, 5.14 on; else as cgroup_env_kill): for the event loop, which must not wait for
 * an environment whose processes get little CPU (their exits then take seconds) and which
 * learns of the ends it needs through pidfds. */
int cgroup_env_kill_nowait(struct cgroup_manager *m, const char *env, const char *sub);
/* Remove env/sub (sub NULL = env and all its children) after killing what remains. */
int cgroup_env_destroy(struct cgroup_manager *m, const char *env, const char *sub);
/* Freeze / thaw the whole env (freezer on v1, cgroup.freeze on v2/hybrid). */
int cgroup_env_freeze(struct cgroup_manager *m, const char *env, bool frozen);
int cgroup_env_stats(struct cgroup_manager *m, const char *env, struct cgroup_stats *ret);
/* Only the stats' oom_kills: one file (v2; on v1 the memory group and its exec sub-groups). */
int cgroup_env_oom_kills(struct cgroup_manager *m, const char *env, uint64_t *ret);
/* Remove env/sub only if no process is left in it (never kills). Missing is fine. */
int cgroup_env_prune(struct cgroup_manager *m, const char *env, const char *sub);
/* 1 if pid is the only process in env/sub (and its descendants) in every hierarchy, else 0;
 * -ENOENT if the group does not exist. */
/* The directory fds the manager works through (at most max; CGROUP_MANAGER_MAX_FDS holds all):
 * what a forked helper keeps when it closes everything else before it attaches itself. */
#define CGROUP_MANAGER_MAX_FDS 16
size_t cgroup_manager_fds(const struct cgroup_manager *m, int *fds, size_t max);
int cgroup_env_holds_only(struct cgroup_manager *m, const char *env, const char *sub, pid_t pid);
/* What an environment's /sys/fs/cgroup shows of a v1 hierarchy: those whose limits runtimes
 * read (cpu, cpuacct, memory, pids, blkio). */
bool cgroup_controllers_shown(const char *controllers);

/* Its v1 hierarchies (hybrid and v1; none on v2 or a test directory) as detached, read-only
 * bind mounts of the environment's group, for its /sys/fs/cgroup: a bind costs what one
 * group costs, where a new mount of a v1 hierarchy walks every group of the host. Call
 * before leaving the daemon's mount namespace (the source must be in the caller's). */
struct cgroup_view_tree {
        char controllers[64]; /* "cpu,cpuacct" */
        int fd;               /* open_tree(OPEN_TREE_CLONE) of the group; the caller closes it */
};
#define CGROUP_VIEW_MAX 8
int cgroup_env_view_trees(struct cgroup_manager *m, const char *env,
                          struct cgroup_view_tree ret[CGROUP_VIEW_MAX], size_t *ret_n);

/* List env groups present in the subtree (for cleanup after a crash). Caller frees each
 * string and the array. */
int cgroup_list_envs(struct cgroup_manager *m, char ***ret_names, size_t *ret_n);

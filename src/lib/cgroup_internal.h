/* Shared between cgroup_discover.c (detection, the manager), cgroup.c (generic group handling)
 * and the two backends cgroup_v2.c and cgroup_v1.c (which also serves the hybrid layout).
 *
 * The manager keeps one entry per hierarchy it uses: the unified one alone on v2; the v1
 * controller hierarchies (cpu, cpuacct, memory, pids, freezer, blkio — co-mounted ones such as
 * "cpu,cpuacct" count once) plus, on hybrid, the controller-less cgroup2 mount. Each entry holds
 * a directory fd of <own group>/<subtree>, the one directory Paddock created in that hierarchy;
 * every later path is resolved relative to that fd, never rebuilt as a string from the root.
 *
 * What differs between v1 and v2 — limit files, freezing, cgroup.kill, statistics, delegation —
 * sits behind struct cgroup_ops. What is the same — creating and removing the mirrored group
 * directories, attaching, the SIGKILL-until-empty loop, listing — lives in cgroup.c; finding
 * the hierarchies and the daemon's own group in cgroup_discover.c. */
#pragma once
#include "lib/cgroup.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define CG_MAX_HIER 12

/* Magic numbers from linux/magic.h, spelled out so the header needs no kernel headers. */
#define CG_CGROUP_SUPER_MAGIC  0x27e0ebu
#define CG_CGROUP2_SUPER_MAGIC 0x63677270u

/* The cpu.max / cpu.cfs_period_us period. 100 ms is the kernel default; quota = millis * 100. */
#define CG_CPU_PERIOD_US 100000ull

struct cg_hier {
        char *controllers; /* "memory", "cpu,cpuacct"; "" for the unified hierarchy */
        bool unified;
        int subtree_fd;    /* O_DIRECTORY fd of <own>/<subtree> in this hierarchy */
        /* Only while cgroup_manager_new runs: the daemon's own group (v2 delegation writes
         * there) and whether this call made the subtree (removed again on failure). */
        int own_fd;
        bool created;
};

struct cgroup_ops {
        /* Once, after the subtree directories exist: v2 enables controllers (delegation). */
        int (*setup)(struct cgroup_manager *m);
        /* Write limits into an existing env group. */
        int (*set_limits)(struct cgroup_manager *m, const char *env, const struct cgroup_limits *l);
        /* Freeze or thaw env/sub (sub NULL = env). Returns once the write is done; the kernel
         * completes freezing asynchronously. */
        int (*freeze)(struct cgroup_manager *m, const char *env, const char *sub, bool frozen);
        /* Kill env/sub with one cgroup.kill write; -EOPNOTSUPP where the kernel lacks it. */
        int (*kill_fast)(struct cgroup_manager *m, const char *env, const char *sub);
        int (*stats)(struct cgroup_manager *m, const char *env, struct cgroup_stats *ret);
        /* stats' oom_kills alone (read after every exec). */
        int (*oom_kills)(struct cgroup_manager *m, const char *env, uint64_t *ret);
};

struct cgroup_manager {
        enum cgroup_mode mode;
        const struct cgroup_ops *ops;
        char *subtree;
        /* sysfs_root is a mounted cgroup file system (not a test directory laid out like one):
         * only then may the manager move the daemon's own process (v2 delegation). */
        bool real;
        size_t n_hier;
        struct cg_hier hier[CG_MAX_HIER];
};

extern const struct cgroup_ops cgroup_v2_ops;
extern const struct cgroup_ops cgroup_v1_ops; /* v1 and hybrid */

/* --- file helpers (all relative to a group's dir fd) --- */

/* Write value, truncating: on cgroupfs O_TRUNC is a no-op, in a test directory it keeps the file
 * holding exactly the last value written. */
int cg_write(int dirfd, const char *name, const char *value);
/* cg_write unless the file reads back as value already (its first line). For the CPU quota:
 * each write of it walks every cpu group on the host (the kernel's schedulability check, also
 * for an unlimited one), and a new group's is unlimited already. */
int cg_write_changed(int dirfd, const char *name, const char *value);
/* Write v in decimal, or unlimited_str for CG_UNLIMITED. A missing file is fine for an
 * unlimited value (nothing to lift) and -EOPNOTSUPP for a real limit (the controller is absent). */
int cg_write_limit(int dirfd, const char *name, uint64_t v, const char *unlimited_str);
/* Whole file into a malloc'd NUL-terminated string (cgroup.procs can be long). */
int cg_read_all(int dirfd, const char *name, char **ret);
/* First number in the file ("max" reads as CG_UNLIMITED). */
int cg_read_u64(int dirfd, const char *name, uint64_t *ret);
/* Value of the "key N" line of a flat keyed file (memory.events, cpu.stat, memory.oom_control). */
int cg_read_keyed_u64(int dirfd, const char *name, const char *key, uint64_t *ret);
/* Whether `word` appears as a whitespace-separated token (or comma-separated, with comma). */
bool cg_has_token(const char *list, const char *word, const char *seps);
bool cg_file_exists(int dirfd, const char *name);
bool cg_is_cgroupfs(int fd);

/* --- group helpers --- */

/* Env and sub names become directory names next to interface files: refuse anything that could
 * be a path or collide with a file such as "memory.max" or "tasks". */
bool cg_name_valid(const char *name);
/* Open env (sub NULL) or env/sub in hierarchy h as an O_DIRECTORY fd. create: mkdir what is
 * missing (existing is fine). */
int cg_open_group(const struct cg_hier *h, const char *env, const char *sub, bool create,
                  int *ret_fd);
/* The hierarchy that carries a v1 controller ("memory", "cpuacct"), or the unified one with
 * controller NULL. NULL if not in use. */
const struct cg_hier *cg_find_hier(const struct cgroup_manager *m, const char *controller);
/* Generic kill: cgroup.kill where there is one, else (and for stragglers) freeze, SIGKILL every
 * pid listed in the group and its children in every hierarchy, thaw; until empty or -EBUSY. */
int cg_kill_until_empty(struct cgroup_manager *m, const char *env, const char *sub);
/* Short sleep used by the polling loops. */
void cg_sleep_ms(unsigned ms);

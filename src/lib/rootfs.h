/* The root filesystem of an environment, assembled inside its fresh mount namespace by the
 * spawning child while it is still host root, then entered with pivot_root.
 *
 * The image stays owned by ids 0..65535 on disk; the environment sees it through an idmapped
 * mount onto its own host range. A sandbox gets that tree read-only plus size-limited tmpfs
 * /tmp and /workspace. A computer gets an overlay: the idmapped image below, a per-environment
 * upper directory (owned by the environment's host range) above, so it persists across stops;
 * or (btrfs driver) its own copy-on-write tree, idmapped and writable.
 *
 * Every mount target is resolved inside the new root with openat2(RESOLVE_IN_ROOT|
 * RESOLVE_NO_SYMLINKS) and mounted through fds: a symlink planted in an image (say /proc -> /)
 * can never redirect a mount onto the host. */
#pragma once
#include "lib/cgroup.h"

#include <stdbool.h>
#include <stdint.h>

/* A knob of the environment's own namespaces, by its path below /proc/sys. */
struct rootfs_sysctl {
        const char *path; /* "net/ipv4/ip_unprivileged_port_start"; NULL ends a list */
        const char *value;
        bool optional;    /* a kernel without it is fine */
};

struct rootfs_config {
        const char *image_rootfs; /* absolute path of the image's rootfs directory */
        const char *env_dir;      /* absolute path of the env's state dir (daemon-made) */
        bool writable;            /* computer: its own tree or an overlay; sandbox: read-only */
        const char *tree;         /* its own tree (btrfs driver): mounted idmapped (computers
                                   * writable); NULL: the image (sandbox) or an overlay of
                                   * env_dir/{lower,upper,work} (computer) */
        bool shifted;             /* tree is owned by the env's host ids: bind it, no idmap */
        const char *overlay_dir;  /* overlay computers: holds upper/ and work/ (NULL: env_dir) */
        int userns_fd;            /* the environment's user namespace (for the idmap) */
        uint32_t uid_base;        /* host id of the environment's root */
        uint64_t tmp_bytes;       /* sandbox: size of /tmp and of /workspace (and inodes) */
        uint64_t shm_bytes;       /* size of /dev/shm */
        const char *resolv_conf;  /* host file bound read-only on /etc/resolv.conf, or NULL */
        const char *lxcfs_dir;    /* lxcfs mount point: its proc/ files are bound read-only over
                                   * the environment's, or NULL (the kernel's host figures) */
        const char *cpu_online;   /* file bound read-only over /sys/devices/system/cpu/online
                                   * ("0-N" for the CPU limit, kept current by the daemon), or
                                   * NULL */
        /* v1 and hybrid: the environment's group in each hierarchy shown, as detached read-only
         * mounts (cgroup_env_view_trees), attached under /sys/fs/cgroup; none: the hierarchies
         * of the cgroup namespace are mounted anew (cgroup2 on v2). */
        const struct cgroup_view_tree *cgroup_trees;
        size_t n_cgroup_trees;
        /* /sys: the process's shared sysfs (rootfs_sysfs_share) instead of one of its own.
         * For an environment without a link: the network its /sys/class/net shows is the
         * shared namespace's loopback, and a link it gets later is not there (its /proc/net
         * and netlink are its own, as always). */
        bool sysfs_shared;
        /* Written through the environment's new /proc, before it is masked: a lookup there
         * matches only its own network namespace's entries, where the host's /proc/sys/net
         * holds one of each name per namespace on the host. NULL: none. */
        const struct rootfs_sysctl *sysctls;
};

/* Sandboxes without a network share one sysfs, that of an empty network namespace made here
 * once, instead of one each: every new sysfs superblock is compared with every existing one
 * (one per network namespace), so with thousands of environments each mount searched them all,
 * and each left one more for the next. Called once, before the processes that clone PID 1s are
 * forked (they use what it made as it is then). Where the kernel clones a detached mount
 * (6.15 on), each root gets a clone of one read-only mount; before, the root's sysfs is
 * mounted from within that namespace (the kernel finds its superblock, makes none). The
 * namespace lives as long as the process and its forks: roots that outlive them keep the
 * mount, but its /sys/class/net is then empty. 0 with *cloned, or -errno: every root then
 * mounts a sysfs of its own. */
int rootfs_sysfs_share(bool *cloned);

/* Assemble and pivot into the root. On failure *ret_step names the step that failed. */
int rootfs_enter(const struct rootfs_config *c, const char **ret_step);

/* Directories every image must have as mount points (created at import time). */
extern const char *const rootfs_required_dirs[];

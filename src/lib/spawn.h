/* Starting PID 1 of an environment.
 *
 * The daemon clones one child into a new pid namespace; the child, still host root, joins the
 * env's cgroups and makes new mount, uts, ipc, net and cgroup namespaces, so they belong to
 * the host's user namespace: the environment's root can never change its own mounts,
 * interfaces or routes. The child builds and enters the root filesystem, sets the hostname, brings up
 * loopback, and only then joins the environment's user namespace (uid 0 = its host range),
 * confines itself and executes paddock-init from an fd opened on the host (so nothing of
 * Paddock needs to be inside the image).
 *
 * The child reports progress over a CLOEXEC pipe: an error message means failure, EOF means
 * the exec happened. */
#pragma once
#include "lib/cgroup.h"
#include "lib/confine.h"
#include "lib/rootfs.h"

#include <stdint.h>
#include <sys/types.h>

/* The IPv6 settings a networked environment's namespace gets before its link is added
 * (lib/netlink.c): written by the child through its own new /proc, where a lookup sees only
 * its own namespace's entries (the daemon's /proc/sys/net holds one of each per namespace).
 * NONE: left as the kernel makes them (a namespace with loopback only). */
enum spawn_net {
        SPAWN_NET_NONE,
        SPAWN_NET_V4, /* IPv6 off: no IPv6 path at all */
        SPAWN_NET_V6, /* on, but no generated link-local address and no router advertisements */
};

struct spawn_config {
        const char *hostname;
        enum confine_profile profile;
        struct rootfs_config rootfs;
        struct cgroup_manager *cgroups;
        const char *cgroup_name;
        int init_fd;            /* O_RDONLY fd of the paddock-init binary on the host */
        char *const *init_envp; /* environment of PID 1 */
        bool clone_parent;      /* the caller's parent gets the child (CLONE_PARENT): the
                                 * daemon's spawn process clones for the daemon */
        enum spawn_net net;     /* its namespace's IPv6 set for the link added after it */
        /* Non-NULL: env_spawn_start makes the environment's cgroups with these limits first
         * (cgroup_env_create; groups already there are kept), a failure reported as the
         * clone's. In the daemon's spawn process this takes the mkdirs off the daemon's loop:
         * on cgroup v1 each can wait milliseconds for another process's cgroup move (the
         * kernel's cgroup lock, held over an RCU grace period). */
        const struct cgroup_limits *make_cgroup;
};

struct spawn_result {
        pid_t pid;
        int pidfd;
        uint64_t start_time;
};

/* errbuf receives a one-line reason on failure. Blocks until the child has exec'd (~ms; at
 * most SPAWN_SETUP_MS). env_spawn_start + env_spawn_finish. */
int env_spawn(const struct spawn_config *c, struct spawn_result *ret, char *errbuf, size_t errlen);

#define SPAWN_SETUP_MS 30000
/* How long finish waits for the rest of an error message and the EOF after its first bytes. */
#define SPAWN_REPORT_END_MS 1000

/* The same in two steps, so that a caller with other work (the daemon's loop) need not wait
 * for the child's setup: start clones it (c may go once it returns: the child has a copy);
 * its report_fd becomes readable with an error message or at EOF, the exec. */
struct spawn_pending {
        pid_t pid;
        int pidfd, report_fd;
};
int env_spawn_start(const struct spawn_config *c, struct spawn_pending *ret, char *errbuf,
                    size_t errlen);
/* Waits up to timeout_ms for the report (0: it is readable now), then: 0 with ret (p is
 * emptied), or -EIO with errbuf after killing and reaping the child (p is closed). */
int env_spawn_finish(struct spawn_pending *p, int timeout_ms, struct spawn_result *ret,
                     char *errbuf, size_t errlen);
/* Kill, reap and close a child that is still setting up (p->pid 0: nothing to do). */
void env_spawn_abandon(struct spawn_pending *p);

/* Bring "lo" up in the current network namespace. */
int loopback_up(void);

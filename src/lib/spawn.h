/* Starting PID 1 of an environment.
 *
 * The daemon clones one child into new mount, pid, uts, ipc, net and cgroup namespaces while
 * it is still host root, so those namespaces belong to the host's user namespace: the
 * environment's root can never change its own mounts, interfaces or routes. The child joins
 * the env's cgroups, builds and enters the root filesystem, sets the hostname, brings up
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

struct spawn_config {
        const char *hostname;
        enum confine_profile profile;
        struct rootfs_config rootfs;
        struct cgroup_manager *cgroups;
        const char *cgroup_name;
        int init_fd;            /* O_RDONLY fd of the paddock-init binary on the host */
        char *const *init_envp; /* environment of PID 1 */
};

struct spawn_result {
        pid_t pid;
        int pidfd;
        uint64_t start_time;
};

/* errbuf receives a one-line reason on failure. Blocks until the child has exec'd (~ms). */
int env_spawn(const struct spawn_config *c, struct spawn_result *ret, char *errbuf, size_t errlen);

/* Bring "lo" up in the current network namespace. */
int loopback_up(void);

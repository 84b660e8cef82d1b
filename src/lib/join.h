/* Running a command inside an existing environment ("exec").
 *
 * A forked helper (host root) joins the environment's cgroup (a per-exec child group, so the
 * exec's whole process tree can be killed on timeout), closes every fd it inherited from the
 * daemon, makes itself non-dumpable, enters all namespaces of PID 1 through its pidfd, user
 * namespace last, and clones the command process with CLONE_PARENT, so the daemon is its parent
 * and collects its exit status. The command process switches to the requested user, applies
 * exactly PID 1's confinement, changes to the working directory (resolved inside the
 * environment, after every host fd is gone) and executes. */
#pragma once
#include "lib/cgroup.h"
#include "lib/confine.h"

#include <sys/types.h>

struct join_config {
        int env_pidfd;
        enum confine_profile profile;
        struct cgroup_manager *cgroups;
        const char *cgroup_name;
        const char *cgroup_sub;  /* per-exec group below the env's */
        char *const *argv;
        char *const *envp;       /* HOME is added from /etc/passwd when absent */
        const char *cwd;         /* NULL: the user's home directory, or "/" */
        const char *user;        /* NULL/"root", "name", "uid", "uid:gid", "name:gid" */
        int stdin_fd, stdout_fd, stderr_fd;
};

/* Returns the host pid of the command process (a child of the caller). */
int env_join_exec(const struct join_config *c, pid_t *ret_pid, char *errbuf, size_t errlen);

/* Look up user in a passwd-format file (untrusted: bounded, never blocks, no NSS). */
int passwd_lookup(const char *path, const char *user, uid_t *ret_uid, gid_t *ret_gid,
                  char *ret_home, size_t home_len);

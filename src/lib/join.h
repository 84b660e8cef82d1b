/* Running a command inside an existing environment ("exec").
 *
 * A forked helper (host root) joins the environment's cgroup (a per-exec child group, so the
 * exec's whole process tree can be killed on timeout), closes every fd it inherited from the
 * daemon, makes itself non-dumpable, enters all namespaces of PID 1 through its pidfd, user
 * namespace last, and clones the command process with CLONE_PARENT, so the daemon is its parent
 * and collects its exit status. The command process switches to the requested user, applies
 * exactly PID 1's confinement (for a terminal session it first makes the pty, see pty.h), changes to the working directory (resolved inside the
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
        /* A user name that runs as root when the environment has no such user (NULL: none). */
        const char *user_fallback_for;
        bool login_env;          /* also set USER and LOGNAME (when absent) to the user's name */
        int stdin_fd, stdout_fd, stderr_fd;
        /* Interactive session (>= 0): after switching user, the command process allocates a
         * pty inside the environment, sends its master over this socket, and runs with the
         * slave as stdin/stdout/stderr and controlling terminal of a new session. Until then
         * (and if that fails) its errors go to stderr_fd. */
        int pty_sock;
        unsigned cols, rows; /* initial window size; 0 = the kernel's default */
};

/* Returns the host pid of the command process (a child of the caller). */
int env_join_exec(const struct join_config *c, pid_t *ret_pid, char *errbuf, size_t errlen);

/* Look up user in a passwd-format file (untrusted: bounded, never blocks, no NSS). */
int passwd_lookup(const char *path, const char *user, uid_t *ret_uid, gid_t *ret_gid,
                  char *ret_home, size_t home_len);

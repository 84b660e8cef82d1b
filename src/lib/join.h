/* Running a command inside an existing environment ("exec").
 *
 * An exec slot (join_slot.c), made ahead of time, joins a per-exec child group of the
 * environment's cgroup (so the exec's whole process tree can be killed on timeout), closes
 * every fd it inherited from the daemon, enters all namespaces of PID 1 through its pidfd,
 * user namespace last, and applies what of PID 1's confinement children inherit. For each
 * command it clones the command process with CLONE_PARENT, so the daemon is its parent and
 * collects its exit status. The command process (join.c) switches to the requested user,
 * applies the rest of PID 1's confinement (for a terminal session it first makes the pty, see
 * pty.h), changes to the working directory (resolved inside the environment, after every host
 * fd is gone) and executes. */
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
        /* Room for envp's count + 4 pointers: the command's final environment is built there
         * instead of on the heap (a slot's command shares the slot's memory until its execve,
         * and must leave nothing allocated in it). */
        char **envp_room;
        /* > 2: an O_CLOEXEC fd the command keeps until its execve, so that whoever shares its
         * memory learns when it may touch it again (0: none). */
        int exec_fd;
        /* join_slot_start: the caller's parent gets the slot (CLONE_PARENT): the daemon's
         * spawn process makes slots for the daemon */
        bool clone_parent;
};

/* A warm exec slot (join_slot.c): forked ahead of time (by the daemon's spawn process) and
 * kept. It joins its per-exec cgroup (c->cgroup_sub) and every namespace of PID 1, loads the
 * part of the confinement its commands inherit (confine_apply_spawner), then runs commands one
 * at a time, each in that group; the fork, the cgroup join (an RCU grace period on cgroup v1)
 * and the filter's load are off the exec's path, and its commands are spawned without copying
 * the daemon's address space. join_slot_start uses only c's env_pidfd, profile and cgroup
 * fields. */
struct join_slot {
        pid_t pid; /* the slot, a child of the caller (or of its parent: clone_parent); 0 once
                    * discarded */
        int sock;  /* the caller's end of its socket */
        bool unsent; /* join_slot_send's message did not go out (the slot is gone) */
};
/* wait_go: the slot joins its group and then waits for join_slot_go before it enters the
 * namespaces (PID 1 may still be setting them up: a create). */
int join_slot_start(const struct join_config *c, bool wait_go, struct join_slot *ret);
/* Let a slot started with wait_go go on (never blocks). */
int join_slot_go(struct join_slot *slot);
/* Hand the slot c's command (argv, envp, cwd, user, stdio, terminal; its cgroup and profile
 * are the slot's), in two steps, for a caller that must not wait for the slot (its group may
 * be starved of CPU, or frozen). send hands it the command: 0, or JOIN_SLOT_SENT_BIG when it
 * was too big for one message and went in a memfd (~96 KiB to 8 MiB, the caller's memory until
 * the command has exec'd: allow_big false refuses that), or -E2BIG when it is over 8 MiB
 * or too big with !allow_big (the slot is left as it was); c's fds may be closed once it
 * returns. report then
 * reads its answer once its socket is readable (timeout_ms 0) or waits up to timeout_ms for
 * it: 0 with the command's host pid (a child of the caller; the slot stays, in the command's
 * group, for the next command), or -ESTALE (the caller discards the slot, join_slot_release or
 * join_slot_discard). */
int join_slot_send(struct join_slot *slot, const struct join_config *c, bool allow_big);
#define JOIN_SLOT_SENT_BIG 1 /* join_slot_send: the command went in a memfd */
#define JOIN_SLOT_ANSWER_MS 10000 /* how long a slot may take to answer: it may still set up */
int join_slot_report(struct join_slot *slot, int timeout_ms, pid_t *ret_pid, char *errbuf,
                     size_t errlen);
/* Kill and reap the slot (idempotent). */
void join_slot_discard(struct join_slot *slot);
/* Kill the slot and close its socket without waiting: the caller reaps it (its pid). */
void join_slot_release(struct join_slot *slot);

/* Look up user in a passwd-format file (untrusted: bounded, never blocks, no NSS). */
int passwd_lookup(const char *path, const char *user, uid_t *ret_uid, gid_t *ret_gid,
                  char *ret_home, size_t home_len);

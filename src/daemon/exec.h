/* Exec sessions: one command running inside an environment, its pipes watched by the event
 * loop, its output capped, its whole process tree killed on timeout. */
#pragma once
#include "daemon/engine.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct join_slot;

#define EXEC_DEFAULT_MAX_OUTPUT (16u << 20)
#define EXEC_MAX_OUTPUT_LIMIT (256u << 20)
#define EXEC_MAX_ACTIVE 256
#define EXEC_USER_MAX 64 /* "user" of an exec or a file operation: a user name, uid or uid:gid */

struct audit_exec;
struct exec_request {
        char **argv;      /* NULL-terminated */
        json_t *env;      /* object of strings or NULL */
        const char *cwd;  /* NULL = home */
        const char *user; /* NULL = root */
        const void *stdin_data;
        size_t stdin_len;
        bool stdin_from_fd;  /* feed stdin from stdin_fd (read to its end) instead */
        int stdin_fd;
        uint64_t timeout_ms; /* 0 = none */
        size_t max_output;   /* stdout + stderr bytes kept */
        bool tty;            /* interactive: a pty inside the environment (see lib/pty.h) */
        unsigned cols, rows; /* tty: initial window size */
        /* The audit record written when the command ends (audit.h): exec_start takes it over
         * when it succeeds; on failure it stays the caller's. NULL: none. */
        struct audit_exec *audit;
        /* Interactive stdin without a terminal: the pipe stays open for exec_stdin_write until
         * exec_stdin_close (stdin_data/stdin_from_fd are then not used). */
        bool stdin_keep;
        /* A login-like command (the E2B surface): cwd NULL is the user's home (not a sandbox's
         * /workspace), USER and LOGNAME are set, and an unknown user_fallback_for user name runs
         * as root instead of failing. */
        bool login;
        const char *user_fallback_for;
};

struct exec_result {
        int exit_code; /* 128+N when killed by signal N */
        bool timed_out;
        bool truncated;
        uint64_t duration_ms;
        bool signaled; /* killed by signal exit_code - 128 (not an exit with that status) */
};

struct exec_callbacks {
        void (*output)(void *data, int stream, const char *buf, size_t len); /* stream 1 or 2 */
        void (*done)(void *data, const struct exec_result *res);
        /* tty: queued input went down to nothing (see exec_tty_input). May be NULL. */
        void (*input_drained)(void *data);
        /* A background process (procs.c): its output, not its running, is activity of its
         * environment for idle stop (engine_idle.c); other sessions are activity throughout. */
        bool background;
        /* exec_start leaves the command to the environment's exec slot: launched says when
         * the slot has started it, once, before any done: with the
         * command's pid, or 0 when it could not start (its reason on stderr and done, exit 126,
         * follow). Output may come before it: a caller whose first message must carry the pid
         * pauses the output until then (e2b_rpc_process.c). May be NULL. */
        void (*launched)(void *data, pid_t pid);
};

struct exec_session;

/* tty sessions: terminal output arrives through output() as stream 1 (errors from before the
 * terminal existed, e.g. an unknown user, come as stream 2). */
#define EXEC_TTY_INPUT_MAX (256u << 10) /* queued input above this: the caller should pause */
/* Queue keystrokes for the terminal; returns the bytes still queued afterwards (< 0: -errno). */
long exec_tty_input(struct exec_session *s, const void *buf, size_t len);
int exec_tty_resize(struct exec_session *s, unsigned cols, unsigned rows);
/* Stop (or resume) reading terminal output while the client is slow. */
void exec_tty_pause_output(struct exec_session *s, bool pause);
/* The client is gone: hang up the terminal (SIGHUP to the session, as when an SSH connection
 * drops); EXEC_HANGUP_GRACE_MS later everything still running in the session's cgroup is
 * killed (long-lived work belongs in a background process, exec -d). The session frees itself
 * when the command has exited; no callback runs any more. */
#define EXEC_HANGUP_GRACE_MS 2000
void exec_hangup(struct exec_session *s);

int exec_start(struct engine *e, struct env *v, const struct exec_request *rq,
               const struct exec_callbacks *cb, void *data, struct exec_session **ret, char *err,
               size_t errlen);
/* PID 1 of env is gone, so every exec in it is dying: collect those processes now (waiting up
 * to wait_ms in all), so that no zombie keeps the environment's cgroup busy. */
void exec_reap_env(struct env *v, unsigned wait_ms);
/* Make the environment's warm exec slot soon (from a timer: after the current answer). */
void exec_slot_prewarm(struct engine *e, struct env *v);
/* During a create, right after PID 1's clone (pidfd): a slot that joins its group now and
 * enters the namespaces once exec_slot_go says PID 1 is set up; discard it with
 * exec_slot_discard if the create fails. Not while other creates are under way. */
void exec_slot_early(struct engine *e, struct env *v, int pidfd);
/* The same made by the spawn process with PID 1 (spawner_spawn's slot_sub): whether v gets an
 * early slot, and the name of its group below v's (sub, 32 bytes); then exec_slot_adopt lists
 * the slot that came with PID 1's answer (js->pid 0: none came; else js is taken). */
bool exec_slot_early_wanted(struct engine *e, struct env *v, char sub[32]);
void exec_slot_adopt(struct engine *e, struct env *v, const char *sub, struct join_slot *js);
void exec_slot_go(struct env *v);
/* Send the environment's exec slot SIGKILL without waiting (exec_slot_discard reaps it). */
void exec_slot_kill(struct env *v);
/* One of the environment's exec slots that has not exited yet (killed by exec_slot_kill, it
 * may still be tearing down), or 0 when none is left and exec_slot_discard will not wait.
 * Leaves them to it to reap. */
pid_t exec_slot_alive(struct env *v);
/* Kill the environment's warm exec slot, if it has one (before its cgroup goes). */
void exec_slot_discard(struct env *v);
/* At daemon shutdown: kill every slot (environments keep running without them). */
void exec_slots_shutdown(void);
/* Signal the command process (not its children: they get it from it, as with kill(1)); in a
 * tty session, the terminal's foreground process group (as Ctrl-C does). */
int exec_signal(struct exec_session *s, int sig);
/* The client is gone: the command keeps running, its output is dropped. */
void exec_detach(struct exec_session *s);
/* Signal the command's whole process group (it is a session leader); SIGKILL kills everything
 * in the exec's cgroup. */
int exec_signal_group(struct exec_session *s, int sig);
/* Stop (or resume) reading the command's output, pipes or terminal, while a reader is slow:
 * the command blocks on its full pipe, nothing is lost. */
void exec_pause_output(struct exec_session *s, bool pause);
/* stdin_keep sessions: queue bytes for the command's stdin (at most EXEC_STDIN_QUEUE_MAX
 * queued, else -ENOBUFS); -EPIPE once stdin was closed. exec_stdin_close: EOF after what is
 * queued. */
#define EXEC_STDIN_QUEUE_MAX (4u << 20)
int exec_stdin_write(struct exec_session *s, const void *buf, size_t len);
int exec_stdin_close(struct exec_session *s);

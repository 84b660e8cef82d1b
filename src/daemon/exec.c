/* Exec sessions: the command's process is watched by the supervisor (supervise.h: pidfd,
 * deadline, its exec cgroup); this file feeds its stdin, reads its stdout/stderr (or its
 * terminal) with a cap, and reports the result. */
#include "daemon/exec.h"
#include "daemon/spawner.h"
#include "daemon/audit.h"
#include "daemon/events.h"
#include "daemon/log.h"
#include "daemon/supervise.h"
#include "lib/join.h"
#include "lib/paddock.h"
#include "lib/pty.h"
#include "lib/util.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>

#define STDIN_CHUNK 65536

static unsigned active_sessions;
static struct exec_session *sessions; /* all live sessions, for exec_reap_env */

/* Warm exec slots (join.h): when an environment is created or started (with PID 1, or
 * exec_slot_prewarm), or when an exec finds none free, a slot is cloned into a per-exec group
 * and the environment's namespaces, and stays: each exec hands it the command and skips the
 * fork, the cgroup join, the filter's load and the copy of the daemon's address space; the
 * slot's answer (the command's pid) comes to the loop (struct launch below), never waited for.
 * A slot is busy while its command runs and free again once its group holds only the slot; a
 * command that leaves a process behind, or dies with its group killed, costs the slot. Up to
 * SLOTS_PER_ENV per environment, so that a background server or a long command does not make
 * every other exec clone a slot of its own (beyond them each exec gets one for its command
 * only), with at most one of them free; discarded when the environment stops or after
 * SLOT_IDLE_MS unused, so
 * environments nobody execs into hold no extra process. A slot made ahead of a first command
 * that never came goes after SLOT_UNUSED_MS: a script creating a thousand environments in a row
 * must not leave a thousand slots behind for half a minute. */
#define SLOT_IDLE_MS 30000
#define SLOT_UNUSED_MS 2000
#define SLOT_SWEEP_MS 1000
#define SLOT_SWEEP_BATCH 8
#define SLOTS_PER_ENV 4

struct exec_slot {
        struct join_slot js;
        char sub[32];
        struct engine *eng;
        struct env *env;
        uint64_t born; /* now_ms() when made or last freed */
        bool busy;     /* its command runs, in the slot's group */
        bool waiting;  /* made during a create: waits for exec_slot_go */
        bool used;     /* has run a command */
        bool once;     /* made beyond SLOTS_PER_ENV: let go once its command runs */
        struct exec_slot *next;     /* in slots */
        struct exec_slot *env_next; /* in its environment's (env_exec_slot) */
};

static struct exec_slot *slots; /* every slot: the sweep and exec_slots_shutdown */
/* One timer for all slots, while there are any: a timer per slot would make every turn of the
 * loop scan as many timers as there are environments with a slot. */
static struct loop_timer *sweep_timer;

static void after_exec(struct exec_session *s, bool exited);
static void launch_abandon(struct exec_session *s);

struct exec_session {
        struct engine *eng;
        char env[NAME_BUF_SIZE];
        char cg[80];
        char sub[32];
        struct supervise *sv; /* the command's process */
        int in_fd, out_fd, err_fd;
        struct loop_source *in_src, *out_src, *err_src;
        unsigned char *stdin_buf;
        size_t stdin_len, stdin_off;
        int stdin_src; /* refills stdin_buf when >= 0 (a spooled upload) */
        size_t max_output, output_total;
        uint64_t started;
        struct exec_result res;
        const struct exec_callbacks *cb;
        void *data;
        /* tty sessions */
        bool tty, hungup, out_paused;
        int pty_sock, pty_fd; /* the socket the master arrives on; the master */
        struct loop_source *pty_sock_src, *pty_src;
        unsigned cols, rows;  /* last size asked for before the master arrived */
        unsigned char *input;  /* keystrokes not yet written to the master */
        size_t input_len, input_off;
        struct audit_exec *audit; /* written when the command ends */
        bool idle_hold;           /* keeps its environment from idling (engine_idle.c) */
        pid_t pid;                /* host pid of the command (0 while it launches) */
        bool via_slot;            /* its environment's slot spawned it: after_exec frees it */
        /* Launching: its slot has the command, and its answer (the command's pid) comes to the
         * loop (struct launch); until then no supervise, and what needs the command waits. */
        struct launch *launch;
        uint64_t timeout_ms;      /* the exec's own, for supervise once launched */
        int pending_signal;       /* asked for while launching (0: none) */
        bool pending_group;       /* ... for its process group (exec_signal_group) */
        bool group_killed;        /* its group was killed (SIGKILL, timeout): the slot too */
        struct loop_timer *fail_timer; /* it could not start: on_launch_failed */
        bool tell_launch;              /* exec_start left it launching: cb->launched is due */
        char fail_msg[320];
        bool stdin_keep, stdin_closing; /* interactive stdin pipe (exec_stdin_write) */
        struct exec_session *next;
};

static void close_src(struct loop_source **src, int *fd)
{
        loop_remove(*src);
        *src = NULL;
        if (*fd >= 0)
                close(*fd);
        *fd = -EBADF;
}

static void deliver(struct exec_session *s, int stream, const char *buf, size_t n)
{
        if (s->output_total >= s->max_output) {
                s->res.truncated = true;
                return;
        }
        if (n > s->max_output - s->output_total) {
                n = s->max_output - s->output_total;
                s->res.truncated = true;
        }
        s->output_total += n;
        if (s->cb && s->cb->output)
                s->cb->output(s->data, stream, buf, n);
        if (s->cb && s->cb->background)
                engine_idle_touch_name(s->eng, s->env);
}

/* Read what is there now; false at EOF or error (a pty master says EIO when every slave fd
 * is closed). stream 3 is the terminal, delivered as stdout. */
static bool drain(struct exec_session *s, int stream)
{
        int fd = stream == 1 ? s->out_fd : stream == 2 ? s->err_fd : s->pty_fd;
        if (stream == 3)
                stream = 1;
        char buf[65536];
        for (int rounds = 0; fd >= 0 && rounds < 16; rounds++) {
                ssize_t n = read(fd, buf, sizeof(buf));
                if (n > 0) {
                        deliver(s, stream, buf, (size_t)n);
                        continue;
                }
                if (n < 0 && (errno == EAGAIN || errno == EINTR))
                        return true;
                return false;
        }
        return true;
}

static void session_free(struct exec_session *s)
{
        for (struct exec_session **p = &sessions; *p; p = &(*p)->next)
                if (*p == s) {
                        *p = s->next;
                        break;
                }
        if (s->idle_hold)
                engine_idle_hold(s->eng, s->env, false);
        launch_abandon(s);
        loop_cancel_timer(s->fail_timer);
        supervise_abandon(s->sv, true);
        if (s->via_slot)
                after_exec(s, false); /* a start that failed after the slot spawned it */
        audit_exec_free(s->audit);
        close_src(&s->in_src, &s->in_fd);
        close_src(&s->out_src, &s->out_fd);
        close_src(&s->err_src, &s->err_fd);
        close_src(&s->pty_sock_src, &s->pty_sock);
        close_src(&s->pty_src, &s->pty_fd);
        free(s->input);
        if (s->stdin_src >= 0)
                close(s->stdin_src);
        free(s->stdin_buf);
        free(s);
        active_sessions--;
}

static void on_pty_handover(struct loop_source *src, int fd, uint32_t events, void *data);

/* The command has exited (and was reaped, its cgroup removed if nothing is left in it). */
static void on_command_exit(void *data, const struct supervise_exit *x)
{
        struct exec_session *s = data;
        s->res.exit_code = supervise_exit_code(x);
        s->res.timed_out = x->timed_out;
        s->res.signaled = x->signaled;
        /* Output written just before exit is already in the pipes: take it, then stop
         * listening. Background processes that still hold the pipes get EPIPE later. */
        drain(s, 1);
        drain(s, 2);
        /* A command that exits at once may do so before its terminal reached us: it is in
         * the socket's queue. Its last screen output is in the master; take all of it, paused
         * or not (the owner buffers or drops). */
        if (s->pty_sock >= 0 && !s->hungup)
                on_pty_handover(NULL, s->pty_sock, EPOLLIN, s);
        if (s->pty_fd >= 0)
                drain(s, 3);
        s->res.duration_ms = now_ms() - s->started;
        audit_exec_end(TAKE_PTR(s->audit), &s->res); /* before the client can see the end */
        if (s->cb && s->cb->done)
                s->cb->done(s->data, &s->res);
        after_exec(s, true); /* and the exec_exited event, once the answer is out */
        session_free(s);
}

static void on_output(struct loop_source *src, int fd, uint32_t events, void *data)
{
        struct exec_session *s = data;
        int stream = fd == s->out_fd ? 1 : 2;
        if (!drain(s, stream)) {
                if (stream == 1)
                        close_src(&s->out_src, &s->out_fd);
                else
                        close_src(&s->err_src, &s->err_fd);
        }
}

static void on_stdin(struct loop_source *src, int fd, uint32_t events, void *data)
{
        struct exec_session *s = data;
        for (;;) {
                if (s->stdin_off == s->stdin_len && s->stdin_src >= 0) {
                        /* A local file: reading it does not block the loop for long. */
                        ssize_t n = read(s->stdin_src, s->stdin_buf, STDIN_CHUNK);
                        if (n <= 0) {
                                close(s->stdin_src);
                                s->stdin_src = -EBADF;
                                break;
                        }
                        s->stdin_len = (size_t)n;
                        s->stdin_off = 0;
                }
                if (s->stdin_off == s->stdin_len)
                        break;
                ssize_t n = write(s->in_fd, s->stdin_buf + s->stdin_off, s->stdin_len - s->stdin_off);
                if (n < 0) {
                        if (errno == EAGAIN || errno == EINTR)
                                return;
                        break; /* EPIPE: the command does not read its input */
                }
                s->stdin_off += (size_t)n;
        }
        close_src(&s->in_src, &s->in_fd); /* EOF for the command */
}

static const struct supervise_ops command_ops = {.exit = on_command_exit};

/* ---- terminal sessions --------------------------------------------------------------------- */

static void on_pty(struct loop_source *src, int fd, uint32_t events, void *data);

static void pty_flush_input(struct exec_session *s)
{
        while (s->pty_fd >= 0 && s->input_off < s->input_len) {
                ssize_t n = write(s->pty_fd, s->input + s->input_off, s->input_len - s->input_off);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno != EAGAIN) /* EIO: nobody holds the terminal any more */
                                s->input_off = s->input_len;
                        break;
                }
                s->input_off += (size_t)n;
        }
        bool pending = s->input_off < s->input_len;
        if (!pending) {
                s->input_len = s->input_off = 0;
                if (s->cb && s->cb->input_drained)
                        s->cb->input_drained(s->data);
        }
        if (s->pty_src)
                loop_set_events(s->pty_src,
                                (s->out_paused ? 0 : EPOLLIN) | (pending ? EPOLLOUT : 0));
}

static void on_pty(struct loop_source *src, int fd, uint32_t events, void *data)
{
        struct exec_session *s = data;
        if (events & EPOLLOUT)
                pty_flush_input(s);
        if (s->out_paused || !(events & (EPOLLIN | EPOLLHUP | EPOLLERR)))
                return;
        if (!drain(s, 3)) {
                /* Every holder of the slave is gone; the exit code comes from the pidfd. */
                close_src(&s->pty_src, &s->pty_fd);
        }
}

static void on_pty_handover(struct loop_source *src, int fd, uint32_t events, void *data)
{
        struct exec_session *s = data;
        int master = -EBADF;
        int r = fd_recv(s->pty_sock, &master);
        if (r == -EAGAIN)
                return;
        close_src(&s->pty_sock_src, &s->pty_sock);
        if (r < 0)
                return; /* the command failed before (its stderr says why) */
        if (s->hungup) {
                close(master); /* hangs the fresh session up */
                return;
        }
        s->pty_fd = master;
        if (s->cols)
                pty_set_size(s->pty_fd, s->cols, s->rows);
        r = loop_add_fd(engine_loop(s->eng), s->pty_fd, s->out_paused ? 0 : EPOLLIN, on_pty, s,
                        &s->pty_src);
        if (r < 0) {
                log_warn("%s: watching a terminal: %s", s->env, strerror(-r));
                close(TAKE_FD(s->pty_fd));
                if (s->launch)
                        s->pending_signal = SIGKILL;
                else
                        supervise_kill(s->sv);
                return;
        }
        pty_flush_input(s);
}

long exec_tty_input(struct exec_session *s, const void *buf, size_t len)
{
        if (!s->tty)
                return -EINVAL;
        if (len == 0)
                return (long)(s->input_len - s->input_off);
        if (s->input_off && s->input_off == s->input_len)
                s->input_len = s->input_off = 0;
        unsigned char *n = realloc(s->input, s->input_len + len);
        if (!n)
                return -ENOMEM;
        s->input = n;
        memcpy(s->input + s->input_len, buf, len);
        s->input_len += len;
        pty_flush_input(s);
        return (long)(s->input_len - s->input_off);
}

int exec_tty_resize(struct exec_session *s, unsigned cols, unsigned rows)
{
        if (!s->tty)
                return -EINVAL;
        s->cols = cols;
        s->rows = rows;
        return s->pty_fd >= 0 ? pty_set_size(s->pty_fd, cols, rows) : 0;
}

void exec_tty_pause_output(struct exec_session *s, bool pause)
{
        if (s->out_paused == pause)
                return;
        s->out_paused = pause;
        if (s->pty_src)
                loop_set_events(s->pty_src, (pause ? 0 : EPOLLIN) |
                                                    (s->input_off < s->input_len ? EPOLLOUT : 0));
}

static bool launching_in(const char *env, const char *sub);

/* The end of an exec's group, on a timer, independent of the session (which may be gone by
 * then): after a hung-up session's grace, whatever of it still runs (a command ignoring SIGHUP,
 * or what it left behind) is killed with its cgroup; a killed group is removed once its
 * processes have exited (group_end_later). */
struct group_end {
        struct engine *eng;
        char env[NAME_BUF_SIZE], cg[80], sub[32];
        bool kill;      /* a hung-up session's grace: kill first */
        unsigned tries; /* removals retried while its killed processes exit */
        struct group_end *next;
};
static struct group_end *group_ends; /* pending, so none is lost at shutdown */

#define GROUP_RETRY_MS 100
#define GROUP_RETRIES 100 /* 10 s: a starved environment's processes exit slowly */

static void on_group_end(struct loop_timer *t, void *data)
{
        struct group_end *k = data;
        for (struct group_end **p = &group_ends; *p; p = &(*p)->next)
                if (*p == k) {
                        *p = k->next;
                        break;
                }
        struct cgroup_manager *m = engine_cgroups(k->eng);
        if (engine_find(k->eng, k->env) && !launching_in(k->env, k->sub)) {
                if (k->kill) {
                        k->kill = false;
                        int r = cgroup_env_kill_nowait(m, k->cg, k->sub);
                        if (r < 0 && r != -ENOENT)
                                log_warn("%s: killing a hung-up session: %s", k->env,
                                         strerror(-r));
                }
                /* Killed without waiting: removed once its processes have exited. */
                if (cgroup_env_prune(m, k->cg, k->sub) == -EBUSY && k->tries++ < GROUP_RETRIES &&
                    loop_add_timer(engine_loop(k->eng), GROUP_RETRY_MS, on_group_end, k)) {
                        k->next = group_ends;
                        group_ends = k;
                        return;
                }
        }
        free(k);
}

/* Ends env's group cg/sub in delay_ms: killed first if kill, then removed once what is in it has
 * exited (a kill does not wait for that). False if it could not be scheduled. */
static bool group_end_later(struct engine *e, const char *env, const char *cg, const char *sub,
                            unsigned delay_ms, bool kill)
{
        struct group_end *k = calloc(1, sizeof(*k));
        if (!k || !loop_add_timer(engine_loop(e), delay_ms, on_group_end, k)) {
                free(k);
                return false;
        }
        *k = (struct group_end){.eng = e, .kill = kill, .next = group_ends};
        snprintf(k->env, sizeof(k->env), "%s", env);
        snprintf(k->cg, sizeof(k->cg), "%s", cg);
        snprintf(k->sub, sizeof(k->sub), "%s", sub);
        group_ends = k;
        return true;
}

void exec_hangup(struct exec_session *s)
{
        if (!s)
                return;
        s->cb = NULL;
        if (s->hungup)
                return;
        s->hungup = true;
        free(s->input);
        s->input = NULL;
        s->input_len = s->input_off = 0;
        if (s->pty_fd >= 0)
                close_src(&s->pty_src, &s->pty_fd); /* the kernel sends SIGHUP */
        else if (s->launch)
                s->pending_signal = SIGKILL; /* when it has launched */
        else if (s->pty_sock < 0)
                supervise_kill(s->sv); /* never got a terminal */
        if (!group_end_later(s->eng, s->env, s->cg, s->sub, EXEC_HANGUP_GRACE_MS, true) &&
            !s->launch)
                cgroup_env_kill_nowait(engine_cgroups(s->eng), s->cg, s->sub);
}

static void launches_answered(struct env *v);
static void reap_strays(struct env *v);

/* Environments one of whose launches ended without the slot's answer (the slot died or went
 * with its environment): a command it cloned just before may be a child nobody knows
 * (reap_strays). Few and short-lived: forgotten when the environment's slots go. */
#define CUT_MAX 16
static char cut_envs[CUT_MAX][NAME_BUF_SIZE];

static char *cut_find(const char *env)
{
        for (size_t i = 0; i < CUT_MAX; i++)
                if (cut_envs[i][0] && !strcmp(cut_envs[i], env))
                        return cut_envs[i];
        return NULL;
}

static void cut_note(const char *env)
{
        if (cut_find(env))
                return;
        static size_t next;
        snprintf(cut_envs[next], NAME_BUF_SIZE, "%s", env); /* the oldest goes if all are used */
        next = (next + 1) % CUT_MAX;
}

void exec_reap_env(struct env *v, unsigned wait_ms)
{
        launches_answered(v); /* a command named already is watched, then reaped below */
        uint64_t deadline = now_ms() + wait_ms;
        for (struct exec_session *s = sessions; s; s = s->next) {
                if (strcmp(s->env, env_name(v)) != 0 || !s->sv)
                        continue;
                uint64_t now = now_ms();
                supervise_reap_now(s->sv, now < deadline ? (unsigned)(deadline - now) : 0);
        }
        reap_strays(v);
}

int exec_signal(struct exec_session *s, int sig)
{
        /* A terminal session: to the terminal's foreground process group, as a key would. */
        if (s->tty && s->pty_fd >= 0)
                return ioctl(s->pty_fd, TIOCSIG, sig) < 0 ? -errno : 0;
        if (s->launch) {
                if (s->pending_signal != SIGKILL) {
                        s->pending_signal = sig;
                        s->pending_group = false;
                }
                return 0;
        }
        return s->sv ? supervise_signal(s->sv, sig) : -ESRCH;
}

void exec_detach(struct exec_session *s)
{
        if (s)
                s->cb = NULL;
}

int exec_signal_group(struct exec_session *s, int sig)
{
        if (s->launch) { /* for the group once it runs (the slot's group is killed then) */
                if (s->pending_signal != SIGKILL) {
                        s->pending_signal = sig;
                        s->pending_group = true;
                }
                return 0;
        }
        if (!s->sv || supervise_exited(s->sv))
                return -ESRCH;
        if (sig == SIGKILL) {
                int r = cgroup_env_kill_nowait(engine_cgroups(s->eng), s->cg, s->sub);
                s->group_killed = true;
                supervise_kill(s->sv);
                return r == -ENOENT ? 0 : r;
        }
        /* setsid() in the command made its pid the group's id (join.c). */
        if (kill(-s->pid, sig) < 0)
                return supervise_signal(s->sv, sig);
        return 0;
}

void exec_pause_output(struct exec_session *s, bool pause)
{
        if (s->tty) {
                exec_tty_pause_output(s, pause);
                return;
        }
        if (s->out_paused == pause)
                return;
        s->out_paused = pause;
        if (s->out_src)
                loop_set_events(s->out_src, pause ? 0 : EPOLLIN);
        if (s->err_src)
                loop_set_events(s->err_src, pause ? 0 : EPOLLIN);
}

static void on_stdin_keep(struct loop_source *src, int fd, uint32_t events, void *data);

/* Write what is queued; then close for a pending exec_stdin_close. */
static void stdin_keep_flush(struct exec_session *s)
{
        while (s->in_fd >= 0 && s->input_off < s->input_len) {
                ssize_t n = write(s->in_fd, s->input + s->input_off, s->input_len - s->input_off);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno != EAGAIN) /* EPIPE: nobody reads it any more */
                                s->input_off = s->input_len;
                        break;
                }
                s->input_off += (size_t)n;
        }
        bool pending = s->input_off < s->input_len;
        if (!pending)
                s->input_len = s->input_off = 0;
        if (!pending && s->stdin_closing) {
                close_src(&s->in_src, &s->in_fd);
                return;
        }
        if (s->in_fd < 0)
                return;
        if (!s->in_src && pending)
                loop_add_fd(engine_loop(s->eng), s->in_fd, EPOLLOUT, on_stdin_keep, s, &s->in_src);
        else if (s->in_src)
                loop_set_events(s->in_src, pending ? EPOLLOUT : 0);
}

static void on_stdin_keep(struct loop_source *src, int fd, uint32_t events, void *data)
{
        stdin_keep_flush(data);
}

int exec_stdin_write(struct exec_session *s, const void *buf, size_t len)
{
        if (s->tty || !s->stdin_keep)
                return -EINVAL;
        if (s->in_fd < 0 || s->stdin_closing)
                return -EPIPE;
        if (s->input_len - s->input_off + len > EXEC_STDIN_QUEUE_MAX)
                return -ENOBUFS;
        if (len == 0)
                return 0;
        unsigned char *n = realloc(s->input, s->input_len + len);
        if (!n)
                return -ENOMEM;
        s->input = n;
        memcpy(s->input + s->input_len, buf, len);
        s->input_len += len;
        stdin_keep_flush(s);
        return 0;
}

int exec_stdin_close(struct exec_session *s)
{
        if (s->tty || !s->stdin_keep)
                return -EINVAL;
        if (s->in_fd < 0 || s->stdin_closing)
                return -EPIPE;
        s->stdin_closing = true;
        stdin_keep_flush(s);
        return 0;
}

static void launch_slot_gone(struct exec_slot *sl);

static void slot_unlink(struct exec_slot *sl)
{
        launch_slot_gone(sl); /* before its socket closes */
        for (struct exec_slot **p = &slots; *p; p = &(*p)->next)
                if (*p == sl) {
                        *p = sl->next;
                        break;
                }
        if (env_exec_slot(sl->env) == sl)
                env_set_exec_slot(sl->env, sl->env_next);
        else
                for (struct exec_slot *o = env_exec_slot(sl->env); o; o = o->env_next)
                        if (o->env_next == sl) {
                                o->env_next = sl->env_next;
                                break;
                        }
}

/* Kill the slot and wait for it; remove its group too unless a command of it may still run
 * there. */
static void slot_free(struct exec_slot *sl)
{
        slot_unlink(sl);
        join_slot_discard(&sl->js);
        if (!sl->busy) {
                int r = cgroup_env_destroy(engine_cgroups(sl->eng), env_cgroup(sl->env), sl->sub);
                if (r < 0 && r != -ENOENT)
                        log_debug("%s: removing the exec slot's group %s: %s", env_name(sl->env),
                                  sl->sub, strerror(-r));
        }
        free(sl);
}

/* A free slot let go without waiting for its end (the teardown of a copy of the daemon's
 * address space, a millisecond or more, and a sweep may let go of many at once): its pidfd says
 * when it is gone, and then it is reaped and its group removed. */
struct slot_corpse {
        struct engine *eng;
        int pidfd;
        struct loop_source *src;
        char cg[80];
        char sub[32];
        bool prune_only; /* its group may hold a command that goes on: removed only if empty */
        struct slot_corpse *next;
};

static struct slot_corpse *corpses;

static void corpse_bury(struct slot_corpse *c)
{
        siginfo_t si;
        while (waitid(P_PIDFD, (id_t)c->pidfd, &si, WEXITED) < 0 && errno == EINTR)
                ;
        loop_remove(c->src);
        close(c->pidfd);
        int r = c->prune_only ? cgroup_env_prune(engine_cgroups(c->eng), c->cg, c->sub)
                              : cgroup_env_destroy(engine_cgroups(c->eng), c->cg, c->sub);
        if (r < 0 && r != -ENOENT && r != -EBUSY)
                log_debug("%s: removing the exec slot's group: %s", c->sub, strerror(-r));
        for (struct slot_corpse **p = &corpses; *p; p = &(*p)->next)
                if (*p == c) {
                        *p = c->next;
                        break;
                }
        free(c);
}

static void on_corpse(struct loop_source *src, int fd, uint32_t events, void *data)
{
        (void)src;
        (void)fd;
        (void)events;
        corpse_bury(data);
}

/* Reaps pid (a child of the daemon, killed or ending) once its pidfd says it is gone, and then
 * removes the group cg/sub; false if it cannot be watched (nothing was done). */
static bool corpse_watch(struct engine *e, pid_t pid, const char *cg, const char *sub,
                         bool prune_only)
{
        struct slot_corpse *c = calloc(1, sizeof(*c));
        int pidfd = c && pid > 0 ? sys_pidfd_open(pid, 0) : -EBADF;
        if (pidfd < 0 || loop_add_fd(engine_loop(e), pidfd, EPOLLIN, on_corpse, c, &c->src) < 0) {
                if (pidfd >= 0)
                        close(pidfd);
                free(c);
                return false;
        }
        c->eng = e;
        c->pidfd = pidfd;
        c->prune_only = prune_only;
        snprintf(c->cg, sizeof(c->cg), "%s", cg);
        snprintf(c->sub, sizeof(c->sub), "%s", sub);
        c->next = corpses;
        corpses = c;
        return true;
}

static void slot_let_go(struct exec_slot *sl)
{
        /* A busy slot's group holds its command, or what it left behind: that stays. */
        if (!corpse_watch(sl->eng, sl->js.pid, env_cgroup(sl->env), sl->sub, sl->busy)) {
                slot_free(sl);
                return;
        }
        slot_unlink(sl);
        join_slot_release(&sl->js);
        free(sl);
}

static void on_sweep(struct loop_timer *t, void *data)
{
        (void)t;
        struct engine *e = data;
        sweep_timer = NULL;
        uint64_t now = now_ms();
        /* A few at a time: each one's end is reaped and its group removed in a later turn,
         * and a burst of creates makes a burst of slots expire together. */
        unsigned let_go = 0;
        for (struct exec_slot *sl = slots, *next; sl && let_go < SLOT_SWEEP_BATCH; sl = next) {
                next = sl->next;
                if (!sl->busy && now - sl->born >= (sl->used ? SLOT_IDLE_MS : SLOT_UNUSED_MS)) {
                        slot_let_go(sl);
                        let_go++;
                }
        }
        if (slots)
                sweep_timer = loop_add_timer(engine_loop(e),
                                             let_go == SLOT_SWEEP_BATCH ? 50 : SLOT_SWEEP_MS,
                                             on_sweep, e);
}

/* The confinement of the environment's PID 1, which every exec gets too. */
static enum confine_profile exec_profile(struct env *v)
{
        return env_kind(v) == KIND_SANDBOX ? PROFILE_SANDBOX : PROFILE_COMPUTER;
}

static void slot_add(struct exec_slot *sl, bool wait);

/* A slot for v in its per-exec group sub (existing; empty, or busy with the command of the
 * exec that made it). pidfd: PID 1's; wait: until exec_slot_go (PID 1 still sets up). NULL
 * with *ret_err when it cannot be made. */
static struct exec_slot *slot_prepare(struct engine *e, struct env *v, const char *sub,
                                      int pidfd, bool wait, int *ret_err)
{
        struct exec_slot *sl = calloc(1, sizeof(*sl));
        *ret_err = -ENOMEM;
        if (!sl)
                return NULL;
        *sl = (struct exec_slot){.eng = e, .env = v, .js = {.sock = -EBADF}};
        snprintf(sl->sub, sizeof(sl->sub), "%s", sub);
        struct join_config jc = {.env_pidfd = pidfd, .profile = exec_profile(v),
                                 .cgroups = engine_cgroups(e), .cgroup_name = env_cgroup(v),
                                 .cgroup_sub = sl->sub};
        /* From the spawn process if there is one: a fork of the daemon would leave every page
         * it writes next to fault (copy-on-write). */
        int r;
        /* PADDOCK_TEST_NO_SLOT: none can be made (as when the daemon is out of fds), so that a
         * test sees what an exec then answers. */
        if (getenv("PADDOCK_TEST_NO_SLOT"))
                r = -EMFILE;
        else if ((r = spawner_slot(engine_spawner(e), &jc, wait, &sl->js)) == -ESRCH ||
                 r == -E2BIG || r == -EAGAIN)
                r = join_slot_start(&jc, wait, &sl->js);
        if (r < 0) {
                log_debug("%s: exec slot: %s", env_name(v), strerror(-r));
                free(sl);
                *ret_err = r;
                return NULL;
        }
        slot_add(sl, wait);
        *ret_err = 0;
        return sl;
}

/* Lists a slot just made (sl->js) as v's and arms the sweep. */
static void slot_add(struct exec_slot *sl, bool wait)
{
        struct engine *e = sl->eng;
        struct env *v = sl->env;
        sl->born = now_ms();
        sl->waiting = wait;
        if (!sweep_timer)
                sweep_timer = loop_add_timer(engine_loop(e), SLOT_SWEEP_MS, on_sweep, e);
        sl->next = slots;
        slots = sl;
        sl->env_next = env_exec_slot(v);
        env_set_exec_slot(v, sl);
}

/* A new or restarted environment gets its slot at once, but after its answer has gone out: an
 * agent's first command follows its create, and the slot's set-up (a clone, namespaces, the
 * filter) then runs during that round trip instead of inside the first exec. */
struct prewarm {
        struct engine *eng;
        char env[NAME_BUF_SIZE];
        bool queued; /* behind the answer's flush */
};

static void on_prewarm(struct loop_timer *t, void *data)
{
        (void)t;
        struct prewarm *p = data;
        /* Timers due together fire in the order they were added, and the answer's flush (a
         * resumed request) is added after this one: go to the back of the queue once. */
        if (!p->queued) {
                p->queued = true;
                if (loop_add_timer(engine_loop(p->eng), 0, on_prewarm, p))
                        return;
        }
        /* Not while other creates are under way: a batch of environments made at once is not
         * one agent about to run its first command, and its slots would slow the batch. */
        struct env *v = engine_next_creating(p->eng, NULL) ? NULL : engine_find(p->eng, p->env);
        if (v && env_running(v) && !env_paused(v) && !env_deleting(v) && !env_exec_slot(v)) {
                char sub[32];
                snprintf(sub, sizeof(sub), "exec-%u", env_next_exec_id(v));
                slot_prepare(p->eng, v, sub, env_pidfd(v), false, &(int){0});
        }
        free(p);
}

/* Whether a create other than v's is under way (v's own may be listed while it spawns). */
static bool others_creating(struct engine *e, const struct env *v)
{
        for (struct env *o = engine_next_creating(e, NULL); o; o = engine_next_creating(e, o))
                if (o != v)
                        return true;
        return false;
}

bool exec_slot_early_wanted(struct engine *e, struct env *v, char sub[32])
{
        if (others_creating(e, v) || env_exec_slot(v))
                return false; /* a batch (see on_prewarm) */
        snprintf(sub, 32, "exec-%u", env_next_exec_id(v));
        return true;
}

void exec_slot_early(struct engine *e, struct env *v, int pidfd)
{
        char sub[32];
        if (exec_slot_early_wanted(e, v, sub))
                slot_prepare(e, v, sub, pidfd, true, &(int){0});
}

void exec_slot_adopt(struct engine *e, struct env *v, const char *sub, struct join_slot *js)
{
        if (js->pid <= 0)
                return;
        struct exec_slot *sl = calloc(1, sizeof(*sl));
        if (!sl) {
                join_slot_discard(js);
                return;
        }
        *sl = (struct exec_slot){.eng = e, .env = v, .js = *js};
        snprintf(sl->sub, sizeof(sl->sub), "%s", sub);
        *js = (struct join_slot){.sock = -EBADF};
        slot_add(sl, true);
}

void exec_slot_go(struct env *v)
{
        for (struct exec_slot *sl = env_exec_slot(v), *next; sl; sl = next) {
                next = sl->env_next;
                if (!sl->waiting)
                        continue;
                sl->waiting = false;
                int r = join_slot_go(&sl->js);
                if (r < 0) {
                        log_debug("%s: exec slot: %s", env_name(v), strerror(-r));
                        slot_free(sl);
                }
        }
}

void exec_slot_prewarm(struct engine *e, struct env *v)
{
        struct prewarm *p = calloc(1, sizeof(*p));
        if (!p)
                return; /* the first exec makes the slot */
        *p = (struct prewarm){.eng = e};
        snprintf(p->env, sizeof(p->env), "%s", env_name(v));
        if (!loop_add_timer(engine_loop(e), 0, on_prewarm, p))
                free(p);
}

/* After an exec has answered: the slot that ran it is free again when its group holds
 * nothing but the slot (no rmdir now and no mkdir for the next exec; on cgroup v1 each waits
 * for RCU grace periods, and the rmdir used to hold up the answer by 7-20 ms); any other exec
 * group is removed (what is left in it stays until it exits: prune). From a timer, so that the
 * answer is sent first; the exec_exited event (which reads the environment's cgroup
 * statistics for OOM kills) waits for it too. */
struct after_exec {
        struct engine *eng;
        char env[NAME_BUF_SIZE];
        char cg[80];
        char sub[32];
        bool exited;
        bool killed; /* its group was killed: its slot is dying too */
        int exit_code;
        uint64_t duration_ms;
};

static void on_after_exec(struct loop_timer *t, void *data)
{
        (void)t;
        struct after_exec *a = data;
        if (a->exited)
                events_exec_exited(a->eng, a->env, a->sub, a->exit_code, a->duration_ms);
        struct cgroup_manager *m = engine_cgroups(a->eng);
        struct env *v = engine_find(a->eng, a->env);
        if (v)
                env_counters_forget(v);
        struct exec_slot *sl = v ? env_exec_slot(v) : NULL;
        while (sl && strcmp(sl->sub, a->sub))
                sl = sl->env_next;
        if (sl && sl->busy) {
                /* The slot ran this command: free again if nothing else is left in its group
                 * (not after a kill of the group, which takes the slot along). */
                if (env_running(v) && !env_paused(v) && !a->killed &&
                    !strcmp(env_cgroup(v), a->cg) &&
                    cgroup_env_holds_only(m, a->cg, a->sub, sl->js.pid) == 1) {
                        sl->busy = false;
                        sl->born = now_ms();
                        /* One free slot per environment is enough: the others would hold
                         * processes of its pids limit for nothing. */
                        for (struct exec_slot *o = env_exec_slot(v); o; o = o->env_next)
                                if (o != sl && !o->busy) {
                                        slot_let_go(sl);
                                        break;
                                }
                        free(a);
                        return;
                }
                slot_let_go(sl); /* busy: the group stays for what is left in it */
        }
        /* The group of a slot let go (a one-use slot, or one whose command left something
         * behind) goes; a killed one once its processes have exited. */
        int r = cgroup_env_prune(m, a->cg, a->sub);
        if (r == -EBUSY && a->killed && v)
                group_end_later(a->eng, a->env, a->cg, a->sub, GROUP_RETRY_MS, false);
        else if (r < 0 && r != -ENOENT)
                log_debug("%s: removing cgroup %s: %s", a->env, a->sub, strerror(-r));
        free(a);
}

static void after_exec(struct exec_session *s, bool exited)
{
        s->via_slot = false;
        struct after_exec *a = calloc(1, sizeof(*a));
        if (a) {
                *a = (struct after_exec){.eng = s->eng, .exited = exited,
                                         /* a hung-up session's group is killed
                                          * after its grace */
                                         .killed = s->group_killed || s->res.timed_out ||
                                                   s->hungup,
                                         .exit_code = s->res.exit_code,
                                         .duration_ms = s->res.duration_ms};
                snprintf(a->env, sizeof(a->env), "%s", s->env);
                snprintf(a->cg, sizeof(a->cg), "%s", s->cg);
                snprintf(a->sub, sizeof(a->sub), "%s", s->sub);
                if (loop_add_timer(engine_loop(s->eng), 0, on_after_exec, a))
                        return;
                free(a);
        }
        if (exited)
                events_exec_exited(s->eng, s->env, s->sub, s->res.exit_code, s->res.duration_ms);
        (void)cgroup_env_prune(engine_cgroups(s->eng), s->cg, s->sub);
}

void exec_slot_kill(struct env *v)
{
        for (struct exec_slot *sl = env_exec_slot(v); sl; sl = sl->env_next)
                if (sl->js.pid > 0)
                        kill(sl->js.pid, SIGKILL);
}

pid_t exec_slot_alive(struct env *v)
{
        for (struct exec_slot *sl = env_exec_slot(v); sl; sl = sl->env_next)
                if (child_state(sl->js.pid) == CHILD_RUNNING)
                        return sl->js.pid;
        return 0;
}

void exec_slot_discard(struct env *v)
{
        while (env_exec_slot(v))
                slot_free(env_exec_slot(v));
        char *cut = cut_find(env_name(v));
        if (cut) /* it has stopped: what it left was reaped (exec_reap_env) */
                cut[0] = 0;
}

void exec_slots_shutdown(void)
{
        while (slots)
                slot_free(slots);
        while (corpses)
                corpse_bury(corpses);
        loop_cancel_timer(sweep_timer);
        sweep_timer = NULL;
}

/* ---- launching through a slot -------------------------------------------------------------- */

/* A command handed to a slot whose answer (the command's pid) has not come. The loop watches
 * the slot's socket rather than waiting for it: the slot runs in the environment's cgroup,
 * which the environment's own processes can starve of CPU (a CPU limit of 1% with every thread
 * busy) or which can be frozen, and a wait there held every other client for seconds. A
 * launch outlives its session if that goes first: the command it reports is then killed and
 * reaped. */
struct launch {
        struct engine *eng;
        struct exec_session *s; /* NULL once the session is gone */
        struct exec_slot *slot;
        struct loop_source *src;
        struct loop_timer *timer; /* JOIN_SLOT_ANSWER_MS */
        bool big;                 /* its command went in a memfd (JOIN_SLOT_SENT_BIG) */
        struct launch *next;
};
static struct launch *launches;

/* A command too big for one slot message (over ~96 KiB) is the daemon's memory (a memfd) until
 * its slot has taken it, and an environment can hold that back (starved of CPU, frozen): a few
 * per environment at a time. */
#define BIG_LAUNCHES_PER_ENV 2

static unsigned big_launches(const struct env *v)
{
        unsigned n = 0;
        for (struct launch *l = launches; l; l = l->next)
                n += l->big && l->slot->env == v;
        return n;
}

/* The command runs (pid, our child): watched from now on. 0, or -errno with err (the command
 * killed and reaped). */
static int session_launched(struct exec_session *s, pid_t pid, char *err, size_t errlen)
{
        s->pid = pid;
        int pidfd = sys_pidfd_open(pid, 0);
        if (pidfd < 0) {
                /* Cannot happen for our own unreaped child; keep the invariant anyway. */
                kill(pid, SIGKILL);
                waitpid(pid, NULL, 0);
                s->pid = 0;
                snprintf(err, errlen, "pidfd: %s", strerror(-pidfd));
                return pidfd;
        }
        char label[NAME_BUF_SIZE + 40];
        snprintf(label, sizeof(label), "%s: %s", s->env, s->sub); /* only for logs */
        struct supervise_spec spec = {.loop = engine_loop(s->eng),
                                      .label = label,
                                      .cgroups = engine_cgroups(s->eng),
                                      .cgroup_name = s->cg,
                                      .cgroup_sub = s->sub,
                                      .keep_cgroup = true, /* after_exec */
                                      .timeout_ms = s->timeout_ms,
                                      .ops = &command_ops,
                                      .data = s};
        int r = supervise_start(&spec, &(struct supervise_child){pidfd, -EBADF, -EBADF}, &s->sv);
        if (r < 0) {
                s->pid = 0;
                snprintf(err, errlen, "watching the exec: %s", strerror(-r));
        }
        return r;
}

/* The caller learns how its command's launch ended (exec_callbacks.launched), once. */
static void tell_launched(struct exec_session *s)
{
        if (!s->tell_launch)
                return;
        s->tell_launch = false;
        if (s->cb && s->cb->launched)
                s->cb->launched(s->data, s->pid);
}

/* A session whose command never ran ends as one that could not start: the reason on stderr,
 * exit code 126, from a turn of its own (the caller may hold it). */
static void on_launch_failed(struct loop_timer *t, void *data)
{
        (void)t;
        struct exec_session *s = data;
        s->fail_timer = NULL; /* fired */
        tell_launched(s);
        deliver(s, 2, s->fail_msg, strlen(s->fail_msg));
        s->res.exit_code = 126;
        s->res.duration_ms = now_ms() - s->started;
        audit_exec_end(TAKE_PTR(s->audit), &s->res);
        events_exec_exited(s->eng, s->env, s->sub, s->res.exit_code, s->res.duration_ms);
        if (s->cb && s->cb->done)
                s->cb->done(s->data, &s->res);
        session_free(s);
}

static void launch_fail(struct exec_session *s, const char *why)
{
        snprintf(s->fail_msg, sizeof(s->fail_msg), "paddock: the command could not start: %s\n",
                 why);
        s->fail_timer = loop_add_timer(engine_loop(s->eng), 0, on_launch_failed, s);
        if (!s->fail_timer)
                log_error("%s: %s: an exec that could not start stays unanswered", s->env,
                          s->sub);
}

static void launch_free(struct launch *l)
{
        for (struct launch **p = &launches; *p; p = &(*p)->next)
                if (*p == l) {
                        *p = l->next;
                        break;
                }
        loop_remove(l->src);
        loop_cancel_timer(l->timer);
        if (l->s)
                l->s->launch = NULL;
        free(l);
}

/* A command its slot named that nobody waits for any more: killed, and reaped once it is gone
 * (a corpse watch, which also prunes its group), or here if it cannot be watched. */
static void kill_orphan(struct exec_slot *slot, pid_t pid)
{
        kill(pid, SIGKILL);
        if (!corpse_watch(slot->eng, pid, env_cgroup(slot->env), slot->sub, true))
                while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
                        ;
}

/* The slot answered (r 0 with pid, or -ESTALE with why): the session goes on, or fails; a
 * command nobody waits for any more is killed and reaped. The slot is the command's (busy)
 * or, when it failed or nobody waits, let go. */
static void launch_end(struct launch *l, int r, pid_t pid, const char *why)
{
        struct exec_session *s = l->s;
        struct exec_slot *slot = l->slot;
        launch_free(l);
        char err[256];
        if (r == 0 && s && session_launched(s, pid, err, sizeof(err)) == 0) {
                if (slot && slot->once)
                        slot_let_go(slot); /* its command goes on in its group */
                else
                        s->via_slot = slot != NULL; /* after_exec frees the slot or keeps it */
                int sig = s->pending_signal;
                s->pending_signal = 0;
                if (sig && (s->pending_group || sig == SIGKILL))
                        exec_signal_group(s, sig);
                else if (sig)
                        exec_signal(s, sig);
                tell_launched(s);
                return;
        }
        if (r == 0 && !s)
                kill_orphan(slot, pid);
        if (r < 0 && slot)
                cut_note(env_name(slot->env));
        if (s)
                launch_fail(s, r == 0 ? err : why);
        if (slot)
                slot_let_go(slot); /* its group goes once it is gone */
}

static void on_launch_answer(struct loop_source *src, int fd, uint32_t events, void *data)
{
        (void)src;
        (void)fd;
        (void)events;
        struct launch *l = data;
        pid_t pid = 0;
        char why[256] = "";
        int r = join_slot_report(&l->slot->js, 0, &pid, why, sizeof(why));
        launch_end(l, r, pid, why);
}

static void on_launch_timeout(struct loop_timer *t, void *data)
{
        (void)t;
        struct launch *l = data;
        l->timer = NULL; /* fired */
        struct exec_session *s = l->s;
        log_warn("%s: an exec slot did not answer in %d s: the exec fails", s ? s->env : "?",
                 JOIN_SLOT_ANSWER_MS / 1000);
        /* The launch stays: the command the slot names later is killed and reaped then, and
         * one that ends with its environment goes with the slot (launch_slot_gone). */
        if (s) {
                s->launch = NULL;
                l->s = NULL;
                launch_fail(s, "its environment did not run it in time (all of its CPU in use, "
                               "or frozen)");
        }
}

static int launch_watch(struct exec_session *s, struct exec_slot *slot, bool big)
{
        struct launch *l = calloc(1, sizeof(*l));
        if (!l)
                return -ENOMEM;
        *l = (struct launch){.eng = s->eng, .s = s, .slot = slot, .big = big};
        int r = loop_add_fd(engine_loop(s->eng), slot->js.sock, EPOLLIN, on_launch_answer, l,
                            &l->src);
        l->timer = r < 0 ? NULL
                         : loop_add_timer(engine_loop(s->eng), JOIN_SLOT_ANSWER_MS,
                                          on_launch_timeout, l);
        if (!l->timer) {
                loop_remove(l->src);
                free(l);
                cut_note(env_name(slot->env)); /* a command it cloned meanwhile: reap_strays */
                slot_free(slot);
                return -ENOMEM;
        }
        l->next = launches;
        launches = l;
        s->launch = l;
        return 0;
}

/* The session gives up on its launch (it is freed): the launch goes on without it, and kills
 * and reaps the command when the slot names it. Not the slot's group now: a slot killed
 * between the command's clone and its answer would leave a child nobody knows to reap (the
 * kill would also wait for a starved group to empty). */
static void launch_abandon(struct exec_session *s)
{
        if (!s->launch)
                return;
        s->launch->s = NULL;
        s->launch = NULL;
}

/* The slot goes (its environment stops, or the daemon does): a launch through it ends, with
 * its answer if it is there already. */
static void launch_slot_gone(struct exec_slot *sl)
{
        for (struct launch *l = launches; l; l = l->next)
                if (l->slot == sl) {
                        pid_t pid = 0;
                        char why[256];
                        int r = join_slot_report(&sl->js, 0, &pid, why, sizeof(why));
                        if (r < 0) {
                                snprintf(why, sizeof(why), "its environment stopped");
                                cut_note(env_name(sl->env));
                        }
                        l->slot = NULL; /* being freed by the caller */
                        if (r == 0 && !l->s) {
                                kill_orphan(sl, pid);
                                r = -ESTALE;
                        }
                        launch_end(l, r, pid, why);
                        return;
                }
}

/* Whether a launch through env's slot in group sub waits for its answer (its group must not be
 * killed meanwhile: see launch_abandon). */
static bool launching_in(const char *env, const char *sub)
{
        for (struct launch *l = launches; l; l = l->next)
                if (!strcmp(env_name(l->slot->env), env) && !strcmp(l->slot->sub, sub))
                        return true;
        return false;
}

/* v's launches whose slots have answered, ended now rather than at the loop's next turn. */
static void launches_answered(struct env *v)
{
        for (struct launch *l = launches, *next; l; l = next) {
                next = l->next;
                if (l->slot->env != v)
                        continue;
                struct pollfd p = {.fd = l->slot->js.sock, .events = POLLIN};
                if (poll(&p, 1, 0) <= 0)
                        continue;
                pid_t pid = 0;
                char why[256] = "";
                int r = join_slot_report(&l->slot->js, 0, &pid, why, sizeof(why));
                launch_end(l, r, pid, why); /* frees l, maybe a corpse; not next */
        }
}

/* A command whose slot was killed between its clone and its answer is the daemon's child
 * (CLONE_PARENT) that nobody knows: killed with the environment it stays a zombie, and the
 * environment's PID 1 cannot finish exiting until it is reaped. Such zombies in v's exec
 * groups, that no session watches, are reaped here. */
static void reap_strays(struct env *v)
{
        if (!cut_find(env_name(v)))
                return; /* none of its launches was cut short: nothing to look for */
        char path[64];
        snprintf(path, sizeof(path), "/proc/self/task/%d/children", (int)getpid());
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        _cleanup_free_ char *buf = NULL;
        size_t len = 0, cap = 0;
        for (ssize_t n = 1; fd >= 0 && n > 0;) {
                if (cap - len < 4096) {
                        char *nb = realloc(buf, cap + 65536);
                        if (!nb)
                                return;
                        buf = nb;
                        cap += 65536;
                }
                n = read(fd, buf + len, cap - len - 1);
                len += n > 0 ? (size_t)n : 0;
        }
        if (!buf)
                return;
        buf[len] = 0;
        char want[NAME_BUF_SIZE + 96];
        snprintf(want, sizeof(want), "/%s/exec-", env_cgroup(v));
        char *save = NULL;
        for (char *tok = strtok_r(buf, " \n", &save); tok; tok = strtok_r(NULL, " \n", &save)) {
                pid_t pid = (pid_t)strtol(tok, NULL, 10);
                bool known = pid <= 0;
                for (struct exec_session *s = sessions; s && !known; s = s->next)
                        known = s->pid == pid;
                if (known || child_state(pid) != CHILD_EXITED)
                        continue; /* not a zombie (yet) */
                char cg[512];
                snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
                _cleanup_close_ int cfd = open(path, O_RDONLY | O_CLOEXEC);
                ssize_t k = cfd >= 0 ? read(cfd, cg, sizeof(cg) - 1) : -1;
                if (k <= 0)
                        continue;
                cg[k] = 0;
                if (!strstr(cg, want))
                        continue;
                log_debug("%s: reaping a command nobody knew (pid %d)", env_name(v), (int)pid);
                waitpid(pid, NULL, WNOHANG);
        }
}

int exec_start(struct engine *e, struct env *v, const struct exec_request *rq,
               const struct exec_callbacks *cb, void *data, struct exec_session **ret, char *err,
               size_t errlen)
{
        if (!env_running(v) || env_paused(v) || env_ending(v)) {
                snprintf(err, errlen, "%s is %s", env_name(v),
                         env_paused(v) ? "paused" : env_ending(v) ? "stopping" : "not running");
                return -EBUSY;
        }
        if (active_sessions >= EXEC_MAX_ACTIVE) {
                snprintf(err, errlen, "too many running execs (limit %d)", EXEC_MAX_ACTIVE);
                return -EAGAIN;
        }
        if (suid_dumpable_traceable()) { /* set since paddockd started, which refuses it */
                snprintf(err, errlen, "the host sets fs.suid_dumpable=1, which would let a process "
                                      "in %s trace the command before it is confined: set it "
                                      "to 0 (sysctl -w fs.suid_dumpable=0)", env_name(v));
                return -EAGAIN;
        }
        struct exec_session *s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        active_sessions++;
        *s = (struct exec_session){.eng = e, .in_fd = -EBADF, .out_fd = -EBADF,
                                   .err_fd = -EBADF, .cb = cb, .data = data,
                                   .max_output = rq->max_output, .started = now_ms(),
                                   .stdin_src = -EBADF, .tty = rq->tty, .pty_sock = -EBADF,
                                   .pty_fd = -EBADF};
        snprintf(s->env, sizeof(s->env), "%s", env_name(v));
        snprintf(s->cg, sizeof(s->cg), "%s", env_cgroup(v));
        snprintf(s->sub, sizeof(s->sub), "exec-%u", env_next_exec_id(v));
        if (rq->stdin_from_fd) {
                s->stdin_buf = malloc(STDIN_CHUNK);
                s->stdin_src = fcntl(rq->stdin_fd, F_DUPFD_CLOEXEC, 3);
                if (!s->stdin_buf || s->stdin_src < 0) {
                        session_free(s);
                        return -ENOMEM;
                }
        } else if (rq->stdin_len) {
                s->stdin_buf = malloc(rq->stdin_len);
                if (!s->stdin_buf) {
                        session_free(s);
                        return -ENOMEM;
                }
                memcpy(s->stdin_buf, rq->stdin_data, rq->stdin_len);
                s->stdin_len = rq->stdin_len;
        }
        int sp[2] = {-1, -1};
        if (rq->tty) {
                if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0) {
                        int r = -errno;
                        session_free(s);
                        return r;
                }
                s->pty_sock = sp[0];
        }
        int in[2] = {-1, -1}, out[2] = {-1, -1}, errp[2] = {-1, -1};
        if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0 || pipe2(errp, O_CLOEXEC) < 0) {
                int r = -errno;
                for (int i = 0; i < 2; i++) {
                        if (in[i] >= 0)
                                close(in[i]);
                        if (out[i] >= 0)
                                close(out[i]);
                }
                if (sp[1] >= 0)
                        close(sp[1]);
                session_free(s);
                return r;
        }
        s->in_fd = in[1];
        s->out_fd = out[0];
        s->err_fd = errp[0];
        char **envp = env_build_envp(v, rq->env);
        struct join_config jc = {
                .env_pidfd = env_pidfd(v),
                .profile = exec_profile(v),
                .cgroups = engine_cgroups(e),
                .cgroup_name = s->cg,
                .cgroup_sub = s->sub,
                .argv = rq->argv,
                .envp = envp,
                .cwd = rq->cwd       ? rq->cwd
                       : rq->login ? NULL
                                   : (env_kind(v) == KIND_SANDBOX ? "/workspace" : NULL),
                .user = rq->user,
                .user_fallback_for = rq->user_fallback_for,
                .login_env = rq->login,
                .stdin_fd = in[0],
                .stdout_fd = out[1],
                .stderr_fd = errp[1],
                .pty_sock = sp[1] >= 0 ? sp[1] : -EBADF,
                .cols = rq->cols,
                .rows = rq->rows,
        };
        int r = -ENOMEM;
        struct exec_slot *slot = NULL;
        unsigned n_slots = 0;
        bool big = false;
        for (struct exec_slot *sl = env_exec_slot(v), *next; sl; sl = next) {
                next = sl->env_next;
                if (sl->busy || sl->waiting || slot) {
                        n_slots++;
                        continue;
                }
                /* One that died (killed from outside, say) would fail the command later, once
                 * it was handed over: it goes now. */
                if (child_state(sl->js.pid) != CHILD_RUNNING) {
                        slot_free(sl);
                        continue;
                }
                slot = sl;
                n_slots++;
        }
        if (!envp) {
                snprintf(err, errlen, "out of memory");
                slot = NULL; /* a free one stays free */
        } else if (!slot) {
                /* None free (every slot's command still runs, or none made yet): one more is
                 * made now, in a group of its own, and runs this command as it will the next.
                 * Beyond SLOTS_PER_ENV it runs this one only. */
                char sub[sizeof(s->sub)];
                snprintf(sub, sizeof(sub), "exec-%u", env_next_exec_id(v));
                slot = slot_prepare(e, v, sub, env_pidfd(v), false, &r);
                if (slot)
                        slot->once = n_slots >= SLOTS_PER_ENV;
                else
                        snprintf(err, errlen, "no process could be made in %s for it: %s",
                                 env_name(v), strerror(-r));
        }
        if (slot) {
                char fresh[sizeof(s->sub)];
                snprintf(fresh, sizeof(fresh), "%s", s->sub);
                snprintf(s->sub, sizeof(s->sub), "%s", slot->sub);
                /* Handed over, not waited for: its answer comes to the loop (launch_watch). */
                bool big_ok = big_launches(v) < BIG_LAUNCHES_PER_ENV;
                r = join_slot_send(&slot->js, &jc, big_ok);
                if (r >= 0) {
                        big = r == JOIN_SLOT_SENT_BIG;
                        r = 0;
                        slot->busy = true;
                        slot->used = true;
                } else {
                        snprintf(s->sub, sizeof(s->sub), "%s", fresh);
                        slot = NULL; /* it stays free */
                        if (r == -E2BIG && !big_ok) {
                                r = -EAGAIN;
                                snprintf(err, errlen, "%u commands over 96 KiB are still starting "
                                         "in %s: try again once they run",
                                         BIG_LAUNCHES_PER_ENV, env_name(v));
                        } else if (r == -E2BIG) { /* no execve would take it either */
                                snprintf(err, errlen, "the command's arguments and environment "
                                                      "exceed 8 MiB");
                        } else {
                                snprintf(err, errlen, "exec slot: %s", strerror(-r));
                        }
                }
        }
        for (size_t i = 0; envp && envp[i]; i++)
                free(envp[i]);
        free(envp);
        close(in[0]);
        close(out[1]);
        close(errp[1]);
        if (sp[1] >= 0)
                close(sp[1]);
        if (r < 0) {
                session_free(s);
                return r;
        }
        s->stdin_keep = rq->stdin_keep;
        s->timeout_ms = rq->timeout_ms;
        r = launch_watch(s, slot, big);
        if (r < 0) {
                snprintf(err, errlen, "out of memory");
                session_free(s);
                return r;
        }
        struct loop *l = engine_loop(e);
        fcntl(s->in_fd, F_SETFL, O_NONBLOCK);
        fcntl(s->out_fd, F_SETFL, O_NONBLOCK);
        fcntl(s->err_fd, F_SETFL, O_NONBLOCK);
        r = loop_add_fd(l, s->out_fd, EPOLLIN, on_output, s, &s->out_src);
        if (r >= 0)
                r = loop_add_fd(l, s->err_fd, EPOLLIN, on_output, s, &s->err_src);
        if (r >= 0 && (s->stdin_len || s->stdin_src >= 0))
                r = loop_add_fd(l, s->in_fd, EPOLLOUT, on_stdin, s, &s->in_src);
        else if (r >= 0 && !s->stdin_keep)
                close_src(&s->in_src, &s->in_fd);
        if (r >= 0 && s->tty) {
                fcntl(s->pty_sock, F_SETFL, O_NONBLOCK);
                r = loop_add_fd(l, s->pty_sock, EPOLLIN, on_pty_handover, s, &s->pty_sock_src);
        }
        if (r < 0) {
                snprintf(err, errlen, "watching the exec: %s", strerror(-r));
                session_free(s); /* kills the command */
                return r;
        }
        s->next = sessions;
        sessions = s;
        s->audit = rq->audit;
        s->idle_hold = !cb || !cb->background;
        if (s->idle_hold)
                engine_idle_hold(e, s->env, true);
        events_exec_started(v, s->sub, rq->argv);
        s->tell_launch = true; /* the slot's answer comes later (launch_end) */
        *ret = s;
        return 0;
}

/* envd's process.Process service (docs/e2b.md): commands and terminals started
 * through the daemon's exec sessions (exec.c: the same join, confinement and cgroup as
 * `paddock exec`), kept in a per-environment table so that clients can list them, attach to
 * them again, feed their input and signal them.
 *
 * A process belongs to the table, not to the stream that started it: a client that goes away
 * only loses its subscription (the process keeps running, its output is dropped while nobody
 * listens). Every subscriber (the Start stream and any Connect streams) gets the output
 * produced while it is attached, in order. A subscriber whose queue passes CSTREAM_HIGH_WATER
 * (1 MiB) pauses the reading of the process's pipes or terminal until it falls below
 * CSTREAM_LOW_WATER: the process then blocks on its full pipe, so nothing is lost and the
 * daemon holds at most ~1 MiB + one read (64 KiB per stream) per subscriber. The record goes
 * when the process exits (also when its environment stops or is destroyed: its exec sessions
 * end then). */
#include "daemon/audit.h"
#include "daemon/e2b_connect.h"
#include "daemon/exec.h"
#include "daemon/log.h"
#include "lib/paddock.h"
#include "lib/util.h"

#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#define E2B_PROCS_MAX_PER_ENV 64
#define E2B_MAX_ARGS          4096

struct eproc;

struct sub {
        struct eproc *p;
        struct cstream *cs;
        struct loop_timer *keepalive, *deadline;
        uint64_t keepalive_ms;
        struct sub *next;
};

struct eproc {
        struct engine *eng;
        char env[NAME_BUF_SIZE];
        uint32_t pid; /* inside the environment */
        char *tag;
        json_t *config; /* ProcessConfig as started, for List */
        struct exec_session *s;
        bool pty, paused;
        bool starting; /* its slot has not named the command yet: no pid, no start event */
        struct sub *subs;
        struct eproc *next;
};

static struct eproc *procs;

static unsigned procs_of(const char *env)
{
        unsigned n = 0;
        for (struct eproc *p = procs; p; p = p->next)
                n += !strcmp(p->env, env);
        return n;
}

/* The pid as the environment sees it: the last NSpid field of the host pid. */
static uint32_t inner_pid(pid_t host)
{
        char path[64], line[256];
        snprintf(path, sizeof(path), "/proc/%d/status", (int)host);
        FILE *f = fopen(path, "re");
        uint32_t pid = 0;
        if (!f)
                return 0;
        while (fgets(line, sizeof(line), f)) {
                if (strncmp(line, "NSpid:", 6) != 0)
                        continue;
                char *last = NULL, *save = NULL;
                for (char *t = strtok_r(line + 6, " \t\n", &save); t;
                     t = strtok_r(NULL, " \t\n", &save))
                        last = t;
                if (last)
                        pid = (uint32_t)strtoul(last, NULL, 10);
                break;
        }
        fclose(f);
        return pid;
}

/* ------------------------------------------------------------------------------ subscribers */

static void sub_free(struct sub *s)
{
        struct eproc *p = s->p;
        for (struct sub **q = &p->subs; *q; q = &(*q)->next)
                if (*q == s) {
                        *q = s->next;
                        break;
                }
        loop_cancel_timer(s->keepalive);
        loop_cancel_timer(s->deadline);
        free(s);
}

/* Pause reading while any subscriber is above the high water mark, and until the start event
 * (which must come first) has gone out. */
static void update_pause(struct eproc *p)
{
        bool pause = p->starting;
        for (struct sub *s = p->subs; s; s = s->next)
                pause |= cstream_queued(s->cs) > CSTREAM_HIGH_WATER;
        if (pause != p->paused && p->s) {
                p->paused = pause;
                exec_pause_output(p->s, pause);
        }
}

static void sub_gone(void *data)
{
        struct sub *s = data;
        struct eproc *p = s->p;
        sub_free(s); /* the process runs on */
        update_pause(p);
}

static void sub_drained(void *data)
{
        struct sub *s = data;
        update_pause(s->p);
}

static const struct cstream_ops sub_ops = {.gone = sub_gone, .drained = sub_drained};

static json_t *event(const char *kind, json_t *body)
{
        return json_pack("{s:{s:o}}", "event", kind, body ? body : json_object());
}

static void on_keepalive(struct loop_timer *t, void *data)
{
        struct sub *s = data;
        s->keepalive = loop_add_timer(engine_loop(s->p->eng), s->keepalive_ms, on_keepalive, s);
        cstream_send(s->cs, event("keepalive", NULL));
}

/* A Connect stream's deadline: it ends, the process does not. */
static void on_deadline(struct loop_timer *t, void *data)
{
        struct sub *s = data;
        s->deadline = NULL;
        cstream_end(s->cs, "deadline_exceeded", "the stream's deadline passed");
        sub_free(s);
}

/* The subscriber's stream begins: the start event first (the SDK reads it as the first
 * message), then keepalives. */
static void sub_begin(struct sub *s)
{
        cstream_send(s->cs, event("start", json_pack("{s:I}", "pid", (json_int_t)s->p->pid)));
        if (s->keepalive_ms)
                s->keepalive = loop_add_timer(engine_loop(s->p->eng), s->keepalive_ms,
                                              on_keepalive, s);
}

/* Open r's stream as a subscriber of p; it begins now, or when p has started (on_launched). */
static void subscribe(struct request *r, struct eproc *p, bool with_deadline)
{
        struct sub *s = calloc(1, sizeof(*s));
        if (!s) {
                rpc_stream_error(r, "resource_exhausted", "out of memory");
                return;
        }
        s->p = p;
        s->cs = cstream_open(r, &sub_ops, s);
        if (!s->cs) {
                free(s);
                return;
        }
        s->next = p->subs;
        p->subs = s;
        s->keepalive_ms = rpc_keepalive_ms(r);
        uint64_t timeout = rpc_timeout_ms(r);
        if (with_deadline && timeout)
                s->deadline = loop_add_timer(engine_loop(p->eng), timeout, on_deadline, s);
        if (!p->starting)
                sub_begin(s);
}

/* ------------------------------------------------------------------------------ the process */

static void proc_free(struct eproc *p)
{
        for (struct eproc **q = &procs; *q; q = &(*q)->next)
                if (*q == p) {
                        *q = p->next;
                        break;
                }
        while (p->subs) {
                struct sub *s = p->subs;
                cstream_detach(s->cs);
                sub_free(s);
        }
        json_decref(p->config);
        free(p->tag);
        free(p);
}

static void on_output(void *data, int stream, const char *buf, size_t len)
{
        struct eproc *p = data;
        if (!p->subs || len == 0)
                return;
        const char *key = p->pty ? "pty" : stream == 2 ? "stderr" : "stdout";
        for (struct sub *s = p->subs; s; s = s->next)
                cstream_send(s->cs, event("data", json_pack("{s:o}", key, rpc_b64_json(buf, len))));
        update_pause(p);
}

static const char *signal_word(int sig)
{
        switch (sig) {
        case SIGKILL:
                return "killed";
        case SIGTERM:
                return "terminated";
        case SIGHUP:
                return "hangup";
        case SIGINT:
                return "interrupt";
        case SIGQUIT:
                return "quit";
        case SIGSEGV:
                return "segmentation fault";
        case SIGABRT:
                return "aborted";
        case SIGPIPE:
                return "broken pipe";
        default:
                return NULL;
        }
}

/* EndEvent as Go's os.ProcessState says it (E2B's envd): "exit status 3", "signal: killed". */
static json_t *end_event(const struct exec_result *res)
{
        char status[64];
        json_t *end;
        if (res->signaled) {
                int sig = res->exit_code - 128;
                const char *w = signal_word(sig);
                if (w)
                        snprintf(status, sizeof(status), "signal: %s", w);
                else
                        snprintf(status, sizeof(status), "signal: %d", sig);
                end = json_pack("{s:i,s:b,s:s,s:s}", "exitCode", -1, "exited", false, "status",
                                status, "error", status);
        } else {
                snprintf(status, sizeof(status), "exit status %d", res->exit_code);
                end = json_pack("{s:i,s:b,s:s}", "exitCode", res->exit_code, "exited", true,
                                "status", status);
                if (end && res->exit_code != 0)
                        json_object_set_new(end, "error", json_string(status));
        }
        return event("end", end);
}

static void on_done(void *data, const struct exec_result *res)
{
        struct eproc *p = data;
        p->s = NULL; /* freed by exec.c after this */
        while (p->subs) {
                struct sub *s = p->subs;
                cstream_send(s->cs, end_event(res));
                cstream_finish(s->cs);
                sub_free(s);
        }
        proc_free(p);
}

/* The slot started the command (host 0: it could not; stderr and the end follow): the start
 * event goes out, and the output, held back until then, flows. */
static void on_launched(void *data, pid_t host)
{
        struct eproc *p = data;
        if (!p->starting)
                return; /* once: a second start event would break the stream */
        p->starting = false;
        if (host > 0) { /* its pid inside the environment */
                uint32_t inner = inner_pid(host);
                p->pid = inner ? inner : (uint32_t)host; /* 0 cannot be, for our child */
        }
        for (struct sub *s = p->subs; s; s = s->next)
                sub_begin(s);
        update_pause(p);
}

static const struct exec_callbacks exec_cbs = {
        .output = on_output, .done = on_done, .launched = on_launched};

/* ------------------------------------------------------------------------------ requests */

/* ProcessSelector: {"pid":N} or {"tag":"x"}. NULL (answered) when there is no such process. */
static struct eproc *find(struct request *r, const struct e2b_target *t, json_t *sel, bool stream)
{
        json_t *pid = json_object_get(sel, "pid"), *tag = json_object_get(sel, "tag");
        for (struct eproc *p = procs; p; p = p->next) {
                if (strcmp(p->env, env_name(t->env)) != 0)
                        continue;
                if (json_is_integer(pid) && p->pid && json_integer_value(pid) == (json_int_t)p->pid)
                        return p;
                if (json_is_string(tag) && p->tag && !strcmp(p->tag, json_string_value(tag)))
                        return p;
        }
        char what[160];
        if (json_is_integer(pid))
                snprintf(what, sizeof(what), "process with pid %lld not found",
                         (long long)json_integer_value(pid));
        else if (json_is_string(tag))
                snprintf(what, sizeof(what), "process with tag %.64s not found",
                         json_string_value(tag));
        else
                snprintf(what, sizeof(what), "process: a pid or a tag is required");
        const char *code = json_is_integer(pid) || json_is_string(tag) ? "not_found"
                                                                       : "invalid_argument";
        if (stream)
                rpc_stream_error(r, code, "%s", what);
        else
                rpc_error(r, code, "%s", what);
        return NULL;
}

static bool plain_string(json_t *j)
{
        return json_is_string(j) && strlen(json_string_value(j)) == json_string_length(j);
}

/* ProcessConfig into argv (borrowing j's strings) and a checked envs object. */
static const char *parse_config(json_t *proc, char ***ret_argv, json_t **ret_envs)
{
        json_t *cmd = json_object_get(proc, "cmd"), *args = json_object_get(proc, "args");
        json_t *envs = json_object_get(proc, "envs"), *cwd = json_object_get(proc, "cwd");
        if (!plain_string(cmd) || json_string_length(cmd) == 0)
                return "process.cmd: required";
        if (args && !json_is_array(args))
                return "process.args: must be a list of strings";
        size_t n = json_array_size(args);
        if (n + 1 > E2B_MAX_ARGS)
                return "process.args: too many";
        for (size_t i = 0; i < n; i++)
                if (!plain_string(json_array_get(args, i)))
                        return "process.args: must be strings without NUL bytes";
        if (envs && !json_is_object(envs))
                return "process.envs: must be a map of strings";
        const char *k;
        json_t *v;
        json_object_foreach(envs, k, v)
        {
                if (!plain_string(v) || !*k || strchr(k, '='))
                        return "process.envs: names without '=', values strings";
        }
        if (cwd && (!plain_string(cwd) || (json_string_length(cwd) &&
                                            (json_string_value(cwd)[0] != '/' ||
                                             json_string_length(cwd) >= PATH_MAX))))
                return "process.cwd: must be an absolute path";
        char **argv = calloc(n + 2, sizeof(char *));
        if (!argv)
                return "out of memory";
        argv[0] = (char *)json_string_value(cmd);
        for (size_t i = 0; i < n; i++)
                argv[i + 1] = (char *)json_string_value(json_array_get(args, i));
        *ret_argv = argv;
        *ret_envs = envs;
        return NULL;
}

static void do_start(struct request *r, struct engine *e, const struct e2b_target *t)
{
        json_t *body = rpc_request_json(r, true);
        if (!body)
                return;
        char **argv = NULL;
        json_t *proc = json_object_get(body, "process"), *envs = NULL;
        json_t *pty = json_object_get(body, "pty"), *tag = json_object_get(body, "tag");
        json_t *stdin_j = json_object_get(body, "stdin");
        struct eproc *p = NULL;
        const char *bad = json_is_object(proc) ? parse_config(proc, &argv, &envs)
                                               : "process: required";
        unsigned cols = 0, rows = 0;
        if (!bad && pty && !json_is_null(pty)) {
                json_t *size = json_object_get(pty, "size");
                json_t *c = json_object_get(size, "cols"), *rw = json_object_get(size, "rows");
                if (!json_is_object(pty) || (c && !json_is_integer(c)) || (rw && !json_is_integer(rw)) ||
                    json_integer_value(c) < 0 || json_integer_value(c) > 10000 ||
                    json_integer_value(rw) < 0 || json_integer_value(rw) > 10000)
                        bad = "pty.size: cols and rows up to 10000";
                cols = (unsigned)json_integer_value(c);
                rows = (unsigned)json_integer_value(rw);
        }
        if (!bad && tag && !json_is_null(tag) && !plain_string(tag))
                bad = "tag: must be a string";
        if (bad) {
                rpc_stream_error(r, "invalid_argument", "%s", bad);
                goto out;
        }
        if (procs_of(env_name(t->env)) >= E2B_PROCS_MAX_PER_ENV) {
                rpc_stream_error(r, "resource_exhausted", "too many processes (limit %d)",
                                 E2B_PROCS_MAX_PER_ENV);
                goto out;
        }
        p = calloc(1, sizeof(*p));
        if (!p) {
                rpc_stream_error(r, "resource_exhausted", "out of memory");
                goto out;
        }
        bool tty = pty && json_is_object(pty);
        const char *cwd = json_string_value(json_object_get(proc, "cwd"));
        struct exec_request rq = {
                .argv = argv,
                .env = envs,
                .cwd = cwd && *cwd ? cwd : NULL,
                .user = t->user,
                .timeout_ms = rpc_timeout_ms(r),
                .max_output = SIZE_MAX,
                .tty = tty,
                .cols = cols ? cols : 80,
                .rows = rows ? rows : 24,
                .stdin_keep = !tty && !json_is_false(stdin_j),
                .login = true,
                .user_fallback_for = "user",
        };
        p->eng = e;
        p->pty = tty;
        snprintf(p->env, sizeof(p->env), "%s", env_name(t->env));
        p->tag = json_is_string(tag) ? strdup(json_string_value(tag)) : NULL;
        p->config = json_pack("{s:O,s:O*,s:O*,s:O*}", "cmd", json_object_get(proc, "cmd"),
                              "args", json_object_get(proc, "args"), "envs", envs, "cwd",
                              json_object_get(proc, "cwd"));
        char err[512] = "";
        rq.audit = audit_exec_begin(r, argv);
        int rc = exec_start(e, t->env, &rq, &exec_cbs, p, &p->s, err, sizeof(err));
        if (rc < 0) {
                audit_exec_free(rq.audit);
                rpc_stream_error(r, rc == -EBUSY ? "unavailable" : rpc_code_of_errno(rc), "%s",
                                 err[0] ? err : strerror(-rc));
                json_decref(p->config);
                free(p->tag);
                free(p);
                goto out;
        }
        /* Its environment's slot has not named the command yet: nothing waits for that here
         * (a starved environment may take seconds); on_launched sends the start event. */
        p->starting = true;
        update_pause(p);
        p->next = procs;
        procs = p;
        subscribe(r, p, false); /* the process itself has the deadline (exec's timeout) */
out:
        free(argv);
        json_decref(body);
}

static void do_connect(struct request *r, const struct e2b_target *t)
{
        json_t *body = rpc_request_json(r, true);
        if (!body)
                return;
        struct eproc *p = find(r, t, json_object_get(body, "process"), true);
        if (p)
                subscribe(r, p, true);
        json_decref(body);
}

static void do_list(struct request *r, const struct e2b_target *t)
{
        json_t *arr = json_array();
        for (struct eproc *p = procs; p; p = p->next) {
                if (strcmp(p->env, env_name(t->env)) != 0 || p->starting)
                        continue; /* not yet running: no pid to show */
                json_t *o = json_pack("{s:O,s:I}", "config", p->config, "pid", (json_int_t)p->pid);
                if (o && p->tag)
                        json_object_set_new(o, "tag", json_string(p->tag));
                json_array_append_new(arr, o);
        }
        rpc_reply(r, json_pack("{s:o}", "processes", arr));
}

static void do_send_input(struct request *r, const struct e2b_target *t, json_t *body)
{
        struct eproc *p = find(r, t, json_object_get(body, "process"), false);
        if (!p)
                return;
        json_t *in = json_object_get(body, "input");
        json_t *std = json_object_get(in, "stdin"), *pty = json_object_get(in, "pty");
        if ((std != NULL) == (pty != NULL)) {
                rpc_error(r, "invalid_argument", "input: one of stdin or pty");
                return;
        }
        if ((pty != NULL) != p->pty) {
                rpc_error(r, "internal", "process %u %s", p->pid,
                          p->pty ? "has a terminal: send input.pty" : "has no terminal");
                return;
        }
        unsigned char *buf;
        size_t len;
        if (rpc_b64_decode(std ? std : pty, &buf, &len) < 0) {
                rpc_error(r, "invalid_argument", "input: invalid base64");
                return;
        }
        long rc;
        if (p->pty && exec_tty_input(p->s, NULL, 0) + (long)len > (long)EXEC_STDIN_QUEUE_MAX)
                rc = -ENOBUFS; /* the terminal does not read: bound what waits for it */
        else
                rc = p->pty ? exec_tty_input(p->s, buf, len) : exec_stdin_write(p->s, buf, len);
        free(buf);
        if (rc == -EPIPE || rc == -EINVAL)
                rpc_error(r, "internal", "process %u: stdin is closed or was not kept open",
                          p->pid);
        else if (rc < 0)
                rpc_error(r, rpc_code_of_errno((int)rc), "process %u: %s", p->pid,
                          strerror((int)-rc));
        else
                rpc_reply(r, NULL);
}

static void do_send_signal(struct request *r, const struct e2b_target *t, json_t *body)
{
        struct eproc *p = find(r, t, json_object_get(body, "process"), false);
        if (!p)
                return;
        json_t *sig = json_object_get(body, "signal");
        const char *name = json_string_value(sig);
        int s = 0;
        if (name ? !strcmp(name, "SIGNAL_SIGKILL") : json_integer_value(sig) == 9)
                s = SIGKILL;
        else if (name ? !strcmp(name, "SIGNAL_SIGTERM") : json_integer_value(sig) == 15)
                s = SIGTERM;
        if (!s) {
                rpc_error(r, "invalid_argument", "signal: SIGNAL_SIGKILL or SIGNAL_SIGTERM");
                return;
        }
        int rc = exec_signal_group(p->s, s);
        if (rc < 0 && rc != -ESRCH)
                rpc_error(r, "internal", "signalling %u: %s", p->pid, strerror(-rc));
        else
                rpc_reply(r, NULL);
}

static void do_close_stdin(struct request *r, const struct e2b_target *t, json_t *body)
{
        struct eproc *p = find(r, t, json_object_get(body, "process"), false);
        if (!p)
                return;
        if (p->pty) {
                rpc_error(r, "invalid_argument", "process %u has a terminal", p->pid);
                return;
        }
        int rc = exec_stdin_close(p->s);
        if (rc == -EINVAL)
                rpc_error(r, "internal", "process %u: stdin was not kept open", p->pid);
        else
                rpc_reply(r, NULL); /* closing twice is harmless */
}

static void do_update(struct request *r, const struct e2b_target *t, json_t *body)
{
        struct eproc *p = find(r, t, json_object_get(body, "process"), false);
        if (!p)
                return;
        json_t *size = json_object_get(json_object_get(body, "pty"), "size");
        if (!size) {
                rpc_reply(r, NULL);
                return;
        }
        if (!p->pty) {
                rpc_error(r, "invalid_argument", "process %u has no terminal", p->pid);
                return;
        }
        json_int_t c = json_integer_value(json_object_get(size, "cols"));
        json_int_t rw = json_integer_value(json_object_get(size, "rows"));
        if (c <= 0 || rw <= 0 || c > 10000 || rw > 10000) {
                rpc_error(r, "invalid_argument", "pty.size: cols and rows from 1 to 10000");
                return;
        }
        int rc = exec_tty_resize(p->s, (unsigned)c, (unsigned)rw);
        if (rc < 0)
                rpc_error(r, "internal", "resizing %u: %s", p->pid, strerror(-rc));
        else
                rpc_reply(r, NULL);
}

void e2b_rpc_process(struct request *r, struct engine *e, const struct e2b_target *t,
                     const char *method)
{
        if (!strcmp(method, "Start")) {
                do_start(r, e, t);
                return;
        }
        if (!strcmp(method, "Connect")) {
                do_connect(r, t);
                return;
        }
        json_t *body = NULL;
        bool known = !strcmp(method, "List") || !strcmp(method, "SendInput") ||
                     !strcmp(method, "SendSignal") || !strcmp(method, "CloseStdin") ||
                     !strcmp(method, "Update");
        if (!known) {
                rpc_error(r, "unimplemented", "process.Process/%s is not implemented", method);
                return;
        }
        body = rpc_request_json(r, false);
        if (!body)
                return;
        if (!strcmp(method, "List"))
                do_list(r, t);
        else if (!strcmp(method, "SendInput"))
                do_send_input(r, t, body);
        else if (!strcmp(method, "SendSignal"))
                do_send_signal(r, t, body);
        else if (!strcmp(method, "CloseStdin"))
                do_close_stdin(r, t, body);
        else
                do_update(r, t, body);
        json_decref(body);
}

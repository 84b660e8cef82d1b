/* /v1/envs/{name}/processes: background processes started with exec {"detach": true}. */
#include "daemon/api.h"
#include "daemon/procs.h"
#include "lib/util.h"

#include <signal.h>

/* ---- GET processes/{id}/output[?follow=1]: NDJSON ------------------------------------------- */

struct output_stream {
        struct request *req;
        struct proc_reader *rd;
};

static void output_wake(void *data)
{
        struct output_stream *o = data;
        http_stream_wake(o->req);
}

static ssize_t output_read(void *data, char *buf, size_t max)
{
        struct output_stream *o = data;
        return proc_reader_read(o->rd, buf, max);
}

static void output_closed(void *data)
{
        struct output_stream *o = data;
        proc_reader_close(o->rd);
        free(o);
}

static const struct http_stream_ops output_ops = {.read = output_read, .closed = output_closed};

static void stream_output(struct proc *p, struct request *r, bool follow)
{
        struct output_stream *o = calloc(1, sizeof(*o));
        if (!o || proc_reader_open(p, follow, output_wake, o, &o->rd) < 0) {
                free(o);
                http_reply_errno(r, -ENOMEM, "out of memory");
                return;
        }
        o->req = r;
        http_reply_stream(r, 200, "application/x-ndjson", &output_ops, o);
}

/* ---- processes/{id}/wait: the exit result, when there is one --------------------------------- */

struct wait_req {
        struct request *req;
        struct proc_waiter *w;
};

static void wait_done(void *data, const struct exec_result *res)
{
        struct wait_req *c = data;
        req_on_free(c->req, NULL, NULL);
        if (res)
                http_reply_json(c->req, 200, proc_result_json(res));
        else
                http_reply_error(c->req, 404, "not_found", "the process record was removed");
        free(c);
}

static void wait_gone(void *data)
{
        struct wait_req *c = data;
        proc_wait_cancel(c->w);
        free(c);
}

static void wait_exit(struct proc *p, struct request *r)
{
        struct wait_req *c = calloc(1, sizeof(*c));
        if (!c) {
                http_reply_errno(r, -ENOMEM, "out of memory");
                return;
        }
        c->req = r;
        int rc = proc_wait(p, wait_done, c, &c->w);
        if (rc < 0) {
                free(c);
                http_reply_errno(r, rc, "out of memory");
        } else if (rc == 0) {
                req_on_free(r, wait_gone, c);
                http_defer(r);
        } /* else answered and freed by wait_done */
}

/* ---- the routes ----------------------------------------------------------------------------- */

static int signal_of(json_t *j)
{
        static const struct {
                const char *name;
                int sig;
        } names[] = {{"TERM", SIGTERM}, {"KILL", SIGKILL}, {"INT", SIGINT},   {"HUP", SIGHUP},
                     {"QUIT", SIGQUIT}, {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"STOP", SIGSTOP},
                     {"CONT", SIGCONT}, {"ALRM", SIGALRM}, {"WINCH", SIGWINCH}};
        if (!j)
                return SIGTERM;
        if (json_is_integer(j)) {
                json_int_t v = json_integer_value(j);
                return v > 0 && v < 65 ? (int)v : -1;
        }
        const char *s = json_string_value(j);
        if (!s)
                return -1;
        if (!strncasecmp(s, "SIG", 3))
                s += 3;
        for (size_t i = 0; i < ELEMENTSOF(names); i++)
                if (!strcasecmp(s, names[i].name))
                        return names[i].sig;
        return -1;
}

void api_env_processes(struct request *r, struct engine *e, struct env *v, const char *id_s,
                       const char *action)
{
        const char *m = req_method(r);
        if (!id_s) {
                if (strcmp(m, "GET"))
                        http_reply_error(r, 405, "method_not_allowed", "use GET");
                else
                        http_reply_json(r, 200, json_pack("{s:o}", "processes",
                                                          procs_list_json(env_name(v))));
                return;
        }
        char *end;
        unsigned long id = strtoul(id_s, &end, 10);
        struct proc *p = *id_s && !*end && id < 1u << 31 ? procs_find(env_name(v), (unsigned)id) : NULL;
        if (!p) {
                http_reply_error(r, 404, "not_found", "no process %s in %s", id_s, env_name(v));
                return;
        }
        if (!action) {
                if (!strcmp(m, "GET")) {
                        http_reply_json(r, 200, proc_json(p));
                } else if (!strcmp(m, "DELETE")) {
                        int rc = proc_forget(p);
                        if (rc == -EBUSY)
                                http_reply_error(r, 409, "conflict",
                                                 "process %s is running; signal it first", id_s);
                        else
                                http_reply_json(r, 200, json_pack("{s:s}", "deleted", id_s));
                } else {
                        http_reply_error(r, 405, "method_not_allowed", "use GET or DELETE");
                }
                return;
        }
        if (!strcmp(action, "output") && !strcmp(m, "GET")) {
                const char *f = req_query(r, "follow");
                stream_output(p, r, f && (!strcmp(f, "1") || !strcmp(f, "true")));
        } else if (!strcmp(action, "wait") && (!strcmp(m, "POST") || !strcmp(m, "GET"))) {
                wait_exit(p, r);
        } else if (!strcmp(action, "signal") && !strcmp(m, "POST")) {
                json_t *body = req_json_object(r);
                if (!body)
                        return;
                int sig = signal_of(json_object_get(body, "signal"));
                json_decref(body);
                if (sig < 0) {
                        http_reply_error(r, 400, "invalid_argument",
                                         "signal: a name like TERM, KILL, INT, HUP or a number");
                        return;
                }
                int rc = proc_signal(p, sig);
                if (rc < 0)
                        http_reply_errno(r, rc == -ESRCH ? -EBUSY : rc, "process %s %s", id_s,
                                         rc == -ESRCH ? "has exited" : strerror(-rc));
                else
                        http_reply_json(r, 200, proc_json(p));
        } else {
                http_reply_error(r, 404, "not_found", "no such route: %s", req_path(r));
        }
}

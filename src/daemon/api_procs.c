/* /v1/envs/{name}/processes: background processes started with exec {"detach": true}. */
#include "daemon/api.h"
#include "daemon/procs.h"
#include "lib/util.h"

#include <signal.h>

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
                proc_stream_output(p, r, f && (!strcmp(f, "1") || !strcmp(f, "true")));
        } else if (!strcmp(action, "wait") && (!strcmp(m, "POST") || !strcmp(m, "GET"))) {
                proc_wait(p, r);
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

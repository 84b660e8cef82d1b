/* Background processes: exec with "detach" returns at once; the command keeps running when the
 * client goes away. Its output is kept in a bounded buffer per process (the newest bytes win)
 * that clients can read later or follow live; it can be signalled and waited for. Records live
 * in the daemon's memory (a restarted daemon forgets them; the processes keep running). */
#pragma once
#include "daemon/engine.h"
#include "daemon/exec.h"
#include "daemon/http.h"

#define PROCS_BUFFER_BYTES (1u << 20) /* output kept per process */
#define PROCS_MAX_PER_ENV 64          /* finished records are dropped oldest first */

struct proc;

/* Start cmd detached in v; on success *ret_id is its id within the environment. */
int procs_start(struct engine *e, struct env *v, const struct exec_request *rq, unsigned *ret_id,
                char *err, size_t errlen);
struct proc *procs_find(const char *env, unsigned id);
json_t *procs_list_json(const char *env);
json_t *proc_json(const struct proc *p);
int proc_signal(struct proc *p, int sig);
bool proc_exited(const struct proc *p);
/* Forget a finished process (-EBUSY while it runs). */
int proc_forget(struct proc *p);
/* Stream its output as NDJSON (exec's stream format) to r; follow = keep streaming live until it
 * exits, else stop after what is buffered (and the exit line when it has exited). */
void proc_stream_output(struct proc *p, struct request *r, bool follow);
/* Answer r with the exit result once the process has exited (at once if it has). */
void proc_wait(struct proc *p, struct request *r);
/* The environment is gone: drop its records (their processes are dead). */
void procs_drop_env(const char *env);

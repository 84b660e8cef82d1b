/* Background processes: exec with "detach" returns at once; the command keeps running when the
 * client goes away. Its output is kept in a bounded buffer per process (the newest bytes win)
 * that clients can read later or follow live; it can be signalled and waited for. Records live
 * in the daemon's memory (a restarted daemon forgets them; the processes keep running). */
#pragma once
#include "daemon/engine.h"
#include "daemon/exec.h"

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
/* {"exit_code", "duration_ms", "timed_out", "truncated"}: the last line of a stream, the answer
 * of a wait. */
json_t *proc_result_json(const struct exec_result *r);

/* Its output as NDJSON lines (exec's stream format), from the oldest byte still buffered.
 * follow: keep going live until it exits, else stop after what is buffered (and the exit line
 * when it has exited). wake(data) runs when there may be more to read. */
struct proc_reader;
int proc_reader_open(struct proc *p, bool follow, void (*wake)(void *data), void *data,
                     struct proc_reader **ret);
/* > 0 bytes; 0 nothing now (wake follows); -1 the end (or the record is gone). */
ssize_t proc_reader_read(struct proc_reader *f, char *buf, size_t max);
void proc_reader_close(struct proc_reader *f); /* NULL is fine */

/* done(data, res) once the process has exited: at once (returns 1, *ret NULL) or later from the
 * loop (returns 0); res NULL: the record was removed first. */
struct proc_waiter;
typedef void (*proc_wait_fn)(void *data, const struct exec_result *res);
int proc_wait(struct proc *p, proc_wait_fn done, void *data, struct proc_waiter **ret);
void proc_wait_cancel(struct proc_waiter *w); /* before done ran; NULL is fine */
/* The environment is gone: drop its records (their processes are dead). */
void procs_drop_env(const char *env);

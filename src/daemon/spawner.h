/* PID 1's clone from a small process: `paddockd-spawn` is forked at start-up, while the daemon is
 * still small, and clones each new environment's PID 1 on the daemon's behalf.
 *
 * Why: a clone copies its caller's page tables and leaves every page of the caller
 * write-protected, so that the caller's next write to each page faults (copy-on-write). For
 * the daemon, with its environments' books, SQLite's cache and the server's buffers, that was
 * about a fifth of its CPU per create (perf, a create/exec/delete loop), spent in the loop. The
 * spawner's memory is what the daemon had at start-up and it writes almost nothing, so its
 * clones are cheap and leave no faults behind; and the clone runs beside the loop, not in it.
 *
 * The child is the daemon's, not the spawner's (CLONE_PARENT): the daemon reaps it, watches it
 * through its pidfd and is the parent whose death kills it during its setup, exactly as when it
 * cloned it itself. The request carries the spawn_config's strings and the user namespace's fd;
 * the answer the pid, its pidfd and the report pipe's read end (SCM_RIGHTS over a SEQPACKET
 * socket pair). The spawner answers in the order it was asked.
 *
 * The exec slots that come with every new environment (join.h) are a fork of whoever makes them
 * too, and the spawner makes them the same way, answering with the slot's pid and socket: a new
 * PID 1's first slot with PID 1's own answer (spawner_spawn's slot_sub), others on their own
 * (spawner_slot).
 *
 * If the spawner is gone (killed), requests fail with -ESRCH and the caller clones in place. */
#pragma once

#include "lib/join.h"
#include "lib/spawn.h"

struct cgroup_manager;
struct loop;
struct spawner;
struct spawner_req;

/* r: 0 with p (the caller owns its pid, pidfd and report_fd) and slot (pid 0: none; else the
 * caller owns it), or -errno with err. */
typedef void (*spawner_fn)(int r, struct spawn_pending *p, struct join_slot *slot,
                           const char *err, void *data);

/* Forks the process; call early (its memory is a copy of the daemon's as it is then), once the
 * cgroup manager and paddock-init's fd, which it uses as they are then, exist. */
int spawner_new(struct loop *loop, struct cgroup_manager *cg, int init_fd, struct spawner **ret);
/* Ends and reaps it; requests not answered are dropped, their children killed and reaped. */
void spawner_free(struct spawner *s);

/* Asks for c's PID 1 (c->cgroups and c->init_fd are the spawner's own); fn is called from the
 * loop with the answer, -ESRCH if the process died meanwhile. -ESRCH (no spawner, or it is
 * gone) or -E2BIG (c does not fit in a request): the caller clones in place. slot_sub (NULL:
 * none): the process also starts PID 1's first exec slot in that group below PID 1's, waiting
 * for its go (join_slot_start's wait_go), and answers with both: the loop does not wait for a
 * second request (spawner_slot) while the process serves others. */
int spawner_spawn(struct spawner *s, const struct spawn_config *c, const char *slot_sub,
                  spawner_fn fn, void *data, struct spawner_req **ret);
/* Forgets a request before its answer: waits for the answer here (the spawner answers within
 * milliseconds), and kills and reaps the child it made, so that on return nothing of it is
 * left in the environment's cgroups. fn is never called. */
void spawner_cancel(struct spawner_req *q);

/* An exec slot (join.h) for c (c->cgroups are the spawner's own), made by the spawn process and
 * waited for here (a clone: well under a millisecond; up to a second before the process is
 * taken for stuck). -ESRCH, -E2BIG, or -EAGAIN (the process is busy with earlier requests,
 * creates' clones: the loop would wait behind them): the caller makes it in place
 * (join_slot_start). */
int spawner_slot(struct spawner *s, const struct join_config *c, bool wait_go,
                 struct join_slot *ret);

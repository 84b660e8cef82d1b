/* fdatasync(2) without holding the loop: a thread of its own waits for the disk, and the loop
 * hears when everything written before a request is durable. Requests that arrive while a
 * sync runs share the next one (a group commit), so a burst of creates costs two syncs, not
 * one each. The thread does nothing else: no allocation, no lock, no library call but
 * read, fdatasync and write (and nanosleep, for a test's delay), so the daemon's forks and
 * clones stay as safe as before. */
#pragma once

struct loop;
struct syncer;
struct syncer_wait;

/* result: 0, or -errno of the fdatasync that covered the request. */
typedef void (*syncer_fn)(int result, void *data);

int syncer_new(struct loop *l, struct syncer **ret);
/* Joins the thread. Requests not answered yet are dropped, their functions not called. */
void syncer_free(struct syncer *s);

/* Calls fn once everything written to fd so far is on disk (fd must stay open until then).
 * *ret (may be NULL) can cancel it before. */
int syncer_after(struct syncer *s, int fd, syncer_fn fn, void *data, struct syncer_wait **ret);
void syncer_cancel(struct syncer_wait *w); /* NULL is fine */

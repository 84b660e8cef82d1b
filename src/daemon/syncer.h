/* fdatasync(2) without holding the loop: a small process of its own waits for the disk, and the
 * loop hears when everything written before a request is durable. Requests that arrive while a
 * sync runs share the next one (a group commit), so a burst of creates costs two syncs, not one
 * each.
 *
 * A process, not a thread: a fork of the daemon inherits glibc's "multi-threaded" state once the
 * daemon has a second thread, and the clones the daemon makes for exec slots, PID 1s and helpers
 * run libc code (setresuid, malloc, stdio) between their clone and their execve; with a thread
 * here one of those once spun forever in libc. The process shares the daemon's fd table
 * (CLONE_FILES), so a request is just the fd's number; it shares nothing else and only reads,
 * fdatasyncs and writes on two pipes. If it dies, the syncs happen in the loop again. Sharing
 * the table has one cost: while it sits in an fdatasync on a disk that stopped answering, the
 * daemon's fds (its sockets too) stay open even after the daemon died, until the kernel lets
 * that call return; with such a disk the state database could not work either. */
#pragma once

#include <sys/types.h>

struct loop;
struct syncer;
struct syncer_wait;

/* result: 0, or -errno of the fdatasync that covered the request. */
typedef void (*syncer_fn)(int result, void *data);

/* name: the process's in `ps` ("paddockd-sync"); a string constant. */
int syncer_new(struct loop *l, const char *name, struct syncer **ret);
/* Ends the process and reaps it. Requests not answered yet are dropped, their functions not
 * called. */
void syncer_free(struct syncer *s);

/* Calls fn from the loop once everything written to fd so far is on disk (fd must stay open
 * until then). *ret (may be NULL) can cancel it before. -ESRCH once the process is gone: the
 * caller syncs in place. */
int syncer_after(struct syncer *s, int fd, syncer_fn fn, void *data, struct syncer_wait **ret);
/* The same for a btrfs transaction commit of fd's file system (BTRFS_IOC_SYNC: the cleaner
 * then frees deleted subvolumes at once), which can take tens of milliseconds. */
int syncer_fs_after(struct syncer *s, int fd, syncer_fn fn, void *data, struct syncer_wait **ret);
/* Calls fn from the loop once a writable btrfs snapshot of the subvolume src_fd is made as name
 * in dirfd (BTRFS_IOC_SNAP_CREATE_V2, a transaction commit: 5-15 ms), with its result. Each is
 * a job of its own. Both fds must stay open until fn runs or the syncer is freed: a cancelled
 * job may be running already. */
#define SYNCER_SNAPSHOT_NAME_MAX 64
int syncer_snapshot(struct syncer *s, int src_fd, int dirfd, const char *name, syncer_fn fn,
                    void *data, struct syncer_wait **ret);
void syncer_cancel(struct syncer_wait *w); /* NULL is fine */
/* The process's pid (0 once it is gone): for tests and `ps`, where it has its name. */
pid_t syncer_pid(const struct syncer *s);

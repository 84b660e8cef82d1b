/* Shared low-level helpers: cleanup attributes, fd hand-over, small file I/O.
 * Convention everywhere in src/lib: int >= 0 is success, -errno is failure;
 * out-parameters are named ret_* and written only on success. Library code never logs. */
#pragma once

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#define _cleanup_(f)      __attribute__((cleanup(f)))
#define _cleanup_close_   _cleanup_(closep)
#define _cleanup_free_    _cleanup_(freep)
#define _cleanup_fclose_  _cleanup_(fclosep)
#define _cleanup_closedir_ _cleanup_(closedirp)
#define _unused_          __attribute__((unused))
#define _warn_unused_     __attribute__((warn_unused_result))
#define ELEMENTSOF(x)     (sizeof(x) / sizeof((x)[0]))

static inline void closep(int *fd)
{
        if (*fd >= 0) {
                int saved = errno;
                close(*fd);
                errno = saved;
        }
}

static inline void freep(void *p)
{
        free(*(void **)p);
}

static inline void fclosep(FILE **f)
{
        if (*f)
                fclose(*f);
}

static inline void closedirp(DIR **d)
{
        if (*d)
                closedir(*d);
}

/* Hand an fd (or pointer) out of a scope whose cleanup would otherwise close (free) it. */
#define TAKE_FD(fd)                                                                                \
        ({                                                                                         \
                int _fd_ = (fd);                                                                   \
                (fd) = -EBADF;                                                                     \
                _fd_;                                                                              \
        })
#define TAKE_PTR(p)                                                                                \
        ({                                                                                         \
                __typeof__(p) _p_ = (p);                                                           \
                (p) = NULL;                                                                        \
                _p_;                                                                               \
        })

static inline int negative_errno(void)
{
        return errno > 0 ? -errno : -EIO;
}

/* snprintf into a fixed buffer where truncation is an error, never a silently different string
 * (a path cut short names another file): the length written, or -ENAMETOOLONG. Use
 * BUF_PRINTF(array, ...) for arrays so the size cannot disagree with the buffer. */
_warn_unused_ __attribute__((format(printf, 3, 4))) int buf_printf(char *buf, size_t size,
                                                                   const char *fmt, ...);
#define BUF_PRINTF(buf, ...) buf_printf((buf), sizeof(buf), __VA_ARGS__)
/* "a/b" in a new allocation (NULL on out-of-memory); a trailing '/' of a is not doubled. */
char *path_join(const char *a, const char *b);

/* Copy up to max bytes of src[*off..len) to dst and advance *off: the bytes copied (0 when
 * nothing is pending). The "drain a pending buffer into a reader's buffer" step of streams. */
size_t take_pending(void *dst, size_t max, const void *src, size_t len, size_t *off);

/* FNV-1a of a string, continuing from h (FNV1A_INIT for a fresh hash): stable names derived
 * from paths and names (cgroup subtree, interface names) and hash-table buckets. */
#define FNV1A_INIT 2166136261u
/* Run fn(userdata) with the calling thread inside netns_fd's network namespace, then return to
 * the original one (also on error; abort() if that ever failed). Returns fn's result or -errno
 * of the first setns. */
int netns_run(int netns_fd, int (*fn)(void *userdata), void *userdata);
uint32_t fnv1a(uint32_t h, const char *s);

/* qsort/bsearch comparator of two char * (by strcmp). */
int str_ptr_cmp(const void *a, const void *b);
/* Sort v[0..n) of malloc'd strings and free the duplicates; the number left. */
size_t str_sort_unique(char **v, size_t n);

/* RFC 3339 UTC timestamp, "2026-12-01T23:11:03Z" (RFC3339_SIZE bytes with the NUL). */
#define RFC3339_SIZE 21
const char *format_rfc3339(int64_t unix_s, char buf[static RFC3339_SIZE]);

/* Whole-buffer write/read that retry on EINTR and short transfers. */
int write_all(int fd, const void *buf, size_t len);
ssize_t read_full(int fd, void *buf, size_t len);

/* Write a string to dirfd/name (O_WRONLY|O_CLOEXEC, no create): the cgroup/proc file idiom. */
int write_file_at(int dirfd, const char *name, const char *value);
/* Open path for reading only if it is a regular file (O_NONBLOCK, so a FIFO or device put
 * there cannot hang the caller): the fd, -EINVAL for anything else, or -errno. */
int open_regular(const char *path);
/* The same for dirfd/name with more open flags (e.g. O_NOFOLLOW); ret_st (may be NULL) gets its
 * stat. */
int open_regular_at(int dirfd, const char *name, int flags, struct stat *ret_st);
/* Read up to max-1 bytes of dirfd/name into a NUL-terminated malloc'd string. */
int read_file_at(int dirfd, const char *name, size_t max, char **ret);

/* mkdir -p relative to dirfd (or AT_FDCWD), mode for created components. Existing is fine. */
int mkdir_p_at(int dirfd, const char *path, mode_t mode);
/* rm -rf of dirfd/name without following symlinks and without crossing mount points; btrfs
 * subvolumes inside (read-only ones too) are deleted whole. */
int rm_rf_at(int dirfd, const char *name);
/* The same without the btrfs commit after each subvolume deleted (a transaction commit: 5-50 ms
 * on a busy pool); *ret_subvolume says whether one is due (btrfs_sync on the pool). */
int rm_rf_at_unsynced(int dirfd, const char *name, bool *ret_subvolume);

/* The directory walker every tree walk in src/lib uses (rm -rf, cgroup trees, uid shifting,
 * listings):
 *
 *         _cleanup_closedir_ DIR *d = NULL;
 *         int r = opendir_at(dirfd, name, &d);
 *         ...
 *         FOREACH_DIRENT(de, d)
 *                 ... dirfd(d), de->d_name ...
 *
 * opendir_at opens dirfd/name without following a symlink at name; "." opens dirfd's own
 * directory again, so the stream has its own offset and closing it leaves dirfd open. */
int opendir_at(int dirfd, const char *name, DIR **ret);
/* opendir_at for an fd the caller hands over: closed on failure as well. */
int opendir_fd(int fd, DIR **ret);
/* The next entry that is not "." or "..", NULL at the end (or on a read error). */
struct dirent *readdir_no_dot(DIR *d);
#define FOREACH_DIRENT(de, d) for (struct dirent *de; (de = readdir_no_dot(d));)
/* Is the entry a directory (d_type, or an lstat where the file system leaves it unknown)? */
bool dirent_is_dir(int dirfd, const struct dirent *de);

/* Close every fd >= from except those listed (close_range with a /proc fallback). */
int close_fds_from(int from, const int *keep, size_t n_keep);

/* The RLIMIT_NOFILE soft limit environments' processes start with. The daemon raises its own
 * (it holds fds for every environment), not theirs: PID 1 and every exec'd command put back
 * the one the daemon was started with (0, the default: keep what they inherit). */
void child_nofile_set(unsigned long long soft);
void child_nofile_apply(void);

/* Monotonic and wall clock in milliseconds. */
uint64_t now_ms(void);
int64_t wall_s(void);

/* From /proc/PID/stat: its state (field 3), the kernel's flags for the task (field 9) and its
 * start time in clock ticks since boot (field 22; with the pid it identifies one process across
 * pid reuse). */
struct proc_stat {
        char state;
        uint64_t flags;
        uint64_t start_time;
};
/* The kernel's PF_EXITING: set when the task begins to exit, before it closes its files. */
#define PROC_FLAG_EXITING 0x4u
int proc_stat(pid_t pid, struct proc_stat *ret);
/* Whether what proc_stat read is a process that has exited (a zombie, or dead). */
static inline bool proc_stat_gone(const struct proc_stat *st)
{
        return st->state == 'Z' || st->state == 'X';
}
int proc_start_time(pid_t pid, uint64_t *ret);

/* What pid is to the caller, asked without reaping it: not its child (or not a pid), its
 * child still running (or stopped), or its child that has exited and waits to be reaped. */
enum child_state { CHILD_NONE, CHILD_RUNNING, CHILD_EXITED };
enum child_state child_state(pid_t pid);

/* Whether the host sets fs.suid_dumpable to 1, read anew each call (one pread): then a change
 * of credentials leaves a process dumpable, and a process of the same user may ptrace it. An
 * exec's command switches to its user inside the environment before it drops its capabilities,
 * on memory it shares with its exec slot until its execve. */
bool suid_dumpable_traceable(void);

/* Thin syscall wrappers glibc 2.36 lacks. */
int sys_pidfd_open(pid_t pid, unsigned flags);
int sys_pidfd_send_signal(int pidfd, int sig, unsigned flags);

/* UTF-8: is the whole buffer valid (no overlongs, no surrogates)? */
bool utf8_valid(const char *s, size_t len);
/* Length of the longest prefix that does not end inside a multi-byte sequence. */
size_t utf8_whole_prefix(const char *s, size_t len);

/* In a freshly forked child about to exec: default dispositions, nothing blocked (the daemon
 * blocks and ignores signals, and both survive execve). */
void reset_signals(void);
/* Only the dispositions (a process that keeps every signal blocked meanwhile). */
void reset_signal_handlers(void);

/* Crash-safety tests: SIGKILL ourselves when PADDOCK_TEST_CRASH_AT names this step. Only the
 * one who starts the daemon can set it; no API request can. */
void test_crash_point(const char *step);

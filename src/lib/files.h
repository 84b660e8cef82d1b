/* Files inside an environment: read, write, remove, list, stat, mkdir, move, tar out and in.
 * (files.c; the tar code is files_tar.c, FILES_WATCH files_watch.c, what they share
 * files_internal.h.)
 *
 * Every operation runs in a short-lived helper forked from the daemon (files_spawn). The helper
 * joins the environment's cgroup (a per-operation child group, so its page cache and I/O count
 * against the environment), closes every fd it inherited except its own pipes and the upload,
 * enters PID 1's mount namespace (which makes the environment's root its root and cwd) and then
 * its user namespace, becomes uid/gid 0 there, makes itself non-dumpable and only then touches
 * a path. Paths are user strings and the tree is the environment's to change at any time, so
 * every path is resolved with openat2(RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS) below an fd of
 * "/", and walks below a directory go one component at a time with RESOLVE_BENEATH |
 * RESOLVE_NO_SYMLINKS. Even a lost race can therefore only land somewhere else inside the
 * environment, never on the host: the helper's root *is* the environment's root, and it holds
 * no host fd but the (read-only use of the) spooled upload.
 *
 * The helper never enters the environment's pid namespace, so no process inside can see it
 * in /proc, ptrace it or reach its fds.
 *
 * Protocol: struct files_status messages on the status pipe (each smaller than PIPE_BUF, so
 * atomic): FILES_READY before a data stream starts (read, archive out), FILES_DONE once at the
 * end, with err < 0 on failure. List and stat send files_entry records on the data pipe; read
 * sends the file's bytes and archive out a pax tar stream.
 *
 * FILES_WATCH runs until it is killed: FILES_READY once the inotify watches are in place
 * (value: how many), then NDJSON event lines on the data pipe (see files_run), and FILES_DONE
 * only if the watched directory itself goes away (err 0) or the watch fails. */
#pragma once
#include "lib/cgroup.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define FILES_PATH_MAX            4096 /* bytes, with the terminating NUL */
#define FILES_DEFAULT_MAX_READ    (1ull << 30)
#define FILES_MAX_WRITE           (4ull << 30)
#define FILES_LIST_MAX            10000
#define FILES_ARCHIVE_MAX_BYTES   (4ull << 30) /* regular-file bytes, in and out */
#define FILES_ARCHIVE_MAX_ENTRIES 1000000
#define FILES_ARCHIVE_MAX_DEPTH   256 /* directory levels below the archived path */
#define FILES_WATCH_MAX_WATCHES   8192 /* directories one watch follows, with its own */
#define FILES_WATCH_MAX_DEPTH     32   /* directory levels below the watched one */
#define FILES_WATCH_KEEPALIVE_MS  5000 /* an empty line after this much silence */

enum files_op {
        FILES_READ,
        FILES_WRITE,
        FILES_REMOVE,
        FILES_LIST,
        FILES_STAT,
        FILES_MKDIR,
        FILES_MOVE,
        FILES_ARCHIVE_OUT,
        FILES_ARCHIVE_IN,
        FILES_WATCH,
};

struct files_request {
        enum files_op op;
        const char *path;   /* normalized with files_path_normalize */
        const char *to;     /* FILES_MOVE: the destination, normalized */
        const char *user;   /* owner of what is created: NULL = root; "name", "uid", "uid:gid" */
        int upload_fd;      /* FILES_WRITE, FILES_ARCHIVE_IN: the body, read from offset 0 */
        uint64_t max_bytes; /* FILES_READ: refuse larger files (EFBIG) */
        int mode;           /* FILES_WRITE, FILES_MKDIR: permission bits, -1 = default */
        bool parents;       /* FILES_WRITE, FILES_MKDIR, FILES_ARCHIVE_IN: create missing dirs */
        bool recursive;     /* FILES_REMOVE; FILES_WATCH: also every directory below */
        bool overwrite;     /* FILES_MOVE: replace an existing destination */
        /* FILES_WRITE: upload_range: only the bytes [upload_off, upload_off + upload_len) of
         * the upload, e.g. one part of a multipart body; gunzip: the upload is gzip data,
         * written decompressed (at most FILES_MAX_WRITE bytes). */
        bool upload_range, gunzip;
        uint64_t upload_off, upload_len;
};

enum files_phase { FILES_READY = 1, FILES_DONE = 2 };

struct files_status;
/* A status message arriving in pieces on a non-blocking pipe. */
struct files_status_reader {
        unsigned char buf[256];
        size_t len;
};
/* Read what is there, calling take() for each whole message. False at EOF or on error. */
bool files_status_read(int fd, struct files_status_reader *sr,
                       void (*take)(void *ctx, const struct files_status *st), void *ctx);

struct files_status {
        int32_t err;    /* 0 or -errno */
        uint32_t phase; /* enum files_phase */
        uint64_t value; /* READY: the file's size; DONE: bytes read/written/archived */
        uint64_t count; /* DONE: entries archived/extracted; list: 1 when truncated */
        char msg[232];  /* NUL-terminated human text ("path: reason") */
};
_Static_assert(sizeof(struct files_status) <= sizeof(((struct files_status_reader *)0)->buf),
               "a status message fits the reader's buffer");

enum files_type { FILES_T_FILE, FILES_T_DIR, FILES_T_SYMLINK, FILES_T_OTHER };

/* One list/stat record on the data pipe, followed by name_len + target_len bytes. */
struct files_entry {
        uint32_t type; /* enum files_type */
        uint32_t mode; /* permission bits (07777) */
        uint64_t size;
        int64_t mtime;                 /* seconds since the epoch */
        uint32_t uid, gid;             /* as seen inside the environment */
        uint32_t name_len, target_len; /* name <= 255 bytes, target (symlinks) <= 4095 */
};

const char *files_type_name(uint32_t type);

/* Parse the record at *off in buf (received data, untrusted sizes); advance *off. Returns 1 for
 * a record, 0 at the end of buf, -EBADMSG for a malformed or cut record. ret_name/ret_target
 * point into buf and are not NUL-terminated. */
int files_entry_next(const void *buf, size_t len, size_t *off, struct files_entry *ret,
                     const char **ret_name, const char **ret_target);

/* "/a//b/./c/" -> "/a/b/c". Only absolute paths; ".." stays (the kernel resolves it, clamped
 * at the environment's root). -EINVAL for a relative or empty path, -ENAMETOOLONG beyond
 * FILES_PATH_MAX - 1 bytes or for a component over 255. out needs strlen(in) + 1 bytes. */
int files_path_normalize(const char *in, char *out, size_t outlen);
/* Split a normalized path into its parent (written to parent) and last component (pointing
 * into path). -EINVAL for "/", which has no parent. The name may be "..": callers that create
 * or remove something refuse it. */
int files_path_split(const char *path, char *parent, size_t parent_len, const char **ret_name);

/* Run rq with every path resolved below root_fd; report on status_fd (and data_fd). Returns 0
 * or the -errno it reported. FILES_ARCHIVE_IN extracts with libarchive relative to the cwd, so
 * it also needs the process root to be root_fd's directory (true in the helper).
 *
 * FILES_WATCH writes one line per change below rq->path:
 *   {"path":"/abs/path","event":"create|modify|delete|move_from|move_to|attrib","type":"file|dir"}
 * ("encoding":"base64" added when the path is not UTF-8, which then travels base64), and
 * {"event":"overflow"} once after events were lost: the reader fell more than the pipe plus
 * 64 KiB behind, the kernel's queue overflowed, or a new directory was past the limits. An empty
 * line follows every FILES_WATCH_KEEPALIVE_MS of silence, so that a reader that went away is
 * noticed by whoever forwards the stream. It changes the caller's cwd, and needs data_fd to be
 * a pipe it may make non-blocking. */
int files_run(int root_fd, const struct files_request *rq, int status_fd, int data_fd);

/* FILES_WATCH (files_watch.c), with rq->path already resolved to top_fd (O_PATH, taken and
 * closed once the watches are set up): watch it and report until the reader goes away (0),
 * the directory does (0, after FILES_DONE), or something fails (-errno, reported). */
int files_watch_run(int root_fd, int top_fd, const struct files_request *rq, int status_fd,
                    int data_fd);
/* procfs, sysfs, cgroupfs and the like: kernel interfaces, not files to archive or watch. */
bool files_is_pseudo_fs(int fd);
/* path resolved below root_fd as every path of this module: openat2(RESOLVE_IN_ROOT |
 * RESOLVE_NO_MAGICLINKS), O_CLOEXEC added. An fd or -errno. */
int files_open_in_root(int root_fd, const char *path, int flags);

/* Where the helper goes: PID 1's pidfd and the per-operation cgroup (cgroups may be NULL). */
struct files_target {
        int env_pidfd;
        struct cgroup_manager *cgroups;
        const char *cgroup_name;
        const char *cgroup_sub;
};

struct files_child {
        int pidfd;     /* the helper, a child of the caller: reap it with waitid(P_PIDFD) */
        int status_fd; /* read end of the status pipe */
        int data_fd;   /* read end of the data pipe (list, stat, read, archive out), else -1 */
};

/* Fork the helper for rq. All returned fds are O_CLOEXEC and blocking. */
int files_spawn(const struct files_target *t, const struct files_request *rq,
                struct files_child *ret);

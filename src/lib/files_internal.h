/* Shared by the parts of the files helper: files.c (paths, owners, the plain operations, the
 * helper itself), files_tar.c (archive out and in) and files_watch.c (FILES_WATCH). Everything
 * here runs in the helper, inside the environment (see files.h). */
#pragma once
#include "lib/files.h"

#include <stdint.h>
#include <sys/types.h>

#define FILES_COPY_BUF (128u * 1024)

/* One struct files_status on the status pipe; msg from fmt (NULL: none). Returns err. */
__attribute__((format(printf, 6, 7))) int
files_report(int fd, uint32_t phase, int err, uint64_t value, uint64_t count, const char *fmt, ...);
#define files_fail(fd, err, ...) files_report(fd, FILES_DONE, err, 0, 0, __VA_ARGS__)
/* "path: reason" for the common case. */
int files_fail_path(int fd, int err, const char *path);

/* One component (or a relative path) below dfd, following no symlink at all and never leaving
 * dfd (a name from readdir). An fd or -errno. */
int files_open_below(int dfd, const char *name, int flags);

/* Owner of what an operation creates (files_request.user resolved in the environment). */
struct files_owner {
        uid_t uid;
        gid_t gid;
};
int files_resolve_owner(int root_fd, const char *user, struct files_owner *ret);
int files_fail_owner(int sfd, int r, const char *user);
/* mkdir -p of a normalized path inside root_fd, what is made owned by o (see files.c): an
 * O_RDONLY fd of the directory or -errno. */
int files_ensure_dir(int root_fd, const char *path, const struct files_owner *o, int last_mode);

/* files_tar.c */
int files_op_archive_out(int root_fd, const struct files_request *rq, int sfd, int dfd);
int files_op_archive_in(int root_fd, const struct files_request *rq, int sfd);

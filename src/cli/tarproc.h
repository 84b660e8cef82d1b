/* tar(1) as a child process, run without a shell, for moving directories through the API as tar
 * streams: `image import DIR` and `cp` of a directory in either direction. */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

struct tarproc {
        pid_t pid;        /* > 0 while the child has not been reaped */
        int fd;           /* create: read end of tar's stdout; extract: write end of its stdin */
        const char *verb; /* names the verb in messages */
};

/* Whether a "tar" is found on PATH (execvp's lookup), to refuse before anything is sent. */
bool tar_available(void);

/* `tar -C dir --numeric-owner -cf - .`: the archive of dir's contents, readable from t->fd. */
int tar_create(const char *dir, const char *verb, struct tarproc *t);

/* `tar -C dir --no-same-owner --no-same-permissions [--strip-components=N] -xf -`: what is
 * written to t->fd is extracted into dir, owned by us and with our umask applied, never with
 * set-id bits, whoever runs the CLI. GNU tar refuses members with ".." and absolute names, and
 * defers symlinks that point outside, so an archive from an environment cannot write outside
 * dir. With dir NULL, `tar -xOf -` instead: the archive's file contents go to out_fd. */
int tar_extract(const char *dir, int strip, int out_fd, const char *verb, struct tarproc *t);

/* Close our end (if still open) and reap tar. 0 when it exited 0; else -1, after saying how it
 * ended unless quiet (when the transfer failed anyway, tar dying of it is no news). */
int tar_finish(struct tarproc *t, bool quiet);

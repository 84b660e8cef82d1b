#include "cli/tarproc.h"
#include "lib/util.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

bool tar_available(void)
{
        const char *path = getenv("PATH");
        if (!path || !*path)
                path = "/bin:/usr/bin"; /* what execvp falls back to */
        while (*path) {
                size_t len = strcspn(path, ":");
                char file[PATH_MAX];
                /* An empty entry is the current directory, as for execvp. */
                if (BUF_PRINTF(file, "%.*s/tar", (int)len, len ? path : ".") >= 0 &&
                    access(file, X_OK) == 0)
                        return true;
                path += len;
                if (*path == ':')
                        path++;
        }
        return false;
}

/* Fork tar with args, its stdin and stdout replaced by in_fd and out_fd unless -1. */
static int spawn(char *const args[], int in_fd, int out_fd, const char *verb, pid_t *ret)
{
        pid_t pid = fork();
        if (pid < 0)
                return -errno;
        if (pid == 0) {
                /* dup2 clears close-on-exec on the copy; everything else of ours is closed. */
                if ((in_fd >= 0 && dup2(in_fd, STDIN_FILENO) < 0) ||
                    (out_fd >= 0 && dup2(out_fd, STDOUT_FILENO) < 0))
                        _exit(127);
                close_fds_from(3, NULL, 0);
                signal(SIGPIPE, SIG_DFL);
                execvp("tar", args);
                fprintf(stderr, "paddock: %s: cannot run tar: %s\n", verb, strerror(errno));
                _exit(127);
        }
        *ret = pid;
        return 0;
}

int tar_create(const char *dir, const char *verb, struct tarproc *t)
{
        int p[2];
        if (pipe2(p, O_CLOEXEC) < 0)
                return -errno;
        char *const args[] = {"tar", "-C", (char *)dir, "--numeric-owner", "-cf", "-", ".", NULL};
        pid_t pid = 0;
        int r = spawn(args, -1, p[1], verb, &pid);
        close(p[1]);
        if (r < 0) {
                close(p[0]);
                return r;
        }
        *t = (struct tarproc){.pid = pid, .fd = p[0], .verb = verb};
        return 0;
}

int tar_extract(const char *dir, int strip, int out_fd, const char *verb, struct tarproc *t)
{
        int p[2];
        if (pipe2(p, O_CLOEXEC) < 0)
                return -errno;
        char strip_arg[32];
        snprintf(strip_arg, sizeof(strip_arg), "--strip-components=%d", strip);
        char *args[10];
        size_t n = 0;
        args[n++] = "tar";
        if (dir) {
                args[n++] = "-C";
                args[n++] = (char *)dir;
                args[n++] = "--no-same-owner";
                args[n++] = "--no-same-permissions";
                if (strip > 0)
                        args[n++] = strip_arg;
                args[n++] = "-xf";
        } else {
                args[n++] = "-xOf";
        }
        args[n++] = "-";
        args[n] = NULL;
        pid_t pid = 0;
        int r = spawn(args, p[0], dir ? -1 : out_fd, verb, &pid);
        close(p[0]);
        if (r < 0) {
                close(p[1]);
                return r;
        }
        *t = (struct tarproc){.pid = pid, .fd = p[1], .verb = verb};
        return 0;
}

int tar_finish(struct tarproc *t, bool quiet)
{
        if (t->fd >= 0)
                close(t->fd); /* a tar still writing gets EPIPE and ends; a reader sees EOF */
        t->fd = -1;
        if (t->pid <= 0)
                return 0;
        int status;
        pid_t pid = t->pid;
        t->pid = 0;
        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR)
                        return -1;
        if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
                return 0;
        if (quiet)
                return -1;
        if (WIFEXITED(status))
                fprintf(stderr, "paddock: %s: tar failed with exit status %d\n", t->verb,
                        WEXITSTATUS(status));
        else if (WIFSIGNALED(status))
                fprintf(stderr, "paddock: %s: tar killed by signal %d\n", t->verb,
                        WTERMSIG(status));
        return -1;
}

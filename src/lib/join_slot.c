/* Exec slots: a process forked ahead of time into an environment that runs its execs (join.h).
 *
 * The slot is born in its per-exec cgroup, or joins it without the kernel's global lock
 * (cgroup_env_clone, cgroup_env_join), and enters every namespace of PID 1, user
 * namespace last, and loads the environment's seccomp filter (and a sandbox's Landlock domain)
 * once, for its commands to inherit: the kernel checks and compiles a filter of ~350 rules at
 * every load, about 0.2 ms a command. It keeps its capabilities in the user namespace, to switch
 * each command's user; the command drops them (confine_apply_spawned), so it ends exactly as
 * confined as PID 1. Then the slot serves commands one at a time: it blocks reading one message
 * from its socket (argv, envp, working directory, user, terminal size, profile, with
 * stdin/stdout/stderr and the pty socket as SCM_RIGHTS), spawns the command and answers with
 * its pid. A command too big for one message (up to the API's 8 MiB) comes in a sealed memfd
 * passed with it, which the slot copies into memory of its own for that command only.
 *
 * The command is cloned with CLONE_VM, as posix_spawn does: no copy of the slot's page tables
 * (a fork of the daemon) and nothing to tear down at its execve, which are most of a fork's
 * cost. The slot answers at once and then waits, without touching the shared memory, until
 * the command has exec'd or died. Nothing in the environment can see, trace or signal the slot:
 * it stays outside the environment's pid namespace, and it is not dumpable, with memory that
 * belongs to the initial user namespace (ptrace would need CAP_SYS_PTRACE there). Until its
 * execve the command shares that memory; it touches only its own stack and the message's
 * buffers, and allocates nothing that would outlive it in the slot's heap. */
#include "lib/join.h"
#include "lib/join_internal.h"
#include "lib/util.h"

#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>

#define SLOT_MAGIC 0x70646b73u /* "pdks" */
/* argv + envp + strings in the message itself: what nearly every command needs; a bigger one
 * goes in a memfd (big), up to SLOT_BIG_MAX and SLOT_BIG_STRINGS (execve's own limit, a quarter
 * of the stack limit, is lower). Beyond: -E2BIG, before the slot is touched. Never more than
 * SLOT_MAX_STRINGS arguments: glibc's execvp copies argv onto the command's stack for a file
 * without #! (ENOEXEC), and that stack is SLOT_STACK_SIZE. */
#define SLOT_BLOB_MAX (96u * 1024u)
#define SLOT_MAX_STRINGS 8192u
#define SLOT_BIG_MAX (8u << 20)
#define SLOT_BIG_STRINGS (1u << 20)
#define SLOT_BIG_SEALS (F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE)
/* Where the command's final environment goes in the slot's string table: after the strings,
 * argv and envp that receive() lays out (at most 2 * (SLOT_MAX_STRINGS + 3) + 3 pointers). */
#define SLOT_ENV_ROOM (2u * SLOT_MAX_STRINGS + 16u)
/* The command's stack until its execve: passwd_lookup's 64 KiB buffer and execvp's path
 * buffer, with a wide margin. Untouched pages cost nothing. */
#define SLOT_STACK_SIZE (1024u * 1024u)

static _Noreturn void slot_main(const struct join_config *c, int sock, bool placed, bool wait_go);

struct slot_head {
        uint32_t magic;
        int32_t profile;
        uint32_t argc, envc, blob_len;
        uint32_t cols, rows;
        uint8_t login_env, has_pty, has_cwd, has_user, has_fallback;
        uint8_t big; /* the strings are in the memfd after the other fds, not in the message */
};

/* ------------------------------------------------------------------ the caller's side */

static bool put_str(char *blob, size_t cap, size_t *off, const char *s)
{
        size_t n = strlen(s) + 1;
        if (n > cap - *off)
                return false;
        memcpy(blob + *off, s, n);
        *off += n;
        return true;
}

/* Head and blob for c, at most cap bytes and max_strings argv and envp strings; -E2BIG when it
 * does not fit. */
static int encode(const struct join_config *c, struct slot_head *h, char *blob, size_t cap,
                  uint32_t max_strings)
{
        size_t off = 0;
        *h = (struct slot_head){.magic = SLOT_MAGIC, .profile = (int32_t)c->profile,
                                .cols = c->cols, .rows = c->rows, .login_env = c->login_env,
                                .has_pty = c->pty_sock >= 0, .has_cwd = c->cwd != NULL,
                                .has_user = c->user != NULL,
                                .has_fallback = c->user_fallback_for != NULL};
        if ((c->cwd && !put_str(blob, cap, &off, c->cwd)) ||
            (c->user && !put_str(blob, cap, &off, c->user)) ||
            (c->user_fallback_for && !put_str(blob, cap, &off, c->user_fallback_for)))
                return -E2BIG;
        for (; c->argv[h->argc]; h->argc++)
                if (h->argc >= SLOT_MAX_STRINGS ||
                    !put_str(blob, cap, &off, c->argv[h->argc]))
                        return -E2BIG;
        for (; c->envp[h->envc]; h->envc++)
                if (h->argc + h->envc >= max_strings ||
                    !put_str(blob, cap, &off, c->envp[h->envc]))
                        return -E2BIG;
        h->blob_len = (uint32_t)off;
        return 0;
}

int join_slot_start(const struct join_config *c, bool wait_go, struct join_slot *ret)
{
        int sp[2];
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0)
                return -errno;
        bool placed;
        pid_t pid = cgroup_env_clone(c->cgroups, c->cgroup_name, c->cgroup_sub,
                                     c->clone_parent ? CLONE_PARENT : 0, NULL, &placed);
        if (pid < 0) {
                close(sp[0]);
                close(sp[1]);
                return pid;
        }
        if (pid == 0) {
                close(sp[0]);
                slot_main(c, sp[1], placed, wait_go);
        }
        close(sp[1]);
        *ret = (struct join_slot){.pid = pid, .sock = sp[0]};
        return 0;
}

int join_slot_go(struct join_slot *slot)
{
        static const char go = 'g';
        /* The first message on an empty socket: it cannot block. */
        if (send(slot->sock, &go, 1, MSG_NOSIGNAL | MSG_DONTWAIT) != 1)
                return -errno;
        return 0;
}

void join_slot_release(struct join_slot *slot)
{
        if (slot->pid <= 0)
                return;
        kill(slot->pid, SIGKILL);
        close(slot->sock);
        slot->pid = 0;
        slot->sock = -EBADF;
}

void join_slot_discard(struct join_slot *slot)
{
        if (slot->pid <= 0)
                return;
        kill(slot->pid, SIGKILL);
        while (waitpid(slot->pid, NULL, 0) < 0 && errno == EINTR)
                ;
        close(slot->sock);
        slot->pid = 0;
        slot->sock = -EBADF;
}

/* Adds the bytes of list's strings to *n, stopping past SLOT_BIG_MAX. */
static void add_sizes(char *const *list, size_t *n)
{
        for (size_t i = 0; list[i] && *n <= SLOT_BIG_MAX; i++)
                *n += strnlen(list[i], SLOT_BIG_MAX) + 1;
}

/* The strings' bytes, as encode lays them out (SIZE_MAX past SLOT_BIG_MAX). */
static size_t blob_size(const struct join_config *c)
{
        const char *one[] = {c->cwd, c->user, c->user_fallback_for};
        size_t n = 0;
        for (size_t i = 0; i < ELEMENTSOF(one); i++)
                n += one[i] ? strnlen(one[i], SLOT_BIG_MAX) + 1 : 0;
        add_sizes(c->argv, &n);
        add_sizes(c->envp, &n);
        return n <= SLOT_BIG_MAX ? n : SIZE_MAX;
}

/* A command too big for one message: its strings in a sealed memfd (its fd, or -errno). */
static int encode_big(const struct join_config *c, struct slot_head *h)
{
        size_t len = blob_size(c);
        if (len == SIZE_MAX)
                return -E2BIG;
        _cleanup_close_ int fd = memfd_create("paddock-command", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        if (fd < 0)
                return -errno;
        if (ftruncate(fd, (off_t)len) < 0)
                return -errno;
        char *blob = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (blob == MAP_FAILED)
                return -errno;
        int r = encode(c, h, blob, len, SLOT_BIG_STRINGS);
        munmap(blob, len);
        if (r < 0)
                return r;
        /* Nobody else holds it; sealed all the same, so that what the slot checks and maps
         * cannot change under it. */
        if (fcntl(fd, F_ADD_SEALS, SLOT_BIG_SEALS) < 0)
                return -errno;
        h->big = 1;
        return TAKE_FD(fd);
}

int join_slot_send(struct join_slot *slot, const struct join_config *c, bool allow_big)
{
        struct slot_head h;
        _cleanup_free_ char *blob = malloc(SLOT_BLOB_MAX);
        if (!blob)
                return -ENOMEM;
        int r = encode(c, &h, blob, SLOT_BLOB_MAX, SLOT_MAX_STRINGS);
        _cleanup_close_ int big = -EBADF;
        size_t inline_len = h.blob_len;
        if (r == -E2BIG && allow_big) {
                big = encode_big(c, &h);
                if (big < 0)
                        return big; /* the slot stays as it was */
                inline_len = 0; /* the head only: blob_len is the memfd's */
        } else if (r < 0) {
                return r;
        }
        int fds[5] = {c->stdin_fd, c->stdout_fd, c->stderr_fd};
        size_t nfds = 3;
        if (h.has_pty)
                fds[nfds++] = c->pty_sock;
        if (big >= 0)
                fds[nfds++] = big;
        char ctl[CMSG_SPACE(sizeof(fds))] = {0};
        struct iovec iov[2] = {{&h, sizeof(h)}, {blob, inline_len}};
        struct msghdr msg = {.msg_iov = iov, .msg_iovlen = 2, .msg_control = ctl,
                             .msg_controllen = CMSG_SPACE(nfds * sizeof(int))};
        struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(nfds * sizeof(int));
        memcpy(CMSG_DATA(cm), fds, nfds * sizeof(int));
        ssize_t n;
        while ((n = sendmsg(slot->sock, &msg, MSG_NOSIGNAL)) < 0 && errno == EINTR)
                ;
        /* A slot that failed has written its report and gone: join_slot_report reads that
         * rather than the send's EPIPE. */
        slot->unsent = n < 0;
        return big >= 0 ? JOIN_SLOT_SENT_BIG : 0;
}

int join_slot_report(struct join_slot *slot, int timeout_ms, pid_t *ret_pid, char *errbuf,
                     size_t errlen)
{
        struct helper_report rep = {.err = -EIO};
        struct pollfd p = {.fd = slot->sock, .events = POLLIN};
        int pr;
        while ((pr = poll(&p, 1, timeout_ms)) < 0 && errno == EINTR)
                ;
        ssize_t got = pr > 0 ? recv(slot->sock, &rep, sizeof(rep), MSG_DONTWAIT) : -1;
        bool answered = got == (ssize_t)sizeof(rep);
        if (!answered) {
                rep.err = pr == 0 ? -ETIMEDOUT : -EIO; /* stuck (a frozen group) or broken */
                rep.pid = 0;
                snprintf(rep.msg, sizeof(rep.msg), "exec slot: %s", strerror(-rep.err));
        }
        if (slot->unsent && answered && rep.err == 0)
                rep.err = -EIO; /* cannot happen: it answered a command it never got */
        if (rep.err < 0 || rep.pid <= 0) {
                /* A command that died before its execve (the user namespace refused it) is our
                 * child all the same. */
                if (answered && rep.pid > 0)
                        while (waitpid(rep.pid, NULL, 0) < 0 && errno == EINTR)
                                ;
                rep.msg[sizeof(rep.msg) - 1] = 0;
                snprintf(errbuf, errlen, "%s", rep.msg[0] ? rep.msg : "exec slot failed");
                return -ESTALE; /* the caller discards the slot */
        }
        *ret_pid = rep.pid;
        return 0;
}

/* ------------------------------------------------------------------ the slot */

/* A big command's memory, its own: unmapped once the command has exec'd. */
struct big_maps {
        void *blob, *strs;
        size_t blob_len, strs_len;
};

static void big_unmap(struct big_maps *m)
{
        if (m->blob)
                munmap(m->blob, m->blob_len);
        if (m->strs)
                munmap(m->strs, m->strs_len);
        *m = (struct big_maps){0};
}

/* A big command's strings (h->blob_len bytes in the sealed memfd mfd, copied out, and mfd
 * closed) and a string table for them: its layout as receive's, with the room for the final
 * environment after it (*room). */
static int map_big(const struct slot_head *h, int mfd, struct big_maps *m, char **blob,
                   char ***strs, size_t *room)
{
        struct stat st;
        int seals = fcntl(mfd, F_GET_SEALS);
        bool sealed = seals >= 0 && (seals & SLOT_BIG_SEALS) == SLOT_BIG_SEALS;
        if (!sealed || fstat(mfd, &st) < 0 || st.st_size != (off_t)h->blob_len) {
                close(mfd);
                return -EBADMSG;
        }
        /* Copied into the slot's own memory (charged to the environment's cgroup), so that the
         * daemon's pages go now, not whenever the environment lets the command exec. */
        void *b = mmap(NULL, h->blob_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                       -1, 0);
        int e = errno;
        if (b == MAP_FAILED) {
                close(mfd);
                return -e;
        }
        m->blob = b;
        m->blob_len = h->blob_len;
        for (size_t off = 0; off < h->blob_len;) {
                ssize_t n = pread(mfd, (char *)b + off, h->blob_len - off, (off_t)off);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0) {
                        e = n < 0 ? errno : EBADMSG;
                        close(mfd);
                        big_unmap(m);
                        return -e;
                }
                off += (size_t)n;
        }
        close(mfd);
        /* strings, NULL, argv, NULL, envp, NULL: at most 2 * (argc + envc + 3) + 3 pointers */
        *room = 2u * ((size_t)h->argc + h->envc + 3u) + 3u;
        m->strs_len = (*room + h->envc + 16u) * sizeof(char *);
        void *t = mmap(NULL, m->strs_len, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (t == MAP_FAILED) {
                e = errno;
                big_unmap(m);
                return -e;
        }
        m->strs = t;
        *blob = b;
        *strs = t;
        return 0;
}

/* One command message into cmd (pointers into blob, or into big's maps) and its fds. 0 at EOF
 * (discarded). */
static int receive(int sock, struct join_config *cmd, char *blob, char **strs,
                   struct big_maps *big)
{
        struct slot_head h;
        int fds[5];
        char ctl[CMSG_SPACE(sizeof(fds))];
        struct iovec iov[2] = {{&h, sizeof(h)}, {blob, SLOT_BLOB_MAX}};
        struct msghdr msg = {.msg_iov = iov, .msg_iovlen = 2, .msg_control = ctl,
                             .msg_controllen = sizeof(ctl)};
        ssize_t n;
        while ((n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR)
                ;
        if (n == 0)
                return 0;
        if (n < 0)
                return -errno;
        size_t nfds = 0;
        struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
        if (cm && cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS &&
            cm->cmsg_len >= CMSG_LEN(0)) {
                nfds = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                if (nfds > ELEMENTSOF(fds))
                        return -EBADMSG;
                memcpy(fds, CMSG_DATA(cm), nfds * sizeof(int));
        }
        if ((msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) || (size_t)n < sizeof(h) ||
            h.magic != SLOT_MAGIC || h.big > 1)
                return -EBADMSG;
        uint32_t max = h.big ? SLOT_BIG_STRINGS : SLOT_MAX_STRINGS;
        if ((!h.big && h.blob_len != (size_t)n - sizeof(h)) ||
            (h.big && ((size_t)n != sizeof(h) || h.blob_len > SLOT_BIG_MAX)) || h.argc == 0 ||
            h.argc > SLOT_MAX_STRINGS || h.envc > max || h.argc + h.envc > max ||
            h.has_pty > 1 || h.has_cwd > 1 || h.has_user > 1 || h.has_fallback > 1 ||
            h.login_env > 1 ||
            nfds != (h.has_pty ? 4u : 3u) + h.big || h.blob_len == 0)
                return -EBADMSG; /* each count checked alone first: their sum cannot wrap */
        size_t room = SLOT_ENV_ROOM;
        if (h.big) {
                int r = map_big(&h, fds[nfds - 1], big, &blob, &strs, &room);
                if (r < 0)
                        return r;
        }
        if (blob[h.blob_len - 1] != 0)
                return -EBADMSG;
        /* Every string NUL-terminated inside the blob, exactly as many as announced. */
        size_t want = h.has_cwd + h.has_user + h.has_fallback + h.argc + h.envc, k = 0;
        for (size_t off = 0; off < h.blob_len; off += strlen(blob + off) + 1) {
                if (k == want)
                        return -EBADMSG;
                strs[k++] = blob + off;
        }
        if (k != want)
                return -EBADMSG;
        k = 0;
        cmd->cwd = h.has_cwd ? strs[k++] : NULL;
        cmd->user = h.has_user ? strs[k++] : NULL;
        cmd->user_fallback_for = h.has_fallback ? strs[k++] : NULL;
        /* argv and envp: the strings in place, each list ended by the NULL after it. */
        char **argv = strs + want + 1, **envp = argv + h.argc + 1;
        memmove(argv, strs + k, h.argc * sizeof(char *));
        argv[h.argc] = NULL;
        memmove(envp, strs + k + h.argc, h.envc * sizeof(char *));
        envp[h.envc] = NULL;
        cmd->argv = argv;
        cmd->envp = envp;
        cmd->envp_room = strs + room; /* join_command_main adds up to 3 variables there */
        cmd->profile = (enum confine_profile)h.profile;
        cmd->login_env = h.login_env;
        cmd->cols = h.cols;
        cmd->rows = h.rows;
        cmd->stdin_fd = fds[0];
        cmd->stdout_fd = fds[1];
        cmd->stderr_fd = fds[2];
        cmd->pty_sock = h.has_pty ? fds[3] : -EBADF;
        return 1;
}

/* What the command's clone reads from the slot's memory (CLONE_VM) until its execve. */
struct spawn {
        const struct join_config *cmd;
        int sock;
};

/* The command, on the slot's spare stack until its execve. */
static int command_start(void *data)
{
        const struct spawn *sp = data;
        close(sp->sock);
        join_command_main(sp->cmd); /* its exec_fd (O_CLOEXEC) closes at the execve */
}

static void close_command_fds(const struct join_config *cmd)
{
        int fds[] = {cmd->stdin_fd, cmd->stdout_fd, cmd->stderr_fd, cmd->pty_sock};
        for (size_t i = 0; i < ELEMENTSOF(fds); i++)
                if (fds[i] >= 0)
                        close(fds[i]);
}

static _Noreturn void slot_main(const struct join_config *c, int sock, bool placed, bool wait_go)
{
        int r;
        prctl(PR_SET_DUMPABLE, 0);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        /* The daemon's handlers are still installed: none may run here, least of all on the
         * command's stack. Every signal stays blocked in the slot; the handlers go back to
         * their defaults once, here, so each command only clears the mask. */
        sigset_t all;
        sigfillset(&all);
        sigprocmask(SIG_SETMASK, &all, NULL);
        reset_signal_handlers();
        /* Forked from the daemon while other execs run: their pipes must not stay open here
         * (a command would not see its stdin end) while the cgroup join below waits. */
        int keep[2 + CGROUP_MANAGER_MAX_FDS] = {c->env_pidfd, sock};
        size_t nkeep = 2 + cgroup_manager_fds(c->cgroups, keep + 2, CGROUP_MANAGER_MAX_FDS);
        close_fds_from(3, keep, nkeep);
        if ((r = cgroup_env_join(c->cgroups, c->cgroup_name, c->cgroup_sub, placed)) < 0)
                join_helper_fail(sock, r, "join cgroup");
        close_fds_from(3, keep, 2);
        if (wait_go) {
                char go;
                ssize_t n;
                while ((n = recv(sock, &go, 1, 0)) < 0 && errno == EINTR)
                        ;
                if (n != 1)
                        _exit(0); /* discarded: the create failed */
        }
        if (setns(c->env_pidfd, CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWUTS | CLONE_NEWIPC |
                                        CLONE_NEWNET | CLONE_NEWCGROUP) < 0)
                join_helper_fail(sock, -errno, "enter namespaces");
        if (setns(c->env_pidfd, CLONE_NEWUSER) < 0)
                join_helper_fail(sock, -errno, "enter user namespace");
        close(c->env_pidfd);
        const char *step;
        if ((r = confine_apply_spawner(c->profile, &step)) < 0)
                join_helper_fail(sock, r, step);
        /* Forked from the daemon: its heap is ours to use, nothing else runs here. strs holds
         * the message's strings, argv and envp, then room for the command's final environment
         * (join_command_main adds up to 3 variables and may not allocate). */
        char *blob = malloc(SLOT_BLOB_MAX);
        char **strs = calloc(SLOT_ENV_ROOM + SLOT_MAX_STRINGS + 16, sizeof(char *));
        void *stack = mmap(NULL, SLOT_STACK_SIZE, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK | MAP_NORESERVE, -1, 0);
        if (!blob || !strs || stack == MAP_FAILED)
                join_helper_fail(sock, -ENOMEM, "exec slot");
        /* The lowest page stays unmapped: a guard against the stack running into the heap. */
        if (mprotect(stack, 4096, PROT_NONE) < 0)
                join_helper_fail(sock, -errno, "exec slot");
        for (;;) {
                struct join_config cmd = {.env_pidfd = -EBADF};
                struct big_maps big = {0};
                r = receive(sock, &cmd, blob, strs, &big);
                if (r == 0)
                        _exit(0);
                if (r > 0 && cmd.profile != c->profile)
                        r = -EBADMSG; /* the filter loaded here is another profile's */
                if (r < 0)
                        join_helper_fail(sock, r, "exec slot message");
                int ep[2];
                if (pipe2(ep, O_CLOEXEC) < 0)
                        join_helper_fail(sock, -errno, "exec slot");
                cmd.exec_fd = ep[1];
                struct spawn sp = {.cmd = &cmd, .sock = sock};
                /* CLONE_PARENT: the daemon, not this slot, becomes the parent and reaps it. No
                 * CLONE_VFORK: the environment can stop the command before its execve (it is
                 * in the environment's pid namespace, its own user soon), and then only this
                 * slot may wait, never the daemon for the answer below. */
                pid_t pid = clone(command_start, (char *)stack + SLOT_STACK_SIZE,
                                  CLONE_VM | CLONE_PARENT, &sp);
                int e = errno;
                close(ep[1]);
                close_command_fds(&cmd);
                if (pid < 0)
                        join_helper_fail(sock, -e, "clone");
                struct helper_report rep = {.pid = pid};
                bool sent = write(sock, &rep, sizeof(rep)) == (ssize_t)sizeof(rep);
                /* The command runs on this memory until its execve (or death) closes its end:
                 * nothing here may touch cmd, the strings or the stack before. */
                char b;
                while (read(ep[0], &b, 1) < 0 && errno == EINTR)
                        ;
                close(ep[0]);
                big_unmap(&big);
                if (!sent)
                        _exit(1);
        }
}

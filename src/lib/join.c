#include "lib/join.h"
#include "lib/join_internal.h"
#include "lib/pty.h"
#include "lib/util.h"

#include <ctype.h>
#include <grp.h>
#include <signal.h>
#include <sys/capability.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/stat.h>

extern char **environ;

static bool parse_id(const char *s, size_t len, unsigned *ret)
{
        if (len == 0 || len > 5)
                return false;
        unsigned v = 0;
        for (size_t i = 0; i < len; i++) {
                if (!isdigit((unsigned char)s[i]))
                        return false;
                v = v * 10 + (unsigned)(s[i] - '0');
        }
        if (v > 65535)
                return false;
        *ret = v;
        return true;
}

int passwd_lookup(const char *path, const char *user, uid_t *ret_uid, gid_t *ret_gid,
                  char *ret_home, size_t home_len)
{
        /* A FIFO or device planted at /etc/passwd must not hang us. */
        _cleanup_close_ int fd = open_regular(path);
        if (fd < 0)
                return fd;
        char buf[65536];
        ssize_t n = read_full(fd, buf, sizeof(buf) - 1);
        if (n < 0)
                return (int)n;
        buf[n] = 0;
        /* A line cut by the size limit is not a line: drop it. */
        if ((size_t)n == sizeof(buf) - 1) {
                char *last = strrchr(buf, '\n');
                if (last)
                        last[1] = 0;
                else
                        buf[0] = 0;
        }
        size_t ulen = strlen(user);
        unsigned want_uid = 0;
        bool by_id = parse_id(user, ulen, &want_uid);
        for (char *line = buf, *next; line && *line; line = next) {
                next = strchr(line, '\n');
                if (next)
                        *next++ = 0;
                /* name:pw:uid:gid:gecos:home:shell */
                char *f[7] = {0};
                int nf = 0;
                for (char *p = line; nf < 7; nf++) {
                        f[nf] = p;
                        p = strchr(p, ':');
                        if (!p) {
                                nf++;
                                break;
                        }
                        *p++ = 0;
                }
                if (nf < 6)
                        continue;
                unsigned uid, gid;
                if (!parse_id(f[2], strlen(f[2]), &uid) || !parse_id(f[3], strlen(f[3]), &gid))
                        continue;
                if (by_id ? uid != want_uid : strcmp(f[0], user) != 0)
                        continue;
                *ret_uid = uid;
                *ret_gid = gid;
                /* Cut to the buffer, as tests/unit/test_util.c expects; the command's home
                 * buffer (512 bytes) holds any home a passwd line here carries in practice. */
                snprintf(ret_home, home_len, "%s", f[5][0] == '/' ? f[5] : "/");
                return 0;
        }
        return -ENOENT;
}

/* Resolve c->user inside the environment. Unknown numeric ids are allowed, as in Docker. */
static int resolve_user(const char *user, uid_t *uid, gid_t *gid, char *home, size_t home_len)
{
        if (!user || !*user)
                user = "root";
        char name[128];
        const char *colon = strchr(user, ':');
        size_t nlen = colon ? (size_t)(colon - user) : strlen(user);
        if (nlen == 0 || nlen >= sizeof(name))
                return -EINVAL;
        memcpy(name, user, nlen);
        name[nlen] = 0;
        unsigned id;
        int r = passwd_lookup("/etc/passwd", name, uid, gid, home, home_len);
        if (r < 0) {
                if (!parse_id(name, nlen, &id))
                        return -ENOENT;
                *uid = id;
                *gid = id;
                snprintf(home, home_len, "%s", id == 0 ? "/root" : "/");
        }
        if (colon) {
                if (!parse_id(colon + 1, strlen(colon + 1), &id))
                        return -EINVAL;
                *gid = id;
        }
        return 0;
}

static _Noreturn void cmd_fail(int code, const char *what, const char *detail)
{
        dprintf(STDERR_FILENO, "paddock: %s: %s\n", what, detail);
        _exit(code);
}

/* capget and capset themselves: in an exec slot's command this memory is the slot's (CLONE_VM),
 * where nothing may be allocated. */
static int raise_effective(void)
{
        struct __user_cap_header_struct head = {.version = _LINUX_CAPABILITY_VERSION_3};
        struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];
        if (capget(&head, data) < 0)
                return -errno;
        for (size_t i = 0; i < ELEMENTSOF(data); i++)
                data[i].effective = data[i].permitted;
        return capset(&head, data) < 0 ? -errno : 0;
}

/* A new session whose controlling terminal is a fresh pty of the environment; the master goes
 * to the daemon. Runs as the target user, so the slave is that user's (devpts gives it the
 * opener's fsuid), as after a login. */
static void become_terminal_session(const struct join_config *c)
{
        int master, slave;
        int r = pty_open_here(&master, &slave);
        if (r < 0)
                cmd_fail(126, "allocate a terminal in /dev/pts", strerror(-r));
        pty_set_size(slave, c->cols, c->rows);
        r = fd_send(c->pty_sock, master);
        close(master);
        close(c->pty_sock);
        if (r < 0)
                cmd_fail(126, "hand over the terminal", strerror(-r));
        if (setsid() < 0 || ioctl(slave, TIOCSCTTY, 0) < 0)
                cmd_fail(126, "controlling terminal", strerror(errno));
        if (dup2(slave, 0) < 0 || dup2(slave, 1) < 0 || dup2(slave, 2) < 0)
                _exit(126);
        if (slave > 2)
                close(slave);
}

/* The command process: inside every namespace, still with full caps in the userns. */
_Noreturn void join_command_main(const struct join_config *c)
{
        uid_t uid;
        gid_t gid;
        char home[512];
        const char *step;
        int r;

        child_nofile_apply();
        if (dup2(c->stdin_fd, 0) < 0 || dup2(c->stdout_fd, 1) < 0 || dup2(c->stderr_fd, 2) < 0)
                _exit(126);
        int keep[] = {c->pty_sock, c->exec_fd};
        close_fds_from(3, keep, ELEMENTSOF(keep));
        const char *user = c->user;
        r = resolve_user(user, &uid, &gid, home, sizeof(home));
        if (r == -ENOENT && user && c->user_fallback_for && !strcmp(user, c->user_fallback_for)) {
                user = "root";
                r = resolve_user(user, &uid, &gid, home, sizeof(home));
        }
        if (r < 0)
                cmd_fail(126, "unknown user", c->user);
        /* Keep the permitted set across the uid change so confinement can still drop it. */
        prctl(PR_SET_KEEPCAPS, 1);
        int sw = 0;
        if (setresgid(gid, gid, gid) < 0 || setgroups(0, NULL) < 0 || setresuid(uid, uid, uid) < 0)
                sw = errno;
        /* A change of credentials sets dumpable from fs.suid_dumpable (paddockd refuses 1, 2
         * still dumps core): back to 0 until the execve decides, failed or not, since this
         * memory may be the slot's (CLONE_VM). Signals wait until then, so no core is dumped. */
        prctl(PR_SET_DUMPABLE, 0);
        if (sw)
                cmd_fail(126, "switch user", strerror(sw));
        /* The slot keeps every signal blocked, with default handlers. */
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        if (c->pty_sock >= 0)
                become_terminal_session(c);
        else if (setsid() < 0) /* no controlling terminal: never the daemon's (see spawn.c) */
                cmd_fail(126, "new session", strerror(errno));
        if ((r = raise_effective()) < 0)
                cmd_fail(126, "capabilities", strerror(-r));
        r = confine_apply_spawned(c->profile, &step);
        if (r < 0)
                cmd_fail(126, step, strerror(-r));
        const char *cwd = c->cwd && *c->cwd ? c->cwd : home;
        if (chdir(cwd) < 0) {
                if (c->cwd && *c->cwd)
                        cmd_fail(126, "working directory", strerror(errno));
                if (chdir("/") < 0)
                        _exit(126);
        }
        /* Environment: the caller's list plus HOME if it did not set one (and for a login,
         * USER and LOGNAME). */
        size_t n = 0;
        bool has_home = false, has_user = false, has_logname = false;
        for (; c->envp[n]; n++) {
                has_home |= strncmp(c->envp[n], "HOME=", 5) == 0;
                has_user |= strncmp(c->envp[n], "USER=", 5) == 0;
                has_logname |= strncmp(c->envp[n], "LOGNAME=", 8) == 0;
        }
        char **env = c->envp_room;
        memcpy(env, c->envp, n * sizeof(char *));
        char homevar[sizeof("HOME=") + sizeof(home)];
        if (!has_home && BUF_PRINTF(homevar, "HOME=%s", home) >= 0)
                env[n++] = homevar;
        char uservar[160], lognamevar[160], uname[128];
        if (c->login_env) {
                const char *colon = user ? strchr(user, ':') : NULL;
                size_t ulen = !user ? 0 : colon ? (size_t)(colon - user) : strlen(user);
                if (ulen == 0 || ulen >= sizeof(uname))
                        snprintf(uname, sizeof(uname), "root");
                else
                        snprintf(uname, sizeof(uname), "%.*s", (int)ulen, user);
                if (!has_user && BUF_PRINTF(uservar, "USER=%s", uname) >= 0)
                        env[n++] = uservar;
                if (!has_logname && BUF_PRINTF(lognamevar, "LOGNAME=%s", uname) >= 0)
                        env[n++] = lognamevar;
        }
        env[n] = NULL; /* envp_room may hold a longer list from an earlier command */
        /* execvp searches the PATH of environ (execvpe would search the daemon's). A slot's
         * command shares environ with the slot, which never reads it. */
        environ = env;
        execvp(c->argv[0], c->argv);
        int e = errno;
        cmd_fail(e == ENOENT ? 127 : 126, c->argv[0],
                 e == ENOENT ? "command not found" : strerror(e));
}

_Noreturn void join_helper_fail(int fd, int err, const char *what)
{
        struct helper_report rep = {.err = err};
        snprintf(rep.msg, sizeof(rep.msg), "%s: %s", what, strerror(-err));
        (void)!write(fd, &rep, sizeof(rep));
        _exit(1);
}

/* The systemd scope environments live in on a pure cgroup-v2 host: see sdscope.h.
 *
 * systemd makes a scope only around a process, so the scope is started by running
 * `systemd-run --scope --unit=<subtree>.scope --slice=paddock.slice -p Delegate=yes` with
 * `paddockd --cgroup-holder DIR` as its command: systemd-run registers its own pid as the scope,
 * then execs the holder, which moves itself into DIR/holder (a leaf, so that DIR may hand
 * controllers down) and sleeps. The scope stays while any process is in it: the holder, and
 * every environment. A restarted daemon finds it by its path and uses it again. No D-Bus code
 * here: systemd-run speaks it, and this runs once, at start. */
#include "daemon/sdscope.h"
#include "daemon/log.h"
#include "lib/util.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CGROUP_ROOT "/sys/fs/cgroup"
#define SCOPE_SLICE "paddock.slice"
#define HOLDER_LEAF "holder"
/* systemd-run waits for systemd to start the scope: milliseconds on a server, seconds under
 * software emulation. */
#define SCOPE_WAIT_MS 120000

static bool systemd_booted(void)
{
        struct stat st;
        return lstat("/run/systemd/system", &st) == 0 && S_ISDIR(st.st_mode);
}

static bool pure_v2(void)
{
        struct statfs sfs;
        return statfs(CGROUP_ROOT, &sfs) == 0 && (uint32_t)sfs.f_type == CGROUP2_SUPER_MAGIC;
}

/* "populated 1" in DIR/cgroup.events: a process in the group or below it. */
static bool group_populated(const char *dir)
{
        char path[4200], buf[256];
        if (BUF_PRINTF(path, "%s/cgroup.events", dir) < 0)
                return false;
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return false;
        ssize_t n = read(fd, buf, sizeof(buf) - 1);
        if (n <= 0)
                return false;
        buf[n] = 0;
        return strstr(buf, "populated 1") != NULL;
}

/* The unified group of pid ("self" or a number) from /proc/PID/cgroup, "/system.slice/x". */
static int unified_group_of(const char *pid, char *buf, size_t size)
{
        char path[64], data[4096];
        snprintf(path, sizeof(path), "/proc/%s/cgroup", pid);
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        ssize_t n = read(fd, data, sizeof(data) - 1);
        if (n < 0)
                return -errno;
        data[n] = 0;
        for (char *line = data; line && *line;) {
                char *nl = strchr(line, '\n');
                if (nl)
                        *nl = 0;
                if (!strncmp(line, "0::/", 4))
                        return snprintf(buf, size, "%s", line + 3) < (int)size ? 0 : -ENAMETOOLONG;
                line = nl ? nl + 1 : NULL;
        }
        return -ENOENT;
}

static void sleep_ms(long ms)
{
        struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                ;
}

/* Run argv with a double fork, so that the process is never the daemon's child: it outlives
 * the daemon anyway, and a holder that dies while the daemon runs leaves no zombie. Standard
 * error goes to errfd; no other descriptor (the state directory's lock above all) is passed
 * on. Returns the pid of the process that runs argv. */
static pid_t spawn_detached(char *const argv[], int errfd)
{
        int p[2];
        if (pipe2(p, O_CLOEXEC) < 0)
                return -errno;
        pid_t mid = fork();
        if (mid < 0) {
                int e = errno;
                close(p[0]);
                close(p[1]);
                return -e;
        }
        if (mid == 0) {
                pid_t pid = fork();
                if (pid == 0) {
                        sigset_t none;
                        sigemptyset(&none);
                        sigprocmask(SIG_SETMASK, &none, NULL);
                        signal(SIGPIPE, SIG_DFL);
                        int null = open("/dev/null", O_RDWR | O_CLOEXEC);
                        if (null < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0 ||
                            dup2(errfd >= 0 ? errfd : null, 2) < 0)
                                _exit(127);
                        close_range(3, ~0U, 0);
                        setsid();
                        execv(argv[0], argv);
                        _exit(127);
                }
                (void)!write(p[1], &pid, sizeof(pid));
                _exit(pid < 0);
        }
        close(p[1]);
        pid_t pid = -1;
        ssize_t n;
        while ((n = read(p[0], &pid, sizeof(pid))) < 0 && errno == EINTR)
                ;
        close(p[0]);
        while (waitpid(mid, NULL, 0) < 0 && errno == EINTR)
                ;
        return n == (ssize_t)sizeof(pid) && pid > 0 ? pid : -ECHILD;
}

/* Wait until pid's group is want ("/paddock.slice/x.scope/holder"). -ESRCH if it ended first
 * (systemd-run failed, or the holder could not move), -ETIMEDOUT after SCOPE_WAIT_MS. */
static int wait_for_group(pid_t pid, const char *want)
{
        char ps[24], cur[4096];
        snprintf(ps, sizeof(ps), "%d", (int)pid);
        for (long waited = 0; waited < SCOPE_WAIT_MS; waited += 10) {
                int r = unified_group_of(ps, cur, sizeof(cur));
                if (r == -ENOENT || (r == 0 && kill(pid, 0) < 0 && errno == ESRCH))
                        return -ESRCH;
                if (r == 0 && !strcmp(cur, want))
                        return 0;
                sleep_ms(10);
        }
        return -ETIMEDOUT;
}

static const char *systemd_run_path(void)
{
        static const char *const paths[] = {"/usr/bin/systemd-run", "/bin/systemd-run"};
        for (size_t i = 0; i < ELEMENTSOF(paths); i++)
                if (access(paths[i], X_OK) == 0)
                        return paths[i];
        return NULL;
}

/* What systemd-run said, on one line, into err. */
static void read_error(int fd, const char *what, char *err, size_t errlen)
{
        char buf[512];
        ssize_t n = read(fd, buf, sizeof(buf) - 1);
        buf[n > 0 ? n : 0] = 0;
        for (char *c = buf; *c; c++)
                if (*c == '\n' || *c == '\r')
                        *c = ' ';
        size_t len = strlen(buf);
        while (len && buf[len - 1] == ' ')
                buf[--len] = 0;
        snprintf(err, errlen, "%s%s%s", what, len ? ": " : "", buf);
}

int sdscope_prepare(const char *subtree, const char *holder_exe, char *own, size_t size,
                    char *err, size_t errlen)
{
        err[0] = 0;
        if (!systemd_booted() || !pure_v2())
                return 0;
        /* Environments of a version that kept them in the service's own group stay there
         * (they cannot be moved); the next start after they are gone uses the scope. */
        char mine[4096], legacy[8400];
        if (unified_group_of("self", mine, sizeof(mine)) == 0) {
                char *slash = strrchr(mine, '/');
                size_t sl = strlen(subtree);
                if (slash && !strncmp(slash + 1, subtree, sl) && !strcmp(slash + 1 + sl, "-daemon"))
                        *slash = 0;
                if (BUF_PRINTF(legacy, CGROUP_ROOT "%s/%s", mine, subtree) == 0 &&
                    group_populated(legacy)) {
                        log_warn("environments of this daemon run in its own cgroup %s: they "
                                    "stay there, and systemd before 254 refuses to restart the "
                                    "service until they are gone", legacy);
                        return 0;
                }
        }
        char scope[256], dir[512], leaf[600];
        if (BUF_PRINTF(scope, "%s.scope", subtree) < 0 ||
            buf_printf(own, size, "/" SCOPE_SLICE "/%s", scope) < 0 ||
            BUF_PRINTF(dir, CGROUP_ROOT "%s", own) < 0 ||
            BUF_PRINTF(leaf, "%s/" HOLDER_LEAF, own) < 0) {
                snprintf(err, errlen, "name too long");
                return -ENAMETOOLONG;
        }
        char hold_flag[] = "--cgroup-holder";
        char *holder_argv[] = {(char *)holder_exe, hold_flag, dir, NULL};
        if (group_populated(dir)) {
                /* The scope of an earlier start, alive. It needs a holder only once the last
                 * environment in it ends; start one in place if the old one is gone. */
                char leafdir[700];
                if (BUF_PRINTF(leafdir, "%s/" HOLDER_LEAF, dir) == 0 && group_populated(leafdir))
                        return 1;
                pid_t pid = spawn_detached(holder_argv, -1);
                int r = pid < 0 ? (int)pid : wait_for_group(pid, leaf);
                if (r < 0) {
                        snprintf(err, errlen, "a new holder for %s: %s", dir, strerror(-r));
                        return r;
                }
                return 1;
        }

        const char *run = systemd_run_path();
        if (!run) {
                snprintf(err, errlen, "systemd-run not found");
                return -ENOENT;
        }
        char unit_arg[300], slice_arg[64], desc_arg[600];
        snprintf(unit_arg, sizeof(unit_arg), "--unit=%s", scope);
        snprintf(slice_arg, sizeof(slice_arg), "--slice=" SCOPE_SLICE);
        snprintf(desc_arg, sizeof(desc_arg), "--description=Paddock environments (%s)", subtree);
        char *argv[] = {(char *)run, "--scope", "--quiet", "--collect", unit_arg, slice_arg,
                        desc_arg, "--property=Delegate=yes", "--", (char *)holder_exe,
                        hold_flag, dir, NULL};
        int ep[2];
        if (pipe2(ep, O_CLOEXEC) < 0)
                return -errno;
        pid_t pid = spawn_detached(argv, ep[1]);
        close(ep[1]);
        int r = pid < 0 ? (int)pid : wait_for_group(pid, leaf);
        if (r == -ETIMEDOUT)
                kill(pid, SIGKILL); /* ours: it never reached the scope */
        if (r < 0) {
                fcntl(ep[0], F_SETFL, O_NONBLOCK);
                read_error(ep[0], r == -ESRCH ? "systemd-run failed" : strerror(-r), err, errlen);
        }
        close(ep[0]);
        if (r < 0)
                return r;
        log_info("environments go below the delegated systemd scope %s", own);
        return 1;
}

int sdscope_holder_main(const char *dir)
{
        /* Only a group below the cgroup2 mount, named by the daemon that started us. */
        if (strncmp(dir, CGROUP_ROOT "/", sizeof(CGROUP_ROOT)) || strstr(dir, "/../") ||
            strlen(dir) > 512)
                return 2;
        char leaf[600], procs[700];
        snprintf(leaf, sizeof(leaf), "%s/" HOLDER_LEAF, dir);
        snprintf(procs, sizeof(procs), "%s/cgroup.procs", leaf);
        if (mkdir(leaf, 0755) < 0 && errno != EEXIST)
                return 1;
        _cleanup_close_ int fd = open(procs, O_WRONLY | O_CLOEXEC);
        if (fd < 0 || write(fd, "0", 1) != 1)
                return 1;
        /* Nothing of the daemon's start-up (a terminal, systemd-run's pipe) is kept open. */
        int null = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (null >= 0) {
                dup2(null, 0);
                dup2(null, 1);
                dup2(null, 2);
        }
        close_range(3, ~0U, 0);
        for (;;)
                pause();
}

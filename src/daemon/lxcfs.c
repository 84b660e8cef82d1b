#include "daemon/lxcfs.h"
#include "daemon/log.h"
#include "daemon/loop.h"
#include "lib/util.h"

#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>

#define FUSE_SUPER_MAGIC 0x65735546
#define READY_WAIT_MS 3000
#define RESTART_DELAY_MS 1000
#define MAX_RESTARTS 5

struct lxcfs {
        struct loop *loop;
        char base[4096], dir[4096], pidfile[4096];
        pid_t pid;
        int pidfd;
        struct loop_source *src;
        struct loop_timer *timer;
        bool serving;
        unsigned restarts;
        char status[8300];
        char status_now[8400]; /* what lxcfs_status returns: status, or that it is stopped */
};

/* Asks the mount itself: a FUSE request, answered only by a running lxcfs. For the instance
 * this daemon just started. */
static bool is_fuse(const char *dir)
{
        struct statfs sf;
        return statfs(dir, &sf) == 0 && (unsigned long)sf.f_type == FUSE_SUPER_MAGIC;
}

/* The same asked of /proc/self/mountinfo, never of the mount: an instance found at start may be
 * stopped (SIGSTOP, a debugger) or hung, and every request to its mount would wait for it. The
 * last entry for dir is the one on top. */
static bool fuse_mounted(const char *dir)
{
        _cleanup_fclose_ FILE *f = fopen("/proc/self/mountinfo", "re");
        if (!f)
                return false;
        _cleanup_free_ char *line = NULL;
        size_t cap = 0;
        bool found = false;
        while (getline(&line, &cap, f) > 0) {
                /* id parent major:minor root mount-point options [optional...] - type ... */
                char *save = NULL, *tok = strtok_r(line, " ", &save);
                const char *mount_point = NULL;
                for (int i = 1; tok && i <= 4; i++) {
                        tok = strtok_r(NULL, " ", &save);
                        if (i == 4)
                                mount_point = tok;
                }
                if (!mount_point || strcmp(mount_point, dir) != 0)
                        continue;
                while ((tok = strtok_r(NULL, " ", &save)) && strcmp(tok, "-") != 0)
                        ;
                tok = tok ? strtok_r(NULL, " ", &save) : NULL;
                found = tok && (strcmp(tok, "fuse") == 0 || strncmp(tok, "fuse.", 5) == 0);
        }
        return found;
}

/* Whether the instance is stopped (or being traced): then requests to its mount wait. */
static bool stopped(const struct lxcfs *l)
{
        struct proc_stat st;
        return l->pid > 0 && proc_stat(l->pid, &st) == 0 && (st.state == 'T' || st.state == 't');
}

static const char *find_lxcfs(void)
{
        static const char *const paths[] = {"/usr/bin/lxcfs", "/usr/local/bin/lxcfs",
                                            "/bin/lxcfs", NULL};
        for (size_t i = 0; paths[i]; i++)
                if (access(paths[i], X_OK) == 0)
                        return paths[i];
        return NULL;
}

static void on_exit_ev(struct loop_source *s, int fd, uint32_t events, void *data);

static void watch(struct lxcfs *l)
{
        if (l->pidfd >= 0 && loop_add_fd(l->loop, l->pidfd, EPOLLIN, on_exit_ev, l, &l->src) < 0)
                l->src = NULL;
}

/* A previous daemon's instance, still serving: its pid file names it. */
static bool adopt(struct lxcfs *l)
{
        if (!fuse_mounted(l->dir))
                return false;
        FILE *f = fopen(l->pidfile, "re");
        long pid = 0;
        if (f) {
                if (fscanf(f, "%ld", &pid) != 1)
                        pid = 0;
                fclose(f);
        }
        char exe[64], target[256];
        snprintf(exe, sizeof(exe), "/proc/%ld/exe", pid);
        ssize_t n = pid > 0 ? readlink(exe, target, sizeof(target) - 1) : -1;
        if (n <= 0)
                return false;
        target[n] = 0;
        if (!strstr(target, "lxcfs"))
                return false;
        l->pid = (pid_t)pid;
        l->pidfd = sys_pidfd_open(l->pid, 0);
        watch(l);
        l->serving = true;
        snprintf(l->status, sizeof(l->status), "running (pid %d, adopted)", (int)l->pid);
        log_info("lxcfs: adopted pid %d at %s", (int)l->pid, l->dir);
        if (stopped(l))
                log_warn("lxcfs (pid %d) is stopped: environments starting now wait for it, up to "
                         "their set-up timeout, until it continues", (int)l->pid);
        return true;
}

static int spawn(struct lxcfs *l)
{
        const char *bin = find_lxcfs();
        if (!bin) {
                snprintf(l->status, sizeof(l->status), "not installed (apt install lxcfs)");
                return -ENOENT;
        }
        /* A dead instance leaves "Transport endpoint is not connected" behind; one that was not
         * adopted (no pid file, another program) is not asked anything either. */
        if (fuse_mounted(l->dir))
                (void)umount2(l->dir, MNT_DETACH);
        if (mkdir(l->dir, 0755) < 0 && errno != EEXIST) {
                int r = -errno;
                snprintf(l->status, sizeof(l->status), "failed: mkdir %s: %s", l->dir, strerror(-r));
                return r;
        }
        pid_t pid = fork();
        if (pid < 0)
                return -errno;
        if (pid == 0) {
                /* Its own session: a terminal's signals or the daemon's end do not stop it. */
                setsid();
                sigset_t all;
                sigemptyset(&all);
                sigprocmask(SIG_SETMASK, &all, NULL);
                int null = open("/dev/null", O_RDWR | O_CLOEXEC);
                if (null >= 0) {
                        dup2(null, 0);
                        dup2(null, 1);
                }
                for (int fd = 3; fd < 1024; fd++)
                        (void)close(fd);
                execl(bin, "lxcfs", "--foreground", "--enable-cfs", "--enable-loadavg", "-o", "direct_io",
                      "--pidfile", l->pidfile, l->dir, (char *)NULL);
                _exit(127);
        }
        l->pid = pid;
        l->pidfd = sys_pidfd_open(pid, 0);
        for (unsigned w = 0; w < READY_WAIT_MS; w += 10) {
                if (is_fuse(l->dir)) {
                        watch(l);
                        l->serving = true;
                        snprintf(l->status, sizeof(l->status), "running (pid %d)", (int)pid);
                        log_info("lxcfs: serving at %s (pid %d)", l->dir, (int)pid);
                        return 0;
                }
                if (waitpid(pid, NULL, WNOHANG) == pid) {
                        l->pid = 0;
                        break;
                }
                usleep(10000);
        }
        if (l->pid) {
                kill(pid, SIGKILL);
                waitpid(pid, NULL, 0);
                l->pid = 0;
        }
        if (l->pidfd >= 0)
                close(l->pidfd);
        l->pidfd = -EBADF;
        snprintf(l->status, sizeof(l->status), "failed: lxcfs did not mount %s", l->dir);
        return -EIO;
}

static void on_restart(struct loop_timer *t, void *data)
{
        (void)t;
        struct lxcfs *l = data;
        l->timer = NULL;
        if (spawn(l) < 0)
                log_warn("lxcfs: %s; environments see the host's /proc figures", l->status);
}

static void on_exit_ev(struct loop_source *s, int fd, uint32_t events, void *data)
{
        (void)s;
        (void)fd;
        (void)events;
        struct lxcfs *l = data;
        loop_remove(l->src);
        l->src = NULL;
        close(l->pidfd);
        l->pidfd = -EBADF;
        (void)waitpid(l->pid, NULL, WNOHANG);
        l->pid = 0;
        l->serving = false;
        (void)umount2(l->dir, MNT_DETACH);
        if (++l->restarts > MAX_RESTARTS) {
                snprintf(l->status, sizeof(l->status), "failed: exited %u times", l->restarts);
                log_warn("lxcfs: exited again; not restarted (%s)", l->status);
                return;
        }
        snprintf(l->status, sizeof(l->status), "restarting");
        log_warn("lxcfs exited; restarting it (running environments keep a dead view until "
                 "they restart)");
        l->timer = loop_add_timer(l->loop, RESTART_DELAY_MS, on_restart, l);
}

void lxcfs_start(struct loop *loop, const char *name, struct lxcfs **ret)
{
        struct lxcfs *l = calloc(1, sizeof(*l));
        *ret = l;
        if (!l)
                return;
        l->loop = loop;
        l->pidfd = -EBADF;
        /* /run/paddock/<name>-lxcfs is private (0700); the mount inside it is reached by
         * environments only through their binds. Outside the state directory: like the pool, it
         * outlives the daemon, but it is no state. */
        if (BUF_PRINTF(l->base, "/run/paddock/%s-lxcfs", name) < 0 ||
            BUF_PRINTF(l->dir, "%s/mnt", l->base) < 0 ||
            BUF_PRINTF(l->pidfile, "%s/pid", l->base) < 0) {
                snprintf(l->status, sizeof(l->status), "failed: path too long");
                return;
        }
        if ((mkdir("/run/paddock", 0755) < 0 && errno != EEXIST) ||
            (mkdir(l->base, 0700) < 0 && errno != EEXIST) || chmod(l->base, 0700) < 0) {
                snprintf(l->status, sizeof(l->status), "failed: %s: %s", l->base, strerror(errno));
                return;
        }
        if (adopt(l))
                return;
        if (spawn(l) < 0)
                log_warn("lxcfs: %s; environments see the host's /proc figures", l->status);
}

const char *lxcfs_dir(const struct lxcfs *l)
{
        return l && l->serving ? l->dir : NULL;
}

const char *lxcfs_status(struct lxcfs *l)
{
        if (!l)
                return "failed: out of memory";
        if (l->serving && stopped(l))
                snprintf(l->status_now, sizeof(l->status_now), "stopped (pid %d): environments "
                         "starting now wait for it", (int)l->pid);
        else
                snprintf(l->status_now, sizeof(l->status_now), "%s", l->status);
        return l->status_now;
}

void lxcfs_free(struct lxcfs *l, bool keep)
{
        if (!l)
                return;
        loop_cancel_timer(l->timer);
        loop_remove(l->src);
        if (!keep && l->pid > 0) {
                /* Nothing uses it (no environment is left) and it keeps no state: detach its
                 * mount, then SIGKILL (lxcfs can take seconds to act on SIGTERM, and every
                 * daemon stop would wait for it). */
                (void)umount2(l->dir, MNT_DETACH);
                if (l->pidfd >= 0)
                        (void)sys_pidfd_send_signal(l->pidfd, SIGKILL, 0);
                else
                        kill(l->pid, SIGKILL);
                struct pollfd p = {.fd = l->pidfd, .events = POLLIN};
                if (l->pidfd >= 0)
                        (void)poll(&p, 1, 1000);
                (void)waitpid(l->pid, NULL, WNOHANG);
        }
        if (!keep) {
                (void)umount2(l->dir, MNT_DETACH);
                (void)rmdir(l->dir);
                (void)unlink(l->pidfile);
                (void)rmdir(l->base);
        }
        if (l->pidfd >= 0)
                close(l->pidfd);
        free(l);
}

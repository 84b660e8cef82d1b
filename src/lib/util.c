#include "lib/util.h"
#include "lib/btrfs.h"

#include <dirent.h>
#include <linux/close_range.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>

int write_all(int fd, const void *buf, size_t len)
{
        const char *p = buf;
        while (len > 0) {
                ssize_t n = write(fd, p, len);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                p += n;
                len -= (size_t)n;
        }
        return 0;
}

ssize_t read_full(int fd, void *buf, size_t len)
{
        char *p = buf;
        size_t got = 0;
        while (got < len) {
                ssize_t n = read(fd, p + got, len - got);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (n == 0)
                        break;
                got += (size_t)n;
        }
        return (ssize_t)got;
}

int write_file_at(int dirfd, const char *name, const char *value)
{
        _cleanup_close_ int fd = openat(dirfd, name, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return -errno;
        /* One write(2): cgroup and proc files take the value in one call. */
        size_t len = strlen(value);
        ssize_t n = write(fd, value, len);
        if (n < 0)
                return -errno;
        if ((size_t)n != len)
                return -EIO;
        return 0;
}

int open_regular_at(int dirfd, const char *name, int flags, struct stat *ret_st)
{
        _cleanup_close_ int fd = openat(dirfd, name, O_RDONLY | O_NONBLOCK | O_CLOEXEC | flags);
        if (fd < 0)
                return -errno;
        struct stat st;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode))
                return -EINVAL;
        if (ret_st)
                *ret_st = st;
        return TAKE_FD(fd);
}

int open_regular(const char *path)
{
        return open_regular_at(AT_FDCWD, path, 0, NULL);
}

int read_file_at(int dirfd, const char *name, size_t max, char **ret)
{
        if (max == 0)
                return -EINVAL;
        _cleanup_close_ int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return -errno;
        _cleanup_free_ char *buf = malloc(max);
        if (!buf)
                return -ENOMEM;
        ssize_t n = read_full(fd, buf, max - 1);
        if (n < 0)
                return (int)n;
        buf[n] = 0;
        *ret = TAKE_PTR(buf);
        return 0;
}

int mkdir_p_at(int dirfd, const char *path, mode_t mode)
{
        char buf[4096];
        size_t len = strlen(path);
        if (len == 0 || len >= sizeof(buf))
                return -EINVAL;
        memcpy(buf, path, len + 1);
        for (char *p = buf + 1;; p++) {
                if (*p == '/' || *p == 0) {
                        char c = *p;
                        *p = 0;
                        if (mkdirat(dirfd, buf, mode) < 0 && errno != EEXIST)
                                return -errno;
                        *p = c;
                        if (c == 0)
                                break;
                }
        }
        return 0;
}

int opendir_fd(int fd, DIR **ret)
{
        DIR *d = fdopendir(fd);
        if (!d) {
                int r = -errno;
                close(fd);
                return r;
        }
        *ret = d;
        return 0;
}

int opendir_at(int dirfd, const char *name, DIR **ret)
{
        int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        return opendir_fd(fd, ret);
}

struct dirent *readdir_no_dot(DIR *d)
{
        struct dirent *de;
        while ((de = readdir(d)))
                if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
                        return de;
        return NULL;
}

bool dirent_is_dir(int dirfd, const struct dirent *de)
{
        if (de->d_type != DT_UNKNOWN)
                return de->d_type == DT_DIR;
        struct stat st;
        return fstatat(dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
}

/* Removal walks at most RM_RF_MAX_DEPTH directories deep (one fd and one DIR each); a deeper
 * directory, which an environment can make in its own disk, is first renamed up to the top of
 * the walk and removed by a later pass, so no depth runs the daemon out of fds or stack. */
#define RM_RF_MAX_DEPTH 64
struct rm_walk {
        int top; /* the directory the walk started in */
        dev_t dev;
        struct rm_opts *opts;
        unsigned long moved; /* directories renamed up to top in this pass */
        unsigned long serial;
};
/* How a removal treats btrfs subvolumes: each deletion is followed by a commit (so that the
 * cleaner frees it, and its quota, at once rather than within 30 s), unless the caller does
 * that later, off its own thread (defer_sync; then deleted_subvolume says whether one is due). */
struct rm_opts {
        bool defer_sync;
        bool deleted_subvolume;
};
static int rm_rf_tree(int fd, dev_t dev, struct rm_opts *o);
static int rm_rf_children(int fd, struct rm_walk *w, int depth);

/* A btrfs subvolume (not a mount point) at dirfd/name: deleted whole, read-only ones too;
 * subvolumes nested inside it first. -EBUSY for anything else on another device. */
static int rm_subvolume(int dirfd, const char *name, struct rm_opts *o)
{
        struct statx sx;
        if (statx(dirfd, name, AT_SYMLINK_NOFOLLOW, STATX_INO, &sx) < 0)
                return -errno;
        if ((sx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) &&
            (sx.stx_attributes & STATX_ATTR_MOUNT_ROOT))
                return -EBUSY;
        _cleanup_close_ int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        if (!btrfs_is_subvolume(fd))
                return -EBUSY;
        int r = btrfs_subvol_delete(dirfd, name);
        if (r >= 0 && o->defer_sync)
                o->deleted_subvolume = true;
        else if (r >= 0)
                btrfs_sync(dirfd); /* the cleaner frees it (and its quota) at once, not in 30 s */
        if (r != -ENOTEMPTY)
                return r;
        struct stat st;
        if (fstat(fd, &st) < 0)
                return -errno;
        r = rm_rf_tree(TAKE_FD(fd), st.st_dev, o);
        return r < 0 ? r : btrfs_subvol_delete(dirfd, name);
}

/* Rename dirfd/name up to the walk's top under a fresh name: never over an entry that is
 * there already (the tree's own names, an environment's included, stay what they are). */
static int move_to_top(struct rm_walk *w, int dirfd, const char *name)
{
        for (int tries = 0; tries < 1000; tries++) {
                char flat[64];
                if (BUF_PRINTF(flat, ".rm-deep-%lu", w->serial++) < 0)
                        return -ENAMETOOLONG;
                if (renameat2(dirfd, name, w->top, flat, RENAME_NOREPLACE) == 0) {
                        w->moved++;
                        return 0;
                }
                if (errno != EEXIST)
                        return -errno;
        }
        return -EEXIST;
}

static int rm_rf_children(int fd, struct rm_walk *w, int depth)
{
        _cleanup_closedir_ DIR *d = NULL;
        int r = opendir_fd(fd, &d);
        if (r < 0)
                return r;
        FOREACH_DIRENT(de, d)
        {
                struct stat st;
                if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
                        if (errno != ENOENT)
                                r = -errno;
                        continue;
                }
                if (S_ISDIR(st.st_mode)) {
                        int q;
                        if (st.st_dev != w->dev)
                                q = rm_subvolume(dirfd(d), de->d_name, w->opts); /* never descend */
                        else if (depth >= RM_RF_MAX_DEPTH)
                                q = move_to_top(w, dirfd(d), de->d_name);
                        else if ((q = openat(dirfd(d), de->d_name,
                                             O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
                                q = -errno;
                        else {
                                q = rm_rf_children(q, w, depth + 1);
                                if (unlinkat(dirfd(d), de->d_name, AT_REMOVEDIR) < 0 &&
                                    errno != ENOENT)
                                        q = -errno;
                        }
                        if (q < 0)
                                r = q;
                } else if (unlinkat(dirfd(d), de->d_name, 0) < 0 && errno != ENOENT) {
                        r = -errno;
                }
        }
        return r;
}

/* Empty the directory fd (taken): passes until nothing deep was moved up. */
static int rm_rf_tree(int fd, dev_t dev, struct rm_opts *o)
{
        struct rm_walk w = {.top = fd, .dev = dev, .opts = o};
        int r;
        do {
                w.moved = 0;
                int pass = fcntl(fd, F_DUPFD_CLOEXEC, 3);
                if (pass < 0) {
                        r = -errno;
                        break;
                }
                lseek(pass, 0, SEEK_SET); /* the dup shares the offset: start from the top */
                r = rm_rf_children(pass, &w, 0);
        } while (r >= 0 && w.moved);
        close(fd);
        return r;
}

static int rm_rf_at_opts(int dirfd, const char *name, struct rm_opts *o)
{
        struct stat st;
        if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return errno == ENOENT ? 0 : -errno;
        if (!S_ISDIR(st.st_mode))
                return unlinkat(dirfd, name, 0) < 0 && errno != ENOENT ? -errno : 0;
        const char *slash = strrchr(name, '/');
        if (slash && slash[1]) {
                /* Work from the parent, so that a subvolume at name is seen as one. */
                char *parent = strndup(name, (size_t)(slash - name));
                if (!parent)
                        return -ENOMEM;
                int pfd = openat(dirfd, parent[0] ? parent : "/",
                                 O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                free(parent);
                if (pfd < 0)
                        return -errno;
                int r = rm_rf_at_opts(pfd, slash + 1, o);
                close(pfd);
                return r;
        }
        struct stat parent;
        if ((dirfd == AT_FDCWD ? stat(".", &parent) : fstat(dirfd, &parent)) == 0 &&
            parent.st_dev != st.st_dev)
                return rm_subvolume(dirfd, name, o);
        int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        int r = rm_rf_tree(fd, st.st_dev, o);
        if (unlinkat(dirfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
                return r < 0 ? r : -errno;
        return r;
}

int rm_rf_at(int dirfd, const char *name)
{
        struct rm_opts o = {0};
        return rm_rf_at_opts(dirfd, name, &o);
}

int rm_rf_at_unsynced(int dirfd, const char *name, bool *ret_subvolume)
{
        struct rm_opts o = {.defer_sync = true};
        int r = rm_rf_at_opts(dirfd, name, &o);
        *ret_subvolume = o.deleted_subvolume;
        return r;
}

int close_fds_from(int from, const int *keep, size_t n_keep)
{
        if (n_keep == 0 && syscall(SYS_close_range, (unsigned)from, ~0U, 0) == 0)
                return 0;
        /* Close the gaps between kept fds one range at a time. */
        int lo = from;
        for (;;) {
                int next_keep = -1;
                for (size_t i = 0; i < n_keep; i++)
                        if (keep[i] >= lo && (next_keep < 0 || keep[i] < next_keep))
                                next_keep = keep[i];
                unsigned hi = next_keep < 0 ? ~0U : (unsigned)next_keep - 1;
                if (next_keep != lo && syscall(SYS_close_range, (unsigned)lo, hi, 0) < 0) {
                        for (int fd = lo; fd < 65536 && (unsigned)fd <= hi; fd++)
                                close(fd);
                }
                if (next_keep < 0)
                        return 0;
                lo = next_keep + 1;
        }
}

static unsigned long long child_nofile;

void child_nofile_set(unsigned long long soft)
{
        child_nofile = soft;
}

void child_nofile_apply(void)
{
        struct rlimit rl;
        if (child_nofile == 0 || getrlimit(RLIMIT_NOFILE, &rl) < 0 ||
            child_nofile >= (unsigned long long)rl.rlim_cur)
                return;
        rl.rlim_cur = (rlim_t)child_nofile;
        (void)setrlimit(RLIMIT_NOFILE, &rl);
}

uint64_t now_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

int64_t wall_s(void)
{
        return (int64_t)time(NULL);
}

int proc_stat(pid_t pid, struct proc_stat *ret)
{
        char path[64], buf[1024];
        if (BUF_PRINTF(path, "/proc/%d/stat", (int)pid) < 0)
                return -ENAMETOOLONG;
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        ssize_t n = read_full(fd, buf, sizeof(buf) - 1);
        if (n < 0)
                return (int)n;
        buf[n] = 0;
        /* comm may contain spaces and parentheses: fields start after the last ')', with the
         * state (field 3). */
        char *p = strrchr(buf, ')');
        if (!p)
                return -EIO;
        p++;
        if (p[0] != ' ' || !p[1])
                return -EIO;
        *ret = (struct proc_stat){.state = p[1]};
        for (int field = 3; field <= 22; field++) {
                p = strchr(p, ' ');
                if (!p)
                        return -EIO;
                p++;
                if (field != 9 && field != 22)
                        continue;
                char *end;
                errno = 0;
                unsigned long long v = strtoull(p, &end, 10);
                if (errno || end == p)
                        return -EIO;
                if (field == 9)
                        ret->flags = v;
                else
                        ret->start_time = v;
        }
        return 0;
}

int proc_start_time(pid_t pid, uint64_t *ret)
{
        struct proc_stat st;
        int r = proc_stat(pid, &st);
        if (r >= 0)
                *ret = st.start_time;
        return r;
}

bool suid_dumpable_traceable(void)
{
        static int fd = -EBADF;
        if (fd < 0)
                fd = open("/proc/sys/fs/suid_dumpable", O_RDONLY | O_CLOEXEC);
        char c = 0;
        return fd >= 0 && pread(fd, &c, 1, 0) == 1 && c == '1';
}

enum child_state child_state(pid_t pid)
{
        siginfo_t si = {0};
        if (pid <= 0 || waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) < 0)
                return CHILD_NONE;
        return si.si_pid == pid ? CHILD_EXITED : CHILD_RUNNING;
}

int sys_pidfd_open(pid_t pid, unsigned flags)
{
        int fd = (int)syscall(SYS_pidfd_open, pid, flags);
        return fd < 0 ? -errno : fd;
}

int sys_pidfd_send_signal(int pidfd, int sig, unsigned flags)
{
        return syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, flags) < 0 ? -errno : 0;
}

static size_t utf8_seq_len(unsigned char c)
{
        if (c < 0x80)
                return 1;
        if (c >= 0xc2 && c <= 0xdf)
                return 2;
        if (c >= 0xe0 && c <= 0xef)
                return 3;
        if (c >= 0xf0 && c <= 0xf4)
                return 4;
        return 0;
}

bool utf8_valid(const char *str, size_t len)
{
        const unsigned char *s = (const unsigned char *)str;
        for (size_t i = 0; i < len;) {
                size_t n = utf8_seq_len(s[i]);
                if (n == 0 || i + n > len)
                        return false;
                for (size_t k = 1; k < n; k++)
                        if ((s[i + k] & 0xc0) != 0x80)
                                return false;
                if (n == 3 && ((s[i] == 0xe0 && s[i + 1] < 0xa0) || (s[i] == 0xed && s[i + 1] > 0x9f)))
                        return false;
                if (n == 4 && ((s[i] == 0xf0 && s[i + 1] < 0x90) || (s[i] == 0xf4 && s[i + 1] > 0x8f)))
                        return false;
                if (n == 1 && s[i] == 0)
                        return false; /* JSON strings may hold NUL, but C consumers may not */
                i += n;
        }
        return true;
}

size_t utf8_whole_prefix(const char *str, size_t len)
{
        const unsigned char *s = (const unsigned char *)str;
        /* Look back at most 3 bytes for the start of a sequence that runs past the end. */
        for (size_t back = 1; back <= 3 && back <= len; back++) {
                unsigned char c = s[len - back];
                if ((c & 0xc0) == 0x80)
                        continue;
                size_t n = utf8_seq_len(c);
                return n > back ? len - back : len;
        }
        return len;
}

void reset_signal_handlers(void)
{
        struct sigaction sa = {.sa_handler = SIG_DFL};
        for (int sig = 1; sig < NSIG; sig++)
                if (sig != SIGKILL && sig != SIGSTOP)
                        sigaction(sig, &sa, NULL);
}

void reset_signals(void)
{
        reset_signal_handlers();
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
}

void test_crash_point(const char *step)
{
        const char *at = getenv("PADDOCK_TEST_CRASH_AT");
        if (at && strcmp(at, step) == 0)
                raise(SIGKILL);
}

int buf_printf(char *buf, size_t size, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(buf, size, fmt, ap);
        va_end(ap);
        if (n < 0)
                return -EINVAL;
        if ((size_t)n >= size)
                return -ENAMETOOLONG;
        return n;
}

char *path_join(const char *a, const char *b)
{
        size_t la = strlen(a);
        bool slash = la > 0 && a[la - 1] == '/';
        char *p;
        if (asprintf(&p, "%s%s%s", a, slash ? "" : "/", b) < 0)
                return NULL;
        return p;
}

size_t take_pending(void *dst, size_t max, const void *src, size_t len, size_t *off)
{
        size_t n = *off < len ? len - *off : 0;
        if (n > max)
                n = max;
        memcpy(dst, (const char *)src + *off, n);
        *off += n;
        return n;
}

int netns_run(int netns_fd, int (*fn)(void *userdata), void *userdata)
{
        /* thread-self: setns() moved this thread, and /proc/self would name the leader's. */
        _cleanup_close_ int self = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
        if (self < 0)
                return -errno;
        if (setns(netns_fd, CLONE_NEWNET) < 0)
                return -errno;
        int r = fn(userdata);
        /* Returning to a namespace we hold an fd of, with the privilege that just let us leave
         * it, does not fail in practice. If it ever did, every later link, route and nft rule
         * of the daemon would land inside an environment: stopping is the only safe answer. */
        if (setns(self, CLONE_NEWNET) < 0)
                abort();
        return r;
}

uint32_t fnv1a(uint32_t h, const char *s)
{
        for (; *s; s++)
                h = (h ^ (unsigned char)*s) * 16777619u;
        return h;
}

int str_ptr_cmp(const void *a, const void *b)
{
        return strcmp(*(char *const *)a, *(char *const *)b);
}

size_t str_sort_unique(char **v, size_t n)
{
        if (n > 1)
                qsort(v, n, sizeof(*v), str_ptr_cmp);
        size_t o = 0;
        for (size_t i = 0; i < n; i++) {
                if (o > 0 && strcmp(v[o - 1], v[i]) == 0)
                        free(v[i]);
                else
                        v[o++] = v[i];
        }
        return o;
}

const char *format_rfc3339(int64_t unix_s, char buf[static RFC3339_SIZE])
{
        time_t t = (time_t)unix_s;
        struct tm tm;
        if (!gmtime_r(&t, &tm) || strftime(buf, RFC3339_SIZE, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
                buf[0] = '\0';
        return buf;
}

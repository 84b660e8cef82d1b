#include "lib/userns.h"
#include "lib/util.h"

#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

static int slot_path(const char *dir, uint32_t base, char *buf, size_t len)
{
        if (base < UID_RANGE_FIRST || (base - UID_RANGE_FIRST) % UID_RANGE_SIZE)
                return -EINVAL;
        int r = buf_printf(buf, len, "%s/%u", dir, base);
        return r < 0 ? r : 0;
}

static int claim_one(const char *dir, const char *owner, uint32_t base, bool reclaim)
{
        char path[4096];
        int r = slot_path(dir, base, path, sizeof(path));
        if (r < 0)
                return r;
        _cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd < 0) {
                if (errno != EEXIST || !reclaim)
                        return -errno;
                /* Already there: fine only if it records the same owner. */
                _cleanup_free_ char *cur = NULL;
                r = read_file_at(AT_FDCWD, path, 4096, &cur);
                if (r < 0)
                        return r;
                return strcmp(cur, owner) == 0 ? 0 : -EEXIST;
        }
        return write_all(fd, owner, strlen(owner));
}

/* What this process knows of the registry: the slots taken when it last read the directory,
 * plus its own claims and releases since. A claim then costs one file creation instead of a
 * listing of every claim (a directory of 2,000 entries read per create). The marks are only a
 * hint: O_EXCL decides, a slot another daemon took meanwhile is marked when its creation is
 * refused, and the directory is read again before any marked slot is tried. */
static struct {
        char dir[4096];
        dev_t dev; /* the directory as last seen: changed by someone else, it is read anew */
        ino_t ino;
        struct timespec mtime;
        bool valid;
        uint64_t taken[(UID_RANGE_SLOTS + 63) / 64];
} known;

static bool known_for(const char *dir)
{
        return known.valid && strcmp(known.dir, dir) == 0;
}

static bool known_current(const char *dir)
{
        struct stat st;
        return known_for(dir) && stat(dir, &st) == 0 && st.st_dev == known.dev &&
               st.st_ino == known.ino && st.st_mtim.tv_sec == known.mtime.tv_sec &&
               st.st_mtim.tv_nsec == known.mtime.tv_nsec;
}

/* After a change of our own: the directory's new time is ours, not another daemon's. */
static void known_seen(const char *dir)
{
        struct stat st;
        if (known_for(dir) && stat(dir, &st) == 0) {
                known.dev = st.st_dev;
                known.ino = st.st_ino;
                known.mtime = st.st_mtim;
        }
}

static void known_mark(const char *dir, uint32_t base, bool taken)
{
        if (!known_for(dir) || base < UID_RANGE_FIRST || (base - UID_RANGE_FIRST) % UID_RANGE_SIZE)
                return;
        uint32_t slot = (base - UID_RANGE_FIRST) / UID_RANGE_SIZE;
        if (slot >= UID_RANGE_SLOTS)
                return;
        if (taken)
                known.taken[slot / 64] |= 1ull << (slot % 64);
        else
                known.taken[slot / 64] &= ~(1ull << (slot % 64));
        known_seen(dir);
}

static int known_read(const char *dir)
{
        known.valid = false;
        if (buf_printf(known.dir, sizeof(known.dir), "%s", dir) < 0)
                return -ENAMETOOLONG;
        memset(known.taken, 0, sizeof(known.taken));
        _cleanup_closedir_ DIR *d = NULL;
        int r = opendir_at(AT_FDCWD, dir, &d);
        if (r < 0)
                return r;
        struct stat st;
        if (fstat(dirfd(d), &st) < 0)
                return -errno;
        known.dev = st.st_dev;
        known.ino = st.st_ino;
        known.mtime = st.st_mtim;
        FOREACH_DIRENT(de, d)
        {
                char *end;
                errno = 0;
                unsigned long b = strtoul(de->d_name, &end, 10);
                if (errno || *end || b < UID_RANGE_FIRST || (b - UID_RANGE_FIRST) % UID_RANGE_SIZE)
                        continue;
                unsigned long slot = (b - UID_RANGE_FIRST) / UID_RANGE_SIZE;
                if (slot < UID_RANGE_SLOTS)
                        known.taken[slot / 64] |= 1ull << (slot % 64);
        }
        known.valid = true;
        return 0;
}

/* Try the slots whose mark equals `marked`, lowest first. -EEXIST: none could be had. */
static int claim_round(const char *dir, const char *owner, bool marked, uint32_t *ret_base)
{
        for (uint32_t w = 0; w < ELEMENTSOF(known.taken); w++) {
                if (!marked && known.taken[w] == UINT64_MAX)
                        continue; /* a word of taken slots: skipped without a syscall */
                for (uint32_t bit = 0; bit < 64; bit++) {
                        uint32_t slot = w * 64 + bit;
                        if (slot >= UID_RANGE_SLOTS)
                                return -EEXIST;
                        if (!!(known.taken[w] & (1ull << bit)) != marked)
                                continue;
                        uint32_t base = UID_RANGE_FIRST + slot * UID_RANGE_SIZE;
                        int r = claim_one(dir, owner, base, false);
                        if (r == -EEXIST) {
                                known.taken[w] |= 1ull << bit; /* another daemon's */
                                continue;
                        }
                        if (r < 0)
                                return r;
                        known.taken[w] |= 1ull << bit;
                        known_seen(dir);
                        *ret_base = base;
                        return 0;
                }
        }
        return -EEXIST;
}

int idrange_claim(const char *dir, const char *owner, uint32_t *ret_base)
{
        int r = mkdir_p_at(AT_FDCWD, dir, 0700);
        if (r < 0)
                return r;
        if (!known_current(dir) && (r = known_read(dir)) < 0)
                return r;
        r = claim_round(dir, owner, false, ret_base);
        if (r != -EEXIST)
                return r;
        /* Every slot we know as free was refused: read the registry again (other daemons
         * may have released some), then try even the ones still marked. */
        if ((r = known_read(dir)) < 0)
                return r;
        r = claim_round(dir, owner, false, ret_base);
        if (r == -EEXIST)
                r = claim_round(dir, owner, true, ret_base);
        return r == -EEXIST ? -ENOSPC : r;
}

int idrange_reclaim(const char *dir, const char *owner, uint32_t base)
{
        int r = mkdir_p_at(AT_FDCWD, dir, 0700);
        if (r >= 0 && (r = claim_one(dir, owner, base, true)) >= 0)
                known_mark(dir, base, true);
        return r;
}

int idrange_release(const char *dir, uint32_t base)
{
        char path[4096];
        int r = slot_path(dir, base, path, sizeof(path));
        if (r < 0)
                return r;
        if (unlink(path) < 0 && errno != ENOENT)
                return -errno;
        known_mark(dir, base, false);
        return 0;
}

int idrange_release_owned(const char *dir, const char *owner, uint32_t base)
{
        char path[4096];
        int r = slot_path(dir, base, path, sizeof(path));
        if (r < 0)
                return r;
        _cleanup_free_ char *cur = NULL;
        r = read_file_at(AT_FDCWD, path, 4096, &cur);
        if (r == -ENOENT)
                return 0;
        if (r < 0)
                return r;
        if (strcmp(cur, owner) != 0)
                return 0;
        /* Between the read and the unlink only this daemon acts on a range it owns. */
        if (unlink(path) < 0 && errno != ENOENT)
                return -errno;
        known_mark(dir, base, false);
        return 0;
}

static int write_map(pid_t pid, const char *file, uint32_t base, uint32_t count)
{
        char path[64], map[64];
        int r;
        if ((r = BUF_PRINTF(path, "/proc/%d/%s", (int)pid, file)) < 0 ||
            (r = BUF_PRINTF(map, "0 %u %u\n", base, count)) < 0)
                return r;
        return write_file_at(AT_FDCWD, path, map);
}

/* The throw-away child only waits to be killed. It shares the daemon's memory: no signal
 * handler may run in it (they are the daemon's), and it never returns or allocates. */
static int userns_holder(void *arg)
{
        (void)arg;
        sigset_t all;
        sigfillset(&all);
        sigprocmask(SIG_BLOCK, &all, NULL);
        for (;;)
                pause();
        return 0;
}

#define HOLDER_STACK_SIZE 16384

int userns_create_nowait(uint32_t base, uint32_t count, int *ret_fd, struct userns_holder *ret)
{
        /* A throw-away child enters a fresh user namespace; we write its maps from outside
         * (as host root no setgroups=deny is needed), keep an fd to the namespace, and kill the
         * child. The namespace lives on as long as the fd or a member does.
         * CLONE_VM: the child shares our memory instead of getting a copy of it. A fork of the
         * daemon copies its page tables and leaves every anonymous page copy-on-write until
         * the child is gone (about 0.5 ms per create on a 15 MB daemon); this child runs only
         * pause() on a stack of its own, so sharing is safe. Not CLONE_VFORK: we must run
         * while it lives. Its stack is its own allocation, freed when it is reaped: a child
         * killed but not yet gone may still be on it while the next one starts. */
        void *stack = malloc(HOLDER_STACK_SIZE);
        if (!stack)
                return -ENOMEM;
        /* Blocked before the clone, so not even a signal arriving before the child's own
         * sigprocmask runs a handler there. */
        sigset_t all, old;
        sigfillset(&all);
        sigprocmask(SIG_SETMASK, &all, &old);
        int pidfd = -EBADF;
        pid_t pid = clone(userns_holder, (char *)stack + HOLDER_STACK_SIZE,
                          CLONE_VM | CLONE_NEWUSER | CLONE_PIDFD | SIGCHLD, NULL, &pidfd);
        int e = errno;
        sigprocmask(SIG_SETMASK, &old, NULL);
        if (pid < 0) {
                free(stack);
                return -e;
        }
        int r = write_map(pid, "uid_map", base, count);
        if (r >= 0)
                r = write_map(pid, "gid_map", base, count);
        int fd = -EBADF;
        if (r >= 0) {
                char path[64];
                r = BUF_PRINTF(path, "/proc/%d/ns/user", (int)pid);
                if (r >= 0 && (fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
                        r = -errno;
        }
        sys_pidfd_send_signal(pidfd, SIGKILL, 0);
        *ret = (struct userns_holder){.pid = pid, .pidfd = pidfd, .stack = stack};
        if (r < 0) {
                userns_holder_reap(ret);
                return r;
        }
        *ret_fd = fd;
        return 0;
}

void userns_holder_reap(struct userns_holder *h)
{
        if (h->pid <= 0)
                return;
        siginfo_t si;
        while (waitid(P_PIDFD, (id_t)h->pidfd, &si, WEXITED) < 0 && errno == EINTR)
                ;
        close(h->pidfd);
        free(h->stack);
        *h = (struct userns_holder){.pidfd = -EBADF};
}

int userns_create(uint32_t base, uint32_t count, int *ret_fd)
{
        struct userns_holder h;
        int r = userns_create_nowait(base, count, ret_fd, &h);
        if (r >= 0)
                userns_holder_reap(&h);
        return r;
}

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

int idrange_claim(const char *dir, const char *owner, uint32_t *ret_base)
{
        int r = mkdir_p_at(AT_FDCWD, dir, 0700);
        if (r < 0)
                return r;
        /* One read of the directory marks the taken slots, so that with N ranges taken a
         * claim costs one listing and one file creation, not N refused creations. The mark is
         * only a hint (another daemon may claim or free meanwhile): O_EXCL decides, and a
         * slot marked taken is tried too if every unmarked one was refused. */
        uint64_t taken[(UID_RANGE_SLOTS + 63) / 64] = {0};
        _cleanup_closedir_ DIR *d = NULL;
        if (opendir_at(AT_FDCWD, dir, &d) >= 0)
                FOREACH_DIRENT(de, d)
                {
                        char *end;
                        errno = 0;
                        unsigned long b = strtoul(de->d_name, &end, 10);
                        if (errno || *end || b < UID_RANGE_FIRST ||
                            (b - UID_RANGE_FIRST) % UID_RANGE_SIZE)
                                continue;
                        unsigned long slot = (b - UID_RANGE_FIRST) / UID_RANGE_SIZE;
                        if (slot < UID_RANGE_SLOTS)
                                taken[slot / 64] |= 1ull << (slot % 64);
                }
        for (uint32_t k = 0; k < 2 * UID_RANGE_SLOTS; k++) {
                uint32_t slot = k % UID_RANGE_SLOTS;
                bool marked = taken[slot / 64] & (1ull << (slot % 64));
                if (marked == (k < UID_RANGE_SLOTS))
                        continue; /* first round: the unmarked ones; second: the marked */
                uint32_t base = UID_RANGE_FIRST + slot * UID_RANGE_SIZE;
                r = claim_one(dir, owner, base, false);
                if (r == 0) {
                        *ret_base = base;
                        return 0;
                }
                if (r != -EEXIST)
                        return r;
        }
        return -ENOSPC;
}

int idrange_reclaim(const char *dir, const char *owner, uint32_t base)
{
        int r = mkdir_p_at(AT_FDCWD, dir, 0700);
        return r < 0 ? r : claim_one(dir, owner, base, true);
}

int idrange_release(const char *dir, uint32_t base)
{
        char path[4096];
        int r = slot_path(dir, base, path, sizeof(path));
        if (r < 0)
                return r;
        return unlink(path) < 0 && errno != ENOENT ? -errno : 0;
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
        return unlink(path) < 0 && errno != ENOENT ? -errno : 0;
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

int userns_create(uint32_t base, uint32_t count, int *ret_fd)
{
        /* A throw-away child enters a fresh user namespace; we write its maps from outside
         * (as host root no setgroups=deny is needed), keep an fd to the namespace, and kill the
         * child. The namespace lives on as long as the fd or a member does.
         * CLONE_VM: the child shares our memory instead of getting a copy of it. A fork of the
         * daemon copies its page tables and leaves every anonymous page copy-on-write until
         * the child is gone (about 0.5 ms per create on a 15 MB daemon); this child runs only
         * pause() on a stack of its own, so sharing is safe. Not CLONE_VFORK: we must run
         * while it lives. */
        static char stack[16384] __attribute__((aligned(16)));
        /* Blocked before the clone, so not even a signal arriving before the child's own
         * sigprocmask runs a handler there. */
        sigset_t all, old;
        sigfillset(&all);
        sigprocmask(SIG_SETMASK, &all, &old);
        pid_t pid =
            clone(userns_holder, stack + sizeof(stack), CLONE_VM | CLONE_NEWUSER | SIGCHLD, NULL);
        int e = errno;
        sigprocmask(SIG_SETMASK, &old, NULL);
        if (pid < 0)
                return -e;
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
        kill(pid, SIGKILL);
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
                ;
        if (r < 0)
                return r;
        *ret_fd = fd;
        return 0;
}

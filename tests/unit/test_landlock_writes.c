/* landlock_restrict_writes (src/lib/landlock.c), the wall tests/fuzz/fuzz_tar.c puts around
 * the archives it applies as root: in a forked child restricted to one directory, every kind
 * of write beneath another directory is refused while reading it still works, and everything
 * beneath the allowed one works. Skipped when the kernel has no Landlock. */
#include "lib/confine.h"
#include "lib/util.h"
#include "unit.h"

#include <sys/stat.h>
#include <sys/wait.h>

static char allowed[64], other[64];

static const char *in(const char *dir, const char *name)
{
        static char bufs[4][128];
        static int next;
        char *b = bufs[next++ % 4];
        snprintf(b, sizeof(bufs[0]), "%s/%s", dir, name);
        return b;
}

static void setup(void)
{
        snprintf(allowed, sizeof(allowed), "/tmp/paddock-unit-llw-XXXXXX");
        snprintf(other, sizeof(other), "/tmp/paddock-unit-llo-XXXXXX");
        if (!mkdtemp(allowed) || !mkdtemp(other)) {
                perror("mkdtemp");
                exit(2);
        }
        int fd = open(in(other, "file"), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0 || write_all(fd, "keep", 4) < 0) {
                perror("other/file");
                exit(2);
        }
        close(fd);
}

static void teardown(void)
{
        rm_rf_at(AT_FDCWD, allowed);
        rm_rf_at(AT_FDCWD, other);
}

static void test_landlock_restrict_writes__only_beneath(void)
{
        setup();
        fflush(stdout);
        fflush(stderr);
        pid_t pid = fork();
        if (pid == 0) {
                const char *dirs[] = {allowed};
                CHECK_EQ_INT(landlock_restrict_writes(dirs, 1), 0);
                /* Beneath the allowed directory: create, write, link, rename, remove. */
                int fd = open(in(allowed, "f"), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
                CHECK(fd >= 0 && write_all(fd, "x", 1) == 0);
                close(fd);
                CHECK(mkdir(in(allowed, "d"), 0755) == 0);
                CHECK(link(in(allowed, "f"), in(allowed, "d/l")) == 0);
                CHECK(rename(in(allowed, "d/l"), in(allowed, "g")) == 0);
                CHECK(symlink(in(other, "file"), in(allowed, "s")) == 0);
                CHECK(unlink(in(allowed, "g")) == 0 && rmdir(in(allowed, "d")) == 0);
                /* Elsewhere: read, but no write of any kind, not even through a symlink. */
                CHECK(open(in(other, "file"), O_RDONLY | O_CLOEXEC) >= 0);
                CHECK(open(in(other, "new"), O_WRONLY | O_CREAT | O_CLOEXEC, 0644) < 0 &&
                      errno == EACCES);
                CHECK(open(in(other, "file"), O_WRONLY | O_CLOEXEC) < 0 && errno == EACCES);
                CHECK(open(in(allowed, "s"), O_WRONLY | O_TRUNC | O_CLOEXEC) < 0 &&
                      errno == EACCES);
                CHECK(truncate(in(other, "file"), 0) < 0 && errno == EACCES);
                CHECK(mkdir(in(other, "d"), 0755) < 0 && errno == EACCES);
                CHECK(unlink(in(other, "file")) < 0 && errno == EACCES);
                CHECK(link(in(other, "file"), in(allowed, "stolen")) < 0);
                CHECK(rename(in(allowed, "f"), in(other, "moved")) < 0);
                CHECK(mknod(in(other, "fifo"), S_IFIFO | 0644, 0) < 0 && errno == EACCES);
                _exit(unit_failures > 0 ? 1 : 0);
        }
        int status = -1;
        CHECK(waitpid(pid, &status, 0) == pid);
        CHECK_EQ_INT(status, 0);
        struct stat st;
        CHECK(stat(in(other, "file"), &st) == 0 && st.st_size == 4 && st.st_nlink == 1);
        CHECK(lstat(in(other, "new"), &st) < 0 && lstat(in(other, "d"), &st) < 0 &&
              lstat(in(other, "moved"), &st) < 0 && lstat(in(other, "fifo"), &st) < 0);
        teardown();
}

static void test_landlock_restrict_writes__missing_dir_refused(void)
{
        setup();
        pid_t pid = fork();
        if (pid == 0) {
                const char *dirs[] = {allowed, "/nonexistent-paddock-dir"};
                _exit(landlock_restrict_writes(dirs, 2) == -ENOENT ? 0 : 1);
        }
        int status = -1;
        CHECK(waitpid(pid, &status, 0) == pid);
        CHECK_EQ_INT(status, 0);
        teardown();
}

int main(void)
{
        if (landlock_abi() <= 0) {
                UNIT_SKIP_ALL("the kernel has no Landlock");
        }
        RUN(test_landlock_restrict_writes__only_beneath);
        RUN(test_landlock_restrict_writes__missing_dir_refused);
        UNIT_EXIT();
}

/* Unit tests of src/lib/btrfs.c, src/lib/loopdev.c and the subvolume side of rm_rf_at: a real
 * btrfs filesystem in a small sparse file, attached with loopdev_attach and mounted inside a
 * private mount namespace of a forked child (so nothing shows on the host and the mount ends
 * with the child). Skipped when mkfs.btrfs or loop devices are missing. */
#include "lib/btrfs.h"
#include "lib/loopdev.h"
#include "lib/storage.h"
#include "lib/util.h"
#include "unit.h"

#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>

static char tmp_root[256];

static int run_in_child(void (*fn)(void))
{
        fflush(NULL);
        pid_t pid = fork();
        if (pid == 0) {
                unit_failures = 0;
                if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) {
                        perror("mount namespace");
                        _exit(99);
                }
                fn();
                fflush(NULL);
                _exit(unit_failures > 100 ? 100 : unit_failures);
        }
        int status;
        waitpid(pid, &status, 0);
        return WIFEXITED(status) ? WEXITSTATUS(status) : 101;
}

/* A 256 MiB btrfs at tmp_root/mnt with simple quotas (or qgroups). */
static int make_fs(char *mnt, size_t len)
{
        char img[300], dev[64];
        snprintf(img, sizeof(img), "%s/pool.img", tmp_root);
        snprintf(mnt, len, "%s/mnt", tmp_root);
        int fd = open(img, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        if (fd < 0 || ftruncate(fd, 256 << 20) < 0)
                return -errno;
        close(fd);
        const char *const mkfs[] = {"/usr/sbin/mkfs.btrfs", "-q", "-f", img, NULL};
        int r = storage_run(mkfs);
        if (r < 0)
                return r;
        int hold = -1;
        if ((r = loopdev_attach(img, dev, sizeof(dev), &hold)) < 0)
                return r;
        char found[64];
        CHECK(loopdev_find(img, found, sizeof(found)) == 0 && strcmp(found, dev) == 0);
        mkdir(mnt, 0700);
        r = mount(dev, mnt, "btrfs", 0, NULL) < 0 ? -errno : 0;
        close(hold); /* the mount holds the device now; autoclear frees it with the mount */
        return r;
}

static void child_subvolumes(void)
{
        char mnt[300];
        int r = make_fs(mnt, sizeof(mnt));
        CHECK_EQ_INT(r, 0);
        if (r < 0)
                return;
        int root = open(mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        CHECK(btrfs_is_btrfs(root) && btrfs_is_subvolume(root));
        CHECK_EQ_INT(btrfs_subvol_create(root, "a"), 0);
        CHECK_EQ_INT(btrfs_subvol_create(root, "../x"), -EINVAL);
        int a = openat(root, "a", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        CHECK(btrfs_is_subvolume(a));
        int f = openat(a, "file", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        CHECK(f >= 0 && write(f, "data", 4) == 4);
        close(f);
        /* a read-only snapshot, and a writable one of that */
        CHECK_EQ_INT(btrfs_snapshot(a, root, "ro", true), 0);
        int ro = openat(root, "ro", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        CHECK(openat(ro, "new", O_WRONLY | O_CREAT | O_CLOEXEC, 0644) < 0 && errno == EROFS);
        int64_t otime = 0;
        CHECK(btrfs_subvol_otime(ro, &otime) == 0 && otime > 0);
        CHECK_EQ_INT(btrfs_snapshot(ro, root, "rw", false), 0);
        int rw = openat(root, "rw", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        char *s = NULL;
        CHECK(read_file_at(rw, "file", 16, &s) >= 0 && s && strcmp(s, "data") == 0);
        free(s);
        /* a plain directory is not a subvolume; snapshotting it fails */
        mkdirat(root, "plain", 0755);
        int plain = openat(root, "plain", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        CHECK(!btrfs_is_subvolume(plain));
        /* rm -rf removes subvolumes, read-only ones and nested ones too */
        CHECK_EQ_INT(btrfs_subvol_create(plain, "nested"), 0);
        int nested = openat(plain, "nested", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        CHECK_EQ_INT(btrfs_subvol_create(nested, "deeper"), 0);
        close(nested);
        close(plain);
        close(ro);
        close(rw);
        CHECK_EQ_INT(rm_rf_at(root, "ro"), 0);
        CHECK_EQ_INT(rm_rf_at(root, "plain"), 0);
        char path[400];
        snprintf(path, sizeof(path), "%s/rw", mnt);
        CHECK_EQ_INT(rm_rf_at(AT_FDCWD, path), 0);
        struct stat st;
        CHECK(fstatat(root, "ro", &st, 0) < 0 && fstatat(root, "plain", &st, 0) < 0 &&
              fstatat(root, "rw", &st, 0) < 0);
        close(a);
        close(root);
        umount(mnt);
}

static void child_quota(void)
{
        char mnt[300];
        int r = make_fs(mnt, sizeof(mnt));
        CHECK_EQ_INT(r, 0);
        if (r < 0)
                return;
        int root = open(mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        CHECK(btrfs_quota_enable(root, true) == 0 || btrfs_quota_enable(root, false) == 0);
        CHECK_EQ_INT(btrfs_quota_enable(root, true) == 0 || btrfs_quota_enable(root, false) == 0,
                     1); /* again: already on */
        CHECK_EQ_INT(btrfs_subvol_create(root, "q"), 0);
        int q = openat(root, "q", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        uint64_t id = 0, used = 0;
        CHECK(btrfs_subvol_id(q, &id) == 0 && id >= 256);
        CHECK_EQ_INT(btrfs_qgroup_limit(q, id, 8 << 20), 0);
        int f = openat(q, "fill", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        static char buf[1 << 20];
        memset(buf, 'x', sizeof(buf));
        int err = 0;
        for (int i = 0; i < 32 && !err; i++)
                if (write(f, buf, sizeof(buf)) < 0 || fsync(f) < 0)
                        err = errno;
        close(f);
        CHECK_EQ_INT(err, EDQUOT);
        CHECK(btrfs_qgroup_usage(q, id, &used) == 0 && used > (4 << 20) && used <= (9 << 20));
        /* no limit: the next write fits again */
        CHECK_EQ_INT(btrfs_qgroup_limit(q, id, 0), 0);
        f = openat(q, "more", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        CHECK(write(f, buf, sizeof(buf)) == (ssize_t)sizeof(buf) && fsync(f) == 0);
        close(f);
        close(q);
        close(root);
        umount(mnt);
}

static bool usable(void)
{
        return access("/usr/sbin/mkfs.btrfs", X_OK) == 0 && access("/dev/loop-control", W_OK) == 0;
}

int main(void)
{
        if (!usable()) {
                UNIT_SKIP_ALL("no mkfs.btrfs or loop devices");
        }
        snprintf(tmp_root, sizeof(tmp_root), "/var/tmp/paddock-unit-XXXXXX");
        if (!mkdtemp(tmp_root))
                return 2;
        int r = run_in_child(child_subvolumes);
        unit_failures += r != 0;
        unit_report("test_storage_btrfs__subvolumes_snapshots_rm_rf", unit_failures - (r != 0));
        rm_rf_at(AT_FDCWD, tmp_root);
        mkdir(tmp_root, 0700);
        r = run_in_child(child_quota);
        unit_failures += r != 0;
        unit_report("test_storage_btrfs__quota_limits_writes", unit_failures - (r != 0));
        rm_rf_at(AT_FDCWD, tmp_root);
        UNIT_EXIT();
}

/* Driver choice and what both drivers share. The driver of a state directory is fixed when
 * it is first used (recorded in R/storage-driver): environments made by one driver cannot be
 * read by the other. A state directory from before drivers existed keeps using "dir". */
#include "lib/btrfs.h"
#include "lib/storage.h"
#include "lib/userns.h"
#include "lib/util.h"

#include <dirent.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>

static bool dir_has_entries(const char *path)
{
        struct stat st;
        if (lstat(path, &st) < 0 || !S_ISDIR(st.st_mode))
                return false;
        _cleanup_closedir_ DIR *d = NULL;
        return opendir_at(AT_FDCWD, path, &d) >= 0 && readdir_no_dot(d);
}

/* The driver recorded in R/storage-driver (path), with " shifted" where that applies. */
static int recorded_driver(const char *path, char *buf, size_t len)
{
        _cleanup_free_ char *s = NULL;
        int r = read_file_at(AT_FDCWD, path, 32, &s);
        if (r < 0)
                return r;
        s[strcspn(s, "\n")] = 0;
        return buf_printf(buf, len, "%s", s) < 0 ? -EBADMSG : 0;
}

int storage_open(const struct storage_config *c, struct storage **ret, char *err, size_t errlen)
{
        char rec[32] = "", images[2200], envs[2200], record[2200];
        /* s->root holds the root: a longer one is refused here, before anything is made. */
        if (strlen(c->root) >= sizeof(((struct storage *)0)->root) ||
            BUF_PRINTF(images, "%s/images", c->root) < 0 ||
            BUF_PRINTF(envs, "%s/envs", c->root) < 0 ||
            BUF_PRINTF(record, "%s/storage-driver", c->root) < 0) {
                snprintf(err, errlen, "%s: path too long", c->root);
                return -ENAMETOOLONG;
        }
        const char *want = c->driver;
        bool recorded = recorded_driver(record, rec, sizeof(rec)) >= 0;
        /* "btrfs shifted": made where idmapped mounts did not work, so its trees are chowned
         * to each environment's ids; that stays so even if a later kernel has them. */
        bool rec_shifted = false;
        char *space = strchr(rec, ' ');
        if (space) {
                rec_shifted = !strcmp(space + 1, "shifted");
                *space = 0;
        }
        if (!recorded && (dir_has_entries(images) || dir_has_entries(envs))) {
                strcpy(rec, "dir"); /* made before storage drivers existed */
                recorded = true;
        }
        if (recorded && want && strcmp(want, rec) != 0) {
                snprintf(err, errlen,
                         "%s uses the %s storage driver (its images and environments cannot be "
                         "moved to %s)",
                         c->root, rec, want);
                return -EINVAL;
        }
        const char *name = recorded ? rec : want ? want : "btrfs";
        const struct storage_ops *ops = !strcmp(name, "btrfs") ? &storage_btrfs_ops
                                        : !strcmp(name, "dir") ? &storage_dir_ops
                                                               : NULL;
        if (!ops) {
                snprintf(err, errlen, "unknown storage driver \"%s\" (btrfs or dir)", name);
                return -EINVAL;
        }
        struct storage *s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        s->ops = ops;
        strcpy(s->root, c->root); /* its length is checked above */
        s->pool_bytes = c->pool_bytes;
        s->image_max_bytes = c->image_max_bytes;
        s->info.driver = ops->name;
        int r = ops->open(s, err, errlen);
        if (r < 0) {
                free(s);
                return r;
        }
        /* A root keeps the ownership model it was made with: trees chowned for one model
         * would show wrong owners under the other. */
        if (recorded)
                s->info.shifted = rec_shifted;
        if (!recorded) {
                _cleanup_close_ int fd =
                    open(record, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
                if (fd < 0 ||
                    dprintf(fd, "%s%s\n", ops->name, s->info.shifted ? " shifted" : "") < 0 ||
                    fsync(fd) < 0) {
                        snprintf(err, errlen, "recording the storage driver: %s", strerror(errno));
                        free(s);
                        return -errno;
                }
        }
        *ret = s;
        return 0;
}

void storage_free(struct storage *s)
{
        free(s);
}

struct storage_info storage_info(struct storage *s)
{
        struct statvfs sv;
        if (statvfs(s->pool[0] ? s->pool : s->root, &sv) == 0) {
                s->info.size = (uint64_t)sv.f_blocks * sv.f_frsize;
                s->info.used = (uint64_t)(sv.f_blocks - sv.f_bfree) * sv.f_frsize;
        }
        return s->info;
}

bool storage_can_snapshot(const struct storage *s)
{
        return s->ops == &storage_btrfs_ops;
}

int storage_run(const char *const *argv)
{
        pid_t pid = fork();
        if (pid < 0)
                return -errno;
        if (pid == 0) {
                int null = open("/dev/null", O_RDWR | O_CLOEXEC);
                if (null >= 0) {
                        dup2(null, 0);
                        dup2(null, 1);
                        dup2(null, 2);
                }
                close_fds_from(3, NULL, 0);
                execv(argv[0], (char *const *)argv);
                _exit(127);
        }
        int status;
        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR)
                        return -errno;
        if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
                return -ENOENT;
        return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -EIO;
}

bool storage_probe_idmap(const char *path)
{
        /* Tests of the refusal below pretend the kernel lacks them; only whoever starts the
         * daemon can set this. */
        if (getenv("PADDOCK_TEST_NO_IDMAP"))
                return false;
        _cleanup_close_ int userns = -EBADF;
        if (userns_create(UID_RANGE_FIRST, 1, &userns) < 0)
                return false;
        _cleanup_close_ int t = (int)syscall(SYS_open_tree, AT_FDCWD, path,
                                             OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
        if (t < 0)
                return false;
        struct mount_attr a = {.attr_set = MOUNT_ATTR_IDMAP, .userns_fd = (uint64_t)userns};
        return syscall(SYS_mount_setattr, t, "", AT_EMPTY_PATH, &a, sizeof(a)) == 0;
}

int storage_created_at(const char *path, int64_t *ret_sec)
{
        _cleanup_close_ int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        if (btrfs_is_subvolume(fd))
                return btrfs_subvol_otime(fd, ret_sec);
        struct stat st;
        if (fstat(fd, &st) < 0)
                return -errno;
        *ret_sec = st.st_mtime;
        return 0;
}

static uint32_t shift_id(uint32_t id, uint32_t from, uint32_t to)
{
        return id >= from && id - from < UID_RANGE_SIZE ? id - from + to : id;
}

static int shift_entry(int at, const char *name, uint32_t from, uint32_t to, dev_t dev,
                       unsigned depth)
{
        struct stat st;
        if (fstatat(at, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return errno == ENOENT ? 0 : -errno;
        if (st.st_dev != dev)
                return 0; /* another filesystem or subvolume: not ours to change */
        uid_t u = shift_id(st.st_uid, from, to);
        gid_t g = shift_id(st.st_gid, from, to);
        if ((u != st.st_uid || g != st.st_gid) &&
            fchownat(at, name, u, g, AT_SYMLINK_NOFOLLOW) < 0)
                return -errno;
        /* chown clears setuid/setgid on files: put them back. */
        if (!S_ISLNK(st.st_mode) && !S_ISDIR(st.st_mode) && (st.st_mode & (S_ISUID | S_ISGID)) &&
            fchmodat(at, name, st.st_mode & 07777, 0) < 0)
                return -errno;
        if (!S_ISDIR(st.st_mode))
                return 0;
        if (depth > 4096)
                return -ELOOP;
        _cleanup_closedir_ DIR *d = NULL;
        int r = opendir_at(at, name, &d);
        if (r < 0)
                return r;
        FOREACH_DIRENT(de, d)
        {
                if ((r = shift_entry(dirfd(d), de->d_name, from, to, dev, depth + 1)) < 0)
                        break;
        }
        return r;
}

int storage_shift_tree(const char *path, uint32_t from, uint32_t to)
{
        if (from == to)
                return 0;
        struct stat st;
        if (lstat(path, &st) < 0)
                return -errno;
        return shift_entry(AT_FDCWD, path, from, to, st.st_dev, 0);
}

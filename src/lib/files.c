#include "lib/files_internal.h"
#include "lib/util.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <grp.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>

/* ------------------------------------------------------------------------------ paths */

int files_path_normalize(const char *in, char *out, size_t outlen)
{
        if (!in || in[0] != '/')
                return -EINVAL;
        size_t len = strlen(in);
        if (len >= FILES_PATH_MAX)
                return -ENAMETOOLONG;
        if (outlen < len + 1) /* the result is never longer than the input */
                return -ENOBUFS;
        size_t o = 0;
        out[o++] = '/';
        for (const char *p = in; *p;) {
                while (*p == '/')
                        p++;
                size_t n = strcspn(p, "/");
                if (n == 0)
                        break;
                if (n > 255)
                        return -ENAMETOOLONG;
                if (!(n == 1 && p[0] == '.')) {
                        if (o > 1)
                                out[o++] = '/';
                        memcpy(out + o, p, n);
                        o += n;
                }
                p += n;
        }
        out[o] = 0;
        return 0;
}

int files_path_split(const char *path, char *parent, size_t parent_len, const char **ret_name)
{
        const char *slash = strrchr(path, '/');
        if (!slash || slash[1] == 0)
                return -EINVAL;
        size_t plen = slash == path ? 1 : (size_t)(slash - path);
        if (plen >= parent_len)
                return -ENAMETOOLONG;
        memcpy(parent, path, plen);
        parent[plen] = 0;
        *ret_name = slash + 1;
        return 0;
}

/* Resolve path (absolute or relative, it makes no difference) inside root_fd. Symlinks are
 * followed, but as if root_fd were "/" (".." stops there, absolute targets start there), and
 * /proc magic links, which could point anywhere, are refused (ELOOP). */
static int open_in_root(int root_fd, const char *path, int flags, mode_t mode)
{
        struct open_how how = {
            .flags = (uint64_t)(flags | O_CLOEXEC),
            .mode = (flags & O_CREAT) ? mode : 0,
            .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
        };
        /* EAGAIN: a concurrent rename or mount raced the ".." checks; the kernel asks us to
         * retry rather than risk an escape. */
        for (int i = 0; i < 64; i++) {
                int fd = (int)syscall(SYS_openat2, root_fd, path, &how, sizeof(how));
                if (fd >= 0)
                        return fd;
                if (errno != EAGAIN)
                        return -errno;
        }
        return -EAGAIN;
}

/* One component below dfd, following no symlink at all (a name from readdir). */
int files_open_below(int dfd, const char *name, int flags)
{
        struct open_how how = {
            .flags = (uint64_t)(flags | O_CLOEXEC | O_NOFOLLOW),
            .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
        };
        int fd = (int)syscall(SYS_openat2, dfd, name, &how, sizeof(how));
        return fd < 0 ? -errno : fd;
}

/* ------------------------------------------------------------------------------ reports */

int files_report(int fd, uint32_t phase, int err, uint64_t value, uint64_t count, const char *fmt,
                 ...)
{
        struct files_status st = {.err = err, .phase = phase, .value = value, .count = count};
        if (fmt) {
                va_list ap;
                va_start(ap, fmt);
                vsnprintf(st.msg, sizeof(st.msg), fmt, ap);
                va_end(ap);
        }
        (void)write_all(fd, &st, sizeof(st));
        return err;
}

/* "path: reason" for the common case. */
int files_fail_path(int fd, int err, const char *path)
{
        return files_fail(fd, err, "%s: %s", path, strerror(-err));
}

/* ------------------------------------------------------------------------------ records */

const char *files_type_name(uint32_t type)
{
        static const char *const names[] = {"file", "dir", "symlink", "other"};
        return type < ELEMENTSOF(names) ? names[type] : "other";
}

static uint32_t type_of(mode_t m)
{
        return S_ISREG(m)   ? FILES_T_FILE
               : S_ISDIR(m) ? FILES_T_DIR
               : S_ISLNK(m) ? FILES_T_SYMLINK
                            : FILES_T_OTHER;
}

static int send_entry(int dfd, const char *name, const struct stat *st, const char *target,
                      size_t target_len)
{
        size_t nlen = strnlen(name, 256);
        if (nlen > 255 || target_len >= FILES_PATH_MAX)
                return -ENAMETOOLONG;
        struct files_entry e = {
            .type = type_of(st->st_mode),
            .mode = (uint32_t)(st->st_mode & 07777),
            .size = (uint64_t)st->st_size,
            .mtime = (int64_t)st->st_mtim.tv_sec,
            .uid = (uint32_t)st->st_uid,
            .gid = (uint32_t)st->st_gid,
            .name_len = (uint32_t)nlen,
            .target_len = (uint32_t)target_len,
        };
        char buf[sizeof(e) + 256 + FILES_PATH_MAX];
        memcpy(buf, &e, sizeof(e));
        memcpy(buf + sizeof(e), name, nlen);
        if (target_len)
                memcpy(buf + sizeof(e) + nlen, target, target_len);
        return write_all(dfd, buf, sizeof(e) + nlen + target_len);
}

int files_entry_next(const void *buf, size_t len, size_t *off, struct files_entry *ret,
                     const char **ret_name, const char **ret_target)
{
        if (*off >= len)
                return 0;
        struct files_entry e;
        if (len - *off < sizeof(e))
                return -EBADMSG;
        memcpy(&e, (const char *)buf + *off, sizeof(e));
        if (e.type > FILES_T_OTHER || e.name_len == 0 || e.name_len > 255 ||
            e.target_len >= FILES_PATH_MAX ||
            len - *off - sizeof(e) < (size_t)e.name_len + e.target_len)
                return -EBADMSG;
        const char *p = (const char *)buf + *off + sizeof(e);
        *ret = e;
        *ret_name = p;
        *ret_target = p + e.name_len;
        *off += sizeof(e) + e.name_len + e.target_len;
        return 1;
}

/* ------------------------------------------------------------------------------ owners */

static bool parse_id(const char *s, size_t len, unsigned *ret)
{
        if (len == 0 || len > 5 || strspn(s, "0123456789") < len)
                return false;
        unsigned v = 0;
        for (size_t i = 0; i < len; i++)
                v = v * 10 + (unsigned)(s[i] - '0');
        if (v > 65535)
                return false;
        *ret = v;
        return true;
}

/* Look a user (name or number) up in the environment's /etc/passwd, read through the same safe
 * resolution as everything else and bounded to 64 KiB. */
static int passwd_find(int root_fd, const char *user, size_t ulen, struct files_owner *ret)
{
        _cleanup_close_ int fd =
            open_in_root(root_fd, "/etc/passwd", O_RDONLY | O_NONBLOCK | O_NOCTTY, 0);
        if (fd < 0)
                return fd;
        struct stat st;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode))
                return -EINVAL;
        _cleanup_free_ char *buf = malloc(65536);
        if (!buf)
                return -ENOMEM;
        ssize_t n = read_full(fd, buf, 65535);
        if (n < 0)
                return (int)n;
        buf[n] = 0;
        unsigned want = 0;
        bool by_id = parse_id(user, ulen, &want);
        for (char *line = buf, *next; line && *line; line = next) {
                next = strchr(line, '\n');
                if (next)
                        *next++ = 0;
                else if ((size_t)n == 65535)
                        break; /* cut by the limit: not a whole line */
                /* name:password:uid:gid:... */
                char *f[4];
                int nf = 0;
                for (char *p = line; p && nf < 4;) {
                        f[nf++] = p;
                        p = strchr(p, ':');
                        if (p)
                                *p++ = 0;
                }
                unsigned uid, gid;
                if (nf < 4 || !parse_id(f[2], strlen(f[2]), &uid) ||
                    !parse_id(f[3], strlen(f[3]), &gid))
                        continue;
                if (by_id ? uid != want : (strlen(f[0]) != ulen || memcmp(f[0], user, ulen)))
                        continue;
                *ret = (struct files_owner){.uid = uid, .gid = gid};
                return 0;
        }
        return -ENOENT;
}

/* NULL/"" = root; "name", "uid" (gid from passwd, else the same number), "name:gid", "uid:gid"
 * -- the forms exec accepts. */
int files_resolve_owner(int root_fd, const char *user, struct files_owner *ret)
{
        if (!user || !*user) {
                *ret = (struct files_owner){0, 0};
                return 0;
        }
        const char *colon = strchr(user, ':');
        size_t ulen = colon ? (size_t)(colon - user) : strlen(user);
        struct files_owner o;
        unsigned id;
        if (ulen == 0)
                return -EINVAL;
        int r = passwd_find(root_fd, user, ulen, &o);
        if (r < 0) {
                if (!parse_id(user, ulen, &id))
                        return -ENOENT;
                o = (struct files_owner){id, id};
        }
        if (colon) {
                if (!parse_id(colon + 1, strlen(colon + 1), &id))
                        return -EINVAL;
                o.gid = id;
        }
        *ret = o;
        return 0;
}

int files_fail_owner(int sfd, int r, const char *user)
{
        return files_fail(sfd, r, "user %s: %s", user,
                          r == -ENOENT ? "not in the environment's /etc/passwd" : strerror(-r));
}

/* The helper is uid 0: only other owners need a chown. The chmod comes after it (chown clears
 * set-id bits). */
static int set_owner_mode(int fd, const struct files_owner *o, int mode)
{
        if ((o->uid || o->gid) && fchown(fd, o->uid, o->gid) < 0)
                return -errno;
        if (mode >= 0 && fchmod(fd, (mode_t)mode) < 0)
                return -errno;
        return 0;
}

/* mkdir -p of a normalized path inside root_fd. Missing components are created one at a time
 * below their parent (which was itself resolved inside the root), owned by o, mode 0755 except
 * the last (last_mode). Returns an O_RDONLY fd of the directory. */
int files_ensure_dir(int root_fd, const char *path, const struct files_owner *o, int last_mode)
{
        int fd = open_in_root(root_fd, path, O_RDONLY | O_DIRECTORY, 0);
        if (fd != -ENOENT)
                return fd;
        /* ends[i]: length of the prefix holding the first i+1 components. */
        uint16_t ends[FILES_PATH_MAX / 2];
        size_t n = 0, len = strlen(path);
        for (size_t i = 1; i <= len; i++)
                if (i == len || path[i] == '/')
                        ends[n++] = (uint16_t)i;
        char prefix[FILES_PATH_MAX];
        /* The deepest prefix that exists ("/" always does). */
        size_t have = n;
        while (have > 0) {
                memcpy(prefix, path, ends[have - 1]);
                prefix[ends[have - 1]] = 0;
                fd = open_in_root(root_fd, prefix, O_PATH | O_DIRECTORY, 0);
                if (fd >= 0) {
                        close(fd);
                        break;
                }
                if (fd != -ENOENT)
                        return fd;
                have--;
        }
        for (size_t i = have; i < n; i++) {
                size_t start = i == 0 ? 1 : ends[i - 1] + 1;
                size_t plen = i == 0 ? 1 : ends[i - 1];
                memcpy(prefix, path, plen);
                prefix[plen] = 0;
                char name[256];
                memcpy(name, path + start, ends[i] - start);
                name[ends[i] - start] = 0;
                if (!strcmp(name, ".."))
                        continue; /* resolved when the next prefix is opened */
                _cleanup_close_ int pfd = open_in_root(root_fd, prefix, O_PATH | O_DIRECTORY, 0);
                if (pfd < 0)
                        return pfd;
                int mode = i == n - 1 && last_mode >= 0 ? last_mode : 0755;
                if (mkdirat(pfd, name, (mode_t)mode) < 0) {
                        if (errno != EEXIST)
                                return -errno;
                        continue;
                }
                _cleanup_close_ int dfd = files_open_below(pfd, name, O_RDONLY | O_DIRECTORY);
                if (dfd < 0)
                        return dfd;
                int r = set_owner_mode(dfd, o, mode);
                if (r < 0)
                        return r;
        }
        return open_in_root(root_fd, path, O_RDONLY | O_DIRECTORY, 0);
}

/* in -> out until EOF or max bytes. sendfile keeps the bytes in the kernel (file to pipe, file
 * to file); what cannot be spliced (some /proc files) goes through a buffer. in_off: NULL to
 * use and move in's file offset, else read from *in_off without touching the offset. */
/* The gzip stream of in (from its start), decompressed into out: at most FILES_MAX_WRITE bytes
 * (-EFBIG beyond), -EINVAL for data that is not gzip. */
static int gunzip_fd(int in, int out, uint64_t *ret_copied)
{
        if (lseek(in, 0, SEEK_SET) < 0)
                return -errno;
        struct archive *a = archive_read_new();
        if (!a)
                return -ENOMEM;
        archive_read_support_filter_gzip(a);
        archive_read_support_format_raw(a);
        struct archive_entry *ent;
        int r = -EINVAL;
        uint64_t total = 0;
        _cleanup_free_ char *buf = malloc(FILES_COPY_BUF);
        if (!buf)
                r = -ENOMEM;
        else if (archive_read_open_fd(a, in, 65536) == ARCHIVE_OK &&
                 archive_read_next_header(a, &ent) == ARCHIVE_OK &&
                 archive_filter_code(a, 0) == ARCHIVE_FILTER_GZIP) {
                for (r = 0;;) {
                        la_ssize_t n = archive_read_data(a, buf, FILES_COPY_BUF);
                        if (n == 0)
                                break;
                        if (n < 0) {
                                r = -EINVAL;
                                break;
                        }
                        total += (uint64_t)n;
                        if (total > FILES_MAX_WRITE) {
                                r = -EFBIG;
                                break;
                        }
                        if ((r = write_all(out, buf, (size_t)n)) < 0)
                                break;
                }
        }
        archive_read_free(a);
        if (r >= 0)
                *ret_copied = total;
        return r;
}

static int copy_fd(int in, off_t *in_off, int out, uint64_t max, uint64_t *ret_copied)
{
        _cleanup_free_ char *buf = NULL;
        bool splice_ok = true;
        uint64_t total = 0;
        int r = 0;
        while (total < max) {
                uint64_t left = max - total;
                ssize_t n;
                if (splice_ok) {
                        n = sendfile(out, in, in_off, left < (1u << 20) ? (size_t)left : 1u << 20);
                        if (n < 0 && (errno == EINVAL || errno == ENOSYS) && total == 0) {
                                splice_ok = false;
                                continue;
                        }
                } else {
                        if (!buf && !(buf = malloc(FILES_COPY_BUF)))
                                return -ENOMEM;
                        size_t want = left < FILES_COPY_BUF ? (size_t)left : FILES_COPY_BUF;
                        n = in_off ? pread(in, buf, want, *in_off) : read(in, buf, want);
                        if (n > 0 && (r = write_all(out, buf, (size_t)n)) < 0)
                                break;
                        if (n > 0 && in_off)
                                *in_off += n;
                }
                if (n == 0)
                        break;
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0) {
                        r = -errno;
                        break;
                }
                total += (uint64_t)n;
        }
        *ret_copied = total;
        return r;
}

/* ------------------------------------------------------------------------------ operations */

static int op_read(int root_fd, const struct files_request *rq, int sfd, int dfd)
{
        _cleanup_close_ int fd =
            open_in_root(root_fd, rq->path, O_RDONLY | O_NONBLOCK | O_NOCTTY, 0);
        if (fd < 0)
                return files_fail_path(sfd, fd, rq->path);
        struct stat st;
        if (fstat(fd, &st) < 0)
                return files_fail_path(sfd, -errno, rq->path);
        if (S_ISDIR(st.st_mode))
                return files_fail(sfd, -EISDIR, "%s: is a directory (use files/list or archive)",
                                  rq->path);
        if (!S_ISREG(st.st_mode))
                return files_fail(sfd, -EINVAL, "%s: not a regular file (%s)", rq->path,
                                  S_ISFIFO(st.st_mode)   ? "a FIFO"
                                  : S_ISSOCK(st.st_mode) ? "a socket"
                                  : S_ISLNK(st.st_mode)  ? "a symlink"
                                                         : "a device");
        if ((uint64_t)st.st_size > rq->max_bytes)
                return files_fail(sfd, -EFBIG, "%s: %llu bytes, more than the limit of %llu",
                                  rq->path, (unsigned long long)st.st_size,
                                  (unsigned long long)rq->max_bytes);
        (void)fcntl(fd, F_SETFL, 0); /* O_NONBLOCK only guarded the open */
        files_report(sfd, FILES_READY, 0, (uint64_t)st.st_size, 0, NULL);
        /* Up to EOF (proc and sys files report size 0), never past the limit. */
        uint64_t total = 0;
        int r = copy_fd(fd, NULL, dfd, rq->max_bytes, &total);
        if (r < 0)
                return files_fail(sfd, r, "%s: copying: %s", rq->path, strerror(-r));
        return files_report(sfd, FILES_DONE, 0, total, 0, NULL);
}

/* Atomic replace: a temporary file in the same directory, fsync, rename over the name. A
 * symlink at the name is replaced, not written through. */
static int op_write(int root_fd, const struct files_request *rq, int sfd)
{
        char parent[FILES_PATH_MAX];
        const char *name;
        int r = files_path_split(rq->path, parent, sizeof(parent), &name);
        if (r < 0 || !strcmp(name, ".."))
                return files_fail(sfd, -EINVAL, "%s: not a file name", rq->path);
        struct stat up;
        if (fstat(rq->upload_fd, &up) < 0)
                return files_fail(sfd, -errno, "upload: %s", strerror(errno));
        if (rq->upload_range && (rq->upload_off > (uint64_t)up.st_size ||
                                 rq->upload_len > (uint64_t)up.st_size - rq->upload_off))
                return files_fail(sfd, -EINVAL, "upload: a range beyond its end");
        if ((rq->upload_range ? rq->upload_len : (uint64_t)up.st_size) > FILES_MAX_WRITE)
                return files_fail(
                    sfd, -EFBIG, "upload of %llu bytes is larger than the limit of %llu",
                    (unsigned long long)up.st_size, (unsigned long long)FILES_MAX_WRITE);
        struct files_owner o;
        if ((r = files_resolve_owner(root_fd, rq->user, &o)) < 0)
                return files_fail_owner(sfd, r, rq->user);
        _cleanup_close_ int pfd = rq->parents
                                      ? files_ensure_dir(root_fd, parent, &o, -1)
                                      : open_in_root(root_fd, parent, O_RDONLY | O_DIRECTORY, 0);
        if (pfd < 0)
                return files_fail_path(sfd, pfd, parent);
        int mode = rq->mode;
        struct stat old;
        if (fstatat(pfd, name, &old, AT_SYMLINK_NOFOLLOW) == 0) {
                if (S_ISDIR(old.st_mode))
                        return files_fail(sfd, -EISDIR, "%s: is a directory", rq->path);
                if (mode < 0 && S_ISREG(old.st_mode))
                        mode = (int)(old.st_mode & 07777);
        }
        if (mode < 0)
                mode = 0644;
        char tmp[64];
        _cleanup_close_ int fd = -EBADF;
        for (int i = 0; fd < 0 && i < 8; i++) {
                uint64_t rnd = 0;
                if (getrandom(&rnd, sizeof(rnd), 0) != sizeof(rnd))
                        rnd = now_ms() + (uint64_t)i;
                snprintf(tmp, sizeof(tmp), ".paddock-upload-%016llx", (unsigned long long)rnd);
                fd = openat(pfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
                if (fd < 0 && errno != EEXIST)
                        break;
        }
        if (fd < 0)
                return files_fail_path(sfd, -errno, rq->path);
        off_t off = rq->upload_range ? (off_t)rq->upload_off : 0;
        uint64_t copied = 0, want = rq->upload_range ? rq->upload_len : (uint64_t)up.st_size;
        if (rq->gunzip) {
                r = gunzip_fd(rq->upload_fd, fd, &copied);
                want = copied;
        } else {
                r = copy_fd(rq->upload_fd, &off, fd, want, &copied);
        }
        if (r >= 0 && copied != want)
                r = -EIO; /* the spool file is ours and does not shrink */
        if (r >= 0)
                r = set_owner_mode(fd, &o, mode);
        if (r >= 0 && fsync(fd) < 0)
                r = -errno;
        if (r >= 0 && renameat(pfd, tmp, pfd, name) < 0)
                r = -errno;
        if (r < 0) {
                unlinkat(pfd, tmp, 0);
                return files_fail_path(sfd, r, rq->path);
        }
        (void)fsync(pfd);
        return files_report(sfd, FILES_DONE, 0, copied, 0, NULL);
}

static int op_remove(int root_fd, const struct files_request *rq, int sfd)
{
        char parent[FILES_PATH_MAX];
        const char *name;
        if (!strcmp(rq->path, "/"))
                return files_fail(sfd, -EBUSY, "/: the root directory cannot be removed");
        int r = files_path_split(rq->path, parent, sizeof(parent), &name);
        if (r < 0 || !strcmp(name, ".."))
                return files_fail(sfd, -EINVAL, "%s: not a file name", rq->path);
        _cleanup_close_ int pfd = open_in_root(root_fd, parent, O_PATH | O_DIRECTORY, 0);
        if (pfd < 0)
                return files_fail_path(sfd, pfd, parent);
        struct stat st;
        if (fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return files_fail_path(sfd, -errno, rq->path);
        if (!S_ISDIR(st.st_mode))
                r = unlinkat(pfd, name, 0) < 0 ? -errno : 0;
        else if (rq->recursive)
                r = rm_rf_at(pfd, name);
        else
                r = unlinkat(pfd, name, AT_REMOVEDIR) < 0 ? -errno : 0;
        if (r == -ENOTEMPTY || r == -EEXIST)
                return files_fail(sfd, -ENOTEMPTY,
                                  "%s: directory not empty (recursive=1 removes it "
                                  "with its contents)",
                                  rq->path);
        if (r == -EBUSY)
                return files_fail(sfd, r, "%s: a mount point (or holds one): cannot be removed",
                                  rq->path);
        if (r < 0)
                return files_fail_path(sfd, r, rq->path);
        return files_report(sfd, FILES_DONE, 0, 0, 0, NULL);
}

static int op_mkdir(int root_fd, const struct files_request *rq, int sfd)
{
        char parent[FILES_PATH_MAX];
        const char *name;
        struct files_owner o;
        int r = files_resolve_owner(root_fd, rq->user, &o);
        if (r < 0)
                return files_fail_owner(sfd, r, rq->user);
        int mode = rq->mode >= 0 ? rq->mode : 0755;
        if (rq->parents) {
                _cleanup_close_ int fd = files_ensure_dir(root_fd, rq->path, &o, mode);
                if (fd < 0)
                        return files_fail_path(sfd, fd, rq->path);
                return files_report(sfd, FILES_DONE, 0, 0, 0, NULL);
        }
        r = files_path_split(rq->path, parent, sizeof(parent), &name);
        if (r < 0 || !strcmp(name, ".."))
                return files_fail(sfd, -EEXIST, "%s: exists", rq->path);
        _cleanup_close_ int pfd = open_in_root(root_fd, parent, O_PATH | O_DIRECTORY, 0);
        if (pfd < 0)
                return files_fail_path(sfd, pfd, parent);
        if (mkdirat(pfd, name, (mode_t)mode) < 0)
                return files_fail_path(sfd, -errno, rq->path);
        _cleanup_close_ int fd = files_open_below(pfd, name, O_RDONLY | O_DIRECTORY);
        if (fd < 0 || (r = set_owner_mode(fd, &o, mode)) < 0)
                return files_fail_path(sfd, fd < 0 ? fd : r, rq->path);
        return files_report(sfd, FILES_DONE, 0, 0, 0, NULL);
}

static int op_move(int root_fd, const struct files_request *rq, int sfd)
{
        char fparent[FILES_PATH_MAX], tparent[FILES_PATH_MAX];
        const char *fname, *tname;
        if (files_path_split(rq->path, fparent, sizeof(fparent), &fname) < 0 ||
            !strcmp(fname, ".."))
                return files_fail(sfd, -EINVAL, "from: %s: not a file name", rq->path);
        if (files_path_split(rq->to, tparent, sizeof(tparent), &tname) < 0 || !strcmp(tname, ".."))
                return files_fail(sfd, -EINVAL, "to: %s: not a file name", rq->to);
        _cleanup_close_ int fpfd = open_in_root(root_fd, fparent, O_PATH | O_DIRECTORY, 0);
        if (fpfd < 0)
                return files_fail_path(sfd, fpfd, fparent);
        _cleanup_close_ int tpfd = open_in_root(root_fd, tparent, O_PATH | O_DIRECTORY, 0);
        if (tpfd < 0)
                return files_fail_path(sfd, tpfd, tparent);
        if (renameat2(fpfd, fname, tpfd, tname, rq->overwrite ? 0 : RENAME_NOREPLACE) < 0) {
                int r = -errno;
                if (r == -EEXIST)
                        return files_fail(sfd, r, "%s: exists (overwrite=true replaces it)",
                                          rq->to);
                if (r == -EXDEV)
                        return files_fail(sfd, r, "%s -> %s: not on the same file system", rq->path,
                                          rq->to);
                return files_fail(sfd, r, "%s -> %s: %s", rq->path, rq->to, strerror(-r));
        }
        return files_report(sfd, FILES_DONE, 0, 0, 0, NULL);
}

static int op_list(int root_fd, const struct files_request *rq, int sfd, int dfd)
{
        int fd = open_in_root(root_fd, rq->path, O_RDONLY | O_DIRECTORY, 0);
        if (fd < 0)
                return files_fail_path(sfd, fd, rq->path);
        _cleanup_closedir_ DIR *d = NULL;
        int r = opendir_fd(fd, &d);
        if (r < 0)
                return files_fail_path(sfd, r, rq->path);
        uint64_t n = 0;
        bool truncated = false;
        FOREACH_DIRENT(de, d)
        {
                if (n == FILES_LIST_MAX) {
                        truncated = true;
                        break;
                }
                struct stat st;
                if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        continue; /* gone meanwhile */
                if ((r = send_entry(dfd, de->d_name, &st, NULL, 0)) < 0)
                        break;
                n++;
        }
        if (r < 0)
                return files_fail(sfd, r, "%s: sending: %s", rq->path, strerror(-r));
        return files_report(sfd, FILES_DONE, 0, n, truncated, NULL);
}

static int op_stat(int root_fd, const struct files_request *rq, int sfd, int dfd)
{
        /* O_PATH|O_NOFOLLOW: a symlink (even a magic one) is described, not followed. */
        _cleanup_close_ int fd = open_in_root(root_fd, rq->path, O_PATH | O_NOFOLLOW, 0);
        if (fd < 0)
                return files_fail_path(sfd, fd, rq->path);
        struct stat st;
        if (fstat(fd, &st) < 0)
                return files_fail_path(sfd, -errno, rq->path);
        char target[FILES_PATH_MAX];
        ssize_t tlen = 0;
        if (S_ISLNK(st.st_mode)) {
                tlen = readlinkat(fd, "", target, sizeof(target) - 1);
                if (tlen < 0)
                        return files_fail_path(sfd, -errno, rq->path);
        }
        const char *slash = strrchr(rq->path, '/');
        const char *name = slash && slash[1] ? slash + 1 : "/";
        int r = send_entry(dfd, name, &st, target, (size_t)tlen);
        if (r < 0)
                return files_fail(sfd, r, "%s: sending: %s", rq->path, strerror(-r));
        return files_report(sfd, FILES_DONE, 0, 1, 0, NULL);
}

/* ------------------------------------------------------------------------------ watch */

/* The directory is resolved here, like every other path; files_watch.c does the rest. */
static int op_watch(int root_fd, const struct files_request *rq, int sfd, int dfd)
{
        _cleanup_close_ int fd = open_in_root(root_fd, rq->path, O_PATH | O_DIRECTORY, 0);
        if (fd < 0)
                return files_fail_path(sfd, fd, rq->path);
        return files_watch_run(root_fd, TAKE_FD(fd), rq, sfd, dfd);
}

/* Kernel interfaces, not files: their contents are not archived (the directory itself is). */
bool files_is_pseudo_fs(int fd)
{
        struct statfs sf;
        if (fstatfs(fd, &sf) < 0)
                return true;
        switch ((unsigned long)sf.f_type) {
        case PROC_SUPER_MAGIC:
        case SYSFS_MAGIC:
        case DEVPTS_SUPER_MAGIC:
        case CGROUP_SUPER_MAGIC:
        case CGROUP2_SUPER_MAGIC:
        case DEBUGFS_MAGIC:
        case TRACEFS_MAGIC:
        case SECURITYFS_MAGIC:
        case BPF_FS_MAGIC:
        case NSFS_MAGIC:
        case 0x19800202: /* mqueue */
        case 0x65735543: /* fusectl */
        case 0x6165676c: /* pstore */
        case 0x62656570: /* configfs */
        case 0x42494e4d: /* binfmt_misc */
                return true;
        default:
                return false;
        }
}

int files_open_in_root(int root_fd, const char *path, int flags)
{
        return open_in_root(root_fd, path, flags, 0);
}

/* ------------------------------------------------------------------------------ dispatch */

int files_run(int root_fd, const struct files_request *rq, int status_fd, int data_fd)
{
        switch (rq->op) {
        case FILES_READ:
                return op_read(root_fd, rq, status_fd, data_fd);
        case FILES_WRITE:
                return op_write(root_fd, rq, status_fd);
        case FILES_REMOVE:
                return op_remove(root_fd, rq, status_fd);
        case FILES_LIST:
                return op_list(root_fd, rq, status_fd, data_fd);
        case FILES_STAT:
                return op_stat(root_fd, rq, status_fd, data_fd);
        case FILES_MKDIR:
                return op_mkdir(root_fd, rq, status_fd);
        case FILES_MOVE:
                return op_move(root_fd, rq, status_fd);
        case FILES_ARCHIVE_OUT:
                return files_op_archive_out(root_fd, rq, status_fd, data_fd);
        case FILES_ARCHIVE_IN:
                return files_op_archive_in(root_fd, rq, status_fd);
        case FILES_WATCH:
                return op_watch(root_fd, rq, status_fd, data_fd);
        }
        return files_fail(status_fd, -EINVAL, "unknown operation");
}

/* ------------------------------------------------------------------------------ the helper */

static _Noreturn void helper_die(int sfd, int err, const char *what)
{
        files_fail(sfd, err, "%s: %s", what, strerror(-err));
        _exit(1);
}

/* Forked from the daemon: host root, every daemon fd still open. The order matters: the cgroup
 * first (its fds are among the daemon's), then the fd sweep, then the namespaces (mount first,
 * which needs host privilege; user last), then the credentials, and only then any path. */
static _Noreturn void helper_main(const struct files_target *t, const struct files_request *rq,
                                  pid_t parent, int sfd, int dfd, bool placed)
{
        int r;
        prctl(PR_SET_DUMPABLE, 0);
        if (t->cgroups &&
            (r = cgroup_env_join(t->cgroups, t->cgroup_name, t->cgroup_sub, placed)) < 0)
                helper_die(sfd, r, "join the environment's cgroup");
        int keep[] = {t->env_pidfd, sfd, dfd, rq->upload_fd};
        close_fds_from(3, keep, ELEMENTSOF(keep));
        if (setns(t->env_pidfd, CLONE_NEWNS) < 0)
                helper_die(sfd, -errno, "enter the mount namespace");
        if (setns(t->env_pidfd, CLONE_NEWUSER) < 0)
                helper_die(sfd, -errno, "enter the user namespace");
        close(t->env_pidfd);
        if (setresgid(0, 0, 0) < 0 || setgroups(0, NULL) < 0 || setresuid(0, 0, 0) < 0)
                helper_die(sfd, -errno, "become the environment's root");
        /* A change of credentials resets both; the daemon may have died before this point. */
        prctl(PR_SET_DUMPABLE, 0);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
                _exit(1);
        umask(0);
        /* setns(CLONE_NEWNS) made the environment's root our root and cwd. */
        int root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (root < 0 || chdir("/") < 0)
                helper_die(sfd, -errno, "open the root directory");
        r = files_run(root, rq, sfd, dfd);
        _exit(r < 0 ? 1 : 0);
}

static bool has_data_pipe(enum files_op op)
{
        return op == FILES_READ || op == FILES_LIST || op == FILES_STAT ||
               op == FILES_ARCHIVE_OUT || op == FILES_WATCH;
}

int files_spawn(const struct files_target *t, const struct files_request *rq,
                struct files_child *ret)
{
        int sp[2] = {-EBADF, -EBADF}, dp[2] = {-EBADF, -EBADF};
        if (pipe2(sp, O_CLOEXEC) < 0)
                return -errno;
        if (has_data_pipe(rq->op) && pipe2(dp, O_CLOEXEC) < 0) {
                int r = -errno;
                close(sp[0]);
                close(sp[1]);
                return r;
        }
        /* 1 MiB lets the helper run ahead of the daemon's 64 KiB pulls (best effort). */
        if (dp[1] >= 0)
                (void)fcntl(dp[1], F_SETPIPE_SZ, 1 << 20);
        pid_t parent = getpid();
        bool placed = false;
        pid_t pid = t->cgroups ? cgroup_env_clone(t->cgroups, t->cgroup_name, t->cgroup_sub, 0,
                                                  NULL, &placed)
                               : fork();
        if (pid == 0) {
                close(sp[0]);
                if (dp[0] >= 0)
                        close(dp[0]);
                helper_main(t, rq, parent, sp[1], dp[1], placed);
        }
        int r = pid < 0 ? (t->cgroups ? pid : -errno) : 0;
        close(sp[1]);
        if (dp[1] >= 0)
                close(dp[1]);
        int pidfd = pid > 0 ? sys_pidfd_open(pid, 0) : -EBADF;
        if (r >= 0 && pidfd < 0) {
                r = pidfd;
                kill(pid, SIGKILL);
                while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
                        ;
        }
        if (r < 0) {
                close(sp[0]);
                if (dp[0] >= 0)
                        close(dp[0]);
                return r;
        }
        *ret = (struct files_child){.pidfd = pidfd, .status_fd = sp[0], .data_fd = dp[0]};
        return 0;
}

bool files_status_read(int fd, struct files_status_reader *sr,
                       void (*take)(void *ctx, const struct files_status *st), void *ctx)
{
        const size_t want = sizeof(struct files_status);
        for (;;) {
                ssize_t n = read(fd, sr->buf + sr->len, want - sr->len);
                if (n > 0) {
                        sr->len += (size_t)n;
                        if (sr->len == want) {
                                struct files_status st;
                                memcpy(&st, sr->buf, sizeof(st));
                                sr->len = 0;
                                take(ctx, &st);
                        }
                        continue;
                }
                if (n < 0 && errno == EINTR)
                        continue;
                return n < 0 && errno == EAGAIN;
        }
}

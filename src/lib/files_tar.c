/* files_tar.c: FILES_ARCHIVE_OUT (a pax tar stream of a directory) and FILES_ARCHIVE_IN
 * (extracting an uploaded tar), both run in the files helper like every other operation of
 * files.c: every path resolved below the environment's root (see files.h). */
#include "lib/files_internal.h"
#include "lib/util.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <sys/stat.h>

/* ------------------------------------------------------------------------------ tar out */

struct walk {
        struct archive *a;
        uint64_t bytes, entries;
        char apath[FILES_PATH_MAX]; /* the name of the entry being written */
        char link[FILES_PATH_MAX];
        char *buf;
        char msg[200];
};

static int walk_fail(struct walk *w, int err, const char *what)
{
        snprintf(w->msg, sizeof(w->msg), "%.120s: %s", w->apath, what ? what : strerror(-err));
        return err;
}

static int put_header(struct walk *w, const struct stat *st, const char *symlink)
{
        struct archive_entry *e = archive_entry_new();
        if (!e)
                return walk_fail(w, -ENOMEM, NULL);
        archive_entry_copy_stat(e, st);
        archive_entry_set_pathname(e, w->apath);
        if (symlink)
                archive_entry_set_symlink(e, symlink);
        if (!S_ISREG(st->st_mode))
                archive_entry_set_size(e, 0);
        int s = archive_write_header(w->a, e);
        archive_entry_free(e);
        if (s < ARCHIVE_WARN) {
                int err = archive_errno(w->a) > 0 ? -archive_errno(w->a) : -EIO;
                return walk_fail(w, err, archive_error_string(w->a));
        }
        return 0;
}

static int walk_entry(struct walk *w, int dfd, const char *name, int depth);

static int walk_file(struct walk *w, int dfd, const char *name)
{
        _cleanup_close_ int fd = files_open_below(dfd, name, O_RDONLY | O_NONBLOCK | O_NOCTTY);
        if (fd < 0)
                return fd == -ENOENT || fd == -ELOOP ? 0 : walk_fail(w, fd, NULL);
        struct stat st;
        if (fstat(fd, &st) < 0)
                return walk_fail(w, -errno, NULL);
        if (!S_ISREG(st.st_mode))
                return 0; /* swapped for something else meanwhile */
        if ((uint64_t)st.st_size > FILES_ARCHIVE_MAX_BYTES - w->bytes)
                return walk_fail(w, -EFBIG, "the archive would exceed 4 GiB of file data");
        w->bytes += (uint64_t)st.st_size;
        int r = put_header(w, &st, NULL);
        if (r < 0)
                return r;
        /* Exactly the size in the header: zeros if the file shrank, cut if it grew. */
        for (uint64_t left = (uint64_t)st.st_size; left > 0;) {
                size_t want = left < FILES_COPY_BUF ? (size_t)left : FILES_COPY_BUF;
                ssize_t n = read(fd, w->buf, want);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return walk_fail(w, -errno, NULL);
                if (n == 0) {
                        memset(w->buf, 0, want);
                        n = (ssize_t)want;
                }
                if (archive_write_data(w->a, w->buf, (size_t)n) < 0) {
                        int err = archive_errno(w->a) > 0 ? -archive_errno(w->a) : -EIO;
                        return walk_fail(w, err, archive_error_string(w->a));
                }
                left -= (uint64_t)n;
        }
        return 0;
}

static int walk_dir(struct walk *w, int dfd, const char *name, int depth)
{
        int fd = files_open_below(dfd, name, O_RDONLY | O_DIRECTORY);
        if (fd < 0)
                return fd == -ENOENT || fd == -ELOOP || fd == -ENOTDIR ? 0 : walk_fail(w, fd, NULL);
        struct stat st;
        int r = fstat(fd, &st) < 0 ? walk_fail(w, -errno, NULL) : put_header(w, &st, NULL);
        if (r < 0 || files_is_pseudo_fs(fd)) {
                close(fd);
                return r;
        }
        if (depth >= FILES_ARCHIVE_MAX_DEPTH) {
                close(fd);
                return walk_fail(w, -ELOOP, "more than 256 directory levels");
        }
        _cleanup_closedir_ DIR *d = NULL;
        if ((r = opendir_fd(fd, &d)) < 0)
                return walk_fail(w, r, NULL);
        size_t alen = strlen(w->apath);
        FOREACH_DIRENT(de, d)
        {
                size_t nlen = strlen(de->d_name);
                if (alen + 1 + nlen >= sizeof(w->apath)) {
                        r = walk_fail(w, -ENAMETOOLONG, "path too long for the archive");
                        break;
                }
                w->apath[alen] = '/';
                memcpy(w->apath + alen + 1, de->d_name, nlen + 1);
                r = walk_entry(w, dirfd(d), de->d_name, depth + 1);
                w->apath[alen] = 0;
                if (r < 0)
                        break;
        }
        return r;
}

/* Everything is looked at without following symlinks: a symlink becomes a symlink entry. */
static int walk_entry(struct walk *w, int dfd, const char *name, int depth)
{
        struct stat st;
        if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return errno == ENOENT ? 0 : walk_fail(w, -errno, NULL);
        if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode) && !S_ISLNK(st.st_mode) &&
            !S_ISFIFO(st.st_mode))
                return 0; /* devices and sockets are not archived */
        if (++w->entries > FILES_ARCHIVE_MAX_ENTRIES)
                return walk_fail(w, -E2BIG, "the archive would exceed 1000000 entries");
        if (S_ISREG(st.st_mode))
                return walk_file(w, dfd, name);
        if (S_ISDIR(st.st_mode))
                return walk_dir(w, dfd, name, depth);
        if (S_ISLNK(st.st_mode)) {
                ssize_t n = readlinkat(dfd, name, w->link, sizeof(w->link) - 1);
                if (n < 0)
                        return errno == ENOENT || errno == EINVAL ? 0 : walk_fail(w, -errno, NULL);
                w->link[n] = 0;
                return put_header(w, &st, w->link);
        }
        return put_header(w, &st, NULL);
}

int files_op_archive_out(int root_fd, const struct files_request *rq, int sfd, int dfd)
{
        char parent[FILES_PATH_MAX];
        const char *name = ".";
        _cleanup_close_ int pfd = -EBADF;
        if (strcmp(rq->path, "/") != 0) {
                if (files_path_split(rq->path, parent, sizeof(parent), &name) < 0 ||
                    !strcmp(name, ".."))
                        return files_fail(sfd, -EINVAL, "%s: name the directory itself, not '..'",
                                          rq->path);
                pfd = files_open_in_root(root_fd, parent, O_PATH | O_DIRECTORY);
        } else {
                pfd = files_open_in_root(root_fd, "/", O_PATH | O_DIRECTORY);
        }
        if (pfd < 0)
                return files_fail_path(sfd, pfd, rq->path);
        struct stat st;
        if (fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return files_fail_path(sfd, -errno, rq->path);
        struct walk *w = calloc(1, sizeof(*w));
        char *buf = malloc(FILES_COPY_BUF);
        /* libarchive writes to its own fd: on failure it is closed first, so freeing the writer
         * cannot add the end-of-archive blocks, and the reader sees a truncated archive. */
        int afd = fcntl(dfd, F_DUPFD_CLOEXEC, 3);
        struct archive *a = archive_write_new();
        int r = 0;
        if (!w || !buf || afd < 0 || !a) {
                r = files_fail(sfd, -ENOMEM, "archive: out of memory");
                goto out;
        }
        w->a = a;
        w->buf = buf;
        snprintf(w->apath, sizeof(w->apath), "%s", name);
        if (archive_write_set_format_pax_restricted(a) != ARCHIVE_OK ||
            archive_write_open_fd(a, afd) != ARCHIVE_OK) {
                r = files_fail(sfd, -EIO, "archive: %s", archive_error_string(a));
                goto out;
        }
        files_report(sfd, FILES_READY, 0, 0, 0, NULL);
        r = walk_entry(w, pfd, name, 0);
        if (r >= 0 && archive_write_close(a) != ARCHIVE_OK) {
                r = archive_errno(a) > 0 ? -archive_errno(a) : -EIO;
                walk_fail(w, r, archive_error_string(a));
        }
        if (r < 0)
                files_fail(sfd, r, "archive %s", w->msg);
        else
                files_report(sfd, FILES_DONE, 0, w->bytes, w->entries, NULL);
out:
        /* On failure our end goes first: freeing the writer then cannot complete the archive. */
        if (r < 0 && afd >= 0)
                close(TAKE_FD(afd));
        if (a)
                archive_write_free(a);
        if (afd >= 0)
                close(afd);
        free(buf);
        free(w);
        return r;
}

/* ------------------------------------------------------------------------------ tar in */

/* No absolute names, no ".." component: checked here, and again by libarchive's flags. */
static bool archive_name_ok(const char *p)
{
        if (!p || !*p || p[0] == '/' || strlen(p) >= FILES_PATH_MAX)
                return false;
        for (const char *c = p; *c;) {
                size_t n = strcspn(c, "/");
                if (n == 2 && c[0] == '.' && c[1] == '.')
                        return false;
                c += n;
                while (*c == '/')
                        c++;
        }
        return true;
}

static int archive_err(struct archive *a)
{
        int e = archive_errno(a);
        return e > 0 ? -e : -EINVAL;
}

int files_op_archive_in(int root_fd, const struct files_request *rq, int sfd)
{
        struct files_owner o;
        int r = files_resolve_owner(root_fd, rq->user, &o);
        if (r < 0)
                return files_fail_owner(sfd, r, rq->user);
        _cleanup_close_ int dir =
            rq->parents ? files_ensure_dir(root_fd, rq->path, &o, -1)
                        : files_open_in_root(root_fd, rq->path, O_RDONLY | O_DIRECTORY);
        if (dir < 0)
                return files_fail_path(sfd, dir, rq->path);
        /* libarchive works with names relative to the cwd; our root is the environment's. */
        if (fchdir(dir) < 0)
                return files_fail_path(sfd, -errno, rq->path);
        if (lseek(rq->upload_fd, 0, SEEK_SET) < 0)
                return files_fail(sfd, -errno, "upload: %s", strerror(errno));
        struct archive *in = archive_read_new();
        struct archive *out = archive_write_disk_new();
        char msg[200] = "";
        uint64_t bytes = 0, entries = 0;
        if (!in || !out) {
                r = -ENOMEM;
                snprintf(msg, sizeof(msg), "out of memory");
                goto out;
        }
        archive_read_support_filter_all(in);
        archive_read_support_format_tar(in);
        archive_read_support_format_gnutar(in);
        archive_write_disk_set_options(
            out, ARCHIVE_EXTRACT_OWNER | ARCHIVE_EXTRACT_PERM | ARCHIVE_EXTRACT_TIME |
                     ARCHIVE_EXTRACT_SECURE_SYMLINKS | ARCHIVE_EXTRACT_SECURE_NODOTDOT |
                     ARCHIVE_EXTRACT_SECURE_NOABSOLUTEPATHS);
        if (archive_read_open_fd(in, rq->upload_fd, 65536) != ARCHIVE_OK) {
                r = -EINVAL;
                snprintf(msg, sizeof(msg), "not a readable tar archive: %s",
                         archive_error_string(in));
                goto out;
        }
        for (;;) {
                struct archive_entry *e;
                int s = archive_read_next_header(in, &e);
                if (s == ARCHIVE_EOF)
                        break;
                if (s < ARCHIVE_WARN) {
                        r = -EINVAL;
                        snprintf(msg, sizeof(msg), "bad archive: %s", archive_error_string(in));
                        goto out;
                }
                const char *p = archive_entry_pathname(e);
                const char *hl = archive_entry_hardlink(e);
                if (++entries > FILES_ARCHIVE_MAX_ENTRIES) {
                        r = -E2BIG;
                        snprintf(msg, sizeof(msg), "more than %d entries",
                                 FILES_ARCHIVE_MAX_ENTRIES);
                        goto out;
                }
                if (!archive_name_ok(p) || (hl && !archive_name_ok(hl))) {
                        r = -EINVAL;
                        snprintf(msg, sizeof(msg),
                                 "entry %.120s: absolute names and '..' are not allowed",
                                 p ? p : "(none)");
                        goto out;
                }
                mode_t type = archive_entry_filetype(e);
                if (type == AE_IFCHR || type == AE_IFBLK || type == AE_IFSOCK) {
                        entries--;
                        continue; /* device nodes are never created */
                }
                if (archive_entry_size(e) > 0) {
                        uint64_t size = (uint64_t)archive_entry_size(e);
                        if (size > FILES_ARCHIVE_MAX_BYTES - bytes) {
                                r = -EFBIG;
                                snprintf(msg, sizeof(msg), "more than 4 GiB of file data");
                                goto out;
                        }
                        bytes += size;
                }
                archive_entry_set_uid(e, o.uid);
                archive_entry_set_gid(e, o.gid);
                archive_entry_set_uname(e, NULL);
                archive_entry_set_gname(e, NULL);
                s = archive_write_header(out, e);
                if (s < ARCHIVE_WARN) {
                        r = archive_err(out);
                        snprintf(msg, sizeof(msg), "%.120s: %s", p, archive_error_string(out));
                        goto out;
                }
                if (archive_entry_size(e) > 0) {
                        const void *buf;
                        size_t len;
                        la_int64_t off;
                        while ((s = archive_read_data_block(in, &buf, &len, &off)) == ARCHIVE_OK)
                                if (archive_write_data_block(out, buf, len, off) < ARCHIVE_WARN) {
                                        r = archive_err(out);
                                        snprintf(msg, sizeof(msg), "%.120s: %s", p,
                                                 archive_error_string(out));
                                        goto out;
                                }
                        if (s != ARCHIVE_EOF) {
                                r = -EINVAL;
                                snprintf(msg, sizeof(msg), "%.120s: %s", p,
                                         archive_error_string(in));
                                goto out;
                        }
                }
                if (archive_write_finish_entry(out) < ARCHIVE_WARN) {
                        r = archive_err(out);
                        snprintf(msg, sizeof(msg), "%.120s: %s", p, archive_error_string(out));
                        goto out;
                }
        }
        /* Directory permissions and times are applied here, at the end. */
        if (archive_write_close(out) != ARCHIVE_OK) {
                r = archive_err(out);
                snprintf(msg, sizeof(msg), "finishing: %s", archive_error_string(out));
        }
out:
        if (in)
                archive_read_free(in);
        if (out)
                archive_write_free(out);
        if (r < 0)
                return files_fail(sfd, r, "archive into %.80s: %s", rq->path, msg);
        return files_report(sfd, FILES_DONE, 0, bytes, entries, NULL);
}

#include "lib/image.h"
#include "lib/rootfs.h"
#include "lib/util.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <ftw.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#define WH_PREFIX ".wh."
#define WH_OPAQUE ".wh..wh..opq"

/* Owners outside 0..65535 become 65534. A tar's base-256 owner field can be negative, which
 * chown would take as 2^32 - n. */
static void fix_owner(struct archive_entry *e)
{
        if (archive_entry_uid(e) < 0 || archive_entry_uid(e) > 65535)
                archive_entry_set_uid(e, 65534);
        if (archive_entry_gid(e) < 0 || archive_entry_gid(e) > 65535)
                archive_entry_set_gid(e, 65534);
}

/* Each mount point must be a real directory: a symlink here could aim a mount elsewhere. */
static int ensure_mount_points(void)
{
        for (size_t i = 0; rootfs_required_dirs[i]; i++) {
                const char *d = rootfs_required_dirs[i];
                struct stat st;
                if (fstatat(AT_FDCWD, d, &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISDIR(st.st_mode) &&
                    unlink(d) < 0)
                        return -errno;
                mode_t mode = strcmp(d, "tmp") == 0 ? 01777 : strcmp(d, "root") == 0 ? 0700 : 0755;
                if (mkdir(d, mode) < 0 && errno != EEXIST)
                        return -errno;
        }
        /* A regular /etc/resolv.conf for the daemon's resolver to be bound onto. */
        struct stat st;
        if (fstatat(AT_FDCWD, "etc/resolv.conf", &st, AT_SYMLINK_NOFOLLOW) == 0 &&
            !S_ISREG(st.st_mode) && unlink("etc/resolv.conf") < 0)
                return -errno;
        int fd = open("etc/resolv.conf", O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd < 0)
                return -errno;
        close(fd);
        return 0;
}

int image_enter_root(const char *dest_dir, char *errbuf, size_t errlen)
{
        if (chdir(dest_dir) < 0 || chroot(".") < 0 || chdir("/") < 0) {
                int r = -errno;
                snprintf(errbuf, errlen, "enter %s: %s", dest_dir, strerror(errno));
                return r;
        }
        umask(0);
        return 0;
}

int image_finish_root(char *errbuf, size_t errlen)
{
        int r = ensure_mount_points();
        if (r < 0)
                snprintf(errbuf, errlen, "mount points: %s", strerror(-r));
        return r;
}

static struct archive *open_layer(int fd, char *errbuf, size_t errlen)
{
        struct archive *in = archive_read_new();
        if (!in)
                return NULL;
        archive_read_support_filter_all(in);
        archive_read_support_format_tar(in);
        archive_read_support_format_gnutar(in);
        if (archive_read_open_fd(in, fd, 65536) != ARCHIVE_OK) {
                snprintf(errbuf, errlen, "not a readable archive: %s", archive_error_string(in));
                archive_read_free(in);
                return NULL;
        }
        return in;
}

/* "./a/b/" -> "a/b"; NULL for a path with a ".." component or nothing left. */
static char *clean_path(const char *p, char *buf, size_t len)
{
        while (*p == '/' || (p[0] == '.' && p[1] == '/'))
                p++;
        if (buf_printf(buf, len, "%s", p) < 0)
                return NULL;
        size_t n = strlen(buf);
        while (n > 0 && buf[n - 1] == '/')
                buf[--n] = 0;
        if (n == 0 || strcmp(buf, ".") == 0)
                return NULL;
        for (char *c = buf; c;) {
                if (strncmp(c, "..", 2) == 0 && (c[2] == '/' || c[2] == 0))
                        return NULL;
                c = strchr(c, '/');
                c = c ? c + 1 : NULL;
        }
        return buf;
}

/* The directory dir below the working directory (the new root once image_enter_root has run),
 * every component a real directory (no symlinks), never above it. */
static int open_dir_nofollow(const char *dir)
{
        struct open_how how = {.flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC,
                               .resolve = RESOLVE_NO_SYMLINKS | RESOLVE_BENEATH |
                                          RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV};
        int root = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (root < 0)
                return -errno;
        int fd = (int)syscall(SYS_openat2, root, *dir ? dir : ".", &how, sizeof(how));
        int r = fd < 0 ? -errno : fd;
        close(root);
        return r;
}

static int remove_children(int dfd)
{
        _cleanup_closedir_ DIR *d = NULL;
        int r = opendir_at(dfd, ".", &d);
        if (r < 0)
                return r;
        FOREACH_DIRENT(de, d)
        {
                int k = rm_rf_at(dfd, de->d_name);
                if (k < 0 && r == 0)
                        r = k;
        }
        return r;
}

/* One whiteout entry: remove what it names from the lower layers. A parent that is missing,
 * not a directory or reached through a symlink means there is nothing to remove. */
static int apply_whiteout(const char *path, char *errbuf, size_t errlen)
{
        char buf[4096];
        char *p = clean_path(path, buf, sizeof(buf));
        if (!p) {
                snprintf(errbuf, errlen, "%s: invalid whiteout path", path);
                return -EINVAL;
        }
        char *slash = strrchr(p, '/');
        const char *base = slash ? slash + 1 : p;
        const char *dir = slash ? p : "";
        if (slash)
                *slash = 0;
        int dfd = open_dir_nofollow(dir);
        if (dfd == -ENOENT || dfd == -ENOTDIR || dfd == -ELOOP || dfd == -EXDEV)
                return 0;
        if (dfd < 0) {
                snprintf(errbuf, errlen, "%s: %s", path, strerror(-dfd));
                return dfd;
        }
        int r;
        if (strcmp(base, WH_OPAQUE) == 0) {
                r = remove_children(dfd);
        } else {
                const char *victim = base + strlen(WH_PREFIX);
                r = (!*victim || !strcmp(victim, ".") || !strcmp(victim, ".."))
                        ? 0
                        : rm_rf_at(dfd, victim);
        }
        close(dfd);
        if (r < 0)
                snprintf(errbuf, errlen, "%s: %s", path, strerror(-r));
        return r;
}

static bool is_whiteout(const char *path)
{
        const char *slash = strrchr(path, '/');
        const char *base = slash ? slash + 1 : path;
        return strncmp(base, WH_PREFIX, strlen(WH_PREFIX)) == 0;
}

/* In a layer, a non-directory replaces whatever the lower layers had at its path, a whole
 * directory tree included (libarchive would only remove an empty one). */
static int replace_lower_dir(const char *path)
{
        char buf[4096];
        char *p = clean_path(path, buf, sizeof(buf));
        if (!p)
                return 0; /* libarchive refuses it */
        char *slash = strrchr(p, '/');
        const char *base = slash ? slash + 1 : p;
        if (slash)
                *slash = 0;
        int dfd = open_dir_nofollow(slash ? p : "");
        if (dfd < 0)
                return 0; /* no such parent, or one through a symlink: libarchive decides */
        struct stat st;
        int r = 0;
        if (fstatat(dfd, base, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode))
                r = rm_rf_at(dfd, base);
        close(dfd);
        return r;
}

/* The next entry of an archive being read: 1, 0 at its end, -EINVAL for a broken one (said in
 * errbuf, after what). */
static int next_entry(struct archive *in, struct archive_entry **ret, const char *what,
                      char *errbuf, size_t errlen)
{
        int s = archive_read_next_header(in, ret);
        if (s == ARCHIVE_EOF)
                return 0;
        if (s < ARCHIVE_WARN) {
                snprintf(errbuf, errlen, "%s: %s", what, archive_error_string(in));
                return -EINVAL;
        }
        return 1;
}

static int whiteout_pass(int fd, char *errbuf, size_t errlen)
{
        struct archive *in = open_layer(fd, errbuf, errlen);
        if (!in)
                return -EINVAL;
        int r = 0;
        struct archive_entry *e;
        while ((r = next_entry(in, &e, "bad layer", errbuf, errlen)) > 0) {
                const char *path = archive_entry_pathname(e);
                if (path && is_whiteout(path) && (r = apply_whiteout(path, errbuf, errlen)) < 0)
                        break;
        }
        archive_read_free(in);
        if (r == 0 && lseek(fd, 0, SEEK_SET) < 0) {
                r = -errno;
                snprintf(errbuf, errlen, "rewind layer: %s", strerror(errno));
        }
        return r;
}

/* A write into the new tree failed: out of space (the image's own limit or the pool) is said
 * so, with its errno; anything else is libarchive's message. */
static int write_error(struct archive *out, struct archive_entry *e, char *errbuf, size_t errlen,
                       int fallback)
{
        int en = archive_errno(out);
        if (en == EDQUOT || en == ENOSPC) {
                snprintf(errbuf, errlen, "%s: %s: the image is larger than the daemon allows "
                         "(--max-image-size) or the pool is full", archive_entry_pathname(e),
                         strerror(en));
                return -en;
        }
        snprintf(errbuf, errlen, "%s: %s", archive_entry_pathname(e), archive_error_string(out));
        return fallback;
}

/* The end of an archive being written (or of extraction: directory modes and times). */
static int close_writer(struct archive *out, char *errbuf, size_t errlen)
{
        if (archive_write_close(out) == ARCHIVE_OK)
                return 0;
        snprintf(errbuf, errlen, "finish: %s", archive_error_string(out));
        return -EIO;
}

static int copy_data(struct archive *in, struct archive *out, struct archive_entry *e, char *errbuf,
                     size_t errlen)
{
        const void *buf;
        size_t len;
        la_int64_t off;
        int s;
        while ((s = archive_read_data_block(in, &buf, &len, &off)) == ARCHIVE_OK)
                if (archive_write_data_block(out, buf, len, off) < ARCHIVE_WARN)
                        return write_error(out, e, errbuf, errlen, -EIO);
        if (s != ARCHIVE_EOF) {
                snprintf(errbuf, errlen, "%s: %s", archive_entry_pathname(e),
                         archive_error_string(in));
                return -EIO;
        }
        return 0;
}

int image_apply_layer(int archive_fd, bool whiteouts, uint64_t *bytes, char *errbuf, size_t errlen)
{
        int r;
        if (whiteouts && (r = whiteout_pass(archive_fd, errbuf, errlen)) < 0)
                return r;
        struct archive *in = open_layer(archive_fd, errbuf, errlen);
        struct archive *out = archive_write_disk_new();
        if (!in || !out) {
                archive_read_free(in);
                archive_write_free(out);
                return in ? -ENOMEM : -EINVAL;
        }
        archive_write_disk_set_options(
            out, ARCHIVE_EXTRACT_OWNER | ARCHIVE_EXTRACT_PERM | ARCHIVE_EXTRACT_TIME |
                     ARCHIVE_EXTRACT_SECURE_SYMLINKS | ARCHIVE_EXTRACT_SECURE_NODOTDOT |
                     ARCHIVE_EXTRACT_SECURE_NOABSOLUTEPATHS | ARCHIVE_EXTRACT_UNLINK);
        struct archive_entry *e;
        while ((r = next_entry(in, &e, "bad archive", errbuf, errlen)) > 0) {
                mode_t type = archive_entry_filetype(e);
                if (type == AE_IFCHR || type == AE_IFBLK)
                        continue;
                if (whiteouts && is_whiteout(archive_entry_pathname(e) ?: ""))
                        continue;
                if (whiteouts && type != AE_IFDIR &&
                    (r = replace_lower_dir(archive_entry_pathname(e) ?: "")) < 0) {
                        snprintf(errbuf, errlen, "%s: %s", archive_entry_pathname(e), strerror(-r));
                        goto out;
                }
                /* A hard link is a second name for a file of the tree, never new content or
                 * metadata (GNU tar reads it so). With a size (pax lets a link carry data)
                 * libarchive restores the entry's mode with chmod(), which follows a link to a
                 * symlink: the mode of whatever the symlink names would change. */
                if (archive_entry_hardlink(e))
                        archive_entry_set_size(e, 0);
                fix_owner(e);
                if (type == AE_IFREG)
                        *bytes += (uint64_t)archive_entry_size(e);
                if (archive_write_header(out, e) < ARCHIVE_WARN) {
                        r = write_error(out, e, errbuf, errlen, -EINVAL);
                        goto out;
                }
                if (archive_entry_size(e) > 0 && (r = copy_data(in, out, e, errbuf, errlen)) < 0)
                        goto out;
                archive_write_finish_entry(out);
        }
        if (r == 0)
                r = close_writer(out, errbuf, errlen);
out:
        archive_read_free(in);
        archive_write_free(out);
        return r;
}

int image_unpack(int archive_fd, const char *dest_dir, uint64_t *ret_bytes, char *errbuf,
                 size_t errlen)
{
        uint64_t bytes = 0;
        int r = image_enter_root(dest_dir, errbuf, errlen);
        if (r < 0)
                return r;
        if ((r = image_apply_layer(archive_fd, false, &bytes, errbuf, errlen)) < 0)
                return r;
        if ((r = image_finish_root(errbuf, errlen)) < 0)
                return r;
        *ret_bytes = bytes;
        return 0;
}

static uint64_t tree_bytes;
static int count_file(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
        if (flag == FTW_F && S_ISREG(st->st_mode))
                tree_bytes += (uint64_t)st->st_size / (st->st_nlink ? st->st_nlink : 1);
        return 0;
}

uint64_t image_tree_bytes(void)
{
        tree_bytes = 0;
        nftw("/", count_file, 64, FTW_PHYS | FTW_MOUNT);
        return tree_bytes;
}

int image_compression_from_string(const char *s, enum image_compression *ret)
{
        if (!strcmp(s, "none") || !strcmp(s, "tar"))
                *ret = IMAGE_TAR;
        else if (!strcmp(s, "gzip") || !strcmp(s, "gz"))
                *ret = IMAGE_TAR_GZIP;
        else if (!strcmp(s, "zstd") || !strcmp(s, "zst"))
                *ret = IMAGE_TAR_ZSTD;
        else
                return -EINVAL;
        return 0;
}

int image_pack(const char *src_dir, int out_fd, enum image_compression c, char *errbuf,
               size_t errlen)
{
        int r = image_enter_root(src_dir, errbuf, errlen);
        if (r < 0)
                return r;
        struct archive *disk = archive_read_disk_new();
        struct archive *out = archive_write_new();
        struct archive_entry_linkresolver *links = NULL;
        if (!disk || !out) {
                r = -ENOMEM;
                goto out;
        }
        /* Numeric owners only: name lookups would load NSS modules from inside the image. */
        archive_read_disk_set_symlink_physical(disk);
        archive_read_disk_set_behavior(
            disk, ARCHIVE_READDISK_NO_TRAVERSE_MOUNTS | ARCHIVE_READDISK_NO_XATTR |
                      ARCHIVE_READDISK_NO_ACL | ARCHIVE_READDISK_NO_FFLAGS);
        archive_write_set_format_pax_restricted(out);
        /* Hardlinks stay hardlinks: the second name of a file becomes a link entry. */
        links = archive_entry_linkresolver_new();
        if (!links) {
                r = -ENOMEM;
                goto out;
        }
        archive_entry_linkresolver_set_strategy(links, archive_format(out));
        if (c == IMAGE_TAR_GZIP)
                archive_write_add_filter_gzip(out);
        else if (c == IMAGE_TAR_ZSTD)
                archive_write_add_filter_zstd(out);
        archive_write_set_bytes_in_last_block(out, 1);
        if (archive_write_open_fd(out, out_fd) != ARCHIVE_OK ||
            archive_read_disk_open(disk, ".") != ARCHIVE_OK) {
                snprintf(errbuf, errlen, "open: %s", archive_error_string(out));
                r = -EIO;
                goto out;
        }
        char buf[65536];
        for (;;) {
                struct archive_entry *e = archive_entry_new();
                int s = archive_read_next_header2(disk, e);
                if (s == ARCHIVE_EOF) {
                        archive_entry_free(e);
                        break;
                }
                if (s < ARCHIVE_WARN) {
                        snprintf(errbuf, errlen, "read: %s", archive_error_string(disk));
                        archive_entry_free(e);
                        r = -EIO;
                        goto out;
                }
                archive_read_disk_descend(disk);
                archive_entry_set_uname(e, NULL);
                archive_entry_set_gname(e, NULL);
                struct archive_entry *spare = NULL;
                archive_entry_linkify(links, &e, &spare);
                archive_entry_free(spare); /* only other strategies (cpio) defer entries */
                s = archive_write_header(out, e);
                if (s < ARCHIVE_WARN) {
                        snprintf(errbuf, errlen, "%s: %s", archive_entry_pathname(e),
                                 archive_error_string(out));
                        archive_entry_free(e);
                        r = -EIO;
                        goto out;
                }
                ssize_t n;
                while (archive_entry_filetype(e) == AE_IFREG && !archive_entry_hardlink(e) &&
                       (n = archive_read_data(disk, buf, sizeof(buf))) > 0)
                        if (archive_write_data(out, buf, (size_t)n) < 0) {
                                snprintf(errbuf, errlen, "write: %s", archive_error_string(out));
                                archive_entry_free(e);
                                r = -EIO;
                                goto out;
                        }
                archive_entry_free(e);
        }
        r = close_writer(out, errbuf, errlen);
out:
        archive_entry_linkresolver_free(links);
        archive_read_free(disk);
        archive_write_free(out);
        return r;
}

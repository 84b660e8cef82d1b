#include "lib/image.h"
#include "lib/rootfs.h"
#include "lib/util.h"

#include <archive.h>
#include <archive_entry.h>
#include <sys/stat.h>

static void fix_owner(struct archive_entry *e)
{
        if (archive_entry_uid(e) > 65535)
                archive_entry_set_uid(e, 65534);
        if (archive_entry_gid(e) > 65535)
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

int image_unpack(int archive_fd, const char *dest_dir, uint64_t *ret_bytes, char *errbuf,
                 size_t errlen)
{
        if (chdir(dest_dir) < 0 || chroot(".") < 0 || chdir("/") < 0) {
                snprintf(errbuf, errlen, "enter %s: %s", dest_dir, strerror(errno));
                return -errno;
        }
        umask(0);
        struct archive *in = archive_read_new();
        struct archive *out = archive_write_disk_new();
        if (!in || !out)
                return -ENOMEM;
        archive_read_support_filter_all(in);
        archive_read_support_format_tar(in);
        archive_read_support_format_gnutar(in);
        archive_write_disk_set_options(out, ARCHIVE_EXTRACT_OWNER | ARCHIVE_EXTRACT_PERM |
                                                    ARCHIVE_EXTRACT_TIME |
                                                    ARCHIVE_EXTRACT_SECURE_SYMLINKS |
                                                    ARCHIVE_EXTRACT_SECURE_NODOTDOT |
                                                    ARCHIVE_EXTRACT_SECURE_NOABSOLUTEPATHS |
                                                    ARCHIVE_EXTRACT_UNLINK);
        int r = 0;
        uint64_t bytes = 0;
        if (archive_read_open_fd(in, archive_fd, 65536) != ARCHIVE_OK) {
                snprintf(errbuf, errlen, "not a readable archive: %s", archive_error_string(in));
                r = -EINVAL;
                goto out;
        }
        for (;;) {
                struct archive_entry *e;
                int s = archive_read_next_header(in, &e);
                if (s == ARCHIVE_EOF)
                        break;
                if (s < ARCHIVE_WARN) {
                        snprintf(errbuf, errlen, "bad archive: %s", archive_error_string(in));
                        r = -EINVAL;
                        goto out;
                }
                mode_t type = archive_entry_filetype(e);
                if (type == AE_IFCHR || type == AE_IFBLK)
                        continue;
                fix_owner(e);
                if (type == AE_IFREG)
                        bytes += (uint64_t)archive_entry_size(e);
                s = archive_write_header(out, e);
                if (s < ARCHIVE_WARN) {
                        snprintf(errbuf, errlen, "%s: %s", archive_entry_pathname(e),
                                 archive_error_string(out));
                        r = -EINVAL;
                        goto out;
                }
                if (archive_entry_size(e) > 0) {
                        const void *buf;
                        size_t len;
                        la_int64_t off;
                        while ((s = archive_read_data_block(in, &buf, &len, &off)) == ARCHIVE_OK)
                                if (archive_write_data_block(out, buf, len, off) < ARCHIVE_WARN) {
                                        s = ARCHIVE_FATAL;
                                        break;
                                }
                        if (s != ARCHIVE_EOF) {
                                snprintf(errbuf, errlen, "%s: %s", archive_entry_pathname(e),
                                         archive_error_string(in));
                                r = -EIO;
                                goto out;
                        }
                }
                archive_write_finish_entry(out);
        }
        if (archive_write_close(out) != ARCHIVE_OK) {
                snprintf(errbuf, errlen, "finish: %s", archive_error_string(out));
                r = -EIO;
                goto out;
        }
        if ((r = ensure_mount_points()) < 0) {
                snprintf(errbuf, errlen, "mount points: %s", strerror(-r));
                goto out;
        }
        *ret_bytes = bytes;
out:
        archive_read_free(in);
        archive_write_free(out);
        return r;
}

/* Unit tests of src/lib/image.c: unpacking a (hostile) tar archive into an image rootfs.
 *
 * Archives are built here with libarchive's writer into a memfd. image_unpack chroots, so each
 * call runs in a forked child that sends its result (return value, byte count, error string)
 * back through a pipe; the parent then inspects the tree on disk. The escape cases each use a
 * separate archive (an unpack stops at the first refused entry) and check the host side: a
 * canary directory next to the destination and unique names under / and /etc.
 *
 * Everything lives in a temp dir under /var/tmp/paddock-unit-XXXXXX, removed at the end of each
 * test. Runs as root (owners are preserved, chroot needs CAP_SYS_CHROOT). */
#include "lib/image.h"
#include "lib/rootfs.h"
#include "lib/util.h"
#include "unit.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <ftw.h>
#include <stdarg.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

static char tmp_root[256];

/* ---------------------------------------------------------------- fixtures */

static void tmp_setup(void)
{
        snprintf(tmp_root, sizeof(tmp_root), "/var/tmp/paddock-unit-XXXXXX");
        if (!mkdtemp(tmp_root)) {
                perror("mkdtemp");
                exit(2);
        }
        char p[512];
        snprintf(p, sizeof(p), "%s/dest", tmp_root);
        mkdir(p, 0755);
        snprintf(p, sizeof(p), "%s/canary", tmp_root);
        mkdir(p, 0755);
        snprintf(p, sizeof(p), "%s/canary/file", tmp_root);
        int fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0 || write_all(fd, "canary", 6) < 0) {
                perror("canary");
                exit(2);
        }
        close(fd);
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
        if (remove(path) < 0)
                fprintf(stderr, "  cleanup %s: %m\n", path);
        return 0;
}

static void tmp_teardown(void)
{
        if (tmp_root[0])
                nftw(tmp_root, rm_one, 64, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
        tmp_root[0] = 0;
}

static const char *pathf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static const char *pathf(const char *fmt, ...)
{
        static char bufs[8][1024];
        static int next;
        char *b = bufs[next++ % 8];
        int n = snprintf(b, sizeof(bufs[0]), "%s/", tmp_root);
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(b + n, sizeof(bufs[0]) - (size_t)n, fmt, ap);
        va_end(ap);
        return b;
}

static bool exists(const char *path)
{
        struct stat st;
        return lstat(path, &st) == 0;
}

static bool is_dir(const char *path)
{
        struct stat st;
        return lstat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static const char *slurp(const char *path)
{
        static char bufs[4][256];
        static int next;
        char *b = bufs[next++ % 4];
        int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return "(missing)";
        ssize_t n = read_full(fd, b, sizeof(bufs[0]) - 1);
        close(fd);
        b[n < 0 ? 0 : n] = 0;
        return b;
}

/* Number of entries in a directory besides . and .., -1 if it cannot be read. */
static int count_entries(const char *path)
{
        DIR *d = opendir(path);
        if (!d)
                return -1;
        int n = 0;
        struct dirent *de;
        while ((de = readdir(d)))
                if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
                        n++;
        closedir(d);
        return n;
}

/* A name no one else uses, for paths on the host that must never appear. */
static const char *unique(const char *prefix)
{
        static char buf[4][256];
        static int next;
        char *b = buf[next++ % 4];
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        snprintf(b, sizeof(buf[0]), "%spaddock-unit-%d-%lx%lx", prefix, (int)getpid(),
                 (unsigned long)ts.tv_sec, (unsigned long)ts.tv_nsec);
        return b;
}

/* ---------------------------------------------------------------- archive builder */

enum kind { REG, DIR_, SYMLINK, HARDLINK, CHR, BLK, FIFO };

struct ent {
        const char *path;
        enum kind kind;
        mode_t perm;
        int64_t uid, gid;
        const char *data; /* REG content */
        size_t len;       /* REG length when data has NULs (0: strlen) */
        const char *link; /* SYMLINK target, HARDLINK target */
};

enum filter { PLAIN, GZIP, ZSTD, XZ };

/* Build a pax tar of the entries into a memfd, positioned at 0. */
static int make_archive(const struct ent *e, size_t n, enum filter filter)
{
        int fd = memfd_create("archive", MFD_CLOEXEC);
        struct archive *a = archive_write_new();
        if (fd < 0 || !a) {
                perror("memfd/archive");
                exit(2);
        }
        int s = ARCHIVE_OK;
        if (filter == GZIP)
                s = archive_write_add_filter_gzip(a);
        else if (filter == ZSTD)
                s = archive_write_add_filter_zstd(a);
        else if (filter == XZ)
                s = archive_write_add_filter_xz(a);
        if (s != ARCHIVE_OK || archive_write_set_format_pax_restricted(a) != ARCHIVE_OK ||
            archive_write_open_fd(a, fd) != ARCHIVE_OK) {
                fprintf(stderr, "  archive writer: %s\n", archive_error_string(a));
                exit(2);
        }
        for (size_t i = 0; i < n; i++) {
                struct archive_entry *ae = archive_entry_new();
                archive_entry_set_pathname(ae, e[i].path);
                archive_entry_set_uid(ae, e[i].uid);
                archive_entry_set_gid(ae, e[i].gid);
                archive_entry_set_mtime(ae, 1600000000, 0);
                size_t len = 0;
                switch (e[i].kind) {
                case REG:
                        len = e[i].len ? e[i].len : (e[i].data ? strlen(e[i].data) : 0);
                        archive_entry_set_filetype(ae, AE_IFREG);
                        archive_entry_set_perm(ae, e[i].perm ? e[i].perm : 0644);
                        archive_entry_set_size(ae, (la_int64_t)len);
                        break;
                case DIR_:
                        archive_entry_set_filetype(ae, AE_IFDIR);
                        archive_entry_set_perm(ae, e[i].perm ? e[i].perm : 0755);
                        break;
                case SYMLINK:
                        archive_entry_set_filetype(ae, AE_IFLNK);
                        archive_entry_set_perm(ae, 0777);
                        archive_entry_set_symlink(ae, e[i].link);
                        break;
                case HARDLINK:
                        archive_entry_set_filetype(ae, AE_IFREG);
                        archive_entry_set_perm(ae, e[i].perm ? e[i].perm : 0644);
                        archive_entry_set_hardlink(ae, e[i].link);
                        archive_entry_set_size(ae, 0);
                        break;
                case CHR:
                case BLK:
                        archive_entry_set_filetype(ae, e[i].kind == CHR ? AE_IFCHR : AE_IFBLK);
                        archive_entry_set_perm(ae, 0666);
                        archive_entry_set_rdevmajor(ae, e[i].kind == CHR ? 1 : 8);
                        archive_entry_set_rdevminor(ae, e[i].kind == CHR ? 3 : 0);
                        break;
                case FIFO:
                        archive_entry_set_filetype(ae, AE_IFIFO);
                        archive_entry_set_perm(ae, 0644);
                        break;
                }
                if (archive_write_header(a, ae) < ARCHIVE_WARN) {
                        fprintf(stderr, "  write header %s: %s\n", e[i].path,
                                archive_error_string(a));
                        exit(2);
                }
                if (len > 0 && archive_write_data(a, e[i].data, len) != (la_ssize_t)len) {
                        fprintf(stderr, "  write data %s: %s\n", e[i].path,
                                archive_error_string(a));
                        exit(2);
                }
                archive_entry_free(ae);
        }
        if (archive_write_close(a) != ARCHIVE_OK) {
                fprintf(stderr, "  archive close: %s\n", archive_error_string(a));
                exit(2);
        }
        archive_write_free(a);
        lseek(fd, 0, SEEK_SET);
        return fd;
}

/* The archive really holds the hostile name (the writer did not sanitize it): otherwise an
 * escape test would prove nothing. */
static bool archive_has(int fd, const char *path)
{
        lseek(fd, 0, SEEK_SET);
        struct archive *a = archive_read_new();
        archive_read_support_filter_all(a);
        archive_read_support_format_all(a);
        bool found = false;
        if (archive_read_open_fd(a, fd, 10240) == ARCHIVE_OK) {
                struct archive_entry *ae;
                while (archive_read_next_header(a, &ae) == ARCHIVE_OK)
                        if (!strcmp(archive_entry_pathname(ae), path))
                                found = true;
        }
        archive_read_free(a);
        lseek(fd, 0, SEEK_SET);
        return found;
}

/* ---------------------------------------------------------------- unpack in a child */

struct result {
        int r;
        int status; /* the child's wait status */
        uint64_t bytes;
        char err[512];
};

#define BYTES_UNSET UINT64_C(0xdeadbeefdeadbeef)

static struct result unpack_into(int fd, const char *dest)
{
        struct result res = {.r = -999, .bytes = BYTES_UNSET};
        int p[2];
        if (pipe2(p, O_CLOEXEC) < 0) {
                perror("pipe2");
                exit(2);
        }
        lseek(fd, 0, SEEK_SET);
        fflush(stdout);
        fflush(stderr);
        pid_t pid = fork();
        if (pid < 0) {
                perror("fork");
                exit(2);
        }
        if (pid == 0) {
                close(p[0]);
                struct result c = {.bytes = BYTES_UNSET};
                c.r = image_unpack(fd, dest, &c.bytes, c.err, sizeof(c.err));
                _exit(write_all(p[1], &c, sizeof(c)) < 0 ? 3 : 0);
        }
        close(p[1]);
        struct result got;
        ssize_t n = read_full(p[0], &got, sizeof(got));
        close(p[0]);
        waitpid(pid, &res.status, 0);
        if (n == (ssize_t)sizeof(got)) {
                res = (struct result){.r = got.r, .status = res.status, .bytes = got.bytes};
                memcpy(res.err, got.err, sizeof(res.err));
                res.err[sizeof(res.err) - 1] = 0;
        } else {
                snprintf(res.err, sizeof(res.err), "child died (wait status %#x)", res.status);
        }
        if (res.r != 0)
                printf("    (unpack: %d %s)\n", res.r, res.err);
        return res;
}

static struct result unpack(const struct ent *e, size_t n, enum filter filter)
{
        int fd = make_archive(e, n, filter);
        struct result r = unpack_into(fd, pathf("dest"));
        close(fd);
        return r;
}

static void check_mount_points(void)
{
        for (size_t i = 0; rootfs_required_dirs[i]; i++) {
                const char *d = pathf("dest/%s", rootfs_required_dirs[i]);
                if (!is_dir(d))
                        fprintf(stderr, "  %s is not a real directory\n", d);
                CHECK(is_dir(d));
        }
        struct stat st;
        CHECK(lstat(pathf("dest/tmp"), &st) == 0 && (st.st_mode & 07777) == 01777);
        CHECK(lstat(pathf("dest/root"), &st) == 0 && (st.st_mode & 07777) == 0700);
}

/* The canary next to dest is intact and nothing else appeared next to dest. */
static void check_canary(void)
{
        CHECK_EQ_STR(slurp(pathf("canary/file")), "canary");
        CHECK_EQ_INT(count_entries(pathf("canary")), 1);
        CHECK_EQ_INT(count_entries(tmp_root), 2); /* dest, canary */
        struct stat st;
        CHECK(stat(pathf("canary/file"), &st) == 0 && st.st_nlink == 1);
}

/* ---------------------------------------------------------------- normal archives */

static const char hello_sh[] = "#!/bin/sh\necho hello\n";

static const struct ent basic[] = {
    {"bin", DIR_, 0755, 0, 0, NULL, 0, NULL},
    {"bin/hello", REG, 0755, 1000, 1000, hello_sh, 0, NULL},
    {"bin/hi", SYMLINK, 0, 0, 0, NULL, 0, "hello"},
    {"bin/hard", HARDLINK, 0755, 1000, 1000, NULL, 0, "bin/hello"},
    {"etc", DIR_, 0755, 0, 0, NULL, 0, NULL},
    {"etc/passwd", REG, 0644, 0, 0, "root:x:0:0::/root:/bin/sh\n", 0, NULL},
    {"etc/shadow", REG, 0640, 0, 42, "root:*:1::::::\n", 0, NULL},
    {"home/user", DIR_, 0700, 1000, 1000, NULL, 0, NULL},
    {"home/user/.profile", REG, 0600, 1000, 1000, "PS1=$ \n", 0, NULL},
    {"opt/no/parents/given", REG, 0644, 0, 0, "deep", 0, NULL},
    {"usr/share/caf\xc3\xa9.txt", REG, 0644, 0, 0, "utf-8 name", 0, NULL},
    {"bin/suid", REG, 04755, 0, 0, "s", 0, NULL},
};

static uint64_t basic_bytes(void)
{
        uint64_t sum = 0;
        for (size_t i = 0; i < ELEMENTSOF(basic); i++)
                if (basic[i].kind == REG)
                        sum += strlen(basic[i].data);
        return sum;
}

static void check_basic_tree(void)
{
        struct stat st;
        CHECK_EQ_INT(lstat(pathf("dest/bin/hello"), &st), 0);
        CHECK(S_ISREG(st.st_mode));
        CHECK_EQ_INT(st.st_mode & 07777, 0755);
        CHECK_EQ_INT(st.st_uid, 1000);
        CHECK_EQ_INT(st.st_gid, 1000);
        CHECK_EQ_INT(st.st_mtime, 1600000000);
        CHECK_EQ_STR(slurp(pathf("dest/bin/hello")), hello_sh);
        char target[64] = "";
        CHECK_EQ_INT(readlink(pathf("dest/bin/hi"), target, sizeof(target) - 1), 5);
        CHECK_EQ_STR(target, "hello");
        struct stat hs;
        CHECK_EQ_INT(lstat(pathf("dest/bin/hard"), &hs), 0);
        CHECK_EQ_INT(hs.st_ino, st.st_ino);
        CHECK_EQ_INT(lstat(pathf("dest/etc/shadow"), &st), 0);
        CHECK_EQ_INT(st.st_mode & 07777, 0640);
        CHECK_EQ_INT(st.st_gid, 42);
        CHECK_EQ_INT(lstat(pathf("dest/home/user"), &st), 0);
        CHECK(S_ISDIR(st.st_mode));
        CHECK_EQ_INT(st.st_mode & 07777, 0700);
        CHECK_EQ_INT(st.st_uid, 1000);
        CHECK_EQ_STR(slurp(pathf("dest/home/user/.profile")), "PS1=$ \n");
        CHECK_EQ_STR(slurp(pathf("dest/opt/no/parents/given")), "deep");
        CHECK_EQ_STR(slurp(pathf("dest/usr/share/caf\xc3\xa9.txt")), "utf-8 name");
        CHECK_EQ_INT(lstat(pathf("dest/bin/suid"), &st), 0);
        CHECK_EQ_INT(st.st_mode & 07777, 04755);
        check_mount_points();
        check_canary();
}

static void test_image_unpack__plain(void)
{
        tmp_setup();
        struct result r = unpack(basic, ELEMENTSOF(basic), PLAIN);
        CHECK_EQ_INT(r.r, 0);
        CHECK_EQ_INT(r.bytes, basic_bytes());
        check_basic_tree();
        tmp_teardown();
}

static void test_image_unpack__gzip(void)
{
        tmp_setup();
        struct result r = unpack(basic, ELEMENTSOF(basic), GZIP);
        CHECK_EQ_INT(r.r, 0);
        CHECK_EQ_INT(r.bytes, basic_bytes());
        check_basic_tree();
        tmp_teardown();
}

static void test_image_unpack__zstd(void)
{
        tmp_setup();
        struct result r = unpack(basic, ELEMENTSOF(basic), ZSTD);
        CHECK_EQ_INT(r.r, 0);
        CHECK_EQ_INT(r.bytes, basic_bytes());
        check_basic_tree();
        tmp_teardown();
}

static void test_image_unpack__xz(void)
{
        tmp_setup();
        struct result r = unpack(basic, ELEMENTSOF(basic), XZ);
        CHECK_EQ_INT(r.r, 0);
        check_basic_tree();
        tmp_teardown();
}

/* A file larger than one read block, with every byte value: the data loop and the count. */
static void test_image_unpack__large_binary_file(void)
{
        tmp_setup();
        size_t len = 300000;
        char *data = malloc(len);
        for (size_t i = 0; i < len; i++)
                data[i] = (char)(i * 7 + (i >> 9));
        struct ent e[] = {{"blob.bin", REG, 0644, 0, 0, data, len, NULL},
                          {"empty", REG, 0644, 0, 0, "", 0, NULL}};
        struct result r = unpack(e, ELEMENTSOF(e), GZIP);
        CHECK_EQ_INT(r.r, 0);
        CHECK_EQ_INT(r.bytes, len);
        int fd = open(pathf("dest/blob.bin"), O_RDONLY | O_CLOEXEC);
        char *back = malloc(len + 1);
        CHECK_EQ_INT(read_full(fd, back, len + 1), len);
        CHECK(memcmp(back, data, len) == 0);
        close(fd);
        CHECK(exists(pathf("dest/empty")));
        free(back);
        free(data);
        tmp_teardown();
}

/* ---------------------------------------------------------------- owners and devices */

static void test_image_unpack__owners_clamped(void)
{
        tmp_setup();
        struct ent e[] = {
            {"big-uid", REG, 0644, 200000, 100, "a", 0, NULL},
            {"big-gid", REG, 0644, 100, 300000, "b", 0, NULL},
            {"first-out", REG, 0644, 65536, 65536, "c", 0, NULL},
            {"last-in", REG, 0644, 65535, 65535, "d", 0, NULL},
            {"huge", REG, 0644, 4294967294LL, 4294967294LL, "e", 0, NULL},
            {"dir-big", DIR_, 0755, 200000, 200000, NULL, 0, NULL},
            {"link-big", SYMLINK, 0, 200000, 200000, NULL, 0, "big-uid"},
        };
        struct result r = unpack(e, ELEMENTSOF(e), PLAIN);
        CHECK_EQ_INT(r.r, 0);
        struct stat st;
        CHECK(lstat(pathf("dest/big-uid"), &st) == 0 && st.st_uid == 65534 && st.st_gid == 100);
        CHECK(lstat(pathf("dest/big-gid"), &st) == 0 && st.st_uid == 100 && st.st_gid == 65534);
        CHECK(lstat(pathf("dest/first-out"), &st) == 0 && st.st_uid == 65534 && st.st_gid == 65534);
        CHECK(lstat(pathf("dest/last-in"), &st) == 0 && st.st_uid == 65535 && st.st_gid == 65535);
        CHECK(lstat(pathf("dest/huge"), &st) == 0 && st.st_uid == 65534 && st.st_gid == 65534);
        CHECK(lstat(pathf("dest/dir-big"), &st) == 0 && st.st_uid == 65534 && st.st_gid == 65534);
        CHECK(lstat(pathf("dest/link-big"), &st) == 0 && S_ISLNK(st.st_mode) && st.st_uid == 65534);
        tmp_teardown();
}

/* One ustar header, by hand: libarchive's writer cannot store a negative owner, nor give a
 * hard link a size. */
static void put_ustar(uint8_t *h, const char *name, char type, const char *mode,
                      const uint8_t uid[8], const uint8_t gid[8], size_t size, const char *link)
{
        memset(h, 0, 512);
        memcpy(h, name, strlen(name));
        memcpy(h + 100, mode, 8);
        memcpy(h + 157, link, strlen(link));
        memcpy(h + 108, uid, 8);
        memcpy(h + 116, gid, 8);
        snprintf((char *)h + 124, 12, "%011zo", size);
        memcpy(h + 136, "13000000000", 12);
        h[156] = (uint8_t)type;
        memcpy(h + 257, "ustar\0" "00", 8);
        unsigned sum = 0;
        for (size_t i = 0; i < 512; i++)
                sum += i >= 148 && i < 156 ? ' ' : h[i];
        snprintf((char *)h + 148, 8, "%06o", sum);
        h[155] = ' ';
}

/* A base-256 owner field can be negative; chown would take -n as 2^32 - n (found by
 * tests/fuzz/fuzz_tar.c: a directory owned by 808464384). Out of range means 65534 too. */
static void test_image_unpack__negative_owners_clamped(void)
{
        tmp_setup();
        static const uint8_t minus5[8] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfb};
        static const uint8_t found[8] = {0xcf, 0xcf, 0xcf, '0', '0', '0', '0', 0};
        static const uint8_t zero[8] = "0000000";
        uint8_t tar[512 * 5] = {0};
        put_ustar(tar, "neg", '0', "0000644", minus5, minus5, 1, "");
        tar[512] = 'f';
        put_ustar(tar + 1024, "dir/", '5', "0000755", found, zero, 0, "");
        int fd = memfd_create("archive", MFD_CLOEXEC);
        CHECK(fd >= 0 && write_all(fd, tar, sizeof(tar)) == 0);
        struct result r = unpack_into(fd, pathf("dest"));
        CHECK_EQ_INT(r.r, 0);
        struct stat st;
        CHECK(lstat(pathf("dest/neg"), &st) == 0 && st.st_uid == 65534 && st.st_gid == 65534);
        CHECK(lstat(pathf("dest/dir"), &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == 65534 &&
              st.st_gid == 0);
        close(fd);
        tmp_teardown();
}

/* A hard link to a symlink with a size (pax lets a hard link carry data) and a mode: libarchive
 * writes no data through the symlink but restored the mode with chmod(), which follows it, so a layer
 * could change the mode of any file its symlink named (found by tests/fuzz/fuzz_tar.c). A hard
 * link is a second name, never new content or metadata. */
static void test_image_unpack__hardlink_to_symlink_keeps_target(void)
{
        tmp_setup();
        static const uint8_t zero[8] = "0000000";
        /* The mode field as the fuzzer wrote it (a valid one makes libarchive's reader drop
         * the link's data, and with it the chmod). */
        uint8_t tar[512 * 8] = {0};
        put_ustar(tar, "target", '0', "0000644", zero, zero, 1, "");
        tar[512] = 't';
        put_ustar(tar + 1024, "s", '2', "0000777", zero, zero, 0, "target");
        put_ustar(tar + 1536, "h", '1', "0\xd9" "00644", zero, zero, 9, "s");
        memcpy(tar + 2048, "escaped!\n", 9);
        int fd = memfd_create("archive", MFD_CLOEXEC);
        CHECK(fd >= 0 && write_all(fd, tar, sizeof(tar)) == 0);
        struct result r = unpack_into(fd, pathf("dest"));
        CHECK_EQ_INT(r.r, 0);
        struct stat st;
        CHECK(lstat(pathf("dest/target"), &st) == 0 && S_ISREG(st.st_mode) &&
              (st.st_mode & 07777) == 0644);
        CHECK_EQ_STR(slurp(pathf("dest/target")), "t");
        CHECK(lstat(pathf("dest/h"), &st) == 0 && S_ISLNK(st.st_mode));
        close(fd);
        tmp_teardown();
}

static void test_image_unpack__devices_skipped(void)
{
        tmp_setup();
        struct ent e[] = {
            {"dev", DIR_, 0755, 0, 0, NULL, 0, NULL},
            {"dev/evil-mem", CHR, 0, 0, 0, NULL, 0, NULL},
            {"dev/evil-disk", BLK, 0, 0, 0, NULL, 0, NULL},
            {"etc/evil-null", CHR, 0, 0, 0, NULL, 0, NULL},
            {"after", REG, 0644, 0, 0, "still here", 0, NULL},
        };
        int fd = make_archive(e, ELEMENTSOF(e), PLAIN);
        CHECK(archive_has(fd, "dev/evil-mem"));
        struct result r = unpack_into(fd, pathf("dest"));
        close(fd);
        CHECK_EQ_INT(r.r, 0);
        CHECK(!exists(pathf("dest/dev/evil-mem")));
        CHECK(!exists(pathf("dest/dev/evil-disk")));
        CHECK(!exists(pathf("dest/etc/evil-null")));
        CHECK_EQ_STR(slurp(pathf("dest/after")), "still here");
        check_mount_points();
        tmp_teardown();
}

/* ---------------------------------------------------------------- escapes */

static void test_image_unpack__dotdot_refused(void)
{
        static const char *const names[] = {"../escape", "a/../../escape", "./../escape",
                                            "a/b/../../../escape"};
        for (size_t i = 0; i < ELEMENTSOF(names); i++) {
                tmp_setup();
                struct ent e[] = {{"ok", REG, 0644, 0, 0, "fine", 0, NULL},
                                  {names[i], REG, 0644, 0, 0, "escaped!", 0, NULL},
                                  {"after", REG, 0644, 0, 0, "x", 0, NULL}};
                int fd = make_archive(e, ELEMENTSOF(e), PLAIN);
                CHECK(archive_has(fd, names[i]));
                struct result r = unpack_into(fd, pathf("dest"));
                close(fd);
                CHECK(r.r < 0);
                CHECK(r.err[0] != 0);
                CHECK(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0);
                CHECK_EQ_INT(r.bytes, BYTES_UNSET); /* not written on failure */
                CHECK(!exists(pathf("escape")));
                CHECK(!exists(pathf("dest/escape")));
                check_canary();
                tmp_teardown();
        }
}

static void test_image_unpack__absolute_path_not_on_host(void)
{
        tmp_setup();
        const char *name = unique("evil-");
        char host[512], inside[512];
        snprintf(host, sizeof(host), "/etc/%s", name);
        snprintf(inside, sizeof(inside), "etc/%s", name);
        struct ent e[] = {{"etc", DIR_, 0755, 0, 0, NULL, 0, NULL},
                          {host, REG, 0644, 0, 0, "evil", 0, NULL}};
        int fd = make_archive(e, ELEMENTSOF(e), PLAIN);
        CHECK(archive_has(fd, host));
        struct result r = unpack_into(fd, pathf("dest"));
        close(fd);
        CHECK(!exists(host));
        CHECK(r.r < 0); /* refused, not rewritten into the image */
        CHECK(!exists(pathf("dest/%s", inside)));
        check_canary();
        if (exists(host))
                unlink(host); /* stay hermetic even when the check failed */
        tmp_teardown();
}

/* SECURE_SYMLINKS together with EXTRACT_UNLINK does not refuse "link/name" when "link" is a
 * symlink: libarchive removes the symlink and makes "link" a real directory, so the file lands
 * inside the image. Either that or a refusal is safe; writing through the link is not. */
static void check_written_beside_link(const struct result *r, const char *name)
{
        if (r->r == 0) {
                CHECK(is_dir(pathf("dest/link")));
                CHECK(exists(pathf("dest/link/%s", name)));
        } else {
                CHECK(r->err[0] != 0);
                CHECK(!exists(pathf("dest/link/%s", name)));
        }
}

static void test_image_unpack__symlink_to_root_not_followed(void)
{
        tmp_setup();
        const char *name = unique("pwned-");
        char host[512], through[512];
        snprintf(host, sizeof(host), "/%s", name);
        snprintf(through, sizeof(through), "link/%s", name);
        struct ent e[] = {{"link", SYMLINK, 0, 0, 0, NULL, 0, "/"},
                          {through, REG, 0644, 0, 0, "pwned", 0, NULL}};
        struct result r = unpack(e, ELEMENTSOF(e), PLAIN);
        CHECK(!exists(host));
        /* not even redirected to the image's own root */
        CHECK(!exists(pathf("dest/%s", name)));
        check_written_beside_link(&r, name);
        check_canary();
        if (exists(host))
                unlink(host);
        tmp_teardown();
}

/* A symlink to the host path of a directory next to dest, absolute and relative. */
static void test_image_unpack__symlink_to_host_dir_not_followed(void)
{
        tmp_setup();
        /* copies: pathf's buffers are reused by the checks below */
        char abs[512], rel[1024] = "";
        snprintf(abs, sizeof(abs), "%s", pathf("canary"));
        for (int i = 0; i < 12; i++)
                strcat(rel, "../");
        strcat(rel, abs + 1);
        const char *targets[] = {abs, rel, "../canary"};
        for (size_t i = 0; i < ELEMENTSOF(targets); i++) {
                struct ent e[] = {{"link", SYMLINK, 0, 0, 0, NULL, 0, targets[i]},
                                  {"link/pwned", REG, 0644, 0, 0, "pwned", 0, NULL}};
                struct result r = unpack(e, ELEMENTSOF(e), PLAIN);
                if (exists(pathf("canary/pwned")))
                        fprintf(stderr, "  wrote through link -> %s\n", targets[i]);
                CHECK(!exists(pathf("canary/pwned")));
                check_written_beside_link(&r, "pwned");
                check_canary();
                /* fresh dest for the next target */
                nftw(pathf("dest"), rm_one, 64, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
                mkdir(pathf("dest"), 0755);
        }
        tmp_teardown();
}

/* Hard links are resolved inside the image too: never a second name for a host file. */
static void test_image_unpack__hardlink_out_refused(void)
{
        tmp_setup();
        char abs[512];
        snprintf(abs, sizeof(abs), "%s", pathf("canary/file"));
        const char *targets[] = {"../canary/file", abs};
        for (size_t i = 0; i < ELEMENTSOF(targets); i++) {
                struct ent e[] = {{"h", HARDLINK, 0644, 0, 0, NULL, 0, targets[i]}};
                struct result r = unpack(e, ELEMENTSOF(e), PLAIN);
                CHECK(r.r < 0);
                CHECK(!exists(pathf("dest/h")));
                check_canary(); /* nlink still 1 */
        }
        tmp_teardown();
}

/* Mount points planted as symlinks or files become real directories. */
static void test_image_unpack__mount_points_replaced(void)
{
        tmp_setup();
        char canary[512];
        snprintf(canary, sizeof(canary), "%s", pathf("canary"));
        struct ent e[] = {
            {"proc", SYMLINK, 0, 0, 0, NULL, 0, "/"},
            {"sys", SYMLINK, 0, 0, 0, NULL, 0, "/sys"},
            {"dev", SYMLINK, 0, 0, 0, NULL, 0, "../../../.."},
            {"tmp", REG, 0644, 0, 0, "not a dir", 0, NULL},
            {"workspace", SYMLINK, 0, 0, 0, NULL, 0, canary},
            {"root", FIFO, 0, 0, 0, NULL, 0, NULL},
            {"run", SYMLINK, 0, 0, 0, NULL, 0, "tmp"},
            {"var", DIR_, 0755, 0, 0, NULL, 0, NULL},
            {"var/keep", REG, 0644, 0, 0, "kept", 0, NULL},
        };
        struct result r = unpack(e, ELEMENTSOF(e), PLAIN);
        CHECK_EQ_INT(r.r, 0);
        check_mount_points();
        CHECK_EQ_STR(slurp(pathf("dest/var/keep")), "kept");
        CHECK_EQ_INT(count_entries(pathf("dest/proc")), 0);
        check_canary();
        tmp_teardown();
}

/* ---------------------------------------------------------------- bad input */

static void test_image_unpack__garbage(void)
{
        tmp_setup();
        int fd = memfd_create("garbage", MFD_CLOEXEC);
        char junk[8192];
        uint32_t x = 12345;
        for (size_t i = 0; i < sizeof(junk); i++) {
                x = x * 1103515245 + 12345;
                junk[i] = (char)(x >> 16);
        }
        CHECK_EQ_INT(write_all(fd, junk, sizeof(junk)), 0);
        struct result r = unpack_into(fd, pathf("dest"));
        CHECK(r.r < 0);
        CHECK(r.err[0] != 0);
        CHECK_EQ_INT(r.bytes, BYTES_UNSET);
        CHECK(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0);
        close(fd);

        /* an empty stream */
        fd = memfd_create("empty", MFD_CLOEXEC);
        r = unpack_into(fd, pathf("dest"));
        CHECK(r.r < 0);
        CHECK(r.err[0] != 0);
        close(fd);

        /* gzip magic followed by junk */
        fd = memfd_create("badgz", MFD_CLOEXEC);
        CHECK_EQ_INT(write_all(fd, "\x1f\x8b\x08\x00", 4), 0);
        CHECK_EQ_INT(write_all(fd, junk, 1000), 0);
        r = unpack_into(fd, pathf("dest"));
        CHECK(r.r < 0);
        CHECK(r.err[0] != 0);
        close(fd);
        tmp_teardown();
}

static void test_image_unpack__truncated(void)
{
        tmp_setup();
        size_t len = 200000;
        char *data = malloc(len);
        for (size_t i = 0; i < len; i++)
                data[i] = (char)(i * 31 + (i >> 7));
        struct ent e[] = {{"blob", REG, 0644, 0, 0, data, len, NULL}};
        for (int f = PLAIN; f <= GZIP; f++) {
                int fd = make_archive(e, ELEMENTSOF(e), (enum filter)f);
                struct stat st;
                fstat(fd, &st);
                CHECK_EQ_INT(ftruncate(fd, st.st_size / 2), 0);
                struct result r = unpack_into(fd, pathf("dest"));
                CHECK(r.r < 0);
                CHECK(r.err[0] != 0);
                CHECK_EQ_INT(r.bytes, BYTES_UNSET);
                close(fd);
        }
        free(data);
        tmp_teardown();
}

static void test_image_unpack__missing_dest(void)
{
        tmp_setup();
        int fd = make_archive(basic, ELEMENTSOF(basic), PLAIN);
        struct result r = unpack_into(fd, pathf("no-such-dir"));
        close(fd);
        CHECK_EQ_INT(r.r, -ENOENT);
        CHECK(strstr(r.err, "no-such-dir") != NULL);
        CHECK(!exists(pathf("no-such-dir")));
        tmp_teardown();
}

/* ---------------------------------------------------------------- OCI layers */

/* Apply layers in order in a child (enter_root, apply each with whiteouts, finish). */
static struct result apply_layers(const int *fds, size_t n)
{
        struct result res = {.r = -999};
        int p[2];
        if (pipe2(p, O_CLOEXEC) < 0)
                exit(2);
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
                close(p[0]);
                struct result c = {.bytes = 0};
                c.r = image_enter_root(pathf("dest"), c.err, sizeof(c.err));
                for (size_t i = 0; i < n && c.r == 0; i++) {
                        lseek(fds[i], 0, SEEK_SET);
                        c.r = image_apply_layer(fds[i], true, &c.bytes, c.err, sizeof(c.err));
                }
                if (c.r == 0)
                        c.r = image_finish_root(c.err, sizeof(c.err));
                _exit(write_all(p[1], &c, sizeof(c)) < 0 ? 3 : 0);
        }
        close(p[1]);
        if (read_full(p[0], &res, sizeof(res)) != (ssize_t)sizeof(res))
                res.r = -999;
        close(p[0]);
        waitpid(pid, &res.status, 0);
        if (res.r != 0)
                printf("    (layers: %d %s)\n", res.r, res.err);
        return res;
}

static void test_image_layers__whiteouts(void)
{
        tmp_setup();
        static const struct ent lower[] = {
            {.path = "etc", .kind = DIR_},
            {.path = "etc/gone", .kind = REG, .data = "x"},
            {.path = "etc/kept", .kind = REG, .data = "k"},
            {.path = "opq", .kind = DIR_},
            {.path = "opq/old", .kind = REG, .data = "o"},
            {.path = "opq/sub", .kind = DIR_},
            {.path = "opq/sub/deep", .kind = REG, .data = "d"},
            {.path = "dir", .kind = DIR_},
            {.path = "dir/inner", .kind = REG, .data = "i"},
            {.path = "tree", .kind = DIR_},
            {.path = "tree/leaf", .kind = REG, .data = "l"},
        };
        /* Whiteouts act on lower layers only: opq/new of the same layer stays. */
        static const struct ent upper[] = {
            {.path = "opq/new", .kind = REG, .data = "n"},
            {.path = "opq/.wh..wh..opq", .kind = REG},
            {.path = "etc/.wh.gone", .kind = REG},
            {.path = "./.wh.dir", .kind = REG},
            {.path = "etc/.wh.never-existed", .kind = REG},
            {.path = "nowhere/.wh.x", .kind = REG},
            {.path = "tree", .kind = SYMLINK, .link = "etc"},
        };
        int fds[] = {make_archive(lower, ELEMENTSOF(lower), GZIP),
                     make_archive(upper, ELEMENTSOF(upper), ZSTD)};
        struct result r = apply_layers(fds, 2);
        CHECK_EQ_INT(r.r, 0);
        CHECK(!exists(pathf("dest/etc/gone")) && !exists(pathf("dest/etc/.wh.gone")));
        CHECK_EQ_STR(slurp(pathf("dest/etc/kept")), "k");
        CHECK_EQ_INT(count_entries(pathf("dest/opq")), 1);
        CHECK_EQ_STR(slurp(pathf("dest/opq/new")), "n");
        CHECK(!exists(pathf("dest/dir")));
        CHECK(!exists(pathf("dest/opq/.wh..wh..opq")));
        struct stat st; /* a symlink of the upper layer replaced a whole lower directory */
        CHECK(lstat(pathf("dest/tree"), &st) == 0 && S_ISLNK(st.st_mode));
        check_mount_points();
        close(fds[0]);
        close(fds[1]);
        tmp_teardown();
}

/* A whiteout never acts through a symlink: not one planted as a parent in a lower layer, not
 * one naming the host, and ".." is refused. */
static void test_image_layers__whiteout_escapes(void)
{
        tmp_setup();
        static const struct ent lower[] = {
            {.path = "etc", .kind = DIR_},
            {.path = "etc/passwd", .kind = REG, .data = "root"},
            {.path = "alias", .kind = SYMLINK, .link = "/etc"},
            {.path = "up", .kind = SYMLINK, .link = "../../canary"},
            {.path = "link", .kind = SYMLINK, .link = "/etc/passwd"},
        };
        static const struct ent upper[] = {
            {.path = "alias/.wh.passwd", .kind = REG},
            {.path = "up/.wh.file", .kind = REG},
            {.path = ".wh.link", .kind = REG},
            {.path = "alias/.wh..wh..opq", .kind = REG},
        };
        static const struct ent dotdot[] = {{.path = "a/../../.wh.canary", .kind = REG}};
        int fds[] = {make_archive(lower, ELEMENTSOF(lower), PLAIN),
                     make_archive(upper, ELEMENTSOF(upper), PLAIN)};
        struct result r = apply_layers(fds, 2);
        CHECK_EQ_INT(r.r, 0);
        CHECK_EQ_STR(slurp(pathf("dest/etc/passwd")), "root");
        CHECK(!exists(pathf("dest/link")));
        struct stat st;
        CHECK(lstat(pathf("dest/alias"), &st) == 0 && S_ISLNK(st.st_mode));
        check_canary();
        int fd = make_archive(dotdot, 1, PLAIN);
        CHECK(archive_has(fd, "a/../../.wh.canary"));
        r = apply_layers(&fd, 1);
        CHECK(r.r < 0);
        check_canary();
        close(fd);
        close(fds[0]);
        close(fds[1]);
        tmp_teardown();
}

/* image_apply_layer works in the working directory (the new root once chrooted): a whiteout
 * resolves below it, never from the real "/". Applied here without a chroot, the way
 * tests/fuzz/fuzz_tar.c applies layers, a whiteout spelling the host path of the canary must
 * not reach it, and one naming a path of the tree removes it from the tree. */
static void test_image_layers__whiteout_below_cwd(void)
{
        tmp_setup();
        char host_canary[512];
        snprintf(host_canary, sizeof(host_canary), "%s/canary/.wh.file", tmp_root + 1);
        const struct ent lower[] = {
            {.path = "etc", .kind = DIR_},
            {.path = "etc/gone", .kind = REG, .data = "x"},
        };
        const struct ent upper[] = {
            {.path = host_canary, .kind = REG},
            {.path = "etc/.wh.gone", .kind = REG},
        };
        int fds[] = {make_archive(lower, ELEMENTSOF(lower), PLAIN),
                     make_archive(upper, ELEMENTSOF(upper), PLAIN)};
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
                uint64_t bytes = 0;
                char err[256];
                if (chdir(pathf("dest")) < 0)
                        _exit(2);
                for (size_t i = 0; i < ELEMENTSOF(fds); i++)
                        if (lseek(fds[i], 0, SEEK_SET) < 0 ||
                            image_apply_layer(fds[i], true, &bytes, err, sizeof(err)) < 0)
                                _exit(3);
                _exit(0);
        }
        int status = -1;
        waitpid(pid, &status, 0);
        CHECK_EQ_INT(status, 0);
        check_canary();
        CHECK(!exists(pathf("dest/etc/gone")));
        CHECK(exists(pathf("dest/etc")));
        close(fds[0]);
        close(fds[1]);
        tmp_teardown();
}

int main(void)
{
        if (geteuid() != 0) {
                UNIT_SKIP_ALL("needs root (chroot, chown)");
        }
        RUN(test_image_unpack__plain);
        RUN(test_image_unpack__gzip);
        RUN(test_image_unpack__zstd);
        RUN(test_image_unpack__xz);
        RUN(test_image_unpack__large_binary_file);
        RUN(test_image_unpack__owners_clamped);
        RUN(test_image_unpack__negative_owners_clamped);
        RUN(test_image_unpack__hardlink_to_symlink_keeps_target);
        RUN(test_image_unpack__devices_skipped);
        RUN(test_image_unpack__dotdot_refused);
        RUN(test_image_unpack__absolute_path_not_on_host);
        RUN(test_image_unpack__symlink_to_root_not_followed);
        RUN(test_image_unpack__symlink_to_host_dir_not_followed);
        RUN(test_image_unpack__hardlink_out_refused);
        RUN(test_image_unpack__mount_points_replaced);
        RUN(test_image_unpack__garbage);
        RUN(test_image_unpack__truncated);
        RUN(test_image_unpack__missing_dest);
        RUN(test_image_layers__whiteouts);
        RUN(test_image_layers__whiteout_escapes);
        RUN(test_image_layers__whiteout_below_cwd);
        UNIT_EXIT();
}

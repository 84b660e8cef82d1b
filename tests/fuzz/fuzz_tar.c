/* Tar import: an image layer as a hostile registry or user may send it, in any compression
 * libarchive detects, applied the way an OCI pull applies its layers (src/lib/image.c,
 * image_apply_layer with whiteouts) -- twice over the same tree, so that whiteouts, opaque
 * directories, links and overwrites meet what the first pass left -- then image_finish_root.
 *
 * The real helper chroots into the new tree first; a fuzzer cannot (it writes its corpus and
 * artifacts by path), so the layer is applied into the working directory, AREA/root, and the
 * invariants say what the chroot would otherwise hide: nothing appears beside it (AREA holds
 * only root, an empty sentinel directory and a file "outside" that must stay as it is, with
 * one name), no device node and no owner above 65535 is left in the tree.
 *
 * Containment: the target runs as root, so an escape it finds must not damage the machine.
 * LLVMFuzzerInitialize applies Landlock before the first input: read everywhere, write only
 * beneath AREA and the fuzz work directory (corpus, artifacts). AREA is made in
 * $PADDOCK_FUZZ_SCRATCH (else in /tmp); the work directory is $PADDOCK_FUZZ_WORK (else the
 * directory the fuzzer was started in). Without Landlock the target refuses to run (a
 * "fuzz_tar: SKIP: ..." line, which tests/fuzz/run.sh reports as skipped) unless
 * PADDOCK_FUZZ_UNCONFINED=1. */
#include "fuzz.h"
#include "lib/confine.h"
#include "lib/image.h"
#include "lib/util.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <ftw.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>

#define OUTSIDE_TEXT "untouched\n"
/* Per input: small trees only (a bomb would only measure the disk). */
#define MAX_ENTRIES    512
#define MAX_DATA_BYTES (4u << 20)

static char area[4096];
static int area_fd = -1, start_fd = -1;
static struct timespec outside_mtime;

static void die(const char *what, int r)
{
        fprintf(stderr, "fuzz_tar: %s: %s\n", what, strerror(r < 0 ? -r : r));
        exit(1);
}

static void remove_area(void)
{
        if (area_fd < 0)
                return;
        char parent[4096], *slash;
        snprintf(parent, sizeof(parent), "%s", area);
        slash = strrchr(parent, '/');
        *slash = 0;
        int pfd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (pfd >= 0) {
                rm_rf_at(pfd, slash + 1);
                close(pfd);
        }
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
        const char *scratch = getenv("PADDOCK_FUZZ_SCRATCH");
        const char *work = getenv("PADDOCK_FUZZ_WORK");
        char cwd[4096];
        if (!getcwd(cwd, sizeof(cwd)))
                die("getcwd", errno);
        snprintf(area, sizeof(area), "%s/fuzz_tar.XXXXXX", scratch && *scratch ? scratch : "/tmp");
        if (!mkdtemp(area))
                die(area, errno);
        if ((area_fd = open(area, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
                die(area, errno);
        atexit(remove_area);
        if (mkdirat(area_fd, "sentinel", 0755) < 0)
                die("sentinel", errno);
        int fd = openat(area_fd, "outside", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd < 0 || write(fd, OUTSIDE_TEXT, strlen(OUTSIDE_TEXT)) != (ssize_t)strlen(OUTSIDE_TEXT))
                die("outside", errno);
        /* A time of its own, which no archive entry is likely to restore by chance. */
        struct timespec times[2] = {{1234567890, 123456789}, {1234567890, 123456789}};
        struct stat st;
        if (futimens(fd, times) < 0 || fstat(fd, &st) < 0)
                die("outside", errno);
        outside_mtime = st.st_mtim;
        close(fd);
        if ((start_fd = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
                die("cwd", errno);

        const char *dirs[] = {area, work && *work ? work : cwd};
        int r = landlock_restrict_writes(dirs, ELEMENTSOF(dirs));
        if (r == -EOPNOTSUPP) {
                const char *u = getenv("PADDOCK_FUZZ_UNCONFINED");
                if (!u || strcmp(u, "1") != 0) {
                        /* run.sh reports this line as a skip (any exit code of libFuzzer's
                         * own, 77 included, means a finding). */
                        fprintf(stderr, "fuzz_tar: SKIP: this kernel has no Landlock; refusing to "
                                        "apply hostile archives as root without it "
                                        "(PADDOCK_FUZZ_UNCONFINED=1 runs it anyway)\n");
                        remove_area();
                        _exit(0);
                }
                fprintf(stderr, "fuzz_tar: no Landlock, running UNCONFINED\n");
        } else if (r < 0) {
                remove_area();
                die("landlock", r);
        } else {
                fprintf(stderr, "fuzz_tar: writes confined to %s and %s\n", dirs[0], dirs[1]);
        }

        /* A file the input grows without bound fails with EFBIG instead of filling the disk. */
        struct rlimit fsize = {64u << 20, 64u << 20};
        signal(SIGXFSZ, SIG_IGN);
        if (setrlimit(RLIMIT_FSIZE, &fsize) < 0)
                die("RLIMIT_FSIZE", errno);
        umask(0); /* as image_enter_root does */
        return 0;
}

/* A mutated tar header almost never keeps a valid checksum, and libarchive (not instrumented)
 * rejects it without a hint: after each mutation, every 512-byte block of an uncompressed
 * input that carries the ustar magic gets its checksum recomputed. Inputs stay archives. */
size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t max_size);
size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed);

size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed)
{
        (void)seed;
        size = LLVMFuzzerMutate(data, size, max_size);
        for (size_t off = 0; off + 512 <= size; off += 512) {
                uint8_t *h = data + off;
                if (memcmp(h + 257, "ustar", 5) != 0)
                        continue;
                unsigned sum = 0;
                for (size_t i = 0; i < 512; i++)
                        sum += i >= 148 && i < 156 ? ' ' : h[i];
                char field[9];
                snprintf(field, sizeof(field), "%06o", sum & 0777777);
                memcpy(h + 148, field, 6);
                h[154] = 0;
                h[155] = ' ';
        }
        return size;
}

/* Worth applying: an archive libarchive reads (the formats image.c reads) of a small tree. */
static bool small_archive(const uint8_t *data, size_t size)
{
        struct archive *a = archive_read_new();
        if (!a)
                abort();
        archive_read_support_filter_all(a);
        archive_read_support_format_tar(a);
        archive_read_support_format_gnutar(a);
        bool ok = archive_read_open_memory(a, data, size) == ARCHIVE_OK;
        size_t n = 0;
        uint64_t bytes = 0;
        struct archive_entry *e;
        while (ok && archive_read_next_header(a, &e) == ARCHIVE_OK) {
                la_int64_t s = archive_entry_size(e);
                bytes += s > 0 ? (uint64_t)s : 0;
                if (++n > MAX_ENTRIES || bytes > MAX_DATA_BYTES)
                        ok = false;
        }
        archive_read_free(a);
        return ok;
}

static int check_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
        (void)flag, (void)ftw;
        if (S_ISCHR(st->st_mode) || S_ISBLK(st->st_mode))
                fprintf(stderr, "device node %s\n", path);
        FUZZ_ASSERT(!S_ISCHR(st->st_mode) && !S_ISBLK(st->st_mode));
        if (st->st_uid > 65535 || st->st_gid > 65535)
                fprintf(stderr, "%s owned by %u:%u\n", path, st->st_uid, st->st_gid);
        FUZZ_ASSERT(st->st_uid <= 65535 && st->st_gid <= 65535);
        return 0;
}

static void check_invariants(void)
{
        /* AREA: exactly root, sentinel, outside. */
        int dfd = openat(area_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        FUZZ_ASSERT(dfd >= 0);
        DIR *d = fdopendir(dfd);
        FUZZ_ASSERT(d);
        struct dirent *de;
        while ((de = readdir(d))) {
                const char *n = de->d_name;
                bool known = !strcmp(n, ".") || !strcmp(n, "..") || !strcmp(n, "root") ||
                             !strcmp(n, "sentinel") || !strcmp(n, "outside");
                if (!known)
                        fprintf(stderr, "created beside the tree: %s/%s\n", area, n);
                FUZZ_ASSERT(known);
        }
        closedir(d);

        /* The sentinel directory stays empty. */
        dfd = openat(area_fd, "sentinel", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        FUZZ_ASSERT(dfd >= 0);
        d = fdopendir(dfd);
        FUZZ_ASSERT(d);
        while ((de = readdir(d))) {
                bool dot = !strcmp(de->d_name, ".") || !strcmp(de->d_name, "..");
                if (!dot)
                        fprintf(stderr, "created in the sentinel: %s\n", de->d_name);
                FUZZ_ASSERT(dot);
        }
        closedir(d);

        /* The file outside: same content, mode, owner and time, still its only name. */
        struct stat st;
        FUZZ_ASSERT(fstatat(area_fd, "outside", &st, AT_SYMLINK_NOFOLLOW) == 0);
        FUZZ_ASSERT(S_ISREG(st.st_mode) && (st.st_mode & 07777) == 0644);
        FUZZ_ASSERT(st.st_uid == geteuid() && st.st_gid == getegid());
        FUZZ_ASSERT(st.st_nlink == 1);
        FUZZ_ASSERT(st.st_mtim.tv_sec == outside_mtime.tv_sec &&
                    st.st_mtim.tv_nsec == outside_mtime.tv_nsec);
        char buf[64];
        int fd = openat(area_fd, "outside", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        FUZZ_ASSERT(fd >= 0);
        ssize_t n = read(fd, buf, sizeof(buf));
        close(fd);
        FUZZ_ASSERT(n == (ssize_t)strlen(OUTSIDE_TEXT) && !memcmp(buf, OUTSIDE_TEXT, (size_t)n));

        /* The tree itself: still a directory; no device nodes, no owner above 65535. */
        FUZZ_ASSERT(fstatat(area_fd, "root", &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode));
        char root[4200];
        snprintf(root, sizeof(root), "%s/root", area);
        FUZZ_ASSERT(nftw(root, check_entry, 16, FTW_PHYS) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        if (!small_archive(data, size))
                return 0;
        int fd = memfd_create("layer", MFD_CLOEXEC);
        FUZZ_ASSERT(fd >= 0);
        FUZZ_ASSERT(write(fd, data, size) == (ssize_t)size);

        FUZZ_ASSERT(mkdirat(area_fd, "root", 0755) == 0);
        int root = openat(area_fd, "root", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        FUZZ_ASSERT(root >= 0 && fchdir(root) == 0);
        char err[512];
        uint64_t bytes = 0;
        /* The second pass runs even when the first failed half-way: more trees to meet. */
        for (int pass = 0; pass < 2; pass++) {
                FUZZ_ASSERT(lseek(fd, 0, SEEK_SET) == 0);
                (void)image_apply_layer(fd, true, &bytes, err, sizeof(err));
        }
        (void)image_finish_root(err, sizeof(err));
        /* Back where libFuzzer expects to be before anything can abort. */
        FUZZ_ASSERT(fchdir(start_fd) == 0);
        close(root);
        close(fd);

        check_invariants();
        FUZZ_ASSERT(rm_rf_at(area_fd, "root") == 0);
        return 0;
}

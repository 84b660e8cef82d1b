/* Unit tests of src/lib/files.c: path handling, the record format, and every operation run
 * with files_run against a temp directory standing in for an environment's root.
 *
 * Layout under /var/tmp/paddock-unit-files-XXXXXX: root/ is the "environment", canary/file
 * sits next to it on the "host". Symlinks planted inside root point at "/", "../../..", the
 * canary's absolute path and the canary's directory; nothing may reach the canary through them.
 * Status and data go to memfds, so no operation can block on a pipe. Archive extraction relies
 * on the process root (as in the helper), so it runs in a forked child chrooted into root/; that
 * part needs root and is skipped otherwise. */
#include "lib/files.h"
#include "lib/util.h"
#include "unit.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <ftw.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

static char tmp[256], rootdir[300], canary[300], canary_dir[300];
static int root_fd = -EBADF;

static void put(const char *rel, const char *text)
{
        char p[600];
        snprintf(p, sizeof(p), "%s/%s", tmp, rel);
        int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0 || write_all(fd, text, strlen(text)) < 0) {
                perror(p);
                exit(2);
        }
        close(fd);
}

static void link_in_root(const char *target, const char *name)
{
        char p[600];
        snprintf(p, sizeof(p), "%s/%s", rootdir, name);
        if (symlink(target, p) < 0) {
                perror(p);
                exit(2);
        }
}

static void setup(void)
{
        snprintf(tmp, sizeof(tmp), "/var/tmp/paddock-unit-files-XXXXXX");
        if (!mkdtemp(tmp)) {
                perror("mkdtemp");
                exit(2);
        }
        snprintf(rootdir, sizeof(rootdir), "%s/root", tmp);
        snprintf(canary_dir, sizeof(canary_dir), "%s/canary", tmp);
        snprintf(canary, sizeof(canary), "%s/canary/file", tmp);
        char p[600];
        mkdir(rootdir, 0755);
        mkdir(canary_dir, 0755);
        snprintf(p, sizeof(p), "%s/etc", rootdir);
        mkdir(p, 0755);
        snprintf(p, sizeof(p), "%s/tmp", rootdir);
        mkdir(p, 01777);
        put("canary/file", "CANARY");
        put("root/etc/passwd", "root:x:0:0::/root:/bin/sh\nuser:x:1000:1000::/home/user:/bin/sh\n");
        link_in_root("/", "to_root");
        link_in_root("../../..", "to_up");
        link_in_root(canary, "to_canary");
        link_in_root(canary_dir, "to_canary_dir");
        root_fd = open(rootdir, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (root_fd < 0) {
                perror(rootdir);
                exit(2);
        }
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
        remove(path);
        return 0;
}

static void teardown(void)
{
        /* The canary is exactly as it was, alone in its directory. */
        char buf[64] = "";
        int fd = open(canary, O_RDONLY | O_CLOEXEC);
        ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
        if (fd >= 0)
                close(fd);
        buf[n > 0 ? n : 0] = 0;
        CHECK_EQ_STR(buf, "CANARY");
        int entries = 0;
        DIR *d = opendir(canary_dir);
        for (struct dirent *de; d && (de = readdir(d));)
                entries += de->d_name[0] != '.';
        if (d)
                closedir(d);
        CHECK_EQ_INT(entries, 1);
        close(root_fd);
        nftw(tmp, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

struct result {
        int r;
        struct files_status last;
        int n_ready;
        char *data;
        size_t len;
};

static void result_free(struct result *res)
{
        free(res->data);
        res->data = NULL;
}

static int memfd(const char *name)
{
        int fd = memfd_create(name, MFD_CLOEXEC);
        if (fd < 0) {
                perror("memfd_create");
                exit(2);
        }
        return fd;
}

static void collect(int sfd, int dfd, struct result *res)
{
        lseek(sfd, 0, SEEK_SET);
        struct files_status st;
        while (read(sfd, &st, sizeof(st)) == sizeof(st)) {
                if (st.phase == FILES_READY)
                        res->n_ready++;
                else
                        res->last = st;
        }
        off_t size = lseek(dfd, 0, SEEK_END);
        res->data = malloc((size_t)size + 1);
        res->len = (size_t)pread(dfd, res->data, (size_t)size, 0);
        res->data[res->len] = 0;
}

static int run(const struct files_request *rq, struct result *res)
{
        *res = (struct result){0};
        int sfd = memfd("status"), dfd = memfd("data");
        res->r = files_run(root_fd, rq, sfd, dfd);
        collect(sfd, dfd, res);
        close(sfd);
        close(dfd);
        CHECK_EQ_INT(res->last.phase, FILES_DONE);
        CHECK_EQ_INT(res->last.err, res->r);
        if (rq->op != FILES_READ && rq->op != FILES_LIST && rq->op != FILES_STAT &&
            rq->op != FILES_ARCHIVE_OUT)
                result_free(res); /* no data */
        return res->r;
}

static int read_file(const char *path, uint64_t max, struct result *res)
{
        struct files_request rq = {
            .op = FILES_READ, .path = path, .max_bytes = max, .mode = -1, .upload_fd = -1};
        return run(&rq, res);
}

static int write_file(const char *path, const char *text, bool parents)
{
        int up = memfd("upload");
        write_all(up, text, strlen(text));
        struct files_request rq = {
            .op = FILES_WRITE, .path = path, .upload_fd = up, .mode = -1, .parents = parents};
        struct result res;
        int r = run(&rq, &res);
        close(up);
        result_free(&res);
        return r;
}

static bool exists_in_root(const char *rel)
{
        struct stat st;
        char p[600];
        snprintf(p, sizeof(p), "%s/%s", rootdir, rel);
        return lstat(p, &st) == 0;
}

/* ---------------------------------------------------------------- paths and records */

static void test_files_path__normalize(void)
{
        char out[FILES_PATH_MAX + 2];
        static const char *const cases[][2] = {
            {"/", "/"},
            {"//", "/"},
            {"/a/b", "/a/b"},
            {"/a//b/", "/a/b"},
            {"/./a/./b/.", "/a/b"},
            {"/../..", "/../.."},
            {"/a/../b", "/a/../b"},
            {"/...", "/..."},
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                CHECK_EQ_INT(files_path_normalize(cases[i][0], out, sizeof(out)), 0);
                CHECK_EQ_STR(out, cases[i][1]);
        }
        CHECK_EQ_INT(files_path_normalize("a/b", out, sizeof(out)), -EINVAL);
        CHECK_EQ_INT(files_path_normalize("", out, sizeof(out)), -EINVAL);
        CHECK_EQ_INT(files_path_normalize(NULL, out, sizeof(out)), -EINVAL);
        char longname[300] = "/";
        memset(longname + 1, 'x', 256);
        CHECK_EQ_INT(files_path_normalize(longname, out, sizeof(out)), -ENAMETOOLONG);
        char longpath[FILES_PATH_MAX + 10];
        for (size_t i = 0; i < sizeof(longpath) - 1; i++)
                longpath[i] = i % 2 ? 'a' : '/';
        longpath[sizeof(longpath) - 1] = 0;
        CHECK_EQ_INT(files_path_normalize(longpath, out, sizeof(out)), -ENAMETOOLONG);
        longpath[FILES_PATH_MAX - 1] = 0; /* 4095 bytes: the longest allowed */
        CHECK_EQ_INT(files_path_normalize(longpath, out, sizeof(out)), 0);
}

static void test_files_path__split(void)
{
        char parent[FILES_PATH_MAX];
        const char *name = NULL;
        CHECK_EQ_INT(files_path_split("/a", parent, sizeof(parent), &name), 0);
        CHECK_EQ_STR(parent, "/");
        CHECK_EQ_STR(name, "a");
        CHECK_EQ_INT(files_path_split("/a/b/c", parent, sizeof(parent), &name), 0);
        CHECK_EQ_STR(parent, "/a/b");
        CHECK_EQ_STR(name, "c");
        CHECK_EQ_INT(files_path_split("/a/..", parent, sizeof(parent), &name), 0);
        CHECK_EQ_STR(name, "..");
        CHECK_EQ_INT(files_path_split("/", parent, sizeof(parent), &name), -EINVAL);
}

static void test_files_entry__malformed(void)
{
        struct files_entry e = {.type = FILES_T_FILE, .name_len = 3, .target_len = 0};
        char buf[sizeof(e) + 3];
        memcpy(buf, &e, sizeof(e));
        memcpy(buf + sizeof(e), "abc", 3);
        size_t off = 0;
        struct files_entry got;
        const char *name, *target;
        CHECK_EQ_INT(files_entry_next(buf, sizeof(buf), &off, &got, &name, &target), 1);
        CHECK(got.name_len == 3 && !memcmp(name, "abc", 3));
        CHECK_EQ_INT(files_entry_next(buf, sizeof(buf), &off, &got, &name, &target), 0);
        off = 0; /* cut */
        CHECK_EQ_INT(files_entry_next(buf, sizeof(buf) - 1, &off, &got, &name, &target), -EBADMSG);
        e.name_len = 4000; /* lies about its size */
        memcpy(buf, &e, sizeof(e));
        off = 0;
        CHECK_EQ_INT(files_entry_next(buf, sizeof(buf), &off, &got, &name, &target), -EBADMSG);
        e.name_len = 3;
        e.type = 9;
        memcpy(buf, &e, sizeof(e));
        off = 0;
        CHECK_EQ_INT(files_entry_next(buf, sizeof(buf), &off, &got, &name, &target), -EBADMSG);
}

/* ---------------------------------------------------------------- operations */

static void test_files_read__symlinks_resolve_inside(void)
{
        setup();
        struct result res;
        const char *inside[] = {"/etc/passwd", "/../../etc/passwd", "/to_root/etc/passwd",
                                "/to_up/etc/passwd", "/to_up/to_root/to_up/etc/passwd"};
        for (size_t i = 0; i < ELEMENTSOF(inside); i++) {
                CHECK_EQ_INT(read_file(inside[i], FILES_DEFAULT_MAX_READ, &res), 0);
                CHECK(res.n_ready == 1 && !strncmp(res.data, "root:x:0:0", 10));
                result_free(&res);
        }
        char p[700];
        const char *outside[] = {canary, "/to_canary", "/to_canary_dir/file", p};
        snprintf(p, sizeof(p), "/to_up%s", canary);
        for (size_t i = 0; i < ELEMENTSOF(outside); i++) {
                CHECK_EQ_INT(read_file(outside[i], FILES_DEFAULT_MAX_READ, &res), -ENOENT);
                CHECK(strstr(res.data, "CANARY") == NULL && res.n_ready == 0);
                result_free(&res);
        }
        teardown();
}

static void test_files_read__not_regular_and_limits(void)
{
        setup();
        char p[600];
        snprintf(p, sizeof(p), "%s/fifo", rootdir);
        mkfifo(p, 0644);
        struct result res;
        uint64_t t0 = now_ms();
        CHECK_EQ_INT(read_file("/fifo", FILES_DEFAULT_MAX_READ, &res), -EINVAL);
        CHECK(now_ms() - t0 < 2000);
        CHECK(strstr(res.last.msg, "not a regular file") != NULL);
        result_free(&res);
        CHECK_EQ_INT(read_file("/etc", FILES_DEFAULT_MAX_READ, &res), -EISDIR);
        result_free(&res);
        CHECK_EQ_INT(read_file("/etc/passwd", 5, &res), -EFBIG);
        result_free(&res);
        snprintf(p, sizeof(p), "%s/sparse", rootdir);
        int fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        CHECK(fd >= 0 && ftruncate(fd, (off_t)(2ull << 30)) == 0);
        close(fd);
        CHECK_EQ_INT(read_file("/sparse", FILES_DEFAULT_MAX_READ, &res), -EFBIG);
        result_free(&res);
        teardown();
}

static void test_files_write__replaces_symlinks_and_stays_inside(void)
{
        setup();
        struct result res;
        /* a symlink at the name is replaced, never written through */
        CHECK_EQ_INT(write_file("/to_canary", "mine", false), 0);
        CHECK_EQ_INT(read_file("/to_canary", FILES_DEFAULT_MAX_READ, &res), 0);
        CHECK_EQ_STR(res.data, "mine");
        result_free(&res);
        /* through symlinked directories: inside */
        CHECK_EQ_INT(write_file("/to_up/tmp/a", "a", false), 0);
        CHECK(exists_in_root("tmp/a"));
        /* a dangling symlinked directory is not created through */
        CHECK_EQ_INT(write_file("/to_canary_dir/x", "x", true), -ENOENT);
        char p[700];
        snprintf(p, sizeof(p), "/to_root%s", canary);
        CHECK_EQ_INT(write_file(p, "x", false), -ENOENT);
        CHECK_EQ_INT(write_file(p, "x", true), 0); /* parents: made inside */
        snprintf(p, sizeof(p), "%s", canary + 1);
        CHECK(exists_in_root(p));
        /* now the canary's path exists inside too, and the same symlink leads there */
        CHECK_EQ_INT(write_file("/to_canary_dir/x", "x", true), 0);
        snprintf(p, sizeof(p), "%s/x", canary_dir + 1);
        CHECK(exists_in_root(p));
        CHECK_EQ_INT(write_file("/etc", "x", false), -EISDIR);
        CHECK_EQ_INT(write_file("/", "x", false), -EINVAL);
        CHECK_EQ_INT(write_file("/tmp/..", "x", false), -EINVAL);
        /* atomic: no temporary file left */
        DIR *d = opendir(rootdir);
        for (struct dirent *de; d && (de = readdir(d));)
                CHECK(strncmp(de->d_name, ".paddock-upload", 15) != 0);
        if (d)
                closedir(d);
        teardown();
}

static void test_files_mkdir_move_remove(void)
{
        setup();
        struct result res;
        struct files_request rq = {.op = FILES_MKDIR,
                                   .path = "/a/b/../c/d",
                                   .mode = 0700,
                                   .parents = true,
                                   .upload_fd = -1};
        CHECK_EQ_INT(run(&rq, &res), 0);
        CHECK(exists_in_root("a/b") && exists_in_root("a/c/d"));
        struct stat st;
        char p[700];
        snprintf(p, sizeof(p), "%s/a/c/d", rootdir);
        CHECK(stat(p, &st) == 0 && (st.st_mode & 07777) == 0700);
        CHECK_EQ_INT(run(&rq, &res), 0); /* -p: existing is fine */
        rq.parents = false;
        CHECK_EQ_INT(run(&rq, &res), -EEXIST);
        CHECK_EQ_INT(write_file("/a/f", "f", false), 0);
        CHECK_EQ_INT(write_file("/a/g", "g", false), 0);
        rq =
            (struct files_request){.op = FILES_MOVE, .path = "/a/f", .to = "/a/g", .upload_fd = -1};
        CHECK_EQ_INT(run(&rq, &res), -EEXIST);
        rq.overwrite = true;
        CHECK_EQ_INT(run(&rq, &res), 0);
        CHECK(!exists_in_root("a/f"));
        /* moving a symlink moves the link */
        rq = (struct files_request){
            .op = FILES_MOVE, .path = "/to_canary", .to = "/moved", .upload_fd = -1};
        CHECK_EQ_INT(run(&rq, &res), 0);
        /* remove: not empty, recursive, a symlink to a directory is removed as a link */
        rq = (struct files_request){.op = FILES_REMOVE, .path = "/a", .upload_fd = -1};
        CHECK_EQ_INT(run(&rq, &res), -ENOTEMPTY);
        rq.recursive = true;
        CHECK_EQ_INT(run(&rq, &res), 0);
        CHECK(!exists_in_root("a"));
        rq.path = "/to_up";
        CHECK_EQ_INT(run(&rq, &res), 0);
        CHECK(exists_in_root("etc/passwd"));
        rq.path = "/";
        CHECK_EQ_INT(run(&rq, &res), -EBUSY);
        rq.path = "/nothing";
        CHECK_EQ_INT(run(&rq, &res), -ENOENT);
        teardown();
}

static void test_files_list_stat(void)
{
        setup();
        struct result res;
        struct files_request rq = {.op = FILES_LIST, .path = "/", .upload_fd = -1};
        CHECK_EQ_INT(run(&rq, &res), 0);
        size_t off = 0, n = 0;
        struct files_entry e;
        const char *name, *target;
        bool saw_link = false;
        while (files_entry_next(res.data, res.len, &off, &e, &name, &target) > 0) {
                n++;
                if (e.name_len == 7 && !memcmp(name, "to_root", 7))
                        saw_link = e.type == FILES_T_SYMLINK;
        }
        CHECK(n == 6 && saw_link && res.last.value == 6 && res.last.count == 0);
        result_free(&res);
        /* a listing through a symlink lists inside */
        rq.path = "/to_canary_dir";
        CHECK_EQ_INT(run(&rq, &res), -ENOENT);
        result_free(&res);
        rq = (struct files_request){.op = FILES_STAT, .path = "/to_canary", .upload_fd = -1};
        CHECK_EQ_INT(run(&rq, &res), 0);
        off = 0;
        CHECK_EQ_INT(files_entry_next(res.data, res.len, &off, &e, &name, &target), 1);
        CHECK(e.type == FILES_T_SYMLINK && e.target_len == strlen(canary) &&
              !memcmp(target, canary, e.target_len));
        result_free(&res);
        /* bounded */
        char p[700];
        snprintf(p, sizeof(p), "%s/many", rootdir);
        mkdir(p, 0755);
        int dfd = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        for (int i = 0; i < FILES_LIST_MAX + 5; i++) {
                char nm[32];
                snprintf(nm, sizeof(nm), "f%d", i);
                close(openat(dfd, nm, O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
        }
        close(dfd);
        rq = (struct files_request){.op = FILES_LIST, .path = "/many", .upload_fd = -1};
        CHECK_EQ_INT(run(&rq, &res), 0);
        CHECK(res.last.value == FILES_LIST_MAX && res.last.count == 1);
        result_free(&res);
        teardown();
}

static void test_files_archive_out__symlinks_not_followed(void)
{
        setup();
        write_file("/tree/sub/f", "data", true);
        link_in_root("../../..", "tree/up");
        link_in_root(canary, "tree/canary");
        struct result res;
        struct files_request rq = {.op = FILES_ARCHIVE_OUT, .path = "/tree", .upload_fd = -1};
        CHECK_EQ_INT(run(&rq, &res), 0);
        CHECK(res.n_ready == 1 && res.last.count == 5 && res.last.value == 4);
        struct archive *a = archive_read_new();
        archive_read_support_format_tar(a);
        CHECK(archive_read_open_memory(a, res.data, res.len) == ARCHIVE_OK);
        struct archive_entry *e;
        int n = 0, links = 0;
        while (archive_read_next_header(a, &e) == ARCHIVE_OK) {
                n++;
                const char *name = archive_entry_pathname(e);
                CHECK(strncmp(name, "tree", 4) == 0);
                if (archive_entry_filetype(e) == AE_IFLNK)
                        links++;
        }
        archive_read_free(a);
        CHECK(n == 5 && links == 2);
        CHECK(memmem(res.data, res.len, "CANARY", 6) == NULL);
        result_free(&res);
        rq.path = "/to_canary_dir";
        CHECK_EQ_INT(run(&rq, &res), 0); /* just the link */
        CHECK(res.last.count == 1);
        result_free(&res);
        teardown();
}

static int make_tar(const char *const *names, const char *const *links, int fd)
{
        struct archive *a = archive_write_new();
        archive_write_set_format_pax_restricted(a);
        archive_write_open_fd(a, fd);
        for (size_t i = 0; names[i]; i++) {
                struct archive_entry *e = archive_entry_new();
                archive_entry_set_pathname(e, names[i]);
                archive_entry_set_mtime(e, 1700000000, 0);
                if (links[i]) {
                        archive_entry_set_filetype(e, AE_IFLNK);
                        archive_entry_set_perm(e, 0777);
                        archive_entry_set_symlink(e, links[i]);
                } else {
                        archive_entry_set_filetype(e, AE_IFREG);
                        archive_entry_set_perm(e, 0644);
                        archive_entry_set_size(e, 1);
                }
                archive_write_header(a, e);
                if (!links[i])
                        archive_write_data(a, "x", 1);
                archive_entry_free(e);
        }
        archive_write_close(a);
        archive_write_free(a);
        return 0;
}

/* Extract in a child chrooted into root/, as the helper's root is the environment's. */
static int archive_in(const char *dir, const char *const *names, const char *const *links)
{
        int up = memfd("tar");
        make_tar(names, links, up);
        pid_t pid = fork();
        if (pid == 0) {
                if (chroot(rootdir) < 0 || chdir("/") < 0)
                        _exit(99);
                int root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
                int sfd = memfd("status");
                struct files_request rq = {.op = FILES_ARCHIVE_IN,
                                           .path = dir,
                                           .upload_fd = up,
                                           .parents = true,
                                           .mode = -1};
                int r = files_run(root, &rq, sfd, -1);
                _exit(r == 0 ? 0 : (-r) & 0x7f);
        }
        int status = 0;
        waitpid(pid, &status, 0);
        close(up);
        return WIFEXITED(status) ? -WEXITSTATUS(status) : -EIO;
}

static void test_files_archive_in__hostile_entries(void)
{
        if (geteuid() != 0) {
                SKIP("needs root for chroot");
                return;
        }
        setup();
        const char *ok[] = {"x/y", "z", NULL}, *okl[] = {NULL, NULL};
        CHECK_EQ_INT(archive_in("/up/ok", ok, okl), 0);
        CHECK(exists_in_root("up/ok/x/y") && exists_in_root("up/ok/z"));
        const char *dd[] = {"a", "../escape", NULL}, *ddl[] = {NULL, NULL};
        CHECK_EQ_INT(archive_in("/up/dd", dd, ddl), -EINVAL);
        CHECK(!exists_in_root("up/escape"));
        char abs[400];
        snprintf(abs, sizeof(abs), "%s/new", canary_dir);
        const char *ab[] = {abs, NULL}, *abl[] = {NULL};
        CHECK_EQ_INT(archive_in("/up/ab", ab, abl), -EINVAL);
        const char *sl[] = {"s", "s/tmp/through", NULL}, *sll[] = {"/", NULL};
        CHECK(archive_in("/up/sl", sl, sll) < 0);
        CHECK(!exists_in_root("tmp/through"));
        const char *sh[] = {"h", "h/new", NULL}, *shl[] = {canary_dir, NULL};
        CHECK(archive_in("/up/sh", sh, shl) < 0);
        /* into a symlinked target: inside */
        CHECK_EQ_INT(archive_in("/to_up/up/via", ok, okl), 0);
        CHECK(exists_in_root("up/via/x/y"));
        teardown(); /* checks the canary directory holds nothing new */
}

int main(void)
{
        RUN(test_files_path__normalize);
        RUN(test_files_path__split);
        RUN(test_files_entry__malformed);
        RUN(test_files_read__symlinks_resolve_inside);
        RUN(test_files_read__not_regular_and_limits);
        RUN(test_files_write__replaces_symlinks_and_stays_inside);
        RUN(test_files_mkdir_move_remove);
        RUN(test_files_list_stat);
        RUN(test_files_archive_out__symlinks_not_followed);
        RUN(test_files_archive_in__hostile_entries);
        UNIT_EXIT();
}

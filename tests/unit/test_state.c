/* Unit tests of the daemon's durable host state: src/lib/state.c (the SQLite database of
 * environments and images, with numbered migrations) and the id-range registry of
 * src/lib/userns.c (one claim file per 65536-id slot, shared by every daemon on the host).
 *
 * Everything lives in a temp dir under /var/tmp/paddock-unit-XXXXXX, removed at the end of each
 * test. The schema checks use the sqlite3 C API directly, independent of state.c. */
#include "lib/state.h"
#include "lib/userns.h"
#include "lib/util.h"
#include "unit.h"

#include <ftw.h>
#include <inttypes.h>
#include <sched.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>

static char tmp_root[256];

/* ---------------------------------------------------------------- fixtures */

static void tmp_setup(void)
{
        snprintf(tmp_root, sizeof(tmp_root), "/var/tmp/paddock-unit-XXXXXX");
        if (!mkdtemp(tmp_root)) {
                perror("mkdtemp");
                exit(2);
        }
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

/* One integer from a query, straight through sqlite3; -1 on any error. */
static long long sql_int(const char *db_path, const char *sql)
{
        sqlite3 *db;
        long long v = -1;
        if (sqlite3_open_v2(db_path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK) {
                sqlite3_stmt *st;
                if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK) {
                        if (sqlite3_step(st) == SQLITE_ROW)
                                v = sqlite3_column_int64(st, 0);
                        sqlite3_finalize(st);
                }
        }
        sqlite3_close(db);
        return v;
}

static int sql_exec(const char *db_path, const char *sql)
{
        sqlite3 *db;
        int rc = sqlite3_open_v2(db_path, &db, SQLITE_OPEN_READWRITE, NULL);
        if (rc == SQLITE_OK)
                rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
        sqlite3_close(db);
        return rc;
}

static struct env_row env(const char *name, int64_t created_at)
{
        struct env_row e = {0};
        snprintf(e.name, sizeof(e.name), "%s", name);
        snprintf(e.kind, sizeof(e.kind), "computer");
        snprintf(e.image, sizeof(e.image), "debian-12");
        snprintf(e.status, sizeof(e.status), "creating");
        e.uid_base = UID_RANGE_FIRST;
        e.created_at = created_at;
        e.spec = (char *)"{\"limits\":{\"memory\":536870912}}";
        return e;
}

static void check_env_eq(const struct env_row *got, const struct env_row *want)
{
        CHECK_EQ_STR(got->name, want->name);
        CHECK_EQ_STR(got->kind, want->kind);
        CHECK_EQ_STR(got->image, want->image);
        CHECK_EQ_STR(got->status, want->status);
        CHECK_EQ_INT(got->uid_base, want->uid_base);
        CHECK_EQ_INT(got->pid, want->pid);
        CHECK(got->pid_start == want->pid_start);
        CHECK_EQ_INT(got->created_at, want->created_at);
        CHECK_EQ_INT(got->expires_at, want->expires_at);
        CHECK_EQ_INT(got->autostart, want->autostart);
        CHECK_EQ_STR(got->spec, want->spec ? want->spec : "{}");
}

static struct state *open_or_die(const char *path)
{
        struct state *s = NULL;
        int r = state_open(path, &s);
        if (r < 0 || !s) {
                fprintf(stderr, "  state_open %s: %s\n", path, strerror(-r));
                exit(2);
        }
        return s;
}

/* ---------------------------------------------------------------- state: schema */

static void test_state_open__creates_schema(void)
{
        tmp_setup();
        const char *db = pathf("state.db");
        struct state *s = NULL;
        CHECK_EQ_INT(state_open(db, &s), 0);
        CHECK(s != NULL);
        state_close(s);
        CHECK(exists(db));
        /* user_version is the number of migrations run, i.e. the highest version this build
         * knows: a fresh file gets v >= 1, v opens again, v + 1 is refused (checked in
         * test_state_open__newer_schema_refused). Not a constant here: migrations are appended
         * as the schema grows. */
        long long v = sql_int(db, "PRAGMA user_version");
        CHECK(v >= 1);
        CHECK_EQ_INT(sql_int(db, "SELECT count(*) FROM sqlite_master WHERE type='table' AND "
                                 "name IN ('envs','images')"),
                     2);
        CHECK_EQ_INT(sql_int(db, "SELECT count(*) FROM envs"), 0);
        /* WAL, as the header says: the journal mode is persistent in the file. */
        sqlite3 *h;
        CHECK_EQ_INT(sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
        sqlite3_stmt *st;
        CHECK_EQ_INT(sqlite3_prepare_v2(h, "PRAGMA journal_mode", -1, &st, NULL), SQLITE_OK);
        CHECK_EQ_INT(sqlite3_step(st), SQLITE_ROW);
        CHECK_EQ_STR((const char *)sqlite3_column_text(st, 0), "wal");
        sqlite3_finalize(st);
        sqlite3_close(h);
        /* Reopening runs nothing twice (a re-run CREATE TABLE would fail the open). */
        s = NULL;
        CHECK_EQ_INT(state_open(db, &s), 0);
        state_close(s);
        CHECK_EQ_INT(sql_int(db, "PRAGMA user_version"), v);
        state_close(NULL); /* a no-op */
        tmp_teardown();
}

static void test_state_open__newer_schema_refused(void)
{
        tmp_setup();
        const char *db = pathf("state.db");
        state_close(open_or_die(db));
        long long v = sql_int(db, "PRAGMA user_version");
        char bump[64];
        snprintf(bump, sizeof(bump), "PRAGMA user_version=%lld", v + 1);
        CHECK_EQ_INT(sql_exec(db, bump), SQLITE_OK);
        struct state *s = (struct state *)0x1;
        CHECK_EQ_INT(state_open(db, &s), -EPROTO);
        CHECK(s == (struct state *)0x1); /* untouched */
        /* nothing was "migrated" down or rewritten */
        CHECK_EQ_INT(sql_int(db, "PRAGMA user_version"), v + 1);
        /* far in the future too */
        CHECK_EQ_INT(sql_exec(db, "PRAGMA user_version=1000"), SQLITE_OK);
        CHECK_EQ_INT(state_open(db, &s), -EPROTO);
        tmp_teardown();
}

/* A database written by the first release (migration 0 only) is brought up to date on open,
 * and its rows survive the upgrade. */
static void test_state_open__migrates_old_schema(void)
{
        tmp_setup();
        const char *db = pathf("state.db");
        sqlite3 *h;
        CHECK_EQ_INT(sqlite3_open_v2(db, &h, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL),
                     SQLITE_OK);
        CHECK_EQ_INT(sqlite3_exec(h,
                                  "CREATE TABLE envs ("
                                  "  name TEXT PRIMARY KEY,"
                                  "  kind TEXT NOT NULL,"
                                  "  image TEXT NOT NULL,"
                                  "  status TEXT NOT NULL,"
                                  "  uid_base INTEGER NOT NULL,"
                                  "  pid INTEGER NOT NULL DEFAULT 0,"
                                  "  pid_start INTEGER NOT NULL DEFAULT 0,"
                                  "  created_at INTEGER NOT NULL,"
                                  "  expires_at INTEGER NOT NULL DEFAULT 0,"
                                  "  autostart INTEGER NOT NULL DEFAULT 0,"
                                  "  spec TEXT NOT NULL);"
                                  "CREATE TABLE images ("
                                  "  name TEXT PRIMARY KEY,"
                                  "  created_at INTEGER NOT NULL,"
                                  "  size INTEGER NOT NULL);"
                                  "INSERT INTO envs (name, kind, image, status, uid_base,"
                                  "  created_at, spec) VALUES ('old', 'sandbox', 'alpine-3',"
                                  "  'stopped', 1048576, 123, '{\"ttl\":60}');"
                                  "INSERT INTO images VALUES ('alpine-3', 100, 4096);"
                                  "PRAGMA user_version=1;",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
        sqlite3_close(h);

        struct state *s = NULL;
        CHECK_EQ_INT(state_open(db, &s), 0);
        if (!s) {
                tmp_teardown();
                return;
        }
        CHECK(sql_int(db, "PRAGMA user_version") >= 1);
        struct env_row *rows = NULL;
        size_t n = 0;
        CHECK_EQ_INT(state_env_list(s, &rows, &n), 0);
        CHECK_EQ_INT(n, 1);
        if (n == 1) {
                CHECK_EQ_STR(rows[0].name, "old");
                CHECK_EQ_STR(rows[0].kind, "sandbox");
                CHECK_EQ_STR(rows[0].status, "stopped");
                CHECK_EQ_INT(rows[0].uid_base, 1048576);
                CHECK_EQ_INT(rows[0].created_at, 123);
                CHECK_EQ_STR(rows[0].spec, "{\"ttl\":60}");
        }
        state_env_rows_free(rows, n);
        struct image_row *imgs = NULL;
        CHECK_EQ_INT(state_image_list(s, &imgs, &n), 0);
        CHECK_EQ_INT(n, 1);
        free(imgs);
        /* and the upgraded file takes new rows */
        struct env_row e = env("new", 200);
        CHECK_EQ_INT(state_env_insert(s, &e), 0);
        state_close(s);
        tmp_teardown();
}

static void test_state_open__bad_paths(void)
{
        tmp_setup();
        struct state *s = (struct state *)0x1;
        /* a missing parent directory */
        CHECK(state_open(pathf("no/such/dir/state.db"), &s) < 0);
        CHECK(s == (struct state *)0x1);
        /* a file that is not a database */
        int fd = open(pathf("junk.db"), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        char junk[4096];
        memset(junk, 'J', sizeof(junk));
        CHECK_EQ_INT(write_all(fd, junk, sizeof(junk)), 0);
        close(fd);
        CHECK(state_open(pathf("junk.db"), &s) < 0);
        CHECK(s == (struct state *)0x1);
        tmp_teardown();
}

/* ---------------------------------------------------------------- state: envs */

static void test_state_env__insert_list_update_delete(void)
{
        tmp_setup();
        struct state *s = open_or_die(pathf("state.db"));
        struct env_row *rows = NULL;
        size_t n = 99;
        CHECK_EQ_INT(state_env_list(s, &rows, &n), 0);
        CHECK_EQ_INT(n, 0);
        state_env_rows_free(rows, n);

        /* inserted out of order: listed by created_at, then name */
        struct env_row b = env("bravo", 2000);
        snprintf(b.kind, sizeof(b.kind), "sandbox");
        b.spec = NULL; /* stored as "{}" */
        struct env_row a = env("alpha", 1000);
        struct env_row c = env("charlie", 2000);
        c.uid_base = 0xffff0000u;
        c.pid = 4194304;
        c.pid_start = UINT64_MAX - 5; /* beyond INT64_MAX: must round-trip bit for bit */
        c.expires_at = INT64_MAX;
        c.autostart = true;
        CHECK_EQ_INT(state_env_insert(s, &b), 0);
        CHECK_EQ_INT(state_env_insert(s, &c), 0);
        CHECK_EQ_INT(state_env_insert(s, &a), 0);
        CHECK_EQ_INT(state_env_list(s, &rows, &n), 0);
        CHECK_EQ_INT(n, 3);
        if (n == 3) {
                check_env_eq(&rows[0], &a);
                check_env_eq(&rows[1], &b);
                check_env_eq(&rows[2], &c);
        }
        state_env_rows_free(rows, n);

        /* update every mutable column */
        snprintf(a.status, sizeof(a.status), "running");
        snprintf(a.image, sizeof(a.image), "alpine-3");
        a.pid = 1234;
        a.pid_start = 987654321;
        a.expires_at = 5000;
        a.autostart = true;
        a.spec = (char *)"{\"ttl\":3600}";
        CHECK_EQ_INT(state_env_update(s, &a), 0);
        CHECK_EQ_INT(state_env_list(s, &rows, &n), 0);
        CHECK_EQ_INT(n, 3);
        if (n == 3)
                check_env_eq(&rows[0], &a);
        state_env_rows_free(rows, n);

        /* delete */
        CHECK_EQ_INT(state_env_delete(s, "bravo"), 0);
        CHECK_EQ_INT(state_env_list(s, &rows, &n), 0);
        CHECK_EQ_INT(n, 2);
        if (n == 2) {
                CHECK_EQ_STR(rows[0].name, "alpha");
                CHECK_EQ_STR(rows[1].name, "charlie");
        }
        state_env_rows_free(rows, n);
        state_close(s);
        tmp_teardown();
}

static void test_state_env__duplicates_and_missing(void)
{
        tmp_setup();
        struct state *s = open_or_die(pathf("state.db"));
        struct env_row a = env("alpha", 1000);
        CHECK_EQ_INT(state_env_insert(s, &a), 0);
        struct env_row dup = env("alpha", 3000);
        snprintf(dup.status, sizeof(dup.status), "running");
        CHECK_EQ_INT(state_env_insert(s, &dup), -EEXIST);
        /* the first row is untouched */
        struct env_row *rows = NULL;
        size_t n = 0;
        CHECK_EQ_INT(state_env_list(s, &rows, &n), 0);
        CHECK_EQ_INT(n, 1);
        if (n == 1)
                check_env_eq(&rows[0], &a);
        state_env_rows_free(rows, n);

        CHECK_EQ_INT(state_env_delete(s, "nope"), -ENOENT);
        struct env_row ghost = env("ghost", 1);
        CHECK_EQ_INT(state_env_update(s, &ghost), -ENOENT);
        CHECK_EQ_INT(state_env_delete(s, "alpha"), 0);
        CHECK_EQ_INT(state_env_delete(s, "alpha"), -ENOENT);
        /* the name is free again */
        CHECK_EQ_INT(state_env_insert(s, &dup), 0);
        state_close(s);
        tmp_teardown();
}

static void test_state_env__survives_reopen(void)
{
        tmp_setup();
        const char *db = pathf("state.db");
        struct state *s = open_or_die(db);
        struct env_row a = env("alpha", 1000), b = env("bravo", 1001);
        b.pid = 77;
        b.pid_start = 4242;
        CHECK_EQ_INT(state_env_insert(s, &a), 0);
        CHECK_EQ_INT(state_env_insert(s, &b), 0);
        CHECK_EQ_INT(state_env_delete(s, "alpha"), 0);
        struct image_row img = {.name = "debian-12", .created_at = 1700000000, .size = 123456789};
        CHECK_EQ_INT(state_image_insert(s, &img), 0);
        state_close(s);

        s = open_or_die(db);
        struct env_row *rows = NULL;
        size_t n = 0;
        CHECK_EQ_INT(state_env_list(s, &rows, &n), 0);
        CHECK_EQ_INT(n, 1);
        if (n == 1)
                check_env_eq(&rows[0], &b);
        state_env_rows_free(rows, n);
        struct image_row *imgs = NULL;
        CHECK_EQ_INT(state_image_list(s, &imgs, &n), 0);
        CHECK_EQ_INT(n, 1);
        if (n == 1) {
                CHECK_EQ_STR(imgs[0].name, "debian-12");
                CHECK_EQ_INT(imgs[0].created_at, 1700000000);
                CHECK_EQ_INT(imgs[0].size, 123456789);
        }
        free(imgs);
        state_close(s);
        tmp_teardown();
}

/* The unsynced writes are the same writes: visible at once, same errors, on disk after close. */
static void test_state_env__unsynced_writes(void)
{
        tmp_setup();
        const char *db = pathf("state.db");
        struct state *s = open_or_die(db);
        struct env_row a = env("alpha", 1000), b = env("bravo", 1001);
        CHECK_EQ_INT(state_env_insert_unsynced(s, &a), 0);
        CHECK_EQ_INT(state_env_insert_unsynced(s, &a), -EEXIST);
        CHECK_EQ_INT(state_env_insert(s, &b), 0); /* a synced one after an unsynced one */
        CHECK_EQ_INT(state_env_delete_unsynced(s, "nope"), -ENOENT);
        CHECK_EQ_INT(state_env_delete_unsynced(s, "bravo"), 0);
        struct env_row *rows = NULL;
        size_t n = 0;
        CHECK_EQ_INT(state_env_list(s, &rows, &n), 0);
        CHECK_EQ_INT(n, 1);
        if (n == 1)
                check_env_eq(&rows[0], &a);
        state_env_rows_free(rows, n);
        state_close(s);

        s = open_or_die(db);
        CHECK_EQ_INT(state_env_list(s, &rows, &n), 0);
        CHECK_EQ_INT(n, 1);
        if (n == 1)
                check_env_eq(&rows[0], &a);
        state_env_rows_free(rows, n);
        state_close(s);
        tmp_teardown();
}

/* ---------------------------------------------------------------- state: images */

static void test_state_image__insert_list_delete(void)
{
        tmp_setup();
        struct state *s = open_or_die(pathf("state.db"));
        struct image_row *rows = NULL;
        size_t n = 99;
        CHECK_EQ_INT(state_image_list(s, &rows, &n), 0);
        CHECK_EQ_INT(n, 0);
        free(rows);

        struct image_row u = {.name = "ubuntu-24.04", .created_at = 3, .size = 1ULL << 40};
        struct image_row a = {.name = "alpine-3", .created_at = 2, .size = 0};
        struct image_row d = {.name = "debian-12", .created_at = 1, .size = 42};
        CHECK_EQ_INT(state_image_insert(s, &u), 0);
        CHECK_EQ_INT(state_image_insert(s, &a), 0);
        CHECK_EQ_INT(state_image_insert(s, &d), 0);
        struct image_row dup = {.name = "alpine-3", .created_at = 9, .size = 9};
        CHECK_EQ_INT(state_image_insert(s, &dup), -EEXIST);

        CHECK_EQ_INT(state_image_list(s, &rows, &n), 0);
        CHECK_EQ_INT(n, 3);
        if (n == 3) { /* ordered by name */
                CHECK_EQ_STR(rows[0].name, "alpine-3");
                CHECK_EQ_INT(rows[0].created_at, 2);
                CHECK_EQ_INT(rows[0].size, 0);
                CHECK_EQ_STR(rows[1].name, "debian-12");
                CHECK_EQ_INT(rows[1].size, 42);
                CHECK_EQ_STR(rows[2].name, "ubuntu-24.04");
                CHECK(rows[2].size == 1ULL << 40);
        }
        free(rows);

        CHECK_EQ_INT(state_image_delete(s, "debian-12"), 0);
        CHECK_EQ_INT(state_image_delete(s, "debian-12"), -ENOENT);
        CHECK_EQ_INT(state_image_delete(s, "never"), -ENOENT);
        CHECK_EQ_INT(state_image_list(s, &rows, &n), 0);
        CHECK_EQ_INT(n, 2);
        if (n == 2) {
                CHECK_EQ_STR(rows[0].name, "alpine-3");
                CHECK_EQ_STR(rows[1].name, "ubuntu-24.04");
        }
        free(rows);
        /* images and envs are separate namespaces */
        struct env_row e = env("alpine-3", 1);
        CHECK_EQ_INT(state_env_insert(s, &e), 0);
        state_close(s);
        tmp_teardown();
}

/* ---------------------------------------------------------------- idrange */

static const char *slot_file(const char *dir, uint32_t base)
{
        static char buf[1024];
        snprintf(buf, sizeof(buf), "%s/%" PRIu32, dir, base);
        return buf;
}

static const char *slurp(const char *path)
{
        static char buf[256];
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return "(missing)";
        ssize_t n = read_full(fd, buf, sizeof(buf) - 1);
        close(fd);
        buf[n < 0 ? 0 : n] = 0;
        return buf;
}

static void test_userns_idrange__claim_and_release(void)
{
        tmp_setup();
        /* the registry dir is created on demand */
        const char *dir = pathf("registry/ids");
        uint32_t b1 = 0, b2 = 0, b3 = 0, b4 = 0;
        CHECK_EQ_INT(idrange_claim(dir, "env-a", &b1), 0);
        CHECK_EQ_INT(b1, UID_RANGE_FIRST);
        CHECK_EQ_STR(slurp(slot_file(dir, b1)), "env-a");
        struct stat st;
        CHECK_EQ_INT(stat(dir, &st), 0);
        CHECK_EQ_INT(st.st_mode & 0777, 0700);
        CHECK_EQ_INT(idrange_claim(dir, "env-b", &b2), 0);
        CHECK_EQ_INT(b2, UID_RANGE_FIRST + UID_RANGE_SIZE);
        CHECK_EQ_INT(idrange_claim(dir, "env-c", &b3), 0);
        CHECK_EQ_INT(b3, UID_RANGE_FIRST + 2 * UID_RANGE_SIZE);
        /* release the middle one: it is the lowest free slot again */
        CHECK_EQ_INT(idrange_release(dir, b2), 0);
        CHECK(!exists(slot_file(dir, b2)));
        CHECK_EQ_INT(idrange_claim(dir, "env-d", &b4), 0);
        CHECK_EQ_INT(b4, b2);
        CHECK_EQ_STR(slurp(slot_file(dir, b4)), "env-d");
        /* releasing what is not claimed is fine */
        CHECK_EQ_INT(idrange_release(dir, UID_RANGE_FIRST + 100 * UID_RANGE_SIZE), 0);
        tmp_teardown();
}

/* The daemon keeps its view of the registry between claims; O_EXCL still decides. */
static void test_userns_idrange__claims_of_another_daemon(void)
{
        tmp_setup();
        const char *dir = pathf("ids");
        uint32_t b = 0;
        CHECK_EQ_INT(idrange_claim(dir, "env-a", &b), 0);
        CHECK_EQ_INT(b, UID_RANGE_FIRST);
        /* another daemon takes the next slot behind this one's back: it is skipped */
        int fd = open(slot_file(dir, UID_RANGE_FIRST + UID_RANGE_SIZE), O_WRONLY | O_CREAT | O_EXCL,
                      0644);
        CHECK(fd >= 0);
        close(fd);
        CHECK_EQ_INT(idrange_claim(dir, "env-b", &b), 0);
        CHECK_EQ_INT(b, UID_RANGE_FIRST + 2 * UID_RANGE_SIZE);
        CHECK_EQ_STR(slurp(slot_file(dir, UID_RANGE_FIRST + UID_RANGE_SIZE)), "");
        /* and releases one: the next claim sees it free again (a directory's time can be
         * coarse, a tick apart from the last claim: wait past it) */
        usleep(20000);
        CHECK_EQ_INT(unlink(slot_file(dir, UID_RANGE_FIRST + UID_RANGE_SIZE)), 0);
        CHECK_EQ_INT(idrange_claim(dir, "env-c", &b), 0);
        CHECK_EQ_INT(b, UID_RANGE_FIRST + UID_RANGE_SIZE);
        /* a registry removed and made again is read anew: its lowest slot is free */
        char cmd[4200];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
        CHECK_EQ_INT(system(cmd), 0);
        usleep(20000);
        CHECK_EQ_INT(idrange_claim(dir, "env-d", &b), 0);
        CHECK_EQ_INT(b, UID_RANGE_FIRST);
        tmp_teardown();
}

/* A release repeated after a crash frees the range only while it is still this owner's. */
static void test_userns_idrange__release_owned(void)
{
        tmp_setup();
        const char *dir = pathf("ids");
        uint32_t b1 = 0, b2 = 0;
        CHECK_EQ_INT(idrange_claim(dir, "root\tenv-a", &b1), 0);
        CHECK_EQ_INT(idrange_release_owned(dir, "root\tenv-a", b1), 0);
        CHECK(!exists(slot_file(dir, b1)));
        CHECK_EQ_INT(idrange_release_owned(dir, "root\tenv-a", b1), 0); /* again: nothing */
        /* claimed by someone else since: stays */
        CHECK_EQ_INT(idrange_claim(dir, "other\tenv-a", &b2), 0);
        CHECK_EQ_INT(b2, b1);
        CHECK_EQ_INT(idrange_release_owned(dir, "root\tenv-a", b1), 0);
        CHECK_EQ_STR(slurp(slot_file(dir, b2)), "other\tenv-a");
        CHECK_EQ_INT(idrange_release_owned(dir, "root\tenv-a", 12345), -EINVAL);
        tmp_teardown();
}

static void test_userns_idrange__owners_never_share(void)
{
        tmp_setup();
        const char *dir = pathf("ids");
        uint32_t bases[40];
        for (int i = 0; i < 40; i++) {
                char owner[32];
                snprintf(owner, sizeof(owner), "env-%d", i);
                CHECK_EQ_INT(idrange_claim(dir, owner, &bases[i]), 0);
                CHECK_EQ_INT((bases[i] - UID_RANGE_FIRST) % UID_RANGE_SIZE, 0);
                for (int j = 0; j < i; j++)
                        CHECK(bases[i] != bases[j]);
        }
        tmp_teardown();
}

/* Several daemons side by side: children claim concurrently and report their bases. */
static void test_userns_idrange__concurrent_claims_unique(void)
{
        enum { PROCS = 6, EACH = 15 };
        tmp_setup();
        const char *dir = pathf("ids");
        int p[2];
        CHECK_EQ_INT(pipe2(p, O_CLOEXEC), 0);
        pid_t pids[PROCS];
        fflush(stdout);
        fflush(stderr);
        for (int k = 0; k < PROCS; k++) {
                pids[k] = fork();
                if (pids[k] < 0) {
                        perror("fork");
                        exit(2);
                }
                if (pids[k] == 0) {
                        for (int i = 0; i < EACH; i++) {
                                char owner[32];
                                uint32_t b = 0;
                                snprintf(owner, sizeof(owner), "d%d-e%d", k, i);
                                if (idrange_claim(dir, owner, &b) < 0)
                                        b = 0;
                                if (write(p[1], &b, sizeof(b)) != sizeof(b))
                                        _exit(1);
                        }
                        _exit(0);
                }
        }
        close(p[1]);
        uint32_t got[PROCS * EACH];
        size_t n = 0;
        uint32_t b;
        while (n < ELEMENTSOF(got) && read_full(p[0], &b, sizeof(b)) == sizeof(b))
                got[n++] = b;
        close(p[0]);
        for (int k = 0; k < PROCS; k++) {
                int st;
                waitpid(pids[k], &st, 0);
                CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
        }
        CHECK_EQ_INT(n, PROCS * EACH);
        for (size_t i = 0; i < n; i++) {
                CHECK(got[i] >= UID_RANGE_FIRST);
                for (size_t j = 0; j < i; j++)
                        if (got[i] == got[j]) {
                                fprintf(stderr, "  base %u handed out twice\n", got[i]);
                                unit_failures++;
                        }
        }
        /* and they are exactly the lowest slots */
        for (uint32_t s = 0; s < PROCS * EACH; s++)
                CHECK(exists(slot_file(dir, UID_RANGE_FIRST + s * UID_RANGE_SIZE)));
        tmp_teardown();
}

static void test_userns_idrange__reclaim(void)
{
        tmp_setup();
        const char *dir = pathf("ids");
        uint32_t b = 0;
        CHECK_EQ_INT(idrange_claim(dir, "env-a", &b), 0);
        CHECK_EQ_INT(idrange_reclaim(dir, "env-a", b), 0);
        CHECK_EQ_INT(idrange_reclaim(dir, "env-b", b), -EEXIST);
        /* prefixes and extensions of the owner are other owners */
        CHECK_EQ_INT(idrange_reclaim(dir, "env-", b), -EEXIST);
        CHECK_EQ_INT(idrange_reclaim(dir, "env-ab", b), -EEXIST);
        CHECK_EQ_STR(slurp(slot_file(dir, b)), "env-a");
        /* reclaiming a free slot takes it, and claim then skips it */
        uint32_t far = UID_RANGE_FIRST + 5 * UID_RANGE_SIZE;
        CHECK_EQ_INT(idrange_reclaim(dir, "env-z", far), 0);
        CHECK_EQ_STR(slurp(slot_file(dir, far)), "env-z");
        CHECK_EQ_INT(idrange_reclaim(dir, "env-y", far), -EEXIST);
        /* after a reboot the registry dir may be gone entirely */
        CHECK_EQ_INT(idrange_reclaim(pathf("fresh/ids"), "env-a", b), 0);
        tmp_teardown();
}

static void test_userns_idrange__unaligned_rejected(void)
{
        tmp_setup();
        const char *dir = pathf("ids");
        uint32_t b = 0;
        CHECK_EQ_INT(idrange_claim(dir, "env-a", &b), 0);
        CHECK_EQ_INT(idrange_release(dir, 12345), -EINVAL);
        CHECK_EQ_INT(idrange_release(dir, 0), -EINVAL);
        CHECK_EQ_INT(idrange_release(dir, UID_RANGE_FIRST - UID_RANGE_SIZE), -EINVAL);
        CHECK_EQ_INT(idrange_release(dir, UID_RANGE_FIRST + 1), -EINVAL);
        CHECK_EQ_INT(idrange_release(dir, UID_RANGE_FIRST + UID_RANGE_SIZE / 2), -EINVAL);
        CHECK_EQ_INT(idrange_reclaim(dir, "env-a", UID_RANGE_FIRST + 1), -EINVAL);
        CHECK_EQ_INT(idrange_reclaim(dir, "env-a", 100000), -EINVAL);
        /* nothing was removed or created by the refusals */
        CHECK(exists(slot_file(dir, UID_RANGE_FIRST)));
        CHECK(!exists(slot_file(dir, UID_RANGE_FIRST + 1)));
        /* a registry path too long for a slot path */
        char *longdir = malloc(5000);
        memset(longdir, 'd', 4999);
        longdir[4999] = 0;
        CHECK_EQ_INT(idrange_release(longdir, UID_RANGE_FIRST), -ENAMETOOLONG);
        free(longdir);
        tmp_teardown();
}

static void full_registry_child(const char *dir)
{
        /* 16000 files are slow to create on some disks: put the registry on a tmpfs in a
         * private mount namespace, which goes away with this process. */
        if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
            mount("tmpfs", dir, "tmpfs", 0, "mode=0700") < 0) {
                perror("  tmpfs for the registry");
                _exit(2);
        }
        for (uint32_t s = 0; s < UID_RANGE_SLOTS; s++) {
                int fd = open(slot_file(dir, UID_RANGE_FIRST + s * UID_RANGE_SIZE),
                              O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
                if (fd < 0) {
                        perror("  create slot");
                        _exit(2);
                }
                close(fd);
        }
        uint32_t b = 7;
        CHECK_EQ_INT(idrange_claim(dir, "late", &b), -ENOSPC);
        CHECK_EQ_INT(b, 7);
        CHECK_EQ_INT(idrange_release(dir, UID_RANGE_FIRST + 9 * UID_RANGE_SIZE), 0);
        CHECK_EQ_INT(idrange_claim(dir, "late", &b), 0);
        CHECK_EQ_INT(b, UID_RANGE_FIRST + 9 * UID_RANGE_SIZE);
        umount2(dir, MNT_DETACH);
}

/* Every slot taken: -ENOSPC, until one is released. */
static void test_userns_idrange__full_registry(void)
{
        tmp_setup();
        const char *dir = pathf("ids");
        CHECK_EQ_INT(mkdir(dir, 0700), 0);
        fflush(stdout);
        fflush(stderr);
        pid_t pid = fork();
        if (pid < 0) {
                perror("fork");
                exit(2);
        }
        if (pid == 0) {
                int before = unit_failures;
                full_registry_child(dir);
                _exit(unit_failures != before);
        }
        int st = 0;
        waitpid(pid, &st, 0);
        CHECK(WIFEXITED(st));
        CHECK_EQ_INT(WEXITSTATUS(st), 0);
        tmp_teardown();
}

/* A user namespace made without waiting for its holder: its maps are the ones asked for,
 * it outlives the holder (held by the fd), and reaping the holder leaves no child behind.
 * Many in a row: each holder has a stack of its own while it dies. */
static void test_userns_create_nowait__maps_and_reap(void)
{
        struct userns_holder hs[16];
        int fds[16];
        for (int i = 0; i < 16; i++) {
                CHECK_EQ_INT(userns_create_nowait(200000 + 65536 * (uint32_t)i, 65536, &fds[i], &hs[i]),
                             0);
                CHECK(hs[i].pid > 0 && hs[i].pidfd >= 0);
        }
        for (int i = 0; i < 16; i++) {
                userns_holder_reap(&hs[i]);
                CHECK(hs[i].pid == 0 && hs[i].pidfd < 0);
        }
        CHECK(waitpid(-1, NULL, WNOHANG) < 0 && errno == ECHILD);
        /* The namespace is alive: a child joining it sees the map. */
        for (int i = 0; i < 16; i += 15) {
                int p[2];
                CHECK(pipe2(p, O_CLOEXEC) == 0);
                fflush(stdout);
                fflush(stderr);
                pid_t pid = fork();
                if (pid == 0) {
                        if (setns(fds[i], CLONE_NEWUSER) < 0)
                                _exit(1);
                        int f = open("/proc/self/uid_map", O_RDONLY | O_CLOEXEC);
                        char buf[128] = "";
                        ssize_t n = f >= 0 ? read(f, buf, sizeof(buf) - 1) : -1;
                        _exit(n > 0 && write(p[1], buf, (size_t)n) == n ? 0 : 1);
                }
                close(p[1]);
                char buf[128] = "";
                ssize_t n = read(p[0], buf, sizeof(buf) - 1);
                close(p[0]);
                int st = 0;
                waitpid(pid, &st, 0);
                CHECK(n > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0);
                unsigned inside = 1, outside = 0, count = 0;
                CHECK(sscanf(buf, "%u %u %u", &inside, &outside, &count) == 3);
                CHECK(inside == 0 && outside == 200000 + 65536 * (unsigned)i && count == 65536);
        }
        for (int i = 0; i < 16; i++)
                close(fds[i]);
}

int main(void)
{
        RUN(test_state_open__creates_schema);
        RUN(test_state_open__newer_schema_refused);
        RUN(test_state_open__migrates_old_schema);
        RUN(test_state_open__bad_paths);
        RUN(test_state_env__insert_list_update_delete);
        RUN(test_state_env__duplicates_and_missing);
        RUN(test_state_env__survives_reopen);
        RUN(test_state_env__unsynced_writes);
        RUN(test_state_image__insert_list_delete);
        RUN(test_userns_idrange__claim_and_release);
        RUN(test_userns_idrange__claims_of_another_daemon);
        RUN(test_userns_idrange__release_owned);
        RUN(test_userns_idrange__owners_never_share);
        RUN(test_userns_idrange__concurrent_claims_unique);
        RUN(test_userns_idrange__reclaim);
        RUN(test_userns_idrange__unaligned_rejected);
        RUN(test_userns_idrange__full_registry);
        RUN(test_userns_create_nowait__maps_and_reap);
        UNIT_EXIT();
}

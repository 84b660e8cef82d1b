#include "lib/state.h"
#include "lib/util.h"

#include <sqlite3.h>
#include <fcntl.h>
#include <sys/stat.h>

/* The statements every create, start, stop and delete runs, each prepared once: parsing them
 * for every write was a tenth of the page faults and several percent of the CPU of a create in
 * the daemon. */
enum cached_sql { SQL_ENV_INSERT, SQL_ENV_UPDATE, SQL_ENV_DELETE, SQL_UNSYNCED, SQL_SYNCED,
                  N_CACHED_SQL };

static const char *const cached_sql_text[N_CACHED_SQL] = {
        [SQL_ENV_INSERT] = "INSERT INTO envs (name, kind, image, status, uid_base, pid, pid_start,"
                           " created_at, expires_at, autostart, spec, ip, owner)"
                           " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
        [SQL_ENV_UPDATE] = "UPDATE envs SET kind=?2, image=?3, status=?4, uid_base=?5, pid=?6,"
                           " pid_start=?7, created_at=?8, expires_at=?9, autostart=?10, spec=?11,"
                           " ip=?12, owner=?13 WHERE name=?1",
        [SQL_ENV_DELETE] = "DELETE FROM envs WHERE name=?1",
        /* synchronous=FULL is the connection's setting; NORMAL for one unsynced write */
        [SQL_UNSYNCED] = "PRAGMA synchronous=NORMAL",
        [SQL_SYNCED] = "PRAGMA synchronous=FULL",
};

struct state {
        sqlite3 *db;
        int wal_fd; /* state_wal_fd; -EBADF until asked for */
        sqlite3_stmt *cached[N_CACHED_SQL]; /* prepared on first use */
};

static void finalizep(sqlite3_stmt **st)
{
        sqlite3_finalize(*st); /* a no-op for NULL */
}
#define _cleanup_stmt_ _cleanup_(finalizep)

/* Numbered migrations: index i brings user_version from i to i+1. Append only. */
static const char *const migrations[] = {
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
        "  size INTEGER NOT NULL);",
        /* 2: networking — each environment's address; published ports. */
        "ALTER TABLE envs ADD COLUMN ip TEXT NOT NULL DEFAULT '';"
        "CREATE TABLE ports ("
        "  proto TEXT NOT NULL,"
        "  host_port INTEGER NOT NULL,"
        "  env TEXT NOT NULL REFERENCES envs(name) ON DELETE CASCADE,"
        "  port INTEGER NOT NULL,"
        "  PRIMARY KEY (proto, host_port));",
        /* 3: the token that created each environment ("" = the administrator). */
        "ALTER TABLE envs ADD COLUMN owner TEXT NOT NULL DEFAULT '';",
        /* 4: API tokens. hash is the SHA-256 (hex) of the secret; the secret is never stored.
         * Limits: 0 = none; max_cpus in thousandths of a CPU; rate in requests per second. */
        "CREATE TABLE tokens ("
        "  name TEXT PRIMARY KEY,"
        "  hash TEXT NOT NULL UNIQUE,"
        "  admin INTEGER NOT NULL DEFAULT 0,"
        "  max_envs INTEGER NOT NULL DEFAULT 0,"
        "  max_cpus INTEGER NOT NULL DEFAULT 0,"
        "  max_memory INTEGER NOT NULL DEFAULT 0,"
        "  max_disk INTEGER NOT NULL DEFAULT 0,"
        "  rate REAL NOT NULL DEFAULT 0,"
        "  expires_at INTEGER NOT NULL DEFAULT 0,"
        "  created_at INTEGER NOT NULL);",
        /* 5: E2B sandboxes (daemon/e2b_api.c): one row per environment made through the E2B
         * API, gone with it. token_hash is the SHA-256 (hex) of its envd access token;
         * metadata is the E2B metadata object as JSON text (keys need not be label keys). */
        "CREATE TABLE e2b_sandboxes ("
        "  id TEXT PRIMARY KEY REFERENCES envs(name) ON DELETE CASCADE,"
        "  template TEXT NOT NULL,"
        "  token_hash TEXT NOT NULL,"
        "  user TEXT NOT NULL,"
        "  home TEXT NOT NULL,"
        "  started_at INTEGER NOT NULL,"
        "  metadata TEXT NOT NULL DEFAULT '{}');",
};

static int sql_err(int rc)
{
        switch (rc) {
        case SQLITE_OK:
        case SQLITE_DONE:
        case SQLITE_ROW:
                return 0;
        case SQLITE_CONSTRAINT:
                return -EEXIST;
        case SQLITE_NOMEM:
                return -ENOMEM;
        case SQLITE_BUSY:
        case SQLITE_LOCKED:
                return -EBUSY;
        case SQLITE_FULL:
                return -ENOSPC;
        case SQLITE_CANTOPEN:
        case SQLITE_PERM:
                return -EACCES;
        default:
                return -EIO;
        }
}

static int exec_sql(sqlite3 *db, const char *sql)
{
        return sql_err(sqlite3_exec(db, sql, NULL, NULL, NULL));
}

static int migrate(sqlite3 *db)
{
        int version;
        {
                _cleanup_stmt_ sqlite3_stmt *st = NULL;
                int rc = sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &st, NULL);
                if (rc != SQLITE_OK)
                        return sql_err(rc);
                version = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int(st, 0) : 0;
        }
        if (version > (int)ELEMENTSOF(migrations))
                return -EPROTO; /* written by a newer paddockd: refuse rather than corrupt */
        for (int v = version; v < (int)ELEMENTSOF(migrations); v++) {
                char bump[64];
                if (BUF_PRINTF(bump, "PRAGMA user_version=%d", v + 1) < 0)
                        return -ENAMETOOLONG;
                int r = exec_sql(db, "BEGIN IMMEDIATE");
                if (r >= 0)
                        r = exec_sql(db, migrations[v]);
                if (r >= 0)
                        r = exec_sql(db, bump);
                if (r >= 0)
                        r = exec_sql(db, "COMMIT");
                if (r < 0) {
                        exec_sql(db, "ROLLBACK");
                        return r;
                }
        }
        return 0;
}

/* chmod dir_fd/name to mode unless it is missing, a symlink or not a regular file or directory.
 * Through an O_PATH fd and its /proc/self/fd link, which names that very inode: a symlink
 * swapped in meanwhile is never followed (what fchmodat(AT_SYMLINK_NOFOLLOW) does). */
static int chmod_nofollow_at(int dir_fd, const char *name, mode_t mode)
{
        _cleanup_close_ int fd = openat(dir_fd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return errno == ENOENT ? 0 : -errno;
        struct stat st;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode))
                return 0;
        if ((st.st_mode & 07777) == mode)
                return 0;
        char link[64];
        if (BUF_PRINTF(link, "/proc/self/fd/%d", fd) < 0)
                return -ENAMETOOLONG;
        return chmod(link, mode) < 0 ? -errno : 0;
}

int state_dir_make_private(const char *root)
{
        static const char *const dirs[] = {"tmp", "pool", "envs", "images"};
        static const char *const files[] = {"paddock.db",    "paddock.db-wal", "paddock.db-shm",
                                            "paddockd.lock", "pool.img",       "storage-driver"};
        _cleanup_close_ int fd = open(root, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        int r = chmod_nofollow_at(fd, ".", 0700);
        for (size_t i = 0; r >= 0 && i < ELEMENTSOF(dirs); i++)
                r = chmod_nofollow_at(fd, dirs[i], 0700);
        for (size_t i = 0; r >= 0 && i < ELEMENTSOF(files); i++)
                r = chmod_nofollow_at(fd, files[i], 0600);
        return r;
}

int state_open(const char *path, struct state **ret)
{
        sqlite3 *db;
        /* The database holds every environment's variables: 0600 from birth. SQLite creates
         * its -wal and -shm files with the database file's mode. */
        mode_t old_umask = umask(0077);
        int rc = sqlite3_open_v2(path, &db,
                                 SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                                 NULL);
        if (rc != SQLITE_OK) {
                umask(old_umask);
                sqlite3_close(db);
                return sql_err(rc);
        }
        sqlite3_busy_timeout(db, 5000);
        int r = exec_sql(db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;"
                             "PRAGMA foreign_keys=ON;");
        if (r >= 0)
                r = migrate(db);
        /* Deleting an environment deletes its ports (ON DELETE CASCADE): without an index on
         * ports.env that is a scan of every published port per delete. Not a numbered
         * migration: idempotent, and it changes no schema a reader depends on. */
        if (r >= 0)
                r = exec_sql(db, "CREATE INDEX IF NOT EXISTS ports_env ON ports(env);");
        umask(old_umask);
        if (r < 0) {
                sqlite3_close(db);
                return r;
        }
        struct state *s = calloc(1, sizeof(*s));
        if (!s) {
                sqlite3_close(db);
                return -ENOMEM;
        }
        s->db = db;
        s->wal_fd = -EBADF;
        *ret = s;
        return 0;
}

void state_close(struct state *s)
{
        if (!s)
                return;
        for (size_t i = 0; i < N_CACHED_SQL; i++)
                sqlite3_finalize(s->cached[i]);
        sqlite3_close(s->db);
        closep(&s->wal_fd);
        free(s);
}

int state_wal_fd(struct state *s)
{
        if (s->wal_fd >= 0)
                return s->wal_fd;
        /* The WAL stays the same file while the connection is open (a checkpoint restarts or
         * truncates it in place), and fsync works on a read-only fd. */
        const char *db = sqlite3_db_filename(s->db, "main");
        char path[4200];
        if (!db || !db[0] || BUF_PRINTF(path, "%s-wal", db) < 0)
                return -ENAMETOOLONG;
        int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return -errno;
        s->wal_fd = fd;
        return fd;
}

static int bind_env(sqlite3_stmt *st, const struct env_row *e)
{
        sqlite3_bind_text(st, 1, e->name, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, e->kind, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 3, e->image, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 4, e->status, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 5, e->uid_base);
        sqlite3_bind_int64(st, 6, e->pid);
        sqlite3_bind_int64(st, 7, (int64_t)e->pid_start);
        sqlite3_bind_int64(st, 8, e->created_at);
        sqlite3_bind_int64(st, 9, e->expires_at);
        sqlite3_bind_int(st, 10, e->autostart);
        sqlite3_bind_text(st, 11, e->spec ? e->spec : "{}", -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 12, e->ip, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 13, e->owner, -1, SQLITE_STATIC);
        return 0;
}

/* ---------------------------------------------------------------- statements */

static int prepare(struct state *s, const char *sql, sqlite3_stmt **ret)
{
        return sql_err(sqlite3_prepare_v2(s->db, sql, -1, ret, NULL));
}

/* A cached statement, ready to bind; give it back with cached_done. */
static int cached(struct state *s, enum cached_sql id, sqlite3_stmt **ret)
{
        if (!s->cached[id]) {
                int rc = sqlite3_prepare_v3(s->db, cached_sql_text[id], -1,
                                            SQLITE_PREPARE_PERSISTENT, &s->cached[id], NULL);
                if (rc != SQLITE_OK)
                        return sql_err(rc);
        }
        *ret = s->cached[id];
        return 0;
}

/* Reset (it holds no lock or transaction) and unbound (no pointer into the caller's memory). */
static int cached_done(sqlite3_stmt *st, int r)
{
        sqlite3_reset(st);
        sqlite3_clear_bindings(st);
        return r;
}

/* Run a bound INSERT/UPDATE/DELETE to the end. */
static int step_done(sqlite3_stmt *st)
{
        return sql_err(sqlite3_step(st));
}

/* The same, for a statement that must change a row: -ENOENT when none matched. */
static int step_changed(struct state *s, sqlite3_stmt *st)
{
        int rc = sqlite3_step(st);
        if (rc != SQLITE_DONE)
                return sql_err(rc);
        return sqlite3_changes(s->db) > 0 ? 0 : -ENOENT;
}

/* A text column into a fixed field; a value that does not fit (written by something other
 * than paddockd, which stores only what fits) is an error, never a different, shorter name. */
static int copy_text(char *dst, size_t len, sqlite3_stmt *st, int col)
{
        const unsigned char *src = sqlite3_column_text(st, col);
        return buf_printf(dst, len, "%s", src ? (const char *)src : "") < 0 ? -EBADMSG : 0;
}
#define COPY_TEXT(field, st, col) copy_text((field), sizeof(field), (st), (col))

/* Step a SELECT to the end, one row_size-byte row per result, filled by fill (the row zeroed
 * first). On failure the rows made so far go to free_rows (NULL: plain free). */
static int collect_rows(sqlite3_stmt *st, size_t row_size, int (*fill)(sqlite3_stmt *, void *),
                        void (*free_rows)(void *, size_t), void **ret, size_t *ret_n)
{
        char *rows = NULL;
        size_t n = 0;
        int rc, r = 0;
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                char *nr = realloc(rows, (n + 1) * row_size);
                if (!nr) {
                        r = -ENOMEM;
                        break;
                }
                rows = nr;
                void *row = rows + n++ * row_size;
                memset(row, 0, row_size);
                if ((r = fill(st, row)) < 0)
                        break;
        }
        if (r >= 0 && rc != SQLITE_DONE)
                r = sql_err(rc);
        if (r < 0) {
                if (free_rows)
                        free_rows(rows, n);
                else
                        free(rows);
                return r;
        }
        *ret = rows;
        *ret_n = n;
        return 0;
}

/* ---------------------------------------------------------------- environments */

static int env_write(struct state *s, enum cached_sql id, const struct env_row *e)
{
        sqlite3_stmt *st = NULL;
        int r = cached(s, id, &st);
        if (r < 0)
                return r;
        bind_env(st, e);
        return cached_done(st, step_changed(s, st));
}

int state_env_insert(struct state *s, const struct env_row *e)
{
        return env_write(s, SQL_ENV_INSERT, e);
}

int state_env_update(struct state *s, const struct env_row *e)
{
        return env_write(s, SQL_ENV_UPDATE, e);
}

static int delete_by_name(struct state *s, const char *sql, const char *name)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = prepare(s, sql, &st);
        if (r < 0)
                return r;
        sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
        return step_changed(s, st);
}

int state_env_delete(struct state *s, const char *name)
{
        sqlite3_stmt *st = NULL;
        int r = cached(s, SQL_ENV_DELETE, &st);
        if (r < 0)
                return r;
        sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
        return cached_done(st, step_changed(s, st));
}

/* Setting the pragma touches no file (it can fail only for lack of memory); its error is
 * returned. */
static int pragma(struct state *s, enum cached_sql id)
{
        sqlite3_stmt *st = NULL;
        int r = cached(s, id, &st);
        return r < 0 ? r : cached_done(st, step_done(st));
}

static int unsynced_begin(struct state *s)
{
        return pragma(s, SQL_UNSYNCED);
}

static int unsynced_end(struct state *s, int r)
{
        int q = pragma(s, SQL_SYNCED);
        return r < 0 ? r : q;
}

int state_env_insert_unsynced(struct state *s, const struct env_row *e)
{
        int r = unsynced_begin(s);
        if (r < 0)
                return r;
        return unsynced_end(s, state_env_insert(s, e));
}

int state_env_update_unsynced(struct state *s, const struct env_row *e)
{
        int r = unsynced_begin(s);
        if (r < 0)
                return r;
        return unsynced_end(s, state_env_update(s, e));
}

int state_env_delete_unsynced(struct state *s, const char *name)
{
        int r = unsynced_begin(s);
        if (r < 0)
                return r;
        return unsynced_end(s, state_env_delete(s, name));
}

static int env_fill(sqlite3_stmt *st, void *row)
{
        struct env_row *e = row;
        int r;
        if ((r = COPY_TEXT(e->name, st, 0)) < 0 || (r = COPY_TEXT(e->kind, st, 1)) < 0 ||
            (r = COPY_TEXT(e->image, st, 2)) < 0 || (r = COPY_TEXT(e->status, st, 3)) < 0 ||
            (r = COPY_TEXT(e->ip, st, 11)) < 0 || (r = COPY_TEXT(e->owner, st, 12)) < 0)
                return r;
        e->uid_base = (uint32_t)sqlite3_column_int64(st, 4);
        e->pid = sqlite3_column_int64(st, 5);
        e->pid_start = (uint64_t)sqlite3_column_int64(st, 6);
        e->created_at = sqlite3_column_int64(st, 7);
        e->expires_at = sqlite3_column_int64(st, 8);
        e->autostart = sqlite3_column_int(st, 9) != 0;
        const unsigned char *spec = sqlite3_column_text(st, 10);
        e->spec = strdup(spec ? (const char *)spec : "{}");
        return e->spec ? 0 : -ENOMEM;
}

static void env_rows_free(void *rows, size_t n)
{
        state_env_rows_free(rows, n);
}

int state_env_list(struct state *s, struct env_row **ret, size_t *ret_n)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = prepare(s,
                        "SELECT name, kind, image, status, uid_base, pid, pid_start,"
                        " created_at, expires_at, autostart, spec, ip, owner FROM envs"
                        " ORDER BY created_at, name",
                        &st);
        if (r < 0)
                return r;
        return collect_rows(st, sizeof(**ret), env_fill, env_rows_free, (void **)ret, ret_n);
}

void state_env_rows_free(struct env_row *rows, size_t n)
{
        for (size_t i = 0; i < n; i++)
                free(rows[i].spec);
        free(rows);
}

/* ---------------------------------------------------------------- images */

int state_image_insert(struct state *s, const struct image_row *i)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = prepare(s, "INSERT INTO images (name, created_at, size) VALUES (?1, ?2, ?3)", &st);
        if (r < 0)
                return r;
        sqlite3_bind_text(st, 1, i->name, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 2, i->created_at);
        sqlite3_bind_int64(st, 3, (int64_t)i->size);
        return step_done(st);
}

int state_image_delete(struct state *s, const char *name)
{
        return delete_by_name(s, "DELETE FROM images WHERE name=?1", name);
}

static int image_fill(sqlite3_stmt *st, void *row)
{
        struct image_row *i = row;
        i->created_at = sqlite3_column_int64(st, 1);
        i->size = (uint64_t)sqlite3_column_int64(st, 2);
        return COPY_TEXT(i->name, st, 0);
}

int state_image_list(struct state *s, struct image_row **ret, size_t *ret_n)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = prepare(s, "SELECT name, created_at, size FROM images ORDER BY name", &st);
        if (r < 0)
                return r;
        return collect_rows(st, sizeof(**ret), image_fill, NULL, (void **)ret, ret_n);
}

/* ---------------------------------------------------------------- ports */

int state_port_insert(struct state *s, const struct port_row *p)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = prepare(
            s, "INSERT INTO ports (proto, host_port, env, port) VALUES (?1, ?2, ?3, ?4)", &st);
        if (r < 0)
                return r;
        sqlite3_bind_text(st, 1, p->proto, -1, SQLITE_STATIC);
        sqlite3_bind_int(st, 2, p->host_port);
        sqlite3_bind_text(st, 3, p->env, -1, SQLITE_STATIC);
        sqlite3_bind_int(st, 4, p->port);
        return step_done(st);
}

int state_port_delete(struct state *s, const char *proto, uint16_t host_port)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = prepare(s, "DELETE FROM ports WHERE proto=?1 AND host_port=?2", &st);
        if (r < 0)
                return r;
        sqlite3_bind_text(st, 1, proto, -1, SQLITE_STATIC);
        sqlite3_bind_int(st, 2, host_port);
        return step_changed(s, st);
}

static int port_fill(sqlite3_stmt *st, void *row)
{
        struct port_row *p = row;
        p->host_port = (uint16_t)sqlite3_column_int(st, 1);
        p->port = (uint16_t)sqlite3_column_int(st, 3);
        int r = COPY_TEXT(p->proto, st, 0);
        return r < 0 ? r : COPY_TEXT(p->env, st, 2);
}

int state_port_list(struct state *s, const char *env, struct port_row **ret, size_t *ret_n)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = prepare(s,
                        "SELECT proto, host_port, env, port FROM ports"
                        " WHERE ?1 IS NULL OR env=?1 ORDER BY host_port, proto",
                        &st);
        if (r < 0)
                return r;
        if (env)
                sqlite3_bind_text(st, 1, env, -1, SQLITE_STATIC);
        return collect_rows(st, sizeof(**ret), port_fill, NULL, (void **)ret, ret_n);
}

/* ---------------------------------------------------------------- tokens */

int state_token_insert(struct state *s, const struct token_row *t)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = prepare(s,
                        "INSERT INTO tokens (name, hash, admin, max_envs, max_cpus, max_memory,"
                        " max_disk, rate, expires_at, created_at)"
                        " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
                        &st);
        if (r < 0)
                return r;
        sqlite3_bind_text(st, 1, t->name, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, t->hash, -1, SQLITE_STATIC);
        sqlite3_bind_int(st, 3, t->admin);
        sqlite3_bind_int64(st, 4, (int64_t)t->max_envs);
        sqlite3_bind_int64(st, 5, (int64_t)t->max_cpus);
        sqlite3_bind_int64(st, 6, (int64_t)t->max_memory);
        sqlite3_bind_int64(st, 7, (int64_t)t->max_disk);
        sqlite3_bind_double(st, 8, t->rate);
        sqlite3_bind_int64(st, 9, t->expires_at);
        sqlite3_bind_int64(st, 10, t->created_at);
        return step_done(st);
}

int state_token_delete(struct state *s, const char *name)
{
        return delete_by_name(s, "DELETE FROM tokens WHERE name=?1", name);
}

static int token_fill(sqlite3_stmt *st, void *row)
{
        struct token_row *t = row;
        t->admin = sqlite3_column_int(st, 2) != 0;
        t->max_envs = (uint64_t)sqlite3_column_int64(st, 3);
        t->max_cpus = (uint64_t)sqlite3_column_int64(st, 4);
        t->max_memory = (uint64_t)sqlite3_column_int64(st, 5);
        t->max_disk = (uint64_t)sqlite3_column_int64(st, 6);
        t->rate = sqlite3_column_double(st, 7);
        t->expires_at = sqlite3_column_int64(st, 8);
        t->created_at = sqlite3_column_int64(st, 9);
        int r = COPY_TEXT(t->name, st, 0);
        return r < 0 ? r : COPY_TEXT(t->hash, st, 1);
}

int state_token_list(struct state *s, struct token_row **ret, size_t *ret_n)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = prepare(s,
                        "SELECT name, hash, admin, max_envs, max_cpus, max_memory, max_disk, rate,"
                        " expires_at, created_at FROM tokens ORDER BY name",
                        &st);
        if (r < 0)
                return r;
        return collect_rows(st, sizeof(**ret), token_fill, NULL, (void **)ret, ret_n);
}

/* ---------------------------------------------------------------- E2B sandboxes */

int state_e2b_insert(struct state *s, const struct e2b_row *b)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = prepare(s,
                        "INSERT INTO e2b_sandboxes (id, template, token_hash, user, home,"
                        " started_at, metadata) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                        &st);
        if (r < 0)
                return r;
        sqlite3_bind_text(st, 1, b->id, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, b->template_id, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 3, b->token_hash, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 4, b->user, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 5, b->home, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 6, b->started_at);
        sqlite3_bind_text(st, 7, b->metadata ? b->metadata : "{}", -1, SQLITE_STATIC);
        return step_done(st);
}

int state_e2b_delete(struct state *s, const char *id)
{
        return delete_by_name(s, "DELETE FROM e2b_sandboxes WHERE id=?1", id);
}

static int e2b_fill(sqlite3_stmt *st, void *row)
{
        struct e2b_row *b = row;
        b->started_at = sqlite3_column_int64(st, 5);
        const char *m = (const char *)sqlite3_column_text(st, 6);
        if (!(b->metadata = strdup(m ? m : "{}")))
                return -ENOMEM;
        int r = COPY_TEXT(b->id, st, 0);
        if (r >= 0)
                r = COPY_TEXT(b->template_id, st, 1);
        if (r >= 0)
                r = COPY_TEXT(b->token_hash, st, 2);
        if (r >= 0)
                r = COPY_TEXT(b->user, st, 3);
        return r < 0 ? r : COPY_TEXT(b->home, st, 4);
}

static void e2b_rows_free_cb(void *rows, size_t n)
{
        state_e2b_rows_free(rows, n);
}

void state_e2b_rows_free(struct e2b_row *rows, size_t n)
{
        for (size_t i = 0; rows && i < n; i++)
                free(rows[i].metadata);
        free(rows);
}

int state_e2b_set_tokens(struct state *s, const char *id, const char *token_hash)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = prepare(s, "UPDATE e2b_sandboxes SET token_hash=?2 WHERE id=?1", &st);
        if (r < 0)
                return r;
        sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, token_hash, -1, SQLITE_STATIC);
        return step_changed(s, st);
}

int state_e2b_list(struct state *s, const char *id, const char *owner, const char *after,
                   size_t limit, struct e2b_row **ret, size_t *ret_n)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        /* Keyset paging on the primary key: each page is one index range scan. */
        int r = prepare(s,
                        "SELECT b.id, b.template, b.token_hash, b.user, b.home, b.started_at,"
                        " b.metadata FROM e2b_sandboxes b JOIN envs v ON v.name = b.id"
                        " WHERE (?1 IS NULL OR b.id=?1) AND (?4 IS NULL OR v.owner=?4)"
                        " AND b.id > ?2 ORDER BY b.id LIMIT ?3",
                        &st);
        if (r < 0)
                return r;
        if (id)
                sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, after ? after : "", -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 3, (int64_t)limit);
        if (owner)
                sqlite3_bind_text(st, 4, owner, -1, SQLITE_STATIC);
        return collect_rows(st, sizeof(**ret), e2b_fill, e2b_rows_free_cb, (void **)ret, ret_n);
}

/* Snapshots, restore, fork and commit: the engine's side of the storage drivers.
 *
 * Snapshots live only on disk (R/envs/NAME/snapshots/SNAP, read-only subvolumes): a btrfs
 * snapshot appears atomically, so there is no record that could disagree with the disk. A
 * running environment is frozen (cgroup freezer) while its snapshot is taken, so the copy is
 * what the processes last wrote; a marker file says "frozen by us" so that a daemon killed in
 * that window thaws it at the next start. Fork creates the new environment like any other
 * (its row is the journal), its disk a writable snapshot of the source's (frozen until that
 * copy exists) or of a snapshot; commit makes the image under images/.partial-IMAGE and
 * renames it into place.
 *
 * Spare disks (at the end) keep their state in struct engine (engine_internal.h); the rest
 * works through the engine's accessors and its path helpers. */
#include "daemon/engine_internal.h"
#include "daemon/events.h"
#include "daemon/log.h"
#include "daemon/supervise.h"
#include "daemon/syncer.h"
#include "lib/parse.h"
#include "lib/util.h"

#include <dirent.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <time.h>

#define MAX_SNAPSHOTS 256
#define FREEZE_MARK ".frozen-for-snapshot"

static int snap_dir(struct engine *e, const struct env *v, char *buf, size_t len)
{
        return env_dir(e, env_name(v), "snapshots", buf, len);
}

/* The marker of a freeze for a copy, in the environment's directory. */
static int freeze_mark(struct engine *e, const struct env *v, char *buf, size_t len)
{
        return env_dir(e, env_name(v), FREEZE_MARK, buf, len);
}

/* Computers on a driver with snapshots; a message for everything else. */
static int check_snapshottable(struct engine *e, const struct env *v, const char *what, char *err,
                               size_t errlen)
{
        if (env_kind(v) == KIND_SANDBOX) {
                snprintf(err, errlen,
                         "%s: sandboxes have no disk of their own to %s (their root is the "
                         "read-only image, /tmp and /workspace are memory)",
                         env_name(v), what);
                return -ENOEXEC;
        }
        if (!storage_can_snapshot(engine_storage(e))) {
                snprintf(err, errlen, "%s needs the btrfs storage driver (this daemon uses %s)", what,
                         engine_storage(e)->ops->name);
                return -EOPNOTSUPP;
        }
        return 0;
}

static size_t count_snapshots(const char *dir)
{
        size_t n = 0;
        _cleanup_closedir_ DIR *d = opendir(dir);
        if (!d)
                return 0;
        struct dirent *de;
        while ((de = readdir(d)))
                n += de->d_name[0] != '.';
        return n;
}

/* Freeze a running environment for a copy; returns whether we froze it (and must thaw). */
static int freeze_for_copy(struct engine *e, struct env *v, bool *ret_frozen)
{
        *ret_frozen = false;
        if (!env_running(v) || env_paused(v))
                return 0;
        char mark[4200];
        int r = freeze_mark(e, v, mark, sizeof(mark));
        if (r < 0)
                return r;
        _cleanup_close_ int fd = open(mark, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        if (fd < 0)
                return -errno;
        r = engine_pause(e, v, true);
        if (r < 0) {
                unlink(mark);
                return r;
        }
        *ret_frozen = true;
        return 0;
}

static void thaw_after_copy(struct engine *e, struct env *v, bool frozen)
{
        if (!frozen)
                return;
        int r = engine_pause(e, v, false);
        if (r < 0)
                log_error("%s: thawing after a snapshot: %s", env_name(v), strerror(-r));
        char mark[4200];
        if (freeze_mark(e, v, mark, sizeof(mark)) >= 0)
                unlink(mark);
}

/* A read-only snapshot of v's disk as dst_dir/name, v frozen meanwhile. */
static int take_snapshot(struct engine *e, struct env *v, const char *dst_dir, const char *name,
                         uint32_t unshift_base, const char *crash_step)
{
        char dir[4096];
        int r = engine_env_dir(e, env_name(v), dir, sizeof(dir));
        if (r < 0)
                return r;
        bool frozen;
        if ((r = freeze_for_copy(e, v, &frozen)) < 0)
                return r;
        struct storage *s = engine_storage(e);
        r = s->ops->snapshot(s, dir, dst_dir, name, unshift_base);
        test_crash_point(crash_step);
        thaw_after_copy(e, v, frozen);
        return r;
}

static json_t *snapshot_json(const char *dir, const char *name)
{
        char ts[RFC3339_SIZE] = "";
        int64_t sec;
        if (storage_created_at(dir, &sec) >= 0)
                format_rfc3339(sec, ts);
        return json_pack("{s:s,s:s}", "name", name, "created_at", ts);
}

json_t *engine_snapshot_list(struct engine *e, struct env *v)
{
        json_t *arr = json_array();
        char dir[4200];
        if (snap_dir(e, v, dir, sizeof(dir)) < 0)
                return arr;
        char *names[MAX_SNAPSHOTS * 2];
        size_t n = 0;
        {
                _cleanup_closedir_ DIR *d = opendir(dir);
                if (!d)
                        return arr;
                struct dirent *de;
                while ((de = readdir(d)) && n < ELEMENTSOF(names))
                        if (de->d_name[0] != '.' && (names[n] = strdup(de->d_name)))
                                n++;
        }
        qsort(names, n, sizeof(char *), str_ptr_cmp);
        for (size_t i = 0; i < n; i++) {
                _cleanup_free_ char *p = path_join(dir, names[i]);
                if (p)
                        json_array_append_new(arr, snapshot_json(p, names[i]));
                free(names[i]);
        }
        return arr;
}

int engine_snapshot(struct engine *e, struct env *v, const char *snap, json_t **ret, char *err,
                    size_t errlen)
{
        int r = check_snapshottable(e, v, "snapshot", err, errlen);
        if (r < 0)
                return r;
        char dir[4200], name[NAME_BUF_SIZE], path[4300];
        if ((r = snap_dir(e, v, dir, sizeof(dir))) < 0)
                return r;
        if (snap) {
                if (!name_is_valid(snap)) {
                        snprintf(err, errlen, "invalid snapshot name (use letters, digits, '-', '_', '.')");
                        return -EINVAL;
                }
                snprintf(name, sizeof(name), "%s", snap);
        } else {
                time_t t = time(NULL);
                struct tm tm;
                gmtime_r(&t, &tm);
                strftime(name, sizeof(name), "snap-%Y%m%d-%H%M%S", &tm);
                for (int i = 2; i < 1000; i++) {
                        if ((r = BUF_PRINTF(path, "%s/%s", dir, name)) < 0)
                                return r;
                        if (access(path, F_OK) < 0)
                                break;
                        size_t base = strlen("snap-YYYYmmdd-HHMMSS");
                        snprintf(name + base, sizeof(name) - base, "-%d", i);
                }
        }
        if ((r = BUF_PRINTF(path, "%s/%s", dir, name)) < 0)
                return r;
        if (access(path, F_OK) == 0) {
                snprintf(err, errlen, "%s already has a snapshot named %s", env_name(v), name);
                return -EEXIST;
        }
        if (count_snapshots(dir) >= MAX_SNAPSHOTS) {
                snprintf(err, errlen, "%s has %d snapshots, the limit; remove some first",
                         env_name(v), MAX_SNAPSHOTS);
                return -EAGAIN;
        }
        if ((r = take_snapshot(e, v, dir, name, 0, "snapshot")) < 0) {
                snprintf(err, errlen, "snapshot: %s", strerror(-r));
                return r;
        }
        log_info("%s: snapshot %s taken", env_name(v), name);
        events_env("snapshot", v, json_pack("{s:s}", "snapshot", name));
        *ret = snapshot_json(path, name);
        return 0;
}

/* dir/snap must be an existing snapshot of v. */
static int find_snapshot(struct engine *e, struct env *v, const char *snap, char *path, size_t len,
                         char *err, size_t errlen)
{
        char dir[4200];
        int r = snap_dir(e, v, dir, sizeof(dir));
        if (r < 0)
                return r;
        struct stat st;
        if (!snap || !name_is_valid(snap) || buf_printf(path, len, "%s/%s", dir, snap) < 0 ||
            lstat(path, &st) < 0 || !S_ISDIR(st.st_mode)) {
                snprintf(err, errlen, "%s has no snapshot named %s", env_name(v), snap ? snap : "");
                return -ENOENT;
        }
        return 0;
}

int engine_snapshot_delete(struct engine *e, struct env *v, const char *snap, char *err,
                           size_t errlen)
{
        char path[4300];
        int r = find_snapshot(e, v, snap, path, sizeof(path), err, errlen);
        if (r < 0)
                return r;
        r = rm_rf_at(AT_FDCWD, path);
        if (r < 0) {
                snprintf(err, errlen, "removing snapshot %s: %s", snap, strerror(-r));
                return r;
        }
        log_info("%s: snapshot %s removed", env_name(v), snap);
        return 0;
}

int engine_restore(struct engine *e, struct env *v, const char *snap, char *err, size_t errlen)
{
        int r = check_snapshottable(e, v, "restore", err, errlen);
        if (r < 0)
                return r;
        char path[4300], dir[4096];
        if ((r = find_snapshot(e, v, snap, path, sizeof(path), err, errlen)) < 0)
                return r;
        if (env_running(v)) {
                snprintf(err, errlen, "%s is running: stop it before restoring a snapshot",
                         env_name(v));
                return -EBUSY;
        }
        if ((r = engine_env_dir(e, env_name(v), dir, sizeof(dir))) < 0)
                return r;
        struct storage *s = engine_storage(e);
        r = s->ops->restore(s, dir, path, env_disk_bytes(v));
        if (r < 0) {
                snprintf(err, errlen, "restore: %s", strerror(-r));
                return r;
        }
        log_info("%s: restored snapshot %s", env_name(v), snap);
        events_env("restore", v, json_pack("{s:s}", "snapshot", snap));
        return 0;
}

struct fork_freeze {
        struct engine *e;
        struct env *v;
        bool frozen, done;
};

static void fork_copied(void *data)
{
        struct fork_freeze *ff = data;
        if (ff->done)
                return;
        ff->done = true;
        if (ff->frozen)
                test_crash_point("fork-copy");
        thaw_after_copy(ff->e, ff->v, ff->frozen);
}

int engine_fork(struct engine *e, struct env *v, const char *name, const char *snap,
                const char *owner, engine_created_fn done, void *data, struct env_creating **ret,
                char *err, size_t errlen)
{
        int r = check_snapshottable(e, v, "fork", err, errlen);
        if (r < 0)
                return r;
        if (!name || !name_is_valid(name)) {
                snprintf(err, errlen, "name: 1-%d letters, digits, '-', '_' or '.'", NAME_LEN_MAX);
                return -EINVAL;
        }
        if (engine_find(e, name) || engine_creating_find(e, name)) {
                snprintf(err, errlen, "an environment named %s already exists", name);
                return -EEXIST;
        }
        char ifname[16];
        if ((r = engine_ifname_check(e, name, ifname, err, errlen)) < 0)
                return r;
        char from[4300];
        struct fork_freeze ff = {.e = e, .v = v};
        if (snap) {
                if ((r = find_snapshot(e, v, snap, from, sizeof(from), err, errlen)) < 0)
                        return r;
        } else {
                /* The source's disk as it is now: frozen (if it runs) only until it is copied. */
                if ((r = env_dir(e, env_name(v), "disk", from, sizeof(from))) < 0)
                        return r;
                if ((r = freeze_for_copy(e, v, &ff.frozen)) < 0) {
                        snprintf(err, errlen, "freezing %s: %s", env_name(v), strerror(-r));
                        return r;
                }
        }
        struct env_spec spec;
        engine_env_spec(e, v, &spec);
        snprintf(spec.name, sizeof(spec.name), "%s", name);
        spec.owner = owner;
        spec.from_tree = from;
        spec.from_base = env_uid_base(v);
        spec.copied = fork_copied;
        spec.copied_data = &ff;
        spec.fork_of = env_name(v);
        spec.fork_snapshot = snap;
        /* The copy is made in this call (create_prepare), the source thawed right after. */
        r = engine_create_async(e, &spec, done, data, ret, err, errlen);
        spec.net.rules = NULL; /* moved into the environment, or freed with it */
        spec.net.links = NULL;
        fork_copied(&ff); /* in case the create failed before copying */
        return r;
}

/* dir/name := text (created or replaced, never through a symlink). */
static int write_text_in(const char *dir, const char *name, const char *text)
{
        char path[4400];
        int r = BUF_PRINTF(path, "%s/%s", dir, name);
        if (r < 0)
                return r;
        _cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (fd < 0)
                return -errno;
        return write_all(fd, text, strlen(text));
}

static uint64_t image_size(struct engine *e, const char *name)
{
        struct image_row *rows = NULL;
        size_t n = 0;
        uint64_t size = 0;
        if (state_image_list(engine_state(e), &rows, &n) >= 0)
                for (size_t i = 0; i < n; i++)
                        if (!strcmp(rows[i].name, name))
                                size = rows[i].size;
        free(rows);
        return size;
}

int engine_commit(struct engine *e, struct env *v, const char *image, json_t **ret, char *err,
                  size_t errlen)
{
        int r = check_snapshottable(e, v, "commit", err, errlen);
        if (r < 0)
                return r;
        if (!image || !name_is_valid(image)) {
                snprintf(err, errlen, "image: invalid image name (use letters, digits, '-', '_', '.')");
                return -EINVAL;
        }
        if (engine_image_exists(e, image)) {
                snprintf(err, errlen, "an image named %s already exists", image);
                return -EEXIST;
        }
        if (engine_image_being_made(image)) {
                snprintf(err, errlen, "image %s is being made right now", image);
                return -EBUSY;
        }
        char partial[4200], final[4200], dir[4096];
        if ((r = BUF_PRINTF(partial, "%s/images/.partial-%s", engine_root(e), image)) < 0 ||
            (r = BUF_PRINTF(final, "%s/images/%s", engine_root(e), image)) < 0) {
                snprintf(err, errlen, "image %s: path too long", image);
                return r;
        }
        rm_rf_at(AT_FDCWD, partial);
        if (mkdir(partial, 0700) < 0) {
                r = -errno;
                snprintf(err, errlen, "preparing the image: %s", strerror(-r));
                return r;
        }
        /* Its size: the image it came from plus what it wrote (as the quota counts it). */
        uint64_t used = 0, size;
        struct storage *s = engine_storage(e);
        if (engine_env_dir(e, env_name(v), dir, sizeof(dir)) >= 0)
                s->ops->usage(s, dir, &used);
        size = image_size(e, v->row.image) + used;
        char text[64];
        snprintf(text, sizeof(text), "%llu", (unsigned long long)size);
        if ((r = write_text_in(partial, "size", text)) < 0)
                goto fail;
        /* Marks an image made by commit: if the daemon dies after the rename below but before
         * the record, the next start records it instead of losing it. */
        if ((r = write_text_in(partial, "committed-from", env_name(v))) < 0)
                goto fail;
        if ((r = take_snapshot(e, v, partial, "rootfs", env_uid_base(v), "commit-snapshot")) < 0)
                goto fail;
        if (rename(partial, final) < 0) {
                r = -errno;
                goto fail;
        }
        test_crash_point("commit-rename");
        struct image_row row = {.created_at = wall_s(), .size = size};
        snprintf(row.name, sizeof(row.name), "%s", image);
        if ((r = state_image_insert(engine_state(e), &row)) < 0) {
                rm_rf_at(AT_FDCWD, final);
                snprintf(err, errlen, "recording the image: %s", strerror(-r));
                return r;
        }
        log_info("image %s committed from %s", image, env_name(v));
        *ret = json_pack("{s:s,s:I,s:s}", "name", image, "size", (json_int_t)size, "from",
                         env_name(v));
        return 0;
fail:
        rm_rf_at(AT_FDCWD, partial);
        snprintf(err, errlen, "commit: %s", strerror(-r));
        return r;
}

/* Images renamed into place by commit whose record a crash prevented. */
static void record_committed_images(struct engine *e)
{
        _cleanup_free_ char *path = path_join(engine_root(e), "images");
        _cleanup_closedir_ DIR *d = path ? opendir(path) : NULL;
        if (!d)
                return;
        struct image_row *rows = NULL;
        size_t n = 0;
        if (state_image_list(engine_state(e), &rows, &n) < 0)
                return;
        struct dirent *de;
        while ((de = readdir(d))) {
                if (de->d_name[0] == '.' || !name_is_valid(de->d_name))
                        continue;
                bool known = false;
                for (size_t i = 0; i < n && !known; i++)
                        known = !strcmp(rows[i].name, de->d_name);
                /* Valid names are short: NAME/committed-from always fits. */
                char mark[NAME_BUF_SIZE + 32], sizefile[NAME_BUF_SIZE + 32], *text = NULL;
                if (known || BUF_PRINTF(mark, "%s/committed-from", de->d_name) < 0 ||
                    BUF_PRINTF(sizefile, "%s/size", de->d_name) < 0 ||
                    faccessat(dirfd(d), mark, F_OK, 0) < 0)
                        continue;
                struct image_row row = {.created_at = wall_s()};
                if (read_file_at(dirfd(d), sizefile, 64, &text) >= 0) {
                        row.size = strtoull(text, NULL, 10);
                        free(text);
                }
                snprintf(row.name, sizeof(row.name), "%.*s", NAME_LEN_MAX, de->d_name);
                if (state_image_insert(engine_state(e), &row) >= 0)
                        log_info("image %s: recorded an interrupted commit", de->d_name);
        }
        free(rows);
}

void engine_storage_reconcile(struct engine *e)
{
        struct storage *s = engine_storage(e);
        for (struct env *v = engine_next(e, NULL); v; v = engine_next(e, v)) {
                char dir[4096], mark[4200];
                if (env_dir(e, env_name(v), NULL, dir, sizeof(dir)) < 0 ||
                    freeze_mark(e, v, mark, sizeof(mark)) < 0)
                        continue;
                int r = s->ops->recover(s, dir);
                if (r < 0 && r != -ENOENT)
                        log_warn("%s: recovering its disk: %s", env_name(v), strerror(-r));
                /* Frozen by a snapshot the daemon did not finish: its row says paused; the
                 * reconcile that follows adopts it as running once thawed here. */
                if (access(mark, F_OK) == 0) {
                        log_info("%s: thawing after an interrupted snapshot", env_name(v));
                        cgroup_env_freeze(engine_cgroups(e), env_cgroup(v), false);
                        engine_mark_thawed(e, v);
                        unlink(mark);
                }
        }
        record_committed_images(e);
}

/* ---- spare disks --------------------------------------------------------------------------
 * A computer's disk is a writable snapshot of its image; the btrfs driver can make the next
 * one ahead of time so that a create only renames it into place. The snapshot commits a btrfs
 * transaction (5-15 ms), so the loop never makes it: the spare process does (a syncer made at
 * start-up, `paddockd-spare`), or, where that one is gone, a helper forked for each spare. A
 * fork of the daemon copies its page tables and leaves it copy-on-write faults, both growing
 * with the number of environments: one for every computer created, before the process. */

void spare_init(struct engine *e)
{
        e->spare.from_fd = e->spare.dir_fd = -EBADF;
        struct storage *s = e->cfg.storage;
        /* Not where nothing is shared (a pool without idmapped mounts: each copy is chowned
         * for its own range), and not without a driver that makes spares. */
        if (!s || !s->ops->spare_target || s->info.shifted || !e->cfg.loop)
                return;
        int r = syncer_new(e->cfg.loop, "paddockd-spare", &e->spare.maker);
        if (r < 0) {
                log_warn("no spare process (%s): spare disks are made by a helper each",
                         strerror(-r));
                e->spare.maker = NULL;
        }
}

static void spare_made(struct engine *e)
{
        /* An image went while this spare was being made: the removal may have listed the
         * spares before it landed, and it shares that image's data. */
        if (e->spare.drops != e->spare.drops_at_start)
                engine_spares_drop(e);
        if (e->spare.again) { /* a create took a spare while this one was being made */
                e->spare.again = false;
                char image[sizeof(e->spare.image)];
                memcpy(image, e->spare.image, sizeof(image));
                spare_schedule(e, image);
        }
}

static void on_spare_made(void *data, const struct supervise_exit *x)
{
        struct engine *e = data;
        if (x->signaled || x->status != 0)
                log_warn("image %s: preparing a spare disk failed", e->spare.image);
        supervise_abandon(e->spare.sv, false);
        e->spare.sv = NULL;
        spare_made(e);
}

static const struct supervise_ops spare_ops = {.exit = on_spare_made};

static void on_spare_snapshot(int result, void *data)
{
        struct engine *e = data;
        e->spare.wait = NULL;
        closep(&e->spare.from_fd);
        closep(&e->spare.dir_fd);
        if (result < 0 && result != -EEXIST)
                log_warn("image %s: preparing a spare disk failed: %s", e->spare.image,
                         strerror(-result));
        spare_made(e);
}

struct spare_arg {
        struct storage *storage;
        const char *image; /* the image's rootfs */
};

/* The forked helper (supervise_fork): snapshot the image into the spares directory. */
static void make_spare(void *arg, pid_t daemon_pid, int status_fd, int data_fd)
{
        const struct spare_arg *a = arg;
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != daemon_pid)
                _exit(1);
        close_fds_from(3, NULL, 0);
        int r = a->storage->ops->prepare_spare(a->storage, a->image);
        _exit(r < 0 && r != -ENOENT ? 1 : 0);
}

/* Through the spare process: 0 if it took the job (or there is nothing to make), <0 to make
 * it with a helper instead. */
static int spare_by_process(struct engine *e, const char *image)
{
        struct storage *s = e->cfg.storage;
        if (!e->spare.maker || !syncer_pid(e->spare.maker))
                return -ESRCH;
        char name[32];
        int r = s->ops->spare_target(s, image, &e->spare.from_fd, &e->spare.dir_fd, name);
        if (r < 0 && r != -ENOENT) /* a helper would fail the same way */
                log_warn("image %s: preparing a spare disk failed: %s", e->spare.image,
                         strerror(-r));
        if (r != 0)
                return 0; /* made already, or no image (it went) */
        r = syncer_snapshot(e->spare.maker, e->spare.from_fd, e->spare.dir_fd, name,
                            on_spare_snapshot, e, &e->spare.wait);
        if (r < 0) {
                closep(&e->spare.from_fd);
                closep(&e->spare.dir_fd);
        }
        return r;
}

static void on_spare_timer(struct loop_timer *t, void *data)
{
        struct engine *e = data;
        e->spare.timer = NULL;
        if (e->spare.sv || e->spare.wait) {
                e->spare.again = true; /* one at a time: the next one when this is done */
                return;
        }
        char image[4200];
        if (image_rootfs(e, e->spare.image, image, sizeof(image)) < 0)
                return;
        e->spare.drops_at_start = e->spare.drops;
        if (spare_by_process(e, image) >= 0)
                return;
        struct spare_arg a = {.storage = e->cfg.storage, .image = image};
        const struct supervise_spec spec = {
            .loop = e->cfg.loop, .label = "spare disk", .ops = &spare_ops, .data = e};
        if (supervise_fork(&spec, false, false, make_spare, &a, &e->spare.sv) < 0)
                e->spare.sv = NULL;
}

/* After the create has answered (a timer, not this turn of the loop): the next computer of
 * this image finds its disk ready. */
void spare_schedule(struct engine *e, const char *image)
{
        struct storage *s = e->cfg.storage;
        if (!s->ops->prepare_spare)
                return;
        snprintf(e->spare.image, sizeof(e->spare.image), "%s", image);
        if (e->spare.sv || e->spare.wait) {
                /* The one being made may be done and not yet answered: a create that took it
                 * must still get the next one. */
                e->spare.again = true;
                return;
        }
        if (!e->spare.timer)
                e->spare.timer = loop_add_timer(e->cfg.loop, 1, on_spare_timer, e);
}

void engine_spares_drop(struct engine *e)
{
        struct storage *s = e->cfg.storage;
        e->spare.drops++;
        if (s->ops->drop_spares)
                s->ops->drop_spares(s);
}

void spare_free(struct engine *e)
{
        loop_cancel_timer(e->spare.timer);
        supervise_abandon(e->spare.sv, false); /* the helper dies with us (PR_SET_PDEATHSIG) */
        e->spare.sv = NULL;
        /* The process first: a snapshot it runs uses the two fds (its request names them in
         * the fd table it shares with us), so they are closed only once it has ended. */
        syncer_free(e->spare.maker);
        e->spare.maker = NULL;
        e->spare.wait = NULL;
        closep(&e->spare.from_fd);
        closep(&e->spare.dir_fd);
}

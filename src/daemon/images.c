/* Images: <root>/images/<name>/rootfs, owned by ids 0..65535, recorded in the state database.
 * Every new image is made by an image job (image_job.h): prepare a partial directory, fill it
 * in a forked helper, move it into place. Import (a tar upload) is one fill function; pull
 * (image_pull.c) and build (image_build.c) are others. */
#include "daemon/image_job.h"
#include "daemon/log.h"
#include "daemon/supervise.h"
#include "lib/confine.h"
#include "lib/image.h"
#include "lib/paddock.h"
#include "lib/parse.h"
#include "lib/userns.h"
#include "lib/util.h"

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/prctl.h>
#include <sys/mount.h>
#include <sys/stat.h>

#define MAX_IMAGE_JOBS 8

struct image_job {
        struct engine *eng;
        struct image_job *next; /* the running jobs */
        const char *what;
        char name[NAME_BUF_SIZE];
        char *partial, *final; /* <root>/images/.partial-NAME, <root>/images/NAME */
        struct supervise *sv;  /* the helper */
        struct image_callbacks cb;
        char line[1024];
        size_t line_len;
        char error[512];
        int error_code; /* -errno the helper failed with */
        uint64_t size;
};

static struct image_job *running_jobs;
static char default_image[NAME_BUF_SIZE] = "default";

void engine_set_default_image(struct engine *e, const char *name)
{
        snprintf(default_image, sizeof(default_image), "%s", name);
}

const char *engine_default_image(struct engine *e)
{
        return default_image;
}

bool engine_image_being_made(const char *name)
{
        for (struct image_job *k = running_jobs; k; k = k->next)
                if (strcmp(k->name, name) == 0)
                        return true;
        return false;
}

bool engine_image_exists(struct engine *e, const char *name)
{
        char path[PATH_MAX];
        struct stat st;
        return name_is_valid(name) &&
               BUF_PRINTF(path, "%s/images/%s/rootfs", engine_root(e), name) >= 0 &&
               stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* ---------------------------------------------------------------- prepare, finish, remove */

/* Remove an image directory (<root>/images/NAME or .partial-NAME) with everything in it: the
 * one place that knows how an image's tree is stored. */
static int image_dir_remove(const char *dir)
{
        return rm_rf_at(AT_FDCWD, dir);
}

/* The empty tree a helper fills: <root>/images/.partial-NAME/rootfs (a directory or a
 * subvolume: the storage driver decides). */
static int image_partial_prepare(struct storage *sto, const char *partial)
{
        _cleanup_free_ char *rootfs = path_join(partial, "rootfs");
        if (!rootfs)
                return -ENOMEM;
        image_dir_remove(partial);
        int r = mkdir(partial, 0700) < 0 ? -errno : sto->ops->image_prepare(sto, rootfs);
        if (r < 0)
                image_dir_remove(partial);
        return r;
}

/* The filled tree becomes the image: .partial-NAME -> NAME (the helper's scratch files next to
 * rootfs are dropped first). */
static int image_partial_finish(struct storage *sto, const char *partial, const char *final)
{
        _cleanup_closedir_ DIR *d = opendir(partial);
        if (!d)
                return -errno;
        struct dirent *de;
        while ((de = readdir(d)))
                if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") &&
                    strcmp(de->d_name, "rootfs"))
                        rm_rf_at(dirfd(d), de->d_name);
        struct stat st;
        if (stat(final, &st) == 0)
                return -EEXIST;
        _cleanup_free_ char *rootfs = path_join(partial, "rootfs");
        if (!rootfs)
                return -ENOMEM;
        int r = sto->ops->image_seal(sto, rootfs); /* read-only from now on */
        if (r < 0)
                return r;
        return rename(partial, final) < 0 ? -errno : 0;
}

/* ---------------------------------------------------------------- the helpers' own ids */

/* Image helpers parse hostile archives and registries and run package scripts, so none of
 * them runs as host root: each enters a user namespace mapped to one 65536-id range the
 * daemon claims for image work (kept in ROOT/images/.helper-ids, re-claimed at every start),
 * and reaches the directory it fills only through an idmapped mount of it. Through that mount
 * its uid N writes on-disk N, so images stay owned by 0..65535 like every other image, while
 * anything the helper does elsewhere on the host happens as an unprivileged uid. */
static uint32_t helper_ids;
static pid_t helper_daemon_pid; /* in a helper: the daemon it must die with */

static int helper_ids_file(struct engine *e, char *file, size_t len)
{
        return buf_printf(file, len, "%s/images/.helper-ids", engine_root(e));
}

static int helper_ids_claim(struct engine *e)
{
        if (helper_ids)
                return 0;
        char file[PATH_MAX], owner[PATH_MAX + 16], text[32];
        if (helper_ids_file(e, file, sizeof(file)) < 0 ||
            BUF_PRINTF(owner, "%s image helpers", engine_root(e)) < 0)
                return -ENAMETOOLONG;
        uint32_t base;
        int r = idrange_claim(engine_uid_registry(e), owner, &base);
        if (r < 0)
                return r;
        /* Noted so that the claim of a daemon that died is given back at the next start. */
        snprintf(text, sizeof(text), "%u\n", base);
        _cleanup_close_ int out =
                open(file, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
        if ((r = out < 0 ? -errno : write_all(out, text, strlen(text))) < 0) {
                idrange_release(engine_uid_registry(e), base);
                return r;
        }
        helper_ids = base;
        return 0;
}

/* The range goes back to the registry when the daemon stops, or at the next start after a
 * crash (images are stored unshifted: any range serves the next helper). */
void engine_image_helpers_release(struct engine *e)
{
        char file[PATH_MAX], text[32] = "";
        if (helper_ids_file(e, file, sizeof(file)) < 0)
                return;
        uint32_t base = helper_ids;
        if (!base) {
                _cleanup_close_ int fd = open(file, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
                if (fd >= 0 && read(fd, text, sizeof(text) - 1) > 0)
                        base = (uint32_t)strtoul(text, NULL, 10);
        }
        if (base)
                idrange_release(engine_uid_registry(e), base);
        unlink(file);
        helper_ids = 0;
}

/* Mount a clone of the host directory dir, with attributes a, at IMAGE_HELPER_DIR/name. */
static int expose(const char *dir, const struct mount_attr *a, const char *name)
{
        char at[64];
        _cleanup_close_ int t = open_tree(AT_FDCWD, dir, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
        if (t < 0 || BUF_PRINTF(at, "%s/%s", IMAGE_HELPER_DIR, name) < 0 ||
            mount_setattr(t, "", AT_EMPTY_PATH, (struct mount_attr *)a, sizeof(*a)) < 0 ||
            move_mount(t, "", AT_FDCWD, at, MOVE_MOUNT_F_EMPTY_PATH) < 0)
                return -errno;
        return 0;
}

/* In the helper, still host root. A mount namespace of its own, where a small tmpfs at
 * IMAGE_HELPER_DIR holds work/ (an idmapped mount of dir: the only place it writes) and, for
 * a build, mirror/ (a local mirror) and apt/ (the apt configuration), read-only; then the image ids' user namespace, as its
 * root, and the computer seccomp profile unless the job runs its own namespaces (mmdebstrap).
 * From here on the helper has capabilities only over that namespace, and the host's paths it
 * could reach as root (the state directory, the daemon's socket) are closed to its uid. */
static int helper_drop_root(const char *dir, bool read_only, const struct image_helper_opts *o,
                            char *err, size_t errlen)
{
        _cleanup_close_ int userns = -EBADF;
        int r = userns_create(helper_ids, UID_RANGE_SIZE, &userns);
        if (r < 0) {
                snprintf(err, errlen, "user namespace: %s", strerror(-r));
                return r;
        }
        struct mount_attr a = {.attr_set = MOUNT_ATTR_IDMAP | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOSUID |
                                           (read_only ? MOUNT_ATTR_RDONLY : 0),
                               .userns_fd = (uint64_t)userns};
        struct mount_attr ro = a;
        ro.attr_set |= MOUNT_ATTR_RDONLY;
        _cleanup_close_ int work = -EBADF;
        const char *step = "mount namespace";
        if (unshare(CLONE_NEWNS) < 0 ||
            mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
            (step = IMAGE_HELPER_DIR, mkdir(IMAGE_HELPER_DIR, 0755) < 0 && errno != EEXIST) ||
            mount("paddock-image", IMAGE_HELPER_DIR, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
                  "mode=0755,size=64k") < 0 ||
            mkdir(IMAGE_HELPER_DIR "/work", 0755) < 0 || mkdir(IMAGE_HELPER_DIR "/mirror", 0755) < 0 ||
            mkdir(IMAGE_HELPER_DIR "/apt", 0755) < 0 ||
            (step = "idmapped mount",
             (work = open_tree(AT_FDCWD, dir, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC)) < 0) ||
            mount_setattr(work, "", AT_EMPTY_PATH, &a, sizeof(a)) < 0 ||
            move_mount(work, "", AT_FDCWD, IMAGE_HELPER_DIR "/work", MOVE_MOUNT_F_EMPTY_PATH) < 0 ||
            (o && o->mirror && (step = "mirror", expose(o->mirror, &ro, "mirror") < 0)) ||
            (o && o->apt && (step = "apt configuration", expose(o->apt, &ro, "apt") < 0)) ||
            (step = "chdir", chdir(IMAGE_HELPER_DIR "/work") < 0) ||
            (step = "setns", setns(userns, CLONE_NEWUSER) < 0) ||
            (step = "setgroups", setgroups(0, NULL) < 0) ||
            (step = "setresgid", setresgid(0, 0, 0) < 0) ||
            (step = "setresuid", setresuid(0, 0, 0) < 0)) {
                r = -errno;
                snprintf(err, errlen, "entering the image helpers' ids: %s: %s", step, strerror(errno));
                return r;
        }
        /* A change of uid clears the parent-death signal: set it again. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != helper_daemon_pid)
                _exit(1);
        if (!(o && o->own_namespaces) && (r = seccomp_apply(PROFILE_COMPUTER)) < 0) {
                snprintf(err, errlen, "seccomp: %s", strerror(-r));
                return r;
        }
        return 0;
}

/* ---------------------------------------------------------------- the helper */

static int helper_msg_fd = -1;

void image_helper_init(pid_t daemon_pid, const int *keep, size_t n_keep)
{
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != daemon_pid) /* the daemon died before the line above */
                _exit(1);
        helper_daemon_pid = daemon_pid;
        reset_signals();
        /* Hostile archives and registries are parsed here: nothing of the daemon's (its API
         * socket, database, environments' pidfds, terminal sessions) stays within reach. */
        close_fds_from(3, keep, n_keep);
}

static void helper_line(char kind, const char *text)
{
        char buf[1024];
        int n = snprintf(buf, sizeof(buf) - 1, "%c %s", kind, text);
        if (n < 0)
                return;
        if (n > (int)sizeof(buf) - 2)
                n = sizeof(buf) - 2;
        for (int i = 2; i < n; i++)
                if (buf[i] == '\n' || buf[i] == '\r')
                        buf[i] = ' ';
        buf[n++] = '\n';
        (void)write_all(helper_msg_fd, buf, (size_t)n);
}

void image_progress(const char *fmt, ...)
{
        char text[1000];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(text, sizeof(text), fmt, ap);
        va_end(ap);
        helper_line('p', text);
}

void image_report_size(uint64_t bytes)
{
        char text[32];
        snprintf(text, sizeof(text), "%llu", (unsigned long long)bytes);
        helper_line('s', text);
}

struct helper_arg {
        const struct image_helper_opts *opts;
        const char *partial;
        image_fill_fn fill;
        void *arg;
        int keep_fd;
};

/* The forked helper (supervise_fork): fill rootfs, say how it went on the message pipe. */
static void run_helper(void *data, pid_t daemon_pid, int msg_fd, int data_fd)
{
        const struct helper_arg *h = data;
        int keep[] = {msg_fd, h->keep_fd};
        image_helper_init(daemon_pid, keep, h->keep_fd >= 0 ? 2 : 1);
        helper_msg_fd = msg_fd;
        char err[480] = "";
        /* The fill function sees the partial directory as "." (an idmapped mount of it). */
        int r = helper_drop_root(h->partial, false, h->opts, err, sizeof(err));
        if (r >= 0)
                r = h->fill(IMAGE_HELPER_DIR "/work", IMAGE_HELPER_DIR "/work/rootfs", h->arg, err,
                            sizeof(err));
        if (r < 0) {
                char line[600];
                snprintf(line, sizeof(line), "%d %s", -r, err[0] ? err : strerror(-r));
                helper_line('e', line);
                _exit(1);
        }
        _exit(0);
}

/* ---------------------------------------------------------------- the job in the daemon */

/* "ERRNO message" from the helper: the message, and the errno as the client should see it
 * (content that is wrong: 422; what the helper cannot name: 400). */
static int helper_errno(const char *text, char *msg, size_t len)
{
        char *end;
        long e = strtol(text, &end, 10);
        snprintf(msg, len, "%s", *end == ' ' ? end + 1 : text);
        switch (e) {
        case ENOENT:
        case EACCES:
        case EFBIG:
        case ENOSPC:
        case EDQUOT:
        case EIO:
                return (int)-e;
        case EBADMSG:
        case EPROTO:
                return -ENOEXEC;
        default:
                return -EINVAL;
        }
}

static void take_line(struct image_job *j, const char *line)
{
        if (!line[0] || line[1] != ' ')
                return;
        const char *text = line + 2;
        if (line[0] == 'p' && j->cb.progress)
                j->cb.progress(text, j->cb.data);
        else if (line[0] == 'e')
                j->error_code = helper_errno(text, j->error, sizeof(j->error));
        else if (line[0] == 's')
                j->size = strtoull(text, NULL, 10);
}

/* Split what the helper wrote into lines; an overlong line is cut. false at EOF or error. */
static bool on_lines(void *data, int fd)
{
        struct image_job *j = data;
        char buf[4096];
        for (;;) {
                ssize_t n = read(fd, buf, sizeof(buf));
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        return n < 0 && errno == EAGAIN;
                for (ssize_t i = 0; i < n; i++) {
                        if (buf[i] == '\n') {
                                j->line[j->line_len] = 0;
                                take_line(j, j->line);
                                j->line_len = 0;
                        } else if (j->line_len < sizeof(j->line) - 1) {
                                j->line[j->line_len++] = buf[i];
                        }
                }
        }
}

static json_t *record_image(struct image_job *j, int *r, const char **msg)
{
        struct image_row row = {.created_at = wall_s(), .size = j->size};
        snprintf(row.name, sizeof(row.name), "%s", j->name);
        *r = state_image_insert(engine_state(j->eng), &row);
        if (*r < 0) {
                *msg = "cannot record the image";
                image_dir_remove(j->final);
                return NULL;
        }
        log_info("image %s: %s done (%llu bytes)", j->name, j->what, (unsigned long long)j->size);
        return json_pack("{s:s,s:I}", "name", j->name, "size", (json_int_t)j->size);
}

static void job_free(struct image_job *j)
{
        for (struct image_job **p = &running_jobs; *p; p = &(*p)->next)
                if (*p == j) {
                        *p = j->next;
                        break;
                }
        supervise_abandon(j->sv, true);
        free(j->partial);
        free(j->final);
        free(j);
}

/* Everything the helper wrote has been read (supervise.h). */
static void on_helper_exit(void *data, const struct supervise_exit *x)
{
        struct image_job *j = data;
        int r = 0;
        const char *msg = NULL;
        if (!supervise_exit_ok(x)) {
                bool killed = x->signaled;
                r = killed && !j->error[0] ? -ECANCELED : j->error_code ? j->error_code : -EINVAL;
                msg = j->error[0] ? j->error : killed ? "cancelled" : "failed";
        } else if ((r = image_partial_finish(engine_storage(j->eng), j->partial, j->final)) < 0) {
                msg = r == -EEXIST ? "an image with this name already exists"
                                   : "cannot move the image into place";
        }
        json_t *img = r >= 0 ? record_image(j, &r, &msg) : NULL;
        if (r < 0) {
                log_warn("image %s: %s failed: %s", j->name, j->what, msg);
                image_dir_remove(j->partial);
        }
        struct image_callbacks cb = j->cb;
        char msgcopy[512];
        snprintf(msgcopy, sizeof(msgcopy), "%s", msg ? msg : "");
        job_free(j);
        cb.done(r, r < 0 ? msgcopy : NULL, img, cb.data);
        json_decref(img);
}

static const struct supervise_ops job_ops = {.status = on_lines, .exit = on_helper_exit};

int image_job_start(struct engine *e, const char *name, const char *what, image_fill_fn fill,
                    void *arg, int keep_fd, const struct image_helper_opts *opts,
                    const struct image_callbacks *cb,
                    struct image_job **ret_job, char *err, size_t errlen)
{
        if (!name_is_valid(name)) {
                snprintf(err, errlen, "invalid image name (use letters, digits, '-', '_', '.')");
                return -EINVAL;
        }
        unsigned n = 0;
        for (struct image_job *k = running_jobs; k; k = k->next, n++)
                if (strcmp(k->name, name) == 0) {
                        snprintf(err, errlen, "image %s is being made right now", name);
                        return -EBUSY;
                }
        if (n >= MAX_IMAGE_JOBS) {
                snprintf(err, errlen, "too many image jobs at once (%d)", MAX_IMAGE_JOBS);
                return -EAGAIN;
        }
        if (engine_image_exists(e, name)) {
                snprintf(err, errlen, "an image with this name already exists");
                return -EEXIST;
        }
        int r = helper_ids_claim(e);
        if (r < 0) {
                snprintf(err, errlen, "no id range for image helpers: %s", strerror(-r));
                return r;
        }
        struct image_job *j = calloc(1, sizeof(*j));
        if (!j || asprintf(&j->partial, "%s/images/.partial-%s", engine_root(e), name) < 0 ||
            asprintf(&j->final, "%s/images/%s", engine_root(e), name) < 0) {
                if (j) {
                        free(j->partial);
                        free(j);
                }
                snprintf(err, errlen, "out of memory");
                return -ENOMEM;
        }
        j->eng = e;
        j->what = what;
        j->cb = *cb;
        snprintf(j->name, sizeof(j->name), "%s", name);
        r = image_partial_prepare(engine_storage(e), j->partial);
        if (r < 0) {
                snprintf(err, errlen, "cannot prepare the image directory: %s", strerror(-r));
                job_free(j);
                return r;
        }
        char label[NAME_BUF_SIZE + 16];
        snprintf(label, sizeof(label), "image %s", name); /* only for logs */
        struct supervise_spec spec = {
            .loop = engine_loop(e), .label = label, .ops = &job_ops, .data = j};
        struct helper_arg h = {.opts = opts, .partial = j->partial, .fill = fill, .arg = arg, .keep_fd = keep_fd};
        r = supervise_fork(&spec, true, false, run_helper, &h, &j->sv);
        if (r < 0) {
                image_dir_remove(j->partial);
                job_free(j);
                snprintf(err, errlen, "cannot start the %s helper", what);
                return -EAGAIN;
        }
        j->next = running_jobs;
        running_jobs = j;
        log_info("image %s: %s started", name, what);
        *ret_job = j;
        return 0;
}

void engine_image_cancel(struct image_job *j)
{
        if (j)
                supervise_kill(j->sv);
}

/* ---------------------------------------------------------------- import */

static int fill_from_archive(const char *partial, const char *rootfs, void *arg, char *err,
                             size_t errlen)
{
        uint64_t bytes = 0;
        int r = image_unpack(*(int *)arg, rootfs, &bytes, err, errlen);
        if (r >= 0)
                image_report_size(bytes);
        return r;
}

int engine_image_import(struct engine *e, const char *name, int archive_fd,
                        const struct image_callbacks *cb, struct image_job **ret_job, char *err,
                        size_t errlen)
{
        return image_job_start(e, name, "import", fill_from_archive, &archive_fd, archive_fd, NULL, cb,
                               ret_job, err, errlen);
}

/* ---------------------------------------------------------------- export */

struct export_arg {
        const char *rootfs;
        enum image_compression compression;
};

static void run_export(void *data, pid_t daemon_pid, int status_fd, int tar_fd)
{
        const struct export_arg *a = data;
        image_helper_init(daemon_pid, &tar_fd, 1);
        char msg[480];
        if (helper_drop_root(a->rootfs, true, NULL, msg, sizeof(msg)) < 0)
                _exit(1);
        _exit(image_pack(IMAGE_HELPER_DIR "/work", tar_fd, a->compression, msg, sizeof(msg)) < 0);
}

int image_export_start(struct engine *e, const char *name, enum image_compression compression,
                       const struct supervise_ops *ops, void *data, unsigned *count,
                       struct supervise **ret, char *err, size_t errlen)
{
        char rootfs[PATH_MAX];
        if (!engine_image_exists(e, name) ||
            BUF_PRINTF(rootfs, "%s/images/%s/rootfs", engine_root(e), name) < 0) {
                snprintf(err, errlen, "image %s not found", name);
                return -ENOENT;
        }
        int r = helper_ids_claim(e);
        if (r < 0) {
                snprintf(err, errlen, "no id range for image helpers: %s", strerror(-r));
                return r;
        }
        struct export_arg a = {.rootfs = rootfs, .compression = compression};
        struct supervise_spec spec = {.loop = engine_loop(e),
                                      .label = "image export",
                                      .count = count,
                                      .ops = ops,
                                      .data = data};
        r = supervise_fork(&spec, false, true, run_export, &a, ret);
        if (r < 0) {
                snprintf(err, errlen, "cannot start the export helper");
                return -EAGAIN;
        }
        return 0;
}

/* ---------------------------------------------------------------- list, delete, cleanup */

json_t *engine_image_list(struct engine *e)
{
        struct image_row *rows = NULL;
        size_t n = 0;
        json_t *arr = json_array();
        if (state_image_list(engine_state(e), &rows, &n) < 0)
                return arr;
        for (size_t i = 0; i < n; i++) {
                int used = 0;
                engine_image_in_use(e, rows[i].name, &used);
                char ts[RFC3339_SIZE];
                json_array_append_new(arr, json_pack("{s:s,s:I,s:s,s:i}", "name", rows[i].name,
                                                     "size", (json_int_t)rows[i].size, "created_at",
                                                     format_rfc3339(rows[i].created_at, ts),
                                                     "used_by", used));
        }
        free(rows);
        return arr;
}

int engine_image_delete(struct engine *e, const char *name, char *err, size_t errlen)
{
        int used = 0;
        if (!name_is_valid(name) || !engine_image_exists(e, name)) {
                snprintf(err, errlen, "image %s not found", name);
                return -ENOENT;
        }
        if (engine_image_in_use(e, name, &used)) {
                snprintf(err, errlen, "image %s is used by %d environment(s)", name, used);
                return -EBUSY;
        }
        char path[PATH_MAX];
        if (BUF_PRINTF(path, "%s/images/%s", engine_root(e), name) < 0) {
                snprintf(err, errlen, "image %s: path too long", name);
                return -ENAMETOOLONG;
        }
        int r = state_image_delete(engine_state(e), name);
        if (r < 0 && r != -ENOENT) {
                snprintf(err, errlen, "cannot update the record: %s", strerror(-r));
                return r;
        }
        engine_spares_drop(e); /* a spare shares this image's data */
        r = image_dir_remove(path);
        if (r < 0)
                log_warn("image %s: removing %s: %s", name, path, strerror(-r));
        log_info("image %s removed", name);
        return 0;
}

/* Partial images left by a crash (their helpers died with the daemon). */
void engine_images_cleanup(struct engine *e)
{
        _cleanup_free_ char *path = path_join(engine_root(e), "images");
        _cleanup_closedir_ DIR *d = path ? opendir(path) : NULL;
        if (!d)
                return;
        engine_image_helpers_release(e); /* a claim left by a daemon that died */
        struct dirent *de;
        while ((de = readdir(d)))
                if (strncmp(de->d_name, ".partial-", 9) == 0) {
                        log_info("removing interrupted image job %s", de->d_name + 9);
                        _cleanup_free_ char *partial = path_join(path, de->d_name);
                        if (partial)
                                image_dir_remove(partial);
                }
}

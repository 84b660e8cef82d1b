/* Images: <root>/images/<name>/rootfs, owned by ids 0..65535, recorded in the state database.
 * Import unpacks in a forked helper (chrooted into the new directory, see lib/image.h) so a
 * large archive never stalls the event loop; the partial directory is renamed into place only
 * when complete, and leftovers of an interrupted import are removed at startup. */
#include "daemon/engine.h"
#include "daemon/log.h"
#include "lib/image.h"
#include "lib/parse.h"
#include "lib/util.h"

#include <dirent.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>


struct import_job {
        struct engine *eng;
        char name[64];
        char partial[4096], final[4096];
        int pidfd;
        int msg_fd;
        struct loop_source *src;
        image_done_fn done;
        void *data;
};

bool engine_image_exists(struct engine *e, const char *name)
{
        char path[4096];
        snprintf(path, sizeof(path), "%s/images/%s/rootfs", engine_root(e), name);
        struct stat st;
        return name_is_valid(name) && stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static void import_finish(struct import_job *j, int r, const char *msg)
{
        json_t *img = NULL;
        if (r >= 0) {
                struct stat st;
                char rootfs[4200];
                snprintf(rootfs, sizeof(rootfs), "%s/rootfs", j->partial);
                struct storage *sto = engine_storage(j->eng);
                if (stat(j->final, &st) == 0) {
                        r = -EEXIST;
                        msg = "an image with this name already exists";
                } else if ((r = sto->ops->image_seal(sto, rootfs)) < 0) {
                        msg = "cannot make the image read-only";
                } else if (rename(j->partial, j->final) < 0) {
                        r = -errno;
                        msg = "cannot move the image into place";
                }
        }
        uint64_t size = 0;
        if (r >= 0) {
                char sizefile[4200];
                snprintf(sizefile, sizeof(sizefile), "%s/size", j->final);
                char *s = NULL;
                if (read_file_at(AT_FDCWD, sizefile, 64, &s) >= 0) {
                        size = strtoull(s, NULL, 10);
                        free(s);
                }
                struct image_row row = {.created_at = wall_s(), .size = size};
                snprintf(row.name, sizeof(row.name), "%s", j->name);
                r = state_image_insert(engine_state(j->eng), &row);
                if (r < 0) {
                        msg = "cannot record the image";
                        rm_rf_at(AT_FDCWD, j->final);
                } else {
                        img = json_pack("{s:s,s:I}", "name", j->name, "size", (json_int_t)size);
                        log_info("image %s imported (%llu bytes)", j->name, (unsigned long long)size);
                }
        }
        if (r < 0)
                rm_rf_at(AT_FDCWD, j->partial);
        j->done(r, msg, img, j->data);
        json_decref(img);
}

static void on_import_exit(struct loop_source *s, int fd, uint32_t events, void *data)
{
        struct import_job *j = data;
        siginfo_t si = {0};
        waitid(P_PIDFD, (id_t)j->pidfd, &si, WEXITED);
        char msg[512] = "";
        ssize_t n = read(j->msg_fd, msg, sizeof(msg) - 1);
        msg[n > 0 ? n : 0] = 0;
        loop_remove(j->src);
        close(j->pidfd);
        close(j->msg_fd);
        bool ok = si.si_code == CLD_EXITED && si.si_status == 0;
        import_finish(j, ok ? 0 : -EINVAL, ok ? NULL : (msg[0] ? msg : "import failed"));
        free(j);
}

void engine_image_import(struct engine *e, const char *name, int archive_fd, image_done_fn done,
                         void *data)
{
        if (!name_is_valid(name)) {
                done(-EINVAL, "invalid image name (use letters, digits, '-', '_', '.')", NULL, data);
                return;
        }
        if (engine_image_exists(e, name)) {
                done(-EEXIST, "an image with this name already exists", NULL, data);
                return;
        }
        struct import_job *j = calloc(1, sizeof(*j));
        if (!j) {
                done(-ENOMEM, "out of memory", NULL, data);
                return;
        }
        j->eng = e;
        j->done = done;
        j->data = data;
        snprintf(j->name, sizeof(j->name), "%s", name);
        snprintf(j->partial, sizeof(j->partial), "%s/images/.partial-%s", engine_root(e), name);
        snprintf(j->final, sizeof(j->final), "%s/images/%s", engine_root(e), name);
        char rootfs[4200];
        snprintf(rootfs, sizeof(rootfs), "%s/rootfs", j->partial);
        rm_rf_at(AT_FDCWD, j->partial);
        int p[2];
        struct storage *st = engine_storage(e);
        int sr = mkdir(j->partial, 0700) < 0 ? -errno : st->ops->image_prepare(st, rootfs);
        if (sr < 0)
                errno = -sr;
        if (sr < 0 || pipe2(p, O_CLOEXEC) < 0) {
                int r = -errno;
                rm_rf_at(AT_FDCWD, j->partial);
                free(j);
                done(r, "cannot prepare the image directory", NULL, data);
                return;
        }
        pid_t pid = fork();
        if (pid == 0) {
                close(p[0]);
                char err[480] = "";
                uint64_t bytes = 0;
                char sizefile[4200];
                snprintf(sizefile, sizeof(sizefile), "%s/size", j->partial);
                int sfd = open(sizefile, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
                int r = image_unpack(archive_fd, rootfs, &bytes, err, sizeof(err));
                if (r < 0) {
                        (void)!write(p[1], err, strlen(err));
                        _exit(1);
                }
                dprintf(sfd, "%llu", (unsigned long long)bytes);
                _exit(0);
        }
        close(p[1]);
        j->msg_fd = p[0];
        j->pidfd = pid > 0 ? sys_pidfd_open(pid, 0) : -1;
        if (pid < 0 || j->pidfd < 0 ||
            loop_add_fd(engine_loop(e), j->pidfd, EPOLLIN, on_import_exit, j, &j->src) < 0) {
                if (pid > 0) {
                        kill(pid, SIGKILL);
                        waitpid(pid, NULL, 0);
                }
                close(j->msg_fd);
                if (j->pidfd >= 0)
                        close(j->pidfd);
                rm_rf_at(AT_FDCWD, j->partial);
                free(j);
                done(-EAGAIN, "cannot start the import helper", NULL, data);
        }
}

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
                char ts[32];
                time_t t = (time_t)rows[i].created_at;
                struct tm tm;
                gmtime_r(&t, &tm);
                strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%SZ", &tm);
                json_array_append_new(arr, json_pack("{s:s,s:I,s:s,s:i}", "name", rows[i].name,
                                                     "size", (json_int_t)rows[i].size,
                                                     "created_at", ts, "used_by", used));
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
        char path[4096];
        snprintf(path, sizeof(path), "%s/images/%s", engine_root(e), name);
        int r = state_image_delete(engine_state(e), name);
        if (r < 0 && r != -ENOENT) {
                snprintf(err, errlen, "cannot update the record: %s", strerror(-r));
                return r;
        }
        r = rm_rf_at(AT_FDCWD, path);
        if (r < 0)
                log_warn("image %s: removing %s: %s", name, path, strerror(-r));
        log_info("image %s removed", name);
        return 0;
}

/* Partial imports left by a crash. */
void engine_images_cleanup(struct engine *e)
{
        char path[4096];
        snprintf(path, sizeof(path), "%s/images", engine_root(e));
        DIR *d = opendir(path);
        if (!d)
                return;
        struct dirent *de;
        while ((de = readdir(d)))
                if (strncmp(de->d_name, ".partial-", 9) == 0) {
                        log_info("removing interrupted image import %s", de->d_name + 9);
                        rm_rf_at(dirfd(d), de->d_name);
                }
        closedir(d);
}

/* FILES_WATCH: inotify below one directory of an environment, as NDJSON lines on a pipe.
 *
 * Runs in the files helper (files.c): inside the environment's mount and user namespaces, its
 * root, outside its pid namespace, holding no host fd. files.c resolves the watched directory
 * with openat2(RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS); everything below it is opened
 * relative to it with RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS and O_NOFOLLOW, so a symlink is
 * never followed and nothing outside the watched tree is ever watched or opened. Watches are
 * added by fd (see watch_add), never by a path string.
 *
 * Costs: one inotify instance and up to FILES_WATCH_MAX_WATCHES watches (kernel memory charged
 * to the environment's cgroup, which the helper has joined, and counted against the host's
 * fs.inotify limits for the environment's root), about 0.5 MiB here plus a path per watch,
 * and a scan of the tree at the start and of every directory created later. Bounded output: a
 * reader that falls more than the pipe (1 MiB) plus 64 KiB behind loses events, and is told
 * so with one {"event":"overflow"} line. */
#include "lib/base64.h"
#include "lib/files_internal.h"
#include "lib/util.h"

#include <dirent.h>
#include <linux/openat2.h>
#include <poll.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/syscall.h>

/* Watches are found by descriptor in an open-addressed table of twice the limit (probes stay
 * short; 256 KiB). Each keeps its directory's path relative to the watched one, not an fd:
 * 8192 open directories would pin as many dentries and keep every watched mount inside the
 * environment busy (umount: EBUSY); an inotify watch does neither. */
#define WATCH_SLOTS    (2 * FILES_WATCH_MAX_WATCHES)
#define WATCH_OUT_MAX  (64u * 1024) /* lines waiting for the pipe; beyond, events are dropped */
#define WATCH_LINE_MAX (32u * 1024) /* a 4351-byte path with every byte escaped as \u00XX */
#define WATCH_EVENTS                                                                               \
        (IN_CREATE | IN_MODIFY | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_ATTRIB |             \
         IN_DELETE_SELF)

static const char overflow_line[] = "{\"event\":\"overflow\"}\n";

/* A directory below dfd (one name or a relative path), following no symlink at all and never
 * leaving dfd. */
static int open_beneath(int dfd, const char *path)
{
        return files_open_below(dfd, path, O_RDONLY | O_DIRECTORY);
}

struct watch_slot {
        int wd; /* 0: free (the kernel's descriptors start at 1) */
        int depth;
        char *rel; /* "" for the watched directory */
};

struct watcher {
        int ifd, top_fd, root_fd, dfd;
        dev_t top_dev; /* the watched directory, to know it again (see watch_reopen_top) */
        ino_t top_ino;
        const char *top; /* the watched path as asked (normalized): the prefix of every event */
        bool recursive;
        bool ready;        /* set up: from now on a limit loses events instead of failing */
        bool overflow;     /* events were lost: say so once, when there is room */
        bool done;         /* the watched directory is gone */
        bool move_pending; /* a directory's move_from, waiting for its move_to */
        uint32_t move_cookie;
        char move_rel[FILES_PATH_MAX];
        int top_wd;
        size_t count;
        uint64_t last_out; /* when the pipe last took bytes */
        size_t out_len;
        struct watch_slot slots[WATCH_SLOTS];
        int drop[FILES_WATCH_MAX_WATCHES];
        char out[WATCH_OUT_MAX];
        char line[WATCH_LINE_MAX];
        char path[FILES_PATH_MAX + 1 + 255]; /* top/rel (checked) + "/" + a name */
        char events[64 * 1024] __attribute__((aligned(__alignof__(struct inotify_event))));
};

static size_t watch_home(int wd)
{
        return ((uint32_t)wd * 2654435761u) & (WATCH_SLOTS - 1);
}

static struct watch_slot *watch_find(struct watcher *w, int wd)
{
        if (wd <= 0)
                return NULL;
        /* Never more than half full: the probe ends at a free slot. */
        for (size_t i = watch_home(wd);; i = (i + 1) & (WATCH_SLOTS - 1)) {
                if (w->slots[i].wd == wd)
                        return &w->slots[i];
                if (w->slots[i].wd == 0)
                        return NULL;
        }
}

/* Free the slot, moving later entries of its probe run back (no tombstones). */
static void watch_forget(struct watcher *w, struct watch_slot *s)
{
        const size_t mask = WATCH_SLOTS - 1;
        size_t hole = (size_t)(s - w->slots);
        free(s->rel);
        for (size_t j = (hole + 1) & mask; w->slots[j].wd; j = (j + 1) & mask) {
                size_t home = watch_home(w->slots[j].wd);
                if (((j - home) & mask) >= ((j - hole) & mask)) {
                        w->slots[hole] = w->slots[j];
                        hole = j;
                }
        }
        w->slots[hole] = (struct watch_slot){0};
        w->count--;
}

/* Push queued lines into the pipe without blocking. -EPIPE once nobody reads it. */
static int watch_flush(struct watcher *w)
{
        size_t off = 0;
        int r = 0;
        while (off < w->out_len) {
                ssize_t n = write(w->dfd, w->out + off, w->out_len - off);
                if (n > 0) {
                        off += (size_t)n;
                        w->last_out = now_ms();
                } else if (n < 0 && errno == EINTR) {
                        continue;
                } else {
                        r = n < 0 && errno != EAGAIN ? -errno : 0;
                        break;
                }
        }
        if (off > 0) {
                memmove(w->out, w->out + off, w->out_len - off);
                w->out_len -= off;
        }
        return r;
}

static bool watch_room(struct watcher *w, size_t len)
{
        if (w->out_len + len > WATCH_OUT_MAX)
                (void)watch_flush(w);
        return w->out_len + len <= WATCH_OUT_MAX;
}

/* After a loss, events flow again only once half the queue is free (else a reader that
 * keeps it full would get an "overflow" line between every two events), led by the one
 * "overflow" line that says they were lost. */
static bool watch_resume(struct watcher *w)
{
        if (!w->overflow)
                return true;
        if (!watch_room(w, WATCH_OUT_MAX / 2))
                return false;
        memcpy(w->out + w->out_len, overflow_line, sizeof(overflow_line) - 1);
        w->out_len += sizeof(overflow_line) - 1;
        w->overflow = false;
        return true;
}

/* Queue a whole line or drop it: a slow reader loses events, and learns it once. */
static void watch_queue(struct watcher *w, const char *line, size_t len)
{
        if (!watch_resume(w))
                return;
        if (!watch_room(w, len)) {
                w->overflow = true;
                return;
        }
        memcpy(w->out + w->out_len, line, len);
        w->out_len += len;
}

/* JSON string contents; out has room for 6 bytes per input byte. */
static size_t json_escape(char *out, const char *s, size_t len)
{
        static const char hex[] = "0123456789abcdef";
        size_t o = 0;
        for (size_t i = 0; i < len; i++) {
                unsigned char c = (unsigned char)s[i];
                if (c == '"' || c == '\\') {
                        out[o++] = '\\';
                        out[o++] = (char)c;
                } else if (c < 0x20) {
                        memcpy(out + o, "\\u00", 4);
                        out[o + 4] = hex[c >> 4];
                        out[o + 5] = hex[c & 15];
                        o += 6;
                } else {
                        out[o++] = (char)c;
                }
        }
        return o;
}

static void path_append(char *buf, size_t *len, const char *comp)
{
        if (!*comp)
                return;
        if (*len == 0 || buf[*len - 1] != '/')
                buf[(*len)++] = '/';
        size_t n = strlen(comp);
        memcpy(buf + *len, comp, n);
        *len += n;
}

/* One event line for top/rel/name (name NULL: the directory rel itself). */
static void watch_emit(struct watcher *w, const char *rel, const char *name, const char *event,
                       bool dir)
{
        /* top and rel fit FILES_PATH_MAX together (checked when rel was watched), name 255. */
        size_t plen = strlen(w->top);
        memcpy(w->path, w->top, plen);
        path_append(w->path, &plen, rel);
        if (name)
                path_append(w->path, &plen, name);
        bool b64 = !utf8_valid(w->path, plen);
        size_t o = (size_t)snprintf(w->line, sizeof(w->line), "{\"path\":\"");
        o += b64 ? base64_encode(w->path, plen, w->line + o)
                 : json_escape(w->line + o, w->path, plen);
        o += (size_t)snprintf(w->line + o, sizeof(w->line) - o,
                              "\",\"event\":\"%s\",\"type\":\"%s\"%s}\n", event,
                              dir ? "dir" : "file", b64 ? ",\"encoding\":\"base64\"" : "");
        watch_queue(w, w->line, o);
}

/* A limit was reached: fatal while setting up (the caller would silently miss changes), later
 * reported as lost events. */
static int watch_limit(struct watcher *w, int err)
{
        if (!w->ready)
                return err;
        w->overflow = true;
        return 0;
}

/* Watch the directory open at fd (any kind of fd). The descriptor; 0 when the directory is
 * watched already (met again through a bind mount); -errno. */
static int watch_add(struct watcher *w, int fd, const char *rel, int depth)
{
        if (w->count >= FILES_WATCH_MAX_WATCHES)
                return -E2BIG;
        /* Named by the fd, not by a path: "." of a cwd set with fchdir is looked up nowhere.
         * (The usual /proc/self/fd/N would be resolved in the environment's /proc, which does
         * not show this process -- it stays outside the pid namespace -- and is the
         * environment's to replace.) Back to "/" at once: a cwd would keep a mount busy. */
        if (fchdir(fd) < 0)
                return -errno;
        int wd = inotify_add_watch(w->ifd, ".", WATCH_EVENTS | IN_ONLYDIR | IN_DONT_FOLLOW);
        int r = wd < 0 ? -errno : 0;
        if (fchdir(w->root_fd) < 0 && r == 0) {
                r = -errno;
                if (!watch_find(w, wd))
                        inotify_rm_watch(w->ifd, wd);
        }
        if (r < 0)
                return r;
        if (watch_find(w, wd))
                return 0;
        char *copy = strdup(rel);
        if (!copy) {
                inotify_rm_watch(w->ifd, wd);
                return -ENOMEM;
        }
        size_t i = watch_home(wd);
        while (w->slots[i].wd)
                i = (i + 1) & (WATCH_SLOTS - 1);
        w->slots[i] = (struct watch_slot){.wd = wd, .depth = depth, .rel = copy};
        w->count++;
        return wd;
}

static int watch_tree(struct watcher *w, int fd, const char *rel, int depth, bool announce);

/* Every directory in fd, watched in turn (never through a symlink). announce: report each
 * entry as created -- a directory that appeared while watched may have been filled before
 * its own watch existed. */
static int watch_scan(struct watcher *w, int fd, const char *rel, int depth, bool announce)
{
        _cleanup_closedir_ DIR *d = NULL;
        int r = opendir_at(fd, ".", &d);
        if (r < 0)
                return w->ready || depth > 0 ? 0 : r;
        char crel[FILES_PATH_MAX];
        size_t toplen = strlen(w->top);
        FOREACH_DIRENT(de, d)
        {
                bool isdir = de->d_type == DT_DIR;
                struct stat st;
                if (de->d_type == DT_UNKNOWN) {
                        if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                                continue;
                        isdir = S_ISDIR(st.st_mode);
                }
                if (announce)
                        watch_emit(w, rel, de->d_name, "create", isdir);
                if (!isdir || !w->recursive)
                        continue;
                int n = snprintf(crel, sizeof(crel), "%s%s%s", rel, *rel ? "/" : "", de->d_name);
                if (depth >= FILES_WATCH_MAX_DEPTH || n < 0 ||
                    toplen + 1 + (size_t)n >= FILES_PATH_MAX) {
                        if ((r = watch_limit(w, -E2BIG)) < 0)
                                break;
                        continue;
                }
                _cleanup_close_ int cfd = open_beneath(dirfd(d), de->d_name);
                if (cfd < 0)
                        continue; /* gone, swapped for a symlink, or not ours to read */
                if ((r = watch_tree(w, cfd, crel, depth + 1, announce)) < 0)
                        break;
        }
        return r;
}

static int watch_tree(struct watcher *w, int fd, const char *rel, int depth, bool announce)
{
        if (depth > 0 && files_is_pseudo_fs(fd))
                return 0; /* /proc, /sys, ...: kernel interfaces, not files */
        int wd = watch_add(w, fd, rel, depth);
        if (wd == -E2BIG || wd == -ENOSPC)
                return watch_limit(w, wd);
        if (wd < 0 && depth == 0)
                return wd;
        if (wd <= 0 || !w->recursive || files_is_pseudo_fs(fd))
                return 0; /* below the top, what cannot be watched is left out */
        return watch_scan(w, fd, rel, depth, announce);
}

static bool in_tree(const char *rel, const char *top, size_t len)
{
        return !strncmp(rel, top, len) && (rel[len] == 0 || rel[len] == '/');
}

static int rel_depth(const char *rel)
{
        int n = 1;
        for (const char *p = rel; *p; p++)
                n += *p == '/';
        return n;
}

static void watch_drop(struct watcher *w, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                inotify_rm_watch(w->ifd, w->drop[i]);
                struct watch_slot *s = watch_find(w, w->drop[i]);
                if (s)
                        watch_forget(w, s);
        }
}

/* A directory moved out of the tree: forget it and everything below. */
static void watch_drop_tree(struct watcher *w, const char *rel)
{
        size_t len = strlen(rel), n = 0;
        for (size_t i = 0; i < WATCH_SLOTS; i++) {
                const struct watch_slot *s = &w->slots[i];
                if (s->wd && s->wd != w->top_wd && in_tree(s->rel, rel, len))
                        w->drop[n++] = s->wd;
        }
        watch_drop(w, n);
}

/* A directory moved within the tree: its watches (the kernel's follow the inodes) carry on
 * under the new name, so events already queued for them get the new paths too. */
static void watch_move_tree(struct watcher *w, const char *from, const char *to)
{
        size_t flen = strlen(from), tlen = strlen(to), toplen = strlen(w->top), n = 0;
        for (size_t i = 0; i < WATCH_SLOTS; i++) {
                struct watch_slot *s = &w->slots[i];
                if (!s->wd || s->wd == w->top_wd || !in_tree(s->rel, from, flen))
                        continue;
                size_t rest = strlen(s->rel + flen);
                char *rel =
                    toplen + 1 + tlen + rest < FILES_PATH_MAX ? malloc(tlen + rest + 1) : NULL;
                if (!rel) {
                        w->drop[n++] = s->wd; /* its paths would be too long now */
                        continue;
                }
                memcpy(rel, to, tlen);
                memcpy(rel + tlen, s->rel + flen, rest + 1);
                free(s->rel);
                s->rel = rel;
                s->depth = rel_depth(rel);
        }
        if (n > 0) {
                watch_drop(w, n);
                w->overflow = true;
        }
}

/* The watched directory, resolved again as at the start, if it is still the same one. No fd
 * of it is kept between events: an open directory that is removed only reports it
 * (IN_DELETE_SELF) once its last fd is closed. */
static int watch_reopen_top(struct watcher *w)
{
        int fd = files_open_in_root(w->root_fd, w->top, O_PATH | O_DIRECTORY);
        struct stat st;
        if (fd >= 0 && (fstat(fd, &st) < 0 || st.st_dev != w->top_dev || st.st_ino != w->top_ino)) {
                close(fd);
                fd = -ESTALE;
        }
        return fd;
}

static const char *event_name(uint32_t mask)
{
        return mask & IN_CREATE       ? "create"
               : mask & IN_MODIFY     ? "modify"
               : mask & IN_DELETE     ? "delete"
               : mask & IN_MOVED_FROM ? "move_from"
               : mask & IN_MOVED_TO   ? "move_to"
               : mask & IN_ATTRIB     ? "attrib"
                                      : NULL;
}

/* A directory's move_from waits for the next event: the matching move_to (same cookie) means
 * a move within the tree, anything else that it left. */
static void watch_settle_move(struct watcher *w, const struct inotify_event *next)
{
        if (!w->move_pending)
                return;
        if (next && (next->mask & IN_MOVED_TO) && next->cookie == w->move_cookie)
                return;
        w->move_pending = false;
        watch_drop_tree(w, w->move_rel);
}

static void watch_event(struct watcher *w, const struct inotify_event *ev)
{
        watch_settle_move(w, ev);
        if (ev->mask & IN_Q_OVERFLOW) {
                w->overflow = true;
                return;
        }
        struct watch_slot *s = watch_find(w, ev->wd);
        if (!s)
                return; /* dropped meanwhile */
        if (ev->mask & IN_IGNORED) {
                w->done |= ev->wd == w->top_wd;
                watch_forget(w, s);
                return;
        }
        bool dir = ev->mask & IN_ISDIR;
        if (ev->len == 0 || !ev->name[0]) {
                /* About the directory itself: its parent's watch reports it, but for the top. */
                if (ev->wd == w->top_wd && (ev->mask & (IN_DELETE_SELF | IN_ATTRIB)))
                        watch_emit(w, "", NULL, ev->mask & IN_DELETE_SELF ? "delete" : "attrib",
                                   true);
                return;
        }
        const char *what = event_name(ev->mask);
        if (!what)
                return;
        watch_emit(w, s->rel, ev->name, what, dir);
        if (!dir || !w->recursive || !(ev->mask & (IN_CREATE | IN_MOVED_FROM | IN_MOVED_TO)))
                return;
        char rel[FILES_PATH_MAX];
        int depth = s->depth + 1; /* s moves when the table changes: read it first */
        int n = snprintf(rel, sizeof(rel), "%s%s%s", s->rel, *s->rel ? "/" : "", ev->name);
        if (n < 0 || strlen(w->top) + 1 + (size_t)n >= FILES_PATH_MAX) {
                watch_limit(w, -E2BIG);
                return;
        }
        if (ev->mask & IN_MOVED_FROM) {
                w->move_pending = true;
                w->move_cookie = ev->cookie;
                memcpy(w->move_rel, rel, (size_t)n + 1);
                return;
        }
        if ((ev->mask & IN_MOVED_TO) && w->move_pending) {
                w->move_pending = false;
                watch_move_tree(w, w->move_rel, rel);
                return;
        }
        if (depth > FILES_WATCH_MAX_DEPTH) {
                watch_limit(w, -E2BIG);
                return;
        }
        /* Created, or moved in from outside: by its path below the watched directory,
         * following no symlink. Renamed meanwhile, it is not found (or another directory is
         * that is also in the tree) -- never anything outside. */
        _cleanup_close_ int top = watch_reopen_top(w);
        _cleanup_close_ int fd = top >= 0 ? open_beneath(top, rel) : -EBADF;
        if (fd >= 0)
                watch_tree(w, fd, rel, depth, ev->mask & IN_CREATE);
}

static int watch_setup(struct watcher *w, const struct files_request *rq, int sfd)
{
        w->ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
        if (w->ifd < 0)
                return files_fail(sfd, errno == EMFILE ? -EMFILE : -errno,
                                  "inotify: %s (the host's fs.inotify.max_user_instances?)",
                                  strerror(errno));
        struct stat st;
        if (fstat(w->top_fd, &st) < 0)
                return files_fail(sfd, -errno, "%s: %s", rq->path, strerror(errno));
        w->top_dev = st.st_dev;
        w->top_ino = st.st_ino;
        int wd = watch_add(w, w->top_fd, "", 0);
        if (wd < 0)
                return files_fail(sfd, wd, "%s: %s", rq->path, strerror(-wd));
        w->top_wd = wd;
        int r = w->recursive && !files_is_pseudo_fs(w->top_fd)
                    ? watch_scan(w, w->top_fd, "", 0, false)
                    : 0;
        if (r == -E2BIG)
                return files_fail(sfd, r,
                                  "%s: more than %d directories, deeper than %d levels or paths "
                                  "longer than %d bytes (watch a smaller tree, or recursive=0)",
                                  rq->path, FILES_WATCH_MAX_WATCHES, FILES_WATCH_MAX_DEPTH,
                                  FILES_PATH_MAX - 1);
        if (r == -ENOSPC)
                return files_fail(sfd, -EAGAIN,
                                  "%s: the host's limit of inotify watches is reached "
                                  "(fs.inotify.max_user_watches)",
                                  rq->path);
        if (r < 0)
                return files_fail(sfd, r, "%s: %s", rq->path, strerror(-r));
        return 0;
}

static int watch_loop(struct watcher *w)
{
        while (!w->done) {
                (void)watch_resume(w);
                uint64_t idle = now_ms() - w->last_out;
                if (w->out_len == 0 && idle >= FILES_WATCH_KEEPALIVE_MS) {
                        watch_queue(w, "\n", 1);
                        idle = 0;
                }
                int r = watch_flush(w);
                if (r < 0)
                        return r;
                /* The pipe's write end reports POLLERR once its reader is gone, asked or not. */
                struct pollfd p[2] = {
                    {.fd = w->ifd, .events = POLLIN},
                    {.fd = w->dfd, .events = w->out_len ? POLLOUT : 0},
                };
                uint64_t wait =
                    idle < FILES_WATCH_KEEPALIVE_MS ? FILES_WATCH_KEEPALIVE_MS - idle : 0;
                if (poll(p, 2, (int)wait) < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (p[1].revents & (POLLERR | POLLHUP))
                        return -EPIPE;
                if (!(p[0].revents & POLLIN)) {
                        watch_settle_move(w, NULL); /* no move_to came: it left the tree */
                        continue;
                }
                ssize_t n = read(w->ifd, w->events, sizeof(w->events));
                if (n < 0 && (errno == EAGAIN || errno == EINTR))
                        continue;
                if (n < 0)
                        return -errno;
                for (size_t off = 0; off + sizeof(struct inotify_event) <= (size_t)n;) {
                        const struct inotify_event *ev = (const void *)(w->events + off);
                        watch_event(w, ev);
                        off += sizeof(*ev) + ev->len;
                }
        }
        /* The watched directory is gone: the last lines, then the end. */
        (void)fcntl(w->dfd, F_SETFL, 0);
        int r = write_all(w->dfd, w->out, w->out_len);
        w->out_len = 0;
        return r;
}

int files_watch_run(int root_fd, int top_fd, const struct files_request *rq, int sfd, int dfd)
{
        struct watcher *w = calloc(1, sizeof(*w));
        if (!w)
                return files_fail(sfd, -ENOMEM, "watch: out of memory");
        w->ifd = -EBADF;
        w->top_fd = top_fd;
        w->root_fd = root_fd;
        w->dfd = dfd;
        w->top = rq->path;
        w->recursive = rq->recursive;
        int r = watch_setup(w, rq, sfd);
        close(TAKE_FD(w->top_fd));
        if (r >= 0 && fcntl(dfd, F_SETFL, O_NONBLOCK) < 0)
                r = files_fail(sfd, -errno, "watch: %s", strerror(errno));
        if (r >= 0) {
                w->ready = true;
                w->last_out = now_ms();
                files_report(sfd, FILES_READY, 0, w->count, 0, NULL);
                r = watch_loop(w);
                if (r == -EPIPE)
                        r = 0; /* nobody listens any more: not a failure */
                else if (r < 0)
                        files_fail(sfd, r, "%s: watching: %s", rq->path, strerror(-r));
                else
                        files_report(sfd, FILES_DONE, 0, 0, 0, NULL);
        }
        for (size_t i = 0; i < WATCH_SLOTS; i++)
                free(w->slots[i].rel);
        if (w->ifd >= 0)
                close(w->ifd);
        free(w);
        return r;
}

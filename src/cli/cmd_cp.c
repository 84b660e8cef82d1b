/* paddock cp SRC DST: copy between the host and an environment; exactly one side is NAME:/PATH.
 *
 *   host file -> env   PUT files?path=..&mode=.. with the file as the body (Content-Length),
 *                      or chunked from standard input ("-") or a pipe
 *   host dir  -> env   POST files/mkdir?parents=1, then PUT archive?path=.. with the output of
 *                      `tar -C DIR --numeric-owner -cf - .` (chunked; aborted if tar fails)
 *   env file  -> host  GET files?path=.. written to DST (or standard output) as it arrives
 *   env dir   -> host  GET archive?path=.. piped into `tar -C DST -xf -` (see tarproc.h)
 *
 * What SRC is and where it lands follow cp -r: a GET files/stat of the environment's side
 * decides. When DST is an existing directory, SRC goes into it under its own name (SRC/. means
 * "what SRC contains"); otherwise DST is the file, or the directory created to hold SRC's
 * contents. Nothing is buffered whole, so sizes are bounded only by the daemon's limits. */
#include "cli/cli.h"
#include "cli/envpath.h"
#include "cli/opts.h"
#include "cli/tarproc.h"
#include "lib/util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char cp_help[] =
    "Usage: paddock cp SRC DST\n"
    "\n"
    "Copy a file or a directory between the host and an environment. Exactly one of SRC and\n"
    "DST is NAME:/PATH (an absolute path inside environment NAME); the other is a host path,\n"
    "or - for standard input or output (a single file).\n"
    "\n"
    "A file goes into DST when DST is an existing directory, else it becomes DST (whose\n"
    "parent must exist); a file copied in keeps its permission bits. A directory travels as a\n"
    "tar stream: when DST is an existing directory, SRC is copied into it under its own name\n"
    "(SRC/. copies only what SRC contains); otherwise DST is created and gets SRC's contents.\n"
    "Copying a directory needs tar on this host; files copied out are owned by you, with your\n"
    "umask applied and no set-id bits.\n";

static const struct option cp_options[] = {
    CLI_COMMON_OPTIONS,
    {},
};

/* One side of the copy inside an environment. */
struct remote {
        const char *env;
        const char *path; /* absolute */
};

struct cp {
        struct client *client;
        struct remote r;
};

/* "NAME:/PATH" is remote when NAME is not empty and has no '/' (so ./a:b and /x:y are host
 * paths). 1 remote, 0 host path, or a usage error's exit code. */
static int parse_side(const char *arg, char *name_buf, size_t len, struct remote *ret)
{
        const char *colon = strchr(arg, ':');
        if (!colon || colon == arg || memchr(arg, '/', (size_t)(colon - arg)))
                return 0;
        if ((size_t)(colon - arg) >= len)
                return usage_error("cp", "'%.*s' is not an environment name", (int)(colon - arg),
                                   arg);
        if (colon[1] != '/')
                return usage_error("cp",
                                   "'%s': the path inside the environment must be absolute "
                                   "(NAME:/PATH)",
                                   arg);
        memcpy(name_buf, arg, (size_t)(colon - arg));
        name_buf[colon - arg] = 0;
        *ret = (struct remote){.env = name_buf, .path = colon + 1};
        return 1;
}

/* The last component of path ("" for "/"); *ret_contents when path ends in "/." or names
 * "." or "..", whose contents are what gets copied. malloc'd. */
static char *base_name(const char *path, bool *ret_contents)
{
        size_t len = strlen(path);
        bool dot = len >= 2 && strcmp(path + len - 2, "/.") == 0;
        while (len > 1 && path[len - 1] == '/')
                len--;
        const char *start = path + len;
        while (start > path && start[-1] != '/')
                start--;
        char *base = strndup(start, len - (size_t)(start - path));
        if (!base)
                return NULL;
        *ret_contents = dot || !*base || strcmp(base, "/") == 0 || strcmp(base, ".") == 0 ||
                        strcmp(base, "..") == 0;
        return base;
}

/* dir + "/" + base, without doubling a '/'. malloc'd. */
static char *join(const char *dir, const char *base)
{
        size_t len = strlen(dir);
        char *p = NULL;
        if (asprintf(&p, "%s%s%s", dir, len && dir[len - 1] == '/' ? "" : "/", base) < 0)
                return NULL;
        return p;
}

static void oom(void)
{
        fprintf(stderr, "paddock: out of memory\n");
}

/* "/v1/envs/NAME/ROUTE?path=PATH[&extra]". NULL after saying so. */
static char *files_url(struct cp *x, const char *route, const char *path, const char *extra)
{
        char *esc = client_escape(x->client, path), *query = NULL, *url = NULL;
        if (esc && asprintf(&query, "path=%s%s%s", esc, extra ? "&" : "", extra ? extra : "") < 0)
                query = NULL;
        free(esc);
        if (query)
                url = env_path(x->client, x->r.env, route, query);
        else
                oom();
        free(query);
        return url;
}

/* GET files/stat. 1 with *ret filled when the path exists, 0 when the daemon says 404 (*ret
 * then holds its answer, for the message), -1 after printing why. */
static int remote_stat(struct cp *x, const char *path, struct response *ret)
{
        char *url = files_url(x, "files/stat", path, NULL);
        if (!url)
                return -1;
        struct request req = {.method = "GET", .path = url};
        int r = client_perform(x->client, &req, ret);
        free(url);
        if (r < 0)
                return -1;
        if (ret->status == 404)
                return 0;
        if (ret->status < 200 || ret->status >= 300) {
                client_print_error(ret);
                response_done(ret);
                return -1;
        }
        return 1;
}

static bool stat_is_dir(const json_t *st)
{
        const char *type = json_string_value(json_object_get(st, "type"));
        return type && (strcmp(type, "directory") == 0 || strcmp(type, "dir") == 0);
}

/* The permission bits of a stat answer ("0644" or 420); -1 when absent. */
static int stat_mode(const json_t *st)
{
        const json_t *m = json_object_get(st, "mode");
        if (json_is_integer(m))
                return (int)(json_integer_value(m) & 0777);
        const char *s = json_string_value(m);
        if (!s || !*s || strspn(s, "01234567") != strlen(s))
                return -1;
        return (int)(strtol(s, NULL, 8) & 0777);
}

/* ---- host -> environment ------------------------------------------------------------------ */

/* An upload body: a file with its size known, or a stream (stdin, a pipe, tar's output). */
struct upload {
        int fd;
        int64_t left; /* bytes still to send of a sized file; -1 for a stream */
        struct tarproc *tar;
        const char *what;
};

static ssize_t upload_read(char *buf, size_t len, void *userdata)
{
        struct upload *u = userdata;
        if (u->left == 0)
                return 0; /* a file that grew meanwhile: we send the size we announced */
        if (u->left > 0 && (uint64_t)u->left < len)
                len = (size_t)u->left;
        for (;;) {
                ssize_t n = read(u->fd, buf, len);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0) {
                        fprintf(stderr, "paddock: cp: cannot read %s: %s\n", u->what,
                                strerror(errno));
                        return -1;
                }
                if (n == 0 && u->left > 0) {
                        fprintf(stderr, "paddock: cp: %s shrank while being copied\n", u->what);
                        return -1;
                }
                /* At the end of tar's output, only a clean exit lets the upload complete: the
                 * chunked body then ends, else it is cut off and the daemon takes nothing. */
                if (n == 0 && u->tar && u->tar->pid > 0 && tar_finish(u->tar, false) < 0)
                        return -1;
                if (u->left > 0)
                        u->left -= n;
                return n;
        }
}

/* A request whose answer is only success or an error message. -1 after printing why. */
static int call(struct cp *x, struct request *req)
{
        struct response resp = {};
        int r = client_perform(x->client, req, &resp);
        if (r == 0 && (resp.status < 200 || resp.status >= 300)) {
                client_print_error(&resp);
                r = -1;
        }
        response_done(&resp);
        return r;
}

static int upload(struct cp *x, const char *route, const char *path, const char *extra,
                  struct upload *u, const char *content_type)
{
        char *url = files_url(x, route, path, extra);
        if (!url)
                return -1;
        struct request req = {
            .method = "PUT",
            .path = url,
            .source = upload_read,
            .source_data = u,
            .source_size = u->left,
            .content_type = content_type,
        };
        int r = call(x, &req);
        free(url);
        return r;
}

static int copy_file_in(struct cp *x, const char *src, const char *dst)
{
        struct upload u = {.fd = STDIN_FILENO, .left = -1, .what = "standard input"};
        char extra[32] = "";
        if (strcmp(src, "-") != 0) {
                u.fd = open(src, O_RDONLY | O_CLOEXEC);
                struct stat st;
                if (u.fd < 0 || fstat(u.fd, &st) < 0) {
                        fprintf(stderr, "paddock: cp: %s: %s\n", src, strerror(errno));
                        if (u.fd >= 0)
                                close(u.fd);
                        return -1;
                }
                if (S_ISREG(st.st_mode))
                        u.left = st.st_size;
                u.what = src;
                snprintf(extra, sizeof(extra), "mode=0%03o", (unsigned)(st.st_mode & 0777));
        }
        int r = upload(x, "files", dst, extra[0] ? extra : NULL, &u, "application/octet-stream");
        if (u.fd != STDIN_FILENO)
                close(u.fd);
        return r;
}

static int copy_dir_in(struct cp *x, const char *src, const char *dst)
{
        if (!tar_available()) {
                fprintf(stderr, "paddock: cp: copying a directory needs tar, which is not "
                                "installed here\n");
                return -1;
        }
        char *url = files_url(x, "files/mkdir", dst, "parents=1");
        if (!url)
                return -1;
        struct request mk = {.method = "POST", .path = url};
        int r = call(x, &mk);
        free(url);
        if (r < 0)
                return -1;
        struct tarproc tar;
        r = tar_create(src, "cp", &tar);
        if (r < 0) {
                fprintf(stderr, "paddock: cp: cannot start tar: %s\n", strerror(-r));
                return -1;
        }
        struct upload u = {.fd = tar.fd, .left = -1, .tar = &tar, .what = "tar's output"};
        r = upload(x, "archive", dst, NULL, &u, "application/x-tar");
        if (tar.pid > 0 && tar_finish(&tar, r < 0) < 0)
                r = -1;
        return r;
}

static int copy_in(struct cp *x, const char *src)
{
        struct stat st;
        bool from_stdin = strcmp(src, "-") == 0;
        if (!from_stdin && stat(src, &st) < 0) {
                fprintf(stderr, "paddock: cp: %s: %s\n", src, strerror(errno));
                return -1;
        }
        bool dir = !from_stdin && S_ISDIR(st.st_mode);

        /* Where it lands depends on what DST is in the environment. */
        const char *dst = x->r.path;
        struct response resp = {};
        int exists = remote_stat(x, dst, &resp);
        if (exists < 0)
                return -1;
        bool dst_dir = exists && stat_is_dir(resp.json);
        bool trailing_slash = dst[strlen(dst) - 1] == '/';
        char *target = NULL;
        if (dst_dir && from_stdin) {
                fprintf(stderr,
                        "paddock: cp: %s:%s is a directory; name the file to write standard "
                        "input to\n",
                        x->r.env, dst);
        } else if (dst_dir) {
                bool contents = false;
                char *base = base_name(src, &contents);
                target = !base ? NULL : dir && contents ? strdup(dst) : join(dst, base);
                free(base);
                if (!target)
                        oom();
        } else if (exists && dir) {
                fprintf(stderr, "paddock: cp: %s:%s exists and is not a directory\n", x->r.env,
                        dst);
        } else if (!exists && trailing_slash && !dir) {
                client_print_error(&resp); /* no such environment, or no such directory */
        } else {
                target = strdup(dst);
                if (!target)
                        oom();
        }
        response_done(&resp);
        if (!target)
                return -1;
        int r = dir ? copy_dir_in(x, src, target) : copy_file_in(x, src, target);
        free(target);
        return r;
}

/* ---- environment -> host ------------------------------------------------------------------ */

/* A download: into a file opened when the first bytes arrive (so a refused request leaves
 * DST alone), standard output, or tar's stdin (whose directory is made at the same moment). */
struct download {
        const char *target; /* NULL: standard output */
        int mode;           /* for a created file */
        int fd;
        bool tar_mode, opened, tar_gone;
        struct tarproc tar;
        bool failed; /* said why */
};

static int download_open(struct download *d)
{
        d->opened = true;
        if (d->tar_mode) {
                int r = mkdir_p_at(AT_FDCWD, d->target, 0777);
                struct stat st;
                if (r == 0 && stat(d->target, &st) < 0)
                        r = -errno;
                if (r == 0 && !S_ISDIR(st.st_mode))
                        r = -ENOTDIR;
                if (r == 0)
                        r = tar_extract(d->target, "cp", &d->tar);
                if (r < 0) {
                        fprintf(stderr, "paddock: cp: %s: %s\n", d->target, strerror(-r));
                        return -1;
                }
                d->fd = d->tar.fd;
                return 0;
        }
        if (!d->target) {
                d->fd = STDOUT_FILENO;
                return 0;
        }
        d->fd = open(d->target, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
                     d->mode >= 0 ? (mode_t)d->mode : 0666);
        if (d->fd < 0) {
                fprintf(stderr, "paddock: cp: %s: %s\n", d->target, strerror(errno));
                return -1;
        }
        return 0;
}

static bool download_sink(const char *data, size_t len, void *userdata)
{
        struct download *d = userdata;
        if (!d->opened && download_open(d) < 0) {
                d->failed = true;
                return false;
        }
        if (d->tar_gone)
                return true; /* tar stopped reading; its exit status will tell */
        int r = write_all(d->fd, data, len);
        if (r == -EPIPE && d->tar_mode) {
                d->tar_gone = true;
                return true;
        }
        if (r < 0) {
                fprintf(stderr, "paddock: cp: cannot write %s: %s\n",
                        d->target ? d->target : "standard output", strerror(-r));
                d->failed = true;
                return false;
        }
        return true;
}

static int download(struct cp *x, const char *route, struct download *d)
{
        char *url = files_url(x, route, x->r.path, NULL);
        if (!url)
                return -1;
        d->fd = -1;
        d->tar.fd = -1;
        struct request req = {
            .method = "GET",
            .path = url,
            .sink = download_sink,
            .sink_data = d,
        };
        struct response resp = {};
        int r = client_perform(x->client, &req, &resp);
        free(url);
        if (r == 0 && (resp.status < 200 || resp.status >= 300)) {
                client_print_error(&resp);
                r = -1;
        }
        response_done(&resp);
        if (r == 0 && !d->opened && download_open(d) < 0) /* an empty file */
                r = -1;
        if (d->tar_mode) {
                if (d->tar.pid > 0 && tar_finish(&d->tar, r < 0) < 0)
                        r = -1;
        } else if (d->fd > STDOUT_FILENO) {
                if (close(d->fd) < 0 && r == 0) {
                        fprintf(stderr, "paddock: cp: cannot write %s: %s\n", d->target,
                                strerror(errno));
                        r = -1;
                }
        }
        return r;
}

static int copy_out(struct cp *x, const char *dst)
{
        struct response resp = {};
        int exists = remote_stat(x, x->r.path, &resp);
        if (exists == 0)
                client_print_error(&resp); /* no such environment, or no such file */
        if (exists <= 0) {
                response_done(&resp);
                return -1;
        }
        bool dir = stat_is_dir(resp.json);
        int mode = stat_mode(resp.json);
        response_done(&resp);

        bool to_stdout = strcmp(dst, "-") == 0;
        if (dir && to_stdout) {
                fprintf(stderr, "paddock: cp: %s:%s is a directory; '-' takes a single file\n",
                        x->r.env, x->r.path);
                return -1;
        }
        if (dir && !tar_available()) {
                fprintf(stderr, "paddock: cp: copying a directory needs tar, which is not "
                                "installed here\n");
                return -1;
        }
        char *target = NULL;
        struct stat st;
        int sr = to_stdout ? 0 : stat(dst, &st), serr = errno;
        if (to_stdout) {
                /* target stays NULL */
        } else if (sr == 0 && S_ISDIR(st.st_mode)) {
                bool contents = false;
                char *base = base_name(x->r.path, &contents);
                target = !base ? NULL : dir && contents ? strdup(dst) : join(dst, base);
                free(base);
        } else if (dir && (sr == 0 || serr != ENOENT)) {
                fprintf(stderr, "paddock: cp: %s: %s\n", dst,
                        sr == 0 ? "exists and is not a directory" : strerror(serr));
                return -1;
        } else {
                target = strdup(dst);
        }
        if (!to_stdout && !target) {
                oom();
                return -1;
        }
        struct download d = {.target = target, .mode = mode, .tar_mode = dir};
        int r = download(x, dir ? "archive" : "files", &d);
        free(target);
        return r;
}

int cmd_cp(struct cli *cli, int argc, char **argv)
{
        int c;
        opts_reset();
        while ((c = getopt_long(argc, argv, ":h", cp_options, NULL)) != -1) {
                int r = opts_common(cli, c, argv, "cp", cp_help);
                if (r >= 0)
                        return r;
        }
        if (argc - optind < 2)
                return usage_error("cp", "needs SRC and DST, one of them NAME:/PATH");
        if (argc - optind > 2)
                return usage_error("cp", "unexpected argument '%s'", argv[optind + 2]);
        const char *src = argv[optind], *dst = argv[optind + 1];

        char src_env[256], dst_env[256];
        struct remote rs, rd;
        int s = parse_side(src, src_env, sizeof(src_env), &rs);
        int d = parse_side(dst, dst_env, sizeof(dst_env), &rd);
        if (s > 1 || d > 1)
                return s > 1 ? s : d;
        if (s && d)
                return usage_error("cp", "both sides are in environments; one must be a host path");
        if (!s && !d)
                return usage_error("cp", "neither side is in an environment (NAME:/PATH)");
        if (!*(s ? dst : src))
                return usage_error("cp", "empty host path");

        struct cp x = {.client = cli_client(cli), .r = s ? rs : rd};
        if (!x.client)
                return EXIT_FAIL;
        int r = s ? copy_out(&x, dst) : copy_in(&x, src);
        return r < 0 ? EXIT_FAIL : EXIT_OK;
}

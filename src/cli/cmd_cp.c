/* paddock cp SRC DST: copy between the host and an environment; exactly one side is NAME:/PATH.
 *
 *   host file -> env   PUT files?path=..&mode=..&parents=0 with the file as the body
 *                      (Content-Length), or chunked from standard input ("-") or a pipe
 *   host dir  -> env   POST files/mkdir?parents=1, then PUT archive?path=.. with the output of
 *                      `tar -C DIR --numeric-owner -cf - .` (chunked; cut off if tar fails)
 *   env file  -> host  GET files?path=.. written to DST (or standard output) as it arrives;
 *                      beyond the 1 GiB files?path= serves, GET archive piped into `tar -xOf -`
 *   env dir   -> host  GET archive?path=.. piped into `tar -C DST --strip-components=1 -xf -`
 *                      (the daemon names the members after the directory itself)
 *
 * What SRC is and where it lands follow cp -r: GET files/stat on the environment's side
 * decides, following symlinks at SRC itself (like cp -H). When DST is an existing directory,
 * SRC goes into it under its own name (SRC/. means "what SRC contains"); otherwise DST is the
 * file, or the directory created to hold SRC's contents. Nothing is buffered whole, so sizes
 * are bounded only by the daemon's limits. */
#include "cli/cli.h"
#include "cli/envpath.h"
#include "cli/opts.h"
#include "cli/tarproc.h"
#include "lib/util.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char cp_help[] =
    "Usage: paddock cp [-u USER] SRC DST\n"
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
    "umask applied and no set-id bits. A symlink named as SRC is followed.\n"
    "\n"
    "  -u, --user USER   owner of what is created inside (user name or UID[:GID]; default\n"
    "                    root)\n";

static const struct option cp_options[] = {
    {"user", required_argument, NULL, 'u'},
    CLI_COMMON_OPTIONS,
    {},
};

/* What GET files?path= serves at most; larger files come out through the archive route. */
#define FILES_READ_MAX (1ull << 30)

/* One side of the copy inside an environment. */
struct remote {
        char *env;
        const char *path; /* absolute */
};

struct cp {
        struct client *client;
        struct remote r;
        char *user_query; /* "user=ESCAPED" for what is created inside, or NULL */
};

/* "NAME:/PATH" is remote when NAME is not empty and has no '/' (so ./a:b and /x:y are host
 * paths). 1 remote (ret->env malloc'd), 0 host path, -1 out of memory, or a usage error's exit
 * code. */
static int parse_side(const char *arg, struct remote *ret)
{
        const char *colon = strchr(arg, ':');
        if (!colon || colon == arg || memchr(arg, '/', (size_t)(colon - arg)))
                return 0;
        /* Far past NAME_LEN_MAX: refused here as it always was; shorter bad names (and names
         * up to NAME_LEN_MAX that do not exist) are the daemon's to name. */
        if ((size_t)(colon - arg) > 255)
                return usage_error("cp", "'%.*s' is not an environment name", (int)(colon - arg),
                                   arg);
        if (colon[1] != '/')
                return usage_error("cp",
                                   "'%s': the path inside the environment must be absolute "
                                   "(NAME:/PATH)",
                                   arg);
        char *name = strndup(arg, (size_t)(colon - arg));
        if (!name)
                return -1;
        *ret = (struct remote){.env = name, .path = colon + 1};
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

static void oom(void)
{
        fprintf(stderr, "paddock: out of memory\n");
}

/* "/v1/envs/NAME/ROUTE?path=PATH[&extra][&user=USER]" (the user when something is created).
 * NULL after saying so. */
static char *files_url(struct cp *x, const char *route, const char *path, const char *extra,
                       bool creates)
{
        const char *user = creates ? x->user_query : NULL;
        char *esc = client_escape(x->client, path), *query = NULL, *url = NULL;
        if (esc && asprintf(&query, "path=%s%s%s%s%s", esc, extra ? "&" : "", extra ? extra : "",
                            user ? "&" : "", user ? user : "") < 0)
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
        char *url = files_url(x, "files/stat", path, NULL, false);
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
        char *url = files_url(x, route, path, extra, true);
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
        char extra[48] = "parents=0"; /* like cp: the directory must exist */
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
                if (BUF_PRINTF(extra, "parents=0&mode=0%03o", (unsigned)(st.st_mode & 0777)) < 0) {
                        close(u.fd); /* cannot happen: the mode is three octal digits */
                        return -1;
                }
        }
        int r = upload(x, "files", dst, extra, &u, "application/octet-stream");
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
        char *url = files_url(x, "files/mkdir", dst, "parents=1", true);
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
                target = !base ? NULL : dir && contents ? strdup(dst) : path_join(dst, base);
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

enum download_kind {
        DL_FILE,     /* GET files: the bytes themselves */
        DL_TREE,     /* GET archive of a directory, extracted by tar into target */
        DL_FILE_TAR, /* GET archive of one large file, its contents out of `tar -xOf -` */
};

/* A download: into a file opened when the first bytes arrive (so a refused request leaves
 * DST alone), standard output, or tar's stdin (whose directory is made at the same moment). */
struct download {
        enum download_kind kind;
        const char *target; /* NULL: standard output */
        int mode;           /* for a created file; -1 default */
        int out_fd;         /* the file (or 1) written to, or by tar -O */
        int fd;             /* where the body goes: out_fd or tar's stdin */
        struct tarproc tar;
        bool opened, tar_gone;
        bool broken_pipe; /* standard output's reader went away: stop quietly */
};

static int download_open(struct download *d)
{
        d->opened = true;
        int r = 0;
        if (d->kind == DL_TREE) {
                struct stat st;
                r = mkdir_p_at(AT_FDCWD, d->target, 0777);
                if (r == 0 && stat(d->target, &st) < 0)
                        r = -errno;
                if (r == 0 && !S_ISDIR(st.st_mode))
                        r = -ENOTDIR;
                if (r == 0)
                        r = tar_extract(d->target, 1, -1, "cp", &d->tar);
                if (r < 0) {
                        fprintf(stderr, "paddock: cp: %s: %s\n", d->target, strerror(-r));
                        return -1;
                }
                d->fd = d->tar.fd;
                return 0;
        }
        if (!d->target) {
                d->out_fd = STDOUT_FILENO;
        } else {
                d->out_fd = open(d->target, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
                                 d->mode >= 0 ? (mode_t)d->mode : 0666);
                if (d->out_fd < 0) {
                        fprintf(stderr, "paddock: cp: %s: %s\n", d->target, strerror(errno));
                        return -1;
                }
        }
        d->fd = d->out_fd;
        if (d->kind == DL_FILE_TAR) {
                r = tar_extract(NULL, 0, d->out_fd, "cp", &d->tar);
                if (r < 0) {
                        fprintf(stderr, "paddock: cp: cannot start tar: %s\n", strerror(-r));
                        return -1;
                }
                d->fd = d->tar.fd;
        }
        return 0;
}

static bool download_sink(const char *data, size_t len, void *userdata)
{
        struct download *d = userdata;
        if (!d->opened && download_open(d) < 0)
                return false;
        if (d->tar_gone)
                return true; /* tar stopped reading; its exit status will tell */
        int r = write_all(d->fd, data, len);
        if (r == -EPIPE && d->kind != DL_FILE) {
                d->tar_gone = true;
                return true;
        }
        if (r == -EPIPE && !d->target) {
                d->broken_pipe = true;
                return false;
        }
        if (r < 0) {
                fprintf(stderr, "paddock: cp: cannot write %s: %s\n",
                        d->target ? d->target : "standard output", strerror(-r));
                return false;
        }
        return true;
}

static int download(struct cp *x, const char *path, struct download *d)
{
        char *url = files_url(x, d->kind == DL_FILE ? "files" : "archive", path, NULL, false);
        if (!url)
                return -1;
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
        if (d->tar.pid > 0 && tar_finish(&d->tar, r < 0) < 0)
                r = -1;
        if (d->out_fd > STDOUT_FILENO && close(d->out_fd) < 0 && r == 0) {
                fprintf(stderr, "paddock: cp: cannot write %s: %s\n", d->target, strerror(errno));
                r = -1;
        }
        return r;
}

/* dirname(path) + "/" + target, or target when absolute. malloc'd. */
static char *link_resolve(const char *path, const char *target)
{
        if (target[0] == '/')
                return strdup(target);
        size_t len = strlen(path);
        while (len > 1 && path[len - 1] == '/')
                len--;
        while (len > 0 && path[len - 1] != '/')
                len--;
        char *p = NULL;
        if (asprintf(&p, "%.*s%s", (int)len, path, target) < 0)
                return NULL;
        return p;
}

/* Stat SRC, following symlinks at SRC itself: *ret_path is what they lead to (malloc'd) and
 * *ret the stat of that. -1 after printing why. */
static int stat_source(struct cp *x, char **ret_path, struct response *ret)
{
        char *path = strdup(x->r.path);
        for (int hops = 0; path; hops++) {
                struct response resp = {};
                int r = remote_stat(x, path, &resp);
                if (r == 0)
                        client_print_error(&resp); /* no such environment, or no such file */
                if (r <= 0) {
                        response_done(&resp);
                        free(path);
                        return -1;
                }
                const char *type = json_string_value(json_object_get(resp.json, "type"));
                const json_t *target = json_object_get(resp.json, "target");
                if (!type || strcmp(type, "symlink") != 0) {
                        *ret_path = path;
                        *ret = resp;
                        return 0;
                }
                if (hops == 40 || !json_is_string(target) ||
                    json_object_get(resp.json, "encoding")) {
                        fprintf(stderr, "paddock: cp: %s:%s: %s\n", x->r.env, x->r.path,
                                hops == 40 ? "too many levels of symbolic links"
                                           : "a symlink whose target is not UTF-8 text");
                        response_done(&resp);
                        free(path);
                        return -1;
                }
                char *next = link_resolve(path, json_string_value(target));
                response_done(&resp);
                free(path);
                path = next;
        }
        oom();
        return -1;
}

static int copy_out(struct cp *x, const char *dst)
{
        struct response resp = {};
        char *src = NULL;
        if (stat_source(x, &src, &resp) < 0)
                return -1;
        bool dir = stat_is_dir(resp.json);
        int mode = stat_mode(resp.json);
        const json_t *size = json_object_get(resp.json, "size");
        bool large = json_is_integer(size) && (uint64_t)json_integer_value(size) > FILES_READ_MAX;
        response_done(&resp);

        int r = -1;
        bool to_stdout = strcmp(dst, "-") == 0;
        char *target = NULL;
        struct stat st;
        int sr = to_stdout ? 0 : stat(dst, &st), serr = errno;
        if (dir && to_stdout) {
                fprintf(stderr, "paddock: cp: %s:%s is a directory; '-' takes a single file\n",
                        x->r.env, x->r.path);
                goto out;
        }
        if ((dir || large) && !tar_available()) {
                fprintf(stderr, "paddock: cp: copying %s needs tar, which is not installed here\n",
                        dir ? "a directory" : "a file over 1 GiB");
                goto out;
        }
        if (to_stdout) {
                /* target stays NULL */
        } else if (sr == 0 && S_ISDIR(st.st_mode)) {
                /* Into DST under SRC's own name (the link's name when SRC is a symlink). */
                bool contents = false;
                char *base = base_name(x->r.path, &contents);
                target = !base ? NULL : dir && contents ? strdup(dst) : path_join(dst, base);
                free(base);
        } else if (dir && (sr == 0 || serr != ENOENT)) {
                fprintf(stderr, "paddock: cp: %s: %s\n", dst,
                        sr == 0 ? "exists and is not a directory" : strerror(serr));
                goto out;
        } else {
                target = strdup(dst);
        }
        if (!to_stdout && !target) {
                oom();
                goto out;
        }
        struct download d = {
            .kind = dir     ? DL_TREE
                    : large ? DL_FILE_TAR
                            : DL_FILE,
            .target = target,
            .mode = mode,
            .out_fd = -1,
            .fd = -1,
            .tar = {.fd = -1},
        };
        r = download(x, src, &d);
        if (d.broken_pipe)
                r = 128 + SIGPIPE;
out:
        free(target);
        free(src);
        return r;
}

/* The copy itself, SRC and DST checked: out of the environment (to host path dst) or into it
 * (from host path src). The exit code. */
static int copy(struct cli *cli, const struct remote *remote, bool out, const char *host,
                const char *user)
{
        struct cp x = {.client = cli_client(cli), .r = *remote};
        if (!x.client)
                return EXIT_FAIL;
        if (user) {
                char *esc = client_escape(x.client, user);
                if (!esc || asprintf(&x.user_query, "user=%s", esc) < 0) {
                        x.user_query = NULL;
                        free(esc);
                        oom();
                        return EXIT_FAIL;
                }
                free(esc);
        }
        int r = out ? copy_out(&x, host) : copy_in(&x, host);
        free(x.user_query);
        return r < 0 ? EXIT_FAIL : r; /* 0, or 128+SIGPIPE */
}

static int user_option(void *userdata, int c, const char *verb)
{
        if (c != 'u')
                return 0;
        if (!*optarg)
                return usage_error(verb, "-u wants a user name or UID[:GID]");
        *(const char **)userdata = optarg;
        return -1;
}

static const struct verb_syntax cp_syntax = {
    .verb = "cp",
    .help = cp_help,
    .shortopts = ":hu:",
    .options = cp_options,
    .own = user_option,
    OPERANDS(2, 2, "needs SRC and DST, one of them NAME:/PATH"),
};

int cmd_cp(struct cli *cli, int argc, char **argv)
{
        const char *user = NULL;
        int r = opts_parse(cli, argc, argv, &cp_syntax, &user);
        if (r >= 0)
                return r;
        const char *src = argv[optind], *dst = argv[optind + 1];

        struct remote rs = {}, rd = {};
        int s = parse_side(src, &rs);
        int d = parse_side(dst, &rd);
        r = -1;
        if (s < 0 || d < 0) {
                oom();
                r = EXIT_FAIL;
        } else if (s > 1 || d > 1) {
                r = s > 1 ? s : d;
        } else if (s && d) {
                r = usage_error("cp", "both sides are in environments; one must be a host path");
        } else if (!s && !d) {
                r = usage_error("cp", "neither side is in an environment (NAME:/PATH)");
        } else if (!*(s ? dst : src)) {
                r = usage_error("cp", "empty host path");
        } else if (user && s) {
                r = usage_error("cp", "-u applies to copies into an environment");
        }
        if (r < 0)
                r = copy(cli, s ? &rs : &rd, s, s ? dst : src, user);
        free(rs.env);
        free(rd.env);
        return r;
}

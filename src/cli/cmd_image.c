/* paddock image ls | import NAME FILE|DIR | rm NAME...
 *
 * import streams the tar as the request body instead of reading it into memory: a FILE (tar,
 * tar.gz or tar.zst; the daemon tells them apart) straight from disk with its length known, a
 * DIR through `tar -C DIR --numeric-owner -cf - .` run without a shell, its stdout uploaded
 * chunked. When tar fails the upload is aborted before its last chunk, so paddockd never takes a
 * half archive for a whole one. */
#include "cli/calls.h"
#include "cli/cli.h"
#include "cli/image_cmds.h"
#include "cli/opts.h"
#include "cli/output.h"
#include "cli/tarproc.h"
#include "lib/util.h"

#include <sys/stat.h>
#include <time.h>

static const char image_help[] =
    "Usage: paddock image COMMAND\n"
    "\n"
    "  ls                     list images\n"
    "  import NAME FILE|DIR   make an image from a tar (.tar, .tar.gz, .tar.zst; - for\n"
    "                         standard input) or from a directory\n"
    "  pull REF               pull from an OCI / Docker registry (debian:bookworm)\n"
    "  build NAME [--from debian:SUITE] [--packages A,B]\n"
    "                         build from Debian with mmdebstrap\n"
    "  export NAME FILE|-     write an image as a tar (.tar, .tar.gz, .tar.zst)\n"
    "  rm NAME...             remove images no environment uses\n"
    "\n"
    "  --json                 print the daemon's answer as JSON\n";

static const char image_ls_help[] = "Usage: paddock image ls [--json]\n"
                                    "\n"
                                    "List images: name, size, environments using it, age.\n";

static const char image_import_help[] =
    "Usage: paddock image import NAME FILE|DIR|-\n"
    "\n"
    "Make image NAME from a tar archive (plain, gzip or zstd), from standard input (-), or\n"
    "from a directory (archived with numeric owners). Prints NAME.\n";

static const char image_rm_help[] = "Usage: paddock image rm NAME...\n"
                                    "\n"
                                    "Remove images. An image in use by an environment stays.\n";

static int image_row(struct table *t, const json_t *img, time_t now)
{
        char size[32], used[32], created[32];
        time_t ts;
        const json_t *sz = json_object_get(img, "size");
        snprintf(used, sizeof(used), "%lld",
                 (long long)json_integer_value(json_object_get(img, "used_by")));
        const char *cells[] = {
            json_string_value(json_object_get(img, "name")),
            json_is_integer(sz) ? human_size((uint64_t)json_integer_value(sz), size, sizeof(size))
                                : NULL,
            used,
            json_timestamp(json_object_get(img, "created_at"), &ts) == 0
                ? human_ago(ts, now, created, sizeof(created))
                : NULL,
        };
        return table_add(t, cells);
}

static const struct verb_syntax image_ls_syntax = {.verb = "image ls", .help = image_ls_help};

static int image_ls(struct cli *cli, int argc, char **argv)
{
        int r = opts_parse(cli, argc, argv, &image_ls_syntax, NULL);
        if (r >= 0)
                return r;
        static const char *const headers[] = {"NAME", "SIZE", "USED_BY", "CREATED"};
        return call_print_list(cli, "/v1/images", "images", headers, ELEMENTSOF(headers),
                               image_row);
}

/* The upload's source: a file, stdin, or the read end of tar's stdout. */
struct tar_source {
        int fd;
        struct tarproc tar; /* tar.pid > 0 while a tar child runs; fd is then tar.fd */
        const char *what;
};

static ssize_t read_source(char *buf, size_t len, void *userdata)
{
        struct tar_source *s = userdata;
        for (;;) {
                ssize_t n = read(s->fd, buf, len);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0) {
                        fprintf(stderr, "paddock: image import: cannot read %s: %s\n", s->what,
                                strerror(errno));
                        return -1;
                }
                /* At the end of tar's output, only a clean exit lets the upload complete. */
                if (n == 0 && s->tar.pid > 0) {
                        s->fd = -1; /* closed by tar_finish */
                        if (tar_finish(&s->tar, false) < 0)
                                return -1;
                }
                return n;
        }
}

static const struct verb_syntax image_import_syntax = {
    .verb = "image import",
    .help = image_import_help,
    OPERANDS(2, 2, "needs NAME and FILE or DIR"),
};

static int image_import(struct cli *cli, int argc, char **argv)
{
        const char *verb = "image import";
        int r = opts_parse(cli, argc, argv, &image_import_syntax, NULL);
        if (r >= 0)
                return r;
        const char *name = argv[optind], *src = argv[optind + 1];

        struct tar_source s = {.fd = -1, .tar = {.fd = -1}, .what = src};
        int64_t size = -1; /* unknown: chunked */
        struct stat st;
        if (strcmp(src, "-") == 0) {
                s.fd = STDIN_FILENO;
                s.what = "standard input";
        } else if (stat(src, &st) < 0) {
                fprintf(stderr, "paddock: image import: %s: %s\n", src, strerror(errno));
                return EXIT_FAIL;
        } else if (S_ISDIR(st.st_mode)) {
                r = tar_create(src, verb, &s.tar);
                if (r < 0) {
                        fprintf(stderr, "paddock: image import: cannot start tar: %s\n",
                                strerror(-r));
                        return EXIT_FAIL;
                }
                s.fd = s.tar.fd;
                s.what = "tar's output";
        } else {
                s.fd = open(src, O_RDONLY | O_CLOEXEC);
                if (s.fd < 0) {
                        fprintf(stderr, "paddock: image import: %s: %s\n", src, strerror(errno));
                        return EXIT_FAIL;
                }
                if (fstat(s.fd, &st) == 0 && S_ISREG(st.st_mode))
                        size = st.st_size;
        }

        r = EXIT_FAIL;
        struct client *client = cli_client(cli);
        char *esc = client ? client_escape(client, name) : NULL;
        char *path = NULL;
        struct response resp = {};
        if (!esc || asprintf(&path, "/v1/images?name=%s", esc) < 0) {
                path = NULL;
                goto out;
        }
        struct request req = {
            .method = "POST",
            .path = path,
            .source = read_source,
            .source_data = &s,
            .source_size = size,
            .content_type = "application/x-tar",
        };
        if (client_perform(client, &req, &resp) < 0)
                goto out;
        if (resp.status < 200 || resp.status >= 300) {
                client_print_error(&resp);
                goto out;
        }
        if (cli->json) {
                output_raw(&resp);
        } else {
                const char *n = json_string_value(json_object_get(resp.json, "name"));
                printf("%s\n", n ? n : name);
        }
        r = EXIT_OK;
out:
        response_done(&resp);
        free(path);
        free(esc);
        if (s.tar.pid > 0) {
                /* A tar still writing now gets EPIPE and ends. */
                if (tar_finish(&s.tar, r != EXIT_OK) < 0)
                        r = EXIT_FAIL;
        } else if (s.fd > STDIN_FILENO) {
                close(s.fd);
        }
        return r;
}

static const struct verb_syntax image_rm_syntax = {
    .verb = "image rm",
    .help = image_rm_help,
    OPERANDS_NAMES,
};

static int image_rm(struct cli *cli, int argc, char **argv)
{
        int r = opts_parse(cli, argc, argv, &image_rm_syntax, NULL);
        if (r >= 0)
                return r;
        return call_delete_each(cli, "/v1/images", argc, argv);
}

int cmd_image(struct cli *cli, int argc, char **argv)
{
        static const struct subverb subs[] = {{"ls", image_ls},         {"list", image_ls},
                                              {"import", image_import}, {"rm", image_rm},
                                              {"remove", image_rm},     {"pull", image_pull},
                                              {"export", image_export}, {"build", image_build}};
        return subverb_dispatch(cli, argc, argv, "image", image_help,
                                "missing COMMAND (ls, import, pull, build, export or rm)", subs,
                                ELEMENTSOF(subs));
}

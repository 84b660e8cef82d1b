/* paddock image ls | import NAME FILE|DIR | rm NAME...
 *
 * import streams the tar as the request body instead of reading it into memory: a FILE (tar,
 * tar.gz or tar.zst; the daemon tells them apart) straight from disk with its length known, a
 * DIR through `tar -C DIR --numeric-owner -cf - .` run without a shell, its stdout uploaded
 * chunked. When tar fails the upload is aborted before its last chunk, so paddockd never takes a
 * half archive for a whole one. */
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

static const struct option common_options[] = {
    CLI_COMMON_OPTIONS,
    {},
};

/* Options of a subcommand: only the common ones. -1 to go on with operands from optind. */
static int parse_sub(struct cli *cli, int argc, char **argv, const char *verb, const char *help)
{
        int c;
        opts_reset();
        while ((c = getopt_long(argc, argv, ":h", common_options, NULL)) != -1) {
                int r = opts_common(cli, c, argv, verb, help);
                if (r >= 0)
                        return r;
        }
        return -1;
}

static int image_ls(struct cli *cli, int argc, char **argv)
{
        int r = parse_sub(cli, argc, argv, "image ls", image_ls_help);
        if (r >= 0)
                return r;
        if (optind < argc)
                return usage_error("image ls", "unexpected argument '%s'", argv[optind]);
        struct client *client = cli_client(cli);
        struct response resp = {};
        if (!client || client_call(client, "GET", "/v1/images", NULL, &resp) < 0)
                return EXIT_FAIL;
        if (cli->json) {
                output_raw(&resp);
                response_done(&resp);
                return EXIT_OK;
        }
        static const char *const headers[] = {"NAME", "SIZE", "USED_BY", "CREATED"};
        const json_t *images = json_object_get(resp.json, "images");
        struct table *t = table_new(headers, ELEMENTSOF(headers));
        r = EXIT_OK;
        time_t now = time(NULL);
        size_t i;
        const json_t *img;
        json_array_foreach(images, i, img)
        {
                char size[32], used[32], created[32];
                time_t ts;
                const json_t *sz = json_object_get(img, "size");
                snprintf(used, sizeof(used), "%lld",
                         (long long)json_integer_value(json_object_get(img, "used_by")));
                const char *cells[] = {
                    json_string_value(json_object_get(img, "name")),
                    json_is_integer(sz)
                        ? human_size((uint64_t)json_integer_value(sz), size, sizeof(size))
                        : NULL,
                    used,
                    json_timestamp(json_object_get(img, "created_at"), &ts) == 0
                        ? human_ago(ts, now, created, sizeof(created))
                        : NULL,
                };
                if (!t || table_add(t, cells) < 0) {
                        fprintf(stderr, "paddock: out of memory\n");
                        r = EXIT_FAIL;
                        break;
                }
        }
        if (r == EXIT_OK)
                table_print(t);
        table_free(t);
        response_done(&resp);
        return r;
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

static int image_import(struct cli *cli, int argc, char **argv)
{
        const char *verb = "image import";
        int r = parse_sub(cli, argc, argv, verb, image_import_help);
        if (r >= 0)
                return r;
        if (argc - optind < 2)
                return usage_error(verb, "needs NAME and FILE or DIR");
        if (argc - optind > 2)
                return usage_error(verb, "unexpected argument '%s'", argv[optind + 2]);
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

static int image_rm(struct cli *cli, int argc, char **argv)
{
        int r = parse_sub(cli, argc, argv, "image rm", image_rm_help);
        if (r >= 0)
                return r;
        if (optind >= argc)
                return usage_error("image rm", "missing NAME");
        struct client *client = cli_client(cli);
        if (!client)
                return EXIT_FAIL;
        r = EXIT_OK;
        for (int i = optind; i < argc; i++) {
                char *esc = client_escape(client, argv[i]);
                char *path = NULL;
                struct response resp = {};
                if (!esc || asprintf(&path, "/v1/images/%s", esc) < 0) {
                        path = NULL;
                        r = EXIT_FAIL;
                } else if (client_call(client, "DELETE", path, NULL, &resp) < 0) {
                        r = EXIT_FAIL;
                } else if (cli->json) {
                        output_raw(&resp);
                } else {
                        printf("%s\n", argv[i]);
                }
                fflush(stdout);
                response_done(&resp);
                free(path);
                free(esc);
        }
        return r;
}

int cmd_image(struct cli *cli, int argc, char **argv)
{
        static const struct {
                const char *name;
                int (*run)(struct cli *, int, char **);
        } subs[] = {
            {"ls", image_ls}, {"list", image_ls},   {"import", image_import},
            {"rm", image_rm}, {"remove", image_rm}, {"pull", image_pull},
            {"export", image_export}, {"build", image_build},
        };
        /* Options before the subcommand: only the common ones ("paddock image --json ls"). */
        int i = 1;
        for (; i < argc && argv[i][0] == '-'; i++) {
                if (strcmp(argv[i], "--json") == 0) {
                        cli->json = true;
                } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
                        fputs(image_help, stdout);
                        return EXIT_OK;
                } else if (strcmp(argv[i], "--socket") == 0 && i + 1 < argc) {
                        cli->socket_path = argv[++i];
                        cli->socket_from_cmdline = true;
                } else {
                        return usage_error("image", "unknown option '%s'", argv[i]);
                }
        }
        if (i >= argc)
                return usage_error("image", "missing COMMAND (ls, import, pull, build, export or rm)");
        for (size_t k = 0; k < ELEMENTSOF(subs); k++)
                if (strcmp(argv[i], subs[k].name) == 0)
                        return subs[k].run(cli, argc - i, argv + i);
        return usage_error("image", "unknown command '%s'", argv[i]);
}

/* paddock image pull REF | build NAME | export NAME FILE|-
 *
 * pull and build send its request with ?stream=1 and prints the daemon's progress lines on stderr
 * as they come; the image's name goes to stdout at the end. export writes the daemon's tar stream
 * to FILE (removed again if the stream breaks) or to standard output. */
#include "cli/cli.h"
#include "cli/image_cmds.h"
#include "cli/lines.h"
#include "cli/opts.h"
#include "cli/output.h"
#include "lib/util.h"

#include <sys/stat.h>

/* ---------------------------------------------------------------- progress streams */

struct progress_out {
        struct cli *cli;
        struct lines lines;
        bool quiet;
        bool finished, failed;
        char *name; /* of the image made */
};

static int on_line(char *line, size_t len, void *userdata)
{
        struct progress_out *o = userdata;
        if (o->cli->json) {
                printf("%s\n", line);
                fflush(stdout);
        }
        json_t *j = json_loadb(line, len, 0, NULL);
        const char *p = json_string_value(json_object_get(j, "progress"));
        json_t *img = json_object_get(j, "image"), *err = json_object_get(j, "error");
        if (p && !o->quiet && !o->cli->json) {
                fprintf(stderr, "%s\n", p);
        } else if (img) {
                free(o->name);
                o->name = strdup(json_string_value(json_object_get(img, "name")) ?: "");
                o->finished = true;
        } else if (err) {
                if (!o->cli->json)
                        fprintf(stderr, "paddock: %s\n",
                                json_string_value(json_object_get(err, "message")) ?: "failed");
                o->finished = o->failed = true;
        }
        json_decref(j);
        return 0;
}

static bool progress_sink(const char *data, size_t len, void *userdata)
{
        struct progress_out *o = userdata;
        return lines_feed(&o->lines, data, len, on_line, o) >= 0;
}

/* POST /v1/images?stream=1 with body (taken over); prints progress on stderr unless quiet;
 * EXIT_OK once the image exists. */
static int image_job_request(struct cli *cli, json_t *body, bool quiet)
{
        struct client *client = cli_client(cli);
        char *text = client ? json_dumps(body, JSON_COMPACT) : NULL;
        json_decref(body);
        if (!client)
                return EXIT_FAIL;
        struct progress_out o = {.cli = cli, .quiet = quiet, .lines = {.max = 1 << 20}};
        struct request req = {.method = "POST",
                              .path = "/v1/images?stream=1",
                              .body = text,
                              .body_len = text ? strlen(text) : 0,
                              .content_type = "application/json",
                              .sink = progress_sink,
                              .sink_data = &o};
        struct response resp = {};
        int r = EXIT_FAIL;
        if (!text || client_perform(client, &req, &resp) < 0)
                goto out;
        if (resp.status < 200 || resp.status >= 300) {
                client_print_error(&resp);
                goto out;
        }
        lines_finish(&o.lines, on_line, &o);
        if (!o.finished) {
                fprintf(stderr, "paddock: the daemon ended the stream before the image was "
                                "done\n");
                goto out;
        }
        if (!o.failed) {
                if (!cli->json)
                        printf("%s\n", o.name ?: "");
                r = EXIT_OK;
        }
out:
        free(o.name);
        lines_done(&o.lines);
        response_done(&resp);
        free(text);
        return r;
}

/* ---------------------------------------------------------------- pull */

static const char pull_help[] =
    "Usage: paddock image pull REF [--name NAME] [--insecure] [-q]\n"
    "\n"
    "Pull an image from an OCI / Docker registry: debian:bookworm (Docker Hub),\n"
    "ghcr.io/OWNER/REPO:TAG, HOST:PORT/REPO@sha256:DIGEST. The linux/amd64 variant of a\n"
    "multi-platform image is taken. The image is named after REF (debian:bookworm ->\n"
    "debian-bookworm) unless --name says otherwise. Prints the name.\n"
    "\n"
    "  --name NAME      name of the new image\n"
    "  --insecure       plain http, to a registry paddockd --insecure-registry names\n"
    "  -q, --quiet      no progress lines\n";

enum { OPT_NAME = OPT_FIRST_VERB_OPTION, OPT_INSECURE };

struct pull_opts {
        const char *name;
        bool insecure, quiet;
};

static int pull_option(void *userdata, int c, const char *verb)
{
        struct pull_opts *o = userdata;
        if (c == OPT_NAME)
                o->name = optarg;
        else if (c == OPT_INSECURE)
                o->insecure = true;
        else if (c == 'q')
                o->quiet = true;
        else
                return 0;
        return -1;
}

static const struct option pull_options[] = {
    {"name", required_argument, NULL, OPT_NAME},
    {"insecure", no_argument, NULL, OPT_INSECURE},
    {"quiet", no_argument, NULL, 'q'},
    CLI_COMMON_OPTIONS,
    {},
};

static const struct verb_syntax pull_syntax = {
    .verb = "image pull",
    .help = pull_help,
    .shortopts = ":hq",
    .options = pull_options,
    .own = pull_option,
    OPERANDS(1, 1, "missing REF"),
};

int image_pull(struct cli *cli, int argc, char **argv)
{
        struct pull_opts o = {};
        int r = opts_parse(cli, argc, argv, &pull_syntax, &o);
        if (r >= 0)
                return r;
        json_t *body = json_pack("{s:s,s:b}", "pull", argv[optind], "insecure", o.insecure);
        if (o.name)
                json_object_set_new(body, "name", json_string(o.name));
        return image_job_request(cli, body, o.quiet);
}

/* ---------------------------------------------------------------- build */

static const char build_help[] =
    "Usage: paddock image build NAME [--from debian:SUITE] [--packages A,B,C]\n"
    "                           [--variant V] [--mirror URL|local:NAME] [-q]\n"
    "\n"
    "Build image NAME from Debian with mmdebstrap, run by the daemon; its output is\n"
    "shown as it comes. Prints NAME.\n"
    "\n"
    "  --from debian:SUITE  the release (default debian:bookworm)\n"
    "  --packages A,B,C     more packages (repeatable)\n"
    "  --variant V          mmdebstrap variant: minbase (default), essential, apt,\n"
    "                       required, important, standard, extract, custom\n"
    "  --mirror URL         a Debian mirror (http or https; signatures are checked), or\n"
    "                       local:NAME for a flat repository the admin put in the\n"
    "                       daemon's <root>/mirrors/NAME (default: the mirror the\n"
    "                       daemon host's apt uses)\n"
    "  -q, --quiet          no progress lines\n";

enum { OPT_FROM = OPT_FIRST_VERB_OPTION, OPT_PACKAGES, OPT_VARIANT, OPT_MIRROR };

struct build_opts {
        json_t *build, *packages;
        bool quiet;
};

static int build_option(void *userdata, int c, const char *verb)
{
        struct build_opts *o = userdata;
        if (c == OPT_FROM) {
                json_object_set_new(o->build, "from", json_string(optarg));
        } else if (c == OPT_VARIANT) {
                json_object_set_new(o->build, "variant", json_string(optarg));
        } else if (c == OPT_MIRROR) {
                json_object_set_new(o->build, "mirror", json_string(optarg));
        } else if (c == OPT_PACKAGES) {
                char *copy = strdup(optarg), *save = NULL;
                for (char *t = copy ? strtok_r(copy, ",", &save) : NULL; t;
                     t = strtok_r(NULL, ",", &save))
                        json_array_append_new(o->packages, json_string(t));
                free(copy);
        } else if (c == 'q') {
                o->quiet = true;
        } else {
                return 0;
        }
        return -1;
}

static const struct option build_options[] = {
    {"from", required_argument, NULL, OPT_FROM},
    {"packages", required_argument, NULL, OPT_PACKAGES},
    {"variant", required_argument, NULL, OPT_VARIANT},
    {"mirror", required_argument, NULL, OPT_MIRROR},
    {"quiet", no_argument, NULL, 'q'},
    CLI_COMMON_OPTIONS,
    {},
};

static const struct verb_syntax build_syntax = {
    .verb = "image build",
    .help = build_help,
    .shortopts = ":hq",
    .options = build_options,
    .own = build_option,
    OPERANDS_NAME,
};

int image_build(struct cli *cli, int argc, char **argv)
{
        struct build_opts o = {.build = json_object(), .packages = json_array()};
        int r = opts_parse(cli, argc, argv, &build_syntax, &o);
        if (r >= 0) {
                json_decref(o.build);
                json_decref(o.packages);
                return r;
        }
        json_object_set_new(o.build, "packages", o.packages);
        json_t *body = json_pack("{s:s,s:o}", "name", argv[optind], "build", o.build);
        return image_job_request(cli, body, o.quiet);
}

/* ---------------------------------------------------------------- export */

static const char export_help[] =
    "Usage: paddock image export NAME FILE|- [--compress none|gzip|zstd]\n"
    "\n"
    "Write image NAME as a tar (numeric owners kept) to FILE or standard output (-).\n"
    "Compression follows FILE's suffix (.tar.gz/.tgz: gzip, .tar.zst: zstd) unless\n"
    "--compress says otherwise. `paddock image import` takes the result back.\n";

enum { OPT_COMPRESS = OPT_FIRST_VERB_OPTION };

struct export_out {
        int fd;
        const char *what;
};

static bool export_sink(const char *data, size_t len, void *userdata)
{
        struct export_out *o = userdata;
        if (write_all(o->fd, data, len) < 0) {
                fprintf(stderr, "paddock: image export: writing %s: %s\n", o->what,
                        strerror(errno));
                return false;
        }
        return true;
}

static const char *compression_of(const char *file)
{
        size_t n = strlen(file);
        if ((n > 3 && !strcmp(file + n - 3, ".gz")) || (n > 4 && !strcmp(file + n - 4, ".tgz")))
                return "gzip";
        if ((n > 4 && !strcmp(file + n - 4, ".zst")) || (n > 5 && !strcmp(file + n - 5, ".tzst")))
                return "zstd";
        return "none";
}

static int compress_option(void *userdata, int c, const char *verb)
{
        if (c != OPT_COMPRESS)
                return 0;
        *(const char **)userdata = optarg;
        return -1;
}

static const struct option export_options[] = {
    {"compress", required_argument, NULL, OPT_COMPRESS},
    CLI_COMMON_OPTIONS,
    {},
};

static const struct verb_syntax export_syntax = {
    .verb = "image export",
    .help = export_help,
    .options = export_options,
    .own = compress_option,
    .max = -1,
};

int image_export(struct cli *cli, int argc, char **argv)
{
        const char *verb = "image export", *comp = NULL;
        int r = opts_parse(cli, argc, argv, &export_syntax, &comp);
        if (r >= 0)
                return r;
        if (argc - optind != 2)
                return usage_error(verb, "needs NAME and FILE (or - for standard output)");
        const char *name = argv[optind], *file = argv[optind + 1];
        bool to_stdout = !strcmp(file, "-");
        if (!comp)
                comp = to_stdout ? "none" : compression_of(file);
        if (strcmp(comp, "none") && strcmp(comp, "gzip") && strcmp(comp, "zstd"))
                return usage_error(verb, "--compress: none, gzip or zstd");
        if (to_stdout && isatty(STDOUT_FILENO)) {
                fprintf(stderr, "paddock: image export: not writing a tar to a terminal\n");
                return EXIT_USAGE;
        }
        struct client *client = cli_client(cli);
        char *esc = client ? client_escape(client, name) : NULL;
        char *path = NULL;
        if (!esc || asprintf(&path, "/v1/images/%s/export?compression=%s", esc, comp) < 0) {
                free(esc);
                return EXIT_FAIL;
        }
        struct export_out o = {.fd = STDOUT_FILENO, .what = "standard output"};
        if (!to_stdout) {
                o.fd = open(file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
                o.what = file;
        }
        r = EXIT_FAIL;
        struct response resp = {};
        struct request req = {.method = "GET", .path = path, .sink = export_sink, .sink_data = &o};
        if (o.fd < 0)
                fprintf(stderr, "paddock: image export: %s: %s\n", file, strerror(errno));
        else if (client_perform(client, &req, &resp) < 0)
                ;
        else if (resp.status < 200 || resp.status >= 300)
                client_print_error(&resp);
        else
                r = EXIT_OK;
        if (!to_stdout && o.fd >= 0) {
                if (close(o.fd) < 0 && r == EXIT_OK) {
                        fprintf(stderr, "paddock: image export: %s: %s\n", file, strerror(errno));
                        r = EXIT_FAIL;
                }
                if (r != EXIT_OK)
                        unlink(file);
        }
        response_done(&resp);
        free(path);
        free(esc);
        return r;
}

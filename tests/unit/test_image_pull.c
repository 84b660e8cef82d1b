/* Unit tests of the manifest parsing in src/daemon/image_pull.c (static functions behind the
 * registry fetch, compiled in here as they are; the image-job functions a pull would call are
 * stubs). Hostile registries are the point: tests/fuzz/fuzz_manifest.c fuzzes the same code. */
#include "../../src/daemon/image_pull.c"
#include "lib/jsonutil.h"

#include "unit.h"

void image_progress(const char *fmt, ...)
{
}

void image_report_size(uint64_t bytes)
{
}

int image_job_start(struct engine *e, const char *name, const char *what, image_fill_fn fill,
                    void *arg, int keep_fd, const struct image_helper_opts *opts,
                    const struct image_callbacks *cb, struct image_job **ret_job, char *err,
                    size_t errlen)
{
        return -ENOSYS;
}

#define DIGEST "\"sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\""
#define LAYER(size)                                                                                \
        "{\"mediaType\":\"application/vnd.oci.image.layer.v1.tar\",\"digest\":" DIGEST             \
        ",\"size\":" size "}"
#define MANIFEST(layers)                                                                           \
        "{\"schemaVersion\":2,\"config\":{\"digest\":" DIGEST ",\"size\":7},\"layers\":[" layers "]}"

static int parse(const char *text, struct manifest *m, char *err, size_t errlen)
{
        _cleanup_json_ json_t *j = json_loads(text, 0, NULL);
        CHECK(j != NULL);
        return j ? parse_manifest(j, m, err, errlen) : -EINVAL;
}

static void test_image_pull__manifest(void)
{
        static struct manifest m;
        char err[256] = "";
        CHECK_EQ_INT(parse(MANIFEST(LAYER("100") "," LAYER("200")), &m, err, sizeof(err)), 0);
        CHECK_EQ_INT(m.n_layers, 2);
        CHECK_EQ_INT(m.layers[1].size, 200);
        CHECK_EQ_INT(m.config.size, 7);
        /* 64 GiB in all is the limit. */
        CHECK_EQ_INT(parse(MANIFEST(LAYER("34359738368") "," LAYER("34359738368")), &m, err,
                           sizeof(err)),
                     0);
        CHECK_EQ_INT(parse(MANIFEST(LAYER("34359738368") "," LAYER("34359738369")), &m, err,
                           sizeof(err)),
                     -EFBIG);
        CHECK_EQ_INT(parse(MANIFEST(LAYER("-1")), &m, err, sizeof(err)), -EPROTO);
}

/* Found by fuzz_manifest: sizes that add up past 2^64 wrapped around to a small total and
 * passed the 64 GiB limit (two layers of INT64_MAX bytes and one of 2 summed to 0). */
static void test_image_pull__layer_sizes_do_not_wrap(void)
{
        static struct manifest m;
        char err[256] = "";
        CHECK_EQ_INT(parse(MANIFEST(LAYER("9223372036854775807") "," LAYER("9223372036854775807")
                                        "," LAYER("2")),
                           &m, err, sizeof(err)),
                     -EFBIG);
        CHECK(strstr(err, "layers too large") != NULL);
        CHECK_EQ_INT(parse(MANIFEST(LAYER("9223372036854775807") "," LAYER("9223372036854775807")
                                        "," LAYER("9223372036854775807") "," LAYER("3")),
                           &m, err, sizeof(err)),
                     -EFBIG);
}

int main(void)
{
        RUN(test_image_pull__manifest);
        RUN(test_image_pull__layer_sizes_do_not_wrap);
        UNIT_EXIT();
}

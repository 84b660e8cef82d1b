/* OCI image manifests and indexes / Docker manifest lists, as a hostile registry may send them.
 * Their parsing lives in src/daemon/image_pull.c (static functions behind the network fetch):
 * that file is compiled in here as it is, and fed JSON the way resolve() handles a fetched
 * body -- media type, then the platform pick of an index or the layers of a manifest. The
 * image-job functions it calls when it actually pulls are stubbed out: nothing here runs them. */
#include "fuzz.h"
#include "../../src/daemon/image_pull.c"

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
        abort(); /* never reached: nothing here starts a pull */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        json_t *j = json_loadb((const char *)data, size, 0, NULL);
        if (!j)
                return 0;
        char err[256];
        if (json_is_object(j)) {
                const char *t = media_type(j, NULL);
                if (!strcmp(t, OCI_INDEX) || !strcmp(t, DOCKER_LIST)) {
                        char digest[72];
                        if (pick_platform(j, digest, sizeof(digest), err, sizeof(err)) == 0)
                                FUZZ_ASSERT(image_digest_valid(digest));
                } else {
                        static struct manifest m;
                        if (parse_manifest(j, &m, err, sizeof(err)) == 0) {
                                FUZZ_ASSERT(m.n_layers <= PULL_MAX_LAYERS);
                                FUZZ_ASSERT(image_digest_valid(m.config.digest));
                                uint64_t total = 0;
                                for (size_t i = 0; i < m.n_layers; i++) {
                                        FUZZ_ASSERT(image_digest_valid(m.layers[i].digest));
                                        FUZZ_ASSERT(m.layers[i].size <= PULL_MAX_BYTES - total);
                                        total += m.layers[i].size;
                                }
                        }
                }
        }
        json_decref(j);
        return 0;
}

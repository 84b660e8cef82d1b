/* Image references (lib/imageref.c): "debian:bookworm", "host:5000/a/b@sha256:...". */
#include "fuzz.h"
#include "lib/imageref.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        char *s = fuzz_strdup(data, size);
        struct image_ref ref;
        char why[256], name[128];
        if (image_ref_parse(s, &ref, why, sizeof(why)) == 0) {
                FUZZ_ASSERT(memchr(ref.registry, '\0', sizeof(ref.registry)));
                FUZZ_ASSERT(memchr(ref.repository, '\0', sizeof(ref.repository)));
                FUZZ_ASSERT(memchr(ref.tag, '\0', sizeof(ref.tag)));
                FUZZ_ASSERT(!ref.digest[0] || image_digest_valid(ref.digest));
                FUZZ_ASSERT(image_ref_reference(&ref)[0] != '\0');
                FUZZ_ASSERT(ref.loopback == image_host_is_loopback(ref.registry));
                (void)image_ref_default_name(&ref, name, sizeof(name));
        }
        (void)image_host_is_loopback(s);
        (void)image_digest_valid(s);
        free(s);
        return 0;
}

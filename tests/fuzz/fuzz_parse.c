/* Size, duration, rate and CPU parsers (lib/parse.c): user-supplied text from the API and CLI. */
#include "fuzz.h"
#include "lib/parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        char *s = fuzz_strdup(data, size);
        uint64_t v;
        char buf[32];
        if (parse_size(s, &v) == 0) {
                /* format_size must describe exactly that many bytes. */
                uint64_t back;
                FUZZ_ASSERT(parse_size(format_size(v, buf, sizeof(buf)), &back) == 0);
                FUZZ_ASSERT(back == v);
        }
        (void)parse_duration_s(s, &v);
        (void)parse_rate_bps(s, &v);
        if (parse_cpus(s, &v) == 0)
                FUZZ_ASSERT(v >= 10 && v <= 1024000);
        if (name_is_valid(s))
                FUZZ_ASSERT(strlen(s) >= 1 && strlen(s) <= 63);
        free(s);
        return 0;
}

/* The CLI's HTTP/1.1 response parser (src/lib/http1.c), fed what a hostile or broken paddockd
 * (or anything listening on its socket) could send. The first byte sets how the bytes are split
 * into reads (1..128 bytes each) and whether the request was a HEAD. */
#include "fuzz.h"
#include "lib/http1.h"

#include <errno.h>

struct sink {
        size_t bytes;
};

static int on_body(const char *data, size_t len, void *userdata)
{
        struct sink *s = userdata;
        FUZZ_ASSERT(len > 0);
        s->bytes += len;
        return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        if (size < 1)
                return 0;
        size_t step = (data[0] & 0x7f) + 1;
        struct http1 p;
        http1_init(&p);
        p.head_request = data[0] & 0x80;
        struct sink sink = {0};
        const uint8_t *in = data + 1;
        size_t left = size - 1;
        int r = 0;
        while (left > 0 && r == 0) {
                size_t n = left < step ? left : step;
                /* Each read in its own buffer, so reading past it is caught. */
                char *piece = malloc(n);
                if (!piece)
                        abort();
                memcpy(piece, in, n);
                r = http1_feed(&p, piece, n, on_body, &sink);
                free(piece);
                in += n;
                left -= n;
        }
        if (r == 0)
                r = http1_eof(&p);
        FUZZ_ASSERT(sink.bytes <= size);
        FUZZ_ASSERT(r != 0 || http1_complete(&p));
        if (r < 0)
                FUZZ_ASSERT(p.state == HTTP1_FAILED || r == -EPROTO);
        http1_done(&p);
        return 0;
}

/* The CLI's HTTP/1.1 response parser (src/lib/http1.c), fed what a hostile or broken paddockd
 * (or anything listening on its socket) could send. The first byte sets how the bytes are split
 * into reads (1..64 bytes each), whether the request was a HEAD and whether it asked for an
 * Upgrade (the WebSocket handshake, where a 101 is final). Header fields go to a field function
 * that reads every byte it is given. */
#include "fuzz.h"
#include "lib/http1.h"

#include <errno.h>

struct sink {
        size_t bytes;
        size_t fields;
        unsigned sum;
};

static int on_field(const char *name, size_t name_len, const char *value, size_t value_len,
                    void *userdata)
{
        struct sink *s = userdata;
        FUZZ_ASSERT(name_len > 0);
        for (size_t i = 0; i < name_len; i++)
                s->sum += (unsigned char)name[i];
        for (size_t i = 0; i < value_len; i++) {
                FUZZ_ASSERT(value[i] != '\r' && value[i] != '\n');
                s->sum += (unsigned char)value[i];
        }
        s->fields++;
        return 0;
}

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
        size_t step = (data[0] & 0x3f) + 1;
        struct http1 p;
        http1_init(&p);
        p.head_request = data[0] & 0x80;
        p.upgrade = data[0] & 0x40;
        struct sink sink = {0};
        p.on_field = on_field;
        p.field_data = &sink;
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
                FUZZ_ASSERT(p.used <= n);
                FUZZ_ASSERT(r != 0 || p.used == n || http1_complete(&p));
                free(piece);
                in += n;
                left -= n;
        }
        if (r == 0)
                r = http1_eof(&p);
        FUZZ_ASSERT(sink.bytes <= size);
        FUZZ_ASSERT(sink.fields <= size);
        FUZZ_ASSERT(p.status != 101 || p.upgrade || r != 0);
        FUZZ_ASSERT(r != 0 || http1_complete(&p));
        if (r < 0)
                FUZZ_ASSERT(p.state == HTTP1_FAILED || r == -EPROTO);
        http1_done(&p);
        return 0;
}

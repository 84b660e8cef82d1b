/* The gateway's request parser (src/gateway/reqparse.c) as the event loop drives it: the
 * input arrives in pieces (reqparse_head_ready decides when to parse), the head is parsed and
 * re-serialized, and the rest of the input is fed as the body in pieces. Invariants: what the
 * gateway sends the engine parses again to the same request (the canonical form is a fixed
 * point), a head judged ready is decided, and a re-emitted chunked body re-emits to itself. */
#include "fuzz.h"
#include "gateway/reqparse.h"

static char emitted[RP_EMIT_MAX(RP_HEAD_MAX)];
static char emitted2[RP_EMIT_MAX(RP_HEAD_MAX)];

/* Feeds in[0..len) through a body parser in pieces of `step` into out; returns bytes written,
 * or -1 on a 400. *ret_used = bytes consumed. */
static long feed(struct reqbody *b, const char *in, size_t len, size_t step, char *out,
                 size_t cap, size_t *ret_used)
{
        size_t pos = 0, o = 0;
        while (pos < len && !reqbody_done(b)) {
                size_t n = len - pos < step ? len - pos : step;
                size_t room = cap - o < 64 ? cap - o : 64;
                size_t used, made;
                if (reqbody_feed(b, in + pos, n, out + o, room, &used, &made) != RP_OK)
                        return -1;
                FUZZ_ASSERT(used <= n && made <= room);
                if (used == 0 && made == 0) {
                        FUZZ_ASSERT(room < 32); /* it promised progress otherwise */
                        break;
                }
                pos += used;
                o += made;
        }
        *ret_used = pos;
        return (long)o;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        if (size < 1)
                return 0;
        size_t step = (size_t)data[0] % 17 + 1;
        const char *buf = (const char *)data + 1;
        size_t len = size - 1;

        /* Arrival in pieces: ready must say so no later than the whole input. */
        size_t scanned = 0, have = 0;
        bool ready = false;
        while (have < len && !ready) {
                have = have + step < len ? have + step : len;
                ready = reqparse_head_ready(buf, have, &scanned);
                FUZZ_ASSERT(scanned <= have);
        }
        struct rp_head h;
        int r = reqparse_head(buf, have, &h);
        /* Once ready, the parser can decide: the loop never waits on a head it could judge. */
        if (ready)
                FUZZ_ASSERT(r != RP_MORE);
        if (r != RP_OK) {
                FUZZ_ASSERT(r == RP_MORE || ((r == 400 || r == 414 || r == 431) && h.error));
                return 0;
        }
        FUZZ_ASSERT(h.head_len <= have && h.head_len <= RP_HEAD_MAX);
        ssize_t n = reqparse_emit_head(&h, "192.0.2.1:1", emitted, sizeof(emitted));
        FUZZ_ASSERT(n > 0 && (size_t)n <= RP_EMIT_MAX(h.head_len));

        /* The canonical head is accepted again and re-emits to itself. */
        struct rp_head h2;
        int r2 = reqparse_head(emitted, (size_t)n, &h2);
        /* Our own fields may push a head at the client limits over them; nothing else may. */
        if (r2 == 431 && (h.n_fields > RP_HEADERS_MAX - 3 || (size_t)n >= RP_HEAD_MAX))
                return 0;
        FUZZ_ASSERT(r2 == RP_OK);
        FUZZ_ASSERT(h2.head_len == (size_t)n);
        FUZZ_ASSERT(h2.body == h.body && h2.content_length == h.content_length);
        FUZZ_ASSERT(h2.keep_alive == h.keep_alive && h2.upgrade == h.upgrade);
        ssize_t n2 = reqparse_emit_head(&h2, "192.0.2.1:1", emitted2, sizeof(emitted2));
        FUZZ_ASSERT(n2 == n && memcmp(emitted, emitted2, (size_t)n) == 0);
        const char *t1, *t2;
        size_t l1, l2;
        bool k1 = reqparse_bearer(&h, &t1, &l1), k2 = reqparse_bearer(&h2, &t2, &l2);
        FUZZ_ASSERT(k1 == k2 && (!k1 || (l1 == l2 && memcmp(t1, t2, l1) == 0)));

        /* The body, in pieces. */
        struct reqbody b;
        reqbody_init(&b, &h);
        size_t rest = len - h.head_len, used;
        char *out = malloc(rest * 2 + 64);
        if (!out)
                abort();
        long o = feed(&b, buf + h.head_len, rest, step, out, rest * 2 + 64, &used);
        if (o >= 0 && reqbody_done(&b) && h.body == RP_BODY_CHUNKED) {
                struct reqbody b2;
                reqbody_init(&b2, &h2);
                char *again = malloc((size_t)o + 64);
                if (!again)
                        abort();
                size_t used2;
                long o2 = feed(&b2, out, (size_t)o, 1000, again, (size_t)o + 64, &used2);
                FUZZ_ASSERT(o2 == o && used2 == (size_t)o && memcmp(out, again, (size_t)o) == 0);
                FUZZ_ASSERT(reqbody_done(&b2));
                free(again);
        }
        free(out);
        return 0;
}

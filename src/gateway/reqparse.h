/* Strict HTTP/1.1 request parsing for the network gateway (no I/O, no allocation).
 *
 * The gateway parses every request a network client sends and hands the engine a head it
 * wrote itself (reqparse_emit_head) and a body it re-framed itself (reqbody_feed). Anything
 * our parser and libmicrohttpd might read differently (bare LF, obs-fold, CL+TE, two
 * Content-Lengths, chunk extensions) is refused here with 400, so the engine only ever sees
 * one canonical spelling: request smuggling needs two parsers that disagree.
 *
 * Results are HTTP status codes: RP_MORE (need more bytes), RP_OK, or 400 / 414 / 431 with
 * a short reason in ret->error. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define RP_MORE 0
#define RP_OK   1

#define RP_HEAD_MAX      16384 /* whole head, request line included -> 431 */
#define RP_LINE_MAX      8192  /* request line -> 414 */
#define RP_HEADERS_MAX   100   /* header fields -> 431 */
#define RP_SECRET_MAX    256   /* a Bearer credential longer than this is malformed */

struct rp_field {
        const char *name, *value; /* point into the caller's buffer; not NUL-terminated */
        uint16_t name_len;
        uint16_t value_len;
};

enum rp_body { RP_BODY_NONE, RP_BODY_LENGTH, RP_BODY_CHUNKED };

struct rp_head {
        const char *method, *target;
        size_t method_len, target_len;
        int minor; /* HTTP/1.minor: 0 or 1 */
        struct rp_field fields[RP_HEADERS_MAX];
        size_t n_fields;
        size_t head_len; /* bytes of input the head took, final CRLF CRLF included */
        enum rp_body body;
        uint64_t content_length; /* RP_BODY_LENGTH */
        bool keep_alive;         /* the client allows another request on this connection */
        bool upgrade;            /* Connection: upgrade with an Upgrade header */
        const struct rp_field *authorization, *upgrade_field;
        const char *error;       /* the reason of a 4xx result */
};

/* Cheap incremental check, called as bytes arrive: true once buf[0..len) holds a complete
 * head (CRLF CRLF), a bare CR or LF, or more bytes than a head or request line may have, i.e.
 * once reqparse_head has something to say. *scanned (start at 0) remembers how far it got, so
 * a client trickling one byte at a time costs O(n) in all, not O(n^2). */
bool reqparse_head_ready(const char *buf, size_t len, size_t *scanned);

/* Parses the head at the start of buf[0..len). The fields point into buf. */
int reqparse_head(const char *buf, size_t len, struct rp_head *ret);

/* The head as the engine receives it: the request line as parsed; every field except
 * hop-by-hop ones (Connection, Keep-Alive, Proxy-Connection, TE, Trailer, Upgrade,
 * Transfer-Encoding, Content-Length, Paddock-Peer); then our own Content-Length or
 * Transfer-Encoding, Connection (close / upgrade), Upgrade, and Paddock-Peer: PEER.
 * Returns the length written, or -ENOSPC when out (size cap) is too small. */
ssize_t reqparse_emit_head(const struct rp_head *h, const char *peer, char *out, size_t cap);

/* A bounded writer for re-serialized heads: once cap would be exceeded, full is set and
 * nothing more is written. */
struct rp_out {
        char *p;
        size_t len, cap;
        bool full;
};
void rp_put(struct rp_out *o, const char *s, size_t n);
void rp_puts(struct rp_out *o, const char *s);
/* A hop-by-hop field or Paddock-Peer: never passed on. */
bool reqparse_hop_field(const struct rp_field *f);
/* The canonical head up to, not including, the closing blank line: the request line, every
 * field but hop-by-hop ones and those keep() refuses (keep may write a field of its own
 * instead; NULL keeps all), then our own framing fields as reqparse_emit_head describes. The
 * one serializer of both the engine's heads and the ingress's (ingress.c). */
typedef bool (*rp_keep_fn)(struct rp_out *o, const struct rp_field *f, void *data);
void reqparse_emit_canonical(struct rp_out *o, const struct rp_head *h, rp_keep_fn keep,
                             void *data);

/* Upper bound of reqparse_emit_head's output for a head of head_len bytes. */
#define RP_EMIT_MAX(head_len) ((head_len) + 256)

/* The token in `Authorization: Bearer TOKEN` (scheme case-insensitive, one space, token68
 * characters); false when the field is absent or malformed. */
bool reqparse_bearer(const struct rp_head *h, const char **ret, size_t *ret_len);

/* Request body re-framing, fed in pieces. A Content-Length body passes through unchanged;
 * a chunked body is re-emitted as "HEX\r\n" data "\r\n" ... "0\r\n\r\n" with extensions
 * refused and trailers dropped. */
struct reqbody {
        enum rp_body kind;
        int state;
        uint64_t left;       /* bytes left of the body (length) or of the current chunk */
        char line[80];       /* chunk-size line being collected */
        size_t line_len;
        size_t trailer_len;  /* bytes of trailer section so far */
        const char *error;
};

void reqbody_init(struct reqbody *b, const struct rp_head *h);
/* True once the whole body has been consumed (and, for chunked, its last chunk emitted). */
bool reqbody_done(const struct reqbody *b);
/* Consumes from in[0..len) and writes to out[0..cap). Sets *ret_in (consumed) and *ret_out
 * (written). Returns RP_OK (progress or done), or 400 with b->error set. Never writes more
 * than cap; makes progress whenever len > 0 and cap >= 32. */
int reqbody_feed(struct reqbody *b, const char *in, size_t len, char *out, size_t cap,
                 size_t *ret_in, size_t *ret_out);

/* Connect protocol v1 with the JSON codec, as the e2b SDK speaks it to envd
 * (docs/e2b.md): unary calls are one JSON object each way (errors: a non-200 status
 * with {"code":"not_found","message":...}); server streams answer 200
 * application/connect+json with envelopes (flags u8, length u32 big-endian, JSON), the last
 * one the end-stream envelope (flag 0x02): {} or {"error":{"code":...,"message":...}}. */
#pragma once
#include "daemon/e2b.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Outgoing bytes a stream may hold for a slow client before its producer is told to pause
 * (the producer stops reading the process's output; nothing is dropped). */
#define CSTREAM_HIGH_WATER (1u << 20)
#define CSTREAM_LOW_WATER  (256u << 10)

/* Unary answers: 200 with body (stolen), or the Connect error (status from the code). */
void rpc_reply(struct request *r, json_t *body);
void rpc_error(struct request *r, const char *code, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
/* A -errno as a Connect code (ENOENT not_found, EEXIST already_exists, ...). */
const char *rpc_code_of_errno(int neg_errno);

/* The request's JSON object (an empty body is {}); for a stream the body is one envelope.
 * On error answers (invalid_argument) and returns NULL. */
json_t *rpc_request_json(struct request *r, bool stream);

/* A server stream. It answers r at once (200, application/connect+json) and lives until the
 * connection is done; gone(data) runs once if the client leaves (or the stream finished)
 * while the owner is still attached. */
struct cstream;
struct cstream_ops {
        void (*gone)(void *data);
        /* The queue fell below CSTREAM_LOW_WATER after being above CSTREAM_HIGH_WATER. */
        void (*drained)(void *data);
};
struct cstream *cstream_open(struct request *r, const struct cstream_ops *ops, void *data);
/* One message envelope (msg stolen). */
void cstream_send(struct cstream *s, json_t *msg);
/* The end-stream envelope: code NULL is success. The owner is detached: no callback runs
 * any more and s must not be used again. */
void cstream_end(struct cstream *s, const char *code, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
/* cstream_end with success ({}). */
void cstream_finish(struct cstream *s);
/* The owner lets go without ending (the stream is cut off without its end-stream). */
void cstream_detach(struct cstream *s);
size_t cstream_queued(const struct cstream *s);
/* A stream that fails before it started: 200 with only the end-stream error envelope. */
void rpc_stream_error(struct request *r, const char *code, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

/* Connect-Timeout-Ms (0: none) and Keepalive-Ping-Interval (ms, 0: none). */
uint64_t rpc_timeout_ms(struct request *r);
uint64_t rpc_keepalive_ms(struct request *r);

/* The services (e2b_rpc_process.c, e2b_rpc_fs.c). method is "Start", "Stat", ... */
void e2b_rpc_process(struct request *r, struct engine *e, const struct e2b_target *t,
                     const char *method);
void e2b_rpc_fs(struct request *r, struct engine *e, const struct e2b_target *t,
                const char *method);

/* Bytes as standard base64 JSON string; and back (-EINVAL on bad input; *ret malloc'd). */
json_t *rpc_b64_json(const void *p, size_t n);
int rpc_b64_decode(json_t *j, unsigned char **ret, size_t *ret_len);

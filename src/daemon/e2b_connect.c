/* Connect framing for envd's services (e2b_connect.h) and their dispatch. */
#include "daemon/e2b_connect.h"
#include "daemon/log.h"
#include "lib/base64.h"
#include "lib/parse.h"
#include "lib/util.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------------------------------ unary */

static unsigned status_of_code(const char *code)
{
        static const struct {
                const char *code;
                unsigned status;
        } map[] = {{"canceled", 499},          {"unknown", 500},
                   {"invalid_argument", 400},  {"deadline_exceeded", 504},
                   {"not_found", 404},         {"already_exists", 409},
                   {"permission_denied", 403}, {"resource_exhausted", 429},
                   {"failed_precondition", 400}, {"aborted", 409},
                   {"out_of_range", 400},      {"unimplemented", 501},
                   {"internal", 500},          {"unavailable", 503},
                   {"data_loss", 500},         {"unauthenticated", 401}};
        for (size_t i = 0; i < ELEMENTSOF(map); i++)
                if (!strcmp(map[i].code, code))
                        return map[i].status;
        return 500;
}

const char *rpc_code_of_errno(int neg_errno)
{
        switch (-neg_errno) {
        case ENOENT:
        case ESRCH:
                return "not_found";
        case EEXIST:
                return "already_exists";
        case EINVAL:
        case ENOTDIR:
        case EISDIR:
        case ENAMETOOLONG:
        case ELOOP:
        case ENOTEMPTY:
                return "invalid_argument";
        case EACCES:
        case EPERM:
        case EROFS:
                return "permission_denied";
        case ENOSPC:
        case EDQUOT:
        case EAGAIN:
        case ENOBUFS:
        case EMFILE:
        case ENFILE:
                return "resource_exhausted";
        case ETIMEDOUT:
                return "deadline_exceeded";
        case EBUSY:
                return "unavailable";
        default:
                return "internal";
        }
}

void rpc_reply(struct request *r, json_t *body)
{
        http_reply_json(r, 200, body ? body : json_object());
}

void rpc_error(struct request *r, const char *code, const char *fmt, ...)
{
        char msg[1024];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        if (!utf8_valid(msg, strlen(msg)))
                snprintf(msg, sizeof(msg), "%s", code);
        http_reply_json(r, status_of_code(code), json_pack("{s:s,s:s}", "code", code, "message", msg));
}

json_t *rpc_request_json(struct request *r, bool stream)
{
        size_t len = 0;
        const char *body = req_body(r, &len);
        if (stream) {
                /* One envelope: flags, length, message. */
                const unsigned char *b = (const unsigned char *)body;
                if (len < 5 || (b[0] & 0x01)) {
                        rpc_stream_error(r, "invalid_argument",
                                         "the request must be one uncompressed envelope");
                        return NULL;
                }
                uint32_t n = (uint32_t)b[1] << 24 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 8 | b[4];
                if (n != len - 5) {
                        rpc_stream_error(r, "invalid_argument", "malformed envelope");
                        return NULL;
                }
                body += 5;
                len = n;
        }
        if (len == 0)
                return json_object();
        json_error_t jerr;
        json_t *j = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
        if (!json_is_object(j)) {
                json_decref(j);
                if (stream)
                        rpc_stream_error(r, "invalid_argument", "the message must be a JSON object");
                else
                        rpc_error(r, "invalid_argument", "the message must be a JSON object");
                return NULL;
        }
        return j;
}

/* ------------------------------------------------------------------------------ streams */

struct cstream {
        struct request *req; /* NULL once the connection is done */
        const struct cstream_ops *ops;
        void *data; /* the owner; NULL once detached */
        char *buf;
        size_t len, off, cap;
        bool ended, broken, above;
};

static bool append(struct cstream *s, uint8_t flags, const char *json, size_t n)
{
        if (s->off && s->off == s->len)
                s->off = s->len = 0;
        if (s->len + n + 5 > s->cap) {
                /* Compact first, then grow. */
                if (s->off) {
                        memmove(s->buf, s->buf + s->off, s->len - s->off);
                        s->len -= s->off;
                        s->off = 0;
                }
                size_t cap = s->cap ? s->cap : 4096;
                while (cap < s->len + n + 5)
                        cap *= 2;
                char *nb = realloc(s->buf, cap);
                if (!nb)
                        return false;
                s->buf = nb;
                s->cap = cap;
        }
        unsigned char *h = (unsigned char *)s->buf + s->len;
        h[0] = flags;
        h[1] = (unsigned char)(n >> 24);
        h[2] = (unsigned char)(n >> 16);
        h[3] = (unsigned char)(n >> 8);
        h[4] = (unsigned char)n;
        memcpy(s->buf + s->len + 5, json, n);
        s->len += n + 5;
        return true;
}

static void append_json(struct cstream *s, uint8_t flags, json_t *msg)
{
        char *text = msg ? json_dumps(msg, JSON_COMPACT | JSON_ENSURE_ASCII) : NULL;
        json_decref(msg);
        if (!text || !append(s, flags, text, strlen(text)))
                s->broken = true; /* out of memory: cut the stream rather than lie */
        free(text);
        if (s->req)
                http_stream_wake(s->req);
}

static ssize_t cs_read(void *data, char *buf, size_t max)
{
        struct cstream *s = data;
        if (s->broken)
                return -2;
        size_t n = take_pending(buf, max, s->buf, s->len, &s->off);
        if (s->above && s->len - s->off < CSTREAM_LOW_WATER) {
                s->above = false;
                if (s->data && s->ops->drained)
                        s->ops->drained(s->data);
        }
        if (n > 0)
                return (ssize_t)n;
        s->off = s->len = 0;
        if (s->ended)
                return -1;
        return s->data ? 0 : -2; /* detached without an end: cut off */
}

static void cs_closed(void *data)
{
        struct cstream *s = data;
        s->req = NULL;
        if (s->data && s->ops->gone) {
                void *d = s->data;
                s->data = NULL;
                s->ops->gone(d);
        }
        free(s->buf);
        free(s);
}

static const struct http_stream_ops cs_ops = {.read = cs_read, .closed = cs_closed};

struct cstream *cstream_open(struct request *r, const struct cstream_ops *ops, void *data)
{
        struct cstream *s = calloc(1, sizeof(*s));
        if (!s) {
                rpc_error(r, "resource_exhausted", "out of memory");
                return NULL;
        }
        s->req = r;
        s->ops = ops;
        s->data = data;
        http_reply_stream(r, 200, "application/connect+json", &cs_ops, s);
        return s;
}

void cstream_send(struct cstream *s, json_t *msg)
{
        if (s->ended) {
                json_decref(msg);
                return;
        }
        append_json(s, 0x00, msg);
        if (s->len - s->off > CSTREAM_HIGH_WATER)
                s->above = true;
}

size_t cstream_queued(const struct cstream *s)
{
        return s->len - s->off;
}

/* code NULL: success. */
static void end_text(struct cstream *s, const char *code, char *text, size_t len)
{
        json_t *msg;
        if (code) {
                if (!utf8_valid(text, strlen(text)))
                        snprintf(text, len, "%s", code);
                msg = json_pack("{s:{s:s,s:s}}", "error", "code", code, "message", text);
        } else {
                msg = json_object();
        }
        s->data = NULL;
        if (s->ended) {
                json_decref(msg);
                return;
        }
        append_json(s, 0x02, msg);
        s->ended = true;
        if (s->req)
                http_stream_wake(s->req);
}

void cstream_end(struct cstream *s, const char *code, const char *fmt, ...)
{
        char text[1024];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(text, sizeof(text), fmt, ap);
        va_end(ap);
        end_text(s, code, text, sizeof(text));
}

void cstream_finish(struct cstream *s)
{
        end_text(s, NULL, NULL, 0);
}

void cstream_detach(struct cstream *s)
{
        s->data = NULL;
        if (s->req)
                http_stream_wake(s->req);
}

static const struct cstream_ops no_ops = {0};

void rpc_stream_error(struct request *r, const char *code, const char *fmt, ...)
{
        struct cstream *s = calloc(1, sizeof(*s));
        if (!s) {
                rpc_error(r, code, "%s", code);
                return;
        }
        s->req = r;
        s->ops = &no_ops;
        char text[1024];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(text, sizeof(text), fmt, ap);
        va_end(ap);
        end_text(s, code, text, sizeof(text));
        http_reply_stream(r, 200, "application/connect+json", &cs_ops, s);
}

static uint64_t header_u64(struct request *r, const char *name, uint64_t unit)
{
        const char *h = req_header(r, name);
        if (!h || !*h || strlen(h) > 12 || strspn(h, "0123456789") != strlen(h))
                return 0;
        return strtoull(h, NULL, 10) * unit;
}

uint64_t rpc_timeout_ms(struct request *r)
{
        return header_u64(r, "Connect-Timeout-Ms", 1);
}

uint64_t rpc_keepalive_ms(struct request *r)
{
        return header_u64(r, "Keepalive-Ping-Interval", 1000);
}

json_t *rpc_b64_json(const void *p, size_t n)
{
        char *enc = malloc(base64_encoded_size(n));
        if (!enc)
                return NULL;
        size_t len = base64_encode(p, n, enc);
        json_t *j = json_stringn(enc, len);
        free(enc);
        return j;
}

int rpc_b64_decode(json_t *j, unsigned char **ret, size_t *ret_len)
{
        if (!json_is_string(j))
                return -EINVAL;
        size_t len = json_string_length(j);
        /* The client may send url-safe or unpadded base64: normalise. */
        char *s = malloc(len + 4);
        unsigned char *out = malloc(len / 4 * 3 + 4);
        if (!s || !out) {
                free(s);
                free(out);
                return -ENOMEM;
        }
        const char *in = json_string_value(j);
        for (size_t i = 0; i < len; i++)
                s[i] = in[i] == '-' ? '+' : in[i] == '_' ? '/' : in[i];
        while (len % 4)
                s[len++] = '=';
        long n = base64_decode(s, len, out);
        free(s);
        if (n < 0) {
                free(out);
                return -EINVAL;
        }
        *ret = out;
        *ret_len = (size_t)n;
        return 0;
}

/* ------------------------------------------------------------------------------ dispatch */

void e2b_rpc_dispatch(struct request *r, struct engine *e, const struct e2b_target *t,
                      const char *path)
{
        /* t->user is the Basic-auth user (e2b_envd_target), else the sandbox's default. */
        if (strcmp(req_method(r), "POST") != 0) {
                rpc_error(r, "unimplemented", "Connect calls are POST");
                return;
        }
        if (!strncmp(path, "process.Process/", 16))
                e2b_rpc_process(r, e, t, path + 16);
        else if (!strncmp(path, "filesystem.Filesystem/", 22))
                e2b_rpc_fs(r, e, t, path + 22);
        else
                rpc_error(r, "unimplemented", "no such service: %s", path);
}

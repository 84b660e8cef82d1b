/* Strict HTTP/1.1 request parsing and canonical re-serialization (reqparse.h).
 * Grammar from RFC 9112, minus everything the RFC merely tolerates: obs-fold, bare CR or LF
 * line ends, whitespace before the colon, chunk extensions, several Content-Length fields. */
#include "gateway/reqparse.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* tchar = "!" / "#" / "$" / "%" / "&" / "'" / "*" / "+" / "-" / "." / "^" / "_" / "`" / "|" /
 *         "~" / DIGIT / ALPHA */
static bool is_tchar(unsigned char c)
{
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
                return true;
        return c && strchr("!#$%&'*+-.^_`|~", c);
}

/* field-vchar / SP / HTAB; obs-text (>= 0x80) passes through untouched. */
static bool is_value_char(unsigned char c)
{
        return c == '\t' || (c >= 0x20 && c != 0x7f);
}

static bool is_token68(unsigned char c)
{
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
                return true;
        return c && strchr("-._~+/", c);
}

static bool field_is(const struct rp_field *f, const char *name)
{
        return f->name_len == strlen(name) && strncasecmp(f->name, name, f->name_len) == 0;
}

static bool value_is(const char *v, size_t len, const char *word)
{
        return len == strlen(word) && strncasecmp(v, word, len) == 0;
}

bool reqparse_head_ready(const char *buf, size_t len, size_t *scanned)
{
        if (len >= RP_HEAD_MAX)
                return true;
        size_t i = *scanned;
        for (; i < len; i++) {
                unsigned char c = (unsigned char)buf[i];
                if (i == RP_LINE_MAX && !memchr(buf, '\n', RP_LINE_MAX))
                        return true;
                if (c == '\n') {
                        if (i == 0 || buf[i - 1] != '\r')
                                return true;
                        if (i >= 3 && memcmp(buf + i - 3, "\r\n\r\n", 4) == 0)
                                return true;
                } else if (c == '\r') {
                        if (i + 1 == len)
                                break; /* look again when the next byte is here */
                        if (buf[i + 1] != '\n')
                                return true;
                }
        }
        *scanned = i;
        return false;
}

static int fail(struct rp_head *h, int status, const char *why)
{
        h->error = why;
        return status;
}

/* Finds the head's end and checks line endings and size limits before anything else. */
static int find_head_end(const char *buf, size_t len, struct rp_head *h, size_t *ret_line_end)
{
        size_t line_start = 0, line_no = 0;
        for (size_t i = 0; i < len; i++) {
                if (line_no == 0 && i >= RP_LINE_MAX)
                        return fail(h, 414, "request line too long");
                if (i >= RP_HEAD_MAX)
                        return fail(h, 431, "request head too large");
                char c = buf[i];
                if (c == '\n')
                        return fail(h, 400, "bare LF in request head");
                if (c != '\r')
                        continue;
                if (i + 1 == len)
                        break;
                if (buf[i + 1] != '\n')
                        return fail(h, 400, "bare CR in request head");
                if (line_no == 0)
                        *ret_line_end = i;
                if (i == line_start) {
                        if (line_no == 0)
                                return fail(h, 400, "empty request line");
                        h->head_len = i + 2;
                        return RP_OK;
                }
                line_no++;
                i++;
                line_start = i + 1;
        }
        if (len >= RP_HEAD_MAX)
                return fail(h, 431, "request head too large");
        return RP_MORE;
}

static int parse_request_line(const char *s, size_t len, struct rp_head *h)
{
        size_t i = 0;
        while (i < len && is_tchar((unsigned char)s[i]))
                i++;
        if (i == 0 || i == len || s[i] != ' ')
                return fail(h, 400, "malformed request method");
        h->method = s;
        h->method_len = i;
        size_t t = ++i;
        while (i < len && s[i] != ' ') {
                unsigned char c = (unsigned char)s[i];
                if (c <= 0x20 || c >= 0x7f || c == '#')
                        return fail(h, 400, "malformed request target");
                i++;
        }
        if (i == t || s[t] != '/' || i == len)
                return fail(h, 400, "request target must be an absolute path");
        h->target = s + t;
        h->target_len = i - t;
        i++;
        if (len - i != 8 || memcmp(s + i, "HTTP/1.", 7) != 0 || (s[i + 7] != '0' && s[i + 7] != '1'))
                return fail(h, 400, "unsupported HTTP version");
        h->minor = s[i + 7] - '0';
        return RP_OK;
}

static int parse_field(const char *s, size_t len, struct rp_head *h)
{
        if (s[0] == ' ' || s[0] == '\t')
                return fail(h, 400, "obsolete line folding");
        size_t i = 0;
        while (i < len && is_tchar((unsigned char)s[i]))
                i++;
        if (i == 0 || i == len || s[i] != ':')
                return fail(h, 400, "malformed header field name");
        if (h->n_fields == RP_HEADERS_MAX)
                return fail(h, 431, "too many header fields");
        struct rp_field *f = &h->fields[h->n_fields++];
        f->name = s;
        f->name_len = (uint16_t)i;
        i++;
        while (i < len && (s[i] == ' ' || s[i] == '\t'))
                i++;
        size_t end = len;
        while (end > i && (s[end - 1] == ' ' || s[end - 1] == '\t'))
                end--;
        for (size_t k = i; k < end; k++)
                if (!is_value_char((unsigned char)s[k]))
                        return fail(h, 400, "control character in header field value");
        f->value = s + i;
        f->value_len = (uint16_t)(end - i);
        return RP_OK;
}

/* Connection is a comma-separated list of options. */
static void parse_connection(const struct rp_field *f, bool *close, bool *upgrade)
{
        const char *v = f->value, *end = f->value + f->value_len;
        while (v < end) {
                const char *comma = memchr(v, ',', (size_t)(end - v));
                const char *e = comma ? comma : end;
                const char *a = v, *b = e;
                while (a < b && (*a == ' ' || *a == '\t'))
                        a++;
                while (b > a && (b[-1] == ' ' || b[-1] == '\t'))
                        b--;
                if (value_is(a, (size_t)(b - a), "close"))
                        *close = true;
                else if (value_is(a, (size_t)(b - a), "upgrade"))
                        *upgrade = true;
                v = comma ? comma + 1 : end;
        }
}

static int parse_content_length(const struct rp_field *f, struct rp_head *h)
{
        if (f->value_len == 0 || f->value_len > 15)
                return fail(h, 400, "invalid Content-Length");
        uint64_t n = 0;
        for (size_t i = 0; i < f->value_len; i++) {
                if (f->value[i] < '0' || f->value[i] > '9')
                        return fail(h, 400, "invalid Content-Length");
                n = n * 10 + (uint64_t)(f->value[i] - '0');
        }
        h->content_length = n;
        return RP_OK;
}

/* What the fields mean together: framing, persistence, upgrade, credentials. */
static int check_fields(struct rp_head *h)
{
        const struct rp_field *cl = NULL, *te = NULL, *host = NULL;
        bool close = false, conn_upgrade = false;
        for (size_t i = 0; i < h->n_fields; i++) {
                const struct rp_field *f = &h->fields[i];
                const struct rp_field **slot = NULL;
                const char *what = NULL;
                if (field_is(f, "content-length"))
                        slot = &cl, what = "duplicate Content-Length";
                else if (field_is(f, "transfer-encoding"))
                        slot = &te, what = "duplicate Transfer-Encoding";
                else if (field_is(f, "host"))
                        slot = &host, what = "duplicate Host";
                else if (field_is(f, "upgrade"))
                        slot = &h->upgrade_field, what = "duplicate Upgrade";
                else if (field_is(f, "authorization"))
                        slot = &h->authorization, what = "duplicate Authorization";
                else if (field_is(f, "connection"))
                        parse_connection(f, &close, &conn_upgrade);
                if (slot) {
                        if (*slot)
                                return fail(h, 400, what);
                        *slot = f;
                }
        }
        if (cl && te)
                return fail(h, 400, "both Content-Length and Transfer-Encoding");
        if (te) {
                if (!value_is(te->value, te->value_len, "chunked"))
                        return fail(h, 400, "Transfer-Encoding other than chunked");
                if (h->minor == 0)
                        return fail(h, 400, "Transfer-Encoding in an HTTP/1.0 request");
                h->body = RP_BODY_CHUNKED;
        } else if (cl) {
                int r = parse_content_length(cl, h);
                if (r != RP_OK)
                        return r;
                h->body = RP_BODY_LENGTH;
        }
        if (h->minor == 1 && !host)
                return fail(h, 400, "missing Host");
        /* HTTP/1.0 keep-alive is an old extension; such clients get one request per connection. */
        h->keep_alive = h->minor == 1 && !close;
        /* "close" wins over "upgrade": the request goes on as an ordinary last one. */
        h->upgrade = conn_upgrade && !close && h->upgrade_field && h->minor == 1;
        if (h->upgrade && (h->body != RP_BODY_NONE || h->upgrade_field->value_len == 0))
                return fail(h, 400, "malformed upgrade request");
        return RP_OK;
}

int reqparse_head(const char *buf, size_t len, struct rp_head *ret)
{
        memset(ret, 0, sizeof(*ret));
        size_t line_end = 0;
        int r = find_head_end(buf, len, ret, &line_end);
        if (r != RP_OK)
                return r;
        r = parse_request_line(buf, line_end, ret);
        if (r != RP_OK)
                return r;
        size_t pos = line_end + 2;
        while (pos < ret->head_len - 2) {
                const char *eol = memchr(buf + pos, '\r', ret->head_len - pos);
                r = parse_field(buf + pos, (size_t)(eol - (buf + pos)), ret);
                if (r != RP_OK)
                        return r;
                pos = (size_t)(eol - buf) + 2;
        }
        return check_fields(ret);
}

/* Fields the gateway never passes on: hop-by-hop ones (it frames the connection to the
 * engine itself) and the peer address, which only the gateway may state. */
bool reqparse_hop_field(const struct rp_field *f)
{
        static const char *const names[] = {
                "connection", "keep-alive", "proxy-connection", "te", "trailer", "upgrade",
                "transfer-encoding", "content-length", "paddock-peer",
        };
        for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
                if (field_is(f, names[i]))
                        return true;
        return false;
}

void rp_put(struct rp_out *o, const char *s, size_t n)
{
        if (o->full || o->cap - o->len < n) {
                o->full = true;
                return;
        }
        memcpy(o->p + o->len, s, n);
        o->len += n;
}

void rp_puts(struct rp_out *o, const char *s)
{
        rp_put(o, s, strlen(s));
}

void reqparse_emit_canonical(struct rp_out *o, const struct rp_head *h, rp_keep_fn keep,
                             void *data)
{
        rp_put(o, h->method, h->method_len);
        rp_puts(o, " ");
        rp_put(o, h->target, h->target_len);
        rp_puts(o, h->minor ? " HTTP/1.1\r\n" : " HTTP/1.0\r\n");
        for (size_t i = 0; i < h->n_fields; i++) {
                const struct rp_field *f = &h->fields[i];
                if (reqparse_hop_field(f) || (keep && !keep(o, f, data)))
                        continue;
                rp_put(o, f->name, f->name_len);
                rp_puts(o, ": ");
                rp_put(o, f->value, f->value_len);
                rp_puts(o, "\r\n");
        }
        char num[64];
        if (h->body == RP_BODY_LENGTH) {
                snprintf(num, sizeof(num), "Content-Length: %llu\r\n",
                         (unsigned long long)h->content_length);
                rp_puts(o, num);
        } else if (h->body == RP_BODY_CHUNKED) {
                rp_puts(o, "Transfer-Encoding: chunked\r\n");
        }
        if (h->upgrade) {
                rp_puts(o, "Connection: Upgrade\r\nUpgrade: ");
                rp_put(o, h->upgrade_field->value, h->upgrade_field->value_len);
                rp_puts(o, "\r\n");
        } else if (!h->keep_alive) {
                rp_puts(o, "Connection: close\r\n");
        }
}

ssize_t reqparse_emit_head(const struct rp_head *h, const char *peer, char *out, size_t cap)
{
        struct rp_out o = {.p = out, .cap = cap};
        reqparse_emit_canonical(&o, h, NULL, NULL);
        rp_puts(&o, "Paddock-Peer: ");
        rp_puts(&o, peer);
        rp_puts(&o, "\r\n\r\n");
        return o.full ? -ENOSPC : (ssize_t)o.len;
}

bool reqparse_bearer(const struct rp_head *h, const char **ret, size_t *ret_len)
{
        const struct rp_field *f = h->authorization;
        if (!f || f->value_len < 8 || strncasecmp(f->value, "bearer ", 7) != 0)
                return false;
        const char *t = f->value + 7;
        size_t n = f->value_len - 7;
        if (n == 0 || n > RP_SECRET_MAX)
                return false;
        size_t i = 0;
        while (i < n && is_token68((unsigned char)t[i]))
                i++;
        if (i == 0)
                return false;
        while (i < n && t[i] == '=')
                i++;
        if (i != n)
                return false;
        *ret = t;
        *ret_len = n;
        return true;
}

enum {
        B_SIZE,    /* collecting a chunk-size line */
        B_SIZE_LF, /* saw its CR */
        B_DATA,    /* chunk data (or the Content-Length body) */
        B_DATA_CR, /* CRLF after chunk data */
        B_DATA_LF,
        B_TRAILER, /* trailer section, dropped */
        B_TRAILER_LF,
        B_DONE,
};

#define TRAILER_MAX 8192

void reqbody_init(struct reqbody *b, const struct rp_head *h)
{
        memset(b, 0, sizeof(*b));
        b->kind = h->body;
        switch (h->body) {
        case RP_BODY_NONE:
                b->state = B_DONE;
                break;
        case RP_BODY_LENGTH:
                b->left = h->content_length;
                b->state = b->left ? B_DATA : B_DONE;
                break;
        case RP_BODY_CHUNKED:
                b->state = B_SIZE;
                break;
        }
}

bool reqbody_done(const struct reqbody *b)
{
        return b->state == B_DONE;
}

static int body_fail(struct reqbody *b, const char *why)
{
        b->error = why;
        return 400;
}

/* The collected chunk-size line: 1 to 15 hex digits and nothing else. */
static int chunk_size(struct reqbody *b, uint64_t *ret)
{
        if (b->line_len == 0 || b->line_len > 15)
                return body_fail(b, "malformed chunk size");
        uint64_t n = 0;
        for (size_t i = 0; i < b->line_len; i++) {
                char c = b->line[i];
                int d = c >= '0' && c <= '9'   ? c - '0'
                        : c >= 'a' && c <= 'f' ? c - 'a' + 10
                        : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                               : -1;
                if (d < 0)
                        return body_fail(b, c == ';' ? "chunk extensions are not accepted"
                                                     : "malformed chunk size");
                n = n * 16 + (uint64_t)d;
        }
        *ret = n;
        return RP_OK;
}

int reqbody_feed(struct reqbody *b, const char *in, size_t len, char *out, size_t cap,
                 size_t *ret_in, size_t *ret_out)
{
        size_t i = 0, o = 0;
        while (i < len && b->state != B_DONE) {
                char c = in[i];
                switch (b->state) {
                case B_DATA: {
                        size_t n = len - i;
                        if (n > b->left)
                                n = (size_t)b->left;
                        if (n > cap - o)
                                n = cap - o;
                        if (n == 0)
                                goto out;
                        memcpy(out + o, in + i, n);
                        i += n;
                        o += n;
                        b->left -= n;
                        if (b->left == 0)
                                b->state = b->kind == RP_BODY_LENGTH ? B_DONE : B_DATA_CR;
                        break;
                }
                case B_SIZE:
                        if (c == '\r') {
                                b->state = B_SIZE_LF;
                        } else if (c == '\n') {
                                return body_fail(b, "bare LF in chunked body");
                        } else {
                                if (b->line_len == sizeof(b->line))
                                        return body_fail(b, "malformed chunk size");
                                b->line[b->line_len++] = c;
                        }
                        i++;
                        break;
                case B_SIZE_LF: {
                        if (c != '\n')
                                return body_fail(b, "bare CR in chunked body");
                        uint64_t n;
                        int r = chunk_size(b, &n);
                        if (r != RP_OK)
                                return r;
                        if (n == 0) {
                                b->state = B_TRAILER;
                                b->line_len = 0;
                                i++;
                                break;
                        }
                        if (cap - o < 24)
                                goto out;
                        o += (size_t)snprintf(out + o, cap - o, "%llx\r\n", (unsigned long long)n);
                        b->left = n;
                        b->line_len = 0;
                        b->state = B_DATA;
                        i++;
                        break;
                }
                case B_DATA_CR:
                        if (c != '\r')
                                return body_fail(b, "chunk data longer than its size");
                        b->state = B_DATA_LF;
                        i++;
                        break;
                case B_DATA_LF:
                        if (c != '\n')
                                return body_fail(b, "bare CR in chunked body");
                        if (cap - o < 2)
                                goto out;
                        memcpy(out + o, "\r\n", 2);
                        o += 2;
                        b->state = B_SIZE;
                        i++;
                        break;
                case B_TRAILER:
                        /* line_len counts the current trailer line; only the empty one ends. */
                        if (++b->trailer_len > TRAILER_MAX)
                                return body_fail(b, "trailer section too large");
                        if (c == '\r')
                                b->state = B_TRAILER_LF;
                        else if (c == '\n' || (c != '\t' && ((unsigned char)c < 0x20 || c == 0x7f)))
                                return body_fail(b, "malformed trailer section");
                        else
                                b->line_len++;
                        i++;
                        break;
                case B_TRAILER_LF:
                        if (c != '\n')
                                return body_fail(b, "bare CR in chunked body");
                        if (b->line_len == 0) {
                                if (cap - o < 5)
                                        goto out;
                                memcpy(out + o, "0\r\n\r\n", 5);
                                o += 5;
                                b->state = B_DONE;
                        } else {
                                b->line_len = 0;
                                b->state = B_TRAILER;
                        }
                        i++;
                        break;
                default:
                        goto out;
                }
        }
out:
        *ret_in = i;
        *ret_out = o;
        return RP_OK;
}

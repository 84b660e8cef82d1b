#include "lib/http1.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* A chunk-size line with extensions is a few bytes from paddockd; this is generous. */
#define MAX_CHUNK_LINE 4096u
/* A chunk size, and a Content-Length, must fit in 63 bits (2^63 - 1 = 16 hex digits' worth). */
#define MAX_SIZE ((uint64_t)INT64_MAX)

void http1_init(struct http1 *p)
{
        *p = (struct http1){.state = HTTP1_STATUS};
}

void http1_done(struct http1 *p)
{
        free(p->line);
        p->line = NULL;
        p->line_len = p->line_cap = 0;
}

static int fail(struct http1 *p, int err, const char *why)
{
        p->state = HTTP1_FAILED;
        p->why = why;
        p->error = err;
        return err;
}

static bool is_digit(char c)
{
        return c >= '0' && c <= '9';
}

static int hex_value(char c)
{
        if (is_digit(c))
                return c - '0';
        if (c >= 'a' && c <= 'f')
                return c - 'a' + 10;
        if (c >= 'A' && c <= 'F')
                return c - 'A' + 10;
        return -1;
}

/* RFC 9110 tchar: the characters of a header name or a token. */
static bool is_tchar(char c)
{
        if (is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
                return true;
        return c && strchr("!#$%&'*+-.^_`|~", c);
}

/* Field content and reason phrases: visible characters, obs-text, space and tab; no controls. */
static bool text_ok(const char *s, size_t len)
{
        for (size_t i = 0; i < len; i++) {
                unsigned char c = (unsigned char)s[i];
                if ((c < 0x20 && c != '\t') || c == 0x7f)
                        return false;
        }
        return true;
}

static bool is_ows(char c)
{
        return c == ' ' || c == '\t';
}

/* Take bytes up to and including the next LF into p->line, at most limit bytes in the line.
 * 1 with a whole line (its CRLF cut off, NUL-terminated), 0 when more bytes are needed. */
static int take_line(struct http1 *p, const char *data, size_t len, size_t limit,
                     const char *too_long, int too_long_err, size_t *ret_used)
{
        const char *nl = memchr(data, '\n', len);
        size_t n = nl ? (size_t)(nl - data) + 1 : len;
        if (p->line_len + n > limit)
                return fail(p, too_long_err, too_long);
        if (p->line_len + n + 1 > p->line_cap) {
                size_t cap = p->line_cap ? p->line_cap : 256;
                while (cap < p->line_len + n + 1)
                        cap *= 2;
                char *b = realloc(p->line, cap);
                if (!b)
                        return fail(p, -ENOMEM, "out of memory");
                p->line = b;
                p->line_cap = cap;
        }
        memcpy(p->line + p->line_len, data, n);
        p->line_len += n;
        *ret_used = n;
        if (!nl)
                return 0;
        if (p->line_len < 2 || p->line[p->line_len - 2] != '\r')
                return fail(p, -EPROTO, "a line of the response does not end in CRLF");
        p->line_len -= 2;
        p->line[p->line_len] = 0;
        return 1;
}

/* "HTTP/1.1 200 OK": version, three digits, and a reason (possibly empty). */
static int parse_status_line(struct http1 *p, const char *s, size_t len)
{
        if (len < 12 || strncmp(s, "HTTP/1.", 7) != 0 || (s[7] != '0' && s[7] != '1') ||
            s[8] != ' ' || !is_digit(s[9]) || !is_digit(s[10]) || !is_digit(s[11]))
                return fail(p, -EPROTO, "malformed status line");
        int status = (s[9] - '0') * 100 + (s[10] - '0') * 10 + (s[11] - '0');
        if (status < 100 || status > 599)
                return fail(p, -EPROTO, "status code out of range");
        if (len > 12 && (s[12] != ' ' || !text_ok(s + 13, len - 13)))
                return fail(p, -EPROTO, "malformed status line");
        p->status = status;
        p->http_minor = s[7] - '0';
        /* Headers of an interim response say nothing about the final one. */
        p->chunked = p->has_length = p->close = false;
        p->length = 0;
        return 0;
}

static int parse_content_length(struct http1 *p, const char *v, size_t len)
{
        if (len == 0)
                return fail(p, -EPROTO, "empty Content-Length");
        uint64_t n = 0;
        for (size_t i = 0; i < len; i++) {
                if (!is_digit(v[i]))
                        return fail(p, -EPROTO, "malformed Content-Length");
                if (n > (MAX_SIZE - (uint64_t)(v[i] - '0')) / 10)
                        return fail(p, -EPROTO, "Content-Length too large");
                n = n * 10 + (uint64_t)(v[i] - '0');
        }
        if (p->has_length && p->length != n)
                return fail(p, -EPROTO, "conflicting Content-Length headers");
        p->has_length = true;
        p->length = n;
        return 0;
}

/* Does the comma-separated list v contain token (case-insensitively)? */
static bool list_has(const char *v, size_t len, const char *token)
{
        size_t tlen = strlen(token);
        size_t i = 0;
        while (i < len) {
                while (i < len && (is_ows(v[i]) || v[i] == ','))
                        i++;
                size_t start = i;
                while (i < len && v[i] != ',')
                        i++;
                size_t end = i;
                while (end > start && is_ows(v[end - 1]))
                        end--;
                if (end - start == tlen && strncasecmp(v + start, token, tlen) == 0)
                        return true;
        }
        return false;
}

/* "Name: value". Only the fields that frame the body matter; the rest are checked and dropped
 * (so are trailer fields, when trailer is set). */
static int parse_field(struct http1 *p, const char *s, size_t len, bool trailer)
{
        if (len > 0 && is_ows(s[0]))
                return fail(p, -EPROTO, "folded header line");
        size_t name_len = 0;
        while (name_len < len && is_tchar(s[name_len]))
                name_len++;
        if (name_len == 0 || name_len == len || s[name_len] != ':')
                return fail(p, -EPROTO, "malformed header line");
        const char *v = s + name_len + 1;
        size_t vlen = len - name_len - 1;
        while (vlen && is_ows(v[0]))
                v++, vlen--;
        while (vlen && is_ows(v[vlen - 1]))
                vlen--;
        if (!text_ok(v, vlen))
                return fail(p, -EPROTO, "control character in a header value");
        if (trailer)
                return 0;
        /* Interim responses' fields are not the final response's. */
        if (p->on_field && (p->status >= 200 || (p->status == 101 && p->upgrade))) {
                int r = p->on_field(s, name_len, v, vlen, p->field_data);
                if (r < 0)
                        return fail(p, r, "the receiver stopped the transfer");
        }
#define NAME_IS(lit) (name_len == sizeof(lit) - 1 && strncasecmp(s, lit, name_len) == 0)
        if (NAME_IS("Content-Length"))
                return parse_content_length(p, v, vlen);
        if (NAME_IS("Transfer-Encoding")) {
                /* We decode no other coding; "chunked" must be the only one, given once. */
                if (p->chunked || vlen != 7 || strncasecmp(v, "chunked", 7) != 0)
                        return fail(p, -EPROTO, "unsupported Transfer-Encoding");
                p->chunked = true;
        } else if (NAME_IS("Connection")) {
                if (list_has(v, vlen, "close"))
                        p->close = true;
        }
#undef NAME_IS
        return 0;
}

/* The empty line after the headers: an interim response ends here, a final one says how its
 * body is framed (RFC 9112 §6.3). */
static int end_of_head(struct http1 *p)
{
        if (p->status == 101 && p->upgrade) {
                /* Switched: whatever follows is the new protocol's, however it is framed. */
                p->state = HTTP1_DONE;
                return 0;
        }
        if (p->status < 200) {
                if (p->status == 101)
                        return fail(p, -EPROTO, "unexpected 101 Switching Protocols");
                p->state = HTTP1_STATUS;
                return 0;
        }
        if (p->chunked && p->has_length)
                return fail(p, -EPROTO, "both Content-Length and Transfer-Encoding");
        if (p->chunked && p->http_minor == 0)
                return fail(p, -EPROTO, "chunked body in an HTTP/1.0 response");
        if (p->head_request || p->status == 204 || p->status == 304)
                p->state = HTTP1_DONE;
        else if (p->chunked)
                p->state = HTTP1_CHUNK_SIZE;
        else if (p->has_length)
                p->state = p->length ? HTTP1_BODY_LENGTH : HTTP1_DONE;
        else
                p->state = HTTP1_BODY_CLOSE;
        p->left = p->length;
        return 0;
}

/* "1a2b", optionally followed by extensions ";name=value" that are ignored. */
static int parse_chunk_size(struct http1 *p, const char *s, size_t len)
{
        uint64_t n = 0;
        size_t i = 0;
        for (; i < len && hex_value(s[i]) >= 0; i++) {
                if (n > (MAX_SIZE >> 4))
                        return fail(p, -EPROTO, "chunk size too large");
                n = n << 4 | (uint64_t)hex_value(s[i]);
        }
        if (i == 0)
                return fail(p, -EPROTO, "malformed chunk size");
        size_t j = i;
        while (j < len && is_ows(s[j]))
                j++;
        if (j < len && (s[j] != ';' || !text_ok(s + j, len - j)))
                return fail(p, -EPROTO, "malformed chunk size");
        if (j == len && j != i)
                return fail(p, -EPROTO, "malformed chunk size"); /* trailing blanks alone */
        if (n == 0) {
                p->state = HTTP1_TRAILER;
                p->head_bytes = 0;
        } else {
                p->state = HTTP1_CHUNK_DATA;
                p->left = n;
        }
        return 0;
}

static int on_line(struct http1 *p)
{
        const char *s = p->line;
        size_t len = p->line_len;
        switch (p->state) {
        case HTTP1_STATUS:
                if (parse_status_line(p, s, len) < 0)
                        return -EPROTO;
                p->state = HTTP1_HEADER;
                return 0;
        case HTTP1_HEADER:
                return len == 0 ? end_of_head(p) : parse_field(p, s, len, false);
        case HTTP1_CHUNK_SIZE:
                return parse_chunk_size(p, s, len);
        case HTTP1_CHUNK_END:
                if (len != 0)
                        return fail(p, -EPROTO, "chunk longer than its size");
                p->state = HTTP1_CHUNK_SIZE;
                return 0;
        case HTTP1_TRAILER:
                if (len == 0) {
                        p->state = HTTP1_DONE;
                        return 0;
                }
                return parse_field(p, s, len, true);
        case HTTP1_BODY_LENGTH:
        case HTTP1_BODY_CLOSE:
        case HTTP1_CHUNK_DATA:
        case HTTP1_DONE:
        case HTTP1_FAILED:
                break;
        }
        return fail(p, -EPROTO, "internal parser error");
}

/* Assemble one line of the current state from data. */
static int feed_line(struct http1 *p, const char *data, size_t len, size_t *ret_used)
{
        size_t limit;
        const char *too_long;
        int err = -EPROTO;
        switch (p->state) {
        case HTTP1_STATUS:
        case HTTP1_HEADER:
        case HTTP1_TRAILER: {
                /* The whole head (or trailer) counts, not each line. */
                const char *what = p->state == HTTP1_TRAILER ? "response trailer larger than 64 KiB"
                                                             : "response head larger than 64 KiB";
                size_t room = HTTP1_MAX_HEAD - p->head_bytes;
                const char *nl = memchr(data, '\n', len);
                size_t n = nl ? (size_t)(nl - data) + 1 : len;
                if (n > room)
                        return fail(p, -E2BIG, what);
                limit = HTTP1_MAX_HEAD;
                too_long = what;
                err = -E2BIG;
                break;
        }
        case HTTP1_CHUNK_SIZE:
                limit = MAX_CHUNK_LINE;
                too_long = "chunk-size line too long";
                break;
        case HTTP1_CHUNK_END:
                limit = 2;
                too_long = "chunk longer than its size";
                break;
        case HTTP1_BODY_LENGTH:
        case HTTP1_BODY_CLOSE:
        case HTTP1_CHUNK_DATA:
        case HTTP1_DONE:
        case HTTP1_FAILED:
        default:
                return fail(p, -EPROTO, "internal parser error");
        }
        int r = take_line(p, data, len, limit, too_long, err, ret_used);
        if (r < 0)
                return r;
        if (p->state == HTTP1_STATUS || p->state == HTTP1_HEADER || p->state == HTTP1_TRAILER)
                p->head_bytes += *ret_used;
        if (r == 0)
                return 0;
        r = on_line(p);
        p->line_len = 0;
        return r;
}

int http1_feed(struct http1 *p, const char *data, size_t len, http1_body_fn on_body,
               void *userdata)
{
        if (p->state == HTTP1_FAILED)
                return p->error;
        if (len > 0)
                p->saw_bytes = true;
        p->used = 0;
        while (len > 0 && p->state != HTTP1_DONE) {
                size_t n;
                int r;
                switch (p->state) {
                case HTTP1_BODY_LENGTH:
                case HTTP1_CHUNK_DATA:
                case HTTP1_BODY_CLOSE:
                        n = len;
                        if (p->state != HTTP1_BODY_CLOSE && p->left < n)
                                n = (size_t)p->left;
                        r = on_body ? on_body(data, n, userdata) : 0;
                        if (r < 0)
                                return fail(p, r, "the receiver stopped the transfer");
                        if (p->state != HTTP1_BODY_CLOSE) {
                                p->left -= n;
                                if (p->left == 0)
                                        p->state = p->state == HTTP1_BODY_LENGTH ? HTTP1_DONE
                                                                                 : HTTP1_CHUNK_END;
                        }
                        break;
                case HTTP1_STATUS:
                case HTTP1_HEADER:
                case HTTP1_CHUNK_SIZE:
                case HTTP1_CHUNK_END:
                case HTTP1_TRAILER:
                case HTTP1_DONE:
                case HTTP1_FAILED:
                default:
                        r = feed_line(p, data, len, &n);
                        if (r < 0)
                                return r;
                        break;
                }
                data += n;
                len -= n;
                p->used += n;
        }
        return 0;
}

int http1_eof(struct http1 *p)
{
        switch (p->state) {
        case HTTP1_DONE:
                return 0;
        case HTTP1_BODY_CLOSE:
                p->state = HTTP1_DONE;
                return 0;
        case HTTP1_FAILED:
                return p->error;
        case HTTP1_STATUS:
        case HTTP1_HEADER:
                return fail(p, -EPROTO, p->saw_bytes ? "connection closed inside the response head"
                                                     : "connection closed without a response");
        case HTTP1_BODY_LENGTH:
                return fail(p, -EPROTO, "connection closed before the end of the response body");
        case HTTP1_CHUNK_SIZE:
        case HTTP1_CHUNK_DATA:
        case HTTP1_CHUNK_END:
        case HTTP1_TRAILER:
                break;
        }
        return fail(p, -EPROTO, "connection closed before the last chunk of the response body");
}

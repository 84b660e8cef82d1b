/* See jsonwrite.h: jansson's compact, ASCII-only output, without its per-value snprintf. */
#include "lib/jsonwrite.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define DEPTH_MAX 64

typedef int (*put_fn)(const char *, size_t, void *);

static int emit(put_fn put, void *data, const char *s, size_t n)
{
        return n && put(s, n, data) ? -EIO : 0;
}

/* One UTF-8 sequence at s (n bytes left): its length, and the code point; 0 if invalid
 * (overlong forms, surrogates and values above U+10FFFF included, as jansson refuses them). */
static size_t utf8_next(const unsigned char *s, size_t n, uint32_t *cp)
{
        unsigned char c = s[0];
        size_t len;
        uint32_t v;
        if (c < 0x80) {
                *cp = c;
                return 1;
        }
        if (c >= 0xC2 && c <= 0xDF) {
                len = 2;
                v = c & 0x1F;
        } else if (c >= 0xE0 && c <= 0xEF) {
                len = 3;
                v = c & 0x0F;
        } else if (c >= 0xF0 && c <= 0xF4) {
                len = 4;
                v = c & 0x07;
        } else
                return 0;
        if (n < len)
                return 0;
        for (size_t i = 1; i < len; i++) {
                if ((s[i] & 0xC0) != 0x80)
                        return 0;
                v = (v << 6) | (s[i] & 0x3F);
        }
        if ((len == 3 && (v < 0x800 || (v >= 0xD800 && v <= 0xDFFF))) ||
            (len == 4 && (v < 0x10000 || v > 0x10FFFF)))
                return 0;
        *cp = v;
        return len;
}

static const char hex[] = "0123456789ABCDEF";

static void u_escape(char *out, uint32_t u)
{
        out[0] = '\\';
        out[1] = 'u';
        out[2] = hex[(u >> 12) & 0xF];
        out[3] = hex[(u >> 8) & 0xF];
        out[4] = hex[(u >> 4) & 0xF];
        out[5] = hex[u & 0xF];
}

/* Runs of plain ASCII go out in one put; escapes as jansson writes them (\uXXXX uppercase,
 * UTF-16 surrogate pairs above the BMP). */
static int write_string(const char *str, size_t len, put_fn put, void *data)
{
        const unsigned char *s = (const unsigned char *)str;
        size_t run = 0, i = 0;
        if (emit(put, data, "\"", 1) < 0)
                return -EIO;
        while (i < len) {
                uint32_t cp;
                size_t k = utf8_next(s + i, len - i, &cp);
                if (!k)
                        return -EINVAL;
                if (cp >= 0x20 && cp <= 0x7F && cp != '"' && cp != '\\') {
                        i += k;
                        continue;
                }
                if (emit(put, data, str + run, i - run) < 0)
                        return -EIO;
                char seq[12];
                size_t n = 2;
                seq[0] = '\\';
                switch (cp) {
                case '"': seq[1] = '"'; break;
                case '\\': seq[1] = '\\'; break;
                case '\b': seq[1] = 'b'; break;
                case '\f': seq[1] = 'f'; break;
                case '\n': seq[1] = 'n'; break;
                case '\r': seq[1] = 'r'; break;
                case '\t': seq[1] = 't'; break;
                default:
                        if (cp < 0x10000) {
                                u_escape(seq, cp);
                                n = 6;
                        } else {
                                uint32_t v = cp - 0x10000;
                                u_escape(seq, 0xD800 | (v >> 10));
                                u_escape(seq + 6, 0xDC00 | (v & 0x3FF));
                                n = 12;
                        }
                }
                if (emit(put, data, seq, n) < 0)
                        return -EIO;
                i += k;
                run = i;
        }
        if (emit(put, data, str + run, len - run) < 0 || emit(put, data, "\"", 1) < 0)
                return -EIO;
        return 0;
}

static int write_integer(json_int_t v, put_fn put, void *data)
{
        char buf[24];
        char *p = buf + sizeof(buf);
        /* unsigned arithmetic: the most negative value has no positive counterpart */
        unsigned long long u = v < 0 ? 0ull - (unsigned long long)v : (unsigned long long)v;
        do {
                *--p = (char)('0' + u % 10);
                u /= 10;
        } while (u);
        if (v < 0)
                *--p = '-';
        return emit(put, data, p, (size_t)(buf + sizeof(buf) - p));
}

struct put_ctx {
        put_fn put;
        void *data;
};

static int put_through(const char *s, size_t n, void *data)
{
        const struct put_ctx *c = data;
        return c->put(s, n, c->data);
}

static int write_value(const json_t *j, put_fn put, void *data, int depth)
{
        if (depth > DEPTH_MAX)
                return -EINVAL;
        switch (json_typeof(j)) {
        case JSON_OBJECT: {
                const char *key;
                json_t *v;
                bool first = true;
                if (emit(put, data, "{", 1) < 0)
                        return -EIO;
                json_object_foreach((json_t *)j, key, v)
                {
                        int r;
                        if ((!first && emit(put, data, ",", 1) < 0))
                                return -EIO;
                        first = false;
                        if ((r = write_string(key, strlen(key), put, data)) < 0)
                                return r;
                        if (emit(put, data, ":", 1) < 0)
                                return -EIO;
                        if ((r = write_value(v, put, data, depth + 1)) < 0)
                                return r;
                }
                return emit(put, data, "}", 1);
        }
        case JSON_ARRAY: {
                size_t i;
                json_t *v;
                if (emit(put, data, "[", 1) < 0)
                        return -EIO;
                json_array_foreach((json_t *)j, i, v)
                {
                        int r;
                        if (i && emit(put, data, ",", 1) < 0)
                                return -EIO;
                        if ((r = write_value(v, put, data, depth + 1)) < 0)
                                return r;
                }
                return emit(put, data, "]", 1);
        }
        case JSON_STRING:
                return write_string(json_string_value(j), json_string_length(j), put, data);
        case JSON_INTEGER:
                return write_integer(json_integer_value(j), put, data);
        case JSON_REAL: {
                /* jansson's own formatting ("%.17g", ".0" added, exponent trimmed) */
                struct put_ctx c = {put, data};
                return json_dump_callback(j, put_through, &c, JSON_COMPACT | JSON_ENCODE_ANY)
                           ? -EINVAL
                           : 0;
        }
        case JSON_TRUE:
                return emit(put, data, "true", 4);
        case JSON_FALSE:
                return emit(put, data, "false", 5);
        case JSON_NULL:
                return emit(put, data, "null", 4);
        }
        return -EINVAL;
}

int json_write_compact(const json_t *j, int (*put)(const char *, size_t, void *), void *data)
{
        if (!j || !put)
                return -EINVAL;
        return write_value(j, put, data, 0);
}

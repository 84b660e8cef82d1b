#include "cli/lines.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static int reserve(struct lines *l, size_t need)
{
        if (need <= l->cap)
                return 0;
        size_t cap = l->cap ? l->cap : 4096;
        while (cap < need)
                cap *= 2;
        char *n = realloc(l->buf, cap);
        if (!n)
                return -ENOMEM;
        l->buf = n;
        l->cap = cap;
        return 0;
}

int lines_feed(struct lines *l, const char *data, size_t len, lines_fn fn, void *userdata)
{
        while (len > 0) {
                const char *nl = memchr(data, '\n', len);
                size_t take = nl ? (size_t)(nl - data) : len;
                if (l->len + take > l->max)
                        return -E2BIG;
                int r = reserve(l, l->len + take + 1);
                if (r < 0)
                        return r;
                memcpy(l->buf + l->len, data, take);
                l->len += take;
                if (!nl)
                        return 0;
                l->buf[l->len] = 0;
                size_t line_len = l->len;
                l->len = 0;
                r = fn(l->buf, line_len, userdata);
                if (r < 0)
                        return r;
                data += take + 1;
                len -= take + 1;
        }
        return 0;
}

int lines_finish(struct lines *l, lines_fn fn, void *userdata)
{
        if (l->len == 0)
                return 0;
        l->buf[l->len] = 0;
        size_t line_len = l->len;
        l->len = 0;
        return fn(l->buf, line_len, userdata);
}

void lines_done(struct lines *l)
{
        free(l->buf);
        l->buf = NULL;
        l->len = l->cap = 0;
}

#include "lib/strbuf.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define STRBUF_FIRST_CAP 4096u

int strbuf_add(struct strbuf *b, const void *p, size_t n)
{
        if (n >= (size_t)-1 / 2 - b->len)
                return -ENOMEM;
        if (b->cap - b->len < n + 1) {
                size_t cap = b->cap ? b->cap : STRBUF_FIRST_CAP;
                while (cap - b->len < n + 1)
                        cap *= 2;
                char *grown = realloc(b->data, cap);
                if (!grown)
                        return -ENOMEM;
                b->data = grown;
                b->cap = cap;
        }
        if (n)
                memcpy(b->data + b->len, p, n);
        b->len += n;
        b->data[b->len] = 0;
        return 0;
}

void strbuf_free(struct strbuf *b)
{
        free(b->data);
        *b = (struct strbuf){0};
}

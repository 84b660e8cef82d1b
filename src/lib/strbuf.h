/* A growable byte buffer whose text stays NUL-terminated: answers, bodies and listings that
 * are built piece by piece. The capacity doubles, so building n bytes copies O(n). */
#pragma once
#include <stddef.h>

struct strbuf {
        char *data; /* NULL until the first byte; then data[len] == 0 */
        size_t len, cap;
};

/* Append n bytes of p. -ENOMEM leaves the buffer as it was. */
int strbuf_add(struct strbuf *b, const void *p, size_t n);
/* Free the bytes; the buffer is empty again. */
void strbuf_free(struct strbuf *b);

/* Split a byte stream that arrives in arbitrary pieces into '\n'-terminated lines (NDJSON).
 * A line may span any number of pieces; only an incomplete tail is kept between calls. */
#pragma once

#include <stddef.h>

struct lines {
        char *buf;
        size_t len, cap;
        size_t max; /* longest line accepted */
};

/* Called for each line, without its '\n' and NUL-terminated; < 0 stops the stream. */
typedef int (*lines_fn)(char *line, size_t len, void *userdata);

/* Feed a piece. 0, or the callback's error, or -E2BIG for a line longer than max, -ENOMEM. */
int lines_feed(struct lines *l, const char *data, size_t len, lines_fn fn, void *userdata);
/* End of stream: hands over a last line that lacked its '\n'. */
int lines_finish(struct lines *l, lines_fn fn, void *userdata);
void lines_done(struct lines *l);

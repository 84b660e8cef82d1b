/* json_write_compact writes exactly what jansson's JSON_COMPACT | JSON_ENSURE_ASCII dump does. */
#include "lib/jsonwrite.h"
#include "unit.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct buf {
        char s[8192];
        size_t len;
};

static int put(const char *s, size_t n, void *data)
{
        struct buf *b = data;
        if (b->len + n >= sizeof(b->s))
                return -1;
        memcpy(b->s + b->len, s, n);
        b->len += n;
        b->s[b->len] = 0;
        return 0;
}

static void same_as_jansson(json_t *j)
{
        struct buf b = {.len = 0};
        CHECK_EQ_INT(json_write_compact(j, put, &b), 0);
        char *want = json_dumps(j, JSON_COMPACT | JSON_ENSURE_ASCII | JSON_ENCODE_ANY);
        CHECK(want != NULL);
        if (want)
                CHECK_EQ_STR(b.s, want);
        free(want);
        json_decref(j);
}

static void test_jsonwrite__same_as_jansson(void)
{
        same_as_jansson(json_object());
        same_as_jansson(json_array());
        same_as_jansson(json_pack("{s:i,s:I,s:I,s:I,s:n,s:b,s:b}", "zero", 0, "big",
                                  (json_int_t)9223372036854775807LL, "min",
                                  (json_int_t)(-9223372036854775807LL - 1), "neg", (json_int_t)-42,
                                  "null", "t", 1, "f", 0));
        same_as_jansson(json_pack("[f,f,f,f,f,f]", 1.0, 0.5, 0.1, 1e300, -2.5e-7, 123456789.0));
        same_as_jansson(json_pack("{s:s,s:s,s:s,s:s}", "quote\"back\\slash", "a\"b\\c/d",
                                  "ctl", "\b\f\n\r\t\x01\x1f\x7f", "utf8", "h\xc3\xa9 \xe2\x82\xac",
                                  "astral", "\xf0\x9f\x98\x80 x"));
        same_as_jansson(json_pack("{s:{s:[i,{s:s},[]],s:{}},s:[s,n]}", "a", "b", 1, "c", "d",
                                  "e", "f", "g", "\xc3\xa9"));
        /* insertion order, as jansson keeps it */
        json_t *o = json_object();
        for (int i = 20; i > 0; i--) {
                char k[8];
                snprintf(k, sizeof(k), "k%d", i);
                json_object_set_new(o, k, json_integer(i));
        }
        same_as_jansson(o);
}

static int refuse(const char *s, size_t n, void *data)
{
        (void)s;
        (void)n;
        (void)data;
        return 1;
}

static void test_jsonwrite__errors(void)
{
        json_t *j = json_pack("[i]", 1);
        CHECK_EQ_INT(json_write_compact(j, refuse, NULL), -EIO);
        CHECK_EQ_INT(json_write_compact(NULL, refuse, NULL), -EINVAL);
        json_decref(j);
        /* deeper than 64 levels */
        json_t *deep = json_array();
        for (int i = 0; i < 70; i++) {
                json_t *a = json_array();
                json_array_append_new(a, deep);
                deep = a;
        }
        struct buf *b = calloc(1, sizeof(*b));
        CHECK_EQ_INT(json_write_compact(deep, put, b), -EINVAL);
        free(b);
        json_decref(deep);
}

int main(void)
{
        RUN(test_jsonwrite__same_as_jansson);
        RUN(test_jsonwrite__errors);
        UNIT_EXIT();
}

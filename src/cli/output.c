#include "cli/output.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TABLE_MAX_COLS 16

struct table {
        size_t n_cols, n_rows, cap_rows;
        char **cells; /* n_rows+1 rows of n_cols; row 0 holds the headers */
};

void output_json(const json_t *j)
{
        json_dumpf(j, stdout, JSON_INDENT(2));
        fputc('\n', stdout);
}

void output_raw(const struct response *r)
{
        if (!r->body || r->len == 0)
                return;
        fwrite(r->body, 1, r->len, stdout);
        if (r->body[r->len - 1] != '\n')
                fputc('\n', stdout);
}

void output_object(const struct response *r, bool raw)
{
        if (raw || !r->json)
                output_raw(r);
        else
                output_json(r->json);
}

struct table *table_new(const char *const *headers, size_t n_cols)
{
        if (n_cols == 0 || n_cols > TABLE_MAX_COLS)
                return NULL;
        struct table *t = calloc(1, sizeof(*t));
        if (!t)
                return NULL;
        t->n_cols = n_cols;
        if (table_add(t, headers) < 0) {
                table_free(t);
                return NULL;
        }
        return t;
}

int table_add(struct table *t, const char *const *cells)
{
        if (t->n_rows == t->cap_rows) {
                size_t cap = t->cap_rows ? t->cap_rows * 2 : 16;
                char **n = realloc(t->cells, cap * t->n_cols * sizeof(char *));
                if (!n)
                        return -1;
                t->cells = n;
                t->cap_rows = cap;
        }
        char **row = t->cells + t->n_rows * t->n_cols;
        for (size_t i = 0; i < t->n_cols; i++) {
                row[i] = strdup(cells[i] ? cells[i] : "-");
                if (!row[i]) {
                        while (i-- > 0)
                                free(row[i]);
                        return -1;
                }
        }
        t->n_rows++;
        return 0;
}

void table_print(const struct table *t)
{
        size_t width[TABLE_MAX_COLS] = {};
        for (size_t r = 0; r < t->n_rows; r++)
                for (size_t c = 0; c < t->n_cols; c++) {
                        size_t w = strlen(t->cells[r * t->n_cols + c]);
                        if (w > width[c])
                                width[c] = w;
                }
        for (size_t r = 0; r < t->n_rows; r++) {
                for (size_t c = 0; c < t->n_cols; c++) {
                        const char *cell = t->cells[r * t->n_cols + c];
                        if (c + 1 == t->n_cols)
                                printf("%s\n", cell); /* no trailing blanks */
                        else
                                printf("%-*s  ", (int)width[c], cell);
                }
        }
}

void table_free(struct table *t)
{
        if (!t)
                return;
        for (size_t i = 0; i < t->n_rows * t->n_cols; i++)
                free(t->cells[i]);
        free(t->cells);
        free(t);
}

const char *human_size(uint64_t bytes, char *buf, size_t len)
{
        static const char units[] = "KMGTPE";
        if (bytes < 1024) {
                snprintf(buf, len, "%" PRIu64 "B", bytes);
                return buf;
        }
        double v = (double)bytes / 1024;
        size_t u = 0;
        while (v >= 1024 && u + 1 < sizeof(units) - 1) {
                v /= 1024;
                u++;
        }
        /* One decimal below 10 ("1.5G"), whole numbers above ("512M"); drop a ".0". */
        if (v < 10 && (uint64_t)(v * 10 + 0.5) % 10 != 0)
                snprintf(buf, len, "%.1f%c", v, units[u]);
        else
                snprintf(buf, len, "%.0f%c", v, units[u]);
        return buf;
}

const char *human_rate(uint64_t bps, char *buf, size_t len)
{
        static const struct {
                uint64_t div;
                const char *unit;
        } units[] = {{1000000000, "gbit"}, {1000000, "mbit"}, {1000, "kbit"}};
        for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
                if (bps < units[i].div)
                        continue;
                /* Up to three decimals, so any rate typed as "1.5mbit" reads back the same. */
                char num[32];
                snprintf(num, sizeof(num), "%.3f", (double)bps / (double)units[i].div);
                char *end = num + strlen(num);
                while (end[-1] == '0')
                        *--end = 0;
                if (end[-1] == '.')
                        *--end = 0;
                snprintf(buf, len, "%s%s", num, units[i].unit);
                return buf;
        }
        snprintf(buf, len, "%" PRIu64 "bit", bps);
        return buf;
}

static const char *human_span(int64_t s, char *buf, size_t len, const char *pre, const char *post)
{
        if (s < 60)
                snprintf(buf, len, "%s%" PRId64 "s%s", pre, s, post);
        else if (s < 3600)
                snprintf(buf, len, "%s%" PRId64 "m%s", pre, s / 60, post);
        else if (s < 48 * 3600)
                snprintf(buf, len, "%s%" PRId64 "h%s", pre, s / 3600, post);
        else
                snprintf(buf, len, "%s%" PRId64 "d%s", pre, s / 86400, post);
        return buf;
}

const char *human_ago(time_t t, time_t now, char *buf, size_t len)
{
        int64_t s = (int64_t)now - (int64_t)t;
        if (s < 2) {
                snprintf(buf, len, "just now");
                return buf;
        }
        return human_span(s, buf, len, "", " ago");
}

const char *human_until(time_t t, time_t now, char *buf, size_t len)
{
        int64_t s = (int64_t)t - (int64_t)now;
        if (s <= 0) {
                snprintf(buf, len, "expired");
                return buf;
        }
        return human_span(s, buf, len, "in ", "");
}

int json_timestamp(const json_t *v, time_t *ret)
{
        if (json_is_integer(v)) {
                *ret = (time_t)json_integer_value(v);
                return 0;
        }
        const char *s = json_string_value(v);
        if (!s)
                return -1;
        struct tm tm = {};
        const char *p = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
        if (!p)
                return -1;
        if (*p == '.') /* fractional seconds */
                for (p++; *p >= '0' && *p <= '9'; p++)
                        ;
        long offset = 0;
        if (*p == '+' || *p == '-') {
                int hh, mm;
                if (sscanf(p + 1, "%2d:%2d", &hh, &mm) != 2)
                        return -1;
                offset = (hh * 3600L + mm * 60L) * (*p == '-' ? -1 : 1);
        } else if (*p != 'Z' && *p != 'z' && *p != 0) {
                return -1;
        }
        *ret = timegm(&tm) - offset;
        return 0;
}

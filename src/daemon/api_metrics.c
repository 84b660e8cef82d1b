/* GET /metrics, and the API's own counters: requests by method, route and status, and their
 * latency by route. See metrics.h.
 *
 * The counters live in arrays indexed by the route table's entries (api_route_at), made once
 * at the first request: counting a request is a pointer comparison per route, a few
 * additions and no allocation. */
#include "daemon/api.h"
#include "daemon/metrics.h"
#include "lib/util.h"

#include <math.h>

static const char *const methods[] = {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"};
#define METHOD_OTHER ELEMENTSOF(methods) /* "other": a method no route has */

/* Latency buckets (seconds): from a cached inspect to a long exec. */
static const double bucket_le[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                   0.1,    0.25,  0.5,    1,     2.5,  5,     10};
static const char *const bucket_text[] = {"0.0005", "0.001", "0.0025", "0.005", "0.01",
                                          "0.025",  "0.05",  "0.1",    "0.25",  "0.5",
                                          "1",      "2.5",   "5",      "10"};
#define N_BUCKETS (ELEMENTSOF(bucket_le) + 1) /* + the +Inf bucket */

/* (method, status) pairs seen on one route entry. A route answers a handful of statuses; a
 * pair beyond the table is counted with status "other". */
#define CELLS 24
struct cell {
        uint16_t status; /* 0: the "other" overflow cell */
        uint8_t method;
        uint64_t n;
};

struct route_counts {
        struct cell cells[CELLS];
        size_t n_cells;
        /* The latency histogram lives in the first entry of each pattern (pattern_slot). */
        uint64_t bucket[N_BUCKETS]; /* per bucket, not yet cumulative */
        double sum;
        uint64_t count;
};

/* One slot per route entry, and a last one for requests that matched no route. */
static struct route_counts *slots;
static size_t *pattern_slot; /* slot -> the first slot of the same pattern */
static size_t n_slots;

static bool slots_ready(void)
{
        if (slots)
                return true;
        size_t n = api_routes_count() + 1;
        struct route_counts *s = calloc(n, sizeof(*s));
        size_t *p = calloc(n, sizeof(*p));
        if (!s || !p) {
                free(s);
                free(p);
                return false;
        }
        for (size_t i = 0; i < n; i++) {
                p[i] = i;
                const struct api_route *ri = api_route_at(i);
                for (size_t j = 0; ri && j < i; j++)
                        if (!strcmp(api_route_at(j)->pattern, ri->pattern)) {
                                p[i] = j;
                                break;
                        }
        }
        slots = s;
        pattern_slot = p;
        n_slots = n;
        return true;
}

static size_t method_index(const char *m)
{
        for (size_t i = 0; i < ELEMENTSOF(methods); i++)
                if (!strcmp(methods[i], m))
                        return i;
        return METHOD_OTHER;
}

/* The slot of a request: the entry whose pattern api.c recorded (the very pointer) and
 * method; a route that takes other methods itself (ROUTE_OWN_METHODS) counts them on the
 * pattern's first entry. */
static size_t slot_of(const struct request *r)
{
        const char *pattern = req_route(r), *method = req_method(r);
        size_t first = n_slots - 1;
        for (size_t i = 0; i + 1 < n_slots; i++) {
                const struct api_route *ri = api_route_at(i);
                if (ri->pattern != pattern)
                        continue;
                if (!strcmp(ri->method, method))
                        return i;
                if (first == n_slots - 1)
                        first = i;
        }
        return first;
}

void metrics_request_done(const struct request *r)
{
        if (!slots_ready())
                return;
        struct route_counts *rc = &slots[slot_of(r)];
        uint8_t m = (uint8_t)method_index(req_method(r));
        unsigned status = req_status(r);
        struct cell *c = NULL;
        for (size_t i = 0; i < rc->n_cells && !c; i++)
                if (rc->cells[i].method == m && rc->cells[i].status == status)
                        c = &rc->cells[i];
        if (!c && rc->n_cells < CELLS - 1)
                c = &rc->cells[rc->n_cells++];
        if (!c) { /* full: the overflow cell, last */
                c = &rc->cells[CELLS - 1];
                rc->n_cells = CELLS;
                status = 0;
                m = METHOD_OTHER;
        }
        c->method = m;
        c->status = (uint16_t)status;
        c->n++;

        struct route_counts *h = &slots[pattern_slot[rc - slots]];
        double t = req_elapsed_s(r);
        if (!isfinite(t) || t < 0)
                t = 0;
        size_t b = 0;
        while (b < ELEMENTSOF(bucket_le) && t > bucket_le[b])
                b++;
        h->bucket[b]++;
        h->sum += t;
        h->count++;
}

static const char *slot_route(size_t i)
{
        const struct api_route *ri = api_route_at(i);
        return ri ? ri->pattern : "none";
}

static void write_requests(FILE *f)
{
        fputs("# HELP paddock_api_requests_total API requests answered, by method, route pattern "
              "and status code.\n# TYPE paddock_api_requests_total counter\n",
              f);
        for (size_t i = 0; slots && i < n_slots; i++)
                for (size_t k = 0; k < slots[i].n_cells; k++) {
                        const struct cell *c = &slots[i].cells[k];
                        if (!c->n)
                                continue;
                        fprintf(f, "paddock_api_requests_total{method=\"%s\",route=\"",
                                c->method < METHOD_OTHER ? methods[c->method] : "other");
                        metrics_label_value(f, slot_route(i));
                        if (c->status)
                                fprintf(f, "\",code=\"%u\"} %llu\n", c->status,
                                        (unsigned long long)c->n);
                        else
                                fprintf(f, "\",code=\"other\"} %llu\n", (unsigned long long)c->n);
                }
        fputs("# HELP paddock_api_request_duration_seconds Time from a request's head to its end "
              "(for streams and terminals: the whole session), by route pattern.\n"
              "# TYPE paddock_api_request_duration_seconds histogram\n",
              f);
        for (size_t i = 0; slots && i < n_slots; i++) {
                const struct route_counts *h = &slots[i];
                if (pattern_slot[i] != i || !h->count)
                        continue;
                uint64_t cum = 0;
                for (size_t b = 0; b < N_BUCKETS; b++) {
                        cum += h->bucket[b];
                        fputs("paddock_api_request_duration_seconds_bucket{route=\"", f);
                        metrics_label_value(f, slot_route(i));
                        fprintf(f, "\",le=\"%s\"} %llu\n",
                                b < ELEMENTSOF(bucket_text) ? bucket_text[b] : "+Inf",
                                (unsigned long long)cum);
                }
                fputs("paddock_api_request_duration_seconds_sum{route=\"", f);
                metrics_label_value(f, slot_route(i));
                fprintf(f, "\"} %.6f\n", h->sum);
                fputs("paddock_api_request_duration_seconds_count{route=\"", f);
                metrics_label_value(f, slot_route(i));
                fprintf(f, "\"} %llu\n", (unsigned long long)h->count);
        }
}

/* ---------------------------------------------------------------- the response */

struct text {
        char *buf;
        size_t len, off;
};

static ssize_t text_read(void *data, char *buf, size_t max)
{
        struct text *t = data;
        size_t n = take_pending(buf, max, t->buf, t->len, &t->off);
        return n ? (ssize_t)n : -1;
}

static void text_closed(void *data)
{
        struct text *t = data;
        free(t->buf);
        free(t);
}

static const struct http_stream_ops text_ops = {.read = text_read, .closed = text_closed};

/* A scrape in progress: the environments' readings are taken by an engine_pass (a slice per
 * turn of the loop), the text is written when the last is in. */
struct scrape {
        struct request *r;
        struct caller c;
        struct metrics_envs *m;
        struct engine_pass *pass;
        int err;
};

static void scrape_free(struct scrape *s)
{
        engine_pass_cancel(s->pass);
        metrics_envs_free(s->m);
        free(s);
}

static void scrape_each(struct engine *e, struct env *v, void *data)
{
        struct scrape *s = data;
        if (!s->err && caller_sees_env(&s->c, v))
                s->err = metrics_envs_add(s->m, e, v);
}

static void scrape_gone(void *data) /* the client hung up first */
{
        scrape_free(data);
}

/* An agent token sees its own environments' series and nothing daemon-wide (how many
 * environments others have, which routes they call). */
static void scrape_done(struct engine *e, void *data)
{
        struct scrape *s = data;
        struct request *r = s->r;
        s->pass = NULL;
        req_on_free(r, NULL, NULL);
        struct text *t = s->err ? NULL : calloc(1, sizeof(*t));
        FILE *f = t ? open_memstream(&t->buf, &t->len) : NULL;
        if (!f) {
                free(t);
                http_reply_errno(r, s->err ? s->err : -ENOMEM, "metrics");
                scrape_free(s);
                return;
        }
        int rr = metrics_envs_write(s->m, f);
        if (s->c.admin) {
                metrics_write_daemon(e, s->m, f);
                write_requests(f);
        }
        scrape_free(s);
        if (fclose(f) != 0 || rr < 0) {
                text_closed(t);
                http_reply_errno(r, -ENOMEM, "metrics");
                return;
        }
        http_reply_stream(r, 200, "text/plain; version=0.0.4; charset=utf-8", &text_ops, t);
}

void api_metrics(struct request *r, struct engine *e)
{
        struct scrape *s = calloc(1, sizeof(*s));
        if (!s || !(s->m = metrics_envs_new())) {
                free(s);
                http_reply_errno(r, -ENOMEM, "metrics");
                return;
        }
        s->r = r;
        api_caller(r, &s->c);
        struct engine_pass *p;
        int rr = engine_pass_start(e, s->c.admin ? NULL : s->c.token, scrape_each, scrape_done,
                                   s, &p);
        if (rr < 0) {
                scrape_free(s);
                http_reply_errno(r, rr, "metrics");
                return;
        }
        if (!p)
                return; /* done already (scrape_done answered and freed s) */
        s->pass = p;
        req_on_free(r, scrape_gone, s);
        http_defer(r);
}

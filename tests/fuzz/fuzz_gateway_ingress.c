/* Preview URLs in the gateway (src/gateway/ingress.c) on any head the parser accepts: the Host
 * match yields only a lowercase name of label characters and a port 1..65535, and the head an
 * environment receives fits the loop's bound, parses again, and carries none of Paddock's
 * credentials (no e2b-traffic-access-token, no paddock_token cookie, no Bearer pdk_). */
#include "fuzz.h"
#include "gateway/ingress.h"
#include "gateway/reqparse.h"

#include <ctype.h>
#include <strings.h>

static char out[2 * RP_HEAD_MAX + 256];
static char loc[RP_LINE_MAX + 1];

static bool has_field(const struct rp_head *h, const char *name, const char *value_part)
{
        size_t n = strlen(name);
        for (size_t i = 0; i < h->n_fields; i++) {
                const struct rp_field *f = &h->fields[i];
                if (f->name_len != n || strncasecmp(f->name, name, n) != 0)
                        continue;
                if (!value_part || memmem(f->value, f->value_len, value_part, strlen(value_part)))
                        return true;
        }
        return false;
}

/* A Cookie field with a pair named exactly paddock_token. */
static bool has_paddock_cookie(const struct rp_head *h)
{
        for (size_t i = 0; i < h->n_fields; i++) {
                const struct rp_field *f = &h->fields[i];
                if (f->name_len != 6 || strncasecmp(f->name, "cookie", 6) != 0)
                        continue;
                const char *p = f->value, *end = f->value + f->value_len;
                while (p < end) {
                        while (p < end && (*p == ' ' || *p == '\t'))
                                p++;
                        if ((size_t)(end - p) >= 14 && memcmp(p, "paddock_token=", 14) == 0)
                                return true;
                        const char *semi = memchr(p, ';', (size_t)(end - p));
                        p = semi ? semi + 1 : end;
                }
        }
        return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct rp_head h;
        if (reqparse_head((const char *)data, size, &h) != RP_OK)
                return 0;
        struct ingress_target t;
        if (ingress_match(&h, "preview.test", &t)) {
                FUZZ_ASSERT(t.port >= 1 && t.port <= 65535);
                FUZZ_ASSERT(t.env[0] && strlen(t.env) <= INGRESS_NAME_MAX);
                for (const char *p = t.env; *p; p++)
                        FUZZ_ASSERT(islower((unsigned char)*p) || isdigit((unsigned char)*p) ||
                                    *p == '-' || *p == '_');
        }
        const char *v;
        size_t n;
        if (ingress_secret(&h, &v, &n))
                FUZZ_ASSERT(n > 4 && memcmp(v, "pdk_", 4) == 0 && n <= RP_SECRET_MAX);
        if (ingress_query_secret(&h, &v, &n, loc, sizeof(loc))) {
                FUZZ_ASSERT(loc[0] == '/' && strlen(loc) < h.target_len);
                const char *q = strchr(loc, '?');
                for (const char *p = q; p; p = strchr(p + 1, '&'))
                        FUZZ_ASSERT(strncmp(p + 1, "paddock_token=", 14) != 0);
        }
        (void)ingress_traffic_token(&h, &v, &n);

        /* The loop emits into an empty 32 KiB buffer, heads are at most 16 KiB. */
        ssize_t k = ingress_emit_head(&h, "192.0.2.1", size & 1, out, sizeof(out));
        FUZZ_ASSERT(k > 0);
        /* It parses again, where our own limits leave room for the fields we add (an
         * environment's server has limits of its own). */
        if (h.n_fields > RP_HEADERS_MAX - 4 || h.head_len + 256 > RP_HEAD_MAX)
                return 0;
        struct rp_head again;
        FUZZ_ASSERT(reqparse_head(out, (size_t)k, &again) == RP_OK);
        FUZZ_ASSERT((size_t)k == again.head_len);
        FUZZ_ASSERT(!has_field(&again, "e2b-traffic-access-token", NULL));
        FUZZ_ASSERT(!has_paddock_cookie(&again));
        FUZZ_ASSERT(!has_field(&again, "paddock-peer", NULL));
        FUZZ_ASSERT(!reqparse_bearer(&again, &v, &n) || n < 4 || memcmp(v, "pdk_", 4) != 0);
        FUZZ_ASSERT(again.upgrade == h.upgrade && again.body == h.body);
        return 0;
}

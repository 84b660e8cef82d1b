/* Preview URLs, the gateway's pure part: see ingress.h. */
#include "gateway/ingress.h"
#include "lib/util.h"

#include <ctype.h>
#include <strings.h>

static bool field_is(const struct rp_field *f, const char *name)
{
        size_t n = strlen(name);
        return f->name_len == n && strncasecmp(f->name, name, n) == 0;
}

static const struct rp_field *field(const struct rp_head *h, const char *name)
{
        for (size_t i = 0; i < h->n_fields; i++)
                if (field_is(&h->fields[i], name))
                        return &h->fields[i];
        return NULL;
}

bool ingress_match(const struct rp_head *h, const char *domain, struct ingress_target *ret)
{
        const struct rp_field *f = field(h, "host");
        if (!f || !domain || !*domain)
                return false;
        const char *v = f->value;
        size_t n = f->value_len;
        /* An optional :PORT (the listener's). */
        const char *colon = memchr(v, ':', n);
        if (colon) {
                size_t k = n - (size_t)(colon + 1 - v);
                if (k == 0 || k > 5)
                        return false;
                for (size_t i = 0; i < k; i++)
                        if (!isdigit((unsigned char)colon[1 + i]))
                                return false;
                n = (size_t)(colon - v);
        }
        size_t dl = strlen(domain);
        if (n < dl + 2 || v[n - dl - 1] != '.' || strncasecmp(v + n - dl, domain, dl) != 0)
                return false;
        size_t label = n - dl - 1; /* PORT-NAME */
        size_t p = 0;
        unsigned port = 0;
        while (p < label && isdigit((unsigned char)v[p]) && p < 5)
                port = port * 10 + (unsigned)(v[p++] - '0');
        if (p == 0 || p >= label || v[p] != '-' || v[0] == '0' || port < 1 || port > 65535)
                return false;
        size_t name_len = label - p - 1;
        if (name_len == 0 || name_len > INGRESS_NAME_MAX)
                return false;
        const char *name = v + p + 1;
        if (!isalnum((unsigned char)name[0]))
                return false;
        for (size_t i = 0; i < name_len; i++) {
                unsigned char ch = (unsigned char)name[i];
                if (!isalnum(ch) && ch != '-' && ch != '_')
                        return false;
                ret->env[i] = (char)tolower(ch);
        }
        ret->env[name_len] = '\0';
        ret->port = port;
        return true;
}

bool ingress_is_envd(const struct rp_head *h, const struct ingress_target *t)
{
        return t->port == INGRESS_ENVD_PORT && field(h, "e2b-sandbox-id") != NULL;
}

static bool is_secret_char(unsigned char c)
{
        return isalnum(c) || c == '-' || c == '_';
}

/* One cookie-pair at s[0..n): NAME=VALUE, the value of paddock_token if it is that one. */
static bool cookie_pair(const char *s, size_t n, const char **ret, size_t *ret_len)
{
        static const char key[] = "paddock_token=";
        if (n < sizeof(key) - 1 || memcmp(s, key, sizeof(key) - 1) != 0)
                return false;
        *ret = s + sizeof(key) - 1;
        *ret_len = n - (sizeof(key) - 1);
        return true;
}

static void trim(const char **s, size_t *n)
{
        while (*n && (**s == ' ' || **s == '\t'))
                (*s)++, (*n)--;
        while (*n && ((*s)[*n - 1] == ' ' || (*s)[*n - 1] == '\t'))
                (*n)--;
}

static bool looks_like_secret(const char *s, size_t n)
{
        if (n < 5 || n > RP_SECRET_MAX || memcmp(s, "pdk_", 4) != 0)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!is_secret_char((unsigned char)s[i]))
                        return false;
        return true;
}

static bool paddock_bearer(const struct rp_head *h, const char **ret, size_t *ret_len)
{
        const char *s;
        size_t n;
        if (!reqparse_bearer(h, &s, &n) || !looks_like_secret(s, n))
                return false;
        *ret = s;
        *ret_len = n;
        return true;
}

bool ingress_secret(const struct rp_head *h, const char **ret, size_t *ret_len)
{
        if (paddock_bearer(h, ret, ret_len))
                return true;
        for (size_t i = 0; i < h->n_fields; i++) {
                const struct rp_field *f = &h->fields[i];
                if (!field_is(f, "cookie"))
                        continue;
                const char *p = f->value, *end = f->value + f->value_len;
                while (p < end) {
                        const char *semi = memchr(p, ';', (size_t)(end - p));
                        const char *s = p;
                        size_t n = (size_t)((semi ? semi : end) - p);
                        trim(&s, &n);
                        const char *v;
                        size_t vn;
                        if (cookie_pair(s, n, &v, &vn) && looks_like_secret(v, vn)) {
                                *ret = v;
                                *ret_len = vn;
                                return true;
                        }
                        p = semi ? semi + 1 : end;
                }
        }
        return false;
}

bool ingress_query_secret(const struct rp_head *h, const char **ret, size_t *ret_len, char *loc,
                          size_t cap)
{
        static const char key[] = "paddock_token=";
        const char *t = h->target, *end = h->target + h->target_len;
        const char *q = memchr(t, '?', h->target_len);
        if (!q || cap == 0)
                return false;
        const char *found = NULL;
        size_t found_len = 0;
        size_t n = (size_t)(q - t);
        if (n >= cap)
                return false;
        memcpy(loc, t, n);
        char sep = '?';
        for (const char *p = q + 1; p <= end;) {
                const char *amp = memchr(p, '&', (size_t)(end - p));
                const char *pe = amp ? amp : end;
                size_t pl = (size_t)(pe - p);
                if (pl >= sizeof(key) - 1 && memcmp(p, key, sizeof(key) - 1) == 0) {
                        if (!found) { /* the first one counts; every one leaves the URL */
                                found = p + sizeof(key) - 1;
                                found_len = pl - (sizeof(key) - 1);
                        }
                } else if (pl > 0) {
                        if (n + 1 + pl >= cap)
                                return false;
                        loc[n++] = sep;
                        memcpy(loc + n, p, pl);
                        n += pl;
                        sep = '&';
                }
                p = pe + 1;
        }
        if (!found || !looks_like_secret(found, found_len))
                return false;
        loc[n] = '\0';
        if (n == 0) /* an absolute-form or asterisk target has no path of its own */
                return false;
        *ret = found;
        *ret_len = found_len;
        return true;
}

bool ingress_traffic_token(const struct rp_head *h, const char **ret, size_t *ret_len)
{
        const struct rp_field *f = field(h, "e2b-traffic-access-token");
        if (!f || f->value_len == 0 || f->value_len > INGRESS_TOKEN_MAX)
                return false;
        *ret = f->value;
        *ret_len = f->value_len;
        return true;
}

/* Beyond the hop-by-hop fields: what only the gateway states, and E2B's traffic token. */
static bool dropped(const struct rp_field *f)
{
        static const char *const names[] = {
                "x-forwarded-for", "x-forwarded-proto", "e2b-traffic-access-token", "cookie",
        };
        for (size_t i = 0; i < ELEMENTSOF(names); i++)
                if (field_is(f, names[i]))
                        return true;
        return false;
}

/* A Cookie field without its paddock_token pairs; nothing when none is left. */
static void put_cookie(struct rp_out *o, const struct rp_field *f)
{
        bool first = true;
        const char *p = f->value, *end = f->value + f->value_len;
        while (p < end) {
                const char *semi = memchr(p, ';', (size_t)(end - p));
                const char *s = p, *v;
                size_t n = (size_t)((semi ? semi : end) - p), vn;
                trim(&s, &n);
                if (n > 0 && !cookie_pair(s, n, &v, &vn)) {
                        rp_puts(o, first ? "Cookie: " : "; ");
                        rp_put(o, s, n);
                        first = false;
                }
                p = semi ? semi + 1 : end;
        }
        if (!first)
                rp_puts(o, "\r\n");
}

/* keep() of reqparse_emit_canonical: the Cookie field without Paddock's pairs, and no field
 * the environment must not see (data: the Authorization field to strip, or NULL). */
static bool ingress_keep(struct rp_out *o, const struct rp_field *f, void *data)
{
        if (field_is(f, "cookie"))
                put_cookie(o, f);
        return !dropped(f) && f != data;
}

ssize_t ingress_emit_head(const struct rp_head *h, const char *ip, bool tls, char *out, size_t cap)
{
        struct rp_out o = {.p = out, .cap = cap};
        const char *s;
        size_t n;
        /* Anything that looks like Paddock's stays out, a malformed one too. */
        bool strip_auth = reqparse_bearer(h, &s, &n) && n >= 4 && memcmp(s, "pdk_", 4) == 0;
        reqparse_emit_canonical(&o, h, ingress_keep, strip_auth ? (void *)h->authorization : NULL);
        rp_puts(&o, "X-Forwarded-For: ");
        rp_puts(&o, ip);
        rp_puts(&o, tls ? "\r\nX-Forwarded-Proto: https\r\n\r\n" : "\r\nX-Forwarded-Proto: http\r\n\r\n");
        return o.full ? -ENOSPC : (ssize_t)o.len;
}

#include "lib/curl_lazy.h"
#include "lib/jsonutil.h"
#include "lib/netaddr.h"
#include "lib/registry.h"
#include "lib/util.h"

#include <ctype.h>
#include <curl/curl.h>
#include <jansson.h>
#include <nettle/sha2.h>

#define MAX_TOKEN_RESPONSE (256u << 10)
#define MAX_ERROR_BODY     4096u
#define MAX_REDIRECTS      5

struct registry {
        CURL *curl;
        struct image_ref ref;
        const struct registry_policy *policy;
        char base[700]; /* scheme://host/v2/repository */
        char *auth;     /* "Authorization: Bearer ..." once we have a token */
        /* The request under way: may it connect anywhere; what open_socket refused. */
        bool any_address;
        bool refused;
        enum netaddr_class refused_class;
        char refused_addr[64];
};

/* Where a URL leads, as curl's parser (the one that connects) reads it. */
struct dest {
        char host[256];     /* lowercase; numeric forms normalized, IPv6 in brackets */
        unsigned port;      /* the one connected to (the scheme's default if none given) */
        bool port_given;    /* written in the URL */
        char hostport[300]; /* host[:port] as given, for messages */
        bool http;          /* plain http (else https) */
};

/* What one response brings: its headers of interest and its body, to memory or to a blob. */
struct transfer {
        char *ctype, *www_auth;
        /* memory */
        char *buf;
        size_t len, max;
        bool overflow;
        /* blob */
        int fd;
        uint64_t size, got;
        struct sha256_ctx sha;
        registry_progress_fn progress;
        void *progress_data;
        uint64_t last_report;
        bool too_big, write_failed;
        long status;
};

static const char manifest_types[] = "Accept: application/vnd.oci.image.index.v1+json, "
                                     "application/vnd.docker.distribution.manifest.list.v2+json, "
                                     "application/vnd.oci.image.manifest.v1+json, "
                                     "application/vnd.docker.distribution.manifest.v2+json";

/* ---------------------------------------------------------------- destinations */

static int url_dest(const char *url, struct dest *ret)
{
        CURLU *u = curl_url();
        char *scheme = NULL, *host = NULL, *port = NULL, *given = NULL;
        int r = -EINVAL;
        if (!u)
                return -ENOMEM;
        if (curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK ||
            curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
            curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK ||
            curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) != CURLUE_OK)
                goto out;
        if (curl_url_get(u, CURLUPART_PORT, &given, 0) != CURLUE_OK)
                given = NULL;
        struct dest d = {.port = (unsigned)atoi(port),
                         .port_given = given != NULL,
                         .http = !strcasecmp(scheme, "http")};
        if (!d.http && strcasecmp(scheme, "https") != 0) {
                r = -EPROTONOSUPPORT;
                goto out;
        }
        if (BUF_PRINTF(d.host, "%s", host) < 0 ||
            BUF_PRINTF(d.hostport, "%s%s%s", host, given ? ":" : "", given ? given : "") < 0) {
                r = -ENAMETOOLONG;
                goto out;
        }
        for (char *c = d.host; *c; c++)
                *c = (char)tolower((unsigned char)*c);
        *ret = d;
        r = 0;
out:
        curl_free(scheme);
        curl_free(host);
        curl_free(port);
        curl_free(given);
        curl_url_cleanup(u);
        return r;
}

/* HOST[:PORT], as an admin or an image reference writes it: nothing else a URL may hold
 * (user, path, query, percent-escapes, an IPv6 zone). */
static int hostport_dest(const char *hostport, const char *scheme, struct dest *ret)
{
        if (!*hostport || *hostport == ':' || strpbrk(hostport, "/?#@\\% \t\r\n"))
                return -EINVAL;
        _cleanup_free_ char *url = NULL;
        if (asprintf(&url, "%s://%s/", scheme, hostport) < 0)
                return -ENOMEM;
        struct dest d;
        int r = url_dest(url, &d);
        if (r == -ENOMEM)
                return r;
        if (r < 0 || (d.port_given && d.port == 0))
                return -EINVAL;
        *ret = d;
        return 0;
}

int registry_policy_add(struct registry_policy *p, const char *hostport, bool insecure)
{
        struct dest d;
        int r = curl_lazy_load(); /* its URL parser */
        if (r < 0)
                return r;
        r = hostport_dest(hostport, "https", &d);
        if (r < 0)
                return r;
        unsigned port = d.port_given ? d.port : 0;
        for (size_t i = 0; i < p->n; i++)
                if (p->allow[i].port == port && !strcmp(p->allow[i].host, d.host)) {
                        p->allow[i].insecure |= insecure;
                        return 0;
                }
        if (p->n >= REGISTRY_POLICY_MAX)
                return -E2BIG;
        struct registry_allow *a = &p->allow[p->n++];
        memcpy(a->host, d.host, sizeof(a->host));
        a->port = port;
        a->insecure = insecure;
        return 0;
}

const struct registry_allow *registry_policy_find(const struct registry_policy *p, const char *host,
                                                  unsigned port)
{
        for (size_t i = 0; p && i < p->n; i++)
                if ((p->allow[i].port == 0 || p->allow[i].port == port) &&
                    !strcasecmp(p->allow[i].host, host))
                        return &p->allow[i];
        return NULL;
}

bool registry_policy_insecure(const struct registry_policy *p, const char *hostport)
{
        struct dest d;
        if (!p->n)
                return false; /* and the daemon need not load libcurl's URL parser to know */
        if (hostport_dest(hostport, "http", &d) < 0)
                return false;
        const struct registry_allow *a = registry_policy_find(p, d.host, d.port);
        return a && a->insecure;
}

/* Before a request to url: its scheme must be https (http for an insecure host), and whether
 * it may connect to other than public addresses (open_socket) follows from its host. */
static int check_dest(struct registry *r, const char *url, const char *role, struct dest *ret,
                      char *err, size_t errlen)
{
        struct dest d;
        int k = url_dest(url, &d);
        if (k == -ENOMEM)
                return k;
        if (k < 0) {
                snprintf(err, errlen, "%s %.200s: %s", role, url,
                         k == -EPROTONOSUPPORT ? "only https URLs are followed"
                                               : "not a usable URL");
                return -EACCES;
        }
        const struct registry_allow *a = registry_policy_find(r->policy, d.host, d.port);
        if (d.http && !(a && a->insecure)) {
                snprintf(err, errlen,
                         "%s %s: plain http only to a registry named by paddockd "
                         "--insecure-registry %s",
                         role, d.hostport, d.hostport);
                return -EACCES;
        }
        r->any_address = a != NULL;
        *ret = d;
        return 0;
}

/* curl's socket for every connection it makes, with the address it is about to connect to:
 * the check that holds whatever a name resolved to (DNS rebinding included). */
static curl_socket_t open_socket(void *data, curlsocktype purpose, struct curl_sockaddr *a)
{
        struct registry *r = data;
        const struct sockaddr *sa = &a->addr;
        enum netaddr_class c = netaddr_classify(sa, a->addrlen);
        if (purpose != CURLSOCKTYPE_IPCXN || (c != NETADDR_PUBLIC && !r->any_address)) {
                r->refused = true;
                r->refused_class = c;
                netaddr_format(sa, a->addrlen, r->refused_addr, sizeof(r->refused_addr));
                return CURL_SOCKET_BAD;
        }
        int fd = socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
        return fd < 0 ? CURL_SOCKET_BAD : fd;
}

/* ---------------------------------------------------------------- requests */

int registry_open(const struct image_ref *ref, bool insecure, const struct registry_policy *policy,
                  struct registry **ret)
{
        int e = curl_lazy_load();
        if (e < 0)
                return e;
        if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
                return -ENOMEM;
        struct registry *r = calloc(1, sizeof(*r));
        if (!r || !(r->curl = curl_easy_init())) {
                free(r);
                return -ENOMEM;
        }
        r->ref = *ref;
        r->policy = policy;
        if (BUF_PRINTF(r->base, "%s://%s/v2/%s", insecure ? "http" : "https", ref->registry,
                       ref->repository) < 0) {
                registry_close(r);
                return -ENAMETOOLONG;
        }
        *ret = r;
        return 0;
}

void registry_close(struct registry *r)
{
        if (!r)
                return;
        curl_easy_cleanup(r->curl);
        free(r->auth);
        free(r);
}

/* Keep the value of a header (of the last response: redirects reset it). */
static size_t on_header(char *data, size_t size, size_t n, void *userdata)
{
        struct transfer *t = userdata;
        size_t len = size * n;
        if (len >= 5 && strncmp(data, "HTTP/", 5) == 0) {
                free(t->ctype);
                free(t->www_auth);
                t->ctype = t->www_auth = NULL;
                return len;
        }
        char **slot = NULL;
        size_t skip = 0;
        if (len > 13 && strncasecmp(data, "Content-Type:", 13) == 0)
                slot = &t->ctype, skip = 13;
        else if (len > 17 && strncasecmp(data, "WWW-Authenticate:", 17) == 0)
                slot = &t->www_auth, skip = 17;
        if (!slot || len > 8192)
                return len;
        const char *v = data + skip;
        size_t vlen = len - skip;
        while (vlen && isspace((unsigned char)*v))
                v++, vlen--;
        while (vlen && isspace((unsigned char)v[vlen - 1]))
                vlen--;
        free(*slot);
        *slot = strndup(v, vlen);
        return len;
}

static bool status_ok(struct transfer *t, CURL *c)
{
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &t->status);
        return t->status >= 200 && t->status < 300;
}

static size_t to_memory(struct transfer *t, const char *data, size_t len, size_t max)
{
        if (t->len + len > max) {
                t->overflow = true;
                return 0;
        }
        char *nb = realloc(t->buf, t->len + len + 1);
        if (!nb)
                return 0;
        t->buf = nb;
        memcpy(t->buf + t->len, data, len);
        t->len += len;
        t->buf[t->len] = 0;
        return len;
}

struct write_ctx {
        struct transfer *t;
        CURL *curl;
};

static size_t on_body(char *data, size_t size, size_t n, void *userdata)
{
        struct write_ctx *w = userdata;
        struct transfer *t = w->t;
        size_t len = size * n;
        if (!status_ok(t, w->curl)) /* an error page: keep a little of it for the message */
                return t->len + len > MAX_ERROR_BODY ? len
                                                     : to_memory(t, data, len, MAX_ERROR_BODY);
        if (t->fd < 0)
                return to_memory(t, data, len, t->max);
        if (t->got + len > t->size) {
                t->too_big = true;
                return 0;
        }
        if (write_all(t->fd, data, len) < 0) {
                t->write_failed = true;
                return 0;
        }
        sha256_update(&t->sha, len, (const uint8_t *)data);
        t->got += len;
        if (t->progress && (t->got - t->last_report >= (8u << 20) || t->got == t->size)) {
                t->last_report = t->got;
                t->progress(t->got, t->size, t->progress_data);
        }
        return len;
}

static void transfer_reset(struct transfer *t)
{
        free(t->ctype);
        free(t->www_auth);
        free(t->buf);
        t->ctype = t->www_auth = t->buf = NULL;
        t->len = 0;
        t->overflow = false;
}

/* One request to url as it stands (no redirects followed), auth sent when given. */
static CURLcode perform_once(struct registry *r, const char *url, const char *accept,
                             const char *auth, bool http, struct transfer *t)
{
        CURL *c = r->curl;
        curl_easy_reset(c);
        struct curl_slist *h = NULL;
        if (accept)
                h = curl_slist_append(h, accept);
        if (auth)
                h = curl_slist_append(h, auth);
        struct write_ctx w = {.t = t, .curl = c};
        r->refused = false;
        curl_easy_setopt(c, CURLOPT_URL, url);
        curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, http ? "http" : "https");
        curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "https");
        curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
        /* No proxy from the environment: it would resolve names where open_socket cannot look. */
        curl_easy_setopt(c, CURLOPT_PROXY, "");
        curl_easy_setopt(c, CURLOPT_OPENSOCKETFUNCTION, open_socket);
        curl_easy_setopt(c, CURLOPT_OPENSOCKETDATA, r);
        curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 30L);
        curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
        curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, 60L);
        curl_easy_setopt(c, CURLOPT_USERAGENT, "paddock");
        curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
        curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
        curl_easy_setopt(c, CURLOPT_HEADERDATA, t);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, &w);
        CURLcode rc = curl_easy_perform(c);
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &t->status);
        curl_slist_free_all(h);
        return rc;
}

/* GET url, following redirects here so that each hop is checked (check_dest) before curl
 * connects. role names the first hop in messages ("registry", "token realm"). The token goes
 * only to the origin of the first hop (a blob's storage host never sees it). A refused
 * destination is -EACCES with err set; otherwise 0 and curl's result in *ret_rc. */
static int perform(struct registry *r, const char *url, const char *accept, const char *role,
                   struct transfer *t, CURLcode *ret_rc, char *err, size_t errlen)
{
        _cleanup_free_ char *cur = strdup(url);
        struct dest first = {};
        if (!cur)
                return -ENOMEM;
        for (int hop = 0;; hop++) {
                struct dest d;
                const char *what = hop ? "redirect target" : role;
                int k = check_dest(r, cur, what, &d, err, errlen);
                if (k < 0)
                        return k;
                if (hop == 0)
                        first = d;
                bool same_origin =
                    d.http == first.http && d.port == first.port && !strcmp(d.host, first.host);
                CURLcode rc = perform_once(r, cur, accept, same_origin ? r->auth : NULL, d.http, t);
                /* Only a connection that failed can be blamed on a refused address: a host with
                 * a refused and an allowed address may connect and then fail for another reason. */
                if ((rc == CURLE_COULDNT_CONNECT || rc == CURLE_COULDNT_RESOLVE_HOST) &&
                    r->refused) {
                        snprintf(err, errlen,
                                 "%s %s resolves to a %s address (%s); paddockd --allow-registry "
                                 "%s allows it",
                                 what, d.hostport, netaddr_class_name(r->refused_class),
                                 r->refused_addr, d.hostport);
                        return -EACCES;
                }
                char *location = NULL;
                if (rc != CURLE_OK || t->status < 300 || t->status > 399 ||
                    curl_easy_getinfo(r->curl, CURLINFO_REDIRECT_URL, &location) != CURLE_OK ||
                    !location) {
                        *ret_rc = rc;
                        return 0;
                }
                if (hop == MAX_REDIRECTS) {
                        snprintf(err, errlen, "%s %s: more than %d redirects", role, first.hostport,
                                 MAX_REDIRECTS);
                        return -EIO;
                }
                free(cur);
                if (!(cur = strdup(location)))
                        return -ENOMEM;
                transfer_reset(t); /* the redirect's own headers and body */
        }
}

/* key="value" from a Bearer challenge, NULL when absent. */
static char *challenge_param(const char *ch, const char *key)
{
        size_t klen = strlen(key);
        for (const char *p = ch; (p = strcasestr(p, key)); p += klen) {
                if (p != ch && p[-1] != ' ' && p[-1] != ',')
                        continue;
                if (p[klen] != '=' || p[klen + 1] != '"')
                        continue;
                const char *v = p + klen + 2, *end = strchr(v, '"');
                return end ? strndup(v, (size_t)(end - v)) : NULL;
        }
        return NULL;
}

static bool token_valid(const char *t)
{
        if (!*t || strlen(t) > 16384)
                return false;
        for (; *t; t++)
                if (*t <= ' ' || *t > '~')
                        return false;
        return true;
}

/* Anonymous token from the realm the registry named (https, or http to an insecure host;
 * a destination like any other: perform checks it). */
static int fetch_token(struct registry *r, const char *challenge, char *err, size_t errlen)
{
        if (strncasecmp(challenge, "Bearer ", 7) != 0) {
                snprintf(err, errlen,
                         "registry wants %.40s authentication (only Bearer tokens "
                         "are supported)",
                         challenge);
                return -EACCES;
        }
        char *realm = challenge_param(challenge, "realm");
        char *service = challenge_param(challenge, "service");
        char *scope = challenge_param(challenge, "scope");
        int ret = -EACCES;
        char *url = NULL, *esc_service = NULL, *esc_scope = NULL;
        char default_scope[300];
        if (BUF_PRINTF(default_scope, "repository:%s:pull", r->ref.repository) < 0) {
                snprintf(err, errlen, "repository name too long");
                goto out;
        }
        if (!realm) {
                snprintf(err, errlen, "registry names no token realm");
                goto out;
        }
        esc_service = curl_easy_escape(r->curl, service ? service : "", 0);
        esc_scope = curl_easy_escape(r->curl, scope ? scope : default_scope, 0);
        if (!esc_service || !esc_scope ||
            asprintf(&url, "%s%cservice=%s&scope=%s", realm, strchr(realm, '?') ? '&' : '?',
                     esc_service, esc_scope) < 0) {
                url = NULL;
                ret = -ENOMEM;
                goto out;
        }
        struct transfer t = {.fd = -1, .max = MAX_TOKEN_RESPONSE};
        free(r->auth);
        r->auth = NULL;
        CURLcode rc = CURLE_OK;
        int k = perform(r, url, NULL, "token realm", &t, &rc, err, errlen);
        if (k < 0) {
                ret = k;
        } else if (rc != CURLE_OK || t.status != 200 || !t.buf) {
                snprintf(err, errlen, "token from %s: %s", realm,
                         rc != CURLE_OK ? curl_easy_strerror(rc) : "refused");
        } else {
                json_t *j = json_loads(t.buf, 0, NULL);
                const char *tok = json_string_value(json_object_get(j, "token"));
                if (!tok)
                        tok = json_string_value(json_object_get(j, "access_token"));
                if (!tok || !token_valid(tok)) {
                        snprintf(err, errlen, "token from %s: no usable token in the answer",
                                 realm);
                } else if (asprintf(&r->auth, "Authorization: Bearer %s", tok) < 0) {
                        r->auth = NULL;
                        ret = -ENOMEM;
                } else {
                        ret = 0;
                }
                json_decref(j);
        }
        transfer_reset(&t);
out:
        curl_free(esc_service);
        curl_free(esc_scope);
        free(url);
        free(realm);
        free(service);
        free(scope);
        return ret;
}

/* The message of a registry error answer ({"errors":[{"message":...}]}), or the status. */
static void error_text(const struct transfer *t, const char *what, char *err, size_t errlen)
{
        _cleanup_json_ json_t *j = t->buf ? json_loads(t->buf, 0, NULL) : NULL;
        const char *m = json_string_value(
            json_object_get(json_array_get(json_object_get(j, "errors"), 0), "message"));
        if (m)
                snprintf(err, errlen, "%s: %.200s (HTTP %ld)", what, m, t->status);
        else
                snprintf(err, errlen, "%s: HTTP %ld", what, t->status);
}

/* GET with one token round when the registry asks for it. t must be fresh. */
static int get(struct registry *r, const char *url, const char *accept, const char *what,
               struct transfer *t, char *err, size_t errlen)
{
        for (int attempt = 0;; attempt++) {
                CURLcode rc = CURLE_OK;
                int p = perform(r, url, accept, "registry", t, &rc, err, errlen);
                if (p < 0)
                        return p;
                if (t->status == 401 && attempt == 0 && t->www_auth) {
                        char *challenge = strdup(t->www_auth);
                        int k = challenge ? fetch_token(r, challenge, err, errlen) : -ENOMEM;
                        free(challenge);
                        if (k < 0)
                                return k;
                        transfer_reset(t);
                        if (t->fd >= 0) {
                                if (ftruncate(t->fd, 0) < 0 || lseek(t->fd, 0, SEEK_SET) < 0)
                                        return -errno;
                                sha256_init(&t->sha);
                                t->got = 0;
                        }
                        continue;
                }
                if (t->too_big) {
                        snprintf(err, errlen, "%s: longer than the %llu bytes announced", what,
                                 (unsigned long long)t->size);
                        return -EFBIG;
                }
                if (t->overflow) {
                        snprintf(err, errlen, "%s: larger than %zu bytes", what, t->max);
                        return -EFBIG;
                }
                if (t->write_failed) {
                        snprintf(err, errlen, "%s: cannot write: %s", what, strerror(errno));
                        return -EIO;
                }
                if (rc != CURLE_OK && !(t->status >= 400)) {
                        snprintf(err, errlen, "%s: %s", what, curl_easy_strerror(rc));
                        return -EIO;
                }
                if (t->status == 404) {
                        error_text(t, what, err, errlen);
                        return -ENOENT;
                }
                if (t->status == 401 || t->status == 403) {
                        error_text(t, what, err, errlen);
                        return -EACCES;
                }
                if (t->status < 200 || t->status >= 300) {
                        error_text(t, what, err, errlen);
                        return -EIO;
                }
                return 0;
        }
}

int registry_get_manifest(struct registry *r, const char *reference, char **ret_body,
                          size_t *ret_len, char **ret_type, char *err, size_t errlen)
{
        char url[1024], what[400];
        snprintf(what, sizeof(what), "manifest %s:%s", r->ref.repository, reference);
        if (BUF_PRINTF(url, "%s/manifests/%s", r->base, reference) < 0) {
                snprintf(err, errlen, "%s: URL too long", what);
                return -ENAMETOOLONG;
        }
        struct transfer t = {.fd = -1, .max = REGISTRY_MAX_MANIFEST};
        int k = get(r, url, manifest_types, what, &t, err, errlen);
        if (k >= 0 && !t.buf) {
                snprintf(err, errlen, "%s: empty answer", what);
                k = -EIO;
        }
        if (k < 0) {
                transfer_reset(&t);
                return k;
        }
        *ret_body = t.buf;
        *ret_len = t.len;
        *ret_type = t.ctype;
        t.buf = t.ctype = NULL;
        transfer_reset(&t);
        return 0;
}

int registry_get_blob(struct registry *r, const char *digest, uint64_t size, int fd,
                      registry_progress_fn progress, void *data, char *err, size_t errlen)
{
        if (!image_digest_valid(digest)) {
                snprintf(err, errlen, "unsupported digest %.80s", digest);
                return -EINVAL;
        }
        char url[1024], what[128];
        snprintf(what, sizeof(what), "blob %.19s", digest);
        if (BUF_PRINTF(url, "%s/blobs/%s", r->base, digest) < 0) {
                snprintf(err, errlen, "%s: URL too long", what);
                return -ENAMETOOLONG;
        }
        struct transfer t = {.fd = fd, .size = size, .progress = progress, .progress_data = data};
        sha256_init(&t.sha);
        int k = get(r, url, NULL, what, &t, err, errlen);
        transfer_reset(&t);
        if (k < 0)
                return k;
        if (t.got != size) {
                snprintf(err, errlen, "%s: %llu bytes instead of %llu", what,
                         (unsigned long long)t.got, (unsigned long long)size);
                return -EBADMSG;
        }
        uint8_t d[SHA256_DIGEST_SIZE];
        sha256_digest(&t.sha, sizeof(d), d);
        char hex[72] = "sha256:";
        for (size_t i = 0; i < sizeof(d); i++)
                sprintf(hex + 7 + 2 * i, "%02x", d[i]);
        if (strcmp(hex, digest) != 0) {
                snprintf(err, errlen, "%s: content does not match its digest (got %.19s)", what,
                         hex);
                return -EBADMSG;
        }
        return 0;
}

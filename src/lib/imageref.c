#include "lib/imageref.h"
#include "lib/util.h"
#include "lib/parse.h"

#include <ctype.h>
#include <nettle/sha2.h>
#include <stdint.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DOCKER_HUB "registry-1.docker.io"

void image_digest_of(const void *data, size_t len, char *buf)
{
        struct sha256_ctx c;
        uint8_t d[SHA256_DIGEST_SIZE];
        sha256_init(&c);
        sha256_update(&c, len, data);
        sha256_digest(&c, sizeof(d), d);
        strcpy(buf, "sha256:");
        for (size_t i = 0; i < sizeof(d); i++)
                sprintf(buf + 7 + 2 * i, "%02x", d[i]);
}

bool image_digest_valid(const char *d)
{
        if (strncmp(d, "sha256:", 7) != 0 || strlen(d) != 7 + 64)
                return false;
        for (const char *p = d + 7; *p; p++)
                if (!isdigit((unsigned char)*p) && !(*p >= 'a' && *p <= 'f'))
                        return false;
        return true;
}

static bool is_alnum_lower(char c)
{
        return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

/* [a-z0-9]+((\.|_|__|-+)[a-z0-9]+)* */
static bool component_valid(const char *s, size_t n)
{
        if (n == 0 || !is_alnum_lower(s[0]) || !is_alnum_lower(s[n - 1]))
                return false;
        for (size_t i = 0; i < n; i++) {
                if (is_alnum_lower(s[i]))
                        continue;
                if (s[i] == '.' && is_alnum_lower(s[i + 1]))
                        continue;
                if (s[i] == '_' &&
                    (is_alnum_lower(s[i + 1]) || (s[i + 1] == '_' && is_alnum_lower(s[i + 2])))) {
                        i += s[i + 1] == '_';
                        continue;
                }
                if (s[i] == '-')
                        continue;
                return false;
        }
        return true;
}

static bool repository_valid(const char *s)
{
        for (;;) {
                const char *slash = strchr(s, '/');
                size_t n = slash ? (size_t)(slash - s) : strlen(s);
                if (!component_valid(s, n))
                        return false;
                if (!slash)
                        return true;
                s = slash + 1;
        }
}

/* [A-Za-z0-9_][A-Za-z0-9_.-]{0,127} */
static bool tag_valid(const char *t)
{
        size_t n = strlen(t);
        if (n == 0 || n > 128 || t[0] == '.' || t[0] == '-')
                return false;
        for (size_t i = 0; i < n; i++)
                if (!isalnum((unsigned char)t[i]) && t[i] != '_' && t[i] != '.' && t[i] != '-')
                        return false;
        return true;
}

/* host[:port] with host a DNS name, an IPv4 address or [IPv6]. */
static bool registry_valid(const char *r)
{
        const char *port = NULL;
        if (r[0] == '[') {
                const char *end = strchr(r, ']');
                if (!end || end == r + 1)
                        return false;
                for (const char *p = r + 1; p < end; p++)
                        if (!isxdigit((unsigned char)*p) && *p != ':' && *p != '.')
                                return false;
                if (end[1] == ':')
                        port = end + 2;
                else if (end[1])
                        return false;
        } else {
                const char *colon = strchr(r, ':');
                size_t n = colon ? (size_t)(colon - r) : strlen(r);
                if (n == 0 || r[0] == '-' || r[0] == '.')
                        return false;
                for (size_t i = 0; i < n; i++)
                        if (!isalnum((unsigned char)r[i]) && r[i] != '-' && r[i] != '.')
                                return false;
                if (colon)
                        port = colon + 1;
        }
        if (port) {
                size_t n = strlen(port);
                if (n == 0 || n > 5 || strspn(port, "0123456789") != n || atoi(port) > 65535 ||
                    atoi(port) == 0)
                        return false;
        }
        return true;
}

bool image_host_is_loopback(const char *r)
{
        char host[256];
        if (BUF_PRINTF(host, "%s", r) < 0)
                return false; /* no loopback name is that long */
        if (host[0] == '[')
                return strncmp(host, "[::1]", 5) == 0;
        char *colon = strchr(host, ':');
        if (colon)
                *colon = 0;
        if (!strcmp(host, "localhost"))
                return true;
        unsigned a, b, c, d;
        char tail;
        return sscanf(host, "%u.%u.%u.%u%c", &a, &b, &c, &d, &tail) == 4 && a == 127 && b < 256 &&
               c < 256 && d < 256;
}

#define FAIL(...)                                                                                  \
        do {                                                                                       \
                snprintf(why, whylen, __VA_ARGS__);                                                \
                return -EINVAL;                                                                    \
        } while (0)

int image_ref_parse(const char *s, struct image_ref *ret, char *why, size_t whylen)
{
        struct image_ref r = {};
        char buf[512];
        if (!s || !*s)
                FAIL("empty reference");
        if (strlen(s) >= sizeof(buf) - 1)
                FAIL("reference too long");
        snprintf(buf, sizeof(buf), "%s", s);
        char *name = buf;
        char *at = strchr(name, '@');
        if (at) {
                *at = 0;
                if (!image_digest_valid(at + 1))
                        FAIL("digest must be sha256: and 64 lowercase hex digits");
                snprintf(r.digest, sizeof(r.digest), "%s", at + 1);
        }
        /* The registry: the first component, when it looks like a host. */
        char *slash = strchr(name, '/');
        if (slash) {
                *slash = 0;
                if (strchr(name, '.') || strchr(name, ':') || !strcmp(name, "localhost")) {
                        if (!registry_valid(name))
                                FAIL("invalid registry %s", name);
                        snprintf(r.registry, sizeof(r.registry), "%s", name);
                        name = slash + 1;
                } else {
                        *slash = '/';
                }
        }
        if (!r.registry[0] || !strcmp(r.registry, "docker.io") ||
            !strcmp(r.registry, "index.docker.io"))
                snprintf(r.registry, sizeof(r.registry), "%s", DOCKER_HUB);
        /* The tag: after the last ':' of what is left (a registry port is gone already). */
        char *colon = strrchr(name, ':');
        if (colon) {
                *colon = 0;
                if (!tag_valid(colon + 1))
                        FAIL("invalid tag %s", colon + 1);
                snprintf(r.tag, sizeof(r.tag), "%s", colon + 1);
        } else if (!r.digest[0]) {
                snprintf(r.tag, sizeof(r.tag), "latest");
        }
        if (!repository_valid(name))
                FAIL("invalid repository name %s (lowercase letters, digits, separators)", name);
        bool hub = !strcmp(r.registry, DOCKER_HUB);
        int n = snprintf(r.repository, sizeof(r.repository), "%s%s",
                         hub && !strchr(name, '/') ? "library/" : "", name);
        if (n < 0 || n >= (int)sizeof(r.repository))
                FAIL("repository name too long");
        r.loopback = image_host_is_loopback(r.registry);
        *ret = r;
        return 0;
}

int image_ref_default_name(const struct image_ref *r, char *buf, size_t len)
{
        const char *last = strrchr(r->repository, '/');
        last = last ? last + 1 : r->repository;
        char name[512];
        int n = r->tag[0] ? BUF_PRINTF(name, "%s-%s", last, r->tag)
                          : BUF_PRINTF(name, "%s-%.12s", last, r->digest + 7);
        if (n < 0 || !name_is_valid(name) || buf_printf(buf, len, "%s", name) < 0)
                return -EINVAL;
        return 0;
}

const char *image_ref_reference(const struct image_ref *r)
{
        return r->digest[0] ? r->digest : r->tag;
}

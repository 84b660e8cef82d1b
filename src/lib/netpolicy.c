#include "lib/netpolicy.h"
#include "lib/util.h"

#include <arpa/inet.h>
#include <ctype.h>

int netpolicy_mode_parse(const char *s, enum net_mode *ret)
{
        if (!s)
                return -EINVAL;
        if (!strcmp(s, "none"))
                *ret = NET_NONE;
        else if (!strcmp(s, "open"))
                *ret = NET_OPEN;
        else if (!strcmp(s, "allow"))
                *ret = NET_ALLOW;
        else
                return -EINVAL;
        return 0;
}

const char *netpolicy_mode_name(enum net_mode m)
{
        return m == NET_OPEN ? "open" : m == NET_ALLOW ? "allow" : "none";
}

static bool hostname_valid(const char *h)
{
        size_t len = strlen(h), label = 0;
        if (len == 0 || len > 253)
                return false;
        for (const char *p = h; *p; p++) {
                if (*p == '.') {
                        if (label == 0)
                                return false;
                        label = 0;
                        continue;
                }
                if (!isalnum((unsigned char)*p) && *p != '-' && *p != '_')
                        return false;
                if (++label > 63)
                        return false;
        }
        return label > 0;
}

/* "addr6[/n]" into r (CIDR, AF_INET6). */
static int parse_cidr6(char *s, struct allow_rule *r)
{
        char *slash = strchr(s, '/');
        if (slash)
                *slash = 0;
        if (inet_pton(AF_INET6, s, &r->addr6) != 1)
                return -EINVAL;
        r->kind = ALLOW_CIDR;
        r->family = AF_INET6;
        r->prefix = 128;
        if (slash) {
                char *end;
                errno = 0;
                unsigned long pre = strtoul(slash + 1, &end, 10);
                if (errno || *end || end == slash + 1 || !isdigit((unsigned char)slash[1]) ||
                    pre > 128)
                        return -EINVAL;
                r->prefix = (uint8_t)pre;
        }
        for (unsigned i = 0; i < 16; i++) {
                unsigned bits = r->prefix > i * 8 ? r->prefix - i * 8 : 0;
                r->addr6.s6_addr[i] &= bits >= 8 ? 0xff : (uint8_t)(0xff00 >> bits);
        }
        return 0;
}

static int parse_port(const char *s, uint16_t *ret)
{
        char *end;
        errno = 0;
        if (!isdigit((unsigned char)*s))
                return -EINVAL;
        unsigned long port = strtoul(s, &end, 10);
        if (errno || *end || port == 0 || port > 65535)
                return -EINVAL;
        *ret = (uint16_t)port;
        return 0;
}

int netpolicy_rule_parse(const char *s, struct allow_rule *ret)
{
        char buf[300];
        if (!s || strlen(s) >= sizeof(buf) || !*s)
                return -EINVAL;
        for (size_t i = 0; s[i]; i++)
                buf[i] = (char)tolower((unsigned char)s[i]);
        buf[strlen(s)] = 0;
        struct allow_rule r = {0};
        if (buf[0] == '[') {
                char *close = strchr(buf, ']');
                if (!close || (close[1] && close[1] != ':'))
                        return -EINVAL;
                if (close[1] && parse_port(close + 2, &r.port) < 0)
                        return -EINVAL;
                *close = 0;
                if (parse_cidr6(buf + 1, &r) < 0)
                        return -EINVAL;
                *ret = r;
                return 0;
        }
        char *first = strchr(buf, ':');
        if (first && strchr(first + 1, ':')) {
                if (parse_cidr6(buf, &r) < 0)
                        return -EINVAL;
                *ret = r;
                return 0;
        }
        char *colon = strrchr(buf, ':');
        if (colon) {
                char *end;
                errno = 0;
                unsigned long port = strtoul(colon + 1, &end, 10);
                if (errno || *end || end == colon + 1 || port == 0 || port > 65535)
                        return -EINVAL;
                r.port = (uint16_t)port;
                *colon = 0;
        }
        char *slash = strchr(buf, '/');
        if (slash)
                *slash = 0;
        if (inet_pton(AF_INET, buf, &r.addr) == 1) {
                r.kind = ALLOW_CIDR;
                r.family = AF_INET;
                r.prefix = 32;
                if (slash) {
                        char *end;
                        unsigned long pre = strtoul(slash + 1, &end, 10);
                        if (*end || end == slash + 1 || pre > 32)
                                return -EINVAL;
                        r.prefix = (uint8_t)pre;
                }
                uint32_t mask = r.prefix ? htonl(~0u << (32 - r.prefix)) : 0;
                r.addr.s_addr &= mask;
                *ret = r;
                return 0;
        }
        if (slash)
                return -EINVAL;
        const char *h = buf;
        if (!strncmp(h, "*.", 2)) {
                r.kind = ALLOW_WILDCARD;
                h += 2;
        } else {
                r.kind = ALLOW_HOST;
        }
        while (strlen(h) > 1 && h[strlen(h) - 1] == '.')
                ((char *)h)[strlen(h) - 1] = 0;
        if (!hostname_valid(h) || strlen(h) >= sizeof(r.host))
                return -EINVAL;
        memcpy(r.host, h, strlen(h) + 1);
        *ret = r;
        return 0;
}

void netpolicy_rule_format(const struct allow_rule *r, char *buf, size_t len)
{
        char port[8] = "";
        if (r->port)
                snprintf(port, sizeof(port), ":%u", r->port);
        if (r->kind == ALLOW_CIDR && r->family == AF_INET6) {
                char a[INET6_ADDRSTRLEN], pre[8] = "";
                inet_ntop(AF_INET6, &r->addr6, a, sizeof(a));
                if (r->prefix != 128)
                        snprintf(pre, sizeof(pre), "/%u", r->prefix);
                if (r->port)
                        snprintf(buf, len, "[%s%s]%s", a, pre, port);
                else
                        snprintf(buf, len, "%s%s", a, pre);
        } else if (r->kind == ALLOW_CIDR) {
                char a[INET_ADDRSTRLEN];
                inet_ntop(AF_INET, &r->addr, a, sizeof(a));
                if (r->prefix == 32)
                        snprintf(buf, len, "%s%s", a, port);
                else
                        snprintf(buf, len, "%s/%u%s", a, r->prefix, port);
        } else {
                snprintf(buf, len, "%s%s%s", r->kind == ALLOW_WILDCARD ? "*." : "", r->host, port);
        }
}

bool netpolicy_allows_name(const struct netpolicy *p, const char *qname, uint16_t *ret_port)
{
        size_t qlen = strlen(qname);
        for (size_t i = 0; i < p->n_rules; i++) {
                const struct allow_rule *r = &p->rules[i];
                bool match = false;
                if (r->kind == ALLOW_HOST) {
                        match = strcmp(qname, r->host) == 0;
                } else if (r->kind == ALLOW_WILDCARD) {
                        /* "*.example.com" matches any name below example.com, not itself. */
                        size_t hlen = strlen(r->host);
                        match = qlen > hlen + 1 && qname[qlen - hlen - 1] == '.' &&
                                strcmp(qname + qlen - hlen, r->host) == 0;
                }
                if (match) {
                        *ret_port = r->port;
                        return true;
                }
        }
        return false;
}

size_t netpolicy_cidrs(const struct netpolicy *p, struct nft_cidr_rule *out, size_t max)
{
        size_t n = 0;
        for (size_t i = 0; i < p->n_rules && n < max; i++)
                if (p->rules[i].kind == ALLOW_CIDR)
                        out[n++] = (struct nft_cidr_rule){.family = p->rules[i].family,
                                                          .addr = p->rules[i].addr,
                                                          .addr6 = p->rules[i].addr6,
                                                          .prefix = p->rules[i].prefix,
                                                          .port = p->rules[i].port};
        return n;
}

void netpolicy_clear(struct netpolicy *p)
{
        free(p->rules);
        free(p->links);
        p->rules = NULL;
        p->links = NULL;
        p->n_rules = p->n_links = 0;
}

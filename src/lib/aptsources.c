#include "lib/aptsources.h"
#include "lib/util.h"

#include <dirent.h>
#include <errno.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define APT_FILE_MAX (1u << 20) /* a sources file larger than this is not one */

static bool is_space(char c)
{
        return c == ' ' || c == '\t';
}

/* Does the space-separated list contain word? */
static bool has_word(const char *list, size_t len, const char *word)
{
        size_t wl = strlen(word);
        for (size_t i = 0; i < len;) {
                while (i < len && is_space(list[i]))
                        i++;
                size_t s = i;
                while (i < len && !is_space(list[i]))
                        i++;
                if (i - s == wl && memcmp(list + s, word, wl) == 0)
                        return true;
        }
        return false;
}

/* A release suite: "bookworm", "stable", "sid"; not a pocket ("bookworm-security",
 * "bookworm-updates") or an old-style "bookworm/updates". */
static bool has_release_suite(const char *list, size_t len)
{
        for (size_t i = 0; i < len;) {
                while (i < len && is_space(list[i]))
                        i++;
                size_t s = i;
                bool plain = true;
                while (i < len && !is_space(list[i])) {
                        if (list[i] == '-' || list[i] == '/')
                                plain = false;
                        i++;
                }
                if (i > s && plain)
                        return true;
        }
        return false;
}

static bool usable_uri(const char *u, size_t len)
{
        return (len > 7 && strncmp(u, "http://", 7) == 0) ||
               (len > 8 && strncmp(u, "https://", 8) == 0);
}

static int take_uri(const char *u, size_t len, char *uri, size_t size)
{
        while (len > 0 && u[len - 1] == '/')
                len--;
        if (len + 1 > size)
                return -ENAMETOOLONG;
        memcpy(uri, u, len);
        uri[len] = 0;
        return 0;
}

/* One-line format: deb [ options ] uri suite [component...] */
static int one_line(const char *line, size_t len, char *uri, size_t size)
{
        size_t i = 0;
        while (i < len && is_space(line[i]))
                i++;
        if (len - i < 4 || strncmp(line + i, "deb", 3) != 0 || !is_space(line[i + 3]))
                return -ENOENT; /* a comment, deb-src, or nothing */
        i += 3;
        while (i < len && is_space(line[i]))
                i++;
        if (i < len && line[i] == '[') {
                const char *close = memchr(line + i, ']', len - i);
                if (!close)
                        return -ENOENT;
                i = (size_t)(close - line) + 1;
        }
        while (i < len && is_space(line[i]))
                i++;
        size_t us = i;
        while (i < len && !is_space(line[i]))
                i++;
        size_t ue = i;
        while (i < len && is_space(line[i]))
                i++;
        size_t ss = i;
        while (i < len && !is_space(line[i]))
                i++;
        size_t se = i;
        if (!usable_uri(line + us, ue - us) || !has_release_suite(line + ss, se - ss) ||
            !has_word(line + i, len - i, "main"))
                return -ENOENT;
        return take_uri(line + us, ue - us, uri, size);
}

/* A deb822 field: its value with continuation lines joined by spaces (into buf). */
struct stanza {
        char types[256], uris[1024], suites[512], components[512], enabled[16];
};

static void add_value(char *dst, size_t size, const char *v, size_t len)
{
        while (len > 0 && is_space(*v))
                v++, len--;
        while (len > 0 && is_space(v[len - 1]))
                len--;
        size_t have = strlen(dst);
        if (have && have + 1 < size)
                dst[have++] = ' ';
        size_t n = len < size - have - 1 ? len : size - have - 1;
        memcpy(dst + have, v, n);
        dst[have + n] = 0;
}

static char *field_of(struct stanza *s, const char *name, size_t len, size_t *ret_size)
{
        static const struct {
                const char *name;
                size_t off, size;
        } fields[] = {
                {"Types", offsetof(struct stanza, types), sizeof(((struct stanza *)0)->types)},
                {"URIs", offsetof(struct stanza, uris), sizeof(((struct stanza *)0)->uris)},
                {"Suites", offsetof(struct stanza, suites), sizeof(((struct stanza *)0)->suites)},
                {"Components", offsetof(struct stanza, components),
                 sizeof(((struct stanza *)0)->components)},
                {"Enabled", offsetof(struct stanza, enabled), sizeof(((struct stanza *)0)->enabled)},
        };
        for (size_t i = 0; i < ELEMENTSOF(fields); i++)
                if (strlen(fields[i].name) == len && strncasecmp(fields[i].name, name, len) == 0) {
                        *ret_size = fields[i].size;
                        return (char *)s + fields[i].off;
                }
        return NULL;
}

static int stanza_mirror(const struct stanza *s, char *uri, size_t size)
{
        if (!has_word(s->types, strlen(s->types), "deb") || strcasecmp(s->enabled, "no") == 0 ||
            !has_release_suite(s->suites, strlen(s->suites)) ||
            !has_word(s->components, strlen(s->components), "main"))
                return -ENOENT;
        const char *u = s->uris;
        size_t len = strlen(u);
        for (size_t i = 0; i < len;) {
                while (i < len && is_space(u[i]))
                        i++;
                size_t st = i;
                while (i < len && !is_space(u[i]))
                        i++;
                if (usable_uri(u + st, i - st))
                        return take_uri(u + st, i - st, uri, size);
        }
        return -ENOENT;
}

/* One stanza ends: does it name a mirror? Then clear it for the next. */
static int stanza_end(struct stanza *s, bool *any, char *uri, size_t size)
{
        int r = *any ? stanza_mirror(s, uri, size) : -ENOENT;
        memset(s, 0, sizeof(*s));
        *any = false;
        return r;
}

static int deb822(const char *text, char *uri, size_t size)
{
        struct stanza s = {0};
        char *cur = NULL; /* the field that continuation lines extend */
        size_t cur_size = 0;
        bool any = false;
        for (const char *p = text; *p;) {
                const char *nl = strchr(p, '\n');
                size_t len = nl ? (size_t)(nl - p) : strlen(p);
                while (len > 0 && p[len - 1] == '\r')
                        len--;
                size_t lead = 0;
                while (lead < len && is_space(p[lead]))
                        lead++;
                if (lead == len) { /* a blank line ends a stanza */
                        int r = stanza_end(&s, &any, uri, size);
                        if (r != -ENOENT)
                                return r;
                        cur = NULL;
                } else if (p[0] == '#') {
                        /* a comment, also between the lines of a stanza */
                } else if (lead > 0) {
                        if (cur)
                                add_value(cur, cur_size, p, len);
                } else {
                        const char *colon = memchr(p, ':', len);
                        cur = colon ? field_of(&s, p, (size_t)(colon - p), &cur_size) : NULL;
                        if (cur)
                                add_value(cur, cur_size, colon + 1, len - (size_t)(colon + 1 - p));
                        any = true;
                }
                if (!nl)
                        break;
                p = nl + 1;
        }
        return stanza_end(&s, &any, uri, size);
}

int apt_mirror_in_text(const char *text, int is_deb822, char *uri, size_t uri_size)
{
        if (is_deb822)
                return deb822(text, uri, uri_size);
        for (const char *p = text; *p;) {
                const char *nl = strchr(p, '\n');
                size_t len = nl ? (size_t)(nl - p) : strlen(p);
                while (len > 0 && p[len - 1] == '\r')
                        len--;
                const char *hash = memchr(p, '#', len);
                int r = one_line(p, hash ? (size_t)(hash - p) : len, uri, uri_size);
                if (r != -ENOENT)
                        return r;
                if (!nl)
                        break;
                p = nl + 1;
        }
        return -ENOENT;
}

static int from_file(const char *path, int is_deb822, char *uri, size_t size, char *from,
                     size_t from_size)
{
        /* Admin-owned files; symlinks are fine, anything but a regular file is not a source. */
        _cleanup_close_ int fd = open_regular(path);
        if (fd < 0)
                return fd == -EINVAL ? -ENOENT : fd;
        _cleanup_free_ char *text = malloc(APT_FILE_MAX);
        if (!text)
                return -ENOMEM;
        ssize_t n = read_full(fd, text, APT_FILE_MAX - 1);
        if (n < 0)
                return (int)n;
        text[n] = 0;
        int r = apt_mirror_in_text(text, is_deb822, uri, size);
        if (r == 0)
                snprintf(from, from_size, "%s", path);
        return r;
}

/* apt's own rule for sources.list.d names: letters, digits, _ - . and the right suffix. */
static int suffix_kind(const char *name)
{
        size_t n = strlen(name);
        if (strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.") != n)
                return -1;
        if (n > 5 && strcmp(name + n - 5, ".list") == 0)
                return 0;
        if (n > 8 && strcmp(name + n - 8, ".sources") == 0)
                return 1;
        return -1;
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
        return strcmp((*a)->d_name, (*b)->d_name);
}

int apt_host_mirror(const char *apt_dir, char *uri, size_t uri_size, char *from,
                    size_t from_size)
{
        _cleanup_free_ char *main_list = path_join(apt_dir, "sources.list");
        _cleanup_free_ char *dir = path_join(apt_dir, "sources.list.d");
        if (!main_list || !dir)
                return -ENOMEM;
        int r = from_file(main_list, 0, uri, uri_size, from, from_size);
        if (r != -ENOENT)
                return r;
        struct dirent **names = NULL;
        int n = scandir(dir, &names, NULL, by_name);
        if (n < 0)
                return errno == ENOENT ? -ENOENT : -errno;
        r = -ENOENT;
        for (int i = 0; i < n; i++) {
                int kind = suffix_kind(names[i]->d_name);
                if (r == -ENOENT && kind >= 0) {
                        _cleanup_free_ char *p = path_join(dir, names[i]->d_name);
                        r = p ? from_file(p, kind, uri, uri_size, from, from_size) : -ENOMEM;
                }
                free(names[i]);
        }
        free(names);
        return r;
}

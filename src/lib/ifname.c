#include "lib/ifname.h"
#include "lib/netlink.h"
#include "lib/util.h"

#include <nettle/sha2.h>
#include <stdio.h>
#include <sys/random.h>
#include <sys/stat.h>

#define KEY_TMP     IFNAME_KEY_FILE ".new"
#define UNKEYED_HEX 8

/* Only a key nobody but the daemon could have read or chosen: a regular file (O_NONBLOCK: a
 * FIFO there must not hang the start) of the daemon's uid, mode 0600 or less. */
static int key_read(int dirfd, uint8_t key[IFNAME_KEY_LEN])
{
        struct stat st;
        _cleanup_close_ int fd = open_regular_at(dirfd, IFNAME_KEY_FILE, O_NOFOLLOW, &st);
        if (fd == -EINVAL)
                return -EBADMSG;
        if (fd < 0)
                return fd;
        if (st.st_uid != geteuid() || (st.st_mode & 077))
                return -EPERM;
        uint8_t buf[IFNAME_KEY_LEN + 1];
        ssize_t n = read_full(fd, buf, sizeof(buf));
        if (n < 0)
                return (int)n;
        if (n != IFNAME_KEY_LEN) {
                explicit_bzero(buf, sizeof(buf));
                return -EBADMSG;
        }
        memcpy(key, buf, IFNAME_KEY_LEN);
        explicit_bzero(buf, sizeof(buf));
        return 0;
}

/* Written to a new file first and linked into place (EEXIST rather than a replacement, on
 * every file system): a crash leaves either no key or the whole key, never a short one. */
static int key_make(int dirfd, uint8_t key[IFNAME_KEY_LEN])
{
        for (size_t got = 0; got < IFNAME_KEY_LEN;) {
                ssize_t n = getrandom(key + got, IFNAME_KEY_LEN - got, 0);
                if (n < 0 && errno != EINTR)
                        return -errno;
                got += n > 0 ? (size_t)n : 0;
        }
        (void)unlinkat(dirfd, KEY_TMP, 0); /* a crash's leftover */
        _cleanup_close_ int fd =
            openat(dirfd, KEY_TMP, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
                return -errno;
        int r = write_all(fd, key, IFNAME_KEY_LEN);
        if (r >= 0 && fsync(fd) < 0)
                r = -errno;
        if (r >= 0 && linkat(dirfd, KEY_TMP, dirfd, IFNAME_KEY_FILE, 0) < 0)
                r = -errno;
        (void)unlinkat(dirfd, KEY_TMP, 0);
        if (r < 0)
                return r;
        return fsync(dirfd) < 0 ? -errno : 0;
}

/* Links named by an earlier daemon (or orphans, which this start removes: the next one makes
 * the key). Keyed ones without the key do not count: no naming finds them again. */
static int unkeyed_links_up(bool *ret)
{
        char **names = NULL;
        size_t n = 0;
        int r = netlink_links_with_prefix(IFNAME_PREFIX, &names, &n);
        if (r < 0)
                return r;
        char base[16];
        *ret = false;
        for (size_t i = 0; i < n; i++) {
                *ret = *ret || (ifname_base(names[i], base) &&
                                strlen(base) == strlen(IFNAME_PREFIX) + UNKEYED_HEX);
                free(names[i]);
        }
        free(names);
        return 0;
}

int ifnamer_open(const char *root, struct ifnamer *ret, enum ifnamer_source *source)
{
        *ret = (struct ifnamer){.seed = fnv1a(FNV1A_INIT, root)};
        _cleanup_close_ int dirfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dirfd < 0)
                return -errno;
        uint8_t key[IFNAME_KEY_LEN];
        int r = key_read(dirfd, key);
        *source = IFNAMER_KEY_READ;
        if (r == -ENOENT) {
                bool links = false;
                if ((r = unkeyed_links_up(&links)) < 0)
                        return r;
                if (links) {
                        *source = IFNAMER_UNKEYED_KEPT;
                        return 0;
                }
                r = key_make(dirfd, key);
                *source = IFNAMER_KEY_MADE;
        }
        if (r < 0)
                return r;
        hmac_sha256_set_key(&ret->key, IFNAME_KEY_LEN, key);
        explicit_bzero(key, sizeof(key));
        ret->keyed = true;
        return 0;
}

void ifnamer_name(const struct ifnamer *n, const char *env, char out[16])
{
        if (!n->keyed) {
                snprintf(out, 16, IFNAME_PREFIX "%08x", fnv1a(n->seed, env));
                return;
        }
        struct hmac_sha256_ctx c = n->key; /* digest resets the state it works on */
        uint8_t d[6];
        hmac_sha256_update(&c, strlen(env), (const uint8_t *)env);
        hmac_sha256_digest(&c, sizeof(d), d);
        /* 44 bits: 3 hex digits, then 8 */
        unsigned hi = (unsigned)(d[0] << 4 | d[1] >> 4) & 0xfff;
        uint32_t lo = (uint32_t)(d[1] & 15) << 28 | (uint32_t)d[2] << 20 | (uint32_t)d[3] << 12 |
                      (uint32_t)d[4] << 4 | (uint32_t)d[5] >> 4;
        snprintf(out, 16, IFNAME_PREFIX "%03x%08x", hi, lo);
}

bool ifname_base(const char *link, char base[16])
{
        size_t plen = strlen(IFNAME_PREFIX);
        if (strncmp(link, IFNAME_PREFIX, plen) != 0)
                return false;
        size_t hex = strspn(link + plen, "0123456789abcdef");
        const char *rest = link + plen + hex;
        if ((hex != 8 && hex != 11) || !(rest[0] == 0 || (rest[0] == 'i' && rest[1] == 0)))
                return false;
        snprintf(base, 16, "%.*s", (int)(plen + hex), link);
        return true;
}

#include "cli/hostkey.h"
#include "lib/util.h"

#include <fcntl.h>
#include <nettle/memops.h>
#include <nettle/sha2.h>
#include <pwd.h>
#include <sys/stat.h>

#define KNOWN_HOSTS_MAX (1u << 20) /* a file of a few thousand hosts */

/* A key accepted earlier in this process, so that the next connection of the same command
 * does not ask again (also when storing it failed). */
static uint8_t accepted[HOSTKEY_LEN];
static bool have_accepted;

void hostkey_digest(const void *der, size_t len, uint8_t ret[HOSTKEY_LEN])
{
        struct sha256_ctx c;
        sha256_init(&c);
        sha256_update(&c, len, der);
        sha256_digest(&c, HOSTKEY_LEN, ret);
}

void hostkey_format(const uint8_t key[HOSTKEY_LEN], char out[HOSTKEY_TEXT_MAX])
{
        static const char hex[] = "0123456789ABCDEF";
        char *o = out + 7;
        memcpy(out, "sha256:", 7);
        for (size_t i = 0; i < HOSTKEY_LEN; i++) {
                if (i)
                        *o++ = ':';
                *o++ = hex[key[i] >> 4];
                *o++ = hex[key[i] & 15];
        }
        *o = 0;
}

static int hex_digit(char c)
{
        if (c >= '0' && c <= '9')
                return c - '0';
        if (c >= 'a' && c <= 'f')
                return c - 'a' + 10;
        if (c >= 'A' && c <= 'F')
                return c - 'A' + 10;
        return -1;
}

int hostkey_parse(const char *s, uint8_t ret[HOSTKEY_LEN])
{
        uint8_t key[HOSTKEY_LEN];
        if (strncasecmp(s, "sha256:", 7) == 0)
                s += 7;
        for (size_t i = 0; i < HOSTKEY_LEN; i++) {
                if (i && *s == ':')
                        s++;
                int hi = hex_digit(s[0]), lo = hi < 0 ? -1 : hex_digit(s[1]);
                if (lo < 0)
                        return -EINVAL;
                key[i] = (uint8_t)(hi << 4 | lo);
                s += 2;
        }
        if (*s)
                return -EINVAL;
        memcpy(ret, key, HOSTKEY_LEN);
        return 0;
}

int hostkey_check_pin(const struct endpoint *ep, const uint8_t key[HOSTKEY_LEN])
{
        uint8_t pin[HOSTKEY_LEN];
        char got[HOSTKEY_TEXT_MAX];
        hostkey_format(key, got);
        if (hostkey_parse(ep->fingerprint, pin) < 0) {
                fprintf(stderr, "paddock: malformed fingerprint '%s' (want sha256:AB:CD:...)\n",
                        ep->fingerprint);
                return -1;
        }
        if (memeql_sec(pin, key, HOSTKEY_LEN))
                return 0;
        char want[HOSTKEY_TEXT_MAX];
        hostkey_format(pin, want);
        fprintf(stderr,
                "paddock: REFUSING %s: its TLS certificate is not the pinned one.\n"
                "paddock:   pinned (--fingerprint): %s\n"
                "paddock:   offered by the server:  %s\n"
                "paddock: Someone may be intercepting the connection, or the daemon's certificate "
                "changed. Nothing was sent.\n",
                ep->authority, want, got);
        return -1;
}

/* $XDG_CONFIG_HOME/paddock, else ~/.config/paddock. malloc'd, or NULL. */
static char *config_dir(void)
{
        const char *xdg = getenv("XDG_CONFIG_HOME");
        if (xdg && xdg[0] == '/')
                return path_join(xdg, "paddock");
        const char *home = getenv("HOME");
        if (!home || home[0] != '/') {
                struct passwd *pw = getpwuid(getuid());
                home = pw ? pw->pw_dir : NULL;
        }
        if (!home || home[0] != '/')
                return NULL;
        return path_join(home, ".config/paddock");
}

enum lookup { KEY_UNKNOWN, KEY_MATCHES, KEY_DIFFERS };

/* Look authority up in the file's text: the first line for it decides (line number in
 * *ret_line, its key in ret_stored). */
static enum lookup lookup(char *text, const char *authority, const uint8_t key[HOSTKEY_LEN],
                          unsigned *ret_line, uint8_t ret_stored[HOSTKEY_LEN])
{
        unsigned lineno = 0;
        for (char *line = text, *next; line && *line; line = next) {
                lineno++;
                next = strchr(line, '\n');
                if (next)
                        *next++ = 0;
                char *save = NULL;
                char *host = strtok_r(line, " \t\r", &save);
                char *fp = host ? strtok_r(NULL, " \t\r", &save) : NULL;
                if (!host || host[0] == '#' || !fp || strcasecmp(host, authority) != 0)
                        continue;
                uint8_t stored[HOSTKEY_LEN];
                if (hostkey_parse(fp, stored) < 0)
                        continue; /* not ours to judge; a later line may be */
                *ret_line = lineno;
                memcpy(ret_stored, stored, HOSTKEY_LEN);
                return memeql_sec(stored, key, HOSTKEY_LEN) ? KEY_MATCHES : KEY_DIFFERS;
        }
        return KEY_UNKNOWN;
}

/* The file's text ("" when there is none). A file others could have written is refused:
 * anyone who can add a line to it can impersonate every host. */
static int read_known_hosts(const char *path, char **ret)
{
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0 && errno == ENOENT) {
                *ret = strdup("");
                return *ret ? 0 : -ENOMEM;
        }
        struct stat st;
        if (fd < 0 || fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode) || (st.st_uid != getuid() && st.st_uid != 0) ||
            (st.st_mode & 022)) {
                fprintf(stderr, "paddock: %s must be a file of yours that only you can write "
                                "(chmod 600)\n", path);
                return -EPERM;
        }
        _cleanup_free_ char *text = malloc(KNOWN_HOSTS_MAX);
        if (!text)
                return -ENOMEM;
        ssize_t n = read_full(fd, text, KNOWN_HOSTS_MAX - 1);
        if (n < 0)
                return (int)n;
        text[n] = 0;
        *ret = TAKE_PTR(text);
        return 0;
}

static int store(const char *dir, const char *path, const char *line)
{
        /* ~/.config too when it does not exist, 0700 as XDG asks. */
        int r = mkdir_p_at(AT_FDCWD, dir, 0700);
        if (r < 0)
                return r;
        _cleanup_close_ int fd =
            open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
                return -errno;
        r = write_all(fd, line, strlen(line));
        if (r < 0)
                return r;
        return fsync(fd) < 0 ? -errno : 0;
}

/* Ask on the terminal. Reads standard input byte by byte, so that nothing after the answer is
 * taken from a command's input. */
static bool confirm(const char *path)
{
        fprintf(stderr, "Trust it and store it in %s (yes/no)? ", path);
        fflush(stderr);
        char answer[16];
        size_t n = 0;
        for (;;) {
                char c;
                ssize_t r = read(STDIN_FILENO, &c, 1);
                if (r < 0 && errno == EINTR)
                        continue;
                if (r <= 0 || c == '\n')
                        break;
                if (n < sizeof(answer) - 1)
                        answer[n++] = c;
        }
        answer[n] = 0;
        return strcasecmp(answer, "yes") == 0 || strcasecmp(answer, "y") == 0;
}

static void print_changed(const struct endpoint *ep, const char *path, unsigned line,
                          const uint8_t stored[HOSTKEY_LEN], const char *got)
{
        char want[HOSTKEY_TEXT_MAX];
        hostkey_format(stored, want);
        fprintf(stderr,
                "@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@\n"
                "@    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @\n"
                "@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@\n"
                "IT IS POSSIBLE THAT SOMEONE IS DOING SOMETHING NASTY!\n"
                "Someone could be intercepting the connection to paddockd at %s right now\n"
                "(man-in-the-middle), or its TLS certificate has been replaced.\n"
                "  stored in %s line %u: %s\n"
                "  offered now: %s\n"
                "If the change is expected, check the new fingerprint with `paddock system` on\n"
                "the daemon's machine, then remove line %u from %s (or give --fingerprint).\n"
                "paddock: refusing to connect to %s; nothing was sent.\n",
                ep->authority, path, line, want, got, line, path, ep->authority);
}

int hostkey_check_known(const struct endpoint *ep, const uint8_t key[HOSTKEY_LEN])
{
        if (have_accepted && memeql_sec(accepted, key, HOSTKEY_LEN))
                return 0;
        _cleanup_free_ char *dir = config_dir();
        _cleanup_free_ char *path = dir ? path_join(dir, "known_hosts") : NULL;
        if (!path) {
                fprintf(stderr, "paddock: no home directory for the known_hosts file; give "
                                "--fingerprint or --ca-cert\n");
                return -1;
        }
        _cleanup_free_ char *text = NULL;
        int r = read_known_hosts(path, &text);
        if (r < 0) {
                if (r != -EPERM)
                        fprintf(stderr, "paddock: cannot read %s: %s\n", path, strerror(-r));
                return -1;
        }
        char got[HOSTKEY_TEXT_MAX];
        hostkey_format(key, got);
        unsigned line = 0;
        uint8_t stored[HOSTKEY_LEN];
        switch (lookup(text, ep->authority, key, &line, stored)) {
        case KEY_MATCHES:
                return 0;
        case KEY_DIFFERS:
                print_changed(ep, path, line, stored, got);
                return -1;
        case KEY_UNKNOWN:
                break;
        }
        fprintf(stderr,
                "paddock: the authenticity of %s cannot be established: it is not in %s.\n"
                "paddock: its TLS certificate fingerprint is %s\n"
                "paddock: (compare it with what `paddock system` shows on the daemon's machine)\n",
                ep->authority, path, got);
        if (!ep->trust_new) {
                if (!isatty(STDIN_FILENO)) {
                        fprintf(stderr, "paddock: refusing an unknown certificate without "
                                        "confirmation; after checking it, give --fingerprint %s, "
                                        "or --trust-new (PADDOCK_TRUST_NEW=1) to store it\n",
                                got);
                        return -1;
                }
                if (!confirm(path)) {
                        fprintf(stderr, "paddock: not trusted; nothing was sent\n");
                        return -1;
                }
        }
        memcpy(accepted, key, HOSTKEY_LEN);
        have_accepted = true;
        char entry[sizeof(ep->authority) + HOSTKEY_TEXT_MAX + 2];
        snprintf(entry, sizeof(entry), "%s %s\n", ep->authority, got);
        r = store(dir, path, entry);
        if (r < 0)
                fprintf(stderr, "paddock: warning: could not store the fingerprint in %s: %s\n",
                        path, strerror(-r));
        else
                fprintf(stderr, "paddock: stored %s %s in %s\n", ep->authority, got, path);
        return 0;
}

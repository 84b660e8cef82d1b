/* Unit tests of src/lib/aptsources.c: which archive the host's apt uses, from one-line and
 * deb822 sources, in apt's order. */
#include "lib/aptsources.h"
#include "lib/util.h"
#include "unit.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *one(const char *text, int deb822)
{
        static char uri[256];
        int r = apt_mirror_in_text(text, deb822, uri, sizeof(uri));
        return r == 0 ? uri : r == -ENOENT ? "(none)" : "(error)";
}

static void test_apt_one_line__formats(void)
{
        CHECK_EQ_STR(one("deb http://mirror.example/debian bookworm main\n", 0),
                     "http://mirror.example/debian");
        CHECK_EQ_STR(one("deb [arch=amd64 signed-by=/k.gpg] https://m.example/debian/ bookworm "
                         "main contrib\n", 0),
                     "https://m.example/debian"); /* options skipped, trailing slash dropped */
        /* security and updates pockets, deb-src, comments, cdroms and no main are skipped */
        CHECK_EQ_STR(one("# deb http://commented.example/debian bookworm main\n"
                         "deb-src http://src.example/debian bookworm main\n"
                         "deb http://sec.example/debian-security bookworm-security main\n"
                         "deb http://old.example/debian-security bookworm/updates main\n"
                         "deb cdrom:[Debian]/ bookworm main\n"
                         "deb http://nomain.example/debian bookworm contrib\n"
                         "deb http://up.example/debian bookworm-updates main\n"
                         "   deb   http://the.example/debian   bookworm   main # why\r\n", 0),
                     "http://the.example/debian");
        CHECK_EQ_STR(one("deb http://a.example/debian bookworm main", 0), /* no final newline */
                     "http://a.example/debian");
        CHECK_EQ_STR(one("", 0), "(none)");
        CHECK_EQ_STR(one("deb [unclosed http://a.example/debian bookworm main\n", 0), "(none)");
        CHECK_EQ_STR(one("deb http://a.example/debian\n", 0), "(none)");
        CHECK_EQ_STR(one("debx http://a.example/debian bookworm main\n", 0), "(none)");
}

static void test_apt_deb822__formats(void)
{
        CHECK_EQ_STR(one("Types: deb\n"
                         "# a comment inside\n"
                         "URIs: http://deb.example/debian\n"
                         "Suites: bookworm bookworm-updates\n"
                         "Components: main\n"
                         "Signed-By: /usr/share/keyrings/k.gpg\n"
                         "\n"
                         "Types: deb\n"
                         "URIs: http://deb.example/debian-security\n"
                         "Suites: bookworm-security\n"
                         "Components: main\n", 1),
                     "http://deb.example/debian");
        CHECK_EQ_STR(one("Types: deb-src\nURIs: http://src.example/d\nSuites: bookworm\n"
                         "Components: main\n\n"
                         "Enabled: no\nTypes: deb\nURIs: http://off.example/d\nSuites: bookworm\n"
                         "Components: main\n\n"
                         "types: deb deb-src\n"
                         "uris: cdrom:x https://two.example/debian/ http://three.example/d\n"
                         "suites: sid\n"
                         "components: contrib\n"
                         " main non-free\n", 1),
                     "https://two.example/debian"); /* continuation line; case of names */
        CHECK_EQ_STR(one("Types: deb\nURIs: http://x.example/d\nSuites: bookworm-security\n"
                         "Components: main\n", 1),
                     "(none)");
        CHECK_EQ_STR(one("\n\n# nothing\n", 1), "(none)");
        CHECK_EQ_STR(one("Types deb\nURIs: http://x.example/d\n", 1), "(none)");
}

static void test_apt_uri__too_long(void)
{
        char uri[16];
        CHECK_EQ_INT(apt_mirror_in_text("deb http://a-long-name.example/debian bookworm main\n", 0,
                                        uri, sizeof(uri)),
                     -ENAMETOOLONG);
}

static void put(const char *dir, const char *name, const char *text)
{
        _cleanup_free_ char *p = path_join(dir, name);
        int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        CHECK(fd >= 0);
        CHECK_EQ_INT(write_all(fd, text, strlen(text)), 0);
        close(fd);
}

/* apt's order: sources.list first, then sources.list.d/ in name order; other names ignored. */
static void test_apt_host_mirror__order(void)
{
        char dir[] = "/var/tmp/paddock-apt-XXXXXX";
        CHECK(mkdtemp(dir) != NULL);
        char uri[256], from[512];
        CHECK_EQ_INT(apt_host_mirror(dir, uri, sizeof(uri), from, sizeof(from)), -ENOENT);
        _cleanup_free_ char *d = path_join(dir, "sources.list.d");
        CHECK_EQ_INT(mkdir(d, 0755), 0);
        CHECK_EQ_INT(apt_host_mirror(dir, uri, sizeof(uri), from, sizeof(from)), -ENOENT);
        put(d, "zz.sources", "Types: deb\nURIs: http://zz.example/d\nSuites: sid\nComponents: main\n");
        put(d, "aa.list.disabled", "deb http://disabled.example/d sid main\n");
        put(d, "b~ad.list", "deb http://badname.example/d sid main\n");
        put(d, "mm.list", "deb http://sec.example/d sid-security main\n");
        CHECK_EQ_INT(apt_host_mirror(dir, uri, sizeof(uri), from, sizeof(from)), 0);
        CHECK_EQ_STR(uri, "http://zz.example/d");
        CHECK(strstr(from, "/sources.list.d/zz.sources") != NULL);
        put(d, "bb.list", "deb http://bb.example/d sid main\n");
        CHECK_EQ_INT(apt_host_mirror(dir, uri, sizeof(uri), from, sizeof(from)), 0);
        CHECK_EQ_STR(uri, "http://bb.example/d");
        put(dir, "sources.list", "deb http://main.example/d bookworm main\n");
        CHECK_EQ_INT(apt_host_mirror(dir, uri, sizeof(uri), from, sizeof(from)), 0);
        CHECK_EQ_STR(uri, "http://main.example/d");
        /* a FIFO where a file should be is skipped, not waited for */
        _cleanup_free_ char *fifo = path_join(d, "aa.list");
        CHECK_EQ_INT(mkfifo(fifo, 0644), 0);
        _cleanup_free_ char *mainf = path_join(dir, "sources.list");
        CHECK_EQ_INT(unlink(mainf), 0);
        CHECK_EQ_INT(apt_host_mirror(dir, uri, sizeof(uri), from, sizeof(from)), 0);
        CHECK_EQ_STR(uri, "http://bb.example/d");
        CHECK_EQ_INT(rm_rf_at(AT_FDCWD, dir), 0);
}

int main(void)
{
        RUN(test_apt_one_line__formats);
        RUN(test_apt_deb822__formats);
        RUN(test_apt_uri__too_long);
        RUN(test_apt_host_mirror__order);
        UNIT_EXIT();
}

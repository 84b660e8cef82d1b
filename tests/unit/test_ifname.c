/* lib/ifname: environments' host-side interface names, keyed by the state directory's random
 * key, and the unkeyed names kept while an earlier daemon's links are up. The program runs in
 * a network namespace of its own (the links it looks for are that namespace's). */
#include "lib/ifname.h"
#include "lib/util.h"
#include "unit.h"

#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[] = "/tmp/paddock-ifname-XXXXXX";

static void reset_dir(void)
{
        char p[128];
        snprintf(p, sizeof(p), "%s/" IFNAME_KEY_FILE, dir);
        unlink(p);
}

static bool key_file(mode_t *mode, off_t *size)
{
        char p[128];
        snprintf(p, sizeof(p), "%s/" IFNAME_KEY_FILE, dir);
        struct stat st;
        if (lstat(p, &st) < 0)
                return false;
        *mode = st.st_mode & 07777;
        *size = st.st_size;
        return true;
}

static bool shape_ok(const char *n, size_t hex)
{
        return strncmp(n, "pdk", 3) == 0 && strlen(n) == 3 + hex &&
               strspn(n + 3, "0123456789abcdef") == hex;
}

static void test_key_made_once_and_kept(void)
{
        reset_dir();
        struct ifnamer a, b;
        enum ifnamer_source src;
        CHECK_EQ_INT(ifnamer_open(dir, &a, &src), 0);
        CHECK_EQ_INT(src, IFNAMER_KEY_MADE);
        CHECK(a.keyed);
        mode_t mode = 0;
        off_t size = 0;
        CHECK(key_file(&mode, &size));
        CHECK_EQ_INT(mode, 0600);
        CHECK_EQ_INT(size, IFNAME_KEY_LEN);
        char x[16], y[16], z[16];
        ifnamer_name(&a, "web", x);
        ifnamer_name(&a, "web2", z);
        CHECK(shape_ok(x, 11));
        CHECK(strcmp(x, z) != 0);
        /* a restart reads the same key: the same names (running environments keep their link) */
        CHECK_EQ_INT(ifnamer_open(dir, &b, &src), 0);
        CHECK_EQ_INT(src, IFNAMER_KEY_READ);
        ifnamer_name(&b, "web", y);
        CHECK_EQ_STR(y, x);
        /* another key, other names: nobody without the key can compute them */
        reset_dir();
        CHECK_EQ_INT(ifnamer_open(dir, &b, &src), 0);
        CHECK_EQ_INT(src, IFNAMER_KEY_MADE);
        ifnamer_name(&b, "web", y);
        CHECK(strcmp(y, x) != 0);
        char legacy[16];
        snprintf(legacy, sizeof(legacy), "pdk%08x", fnv1a(fnv1a(FNV1A_INIT, dir), "web"));
        CHECK(strcmp(x, legacy) != 0 && strcmp(y, legacy) != 0);
}

static void test_unkeyed_while_earlier_links_are_up(void)
{
        reset_dir();
        /* not our shape: does not count */
        CHECK_EQ_INT(system("ip link add pdk-other type veth peer name pdkt-o"), 0);
        struct ifnamer n;
        enum ifnamer_source src;
        CHECK_EQ_INT(ifnamer_open(dir, &n, &src), 0);
        CHECK_EQ_INT(src, IFNAMER_KEY_MADE);
        reset_dir();
        /* an earlier daemon's veth: its environment finds it by the old name after an upgrade */
        CHECK_EQ_INT(system("ip link add pdk0123abcd type veth peer name pdkt-e"), 0);
        CHECK_EQ_INT(ifnamer_open(dir, &n, &src), 0);
        CHECK_EQ_INT(src, IFNAMER_UNKEYED_KEPT);
        CHECK(!n.keyed);
        mode_t mode;
        off_t size;
        CHECK(!key_file(&mode, &size));
        char got[16], want[16];
        ifnamer_name(&n, "web", got);
        snprintf(want, sizeof(want), "pdk%08x", fnv1a(fnv1a(FNV1A_INIT, dir), "web"));
        CHECK_EQ_STR(got, want);
        /* a lost key: links of the keyed shape do not keep the unkeyed names */
        CHECK_EQ_INT(system("ip link add pdk0123456789a type veth peer name pdkt-k"), 0);
        CHECK_EQ_INT(system("ip link del pdk0123abcd"), 0);
        CHECK_EQ_INT(ifnamer_open(dir, &n, &src), 0);
        CHECK_EQ_INT(src, IFNAMER_KEY_MADE);
        CHECK_EQ_INT(system("ip link del pdk0123456789a"), 0);
        reset_dir();
        CHECK_EQ_INT(system("ip link add pdk0123abcd type veth peer name pdkt-e"), 0);
        CHECK_EQ_INT(ifnamer_open(dir, &n, &src), 0);
        CHECK_EQ_INT(src, IFNAMER_UNKEYED_KEPT);
        /* a key made earlier wins over such links */
        CHECK_EQ_INT(system("ip link del pdk0123abcd"), 0);
        CHECK_EQ_INT(ifnamer_open(dir, &n, &src), 0);
        CHECK_EQ_INT(system("ip link add pdk0123abcd type veth peer name pdkt-e"), 0);
        CHECK_EQ_INT(ifnamer_open(dir, &n, &src), 0);
        CHECK_EQ_INT(src, IFNAMER_KEY_READ);
        CHECK(n.keyed);
        CHECK_EQ_INT(system("ip link del pdk0123abcd && ip link del pdk-other"), 0);
}

static void test_bad_key_file_is_refused_not_replaced(void)
{
        reset_dir();
        char p[128];
        snprintf(p, sizeof(p), "%s/" IFNAME_KEY_FILE, dir);
        FILE *f = fopen(p, "w");
        CHECK(f != NULL);
        if (!f)
                return;
        fputs("short", f);
        fclose(f);
        chmod(p, 0600);
        struct ifnamer n;
        enum ifnamer_source src;
        CHECK_EQ_INT(ifnamer_open(dir, &n, &src), -EBADMSG);
        mode_t mode;
        off_t size = 0;
        CHECK(key_file(&mode, &size));
        CHECK_EQ_INT(size, 5);
        /* a whole key others may read, or another uid's: refused too */
        unlink(p);
        CHECK_EQ_INT(ifnamer_open(dir, &n, &src), 0);
        CHECK_EQ_INT(chmod(p, 0644), 0);
        CHECK_EQ_INT(ifnamer_open(dir, &n, &src), -EPERM);
        CHECK_EQ_INT(chmod(p, 0600), 0);
        CHECK_EQ_INT(chown(p, 1, 1), 0);
        CHECK_EQ_INT(ifnamer_open(dir, &n, &src), -EPERM);
        /* a FIFO does not hang the start */
        unlink(p);
        CHECK_EQ_INT(mkfifo(p, 0600), 0);
        CHECK_EQ_INT(ifnamer_open(dir, &n, &src), -EBADMSG);
        /* never through a symlink (a key chosen elsewhere) */
        unlink(p);
        CHECK_EQ_INT(symlink("/etc/hostname", p), 0);
        CHECK_EQ_INT(ifnamer_open(dir, &n, &src), -ELOOP);
        unlink(p);
}

static void test_ifname_base_shapes(void)
{
        char b[16];
        CHECK(ifname_base("pdk0123abcd", b));
        CHECK_EQ_STR(b, "pdk0123abcd");
        CHECK(ifname_base("pdk0123abcdi", b));
        CHECK_EQ_STR(b, "pdk0123abcd");
        CHECK(ifname_base("pdk0123456789a", b));
        CHECK_EQ_STR(b, "pdk0123456789a");
        CHECK(ifname_base("pdk0123456789ai", b));
        CHECK_EQ_STR(b, "pdk0123456789a");
        CHECK(!ifname_base("pdk0123abc", b));     /* 7 digits */
        CHECK(!ifname_base("pdk0123456789", b));  /* 10 */
        CHECK(!ifname_base("pdk0123ABCD", b));    /* upper case */
        CHECK(!ifname_base("pdk0123abcdx", b));
        CHECK(!ifname_base("pdk0123abcdii", b));
        CHECK(!ifname_base("pdkt0", b));
        CHECK(!ifname_base("eth0", b));
}

int main(void)
{
        if (geteuid() != 0)
                UNIT_SKIP_ALL("not root (a network namespace of its own)");
        if (unshare(CLONE_NEWNET) < 0) {
                perror("unshare");
                return 1;
        }
        if (!mkdtemp(dir)) {
                perror("mkdtemp");
                return 1;
        }
        RUN(test_key_made_once_and_kept);
        RUN(test_unkeyed_while_earlier_links_are_up);
        RUN(test_bad_key_file_is_refused_not_replaced);
        RUN(test_ifname_base_shapes);
        reset_dir();
        rmdir(dir);
        UNIT_EXIT();
}

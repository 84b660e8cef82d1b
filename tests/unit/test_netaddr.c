/* Unit tests of src/lib/netaddr.c (which addresses a pull may reach by default) and of the
 * registry policy of src/lib/registry.c (--allow-registry / --insecure-registry). */
#include "lib/netaddr.h"
#include "lib/registry.h"
#include "lib/util.h"
#include "unit.h"

#include <arpa/inet.h>
#include <netinet/in.h>

static enum netaddr_class classify(const char *text)
{
        struct sockaddr_in in = {.sin_family = AF_INET};
        struct sockaddr_in6 in6 = {.sin6_family = AF_INET6};
        if (inet_pton(AF_INET, text, &in.sin_addr) == 1)
                return netaddr_classify((struct sockaddr *)&in, sizeof(in));
        if (inet_pton(AF_INET6, text, &in6.sin6_addr) == 1)
                return netaddr_classify((struct sockaddr *)&in6, sizeof(in6));
        fprintf(stderr, "  bad test address %s\n", text);
        CHECK(false);
        return NETADDR_PUBLIC;
}

#define EXPECT(text, cls)                                                                          \
        do {                                                                                       \
                enum netaddr_class _c = classify(text);                                            \
                if (_c != (cls))                                                                   \
                        fprintf(stderr, "  %s: %s, expected %s\n", text, netaddr_class_name(_c),   \
                                netaddr_class_name(cls));                                          \
                CHECK_EQ_INT(_c, cls);                                                             \
        } while (0)

/* Each range at its first and last address, and the neighbours just outside it. */
static void test_netaddr__v4_ranges(void)
{
        EXPECT("0.0.0.0", NETADDR_UNSPECIFIED);
        EXPECT("0.255.255.255", NETADDR_UNSPECIFIED);
        EXPECT("1.0.0.0", NETADDR_PUBLIC);
        EXPECT("9.255.255.255", NETADDR_PUBLIC);
        EXPECT("10.0.0.0", NETADDR_PRIVATE);
        EXPECT("10.1.2.3", NETADDR_PRIVATE);
        EXPECT("10.255.255.255", NETADDR_PRIVATE);
        EXPECT("11.0.0.0", NETADDR_PUBLIC);
        EXPECT("100.63.255.255", NETADDR_PUBLIC);
        EXPECT("100.64.0.0", NETADDR_SHARED);
        EXPECT("100.127.255.255", NETADDR_SHARED);
        EXPECT("100.128.0.0", NETADDR_PUBLIC);
        EXPECT("126.255.255.255", NETADDR_PUBLIC);
        EXPECT("127.0.0.0", NETADDR_LOOPBACK);
        EXPECT("127.0.0.1", NETADDR_LOOPBACK);
        EXPECT("127.255.255.255", NETADDR_LOOPBACK);
        EXPECT("128.0.0.0", NETADDR_PUBLIC);
        EXPECT("169.253.255.255", NETADDR_PUBLIC);
        EXPECT("169.254.0.0", NETADDR_LINK_LOCAL);
        EXPECT("169.254.169.254", NETADDR_LINK_LOCAL); /* cloud metadata */
        EXPECT("169.254.255.255", NETADDR_LINK_LOCAL);
        EXPECT("169.255.0.0", NETADDR_PUBLIC);
        EXPECT("172.15.255.255", NETADDR_PUBLIC);
        EXPECT("172.16.0.0", NETADDR_PRIVATE);
        EXPECT("172.31.255.255", NETADDR_PRIVATE);
        EXPECT("172.32.0.0", NETADDR_PUBLIC);
        EXPECT("191.255.255.255", NETADDR_PUBLIC);
        EXPECT("192.0.0.0", NETADDR_RESERVED);
        EXPECT("192.0.0.255", NETADDR_RESERVED);
        EXPECT("192.0.2.0", NETADDR_PUBLIC); /* documentation: see netaddr.h */
        EXPECT("192.0.2.255", NETADDR_PUBLIC);
        EXPECT("192.88.98.255", NETADDR_PUBLIC);
        EXPECT("192.88.99.0", NETADDR_RESERVED);
        EXPECT("192.88.99.255", NETADDR_RESERVED);
        EXPECT("192.88.100.0", NETADDR_PUBLIC);
        EXPECT("192.167.255.255", NETADDR_PUBLIC);
        EXPECT("192.168.0.0", NETADDR_PRIVATE);
        EXPECT("192.168.255.255", NETADDR_PRIVATE);
        EXPECT("192.169.0.0", NETADDR_PUBLIC);
        EXPECT("198.17.255.255", NETADDR_PUBLIC);
        EXPECT("198.18.0.0", NETADDR_RESERVED);
        EXPECT("198.19.255.255", NETADDR_RESERVED);
        EXPECT("198.20.0.0", NETADDR_PUBLIC);
        EXPECT("198.51.100.1", NETADDR_PUBLIC);
        EXPECT("203.0.113.7", NETADDR_PUBLIC);
        EXPECT("8.8.8.8", NETADDR_PUBLIC);
        EXPECT("223.255.255.255", NETADDR_PUBLIC);
        EXPECT("224.0.0.0", NETADDR_MULTICAST);
        EXPECT("239.255.255.255", NETADDR_MULTICAST);
        EXPECT("240.0.0.0", NETADDR_RESERVED);
        EXPECT("255.255.255.254", NETADDR_RESERVED);
        EXPECT("255.255.255.255", NETADDR_RESERVED);
}

static void test_netaddr__v6_ranges(void)
{
        EXPECT("::", NETADDR_UNSPECIFIED);
        EXPECT("::1", NETADDR_LOOPBACK);
        EXPECT("::2", NETADDR_RESERVED);
        EXPECT("::10.0.0.1", NETADDR_RESERVED); /* v4-compatible, deprecated */
        EXPECT("::8.8.8.8", NETADDR_RESERVED);
        EXPECT("100::", NETADDR_RESERVED); /* discard-only */
        EXPECT("1fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", NETADDR_RESERVED);
        EXPECT("2000::", NETADDR_PUBLIC);
        EXPECT("2001::", NETADDR_RESERVED);    /* Teredo */
        EXPECT("2001:2::1", NETADDR_RESERVED); /* benchmarking */
        EXPECT("2001:1ff:ffff:ffff:ffff:ffff:ffff:ffff", NETADDR_RESERVED);
        EXPECT("2001:200::", NETADDR_PUBLIC);
        EXPECT("2001:db8::1", NETADDR_PUBLIC); /* documentation */
        EXPECT("2001:4860:4860::8888", NETADDR_PUBLIC);
        EXPECT("2606:4700::1111", NETADDR_PUBLIC);
        EXPECT("3fff::1", NETADDR_PUBLIC);
        EXPECT("3fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", NETADDR_PUBLIC);
        EXPECT("4000::", NETADDR_RESERVED);
        EXPECT("5f00::1", NETADDR_RESERVED);
        EXPECT("fbff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", NETADDR_RESERVED);
        EXPECT("fc00::", NETADDR_PRIVATE);
        EXPECT("fd00:ec2::254", NETADDR_PRIVATE); /* AWS metadata over IPv6 */
        EXPECT("fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", NETADDR_PRIVATE);
        EXPECT("fe00::", NETADDR_RESERVED);
        EXPECT("fe80::", NETADDR_LINK_LOCAL);
        EXPECT("fe80::1", NETADDR_LINK_LOCAL);
        EXPECT("febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff", NETADDR_LINK_LOCAL);
        EXPECT("fec0::1", NETADDR_PRIVATE);
        EXPECT("feff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", NETADDR_PRIVATE);
        EXPECT("ff00::", NETADDR_MULTICAST);
        EXPECT("ff02::1", NETADDR_MULTICAST);
        EXPECT("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", NETADDR_MULTICAST);
}

/* Forms that carry an IPv4 address are judged by it. */
static void test_netaddr__v6_with_v4_inside(void)
{
        EXPECT("::ffff:127.0.0.1", NETADDR_LOOPBACK);
        EXPECT("::ffff:10.1.2.3", NETADDR_PRIVATE);
        EXPECT("::ffff:172.16.0.1", NETADDR_PRIVATE);
        EXPECT("::ffff:192.168.1.1", NETADDR_PRIVATE);
        EXPECT("::ffff:169.254.169.254", NETADDR_LINK_LOCAL);
        EXPECT("::ffff:100.64.0.1", NETADDR_SHARED);
        EXPECT("::ffff:0.0.0.0", NETADDR_UNSPECIFIED);
        EXPECT("::ffff:224.0.0.1", NETADDR_MULTICAST);
        EXPECT("::ffff:255.255.255.255", NETADDR_RESERVED);
        EXPECT("::ffff:8.8.8.8", NETADDR_PUBLIC);
        EXPECT("::ffff:0:10.1.2.3", NETADDR_RESERVED); /* SIIT translated: not mapped */
        EXPECT("64:ff9b::10.1.2.3", NETADDR_PRIVATE);
        EXPECT("64:ff9b::127.0.0.1", NETADDR_LOOPBACK);
        EXPECT("64:ff9b::169.254.169.254", NETADDR_LINK_LOCAL);
        EXPECT("64:ff9b::8.8.8.8", NETADDR_PUBLIC);
        EXPECT("64:ff9b:1::8.8.8.8", NETADDR_PRIVATE); /* local-use NAT64 */
        EXPECT("64:ff9b:1:ffff::1", NETADDR_PRIVATE);
        EXPECT("2002:0a01:0203::1", NETADDR_PRIVATE); /* 6to4 of 10.1.2.3 */
        EXPECT("2002:7f00:0001::1", NETADDR_LOOPBACK);
        EXPECT("2002:a9fe:a9fe::1", NETADDR_LINK_LOCAL);
        EXPECT("2002:0808:0808::1", NETADDR_PUBLIC);
}

static void test_netaddr__other_families_and_format(void)
{
        struct sockaddr_un_like {
                sa_family_t family;
                char path[20];
        } un = {.family = AF_UNIX};
        CHECK_EQ_INT(netaddr_classify((struct sockaddr *)&un, sizeof(un)), NETADDR_RESERVED);
        struct sockaddr_in in = {.sin_family = AF_INET};
        CHECK_EQ_INT(netaddr_classify((struct sockaddr *)&in, 4), NETADDR_RESERVED); /* short */
        CHECK_EQ_INT(netaddr_classify(NULL, 0), NETADDR_RESERVED);
        char buf[64];
        inet_pton(AF_INET, "10.99.0.1", &in.sin_addr);
        netaddr_format((struct sockaddr *)&in, sizeof(in), buf, sizeof(buf));
        CHECK_EQ_STR(buf, "10.99.0.1");
        struct sockaddr_in6 in6 = {.sin6_family = AF_INET6};
        inet_pton(AF_INET6, "::ffff:10.99.0.1", &in6.sin6_addr);
        netaddr_format((struct sockaddr *)&in6, sizeof(in6), buf, sizeof(buf));
        CHECK_EQ_STR(buf, "::ffff:10.99.0.1");
        CHECK_EQ_STR(netaddr_class_name(NETADDR_PRIVATE), "private");
        CHECK_EQ_STR(netaddr_class_name(NETADDR_LINK_LOCAL), "link-local");
}

static void test_registry__policy(void)
{
        static struct registry_policy p;
        CHECK_EQ_INT(registry_policy_add(&p, "Registry.LAN:5000", false), 0);
        CHECK_EQ_INT(registry_policy_add(&p, "10.99.0.1", true), 0);
        CHECK_EQ_INT(registry_policy_add(&p, "[::1]:5001", true), 0);
        CHECK_EQ_INT(registry_policy_add(&p, "127.0.0.1:5000", false), 0);
        CHECK_EQ_INT(registry_policy_add(&p, "127.0.0.1:5000", true), 0); /* upgraded */
        CHECK_EQ_INT(p.n, 4);
        /* names without case; a port only when given */
        CHECK(registry_policy_find(&p, "registry.lan", 5000));
        CHECK(!registry_policy_find(&p, "registry.lan", 443));
        CHECK(registry_policy_find(&p, "10.99.0.1", 443));
        CHECK(registry_policy_find(&p, "10.99.0.1", 1));
        CHECK(!registry_policy_find(&p, "10.99.0.2", 443));
        CHECK(registry_policy_find(&p, "[::1]", 5001));
        CHECK(!registry_policy_find(&p, "[::1]", 5000));
        CHECK(!registry_policy_find(NULL, "10.99.0.1", 443));
        /* plain http: insecure entries only; a reference without a port means 80 */
        CHECK(!registry_policy_insecure(&p, "registry.lan:5000"));
        CHECK(registry_policy_insecure(&p, "10.99.0.1"));
        CHECK(registry_policy_insecure(&p, "10.99.0.1:8080"));
        CHECK(registry_policy_insecure(&p, "[::1]:5001"));
        CHECK(registry_policy_insecure(&p, "[0:0::1]:5001")); /* the same address */
        CHECK(registry_policy_insecure(&p, "127.0.0.1:5000"));
        CHECK(!registry_policy_insecure(&p, "127.0.0.1:5001"));
        CHECK(!registry_policy_insecure(&p, "127.0.0.1"));
        CHECK(!registry_policy_insecure(&p, "localhost:5000")); /* names are not resolved */
        CHECK(!registry_policy_insecure(&p, "registry-1.docker.io"));
        /* malformed */
        const char *bad[] = {"",           ":5000",  "a/b",         "user@host", "host:0",
                             "host:99999", "host:x", "http://host", "host?x",    "ho st",
                             "host#1",     "[::1",   "host:5000/v2"};
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                int k = registry_policy_add(&p, bad[i], false);
                if (k != -EINVAL)
                        fprintf(stderr, "  accepted %s\n", bad[i]);
                CHECK_EQ_INT(k, -EINVAL);
        }
        CHECK_EQ_INT(p.n, 4);
        static struct registry_policy full;
        char h[32];
        for (int i = 0; i < REGISTRY_POLICY_MAX; i++) {
                snprintf(h, sizeof(h), "r%d.lan", i);
                CHECK_EQ_INT(registry_policy_add(&full, h, false), 0);
        }
        CHECK_EQ_INT(registry_policy_add(&full, "one-more.lan", false), -E2BIG);
}

int main(void)
{
        RUN(test_netaddr__v4_ranges);
        RUN(test_netaddr__v6_ranges);
        RUN(test_netaddr__v6_with_v4_inside);
        RUN(test_netaddr__other_families_and_format);
        RUN(test_registry__policy);
        UNIT_EXIT();
}

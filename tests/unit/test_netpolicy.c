/* Unit tests of src/lib/netpolicy.c: allow rules as users write them (the API's
 * network.allow[] and `--allow`), IPv4 and IPv6, their canonical text and the firewall rules
 * made of them. */
#include "lib/netpolicy.h"
#include "lib/util.h"

#include "unit.h"

#include <arpa/inet.h>

/* Parse s and return its canonical text ("ERR" when refused). */
static const char *canon(const char *s)
{
        static char buf[300];
        struct allow_rule r;
        if (netpolicy_rule_parse(s, &r) < 0)
                return "ERR";
        netpolicy_rule_format(&r, buf, sizeof(buf));
        return buf;
}

static void test_netpolicy_rule_parse__ipv4_and_names(void)
{
        CHECK_EQ_STR(canon("198.51.100.7"), "198.51.100.7");
        CHECK_EQ_STR(canon("198.51.100.7:443"), "198.51.100.7:443");
        CHECK_EQ_STR(canon("198.51.100.7/24:80"), "198.51.100.0/24:80");
        CHECK_EQ_STR(canon("API.Example.com:443"), "api.example.com:443");
        CHECK_EQ_STR(canon("*.example.com"), "*.example.com");
        struct allow_rule r;
        CHECK_EQ_INT(netpolicy_rule_parse("10.0.0.0/8", &r), 0);
        CHECK_EQ_INT(r.kind, ALLOW_CIDR);
        CHECK_EQ_INT(r.family, AF_INET);
        CHECK_EQ_INT(r.prefix, 8);
}

static void test_netpolicy_rule_parse__ipv6(void)
{
        struct allow_rule r;
        CHECK_EQ_INT(netpolicy_rule_parse("[2001:db8::5]:443", &r), 0);
        CHECK_EQ_INT(r.kind, ALLOW_CIDR);
        CHECK_EQ_INT(r.family, AF_INET6);
        CHECK_EQ_INT(r.prefix, 128);
        CHECK_EQ_INT(r.port, 443);
        char a[INET6_ADDRSTRLEN];
        CHECK_EQ_STR(inet_ntop(AF_INET6, &r.addr6, a, sizeof(a)), "2001:db8::5");

        /* Canonical forms: brackets only with a port, host bits cleared, lower case. */
        CHECK_EQ_STR(canon("[2001:db8::5]:443"), "[2001:db8::5]:443");
        CHECK_EQ_STR(canon("[2001:DB8::5]"), "2001:db8::5");
        CHECK_EQ_STR(canon("2001:db8::5"), "2001:db8::5");
        CHECK_EQ_STR(canon("2001:db8:0:0::5/128"), "2001:db8::5");
        CHECK_EQ_STR(canon("2001:db8:1:2::9/48"), "2001:db8:1::/48");
        CHECK_EQ_STR(canon("[2001:db8:1:2::9/48]:8080"), "[2001:db8:1::/48]:8080");
        CHECK_EQ_STR(canon("::/0"), "::/0");
        CHECK_EQ_STR(canon("[::/0]:53"), "[::/0]:53");
        /* The last group of an unbracketed address is part of it, not a port. */
        CHECK_EQ_STR(canon("2001:db8::5:443"), "2001:db8::5:443");
        CHECK_EQ_INT(netpolicy_rule_parse("2001:db8::5:443", &r), 0);
        CHECK_EQ_INT(r.port, 0);
        /* Round trip. */
        const char *again = canon("[2001:db8:1::/48]:8080");
        CHECK_EQ_STR(canon(again), "[2001:db8:1::/48]:8080");
}

static void test_netpolicy_rule_parse__ipv6_invalid(void)
{
        static const char *const bad[] = {
            "[2001:db8::5",        /* unclosed */
            "[2001:db8::5]443",    /* no colon before the port */
            "[2001:db8::5]:",      /* empty port */
            "[2001:db8::5]:0",     /* port 0 */
            "[2001:db8::5]:65536", /* too large */
            "[2001:db8::5]:+80",   /* sign */
            "[2001:db8::5]:80x",   /* junk */
            "[2001:db8::5]:80:81", /* two ports */
            "[198.51.100.7]:80",   /* IPv4 in brackets */
            "[example.com]:80",    /* a name in brackets */
            "[]:80",               /* nothing */
            "2001:db8::/129",      /* prefix too long */
            "2001:db8::/",         /* empty prefix */
            "2001:db8::/-1",       /* sign */
            "2001:db8::/4x",       /* junk */
            "2001:db8:::5",        /* not an address */
            "2001:db8::5%eth0",    /* scope */
            "[2001:db8::5]/64",    /* prefix outside the brackets */
            "198.51.100.7/33",     /* and the v4 ones still refuse */
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                struct allow_rule r;
                int k = netpolicy_rule_parse(bad[i], &r);
                if (k != -EINVAL)
                        fprintf(stderr, "  accepted: %s\n", bad[i]);
                CHECK_EQ_INT(k, -EINVAL);
        }
}

static void test_netpolicy_cidrs__families(void)
{
        struct netpolicy p = {.mode = NET_ALLOW};
        struct allow_rule rules[3];
        CHECK_EQ_INT(netpolicy_rule_parse("198.51.100.0/24:80", &rules[0]), 0);
        CHECK_EQ_INT(netpolicy_rule_parse("example.com", &rules[1]), 0);
        CHECK_EQ_INT(netpolicy_rule_parse("[2001:db8::/32]:443", &rules[2]), 0);
        p.rules = rules;
        p.n_rules = ELEMENTSOF(rules);
        struct nft_cidr_rule out[4];
        CHECK_EQ_INT(netpolicy_cidrs(&p, out, ELEMENTSOF(out)), 2);
        CHECK_EQ_INT(out[0].family, AF_INET);
        CHECK_EQ_INT(out[0].prefix, 24);
        CHECK_EQ_INT(out[0].port, 80);
        CHECK_EQ_INT(out[1].family, AF_INET6);
        CHECK_EQ_INT(out[1].prefix, 32);
        CHECK_EQ_INT(out[1].port, 443);
        char a[INET6_ADDRSTRLEN];
        CHECK_EQ_STR(inet_ntop(AF_INET6, &out[1].addr6, a, sizeof(a)), "2001:db8::");
        /* A name rule is not a CIDR and never matches an address literal's text. */
        uint16_t port;
        CHECK(!netpolicy_allows_name(&p, "2001:db8::", &port));
        CHECK(netpolicy_allows_name(&p, "example.com", &port));
}

int main(void)
{
        RUN(test_netpolicy_rule_parse__ipv4_and_names);
        RUN(test_netpolicy_rule_parse__ipv6);
        RUN(test_netpolicy_rule_parse__ipv6_invalid);
        RUN(test_netpolicy_cidrs__families);
        UNIT_EXIT();
}

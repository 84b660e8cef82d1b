/* Unit tests of src/lib/parse.c: the parsers every user-supplied size, duration, rate, CPU
 * count and name goes through, in the daemon and the CLI alike. */
#include "lib/parse.h"
#include "lib/util.h"

#include "unit.h"

#include <inttypes.h>

#define KIB 1024ULL
#define MIB (1024ULL * KIB)
#define GIB (1024ULL * MIB)
#define TIB (1024ULL * GIB)

/* Parse s with fn; return the error (or 0) and the value (UINT64_MAX when untouched). */
#define PARSE(fn, s, val) ((val) = UINT64_MAX, fn((s), &(val)))

static void test_parse_size__units(void)
{
        uint64_t v;
        CHECK_EQ_INT(PARSE(parse_size, "0", v), 0);
        CHECK_EQ_INT(v, 0);
        CHECK_EQ_INT(PARSE(parse_size, "4096", v), 0);
        CHECK_EQ_INT(v, 4096);
        CHECK_EQ_INT(PARSE(parse_size, "64k", v), 0);
        CHECK_EQ_INT(v, 64 * KIB);
        CHECK_EQ_INT(PARSE(parse_size, "64K", v), 0);
        CHECK_EQ_INT(v, 64 * KIB);
        CHECK_EQ_INT(PARSE(parse_size, "512M", v), 0);
        CHECK_EQ_INT(v, 512 * MIB);
        CHECK_EQ_INT(PARSE(parse_size, "512MiB", v), 0);
        CHECK_EQ_INT(v, 512 * MIB);
        CHECK_EQ_INT(PARSE(parse_size, "2G", v), 0);
        CHECK_EQ_INT(v, 2 * GIB);
        CHECK_EQ_INT(PARSE(parse_size, "2gb", v), 0);
        CHECK_EQ_INT(v, 2 * GIB);
        CHECK_EQ_INT(PARSE(parse_size, "1T", v), 0);
        CHECK_EQ_INT(v, TIB);
        CHECK_EQ_INT(PARSE(parse_size, "100b", v), 0);
        CHECK_EQ_INT(v, 100);
}

static void test_parse_size__fractions(void)
{
        uint64_t v;
        CHECK_EQ_INT(PARSE(parse_size, "1.5G", v), 0);
        CHECK_EQ_INT(v, 3 * GIB / 2);
        CHECK_EQ_INT(PARSE(parse_size, "0.5k", v), 0);
        CHECK_EQ_INT(v, 512);
        CHECK_EQ_INT(PARSE(parse_size, ".5M", v), 0);
        CHECK_EQ_INT(v, MIB / 2);
        CHECK_EQ_INT(PARSE(parse_size, "2.", v), 0);
        CHECK_EQ_INT(v, 2);
        /* A fraction of a byte rounds up rather than to zero. */
        CHECK_EQ_INT(PARSE(parse_size, "1.5", v), 0);
        CHECK_EQ_INT(v, 2);
}

static void test_parse_size__invalid(void)
{
        static const char *bad[] = {
            "",     "12Q",   "-1",   "+1",  "1e5", " 1", "1 ",   "1 G",  "M",   ".",
            "1..5", "1.5.5", "0x10", "1GG", "1G1", "G1", "1,5G", "12\n", "nan", "inf",
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                uint64_t v;
                int r = PARSE(parse_size, bad[i], v);
                if (r != -EINVAL)
                        fprintf(stderr, "  parse_size(\"%s\") = %d\n", bad[i], r);
                CHECK_EQ_INT(r, -EINVAL);
                CHECK(v == UINT64_MAX); /* ret_ untouched on failure */
        }
        uint64_t v;
        CHECK_EQ_INT(PARSE(parse_size, NULL, v), -EINVAL);
}

static void test_parse_size__overflow(void)
{
        uint64_t v;
        CHECK_EQ_INT(PARSE(parse_size, "99999999999999999999", v), -ERANGE);
        CHECK(v == UINT64_MAX);
        CHECK_EQ_INT(PARSE(parse_size, "100000000T", v), -ERANGE);
        CHECK_EQ_INT(PARSE(parse_size, "18446744073709551616", v), -ERANGE);
        /* Far too long to be a size at all. */
        CHECK(PARSE(parse_size, "00000000000000000000000000000000000000001", v) < 0);
        /* Large but representable. */
        CHECK_EQ_INT(PARSE(parse_size, "1024T", v), 0);
        CHECK_EQ_INT(v, 1024 * TIB);
}

static void test_parse_duration__units(void)
{
        uint64_t v;
        CHECK_EQ_INT(PARSE(parse_duration_s, "90s", v), 0);
        CHECK_EQ_INT(v, 90);
        CHECK_EQ_INT(PARSE(parse_duration_s, "90", v), 0);
        CHECK_EQ_INT(v, 90);
        CHECK_EQ_INT(PARSE(parse_duration_s, "30m", v), 0);
        CHECK_EQ_INT(v, 30 * 60);
        CHECK_EQ_INT(PARSE(parse_duration_s, "24h", v), 0);
        CHECK_EQ_INT(v, 24 * 3600);
        CHECK_EQ_INT(PARSE(parse_duration_s, "7d", v), 0);
        CHECK_EQ_INT(v, 7 * 86400);
        CHECK_EQ_INT(PARSE(parse_duration_s, "1.5h", v), 0);
        CHECK_EQ_INT(v, 5400);
        CHECK_EQ_INT(PARSE(parse_duration_s, "0", v), 0);
        CHECK_EQ_INT(v, 0);
}

static void test_parse_duration__milliseconds_round_up(void)
{
        uint64_t v;
        CHECK_EQ_INT(PARSE(parse_duration_s, "1500ms", v), 0);
        CHECK_EQ_INT(v, 2);
        CHECK_EQ_INT(PARSE(parse_duration_s, "1ms", v), 0);
        CHECK_EQ_INT(v, 1);
        CHECK_EQ_INT(PARSE(parse_duration_s, "1000ms", v), 0);
        CHECK_EQ_INT(v, 1);
        CHECK_EQ_INT(PARSE(parse_duration_s, "0ms", v), 0);
        CHECK_EQ_INT(v, 0);
}

/* Exact decimal fractions of a unit must not gain a second from floating-point error. */
static void test_parse_duration__decimal_exactness(void)
{
        uint64_t v;
        CHECK_EQ_INT(PARSE(parse_duration_s, "0.3m", v), 0);
        CHECK_EQ_INT(v, 18);
        CHECK_EQ_INT(PARSE(parse_duration_s, "1.1h", v), 0);
        CHECK_EQ_INT(v, 3960);
        CHECK_EQ_INT(PARSE(parse_duration_s, "0.7m", v), 0);
        CHECK_EQ_INT(v, 42);
}

static void test_parse_duration__invalid(void)
{
        static const char *bad[] = {"", "-5s", "s", "10x", "1 s", "5sec", "1e3", "10mss", "m5"};
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                uint64_t v;
                int r = PARSE(parse_duration_s, bad[i], v);
                if (r != -EINVAL)
                        fprintf(stderr, "  parse_duration_s(\"%s\") = %d\n", bad[i], r);
                CHECK_EQ_INT(r, -EINVAL);
                CHECK(v == UINT64_MAX);
        }
        uint64_t v;
        /* More than the 100 years the parser allows. */
        CHECK_EQ_INT(PARSE(parse_duration_s, "100000d", v), -ERANGE);
        CHECK_EQ_INT(PARSE(parse_duration_s, "99999999999999999999", v), -ERANGE);
}

static void test_parse_rate__units(void)
{
        uint64_t v;
        CHECK_EQ_INT(PARSE(parse_rate_bps, "10mbit", v), 0);
        CHECK_EQ_INT(v, 10000000);
        CHECK_EQ_INT(PARSE(parse_rate_bps, "10Mbit", v), 0);
        CHECK_EQ_INT(v, 10000000);
        CHECK_EQ_INT(PARSE(parse_rate_bps, "1gbit", v), 0);
        CHECK_EQ_INT(v, 1000000000);
        CHECK_EQ_INT(PARSE(parse_rate_bps, "500kbit", v), 0);
        CHECK_EQ_INT(v, 500000);
        CHECK_EQ_INT(PARSE(parse_rate_bps, "2mbyte", v), 0);
        CHECK_EQ_INT(v, 16000000);
        CHECK_EQ_INT(PARSE(parse_rate_bps, "1.5mbit", v), 0);
        CHECK_EQ_INT(v, 1500000);
        CHECK_EQ_INT(PARSE(parse_rate_bps, "100bit", v), 0);
        CHECK_EQ_INT(v, 100);
}

static void test_parse_rate__invalid(void)
{
        static const char *bad[] = {"", "10", "10m", "10M", "-1mbit", "mbit", "10 mbit", "10mbits"};
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                uint64_t v;
                int r = PARSE(parse_rate_bps, bad[i], v);
                if (r != -EINVAL)
                        fprintf(stderr, "  parse_rate_bps(\"%s\") = %d\n", bad[i], r);
                CHECK_EQ_INT(r, -EINVAL);
        }
        uint64_t v;
        CHECK_EQ_INT(PARSE(parse_rate_bps, "10000gbit", v), -ERANGE);
}

static void test_parse_cpus__values(void)
{
        uint64_t v;
        CHECK_EQ_INT(PARSE(parse_cpus, "1", v), 0);
        CHECK_EQ_INT(v, 1000);
        CHECK_EQ_INT(PARSE(parse_cpus, "0.5", v), 0);
        CHECK_EQ_INT(v, 500);
        CHECK_EQ_INT(PARSE(parse_cpus, "2.25", v), 0);
        CHECK_EQ_INT(v, 2250);
        CHECK_EQ_INT(PARSE(parse_cpus, "1024", v), 0);
        CHECK_EQ_INT(v, 1024000);
}

/* Decimal fractions are inexact in binary floating point; rounding up must not turn the
 * product into the next millicpu. */
static void test_parse_cpus__decimal_exactness(void)
{
        static const struct {
                const char *s;
                uint64_t milli;
        } cases[] = {
            {"0.01", 10},  {"0.1", 100},  {"0.3", 300},   {"0.7", 700},  {"1.1", 1100},
            {"2.3", 2300}, {"3.3", 3300}, {"4.35", 4350}, {"0.29", 290}, {"1.005", 1005},
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                uint64_t v;
                int r = PARSE(parse_cpus, cases[i].s, v);
                if (r != 0 || v != cases[i].milli)
                        fprintf(stderr, "  parse_cpus(\"%s\") = %d, %" PRIu64 "\n", cases[i].s, r,
                                v);
                CHECK_EQ_INT(r, 0);
                CHECK_EQ_INT(v, cases[i].milli);
        }
}

static void test_parse_cpus__invalid(void)
{
        uint64_t v;
        CHECK(PARSE(parse_cpus, "0", v) < 0);
        CHECK(v == UINT64_MAX);
        CHECK(PARSE(parse_cpus, "0.0", v) < 0);
        CHECK(PARSE(parse_cpus, "0.001", v) < 0); /* below the 0.01 minimum */
        CHECK_EQ_INT(PARSE(parse_cpus, "1025", v), -ERANGE);
        CHECK_EQ_INT(PARSE(parse_cpus, "", v), -EINVAL);
        CHECK_EQ_INT(PARSE(parse_cpus, "-1", v), -EINVAL);
        CHECK_EQ_INT(PARSE(parse_cpus, "1c", v), -EINVAL);
        CHECK_EQ_INT(PARSE(parse_cpus, "1m", v), -EINVAL);
        CHECK_EQ_INT(PARSE(parse_cpus, "one", v), -EINVAL);
}

static void test_name_is_valid(void)
{
        CHECK(name_is_valid("a"));
        CHECK(name_is_valid("agent1"));
        CHECK(name_is_valid("Agent-1_x.y"));
        CHECK(name_is_valid("0abc"));
        CHECK(!name_is_valid(NULL));
        CHECK(!name_is_valid(""));
        CHECK(!name_is_valid("-a"));
        CHECK(!name_is_valid(".a"));
        CHECK(!name_is_valid("_a"));
        CHECK(!name_is_valid("."));
        CHECK(!name_is_valid(".."));
        CHECK(!name_is_valid("a/b"));
        CHECK(!name_is_valid("a b"));
        CHECK(!name_is_valid("a:b"));
        CHECK(!name_is_valid("a\n"));
        CHECK(!name_is_valid("caf\xc3\xa9"));

        char name[80];
        memset(name, 'x', sizeof(name));
        name[63] = 0;
        CHECK(name_is_valid(name)); /* 63 characters: the limit */
        name[63] = 'x';
        name[64] = 0;
        CHECK(!name_is_valid(name));
}

static void test_format_size__values(void)
{
        char buf[32];
        CHECK_EQ_STR(format_size(0, buf, sizeof(buf)), "0");
        CHECK_EQ_STR(format_size(512, buf, sizeof(buf)), "512");
        CHECK_EQ_STR(format_size(1023, buf, sizeof(buf)), "1023");
        CHECK_EQ_STR(format_size(1025, buf, sizeof(buf)), "1025");
        CHECK_EQ_STR(format_size(KIB, buf, sizeof(buf)), "1K");
        CHECK_EQ_STR(format_size(64 * KIB, buf, sizeof(buf)), "64K");
        CHECK_EQ_STR(format_size(512 * MIB, buf, sizeof(buf)), "512M");
        CHECK_EQ_STR(format_size(2 * GIB, buf, sizeof(buf)), "2G");
        CHECK_EQ_STR(format_size(3 * TIB, buf, sizeof(buf)), "3T");
        CHECK_EQ_STR(format_size(1024 * TIB, buf, sizeof(buf)), "1P");
        /* Returns the buffer it was given. */
        CHECK(format_size(1, buf, sizeof(buf)) == buf);
}

/* Whatever format_size prints, parse_size must read back as the same number of bytes. */
static void test_format_size__round_trip(void)
{
        static const uint64_t values[] = {
            0,       1,         1023,        1024,          1536,
            4096,    MIB,       3 * GIB / 2, 512 * MIB + 1, 7 * GIB,
            5 * TIB, 123456789, 2048 * TIB,  (1ULL << 62),  1000 * MIB,
        };
        for (size_t i = 0; i < ELEMENTSOF(values); i++) {
                char buf[32];
                uint64_t back;
                const char *s = format_size(values[i], buf, sizeof(buf));
                int r = PARSE(parse_size, s, back);
                if (r != 0 || back != values[i])
                        fprintf(stderr, "  format_size(%" PRIu64 ") = \"%s\" -> %d, %" PRIu64 "\n",
                                values[i], s, r, back);
                CHECK_EQ_INT(r, 0);
                CHECK(back == values[i]);
        }
}

static void test_format_size__small_buffer(void)
{
        char buf[4];
        memset(buf, 'z', sizeof(buf));
        format_size(123456789, buf, sizeof(buf));
        CHECK(memchr(buf, 0, sizeof(buf)) != NULL); /* truncated, but terminated */
}

int main(void)
{
        RUN(test_parse_size__units);
        RUN(test_parse_size__fractions);
        RUN(test_parse_size__invalid);
        RUN(test_parse_size__overflow);
        RUN(test_parse_duration__units);
        RUN(test_parse_duration__milliseconds_round_up);
        RUN(test_parse_duration__decimal_exactness);
        RUN(test_parse_duration__invalid);
        RUN(test_parse_rate__units);
        RUN(test_parse_rate__invalid);
        RUN(test_parse_cpus__values);
        RUN(test_parse_cpus__decimal_exactness);
        RUN(test_parse_cpus__invalid);
        RUN(test_name_is_valid);
        RUN(test_format_size__values);
        RUN(test_format_size__round_trip);
        RUN(test_format_size__small_buffer);
        UNIT_EXIT();
}

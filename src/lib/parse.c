#include "lib/parse.h"
#include "lib/util.h"

#include <ctype.h>
#include <math.h>

/* Decimal number with optional fraction, then a unit suffix looked up in units[]. */
struct unit {
        const char *suffix;
        double mult;
};

static int parse_with_units(const char *s, const struct unit *units, size_t n_units,
                            double max, uint64_t *ret)
{
        if (!s || !*s || strlen(s) > 32)
                return -EINVAL;
        const char *p = s;
        if (!isdigit((unsigned char)*p) && *p != '.')
                return -EINVAL;
        double v = 0;
        bool digits = false;
        while (isdigit((unsigned char)*p)) {
                v = v * 10 + (*p++ - '0');
                digits = true;
        }
        if (*p == '.') {
                p++;
                double scale = 0.1;
                while (isdigit((unsigned char)*p)) {
                        v += (*p++ - '0') * scale;
                        scale /= 10;
                        digits = true;
                }
        }
        if (!digits)
                return -EINVAL;
        for (size_t i = 0; i < n_units; i++) {
                if (strcasecmp(p, units[i].suffix) == 0) {
                        double r = ceil(v * units[i].mult);
                        if (r > max)
                                return -ERANGE;
                        *ret = (uint64_t)r;
                        return 0;
                }
        }
        return -EINVAL;
}

int parse_size(const char *s, uint64_t *ret)
{
        static const struct unit units[] = {
                {"", 1},           {"b", 1},
                {"k", 1024.0},     {"kb", 1024.0},     {"kib", 1024.0},
                {"m", 1048576.0},  {"mb", 1048576.0},  {"mib", 1048576.0},
                {"g", 1073741824.0}, {"gb", 1073741824.0}, {"gib", 1073741824.0},
                {"t", 1099511627776.0}, {"tb", 1099511627776.0}, {"tib", 1099511627776.0},
        };
        return parse_with_units(s, units, ELEMENTSOF(units), 9.0e18, ret);
}

int parse_duration_s(const char *s, uint64_t *ret)
{
        static const struct unit units[] = {
                {"", 1}, {"s", 1}, {"ms", 0.001}, {"m", 60}, {"h", 3600}, {"d", 86400},
        };
        /* 100 years is plenty and keeps time arithmetic far from overflow. */
        return parse_with_units(s, units, ELEMENTSOF(units), 100.0 * 365 * 86400, ret);
}

int parse_rate_bps(const char *s, uint64_t *ret)
{
        static const struct unit units[] = {
                {"bit", 1},        {"kbit", 1e3},     {"mbit", 1e6},  {"gbit", 1e9},
                {"bps", 8},        {"kbps", 8e3},     {"mbps", 8e6},  {"gbps", 8e9},
                {"kbyte", 8e3},    {"mbyte", 8e6},    {"gbyte", 8e9},
        };
        return parse_with_units(s, units, ELEMENTSOF(units), 1e12, ret);
}

int parse_cpus(const char *s, uint64_t *ret_millicpus)
{
        static const struct unit units[] = {{"", 1000}};
        uint64_t v;
        int r = parse_with_units(s, units, 1, 1024000, &v);
        if (r < 0)
                return r;
        if (v < 10)
                return -ERANGE;
        *ret_millicpus = v;
        return 0;
}

bool name_is_valid(const char *s)
{
        if (!s || !isalnum((unsigned char)s[0]))
                return false;
        size_t n = 0;
        for (const char *p = s; *p; p++, n++) {
                if (n >= 63)
                        return false;
                if (!isalnum((unsigned char)*p) && *p != '-' && *p != '_' && *p != '.')
                        return false;
        }
        return true;
}

const char *format_size(uint64_t b, char *buf, size_t len)
{
        static const char *suffix = "KMGTP";
        if (b < 1024 || b % 1024) {
                snprintf(buf, len, "%llu", (unsigned long long)b);
                return buf;
        }
        int i = -1;
        double v = (double)b;
        while (v >= 1024 && i < 4 && (uint64_t)v % 1024 == 0) {
                v /= 1024;
                i++;
        }
        snprintf(buf, len, "%.0f%c", v, suffix[i]);
        return buf;
}

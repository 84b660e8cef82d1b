#include "lib/parse.h"
#include "lib/util.h"
#include "lib/paddock.h"

#include <ctype.h>

/* Decimal number with optional fraction, then a unit suffix looked up in units[]. The unit
 * multiplier is a fraction num/den so that exact inputs ("0.3" CPUs, "1.1h") stay exact:
 * everything is integer arithmetic, rounded up only at the end. */
struct unit {
        const char *suffix;
        uint64_t num, den;
};

static int parse_with_units(const char *s, const struct unit *units, size_t n_units,
                            uint64_t max, uint64_t *ret)
{
        if (!s || !*s || strlen(s) > 32)
                return -EINVAL;
        const char *p = s;
        unsigned __int128 mant = 0, scale = 1;
        bool digits = false;
        while (isdigit((unsigned char)*p)) {
                mant = mant * 10 + (unsigned)(*p++ - '0');
                digits = true;
                if (mant > (unsigned __int128)UINT64_MAX)
                        return -ERANGE;
        }
        if (*p == '.') {
                p++;
                while (isdigit((unsigned char)*p)) {
                        if (scale < 1000000000000ULL) { /* ignore digits past 12 places */
                                mant = mant * 10 + (unsigned)(*p - '0');
                                scale *= 10;
                        }
                        p++;
                        digits = true;
                }
        }
        if (!digits)
                return -EINVAL;
        for (size_t i = 0; i < n_units; i++) {
                if (strcasecmp(p, units[i].suffix) == 0) {
                        unsigned __int128 n = mant * units[i].num;
                        unsigned __int128 d = scale * units[i].den;
                        unsigned __int128 v = (n + d - 1) / d;
                        if (v > max)
                                return -ERANGE;
                        *ret = (uint64_t)v;
                        return 0;
                }
        }
        return -EINVAL;
}

int parse_size(const char *s, uint64_t *ret)
{
        static const struct unit units[] = {
                {"", 1, 1},          {"b", 1, 1},
                {"k", 1ULL << 10, 1}, {"kb", 1ULL << 10, 1}, {"kib", 1ULL << 10, 1},
                {"m", 1ULL << 20, 1}, {"mb", 1ULL << 20, 1}, {"mib", 1ULL << 20, 1},
                {"g", 1ULL << 30, 1}, {"gb", 1ULL << 30, 1}, {"gib", 1ULL << 30, 1},
                {"t", 1ULL << 40, 1}, {"tb", 1ULL << 40, 1}, {"tib", 1ULL << 40, 1},
                {"p", 1ULL << 50, 1}, {"pb", 1ULL << 50, 1}, {"pib", 1ULL << 50, 1},
        };
        return parse_with_units(s, units, ELEMENTSOF(units), 9000000000000000000ULL, ret);
}

int parse_duration_s(const char *s, uint64_t *ret)
{
        static const struct unit units[] = {
                {"", 1, 1},     {"s", 1, 1},     {"ms", 1, 1000},
                {"m", 60, 1},   {"h", 3600, 1},  {"d", 86400, 1},
        };
        /* 100 years is plenty and keeps time arithmetic far from overflow. */
        return parse_with_units(s, units, ELEMENTSOF(units), 100ULL * 365 * 86400, ret);
}

int parse_rate_bps(const char *s, uint64_t *ret)
{
        static const struct unit units[] = {
                {"bit", 1, 1},          {"kbit", 1000, 1},       {"mbit", 1000000, 1},
                {"gbit", 1000000000, 1}, {"bps", 8, 1},          {"kbps", 8000, 1},
                {"mbps", 8000000, 1},    {"gbps", 8000000000, 1}, {"kbyte", 8000, 1},
                {"mbyte", 8000000, 1},   {"gbyte", 8000000000, 1},
        };
        return parse_with_units(s, units, ELEMENTSOF(units), 1000000000000ULL, ret);
}

int parse_cpus(const char *s, uint64_t *ret_millicpus)
{
        static const struct unit units[] = {{"", 1000, 1}};
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
                if (n >= NAME_LEN_MAX)
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

/* Minimal unit-test harness. main() calls RUN(test) for each test and ends with UNIT_EXIT().
 * A test that cannot run here (not root, no btrfs, an old kernel) calls SKIP("why") and
 * returns: it is reported "SKIP", counted apart from passes, never "ok". The last line of
 * every program is "N passed, N failed, N skipped"; a program whose tests all skipped exits
 * 77 so tests/unit/run.sh can say so. */
#pragma once
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int unit_failures;
static int unit_passed __attribute__((unused)), unit_failed __attribute__((unused)),
        unit_skipped __attribute__((unused));
static bool unit_skip_current __attribute__((unused));
static char unit_skip_why[256] __attribute__((unused));

/* Mark the running test skipped; the caller returns (or finishes without checking). */
#define SKIP(...)                                                                                  \
        do {                                                                                       \
                unit_skip_current = true;                                                          \
                snprintf(unit_skip_why, sizeof(unit_skip_why), __VA_ARGS__);                       \
        } while (0)

#define CHECK(cond)                                                                                \
        do {                                                                                       \
                if (!(cond)) {                                                                     \
                        fprintf(stderr, "  FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);          \
                        unit_failures++;                                                           \
                }                                                                                  \
        } while (0)
#define CHECK_EQ_INT(a, b)                                                                         \
        do {                                                                                       \
                long long _a = (long long)(a), _b = (long long)(b);                                \
                if (_a != _b) {                                                                    \
                        fprintf(stderr, "  FAIL %s:%d: %s == %lld, expected %lld\n", __FILE__,     \
                                __LINE__, #a, _a, _b);                                             \
                        unit_failures++;                                                           \
                }                                                                                  \
        } while (0)
#define CHECK_EQ_STR(a, b)                                                                         \
        do {                                                                                       \
                const char *_a = (a), *_b = (b);                                                   \
                if (!_a || !_b || strcmp(_a, _b)) {                                                \
                        fprintf(stderr, "  FAIL %s:%d: %s == \"%s\", expected \"%s\"\n", __FILE__, \
                                __LINE__, #a, _a ? _a : "(null)", _b ? _b : "(null)");             \
                        unit_failures++;                                                           \
                }                                                                                  \
        } while (0)

static inline __attribute__((unused)) void unit_report(const char *name, int failures_before)
{
        if (unit_failures != failures_before) {
                printf("FAIL %s\n", name);
                unit_failed++;
        } else if (unit_skip_current) {
                printf("SKIP %s: %s\n", name, unit_skip_why);
                unit_skipped++;
        } else {
                printf("ok   %s\n", name);
                unit_passed++;
        }
        fflush(stdout);
}

/* RUN(test) runs test(); RUN_ARG(test, arg) runs test(arg). */
#define RUN_ARG(test, arg)                                                                         \
        do {                                                                                       \
                int _before = unit_failures;                                                       \
                unit_skip_current = false;                                                         \
                test(arg);                                                                         \
                unit_report(#test, _before);                                                       \
        } while (0)
#define RUN(test) RUN_ARG(test, )
/* In main(), before any RUN: nothing in this program can run here; say why and exit 77. */
#define UNIT_SKIP_ALL(...)                                                                         \
        do {                                                                                       \
                printf("SKIP %s: ", __FILE__);                                                     \
                printf(__VA_ARGS__);                                                               \
                printf("\n0 passed, 0 failed, 1 skipped\n");                                      \
                fflush(stdout);                                                                    \
                return 77;                                                                         \
        } while (0)
#define UNIT_EXIT()                                                                                \
        do {                                                                                       \
                printf("%d passed, %d failed, %d skipped\n", unit_passed, unit_failed,             \
                       unit_skipped);                                                              \
                fflush(stdout);                                                                    \
                if (unit_failed)                                                                   \
                        return 1;                                                                  \
                return unit_passed == 0 && unit_skipped > 0 ? 77 : 0;                              \
        } while (0)

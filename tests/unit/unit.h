/* Minimal unit-test harness: TEST(name) functions registered by RUN_TESTS in main. */
#pragma once
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int unit_failures;

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

#define RUN(test)                                                                                  \
        do {                                                                                       \
                int _before = unit_failures;                                                       \
                test();                                                                            \
                printf("%s %s\n", unit_failures == _before ? "ok  " : "FAIL", #test);              \
        } while (0)
#define UNIT_EXIT() return unit_failures ? 1 : 0

/* Shared by the libFuzzer targets (tests/fuzz/fuzz_*.c, docs/hacking.md "Fuzzing"). */
#pragma once
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The input as a C string (NUL-terminated copy; an embedded NUL ends it early). */
static inline char *fuzz_strdup(const uint8_t *data, size_t size)
{
        char *s = malloc(size + 1);
        if (!s)
                abort();
        memcpy(s, data, size);
        s[size] = '\0';
        return s;
}

/* An invariant the code under test promised and broke: a finding, like a sanitizer report. */
#define FUZZ_ASSERT(cond)                                                                          \
        do {                                                                                       \
                if (!(cond)) {                                                                     \
                        fprintf(stderr, "%s:%d: invariant broken: %s\n", __FILE__, __LINE__,      \
                                #cond);                                                            \
                        abort();                                                                   \
                }                                                                                  \
        } while (0)

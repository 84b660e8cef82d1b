/* A compact JSON writer for hot paths: the same bytes as jansson's
 * json_dump_callback(j, put, data, JSON_COMPACT | JSON_ENSURE_ASCII), at a fraction of its cost.
 * jansson 2.14 checks for reference loops by printing every object's and array's address with
 * snprintf("%p") into a hash table, and prints every integer with snprintf; a listing of
 * thousands of environments spent a fifth of its time there. This writer walks the tree
 * (jansson values cannot form loops through the API we use: json_object_set never makes a
 * value its own ancestor here) and formats integers itself. Reals, rare, go through jansson. */
#pragma once
#include <jansson.h>
#include <stddef.h>

/* put(text, len, data) returns 0, or non-zero to stop. Returns 0, or -EINVAL (a string that is
 * not UTF-8, a real jansson cannot print, nesting deeper than 64) or -EIO (put refused). */
int json_write_compact(const json_t *j, int (*put)(const char *, size_t, void *), void *data);

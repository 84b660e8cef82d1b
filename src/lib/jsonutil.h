/* Cleanup attribute for jansson values, like _cleanup_free_ for malloc'd memory. */
#pragma once
#include <jansson.h>

/* jansson.h brings json_decrefp() itself (GCC and clang), and json_decref() takes NULL: a
 * definition of our own would clash with it. */
#define _cleanup_json_ __attribute__((cleanup(json_decrefp)))

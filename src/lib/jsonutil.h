/* Cleanup attribute for jansson values, like _cleanup_free_ for malloc'd memory. jansson
 * (>= 2.11, with GCC or clang) defines json_decrefp itself, and it accepts NULL. */
#pragma once
#include <jansson.h>

#define _cleanup_json_ __attribute__((cleanup(json_decrefp)))

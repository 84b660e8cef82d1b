/* The "io" object of POST /v1/envs and PATCH /v1/envs/{name}: disk I/O limits. */
#pragma once
#include "daemon/api.h"

/* j: {"read_bps":..., "write_bps":..., "read_iops":..., "write_iops":...}; bps take a size
 * (bytes or "10M"), iops a count; 0 or null = no limit; absent keys are not given. Fills
 * has[IO_*] and val[IO_*]; on a bad value replies 400 and returns false. */
bool api_io_limits(struct request *r, json_t *j, bool has[4], uint64_t val[4]);

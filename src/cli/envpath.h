/* URL paths of environment resources, with the name percent-encoded. */
#pragma once

#include "cli/client.h"

/* "/v1/envs/NAME[/suffix][?query]"; query is appended as given (already encoded). malloc'd;
 * NULL when out of memory (after saying so). */
char *env_path(struct client *c, const char *name, const char *suffix, const char *query);

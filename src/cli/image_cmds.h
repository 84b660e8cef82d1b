/* Subcommands of `paddock image` that live outside cmd_image.c. */
#pragma once
#include "cli/cli.h"

#include <jansson.h>
#include <stdbool.h>

int image_pull(struct cli *cli, int argc, char **argv);
int image_export(struct cli *cli, int argc, char **argv);
int image_build(struct cli *cli, int argc, char **argv);
/* POST /v1/images?stream=1 with a JSON body; progress on stderr unless quiet. */
int image_job_request(struct cli *cli, const json_t *body, bool quiet);

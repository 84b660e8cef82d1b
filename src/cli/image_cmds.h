/* Subcommands of `paddock image` that live outside cmd_image.c. */
#pragma once
#include "cli/cli.h"

int image_pull(struct cli *cli, int argc, char **argv);
int image_export(struct cli *cli, int argc, char **argv);
int image_build(struct cli *cli, int argc, char **argv);

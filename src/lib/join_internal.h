/* Shared by join.c (exec through a helper forked on demand) and join_slot.c (through a helper
 * forked ahead of time). */
#pragma once
#include "lib/join.h"

/* What a helper writes back: the command's host pid, or an error. */
struct helper_report {
        int err;
        pid_t pid;
        char msg[200];
};

/* The command process, cloned by its exec slot inside every namespace: switch user, confine,
 * exec. */
_Noreturn void join_command_main(const struct join_config *c);
/* Report err ("what: strerror") on fd and exit. */
_Noreturn void join_helper_fail(int fd, int err, const char *what);

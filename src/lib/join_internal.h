/* Shared by join.c (the command's side of an exec) and join_slot.c (the exec slot that clones
 * it). */
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

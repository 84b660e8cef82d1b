/* Terminals for exec sessions, and handing fds between processes.
 *
 * An interactive session's pseudo-terminal is allocated inside the environment, from the
 * devpts instance mounted at its /dev/pts (newinstance), by the command process itself after it
 * switched to the requested user: the slave is then owned by that user, as after a login, and
 * everything the terminal can do (TIOCSTI included) stays within the environment's own pty. The
 * master travels to the daemon over a unix socket (SCM_RIGHTS). */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

/* Open /dev/pts/ptmx below the current root (no symlink followed, never blocks), unlock it and
 * open its slave through the master (TIOCGPTPEER, no path lookup). Both fds O_CLOEXEC, the
 * master O_NONBLOCK, the slave without O_NOCTTY handling done (the caller makes it the
 * controlling terminal). */
int pty_open_here(int *ret_master, int *ret_slave);

/* Set the window size of a terminal fd (either end). Zero sizes are ignored. */
int pty_set_size(int fd, unsigned cols, unsigned rows);

/* Send one fd with a one-byte message over a unix socket. */
int fd_send(int sock, int fd);
/* Receive one fd (O_CLOEXEC) sent by fd_send. -EAGAIN when nothing is there yet (non-blocking
 * socket), -EPIPE when the peer closed without sending, -EBADMSG for anything else. */
int fd_recv(int sock, int *ret_fd);

/* Constants every program of Paddock agrees on: the version, the default socket, name limits.
 * One definition each; the daemon, the CLI and paddock-init include this header. */
#pragma once

#define PADDOCK_VERSION        "0.1.0"
#define PADDOCK_DEFAULT_SOCKET "/run/paddock/paddock.sock"

/* Environment, image, snapshot and user names: [A-Za-z0-9][A-Za-z0-9_.-]{0,62}.
 * NAME_LEN_MAX is the longest valid name; NAME_BUF_SIZE holds one with its NUL. */
#define NAME_LEN_MAX  63
#define NAME_BUF_SIZE (NAME_LEN_MAX + 1)

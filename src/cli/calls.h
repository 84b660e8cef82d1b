/* The two request shapes most verbs are made of: a list fetched and printed as a table, and one
 * request per operand that goes on past a refused one. */
#pragma once

#include "cli/cli.h"
#include "cli/output.h"

#include <jansson.h>
#include <stddef.h>
#include <time.h>

/* Add the row of one list element to t: table_add's result. */
typedef int (*list_row_fn)(struct table *t, const json_t *item, time_t now);

/* GET path and print the array under key as a table with these headers, one row per element,
 * or with --json the answer as it came. EXIT_OK, or EXIT_FAIL after saying why; a NULL path
 * (out of memory, already said) is EXIT_FAIL. */
int call_print_list(struct cli *cli, const char *path, const char *key, const char *const *headers,
                    size_t n_cols, list_row_fn row);

/* One of a row of requests (one per operand): method on path with body (may be NULL); then on
 * stdout plain (plus a newline), or the answer as JSON when plain is NULL or --json was given.
 * EXIT_OK, or EXIT_FAIL after the daemon's message (silently for a NULL path: out of memory). */
int call_one(struct cli *cli, const char *method, const char *path, const json_t *body,
             const char *plain);
/* DELETE prefix/NAME for each operand (escaped), printing each name done: the "rm NAME..."
 * verbs. EXIT_OK when every one was removed, else EXIT_FAIL. */
int call_delete_each(struct cli *cli, const char *prefix, int argc, char **argv);

/* GET path and hand each non-empty line of the streamed answer to print as it arrives (the
 * NDJSON streams the CLI shows live: watch, events); print returns < 0 to stop. EXIT_OK when
 * the stream ended, 128 + SIGPIPE when stdout went away, EXIT_FAIL after saying why (verb
 * names the command in messages). */
typedef int (*line_print_fn)(const char *line, size_t len, void *data);
int call_stream_lines(struct cli *cli, const char *path, const char *verb, line_print_fn print,
                      void *data);

/* The audit log: who changed what, and every command run in an environment.
 *
 * <state root>/audit/audit.log (directory 0700, file 0600), JSON Lines, append-only: one
 * write(2) of a whole line per record on an O_APPEND descriptor, made before the answer it
 * describes is handed to the client (http_config.answering), so a record survives the daemon's
 * kill -9 as soon as the client could have seen the answer. fdatasync runs on a timer
 * AUDIT_SYNC_MS after the first unsynced record, in the sync process (syncer.h) while the loop
 * serves others: a power loss (or a kernel crash) loses at most that window and the sync's own
 * time. Size cap: a record that would take audit.log past max_size first rotates it to
 * audit.log.1 (.1 to .2, ...), keeping `keep` files in all; the oldest goes.
 *
 * A record: {"time": RFC 3339 UTC with milliseconds, "token": "" for the local administrator,
 * "peer": "IP:PORT" (gateway requests only), "action": "METHOD /route/{pattern}", "env",
 * "status", "duration_ms", details...}. Details come from the handler (req_set_note): exec
 * argv (capped at AUDIT_ARGV_MAX bytes; "argv_truncated": true), exit_code; file paths and
 * sizes; the network policy of a PATCH. Never secrets, never file contents or request bodies.
 *
 * Which requests: every method but GET and HEAD, answered or not; an exec (POST .../exec and
 * GET .../exec/ws) is recorded when its command ends, with its exit code; a background process
 * (exec with detach) once when it starts (the 201) and once when it exits. */
#pragma once
#include "daemon/exec.h"
#include "daemon/http.h"
#include "daemon/loop.h"

#include <jansson.h>
#include <stdint.h>

struct syncer;

#define AUDIT_DEFAULT_MAX_SIZE    (16ull << 20)
#define AUDIT_DEFAULT_KEEP        5
#define AUDIT_MAX_KEEP            100
#define AUDIT_SYNC_MS             200
#define AUDIT_ARGV_MAX            4096
#define AUDIT_QUERY_DEFAULT_LIMIT 1000
#define AUDIT_QUERY_MAX_LIMIT     10000

/* "2026-12-02T02:11:03.123Z" */
#define AUDIT_TIME_SIZE 25
const char *audit_time_now(char buf[static AUDIT_TIME_SIZE]);
const char *audit_format_time(int64_t unix_s, unsigned ms, char buf[static AUDIT_TIME_SIZE]);

struct audit_config {
        const char *root;  /* the state directory: the log lives in root/audit */
        uint64_t max_size; /* bytes per file */
        unsigned keep;     /* files kept, the current one included (1..AUDIT_MAX_KEEP) */
        struct loop *loop;
        struct syncer *syncer; /* for the batched fdatasync (syncer.h), or NULL: in place */
};
/* Open (create) the log; until then, and after a failure, nothing is recorded. */
int audit_open(const struct audit_config *cfg);
/* Sync and close (at shutdown; before the syncer is freed). */
void audit_close(void);

/* http_config.answering (through api.c): write r's record now, unless an exec writes it. */
void audit_request_answering(struct request *r);
/* http_config.done (through api_request_done): the record of a request never answered. */
void audit_request_done(struct request *r);

/* argv as a record detail: an array of at most max bytes of strings (AUDIT_ARGV_MAX in the
 * log), and whether it was cut short (*ret_truncated may be NULL). */
json_t *audit_argv_json(char *const *argv, size_t max, bool *ret_truncated);

/* An exec's record, written when its command ends (exec.c calls audit_exec_end). Made from
 * the request before the exec starts; exec_start takes it over on success, otherwise the
 * caller frees it. */
struct audit_exec;
struct audit_exec *audit_exec_begin(struct request *r, char *const *argv);
void audit_exec_end(struct audit_exec *a, const struct exec_result *res);
void audit_exec_free(struct audit_exec *a);

/* A query: records matching every filter given, oldest first, the newest `limit` ones. */
struct audit_filter {
        const char *env;             /* NULL: any */
        const char *token;           /* NULL: any; "" = the local administrator */
        char since[AUDIT_TIME_SIZE]; /* "": from the beginning */
        size_t limit;
};
int audit_query(const struct audit_filter *f, json_t **ret_records);

/* GET /v1/audit (api_audit.c) */
struct engine;
void api_audit_get(struct request *r, struct engine *e);

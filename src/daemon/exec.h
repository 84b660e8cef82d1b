/* Exec sessions: one command running inside an environment, its pipes watched by the event
 * loop, its output capped, its whole process tree killed on timeout. */
#pragma once
#include "daemon/engine.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define EXEC_DEFAULT_MAX_OUTPUT (16u << 20)
#define EXEC_MAX_OUTPUT_LIMIT (256u << 20)
#define EXEC_MAX_ACTIVE 256

struct exec_request {
        char **argv;      /* NULL-terminated */
        json_t *env;      /* object of strings or NULL */
        const char *cwd;  /* NULL = home */
        const char *user; /* NULL = root */
        const void *stdin_data;
        size_t stdin_len;
        bool stdin_from_fd;  /* feed stdin from stdin_fd (read to its end) instead */
        int stdin_fd;
        uint64_t timeout_ms; /* 0 = none */
        size_t max_output;   /* stdout + stderr bytes kept */
};

struct exec_result {
        int exit_code; /* 128+N when killed by signal N */
        bool timed_out;
        bool truncated;
        uint64_t duration_ms;
};

struct exec_callbacks {
        void (*output)(void *data, int stream, const char *buf, size_t len); /* stream 1 or 2 */
        void (*done)(void *data, const struct exec_result *res);
};

struct exec_session;

int exec_start(struct engine *e, struct env *v, const struct exec_request *rq,
               const struct exec_callbacks *cb, void *data, struct exec_session **ret, char *err,
               size_t errlen);
/* PID 1 of env is gone, so every exec in it is dying: collect those processes now (waiting up
 * to wait_ms in all), so that no zombie keeps the environment's cgroup busy. */
void exec_reap_env(const char *env, unsigned wait_ms);
/* Signal the command process (not its children: they get it from it, as with kill(1)). */
int exec_signal(struct exec_session *s, int sig);
/* The client is gone: the command keeps running, its output is dropped. */
void exec_detach(struct exec_session *s);

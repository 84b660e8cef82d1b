/* Durable state in SQLite (WAL). Schema changes are numbered migrations run at open.
 * An acknowledged change is on disk (synchronous=FULL on commit) before the API answers. */
#pragma once
#include "lib/paddock.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct state;

struct env_row {
        char name[NAME_BUF_SIZE];
        char kind[16];   /* "computer" | "sandbox" */
        char image[NAME_BUF_SIZE];
        char status[16]; /* "creating" | "running" | "stopped" | "deleting" */
        uint32_t uid_base;
        int64_t pid;          /* host pid of PID 1 while running, else 0 */
        uint64_t pid_start;   /* its start time (clock ticks since boot) */
        int64_t created_at;   /* unix seconds */
        int64_t expires_at;   /* unix seconds, 0 = never */
        bool autostart;
        char *spec;           /* JSON: limits, env, labels, network, ttl (owned) */
        char ip[16];          /* IPv4 address when networked, else "" */
        char owner[NAME_BUF_SIZE]; /* the token that created it; "" = the administrator */
};

struct port_row {
        char proto[4]; /* "tcp" | "udp" */
        uint16_t host_port;
        char env[NAME_BUF_SIZE];
        uint16_t port;
};

struct image_row {
        char name[NAME_BUF_SIZE];
        int64_t created_at;
        uint64_t size;
};

/* An API token (the secret itself is never stored). Limits: 0 = none. */
struct token_row {
        char name[NAME_BUF_SIZE];
        char hash[65];       /* SHA-256 of the whole secret string, lowercase hex */
        bool admin;
        uint64_t max_envs;
        uint64_t max_cpus;   /* thousandths of a CPU, summed over running environments */
        uint64_t max_memory; /* bytes, summed over running environments */
        uint64_t max_disk;   /* bytes, summed over the disk limits of all its computers */
        double rate;         /* requests per second */
        int64_t expires_at;  /* unix seconds, 0 = never */
        int64_t created_at;
};

/* Make the state directory root private: root itself and its known directories 0700, the
 * database (with -wal and -shm), the lock, the pool file and the driver record 0600. Fixes
 * installations made by older versions (root 0711, database 0644). Symlinks and anything but
 * regular files and directories are left alone, never followed. */
int state_dir_make_private(const char *root);

/* Open (creating 0600) the database at path. */
int state_open(const char *path, struct state **ret);
void state_close(struct state *s);

int state_env_insert(struct state *s, const struct env_row *e); /* -EEXIST on duplicate name */
int state_env_update(struct state *s, const struct env_row *e);
int state_env_delete(struct state *s, const char *name);
/* The same two writes without waiting for the disk: the commit is in the WAL, visible at once,
 * but not synced (synchronous=NORMAL for this one commit; a synced one costs an fdatasync,
 * about 0.4 ms here). The next synced commit or checkpoint makes it durable (the WAL is written
 * in order); a crash before that loses it and never anything else. Only for journal steps
 * whose loss the next start repairs on its own (see engine_lifecycle.c). */
int state_env_insert_unsynced(struct state *s, const struct env_row *e);
int state_env_delete_unsynced(struct state *s, const char *name);
int state_env_update_unsynced(struct state *s, const struct env_row *e);
/* An fd of the write-ahead log (opened once, kept): fdatasync(2) of it, from any thread, makes
 * every commit so far durable, unsynced ones included, as a synced commit would. <0: -errno. */
int state_wal_fd(struct state *s);
/* All rows, ordered by creation; free with state_env_rows_free. */
int state_env_list(struct state *s, struct env_row **ret, size_t *ret_n);
void state_env_rows_free(struct env_row *rows, size_t n);

int state_port_insert(struct state *s, const struct port_row *p); /* -EEXIST if taken */
int state_port_delete(struct state *s, const char *proto, uint16_t host_port);
/* env NULL = all environments. */
int state_port_list(struct state *s, const char *env, struct port_row **ret, size_t *ret_n);

int state_image_insert(struct state *s, const struct image_row *i);
int state_image_delete(struct state *s, const char *name);
int state_image_list(struct state *s, struct image_row **ret, size_t *ret_n);

int state_token_insert(struct state *s, const struct token_row *t); /* -EEXIST on duplicate */
int state_token_delete(struct state *s, const char *name);          /* -ENOENT if missing */
/* All rows, ordered by name; free() the array. */
int state_token_list(struct state *s, struct token_row **ret, size_t *ret_n);

/* A sandbox made through the E2B API (daemon/e2b_api.c); the row goes with its environment. */
struct e2b_row {
        char id[NAME_BUF_SIZE];          /* the environment's name */
        char template_id[NAME_BUF_SIZE]; /* as asked ("base") */
        char token_hash[4 * 65];         /* SHA-256 hex of its envd access tokens, ','-joined
                                          * (at most 4: connect issues one more) */
        char user[33];                   /* the default user ("user", or "root") */
        char home[256];                  /* that user's home */
        int64_t started_at;              /* unix milliseconds */
        char *metadata;                  /* JSON object text (owned) */
};
int state_e2b_insert(struct state *s, const struct e2b_row *b); /* -EEXIST on duplicate */
int state_e2b_delete(struct state *s, const char *id);          /* -ENOENT if missing */
int state_e2b_set_tokens(struct state *s, const char *id, const char *token_hash);
/* Rows ordered by id: the one named id (NULL: any) with ids after `after`, whose environment
 * belongs to owner (NULL: anyone), at most limit. */
int state_e2b_list(struct state *s, const char *id, const char *owner, const char *after,
                   size_t limit, struct e2b_row **ret, size_t *ret_n);
void state_e2b_rows_free(struct e2b_row *rows, size_t n);

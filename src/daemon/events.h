/* Events: what happens to environments, as it happens, for GET /v1/events subscribers.
 *
 * The engine calls events_emit() (one line where the thing happens); each event becomes one
 * JSON line {"time","type","env",...detail} queued for every subscriber allowed to see it (the
 * administrator: all; a token: events of its own environments and its own quota refusals).
 * Nothing is kept for later: an event with no subscriber costs one check.
 *
 * A subscriber's queue is bounded (EVENTS_QUEUE_MAX lines); one that falls so far behind that
 * its queue is full gets, after what was queued, a last line {"type":"overflow"} and its
 * stream ends. Nothing waits for a subscriber, and nothing grows without bound. */
#pragma once
#include "daemon/engine.h"
#include "daemon/http.h"

#include <jansson.h>

#define EVENTS_QUEUE_MAX       256 /* lines queued per subscriber */
#define EVENTS_MAX_SUBSCRIBERS 128
#define EVENTS_ARGV_MAX        1024 /* bytes of an exec_started line's argv */
/* Lines are shared by the queues that hold them; at worst every subscriber holds its own 256
 * lines of at most ~1.5 KiB: under 50 MiB in all. */

/* Types: created started stopped paused resumed oom expired deleted snapshot fork restore
 * exec_started exec_exited quota_refused. detail (stolen, may be NULL) is merged into the
 * line. env and owner are the environment's name and owning token ("" = administrator). */
void events_emit(const char *type, const char *env, const char *owner, json_t *detail);
/* The same for an environment. */
void events_env(const char *type, const struct env *v, json_t *detail);

/* The environment's PID 1 is gone (before its cgroup goes): an oom event if the OOM killer
 * struck since the last look, then stopped. */
void events_env_stopped(struct engine *e, const struct env *v);
/* A command started in / ended in environment env: exec_started / exec_exited (and oom first
 * if the OOM killer struck since the last look: the memory.events oom_kill count on cgroup v2,
 * memory.oom_control on v1, read once per exit). id: "exec-N". */
void events_exec_started(const struct env *v, const char *id, char *const *argv);
void events_exec_exited(struct engine *e, const char *env, const char *id, int exit_code,
                        uint64_t duration_ms);
/* A token's request was refused by its quota (the tokens code calls it): seen by that token
 * and administrators. */
void events_quota_refused(const char *token, const char *limit, const char *message);

/* The event types, in the order of their bits in a type mask. */
extern const char *const events_types[];
size_t events_type_count(void);
int events_type_bit(const char *name); /* -1: unknown */
/* Stream events to r (200, NDJSON) for a caller: admin sees all, else only events whose owner
 * (or quota_refused token) is token. env NULL: any; types: a mask of bits, 0: any. Replies 503
 * when EVENTS_MAX_SUBSCRIBERS already listen. */
void events_subscribe(struct request *r, bool admin, const char *token, const char *env,
                      uint32_t types);

/* GET /v1/events (api_events.c) */
void api_events_get(struct request *r, struct engine *e);
/* A token was revoked or expired: end its event streams now. */
void events_end_token(const char *token);
/* At shutdown: end every stream. */
void events_close_all(void);

/* Events (see events.h): one JSON line per event, shared by reference among the subscribers
 * that may see it, each with a bounded queue. */
#include "daemon/events.h"
#include "daemon/audit.h"
#include "daemon/log.h"
#include "lib/paddock.h"
#include "lib/util.h"

const char *const events_types[] = {
    "created", "started",      "stopped",     "paused",        "resumed",
    "oom",     "expired",      "deleted",     "snapshot",      "fork",
    "restore", "exec_started", "exec_exited", "quota_refused",
    "idle",    "woke", /* engine_idle.c */
    NULL,
};

size_t events_type_count(void)
{
        return ELEMENTSOF(events_types) - 1;
}

int events_type_bit(const char *name)
{
        for (size_t i = 0; events_types[i]; i++)
                if (!strcmp(events_types[i], name))
                        return (int)i;
        return -1;
}

/* One event's line, shared by the queues that hold it. */
struct line {
        unsigned refs;
        size_t len;
        char text[];
};

static void line_unref(struct line *l)
{
        if (l && --l->refs == 0)
                free(l);
}

struct subscriber {
        struct request *req; /* NULL once its stream is closed */
        bool admin;
        char token[NAME_BUF_SIZE];
        char env[NAME_BUF_SIZE]; /* "" = any */
        uint32_t types;          /* 0 = any */
        struct line *queue[EVENTS_QUEUE_MAX];
        size_t head, n; /* ring */
        size_t off;     /* bytes of queue[head] already sent */
        bool overflow;  /* the queue filled: after it, the overflow line, then the end */
        bool ending;    /* the daemon shuts down: the end at once */
        size_t overflow_off;
        struct subscriber *next;
};

static struct subscriber *subscribers;
static size_t n_subscribers;

static const char overflow_line[] = "{\"type\":\"overflow\"}\n";

static bool sees(const struct subscriber *s, int bit, const char *env, const char *owner)
{
        if (s->types && !(s->types & (1u << bit)))
                return false;
        if (s->env[0] && strcmp(s->env, env) != 0)
                return false;
        return s->admin || strcmp(s->token, owner) == 0;
}

void events_emit(const char *type, const char *env, const char *owner, json_t *detail)
{
        int bit = events_type_bit(type);
        if (bit < 0 || !subscribers) {
                json_decref(detail);
                return;
        }
        char now[AUDIT_TIME_SIZE];
        json_t *j = json_pack("{s:s,s:s,s:s}", "time", audit_time_now(now), "type", type, "env",
                              env ? env : "");
        const char *k;
        json_t *v;
        json_object_foreach(detail, k, v)
        {
                if (j && !json_object_get(j, k))
                        json_object_set(j, k, v);
        }
        json_decref(detail);
        char *text =
            j ? json_dumps(j, JSON_COMPACT | JSON_ENSURE_ASCII | JSON_PRESERVE_ORDER) : NULL;
        json_decref(j);
        size_t len = text ? strlen(text) : 0;
        struct line *l = text ? malloc(sizeof(*l) + len + 1) : NULL;
        if (!l) {
                free(text);
                return;
        }
        l->refs = 1; /* ours, until the loop below is done */
        l->len = len + 1;
        memcpy(l->text, text, len);
        l->text[len] = '\n';
        free(text);
        for (struct subscriber *s = subscribers; s; s = s->next) {
                if (!s->req || s->overflow || s->ending ||
                    !sees(s, bit, env ? env : "", owner ? owner : ""))
                        continue;
                if (s->n == EVENTS_QUEUE_MAX) {
                        s->overflow = true; /* fell behind: no more events for it */
                } else {
                        l->refs++;
                        s->queue[(s->head + s->n++) % EVENTS_QUEUE_MAX] = l;
                }
                http_stream_wake(s->req);
        }
        line_unref(l);
}

void events_env(const char *type, const struct env *v, json_t *detail)
{
        events_emit(type, env_name(v), env_owner(v), detail);
}

/* ---------------------------------------------------------------------------------- OOM */

/* The OOM-kill count last seen per environment, for the running ones where it was > 0 (the
 * count starts at 0 with every start, as the cgroup is made anew). */
struct oom_seen {
        char env[NAME_BUF_SIZE];
        uint64_t kills;
        struct oom_seen *next;
};
static struct oom_seen *oom_seen;

static struct oom_seen **oom_find(const char *env)
{
        struct oom_seen **p = &oom_seen;
        while (*p && strcmp((*p)->env, env) != 0)
                p = &(*p)->next;
        return p;
}

/* One read of the environment's cgroup statistics. */
static void check_oom(struct engine *e, const struct env *v, bool forget)
{
        struct oom_seen **p = oom_find(env_name(v));
        uint64_t before = *p ? (*p)->kills : 0;
        uint64_t kills = 0;
        if (cgroup_env_oom_kills(engine_cgroups(e), env_cgroup(v), &kills) >= 0 && kills > before) {
                events_env("oom", v, json_pack("{s:I}", "oom_kills", (json_int_t)kills));
                if (!forget && !*p && (*p = calloc(1, sizeof(**p))))
                        snprintf((*p)->env, sizeof((*p)->env), "%s", env_name(v));
                if (!forget && *p)
                        (*p)->kills = kills;
        }
        if (forget && *p) {
                struct oom_seen *gone = *p;
                *p = gone->next;
                free(gone);
        }
}

void events_env_stopped(struct engine *e, const struct env *v)
{
        check_oom(e, v, true); /* and forget the count: the next start counts anew */
        events_env("stopped", v, NULL);
}

void events_exec_started(const struct env *v, const char *id, char *const *argv)
{
        if (!subscribers)
                return;
        json_t *d = json_pack("{s:s,s:o}", "exec", id, "argv",
                              audit_argv_json(argv, EVENTS_ARGV_MAX, NULL));
        events_env("exec_started", v, d);
}

void events_exec_exited(struct engine *e, const char *env, const char *id, int exit_code,
                        uint64_t duration_ms)
{
        struct env *v = engine_find(e, env);
        if (!v)
                return;
        check_oom(e, v, false); /* also without subscribers: keeps the count current */
        events_env("exec_exited", v,
                   json_pack("{s:s,s:i,s:I}", "exec", id, "exit_code", exit_code, "duration_ms",
                             (json_int_t)duration_ms));
}

void events_quota_refused(const char *token, const char *limit, const char *message)
{
        events_emit("quota_refused", "", token,
                    json_pack("{s:s,s:s,s:s}", "token", token ? token : "", "limit",
                              limit ? limit : "", "message", message ? message : ""));
}

/* ---------------------------------------------------------------------------------- streams */

static void subscriber_free(struct subscriber *s)
{
        for (struct subscriber **p = &subscribers; *p; p = &(*p)->next)
                if (*p == s) {
                        *p = s->next;
                        break;
                }
        for (size_t i = 0; i < s->n; i++)
                line_unref(s->queue[(s->head + i) % EVENTS_QUEUE_MAX]);
        n_subscribers--;
        free(s);
}

static ssize_t stream_read(void *data, char *buf, size_t max)
{
        struct subscriber *s = data;
        size_t done = 0;
        if (s->ending)
                return -1;
        while (done < max && s->n > 0) {
                struct line *l = s->queue[s->head];
                done += take_pending(buf + done, max - done, l->text, l->len, &s->off);
                if (s->off < l->len)
                        break;
                line_unref(l);
                s->queue[s->head] = NULL;
                s->head = (s->head + 1) % EVENTS_QUEUE_MAX;
                s->n--;
                s->off = 0;
        }
        if (s->n == 0 && s->overflow && done < max) {
                done += take_pending(buf + done, max - done, overflow_line,
                                     sizeof(overflow_line) - 1, &s->overflow_off);
                if (done == 0)
                        return -1; /* the overflow line is out: the end */
        }
        return (ssize_t)done;
}

static void stream_closed(void *data)
{
        subscriber_free(data);
}

static const struct http_stream_ops stream_ops = {.read = stream_read, .closed = stream_closed};

/* The request is over (its stream's closed() follows): wake it no more. */
static void request_gone(void *data)
{
        struct subscriber *s = data;
        s->req = NULL;
}

void events_subscribe(struct request *r, bool admin, const char *token, const char *env,
                      uint32_t types)
{
        if (n_subscribers >= EVENTS_MAX_SUBSCRIBERS) {
                http_reply_error(r, 503, "unavailable", "too many event subscribers (limit %d)",
                                 EVENTS_MAX_SUBSCRIBERS);
                return;
        }
        struct subscriber *s = calloc(1, sizeof(*s));
        if (!s) {
                http_reply_errno(r, -ENOMEM, "out of memory");
                return;
        }
        s->req = r;
        s->admin = admin;
        snprintf(s->token, sizeof(s->token), "%s", token ? token : "");
        snprintf(s->env, sizeof(s->env), "%s", env ? env : "");
        s->types = types;
        s->next = subscribers;
        subscribers = s;
        n_subscribers++;
        req_on_free(r, request_gone, s);
        http_reply_stream(r, 200, "application/x-ndjson", &stream_ops, s);
}

void events_end_token(const char *token)
{
        for (struct subscriber *s = subscribers; s; s = s->next)
                if (s->token[0] && !strcmp(s->token, token)) {
                        s->ending = true;
                        http_stream_wake(s->req);
                }
}

void events_close_all(void)
{
        /* The streams end with the HTTP server, and their closed() frees each subscriber; a
         * stream parked for lack of events must be resumed first (libmicrohttpd refuses to
         * stop with suspended connections). */
        for (struct subscriber *s = subscribers; s; s = s->next) {
                s->ending = true;
                http_stream_wake(s->req);
        }
        while (oom_seen) {
                struct oom_seen *next = oom_seen->next;
                free(oom_seen);
                oom_seen = next;
        }
}

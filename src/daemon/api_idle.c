/* The API's side of idle stop (engine_idle.c): which requests count as activity of the
 * environment they name, and which need it running and so wake it first. */
#include "daemon/api.h"
#include "daemon/e2b.h"
#include "daemon/engine.h"
#include "daemon/http.h"

#include <stdlib.h>

#include <errno.h>
#include <string.h>

enum idle_kind { IDLE_NONE, IDLE_TOUCH, IDLE_WAKE };

static bool has_prefix(const char *s, const char *prefix)
{
        return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* Working inside it (exec, a shell, files, archives) wakes it; its background processes'
 * routes are activity (an agent reading their output) but do not need it running. Listing,
 * inspecting, PATCH, ports, snapshots and the like are neither. E2B's envd /files (e2b.c
 * wakes it; here it is activity again at its end, as the native files routes are). */
static enum idle_kind route_kind(const char *pattern)
{
        static const char *const wake[] = {"/v1/envs/{name}/exec", "/v1/envs/{name}/files",
                                           "/v1/envs/{name}/archive"};
        if (!pattern)
                return IDLE_NONE;
        if (!strcmp(pattern, "/files"))
                return IDLE_WAKE;
        for (size_t i = 0; i < sizeof(wake) / sizeof(wake[0]); i++)
                if (has_prefix(pattern, wake[i]))
                        return IDLE_WAKE;
        return has_prefix(pattern, "/v1/envs/{name}/processes") ? IDLE_TOUCH : IDLE_NONE;
}

bool api_idle_waits(const char *pattern)
{
        return route_kind(pattern) == IDLE_WAKE;
}

struct awake {
        struct api_later *l;
        bool e2b; /* answer errors as E2B does */
        char name[NAME_BUF_SIZE];
};

/* The environment that a request waited for runs (or failed to start): the request is
 * dispatched again from the start, as if it came now (its environment looked up again). */
static void on_awake(struct engine *e, struct env *v, int rc, const char *err, void *data)
{
        (void)v;
        struct awake *a = data;
        struct request *r = api_later_take(a->l);
        if (r && rc < 0 && a->e2b)
                e2b_reply_error(r, rc == -EBUSY ? 409 : 502, "sandbox %s could not be woken: %s",
                                a->name, err);
        else if (r && rc < 0)
                http_reply_errno(r, rc, "waking %s: %s", a->name, err);
        else if (r)
                api_handle(r, e);
        free(a);
}

bool api_wake_later(struct request *r, struct engine *e, struct env *v, bool e2b)
{
        if (!env_starting(v) && !(env_idled(v) && !env_running(v)))
                return false;
        struct awake *a = calloc(1, sizeof(*a));
        if (a)
                a->l = api_later(r);
        char err[512] = "out of memory";
        int rc = -ENOMEM;
        if (a && a->l) {
                a->e2b = e2b;
                snprintf(a->name, sizeof(a->name), "%s", env_name(v));
                rc = env_starting(v) ? engine_start_join(e, v, on_awake, a)
                                     : engine_idle_wake_async(e, v, on_awake, a, err, sizeof(err));
        }
        if (rc >= 0)
                return true;
        struct request *back = a && a->l ? api_later_take(a->l) : r; /* not called */
        free(a);
        if (back && e2b)
                e2b_reply_error(back, rc == -EBUSY ? 409 : 502, "sandbox %s could not be woken: %s",
                                env_name(v), err);
        else if (back)
                http_reply_errno(back, rc, "waking %s: %s", env_name(v), err);
        return true;
}

bool api_idle_before(struct request *r, struct engine *e, struct env *v, const char *pattern)
{
        enum idle_kind k = route_kind(pattern);
        if (!v || k == IDLE_NONE)
                return true;
        engine_idle_touch(e, v);
        if (k != IDLE_WAKE)
                return true;
        /* Starting, or stopped by the idle timer: answered once it runs; paused, resumed in
         * place (a thaw takes no setup). */
        if (api_wake_later(r, e, v, false))
                return false;
        if (!env_idled(v))
                return true;
        char err[512] = "";
        int rc = engine_idle_wake(e, v, err, sizeof(err));
        if (rc == -EBUSY) {
                http_reply_error(r, 409, "conflict", "%s", err);
                return false;
        }
        if (rc < 0) {
                http_reply_errno(r, rc, "waking %s: %s", env_name(v), err);
                return false;
        }
        return true;
}

void api_idle_done(struct request *r, struct engine *e)
{
        if (req_env(r) && route_kind(req_route(r)) != IDLE_NONE)
                engine_idle_touch_name(e, req_env(r));
}

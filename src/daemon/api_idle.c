/* The API's side of idle stop (engine_idle.c): which requests count as activity of the
 * environment they name, and which need it running and so wake it first. */
#include "daemon/api.h"
#include "daemon/engine.h"
#include "daemon/http.h"

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

bool api_idle_before(struct request *r, struct engine *e, struct env *v, const char *pattern)
{
        enum idle_kind k = route_kind(pattern);
        if (!v || k == IDLE_NONE)
                return true;
        engine_idle_touch(e, v);
        if (k != IDLE_WAKE || !env_idled(v))
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

/* E2B routing: which surface a request belongs to (e2b.h). */
#include "daemon/e2b.h"

#include "lib/parse.h"
#include "lib/util.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

bool e2b_handle(struct request *r, struct engine *e)
{
        const char *path = req_path(r);
        if (!req_header(r, "E2b-Sandbox-Id"))
                return false; /* the control plane is added here by its own file */
        struct e2b_target t;
        if (e2b_envd_target(r, e, &t) < 0)
                return true;
        if (!strncmp(path, "/process.Process/", 17) || !strncmp(path, "/filesystem.Filesystem/", 23)) {
                e2b_rpc_dispatch(r, e, &t, path + 1);
                return true;
        }
        http_reply_error(r, 404, "not_found", "no such envd route: %s", path);
        return true;
}

bool e2b_wants_spool(const char *method, const char *path, const char *content_type)
{
        return false;
}

/* The sandbox id is the environment's name. On the local socket the administrator may
 * address any running environment; through the gateway the sandbox's access token is needed
 * (checked by the control plane's store, e2b_api.c: until then nothing passes). */
int e2b_envd_target(struct request *r, struct engine *e, struct e2b_target *t)
{
        const char *id = req_header(r, "E2b-Sandbox-Id");
        struct env *v = id && name_is_valid(id) ? engine_find(e, id) : NULL;
        if (!v || !env_running(v) || env_paused(v)) {
                http_reply_error(r, 502, "unavailable", "sandbox %s is not running", id ? id : "");
                return -ENOENT;
        }
        if (req_from_gateway(r)) {
                http_reply_error(r, 401, "unauthorized", "invalid access token");
                return -EACCES;
        }
        memset(t, 0, sizeof(*t));
        t->env = v;
        const char *user = req_query(r, "username");
        snprintf(t->user, sizeof(t->user), "%s", user && *user ? user : "user");
        return 0;
}

/* E2B routing: which surface a request belongs to (e2b.h). */
#include "daemon/e2b.h"

#include <errno.h>
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

int e2b_envd_target(struct request *r, struct engine *e, struct e2b_target *t)
{
        http_reply_error(r, 502, "unavailable", "no such sandbox");
        return -ENOENT;
}

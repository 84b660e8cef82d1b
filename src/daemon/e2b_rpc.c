/* E2B envd's Connect-RPC services (process.Process, filesystem.Filesystem): not yet. */
#include "daemon/e2b.h"

void e2b_rpc_dispatch(struct request *r, struct engine *e, const struct e2b_target *t,
                      const char *path)
{
        http_reply_error(r, 404, "not_found", "no such service: %s", path);
}

/* Files helpers under the supervisor: lib/files.c forks them into an environment, in an exec
 * cgroup of their own; supervise.c watches them. Kept apart from supervise.c, which knows
 * nothing of environments. */
#include "daemon/engine.h"
#include "daemon/supervise.h"
#include "lib/files.h"
#include "lib/paddock.h"
#include "lib/util.h"

int supervise_files(struct engine *e, struct env *v, const char *kind, const char *noun,
                    const struct files_request *rq, bool bind, const struct supervise_spec *spec,
                    struct supervise **ret, char *err, size_t errlen)
{
        char sub[32], label[NAME_BUF_SIZE + 32];
        if (BUF_PRINTF(sub, "%s-%u", kind, env_next_exec_id(v)) < 0 ||
            BUF_PRINTF(label, "%s: %s", env_name(v), kind) < 0) {
                snprintf(err, errlen, "starting the %s helper: %s", noun, strerror(ENAMETOOLONG));
                return -ENAMETOOLONG;
        }
        struct files_target t = {.env_pidfd = env_pidfd(v),
                                 .cgroups = engine_cgroups(e),
                                 .cgroup_name = env_cgroup(v),
                                 .cgroup_sub = sub};
        struct files_child c;
        int r = files_spawn(&t, rq, &c);
        if (r < 0) {
                snprintf(err, errlen, "starting the %s helper: %s", noun, strerror(-r));
                return r;
        }
        struct supervise_spec sp = *spec;
        sp.loop = engine_loop(e);
        sp.label = label;
        sp.cgroups = engine_cgroups(e);
        sp.cgroup_name = env_cgroup(v);
        sp.cgroup_sub = sub;
        sp.bound_pidfd = bind ? env_pidfd(v) : -EBADF;
        sp.files_status = true;
        r = supervise_start(&sp, &(struct supervise_child){c.pidfd, c.status_fd, c.data_fd}, ret);
        if (r < 0)
                snprintf(err, errlen, "watching the %s helper: %s", noun, strerror(-r));
        return r;
}

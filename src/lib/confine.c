/* The confinement sequence shared by PID 1 of an environment and every process exec'd into it.
 *
 * The order is forced by what each step needs from the ones before it:
 *  - Loading a seccomp filter needs no_new_privs or CAP_SYS_ADMIN (effective, in the user
 *    namespace); so does landlock_restrict_self().
 *  - Sandbox: caps -> no_new_privs -> Landlock -> seccomp. no_new_privs is what makes the last
 *    two legal once the capabilities are gone, and Landlock precedes seccomp only by
 *    convention: the filter allows the Landlock syscalls either way.
 *  - Computer: seccomp -> caps. A computer must not get no_new_privs (su, sudo, ping and
 *    other setuid/file-capability programs must keep working), so the filter can only be
 *    loaded while CAP_SYS_ADMIN is still effective, i.e. before caps_apply() reduces the set
 *    to Docker's list. caps_apply() then runs under the filter, which allows everything it
 *    uses (capget, capset, prctl).
 *  - A spawner (an exec slot, join_slot.c) keeps its capabilities to switch each command's
 *    user, so it applies only what its children inherit unchanged, once: the bounding set, the
 *    Landlock domain and the seccomp filter, legal through CAP_SYS_ADMIN in the user
 *    namespace (the bounding set limits only what an execve gains; the spawner never execs).
 *    Each child then applies the rest; the result is the same set of restrictions, in a
 *    different order. */
#include "lib/confine.h"
#include "lib/util.h"

#include <sys/prctl.h>
#include <sys/resource.h>

static int step(const char *name, int r, const char **ret_step)
{
        if (r < 0 && ret_step)
                *ret_step = name;
        return r;
}

/* A sandbox process dumps no core, and cannot raise the limit again: a dump would go to the
 * host's core handler or fill its scratch space. */
static int no_core_dumps(const char **ret_step)
{
        struct rlimit core = {0, 0};
        return step("core limit", setrlimit(RLIMIT_CORE, &core) < 0 ? -errno : 0, ret_step);
}

static int confine_sandbox(int exec_fd, const char **ret_step)
{
        int r = no_core_dumps(ret_step);
        if (r < 0)
                return r;
        r = step("capabilities", caps_apply(PROFILE_SANDBOX), ret_step);
        if (r < 0)
                return r;
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                return step("no_new_privs", -errno, ret_step);
        /* A kernel without Landlock still gets the read-only image and the seccomp filter. */
        r = landlock_apply_sandbox_exec(exec_fd);
        if (r < 0 && r != -EOPNOTSUPP)
                return step("landlock", r, ret_step);
        return step("seccomp", seccomp_apply(PROFILE_SANDBOX), ret_step);
}

static int confine_computer(const char **ret_step)
{
        int r = step("seccomp", seccomp_apply(PROFILE_COMPUTER), ret_step);
        if (r < 0)
                return r;
        return step("capabilities", caps_apply(PROFILE_COMPUTER), ret_step);
}

int confine_apply_spawner(enum confine_profile p, const char **ret_step)
{
        int r = step("capabilities", caps_apply_bounding(p), ret_step);
        if (r < 0)
                return r;
        switch (p) {
        case PROFILE_SANDBOX:
                r = landlock_apply_sandbox();
                if (r < 0 && r != -EOPNOTSUPP)
                        return step("landlock", r, ret_step);
                return step("seccomp", seccomp_apply(PROFILE_SANDBOX), ret_step);
        case PROFILE_COMPUTER:
                return step("seccomp", seccomp_apply(PROFILE_COMPUTER), ret_step);
        }
        return step("profile", -EINVAL, ret_step);
}

int confine_apply_spawned(enum confine_profile p, const char **ret_step)
{
        switch (p) {
        case PROFILE_SANDBOX: {
                int r = no_core_dumps(ret_step);
                if (r < 0)
                        return r;
                r = step("capabilities", caps_apply_process(PROFILE_SANDBOX), ret_step);
                if (r < 0)
                        return r;
                if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                        return step("no_new_privs", -errno, ret_step);
                return 0;
        }
        case PROFILE_COMPUTER:
                return step("capabilities", caps_apply_process(PROFILE_COMPUTER), ret_step);
        }
        return step("profile", -EINVAL, ret_step);
}

int confine_apply(enum confine_profile p, const char **ret_step)
{
        return confine_apply_exec(p, -EBADF, ret_step);
}

int confine_apply_exec(enum confine_profile p, int exec_fd, const char **ret_step)
{
        switch (p) {
        case PROFILE_SANDBOX:
                return confine_sandbox(exec_fd, ret_step);
        case PROFILE_COMPUTER:
                return confine_computer(ret_step);
        }
        return step("profile", -EINVAL, ret_step);
}

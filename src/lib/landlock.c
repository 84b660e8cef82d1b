/* Landlock filesystem ruleset for sandboxes, through the raw syscalls (glibc has no wrappers).
 *
 * The ruleset handles every filesystem right the running kernel knows and grants back:
 * read + execute on the whole tree, full write below the sandbox's scratch directories, and
 * write to the handful of character devices programs expect (/dev/null, terminals). The image
 * is already mounted read-only; Landlock adds a second, mount-independent wall, so a writable
 * mount that slipped in (or appears later) is still not writable.
 * Rights are masked by the kernel's ABI so an older kernel gets the rules it understands
 * instead of rejecting the whole ruleset.
 * Network rights (ABI 4) and scoping (ABI 6) stay unhandled on purpose: the network namespace
 * already confines the network, and a scoped domain could not signal processes exec'd into
 * the sandbox later (each exec creates a sibling domain), which would break PID 1. */
#include "lib/confine.h"
#include "lib/util.h"

#include <linux/landlock.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>

/* Rights newer than the installed uapi header (Debian 12 ships ABI 2). */
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14) /* ABI 3 */
#endif
#ifndef LANDLOCK_ACCESS_FS_IOCTL_DEV
#define LANDLOCK_ACCESS_FS_IOCTL_DEV (1ULL << 15) /* ABI 5 */
#endif

#define ACCESS_ABI1                                                                                \
        (LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE |                              \
         LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR |                              \
         LANDLOCK_ACCESS_FS_REMOVE_DIR | LANDLOCK_ACCESS_FS_REMOVE_FILE |                          \
         LANDLOCK_ACCESS_FS_MAKE_CHAR | LANDLOCK_ACCESS_FS_MAKE_DIR |                              \
         LANDLOCK_ACCESS_FS_MAKE_REG | LANDLOCK_ACCESS_FS_MAKE_SOCK |                              \
         LANDLOCK_ACCESS_FS_MAKE_FIFO | LANDLOCK_ACCESS_FS_MAKE_BLOCK |                            \
         LANDLOCK_ACCESS_FS_MAKE_SYM)

/* Rights that make sense on a non-directory; a rule on a file with any other right is EINVAL. */
#define ACCESS_FILE                                                                                \
        (LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE |                              \
         LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_TRUNCATE |                              \
         LANDLOCK_ACCESS_FS_IOCTL_DEV)

#define ACCESS_READ_EXEC                                                                           \
        (LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR | LANDLOCK_ACCESS_FS_EXECUTE)
#define ACCESS_DEVICE_WRITE                                                                        \
        (LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_TRUNCATE |                             \
         LANDLOCK_ACCESS_FS_IOCTL_DEV)

struct landlock_path_rule {
        const char *path;
        uint64_t access; /* before masking by the ABI and by file type */
};

/* Later rules add to earlier ones: the device and scratch rules widen the "/" rule below them. */
static const struct landlock_path_rule sandbox_rules[] = {
        { "/", ACCESS_READ_EXEC },
        { "/tmp", UINT64_MAX },
        { "/workspace", UINT64_MAX },
        { "/dev/shm", UINT64_MAX },
        { "/dev/null", ACCESS_DEVICE_WRITE },
        { "/dev/zero", ACCESS_DEVICE_WRITE },
        { "/dev/full", ACCESS_DEVICE_WRITE },
        { "/dev/tty", ACCESS_DEVICE_WRITE },
        { "/dev/ptmx", ACCESS_DEVICE_WRITE },
        { "/dev/pts", ACCESS_DEVICE_WRITE },
};

int landlock_abi(void)
{
        long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
        /* ENOSYS: not built in; EOPNOTSUPP: built in but not enabled at boot. */
        return abi < 0 ? 0 : (int)abi;
}

static uint64_t handled_access(int abi)
{
        uint64_t a = ACCESS_ABI1;
        if (abi >= 2)
                a |= LANDLOCK_ACCESS_FS_REFER;
        if (abi >= 3)
                a |= LANDLOCK_ACCESS_FS_TRUNCATE;
        if (abi >= 5)
                a |= LANDLOCK_ACCESS_FS_IOCTL_DEV;
        return a;
}

/* Adds one path rule; a path that does not exist in this root is skipped. */
static int add_path_rule(int ruleset_fd, const struct landlock_path_rule *rule, uint64_t handled)
{
        _cleanup_close_ int fd = open(rule->path, O_PATH | O_CLOEXEC);
        if (fd < 0)
                return errno == ENOENT ? 0 : -errno;

        struct stat st;
        if (fstat(fd, &st) < 0)
                return -errno;

        uint64_t access = rule->access & handled;
        if (!S_ISDIR(st.st_mode))
                access &= ACCESS_FILE;
        if (access == 0)
                return 0;

        struct landlock_path_beneath_attr attr = {
                .allowed_access = access,
                .parent_fd = fd,
        };
        if (syscall(SYS_landlock_add_rule, ruleset_fd, LANDLOCK_RULE_PATH_BENEATH, &attr, 0) < 0)
                return -errno;
        return 0;
}

int landlock_apply_sandbox(void)
{
        return landlock_apply_sandbox_exec(-EBADF);
}

int landlock_apply_sandbox_exec(int exec_fd)
{
        int abi = landlock_abi();
        if (abi <= 0)
                return -EOPNOTSUPP;

        uint64_t handled = handled_access(abi);
        /* The uapi struct of the installed header may be the ABI 1 layout; the kernel accepts
         * any smaller size and treats the missing fields (network, scoping) as unhandled. */
        struct landlock_ruleset_attr attr = { .handled_access_fs = handled };
        /* Ruleset fds are always close-on-exec; there is no flag to ask for it. */
        _cleanup_close_ int ruleset_fd =
                (int)syscall(SYS_landlock_create_ruleset, &attr, sizeof(attr), 0);
        if (ruleset_fd < 0)
                return -errno;

        for (size_t i = 0; i < ELEMENTSOF(sandbox_rules); i++) {
                int r = add_path_rule(ruleset_fd, &sandbox_rules[i], handled);
                if (r < 0)
                        return r;
        }

        /* The program about to be executed may live outside the root (paddock-init is opened
         * on the host): allow executing exactly that file. It is unreachable by path inside. */
        if (exec_fd >= 0) {
                struct landlock_path_beneath_attr ex = {
                        .allowed_access = (LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE) &
                                          handled,
                        .parent_fd = exec_fd,
                };
                if (syscall(SYS_landlock_add_rule, ruleset_fd, LANDLOCK_RULE_PATH_BENEATH, &ex, 0) < 0)
                        return -errno;
        }

        /* Needs no_new_privs (or CAP_SYS_ADMIN in the user namespace): fails with EPERM
         * otherwise, which confine_apply() prevents by setting no_new_privs first. */
        if (syscall(SYS_landlock_restrict_self, ruleset_fd, 0) < 0)
                return -errno;
        return 0;
}

int landlock_restrict_writes(const char *const *dirs, size_t n)
{
        int abi = landlock_abi();
        if (abi <= 0)
                return -EOPNOTSUPP;

        uint64_t handled = handled_access(abi);
        struct landlock_ruleset_attr attr = { .handled_access_fs = handled };
        _cleanup_close_ int ruleset_fd =
                (int)syscall(SYS_landlock_create_ruleset, &attr, sizeof(attr), 0);
        if (ruleset_fd < 0)
                return -errno;

        struct landlock_path_rule everywhere = { "/", ACCESS_READ_EXEC };
        int r = add_path_rule(ruleset_fd, &everywhere, handled);
        if (r < 0)
                return r;
        for (size_t i = 0; i < n; i++) {
                /* A directory that is missing would silently grant nothing: say so. */
                struct stat st;
                if (stat(dirs[i], &st) < 0)
                        return -errno;
                if (!S_ISDIR(st.st_mode))
                        return -ENOTDIR;
                struct landlock_path_rule rule = { dirs[i], UINT64_MAX };
                if ((r = add_path_rule(ruleset_fd, &rule, handled)) < 0)
                        return r;
        }

        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                return -errno;
        if (syscall(SYS_landlock_restrict_self, ruleset_fd, 0) < 0)
                return -errno;
        return 0;
}

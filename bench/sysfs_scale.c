/* The cost of an environment's /sys with N network namespaces' sysfs on the host, as PID 1's
 * setup pays it (lib/rootfs.c mount_sysfs), three ways:
 *   own:    a new sysfs in a new network namespace (networked environments, computers; every
 *           sandbox before the shared one): the kernel compares the new superblock with every
 *           sysfs superblock (sget_fc, kernfs_test_super) and adds one;
 *   clone:  a clone of the shared read-only detached mount (kernel 6.15 on);
 *   in-ns:  fsopen inside the shared namespace (setns there and back), which finds its
 *           superblock (older kernels).
 *
 * Build: cc -O2 -std=gnu11 -D_GNU_SOURCE -Isrc -o /tmp/sysfs_scale bench/sysfs_scale.c \
 *            build/libpaddock.a $(pkg-config --libs libmnl)
 * Run as root: /tmp/sysfs_scale 0 1000 2000  (populations; medians of 21 of each way). It
 * holds the populations' namespaces only through their sysfs mounts' fds: all go at exit. */
#include "lib/util.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <time.h>

#define RUNS 21

static double now_us(void)
{
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
        double x = *(const double *)a, y = *(const double *)b;
        return x < y ? -1 : x > y;
}

static void die(const char *what)
{
        perror(what);
        exit(1);
}

/* A sysfs of the caller's current network namespace, detached and read-only. */
static int sysfs_here(void)
{
        int fs = fsopen("sysfs", FSOPEN_CLOEXEC);
        if (fs < 0 || fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
                die("sysfs");
        int m = fsmount(fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_RDONLY);
        if (m < 0)
                die("fsmount");
        close(fs);
        return m;
}

int main(int argc, char **argv)
{
        struct rlimit rl;
        getrlimit(RLIMIT_NOFILE, &rl);
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
                die("RLIMIT_NOFILE");
        int home = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
        if (home < 0 || unshare(CLONE_NEWNET) < 0)
                die("template namespace");
        int tmpl_ns = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
        int tmpl = sysfs_here();
        if (setns(home, CLONE_NEWNET) < 0)
                die("setns home");
        int probe = open_tree(tmpl, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
        bool can_clone = probe >= 0;
        if (probe >= 0)
                close(probe);
        printf("| sysfs superblocks of other namespaces | own | clone | in-ns |\n|---|---|---|---|\n");
        int *held = NULL;
        size_t n_held = 0;
        for (int a = 1; a < argc; a++) {
                size_t want = strtoul(argv[a], NULL, 10);
                held = realloc(held, want * sizeof(*held) + 1);
                while (n_held < want) { /* the population: one namespace and sysfs each */
                        if (unshare(CLONE_NEWNET) < 0)
                                die("unshare");
                        held[n_held++] = sysfs_here();
                }
                if (setns(home, CLONE_NEWNET) < 0)
                        die("setns home");
                double own[RUNS], clone[RUNS], inns[RUNS];
                for (int i = 0; i < RUNS; i++) {
                        if (unshare(CLONE_NEWNET) < 0) /* not timed: the clone's own */
                                die("unshare");
                        double t0 = now_us();
                        int m = sysfs_here();
                        own[i] = now_us() - t0;
                        close(m);
                        t0 = now_us();
                        m = can_clone ? open_tree(tmpl, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC |
                                                                    AT_EMPTY_PATH)
                                      : -1;
                        clone[i] = now_us() - t0;
                        if (m >= 0)
                                close(m);
                        t0 = now_us();
                        int self = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
                        if (self < 0 || setns(tmpl_ns, CLONE_NEWNET) < 0)
                                die("setns template");
                        int fs = fsopen("sysfs", FSOPEN_CLOEXEC);
                        if (fs < 0 || setns(self, CLONE_NEWNET) < 0)
                                die("fsopen in template");
                        if (fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
                                die("create in template");
                        m = fsmount(fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_RDONLY);
                        inns[i] = now_us() - t0;
                        close(m);
                        close(fs);
                        close(self);
                        if (setns(home, CLONE_NEWNET) < 0)
                                die("setns home");
                }
                qsort(own, RUNS, sizeof(double), cmp_double);
                qsort(clone, RUNS, sizeof(double), cmp_double);
                qsort(inns, RUNS, sizeof(double), cmp_double);
                char c[32];
                snprintf(c, sizeof(c), can_clone ? "%.3f ms" : "-", clone[RUNS / 2] / 1e3);
                printf("| %zu | %.3f ms | %s | %.3f ms |\n", want, own[RUNS / 2] / 1e3, c,
                       inns[RUNS / 2] / 1e3);
                fflush(stdout);
        }
        for (size_t i = 0; i < n_held; i++)
                close(held[i]);
        free(held);
        return 0;
}

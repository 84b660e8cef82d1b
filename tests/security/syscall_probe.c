/* Run inside an environment by test_syscall_surface.py: tries each syscall an escape or a
 * kernel exploit starts with and prints "NAME ERRNO" (or "NAME ok" when it went through).
 * Static, so it runs in any image. It refuses to run anywhere but inside an environment (PID 1
 * is paddock-init): on the host, as root, the probes would act (a tmpfs over /tmp...). */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/bpf.h>
#include <linux/perf_event.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/personality.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef SYS_io_uring_setup
#define SYS_io_uring_setup 425
#endif

static void report(const char *name, long rc)
{
        printf("%s %s\n", name, rc >= 0 ? "ok" : strerrorname_np(errno));
}

/* In a child: a probe that works must not change the next one (a new namespace, a personality). */
#define PROBE(name, call)                                                                  \
        do {                                                                               \
                fflush(stdout);                                                            \
                pid_t pid = fork();                                                        \
                if (pid == 0) {                                                            \
                        errno = 0;                                                         \
                        report(name, (long)(call));                                        \
                        fflush(stdout);                                                    \
                        _exit(0);                                                          \
                }                                                                          \
                waitpid(pid, NULL, 0);                                                     \
        } while (0)

static int inside_an_environment(void)
{
        char comm[32] = "";
        FILE *f = fopen("/proc/1/comm", "re");
        if (!f)
                return 0;
        int ok = fgets(comm, sizeof(comm), f) && strcmp(comm, "paddock-init\n") == 0;
        fclose(f);
        return ok;
}

int main(void)
{
        if (!inside_an_environment()) {
                fprintf(stderr, "syscall_probe: not inside a Paddock environment; refusing\n");
                return 2;
        }
        struct perf_event_attr pe = {.type = PERF_TYPE_SOFTWARE, .size = sizeof(pe),
                                     .config = PERF_COUNT_SW_CPU_CLOCK};
        union bpf_attr ba;
        memset(&ba, 0, sizeof(ba));
        char key[] = "paddock-probe";
        PROBE("io_uring_setup", syscall(SYS_io_uring_setup, 1, NULL));
        PROBE("keyctl", syscall(SYS_keyctl, 0 /* KEYCTL_GET_KEYRING_ID */, -3, 0, 0, 0));
        PROBE("add_key", syscall(SYS_add_key, "user", key, key, sizeof(key), -3));
        PROBE("bpf", syscall(SYS_bpf, BPF_MAP_CREATE, &ba, sizeof(ba)));
        PROBE("perf_event_open", syscall(SYS_perf_event_open, &pe, 0, -1, -1, 0));
        PROBE("userfaultfd", syscall(SYS_userfaultfd, 0));
        PROBE("unshare_user", unshare(CLONE_NEWUSER));
        PROBE("unshare_mount", unshare(CLONE_NEWNS));
        PROBE("mount_tmpfs", mount("none", "/tmp", "tmpfs", 0, NULL));
        PROBE("open_by_handle_at", syscall(SYS_open_by_handle_at, -1, NULL, 0));
        PROBE("kexec_load", syscall(SYS_kexec_load, 0, 0, NULL, 0));
        PROBE("init_module", syscall(SYS_init_module, NULL, 0, ""));
        PROBE("personality_rie", personality(READ_IMPLIES_EXEC));
        PROBE("socket_vsock", socket(40 /* AF_VSOCK */, SOCK_STREAM, 0));
        PROBE("reboot", syscall(SYS_reboot, 0, 0, 0, NULL));
        PROBE("control_socket_inet", socket(AF_INET, SOCK_DGRAM, 0)); /* allowed: reads "ok" */
        return 0;
}

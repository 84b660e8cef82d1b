/* Confinement applied to PID 1 of an environment and to every process exec'd into it:
 * capabilities, no_new_privs, Landlock, seccomp. PID 1 applies it whole (confine_apply_exec);
 * an exec slot applies what children inherit (confine_apply_spawner) and each of its commands
 * the rest (confine_apply_spawned), so an exec'd process has exactly the confinement of PID 1.
 * Called inside the environment's user namespace as uid 0, after pivot_root, just before exec. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

enum confine_profile {
        PROFILE_COMPUTER, /* Docker-like default caps + Docker-like default seccomp */
        PROFILE_SANDBOX,  /* no caps at all, no_new_privs, strict seccomp, Landlock */
};

/* caps.c: set bounding/permitted/effective/inheritable/ambient sets and securebits.
 * Sandbox: everything empty and SECBIT_NOROOT locked, so even uid 0 exec gains nothing.
 * Computer: Docker's default capability set (namespaced: it only acts inside the userns). */
int caps_apply(enum confine_profile p);
/* caps_apply in two parts: the bounding set alone (inherited by children, so a spawner can
 * drop it once for all of them), and the rest: ambient, securebits, the process's sets. */
int caps_apply_bounding(enum confine_profile p);
int caps_apply_process(enum confine_profile p);

/* landlock.c: highest Landlock ABI the kernel supports (0 = none). */
int landlock_abi(void);
/* Sandbox ruleset: read+execute everywhere; write only below /tmp, /workspace, /dev/shm and
 * to /dev/{null,zero,full,tty,ptmx,pts}. Returns -EOPNOTSUPP when the kernel has no Landlock. */
int landlock_apply_sandbox(void);
/* Same, also allowing execution of the one file exec_fd refers to (paddock-init). */
int landlock_apply_sandbox_exec(int exec_fd);
/* For this process and the threads it starts from now on: read+execute everywhere, every
 * write (create, remove, rename, link, truncate) only beneath the n existing directories dirs.
 * Sets no_new_privs. -EOPNOTSUPP when the kernel has no Landlock. (tests/fuzz/fuzz_tar.c) */
int landlock_restrict_writes(const char *const *dirs, size_t n);

/* seccomp.c: load the profile's filter (requires no_new_privs or CAP_SYS_ADMIN in the userns).
 * Both profiles: allowlist modelled on Docker's default; everything else fails with EPERM
 * (ENOSYS for syscalls newer than the list, so libc falls back); foreign ABIs (x32, i386)
 * kill the process; ioctl(TIOCSTI) and ioctl(TIOCLINUX), which type into a terminal, fail with
 * EPERM. Sandbox additionally blocks ptrace, personality changes, and clone/unshare
 * with namespace flags, clone3 (ENOSYS, so libc uses clone), the mount family, keyctl, bpf,
 * io_uring, perf_event_open, userfaultfd. */
int seccomp_apply(enum confine_profile p);
/* Compile both profiles once (the daemon, at start); seccomp_apply then loads the cached BPF. */
int seccomp_precompile(void);
/* Write the profile as libseccomp pseudo-filter-code text (for tests and `paddock system`). */
int confine_export_pfc(enum confine_profile p, int fd);

/* The whole sequence in the order that works. Sandbox: caps -> no_new_privs -> Landlock
 * -> seccomp. Computer: seccomp (needs CAP_SYS_ADMIN, no NNP) -> caps. On failure returns -errno and sets *ret_step to the failing step. */
int confine_apply(enum confine_profile p, const char **ret_step);
/* Same, with exec_fd (a file outside the root that is executed next) exempt from Landlock. */
int confine_apply_exec(enum confine_profile p, int exec_fd, const char **ret_step);
/* Split in two for a process that spawns the environment's commands and must keep its
 * capabilities to switch their user (an exec slot): confine_apply_spawner() applies, once,
 * what children inherit unchanged (the bounding set; sandbox: Landlock and seccomp; computer:
 * seccomp; needs CAP_SYS_ADMIN in the user namespace); confine_apply_spawned() applies the
 * rest in each child (the process's capabilities, and a sandbox's securebits and
 * no_new_privs). Together: exactly confine_apply(). */
int confine_apply_spawner(enum confine_profile p, const char **ret_step);
int confine_apply_spawned(enum confine_profile p, const char **ret_step);

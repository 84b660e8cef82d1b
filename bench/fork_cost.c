/* What the daemon's shared libraries cost every fork it makes (PID 1's clone, an exec slot's,
 * a file helper's): the parent's time in clone3() for a child that exits at once, median of
 * 400, for a process that maps only libc and for one linked like paddockd, with and without
 * libcurl (src/lib/curl_lazy.c). bench/fork_cost.sh builds and runs the three.
 *
 *   fork_cost [FLAGS]    FLAGS: extra clone3 flags in hex (0x20000000 = CLONE_NEWPID) */
#define _GNU_SOURCE
#include <linux/sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define RUNS 400

static double ms(clockid_t clock)
{
        struct timespec t;
        clock_gettime(clock, &t);
        return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static int cmp(const void *a, const void *b)
{
        double x = *(const double *)a, y = *(const double *)b;
        return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
        unsigned long long flags = argc > 1 ? strtoull(argv[1], NULL, 16) : 0;
        static double wall[RUNS], cpu[RUNS];
        for (int i = 0; i < RUNS; i++) {
                int pidfd = -1;
                struct clone_args ca = {.flags = flags | CLONE_PIDFD,
                                        .pidfd = (unsigned long long)(unsigned long)&pidfd,
                                        .exit_signal = SIGCHLD};
                double w = ms(CLOCK_MONOTONIC), c = ms(CLOCK_THREAD_CPUTIME_ID);
                long pid = syscall(SYS_clone3, &ca, sizeof(ca));
                if (pid == 0)
                        _exit(0);
                wall[i] = ms(CLOCK_MONOTONIC) - w;
                cpu[i] = ms(CLOCK_THREAD_CPUTIME_ID) - c;
                if (pid < 0) {
                        perror("clone3");
                        return 1;
                }
                waitpid((pid_t)pid, NULL, 0);
                close(pidfd);
        }
        qsort(wall, RUNS, sizeof(double), cmp);
        qsort(cpu, RUNS, sizeof(double), cmp);
        FILE *f = fopen("/proc/self/maps", "r");
        int maps = 0;
        for (int ch; f && (ch = fgetc(f)) != EOF;)
                maps += ch == '\n';
        if (f)
                fclose(f);
        printf("%d mappings: clone3 %.3f ms wall, %.3f ms cpu (median of %d)\n", maps,
               wall[RUNS / 2], cpu[RUNS / 2], RUNS);
        return 0;
}

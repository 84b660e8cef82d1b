/* paddock-init: PID 1 of every Paddock environment.
 *
 * Static and self-contained (it runs inside whatever image the environment has, which may have
 * no libc at all), single-threaded, no allocation. Its jobs:
 *  - reap every orphan re-parented to it, so zombies never fill the pids limit;
 *  - turn SIGTERM/SIGINT/SIGHUP/SIGPWR into a shutdown: SIGTERM to everything, wait until no
 *    process is left (then exit 0), SIGKILL whatever is still there after a grace period;
 *  - forward every other signal to all processes of the environment;
 *  - optionally start a command given after "--" as its first child.
 * It never exits on its own otherwise: a computer lives as long as its PID 1.
 *
 * All signals stay blocked and are taken synchronously with sigtimedwait(), so there is no
 * handler code and no race between "check for children" and "sleep". A pid-namespace init
 * only receives signals it has a handler for (or blocks); we install a no-op handler for each
 * as well, which also undoes any SIG_IGN inherited through exec (an ignored SIGCHLD would make
 * the kernel auto-reap and hide exits). */
#include "lib/paddock.h"

#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>


#define INIT_NAME         "paddock-init"
#define SHUTDOWN_GRACE_MS 10000

static void noop_handler(int sig)
{
        (void)sig;
}

static uint64_t now_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void install_handlers(void)
{
        struct sigaction sa = { .sa_handler = noop_handler };
        sigfillset(&sa.sa_mask);
        for (int sig = 1; sig <= SIGRTMAX; sig++) {
                /* SIGCHLD only for exits: a stopped child needs nothing from init. */
                sa.sa_flags = sig == SIGCHLD ? SA_NOCLDSTOP : 0;
                /* Fails for SIGKILL, SIGSTOP and libc-reserved signals; nothing to do then. */
                (void)sigaction(sig, &sa, NULL);
        }
}

/* Reaps every exited child. Returns 0 while children remain, -ECHILD when there are none. */
static int reap_all(void)
{
        for (;;) {
                int status;
                pid_t pid = waitpid(-1, &status, WNOHANG);
                if (pid > 0)
                        continue;
                if (pid == 0)
                        return 0;
                if (errno == EINTR)
                        continue;
                return -errno;
        }
}

static void spawn(char **cmd)
{
        pid_t pid = fork();
        if (pid < 0) {
                fprintf(stderr, INIT_NAME ": fork: %s\n", strerror(errno));
                return;
        }
        if (pid > 0)
                return;

        /* The blocked mask survives exec; handlers do not (they reset to default). */
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        execvp(cmd[0], cmd);
        fprintf(stderr, INIT_NAME ": exec %s: %s\n", cmd[0], strerror(errno));
        _exit(127);
}

/* Short name for ps/top: comm is set directly; the command line is overwritten in place (the
 * kernel shows the original argv area, whatever long path the daemon exec'd us under). */
static void set_title(int argc, char **argv)
{
        (void)prctl(PR_SET_NAME, INIT_NAME, 0, 0, 0);
        if (argc < 1 || !argv[0])
                return;
        char *start = argv[0];
        char *end = argv[argc - 1] + strlen(argv[argc - 1]) + 1;
        size_t len = (size_t)(end - start);
        memset(start, 0, len);
        if (len > 1)
                memcpy(start, INIT_NAME, len - 1 < sizeof(INIT_NAME) ? len - 1 : sizeof(INIT_NAME));
}

int main(int argc, char **argv)
{
        char **cmd = NULL;

        if (argc > 1 && strcmp(argv[1], "--version") == 0) {
                printf(INIT_NAME " " PADDOCK_VERSION "\n");
                return 0;
        }
        if (argc > 1) {
                if (strcmp(argv[1], "--") != 0) {
                        fprintf(stderr, "usage: " INIT_NAME " [--version | -- COMMAND [ARG...]]\n");
                        return 2;
                }
                if (argc > 2)
                        cmd = argv + 2;
        }
        /* kill(-1, ...) outside a PID namespace would signal every process on the host. */
        if (getpid() != 1) {
                fprintf(stderr, INIT_NAME ": must run as PID 1 of a PID namespace\n");
                return 2;
        }

        sigset_t all;
        sigfillset(&all);
        sigprocmask(SIG_SETMASK, &all, NULL);
        install_handlers();

        if (cmd)
                spawn(cmd);
        /* After spawn(): the child has its own copy of argv, ours can be overwritten. */
        set_title(argc, argv);

        bool shutting_down = false;
        uint64_t deadline = 0;
        for (;;) {
                siginfo_t si;
                int sig;

                if (shutting_down) {
                        uint64_t now = now_ms();
                        if (now >= deadline) {
                                /* Exiting is enough to kill the rest (the kernel SIGKILLs a
                                 * namespace whose init dies); say it explicitly anyway. */
                                kill(-1, SIGKILL);
                                return 0;
                        }
                        uint64_t left = deadline - now;
                        struct timespec ts = {
                                .tv_sec = (time_t)(left / 1000),
                                .tv_nsec = (long)(left % 1000) * 1000000,
                        };
                        sig = sigtimedwait(&all, &si, &ts);
                } else {
                        sig = sigwaitinfo(&all, &si);
                }

                if (sig > 0) {
                        switch (sig) {
                        case SIGCHLD:
                                break;
                        case SIGTERM:
                        case SIGINT:
                        case SIGHUP:
                        case SIGPWR:
                                if (!shutting_down) {
                                        shutting_down = true;
                                        deadline = now_ms() + SHUTDOWN_GRACE_MS;
                                }
                                kill(-1, SIGTERM);
                                break;
                        default:
                                kill(-1, sig);
                                break;
                        }
                }
                /* Reap on every wake-up, not only on SIGCHLD: several exits coalesce into one
                 * pending SIGCHLD, and a shutdown may already have nothing left to wait for. */
                if (reap_all() == -ECHILD && shutting_down)
                        return 0;
        }
}

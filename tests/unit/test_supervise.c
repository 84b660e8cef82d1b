/* The helper supervisor (src/daemon/supervise.c) on the real event loop with real forked
 * helpers (host helpers, no cgroup): exit status, status and data pipes, the deadline, pulled
 * streams, binding to another process, and letting go inside a callback.
 *
 * The unit-test build links only libpaddock.a, and the supervisor lives in the daemon, so its
 * sources are compiled into this file (the compiler's -MMD dependency file names them, so
 * make rebuilds this test when they change). */
#include "../../src/daemon/log.c"
#include "../../src/daemon/loop.c"
#include "../../src/daemon/supervise.c"

#include "unit.h"

#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>

static struct loop *L;

struct seen {
        struct supervise *sv;
        char status[256], data[256];
        size_t status_len, data_len;
        bool exited, timed_out_cb, abandon_in_exit;
        struct supervise_exit x;
        size_t pulled;
        ssize_t last_read;
};

static void quit_soon(struct loop_timer *t, void *data)
{
        if (data)
                *(bool *)data = true;
        loop_quit(L);
}

/* Run the loop until a callback quits it (or 5 s have passed: a failure). */
static void run(void)
{
        bool fired = false;
        struct loop_timer *t = loop_add_timer(L, 5000, quit_soon, &fired);
        L->quit = false; /* loop_run does not reset it */
        loop_run(L);
        if (!fired)
                loop_cancel_timer(t);
}

static bool append(int fd, char *buf, size_t *len, size_t cap)
{
        for (;;) {
                ssize_t n = read(fd, buf + *len, cap - 1 - *len);
                if (n > 0) {
                        *len += (size_t)n;
                        buf[*len] = 0;
                        continue;
                }
                return n < 0 && errno == EAGAIN;
        }
}

static bool t_status(void *data, int fd)
{
        struct seen *s = data;
        return append(fd, s->status, &s->status_len, sizeof(s->status));
}

static bool t_data(void *data, int fd)
{
        struct seen *s = data;
        return append(fd, s->data, &s->data_len, sizeof(s->data));
}

static void t_exit(void *data, const struct supervise_exit *x)
{
        struct seen *s = data;
        s->exited = true;
        s->x = *x;
        if (s->abandon_in_exit)
                supervise_abandon(s->sv, false);
        loop_quit(L);
}

static void t_timeout(void *data)
{
        struct seen *s = data;
        s->timed_out_cb = true;
}

static const struct supervise_ops collect_ops = {
    .status = t_status, .data = t_data, .timeout = t_timeout, .exit = t_exit};

/* ---- helpers (in the child) ---------------------------------------------------------------- */

static void child_talks(void *arg, pid_t daemon_pid, int status_fd, int data_fd)
{
        (void)!write(status_fd, "ready\n", 6);
        (void)!write(data_fd, "payload", 7);
        _exit(3);
}

static void child_sleeps(void *arg, pid_t daemon_pid, int status_fd, int data_fd)
{
        sleep(30);
        _exit(0);
}

#define BIG (512u << 10) /* more than a pipe holds: the helper blocks until pulled */

static void child_streams(void *arg, pid_t daemon_pid, int status_fd, int data_fd)
{
        static char buf[BIG];
        memset(buf, 'x', sizeof(buf));
        _exit(write_all(data_fd, buf, sizeof(buf)) < 0);
}

/* ---- tests --------------------------------------------------------------------------------- */

static void test_supervise__exit_status_and_pipes(void)
{
        unsigned count = 0;
        struct seen s = {0};
        struct supervise_spec spec = {.loop = L,
                                      .label = "t",
                                      .collect_data = true,
                                      .count = &count,
                                      .ops = &collect_ops,
                                      .data = &s};
        CHECK_EQ_INT(supervise_fork(&spec, true, true, child_talks, NULL, &s.sv), 0);
        CHECK_EQ_INT(count, 1);
        run();
        CHECK(s.exited);
        CHECK(!s.x.signaled);
        CHECK_EQ_INT(s.x.status, 3);
        CHECK_EQ_INT(supervise_exit_code(&s.x), 3);
        CHECK_EQ_STR(s.status, "ready\n");
        CHECK_EQ_STR(s.data, "payload");
        CHECK(supervise_exited(s.sv));
        CHECK_EQ_INT(supervise_signal(s.sv, SIGTERM), -ESRCH);
        supervise_abandon(s.sv, true);
        CHECK_EQ_INT(count, 0);
}

static void test_supervise__deadline_kills(void)
{
        struct seen s = {0};
        struct supervise_spec spec = {
            .loop = L, .label = "t", .timeout_ms = 100, .ops = &collect_ops, .data = &s};
        uint64_t t0 = now_ms();
        CHECK_EQ_INT(supervise_fork(&spec, false, false, child_sleeps, NULL, &s.sv), 0);
        run();
        CHECK(s.exited);
        CHECK(s.timed_out_cb);
        CHECK(s.x.timed_out);
        CHECK(s.x.signaled);
        CHECK_EQ_INT(s.x.status, SIGKILL);
        CHECK_EQ_INT(supervise_exit_code(&s.x), 128 + SIGKILL);
        CHECK(now_ms() - t0 < 4000);
        supervise_abandon(s.sv, true);
}

static void pull(struct seen *s)
{
        char buf[65536];
        ssize_t n;
        while ((n = supervise_read(s->sv, buf, sizeof(buf))) > 0)
                s->pulled += (size_t)n;
        s->last_read = n;
        if (n == -EPIPE)
                loop_quit(L);
}

static void t_wake(void *data)
{
        pull(data);
}

static void test_supervise__pulled_stream(void)
{
        struct seen s = {0};
        static const struct supervise_ops ops = {.wake = t_wake};
        struct supervise_spec spec = {.loop = L, .label = "t", .ops = &ops, .data = &s};
        CHECK_EQ_INT(supervise_fork(&spec, false, true, child_streams, NULL, &s.sv), 0);
        pull(&s); /* nothing yet, or a first part: parks */
        run();
        CHECK_EQ_INT(s.last_read, -EPIPE);
        CHECK_EQ_INT(s.pulled, BIG);
        const struct supervise_exit *x = supervise_exit_info(s.sv);
        CHECK(x && supervise_exit_ok(x));
        supervise_abandon(s.sv, true);
}

static void test_supervise__bound_process(void)
{
        pid_t other = fork();
        if (other == 0) {
                usleep(100 * 1000);
                _exit(0);
        }
        int other_fd = sys_pidfd_open(other, 0);
        CHECK(other_fd >= 0);
        struct seen s = {0};
        struct supervise_spec spec = {.loop = L,
                                      .label = "t",
                                      .bound_pidfd = other_fd,
                                      .ops = &collect_ops,
                                      .data = &s};
        CHECK_EQ_INT(supervise_fork(&spec, false, false, child_sleeps, NULL, &s.sv), 0);
        run();
        CHECK(s.exited);
        CHECK(s.x.bound_gone);
        CHECK(s.x.signaled);
        CHECK(!s.x.timed_out);
        supervise_abandon(s.sv, true);
        waitpid(other, NULL, 0);
        close(other_fd);
}

/* Let go from inside the exit callback, and before the exit with the helper left running. */
static void test_supervise__abandon(void)
{
        unsigned count = 0;
        struct seen s = {.abandon_in_exit = true};
        struct supervise_spec spec = {
            .loop = L, .label = "t", .count = &count, .ops = &collect_ops, .data = &s};
        CHECK_EQ_INT(supervise_fork(&spec, true, true, child_talks, NULL, &s.sv), 0);
        run();
        CHECK(s.exited);
        CHECK_EQ_INT(count, 0); /* freed after the callback */

        struct seen t = {0};
        spec.data = &t;
        CHECK_EQ_INT(supervise_fork(&spec, true, true, child_talks, NULL, &t.sv), 0);
        supervise_abandon(t.sv, false); /* runs to its end; no callback */
        CHECK_EQ_INT(count, 1);
        for (int i = 0; i < 50 && count; i++) {
                loop_add_timer(L, 20, quit_soon, NULL);
                L->quit = false;
                loop_run(L);
        }
        CHECK_EQ_INT(count, 0);
        CHECK(!t.exited);
}

/* The loop itself: a timer of 1 ms or more fires in a later turn than the one that added it,
 * even when its deadline passes within that turn (the split create relies on it). An
 * always-readable eventfd counts the turns; in its first, it adds the timer and then spins
 * past the deadline, as a slow request would. */
struct turns {
        unsigned turns, added_in, fired_in;
        bool fired;
};

static void later_fired(struct loop_timer *t, void *data)
{
        (void)t;
        struct turns *tu = data;
        tu->fired = true;
        tu->fired_in = tu->turns;
        loop_quit(L);
}

static void count_turn(struct loop_source *s, int fd, uint32_t events, void *data)
{
        (void)s;
        (void)fd;
        (void)events;
        struct turns *tu = data;
        if (tu->turns++ == 0) {
                tu->added_in = tu->turns;
                loop_add_timer(L, 1, later_fired, tu);
                uint64_t until = mono_us() + 3000;
                while (mono_us() < until)
                        ;
        }
}

static void test_loop__delayed_timer_fires_in_a_later_turn(void)
{
        int efd = eventfd(1, EFD_CLOEXEC | EFD_NONBLOCK);
        CHECK(efd >= 0);
        struct turns tu = {0};
        struct loop_source *src = NULL;
        CHECK_EQ_INT(loop_add_fd(L, efd, EPOLLIN, count_turn, &tu, &src), 0);
        run();
        CHECK(tu.fired);
        CHECK(tu.fired_in > tu.added_in);
        loop_remove(src);
        close(efd);
}

/* The next turn's work runs after whatever became ready in the meantime (the split create
 * relies on it). The first pipe's callback adds it and then makes the second pipe readable. */
struct next_turn {
        int first[2], second[2];
        bool second_ran, fired, second_before;
};

static void next_turn_fired(struct loop_timer *t, void *data)
{
        (void)t;
        struct next_turn *n = data;
        n->fired = true;
        n->second_before = n->second_ran;
        loop_quit(L);
}

static void second_ready(struct loop_source *s, int fd, uint32_t events, void *data)
{
        (void)s;
        (void)events;
        struct next_turn *n = data;
        char c;
        (void)!read(fd, &c, 1);
        n->second_ran = true;
}

static void first_ready(struct loop_source *s, int fd, uint32_t events, void *data)
{
        (void)s;
        (void)events;
        struct next_turn *n = data;
        char c;
        (void)!read(fd, &c, 1);
        CHECK(loop_add_next_turn(L, next_turn_fired, n) != NULL);
        (void)!write(n->second[1], "x", 1);
}

static void test_loop__next_turn_runs_after_what_became_ready(void)
{
        struct next_turn n = {0};
        CHECK(pipe2(n.first, O_CLOEXEC | O_NONBLOCK) == 0);
        CHECK(pipe2(n.second, O_CLOEXEC | O_NONBLOCK) == 0);
        struct loop_source *a = NULL, *b = NULL;
        CHECK_EQ_INT(loop_add_fd(L, n.first[0], EPOLLIN, first_ready, &n, &a), 0);
        CHECK_EQ_INT(loop_add_fd(L, n.second[0], EPOLLIN, second_ready, &n, &b), 0);
        (void)!write(n.first[1], "x", 1);
        run();
        CHECK(n.fired);
        CHECK(n.second_before);
        loop_remove(a);
        loop_remove(b);
        for (int i = 0; i < 2; i++) {
                close(n.first[i]);
                close(n.second[i]);
        }
}

int main(void)
{
        log_set_level(LOG_ERROR);
        signal(SIGPIPE, SIG_IGN);
        if (loop_new(&L) < 0) {
                fprintf(stderr, "loop_new failed\n");
                return 1;
        }
        RUN(test_supervise__exit_status_and_pipes);
        RUN(test_supervise__deadline_kills);
        RUN(test_supervise__pulled_stream);
        RUN(test_supervise__bound_process);
        RUN(test_supervise__abandon);
        RUN(test_loop__delayed_timer_fires_in_a_later_turn);
        RUN(test_loop__next_turn_runs_after_what_became_ready);
        loop_free(L);
        UNIT_EXIT();
}

/* The syncer (src/daemon/syncer.c) on the real event loop with its real process and fdatasync:
 * each request is answered once, in order, after a sync that began after it (of an fd opened
 * after the process started: it shares the fd table); requests made while a sync runs share the
 * next one; a cancelled one is never answered; a bad fd's error reaches its caller; a killed
 * process's requests are synced in the loop and answered; freeing drops what is unanswered and
 * leaves no process behind.
 *
 * Its sources are compiled into this file, like test_supervise.c's. */
#include "../../src/daemon/log.c"
#include "../../src/daemon/loop.c"
#include "../../src/daemon/syncer.c"

#include "unit.h"

#include <signal.h>
#include <sys/vfs.h>

static struct loop *L;
static int order[16];
static int results[16];
static int n_answered;
static int expect_answers;

static void answered(int result, void *data)
{
        int id = (int)(intptr_t)data;
        if (n_answered < (int)ELEMENTSOF(order)) {
                order[n_answered] = id;
                results[n_answered] = result;
        }
        if (++n_answered == expect_answers)
                loop_quit(L);
}

static struct loop_timer *give_up_timer;

static void give_up(struct loop_timer *t, void *data)
{
        (void)t;
        (void)data;
        give_up_timer = NULL; /* fired: it frees itself */
        loop_quit(L);
}

/* Runs the loop until n answers came, or timeout_ms passed. */
static void run_until_answered(int n, uint64_t timeout_ms)
{
        expect_answers = n;
        give_up_timer = loop_add_timer(L, timeout_ms, give_up, NULL);
        L->quit = false; /* loop_run does not reset it */
        loop_run(L);
        loop_cancel_timer(give_up_timer);
}

static int temp_file(void)
{
        char path[] = "/tmp/paddock-syncer-XXXXXX";
        int fd = mkstemp(path);
        if (fd >= 0)
                unlink(path);
        return fd;
}

/* The process names itself once it runs: given a second. */
static bool named(pid_t pid, const char *name)
{
        char comm[64] = "", want[64], path[64];
        snprintf(want, sizeof(want), "%s\n", name);
        snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
        for (int i = 0; i < 100; i++) {
                FILE *f = fopen(path, "re");
                if (!f || !fgets(comm, sizeof(comm), f))
                        comm[0] = 0;
                if (f)
                        fclose(f);
                if (!strcmp(comm, want))
                        return true;
                usleep(10000);
        }
        return false;
}

static void reset(void)
{
        n_answered = 0;
        memset(order, 0, sizeof(order));
        memset(results, 0, sizeof(results));
}

static void test_syncer__each_request_answered_once_in_order(void)
{
        struct syncer *s;
        CHECK(syncer_new(L, "paddockd-sync", &s) == 0);
        int fd = temp_file();
        CHECK(fd >= 0);
        reset();
        for (int i = 1; i <= 5; i++) {
                CHECK(write(fd, "x", 1) == 1);
                CHECK(syncer_after(s, fd, answered, (void *)(intptr_t)i, NULL) == 0);
        }
        /* The first started a sync at once; the four made meanwhile share the next one. */
        run_until_answered(5, 10000);
        CHECK_EQ_INT(n_answered, 5);
        CHECK_EQ_INT(s->syncs, 2);
        for (int i = 0; i < 5; i++) {
                CHECK_EQ_INT(order[i], i + 1);
                CHECK_EQ_INT(results[i], 0);
        }
        /* Nothing is answered twice: the loop stays quiet now. */
        run_until_answered(6, 200);
        CHECK_EQ_INT(n_answered, 5);
        syncer_free(s);
        close(fd);
}

static void test_syncer__cancelled_request_never_answered(void)
{
        struct syncer *s;
        CHECK(syncer_new(L, "paddockd-sync", &s) == 0);
        int fd = temp_file();
        reset();
        struct syncer_wait *w;
        CHECK(syncer_after(s, fd, answered, (void *)(intptr_t)1, NULL) == 0);
        CHECK(syncer_after(s, fd, answered, (void *)(intptr_t)2, &w) == 0);
        CHECK(syncer_after(s, fd, answered, (void *)(intptr_t)3, NULL) == 0);
        syncer_cancel(w);
        run_until_answered(2, 10000);
        CHECK_EQ_INT(n_answered, 2);
        CHECK(order[0] == 1 && order[1] == 3);
        run_until_answered(3, 200);
        CHECK_EQ_INT(n_answered, 2);
        syncer_free(s);
        close(fd);
}

/* The first of two answered by one sync cancels the second (its owner went away). */
static struct syncer_wait *second;

static void cancel_the_second(int result, void *data)
{
        answered(result, data);
        syncer_cancel(second);
        loop_quit(L);
}

static void test_syncer__cancelled_by_an_answer_of_the_same_sync(void)
{
        struct syncer *s;
        CHECK(syncer_new(L, "paddockd-sync", &s) == 0);
        int fd = temp_file();
        reset();
        /* Held before the first request so both are in flight in one sync. */
        CHECK(kill(syncer_pid(s), SIGSTOP) == 0);
        CHECK(syncer_after(s, fd, answered, (void *)(intptr_t)9, NULL) == 0);
        CHECK(syncer_after(s, fd, cancel_the_second, (void *)(intptr_t)1, NULL) == 0);
        CHECK(syncer_after(s, fd, answered, (void *)(intptr_t)2, &second) == 0);
        CHECK(kill(syncer_pid(s), SIGCONT) == 0);
        run_until_answered(2, 10000); /* 9 (the first sync), then 1 and 2 share the second */
        run_until_answered(3, 300);
        CHECK_EQ_INT(n_answered, 2);
        CHECK(order[0] == 9 && order[1] == 1);
        syncer_free(s);
        close(fd);
}

static void test_syncer__sync_error_reaches_its_caller(void)
{
        struct syncer *s;
        CHECK(syncer_new(L, "paddockd-sync", &s) == 0);
        reset();
        int fd = temp_file();
        CHECK(syncer_after(s, 1000000, answered, (void *)(intptr_t)7, NULL) == 0); /* not open */
        CHECK(syncer_after(s, fd, answered, (void *)(intptr_t)8, NULL) == 0);
        run_until_answered(2, 10000);
        CHECK_EQ_INT(n_answered, 2);
        CHECK(order[0] == 7 && results[0] == -EBADF);
        CHECK(order[1] == 8 && results[1] == 0);
        syncer_free(s);
        close(fd);
}

static void test_syncer__free_drops_the_unanswered(void)
{
        struct syncer *s;
        CHECK(syncer_new(L, "paddockd-sync", &s) == 0);
        int fd = temp_file();
        reset();
        CHECK(syncer_after(s, fd, answered, (void *)(intptr_t)1, NULL) == 0);
        CHECK(syncer_after(s, fd, answered, (void *)(intptr_t)2, NULL) == 0);
        pid_t pid = syncer_pid(s);
        syncer_free(s); /* ends and reaps the process; neither function runs */
        CHECK(n_answered == 0);
        CHECK(kill(pid, 0) < 0 && errno == ESRCH);
        close(fd);
}

static void test_syncer__a_killed_process_leaves_the_syncs_to_the_loop(void)
{
        struct syncer *s;
        CHECK(syncer_new(L, "paddockd-sync", &s) == 0);
        pid_t pid = syncer_pid(s);
        CHECK(pid > 0);
        CHECK(named(pid, "paddockd-sync"));
        int fd = temp_file();
        reset();
        /* Stopped first, so that the request waits in the pipe until the process is gone. */
        CHECK(kill(pid, SIGSTOP) == 0);
        CHECK(syncer_after(s, fd, answered, (void *)(intptr_t)1, NULL) == 0);
        CHECK(syncer_after(s, fd, answered, (void *)(intptr_t)2, NULL) == 0);
        CHECK(kill(pid, SIGKILL) == 0);
        run_until_answered(2, 10000);
        CHECK_EQ_INT(n_answered, 2);
        CHECK(order[0] == 1 && results[0] == 0);
        CHECK(order[1] == 2 && results[1] == 0);
        /* Reaped, and later requests are the caller's to sync. */
        CHECK_EQ_INT(syncer_pid(s), 0);
        CHECK(kill(pid, 0) < 0 && errno == ESRCH);
        CHECK_EQ_INT(syncer_after(s, fd, answered, (void *)(intptr_t)3, NULL), -ESRCH);
        syncer_free(s);
        close(fd);
}

/* A snapshot is a job of its own, answered with its own result, among syncs of another fd;
 * the process carries the name it was given. The temp directory is not btrfs: the ioctl's
 * error is what reaches the caller (the real snapshot: test_storage.py's spare disks). */
static void test_syncer__a_snapshot_is_a_job_of_its_own(void)
{
        struct syncer *s;
        CHECK(syncer_new(L, "paddockd-spare", &s) == 0);
        CHECK(named(syncer_pid(s), "paddockd-spare"));
        int fd = temp_file();
        int dir = open("/tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        CHECK(dir >= 0);
        struct statfs sfs;
        if (fstatfs(dir, &sfs) == 0 && sfs.f_type == 0x9123683e /* BTRFS_SUPER_MAGIC */) {
                SKIP("/tmp is btrfs: a snapshot there would be made for real");
                syncer_free(s);
                close(dir);
                close(fd);
                return;
        }
        CHECK_EQ_INT(syncer_snapshot(s, dir, dir, "a/b", answered, NULL, NULL), -EINVAL);
        CHECK_EQ_INT(syncer_snapshot(s, dir, dir, "", answered, NULL, NULL), -EINVAL);
        reset();
        /* Two snapshots of one source are two jobs, each answered with its own ioctl's result
         * (ENOTTY: not a btrfs directory), after the sync queued before them. */
        CHECK(syncer_after(s, fd, answered, (void *)(intptr_t)1, NULL) == 0);
        CHECK(syncer_snapshot(s, dir, dir, "paddock-syncer-snap", answered, (void *)(intptr_t)2,
                              NULL) == 0);
        CHECK(syncer_snapshot(s, dir, dir, "paddock-syncer-snap", answered, (void *)(intptr_t)3,
                              NULL) == 0);
        run_until_answered(3, 10000);
        CHECK_EQ_INT(n_answered, 3);
        CHECK(order[0] == 1 && results[0] == 0);
        CHECK(order[1] == 2 && results[1] == -ENOTTY);
        CHECK(order[2] == 3 && results[2] == -ENOTTY);
        CHECK_EQ_INT(s->syncs, 3);
        struct stat st;
        CHECK(fstatat(dir, "paddock-syncer-snap", &st, 0) < 0 && errno == ENOENT);
        syncer_free(s);
        close(dir);
        close(fd);
}

int main(void)
{
        log_set_level(LOG_ERROR);
        if (loop_new(&L) < 0) {
                fprintf(stderr, "loop_new failed\n");
                return 1;
        }
        RUN(test_syncer__each_request_answered_once_in_order);
        RUN(test_syncer__cancelled_request_never_answered);
        RUN(test_syncer__cancelled_by_an_answer_of_the_same_sync);
        RUN(test_syncer__sync_error_reaches_its_caller);
        RUN(test_syncer__free_drops_the_unanswered);
        RUN(test_syncer__a_killed_process_leaves_the_syncs_to_the_loop);
        RUN(test_syncer__a_snapshot_is_a_job_of_its_own);
        loop_free(L);
        UNIT_EXIT();
}

/* A thread that runs fdatasync for the loop (syncer.h). Its only state shared with the loop is
 * the two pipes: a request carries the fd, an answer carries the result. */
#include "daemon/syncer.h"
#include "daemon/loop.h"
#include "lib/util.h"

#include <pthread.h>
#include <signal.h>
#include <sys/epoll.h>
#include <time.h>

struct syncer_wait {
        struct syncer *owner;
        int fd;
        syncer_fn fn;
        void *data;
        bool in_flight; /* covered by the sync that runs now */
        struct syncer_wait *next;
};

struct syncer {
        struct loop *loop;
        pthread_t thread;
        int req_w, req_r;   /* loop → thread: the fd to sync */
        int done_w, done_r; /* thread → loop: its result */
        struct loop_source *done_src;
        bool running; /* a sync is in flight */
        unsigned long syncs; /* started so far (the unit test counts the group commits) */
        /* PADDOCK_TEST_SYNC_DELAY_MS: each sync waits this long first, so that a test can
         * hold a create at its sync (test_create_async.py). Read once, before the thread. */
        struct timespec test_delay;
        struct syncer_wait *waits; /* in order of arrival */
};

static void *sync_thread(void *arg)
{
        struct syncer *s = arg;
        for (;;) {
                int fd;
                ssize_t n = read(s->req_r, &fd, sizeof(fd));
                if (n < 0 && errno == EINTR)
                        continue;
                if (n != (ssize_t)sizeof(fd))
                        return NULL; /* the loop closed its end: syncer_free */
                if (s->test_delay.tv_sec || s->test_delay.tv_nsec)
                        nanosleep(&s->test_delay, NULL);
                int result = fdatasync(fd) < 0 ? -errno : 0;
                while (write(s->done_w, &result, sizeof(result)) < 0 && errno == EINTR)
                        ;
        }
}

/* Starts a sync for the oldest waiting request and every other one on the same fd. */
static void start_next(struct syncer *s)
{
        if (s->running || !s->waits)
                return;
        int fd = s->waits->fd;
        for (struct syncer_wait *w = s->waits; w; w = w->next)
                if (w->fd == fd)
                        w->in_flight = true;
        s->running = true;
        s->syncs++;
        ssize_t n;
        while ((n = write(s->req_w, &fd, sizeof(fd))) < 0 && errno == EINTR)
                ;
        if (n != (ssize_t)sizeof(fd)) { /* cannot happen with one request in a pipe; sync here */
                int result = fdatasync(fd) < 0 ? -errno : 0;
                while (write(s->done_w, &result, sizeof(result)) < 0 && errno == EINTR)
                        ;
        }
}

static void on_done(struct loop_source *src, int fd, uint32_t events, void *data)
{
        (void)src;
        (void)events;
        struct syncer *s = data;
        int result;
        if (read(fd, &result, sizeof(result)) != (ssize_t)sizeof(result))
                return;
        s->running = false;
        /* Take the answered ones off first: a function may add or cancel others. */
        struct syncer_wait *answered = NULL, **tail = &answered;
        for (struct syncer_wait **pp = &s->waits; *pp;) {
                struct syncer_wait *w = *pp;
                if (w->in_flight) {
                        *pp = w->next;
                        w->next = NULL;
                        *tail = w;
                        tail = &w->next;
                } else {
                        pp = &w->next;
                }
        }
        start_next(s);
        while (answered) {
                struct syncer_wait *w = answered;
                answered = w->next;
                syncer_fn fn = w->fn;
                void *fn_data = w->data;
                free(w);
                fn(result, fn_data);
        }
}

int syncer_new(struct loop *l, struct syncer **ret)
{
        struct syncer *s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        s->loop = l;
        const char *delay = getenv("PADDOCK_TEST_SYNC_DELAY_MS");
        if (delay) {
                unsigned long ms = strtoul(delay, NULL, 10);
                s->test_delay = (struct timespec){.tv_sec = (time_t)(ms / 1000),
                                                  .tv_nsec = (long)(ms % 1000) * 1000000L};
        }
        int req[2], done[2];
        if (pipe2(req, O_CLOEXEC) < 0) {
                free(s);
                return -errno;
        }
        if (pipe2(done, O_CLOEXEC | O_NONBLOCK) < 0) {
                int r = -errno;
                close(req[0]);
                close(req[1]);
                free(s);
                return r;
        }
        s->req_r = req[0];
        s->req_w = req[1];
        s->done_r = done[0];
        s->done_w = done[1];
        int r = loop_add_fd(l, s->done_r, EPOLLIN, on_done, s, &s->done_src);
        /* Every signal blocked in the thread: the daemon takes its own through a signalfd. */
        sigset_t all, old;
        sigfillset(&all);
        if (r >= 0) {
                pthread_sigmask(SIG_SETMASK, &all, &old);
                r = -pthread_create(&s->thread, NULL, sync_thread, s);
                pthread_sigmask(SIG_SETMASK, &old, NULL);
        }
        if (r < 0) {
                loop_remove(s->done_src);
                close(s->req_r);
                close(s->req_w);
                close(s->done_r);
                close(s->done_w);
                free(s);
                return r;
        }
        *ret = s;
        return 0;
}

void syncer_free(struct syncer *s)
{
        if (!s)
                return;
        close(s->req_w); /* the thread ends after the sync it may be running */
        pthread_join(s->thread, NULL);
        loop_remove(s->done_src);
        close(s->req_r);
        close(s->done_r);
        close(s->done_w);
        while (s->waits) {
                struct syncer_wait *w = s->waits;
                s->waits = w->next;
                free(w);
        }
        free(s);
}

int syncer_after(struct syncer *s, int fd, syncer_fn fn, void *data, struct syncer_wait **ret)
{
        struct syncer_wait *w = calloc(1, sizeof(*w));
        if (!w)
                return -ENOMEM;
        *w = (struct syncer_wait){.owner = s, .fd = fd, .fn = fn, .data = data};
        struct syncer_wait **pp = &s->waits;
        while (*pp)
                pp = &(*pp)->next;
        *pp = w;
        /* One that arrives while a sync runs waits for the next: the running one may have
         * started before this request's write. */
        start_next(s);
        if (ret)
                *ret = w;
        return 0;
}

void syncer_cancel(struct syncer_wait *w)
{
        if (!w)
                return;
        for (struct syncer_wait **pp = &w->owner->waits; *pp; pp = &(*pp)->next)
                if (*pp == w) {
                        *pp = w->next;
                        free(w);
                        return;
                }
}

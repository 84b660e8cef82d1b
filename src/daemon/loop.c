#include "daemon/loop.h"
#include "daemon/log.h"
#include "lib/util.h"

#include <dlfcn.h>

#include <sys/epoll.h>
#include <sys/resource.h>
#include <time.h>

/* A callback this long is named in the debug log. */
#define SLOW_CALLBACK_US 10000

struct loop_source {
        struct loop *loop;
        int fd;
        loop_io_fn fn;
        void *data;
        bool dead;
        struct loop_source *next_dead;
};

struct loop_timer {
        struct loop *loop;
        uint64_t deadline;
        uint64_t turn; /* the loop's turn it was added in; 0: may fire in that turn */
        loop_timer_fn fn;
        void *data;
        struct loop_timer *next;
};

struct loop {
        int epfd;
        bool quit;
        struct loop_source *dead;
        struct loop_timer *timers;
        uint64_t turn; /* counts turns, from 1 */
        uint64_t max_turn_us; /* the longest turn since loop_take_max_turn_us */
        uint64_t max_callback_us; /* the longest callback since loop_take_max_callback_us */
};

static uint64_t mono_us(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

uint64_t loop_take_max_turn_us(struct loop *l)
{
        uint64_t m = l->max_turn_us;
        l->max_turn_us = 0;
        return m;
}

uint64_t loop_take_max_callback_us(struct loop *l)
{
        uint64_t m = l->max_callback_us;
        l->max_callback_us = 0;
        return m;
}

/* Any callback's address, for the debug log's name of it. */
typedef void (*loop_any_fn)(void);

/* One callback's start. With debug logging on, also its thread's CPU time and context
 * switches, so that a slow one tells work from waiting (blocked in the kernel, or preempted). */
struct callback_clock {
        uint64_t wall_us;
        bool detail;
        uint64_t cpu_us;
        struct rusage ru;
};

static uint64_t thread_cpu_us(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
        return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static void callback_clock_start(struct callback_clock *c)
{
        c->detail = log_enabled(LOG_DEBUG);
        if (c->detail) {
                c->cpu_us = thread_cpu_us();
                getrusage(RUSAGE_THREAD, &c->ru);
        }
        c->wall_us = mono_us();
}

static void log_slow_callback(const struct callback_clock *c, uint64_t took, loop_any_fn fn)
{
        uint64_t cpu = thread_cpu_us() - c->cpu_us;
        struct rusage ru;
        getrusage(RUSAGE_THREAD, &ru);
        /* Static functions have no symbol to look up: the offset in the binary is what
         * `addr2line -f -e paddockd OFFSET` turns into a name and line. */
        Dl_info info;
        uintptr_t at = (uintptr_t)fn;
        if (!dladdr((void *)at, &info) || !info.dli_fbase)
                return;
        log_debug("loop: one callback held the loop %.1f ms (%s+0x%jx): %.1f ms on the CPU, "
                  "%ld waits, %ld preemptions",
                  (double)took / 1e3, info.dli_fname ? info.dli_fname : "?",
                  (uintmax_t)(at - (uintptr_t)info.dli_fbase), (double)cpu / 1e3,
                  ru.ru_nvcsw - c->ru.ru_nvcsw, ru.ru_nivcsw - c->ru.ru_nivcsw);
}

/* Times one callback: what one request or event cost the loop, apart from the others that
 * happened to share its turn. */
static void note_callback(struct loop *l, const struct callback_clock *c, loop_any_fn fn)
{
        uint64_t took = mono_us() - c->wall_us;
        if (took > l->max_callback_us)
                l->max_callback_us = took;
        if (took >= SLOW_CALLBACK_US && c->detail)
                log_slow_callback(c, took, fn);
}

int loop_new(struct loop **ret)
{
        struct loop *l = calloc(1, sizeof(*l));
        if (!l)
                return -ENOMEM;
        l->epfd = epoll_create1(EPOLL_CLOEXEC);
        if (l->epfd < 0) {
                int r = -errno;
                free(l);
                return r;
        }
        *ret = l;
        return 0;
}

static void free_dead(struct loop *l)
{
        while (l->dead) {
                struct loop_source *s = l->dead;
                l->dead = s->next_dead;
                free(s);
        }
}

void loop_free(struct loop *l)
{
        if (!l)
                return;
        free_dead(l);
        while (l->timers) {
                struct loop_timer *t = l->timers;
                l->timers = t->next;
                free(t);
        }
        close(l->epfd);
        free(l);
}

void loop_quit(struct loop *l)
{
        l->quit = true;
}

int loop_add_fd(struct loop *l, int fd, uint32_t events, loop_io_fn fn, void *data,
                struct loop_source **ret)
{
        struct loop_source *s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        *s = (struct loop_source){.loop = l, .fd = fd, .fn = fn, .data = data};
        struct epoll_event ev = {.events = events, .data.ptr = s};
        if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
                int r = -errno;
                free(s);
                return r;
        }
        if (ret)
                *ret = s;
        return 0;
}

int loop_set_events(struct loop_source *s, uint32_t events)
{
        struct epoll_event ev = {.events = events, .data.ptr = s};
        return epoll_ctl(s->loop->epfd, EPOLL_CTL_MOD, s->fd, &ev) < 0 ? -errno : 0;
}

void loop_remove(struct loop_source *s)
{
        if (!s || s->dead)
                return;
        epoll_ctl(s->loop->epfd, EPOLL_CTL_DEL, s->fd, NULL);
        s->dead = true;
        s->next_dead = s->loop->dead;
        s->loop->dead = s;
}

static struct loop_timer *add_timer(struct loop *l, uint64_t deadline, bool later_turn,
                                    loop_timer_fn fn, void *data)
{
        struct loop_timer *t = calloc(1, sizeof(*t));
        if (!t)
                return NULL;
        *t = (struct loop_timer){.loop = l, .deadline = deadline,
                                 .turn = later_turn ? l->turn : 0, .fn = fn, .data = data};
        /* At the tail: timers due in the same turn fire in the order they were added (an HTTP
         * answer's flush before the clean-up its producer scheduled after it). next_timeout()
         * walks the list every turn anyway. */
        struct loop_timer **p = &l->timers;
        while (*p)
                p = &(*p)->next;
        *p = t;
        return t;
}

struct loop_timer *loop_add_timer(struct loop *l, uint64_t after_ms, loop_timer_fn fn, void *data)
{
        /* A delay of a millisecond or more also means a later turn: the clock counts whole
         * milliseconds, so a deadline can pass within the turn that set it, and work split over
         * turns would then run in one after all. */
        return add_timer(l, now_ms() + after_ms, after_ms > 0, fn, data);
}

struct loop_timer *loop_add_next_turn(struct loop *l, loop_timer_fn fn, void *data)
{
        /* Due now, so the next wait is zero; not in this turn, so that wait comes first. */
        return add_timer(l, now_ms(), true, fn, data);
}

void loop_cancel_timer(struct loop_timer *t)
{
        if (!t)
                return;
        for (struct loop_timer **p = &t->loop->timers; *p; p = &(*p)->next)
                if (*p == t) {
                        *p = t->next;
                        free(t);
                        return;
                }
}

static int next_timeout(struct loop *l)
{
        if (!l->timers)
                return -1;
        uint64_t now = now_ms(), min = UINT64_MAX;
        for (struct loop_timer *t = l->timers; t; t = t->next)
                if (t->deadline < min)
                        min = t->deadline;
        return min <= now ? 0 : (int)(min - now > 60000 ? 60000 : min - now);
}

static void run_timers(struct loop *l)
{
        uint64_t now = now_ms();
        /* Fire one due timer per scan: a callback may add or cancel others. */
        for (;;) {
                struct loop_timer *due = NULL;
                for (struct loop_timer *t = l->timers; t; t = t->next)
                        if (t->deadline <= now && t->turn != l->turn) {
                                due = t;
                                break;
                        }
                if (!due)
                        return;
                loop_timer_fn fn = due->fn;
                void *data = due->data;
                loop_cancel_timer(due);
                struct callback_clock c;
                callback_clock_start(&c);
                fn(NULL, data);
                note_callback(l, &c, (loop_any_fn)fn);
        }
}

int loop_run(struct loop *l)
{
        struct epoll_event evs[64];
        while (!l->quit) {
                int n = epoll_wait(l->epfd, evs, (int)ELEMENTSOF(evs), next_timeout(l));
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                uint64_t t0 = mono_us();
                l->turn++;
                for (int i = 0; i < n; i++) {
                        struct loop_source *s = evs[i].data.ptr;
                        if (s->dead)
                                continue;
                        loop_io_fn fn = s->fn;
                        struct callback_clock c;
                        callback_clock_start(&c);
                        fn(s, s->fd, evs[i].events, s->data);
                        note_callback(l, &c, (loop_any_fn)fn);
                }
                run_timers(l);
                free_dead(l);
                uint64_t took = mono_us() - t0;
                if (took > l->max_turn_us)
                        l->max_turn_us = took;
        }
        return 0;
}

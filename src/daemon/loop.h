/* The daemon's single-threaded event loop: epoll for fds (sockets, pipes, pidfds, signalfd)
 * plus a short list of deadline timers. Callbacks run one at a time; a source removed inside a
 * callback is freed only after the current dispatch round, so stale events are harmless. */
#pragma once
#include <stdbool.h>
#include <stdint.h>

struct loop;
struct loop_source;
struct loop_timer;

typedef void (*loop_io_fn)(struct loop_source *s, int fd, uint32_t events, void *data);
typedef void (*loop_timer_fn)(struct loop_timer *t, void *data);

int loop_new(struct loop **ret);
void loop_free(struct loop *l);
int loop_run(struct loop *l); /* until loop_quit */
void loop_quit(struct loop *l);

int loop_add_fd(struct loop *l, int fd, uint32_t events, loop_io_fn fn, void *data,
                struct loop_source **ret);
int loop_set_events(struct loop_source *s, uint32_t events);
/* Stops watching; does not close the fd. NULL is fine. */
void loop_remove(struct loop_source *s);

/* The longest turn (every callback run between two waits: the time the loop answered
 * nobody else) since the previous call, in microseconds; the count starts again. */
uint64_t loop_take_max_turn_us(struct loop *l);

/* The longest single callback (one request's or event's share of a turn) since the previous
 * call, in microseconds; the count starts again. (--debug names each slow one.) */
uint64_t loop_take_max_callback_us(struct loop *l);

/* One-shot timer at now_ms() + after_ms. */
struct loop_timer *loop_add_timer(struct loop *l, uint64_t after_ms, loop_timer_fn fn, void *data);
/* One-shot, as soon as the loop has looked for (and run) what became ready meanwhile: the next
 * turn, without waiting. Work split over turns lets others in between at no latency cost.
 * Cancel with loop_cancel_timer. */
struct loop_timer *loop_add_next_turn(struct loop *l, loop_timer_fn fn, void *data);
void loop_cancel_timer(struct loop_timer *t); /* NULL is fine */

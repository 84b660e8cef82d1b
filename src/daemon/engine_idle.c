/* Idle stop and wake-up (docs/operations.md, "Idle environments").
 *
 * An environment created or updated with an idle timeout is paused (the default for sandboxes)
 * or stopped (computers) once it has had no activity for that long. Activity is:
 *   - an API request that works inside it: exec (also the shell's WebSocket), the files and
 *     archive routes, its background processes' routes, start and resume (api_idle.c);
 *   - a running exec or shell session (held from its start to its end, engine_idle_hold);
 *   - output of one of its background processes (a silent background process is not);
 *   - network traffic on its interface, in either direction (packet counters, sampled).
 * Listing, inspecting, stats, metrics, events, snapshots and PATCH are not: a dashboard that
 * polls does not keep environments awake.
 *
 * Cost: touching is one store (the time of the last activity); nothing is scanned per request
 * or per tick. Every environment with a timeout that is running has one entry in a binary
 * min-heap ordered by when it must next be looked at, and the engine has one loop timer for
 * the heap's first entry. An entry comes due at last activity + timeout (environments without
 * a network need nothing else), or earlier, every timeout/4 (1 s to 60 s), to sample the packet
 * counters of a networked one: so an environment idles between DUR and DUR + DUR/4 after its
 * last packet. A due entry that saw activity meanwhile is moved, not rescanned: O(log n).
 * Entries of environments that stopped, were paused by hand or are stopping are dropped when
 * they come due; start, resume and PATCH put them back.
 *
 * The next request that needs the environment running wakes it before its handler runs:
 * resume (paused) or start (stopped); the caller only sees a slower first answer. An explicit
 * pause or stop is never undone by a request: only what the idle timer did (and an explicit
 * pause or stop of an idle one makes it the caller's, engine_idle_keep).
 *
 * An inbound TCP connection wakes an environment with a published port that the idle timer
 * paused (on that port or any other). Frozen processes do not run, but the kernel of the
 * environment's network namespace still does: it answers the SYN of a listening socket,
 * completes the handshake and queues the connection for accept(), counting it in that
 * namespace's Tcp PassiveOpens (/proc/PID/net/snmp). A paused environment keeps a heap entry
 * that looks at that count every IDLE_WAKE_STEP_MS and resumes it when it moved: the client's
 * connect() succeeded at once, and its first bytes wait in the socket's buffer until the
 * process runs again. PassiveOpens and not the veth's packet counters: those also move with
 * ARP and neighbour discovery, a SYN to a port nobody listens on, and the retransmits and
 * keepalives the frozen environment's own kernel sends, none of which is anybody asking for it.
 * Cost: one read of a 1.5 KiB procfs file (~35 us) per such paused environment per second;
 * environments without a published port are not looked at. A stopped computer has no network
 * namespace to count anything: see docs/operations.md. */
#include "daemon/engine_internal.h"
#include "daemon/events.h"
#include "daemon/log.h"
#include "daemon/loop.h"
#include "daemon/metrics.h"
#include "lib/util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define IDLE_STOP_GRACE_S 10 /* SIGTERM, then SIGKILL after this long */
/* Pauses and stops per timer callback: when many come due at once (a fleet created together),
 * the rest wait for the next turn of the loop, so requests are served in between. */
#define IDLE_ACTIONS_PER_TURN 16
/* How often an idle-paused environment's accepted connections are looked at: the longest a
 * client that connected to it waits for its first answer, beyond the resume itself. */
#define IDLE_WAKE_STEP_MS 1000

static uint64_t step_ms(const struct env *v)
{
        uint64_t s = v->idle_timeout_s * 1000 / 4;
        return s < 1000 ? 1000 : s > 60000 ? 60000 : s;
}

static bool has_net(const struct engine *e, const struct env *v)
{
        return e->net && v->net.mode != NET_NONE;
}

static uint64_t packets(struct engine *e, struct env *v)
{
        struct link_stats s;
        metrics_env_net(e, v, false, &s);
        return s.rx_packets + s.tx_packets;
}

/* TCP connections accepted by listening sockets in the network namespace of v's PID 1: the
 * PassiveOpens column of the "Tcp:" lines of /proc/PID/net/snmp. */
static int passive_opens(const struct env *v, uint64_t *ret)
{
        char path[64], buf[4096];
        snprintf(path, sizeof(path), "/proc/%lld/net/snmp", (long long)v->row.pid);
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        /* The pidfd pins the process: if it is still alive, the pid was not reused. */
        if (sys_pidfd_send_signal(v->pidfd, 0, 0) < 0)
                return -ESRCH;
        size_t n = 0;
        for (;;) {
                ssize_t k = read(fd, buf + n, sizeof(buf) - 1 - n);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return -errno;
                if (k == 0 || (n += (size_t)k) == sizeof(buf) - 1)
                        break;
        }
        buf[n] = 0;
        const char *head = strstr(buf, "\nTcp: ");
        const char *vals = head ? strstr(head + 1, "\nTcp: ") : NULL;
        if (!vals)
                return -EBADMSG;
        /* the column of PassiveOpens in the header line, the same column in the values line */
        unsigned col = 0;
        const char *p = head + 6;
        for (; *p != '\n'; col++) {
                p += strspn(p, " ");
                size_t len = strcspn(p, " \n");
                if (len == 12 && !strncmp(p, "PassiveOpens", 12))
                        break;
                p += len;
        }
        if (*p == '\n')
                return -EBADMSG;
        p = vals + 6;
        for (unsigned i = 0; i < col && *p && *p != '\n'; i++) {
                p += strspn(p, " ");
                p += strcspn(p, " \n");
        }
        char *end;
        unsigned long long x = strtoull(p, &end, 10);
        if (end == p)
                return -EBADMSG;
        *ret = x;
        return 0;
}

/* ---- the heap: e->idle_heap[0 .. e->idle_n), ordered by idle_due; v->idle_slot = index+1 */

static void heap_set(struct engine *e, size_t i, struct env *v)
{
        e->idle_heap[i] = v;
        v->idle_slot = i + 1;
}

static void heap_up(struct engine *e, size_t i)
{
        struct env *v = e->idle_heap[i];
        while (i > 0) {
                size_t parent = (i - 1) / 2;
                if (e->idle_heap[parent]->idle_due <= v->idle_due)
                        break;
                heap_set(e, i, e->idle_heap[parent]);
                i = parent;
        }
        heap_set(e, i, v);
}

static void heap_down(struct engine *e, size_t i)
{
        struct env *v = e->idle_heap[i];
        for (;;) {
                size_t c = 2 * i + 1;
                if (c >= e->idle_n)
                        break;
                if (c + 1 < e->idle_n && e->idle_heap[c + 1]->idle_due < e->idle_heap[c]->idle_due)
                        c++;
                if (e->idle_heap[c]->idle_due >= v->idle_due)
                        break;
                heap_set(e, i, e->idle_heap[c]);
                i = c;
        }
        heap_set(e, i, v);
}

static int heap_push(struct engine *e, struct env *v)
{
        if (e->idle_n == e->idle_cap) {
                size_t cap = e->idle_cap ? 2 * e->idle_cap : 64;
                struct env **h = realloc(e->idle_heap, cap * sizeof(*h));
                if (!h)
                        return -ENOMEM;
                e->idle_heap = h;
                e->idle_cap = cap;
        }
        heap_set(e, e->idle_n++, v);
        heap_up(e, e->idle_n - 1);
        return 0;
}

static void heap_remove(struct engine *e, struct env *v)
{
        if (!v->idle_slot)
                return;
        size_t i = v->idle_slot - 1;
        v->idle_slot = 0;
        struct env *last = e->idle_heap[--e->idle_n];
        if (i == e->idle_n)
                return;
        heap_set(e, i, last);
        heap_up(e, i);
        heap_down(e, last->idle_slot - 1);
}

/* ---- the one timer */

static void on_idle_timer(struct loop_timer *t, void *data);

static void rearm(struct engine *e)
{
        uint64_t due = e->idle_n ? e->idle_heap[0]->idle_due : 0;
        if (e->idle_timer && e->idle_timer_due == due)
                return;
        loop_cancel_timer(e->idle_timer);
        e->idle_timer = NULL;
        if (!e->idle_n)
                return;
        uint64_t now = now_ms();
        e->idle_timer = loop_add_timer(e->cfg.loop, due > now ? due - now : 0, on_idle_timer, e);
        e->idle_timer_due = due;
}

static bool watched(const struct env *v)
{
        return v->idle_timeout_s && v->pidfd >= 0 && !v->starting && !v->paused && !v->stopping &&
               !v->deleting;
}

/* Paused by the idle timer with a published port: an inbound connection wakes it. */
static bool wake_watched(struct engine *e, const struct env *v)
{
        return v->idled_at && v->paused && v->pidfd >= 0 && !v->stopping && has_net(e, v) &&
               env_has_ports(e, v);
}

/* Keep looking at v's accepted connections while it is paused, from the count *opens (read
 * before the freeze, so a connection in between is not missed). */
static void watch_connections(struct engine *e, struct env *v, uint64_t opens)
{
        v->idle_opens = opens;
        v->idle_due = now_ms() + IDLE_WAKE_STEP_MS;
        if (heap_push(e, v) < 0)
                log_warn("%s: no memory to watch its connections while idle", v->row.name);
}

static uint64_t next_due(struct engine *e, const struct env *v, uint64_t now)
{
        uint64_t at = v->active_ms + v->idle_timeout_s * 1000;
        if (has_net(e, v) && now + step_ms(v) < at)
                at = now + step_ms(v);
        return at;
}

static void go_idle(struct engine *e, struct env *v)
{
        const char *action = v->idle_stop ? "stop" : "pause";
        log_info("%s: idle for %llus: %s", v->row.name, (unsigned long long)v->idle_timeout_s,
                 v->idle_stop ? "stopping" : "pausing");
        v->idled_at = wall_s();
        events_env("idle", v, json_pack("{s:s,s:I}", "action", action, "idle_timeout",
                                        (json_int_t)v->idle_timeout_s));
        if (v->idle_stop) {
                e->idle_stopped++;
                env_save(e, v);
                engine_stop(e, v, IDLE_STOP_GRACE_S, NULL, NULL);
                return;
        }
        uint64_t opens = 0;
        bool counted = has_net(e, v) && env_has_ports(e, v) && passive_opens(v, &opens) >= 0;
        int r = engine_pause(e, v, true); /* records idled_at with the state */
        if (r < 0) {
                log_warn("%s: pausing the idle environment: %s", v->row.name, strerror(-r));
                v->idled_at = 0;
                v->active_ms = now_ms(); /* try again after another timeout */
                v->idle_due = next_due(e, v, v->active_ms);
                heap_push(e, v);
                return;
        }
        e->idle_paused++;
        if (counted)
                watch_connections(e, v, opens);
}

/* An idle-paused environment accepted a connection: resume it. */
static void wake_on_connection(struct engine *e, struct env *v)
{
        char err[256] = "";
        log_info("%s: an inbound connection while idle", v->row.name);
        int r = engine_idle_wake(e, v, err, sizeof(err)); /* re-arms it */
        if (r < 0) {
                log_warn("%s: waking it for a connection: %s", v->row.name, err);
                v->idle_due = now_ms() + IDLE_WAKE_STEP_MS;
                heap_push(e, v);
        }
}

static void on_idle_timer(struct loop_timer *t, void *data)
{
        struct engine *e = data;
        e->idle_timer = NULL;
        uint64_t now = now_ms();
        unsigned actions = 0;
        /* Bounded: each entry is either dropped, idled, or moved to a later time. */
        while (e->idle_n && e->idle_heap[0]->idle_due <= now && actions < IDLE_ACTIONS_PER_TURN) {
                struct env *v = e->idle_heap[0];
                uint64_t opens;
                if (wake_watched(e, v)) {
                        if (passive_opens(v, &opens) >= 0 && opens != v->idle_opens) {
                                actions++;
                                heap_remove(e, v);
                                wake_on_connection(e, v);
                                continue;
                        }
                        v->idle_due = now + IDLE_WAKE_STEP_MS;
                        heap_down(e, 0);
                        continue;
                }
                if (!watched(v)) {
                        heap_remove(e, v);
                        continue;
                }
                if (v->idle_holds)
                        v->active_ms = now;
                if (has_net(e, v)) {
                        uint64_t p = packets(e, v);
                        if (p != v->idle_packets)
                                v->active_ms = now;
                        v->idle_packets = p;
                }
                if (v->active_ms + v->idle_timeout_s * 1000 <= now) {
                        actions++;
                        heap_remove(e, v);
                        go_idle(e, v); /* may push it back (a pause that failed) */
                        continue;
                }
                v->idle_due = next_due(e, v, now);
                heap_down(e, 0);
        }
        rearm(e);
}

/* ---- the engine's hooks */

void engine_idle_watch(struct engine *e, struct env *v)
{
        uint64_t opens;
        if (wake_watched(e, v) && !v->idle_slot && passive_opens(v, &opens) >= 0) {
                watch_connections(e, v, opens);
                rearm(e);
        }
}

void engine_idle_arm(struct engine *e, struct env *v)
{
        if (!watched(v)) {
                engine_idle_watch(e, v);
                return; /* dropped from the heap, if it is there, when it comes due */
        }
        uint64_t now = now_ms();
        v->active_ms = now;
        if (has_net(e, v))
                v->idle_packets = packets(e, v);
        v->idle_due = next_due(e, v, now);
        if (v->idle_slot) {
                heap_up(e, v->idle_slot - 1);
                heap_down(e, v->idle_slot - 1);
        } else if (heap_push(e, v) < 0) {
                log_warn("%s: no memory for its idle timer", v->row.name);
                return;
        }
        rearm(e);
}

void engine_idle_forget(struct engine *e, struct env *v)
{
        heap_remove(e, v);
        rearm(e);
}

void engine_idle_free(struct engine *e)
{
        for (size_t i = 0; i < e->idle_n; i++)
                e->idle_heap[i]->idle_slot = 0;
        free(e->idle_heap);
        e->idle_heap = NULL;
        e->idle_n = e->idle_cap = 0;
        loop_cancel_timer(e->idle_timer);
        e->idle_timer = NULL;
}

void engine_idle_start(struct engine *e)
{
        for (struct env *v = e->envs; v; v = v->next)
                engine_idle_arm(e, v);
}

/* ---- the rest of the daemon */

void engine_idle_touch(struct engine *e, struct env *v)
{
        v->active_ms = now_ms();
}

void engine_idle_touch_name(struct engine *e, const char *name)
{
        struct env *v = name ? engine_find(e, name) : NULL;
        if (v)
                v->active_ms = now_ms();
}

void engine_idle_hold(struct engine *e, const char *name, bool hold)
{
        struct env *v = engine_find(e, name);
        if (!v)
                return;
        if (hold)
                v->idle_holds++;
        else if (v->idle_holds)
                v->idle_holds--;
        v->active_ms = now_ms();
}

void engine_idle_keep(struct engine *e, struct env *v)
{
        if (!v->idled_at)
                return;
        v->idled_at = 0; /* its connection watch is dropped when it comes due */
        int r = env_save(e, v);
        if (r < 0)
                log_warn("%s: recording the pause: %s", v->row.name, strerror(-r));
}

bool env_idled(const struct env *v)
{
        return v->idled_at != 0;
}

/* A wake-up done: counted, said, announced. */
static void woke(struct engine *e, struct env *v, const char *was, uint64_t t0)
{
        e->idle_woken++;
        log_info("%s: woken (was %s when idle) in %llu ms", v->row.name, was,
                 (unsigned long long)(now_ms() - t0));
        events_env("woke", v, json_pack("{s:s}", "was", was));
}

int engine_idle_wake(struct engine *e, struct env *v, char *err, size_t errlen)
{
        if (!v->idled_at)
                return 0;
        if (v->stopping) {
                snprintf(err, errlen, "%s is stopping after being idle; try again in a moment",
                         v->row.name);
                return -EBUSY;
        }
        const char *was = v->pidfd >= 0 ? "paused" : "stopped";
        uint64_t t0 = now_ms();
        int r;
        if (v->pidfd >= 0) {
                r = engine_pause(e, v, false); /* clears idled_at and re-arms */
                if (r < 0)
                        snprintf(err, errlen, "resuming %s: %s", v->row.name, strerror(-r));
        } else {
                r = engine_start(e, v, err, errlen); /* the same */
        }
        if (r < 0)
                return r;
        woke(e, v, was, t0);
        return 1;
}

struct waking {
        engine_created_fn done;
        void *data;
        uint64_t t0;
};

static void on_woken(struct engine *e, struct env *v, int r, const char *err, void *data)
{
        struct waking *w = data;
        if (r >= 0)
                woke(e, v, "stopped", w->t0);
        w->done(e, v, r, err, w->data);
        free(w);
}

int engine_idle_wake_async(struct engine *e, struct env *v, engine_created_fn done, void *data,
                           char *err, size_t errlen)
{
        if (!v->idled_at || v->pidfd >= 0) {
                snprintf(err, errlen, "%s was not stopped when idle", v->row.name);
                return -EINVAL;
        }
        struct waking *w = calloc(1, sizeof(*w));
        if (!w) {
                snprintf(err, errlen, "out of memory");
                return -ENOMEM;
        }
        *w = (struct waking){.done = done, .data = data, .t0 = now_ms()};
        int r = engine_start_async(e, v, on_woken, w, err, errlen); /* clears idled_at */
        if (r < 0)
                free(w);
        return r;
}

void engine_idle_metrics(const struct engine *e, FILE *f)
{
        fputs("# HELP paddock_idle_total Environments the idle timer paused or stopped, and "
              "requests that woke them, since the daemon started.\n"
              "# TYPE paddock_idle_total counter\n", f);
        fprintf(f, "paddock_idle_total{action=\"pause\"} %llu\n",
                (unsigned long long)e->idle_paused);
        fprintf(f, "paddock_idle_total{action=\"stop\"} %llu\n",
                (unsigned long long)e->idle_stopped);
        fprintf(f, "paddock_idle_total{action=\"wake\"} %llu\n",
                (unsigned long long)e->idle_woken);
        fputs("# HELP paddock_idle_watched Running environments whose idle clock runs, and "
              "idle-paused ones with a published port whose connections are watched.\n"
              "# TYPE paddock_idle_watched gauge\n", f);
        fprintf(f, "paddock_idle_watched %zu\n", e->idle_n);
}

uint64_t env_idle_timeout(const struct env *v)
{
        return v->idle_timeout_s;
}

bool env_idle_stop(const struct env *v)
{
        return v->idle_stop;
}

int64_t env_idled_at(const struct env *v)
{
        return v->idled_at;
}

#include "daemon/procs.h"
#include "daemon/log.h"
#include "lib/base64.h"
#include "lib/paddock.h"
#include "lib/util.h"

#include <signal.h>

struct chunk {
        struct chunk *next;
        uint64_t seq;
        int stream;
        size_t len;
        char data[];
};

/* A reader of the output (struct proc_reader): NDJSON lines, one chunk at a time. */
struct proc_reader {
        void (*wake)(void *data);
        void *data;
        struct proc *p; /* NULL once the record is gone */
        uint64_t next_seq;
        struct chunk *last; /* the chunk sent last: still alive while its seq >= head's */
        bool follow, sent_exit;
        char *pending;
        size_t pending_len, pending_off;
        struct proc_reader *next;
};

struct proc_waiter {
        proc_wait_fn done;
        void *data;
        struct proc *p;
        struct proc_waiter *next;
};

struct proc {
        char env[NAME_BUF_SIZE];
        unsigned id;
        char cmd[512];
        int64_t started_at, finished_at;
        bool exited;
        struct exec_result res;
        struct exec_session *s;
        struct chunk *head, *tail;
        size_t bytes; /* memory the chunks take (chunk_cost) */
        uint64_t next_seq, dropped_bytes;
        struct proc_reader *followers;
        struct proc_waiter *waiters;
        struct proc *next;
};

static struct proc *procs;
static unsigned last_id;

/* ---- output buffer ------------------------------------------------------------------------- */

static void wake_followers(struct proc *p)
{
        for (struct proc_reader *f = p->followers; f; f = f->next)
                f->wake(f->data);
}

/* What a chunk costs the daemon: its bytes plus its header and the allocator's, so that a
 * process writing one byte at a time cannot make a million chunks out of the 1 MiB budget. */
static size_t chunk_cost(size_t len)
{
        return sizeof(struct chunk) + len + 16;
}

static void on_output(void *data, int stream, const char *buf, size_t len)
{
        struct proc *p = data;
        if (len > PROCS_BUFFER_BYTES) {
                p->dropped_bytes += len - PROCS_BUFFER_BYTES;
                buf += len - PROCS_BUFFER_BYTES;
                len = PROCS_BUFFER_BYTES;
        }
        struct chunk *c = malloc(sizeof(*c) + len);
        if (!c)
                return;
        *c = (struct chunk){.seq = p->next_seq++, .stream = stream, .len = len};
        memcpy(c->data, buf, len);
        if (p->tail)
                p->tail->next = c;
        else
                p->head = c;
        p->tail = c;
        p->bytes += chunk_cost(len);
        /* Bounded: the oldest output goes first. */
        while (p->bytes > PROCS_BUFFER_BYTES && p->head != p->tail) {
                struct chunk *old = p->head;
                p->head = old->next;
                p->bytes -= chunk_cost(old->len);
                p->dropped_bytes += old->len;
                free(old);
        }
        wake_followers(p);
}

json_t *proc_result_json(const struct exec_result *r)
{
        return json_pack("{s:i,s:I,s:b,s:b}", "exit_code", r->exit_code, "duration_ms",
                         (json_int_t)r->duration_ms, "timed_out", r->timed_out, "truncated",
                         r->truncated);
}

static void on_done(void *data, const struct exec_result *res)
{
        struct proc *p = data;
        p->s = NULL;
        p->exited = true;
        p->res = *res;
        p->finished_at = wall_s();
        log_info("%s: background process %u exited with %d", p->env, p->id, res->exit_code);
        struct proc_waiter *w = p->waiters;
        p->waiters = NULL;
        while (w) {
                struct proc_waiter *next = w->next;
                w->done(w->data, &p->res);
                free(w);
                w = next;
        }
        wake_followers(p);
}

static const struct exec_callbacks callbacks = {.output = on_output, .done = on_done,
                                                .background = true};

/* ---- records ----------------------------------------------------------------------------- */

static void proc_free(struct proc *p)
{
        for (struct proc_reader *f = p->followers, *next; f; f = next) {
                next = f->next;
                f->p = NULL; /* the stream ends at its next read */
                f->next = NULL;
                f->wake(f->data);
        }
        for (struct proc_waiter *w = p->waiters, *next; w; w = next) {
                next = w->next;
                w->done(w->data, NULL);
                free(w);
        }
        if (p->s)
                exec_detach(p->s);
        while (p->head) {
                struct chunk *c = p->head;
                p->head = c->next;
                free(c);
        }
        free(p);
}

static void unlink_proc(struct proc *p)
{
        for (struct proc **pp = &procs; *pp; pp = &(*pp)->next)
                if (*pp == p) {
                        *pp = p->next;
                        return;
                }
}

static void prune_env(const char *env)
{
        size_t n = 0;
        for (struct proc *p = procs; p; p = p->next)
                n += strcmp(p->env, env) == 0;
        /* Oldest finished records first (the list is newest first). */
        while (n >= PROCS_MAX_PER_ENV) {
                struct proc *victim = NULL;
                for (struct proc *p = procs; p; p = p->next)
                        if (!strcmp(p->env, env) && p->exited)
                                victim = p;
                if (!victim)
                        return;
                unlink_proc(victim);
                proc_free(victim);
                n--;
        }
}

int procs_start(struct engine *e, struct env *v, const struct exec_request *rq, unsigned *ret_id,
                char *err, size_t errlen)
{
        prune_env(env_name(v));
        size_t running = 0;
        for (struct proc *p = procs; p; p = p->next)
                running += !strcmp(p->env, env_name(v));
        if (running >= PROCS_MAX_PER_ENV) {
                snprintf(err, errlen, "too many background processes (limit %d)", PROCS_MAX_PER_ENV);
                return -EAGAIN;
        }
        struct proc *p = calloc(1, sizeof(*p));
        if (!p)
                return -ENOMEM;
        snprintf(p->env, sizeof(p->env), "%s", env_name(v));
        size_t off = 0;
        for (size_t i = 0; rq->argv[i] && off < sizeof(p->cmd) - 1; i++)
                off += (size_t)snprintf(p->cmd + off, sizeof(p->cmd) - off, "%s%s", i ? " " : "",
                                        rq->argv[i]);
        p->started_at = wall_s();
        int r = exec_start(e, v, rq, &callbacks, p, &p->s, err, errlen);
        if (r < 0) {
                free(p);
                return r;
        }
        p->id = ++last_id;
        p->next = procs;
        procs = p;
        *ret_id = p->id;
        return 0;
}

struct proc *procs_find(const char *env, unsigned id)
{
        for (struct proc *p = procs; p; p = p->next)
                if (p->id == id && !strcmp(p->env, env))
                        return p;
        return NULL;
}

static json_t *time_or_null(int64_t t)
{
        char buf[RFC3339_SIZE];
        return t ? json_string(format_rfc3339(t, buf)) : json_null();
}

json_t *proc_json(const struct proc *p)
{
        return json_pack("{s:i,s:s,s:s,s:o,s:o,s:o,s:b,s:I}", "id", p->id, "cmd", p->cmd, "state",
                         p->exited ? "exited" : "running", "exit_code",
                         p->exited ? json_integer(p->res.exit_code) : json_null(), "started_at",
                         time_or_null(p->started_at), "finished_at",
                         time_or_null(p->finished_at), "timed_out", p->res.timed_out,
                         "dropped_bytes", (json_int_t)p->dropped_bytes);
}

json_t *procs_list_json(const char *env)
{
        json_t *arr = json_array();
        for (struct proc *p = procs; p; p = p->next)
                if (!strcmp(p->env, env))
                        json_array_insert_new(arr, 0, proc_json(p)); /* oldest first */
        return arr;
}

int proc_signal(struct proc *p, int sig)
{
        if (p->exited || !p->s)
                return -ESRCH;
        return exec_signal(p->s, sig);
}

bool proc_exited(const struct proc *p)
{
        return p->exited;
}

int proc_forget(struct proc *p)
{
        if (!p->exited)
                return -EBUSY;
        unlink_proc(p);
        proc_free(p);
        return 0;
}

void procs_drop_env(const char *env)
{
        for (struct proc *p = procs, *next; p; p = next) {
                next = p->next;
                if (!strcmp(p->env, env)) {
                        unlink_proc(p);
                        proc_free(p);
                }
        }
}

/* ---- output streams ------------------------------------------------------------------------ */

static bool follower_fill(struct proc_reader *f)
{
        struct proc *p = f->p;
        json_t *j = NULL;
        if (p) {
                /* Resume after the last chunk sent instead of scanning from the head: with
                 * many tiny chunks a scan per line would stall the daemon (quadratic). */
                bool last_alive = f->last && p->head && p->head->seq < f->next_seq;
                struct chunk *c = last_alive ? f->last->next : p->head;
                while (c && c->seq < f->next_seq)
                        c = c->next;
                if (c) {
                        bool b64 = !utf8_valid(c->data, c->len);
                        json_t *text;
                        if (b64) {
                                char *enc = malloc(base64_encoded_size(c->len));
                                size_t n = enc ? base64_encode(c->data, c->len, enc) : 0;
                                text = json_stringn(enc ? enc : "", n);
                                free(enc);
                        } else {
                                text = json_stringn(c->data, c->len);
                        }
                        j = json_pack("{s:o}", c->stream == 1 ? "stdout" : "stderr", text);
                        if (j && b64)
                                json_object_set_new(j, "encoding", json_string("base64"));
                        f->next_seq = c->seq + 1;
                        f->last = c;
                } else if (p->exited && !f->sent_exit) {
                        j = proc_result_json(&p->res);
                        f->sent_exit = true;
                }
        }
        if (!j)
                return false;
        char *line = json_dumps(j, JSON_COMPACT | JSON_ENSURE_ASCII);
        json_decref(j);
        if (!line)
                return false;
        free(f->pending);
        f->pending_len = strlen(line) + 1;
        f->pending = realloc(line, f->pending_len + 1);
        if (!f->pending) {
                free(line);
                f->pending_len = 0;
                return false;
        }
        f->pending[f->pending_len - 1] = '\n';
        f->pending_off = 0;
        return true;
}

ssize_t proc_reader_read(struct proc_reader *f, char *buf, size_t max)
{
        if (f->pending_off >= f->pending_len && !follower_fill(f)) {
                bool more = f->p && f->follow && !f->sent_exit;
                return more ? 0 : -1;
        }
        return (ssize_t)take_pending(buf, max, f->pending, f->pending_len, &f->pending_off);
}

void proc_reader_close(struct proc_reader *f)
{
        if (!f)
                return;
        if (f->p)
                for (struct proc_reader **pp = &f->p->followers; *pp; pp = &(*pp)->next)
                        if (*pp == f) {
                                *pp = f->next;
                                break;
                        }
        free(f->pending);
        free(f);
}

int proc_reader_open(struct proc *p, bool follow, void (*wake)(void *data), void *data,
                     struct proc_reader **ret)
{
        struct proc_reader *f = calloc(1, sizeof(*f));
        if (!f)
                return -ENOMEM;
        *f = (struct proc_reader){
            .wake = wake, .data = data, .p = p, .follow = follow, .next = p->followers};
        f->next_seq = p->head ? p->head->seq : p->next_seq;
        p->followers = f;
        *ret = f;
        return 0;
}

/* ---- waiting for the exit ------------------------------------------------------------------ */

int proc_wait(struct proc *p, proc_wait_fn done, void *data, struct proc_waiter **ret)
{
        if (p->exited) {
                *ret = NULL;
                done(data, &p->res);
                return 1;
        }
        struct proc_waiter *w = calloc(1, sizeof(*w));
        if (!w)
                return -ENOMEM;
        *w = (struct proc_waiter){.done = done, .data = data, .p = p, .next = p->waiters};
        p->waiters = w;
        *ret = w;
        return 0;
}

void proc_wait_cancel(struct proc_waiter *w)
{
        if (!w)
                return;
        for (struct proc_waiter **pp = &w->p->waiters; *pp; pp = &(*pp)->next)
                if (*pp == w) {
                        *pp = w->next;
                        break;
                }
        free(w);
}

#include "daemon/http.h"
#include "daemon/log.h"
#include "lib/util.h"

#include <microhttpd.h>
#include <stdarg.h>
#include <sys/epoll.h>
#include <sys/un.h>
#include <time.h>

struct http_server {
        struct MHD_Daemon *mhd;
        struct loop *loop;
        struct loop_source *src;
        struct loop_timer *tick;
        struct loop_timer *kick;
        struct http_config cfg;
        /* Suspended connections (deferred answers, parked streams): MHD may not be stopped
         * while it has one, so http_server_stop ends them first. */
        struct request *suspended;
};

struct request {
        struct http_server *srv;
        struct MHD_Connection *conn;
        char method[16];
        char path[1024];
        char *body;
        size_t body_len, body_cap;
        uint64_t upload_len;
        uint64_t upload_limit; /* a spooled upload's limit: 0 = HTTP_MAX_UPLOAD (the head hook
                                * may lower it, req_set_upload_limit) */
        int spool_fd;
        bool too_large, dispatched, answered, suspended, bad_path;
        /* libmicrohttpd reports a request complete before it destroys a streamed response: the
         * request is freed by whichever of the two comes last. */
        bool has_stream, completed;
        bool aborted; /* http_abort: the stream ends at its next read */
        /* stream state */
        const struct http_stream_ops *sops;
        void *sdata;
        bool stream_waiting; /* suspended inside the reader for lack of data */
        /* while suspended: the client's hang-up, watched by the daemon's loop (watch_hangup) */
        struct loop_source *hangup_watch;
        struct request *susp_next, *susp_prev; /* on srv->suspended while suspended */
        bool susp_listed;
        void (*on_free)(void *);
        void *on_free_data;
        /* protocol switch */
        const struct http_upgrade_ops *uops;
        void *udata;
        /* for the done hook */
        unsigned status;
        struct timespec started;
        bool actor_admin;
        char actor[64];
        char env[64];
        const char *route;
        json_t *notes;
        void *session; /* the API layer's (its token session) */
};

struct http_upgraded {
        struct http_server *srv;
        struct MHD_UpgradeResponseHandle *urh;
};

const char *req_method(const struct request *r)
{
        return r->method;
}

const char *req_path(const struct request *r)
{
        return r->path;
}

const char *req_query(const struct request *r, const char *key)
{
        return MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, key);
}

struct query_iter {
        const char *key;
        const char **out;
        size_t max, n;
};

static enum MHD_Result collect_query(void *cls, enum MHD_ValueKind kind, const char *key,
                                     const char *value)
{
        struct query_iter *it = cls;
        if (strcmp(key, it->key) == 0 && value && it->n < it->max)
                it->out[it->n++] = value;
        return MHD_YES;
}

size_t req_query_all(const struct request *r, const char *key, const char **out, size_t max)
{
        struct query_iter it = {.key = key, .out = out, .max = max};
        MHD_get_connection_values(r->conn, MHD_GET_ARGUMENT_KIND, collect_query, &it);
        return it.n;
}

const char *req_header(const struct request *r, const char *name)
{
        return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
}

bool req_from_gateway(const struct request *r)
{
        return r->srv->cfg.gateway;
}

const char *req_peer(const struct request *r)
{
        if (!r->srv->cfg.gateway)
                return "local";
        const char *p = req_header(r, "Paddock-Peer");
        return p ? p : "gateway";
}

unsigned req_status(const struct request *r)
{
        return r->status;
}

double req_elapsed_s(const struct request *r)
{
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        return (double)(now.tv_sec - r->started.tv_sec) +
               (double)(now.tv_nsec - r->started.tv_nsec) / 1e9;
}

void req_set_actor(struct request *r, const char *token, bool admin)
{
        snprintf(r->actor, sizeof(r->actor), "%s", token);
        r->actor_admin = admin;
}

const char *req_actor(const struct request *r)
{
        return r->actor;
}

bool req_actor_admin(const struct request *r)
{
        return r->actor_admin;
}

void req_set_route(struct request *r, const char *pattern, const char *env)
{
        r->route = pattern;
        snprintf(r->env, sizeof(r->env), "%s", env ? env : "");
}

const char *req_route(const struct request *r)
{
        return r->route ? r->route : "";
}

const char *req_env(const struct request *r)
{
        return r->env;
}

void req_set_note(struct request *r, const char *key, json_t *value)
{
        if (!value) {
                json_object_del(r->notes, key);
                return;
        }
        if (!r->notes && !(r->notes = json_object())) {
                json_decref(value);
                return;
        }
        json_object_set_new(r->notes, key, value);
}

json_t *req_notes(const struct request *r)
{
        return r->notes;
}

const char *req_body(const struct request *r, size_t *ret_len)
{
        *ret_len = r->body_len;
        return r->body ? r->body : "";
}

int req_spool_fd(const struct request *r)
{
        return r->spool_fd;
}

json_t *req_json_object(struct request *r)
{
        if (r->body_len == 0)
                return json_object();
        json_error_t err;
        json_t *j = json_loadb(r->body, r->body_len, JSON_REJECT_DUPLICATES, &err);
        if (!j) {
                http_reply_error(r, 400, "invalid_argument", "request body is not valid JSON: %s",
                                 err.text);
                return NULL;
        }
        if (!json_is_object(j)) {
                json_decref(j);
                http_reply_error(r, 400, "invalid_argument", "request body must be a JSON object");
                return NULL;
        }
        return j;
}

void req_set_session(struct request *r, void *session)
{
        r->session = session;
}

void *req_session(const struct request *r)
{
        return r->session;
}

void req_on_free(struct request *r, void (*fn)(void *data), void *data)
{
        r->on_free = fn;
        r->on_free_data = data;
}

static void on_kick(struct loop_timer *t, void *data);

/* Run MHD, then honour its own idea of when it must run next: after the last chunk of a
 * stream it has work left that no fd event will announce. */
static void run_mhd(struct http_server *srv)
{
        MHD_run(srv->mhd);
        MHD_UNSIGNED_LONG_LONG ms;
        if (!srv->kick && MHD_get_timeout(srv->mhd, &ms) == MHD_YES && ms < 1000)
                srv->kick = loop_add_timer(srv->loop, ms, on_kick, srv);
}

static void on_kick(struct loop_timer *t, void *data)
{
        struct http_server *srv = data;
        srv->kick = NULL;
        run_mhd(srv);
}

/* A resumed connection is processed by the next MHD_run(); in external-epoll mode nothing
 * else wakes MHD for it, so run it right after the current loop iteration. */
static void suspend(struct request *r)
{
        MHD_suspend_connection(r->conn);
        r->susp_prev = NULL;
        r->susp_next = r->srv->suspended;
        if (r->susp_next)
                r->susp_next->susp_prev = r;
        r->srv->suspended = r;
        r->susp_listed = true;
}

static void resume(struct request *r)
{
        if (r->susp_listed) {
                if (r->susp_prev)
                        r->susp_prev->susp_next = r->susp_next;
                else
                        r->srv->suspended = r->susp_next;
                if (r->susp_next)
                        r->susp_next->susp_prev = r->susp_prev;
                r->susp_listed = false;
        }
        MHD_resume_connection(r->conn);
        if (!r->srv->kick)
                r->srv->kick = loop_add_timer(r->srv->loop, 0, on_kick, r->srv);
}

static void unwatch_hangup(struct request *r);

static void queue(struct request *r, unsigned status, struct MHD_Response *resp)
{
        if (!resp) {
                log_error("http: out of memory building a response");
                resp = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
                status = 500;
        }
        MHD_add_response_header(resp, "Server", "paddockd");
        r->status = status;
        if (r->srv->cfg.answering)
                r->srv->cfg.answering(r, r->srv->cfg.ctx);
        MHD_queue_response(r->conn, status, resp);
        MHD_destroy_response(resp);
        r->answered = true;
        r->status = status;
        if (r->suspended) {
                r->suspended = false;
                unwatch_hangup(r);
                resume(r);
        }
}

void http_reply_json(struct request *r, unsigned status, json_t *body)
{
        if (r->answered) {
                json_decref(body);
                return;
        }
        char *text = body ? json_dumps(body, JSON_COMPACT | JSON_ENSURE_ASCII) : NULL;
        json_decref(body);
        size_t len = text ? strlen(text) : 0;
        /* Newline-terminated: friendlier for curl users and line readers. */
        char *buf = malloc(len + 2);
        if (!buf) {
                free(text);
                queue(r, 500, NULL);
                return;
        }
        memcpy(buf, text ? text : "", len);
        buf[len++] = '\n';
        free(text);
        struct MHD_Response *resp = MHD_create_response_from_buffer(len, buf, MHD_RESPMEM_MUST_FREE);
        if (resp)
                MHD_add_response_header(resp, "Content-Type", "application/json");
        else
                free(buf);
        queue(r, status, resp);
}

void http_reply_text(struct request *r, unsigned status, const char *content_type, char *buf,
                     size_t len)
{
        if (r->answered) {
                free(buf);
                return;
        }
        struct MHD_Response *resp = MHD_create_response_from_buffer(len, buf, MHD_RESPMEM_MUST_FREE);
        if (resp)
                MHD_add_response_header(resp, "Content-Type", content_type);
        else
                free(buf);
        queue(r, status, resp);
}

void http_reply_empty(struct request *r, unsigned status)
{
        if (r->answered)
                return;
        queue(r, status, MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT));
}

struct http_server *req_server(const struct request *r)
{
        return r->srv;
}

static void reply_error_v(struct request *r, unsigned status, const char *code, const char *fmt,
                          va_list ap)
{
        char msg[1024];
        vsnprintf(msg, sizeof(msg), fmt, ap);
        json_t *j = json_pack("{s:{s:s,s:s}}", "error", "code", code, "message", msg);
        http_reply_json(r, status, j);
}

void http_reply_error(struct request *r, unsigned status, const char *code, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        reply_error_v(r, status, code, fmt, ap);
        va_end(ap);
}

void http_status_of_errno(int e, unsigned *ret_status, const char **ret_code)
{
        static const struct {
                int err;
                unsigned status;
                const char *code;
        } table[] = {
                {-EINVAL, 400, "invalid_argument"}, {-ERANGE, 400, "invalid_argument"},
                {-EACCES, 403, "forbidden"},        {-EPERM, 403, "forbidden"},
                {-ENOENT, 404, "not_found"},        {-EEXIST, 409, "conflict"},
                {-EBUSY, 409, "conflict"},          {-EALREADY, 409, "conflict"},
                {-E2BIG, 413, "too_large"},         {-EFBIG, 413, "too_large"},
                {-ENOEXEC, 422, "unprocessable"},   {-ENOSPC, 507, "insufficient_storage"},
                {-EAGAIN, 503, "unavailable"},      {-EMFILE, 503, "unavailable"},
                {-ENOMEM, 503, "unavailable"},      {-ENFILE, 503, "unavailable"},
                {-EROFS, 403, "forbidden"},         {-ENOTEMPTY, 409, "conflict"},
                {-EXDEV, 409, "conflict"},          {-ETXTBSY, 409, "conflict"},
                {-EISDIR, 400, "invalid_argument"}, {-ENOTDIR, 400, "invalid_argument"},
                {-ELOOP, 400, "invalid_argument"},  {-ENAMETOOLONG, 400, "invalid_argument"},
                {-ENXIO, 400, "invalid_argument"},  {-EDQUOT, 507, "insufficient_storage"},
                {-EOPNOTSUPP, 422, "unprocessable"},
        };
        for (size_t i = 0; i < ELEMENTSOF(table); i++)
                if (table[i].err == e) {
                        *ret_status = table[i].status;
                        *ret_code = table[i].code;
                        return;
                }
        *ret_status = 500;
        *ret_code = "internal";
}

void http_reply_errno(struct request *r, int e, const char *fmt, ...)
{
        unsigned status;
        const char *code;
        http_status_of_errno(e, &status, &code);
        va_list ap;
        va_start(ap, fmt);
        reply_error_v(r, status, code, fmt, ap);
        va_end(ap);
}

/* MHD does not watch a suspended connection, so the daemon's loop watches its socket for the
 * client hanging up. EPOLLRDHUP, not EPOLLIN: a pipelined request is not a hang-up. */
static void watch_hangup(struct request *r, loop_io_fn fn)
{
        const union MHD_ConnectionInfo *ci =
                MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (!ci || loop_add_fd(r->srv->loop, ci->connect_fd, EPOLLRDHUP, fn, r,
                               &r->hangup_watch) < 0)
                r->hangup_watch = NULL;
}

static void unwatch_hangup(struct request *r)
{
        loop_remove(r->hangup_watch);
        r->hangup_watch = NULL;
}

/* A deferred request whose client left is answered at once: MHD then finds the connection
 * gone and ends the request, and the handler's req_on_free hook cancels its work. */
static void on_deferred_hangup(struct loop_source *s, int fd, uint32_t events, void *data)
{
        struct request *r = data;
        unwatch_hangup(r);
        http_reply_error(r, 499, "client_gone", "the client closed the connection");
}

void http_defer(struct request *r)
{
        if (r->answered || r->suspended)
                return;
        r->suspended = true;
        suspend(r);
        watch_hangup(r, on_deferred_hangup);
}

static void unpark(struct request *r)
{
        unwatch_hangup(r);
        if (r->stream_waiting) {
                r->stream_waiting = false;
                resume(r);
        }
}

static void on_parked_hangup(struct loop_source *s, int fd, uint32_t events, void *data)
{
        struct request *r = data;
        r->aborted = true; /* the reader ends the stream; MHD closes and frees it */
        unpark(r);
}

/* Park a stream's connection until the producer wakes it or the client hangs up. */
static void park(struct request *r)
{
        r->stream_waiting = true;
        suspend(r);
        watch_hangup(r, on_parked_hangup);
}

static ssize_t stream_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
        struct request *r = cls;
        if (r->aborted)
                return MHD_CONTENT_READER_END_WITH_ERROR;
        ssize_t n = r->sops->read(r->sdata, buf, max);
        if (n > 0)
                return n;
        if (n == -2)
                return MHD_CONTENT_READER_END_WITH_ERROR;
        if (n < 0)
                return MHD_CONTENT_READER_END_OF_STREAM;
        if (!r->stream_waiting)
                park(r);
        return 0;
}

static void request_free(struct request *r)
{
        json_decref(r->notes);
        free(r->body);
        free(r);
}

static void stream_free(void *cls)
{
        struct request *r = cls;
        unwatch_hangup(r);
        if (r->sops && r->sops->closed) {
                const struct http_stream_ops *ops = r->sops;
                r->sops = NULL;
                ops->closed(r->sdata);
        }
        r->has_stream = false;
        if (r->completed)
                request_free(r);
}

void http_reply_stream(struct request *r, unsigned status, const char *content_type,
                       const struct http_stream_ops *ops, void *data)
{
        if (r->answered)
                return;
        r->sops = ops;
        r->sdata = data;
        r->has_stream = true;
        struct MHD_Response *resp =
                MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 65536, stream_reader, r,
                                                  stream_free);
        if (resp)
                MHD_add_response_header(resp, "Content-Type", content_type);
        else
                r->has_stream = false;
        queue(r, status, resp);
}

void http_stream_wake(struct request *r)
{
        if (r && r->stream_waiting)
                unpark(r);
}

bool req_lingers(const struct request *r)
{
        return !r->answered || r->has_stream;
}

void http_abort(struct request *r, const char *why)
{
        if (r->has_stream) {
                r->aborted = true;
                if (r->stream_waiting) {
                        unpark(r);
                } else if (!r->srv->kick) {
                        r->srv->kick = loop_add_timer(r->srv->loop, 0, on_kick, r->srv);
                }
                return;
        }
        if (!r->answered)
                http_reply_error(r, 401, "unauthorized", "%s", why);
}

static void on_upgrade(void *cls, struct MHD_Connection *conn, void *con_cls, const char *extra,
                       size_t extra_len, MHD_socket sock, struct MHD_UpgradeResponseHandle *urh)
{
        struct request *r = cls;
        const struct http_upgrade_ops *ops = r->uops;
        void *data = r->udata;
        r->uops = NULL; /* from now on the callee owns the socket; on_completed leaves it */
        struct http_upgraded *u = calloc(1, sizeof(*u));
        if (!u) {
                log_error("http: out of memory taking over an upgraded connection");
                MHD_upgrade_action(urh, MHD_UPGRADE_ACTION_CLOSE);
                ops->abandoned(data);
                return;
        }
        u->srv = r->srv;
        u->urh = urh;
        ops->upgraded(data, sock, extra, extra_len, u);
}

void http_reply_upgrade(struct request *r, const char *const *headers,
                        const struct http_upgrade_ops *ops, void *data)
{
        if (r->answered) {
                ops->abandoned(data);
                return;
        }
        struct MHD_Response *resp = MHD_create_response_for_upgrade(on_upgrade, r);
        for (size_t i = 0; resp && headers && headers[i]; i += 2)
                MHD_add_response_header(resp, headers[i], headers[i + 1]);
        if (!resp) {
                ops->abandoned(data);
                queue(r, 500, NULL);
                return;
        }
        r->uops = ops;
        r->udata = data;
        queue(r, 101, resp);
}

void http_upgraded_close(struct http_upgraded *u)
{
        if (!u)
                return;
        struct http_server *srv = u->srv;
        MHD_upgrade_action(u->urh, MHD_UPGRADE_ACTION_CLOSE);
        free(u);
        /* MHD finishes the connection in its next run; nothing else would wake it. */
        if (!srv->kick)
                srv->kick = loop_add_timer(srv->loop, 0, on_kick, srv);
}

static bool spool_open(struct request *r)
{
        r->spool_fd = open(r->srv->cfg.spool_dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
        return r->spool_fd >= 0;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_size, void **con_cls)
{
        struct http_server *srv = cls;
        struct request *r = *con_cls;

        if (!r) {
                r = calloc(1, sizeof(*r));
                if (!r)
                        return MHD_NO;
                r->srv = srv;
                r->conn = conn;
                r->spool_fd = -EBADF;
                clock_gettime(CLOCK_MONOTONIC, &r->started);
                snprintf(r->method, sizeof(r->method), "%s", method);
                r->bad_path = BUF_PRINTF(r->path, "%s", url) < 0; /* answered 414 */
                *con_cls = r;
                const char *ct = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
                                                             MHD_HTTP_HEADER_CONTENT_TYPE);
                bool spool = srv->cfg.wants_spool && srv->cfg.wants_spool(method, url, ct);
                /* E2B's envd requests come through the gateway without a token: their
                 * access token is checked before any of the body is read. */
                bool e2b = srv->cfg.gateway &&
                           MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "E2b-Sandbox-Id");
                if ((spool || e2b) && srv->cfg.head) {
                        srv->cfg.head(r, srv->cfg.ctx);
                        if (r->answered)
                                return MHD_YES; /* refused: the body is read and dropped */
                }
                if (spool && !spool_open(r))
                        log_warn("http: cannot open a spool file in %s: %m", srv->cfg.spool_dir);
                const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
                                                             MHD_HTTP_HEADER_CONTENT_LENGTH);
                uint64_t limit = r->spool_fd < 0 ? HTTP_MAX_BODY
                                 : r->upload_limit  ? r->upload_limit
                                                    : HTTP_MAX_UPLOAD;
                if (cl && strtoull(cl, NULL, 10) > limit) {
                        http_reply_error(r, 413, "too_large",
                                         "request body exceeds the limit of %llu bytes",
                                         (unsigned long long)limit);
                        return MHD_YES;
                }
                return MHD_YES;
        }

        if (*upload_size > 0) {
                size_t n = *upload_size;
                *upload_size = 0;
                if (r->answered || r->too_large)
                        return MHD_YES;
                if (r->spool_fd >= 0) {
                        r->upload_len += n;
                        if (r->upload_len > (r->upload_limit ? r->upload_limit : HTTP_MAX_UPLOAD) ||
                            write_all(r->spool_fd, upload_data, n) < 0)
                                r->too_large = true;
                        return MHD_YES;
                }
                if (r->body_len + n > HTTP_MAX_BODY) {
                        r->too_large = true;
                        free(r->body);
                        r->body = NULL;
                        r->body_len = r->body_cap = 0;
                        return MHD_YES;
                }
                if (r->body_len + n + 1 > r->body_cap) {
                        size_t cap = r->body_cap ? r->body_cap : 4096;
                        while (cap < r->body_len + n + 1)
                                cap *= 2;
                        char *nb = realloc(r->body, cap);
                        if (!nb) {
                                r->too_large = true;
                                return MHD_YES;
                        }
                        r->body = nb;
                        r->body_cap = cap;
                }
                memcpy(r->body + r->body_len, upload_data, n);
                r->body_len += n;
                r->body[r->body_len] = 0;
                return MHD_YES;
        }

        /* Whole request received (or resumed after a deferred answer). */
        if (r->answered || r->dispatched)
                return MHD_YES;
        r->dispatched = true;
        if (r->too_large) {
                if (r->spool_fd >= 0)
                        http_reply_error(r, 413, "too_large", "upload failed or exceeds the limit");
                else
                        http_reply_error(r, 413, "too_large",
                                         "request body exceeds the limit of %u bytes", HTTP_MAX_BODY);
                return MHD_YES;
        }
        if (r->bad_path) {
                http_reply_error(r, 414, "too_large", "request path too long");
                return MHD_YES;
        }
        if (r->spool_fd >= 0)
                lseek(r->spool_fd, 0, SEEK_SET);
        srv->cfg.handler(r, srv->cfg.ctx);
        if (!r->answered && !r->suspended) {
                log_error("http: handler for %s %s gave no answer", r->method, r->path);
                http_reply_error(r, 500, "internal", "no response");
        }
        return MHD_YES;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
        struct request *r = *con_cls;
        if (!r)
                return;
        *con_cls = NULL;
        unwatch_hangup(r);
        if (r->uops) {
                /* Answered with 101 but never switched: the client went away first. */
                const struct http_upgrade_ops *ops = r->uops;
                r->uops = NULL;
                ops->abandoned(r->udata);
        }
        if (r->srv->cfg.done)
                r->srv->cfg.done(r, r->srv->cfg.ctx);
        if (r->on_free)
                r->on_free(r->on_free_data);
        if (r->spool_fd >= 0)
                close(r->spool_fd);
        r->spool_fd = -EBADF;
        r->completed = true;
        if (!r->has_stream)
                request_free(r);
}

static void on_mhd_ready(struct loop_source *s, int fd, uint32_t events, void *data)
{
        run_mhd(data);
}

static void on_tick(struct loop_timer *t, void *data)
{
        struct http_server *srv = data;
        run_mhd(srv);
        srv->tick = loop_add_timer(srv->loop, 1000, on_tick, srv);
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
        char msg[512];
        vsnprintf(msg, sizeof(msg), fmt, ap);
        size_t n = strlen(msg);
        while (n && msg[n - 1] == '\n')
                msg[--n] = 0;
        log_debug("libmicrohttpd: %s", msg);
}

int http_server_start(struct loop *loop, const struct http_config *cfg, struct http_server **ret)
{
        struct http_server *srv = calloc(1, sizeof(*srv));
        if (!srv)
                return -ENOMEM;
        srv->loop = loop;
        srv->cfg = *cfg;
        /* No listen socket (the gateway's server): connections come only from
         * http_server_add_connection. */
        unsigned flags = MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_ALLOW_UPGRADE |
                         MHD_USE_ERROR_LOG;
        if (cfg->listen_fd < 0)
                flags |= MHD_USE_NO_LISTEN_SOCKET;
        struct MHD_OptionItem listen_opt[] = {
                {cfg->listen_fd < 0 ? MHD_OPTION_END : MHD_OPTION_LISTEN_SOCKET, cfg->listen_fd,
                 NULL},
                {MHD_OPTION_END, 0, NULL},
        };
        srv->mhd = MHD_start_daemon(
                flags, 0, NULL, NULL, on_request, srv, MHD_OPTION_ARRAY, listen_opt,
                MHD_OPTION_NOTIFY_COMPLETED, on_completed, srv, MHD_OPTION_CONNECTION_LIMIT,
                cfg->max_connections ? cfg->max_connections : (unsigned)HTTP_MAX_CONNECTIONS,
                MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)0,
                MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(128 * 1024),
                MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL, MHD_OPTION_END);
        if (!srv->mhd) {
                free(srv);
                return -EIO;
        }
        const union MHD_DaemonInfo *info = MHD_get_daemon_info(srv->mhd, MHD_DAEMON_INFO_EPOLL_FD);
        int r = info ? loop_add_fd(loop, info->epoll_fd, EPOLLIN, on_mhd_ready, srv, &srv->src)
                     : -EIO;
        if (r < 0) {
                MHD_stop_daemon(srv->mhd);
                free(srv);
                return r;
        }
        /* A slow tick covers MHD's own housekeeping; readiness drives everything else. */
        srv->tick = loop_add_timer(loop, 1000, on_tick, srv);
        *ret = srv;
        return 0;
}

int http_server_add_connection(struct http_server *s, int fd, const char *peer)
{
        /* The socket's own address says nothing (a socketpair); who is behind it travels in
         * each request's Paddock-Peer header (req_peer). */
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        if (MHD_add_connection(s->mhd, fd, (const struct sockaddr *)&sa, sizeof(sa)) != MHD_YES) {
                /* MHD has closed the socket (connection limit, out of memory). */
                log_warn("http: refusing a gateway connection from %s (connection limit?)",
                         peer ? peer : "?");
                return -EMFILE;
        }
        /* MHD reads the request in its next run: nothing else would wake it. */
        if (!s->kick)
                s->kick = loop_add_timer(s->loop, 0, on_kick, s);
        return 0;
}

void http_server_stop(struct http_server *s)
{
        if (!s)
                return;
        loop_remove(s->src);
        loop_cancel_timer(s->tick);
        /* Deferred answers still waiting (a create, a start, a stop's grace period) are told the
         * daemon stops, and parked streams end; MHD aborts if stopped with one suspended. */
        while (s->suspended) {
                struct request *r = s->suspended;
                if (r->stream_waiting) {
                        r->aborted = true;
                        unpark(r);
                } else if (r->suspended && !r->answered) {
                        http_reply_error(r, 503, "unavailable", "the daemon is shutting down");
                }
                if (s->suspended == r) { /* neither: resumed here all the same */
                        r->suspended = r->stream_waiting = false;
                        unwatch_hangup(r);
                        resume(r);
                }
        }
        loop_cancel_timer(s->kick); /* MHD_stop_daemon goes through what was resumed */
        MHD_stop_daemon(s->mhd);
        free(s);
}

void http_reply_data(struct request *r, unsigned status, const char *content_type,
                     const void *data, size_t len, const char *const *headers)
{
        if (r->answered)
                return;
        void *copy = len ? malloc(len) : NULL;
        if (len && !copy) {
                queue(r, 500, NULL);
                return;
        }
        if (len)
                memcpy(copy, data, len);
        struct MHD_Response *resp = MHD_create_response_from_buffer(
            len, len ? copy : (void *)"", len ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
        if (!resp)
                free(copy);
        if (resp && content_type)
                MHD_add_response_header(resp, "Content-Type", content_type);
        for (size_t i = 0; resp && headers && headers[i] && headers[i + 1]; i += 2)
                MHD_add_response_header(resp, headers[i], headers[i + 1]);
        queue(r, status, resp);
}

void req_set_upload_limit(struct request *r, uint64_t bytes)
{
        r->upload_limit = bytes;
}

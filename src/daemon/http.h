/* HTTP/1.1 server glue on libmicrohttpd, driven by our epoll loop (MHD in external-epoll mode,
 * no threads). Handlers receive a request with its whole (size-limited) body and answer at
 * once, later (the connection is suspended meanwhile), or with a stream. */
#pragma once
#include "daemon/loop.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define HTTP_MAX_BODY (8u << 20)          /* JSON requests: 8 MiB */
#define HTTP_MAX_UPLOAD (64ull << 30)     /* image uploads, spooled to a file: 64 GiB */
#define HTTP_MAX_CONNECTIONS 512

struct http_server;
struct request;

typedef void (*http_handler_fn)(struct request *req, void *ctx);
/* Decide at header time whether a request's body is spooled to a file (uploads). */
typedef bool (*http_spool_fn)(const char *method, const char *path, const char *content_type);

struct http_config {
        int listen_fd;
        const char *spool_dir;
        http_handler_fn handler;
        http_spool_fn wants_spool;
        /* Runs once per request when it is over (answered and sent, or the client gone):
         * audit and metrics read req_status(), req_elapsed_s(), req_actor() there. */
        http_handler_fn done;
        /* Runs when the head of a request whose body will be spooled has arrived, before any
         * of the body is read: it may answer at once (a refusal), and the body is then
         * discarded unread instead of stored. */
        http_handler_fn head;
        /* Runs once per answered request when its status is fixed, just before the answer is
         * handed to the connection: the audit log writes its record here, so a record is on
         * disk before the client can see the answer it describes. */
        http_handler_fn answering;
        void *ctx;
        /* Connections come from the network gateway, not the local socket: every request
         * must carry a valid token (req_from_gateway). */
        bool gateway;
        unsigned max_connections; /* 0: HTTP_MAX_CONNECTIONS */
};

/* listen_fd < 0: no listen socket; connections are added with http_server_add_connection. */
int http_server_start(struct loop *loop, const struct http_config *cfg, struct http_server **ret);
/* Serve one more connection (a connected stream socket, taken in every case: closed on
 * failure). peer names the client for logs. */
int http_server_add_connection(struct http_server *s, int fd, const char *peer);
void http_server_stop(struct http_server *s);

const char *req_method(const struct request *r);
const char *req_path(const struct request *r);
const char *req_query(const struct request *r, const char *key);
/* All values of a repeated query key (e.g. label=a=b&label=c=d); returns count. */
size_t req_query_all(const struct request *r, const char *key, const char **out, size_t max);
const char *req_body(const struct request *r, size_t *ret_len);
/* The spooled upload: an fd positioned at 0 (owned by the request). */
int req_spool_fd(const struct request *r);
/* Parse the body as a JSON object. An empty body gives {}. On error replies 400 and returns
 * NULL. */
json_t *req_json_object(struct request *r);

/* Replies. Each request gets exactly one; later calls are ignored. */
void http_reply_json(struct request *r, unsigned status, json_t *body /* stolen */);
void http_reply_error(struct request *r, unsigned status, const char *code, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));
/* -errno to status and code (the one table of the daemon). */
void http_reply_errno(struct request *r, int neg_errno, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
void http_status_of_errno(int neg_errno, unsigned *ret_status, const char **ret_code);

/* Answer later: the handler returns, the connection waits; any http_reply_* resumes it. */
void http_defer(struct request *r);

/* Streaming responses (chunked). read() copies up to max bytes and returns the count, 0 when
 * nothing is ready yet, -1 at the end, -2 when the stream broke (the client sees the chunked
 * response end without its terminating chunk). Call http_stream_wake() when new data is ready.
 * closed() runs once when the connection is done (finished or client gone). */
struct http_stream_ops {
        ssize_t (*read)(void *data, char *buf, size_t max);
        void (*closed)(void *data);
};
void http_reply_stream(struct request *r, unsigned status, const char *content_type,
                       const struct http_stream_ops *ops, void *data);
void http_stream_wake(struct request *r);

/* Protocol switch (101 Switching Protocols, e.g. WebSocket). headers: name, value pairs ending
 * in NULL, sent with the 101. Afterwards exactly one of the ops runs: upgraded() with the
 * connection's socket (non-blocking; bytes the client already sent after the request are in
 * extra) once the 101 has gone out, or abandoned() if the connection ended before that. The
 * socket then belongs to the callee until http_upgraded_close(); never close() it directly. */
struct http_upgraded;
struct http_upgrade_ops {
        void (*upgraded)(void *data, int fd, const char *extra, size_t extra_len,
                         struct http_upgraded *u);
        void (*abandoned)(void *data);
};
void http_reply_upgrade(struct request *r, const char *const *headers,
                        const struct http_upgrade_ops *ops, void *data);
void http_upgraded_close(struct http_upgraded *u);
/* A request header (case-insensitive name), or NULL. */
const char *req_header(const struct request *r, const char *name);
/* Did the request arrive through the network gateway (http_config.gateway)? */
bool req_from_gateway(const struct request *r);
/* Who is at the other end: the Paddock-Peer header ("IP:PORT") of a gateway request (the
 * gateway replaces any the client sent), "local" for the unix socket. */
const char *req_peer(const struct request *r);
/* The status answered (0: none yet) and the seconds since the request's head arrived. */
unsigned req_status(const struct request *r);
double req_elapsed_s(const struct request *r);
/* Who sent it, as the API layer resolved it: a token name ("" = the local administrator),
 * the route pattern that matched and the environment named (both "" when none). Kept with the
 * request for the done hook. */
void req_set_actor(struct request *r, const char *token, bool admin);
const char *req_actor(const struct request *r);
bool req_actor_admin(const struct request *r);
void req_set_route(struct request *r, const char *pattern, const char *env);
const char *req_route(const struct request *r);
const char *req_env(const struct request *r);

/* Details a handler attaches for the done hook (the audit log's record): key = value
 * (stolen; NULL removes the key). req_notes is NULL until the first note. */
void req_set_note(struct request *r, const char *key, json_t *value);
json_t *req_notes(const struct request *r);
/* Is the request still going (no answer yet, or a stream)? */
bool req_lingers(const struct request *r);
/* End a request that is still going: a stream breaks off (the client sees the chunked
 * response end without its last chunk), an unanswered one gets 401 with why. */
void http_abort(struct request *r, const char *why);

/* Called when the request is freed (answered or connection gone); deferred work must drop
 * its pointer to r. */
void req_on_free(struct request *r, void (*fn)(void *data), void *data);
/* One pointer the API layer keeps with a request until it is over (its token session). */
void req_set_session(struct request *r, void *session);
void *req_session(const struct request *r);
/* A reply with len bytes of body (copied; none for 0), its Content-Type (NULL: none) and extra
 * headers: name, value pairs ending in NULL (or NULL). */
void http_reply_data(struct request *r, unsigned status, const char *content_type,
                     const void *data, size_t len, const char *const *headers);

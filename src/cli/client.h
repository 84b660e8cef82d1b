/* HTTP/1.1 to paddockd over its unix socket or, with --host, to a remote one over TLS
 * (transport.c), one connection per request (the response parser is http1.c). Requests are JSON or streamed uploads; responses are buffered, or handed to a
 * sink piece by piece as they arrive (NDJSON exec output). This file prints only transport
 * failures and daemon error messages.
 *
 * Not libcurl: loading it and the 34 libraries it pulls in took half of the CLI's start-up,
 * for a protocol this small on a socket this local. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct endpoint;

struct client {
        const char *socket_path;
        const struct endpoint *remote; /* --host: where instead of socket_path */
        const char *token;             /* --token: sent as "Authorization: Bearer" */
};

struct response {
        long status;
        char *body; /* NUL-terminated; not filled for a 2xx response that went to a sink */
        size_t len;
        json_t *json; /* body parsed, when it is JSON */
};

/* Takes each piece of a 2xx response body as it arrives; false aborts the transfer (the sink
 * has then said why). */
typedef bool (*client_sink_fn)(const char *data, size_t len, void *userdata);
/* Fills buf with up to len bytes of the request body: bytes written, 0 at the end, or -1 to
 * abort (the source has then said why). */
typedef ssize_t (*client_source_fn)(char *buf, size_t len, void *userdata);

struct request {
        const char *method; /* "GET", "POST", "PUT", "PATCH", "DELETE" */
        const char *path;   /* "/v1/...", names already escaped */
        /* Body given whole (JSON) ... */
        const char *body;
        size_t body_len;
        /* ... or produced by a source: source_size bytes, or chunked when -1. */
        client_source_fn source;
        void *source_data;
        int64_t source_size;
        const char *content_type;
        /* A 2xx body goes to the sink instead of being buffered. */
        client_sink_fn sink;
        void *sink_data;
};

/* Nothing is connected until a request is made. remote and token may be set afterwards. */
int client_open(struct client *c, const char *socket_path);
void client_close(struct client *c);

/* A new connection to the daemon (transport_open, which prints why it failed): 0 or -1. */
struct transport;
int client_connect(const struct client *c, struct transport *ret);
/* The Host and Authorization header lines of every request, each ended by CRLF; malloc'd. */
char *client_headers(const struct client *c);

/* Percent-encode s for a path segment or query value. malloc'd; NULL when out of memory. */
char *client_escape(struct client *c, const char *s);

/* Perform req. -1 after printing a transport failure ("cannot connect to paddockd at ...") or
 * after a sink/source aborted; 0 otherwise, with *ret filled whatever the HTTP status. */
int client_perform(struct client *c, const struct request *req, struct response *ret);

/* A JSON request (body may be NULL). 0 on a 2xx status with *ret filled; otherwise -1 after
 * printing "paddock: <message>". */
int client_call(struct client *c, const char *method, const char *path, const json_t *body,
                struct response *ret);

/* Print a non-2xx response as "paddock: <message>". */
void client_print_error(const struct response *r);

void response_done(struct response *r);

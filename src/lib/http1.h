/* An HTTP/1.1 response parser (the CLI's client of paddockd, client.c, and the daemon's own
 * in-process requests for MCP, api_mcp.c): bytes in, status and
 * body pieces out. No I/O, no allocation but the line buffer, so the unit test can feed it any
 * byte sequence split at any point.
 *
 * Strict where strictness is cheap: a status line "HTTP/1.x NNN reason", header lines
 * "token: value" ended by CRLF, one consistent Content-Length of digits only, Transfer-Encoding
 * "chunked" and nothing else, chunk sizes of hex digits that fit in 63 bits. Anything else is an
 * error (-EPROTO, with a reason for the message), never a guess. The head, interim 1xx responses
 * included, is bounded (HTTP1_MAX_HEAD; -E2BIG beyond it), and so is a trailer. Interim 1xx
 * responses (100 Continue) are skipped; the final response is the one reported.
 *
 * The answer to an Upgrade request (the CLI's WebSocket handshake, wsclient.c) is parsed here
 * too: with upgrade set, a 101 is final and ends at its empty line; what follows it belongs to
 * the new protocol (used says where it starts). Header fields are checked and dropped, except
 * the ones that frame the body; on_field, when set, sees those of the final response too. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HTTP1_MAX_HEAD (64u << 10)

enum http1_state {
        HTTP1_STATUS,      /* expecting a status line */
        HTTP1_HEADER,      /* header lines */
        HTTP1_BODY_LENGTH, /* body of Content-Length bytes */
        HTTP1_BODY_CLOSE,  /* body up to the connection's end */
        HTTP1_CHUNK_SIZE,  /* a chunk-size line */
        HTTP1_CHUNK_DATA,  /* the bytes of a chunk */
        HTTP1_CHUNK_END,   /* the CRLF after them */
        HTTP1_TRAILER,     /* trailer lines after the last chunk */
        HTTP1_DONE,
        HTTP1_FAILED,
};

/* Takes a piece of the body; a negative return stops the parse and is returned by http1_feed. */
typedef int (*http1_body_fn)(const char *data, size_t len, void *userdata);
/* Sees one header field of the final response: its name as sent, its value without the blanks
 * around it (neither NUL-terminated; both checked already). A negative return stops the parse
 * and is returned by http1_feed. */
typedef int (*http1_field_fn)(const char *name, size_t name_len, const char *value,
                              size_t value_len, void *userdata);

struct http1 {
        enum http1_state state;
        bool head_request;       /* set before feeding: the answer to HEAD has no body */
        bool upgrade;            /* set before feeding: an Upgrade was asked for, a 101 is final */
        http1_field_fn on_field; /* set before feeding, optional */
        void *field_data;
        size_t used; /* of the last http1_feed's bytes, how many were the response's */
        int status;  /* of the final response, once its status line is in */
        bool chunked, has_length, close; /* Transfer-Encoding, Content-Length, Connection: close */
        bool saw_bytes;                  /* anything at all arrived */
        int http_minor;                  /* HTTP/1.0 or HTTP/1.1 */
        uint64_t length;                 /* Content-Length */
        uint64_t left;                   /* of the body or the current chunk */
        size_t head_bytes; /* of the head so far (interim responses included), or of the trailer */
        char *line;        /* the line being assembled, up to its CRLF */
        size_t line_len, line_cap;
        const char *why; /* what was wrong, after an error */
        int error;       /* and the error returned */
};

void http1_init(struct http1 *p);
void http1_done(struct http1 *p);

/* Parse len more bytes. 0 when all were taken (or the response ended inside them: bytes after
 * its end are not looked at, and p->used counts the ones before it; see http1_complete), a
 * body or field function's negative return, -ENOMEM, or -EPROTO / -E2BIG with p->why set.
 * After an error the parser stays failed. */
int http1_feed(struct http1 *p, const char *data, size_t len, http1_body_fn on_body,
               void *userdata);

/* The connection ended: 0 if the response is complete (a body delimited by the close ends
 * here), else -EPROTO with p->why saying where it was cut off. */
int http1_eof(struct http1 *p);

/* Has the whole response arrived? */
static inline bool http1_complete(const struct http1 *p)
{
        return p->state == HTTP1_DONE;
}

/* Are the status line and headers in (so p->status is final and body pieces may follow)? */
static inline bool http1_head_done(const struct http1 *p)
{
        return p->state > HTTP1_HEADER && p->state != HTTP1_FAILED;
}

/* The Model Context Protocol server of Paddock, shared by its two homes: `paddock mcp` (the CLI,
 * stdio and a loopback HTTP port; src/cli/cmd_mcp.c, mcp_http.c) and paddockd's own POST /mcp
 * behind the gateway (src/daemon/api_mcp.c). One copy of the tools, their descriptions and
 * JSON Schemas, and of the JSON-RPC side, so both list and answer exactly the same.
 *
 * mcp_server.c speaks JSON-RPC 2.0 (the lifecycle, tools/list, tools/call); mcp_tools.c
 * describes the tools and turns each call into one or two requests of the HTTP API
 * (docs/API.md); mcp_call.c holds what the tools share (API calls whose failures become tool
 * errors, output clipped to a size an agent can read); mcp_schema.c checks arguments against
 * the tools' JSON Schemas.
 *
 * How an API request is made is the host's business (struct mcp_backend): the CLI sends it to
 * paddockd with its client; the daemon hands it to its own HTTP server with the caller's
 * credentials, so tokens, ownership and quotas apply exactly as to a REST call. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* ------------------------------------------------------------------ API requests */

struct mcp_request {
        const char *method; /* "GET", "POST", "PUT", "PATCH", "DELETE" */
        const char *path;   /* "/v1/...", names and query values already escaped */
        const char *body;   /* may be NULL */
        size_t body_len;
        const char *content_type; /* NULL: application/json when there is a body */
};

struct mcp_response {
        long status;
        char *body; /* NUL-terminated (also when empty) */
        size_t len;
        json_t *json; /* body parsed, when it is JSON */
};

void mcp_response_done(struct mcp_response *r);

struct mcp_backend {
        /* Make one API request: 0 with *ret filled whatever the HTTP status, or -1 with
         * *ret_why (malloc'd, one line; may stay NULL) when paddockd could not be asked. */
        int (*perform)(void *data, const struct mcp_request *req, struct mcp_response *ret,
                       char **ret_why);
        /* Let ms milliseconds pass (read_process_output's wait polls). */
        void (*sleep_ms)(void *data, unsigned ms);
        void *data;
};

/* ------------------------------------------------------------------ tool results */

/* What a tool call answers: text for the model, the same as JSON for programs (may be NULL),
 * and whether it failed (a tool error, not a protocol error: the model should read why). */
struct tool_result {
        char *text;
        json_t *structured;
        bool is_error;
};

void tool_result_done(struct tool_result *res);
/* Set res->text (replacing what was there). res->text stays NULL when out of memory. */
void tool_text(struct tool_result *res, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The same, and the result is an error. */
void tool_fail(struct tool_result *res, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The text is j as compact JSON, structured a reference to j. */
void tool_json(struct tool_result *res, json_t *j);

/* One API request for a tool. 0 with *ret filled on a 2xx answer; -1 after making res an error
 * with the daemon's message (or why it could not be reached). */
int mcp_api(const struct mcp_backend *b, const struct mcp_request *req, struct mcp_response *ret,
            struct tool_result *res);
/* The same for a JSON request (body may be NULL). */
int mcp_api_json(const struct mcp_backend *b, const char *method, const char *path,
                 const json_t *body, struct mcp_response *ret, struct tool_result *res);

/* Percent-encode s for a path segment or query value. malloc'd; NULL when out of memory. */
char *mcp_escape(const char *s);
/* "/v1/envs/NAME" + suffix (printf-style, its values already escaped), NAME escaped. NULL when
 * out of memory. */
char *mcp_env_path(const char *name, const char *suffix_fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The most of one output stream a tool hands back; more is cut from the middle with a note. */
#define MCP_STREAM_MAX (100u << 10)
/* Of a clipped stream, this much is its head; the rest of MCP_STREAM_MAX is its tail, which
 * usually says more (the error at the end of a build log). */
#define MCP_STREAM_HEAD (MCP_STREAM_MAX / 5)
/* data as valid UTF-8 text (bad bytes become U+FFFD), at most MCP_STREAM_MAX bytes of it: the
 * head and the tail, with a line in between saying how many bytes were cut. *ret_cut: bytes
 * cut. NULL when out of memory. */
char *mcp_clip_output(const char *data, size_t len, const char *stream, size_t *ret_cut);

/* ------------------------------------------------------------------ the tools */

/* tools/list's "tools" array (a new reference), and tools/call: 0 with *res filled (also for a
 * tool error); -EINVAL with *ret_why (malloc'd) for an unknown tool or arguments that do not
 * fit its schema, -ENOMEM. */
json_t *mcp_tools_list(void);
int mcp_tool_call(const struct mcp_backend *b, const char *name, const json_t *args,
                  struct tool_result *res, char **ret_why);

/* Does v fit schema (the subset our tools use: type (one or a list), properties, required,
 * additionalProperties false, items, enum, minimum, minLength, minItems)? 0, or -EINVAL with why
 * ("command: expected array or string") in buf. */
int mcp_schema_check(const json_t *schema, const json_t *v, const char *where, char *why,
                     size_t why_len);

/* ------------------------------------------------------------------ JSON-RPC */

/* JSON-RPC 2.0 error codes. */
enum {
        MCP_PARSE_ERROR = -32700,
        MCP_INVALID_REQUEST = -32600,
        MCP_METHOD_NOT_FOUND = -32601,
        MCP_INVALID_PARAMS = -32602,
        MCP_INTERNAL_ERROR = -32603,
};

/* The protocol revision answered when the client asks for one we do not speak. */
#define MCP_LATEST_VERSION "2025-06-18"

/* Is v a protocol revision we speak (the MCP-Protocol-Version header of HTTP requests)? */
bool mcp_version_known(const char *v);

struct mcp_server {
        struct mcp_backend backend;
        char version[16]; /* negotiated at initialize */
        bool initialized;
};

/* {"jsonrpc":"2.0","id":id (null when NULL),"error":{"code":code,"message":message}}. */
json_t *mcp_error(const json_t *id, int code, const char *message);

/* Answer one message (the text of one line): the reply, or NULL for a notification, a
 * response, or out of memory. Never fails on what the client sent: malformed input gets a
 * JSON-RPC error. A batch (an array) is refused here: the HTTP transport of the revisions that
 * have them takes them apart (mcp_server_handle_message each). */
json_t *mcp_server_handle(struct mcp_server *s, const char *text, size_t len);
/* The same for a message already parsed (any JSON value). */
json_t *mcp_server_handle_message(struct mcp_server *s, const json_t *msg);

/* Whether msg is a JSON-RPC request (has a method and an id); the HTTP transports answer
 * notifications and responses with 202 and no body. */
bool mcp_is_request(const json_t *msg);

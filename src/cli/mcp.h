/* paddock mcp: a Model Context Protocol server. cmd_mcp.c speaks JSON-RPC 2.0 (one message a
 * line on stdin/stdout); mcp_tools.c describes the tools and turns each call into one or two
 * requests of the HTTP API through the CLI's client; mcp_call.c holds what the tools share
 * (API calls whose failures become tool errors, output clipped to a size an agent can read);
 * mcp_schema.c checks arguments against the tools' JSON Schemas. */
#pragma once

#include "cli/client.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

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
int mcp_api(struct client *c, const struct request *req, struct response *ret,
            struct tool_result *res);
/* The same for a JSON request (body may be NULL). */
int mcp_api_json(struct client *c, const char *method, const char *path, const json_t *body,
                 struct response *ret, struct tool_result *res);

/* "/v1/envs/NAME" + suffix (printf-style, its values already escaped), NAME escaped. NULL when
 * out of memory. */
char *mcp_env_path(struct client *c, const char *name, const char *suffix_fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The most of one output stream a tool hands back; more is cut from the middle with a note. */
#define MCP_STREAM_MAX (100u << 10)
/* data as valid UTF-8 text (bad bytes become U+FFFD), at most MCP_STREAM_MAX bytes of it: the
 * head and the tail, with a line in between saying how many bytes were cut. *ret_cut: bytes
 * cut. NULL when out of memory. */
char *mcp_clip_output(const char *data, size_t len, const char *stream, size_t *ret_cut);

/* The tools. tools/list's "tools" array (a new reference), and tools/call: 0 with *res filled
 * (also for a tool error); -EINVAL with *ret_why (malloc'd) for an unknown tool or arguments
 * that do not fit its schema, -ENOMEM. */
json_t *mcp_tools_list(void);
int mcp_tool_call(struct client *c, const char *name, const json_t *args, struct tool_result *res,
                  char **ret_why);

/* Does v fit schema (the subset our tools use: type (one or a list), properties, required,
 * additionalProperties false, items, enum, minimum, minLength, minItems)? 0, or -EINVAL with why
 * ("command: expected array or string") in buf. */
int mcp_schema_check(const json_t *schema, const json_t *v, const char *where, char *why,
                     size_t why_len);

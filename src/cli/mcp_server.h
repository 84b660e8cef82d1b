/* The JSON-RPC side of `paddock mcp`, shared by its transports (stdio in cmd_mcp.c, streamable
 * HTTP in mcp_http.c): one message in, at most one message out. */
#pragma once

#include "cli/client.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

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

struct mcp_server {
        struct client *client;
        char version[16]; /* negotiated at initialize */
        bool initialized;
};

/* {"jsonrpc":"2.0","id":id (null when NULL),"error":{"code":code,"message":message}}. */
json_t *mcp_error(const json_t *id, int code, const char *message);

/* Answer one message (the text of one line): the reply, or NULL for a notification, a
 * response, or out of memory. Never fails on what the client sent: malformed input gets a
 * JSON-RPC error. */
json_t *mcp_server_handle(struct mcp_server *s, const char *text, size_t len);

/* Whether the message in text is a JSON-RPC request (has a method and an id); the HTTP
 * transport answers notifications and responses with 202 and no body. */
bool mcp_is_request(const json_t *msg);

/* Serve MCP's streamable HTTP at ADDRESS:PORT until killed (mcp_http.c). -1 after printing why
 * it could not listen. */
int mcp_serve_http(struct mcp_server *s, const char *address);

/* The CLI's side of `paddock mcp` (the protocol and the tools are src/lib/mcp.h): its
 * transports (stdio in cmd_mcp.c, streamable HTTP in mcp_http.c) and the backend that sends
 * the tools' API requests with the CLI's client (mcp_client.c). */
#pragma once

#include "cli/client.h"
#include "lib/mcp.h"

/* A backend whose requests go through c (the unix socket, or --host with a token); c must live
 * as long as the backend is used. */
struct mcp_backend mcp_client_backend(struct client *c);

/* Serve MCP's streamable HTTP at ADDRESS:PORT until killed (mcp_http.c), each request's calls
 * made through client with the request's own token. -1 after printing why it could not listen. */
int mcp_serve_http(struct client *client, const char *address);

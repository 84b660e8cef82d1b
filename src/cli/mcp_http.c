/* paddock mcp --http: MCP's streamable HTTP transport (placeholder until implemented). */
#include "cli/mcp_server.h"

#include <stdio.h>

int mcp_serve_http(struct mcp_server *s, const char *address)
{
        (void)s;
        fprintf(stderr, "paddock mcp: --http %s: not implemented yet\n", address);
        return -1;
}

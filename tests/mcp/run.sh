#!/bin/sh
# The MCP server's tests: install the pinned MCP SDK from the npm registry (package-lock.json),
# then run mcp.test.mjs with node --test next to a private paddockd (with_daemon.py starts it and
# removes everything afterwards). As root; PADDOCK_BUILD selects the build (default build/).
# Hold /tmp/paddock-it.lock around it when other daemon tests may run at the same time.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
cd "$here"
npm ci --no-audit --no-fund --loglevel=error
exec /usr/bin/python3 ./with_daemon.py node --test --test-concurrency=1 mcp.test.mjs

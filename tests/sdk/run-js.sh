#!/bin/sh
# The TypeScript SDK's tests: install the pinned development dependencies (npm ci, from the
# npm registry), build sdk/js/dist, and run node --test tests/sdk/js/ against a private paddockd
# (tests/sdk/js/with-daemon.sh; as root, inside the integration tests' lock).
# PADDOCK_BUILD selects the directory with paddockd, paddock and paddock-init (default build/).
set -eu
repo=$(cd "$(dirname "$0")/../.." && pwd)
command -v node >/dev/null && command -v npm >/dev/null || { echo "run-js.sh: node and npm are needed" >&2; exit 2; }
major=$(node -p 'process.versions.node.split(".")[0]')
[ "$major" -ge 20 ] || { echo "run-js.sh: the tests need Node >= 20 (@langchain/core; the SDK itself runs on 18)" >&2; exit 2; }
cd "$repo/sdk/js"
npm ci --no-audit --no-fund --loglevel=error
npm run --silent build
cd "$repo"
exec flock /tmp/paddock-it.lock tests/sdk/js/with-daemon.sh \
	node --test --test-reporter=spec tests/sdk/js/*.test.mjs

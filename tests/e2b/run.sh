#!/bin/sh
# The E2B drop-in's tests: the unmodified e2b SDK (pinned in package-lock.json, installed from
# the npm registry) against a private paddockd that serves the E2B API on a plain loopback
# listener in its own network namespace (with_daemon.py starts it and removes everything
# afterwards). Runs every *.test.mjs here. As root; PADDOCK_BUILD selects the build (default
# build/, which must exist: this script builds nothing). Takes /tmp/paddock-it.lock itself.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
cd "$here"
command -v node >/dev/null && command -v npm >/dev/null || { echo "run.sh: node and npm are needed" >&2; exit 2; }
npm ci --no-audit --no-fund --loglevel=error
exec flock /tmp/paddock-it.lock /usr/bin/python3 ./with_daemon.py \
	node --test --test-concurrency=1 --test-reporter=spec ./*.test.mjs

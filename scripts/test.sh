#!/bin/sh
# Paddock's whole test suite: dependencies, a -Werror build, C unit tests (also under
# ASan/UBSan), a short run of the fuzz targets (tests/fuzz), and the pytest integration tests
# against real daemons, as root (tests/integration, tests/security), then the Python and
# TypeScript SDKs', the MCP server's and the E2B drop-in's tests.
set -eu
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "run as root: the tests create namespaces and cgroups" >&2; exit 1; }
./scripts/deps.sh --test
make -j"$(nproc)" WERROR=-Werror
echo "== unit tests"
make check
echo "== unit tests under AddressSanitizer + UndefinedBehaviorSanitizer"
make -j"$(nproc)" BUILD=build/asan SAN="-fsanitize=address,undefined -fno-omit-frame-pointer" check
echo "== fuzz smoke (every libFuzzer target in tests/fuzz for a few seconds)"
make -j"$(nproc)" fuzz-smoke
echo "== integration tests"
PADDOCK_BUILD="$PWD/build" /usr/bin/python3 -m pytest -q -p no:cacheprovider tests/integration tests/security "$@"
echo "== Python SDK (pytest against a private daemon)"
PADDOCK_BUILD="$PWD/build" tests/sdk/run-python.sh
echo "== TypeScript SDK (node --test against a private daemon; npm ci from the npm registry)"
PADDOCK_BUILD="$PWD/build" tests/sdk/run-js.sh
echo "== MCP server (the MCP SDK's client against paddock mcp and a private daemon)"
PADDOCK_BUILD="$PWD/build" tests/mcp/run.sh
echo "== E2B drop-in (the unmodified e2b SDK, pinned, against a private daemon's listener)"
PADDOCK_BUILD="$PWD/build" tests/e2b/run.sh

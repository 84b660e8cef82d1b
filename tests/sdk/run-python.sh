#!/bin/sh
# The Python SDK's tests (tests/sdk/python) against a real paddockd, as root; ~20 s.
# PADDOCK_BUILD selects the binaries (default: build/ of this tree); extra arguments go to pytest.
# Where several people share a machine, run it inside the shared lock:
#   flock /tmp/paddock-it.lock tests/sdk/run-python.sh
set -eu
repo=$(cd "$(dirname "$0")/../.." && pwd)
[ "$(id -u)" = 0 ] || { echo "run as root: the tests start private daemons" >&2; exit 1; }
export PADDOCK_BUILD="${PADDOCK_BUILD:-$repo/build}"
cd "$repo"
exec /usr/bin/python3 -m pytest -q -p no:cacheprovider "$@" tests/sdk/python

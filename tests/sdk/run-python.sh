#!/bin/sh
# The Python SDK's tests against a real paddockd (as root; about two minutes).
# PADDOCK_BUILD selects the binaries (default: build/ of this tree); extra arguments go to pytest.
# Holds the shared integration-test lock, like every test that starts daemons.
set -eu
repo=$(cd "$(dirname "$0")/../.." && pwd)
export PADDOCK_BUILD="${PADDOCK_BUILD:-$repo/build}"
cd "$repo"
exec flock /tmp/paddock-it.lock /usr/bin/python3 -m pytest -q -p no:cacheprovider "$@" tests/sdk/python

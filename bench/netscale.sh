#!/bin/sh
# bench/netscale.sh [BUILD...]: the kernel's floor under a networked create
# (bench/netns_floor.py, no paddockd) and paddockd's own growing create (bench/scale.py,
# growing to BENCH_SCALE_N, default "0 2000": half networked computers), for each build directory
# given (default: ./build), one after the other in one run, so that the figures compare. Takes
# the integration tests' lock for the whole run. Run as root after `make`; ~5 minutes per part.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
[ $# -gt 0 ] || set -- "$here/../build"
if [ "${NETSCALE_LOCKED:-}" != 1 ]; then
        NETSCALE_LOCKED=1 exec flock /tmp/paddock-it.lock "$0" "$@"
fi
echo "## kernel floor (bench/netns_floor.py)"
/usr/bin/python3 "$here/netns_floor.py"
for b in "$@"; do
        sleep 30 # the floor's (or the last run's) namespaces are torn down in the background
        echo
        echo "## bench/scale.py, build $b"
        PADDOCK_BUILD=$(cd "$b" && pwd) BENCH_SCALE_N="${BENCH_SCALE_N:-0 2000}" \
                BENCH_RESTART="${BENCH_RESTART:-0}" BENCH_RUNS="${BENCH_RUNS:-11}" \
                BENCH_LIST_RUNS="${BENCH_LIST_RUNS:-3}" /usr/bin/python3 "$here/scale.py"
done

#!/bin/bash
# crun-peer.sh start|bench|cleanup WORK
# crun-peer.sh run CMD [ARG...]
# Must run in a PRIVATE mount namespace: bench/run.sh starts it as
#   unshare --mount --propagation private bench/crun-peer.sh ...
# crun 1.x refuses the v1-hybrid cgroup layout ("cgroups in hybrid mode not supported") while
# the cgroup2 mount has controllers, so the cgroup2 mount is hidden here, in this private mount
# namespace only. The host's mount table is never touched (checked below).
#   start    start the `sleep 1000` container that `crun exec` is timed against
#   bench    time `crun run` and `crun exec` with timecmd.sh (BENCH_MODE=sequential)
#   cleanup  kill and delete every container in WORK's crun state
#   run      run CMD with the cgroup2 mount hidden (the interleaved suite runs this way)
set -u
here=$(cd "$(dirname "$0")" && pwd)
mode=$1
shift

if [ -z "${BENCH_HOST_MNTNS:-}" ] || [ "$(readlink /proc/self/ns/mnt)" = "$BENCH_HOST_MNTNS" ]; then
        echo "crun-peer.sh: not in a private mount namespace; refusing to unmount anything" >&2
        exit 1
fi
if [ "$(stat -f -c %T /sys/fs/cgroup/unified 2>/dev/null)" = cgroup2fs ]; then
        umount /sys/fs/cgroup/unified || { echo "crun-peer.sh: cannot hide cgroup2 mount" >&2; exit 1; }
fi
if [ "$mode" = run ]; then
        exec "$@"
fi

work=$1
state=$work/crun/state
crun=(crun --root "$state")
id=pb-exec-$PPID
case $mode in
start)
        if "${crun[@]}" run -d --bundle "$work/crun/exec" "$id" </dev/null >"$work/crun/exec.log" 2>&1; then
                echo "$id" >"$work/crun/exec-id"
        else
                echo "crun-peer.sh: crun run -d failed: $(head -c 300 "$work/crun/exec.log")" >&2
                exit 1
        fi
        ;;
bench)
        # Cold start: `crun run` in the foreground creates, starts, waits and deletes.
        "$here/timecmd.sh" "$work/peer_crun_run.json" -- \
                crun --root "$state" run --bundle "$work/crun/run" pb-run-$$
        if [ -s "$work/crun/exec-id" ]; then
                "$here/timecmd.sh" "$work/peer_crun_exec.json" -- \
                        crun --root "$state" exec "$(cat "$work/crun/exec-id")" /bin/true
        fi
        ;;
cleanup)
        [ -d "$state" ] || exit 0
        for c in $("${crun[@]}" list -q 2>/dev/null); do
                "${crun[@]}" kill "$c" KILL >/dev/null 2>&1
                "${crun[@]}" delete -f "$c" >/dev/null 2>&1 || echo "could not delete crun container $c" >&2
        done
        ;;
esac
exit 0

#!/bin/bash
# Host side of tests/vm/v2-smoke.sh: run it in a cgroup-v2 QEMU guest (Debian 12, systemd).
# The VM runner is not part of this repository: PADDOCK_VM_SCRIPTS must name the directory that
# holds its run-in-vm.sh.
#   PADDOCK_VM_SCRIPTS=DIR tests/vm/run-v2-smoke.sh [run-in-vm.sh options, e.g. --keep or --fresh]
# run-in-vm.sh copies only the files git knows of (build/ is ignored), so this stages a copy of
# the tree plus build/{paddockd,paddock,paddock-init} and the host's static busybox (the guest
# has no busybox-static) in a temporary directory, and runs the smoke test on that copy.
# Build first (make); this script does not build, so that it never races another make.
set -euo pipefail
TREE=$(cd "$(dirname "$0")/../.." && pwd)
VM=${PADDOCK_VM_SCRIPTS:-}
[ -n "$VM" ] || { echo "set PADDOCK_VM_SCRIPTS to the directory of the VM runner (run-in-vm.sh)" >&2; exit 2; }
[ -x "$VM/run-in-vm.sh" ] || { echo "no $VM/run-in-vm.sh (set PADDOCK_VM_SCRIPTS)" >&2; exit 2; }
BB=${BUSYBOX:-/bin/busybox}
for f in paddockd paddock paddock-init; do
        [ -x "$TREE/build/$f" ] || { echo "$TREE/build/$f missing: run make first" >&2; exit 2; }
done
[ -x "$BB" ] || { echo "no static busybox at $BB (set BUSYBOX)" >&2; exit 2; }

STAGE=$(mktemp -d /tmp/pdk-v2-smoke.XXXXXX)
trap 'rm -rf "$STAGE"' EXIT
git -C "$TREE" ls-files -z --cached --others --exclude-standard |
        (cd "$TREE" && tar --null -T - --ignore-failed-read -cf - 2>/dev/null) | tar -xf - -C "$STAGE"
mkdir -p "$STAGE/build"
cp "$TREE/build/paddockd" "$TREE/build/paddock" "$TREE/build/paddock-init" "$STAGE/build/"
cp "$BB" "$STAGE/build/busybox"
rc=0
"$VM/run-in-vm.sh" "$@" "$STAGE" 'cd /src && tests/vm/v2-smoke.sh' || rc=$?
exit $rc

#!/bin/bash
# Run one of tests/vm/*.sh in the cgroup-v2 QEMU guest (Debian 12, systemd) on a staged copy of
# the tree with build/'s programs and the host's static busybox (the guest has none).
#   PADDOCK_VM_SCRIPTS=DIR tests/vm/run.sh tests/vm/service.sh [run-in-vm.sh options: --fresh, --keep]
# PADDOCK_VM_SCRIPTS names the directory of the VM runner (run-in-vm.sh); it is not part of this
# repository. Build first (make): this script does not build.
set -euo pipefail
# Classic interface names: the guest's network is configured for eth0, and a late rename to
# enp0s1 (a udev race, seen after reboots) leaves it without ssh.
export PADDOCK_VM_APPEND=${PADDOCK_VM_APPEND:-net.ifnames=0}
TREE=$(cd "$(dirname "$0")/../.." && pwd)
SCRIPT=${1:?usage: tests/vm/run.sh tests/vm/NAME.sh [runner options]}
shift
VM=${PADDOCK_VM_SCRIPTS:-}
[ -n "$VM" ] && [ -x "$VM/run-in-vm.sh" ] || { echo "set PADDOCK_VM_SCRIPTS to the directory of run-in-vm.sh" >&2; exit 2; }
REL=$(realpath --relative-to="$TREE" "$SCRIPT")
[ -f "$TREE/$REL" ] || { echo "no $SCRIPT in the tree" >&2; exit 2; }
BB=${BUSYBOX:-/bin/busybox}
for f in paddockd paddock paddock-init paddock-gateway; do
        [ -x "$TREE/build/$f" ] || { echo "$TREE/build/$f missing: run make first" >&2; exit 2; }
done
[ -x "$BB" ] || { echo "no static busybox at $BB (set BUSYBOX)" >&2; exit 2; }
STAGE=$(mktemp -d /tmp/pdk-vm-stage.XXXXXX)
trap 'rm -rf "$STAGE"' EXIT
git -C "$TREE" ls-files -z --cached --others --exclude-standard |
        (cd "$TREE" && tar --null -T - --ignore-failed-read -cf - 2>/dev/null) | tar -xf - -C "$STAGE"
mkdir -p "$STAGE/build"
cp "$TREE"/build/{paddockd,paddock,paddock-init,paddock-gateway} "$STAGE/build/"
cp "$BB" "$STAGE/build/busybox"
"$VM/run-in-vm.sh" "$@" "$STAGE" "cd /src && $REL"

#!/bin/bash
# From the host: the service test around a reboot of the cgroup-v2 guest.
#   PADDOCK_VM_SCRIPTS=DIR tests/vm/run-service.sh
# Boots an instance of its own, runs tests/vm/service.sh in it (install, three restarts, stop and
# start, a crash, upgrade, uninstall and reinstall with environments running), reboots the
# guest (`systemctl reboot`: the disk is kept), waits for it, runs
# tests/vm/service-after-reboot.sh (the service and the --autostart computer came back), and
# powers the instance off. PADDOCK_VM_KERNEL=stock runs it on Debian 12's 6.1. Build first.
set -euo pipefail
# Classic interface names: the guest's network is configured for eth0, and a late rename to
# enp0s1 (a udev race, seen after reboots) leaves it without ssh.
export PADDOCK_VM_APPEND=${PADDOCK_VM_APPEND:-net.ifnames=0}
HERE=$(cd "$(dirname "$0")" && pwd)
VM=${PADDOCK_VM_SCRIPTS:-}
[ -n "$VM" ] && [ -x "$VM/vm.sh" ] || { echo "set PADDOCK_VM_SCRIPTS to the directory of vm.sh" >&2; exit 2; }
export PADDOCK_VM_NAME=pdk-service-$$
PADDOCK_VM_PORT=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
export PADDOCK_VM_PORT
cleanup() {
        "$VM/vm.sh" stop --kill >/dev/null 2>&1 || true
        rm -rf "${PADDOCK_VM_DIR:-/var/tmp/paddock-vm}/run/$PADDOCK_VM_NAME"
}
trap cleanup EXIT
"$VM/vm.sh" start
rc=0
"$HERE/run.sh" "$HERE/service.sh" || rc=$?
[ "$rc" = 0 ] || { echo "service.sh failed ($rc): no reboot"; exit "$rc"; }
boot=$("$VM/vm.sh" ssh 'cat /proc/sys/kernel/random/boot_id')
echo "== rebooting the guest"
"$VM/vm.sh" ssh 'systemctl --no-block reboot' || true
# the connection master belongs to the old boot
ssh -o ControlPath="${PADDOCK_VM_DIR:-/var/tmp/paddock-vm}/run/$PADDOCK_VM_NAME/ssh-mux" -O exit x >/dev/null 2>&1 || true
up=""
for _ in $(seq 240); do
        sleep 5
        now=$(timeout 30 "$VM/vm.sh" ssh 'cat /proc/sys/kernel/random/boot_id' 2>/dev/null) || continue
        if [ -n "$now" ] && [ "$now" != "$boot" ]; then up=1; break; fi
done
[ -n "$up" ] || { echo "the guest did not come back within 20 minutes"; exit 1; }
echo "== the guest is back"
"$HERE/run.sh" "$HERE/service-after-reboot.sh"

#!/bin/bash
# Kernel fallbacks (issue 14 item 6) in the guest, meant for Debian 12's own 6.1 kernel:
#   PADDOCK_VM_KERNEL=stock tests/vm/run.sh tests/vm/fallbacks.sh --fresh
# A plain paddockd (not the service, started from a shell) on a private root: `paddock system` names the fallbacks the
# kernel forces (6.1: btrfs qgroups, Landlock ABI 2), and a computer and a sandbox still work
# there (create, exec, a disk limit, a file written and read back). PASS/FAIL lines; exit 1 on FAIL.
set -u
export LC_ALL=C
TREE=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$TREE/build
BASE=/var/tmp/pdk-fallbacks
SOCK=$BASE/sock
fails=0
passes=0
pass() { echo "PASS: $*"; passes=$((passes + 1)); }
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
check() { local d=$1; shift; if "$@"; then pass "$d"; else fail "$d"; return 1; fi; }
pd() { timeout 300 "$BUILD/paddock" --socket "$SOCK" "$@"; }
BUSYBOX=$BUILD/busybox
[ -x "$BUSYBOX" ] || BUSYBOX=/bin/busybox
kernel=$(uname -r)
echo "guest: $kernel"
rm -rf "$BASE"; mkdir -p "$BASE/rootfs"; chmod 711 "$BASE"
(
        set -e
        cd "$BASE/rootfs"
        mkdir -p bin etc root tmp proc sys dev run var/tmp workspace
        chmod 1777 tmp var/tmp
        cp "$BUSYBOX" bin/busybox
        for applet in $(bin/busybox --list); do [ -e "bin/$applet" ] || ln -s busybox "bin/$applet"; done
        printf '%s\n' 'root:x:0:0:root:/root:/bin/sh' > etc/passwd
        printf '%s\n' 'root:x:0:' > etc/group
)
# Started by hand from this shell (as the quick start does), not as a unit: the daemon shares
# its cgroup (a scope of the ssh session) with other processes, so on cgroup v2 environments can
# only go into the delegated systemd scope it makes for them (sdscope.c).
"$BUILD/paddockd" --root "$BASE/root" --socket "$SOCK" --uid-registry "$BASE/uids" \
        --pool-size 2G >"$BASE/paddockd.log" 2>&1 </dev/null &
DPID=$!
for _ in $(seq 600); do [ -S "$SOCK" ] && timeout 10 "$BUILD/paddock" --socket "$SOCK" system >/dev/null 2>&1 && break; sleep 0.2; done
sys=$(pd system --json)
check "paddock system answers" test -n "$sys"
check "a daemon started by hand puts environments in a systemd scope" grep -Eq '"cgroup_scope": ?"/paddock.slice/' <<<"$sys"
pd system | grep -A6 -E '"(fallbacks|landlock_abi|quota)"' | sed 's/^/  .. /'
case $kernel in
6.1.*)
        check "6.1: btrfs qgroups named as a fallback" grep -q 'qgroups instead of simple quotas' <<<"$sys"
        check "6.1: Landlock ABI 2 named as a fallback" grep -q 'Landlock ABI 2' <<<"$sys"
        ;;
*)
        no_qgroups() { ! grep -q 'qgroups instead' <<<"$sys"; }
        check "newer kernel: no qgroups fallback" no_qgroups
        ;;
esac
check "image import" sh -c "timeout 300 $BUILD/paddock --socket $SOCK image import default $BASE/rootfs >/dev/null 2>&1"
check "computer with a disk limit" pd create fb1 --computer --disk 64M --memory 128M
check "computer: exec" test "$(pd exec fb1 -- sh -c 'echo kept > /root/f; cat /root/f')" = kept
check "computer: disk limit enforced" sh -c "! timeout 300 $BUILD/paddock --socket $SOCK exec fb1 -- dd if=/dev/zero of=/root/big bs=1M count=100 >/dev/null 2>&1"
check "sandbox: exec" sh -c "$BUILD/paddock --socket $SOCK create fb2 --sandbox >/dev/null && test \"\$($BUILD/paddock --socket $SOCK exec fb2 -- echo sb)\" = sb"
check "sandbox: its root is read-only" sh -c "! timeout 60 $BUILD/paddock --socket $SOCK exec fb2 -- touch /etc/x >/dev/null 2>&1"
pd rm -f fb1 >/dev/null 2>&1
pd rm -f fb2 >/dev/null 2>&1
kill "$DPID"; wait "$DPID"
scope=$(sed -n 's/.*"cgroup_scope": *"\([^"]*\)".*/\1/p' <<<"$sys")
[ -z "$scope" ] || systemctl stop "${scope##*/}" 2>/dev/null
grep -o " $BASE/[^ ]*" /proc/self/mountinfo | sort -r | while read -r m; do umount -l "$m" 2>/dev/null; done
echo "fallbacks: $passes passed, $fails failed"
if [ "$fails" -gt 0 ]; then tail -30 "$BASE/paddockd.log"; exit 1; fi

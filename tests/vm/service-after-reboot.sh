#!/bin/bash
# The second half of the service test, INSIDE the guest after it rebooted: service.sh left the
# service installed and enabled, the computer svc1 made with --autostart, the computer svc2
# stopped and the sandbox sb1 running. Run by tests/vm/run-service.sh (from the host).
#
# Checks: the unit came up at boot, svc1 was started again (a new PID 1, in the systemd scope,
# with its limits) and answers exec, svc2 stays stopped until started by hand, the sandbox's
# state is reported (its processes ended with the old boot), and a restart still works. Then
# `install.sh --uninstall --purge` removes everything, the scope included. PASS/FAIL lines.
set -u
export LC_ALL=C
TREE=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$TREE/build
P=/usr/local/bin/paddock
CG=/sys/fs/cgroup
fails=0
passes=0
pass() { echo "PASS: $*"; passes=$((passes + 1)); }
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
check() { local d=$1; shift; if "$@"; then pass "$d"; else fail "$d"; return 1; fi; }
pd() { timeout 300 "$P" "$@"; }
state_of() { pd inspect "$1" | sed -n 's/^  "state": "\([a-z]*\)",$/\1/p'; }
pidof_env() { pd inspect "$1" | sed -n 's/^  "pid": \([0-9]*\),$/\1/p'; }
echo "guest: $(uname -r), up $(cut -d' ' -f1 /proc/uptime) s"

for _ in $(seq 600); do systemctl -q is-active paddockd && break; sleep 0.5; done
check "the unit started at boot" systemctl -q is-active paddockd
for _ in $(seq 600); do [ "$(state_of svc1)" = running ] && break; sleep 0.5; done
check "the --autostart computer runs again" test "$(state_of svc1)" = running
check "exec in it" test "$(pd exec svc1 -- echo booted)" = booted
check "its files survived" test "$(pd exec svc1 -- sh -c 'cat /root/kept 2>/dev/null')" = kept
scope=$(pd system --json | sed -n 's/.*"cgroup_scope": *"\([^"]*\)".*/\1/p')
check "a scope again" test -n "$scope"
env_cg=$(find "$CG$scope" -mindepth 2 -maxdepth 2 -type d -name env-svc1 | head -1)
check "its group is in the scope" test -n "$env_cg"
check "memory.max 256M again" test "$(cat "$env_cg/memory.max" 2>/dev/null)" = 268435456
check "cpu.max 1 CPU again" test "$(cat "$env_cg/cpu.max" 2>/dev/null)" = "100000 100000"
check "svc2 (no --autostart) stays stopped" test "$(state_of svc2)" = stopped
check "svc2 starts by hand" pd start svc2
check "exec in svc2" test "$(pd exec svc2 -- echo two)" = two
sbstate=$(state_of sb1)
echo "  .. the sandbox after the reboot: ${sbstate:-gone}"
check "the sandbox is not reported running without a PID 1" test "$sbstate" != running
pid1=$(pidof_env svc1)
out=$(timeout 120 systemctl restart paddockd 2>&1)
check "systemctl restart after the boot" test $? = 0 || printf '%s\n' "$out" | sed 's/^/     /'
check "the computer kept running (same PID 1)" test "$(pidof_env svc1)" = "$pid1"

for e in svc1 svc2 sb1; do pd rm -f "$e" >/dev/null 2>&1; done
out=$("$TREE/scripts/install.sh" --uninstall --purge 2>&1)
check "uninstall --purge" test $? = 0 || printf '%s\n' "$out" | sed 's/^/     /'
check "purge: the state directory is gone" test ! -e /var/lib/paddock
check "purge: the scope is gone" sh -c "! systemctl -q is-active '${scope##*/}' && test ! -e '$CG$scope'"

echo "service after reboot: $passes passed, $fails failed"
if [ "$fails" -gt 0 ]; then
        echo "---- journalctl -b -u paddockd (last 40) ----"
        journalctl -b -u paddockd --no-pager -n 40
        exit 1
fi

#!/bin/bash
# Paddock installed as a systemd service (scripts/install.sh, docs/operations.md) on a real
# systemd, pure cgroup-v2 host. Runs INSIDE the QEMU guest, as root, on a throwaway instance
# (it installs into /usr/local, makes the group and a user, and enables the unit); from the
# host: tests/vm/run.sh tests/vm/service.sh --fresh.
#
# Checks: install --enable starts the unit (Type=notify: active once the socket answers), the
# unit's settings, the socket root:paddock 0660 and a member of the group using it without
# root, journal lines with levels; a computer and a sandbox with limits in the delegated scope
# paddock.slice/paddock-*.scope (not in the unit's group); three restarts of the service with
# them running, a stop and start, a SIGKILL of the daemon (systemd restarts it), each followed
# by re-adoption checks (same PID 1, limits, exec); an upgrade (install again + restart);
# uninstall (programs and unit gone, state kept, the computer still running) and a reinstall
# that re-adopts it. It leaves the service installed with an --autostart computer, for
# service-after-reboot.sh (tests/vm/run-service.sh runs both around a reboot). One PASS/FAIL line
# per check; exit 1 on any FAIL.
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
BUSYBOX=${BUSYBOX:-$BUILD/busybox}
[ -x "$BUSYBOX" ] || BUSYBOX=/bin/busybox
[ -x "$BUSYBOX" ] || { echo "no static busybox (set BUSYBOX)" >&2; exit 2; }
echo "guest: $(uname -r), $(systemctl --version | head -1), cgroup $(stat -fc %T $CG)"

# 1. install and start
out=$(PADDOCK_BUILD=$BUILD "$TREE/scripts/install.sh" --enable 2>&1)
check "install.sh --enable" test $? = 0 || printf '%s\n' "$out" | sed 's/^/     /'
check "the unit is active" systemctl -q is-active paddockd
check "enabled at boot" systemctl -q is-enabled paddockd
show=$(systemctl show -p Type -p Delegate -p KillMode -p NotifyAccess -p Restart paddockd)
for kv in Type=notify Delegate=yes KillMode=process NotifyAccess=main Restart=on-failure; do
        check "unit $kv" grep -qx "$kv" <<<"$show"
done
check "socket root:paddock 0660" test "$(stat -c '%U:%G %a' /run/paddock/paddock.sock)" = "root:paddock 660"
check "journal: the ready line at level info" \
        sh -c 'journalctl -u paddockd -o verbose --no-pager | grep -B20 "MESSAGE=paddockd .* ready" | grep -q "PRIORITY=6"'
check "journal: no timestamp of the daemon's own in its lines" \
        sh -c '! journalctl -u paddockd -o cat --no-pager | grep -q "paddockd\[[0-9]*\]: info:"'

# a restart with no environment yet
out=$(timeout 120 systemctl restart paddockd 2>&1)
check "restart without environments" test $? = 0 || printf '%s\n' "$out" | sed 's/^/     /'
check "active after it" systemctl -q is-active paddockd

# 2. an image, a computer and a sandbox with limits
RFS=/var/tmp/pdk-svc-rootfs
rm -rf "$RFS"; mkdir -p "$RFS"
(
        set -e
        cd "$RFS"
        mkdir -p bin etc root tmp proc sys dev run var/tmp workspace
        chmod 1777 tmp var/tmp
        cp "$BUSYBOX" bin/busybox
        for applet in $(bin/busybox --list); do [ -e "bin/$applet" ] || ln -s busybox "bin/$applet"; done
        printf '%s\n' 'root:x:0:0:root:/root:/bin/sh' > etc/passwd
        printf '%s\n' 'root:x:0:' > etc/group
)
check "image import" sh -c "timeout 300 $P image import default $RFS >/dev/null 2>&1"
check "create a computer with limits (--autostart)" pd create svc1 --computer --cpus 1 --memory 256M --autostart
check "create a sandbox with limits" pd create sb1 --sandbox --memory 128M --pids 64
check "create a computer without --autostart" pd create svc2 --computer --memory 200M
check "exec" test "$(pd exec svc1 -- sh -c 'echo kept > /root/kept; echo hi')" = hi
check "exec in the sandbox" test "$(pd exec sb1 -- echo sb)" = sb
unit_cg=$CG$(systemctl show -p ControlGroup --value paddockd)
scope=$(pd system --json | sed -n 's/.*"cgroup_scope": *"\([^"]*\)".*/\1/p')
check "paddock system names the environments' scope" test -n "$scope"
check "the scope is a running systemd unit with Delegate=yes" \
        test "$(systemctl show -p ActiveState --value "${scope##*/}")/$(systemctl show -p Delegate --value "${scope##*/}")" = active/yes
env_cg=$(find "$CG$scope" -mindepth 2 -maxdepth 2 -type d -name env-svc1 | head -1)
sb_cg=$(find "$CG$scope" -mindepth 2 -maxdepth 2 -type d -name env-sb1 | head -1)
check "the computer's cgroup is in the scope" test -n "$env_cg"
check "the sandbox's cgroup is in the scope" test -n "$sb_cg"
check "no environment group in the unit's own group" \
        sh -c "! find '$unit_cg' -type d -name 'env-*' | grep -q ."
check "the unit's group hands no controller down" test -z "$(cat "$unit_cg/cgroup.subtree_control")"
check "memory.max 256M" test "$(cat "$env_cg/memory.max" 2>/dev/null)" = 268435456
check "cpu.max 1 CPU" test "$(cat "$env_cg/cpu.max" 2>/dev/null)" = "100000 100000"
check "sandbox pids.max 64" test "$(cat "$sb_cg/pids.max" 2>/dev/null)" = 64
pidof_env() { pd inspect "$1" | sed -n 's/^  "pid": \([0-9]*\),$/\1/p'; }
pid1=$(pidof_env svc1)
sbpid=$(pidof_env sb1)
check "the computer's PID 1 is in its group" grep -qx "0::$scope/.*/env-svc1" /proc/"$pid1"/cgroup

# 3. a member of the group, without root
id alice >/dev/null 2>&1 || useradd -m -G paddock alice
check "a paddock group member lists environments without root" \
        sh -c "su alice -s /bin/sh -c '$P ls' | grep -q '^svc1 '"
id bob >/dev/null 2>&1 || useradd -m bob
check "a user outside the group cannot" sh -c "! su bob -s /bin/sh -c '$P ls' >/dev/null 2>&1"

# 4. restarts with the environments running: systemd must be able to start the new main process
# in the unit's group every time (no status=219/CGROUP), and the daemon re-adopts everything.
readopted() {
        local what=$1
        check "$what: active" systemctl -q is-active paddockd
        check "$what: the computer kept running (same PID 1)" test "$(pidof_env svc1)" = "$pid1"
        check "$what: the sandbox kept running (same PID 1)" test "$(pidof_env sb1)" = "$sbpid"
        check "$what: exec after it" test "$(pd exec svc1 -- echo again)" = again
        check "$what: exec in the sandbox after it" test "$(pd exec sb1 -- echo again)" = again
        check "$what: memory.max kept" test "$(cat "$env_cg/memory.max" 2>/dev/null)" = 268435456
        check "$what: sandbox pids.max kept" test "$(cat "$sb_cg/pids.max" 2>/dev/null)" = 64
        check "$what: the same scope" test "$(pd system --json | sed -n 's/.*"cgroup_scope": *"\([^"]*\)".*/\1/p')" = "$scope"
}
restart_ok() {
        local what=$1
        out=$(timeout 120 systemctl restart paddockd 2>&1)
        check "$what: systemctl restart" test $? = 0 || {
                printf '%s\n' "$out" | sed 's/^/     /'
                journalctl -u paddockd --no-pager -n 15 | sed 's/^/     /'
                return 1
        }
        readopted "$what"
}
for i in 1 2 3; do restart_ok "restart $i"; done

out=$(timeout 120 systemctl stop paddockd 2>&1)
check "systemctl stop" test $? = 0 || printf '%s\n' "$out" | sed 's/^/     /'
check "stopped: the computer keeps running" kill -0 "$pid1"
out=$(timeout 120 systemctl start paddockd 2>&1)
check "systemctl start" test $? = 0 || printf '%s\n' "$out" | sed 's/^/     /'
readopted "stop and start"

main=$(systemctl show -p MainPID --value paddockd)
kill -9 "$main"
for _ in $(seq 300); do
        now=$(systemctl show -p MainPID --value paddockd)
        [ "$now" != 0 ] && [ "$now" != "$main" ] && systemctl -q is-active paddockd && break
        sleep 0.5
done
check "after a SIGKILL of the daemon systemd starts it again (Restart=on-failure)" \
        test "$(systemctl show -p MainPID --value paddockd)" != "$main"
readopted "crash"

# 5. upgrade: install over it, restart
out=$(PADDOCK_BUILD=$BUILD "$TREE/scripts/install.sh" 2>&1)
check "install again (upgrade)" test $? = 0 || printf '%s\n' "$out" | sed 's/^/     /'
check "upgrade: it says to restart" grep -q "systemctl restart paddockd" <<<"$out"
restart_ok "upgrade"

# 6. uninstall keeps state and the running computer; reinstall re-adopts it
out=$("$TREE/scripts/install.sh" --uninstall 2>&1)
check "uninstall" test $? = 0 || printf '%s\n' "$out" | sed 's/^/     /'
check "uninstall: unit and programs gone" \
        sh -c '! test -e /etc/systemd/system/paddockd.service && ! test -e /usr/local/sbin/paddockd && ! test -e /usr/local/lib/paddock'
check "uninstall: the state directory stays" test -f /var/lib/paddock/paddock.db
check "uninstall: the computer keeps running" kill -0 "$pid1"
out=$(PADDOCK_BUILD=$BUILD "$TREE/scripts/install.sh" --enable 2>&1)
check "reinstall --enable" test $? = 0 || { printf '%s\n' "$out" | sed 's/^/     /'; journalctl -u paddockd --no-pager -n 15 | sed 's/^/     /'; }
check "reinstall: the computer re-adopted" test "$(pd exec svc1 -- echo back 2>&1)" = back
restart_ok "after the reinstall"
# for the reboot: the autostart computer runs, svc2 is stopped by hand
check "stop svc2 before the reboot" pd stop svc2

echo "service: $passes passed, $fails failed"
if [ "$fails" -gt 0 ]; then
        echo "---- journalctl -u paddockd (last 40) ----"
        journalctl -u paddockd --no-pager -n 40
        exit 1
fi

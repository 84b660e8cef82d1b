#!/bin/bash
# cgroup-v2 smoke test of Paddock on a systemd host. Runs INSIDE a QEMU guest
# (Debian 12, systemd, pure cgroup v2), as root, from a copy of the source tree that
# holds a prebuilt build/ (paddockd, paddock, paddock-init). From the host, use
# `tests/vm/run.sh tests/vm/v2-smoke.sh --fresh`, which stages the tree with build/ and a static
# busybox and runs this.
#
# paddockd runs as a delegated transient systemd unit (Delegate=yes, KillMode=process), the way a
# packaged daemon would, and the test checks what only a real v2 host can show: cgroup mode, the
# env groups in the daemon's delegated systemd scope (not the unit's group), memory.max / pids.max / cpu.max, OOM kill accounting, the
# pids limit against a fork bomb, exec timeouts killing a whole per-exec sub-group
# (cgroup.kill), live limit updates, stop/start, and re-adoption after the daemon is SIGKILLed.
# If systemd cannot start the daemon in its unit again after the SIGKILL, that is a FAIL; to still
# check the daemon's own re-adoption, paddockd is then started by hand in <unit>/<subtree>-daemon
# (the leaf an older layout moved it into), and those checks are tagged "[paddockd started by
# hand ...]".
#
# Prints one "PASS: ..." or "FAIL: ..." line per check; exits 1 if any check failed (and prints
# the daemon's journal), 0 otherwise. Everything it makes lives in /var/tmp/pdk-smoke and the
# unit paddock-smoke.service; both are removed at the end.
#
# Env: PADDOCK_BUILD (default <tree>/build), BUSYBOX (a static busybox; default build/busybox,
# then /bin/busybox), SMOKE_KEEP=1 (leave the daemon and state in place for a look afterwards).
set -u
export LC_ALL=C

TREE=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(cd "${PADDOCK_BUILD:-$TREE/build}" 2>/dev/null && pwd) || { echo "no build directory" >&2; exit 2; }
BASE=/var/tmp/pdk-smoke
ROOT=$BASE/root
SOCK=$BASE/sock
UIDS=$BASE/uids
UNIT=paddock-smoke
SB=smoke-sb
PC=smoke-pc
CG=/sys/fs/cgroup

fails=0
passes=0
pass() { echo "PASS: $*"; passes=$((passes + 1)); }
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
info() { echo "  .. $*"; }
# check DESCRIPTION COMMAND...: PASS if the command succeeds
check() { local d=$1; shift; if "$@"; then pass "$d"; else fail "$d"; return 1; fi; }

# the CLI, bounded in time (the guest is slow, but nothing here should take minutes)
pd() { timeout 300 "$BUILD/paddock" --socket "$SOCK" "$@"; }
# a top-level field of a pretty-printed JSON object on stdin ("  \"key\": value,")
jfield() { sed -n "s/^  \"$1\": \"\{0,1\}\([^\",]*\)\"\{0,1\},\{0,1\}\$/\1/p" | head -1; }
inspect_field() { pd inspect "$1" 2>/dev/null | jfield "$2"; }

unit_cgroup() { echo "$CG$(systemctl show -p ControlGroup --value "$UNIT.service" 2>/dev/null)"; }
UNIT_CG_SAVED=
# Where environments' groups are made: the systemd scope `paddock system` names
# (/paddock.slice/paddock-XXXXXXXX.scope), else the unit's group.
SCOPE=
envs_base() { if [ -n "$SCOPE" ]; then echo "$CG$SCOPE"; else echo "${UNIT_CG_SAVED:-$(unit_cgroup)}"; fi; }
# The env's group: <base>/paddock-XXXXXXXX/env-<env> (exactly one)
env_cgroup() {
        local u
        u=$(envs_base)
        local found
        found=$(find "$u" -mindepth 2 -maxdepth 2 -type d -name "env-$1" 2>/dev/null)
        [ "$(printf '%s\n' "$found" | grep -c .)" = 1 ] && printf '%s\n' "$found"
}
keyed() { sed -n "s/^$2 //p" "$1" 2>/dev/null | head -1; } # keyed FILE KEY

T0=$(date +%s)
journal() {
        local j
        j=$(journalctl -u "$UNIT" --since "@$T0" --no-pager 2>&1 | tail -50)
        if printf '%s\n' "$j" | grep -q "$UNIT"; then
                echo "---- journalctl -u $UNIT --since @$T0 (last 50 lines) ----"
                printf '%s\n' "$j"
        else
                [ -n "$j" ] && printf '%s\n' "$j"
                echo "---- journalctl -u $UNIT (last 50 lines) ----"
                journalctl -u "$UNIT" --no-pager 2>&1 | tail -50
        fi
        # systemd's exec child logs a failed spawn (e.g. "Failed to attach to cgroup") before it
        # is in the unit's group, so -u does not match those lines
        echo "---- other lines about $UNIT.service ----"
        journalctl --since "@$T0" --no-pager 2>&1 | grep -F "$UNIT.service:" | grep -v 'systemd\[1\]' | tail -20
        if [ -s "$BASE/paddockd-by-hand.log" ]; then
                echo "---- $BASE/paddockd-by-hand.log (last 30 lines) ----"
                tail -30 "$BASE/paddockd-by-hand.log"
        fi
        echo "---- end of journal ----"
}

stop_unit() {
        systemctl stop "$UNIT.service" >/dev/null 2>&1
        systemctl reset-failed "$UNIT.service" >/dev/null 2>&1
}

# Start paddockd as a delegated transient unit and wait until it answers.
start_daemon() {
        systemctl reset-failed "$UNIT.service" >/dev/null 2>&1
        # systemd keeps a stopped transient unit loaded while processes are left in its group
        # (KillMode=process leaves the environments running): then it is started again as is.
        if [ "$(systemctl show -p LoadState --value "$UNIT.service" 2>/dev/null)" = loaded ]; then
                info "$UNIT.service is still loaded ($(systemctl show -p ActiveState --value "$UNIT.service")): systemctl start"
                systemctl start "$UNIT.service" || return 1
        elif ! systemd-run --quiet --unit="$UNIT" -p Delegate=yes --property=KillMode=process \
                "$BUILD/paddockd" --root "$ROOT" --socket "$SOCK" --uid-registry "$UIDS"; then
                return 1
        fi
        local i
        for i in $(seq 1 240); do
                if [ -S "$SOCK" ] && pd system >/dev/null 2>&1; then
                        return 0
                fi
                if ! systemctl is-active --quiet "$UNIT.service" && [ "$i" -gt 4 ]; then
                        info "unit is $(systemctl show -p ActiveState --value "$UNIT.service")" \
                             "($(systemctl show -p Result --value "$UNIT.service"))"
                        return 1
                fi
                sleep 0.5
        done
        return 1
}

# ----------------------------------------------------------------------------- preparation

[ "$(id -u)" = 0 ] || { echo "run as root" >&2; exit 2; }
for b in paddockd paddock paddock-init; do
        [ -x "$BUILD/$b" ] || { echo "$BUILD/$b is missing (build on the host first)" >&2; exit 2; }
done
if [ -z "${BUSYBOX:-}" ]; then
        for c in "$BUILD/busybox" /bin/busybox; do
                [ -x "$c" ] && { BUSYBOX=$c; break; }
        done
fi
[ -n "${BUSYBOX:-}" ] && [ -x "$BUSYBOX" ] || { echo "no static busybox (set BUSYBOX)" >&2; exit 2; }

echo "== paddock v2 smoke test: $(uname -r), systemd $(systemctl --version | sed -n '1s/^systemd \([0-9]*\).*/\1/p'), build $BUILD"
echo "== /sys/fs/cgroup is $(stat -f -c %T /sys/fs/cgroup)"

# leftovers of an earlier run
if systemctl list-units --all --no-legend "$UNIT.service" 2>/dev/null | grep -q .; then
        info "stopping a leftover $UNIT.service"
        systemctl kill --signal=KILL "$UNIT.service" >/dev/null 2>&1
        stop_unit
fi
rm -rf "$BASE"
mkdir -p "$BASE"
chmod 711 "$BASE"

# A busybox rootfs, as scripts/busybox-rootfs.sh makes it (that script insists on /bin/busybox).
RFS=$BASE/rootfs
mkdir -p "$RFS"
(
        set -e
        cd "$RFS"
        mkdir -p bin sbin usr/bin usr/sbin etc root tmp proc sys dev run var/tmp workspace home/user
        chmod 1777 tmp var/tmp
        chmod 700 root
        cp "$BUSYBOX" bin/busybox
        chmod 755 bin/busybox
        for applet in $(bin/busybox --list); do
                [ -e "bin/$applet" ] || ln -s busybox "bin/$applet"
        done
        printf '%s\n' 'root:x:0:0:root:/root:/bin/sh' 'user:x:1000:1000:user:/home/user:/bin/sh' \
                'nobody:x:65534:65534:nobody:/nonexistent:/bin/false' > etc/passwd
        printf '%s\n' 'root:x:0:' 'tty:x:5:' 'user:x:1000:' 'nogroup:x:65534:' > etc/group
        chown 1000:1000 home/user
        echo paddock > etc/hostname
) || { echo "cannot build the busybox rootfs from $BUSYBOX" >&2; exit 2; }

cleanup_done=
cleanup() {
        [ -n "$cleanup_done" ] && return
        cleanup_done=1
        if [ -n "${SMOKE_KEEP:-}" ]; then
                info "SMOKE_KEEP set: leaving $UNIT.service and $BASE"
                return
        fi
        if [ -S "$SOCK" ]; then
                pd rm -f "$SB" "$PC" >/dev/null 2>&1
        fi
        stop_unit
        if [ -n "${HANDPID:-}" ] && kill -0 "$HANDPID" 2>/dev/null; then
                kill -TERM "$HANDPID"
                for _ in $(seq 1 40); do kill -0 "$HANDPID" 2>/dev/null || break; sleep 0.25; done
                kill -0 "$HANDPID" 2>/dev/null && kill -KILL "$HANDPID"
        fi
        # The environments' scope (the holder and anything left), then anything of ours still
        # alive in the unit's group (e.g. after a failed re-adoption)
        [ -z "$SCOPE" ] || systemctl stop "${SCOPE##*/}" 2>/dev/null
        local u=${UNIT_CG_SAVED:-}
        if [ -n "$u" ] && [ -d "$u" ]; then
                [ -e "$u/cgroup.kill" ] && echo 1 > "$u/cgroup.kill" 2>/dev/null
                sleep 1
                find "$u" -mindepth 1 -depth -type d -exec rmdir {} + 2>/dev/null
                rmdir "$u" 2>/dev/null
        fi
        grep -o " $BASE/[^ ]*" /proc/self/mountinfo | sort -r | while read -r m; do umount -l "$m" 2>/dev/null; done
        rm -rf "$BASE"
}
trap 'cleanup; exit 130' INT TERM

# ----------------------------------------------------------------------------- daemon and image

if start_daemon; then
        pass "paddockd started as delegated unit $UNIT.service"
else
        fail "paddockd started as delegated unit $UNIT.service"
        systemctl status "$UNIT.service" --no-pager 2>&1 | tail -20
        journal
        cleanup
        exit 1
fi
UNIT_CG_SAVED=$(unit_cgroup)
info "unit cgroup $UNIT_CG_SAVED; daemon pid $(systemctl show -p MainPID --value "$UNIT.service")" \
     "in $(cat /proc/"$(systemctl show -p MainPID --value "$UNIT.service")"/cgroup 2>/dev/null)"

sys=$(pd system 2>&1)
if printf '%s\n' "$sys" | grep -q '"cgroup_mode": "v2"'; then
        pass 'paddock system reports "cgroup_mode": "v2"'
else
        fail 'paddock system reports "cgroup_mode": "v2"'
        printf '%s\n' "$sys" | sed 's/^/     /'
fi

SCOPE=$(pd system --json 2>/dev/null | sed -n 's/.*"cgroup_scope": *"\([^"]*\)".*/\1/p')
check "paddock system names a systemd scope for the environments (${SCOPE:-none})" test -n "$SCOPE"
if [ -n "$SCOPE" ]; then
        check "the scope ${SCOPE##*/} is active with Delegate=yes" \
                test "$(systemctl show -p ActiveState --value "${SCOPE##*/}")/$(systemctl show -p Delegate --value "${SCOPE##*/}")" = active/yes
fi
out=$(pd image import default "$RFS" 2>&1)
check "image import default ($RFS)" test $? = 0 || printf '%s\n' "$out" | sed 's/^/     /'

# ----------------------------------------------------------------------------- create, exec

out=$(pd create "$SB" --memory 64M --pids 32 2>&1)
check "create sandbox $SB --memory 64M --pids 32" test "$out" = "$SB" || printf '%s\n' "$out" | sed 's/^/     /'
out=$(pd create "$PC" --computer --cpus 0.5 2>&1)
check "create computer $PC --cpus 0.5" test "$out" = "$PC" || printf '%s\n' "$out" | sed 's/^/     /'

for e in "$SB" "$PC"; do
        st=$(inspect_field "$e" state)
        check "$e is running (state=$st)" test "$st" = running
        h=$(pd exec "$e" -- hostname 2>&1)
        check "exec hostname in $e (got '$h')" test "$h" = "$e"
        c=$(pd exec "$e" -- cat /proc/1/comm 2>&1)
        check "exec cat /proc/1/comm in $e = paddock-init (got '$c')" test "$c" = paddock-init
done

# A kernel before 6.15 cannot clone a detached mount: sandboxes without a network share the sysfs
# by mounting it from within the daemon's empty namespace (lib/rootfs.c rootfs_sysfs_share).
how=$(journalctl -u "$UNIT" --since "@$T0" --no-pager 2>/dev/null | grep -o 'share one sysfs ([a-z ]*)' | tail -1)
check "the daemon says how sandboxes share one sysfs (${how:-nothing})" test -n "$how"
sbdev=$(pd exec "$SB" -- stat -c %d /sys 2>&1)
pcdev=$(pd exec "$PC" -- stat -c %d /sys 2>&1)
nets=$(pd exec "$SB" -- ls /sys/class/net 2>&1 | tr '\n' ' ')
check "$SB's /sys is the shared one (lo only: '$nets'), not $PC's ($sbdev vs $pcdev)" \
        test "$nets" = "lo " -a -n "$sbdev" -a "$sbdev" != "$pcdev"
keymode=$(stat -c %a "$ROOT/network.key" 2>&1)
check "the interface names' key is in the state directory, mode 0600 (got $keymode)" test "$keymode" = 600

# ----------------------------------------------------------------------------- cgroup placement

SBCG=$(env_cgroup "$SB")
PCCG=$(env_cgroup "$PC")
info "sandbox group: ${SBCG:-<none>}; computer group: ${PCCG:-<none>}"
EB=$(envs_base)
check "sandbox cgroup exists below $EB/paddock-*/" test -n "$SBCG" -a -d "$SBCG"
check "computer cgroup exists below $EB/paddock-*/" test -n "$PCCG" -a -d "$PCCG"
case $SBCG in "$EB"/paddock-*/"env-$SB") ok=1 ;; *) ok= ;; esac
check "sandbox group path is <scope>/paddock-XXXXXXXX/env-$SB" test -n "$ok"
check "the unit's own group hands no controller down" test -z "$(cat "$UNIT_CG_SAVED/cgroup.subtree_control" 2>/dev/null)"
SBCG=${SBCG:-/nonexistent}
PCCG=${PCCG:-/nonexistent}

p1=$(inspect_field "$SB" pid)
check "sandbox PID 1 ($p1) is in its group" grep -qx "0::${SBCG#"$CG"}" /proc/"${p1:-0}"/cgroup
v=$(cat "$SBCG/memory.max" 2>&1)
check "sandbox memory.max = 67108864 (got $v)" test "$v" = 67108864
v=$(cat "$SBCG/pids.max" 2>&1)
check "sandbox pids.max = 32 (got $v)" test "$v" = 32
v=$(cat "$PCCG/cpu.max" 2>&1)
check "computer cpu.max = '50000 100000' (got '$v')" test "$v" = "50000 100000"

# ----------------------------------------------------------------------------- pids limit

# A fork bomb inside an exec with a timeout: the env never holds more than pids.max processes,
# the kernel counts refused forks in pids.events, and the timeout kills every copy.
ev0=$(keyed "$SBCG/pids.events" max)
base_pids=$(cat "$SBCG/pids.current" 2>/dev/null || echo 1)
# the exec's own shell forks once, early, then becomes "sleep 60": only the timeout ends it
pd exec "$SB" --timeout 20s -- sh -c 'f() { f | f & }; f; exec sleep 60' >/dev/null 2>&1 &
bomb=$!
peak=0
full_rc= full_out=
for _ in $(seq 1 40); do
        cur=$(cat "$SBCG/pids.current" 2>/dev/null || echo 0)
        [ "$cur" -gt "$peak" ] && peak=$cur
        kill -0 "$bomb" 2>/dev/null || break
        if [ -z "$full_rc" ] && [ "$cur" -ge 32 ]; then
                # a process can be made there only when one of the bomb's has just exited:
                # the exec runs, or fails (its command's clone refused), at once
                full_out=$(timeout 30 "$BUILD/paddock" --socket "$SOCK" exec "$SB" -- true 2>&1)
                full_rc=$?
        fi
        sleep 0.5
done
wait "$bomb"
bomb_rc=$?
info "an exec into the full sandbox: exit ${full_rc:-none}: $full_out"
check "an exec into the sandbox at pids.max ends at once (exit ${full_rc:-none})" \
        test -n "$full_rc" -a "${full_rc:-124}" != 124
ev1=$(keyed "$SBCG/pids.events" max)
info "fork bomb: exec exit $bomb_rc, peak pids.current $peak, pids.events max ${ev0:-?} -> ${ev1:-?}"
check "fork bomb bounded: peak pids.current $peak <= 32" test "$peak" -le 32 -a "$peak" -gt 1
check "fork bomb hit pids.max (pids.events max ${ev0:-?} -> ${ev1:-?})" test "${ev1:-0}" -gt "${ev0:-0}"
check "fork bomb exec ended by its timeout (exit $bomb_rc)" test "$bomb_rc" = 137
left=
for _ in $(seq 1 20); do
        left=$(cat "$SBCG/pids.current" 2>/dev/null)
        [ "${left:-99}" -le "$base_pids" ] && break
        sleep 0.5
done
check "fork bomb cleaned up: sandbox pids.current back to ${left:-?} (was $base_pids)" test "${left:-99}" -le "$base_pids"
h=$(pd exec "$SB" -- echo alive 2>&1)
check "sandbox usable after the fork bomb" test "$h" = alive

# ----------------------------------------------------------------------------- exec timeout

# cgroup.kill on the exec's own sub-group: the backgrounded sleep dies with the foreground one.
for e in "$PC" "$SB"; do
        ecg=$(env_cgroup "$e")
        t0=$(date +%s)
        out=$(pd exec "$e" --timeout 2s -- sh -c 'sleep 100 & sleep 100' 2>&1)
        rc=$?
        dt=$(($(date +%s) - t0))
        info "$e: exec --timeout 2s exited $rc after ${dt}s: $(printf '%s' "$out" | tr '\n' ' ')"
        check "$e: exec --timeout 2s times out (exit $rc, 'timed out' on stderr)" \
                sh -c "[ $rc != 0 ] && printf '%s' \"\$1\" | grep -q 'timed out'" _ "$out"
        check "$e: the timed-out exec returned in ${dt}s (< 60s)" test "$dt" -lt 60
        ps_out=
        for _ in 1 2 3 4 5; do
                ps_out=$(pd exec "$e" -- ps -o pid,args 2>&1)
                printf '%s\n' "$ps_out" | grep -q '[s]leep' || break
                sleep 1
        done
        if printf '%s\n' "$ps_out" | grep -q '[s]leep'; then
                fail "$e: no sleep left inside after the timeout"
                printf '%s\n' "$ps_out" | sed 's/^/     /'
        else
                pass "$e: no sleep left inside after the timeout"
        fi
        # the group of a warm exec slot (only the daemon's waiting helper in it) is expected
        subs=
        for g in $(find "$ecg" -mindepth 1 -maxdepth 1 -type d 2>/dev/null); do
                only_slot=1
                for p in $(cat "$g/cgroup.procs" 2>/dev/null) none; do
                        [ "$p" = none ] && break
                        [ "$(cat /proc/"$p"/comm 2>/dev/null)" = paddockd ] &&
                                [ "$(awk '{print $4}' /proc/"$p"/stat 2>/dev/null)" = "$(systemctl show -p MainPID --value "$UNIT.service")" ] ||
                                only_slot=
                done
                [ -n "$(cat "$g/cgroup.procs" 2>/dev/null)" ] || only_slot=
                [ -n "$only_slot" ] || subs="$subs${g#"$ecg"/} "
        done
        check "$e: no per-exec sub-groups left in its cgroup but a slot's (${subs:-none})" test -z "$subs"
done

# ----------------------------------------------------------------------------- memory limit / OOM

oom0=$(keyed "$SBCG/memory.events" oom_kill)
out=$(pd exec "$SB" -- dd if=/dev/zero of=/dev/shm/fill bs=1M count=200 2>&1)
rc=$?
oom1=$(keyed "$SBCG/memory.events" oom_kill)
info "memory hog: exit $rc, memory.events oom_kill ${oom0:-?} -> ${oom1:-?}, peak $(cat "$SBCG/memory.peak" 2>/dev/null)"
info "memory hog output: $(printf '%s' "$out" | tr '\n' ' ')"
check "memory hog killed by SIGKILL (exit $rc = 137)" test "$rc" = 137
check "memory.events oom_kill went up (${oom0:-?} -> ${oom1:-?})" test "${oom1:-0}" -gt "${oom0:-0}"
k=$(inspect_field "$SB" oom_kills)
check "paddock inspect shows oom_kills >= 1 (got ${k:-none})" test "${k:-0}" -ge 1
out=$(pd exec "$SB" -- rm -f /dev/shm/fill 2>&1)
check "removing the shm file after the OOM kill works" test $? = 0 || printf '%s\n' "$out" | sed 's/^/     /'

# ----------------------------------------------------------------------------- live update

out=$(pd update "$SB" --memory 128M 2>&1)
check "paddock update $SB --memory 128M" test $? = 0 || printf '%s\n' "$out" | sed 's/^/     /'
v=$(cat "$SBCG/memory.max" 2>&1)
check "memory.max now 134217728 (got $v)" test "$v" = 134217728
v=$(pd inspect "$SB" 2>/dev/null | sed -n '/^  "limits": {/,/^  }/s/^    "memory": \([0-9]*\).*/\1/p' | head -1)
check "inspect limits.memory = 134217728 (got ${v:-none})" test "${v:-0}" = 134217728

# ----------------------------------------------------------------------------- stop / start

out=$(pd exec "$PC" -- sh -c 'echo persisted-$$ > /root/smoke.txt; cat /root/smoke.txt' 2>&1)
check "write a file in the computer" test $? = 0
want=$out
out=$(pd stop "$PC" 2>&1)
check "stop computer" test $? = 0 || printf '%s\n' "$out" | sed 's/^/     /'
st=$(inspect_field "$PC" state)
check "computer is stopped (state=$st)" test "$st" = stopped
out=$(pd start "$PC" 2>&1)
check "start computer again" test $? = 0 || printf '%s\n' "$out" | sed 's/^/     /'
st=$(inspect_field "$PC" state)
check "computer is running again (state=$st)" test "$st" = running
got=$(pd exec "$PC" -- cat /root/smoke.txt 2>&1)
check "file persisted across stop/start ('$got')" test -n "$want" -a "$got" = "$want"
PCCG=$(env_cgroup "$PC")
v=$(cat "${PCCG:-/nonexistent}/cpu.max" 2>&1)
check "computer cpu.max still '50000 100000' after restart (got '$v')" test "$v" = "50000 100000"

# ----------------------------------------------------------------------------- daemon crash, re-adoption

pcpid=$(inspect_field "$PC" pid)
sbpid=$(inspect_field "$SB" pid)
main=$(systemctl show -p MainPID --value "$UNIT.service")
info "killing paddockd (MainPID $main) with SIGKILL; computer PID 1 is $pcpid, sandbox PID 1 is $sbpid"
# what the daemon recorded to recognise PID 1 again, next to what /proc says
for e in "$PC" "$SB"; do
        rec=$(python3 -c 'import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute("select pid, pid_start from envs where name=?", (sys.argv[2],)).fetchone())' \
                "$ROOT/paddock.db" "$e" 2>/dev/null)
        p=$([ "$e" = "$PC" ] && echo "$pcpid" || echo "$sbpid")
        info "$e: state db (pid, pid_start) = ${rec:-?}; /proc/$p/stat starttime (field 22) $(awk '{print $22}' /proc/"$p"/stat 2>/dev/null)," \
             "vsize (field 23) $(awk '{print $23}' /proc/"$p"/stat 2>/dev/null)"
done
if [ -n "$main" ] && [ "$main" != 0 ]; then
        kill -9 "$main"
fi
for _ in $(seq 1 60); do
        systemctl is-active --quiet "$UNIT.service" || break
        sleep 0.5
done
info "unit after the kill: $(systemctl show -p ActiveState --value "$UNIT.service")/$(systemctl show -p SubState --value "$UNIT.service")" \
     "result $(systemctl show -p Result --value "$UNIT.service")"
check "computer PID 1 ($pcpid) survives the daemon's SIGKILL" \
        sh -c "[ \"\$(cat /proc/${pcpid:-0}/comm 2>/dev/null)\" = paddock-init ]"
check "sandbox PID 1 ($sbpid) survives the daemon's SIGKILL" \
        sh -c "[ \"\$(cat /proc/${sbpid:-0}/comm 2>/dev/null)\" = paddock-init ]"
info "unit cgroup now: $(cd "$UNIT_CG_SAVED" 2>/dev/null && find . -mindepth 1 -maxdepth 2 -type d | tr '\n' ' ')" \
     "subtree_control '$(cat "$UNIT_CG_SAVED/cgroup.subtree_control" 2>/dev/null)'"

HANDPID=
if start_daemon; then
        pass "paddockd restarted in $UNIT.service after the SIGKILL"
        restarted=unit
        tag=
else
        fail "paddockd restarted in $UNIT.service after the SIGKILL"
        systemctl status "$UNIT.service" --no-pager 2>&1 | tail -15 | sed 's/^/     /'
        restarted=
        # Diagnosis: is it systemd that cannot start the daemon again, or the daemon that cannot
        # re-adopt? Start paddockd by hand in <unit>/<subtree>-daemon, the leaf it moves itself
        # into on v2 (and which it recognises as "own group = the unit's" when started there).
        sub=$(find "$UNIT_CG_SAVED" -mindepth 1 -maxdepth 1 -type d -name 'paddock-*' ! -name '*-daemon' | head -1)
        if [ -n "$sub" ]; then
                leaf=$sub-daemon
                info "diagnosis: starting paddockd by hand in $leaf (not a systemd unit)"
                mkdir -p "$leaf"
                (
                        echo "$BASHPID" > "$leaf/cgroup.procs" || exit 1
                        exec "$BUILD/paddockd" --root "$ROOT" --socket "$SOCK" --uid-registry "$UIDS"
                ) >> "$BASE/paddockd-by-hand.log" 2>&1 < /dev/null &
                HANDPID=$!
                for _ in $(seq 1 240); do
                        pd system >/dev/null 2>&1 && { restarted=hand; break; }
                        kill -0 "$HANDPID" 2>/dev/null || break
                        sleep 0.5
                done
                if [ -n "$restarted" ]; then
                        info "hand-started paddockd (pid $HANDPID) answers; its log:"
                        sed 's/^/     /' "$BASE/paddockd-by-hand.log"
                else
                        info "hand-started paddockd did not come up:"
                        sed 's/^/     /' "$BASE/paddockd-by-hand.log"
                fi
        fi
        tag="[paddockd started by hand in the unit's group] "
fi
if [ -n "$restarted" ]; then
        st=$(inspect_field "$PC" state)
        p=$(inspect_field "$PC" pid)
        check "${tag}computer re-adopted: state=$st, pid $p (was $pcpid)" test "$st" = running -a "$p" = "$pcpid"
        h=$(pd exec "$PC" -- cat /root/smoke.txt 2>&1)
        check "${tag}exec in the re-adopted computer ('$h')" test "$h" = "$want"
        st=$(inspect_field "$SB" state)
        check "${tag}sandbox re-adopted: state=$st" test "$st" = running
        h=$(pd exec "$SB" -- hostname 2>&1)
        check "${tag}exec in the re-adopted sandbox ('$h')" test "$h" = "$SB"
        # the limits are still enforced by the same groups
        v=$(cat "$SBCG/memory.max" 2>&1)
        check "${tag}sandbox memory.max after re-adoption = 134217728 (got $v)" test "$v" = 134217728
        out=$(pd exec "$PC" --timeout 2s -- sh -c 'sleep 100 & sleep 100' 2>&1)
        rc=$?
        ps_out=$(pd exec "$PC" -- ps -o pid,args 2>&1)
        ps_rc=$?
        check "${tag}exec timeout after re-adoption kills both sleeps (exit $rc: $(printf '%s' "$out" | tr '\n' ' '))" \
                sh -c "[ $rc = 137 ] && [ $ps_rc = 0 ] && ! printf '%s\n' \"\$1\" | grep -q '[s]leep'" _ "$ps_out"
fi

# ----------------------------------------------------------------------------- removal

if [ -n "$restarted" ]; then
        out=$(pd rm -f "$SB" "$PC" 2>&1)
        check "${tag}rm -f both environments" test $? = 0 || printf '%s\n' "$out" | sed 's/^/     /'
        left=$(find "$(envs_base)" -mindepth 2 -maxdepth 2 -type d \( -name "env-$SB" -o -name "env-$PC" \) 2>/dev/null)
        check "${tag}their cgroups are gone (${left:-none left})" test -z "$left"
        n=$(pd ls 2>/dev/null | grep -c -e "$SB" -e "$PC")
        check "${tag}paddock ls lists neither" test "$n" = 0
        pcalive=$(cat /proc/"${pcpid:-0}"/comm 2>/dev/null)
        check "${tag}computer PID 1 is gone after rm -f" test "$pcalive" != paddock-init
fi

echo "== $passes passed, $fails failed"
if [ "$fails" -gt 0 ]; then
        journal
fi
cleanup
u=$UNIT_CG_SAVED
if [ -z "${SMOKE_KEEP:-}" ] && [ -n "$u" ] && [ -d "$u" ]; then
        echo "note: $u still exists after cleanup: $(find "$u" -mindepth 1 -type d | tr '\n' ' ')"
fi
[ "$fails" -eq 0 ]

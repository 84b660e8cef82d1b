#!/bin/bash
# Disk I/O limits on cgroup v2 (issue 14 item 3, the v2 half; tests/integration/test_io_limits.py
# is the v1 half on the build machines). Runs INSIDE the guest:
#   tests/vm/run.sh tests/vm/io.sh --fresh     (PADDOCK_VM_KERNEL=stock: on Debian 12's 6.1)
# A plain paddockd in a delegated transient unit on a private root (its btrfs pool file on a
# loop device). Direct I/O inside computers, timed inside them (/proc/uptime around dd), so the
# slow emulated exec path plays no part: a write limit, a read limit and an IOPS limit each
# measured within +-15 %, io.max naming the pool's loop device, and a neighbour writing flat out
# that does not slow a limited reader below its share. PASS/FAIL lines; exit 1 on any FAIL.
set -u
export LC_ALL=C
TREE=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$TREE/build
BASE=/var/tmp/pdk-io
SOCK=$BASE/sock
CG=/sys/fs/cgroup
fails=0
passes=0
pass() { echo "PASS: $*"; passes=$((passes + 1)); }
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
check() { local d=$1; shift; if "$@"; then pass "$d"; else fail "$d"; return 1; fi; }
pd() { timeout 600 "$BUILD/paddock" --socket "$SOCK" "$@"; }
BUSYBOX=$BUILD/busybox
[ -x "$BUSYBOX" ] || BUSYBOX=/bin/busybox
echo "guest: $(uname -r)"
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
UNIT=pdk-io
systemctl stop "$UNIT" 2>/dev/null; systemctl reset-failed "$UNIT" 2>/dev/null
systemd-run --quiet --unit="$UNIT" -p Delegate=yes -p KillMode=process \
        "$BUILD/paddockd" --root "$BASE/root" --socket "$SOCK" --uid-registry "$BASE/uids" \
        --pool-size 3G --no-network
for _ in $(seq 600); do [ -S "$SOCK" ] && timeout 10 "$BUILD/paddock" --socket "$SOCK" system >/dev/null 2>&1 && break; sleep 0.2; done
check "image import" sh -c "timeout 300 $BUILD/paddock --socket $SOCK image import default $BASE/rootfs >/dev/null 2>&1"
scope=$(pd system --json | sed -n 's/.*"cgroup_scope": *"\([^"]*\)".*/\1/p')

# MiB (or operations) per second of one dd inside ENV, timed in there: "COUNT BS rate"
# rate ENV 'dd ...' COUNT -> prints COUNT / seconds
rate() {
        local env=$1 cmd=$2 count=$3 out
        out=$(pd exec "$env" -- sh -c "read a _ </proc/uptime; $cmd 2>/dev/null || exit 1; read b _ </proc/uptime; echo \$a \$b") || return 1
        awk -v c="$count" -v o="$out" 'BEGIN { split(o, t, " "); d = t[2] - t[1]; if (d <= 0) d = 0.01; printf "%.2f", c / d }'
}
near() { # near GOT WANT: within 15 %
        awk -v g="$1" -v w="$2" 'BEGIN { exit !(g >= w * 0.85 && g <= w * 1.15) }'
}
above() { awk -v g="$1" -v w="$2" 'BEGIN { exit !(g > w) }'; }
group_of() { find "$CG$scope" -mindepth 2 -maxdepth 2 -type d -name "env-$1" | head -1; }

check "a computer with --disk-write-bps 10M" pd create w --computer --disk-write-bps 10M
dev=$(pd inspect w | sed -n 's/^    "device": "\([0-9:]*\)",*$/\1/p')
loopdev=$(for b in /sys/block/loop*; do [ "$(cat "$b/loop/backing_file" 2>/dev/null)" = "$BASE/root/pool.img" ] && cat "$b/dev"; done | head -1)
check "the limit is on the pool's loop device ($dev = $loopdev)" test -n "$dev" -a "$dev" = "$loopdev"
wcg=$(group_of w)
check "io.max names it: $(cat "$wcg/io.max" 2>/dev/null)" grep -q "^$dev rbps=max wbps=10485760 riops=max wiops=max" "$wcg/io.max"
r=$(rate w 'dd if=/dev/zero of=/f bs=1M count=40 oflag=direct' 40)
check "write 40M direct at 10M/s: $r MiB/s" near "$r" 10

check "a computer with --disk-read-bps 10M" pd create r --computer --disk-read-bps 10M
r=$(rate r 'dd if=/dev/zero of=/f bs=1M count=40 oflag=direct' 40)
check "its writes are not limited: $r MiB/s" above "$r" 20
r=$(rate r 'dd if=/f of=/dev/null bs=1M iflag=direct' 40)
check "read 40M direct at 10M/s: $r MiB/s" near "$r" 10

check "a computer with --disk-write-iops 100" pd create i --computer --disk-write-iops 100
r=$(rate i 'dd if=/dev/zero of=/f bs=4k count=400 oflag=direct' 400)
check "4k direct writes at 100/s: $r/s" near "$r" 100

check "update: write limit 20M on the running w" pd update w --disk-write-bps 20M
r=$(rate w 'dd if=/dev/zero of=/f bs=1M count=60 oflag=direct conv=notrunc' 60)
check "write at 20M/s after the update: $r MiB/s" near "$r" 20

# a neighbour writing flat out while the limited reader reads
check "a neighbour without limits" pd create n --computer
pd exec n -- sh -c 'n=0; end=$(($(date +%s) + 8)); while [ $(date +%s) -lt $end ]; do dd if=/dev/zero of=/big bs=1M count=50 oflag=direct conv=notrunc 2>/dev/null || exit 1; n=$((n + 1)); done; echo $n' >"$BASE/noisy.out" &
noisy=$!
sleep 1
r=$(rate r 'dd if=/f of=/dev/null bs=1M iflag=direct' 40)
wait "$noisy"
check "limited reads next to a flat-out writer: $r MiB/s (10 +-15 %)" near "$r" 10
n=$(cat "$BASE/noisy.out")
check "the writer wrote flat out meanwhile: $((${n:-0} * 50)) MiB in 8 s" test "${n:-0}" -ge 2

for e in w r i n; do pd rm -f "$e" >/dev/null 2>&1; done
systemctl stop "$UNIT"
[ -z "$scope" ] || systemctl stop "${scope##*/}" 2>/dev/null
grep -o " $BASE/[^ ]*" /proc/self/mountinfo | sort -r | while read -r m; do umount -l "$m" 2>/dev/null; done
echo "io: $passes passed, $fails failed"
if [ "$fails" -gt 0 ]; then journalctl -u "$UNIT" --no-pager -n 30; exit 1; fi

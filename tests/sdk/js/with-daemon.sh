#!/bin/bash
# Run a command against a private paddockd, as tests/integration/conftest.py starts one: its
# own state directory under /var/tmp, socket, uid registry and network namespace, the busybox
# image imported as "base" (the default image). The command gets PADDOCK_SOCKET (and
# PADDOCK_TEST_DIR, a scratch directory). Afterwards every environment is removed, the daemon
# stopped (only the pid started here), the pool unmounted, the namespace and directory removed.
# Usage: with-daemon.sh CMD [ARG...]   (as root; PADDOCK_BUILD selects the binaries)
set -u
repo=$(cd "$(dirname "$0")/../../.." && pwd)
build=${PADDOCK_BUILD:-$repo/build}
for b in paddockd paddock paddock-init; do
	[ -x "$build/$b" ] || { echo "with-daemon.sh: $build/$b is missing (run make)" >&2; exit 2; }
done
tmp=$(mktemp -d /var/tmp/paddock-js-XXXXXX)
chmod 711 "$tmp"
sock=$tmp/paddock.sock
netns=pdk-js-$$
pid=
cli() { "$build/paddock" --socket "$sock" "$@"; }

cleanup() {
	if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
		for e in $(cli ls --json 2>/dev/null | grep -o '"name":"[^"]*"' | sed 's/"name":"//;s/"$//'); do
			cli rm -f "$e" >/dev/null 2>&1 || echo "with-daemon.sh: could not remove $e" >&2
		done
		kill -TERM "$pid" 2>/dev/null
		for _ in $(seq 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
	fi
	if mountpoint -q "$tmp/root/pool" 2>/dev/null; then umount "$tmp/root/pool" || umount -l "$tmp/root/pool"; fi
	# the daemon's (empty) cgroup subtree stays after it stops, as in conftest: remove it
	subtree=$(node -e 'let h=2166136261;for(const b of Buffer.from(process.argv[1]))h=Math.imul(h^b,16777619)>>>0;console.log("paddock-"+h.toString(16).padStart(8,"0"))' "$(realpath "$tmp/root")")
	find /sys/fs/cgroup -maxdepth 5 -type d -name "$subtree" 2>/dev/null | while read -r d; do
		find "$d" -depth -type d -exec rmdir {} + 2>/dev/null
	done
	ip netns delete "$netns" 2>/dev/null
	if ! grep -q " $tmp" /proc/self/mountinfo; then rm -rf --one-file-system "$tmp"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

ip netns add "$netns" || exit 2
# A daemon with the network gateway listens on 127.0.0.1:18443 inside the namespace (the
# tests reach it through a forwarder they start there; PADDOCK_TEST_NETNS names it).
listen=
if "$build/paddockd" --help 2>&1 | grep -q -- '--listen '; then
	ip -n "$netns" link set lo up || exit 2
	listen="--listen 127.0.0.1:18443"
	export PADDOCK_TEST_NETNS=/run/netns/$netns PADDOCK_TEST_GATEWAY=127.0.0.1:18443
fi
"$repo/scripts/busybox-rootfs.sh" "$tmp/image" >/dev/null || exit 2
nsenter --net="/run/netns/$netns" "$build/paddockd" --root "$tmp/root" --socket "$sock" \
	--uid-registry "$tmp/uids" --default-image base $listen </dev/null >"$tmp/paddockd.log" 2>&1 &
pid=$!
for _ in $(seq 300); do
	cli ls >/dev/null 2>&1 && break
	kill -0 "$pid" 2>/dev/null || { echo "paddockd exited during startup:" >&2; cat "$tmp/paddockd.log" >&2; exit 2; }
	sleep 0.05
done
cli image import base "$tmp/image" >/dev/null || { cat "$tmp/paddockd.log" >&2; exit 2; }
mkdir -p "$tmp/scratch"
PADDOCK_SOCKET=$sock PADDOCK_TEST_DIR=$tmp/scratch PADDOCK_BUILD=$build "$@"
rc=$?
if [ $rc -ne 0 ]; then
	echo "--- paddockd log: every line above info (last 60)" >&2
	grep -v ': info: ' "$tmp/paddockd.log" | tail -60 >&2
	echo "--- paddockd log (last 40 lines)" >&2
	tail -40 "$tmp/paddockd.log" >&2
fi
exit $rc

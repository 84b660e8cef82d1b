#!/bin/sh
# Paddock quick start: install dependencies, build, start paddockd, provide the image named
# "default" (what `paddock create` uses without --image), create a computer and a sandbox and
# run something in each. Run it as root (a fresh Debian 12 has no sudo):
#   ./scripts/quickstart.sh                 Debian bookworm (bash, coreutils, python3, curl,
#                                            git, ca-certificates) built by `paddock image
#                                            build` with mmdebstrap (a minute or two)
#   PADDOCK_IMAGE=busybox ./scripts/quickstart.sh
#                                            a busybox image instead (seconds, no downloads)
set -eu
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "run as root (paddockd creates namespaces and cgroups)" >&2; exit 1; }
./scripts/deps.sh
make -j"$(nproc)"

export PADDOCK_SOCKET="${PADDOCK_SOCKET:-/run/paddock/paddock.sock}"
P=./build/paddock
if ! $P system >/dev/null 2>&1; then
        mkdir -p /var/log
        nohup ./build/paddockd >>/var/log/paddockd.log 2>&1 &
        echo "paddockd started (pid $!, log /var/log/paddockd.log, socket $PADDOCK_SOCKET)"
        for _ in $(seq 50); do $P system >/dev/null 2>&1 && break; sleep 0.1; done
fi

if ! $P image ls | grep -q '^default '; then
        if [ "${PADDOCK_IMAGE:-debian}" = busybox ]; then
                work=$(mktemp -d /var/tmp/paddock-image.XXXXXX)
                trap 'rm -rf "$work"' EXIT
                ./scripts/busybox-rootfs.sh "$work/rootfs"
                $P image import default "$work/rootfs"
        else
                echo "building the default image: Debian bookworm with mmdebstrap (a minute or two)..."
                $P image build default --from debian:bookworm \
                        --packages bash,coreutils,python3,curl,git,ca-certificates,procps
        fi
fi

$P inspect agent1 >/dev/null 2>&1 || $P create agent1 --computer --cpus 1 --memory 512M --pids 256
$P inspect job1 >/dev/null 2>&1 || $P create job1 --sandbox --memory 256M --ttl 10m
echo "--- paddock exec agent1 -- sh -c 'echo hello > /root/note; cat /root/note'"
$P exec agent1 -- sh -c 'echo hello > /root/note; cat /root/note'
echo "--- paddock exec job1 -- sh -c 'id; grep -E \"Cap|Seccomp|NoNewPrivs\" /proc/self/status'"
$P exec job1 -- sh -c 'id; grep -E "Cap|Seccomp|NoNewPrivs" /proc/self/status'
echo "--- paddock ls"
$P ls
echo
echo "Paddock is running. Try: export PATH=\$PWD/build:\$PATH; paddock exec agent1 -- sh"

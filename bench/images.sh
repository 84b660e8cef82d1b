#!/bin/bash
# Image benchmark: import, export and pull of a ~300 MB image. Run as root:
#   bench/images.sh                 (BENCH_IMAGE_RUNS=5 runs per row, medians)
# It makes a ~300 MB tree (the busybox rootfs, 130 MB of random data, 130 MB of compressible
# text, 6000 small files), starts a private paddockd and a docker-registry in a network
# namespace of its own, and times, through the CLI, end to end:
#   import  .tar / .tar.zst    upload + unpack in the helper + rename
#   export  .tar / .tar.zst    helper packs, CLI writes the file
#   pull    3 gzip layers from the registry on loopback: download + sha256 + unpack
# and, as a peer for pull, `skopeo copy docker://… oci:…` + `umoci unpack` of the same image.
# Measures and reports, never asserts. Cleans up everything it made on exit.
set -Eeuo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
build=${PADDOCK_BUILD:-$repo/build}
runs=${BENCH_IMAGE_RUNS:-5}
py=/usr/bin/python3
[ "$(id -u)" = 0 ] || { echo "run as root" >&2; exit 1; }
for t in docker-registry skopeo umoci zstd; do
        command -v $t >/dev/null || { echo "bench: $t is missing (scripts/deps.sh --test)" >&2; exit 1; }
done

work=$(mktemp -d /var/tmp/paddock-bench-img.XXXXXX)
ns=pdk-bench-img-$$
pids=()
cleanup() {
        for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
        ip netns delete "$ns" 2>/dev/null || true
        rm -rf "$work"
}
trap cleanup EXIT
ip netns add "$ns"
ip -n "$ns" link set lo up
in_ns() { nsenter --net="/run/netns/$ns" "$@"; }

echo "== making a ~300 MB tree" >&2
tree=$work/tree
"$repo/scripts/busybox-rootfs.sh" "$tree" >/dev/null
$py - "$tree" <<'PY'
import os, random, sys
root = sys.argv[1]
rnd = random.Random(1)
os.makedirs(root + "/data/random"); os.makedirs(root + "/data/text")
for i in range(130):
    with open("%s/data/random/%03d.bin" % (root, i), "wb") as f:
        f.write(os.urandom(1 << 20))
words = [("w%d" % i).encode() for i in range(5000)]
for i in range(130):
    with open("%s/data/text/%03d.txt" % (root, i), "wb") as f:
        f.write(b" ".join(rnd.choice(words) for _ in range(180000))[: 1 << 20])
for d in range(60):
    os.makedirs("%s/usr/share/many/%02d" % (root, d))
    for i in range(100):
        with open("%s/usr/share/many/%02d/%03d" % (root, d, i), "wb") as f:
            f.write(rnd.randbytes(rnd.randint(100, 8000)))
PY
size=$(du -sm "$tree" | cut -f1)
tar -C "$tree" --numeric-owner -cf "$work/img.tar" .
zstd -q -T0 "$work/img.tar" -o "$work/img.tar.zst"

echo "== OCI layout (3 layers) and registry" >&2
L=$work/layout
umoci init --layout "$L" >/dev/null
umoci new --image "$L:b" >/dev/null
umoci unpack --image "$L:b" "$work/bundle" >/dev/null
cp -a "$tree/." "$work/bundle/rootfs/"
mv "$work/bundle/rootfs/data" "$work/data.hold"
umoci repack --image "$L:l1" "$work/bundle" >/dev/null
rm -rf "$work/bundle"
umoci unpack --image "$L:l1" "$work/bundle" >/dev/null
mkdir "$work/bundle/rootfs/data"; mv "$work/data.hold/random" "$work/bundle/rootfs/data/"
umoci repack --image "$L:l2" "$work/bundle" >/dev/null
rm -rf "$work/bundle"
umoci unpack --image "$L:l2" "$work/bundle" >/dev/null
mv "$work/data.hold/text" "$work/bundle/rootfs/data/"
umoci repack --image "$L:v1" "$work/bundle" >/dev/null
rm -rf "$work/bundle" "$work/data.hold"
cat > "$work/reg.yml" <<YML
version: 0.1
log:
  level: error
storage:
  filesystem:
    rootdirectory: $work/regdata
http:
  addr: 127.0.0.1:5000
YML
in_ns docker-registry serve "$work/reg.yml" >"$work/reg.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do in_ns curl -s -o /dev/null http://127.0.0.1:5000/v2/ && break; sleep 0.1; done
in_ns skopeo copy --quiet --dest-tls-verify=false "oci:$L:v1" docker://127.0.0.1:5000/bench/big:v1

sock=$work/paddock.sock
in_ns "$build/paddockd" --root "$work/root" --socket "$sock" --uid-registry "$work/uids" \
        --no-network >"$work/paddockd.log" 2>&1 &
pids+=($!)
P() { "$build/paddock" --socket "$sock" "$@"; }
for _ in $(seq 100); do P system >/dev/null 2>&1 && break; sleep 0.05; done

declare -A samples
t() { # name command...
        local s e
        s=$(date +%s%N); "${@:2}" >/dev/null 2>&1 || { echo "bench: $1 failed" >&2; exit 1; }; e=$(date +%s%N)
        samples[$1]+="$(( (e - s) / 1000 )) "
}
for i in $(seq "$runs"); do
        echo "== round $i/$runs" >&2
        t "import .tar" P image import "imp$i" "$work/img.tar"
        t "import .tar.zst" P image import "impz$i" "$work/img.tar.zst"
        t "export .tar" P image export "imp$i" "$work/out.tar"
        t "export .tar.zst" P image export "imp$i" "$work/out.tar.zst"
        t "pull (3 gzip layers)" P image pull -q --insecure 127.0.0.1:5000/bench/big:v1 --name "pull$i"
        t "peer: skopeo copy + umoci unpack" in_ns sh -c "skopeo copy --quiet --src-tls-verify=false docker://127.0.0.1:5000/bench/big:v1 oci:$work/peer:v1 && umoci unpack --image $work/peer:v1 $work/peer-bundle"
        rm -rf "$work/peer" "$work/peer-bundle" "$work/out.tar" "$work/out.tar.zst"
        P image rm "imp$i" "impz$i" "pull$i" >/dev/null
done

tar_mb=$(( $(stat -c %s "$work/img.tar") / 1000000 ))
zst_mb=$(( $(stat -c %s "$work/img.tar.zst") / 1000000 ))
echo
echo "Image benchmark ($(date -u +%Y-%m-%d), $(nproc) cores, kernel $(uname -r | cut -d- -f1); tree ${size} MiB, tar ${tar_mb} MB, tar.zst ${zst_mb} MB; $runs runs, medians)"
echo
echo "| measurement | median | min | max | throughput |"
echo "|---|---|---|---|---|"
for k in "import .tar" "import .tar.zst" "export .tar" "export .tar.zst" "pull (3 gzip layers)" "peer: skopeo copy + umoci unpack"; do
        $py - "$k" "$size" ${samples[$k]} <<'PY'
import statistics, sys
name, mib, xs = sys.argv[1], int(sys.argv[2]), sorted(int(x) / 1e6 for x in sys.argv[3:])
m = statistics.median(xs)
print("| %s | %.2f s | %.2f s | %.2f s | %.0f MiB/s |" % (name, m, xs[0], xs[-1], mib / m))
PY
done

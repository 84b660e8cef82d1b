#!/bin/bash
# Paddock benchmark suite. Run as root from anywhere:
#   bench/run.sh                      (N=40 runs per measurement)
#   BENCH_RUNS=10 bench/run.sh        (quicker)
# Environment:
#   PADDOCK_BUILD  directory with paddockd, paddock, paddock-init (default: <repo>/build)
#   BENCH_RUNS     runs per measurement (default 40); BENCH_WARMUP warm-up runs (default 2)
#   BENCH_IDLE     idle sandboxes for the memory measurement (default 100)
#   BENCH_MODE     "interleaved" (default): every time row runs in blocks of BENCH_BLOCK (5)
#                  after one warm-up run, blocks of all rows round-robin in a shuffled order,
#                  CLI and peer commands timed with a Python subprocess.run loop; load that comes
#                  and goes on a shared machine then skews all rows alike.
#                  "sequential": one row after the other, CLI and peer rows with hyperfine
#                  (or, with BENCH_TIMER=python or without hyperfine, a subprocess.run loop).
#                  Either way the CLI row and the peer rows are timed by the same method.
#   BENCH_RUNS_BIG runs of the 100 MB file rows (default 10)
#   BENCH_RESULTS  where to write the Markdown table (default: bench/results.md)
#
# It starts a private paddockd (own --root under /var/tmp, own socket and uid registry, in a
# network namespace of its own), imports a busybox image, measures, prints a Markdown table and
# writes it to bench/results.md. It measures and reports; it never asserts. Installs nothing:
# bench/deps.sh installs the peers (bubblewrap, crun, hyperfine, busybox-static).
# Everything it starts is cleaned up at the end or on error: environments, the daemon (by its
# pid), the network namespace, crun containers, temporary directories.
set -Eeuo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
build=${PADDOCK_BUILD:-$repo/build}
export BENCH_RUNS=${BENCH_RUNS:-40}
export BENCH_WARMUP=${BENCH_WARMUP:-2}
runs_big=${BENCH_RUNS_BIG:-10}
files_disk=512M
files_memory=1G
idle_count=${BENCH_IDLE:-100}
results=${BENCH_RESULTS:-$here/results.md}
mode=${BENCH_MODE:-interleaved}
block=${BENCH_BLOCK:-5}
py=/usr/bin/python3

say() { printf '== %s\n' "$*" >&2; }
die() { printf 'bench: %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "run as root (paddockd, network namespaces and the peers need it)"
[ -x "$py" ] || die "$py is missing (bench/deps.sh installs python3)"
for b in paddockd paddock paddock-init; do
        [ -x "$build/$b" ] || die "$build/$b is missing: run 'make' (or 'make BUILD=DIR' and set PADDOCK_BUILD=DIR)"
done
for t in ip nsenter unshare timeout; do
        command -v "$t" >/dev/null || die "$t is missing (iproute2 / util-linux / coreutils)"
done
[ -x /bin/busybox ] || die "/bin/busybox is missing: bench/deps.sh installs busybox-static"

# Peers: report what is missing, measure what is there.
missing=()
command -v bwrap >/dev/null || missing+=(bwrap)
command -v crun >/dev/null || missing+=(crun)
command -v hyperfine >/dev/null || missing+=(hyperfine)
if [ ${#missing[@]} -gt 0 ]; then
        say "missing peers/tools: ${missing[*]} (install them with bench/deps.sh)"
        if [ "$mode" = sequential ] && [[ " ${missing[*]} " == *" hyperfine "* ]]; then
                say "no hyperfine: CLI and peer rows are timed with a Python subprocess loop instead"
        fi
fi
case $mode in
interleaved)
        timer="a Python subprocess.run loop (time.perf_counter), interleaved with all other rows" ;;
sequential)
        if command -v hyperfine >/dev/null && [ "${BENCH_TIMER:-}" != python ]; then
                timer="hyperfine --shell=none"
        else
                timer="a Python subprocess.run loop (time.perf_counter)"
        fi ;;
*) die "BENCH_MODE must be interleaved or sequential" ;;
esac

# How busy the host was just before measuring (other work skews every row).
snap=$(top -b -n 2 -d 1 -w 200 2>/dev/null | awk '
        /^top -/ {f++}
        f == 2 && /^%Cpu/ {for (i = 2; i <= NF; i++) if ($i ~ /^id,?$/) idle = $(i - 1)}
        f == 2 && /^ *PID/ {p = 1; next}
        f == 2 && p && $9 + 0 > 5 && n < 3 {top = top (n++ ? ", " : "") $12 " " $9 "%"}
        END {printf "%s|%s", idle, top}')
cpu_idle=${snap%%|*}
top3=${snap#*|}
loadavg="$(cut -d' ' -f1-3 /proc/loadavg); CPU ${cpu_idle:-?}% idle in the second before${top3:+ (busiest: $top3)}"

# ------------------------------------------------------------------ state and cleanup
work=$(mktemp -d /var/tmp/paddock-bench.XXXXXX)
chmod 755 "$work"
netns=paddock-bench-$$
sock=$work/paddock.sock
daemon_pid=
netns_made=
export BENCH_HOST_MNTNS
BENCH_HOST_MNTNS=$(readlink /proc/self/ns/mnt)

# Our daemon's cgroup subtree: the cgroup directories it holds open (paddock-<hash of --root>).
record_cgroups() {
        local fd l
        for fd in /proc/"$daemon_pid"/fd/*; do
                l=$(readlink "$fd" 2>/dev/null) || continue
                case $l in /sys/fs/cgroup/*/paddock-*) echo "$l" >>"$work/cgroups.txt" ;; esac
        done
}

cleanup() {
        local rc=$?
        trap - EXIT INT TERM ERR
        set +e
        say "cleaning up"
        if [ -n "$daemon_pid" ] && kill -0 "$daemon_pid" 2>/dev/null && [ -S "$sock" ]; then
                timeout 300 $py "$here/bench.py" destroy-all --socket "$sock" \
                        --prefix bench- 2>&1 | sed 's/^/   /' >&2
        fi
        if [ -d "$work/crun/state" ]; then
                timeout 60 unshare --mount --propagation private "$here/crun-peer.sh" cleanup "$work"
        fi
        if [ -n "$daemon_pid" ]; then
                record_cgroups
                kill -TERM "$daemon_pid" 2>/dev/null
                for _ in $(seq 100); do kill -0 "$daemon_pid" 2>/dev/null || break; sleep 0.1; done
                if kill -0 "$daemon_pid" 2>/dev/null; then
                        say "paddockd $daemon_pid did not stop on SIGTERM; SIGKILL"
                        kill -KILL "$daemon_pid" 2>/dev/null
                fi
                wait "$daemon_pid" 2>/dev/null
        fi
        # Anything of ours still in the daemon's cgroup subtree: kill by pid, remove the cgroups.
        if [ -s "$work/cgroups.txt" ]; then
                sort -u "$work/cgroups.txt" | while read -r cg; do
                        case $(basename "$cg") in paddock-*) ;; *) continue ;; esac
                        [ -d "$cg" ] || continue
                        find "$cg" -name cgroup.procs -exec cat {} + 2>/dev/null | sort -u |
                                while read -r pid; do
                                        [ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null &&
                                                say "killed leftover pid $pid in $cg"
                                done
                        sleep 0.2
                        find "$cg" -depth -type d -exec rmdir {} \; 2>/dev/null
                        [ -d "$cg" ] && say "could not remove cgroup $cg"
                done
        fi
        # Leftover mounts below our work dir (deepest first).
        awk -v w="$work" '$5 == w || index($5, w "/") == 1 {print $5}' /proc/self/mountinfo |
                sort -r | while read -r m; do umount -l "$m" 2>/dev/null; done
        if [ -n "$netns_made" ]; then
                ip netns delete "$netns" 2>/dev/null
        fi
        if awk -v w="$work" 'index($5, w) == 1 {f=1} END {exit !f}' /proc/self/mountinfo; then
                say "mounts remain below $work; not removing it"
        else
                rm -rf --one-file-system "$work"
        fi
        exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ------------------------------------------------------------------ rootfs, daemon, image
say "busybox rootfs"
sh "$repo/scripts/busybox-rootfs.sh" "$work/rootfs" >/dev/null

say "network namespace $netns and paddockd"
ip netns add "$netns"
netns_made=1
mkdir -p "$work/root" "$work/uids"
# nsenter and setsid execute in place (no fork: a background job of a script is no process
# group leader), so $! is paddockd's own pid. setsid keeps a Ctrl-C or a signal to our process
# group away from paddockd: cleanup stops it, after destroying the environments.
nsenter --net="/run/netns/$netns" setsid "$build/paddockd" --root "$work/root" --socket "$sock" \
        --uid-registry "$work/uids" --init "$build/paddock-init" --default-image base >"$work/paddockd.log" 2>&1 &
daemon_pid=$!
for _ in $(seq 100); do
        [ -S "$sock" ] && break
        kill -0 "$daemon_pid" 2>/dev/null || { cat "$work/paddockd.log" >&2; die "paddockd exited"; }
        sleep 0.1
done
[ -S "$sock" ] || die "paddockd did not create $sock within 10 s"
[ "$(readlink /proc/$daemon_pid/exe)" = "$(readlink -f "$build/paddockd")" ] ||
        die "pid $daemon_pid is not paddockd"
record_cgroups
P=("$build/paddock" --socket "$sock")
"${P[@]}" image import base "$work/rootfs" >/dev/null
sysjson=$("${P[@]}" --json system)
field() { $py -c 'import json,sys; v=json.load(sys.stdin); exec("for k in sys.argv[1].split(\".\"): v=v[k]"); print(v)' "$1"; }
paddock_version=$(field version <<<"$sysjson")
daemon_cg=$(field cgroup_mode <<<"$sysjson")
daemon_net=$(field network <<<"$sysjson" 2>/dev/null) || daemon_net="?"
if [ "$daemon_net" != routed ]; then
        say "paddockd says network: $daemon_net (not routed): row (e) measures a sandbox without networking; see $work/paddockd.log"
        grep -i network "$work/paddockd.log" >&2 || true
fi
if [ "$(stat -f -c %T /sys/fs/cgroup)" = cgroup2fs ]; then
        host_cg="v2 (unified)"
elif [ "$(stat -f -c %T /sys/fs/cgroup/unified 2>/dev/null)" = cgroup2fs ]; then
        host_cg="v1 hybrid (v1 controllers, cgroup2 at /sys/fs/cgroup/unified)"
else
        host_cg="v1 (legacy)"
fi
commit=$(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)
[ -n "$(git -C "$repo" status --porcelain -- src 2>/dev/null)" ] && commit="$commit + uncommitted src changes"
commit="$commit; binaries from $build built $(date -u -r "$build/paddockd" '+%H:%M UTC')"
[ -n "$(find "$repo/src" -newer "$build/paddockd" -type f 2>/dev/null | head -1)" ] &&
        commit="$commit, src/ has changed since"
say "paddockd $paddock_version (pid $daemon_pid), cgroups: $daemon_cg, network: $daemon_net; timing CLI/peers with $timer"


# ------------------------------------------------------------------ what is measured against
"${P[@]}" create bench-exec --sandbox >/dev/null
envpid=$("${P[@]}" --json inspect bench-exec | field pid) || envpid=
if ! [ "${envpid:-0}" -gt 1 ] 2>/dev/null; then
        say "no pid for bench-exec; skipping the nsenter peer"
        envpid=0
fi
crun_ok=
if command -v crun >/dev/null; then
        mkdir -p "$work/crun/run" "$work/crun/exec" "$work/crun/state"
        (cd "$work/crun/run" && crun spec >/dev/null)
        cp "$work/crun/run/config.json" "$work/crun/exec/config.json"
        for b in run exec; do
                $py - "$work/crun/$b/config.json" "$work/rootfs" "$b" <<'PY'
import json, sys
path, rootfs, kind = sys.argv[1:4]
c = json.load(open(path))
c["root"] = {"path": rootfs, "readonly": True}
c["process"]["terminal"] = False
c["process"]["args"] = ["/bin/true"] if kind == "run" else ["/bin/sleep", "1000"]
c["linux"]["namespaces"] = [{"type": t} for t in ("pid", "mount", "ipc", "uts", "network")]
if kind == "exec":
    # (f): a tmpfs /workspace like a sandbox's, for the `crun exec ... cat` file peers.
    c["mounts"].append({"destination": "/workspace", "type": "tmpfs", "source": "tmpfs",
                        "options": ["nosuid", "nodev", "mode=1777", "size=512m"]})
json.dump(c, open(path, "w"), indent=1)
PY
        done
        # The `sleep 1000` container that `crun exec` goes into.
        unshare --mount --propagation private "$here/crun-peer.sh" start "$work" ||
                say "crun: could not start the container for crun exec"
        crun_ok=1
fi
NOHYBRID=(unshare --mount --propagation private "$here/crun-peer.sh" run)

if [ "$mode" = interleaved ]; then
        # ---------------------------------------------------------- all time rows, interleaved
        say "(a) (b) (c) (e) (f) and peers, interleaved: $BENCH_RUNS runs each ($runs_big for 100 MB files) in blocks of $block"
        args=(--socket "$sock" --work "$work" --runs "$BENCH_RUNS" --block "$block"
              --cli "$build/paddock" --env bench-exec --envpid "$envpid"
              --files-env bench-files --files-disk "$files_disk" --files-memory "$files_memory"
              --runs-big "$runs_big")
        command -v bwrap >/dev/null && args+=(--rootfs "$work/rootfs")
        # BENCH_ROWS=a_keepalive,e_net: only the rows whose names start so (e.g. just (e)).
        [ -n "${BENCH_ROWS:-}" ] && args+=(--rows "$BENCH_ROWS")
        runner=()
        if [ -n "$crun_ok" ]; then
                args+=(--crun-state "$work/crun/state" --crun-run-bundle "$work/crun/run")
                [ -s "$work/crun/exec-id" ] && args+=(--crun-exec-id "$(cat "$work/crun/exec-id")")
                # crun needs the cgroup2 mount hidden; the rest does not mind.
                runner=("${NOHYBRID[@]}")
        fi
        "${runner[@]}" $py "$here/bench.py" suite "${args[@]}" || say "suite failed"
else
        # ---------------------------------------------------------- one row after the other
        R=(--runs "$BENCH_RUNS" --warmup "$BENCH_WARMUP")
        say "(a) create → exec true → destroy, raw HTTP, keep-alive"
        $py "$here/bench.py" http-cycle --socket "$sock" "${R[@]}" --prefix bench-a- \
                --out "$work/a_keepalive.json" || say "(a) failed"
        say "(a) same, new connection per request"
        $py "$here/bench.py" http-cycle --socket "$sock" "${R[@]}" --prefix bench-an- \
                --new-connection --out "$work/a_newconn.json" || say "(a) new-connection variant failed"
        say "(e) the same cycle with networking, keep-alive"
        $py "$here/bench.py" http-cycle --socket "$sock" "${R[@]}" --prefix bench-e- \
                --network open --out "$work/e_net_keepalive.json" || say "(e) failed"
        say "(b) paddock exec bench-exec -- true (CLI)"
        "$here/timecmd.sh" "$work/b_cli_exec.json" -- "$build/paddock" --socket "$sock" exec bench-exec -- true
        say "(b) paddock --version (CLI start alone)"
        "$here/timecmd.sh" "$work/b_cli_start.json" -- "$build/paddock" --version
        say "(c) exec true via raw HTTP, keep-alive"
        $py "$here/bench.py" http-exec --socket "$sock" "${R[@]}" --env bench-exec \
                --out "$work/c_keepalive.json" || say "(c) failed"
        say "(c) same, new connection per request"
        $py "$here/bench.py" http-exec --socket "$sock" "${R[@]}" --env bench-exec --new-connection \
                --out "$work/c_newconn.json" || say "(c) new-connection variant failed"
        say "(c) same, keep-alive, 100 ms idle between runs"
        $py "$here/bench.py" http-exec --socket "$sock" "${R[@]}" --env bench-exec --gap 0.1 \
                --out "$work/c_gap.json" || say "(c) variant with idle gaps failed"
        if [ "$envpid" -gt 1 ]; then
                say "peer: nsenter -t $envpid -a /bin/true (the sandbox's PID 1)"
                "$here/timecmd.sh" "$work/peer_nsenter.json" -- nsenter -t "$envpid" -a /bin/true
        fi
        say "baseline: spawning /bin/true on the host (the timer's own floor)"
        "$here/timecmd.sh" "$work/baseline_true.json" -- /bin/true
        if command -v bwrap >/dev/null; then
                say "peer: bwrap cold start"
                "$here/timecmd.sh" "$work/peer_bwrap.json" -- bwrap --unshare-all --die-with-parent \
                        --ro-bind "$work/rootfs" / --proc /proc --dev /dev /bin/true
        fi
        if [ -n "$crun_ok" ]; then
                say "peer: crun cold start and crun exec (private mount namespace, cgroup2 mount hidden)"
                unshare --mount --propagation private "$here/crun-peer.sh" bench "$work" ||
                        say "crun peer failed"
        fi
        say "(f) files API and its peers (interleaved among themselves)"
        fargs=(--socket "$sock" --work "$work" --runs "$BENCH_RUNS" --block "$block"
               --cli "$build/paddock" --env bench-exec --rows f_ --files-env bench-files
               --files-disk "$files_disk" --files-memory "$files_memory" --runs-big "$runs_big")
        frunner=()
        if [ -n "$crun_ok" ] && [ -s "$work/crun/exec-id" ]; then
                fargs+=(--crun-state "$work/crun/state" --crun-exec-id "$(cat "$work/crun/exec-id")")
                frunner=("${NOHYBRID[@]}")
        fi
        "${frunner[@]}" $py "$here/bench.py" suite "${fargs[@]}" || say "(f) failed"
fi
"${P[@]}" rm -f bench-exec >/dev/null || say "rm -f bench-exec failed"
if [ -n "$crun_ok" ]; then
        unshare --mount --propagation private "$here/crun-peer.sh" cleanup "$work"
fi

# ------------------------------------------------------------------ (d) memory per idle env
if [ -z "${BENCH_ROWS:-}" ] || [[ ",$BENCH_ROWS" == *",d"* ]]; then
        say "(d) $idle_count idle sandboxes: memory"
        $py "$here/bench.py" memory --socket "$sock" --count "$idle_count" --daemon-pid "$daemon_pid" \
                --prefix bench-d- --out "$work/d_memory.json" || say "(d) failed"
fi

# ------------------------------------------------------------------ report
if [ "$mode" = interleaved ]; then
        timing="median and p90 (nearest rank) of $BENCH_RUNS runs per row ($runs_big for the 100 MB file rows). All time rows interleaved: rounds in which every row runs one block (1 warm-up run, then $block timed runs back to back; the 100 MB rows $(( (runs_big + (BENCH_RUNS + block - 1) / block - 1) / ((BENCH_RUNS + block - 1) / block) )) per round), in a shuffled order each round, so load that comes and goes hits all rows alike. Raw-HTTP rows timed in-process (Python time.perf_counter, http.client over the unix socket); CLI and peer rows with $timer"
else
        timer_short=$timer
        timing="median and p90 (nearest rank) of $BENCH_RUNS runs per row after $BENCH_WARMUP warm-up runs, one row after the other (the (f) file rows interleaved among themselves, $runs_big runs for 100 MB). Raw-HTTP rows timed in-process (Python time.perf_counter, http.client over the unix socket); CLI and peer rows with $timer_short"
fi
peer_versions="$(command -v bwrap >/dev/null && bwrap --version || echo 'bwrap missing'); $(command -v crun >/dev/null && crun --version | head -1 || echo 'crun missing'); $(nsenter --version)"
if [ "$mode" = sequential ]; then
        peer_versions="$peer_versions; $(command -v hyperfine >/dev/null && hyperfine --version || echo 'hyperfine missing')"
fi
missing_csv=$(IFS=,; echo "${missing[*]}")
echo
$py "$here/bench.py" report --work "$work" --md "$results" --cgroup-mode "$host_cg (paddockd: $daemon_cg)" \
        --version "$paddock_version" --commit "$commit" --peer-versions "$peer_versions" \
        --missing "$missing_csv" --loadavg "$loadavg" --runs "$BENCH_RUNS" --warmup "$BENCH_WARMUP" \
        --timing "$timing" --daemon-network "$daemon_net" --files-disk "$files_disk" \
        --files-memory "$files_memory"
echo
say "written to $results"

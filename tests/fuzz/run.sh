#!/bin/sh
# Run libFuzzer targets one after another: run.sh SECONDS WORKDIR TARGET...
# Each target starts from a copy of its seeds (tests/fuzz/corpus/NAME) in WORKDIR/corpus/NAME,
# which it grows (the repository's corpus is never written), with tests/fuzz/NAME.dict as its
# libFuzzer dictionary if there is one; a crashing input is saved as
# WORKDIR/artifacts/NAME-crash-*. Exits 1 if any target failed, after running them all.
set -u
seconds=$1 work=$2
shift 2
seeds="$(dirname "$0")/corpus"
mkdir -p "$work/corpus" "$work/artifacts" "$work/logs" "$work/scratch"
work=$(cd "$work" && pwd)
# fuzz_tar writes only beneath these (Landlock): its scratch trees and the work directory.
# On a kernel without Landlock it says "fuzz_tar: SKIP: ..." and stops (reported as skipped
# here) unless PADDOCK_FUZZ_UNCONFINED=1.
export PADDOCK_FUZZ_SCRATCH="$work/scratch" PADDOCK_FUZZ_WORK="$work"
failed=""
for bin in "$@"; do
        name=$(basename "$bin")
        mkdir -p "$work/corpus/$name"
        [ -d "$seeds/$name" ] && cp -n "$seeds/$name"/* "$work/corpus/$name/" 2>/dev/null
        log="$work/logs/$name.log"
        start=$(date +%s)
        dict=""
        [ -f "$(dirname "$0")/$name.dict" ] && dict="-dict=$(dirname "$0")/$name.dict"
        "$bin" $dict -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
                -print_final_stats=1 -artifact_prefix="$work/artifacts/$name-" \
                "$work/corpus/$name" >"$log" 2>&1
        rc=$?
        skip=$(sed -n "s/^$name: SKIP: //p" "$log" | head -n1)
        if [ -n "$skip" ] && [ "$rc" = 0 ]; then
                echo "  $name: SKIPPED: $skip"
                continue
        fi
        runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n1)
        cov=$(grep -o 'cov: [0-9]*' "$log" | tail -n1)
        echo "  $name: $((  $(date +%s) - start  )) s, ${runs:-?} runs, ${cov:-cov: ?}, corpus $(ls "$work/corpus/$name" | wc -l)"
        if [ "$rc" != 0 ]; then
                echo "  $name FAILED (exit $rc); log $log:" >&2
                grep -A40 -m1 -E '^==[0-9]+==|runtime error|invariant broken|^SUMMARY' "$log" >&2 \
                        || tail -n 40 "$log" >&2
                ls "$work/artifacts/$name"-* 2>/dev/null >&2
                failed="$failed $name"
        fi
done
[ -z "$failed" ] || { echo "fuzz: failed:$failed" >&2; exit 1; }

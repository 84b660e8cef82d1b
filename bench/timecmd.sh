#!/bin/bash
# timecmd.sh OUT.json -- CMD [ARG...]
# Time a command BENCH_RUNS times (after BENCH_WARMUP warm-up runs) and write the samples as
# JSON (bench.py's format). Uses hyperfine (--shell=none) when it is installed and
# BENCH_TIMER is not "python"; otherwise a Python loop of subprocess.run timed with
# time.perf_counter. Every CLI and peer row of bench/run.sh goes through here, so they are all
# timed the same way. Never fails the caller: a failed command gives a result with no samples.
set -u
here=$(cd "$(dirname "$0")" && pwd)
out=$1; shift
[ "${1:-}" = "--" ] && shift
runs=${BENCH_RUNS:-40}
warmup=${BENCH_WARMUP:-2}
py=/usr/bin/python3
log=${out%.json}.log
if [ "${BENCH_TIMER:-}" != python ] && command -v hyperfine >/dev/null 2>&1; then
        # hyperfine --shell=none splits the command line on spaces: quote nothing.
        timeout 1800 hyperfine --shell=none --style basic --runs "$runs" --warmup "$warmup" \
                --ignore-failure --export-json "${out%.json}.hyperfine.json" -- "$*" >"$log" 2>&1
        $py "$here/bench.py" from-hyperfine --json "${out%.json}.hyperfine.json" --out "$out"
else
        timeout 1800 $py "$here/bench.py" cmd-time --out "$out" --runs "$runs" --warmup "$warmup" \
                -- "$@" >"$log" 2>&1
fi
[ -s "$out" ] || echo '{"kind":"cmd","n":0,"errors":["timer did not finish"],"error_count":1}' >"$out"
exit 0

#!/bin/sh
# Runs the C unit test programs given as arguments and sums their "N passed, N failed,
# N skipped" lines. A program that exits 77 could not run here at all (it says why); it is
# counted as skipped, never as passed. Exit status: 1 if any test failed or a program crashed.
set -u
passed=0 failed=0 skipped=0 broken=""
for t in "$@"; do
        echo "== $t"
        out=$("$t" 2>&1); rc=$?
        printf '%s\n' "$out"
        line=$(printf '%s\n' "$out" | grep -E '^[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$' | tail -n 1)
        if [ -z "$line" ]; then
                broken="$broken $t(exit $rc, no summary)"
                continue
        fi
        set -- $line
        passed=$((passed + $1)) failed=$((failed + $3)) skipped=$((skipped + $5))
        case $rc in
        0|77) ;;
        *) [ "$3" -gt 0 ] || broken="$broken $t(exit $rc)" ;;
        esac
done
echo "unit: $passed passed, $failed failed, $skipped skipped"
if [ -n "$broken" ]; then
        echo "unit: programs that crashed or printed no summary:$broken"
        exit 1
fi
[ "$failed" -eq 0 ]

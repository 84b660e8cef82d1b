#!/bin/sh
# The parent's time per fork for a process with libc only, one linked like paddockd, and the
# same with libcurl linked as paddockd was before src/lib/curl_lazy.c (bench/fork_cost.c).
# Needs the build dependencies (scripts/deps.sh). Prints; asserts nothing.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
daemon_libs="$(pkg-config --libs libseccomp libcap sqlite3 jansson libarchive libmnl libnftables nettle libmicrohttpd gnutls) -lwslay"
cc -O2 -o "$tmp/libc_only" "$here/fork_cost.c"
cc -O2 -o "$tmp/paddockd_libs" "$here/fork_cost.c" -Wl,--no-as-needed $daemon_libs
cc -O2 -o "$tmp/with_libcurl" "$here/fork_cost.c" -Wl,--no-as-needed $daemon_libs $(pkg-config --libs libcurl)
for flags in 0 20000000; do
	[ "$flags" = 0 ] && echo "plain clone3:" || echo "clone3 with CLONE_NEWPID (as PID 1's):"
	for b in libc_only paddockd_libs with_libcurl; do
		printf '  %-14s ' "$b"
		"$tmp/$b" "$flags"
	done
done

#!/bin/sh
# Install what Paddock needs on Debian 12 / Ubuntu 24.04. `--test` adds the test tools.
set -eu
pkgs="build-essential pkg-config libseccomp-dev libcap-dev libsqlite3-dev libjansson-dev
      libarchive-dev nettle-dev libmicrohttpd-dev libcurl4-openssl-dev libmnl-dev libnftables-dev
      libwslay-dev libgnutls28-dev musl-tools
      busybox-static iproute2 util-linux mmdebstrap btrfs-progs e2fsprogs
      tar curl lxcfs"
[ "${1:-}" = "--test" ] && pkgs="$pkgs python3 python3-pytest nftables tmux docker-registry skopeo umoci zstd
      clang libclang-rt-dev openssl python3-pip python3-setuptools python3-wheel python3-venv"
[ "${1:-}" = "--bench" ] && pkgs="$pkgs python3 bubblewrap crun hyperfine"
missing=""
for p in $pkgs; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
        echo "paddock: installing$missing"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -q || true
        # shellcheck disable=SC2086
        apt-get install -y -q --no-install-recommends $missing
fi

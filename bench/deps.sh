#!/bin/sh
# Install the peers and tools bench/run.sh uses (Debian packages). Run as root.
set -eu
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends bubblewrap crun hyperfine python3 busybox-static

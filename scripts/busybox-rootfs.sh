#!/bin/sh
# Build a tiny rootfs from Debian's busybox-static into DIR (used by tests and the quick start).
set -eu
dir=${1:?usage: busybox-rootfs.sh DIR}
bb=/bin/busybox
[ -x "$bb" ] || { echo "busybox-static is not installed" >&2; exit 1; }
mkdir -p "$dir"
cd "$dir"
mkdir -p bin sbin usr/bin usr/sbin etc root tmp proc sys dev run var/tmp workspace home/user
chmod 1777 tmp var/tmp
chmod 700 root
cp "$bb" bin/busybox
for applet in $(bin/busybox --list); do
        [ -e "bin/$applet" ] || ln -s busybox "bin/$applet"
done
cat > etc/passwd <<'PW'
root:x:0:0:root:/root:/bin/sh
user:x:1000:1000:user:/home/user:/bin/sh
nobody:x:65534:65534:nobody:/nonexistent:/bin/false
PW
cat > etc/group <<'GR'
root:x:0:
tty:x:5:
user:x:1000:
nogroup:x:65534:
GR
chown 1000:1000 home/user
echo "paddock" > etc/hostname

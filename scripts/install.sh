#!/bin/bash
# Install Paddock as a systemd service (docs/operations.md), or remove it again.
#
#   scripts/install.sh [--enable] [--prefix DIR] [--destdir DIR] [--unitdir DIR]
#   scripts/install.sh --uninstall [--purge [--force]] [same options]
#
# Installs what `make` built in build/: PREFIX/bin/paddock, PREFIX/sbin/paddockd,
# PREFIX/lib/paddock/{paddock-init,paddock-gateway}, the unit UNITDIR/paddockd.service, the
# state directory /var/lib/paddock (0700) and the system group `paddock` (members may use the
# local socket without root: they are the daemon's administrators). PREFIX defaults to
# /usr/local, UNITDIR to /etc/systemd/system. The list of what it installed is kept in
# PREFIX/lib/paddock/installed, so that --uninstall removes exactly that.
#
# Run again on a newer build to upgrade: the programs are replaced (a running paddockd keeps
# its old binary until restarted), environments and images are untouched; then
# `systemctl restart paddockd` — the environments keep running and are re-adopted.
#
# --enable       also `systemctl enable --now paddockd`
# --uninstall    stop and disable the service, remove the installed files; environments,
#                images, the state directory and the group stay (environments keep running)
# --purge        with --uninstall: also the state directory and the group; refused while the
#                daemon lists any environment (delete them first: paddock rm -f NAME); refused
#                when the daemon does not answer unless --force
# --destdir DIR  stage below DIR (packaging, tests): no group, no systemctl
set -euo pipefail

PREFIX=/usr/local
DESTDIR=
UNITDIR=/etc/systemd/system
STATE=/var/lib/paddock
SOCKET=${PADDOCK_SOCKET:-/run/paddock/paddock.sock}
MODE=install
ENABLE=0
PURGE=0
FORCE=0
TREE=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${PADDOCK_BUILD:-$TREE/build}

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
die() { echo "install.sh: $*" >&2; exit 1; }

while [ $# -gt 0 ]; do
        case "$1" in
        --prefix) PREFIX=${2:?}; shift ;;
        --destdir) DESTDIR=${2:?}; shift ;;
        --unitdir) UNITDIR=${2:?}; shift ;;
        --socket) SOCKET=${2:?}; shift ;;
        --enable) ENABLE=1 ;;
        --uninstall) MODE=uninstall ;;
        --purge) PURGE=1 ;;
        --force) FORCE=1 ;;
        -h|--help) usage; exit 0 ;;
        *) usage >&2; exit 2 ;;
        esac
        shift
done
case "$PREFIX" in /*) ;; *) die "--prefix must be an absolute path" ;; esac
[ -z "$DESTDIR" ] || DESTDIR=$(cd "$DESTDIR" && pwd) || die "--destdir $DESTDIR does not exist"
[ "$PURGE" = 0 ] || [ "$MODE" = uninstall ] || die "--purge goes with --uninstall"
[ "$(id -u)" = 0 ] || [ -n "$DESTDIR" ] || die "run as root"

BIN=$PREFIX/bin
SBIN=$PREFIX/sbin
LIBDIR=$PREFIX/lib/paddock
MANIFEST=$LIBDIR/installed
UNIT=$UNITDIR/paddockd.service
# systemctl only on a live system that runs systemd
have_systemd() { [ -z "$DESTDIR" ] && [ -d /run/systemd/system ] && command -v systemctl >/dev/null; }

do_install() {
        local f
        for f in paddockd paddock paddock-init paddock-gateway; do
                [ -x "$BUILD/$f" ] || die "$BUILD/$f is missing: run make first"
        done
        install -d -m 0755 "$DESTDIR$BIN" "$DESTDIR$SBIN" "$DESTDIR$LIBDIR" "$DESTDIR$UNITDIR"
        # install(1) unlinks the old file first: a running paddockd is not disturbed.
        install -m 0755 "$BUILD/paddock" "$DESTDIR$BIN/paddock"
        install -m 0755 "$BUILD/paddockd" "$DESTDIR$SBIN/paddockd"
        install -m 0755 "$BUILD/paddock-init" "$BUILD/paddock-gateway" "$DESTDIR$LIBDIR/"
        local tmp
        tmp=$(mktemp "$DESTDIR$UNITDIR/.paddockd.service.XXXXXX")
        sed "s|@SBINDIR@|$SBIN|g" "$TREE/dist/paddockd.service.in" > "$tmp"
        chmod 0644 "$tmp"
        mv -f "$tmp" "$DESTDIR$UNIT"
        install -d -m 0700 "$DESTDIR$STATE"
        local group_made=0
        if [ -z "$DESTDIR" ] && ! getent group paddock >/dev/null; then
                groupadd --system paddock
                group_made=1
        fi
        # an upgrade keeps the record that an earlier run made the group
        if [ -f "$DESTDIR$MANIFEST" ] && grep -qx 'group paddock' "$DESTDIR$MANIFEST"; then
                group_made=1
        fi
        {
                echo "file $BIN/paddock"
                echo "file $SBIN/paddockd"
                echo "file $LIBDIR/paddock-init"
                echo "file $LIBDIR/paddock-gateway"
                echo "file $UNIT"
                echo "file $MANIFEST"
                echo "dir $LIBDIR"
                [ "$group_made" = 0 ] || echo "group paddock"
        } > "$DESTDIR$MANIFEST"
        echo "installed paddockd in $DESTDIR$SBIN, paddock in $DESTDIR$BIN, the unit $DESTDIR$UNIT"
        if have_systemd; then
                systemctl daemon-reload
                if [ "$ENABLE" = 1 ]; then
                        systemctl enable --now paddockd
                        echo "paddockd is running: systemctl status paddockd; journalctl -u paddockd"
                elif systemctl -q is-active paddockd; then
                        echo "paddockd is running the old version: systemctl restart paddockd" \
                             "(environments keep running)"
                else
                        echo "next: systemctl enable --now paddockd"
                fi
        fi
        [ -n "$DESTDIR" ] || echo "members of the group paddock may use $SOCKET without root" \
                                  "(usermod -aG paddock USER): they are its administrators"
}

# The environments the daemon at $SOCKET lists: prints their names; fails if it does not answer.
list_envs() {
        local cli=$DESTDIR$BIN/paddock
        [ -x "$cli" ] || cli=$BUILD/paddock
        local out
        out=$(env -u PADDOCK_HOST -u PADDOCK_TOKEN "$cli" --socket "$SOCKET" ls 2>/dev/null) || return 1
        echo "$out" | awk 'NR > 1 { print $1 }'
}

do_uninstall() {
        [ -f "$DESTDIR$MANIFEST" ] || die "no $DESTDIR$MANIFEST: Paddock is not installed there"
        if [ "$PURGE" = 1 ]; then
                local envs
                if envs=$(list_envs); then
                        [ -z "$envs" ] || die "environments exist (delete them first:" \
                                              "paddock rm -f NAME): $(echo $envs)"
                elif [ "$FORCE" = 0 ]; then
                        die "paddockd does not answer on $SOCKET, so it cannot be checked that no" \
                            "environment exists: start it, or add --force"
                fi
        fi
        # the systemd scope the environments live in (pure cgroup v2), asked before the stop
        local scope=""
        if [ "$PURGE" = 1 ] && [ -z "$DESTDIR" ]; then
                local cli=$BIN/paddock
                [ -x "$cli" ] || cli=$BUILD/paddock
                scope=$(env -u PADDOCK_HOST -u PADDOCK_TOKEN "$cli" --socket "$SOCKET" system --json \
                        2>/dev/null | sed -n 's/.*"cgroup_scope": *"\([^"]*\)".*/\1/p')
        fi
        if have_systemd; then
                systemctl disable --now paddockd 2>/dev/null || true
        fi
        if [ "$PURGE" = 1 ] && [ -z "$DESTDIR" ] && list_envs >/dev/null; then
                die "paddockd still answers on $SOCKET (not run by systemd?): stop it first"
        fi
        local kind path group_made=0
        ! grep -qx 'group paddock' "$DESTDIR$MANIFEST" || group_made=1
        while read -r kind path; do
                case "$kind" in
                file) rm -f "$DESTDIR$path" ;;
                esac
        done < "$DESTDIR$MANIFEST"
        rmdir "$DESTDIR$LIBDIR" 2>/dev/null || true
        ! have_systemd || systemctl daemon-reload
        echo "removed the programs and the unit"
        if [ "$PURGE" = 1 ]; then
                # the storage pool and anything else mounted below the state directory
                local m
                awk -v s="$DESTDIR$STATE" '$5 == s || index($5, s "/") == 1 { print $5 }' \
                        /proc/self/mountinfo | sort -r | while read -r m; do
                        umount -l "$m" || true
                done
                rm -rf --one-file-system "$DESTDIR$STATE"
                # with no environment left, only its holder process keeps the scope
                if [ -n "$scope" ] && have_systemd; then
                        systemctl stop "${scope##*/}" 2>/dev/null || true
                fi
                [ -n "$DESTDIR" ] || rm -rf /var/lib/paddock-uids
                if [ "$group_made" = 1 ] && [ -z "$DESTDIR" ] && getent group paddock >/dev/null; then
                        groupdel paddock || true
                fi
                echo "removed the state directory $DESTDIR$STATE"
        else
                echo "kept the state directory $DESTDIR$STATE (environments and images;" \
                     "--uninstall --purge removes it)"
        fi
}

if [ "$MODE" = install ]; then do_install; else do_uninstall; fi

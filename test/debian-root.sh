#!/bin/bash
# debian-root.sh — run zklock's test command on a fresh Debian release.
#
#   bash test/debian-root.sh RELEASE [ARGS...]
#
# Builds a minimal root of Debian RELEASE (bookworm, trixie, forky) in a new
# folder with `debootstrap --variant=minbase` (installing debootstrap first
# when it is missing; a release newer than the host's debootstrap knows is
# built with its script for sid, which every release since bookworm shares), copies this tree into it (without .git), and runs the
# README's test command there, `bash test/all.sh ARGS...`, as root with an
# empty environment (only a basic PATH): the same steps as a new user on a
# fresh machine, including the installation of every package from nothing.
# The root is then torn down.  The exit status is the test command's.
#
# The root runs in its own mount and PID namespaces: /proc, /dev and /sys
# are mounted for it there, so they vanish with it, and every process
# started inside (ZooKeeper, PostgreSQL, Java peers) is killed when the test
# command ends.  The root is entered with pivot_root, not chroot: it becomes
# "/" of that mount namespace and the host's tree is detached from it.  The
# kernel refuses a new user namespace to a chrooted process (EPERM), and
# the TAP tests that cut ZooKeeper servers off from one another
# (test/perl/ZklockNet.pm) run in user and network namespaces of their own,
# as an unprivileged user; after pivot_root the root is a machine like any
# other for them.  It shares the host's network otherwise: its servers bind
# 127.0.0.1 on free ports like everywhere else.  Packages come from the
# mirror the host's apt uses.  Run as root.  Environment knobs:
#   TAP_TESTS            the TAP tests to run, as for test/all.sh (the one
#                        variable passed into the root's empty environment),
#                        e.g. TAP_TESTS=test/t/502_isolated_follower.pl
#                        bash test/debian-root.sh trixie tap
#   ZKLOCK_ROOT_PARENT   folder for the root (default /var/tmp)
#   ZKLOCK_KEEP_ROOT=1   keep the root afterwards (its path is printed)
#   ZKLOCK_ROOT_TIMEOUT  seconds for the test command (default 3600)
#   ZKLOCK_DEBIAN_MIRROR mirror URL (default: the host's first Debian source)
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(dirname "$HERE")
. "$HERE/env.sh"

RELEASE=${1:?usage: debian-root.sh RELEASE [ARGS...]}
shift
PARENT=${ZKLOCK_ROOT_PARENT:-/var/tmp}
TIMEOUT=${ZKLOCK_ROOT_TIMEOUT:-3600}

log() { echo "[debian-root $RELEASE $(date +%H:%M:%S)] $*"; }
die() { echo "debian-root.sh: $*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || die "run me as root (debootstrap, pivot_root and mounts need it)"

# host_mirror: the URL of the host's first Debian archive source (not the
# security archive), from deb822 .sources files or one-line .list files.
host_mirror() {
	local url
	url=$(grep -hs '^URIs:' /etc/apt/sources.list.d/*.sources | awk '{print $2}' |
		grep -v security | head -n 1)
	[ -n "$url" ] || url=$(grep -hs '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list |
		grep -v security | sed 's/\[[^]]*\]//' | awk '{print $2}' | head -n 1)
	echo "$url"
}

# mounted_under DIR: list what is mounted at or below DIR
mounted_under() {
	awk -v d="$1" '$2 == d || index($2, d "/") == 1 {print $2}' /proc/self/mounts
}

MIRROR=${ZKLOCK_DEBIAN_MIRROR:-$(host_mirror)}
[ -n "$MIRROR" ] || die "no Debian mirror found in /etc/apt; set ZKLOCK_DEBIAN_MIRROR"

if ! command -v debootstrap >/dev/null; then
	log "installing debootstrap"
	DEBIAN_FRONTEND=noninteractive apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
fi

ROOT=$(mktemp -d "$PARENT/zklock-root-$RELEASE.XXXXXX")
# it becomes "/" inside: the unprivileged test user must be able to enter it
chmod 755 "$ROOT"
cleanup() {
	local m
	m=$(mounted_under "$ROOT")
	if [ -n "$m" ]; then
		# never delete through a mount of the host's /dev or /sys
		echo "debian-root.sh: still mounted under $ROOT, not removing it:" >&2
		echo "$m" >&2
		return
	fi
	if [ -n "${ZKLOCK_KEEP_ROOT:-}" ]; then
		log "root kept in $ROOT"
	else
		rm -rf --one-file-system "$ROOT"
	fi
}
trap cleanup EXIT

t0=$(date +%s)
SCRIPT=/usr/share/debootstrap/scripts/$RELEASE
[ -e "$SCRIPT" ] || SCRIPT=/usr/share/debootstrap/scripts/sid
log "debootstrap --variant=minbase $RELEASE into $ROOT (script $(basename "$SCRIPT"))"
if ! debootstrap --variant=minbase "$RELEASE" "$ROOT" "$MIRROR" "$SCRIPT" >"$ROOT.debootstrap.log" 2>&1; then
	tail -n 30 "$ROOT.debootstrap.log" >&2
	rm -f "$ROOT.debootstrap.log"
	die "debootstrap failed"
fi
rm -f "$ROOT.debootstrap.log"
t1=$(date +%s)
log "root ready in $((t1 - t0)) s"

# name resolution for apt; no service may start inside (Debian's postgresql
# package would start a cluster on port 5432 of the shared network)
cp /etc/resolv.conf "$ROOT/etc/resolv.conf"
# Debian testing's Release file is valid for a week only; the mirror may be
# a snapshot older than that, which apt would refuse as expired
[ "$RELEASE" = bookworm ] || [ "$RELEASE" = trixie ] ||
	echo 'Acquire::Check-Valid-Until "false";' >"$ROOT/etc/apt/apt.conf.d/99zklock-valid-until"
printf '#!/bin/sh\nexit 101\n' >"$ROOT/usr/sbin/policy-rc.d"
chmod 755 "$ROOT/usr/sbin/policy-rc.d"

mkdir -p "$ROOT/src/zklock"
tar -C "$REPO" --exclude=./.git -cf - . | tar -C "$ROOT/src/zklock" -xf -

# the test command, in new mount and PID namespaces, with an empty
# environment (TAP_TESTS aside); quoted for the inner shell
args=""
for a in "$@"; do args="$args $(printf '%q' "$a")"; done
tap_env=""
[ -z "${TAP_TESTS:-}" ] || tap_env="TAP_TESTS=$(printf '%q' "$TAP_TESTS") "
log "running '${tap_env}bash test/all.sh$args' inside (empty environment)"
status=0
timeout --kill-after=30 "$TIMEOUT" \
	unshare --mount --pid --fork --kill-child --propagation private \
	/bin/bash -c '
		set -e
		root=$1 args=$2 tap_tests=$3
		# the root becomes a mount of its own (pivot_root needs one), and
		# what it needs is mounted on it
		mount --bind "$root" "$root"
		mount -t proc proc "$root/proc"
		mount --rbind /dev "$root/dev"
		mount -t tmpfs -o mode=1777 shm "$root/dev/shm"
		mount --rbind /sys "$root/sys"
		mount -t tmpfs -o mode=1777 tmp "$root/tmp"
		cd "$root"
		mkdir -p .oldroot
		pivot_root . .oldroot
		# "/" is the Debian root now (its own env, bash, umount); the
		# tree of the host is detached from this mount namespace
		exec /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin ${tap_tests:+"TAP_TESTS=$tap_tests"} \
			/bin/bash -c "umount -l /.oldroot && rmdir /.oldroot && cd /src/zklock && bash test/all.sh $args"
	' inner "$ROOT" "$args" "${TAP_TESTS:-}" || status=$?
t2=$(date +%s)
log "test command $([ $status -eq 0 ] && echo passed || echo "FAILED (exit $status)") in $((t2 - t1)) s; $((t2 - t0)) s with the root"
exit $status

#!/bin/bash
# package-root.sh — the package leg: build zklock's Debian packages on a
# fresh Debian release, install them into a clean root and run their
# autopkgtest there.
#
#   bash test/package-root.sh RELEASE        (bookworm, trixie, forky)
#
# 1. debootstraps one minimal root of RELEASE (test/root-lib.sh, as
#    test/debian-root.sh does) and copies it: one copy builds, the other,
#    which never sees the build tree or the build dependencies, tests;
# 2. in the build root: copies this tree in (without .git and what git
#    ignores), installs the build dependencies of debian/control from the
#    archive (apt-get build-dep), writes debian/control for the release's
#    PostgreSQL (pg_buildext updatecontrol), makes the upstream tarball
#    zklock_UPSTREAM.orig.tar.gz from the tree (without debian/), fetches
#    the zookeeper source package beside the tree (zk-client-build/build.sh
#    --fetch-only: apt-get source, adding the deb-src entries of the root's
#    archive) and runs `dpkg-buildpackage -us -uc` with ZKLOCK_ZK_SOURCE
#    naming it: source package and postgresql-NN-zklock;
# 3. in the test root: `apt-get install ./postgresql-NN-zklock_*.deb` (the
#    dependencies come from the archive), then the Depends of
#    debian/tests/control (apt-get satisfy), then, as autopkgtest would,
#    the test debian/tests/installcheck from the source package unpacked
#    (dpkg-source -x) against the installed package.
#
# Each step runs as root inside its root with an empty environment (only a
# basic PATH), in new mount and PID namespaces (test/root-lib.sh).  The
# exit status is non-zero when any step fails; the last lines give the time
# of each step.  Both roots are removed at the end.  Run as root.  Knobs:
#   ZKLOCK_ROOT_PARENT   folder for the roots (default /var/tmp)
#   ZKLOCK_PKG_OUT=DIR   copy the built packages (.deb, .dsc, tarballs) to DIR
#   ZKLOCK_KEEP_ROOT=1   keep the roots (paths printed; the test root holds
#                        the packages in /pkg)
#   ZKLOCK_ROOT_TIMEOUT  seconds for each step inside a root (default 1800)
#   ZKLOCK_DEBIAN_MIRROR mirror URL (default: the host's first Debian source)
# (Inside a root it calls itself as `package-root.sh --inside build|test`.)
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(dirname "$HERE")
. "$HERE/env.sh"
. "$HERE/root-lib.sh"

export DEBIAN_FRONTEND=noninteractive
APT_OPTS="-y -q --no-install-recommends -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold"

# inside_build: in the build root, from the copied tree: build dependencies,
# debian/control for this release, the orig tarball, dpkg-buildpackage
inside_build() {
	local upstream src
	apt-get update -q
	# shellcheck disable=SC2086
	apt-get build-dep $APT_OPTS ./
	pg_buildext updatecontrol
	upstream=$(dpkg-parsechangelog -S Version)
	upstream=${upstream%-*}
	src=$(basename "$(pwd)")
	[ "$src" = "zklock-$upstream" ] || root_die "the tree must be in zklock-$upstream, not $src"
	tar -C .. --exclude="$src/debian" -czf "../zklock_$upstream.orig.tar.gz" "$src"
	# the zookeeper source package the C client with TLS and SASL is built
	# from (debian/rules): fetched here, beside the tree, not by the build
	ZKLOCK_ZK_CLIENT=$(cd .. && pwd)/zk-fetch bash zk-client-build/build.sh --fetch-only
	ZKLOCK_ZK_SOURCE=$(cd .. && pwd)/zk-fetch/src dpkg-buildpackage -us -uc
}

# inside_test: in the test root, from /pkg: the built packages with their
# dependencies from the archive, the test dependencies, the autopkgtest
# from the unpacked source package
inside_test() {
	local deps t0 t1 t2
	t0=$(date +%s)
	apt-get update -q
	# shellcheck disable=SC2086
	apt-get install $APT_OPTS ./postgresql-*-zklock_*.deb
	t1=$(date +%s)
	# the test's Depends, but "@" (the packages just installed), as apt
	# satisfies a Depends field: alternatives and versions included
	deps=$(sed -n '/^Depends:/,/^[A-Z]/p' src/debian/tests/control | sed -e 's/^Depends://' -e '/^[A-Z]/d' |
		tr ',' '\n' | sed -e 's/^[[:space:]]*//' -e 's/[[:space:]]*$//' -e '/^@$/d' -e '/^$/d' |
		paste -sd, - | sed 's/,/, /g')
	echo "test dependencies: $deps"
	# shellcheck disable=SC2086
	apt-get satisfy $APT_OPTS "$deps"
	t2=$(date +%s)
	echo "package-root: installed the packages in $((t1 - t0)) s, the test dependencies in $((t2 - t1)) s"
	cd src
	debian/tests/installcheck
	echo "package-root: debian/tests/installcheck passed in $(($(date +%s) - t2)) s"
}

if [ "${1:-}" = "--inside" ]; then
	ROOT_LOG_TAG="package-root (inside)"
	case "${2:-}" in
	build) inside_build ;;
	test) inside_test ;;
	*) root_die "usage: package-root.sh --inside build|test" ;;
	esac
	exit 0
fi

RELEASE=${1:?usage: package-root.sh RELEASE}
PARENT=${ZKLOCK_ROOT_PARENT:-/var/tmp}
TIMEOUT=${ZKLOCK_ROOT_TIMEOUT:-1800}
ROOT_LOG_TAG="package-root $RELEASE"

[ "$(id -u)" -eq 0 ] || root_die "run me as root (debootstrap, pivot_root and mounts need it)"
command -v dpkg-source >/dev/null || root_die "dpkg-source missing on the host (apt-get install dpkg-dev)"

WORK=$(mktemp -d "$PARENT/zklock-pkg-$RELEASE.XXXXXX")
chmod 755 "$WORK"
BUILD=$WORK/build-root
TEST=$WORK/test-root
# cleanup: remove both roots (root_remove keeps them under ZKLOCK_KEEP_ROOT
# and never removes through a mount), then the folder when it is empty
cleanup() {
	root_remove "$BUILD"
	root_remove "$TEST"
	rmdir "$WORK" 2>/dev/null || true
}
trap cleanup EXIT

# step NAME SECONDS: remember how long a step took, for the summary
times=""
step() { times="$times
  $1: $2 s"; }

t0=$(date +%s)
mkdir "$TEST"
root_debootstrap "$RELEASE" "$TEST"
cp -a "$TEST" "$BUILD"
t1=$(date +%s)
step "debootstrap (and the copy of the root)" $((t1 - t0))
root_log "roots ready in $((t1 - t0)) s"

upstream=$(sed -n '1s/^zklock (\([^)-]*\)-[^)]*).*/\1/p' "$REPO/debian/changelog")
[ -n "$upstream" ] || root_die "no upstream version in debian/changelog"
root_copy_tree "$REPO" "$BUILD/src/zklock-$upstream"
root_log "building the packages (dpkg-buildpackage) in the build root"
status=0
root_run "$BUILD" "$TIMEOUT" "/src/zklock-$upstream" "bash test/package-root.sh --inside build" || status=$?
t2=$(date +%s)
step "build dependencies and build" $((t2 - t1))
if [ $status -ne 0 ]; then
	root_log "build FAILED (exit $status); package leg FAILED in $((t2 - t0)) s:$times"
	exit 1
fi

# the packages, and the source package unpacked as autopkgtest would
mkdir -p "$TEST/pkg"
cp "$BUILD"/src/*.deb "$BUILD"/src/*.dsc "$BUILD"/src/*.tar.* "$TEST/pkg/"
( cd "$TEST/pkg" && dpkg-source -q -x ./zklock_*.dsc src >/dev/null )
# what the build root downloaded serves the test root as a local cache
# (the same archive's files; apt checks their hashes)
cp -n "$BUILD"/var/cache/apt/archives/*.deb "$TEST/var/cache/apt/archives/" 2>/dev/null || true
ls -l "$TEST/pkg/"
if [ -n "${ZKLOCK_PKG_OUT:-}" ]; then
	mkdir -p "$ZKLOCK_PKG_OUT"
	cp "$TEST"/pkg/*.* "$ZKLOCK_PKG_OUT/"
	root_log "packages copied to $ZKLOCK_PKG_OUT"
fi
root_remove "$BUILD"

root_log "installing the packages and running debian/tests/installcheck in the clean root"
root_run "$TEST" "$TIMEOUT" /pkg "bash src/test/package-root.sh --inside test" || status=$?
t3=$(date +%s)
step "install and autopkgtest" $((t3 - t2))
root_log "package leg $([ $status -eq 0 ] && echo passed || echo "FAILED (exit $status)") in $((t3 - t0)) s:$times"
exit $status

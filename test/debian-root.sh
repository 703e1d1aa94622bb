#!/bin/bash
# debian-root.sh — run zklock's test command on a fresh Debian release.
#
#   bash test/debian-root.sh RELEASE [ARGS...]
#
# Builds a minimal root of Debian RELEASE (bookworm, trixie, forky) in a new
# folder with `debootstrap --variant=minbase` (installing debootstrap first
# when it is missing; a release newer than the host's debootstrap knows is
# built with its script for sid, which every release since bookworm
# shares), copies this tree into it (without .git and what git ignores), and
# runs the README's test command there, `bash test/all.sh ARGS...`, as root with an
# empty environment (only a basic PATH): the same steps as a new user on a
# fresh machine, including the installation of every package from nothing.
# The root is then torn down.  The exit status is the test command's.
#
# The root runs in its own mount and PID namespaces, entered with
# pivot_root, not chroot, so that the TAP tests can make user and network
# namespaces there (test/root-lib.sh says how and why); every process
# started inside is killed when the test command ends.  Packages come from
# the mirror the host's apt uses.  Run as root.  Environment knobs:
#   TAP_TESTS            the TAP tests to run, as for test/all.sh (the one
#                        variable passed into the root's empty environment),
#                        e.g. TAP_TESTS=test/t/502_isolated_follower.pl
#                        bash test/debian-root.sh trixie tap
#   ZKLOCK_ROOT_PARENT   folder for the root (default /var/tmp)
#   ZKLOCK_KEEP_ROOT=1   keep the root afterwards (its path is printed), with
#                        the tests' logs in its /var/tmp (ZKLOCK_KEEP_LOGS)
#   ZKLOCK_ROOT_TIMEOUT  seconds for the test command (default 3600)
#   ZKLOCK_DEBIAN_MIRROR mirror URL (default: the host's first Debian source)
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(dirname "$HERE")
. "$HERE/env.sh"
. "$HERE/root-lib.sh"

RELEASE=${1:?usage: debian-root.sh RELEASE [ARGS...]}
shift
PARENT=${ZKLOCK_ROOT_PARENT:-/var/tmp}
TIMEOUT=${ZKLOCK_ROOT_TIMEOUT:-3600}
ROOT_LOG_TAG="debian-root $RELEASE"

[ "$(id -u)" -eq 0 ] || root_die "run me as root (debootstrap, pivot_root and mounts need it)"

ROOT=$(mktemp -d "$PARENT/zklock-root-$RELEASE.XXXXXX")
trap 'root_remove "$ROOT"' EXIT

t0=$(date +%s)
root_debootstrap "$RELEASE" "$ROOT"
t1=$(date +%s)
root_log "root ready in $((t1 - t0)) s"

root_copy_tree "$REPO" "$ROOT/src/zklock"

# the test command, with an empty environment (TAP_TESTS aside); quoted for
# the inner shell
args=""
for a in "$@"; do args="$args $(printf '%q' "$a")"; done
tap_env=""
[ -z "${TAP_TESTS:-}" ] || tap_env="TAP_TESTS=$(printf '%q' "$TAP_TESTS") "
root_log "running '${tap_env}bash test/all.sh$args' inside (empty environment)"
status=0
root_run "$ROOT" "$TIMEOUT" /src/zklock "bash test/all.sh$args" \
	${TAP_TESTS:+"TAP_TESTS=$TAP_TESTS"} ${ZKLOCK_KEEP_ROOT:+ZKLOCK_KEEP_LOGS=1} || status=$?
t2=$(date +%s)
root_log "test command $([ $status -eq 0 ] && echo passed || echo "FAILED (exit $status)") in $((t2 - t1)) s; $((t2 - t0)) s with the root"
exit $status

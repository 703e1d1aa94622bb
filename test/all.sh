#!/bin/bash
# all.sh — set everything up and run every test of zklock.
#
#   bash test/all.sh [regress] [tap] [bench]    (default: regress tap)
#   bash test/all.sh adversary [--minutes N] [--seed S] [--mode M]
#                     build, then only the randomized adversary
#                     (test/t/905_adversary.pl) for N minutes of load, from
#                     seed S to repeat a run (the seed is printed), against
#                     a standalone ZooKeeper or an ensemble (M: standalone
#                     or ensemble; by default the seed draws it)
#
# Run as root on Debian 12 (PostgreSQL 15), 13 (17) or forky (18):
# installs the Debian packages it needs, builds the extension with warnings
# as errors and installs it, checks META.json (test/meta/check-meta.pl)
# and that every mutant of test/mutants still applies
# (test/meta/check-mutants.pl), runs the unit tests, then runs pg_regress and
# the TAP tests (private ZooKeeper, PostgreSQL clusters and Curator peers)
# as the unprivileged user "zklock" (created if missing), on a copy of the
# tree that user owns, because initdb refuses to run as root.  Nothing is
# taken from the caller's environment (see test/env.sh).
set -euo pipefail

cd "$(dirname "$0")/.."
REPO=$(pwd)
. test/env.sh
TEST_USER=${ZKLOCK_TEST_USER:-zklock}

if [ "$(id -u)" -ne 0 ]; then
	echo "all.sh: run me as root (I install packages and the extension);" >&2
	echo "        with sudo: sudo bash test/all.sh" >&2
	exit 1
fi

start=$(date +%s)
bash test/install-deps.sh

echo "=== the ZooKeeper C client with TLS and SASL, from Debian's source package ==="
t_zk=$(date +%s)
bash zk-client-build/build.sh
echo "all.sh: the C client took $(($(date +%s) - t_zk)) s"

echo "=== build and install (Debian ${ZKLOCK_DEBIAN:-?}, PostgreSQL $PG_MAJOR) ==="
make -s clean PG_CONFIG="$PG_CONFIG"
make -s PG_CONFIG="$PG_CONFIG" COPT=-Werror
make -s install PG_CONFIG="$PG_CONFIG"

echo "=== call graph between the C files (no new cycle) ==="
perl test/callgraph.pl src

# a wrong META.json, or a mutant that no longer applies, fails the run at
# the end, after every other test ran
echo "=== META.json: PGXN Meta Spec, and the same version as zklock.control and debian/changelog ==="
meta_status=0
perl test/meta/check-meta.pl --self-test || meta_status=1
echo "=== the mutants of test/mutants still apply to src/ ==="
perl test/meta/check-mutants.pl --self-test || meta_status=1

echo "=== unit tests of the recipe core (cmocka) ==="
make -s -C test/unit clean
make -s -C test/unit check

# the PostgreSQL parts run as an unprivileged user, on a copy it owns
id "$TEST_USER" >/dev/null 2>&1 || useradd -m -s /bin/bash "$TEST_USER"
COPY=$(mktemp -d /tmp/zklock-src.XXXXXX)
trap 'rm -rf "$COPY"' EXIT
cp -a "$REPO/." "$COPY/"
rm -rf "$COPY/.git"
chown -R "$TEST_USER" "$COPY"
chmod 755 "$COPY"

status=0
[ $# -gt 0 ] || set -- regress tap
args=""
for a in "$@"; do
	case "$a" in
	*[!A-Za-z0-9_.-]*) echo "all.sh: bad argument '$a'" >&2; exit 2 ;;
	esac
	args="$args $a"
done
su "$TEST_USER" -s /bin/bash -c "cd '$COPY' && TAP_TESTS='${TAP_TESTS:-}' ZKLOCK_KEEP_LOGS='${ZKLOCK_KEEP_LOGS:-}' bash test/run-user-tests.sh $args" || status=$?
if [ $meta_status -ne 0 ] && [ $status -eq 0 ]; then
	echo "all.sh: the META.json or mutants check FAILED (see its lines above)"
	status=1
fi
echo "all.sh: Debian ${ZKLOCK_DEBIAN:-?} / PostgreSQL $PG_MAJOR: $([ $status -eq 0 ] && echo passed || echo FAILED) in $(( $(date +%s) - start )) s"
exit $status

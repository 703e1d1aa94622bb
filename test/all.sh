#!/bin/bash
# all.sh — set everything up and run every test of zklock.
# Run as root on Debian 12: installs the Debian packages it needs, builds
# and installs the extension, runs the unit tests, then runs pg_regress and
# the TAP tests (private ZooKeeper, PostgreSQL clusters and Curator peers)
# as the unprivileged user "zklock".
set -euo pipefail

cd "$(dirname "$0")/.."
REPO=$(pwd)
TEST_USER=${ZKLOCK_TEST_USER:-zklock}

if [ "$(id -u)" -ne 0 ]; then
	echo "all.sh: run me as root (I install packages and the extension)" >&2
	exit 1
fi

bash test/install-deps.sh

echo "=== build and install ==="
make -s clean
make -s
make -s install

echo "=== unit tests of the recipe core (cmocka) ==="
make -s -C test/unit clean
make -s -C test/unit check

# the PostgreSQL parts run as an unprivileged user, on a copy it owns
id "$TEST_USER" >/dev/null 2>&1 || useradd -m -s /bin/bash "$TEST_USER"
COPY=$(mktemp -d /tmp/zklock-src.XXXXXX)
trap 'rm -rf "$COPY"' EXIT
cp -a "$REPO/." "$COPY/"
chown -R "$TEST_USER" "$COPY"
chmod 755 "$COPY"

su "$TEST_USER" -s /bin/bash -c "cd '$COPY' && TAP_TESTS='${TAP_TESTS:-}' bash test/run-user-tests.sh ${*:-regress tap}"

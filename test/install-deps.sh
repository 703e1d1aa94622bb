#!/bin/bash
# install-deps.sh — install what zklock needs from the Debian release's own
# packages: PostgreSQL 15 on Debian 12, 17 on Debian 13, 18 on forky (see
# test/env.sh), pg_cron for it (postgresql-NN-cron: 1.4.2 on Debian 12,
# 1.6.5 on 13, 1.6.8 on forky; test 195 schedules jobs with it), the ZooKeeper
# server (its jar, libzookeeper-java: the package zookeeper adds only a
# system service, and on forky pulls a desktop JRE) and C client, Curator,
# a JDK, cmocka and Perl's IPC::Run, and what zk-client-build/build.sh
# needs to build the C client with TLS and SASL from Debian's source
# package (autotools, OpenSSL and Cyrus SASL headers, dpkg-source; the
# DIGEST-MD5 plugin and openssl for the tests; for test 217, MIT's KDC
# (krb5kdc, kdb5_util in krb5-kdc; kadmin.local in krb5-admin-server:
# the test runs a KDC of its own, as the test user, not the system's
# service, which has no realm here) and Cyrus SASL's GSSAPI plugin).  Run
# as root.  Idempotent: packages already present are left alone, and
# nothing is fetched when all are there.
#   install-deps.sh --check   install nothing: list the missing packages
#                             and exit 1 when some are missing (any user;
#                             test/check.sh uses it)
set -euo pipefail
. "$(dirname "$0")/env.sh"

PKGS="build-essential postgresql-$PG_MAJOR postgresql-server-dev-$PG_MAJOR
      postgresql-client-$PG_MAJOR postgresql-$PG_MAJOR-cron
      libzookeeper-st-dev libzookeeper-java
      libcurator-recipes-java libslf4j-java default-jdk-headless
      libcmocka-dev libipc-run-perl iproute2 procps psmisc ca-certificates
      nftables faketime
      dpkg-dev autoconf automake libtool pkgconf libssl-dev libsasl2-dev
      libsasl2-modules openssl
      krb5-kdc krb5-admin-server libsasl2-modules-gssapi-mit"

# zklock_missing_pkgs: the packages of PKGS not installed
zklock_missing_pkgs() {
	local p missing=""
	for p in $PKGS; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
	done
	echo "$missing"
}

if [ "${1:-}" = "--check" ]; then
	missing=$(zklock_missing_pkgs)
	[ -z "$missing" ] && exit 0
	echo "install-deps.sh: missing packages (Debian ${ZKLOCK_DEBIAN:-?}, PostgreSQL $PG_MAJOR):$missing" >&2
	exit 1
fi

if [ "$(id -u)" -ne 0 ]; then
	echo "install-deps.sh: not root; assuming the packages are installed" >&2
	exit 0
fi

missing=$(zklock_missing_pkgs)
if [ -z "$missing" ]; then
	echo "install-deps.sh: all packages present (Debian ${ZKLOCK_DEBIAN:-?}, PostgreSQL $PG_MAJOR)"
	exit 0
fi

# (Debian's postgresql package may create and start its default cluster on
# port 5432; zklock's scripts start their own private clusters on free
# ports and leave it alone.)
echo "install-deps.sh: installing$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y --no-install-recommends \
	-o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold $missing

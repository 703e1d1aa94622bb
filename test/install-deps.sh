#!/bin/bash
# install-deps.sh — install what zklock needs from Debian 12's packages.
# Run as root. Idempotent: packages already present are left alone.
set -euo pipefail

PKGS="build-essential postgresql-15 postgresql-server-dev-15 postgresql-client-15
      libzookeeper-st-dev zookeeper libcurator-recipes-java default-jdk-headless
      libcmocka-dev libipc-run-perl iproute2 procps ca-certificates"

if [ "$(id -u)" -ne 0 ]; then
	echo "install-deps.sh: not root; assuming the packages are installed" >&2
	exit 0
fi

missing=""
for p in $PKGS; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -z "$missing" ]; then
	echo "install-deps.sh: all packages present"
	exit 0
fi

# (Debian's postgresql package may create and start its default cluster on
# port 5432; zklock's scripts start their own private clusters on free
# ports and leave it alone.)
export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y --no-install-recommends \
	-o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold $missing

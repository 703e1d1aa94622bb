#!/bin/bash
# build.sh — compile the Java peers of zklock's tests and demo into DIR:
# CuratorPeer (the Curator client the tests and the demo drive) and ZkTool
# (a plain ZooKeeper client; CuratorPeer's expire runs its code), against
# Debian's Curator jar (CURATOR_JAR overrides it).
#
#   bash test/java/build.sh DIR
#
# test/run-user-tests.sh builds them once per run, test/demo.sh for the
# demo, and ZklockTest::java_classes for a TAP file run on its own.
set -euo pipefail
dir=${1:?usage: build.sh DIR}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$dir"
javac -nowarn -encoding UTF-8 -cp "${CURATOR_JAR:-/usr/share/java/curator-recipes.jar}" \
	-d "$dir" "$here/CuratorPeer.java" "$here/ZkTool.java"

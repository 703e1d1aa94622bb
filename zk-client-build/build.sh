#!/bin/bash
# zk-client-build/build.sh — build the single-threaded ZooKeeper C client
# with TLS (OpenSSL) and SASL (Cyrus SASL) from Debian's own source package
# of the running release, for zklock to link statically.
#
#   bash zk-client-build/build.sh [--fetch-only]      (make zk-client)
#
# Part of the product, not of the tests: debian/rules runs it to build the
# package, the Makefile's zk-client target and test/all.sh, test/check.sh,
# test/demo.sh run it.  Its folder, zk-client-build/, holds the script and
# the patches it applies (patches/); its output is zk-client/ (ignored by
# git), which the Makefile links.
#
# Debian's libzookeeper-st is built without OpenSSL and Cyrus SASL (no
# zookeeper_init_ssl, no zookeeper_init_sasl), although the C client of
# ZooKeeper 3.8 and 3.9 has both.  This script:
#   1. takes the source package zookeeper of the version of the installed
#      libzookeeper-java (apt-get source, from the archive the system uses;
#      as root it adds the deb-src entries of that archive when missing),
#      or the one ZKLOCK_ZK_SOURCE names (a .dsc file, or a folder holding
#      one), and unpacks it with Debian's patches (dpkg-source -x).  When
#      the archive lists that version's source but does not serve it (Debian
#      testing's, from the mirror CI reaches), the stable release's
#      (ZKLOCK_ZK_FALLBACK_SUITE, default trixie) from the same archive;
#      zk-client/.source names the package used;
#      then applies zklock's patches to the C client
#      (zk-client-build/patches/*.patch: the TLS handshake does not block;
#      the caller makes each TLS context, and SASL runs inside TLS);
#   2. generates the C records of zookeeper.jute with the jute compiler of
#      Debian's libzookeeper-java, as the package's own build does (the
#      orig tarball does not carry them);
#   3. configures the C client as the package's build does (autoreconf,
#      configure), with --with-openssl --with-sasl, single-threaded only,
#      static and position-independent (libzookeeper_st.a, -fPIC), so that
#      it is linked into zklock.so and never meets the system's shared
#      libzookeeper_st;
#   4. installs the library and its headers into zk-client/ at the top of
#      the tree, which the Makefile then links (ZK_CLIENT there).
# Nothing is done when zk-client/ already holds a build of the same source
# version.  --fetch-only stops after step 1 (the source is kept in
# zk-client/src).  Needs: dpkg-dev, autoconf, automake, libtool, pkgconf,
# libssl-dev, libsasl2-dev, a JRE and libzookeeper-java (test/install-deps.sh
# installs them; debian/control's Build-Depends list them).  The
# environment is its own, whatever the caller's (as test/env.sh sets it for
# the tests, which this script does not use): the standard directories
# first in PATH, the C.UTF-8 locale (built into Debian's libc-bin), HOME
# and USER from the password database when unset.  Knobs: ZKLOCK_ZK_CLIENT (folder, default zk-client/ at
# the top of the tree), ZKLOCK_ZK_SOURCE and ZKLOCK_ZK_FALLBACK_SUITE (see 1).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(dirname "$HERE")

export PATH="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin${PATH:+:$PATH}"
unset LANGUAGE LC_CTYPE LC_COLLATE LC_MESSAGES LC_MONETARY LC_NUMERIC LC_TIME
export LANG=C.UTF-8 LC_ALL=C.UTF-8
if [ -z "${HOME:-}" ]; then
	HOME=$(getent passwd "$(id -u)" | cut -d: -f6)
	export HOME=${HOME:-/}
fi
export USER=${USER:-$(id -un)}

OUT=${ZKLOCK_ZK_CLIENT:-$REPO/zk-client}
SRC=$OUT/src
FETCH_ONLY=0
[ "${1:-}" = "--fetch-only" ] && FETCH_ONLY=1

die() {
	echo "zk-client-build: $*" >&2
	exit 1
}

# the version of the ZooKeeper the system has (jute compiler and server)
ZK_VERSION=$(dpkg-query -W -f='${Version}' libzookeeper-java 2>/dev/null) ||
	die "libzookeeper-java is not installed (bash test/install-deps.sh, as root)"
[ -n "$ZK_VERSION" ] || die "libzookeeper-java is not installed"

# the patches applied to the C client, in the stamps of the tree and the build
PATCHES=$(ls "$HERE"/patches/*.patch 2>/dev/null | sort) || true
PATCH_SUM=$( { [ -z "$PATCHES" ] || cat $PATCHES; } | sha256sum | cut -c1-16)
STAMP="$ZK_VERSION patches $PATCH_SUM"

if [ -f "$OUT/.built" ] && [ "$(cat "$OUT/.built")" = "$STAMP" ] &&
	[ -f "$OUT/lib/libzookeeper_st.a" ] && [ $FETCH_ONLY -eq 0 ]; then
	echo "zk-client-build: zookeeper $ZK_VERSION C client with TLS and SASL already in $OUT"
	exit 0
fi

# add_deb_src: as root, the deb-src entries of the archive the system's
# deb entries name, when there are none (apt-get source needs them)
add_deb_src() {
	local f list=/etc/apt/sources.list.d/zklock-deb-src.sources
	[ "$(id -u)" -eq 0 ] || die "no deb-src entry for the source package zookeeper $ZK_VERSION; as root, add deb-src entries for the archive of your deb entries (or run bash test/install-deps.sh), or set ZKLOCK_ZK_SOURCE to its .dsc"
	: > "$list.new"
	for f in /etc/apt/sources.list.d/*.sources; do
		[ -f "$f" ] || continue
		# deb822: the stanzas of type deb, as deb-src
		awk 'BEGIN { RS = ""; ORS = "\n\n" }
			/(^|\n)Types:[^\n]*deb([ \n]|$)/ && /(^|\n)Enabled: *no/ == 0 {
				sub(/Types:[^\n]*/, "Types: deb-src"); print }' "$f" >> "$list.new"
	done
	# one-line style, as a deb822 stanza each
	{ cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null || true; } |
		awk '$1 == "deb" {
			i = 2; opts = ""
			if ($2 ~ /^\[/) { while ($i !~ /\]$/) { opts = opts " " $i; i++ } opts = opts " " $i; i++ }
			printf "Types: deb-src\nURIs: %s\nSuites: %s\nComponents:", $i, $(i + 1)
			for (j = i + 2; j <= NF; j++) printf " %s", $j
			if (opts ~ /signed-by=/) { s = opts; sub(/.*signed-by=/, "", s); sub(/[ \]].*/, "", s); printf "\nSigned-By: %s", s }
			printf "\n\n" }' >> "$list.new"
	[ -s "$list.new" ] || die "no deb entry found in /etc/apt to derive a deb-src entry from"
	mv "$list.new" "$list"
	echo "zk-client-build: added deb-src entries in $list"
	apt-get update -q
}

# fetch_fallback: the archive lists the installed version's source but does
# not serve its files (seen for Debian testing: forky's zookeeper 3.9.6-2
# answers 404 from the mirror these machines reach, its index lists it):
# as root, the source package of the stable release
# ($ZKLOCK_ZK_FALLBACK_SUITE, default trixie) from the same archive, whose
# C client has the same API and speaks the same protocol.  Said in the log
# and in zk-client/.source.
fetch_fallback() {
	local suite=${ZKLOCK_ZK_FALLBACK_SUITE:-trixie} uri list=/etc/apt/sources.list.d/zklock-deb-src-fallback.sources
	[ "$(id -u)" -eq 0 ] || die "apt-get source zookeeper=$ZK_VERSION failed (as root, the source of $suite is tried instead)"
	[ "$suite" != "$(. /etc/os-release && echo "${VERSION_CODENAME:-}")" ] ||
		die "apt-get source zookeeper=$ZK_VERSION failed"
	uri=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '/^URIs:/ { print $2; exit }')
	[ -n "$uri" ] || uri=$(cat /etc/apt/sources.list 2>/dev/null |
		awk '$1 == "deb" { i = 2; if ($2 ~ /^\[/) { while ($i !~ /\]$/) i++; i++ } print $i; exit }')
	[ -n "$uri" ] || die "apt-get source zookeeper=$ZK_VERSION failed, and no archive to take $suite's source from"
	echo "zk-client-build: the archive does not serve zookeeper $ZK_VERSION's source; taking $suite's from $uri"
	printf 'Types: deb-src\nURIs: %s\nSuites: %s\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
		"$uri" "$suite" > "$list"
	apt-get update -q
	(cd "$SRC" && apt-get source -q --download-only "zookeeper/$suite") ||
		die "apt-get source zookeeper=$ZK_VERSION failed, and zookeeper/$suite too"
}

# fetch: the source package into $SRC, unpacked with Debian's patches
fetch() {
	local dsc=''
	# the source package of this version fetched before: unpacked (and
	# patched) again only
	if [ -z "${ZKLOCK_ZK_SOURCE:-}" ] && [ -f "$SRC/zookeeper_${ZK_VERSION#*:}.dsc" ]; then
		dsc=$SRC/zookeeper_${ZK_VERSION#*:}.dsc
		rm -rf "$SRC/tree" "$SRC/build"
	else
		rm -rf "$SRC"
		mkdir -p "$SRC"
	fi
	if [ -n "$dsc" ]; then
		:
	elif [ -n "${ZKLOCK_ZK_SOURCE:-}" ]; then
		dsc=$ZKLOCK_ZK_SOURCE
		[ -d "$dsc" ] && dsc=$(ls "$dsc"/zookeeper_*.dsc 2>/dev/null | head -n 1)
		[ -f "$dsc" ] || die "ZKLOCK_ZK_SOURCE=$ZKLOCK_ZK_SOURCE: no zookeeper_*.dsc there"
		dsc=$(cd "$(dirname "$dsc")" && pwd)/$(basename "$dsc")
	else
		if ! (cd "$SRC" && apt-get source -q --download-only "zookeeper=$ZK_VERSION"); then
			[ -n "$(ls /etc/apt/sources.list.d/zklock-deb-src.sources 2>/dev/null)" ] || add_deb_src
			(cd "$SRC" && apt-get source -q --download-only "zookeeper=$ZK_VERSION") ||
				fetch_fallback
		fi
		dsc=$(ls "$SRC"/zookeeper_*.dsc | head -n 1)
	fi
	(cd "$SRC" && dpkg-source --no-check -x "$dsc" tree >/dev/null) ||
		die "dpkg-source -x $dsc failed"
	echo "zk-client-build: unpacked $(basename "$dsc") in $SRC/tree"
	for p in $PATCHES; do
		patch -d "$SRC/tree" -p1 --forward --quiet < "$p" ||
			die "$(basename "$p") does not apply to $(basename "$dsc")"
	done
	echo "$PATCH_SUM" > "$SRC/tree/.zklock-patches"
	basename "$dsc" > "$OUT/.source"
}

[ -d "$SRC/tree/zookeeper-client/zookeeper-client-c" ] && [ -z "${ZKLOCK_ZK_SOURCE:-}" ] &&
	[ "$(cat "$SRC/tree/.zklock-patches" 2>/dev/null)" = "$PATCH_SUM" ] &&
	[ -n "$(ls "$SRC"/zookeeper_"${ZK_VERSION#*:}".dsc 2>/dev/null)" ] || fetch
[ $FETCH_ONLY -eq 1 ] && exit 0

C=$SRC/tree/zookeeper-client/zookeeper-client-c
JUTE=/usr/share/java/zookeeper-jute.jar
[ -f "$JUTE" ] || die "$JUTE missing (package libzookeeper-java)"

# 2. the records of zookeeper.jute in C, with Debian's jute compiler
mkdir -p "$C/generated"
(cd "$C/generated" && java -cp "$JUTE" org.apache.jute.compiler.generated.Rcc -l c \
	"$SRC/tree/zookeeper-jute/src/main/resources/zookeeper.jute" >/dev/null)

# 3. configure and build, out of the source tree
(cd "$C" && autoreconf -if >/dev/null 2>&1) || die "autoreconf failed in $C"
B=$SRC/build
rm -rf "$B" "$OUT/lib" "$OUT/include"
mkdir -p "$B"
# OpenSSL 3 dropped FIPS_mode(), which the 3.8 client still calls (to log
# whether FIPS is on): its OpenSSL 3 spelling; -Wno-error: the client's
# -Werror would make each newer compiler's new warnings fatal
cflags="-g -O2 -Wno-error"
if grep -q 'FIPS_mode()' "$C/src/zookeeper.c"; then
	cat > "$B/zk-openssl3.h" <<-'EOF'
	/* zk-client-build/build.sh: FIPS_mode() as OpenSSL 3 spells it */
	#include <openssl/opensslv.h>
	#if OPENSSL_VERSION_NUMBER >= 0x30000000L
	#include <openssl/evp.h>
	#define FIPS_mode() EVP_default_properties_is_fips_enabled(NULL)
	#endif
	EOF
	cflags="$cflags -include $B/zk-openssl3.h"
fi
(cd "$B" && "$C/configure" --prefix="$OUT" --with-openssl --with-sasl \
	--without-syncapi --without-cppunit --disable-shared --enable-static --with-pic \
	CFLAGS="$cflags" >configure.log 2>&1) || { tail -n 30 "$B/configure.log" >&2; die "configure failed"; }
grep -q '^#define HAVE_OPENSSL_H\|building with SSL support' "$B/configure.log" ||
	die "configure found no OpenSSL (package libssl-dev)"
grep -q 'building with SASL support' "$B/configure.log" ||
	die "configure found no Cyrus SASL (package libsasl2-dev)"
(cd "$B" && make -s -j"$(nproc)" libzookeeper_st.la >make.log 2>&1) ||
	{ tail -n 30 "$B/make.log" >&2; die "make failed"; }
(cd "$B" && make -s install-libLTLIBRARIES install-pkgincludeHEADERS >/dev/null) ||
	die "make install failed"
rm -f "$OUT/lib/libzookeeper_st.la"
nm "$OUT/lib/libzookeeper_st.a" > "$B/symbols" 2>/dev/null || true
grep -q ' T zookeeper_init_ssl$' "$B/symbols" || die "the library built has no zookeeper_init_ssl"
grep -q ' T zookeeper_init_sasl$' "$B/symbols" || die "the library built has no zookeeper_init_sasl"
grep -q ' T zookeeper_init_ssl_ctx$' "$B/symbols" || die "the library built has no zookeeper_init_ssl_ctx (tls-context-and-sasl.patch)"
echo "$STAMP" > "$OUT/.built"
echo "zk-client-build: zookeeper $ZK_VERSION C client with TLS and SASL in $OUT"

#!/bin/bash
# check.sh — the inner test loop: build zklock, install it into a private
# copy of the server, run some of the tests.  No root, no apt, no network.
#
#   bash test/check.sh tap [PREFIX...]   the TAP files test/t/PREFIX*.pl
#                                        (PREFIX: a test number or its
#                                        start, e.g. 800 or 19); none: all
#   bash test/check.sh regress           the pg_regress suite (REGRESS in
#                                        the Makefile)
#   bash test/check.sh unit              the cmocka unit tests (test/unit)
# or: make check-tap T="800 195", make check-regress, make check-unit
#
# Needs the Debian packages of test/install-deps.sh (PostgreSQL $PG_MAJOR
# server and headers, pg_cron, ZooKeeper, Curator, a JDK, cmocka, ...):
# run `bash test/all.sh` or `bash test/install-deps.sh` once as root.  This
# script installs no package; it stops, saying which are missing, if some
# are.
#
# For tap and regress it:
#   1. builds zklock as `make` does, warnings as errors (COPT=-Werror, as
#      test/all.sh), with the system's pg_config;
#   2. on first use copies the system's PostgreSQL (the major test/env.sh
#      picks) into tmp_install/ in the tree: lib/postgresql/N (server,
#      pgxs, pg_regress, the test Perl modules, pg_cron.so),
#      share/postgresql/N (with pg_cron's control and SQL files) and
#      include/postgresql, about 60 MB.  PostgreSQL finds its directories
#      relative to its binary, so the copy's pg_config reports paths under
#      tmp_install/.  The copy is made again when the system server's
#      packages change version (tmp_install/.source records them);
#   3. installs zklock into the copy (make install with the copy's
#      pg_config), only when the built files differ from the installed;
#   4. runs test/run-user-tests.sh with ZKLOCK_PGBIN pointing at the copy:
#      as the current user when not root; as root, as the unprivileged
#      test user (ZKLOCK_TEST_USER, default zklock, made by test/all.sh),
#      in place, because initdb refuses root.  That user only reads the
#      tree and tmp_install/: the tests write under their own mktemp
#      directory in /tmp (run-user-tests.sh), never into the tree.
#
# tmp_install/ is ignored by git and removed by `make clean` (so test/all.sh,
# which starts with make clean, removes it too).  It belongs to the user who
# made it; another non-root user who cannot write into it is told so (the
# fix: remove it, or run as its owner).  KEEP_WORK=1 keeps the test work
# directory (run-user-tests.sh).
set -euo pipefail

cd "$(dirname "$0")/.."
TREE=$(pwd)
# the system's server, whatever ZKLOCK_PGBIN the caller had
unset ZKLOCK_PGBIN
. test/env.sh
# the same whether run by make (check-tap, ...) or by hand: the outer
# make's flags and jobserver do not reach the build below
unset MAKEFLAGS MFLAGS MAKELEVEL
TEST_USER=${ZKLOCK_TEST_USER:-zklock}

die() {
	echo "check.sh: $*" >&2
	exit 1
}

usage() {
	echo "usage: bash test/check.sh tap [PREFIX...] | regress | unit" >&2
	echo "   or: make check-tap [T=\"800 195\"] | check-regress | check-unit" >&2
	exit 2
}

[ $# -ge 1 ] || usage
what=$1
shift
case "$what" in
tap) ;;
regress | unit) [ $# -eq 0 ] || die "$what takes no test names (got: $*)" ;;
*) usage ;;
esac

start=$(date +%s)

# the packages, as test/install-deps.sh would install them
if ! bash test/install-deps.sh --check; then
	die "packages are missing; run once, as root: bash test/install-deps.sh (or bash test/all.sh)"
fi

if [ "$what" = unit ]; then
	echo "=== unit tests of the recipe core (cmocka) ==="
	make -s -C test/unit check
	echo "check.sh: unit passed in $(($(date +%s) - start)) s"
	exit 0
fi

# which TAP files
TAP=""
if [ "$what" = tap ]; then
	if [ $# -eq 0 ]; then
		TAP=$(echo test/t/*.pl)
	fi
	for p in "$@"; do
		p=${p#test/t/}
		p=${p%.pl}
		case "$p" in
		"" | *[!A-Za-z0-9_.-]*) die "bad test name '$p' (want a number or the start of a file name in test/t/)" ;;
		esac
		files=$(compgen -G "test/t/$p*.pl" | sort) ||
			die "no TAP file matches '$p' (test/t/$p*.pl); the files: $(cd test/t && echo *.pl | sed 's/_[^ ]*//g')"
		TAP="$TAP $files"
	done
	TAP=$(echo $TAP | tr ' ' '\n' | awk '!seen[$0]++' | tr '\n' ' ')
	TAP=${TAP% }
fi

# as root the tests run as TEST_USER, who must exist (test/all.sh makes it)
if [ "$(id -u)" -eq 0 ]; then
	id "$TEST_USER" >/dev/null 2>&1 ||
		die "the test user '$TEST_USER' does not exist (as root the tests run as it, initdb refuses root); bash test/all.sh makes it, or: useradd -m -s /bin/bash $TEST_USER"
fi

SYS_PGBIN=$PGBIN
SYS_PG_CONFIG=$PG_CONFIG
[ -x "$SYS_PGBIN/postgres" ] || die "no PostgreSQL $PG_MAJOR server in $SYS_PGBIN"

echo "=== the ZooKeeper C client with TLS and SASL (zk-client-build/build.sh) ==="
bash zk-client-build/build.sh

echo "=== build (PostgreSQL $PG_MAJOR, COPT=-Werror) ==="
make -s PG_CONFIG="$SYS_PG_CONFIG" COPT=-Werror

# the private copy of the server
INST=$TREE/tmp_install
COPY_PGBIN=$INST/lib/postgresql/$PG_MAJOR/bin
COPY_PG_CONFIG=$COPY_PGBIN/pg_config
sys_lib=/usr/lib/postgresql/$PG_MAJOR
sys_share=/usr/share/postgresql/$PG_MAJOR
sys_include=/usr/include/postgresql
for d in "$sys_lib" "$sys_share" "$sys_include"; do
	[ -d "$d" ] || die "$d is missing (expected from the Debian packages)"
done

# source_id: what the copy is made from — the system server's packages
source_id() {
	echo "PostgreSQL $PG_MAJOR: $("$SYS_PGBIN/postgres" --version)"
	dpkg-query -W -f='${Package} ${Version}\n' "postgresql-$PG_MAJOR" \
		"postgresql-server-dev-$PG_MAJOR" "postgresql-$PG_MAJOR-cron" 2>/dev/null || true
}
want=$(source_id)
if [ -f "$INST/.source" ] && [ "$(cat "$INST/.source")" = "$want" ] && [ -x "$COPY_PG_CONFIG" ]; then
	echo "=== server copy: tmp_install/ (PostgreSQL $PG_MAJOR, up to date) ==="
else
	if [ -e "$INST" ]; then
		echo "=== server copy: tmp_install/ is stale or incomplete; made again ==="
		rm -rf "$INST" || die "cannot remove $INST (made by another user? remove it as its owner)"
	else
		echo "=== server copy: tmp_install/ (first use: copy PostgreSQL $PG_MAJOR) ==="
	fi
	# built aside and moved in place, so that an interrupted copy is not
	# taken for a complete one
	new=$INST.new
	rm -rf "$new"
	mkdir -p "$new/lib/postgresql" "$new/share/postgresql" "$new/include"
	cp -a "$sys_lib" "$new/lib/postgresql/"
	cp -a "$sys_share" "$new/share/postgresql/"
	cp -a "$sys_include" "$new/include/"
	echo "$want" > "$new/.source"
	mv "$new" "$INST"
fi
got=$("$COPY_PG_CONFIG" --bindir)
[ "$got" = "$COPY_PGBIN" ] ||
	die "the copy's pg_config reports bindir $got, not $COPY_PGBIN (is the server relocatable?); remove tmp_install/"

# install zklock into the copy when what is built differs from it
pkglibdir=$("$COPY_PG_CONFIG" --pkglibdir)
extdir=$("$COPY_PG_CONFIG" --sharedir)/extension
[ -w "$pkglibdir" ] && [ -w "$extdir" ] ||
	die "cannot write into tmp_install/ (owner: $(stat -c %U "$INST")); as root or its owner: rm -rf tmp_install (or make clean); the next run makes a copy of its own"
stale=""
for f in zklock.so; do
	cmp -s "$f" "$pkglibdir/$f" || stale="$stale $f"
done
for f in zklock.control zklock--*.sql; do
	cmp -s "$f" "$extdir/$f" || stale="$stale $f"
done
if [ -n "$stale" ]; then
	echo "=== install into tmp_install/ (changed:$stale) ==="
	make -s install PG_CONFIG="$COPY_PG_CONFIG"
else
	echo "=== install into tmp_install/: up to date ==="
fi

# run the tests: the unprivileged test user when root
cmd=$(printf 'cd %q && ZKLOCK_PGBIN=%q TAP_TESTS=%q KEEP_WORK=%q exec bash test/run-user-tests.sh %q' \
	"$TREE" "$COPY_PGBIN" "$TAP" "${KEEP_WORK:-}" "$what")
if [ "$(id -u)" -eq 0 ]; then
	# the test user reads the tree and the copy in place; it writes none of it
	unreadable=$(su "$TEST_USER" -s /bin/bash -c "$(printf 'cd %q 2>&1 && find Makefile expected sql test \( ! -readable -o -type d ! -executable \) -print 2>&1 | head -n 3; [ -x %q/postgres ] || echo %q/postgres' \
		"$TREE" "$COPY_PGBIN" "$COPY_PGBIN")") || true
	[ -z "$unreadable" ] ||
		die "the test user '$TEST_USER' cannot read the tree (as root the tests run as that user, in place): $unreadable ...; make the tree and its parent directories readable to it (chmod -R o+rX), or use bash test/all.sh, which tests a copy"
	echo "=== as $TEST_USER: run-user-tests.sh $what${TAP:+ ($TAP)} ==="
	status=0
	su "$TEST_USER" -s /bin/bash -c "$cmd" || status=$?
else
	echo "=== run-user-tests.sh $what${TAP:+ ($TAP)} ==="
	status=0
	bash -c "$cmd" || status=$?
fi
echo "check.sh: $what $([ $status -eq 0 ] && echo passed || echo FAILED) in $(($(date +%s) - start)) s"
exit $status

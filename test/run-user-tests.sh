#!/bin/bash
# run-user-tests.sh — the PostgreSQL parts of the test suite, run as an
# unprivileged user from a tree that user owns (initdb refuses root).
# Expects zklock to be built and installed (make install) already.
#   run-user-tests.sh [regress] [tap] [bench]   (default: regress tap)
#   run-user-tests.sh adversary [--minutes N] [--seed S] [--mode M]
#                     only the randomized adversary (test/t/905_adversary.pl),
#                     its load running N minutes (default: its own, 150 s),
#                     from seed S (default: drawn, and printed), against a
#                     standalone ZooKeeper or an ensemble (M; default: the
#                     seed draws it)
set -uo pipefail

cd "$(dirname "$0")/.."
REPO=$(pwd)
. test/env.sh
export PATH="$PGBIN:$PATH"
PGXS=$("$PG_CONFIG" --pgxs)
PG_REGRESS=$(dirname "$(dirname "$PGXS")")/test/regress/pg_regress
export PG_REGRESS

what=""
adv_minutes=""
adv_seed=""
adv_mode=""
while [ $# -gt 0 ]; do
	case "$1" in
	--minutes) adv_minutes=${2:?--minutes needs a number}; shift 2 ;;
	--seed) adv_seed=${2:?--seed needs a number}; shift 2 ;;
	--mode) adv_mode=${2:?--mode needs standalone or ensemble}; shift 2 ;;
	*) what="$what $1"; shift ;;
	esac
done
what="${what:-regress tap}"
status=0
# ZKLOCK_KEEP_LOGS=1: the servers' folders and the TAP files' tmp_check go
# under /var/tmp and stay there (inside a Debian root, /tmp is a tmpfs that
# goes with the root; /var/tmp stays with ZKLOCK_KEEP_ROOT=1)
if [ -n "${ZKLOCK_KEEP_LOGS:-}" ]; then
	WORK=$(mktemp -d /var/tmp/zklock-test.XXXXXX)
	KEEP_WORK=1
	echo "run-user-tests: the logs stay in $WORK"
else
	WORK=$(mktemp -d /tmp/zklock-test.XXXXXX)
fi
ZKDIR="$WORK/zk"

REGRESS_DATA=""

cleanup() {
	[ -z "$REGRESS_DATA" ] || pg_ctl -D "$REGRESS_DATA" -m immediate -w stop >/dev/null 2>&1 || true
	test/zk/zk.sh stop "$ZKDIR" >/dev/null 2>&1 || true
	[ -n "${KEEP_WORK:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT

# slow_first FILES...: the same files, those that take longest first (as
# measured on Debian 12, doc/testing.md), so that files running side by
# side end at about the same time; the others keep their order
slow_first() {
	local slow="905 195 900 901 603 304 502 405 503 400" n f
	for n in $slow; do
		for f in "$@"; do
			case "$(basename "$f")" in "${n}"_*) echo "$f" ;; esac
		done
	done
	for f in "$@"; do
		case " $slow " in *" $(basename "$f" | cut -d_ -f1) "*) ;; *) echo "$f" ;; esac
	done
}

# run_prove SECONDS FILES...: the TAP files, bounded in time, ZKLOCK_TAP_JOBS
# of them at once (default 2), and 195, which only waits, beside them.  A file spends most of its time waiting on
# timers (session timeouts, leases, ZooKeeper's ticks) rather than on a
# CPU, and each has servers, ports and folders of its own, so two of them
# do not meet.  One at a time (ZKLOCK_TAP_JOBS=1, or a single file), prove
# shows every test point as it comes; several at a time, only each file's
# result, and on a failure the failed files' own logs are shown.  On a
# failure the status is 1.
run_prove() {
	local limit=$1 jobs=${ZKLOCK_TAP_JOBS:-2} rc f name failed
	shift
	export TESTDIR="$WORK/tap"
	mkdir -p "$TESTDIR"
	local inc=(-I "$(dirname "$(dirname "$PGXS")")/test/perl" -I test/perl)
	if [ "$jobs" -le 1 ] || [ $# -le 1 ]; then
		timeout "$limit" prove -v --timer "${inc[@]}" "$@"
		rc=$?
		failed=""
	else
		# A file that only waits runs in a lane of its own beside the
		# others: 195 waits for pg_cron's minutes (about 10 s of CPU in
		# 150 s of wall time).
		local idle=() rest=() idle_pid="" irc=0
		for f in "$@"; do
			case "$(basename "$f")" in 195_*) idle+=("$f") ;; *) rest+=("$f") ;; esac
		done
		if [ ${#idle[@]} -eq 0 ] || [ ${#rest[@]} -eq 0 ]; then
			rest=("$@")
			idle=()
		else
			timeout "$limit" prove --timer "${inc[@]}" "${idle[@]}" >"$WORK/prove-idle.out" 2>&1 &
			idle_pid=$!
		fi
		# shellcheck disable=SC2046
		timeout "$limit" prove -j"$jobs" --timer "${inc[@]}" $(slow_first "${rest[@]}") | tee "$WORK/prove.out"
		rc=${PIPESTATUS[0]}
		if [ -n "$idle_pid" ]; then
			wait "$idle_pid"
			irc=$?
			echo "--- beside them: ${idle[*]}"
			tee -a "$WORK/prove.out" <"$WORK/prove-idle.out"
			[ $irc -eq 0 ] || rc=$irc
		fi
		failed=$(sed -n '/^Test Summary Report/,$p' "$WORK/prove.out" | grep -oE '^test/t/[^ ]+\.pl' | sort -u)
	fi
	[ $rc -ne 0 ] || return 0
	status=1
	if [ -n "$failed" ]; then
		for f in $failed; do
			name=$(basename "$f" .pl)
			echo "--- the output of $f (tmp_check/log/regress_log_$name)"
			cat "$TESTDIR/tmp_check/log/regress_log_$name" 2>/dev/null | tail -n 300
			for f in "$TESTDIR/tmp_check/log/${name}"_*; do
				[ -f "$f" ] || continue
				echo "--- tail of $f"
				tail -n 40 "$f"
			done
		done
	else
		for f in "$TESTDIR"/tmp_check/log/*; do
			[ -f "$f" ] || continue
			echo "--- tail of $f"
			tail -n 40 "$f"
		done
	fi
}

# the Java peers of test/java, compiled once for every TAP file
# (ZklockTest::java_classes)
compile_java() {
	export ZKLOCK_JAVA_CLASSES="$WORK/java"
	bash test/java/build.sh "$ZKLOCK_JAVA_CLASSES" || { echo "javac of test/java failed"; exit 1; }
}

if [[ " $what " == *" regress "* ]]; then
	echo "=== pg_regress (private ZooKeeper, an ordinary PostgreSQL server) ==="
	# the list is the Makefile's REGRESS, written once
	REGRESS_TESTS=$(sed -n 's/^REGRESS = //p' Makefile)
	[ -n "$REGRESS_TESTS" ] || { echo "no REGRESS list in the Makefile"; exit 1; }
	# a ZooKeeper that ticks as Debian's zookeeper package configures it
	# (tickTime=2000; session timeouts from 4 s to 40 s, ZooKeeper's
	# defaults for that tick), over test/zk/zk.sh's faster test values
	mkdir -p "$ZKDIR"
	printf 'tickTime=2000\nminSessionTimeout=4000\nmaxSessionTimeout=40000\n' >"$ZKDIR/zoo-extra.cfg"
	ZKPORT=$(test/zk/zk.sh start "$ZKDIR") || { echo "could not start ZooKeeper"; exit 1; }
	# the server `make installcheck` runs against (doc/testing.md): the
	# postgresql.conf initdb writes plus the two settings zklock needs,
	# nothing else; where it listens (a socket in the work folder, no TCP
	# port) is said on the command line
	REGRESS_DATA="$WORK/regress-data"
	REGRESS_SOCK="$WORK/regress-sock"
	mkdir -p "$REGRESS_SOCK"
	if ! initdb -D "$REGRESS_DATA" >"$WORK/regress-initdb.log" 2>&1; then
		cat "$WORK/regress-initdb.log"
		echo "initdb failed"
		exit 1
	fi
	cat >>"$REGRESS_DATA/postgresql.conf" <<CONF
shared_preload_libraries = 'zklock'
zklock.hosts = '127.0.0.1:$ZKPORT'
CONF
	if ! pg_ctl -D "$REGRESS_DATA" -l "$WORK/regress-server.log" -w \
			-o "-c listen_addresses='' -k $REGRESS_SOCK" start >/dev/null; then
		tail -n 40 "$WORK/regress-server.log"
		echo "the server did not start"
		exit 1
	fi
	# as `make installcheck` runs it (PGXS's REGRESS_OPTS), against that server
	if ! timeout 600 "$PG_REGRESS" --host="$REGRESS_SOCK" \
			--bindir="$PGBIN" \
			--inputdir="$REPO" --outputdir="$WORK/regress-out" \
			--dbname=contrib_regression --encoding=UTF8 --no-locale \
			$REGRESS_TESTS; then
		cat "$WORK/regress-out/regression.diffs" 2>/dev/null
		tail -n 40 "$WORK/regress-server.log"
		status=1
	fi
	pg_ctl -D "$REGRESS_DATA" -m fast -w stop >/dev/null 2>&1
	REGRESS_DATA=""
	test/zk/zk.sh stop "$ZKDIR" >/dev/null 2>&1
fi

if [[ " $what " == *" tap "* ]]; then
	echo "=== TAP tests (PostgreSQL::Test::Cluster, ZooKeeper, Curator) ==="
	compile_java
	run_prove 2400 ${TAP_TESTS:-test/t/*.pl}
fi

if [[ " $what " == *" adversary "* ]]; then
	echo "=== the adversary (test/t/905_adversary.pl)${adv_minutes:+ for $adv_minutes minutes}${adv_seed:+, seed $adv_seed}${adv_mode:+, $adv_mode} ==="
	[ -n "$adv_minutes" ] && export ZKLOCK_ADVERSARY_SECONDS=$(( adv_minutes * 60 ))
	[ -n "$adv_seed" ] && export ZKLOCK_ADVERSARY_SEED=$adv_seed
	[ -n "$adv_mode" ] && export ZKLOCK_ADVERSARY_MODE=$adv_mode
	compile_java
	run_prove $(( ${ZKLOCK_ADVERSARY_SECONDS:-150} + 900 )) test/t/905_adversary.pl
fi

if [[ " $what " == *" bench "* ]]; then
	test/bench/run.sh || status=1
fi

exit $status

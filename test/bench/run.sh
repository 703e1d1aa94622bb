#!/bin/bash
#
# test/bench/run.sh
#	Lock-cycle benchmark: raw C client vs Curator vs zklock through SQL,
#	in one run, against one private ZooKeeper server started here.
#
# Usage: run.sh [--only raw,curator,sql] [--seconds N] [--pg-seconds N] [--fsync]
#
#	raw      test/bench/raw_cycle.c (libzookeeper_st): create
#	         EPHEMERAL_SEQUENTIAL + get_children + delete, pipelined on one
#	         session
#	curator  test/bench/CuratorBench.java: InterProcessMutex acquire+release,
#	         one CuratorFramework, 1/8/32 threads
#	sql      private PostgreSQL cluster (15 or 17) with zklock preloaded, pgbench
#	         scripts doing zk_mutex_acquire + zk_mutex_release, 1/8/32 clients
#
# Run as root or as an unprivileged user.  As root, the PostgreSQL part runs
# as user "zklock" (initdb and pg_ctl refuse root).  Everything started here
# is stopped on exit.  Durations can also be set with BENCH_SECONDS and
# BENCH_PG_SECONDS.
#
# The server runs with forceSync=no by default: the disk of a shared test
# machine makes fsync latency the noisiest term, and it is the same for all
# three clients.  --fsync (or BENCH_ZK_FSYNC=yes) measures with fsync.
#
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$HERE/../env.sh"		# PGBIN of this platform's PostgreSQL, a sane environment
JAVA_CP_CURATOR=/usr/share/java/curator-recipes.jar:/usr/share/java/slf4j-nop.jar
PG_USER=zklock

SECS=${BENCH_SECONDS:-8}		# raw and Curator window per shape
PG_SECS=${BENCH_PG_SECONDS:-10}	# pgbench -T per shape
WARMUP=${BENCH_WARMUP:-3}		# server / JVM / backend warm-up, excluded
ZK_FSYNC=${BENCH_ZK_FSYNC:-no}	# ZooKeeper forceSync

# shapes: name, in flight, distinct|shared
SHAPES="1:1:distinct 8d:8:distinct 32d:32:distinct 8s:8:shared 32s:32:shared"

log() { echo "[bench $(date +%H:%M:%S)] $*" >&2; }
die() { echo "run.sh: $*" >&2; exit 1; }

# free_port: a port on 127.0.0.1 that nobody listens on right now
free_port() {
	perl -MIO::Socket::INET -e '
		my $s = IO::Socket::INET->new(LocalAddr => "127.0.0.1", LocalPort => 0,
		                              Listen => 1) or die "bind: $!";
		print $s->sockport, "\n";'
}

# four_letter PORT CMD: send a ZooKeeper four-letter word, print the answer
four_letter() {
	perl -MIO::Socket::INET -e '
		my $s = IO::Socket::INET->new(PeerAddr => "127.0.0.1",
		                              PeerPort => $ARGV[0], Timeout => 2) or exit 1;
		print $s $ARGV[1]; shutdown($s, 1);
		local $/; my $r = <$s>; print $r if defined $r;' "$1" "$2" 2>/dev/null || true
}

# percentiles FILE...: p50 and p99 (nearest rank) of one number per line
percentiles() {
	sort -n "$@" | awk '{ v[NR] = $1 }
		END {
			if (NR == 0) { print "0 0"; exit }
			r50 = int(0.50 * NR + 0.999999); r99 = int(0.99 * NR + 0.999999)
			if (r50 < 1) r50 = 1; if (r99 > NR) r99 = NR
			print v[r50], v[r99]
		}'
}

###########################################################################
# PostgreSQL part: runs as an unprivileged user.
#	sql_part ZKPORT RESULTFILE
# writes lines "sql SHAPE CPS P50 P99 AVG" and "floor 1 CPS P50 P99 AVG"
###########################################################################
sql_part() {
	local zkport=$1 out=$2
	local pgtmp pgport pgdata

	pgtmp=$(mktemp -d /tmp/zklock-bench-pg.XXXXXX)
	pgdata=$pgtmp/data
	pgport=$(free_port)
	PG_TMP=$pgtmp
	PG_DATA=$pgdata
	trap 'sql_cleanup' EXIT
	trap 'exit 130' INT TERM

	log "initdb in $pgdata (port $pgport)"
	"$PGBIN/initdb" -D "$pgdata" -A trust --no-sync -E UTF8 --locale=C \
		>"$pgtmp/initdb.log" 2>&1 || { cat "$pgtmp/initdb.log" >&2; die "initdb failed"; }
	cat >>"$pgdata/postgresql.conf" <<EOF

# zklock benchmark
port = $pgport
listen_addresses = '127.0.0.1'
unix_socket_directories = '$pgtmp'
max_connections = 100
shared_preload_libraries = 'zklock'
zklock.hosts = '127.0.0.1:$zkport'
zklock.max_requests = 1024
fsync = off
synchronous_commit = off
log_min_messages = warning
EOF
	"$PGBIN/pg_ctl" -D "$pgdata" -l "$pgtmp/postgres.log" -w -t 60 start >/dev/null \
		|| { tail -n 30 "$pgtmp/postgres.log" >&2; die "postgres did not start"; }

	local psql=("$PGBIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$pgtmp" -p "$pgport" -d postgres)
	"${psql[@]}" -c "CREATE EXTENSION zklock" \
		|| { tail -n 30 "$pgtmp/postgres.log" >&2; die "CREATE EXTENSION zklock failed"; }

	# the worker's session must be up before measuring
	local state="" i
	for i in $(seq 1 150); do
		state=$("${psql[@]}" -At -c "SELECT state FROM zk_status()" 2>/dev/null || true)
		[ "$state" = connected ] && break
		sleep 0.1
	done
	[ "$state" = connected ] || { tail -n 30 "$pgtmp/postgres.log" >&2; die "zklock worker not connected (state '$state')"; }

	# pgbench scripts: one transaction = one lock cycle
	cat >"$pgtmp/distinct.sql" <<'EOF'
SELECT zk_mutex_acquire('/bench/sql/d/c' || :client_id);
SELECT zk_mutex_release('/bench/sql/d/c' || :client_id);
EOF
	cat >"$pgtmp/shared.sql" <<'EOF'
SELECT zk_mutex_acquire('/bench/sql/shared');
SELECT zk_mutex_release('/bench/sql/shared');
EOF
	cat >"$pgtmp/floor.sql" <<'EOF'
SELECT 1;
SELECT 1;
EOF

	# run_pgbench NAME SCRIPT CLIENTS SECONDS [record]
	run_pgbench() {
		local name=$1 script=$2 clients=$3 secs=$4 record=${5:-}
		local jobs=2 outf=$pgtmp/pgbench_$name.out rc=0

		[ "$clients" -lt "$jobs" ] && jobs=$clients
		rm -f "$pgtmp"/log_"$name".*
		"$PGBIN/pgbench" -n -f "$pgtmp/$script" -c "$clients" -j "$jobs" \
			-T "$secs" -M prepared --log --log-prefix="$pgtmp/log_$name" \
			-h "$pgtmp" -p "$pgport" postgres >"$outf" 2>&1 || rc=$?
		if [ $rc -ne 0 ] || grep -q -E "aborted|ERROR" "$outf"; then
			cat "$outf" >&2
			tail -n 20 "$pgtmp/postgres.log" >&2
			die "pgbench $name failed"
		fi
		[ -n "$record" ] || return 0

		local tps lat p
		tps=$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' "$outf" | head -n 1)
		lat=$(sed -n 's/^latency average = \([0-9.]*\) ms.*/\1/p' "$outf" | head -n 1)
		# log line: client_id transaction_no time(us) script_no epoch epoch_us
		p=$(cat "$pgtmp"/log_"$name".* | awk '{ print $3 }' | percentiles)
		echo "$record $(awk -v t="$tps" -v l="$lat" 'BEGIN { printf "%.0f", t }') $p $(awk -v l="$lat" 'BEGIN { printf "%.0f", l * 1000 }')" >>"$out"
		log "  $name: tps=$tps p50/p99(us)=$p avg(ms)=$lat"
	}

	log "pgbench warm-up (${WARMUP}s, not counted)"
	run_pgbench warmup distinct.sql 8 "$WARMUP"
	log "pgbench floor: SELECT 1; SELECT 1; at 1 client"
	run_pgbench floor floor.sql 1 "$PG_SECS" "floor 1"
	local s name n shape
	for s in $SHAPES; do
		IFS=: read -r name n shape <<<"$s"
		log "pgbench $shape, $n clients, ${PG_SECS}s"
		run_pgbench "$name" "$shape.sql" "$n" "$PG_SECS" "sql $name"
	done

	local left
	left=$("${psql[@]}" -At -c "SELECT count(*) FROM zk_locks" 2>/dev/null || echo "?")
	[ "$left" = 0 ] || log "warning: zk_locks still shows $left rows after the runs"
}

sql_cleanup() {
	if [ -n "${PG_DATA:-}" ] && [ -f "$PG_DATA/postmaster.pid" ]; then
		"$PGBIN/pg_ctl" -D "$PG_DATA" -m immediate -w stop >/dev/null 2>&1 || true
	fi
	if [ -n "${PG_TMP:-}" ] && [ -z "${BENCH_KEEP:-}" ]; then
		rm -rf "$PG_TMP"
	fi
}

# re-entry point for the PostgreSQL part (as the unprivileged user)
if [ "${1:-}" = "--sql-part" ]; then
	sql_part "$2" "$3"
	exit 0
fi

###########################################################################
# Main part
###########################################################################
ONLY=raw,curator,sql
while [ $# -gt 0 ]; do
	case $1 in
		--only) ONLY=$2; shift 2 ;;
		--only=*) ONLY=${1#--only=}; shift ;;
		--seconds) SECS=$2; shift 2 ;;
		--pg-seconds) PG_SECS=$2; shift 2 ;;
		--fsync) ZK_FSYNC=yes; shift ;;
		-h|--help) sed -n '2,24p' "$0"; exit 0 ;;
		*) die "unknown argument: $1" ;;
	esac
done
want() { [[ ",$ONLY," == *",$1,"* ]]; }
for w in ${ONLY//,/ }; do
	case $w in raw|curator|sql) ;; *) die "--only takes raw, curator, sql" ;; esac
done

# check the extension first: no point in running the rest without it
if want sql; then
	pkglib=$("$PGBIN/pg_config" --pkglibdir)
	sharedir=$("$PGBIN/pg_config" --sharedir)
	[ -f "$pkglib/zklock.so" ] && [ -f "$sharedir/extension/zklock.control" ] \
		|| die "zklock is not installed (cd /work/main && make && make install), or use --only raw,curator"
	if [ "$(id -u)" = 0 ]; then
		id "$PG_USER" >/dev/null 2>&1 || useradd -m "$PG_USER"
	fi
fi

WORK=$(mktemp -d /tmp/zklock-bench.XXXXXX)
chmod 755 "$WORK"
ZK_PID=""
cleanup() {
	if [ -n "$ZK_PID" ]; then
		kill "$ZK_PID" 2>/dev/null || true
		wait "$ZK_PID" 2>/dev/null || true
	fi
	if [ -z "${BENCH_KEEP:-}" ]; then
		rm -rf "$WORK"
	else
		log "kept $WORK"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

RESULTS=$WORK/results
: >"$RESULTS"

# build the clients
if want raw; then
	log "building raw_cycle"
	gcc -O2 -Wall -o "$WORK/raw_cycle" "$HERE/raw_cycle.c" -lzookeeper_st
fi
if want curator; then
	log "building CuratorBench"
	mkdir -p "$WORK/classes"
	javac -nowarn -encoding UTF-8 -d "$WORK/classes" -cp "$JAVA_CP_CURATOR" "$HERE/CuratorBench.java"
fi

# private ZooKeeper server
ZK_PORT=$(free_port)
mkdir -p "$WORK/zkdata"
cat >"$WORK/zoo.cfg" <<EOF
tickTime=2000
dataDir=$WORK/zkdata
clientPort=$ZK_PORT
clientPortAddress=127.0.0.1
admin.enableServer=false
4lw.commands.whitelist=*
maxClientCnxns=0
forceSync=$ZK_FSYNC
EOF
log "starting ZooKeeper on 127.0.0.1:$ZK_PORT"
java -Xmx512m -cp /usr/share/java/zookeeper.jar \
	org.apache.zookeeper.server.ZooKeeperServerMain "$WORK/zoo.cfg" \
	>"$WORK/zookeeper.log" 2>&1 &
ZK_PID=$!
for i in $(seq 1 100); do
	# imok comes before the server serves: also wait for srvr to show its mode
	[ "$(four_letter "$ZK_PORT" ruok)" = imok ] &&
		four_letter "$ZK_PORT" srvr | grep -q '^Mode:' && break
	kill -0 "$ZK_PID" 2>/dev/null || { cat "$WORK/zookeeper.log" >&2; die "ZooKeeper exited"; }
	sleep 0.2
done
[ "$(four_letter "$ZK_PORT" ruok)" = imok ] || die "ZooKeeper did not answer ruok"
ZK=127.0.0.1:$ZK_PORT

# the server's JIT warms up on whatever runs first: give it the same start
# for everyone, with a raw run that is not counted
if want raw; then
	"$WORK/raw_cycle" "$ZK" 32 distinct "$WARMUP" >/dev/null
else
	log "server warm-up with Curator happens inside its own warm-up"
fi

# (a) raw C client
if want raw; then
	for s in $SHAPES; do
		IFS=: read -r name n shape <<<"$s"
		log "raw: $n in flight, $shape, ${SECS}s"
		line=$("$WORK/raw_cycle" "$ZK" "$n" "$shape" "$SECS" 0.5) || die "raw_cycle failed"
		echo "$line" | awk -v name="$name" '{
			for (i = 1; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
			print "raw", name, f["cps"], f["p50"], f["p99"], f["avg"] }' >>"$RESULTS"
		log "  $line"
	done
fi

# (b) Curator
if want curator; then
	modes=""
	for s in $SHAPES; do
		IFS=: read -r name n shape <<<"$s"
		modes="$modes $n:$shape"
	done
	log "curator: ${WARMUP}s JVM warm-up, then$modes, ${SECS}s each"
	# shellcheck disable=SC2086
	java -Xms256m -Xmx512m -cp "$WORK/classes:$JAVA_CP_CURATOR" CuratorBench \
		"$ZK" "$SECS" "$WARMUP" $modes >"$WORK/curator.out" || die "CuratorBench failed"
	while read -r line; do
		log "  $line"
		echo "$line" | awk '/^RESULT/ {
			for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
			name = f["threads"]
			if (f["threads"] != 1) name = name (f["shape"] == "shared" ? "s" : "d")
			print "curator", name, f["cps"], f["p50"], f["p99"], f["avg"] }' >>"$RESULTS"
	done <"$WORK/curator.out"
fi

# (c) zklock through SQL
if want sql; then
	if [ "$(id -u)" = 0 ]; then
		: >"$WORK/sql.results"
		chown "$PG_USER" "$WORK/sql.results"
		runuser -u "$PG_USER" -- env BENCH_PG_SECONDS="$PG_SECS" BENCH_WARMUP="$WARMUP" \
			BENCH_KEEP="${BENCH_KEEP:-}" PGBIN="$PGBIN" \
			bash "$HERE/run.sh" --sql-part "$ZK_PORT" "$WORK/sql.results" \
			|| die "PostgreSQL part failed"
	else
		: >"$WORK/sql.results"
		env BENCH_PG_SECONDS="$PG_SECS" BENCH_WARMUP="$WARMUP" \
			BENCH_KEEP="${BENCH_KEEP:-}" PGBIN="$PGBIN" \
			bash "$HERE/run.sh" --sql-part "$ZK_PORT" "$WORK/sql.results" \
			|| die "PostgreSQL part failed"
	fi
	cat "$WORK/sql.results" >>"$RESULTS"
fi

# ZooKeeper server view, for the record
log "zookeeper: $(four_letter "$ZK_PORT" srvr | grep -E 'Latency|Outstanding|Node count' | tr '\n' ' ')"

###########################################################################
# Table
###########################################################################
echo
echo "Lock cycle = acquire + release (raw: create EPHEMERAL_SEQUENTIAL + get_children + delete)."
# versions as installed (Debian 12: ZooKeeper 3.8, Curator 5.4, PostgreSQL 15;
# Debian 13: ZooKeeper 3.9, Curator 5.7, PostgreSQL 17)
pkg_version() { dpkg-query -W -f='${Version}' "$1" 2>/dev/null | sed 's/^[0-9]*://; s/[-+~].*//'; }
echo "Debian ${ZKLOCK_DEBIAN:-?}: ZooKeeper $(pkg_version zookeeper), Curator $(pkg_version libcurator-recipes-java), PostgreSQL $PG_MAJOR."
echo "Same ZooKeeper standalone server for all three (forceSync=$ZK_FSYNC), $(nproc) CPUs; raw/Curator ${SECS}s, pgbench -T ${PG_SECS} per shape."
echo "cyc/s = completed cycles per second; p50/p99 = latency of one cycle in microseconds;"
echo "ratios: cyc/s higher is better for zklock, p50 lower is better for zklock."
echo
awk -v shapes="$SHAPES" '
	{ cps[$1, $2] = $3; p50[$1, $2] = $4; p99[$1, $2] = $5; have[$1] = 1 }
	function v(sys, sh, arr) { return ((sys, sh) in arr) ? arr[sys, sh] : "-" }
	function ratio(a, b) { return (a == "-" || b == "-" || b + 0 == 0) ? "-" : sprintf("%.2f", a / b) }
	END {
		label["1"] = "1 in flight"; label["8d"] = "8 distinct"; label["32d"] = "32 distinct"
		label["8s"] = "8 shared"; label["32s"] = "32 shared"
		printf "%-12s | %-23s | %-23s | %-23s | %-13s | %-13s\n", "", "raw C", "Curator", "zklock SQL", "zklock/Curator", "zklock/raw"
		printf "%-12s | %7s %7s %7s | %7s %7s %7s | %7s %7s %7s | %6s %6s | %6s %6s\n", "shape",
			"cyc/s", "p50", "p99", "cyc/s", "p50", "p99", "cyc/s", "p50", "p99",
			"cyc/s", "p50", "cyc/s", "p50"
		printf "%s\n", "-------------+-------------------------+-------------------------+-------------------------+---------------+--------------"
		n = split(shapes, list, " ")
		for (i = 1; i <= n; i++) {
			split(list[i], part, ":"); sh = part[1]
			printf "%-12s | %7s %7s %7s | %7s %7s %7s | %7s %7s %7s | %6s %6s | %6s %6s\n", label[sh],
				v("raw", sh, cps), v("raw", sh, p50), v("raw", sh, p99),
				v("curator", sh, cps), v("curator", sh, p50), v("curator", sh, p99),
				v("sql", sh, cps), v("sql", sh, p50), v("sql", sh, p99),
				ratio(v("sql", sh, cps), v("curator", sh, cps)),
				ratio(v("sql", sh, p50), v("curator", sh, p50)),
				ratio(v("sql", sh, cps), v("raw", sh, cps)),
				ratio(v("sql", sh, p50), v("raw", sh, p50))
		}
		if (("floor", "1") in cps)
			printf "\nPostgreSQL floor (pgbench SELECT 1; SELECT 1;, 1 client): %s tx/s, p50 %s us, p99 %s us\n",
				cps["floor", "1"], p50["floor", "1"], p99["floor", "1"]
	}' "$RESULTS"

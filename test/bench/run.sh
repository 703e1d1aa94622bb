#!/bin/bash
#
# test/bench/run.sh
#	Lock-cycle benchmark: raw C client vs Curator vs zklock through SQL,
#	in one run, against one private ZooKeeper server started here.
#
# Usage: run.sh [--only raw,curator,sql] [--shapes 1,8d,...] [--runs N]
#               [--seconds N] [--pg-seconds N]
#               [--fsync-only | --nofsync-only]
#
#	raw      test/bench/raw_cycle.c (libzookeeper_st): create
#	         EPHEMERAL_SEQUENTIAL + get_children + delete, pipelined on one
#	         session (mutex shapes only: the protocol floor of a mutex cycle)
#	curator  test/bench/CuratorBench.java: one CuratorFramework, N threads,
#	         each with its own InterProcessMutex / InterProcessReadWriteLock /
#	         InterProcessSemaphoreV2
#	sql      private PostgreSQL cluster (15 or 17) with zklock preloaded,
#	         pgbench scripts doing acquire + release, N clients
#
# Shapes (name: sessions, what):
#	1          mutex, 1 in flight, own path
#	8d, 32d    mutex, 8 / 32 sessions on distinct paths
#	8s, 32s, 200s  mutex, 8 / 32 / 200 sessions on one shared path
#	r8, w8     read lock / write lock, 8 sessions on one path
#	sem16      semaphore of 4 leases, 16 sessions on one path
#
# Every shape runs once with the ZooKeeper server at forceSync=no and once
# at forceSync=yes (the server is restarted on a fresh data directory
# between the two); --fsync-only (or the old --fsync) and --nofsync-only run
# one of them.  --runs N measures each shape N times per system, the three
# systems one after the other in each round, and reports medians.  Besides
# cycles/s and latency, it reports CPU per cycle: the whole machine's and
# the ZooKeeper server's, from /proc, over the window the cycles are
# counted in.  Nothing is asserted: it prints a table per forceSync setting
# and the ratios in words.
#
# Run as root or as an unprivileged user.  As root, the PostgreSQL part runs
# as user "zklock" (initdb and pg_ctl refuse root).  Everything started here
# is stopped on exit.  Environment: BENCH_SECONDS, BENCH_PG_SECONDS,
# BENCH_WARMUP, BENCH_RUNS, BENCH_SHAPES (comma list), BENCH_ZK_FSYNC
# (both, yes or no), BENCH_ZK_DIR (where ZooKeeper's data directories go,
# default /var/tmp: /tmp may be a tmpfs), BENCH_KEEP (keep the work
# directories).
#
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$HERE/../env.sh"		# PGBIN of this platform's PostgreSQL, a sane environment
JAVA_CP_CURATOR=/usr/share/java/curator-recipes.jar:/usr/share/java/slf4j-nop.jar
PG_USER=zklock

SECS=${BENCH_SECONDS:-5}		# raw and Curator window per shape
PG_SECS=${BENCH_PG_SECONDS:-6}	# pgbench -T per shape
WARMUP=${BENCH_WARMUP:-2}		# server / JVM / backend warm-up, excluded
ZK_FSYNC=${BENCH_ZK_FSYNC:-both}	# ZooKeeper forceSync: both, yes, no
RUNS=${BENCH_RUNS:-1}			# measurements per system and shape
SEM_MAX=4						# leases of the semaphore shape

# shapes: name, sessions (threads, clients, in-flight slots), kind; kind is
# distinct|shared (mutex), read|write (read/write lock) or semaphore
ALL_SHAPES="1:1:distinct 8d:8:distinct 32d:32:distinct 8s:8:shared 32s:32:shared 200s:200:shared r8:8:read w8:8:write sem16:16:semaphore"

log() { echo "[bench $(date +%H:%M:%S)] $*" >&2; }
die() { echo "run.sh: $*" >&2; exit 1; }

# select_shapes NAMES: the entries of ALL_SHAPES named in the comma list
# NAMES ("" = all), in ALL_SHAPES order
select_shapes() {
	local s name out=""
	for s in $ALL_SHAPES; do
		name=${s%%:*}
		if [ -z "$1" ] || [[ ",$1," == *",$name,"* ]]; then
			out="$out $s"
		fi
	done
	echo "${out# }"
}

# free_port: a port on 127.0.0.1 that nobody listens on right now
free_port() {
	perl -MIO::Socket::INET -e '
		my $s = IO::Socket::INET->new(LocalAddr => "127.0.0.1", LocalPort => 0,
		                              Listen => 1) or die "bind: $!";
		print $s->sockport, "\n";'
}

# four_letter PORT CMD: send a ZooKeeper four-letter word, print the answer
# (nothing after 5 s: a server still starting may accept and never answer)
four_letter() {
	perl -MIO::Socket::INET -e '
		alarm 5;
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

# machine_ticks: CPU time of the whole machine so far, in clock ticks: the
# "cpu" line of /proc/stat summed over user, nice, system, irq, softirq and
# steal, i.e. everything but idle and iowait (guest is already in user)
machine_ticks() {
	local cpu user nice system idle iowait irq softirq steal rest
	read -r cpu user nice system idle iowait irq softirq steal rest </proc/stat
	echo $((user + nice + system + irq + softirq + ${steal:-0}))
}

# proc_ticks PID: utime + stime of a process in clock ticks (fields 14 and
# 15 of /proc/PID/stat, counted after the command name in parentheses);
# -1 when unknown
proc_ticks() {
	local stat f
	if [ -z "${1:-}" ] || ! stat=$(cat "/proc/$1/stat" 2>/dev/null); then
		echo -1
		return
	fi
	read -r -a f <<<"${stat##*") "}"
	echo $((f[11] + f[12]))
}

###########################################################################
# PostgreSQL part: runs as an unprivileged user.
#	sql_part ZKPORT RESULTFILE ZKPID
# writes lines "sql SHAPE CPS P50 P99 AVG CYCLES CPU_TICKS ZK_TICKS" and
# "floor 1 ..." the same way; the ticks are read right before and after
# each pgbench -T run, so its connection setup is inside the window
###########################################################################
sql_part() {
	local zkport=$1 out=$2 zkpid=$3
	local pgtmp pgport pgdata

	# under the main part's work directory, so that its cleanup finds
	# whatever a cut-short cleanup here leaves behind
	pgtmp=$(mktemp -d "${BENCH_PG_PARENT:-/tmp}/zklock-bench-pg.XXXXXX")
	pgdata=$pgtmp/data
	pgport=$(free_port)
	PG_TMP=$pgtmp
	PG_DATA=$pgdata
	trap 'sql_cleanup' EXIT
	trap 'exit 130' INT TERM

	log "initdb in $pgdata (port $pgport)"
	"$PGBIN/initdb" -D "$pgdata" -A trust --no-sync -E UTF8 --locale=C \
		>"$pgtmp/initdb.log" 2>&1 || { cat "$pgtmp/initdb.log" >&2; die "initdb failed"; }
	# max_connections: 200 clients of the largest shape, plus spare
	cat >>"$pgdata/postgresql.conf" <<EOF

# zklock benchmark
port = $pgport
listen_addresses = '127.0.0.1'
unix_socket_directories = '$pgtmp'
max_connections = 250
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

	# pgbench scripts, one per kind: one transaction = one lock cycle
	cat >"$pgtmp/distinct.sql" <<'EOF'
SELECT zk_mutex_acquire('/bench/sql/d/c' || :client_id);
SELECT zk_mutex_release('/bench/sql/d/c' || :client_id);
EOF
	cat >"$pgtmp/shared.sql" <<'EOF'
SELECT zk_mutex_acquire('/bench/sql/shared');
SELECT zk_mutex_release('/bench/sql/shared');
EOF
	cat >"$pgtmp/read.sql" <<'EOF'
SELECT zk_read_lock_acquire('/bench/sql/rw');
SELECT zk_read_lock_release('/bench/sql/rw');
EOF
	cat >"$pgtmp/write.sql" <<'EOF'
SELECT zk_write_lock_acquire('/bench/sql/rw');
SELECT zk_write_lock_release('/bench/sql/rw');
EOF
	cat >"$pgtmp/semaphore.sql" <<EOF
SELECT zk_semaphore_acquire('/bench/sql/sem', $SEM_MAX);
SELECT zk_semaphore_release_all('/bench/sql/sem');
EOF
	cat >"$pgtmp/floor.sql" <<'EOF'
SELECT 1;
SELECT 1;
EOF

	# run_pgbench NAME SCRIPT CLIENTS SECONDS [record]
	#
	# What is recorded comes from a window, as for Curator: from 1 s after
	# the first transaction completed to the end of -T.  Transactions that
	# complete later are pgbench's drain (each client finishes the one it
	# is in, then disconnects) and are left out: pgbench serves that drain
	# slowly whatever it runs (200 clients on PostgreSQL's own advisory
	# lock: ~650 transactions/s before the end of -T, ~80/s after).  The
	# CPU counters are sampled every 0.25 s while pgbench runs; CPU per
	# cycle is taken between the first and the last sample inside the
	# window, over the transactions completed between those two samples.
	run_pgbench() {
		local name=$1 script=$2 clients=$3 secs=$4 record=${5:-}
		local jobs=2 outf=$pgtmp/pgbench_$name.out rc=0
		local samples=$pgtmp/samples_$name t_launch pgpid

		[ "$clients" -lt "$jobs" ] && jobs=$clients
		rm -f "$pgtmp"/log_"$name".*
		: >"$samples"
		t_launch=$(date +%s%N)
		"$PGBIN/pgbench" -n -f "$pgtmp/$script" -c "$clients" -j "$jobs" \
			-T "$secs" -M prepared --log --log-prefix="$pgtmp/log_$name" \
			-h "$pgtmp" -p "$pgport" postgres >"$outf" 2>&1 &
		pgpid=$!
		while kill -0 "$pgpid" 2>/dev/null; do
			echo "$(date +%s%N) $(machine_ticks) $(proc_ticks "$zkpid")" >>"$samples"
			sleep 0.25
		done
		wait "$pgpid" || rc=$?
		if [ $rc -ne 0 ] || grep -q -E "aborted|ERROR" "$outf"; then
			cat "$outf" >&2
			tail -n 20 "$pgtmp/postgres.log" >&2
			die "pgbench $name failed"
		fi
		[ -n "$record" ] || return 0

		# log line: client_id transaction_no time(us) script_no epoch epoch_us
		local win p stats
		win=$pgtmp/window_$name
		stats=$(cat "$pgtmp"/log_"$name".* | awk -v launch_ns="$t_launch" -v secs="$secs" \
			-v samples="$samples" -v win="$win" '
			{ done_us[NR] = $5 * 1000000 + $6; lat[NR] = $3
			  if (NR == 1 || done_us[NR] < first) first = done_us[NR] }
			END {
				wstart = first + 1000000
				wend = int(launch_ns / 1000) + secs * 1000000
				if (wend <= wstart) { wstart = first; wend = first + secs * 1000000 }
				# the samples inside the window: the first and the last
				s0 = -1
				while ((getline line < samples) > 0) {
					split(line, f, " ")
					t = int(f[1] / 1000)
					if (t < wstart || t > wend) continue
					if (s0 < 0) { s0 = t; m0 = f[2]; z0 = f[3] }
					s1 = t; m1 = f[2]; z1 = f[3]
				}
				n = 0; sum = 0; ncpu = 0
				for (i = 1; i <= NR; i++) {
					if (done_us[i] >= wstart && done_us[i] <= wend) {
						n++; sum += lat[i]; print lat[i] > win
					}
					if (s0 >= 0 && done_us[i] > s0 && done_us[i] <= s1) ncpu++
				}
				close(win)
				zk = (s0 >= 0 && z0 >= 0 && z1 >= 0) ? z1 - z0 : -1
				printf "%.0f %.0f %d %d %d\n", n / ((wend - wstart) / 1000000), \
					n ? sum / n : 0, ncpu, (s0 >= 0) ? m1 - m0 : 0, zk
			}')
		[ -s "$win" ] || die "pgbench $name: no transaction completed inside the measured window"
		p=$(percentiles "$win")
		local tps avg cycles cpu zkd
		read -r tps avg cycles cpu zkd <<<"$stats"
		echo "$record $tps $p $avg $cycles $cpu $zkd" >>"$out"
		log "  $name: in the window: tps=$tps p50/p99(us)=$p avg(us)=$avg; cpu over $cycles cycles: ticks=$cpu zk_ticks=$zkd; pgbench overall: $(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' "$outf" | head -n 1) tps"
	}

	log "pgbench warm-up (${WARMUP}s, not counted)"
	run_pgbench warmup distinct.sql 8 "$WARMUP"
	log "pgbench floor: SELECT 1; SELECT 1; at 1 client"
	run_pgbench floor floor.sql 1 "$PG_SECS" "floor 1"
	local s name n kind
	for s in $(select_shapes "${BENCH_SHAPES:-}"); do
		IFS=: read -r name n kind <<<"$s"
		log "pgbench $name: $kind, $n clients, ${PG_SECS}s"
		run_pgbench "$name" "$kind.sql" "$n" "$PG_SECS" "sql $name"
	done

	local left
	left=$("${psql[@]}" -At -c "SELECT count(*) FROM zk_locks" 2>/dev/null || echo "?")
	[ "$left" = 0 ] || log "warning: zk_locks still shows $left rows after the runs"
}

sql_cleanup() {
	# a second signal (runuser forwards the one the group got) must not cut
	# the cleanup short
	trap '' INT TERM
	if [ -n "${PG_DATA:-}" ] && [ -f "$PG_DATA/postmaster.pid" ]; then
		"$PGBIN/pg_ctl" -D "$PG_DATA" -m immediate -w stop >/dev/null 2>&1 || true
	fi
	if [ -n "${PG_TMP:-}" ] && [ -z "${BENCH_KEEP:-}" ]; then
		rm -rf "$PG_TMP"
	fi
}

# re-entry point for the PostgreSQL part (as the unprivileged user)
if [ "${1:-}" = "--sql-part" ]; then
	sql_part "$2" "$3" "${4:-}"
	exit 0
fi

###########################################################################
# Main part
###########################################################################
BENCH_START=$SECONDS
ONLY=raw,curator,sql
SHAPE_NAMES=${BENCH_SHAPES:-}
while [ $# -gt 0 ]; do
	case $1 in
		--only) ONLY=$2; shift 2 ;;
		--only=*) ONLY=${1#--only=}; shift ;;
		--shapes) SHAPE_NAMES=$2; shift 2 ;;
		--shapes=*) SHAPE_NAMES=${1#--shapes=}; shift ;;
		--runs) RUNS=$2; shift 2 ;;
		--runs=*) RUNS=${1#--runs=}; shift ;;
		--seconds) SECS=$2; shift 2 ;;
		--pg-seconds) PG_SECS=$2; shift 2 ;;
		--fsync|--fsync-only) ZK_FSYNC=yes; shift ;;
		--nofsync-only|--no-fsync) ZK_FSYNC=no; shift ;;
		-h|--help) awk 'NR == 1 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"; exit 0 ;;
		*) die "unknown argument: $1" ;;
	esac
done
want() { [[ ",$ONLY," == *",$1,"* ]]; }
for w in ${ONLY//,/ }; do
	case $w in raw|curator|sql) ;; *) die "--only takes raw, curator, sql" ;; esac
done
[[ "$RUNS" =~ ^[1-9][0-9]*$ ]] || die "--runs takes a positive number"
case $ZK_FSYNC in
	both) FSYNC_PASSES="no yes" ;;
	yes|no) FSYNC_PASSES=$ZK_FSYNC ;;
	*) die "BENCH_ZK_FSYNC takes both, yes or no" ;;
esac
SHAPES=$(select_shapes "$SHAPE_NAMES")
[ -n "$SHAPES" ] || die "--shapes: none of '$SHAPE_NAMES' is a shape (names: 1 8d 32d 8s 32s 200s r8 w8 sem16)"
CLK_TCK=$(getconf CLK_TCK)

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

WORK=""			# work directory: clients, results, logs
ZK_DIR=""		# ZooKeeper's data directories
PG_PARENT=""	# the PostgreSQL part's clusters
ZK_PID=""		# the ZooKeeper server running now

# zk_stop: stop the server started by zk_start, if any (also the exit trap)
zk_stop() {
	if [ -n "$ZK_PID" ]; then
		kill "$ZK_PID" 2>/dev/null || true
		wait "$ZK_PID" 2>/dev/null || true
		ZK_PID=""
	fi
}

# pg_stop_left: a postmaster of the PostgreSQL part still running when we
# exit (its own cleanup is cut short when runuser kills it on SIGTERM):
# immediate shutdown (SIGQUIT) by the pid in its postmaster.pid
pg_stop_left() {
	local f pid i
	[ -n "$PG_PARENT" ] || return 0
	for f in "$PG_PARENT"/zklock-bench-pg.*/data/postmaster.pid; do
		[ -f "$f" ] || continue
		pid=$(head -n 1 "$f" 2>/dev/null || true)
		[[ "$pid" =~ ^[0-9]+$ ]] || continue
		kill -QUIT "$pid" 2>/dev/null || continue
		log "stopping the PostgreSQL cluster left running (pid $pid)"
		for i in $(seq 1 100); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
	done
}

# cleanup: everything started here goes, the directories too
cleanup() {
	trap '' INT TERM	# no second signal in the middle of it
	zk_stop
	pg_stop_left
	if [ -z "${BENCH_KEEP:-}" ]; then
		rm -rf ${WORK:+"$WORK"} ${ZK_DIR:+"$ZK_DIR"}
	else
		log "kept $WORK $ZK_DIR"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

WORK=$(mktemp -d /tmp/zklock-bench.XXXXXX)
chmod 755 "$WORK"

# ZooKeeper's data directories: on a disk, not in /tmp, which is a tmpfs on
# Debian 13 (fsync would cost nothing there); BENCH_ZK_DIR chooses another
ZK_DIR=$(mktemp -d "${BENCH_ZK_DIR:-/var/tmp}/zklock-bench-zk.XXXXXX")
ZK_DIR_FS=$(df --output=fstype "$ZK_DIR" 2>/dev/null | tail -n 1 | tr -d ' ' || true)

# the PostgreSQL part's clusters live under $PG_PARENT, writable for it
# (and removed with $WORK)
PG_PARENT=$WORK/pg
mkdir -p "$PG_PARENT"
if want sql && [ "$(id -u)" = 0 ]; then
	chown "$PG_USER" "$PG_PARENT"
fi

# one line per measurement:
#   FSYNC ROUND SYSTEM SHAPE CPS P50 P99 AVG CYCLES CPU_TICKS ZK_TICKS
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

# zk_start yes|no: private ZooKeeper server with that forceSync, on a
# fresh data directory and a fresh port; sets ZK_PORT, ZK_PID and ZK
zk_start() {
	local fsync=$1 i
	ZK_PORT=$(free_port)
	rm -rf "${ZK_DIR:?}/data-$fsync"
	mkdir -p "$ZK_DIR/data-$fsync"
	cat >"$WORK/zoo-$fsync.cfg" <<EOF
tickTime=2000
dataDir=$ZK_DIR/data-$fsync
clientPort=$ZK_PORT
clientPortAddress=127.0.0.1
admin.enableServer=false
4lw.commands.whitelist=*
maxClientCnxns=0
forceSync=$fsync
EOF
	log "starting ZooKeeper on 127.0.0.1:$ZK_PORT (forceSync=$fsync, data in $ZK_DIR, ${ZK_DIR_FS:-?})"
	[ "$ZK_DIR_FS" != tmpfs ] || [ "$fsync" = no ] \
		|| log "warning: $ZK_DIR is a tmpfs: forceSync=yes syncs nothing there (set BENCH_ZK_DIR)"
	java -Xmx512m -cp /usr/share/java/zookeeper.jar \
		org.apache.zookeeper.server.ZooKeeperServerMain "$WORK/zoo-$fsync.cfg" \
		>"$WORK/zookeeper-$fsync.log" 2>&1 &
	ZK_PID=$!
	for i in $(seq 1 100); do
		# imok comes before the server serves: also wait for srvr to show its mode
		[ "$(four_letter "$ZK_PORT" ruok)" = imok ] &&
			four_letter "$ZK_PORT" srvr | grep -q '^Mode:' && break
		kill -0 "$ZK_PID" 2>/dev/null || { cat "$WORK/zookeeper-$fsync.log" >&2; die "ZooKeeper exited"; }
		sleep 0.2
	done
	[ "$(four_letter "$ZK_PORT" ruok)" = imok ] || die "ZooKeeper did not answer ruok"
	ZK=127.0.0.1:$ZK_PORT
}

# result_line PREFIX: turn a RESULT line of raw_cycle or CuratorBench on
# stdin into "PREFIX CPS P50 P99 AVG CYCLES CPU_TICKS ZK_TICKS"
result_line() {
	awk -v prefix="$1" '/^RESULT/ {
		for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
		print prefix, f["cps"], f["p50"], f["p99"], f["avg"], f["cycles"],
			(f["cpu_jiffies"] == "" ? -1 : f["cpu_jiffies"]),
			(f["zk_jiffies"] == "" ? -1 : f["zk_jiffies"]) }'
}

# raw_round FSYNC ROUND: raw_cycle on every mutex shape
raw_round() {
	local fsync=$1 round=$2 s name n kind line
	for s in $SHAPES; do
		IFS=: read -r name n kind <<<"$s"
		case $kind in distinct|shared) ;; *) continue ;; esac
		log "raw $name: $n in flight, $kind, ${SECS}s"
		line=$(BENCH_ZK_PID=$ZK_PID "$WORK/raw_cycle" "$ZK" "$n" "$kind" "$SECS" 0.5) \
			|| die "raw_cycle failed"
		echo "$line" | result_line "$fsync $round raw $name" >>"$RESULTS"
		log "  $line"
	done
}

# curator_round FSYNC ROUND: one JVM, its warm-up, then every shape
curator_round() {
	local fsync=$1 round=$2 s name n kind modes="" line
	for s in $SHAPES; do
		IFS=: read -r name n kind <<<"$s"
		if [ "$kind" = semaphore ]; then
			modes="$modes $name:$n:$kind:$SEM_MAX"
		else
			modes="$modes $name:$n:$kind"
		fi
	done
	log "curator: ${WARMUP}s JVM warm-up, then$modes, ${SECS}s each"
	# shellcheck disable=SC2086
	BENCH_ZK_PID=$ZK_PID java -Xms256m -Xmx512m -cp "$WORK/classes:$JAVA_CP_CURATOR" CuratorBench \
		"$ZK" "$SECS" "$WARMUP" $modes >"$WORK/curator.out" || die "CuratorBench failed"
	while read -r line; do
		log "  $line"
		name=$(echo "$line" | sed -n 's/^RESULT name=\([^ ]*\) .*/\1/p')
		[ -n "$name" ] || continue
		echo "$line" | result_line "$fsync $round curator $name" >>"$RESULTS"
	done <"$WORK/curator.out"
}

# sql_round FSYNC ROUND: the PostgreSQL part (a fresh cluster) as the
# unprivileged user when run as root
sql_round() {
	local fsync=$1 round=$2
	local envs=(env BENCH_PG_SECONDS="$PG_SECS" BENCH_WARMUP="$WARMUP"
		BENCH_SHAPES="$SHAPE_NAMES" BENCH_KEEP="${BENCH_KEEP:-}" PGBIN="$PGBIN"
		BENCH_PG_PARENT="$PG_PARENT")
	: >"$WORK/sql.results"
	if [ "$(id -u)" = 0 ]; then
		chown "$PG_USER" "$WORK/sql.results"
		runuser -u "$PG_USER" -- "${envs[@]}" \
			bash "$HERE/run.sh" --sql-part "$ZK_PORT" "$WORK/sql.results" "$ZK_PID" \
			|| die "PostgreSQL part failed"
	else
		"${envs[@]}" bash "$HERE/run.sh" --sql-part "$ZK_PORT" "$WORK/sql.results" "$ZK_PID" \
			|| die "PostgreSQL part failed"
	fi
	sed "s/^/$fsync $round /" "$WORK/sql.results" >>"$RESULTS"
}

# the passes: one server per forceSync setting, RUNS rounds on each, a
# round being the three systems one after the other on every shape
ZK_STATS=""
for fsync in $FSYNC_PASSES; do
	zk_start "$fsync"

	# the server's JIT warms up on whatever runs first: give it the same
	# start for everyone, with a raw run that is not counted
	if want raw; then
		BENCH_ZK_PID=$ZK_PID "$WORK/raw_cycle" "$ZK" 32 distinct "$WARMUP" >/dev/null \
			|| die "raw_cycle warm-up failed"
	else
		log "server warm-up with Curator happens inside its own warm-up"
	fi

	for round in $(seq 1 "$RUNS"); do
		[ "$RUNS" -gt 1 ] && log "forceSync=$fsync: round $round of $RUNS"
		if want raw; then raw_round "$fsync" "$round"; fi
		if want curator; then curator_round "$fsync" "$round"; fi
		if want sql; then sql_round "$fsync" "$round"; fi
	done

	# ZooKeeper server view, for the record
	stats=$(four_letter "$ZK_PORT" srvr | grep -E 'Latency|Outstanding|Node count' | tr '\n' ' ' | sed 's/ *$//' || true)
	log "zookeeper (forceSync=$fsync): $stats"
	ZK_STATS="$ZK_STATS${ZK_STATS:+; }forceSync=$fsync: $stats"
	zk_stop
done

###########################################################################
# Tables: one per forceSync setting, medians over the rounds
###########################################################################
systems=""
for w in raw curator sql; do want "$w" && systems="$systems $w"; done

echo
echo "Lock cycle = acquire + release (raw: create EPHEMERAL_SEQUENTIAL + get_children + delete, mutex shapes only)."
# versions as installed (Debian 12: ZooKeeper 3.8, Curator 5.4, PostgreSQL 15;
# Debian 13: ZooKeeper 3.9, Curator 5.7, PostgreSQL 17)
pkg_version() { dpkg-query -W -f='${Version}' "$1" 2>/dev/null | sed 's/^[0-9]*://; s/[-+~].*//'; }
echo "Debian ${ZKLOCK_DEBIAN:-?}: ZooKeeper $(pkg_version zookeeper), Curator $(pkg_version libcurator-recipes-java), PostgreSQL $PG_MAJOR."
echo "Same ZooKeeper standalone server for all three, restarted on a fresh data dir (${ZK_DIR_FS:-?}) per forceSync setting; $(nproc) CPUs;"
echo "raw/Curator ${SECS}s, pgbench -T ${PG_SECS} per shape; $RUNS run(s) per system and shape, the table shows medians."
echo "cyc/s = completed cycles per second; p50/p99 = latency of one cycle in microseconds;"
echo "cpu µs/cyc = CPU time of the whole machine (all CPUs, /proc/stat minus idle and iowait: clients, PostgreSQL,"
echo "  ZooKeeper, anything else running) in the measured window per cycle; zk µs/cyc = the ZooKeeper server process"
echo "  alone (utime+stime); for zklock the window runs from 1 s after pgbench's first transaction to the end of"
echo "  -T (pgbench's drain after -T, served slowly whatever it runs, is left out), CPU sampled every 0.25 s in it;"
echo "  resolution 1/$CLK_TCK s of CPU time per window."
echo "ratios = zklock / the row's system: cyc/s higher is better for zklock, p50 and cpu lower is better for zklock."
awk -v passes="$FSYNC_PASSES" -v shapes="$SHAPES" -v systems="$systems" -v clk="$CLK_TCK" -v runs="$RUNS" '
	# values of one measure of one (forceSync, system, shape), over the rounds
	function add(key, v) { cnt[key]++; val[key, cnt[key]] = v }
	# median of them ("-" if none), the mean of the middle two for an even count
	function median(key,    m, i, j, t, a) {
		m = cnt[key] + 0
		if (m == 0) return "-"
		for (i = 1; i <= m; i++) a[i] = val[key, i] + 0
		for (i = 2; i <= m; i++)
			for (j = i; j > 1 && a[j - 1] > a[j]; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
		return (m % 2) ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
	}
	function dash(n,    d) { d = ""; while (n-- > 0) d = d "-"; return d }
	function num(v) { return v == "-" ? "-" : (v < 10 && v != int(v) ? sprintf("%.1f", v) : sprintf("%.0f", v)) }
	function ratio(a, b) { return (a == "-" || b == "-" || b + 0 == 0) ? "-" : sprintf("%.2f", a / b) }
	function med(fs, sy, sh, what) { return median(fs SUBSEP sy SUBSEP sh SUBSEP what) }
	{
		fs = $1; sys = $3; sh = $4; k = fs SUBSEP sys SUBSEP sh SUBSEP
		add(k "cps", $5); add(k "p50", $6); add(k "p99", $7)
		if ($9 > 0 && $10 >= 0) add(k "cpu", $10 * 1e6 / clk / $9)
		if ($9 > 0 && $11 >= 0) add(k "zk", $11 * 1e6 / clk / $9)
	}
	END {
		label["1"] = "mutex, 1 in flight"; label["8d"] = "mutex, 8 distinct"
		label["32d"] = "mutex, 32 distinct"; label["8s"] = "mutex, 8 shared"
		label["32s"] = "mutex, 32 shared"; label["200s"] = "mutex, 200 shared"
		label["r8"] = "read lock, 8 shared"; label["w8"] = "write lock, 8 shared"
		label["sem16"] = "semaphore max 4, 16"
		name["raw"] = "raw C"; name["curator"] = "Curator"; name["sql"] = "zklock"
		fmt = "%-5s %-22s %-7s %8s %6s %7s %6s %7s | %6s %6s %6s"
		np = split(passes, plist, " "); ns = split(shapes, slist, " "); nsys = split(systems, syslist, " ")
		for (p = 1; p <= np; p++) {
			fs = plist[p]
			printf "\nforceSync=%s%s\n", fs, (runs > 1 ? " (medians of " runs " runs)" : "")
			# (mawk counts bytes: "µ" goes in after the padding)
			hdr = sprintf(fmt, "", "", "", "", "", "", "cpu", "zk", "zklock / row", "", "")
			sub(/ +$/, "", hdr); print hdr
			hdr = sprintf(fmt, "shape", "what", "system", "cyc/s", "p50", "p99", "us/cyc", "us/cyc", "cyc/s", "p50", "cpu")
			gsub(/us\/cyc/, "µs/cyc", hdr); print hdr
			hdr = sprintf(fmt, "-----", dash(22), dash(7), dash(8), dash(6), dash(7), dash(6), dash(7), dash(6), dash(6), dash(6))
			sub(/ \| /, "-+-", hdr); gsub(/ /, "-", hdr); print hdr
			for (i = 1; i <= ns; i++) {
				split(slist[i], part, ":"); sh = part[1]; mutex = (part[3] == "distinct" || part[3] == "shared")
				first = 1
				for (j = 1; j <= nsys; j++) {
					s = syslist[j]
					if (s == "raw" && !mutex) continue
					zc = med(fs, "sql", sh, "cps"); zp = med(fs, "sql", sh, "p50"); zu = med(fs, "sql", sh, "cpu")
					r1 = r2 = r3 = ""
					if (s != "sql") {
						r1 = ratio(zc, med(fs, s, sh, "cps")); r2 = ratio(zp, med(fs, s, sh, "p50"))
						r3 = ratio(zu, med(fs, s, sh, "cpu"))
					}
					row = sprintf(fmt,
						first ? sh : "", first ? label[sh] : "", name[s],
						num(med(fs, s, sh, "cps")), num(med(fs, s, sh, "p50")), num(med(fs, s, sh, "p99")),
						num(med(fs, s, sh, "cpu")), num(med(fs, s, sh, "zk")), r1, r2, r3)
					sub(/ +$/, "", row); print row
					first = 0
				}
			}
			if ((fs SUBSEP "floor" SUBSEP "1" SUBSEP "cps") in cnt)
				printf "PostgreSQL floor (pgbench SELECT 1; SELECT 1;, 1 client): %s tx/s, p50 %s us, p99 %s us, cpu %s µs/tx\n",
					num(med(fs, "floor", "1", "cps")), num(med(fs, "floor", "1", "p50")),
					num(med(fs, "floor", "1", "p99")), num(med(fs, "floor", "1", "cpu"))
			# the ratios in words, one line per shape
			printf "\nforceSync=%s, zklock against the others:\n", fs
			for (i = 1; i <= ns; i++) {
				split(slist[i], part, ":"); sh = part[1]
				zc = med(fs, "sql", sh, "cps"); zp = med(fs, "sql", sh, "p50")
				zu = med(fs, "sql", sh, "cpu"); zz = med(fs, "sql", sh, "zk")
				line = ""
				if (med(fs, "curator", sh, "cps") != "-")
					line = sprintf("zklock %sx Curator'\''s cycles/s, p50 %sx, CPU per cycle %sx (ZooKeeper'\''s %sx)",
						ratio(zc, med(fs, "curator", sh, "cps")), ratio(zp, med(fs, "curator", sh, "p50")),
						ratio(zu, med(fs, "curator", sh, "cpu")), ratio(zz, med(fs, "curator", sh, "zk")))
				if (med(fs, "raw", sh, "cps") != "-")
					line = line (line == "" ? "zklock " : "; ") sprintf("%sx raw'\''s cycles/s, p50 %sx, CPU per cycle %sx",
						ratio(zc, med(fs, "raw", sh, "cps")), ratio(zp, med(fs, "raw", sh, "p50")),
						ratio(zu, med(fs, "raw", sh, "cpu")))
				if (zc == "-") line = "(zklock not measured)"
				printf "%s: %s\n", sh, line
			}
		}
	}' "$RESULTS"

elapsed=$((SECONDS - BENCH_START))
echo
echo "ZooKeeper at the end of each pass: $ZK_STATS"
echo "The run took $((elapsed / 60))m $((elapsed % 60))s: forceSync $(echo "$FSYNC_PASSES" | sed 's/ / and /'), $RUNS run(s) of $(echo "$SHAPES" | wc -w) shape(s), systems:$(for w in $systems; do printf ' %s' "$w"; done)."

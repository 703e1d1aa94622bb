#!/bin/bash
#
# test/bench/run.sh
#	Lock-cycle benchmark: raw C client vs Curator vs zklock through SQL,
#	in one run, against one private ZooKeeper server started here; and
#	the rate of a shared counter's adds, Curator vs zklock; SQL sessions
#	and Curator threads on one lock path at once; and the lock cycle
#	through an emulated network to a 3-server ensemble.
#
# Usage: run.sh [--only raw,curator,sql] [--shapes idle,1,8d,...] [--runs N]
#               [--seconds N] [--pg-seconds N] [--idle-seconds N]
#               [--fsync-only | --nofsync-only] [--lock-cache off,on]
#
#	raw      test/bench/raw_cycle.c (libzookeeper_st): create
#	         EPHEMERAL_SEQUENTIAL + get_children + delete, pipelined on one
#	         session (mutex shapes only: the protocol floor of a mutex cycle)
#	curator  test/bench/CuratorBench.java: one CuratorFramework, N threads,
#	         each with its own InterProcessMutex / InterProcessReadWriteLock /
#	         InterProcessSemaphoreV2 / DistributedAtomicLong
#	sql      private PostgreSQL cluster (15 or 17) with zklock preloaded,
#	         pgbench scripts doing acquire + release (counter shapes: one
#	         zk_atomic_long_add), N clients
#
# Shapes (name: sessions, what):
#	1          mutex, 1 in flight, own path
#	8d, 32d    mutex, 8 / 32 sessions on distinct paths
#	8s, 32s, 200s  mutex, 8 / 32 / 200 sessions on one shared path
#	r8, w8     read lock / write lock, 8 sessions on one path
#	sem16      semaphore of 4 leases, 16 sessions on one path
#	l8         leader check: 8 sessions ask whether the one member (a
#	           'cluster' membership; one LeaderLatch for Curator) leads
#	c1, c8     counter: adds of 1 to one DistributedAtomicLong path from 1 / 8
#	           sessions (zk_atomic_long_add; Curator's add, tried again at
#	           once while it reports failure); a cycle is one add (not raw)
#	mix8       mixed path: 4 pgbench sessions (zk_mutex_acquire + release)
#	           and 4 Curator threads (InterProcessMutex) take turns on one
#	           path, /bench/mix/lock, at the same time (needs curator and
#	           sql; below)
#	net1, net32d, net32s
#	           shapes 1, 32d and 32s through an emulated network (below)
#	tls1, tls32d
#	           shapes 1 and 32d in plaintext and over TLS, on one server
#	           (below); not in the default run
#	idle       not a shape: what an idle client costs ZooKeeper (below)
#
# mix8: the Curator JVM warms up, the PostgreSQL cluster starts and warms
# up, then both start at one signal (a file): pgbench -T --pg-seconds, the
# Curator threads as long, their window starting 1 s after the start (as
# pgbench's, see run_pgbench).  It prints each side's cycles/s, SQL's cycle
# latency, Curator's acquire latency (p50/p99, acquire alone), and for
# both sides together the ZooKeeper requests per cycle (received over the
# whole run / the cycles both completed) and the CPU per cycle (machine and
# server over Curator's window / the cycles both completed in it).  Runs
# on the standalone server of every forceSync pass.
#
# net1, net32d, net32s: a 3-server ensemble (forceSync=yes, tickTime
# 2000), each server in a network namespace of its own, behind a delay of
# 0.25 ms each way.  This kernel has no netem: the delay is
# test/bench/delay_proxy.c, a single-threaded user-space TCP proxy that
# releases every chunk it reads 250 us later, one proxy per server.  The
# namespaces are the tests' (test/perl/ZklockNet.pm): the whole part runs
# as the unprivileged user (zklock when run as root) inside `unshare
# --user --map-current-user --net --keep-caps`, the "bench namespace",
# which owns the interfaces, the proxies (on its 127.0.0.1) and every
# client (raw_cycle, CuratorBench, PostgreSQL with zklock); server k runs
# in a namespace nested in it (a holder process made by `unshare --net`,
# the server started there with nsenter), joined to the bench namespace
# by a veth pair, 10.202.K.1 <-> 10.202.K.2, listening on 10.202.K.2:2181.
# Nothing of it is visible outside, and it goes when the part ends.  Only
# client connections cross a proxy (the servers' quorum traffic goes
# straight through the bench namespace), and every client connects to the
# proxy of the same follower (as the idle part does), whose mntr counts
# the requests; CPU of ZooKeeper is the three servers' sum.  Before the
# shapes, the proxy is measured on its own: the raw C cycle (three round
# trips), 1 in flight, direct to the follower and through its proxy; the
# difference of the p50s over 3 is what the proxy adds to a round trip
# (0.5 ms wanted).  Needs unprivileged user namespaces (not in a chroot):
# the run fails saying so when they cannot be made.
#
# tls1, tls32d: what TLS costs.  Shapes 1 and 32d against a standalone
# server of their own (one per forceSync pass, after the other shapes'
# passes, fresh data directory) that has both a plaintext clientPort and
# a TLS secureClientPort that needs client certificates
# (serverCnxnFactory=NettyServerCnxnFactory, which serves both ports: the
# plaintext numbers here are Netty's, not the NIO server's of the other
# shapes).  A CA, certificates for 127.0.0.1 and PKCS#12 stores are made
# once per run by the TLS tests' own test/perl/ZklockPki.pm (openssl,
# keytool), as the unprivileged user.  On that server, one after the
# other: raw C in plaintext (raw_cycle links Debian's libzookeeper_st,
# which has no TLS), Curator in plaintext, Curator over TLS (its own JVM
# with ZklockPki's tls_peer_options: zookeeper.client.secure, the Netty
# client socket, the client keystore and the truststore), zklock in
# plaintext, zklock over TLS (a fresh cluster each per --lock-cache
# value; zklock.tls with the client certificate, zklock.hosts the secure
# port).  Every connection, the TLS handshake included, is made before
# the measured window (Curator connects before its warm-up, zklock's
# worker before pgbench starts, pgbench's connections are to PostgreSQL):
# no number includes a handshake, they are all the steady cost of a
# session over TLS.  Requests are counted on the plaintext port's mntr
# (the one server's count, both ports).  The table of the part shows each
# system over TLS beside itself in plaintext, with the ratios TLS /
# plaintext, and in words zklock over TLS against Curator over TLS.
# Only when named (--shapes tls1,tls32d): a full run is long already, the
# part needs its own server and certificates, and it measures a setting,
# not a recipe.  With lock_cache on, shape 1 sends no request at all
# (TLS is not on its path): the README's run of it is --lock-cache off.
#
# --lock-cache off,on (default both; BENCH_LOCK_CACHE): zklock.lock_cache
# in every cluster's postgresql.conf; every sql shape, mix8 and the net
# shapes run once per value, each on a fresh cluster ("zklock" is off,
# "zklock lc" on).  The run first checks, on a throwaway cluster, that the
# server shows each value asked for: a build without the setting fails
# the run at once for "on" (it cannot cache); "off" is measured on such a
# build, as the absence of caching, and the run says so.
#
# idle: with nothing to do, zklock's worker still sends heartbeats (a sync
# of / every quarter of the negotiated session timeout against a
# standalone server, every zklock.server_tick_time / 4 against a server of
# an ensemble), and an idle Curator client the ZooKeeper Java client's
# pings (one every third of the session timeout).  Counted by the servers
# themselves: the per-connection "recved" of the four-letter word cons,
# matched to each client's session id, over --idle-seconds (20 s), for
# zklock (a PostgreSQL cluster with zklock connected, no SQL run) and for
# Curator (test/bench/CuratorIdle.java: one CuratorFramework holding
# nothing), both asking for a 60 s session, side by side in the same
# window on (a) the standalone server of the first forceSync pass and
# (b) a 3-server ensemble on 127.0.0.1 started for it (tickTime 2000 as in
# Debian's zoo.cfg, which caps sessions at 20 ticks = 40 s; both clients
# on one follower; zklock.server_tick_time = 2000).  Takes about 30 s;
# part of the default run, or alone with --shapes idle.
#
# Every shape but the net ones runs once with the ZooKeeper server at
# forceSync=no and once at forceSync=yes (the server is restarted on a fresh data directory
# between the two); --fsync-only (or the old --fsync) and --nofsync-only run
# one of them.  --runs N measures each shape N times per system, the three
# systems one after the other in each round, and reports medians.  Besides
# cycles/s and latency, it reports CPU per cycle: the whole machine's and
# the ZooKeeper server's, from /proc, over the window the cycles are
# counted in.  And the ZooKeeper requests of one cycle: what the server
# received (mntr's zk_packets_received) over a system's whole run of the
# shape, divided by the cycles completed in it (raw, Curator and zklock
# alike).  Nothing is asserted: it prints a table per forceSync setting
# and the ratios in words.
#
# Run as root or as an unprivileged user.  As root, the PostgreSQL part runs
# as user "zklock" (initdb and pg_ctl refuse root).  Everything started here
# is stopped on exit.  Environment: BENCH_SECONDS, BENCH_PG_SECONDS,
# BENCH_IDLE_SECONDS, BENCH_WARMUP, BENCH_RUNS, BENCH_SHAPES (comma list,
# idle included), BENCH_LOCK_CACHE (as --lock-cache), BENCH_ZK_FSYNC
# (both, yes or no), BENCH_ZK_DIR (where ZooKeeper's data directories go,
# default /var/tmp: /tmp may be a tmpfs), BENCH_KEEP (keep the work
# directories).
#
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$HERE/../env.sh"		# PGBIN of this platform's PostgreSQL, a sane environment
JAVA_CP_CURATOR=/usr/share/java/curator-recipes.jar:/usr/share/java/slf4j-nop.jar
# what Netty (the TLS part's server and Java client) needs and the
# manifests of Debian's jars leave out (as test/perl/ZklockTest.pm's)
NETTY_JARS=/usr/share/java/netty-codec.jar:/usr/share/java/netty-resolver.jar
PG_USER=zklock

SECS=${BENCH_SECONDS:-5}		# raw and Curator window per shape
PG_SECS=${BENCH_PG_SECONDS:-6}	# pgbench -T per shape
WARMUP=${BENCH_WARMUP:-2}		# server / JVM / backend warm-up, excluded
ZK_FSYNC=${BENCH_ZK_FSYNC:-both}	# ZooKeeper forceSync: both, yes, no
RUNS=${BENCH_RUNS:-1}			# measurements per system and shape
SEM_MAX=4						# leases of the semaphore shape
IDLE_SECS=${BENCH_IDLE_SECONDS:-20}	# window of the idle measurement
ZK_TICK=2000					# tickTime of every server started here (Debian's)
IDLE_TIMEOUT=60000				# session timeout both idle clients ask for (Curator's default)

LOCK_CACHES=${BENCH_LOCK_CACHE:-off,on}	# zklock.lock_cache values, each a pass of sql
MIX_SQL=4						# mix8: pgbench sessions
MIX_CURATOR=4					# mix8: Curator threads
MIX_PATH=/bench/mix/lock		# mix8: the one path of both
NET_DELAY_US=250				# net shapes: delay each way
NET_SUBNET=10.202				# net shapes: server k at $NET_SUBNET.k.2

# shapes: name, sessions (threads, clients, in-flight slots), kind; kind is
# distinct|shared (mutex), read|write (read/write lock), semaphore or
# counter (DistributedAtomicLong adds)
ALL_SHAPES="1:1:distinct 8d:8:distinct 32d:32:distinct 8s:8:shared 32s:32:shared 200s:200:shared r8:8:read w8:8:write sem16:16:semaphore c1:1:counter c8:8:counter l8:8:leader"
# the emulated network's shapes (the same kinds, through the proxies)
NET_SHAPES_ALL="net1:1:distinct net32d:32:distinct net32s:32:shared"
# the TLS part's shapes (shapes 1 and 32d, plaintext and TLS on one
# server); not in the default run: only when named
TLS_SHAPES_ALL="tls1:1:distinct tls32d:32:distinct"

log() { echo "[bench $(date +%H:%M:%S)] $*" >&2; }
die() { echo "run.sh: $*" >&2; exit 1; }

# select_shapes NAMES [LIST]: the entries of LIST (default ALL_SHAPES)
# named in the comma list NAMES ("" = all), in LIST order
select_shapes() {
	local s name out=""
	for s in ${2:-$ALL_SHAPES}; do
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

# four_letter PORT CMD [HOST]: send a ZooKeeper four-letter word to
# HOST:PORT (default 127.0.0.1), print the answer (nothing after 5 s: a
# server still starting may accept and never answer)
four_letter() {
	perl -MIO::Socket::INET -e '
		alarm 5;
		my $s = IO::Socket::INET->new(PeerAddr => $ARGV[2],
		                              PeerPort => $ARGV[0], Timeout => 2) or exit 1;
		print $s $ARGV[1]; shutdown($s, 1);
		local $/; my $r = <$s>; print $r if defined $r;' "$1" "$2" "${3:-127.0.0.1}" 2>/dev/null || true
}

# zk_received PORT [HOST]: the requests the ZooKeeper server on HOST:PORT
# received so far (mntr's zk_packets_received), -1 when it does not say
zk_received() {
	local n
	n=$(four_letter "$1" mntr "${2:-127.0.0.1}" | awk '$1 == "zk_packets_received" { print $2 }')
	echo "${n:--1}"
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

# proc_ticks PID[,PID...]: utime + stime of a process in clock ticks
# (fields 14 and 15 of /proc/PID/stat, counted after the command name in
# parentheses), summed over the pids given; -1 when any is unknown
proc_ticks() {
	local stat f pid sum=0
	[ -n "${1:-}" ] || { echo -1; return; }
	for pid in ${1//,/ }; do
		if ! stat=$(cat "/proc/$pid/stat" 2>/dev/null); then
			echo -1
			return
		fi
		read -r -a f <<<"${stat##*") "}"
		sum=$((sum + f[11] + f[12]))
	done
	echo "$sum"
}

# ens_member_cfg CFG ID DATADIR ADDR PORT MORE: the zoo.cfg (at CFG) of
# server ID of an ensemble, its data directory (made, with its myid),
# clients on ADDR:PORT, then the lines MORE (the server.N lines at least)
ens_member_cfg() {
	mkdir -p "$3"
	echo "$2" >"$3/myid"
	cat >"$1" <<EOC
tickTime=$ZK_TICK
initLimit=10
syncLimit=5
dataDir=$3
clientPort=$5
clientPortAddress=$4
admin.enableServer=false
4lw.commands.whitelist=*
maxClientCnxns=0
$6
EOC
}

# stop_pids PID...: SIGTERM to each of these children, then reap them
stop_pids() {
	local pid
	for pid in "$@"; do
		kill "$pid" 2>/dev/null || true
	done
	for pid in "$@"; do
		wait "$pid" 2>/dev/null || true
	done
}

###########################################################################
# PostgreSQL part: runs as an unprivileged user.
#	sql_part ZKPORT RESULTFILE ZKPIDS [MODE]
# ZooKeeper (or its proxy) on 127.0.0.1:ZKPORT, ZKPIDS the server pids
# (comma-separated), zklock.lock_cache = BENCH_LOCK_CACHE (off or on).
# MODE shapes (the default): the shapes named in BENCH_SHAPES; writes
# lines "SYSTEM SHAPE CPS P50 P99 AVG CYCLES CPU_TICKS ZK_TICKS REQS
# ALL_CYCLES" (SYSTEM sql for lock_cache off, sqlc for on) and "floor 1
# ..." the same way; the ticks are read right before and after each
# pgbench -T run, so its connection setup is inside the window; REQS is
# what the ZooKeeper server received from right before pgbench started to
# after it ended, ALL_CYCLES the transactions pgbench completed in that
# time.  MODE check: only whether the server shows the lock_cache value
# asked for (fails the run when it cannot).  MODE mix:DIR: mix8's SQL
# side: after the warm-up writes DIR/sql.ready, waits for DIR/go, runs
# pgbench on the mixed path, writes its line as above and pgbench's
# per-transaction log to DIR/sql.log.
###########################################################################
sql_part() {
	local zkport=$1 out=$2 zkpid=$3 mode=${4:-shapes}
	local pgtmp pgport pgdata lc=${BENCH_LOCK_CACHE:-off} sys=sql
	[ "$lc" = off ] || sys=sqlc
	# the TLS part: zklock's TLS settings (zklock.hosts the secure port)
	# follow the plaintext ones and win; ZKPORT stays the plaintext port,
	# which mntr is asked on
	[ -z "${BENCH_TLS_CONF:-}" ] || sys=$sys-tls

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
zklock.server_tick_time = $ZK_TICK
zklock.max_requests = 1024
zklock.lock_cache = $lc
fsync = off
synchronous_commit = off
log_min_messages = warning
EOF
	[ -z "${BENCH_TLS_CONF:-}" ] || cat "$BENCH_TLS_CONF" >>"$pgdata/postgresql.conf"
	"$PGBIN/pg_ctl" -D "$pgdata" -l "$pgtmp/postgres.log" -w -t 60 start >/dev/null \
		|| { tail -n 30 "$pgtmp/postgres.log" >&2; die "postgres did not start"; }

	local psql=("$PGBIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$pgtmp" -p "$pgport" -d postgres)

	# the lock cache setting must be in force: a build without the GUC
	# drops it from postgresql.conf with a warning and starts anyway
	local shown
	shown=$("${psql[@]}" -At -c "SHOW zklock.lock_cache" 2>&1) || true
	if [ "$shown" != "$lc" ]; then
		if [ "$lc" = off ] && [[ "$shown" == *"unrecognized configuration parameter"* ]]; then
			log "zklock.lock_cache: this zklock build does not have the setting; 'off' is measured as the build's behaviour without lock caching"
		else
			grep -i "lock_cache" "$pgtmp/postgres.log" >&2 || true
			die "zklock.lock_cache = $lc was asked for (--lock-cache), but the server says: '$shown'. This zklock build has no lock caching setting (or refuses the value); install a build that has it, or run with --lock-cache off"
		fi
	fi
	[ "$mode" != check ] || return 0
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
	cat >"$pgtmp/counter.sql" <<'EOF'
SELECT zk_atomic_long_add('/bench/sql/counter', 1);
EOF
	cat >"$pgtmp/leader.sql" <<'EOF'
SELECT zk_has_leadership('/bench/sql/leader');
EOF
	cat >"$pgtmp/floor.sql" <<'EOF'
SELECT 1;
SELECT 1;
EOF
	cat >"$pgtmp/mixed.sql" <<EOF
SELECT zk_mutex_acquire('$MIX_PATH');
SELECT zk_mutex_release('$MIX_PATH');
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
		local samples=$pgtmp/samples_$name t_launch pgpid rq0 rq1 reqs alltx db0 db1
		# the worker's multis of deletes (zk_status): batches and their deletes
		local dbq="SELECT coalesce(to_jsonb(s)->>'batches', '0') || ' ' || coalesce(to_jsonb(s)->>'batched_deletes', '0') FROM zk_status() s"

		[ "$clients" -lt "$jobs" ] && jobs=$clients
		rm -f "$pgtmp"/log_"$name".*
		: >"$samples"
		rq0=$(zk_received "$zkport")
		db0=$("${psql[@]}" -At -c "$dbq" 2>/dev/null || echo '0 0')
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
		rq1=$(zk_received "$zkport")
		db1=$("${psql[@]}" -At -c "$dbq" 2>/dev/null || echo '0 0')
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
		alltx=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$outf" | head -n 1)
		reqs=-1
		[ "$rq0" -lt 0 ] || [ "$rq1" -lt 0 ] || reqs=$((rq1 - rq0))
		echo "$record $tps $p $avg $cycles $cpu $zkd $reqs ${alltx:-0}" >>"$out"
		log "  $name: in the window: tps=$tps p50/p99(us)=$p avg(us)=$avg; cpu over $cycles cycles: ticks=$cpu zk_ticks=$zkd; pgbench overall: $(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' "$outf" | head -n 1) tps; zookeeper received $reqs requests for ${alltx:-0} transactions; delete multis: $(( ${db1% *} - ${db0% *} )) carrying $(( ${db1#* } - ${db0#* } )) deletes"
	}

	log "pgbench warm-up (${WARMUP}s, not counted)"
	run_pgbench warmup distinct.sql 8 "$WARMUP"
	if [[ "$mode" == mix:* ]]; then
		local mixdir=${mode#mix:} i
		echo READY >"$mixdir/sql.ready"
		for i in $(seq 1 3000); do
			[ -e "$mixdir/go" ] && break
			sleep 0.1
		done
		[ -e "$mixdir/go" ] || die "mix8: not told to start within 300 s"
		log "pgbench mix8: $MIX_SQL clients on $MIX_PATH (lock_cache $lc), ${PG_SECS}s"
		run_pgbench mix8 mixed.sql "$MIX_SQL" "$PG_SECS" "$sys mix8"
		cat "$pgtmp"/log_mix8.* >"$mixdir/sql.log"
		return 0
	fi
	log "pgbench floor: SELECT 1; SELECT 1; at 1 client"
	run_pgbench floor floor.sql 1 "$PG_SECS" "floor 1"
	local s name n kind
	for s in $(select_shapes "${BENCH_SHAPES:-}" "$ALL_SHAPES $NET_SHAPES_ALL $TLS_SHAPES_ALL"); do
		IFS=: read -r name n kind <<<"$s"
		log "pgbench $name: $kind, $n clients, ${PG_SECS}s (lock_cache $lc)"
		if [ "$kind" = leader ]; then
			# one member, the cluster's, which every client asks about
			"${psql[@]}" -At -c "SELECT zk_leader_join('/bench/sql/leader', 'bench', scope => 'cluster')" \
				-c "SELECT zk_leader_await('/bench/sql/leader', '10s')" | grep -q '^t$' \
				|| die "the cluster does not lead /bench/sql/leader"
		fi
		run_pgbench "$name" "$kind.sql" "$n" "$PG_SECS" "$sys $name"
		[ "$kind" != leader ] || "${psql[@]}" -At -c "SELECT zk_leader_leave('/bench/sql/leader')" >/dev/null
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

###########################################################################
# Idle part, PostgreSQL side: runs as the unprivileged user.
#	idle_part OUT STOPFILE MAXSECS NAME=HOST:PORT...
# One cluster per NAME with zklock connected to HOST:PORT, no SQL run once
# connected.  Writes to OUT, once every worker is connected, a line
#	zklock NAME SESSION_ID TIMEOUT_MS SERVER_MODE SERVER
# per cluster and then READY; waits (at most MAXSECS) until STOPFILE exists,
# writes "zklock-end NAME SESSION_ID STATE" per cluster (was the session
# the same all along?), then stops the clusters.
###########################################################################
idle_part() {
	local out=$1 stopfile=$2 maxsecs=$3
	shift 3
	local spec name hosts first="" pgtmp pgport i state
	local -a names=() dirs=() ports=()

	trap 'idle_cleanup' EXIT
	trap 'exit 130' INT TERM
	IDLE_DIRS=()
	for spec in "$@"; do
		name=${spec%%=*}
		hosts=${spec#*=}
		# under the main part's work directory, named as pg_stop_left expects
		pgtmp=$(mktemp -d "${BENCH_PG_PARENT:-/tmp}/zklock-bench-pg.XXXXXX")
		IDLE_DIRS+=("$pgtmp")
		pgport=$(free_port)
		if [ -z "$first" ]; then
			"$PGBIN/initdb" -D "$pgtmp/data" -A trust --no-sync -E UTF8 --locale=C \
				>"$pgtmp/initdb.log" 2>&1 || { cat "$pgtmp/initdb.log" >&2; die "initdb failed"; }
			cat >>"$pgtmp/data/postgresql.conf" <<EOC

# zklock benchmark, idle part
listen_addresses = ''
shared_preload_libraries = 'zklock'
zklock.session_timeout = $IDLE_TIMEOUT
zklock.server_tick_time = $ZK_TICK
fsync = off
log_min_messages = warning
EOC
			# the others are copies of this fresh cluster: cheaper than initdb
			first=$pgtmp/template
			cp -a "$pgtmp/data" "$first"
		else
			cp -a "$first" "$pgtmp/data"
		fi
		cat >>"$pgtmp/data/postgresql.conf" <<EOC
port = $pgport
unix_socket_directories = '$pgtmp'
zklock.hosts = '$hosts'
EOC
		names+=("$name"); dirs+=("$pgtmp"); ports+=("$pgport")
	done
	for i in "${!names[@]}"; do
		"$PGBIN/pg_ctl" -D "${dirs[$i]}/data" -l "${dirs[$i]}/postgres.log" -w -t 60 start >/dev/null \
			|| { tail -n 30 "${dirs[$i]}/postgres.log" >&2; die "postgres (${names[$i]}) did not start"; }
	done
	idle_psql() { "$PGBIN/psql" -X -q -v ON_ERROR_STOP=1 -h "${dirs[$1]}" -p "${ports[$1]}" -d postgres -At -c "$2"; }
	for i in "${!names[@]}"; do
		idle_psql "$i" "CREATE EXTENSION zklock" \
			|| { tail -n 30 "${dirs[$i]}/postgres.log" >&2; die "CREATE EXTENSION zklock failed"; }
	done
	# server_mode through to_jsonb: a build without that column says "?"
	local status="SELECT state, session_id, session_timeout, coalesce(to_jsonb(s)->>'server_mode', '?'), server FROM zk_status() s"
	for i in "${!names[@]}"; do
		state=""
		for _ in $(seq 1 300); do
			state=$(idle_psql "$i" "SELECT state FROM zk_status()" 2>/dev/null || true)
			[ "$state" = connected ] && break
			sleep 0.1
		done
		[ "$state" = connected ] || { tail -n 30 "${dirs[$i]}/postgres.log" >&2; die "zklock worker (${names[$i]}) not connected (state '$state')"; }
	done
	for i in "${!names[@]}"; do
		idle_psql "$i" "$status" | awk -F'|' -v n="${names[$i]}" '{ print "zklock", n, $2, $3, $4, $5 }' >>"$out"
	done
	echo READY >>"$out"

	# idle: no SQL until told to stop (bounded)
	local deadline=$((SECONDS + maxsecs))
	while [ ! -e "$stopfile" ] && [ $SECONDS -lt "$deadline" ]; do
		sleep 0.2
	done
	for i in "${!names[@]}"; do
		idle_psql "$i" "$status" | awk -F'|' -v n="${names[$i]}" '{ print "zklock-end", n, $2, $1 }' >>"$out"
	done
	[ -e "$stopfile" ] || die "idle part: not told to stop within ${maxsecs}s"
}

idle_cleanup() {
	trap '' INT TERM
	local d
	for d in "${IDLE_DIRS[@]}"; do
		if [ -f "$d/data/postmaster.pid" ]; then
			"$PGBIN/pg_ctl" -D "$d/data" -m immediate -w stop >/dev/null 2>&1 || true
		fi
		[ -n "${BENCH_KEEP:-}" ] || rm -rf "$d"
	done
}

# result_line PREFIX: turn a RESULT line of raw_cycle or CuratorBench on
# stdin into "PREFIX CPS P50 P99 AVG CYCLES CPU_TICKS ZK_TICKS REQS
# ALL_CYCLES" (REQS -1 and ALL_CYCLES 0 when the client does not say)
result_line() {
	awk -v prefix="$1" '/^RESULT/ {
		for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
		print prefix, f["cps"], f["p50"], f["p99"], f["avg"], f["cycles"],
			(f["cpu_jiffies"] == "" ? -1 : f["cpu_jiffies"]),
			(f["zk_jiffies"] == "" ? -1 : f["zk_jiffies"]),
			(f["requests"] == "" ? -1 : f["requests"]),
			(f["all_cycles"] == "" ? 0 : f["all_cycles"]) }'
}

# curator_modes SHAPES: CuratorBench's modes for those shape entries
curator_modes() {
	local s name n kind modes=""
	for s in $1; do
		IFS=: read -r name n kind <<<"$s"
		if [ "$kind" = semaphore ]; then
			modes="$modes $name:$n:$kind:$SEM_MAX"
		else
			modes="$modes $name:$n:$kind"
		fi
	done
	echo "${modes# }"
}

# raw_shapes PREFIX SHAPES HOSTS ZKPIDS WORK OUT: WORK/raw_cycle on every
# mutex shape of SHAPES against HOSTS; lines "PREFIX raw SHAPE ..." to OUT
raw_shapes() {
	local prefix=$1 shapes=$2 hosts=$3 zkpids=$4 work=$5 out=$6 s name n kind line
	for s in $shapes; do
		IFS=: read -r name n kind <<<"$s"
		case $kind in distinct|shared) ;; *) continue ;; esac
		log "raw $name: $n in flight, $kind, ${SECS}s"
		line=$(BENCH_ZK_PID=$zkpids "$work/raw_cycle" "$hosts" "$n" "$kind" "$SECS" 0.5) \
			|| die "raw_cycle failed"
		echo "$line" | result_line "$prefix raw $name" >>"$out"
		log "  $line"
	done
}

# curator_shapes PREFIX SHAPES HOSTS ZKPIDS WORK OUT [SYSTEM [JVMOPT...]]:
# one CuratorBench JVM (classes in WORK/classes, with the options JVMOPT)
# against HOSTS, its warm-up, then every shape of SHAPES; lines "PREFIX
# SYSTEM SHAPE ..." to OUT (SYSTEM: curator unless given; with JVMOPT,
# TLS's, the classpath also has NETTY_JARS)
curator_shapes() {
	local prefix=$1 shapes=$2 hosts=$3 zkpids=$4 work=$5 out=$6 sys=${7:-curator} name modes line
	local cp=$5/classes:$JAVA_CP_CURATOR
	shift $(($# < 7 ? $# : 7))
	[ $# = 0 ] || cp=$cp:$NETTY_JARS
	modes=$(curator_modes "$shapes")
	log "$sys: ${WARMUP}s JVM warm-up, then $modes, ${SECS}s each"
	# shellcheck disable=SC2086
	BENCH_ZK_PID=$zkpids java -Xms256m -Xmx512m "$@" -cp "$cp" CuratorBench \
		"$hosts" "$SECS" "$WARMUP" $modes >"$out.curator" || die "CuratorBench failed ($sys)"
	while read -r line; do
		log "  $line"
		name=$(echo "$line" | sed -n 's/^RESULT name=\([^ ]*\) .*/\1/p')
		[ -n "$name" ] || continue
		echo "$line" | result_line "$prefix $sys $name" >>"$out"
	done <"$out.curator"
}

###########################################################################
# Emulated network part: runs as the unprivileged user, inside its own
# user and network namespaces (the "bench namespace", made by the main
# part with unshare; see the header).
#	net_part DIR
# Environment: BENCH_WORK (the main part's work directory: raw_cycle,
# delay_proxy, the Java classes), BENCH_NET_ZKDIR (the servers' data
# directories), BENCH_SHAPES (net shape names), BENCH_ONLY, BENCH_RUNS,
# BENCH_SECONDS, BENCH_PG_SECONDS, BENCH_WARMUP, BENCH_LOCK_CACHE (list),
# BENCH_NET_MAXSECS (bound of every process started here).  Writes to
# DIR/results lines "net ROUND SYSTEM SHAPE ..." as the main part's
# results, and to DIR/proxy one line "FOLLOWER READ_DIRECT_P50
# READ_PROXY_P50 READ_DIRECT_AVG READ_PROXY_AVG CYCLE_DIRECT_P50
# CYCLE_PROXY_P50 CYCLE_DIRECT_AVG CYCLE_PROXY_AVG" (raw_cycle's read and
# lock cycle, 1 in flight, straight to the follower and through its
# proxy; microseconds).
###########################################################################
net_part() {
	local out=$1
	local work=$BENCH_WORK zkdir=$BENCH_NET_ZKDIR only=",${BENCH_ONLY:-raw,curator,sql},"
	local maxsecs=${BENCH_NET_MAXSECS:-3600} shapes
	local k h i ns exe self_ns servers="" modes follower="" leaders pp zkpids
	local round line lc

	shapes=$(select_shapes "$BENCH_SHAPES" "$NET_SHAPES_ALL")
	NET_OUT=$out
	NET_HOLDERS=()
	NET_SERVERS=()
	NET_PROXIES=()
	trap 'net_cleanup' EXIT
	trap 'exit 130' INT TERM
	mkdir -p "$out/pg"
	: >"$out/results"

	# the bench namespace: lo up, routing between the servers' links
	ip -o link show | grep -q -v ': lo:' && die "net: not in a network namespace of its own"
	ip link set lo up || die "net: cannot bring lo up in the bench namespace"
	echo 1 >/proc/sys/net/ipv4/ip_forward || die "net: cannot switch on forwarding in the bench namespace"
	self_ns=$(readlink /proc/$$/ns/net)

	for k in 1 2 3; do
		servers="${servers}server.$k=$NET_SUBNET.$k.2:2888:3888"$'\n'
	done
	for k in 1 2 3; do
		# the server's namespace: a holder process in it, gone with us
		setpriv --pdeathsig KILL -- unshare --net -- sleep "$maxsecs" >/dev/null 2>&1 &
		h=$!
		NET_HOLDERS+=("$h")
		ns=""
		for i in $(seq 1 200); do
			ns=$(readlink "/proc/$h/ns/net" 2>/dev/null || true)
			exe=$(readlink "/proc/$h/exe" 2>/dev/null || true)
			[ -n "$ns" ] && [ "$ns" != "$self_ns" ] && [[ "$exe" == */sleep ]] && break
			sleep 0.05
		done
		if [ -z "$ns" ] || [ "$ns" = "$self_ns" ]; then
			die "net: the namespace of server $k was not made"
		fi
		if ! { ip link add "zkb$k" type veth peer name eth0 netns "$h" &&
			ip addr add "$NET_SUBNET.$k.1/24" dev "zkb$k" &&
			ip link set "zkb$k" up &&
			nsenter --net="/proc/$h/ns/net" -- sh -c "ip link set lo up && ip addr add $NET_SUBNET.$k.2/24 dev eth0 && ip link set eth0 up && ip route add default via $NET_SUBNET.$k.1"; }; then
			die "net: cannot link server $k's namespace"
		fi
		ens_member_cfg "$out/zoo-$k.cfg" "$k" "$zkdir/zk$k" "$NET_SUBNET.$k.2" 2181 \
			"forceSync=yes"$'\n'"$servers"
	done
	for k in 1 2 3; do
		setpriv --pdeathsig KILL -- nsenter --net="/proc/${NET_HOLDERS[$((k - 1))]}/ns/net" -- \
			java -Xmx384m -cp /usr/share/java/zookeeper.jar \
			org.apache.zookeeper.server.quorum.QuorumPeerMain "$out/zoo-$k.cfg" \
			>"$out/zookeeper-$k.log" 2>&1 &
		NET_SERVERS+=("$!")
	done
	log "net: 3 ZooKeeper servers (forceSync=yes), one network namespace each, at $NET_SUBNET.{1,2,3}.2:2181"
	for i in $(seq 1 300); do
		modes=""
		leaders=0
		follower=""
		for k in 1 2 3; do
			line=$(four_letter 2181 srvr "$NET_SUBNET.$k.2" | sed -n 's/^Mode: //p')
			modes="$modes${modes:+ }${line:-none}"
			[ "$line" != leader ] || leaders=$((leaders + 1))
			[ "$line" != follower ] || [ -n "$follower" ] || follower=$k
		done
		if [[ "$modes" != *none* ]] && [ "$leaders" = 1 ] && [ -n "$follower" ]; then
			break
		fi
		for h in "${NET_SERVERS[@]}"; do
			kill -0 "$h" 2>/dev/null || { tail -n 20 "$out"/zookeeper-*.log >&2; die "net: a server exited"; }
		done
		sleep 0.3
	done
	if [ "$leaders" != 1 ] || [ -z "$follower" ]; then
		tail -n 20 "$out"/zookeeper-*.log >&2
		die "net: the ensemble did not form in 90 s (modes: $modes)"
	fi

	# one delaying proxy per server, on the bench namespace's 127.0.0.1
	for k in 1 2 3; do
		setpriv --pdeathsig KILL -- "$work/delay_proxy" "127.0.0.1:$((12180 + k))" \
			"$NET_SUBNET.$k.2:2181" "$NET_DELAY_US" "$maxsecs" \
			>"$out/proxy-$k.out" 2>"$out/proxy-$k.err" &
		NET_PROXIES+=("$!")
	done
	for k in 1 2 3; do
		for i in $(seq 1 100); do
			grep -q '^READY' "$out/proxy-$k.out" 2>/dev/null && break
			sleep 0.05
		done
		grep -q '^READY' "$out/proxy-$k.out" || { cat "$out/proxy-$k.err" >&2; die "net: proxy $k did not start"; }
	done
	pp=$((12180 + follower))
	zkpids=$(IFS=,; echo "${NET_SERVERS[*]}")
	log "net: ensemble up (modes: $modes); clients go to follower $follower through its proxy 127.0.0.1:$pp (${NET_DELAY_US} us each way)"

	# the servers' JIT warms up first (not counted)
	BENCH_ZK_PID=$zkpids "$work/raw_cycle" "127.0.0.1:$pp" 32 distinct "$WARMUP" >/dev/null \
		|| die "net: raw_cycle warm-up failed"
	# the proxy alone, 1 in flight, straight to the follower and through
	# its proxy: a read (one round trip, no write: no fsync in it) and the
	# raw cycle (three round trips, two of them writes)
	local how kind2 target
	: >"$out/proxy.raw"
	for kind2 in read distinct; do
		for how in direct proxy; do
			target=$NET_SUBNET.$follower.2:2181
			[ "$how" = direct ] || target=127.0.0.1:$pp
			# the proxy's own cost is a side measurement: when it fails
			# (seen: the direct connection to the follower timing out)
			# the run says so loudly and goes on to the shapes, which go
			# through the proxy
			if ! line=$(BENCH_ZK_PID=$zkpids "$work/raw_cycle" "$target" 1 "$kind2" "$SECS" 0.5); then
				log "net: WARNING: the proxy alone, $kind2, $how ($target): raw_cycle failed; not measured"
				continue
			fi
			log "net: the proxy alone, $kind2, $how ($target): $line"
			echo "$kind2 $how $line" >>"$out/proxy.raw"
		done
	done
	awk -v f="$follower" '{
		for (i = 4; i <= NF; i++) { split($i, kv, "="); v[$1, $2, kv[1]] = kv[2] } }
		function g(a, b, c) { return ((a, b, c) in v) ? v[a, b, c] : "-" }
		END { print f, g("read", "direct", "p50"), g("read", "proxy", "p50"),
			g("read", "direct", "avg"), g("read", "proxy", "avg"),
			g("distinct", "direct", "p50"), g("distinct", "proxy", "p50"),
			g("distinct", "direct", "avg"), g("distinct", "proxy", "avg") }' "$out/proxy.raw" >"$out/proxy"

	for round in $(seq 1 "$RUNS"); do
		[ "$RUNS" -gt 1 ] && log "net: round $round of $RUNS"
		if [[ "$only" == *,raw,* ]]; then
			raw_shapes "net $round" "$shapes" "127.0.0.1:$pp" "$zkpids" "$work" "$out/results"
		fi
		if [[ "$only" == *,curator,* ]]; then
			curator_shapes "net $round" "$shapes" "127.0.0.1:$pp" "$zkpids" "$work" "$out/results"
		fi
		if [[ "$only" == *,sql,* ]]; then
			for lc in ${LOCK_CACHES//,/ }; do
				: >"$out/sql.results"
				BENCH_LOCK_CACHE=$lc BENCH_PG_PARENT="$out/pg" \
					bash "$HERE/run.sh" --sql-part "$pp" "$out/sql.results" "$zkpids" \
					|| die "net: PostgreSQL part failed"
				sed "s/^/net $round /" "$out/sql.results" >>"$out/results"
			done
		fi
	done
	log "net: follower $follower: $(four_letter 2181 srvr "$NET_SUBNET.$follower.2" | grep -E 'Latency|Outstanding|Node count' | tr '\n' ' ')"
}

# net_cleanup: the proxies, servers and namespace holders of net_part (its
# exit trap); the veth pairs go with the servers' namespaces, the bench
# namespace with its last process
net_cleanup() {
	trap '' INT TERM
	local pid k
	stop_pids "${NET_PROXIES[@]}" "${NET_SERVERS[@]}"
	for k in 1 2 3; do
		[ ! -s "$NET_OUT/proxy-$k.err" ] || log "net: $(cat "$NET_OUT/proxy-$k.err")"
	done
	for pid in "${NET_HOLDERS[@]}"; do
		kill -KILL "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	done
	for k in 1 2 3; do
		ip link del "zkb$k" >/dev/null 2>&1 || true
	done
}

# re-entry points for the PostgreSQL parts (as the unprivileged user)
if [ "${1:-}" = "--sql-part" ]; then
	sql_part "$2" "$3" "${4:-}" "${5:-shapes}"
	exit 0
fi
if [ "${1:-}" = "--idle-part" ]; then
	shift
	idle_part "$@"
	exit 0
fi
if [ "${1:-}" = "--net-part" ]; then
	net_part "$2"
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
		--idle-seconds) IDLE_SECS=$2; shift 2 ;;
		--fsync|--fsync-only) ZK_FSYNC=yes; shift ;;
		--nofsync-only|--no-fsync) ZK_FSYNC=no; shift ;;
		--lock-cache) LOCK_CACHES=$2; shift 2 ;;
		--lock-cache=*) LOCK_CACHES=${1#--lock-cache=}; shift ;;
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
[[ "$IDLE_SECS" =~ ^[1-9][0-9]*$ ]] || die "--idle-seconds takes a positive number"
if ! [[ "$PG_SECS" =~ ^[0-9]+$ ]] || [ "$PG_SECS" -lt 2 ]; then
	die "--pg-seconds takes a number of seconds, 2 or more"
fi
for lc in ${LOCK_CACHES//,/ }; do
	case $lc in off|on) ;; *) die "--lock-cache takes off, on or off,on (not '$lc')" ;; esac
done
[ -n "${LOCK_CACHES//,/}" ] || die "--lock-cache takes off, on or off,on"
known="idle mix8"
for s in $ALL_SHAPES $NET_SHAPES_ALL $TLS_SHAPES_ALL; do known="$known ${s%%:*}"; done
for name in ${SHAPE_NAMES//,/ }; do
	[[ " $known " == *" $name "* ]] || die "--shapes: '$name' is not a shape (names: $known)"
done
SHAPES=$(select_shapes "$SHAPE_NAMES")
NET_SHAPES=$(select_shapes "$SHAPE_NAMES" "$NET_SHAPES_ALL")
# the TLS part: only when its shapes are named (not in the default run)
TLS_SHAPES=""
[ -z "$SHAPE_NAMES" ] || TLS_SHAPES=$(select_shapes "$SHAPE_NAMES" "$TLS_SHAPES_ALL")
# idle and mix8: in a full run, or when named among the shapes
IDLE=""
if [ -z "$SHAPE_NAMES" ] || [[ ",$SHAPE_NAMES," == *",idle,"* ]]; then
	IDLE=1
fi
MIX=""
if [ -z "$SHAPE_NAMES" ] || [[ ",$SHAPE_NAMES," == *",mix8,"* ]]; then
	MIX=1
fi
if [ -n "$IDLE" ] && ! want sql && ! want curator; then
	log "idle: measures zklock and Curator, neither is in --only: skipped"
	IDLE=""
fi
if [ -n "$MIX" ] && ! { want sql && want curator; }; then
	[ -z "$SHAPE_NAMES" ] || die "mix8 measures zklock and Curator together: --only must name both"
	log "mix8: measures zklock and Curator together, --only does not name both: skipped"
	MIX=""
fi
[ -n "$SHAPES" ] || [ -n "$IDLE" ] || [ -n "$MIX" ] || [ -n "$NET_SHAPES" ] || [ -n "$TLS_SHAPES" ] \
	|| die "nothing to run"
# the TLS part's servers: one per forceSync setting asked for
TLS_PASSES=""
[ -z "$TLS_SHAPES" ] || TLS_PASSES=$FSYNC_PASSES
# idle alone: one server
[ -n "$SHAPES" ] || [ -n "$MIX" ] || FSYNC_PASSES=${FSYNC_PASSES%% *}
# the net shapes alone: no standalone server
[ -n "$SHAPES$MIX$IDLE" ] || FSYNC_PASSES=""
# the names as the PostgreSQL parts take them
shape_names() { local s out=""; for s in $1; do out="$out${out:+,}${s%%:*}"; done; echo "$out"; }
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
# the emulated network needs user and network namespaces (as the tests')
NS_UNSHARE=(unshare --user --map-current-user --net --keep-caps)
if [ -n "$NET_SHAPES" ]; then
	if [ "$(id -u)" = 0 ]; then
		id "$PG_USER" >/dev/null 2>&1 || useradd -m "$PG_USER"
		probe=$(runuser -u "$PG_USER" -- "${NS_UNSHARE[@]}" -- unshare --net -- true 2>&1) || probe_rc=$?
	else
		probe=$("${NS_UNSHARE[@]}" -- unshare --net -- true 2>&1) || probe_rc=$?
	fi
	[ "${probe_rc:-0}" = 0 ] \
		|| die "net shapes: '${NS_UNSHARE[*]}' (then unshare --net in it) fails here: $probe (unprivileged user namespaces off, or a chroot?)"
fi

WORK=""			# work directory: clients, results, logs
ZK_DIR=""		# ZooKeeper's data directories
PG_PARENT=""	# the PostgreSQL part's clusters
ZK_PID=""		# the ZooKeeper server running now
ENS_PIDS=()		# the idle part's ensemble
ENS_PORTS=()	# its client ports
IDLE_PIDS=()	# the idle part's clients (the PostgreSQL side, CuratorIdle)
MIX_PIDS=()		# mix8's two sides while they run

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
	for f in "$PG_PARENT"/zklock-bench-pg.*/data/postmaster.pid \
		"$WORK"/net/pg/zklock-bench-pg.*/data/postmaster.pid; do
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

# ens_stop: stop the idle part's ensemble, if any (also at exit)
ens_stop() {
	stop_pids "${ENS_PIDS[@]}"
	ENS_PIDS=()
}

# idle_clients_stop: the idle part's clients still running (at exit)
idle_clients_stop() {
	stop_pids "${IDLE_PIDS[@]}"
	IDLE_PIDS=()
}

# mix_stop: mix8's sides still running (at exit)
mix_stop() {
	stop_pids "${MIX_PIDS[@]}"
	MIX_PIDS=()
}

# cleanup: everything started here goes, the directories too
cleanup() {
	trap '' INT TERM	# no second signal in the middle of it
	idle_clients_stop
	mix_stop
	zk_stop
	ens_stop
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
#   FSYNC ROUND SYSTEM SHAPE CPS P50 P99 AVG CYCLES CPU_TICKS ZK_TICKS REQS ALL_CYCLES
RESULTS=$WORK/results
: >"$RESULTS"

# ens_launch: the idle part's 3-server ensemble on 127.0.0.1 (tickTime as
# in Debian's zoo.cfg, so sessions are capped at 20 ticks), launched now
# and waited for by ens_wait: its election overlaps the builds below
ens_launch() {
	local -a ports=()
	local p i servers=""
	while [ ${#ports[@]} -lt 9 ]; do
		p=$(free_port)
		[[ " ${ports[*]} " == *" $p "* ]] || ports+=("$p")
	done
	for i in 1 2 3; do
		servers="${servers}server.$i=127.0.0.1:${ports[$((i + 2))]}:${ports[$((i + 5))]}"$'\n'
	done
	for i in 1 2 3; do
		ENS_PORTS+=("${ports[$((i - 1))]}")
		rm -rf "${ZK_DIR:?}/ens-$i"
		ens_member_cfg "$WORK/zoo-ens-$i.cfg" "$i" "$ZK_DIR/ens-$i" 127.0.0.1 \
			"${ports[$((i - 1))]}" "$servers"
		java -Xmx256m -cp /usr/share/java/zookeeper.jar \
			org.apache.zookeeper.server.quorum.QuorumPeerMain "$WORK/zoo-ens-$i.cfg" \
			>"$WORK/zookeeper-ens-$i.log" 2>&1 &
		ENS_PIDS+=($!)
	done
	ENS_LAUNCHED=$SECONDS
	log "idle: starting a 3-server ensemble on 127.0.0.1:${ENS_PORTS[0]},${ENS_PORTS[1]},${ENS_PORTS[2]} (tickTime $ZK_TICK)"
}

# ens_wait: until every server of the ensemble serves (60 s at most); sets
# ENS_FOLLOWER (client port of a follower) and ENS_MODES
ens_wait() {
	local i mode n pid deadline=$((SECONDS + 60))
	while :; do
		n=0
		ENS_MODES=""
		ENS_FOLLOWER=""
		for i in 0 1 2; do
			mode=$(four_letter "${ENS_PORTS[$i]}" srvr | sed -n 's/^Mode: //p')
			ENS_MODES="$ENS_MODES${ENS_MODES:+ }${mode:-none}"
			case $mode in
				leader) n=$((n + 1)) ;;
				follower) n=$((n + 1)); [ -n "$ENS_FOLLOWER" ] || ENS_FOLLOWER=${ENS_PORTS[$i]} ;;
			esac
		done
		[ $n = 3 ] && [ -n "$ENS_FOLLOWER" ] && break
		for pid in "${ENS_PIDS[@]}"; do
			kill -0 "$pid" 2>/dev/null || { tail -n 20 "$WORK"/zookeeper-ens-*.log >&2; die "idle: a server of the ensemble exited"; }
		done
		[ $SECONDS -lt "$deadline" ] || { tail -n 20 "$WORK"/zookeeper-ens-*.log >&2; die "idle: the ensemble did not form in 60 s (modes: $ENS_MODES)"; }
		sleep 0.3
	done
	log "idle: ensemble up (modes: $ENS_MODES), clients go to the follower on port $ENS_FOLLOWER"
}

[ -z "$IDLE" ] || ens_launch

# as_pg_user CMD...: run CMD as the unprivileged user ($PG_USER when run
# as root, else whoever runs this)
as_pg_user() {
	if [ "$(id -u)" = 0 ]; then
		runuser -u "$PG_USER" -- "$@"
	else
		"$@"
	fi
}

# pg_envs LOCK_CACHE SHAPES: the environment of a PostgreSQL part (an
# "env" command line, in PG_ENVS)
pg_envs() {
	PG_ENVS=(env BENCH_PG_SECONDS="$PG_SECS" BENCH_WARMUP="$WARMUP"
		BENCH_SHAPES="$(shape_names "$2")" BENCH_KEEP="${BENCH_KEEP:-}" PGBIN="$PGBIN"
		BENCH_PG_PARENT="$PG_PARENT" BENCH_LOCK_CACHE="$1")
}

# fresh_file FILE: an empty FILE the unprivileged user can write
fresh_file() {
	: >"$1"
	[ "$(id -u)" != 0 ] || chown "$PG_USER" "$1"
}

# zklock.lock_cache: each value asked for must be what the server shows,
# checked now on a throwaway cluster rather than after minutes of runs
if want sql && [ -n "$SHAPES$MIX$NET_SHAPES$TLS_SHAPES" ]; then
	for lc in ${LOCK_CACHES//,/ }; do
		log "checking zklock.lock_cache = $lc on a throwaway cluster"
		fresh_file "$WORK/check.results"
		pg_envs "$lc" ""
		as_pg_user "${PG_ENVS[@]}" bash "$HERE/run.sh" --sql-part "$(free_port)" "$WORK/check.results" "" check \
			|| die "zklock.lock_cache = $lc cannot be measured with this zklock build (see above)"
	done
fi

# build the clients (raw_cycle also measures the net shapes' proxy)
if { want raw && [ -n "$SHAPES$TLS_SHAPES" ]; } || [ -n "$NET_SHAPES" ]; then
	log "building raw_cycle"
	gcc -O2 -Wall -o "$WORK/raw_cycle" "$HERE/raw_cycle.c" -lzookeeper_st
fi
if [ -n "$NET_SHAPES" ]; then
	log "building delay_proxy"
	gcc -O2 -Wall -o "$WORK/delay_proxy" "$HERE/delay_proxy.c"
fi
if want curator; then
	java_src=()
	[ -z "$SHAPES$MIX$NET_SHAPES$TLS_SHAPES" ] || java_src+=("$HERE/CuratorBench.java")
	[ -z "$IDLE" ] || java_src+=("$HERE/CuratorIdle.java")
	log "building$(for f in "${java_src[@]}"; do printf ' %s' "$(basename "$f" .java)"; done)"
	mkdir -p "$WORK/classes"
	javac -nowarn -encoding UTF-8 -d "$WORK/classes" -cp "$JAVA_CP_CURATOR" "${java_src[@]}"
fi

# tls_pki: the TLS part's CA, certificates for 127.0.0.1 and PKCS#12
# stores, made by the TLS tests' own test/perl/ZklockPki.pm (openssl,
# keytool) in $WORK/pki as the unprivileged user (zklock reads its key
# there); writes there server.cfg (the zoo.cfg lines of a Netty
# secureClientPort that needs client certificates, @SECURE_PORT@ to fill
# in), curator.opts (the Java client's TLS options, one a line) and
# zklock.conf (zklock's TLS settings, zklock.hosts @HOSTS@ to fill in)
tls_pki() {
	local dir=$WORK/pki
	mkdir -p "$dir"
	[ "$(id -u)" != 0 ] || chown "$PG_USER" "$dir"
	log "TLS: a CA, server and client certificates and their stores in $dir (test/perl/ZklockPki.pm)"
	# shellcheck disable=SC2016	# perl's variables, not the shell's
	as_pg_user perl -I"$HERE/../perl" -MZklockPki -e '
		my $d = shift;
		pki_ca($d, "ca");
		pki_cert($d, $_, "ca") for qw(server client);
		my $trust = pki_truststore($d, "trust", "ca");
		my %out = (
			"server.cfg" => tls_server_config(pki_p12($d, "server"), $trust),
			"curator.opts" => join("", map { "$_\n" } tls_peer_options(pki_p12($d, "client"), $trust)),
			"zklock.conf" => tls_conf($d, "ca", "client", "\@HOSTS\@"));
		for my $f (keys %out)
		{
			open(my $fh, ">", "$d/$f") or die "$d/$f: $!";
			print $fh $out{$f};
			close($fh) or die "$d/$f: $!";
		}' "$dir" || die "TLS: the certificates could not be made"
	mapfile -t TLS_JVM_OPTS <"$dir/curator.opts"
}
TLS_JVM_OPTS=()
[ -z "$TLS_SHAPES" ] || tls_pki

# zk_start yes|no [tls]: private ZooKeeper server with that forceSync, on
# a fresh data directory and a fresh port; sets ZK_PORT, ZK_PID and ZK.
# With tls (the TLS part) the server is Netty's and also has a
# secureClientPort that needs client certificates (tls_pki's server.cfg),
# on ZK_TLS_PORT
zk_start() {
	local fsync=$1 tls=${2:-} i name=$1
	ZK_PORT=$(free_port)
	if [ -n "$tls" ]; then
		name=$fsync-tls
		ZK_TLS_PORT=$ZK_PORT
		while [ "$ZK_TLS_PORT" = "$ZK_PORT" ]; do ZK_TLS_PORT=$(free_port); done
	fi
	rm -rf "${ZK_DIR:?}/data-$name"
	mkdir -p "$ZK_DIR/data-$name"
	cat >"$WORK/zoo-$name.cfg" <<EOF
tickTime=$ZK_TICK
dataDir=$ZK_DIR/data-$name
clientPort=$ZK_PORT
clientPortAddress=127.0.0.1
admin.enableServer=false
4lw.commands.whitelist=*
maxClientCnxns=0
forceSync=$fsync
EOF
	[ -z "$tls" ] || sed "s/@SECURE_PORT@/$ZK_TLS_PORT/" "$WORK/pki/server.cfg" >>"$WORK/zoo-$name.cfg"
	log "starting ZooKeeper on 127.0.0.1:$ZK_PORT$([ -z "$tls" ] || echo " and, over TLS, 127.0.0.1:$ZK_TLS_PORT (Netty)") (forceSync=$fsync, data in $ZK_DIR, ${ZK_DIR_FS:-?})"
	[ "$ZK_DIR_FS" != tmpfs ] || [ "$fsync" = no ] \
		|| log "warning: $ZK_DIR is a tmpfs: forceSync=yes syncs nothing there (set BENCH_ZK_DIR)"
	java -Xmx512m -cp "/usr/share/java/zookeeper.jar${tls:+:$NETTY_JARS}" \
		org.apache.zookeeper.server.ZooKeeperServerMain "$WORK/zoo-$name.cfg" \
		>"$WORK/zookeeper-$name.log" 2>&1 &
	ZK_PID=$!
	for i in $(seq 1 100); do
		# imok comes before the server serves: also wait for srvr to show its mode
		[ "$(four_letter "$ZK_PORT" ruok)" = imok ] &&
			four_letter "$ZK_PORT" srvr | grep -q '^Mode:' && break
		kill -0 "$ZK_PID" 2>/dev/null || { cat "$WORK/zookeeper-$name.log" >&2; die "ZooKeeper exited"; }
		sleep 0.2
	done
	[ "$(four_letter "$ZK_PORT" ruok)" = imok ] || die "ZooKeeper did not answer ruok"
	ZK=127.0.0.1:$ZK_PORT
}

# raw_round FSYNC ROUND: raw_cycle on every mutex shape
raw_round() {
	raw_shapes "$1 $2" "$SHAPES" "$ZK" "$ZK_PID" "$WORK" "$RESULTS"
}

# curator_round FSYNC ROUND: one JVM, its warm-up, then every shape
curator_round() {
	curator_shapes "$1 $2" "$SHAPES" "$ZK" "$ZK_PID" "$WORK" "$RESULTS"
}

# sql_shapes PREFIX SHAPES [TLSCONF]: the PostgreSQL part (a fresh
# cluster per lock_cache value) as the unprivileged user, on SHAPES, its
# lines prefixed with PREFIX; with TLSCONF, zklock's TLS settings (a file)
sql_shapes() {
	local prefix=$1 shapes=$2 tlsconf=${3:-} lc
	for lc in ${LOCK_CACHES//,/ }; do
		fresh_file "$WORK/sql.results"
		pg_envs "$lc" "$shapes"
		PG_ENVS+=(BENCH_TLS_CONF="$tlsconf")
		as_pg_user "${PG_ENVS[@]}" \
			bash "$HERE/run.sh" --sql-part "$ZK_PORT" "$WORK/sql.results" "$ZK_PID" \
			|| die "PostgreSQL part failed (zklock.lock_cache = $lc${tlsconf:+, over TLS})"
		sed "s/^/$prefix /" "$WORK/sql.results" >>"$RESULTS"
	done
}

# sql_round FSYNC ROUND: the PostgreSQL part on every shape
sql_round() {
	sql_shapes "$1 $2" "$SHAPES"
}

# tls_round FSYNC ROUND: the TLS part's shapes on the server zk_start
# made with tls: raw C (plaintext only), Curator in plaintext and over
# TLS (a JVM each), zklock in plaintext and over TLS (a cluster each per
# lock_cache value); lines "tls-FSYNC ROUND SYSTEM SHAPE ...", the TLS
# systems named SYSTEM-tls.  Requests are counted on the plaintext port
# (mntr counts both ports' requests: one server)
tls_round() {
	local prefix="tls-$1 $2" conf=$WORK/pki/zklock-$1.conf
	if want raw; then raw_shapes "$prefix" "$TLS_SHAPES" "$ZK" "$ZK_PID" "$WORK" "$RESULTS"; fi
	if want curator; then
		curator_shapes "$prefix" "$TLS_SHAPES" "$ZK" "$ZK_PID" "$WORK" "$RESULTS"
		BENCH_ZK_MNTR=$ZK curator_shapes "$prefix" "$TLS_SHAPES" "127.0.0.1:$ZK_TLS_PORT" \
			"$ZK_PID" "$WORK" "$RESULTS" curator-tls "${TLS_JVM_OPTS[@]}"
	fi
	if want sql; then
		sed "s/@HOSTS@/127.0.0.1:$ZK_TLS_PORT/" "$WORK/pki/zklock.conf" >"$conf"
		sql_shapes "$prefix" "$TLS_SHAPES"
		sql_shapes "$prefix" "$TLS_SHAPES" "$conf"
	fi
}

# mix_round FSYNC ROUND: mix8 on the server running now, once per
# lock_cache value (see the header); writes to $WORK/mix.results
#	FSYNC ROUND LOCK_CACHE SQL_CPS SQL_P50 SQL_P99 CUR_CPS CUR_P50 CUR_P99
#	CPU_TICKS ZK_TICKS WIN_CYCLES REQS ALL_CYCLES
# (latencies in us, Curator's of the acquire alone; the ticks over
# Curator's window, WIN_CYCLES what both completed in it; REQS what the
# server received from before the start to after both ended, ALL_CYCLES
# what both completed in that time)
mix_round() {
	local fsync=$1 round=$2 lc dir i rq0 rq1 cur sqlline ok
	for lc in ${LOCK_CACHES//,/ }; do
		dir=$WORK/mix
		rm -rf "$dir"
		mkdir -p "$dir"
		chmod 755 "$dir"
		[ "$(id -u)" != 0 ] || chown "$PG_USER" "$dir"
		fresh_file "$WORK/sql.results"
		log "mix8 (lock_cache $lc): $MIX_SQL pgbench sessions and $MIX_CURATOR Curator threads on $MIX_PATH, ${PG_SECS}s, both at once"
		pg_envs "$lc" ""
		as_pg_user "${PG_ENVS[@]}" \
			bash "$HERE/run.sh" --sql-part "$ZK_PORT" "$WORK/sql.results" "$ZK_PID" "mix:$dir" &
		MIX_PIDS=("$!")
		BENCH_GO_FILE=$dir/go BENCH_ZK_PID=$ZK_PID java -Xms256m -Xmx512m \
			-cp "$WORK/classes:$JAVA_CP_CURATOR" CuratorBench "$ZK" "$((PG_SECS - 1))" "$WARMUP" \
			"mix8:$MIX_CURATOR:mixed:$MIX_PATH" >"$dir/curator.out" &
		MIX_PIDS+=("$!")
		ok=""
		for i in $(seq 1 1800); do
			if [ -e "$dir/sql.ready" ] && grep -q '^READY' "$dir/curator.out"; then
				ok=1
				break
			fi
			if ! kill -0 "${MIX_PIDS[0]}" 2>/dev/null || ! kill -0 "${MIX_PIDS[1]}" 2>/dev/null; then
				break
			fi
			sleep 0.1
		done
		[ -n "$ok" ] || die "mix8: the PostgreSQL side or Curator did not get ready (in 180 s, or exited)"
		rq0=$(zk_received "$ZK_PORT")
		touch "$dir/go"
		wait "${MIX_PIDS[1]}" || die "mix8: CuratorBench failed"
		wait "${MIX_PIDS[0]}" || die "mix8: the PostgreSQL side failed (zklock.lock_cache = $lc)"
		MIX_PIDS=()
		rq1=$(zk_received "$ZK_PORT")
		cur=$(grep '^RESULT' "$dir/curator.out") || die "mix8: no result from Curator"
		sqlline=$(awk '$2 == "mix8"' "$WORK/sql.results")
		[ -n "$sqlline" ] || die "mix8: no result from the PostgreSQL side"
		log "  mix8 Curator: $cur"
		# pgbench log: client_id transaction_no time(us) script_no epoch epoch_us
		awk -v fs="$fsync" -v round="$round" -v lc="$lc" -v cur="$cur" -v sql="$sqlline" \
			-v rq0="$rq0" -v rq1="$rq1" '
			BEGIN {
				n = split(cur, f, " ")
				for (i = 2; i <= n; i++) { split(f[i], kv, "="); c[kv[1]] = kv[2] }
				split(sql, q, " ")
			}
			{ ms = $5 * 1000 + $6 / 1000; if (ms >= c["win_start_ms"] && ms <= c["win_end_ms"]) inwin++ }
			END {
				win = c["cycles"] + inwin
				print fs, round, lc, q[3], q[4], q[5], c["cps"], c["p50"], c["p99"],
					c["cpu_jiffies"], c["zk_jiffies"], win,
					(rq0 < 0 || rq1 < 0) ? -1 : rq1 - rq0, c["all_cycles"] + q[11]
			}' "$dir/sql.log" >>"$WORK/mix.results"
		log "  mix8 (lock_cache $lc): $(tail -n 1 "$WORK/mix.results")"
	done
}

# net_round: the emulated network's part (see the header), as the
# unprivileged user in user and network namespaces of its own; its
# results join $RESULTS, the proxy's own measurement goes to
# $WORK/net/proxy
net_round() {
	local dir=$WORK/net
	mkdir -p "$dir" "$ZK_DIR/net"
	chmod 755 "$ZK_DIR"
	[ "$(id -u)" != 0 ] || chown "$PG_USER" "$dir" "$ZK_DIR/net"
	log "net: the emulated network's part, in namespaces of its own (${NS_UNSHARE[*]})"
	as_pg_user env BENCH_WORK="$WORK" BENCH_NET_ZKDIR="$ZK_DIR/net" \
		BENCH_SHAPES="$(shape_names "$NET_SHAPES")" BENCH_ONLY="$ONLY" BENCH_RUNS="$RUNS" \
		BENCH_SECONDS="$SECS" BENCH_PG_SECONDS="$PG_SECS" BENCH_WARMUP="$WARMUP" \
		BENCH_LOCK_CACHE="$LOCK_CACHES" BENCH_KEEP="${BENCH_KEEP:-}" PGBIN="$PGBIN" \
		BENCH_NET_MAXSECS="$NET_MAXSECS" \
		"${NS_UNSHARE[@]}" -- bash "$HERE/run.sh" --net-part "$dir" \
		|| die "the emulated network's part failed"
	cat "$dir/results" >>"$RESULTS"
}

# cons_snapshot LABEL PORT: the sessions connected to the server on PORT,
# one line "LABEL SID RECVED TIMEOUT" each (SID in lower case without 0x
# and leading zeros); connections without a session (the four-letter word
# asking) are left out
cons_snapshot() {
	four_letter "$2" cons | awk -v label="$1" '/sid=/ {
		line = $0
		sub(/^[^(]*\(/, "", line); sub(/\)[^)]*$/, "", line)
		n = split(line, kv, ",")
		sid = ""; rec = ""; to = ""
		for (i = 1; i <= n; i++) {
			eq = index(kv[i], "=")
			k = substr(kv[i], 1, eq - 1); v = substr(kv[i], eq + 1)
			if (k == "sid") sid = v; else if (k == "recved") rec = v; else if (k == "to") to = v
		}
		sid = tolower(sid); sub(/^0x/, "", sid); sub(/^0+/, "", sid)
		if (sid != "") print label, sid, rec, to
	}'
}

# idle_measure FSYNC: the idle part (see the header), on the standalone
# server running now and on the ensemble launched at the start; writes
# "SERVER SYSTEM COUNT SECS TIMEOUT_MS MODE" lines to $WORK/idle.results
idle_measure() {
	local fsync=$1 stop=$WORK/idle.stop zout=$WORK/idle.zklock cout=$WORK/idle.curator
	local maxsecs=$((IDLE_SECS + 120)) deadline pid t0 t1 i k
	local -a specs
	local t_start=$SECONDS

	IDLE_ENS_AHEAD=$((SECONDS - ENS_LAUNCHED))
	ens_wait
	specs=("standalone=127.0.0.1:$ZK_PORT" "ensemble=127.0.0.1:$ENS_FOLLOWER")
	rm -f "$stop"
	: >"$zout"
	: >"$cout"
	IDLE_PIDS=()
	if want sql; then
		log "idle: two PostgreSQL clusters with zklock (session_timeout $IDLE_TIMEOUT ms, server_tick_time $ZK_TICK ms), one per server"
		local envs=(env BENCH_KEEP="${BENCH_KEEP:-}" PGBIN="$PGBIN" BENCH_PG_PARENT="$PG_PARENT")
		if [ "$(id -u)" = 0 ]; then
			chown "$PG_USER" "$zout"
			runuser -u "$PG_USER" -- "${envs[@]}" \
				bash "$HERE/run.sh" --idle-part "$zout" "$stop" "$maxsecs" "${specs[@]}" &
		else
			"${envs[@]}" bash "$HERE/run.sh" --idle-part "$zout" "$stop" "$maxsecs" "${specs[@]}" &
		fi
		IDLE_PIDS+=($!)
	fi
	if want curator; then
		log "idle: CuratorIdle, one CuratorFramework per server (Curator's default session timeout, $IDLE_TIMEOUT ms)"
		java -Xmx128m -cp "$WORK/classes:$JAVA_CP_CURATOR" CuratorIdle "$stop" "$maxsecs" "${specs[@]}" \
			>"$cout" 2>"$WORK/curator-idle.err" &
		IDLE_PIDS+=($!)
	fi
	# both ready: every session made, nothing more to do
	deadline=$((SECONDS + 90))
	while :; do
		k=0
		if ! want sql || grep -q '^READY' "$zout"; then k=$((k + 1)); fi
		if ! want curator || grep -q '^READY' "$cout"; then k=$((k + 1)); fi
		[ $k = 2 ] && break
		for pid in "${IDLE_PIDS[@]}"; do
			kill -0 "$pid" 2>/dev/null || { cat "$WORK/curator-idle.err" >&2; die "idle: a client exited before it was ready"; }
		done
		[ $SECONDS -lt "$deadline" ] || die "idle: clients not ready in 90 s"
		sleep 0.2
	done
	# the sessions' ids: "SYSTEM SERVER SID TIMEOUT MODE"
	{
		awk '$1 == "zklock" { s = tolower($3); sub(/^0x/, "", s); sub(/^0+/, "", s); print "zklock", $2, s, $4, $5 }' "$zout"
		awk '$1 == "SESSION" { for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
			s = tolower(f["sid"]); sub(/^0x/, "", s); sub(/^0+/, "", s)
			print "curator", f["name"], s, f["timeout"], "-" }' "$cout"
	} >"$WORK/idle.sessions"
	log "idle: sessions: $(tr '\n' ';' <"$WORK/idle.sessions")"
	sleep 1		# whatever the connections still had to say

	idle_snapshots() {
		cons_snapshot standalone "$ZK_PORT"
		for i in 0 1 2; do cons_snapshot ensemble "${ENS_PORTS[$i]}"; done
	}
	t0=$(date +%s%N)
	idle_snapshots >"$WORK/idle.cons0"
	log "idle: counting what the servers receive for ${IDLE_SECS}s, no SQL, nothing held"
	sleep "$IDLE_SECS"
	t1=$(date +%s%N)
	idle_snapshots >"$WORK/idle.cons1"

	touch "$stop"
	for pid in "${IDLE_PIDS[@]}"; do
		wait "$pid" || log "idle: warning: a client exited with status $?"
	done
	IDLE_PIDS=()
	# did zklock keep its sessions, connected, all along?
	awk '$1 == "zklock-end" && $4 != "connected" { print "idle: warning: zklock (" $2 ") ended " $4 }' "$zout" | while read -r l; do log "$l"; done
	ens_stop

	# per session: received at the end minus at the start, summed over the
	# servers of its kind; "-" when the session changed connections (a
	# connection's count starts again at 0)
	awk -v secs="$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", (b - a) / 1e9 }')" '
		FILENAME ~ /sessions$/ { sys[NR] = $1; srv[NR] = $2; sid[NR] = $3; to[NR] = $4; mode[NR] = $5; n = NR; next }
		FILENAME ~ /cons0$/ { r0[$1, $2] += $3; c0[$1, $2]++; next }
		{ r1[$1, $2] += $3; c1[$1, $2]++; t1[$1, $2] = $4 }
		END {
			for (i = 1; i <= n; i++) {
				k = srv[i] SUBSEP sid[i]
				cnt = (c0[k] && c0[k] == c1[k] && r1[k] >= r0[k]) ? r1[k] - r0[k] : "-"
				print srv[i], sys[i], cnt, secs, (t1[k] != "" ? t1[k] : to[i]), mode[i]
			}
		}' "$WORK/idle.sessions" "$WORK/idle.cons0" "$WORK/idle.cons1" >"$WORK/idle.results"
	while read -r l; do log "  idle: $l"; done <"$WORK/idle.results"
	IDLE_FSYNC=$fsync
	IDLE_TOOK=$((SECONDS - t_start))
}

# zk_record LABEL: the server's view (srvr) at the end of a pass, for the
# record (logged, and in ZK_STATS for the end)
zk_record() {
	local stats
	stats=$(four_letter "$ZK_PORT" srvr | grep -E 'Latency|Outstanding|Node count' | tr '\n' ' ' | sed 's/ *$//' || true)
	log "zookeeper ($1): $stats"
	ZK_STATS="$ZK_STATS${ZK_STATS:+; }$1: $stats"
}

# the passes: one server per forceSync setting, RUNS rounds on each, a
# round being the three systems one after the other on every shape; the
# idle part on the first pass's server, before anything else runs on it
ZK_STATS=""
IDLE_TOOK=""
for fsync in $FSYNC_PASSES; do
	zk_start "$fsync"
	if [ -n "$IDLE" ] && [ -z "$IDLE_TOOK" ]; then
		idle_measure "$fsync"
	fi
	if [ -z "$SHAPES" ] && [ -z "$MIX" ]; then
		zk_stop
		break		# idle alone: one server is enough
	fi

	# the server's JIT warms up on whatever runs first: give it the same
	# start for everyone, with a raw run that is not counted
	if want raw && [ -n "$SHAPES" ]; then
		BENCH_ZK_PID=$ZK_PID "$WORK/raw_cycle" "$ZK" 32 distinct "$WARMUP" >/dev/null \
			|| die "raw_cycle warm-up failed"
	else
		log "server warm-up with Curator happens inside its own warm-up"
	fi

	for round in $(seq 1 "$RUNS"); do
		[ "$RUNS" -gt 1 ] && log "forceSync=$fsync: round $round of $RUNS"
		if [ -n "$SHAPES" ]; then
			if want raw; then raw_round "$fsync" "$round"; fi
			if want curator; then curator_round "$fsync" "$round"; fi
			if want sql; then sql_round "$fsync" "$round"; fi
		fi
		if [ -n "$MIX" ]; then mix_round "$fsync" "$round"; fi
	done

	zk_record "forceSync=$fsync"
	zk_stop
done

# the TLS part: its own server per forceSync setting (Netty, plaintext
# and TLS ports), after the passes
for fsync in $TLS_PASSES; do
	zk_start "$fsync" tls
	if want raw; then
		BENCH_ZK_PID=$ZK_PID "$WORK/raw_cycle" "$ZK" 32 distinct "$WARMUP" >/dev/null \
			|| die "raw_cycle warm-up failed"
	fi
	for round in $(seq 1 "$RUNS"); do
		[ "$RUNS" -gt 1 ] && log "TLS, forceSync=$fsync: round $round of $RUNS"
		tls_round "$fsync" "$round"
	done
	zk_record "TLS part, forceSync=$fsync"
	zk_stop
done

# the emulated network: its own ensemble, after the passes
if [ -n "$NET_SHAPES" ]; then
	nlc=$(echo "${LOCK_CACHES//,/ }" | wc -w)
	# a bound for every process of the part: generous, not a timing
	NET_MAXSECS=$((900 + RUNS * (120 + 8 * SECS + 2 * WARMUP + nlc * (120 + 5 * PG_SECS + WARMUP))))
	net_round
fi

###########################################################################
# Tables: one per forceSync setting (and one for the emulated network),
# medians over the rounds
###########################################################################
# the tables' medians (awk functions): add(KEY, V) keeps a value of one
# measure (of one forceSync, system and shape) over the rounds, median(KEY)
# gives their median ("-" if none), the mean of the middle two for an
# even count
AWK_MEDIAN='
	function add(key, v) { cnt[key]++; val[key, cnt[key]] = v }
	function median(key,    m, i, j, t, a) {
		m = cnt[key] + 0
		if (m == 0) return "-"
		for (i = 1; i <= m; i++) a[i] = val[key, i] + 0
		for (i = 2; i <= m; i++)
			for (j = i; j > 1 && a[j - 1] > a[j]; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
		return (m % 2) ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
	}'
# (the TLS part's systems, SYSTEM-tls, right after their plaintext rows)
tls_sys=""
[ -z "$TLS_SHAPES" ] || tls_sys=-tls
systems=""
want raw && systems=raw
want curator && systems="$systems curator${tls_sys:+ curator$tls_sys}"
if want sql; then
	for lc in ${LOCK_CACHES//,/ }; do
		if [ "$lc" = off ]; then s=sql; else s=sqlc; fi
		systems="$systems $s${tls_sys:+ $s$tls_sys}"
	done
fi
TABLE_PASSES=""
[ -z "$SHAPES" ] || TABLE_PASSES=$FSYNC_PASSES
for fsync in $TLS_PASSES; do TABLE_PASSES="$TABLE_PASSES tls-$fsync"; done
[ -z "$NET_SHAPES" ] || TABLE_PASSES="$TABLE_PASSES net"

if [ -n "$SHAPES$NET_SHAPES$TLS_SHAPES" ]; then
echo
echo "Lock cycle = acquire + release (raw: create EPHEMERAL_SEQUENTIAL + get_children + delete, mutex shapes only);"
echo "counter shapes c1, c8: one cycle = one add of 1 that succeeded (zk_atomic_long_add / DistributedAtomicLong.add)."
# versions as installed (Debian 12: ZooKeeper 3.8, Curator 5.4, PostgreSQL 15;
# Debian 13: ZooKeeper 3.9, Curator 5.7, PostgreSQL 17)
pkg_version() { dpkg-query -W -f='${Version}' "$1" 2>/dev/null | sed 's/^[0-9]*://; s/[-+~].*//'; }
echo "Debian ${ZKLOCK_DEBIAN:-?}: ZooKeeper $(pkg_version zookeeper), Curator $(pkg_version libcurator-recipes-java), PostgreSQL $PG_MAJOR."
[ -z "$SHAPES" ] || echo "Same ZooKeeper standalone server for all three, restarted on a fresh data dir (${ZK_DIR_FS:-?}) per forceSync setting; $(nproc) CPUs;"
echo "raw/Curator ${SECS}s, pgbench -T ${PG_SECS} per shape; $RUNS run(s) per system and shape, the table shows medians."
echo "cyc/s = completed cycles per second; p50/p99 = latency of one cycle in microseconds;"
echo "cpu µs/cyc = CPU time of the whole machine (all CPUs, /proc/stat minus idle and iowait: clients, PostgreSQL,"
echo "  ZooKeeper, anything else running) in the measured window per cycle; zk µs/cyc = the ZooKeeper server process"
echo "  alone (utime+stime); for zklock the window runs from 1 s after pgbench's first transaction to the end of"
echo "  -T (pgbench's drain after -T, served slowly whatever it runs, is left out), CPU sampled every 0.25 s in it;"
echo "  resolution 1/$CLK_TCK s of CPU time per window."
echo "ratios = zklock / the row's system: cyc/s higher is better for zklock, p50 and cpu lower is better for zklock;"
echo "  zklock = zklock.lock_cache off, zklock lc = zklock.lock_cache on; the ratios are those of the first of them run (${LOCK_CACHES%%,*})."
[ -z "$NET_SHAPES" ] || echo "net shapes: the emulated network's own 3-server ensemble (forceSync=yes, tickTime $ZK_TICK), every client through the delay_proxy of one follower (${NET_DELAY_US} us each way); zk µs/cyc = the three servers."
[ -z "$TLS_SHAPES" ] || echo "TLS part (tls1, tls32d = shapes 1, 32d): its own standalone server per forceSync setting, Netty, with a plaintext clientPort and a TLS
  secureClientPort that needs client certificates; \"X TLS\" = X over TLS, its ratios TLS / the same system in plaintext on that
  server; the TLS handshake is before every window (connections made at start-up), not in any number; raw C in plaintext only."
awk -v passes="$TABLE_PASSES" -v shapes="$SHAPES $NET_SHAPES $TLS_SHAPES" -v systems="$systems" -v clk="$CLK_TCK" -v runs="$RUNS" "$AWK_MEDIAN"'
	function dash(n,    d) { d = ""; while (n-- > 0) d = d "-"; return d }
	function num(v) { return v == "-" ? "-" : (v < 10 && v != int(v) ? sprintf("%.1f", v) : sprintf("%.0f", v)) }
	function ratio(a, b) { return (a == "-" || b == "-" || b + 0 == 0) ? "-" : sprintf("%.2f", a / b) }
	function med(fs, sy, sh, what) { return median(fs SUBSEP sy SUBSEP sh SUBSEP what) }
	# tls_words(FS, SH, ZT): the line of shape SH in the TLS part: each
	# system over TLS against itself in plaintext, then zklock over TLS
	# (ZT) against Curator over TLS; nothing when none was measured
	function tls_words(fs, sh, zt,    j, s, b, line, ct) {
		line = ""
		for (j = 1; j <= nsys; j++) {
			s = syslist[j]
			if (s !~ /-tls$/ || med(fs, s, sh, "cps") == "-") continue
			b = substr(s, 1, length(s) - 4)
			line = line (line == "" ? "" : "; ") sprintf("%s cycles/s %sx, p50 %sx, CPU per cycle %sx (ZooKeeper'\''s %sx)",
				name[s], ratio(med(fs, s, sh, "cps"), med(fs, b, sh, "cps")),
				ratio(med(fs, s, sh, "p50"), med(fs, b, sh, "p50")),
				ratio(med(fs, s, sh, "cpu"), med(fs, b, sh, "cpu")),
				ratio(med(fs, s, sh, "zk"), med(fs, b, sh, "zk")))
		}
		ct = "curator-tls"
		if (med(fs, zt, sh, "cps") != "-" && med(fs, ct, sh, "cps") != "-")
			line = line sprintf("; over TLS %s %sx Curator'\''s cycles/s, p50 %sx, CPU per cycle %sx",
				name[zt], ratio(med(fs, zt, sh, "cps"), med(fs, ct, sh, "cps")),
				ratio(med(fs, zt, sh, "p50"), med(fs, ct, sh, "p50")),
				ratio(med(fs, zt, sh, "cpu"), med(fs, ct, sh, "cpu")))
		if (line != "") printf "%s: %s\n", sh, line
	}
	{
		fs = $1; sys = $3; sh = $4; k = fs SUBSEP sys SUBSEP sh SUBSEP
		add(k "cps", $5); add(k "p50", $6); add(k "p99", $7)
		if ($9 > 0 && $10 >= 0) add(k "cpu", $10 * 1e6 / clk / $9)
		if ($9 > 0 && $11 >= 0) add(k "zk", $11 * 1e6 / clk / $9)
		if (NF >= 13 && $12 >= 0 && $13 > 0) add(k "rq", $12 / $13)
	}
	END {
		label["1"] = "mutex, 1 in flight"; label["8d"] = "mutex, 8 distinct"
		label["32d"] = "mutex, 32 distinct"; label["8s"] = "mutex, 8 shared"
		label["32s"] = "mutex, 32 shared"; label["200s"] = "mutex, 200 shared"
		label["r8"] = "read lock, 8 shared"; label["w8"] = "write lock, 8 shared"
		label["sem16"] = "semaphore max 4, 16"
		label["c1"] = "counter add, 1"; label["c8"] = "counter add, 8 shared"
		label["l8"] = "leader check, 8"
		label["net1"] = "net: mutex, 1"; label["net32d"] = "net: mutex, 32 distinct"
		label["net32s"] = "net: mutex, 32 shared"
		label["tls1"] = "mutex, 1 in flight"; label["tls32d"] = "mutex, 32 distinct"
		name["raw"] = "raw C"; name["curator"] = "Curator"; name["sql"] = "zklock"; name["sqlc"] = "zklock lc"
		name["curator-tls"] = "Curator TLS"; name["sql-tls"] = "zklock TLS"; name["sqlc-tls"] = "zklock lc TLS"
		np = split(passes, plist, " "); ns = split(shapes, slist, " "); nsys = split(systems, syslist, " ")
		# the zklock the ratios are of: the first lock_cache value run
		zs = "sql"
		for (j = nsys; j >= 1; j--) if (syslist[j] == "sql" || syslist[j] == "sqlc") zs = syslist[j]
		for (p = 1; p <= np; p++) {
			fs = plist[p]
			tls = (fs ~ /^tls-/)
			title = (fs == "net") ? "emulated network" : (tls ? "TLS part, forceSync=" substr(fs, 5) : "forceSync=" fs)
			printf "\n%s%s%s\n", title, (fs == "net" ? " (3-server ensemble, one network namespace per server, 0.25 ms each way, forceSync=yes)" : (tls ? " (one server, Netty: plaintext clientPort and TLS secureClientPort)" : "")),
				(runs > 1 ? " (medians of " runs " runs)" : "")
			# the system column: wide enough for "zklock lc TLS" in the TLS part
			sw = tls ? 13 : 9
			fmt = "%-6s %-23s %-" sw "s %8s %6s %7s %6s %7s | %6s %6s %6s"
			# (mawk counts bytes: "µ" goes in after the padding)
			hdr = sprintf(fmt, "", "", "", "", "", "", "cpu", "zk", tls ? "TLS / plaintext" : "zklock / row", "", "")
			sub(/ +$/, "", hdr); print hdr
			hdr = sprintf(fmt, "shape", "what", "system", "cyc/s", "p50", "p99", "us/cyc", "us/cyc", "cyc/s", "p50", "cpu")
			gsub(/us\/cyc/, "µs/cyc", hdr); print hdr
			hdr = sprintf(fmt, dash(6), dash(23), dash(sw), dash(8), dash(6), dash(7), dash(6), dash(7), dash(6), dash(6), dash(6))
			sub(/ \| /, "-+-", hdr); gsub(/ /, "-", hdr); print hdr
			for (i = 1; i <= ns; i++) {
				split(slist[i], part, ":"); sh = part[1]; mutex = (part[3] == "distinct" || part[3] == "shared")
				# a shape of another table: nothing measured here
				seen = 0
				for (j = 1; j <= nsys; j++) if (med(fs, syslist[j], sh, "cps") != "-") seen = 1
				if (!seen) continue
				first = 1
				for (j = 1; j <= nsys; j++) {
					s = syslist[j]
					if (s == "raw" && !mutex) continue
					if (s ~ /-tls$/ && !tls) continue
					zc = med(fs, zs, sh, "cps"); zp = med(fs, zs, sh, "p50"); zu = med(fs, zs, sh, "cpu")
					r1 = r2 = r3 = ""
					if (tls) {
						# over TLS against the same system in plaintext
						if (s ~ /-tls$/) {
							b = substr(s, 1, length(s) - 4)
							r1 = ratio(med(fs, s, sh, "cps"), med(fs, b, sh, "cps"))
							r2 = ratio(med(fs, s, sh, "p50"), med(fs, b, sh, "p50"))
							r3 = ratio(med(fs, s, sh, "cpu"), med(fs, b, sh, "cpu"))
						}
					} else if (s != "sql" && s != "sqlc") {
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
			# uncontended latency: shape 1 (tls1), every system measured, side by side
			one = tls ? "tls1" : "1"
			line = ""
			for (j = 1; j <= nsys; j++) {
				s = syslist[j]
				if (!((fs SUBSEP s SUBSEP one SUBSEP "p50") in cnt)) continue
				line = line (line == "" ? "" : "; ") sprintf("%s p50 %s us, p99 %s us", name[s],
					num(med(fs, s, one, "p50")), num(med(fs, s, one, "p99")))
			}
			if (line != "")
				printf "Uncontended latency (shape %s: mutex, 1 in flight, own path; one acquire + release): %s\n", one, line
			# requests of one cycle, as the server counted them
			printf "\n%s, ZooKeeper requests per cycle (per add for c1, c8): received by the server over a system'\''s run of the shape / cycles completed in it:\n", title
			for (i = 1; i <= ns; i++) {
				split(slist[i], part, ":"); sh = part[1]
				line = ""
				for (j = 1; j <= nsys; j++) {
					s = syslist[j]
					v = med(fs, s, sh, "rq")
					if (v == "-") continue
					line = line (line == "" ? "" : ", ") sprintf("%s %.2f", name[s], v)
				}
				if (line != "") printf "%s: %s\n", sh, line
			}
			# the TLS part in words: what TLS costs each, and the two over TLS
			if (tls) {
				printf "\n%s, what TLS costs (over TLS / plaintext, on the same server):\n", title
				for (i = 1; i <= ns; i++) {
					split(slist[i], part, ":")
					tls_words(fs, part[1], zs "-tls")
				}
				continue
			}
			# the ratios in words, one line per shape
			printf "\n%s, zklock against the others:\n", title
			for (i = 1; i <= ns; i++) {
				split(slist[i], part, ":"); sh = part[1]
				zc = med(fs, zs, sh, "cps"); zp = med(fs, zs, sh, "p50")
				zu = med(fs, zs, sh, "cpu"); zz = med(fs, zs, sh, "zk")
				seen = 0
				for (j = 1; j <= nsys; j++) if (med(fs, syslist[j], sh, "cps") != "-") seen = 1
				if (!seen) continue
				line = ""
				if (zs == "sql" && med(fs, "sqlc", sh, "cps") != "-")
					line = sprintf("zklock lc %sx zklock'\''s cycles/s, p50 %sx, CPU per cycle %sx; ",
						ratio(med(fs, "sqlc", sh, "cps"), zc), ratio(med(fs, "sqlc", sh, "p50"), zp),
						ratio(med(fs, "sqlc", sh, "cpu"), zu))
				if (med(fs, "curator", sh, "cps") != "-")
					line = line sprintf("zklock %sx Curator'\''s cycles/s, p50 %sx, CPU per cycle %sx (ZooKeeper'\''s %sx)",
						ratio(zc, med(fs, "curator", sh, "cps")), ratio(zp, med(fs, "curator", sh, "p50")),
						ratio(zu, med(fs, "curator", sh, "cpu")), ratio(zz, med(fs, "curator", sh, "zk")))
				if (med(fs, "raw", sh, "cps") != "-")
					line = line (line == "" || line ~ /; $/ ? "zklock " : "; ") sprintf("%sx raw'\''s cycles/s, p50 %sx, CPU per cycle %sx",
						ratio(zc, med(fs, "raw", sh, "cps")), ratio(zp, med(fs, "raw", sh, "p50")),
						ratio(zu, med(fs, "raw", sh, "cpu")))
				if (zc == "-") line = "(zklock not measured)"
				printf "%s: %s\n", sh, line
			}
		}
	}' "$RESULTS"
fi

###########################################################################
# mix8 and the proxy alone
###########################################################################
if [ -n "$MIX" ] && [ -s "$WORK/mix.results" ]; then
	echo
	echo "mix8: $MIX_SQL pgbench sessions (zk_mutex_acquire + release) and $MIX_CURATOR Curator threads (InterProcessMutex) on one path"
	echo "  ($MIX_PATH) at the same time, ${PG_SECS}s; SQL p50/p99 = one cycle (acquire + release), Curator's = the acquire alone;"
	echo "  requests per cycle = what the server received over the run / the cycles both sides completed; CPU per cycle"
	echo "  = machine (and ZooKeeper) over Curator's window / the cycles both sides completed in it$([ "$RUNS" -gt 1 ] && echo "; medians of $RUNS runs")."
	awk -v clk="$CLK_TCK" "$AWK_MEDIAN"'
		{
			k = $1 SUBSEP $3
			if (!(k in seen)) { seen[k] = 1; order[++n] = k }
			add(k SUBSEP "scps", $4); add(k SUBSEP "sp50", $5); add(k SUBSEP "sp99", $6)
			add(k SUBSEP "ccps", $7); add(k SUBSEP "cp50", $8); add(k SUBSEP "cp99", $9)
			if ($12 > 0 && $10 >= 0) add(k SUBSEP "cpu", $10 * 1e6 / clk / $12)
			if ($12 > 0 && $11 >= 0) add(k SUBSEP "zk", $11 * 1e6 / clk / $12)
			if ($14 > 0 && $13 >= 0) add(k SUBSEP "rq", $13 / $14)
		}
		END {
			fmt = "%-9s %-10s | %8s %7s %8s | %8s %8s %8s | %7s %7s %7s\n"
			printf fmt, "forceSync", "lock_cache", "SQL", "SQL", "SQL", "Curator", "acquire", "acquire", "req/", "cpu", "zk"
			printf fmt, "", "", "cyc/s", "p50", "p99", "cyc/s", "p50", "p99", "cycle", "us/cyc", "us/cyc"
			for (i = 1; i <= n; i++) {
				split(order[i], kk, SUBSEP); k = order[i]
				printf fmt, kk[1], kk[2], median(k SUBSEP "scps"), median(k SUBSEP "sp50"), median(k SUBSEP "sp99"),
					median(k SUBSEP "ccps"), median(k SUBSEP "cp50"), median(k SUBSEP "cp99"),
					(median(k SUBSEP "rq") == "-" ? "-" : sprintf("%.2f", median(k SUBSEP "rq"))),
					(median(k SUBSEP "cpu") == "-" ? "-" : sprintf("%.0f", median(k SUBSEP "cpu"))),
					(median(k SUBSEP "zk") == "-" ? "-" : sprintf("%.0f", median(k SUBSEP "zk")))
			}
		}' "$WORK/mix.results"
fi
if [ -s "$WORK/net/proxy" ]; then
	echo
	read -r pf rd50 rp50 rdavg rpavg cd50 cp50 cdavg cpavg <"$WORK/net/proxy"
	echo "The proxy alone (emulated network), raw C client, 1 in flight, straight to follower $pf and through its delay_proxy"
	echo "  (${NET_DELAY_US} us each way: $((2 * NET_DELAY_US)) us per round trip asked for):"
	awk -v rd="$rd50" -v rp="$rp50" -v rda="$rdavg" -v rpa="$rpavg" \
		-v cd="$cd50" -v cp="$cp50" -v cda="$cdavg" -v cpa="$cpavg" 'BEGIN {
		if (rd == "-" || rp == "-")
			print "  one read (get_children, 1 round trip): not measured (raw_cycle failed, see the log)"
		else
			printf "  one read (get_children, 1 round trip): p50 %d us direct, %d us through it: +%d us per round trip (avg %+.0f)\n",
				rd, rp, rp - rd, rpa - rda
		if (cd == "-" || cp == "-")
			print "  the lock cycle (create + get_children + delete): not measured (raw_cycle failed, see the log)"
		else
			printf "  the lock cycle (create + get_children + delete, 3 round trips, 2 writes): p50 %d us direct, %d us through it: %+.0f us per round trip (avg %+.0f)\n",
				cd, cp, (cp - cd) / 3, (cpa - cda) / 3 }'
fi

###########################################################################
# Idle: requests per second with nothing to do
###########################################################################
if [ -n "$IDLE" ]; then
	echo
	echo "Idle: requests per second each client sends ZooKeeper with nothing to do (no SQL, nothing held), counted by"
	echo "  the server: cons \"recved\" of the client's session, the clients side by side in one ${IDLE_SECS}s window, each asking"
	echo "  for a ${IDLE_TIMEOUT} ms session; servers with tickTime $ZK_TICK (sessions capped at 20 ticks), zklock.server_tick_time $ZK_TICK."
	echo "  standalone = the benchmark's server (forceSync=$IDLE_FSYNC); ensemble = 3 servers on 127.0.0.1, clients on a follower."
	awk -v tick="$ZK_TICK" '
		function ms(v) { return v % 1000 == 0 ? sprintf("%d s", v / 1000) : (v >= 1000 ? sprintf("%.1f s", v / 1000) : sprintf("%.0f ms", v)) }
		{ n++; srv[n] = $1; sys[n] = $2; cnt[n] = $3; secs[n] = $4; to[n] = $5; mode[n] = $6
		  rate[$1, $2] = ($3 == "-" || $4 <= 0) ? "-" : $3 / $4 }
		END {
			fmt = "%-10s %-8s %8s %7s %9s %10s  %s\n"
			printf fmt, "server", "client", "requests", "req/s", "expected", "session", "what it sends (expected)"
			printf fmt, "----------", "--------", "--------", "-------", "---------", "----------", "------------------------"
			for (i = 1; i <= n; i++) {
				if (sys[i] == "zklock") {
					iv = to[i] / 4
					if (mode[i] == "ensemble" && tick / 4 < iv) iv = tick / 4
					if (mode[i] == "standalone")
						what = "sync / every " ms(iv) " (timeout/4; zk_status: standalone server)"
					else if (mode[i] == "ensemble")
						what = "sync / every " ms(iv) " (server_tick_time/4; zk_status: server of an ensemble)"
					else
						what = "heartbeat every " ms(iv) "? (timeout/4; this build shows no server_mode)"
				} else {
					iv = to[i] / 3
					what = "ping every " ms(iv) " (timeout/3)"
				}
				expect[srv[i], sys[i]] = 1000 / iv
				printf fmt, srv[i], (sys[i] == "zklock" ? "zklock" : "Curator"), cnt[i],
					(rate[srv[i], sys[i]] == "-" ? "-" : sprintf("%.3f", rate[srv[i], sys[i]])),
					sprintf("%.3f", 1000 / iv), to[i] " ms", what
			}
			for (k = 1; k <= 2; k++) {
				sv = (k == 1) ? "standalone" : "ensemble"
				z = rate[sv, "zklock"]; c = rate[sv, "curator"]
				if (z == "" || c == "" || z == "-" || c == "-") continue
				printf "%s: zklock %.3f req/s idle, Curator %.3f: %s (expected %.1fx)\n", sv, z, c,
					(c > 0 ? sprintf("zklock %.1fx Curator", z / c) : "Curator sent nothing in the window"),
					expect[sv, "zklock"] / expect[sv, "curator"]
			}
			# the heartbeat before issue 18, computed (not measured): exists / every quarter of the timeout
			line = ""
			for (i = 1; i <= n; i++)
				if (sys[i] == "zklock")
					line = line (line == "" ? "" : ", ") sprintf("%s %.3f req/s", srv[i], 4000 / to[i])
			if (line != "")
				print "Before issue 18 zklock sent an exists / every quarter of the negotiated timeout on any server: " line " (computed, not measured)."
			print "(The counts are whole requests in the window: a client sending one every 10 s or more shows 1 or 2.  A sync received by a"
			print " follower also goes to the leader and back; an exists or a ping does not.)"
		}' "$WORK/idle.results"
	echo "The idle part took ${IDLE_TOOK}s after the standalone server was up: waiting for the ensemble (launched ${IDLE_ENS_AHEAD}s before,"
	echo "  its election overlapping the builds), the clusters and Curator, the ${IDLE_SECS}s window, the stops."
fi

elapsed=$((SECONDS - BENCH_START))
echo
[ -z "$ZK_STATS" ] || echo "ZooKeeper at the end of each pass: $ZK_STATS"
echo "The run took $((elapsed / 60))m $((elapsed % 60))s: forceSync $(echo "${FSYNC_PASSES:-(none)}" | sed 's/ / and /')$([ -z "$NET_SHAPES" ] || echo ' (the net shapes: yes)'), $RUNS run(s) of $(echo "$SHAPES $NET_SHAPES $TLS_SHAPES" | wc -w) shape(s)$([ -z "$TLS_SHAPES" ] || echo " (the TLS part: its own server, forceSync $(echo "$TLS_PASSES" | sed 's/ / and /'))")$([ -z "$MIX" ] || echo ' and mix8')$([ -z "$IDLE" ] || echo ' and the idle part'), zklock.lock_cache $LOCK_CACHES, systems:$(for w in $systems; do printf ' %s' "$w"; done)."

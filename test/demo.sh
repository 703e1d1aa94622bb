#!/bin/bash
# demo.sh — set everything up and show zklock at work.
# Run as root on Debian 12 or 13: installs the Debian packages (PostgreSQL 15
# or 17, see test/env.sh), builds and installs the extension, then (as the unprivileged user "zklock") starts a private
# ZooKeeper and PostgreSQL on free 127.0.0.1 ports and runs a short demo:
# three SQL sessions and a Curator client queue on one mutex and are served
# in arrival order; then two SQL sessions and a Curator LeaderLatch hold an
# election and lead in turn.  Everything it started is stopped at the end.
set -euo pipefail

cd "$(dirname "$0")/.."
REPO=$(pwd)
. test/env.sh
DEMO_USER=${ZKLOCK_TEST_USER:-zklock}

if [ "$(id -u)" -eq 0 ]; then
	bash test/install-deps.sh
	bash zk-client-build/build.sh
	make -s PG_CONFIG="$PG_CONFIG"
	make -s install PG_CONFIG="$PG_CONFIG"
	id "$DEMO_USER" >/dev/null 2>&1 || useradd -m -s /bin/bash "$DEMO_USER"
	COPY=$(mktemp -d /tmp/zklock-demo-src.XXXXXX)
	trap 'rm -rf "$COPY"' EXIT
	cp -a "$REPO/." "$COPY/"
	chown -R "$DEMO_USER" "$COPY"
	chmod 755 "$COPY"
	su "$DEMO_USER" -s /bin/bash -c "cd '$COPY' && bash test/demo.sh"
	exit $?
fi

export PATH="$PGBIN:$PATH"
WORK=$(mktemp -d /tmp/zklock-demo.XXXXXX)
PEER_PID=""

cleanup() {
	[ -n "$PEER_PID" ] && kill "$PEER_PID" 2>/dev/null
	pg_ctl -D "$WORK/pg" stop -m fast >/dev/null 2>&1 || true
	test/zk/zk.sh stop "$WORK/zk" >/dev/null 2>&1 || true
	rm -rf "$WORK"
}
trap cleanup EXIT

echo "== starting a private ZooKeeper"
ZKPORT=$(test/zk/zk.sh start "$WORK/zk")
echo "   ZooKeeper on 127.0.0.1:$ZKPORT"

echo "== starting a private PostgreSQL $PG_MAJOR with zklock"
PGPORT=$(( 40000 + RANDOM % 10000 ))
initdb -D "$WORK/pg" -A trust -E UTF8 --no-locale >/dev/null
cat >> "$WORK/pg/postgresql.conf" <<CONF
port = $PGPORT
listen_addresses = '127.0.0.1'
unix_socket_directories = '$WORK'
shared_preload_libraries = 'zklock'
zklock.hosts = '127.0.0.1:$ZKPORT'
zklock.session_timeout = '10s'
cluster_name = 'demo'
CONF
pg_ctl -D "$WORK/pg" -l "$WORK/pg.log" -w start >/dev/null
PSQL="psql -X -q -h $WORK -p $PGPORT -d postgres"
$PSQL -c "CREATE EXTENSION zklock"
for i in $(seq 1 100); do
	[ "$($PSQL -At -c "SELECT state FROM zk_status()")" = connected ] && break
	sleep 0.1
done
$PSQL -c "SELECT state, session_id, server, session_timeout FROM zk_status()"

# a session that queues, holds the lock for a moment and says when
session() {
	$PSQL -At -c "SET application_name = 'demo-$1'" \
		-c "SELECT zk_mutex_acquire('/demo/job')" \
		-c "SELECT format('%s  %-10s got the lock', to_char(clock_timestamp(), 'HH24:MI:SS.MS'), 'sql-$1')" \
		-c "SELECT pg_sleep(0.7)" \
		-c "SELECT zk_mutex_release('/demo/job')" | grep --line-buffered "got the lock"
}

# wait until n sessions are queued or holding /demo/job
wait_queue() {
	for i in $(seq 1 100); do
		[ "$($PSQL -At -c "SELECT count(*) FROM zk_locks WHERE path = '/demo/job'")" -ge "$1" ] && return 0
		sleep 0.05
	done
}

CURATOR=0
if command -v javac >/dev/null && [ -f /usr/share/java/curator-recipes.jar ]; then
	if bash test/java/build.sh "$WORK/java"; then
		mkfifo "$WORK/peer.in"
		java -cp "$WORK/java:/usr/share/java/curator-recipes.jar" CuratorPeer "127.0.0.1:$ZKPORT" \
			< "$WORK/peer.in" > "$WORK/peer.out" 2>/dev/null &
		PEER_PID=$!
		exec 7> "$WORK/peer.in"
		for i in $(seq 1 300); do grep -q '^ready' "$WORK/peer.out" && break; sleep 0.05; done
		grep -q '^ready' "$WORK/peer.out" && CURATOR=1
	fi
fi
[ "$CURATOR" = 1 ] || echo "demo: WITHOUT the Curator client (it did not build or start; see above)" >&2

# number of lock nodes under /demo/job, as the Curator client sees them
zk_nodes() {
	echo "children /demo/job" >&7
	sleep 0.05
	local n
	n=$(grep '^children /demo/job' "$WORK/peer.out" | tail -1 | awk '{print NF - 2}')
	echo "${n:-0}"
}

# the Curator client: queue, hold for a moment when granted, release
curator_session() {
	echo "acquire j1 /demo/job -1" >&7
	for i in $(seq 1 600); do grep -q '^acquired j1' "$WORK/peer.out" && break; sleep 0.02; done
	echo "$(date +%H:%M:%S.%3N)  curator    got the lock"
	sleep 0.7
	echo "release j1" >&7
}

if [ "$CURATOR" = 1 ]; then
	echo "== sql-1, sql-2, a Curator client and sql-3 queue on /demo/job, in that order"
else
	echo "== three SQL sessions queue on /demo/job (no Java here: no Curator client)"
fi
session 1 & P1=$!
wait_queue 1
session 2 & P2=$!
wait_queue 2
PC=""
if [ "$CURATOR" = 1 ]; then
	curator_session & PC=$!
	for i in $(seq 1 100); do [ "$(zk_nodes)" -ge 3 ] && break; done
fi
session 3 & P3=$!
wait_queue 3
echo "-- the queue in ZooKeeper (Curator's node is the one zk_locks does not list):"
$PSQL -c "SELECT pid, node, state FROM zk_locks WHERE path = '/demo/job' ORDER BY right(node, 10)"
if [ "$CURATOR" = 1 ]; then
	echo "children /demo/job" >&7
	sleep 0.1
	grep '^children /demo/job' "$WORK/peer.out" | tail -1 | tr ' ' '\n' | tail -n +3 | sort -t- -k7,7 | sed 's/^/   /'
fi
wait $P1 $P2 $P3 $PC

# The election scene: members of /demo/leader (LeaderLatch on the wire)
leader_session() {
	$PSQL -At -c "SELECT zk_leader_join('/demo/leader', 'sql-$1')" \
		-c "SELECT zk_leader_await('/demo/leader')" \
		-c "SELECT format('%s  %-10s leads (zk_leader says %s)', to_char(clock_timestamp(), 'HH24:MI:SS.MS'), 'sql-$1', zk_leader('/demo/leader'))" \
		-c "SELECT pg_sleep(1)" \
		-c "SELECT zk_leader_leave('/demo/leader')" | grep --line-buffered "leads"
}
members() {
	$PSQL -At -c "SELECT count(*) FROM zk_participants('/demo/leader') WHERE kind = 'latch'"
}
wait_members() {
	for i in $(seq 1 100); do [ "$(members)" -ge "$1" ] && return 0; sleep 0.05; done
}
if [ "$CURATOR" = 1 ]; then
	echo "== an election on /demo/leader: sql-a, a Curator LeaderLatch and sql-b join, in that order;"
	echo "   each leader leaves after a second and the next one takes over"
else
	echo "== an election on /demo/leader: sql-a and sql-b join; sql-a leaves after a second"
fi
leader_session a & LA=$!
wait_members 1
if [ "$CURATOR" = 1 ]; then
	echo "latch_start jl /demo/leader java-1" >&7
	wait_members 2
fi
leader_session b & LB=$!
wait_members $(( CURATOR + 2 ))
$PSQL -c "SELECT position, data AS id, holds AS leader FROM zk_participants('/demo/leader')"
if [ "$CURATOR" = 1 ]; then
	for i in $(seq 1 600); do grep -q '^isleader jl' "$WORK/peer.out" && break; sleep 0.02; done
	echo "$(date +%H:%M:%S.%3N)  curator    leads"
	sleep 1
	echo "latch_close jl" >&7
fi
wait $LA $LB
if [ "$CURATOR" = 1 ]; then
	echo quit >&7
	exec 7>&-
	wait "$PEER_PID" 2>/dev/null || true
	PEER_PID=""
fi
echo "== served in arrival order, led in turn; nothing left behind:"
$PSQL -c "SELECT count(*) AS locks_left FROM zk_locks"
echo "== demo done"

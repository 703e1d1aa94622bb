
# 800_local_handover: a released mutex goes to the next local waiter in the
# worker's own memory, and Curator peers see exactly Curator's protocol.
#
# What users rely on: when a session releases a lock and the next node in
# ZooKeeper's queue is a waiter of the same worker, that waiter holds the
# lock at once (zk_status().handovers counts it) without waiting for the
# delete's round trips; nothing else changes.  The queue order is
# ZooKeeper's: a Curator waiter between two local waiters gets its turn in
# order (it is never skipped, and no local waiter behind it gets the lock
# first), no two holders ever overlap, and the fencing tokens keep growing.
# The waiter holds at once, while the released node (this session's) still
# keeps everyone else out; the released node goes only together with a
# check that the waiter's node is there (one multi): when the connection
# drops right at a release, the waiter holds while the released node is
# still first in ZooKeeper's queue and Curator waits, and once the
# connection is back in the same session the released node goes and the
# waiter's COMMIT succeeds; when the session expires instead, the lease
# ends first, Curator gets the lock only after that, and the waiter's COMMIT
# fails (its lock is lost).  The semaphore's P/locks mutex is handed over the same
# way, and so are read/write locks: the readers behind a released writer,
# the writer behind the last reader.  A holder that is terminated hands the
# lock over only once PostgreSQL has released its own locks.  A waiter whose
# node was deleted from outside before the handover never holds while the
# Curator waiter behind it does.
# A read lock node right behind a read node of this worker shares its
# answer without a listing, never across a Curator writer between them.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use ZklockTest;
use ZklockFault;
use ZklockProxy;

my $zk = start_zk();
my $proxy = ZklockProxy->start($zk);
my $node = new_zklock_node('handover', $proxy->connect,
	"zklock.session_timeout = '6s'\nzklock.connect_timeout = '30s'\nzklock.lease_margin = '1s'\n"
	  . "log_min_messages = debug2\n");    # the handover's steps (DEBUG2)
my $peer = new_peer($zk);    # Curator talks to ZooKeeper directly

sub handovers { return status_row($node)->{handovers}; }


# waiting_for($session): zk_locks.waiting_for of the session's wait ('' if
# none yet: the worker has not decided where it queues)
sub waiting_for
{
	my ($s) = @_;
	return $node->safe_psql('postgres',
		'SELECT coalesce(max(waiting_for), \'\') FROM zk_locks WHERE pid = ' . $s->pid);
}

# queued($session): wait until the worker knows which node the session
# waits behind (its listing was decided), and return that node
sub queued
{
	my ($s) = @_;
	wait_until(sub { waiting_for($s) ne '' }, 10, $s->name . ' to be queued')
	  or BAIL_OUT($s->name . ': the worker did not queue it');
	return waiting_for($s);
}

# queue(@sessions): each session starts an acquire of $path in turn, after
# the previous one is in the queue ($n nodes before the first).
sub queue_sessions
{
	my ($path, $n, @sessions) = @_;
	for my $s (@sessions)
	{
		$s->start("SELECT zk_mutex_acquire('$path', '60s')");
		$n++;
		wait_children_count($peer, $path, $n) or BAIL_OUT("$path: no node for " . $s->name);
		queued($s);
	}
	return $n;
}

# shared by the parts below
my ($P, $sa, $sb, $sd, $h0, @w, $rows, @loaders, $s0, $s1, $s2, $s3, $l, $kids, $j0,
	@readers);

############################################################################
# 1. Curator between local waiters: a (holds), b, Curator c1, d.
############################################################################
subtest 'a Curator waiter between local waiters keeps its turn; no local waiter passes it' => sub {
	$P = '/t800/m';
	($sa, $sb, $sd) = map { ZklockTest::Session->new($node, $_) } qw(a b d);
	is($sa->value(qq{SELECT zk_mutex_acquire('$P')}), 't', 'a holds the mutex');
	queue_sessions($P, 1, $sb);
	$peer->acquire('c1', $P, -1);
	wait_children_count($peer, $P, 3) or BAIL_OUT('Curator c1 is not queued');
	queue_sessions($P, 3, $sd);
	my $order = lock_children($peer, $P);
	is(scalar @$order, 4, 'queue: a, b, Curator c1, d');
	is(waiting_for($sb), $order->[0], "zk_locks: b waits for a's node");
	is(waiting_for($sd), $order->[2], "zk_locks: d waits for Curator c1's node");
	$h0 = handovers();

	is($sa->value(qq{SELECT zk_mutex_release('$P')}), 't', 'a releases');
	my $r = $sb->result(10);
	is($r->{out}, 't', 'b, next in the queue and local, gets the lock');
	is(handovers(), $h0 + 1, 'by a local handover (zk_status().handovers)');
	# a maintainer follows it step by step in the log: one slot and serial
	# chosen to take a's node, granted at once with a's delete guarded by
	# b's node, then confirmed
	my ($na, $nb) = @$order[ 0, 1 ];
	ok(wait_until(sub {
			my $log = slurp_file($node->logfile);
			return 0 unless $log =~ /zklock: handover: slot (\d+) serial (\d+) chosen to take \S*\Q$P\/$na\E\b/;
			my ($slot, $serial) = ($1, $2);
			return $log =~ /zklock: handover: slot $slot serial $serial granted at once: \S*\Q$P\/$na\E goes only with \S*\Q$P\/$nb\E there/
			  && $log =~ /zklock: handover: \S*\Q$P\/$nb\E confirmed: there when \S*\Q$P\/$na\E went/;
		}, 10),
		"the log traces b's handover: chosen, granted at once with a's delete guarded by b's node, confirmed (DEBUG2)");
	ok(wait_children_count($peer, $P, 3), "a's node is deleted after the handover");
	is(lock_children($peer, $P)->[0], $order->[1], "b's node is now the lowest (Curator's view)");
	is(zk_holders($node, $P), $sb->pid, 'zk_locks: b holds');
	ok(!$peer->has_reply(qr/^(acquired|error) c1\b/), 'Curator c1 still waits while b holds');
	ok(!$sd->done, 'd still waits');

	is($sb->value(qq{SELECT zk_mutex_release('$P')}), 't', 'b releases');
	is($peer->acquire_result('c1', 10), 'acquired', 'Curator c1, next in the queue, gets the lock');
	is(handovers(), $h0 + 1, 'no local handover past a Curator waiter');
	ok(!$sd->done, 'd (local, behind c1) still waits while Curator holds');
	is(zk_holders($node, $P), '', 'zk_locks: no zklock session holds while Curator does');
	is($peer->release('c1'), 'released', 'Curator c1 releases');
	$r = $sd->result(10);
	is($r->{out}, 't', 'then d gets the lock');
	is($sd->value(qq{SELECT zk_mutex_release('$P')}), 't', 'd releases');
	ok(wait_children_count($peer, $P, 0), 'nothing left under the mutex');
};

############################################################################
# 2. A chain of local waiters: each release hands over to the next, in
#    ZooKeeper's queue order.
############################################################################
subtest 'a chain of local waiters is granted in queue order, each by a handover' => sub {
	$P = '/t800/chain';
	@w = map { ZklockTest::Session->new($node, "w$_") } 1 .. 5;
	is($sa->value(qq{SELECT zk_mutex_acquire('$P')}), 't', 'a holds the chain mutex');
	queue_sessions($P, 1, @w);
	$rows = zk_lock_rows($node, $P);
	my @by_seq = sort { seq_of($rows->{$a}{node}) cmp seq_of($rows->{$b}{node}) } keys %$rows;
	is(join(',', @by_seq), join(',', $sa->pid, map { $_->pid } @w), 'the queue is in the order of the acquires');
	$h0 = handovers();
	my @granted;
	my $holder = $sa;
	for my $i (0 .. $#w)
	{
		is($holder->value(qq{SELECT zk_mutex_release('$P')}), 't', $holder->name . ' releases');
		my $next = $w[$i];
		my $r = $next->result(10);
		is($r->{out}, 't', $next->name . ' gets the lock');
		for my $later (@w[ $i + 1 .. $#w ])
		{
			ok(!$later->done, $later->name . ' still waits');
		}
		push @granted, $next->name;
		$holder = $next;
	}
	is($holder->value(qq{SELECT zk_mutex_release('$P')}), 't', 'the last one releases');
	is(join(',', @granted), 'w1,w2,w3,w4,w5', 'granted in queue order');
	is(handovers(), $h0 + 5, 'every one of them by a local handover');
	ok(wait_children_count($peer, $P, 0), 'every node is deleted');
};

############################################################################
# 3. Load: four SQL sessions and a Curator client loop on one mutex; no two
#    sections overlap, tokens grow, Curator is not starved.
############################################################################
subtest 'SQL sessions and a Curator loop on one mutex never overlap, tokens grow, Curator is not starved' => sub {
	$node->safe_psql('postgres', q{
CREATE TABLE history(client text, token bigint, enter_us bigint, exit_us bigint);
CREATE FUNCTION us(t timestamptz) RETURNS bigint LANGUAGE sql
  AS $$ SELECT (extract(epoch FROM t) * 1000000)::bigint $$;
CREATE PROCEDURE sections(client text, secs float8, hold float8)
LANGUAGE plpgsql AS $$
DECLARE
  stop timestamptz := clock_timestamp() + secs * interval '1 second';
  t0 timestamptz;
  tok bigint;
BEGIN
  WHILE clock_timestamp() < stop LOOP
    IF zk_mutex_acquire_xact('/t800/load', '10s') THEN
      t0 := clock_timestamp();
      tok := zk_lock_token('/t800/load');
      PERFORM pg_sleep(hold);
      INSERT INTO history VALUES (client, tok, us(t0), us(clock_timestamp()));
    END IF;
    COMMIT;
  END LOOP;
END $$;
});
	$h0 = handovers();
	my $LOAD_SECS = 8;
	$peer->send("mxloop cl /t800/load " . ($LOAD_SECS * 1000) . " 5");
	@loaders = map { ZklockTest::Session->new($node, "l$_") } 1 .. 4;
	$_->start("CALL sections('" . $_->name . "', $LOAD_SECS, 0.005)") for @loaders;
	for my $l (@loaders)
	{
		my $r = $l->result($LOAD_SECS + 30);
		is($r->{err}, '', $l->name . ' looped without error');
	}
	my $done = $peer->wait_reply(qr/^(mxloop|error) cl\b/, 30);
	like($done // '', qr/^mxloop cl done \d+/, 'the Curator loop ran to its end') or diag($done);
	my @sections = curator_mx_sections($peer, 'cl');
	my $ncur = scalar @sections;
	push @sections, history_sections($node);
	my $nsql = @sections - $ncur;
	my $nh = handovers() - $h0;
	note("load: $nsql SQL sections, $ncur Curator sections, $nh local handovers");
	cmp_ok($nsql, '>=', 20, "the SQL sessions completed sections ($nsql)");
	cmp_ok($ncur, '>=', 5, "Curator was not starved: it completed sections ($ncur)");
	cmp_ok($nh, '>', 0, "local handovers happened under load ($nh)");
	my ($overlaps, $backwards) = mutex_section_faults(\@sections);
	is($overlaps, 0, 'no two sections overlap (SQL and Curator, by their clocks)');
	is($backwards, 0, 'fencing tokens strictly increase in section order');
	ok(wait_children_count($peer, '/t800/load', 0), 'nothing left under the loaded mutex');

	# hold_then_handover_queue($path, $curator_id): a holds $path, b waits for
	# it in a transaction, Curator waits behind b.
	sub hold_then_handover_queue
	{
		my ($path, $cid) = @_;
		is($sa->value(qq{SELECT zk_mutex_acquire('$path')}), 't', 'a holds');
		$sb->value('BEGIN');
		$sb->start(qq{SELECT zk_mutex_acquire_xact('$path', '60s')});
		wait_children_count($peer, $path, 2) or BAIL_OUT('b is not queued');
		queued($sb);
		$peer->acquire($cid, $path, -1);
		wait_children_count($peer, $path, 3) or BAIL_OUT("Curator $cid is not queued");
		return;
	}
};

############################################################################
# 4. The connection drops right at a release to a local waiter: the waiter
#    holds at once, while the released node is still first in ZooKeeper's
#    queue (its guarded delete cannot get through) and keeps Curator out;
#    once the connection is back in the same session the delete is applied,
#    the waiter's node is the lowest, its COMMIT succeeds, and the Curator
#    waiter behind it gets its turn after it.
############################################################################
subtest 'the connection dropped at a release: the waiter holds at once, the released node keeps Curator out until it goes' => sub {
	$P = '/t800/drop';
	$s0 = status_row($node)->{session_id};
	hold_then_handover_queue($P, 'c2');
	my $na = zk_lock_rows($node, $P)->{ $sa->pid }{node};
	$proxy->set_mode('blackhole');
	is($sa->value(qq{SELECT zk_mutex_release('$P')}), 't', 'a releases into a black hole');
	my $r = $sb->result(10);
	is($r->{out}, 't', 'b gets the lock at once');
	is(lock_state($node, $sb->pid, $P), 'held', 'zk_locks: b holds');
	is(lock_children($peer, $P)->[0], $na, "a's node is still first in ZooKeeper's queue");
	ok(!$peer->has_reply(qr/^(acquired|error) c2\b/), "Curator c2 waits: a's node keeps it out");
	$proxy->set_mode('cut');
	ok(wait_until(sub { status_row($node)->{state} ne 'connected' }, 15, 'the drop to be seen'),
		'the worker sees the connection drop');
	ok(!$peer->has_reply(qr/^(acquired|error) c2\b/), 'Curator c2 still waits while the worker is cut off');
	$proxy->set_mode('pass');
	ok(wait_until(sub { status_row($node)->{state} eq 'connected' }, 15, 'reconnect'), 'it reconnects');
	is(status_row($node)->{session_id}, $s0, '... in the same session');
	ok(wait_children_count($peer, $P, 2), "a's node is deleted once the connection is back");
	is(lock_children($peer, $P)->[0], zk_lock_rows($node, $P)->{ $sb->pid }{node}, "b's node is the lowest");
	is(zk_holders($node, $P), $sb->pid, 'zk_locks: b holds');
	ok(!$peer->has_reply(qr/^(acquired|error) c2\b/), 'Curator c2 still waits behind b');
	$r = $sb->query('COMMIT');
	is($r->{err}, '', "b's COMMIT succeeds");
	is($peer->acquire_result('c2', 10), 'acquired', 'then Curator c2 gets the lock');
	is($peer->release('c2'), 'released', 'Curator c2 releases');
	ok(wait_children_count($peer, $P, 0), 'nothing left');
};

############################################################################
# 5. The session expires right at a release to a local waiter: the waiter
#    holds at once, under the lease; ZooKeeper gives the lock to Curator only
#    after the session expired, which is after the lease ran out; the
#    waiter's COMMIT fails and keeps nothing.
############################################################################
subtest 'the session expired at a release: the waiter held only under the lease, Curator after it, the COMMIT fails' => sub {
	$P = '/t800/expire';
	$node->safe_psql('postgres', 'CREATE TABLE IF NOT EXISTS expire_work(tag text)');
	hold_then_handover_queue($P, 'c3');
	$s0 = status_row($node)->{session_id};
	$proxy->set_mode('blackhole');
	is($sa->value(qq{SELECT zk_mutex_release('$P')}), 't', 'a releases into a black hole');
	my $r = $sb->result(10);
	is($r->{out}, 't', 'b gets the lock at once');
	$sb->query(q{INSERT INTO expire_work VALUES ('b')});
	is($peer->acquire_result('c3', 20), 'acquired', 'ZooKeeper expires the session: Curator c3 gets the lock');
	my $live = $node->safe_psql('postgres',
		'SELECT coalesce(lease_until > clock_timestamp(), false) FROM zk_status()');
	isnt(lock_state($node, $sb->pid, $P) . "/$live", 'held/t',
		"... and b's hold is not under a live lease while Curator holds");
	$r = $sb->query('COMMIT');
	is($r->{sqlstate}, '40000', "b's COMMIT fails with 40000") or diag($r->{err});
	is($node->safe_psql('postgres', 'SELECT count(*) FROM expire_work'), '0', 'nothing b wrote is committed');
	$proxy->set_mode('pass');
	ok(wait_until(sub { my $s = status_row($node); $s->{state} eq 'connected' && $s->{session_id} ne $s0 },
			30, 'a new session'),
		'the worker reconnects in a new session');
	ok(wait_until(sub { lock_state($node, $sb->pid, $P) ne 'held' }, 10, "b's lock to be called lost"),
		"b's lock is not held once the worker knows the session ended");
	is($peer->release('c3'), 'released', 'Curator c3 releases');
	ok(wait_children_count($peer, $P, 0), 'nothing left');
};

############################################################################
# 6. The semaphore's P/locks mutex: a lease request that got its lease
#    hands P/locks to the next local acquirer; a Curator acquirer queued
#    behind on P/locks gets it in its turn.
############################################################################
subtest 'the semaphore\'s P/locks is handed over to the next local acquirer, a Curator acquirer gets it in its turn' => sub {
	$P = '/t800/sem';
	($s1, $s2, $s3) = map { ZklockTest::Session->new($node, $_) } qw(s1 s2 s3);
	isnt($s1->value(qq{SELECT zk_semaphore_acquire('$P', 1, 1, '10s')}), '', 's1 has the only lease');
	$s2->start(qq{SELECT zk_semaphore_acquire('$P', 1, 1, '60s') IS NOT NULL});
	wait_children_count($peer, "$P/leases", 2) or BAIL_OUT('s2 has no lease node');
	$s3->start(qq{SELECT zk_semaphore_acquire('$P', 1, 1, '60s') IS NOT NULL});
	wait_children_count($peer, "$P/locks", 2) or BAIL_OUT('s3 does not wait on P/locks');
	queued($s3);
	$peer->lease('c4', $P, 1, 1, 60000);
	wait_children_count($peer, "$P/locks", 3) or BAIL_OUT('Curator c4 does not wait on P/locks');
	$h0 = handovers();
	is($s1->value(qq{SELECT zk_semaphore_release_all('$P')}), '1', 's1 returns its lease');
	my $r = $s2->result(10);
	is($r->{out}, 't', 's2 gets the lease');
	ok(wait_until(sub { handovers() == $h0 + 1 }, 10, 'the handover'),
		's2 handed P/locks to s3 locally');
	ok(wait_children_count($peer, "$P/leases", 2), 's3 made its lease node');
	ok(!$s3->done, 's3 waits for a lease');
	is($s2->value(qq{SELECT zk_semaphore_release_all('$P')}), '1', 's2 returns its lease');
	$r = $s3->result(10);
	is($r->{out}, 't', 's3 gets the lease');
	ok(ref(quietly(sub { $peer->lease_result('c4', 1) })) ne 'ARRAY', 'Curator c4 waits for a lease');
	is($s3->value(qq{SELECT zk_semaphore_release_all('$P')}), '1', 's3 returns its lease');
	$l = $peer->lease_result('c4', 10);
	is(ref($l), 'ARRAY', 'then Curator c4 gets the lease');
	is($peer->release('c4', 'lease'), 'released', 'Curator c4 returns it');
	ok(wait_children_count($peer, "$P/leases", 0), 'no lease left');
	ok(wait_children_count($peer, "$P/locks", 0), 'no P/locks node left');
	ok(wait_no_zklock_rows($node), 'zk_locks is empty');
};

############################################################################
# 7. Read/write lock: readers behind a released writer, a writer behind the
#    last reader; never past a Curator writer, never into a downgrade.
############################################################################
$P = '/t800/rw';
my ($rw1, $rw2, $rw3, $rw4) = map { ZklockTest::Session->new($node, $_) } qw(rw1 rw2 rw3 rw4);

# rw_queue($session, $mode, $n): start a $mode lock of $P, wait for its node
sub rw_queue
{
	my ($s, $mode, $n) = @_;
	$s->start("SELECT zk_${mode}_lock_acquire('$P', '60s')");
	wait_children_count($peer, $P, $n) or BAIL_OUT($s->name . " is not queued for $mode");
	queued($s);
	return;
}

# 7a. writer rw1 holds; readers rw2 and rw3 queue behind it: its release
#     hands both of them the lock; writer rw4 behind the readers waits.
subtest 'read/write handover: a released writer hands over to the readers behind it, not to the writer behind them' => sub {
	is($rw1->value(qq{SELECT zk_write_lock_acquire('$P')}), 't', 'rw1 holds the write lock');
	rw_queue($rw2, 'read', 2);
	rw_queue($rw3, 'read', 3);
	rw_queue($rw4, 'write', 4);
	$h0 = handovers();
	is($rw1->value(qq{SELECT zk_write_lock_release('$P')}), 't', 'rw1 releases the write lock');
	is($rw2->result(10)->{out}, 't', 'reader rw2 gets the read lock');
	is($rw3->result(10)->{out}, 't', 'reader rw3 gets the read lock');
	is(handovers(), $h0 + 2, 'both by local handovers');
	ok(!$rw4->done, 'writer rw4 waits behind the readers');
	$peer->lock('read', 'cr', $P, -1);
	ok(wait_children_count($peer, $P, 4), 'a Curator reader queues behind rw4 (rw1 gone)');
	is($rw2->value(qq{SELECT zk_read_lock_release('$P')}), 't', 'rw2 releases');
	ok(!$rw4->done, 'rw4 still waits for rw3');
	is(handovers(), $h0 + 2, 'no handover while another reader is ahead of the writer');
	is($rw3->value(qq{SELECT zk_read_lock_release('$P')}), 't', 'rw3, the last reader, releases');
	is($rw4->result(10)->{out}, 't', 'writer rw4 gets the write lock');
	ok(!$peer->has_reply(qr/^(acquired|error) cr\b/), 'the Curator reader waits while rw4 writes');
	is($rw4->value(qq{SELECT zk_write_lock_release('$P')}), 't', 'rw4 releases');
	is($peer->acquire_result('cr', 10), 'acquired', 'then the Curator reader reads');
	is($peer->release('cr'), 'released', 'and releases');
	ok(wait_children_count($peer, $P, 0), 'nothing left');
};

# 7b. the last reader hands over to the writer right behind it.
subtest 'read/write handover: the last reader hands over to the writer right behind it' => sub {
	is($rw1->value(qq{SELECT zk_read_lock_acquire('$P')}), 't', 'rw1 holds the read lock');
	rw_queue($rw2, 'write', 2);
	$h0 = handovers();
	is($rw1->value(qq{SELECT zk_read_lock_release('$P')}), 't', 'rw1 releases');
	is($rw2->result(10)->{out}, 't', 'writer rw2 gets the write lock');
	is(handovers(), $h0 + 1, 'by a local handover');
	is($rw2->value(qq{SELECT zk_write_lock_release('$P')}), 't', 'rw2 releases');
};

# 7c. a Curator writer between a zklock writer and a zklock reader.
subtest 'read/write handover: never past a Curator writer queued between' => sub {
	is($rw1->value(qq{SELECT zk_write_lock_acquire('$P')}), 't', 'rw1 holds the write lock');
	$peer->lock('write', 'cw', $P, -1);
	ok(wait_children_count($peer, $P, 2), 'a Curator writer queues behind rw1');
	rw_queue($rw2, 'read', 3);
	$h0 = handovers();
	is($rw1->value(qq{SELECT zk_write_lock_release('$P')}), 't', 'rw1 releases');
	is($peer->acquire_result('cw', 10), 'acquired', 'the Curator writer gets the lock');
	ok(!$rw2->done, 'the zklock reader behind it waits');
	is(handovers(), $h0, 'no handover past the Curator writer');
	is($peer->release('cw'), 'released', 'the Curator writer releases');
	is($rw2->result(10)->{out}, 't', 'then the reader reads');
	is($rw2->value(qq{SELECT zk_read_lock_release('$P')}), 't', 'rw2 releases');
};

# 7d. a writer queued before a downgrade: the downgrade node sorts ahead of
#     it, so the release of the write lock must not hand it over.
subtest 'read/write handover: never into a downgrade sorted ahead of a queued writer' => sub {
	is($rw1->value(qq{SELECT zk_write_lock_acquire('$P')}), 't', 'rw1 holds the write lock');
	rw_queue($rw2, 'write', 2);
	is($rw1->value(qq{SELECT zk_read_lock_acquire('$P')}), 't', 'rw1 downgrades: it takes the read lock');
	ok(wait_children_count($peer, $P, 3), "rw1's read node is there");
	$h0 = handovers();
	is($rw1->value(qq{SELECT zk_write_lock_release('$P')}), 't', 'rw1 releases the write lock, still reading');
	ok(!$rw2->done, 'writer rw2 does not get the lock while rw1 reads');
	is(handovers(), $h0, 'no handover into a downgrade');
	ok(!$rw2->result(1)->{done}, 'rw2 still waits a second later');
	is($rw1->value(qq{SELECT zk_read_lock_release('$P')}), 't', 'rw1 releases the read lock');
	is($rw2->result(10)->{out}, 't', 'then rw2 gets the write lock');
	is($rw2->value(qq{SELECT zk_write_lock_release('$P')}), 't', 'rw2 releases');
	ok(wait_children_count($peer, $P, 0), 'nothing left');
};

############################################################################
# 8. A holder terminated while it holds: the lock goes to the next local
#    waiter only after PostgreSQL has ended the holder's transaction and
#    released its locks (the waiter gets the lock in microseconds, so it
#    must not find the dying holder's work still in progress).  The holder
#    keeps 2000 advisory locks, so giving them back takes a while; the
#    waiter looks at pg_locks the moment it has the lock.
############################################################################
subtest 'a holder terminated while it holds hands over only once PostgreSQL released its locks' => sub {
	$P = '/t800/exit';
	for my $round (1 .. 8)
	{
		my $xact = $round % 2 == 0;
		my $what = $xact ? 'an _xact lock in an open transaction' : 'a session lock';
		my $x = ZklockTest::Session->new($node, "x$round");
		my $y = ZklockTest::Session->new($node, "y$round");
		my $xpid = $x->pid;
		$x->value('BEGIN') if $xact;
		is($x->value($xact ? qq{SELECT zk_mutex_acquire_xact('$P')} : qq{SELECT zk_mutex_acquire('$P')}),
			't', "round $round: x holds $what");
		is($x->value('SELECT count(pg_advisory_lock(k)) FROM generate_series(1, 2000) k'), '2000',
			"round $round: x holds 2000 advisory locks");
		$y->start(qq{SELECT CASE WHEN zk_mutex_acquire('$P', '60s')
		THEN (SELECT count(*) FROM pg_locks WHERE pid = $xpid AND locktype = 'advisory')::text
		ELSE 'timeout' END});
		wait_children_count($peer, $P, 2) or BAIL_OUT("round $round: y is not queued");
		queued($y);
		$h0 = handovers();
		is($node->safe_psql('postgres', "SELECT pg_terminate_backend($xpid)"), 't',
			"round $round: x is terminated");
		is($y->result(10)->{out}, '0',
			"round $round: y gets the lock, and x holds no PostgreSQL lock by then");
		is(handovers(), $h0 + 1, "round $round: by a local handover");
		is($y->value(qq{SELECT zk_mutex_release('$P')}), 't', "round $round: y releases");
		ok(wait_children_count($peer, $P, 0), "round $round: nothing left under the mutex");
		$x->quit;
		$y->quit;
	}
};

############################################################################
# 9. A waiter's node deleted from outside before the handover: Curator's
#    waiter would find its node gone and queue again.  Whichever way the
#    worker learns it (the check behind the released node's delete, or its
#    once-a-second look at local waits before the release), the waiter
#    never holds while the Curator waiter behind does: either it queued
#    again (it gets the lock after Curator, and its COMMIT keeps its work),
#    or it was told its lock is lost (its COMMIT fails with 40000 and keeps
#    nothing), or, seen before its backend took the grant, its acquire
#    fails (08006 or 38000; as Curator's acquire fails when its own node is
#    gone) and its transaction keeps nothing.  Only work done under a lock really
#    held is committed.
############################################################################
# deleted_waiter($path, $stall): the case above on $path; with $stall,
# b's backend is stopped (SIGSTOP) from before a's release until Curator
# c9 holds, so that the worker decides b's lock before b can see it
sub deleted_waiter
{
	my ($path, $stall) = @_;
	my $tag = $stall ? 'b-stalled' : 'b';
	my $c = $stall ? 'c9s' : 'c9';
	$P = $path;
	is($sa->value(qq{SELECT zk_mutex_acquire('$P')}), 't', 'a holds the mutex');
	$sb->value('BEGIN');
	$sb->start(qq{SELECT zk_mutex_acquire_xact('$P', '60s')});
	wait_children_count($peer, $P, 2) or BAIL_OUT('b is not queued');
	queued($sb);
	$peer->acquire($c, $P, -1);
	wait_children_count($peer, $P, 3) or BAIL_OUT('Curator c9 is not queued');
	$kids = lock_children($peer, $P);
	is(waiting_for($sb), $kids->[0], 'b waits behind a');
	like($peer->delete("$P/$kids->[1]"), qr/^deleted /, "b's node is deleted from outside");
	ok(wait_children_count($peer, $P, 2), 'a and Curator c9 are left in the queue');
	kill('STOP', $sb->pid) or BAIL_OUT("cannot stop b's backend: $!") if $stall;
	is($sa->value(qq{SELECT zk_mutex_release('$P')}), 't', 'a releases');
	is($peer->acquire_result($c, 10), 'acquired', 'Curator c9, next in the queue, gets the lock');
	isnt(lock_state($node, $sb->pid, $P), 'held', 'zk_locks: b does not hold while Curator c9 does');
	if ($stall)
	{
		kill('CONT', $sb->pid);
		# b's backend, running again, answers at once unless it queued again
		wait_until(sub { $sb->done || lock_state($node, $sb->pid, $P) eq 'waiting' }, 10, "b's answer");
	}
	my $rb = $sb->done ? $sb->result(1) : undef;
	if ($rb && $rb->{out} ne 't')
	{
		# b's acquire fails, and b never held: the guarded delete's check
		# found b's node gone before b's backend saw its grant (08006, lost
		# as it was granted), or before the grant was made (38000)
		like("$rb->{sqlstate} $rb->{err}",
			qr/^(08006 .*zookeeper lock "\Q$P\E" was lost as it was granted.*another client deleted the lock node handed to it|38000 .*zookeeper lock node under "\Q$P\E" was deleted by another client while the lock was handed to it)/s,
			"b's acquire fails, saying its lock was lost as it was handed over")
		  or diag($rb->{err});
		is(lock_state($node, $sb->pid, $P), 'none', 'zk_locks: b holds nothing');
		my $r = $sb->query(q{INSERT INTO t056_done VALUES ('$tag')});
		is($r->{sqlstate}, '25P02', "b's transaction is aborted: nothing more runs in it");
		$sb->query('COMMIT');
		is($peer->release($c), 'released', 'Curator c9 releases');
		is($node->safe_psql('postgres', qq{SELECT count(*) FROM t056_done WHERE tag = '$tag'}), '0',
			'nothing b wrote was committed');
	}
	elsif ($rb)
	{
		# b was handed the lock before the worker saw its node gone
		is($rb->{out}, 't', 'b was handed the lock ...');
		is(lock_state($node, $sb->pid, $P), 'lost', "... and zk_locks says it is lost: its node was gone");
		$sb->query(q{INSERT INTO t056_done VALUES ('$tag')});
		my $r = $sb->query('COMMIT');
		is($r->{sqlstate}, '40000', "b's COMMIT fails with 40000") or diag($r->{err});
		is($peer->release($c), 'released', 'Curator c9 releases');
		is($node->safe_psql('postgres', qq{SELECT count(*) FROM t056_done WHERE tag = '$tag'}), '0',
			"nothing b wrote under the lost lock was committed");
	}
	else
	{
		note('b queued again behind Curator c9');
		is($peer->release($c), 'released', 'Curator c9 releases');
		my $r = $sb->result(10);
		is($r->{out}, 't', 'then b, queued again behind it, gets the lock');
		$sb->query(q{INSERT INTO t056_done VALUES ('$tag')});
		$r = $sb->query('COMMIT');
		is($r->{err}, '', "b's COMMIT succeeds");
		is($node->safe_psql('postgres', qq{SELECT count(*) FROM t056_done WHERE tag = '$tag'}), '1',
			'what b wrote under the lock is committed');
	}
	ok(wait_children_count($peer, $P, 0), 'nothing left under the mutex');
}

subtest 'a waiter whose node was deleted from outside never holds while the Curator waiter behind it does; only work under a lock really held commits' => sub {
	$node->safe_psql('postgres', 'CREATE TABLE t056_done(tag text)');
	deleted_waiter('/t800/deleted', 0);
};

subtest '... and so with its backend stopped while the lock is handed to it' => sub {
	deleted_waiter('/t800/deleted-stalled', 1);
};

############################################################################
# 10. A read lock node right behind a read lock node of this worker shares
#     its answer without a listing (zk_status().read_joins): behind a held
#     reader it reads at once; a Curator writer between the two keeps it
#     out, in queue order; behind a Curator reader it lists.  Under load
#     with Curator writers, no write overlaps any read.
############################################################################
$P = '/t800/join';
sub read_joins { return status_row($node)->{read_joins}; }

# 10a. rw1 reads; rw2's node comes right after rw1's: it reads at once.
subtest 'a reader right behind a held local reader joins it at once (read_joins)' => sub {
	$j0 = read_joins();
	is($rw1->value(qq{SELECT zk_read_lock_acquire('$P')}), 't', 'rw1 holds the read lock');
	is($rw2->value(qq{SELECT zk_read_lock_acquire('$P', '10s')}), 't', 'rw2 reads too');
	is(read_joins(), $j0 + 1, "rw2 joined rw1's read lock (no listing)");
	is(join(',', sort split /,/, zk_holders($node, $P)), join(',', sort($rw1->pid, $rw2->pid)),
		'zk_locks: both hold');
	is($rw2->value(qq{SELECT zk_read_lock_release('$P')}), 't', 'rw2 releases');
};

# 10b. a Curator writer queued between rw1 and rw3's node keeps rw3 out.
subtest 'a Curator writer between two local readers keeps the second out, in queue order' => sub {
	$peer->lock('write', 'cwj', $P, -1);
	ok(wait_children_count($peer, $P, 2), 'a Curator writer queues behind rw1');
	$j0 = read_joins();
	rw_queue($rw3, 'read', 3);
	# read/write lock nodes sort by their sequence number alone
	$kids = [ sort { substr($a, -10) cmp substr($b, -10) } @{ $peer->children($P) } ];
	like($kids->[1], qr/__WRIT__/, "the Curator writer's node is second in the queue");
	is(waiting_for($rw3), $kids->[1], 'rw3 waits for the Curator writer, not past it');
	is(read_joins(), $j0, 'rw3 did not join rw1 across the writer');
	is($rw1->value(qq{SELECT zk_read_lock_release('$P')}), 't', 'rw1 releases');
	is($peer->acquire_result('cwj', 10), 'acquired', 'the Curator writer, next in the queue, writes');
	ok(!$rw3->done, 'rw3 still waits while Curator writes');
	is($peer->release('cwj'), 'released', 'the Curator writer releases');
	is($rw3->result(10)->{out}, 't', 'then rw3 reads');
	is($rw3->value(qq{SELECT zk_read_lock_release('$P')}), 't', 'rw3 releases');
};

# 10c. behind a Curator reader, a zklock reader lists (and reads).
subtest 'a reader behind a Curator reader lists (and reads)' => sub {
	$peer->lock('read', 'crj', $P, -1);
	is($peer->acquire_result('crj', 10), 'acquired', 'a Curator reader reads');
	$j0 = read_joins();
	is($rw1->value(qq{SELECT zk_read_lock_acquire('$P', '10s')}), 't', 'rw1 reads behind it');
	is(read_joins(), $j0, "rw1 did not join Curator's reader: it listed");
	is($rw1->value(qq{SELECT zk_read_lock_release('$P')}), 't', 'rw1 releases');
	is($peer->release('crj'), 'released', 'the Curator reader releases');
	ok(wait_children_count($peer, $P, 0), 'nothing left');
};

# 10d. load: four SQL sessions take and release read locks back to back
#      (their nodes follow each other, so they join), two Curator clients
#      read and write (10% writes, 2 ms inside).  Every section records
#      when it entered and left, from inside; no write may overlap any
#      other section.
subtest 'SQL readers back to back with Curator readers and writers: no write overlaps anything' => sub {
	$P = '/t800/joinload';
	my $JOIN_OPS = 300;
	my $CUR_OPS = 120;
	$node->safe_psql('postgres',
		'CREATE TABLE join_ev (client text, i int, t_enter bigint, t_exit bigint)');
	@readers = map { ZklockTest::Session->new($node, "jr$_") } 1 .. 4;
	$j0 = read_joins();
	$peer->rwloop("cj$_", $P, $CUR_OPS, $_ + 3, 2) for 1 .. 2;
	for my $s (@readers)
	{
		my $who = $s->name;
		$s->start(qq{
DO \$\$
DECLARE t0 bigint; t1 bigint;
BEGIN
  FOR i IN 1..$JOIN_OPS LOOP
    IF NOT zk_read_lock_acquire('$P', '30s') THEN RAISE EXCEPTION 'read % not granted', i; END IF;
    t0 := (extract(epoch FROM clock_timestamp()) * 1000000)::bigint;
    t1 := (extract(epoch FROM clock_timestamp()) * 1000000)::bigint;
    IF NOT zk_read_lock_release('$P') THEN RAISE EXCEPTION 'release % failed', i; END IF;
    INSERT INTO join_ev VALUES ('$who', i, t0, t1);
  END LOOP;
END \$\$});
	}
	my @jev;    # [client, kind, enter, exit]
	for my $s (@readers)
	{
		my $r = $s->result(60);
		ok($r->{done} && $r->{err} !~ /ERROR/, $s->name . " took and released $JOIN_OPS read locks")
		  or diag($r->{err});
	}
	for my $c (1 .. 2)
	{
		my $e = $peer->rwloop_result("cj$c", 60);
		ok(ref $e && @$e == $CUR_OPS, "Curator client cj$c finished its $CUR_OPS operations")
		  or diag($e // 'no reply');
		push @jev, map { [ "cj$c", $_->[1], $_->[2], $_->[3] ] } @$e if ref $e;
	}
	for my $line (split /\n/, $node->safe_psql('postgres', 'SELECT client, t_enter, t_exit FROM join_ev'))
	{
		my ($who, $enter, $exit) = split /\|/, $line;
		push @jev, [ $who, 'read', $enter, $exit ];
	}
	is(scalar @jev, 4 * $JOIN_OPS + 2 * $CUR_OPS, 'every section recorded');
	my $nj = read_joins() - $j0;
	note("join load: $nj read locks joined a reader before them");
	cmp_ok($nj, '>', 0, "SQL readers joined the reader before them under load ($nj)");
	my $nw = grep { $_->[1] eq 'write' } @jev;
	cmp_ok($nw, '>', 0, "the Curator clients wrote ($nw writes)");
	is(write_overlaps(\@jev), 0, 'no write overlapped any read or write');
	ok(wait_children_count($peer, $P, 0), 'nothing left under the loaded read/write lock');
};

$_->quit for ($sa, $sb, $sd, @w, @loaders, $s1, $s2, $s3, $rw1, $rw2, $rw3, $rw4, @readers);
$peer->quit;
$proxy->stop;
stop_zk($zk);
done_testing();

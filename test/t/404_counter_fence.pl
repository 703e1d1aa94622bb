
# 404_counter_fence: counter writes are fenced by the writer's locks, and a
# counter write whose reply is lost is reported as unknown, not retried.
#
# What users rely on (the jobs pattern): a transaction that holds a zklock
# lock claims its period with zk_atomic_long_compare_and_set(path, last,
# period) and COMMITs.  If the cluster's ZooKeeper session expires during
# the job (the lock's node is gone, another client may take the lock) and
# the worker opens a new session, the claim must not land:
#   - a counter write (compare_and_set, add, set, try_set) from a backend
#     that holds a lock lost with the session fails with SQLSTATE 40000
#     naming the lost lock, and nothing is written (a Curator peer reads
#     the old value); the transaction's work is not committed;
#   - the same without the fault claims the period and commits;
#   - a transaction that relied on a lost lock and took it again in the new
#     session still cannot write (its COMMIT will fail anyway);
#   - a session-level lock lost keeps the backend's writes refused until it
#     is released; reads are not fenced; other backends are not affected;
#     a lock taken in the new session lets writes through.
# The same when the worker is stalled (SIGSTOP) past the session timeout
# while the claim waits to be sent: it is refused once the worker runs.
# And a write whose setData reply never comes (dropped by a TCP proxy)
# fails with 08006 "may or may not have been applied": it was applied
# exactly once (Curator reads it once, never twice), and later writes see
# that one.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use ZklockTest;
use ZklockFault;
use ZklockProxy;

my $zk = start_zk();
my $proxy = ZklockProxy->start($zk);
my $node = new_zklock_node('counter_fence', $proxy->connect,
	"zklock.session_timeout = '6s'\nzklock.connect_timeout = '30s'\n");
my $peer = new_peer($zk);
ZklockFault::expirer($zk);    # started now: a session is closed while the worker is stopped

sub sql { return $node->safe_psql('postgres', $_[0]); }

sub peer_long { return $peer->long_get($_[0]); }
# "value version"
sub peer_count { return join(' ', $peer->count_get($_[0])); }

# expire_worker_session(): close the worker's session from a second handle
# (the worker paused meanwhile, so it cannot take the session back) and
# wait until it is connected in a new one.
sub expire_worker_session
{
	my $s0 = status_row($node)->{session_id};
	my ($id, $pw) = session_file($node);
	my $wpid = worker_pid($node);
	kill('STOP', $wpid);
	my $closed = expire_session($zk, $id, $pw);
	kill('CONT', $wpid);
	ok($closed, "session $s0 closed from a second handle");
	ok( wait_until(
			sub {
				my $st = status_row($node);
				$st->{state} eq 'connected' && $st->{session_id} ne $s0;
			},
			30, 'a new session'),
		'the worker is connected in a new session');
}

sql('CREATE TABLE claims(period int)');
my $last = '/t404/jobs/last';

subtest 'no fault: the job claims its period under its _xact lock and commits' => sub {
	sql("SELECT zk_atomic_long_set('$last', 100)");
	my $j = ZklockTest::Session->new($node, 'job0');
	$j->value('BEGIN');
	is($j->value(q{SELECT zk_mutex_acquire_xact('/t404/job')}), 't', 'the job holds /t404/job');
	$j->value('INSERT INTO claims VALUES (101)');
	is($j->value(qq{SELECT zk_atomic_long_compare_and_set('$last', 100, 101)}), 't',
		'compare_and_set claims period 101');
	my $r = $j->query('COMMIT');
	is($r->{sqlstate}, undef, 'COMMIT succeeds') or diag($r->{err});
	is(peer_long($last), '101', 'Curator reads 101');
	is(sql('SELECT string_agg(period::text, \',\') FROM claims'), '101', 'the claim row is committed');
	ok(wait_children_count($peer, '/t404/job', 0), 'the lock is released at commit');
	$j->quit;
};

subtest 'the session expires during the jobs: their counter writes are refused, nothing is written' => sub {
	sql("SELECT zk_shared_count_set('/t404/count', 7)");
	my $j = ZklockTest::Session->new($node, 'job');      # the jobs pattern
	my $k = ZklockTest::Session->new($node, 'retaker');  # takes its lost lock again
	my $h = ZklockTest::Session->new($node, 'holder');   # a session-level lock
	my $o = ZklockTest::Session->new($node, 'other');    # holds nothing

	$j->value('BEGIN');
	is($j->value(q{SELECT zk_mutex_acquire_xact('/t404/job')}), 't', 'the job holds /t404/job');
	$j->value('INSERT INTO claims VALUES (102)');
	$k->value('BEGIN');
	is($k->value(q{SELECT zk_mutex_acquire_xact('/t404/re')}), 't', 'the retaker holds /t404/re');
	is($h->value(q{SELECT zk_mutex_acquire('/t404/s')}), 't', 'the holder holds /t404/s at session level');

	expire_worker_session();
	$peer->acquire('pj', '/t404/job', 5000);
	is($peer->acquire_result('pj'), 'acquired', 'Curator takes /t404/job: the job lost it');

	# the job: its claim fails, nothing is written, nothing commits
	my $r = $j->query(qq{SELECT zk_atomic_long_compare_and_set('$last', 101, 102)});
	is($r->{sqlstate}, '40000', 'compare_and_set under the lost lock fails with 40000')
	  or diag("out=[$r->{out}] err=[$r->{err}]");
	like($r->{err}, qr{lock "/t404/job" was lost}, 'the error names the lost lock');
	is(peer_long($last), '101', 'Curator still reads 101: nothing was written');
	$r = $j->query('COMMIT');
	is(sql('SELECT string_agg(period::text, \',\') FROM claims'), '101',
		"COMMIT did not write the job's row");
	is($peer->release('pj'), 'released', 'Curator releases /t404/job');

	# the retaker took its lost lock again (a new node, the new session):
	# its transaction relied on the lost one, so it still cannot write
	$r = $k->query(q{SELECT zk_mutex_acquire_xact('/t404/re', '5s')});
	is($r->{out}, 't', 'the retaker acquires /t404/re again in the new session');
	$r = $k->query(qq{SELECT zk_atomic_long_add('$last', 1)});
	is($r->{sqlstate}, '40000', '... and its add still fails with 40000')
	  or diag("out=[$r->{out}] err=[$r->{err}]");
	like($r->{err}, qr{lock "/t404/re" was lost}, 'naming the lock its transaction lost');
	$k->query('ROLLBACK');
	is(peer_long($last), '101', 'Curator still reads 101');

	# the session-level holder: every kind of write is refused, reads work
	for my $w (qq{zk_atomic_long_add('$last', 1)}, qq{zk_atomic_long_set('$last', 1)},
		qq{zk_atomic_long_compare_and_set('$last', 101, 1)},
		q{zk_shared_count_set('/t404/count', 1)}, q{zk_shared_count_try_set('/t404/count', 1, 1)})
	{
		$r = $h->query("SELECT $w");
		is($r->{sqlstate}, '40000', "holder of a lost lock: $w fails with 40000")
		  or diag("out=[$r->{out}] err=[$r->{err}]");
	}
	like($r->{err}, qr{lock "/t404/s" was lost}, 'naming /t404/s');
	is(peer_long($last), '101', 'Curator still reads 101');
	is(peer_count('/t404/count'), '7 0', 'and the SharedCount 7 at version 0');
	is($h->value(qq{SELECT zk_atomic_long_get('$last')}), '101', 'reads are not fenced');
	is($o->value(qq{SELECT zk_atomic_long_add('$last', 1)}), '102',
		'a backend that holds no lock writes as before');
	is($o->value(q{SELECT zk_mutex_acquire('/t404/o')}), 't', 'it takes a lock in the new session');
	is($o->value(qq{SELECT zk_atomic_long_add('$last', 1)}), '103', '... and writes under it');
	$o->value(q{SELECT zk_mutex_release('/t404/o')});
	$r = $h->query(q{SELECT zk_mutex_release('/t404/s')});
	is($r->{out}, 'f', 'the holder releases its lost lock (false)');
	is($h->value(qq{SELECT zk_atomic_long_add('$last', 1)}), '104', 'then it writes again');
	is(peer_long($last), '104', 'Curator reads 104');
	is(sql('SELECT count(*) FROM zk_locks'), '0', 'no zk_locks row is left');
	$_->quit for ($j, $k, $h, $o);
};

subtest 'a worker stalled past the session timeout with the claim queued: refused once it runs again' => sub {
	my $j = ZklockTest::Session->new($node, 'stalljob');
	$j->value('BEGIN');
	is($j->value(q{SELECT zk_mutex_acquire_xact('/t404/stall')}), 't', 'the job holds /t404/stall');
	$j->value('INSERT INTO claims VALUES (105)');
	$peer->acquire('ps', '/t404/stall', -1);
	ok(wait_children_count($peer, '/t404/stall', 2), 'Curator waits behind the job');
	my $wpid = worker_pid($node);
	ok(kill('STOP', $wpid), "worker $wpid stopped (SIGSTOP)");
	$j->start(qq{SELECT zk_atomic_long_compare_and_set('$last', 104, 105)});
	is($peer->acquire_result('ps', 40), 'acquired', 'the server expired the session: Curator holds /t404/stall');
	ok(kill('CONT', $wpid), 'worker continued (SIGCONT)');
	my $r = $j->result(60);
	is($r->{sqlstate}, '40000', 'the claim queued meanwhile fails with 40000')
	  or diag("out=[$r->{out}] err=[$r->{err}]");
	like($r->{err}, qr{lock "/t404/stall" was lost}, 'naming the lost lock');
	is(peer_long($last), '104', 'Curator still reads 104: nothing was written');
	$j->query('COMMIT');
	is(sql('SELECT count(*) FROM claims WHERE period = 105'), '0', "COMMIT did not write the job's row");
	is($peer->release('ps'), 'released', 'Curator releases /t404/stall');
	ok(wait_connected($node), 'the worker is connected again');
	$j->quit;
};

subtest 'a counter write whose reply is lost: 08006, applied exactly once' => sub {
	my $p = '/t404/drop';
	my $s = ZklockTest::Session->new($node, 'dropper');
	is($s->value(qq{SELECT zk_atomic_long_add('$p', 10)}), '10', 'the long is at 10');
	ok(drop_set_reply($proxy, $s, qq{SELECT zk_atomic_long_add('$p', 1)}),
		'the add went out and its reply was dropped');
	my $r = $s->result(30);
	$proxy->set_mode('pass');
	is($r->{sqlstate}, '08006', 'the add fails with 08006') or diag("out=[$r->{out}] err=[$r->{err}]");
	like($r->{err}, qr/may or may not have been applied/, 'saying its outcome is unknown');
	is(peer_long($p), '11', 'Curator reads 11: applied once, not twice');
	ok(wait_connected($node), 'the worker is connected again');
	is($s->value(qq{SELECT zk_atomic_long_add('$p', 1)}), '12', 'the next add sees that one write');
	is(peer_long($p), '12', 'Curator reads 12');

	my $c = '/t404/dropcount';
	$s->value(qq{SELECT zk_shared_count_set('$c', 5)});
	is(peer_count($c), '5 0', 'a SharedCount at 5, version 0');
	ok(drop_set_reply($proxy, $s, qq{SELECT zk_shared_count_try_set('$c', 6, 0)}),
		'try_set went out and its reply was dropped');
	$r = $s->result(30);
	$proxy->set_mode('pass');
	is($r->{sqlstate}, '08006', 'try_set fails with 08006') or diag("out=[$r->{out}] err=[$r->{err}]");
	is(peer_count($c), '6 1', 'Curator reads 6 at version 1: one write');
	ok(wait_connected($node), 'connected again');
	is($s->value(qq{SELECT value || ' ' || version FROM zk_shared_count_get_versioned('$c')}), '6 1',
		'SQL reads the same');
	is(sql('SELECT count(*) FROM zk_locks'), '0', 'no zk_locks row is left');
	$s->quit;
};

$peer->quit;
$node->stop;
$proxy->stop;
stop_zk($zk);
done_testing();

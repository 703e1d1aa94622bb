
# 120_semaphore_mutex: the non-reentrant mutex (Curator's
# InterProcessSemaphoreMutex, a semaphore with one lease).
#
# What users rely on: a second acquire by the holder is an error (not a
# silent re-entry, not a self-deadlock); SQL sessions and Curator's
# InterProcessSemaphoreMutex on the same path exclude each other; the
# ZooKeeper layout is Curator's (P/locks, P/leases); the _xact variant is
# released at commit.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use ZklockTest;

my $zk = start_zk();
my $node = new_zklock_node('semmutex', $zk);
require_functions($node, qw(zk_semaphore_mutex_acquire zk_semaphore_mutex_release
  zk_semaphore_mutex_acquire_xact));
my $peer = new_peer($zk);

my $p = '/t120/semmutex';
my $s1 = ZklockTest::Session->new($node, 's1');
my $s2 = ZklockTest::Session->new($node, 's2');

# 1. Layout.
subtest 'the layout is Curator\'s: P/leases holds one lease node, P/locks is released after the grant' => sub {
	is($s1->value("SELECT zk_semaphore_mutex_acquire('$p', '5s')"), 't', 's1 acquires');
	is_deeply([ sort @{ $peer->children($p) } ], [ 'leases', 'locks' ], "P has Curator's children locks and leases");
	my $leases = $peer->children("$p/leases");
	is(scalar @$leases, 1, 'one lease node');
	like($leases->[0], $CURATOR_LEASE_NODE_RE, "the lease node is named as Curator names it ($leases->[0])");
	ok(wait_children_count($peer, "$p/locks", 0), 'the internal P/locks mutex was released after the grant');
	is( $node->safe_psql('postgres', 'SELECT recipe, state FROM zk_locks WHERE pid = ' . $s1->pid),
		'semaphore_mutex|held', 'zk_locks: recipe semaphore_mutex, held');
};

# 2. Not reentrant: a second acquire by the holder is ERROR 55006.
subtest 'not reentrant: a second acquire by the holder fails with 55006 and changes nothing' => sub {
	my $r = $s1->query("SELECT zk_semaphore_mutex_acquire('$p')");
	is($r->{sqlstate}, '55006', 'second acquire by the holder (no timeout): ERROR 55006') or diag($r->{err});
	$r = $s1->query("SELECT zk_semaphore_mutex_acquire('$p', '1s')");
	is($r->{sqlstate}, '55006', 'second acquire by the holder (with timeout): ERROR 55006') or diag($r->{err});
	is(scalar @{ $peer->children("$p/leases") }, 1, 'still exactly one lease');
	is( $node->safe_psql('postgres', 'SELECT state FROM zk_locks WHERE pid = ' . $s1->pid),
		'held', 's1 still holds after the refused re-entry');
};

# 3. SQL holds -> Curator's InterProcessSemaphoreMutex is excluded.
subtest 'a SQL holder excludes Curator\'s InterProcessSemaphoreMutex, which gets it on release' => sub {
	$peer->lock('semmutex', 'c1', $p, 500);
	is($peer->acquire_result('c1'), 'timeout', 'Curator semmutex times out while SQL holds');
	ok(wait_children_count($peer, "$p/leases", 1), "Curator's timed-out attempt left no lease");
	$peer->lock('semmutex', 'c1', $p, -1);
	ok(wait_children_count($peer, "$p/leases", 2), 'Curator waits (its lease node exists)');
	ok(!$peer->has_reply(qr/^(acquired|timeout|error) c1\b/), 'Curator is blocked');
	is($s2->value("SELECT zk_semaphore_mutex_acquire('$p', '300ms')"), 'f',
		'another SQL session times out too');
	is($s1->value("SELECT zk_semaphore_mutex_release('$p')"), 't', 's1 releases');
	is($peer->acquire_result('c1'), 'acquired', 'Curator gets the semaphore mutex');
	ok(wait_children_count($peer, "$p/leases", 1), 'one lease (Curator)');
};

# 4. Curator holds -> SQL is excluded, then granted on release.
subtest 'a Curator holder excludes SQL, which gets it on release; a second release is false with a WARNING' => sub {
	is($s2->value("SELECT zk_semaphore_mutex_acquire('$p', '500ms')"), 'f', 'SQL times out while Curator holds');
	ok(wait_children_count($peer, "$p/leases", 1), "the timed-out SQL attempt left no lease");
	ok(wait_children_count($peer, "$p/locks", 0), '... and no P/locks node');
	$s2->start("SELECT zk_semaphore_mutex_acquire('$p')");
	ok(wait_children_count($peer, "$p/leases", 2), 'SQL waiter created its lease');
	ok(!$s2->done, 'SQL waiter is blocked while Curator holds');
	is($peer->release('c1'), 'released', 'Curator releases');
	my $r = $s2->result;
	is($r->{out}, 't', 'SQL waiter gets it') or diag($r->{err});
	is($s2->value("SELECT zk_semaphore_mutex_release('$p')"), 't', 's2 releases');
	$r = $s2->query("SELECT zk_semaphore_mutex_release('$p')");
	is($r->{out}, 'f', 'releasing again returns false');
	like($r->{err}, qr/WARNING/, '... with a WARNING');
	ok(wait_children_count($peer, "$p/leases", 0), 'no lease left');
};

# 5. The _xact variant is released at commit.
subtest 'the _xact variant is released at commit' => sub {
	$s1->value('BEGIN');
	is($s1->value("SELECT zk_semaphore_mutex_acquire_xact('$p', '5s')"), 't', 'acquire_xact inside a transaction');
	$peer->lock('semmutex', 'c2', $p, 300);
	is($peer->acquire_result('c2'), 'timeout', 'Curator is excluded by the transaction-level hold');
	$s1->value('COMMIT');
	$peer->lock('semmutex', 'c2', $p, 5000);
	is($peer->acquire_result('c2'), 'acquired', 'the commit released it: Curator acquires');
	is($peer->release('c2'), 'released', 'Curator releases');
	is($node->safe_psql('postgres', 'SELECT count(*) FROM zk_locks'), '0', 'zk_locks is empty');
};

$_->quit for ($s1, $s2);
$peer->quit;
$node->stop;
stop_zk($zk);
done_testing();

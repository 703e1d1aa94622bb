
# 150_barrier: the distributed barrier (Curator's DistributedBarrier).
#
# What users rely on: waiting on a barrier that is not set returns true at
# once; waiters (SQL and Curator) block while it is set and are all
# released when anyone (SQL or Curator) removes it; a wait with a timeout
# returns false when the barrier stays up.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use ZklockTest;

my $zk = start_zk();
my $node = new_zklock_node('barrier', $zk);
require_functions($node, qw(zk_barrier_set zk_barrier_remove zk_barrier_wait));
my $peer = new_peer($zk);

my $p = '/t150/barrier';
my ($s1, $s2, $s3) = map { ZklockTest::Session->new($node, "s$_") } 1 .. 3;

sub waiting_in_zklock
{
	my ($s) = @_;
	return wait_sql($node, 'SELECT wait_event FROM pg_stat_activity WHERE pid = ' . $s->pid,
		expected_wait_event($node, 'ZkLockRequest'), 10);
}

# 1. No barrier: the wait returns true at once.
subtest 'no barrier set: the wait returns true at once' => sub {
	my $t0 = time;
	is($s1->value("SELECT zk_barrier_wait('$p', '10s')"), 't', 'waiting with no barrier set returns true');
	cmp_ok(time - $t0, '<', 3, '... at once');
	is($s1->value("SELECT zk_barrier_wait('$p')"), 't', 'also without a timeout');
};

# 2. Set (SQL), idempotent; Curator sees it.
subtest 'a barrier set from SQL is idempotent and Curator sees it' => sub {
	is($s1->value("SELECT zk_barrier_set('$p')"), 't', 'zk_barrier_set creates the barrier');
	is($s1->value("SELECT zk_barrier_set('$p')"), 'f', 'setting it again returns false');
	ok($peer->exists($p), 'the barrier node exists for Curator');
	ok(wait_children_count($peer, $p, 0), 'the barrier node has no children');
};

# 3. Timeout.
subtest 'a wait on a set barrier returns false after its timeout' => sub {
	my $t0 = time;
	is($s1->value("SELECT zk_barrier_wait('$p', '700ms')"), 'f', 'wait with a timeout returns false while set');
	cmp_ok(time - $t0, '>=', 0.65, '... after the timeout');
	$peer->barrier_wait('cb0', $p, 300);
	is($peer->barrier_result('cb0'), 'false', "Curator's timed wait agrees");
};

# 4. SQL and Curator waiters, removed by a third SQL session.
subtest 'SQL and Curator waiters all pass once a third session removes the barrier' => sub {
	$s1->start("SELECT zk_barrier_wait('$p')");
	ok(waiting_in_zklock($s1), 'SQL waiter is waiting');
	$peer->barrier_wait('cb1', $p, -1);
	$s2->start("SELECT zk_barrier_wait('$p', '30s')");
	ok(waiting_in_zklock($s2), 'second SQL waiter (with a timeout) is waiting');
	ok(!$s1->done && !$s2->done, 'SQL waiters are blocked');
	ok(!$peer->has_reply(qr/^(barrier|error) cb1\b/), 'Curator waiter is blocked');
	is($s3->value("SELECT zk_barrier_remove('$p')"), 't', 'a third session removes the barrier');
	my $r = $s1->result;
	is($r->{out}, 't', 'SQL waiter released (true)') or diag($r->{err});
	$r = $s2->result;
	is($r->{out}, 't', 'second SQL waiter released (true)') or diag($r->{err});
	is($peer->barrier_result('cb1'), 'true', 'Curator waiter released (true)');
	is($s3->value("SELECT zk_barrier_remove('$p')"), 'f', 'removing it again returns false');
	ok(!$peer->exists($p), 'the barrier node is gone');
};

# 5. Curator sets and removes; SQL waits.
subtest 'a barrier Curator sets and removes holds and releases a SQL waiter' => sub {
	ok($peer->barrier_set($p), 'Curator sets the barrier');
	is($s3->value("SELECT zk_barrier_set('$p')"), 'f', 'zk_barrier_set sees the barrier Curator set');
	$s1->start("SELECT zk_barrier_wait('$p')");
	ok(waiting_in_zklock($s1), 'SQL waiter is waiting on the Curator barrier');
	ok(!$s1->done, '... blocked');
	ok($peer->barrier_remove($p), 'Curator removes the barrier');
	my $r = $s1->result;
	is($r->{out}, 't', 'SQL waiter released by Curator removing the barrier') or diag($r->{err});
};

# 6. A cancelled wait ends with 57014 and the session stays usable.
subtest 'a cancelled wait ends with 57014 and the session stays usable' => sub {
	is($s1->value("SELECT zk_barrier_set('$p')"), 't', 'set again');
	$s2->start("SELECT zk_barrier_wait('$p')");
	ok(waiting_in_zklock($s2), 'SQL waiter is waiting');
	$node->safe_psql('postgres', 'SELECT pg_cancel_backend(' . $s2->pid . ')');
	my $r = $s2->result;
	is($r->{sqlstate}, '57014', 'a cancelled barrier wait fails with 57014') or diag($r->{err});
	is($s2->value("SELECT zk_barrier_wait('$p', '100ms')"), 'f', 'session still usable');
	is($s1->value("SELECT zk_barrier_remove('$p')"), 't', 'removed');
};

$_->quit for ($s1, $s2, $s3);
$peer->quit;
$node->stop;
stop_zk($zk);
done_testing();

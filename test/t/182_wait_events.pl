
# 182_wait_events: what pg_stat_activity shows while zklock waits.
#
# What users rely on: a DBA looking at pg_stat_activity can tell a backend
# queued for a zklock lock from one waiting on a barrier, and both from the
# zklock worker itself (which must not be cancelled like a stuck session).
# PostgreSQL 17 lets an extension name its wait events: zklock uses
# ZkLockAcquire (a lock or lease), ZkLockRequest (any other call that
# waits, such as a barrier) and ZkLockWorkerMain (the worker's loop).
# PostgreSQL 15 has only the generic Extension event for all of them.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use ZklockTest;

my $zk = start_zk();
my $node = new_zklock_node('waitev', $zk);
my $version = $node->safe_psql('postgres', q{SHOW server_version_num});
note("server_version_num $version");

# wait_event_of($pid): "type/event" of a process, once it is waiting on the
# expected event (the worker wakes up now and then; a waiter is first busy
# posting its request)
sub wait_event_is
{
	my ($pid, $event, $what) = @_;
	ok( wait_sql(
			$node,
			qq{SELECT wait_event_type || '/' || wait_event FROM pg_stat_activity
			   WHERE pid = $pid},
			"Extension/$event"),
		"$what shows wait event Extension/$event");
}

# A backend queued behind a holder.
my $holder = ZklockTest::Session->new($node, 'holder');
is($holder->value(q{SELECT zk_mutex_acquire('/t182/mutex')}), 't', 'holder takes the mutex');
my $waiter = ZklockTest::Session->new($node, 'waiter');
$waiter->start(q{SELECT zk_mutex_acquire('/t182/mutex')});
ok(wait_waiting($node, $waiter->pid, '/t182/mutex'), 'waiter is queued');
wait_event_is($waiter->pid, expected_wait_event($node, 'ZkLockAcquire'), 'a queued mutex waiter');

# A semaphore lease waiter is an acquire too.
is($holder->value(q{SELECT array_length(zk_semaphore_acquire('/t182/sem', 1), 1)}), '1',
	'holder takes the only lease');
my $leaser = ZklockTest::Session->new($node, 'leaser');
$leaser->start(q{SELECT zk_semaphore_acquire('/t182/sem', 1)});
wait_event_is($leaser->pid, expected_wait_event($node, 'ZkLockAcquire'), 'a queued lease waiter');

# A backend waiting for a barrier to come down.
is($holder->value(q{SELECT zk_barrier_set('/t182/barrier')}), 't', 'barrier is set');
my $bwaiter = ZklockTest::Session->new($node, 'bwaiter');
$bwaiter->start(q{SELECT zk_barrier_wait('/t182/barrier')});
wait_event_is($bwaiter->pid, expected_wait_event($node, 'ZkLockRequest'), 'a barrier waiter');

# The worker, between events.
my $wpid = worker_pid($node);
ok($wpid ne '', 'the worker runs');
wait_event_is($wpid, expected_wait_event($node, 'ZkLockWorkerMain'), 'the zklock worker');

# Everyone gets through once the holder lets go.
is($holder->value(q{SELECT zk_barrier_remove('/t182/barrier')}), 't', 'barrier removed');
is($bwaiter->result->{out}, 't', 'barrier waiter passes');
is($holder->value(q{SELECT zk_mutex_release('/t182/mutex')}), 't', 'holder releases the mutex');
is($waiter->result->{out}, 't', 'waiter gets the mutex');
is($holder->value(q{SELECT zk_semaphore_release_all('/t182/sem')}), '1', 'holder returns its lease');
like($leaser->result->{out}, qr/^\{_c_[0-9a-f-]{36}-lease-\d{10}\}$/, 'lease waiter gets a lease');

$_->quit for ($holder, $waiter, $leaser, $bwaiter);
ok(wait_no_zklock_rows($node, '/t182/mutex'), 'no zklock row left for the mutex');
ok(wait_no_zklock_rows($node, '/t182/sem'), 'no zklock row left for the semaphore');

$node->stop;
stop_zk($zk);
done_testing();

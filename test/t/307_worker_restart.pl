
# 307_worker_restart: the zklock worker can die without losing held locks.
#
# What users rely on: when the background worker exits (here: SIGTERM), the
# postmaster restarts it, the new worker resumes the same ZooKeeper session,
# and locks held by backends stay held — another client (Curator) still
# cannot take them — and can be released normally afterwards.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use ZklockTest;

my $path = '/t307/mutex';

my $zk = start_zk();
my $node = new_zklock_node('worker_restart', $zk);
my $peer = new_peer($zk);

my $holder = ZklockTest::Session->new($node, 'holder');
is($holder->value("SELECT zk_mutex_acquire('$path')"), 't', 'holder acquires');
my $held_node = zk_lock_rows($node, $path)->{ $holder->pid }{node};
my $session_before = $node->safe_psql('postgres', 'SELECT session_id FROM zk_status()');
isnt($session_before, '', "zk_status reports a session id ($session_before)");

# Kill the worker.
my $old = worker_pid($node);
like($old, qr/^\d+$/, "the zklock worker shows in pg_stat_activity (pid $old)");
ok(kill('TERM', $old), 'SIGTERM sent to the worker');

# A new worker appears and reconnects.
my $new;
ok( wait_until(
		sub { $new = worker_pid($node); $new ne '' && $new ne $old },
		20, 'a new worker pid'),
	'the postmaster started a new worker');
ok(wait_connected($node, 20), "the new worker (pid $new) is connected");
is($node->safe_psql('postgres', 'SELECT session_id FROM zk_status()'),
	$session_before, 'the new worker resumed the same ZooKeeper session');

# The lock is still held: registry, ZooKeeper and a competing Curator agree.
my $rows = zk_lock_rows($node, $path);
is($rows->{ $holder->pid }{state}, 'held', 'zk_locks still shows the lock held');
is_deeply(lock_children($peer, $path), [$held_node], "the holder's node is still in ZooKeeper");
$peer->acquire('j1', $path, 1000);
is($peer->acquire_result('j1'), 'timeout', 'Curator cannot acquire the lock held across the restart');

# The holder's backend still owns it and can release it; then Curator gets it.
is($holder->value("SELECT zk_mutex_release('$path')"), 't', 'the holder releases after the restart');
$peer->acquire('j1', $path, 5000);
is($peer->acquire_result('j1'), 'acquired', 'Curator acquires after the release');

# New SQL requests go through the new worker.
my $s = ZklockTest::Session->new($node, 'later');
is($s->value("SELECT zk_mutex_acquire('$path', '500ms')"), 'f',
	'a new SQL waiter times out while Curator holds the lock');
$s->start("SELECT zk_mutex_acquire('$path')");
ok(wait_waiting($node, $s->pid, $path), 'SQL waiter queued behind Curator');
is($peer->release('j1'), 'released', 'Curator releases');
my $r = $s->result;
is($r->{out}, 't', 'the SQL waiter gets the lock through the new worker') or diag($r->{err});
is($s->value("SELECT zk_mutex_release('$path')"), 't', 'and releases it');
ok(wait_until(sub { @{ lock_children($peer, $path) } == 0 }, 10), 'no lock node left');

$_->quit for ($holder, $s);
$peer->quit;
$node->stop;
stop_zk($zk);
done_testing();

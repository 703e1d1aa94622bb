
# 306_backend_exit: a backend that goes away gives back what it held.
#
# What users rely on: like pg_advisory_lock, session locks end with the
# session — on a normal disconnect and on pg_terminate_backend — and a
# terminated waiter leaves no node in the queue.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use ZklockTest;

my $path = '/t306/mutex';

my $zk = start_zk();
my $node = new_zklock_node('backend_exit', $zk);
my $peer = new_peer($zk);

my ($sb, $sc, $sd, $c_node);    # sessions and a node shared by the parts below and the end

# 1. A holder that disconnects normally: its waiter gets the lock.
subtest 'a holder that disconnects normally gives its lock to its waiter' => sub {
	my $sa = ZklockTest::Session->new($node, 'a');
	is($sa->value("SELECT zk_mutex_acquire('$path')"), 't', 'a acquires');
	my $a_node = zk_lock_rows($node, $path)->{ $sa->pid }{node};

	$sb = ZklockTest::Session->new($node, 'b');
	$sb->start("SELECT zk_mutex_acquire('$path')");
	ok(wait_waiting($node, $sb->pid, $path), 'b queued behind a');

	$sa->quit;    # disconnect without releasing
	my $r = $sb->result;
	is($r->{out}, 't', 'b is granted the lock after a disconnected while holding it')
	  or diag($r->{err});
	my $b_node = zk_lock_rows($node, $path)->{ $sb->pid }{node};
	ok(wait_until(sub { my $sc = lock_children($peer, $path); @$sc == 1 && $sc->[0] eq $b_node }, 10),
		"a's node is gone; only b's node is left");
	ok(wait_sql($node, 'SELECT count(*) FROM zk_locks WHERE pid = ' . $sa->pid, '0', 10),
		'zk_locks forgot the exited backend');
};

# 2. pg_terminate_backend of a holder: the lock passes to the waiter.
subtest 'pg_terminate_backend of a holder passes the lock to the waiter' => sub {
	$sc = ZklockTest::Session->new($node, 'c');
	$sc->start("SELECT zk_mutex_acquire('$path')");
	ok(wait_waiting($node, $sc->pid, $path), 'c queued behind b');
	is($node->safe_psql('postgres', 'SELECT pg_terminate_backend(' . $sb->pid . ')'), 't',
		'terminate the holder b');
	my $r = $sc->result;
	is($r->{out}, 't', 'c is granted the lock after holder b was terminated') or diag($r->{err});
	$c_node = zk_lock_rows($node, $path)->{ $sc->pid }{node};
	ok(wait_until(sub { my $k = lock_children($peer, $path); @$k == 1 && $k->[0] eq $c_node }, 10),
		"b's node is gone; only c's node is left");
	# b was idle when terminated: its next statement finds the connection gone.
	my $rb = $sb->query('SELECT 1');
	ok($rb->{dead} || $rb->{err} =~ /terminat|connection/,
		"b's session was really terminated") or diag(explain $rb);
};

# 3. pg_terminate_backend of a waiter: its node is removed from the queue.
subtest 'pg_terminate_backend of a waiter removes its node from the queue' => sub {
	$sd = ZklockTest::Session->new($node, 'd');
	$sd->start("SELECT zk_mutex_acquire('$path')");
	ok(wait_waiting($node, $sd->pid, $path), 'd queued behind c');
	is(scalar @{ lock_children($peer, $path) }, 2, 'two nodes: holder c and waiter d');
	is($node->safe_psql('postgres', 'SELECT pg_terminate_backend(' . $sd->pid . ')'), 't',
		'terminate the waiter d');
	my $r = $sd->result;
	is($r->{sqlstate}, '57P01', 'the terminated waiter got 57P01') or diag($r->{err});
	ok(wait_until(sub { my $k = lock_children($peer, $path); @$k == 1 && $k->[0] eq $c_node }, 10),
		"terminated waiter d's node is removed; only holder c's node is left");
	ok(wait_sql($node, 'SELECT count(*) FROM zk_locks WHERE pid = ' . $sd->pid, '0', 10),
		'zk_locks has no row for the terminated waiter');

	# c still holds it: Curator cannot get it; after c releases, Curator can.
	$peer->acquire('j1', $path, 1000);
	is($peer->acquire_result('j1'), 'timeout', 'c still holds the lock (Curator times out)');
	is($sc->value("SELECT zk_mutex_release('$path')"), 't', 'c releases');
	$peer->acquire('j1', $path, 5000);
	is($peer->acquire_result('j1'), 'acquired', 'Curator acquires the freed lock');
	is($peer->release('j1'), 'released', 'Curator releases');
	ok(wait_until(sub { @{ lock_children($peer, $path) } == 0 }, 10), 'no lock node left');
};

$_->quit for ($sb, $sc, $sd);
$peer->quit;
$node->stop;
stop_zk($zk);
done_testing();

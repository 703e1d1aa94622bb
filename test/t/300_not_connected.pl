
# 300_not_connected: no ZooKeeper means a clear error, never a hang.
#
# What users rely on: when zklock cannot reach ZooKeeper, an acquire fails
# with SQLSTATE 08006 within a bounded time (its own timeout or
# zklock.connect_timeout) instead of blocking the session; and once
# ZooKeeper is back, locking works again without restarting PostgreSQL.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use ZklockTest;

# Bound on how long a failing call may take (connect_timeout is 3 s; allow
# scheduling slack, but far from "hangs").
my $bound = 10;

# Run acquires that must fail with 08006 within $bound seconds: one with a
# timeout shorter than zklock.connect_timeout (its own timeout ends it), and
# one without a timeout, which only zklock.connect_timeout (3 s) can end: its
# error says how long the connection was missing, at least 3000 ms.
sub acquire_fails_08006
{
	my ($node, $path, $what) = @_;
	my ($state, $err, $out, $el) =
	  psql_error($node, "SELECT zk_mutex_acquire('$path', '1s')", $bound + 20);
	is($state, '08006', "$what: zk_mutex_acquire with a 1 s timeout fails with SQLSTATE 08006")
	  or diag("stderr: $err stdout: $out");
	cmp_ok($el, '<', $bound, "$what: it failed after ${\ sprintf('%.1f', $el)} s, not hanging");

	($state, $err, $out, $el) = psql_error($node, "SELECT zk_mutex_acquire('$path')", $bound + 20);
	is($state, '08006', "$what: zk_mutex_acquire without a timeout fails with SQLSTATE 08006")
	  or diag("stderr: $err stdout: $out");
	cmp_ok($el, '<', $bound, "$what: it failed after ${\ sprintf('%.1f', $el)} s, not hanging");
	my ($ms) = $err =~ /did not come back within (\d+) ms/;
	cmp_ok($ms // 0, '>=', 3000, "$what: ended by zklock.connect_timeout (" . ($ms // 'no detail') . ' ms)')
	  or diag("stderr: $err");
}

my ($zk, $n2, $s, $peer);    # made in part 2, used by part 3 and the end

# 1. zklock.hosts points at a port where nothing listens.
subtest 'zklock.hosts pointing where nothing listens: a clear error, never a hang' => sub {
	my $dead_port = PostgreSQL::Test::Cluster::get_free_port();
	my $n1 = new_zklock_node('nozk', "127.0.0.1:$dead_port",
		"zklock.connect_timeout = '3s'\n", wait_connected => 0);
	isnt($n1->safe_psql('postgres', 'SELECT state FROM zk_status()'),
		'connected', 'zk_status does not claim to be connected to a dead port');
	acquire_fails_08006($n1, '/t300/x', 'nothing listening');
	my ($state) = psql_error($n1, "SELECT zk_mutex_try_acquire('/t300/x')", $bound + 20);
	is($state, '08006', 'try_acquire also fails with 08006');
	is($n1->safe_psql('postgres', 'SELECT count(*) FROM zk_locks'), '0',
		'failed requests leave nothing in zk_locks');
	$n1->stop;
};

# 2. ZooKeeper goes away under a connected cluster.
subtest 'ZooKeeper gone under a connected cluster: a clear error, never a hang' => sub {
	$zk = start_zk();
	$n2 = new_zklock_node('zkstops', $zk, "zklock.connect_timeout = '3s'\n");
	is($n2->safe_psql('postgres', "SELECT zk_mutex_acquire('/t300/warm', '5s'), zk_mutex_release('/t300/warm')"),
		't|t', 'locking works while ZooKeeper is up');

	stop_zk($zk);
	ok( wait_sql($n2, q{SELECT state <> 'connected' FROM zk_status()}, 't', 20),
		'zk_status leaves the connected state after ZooKeeper stops');
	acquire_fails_08006($n2, '/t300/x', 'ZooKeeper stopped');
};

# 3. ZooKeeper comes back on the same port: zklock reconnects by itself.
subtest 'ZooKeeper back on the same port: zklock reconnects by itself' => sub {
	restart_zk($zk);
	ok(wait_connected($n2, 40), 'zklock reconnects after ZooKeeper restarts');
	$s = ZklockTest::Session->new($n2, 'after');
	is($s->value("SELECT zk_mutex_acquire('/t300/x', '5s')"), 't',
		'acquire works again after the reconnect');
	$peer = new_peer($zk);
	$peer->acquire('j', '/t300/x', 1000);
	is($peer->acquire_result('j'), 'timeout', 'and the lock really excludes Curator')
	  or diag('the SQL lock is not visible to Curator');
	is($s->value("SELECT zk_mutex_release('/t300/x')"), 't', 'released');
};
$s->quit;
$peer->quit;

$n2->stop;
stop_zk($zk);
done_testing();

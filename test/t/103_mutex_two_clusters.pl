
# 103_mutex_two_clusters: two PostgreSQL clusters sharing one ZooKeeper.
#
# What users rely on: the lock is global, not per cluster — a session on
# cluster A and a session on cluster B exclude each other on the same path,
# a waiter on one cluster is woken by a release on the other, and different
# paths do not interfere.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use ZklockTest;

my $path = '/t103/mutex';

my $zk = start_zk();
my $na = new_zklock_node('cluster_a', $zk);
my $nb = new_zklock_node('cluster_b', $zk);
my $peer = new_peer($zk);

isnt($na->safe_psql('postgres', 'SELECT session_id FROM zk_status()'),
	$nb->safe_psql('postgres', 'SELECT session_id FROM zk_status()'),
	'each cluster has its own ZooKeeper session');

my $sa = ZklockTest::Session->new($na, 'a');
my $sb = ZklockTest::Session->new($nb, 'b');

# A holds; B cannot get it.
is($sa->value("SELECT zk_mutex_acquire('$path')"), 't', 'A acquires');
is($sb->value("SELECT zk_mutex_acquire('$path', '700ms')"), 'f',
	'B acquire with timeout returns false while A holds');
is($sb->value("SELECT zk_mutex_try_acquire('$path')"), 'f', 'B try_acquire returns false');

# Different paths do not interfere.
is($sb->value("SELECT zk_mutex_acquire('/t103/other', '5s')"), 't', 'B acquires another path at once');
is($sb->value("SELECT zk_mutex_release('/t103/other')"), 't', 'B releases it');

# B waits; each cluster's zk_locks shows only its own backends.
$sb->start("SELECT zk_mutex_acquire('$path')");
ok(wait_waiting($nb, $sb->pid, $path), 'B queued on cluster B');
is($na->safe_psql('postgres', qq{SELECT state FROM zk_locks WHERE path = '$path'}), 'held',
	"cluster A's zk_locks shows only A's holder");
is(scalar @{ lock_children($peer, $path) }, 2, 'ZooKeeper has both nodes');
is_deeply(lock_children($peer, $path),
	[ zk_lock_rows($na, $path)->{ $sa->pid }{node}, zk_lock_rows($nb, $path)->{ $sb->pid }{node} ],
	'queue order: A then B');
ok(!$sb->done, 'B blocked while A holds');

# A releases on cluster A -> B's waiter on cluster B is granted.
is($sa->value("SELECT zk_mutex_release('$path')"), 't', 'A releases');
my $r = $sb->result;
is($r->{out}, 't', 'B gets the lock released by the other cluster') or diag($r->{err});

# Now the other direction.
is($sa->value("SELECT zk_mutex_acquire('$path', '700ms')"), 'f', 'A cannot get it while B holds');
$sa->start("SELECT zk_mutex_acquire('$path')");
ok(wait_waiting($na, $sa->pid, $path), 'A queued on cluster A');
is($sb->value("SELECT zk_mutex_release('$path')"), 't', 'B releases');
$r = $sa->result;
is($r->{out}, 't', 'A gets it after B released') or diag($r->{err});

# A cluster going away entirely releases its locks for the other cluster.
$sb->start("SELECT zk_mutex_acquire('$path')");
ok(wait_waiting($nb, $sb->pid, $path), 'B queued again');
$sa->quit;
$na->stop('fast');
$r = $sb->result;
is($r->{out}, 't', "B gets the lock when cluster A shuts down") or diag($r->{err});
is($sb->value("SELECT zk_mutex_release('$path')"), 't', 'B releases');
ok(wait_until(sub { @{ lock_children($peer, $path) } == 0 }, 10), 'no lock node left');

$sb->quit;
$peer->quit;
$nb->stop;
stop_zk($zk);
done_testing();

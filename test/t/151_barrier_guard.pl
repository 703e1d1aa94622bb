
# 151_barrier_guard: barrier calls touch barriers only.
#
# What users rely on: nobody with zklock_user can take a lock from its
# holder (zklock or Curator) by calling zk_barrier_remove on the holder's
# node, nor block a lock's queue by setting a "barrier" named like a lock
# node.  Names of recipe nodes (lock, lease, read/write, protected, double
# barrier member) are refused in the backend with 22023 before anything
# reaches ZooKeeper; an ephemeral node of any name belongs to a client
# session and is refused by the worker with 42809.  Real barriers still
# come and go.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use ZklockTest;

my $zk = start_zk();
my $node = new_zklock_node('barrierguard', $zk);
my $peer = new_peer($zk);
my $s1 = ZklockTest::Session->new($node, 's1');
my $s2 = ZklockTest::Session->new($node, 's2');

# refused($sql, $state, $what): $sql fails with SQLSTATE $state
sub refused
{
	my ($sql, $state, $what) = @_;
	my $r = $s2->query($sql);
	is($r->{sqlstate}, $state, "$what: refused with $state") or diag($r->{err});
}

# A zklock holder's mutex node.
is($s1->value(q{SELECT zk_mutex_acquire('/t151/m')}), 't', 's1 holds a mutex');
my ($mnode) = @{ $peer->children('/t151/m') };
like($mnode, $CURATOR_NODE_RE, "its node $mnode");
refused("SELECT zk_barrier_remove('/t151/m/$mnode')", '22023', 'removing the SQL holder\'s lock node');
ok($peer->exists("/t151/m/$mnode"), 'the lock node is still there');
$peer->lock('mutex', 'c1', '/t151/m', 300);
is($peer->acquire_result('c1'), 'timeout', 'and Curator still cannot take the mutex');

# A Curator holder's node, and a fake lock node at the head of the queue.
$peer->lock('mutex', 'c2', '/t151/c', 5000);
is($peer->acquire_result('c2'), 'acquired', 'Curator holds a mutex');
my ($cnode) = @{ $peer->children('/t151/c') };
refused("SELECT zk_barrier_remove('/t151/c/$cnode')", '22023', 'removing the Curator holder\'s lock node');
is($s2->value(q{SELECT zk_mutex_try_acquire('/t151/c')}), 'f', 'Curator still holds it');
# A refused try returns at once and its node's delete follows (an owed
# delete, src/worker/deletes/deletes.c): wait for it, so that the count below sees
# what the refused barrier calls did and nothing else.
ok(wait_children_count($peer, '/t151/c', 1), 'the refused try leaves no node');
refused(q{SELECT zk_barrier_set('/t151/c/lock-0000000000')}, '22023', 'setting a barrier named like a lock node');
refused(q{SELECT zk_barrier_set('/t151/c/_c_53345f98-9423-4e0c-a7b5-9f819e3ec2e1-lock-0000000000')},
	'22023', 'setting a barrier named like a protected lock node');
is(scalar @{ $peer->children('/t151/c') }, 1, 'nothing was created in the lock');
is($peer->release('c2'), 'released', 'Curator releases');

# Read/write, lease and double barrier member nodes.
is($s1->value(q{SELECT zk_write_lock_acquire('/t151/rw')}), 't', 's1 holds a write lock');
my ($wnode) = @{ $peer->children('/t151/rw') };
refused("SELECT zk_barrier_remove('/t151/rw/$wnode')", '22023', 'removing a write lock node');
is($s1->value(q{SELECT array_length(zk_semaphore_acquire('/t151/sem', 2), 1)}), '1', 's1 holds a lease');
my ($lnode) = @{ $peer->children('/t151/sem/leases') };
refused("SELECT zk_barrier_remove('/t151/sem/leases/$lnode')", '22023', 'removing a lease node');
$s1->start(q{SELECT zk_double_barrier_enter('/t151/db', 2, '30s')});
ok(wait_children_count($peer, '/t151/db', 1), 's1 is a double barrier member');
my ($dnode) = @{ $peer->children('/t151/db') };
refused("SELECT zk_barrier_remove('/t151/db/$dnode')", '22023', 'removing a double barrier member node');
ok($peer->exists("/t151/db/$dnode"), 'the member node is still there');

# An ephemeral node with an ordinary name: the worker refuses it.
$peer->ephemeral('/t151/eph/plain');
refused(q{SELECT zk_barrier_remove('/t151/eph/plain')}, '42809', 'removing an ephemeral node');
ok($peer->exists('/t151/eph/plain'), 'the ephemeral node is still there');

# A node with children is not a barrier either (unchanged).
refused(q{SELECT zk_barrier_remove('/t151/m')}, '55006', 'removing a lock path that has nodes');

# Real barriers still work.
is($s2->value(q{SELECT zk_barrier_set('/t151/b/ready-to-go')}), 't', 'a barrier is set');
is($s2->value(q{SELECT zk_barrier_remove('/t151/b/ready-to-go')}), 't', 'and removed');
ok(!$peer->exists('/t151/b/ready-to-go'), 'it is gone');

# Clean up and check that everything the holders had is theirs to release.
$s2->start(q{SELECT zk_double_barrier_enter('/t151/db', 2, '30s')});
is($s1->result->{out}, 't', 's1 entered the double barrier');
is($s2->result->{out}, 't', 's2 entered the double barrier');
$s1->start(q{SELECT zk_double_barrier_leave('/t151/db', '30s')});
is($s2->value(q{SELECT zk_double_barrier_leave('/t151/db', '30s')}), 't', 's2 left');
is($s1->result->{out}, 't', 's1 left');
is($s1->value(q{SELECT zk_mutex_release('/t151/m')}), 't', 's1 releases the mutex');
is($s1->value(q{SELECT zk_write_lock_release('/t151/rw')}), 't', 's1 releases the write lock');
is($s1->value(q{SELECT zk_semaphore_release_all('/t151/sem')}), '1', 's1 returns its lease');
is($node->safe_psql('postgres', 'SELECT count(*) FROM zk_locks'), '0', 'zk_locks is empty');

$_->quit for ($s1, $s2);
$peer->quit;
$node->stop;
stop_zk($zk);
done_testing();

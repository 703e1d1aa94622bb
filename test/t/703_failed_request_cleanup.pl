
# 703_failed_request_cleanup: a request that fails deletes every node it
# created, or may have created, in every phase of every recipe.
#
# What users rely on: an acquire that ends in an error leaves no node
# behind in ZooKeeper (Curator deletes its node on any exception of its
# lock loop).  The worker's session lives on, so a node left behind would
# sit in the lock queue and block every zklock and Curator client of the
# path until the cluster restarts.
#
# The failures are real: ZooKeeper refuses a read with NoAuth.
#   A. mutex: the predecessor is a creator-only node of another identity
#      (a Curator peer or another cluster with other credentials): getData
#      on it fails, the acquire fails with 42501, and its own node goes;
#   B. read/write lock: a writer and a reader queued behind such a writer;
#   C. semaphore, first phase: a creator-only node ahead in P/locks;
#   D. semaphore, second phase: P/leases cannot be read, the listing after
#      the lease's create fails: both the lease and the P/locks node go;
#   E. double barrier: P cannot be read, the count after the member's create
#      fails: the member goes;
#   F. a create whose outcome is unknown: its reply is lost (TCP proxy), the
#      worker is restarted and takes the request over while it cannot reach
#      ZooKeeper, and the waiter gives up then: the node is found by its
#      protection prefix once ZooKeeper is back, and deleted.
# After each case the Curator peer (the independent view) sees exactly the
# other clients' nodes, and Curator gets the lock once those are gone.
# Without the fix the failed request's nodes stay (slot_fail deleted
# nothing it had made; a taken-over request's create was forgotten).
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
my $node = new_zklock_node('failed_cleanup', $proxy->connect,
	"zklock.session_timeout = '20s'\nzklock.connect_timeout = '60s'\n");
my $peer = new_peer($zk);
my $session = status_row($node)->{session_id};
my $other = 'other047:secret047';    # the identity of the other client

# createnode($path, $mode, $acl): a node made by the other client (ZkTool),
# returns its actual path.
sub createnode
{
	my ($path, $mode, $acl) = @_;
	my ($rc, $lines) = zktool('createnode', $zk, $path, $mode, $acl, $other);
	die "createnode $path: @$lines" unless $rc == 0 && $lines->[0] =~ /^created (\S+)$/;
	return $1;
}

# blocker($parent, $name): a creator-only PERSISTENT_SEQUENTIAL node of the
# other client named like a recipe node, ahead of anything created later.
my $n_blocker = 0;
sub blocker
{
	my ($parent, $name) = @_;
	my $uuid = sprintf('0b1e2c3d-4f5a-4b6c-8d7e-%012d', ++$n_blocker);
	my $full = createnode("$parent/_c_$uuid-$name", 'persistent_sequential', 'creator');
	return ($full =~ m{([^/]+)$})[0];
}

# children_are($path, $expected, $what): bounded wait until the children of
# $path (as Curator lists them; [] for no node) are @$expected.
sub children_are
{
	my ($path, $expected, $what) = @_;
	my $kids;
	my $ok = wait_until(sub { $kids = lock_children($peer, $path); "@$kids" eq "@$expected" },
		15, "$path to hold [@$expected]");
	ok($ok, $what) or diag("children of $path: [@$kids]");
}

# fails_noauth($sql, $what): $sql fails with 42501 (NoAuth from ZooKeeper).
sub fails_noauth
{
	my ($sql, $what) = @_;
	my ($state, $err) = psql_error($node, $sql);
	is($state, '42501', "$what fails with 42501") or diag($err);
	like($err, qr/not authenticated/i, '... because ZooKeeper refused the read (NoAuth)');
}

sub nothing_pending
{
	my ($what) = @_;
	ok(wait_sql($node, 'SELECT deletes_pending FROM zk_status()', '0', 10),
		"$what: zk_status().deletes_pending is 0 again");
	is($node->safe_psql('postgres', 'SELECT count(*) FROM zk_locks'), '0', "$what: zk_locks is empty");
}

############################################################################
# A. Mutex behind a creator-only predecessor.
############################################################################
{
	my $p = '/t703/mutex';
	createnode('/t703', 'persistent', 'cdrwa');
	createnode($p, 'persistent', 'cdrwa');
	my $b = blocker($p, 'lock-');
	fails_noauth("SELECT zk_mutex_acquire('$p', '10s')", 'A. a mutex acquire queued behind it');
	children_are($p, [$b], "A. $p holds only the other client's node: the request's own is gone");
	nothing_pending('A');
	my ($rc, $lines) = zktool('delete', $zk, "$p/$b", $other);
	is($lines->[0], "deleted $p/$b", 'A. the other client deletes its node');
	$peer->acquire('ca', $p, 3000);
	is($peer->acquire_result('ca'), 'acquired', 'A. Curator takes the mutex at once');
	is($peer->release('ca'), 'released', 'A. Curator releases');
}

############################################################################
# B. Read/write lock behind a creator-only writer.
############################################################################
{
	my $p = '/t703/rw';
	createnode($p, 'persistent', 'cdrwa');
	my $b = blocker($p, '__WRIT__');
	fails_noauth("SELECT zk_write_lock_acquire('$p', '10s')", 'B. a write lock acquire queued behind it');
	children_are($p, [$b], "B. $p holds only the other writer's node after the failed write");
	fails_noauth("SELECT zk_read_lock_acquire('$p', '10s')", 'B. a read lock acquire waiting for that writer');
	children_are($p, [$b], "B. $p holds only the other writer's node after the failed read");
	nothing_pending('B');
	zktool('delete', $zk, "$p/$b", $other);
	$peer->lock('write', 'cw', $p, 3000);
	is($peer->acquire_result('cw'), 'acquired', 'B. Curator takes the write lock at once');
	is($peer->release('cw', 'write'), 'released', 'B. Curator releases');
}

############################################################################
# C. Semaphore, first phase: a creator-only node ahead in P/locks.
############################################################################
{
	my $p = '/t703/sem';
	createnode($p, 'persistent', 'cdrwa');
	createnode("$p/locks", 'persistent', 'cdrwa');
	my $b = blocker("$p/locks", 'lock-');
	fails_noauth("SELECT zk_semaphore_acquire('$p', 2, 1, '10s')", 'C. a semaphore acquire queued in P/locks');
	children_are("$p/locks", [$b], "C. $p/locks holds only the other client's node");
	children_are("$p/leases", [], "C. no lease was made");
	nothing_pending('C');
	zktool('delete', $zk, "$p/locks/$b", $other);
	$peer->lease('cs', $p, 2, 1, 3000);
	my $l = $peer->lease_result('cs');
	is(ref $l, 'ARRAY', 'C. Curator gets a lease at once') or diag($l);
	is($peer->release('cs', 'lease'), 'released', 'C. Curator returns it');
}

############################################################################
# D. Semaphore, second phase: P/leases cannot be read.
############################################################################
{
	my $p = '/t703/lease';
	createnode($p, 'persistent', 'cdrwa');
	# anybody may create and delete in P/leases, and change its ACL, but
	# not list it
	createnode("$p/leases", 'persistent', 'cda');
	fails_noauth("SELECT zk_semaphore_acquire('$p', 2, 1, '10s')",
		'D. a semaphore acquire whose lease listing is refused');
	my ($rc, $lines) = zktool('setacl', $zk, "$p/leases", 'cdrwa');
	is($lines->[0], "setacl $p/leases", 'D. P/leases is made readable again (to look)');
	children_are("$p/leases", [], "D. $p/leases: the request's lease node is gone");
	children_are("$p/locks", [], "D. $p/locks: the request's P/locks node is gone");
	nothing_pending('D');
	$peer->lease('cd', $p, 2, 1, 3000);
	my $l = $peer->lease_result('cd');
	is(ref $l, 'ARRAY', 'D. Curator gets a lease at once') or diag($l);
	is($peer->release('cd', 'lease'), 'released', 'D. Curator returns it');
}

############################################################################
# E. Double barrier: P cannot be read.
############################################################################
{
	my $p = '/t703/dbarrier';
	createnode($p, 'persistent', 'cda');
	fails_noauth("SELECT zk_double_barrier_enter('$p', 2, '10s')",
		'E. a double barrier enter whose member count is refused');
	my ($rc, $lines) = zktool('setacl', $zk, $p, 'cdrwa');
	is($lines->[0], "setacl $p", 'E. P is made readable again (to look)');
	children_are($p, [], "E. $p: the request's member node is gone");
	nothing_pending('E');
}

############################################################################
# F. A create whose outcome is unknown, taken over by a restarted worker.
############################################################################
{
	my $p = '/t703/lost';
	$peer->acquire('cf', $p, -1);
	is($peer->acquire_result('cf'), 'acquired', "F. Curator holds $p");
	my ($cnode) = @{ lock_children($peer, $p) };
	# a round trip right before the fault: the client's receive timer starts afresh
	$node->safe_psql('postgres', "SELECT count(*) FROM zk_participants('$p')");

	my $w = ZklockTest::Session->new($node, 'lost');
	my ($mine, $dropped) = drop_create_reply($peer, $proxy, $w, "SELECT zk_mutex_acquire('$p')", $p, $cnode);
	ok(defined $mine, 'F. ZooKeeper made the request\'s node; its reply is being dropped');
	ok($dropped, 'F. the proxy dropped the reply');
	is(zk_lock_rows($node, $p)->{ $w->pid }{node}, '', 'F. zk_locks: the request does not know its node');

	# the new worker takes the request over; its connection gets no replies
	my ($old, $new) = restart_worker($node, 'TERM');
	like($new, qr/^\d+$/, "F. the worker ($old) was restarted as $new");
	isnt(status_row($node)->{state}, 'connected', 'F. the new worker has no connection');
	$node->safe_psql('postgres', 'SELECT pg_cancel_backend(' . $w->pid . ')');
	my $r = $w->result(15);
	is($r->{sqlstate}, '57014', 'F. the waiter gives up (cancelled)') or diag($r->{err});
	cmp_ok($node->safe_psql('postgres', 'SELECT deletes_pending FROM zk_status()'), '>=', 1,
		'F. the delete by protection prefix waits for the connection');

	$proxy->set_mode('pass');
	ok(wait_connected($node, 20), 'F. the worker reconnected');
	is(status_row($node)->{session_id}, $session, 'F. ... to the same session');
	children_are($p, [$cnode], "F. $p holds only Curator's node: the request's node was found and deleted");
	nothing_pending('F');
	is($peer->release('cf'), 'released', 'F. Curator releases');
	ok(wait_children_count($peer, $p, 0), "F. $p is empty");
	$w->quit;
}

is(status_row($node)->{session_id}, $session, 'the session of the start is still the one in use');

$peer->quit;
$node->stop;
$proxy->stop;
stop_zk($zk);
done_testing();


# 704_ghost_nodes: no node of ours that nobody knows outlives a listing.
#
# What users rely on: a lock path never stays blocked by a zklock node that
# no request knows.  zklock names its nodes with Curator's protection
# prefix _c_<uuid>-, one uuid per request.  A create whose reply never came
# (sent on a connection that dropped, or by a worker that was restarted)
# can be applied after the request found or made its node by that prefix:
# then two nodes carry the prefix, and the one the request does not know
# (a ghost) would sit in the queue for the life of the session, which is
# the life of the cluster.  So:
#   A. a listing of the lock by the worker deletes a ghost of one of its
#      live requests (here one that sorts first, ahead of the waiter that
#      lists): the waiter gets the lock, Curator gets it after zklock
#      releases, nothing is left under the path;
#   B. a request withdrawn while its create's outcome was unknown (reply
#      lost on the wire) deletes every node that carries its prefix, also
#      one that appears after the first listing of that delete by prefix:
#      the delete lists again after each delete until none is left.  The
#      server refuses the deletes for a while (the parent's ACL lacks
#      DELETE), and a second node with the prefix appears meanwhile;
#   C. a request that found its node by the prefix (its create's reply was
#      lost) may meet a late create after its last listing: its release
#      deletes everything with its prefix, so Curator gets the lock after
#      it;
#   D. a semaphore's lease listing deletes a ghost lease of a live request
#      (it would take one of the max_leases for good): the next acquirer
#      gets its lease, and Curator gets every lease afterwards.
# The ghosts are injected from outside (a Curator client creates a node
# with the request's own prefix; a late create from an older connection
# cannot be replayed at will against a real server: ZooKeeper closes a
# session's old connection when the session reconnects, and the leader
# refuses requests of a session that moved to another server).  Without the fix
# A's waiter waits behind the ghost for good, B and C leave the late node
# (C's blocks Curator), and D's acquirer waits for good.
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
my $node = new_zklock_node('ghost_nodes', $proxy->connect,
	"zklock.session_timeout = '20s'\nzklock.connect_timeout = '60s'\n");
my $peer = new_peer($zk);
my $session = status_row($node)->{session_id};

# children_are($path, $expected, $what, $timeout): bounded wait until the
# children of $path (queue order, as Curator lists them) are @$expected.
sub children_are
{
	my ($path, $expected, $what, $timeout) = @_;
	my $kids;
	my $ok = wait_until(sub { $kids = lock_children($peer, $path); "@$kids" eq "@$expected" },
		$timeout // 15, "$path to hold [@$expected]");
	ok($ok, $what) or diag("children of $path: [@$kids]");
	return $ok;
}

# gone($path, $what): bounded wait until ZooKeeper has no node $path.
sub gone
{
	my ($path, $what) = @_;
	ok(wait_until(sub { !$peer->exists($path) }, 15, "$path to go"), $what);
}

sub nothing_pending
{
	my ($what) = @_;
	ok(wait_sql($node, 'SELECT deletes_pending FROM zk_status()', '0', 15),
		"$what: zk_status().deletes_pending is 0 again");
	is($node->safe_psql('postgres', 'SELECT count(*) FROM zk_locks'), '0', "$what: zk_locks is empty");
}

# prefix_of($name): "_c_<uuid>-" of a protected node name.
sub prefix_of { return substr($_[0] // '', 0, 40); }

############################################################################
# A. A ghost that sorts first, found by the listing of a waiter.
############################################################################
{
	my $p = '/t704/a';
	# sequence 0 goes to a lock Curator takes and gives back at once
	$peer->acquire('c0', $p, -1);
	is($peer->acquire_result('c0'), 'acquired', 'A. Curator takes the lock once');
	is($peer->release('c0'), 'released', 'A. ... and gives it back');
	$peer->acquire('ca', $p, -1);
	is($peer->acquire_result('ca'), 'acquired', "A. Curator holds $p");
	my ($cnode) = @{ lock_children($peer, $p) };

	my $w = ZklockTest::Session->new($node, 'wa');
	$w->start("SELECT zk_mutex_acquire('$p', '30s')");
	ok(wait_waiting($node, $w->pid, $p, 10), 'A. the SQL waiter queues behind Curator');
	my $mine = zk_lock_rows($node, $p)->{ $w->pid }{node};
	like($mine, $CURATOR_NODE_RE, "A. the waiter's node $mine");
	is(seq_of($mine), '0000000002', 'A. it has sequence 2');

	# the ghost: the waiter's own prefix, sequence 0 (ahead of everybody)
	my $ghost = prefix_of($mine) . 'lock-0000000000';
	$peer->ephemeral("$p/$ghost");
	is_deeply(lock_children($peer, $p), [ $ghost, $cnode, $mine ],
		'A. the ghost sorts first, then Curator, then the waiter');

	my $log_at = length(log_contents($node));
	# Curator lets go: the waiter's watch fires and it lists the lock
	is($peer->release('ca'), 'released', 'A. Curator releases');
	gone("$p/$ghost", 'A. the listing deleted the ghost');
	my $r = $w->result(15);
	is($r->{out}, 't', 'A. the SQL waiter gets the lock') or diag($r->{err});
	like(substr(log_contents($node), $log_at), qr/deleting zookeeper node "\Q$p\/$ghost\E"/,
		'A. the server log names the ghost it deleted');
	if (($r->{out} // '') eq 't')
	{
		is_deeply(lock_children($peer, $p), [$mine], "A. $p holds only the holder's node");
		$peer->acquire('ca_excluded', $p, 500);
		is($peer->acquire_result('ca_excluded', 10), 'timeout', 'A. Curator is excluded while SQL holds');
		is($w->value("SELECT zk_mutex_release('$p')"), 't', 'A. SQL releases');
	}
	elsif (!$r->{done})
	{
		$node->safe_psql('postgres', 'SELECT pg_cancel_backend(' . $w->pid . ')');
		$w->result(15);
	}
	$peer->acquire('ca_after', $p, 5000);
	is($peer->acquire_result('ca_after', 10), 'acquired', 'A. Curator gets the lock after zklock let go');
	is($peer->release('ca_after'), 'released', 'A. Curator releases');
	children_are($p, [], "A. nothing is left under $p");
	nothing_pending('A');
	$w->quit;
}

############################################################################
# B. A delete by prefix meets a node that appears after its first listing.
############################################################################
{
	my $p = '/t704/b';
	$peer->acquire('cb', $p, -1);
	is($peer->acquire_result('cb'), 'acquired', "B. Curator holds $p");
	my ($cnode) = @{ lock_children($peer, $p) };
	# a round trip right before the fault: the client's receive timer starts afresh
	$node->safe_psql('postgres', "SELECT count(*) FROM zk_participants('$p')");

	my $w = ZklockTest::Session->new($node, 'wb');
	my ($mine, $dropped) = drop_create_reply($peer, $proxy, $w, "SELECT zk_mutex_acquire('$p')", $p, $cnode);
	ok(defined $mine, "B. ZooKeeper made the request's node $mine; its reply is being dropped");
	ok($dropped, 'B. the proxy dropped the reply');
	is(zk_lock_rows($node, $p)->{ $w->pid }{node}, '', 'B. zk_locks: the request does not know its node');
	my $prefix = prefix_of($mine);

	# the waiter gives up while the create's outcome is unknown: the worker
	# can only delete by the prefix
	$node->safe_psql('postgres', 'SELECT pg_cancel_backend(' . $w->pid . ')');
	my $r = $w->result(15);
	is($r->{sqlstate}, '57014', 'B. the waiter gives up (cancelled)') or diag($r->{err});
	ok(wait_sql($node, "SELECT count(*) FROM zk_locks WHERE path = '$p'", '0', 10),
		'B. the request was withdrawn');

	# a first node with the prefix besides the request's own, and the
	# server refuses deletes under P until told otherwise
	my $g1 = $prefix . 'lock-0000000000';
	$peer->ephemeral("$p/$g1");
	my ($rc, $lines) = zktool('setacl', $zk, $p, 'crwa');
	is($lines->[0], "setacl $p", 'B. the ACL of P no longer allows deletes');
	my $log_at = length(log_contents($node));
	$proxy->set_mode('pass');
	ok(wait_connected($node, 30), 'B. the worker reconnected');
	is(status_row($node)->{session_id}, $session, 'B. ... to the same session');
	ok( wait_until(sub { substr(log_contents($node), $log_at) =~ /could not delete/ },
			15, 'a refused delete'),
		'B. the worker found a node by the prefix and the server refused its delete');

	# a second node with the prefix, after that listing
	my $g2 = $prefix . 'lock-0000000009';
	$peer->ephemeral("$p/$g2");
	($rc, $lines) = zktool('setacl', $zk, $p, 'cdrwa');
	is($lines->[0], "setacl $p", 'B. deletes are allowed again');
	gone("$p/$mine", "B. the request's own node is deleted");
	gone("$p/$g1", 'B. the other node that carried the prefix at the first listing is deleted');
	gone("$p/$g2", 'B. the node that appeared after the first listing is deleted');
	children_are($p, [$cnode], "B. $p holds only Curator's node");
	nothing_pending('B');
	is($peer->release('cb'), 'released', 'B. Curator releases');
	children_are($p, [], "B. nothing is left under $p");
	$w->quit;
}

############################################################################
# C. A ghost that appears after the last listing of a recovered holder.
############################################################################
{
	my $p = '/t704/c';
	$peer->acquire('cc', $p, -1);
	is($peer->acquire_result('cc'), 'acquired', "C. Curator holds $p");
	my ($cnode) = @{ lock_children($peer, $p) };
	$node->safe_psql('postgres', "SELECT count(*) FROM zk_participants('$p')");

	my $w = ZklockTest::Session->new($node, 'wc');
	my ($mine, $dropped) = drop_create_reply($peer, $proxy, $w, "SELECT zk_mutex_acquire('$p')", $p, $cnode);
	ok(defined $mine, "C. ZooKeeper made the request's node $mine; its reply is being dropped");
	$proxy->set_mode('cut');
	$proxy->set_mode('pass');
	ok(wait_connected($node, 30), 'C. the worker reconnected');
	ok(wait_waiting($node, $w->pid, $p, 10), 'C. the request waits with a node again');
	is(zk_lock_rows($node, $p)->{ $w->pid }{node}, $mine, 'C. it found its node by the prefix');
	is($peer->release('cc'), 'released', 'C. Curator releases');
	my $r = $w->result(15);
	is($r->{out}, 't', 'C. the SQL waiter gets the lock') or diag($r->{err});

	# a create with the holder's prefix lands now, after its last listing:
	# it takes the next sequence, so it sorts ahead of anybody who queues
	# after the holder is gone
	is(seq_of($mine), '0000000001', 'C. the holder has sequence 1');
	my $ghost = prefix_of($mine) . 'lock-0000000002';
	$peer->ephemeral("$p/$ghost");
	is_deeply(lock_children($peer, $p), [ $mine, $ghost ], 'C. the ghost sorts behind the holder');
	is($w->value("SELECT zk_mutex_release('$p')"), 't', 'C. SQL releases');
	gone("$p/$ghost", 'C. the release deleted the ghost too');
	$peer->acquire('cc_after', $p, 5000);
	is($peer->acquire_result('cc_after', 10), 'acquired', 'C. Curator gets the lock after zklock let go');
	is($peer->release('cc_after'), 'released', 'C. Curator releases');
	children_are($p, [], "C. nothing is left under $p");
	nothing_pending('C');
	$w->quit;
}

############################################################################
# D. A ghost lease of a live request, found by the next acquirer's listing.
############################################################################
{
	my $p = '/t704/d';
	my $h = ZklockTest::Session->new($node, 'hd');
	is($h->value("SELECT zk_semaphore_acquire('$p', 2) IS NOT NULL"), 't', 'D. SQL holds one of 2 leases');
	my $kids = $peer->children("$p/leases") // [];
	is(scalar(@$kids), 1, 'D. one lease node');
	my $lease = $kids->[0] // '';
	like($lease, qr/^_c_[0-9a-f-]{36}-lease-\d{10}$/, "D. the holder's lease $lease");
	my $ghost = prefix_of($lease) . 'lease-0000000099';
	$peer->ephemeral("$p/leases/$ghost");
	ok($peer->exists("$p/leases/$ghost"), 'D. a ghost lease with the holder\'s prefix takes the second lease');

	my $w = ZklockTest::Session->new($node, 'wd');
	$w->start("SELECT zk_semaphore_acquire('$p', 2, 1, '10s') IS NOT NULL");
	my $r = $w->result(15);
	is($r->{out}, 't', 'D. the next SQL acquirer gets the second lease') or diag($r->{err});
	gone("$p/leases/$ghost", 'D. its listing deleted the ghost lease');
	is($w->value("SELECT zk_semaphore_release_all('$p')"), '1', 'D. it gives its lease back') if $r->{out} eq 't';
	is($h->value("SELECT zk_semaphore_release_all('$p')"), '1', 'D. the holder gives its lease back');
	$peer->lease('cl', $p, 2, 2, 5000);
	my $l = $peer->lease_result('cl');
	is(ref $l eq 'ARRAY' ? scalar(@$l) : $l, 2, 'D. Curator gets both leases');
	is($peer->release('cl', 'lease'), 'released', 'D. Curator returns them');
	children_are("$p/leases", [], "D. nothing is left under $p/leases");
	children_are("$p/locks", [], "D. nothing is left under $p/locks");
	nothing_pending('D');
	$h->quit;
	$w->quit;
}

is(status_row($node)->{session_id}, $session, 'the session of the start is still the one in use');

$peer->quit;
$node->stop;
$proxy->stop;
stop_zk($zk);
done_testing();

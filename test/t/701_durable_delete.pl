
# 701_durable_delete: a node zklock has to delete is deleted even when the
# worker that was to do it dies first.
#
# What users rely on: a released lock, or a wait that gave up, leaves no
# node behind in ZooKeeper.  The zklock worker resumes its ZooKeeper
# session when it is restarted (SIGTERM, or pg_cancel_backend on it), so a
# node it forgets to delete is in practice permanent: it sits first in the
# lock queue and blocks every zklock and Curator client of that path until
# the cluster restarts.  So what must be deleted is recorded in shared
# memory (zk_status().deletes_pending counts it) before the request is
# freed, and the next worker finishes it.
#
# Cases (the worker reaches ZooKeeper through a TCP proxy; the Curator peer
# talks to ZooKeeper directly and is the independent view of the queue):
#   1. the connection is a black hole, a holder releases, the worker is
#      restarted with SIGTERM, the path heals: the node goes, in the same
#      session, and Curator gets the lock;
#   2. the same with pg_cancel_backend(worker pid);
#   3. a wait that times out (withdrawn) under the same fault;
#   4. a semaphore acquire in its P/locks phase whose create reply was lost
#      is taken over by a restarted worker: it finds its P/locks node by its
#      protection prefix instead of creating a second one (the first would
#      be an orphan ahead of it that blocks the semaphore for everybody),
#      and gets its lease once Curator lets go of P/locks.
# Without the shared table the node of cases 1-3 stays (the worker's
# process memory held the only record of it); without the fix of the
# takeover, case 4 has two P/locks nodes of the request and never gets
# its lease.
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
# session timeout 20 s: every fault below lasts a few seconds, so the
# session survives it (the point is that nothing but the worker's restart
# is lost); connect_timeout 60 s: no wait fails because ZooKeeper is away.
my $node = new_zklock_node('durable_delete', $proxy->connect,
	"zklock.session_timeout = '20s'\nzklock.connect_timeout = '60s'\n");
my $peer = new_peer($zk);
my $session = status_row($node)->{session_id};
like($session, qr/^0x[0-9a-f]{16}$/, "worker connected through the proxy, session $session");
is(deletes_pending($node), '0', 'zk_status().deletes_pending is 0 at rest');

# heal_and_check($what, $path, $expected): let the proxy pass again and
# wait (bounded) until $path's children are @$expected, in the same
# session, with nothing left to delete.
sub heal_and_check
{
	my ($what, $path, $expected) = @_;
	$proxy->set_mode('pass');
	ok(wait_connected($node, 20), "$what: the worker reconnected");
	is(status_row($node)->{session_id}, $session, "$what: ... to the same session (nothing expired)");
	my $kids;
	ok( wait_until(
			sub { $kids = lock_children($peer, $path); "@$kids" eq "@$expected" }, 15,
			"$path to hold [@$expected]"),
		"$what: $path holds exactly [@$expected]")
	  or diag("children of $path: [@$kids]");
	ok(wait_sql($node, 'SELECT deletes_pending FROM zk_status()', '0', 10),
		"$what: deletes_pending is back to 0");
	is(status_row($node)->{session_id}, $session, "$what: still the same session");
}

############################################################################
# 1 and 2. Release into a black hole, restart the worker, heal.
############################################################################
subtest 'a release into a black hole is deleted in the same session after a worker restart (SIGTERM, pg_cancel_backend) and the heal' => sub {
	my $n_case = 0;
	for my $how ('TERM', 'cancel')
	{
		my $what = $how eq 'TERM' ? 'SIGTERM' : 'pg_cancel_backend';
		my $p = '/t701/release_' . lc $how;
		my $s = ZklockTest::Session->new($node, "holder_$how");
		is($s->value("SELECT zk_mutex_acquire('$p')"), 't', "$what: holder takes $p");
		my $held = zk_lock_rows($node, $p)->{ $s->pid }{node};
		is_deeply(lock_children($peer, $p), [$held], "$what: its node $held is in ZooKeeper");

		$proxy->set_mode('blackhole');
		is($s->value("SELECT zk_mutex_release('$p')"), 't', "$what: the holder releases into the black hole");
		cmp_ok(deletes_pending($node), '>=', 1, "$what: zk_status().deletes_pending counts the delete");
		my ($old, $new) = restart_worker($node, $how);
		like($new, qr/^\d+$/, "$what: the worker ($old) was restarted as $new");
		cmp_ok(deletes_pending($node), '>=', 1, "$what: the delete is still pending after the restart");
		is_deeply(lock_children($peer, $p), [$held], "$what: the node is still there during the fault");

		heal_and_check($what, $p, []);
		$peer->acquire("c$how", $p, 5000);
		is($peer->acquire_result("c$how"), 'acquired', "$what: Curator takes $p at once");
		is($peer->release("c$how"), 'released', "$what: Curator releases");
		$s->quit;
	}
};

############################################################################
# 3. A wait that times out under the same fault.
############################################################################
subtest 'a wait that times out into a black hole has its node deleted after the heal' => sub {
	{
		my $p = '/t701/withdrawn';
		$peer->acquire('cw', $p, -1);
		is($peer->acquire_result('cw'), 'acquired', "Curator holds $p");
		my ($cnode) = @{ lock_children($peer, $p) };
		my $w = ZklockTest::Session->new($node, 'waiter');
		$w->start("SELECT zk_mutex_acquire('$p', '3s')");
		ok(wait_waiting($node, $w->pid, $p), 'the SQL waiter queued behind Curator');
		my $wnode = zk_lock_rows($node, $p)->{ $w->pid }{node};
		is_deeply(lock_children($peer, $p), [ $cnode, $wnode ], "the queue is Curator's node, then $wnode");

		$proxy->set_mode('blackhole');
		my $r = $w->result(20);
		is($r->{out}, 'f', 'the wait times out during the black hole') or diag($r->{err});
		cmp_ok(deletes_pending($node), '>=', 1, 'the withdrawn node waits to be deleted');
		my ($old, $new) = restart_worker($node, 'TERM');
		like($new, qr/^\d+$/, "the worker ($old) was restarted as $new");
		cmp_ok(deletes_pending($node), '>=', 1, 'the delete is still pending after the restart');

		heal_and_check('withdrawn wait', $p, [$cnode]);
		is($peer->release('cw'), 'released', 'Curator releases');
		ok(wait_children_count($peer, $p, 0), "$p is empty");
		$w->quit;
	}
};

############################################################################
# 4. A semaphore acquire taken over in its P/locks phase.
############################################################################
subtest 'a semaphore acquire taken over in its P/locks phase finds its node instead of making a second one' => sub {
	{
		my $p = '/t701/sem';
		my $locks = "$p/locks";
		# Curator holds the semaphore's internal mutex: the SQL acquire queues
		# in P/locks (an InterProcessMutex on P/locks is exactly that mutex).
		$peer->acquire('cl', $locks, -1);
		is($peer->acquire_result('cl'), 'acquired', "Curator holds $locks");
		my ($cnode) = @{ lock_children($peer, $locks) };
		# a round trip right before the fault: the client's receive timer starts afresh
		$node->safe_psql('postgres', "SELECT count(*) FROM zk_participants('$p')");

		my $s = ZklockTest::Session->new($node, 'sem');
		my ($mine, $dropped) = drop_create_reply($peer, $proxy, $s, "SELECT zk_semaphore_acquire('$p', 1)", $locks, $cnode);
		ok(defined $mine, "ZooKeeper made the request's P/locks node (" . ($mine // 'none') . "); its reply is being dropped");
		ok($dropped, 'the proxy dropped the reply');
		my $prefix = substr($mine // '', 0, 40);

		my ($old, $new) = restart_worker($node, 'TERM');
		like($new, qr/^\d+$/, "the worker ($old) was restarted as $new and took the request over");
		$proxy->set_mode('pass');
		ok(wait_connected($node, 20), 'the new worker connected');
		is(status_row($node)->{session_id}, $session, '... to the same session');

		# The taken-over request looks for its node by prefix and adopts it.
		# Two round trips through the worker: the second is sent after all that
		# the resumed request sent on reconnecting, so when it is answered the
		# server has applied that (a second create, if there was one).
		$node->safe_psql('postgres', "SELECT count(*) FROM zk_participants('$locks')");
		is($node->safe_psql('postgres', "SELECT count(*) FROM zk_participants('$locks')"), '2',
			"zk_participants('$locks'): two nodes after the recovery");
		my $kids = lock_children($peer, $locks);
		is_deeply($kids, [ $cnode, $mine ], "$locks: Curator's node and the request's one, no second one")
		  or diag("children of $locks: [@$kids]");
		is(scalar(grep { index($_, $prefix) == 0 } @$kids), 1, 'exactly one node carries the request\'s prefix');
		ok(!$s->done, 'the SQL acquire still waits for P/locks');

		is($peer->release('cl'), 'released', "Curator releases $locks");
		my $r = $s->result(15);
		like($r->{out}, qr/^\{_c_[0-9a-f-]{36}-lease-\d{10}\}$/, "the SQL acquire gets its lease $r->{out}")
		  or diag($r->{err});
		ok(wait_children_count($peer, $locks, 0), "$locks is empty once the lease is granted");
		is(scalar @{ lock_children($peer, "$p/leases") }, 1, "$p/leases holds the one lease");
		is($s->value("SELECT zk_semaphore_release_all('$p')"), '1', 'the lease is returned');
		ok(wait_children_count($peer, "$p/leases", 0), "$p/leases is empty");
		ok(wait_sql($node, 'SELECT deletes_pending FROM zk_status()', '0', 10), 'deletes_pending is 0');
		$s->quit;
	}
};

subtest 'nothing is left and the session of the start is still in use' => sub {
	is($node->safe_psql('postgres', 'SELECT count(*) FROM zk_locks'), '0', 'zk_locks is empty');
	is(status_row($node)->{session_id}, $session, 'the session of the start is still the one in use');
};

$peer->quit;
$node->stop;
$proxy->stop;
stop_zk($zk);
done_testing();

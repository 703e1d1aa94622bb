
# 700_lost_reply: the reply to a lock node's create is lost on the wire.
#
# What users rely on (Curator's protected mode, CURATOR-498): when the
# connection drops after ZooKeeper made the lock node but before its reply
# reached zklock,
#   A. if the session survives, the worker finds its node again by its
#      _c_<uuid>- prefix and keeps that queue position: no second node for
#      the same request (which would deadlock it behind itself), the waiter
#      keeps its turn and gets the lock when the holder releases it, and
#      nothing is left behind;
#   B. if the session expired meanwhile, the node died with it and nothing
#      may be adopted or recreated in its place: the waiting call fails
#      with 08006 (the session's lease ran out, before the server expired
#      the session), the new session leaves the queue
#      holding only the other client's node, and later acquires work.
# The faults are made by a TCP proxy (test/perl/ZklockProxy.pm) between the
# cluster's zklock worker and a real ZooKeeper; the Curator peer talks to
# ZooKeeper directly and is the independent view of the lock queue.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use ZklockTest;
use ZklockFault;
use ZklockProxy;

my $zk = start_zk();
my $proxy = ZklockProxy->start($zk);
# connect_timeout well above what the faults last, so that a waiting call
# can only fail because of the session (not "zookeeper is not reachable").
my $node = new_zklock_node('lost_reply', $proxy->connect,
	"zklock.session_timeout = '6s'\nzklock.connect_timeout = '50s'\n");
my $peer = new_peer($zk);

my $st0 = status_row($node);
my $s0 = $st0->{session_id};
like($s0, qr/^0x[0-9a-f]{16}$/, "worker connected through the proxy, session $s0");
is($st0->{server}, $proxy->connect, 'zk_status names the proxy as the server')
  if defined $st0->{server} && $st0->{server} ne '';
cmp_ok($st0->{session_timeout}, '<=', 6000, "negotiated session timeout $st0->{session_timeout} ms");

# other_nodes($path, $curator_node): the children of $path other than
# Curator's node, in queue order.
sub other_nodes
{
	my ($path, $mine) = @_;
	return [ grep { $_ ne $mine } @{ lock_children($peer, $path) } ];
}

# A round trip through the worker right before a fault, so that the ZooKeeper
# client's receive timer (2/3 of the session timeout) starts afresh and the
# fault windows below (well under a second) cannot meet its own timeout.
sub fresh_round_trip
{
	my ($path) = @_;
	return $node->safe_psql('postgres', "SELECT count(*) FROM zk_participants('$path')");
}

# Lose the reply to $session's create on $path (Curator holds it): returns
# the name of the node ZooKeeper made for the SQL request, or undef.
sub lose_create_reply
{
	my ($session, $path, $curator_node) = @_;
	is(fresh_round_trip($path), '1', "$path: Curator's node is the only participant");
	my $before = $proxy->set_mode('drop_replies');
	$session->start("SELECT zk_mutex_acquire('$path')");
	my $sql_node;
	ok( wait_until(
			sub {
				my $o = other_nodes($path, $curator_node);
				$sql_node = $o->[0] if @$o == 1;
				return @$o == 1;
			},
			3, "the SQL node under $path"),
		"$path: ZooKeeper made the SQL request's node (2 children)");
	# the node is seen through another connection: the reply to ours may
	# reach the proxy a moment later
	my $after;
	wait_until(sub { $after = $proxy->stats; $after->{dropped_s2c} > $before->{dropped_s2c} },
		3, 'the reply at the proxy');
	cmp_ok($after->{dropped_s2c}, '>', $before->{dropped_s2c},
		'the proxy dropped the server\'s reply bytes');
	is($after->{accepted}, $before->{accepted},
		'on the original connection (the worker did not reconnect meanwhile)');
	my $row = zk_lock_rows($node, $path)->{ $session->pid };
	is($row->{state}, 'waiting', 'zk_locks: the request is waiting');
	is($row->{node}, '', 'zk_locks: no node name yet (the create reply never arrived)');
	ok(!$session->done, 'the SQL call is still waiting');
	return $sql_node;
}

############################################################################
# A. Lost create reply, the session survives: the node is adopted.
############################################################################

my $pa = '/t700/a';
$peer->acquire('ca', $pa, -1);
is($peer->acquire_result('ca'), 'acquired', "Curator holds $pa");
my ($cnode_a) = @{ lock_children($peer, $pa) };
like($cnode_a, $CURATOR_NODE_RE, "Curator's node $cnode_a");

my $wa = ZklockTest::Session->new($node, 'wa');
my $sql_a = lose_create_reply($wa, $pa, $cnode_a);
like($sql_a // '', $CURATOR_NODE_RE, "the SQL request's node $sql_a has Curator's protected name");
my $prefix_a = substr($sql_a // '', 0, 40);    # "_c_" + uuid + "-"

my $st_cut = $proxy->set_mode('cut');
is($st_cut->{conns}, '0', 'proxy cut every connection');
$proxy->set_mode('pass');
ok(wait_connected($node, 10), 'the worker reconnected');
my $st1 = status_row($node);
is($st1->{session_id}, $s0, 'the same session was resumed (did not expire)');
cmp_ok($st1->{suspended_count}, '>', $st0->{suspended_count} // 0,
	'zk_status counted the connection loss');

ok(wait_waiting($node, $wa->pid, $pa, 10), 'zk_locks: the request waits with a node again');
is(zk_lock_rows($node, $pa)->{ $wa->pid }{node}, $sql_a,
	'zk_locks: the waiter adopted the node made before the connection loss');
my $kids = lock_children($peer, $pa);
is_deeply($kids, [ $cnode_a, $sql_a ],
	"$pa: exactly Curator's node and the adopted SQL node (no duplicate)")
  or diag("children of $pa: @$kids");
is(scalar(grep { index($_, $prefix_a) == 0 } @$kids), 1,
	'exactly one node carries the request\'s protected prefix');
ok(!$wa->done, 'the SQL call still waits while Curator holds');

is($peer->release('ca'), 'released', 'Curator releases');
my $r = $wa->result(15);
is($r->{out}, 't', 'the SQL waiter gets the lock on its adopted node') or diag($r->{err});
ok(wait_held($node, $wa->pid, $pa, 10), 'zk_locks: held');
is_deeply(lock_children($peer, $pa), [$sql_a], "$pa: the adopted node is the holder's node");
# the adopted node's fencing token is its creation zxid, as for any holder
my $stat_a = zk_stat($zk, "$pa/$sql_a");
is($wa->value("SELECT zk_lock_token('$pa')"), $stat_a ? $stat_a->{czxid} : 'no stat',
	'zk_lock_token of the adopted lock is its node\'s czxid');
$peer->acquire('ca2', $pa, 500);
is($peer->acquire_result('ca2'), 'timeout', 'Curator is excluded while SQL holds');
is($wa->value("SELECT zk_mutex_release('$pa')"), 't', 'SQL releases');
ok(wait_children_count($peer, $pa, 0), "$pa: no node left behind");
is($node->safe_psql('postgres', "SELECT count(*) FROM zk_locks WHERE path = '$pa'"), '0',
	"zk_locks: no row left for $pa");
is(status_row($node)->{session_id}, $s0, 'still the first session');

############################################################################
# B. Lost create reply, then the session expires: nothing is adopted.
############################################################################

my $pb = '/t700/b';
$peer->acquire('cb', $pb, -1);
is($peer->acquire_result('cb'), 'acquired', "Curator holds $pb");
my ($cnode_b) = @{ lock_children($peer, $pb) };

my $wb = ZklockTest::Session->new($node, 'wb');
my $sql_b = lose_create_reply($wb, $pb, $cnode_b);
my $prefix_b = substr($sql_b // '', 0, 40);
my $st_bh = status_row($node);

$proxy->set_mode('blackhole');
my $t_bh = time;
# The worker hears nothing from the server any more: once the session's
# lease runs out (session timeout minus zklock.lease_margin after the last
# answered heartbeat) it treats the session as expired and fails the wait,
# while ZooKeeper is still unreachable.
$r = $wb->result(20);
ok($r->{done}, 'the waiting SQL call ends while ZooKeeper is still unreachable');
note(sprintf('the wait failed %.1f s after the blackhole started', time - $t_bh));
is($r->{sqlstate}, '08006', 'the waiting SQL call fails with SQLSTATE 08006')
  or diag("waiter: done=$r->{done} out=[$r->{out}] err=[$r->{err}]");
like($r->{err}, qr/lease ran out/, 'because the session lease ran out')
  or diag("waiter err: $r->{err}");
isnt($r->{out}, 't', 'it is not granted');
ok( wait_until(sub { !grep { $_ eq ($sql_b // '') } @{ lock_children($peer, $pb) } },
		20, 'the server to expire the session'),
	'the server expired the session: the SQL node is gone from ZooKeeper');
note(sprintf('session expired %.1f s after the blackhole started', time - $t_bh));
my $st_pass = $proxy->set_mode('pass');

ok( wait_until(
		sub {
			my $st = status_row($node);
			$st->{state} eq 'connected' && $st->{session_id} ne $s0;
		},
		20, 'a new session'),
	'the worker opened a new session');
my $st2 = status_row($node);
isnt($st2->{session_id}, $s0, "new session id $st2->{session_id}");
cmp_ok($st2->{expired_count}, '>', $st_bh->{expired_count} // 0, 'zk_status counted the expiry');

# The new session must not put the old request's node back: a round trip
# through the worker on $pb (which it serves in order after its recovery),
# then ZooKeeper must hold Curator's node only.
is($wb->value("SELECT zk_mutex_try_acquire('$pb')"), 'f',
	"a try_acquire on the new session does not get $pb (Curator holds it)");
ok(wait_until(sub { my $k = lock_children($peer, $pb); @$k == 1 && $k->[0] eq $cnode_b }, 10,
		"only Curator's node under $pb"),
	"$pb: exactly Curator's node")
  or diag("children of $pb: @{ lock_children($peer, $pb) }");
$kids = lock_children($peer, $pb);
is(scalar(grep { index($_, $prefix_b) == 0 } @$kids), 0,
	'no node carries the expired request\'s prefix (nothing adopted or recreated)');
is($node->safe_psql('postgres', "SELECT count(*) FROM zk_locks WHERE path = '$pb'"), '0',
	"zk_locks: no row for $pb");

is($peer->release('cb'), 'released', 'Curator releases');
ok(wait_children_count($peer, $pb, 0), "$pb is empty");
is($wb->value("SELECT zk_mutex_acquire('$pb', '5s')"), 't', 'a new SQL acquire gets the lock');
my $new_b = zk_lock_rows($node, $pb)->{ $wb->pid }{node};
is_deeply(lock_children($peer, $pb), [$new_b], "$pb: exactly the new holder's node");
isnt(substr($new_b // '', 0, 40), $prefix_b, 'with a fresh protected prefix');
$peer->acquire('cb2', $pb, 500);
is($peer->acquire_result('cb2'), 'timeout', 'Curator is excluded');
is($wb->value("SELECT zk_mutex_release('$pb')"), 't', 'SQL releases');
ok(wait_children_count($peer, $pb, 0), "$pb: nothing left behind");
is($node->safe_psql('postgres', 'SELECT count(*) FROM zk_locks'), '0', 'zk_locks is empty');
is(status_row($node)->{session_id}, $st2->{session_id}, 'still on the new session');

$_->quit for ($wa, $wb);
$peer->quit;
$node->stop;
$proxy->stop;
stop_zk($zk);
done_testing();

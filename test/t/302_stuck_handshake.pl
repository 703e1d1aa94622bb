
# 302_stuck_handshake: a connection attempt that is never answered does not
# cost the session.
#
# What users rely on: after a short outage (less than the session timeout)
# the same ZooKeeper session is resumed and held locks stay held, even when
# one of the worker's reconnection attempts reaches a server that takes the
# connection and never answers the handshake (a starting or stopping server
# may do that).  The ZooKeeper C client alone waits two thirds of the
# session timeout for that answer, by which time the lease has run out and
# the locks are given up although the servers were back.
#
# Fault: the worker's connection goes through a proxy.  The proxy cuts it
# and refuses new connections for 2.5 s, then takes the next connection and
# never relays it (stall_new), then passes new connections again.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use ZklockTest;
use ZklockFault;
use ZklockProxy;

my $zk = start_zk();
my $peer = new_peer($zk);
my $proxy = ZklockProxy->start($zk);
my $node = new_zklock_node('stuck', $proxy->connect,
	"zklock.session_timeout = '10s'\nzklock.connect_timeout = '30s'\nlog_min_messages = debug1\n");

my $s = ZklockTest::Session->new($node, 's');
is($s->value(q{SELECT zk_mutex_acquire('/t302/a')}), 't', 's holds /t302/a');
my $session = status_row($node)->{session_id};
my $hnode = zk_lock_rows($node, '/t302/a')->{ $s->pid }{node};

$proxy->set_mode('cut');
ok(wait_sql($node, 'SELECT state FROM zk_status()', 'suspended', 10), 'the connection is lost');
hold_for(2.5, 'new connections refused');
$proxy->set_mode('stall_new');
ok(wait_until(sub { $proxy->stats->{stalled} >= 1 }, 10, 'an attempt to be stalled'),
	'a reconnection attempt reaches a server that never answers');
$proxy->set_mode('pass');
ok(wait_sql($node, 'SELECT state FROM zk_status()', 'connected', 20), 'the worker connects again');
like(slurp_file($node->logfile), qr/no answer to a connection attempt within \d+ ms: trying again/,
	'the worker gave up the unanswered attempt');
is(status_row($node)->{session_id}, $session, 'the same session was resumed');
is(status_row($node)->{locks_lost}, 0, 'no lock was lost');
is(zk_lock_rows($node, '/t302/a')->{ $s->pid }{state}, 'held', 's still holds /t302/a');
is_deeply(lock_children($peer, '/t302/a'), [$hnode], "... with its node, the only one");
$peer->acquire('c', '/t302/a', 500);
is($peer->acquire_result('c'), 'timeout', 'Curator is still excluded');
is($s->value(q{SELECT zk_mutex_release('/t302/a')}), 't', 's releases');
ok(wait_children_count($peer, '/t302/a', 0), 'nothing left under /t302/a');

$s->quit;
$peer->quit;
$node->stop;
$proxy->stop;
stop_zk($zk);
done_testing();


# 301_zk_outage: ZooKeeper down for less than the session timeout.
#
# What users rely on: a short ZooKeeper outage (here ~3 s, session timeout
# 10 s) is Curator's SUSPENDED state, not a lost lock. zk_status says
# 'suspended' while it lasts; afterwards the same session is resumed, the
# holder still holds (another client cannot take the lock, no second holder
# appears), and a waiter that was queued with no timeout keeps its place and
# gets the lock when the holder releases it.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use ZklockTest;
use ZklockFault;

my $path = '/t301/mutex';
my $outage = 3;    # seconds ZooKeeper stays down (session timeout: 10 s)

my $zk = start_zk();
my $node = new_zklock_node('zk_outage', $zk, "zklock.connect_timeout = '20s'\n");

my $before = status_row($node);
is($before->{state}, 'connected', 'connected before the outage');
cmp_ok($before->{session_timeout}, '>=', 8000,
	"negotiated session timeout ($before->{session_timeout} ms) is well above the outage");

my $holder = ZklockTest::Session->new($node, 'holder');
my $waiter = ZklockTest::Session->new($node, 'waiter');
is($holder->value("SELECT zk_mutex_acquire('$path')"), 't', 'holder acquires');
$waiter->start("SELECT zk_mutex_acquire('$path')");
ok(wait_waiting($node, $waiter->pid, $path), 'waiter (NULL timeout) is queued');
my $rows = zk_lock_rows($node, $path);
my ($hnode, $wnode) = ($rows->{ $holder->pid }{node}, $rows->{ $waiter->pid }{node});
like($hnode, $CURATOR_NODE_RE, "holder's node $hnode");

my ($down_for, $peer);    # shared by the parts below and the end

# --- the outage ---
subtest 'during an outage shorter than the session a held lock stays held' => sub {
	my $t_stop = time;
	stop_zk($zk);
	ok(wait_sql($node, q{SELECT state FROM zk_status()}, 'suspended', 10),
		"zk_status says 'suspended' while ZooKeeper is down");
	my $during = status_row($node);
	is($during->{session_id}, $before->{session_id}, 'the session id is kept while suspended');
	$rows = zk_lock_rows($node, $path);
	is($rows->{ $holder->pid }{state}, 'held', 'zk_locks: the holder still holds during the outage');
	is($rows->{ $waiter->pid }{state}, 'waiting', 'zk_locks: the waiter still waits during the outage');
	ok(!$waiter->done, 'the waiter has not returned (no error, no false grant) during the outage');
	hold_for($outage - (time - $t_stop), 'ZooKeeper down') if time - $t_stop < $outage;
	$down_for = time - $t_stop;
};

# --- ZooKeeper back on the same port and data ---
subtest 'ZooKeeper back: the same session resumes, the lock is still held and Curator excluded' => sub {
	restart_zk($zk);
	ok(wait_connected($node, 20), sprintf('reconnected after an outage of %.1f s', $down_for));
	my $after = status_row($node);
	is($after->{session_id}, $before->{session_id}, 'the same ZooKeeper session was resumed (not expired)');
	if (status_has_column($node, 'suspended_count'))
	{
		cmp_ok($after->{suspended_count}, '>=', 1, 'zk_status counted the suspension');
		is($after->{expired_count} // 0, $before->{expired_count} // 0, 'and no expiry');
	}

	$rows = zk_lock_rows($node, $path);
	is($rows->{ $holder->pid }{state}, 'held', 'zk_locks: the holder still holds after the reconnect');
	is($rows->{ $waiter->pid }{state}, 'waiting', 'zk_locks: the waiter still waits after the reconnect');
	is(scalar(grep { $_->{state} eq 'held' } values %$rows), 1, 'exactly one holder in zk_locks');
	ok(!$waiter->done, 'the waiter did not get the lock while the holder holds it');

	$peer = new_peer($zk);
	is_deeply(lock_children($peer, $path), [ $hnode, $wnode ],
		'ZooKeeper still has the holder node first, the waiter node second, nothing else');
	$peer->acquire('j', $path, 1000);
	is($peer->acquire_result('j'), 'timeout', 'a Curator client cannot take the lock after the outage');
	is_deeply(lock_children($peer, $path), [ $hnode, $wnode ], 'and its attempt left nothing behind');
};

# --- hand over ---
subtest 'the lock is handed over to the waiter as usual' => sub {
	is($holder->value("SELECT zk_mutex_release('$path')"), 't', 'the holder releases');
	my $r = $waiter->result(15);
	is($r->{out}, 't', 'the waiter gets the lock after the holder releases') or diag($r->{err});
	is($r->{sqlstate}, undef, 'no error for the waiter');
	# the released node goes one round trip after the grant (the local
	# handover grants at once and deletes it guarded: the failure model)
	ok(wait_until(sub { join(',', @{ lock_children($peer, $path) }) eq $wnode }, 10,
			"the released node to go"),
		"only the waiter's node remains: it holds")
	  or diag(join(',', @{ lock_children($peer, $path) }));
	is(zk_lock_rows($node, $path)->{ $waiter->pid }{state}, 'held', 'zk_locks agrees');
	$peer->acquire('j', $path, 500);
	is($peer->acquire_result('j'), 'timeout', 'Curator is still excluded');
	is($waiter->value("SELECT zk_mutex_release('$path')"), 't', 'the waiter releases');
	ok(wait_children_count($peer, $path, 0), 'no node left');
};

$_->quit for ($holder, $waiter);
$peer->quit;
$node->stop;
stop_zk($zk);
done_testing();


# 820_lock_cache: zklock.lock_cache keeps a mutex node after its last
# local release and grants the next local acquire from it, with no
# ZooKeeper request, while a Curator client still gets the lock.
#
# What users rely on, with zklock.lock_cache on:
# - a backend that takes and releases the same mutex again and again costs
#   ZooKeeper (almost) nothing after its first acquire: the node stays the
#   same and the server receives at most 0.1 requests per cycle;
# - zk_locks shows the kept node (state 'cached', no pid), and
#   zk_participants shows it holding nothing;
# - a Curator client that asks for the lock while the node is kept gets it
#   (the node is deleted), and while a local session holds a node taken
#   from the cache it gets the lock at that session's release, never
#   before: the cache never hands the lock to anyone while Curator is
#   queued, and the next local acquire waits for Curator;
# - after Curator wanted it, the path is not cached for
#   zklock.lock_cache_backoff, and is again afterwards;
# - another backend (another identity in the node's data) gets a node of
#   its own, and the kept node is deleted;
# - a holder that asked zk_lock_token leaves no node behind: the next
#   holder's token is greater;
# - a revocable acquire gives the kept node up and holds with its own;
# - a dropped connection, a worker restart or an expired session leaves no
#   kept node behind (Curator can take the lock) and caching goes on.
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
my $node = new_zklock_node('lockcache', $proxy->connect,
	"zklock.session_timeout = '6s'\nzklock.connect_timeout = '30s'\n"
	  . "zklock.lock_cache = on\nzklock.lock_cache_idle = '60s'\n"
	  . "zklock.lock_cache_backoff = '3s'\nlog_min_messages = debug2\n");
my $peer = new_peer($zk);
ZklockFault::expirer($zk);
my $s1 = ZklockTest::Session->new($node, 's1');
my $s2 = ZklockTest::Session->new($node, 's2');

# kept($path): the node zk_locks shows as cached on $path ('' if none)
sub kept
{
	my ($path) = @_;
	return $node->safe_psql('postgres',
		"SELECT coalesce(max(node), '') FROM zk_locks WHERE path = '$path' AND state = 'cached' AND pid IS NULL");
}

# held_node($s, $path): the node of $s's hold on $path
sub held_node
{
	my ($s, $path) = @_;
	return $node->safe_psql('postgres',
		"SELECT coalesce(max(node), '') FROM zk_locks WHERE path = '$path' AND state = 'held' AND pid = "
		  . $s->pid);
}

# received(): requests the ZooKeeper server received, ever (mntr)
sub received
{
	my ($n) = four_letter($zk, 'mntr') =~ /zk_packets_received\s+(\d+)/;
	return $n;
}

# kept_again($path, $what): cycle until a node is kept on $path (the path
# may be cooling down after Curator wanted it: zklock.lock_cache_backoff)
sub kept_again
{
	my ($path, $what) = @_;
	ok( wait_until(
			sub {
				$s1->value("SELECT zk_mutex_acquire('$path')");
				$s1->value("SELECT zk_mutex_release('$path')");
				kept($path) ne '';
			},
			20, $what),
		$what);
}

# cycle($s, $path): acquire and release once
sub cycle
{
	my ($s, $path) = @_;
	is($s->value("SELECT zk_mutex_acquire('$path')"), 't', $s->name . " takes $path");
	is($s->value("SELECT zk_mutex_release('$path')"), 't', $s->name . " releases $path");
}

############################################################################
# 1. one backend, many cycles: one node, no requests
############################################################################
my $p = '/t820/a';
is($s1->value("SELECT zk_mutex_acquire('$p')"), 't', 's1 takes /t820/a');
my $n1 = held_node($s1, $p);
like($n1, $CURATOR_NODE_RE, "its node $n1");
is($s1->value("SELECT zk_mutex_release('$p')"), 't', 's1 releases it');
ok(wait_until(sub { kept($p) eq $n1 }, 10, 'the node to be kept'), 'zk_locks shows the node kept (cached)');
is_deeply($peer->children($p), [$n1], 'ZooKeeper still has it, and nothing else');
is($node->safe_psql('postgres', "SELECT node || ' ' || kind || ' ' || holds FROM zk_participants('$p')"),
	"$n1 lock false", 'zk_participants shows the kept node holding nothing');

is($s1->value("SELECT zk_mutex_acquire('$p')"), 't', 's1 takes it again');
is(held_node($s1, $p), $n1, '... with the same node');
is($node->safe_psql('postgres', "SELECT node || ' ' || holds FROM zk_participants('$p')"),
	"$n1 true", 'which zk_participants shows holding');
is(kept($p), '', 'which is held, not cached, now');
is($s1->value("SELECT zk_mutex_release('$p')"), 't', 's1 releases it');

my $before = received();
$s1->value(qq{DO \$\$ BEGIN FOR i IN 1..200 LOOP PERFORM zk_mutex_acquire('$p'); PERFORM zk_mutex_release('$p'); END LOOP; END \$\$});
my $requests = received() - $before;
note("200 cycles: $requests requests received by the server (heartbeats and Curator's pings included)");
cmp_ok($requests, '<=', 20, 'at most 0.1 ZooKeeper requests per cycle');
is(kept($p), $n1, 'the same node is kept after 200 cycles');
is_deeply($peer->children($p), [$n1], 'and ZooKeeper has nothing else');

############################################################################
# 2. Curator asks while the node is kept: it gets the lock
############################################################################
$peer->acquire('c1', $p, 20000);
is($peer->acquire_result('c1'), 'acquired', 'Curator gets the lock the cache kept');
my $kids = $peer->children($p);
is(scalar @$kids, 1, 'one node under the path');
isnt($kids->[0], $n1, "Curator's, not the kept one");
is(kept($p), '', 'nothing is kept any more');
is($s1->value("SELECT zk_mutex_try_acquire('$p')"), 'f', 'SQL cannot take it while Curator holds it');
is($peer->release('c1'), 'released', 'Curator releases');

# the path cools down: released nodes are deleted for zklock.lock_cache_backoff
cycle($s1, $p);
ok(wait_children_count($peer, $p, 0), 'right after, the released node is deleted (the path cools down)');
kept_again($p, 'after the backoff the node is kept again');
my $n2 = kept($p);

############################################################################
# 3. Curator queues behind a node held from the cache
############################################################################
is($s1->value("SELECT zk_mutex_acquire('$p')"), 't', 's1 takes the kept node');
is(held_node($s1, $p), $n2, '... the same node');
$peer->acquire('c2', $p, 30000);
ok(wait_children_count($peer, $p, 2), 'Curator is queued behind it');
ok(!$peer->has_reply(qr/^acquired c2/), 'Curator does not have the lock while s1 holds it');
is($s1->value("SELECT zk_mutex_release('$p')"), 't', 's1 releases');
is($peer->acquire_result('c2'), 'acquired', 'Curator gets it at the release');
is(kept($p), '', 'the node was not kept');
ok(!$peer->exists("$p/$n2"), 'it is gone from ZooKeeper');
$s1->start("SELECT zk_mutex_acquire('$p', '20s')");
ok(wait_waiting($node, $s1->pid, $p), 'the next local acquire waits for Curator');
is($peer->release('c2'), 'released', 'Curator releases');
is($s1->result->{out}, 't', 's1 gets it after Curator');
is($s1->value("SELECT zk_mutex_release('$p')"), 't', 's1 releases');

############################################################################
# 4. another backend gets a node of its own
############################################################################
my $q = '/t820/b';
cycle($s1, $q);
my $k1 = kept($q);
ok($k1 ne '', "s1's node $k1 is kept");
is($s2->value("SELECT zk_mutex_acquire('$q')"), 't', 's2 takes the lock');
my $k2 = held_node($s2, $q);
isnt($k2, $k1, "with a node of its own ($k2)");
ok(!$peer->exists("$q/$k1"), "s1's kept node is deleted");
is($s2->value("SELECT zk_mutex_release('$q')"), 't', 's2 releases');
ok(wait_until(sub { kept($q) eq $k2 }, 10, "s2's node kept"), "s2's node is kept now");

# local contention: the lock goes to the local waiter, nothing is kept
is($s2->value("SELECT zk_mutex_acquire('$q')"), 't', 's2 takes its kept node');
$s1->start("SELECT zk_mutex_acquire('$q', '20s')");
ok(wait_waiting($node, $s1->pid, $q), 's1 waits behind s2');
is($s2->value("SELECT zk_mutex_release('$q')"), 't', 's2 releases');
is($s1->result->{out}, 't', 's1 gets the lock');
isnt(held_node($s1, $q), $k2, 'with its own node');
is(kept($q), '', 'nothing is kept while s1 holds');
ok(!$peer->exists("$q/$k2"), "s2's node is deleted");
is($s1->value("SELECT zk_mutex_release('$q')"), 't', 's1 releases');
ok(wait_until(sub { kept($q) ne '' }, 10, "s1's node kept"), "s1's node is kept now (it was alone)");
my $k3 = kept($q);
is($s2->value("SELECT zk_mutex_acquire('$q')"), 't', 's2 takes the lock');
$k2 = held_node($s2, $q);
isnt($k2, $k3, 'not with the node kept for s1');
ok(!$peer->exists("$q/$k3"), 'which is deleted');
is($s2->value("SELECT zk_mutex_release('$q')"), 't', 's2 releases');
ok(wait_until(sub { kept($q) eq $k2 }, 10, "s2's node kept"), "s2's node is kept");

############################################################################
# 5. a holder that asks for its token leaves no node behind
############################################################################
is($s2->value("SELECT zk_mutex_acquire('$q')"), 't', 's2 takes its kept node');
my $t1 = $s2->value("SELECT zk_lock_token('$q')");
like($t1, qr/^\d+$/, "token $t1");
is($s2->value("SELECT zk_mutex_release('$q')"), 't', 's2 releases');
ok(wait_children_count($peer, $q, 0), 'the node of a holder that asked its token is deleted');
is($s2->value("SELECT zk_mutex_acquire('$q')"), 't', 's2 takes the lock again');
my $t2 = $s2->value("SELECT zk_lock_token('$q')");
cmp_ok($t2, '>', $t1, "the next holder's token $t2 is greater");
is($s2->value("SELECT zk_mutex_release('$q')"), 't', 's2 releases');

############################################################################
# 6. a revocable acquire gives the kept node up
############################################################################
my $r = '/t820/c';
cycle($s1, $r);
my $rk = kept($r);
ok($rk ne '', 'a node is kept');
is($s1->value("SELECT zk_mutex_acquire('$r', NULL, true)"), 't', 's1 takes it revocably');
isnt(held_node($s1, $r), $rk, 'with a new node');
ok(!$peer->exists("$r/$rk"), 'the kept node is deleted');
is($s1->value("SELECT zk_mutex_release('$r')"), 't', 's1 releases');
ok(wait_children_count($peer, $r, 0), "a revocable holder's node is not kept");

############################################################################
# 7. a dropped connection, a worker restart, an expired session
############################################################################
my $s0 = status_row($node)->{session_id};
kept_again($p, 'a node is kept');
$proxy->set_mode('cut');
ok(wait_until(sub { status_row($node)->{state} ne 'connected' }, 15, 'the drop'), 'the connection drops');
$proxy->set_mode('pass');
ok(wait_until(sub { status_row($node)->{state} eq 'connected' }, 20, 'reconnect'), 'it reconnects');
is(status_row($node)->{session_id}, $s0, 'in the same session');
ok(wait_children_count($peer, $p, 0), 'the node kept across the drop is deleted');
is(kept($p), '', 'and zk_locks keeps none');
kept_again($p, 'caching goes on');

my ($old, $new) = restart_worker($node, 'TERM');
isnt($new, '', "the worker restarted ($old -> $new)");
ok(wait_children_count($peer, $p, 0), 'the node the old worker kept is deleted');
$peer->acquire('c3', $p, 20000);
is($peer->acquire_result('c3'), 'acquired', 'Curator gets the lock');
is($peer->release('c3'), 'released', 'Curator releases');

# wait until the backoff Curator caused is over, then keep a node and expire
kept_again($p, 'a node is kept by the new worker');
my ($id, $pw) = session_file($node);
ok(expire_session($zk, $id, $pw), 'the session is expired from outside');
ok(wait_children_count($peer, $p, 0), 'the kept node went with the session');
ok(wait_until(sub { my $st = status_row($node); $st->{state} eq 'connected' && $st->{session_id} ne $s0 }, 30,
		'a new session'), 'the worker has a new session');
is(kept($p), '', 'zk_locks keeps nothing of the old session');
cycle($s1, $p);
ok(wait_until(sub { kept($p) ne '' }, 10, 'kept'), 'caching goes on in the new session, at once');
like(log_contents($node) // '', qr/lock cache: slot \d+ serial \d+ granted/,
	'the log says when a lock was granted from the cache');

$_->quit for ($s1, $s2);
$peer->quit;
$node->stop;
$proxy->stop;
stop_zk($zk);
done_testing();

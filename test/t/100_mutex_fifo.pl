
# 100_mutex_fifo: one holder and five queued waiters on one mutex.
#
# What users rely on: waiters are served first come, first served (the
# ZooKeeper queue order, as Curator's InterProcessMutex does), a waiting
# backend is visible in pg_stat_activity with zklock's wait event, and
# zk_locks shows who holds and who waits.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use ZklockTest;

my $path = '/t100/mutex';
my $nwaiters = 5;

my $zk = start_zk();
my $node = new_zklock_node('contention', $zk);
my $peer = new_peer($zk);

# The holder takes the lock.
my $holder = ZklockTest::Session->new($node, 'holder');
is($holder->value("SELECT zk_mutex_acquire('$path')"), 't', 'holder acquires the free mutex');

my $rows = zk_lock_rows($node, $path);
is($rows->{ $holder->pid }{state}, 'held', 'zk_locks shows the holder as held');
like($rows->{ $holder->pid }{node}, $CURATOR_NODE_RE, 'holder row carries its ZooKeeper node name');

# Five waiters arrive one after the other. Arrival order is established by
# waiting until each is visible as 'waiting' with its node created before
# the next one starts.
my @w;
for my $i (1 .. $nwaiters)
{
	my $s = ZklockTest::Session->new($node, "waiter$i");
	$s->start("SELECT zk_mutex_acquire('$path')");
	ok(wait_waiting($node, $s->pid, $path), "waiter$i is queued with a node");
	push @w, $s;
}

# Nobody but the holder got the lock.
ok(!$_->done, $_->name . ' is still blocked') for @w;

# pg_stat_activity shows the wait event for every waiter (ZkLockAcquire on
# PostgreSQL 17, the generic Extension before).
my $pids = join(',', map { $_->pid } @w);
my $event = expected_wait_event($node, 'ZkLockAcquire');
is( $node->safe_psql(
		'postgres',
		qq{SELECT count(*) FROM pg_stat_activity WHERE pid IN ($pids)
		   AND wait_event_type = 'Extension' AND wait_event = '$event'}),
	$nwaiters,
	"all waiters show wait_event_type/wait_event Extension/$event in pg_stat_activity");

# zk_locks: one holder, five waiters, session scope, each with a node.
is( $node->safe_psql(
		'postgres',
		qq{SELECT state, count(*), count(node), min(scope), max(scope)
		   FROM zk_locks WHERE path = '$path' GROUP BY state ORDER BY state}),
	"held|1|1|session|session\nwaiting|$nwaiters|$nwaiters|session|session",
	'zk_locks shows 1 holder and 5 waiters with nodes');

# ZooKeeper's queue (children sorted by sequence, as Curator sorts them) is
# holder, waiter1, ..., waiter5, and zk_locks names exactly those nodes.
$rows = zk_lock_rows($node, $path);
my @expected = map { $rows->{$_}{node} } ($holder->pid, map { $_->pid } @w);
is_deeply(lock_children($peer, $path), \@expected,
	'ZooKeeper children in queue order are holder then waiters in arrival order');
is_deeply(
	[ map { s{^.*/}{}r } @{ $peer->participants($path) } ],
	\@expected, "Curator's getParticipantNodes sees the same queue");

# Release one by one: each release grants the lock to the next arrival and
# to nobody else.
my @order = ($holder, @w);
for my $k (0 .. $#w)
{
	my ($prev, $next) = ($order[$k], $order[ $k + 1 ]);
	is($prev->value("SELECT zk_mutex_release('$path')"), 't', $prev->name . ' releases');
	my $r = $next->result;
	is($r->{out}, 't', $next->name . ' is granted the lock after ' . $prev->name . ' released')
	  or diag("stderr: $r->{err}");
	ok(wait_held($node, $next->pid, $path), $next->name . ' shows as held in zk_locks');
	# Everyone behind is still waiting.
	for my $later (@order[ $k + 2 .. $#order ])
	{
		ok(!$later->done, $later->name . ' still waits (FIFO)');
	}
	is( $node->safe_psql('postgres',
			qq{SELECT count(*) FROM zk_locks WHERE path = '$path' AND state = 'held'}),
		'1', 'exactly one holder');
}

# The last one releases: queue and registry are empty.
is($w[-1]->value("SELECT zk_mutex_release('$path')"), 't', 'last waiter releases');
ok(wait_no_zklock_rows($node, $path), 'zk_locks is empty for the path');
ok(wait_until(sub { @{ lock_children($peer, $path) } == 0 }, 10, 'no lock nodes'),
	'no lock node left in ZooKeeper');

$_->quit for ($holder, @w);
$peer->quit;
$node->stop;
stop_zk($zk);
done_testing();

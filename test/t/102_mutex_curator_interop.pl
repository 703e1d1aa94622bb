
# 102_mutex_curator_interop: SQL sessions and Curator's InterProcessMutex are
# peers.
#
# What users rely on: a Java service using Curator 5.x and a SQL session
# contend for the same path and exclude each other, in both directions;
# they share one FIFO queue; and zklock's nodes are named exactly as
# Curator names its own (protected _c_<uuid4>-lock-<seq10>).
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use ZklockTest;

my $zk = start_zk();
my $node = new_zklock_node('interop', $zk);
my $peer = new_peer($zk);

my @sql_nodes;       # every node name zklock created, for the name checks
my @curator_nodes;   # every node name Curator created

my ($p1, $s1, $p2, $h, $s2, $s3, @queue);    # shared by the parts below

# 1. Curator holds -> SQL acquire with timeout returns false; a SQL waiter
#    gets the lock when Curator releases.
subtest 'a Curator holder excludes SQL (timeout, try_acquire leave no node); a SQL waiter gets the lock when Curator releases' => sub {
	$p1 = '/t102/curator_first';
	$peer->acquire('c1', $p1, -1);
	is($peer->acquire_result('c1'), 'acquired', 'Curator acquires');
	push @curator_nodes, @{ $peer->children($p1) };

	$s1 = ZklockTest::Session->new($node, 's1');
	# (zklock may queue the delete of an abandoned node and return at once, so
	# other ZooKeeper clients see it go shortly after the call: poll, bounded.)
	is($s1->value("SELECT zk_mutex_acquire('$p1', '700ms')"), 'f',
		'SQL acquire with timeout returns false while Curator holds the lock');
	ok(wait_until(sub { @{ $peer->children($p1) } == 1 }, 10, 'only the Curator node'),
		'the timed-out SQL attempt left no node');
	is($s1->value("SELECT zk_mutex_try_acquire('$p1')"), 'f', 'SQL try_acquire returns false too');
	ok(wait_until(sub { @{ $peer->children($p1) } == 1 }, 10, 'only the Curator node'),
		'the failed try_acquire left no node');

	$s1->start("SELECT zk_mutex_acquire('$p1')");
	ok(wait_waiting($node, $s1->pid, $p1), 'SQL waiter queued behind Curator');
	push @sql_nodes, zk_lock_rows($node, $p1)->{ $s1->pid }{node};
	ok(!$s1->done, 'the SQL waiter is blocked while Curator holds');
	is($peer->release('c1'), 'released', 'Curator releases');
	my $r = $s1->result;
	is($r->{out}, 't', 'the SQL waiter gets the lock after Curator released') or diag($r->{err});
};

# 2. SQL holds -> Curator acquire(1000 ms) times out; gets it after release.
subtest 'a SQL holder excludes Curator (its timeout leaves no node); a Curator waiter gets the lock when SQL releases' => sub {
	$peer->acquire('c2', $p1, 1000);
	is($peer->acquire_result('c2'), 'timeout', 'Curator acquire(1000 ms) times out while SQL holds');
	is(scalar @{ $peer->children($p1) }, 1, "Curator's timed-out attempt left no node");
	$peer->acquire('c2', $p1, 10000);    # Curator now waits...
	ok(wait_until(sub { @{ $peer->children($p1) } == 2 }, 10), 'Curator waiter queued behind SQL');
	ok(!$peer->has_reply(qr/^(acquired|timeout|error) c2\b/), 'Curator is blocked while SQL holds');
	is($s1->value("SELECT zk_mutex_release('$p1')"), 't', 'SQL releases');
	is($peer->acquire_result('c2'), 'acquired', 'Curator gets the lock after the SQL release');
	push @curator_nodes, @{ $peer->children($p1) };
	is($peer->release('c2'), 'released', 'Curator releases');
};

# 3. Mixed queue: SQL holder, then Curator, SQL, Curator, SQL waiters in
#    that arrival order, each queued (node visible) before the next starts.
subtest 'a mixed queue of SQL and Curator waiters is served in arrival order, one at a time' => sub {
	$p2 = '/t102/mixed';
	$h = ZklockTest::Session->new($node, 'h');
	is($h->value("SELECT zk_mutex_acquire('$p2')"), 't', 'SQL holder acquires');
	$s2 = ZklockTest::Session->new($node, 's2');
	$s3 = ZklockTest::Session->new($node, 's3');
	my $nkids = 1;

	# One entry per queue member: [kind, handle/id, node name]
	@queue = ([ 'sql', $h, zk_lock_rows($node, $p2)->{ $h->pid }{node} ]);
	sub curator_arrives
	{
		my ($id) = @_;
		my $before = $peer->children($p2);
		$peer->acquire($id, $p2, -1);
		ok(wait_until(sub { @{ $peer->children($p2) } == @$before + 1 }, 10),
			"Curator $id queued");
		my %old = map { $_ => 1 } @$before;
		my ($new) = grep { !$old{$_} } @{ $peer->children($p2) };
		push @queue, [ 'curator', $id, $new ];
	}
	sub sql_arrives
	{
		my ($s) = @_;
		$s->start("SELECT zk_mutex_acquire('$p2')");
		ok(wait_waiting($node, $s->pid, $p2), 'SQL ' . $s->name . ' queued');
		push @queue, [ 'sql', $s, zk_lock_rows($node, $p2)->{ $s->pid }{node} ];
	}
	curator_arrives('c3');
	sql_arrives($s2);
	curator_arrives('c4');
	sql_arrives($s3);

	my @expected = map { $_->[2] } @queue;
	is_deeply(lock_children($peer, $p2), \@expected,
		'ZooKeeper queue is SQL, Curator, SQL, Curator, SQL in arrival order');
	is_deeply([ map { s{^.*/}{}r } @{ $peer->participants($p2) } ],
		\@expected, "Curator's getParticipantNodes agrees");
	push @sql_nodes, map { $_->[2] } grep { $_->[0] eq 'sql' } @queue;
	push @curator_nodes, map { $_->[2] } grep { $_->[0] eq 'curator' } @queue;

	# Serve the queue: each release grants the next member only.
	sub member_name { my $m = shift; return $m->[0] eq 'sql' ? 'SQL ' . $m->[1]->name : "Curator $m->[1]"; }
	sub release_member
	{
		my ($m) = @_;
		if ($m->[0] eq 'sql')
		{
			is($m->[1]->value("SELECT zk_mutex_release('$p2')"), 't', member_name($m) . ' releases');
		}
		else
		{
			is($peer->release($m->[1]), 'released', member_name($m) . ' releases');
		}
	}
	sub granted
	{
		my ($m) = @_;
		if ($m->[0] eq 'sql')
		{
			my $r = $m->[1]->result;
			return $r->{out} eq 't';
		}
		return ($peer->acquire_result($m->[1]) // '') eq 'acquired';
	}
	sub still_waiting
	{
		my ($m) = @_;
		return $m->[0] eq 'sql'
		  ? !$m->[1]->done
		  : !$peer->has_reply(qr/^(acquired|timeout|error) \Q$m->[1]\E\b/);
	}
	for my $k (0 .. $#queue - 1)
	{
		release_member($queue[$k]);
		ok(granted($queue[ $k + 1 ]), member_name($queue[ $k + 1 ]) . ' is granted next');
		ok(still_waiting($_), member_name($_) . ' still waits') for @queue[ $k + 2 .. $#queue ];
		is(lock_children($peer, $p2)->[0], $queue[ $k + 1 ][2], 'its node is first in the queue');
	}
	release_member($queue[-1]);
	ok(wait_until(sub { @{ lock_children($peer, $p2) } == 0 }, 10), 'mixed queue fully drained');
};

# 4. Node names: zklock's are byte-for-byte Curator's format, and so are
#    Curator's own (the regex is the contract for both).
subtest 'zklock\'s node names have Curator\'s format, each acquire a fresh UUID' => sub {
	is(scalar @sql_nodes, 4, 'collected 4 zklock node names');
	like($_, $CURATOR_NODE_RE, "zklock node $_ has Curator's name format") for @sql_nodes;
	like($_, $CURATOR_NODE_RE, "Curator node $_ matches the same format") for @curator_nodes;
	my %uuids;
	$uuids{ substr($_, 3, 36) }++ for @sql_nodes;
	is(scalar keys %uuids, scalar @sql_nodes, 'every zklock acquire uses a fresh UUID');
};

$_->quit for ($s1, $h, $s2, $s3);
$peer->quit;
$node->stop;
stop_zk($zk);
done_testing();

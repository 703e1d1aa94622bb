
# 720_delete_batch: many locks released at once are all deleted from
# ZooKeeper, whatever happens to the deletes on the way.
#
# What users rely on:
#   1. When a session ending releases many locks at once, every one of its
#      nodes is gone from ZooKeeper soon after (the worker sends the deletes
#      that are ready together, as one ZooKeeper multi: zk_status() counts
#      them in batches / batched_deletes), a Curator client waiting
#      on one of the paths gets that lock, and a zklock session waiting on
#      another gets its lock (a local handover, whose check must reach
#      ZooKeeper behind the batched delete).
#   2. A node deleted from outside just before the release makes the multi
#      that carries its delete fail as a whole; every other node is still
#      deleted, none is left behind.
#   3. With the connection dropped while the deletes are on their way, or
#      the worker restarted right after they were sent, no node is left
#      behind once the worker is back, and no lock is held twice: the
#      Curator waiter gets its lock while no zklock session holds it.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use ZklockTest;
use ZklockFault;
use ZklockProxy;

my $N = 20;    # locks one session holds: more than one multi (16 ops) carries

my $zk = start_zk();
my $proxy = ZklockProxy->start($zk);
my $node = new_zklock_node('batch', $proxy->connect,
	"zklock.session_timeout = '8s'\nzklock.connect_timeout = '30s'\nzklock.lease_margin = '1s'\n");
my $peer = new_peer($zk);    # Curator, straight to ZooKeeper

# counters(): zk_status()'s batch counters
sub counters
{
	my $r = status_row($node);
	return { map { $_ => $r->{$_} } qw(batches batched_deletes batches_failed) };
}

# hold_all($s, $base): session $s takes session-level mutexes $base/p1..pN;
# returns { "$base/pK/<node>" => 1 } for the nodes they made, read from
# ZooKeeper
sub hold_all
{
	my ($s, $base) = @_;
	is($s->value(qq{SELECT count(*) FILTER (WHERE zk_mutex_acquire('$base/p' || g))
					 FROM generate_series(1, $N) g}),
		$N, $s->name . " holds $N mutexes under $base");
	my %mine;
	for my $k (1 .. $N)
	{
		my $kids = lock_children($peer, "$base/p$k");
		is(scalar @$kids, 1, "$base/p$k has one node") or next;
		$mine{"$base/p$k/$kids->[0]"} = 1;
	}
	return \%mine;
}

# left_of($mine): the nodes of %$mine still in ZooKeeper
sub left_of
{
	my ($mine) = @_;
	my %dirs;
	for (keys %$mine)
	{
		(my $d = $_) =~ s{/[^/]+$}{};
		$dirs{$d} = 1;
	}
	my @left;
	for my $dir (sort keys %dirs)
	{
		push @left, grep { $mine->{$_} } map { "$dir/$_" } @{ lock_children($peer, $dir) };
	}
	return @left;
}

# all_gone($mine, $what): wait (bounded) until none of %$mine is left
sub all_gone
{
	my ($mine, $what) = @_;
	my @left;
	my $ok = wait_until(sub { @left = left_of($mine); !@left }, 15, $what);
	diag('left behind: ' . join(' ', @left)) unless $ok;
	return ok($ok, $what);
}

# quit_at_once($s): end session $s (its locks are released at its exit)
# while the worker is stopped, so the worker finds every release in one
# pass of its loop, as when they come faster than it wakes up
sub quit_at_once
{
	my ($s) = @_;
	my $wpid = worker_pid($node);
	my $pid = $s->pid;
	ok(kill('STOP', $wpid), "the worker (pid $wpid) is stopped for a moment");
	$s->quit;
	my $gone = wait_sql($node, "SELECT count(*) FROM pg_stat_activity WHERE pid = $pid", '0', 10);
	ok(kill('CONT', $wpid), 'the worker goes on');
	ok($gone, $s->name . ' ended while the worker was stopped');
	return;
}


############################################################################
# 1. A session holding many locks ends: every node goes, in batches; the
#    waiters, Curator and zklock, get their locks.
############################################################################
subtest 'many releases at once: every node is deleted, in batches; waiters get the locks' => sub {
	my $B = '/t720/all';
	my $s = ZklockTest::Session->new($node, 's1');
	my $b = ZklockTest::Session->new($node, 'b1');
	my $mine = hold_all($s, $B);
	$b->start(qq{SELECT zk_mutex_acquire('$B/p3', '60s')});
	ok(wait_children_count($peer, "$B/p3", 2), 'a zklock session waits on p3');
	ok(wait_waiting($node, $b->pid, "$B/p3"), '... zk_locks says it waits');
	$peer->acquire('c1', "$B/p5", -1);
	ok(wait_children_count($peer, "$B/p5", 2), 'a Curator client waits on p5');
	my $c0 = counters();

	quit_at_once($s);    # the backend's end releases all its locks at once
	all_gone($mine, "every one of the $N nodes is gone");
	is($peer->acquire_result('c1', 15), 'acquired', 'the Curator waiter gets its lock');
	is($b->result(15)->{out}, 't', 'the zklock waiter gets its lock');
	is(zk_holders($node, "$B/p3"), $b->pid, 'zk_locks: it holds p3');
	is(zk_holders($node, "$B/p5"), '', 'zk_locks: nobody holds p5 (Curator does)');
	my $c1 = counters();
	cmp_ok($c1->{batches} - $c0->{batches}, '>=', 1, 'the deletes went in batches');
	cmp_ok($c1->{batched_deletes} - $c0->{batched_deletes}, '>=', 2,
		'... of several deletes each (' . ($c1->{batched_deletes} - $c0->{batched_deletes})
		  . ' deletes in ' . ($c1->{batches} - $c0->{batches}) . ' batches)');
	cmp_ok($c1->{batched_deletes} - $c0->{batched_deletes}, '<=',
		16 * ($c1->{batches} - $c0->{batches}), '... at most 16 in each');
	ok(wait_sql($node, 'SELECT deletes_pending FROM zk_status()', '0', 10), 'no delete is pending');
	is($peer->release('c1'), 'released', 'Curator releases');
	is($b->value(qq{SELECT zk_mutex_release('$B/p3')}), 't', 'the zklock waiter releases');
	ok(wait_children_count($peer, "$B/p3", 0) && wait_children_count($peer, "$B/p5", 0), 'nothing left');
	$b->quit;
};

############################################################################
# 2. One node was deleted from outside: the multi carrying its delete fails
#    as a whole, and every other node is still deleted.
############################################################################
subtest 'a node deleted from outside fails its multi; every other node is still deleted' => sub {
	my $B = '/t720/nonode';
	my $s = ZklockTest::Session->new($node, 's2');
	my $mine = hold_all($s, $B);
	my ($gone) = grep { m{/p7/} } keys %$mine;
	like($peer->delete($gone), qr/^deleted /, 'the node of p7 is deleted from outside');
	delete $mine->{$gone};
	$peer->acquire('c2', "$B/p8", -1);
	ok(wait_children_count($peer, "$B/p8", 2), 'a Curator client waits on p8');
	my $c0 = counters();

	quit_at_once($s);
	all_gone($mine, 'every other node is gone');
	is($peer->acquire_result('c2', 15), 'acquired', 'the Curator waiter on p8 gets its lock');
	my $c1 = counters();
	cmp_ok($c1->{batches_failed} - $c0->{batches_failed}, '>=', 1,
		'a multi failed (batches_failed)');
	ok(wait_sql($node, 'SELECT deletes_pending FROM zk_status()', '0', 10),
		'no delete is pending (the one of p7 is done: NoNode)');
	is($peer->release('c2'), 'released', 'Curator releases');
};

############################################################################
# 3. The deletes are on their way when the connection drops, or the worker
#    restarts right after sending them: nothing is left behind, and no lock
#    is held twice.
############################################################################
subtest 'connection drop or worker restart with a batch in flight: nothing is left, no lock held twice' => sub {
	for my $how (qw(cut restart))
	{
		my $B = "/t720/$how";
		my $s0 = status_row($node)->{session_id};
		my $s = ZklockTest::Session->new($node, "s_$how");
		my $b = ZklockTest::Session->new($node, "b_$how");
		my $mine = hold_all($s, $B);
		$b->start(qq{SELECT zk_mutex_acquire('$B/p9', '60s')});
		ok(wait_children_count($peer, "$B/p9", 2), "$how: a zklock session waits on p9");
		ok(wait_waiting($node, $b->pid, "$B/p9"), "$how: ... zk_locks says it waits");
		$peer->acquire("c_$how", "$B/p4", -1);
		ok(wait_children_count($peer, "$B/p4", 2), "$how: a Curator client waits on p4");
		my $c0 = counters();

		$proxy->set_mode('blackhole');
		my $spid = $s->pid;
		quit_at_once($s);
		ok(wait_sql($node, "SELECT count(*) FROM zk_locks WHERE pid = $spid", '0', 10),
			"$how: the worker took the releases");
		ok(wait_until(sub { counters()->{batches} > $c0->{batches} }, 10,
				'a batch sent'), "$how: a batch was sent into the black hole");
		is(scalar(left_of($mine)), $N, "$how: ... and none of it reached ZooKeeper");
		reconnect_after($node, $proxy, $how, $s0);

		all_gone($mine, "$how: every one of the $N nodes is gone");
		is($peer->acquire_result("c_$how", 15), 'acquired', "$how: the Curator waiter on p4 gets its lock");
		is(zk_holders($node, "$B/p4"), '', "$how: zk_locks: no zklock session holds p4 meanwhile");
		is($b->result(15)->{out}, 't', "$how: the zklock waiter on p9 gets its lock");
		is(scalar @{ lock_children($peer, "$B/p9") }, 1, "$how: ... its node is the only one under p9");
		ok(wait_sql($node, 'SELECT deletes_pending FROM zk_status()', '0', 10), "$how: no delete is pending");
		is($peer->release("c_$how"), 'released', "$how: Curator releases");
		is($b->value(qq{SELECT zk_mutex_release('$B/p9')}), 't', "$how: the zklock waiter releases");
		ok(wait_children_count($peer, "$B/p9", 0) && wait_children_count($peer, "$B/p4", 0),
			"$how: nothing left");
		$b->quit;
	}
};

$peer->quit;
$proxy->stop;
stop_zk($zk);
done_testing();

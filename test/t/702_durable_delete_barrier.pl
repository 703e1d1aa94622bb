
# 702_durable_delete_barrier: the delete of a double barrier's P/ready survives
# a crash-restart and a full restart of PostgreSQL.
#
# What users rely on: once every member has left a double barrier, its
# P/ready node goes, even when ZooKeeper cannot be reached at that moment
# and PostgreSQL then crash-restarts (a backend killed with SIGKILL) or is
# restarted (pg_ctl stop -m immediate, start).  P/ready is a persistent
# node: no session end removes it, and while it stays, the next round's
# enter() passes at once with too few members (DistributedDoubleBarrier's
# safety is gone for every zklock and Curator client of that path).  So
# the pending delete of a persistent node is kept in $PGDATA beside the
# session file, not only in shared memory, and the next worker applies it
# on whichever session it gets.  It deletes only the P/ready of the round
# that recorded it: a P/ready that a later round made (another creation
# zxid) is left alone.
#
# The fault: the zklock worker reaches ZooKeeper through a TCP proxy; the
# Curator peer talks to ZooKeeper directly and is the independent view.
# While the SQL members leave, a node under P/ready (the peer's) makes
# ZooKeeper refuse the delete of P/ready, so the delete is pending when the
# proxy turns into a black hole; then the peer removes that node, so from
# then on only the worker's pending delete can remove P/ready.
#   1. crash-restart (SIGKILL of a backend), the path heals: P/ready goes
#      and an enter with too few members times out;
#   2. the same with pg_ctl stop -m immediate and start;
#   3. the same as 1, but meanwhile P/ready was removed and a new round of
#      Curator members made a new one: that one stays, and its members
#      leave normally;
#   4. a damaged file of pending deletes is ignored with a WARNING: the
#      server starts, zklock connects and works;
#   5. ZooKeeper rebuilt from nothing on the same hosts, where a new P/ready
#      got the very creation zxid the delete was recorded for: it stays
#      (the delete is limited to the creation zxid and time).
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use ZklockTest;
use ZklockFault;
use ZklockProxy;

my $qty = 3;    # members of every round of the SQL barrier

my $zk = start_zk();
my $proxy = ZklockProxy->start($zk);
# connect_timeout 60 s: no request fails because ZooKeeper is away
my $node = new_zklock_node('durable_deletes', $proxy->connect,
	"zklock.session_timeout = '20s'\nzklock.connect_timeout = '60s'\nrestart_after_crash = on\n");
my $peer = new_peer($zk);
is(deletes_pending($node), '0', 'zk_status().deletes_pending is 0 at rest');

sub member_nodes
{
	my ($p) = @_;
	return [ grep { $_ ne 'ready' } @{ $peer->children($p) // [] } ];
}

# pending_ready($p): $qty SQL members enter $p and leave it while ZooKeeper
# refuses to delete P/ready; then the worker's path becomes a black hole and
# the obstacle goes.  Returns P/ready's creation zxid.
sub pending_ready
{
	my ($p) = @_;
	my @m = map { ZklockTest::Session->new($node, "m$_") } 1 .. $qty;
	$_->start("SELECT zk_double_barrier_enter('$p', $qty, '20s')") for @m;
	is(join(',', map { $_->result(25)->{out} } @m), join(',', ('t') x $qty),
		"$p: $qty SQL members entered");
	my $czxid = $peer->czxid("$p/ready");
	ok(defined $czxid, "$p: P/ready exists (czxid " . ($czxid // 'none') . ')');
	$peer->ephemeral("$p/ready/obstacle");

	$_->start("SELECT zk_double_barrier_leave('$p', '20s')") for @m;
	for my $s (@m)
	{
		my $r = $s->result(25);
		like($r->{err}, qr/ready node of the double barrier.*not empty/,
			"$p: " . $s->name . "'s leave could not delete P/ready");
	}
	is_deeply(member_nodes($p), [], "$p: every member node is gone");
	cmp_ok(deletes_pending($node), '>=', 1, "$p: the delete of P/ready is pending");
	$_->quit for @m;

	$proxy->set_mode('blackhole');
	like($peer->delete("$p/ready/obstacle"), qr/^deleted/, "$p: the obstacle is gone (black hole in place)");
	is($peer->czxid("$p/ready"), $czxid, "$p: P/ready is still there");
	return $czxid;
}

# crash_restart(): SIGKILL of a backend; wait until the cluster is back.
sub crash_restart
{
	my $victim = ZklockTest::Session->new($node, 'victim');
	my $old_worker = worker_pid($node);
	my $log_from = -s $node->logfile;
	ok(kill('KILL', $victim->pid), 'SIGKILL sent to backend ' . $victim->pid);
	ok(wait_back($node, 60, $log_from), 'the cluster is back after the crash-restart');
	isnt(worker_pid($node), $old_worker, 'a new worker runs (shared memory was reinitialised)');
	$victim->quit;
	return;
}

# heal($what): let the proxy pass again; wait for the worker to connect.
sub heal
{
	my ($what) = @_;
	$proxy->set_mode('pass');
	ok(wait_connected($node, 30), "$what: the worker connected again");
	return;
}

# too_few($p): two members (of $qty) do not get through enter.
sub too_few
{
	my ($p, $what) = @_;
	my @m = map { ZklockTest::Session->new($node, "few$_") } 1 .. 2;
	$_->start("SELECT zk_double_barrier_enter('$p', $qty, '2s')") for @m;
	is(join(',', map { $_->result(15)->{out} } @m), 'f,f',
		"$what: an enter with 2 of $qty members times out");
	ok(wait_until(sub { !@{ member_nodes($p) } }, 10, 'the member nodes to go'),
		"$what: their member nodes are gone");
	ok(!$peer->exists("$p/ready"), "$what: no P/ready was made");
	$_->quit for @m;
	return;
}

# ready_deleted($p, $what): P/ready goes within a bounded time, and
# nothing is left to delete.
sub ready_deleted
{
	my ($p, $what) = @_;
	ok(wait_until(sub { !$peer->exists("$p/ready") }, 15, "$p/ready to go"),
		"$what: P/ready is deleted");
	ok(wait_sql($node, 'SELECT deletes_pending FROM zk_status()', '0', 10),
		"$what: deletes_pending is back to 0");
	return;
}

############################################################################
# 1. Crash-restart.
############################################################################
subtest 'a held-back P/ready delete survives a crash-restart and is applied once ZooKeeper is back' => sub {
	{
		my $p = '/t702/crash';
		pending_ready($p);
		crash_restart();
		ok($peer->exists("$p/ready"), 'crash: P/ready is still there during the fault');
		heal('crash');
		ready_deleted($p, 'crash');
		too_few($p, 'crash');
	}
};

############################################################################
# 2. Full restart: pg_ctl stop -m immediate, start.
############################################################################
subtest 'a held-back P/ready delete survives pg_ctl stop -m immediate and start' => sub {
	{
		my $p = '/t702/restart';
		pending_ready($p);
		$node->stop('immediate');
		$node->start;
		ok(wait_back($node, 60), 'restart: the cluster accepts queries again');
		ok($peer->exists("$p/ready"), 'restart: P/ready is still there during the fault');
		heal('restart');
		ready_deleted($p, 'restart');
		too_few($p, 'restart');
	}
};

############################################################################
# 3. A later round's P/ready is not ours to delete.
############################################################################
subtest 'a later round\'s P/ready is never deleted' => sub {
	{
		my $p = '/t702/new_round';
		my $old = pending_ready($p);
		# another member removes P/ready; a new round of two Curator members
		# (barrier of 2) makes a new one and stays in
		like($peer->delete("$p/ready"), qr/^deleted/, 'new round: P/ready removed by another client');
		$peer->denter($_, $p, 2, 20000) for qw(c1 c2);
		is($peer->entered_result($_, 25), 'true', "new round: Curator member $_ entered") for qw(c1 c2);
		my $new = $peer->czxid("$p/ready");
		ok(defined $new && $new ne $old, "new round: a new P/ready (czxid " . ($new // 'none') . " after $old)");
		crash_restart();
		heal('new round');
		ok(wait_sql($node, 'SELECT deletes_pending FROM zk_status()', '0', 15),
			'new round: the pending delete is done');
		is($peer->czxid("$p/ready"), $new, "new round: the new round's P/ready is still there");
		$peer->dleave($_, 20000) for qw(c1 c2);
		is($peer->left_result($_, 25), 'true', "new round: Curator member $_ left") for qw(c1 c2);
		ok(!$peer->exists("$p/ready"), 'new round: its P/ready went with its leave');
	}
};

############################################################################
# 4. A damaged file.
############################################################################
subtest 'a damaged file of pending deletes is ignored with a WARNING' => sub {
	{
		my $f = $node->data_dir . '/zklock.deletes';
		ok(!-e $f, 'nothing pending: no file of pending deletes');
		$node->stop;
		open(my $fh, '>', $f) or die "cannot write $f: $!";
		print $fh "zklock pending deletes 1 0badc0de\nhosts x\n\0\x{ff}garbage\t\t\n";
		close $fh;
		my $off = -s $node->logfile;
		$node->start;
		ok(wait_connected($node, 30), 'damaged file: zklock connected');
		my $log = slurp_file($node->logfile, $off);
		like($log, qr/WARNING:  zklock: ignoring "zklock.deletes"/, 'damaged file: a WARNING says it is ignored');
		unlike($log, qr/terminated by signal|PANIC/, 'damaged file: no process crashed');
		is(deletes_pending($node), '0', 'damaged file: nothing pending');
		ok(!-e $f, 'damaged file: replaced by what the table holds (nothing)');
		my $s = ZklockTest::Session->new($node, 'after');
		is($s->value("SELECT zk_double_barrier_enter('/t702/after', 1, '5s')"), 't', 'damaged file: a barrier of one enters');
		is($s->value("SELECT zk_double_barrier_leave('/t702/after', '5s')"), 't', '... and leaves');
		ok(!$peer->exists('/t702/after/ready'), '... and its P/ready is gone');
		$s->quit;
	}
};

############################################################################
# 5. An ensemble rebuilt from nothing numbers its zxids again.
############################################################################
# The delete of P/ready is recorded with its creation zxid, so a later
# round's P/ready (another zxid) is never deleted.  But a ZooKeeper rebuilt
# from nothing on the same hosts numbers its transactions from the start
# again: a node at the same path may get the very same creation zxid.  The
# delete recorded for the old ensemble must not remove it.
subtest 'an ensemble rebuilt from nothing: a P/ready with the same path and creation zxid is not deleted' => sub {
	{
		my $p = '/t702/rebuilt';
		my $czxid = pending_ready($p);
		$node->stop('immediate');
		$peer->quit;
		wipe_zk($zk);
		restart_zk($zk);
		$peer = new_peer($zk);
		# transactions until the next node gets P/ready's creation zxid
		my ($i, $last) = (0, -1);
		quietly(sub {
			while ($i < 100000)
			{
				$i++;
				$peer->ephemeral("$p/fill$i");
				$last = $peer->czxid("$p/fill$i");
				last if $last >= $czxid - 1;
			}
		});
		is($last, $czxid - 1, "rebuilt: $i transactions later the next zxid is P/ready's ($czxid)");
		$peer->ephemeral("$p/ready");
		is($peer->czxid("$p/ready"), $czxid, 'rebuilt: the new ensemble has a P/ready with the same creation zxid');
		my $off = -s $node->logfile;
		$proxy->set_mode('pass');
		$node->start;
		ok(wait_back($node, 60), 'rebuilt: the cluster accepts queries again');
		ok(wait_connected($node, 30), 'rebuilt: the worker connected to the new ensemble');
		ok(wait_sql($node, 'SELECT deletes_pending FROM zk_status()', '0', 15),
			'rebuilt: the pending delete is done');
		is($peer->czxid("$p/ready"), $czxid, "rebuilt: the new ensemble's P/ready is still there");
		like(slurp_file($node->logfile, $off), qr/"\Q$p\E\/ready" is not deleted: it was made again/,
			'rebuilt: the log says why it was not deleted');
	}
};

$peer->quit;
$node->stop;
$proxy->stop;
stop_zk($zk);
done_testing();

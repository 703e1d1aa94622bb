
# 152_barrier_answers: the barriers answer what happened, and a double
# barrier member that gives up its leave never strands the others.
#
# What users rely on:
#   1. A zero timeout is a look, not a refusal: zk_barrier_wait(p, '0')
#      says true when no barrier is set and false while one is;
#      zk_double_barrier_enter(p, n, '0') enters when the quorum is there
#      now and otherwise returns false without leaving a member node;
#      zk_double_barrier_leave(p, '0') leaves when nobody else is in.
#   2. A leave returns true only once its deletes are applied: right after
#      it, neither our member node nor P/ready is in ZooKeeper (so the
#      next round cannot pass with too few members).
#   3. A leave that gives up (zero timeout, a timeout while another member
#      stays in, or a cancel before the worker even picked it up) returns
#      false and still deletes our member node, so the other members'
#      leaves complete instead of waiting for us forever.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use ZklockTest;

my $zk = start_zk();
my $node = new_zklock_node('banswers', $zk, "zklock.session_timeout = '10s'\n");
my $peer = new_peer($zk);
my ($a, $b) = map { ZklockTest::Session->new($node, $_) } qw(a b);

# the children of p (member nodes and ready), sorted
sub kids
{
	my ($p) = @_;
	return join(' ', sort @{ $peer->children($p) // [] });
}

# the member node of session s in the double barrier at p (zk_locks)
sub member_of
{
	my ($s, $p) = @_;
	return zk_lock_rows($node, $p)->{ $s->pid }{node};
}

############################################################################
# 1a. zk_barrier_wait with a zero timeout looks
############################################################################
subtest 'zk_barrier_wait with a zero timeout looks instead of refusing' => sub {
	my $bp = '/t152/barrier';
	is($a->value("SELECT zk_barrier_wait('$bp', '0')"), 't',
		"zk_barrier_wait(p, '0') with no barrier set: true");
	is($a->value("SELECT zk_barrier_set('$bp')"), 't', 'the barrier is set');
	is($a->value("SELECT zk_barrier_wait('$bp', '0')"), 'f', "zk_barrier_wait(p, '0') while it is set: false");
	is($a->value("SELECT zk_barrier_remove('$bp')"), 't', 'the barrier is removed');
	is($a->value("SELECT zk_barrier_wait('$bp', '0')"), 't', "zk_barrier_wait(p, '0') once it is down: true");
};

############################################################################
# 1b. double barrier enter and leave with a zero timeout look
############################################################################
subtest 'double barrier enter and leave with a zero timeout look' => sub {
	my $p1 = '/t152/one';
	is($a->value("SELECT zk_double_barrier_enter('$p1', 1, '0')"), 't',
		"enter(p, 1, '0'): the quorum of one is there at once: true");
	my $m1 = member_of($a, $p1);
	like($m1 // '', qr/^[0-9a-f-]{36}$/, '... with a member node');
	is(kids($p1), "$m1 ready", '... and P/ready');
	is($a->value("SELECT zk_double_barrier_leave('$p1', '0')"), 't',
		"leave(p, '0') with nobody else in: true");
	is(kids($p1), '', '... and right after it neither our member node nor P/ready is left');

	my $p2 = '/t152/two';
	is($a->value("SELECT zk_double_barrier_enter('$p2', 2, '0')"), 'f',
		"enter(p, 2, '0') alone: false");
	is(kids($p2), '', '... and its member node is gone');
	is($node->safe_psql('postgres', 'SELECT count(*) FROM zk_locks'), '0', '... nor is it in zk_locks');
};

############################################################################
# 2. a leave returns only once P/ready is deleted (two members)
############################################################################
subtest 'a leave returns true only once P/ready is deleted' => sub {
	my $p3 = '/t152/pair';
	$b->start("SELECT zk_double_barrier_enter('$p3', 2, '20s')");
	is($a->value("SELECT zk_double_barrier_enter('$p3', 2, '20s')"), 't', 'a enters the pair');
	is($b->result(20)->{out}, 't', 'b enters the pair');
	$b->start("SELECT zk_double_barrier_leave('$p3', '20s')");
	is($a->value("SELECT zk_double_barrier_leave('$p3', '20s')"), 't', 'a leaves');
	is($b->result(20)->{out}, 't', 'b leaves');
	is(kids($p3), '', 'right after both leaves returned, nothing is left (no P/ready)');
	is($a->value("SELECT zk_double_barrier_enter('$p3', 2, '0')"), 'f',
		'the next round does not pass with one member');
	is(kids($p3), '', '... and leaves nothing');
};

my (%node_of, $low, $high, $lown, $highn);    # the two members of parts 3a and 3b

############################################################################
# 3a. the lowest member leaves with a zero timeout while another is in
############################################################################
subtest 'the lowest member leaving with a zero timeout deletes its node, so the other leaves' => sub {
	my $p4 = '/t152/zero';
	$b->start("SELECT zk_double_barrier_enter('$p4', 2, '20s')");
	is($a->value("SELECT zk_double_barrier_enter('$p4', 2, '20s')"), 't', 'a enters');
	is($b->result(20)->{out}, 't', 'b enters');
	%node_of = (a => member_of($a, $p4), b => member_of($b, $p4));
	# the lowest member is the one Curator's protocol makes wait for the others
	($low, $high) = $node_of{a} lt $node_of{b} ? ($a, $b) : ($b, $a);
	($lown, $highn) = ($node_of{ $low->name }, $node_of{ $high->name });
	is($low->value("SELECT zk_double_barrier_leave('$p4', '0')"), 'f',
		'the lowest member leaves with a zero timeout: false (another member is in)');
	# a leave that gives up answers at once and its member node's delete
	# follows, recorded in the pending-delete table first (SQL reference):
	# seen from another client it is gone moments later, not necessarily
	# before the answer (a loaded machine showed the node still listed)
	ok(wait_until(sub { kids($p4) eq "$highn ready" }, 10),
		"... and its member node is deleted right after (only the other member and P/ready are left)");
	is($high->value("SELECT zk_double_barrier_leave('$p4', '10s')"), 't',
		'the other member then leaves (it does not wait for the one that gave up)');
	is(kids($p4), '', 'nothing is left');
};

############################################################################
# 3b. the highest member's timed leave waits for the lowest, who stays
############################################################################
subtest 'a timed leave that gives up deletes its member node, so the lowest member leaves' => sub {
	my $p6 = '/t152/timed';
	$b->start("SELECT zk_double_barrier_enter('$p6', 2, '20s')");
	is($a->value("SELECT zk_double_barrier_enter('$p6', 2, '20s')"), 't', 'a enters');
	is($b->result(20)->{out}, 't', 'b enters');
	%node_of = (a => member_of($a, $p6), b => member_of($b, $p6));
	($low, $high) = $node_of{a} lt $node_of{b} ? ($a, $b) : ($b, $a);
	($lown, $highn) = ($node_of{ $low->name }, $node_of{ $high->name });
	is($high->value("SELECT zk_double_barrier_leave('$p6', '500ms')"), 'f',
		'the highest member leaves with a timeout while the lowest stays: false');
	ok(wait_until(sub { kids($p6) eq "$lown ready" }, 10),
		'... its member node is deleted right after (as in part 3a), the lowest is still in');
	is($low->value("SELECT zk_double_barrier_leave('$p6', '10s')"), 't', 'the lowest then leaves');
	is(kids($p6), '', 'nothing is left');
};

############################################################################
# 3c. a leave cancelled before the worker picked it up
############################################################################
subtest 'a leave cancelled before the worker picked it up deletes its member node' => sub {
	my $p5 = '/t152/cancel';
	$b->start("SELECT zk_double_barrier_enter('$p5', 2, '20s')");
	is($a->value("SELECT zk_double_barrier_enter('$p5', 2, '20s')"), 't', 'a enters');
	is($b->result(20)->{out}, 't', 'b enters');
	my $an = member_of($a, $p5);
	my $worker = worker_pid($node);
	ok(kill('STOP', $worker), "the worker (pid $worker) is stalled");
	$a->start("SELECT zk_double_barrier_leave('$p5', '1h')");
	ok( wait_sql($node, q{SELECT count(*) FROM zk_locks WHERE state = 'leaving' AND pid = } . $a->pid, '1', 10),
		"a's leave is queued for the stalled worker");
	$node->safe_psql('postgres', 'SELECT pg_cancel_backend(' . $a->pid . ')');
	my $r = $a->result(10);
	like($r->{err}, qr/canceling statement due to user request/, "a's leave is cancelled");
	ok(kill('CONT', $worker), 'the worker goes on');
	ok(wait_until(sub { kids($p5) !~ /\Q$an\E/ }, 10, "a's member node to go"),
		"a's member node is deleted although the worker never started the leave");
	is($b->value("SELECT zk_double_barrier_leave('$p5', '10s')"), 't', 'b leaves (it does not wait for a)');
	is(kids($p5), '', 'nothing is left');
	is($node->safe_psql('postgres', 'SELECT count(*) FROM zk_locks'), '0', 'zk_locks is empty');
	is(deletes_pending($node), 0, 'no delete is pending');

};
$a->quit;
$b->quit;
$peer->quit;
$node->stop;
stop_zk($zk);
done_testing();


# 160_double_barrier: the double barrier (Curator's DistributedDoubleBarrier).
#
# What users rely on: nobody gets through enter() before member_qty
# members are there, then all do (SQL and Curator members mixed); nobody
# gets through leave() before every member left; a late member of an
# already-full barrier enters and leaves too; a timed enter with too few
# members returns false and takes its member node away.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use ZklockTest;

my $zk = start_zk();
my $node = new_zklock_node('dbarrier', $zk);
require_functions($node, qw(zk_double_barrier_enter zk_double_barrier_leave));
my $peer = new_peer($zk);

my $uuid_re = qr/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

# Members: SQL sessions and Curator ids, in arrival order.
sub members
{
	my ($p, $nsql, $ncur) = @_;
	my @m;
	for my $i (1 .. ($nsql > $ncur ? $nsql : $ncur))
	{
		push @m, { kind => 'sql', s => ZklockTest::Session->new($node, "m$i"), name => "m$i" } if $i <= $nsql;
		push @m, { kind => 'curator', id => "c$i", name => "c$i" } if $i <= $ncur;
	}
	return @m;
}

sub member_nodes
{
	my ($p) = @_;
	return [ grep { $_ ne 'ready' } @{ $peer->children($p) // [] } ];
}

sub finished
{
	my ($m, $what) = @_;
	return $m->{s}->done if $m->{kind} eq 'sql';
	my $word = $what eq 'enter' ? 'entered' : 'left';
	return $peer->has_reply(qr/^($word|error) \Q$m->{id}\E\b/);
}

sub outcome
{
	my ($m, $what) = @_;
	if ($m->{kind} eq 'sql')
	{
		my $r = $m->{s}->result;
		diag("$m->{name}: $r->{err}") if $r->{err} =~ /ERROR/;
		return $r->{out} eq 't' ? 'true' : $r->{out} eq 'f' ? 'false' : "error $r->{err}";
	}
	return ($what eq 'enter' ? $peer->entered_result($m->{id}) : $peer->left_result($m->{id})) // 'no reply';
}

sub start_enter
{
	my ($m, $p, $qty) = @_;
	if ($m->{kind} eq 'sql') { $m->{s}->start("SELECT zk_double_barrier_enter('$p', $qty, '30s')"); }
	else { $peer->denter($m->{id}, $p, $qty, 30000); }
}

sub start_leave
{
	my ($m, $p) = @_;
	if ($m->{kind} eq 'sql') { $m->{s}->start("SELECT zk_double_barrier_leave('$p', '30s')"); }
	else { $peer->dleave($m->{id}, 30000); }
}

# run_barrier($p, $qty, @members): the first $qty - 1 members enter and
# block, the others complete the barrier; then all but one leave and block,
# the last one leaves and all complete.
sub run_barrier
{
	my ($p, $qty, @m) = @_;
	my $n = @m;
	for my $k (0 .. $qty - 2)
	{
		start_enter($m[$k], $p, $qty);
		ok(wait_until(sub { @{ member_nodes($p) } == $k + 1 }, 10, 'member node'),
			"$m[$k]{name} is a member (node created)");
	}
	# Absence of completion can only be observed for a while.
	ok(!wait_until(sub { grep { finished($_, 'enter') } @m[ 0 .. $qty - 2 ] }, 1.0,
			'(expected) nobody entered'),
		($qty - 1) . ' members: nobody has entered yet');
	ok(!$peer->exists("$p/ready"), 'no ready node yet');
	start_enter($_, $p, $qty) for @m[ $qty - 1 .. $n - 1 ];
	my @res = map { outcome($_, 'enter') } @m;
	is_deeply(\@res, [ ('true') x $n ], "all $n members entered") or diag("@res");
	ok($peer->exists("$p/ready"), 'the ready node exists');
	my $nodes = member_nodes($p);
	is(scalar @$nodes, $n, "$n member nodes");
	like($_, $uuid_re, "member node $_ is a bare UUID, as Curator names it") for @$nodes[ 0 .. 1 ];
	{
		my $parts = participants_rows($node, $p);
		is(scalar(grep { $_->{kind} eq 'member' } @$parts), $n, "zk_participants: $n members");
		is(scalar(grep { $_->{kind} eq 'ready' } @$parts), 1, 'zk_participants: the ready node');
	}

	start_leave($_, $p) for @m[ 0 .. $n - 2 ];
	# Absence of completion can only be observed for a while.
	ok(!wait_until(sub { grep { finished($_, 'leave') } @m[ 0 .. $n - 2 ] }, 1.5, '(expected) nobody left'),
		'while one member is still in, nobody gets through leave');
	start_leave($m[-1], $p);
	@res = map { outcome($_, 'leave') } @m;
	is_deeply(\@res, [ ('true') x $n ], "all $n members left") or diag("@res");
	ok(wait_children_count($peer, $p, 0), 'no member node and no ready node left');
}

my (@m5, $s, $s2, $p3);    # members, sessions and a path shared by the parts below

# 1. 5 members (3 SQL, 2 Curator) on a barrier of 5.
subtest '5 members (SQL and Curator) on a barrier of 5 all enter and leave together' => sub {
	@m5 = members('/t160/five', 3, 2);
	run_barrier('/t160/five', 5, @m5);
	is($node->safe_psql('postgres', 'SELECT count(*) FROM zk_locks'), '0', 'zk_locks is empty');
};

# 2. 6 members (3 SQL, 3 Curator) on a barrier of 5: all enter and leave.
subtest '6 members on a barrier of 5: all enter and leave' => sub {
	my @m6 = (@m5, { kind => 'curator', id => 'c3', name => 'c3' });
	run_barrier('/t160/six', 5, @m6);
};

# 3. A timed enter with too few members returns false, leaving no node.
subtest 'a timed enter with too few members returns false and leaves no node' => sub {
	$p3 = '/t160/few';
	$s = $m5[0]{s};
	$peer->denter('cf', $p3, 3, 30000);
	ok(wait_until(sub { @{ member_nodes($p3) } == 1 }, 10), 'one Curator member waits');
	is($s->value("SELECT zk_double_barrier_enter('$p3', 3, '800ms')"), 'f',
		'a timed enter with 2 of 3 members returns false');
	ok(wait_until(sub { @{ member_nodes($p3) } == 1 }, 10, 'only the Curator member'),
		'the SQL member node was removed');
	ok(!$peer->exists("$p3/ready"), 'no ready node');
	ok(!$peer->has_reply(qr/^(entered|error) cf\b/), 'the Curator member has not entered');
	is($node->safe_psql('postgres', 'SELECT count(*) FROM zk_locks WHERE pid = ' . $s->pid), '0',
		'zk_locks has nothing for the SQL session');
};

# 3b. A member that comes and goes does not let a waiting member through
#     without a quorum (Curator <= 5.9 could report success after one
#     wake-up; zklock must not).
subtest 'a member that comes and goes does not let a waiting member through without a quorum' => sub {
	my $p4 = '/t160/quorum';
	my $sq = $m5[4]{s};    # m3
	$sq->start("SELECT zk_double_barrier_enter('$p4', 3, '20s')");
	ok(wait_until(sub { @{ member_nodes($p4) } == 1 }, 10), 'a SQL member waits for 3');
	is($s->value("SELECT zk_double_barrier_enter('$p4', 3, '500ms')"), 'f',
		'a second member gives up after 500 ms');
	ok(wait_until(sub { @{ member_nodes($p4) } == 1 }, 10), 'its node is gone again');
	ok(!wait_until(sub { $sq->done }, 1.0, '(expected) no entry'),
		'the waiting member has not entered (1 of 3)');
	$peer->denter("q$_", $p4, 3, 20000) for 1 .. 2;
	is($peer->entered_result("q$_"), 'true', "Curator member q$_ entered") for 1 .. 2;
	my $rq = $sq->result;
	is($rq->{out}, 't', 'with the quorum the waiting SQL member entered') or diag($rq->{err});
	$sq->start("SELECT zk_double_barrier_leave('$p4', '20s')");
	$peer->dleave("q$_", 20000) for 1 .. 2;
	is($peer->left_result("q$_"), 'true', "q$_ left") for 1 .. 2;
	is($sq->result->{out}, 't', 'the SQL member left');
};

# 4. A cancelled enter leaves no member node.
subtest 'a cancelled enter leaves no member node' => sub {
	my $p5 = '/t160/cancel';
	$s->start("SELECT zk_double_barrier_enter('$p5', 3)");
	ok(wait_until(sub { @{ member_nodes($p5) } == 1 }, 10), 'SQL member waits to enter');
	$node->safe_psql('postgres', 'SELECT pg_cancel_backend(' . $s->pid . ')');
	my $rc = $s->result;
	is($rc->{sqlstate}, '57014', 'the cancelled enter fails with 57014') or diag($rc->{err});
	ok(wait_until(sub { @{ member_nodes($p5) } == 0 }, 10, 'no member node'), 'its member node is gone');
};

# 5. A timed leave while another member stays in: false, and the member
#    that gave up is not a member any more; the other then leaves alone.
subtest 'a timed leave that gives up is no member any more; the other then leaves alone' => sub {
	my $p6 = '/t160/leave_timeout';
	$s2 = $m5[2]{s};
	$s->start("SELECT zk_double_barrier_enter('$p6', 2, '10s')");
	is($s2->value("SELECT zk_double_barrier_enter('$p6', 2, '10s')"), 't', 'second of 2 members enters');
	is($s->result->{out}, 't', 'first member entered too');
	is($s->value("SELECT zk_double_barrier_leave('$p6', '800ms')"), 'f',
		'a timed leave returns false while the other member stays in');
	ok(wait_until(sub { @{ member_nodes($p6) } == 1 }, 10, 'one member node'), 'its membership was withdrawn');
	is($s2->value("SELECT zk_double_barrier_leave('$p6', '5s')"), 't', 'the last member leaves');
	ok(wait_children_count($peer, $p6, 0), 'nothing left under the barrier');
	is($node->safe_psql('postgres', 'SELECT count(*) FROM zk_locks'), '0', 'zk_locks is empty');
};

# 6. A member whose backend exits is no member any more: the other one
#    can leave.
subtest 'a member whose backend exits is no member any more: the other one can leave' => sub {
	my $p7 = '/t160/exit';
	my $s3 = ZklockTest::Session->new($node, 'gone');
	$s3->start("SELECT zk_double_barrier_enter('$p7', 2, '10s')");
	is($s2->value("SELECT zk_double_barrier_enter('$p7', 2, '10s')"), 't', 'two members entered');
	is($s3->result->{out}, 't', '... both');
	$node->safe_psql('postgres', 'SELECT pg_terminate_backend(' . $s3->pid . ')');
	ok(wait_until(sub { @{ member_nodes($p7) } == 1 }, 10, 'one member node'),
		"the exited backend's member node is removed");
	is($s2->value("SELECT zk_double_barrier_leave('$p7', '5s')"), 't', 'the remaining member leaves');
};

# 7. Leaving without having entered.
subtest 'leaving without having entered fails with 55000' => sub {
	my $r = $s->query("SELECT zk_double_barrier_leave('$p3')");
	is($r->{sqlstate}, '55000', 'leave without enter: ERROR 55000') or diag($r->{err});
};

# 8. Curator's own timed enter, for comparison.  Curator 5.4.0 (Debian 12)
#    and 5.7.1 (Debian 13) ship the same DistributedDoubleBarrier (their
#    compiled classes are identical), so both platforms see the same thing:
#    enter returns false when its time is up and leaves its member node in
#    place until leave() or the end of the session.  A zklock member that
#    gives up takes its node away at once (2. and 3b.), and a waiting zklock
#    member only enters with a real quorum (3b.).
subtest 'Curator\'s own timed enter leaves its member node until leave(), for comparison' => sub {
	my $cv = join('.', curator_version());
	my $p8 = '/t160/curator_timeout';
	$peer->denter('ct', $p8, 2, 500);
	is($peer->entered_result('ct'), 'false', "Curator $cv: a timed enter with too few members returns false");
	is(scalar @{ member_nodes($p8) }, 1, "Curator $cv: its member node stays after the timeout");
	$peer->dleave('ct', 5000);
	is($peer->left_result('ct'), 'true', "Curator $cv: leave() takes it away");
	ok(wait_until(sub { @{ member_nodes($p8) } == 0 }, 10), 'no member node left');

};
$_->{s}->quit for grep { $_->{kind} eq 'sql' } @m5;
$peer->quit;
$node->stop;
stop_zk($zk);
done_testing();


# 192_counter_fold: adds to one DistributedAtomicLong that wait in the
# worker at the same time are folded into one read and one write of their
# sum (recipes/counter_fold.c), and each call still gets the answer it would
# have got alone in some serial order.
#
# What users rely on:
#   - zk_atomic_long_add(path, delta) returns the value after its own add;
#     with SQL sessions and Curator clients adding at once no add is lost
#     or applied twice, and the values returned fit one serial order (with
#     adds of 1: every value from initial + 1 to the final one is returned
#     exactly once, and each session's values grow);
#   - an add whose backend gave up before the write left is not applied;
#   - an add that would overflow fails alone (22003); the others are made;
#   - a folded write whose answer is lost fails every call in it with
#     08006 ("may or may not have been applied"), and is applied once:
#     also when the worker is restarted before the answer came (the new
#     worker finds the mark in each call's slot and sends nothing again).
# Counted for real: the worker talks to ZooKeeper through a TCP proxy
# (test/perl/ZklockProxy.pm) whose stats count the setData requests it
# relays (set_requests); the Curator peer talks to ZooKeeper directly, so
# only the worker's writes are counted.  The proxy's hold_replies mode
# keeps the answer of a fold's read back while more adds join it.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use ZklockTest;
use ZklockFault;
use ZklockProxy;

my $zk = start_zk();
my $proxy = ZklockProxy->start($zk);
my $node = new_zklock_node('counter_fold', $proxy->connect,
	"zklock.connect_timeout = '40s'\n");
my $peer = new_peer($zk);

sub sql { return $node->safe_psql('postgres', $_[0]); }
sub peer_long { return $peer->long_get($_[0]); }

# n adds of 1; the values returned, in order
sql(q{
CREATE FUNCTION add_n(p text, n int) RETURNS text LANGUAGE plpgsql AS $$
DECLARE r text := '';
BEGIN
  FOR i IN 1 .. n LOOP
    r := r || zk_atomic_long_add(p, 1) || ' ';
  END LOOP;
  RETURN r;
END $$});

# start the adds of @$sessions (one statement each) while the proxy keeps
# the worker's replies back, so they all wait on the read of one fold;
# returns the proxy's stats from before
sub start_held
{
	my ($sessions, $sqls) = @_;
	my $before = $proxy->set_mode('hold_replies');
	$sessions->[$_]->start($sqls->[$_]) for 0 .. $#$sessions;
	# every call reaches the worker (its slot is claimed at once)
	usleep(1_500_000);
	return $before;
}

subtest 'eight sessions and a Curator client adding at once: every add once, in one serial order, fewer writes than adds' => sub {
	my $p = '/t192/many';
	my $initial = 100;
	sql(qq{SELECT zk_atomic_long_set('$p', $initial)});
	is(peer_long($p), $initial, "Curator reads $initial");
	my @s = map { ZklockTest::Session->new($node, "add$_") } 1 .. 8;
	my $n = 25;
	my $m = 40;
	my $before = $proxy->stats;
	$_->start(qq{SELECT add_n('$p', $n)}) for @s;
	$peer->send("long_addlog $p $m");
	my @all;
	for my $x (@s)
	{
		my $r = $x->result(180);
		my @v = split ' ', $r->{out} // '';
		is(scalar @v, $n, $x->name . " made $n adds") or diag("err=[$r->{err}]");
		my @grow = grep { $v[$_] <= $v[ $_ - 1 ] } 1 .. $#v;
		is(scalar @grow, 0, $x->name . "'s values grow");
		push @all, @v;
	}
	my $l = $peer->wait_reply(qr/^longlog \Q$p\E/, 180) // '';
	my (undef, undef, @cv) = split ' ', $l;
	is(scalar @cv, $m, "Curator made $m adds");
	push @all, @cv;
	my $after = $proxy->stats;
	my $adds = @s * $n;
	my $total = $adds + $m;
	is(peer_long($p), $initial + $total, 'the value is every add, once');
	is(sql(qq{SELECT zk_atomic_long_get('$p')}), $initial + $total, 'SQL reads the same');
	my @sorted = sort { $a <=> $b } @all;
	is("@sorted", join(' ', $initial + 1 .. $initial + $total),
		'the values returned are each value from the initial one to the final one, once: a serial order');
	my $sets = $after->{set_requests} - $before->{set_requests};
	note("$adds SQL adds made with $sets setData requests from the worker");
	cmp_ok($sets, '<', $adds, "fewer setData requests ($sets) than SQL adds ($adds): adds were folded");
	$_->quit for @s;
};

subtest 'adds waiting together: one write; a backend that gave up is left out' => sub {
	my $p = '/t192/held';
	sql(qq{SELECT zk_atomic_long_set('$p', 0)});
	my @s = map { ZklockTest::Session->new($node, "held$_") } 1 .. 4;
	$s[3]->query(q{SET statement_timeout = '500ms'});
	my $before = start_held(\@s, [ map { qq{SELECT zk_atomic_long_add('$p', $_)} } 1 .. 4 ]);
	$proxy->set_mode('pass');
	my @r = map { $_->result(60) } @s;
	my $after = $proxy->stats;
	is($r[3]{sqlstate}, '57014', 'the add whose statement timed out was cancelled')
	  or diag("out=[$r[3]{out}] err=[$r[3]{err}]");
	my @v;
	for my $i (0 .. 2)
	{
		ok($r[$i]{done} && !defined $r[$i]{sqlstate}, $s[$i]->name . ' added ' . ($i + 1))
		  or diag("err=[$r[$i]{err}]");
		push @v, [ $r[$i]{out}, $i + 1 ];
	}
	# sorted by result, each result is the one before plus its own delta
	my ($prev, $ok) = (0, 1);
	for my $x (sort { $a->[0] <=> $b->[0] } @v)
	{
		$ok = 0 unless $x->[0] == $prev + $x->[1];
		$prev = $x->[0];
	}
	ok($ok, 'the results are the prefix sums of one order of the adds: '
		  . join(' ', map { $_->[0] } @v));
	is(peer_long($p), 6, 'Curator reads 6: the cancelled add was not applied');
	is($after->{set_requests} - $before->{set_requests}, 1, 'the three adds were one setData');
	$_->quit for @s;
};

subtest 'an add that would overflow fails alone; the others of its fold are made' => sub {
	my $p = '/t192/overflow';
	my $max = '9223372036854775807';
	sql(qq{SELECT zk_atomic_long_set('$p', $max - 2)});
	my @s = map { ZklockTest::Session->new($node, "ovf$_") } 1 .. 3;
	my $before = start_held(\@s, [ map { qq{SELECT zk_atomic_long_add('$p', $_)} } 1, 5, 1 ]);
	$proxy->set_mode('pass');
	my @r = map { $_->result(60) } @s;
	my $after = $proxy->stats;
	is($r[1]{sqlstate}, '22003', 'the add of 5 is out of range (22003)')
	  or diag("out=[$r[1]{out}] err=[$r[1]{err}]");
	ok(!defined $r[0]{sqlstate} && !defined $r[2]{sqlstate}, 'both adds of 1 were made');
	is(join(' ', sort ($r[0]{out}, $r[2]{out})), '9223372036854775806 9223372036854775807',
		'... returning max - 1 and max');
	is(peer_long($p), $max, 'Curator reads the maximum');
	is($after->{set_requests} - $before->{set_requests}, 1, 'the two adds were one setData');
	$_->quit for @s;
};

subtest 'a folded write whose answer is lost: every add in it fails with 08006, applied once' => sub {
	my $p = '/t192/doubt';
	my $initial = 50;
	sql(qq{SELECT zk_atomic_long_set('$p', $initial)});
	my $s0 = status_row($node)->{session_id};
	my @s = map { ZklockTest::Session->new($node, "doubt$_") } 1 .. 4;
	my $before = start_held(\@s, [ map { qq{SELECT zk_atomic_long_add('$p', 1)} } @s ]);
	# the read's answer is handed on, the fold's setData goes out and is
	# applied, its answer is dropped; then the connection is cut
	my $st = $proxy->set_mode('drop_set_replies');
	ok(wait_until(sub { $proxy->stats->{set_requests} > $st->{set_requests} }, 10, 'the setData'),
		'the folded setData went out');
	ok(wait_until(sub { $proxy->stats->{dropped_s2c} > $st->{dropped_s2c} }, 10, 'its reply bytes'),
		'... and its answer was dropped');
	usleep(200_000);
	$proxy->set_mode('cut');
	my @r = map { $_->result(45) } @s;
	$proxy->set_mode('pass');
	ok(wait_connected($node), 'connected again');
	is(status_row($node)->{session_id}, $s0, '... in the same session');
	my $after = $proxy->stats;
	for my $i (0 .. $#s)
	{
		is($r[$i]{sqlstate}, '08006', $s[$i]->name . ': its add was in the write whose answer was lost: 08006')
		  or diag("out=[$r[$i]{out}] err=[$r[$i]{err}]");
		like($r[$i]{err}, qr/may or may not have been applied/, '... saying its outcome is unknown');
	}
	is($after->{set_requests} - $before->{set_requests}, 1, 'one setData carried the four adds');
	my $final = peer_long($p);
	cmp_ok($final - $initial, '<=', 4, "applied at most once (grew by " . ($final - $initial) . ')');
	is($final, $initial + 4, '... and it was applied: the four adds, once');
	is($s[0]->value(qq{SELECT zk_atomic_long_add('$p', 1)}), $initial + 5, 'the next add sees the one write');
	$_->quit for @s;
};

subtest 'a folded write in doubt when the worker restarts: the new worker fails every add in it (08006)' => sub {
	my $p = '/t192/restart';
	my $initial = 70;
	sql(qq{SELECT zk_atomic_long_set('$p', $initial)});
	my $s0 = status_row($node)->{session_id};
	my @s = map { ZklockTest::Session->new($node, "term$_") } 1 .. 3;
	my $before = start_held(\@s, [ map { qq{SELECT zk_atomic_long_add('$p', 1)} } @s ]);
	my $st = $proxy->set_mode('drop_set_replies');
	ok(wait_until(sub { $proxy->stats->{set_requests} > $st->{set_requests} }, 10, 'the setData'),
		'the folded setData went out');
	ok(wait_until(sub { $proxy->stats->{dropped_s2c} > $st->{dropped_s2c} }, 10, 'its reply bytes'),
		'... and its answer was dropped');
	# the marks are in the slots: the new worker takes the adds over and
	# finds each of them in doubt
	my $old = worker_pid($node);
	ok(kill('TERM', $old), "worker $old stopped with SIGTERM, the write's answer not in");
	ok(wait_until(sub { !kill(0, $old) || worker_pid($node) ne $old }, 15, "worker $old to go"),
		'the old worker is gone');
	$proxy->set_mode('pass');
	ok( wait_until(
			sub {
				my $row = status_row($node);
				$row->{state} eq 'connected' && $row->{worker_pid} ne $old;
			},
			30, 'a new worker, connected'),
		'a new worker is connected');
	is(status_row($node)->{session_id}, $s0, '... in the same session');
	my @r = map { $_->result(45) } @s;
	for my $i (0 .. $#s)
	{
		is($r[$i]{sqlstate}, '08006', $s[$i]->name . ': taken over in doubt: 08006')
		  or diag("out=[$r[$i]{out}] err=[$r[$i]{err}]");
	}
	is($proxy->stats->{set_requests} - $before->{set_requests}, 1,
		'one setData, not sent again by the new worker');
	is(peer_long($p), $initial + 3, 'Curator reads the three adds, applied once');
	$_->quit for @s;
};

is(sql('SELECT count(*) FROM zk_locks'), '0', 'no zk_locks row is left');
$peer->quit;
$node->stop;
$proxy->stop;
stop_zk($zk);
done_testing();

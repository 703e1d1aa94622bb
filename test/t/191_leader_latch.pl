
# 191_leader_latch: leader election (Curator's LeaderLatch) from SQL, with
# Curator LeaderLatch and LeaderSelector clients in the same elections.
#
# What users rely on: SQL participants and Curator LeaderLatches share one
# election in both directions (the first participant leads, the others
# follow it; Curator's getLeader and getParticipants name the SQL ids, and
# zk_leader names Curator's); zk_leader_await returns when leadership
# comes, and false at its timeout; leaving hands leadership to the next;
# a 'session' membership ends with its backend, a 'cluster' one outlives
# it until zk_leader_leave from any backend; zk_leader_xact's COMMIT fails
# when leadership ended before it (here: our node deleted under the
# leader, which Curator's own leader would not notice); a Curator
# LeaderSelector sees SQL's zk_mutex_acquire with zklock.participant_id
# as a participant with that id; bad input gets a clear error and leaves
# nothing in ZooKeeper.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use ZklockTest;

my $zk = start_zk();
my $node = new_zklock_node('leader', $zk);
require_functions($node, qw(zk_leader_join zk_leader_leave zk_has_leadership
	  zk_leader_await zk_leader_xact zk_leader));
my $peer = new_peer($zk);

sub sql { return $node->safe_psql('postgres', $_[0]); }

sub children
{
	my ($path) = @_;
	my $l = $peer->cmd("children $path", qr/^(children|nonode) \Q$path\E\b/);
	return () unless $l && $l =~ /^children \S+ ?(.*)$/;
	return grep { length } split / /, $1;
}

sub latch_nodes { return grep { /latch-/ } children($_[0]); }

subtest 'SQL leads first; a Curator LeaderLatch follows it and takes over when SQL leaves' => sub {
	my $p = '/t191/a';
	my $s = ZklockTest::Session->new($node, 'sa');
	is($s->value(qq{SELECT zk_leader_join('$p', 'sql-a')}), 't', 'SQL joins');
	is($s->value(qq{SELECT zk_has_leadership('$p')}), 't', 'alone, SQL leads');
	is(sql(qq{SELECT zk_leader('$p')}), 'sql-a', 'zk_leader names it');

	$peer->cmd("latch_start ja $p java-a", qr/^latch ja started/);
	ok(wait_until(sub { scalar(latch_nodes($p)) == 2 }, 10), 'Curator joined: two latch nodes');
	is($peer->cmd('latch_has ja', qr/^latchhas ja/), 'latchhas ja false', 'Curator does not lead');
	is($peer->cmd('latch_leader ja', qr/^latchleader ja/), 'latchleader ja sql-a',
		"Curator's getLeader names the SQL participant");
	is($peer->cmd('latch_parts ja', qr/^latchparts ja/), 'latchparts ja sql-a:true java-a:false',
		"Curator's getParticipants: SQL first and leading, then Curator");
	is_deeply([ map { "$_->[0]:$_->[1]" } @{ rows(qq{SELECT data, holds FROM zk_participants('$p') WHERE kind = 'latch' ORDER BY position}) } ],
		[ 'sql-a:t', 'java-a:f' ], 'zk_participants: the same order, the leader marked');
	is($s->value(qq{SELECT zk_has_leadership('$p')}), 't', 'SQL still leads');

	is($s->value(qq{SELECT zk_leader_leave('$p')}), 't', 'SQL leaves');
	ok($peer->wait_reply(qr/^isleader ja$/, 10), 'Curator becomes the leader');
	is($s->value(qq{SELECT zk_has_leadership('$p')}), 'f', 'SQL does not lead');
	is(sql(qq{SELECT zk_leader('$p')}), 'java-a', "zk_leader names Curator's id");
	is(scalar(latch_nodes($p)), 1, "only Curator's node is left");
	$peer->cmd('latch_close ja', qr/^latch ja closed/);
	$s->quit;
};

subtest 'Curator leads first; SQL waits with zk_leader_await and leads when Curator closes' => sub {
	my $p = '/t191/b';
	$peer->cmd("latch_start jb $p java-b", qr/^latch jb started/);
	ok($peer->wait_reply(qr/^isleader jb$/, 10), 'Curator leads');
	my $s = ZklockTest::Session->new($node, 'sb');
	is($s->value(qq{SELECT zk_leader_join('$p')}), 't', 'SQL joins with the default id');
	my $id = $s->value(qq{SELECT data FROM zk_participants('$p') WHERE kind = 'latch' AND position = 2});
	like($id, qr/^[^:]+:\d+(\/.*)?$/, "the default id is host:port[/cluster_name] ($id)");
	is($s->value(qq{SELECT zk_leader_await('$p', '300ms')}), 'f', 'await times out while Curator leads');
	is($s->value(qq{SELECT zk_leader('$p')}), 'java-b', 'zk_leader names Curator');
	$s->start(qq{SELECT zk_leader_await('$p', '20s')});
	$peer->cmd('latch_close jb', qr/^latch jb closed/);
	my $r = $s->result(20);
	is($r->{out}, 't', 'await returns true once Curator closed its latch');
	is($s->value(qq{SELECT zk_has_leadership('$p')}), 't', 'SQL leads');
	$s->quit;
	ok(wait_until(sub { scalar(latch_nodes($p)) == 0 }, 10),
		"the backend's exit left the election (scope 'session'): no latch node left");
};

subtest "scope 'cluster' outlives its backend; another backend sees and leaves it" => sub {
	my $p = '/t191/c';
	is(sql(qq{SELECT zk_leader_join('$p', 'cluster-c', scope => 'cluster')}), 't',
		"a short session joins with scope 'cluster' and exits");
	is(scalar(latch_nodes($p)), 1, 'its node stays');
	is(sql(qq{SELECT zk_has_leadership('$p')}), 't', 'another backend sees the cluster lead');
	is(sql(qq{SELECT pid, recipe, mode, scope, state FROM zk_locks WHERE path = '$p'}),
		'0|leader_latch|leader|cluster|member', "zk_locks shows the cluster's membership, leading");
	is(sql(qq{SELECT zk_leader_join('$p', 'again', scope => 'cluster')}), 'f',
		'joining again with the same scope is false');
	$peer->cmd("latch_start jc $p java-c", qr/^latch jc started/);
	is($peer->cmd('latch_leader jc', qr/^latchleader jc/), 'latchleader jc cluster-c', 'Curator names the cluster leader');
	is(sql(qq{SELECT zk_leader_leave('$p')}), 't', 'a third backend leaves it');
	ok($peer->wait_reply(qr/^isleader jc$/, 10), 'Curator takes over');
	$peer->cmd('latch_close jc', qr/^latch jc closed/);
	ok(wait_until(sub { scalar(latch_nodes($p)) == 0 }, 10), 'nothing left');
};

subtest 'zk_leader_xact: COMMIT fails when our node was deleted under the leader' => sub {
	my $p = '/t191/d';
	sql(q{CREATE TABLE runs(tag text)});
	my $s = ZklockTest::Session->new($node, 'sd');
	$s->value(qq{SELECT zk_leader_join('$p', 'sql-d')});
	$s->value('BEGIN');
	is($s->value(qq{SELECT zk_leader_xact('$p')}), 't', 'leader: zk_leader_xact is true');
	$s->value(q{INSERT INTO runs VALUES ('lost')});
	my ($n) = latch_nodes($p);
	$peer->cmd("delete $p/$n", qr/^deleted /);
	# it notices at once (its own node is watched) and joins again with a
	# new node, which leads again a few round trips later
	ok(wait_until(sub { my @l = latch_nodes($p); @l == 1 && $l[0] ne $n }, 10),
		'the leader noticed its node deleted and joined again with a new node');
	my $r = $s->query('COMMIT');
	is($r->{sqlstate}, '40000', 'COMMIT fails with 40000');
	is(sql(q{SELECT count(*) FROM runs WHERE tag = 'lost'}), '0', 'its row is not written');
	ok(wait_until(sub { $s->value(qq{SELECT zk_has_leadership('$p')}) eq 't' }, 10),
		'the member leads again');

	# a counter claim made after the leadership it relied on ended is fenced
	sql(qq{SELECT zk_atomic_long_set('$p-last', 5)});
	$s->value('BEGIN');
	is($s->value(qq{SELECT zk_leader_xact('$p')}), 't', 'a new transaction relies on the leadership');
	($n) = latch_nodes($p);
	$peer->cmd("delete $p/$n", qr/^deleted /);
	ok(wait_until(sub { my @l = latch_nodes($p); @l == 1 && $l[0] ne $n }, 10),
		'its node deleted, the member joined again');
	ok(wait_until(sub { $s->value(qq{SELECT zk_has_leadership('$p')}) eq 't' }, 10), '... and leads again');
	$r = $s->query(qq{SELECT zk_atomic_long_compare_and_set('$p-last', 5, 6)});
	is($r->{sqlstate}, '40000', 'a claim under the leadership that ended is refused (40000)');
	like($r->{err}, qr/leadership of the election at "\/t191\/d" was lost/, '... naming the election');
	$s->value('ROLLBACK');
	is(sql(qq{SELECT zk_atomic_long_get('$p-last')}), '5', 'the counter is unchanged');

	$s->value('BEGIN');
	is($s->value(qq{SELECT zk_leader_xact('$p')}), 't', 'zk_leader_xact again');
	is($s->value(qq{SELECT zk_atomic_long_compare_and_set('$p-last', 5, 6)}), 't',
		'a claim under the current leadership is written');
	$s->value(q{INSERT INTO runs VALUES ('kept')});
	is($s->query('COMMIT')->{sqlstate}, undef, 'an undisturbed COMMIT succeeds');
	is(sql(q{SELECT count(*) FROM runs WHERE tag = 'kept'}), '1', 'its row is written');
	$s->value('BEGIN');
	$s->value(qq{SELECT zk_leader_xact('$p')});
	is($s->query(q{PREPARE TRANSACTION 'x'})->{sqlstate}, '0A000', 'PREPARE is refused');

	# a membership lives long: its node deleted again and again over its
	# life does not end it (only losses in a row would)
	my $rejoined = 0;
	for my $i (1 .. 12)
	{
		($n) = latch_nodes($p);
		$peer->cmd("delete $p/$n", qr/^deleted /);
		$rejoined++ if wait_until(sub { my @l = latch_nodes($p); @l == 1 && $l[0] ne $n }, 10)
		  && wait_until(sub { $s->value(qq{SELECT zk_has_leadership('$p')}) eq 't' }, 10);
	}
	is($rejoined, 12, 'its node deleted 12 times, one after the other: it joined again and led each time');
	$s->quit;
};

subtest 'LeaderSelector sees a SQL mutex holder with zklock.participant_id' => sub {
	my $p = '/t191/sel';
	$peer->cmd("selector_start ka $p java-sel", qr/^selector ka started/);
	ok($peer->wait_reply(qr/^selected ka$/, 10), 'the Curator selector is selected');
	my $s = ZklockTest::Session->new($node, 'ssel');
	$s->value(q{SET zklock.participant_id = 'sql-sel'});
	$s->start(qq{SELECT zk_mutex_acquire('$p', '20s')});
	ok(wait_waiting($node, $s->pid, $p), 'SQL waits behind the selector');
	is($peer->cmd('selector_parts ka', qr/^selectorparts ka/), 'selectorparts ka java-sel:true sql-sel:false',
		"the selector's participants: itself leading, then SQL by its id");
	$peer->send('selector_yield ka');
	is($s->result(20)->{out}, 't', "SQL takes leadership once the selector's takeLeadership returns");
	is($peer->cmd('selector_parts ka', qr/^selectorparts ka/), 'selectorparts ka sql-sel:true',
		'the selector now sees SQL leading');
	$s->value(qq{SELECT zk_mutex_release('$p')});
	$peer->cmd('selector_close ka', qr/^selector ka closed/);
	$s->quit;
};

subtest 'bad input: clear errors, nothing left in ZooKeeper' => sub {
	my %cases = (
		q{SELECT zk_leader_join(NULL)} => '22004',
		q{SELECT zk_leader_join('/t191/bad', 'x', NULL)} => '22004',
		q{SELECT zk_leader_join('/t191/bad', 'x', 'global')} => '22023',
		q{SELECT zk_leader_join('/t191/bad/_c_0f0e0d0c-0b0a-0908-0706-050403020100-lock-0000000001')} => '22023',
		q{SELECT zk_leader_join('/t191/bad', repeat('x', 5000))} => '22001',
		q{SELECT zk_leader_join('relative')} => '22023',
		q{SELECT zk_leader_await('/t191/bad')} => '55000',
		q{SELECT zk_leader_xact('/t191/bad')} => '55000',
		q{SELECT zk_leader_await('/t191/bad', '-1s')} => '22023',
	);
	for my $q (sort keys %cases)
	{
		my ($st) = psql_error($node, $q);
		is($st, $cases{$q}, "$q: $cases{$q}");
	}
	$node->safe_psql('postgres', q{CREATE DATABASE ascii TEMPLATE template0 ENCODING 'SQL_ASCII' LC_COLLATE 'C' LC_CTYPE 'C'});
	$node->safe_psql('ascii', q{CREATE EXTENSION zklock});
	my ($ret, $out, $err) = $node->psql('ascii', q{SELECT zk_leader_join('/t191/bad', E'\xff\xfe')},
		extra_params => [ '-v', 'VERBOSITY=verbose' ]);
	like($err, qr/22021/, 'an id that is not UTF-8: 22021');
	($ret, $out, $err) = $node->psql('postgres', q{SELECT zk_leader_leave('/t191/bad')});
	is($out, 'f', 'leaving an election never joined is false');
	like($err, qr/WARNING:  not a member of the election/, '... with a WARNING');
	is(sql(q{SELECT zk_has_leadership('/t191/bad')}), 'f', 'has_leadership of a non-member is false');
	is_deeply([ children('/t191/bad') ], [], 'nothing was created at the path');
};

sub rows
{
	my ($q) = @_;
	return [ map { [ split /\|/ ] } grep { length } split /\n/, sql($q) ];
}

done_testing();

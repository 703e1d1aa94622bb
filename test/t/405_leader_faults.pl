
# 405_leader_faults: leader election when the worker's session is lost.
#
# What users rely on: a SQL leader never claims leadership it cannot
# prove.  When its ZooKeeper session expires, or its worker stalls until
# the session expires, a Curator LeaderLatch in the same election takes
# over, and at no moment do both report leadership; a transaction that
# relied on the leadership (zk_leader_xact) cannot COMMIT, and the row it
# wrote is not there.  The SQL membership joins again in the next session
# (behind the new leader), and a 'cluster' membership also survives a
# restart of the worker.
#
# The faults: the worker's connection black-holed (a proxy) until the
# server expires its session, and the worker stopped with SIGSTOP for
# longer than the session timeout.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use ZklockTest;
use ZklockFault;
use ZklockProxy;

my $zk = start_zk();
my $node = new_zklock_node('leaderfaults', $zk, "zklock.connect_timeout = '3s'\n");
require_functions($node, qw(zk_leader_join zk_has_leadership zk_leader_xact));
my $peer = new_peer($zk);
$node->safe_psql('postgres', 'CREATE TABLE runs(tag text)');
# a second cluster reaches ZooKeeper through a proxy that can black-hole it
my $proxy = ZklockProxy->start($zk);
my $pnode = new_zklock_node('leaderproxy', $proxy->connect, "zklock.connect_timeout = '10s'\n");
$pnode->safe_psql('postgres', 'CREATE TABLE runs(tag text)');

sub sql { return $node->safe_psql('postgres', $_[0]); }

sub latch_nodes
{
	my ($path) = @_;
	my $l = $peer->cmd("children $path", qr/^(children|nonode) \Q$path\E\b/);
	return () unless $l && $l =~ /^children \S+ ?(.*)$/;
	return grep { /latch-/ } split / /, $1;
}

# Poll both sides until Curator reports leadership (or $timeout): SQL's
# zk_has_leadership in session $s, then whether Curator's isleader event
# for $cid had arrived before that query began.  Returns (Curator led,
# number of samples where SQL said true after Curator led).
sub watch_takeover
{
	my ($s, $p, $cid, $timeout) = @_;
	my $deadline = time + $timeout;
	my $double = 0;
	my $curator = 0;
	while (time < $deadline)
	{
		my $before = $peer->has_reply(qr/^isleader \Q$cid\E$/);
		my $sqlt = $s->value(qq{SELECT zk_has_leadership('$p')});
		$double++ if $before && $sqlt eq 't';
		if ($before)
		{
			$curator = 1;
			last;
		}
		usleep(50_000);
	}
	$peer->wait_reply(qr/^isleader \Q$cid\E$/, 1) if $curator;
	return ($curator, $double);
}

subtest 'session expiry behind a black hole: Curator takes over, no double leader, COMMIT refused, SQL joins again' => sub {
	my $p = '/t405/exp';
	my $s = ZklockTest::Session->new($pnode, 'se');
	is($s->value(qq{SELECT zk_leader_join('$p', 'sql-e')}), 't', 'SQL joins first');
	is($s->value(qq{SELECT zk_has_leadership('$p')}), 't', 'SQL leads');
	$peer->cmd("latch_start je $p java-e", qr/^latch je started/);
	ok(wait_until(sub { scalar(latch_nodes($p)) == 2 }, 10), 'Curator joined behind SQL');

	$peer->cmd("long_add $p-last 5", qr/^longadd /);
	is($s->value(qq{SELECT zk_atomic_long_get('$p-last')}), '5', 'the job counter is at 5');
	$s->value('BEGIN');
	is($s->value(qq{SELECT zk_leader_xact('$p')}), 't', 'a transaction relies on the leadership');
	$s->value(q{INSERT INTO runs VALUES ('expired')});
	$s->value('SAVEPOINT claim');

	# nothing gets through: the server expires the session after its timeout
	$proxy->set_mode('blackhole');
	my ($led, $double) = watch_takeover($s, $p, 'je', 40);
	ok($led, "Curator becomes the leader once the session expired on the server");
	is($double, 0, 'SQL never said it led once Curator did');
	is($s->value(qq{SELECT zk_has_leadership('$p')}), 'f', 'SQL does not lead');

	# the job claims its period now: the claim waits for the connection,
	# which comes back in a new session
	$s->start(qq{SELECT zk_atomic_long_compare_and_set('$p-last', 5, 6)});
	usleep(300_000);
	$proxy->set_mode('pass');
	my $c = $s->result(30);
	is($c->{sqlstate}, '40000', 'the claim in the new session is refused with 40000');
	like($c->{err}, qr/leadership of the election at "\/t405\/exp" was lost/, '... naming the election');
	is($peer->cmd("long_get $p-last", qr/^long \Q$p-last\E /), "long $p-last true 5",
		'Curator reads the counter unchanged');
	$s->value('ROLLBACK TO SAVEPOINT claim');
	my $r = $s->query('COMMIT');
	is($r->{sqlstate}, '40000', 'the COMMIT that relied on it fails with 40000');
	is($pnode->safe_psql('postgres', q{SELECT count(*) FROM runs WHERE tag = 'expired'}), '0',
		'its row is not there');

	ok(wait_until(sub { scalar(latch_nodes($p)) == 2 }, 30),
		'the worker found its session expired and SQL joined again (two latch nodes)');
	is($peer->cmd('latch_leader je', qr/^latchleader je/), 'latchleader je java-e',
		'Curator still leads; SQL queues behind it');
	$peer->cmd('latch_close je', qr/^latch je closed/);
	ok(wait_until(sub { $s->value(qq{SELECT zk_has_leadership('$p')}) eq 't' }, 10),
		'once Curator leaves, SQL leads again');
	$s->quit;
	ok(wait_until(sub { scalar(latch_nodes($p)) == 0 }, 10), 'nothing left');
};

subtest 'stalled worker: the lease ends SQL leadership before Curator takes over' => sub {
	my $p = '/t405/stall';
	my $s = ZklockTest::Session->new($node, 'ss');
	is(sql(qq{SELECT zk_leader_join('$p', 'sql-s', scope => 'cluster')}), 't',
		"the cluster joins (scope 'cluster')");
	is($s->value(qq{SELECT zk_has_leadership('$p')}), 't', 'it leads');
	$peer->cmd("latch_start js $p java-s", qr/^latch js started/);
	ok(wait_until(sub { scalar(latch_nodes($p)) == 2 }, 10), 'Curator joined behind it');

	$s->value('BEGIN');
	is($s->value(qq{SELECT zk_leader_xact('$p')}), 't', 'a transaction relies on the leadership');
	$s->value(q{INSERT INTO runs VALUES ('stalled')});

	my $wpid = worker_pid($node);
	kill('STOP', $wpid);
	my ($led, $double) = watch_takeover($s, $p, 'js', 40);
	ok($led, 'Curator becomes the leader once the stalled session expires');
	is($double, 0, 'SQL never said it led once Curator did');
	my $r = $s->query('COMMIT');
	is($r->{sqlstate}, '40000', 'the COMMIT fails with 40000 while the worker is still stopped');
	kill('CONT', $wpid);
	is(sql(q{SELECT count(*) FROM runs WHERE tag = 'stalled'}), '0', 'its row is not there');
	ok(wait_until(sub { scalar(latch_nodes($p)) == 2 }, 30),
		'the cluster membership joined again in the new session');
	is($peer->cmd('latch_leader js', qr/^latchleader js/), 'latchleader js java-s', 'behind Curator');

	my ($old, $new) = restart_worker($node);
	ok($new, "the worker restarted ($old -> $new)");
	ok(wait_until(sub { scalar(latch_nodes($p)) == 2 }, 30),
		'after the restart the cluster membership is there again');
	$peer->cmd('latch_close js', qr/^latch js closed/);
	ok(wait_until(sub { $s->value(qq{SELECT zk_has_leadership('$p')}) eq 't' }, 20),
		'once Curator leaves, the cluster leads');
	is(sql(qq{SELECT zk_leader_leave('$p')}), 't', 'left');
	ok(wait_until(sub { scalar(latch_nodes($p)) == 0 }, 10), 'nothing left');
	$s->quit;
};

done_testing();

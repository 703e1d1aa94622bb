
# 180_participants_token: zk_participants and fencing tokens.
#
# What users rely on: zk_participants shows a lock's queue in Curator's
# order with who holds and who each node belongs to; zk_lock_token gives
# the holder a number that strictly increases from one holder to the next,
# whoever the holders are (SQL or Curator, where Curator's token is its
# node's czxid), even after the lock's parent node was deleted and
# recreated (when ZooKeeper's sequence numbers start again from 0).
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Math::BigInt;
use ZklockTest;

my $zk = start_zk();
my $node = new_zklock_node('participants', $zk);
require_functions($node, qw(zk_participants zk_lock_token zk_mutex_acquire zk_read_lock_acquire
  zk_write_lock_acquire zk_semaphore_mutex_acquire));
my $peer = new_peer($zk);

my ($s1, $s2) = map { ZklockTest::Session->new($node, "s$_") } 1 .. 2;

my ($pt, @tokens);    # the token path and the tokens seen, shared by parts 2 and 3

############################################################################
# 1. zk_participants on a mixed mutex queue.
############################################################################
subtest 'zk_participants lists a mixed mutex queue as Curator sees it' => sub {
	my $p = '/t180/queue';
	is($s1->value("SELECT zk_mutex_acquire('$p')"), 't', 's1 holds');
	$peer->acquire('c1', $p, -1);
	ok(wait_children_count($peer, $p, 2), 'Curator queued');
	$s2->start("SELECT zk_mutex_acquire('$p')");
	ok(wait_waiting($node, $s2->pid, $p), 's2 queued');
	my $rows = participants_rows($node, $p);
	my @names = map { $_->{node} =~ s{^.*/}{}r } @$rows;
	is_deeply(\@names, [ map { s{^.*/}{}r } @{ $peer->participants($p) } ],
		"zk_participants lists Curator's participant nodes in the same order");
	like(join(',', map { $_->{position} } @$rows), qr/^(0,1,2|1,2,3)$/, 'consecutive positions')
	  or diag(join(',', map { $_->{position} } @$rows));
	is(join(',', map { $_->{kind} } @$rows), 'lock,lock,lock', 'kind lock');
	is(join(',', map { $_->{holds} } @$rows), 't,f,f', 'only the first holds');
	like($rows->[0]{data}, qr/"pid"\s*:\s*@{[ $s1->pid ]}\b/, "the holder's data names s1's backend");
	like($rows->[0]{data}, qr/"application_name"\s*:\s*"s1"/, '... and its application_name');
	like($rows->[2]{data}, qr/"pid"\s*:\s*@{[ $s2->pid ]}\b/, "the last node is s2's");
	unlike($rows->[1]{data}, qr/"pid"/, "the Curator node carries Curator's data, not zklock's identity");
	is($s1->value("SELECT zk_mutex_release('$p')"), 't', 's1 releases');
	is($peer->acquire_result('c1'), 'acquired', 'Curator next');
	is($peer->release('c1'), 'released', 'Curator releases');
	is($s2->result->{out}, 't', 's2 next');
	is($s2->value("SELECT zk_mutex_release('$p')"), 't', 's2 releases');
};

############################################################################
# 2. Fencing tokens across SQL and Curator holders, several rounds, with the
#    parent deleted and recreated in between.
############################################################################
subtest 'fencing tokens increase across SQL and Curator holders, also when the parent is recreated' => sub {
	$pt = '/t180/token';
	@tokens = ();    # [who, token]

	sub sql_round
	{
		my ($s, $label) = @_;
		is($s->value("SELECT zk_mutex_acquire('$pt', '10s')"), 't', "$label: SQL " . $s->name . ' holds');
		my $tok = $s->value("SELECT zk_lock_token('$pt')");
		my $n = zk_lock_rows($node, $pt)->{ $s->pid }{node};
		is($tok, $peer->czxid("$pt/$n"), "$label: zk_lock_token is the czxid of its node");
		is($node->safe_psql('postgres', "SELECT token FROM zk_locks WHERE pid = " . $s->pid), $tok,
			"$label: zk_locks.token agrees");
		push @tokens, [ "$label sql", $tok, $n ];
		is($s->value("SELECT zk_mutex_release('$pt')"), 't', "$label: released");
	}

	sub curator_round
	{
		my ($id, $label) = @_;
		$peer->acquire($id, $pt, 10000);
		is($peer->acquire_result($id), 'acquired', "$label: Curator $id holds");
		my ($n) = @{ $peer->children($pt) };
		push @tokens, [ "$label curator", $peer->czxid("$pt/$n"), $n ];
		is($peer->release($id), 'released', "$label: released");
	}

	for my $round (1 .. 3)
	{
		sql_round($s1, "round $round");
		curator_round('ct', "round $round");
		sql_round($s2, "round $round");
		if ($round < 3)
		{
			# The parent is an empty container now: delete it (ZooKeeper would
			# reap it by itself, later); the next acquire recreates it.
			ok(wait_children_count($peer, $pt, 0), "round $round: nothing left under the parent");
			$peer->delete($pt);
			ok(!$peer->exists($pt), "round $round: parent deleted");
		}
	}
	like($tokens[3][2], qr/lock-0000000000$/,
		'after the parent was recreated the sequence restarted at 0 (the sequence is no token)');

	my $increasing = 1;
	for my $i (1 .. $#tokens)
	{
		if (Math::BigInt->new($tokens[$i][1]) <= Math::BigInt->new($tokens[ $i - 1 ][1]))
		{
			$increasing = 0;
			diag("token of $tokens[$i][0] ($tokens[$i][1]) <= token of $tokens[$i-1][0] ($tokens[$i-1][1])");
		}
	}
	ok($increasing, 'the 9 successive holders got strictly increasing tokens: '
		  . join(' ', map { $_->[1] } @tokens));
};

############################################################################
# 3. Tokens of the other recipes; no token without a hold.
############################################################################
subtest 'the other recipes have tokens too; no token without a hold' => sub {
	my $prw = '/t180/rw';
	is($s1->value("SELECT zk_write_lock_acquire('$prw')"), 't', 'write lock');
	my $tw = $s1->value("SELECT zk_lock_token('$prw')");
	is($s1->value("SELECT zk_write_lock_release('$prw')"), 't', 'released');
	is($s1->value("SELECT zk_read_lock_acquire('$prw')"), 't', 'read lock');
	my $tr = $s1->value("SELECT zk_lock_token('$prw')");
	my $rn = zk_lock_rows($node, $prw)->{ $s1->pid }{node};
	is($tr, $peer->czxid("$prw/$rn"), "the read lock's token is its node's czxid");
	ok(Math::BigInt->new($tr) > Math::BigInt->new($tw), 'and it is above the earlier write token');
	is($s1->value("SELECT zk_read_lock_release('$prw')"), 't', 'released');

	my $psm = '/t180/semmutex';
	is($s1->value("SELECT zk_semaphore_mutex_acquire('$psm')"), 't', 'semaphore mutex');
	my $ts = $s1->value("SELECT zk_lock_token('$psm')");
	my ($lease) = @{ $peer->children("$psm/leases") };
	is($ts, $peer->czxid("$psm/leases/$lease"), "the semaphore mutex token is its lease node's czxid");
	is($s1->value("SELECT zk_semaphore_mutex_release('$psm')"), 't', 'released');

	my $r = $s1->query("SELECT zk_lock_token('$pt')");
	is($r->{sqlstate}, '55000', 'zk_lock_token without a hold: ERROR 55000') or diag($r->{err});

};
$_->quit for ($s1, $s2);
$peer->quit;
$node->stop;
stop_zk($zk);
done_testing();

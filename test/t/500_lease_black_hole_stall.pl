
# 500_lease_black_hole_stall: a lock is valid only while the worker can prove
# its session is alive, and zklock knows a lock is lost before ZooKeeper can
# give it to anyone else.
#
# What users rely on: when the worker's connection to ZooKeeper becomes a
# black hole, or the worker itself stalls, ZooKeeper expires the session
# one session timeout after it last heard from it and a Curator client then
# gets the lock.  zklock must have called the lock lost *before* that
# (zk_locks says 'lost', zk_status() counts it), no COMMIT of a
# transaction that relied on it may succeed after that (40000), new
# acquires fail (08006) until the path heals, and everything works again
# afterwards, in a new session.  The lease: send time of the latest request
# the server answered + negotiated session timeout - zklock.lease_margin.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use ZklockTest;
use ZklockFault;
use ZklockProxy;

my $zk = start_zk();
my $proxy = ZklockProxy->start($zk);
my $node = new_zklock_node('lease', $proxy->connect,
	"zklock.session_timeout = '4s'\nzklock.connect_timeout = '30s'\nzklock.lease_margin = '1s'\n");
my $peer = new_peer($zk);    # Curator talks to ZooKeeper directly

my $st = status_row($node);
my $s0 = $st->{session_id};
is($st->{session_timeout}, '4000', 'negotiated session timeout 4 s');
my $left = $node->safe_psql('postgres', q{SELECT extract(epoch FROM lease_remaining) FROM zk_status()});
cmp_ok($left, '>', 0, "zk_status() shows the lease: ${left}s left");
cmp_ok($left, '<=', 3.0, '... at most the session timeout minus the margin');
# renewed: the lease's end moves on (what is left right after a renewal is
# the timeout less the margin less the heartbeat's round trip, which may
# be longer than it was at the first reading)
my $until = $node->safe_psql('postgres', q{SELECT extract(epoch FROM lease_until) FROM zk_status()});
ok(wait_until(sub {
			my $u = $node->safe_psql('postgres',
				q{SELECT extract(epoch FROM lease_until) FROM zk_status()});
			return $u > $until + 0.1;
		}, 10, 'the lease to be renewed'),
	'heartbeats renew the lease while idle');

# lost_rows(@paths): how many zk_locks rows of @paths say 'lost'
sub lost_rows
{
	my $in = join(',', map { "'$_'" } @_);
	return $node->safe_psql('postgres',
		"SELECT count(*) FROM zk_locks WHERE path IN ($in) AND state = 'lost'");
}

my ($x, $h, $n);    # sessions shared by the parts below and the end

############################################################################
# 1. The connection becomes a black hole.
############################################################################
subtest 'a black-holed connection: the lock is called lost before Curator gets it, COMMIT fails with 40000, new acquires fail until healed' => sub {
	$x = ZklockTest::Session->new($node, 'x');    # _xact holder
	$h = ZklockTest::Session->new($node, 'h');    # session holder
	$x->value('BEGIN');
	is($x->value(q{SELECT zk_mutex_acquire_xact('/t500/p')}), 't', 'x holds /t500/p for its transaction');
	is($h->value(q{SELECT zk_mutex_acquire('/t500/q')}), 't', 'h holds /t500/q');
	$peer->acquire('cp', '/t500/p', -1);
	ok(wait_children_count($peer, '/t500/p', 2), 'Curator waits behind x');

	my $t0 = time;
	$proxy->set_mode('blackhole');
	ok(wait_until(sub { lost_rows('/t500/p', '/t500/q') eq '2' }, 15, 'zk_locks to say lost'),
		'zk_locks says lost for both locks');
	my $t_lost = time - $t0;
	ok(!$peer->has_reply(qr/^(acquired|error) cp\b/), '... while Curator still waits');
	is($peer->acquire_result('cp', 20), 'acquired', 'then ZooKeeper expires the session: Curator gets /t500/p');
	my $t_curator = time - $t0;
	note(sprintf('black hole: zklock called the locks lost after %.1f s, Curator got the lock after %.1f s',
			$t_lost, $t_curator));
	cmp_ok($t_lost, '<', $t_curator, 'zklock knew first');

	my $r = $x->query('COMMIT');
	is($r->{sqlstate}, '40000', 'COMMIT of the transaction that relied on /t500/p fails with 40000')
	  or diag($r->{err});
	$st = status_row($node);
	cmp_ok($st->{leases_expired}, '>=', 1, "zk_status() counts the expired lease ($st->{leases_expired})");
	cmp_ok($st->{locks_lost}, '>=', 2, "zk_status() counts the lost locks ($st->{locks_lost})");
	is($st->{lease_until}, undef, 'and shows no lease');

	$n = ZklockTest::Session->new($node, 'n');
	$r = $n->query(q{SELECT zk_mutex_acquire('/t500/r', '1s')});
	is($r->{sqlstate}, '08006', 'a new acquire fails with 08006 while the path is a black hole') or diag($r->{err});

	$proxy->set_mode('pass');
	ok(wait_until(sub { status_row($node)->{state} eq 'connected' }, 30, 'reconnect'), 'zklock reconnects once healed');
	isnt(status_row($node)->{session_id}, $s0, '... in a new session');
	is($n->value(q{SELECT zk_mutex_acquire('/t500/r', '10s')}), 't', 'new acquires work again');
	is($n->value(q{SELECT zk_mutex_release('/t500/r')}), 't', '... and releases');
	$r = $h->query(q{SELECT zk_mutex_release('/t500/q')});
	is($r->{out}, 'f', 'releasing the lost session lock returns false');
	like($r->{err}, qr/WARNING:.*lost/, '... with a WARNING');
	is($peer->release('cp'), 'released', 'Curator releases /t500/p');
	$x->value('BEGIN');
	is($x->value(q{SELECT zk_mutex_acquire_xact('/t500/p', '10s')}), 't', 'x takes /t500/p again');
	$r = $x->query('COMMIT');
	is($r->{err}, '', 'and this time COMMIT succeeds');
};

############################################################################
# 2. The worker stalls (SIGSTOP) longer than the session timeout.
############################################################################
subtest 'a worker stalled past the session timeout: the lease runs out first, COMMIT fails, a new session afterwards' => sub {
	my $s1 = status_row($node)->{session_id};
	$x->value('BEGIN');
	is($x->value(q{SELECT zk_mutex_acquire_xact('/t500/s')}), 't', 'x holds /t500/s for its transaction');
	$peer->acquire('cs', '/t500/s', -1);
	ok(wait_children_count($peer, '/t500/s', 2), 'Curator waits behind x');
	my $wpid = worker_pid($node);
	kill 'STOP', $wpid;
	is($peer->acquire_result('cs', 20), 'acquired',
		'with the worker stopped, ZooKeeper expires the session: Curator gets /t500/s');
	my $r = $x->query('COMMIT');
	is($r->{sqlstate}, '40000', 'a COMMIT issued during the stall fails with 40000') or diag($r->{err});
	kill 'CONT', $wpid;
	ok(wait_until(sub { my $s = status_row($node); $s->{state} eq 'connected' && $s->{session_id} ne $s1 },
			30, 'a new session'),
		'after the stall the worker opens a new session');
	like(slurp_file($node->logfile), qr/lease ran out/, 'the log says the lease ran out');
	is($peer->release('cs'), 'released', 'Curator releases /t500/s');
	is($x->value(q{SELECT zk_mutex_acquire('/t500/s', '10s')}), 't', 'x takes /t500/s again');
	is($x->value(q{SELECT zk_mutex_release('/t500/s')}), 't', '... and releases it');
	ok(wait_no_zklock_rows($node, '/t500/s'), 'zk_locks is clean');
};

############################################################################
# 3. zklock.commit_confirm: a round trip of proof at COMMIT.
############################################################################
# The lease proves that the session is alive, not that every node of it is
# still there: a node deleted from outside (an operator, a client without
# ACLs) goes unnoticed by it.  With zklock.commit_confirm on, COMMIT asks
# ZooKeeper whether each node the transaction relies on still exists in the
# worker's session; without it, COMMIT relies on the lease alone.
subtest 'zklock.commit_confirm: COMMIT fails when a node was deleted from outside, which the lease alone does not see' => sub {
	$x->value('BEGIN');
	$x->value(q{SET LOCAL zklock.commit_confirm = on});
	is($x->value(q{SELECT zk_mutex_acquire_xact('/t500/c')}), 't', 'x holds /t500/c, commit_confirm on');
	my $r = $x->query('COMMIT');
	is($r->{err}, '', 'COMMIT confirms the node with ZooKeeper and succeeds');
	ok(wait_until(sub { @{ lock_children($peer, '/t500/c') } == 0 }, 10), '... and the lock is released');

	for my $confirm ('on', 'off')
	{
		$x->value('BEGIN');
		$x->value(qq{SET LOCAL zklock.commit_confirm = $confirm});
		is($x->value(q{SELECT zk_mutex_acquire_xact('/t500/c')}), 't', "commit_confirm $confirm: x holds /t500/c");
		my $kids = lock_children($peer, '/t500/c');
		is(scalar @$kids, 1, "commit_confirm $confirm: one node");
		like($peer->delete("/t500/c/$kids->[0]"), qr/^deleted/,
			"commit_confirm $confirm: the holder's node is deleted from outside");
		$r = $x->query('COMMIT');
		if ($confirm eq 'on')
		{
			is($r->{sqlstate}, '40000', 'with commit_confirm, COMMIT finds the node gone: 40000')
			  or diag($r->{err});
			like($r->{err}, qr/could not be confirmed at commit/, '... and says so');
		}
		else
		{
			is($r->{err}, '',
				'without it, COMMIT relies on the lease and succeeds (fencing tokens cover this case)');
		}
	}
	ok(wait_no_zklock_rows($node, '/t500/c'), 'zk_locks has nothing left of /t500/c');
};

$_->quit for ($x, $h, $n);
$peer->quit;
$node->stop;
$proxy->stop;
stop_zk($zk);
done_testing();

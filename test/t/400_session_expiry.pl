
# 400_session_expiry: the ZooKeeper session of a cluster expires.
#
# What users rely on (Curator's LOST): when the session expires, every lock
# the cluster held is gone in ZooKeeper, so another client may take it at
# once. zklock must then never pretend to still hold it:
#   - zk_locks shows the holders' locks as 'lost', not 'held';
#   - a transaction that took an _xact lock fails at COMMIT (SQLSTATE 40000)
#     instead of committing work done without the lock;
#   - releasing a lost lock returns false with a WARNING;
#   - a backend learns of its lost locks with a WARNING on its next call;
#   - a request that was waiting fails (08006) rather than being granted on
#     a session that no longer has its queue position;
#   - the worker opens a new session by itself and new acquires work;
#   - at no time do ZooKeeper (a Curator peer's view) and zk_locks show two
#     holders.
# Two ways to expire: SIGSTOP the worker past the session timeout (the
# server expires it), and closing the session from a second handle with
# the id and password the worker keeps in $PGDATA/zklock.session.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use ZklockTest;
use ZklockFault;

my $zk = start_zk();
my $node = new_zklock_node('expiry', $zk,
	"zklock.session_timeout = '4s'\nzklock.connect_timeout = '20s'\n");
my $peer = new_peer($zk);
ZklockFault::expirer($zk);    # started now: a session is closed while the worker is stopped

my $st0 = status_row($node);
my $s0 = $st0->{session_id};
like($s0, qr/^0x[0-9a-f]{16}$/, "session id $s0");
my $timeout_s = $st0->{session_timeout} / 1000;
cmp_ok($timeout_s, '<=', 5, "negotiated session timeout ${timeout_s}s");

# held_rows($path): how many zk_locks rows say 'held' for $path.
sub held_rows
{
	my ($path) = @_;
	return $node->safe_psql('postgres',
		"SELECT count(*) FROM zk_locks WHERE path = '$path' AND state = 'held'");
}

# One holder in ZooKeeper and zklock together: when Curator holds $path
# (its node is the only child), zk_locks must not show it held.  A wait
# that just timed out has returned before its node is gone: the worker
# deletes it after the call gave up (a pending delete), so the count is
# waited for, bounded, before it is asserted.
sub one_holder_ok
{
	my ($path, $what) = @_;
	my $kids;
	wait_until(sub { $kids = lock_children($peer, $path); return @$kids == 1; }, 10,
		"only Curator's node under $path");
	is(scalar @$kids, 1, "$what: ZooKeeper has exactly one node under $path (Curator's)");
	is(held_rows($path), '0', "$what: zk_locks shows no SQL holder of $path");
}

my ($h1, $h2, $h3, $w, $s1);    # sessions and the first ZooKeeper session, shared by both parts

############################################################################
# Part 1: SIGSTOP the worker longer than the session timeout.
############################################################################

subtest 'a worker stalled past the session timeout: locks are lost, _xact COMMIT fails, Curator takes over, nothing is left' => sub {
	$h1 = ZklockTest::Session->new($node, 'h1');        # session-level holder
	$h2 = ZklockTest::Session->new($node, 'h2');        # _xact holder
	$h3 = ZklockTest::Session->new($node, 'h3');        # learns on next call
	$w = ZklockTest::Session->new($node, 'waiter');     # waiting request

	is($h1->value(q{SELECT zk_mutex_acquire('/t400/a')}), 't', 'h1 holds /t400/a');
	$h2->value(q{CREATE TEMP TABLE work_done(x int)});
	$h2->value('BEGIN');
	is($h2->value(q{SELECT zk_mutex_acquire_xact('/t400/b')}), 't', 'h2 holds /t400/b for its transaction');
	$h2->value(q{INSERT INTO work_done VALUES (1)});
	is($h3->value(q{SELECT zk_mutex_acquire('/t400/d')}), 't', 'h3 holds /t400/d');

	$peer->acquire('pc', '/t400/c', -1);
	is($peer->acquire_result('pc'), 'acquired', 'Curator holds /t400/c');
	$w->start(q{SELECT zk_mutex_acquire('/t400/c')});
	ok(wait_waiting($node, $w->pid, '/t400/c'), 'SQL waiter queued on /t400/c behind Curator');

	$peer->acquire('pa', '/t400/a', -1);
	ok(wait_children_count($peer, '/t400/a', 2), 'Curator waits on /t400/a behind h1');
	ok(!$peer->has_reply(qr/^acquired pa/), 'Curator does not have /t400/a yet');

	my $wpid = worker_pid($node);
	ok(kill('STOP', $wpid), "worker $wpid stopped (SIGSTOP)");
	my $t0 = time;
	is($peer->acquire_result('pa', $timeout_s + 20), 'acquired',
		'the server expired the session: Curator gets /t400/a');
	my $expired_after = time - $t0;
	note(sprintf('session expired %.1f s after SIGSTOP', $expired_after));
	cmp_ok($expired_after, '>=', $timeout_s * 0.5, 'not before the session timeout');
	ok(wait_children_count($peer, '/t400/b', 0, 5), 'the _xact lock node of h2 is gone from ZooKeeper');
	ok(kill('CONT', $wpid), 'worker continued (SIGCONT)');

	ok( wait_until(
			sub {
				my $st = status_row($node);
				$st->{state} eq 'connected' && $st->{session_id} ne $s0;
			},
			30, 'a new session'),
		'the worker opened a new session by itself');
	my $st1 = status_row($node);
	$s1 = $st1->{session_id};
	isnt($s1, $s0, "new session id $s1");
	if (exists $st1->{expired_count})
	{
		cmp_ok($st1->{expired_count}, '>=', ($st0->{expired_count} // 0) + 1,
			'zk_status counted the expiry');
	}

	my $rows_a = zk_lock_rows($node, '/t400/a');
	is($rows_a->{ $h1->pid }{state}, 'lost', "zk_locks: h1's lock is 'lost'");
	is(zk_lock_rows($node, '/t400/b')->{ $h2->pid }{state}, 'lost', "zk_locks: h2's _xact lock is 'lost'");
	one_holder_ok('/t400/a', 'after expiry');

	my $r = $w->result(20);
	is($r->{sqlstate}, '08006', 'the waiting request fails with 08006 instead of being granted')
	  or diag("waiter: out=[$r->{out}] err=[$r->{err}]");
	is(scalar @{ lock_children($peer, '/t400/c') }, 1, 'the failed waiter left no node on /t400/c');

	# Curator takes /t400/d, whose node went with the expired session.
	$peer->acquire('pd', '/t400/d', 5000);
	is($peer->acquire_result('pd'), 'acquired', 'Curator takes /t400/d (h3 lost it)');

	# h3's next zklock call reports its lost lock once.
	$r = $h3->query(q{SELECT zk_mutex_acquire('/t400/e', '5s')});
	is($r->{out}, 't', 'h3: a new acquire works on the new session');
	like($r->{err}, qr/WARNING.*lost/s, 'h3: its next zklock call warns that a lock was lost')
	  or diag("h3 stderr: $r->{err}");
	like($r->{err}, qr{/t400/d}, 'the warning names the lost lock /t400/d');
	$r = $h3->query(q{SELECT zk_mutex_release('/t400/e')});
	is($r->{out}, 't', 'h3 releases /t400/e');
	unlike($r->{err}, qr{/t400/d}, 'the lost lock is reported only once');
	is(zk_lock_rows($node, '/t400/d')->{ $h3->pid }{state}, 'lost',
		"zk_locks keeps showing /t400/d as 'lost' (not 'held') until h3 releases it");
	# Re-acquiring a lost lock must not be a reentrant no-op: Curator holds it.
	$r = $h3->query(q{SELECT zk_mutex_acquire('/t400/d', '1s')});
	isnt($r->{out}, 't', 'h3: acquiring its lost lock again is not granted while Curator holds it')
	  or diag("h3: out=[$r->{out}] err=[$r->{err}]");
	note("h3 re-acquire of the lost lock: out=[$r->{out}] sqlstate=" . ($r->{sqlstate} // 'none'));
	one_holder_ok('/t400/d', 'after h3 tried to re-acquire its lost lock');
	$h3->query(q{SELECT zk_mutex_release('/t400/d')});
	is($peer->release('pd'), 'released', 'Curator releases /t400/d');

	# h1: releasing the lost lock.
	$r = $h1->query(q{SELECT zk_mutex_release('/t400/a')});
	is($r->{out}, 'f', 'h1: releasing the lost lock returns false');
	like($r->{err}, qr/WARNING/, 'with a WARNING') or diag($r->{err});
	is($r->{sqlstate}, undef, 'and no error');
	one_holder_ok('/t400/a', 'after the release of the lost lock');

	# h2: COMMIT fails; its work is rolled back.
	$r = $h2->query('COMMIT');
	is($r->{sqlstate}, '40000', 'h2: COMMIT of the transaction whose _xact lock was lost fails with 40000')
	  or diag("COMMIT: out=[$r->{out}] err=[$r->{err}]");
	$r = $h2->query('SELECT count(*) FROM work_done');
	is($r->{out}, '0', 'the work done under the lost lock was not committed');
	$h2->query('ROLLBACK');    # harmless when the COMMIT already ended it
	is($node->safe_psql('postgres', q{SELECT count(*) FROM zk_locks WHERE path = '/t400/b'}), '0',
		'no zk_locks row left for the failed transaction');
	is($node->safe_psql('postgres', q{SELECT count(*) FROM zk_locks WHERE path IN ('/t400/a', '/t400/d')}), '0',
		'no zk_locks row left for the released lost locks')
	  or diag($node->safe_psql('postgres', q{SELECT pid, path, state, count FROM zk_locks}));

	# New acquires work and exclude Curator again.
	is($h1->value(q{SELECT zk_mutex_acquire('/t400/a', '500ms')}), 'f',
		'h1 cannot take /t400/a while Curator holds it');
	is($peer->release('pa'), 'released', 'Curator releases /t400/a');
	is($h1->value(q{SELECT zk_mutex_acquire('/t400/a', '5s')}), 't', 'h1 acquires /t400/a on the new session');
	$peer->acquire('pa', '/t400/a', 500);
	is($peer->acquire_result('pa'), 'timeout', 'and Curator is excluded');
	is(held_rows('/t400/a'), '1', 'zk_locks: one holder');
	is($h1->value(q{SELECT zk_mutex_release('/t400/a')}), 't', 'h1 releases');
	$h2->value('BEGIN');
	is($h2->value(q{SELECT zk_mutex_acquire_xact('/t400/b', '5s')}), 't', 'h2 takes an _xact lock again');
	$r = $h2->query('COMMIT');
	is($r->{sqlstate}, undef, 'and this COMMIT succeeds');
	ok(wait_children_count($peer, '/t400/b', 0), 'its node is released at commit');
	is($peer->release('pc'), 'released', 'Curator releases /t400/c');
};

############################################################################
# Part 2: close the session from a second handle ($PGDATA/zklock.session).
############################################################################

subtest 'a session closed from a second handle: the same, and the worker connects again in a new session' => sub {
	{
		my ($id, $pw) = session_file($node);
		ok(defined $id, 'the worker keeps its session in $PGDATA/zklock.session');
		is("0x$id", $s1, '$PGDATA/zklock.session names the current session');
		my $mode = (stat($node->data_dir . '/zklock.session'))[2] & 07777;
		is(sprintf('%04o', $mode), '0600', 'the session file is mode 0600');

		is($h1->value(q{SELECT zk_mutex_acquire('/t400/f')}), 't', 'h1 holds /t400/f');
		$peer->acquire('pf', '/t400/f', -1);
		ok(wait_children_count($peer, '/t400/f', 2), 'Curator waits on /t400/f');

		# The worker is paused while the session is closed under it, so that it
		# cannot reconnect and take the session back meanwhile.
		my $wpid2 = worker_pid($node);
		kill('STOP', $wpid2);
		my $t1 = time;
		my $closed = expire_session($zk, $id, $pw);
		kill('CONT', $wpid2);
		ok($closed, 'session closed from a second handle');
		is($peer->acquire_result('pf', 10), 'acquired', 'Curator gets /t400/f at once');
		cmp_ok(time - $t1, '<', 5, 'within a few seconds (no session timeout to wait)');

		ok( wait_until(
				sub {
					my $st = status_row($node);
					$st->{state} eq 'connected' && $st->{session_id} ne $s1;
				},
				30, 'another new session'),
			'the worker opened a new session again');
		my $s2 = status_row($node)->{session_id};
		isnt($s2, $s1, "new session id $s2");
		ok(wait_sql($node, q{SELECT state FROM zk_locks WHERE path = '/t400/f'}, 'lost', 10),
			"zk_locks: h1's /t400/f is 'lost'");
		one_holder_ok('/t400/f', 'after the forced expiry');
		my $r = $h1->query(q{SELECT zk_mutex_release('/t400/f')});
		is($r->{out}, 'f', 'releasing it returns false');
		like($r->{err}, qr/WARNING/, 'with a WARNING');
		my ($id2) = session_file($node);
		is("0x" . ($id2 // ''), $s2, 'the session file now names the new session');
		is($peer->release('pf'), 'released', 'Curator releases /t400/f');
	}

	# Nothing left behind anywhere.
	for my $p (qw(/t400/a /t400/b /t400/c /t400/d /t400/e /t400/f))
	{
		ok(wait_children_count($peer, $p, 0), "no node left under $p");
	}
	is($node->safe_psql('postgres', 'SELECT count(*) FROM zk_locks'), '0', 'zk_locks is empty')
	  or diag($node->safe_psql('postgres', q{SELECT pid, path, state, count FROM zk_locks}));
};

$_->quit for ($h1, $h2, $h3, $w);
$peer->quit;
$node->stop;
stop_zk($zk);
done_testing();


# 401_lost_stays_lost: what a backend does with a lock that was lost with the
# ZooKeeper session.
#
# What users rely on:
#   (a) Lost stays lost until the transaction ends.  A transaction that
#       relied on a lock (an _xact lock, or a session lock taken in it when
#       zklock.check_session_locks_at_commit is on) which was lost with the
#       session cannot COMMIT (SQLSTATE 40000) — also when, after the loss,
#       it acquired the path again (a new lock in the new session does not
#       cover the work done without one), released it, or called
#       zk_release_all().  PREPARE TRANSACTION of a transaction that relies
#       on a zklock lock, lost or not, is refused (0A000): COMMIT PREPARED
#       could run after the lock is gone.  A transaction whose lock was not
#       lost commits; one that took no lock prepares.
#   (b) A grant lost before its waiter saw it fails at once.  A waiter that
#       was granted the lock while it was not running (here: SIGSTOP), and
#       whose session expired before it looked, ends its call with 08006
#       as soon as it runs again, instead of waiting for a grant that will
#       never come; its session stays usable and nothing is left behind.
# The session is expired from outside: a second ZooKeeper handle attaches
# with the id and password of $PGDATA/zklock.session and closes it (the
# worker is paused meanwhile so that it cannot take the session back).
#
# Without the features:
#   (a) the backend dropped a lost lock from its registry when the path was
#       acquired again or released, and its COMMIT check looked only at the
#       locks still registered: COMMIT succeeded (no 40000) for the
#       re-acquired _xact lock and for the session lock under
#       check_session_locks_at_commit that was re-acquired, released or
#       dropped by zk_release_all(); PREPARE did not look at lost session
#       locks at all and succeeded.  (An _xact lock is not a session hold:
#       zk_mutex_release() and zk_release_all() leave it registered, so those
#       two _xact cases check that they do not make it commit either.)
#   (b) the waiter's loop did not know the state 'lost' and slept until
#       cancelled: its call does not end within the bound below.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use ZklockTest;
use ZklockFault;

my $zk = start_zk();
my $node = new_zklock_node('after_loss', $zk, "max_prepared_transactions = 5\n");
my $peer = new_peer($zk);
ZklockFault::expirer($zk);    # started now: a session is closed while the worker is stopped

# expire_from_outside(): close the worker's current session from a second
# handle; returns once the worker is connected again in a new session.
sub expire_from_outside
{
	my $old = status_row($node)->{session_id};
	my ($id, $pw) = session_file($node);
	is('0x' . ($id // ''), $old, "\$PGDATA/zklock.session names the current session $old");
	my $wpid = worker_pid($node);
	kill('STOP', $wpid);
	my $closed = expire_session($zk, $id, $pw);
	kill('CONT', $wpid);
	ok($closed, "session $old closed from a second handle");
	ok( wait_until(
			sub {
				my $st = status_row($node);
				$st->{state} eq 'connected' && $st->{session_id} ne $old;
			},
			30, 'a new session'),
		'the worker is connected again, in a new session');
	return;
}

# lost_count(@pids): how many zk_locks rows of these backends say 'lost'
sub lost_count
{
	my $in = join(',', @_);
	return $node->safe_psql('postgres',
		"SELECT count(*) FROM zk_locks WHERE pid IN ($in) AND state = 'lost'");
}

############################################################################
# (a) Lost stays lost until the transaction ends.
############################################################################

# _xact locks: re-acquire, zk_release_all(), zk_mutex_release() after the loss.
my %x = map { $_ => ZklockTest::Session->new($node, "x$_") } qw(again all rel);
# session locks taken in the transaction, check_session_locks_at_commit on
my %s = map { $_ => ZklockTest::Session->new($node, "s$_") } qw(again all rel);
# PREPARE of a transaction whose session lock was lost (kept / released)
my %p = map { $_ => ZklockTest::Session->new($node, "p$_") } qw(kept rel);

subtest 'lost stays lost: after the loss, re-acquiring, releasing or zk_release_all() still fails COMMIT with 40000, PREPARE is refused with 0A000' => sub {
	$x{again}->value('CREATE TEMP TABLE work_done(x int)');
	for my $k (sort keys %x)
	{
		$x{$k}->value('BEGIN');
		is($x{$k}->value("SELECT zk_mutex_acquire_xact('/t401/x$k')"), 't', "x$k holds /t401/x$k for its transaction");
	}
	$x{again}->value('INSERT INTO work_done VALUES (1)');
	for my $k (sort keys %s)
	{
		$s{$k}->value('SET zklock.check_session_locks_at_commit = on');
		$s{$k}->value('BEGIN');
		is($s{$k}->value("SELECT zk_mutex_acquire('/t401/s$k')"), 't', "s$k holds /t401/s$k, taken in its transaction");
	}
	for my $k (sort keys %p)
	{
		$p{$k}->value('SET zklock.check_session_locks_at_commit = on');
		$p{$k}->value('BEGIN');
		is($p{$k}->value("SELECT zk_mutex_acquire('/t401/p$k')"), 't', "p$k holds /t401/p$k, taken in its transaction");
	}
	my @pids = map { $_->pid } (values %x, values %s, values %p);

	expire_from_outside();
	ok(wait_until(sub { lost_count(@pids) == scalar @pids }, 15, "zk_locks to say 'lost'"),
		"zk_locks says 'lost' for all " . scalar(@pids) . ' locks');

	# x again: the path is acquired again (granted in the new session).
	my $r = $x{again}->query(q{SELECT zk_mutex_acquire_xact('/t401/xagain', '10s')});
	is($r->{out}, 't', 'xagain: acquiring the lost path again in the same transaction succeeds (new session)')
	  or diag($r->{err});
	is(zk_lock_rows($node, '/t401/xagain')->{ $x{again}->pid }{state}, 'held', '... zk_locks says held again');
	$r = $x{again}->query('COMMIT');
	is($r->{sqlstate}, '40000', 'xagain: COMMIT still fails with 40000: the transaction relied on the lost lock')
	  or diag("COMMIT: err=[$r->{err}]");
	$x{again}->query('ROLLBACK');
	is($x{again}->value('SELECT count(*) FROM work_done'), '0', 'xagain: its work was not committed');

	# x all: zk_release_all() (the _xact lock is no session hold; it stays lost).
	$r = $x{all}->query('SELECT zk_release_all()');
	is($r->{sqlstate}, undef, 'xall: zk_release_all() runs') or diag($r->{err});
	$r = $x{all}->query('COMMIT');
	is($r->{sqlstate}, '40000', 'xall: COMMIT fails with 40000') or diag("COMMIT: err=[$r->{err}]");

	# x rel: zk_mutex_release() of the _xact lock.
	$r = $x{rel}->query(q{SELECT zk_mutex_release('/t401/xrel')});
	is($r->{out}, 'f', 'xrel: zk_mutex_release() of the lost _xact lock returns false');
	like($r->{err}, qr/WARNING/, '... with a WARNING');
	$r = $x{rel}->query('COMMIT');
	is($r->{sqlstate}, '40000', 'xrel: COMMIT fails with 40000') or diag("COMMIT: err=[$r->{err}]");

	# s again: the session lock's path acquired again.
	$r = $s{again}->query(q{SELECT zk_mutex_acquire('/t401/sagain', '10s')});
	is($r->{out}, 't', 'sagain: acquiring the lost path again succeeds (new session)') or diag($r->{err});
	$r = $s{again}->query('COMMIT');
	is($r->{sqlstate}, '40000', 'sagain: COMMIT still fails with 40000') or diag("COMMIT: err=[$r->{err}]");
	$s{again}->query('ROLLBACK');
	is($s{again}->value(q{SELECT zk_mutex_release('/t401/sagain')}), 't',
		'sagain: the new session lock survives the rollback and is released');

	# s all: zk_release_all() drops the lost session lock.
	$r = $s{all}->query('SELECT zk_release_all()');
	is($r->{sqlstate}, undef, 'sall: zk_release_all() runs') or diag($r->{err});
	is(zk_lock_rows($node, '/t401/sall')->{ $s{all}->pid }, undef, 'sall: ... and drops the lost lock (no zk_locks row)');
	$r = $s{all}->query('COMMIT');
	is($r->{sqlstate}, '40000', 'sall: COMMIT still fails with 40000') or diag("COMMIT: err=[$r->{err}]");

	# s rel: zk_mutex_release() drops the lost session lock.
	$r = $s{rel}->query(q{SELECT zk_mutex_release('/t401/srel')});
	is($r->{out}, 'f', 'srel: zk_mutex_release() of the lost session lock returns false');
	like($r->{err}, qr/WARNING:.*lost/, '... with a WARNING that it was lost');
	$r = $s{rel}->query('COMMIT');
	is($r->{sqlstate}, '40000', 'srel: COMMIT still fails with 40000') or diag("COMMIT: err=[$r->{err}]");

	# p kept / p rel: PREPARE TRANSACTION.
	$r = $p{kept}->query(q{PREPARE TRANSACTION 't043_kept'});
	is($r->{sqlstate}, '0A000', 'pkept: PREPARE TRANSACTION is refused with 0A000 (it relied on a session lock, lost)')
	  or diag("PREPARE: err=[$r->{err}]");
	$r = $p{rel}->query(q{SELECT zk_mutex_release('/t401/prel')});
	is($r->{out}, 'f', 'prel: releasing the lost session lock returns false');
	$r = $p{rel}->query(q{PREPARE TRANSACTION 't043_rel'});
	is($r->{sqlstate}, '0A000', 'prel: PREPARE TRANSACTION after the release is refused with 0A000 too')
	  or diag("PREPARE: err=[$r->{err}]");
	is($node->safe_psql('postgres', q{SELECT count(*) FROM pg_prepared_xacts WHERE gid LIKE 't043%'}), '0',
		'no transaction was prepared');
	$r = $p{kept}->query(q{SELECT zk_mutex_release('/t401/pkept')});
	is($r->{out}, 'f', 'pkept: the lost lock is still registered after the failed PREPARE; releasing it says false');
};

# Controls: transactions whose locks were not lost commit and prepare.
subtest 'controls: a transaction whose lock was not lost commits; one that took no lock prepares' => sub {
	my $c = $x{again};
	$c->value('BEGIN');
	is($c->value(q{SELECT zk_mutex_acquire_xact('/t401/ctl')}), 't', 'control: an _xact lock in the new session');
	$c->value('INSERT INTO work_done VALUES (2)');
	my $r = $c->query('COMMIT');
	is($r->{err}, '', 'control: COMMIT succeeds when the lock was not lost');
	is($c->value('SELECT count(*) FROM work_done'), '1', 'control: its work is committed');
	$c = $s{again};
	$c->value('BEGIN');
	is($c->value(q{SELECT zk_mutex_acquire('/t401/sctl')}), 't',
		'control: a session lock taken in a transaction, check_session_locks_at_commit on');
	$r = $c->query('COMMIT');
	is($r->{err}, '', 'control: COMMIT succeeds');
	is($c->value(q{SELECT zk_mutex_release('/t401/sctl')}), 't', 'control: the session lock is released');
	$c->value('BEGIN');
	is($c->value(q{SELECT zk_mutex_acquire('/t401/pctl')}), 't', 'control: another one, for PREPARE');
	$r = $c->query(q{PREPARE TRANSACTION 't043_ctl'});
	is($r->{sqlstate}, '0A000',
		'control: PREPARE TRANSACTION of a transaction that relies on a session lock (not lost) is refused with 0A000 too')
	  or diag("PREPARE: err=[$r->{err}]");
	like($r->{err}, qr/cannot PREPARE a transaction that relies on a zookeeper lock/, '... saying why');
	$c->query('ROLLBACK');
	$c->value('BEGIN');
	$r = $c->query(q{PREPARE TRANSACTION 't043_ctl'});
	is($r->{err}, '', 'control: PREPARE of a transaction that took no lock succeeds while the session holds one');
	$node->safe_psql('postgres', q{COMMIT PREPARED 't043_ctl'});
	is($c->value(q{SELECT zk_mutex_release('/t401/pctl')}), 't', 'control: the session lock is released');
};

# Clean up any prepared transaction left by a failure above.
subtest 'nothing of (a) is left in zk_locks or ZooKeeper' => sub {
	for my $gid (split /\n/,
		$node->safe_psql('postgres', q{SELECT gid FROM pg_prepared_xacts WHERE gid LIKE 't043%'}))
	{
		$node->safe_psql('postgres', "ROLLBACK PREPARED '$gid'");
	}

	my @paths_a = map { "/t401/$_" } qw(xagain xall xrel sagain sall srel pkept prel ctl sctl pctl);
	is( $node->safe_psql('postgres',
			'SELECT count(*) FROM zk_locks WHERE path IN (' . join(',', map { "'$_'" } @paths_a) . ')'),
		'0', '(a) no zk_locks row left');
	ok(wait_children_count($peer, $_, 0), "(a) no node left under $_") for @paths_a;
};

my $w;    # the waiter of (b), quit at the end

############################################################################
# (b) A grant lost before its waiter saw it fails at once with 08006.
############################################################################

subtest 'a grant lost before its stopped waiter saw it fails at once with 08006, the session stays usable' => sub {
	my $g = '/t401/g';
	$peer->acquire('cg', $g, -1);
	is($peer->acquire_result('cg'), 'acquired', "Curator holds $g");
	$w = ZklockTest::Session->new($node, 'waiter');
	$w->start(qq{SELECT zk_mutex_acquire('$g')});
	ok(wait_waiting($node, $w->pid, $g), "the SQL waiter queues on $g without a timeout");
	ok(kill('STOP', $w->pid), 'the waiting backend is stopped (SIGSTOP)');
	is($peer->release('cg'), 'released', 'Curator releases');
	ok(wait_held($node, $w->pid, $g), 'the worker grants the lock to the stopped backend (zk_locks: held)');

	expire_from_outside();
	ok(wait_sql($node, "SELECT state FROM zk_locks WHERE pid = " . $w->pid . " AND path = '$g'", 'lost', 15),
		"zk_locks says 'lost' for the grant the backend has not seen");

	my $t0 = time;
	ok(kill('CONT', $w->pid), 'the backend runs again (SIGCONT)');
	my $r = $w->result(5);
	my $took = time - $t0;
	ok($r->{done}, sprintf('its call ends promptly (%.1f s, bound 5 s)', $took));
	if (!$r->{done})
	{
		# the waiter sleeps on: cancel it so that the rest can run
		$node->safe_psql('postgres', 'SELECT pg_cancel_backend(' . $w->pid . ')');
		$r = $w->result(10);
	}
	is($r->{sqlstate}, '08006', 'with SQLSTATE 08006 (the lock was lost as it was granted)')
	  or diag("waiter: out=[$r->{out}] err=[$r->{err}]");
	is($w->value('SELECT 1'), '1', 'the session is usable');
	ok(wait_no_zklock_rows($node, $g), "no zk_locks row left for $g");
	ok(wait_children_count($peer, $g, 0), "no node left under $g");
	is($w->value(qq{SELECT zk_mutex_acquire('$g', '10s')}), 't', "the session takes $g again");
	$peer->acquire('cg2', $g, 500);
	is($peer->acquire_result('cg2'), 'timeout', '... and Curator is excluded');
	is($w->value(qq{SELECT zk_mutex_release('$g')}), 't', '... and releases it');
	ok(wait_children_count($peer, $g, 0), "nothing left under $g");
	is($node->safe_psql('postgres', 'SELECT count(*) FROM zk_locks'), '0', 'zk_locks is empty')
	  or diag($node->safe_psql('postgres', 'SELECT pid, path, state, count FROM zk_locks'));
};

$_->quit for (values %x, values %s, values %p, $w);
$peer->quit;
$node->stop;
stop_zk($zk);
done_testing();

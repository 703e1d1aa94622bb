
# 402_lost_lock_cancel: what a holder can rely on when its lease is short
# or its lock is lost (issue 18).
#
# What users rely on:
#   1. COMMIT (and PREPARE TRANSACTION) of a transaction that relies on a
#      zklock lock needs some lease left, not just a microsecond: at least
#      zklock.commit_min_lease (default 500 ms, superuser-settable per
#      session), because the commit record, its flush and any synchronous
#      replication come after the check.  Less left: 40000 and nothing
#      committed.
#   2. zklock.lease_margin cannot be set below 100 ms.
#   3. A reentrant acquire of a lock the session holds never says true
#      when the lease has run out (the lock may be someone else's by then):
#      false after its timeout or 08006, and once the worker runs again the
#      lock is reported lost and can be taken again.
#   4.-6. zklock.cancel_on_loss (opt-in, any user): when a lock the session
#      holds is lost (the session expired, or the lease ran out while the
#      worker was stopped, which the backend sees by itself), the statement
#      it is running is cancelled at once with SQLSTATE ZK001 and the
#      message 'zookeeper lock "<path>" was lost', the path as the user
#      wrote it (the node runs with a zklock.namespace, which the message
#      leaves out).  A PL/pgSQL handler WHEN SQLSTATE 'ZK001' gets control.
#      Sessions that hold no lost lock, or are idle, are not cancelled.
#   7. Without it (the default) the statement runs on, and COMMIT fails.
# Outcomes are checked from outside: a Curator client on the same lock
# (who gets it, when) and the rows COMMIT did or did not write.
#
# Before issue 18: SET zklock.commit_min_lease and zklock.cancel_on_loss
# failed (no such parameters), ALTER SYSTEM accepted a lease_margin of 0,
# and a reentrant acquire said true in milliseconds after the lease ran out
# and Curator held the lock.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use ZklockTest;
use ZklockFault;

my $NS = '/ns402';
my $zk = start_zk();
my $node = new_zklock_node('cancel', $zk,
	"zklock.session_timeout = '4s'\nzklock.connect_timeout = '20s'\n"
	  . "zklock.namespace = '$NS'\nmax_prepared_transactions = 2\n");
my $peer = new_peer($zk);

my $st = status_row($node);
is($st->{session_timeout}, '4000', 'negotiated session timeout 4 s');
my $timeout_s = $st->{session_timeout} / 1000;

$node->safe_psql('postgres', q{
	CREATE TABLE work_done(tag text PRIMARY KEY);
	CREATE TABLE caught(state text, message text);
	CREATE ROLE app059 LOGIN;
	GRANT zklock_user TO app059;
	CREATE PROCEDURE sleep_guarded() LANGUAGE plpgsql AS $$
	BEGIN
		BEGIN
			PERFORM pg_sleep(60);
		EXCEPTION WHEN SQLSTATE 'ZK001' THEN
			INSERT INTO caught VALUES (SQLSTATE, SQLERRM);
			RAISE NOTICE 'handler ran: % %', SQLSTATE, SQLERRM;
		END;
	END $$;
});


# psql as app059, verbose errors: ($sqlstate, $stdout, $stderr)
sub as_app
{
	my ($sql) = @_;
	my ($out, $err) = ('', '');
	$node->psql('postgres', $sql, stdout => \$out, stderr => \$err,
		extra_params => [ '-U', 'app059', '-v', 'VERBOSITY=verbose' ]);
	return (sqlstate_of($err), $out, $err);
}


# true once backend $pid runs a statement (matching $like) and waits in it
sub wait_running
{
	my ($pid, $like) = @_;
	return wait_sql($node,
		qq{SELECT count(*) FROM pg_stat_activity WHERE pid = $pid AND state = 'active' AND query LIKE '$like'},
		'1', 10);
}

# the worker stopped, then (bounded) connected again in a new session
sub wait_new_session
{
	my ($old) = @_;
	return wait_until(sub { my $s = status_row($node); $s->{state} eq 'connected' && $s->{session_id} ne $old },
		30, 'a new session');
}

my $s = ZklockTest::Session->new($node, 's');

############################################################################
subtest 'COMMIT and PREPARE need zklock.commit_min_lease of lease left' => sub {
	my $r = $s->query('SHOW zklock.commit_min_lease');
	is($r->{out}, '500ms', 'zklock.commit_min_lease is 500 ms by default') or diag($r->{err});

	$r = $s->query(q{SET zklock.commit_min_lease = '30s'});
	is($r->{sqlstate}, undef, 'a superuser sets it to 30 s for the session (more than any lease of a 4 s session)')
	  or diag($r->{err});
	$s->value('BEGIN');
	is($s->value(q{SELECT zk_mutex_acquire_xact('/t402/floor', '10s')}), 't', 'an _xact lock on /t402/floor');
	$s->value(q{INSERT INTO work_done VALUES ('floor-30s')});
	$r = $s->query('COMMIT');
	is($r->{sqlstate}, '40000', 'COMMIT fails with 40000: less lease left than zklock.commit_min_lease')
	  or diag("COMMIT: err=[$r->{err}]");
	is(committed($node, 'floor-30s'), '0', '... and the row is not committed');
	$s->query('ROLLBACK');
	ok(wait_no_zklock_rows($node, '/t402/floor'), '... and the lock is released');
	$peer->acquire('cfl', "$NS/t402/floor", 5000);
	is($peer->acquire_result('cfl'), 'acquired', '... a Curator client takes it');
	$peer->release('cfl');

	$s->value('BEGIN');
	$s->value(q{INSERT INTO work_done VALUES ('floor-nolock')});
	$r = $s->query('COMMIT');
	is($r->{sqlstate}, undef, 'a transaction that relies on no zklock lock commits whatever the setting')
	  or diag($r->{err});
	is(committed($node, 'floor-nolock'), '1', '... its row is committed');

	$s->value('SET zklock.check_session_locks_at_commit = on');
	$s->value('BEGIN');
	is($s->value(q{SELECT zk_mutex_acquire('/t402/floorp', '10s')}), 't',
		'a session lock taken in a transaction, check_session_locks_at_commit on');
	$s->value(q{INSERT INTO work_done VALUES ('floor-prepared')});
	$r = $s->query(q{PREPARE TRANSACTION 't059_floor'});
	is($r->{sqlstate}, '0A000', 'PREPARE TRANSACTION of it is refused (0A000), whatever the lease')
	  or diag("PREPARE: err=[$r->{err}]");
	is($node->safe_psql('postgres', q{SELECT count(*) FROM pg_prepared_xacts WHERE gid = 't059_floor'}), '0',
		'... nothing is prepared');
	$node->safe_psql('postgres', q{ROLLBACK PREPARED 't059_floor'})
	  if $node->safe_psql('postgres', q{SELECT count(*) FROM pg_prepared_xacts WHERE gid = 't059_floor'}) ne '0';
	is(committed($node, 'floor-prepared'), '0', '... nor committed');
	$s->query('ROLLBACK');
	$s->query('SELECT zk_release_all()');
	$s->value('RESET zklock.check_session_locks_at_commit');

	$r = $s->query('RESET zklock.commit_min_lease');
	$r = $s->query('SHOW zklock.commit_min_lease');
	is($r->{out}, '500ms', 'back to the default');
	$s->value('BEGIN');
	is($s->value(q{SELECT zk_mutex_acquire_xact('/t402/floor', '10s')}), 't', 'an _xact lock on /t402/floor');
	$s->value(q{INSERT INTO work_done VALUES ('floor-default')});
	$r = $s->query('COMMIT');
	is($r->{sqlstate}, undef, 'with the default, COMMIT succeeds') or diag("COMMIT: err=[$r->{err}]");
	is(committed($node, 'floor-default'), '1', '... and the row is committed');

	my ($code, $out, $err) = as_app(q{SET zklock.commit_min_lease = '1s'});
	is($code, '42501', 'a user who is not a superuser cannot set zklock.commit_min_lease') or diag($err);
	ok(wait_no_zklock_rows($node, '/t402/floor') && wait_no_zklock_rows($node, '/t402/floorp'),
		'zk_locks has no row left');
};

############################################################################
subtest 'zklock.lease_margin is at least 100 ms' => sub {
	for my $v ('0', q{'99ms'})
	{
		my ($code, $err) = psql_error($node, "ALTER SYSTEM SET zklock.lease_margin = $v");
		is($code, '22023', "ALTER SYSTEM SET zklock.lease_margin = $v is refused (22023)") or diag($err);
	}
	my ($code, $err) = psql_error($node, q{SET zklock.lease_margin = 0});
	ok(defined $code, 'SET zklock.lease_margin = 0 is refused (' . ($code // 'accepted') . ')');
	($code, $err) = psql_error($node, q{ALTER SYSTEM SET zklock.lease_margin = '100ms'});
	is($code, undef, 'ALTER SYSTEM SET zklock.lease_margin = 100ms is accepted') or diag($err);
	$node->safe_psql('postgres', 'ALTER SYSTEM RESET zklock.lease_margin');
	is($node->safe_psql('postgres', 'SHOW zklock.lease_margin'), '1s', 'the running value is unchanged');
};

############################################################################
subtest 'a reentrant acquire never says true once the lease ran out' => sub {
	my $p = '/t402/r';
	my $s0 = status_row($node)->{session_id};
	is($s->value(qq{SELECT zk_mutex_acquire('$p', '10s')}), 't', "s holds $p");
	$peer->acquire('cr', "$NS$p", -1);
	ok(wait_children_count($peer, "$NS$p", 2), 'a Curator client waits behind s');

	my $wpid = worker_pid($node);
	ok(kill('STOP', $wpid), "worker $wpid stopped (SIGSTOP)");
	my $t0 = time;
	is($peer->acquire_result('cr', $timeout_s + 20), 'acquired', 'ZooKeeper expires the session: Curator gets the lock');
	is($node->safe_psql('postgres', 'SELECT lease_remaining FROM zk_status()'), '00:00:00',
		'zk_status: lease_remaining 00:00:00');
	$s->start(qq{SELECT zk_mutex_acquire('$p', '1s')});
	my $r = finish_statement($node, $s, 15);
	my $el = time - $t0;
	isnt($r->{out}, 't', 'the reentrant acquire by the old holder does not say true')
	  or diag("out=[$r->{out}] err=[$r->{err}]");
	ok(($r->{out} eq 'f' && !defined $r->{sqlstate}) || ($r->{sqlstate} // '') eq '08006',
		'it says false after its timeout, or fails with 08006 (out=[' . $r->{out} . '] sqlstate=' . ($r->{sqlstate} // 'none') . ')');
	ok(!$r->{hung}, 'it does not hang');

	ok(kill('CONT', $wpid), 'worker continued (SIGCONT)');
	ok(wait_new_session($s0), 'the worker notices the session is gone and opens a new one');
	ok(wait_until(sub { lock_state($node, $s->pid, $p) eq 'lost' }, 15, 'lost'), "zk_locks: s's lock on $p is lost");
	is(scalar @{ lock_children($peer, "$NS$p") }, 1, "ZooKeeper has one node under $p: Curator's");
	is($peer->release('cr'), 'released', 'Curator releases');
	$r = $s->query(qq{SELECT zk_mutex_acquire('$p', '10s')});
	is($r->{out}, 't', 'a later acquire by s works') or diag($r->{err});
	$peer->acquire('cr2', "$NS$p", 500);
	is($peer->acquire_result('cr2'), 'timeout', '... and excludes Curator');
	$s->query('SELECT zk_release_all()');
	ok(wait_no_zklock_rows($node, $p), 'zk_locks has no row left');
	ok(wait_children_count($peer, "$NS$p", 0), 'no node left');
};

############################################################################
subtest 'zklock.cancel_on_loss: a session expiry cancels the running statement of a holder with ZK001' => sub {
	my ($p, $q) = ('/t402/ca', '/t402/ci');
	my $ha = ZklockTest::Session->new($node, 'ca');     # holds $p, runs pg_sleep
	my $i = ZklockTest::Session->new($node, 'ci');     # holds $q, idle
	my $o = ZklockTest::Session->new($node, 'co');     # holds nothing, runs a statement
	my $blk = ZklockTest::Session->new($node, 'blk');  # blocks $o
	for my $x ($ha, $i, $o)
	{
		my $r = $x->query('SET zklock.cancel_on_loss = on');
		is($r->{sqlstate}, undef, $x->name . ': SET zklock.cancel_on_loss = on') or diag($r->{err});
	}
	is($ha->value(qq{SELECT zk_mutex_acquire('$p', '10s')}), 't', "ca holds $p");
	is($i->value(qq{SELECT zk_mutex_acquire('$q', '10s')}), 't', "ci holds $q and stays idle");
	$blk->value('SELECT pg_advisory_lock(591)');
	$peer->acquire('cca', "$NS$p", -1);
	ok(wait_children_count($peer, "$NS$p", 2), 'a Curator client waits behind ca');
	$ha->start('SELECT pg_sleep(60)');
	$o->start('SELECT pg_advisory_lock(591)');
	ok(wait_running($ha->pid, '%pg_sleep%'), 'ca runs SELECT pg_sleep(60)');
	ok(wait_running($o->pid, '%pg_advisory_lock%'), 'co (no zklock lock) runs a statement too');

	my $st0 = status_row($node);
	my $old = $st0->{session_id};
	my ($id, $pw) = session_file($node);
	# The worker keeps running (stopping it during the JVM's start could
	# outlast the lease, and the loss would come from the lease instead):
	# ZkTool attaches again until the server says Expired, so a session the
	# worker took back is closed on a next attempt.
	my $t_exp = time;
	my $closed = expire_session($zk, $id, $pw);
	my $t_closed = time;
	ok($closed, sprintf('the session %s is closed from a second ZooKeeper handle (in %.1f s)', $old, $t_closed - $t_exp));

	my ($t_lost, $t_done);
	wait_until(
		sub {
			$t_lost //= time if lock_state($node, $ha->pid, $p) eq 'lost';
			if ($ha->done) { $t_done = time; return 1; }
			return 0;
		},
		15, 'the pg_sleep to end');
	my $r = finish_statement($node, $ha, 1);
	ok(defined $t_done, sprintf('the pg_sleep ends early, %.1f s after the session was closed', ($t_done // time) - $t_closed));
	is($r->{sqlstate}, 'ZK001', 'with SQLSTATE ZK001') or diag("out=[$r->{out}] err=[$r->{err}]");
	like($r->{err}, qr/zookeeper lock "\Q$p\E" was lost/, 'naming the path as the user wrote it');
	unlike($r->{err}, qr/\Q$NS\E/, '... without the namespace');
	if (defined $t_lost && defined $t_done)
	{
		cmp_ok($t_done - $t_lost, '<', 1.0,
			sprintf('... %.2f s after zk_locks first showed the lock lost', $t_done - $t_lost));
	}
	is($peer->acquire_result('cca', 15), 'acquired', 'the Curator client gets the lock');
	ok(wait_new_session($old), 'the worker is connected in a new session');
	my $st1 = status_row($node);
	is($st1->{leases_expired}, $st0->{leases_expired}, 'no lease ran out: the loss came from the expiry');
	cmp_ok($st1->{expired_count}, '>', $st0->{expired_count}, 'zk_status counted the expiry');

	ok(!$o->done, 'co, which holds no lost lock, is not cancelled: its statement still runs');
	$r = $i->query('SELECT 1');
	is($r->{out}, '1', 'ci, idle when its lock was lost, runs its next statement');
	is($r->{sqlstate}, undef, '... without being cancelled') or diag($r->{err});
	$blk->value('SELECT pg_advisory_unlock(591)');
	$r = finish_statement($node, $o, 10);
	is($r->{sqlstate}, undef, 'co gets its advisory lock once it is free, no error') or diag($r->{err});
	$r = $ha->query('SELECT 1');
	is($r->{out}, '1', 'ca goes on with its next statement');

	is($peer->release('cca'), 'released', 'Curator releases');
	$_->query('SELECT zk_release_all()') for ($ha, $i);
	$o->query('SELECT pg_advisory_unlock_all()');
	ok(wait_no_zklock_rows($node, $p) && wait_no_zklock_rows($node, $q), 'zk_locks has no row left');
	ok(wait_children_count($peer, "$NS$p", 0) && wait_children_count($peer, "$NS$q", 0), 'no node left');
	$_->quit for ($ha, $i, $o, $blk);
};

############################################################################
subtest 'zklock.cancel_on_loss: the backend cancels by itself when the lease runs out while the worker is stopped' => sub {
	my $p = '/t402/cb';
	my $hb = ZklockTest::Session->new($node, 'cb');
	my $r = $hb->query('SET zklock.cancel_on_loss = on');
	is($r->{sqlstate}, undef, 'SET zklock.cancel_on_loss = on') or diag($r->{err});
	$hb->value('BEGIN');
	is($hb->value(qq{SELECT zk_mutex_acquire_xact('$p', '10s')}), 't', "cb holds $p for its transaction");
	$hb->value(q{INSERT INTO work_done VALUES ('cancel-lease')});
	$peer->acquire('ccb', "$NS$p", -1);
	ok(wait_children_count($peer, "$NS$p", 2), 'a Curator client waits behind cb');
	$hb->start('SELECT pg_sleep(60)');
	ok(wait_running($hb->pid, '%pg_sleep%'), 'cb runs SELECT pg_sleep(60)');

	my $old = status_row($node)->{session_id};
	my $wpid = worker_pid($node);
	ok(kill('STOP', $wpid), "worker $wpid stopped (SIGSTOP)");
	my $t1 = time;
	my $left = lease_left($node);    # the stopped worker cannot extend it any more
	my $t2 = time;
	note("lease left after SIGSTOP: $left s");
	my $t_done;
	wait_until(sub { return 0 unless $hb->done; $t_done = time; 1 }, $left + 5, 'the pg_sleep to end');
	my $curator_first = $peer->has_reply(qr/^(acquired|error) ccb(\s|$)/);
	$r = finish_statement($node, $hb, 1);
	ok(defined $t_done, 'the pg_sleep ends early while the worker is still stopped');
	is($r->{sqlstate}, 'ZK001', 'with SQLSTATE ZK001') or diag("out=[$r->{out}] err=[$r->{err}]");
	like($r->{err}, qr/zookeeper lock "\Q$p\E" was lost/, 'naming the path');
	if (defined $t_done)
	{
		# the lease ended between $t1 + $left and $t2 + $left
		my ($early, $late) = ($t_done - ($t2 + $left), $t_done - ($t1 + $left));
		note(sprintf('pg_sleep ended %.3f..%.3f s after the lease ran out', $early, $late));
		cmp_ok($early, '>', -0.1, '... not before the lease ran out');
		cmp_ok($late, '<', 0.5, '... within 0.5 s after it ran out');
	}
	ok(!$curator_first, '... before the Curator client got the lock');
	$hb->query('ROLLBACK');
	is(committed($node, 'cancel-lease'), '0', 'the row of the cancelled transaction is not committed');

	ok(kill('CONT', $wpid), 'worker continued (SIGCONT)');
	is($peer->acquire_result('ccb', $timeout_s + 20), 'acquired', 'the Curator client gets the lock');
	ok(wait_new_session($old), 'the worker is connected in a new session');
	is($peer->release('ccb'), 'released', 'Curator releases');
	ok(wait_no_zklock_rows($node, $p), 'zk_locks has no row left');
	ok(wait_children_count($peer, "$NS$p", 0), 'no node left');
	$hb->quit;
};

############################################################################
subtest 'zklock.cancel_on_loss: a PL/pgSQL handler for SQLSTATE ZK001 gets control' => sub {
	my $p = '/t402/cp';
	my $c = ZklockTest::Session->new($node, 'cp');
	my $r = $c->query('SET zklock.cancel_on_loss = on');
	is($r->{sqlstate}, undef, 'SET zklock.cancel_on_loss = on') or diag($r->{err});
	is($c->value(qq{SELECT zk_mutex_acquire('$p', '10s')}), 't', "cp holds $p");
	$c->start('CALL sleep_guarded()');
	ok(wait_running($c->pid, '%sleep_guarded%'), 'cp runs a procedure: pg_sleep(60) in a block with EXCEPTION WHEN SQLSTATE \'ZK001\'');

	my $old = status_row($node)->{session_id};
	my $wpid = worker_pid($node);
	ok(kill('STOP', $wpid), "worker $wpid stopped (SIGSTOP) until the lease runs out");
	my $left = lease_left($node);
	$r = finish_statement($node, $c, $left + 5);
	ok(kill('CONT', $wpid), 'worker continued (SIGCONT)');
	ok(!$r->{hung}, 'the procedure ends early');
	is($r->{sqlstate}, undef, 'without an error: the handler caught it') or diag("err=[$r->{err}]");
	like($r->{err}, qr/NOTICE:.*handler ran: ZK001 zookeeper lock "\Q$p\E" was lost/, 'the handler ran (its NOTICE)');
	is($node->safe_psql('postgres', 'SELECT state, message FROM caught'), qq{ZK001|zookeeper lock "$p" was lost},
		'and recorded the error: its row is committed');
	ok(wait_new_session($old), 'the worker is connected in a new session');

	# issue 29 (5): the lock is still held, lost; a cancel was asked once
	# already, and later long statements stop too
	ok(wait_until(sub { lock_state($node, $c->pid, $p) eq 'lost' }, 15, 'lost'), "zk_locks: cp's lock on $p is lost");
	$c->start('CALL sleep_guarded()');
	$r = finish_statement($node, $c, 10);
	ok(!$r->{hung}, 'a second CALL under the same lost lock ends early too');
	like($r->{err}, qr/NOTICE:.*handler ran: ZK001 zookeeper lock "\Q$p\E" was lost/, '... its handler ran again')
	  or diag("err=[$r->{err}]");
	$c->start('SELECT pg_sleep(20)');
	$r = finish_statement($node, $c, 10);
	is($r->{sqlstate}, 'ZK001', 'and a SELECT pg_sleep(20) after it is cancelled with ZK001') or diag("err=[$r->{err}]");
	$c->query('SELECT zk_release_all()');
	ok(wait_no_zklock_rows($node, $p), 'zk_locks has no row left');
	ok(wait_children_count($peer, "$NS$p", 0), 'no node left');
	$c->quit;
};

############################################################################
# Issue 29 (5).  The timer asks for one cancel when it sees the loss while
# a statement runs.  A statement that does no CHECK_FOR_INTERRUPTS after
# the cancel is asked (a utility statement such as SHOW or SET has none at
# all) ends with the cancel still pending, and PostgreSQL drops it when it
# reads the next command.  Before the fix the timer then kept quiet for
# good (once per loss): a long statement later under the same lost lock
# ran to its end.  The holder runs a tight client loop of SHOW ALL (most
# of its time is spent inside the statement, so nearly every timer tick
# that sees the loss lands in one) across the moment the lease runs out
# (the worker stopped) and for 4 s (40 ticks) after, then pg_sleep(20).
subtest 'zklock.cancel_on_loss: a cancel dropped as a short statement ends does not spare the next long one' => sub {
	my $p = '/t402/cl';
	my $h = ZklockTest::Session->new($node, 'cl');
	my $r = $h->query('SET zklock.cancel_on_loss = on');
	is($r->{sqlstate}, undef, 'SET zklock.cancel_on_loss = on') or diag($r->{err});
	$h->value('BEGIN');
	is($h->value(qq{SELECT zk_mutex_acquire_xact('$p', '10s')}), 't', "cl holds $p for its transaction");
	$h->value(q{INSERT INTO work_done VALUES ('cancel-loop')});
	$peer->acquire('ccl', "$NS$p", -1);
	ok(wait_children_count($peer, "$NS$p", 2), 'a Curator client waits behind cl');

	# psql runs each row as a statement of its own (\gexec); their output
	# is thrown away
	my $loop = sub {
		my ($n) = @_;
		return "\\o /dev/null\nSELECT 'SHOW ALL' FROM generate_series(1, $n) \\gexec\n\\o";
	};
	my $t0 = time;
	$r = $h->query($loop->(2000), 120);
	my $rate = 2000 / (time - $t0);
	is($r->{sqlstate}, undef, sprintf('a loop of 2000 SHOW ALL (%.0f a second) while the lock is held', $rate))
	  or diag($r->{err});

	my $old = status_row($node)->{session_id};
	my $wpid = worker_pid($node);
	ok(kill('STOP', $wpid), "worker $wpid stopped (SIGSTOP)");
	my $left = lease_left($node);
	my $n = int($rate * ($left + 4));
	my $t_start = time;
	$h->start($loop->($n) . "\nSELECT extract(epoch FROM clock_timestamp())\n;\nSELECT pg_sleep(20)");
	note(sprintf('lease left %.3f s; %d SHOW ALL, then SELECT pg_sleep(20)', $left, $n));
	my $t_done;
	wait_until(sub { return 0 unless $h->done; $t_done = time; 1 }, $left + 120, 'the loop and the pg_sleep to end');
	$r = finish_statement($node, $h, 30);
	$t_done //= time;
	my ($t_sleep) = $r->{out} =~ /^(\d+\.\d+)$/m;
	ok(defined $t_sleep, sprintf('the loop ran %.1f s (the lease ran out %.1f s into it), then pg_sleep(20) started',
			($t_sleep // $t_done) - $t_start, $left)) or diag("out=[$r->{out}]");
	is($r->{sqlstate}, 'ZK001', 'the pg_sleep is cancelled with SQLSTATE ZK001')
	  or diag("err=[$r->{err}]");
	like($r->{err}, qr/zookeeper lock "\Q$p\E" was lost/, 'naming the path');
	is(scalar(() = $r->{err} =~ /\bERROR:/g), 1, '... the only error: no statement of the loop failed')
	  or diag("err=[$r->{err}]");
	cmp_ok($t_done - ($t_sleep // $t_start), '<', 5,
		sprintf('... %.2f s after the pg_sleep started (the loss was seen before it)', $t_done - ($t_sleep // $t_start)));
	$h->query('ROLLBACK');
	is(committed($node, 'cancel-loop'), '0', 'the row of the cancelled transaction is not committed');

	ok(kill('CONT', $wpid), 'worker continued (SIGCONT)');
	is($peer->acquire_result('ccl', $timeout_s + 20), 'acquired', 'the Curator client gets the lock');
	ok(wait_new_session($old), 'the worker is connected in a new session');
	is($peer->release('ccl'), 'released', 'Curator releases');
	ok(wait_no_zklock_rows($node, $p), 'zk_locks has no row left');
	ok(wait_children_count($peer, "$NS$p", 0), 'no node left');
	$h->quit;
};

############################################################################
subtest 'without zklock.cancel_on_loss the statement runs on and COMMIT fails' => sub {
	my $p = '/t402/off';
	my ($code, $out, $err) = as_app(q{SET zklock.cancel_on_loss = on; SHOW zklock.cancel_on_loss});
	is($code, undef, 'zklock.cancel_on_loss is a user setting: a user who is not a superuser sets it') or diag($err);
	my $d = ZklockTest::Session->new($node, 'off');
	my $blk = ZklockTest::Session->new($node, 'blk2');
	is($d->query('SHOW zklock.cancel_on_loss')->{out}, 'off', 'zklock.cancel_on_loss is off by default');
	$d->value('BEGIN');
	is($d->value(qq{SELECT zk_mutex_acquire_xact('$p', '10s')}), 't', "off holds $p for its transaction");
	$d->value(q{INSERT INTO work_done VALUES ('cancel-off')});
	$peer->acquire('cof', "$NS$p", -1);
	ok(wait_children_count($peer, "$NS$p", 2), 'a Curator client waits behind it');
	$blk->value('SELECT pg_advisory_lock(592)');
	$d->start('SELECT pg_advisory_lock(592)');
	ok(wait_running($d->pid, '%pg_advisory_lock%'), 'it runs a statement (waits for an advisory lock)');

	my $old = status_row($node)->{session_id};
	my $wpid = worker_pid($node);
	ok(kill('STOP', $wpid), "worker $wpid stopped (SIGSTOP)");
	is($peer->acquire_result('cof', $timeout_s + 20), 'acquired',
		'ZooKeeper expires the session: the Curator client gets the lock');
	ok(!$d->done, 'the statement still runs after the lease ran out');
	ok(kill('CONT', $wpid), 'worker continued (SIGCONT)');
	ok(wait_new_session($old), 'the worker is connected in a new session');
	ok(wait_until(sub { lock_state($node, $d->pid, $p) eq 'lost' }, 15, 'lost'), "zk_locks: the lock on $p is lost");
	ok(!$d->done, 'the statement still runs after the worker found the lock lost');
	$blk->value('SELECT pg_advisory_unlock(592)');
	my $r = finish_statement($node, $d, 10);
	is($r->{sqlstate}, undef, 'it ends normally once its advisory lock is free') or diag($r->{err});
	$r = $d->query('COMMIT');
	is($r->{sqlstate}, '40000', 'COMMIT fails with 40000') or diag("COMMIT: err=[$r->{err}]");
	is(committed($node, 'cancel-off'), '0', '... and the row is not committed');
	$d->query('ROLLBACK');
	$d->query('SELECT pg_advisory_unlock_all()');
	is($peer->release('cof'), 'released', 'Curator releases');
	ok(wait_no_zklock_rows($node, $p), 'zk_locks has no row left');
	ok(wait_children_count($peer, "$NS$p", 0), 'no node left');
	$_->quit for ($d, $blk);
};

is($node->safe_psql('postgres', 'SELECT count(*) FROM zk_locks'), '0', 'zk_locks is empty at the end')
  or diag($node->safe_psql('postgres', 'SELECT pid, path, state FROM zk_locks'));
$s->quit;
$peer->quit;
$node->stop;
stop_zk($zk);
done_testing();

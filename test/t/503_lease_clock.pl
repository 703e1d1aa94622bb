
# 503_lease_clock: the lease does not follow the wall clock.
#
# What users rely on: a zklock lock is valid while the worker has proof
# that its ZooKeeper session is alive (the lease).  ZooKeeper measures the
# session timeout on its own clock, so the lease must be measured on a
# clock that only moves forward at the rate real time passes (issue 18:
# CLOCK_BOOTTIME, shared by the worker and the backends), never on the
# wall clock, which an operator or NTP may step either way at any time.
# So, with the database host's wall clock stepped:
#   - back, while a lock is held idle: nothing changes; the lease shown is
#     never longer than the session timeout allows;
#   - forward, while a lock is held idle: nothing changes either: the lock
#     stays held, the session stays connected, no lease runs out, a Curator
#     client waiting for the lock does not get it, COMMIT of a transaction
#     holding an _xact lock commits;
#   - back, while the worker is stalled (SIGSTOP) past the session timeout
#     and a Curator client takes the lock: COMMIT of the transaction that
#     held an _xact lock fails with 40000 and its row is not committed,
#     exactly as without the step;
#   - forward, while the worker is stalled for less than the lease: COMMIT
#     still commits (the lease has real time left), and once the worker
#     runs again the session and the locks are as they were;
#   - with zklock.cancel_on_loss (test 402_lost_lock_cancel), a clock stepped back does not
#     put off the cancel of a statement whose lock's lease runs out.
# The clock is stepped with libfaketime (test/perl/ZklockClock.pm) for the
# PostgreSQL processes only; ZooKeeper and Curator keep the real clock.
# Every step is read back: a new backend's clock_timestamp() and the
# worker's stamp on a grant (zk_locks.since) must show the offset, so a
# "nothing happened" is not a clock that did not move.
#
# Before issue 18 (the lease on GetCurrentTimestamp): a forward step of
# 60 s made the worker log "lease ran out 5xxxx ms ago" at once, close its
# live session and call every lock lost (Curator got the lock); a backward
# step of 20 s showed a lease of 20 s more than the session timeout and
# let COMMIT through after Curator had the lock.
# With the lease on the monotonic clock (1d95404) the last part still
# failed: zklock.cancel_on_loss checks from a timer of PostgreSQL's timeout
# machinery, which compares deadlines with the wall clock, so after a step
# of 20 s back the cancel came 19.9 s late, after Curator had the lock.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use ZklockTest;
use ZklockFault;
use ZklockClock;

my $zk = start_zk();
my $node = new_faketime_node('clock', $zk,
	"zklock.session_timeout = '4s'\nzklock.connect_timeout = '20s'\nzklock.lease_margin = '1s'\n");
my $peer = new_peer($zk);

my $st = status_row($node);
is($st->{session_timeout}, '4000', 'negotiated session timeout 4 s');
my $timeout_s = $st->{session_timeout} / 1000;
my $lease_s = $timeout_s - 1;    # session timeout - zklock.lease_margin
# ZooKeeper expires a session one timeout after it last heard from it (its
# expiry runs on ticks of 500 ms): a fault that would end the session shows
# within this window.
my $window = $timeout_s + 2;

$node->safe_psql('postgres', q{CREATE TABLE work_done(tag text PRIMARY KEY)});


my $h = ZklockTest::Session->new($node, 'h');        # holds a session lock, idle
my $x = ZklockTest::Session->new($node, 'x');        # holds an _xact lock, has written a row
my $probe = ZklockTest::Session->new($node, 'probe'); # reads the worker's clock back

# Read the step back in a new backend and in the worker.
sub read_back
{
	my ($what, @sessions) = @_;
	my $want = clock_offset($node);
	my $b = backend_clock_offset($node);
	ok(abs($b - $want) < 2, sprintf('%s: a backend\'s clock reads %+.1f s off the real clock (offset %+d s)', $what, $b, $want));
	sessions_read_back($what, @sessions);
	my $w = worker_clock_offset($probe, '/t503/probe');
	ok(defined $w && abs($w - $want) < 2,
		sprintf('%s: the worker\'s clock (its stamp on a grant) reads %s s off the real clock', $what,
			defined $w ? sprintf('%+.1f', $w) : 'nothing'));
	return;
}

# The backends of the sessions whose statements count must follow the
# faked clock too (each process reads the offset file itself).
sub sessions_read_back
{
	my ($what, @sessions) = @_;
	my $want = clock_offset($node);
	for my $x (@sessions)
	{
		my $o = session_clock_offset($x);
		ok(abs($o - $want) < 2, sprintf('%s: the clock of %s\'s backend reads %+.1f s off', $what, $x->name, $o));
	}
	return;
}

# What would show that the session or the lock was given up.
sub trouble
{
	my ($st0, $peer_id, $pid, $path) = @_;
	return "Curator got $path" if $peer->has_reply(qr/^(acquired|error) \Q$peer_id\E(\s|$)/);
	my $s = status_row($node);
	return "zk_status state $s->{state}" if $s->{state} ne 'connected';
	return "new session $s->{session_id}" if $s->{session_id} ne $st0->{session_id};
	return "leases_expired $s->{leases_expired}" if $s->{leases_expired} ne $st0->{leases_expired};
	return "locks_lost $s->{locks_lost}" if $s->{locks_lost} ne $st0->{locks_lost};
	my $ls = lock_state($node, $pid, $path);
	return "zk_locks says $ls for $path" if $ls ne 'held';
	return undef;
}

# $h holds $hp (Curator queued behind it); $x holds $xp for its open
# transaction and has written the row $tag.
sub set_up_holders
{
	my ($hp, $xp, $peer_id, $tag) = @_;
	is($h->value(qq{SELECT zk_mutex_acquire('$hp', '10s')}), 't', "h holds $hp");
	$x->value('BEGIN');
	is($x->value(qq{SELECT zk_mutex_acquire_xact('$xp', '10s')}), 't', "x holds $xp for its transaction");
	$x->value(qq{INSERT INTO work_done VALUES ('$tag')});
	$peer->acquire($peer_id, $hp, -1);
	ok(wait_children_count($peer, $hp, 2), "a Curator client waits for $hp behind h");
	return;
}

# Give everything back after a part, whatever happened in it.
sub clean_up
{
	my ($hp, $xp, $peer_id) = @_;
	$x->query('ROLLBACK');    # only a warning when COMMIT ended it
	$h->query('SELECT zk_release_all()');
	# Curator's acquire is still pending (then h's release hands it the
	# lock) or it already got the lock: either way it answers
	my $got = $peer->acquire_result($peer_id, 15) // 'no answer';
	is($got, 'acquired', "clean up: the Curator client gets $hp");
	$peer->release($peer_id) if $got eq 'acquired';
	ok(wait_until(sub { status_row($node)->{state} eq 'connected' }, 30, 'connected'), 'clean up: zklock is connected');
	ok(wait_no_zklock_rows($node, $hp) && wait_no_zklock_rows($node, $xp), 'clean up: zk_locks has no row left');
	ok(wait_children_count($peer, $hp, 0) && wait_children_count($peer, $xp, 0), 'clean up: no node left');
	return;
}

# A clock step while the locks are held and the worker runs.
sub idle_step
{
	my ($delta, $part) = @_;
	my ($hp, $xp, $pid, $tag) = ("/t503/$part", "/t503/${part}x", 'c' . $part, "idle-$part");
	set_up_holders($hp, $xp, $pid, $tag);
	my $st0 = status_row($node);
	my $log_at = -s $node->logfile;

	step_clock($node, $delta);
	read_back(sprintf("after a step of %+d s", $delta), $h, $x);
	my $seen = nothing_within($window, sub { trouble($st0, $pid, $h->pid, $hp) });
	is($seen, undef, "for ${window} s after the step (more than the session timeout) the session and the lock stay as they were")
	  or diag("instead: $seen");
	is(lock_state($node, $h->pid, $hp), 'held', "zk_locks: h still holds $hp");
	my $s = status_row($node);
	is($s->{state}, 'connected', 'zk_status: connected');
	is($s->{session_id}, $st0->{session_id}, 'zk_status: the same session');
	is($s->{leases_expired}, $st0->{leases_expired}, 'zk_status: no lease ran out');
	is($s->{locks_lost}, $st0->{locks_lost}, 'zk_status: no lock lost');
	ok(!$peer->has_reply(qr/^acquired \Q$pid\E$/), "the Curator client did not get $hp");
	my $left = lease_left($node);
	ok($left > 0 && $left <= $lease_s + 0.05,
		"zk_status: the lease has ${left} s left: more than 0, at most the session timeout minus the margin ($lease_s s)");
	unlike(substr(slurp_file($node->logfile), $log_at), qr/lease ran out/, 'the log says no lease ran out');

	$x->start('COMMIT');
	my $r = finish_statement($node, $x, 20);
	is($r->{sqlstate}, undef, "COMMIT of x's transaction (_xact lock on $xp) succeeds") or diag($r->{err});
	is(committed($node, $tag), '1', '... and its row is committed');
	clean_up($hp, $xp, $pid);
	return;
}

############################################################################
subtest 'a clock stepped back 20 s while a lock is held idle changes nothing' => sub {
	idle_step(-20, 'back');
};

############################################################################
subtest 'a clock stepped forward 60 s while a lock is held idle changes nothing' => sub {
	idle_step(60, 'fwd');
};

############################################################################
subtest 'a clock stepped back 20 s while the worker is stalled does not let COMMIT through once Curator has the lock' => sub {
	my ($xp, $tag) = ('/t503/stall', 'stalled-back');
	my $s0 = status_row($node)->{session_id};
	$x->value('BEGIN');
	is($x->value(qq{SELECT zk_mutex_acquire_xact('$xp', '10s')}), 't', "x holds $xp for its transaction");
	$x->value(qq{INSERT INTO work_done VALUES ('$tag')});
	$peer->acquire('cst', $xp, -1);
	ok(wait_children_count($peer, $xp, 2), "a Curator client waits for $xp behind x");

	my $wpid = worker_pid($node);
	ok(kill('STOP', $wpid), "worker $wpid stopped (SIGSTOP)");
	my $t0 = time;
	step_clock($node, -20);
	my $b = backend_clock_offset($node);
	ok(abs($b - clock_offset($node)) < 2, sprintf('a backend\'s clock reads %+.1f s off the real clock', $b));
	sessions_read_back('after the step of -20 s', $x);

	ok(wait_until(sub { lease_left($node) == 0 }, $lease_s + 3, 'lease_remaining 0'),
		sprintf('zk_status: the lease runs out while the worker is stopped (%.1f s after SIGSTOP)', time - $t0))
	  or diag('lease_remaining: ' . lease_left($node) . ' s');
	ok(!$peer->has_reply(qr/^(acquired|error) cst(\s|$)/), '... before the Curator client gets the lock');
	is($peer->acquire_result('cst', $timeout_s + 20), 'acquired',
		'ZooKeeper expires the stalled session: the Curator client gets the lock');
	note(sprintf('Curator got %s %.1f s after SIGSTOP', $xp, time - $t0));

	$x->start('COMMIT');
	my $r = finish_statement($node, $x, 20);
	is($r->{sqlstate}, '40000', 'COMMIT of the transaction that relied on the lock fails with 40000')
	  or diag("COMMIT: err=[$r->{err}]");
	is(committed($node, $tag), '0', '... and its row is not committed');
	$x->query('ROLLBACK');

	ok(kill('CONT', $wpid), 'worker continued (SIGCONT)');
	ok(wait_until(sub { my $s = status_row($node); $s->{state} eq 'connected' && $s->{session_id} ne $s0 }, 30,
			'a new session'),
		'the worker opens a new session');
	read_back('after the stall');
	is($peer->release('cst'), 'released', 'the Curator client releases');
	ok(wait_no_zklock_rows($node, $xp), 'zk_locks has no row left');
	ok(wait_children_count($peer, $xp, 0), 'no node left');
};

############################################################################
subtest 'a clock stepped forward 60 s during a short stall of the worker changes nothing' => sub {
	my ($hp, $xp, $pid, $tag) = ('/t503/sfwd', '/t503/sfwdx', 'csf', 'stalled-fwd');
	set_up_holders($hp, $xp, $pid, $tag);
	my $st0 = status_row($node);
	my $log_at = -s $node->logfile;

	my $wpid = worker_pid($node);
	ok(kill('STOP', $wpid), "worker $wpid stopped (SIGSTOP)");
	my $t0 = time;
	step_clock($node, 60);
	sessions_read_back('after the step of +60 s', $x);
	my $left = lease_left($node);
	ok($left > 0.5, "zk_status: with the worker stopped, the lease still has ${left} s left after the step");
	$x->start('COMMIT');
	my $r = finish_statement($node, $x, 20);
	my $el = time - $t0;
	is($r->{sqlstate}, undef, sprintf('COMMIT of x\'s transaction, %.1f s into the stall, succeeds', $el))
	  or diag("COMMIT: err=[$r->{err}]");
	is(committed($node, $tag), '1', '... and its row is committed');
	ok(kill('CONT', $wpid), sprintf('worker continued (SIGCONT) after %.1f s, less than the lease', time - $t0));

	read_back('after the stall');
	my $seen = nothing_within($window, sub { trouble($st0, $pid, $h->pid, $hp) });
	is($seen, undef, "for ${window} s after the stall the session and h's lock stay as they were")
	  or diag("instead: $seen");
	my $s = status_row($node);
	is($s->{session_id}, $st0->{session_id}, 'zk_status: the same session');
	is($s->{leases_expired}, $st0->{leases_expired}, 'zk_status: no lease ran out');
	ok(!$peer->has_reply(qr/^acquired \Q$pid\E$/), "the Curator client did not get $hp");
	unlike(substr(slurp_file($node->logfile), $log_at), qr/lease ran out/, 'the log says no lease ran out');
	clean_up($hp, $xp, $pid);
};

############################################################################
# zklock.cancel_on_loss promises a cancel as soon as the lease runs out
# (test 402_lost_lock_cancel); a clock stepped back must not put it off by the step.
subtest 'with zklock.cancel_on_loss, a clock stepped back 20 s does not delay the cancel when the lease runs out' => sub {
	my ($p, $tag) = ('/t503/cancel', 'cancel-back');
	my $c = ZklockTest::Session->new($node, 'c');
	my $r = $c->query('SET zklock.cancel_on_loss = on');
	is($r->{sqlstate}, undef, 'SET zklock.cancel_on_loss = on') or diag($r->{err});
	$c->value('BEGIN');
	is($c->value(qq{SELECT zk_mutex_acquire_xact('$p', '10s')}), 't', "c holds $p for its transaction");
	$c->value(qq{INSERT INTO work_done VALUES ('$tag')});
	$peer->acquire('cca', $p, -1);
	ok(wait_children_count($peer, $p, 2), "a Curator client waits for $p behind c");
	# the step comes after the acquire, which started c's watch of its locks
	step_clock($node, -20);
	sessions_read_back('after the step of -20 s', $c);
	# A statement that computes, not pg_sleep: libfaketime stops faking
	# inside its select/poll/epoll_wait wrappers, so a signal handler that
	# interrupts a sleeping backend would read the real clock, not the
	# stepped one (see ZklockClock.pm); a computing backend's handlers read
	# the stepped clock, as every handler does on a host whose clock was
	# really stepped.
	$c->start('DO $$BEGIN LOOP END LOOP; END$$');
	ok(wait_sql($node, 'SELECT count(*) FROM pg_stat_activity WHERE pid = ' . $c->pid
			  . q{ AND state = 'active' AND query LIKE 'DO %'}, '1', 10),
		'c runs a statement that computes (an endless PL/pgSQL loop)');

	my $s0 = status_row($node)->{session_id};
	my $wpid = worker_pid($node);
	ok(kill('STOP', $wpid), "worker $wpid stopped (SIGSTOP)");
	my $t1 = time;
	my $left = lease_left($node);
	my $t_done;
	my $curator_first;
	# bounded by the step (20 s) and more: a late cancel shows how late
	wait_until(sub {
			$curator_first //= $peer->has_reply(qr/^(acquired|error) cca(\s|$)/) ? 1 : undef;
			return 0 unless $c->done;
			$t_done = time;
			1;
		}, $left + 25, 'the statement to end');
	$curator_first //= $peer->has_reply(qr/^(acquired|error) cca(\s|$)/);
	$r = finish_statement($node, $c, 1);
	ok(defined $t_done && !$r->{hung},
		defined $t_done
		? sprintf('the statement is cancelled, %.1f s after SIGSTOP (lease left then: %.1f s)', $t_done - $t1, $left)
		: sprintf('the statement is cancelled (it still ran %.0f s after SIGSTOP; lease left then: %.1f s)', $left + 25, $left));
	is($r->{sqlstate}, 'ZK001', 'with SQLSTATE ZK001') or diag("out=[$r->{out}] err=[$r->{err}]");
	cmp_ok(($t_done // time) - ($t1 + $left), '<', 0.5, '... within 0.5 s after the lease ran out');
	ok(!$curator_first, '... before the Curator client got the lock');
	$c->query('ROLLBACK');
	is(committed($node, $tag), '0', 'the row of the cancelled transaction is not committed');

	ok(kill('CONT', $wpid), 'worker continued (SIGCONT)');
	is($peer->acquire_result('cca', $timeout_s + 20), 'acquired', 'the Curator client gets the lock');
	ok(wait_until(sub { my $s = status_row($node); $s->{state} eq 'connected' && $s->{session_id} ne $s0 }, 30,
			'a new session'),
		'the worker opens a new session');
	is($peer->release('cca'), 'released', 'the Curator client releases');
	ok(wait_no_zklock_rows($node, $p), 'zk_locks has no row left');
	ok(wait_children_count($peer, $p, 0), 'no node left');
	$c->quit;
};

is($node->safe_psql('postgres', 'SELECT count(*) FROM zk_locks'), '0', 'zk_locks is empty at the end')
  or diag($node->safe_psql('postgres', 'SELECT pid, path, state FROM zk_locks'));
$_->quit for ($h, $x, $probe);
$peer->quit;
$node->stop;
stop_zk($zk);
done_testing();

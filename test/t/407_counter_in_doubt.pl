
# 407_counter_in_doubt: a counter write that left without an answer is in
# doubt (08006) and is never sent again: not by the same worker after a
# reconnect, not by a restarted worker that takes the request over, not in
# the next session after the lease ran out.
#
# What users rely on:
#   - zk_atomic_long_add(path, 1): the counter grows by at most one per
#     call that reported success or failed with 08006, and by at least one
#     per success (final - initial <= successes + 08006, >= successes);
#     no call's add is applied twice;
#   - zk_shared_count_try_set and zk_atomic_long_compare_and_set: a call
#     that answered false did not have its value applied, so the jobs
#     pattern (claim the period with compare_and_set, then work) never skips
#     a period it claimed.
# Faults, made for real: a TCP proxy between the worker and ZooKeeper
# (test/perl/ZklockProxy.pm, drop_set_replies) lets the setData reach the
# server (it is applied) and drops its answer; then the connection is cut
# (same session), the worker is restarted with SIGTERM (the new worker
# takes the request over from shared memory), stopped with SIGSTOP until
# the lease ran out (the handle is closed, the write answered ZCLOSING, a
# new session is made), stopped until the caller itself stops waiting
# (zklock.connect_timeout) and must say the write is in doubt, or killed
# with SIGKILL (crash restart).  Several
# sessions adding at once through a restart check the read half of an add
# is redone (only the writes in flight are in doubt) and that a slot
# reused after an in-doubt write starts clean.  The Curator peer reads the
# counters from outside (directly, not through the proxy); the rows the
# calling SQL committed say what it was told.
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
my $proxy = ZklockProxy->start($zk);
# connect_timeout above every fault, so a call fails only for its write
my $node = new_zklock_node('counter_doubt', $proxy->connect,
	"zklock.session_timeout = '6s'\nzklock.connect_timeout = '40s'\nrestart_after_crash = on\n");
my $peer = new_peer($zk);

sub sql { return $node->safe_psql('postgres', $_[0]); }

sub peer_long { return $peer->long_get($_[0]); }
# "value version"
sub peer_count { return join(' ', $peer->count_get($_[0])); }

# gone($pid): the process has exited (gone, or a zombie not reaped yet)
sub gone
{
	my ($pid) = @_;
	open(my $fh, '<', "/proc/$pid/stat") or return 1;
	my $st = <$fh> // '';
	close $fh;
	return $st =~ /^\d+ \(.*\) [ZX] /;
}

# A row per call that said it succeeded (adds: the value it returned;
# claims: the value a true try_set / compare_and_set wrote), committed by
# the calling statement itself; a row per call that failed, with its
# SQLSTATE, written by the loop of the load part.
sql(q{CREATE TABLE adds(path text, v bigint)});
sql(q{CREATE TABLE claims(path text, v bigint)});
sql(q{CREATE TABLE add_fail(path text, state text)});
sql(q{CREATE TABLE stop_loops(x int)});
sql(q{
CREATE PROCEDURE add_loop(p text) LANGUAGE plpgsql AS $$
DECLARE st text;
BEGIN
  WHILE NOT EXISTS (SELECT 1 FROM stop_loops) LOOP
    BEGIN
      INSERT INTO adds SELECT p, zk_atomic_long_add(p, 1);
    EXCEPTION WHEN OTHERS THEN
      GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE;
      INSERT INTO add_fail VALUES (p, st);
    END;
    COMMIT;
  END LOOP;
END $$});

my $s0 = status_row($node)->{session_id};
like($s0, qr/^0x[0-9a-f]{16}$/, "worker connected through the proxy, session $s0");

# the outcome of one call of zk_atomic_long_add on $p from $initial:
# checked from outside (Curator's value, the committed row)
sub check_one_add
{
	my ($p, $initial, $r, $what) = @_;
	my $final = peer_long($p);
	my $succ = sql(qq{SELECT count(*) FROM adds WHERE path = '$p'});
	my $doubt = (defined $r->{sqlstate} && $r->{sqlstate} eq '08006') ? 1 : 0;
	note("$what: initial $initial, final $final, successes $succ, in doubt $doubt, "
		  . "sqlstate " . ($r->{sqlstate} // 'none') . ", out [$r->{out}]");
	ok($final - $initial <= $succ + $doubt,
		"$what: the counter grew by at most one per success or 08006 "
		  . "(grew by " . ($final - $initial) . ", $succ success, $doubt in doubt)");
	ok($final - $initial >= $succ, "$what: ... and by at least one per success");
	is($r->{sqlstate}, '08006', "$what: the call whose answer was lost fails with 08006")
	  or diag("out=[$r->{out}] err=[$r->{err}]");
	like($r->{err}, qr/may or may not have been applied/, "$what: saying its outcome is unknown");
	ok($final - $initial == 1, "$what: the write that left was applied once, not twice");
	return;
}

# restart the worker with SIGTERM while the answer of the write is lost;
# the proxy passes again once the old worker is gone, so the new one
# works on a clean connection in the same session
sub restart_during_drop
{
	my $old = worker_pid($node);
	ok(kill('TERM', $old), "worker $old stopped with SIGTERM, the write's answer not in");
	ok(wait_until(sub { gone($old) }, 15, "worker $old to exit"), 'the old worker exited');
	$proxy->set_mode('pass');
	ok( wait_until(
			sub {
				my $st = status_row($node);
				$st->{state} eq 'connected' && $st->{worker_pid} ne $old;
			},
			20, 'a new worker, connected'),
		'a new worker is connected');
	is(status_row($node)->{session_id}, $s0, '... in the same session');
	return;
}

subtest 'an add taken over by a restarted worker (SIGTERM) is in doubt, not sent again' => sub {
	my $p = '/t407/term_add';
	my $s = ZklockTest::Session->new($node, 'term_add');
	sql(qq{SELECT zk_atomic_long_set('$p', 10)});
	my $initial = peer_long($p);
	is($initial, '10', 'Curator reads 10');
	ok(drop_set_reply($proxy, $s, qq{INSERT INTO adds SELECT '$p', zk_atomic_long_add('$p', 1) RETURNING v}),
		'the add went out and its answer was dropped');
	restart_during_drop();
	my $r = $s->result(45);
	ok($r->{done}, 'the call returned');
	check_one_add($p, $initial, $r, 'SIGTERM');
	is($s->value(qq{SELECT zk_atomic_long_add('$p', 1)}), '12', 'the next add sees the one write');
	$s->quit;
};

subtest 'try_set and compare_and_set taken over by a restarted worker: never false after applied' => sub {
	my $c = '/t407/term_try';
	my $s = ZklockTest::Session->new($node, 'term_try');
	sql(qq{SELECT zk_shared_count_set('$c', 5)});
	is(peer_count($c), '5 0', 'a SharedCount at 5, version 0');
	ok( drop_set_reply($proxy, $s,
			qq{INSERT INTO claims SELECT '$c', 6 WHERE zk_shared_count_try_set('$c', 6, 0) RETURNING v}),
		'try_set went out and its answer was dropped');
	restart_during_drop();
	my $r = $s->result(45);
	my $seen = peer_count($c);
	my $row = sql(qq{SELECT count(*) FROM claims WHERE path = '$c'});
	note("try_set: Curator reads $seen, claim rows $row, sqlstate "
		  . ($r->{sqlstate} // 'none') . ", out [$r->{out}]");
	is($seen, '6 1', 'Curator reads 6 at version 1: the write was applied once');
	ok( !($seen eq '6 1' && !defined $r->{sqlstate} && $r->{out} eq ''),
		'try_set did not answer false for its own applied write');
	is($r->{sqlstate}, '08006', 'try_set fails with 08006') or diag("out=[$r->{out}] err=[$r->{err}]");

	# the jobs pattern: the counter holds the last period run, the claim
	# moves it from 6 to 7 and commits a row for the period
	my $p = '/t407/term_cas';
	sql(qq{SELECT zk_atomic_long_set('$p', 6)});
	ok( drop_set_reply($proxy, $s,
			qq{INSERT INTO claims SELECT '$p', 7 WHERE zk_atomic_long_compare_and_set('$p', 6, 7) RETURNING v}),
		'compare_and_set went out and its answer was dropped');
	restart_during_drop();
	$r = $s->result(45);
	$seen = peer_long($p);
	$row = sql(qq{SELECT count(*) FROM claims WHERE path = '$p'});
	note("compare_and_set: Curator reads $seen, claim rows $row, sqlstate "
		  . ($r->{sqlstate} // 'none') . ", out [$r->{out}]");
	is($seen, '7', 'Curator reads 7: the claim was applied');
	ok($row == 1 || ($r->{sqlstate} // '') eq '08006',
		'period 7 is claimed, so its run committed or was told the claim is in doubt (no skipped period)');
	is($r->{sqlstate}, '08006', 'compare_and_set fails with 08006')
	  or diag("out=[$r->{out}] err=[$r->{err}]");
	$s->quit;
};

subtest 'the lease runs out with the write in flight (worker stopped): not sent in the new session' => sub {
	my $p = '/t407/lease_add';
	my $s = ZklockTest::Session->new($node, 'lease_add');
	sql(qq{SELECT zk_atomic_long_set('$p', 20)});
	my $initial = peer_long($p);
	my $before = status_row($node);
	ok(drop_set_reply($proxy, $s, qq{INSERT INTO adds SELECT '$p', zk_atomic_long_add('$p', 1) RETURNING v}),
		'the add went out and its answer was dropped');
	my $wpid = worker_pid($node);
	ok(kill('STOP', $wpid), "worker $wpid stopped (SIGSTOP) right after the write left");
	hold_for(8, 'past the 6 s session timeout: the lease runs out, the server expires the session');
	$proxy->set_mode('pass');
	ok(kill('CONT', $wpid), 'worker continued (SIGCONT)');
	my $r = $s->result(45);
	ok($r->{done}, 'the call returned');
	ok( wait_until(
			sub {
				my $st = status_row($node);
				$st->{state} eq 'connected' && $st->{session_id} ne $before->{session_id};
			},
			30, 'a new session'),
		'the worker is connected in a new session');
	cmp_ok(status_row($node)->{leases_expired}, '>', $before->{leases_expired}, 'the lease ran out');
	check_one_add($p, $initial, $r, 'lease');
	$s0 = status_row($node)->{session_id};
	$s->quit;
};

subtest 'the caller gives up first (zklock.connect_timeout) with the write in flight: in doubt, not "not reachable"' => sub {
	my $p = '/t407/giveup_add';
	sql(q{ALTER SYSTEM SET zklock.connect_timeout = '2s'});
	sql(q{SELECT pg_reload_conf()});
	my $s = ZklockTest::Session->new($node, 'giveup_add');
	is($s->query('SHOW zklock.connect_timeout')->{out}, '2s', 'zklock.connect_timeout is 2 s in the calling session');
	sql(qq{SELECT zk_atomic_long_set('$p', 50)});
	my $initial = peer_long($p);
	ok(drop_set_reply($proxy, $s, qq{INSERT INTO adds SELECT '$p', zk_atomic_long_add('$p', 1) RETURNING v}),
		'the add went out and its answer was dropped');
	my $wpid = worker_pid($node);
	ok(kill('STOP', $wpid), "worker $wpid stopped (SIGSTOP) right after the write left");
	# the lease runs out about 5 s on, and 2 s later the caller stops
	# waiting, while the worker is still stopped: only the caller can say
	# what happened to the call
	my $r = $s->result(20);
	$proxy->set_mode('pass');
	ok(kill('CONT', $wpid), 'worker continued (SIGCONT)');
	ok($r->{done}, 'the call returned while the worker was stopped');
	ok(wait_connected($node), 'connected again');
	check_one_add($p, $initial, $r, 'caller gave up');
	sql(q{ALTER SYSTEM SET zklock.connect_timeout = '40s'});
	sql(q{SELECT pg_reload_conf()});
	# the lease ran out: the next cases start from the session now
	$s0 = status_row($node)->{session_id};
	$s->quit;
};

subtest 'the connection cut with the answer lost (same session): in doubt, not sent again' => sub {
	my $p = '/t407/cut_cas';
	my $s = ZklockTest::Session->new($node, 'cut_cas');
	sql(qq{SELECT zk_atomic_long_set('$p', 30)});
	ok( drop_set_reply($proxy, $s,
			qq{INSERT INTO claims SELECT '$p', 31 WHERE zk_atomic_long_compare_and_set('$p', 30, 31) RETURNING v}),
		'compare_and_set went out and its answer was dropped');
	$proxy->set_mode('cut');
	my $r = $s->result(45);
	$proxy->set_mode('pass');
	ok(wait_connected($node), 'connected again');
	is(status_row($node)->{session_id}, $s0, '... in the same session');
	is(peer_long($p), '31', 'Curator reads 31');
	is($r->{sqlstate}, '08006', 'compare_and_set fails with 08006')
	  or diag("out=[$r->{out}] err=[$r->{err}]");
	$s->quit;
};

subtest 'the worker killed (SIGKILL) with the write in flight: applied at most once' => sub {
	my $p = '/t407/kill_add';
	my $s = ZklockTest::Session->new($node, 'kill_add');
	sql(qq{SELECT zk_atomic_long_set('$p', 40)});
	my $initial = peer_long($p);
	ok(drop_set_reply($proxy, $s, qq{INSERT INTO adds SELECT '$p', zk_atomic_long_add('$p', 1) RETURNING v}),
		'the add went out and its answer was dropped');
	my $wpid = worker_pid($node);
	my $log_from = -s $node->logfile;
	ok(kill('KILL', $wpid), "worker $wpid killed (SIGKILL): the cluster restarts");
	my $r = $s->result(30);
	$proxy->set_mode('pass');
	ok(wait_back($node, 60, $log_from), 'the cluster is back');
	ok(wait_connected($node, 30), 'connected again');
	my $final = peer_long($p);
	my $succ = sql(qq{SELECT count(*) FROM adds WHERE path = '$p'});
	is($succ, '0', 'the call did not report success (its backend was ended)');
	ok($final - $initial <= 1, "the add was applied at most once (grew by " . ($final - $initial) . ')');
	$s0 = status_row($node)->{session_id};
	$s->quit;
};

subtest 'three sessions adding through a restart: only writes in flight are in doubt' => sub {
	my $p = '/t407/load';
	sql(qq{SELECT zk_atomic_long_set('$p', 1000)});
	my $initial = peer_long($p);
	my @s = map { ZklockTest::Session->new($node, "loop$_") } 1 .. 3;
	$_->start(qq{CALL add_loop('$p')}) for @s;
	ok(wait_until(sub { sql(qq{SELECT count(*) FROM adds WHERE path = '$p'}) >= 30 }, 20, 'adds'),
		'the loops add');
	my $st = $proxy->set_mode('drop_set_replies');
	ok(wait_until(sub { $proxy->stats->{dropped_s2c} > $st->{dropped_s2c} }, 10, 'answers dropped'),
		'a setData went out and answers are dropped');
	usleep(300_000);
	restart_during_drop();
	my $mark = sql(qq{SELECT count(*) FROM adds WHERE path = '$p'});
	ok( wait_until(sub { sql(qq{SELECT count(*) FROM adds WHERE path = '$p'}) >= $mark + 30 }, 20,
			'adds after the restart'),
		'the loops add again after the restart (a reused slot starts clean)');
	sql('INSERT INTO stop_loops VALUES (1)');
	for my $x (@s)
	{
		my $r = $x->result(45);
		ok($r->{done} && !defined $r->{sqlstate}, $x->name . ' ended') or diag("err=[$r->{err}]");
		$x->quit;
	}
	my $final = peer_long($p);
	my $succ = sql(qq{SELECT count(*) FROM adds WHERE path = '$p'});
	my $dup = sql(qq{SELECT count(*) FROM (SELECT v FROM adds WHERE path = '$p' GROUP BY v HAVING count(*) > 1) d});
	my $doubt = sql(qq{SELECT count(*) FROM add_fail WHERE path = '$p' AND state = '08006'});
	my $other = sql(qq{SELECT string_agg(state, ',') FROM add_fail WHERE path = '$p' AND state <> '08006'});
	note("load: initial $initial, final $final, successes $succ, in doubt $doubt");
	ok($final - $initial <= $succ + $doubt,
		"the counter grew by at most one per success or 08006 (grew by "
		  . ($final - $initial) . ", $succ successes, $doubt in doubt)");
	ok($final - $initial >= $succ, '... and by at least one per success');
	is($dup, '0', 'no two successes returned the same value');
	cmp_ok($doubt, '<=', 3, 'at most one call per session was in doubt (its write was in flight)');
	is($other, '', 'no call failed otherwise');
};

is(sql('SELECT count(*) FROM zk_locks'), '0', 'no zk_locks row is left');
$peer->quit;
$node->stop;
$proxy->stop;
stop_zk($zk);
done_testing();


# 603_deadlock_no_false: no false deadlock, and no zklock call from a
# parallel worker (issue 41, items 5 and 3).
#
# What users rely on:
#   1. Waits that form no cycle never end in 40P01, however long they
#      last and however many deadlock checks run meanwhile: with
#      deadlock_timeout at 50 ms each wait below is checked some thirty
#      times or more, and every acquire gives up after 20 s, so a hang
#      fails the file instead of stopping it.  By Curator's rules
#      (InterProcessReadWriteLock: a reader gets the lock when no write
#      node sorts before its own, or when it holds the write lock; a
#      writer and a mutex need to be first) a waiter waits for every node
#      ahead of its own that keeps it out, held or itself waiting; none of
#      these chains closes:
#      a. a reader queued behind a waiting writer queued behind a holder
#         (a reader, then a writer) that waits for nothing;
#      b. readers and writers interleaved on one path behind two readers,
#         one of which waits for a row lock held by a session that waits
#         for nothing;
#      c. chains across paths taken in one order (a mutex /m, then /x,
#         then /y): readers behind waiting writers on both, a mutex
#         waiter behind a session that waits on /x;
#      d. a semaphore mutex queue behind a holder that waits for a row of
#         an idle session, with a mutex waiter chained through it;
#      e. a writer that gave up (its timeout) while a reader queued behind
#         it, and at once waits for a lock that reader's session holds:
#         the reader waits for the holder only, the writer's node being
#         gone or on its way out.
#   2. A write holder that downgrades (takes the read lock while holding
#      the write lock, then releases the write lock) while another writer
#      waits.  zklock's downgrade node carries the write node's sequence
#      number (Curator 5.5 and later; doc/wire.md), so it sorts where the
#      write node sorted, ahead of the queued writer, which therefore keeps
#      waiting after the write lock is released (the holder still reads),
#      and so does a reader queued behind that writer.  When the holder
#      then waits for a lock that the queued writer's session holds, that
#      is a real cycle (holder -> writer by the mutex, writer -> holder by
#      the read node ahead of its own): exactly one of the two fails with
#      40P01, the reader never, everybody else finishes.  (Under Curator
#      5.4's downgrade, a new sequential read node behind the writer, the
#      writer would get the write lock beside the reader and no cycle
#      would close; zklock does not do that.)  Then the moment of a
#      downgrade itself, 30 times over, while two writers and a reader
#      queued behind the holder are checked every millisecond: the
#      downgrade's read request waits for nobody (it is granted at once,
#      whatever is queued), so no 40P01.
#   3. A parallel worker never takes or waits for a zklock lock: a call
#      reaching one (through a function wrongly declared PARALLEL SAFE,
#      with force_parallel_mode / debug_parallel_query on) fails at once
#      with 25000, nothing shows in zk_locks, nothing is created in
#      ZooKeeper (read with a Curator client), and the leader goes on and
#      takes the same lock itself.  Before, the worker took the lock and
#      the call returned true, but the lock went with the worker at the
#      end of the query while the leader went on as if it held it.
#   4. The load run: 8 sessions for 45 s (ZKLOCK_603_SECONDS), with
#      deadlock_timeout at 20 ms, each taking again and again a random
#      ascending subset of five indices, at each a random mode on that
#      index's path (read, write or a write downgraded to a read on
#      /t603/load/rwI, a mutex on mxI, a semaphore mutex on smI, sometimes
#      one multi-lock over mxI paths), holding briefly and committing.
#      Every session waits only for a path above all it holds, so no cycle
#      can close: every 40P01 is a false positive.  Asserted: no 40P01, no
#      other error, no acquire timed out, and coverage: waits that lasted
#      past deadlock_timeout (timed inside the server), and samples of
#      zk_locks showing a reader queued behind a waiting writer and a
#      waiter whose blocker itself waits.  The counts are printed.
#      ZKLOCK_603_SEED repeats the draws (the interleaving depends on
#      timing).
#   pg_stat_database.deadlocks grows by exactly the one deadlock of 2.
# Tried against two wrong detectors (by hand, not kept): one that draws an
# edge to every waiter of the path whatever its place fails 1a-c, 2 and
# the load (about a thousand 40P01s); one that puts a waiter whose node is
# not made yet behind every node (so a downgrade's read request "waits"
# for the writer queued behind the holder) fails the moment of a downgrade
# (a third of its rounds) and the load.  One that draws its edges by the
# nodes' sequence numbers, and none for a waiter without a node, passes.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use ZklockTest;

my $DT_MS = 50;           # deadlock_timeout of the cluster, as set below
my $CHECKS = 1.5;         # seconds every no-cycle wait lasts: 30 deadlock_timeouts
my $BOUND = 2 + $DT_MS / 1000;    # a real deadlock's 40P01 within this (600)

my $zk = start_zk();
my $node = new_zklock_node('nofalse', $zk, "deadlock_timeout = '${DT_MS}ms'\n");
$node->safe_psql('postgres', q{
CREATE TABLE rows_t(id int PRIMARY KEY, v int);
INSERT INTO rows_t SELECT g, 0 FROM generate_series(1, 5) g;
-- take(kinds, paths, hold): acquire each lock in order (an _xact lock,
-- 20 s timeout), then hold them hold seconds; false on a timeout
CREATE FUNCTION t603_take(kinds text[], paths text[], hold float8) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
  i int;
  ok boolean;
BEGIN
  FOR i IN 1 .. array_length(kinds, 1) LOOP
    CASE kinds[i]
      WHEN 'read' THEN ok := zk_read_lock_acquire_xact(paths[i], '20s');
      WHEN 'write' THEN ok := zk_write_lock_acquire_xact(paths[i], '20s');
      WHEN 'mutex' THEN ok := zk_mutex_acquire_xact(paths[i], '20s');
      WHEN 'semmutex' THEN ok := zk_semaphore_mutex_acquire_xact(paths[i], '20s');
    END CASE;
    IF NOT ok THEN RETURN false; END IF;
  END LOOP;
  PERFORM pg_sleep(hold);
  RETURN true;
END $$;
});
my $DEADLOCKS = "SELECT deadlocks FROM pg_stat_database WHERE datname = 'postgres'";
my $deadlocks_at_start = $node->safe_psql('postgres', $DEADLOCKS);
my $real_deadlocks = 0;    # the 40P01s of real cycles (2.) seen here

# sessions(@names): a new session per name
sub sessions { return map { ZklockTest::Session->new($node, $_) } @_; }

# ok_value($s, $sql, $label): $sql in $s succeeds; its output
sub ok_value
{
	my ($s, $sql, $label) = @_;
	my $r = $s->query($sql);
	ok($r->{err} !~ /ERROR/, $label) or diag($r->{err});
	return $r->{out};
}

# take($kind, $path, $hold): the statement that takes one lock and holds it
sub take
{
	my ($kind, $path, $hold) = @_;
	return "SELECT t603_take('{$kind}', '{$path}', " . ($hold // 0) . ')';
}

# begin_wait($s, $kind, $path, $hold): $s begins a transaction and starts
# take() there, which must wait (its node made, state waiting)
sub begin_wait
{
	my ($s, $kind, $path, $hold) = @_;
	ok_value($s, 'BEGIN', $s->name . ' begins');
	$s->start(take($kind, $path, $hold));
	ok(wait_waiting($node, $s->pid, $path), $s->name . " waits for $kind $path");
	return;
}

# wait_count($path, $n): $n sessions wait on $path (for recipes whose
# waiting node zk_locks may show late: the semaphore's)
sub wait_count
{
	my ($path, $n) = @_;
	return wait_sql($node, qq{SELECT count(*) FROM zk_locks WHERE path = '$path' AND state = 'waiting'}, $n);
}

# wait_lock_wait($s): $s waits for a heavyweight lock (pg_stat_activity)
sub wait_lock_wait
{
	my ($s) = @_;
	return wait_sql($node,
		'SELECT wait_event_type FROM pg_stat_activity WHERE pid = ' . $s->pid, 'Lock');
}

# still_waiting(@s): after $CHECKS seconds of deadlock checks none of @s
# has ended (no 40P01, nor anything else)
sub still_waiting
{
	my ($label, @s) = @_;
	usleep($CHECKS * 1_000_000);
	my @ended = grep { $_->done } @s;
	ok(!@ended, "$label: after ${CHECKS} s (" . (1000 * $CHECKS / $DT_MS) . ' deadlock_timeouts) nobody has ended')
	  or diag('ended: ' . join(', ', map { $_->name } @ended));
	return;
}

# finish(\@s, $label): collect the statement each of @s runs, in whatever
# order they end (bounded), each must be true without an error; each
# commits as soon as its statement ended, which lets the next one in
sub finish
{
	my ($ss, $label) = @_;
	my %left = map { $_->name => $_ } @$ss;
	my $deadline = time + 40;
	my @deadlocked;
	while (%left && time < $deadline)
	{
		for my $s (values %left)
		{
			next unless $s->done;
			my $r = $s->result(5);
			push @deadlocked, $s->name if ($r->{sqlstate} // '') eq '40P01';
			is($r->{out}, 't', "$label: " . $s->name . ' gets its lock(s)') or diag($r->{err});
			is($r->{sqlstate}, undef, "$label: " . $s->name . ' without an error');
			ok_value($s, 'COMMIT', "$label: " . $s->name . ' commits');
			delete $left{ $s->name };
		}
		usleep(20_000);
	}
	for my $s (values %left)
	{
		my $r = finish_statement($node, $s, 1);
		fail("$label: " . $s->name . ' did not finish in 40 s') or diag($r->{err});
	}
	is(scalar(@deadlocked), 0, "$label: no 40P01") or diag("40P01: @deadlocked");
	return;
}

# no_rows($label, @paths): zk_locks has nothing left on them
sub no_rows
{
	my ($label, @paths) = @_;
	ok(!(grep { !wait_no_zklock_rows($node, $_) } @paths), "$label: nothing left held or waiting");
	return;
}

############################################################################
# 1a. a reader behind a waiting writer behind a holder that waits for nothing
############################################################################
subtest 'a reader queued behind a waiting writer behind an idle holder: no 40P01' => sub {
	for my $hk ('read', 'write')
	{
		my $p = "/t603/a/$hk";
		my ($h, $w, $r1, $r2) = sessions("h_$hk", "w_$hk", "r1_$hk", "r2_$hk");
		ok_value($h, 'BEGIN', "$hk holder begins");
		is(ok_value($h, take($hk, $p), "the holder takes the $hk lock"), 't', "the holder holds $hk $p");
		# the writer holds 1 s once granted, so the readers go on waiting
		# behind a holder that waits for nothing (pg_sleep)
		begin_wait($w, 'write', $p, 1);
		begin_wait($r1, 'read', $p, 0.2);
		begin_wait($r2, 'read', $p, 0.2);
		still_waiting("$hk holder", $w, $r1, $r2);
		is(lock_state($node, $r1->pid, $p), 'waiting',
			"$hk holder: the reader waits (a write node sorts before its own" . ($hk eq 'read' ? ', though only a reader holds)' : ')'));
		ok_value($h, 'COMMIT', "$hk holder: the holder commits");
		ok(wait_held($node, $w->pid, $p), "$hk holder: the writer gets the lock first");
		is(lock_state($node, $r1->pid, $p), 'waiting', "$hk holder: the readers still wait, behind the writer holding");
		finish([ $w, $r1, $r2 ], "$hk holder");
		no_rows("$hk holder", $p);
		$_->quit for ($h, $w, $r1, $r2);
	}
};

############################################################################
# 1b. readers and writers interleaved on one path, the holder waiting for
# a row held by a session that waits for nothing
############################################################################
subtest 'readers and writers interleaved behind a holder waiting for an idle row holder: no 40P01' => sub {
	my $p = '/t603/b';
	my ($x, $h, $h2) = sessions('row_holder', 'holder', 'holder2');
	ok_value($_, 'BEGIN', $_->name . ' begins') for ($x, $h, $h2);
	ok_value($x, 'UPDATE rows_t SET v = v + 1 WHERE id = 1', 'row_holder holds row 1');
	is(ok_value($h, take('read', $p), 'holder reads'), 't', "holder holds a read lock on $p");
	is(ok_value($h2, take('read', $p), 'holder2 reads'), 't', "holder2 shares it");
	$h->start('UPDATE rows_t SET v = v + 10 WHERE id = 1');
	ok(wait_lock_wait($h), 'holder waits for row 1');
	my @q = sessions(qw(W1 R1 R2 W2 R3 W3 R4));
	for my $s (@q)
	{
		begin_wait($s, $s->name =~ /^W/ ? 'write' : 'read', $p, 0.2);
	}
	still_waiting('interleaved', @q, $h);
	ok_value($h2, 'COMMIT', 'holder2, which waits for nothing, commits');
	ok_value($x, 'COMMIT', 'row_holder commits');
	my $r = $h->result(25);
	ok($r->{done} && $r->{err} !~ /ERROR/, 'holder\'s UPDATE goes on') or diag($r->{err});
	ok_value($h, 'COMMIT', 'holder commits (releases its read lock)');
	finish(\@q, 'interleaved');
	no_rows('interleaved', $p);
	$_->quit for ($x, $h, $h2, @q);
};

############################################################################
# 1c. chains across paths taken in one order: /m, then /x, then /y
############################################################################
subtest 'chains across paths taken in one order (/m, /x, /y): no 40P01' => sub {
	my ($m, $x, $y) = ('/t603/c/m', '/t603/c/x', '/t603/c/y');
	my ($s1, $s2, $s5, $s3, $s4, $s6, $s7) = sessions(qw(s1 s2 s5 s3 s4 s6 s7));
	ok_value($_, 'BEGIN', $_->name . ' begins') for ($s1, $s2, $s5, $s6);
	is(ok_value($s1, take('write', $y), 's1 writes /y'), 't', 's1 holds the write lock on /y and waits for nothing');
	is(ok_value($s2, take('read', $x), 's2 reads /x'), 't', 's2 holds a read lock on /x');
	is(ok_value($s5, take('read', $x), 's5 reads /x'), 't', 's5 holds a read lock on /x');
	is(ok_value($s6, take('mutex', $m), 's6 takes /m'), 't', 's6 holds the mutex /m');
	$s2->start(take('write', $y, 0.2));
	ok(wait_waiting($node, $s2->pid, $y), 's2 waits for the write lock on /y behind s1');
	$s5->start(take('read', $y, 0.2));
	ok(wait_waiting($node, $s5->pid, $y), 's5 waits for a read lock on /y behind s2\'s waiting write node');
	# s3: the write lock on /x then a read lock on /y, in one statement
	ok_value($s3, 'BEGIN', 's3 begins');
	$s3->start(q{SELECT t603_take('{write,read}', '{/t603/c/x,/t603/c/y}', 0.2)});
	ok(wait_waiting($node, $s3->pid, $x), 's3 waits for the write lock on /x behind the readers s2 and s5');
	begin_wait($s4, 'read', $x, 0.2);
	$s6->start(take('read', $x, 0.2));
	ok(wait_waiting($node, $s6->pid, $x), 's6 (holding /m) waits for a read lock on /x behind s3\'s write node');
	# s7: /m then /y
	ok_value($s7, 'BEGIN', 's7 begins');
	$s7->start(q{SELECT t603_take('{mutex,read}', '{/t603/c/m,/t603/c/y}', 0.2)});
	ok(wait_waiting($node, $s7->pid, $m), 's7 waits for /m behind s6');
	still_waiting('two paths', $s2, $s5, $s3, $s4, $s6, $s7);
	ok_value($s1, 'COMMIT', 's1 commits (releases /y)');
	finish([ $s2, $s5, $s3, $s4, $s6, $s7 ], 'two paths');
	no_rows('two paths', $m, $x, $y);
	$_->quit for ($s1, $s2, $s5, $s3, $s4, $s6, $s7);
};

############################################################################
# 1d. a semaphore mutex queue
############################################################################
subtest 'a semaphore mutex queue behind a holder waiting for an idle row holder: no 40P01' => sub {
	my ($p, $m) = ('/t603/d/s', '/t603/d/m');
	my ($x, $h, $mh, $mw) = sessions('row_holder', 'holder', 'mutex_holder', 'mutex_waiter');
	ok_value($_, 'BEGIN', $_->name . ' begins') for ($x, $h, $mh, $mw);
	ok_value($x, 'UPDATE rows_t SET v = v + 1 WHERE id = 2', 'row_holder holds row 2');
	is(ok_value($h, take('semmutex', $p), 'holder takes the semaphore mutex'), 't', "holder holds $p");
	$h->start('UPDATE rows_t SET v = v + 10 WHERE id = 2');
	ok(wait_lock_wait($h), 'holder waits for row 2');
	my @q = sessions(qw(q1 q2 q3));
	for my $i (0 .. $#q)
	{
		ok_value($q[$i], 'BEGIN', $q[$i]->name . ' begins');
		$q[$i]->start(take('semmutex', $p, 0.2));
		ok(wait_count($p, $i + 1), $q[$i]->name . " waits for $p");
	}
	# a mutex holder that waits in the same queue (/m before /s), and a
	# waiter behind it
	is(ok_value($mh, take('mutex', $m), 'mutex_holder takes /m'), 't', 'mutex_holder holds /m');
	$mh->start(take('semmutex', $p, 0.2));
	ok(wait_count($p, 4), "mutex_holder waits for $p");
	$mw->start(take('mutex', $m, 0.2));
	ok(wait_waiting($node, $mw->pid, $m), 'mutex_waiter waits for /m behind mutex_holder');
	still_waiting('semaphore mutex', @q, $mh, $mw, $h);
	ok_value($x, 'COMMIT', 'row_holder commits');
	my $r = $h->result(25);
	ok($r->{done} && $r->{err} !~ /ERROR/, 'holder\'s UPDATE goes on') or diag($r->{err});
	ok_value($h, 'COMMIT', 'holder commits (gives its lease back)');
	finish([ @q, $mh, $mw ], 'semaphore mutex');
	no_rows('semaphore mutex', $p, $m);
	$_->quit for ($x, $h, $mh, $mw, @q);
};

############################################################################
# 1e. a waiter that gave up, then waits for a lock of one queued behind it
############################################################################
subtest 'a waiter that gave up waits for a lock of one that was queued behind it: no 40P01' => sub {
	my ($p, $q) = ('/t603/f/p', '/t603/f/q');
	my ($a, $b, $c) = sessions('holder', 'gave_up', 'behind');
	ok_value($_, 'BEGIN', $_->name . ' begins') for ($a, $b, $c);
	is(ok_value($a, take('write', $p), 'holder writes /p'), 't', 'holder holds the write lock on /p and waits for nothing');
	is(ok_value($c, take('mutex', $q), 'behind takes /q'), 't', 'behind holds the mutex /q');
	$b->start("SELECT zk_write_lock_acquire_xact('$p', '1s')");
	ok(wait_waiting($node, $b->pid, $p), 'gave_up queues for the write lock on /p, for 1 s');
	$c->start(take('read', $p, 0.2));
	ok(wait_waiting($node, $c->pid, $p), 'behind queues for a read lock on /p behind gave_up\'s write node');
	my $r = $b->result(25);
	is($r->{out}, 'f', 'gave_up\'s acquire times out (its node goes)') or diag($r->{err});
	# at once: gave_up now waits for behind (/q); behind waits for the
	# holder only, gave_up's node being gone or on its way out
	$b->start(take('mutex', $q));
	ok(wait_waiting($node, $b->pid, $q), 'gave_up waits for /q, which behind holds');
	still_waiting('gave up', $b, $c);
	ok_value($a, 'COMMIT', 'the holder commits (releases /p)');
	finish([ $c, $b ], 'gave up');
	no_rows('gave up', $p, $q);
	$_->quit for ($a, $b, $c);
};

############################################################################
# 2. a downgrade with a writer queued behind the holder
############################################################################
subtest 'a downgrade ahead of a queued writer: the writer keeps waiting; a real cycle gives one 40P01' => sub {
	my ($d, $q) = ('/t603/e/d', '/t603/e/q');
	my ($h, $w, $r) = sessions('downgrader', 'writer', 'reader');
	ok_value($_, 'BEGIN', $_->name . ' begins') for ($h, $w, $r);
	is(ok_value($w, take('mutex', $q), 'writer takes /q'), 't', 'the writer\'s session holds the mutex /q');
	is(ok_value($h, "SELECT zk_write_lock_acquire('$d', '20s')", 'downgrader writes'), 't',
		'the downgrader holds the write lock (session level)');
	$w->start(take('write', $d));
	ok(wait_waiting($node, $w->pid, $d), 'the writer queues for the write lock');
	is(ok_value($h, "SELECT zk_read_lock_acquire_xact('$d', '20s')", 'downgrader reads'), 't',
		'the downgrader gets the read lock at once (it holds the write lock)');
	is(ok_value($h, "SELECT zk_write_lock_release('$d')", 'downgrader releases the write lock'), 't',
		'the downgrader releases the write lock and goes on reading');
	my $parts = participants_rows($node, $d);
	is(join(' ', map { "$_->{kind}:$_->{holds}" } @$parts), 'read:t write:f',
		'the queue: the downgrader\'s read node first, holding, then the writer\'s write node')
	  or diag(explain $parts);
	my ($rseq) = ($parts->[0]{node} // '') =~ /(\d{10})$/;
	my ($wseq) = ($parts->[1]{node} // '') =~ /(\d{10})$/;
	ok(defined $rseq && defined $wseq && $rseq lt $wseq,
		'the read node carries the write node\'s sequence number, before the writer\'s ('
		  . ($rseq // '?') . ' < ' . ($wseq // '?') . ')');
	$r->start(take('read', $d));
	ok(wait_waiting($node, $r->pid, $d), 'a reader queues behind the waiting writer');
	still_waiting('downgrade', $w, $r);
	is(lock_state($node, $w->pid, $d), 'waiting', 'the writer still waits: the read node sorts before its own');

	# the downgrader now waits for /q, which the writer's session holds:
	# downgrader -> writer (/q), writer -> downgrader (the read node ahead)
	my $t0 = time;
	$h->start(take('mutex', $q));
	# the victim's error aborts its transaction, which gives back what it
	# held, so the other of the two gets its lock at once: both end
	my $res = outcomes([ $h, $w ], $t0);
	is(scalar(keys %$res), 2, 'the downgrader and the writer both end their waits') or BAIL_OUT('a hang');
	my @failed = grep { ($res->{$_}{sqlstate} // '') eq '40P01' } sort keys %$res;
	is(scalar(@failed), 1, "exactly one of them fails with 40P01: the cycle is real (@failed)");
	$real_deadlocks++ if @failed;
	my ($victim_name) = (@failed, '');
	my ($other_name) = grep { $_ ne $victim_name } sort keys %$res;
	my $v = $res->{$victim_name} // {};
	cmp_ok($v->{elapsed} // 99, '<=', $BOUND, "within deadlock_timeout + 2 s (" . ($v->{elapsed} // '?') . ' s)');
	like($v->{err} // '', qr/Process ${\ $w->pid } waits for zookeeper write lock "\Q$d\E"; blocked by process ${\ $h->pid }\./,
		'DETAIL: the writer waits for the write lock, blocked by the downgrader');
	like($v->{err} // '', qr/Process ${\ $h->pid } waits for zookeeper lock "\Q$q\E"; blocked by process ${\ $w->pid }\./,
		'DETAIL: the downgrader waits for /q, blocked by the writer');
	is($res->{ $other_name // '' }{out}, 't', ($other_name // '?') . ' gets its lock') or diag($res->{ $other_name // '' }{err});
	my ($victim) = grep { $_->name eq $victim_name } ($h, $w);
	my ($other) = grep { $_->name eq ($other_name // '') } ($h, $w);
	ok_value($victim, 'ROLLBACK', "the victim ($victim_name) rolls back") if $victim;
	ok_value($other, 'COMMIT', "$other_name commits") if $other;
	# the reader, in no cycle, gets its read lock and is never a victim
	finish([$r], 'the reader');
	ok_value($h, 'SELECT zk_release_all()', 'the downgrader lets go of any session lock');
	no_rows('downgrade', $d, $q);
	$_->quit for ($h, $w, $r);
};

subtest 'the moment of a downgrade, with writers and a reader queued and checked every 1 ms: no 40P01' => sub {
	my $p = '/t603/e/t';
	my ($h, @q) = sessions('downgrader', 'writer1', 'writer2', 'reader');
	# deadlock_timeout's least: the queued check about every millisecond,
	# so some check falls into the moment of the downgrade's request
	ok_value($_, "SET deadlock_timeout = '1ms'", $_->name . ' checks every 1 ms') for @q;
	my ($rounds, $bad) = (30, 0);
	for my $i (1 .. $rounds)
	{
		my $ok = $h->value("SELECT zk_write_lock_acquire('$p', '20s')") eq 't';
		for my $s (@q)
		{
			$s->start('SELECT zk_' . ($s->name =~ /writer/ ? 'write' : 'read') . "_lock_acquire_xact('$p', '20s')");
			$ok &&= wait_waiting($node, $s->pid, $p);
		}
		# the downgrade's request, then the write lock's release, while the
		# waiters run their checks
		$ok &&= $h->value("SELECT zk_read_lock_acquire('$p', '20s')") eq 't';
		$ok &&= $h->value("SELECT zk_write_lock_release('$p')") eq 't';
		$ok &&= $h->value("SELECT zk_read_lock_release('$p')") eq 't';
		for my $s (@q)
		{
			my $res = finish_statement($node, $s, 25);
			$ok &&= ($res->{out} // '') eq 't' && !defined $res->{sqlstate};
			diag("round $i: " . $s->name . " -> [$res->{out}] $res->{err}") unless ($res->{out} // '') eq 't';
		}
		$bad++ unless $ok;
	}
	is($bad, 0, "$rounds downgrades: every waiter got the lock, no 40P01");
	no_rows('moment of a downgrade', $p);
	$_->quit for ($h, @q);
};

############################################################################
# 3. a zklock call in a parallel worker
############################################################################
subtest 'a zklock call in a parallel worker fails at once with 25000 and sends nothing' => sub {
	my $num = $node->safe_psql('postgres', 'SHOW server_version_num');
	# renamed in PostgreSQL 16
	my $force = $num >= 160000 ? 'debug_parallel_query' : 'force_parallel_mode';
	# plpgsql, so the planner does not inline the call it would refuse
	$node->safe_psql('postgres', q{
CREATE FUNCTION t603_wrongly_safe(p text, xact boolean) RETURNS boolean
LANGUAGE plpgsql PARALLEL SAFE AS $$
BEGIN
  IF xact THEN RETURN zk_mutex_acquire_xact(p, '60s'); END IF;
  RETURN zk_mutex_acquire(p, '60s');
END $$;
});
	my $peer = new_peer($zk);
	my $p = '/t603/par';
	my ($l, $o) = sessions('leader', 'other');
	is(ok_value($o, "SELECT zk_mutex_acquire('$p', '20s')", 'other takes the lock'), 't',
		'another session holds the lock, so a call that got through would wait');
	ok_value($l, "SET $force = on", "$force = on");
	ok_value($l, 'SET parallel_setup_cost = 0', 'parallel_setup_cost = 0');
	ok_value($l, 'SET parallel_tuple_cost = 0', 'parallel_tuple_cost = 0');
	like(ok_value($l, "EXPLAIN (COSTS OFF) SELECT t603_wrongly_safe('$p', false)", 'EXPLAIN'),
		qr/Gather/, 'the call is planned below a Gather: a parallel worker runs it');
	for my $xact (0, 1)
	{
		my $what = $xact ? '_xact' : 'session';
		ok_value($l, 'BEGIN', "$what: leader begins") if $xact;
		my $res = $l->query("SELECT t603_wrongly_safe('$p', " . ($xact ? 'true' : 'false') . ')', 40);
		is($res->{sqlstate}, '25000', "$what: SQLSTATE 25000 (invalid_transaction_state)") or diag($res->{err});
		like($res->{err}, qr/cannot use zklock in a parallel worker/, "$what: the message says why");
		like($res->{err}, qr/CONTEXT:.*parallel worker/s, "$what: raised in the parallel worker");
		ok_value($l, 'ROLLBACK', "$what: leader rolls back") if $xact;
		is($node->safe_psql('postgres', "SELECT count(*) FROM zk_locks WHERE path = '$p' AND pid <> " . $o->pid),
			'0', "$what: no zk_locks row but the other session's");
		my $kids = $peer->children($p) // [];
		is(scalar(@$kids), 1, "$what: ZooKeeper has only the other session's node under $p")
		  or diag("children: @$kids");
	}
	is(lock_state($node, $o->pid, $p), 'held', 'the other session held the lock throughout');
	ok_value($o, "SELECT zk_mutex_release('$p')", 'other releases');
	# the leader goes on: the same lock, taken by the leader itself
	ok_value($l, "SET $force = off", "$force = off");
	is(ok_value($l, "SELECT zk_mutex_acquire('$p', '20s')", 'leader takes the lock itself'), 't',
		'the leader gets the lock');
	is($node->safe_psql('postgres', "SELECT pid FROM zk_locks WHERE path = '$p' AND state = 'held'"),
		$l->pid, 'zk_locks shows the leader holding it');
	is(scalar(@{ $peer->children($p) // [] }), 1, 'one node in ZooKeeper: the leader\'s');
	is(ok_value($l, "SELECT zk_mutex_release('$p')", 'leader releases'), 't', 'the leader releases it');
	$_->quit for ($l, $o);
	$peer->quit;
};

############################################################################
# 4. the load run: sessions in one global order, so every 40P01 is false
############################################################################
subtest 'load: mixed readers, writers, mutexes and semaphore mutexes in one order: no 40P01' => sub {
	my $seconds = $ENV{ZKLOCK_603_SECONDS} // 45;
	my $seed = $ENV{ZKLOCK_603_SEED} // (int(time * 1000) ^ $$) % 1_000_000_007;
	my ($nsessions, $nidx, $dt_ms) = (8, 5, 20);
	diag("603 load: seed $seed (ZKLOCK_603_SEED=$seed repeats the draws), $nsessions sessions, ${seconds} s, deadlock_timeout ${dt_ms} ms");
	srand($seed);
	$node->safe_psql('postgres', q{
-- round(kinds, paths, hold_ms, dt_ms): take each lock in order (a
-- downgrade: the write lock at session level, then the read lock, then
-- the write lock released; a multi-lock: paths[i] is a comma-separated
-- list), hold, and say how many acquires, how many waited dt_ms or
-- more (timed here, in the server) and the longest wait
CREATE FUNCTION t603_round(kinds text[], paths text[], hold_ms int, dt_ms int) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
  i int;
  ok boolean;
  t0 timestamptz;
  waited float8;
  n int := 0;
  nlong int := 0;
  maxw float8 := 0;
BEGIN
  FOR i IN 1 .. array_length(kinds, 1) LOOP
    t0 := clock_timestamp();
    CASE kinds[i]
      WHEN 'read' THEN ok := zk_read_lock_acquire_xact(paths[i], '20s');
      WHEN 'write' THEN ok := zk_write_lock_acquire_xact(paths[i], '20s');
      WHEN 'downgrade' THEN
        ok := zk_write_lock_acquire(paths[i], '20s');
        IF ok THEN
          ok := zk_read_lock_acquire_xact(paths[i], '20s');
          PERFORM zk_write_lock_release(paths[i]);
        END IF;
      WHEN 'mutex' THEN ok := zk_mutex_acquire_xact(paths[i], '20s');
      WHEN 'semmutex' THEN ok := zk_semaphore_mutex_acquire_xact(paths[i], '20s');
      WHEN 'multi' THEN ok := zk_multi_lock_acquire(string_to_array(paths[i], ','), '20s');
    END CASE;
    waited := extract(epoch FROM clock_timestamp() - t0) * 1000;
    IF NOT ok THEN
      RETURN format('timeout %s %s after %s ms', kinds[i], paths[i], round(waited::numeric));
    END IF;
    n := n + 1;
    IF waited >= dt_ms THEN nlong := nlong + 1; END IF;
    maxw := greatest(maxw, waited);
  END LOOP;
  PERFORM pg_sleep(hold_ms / 1000.0);
  RETURN format('acq=%s long=%s max=%s', n, nlong, round(maxw::numeric));
END $$;
});
	my @load = map { ZklockTest::Session->new($node, "load$_") } 0 .. $nsessions - 1;
	$_->value("SET deadlock_timeout = '${dt_ms}ms'") for @load;
	my ($sampler) = sessions('sampler');
	# a reader's waiting node behind a waiting writer's on one path; a
	# waiter blocked by a holder that itself waits (a chain of two edges)
	my $sample_sql = q{SELECT
  (SELECT count(*) FROM zk_locks r JOIN zk_locks w ON r.path = w.path AND r.pid <> w.pid
    WHERE r.recipe = 'read' AND w.recipe = 'write' AND r.state = 'waiting' AND w.state = 'waiting'
      AND right(r.node, 10) > right(w.node, 10)),
  (SELECT count(*) FROM zk_locks a JOIN zk_locks b ON a.path = b.path AND a.pid <> b.pid
     AND a.state = 'waiting' AND b.state = 'held' AND NOT (a.recipe = 'read' AND b.recipe = 'read')
    JOIN zk_locks c ON c.pid = b.pid AND c.state = 'waiting')};

	my %kind_of = (read => 'rw', write => 'rw', downgrade => 'rw', mutex => 'mx', semmutex => 'sm');
	my @modes = ((('read') x 6), (('write') x 4), (('downgrade') x 2), (('mutex') x 4), (('semmutex') x 3));
	# draw(): one round: an ascending subset of the indices, a mode each
	my $draw = sub {
		my @idx = grep { rand() < 0.5 } 0 .. $nidx - 1;
		@idx = (int(rand($nidx))) unless @idx;
		my (@k, @p);
		if (@idx > 1 && rand() < 0.1)
		{
			@k = ('multi');
			@p = (join(',', map { "/t603/load/mx$_" } @idx));
		}
		else
		{
			for my $i (@idx)
			{
				my $m = $modes[ int(rand(@modes)) ];
				push @k, $m;
				push @p, "/t603/load/$kind_of{$m}$i";
			}
		}
		my $hold = int(rand(30));
		return sprintf(q{BEGIN; SELECT t603_round('{%s}', '{%s}', %d, %d); COMMIT; SELECT 'released=' || zk_release_all();},
			join(',', @k), join(',', map { qq{"$_"} } @p), $hold, $dt_ms);
	};

	my %c = map { $_ => 0 } qw(rounds acquires long false_40P01 errors timeouts samples r_behind_w chains);
	my ($maxwait, %per) = (0);
	my $log_off = -s $node->logfile;
	my $end = time + $seconds;
	my %busy;
	my ($sampling, $next_sample) = (0, 0);
	my $hard_end = $end + 60;
	while ((time < $end || %busy) && time < $hard_end)
	{
		for my $s (@load)
		{
			if ($busy{ $s->name })
			{
				next unless $s->done;
				my $r = $s->result(5);
				delete $busy{ $s->name };
				$c{rounds}++;
				$per{ $s->name }++;
				my $st = $r->{sqlstate} // '';
				if ($st eq '40P01')
				{
					diag('false 40P01 in ' . $s->name . ":\n$r->{err}") if $c{false_40P01}++ < 3;
				}
				elsif ($st ne '' || $r->{err} =~ /ERROR|FATAL/)
				{
					diag('error in ' . $s->name . ":\n$r->{err}") if $c{errors}++ < 3;
				}
				elsif ($r->{out} =~ /^timeout (.*)$/m)
				{
					diag('acquire timed out in ' . $s->name . ": $1") if $c{timeouts}++ < 3;
				}
				elsif ($r->{out} =~ /^acq=(\d+) long=(\d+) max=(\d+)$/m)
				{
					$c{acquires} += $1;
					$c{long} += $2;
					$maxwait = $3 if $3 > $maxwait;
				}
				else
				{
					diag('unexpected answer in ' . $s->name . ": [$r->{out}] $r->{err}") if $c{errors}++ < 3;
				}
			}
			next if time >= $end || $busy{ $s->name };
			$s->start($draw->());
			$busy{ $s->name } = 1;
		}
		if ($sampling && $sampler->done)
		{
			my $r = $sampler->result(5);
			$sampling = 0;
			if ($r->{out} =~ /^(\d+)\|(\d+)$/)
			{
				$c{samples}++;
				$c{r_behind_w}++ if $1 > 0;
				$c{chains}++ if $2 > 0;
			}
		}
		if (!$sampling && time < $end && time >= $next_sample)
		{
			$sampler->start($sample_sql);
			($sampling, $next_sample) = (1, time + 0.2);
		}
		usleep(5_000);
	}
	$sampler->result(10) if $sampling;
	my $log = slurp_file($node->logfile, $log_off);
	my $published = () = $log =~ /wait record \S+ published/g;
	my $xchecks = () = $log =~ /deadlock check for \d+ waiter/g;
	diag(sprintf('603 load: %d rounds (%s), %d acquires, %d waited past deadlock_timeout (%d ms), longest %d ms; '
			. 'zk_locks samples %d: a reader queued behind a waiting writer in %d, a waiter behind a waiting holder in %d; '
			. 'waits published after a local check found no cycle %d, checks across clusters %d; '
			. 'false 40P01 %d, other errors %d, timeouts %d',
			$c{rounds}, join(' ', map { $per{$_} // 0 } map { "load$_" } 0 .. $nsessions - 1),
			$c{acquires}, $c{long}, $dt_ms, $maxwait, $c{samples}, $c{r_behind_w}, $c{chains},
			$published, $xchecks, $c{false_40P01}, $c{errors}, $c{timeouts}));
	is(scalar(keys %busy), 0, 'every session\'s last round ended');
	ok(!(grep { !$per{"load$_"} } 0 .. $nsessions - 1), 'every session completed rounds');
	is($c{false_40P01}, 0, 'no 40P01: no cycle was possible, so none is a true deadlock');
	is($c{errors}, 0, 'no other error');
	is($c{timeouts}, 0, 'no acquire gave up after its 20 s');
	cmp_ok($c{long}, '>', 0, 'coverage: waits lasted past deadlock_timeout, so deadlock checks ran');
	cmp_ok($c{r_behind_w}, '>', 0, 'coverage: readers were queued behind waiting writers');
	cmp_ok($c{chains}, '>', 0, 'coverage: waiters were blocked by holders that themselves waited');
	ok(wait_sql($node, q{SELECT count(*) FROM zk_locks WHERE path LIKE '/t603/load/%'}, '0'),
		'nothing is left held or waiting');
	$_->quit for (@load, $sampler);
};

############################################################################
# pg_stat_database.deadlocks: the real deadlock of 2, nothing else
############################################################################
ok(wait_sql($node, q{SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()}, '0'),
	'every session has ended (its statistics are flushed)');
is($node->safe_psql('postgres', $DEADLOCKS), $deadlocks_at_start + $real_deadlocks,
	"pg_stat_database.deadlocks grew by the real deadlocks only ($real_deadlocks)");

$node->stop;
stop_zk($zk);
done_testing();

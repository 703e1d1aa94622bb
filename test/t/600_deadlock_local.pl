
# 600_deadlock_local: deadlocks inside one cluster are detected and broken
# like PostgreSQL's own (issue 33, item 1).
#
# What users rely on:
#   1. Two sessions that take /a then /b and /b then /a: after
#      deadlock_timeout one of them fails with 40P01 "deadlock detected",
#      whose DETAIL names both processes and both paths in PostgreSQL's
#      style; the other gets its lock and commits.  Also when both close
#      the cycle at the same moment and check at about the same time.
#   2. A cycle through a row lock (or an advisory lock) and a zklock lock:
#      S1 holds a row and waits for /c, S2 holds /c and waits for S1's
#      row.  PostgreSQL's own detector cannot see the zklock wait, so the
#      zklock waiter (S1) is the one that fails, with a DETAIL that names
#      the heavyweight lock in PostgreSQL's words; S2 goes on (S1's
#      transaction is aborted at the error, which gives back its row as a
#      deadlock PostgreSQL detects does).
#   3. Three sessions in a cycle /x -> /y -> /z -> /x: exactly one fails,
#      the other two finish.  A reader and a writer in a cycle of read/write
#      locks: one fails, naming the read and the write lock; another reader
#      of the same path, which waits for nothing, is in no edge.
#   4. No cycle, no error: a waiter behind a holder that merely holds for
#      longer than deadlock_timeout, and a waiter behind a holder that
#      itself waits for a row held by a third session that waits for
#      nothing, wait as long as it takes and get the lock.
# Every acquire has a timeout of 20 s, so the code before the feature
# fails these tests (the deadlocked waits time out, no 40P01) rather than
# hangs.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use ZklockTest;

my $DEADLOCK_TIMEOUT = 1;    # seconds, as set below
my $BOUND = $DEADLOCK_TIMEOUT + 2;    # the issue's bound for a 40P01

my $zk = start_zk();
my $node = new_zklock_node('deadlock', $zk, "deadlock_timeout = '1s'\n");
$node->safe_psql('postgres',
	'CREATE TABLE rows_t(id int PRIMARY KEY, v int); INSERT INTO rows_t VALUES (1, 0), (2, 0), (3, 0)');

# sessions(@names): a new session per name
sub sessions { return map { ZklockTest::Session->new($node, $_) } @_; }

# ok_value($s, $sql, $label): $sql in $s succeeds
sub ok_value
{
	my ($s, $sql, $label) = @_;
	my $r = $s->query($sql);
	ok($r->{err} !~ /ERROR/, $label) or diag($r->{err});
	return $r->{out};
}

# acquire($path): an xact mutex acquire that gives up after 20 s
sub acquire { my ($path) = @_; return "SELECT zk_mutex_acquire_xact('$path', '20s')"; }

# wait_lock_wait($s): $s waits for a heavyweight lock (pg_stat_activity)
sub wait_lock_wait
{
	my ($s) = @_;
	return wait_sql($node,
		'SELECT wait_event_type FROM pg_stat_activity WHERE pid = ' . $s->pid, 'Lock');
}

# victim($ended, $label): the one session of until_victim's results that
# failed with 40P01, and its result; bails out when there is none (a hang).
# A victim's abort gives its locks back, so another member may end at
# the same moment and be polled first: which ended first is no matter,
# the 40P01 is.
sub victim
{
	my ($ended, $label) = @_;
	my @v = grep { ($ended->{$_}{sqlstate} // '') eq '40P01' } sort keys %$ended;
	is(scalar(@v), 1, "$label: one fails with 40P01 (@v)")
	  or BAIL_OUT("$label: no single victim: " . explain($ended));
	return ($v[0], $ended->{ $v[0] });
}

# later($s, $ended, $timeout): $s's result, from until_victim's results
# when it had already ended there, or waited for up to $timeout
sub later
{
	my ($s, $ended, $timeout) = @_;
	return $ended->{ $s->name } if exists $ended->{ $s->name };
	return $s->result($timeout);
}

# detail_has($err, $waiter, $what, $holder): the DETAIL line of one edge
sub detail_has
{
	my ($err, $waiter, $what, $holder, $label) = @_;
	my $line = "Process " . $waiter->pid . " waits for $what; blocked by process " . $holder->pid . '.';
	ok(index($err, $line) >= 0, $label) or diag("wanted [$line] in:\n$err");
}

############################################################################
# 1. /a then /b against /b then /a
############################################################################
subtest 'two sessions in opposite order: one 40P01 naming both paths and pids, the other commits' => sub {
	my $deadlocks = "SELECT deadlocks FROM pg_stat_database WHERE datname = 'postgres'";
	my $before = $node->safe_psql('postgres', $deadlocks);
	my ($sa, $sb) = sessions('a', 'b');
	ok_value($_, 'BEGIN', $_->name . ' begins') for ($sa, $sb);
	is(ok_value($sa, acquire('/t600/a'), 'a takes /t600/a'), 't', 'a holds /t600/a');
	is(ok_value($sb, acquire('/t600/b'), 'b takes /t600/b'), 't', 'b holds /t600/b');
	$sa->start(acquire('/t600/b'));
	ok(wait_waiting($node, $sa->pid, '/t600/b'), 'a waits for /t600/b');
	my $t0 = time;
	$sb->start(acquire('/t600/a'));

	my $ended = until_victim([ $sa, $sb ], $t0);
	my ($victim_name, $v) = victim($ended, 'a and b');
	like($v->{err}, qr/ERROR:\s+40P01: deadlock detected/, 'message: deadlock detected');
	cmp_ok($v->{elapsed}, '<=', $BOUND, "within deadlock_timeout + 2 s ($v->{elapsed} s)");
	detail_has($v->{err}, $sa, 'zookeeper lock "/t600/b"', $sb, 'DETAIL: a waits for /t600/b, blocked by b');
	detail_has($v->{err}, $sb, 'zookeeper lock "/t600/a"', $sa, 'DETAIL: b waits for /t600/a, blocked by a');

	my ($victim, $other) = $victim_name eq 'a' ? ($sa, $sb) : ($sb, $sa);
	# the victim's transaction is aborted at the error, which gives back
	# its locks, as PostgreSQL gives back its own: the other goes on
	my $r = later($other, $ended, 25);
	is($r->{out}, 't', 'the other session gets its lock') or diag($r->{err});
	isnt($r->{sqlstate} // '', '40P01', 'the other session did not fail');
	ok_value($victim, 'ROLLBACK', 'the victim rolls back');
	ok_value($other, 'COMMIT', 'the other session commits');
	ok(wait_no_zklock_rows($node, '/t600/a') && wait_no_zklock_rows($node, '/t600/b'),
		'nothing is left held or waiting');
	ok(wait_until(sub { $node->safe_psql('postgres', $deadlocks) > $before }, 20, 'deadlocks counted'),
		'counted in pg_stat_database.deadlocks, as PostgreSQL counts its own');
	$_->quit for ($sa, $sb);
};

# 1b. both close the cycle at the same moment, so both checks run at about
# the same time: still exactly one victim, three times over
subtest 'both close the cycle at once: exactly one victim' => sub {
	for my $round (1 .. 3)
	{
		my ($sa, $sb) = sessions("a$round", "b$round");
		my ($pa, $pb) = ("/t600/r$round/a", "/t600/r$round/b");
		ok_value($_, 'BEGIN', $_->name . ' begins') for ($sa, $sb);
		is(ok_value($sa, acquire($pa), "round $round: a takes $pa"), 't', "round $round: a holds $pa");
		is(ok_value($sb, acquire($pb), "round $round: b takes $pb"), 't', "round $round: b holds $pb");
		my $t0 = time;
		$sa->start(acquire($pb));
		$sb->start(acquire($pa));
		my $res = outcomes([ $sa, $sb ], $t0);
		my @failed = grep { ($res->{$_}{sqlstate} // '') eq '40P01' } sort keys %$res;
		is(scalar(keys %$res), 2, "round $round: both waits ended");
		is(scalar(@failed), 1, "round $round: exactly one 40P01 (@failed)");
		my @won = grep { ($res->{$_}{out} // '') eq 't' } sort keys %$res;
		is(scalar(@won), 1, "round $round: the other got its lock");
		cmp_ok($res->{ $failed[0] // '' }{elapsed} // 99, '<=', $BOUND, "round $round: within deadlock_timeout + 2 s");
		ok_value($_, ($res->{ $_->name }{sqlstate} // '') eq '40P01' ? 'ROLLBACK' : 'COMMIT',
			"round $round: " . $_->name . ' ends its transaction') for ($sa, $sb);
		$_->quit for ($sa, $sb);
	}
};

############################################################################
# 2. a row lock and a zklock lock; then an advisory lock and a zklock lock
############################################################################
subtest 'a row lock and an advisory lock against a zklock wait: the zklock waiter fails, the other goes on' => sub {
	my ($s1, $s2) = sessions('s1', 's2');
	ok_value($_, 'BEGIN', $_->name . ' begins') for ($s1, $s2);
	ok_value($s1, 'UPDATE rows_t SET v = v + 1 WHERE id = 1', 's1 holds row 1');
	is(ok_value($s2, acquire('/t600/c'), 's2 takes /t600/c'), 't', 's2 holds /t600/c');
	$s1->start(acquire('/t600/c'));
	ok(wait_waiting($node, $s1->pid, '/t600/c'), 's1 waits for /t600/c');
	my $t0 = time;
	$s2->start('UPDATE rows_t SET v = v + 10 WHERE id = 1');

	my $ended = until_victim([ $s1, $s2 ], $t0);
	my ($victim_name, $v) = victim($ended, 'row lock');
	is($victim_name, 's1', 's1, the zklock waiter, is the one that fails with 40P01');
	cmp_ok($v->{elapsed}, '<=', $BOUND, "within deadlock_timeout + 2 s ($v->{elapsed} s)");
	detail_has($v->{err}, $s1, 'zookeeper lock "/t600/c"', $s2, 'DETAIL: s1 waits for /t600/c, blocked by s2');
	like($v->{err}, qr/Process ${\ $s2->pid } waits for ShareLock on transaction \d+; blocked by process ${\ $s1->pid }\./,
		'DETAIL: s2 waits for ShareLock on s1\'s transaction, in PostgreSQL\'s words');
	like($v->{err}, qr/HINT:\s+See server log for query details\./, 'HINT as PostgreSQL gives it');

	my $r = later($s2, $ended, 10);
	ok($r->{done} && $r->{err} !~ /ERROR/, 's2\'s UPDATE goes on, not failed by PostgreSQL\'s detector')
	  or diag($r->{err});
	ok_value($s1, 'ROLLBACK', 's1 rolls back');
	$r = $s2->result(25) unless $r->{done};
	ok_value($s2, 'COMMIT', 's2 commits');
	is($node->safe_psql('postgres', 'SELECT v FROM rows_t WHERE id = 1'), '10',
		'only s2\'s update is kept');

	# the same with an advisory lock
	ok_value($_, 'BEGIN', $_->name . ' begins again') for ($s1, $s2);
	ok_value($s1, 'SELECT pg_advisory_xact_lock(600)', 's1 holds advisory lock 600');
	is(ok_value($s2, acquire('/t600/e'), 's2 takes /t600/e'), 't', 's2 holds /t600/e');
	$s1->start(acquire('/t600/e'));
	ok(wait_waiting($node, $s1->pid, '/t600/e'), 's1 waits for /t600/e');
	$t0 = time;
	$s2->start('SELECT pg_advisory_xact_lock(600)');
	$ended = until_victim([ $s1, $s2 ], $t0);
	($victim_name, $v) = victim($ended, 'advisory');
	is($victim_name, 's1', 'advisory: s1, the zklock waiter, is the one that fails with 40P01');
	cmp_ok($v->{elapsed}, '<=', $BOUND, "advisory: within deadlock_timeout + 2 s ($v->{elapsed} s)");
	like($v->{err}, qr/Process ${\ $s2->pid } waits for ExclusiveLock on advisory lock \[\d+,0,600,1\]; blocked by process ${\ $s1->pid }\./,
		'advisory: DETAIL names the advisory lock');
	$r = later($s2, $ended, 10);
	ok($r->{done} && $r->{err} !~ /ERROR/, 'advisory: s2 gets the advisory lock') or diag($r->{err});
	ok_value($s1, 'ROLLBACK', 'advisory: s1 rolls back');
	$r = $s2->result(25) unless $r->{done};
	ok_value($s2, 'COMMIT', 'advisory: s2 commits');
	$_->quit for ($s1, $s2);
};

############################################################################
# 3. three sessions: x holds /x and waits for /y, y for /z, z for /x
############################################################################
subtest 'three sessions in a cycle: exactly one 40P01, the others finish' => sub {
	my @s = sessions('x', 'y', 'z');
	my @p = ('/t600/x', '/t600/y', '/t600/z');
	for my $i (0 .. 2)
	{
		ok_value($s[$i], 'BEGIN', $s[$i]->name . ' begins');
		is(ok_value($s[$i], acquire($p[$i]), $s[$i]->name . " takes $p[$i]"), 't',
			$s[$i]->name . " holds $p[$i]");
	}
	for my $i (0 .. 1)
	{
		$s[$i]->start(acquire($p[ $i + 1 ]));
		ok(wait_waiting($node, $s[$i]->pid, $p[ $i + 1 ]), $s[$i]->name . ' waits for ' . $p[ $i + 1 ]);
	}
	my $t0 = time;
	$s[2]->start(acquire($p[0]));

	my $ended = until_victim(\@s, $t0);
	my ($victim_name, $v) = victim($ended, 'x, y and z');
	cmp_ok($v->{elapsed}, '<=', $BOUND, "within deadlock_timeout + 2 s ($v->{elapsed} s)");
	for my $i (0 .. 2)
	{
		detail_has($v->{err}, $s[$i], "zookeeper lock \"$p[($i + 1) % 3]\"", $s[ ($i + 1) % 3 ],
			'DETAIL: ' . $s[$i]->name . ' waits for ' . $p[ ($i + 1) % 3 ]);
	}
	my ($victim) = grep { $_->name eq $victim_name } @s;
	ok_value($victim, 'ROLLBACK', 'the victim rolls back');

	# the others get their locks one after the other as each commits
	my @rest = grep { $_->name ne $victim_name } @s;
	my $failed = 0;
	my %left = map { $_->name => $_ } @rest;
	my $deadline = time + 25;
	while (%left && time < $deadline)
	{
		for my $s (values %left)
		{
			next unless exists $ended->{ $s->name } || $s->done;
			my $r = later($s, $ended, 5);
			$failed++ if ($r->{sqlstate} // '') eq '40P01';
			is($r->{out}, 't', $s->name . ' gets its lock') or diag($r->{err});
			ok_value($s, 'COMMIT', $s->name . ' commits');
			delete $left{ $s->name };
		}
		usleep(20_000);
	}
	is(scalar(keys %left), 0, 'both others finished');
	is($failed, 0, 'exactly one 40P01 in the cycle');
	$_->quit for @s;
};

############################################################################
# 3b. read/write locks: a reader and a writer of two paths
############################################################################
subtest 'read/write locks in a cycle: one 40P01 naming the read and write locks; two readers never' => sub {
	my ($r, $w) = sessions('reader', 'writer');
	ok_value($_, 'BEGIN', $_->name . ' begins') for ($r, $w);
	is(ok_value($r, "SELECT zk_read_lock_acquire_xact('/t600/rw1', '20s')", 'reader reads /t600/rw1'),
		't', 'reader holds a read lock on /t600/rw1');
	is(ok_value($w, "SELECT zk_write_lock_acquire_xact('/t600/rw2', '20s')", 'writer writes /t600/rw2'),
		't', 'writer holds the write lock on /t600/rw2');
	# a second reader of /t600/rw1 is no obstacle to anyone
	my ($r2) = sessions('reader2');
	is(ok_value($r2, "SELECT zk_read_lock_acquire('/t600/rw1', '20s')", 'reader2 reads /t600/rw1'),
		't', 'reader2 shares the read lock');
	$r->start("SELECT zk_read_lock_acquire_xact('/t600/rw2', '20s')");
	ok(wait_waiting($node, $r->pid, '/t600/rw2'), 'reader waits for /t600/rw2 behind the writer');
	my $t0 = time;
	$w->start("SELECT zk_write_lock_acquire_xact('/t600/rw1', '20s')");
	my $ended = until_victim([ $r, $w ], $t0);
	my ($victim_name, $v) = victim($ended, 'reader and writer');
	cmp_ok($v->{elapsed}, '<=', $BOUND, "within deadlock_timeout + 2 s ($v->{elapsed} s)");
	detail_has($v->{err}, $r, 'zookeeper read lock "/t600/rw2"', $w, 'DETAIL: reader waits for the read lock, blocked by writer');
	detail_has($v->{err}, $w, 'zookeeper write lock "/t600/rw1"', $r, 'DETAIL: writer waits for the write lock, blocked by reader');
	unlike($v->{err}, qr/blocked by process ${\ $r2->pid }\./, 'reader2, which waits for nothing, is in no edge of the cycle');
	my ($victim, $other) = $victim_name eq 'reader' ? ($r, $w) : ($w, $r);
	ok_value($victim, 'ROLLBACK', 'the victim rolls back');
	if ($victim_name eq 'reader')
	{
		# the writer still waits for reader2's read lock, which is no cycle
		usleep(2_500_000);
		ok(!exists $ended->{writer} && !$other->done, 'the writer waits for reader2 without a 40P01');
		ok_value($r2, "SELECT zk_read_lock_release('/t600/rw1')", 'reader2 releases');
	}
	my $res = later($other, $ended, 25);
	is($res->{out}, 't', 'the other gets its lock') or diag($res->{err});
	ok_value($other, 'COMMIT', 'the other commits');
	ok_value($r2, "SELECT zk_release_all()", 'reader2 lets go of what it still holds');
	$_->quit for ($r, $w, $r2);
};

############################################################################
# 3b. soft cycles: a reader queued behind a writer that itself waits
############################################################################

# finish_all($sessions, $label): each session's pending acquire ends with
# the lock within 25 s, in whatever order the locks come free; each one
# that gets it commits (giving its locks back to the next).  Returns the
# number that got it.
sub finish_all
{
	my ($ss, $label, $ended) = @_;
	$ended //= {};
	my %left = map { $_->name => $_ } @$ss;
	my $got = 0;
	my $deadline = time + 25;
	while (%left && time < $deadline)
	{
		for my $name (sort keys %left)
		{
			my $s = $left{$name};
			next unless exists $ended->{$name} || $s->done;
			my $r = later($s, $ended, 5);
			is($r->{out}, 't', "$label: $name gets its lock") or diag($r->{err});
			isnt($r->{sqlstate} // '', '40P01', "$label: $name is no second victim");
			$got++ if ($r->{out} // '') eq 't';
			ok_value($s, 'COMMIT', "$label: $name commits");
			delete $left{$name};
		}
		usleep(20_000);
	}
	ok(!%left, "$label: every other session completed") or diag('still waiting: ' . join(' ', sort keys %left));
	return $got;
}

# PostgreSQL's deadlock-soft, in zklock locks: d1 and d2 read /s1 and /s2,
# e1 and e2 queue writers behind them, then d1 asks to read /s2 (behind
# e2's waiting writer) and d2 /s1 (behind e1's).  Curator's reader cannot
# pass a write node ahead of it, so no one can move: exactly one 40P01.
subtest 'a soft cycle (readers behind waiting writers): exactly one 40P01, the others complete' => sub {
	my $deadlocks = "SELECT deadlocks FROM pg_stat_database WHERE datname = 'postgres'";
	my $before = $node->safe_psql('postgres', $deadlocks);
	my ($d1, $d2, $e1, $e2) = sessions('d1', 'd2', 'e1', 'e2');
	my ($p1, $p2) = ('/t600/soft/s1', '/t600/soft/s2');
	my $read = sub { "SELECT zk_read_lock_acquire_xact('$_[0]', '20s')" };
	my $write = sub { "SELECT zk_write_lock_acquire_xact('$_[0]', '20s')" };
	ok_value($_, 'BEGIN', $_->name . ' begins') for ($d1, $d2, $e1, $e2);
	is(ok_value($d1, $read->($p1), 'd1 reads /s1'), 't', 'd1 holds a read lock on /s1');
	is(ok_value($d2, $read->($p2), 'd2 reads /s2'), 't', 'd2 holds a read lock on /s2');
	$e1->start($write->($p1));
	ok(wait_waiting($node, $e1->pid, $p1), 'e1 waits to write /s1 behind d1');
	$e2->start($write->($p2));
	ok(wait_waiting($node, $e2->pid, $p2), 'e2 waits to write /s2 behind d2');
	$d1->start($read->($p2));
	ok(wait_waiting($node, $d1->pid, $p2), 'd1 waits to read /s2 behind e2, which waits');
	my $t0 = time;
	$d2->start($read->($p1));

	my $all = [ $d1, $d2, $e1, $e2 ];
	my $ended = until_victim($all, $t0);
	my @victims = grep { ($ended->{$_}{sqlstate} // '') eq '40P01' } sort keys %$ended;
	is(scalar(@victims), 1, 'one of the four fails with 40P01 (' . join(' ', @victims) . ')')
	  or BAIL_OUT('no victim: ' . explain($ended));
	my $victim_name = $victims[0];
	my $v = $ended->{$victim_name};
	cmp_ok($v->{elapsed}, '<=', $BOUND, "within deadlock_timeout + 2 s ($v->{elapsed} s)");
	# the cycle is d1 -> e2 -> d2 -> e1 -> d1 from whichever member checked
	detail_has($v->{err}, $e1, 'zookeeper write lock "' . $p1 . '"', $d1, 'DETAIL: e1 waits for the write lock of /s1, blocked by d1');
	detail_has($v->{err}, $e2, 'zookeeper write lock "' . $p2 . '"', $d2, 'DETAIL: e2 waits for the write lock of /s2, blocked by d2');
	for my $edge ([ $d1, $p2, $e2 ], [ $d2, $p1, $e1 ])
	{
		my ($w, $p, $h) = @$edge;
		my $line = 'Process ' . $w->pid . " waits for zookeeper read lock \"$p\"; blocked by process "
		  . $h->pid . ', which waits ahead of it in the queue.';
		ok(index($v->{err}, $line) >= 0, 'DETAIL: ' . $w->name . ' waits behind ' . $h->name . ', a waiting writer')
		  or diag("wanted [$line] in:\n$v->{err}");
	}
	my ($victim) = grep { $_->name eq $victim_name } @$all;
	ok_value($victim, 'ROLLBACK', 'the victim rolls back');
	my $got = 0;
	for my $s (grep { $_->name ne $victim_name && exists $ended->{ $_->name } } @$all)
	{
		is($ended->{ $s->name }{out}, 't', $s->name . ' got its lock as the victim let go')
		  or diag($ended->{ $s->name }{err});
		$got++ if ($ended->{ $s->name }{out} // '') eq 't';
		ok_value($s, 'COMMIT', $s->name . ' commits');
	}
	$got += finish_all([ grep { !exists $ended->{ $_->name } } @$all ], 'soft cycle');
	is($got, 3, 'the three others got their locks');
	ok(wait_no_zklock_rows($node, $p1) && wait_no_zklock_rows($node, $p2), 'nothing is left held or waiting');
	ok(wait_until(sub { $node->safe_psql('postgres', $deadlocks) > $before }, 20, 'deadlocks counted'),
		'counted in pg_stat_database.deadlocks');
	is($node->safe_psql('postgres', $deadlocks), $before + 1, 'exactly one deadlock counted');
	$_->quit for @$all;
};

# Cycles through a semaphore mutex, with an acquirer queued in P/locks
# behind another that itself waits for the lease: sm1 holds the semaphore
# mutex /sm and waits for mutex /m, held by sm2; smq takes P/locks and
# waits for sm1's lease; sm2 asks for /sm and queues in P/locks behind
# smq.  sm2 waits for smq's P/locks node and for sm1's lease (a semaphore
# mutex waiter waits for every lease held), so two cycles stand: smq ->
# sm1 -> sm2 -> smq and sm1 -> sm2 -> sm1.  Both must be broken: if smq
# is the first victim, the second still stands and gets one more; if sm1
# or sm2 is, both are broken at once and no one else fails.
subtest 'cycles through a semaphore mutex and a waiter queued behind a waiting one: each broken once' => sub {
	my ($s1, $s2, $q1) = sessions('sm1', 'sm2', 'smq');
	my $sm = "SELECT zk_semaphore_mutex_acquire_xact('/t600/soft/sm', '20s')";
	ok_value($_, 'BEGIN', $_->name . ' begins') for ($s1, $s2, $q1);
	is(ok_value($s1, $sm, 'sm1 takes the semaphore mutex'), 't', 'sm1 holds /sm');
	is(ok_value($s2, acquire('/t600/soft/m'), 'sm2 takes /m'), 't', 'sm2 holds /m');
	$q1->start($sm);
	ok(wait_waiting($node, $q1->pid, '/t600/soft/sm'), 'smq waits for the semaphore mutex, its lease made');
	$s1->start(acquire('/t600/soft/m'));
	ok(wait_waiting($node, $s1->pid, '/t600/soft/m'), 'sm1 waits for /m behind sm2');
	my $t0 = time;
	$s2->start($sm);
	my $all = [ $s1, $s2, $q1 ];
	my $ended = until_victim($all, $t0);
	# smq's failure leaves sm1 -> sm2 -> sm1 standing, whose own victim
	# may be seen in the same poll: smq is then the first victim named
	my @failed = grep { ($ended->{$_}{sqlstate} // '') eq '40P01' } sort keys %$ended;
	my ($victim_name) = (grep({ $_ eq 'smq' } @failed), @failed);
	ok(defined $victim_name, 'one of the three fails with 40P01 (' . join(' ', @failed) . ')')
	  or BAIL_OUT('no victim: ' . explain($ended));
	my $v = $ended->{$victim_name};
	cmp_ok($v->{elapsed}, '<=', $BOUND, "within deadlock_timeout + 2 s ($v->{elapsed} s)");
	like($v->{err}, qr/zookeeper semaphore_mutex lock "\/t600\/soft\/sm"/, 'DETAIL names the semaphore mutex');
	my ($victim) = grep { $_->name eq $victim_name } @$all;
	ok_value($victim, 'ROLLBACK', 'the victim rolls back');
	my @rest = grep { $_->name ne $victim_name } @$all;
	if ($victim_name eq 'smq')
	{
		like($v->{err}, qr/blocked by process ${\ $q1->pid }, which waits ahead of it in the queue\./,
			'DETAIL: sm2 waits behind smq, which waits');
		my $t1 = time;
		my @waiting = grep { !exists $ended->{ $_->name } } @rest;
		$ended = { %$ended, %{ until_victim(\@waiting, $t1) } } if @waiting == @rest;
		my @second = grep { $_ ne 'smq' && ($ended->{$_}{sqlstate} // '') eq '40P01' } sort keys %$ended;
		is(scalar(@second), 1, 'sm1 -> sm2 -> sm1 still stood: one more 40P01 (' . join(' ', @second) . ')')
		  or diag(explain($ended));
		my ($v2) = grep { $_->name eq ($second[0] // '') } @rest;
		ok_value($v2, 'ROLLBACK', 'the second victim rolls back') if $v2;
		@rest = grep { $_->name ne ($second[0] // '') } @rest;
	}
	else
	{
		is(scalar(@failed), 1, "$victim_name breaks both cycles: no other 40P01 (@failed)");
	}
	is(finish_all(\@rest, 'semaphore cycle', $ended), scalar(@rest), 'the others got their locks');
	$_->quit for @$all;
};

# A semaphore of two leases is an OR wait: its acquirer goes on as soon as
# any one holder lets go.  When every holder waits for the acquirer, it is
# a deadlock all the same, but the detector looks for cycles of AND waits
# only (doc/failure-model.md): no 40P01; the waits end by their timeouts.
subtest 'a semaphore of two leases whose holders wait for its acquirer: not detected, ends by timeout' => sub {
	my ($h1, $h2, $w) = sessions('lease1', 'lease2', 'leasew');
	my $lease = sub { "SELECT zk_semaphore_acquire_xact('/t600/soft/sem', 2, 1, '$_[0]') IS NOT NULL" };
	ok_value($_, 'BEGIN', $_->name . ' begins') for ($h1, $h2, $w);
	is(ok_value($h1, $lease->('20s'), 'lease1 takes a lease'), 't', 'lease1 holds a lease');
	is(ok_value($h2, $lease->('20s'), 'lease2 takes a lease'), 't', 'lease2 holds a lease');
	is(ok_value($w, acquire('/t600/soft/or'), 'leasew takes /or'), 't', 'leasew holds /or');
	$h1->start(acquire('/t600/soft/or'));
	$h2->start(acquire('/t600/soft/or'));
	ok(wait_waiting($node, $h1->pid, '/t600/soft/or') && wait_waiting($node, $h2->pid, '/t600/soft/or'),
		'both holders wait for /or, held by leasew');
	my $t0 = time;
	$w->start($lease->('5s'));
	my $first = outcomes([ $h1, $h2, $w ], $t0, 1);
	my ($ended) = keys %$first;
	is($ended, 'leasew', 'the first wait to end is the lease acquire');
	is($first->{leasew}{out}, 'f', 'it ends by its own timeout (no lease), not by a 40P01')
	  or diag($first->{leasew}{err});
	ok_value($w, 'COMMIT', 'leasew commits (gives /or back)');
	finish_all([ $h1, $h2 ], 'OR wait');
	$_->quit for ($h1, $h2, $w);
};

############################################################################
# 4. no cycle: no 40P01, however long the wait
############################################################################
subtest 'no cycle, no 40P01: a slow holder, and a holder waiting for a row of a session that waits for nothing' => sub {
	# a holder that merely holds for 3 s (three deadlock_timeouts)
	my ($h, $w) = sessions('slow_holder', 'waiter');
	is(ok_value($h, "SELECT zk_mutex_acquire('/t600/slow', '20s')", 'holder takes /t600/slow'), 't',
		'holder holds /t600/slow');
	my $t0 = time;
	$w->start("SELECT zk_mutex_acquire('/t600/slow', '20s')");
	ok(wait_waiting($node, $w->pid, '/t600/slow'), 'waiter waits behind the slow holder');
	usleep(3_000_000);
	ok(!$w->done, 'after 3 s the waiter still waits (no 40P01)');
	ok_value($h, "SELECT zk_mutex_release('/t600/slow')", 'holder releases');
	my $r = $w->result(25);
	is($r->{out}, 't', 'the waiter gets the lock') or diag($r->{err});
	is($r->{sqlstate}, undef, 'and no error');
	ok_value($w, "SELECT zk_mutex_release('/t600/slow')", 'waiter releases');
	$_->quit for ($h, $w);

	# a chain that is no cycle: w -> h (zklock) -> r (row lock), r waits for nothing
	my ($rs, $hs, $ws) = sessions('row_holder', 'chain_holder', 'chain_waiter');
	ok_value($_, 'BEGIN', $_->name . ' begins') for ($rs, $hs);
	ok_value($rs, 'UPDATE rows_t SET v = v + 1 WHERE id = 2', 'row_holder holds row 2');
	is(ok_value($hs, acquire('/t600/d'), 'chain_holder takes /t600/d'), 't', 'chain_holder holds /t600/d');
	$hs->start('UPDATE rows_t SET v = v + 10 WHERE id = 2');
	ok(wait_lock_wait($hs), 'chain_holder waits for row 2');
	$ws->start("SELECT zk_mutex_acquire('/t600/d', '20s')");
	ok(wait_waiting($node, $ws->pid, '/t600/d'), 'chain_waiter waits for /t600/d');
	usleep(3_000_000);
	ok(!$ws->done, 'after 3 s chain_waiter still waits (no 40P01)');
	ok(!$hs->done, 'and chain_holder still waits for the row');
	ok_value($rs, 'COMMIT', 'row_holder commits');
	$r = $hs->result(25);
	ok($r->{done} && $r->{err} !~ /ERROR/, 'chain_holder\'s UPDATE goes on') or diag($r->{err});
	ok_value($hs, 'COMMIT', 'chain_holder commits (releases /t600/d)');
	$r = $ws->result(25);
	is($r->{out}, 't', 'chain_waiter gets /t600/d') or diag($r->{err});
	is($r->{sqlstate}, undef, 'and no error');
	$_->quit for ($rs, $hs, $ws);
};

$node->stop;
stop_zk($zk);
done_testing();


# 601_deadlock_clusters: deadlocks across clusters that share one ZooKeeper
# are detected and broken (issue 33, items 2 and 4).
#
# What users rely on:
#   1. Two clusters in opposite order (A: /a then /b, B: /b then /a):
#      exactly one of the two sessions fails with 40P01 "deadlock
#      detected" within deadlock_timeout + 2 s, its DETAIL naming both
#      processes, their clusters and paths; the other gets its lock and
#      commits.  Also when both close the cycle at the same moment, so
#      that both clusters check at about the same time (three rounds).
#   2. A three-party cycle over two clusters (A1 /x -> /y, B1 /y -> /z,
#      A2 /z -> /x): exactly one 40P01 within the bound, the other two get
#      their locks in turn and commit.
#   2b. PostgreSQL's deadlock-soft over two clusters: readers queued
#      behind writers that wait themselves, the cycle closed only through
#      both clusters' records: exactly one 40P01, the others complete.
#   2c. A cycle through a semaphore mutex over two clusters (its waiter's
#      record lists the leases held): exactly one 40P01.
#   3. A chain that is no cycle fails nobody: a waiter on A behind a
#      holder on B that waits for nothing, a waiter on B behind that
#      waiter, all waiting several deadlock_timeouts while checks run; the
#      holder then releases while they still run, and each gets its lock.
#   4. Records: a wait that lasted deadlock_timeout is visible under
#      /zklock-waits (read with a Curator client) and is gone once the
#      wait ends; a wait shorter than deadlock_timeout writes nothing; a
#      worker restart leaves no record of its old session; SQL cannot use
#      the records' path.
#   5. zk_locks.waits_for, for a wait that lasted deadlock_timeout: "pid
#      N" behind a holder of the same cluster, "pid N of cluster X" behind
#      another cluster's session, the node's data (Curator's participant
#      id) behind a Curator client.
# Every acquire has a timeout of 20 s, so the code before the feature (or
# with zklock.deadlock_records off) fails these tests (the deadlocked
# waits time out, no 40P01) rather than hangs.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use ZklockTest;

my $DEADLOCK_TIMEOUT = 0.5;    # seconds, as set below
my $BOUND = $DEADLOCK_TIMEOUT + 2;    # the issue's bound for a 40P01
my $RECORDS = '/zklock-waits';
my $records_off = $ENV{ZKLOCK_601_RECORDS_OFF} ? "zklock.deadlock_records = off\n" : '';

my $zk = start_zk();
# (the test harness names each cluster: cluster_name is the node's name)
my $na = new_zklock_node('cluster_a', $zk, "deadlock_timeout = '500ms'\n$records_off");
my $nb = new_zklock_node('cluster_b', $zk, "deadlock_timeout = '500ms'\n$records_off");
my $peer = new_peer($zk);

# records(): the wait records' names now
sub records { return $peer->children($RECORDS) // []; }

# no_records(): wait (bounded) until no wait record is left
sub no_records { return wait_until(sub { @{ records() } == 0 }, 10, 'no wait record'); }

sub session { my ($node, $name) = @_; return ZklockTest::Session->new($node, $name); }

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

# detail_has($err, $waiter, $wc, $path, $holder, $hc): one edge's DETAIL line
sub detail_has
{
	my ($err, $waiter, $wc, $path, $holder, $hc, $label) = @_;
	my $line = 'Process ' . $waiter->pid . " of cluster $wc waits for zookeeper lock \"$path\"; blocked by process "
	  . $holder->pid . " of cluster $hc.";
	ok(index($err, $line) >= 0, $label) or diag("wanted [$line] in:\n$err");
}

# victim_of($res, $label): the one result of 40P01 among $res, asserted
# to be the only one; its name and result
sub victim_of
{
	my ($res, $label) = @_;
	my @v = grep { ($res->{$_}{sqlstate} // '') eq '40P01' } sort keys %$res;
	is(scalar(@v), 1, "$label: exactly one session fails with 40P01 (@v)")
	  or diag(join("\n", map { "$_: " . ($res->{$_}{err} // '') } sort keys %$res));
	return ($v[0] // '', $v[0] ? $res->{ $v[0] } : { elapsed => 99, err => '' });
}

# unwind(\@sessions, $label, $seen): the sessions still waiting get their
# locks one after the other as each commits (a result already in $seen
# counts); each must get 't', none a 40P01
sub unwind
{
	my ($left, $label, $seen) = @_;
	my @left = @$left;
	while (@left)
	{
		my ($pre) = grep { $seen && exists $seen->{ $_->name } } @left;
		my $res = $pre ? { $pre->name => $seen->{ $pre->name } } : outcomes(\@left, time, 1);
		my ($name) = keys %$res;
		ok(defined $name, "$label: a waiter gets its lock") or return;
		is($res->{$name}{out}, 't', "$label: $name gets its lock, no error")
		  or diag($res->{$name}{err});
		my ($s) = grep { $_->name eq $name } @left;
		ok_value($s, 'COMMIT', "$label: $name commits");
		@left = grep { $_->name ne $name } @left;
	}
}

############################################################################
# 1. two clusters in opposite order
############################################################################
subtest 'two clusters in opposite order: one 40P01 naming both, the other commits' => sub {
	my $sa = session($na, 'a');
	my $sb = session($nb, 'b');
	ok_value($_, 'BEGIN', $_->name . ' begins') for ($sa, $sb);
	is(ok_value($sa, acquire('/t601/a'), 'a takes /t601/a'), 't', 'a holds /t601/a');
	is(ok_value($sb, acquire('/t601/b'), 'b takes /t601/b'), 't', 'b holds /t601/b');
	$sa->start(acquire('/t601/b'));
	ok(wait_waiting($na, $sa->pid, '/t601/b'), 'a waits for /t601/b');
	my $t0 = time;
	$sb->start(acquire('/t601/a'));

	my $res = until_victim([ $sa, $sb ], $t0);
	my ($victim_name, $v) = victim_of($res, 'two clusters');
	like($v->{err}, qr/ERROR:\s+40P01: deadlock detected/, 'message: deadlock detected');
	cmp_ok($v->{elapsed}, '<=', $BOUND, "within deadlock_timeout + 2 s ($v->{elapsed} s)");
	detail_has($v->{err}, $sa, 'cluster_a', '/t601/b', $sb, 'cluster_b', 'DETAIL: a (cluster_a) waits for /t601/b, blocked by b (cluster_b)');
	detail_has($v->{err}, $sb, 'cluster_b', '/t601/a', $sa, 'cluster_a', 'DETAIL: b (cluster_b) waits for /t601/a, blocked by a (cluster_a)');

	my ($victim, $other) = $victim_name eq 'a' ? ($sa, $sb) : ($sb, $sa);
	ok_value($victim, 'ROLLBACK', 'the victim rolls back');
	unwind([$other], 'two clusters', $res);
	ok(no_records(), 'no wait record is left once the waits ended');
	$_->quit for ($sa, $sb);
};

# 1b. both close the cycle at the same moment, so both workers check at
# about the same time: still exactly one victim, three times over
subtest 'both clusters close the cycle at once: exactly one victim' => sub {
	for my $round (1 .. 3)
	{
		my $sa = session($na, "a$round");
		my $sb = session($nb, "b$round");
		my ($pa, $pb) = ("/t601/r$round/a", "/t601/r$round/b");
		ok_value($_, 'BEGIN', $_->name . ' begins') for ($sa, $sb);
		is(ok_value($sa, acquire($pa), "round $round: a takes $pa"), 't', "round $round: a holds $pa");
		is(ok_value($sb, acquire($pb), "round $round: b takes $pb"), 't', "round $round: b holds $pb");
		my $t0 = time;
		$sa->start(acquire($pb));
		$sb->start(acquire($pa));
		my $res = until_victim([ $sa, $sb ], $t0);
		my ($victim_name, $v) = victim_of($res, "round $round");
		cmp_ok($v->{elapsed}, '<=', $BOUND, "round $round: within deadlock_timeout + 2 s");
		my ($victim, $other) = $victim_name eq "a$round" ? ($sa, $sb) : ($sb, $sa);
		ok_value($victim, 'ROLLBACK', "round $round: the victim rolls back");
		unwind([$other], "round $round", $res);
		$_->quit for ($sa, $sb);
	}
	ok(no_records(), 'no wait record is left');
};

############################################################################
# 2. three parties over two clusters
############################################################################
subtest 'a three-party cycle over two clusters: exactly one 40P01, the others go on' => sub {
	my $a1 = session($na, 'a1');
	my $b1 = session($nb, 'b1');
	my $a2 = session($na, 'a2');
	ok_value($_, 'BEGIN', $_->name . ' begins') for ($a1, $b1, $a2);
	is(ok_value($a1, acquire('/t601/x'), 'a1 takes /t601/x'), 't', 'a1 holds /t601/x');
	is(ok_value($b1, acquire('/t601/y'), 'b1 takes /t601/y'), 't', 'b1 holds /t601/y');
	is(ok_value($a2, acquire('/t601/z'), 'a2 takes /t601/z'), 't', 'a2 holds /t601/z');
	$a1->start(acquire('/t601/y'));
	ok(wait_waiting($na, $a1->pid, '/t601/y'), 'a1 waits for /t601/y');
	$b1->start(acquire('/t601/z'));
	ok(wait_waiting($nb, $b1->pid, '/t601/z'), 'b1 waits for /t601/z');
	my $t0 = time;
	$a2->start(acquire('/t601/x'));

	my $res = until_victim([ $a1, $b1, $a2 ], $t0);
	my ($victim_name, $v) = victim_of($res, 'three parties');
	cmp_ok($v->{elapsed}, '<=', $BOUND, "within deadlock_timeout + 2 s ($v->{elapsed} s)");
	is(scalar(() = $v->{err} =~ /Process \d+ of cluster cluster_[ab] waits for/g), 3, 'DETAIL: a line per member');
	my ($victim) = grep { $_->name eq $victim_name } ($a1, $b1, $a2);
	ok_value($victim, 'ROLLBACK', 'the victim rolls back') if $victim;
	unwind([ grep { $_->name ne $victim_name } ($a1, $b1, $a2) ], 'three parties', $res);
	ok(no_records(), 'no wait record is left');
	$_->quit for ($a1, $b1, $a2);
};

# 2b. PostgreSQL's deadlock-soft over two clusters: d1 on A reads /s1, d2
# on B reads /s2; e1 on B and e2 on A queue writers behind them; d1 asks
# to read /s2 behind e2's waiting writer, d2 /s1 behind e1's.  Two of the
# four edges rest on a waiting writer's node (one in each cluster's own
# records), so neither cluster sees the cycle alone: its records must.
subtest 'a soft cycle over two clusters (readers behind waiting writers): exactly one 40P01' => sub {
	my $d1 = session($na, 'd1');
	my $e2 = session($na, 'e2');
	my $d2 = session($nb, 'd2');
	my $e1 = session($nb, 'e1');
	my $all = [ $d1, $d2, $e1, $e2 ];
	my ($p1, $p2) = ('/t601/soft/s1', '/t601/soft/s2');
	my $read = sub { "SELECT zk_read_lock_acquire_xact('$_[0]', '20s')" };
	my $write = sub { "SELECT zk_write_lock_acquire_xact('$_[0]', '20s')" };
	ok_value($_, 'BEGIN', $_->name . ' begins') for @$all;
	is(ok_value($d1, $read->($p1), 'd1 (A) reads /s1'), 't', 'd1 holds a read lock on /s1');
	is(ok_value($d2, $read->($p2), 'd2 (B) reads /s2'), 't', 'd2 holds a read lock on /s2');
	$e1->start($write->($p1));
	ok(wait_waiting($nb, $e1->pid, $p1), 'e1 (B) waits to write /s1 behind d1');
	$e2->start($write->($p2));
	ok(wait_waiting($na, $e2->pid, $p2), 'e2 (A) waits to write /s2 behind d2');
	$d1->start($read->($p2));
	ok(wait_waiting($na, $d1->pid, $p2), 'd1 waits to read /s2 behind e2, which waits');
	my $t0 = time;
	$d2->start($read->($p1));

	my $res = until_victim($all, $t0);
	my ($victim_name, $v) = victim_of($res, 'soft cycle');
	cmp_ok($v->{elapsed}, '<=', $BOUND, "within deadlock_timeout + 2 s ($v->{elapsed} s)");
	is(scalar(() = $v->{err} =~ /Process \d+ of cluster cluster_[ab] waits for/g), 4, 'DETAIL: a line per member');
	is(scalar(() = $v->{err} =~ /waits for zookeeper read lock "[^"]+"; blocked by process \d+ of cluster cluster_[ab], which waits ahead of it in the queue\./g),
		2, 'DETAIL: both readers wait behind a waiting writer')
	  or diag($v->{err});
	my ($victim) = grep { $_->name eq $victim_name } @$all;
	ok_value($victim, 'ROLLBACK', 'the victim rolls back') if $victim;
	unwind([ grep { $_->name ne $victim_name } @$all ], 'soft cycle', $res);
	ok(no_records(), 'no wait record is left');
	$_->quit for @$all;
};

# 2c. A semaphore mutex across clusters: a1 on A holds the semaphore mutex
# /sm and waits for mutex /m; b1 on B holds /m and asks for /sm: it takes
# P/locks and waits for a1's lease (a semaphore mutex waits for every
# lease held), and its record says so.
subtest 'a cycle through a semaphore mutex over two clusters: exactly one 40P01' => sub {
	my $a1 = session($na, 'sa1');
	my $b1 = session($nb, 'sb1');
	my $all = [ $a1, $b1 ];
	my $sm = "SELECT zk_semaphore_mutex_acquire_xact('/t601/sem/sm', '20s')";
	ok_value($_, 'BEGIN', $_->name . ' begins') for @$all;
	is(ok_value($a1, $sm, 'sa1 (A) takes the semaphore mutex /sm'), 't', 'sa1 holds /sm');
	is(ok_value($b1, acquire('/t601/sem/m'), 'sb1 (B) takes /m'), 't', 'sb1 holds /m');
	$b1->start($sm);
	ok(wait_waiting($nb, $b1->pid, '/t601/sem/sm'), 'sb1 waits for /sm, its lease made');
	my $t0 = time;
	$a1->start(acquire('/t601/sem/m'));

	my $res = until_victim($all, $t0);
	my ($victim_name, $v) = victim_of($res, 'semaphore mutex');
	cmp_ok($v->{elapsed}, '<=', $BOUND, "within deadlock_timeout + 2 s ($v->{elapsed} s)");
	like($v->{err}, qr/Process ${\ $b1->pid } of cluster cluster_b waits for zookeeper semaphore_mutex lock "\/t601\/sem\/sm"; blocked by process ${\ $a1->pid } of cluster cluster_a\./,
		'DETAIL: sb1 waits for the semaphore mutex, blocked by sa1');
	detail_has($v->{err}, $a1, 'cluster_a', '/t601/sem/m', $b1, 'cluster_b', 'DETAIL: sa1 waits for /m, blocked by sb1');
	my ($victim) = grep { $_->name eq $victim_name } @$all;
	ok_value($victim, 'ROLLBACK', 'the victim rolls back') if $victim;
	unwind([ grep { $_->name ne $victim_name } @$all ], 'semaphore mutex', $res);
	ok(no_records(), 'no wait record is left');
	$_->quit for @$all;
};

############################################################################
# 3. a chain that is no cycle
############################################################################
subtest 'a chain that is no cycle, with checks running and a release among them: no 40P01' => sub {
	my $h = session($nb, 'holder');
	my $w1 = session($na, 'w1');
	my $w2 = session($nb, 'w2');
	ok_value($_, 'BEGIN', $_->name . ' begins') for ($h, $w1, $w2);
	is(ok_value($h, acquire('/t601/n2'), 'holder (B) takes /t601/n2'), 't', 'holder holds /t601/n2');
	is(ok_value($w1, acquire('/t601/n1'), 'w1 (A) takes /t601/n1'), 't', 'w1 holds /t601/n1');
	$w1->start(acquire('/t601/n2'));
	ok(wait_waiting($na, $w1->pid, '/t601/n2'), 'w1 waits for /t601/n2 behind the holder on B');
	$w2->start(acquire('/t601/n1'));
	ok(wait_waiting($nb, $w2->pid, '/t601/n1'), 'w2 (B) waits for /t601/n1 behind w1 on A');
	ok(wait_until(sub { @{ records() } == 2 }, 10, 'two records'),
		'both waits are published once they lasted deadlock_timeout');
	my $log_a = -s $na->logfile;
	# checks run every deadlock_timeout meanwhile: several of them must
	# come and go with nobody failed
	ok(wait_until(sub { my @c = slurp_file($na->logfile, $log_a) =~ /deadlock check for/g; @c >= 3 }, 10,
		'three checks'), 'A ran three checks while w1 waited');
	ok(!$w1->done && !$w2->done, 'nobody was failed by them');
	# the holder releases while checks run
	ok_value($h, 'COMMIT', 'the holder commits (releases /t601/n2)');
	unwind([ $w1, $w2 ], 'chain');
	ok(no_records(), 'no wait record is left');
	$_->quit for ($h, $w1, $w2);
};

############################################################################
# 4. records: short waits write nothing, a restarted worker leaves none,
#    SQL cannot touch their path
############################################################################
subtest 'records: none for a short wait, none left by a restarted worker, a reserved path' => sub {
	my $h = session($na, 'short_h');
	my $w = session($nb, 'short_w');
	my $log_b = -s $nb->logfile;
	is(ok_value($h, "SELECT zk_mutex_acquire('/t601/s')", 'short_h takes /t601/s'), 't', 'short_h holds');
	$w->start("SELECT zk_mutex_acquire('/t601/s', '20s')");
	ok(wait_waiting($nb, $w->pid, '/t601/s'), 'short_w waits (on B)');
	is(ok_value($h, "SELECT zk_mutex_release('/t601/s')", 'short_h releases'), 't',
		'released before deadlock_timeout');
	is($w->result(10)->{out}, 't', 'short_w gets the lock');
	unlike(slurp_file($nb->logfile, $log_b), qr/wait record \S+ published/,
		'nothing was written to ZooKeeper for a wait shorter than deadlock_timeout');
	is(ok_value($w, "SELECT zk_mutex_release('/t601/s')", 'short_w releases'), 't', 'short_w releases');

	# a long wait, then the waiter's worker restarts: its old session
	# is closed, and its record with it
	is(ok_value($h, "SELECT zk_mutex_acquire('/t601/s')", 'short_h takes /t601/s again'), 't', 'held again');
	$w->start("SELECT zk_mutex_acquire('/t601/s', '20s')");
	ok(wait_until(sub { @{ records() } == 1 }, 10, 'one record'), 'the long wait is published');
	my ($old) = @{ records() };
	my ($oldpid, $newpid) = restart_worker($nb);
	ok($newpid, 'the worker of B restarted');
	ok(wait_until(sub { !grep { $_ eq $old } @{ records() } }, 20, 'old record gone'),
		'the record of the old session is gone');
	ok_value($h, "SELECT zk_mutex_release('/t601/s')", 'short_h releases');
	my $r = $w->result(20);
	ok($r->{done}, 'the waiter ends its wait') or diag($r->{err});
	ok(no_records(), 'no wait record is left');
	$_->quit for ($h, $w);

	my ($state, $e) = psql_error($na, "SELECT zk_mutex_acquire('$RECORDS/x', '1s')");
	is($state, '22023', 'SQL cannot lock below the records\' path');
	like($e, qr/reserved by zklock/, 'the error says the path is zklock\'s');
};

############################################################################
# 5. zk_locks.waits_for
############################################################################
subtest 'zk_locks.waits_for: a local holder, another cluster\'s, a Curator client' => sub {
	my $w = session($na, 'wf_w');

	# waits_for($path): the waiter's waits_for, once it is known
	my $waits_for = sub {
		my ($path) = @_;
		my $q = "SELECT coalesce(waits_for, '') FROM zk_locks WHERE pid = " . $w->pid . " AND path = '$path'";
		my $v = '';
		# (psql, not safe_psql: before 0.3 the column is missing, a failure)
		wait_until(sub { (undef, $v) = $na->psql('postgres', $q); $v //= ''; $v ne '' }, 10,
			"waits_for of $path");
		return $v;
	};
	my $release_wait = sub {
		my ($path) = @_;
		my $r = $w->result(20);
		is($r->{out}, 't', "the waiter gets $path") or diag($r->{err});
		$w->value("SELECT zk_mutex_release('$path')");
	};

	my $hl = session($na, 'wf_local');
	$hl->value(q{SELECT zk_mutex_acquire('/t601/wf1')});
	$w->start(q{SELECT zk_mutex_acquire('/t601/wf1', '20s')});
	ok(wait_waiting($na, $w->pid, '/t601/wf1'), 'waits behind a holder of its cluster');
	is($waits_for->('/t601/wf1'), 'pid ' . $hl->pid, 'waits_for: pid N of the local holder');
	$hl->value(q{SELECT zk_mutex_release('/t601/wf1')});
	$release_wait->('/t601/wf1');

	my $hb = session($nb, 'wf_other');
	$hb->value(q{SELECT zk_mutex_acquire('/t601/wf2')});
	$w->start(q{SELECT zk_mutex_acquire('/t601/wf2', '20s')});
	ok(wait_waiting($na, $w->pid, '/t601/wf2'), 'waits behind a holder of the other cluster');
	is($waits_for->('/t601/wf2'), 'pid ' . $hb->pid . ' of cluster cluster_b',
		'waits_for: pid N of cluster X, from the holder\'s node');
	$hb->value(q{SELECT zk_mutex_release('/t601/wf2')});
	$release_wait->('/t601/wf2');

	$peer->acquire('wf', '/t601/wf3', 5000);
	is($peer->acquire_result('wf', 10), 'acquired', 'a Curator client holds /t601/wf3');
	my ($holder) = @{ $peer->participants('/t601/wf3') };
	my $id = $peer->get($holder);
	$w->start(q{SELECT zk_mutex_acquire('/t601/wf3', '20s')});
	ok(wait_waiting($na, $w->pid, '/t601/wf3'), 'waits behind the Curator client');
	is($waits_for->('/t601/wf3'), $id, "waits_for: the Curator participant id ($id)");
	$peer->release('wf');
	$release_wait->('/t601/wf3');
	ok(no_records(), 'no wait record is left');
	$_->quit for ($w, $hl, $hb);
};

$peer->quit;
$na->stop;
$nb->stop;
stop_zk($zk);
done_testing();

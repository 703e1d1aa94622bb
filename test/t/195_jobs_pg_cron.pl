
# 195_jobs_pg_cron: jobs coordinated across clusters, scheduled by pg_cron.
#
# What users rely on: doc/jobs.md, "Coordinating jobs across clusters",
# gives stored procedures a DBA copies.
# This test runs them as written there (it reads their CREATE statements
# from that section), on two PostgreSQL clusters with zklock and pg_cron
# preloaded, on one ZooKeeper:
#   - run_once_per_period (mutex + counter claim): both clusters fire the
#     same CALL about every second with a period of 8 s, over about nine
#     periods; from both clusters' job_runs tables together, every period
#     ran exactly once and no two runs overlapped in time.  Twice, the
#     cluster running the job loses its lock mid-run: its zklock worker is
#     stopped (SIGSTOP) past the session timeout, and later its ZooKeeper
#     session is expired from outside; the other cluster runs that period
#     and the lost run commits nothing (its CALL fails);
#   - run_as_leader (leader election + counter claim): the same scenario
#     with both clusters and a Curator LeaderLatch in one election; the
#     Curator participant, when it leads, claims periods too (with
#     DistributedAtomicLong.compareAndSet); its runs count with the
#     clusters' runs;
#   - run_limited (semaphore of 2 leases): 6 jobs on two clusters at once,
#     never more than 2 running;
#   - run_in_phases (double barrier): no cluster starts phase 2 before
#     every cluster finished phase 1.
# Scheduling: with pg_cron 1.5 or later (Debian 13: 1.6.5) both clusters
# schedule the CALL with cron.schedule('1 seconds').  pg_cron 1.4 (Debian
# 12: 1.4.2) has minute schedules only: there both clusters schedule it
# every minute with cron.schedule (and the test waits until pg_cron ran it
# on each cluster), while a loop here fires the same CALL on each cluster
# about every second, one at a time per cluster as pg_cron does; the test
# says which it does.  Every CALL, the loop's and pg_cron's, either
# succeeds or fails while a fault is on its cluster.
#
# Without the fencing of counter writes (a backend whose lock was lost
# cannot write a counter): the expired run woke from its work after the
# other cluster had taken the lock, claimed the period through the
# worker's new session, and then failed at COMMIT (40000); the other
# cluster's claim then failed, so that period never ran (seen at 9d9a611).
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use ZklockTest;
use ZklockFault;

my $PERIOD = 8;        # seconds: the job's period
my $WORK = 5;          # seconds: one run's work (pg_sleep); a session
                       # expiry from outside lands within it ($expirer)
my $MAX_WAIT = 30;     # seconds: a run waits this long for another's lock
my $STALL = 6;         # seconds the worker stays stopped (session: 4 s)
# The two ways of running a job once per period, each its own job name:
# the mutex with a counter claim, and the leader election with a claim
# (with a Curator LeaderLatch in the same election).
my %VARIANT = (
	mutex => {
		fresh => '',
		job => 'nightly',
		call => "CALL run_once_per_period('nightly', '$PERIOD s', '$MAX_WAIT s', '$WORK s')",
		proc => 'run_once_per_period',
	},
	leader => {
		job => 'elected',
		call => "CALL run_as_leader('elected', '$PERIOD s', '$WORK s')",
		proc => 'run_as_leader',
		# a leader's run starts its work as its CALL starts: take one
		# early in its work, so that the fault lands before its claim (a
		# second try could find no cluster leading: the Curator member
		# may lead by then)
		fresh => "AND clock_timestamp() - a.query_start < interval '1 s'",
	},
);
my $V = $VARIANT{mutex};    # the variant being run
my $CALL = $V->{call};

my $zk = start_zk();
# closes a cluster's session from outside at once (a JVM that starts
# takes 2-5 s on a loaded 2-core machine, so the expiry could land at the
# run's claim instead of in its work)
my $expirer = new_peer($zk);
my $conf = qq{zklock.session_timeout = '4s'
zklock.connect_timeout = '2s'
};
my %node;
$node{$_} = new_zklock_node("jobs$_", $zk, $conf, pg_cron => 1) for ('A', 'B');
my @clusters = ('A', 'B');
sub other { return $_[0] eq 'A' ? 'B' : 'A'; }

# The procedures and tables, from doc/jobs.md, the jobs section: every
# ```sql block of the section that starts with CREATE.
sub jobs_sql
{
	for my $f ("$ZklockTest::REPO/doc/jobs.md")
	{
		next unless -f $f;
		my $text = slurp_file($f);
		next unless $text =~ /^(#+) Coordinating jobs across clusters\n/m;
		my $level = length $1;
		my ($sec) = $text =~ /^#{$level} Coordinating jobs across clusters\n(.*?)(?=^#{1,$level} |\z)/ms;
		my @defs = grep { /^CREATE /s } ($sec =~ /^```sql\n(.*?)^```/msg);
		return (join("\n", @defs), $f) if @defs;
	}
	die "no section \"Coordinating jobs across clusters\" with CREATE statements in doc/jobs.md\n";
}
my ($sql, $from) = jobs_sql();
note("the procedures, as $from gives them");
$node{$_}->safe_psql('postgres', $sql) for @clusters;
require_functions($node{A}, qw(run_once_per_period run_as_leader run_limited run_in_phases));

# pg_cron's version decides how the job is fired.
my $cron_version = $node{A}->safe_psql('postgres',
	q{SELECT extversion FROM pg_extension WHERE extname = 'pg_cron'});
my ($cmaj, $cmin) = $cron_version =~ /^(\d+)\.(\d+)/ or die "pg_cron version '$cron_version'";
my $seconds = $cmaj > 1 || ($cmaj == 1 && $cmin >= 5);
my $schedule = $seconds ? '1 seconds' : '* * * * *';
if ($seconds)
{
	note("pg_cron $cron_version has second schedules: pg_cron fires '$CALL' every second on both clusters");
}
else
{
	note("pg_cron $cron_version schedules in minutes only: pg_cron fires '$CALL' every minute on both "
		  . "clusters, and a loop in this test fires the same CALL on each cluster about every second");
}

# Perl's time() and PostgreSQL's clock are the same clock of this machine.
my $t_sched;
my %jobid;

# schedule(): both clusters schedule the variant's CALL with pg_cron.
sub schedule
{
	$t_sched = time;
	for my $c (@clusters)
	{
		$jobid{$c} = $node{$c}->safe_psql('postgres', "SELECT cron.schedule('$V->{job}', '$schedule', \$\$$CALL\$\$)");
		like($jobid{$c}, qr/^\d+$/, "cluster $c: cron.schedule('$V->{job}', '$schedule', ...) gives job $jobid{$c}");
	}
	return;
}

# zktool (expire) compiles once, now, not in the middle of a run
ok(defined zk_tree($zk, '/'), 'ZkTool is ready');

############################################################################
# The loop (pg_cron 1.4): one session per cluster fires the CALL whenever
# it is idle and a second has passed since its last start.  Every CALL of
# the loop is recorded: cluster, pid, start, end, SQLSTATE.
############################################################################
my %loop;
my @loop_calls;
my $driving = 0;
if (!$seconds)
{
	$loop{$_} = { sess => ZklockTest::Session->new($node{$_}, "loop$_"), busy => 0, next => 0 } for @clusters;
}

# tick(): one pass of the loop: collect what ended, fire what is due.
sub tick
{
	for my $c (sort keys %loop)
	{
		my $l = $loop{$c};
		if ($l->{busy})
		{
			next unless $l->{sess}->done;
			my $r = quietly(sub { $l->{sess}->result(5) });
			my $call = $l->{call};
			$call->{end} = time;
			$call->{sqlstate} = $r->{done} ? ($r->{sqlstate} // '') : 'HANG!';
			$call->{err} = $r->{err};
			$l->{busy} = 0;
		}
		next unless $driving && time >= $l->{next};
		my $call = { cluster => $c, pid => $l->{sess}->pid, start => time };
		push @loop_calls, $call;
		$l->{call} = $call;
		$l->{busy} = 1;
		$l->{next} = time + 1;
		quietly(sub { $l->{sess}->start($CALL) });
	}
	curator_tick();
	return;
}

# The Curator participant of the leader variant: a Java service in the same
# election that, while its LeaderLatch leads, claims each new period with
# DistributedAtomicLong.compareAndSet (its run is the claim).
my $peer;
my @curator_runs;       # [period, 'curator', start, end]
my $curator_next = 0;

sub curator_tick
{
	return unless $V->{curator} && $driving && time >= $curator_next;
	$curator_next = time + 0.5;
	my $last_path = "/jobs/$V->{job}/last";
	my $h = quietly(sub { $peer->cmd('latch_has jc', qr/^latchhas jc /, 5) }) // '';
	return unless $h eq 'latchhas jc true';
	my $period = int(time / $PERIOD);
	my $l = quietly(sub { $peer->cmd("long_get $last_path", qr/^long \Q$last_path\E /, 5) }) // '';
	return unless $l =~ / true (-?\d+)$/ && $1 > 0 && $1 < $period;
	my ($last, $t) = ($1, time);
	$period = $last + 1;    # the oldest period not run yet, as run_as_leader
	my $r = quietly(sub { $peer->cmd("long_cas $last_path $last $period", qr/^longcas /, 5) }) // '';
	push @curator_runs, [ $period, 'curator', $t, time ] if $r =~ / true$/;
	return;
}

# wait_ticking($cond, $timeout, $what): wait_until that keeps the loop going.
sub wait_ticking
{
	my ($cond, $timeout, $what) = @_;
	return wait_until(sub { tick(); $cond->() }, $timeout, $what);
}

# pause($secs): let the schedules run for a while (a phase of the
# scenario, polling nothing).
sub pause
{
	my ($secs) = @_;
	my $end = time + $secs;
	while (time < $end)
	{
		tick();
		usleep(50_000);
	}
	return;
}

# runs_of($c): { period => [cluster, started, finished] } of cluster $c's job_runs.
sub runs_of
{
	my ($c) = @_;
	my %r;
	for my $line (split /\n/, $node{$c}->safe_psql('postgres',
		qq{SELECT period, cluster, extract(epoch FROM started), extract(epoch FROM finished)
		  FROM job_runs WHERE job = '$V->{job}' ORDER BY period}))
	{
		my ($p, @rest) = split /\|/, $line;
		push @{ $r{$p} }, \@rest;
	}
	return \%r;
}

# The faults: [cluster, kind, start, end] (end: the cluster is connected again).
my @faults;

# find_runner(): (cluster, pid, period) of a run of the nightly job inside
# its work (holding the lock, in pg_sleep), or () when none is.  Only a run
# that is its cluster's one running CALL of the job counts: where pg_cron
# fires while the loop's CALL runs (minute schedules), a second run of the
# same cluster works on the same period, and the one not faulted may claim
# it before the fault lands, legitimately, which would read as the
# faulted run's row (seen on Debian 12: the loop's run claimed the period
# 0.2 s after pg_cron's run was picked, while the session was being
# closed, and then pg_cron's run failed as it should).
sub find_runner
{
	for my $c (@clusters)
	{
		# the period it runs: the oldest one not claimed yet (only the
		# runner moves the counter, and it has not yet)
		my $out = $node{$c}->safe_psql('postgres', qq{
			SELECT a.pid, zk_atomic_long_get('/jobs/$V->{job}/last') + 1
			FROM pg_stat_activity a
			WHERE a.query LIKE 'CALL $V->{proc}(%' AND a.wait_event = 'PgSleep'
			  AND a.pid <> pg_backend_pid() $V->{fresh}
			  AND (SELECT count(*) FROM pg_stat_activity b
			       WHERE b.query LIKE 'CALL $V->{proc}(%' AND b.state = 'active'
			         AND b.pid <> pg_backend_pid()) = 1});
		return ($c, split(/\|/, $out)) if $out =~ /^\d+\|\d+$/;
	}
	return ();
}

# in_work($c, $pid): the run of $pid still sleeps in its work.
sub in_work
{
	my ($c, $pid) = @_;
	return $node{$c}->safe_psql('postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE pid = $pid AND wait_event = 'PgSleep'") eq '1';
}

# The outcome of the CALL run by $pid on $c, once it ended: 'ok' or its
# error (loop: SQLSTATE; pg_cron: 'failed: message').  undef while it runs.
sub call_outcome
{
	my ($c, $pid, $t_after) = @_;
	for my $call (@loop_calls)
	{
		next unless $call->{cluster} eq $c && $call->{pid} == $pid && $call->{start} <= $t_after;
		next if defined $call->{end} && $call->{end} < $t_after;
		return undef unless defined $call->{end};
		return $call->{sqlstate} eq '' ? 'ok' : $call->{sqlstate};
	}
	my $out = $node{$c}->safe_psql('postgres',
		"SELECT status || coalesce(': ' || translate(return_message, E'\n', ' '), '') FROM cron.job_run_details WHERE job_pid = $pid ORDER BY runid DESC LIMIT 1");
	return undef unless $out =~ /^(succeeded|failed)/;
	return $1 eq 'succeeded' ? 'ok' : $out;
}

# lost_run($kind): find a run in its work, make its cluster lose the lock
# ($kind 'stall': SIGSTOP its worker for $STALL s; 'expire': close its
# ZooKeeper session from outside), and check that the lost run commits
# nothing, its CALL fails, and the other cluster runs that period.  An
# expiry that landed only after the run had committed (the run was no
# longer in its work when the tool returned, and its row is there) is
# tried again on a later run, at most 3 times.
sub lost_run
{
	my ($kind) = @_;
	for my $attempt (1 .. 3)
	{
		my ($c, $pid, $period);
		wait_ticking(sub { ($c, $pid, $period) = find_runner(); defined $c }, 30, 'a run inside its work')
		  or return fail("$kind: no run of the job was seen working");
		my $o = other($c);
		my $t_seen = time;
		my $fault = [ $c, $kind, time, undef ];
		push @faults, $fault;
		my $worker = worker_pid($node{$c});
		if ($kind eq 'stall')
		{
			kill('STOP', $worker) or die "kill STOP $worker: $!";
		}
		else
		{
			my ($id, $pw) = session_file($node{$c});
			like($expirer->cmd("expire $id $pw", qr/^(expired|error expire)/, 30) // 'no answer',
				qr/^expired 0x/, "$kind: cluster ${c}'s session 0x$id closed from outside");
		}
		# still in its work once the fault is in place: its claim and its
		# COMMIT come after the loss
		my $mid = in_work($c, $pid);
		note(sprintf("$kind (attempt $attempt): cluster $c, pid $pid, period $period, %s %.1f s after it was seen working",
				$mid ? 'still in its work' : 'past its work', time - $t_seen));
		if ($kind eq 'stall')
		{
			note("holding the fault for ${STALL}s: cluster ${c}'s worker stopped");
			pause($STALL);
			kill('CONT', $worker);
		}
		wait_ticking(sub { $node{$c}->safe_psql('postgres', 'SELECT state FROM zk_status()') eq 'connected' },
			30, "cluster $c connected again");
		my $outcome;
		wait_ticking(sub { defined($outcome = call_outcome($c, $pid, $fault->[2])) }, 30,
			"the end of the lost run (pid $pid)");
		$fault->[3] = time;
		my $committed = exists runs_of($c)->{$period};
		if (!$mid && $committed)
		{
			note("$kind: the run committed before the fault landed ($outcome); trying on a later run");
			if ($V->{curator} && (quietly(sub { $peer->cmd('latch_has jc', qr/^latchhas jc /, 5) }) // '') eq 'latchhas jc true')
			{
				# the cluster's lost session put the Curator member first:
				# it leaves and joins again at the back, so a cluster leads
				note('the Curator member leads: it closes its latch and starts it again');
				$peer->cmd('latch_close jc', qr/^latch jc closed/);
				$peer->cmd("latch_start jc /jobs/$V->{job}/leader java-job", qr/^latch jc started/);
			}
			next;
		}
		ok(!$committed, "$kind: the lost run of cluster $c committed no row");
		ok(wait_ticking(sub { exists runs_of($o)->{$period} || grep { $_->[0] == $period } @curator_runs },
				30, "another participant to run period $period"),
			"$kind: period $period is run in place of cluster $c, by "
			  . (exists runs_of($o)->{$period} ? "cluster $o" : 'the Curator participant'))
		  or diag("$kind: the lost run's CALL ended with $outcome; the claimed counter is "
			  . $node{$o}->safe_psql('postgres', "SELECT zk_atomic_long_get('/jobs/$V->{job}/last')")
			  . "; runs: " . explain({ A => runs_of('A'), B => runs_of('B'), curator => \@curator_runs }));
		ok(defined $outcome && $outcome ne 'ok', "$kind: the lost run's CALL failed: " . ($outcome // 'still running'));
		return 1;
	}
	return fail("$kind: the fault never landed before a run's commit in 3 attempts");
}

# once_per_period(): the scenario of the variant $V: schedule it on both
# clusters, two faults on the cluster running it, then check the runs.
sub once_per_period
{
	$CALL = $V->{call};
	schedule();
	$driving = 1;
	my $t0 = time;
	pause(2 * $PERIOD);
	lost_run('stall');
	pause(2 * $PERIOD);
	lost_run('expire');
	pause(2 * $PERIOD);

	# pg_cron 1.4 fires every minute: wait (while the loop goes on) until
	# it has fired on both clusters
	if (!$seconds)
	{
		for my $c (@clusters)
		{
			ok(wait_ticking(sub { $node{$c}->safe_psql('postgres',
					"SELECT count(*) > 0 FROM cron.job_run_details WHERE jobid = $jobid{$c} AND end_time IS NOT NULL") eq 't' },
					$t_sched + 75 - time, "pg_cron to run the job on $c"),
				"cluster $c: pg_cron ran the job (minute schedule)");
		}
	}

	# stop firing, and let the last runs end (pg_cron cancels a run of a
	# job it no longer has: "job canceled")
	my $t_unsched = time;
	$node{$_}->safe_psql('postgres', "SELECT cron.unschedule($jobid{$_})") for @clusters;
	$driving = 0;
	for my $c (@clusters)
	{
		ok(wait_ticking(sub { !$loop{$c} || !$loop{$c}{busy} }, 60, "the loop of $c to end"), "cluster $c: the loop's last CALL ended") if $loop{$c};
		ok(wait_ticking(sub { $node{$c}->safe_psql('postgres',
				qq{SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'CALL $V->{proc}%' AND state <> 'idle' AND pid <> pg_backend_pid()}) eq '0' },
				60, "no CALL running on $c"), "cluster $c: no run of the job left");
	}

	# the runs of both clusters together
	my (%all, @runs);
	for my $c (@clusters)
	{
		my $r = runs_of($c);
		for my $p (keys %$r)
		{
			push @{ $all{$p} }, @{ $r->{$p} };
			push @runs, map { [ $p, @$_ ] } @{ $r->{$p} };
		}
	}
	for my $r (@curator_runs)
	{
		push @{ $all{ $r->[0] } }, [ @$r[ 1 .. 3 ] ];
		push @runs, [@$r];
	}
	my @periods = sort { $a <=> $b } keys %all;
	my ($first, $last) = ($periods[0], $periods[-1]);
	cmp_ok(scalar @periods, '>=', 8, 'at least 8 periods ran (' . scalar(@periods) . ')');
	my @bad = grep { @{ $all{$_} // [] } != 1 } ($first .. $last);
	is_deeply(\@bad, [], "every period from $first to $last ran exactly once, on one cluster")
	  or diag(explain \%all);
	@runs = sort { $a->[2] <=> $b->[2] } @runs;
	my @overlaps = grep { $runs[ $_ - 1 ][3] >= $runs[$_][2] } (1 .. $#runs);
	is(scalar @overlaps, 0, 'no two runs overlap in time')
	  or diag(explain [ map { [ $runs[ $_ - 1 ], $runs[$_] ] } @overlaps ]);
	my %by = map { my $c = $_; $c => scalar grep { $_->[1] eq "jobs$c" } @runs } @clusters;
	note("runs: cluster A $by{A}, cluster B $by{B}, Curator " . scalar(@curator_runs));

	# every CALL, the loop's and pg_cron's, succeeded, or failed while a
	# fault was on its cluster
	my $explained = sub {
		my ($c, $s, $e) = @_;
		return scalar grep { $_->[0] eq $c && $s <= $_->[3] && $e >= $_->[2] } @faults;
	};
	my @unexplained;
	for my $call (@loop_calls)
	{
		next if $call->{sqlstate} eq '';
		push @unexplained, "loop $call->{cluster}: $call->{sqlstate} $call->{err}"
		  unless $explained->($call->{cluster}, $call->{start}, $call->{end});
	}
	my $cron_calls = 0;
	for my $c (@clusters)
	{
		for my $line (split /\n/, $node{$c}->safe_psql('postgres', qq{
			SELECT extract(epoch FROM start_time), extract(epoch FROM coalesce(end_time, now())), status, translate(coalesce(return_message, ''), E'\n', ' ')
			FROM cron.job_run_details WHERE jobid = $jobid{$c}}))
		{
			my ($s, $e, $status, $msg) = split /\|/, $line, 4;
			$cron_calls++;
			next if $status eq 'succeeded';
			next if $msg =~ /^job canceled/ && $e >= $t_unsched - 1;    # our unschedule
			push @unexplained, "pg_cron $c: $status $msg" unless $explained->($c, $s, $e);
		}
	}
	note(scalar(@loop_calls) . " CALLs by the loop, $cron_calls by pg_cron");
	cmp_ok($cron_calls, '>', 0, 'pg_cron fired the job');
	is_deeply(\@unexplained, [], 'every CALL succeeded or failed during a fault on its cluster');
	note(sprintf('the %s variant took %.0f s', $V->{job}, time - $t0));
	return;
}

subtest 'once per period with a mutex and a claim: every period runs exactly once, never overlapping, also when the runner loses its lock mid-run' => sub {
	$V = $VARIANT{mutex};
	once_per_period();
};

subtest 'once per period as the leader, with a Curator LeaderLatch in the election: exactly once, never overlapping, also when the leader loses its session mid-run' => sub {
	$V = $VARIANT{leader};
	$V->{curator} = 1;
	my $election = "/jobs/$V->{job}/leader";
	# the clusters join first (as the procedure would), then the Java service
	for my $c (@clusters)
	{
		is($node{$c}->safe_psql('postgres', "SELECT zk_leader_join('$election', scope => 'cluster')"), 't',
			"cluster $c joins the election");
	}
	$peer = new_peer($zk);
	$peer->cmd("latch_start jc $election java-job", qr/^latch jc started/);
	ok(wait_until(sub { $node{A}->safe_psql('postgres',
			"SELECT count(*) FROM zk_participants('$election') WHERE kind = 'latch'") eq '3' }, 10),
		'three members: two clusters and the Curator LeaderLatch');
	like($peer->cmd('latch_leader jc', qr/^latchleader jc /), qr{/jobsA$},
		"Curator's getLeader names cluster A (joined first)");
	like($node{B}->safe_psql('postgres', "SELECT zk_leader('$election')"), qr{/jobsA$},
		"cluster B's zk_leader names cluster A");
	once_per_period();
	$peer->cmd('latch_close jc', qr/^latch jc closed/);
	$node{$_}->safe_psql('postgres', "SELECT zk_leader_leave('$election')") for @clusters;
};

subtest 'at most 2 jobs at once across the clusters (semaphore)' => sub {
	my @s;
	for my $c (@clusters)
	{
		push @s, ZklockTest::Session->new($node{$c}, "limited$c$_") for (1 .. 3);
	}
	$_->start(q{CALL run_limited('limited', '/jobs/heavy', 2, '60 s', '1 s')}) for @s;
	for my $s (@s)
	{
		my $r = $s->result(60);
		ok($r->{done} && $r->{err} eq '', $s->name . "'s CALL ran") or diag(explain $r);
		$s->quit;
	}
	my @ev;
	my $n = 0;
	for my $c (@clusters)
	{
		for my $line (split /\n/, $node{$c}->safe_psql('postgres',
			q{SELECT extract(epoch FROM started), extract(epoch FROM finished) FROM job_slots WHERE job = 'limited'}))
		{
			my ($s, $e) = split /\|/, $line;
			push @ev, [ $s, 1 ], [ $e, -1 ];
			$n++;
		}
	}
	is($n, 6, 'six jobs ran, from both clusters');
	# a job counts as running at both ends of its interval
	my ($now, $peak) = (0, 0);
	for my $e (sort { $a->[0] <=> $b->[0] || $b->[1] <=> $a->[1] } @ev)
	{
		$now += $e->[1];
		$peak = $now if $now > $peak;
	}
	is($peak, 2, 'never more than 2 jobs ran at once, and 2 did');
};

subtest 'phases: every cluster finishes phase 1 before any starts phase 2 (double barrier)' => sub {
	my %s = map { $_ => ZklockTest::Session->new($node{$_}, "phases$_") } @clusters;
	$s{A}->start(q{CALL run_in_phases('phases', 2, '60 s', '0.2 s')});
	$s{B}->start(q{CALL run_in_phases('phases', 2, '60 s', '2 s')});
	for my $c (@clusters)
	{
		my $r = $s{$c}->result(60);
		ok($r->{done} && $r->{err} eq '', "cluster ${c}'s CALL ran") or diag(explain $r);
		$s{$c}->quit;
	}
	my %ph;
	for my $c (@clusters)
	{
		for my $line (split /\n/, $node{$c}->safe_psql('postgres',
			q{SELECT phase, extract(epoch FROM started), extract(epoch FROM finished) FROM job_phases WHERE job = 'phases'}))
		{
			my ($p, $s, $e) = split /\|/, $line;
			push @{ $ph{$p} }, [ $c, $s, $e ];
		}
	}
	is(scalar @{ $ph{1} // [] }, 2, 'both clusters ran phase 1');
	is(scalar @{ $ph{2} // [] }, 2, 'both clusters ran phase 2');
	my ($end1) = sort { $b <=> $a } map { $_->[2] } @{ $ph{1} // [] };
	my ($start2) = sort { $a <=> $b } map { $_->[1] } @{ $ph{2} // [] };
	ok(defined $end1 && defined $start2 && $end1 < $start2,
		sprintf('the last phase 1 ended before the first phase 2 started (%.3f s before)', ($start2 // 0) - ($end1 // 0)));
	my $tree = zk_tree($zk, '/jobs');
	ok(defined $tree, 'ZooKeeper lists /jobs');
	is_deeply([ grep { m{^/jobs/phases/phases/} } @{ $tree // [] } ], [], 'the barrier left no node under /jobs/phases/phases');
};

$loop{$_}{sess}->quit for keys %loop;
$node{$_}->stop for @clusters;
done_testing();

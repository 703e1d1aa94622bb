
# 900_checker_jepsen: mutual exclusion checked over a history, under a schedule
# of faults (in the style of Jepsen).
#
# What users rely on: SQL sessions of two PostgreSQL clusters and two Java
# services using Apache Curator contend for ONE mutex path and for ONE
# semaphore of 3 leases, while the network, the zklock worker, ZooKeeper and
# PostgreSQL fail one after the other.  Whatever fails:
#   - no two mutex critical sections overlap in time, SQL (of a COMMITTED
#     transaction) and Curator together;
#   - fencing tokens (zk_lock_token / the czxid of the holder's own lock
#     node), in order of entering the section, strictly increase;
#   - at no instant are more than 3 semaphore sections open;
#   - a transaction whose COMMIT zklock refused (40000) left nothing behind;
#   - every kind of client keeps making progress once each fault healed.
#
# The nemesis, one fault at a time while the clients run (each fault is
# asserted to have really happened):
#   1. the connection of cluster A's zklock worker to ZooKeeper becomes a
#      black hole (all of A's proxies) for longer than the session timeout;
#   2. cluster B's zklock worker is stopped (SIGSTOP) for longer than the
#      session timeout, then continued;
#      both start while a long section of the cluster holds the mutex and
#      another one a lease; ZooKeeper expires the session and gives both to
#      others while those sections still run, and their COMMIT must be
#      refused (the stalled cluster's ones COMMIT during the stall, where
#      only the backend's own lease check can refuse them);
#   3. the leader of the 3-server ZooKeeper ensemble is killed (SIGKILL); it
#      is started again once a new leader serves;
#   4. a rolling restart of the ensemble: each server in turn is stopped
#      (SIGTERM) and started again, followers first, the leader last;
#   5. a backend of cluster A that holds the mutex is killed with SIGKILL.
#      Chosen over pg_terminate_backend because it is the harder case: the
#      backend runs no exit code, the postmaster crash-restarts the whole
#      cluster (every other client of A dies mid-transaction too), shared
#      memory with the lease and the lock table is rebuilt, and the new
#      worker must close the previous ZooKeeper session so the dead holder's
#      node does not block everyone until the session times out;
#   6. the follower cluster A's worker is connected to (A's proxies to the
#      other servers, and everybody else's to this one, refuse connections
#      meanwhile) is cut off from the other two servers while its clients
#      keep their link to it (issue 18): it answers reads and pings from
#      its stale state for syncLimit x tickTime (10 s), while the leader
#      expires A's session after the session timeout and gives A's mutex
#      and lease to others.  It starts while long sections of A hold the
#      mutex and a lease and A's other clients pause (the follower answers
#      a session only while none of its writes waits for the leader: an
#      idle holder is the case that matters); the long sections end (and
#      COMMIT) inside the stale window, after others took over, and their
#      COMMIT must be refused;
#   7. a minority partition: the leader is cut off from both followers (all
#      clients keep their links); the followers elect a new leader, the old
#      one steps down, and rejoins as a follower once healed.
#
# The history.  Every holder records (client, fencing token, enter, exit)
# from its own clock: PostgreSQL's clock_timestamp() and Java's
# Instant.now(), both CLOCK_REALTIME of this one machine, in microseconds
# since the epoch, so the two are comparable.  enter is taken right after
# the acquire returned, exit right before the section ends (before COMMIT
# for SQL, before release for Curator).  A SQL section is one transaction:
#   BEGIN; SELECT chk_section(...); COMMIT;
# chk_section acquires with the _xact functions, does the work and inserts
# its history row, so the row exists iff the COMMIT succeeded: only
# committed sections are checked.  Sections are CLOSED intervals
# [enter, exit]: two sections that share even one microsecond overlap, and
# a semaphore section counts as open at both of its ends.
#
# Settings: zklock.session_timeout 4s, zklock.lease_margin 1s (default),
# zklock.connect_timeout 2s; the clusters reach ZooKeeper through one proxy
# per server each (so one cluster can be cut off alone), and so do the
# Curator peers (session timeout 10 s).  The ensemble: tickTime
# 500 ms (zklock.server_tick_time 500, the harness's setting), syncLimit
# 20; each server runs in a network namespace of its own and the test in
# its own (test/perl/ZklockNet.pm), so that faults 6 and 7 cut only the
# traffic between servers.
use strict;
use warnings;
BEGIN { require ZklockNet; ZklockNet::enter_private_network(); }
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use ZklockTest;
use ZklockFault;
use ZklockProxy;
use ZklockNet;
use ZklockLoad;

my $MUTEX = '/chk/m';
my $SEM = '/chk/s';
my $MAX_LEASES = 3;
my %HOLD_MS = (mutex => 20, semaphore => 50);    # the work of a section
my $FAULT_SECS = 8;         # black hole and stall: session timeout is 4 s
my $HANG_SECS = 20;         # an iteration still running after this is a hang
my $MIN_SECTIONS = 10;      # per kind of client and recipe: not vacuous
my $LOOP_CAP_MS = 300_000;  # Curator loops end by stoploop, at the latest here
my $TICK_MS = 500;          # the ensemble's tickTime (= zklock.server_tick_time)
my $SYNC_LIMIT = 20;        # a follower cut off serves stale reads for 10 s
my $CUT_HOLD = 7.5;         # fault 6: the long sections end ~7 s into the cut
my %EXPECTED_SQLSTATE = (
	'08006' => 'ZooKeeper unreachable, or the session lost while waiting',
	'40000' => 'COMMIT refused: a lock was lost or the lease not valid');

my $t_begin = time;

############################################################################
# Quiet client traffic.  ZklockTest::Session and ::Peer note every statement
# and every reply line; this test runs thousands of them, so while the
# clients run those notes are dropped (the test's own note/diag calls are
# bound to the original at import and still print).  The test prints
# summaries instead, and the full history goes to 900_history.txt in the
# log directory.
############################################################################
# (quietly, from ZklockFault)

############################################################################
# ZooKeeper, proxies, clusters, Curator
############################################################################
my $zk = start_netns_ensemble(tick => $TICK_MS, sync_limit => $SYNC_LIMIT);
my @members = netns_members();
note('ensemble: ' . $zk);

my $conf = qq{zklock.session_timeout = '4s'
zklock.connect_timeout = '2s'
log_min_messages = warning
log_statement = none
restart_after_crash = on
};
my (%node, %proxies);
for my $c ('A', 'B')
{
	$proxies{$c} = [ map { ZklockProxy->start($_->{connect}) } @members ];
	my $hosts = join(',', map { $_->connect } @{ $proxies{$c} });
	$node{$c} = new_zklock_node("chk$c", $hosts, $conf);
	is(status_row($node{$c})->{session_timeout}, '4000', "cluster $c: negotiated session timeout 4 s");
}

my $setup = q{
CREATE TABLE history(recipe text, client text, token bigint, enter_us bigint, exit_us bigint);
CREATE FUNCTION us(t timestamptz) RETURNS bigint LANGUAGE sql
  AS $$ SELECT (extract(epoch FROM t) * 1000000)::bigint $$;
-- One critical section in the caller's transaction: acquire (false/NULL
-- after the wait: 'timeout'), enter, work, exit, history row.  The row
-- commits with the transaction; an error aborts it.  Returns
-- 'ok ENTER_US EXIT_US', so the client knows the times of a section
-- whose COMMIT is then refused.
CREATE FUNCTION chk_section(recipe text, client text, hold float8, wait interval)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  t0 timestamptz;
  t1 timestamptz;
  tok bigint;
BEGIN
  IF recipe = 'mutex' THEN
    IF NOT zk_mutex_acquire_xact('/chk/m', wait) THEN
      RETURN 'timeout';
    END IF;
    t0 := clock_timestamp();
    tok := zk_lock_token('/chk/m');
  ELSE
    IF zk_semaphore_acquire_xact('/chk/s', 3, 1, wait) IS NULL THEN
      RETURN 'timeout';
    END IF;
    t0 := clock_timestamp();
  END IF;
  PERFORM pg_sleep(hold);
  t1 := clock_timestamp();
  INSERT INTO history VALUES (recipe, client, tok, us(t0), us(t1));
  RETURN 'ok ' || us(t0) || ' ' || us(t1);
END $$;
};
$node{$_}->safe_psql('postgres', $setup) for ('A', 'B');

# The Curator peers reach the servers through proxies of their own (pass
# through but in fault 6).
my %peer;
for my $p ('cur1', 'cur2')
{
	$proxies{$p} = [ map { ZklockProxy->start($_->{connect}) } @members ];
	$peer{$p} = new_peer(join(',', map { $_->connect } @{ $proxies{$p} }), $p);
}

############################################################################
# The SQL clients: per cluster 2 sessions on the mutex and 2 on the
# semaphore, each looping over one transaction per iteration, driven from
# here without blocking (round-robin over the sessions).
############################################################################
my @sql;
for my $c ('A', 'B')
{
	for my $recipe ('mutex', 'semaphore')
	{
		for my $k (1, 2)
		{
			push @sql, {
				name => "$c-" . substr($recipe, 0, 1) . $k,
				cluster => $c,
				recipe => $recipe,
				sess => undef,
				retry_at => 0,
			};
		}
	}
}
my %outcome;        # client => { ok, timeout, indeterminate, hang, unexpected, 'acquire 08006', 'commit 40000', ... }
my @refused;        # sections whose COMMIT failed: { recipe, client, who, enter, exit, sqlstate }
my @oplog;          # [ time, client, outcome ] for the history file
my $stopping = 0;   # no new iterations once set
my %paused;         # cluster => 1: its clients start no new iteration (fault 6)

sub iteration_sql
{
	my ($c) = @_;
	my $hold = $HOLD_MS{ $c->{recipe} } / 1000;
	return "BEGIN;\nSELECT chk_section('$c->{recipe}', '$c->{name}', $hold, '2s');\nCOMMIT;";
}

sub record_outcome
{
	my ($c, $what) = @_;
	$outcome{ $c->{name} }{$what}++;
	push @oplog, [ time, $c->{name}, $what ];
	return;
}

# One pass over the SQL clients: collect finished iterations, start new
# ones, reconnect the sessions a crash took away.
sub pump_clients
{
	for my $c (@sql)
	{
		if (!$c->{sess})
		{
			next if $stopping || time < $c->{retry_at};
			my $s = eval { ZklockTest::Session->new($node{ $c->{cluster} }, $c->{name}) };
			if (!$s)
			{
				$c->{retry_at} = time + 0.3;
				next;
			}
			$c->{sess} = $s;
			$c->{reconnects}++ if $c->{started};
			$c->{started} = 1;
		}
		if ($c->{busy})
		{
			if (!$c->{sess}->done)
			{
				if (!$c->{hung} && time - $c->{since} > $HANG_SECS)
				{
					$c->{hung} = 1;
					record_outcome($c, 'hang');
					diag("$c->{name}: an iteration has been running for ${HANG_SECS}s");
				}
				next;
			}
			my $r = $c->{sess}->result(5);
			$c->{busy} = 0;
			if ($r->{dead})
			{
				# the backend died (crash-restart): the outcome is not known
				record_outcome($c, 'indeterminate');
				$c->{sess} = undef;
				$c->{retry_at} = time + 0.3;
				next;
			}
			elsif (defined $r->{sqlstate})
			{
				# 'ok ...' and an error: the section ran, its COMMIT failed
				my ($enter, $exit) = $r->{out} =~ /^ok (\d+) (\d+)$/;
				record_outcome($c, (defined $enter ? 'commit ' : 'acquire ') . $r->{sqlstate});
				push @refused, { recipe => $c->{recipe}, client => $c->{name}, who => $c->{cluster},
					enter => $enter, exit => $exit, token => -1, susp => 0, sqlstate => $r->{sqlstate} }
				  if defined $enter;
				$c->{last_err}{ $r->{sqlstate} } = $r->{err};
			}
			elsif ($r->{out} =~ /^(ok) \d+ \d+$/ || $r->{out} =~ /^(timeout)$/)
			{
				record_outcome($c, $1);
			}
			else
			{
				record_outcome($c, 'unexpected');
				diag("$c->{name}: unexpected result out=[$r->{out}] err=[$r->{err}]");
			}
		}
		next if $stopping || $paused{ $c->{cluster} };
		$c->{sess}->start(iteration_sql($c));
		$c->{busy} = 1;
		$c->{hung} = 0;
		$c->{since} = time;
	}
	return;
}

# drive_for($secs) and drive_until($cond, $timeout, $what) (ZklockLoad)
# run these clients; a condition is evaluated every 0.2 s.
load_driver(pump => \&pump_clients, us => 3_000, every => 0.2);

# all_healthy(): both clusters connected and every server of the ensemble
# serving, one of them the leader.
sub all_healthy
{
	for my $c ('A', 'B')
	{
		my $st = try_status($node{$c}) or return 0;
		return 0 unless $st->{state} eq 'connected';
	}
	my $m = netns_modes();
	return 0 unless (grep { defined $m->{ $_->{id} } } @members) == @members;
	return 0 unless grep { ($m->{ $_->{id} } // '') eq 'leader' } @members;
	return 1;
}

# long_sections($c, $hold, [$recipe, $name], ...): sessions of cluster $c
# that enter sections lasting $hold seconds (all started at once); returns
# once every one of them holds (zk_locks).  Faults 1, 2 and 6 start while
# such sections hold the mutex and a lease, and those sections end after
# ZooKeeper gave their locks to others: their COMMIT must be refused.
# Fault 5 kills one.
my %long;    # name => { s, cluster, recipe, pid, r }
sub long_sections
{
	my ($c, $hold, @which) = @_;
	for my $w (@which)
	{
		my ($recipe, $name) = @$w;
		my $s = ZklockTest::Session->new($node{$c}, $name);
		$long{$name} = { s => $s, cluster => $c, recipe => $recipe, pid => $s->pid };
	}
	for my $w (@which)
	{
		my ($recipe, $name) = @$w;
		$long{$name}{s}->start("BEGIN;\nSELECT chk_section('$recipe', '$name', $hold, '30s');\nCOMMIT;");
	}
	for my $w (@which)
	{
		my ($recipe, $name) = @$w;
		my $pid = $long{$name}{pid};
		my $path = $recipe eq 'mutex' ? $MUTEX : $SEM;
		my $held = drive_until(
			sub {
				$node{$c}->safe_psql('postgres',
					qq{SELECT count(*) > 0 FROM zk_locks WHERE pid = $pid AND path = '$path' AND state = 'held'}) eq 't';
			},
			40, "$name to hold $path");
		ok($held, "$name (backend $pid of cluster $c) holds $path for a ${hold}s section");
	}
	return map { $long{ $_->[1] } } @which;
}

# end_long_section($name, $what): wait (bounded) for the long section's
# transaction to end; asserts that its COMMIT was refused with 40000.
sub end_long_section
{
	my ($name, $what) = @_;
	my $l = $long{$name};
	drive_until(sub { $l->{s}->done }, 30, "$name to end");
	my $r = $l->{r} = $l->{s}->result(1);
	my ($msg) = ($r->{err} // '') =~ /ERROR:\s+\w+:\s+(.*)/;
	is($r->{sqlstate}, '40000', "$what: the COMMIT of $name is refused with 40000 (" . ($msg // 'no error') . ')')
	  or diag("$name: out=[$r->{out}] err=[$r->{err}]");
	if ($r->{out} =~ /^ok (\d+) (\d+)$/)
	{
		push @refused, { recipe => $l->{recipe}, client => $name, who => $l->{cluster},
			enter => $1, exit => $2, token => -1, susp => 0, sqlstate => $r->{sqlstate} // 'none' };
	}
	else
	{
		fail("$name: the section ran to its end (out=[$r->{out}])");
	}
	$l->{s}->quit;
	return;
}

# interrupted($what, \%before): assert that the fault reached both
# clusters: each one's connection was suspended or its session given up
# (zk_status counters since %before).
sub interrupted
{
	my ($what, $before) = @_;
	for my $c ('A', 'B')
	{
		my $st = status_row($node{$c});
		my $was = $before->{$c};
		my $n0 = $was->{suspended_count} + $was->{expired_count};
		my $n1 = $st->{suspended_count} + $st->{expired_count};
		cmp_ok($n1, '>', $n0, "$what: cluster $c lost its connection (suspended $was->{suspended_count} -> "
			  . "$st->{suspended_count}, expired $was->{expired_count} -> $st->{expired_count}; "
			  . "session $was->{session_id} -> $st->{session_id})");
	}
	return;
}

############################################################################
# Run: the clients start, the nemesis goes through its schedule.
############################################################################
# fault_note($what, $detail) (ZklockLoad) keeps the faults: faults().
my ($t0, $t_healed, $t_load_end, $t_victim_kill);

quietly(sub {
	$t0 = time;
	fault_clock($t0);
	for my $p (sort keys %peer)
	{
		$peer{$p}->send("mxloop ${p}m $MUTEX $LOOP_CAP_MS $HOLD_MS{mutex}");
		$peer{$p}->send("semloop ${p}s $SEM $MAX_LEASES $LOOP_CAP_MS $HOLD_MS{semaphore}");
	}
	drive_for(5);

	########################################################################
	# 1. Black hole between cluster A's worker and ZooKeeper.
	########################################################################
	subtest 'fault 1, a black hole between cluster A and ZooKeeper: A\'s lease runs out, its lost sections cannot commit, A reconnects in a new session' => sub {
		my $before = status_row($node{A});
		my $log_off = length(log_contents($node{A}));
		my @st0 = map { $_->stats } @{ $proxies{A} };
		# they end after the path healed, in the new session
		long_sections('A', $FAULT_SECS + 1.5, [ 'mutex', 'A-long-m1' ], [ 'semaphore', 'A-long-s1' ]);
		$_->set_mode('blackhole') for @{ $proxies{A} };
		fault_note('black hole', "cluster A, all 3 proxies, ${FAULT_SECS}s");
		drive_for($FAULT_SECS);
		my @st1 = map { $_->set_mode('pass') } @{ $proxies{A} };
		my $dropped = 0;
		$dropped += $st1[$_]{dropped_c2s} + $st1[$_]{dropped_s2c}
		  - $st0[$_]{dropped_c2s} - $st0[$_]{dropped_s2c} for 0 .. $#st1;
		cmp_ok($dropped, '>', 0, "fault 1: the proxies swallowed $dropped bytes of cluster A's worker");
		my $after = drive_until(sub { connected_in_new_session($node{A}, $before->{session_id}) },
			30, 'cluster A in a new session');
		ok($after, 'fault 1: cluster A reconnected in a new session after the black hole');
		$after ||= status_row($node{A});
		cmp_ok($after->{leases_expired}, '>', $before->{leases_expired},
			"fault 1: cluster A's lease ran out ($before->{leases_expired} -> $after->{leases_expired})");
		cmp_ok($after->{expired_count}, '>', $before->{expired_count},
			"fault 1: cluster A's session counted as expired ($before->{expired_count} -> $after->{expired_count})");
		like(log_since($node{A}, $log_off), qr/lease ran out/, "fault 1: cluster A's log says the lease ran out");
		cmp_ok($after->{locks_lost}, '>=', $before->{locks_lost} + 2,
			"fault 1: cluster A counted its long sections' locks lost ($before->{locks_lost} -> $after->{locks_lost})");
		note("cluster A: session $before->{session_id} -> $after->{session_id}");
		end_long_section($_, 'fault 1') for ('A-long-m1', 'A-long-s1');
	};
	healthy(\&all_healthy, 30, 'everything healthy', 'healthy again after fault 1');
	drive_for(3);

	########################################################################
	# 2. Cluster B's worker stalls (SIGSTOP) longer than the session timeout.
	########################################################################
	subtest 'fault 2, cluster B\'s worker stalled past the session timeout: B\'s lease runs out, its lost sections cannot commit, B reconnects in a new session' => sub {
		my $before = status_row($node{B});
		my $log_off = length(log_contents($node{B}));
		my $wpid = worker_pid($node{B});
		# they end (and COMMIT) during the stall, after the lease ran out
		long_sections('B', $FAULT_SECS - 1, [ 'mutex', 'B-long-m1' ], [ 'semaphore', 'B-long-s1' ]);
		kill 'STOP', $wpid;
		fault_note('worker stall', "cluster B, worker pid $wpid stopped for ${FAULT_SECS}s");
		my $state;
		drive_until(sub { $state = (split ' ', (slurp_file("/proc/$wpid/stat") =~ s/^.*\)\s*//sr))[0]; $state eq 'T' },
			5, 'the worker to stop');
		is($state, 'T', "fault 2: cluster B's worker (pid $wpid) is stopped");
		drive_for($FAULT_SECS);
		my @stalled_commit = map { $long{$_}{s}->done } ('B-long-m1', 'B-long-s1');
		kill 'CONT', $wpid;
		is("@stalled_commit", '1 1', 'fault 2: the long sections of cluster B ended during the stall');
		my $after = drive_until(sub { connected_in_new_session($node{B}, $before->{session_id}) },
			30, 'cluster B in a new session');
		ok($after, 'fault 2: cluster B reconnected in a new session after the stall');
		$after ||= status_row($node{B});
		is(worker_pid($node{B}), $wpid, 'fault 2: by the same worker (it was stopped, not restarted)');
		cmp_ok($after->{leases_expired}, '>', $before->{leases_expired},
			"fault 2: cluster B's lease ran out ($before->{leases_expired} -> $after->{leases_expired})");
		cmp_ok($after->{expired_count}, '>', $before->{expired_count},
			"fault 2: cluster B's session counted as expired ($before->{expired_count} -> $after->{expired_count})");
		like(log_since($node{B}, $log_off), qr/lease ran out/, "fault 2: cluster B's log says the lease ran out");
		note("cluster B: session $before->{session_id} -> $after->{session_id}, "
			  . "locks lost $before->{locks_lost} -> $after->{locks_lost}");
		end_long_section($_, 'fault 2') for ('B-long-m1', 'B-long-s1');
	};
	healthy(\&all_healthy, 30, 'everything healthy', 'healthy again after fault 2');
	drive_for(3);

	########################################################################
	# 3. The ZooKeeper leader is killed, and started again later.
	########################################################################
	subtest 'fault 3, the ZooKeeper leader killed: a new leader is elected, the old one serves again' => sub {
		my %before = map { $_ => status_row($node{$_}) } ('A', 'B');
		my $old = netns_leader();
		ok($old, 'fault 3: found the leader: server ' . ($old ? $old->{id} : '?'));
		my $old_pid = $old->{pid};
		kill_netns_member($old, 'KILL');
		my $t_kill = time;
		fault_note('leader kill', "ZooKeeper server $old->{id} (pid $old_pid), SIGKILL");
		ok(!kill(0, $old_pid), "fault 3: the old leader's process $old_pid is gone");
		my $new = drive_until(sub { netns_leader() }, 30, 'a new leader');
		ok($new && $new->{id} != $old->{id},
			'fault 3: a new leader was elected: server ' . ($new ? $new->{id} : '?'));
		note(sprintf('election took %.1f s', time - $t_kill));
		drive_for(4);
		restart_netns_member($old, 0);
		ok(drive_until(sub { defined netns_mode($old) }, 60, "server $old->{id} to serve"),
			"fault 3: the old leader (server $old->{id}) serves again, as "
			  . (netns_mode($old) // '?'));
		healthy(\&all_healthy, 30, 'everything healthy', 'healthy again after fault 3');
		interrupted('fault 3', \%before);
	};
	drive_for(3);

	########################################################################
	# 4. Rolling restart of the ensemble: followers first, the leader last.
	########################################################################
	subtest 'fault 4, a rolling restart of the ensemble: every server serves again' => sub {
		my %before = map { $_ => status_row($node{$_}) } ('A', 'B');
		my $leader = netns_leader();
		my @order = sort { ($a == $leader) <=> ($b == $leader) || $a->{id} <=> $b->{id} } @members;
		fault_note('rolling restart', 'ZooKeeper servers ' . join(', ', map { $_->{id} } @order) . ', SIGTERM then start');
		for my $e (@order)
		{
			my $old_pid = $e->{pid};
			my $was = netns_mode($e) // '?';
			kill_netns_member($e, 'TERM');
			restart_netns_member($e, 0);
			my $ok = drive_until(
				sub { defined netns_mode($e) && netns_leader() },
				60, "server $e->{id} to serve again");
			ok($ok && $e->{pid} != $old_pid,
				"fault 4: server $e->{id} ($was, pid $old_pid) restarted as pid $e->{pid}, serves as "
				  . (netns_mode($e) // '?'));
		}
		healthy(\&all_healthy, 30, 'everything healthy', 'healthy again after fault 4');
		interrupted('fault 4', \%before);
	};
	drive_for(3);

	########################################################################
	# 5. A backend of cluster A that holds the mutex is killed (SIGKILL).
	########################################################################
	subtest 'fault 5, a backend of cluster A holding the mutex killed: a crash-restart, a new session, the victim\'s section not committed' => sub {
		my $before = status_row($node{A});
		my $old_worker = worker_pid($node{A});
		my $log_off = length(log_contents($node{A}));
		# a section that would last 60 s: it is killed while it holds
		my ($victim) = long_sections('A', 60, [ 'mutex', 'A-victim' ]);
		my $vpid = $victim->{pid};
		kill 'KILL', $vpid;
		my $t_kill = time;
		fault_note('backend kill', "cluster A, backend $vpid holding $MUTEX, SIGKILL");
		my $after = drive_until(sub { connected_in_new_session($node{A}, $before->{session_id}) },
			60, 'cluster A back, in a new session');
		ok($after, sprintf('fault 5: cluster A serves again after the crash-restart (%.1f s)', time - $t_kill));
		ok(!kill(0, $vpid), "fault 5: the killed backend $vpid is gone");
		isnt(worker_pid($node{A}), $old_worker, 'fault 5: a new zklock worker runs');
		my $log = log_since($node{A}, $log_off);
		like($log, qr/\(PID $vpid\) was terminated by signal 9/, 'fault 5: the log shows the SIGKILL of the backend');
		like($log, qr/closed the zookeeper session 0x\S+ of this server's previous worker/,
			'fault 5: the new worker closed the previous session');
		note("cluster A's log after the kill:\n"
			  . join("\n", grep { /zklock:|terminated by signal|all server processes terminated|ready to accept/ } split /\n/, $log));
		my $r = $victim->{r} = $victim->{s}->result(10);
		ok($r->{dead}, "fault 5: the victim's client lost its connection without an answer")
		  or diag("victim: out=[$r->{out}] err=[$r->{err}]");
		$victim->{s}->quit;
		$t_victim_kill = $t_kill;
	};
	healthy(\&all_healthy, 30, 'everything healthy', 'healthy again after fault 5');
	drive_for(3);

	########################################################################
	# 6. The follower cluster A's worker is on is cut off from the other
	#    servers; A keeps its link to it (issue 18).
	########################################################################
	subtest 'fault 6, the follower cluster A is on cut off from the other servers: A\'s sections cannot commit once Curator may hold' => sub {
		my ($F) = netns_followers();
		ok($F, 'fault 6: found a follower: server ' . ($F ? $F->{id} : '?'));
		my ($fi) = grep { $members[$_] == $F } 0 .. $#members;
		my @others = grep { $_ != $fi } 0 .. $#members;
		# A's own clients pause: ZooKeeper answers a session's requests in
		# order, so a write of A's in flight (forwarded to a leader it
		# cannot reach) would hold back every later answer of the follower
		# to A and end even an answer-based lease; a session holding locks
		# and otherwise idle is what the stale follower keeps answering
		$paused{A} = 1;
		ok(drive_until(sub { !grep { $_->{cluster} eq 'A' && $_->{busy} } @sql }, 15, "cluster A's clients to pause"),
			"fault 6: cluster A's clients paused");
		# cluster A's worker reaches F only; everybody else is moved off F,
		# so that the waiters next in line are on the majority (a waiter
		# on F would be granted there but never hear of it, and keep the
		# mutex from the others until its own session expired)
		$proxies{A}[$_]->set_mode('cut') for @others;
		$proxies{$_}[$fi]->set_mode('cut') for ('B', 'cur1', 'cur2');
		my $fproxy = $proxies{A}[$fi]->connect;
		my $on_f = drive_until(
			sub {
				my $st = try_status($node{A});
				return $st && $st->{state} eq 'connected' && ($st->{server} // '') eq $fproxy ? $st : 0;
			},
			30, "cluster A on follower $F->{id}");
		ok($on_f, "fault 6: cluster A's worker is connected to follower $F->{id} only (through $fproxy)");
		my $before = $on_f || status_row($node{A});
		# they end (and COMMIT) about 7 s into the cut: after the leader
		# gave their locks to others, while F still answers from its stale
		# state (syncLimit x tickTime = 10 s)
		long_sections('A', $CUT_HOLD, [ 'mutex', 'A-long-m6' ], [ 'semaphore', 'A-long-s6' ]);
		ok(drive_until(sub { my $st = try_status($node{A}); $st && "$st->{requests_queued} $st->{deletes_pending}" eq '0 0' },
				5, "cluster A's worker to have nothing in flight"),
			"fault 6: cluster A's worker has no request queued and no delete pending");
		my $d0 = netns_dropped();
		isolate_member($F);
		my $t_cut = time;
		fault_note('follower cut off', "server $F->{id} (cluster A's server) cut off from the other servers");
		drive_until(sub { !grep { !$long{$_}{s}->done } ('A-long-m6', 'A-long-s6') },
			$CUT_HOLD + 10, 'the long sections of fault 6 to end');
		my $t_ended = time - $t_cut;
		my $mode_then = netns_mode($F) // 'not serving';
		drive_for(8 - (time - $t_cut)) if time - $t_cut < 8;
		heal_member($F);
		$paused{A} = 0;
		$proxies{A}[$_]->set_mode('pass') for @others;
		$proxies{$_}[$fi]->set_mode('pass') for ('B', 'cur1', 'cur2');
		note(sprintf('fault 6: the long sections ended %.1f s into the cut; server %d then said: %s; healed after %.1f s',
				$t_ended, $F->{id}, $mode_then, time - $t_cut));
		cmp_ok(netns_dropped(), '>', $d0, 'fault 6: the cut dropped traffic between the servers');
		is($mode_then, 'follower',
			"fault 6: server $F->{id} still served as a follower when the long sections ended (the stale window)");
		my $after = drive_until(sub { connected_in_new_session($node{A}, $before->{session_id}) },
			40, 'cluster A in a new session');
		ok($after, 'fault 6: cluster A is connected again, in a new session');
		$after ||= status_row($node{A});
		cmp_ok($after->{locks_lost}, '>=', $before->{locks_lost} + 2,
			"fault 6: cluster A counted its long sections' locks lost ($before->{locks_lost} -> $after->{locks_lost})");
		note("cluster A: session $before->{session_id} -> $after->{session_id}");
		end_long_section($_, 'fault 6') for ('A-long-m6', 'A-long-s6');
	};
	healthy(\&all_healthy, 60, 'everything healthy', 'healthy again after fault 6');
	drive_for(3);

	########################################################################
	# 7. A minority partition: the leader is cut off from both followers.
	########################################################################
	subtest 'fault 7, a minority partition around the leader: a new leader on the majority, the old one steps down and serves again after the heal' => sub {
		my %before = map { $_ => status_row($node{$_}) } ('A', 'B');
		my $old = netns_leader();
		ok($old, 'fault 7: found the leader: server ' . ($old ? $old->{id} : '?'));
		my @majority = grep { $_ != $old } @members;
		my $d0 = netns_dropped();
		isolate_member($old);
		my $t_cut = time;
		fault_note('minority partition', "leader (server $old->{id}) cut off from servers "
			  . join(' and ', map { $_->{id} } @majority));
		my $new = drive_until(sub { (grep { (netns_mode($_) // '') eq 'leader' } @majority)[0] },
			40, 'a new leader in the majority');
		ok($new, sprintf('fault 7: the majority elected a new leader: server %s (%.1f s into the partition)',
				$new ? $new->{id} : '?', time - $t_cut));
		ok(drive_until(sub { (netns_mode($old) // '') ne 'leader' }, 20, 'the old leader to step down'),
			"fault 7: the old leader (server $old->{id}) stepped down");
		drive_for(2);
		heal_member($old);
		cmp_ok(netns_dropped(), '>', $d0, 'fault 7: the partition dropped traffic between the servers');
		ok(drive_until(sub { defined netns_mode($old) }, 60, "server $old->{id} to serve"),
			"fault 7: server $old->{id} serves again, as " . (netns_mode($old) // '?'));
		healthy(\&all_healthy, 60, 'everything healthy', 'healthy again after fault 7');
		interrupted('fault 7', \%before);
	};
	$t_healed = time;

	# Load after the last fault: everybody must make progress again.
	drive_for(6);

	# Stop the clients: no new iteration; the running ones end (bounded).
	$stopping = 1;
	$peer{$_}->send("stoploop ${_}m"), $peer{$_}->send("stoploop ${_}s") for sort keys %peer;
	my $drained = drive_until(sub { !grep { $_->{busy} } @sql }, 30, 'the SQL clients to finish');
	ok($drained, 'every SQL iteration finished (no hang)');
	$t_load_end = time;
});
is(scalar(faults()), 7, 'the nemesis injected its 7 faults');

# Curator: events and counts.
my @sections;    # { recipe, client, who, token, enter, exit, susp }
my %cur_done;
subtest 'the Curator loops ran to their end through the ZooKeeper faults' => sub {
	for my $p (sort keys %peer)
	{
		for my $loop ([ 'mxloop', "${p}m", 'mutex' ], [ 'semloop', "${p}s", 'semaphore' ])
		{
			my ($cmd, $id, $recipe) = @$loop;
			my $l = quietly(sub { $peer{$p}->wait_reply(qr/^($cmd|error) \Q$id\E(\s|$)/, 30) });
			ok(defined $l && $l =~ /^\Q$cmd $id\E done /, "Curator $id: the $cmd ran to its end")
			  or diag("Curator $id: " . ($l // 'no reply'));
			$cur_done{$id} = $l // '';
			# faults 3 and 4 drop every client connection of the ensemble
			my ($susp) = ($cur_done{$id} =~ / suspended=(\d+)/);
			cmp_ok($susp // 0, '>', 0, "Curator $id: went through the ZooKeeper faults (suspended " . ($susp // '?') . ' times)')
			  if $cmd eq 'mxloop';
		}
		# the event lines came before the done lines: they are queued
		my @rest;
		for my $e (@{ $peer{$p}{lines} })
		{
			if ($e =~ /^mxev (\S+) (-?\d+) (\d+) (\d+) (\d+)$/)
			{
				push @sections, { recipe => 'mutex', client => $1, who => $p, token => $2,
					enter => $3, exit => $4, susp => $5 };
			}
			elsif ($e =~ /^semev (\S+) (\d+) (\d+) (\d+)$/)
			{
				push @sections, { recipe => 'semaphore', client => $1, who => $p, token => -1,
					enter => $2, exit => $3, susp => $4 };
			}
			else
			{
				push @rest, $e;
			}
		}
		$peer{$p}{lines} = \@rest;
	}
};

# SQL: the committed sections.
my %rows;
for my $c ('A', 'B')
{
	my $out = $node{$c}->safe_psql('postgres',
		q{SELECT recipe, client, coalesce(token, -1), enter_us, exit_us FROM history});
	for (split /\n/, $out)
	{
		my ($recipe, $client, $tok, $enter, $exit) = split /\|/;
		push @sections, { recipe => $recipe, client => $client, who => $c, token => $tok,
			enter => $enter, exit => $exit, susp => 0 };
		$rows{$client}++;
	}
}

############################################################################
# The history file and the counts
############################################################################
{
	my $f = "$PostgreSQL::Test::Utils::log_path/900_history.txt";
	open(my $fh, '>', $f) or die "$f: $!";
	print $fh "# sections: recipe who client token enter_us exit_us suspends\n";
	print $fh join(' ', @$_{qw(recipe who client token enter exit susp)}), "\n"
	  for sort { $a->{enter} <=> $b->{enter} } @sections;
	print $fh "# SQL iterations: epoch client outcome\n";
	printf $fh "%.6f %s %s\n", @$_ for @oplog;
	close $fh;
	note("history written to $f");
}

my %count;    # "who recipe" => sections
$count{"$_->{who} $_->{recipe}"}++ for @sections;
note(sprintf('run: %.0f s of load; faults: %s', $t_load_end - $t0,
		join('; ', map { sprintf('%s at %.1f s (%s)', @$_) } faults())));
for my $who ('A', 'B', 'cur1', 'cur2')
{
	note(sprintf('sections of %-4s: mutex %5d, semaphore %5d', $who,
			$count{"$who mutex"} // 0, $count{"$who semaphore"} // 0));
}
my %by_state;
for my $c (@sql)
{
	my $o = $outcome{ $c->{name} } // {};
	note("SQL client $c->{name}: " . join(' ', map { "$_=$o->{$_}" } sort keys %$o)
		  . ' reconnects=' . ($c->{reconnects} // 0));
	for my $k (keys %$o)
	{
		$by_state{"$c->{cluster} $k"} += $o->{$k} if $k =~ /^(acquire|commit) /;
	}
}
for my $name (sort keys %long)
{
	my $st = $long{$name}{r} ? ($long{$name}{r}{dead} ? 'indeterminate' : $long{$name}{r}{sqlstate} // 'none') : '?';
	$by_state{"$long{$name}{cluster} long section $st"}++;
}
note('failed SQL attempts by SQLSTATE: '
	  . (join(', ', map { "$_: $by_state{$_}" } sort keys %by_state) || 'none'));
note("Curator $_: $cur_done{$_}") for sort keys %cur_done;

############################################################################
# The checker
############################################################################
subtest 'every section has enter <= exit' => sub {
	my @bad_interval = grep { $_->{enter} > $_->{exit} } @sections;
	is(scalar @bad_interval, 0, 'every section has enter <= exit');
};

# Not vacuous: every kind of client did real work on both recipes, and
# again after the last fault healed.
subtest 'not vacuous: every client completed sections of both recipes, also after the last fault healed' => sub {
	my $after_us = int($t_healed * 1e6);
	for my $who ('A', 'B', 'cur1', 'cur2')
	{
		for my $recipe ('mutex', 'semaphore')
		{
			my @mine = grep { $_->{who} eq $who && $_->{recipe} eq $recipe } @sections;
			cmp_ok(scalar @mine, '>=', $MIN_SECTIONS, "$who completed $MIN_SECTIONS or more $recipe sections (" . scalar(@mine) . ')');
			my $late = grep { $_->{enter} > $after_us } @mine;
			cmp_ok($late, '>', 0, "$who completed $recipe sections after the last fault healed ($late)");
		}
	}
};

sub show
{
	my ($s) = @_;
	return sprintf('%s/%s token %s [%d, %d]%s', $s->{who}, $s->{client}, $s->{token},
		$s->{enter}, $s->{exit}, $s->{susp} ? " (Curator saw $s->{susp} connection losses)" : '');
}

sub first_ten
{
	return @_ > 10 ? (@_[ 0 .. 9 ], '... ' . (@_ - 10) . ' more') : @_;
}

# mutex_overlaps(@sections): the overlaps among mutex sections taken as
# closed intervals, as text.
sub mutex_overlaps
{
	my @m = sort { $a->{enter} <=> $b->{enter} || $a->{exit} <=> $b->{exit} } @_;
	my (@overlaps, $latest);
	for my $s (@m)
	{
		push @overlaps, show($s) . ' overlaps ' . show($latest) if $latest && $s->{enter} <= $latest->{exit};
		$latest = $s if !$latest || $s->{exit} > $latest->{exit};
	}
	return @overlaps;
}

# semaphore_most(@sections): (the most semaphore sections open at one
# instant, the instants with more than $MAX_LEASES as text); at equal
# instants an enter counts before an exit (closed intervals).
sub semaphore_most
{
	my @pts = sort { $a->[0] <=> $b->[0] || $b->[1] <=> $a->[1] }
	  map { ([ $_->{enter}, 1, $_ ], [ $_->{exit}, -1, $_ ]) } @_;
	my ($open, $most, @too_many) = (0, 0);
	my %open;
	for my $p (@pts)
	{
		my ($t, $d, $s) = @$p;
		$open += $d;
		if ($d > 0) { $open{$s} = $s; } else { delete $open{$s}; }
		$most = $open if $open > $most;
		push @too_many, "at $t: " . join('; ', map { show($_) } values %open) if $open > $MAX_LEASES;
	}
	return ($most, @too_many);
}

# Mutex: no two sections overlap.
my @m = sort { $a->{enter} <=> $b->{enter} || $a->{exit} <=> $b->{exit} } grep { $_->{recipe} eq 'mutex' } @sections;
subtest 'mutex: no two committed sections overlap, fencing tokens strictly increase' => sub {
	my @overlaps = mutex_overlaps(@m);
	is(scalar @overlaps, 0, 'no two mutex sections overlap (' . scalar(@m) . ' sections, SQL on A and B and Curator)')
	  or diag(join("\n", first_ten(@overlaps)));

	# Fencing tokens strictly increase in order of entering the section.
	my (@tokbad, $prev);
	for my $s (grep { $_->{token} >= 0 } @m)
	{
		push @tokbad, show($s) . ' after ' . show($prev) if $prev && $s->{token} <= $prev->{token};
		$prev = $s;
	}
	my $sql_no_token = grep { $_->{who} =~ /^[AB]$/ && $_->{token} < 0 } @m;
	is($sql_no_token, 0, 'every committed SQL mutex section has its fencing token');
	my $cur_no_token = grep { $_->{who} =~ /^cur/ && $_->{token} < 0 } @m;
	note("Curator mutex sections without a token (the stat of their node failed): $cur_no_token");
	is(scalar @tokbad, 0, 'fencing tokens strictly increase in order of entering the mutex')
	  or diag(join("\n", first_ten(@tokbad)));
};

# Semaphore: never more than $MAX_LEASES open at once.
my @sem = grep { $_->{recipe} eq 'semaphore' } @sections;
subtest 'semaphore: never more than 3 sections open at once' => sub {
	my ($most, @too_many) = semaphore_most(@sem);
	note('semaphore sections: ' . scalar(@sem) . ", most open at once: $most");
	cmp_ok($most, '<=', $MAX_LEASES, "never more than $MAX_LEASES semaphore sections open at once")
	  or diag(join("\n", first_ten(@too_many)));
	cmp_ok($most, '>=', 2, 'the semaphore did have concurrent sections');
};

# SQL bookkeeping: a row exists iff the COMMIT succeeded.  Per client, the
# committed rows are at least the iterations that reported success and at
# most those plus the ones whose outcome died with the backend.
subtest 'a SQL section\'s row is committed iff its COMMIT succeeded; the long sections committed none' => sub {
	for my $c (@sql)
	{
		my $o = $outcome{ $c->{name} } // {};
		my $ok = $o->{ok} // 0;
		my $ind = $o->{indeterminate} // 0;
		my $n = $rows{ $c->{name} } // 0;
		ok($n >= $ok && $n <= $ok + $ind,
			"$c->{name}: $n committed rows for $ok successful iterations ($ind indeterminate)");
	}
	for my $name (sort keys %long)
	{
		is($rows{$name} // 0, 0, "$name left no committed section");
	}
};

# After the SIGKILL of the holder, the mutex went on to others without
# waiting for the old session to time out (the new worker closed it).
{
	my ($next) = sort { $a->{enter} <=> $b->{enter} }
	  grep { $_->{recipe} eq 'mutex' && $_->{who} ne 'A' && $_->{enter} > $t_victim_kill * 1e6 } @sections;
	note(sprintf('after the SIGKILL of its holder, the next mutex section outside cluster A began %.2f s later (%s)',
			($next->{enter} / 1e6) - $t_victim_kill, $next->{client})) if $next;
}

# The faults bit: sections whose COMMIT was refused overlapped committed
# sections of others (had zklock let them commit, the checks above would
# have failed).  For the long mutex sections of faults 1, 2 and 6 this
# must be so: ZooKeeper gave their mutex to others before they ended.
subtest 'the refused long sections were real violations: others held while they ran' => sub {
	my %refused_overlaps;
	for my $x (@refused)
	{
		my @others = grep { $_->{recipe} eq $x->{recipe} && $_->{enter} <= $x->{exit} && $_->{exit} >= $x->{enter} }
		  @sections;
		$refused_overlaps{ $x->{client} } = scalar @others;
		note(sprintf('refused %s section of %s [%d, %d] (%s): %d committed sections of others overlap it',
				$x->{recipe}, $x->{client}, $x->{enter}, $x->{exit}, $x->{sqlstate}, scalar @others));
	}
	for my $name ('A-long-m1', 'B-long-m1', 'A-long-m6')
	{
		cmp_ok($refused_overlaps{$name} // 0, '>', 0,
			"$name: others entered the mutex while it still ran (its lock was really lost)");
	}
	# The same checks, had the refused sections committed: they would fail.
	{
		my @x = grep { $_->{client} =~ /-long-/ } @refused;
		my $n = () = mutex_overlaps(@m, grep { $_->{recipe} eq 'mutex' } @x);
		cmp_ok($n, '>', 0, "the mutex checker flags the refused long sections as violations ($n overlaps)");
		my ($most_x) = semaphore_most(@sem, grep { $_->{recipe} eq 'semaphore' } @x);
		note("with the refused long semaphore sections, most open at once would be $most_x");
	}
};

subtest 'no SQL iteration hung or had an unexpected result; failures carry only the faults\' SQLSTATEs' => sub {
	my (@hangs, @unexpected, @bad_state);
	for my $c (@sql)
	{
		my $o = $outcome{ $c->{name} } // {};
		push @hangs, $c->{name} if $o->{hang};
		push @unexpected, $c->{name} if $o->{unexpected};
		for my $k (sort keys %$o)
		{
			next unless $k =~ /^(acquire|commit) (\S+)$/;
			push @bad_state, "$c->{name}: $k x$o->{$k}: " . ($c->{last_err}{$2} // '')
			  unless $EXPECTED_SQLSTATE{$2};
		}
	}
	is(scalar @hangs, 0, 'no SQL iteration hung') or diag("hung: @hangs");
	is(scalar @unexpected, 0, 'no SQL iteration had an unexpected result') or diag("unexpected: @unexpected");
	is(scalar @bad_state, 0, 'failed SQL attempts carry only the SQLSTATEs of these faults (08006, 40000)')
	  or diag(join("\n", @bad_state));
};

############################################################################
# Clean up
############################################################################
for my $c (@sql)
{
	$c->{sess}->quit if $c->{sess};
}
$_->quit for values %peer;
$node{$_}->stop for ('A', 'B');
$_->stop for map { @$_ } values %proxies;
stop_netns_ensemble();
note(sprintf('900_checker_jepsen took %.0f s', time - $t_begin));
done_testing();


# 901_soak: the lock and barrier recipes at once (mutex, read/write lock,
# semaphore mutex, multi-lock, semaphore, barrier, double barrier, with
# revocation), on shared paths, under faults; nothing is left behind.
#
# What users rely on: whatever mix of recipes their sessions and their Java
# services (Apache Curator) run on the same paths, and whatever fails in
# between — the zklock worker restarted (SIGTERM, pg_cancel_backend), the
# ZooKeeper server restarted (shorter than the session timeout, and longer so
# the session expires), sessions terminated while they hold or wait, a
# backend killed with SIGKILL (the cluster crash-restarts) — zklock
#   - leaves no node behind: once every client stopped and released, every
#     recipe directory in ZooKeeper is empty (no lock, lease, locks/ node,
#     member, ready) and zk_locks is empty; a forgotten ephemeral node first
#     in a queue would block every client until the cluster restarts;
#   - never gives a wrong answer: no two holders of a mutex, write lock,
#     semaphore mutex or multi-lock at once, no writer beside a reader, never
#     more than 3 holders of a semaphore of 3 (an oracle of PostgreSQL
#     advisory locks taken inside every section), a downgrade is granted at
#     once, zk_participants shows the holder first, zk_revoke asks exactly
#     the one holder of a mutex, a release of a held lock succeeds;
#   - fails only with the SQLSTATEs the faults explain (08006, 40000, 55P03,
#     57014, 57P01), and 40P01 only where two multi-locks taken in opposite
#     orders closed a real deadlock (a multi-lock, or a mutex waiter whose
#     node waited ahead of one in that cycle: in_multi_cycle), never hangs (every statement ends within $HANG_SECS), and
#     every recipe works again once the faults are over;
#   - does not grow its worker's memory under steady load;
#   - logs no unexpected ERROR, no crash but the one the test causes, and
#     no disagreement of the worker's index of lock paths with its table.
#
# The load: 24 SQL sessions of one cluster, driven from here without
# blocking (round-robin), each looping over short iterations that pick one
# recipe at random: mutex (also try-acquire), _xact mutex in a transaction,
# read lock, write lock (half of them downgrade), semaphore mutex, multi-lock
# over the two mutex paths (in either order), semaphore leases (1 or 2 of 3),
# barrier set / remove / wait, double barrier enter / leave (2 members),
# zk_participants while holding, revocation (revocable holder revokes itself
# and must be told; bare zk_revoke of the mutex).  Every acquire has a 2 s
# timeout and every section holds 10-30 ms.  A Curator client runs at the same
# time on the same paths: a mutex loop and a semaphore loop (mxloop, semloop),
# and one thread each for the read/write lock, the semaphore mutex, a lease,
# the barrier and a revocable mutex, and in the calm phase the double barrier
# (Curator's DistributedDoubleBarrier keeps its member node when a connection
# loss interrupts it, which would stall the path until its session ends).
#
# The faults, one after the other while the load runs, as a cycle (repeated
# when ZKLOCK_SOAK_SECONDS asks for a longer run, with a check between cycles
# that no node of zklock's session is left; the SIGKILL in the first only).
# The faults that end zklock's session come first, so that a node a later
# fault leaves behind stays in ZooKeeper until the checks at the end:
#   1. ZooKeeper down for 13 s, longer than the 10 s session timeout (the
#      session expires);
#   2. SIGKILL of a holding backend (crash-restart, a new session);
#   3. worker SIGTERM (the next worker resumes the session);
#   4. pg_terminate_backend of 3 sessions that hold or wait, and
#      pg_cancel_backend of 2 more;
#   5. ZooKeeper down for 2 s (the session is resumed);
#   6. pg_cancel_backend of the worker (it exits and is restarted);
#   7. ZooKeeper down for about 3 s, and meanwhile 3 sessions that hold or
#      wait are terminated and the worker gets SIGTERM: the deletes of their
#      nodes, and of the nodes of waits that ended in the outage, are pending
#      across the worker restart;
#   8. pg_terminate_backend of 3 sessions that hold or wait, and a worker
#      SIGTERM right after.
# Then a calm phase of load without faults, over which the worker's memory is
# measured (one worker lifetime), and the end: every client stops and
# releases, and the checks above run.
#
# ZKLOCK_SOAK_SECONDS (default 100) is the length of the load, faults and calm
# phase together; ZKLOCK_SOAK_SEED fixes the random choices.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use ZklockTest;
use ZklockFault;
use ZklockLoad;

my $SOAK_SECS = $ENV{ZKLOCK_SOAK_SECONDS} // 100;
my $SEED = $ENV{ZKLOCK_SOAK_SEED} // (time() % 100000);
my $SESSIONS = 24;
my $HANG_SECS = 30;         # a statement still running after this is a hang
my $CALM_SECS = 20;         # final phase without faults (memory measured)
my $LONG_OUTAGE = 13;       # ZooKeeper down longer than the session timeout (10 s)
my $SHORT_OUTAGE = 2;       # ZooKeeper down for a moment (the session survives)
my $MIN_OK = 3;             # successes per recipe: not vacuous
my $MEM_BOUND_KB = 32 * 1024;
my @PATHS = qw(/soak/m1 /soak/m2 /soak/rw /soak/sm /soak/sem /soak/b /soak/db);
my @RECIPES = qw(mutex xact read write semmutex multi lease barrier dbarrier participants revoke);
my %EXPECTED_SQLSTATE = (
	'08006' => 'ZooKeeper unreachable during a restart, or the session lost while waiting',
	'40000' => 'COMMIT of an _xact lock lost with the session (or the lease ran out)',
	'55P03' => 'lock_timeout (this test sets none)',
	'57014' => 'pg_cancel_backend of a session that holds or waits',
	'57P01' => 'the session was terminated by pg_terminate_backend',
	'40P01' => 'a multi-lock against one taken in the other order: a real deadlock, broken (multi only)',
	'40P01 queued' => 'a mutex waiter queued ahead of a multi-lock in the cycle of two multi-locks (in_multi_cycle): a real member of that deadlock');

# A default run takes about 2 minutes; a longer soak needs a longer watchdog
# (ZklockTest's default is 300 s) unless the caller set one.
alarm($SOAK_SECS + 200) if !defined $ENV{ZKLOCK_TEST_ALARM} && $SOAK_SECS + 200 > 300;

srand($SEED);
note("901_soak: load for ${SOAK_SECS}s, seed $SEED");
my $t_begin = time;

# ZklockTest::Session and ::Peer note every statement and every reply line;
# this test runs thousands, so while the clients run those notes are dropped
# (quietly, from ZklockFault).

############################################################################
# ZooKeeper, the cluster, the Curator peer
############################################################################
my $zk = start_zk();
my $node = new_zklock_node('soak', $zk, qq{zklock.connect_timeout = '3s'
max_connections = 40
restart_after_crash = on
log_min_messages = warning
log_statement = none
log_line_prefix = '%m [%p] %e %q%a '
});
my $st0 = status_row($node);
is($st0->{session_timeout}, '10000', 'negotiated session timeout 10 s');

$node->safe_psql('postgres', q{
CREATE FUNCTION soak_k(p text, i int DEFAULT 0) RETURNS bigint LANGUAGE sql IMMUTABLE
  AS $$ SELECT hashtext(p)::bigint * 16 + i $$;

-- The oracle: a section takes PostgreSQL advisory locks (exclusive, or
-- shared for readers) that must always be free, since zklock lets only one
-- holder in; false when one was taken by another session.  Session-level,
-- released before the zklock lock is (also when the section is cancelled),
-- so no gap lets a next holder see it.
CREATE FUNCTION soak_section(keys bigint[], shared boolean, hold float8) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
  k bigint;
  taken bigint[] := '{}';
  ok boolean := true;
BEGIN
  FOREACH k IN ARRAY keys LOOP
    IF (CASE WHEN shared THEN pg_try_advisory_lock_shared(k) ELSE pg_try_advisory_lock(k) END) THEN
      taken := taken || k;
    ELSE
      ok := false;
    END IF;
  END LOOP;
  BEGIN
    PERFORM pg_sleep(hold);
  EXCEPTION WHEN query_canceled THEN
    -- a cancelled section gives its oracle back before the error ends the
    -- transaction (and with it an _xact lock)
    PERFORM pg_advisory_unlock_all();
    RAISE;
  END;
  FOREACH k IN ARRAY taken LOOP
    IF shared THEN PERFORM pg_advisory_unlock_shared(k); ELSE PERFORM pg_advisory_unlock(k); END IF;
  END LOOP;
  RETURN ok;
END $$;

-- The semaphore's oracle: qty of 3 keys must be free.
CREATE FUNCTION soak_sem_section(qty int, hold float8) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
  i int;
  taken int[] := '{}';
  ok boolean;
BEGIN
  FOR i IN 0..2 LOOP
    EXIT WHEN coalesce(array_length(taken, 1), 0) >= qty;
    IF pg_try_advisory_lock(soak_k('/soak/sem', i)) THEN
      taken := taken || i;
    END IF;
  END LOOP;
  ok := coalesce(array_length(taken, 1), 0) >= qty;
  BEGIN
    PERFORM pg_sleep(hold);
  EXCEPTION WHEN query_canceled THEN
    PERFORM pg_advisory_unlock_all();
    RAISE;
  END;
  FOREACH i IN ARRAY taken LOOP
    PERFORM pg_advisory_unlock(soak_k('/soak/sem', i));
  END LOOP;
  RETURN ok;
END $$;

CREATE FUNCTION soak_end(sect boolean, released boolean) RETURNS text LANGUAGE sql
  AS $$ SELECT CASE WHEN NOT sect THEN 'overlap' WHEN NOT released THEN 'lost' ELSE 'ok' END $$;

CREATE FUNCTION soak_state(p text, r text) RETURNS text LANGUAGE sql
  AS $$ SELECT string_agg(l.state, ',') FROM zk_locks l
        WHERE l.pid = pg_backend_pid() AND l.path = p AND l.recipe = r $$;

-- One iteration: 'ok', 'timeout' (not granted in time), 'false' (a barrier
-- call that found nothing to do), 'lost' (the lock went with the session),
-- 'unseen' (a revocation not yet seen), 'asked', 'leave-timeout', or
-- 'overlap' / 'wrong: ...' (a wrong answer).
CREATE FUNCTION soak_iter(what text, v int, hold float8) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
  p text := CASE WHEN v % 2 = 0 THEN '/soak/m1' ELSE '/soak/m2' END;
  ps text[];
  ok boolean;
  ok2 boolean;
  sect boolean;
  n int;
  leases text[];
  st text;
  st2 text;
  mine text;
  first_node text;
  first_holds boolean;
  seen boolean := false;
  i int;
BEGIN
  IF what = 'mutex' THEN
    IF v >= 4 THEN
      ok := zk_mutex_try_acquire(p);
    ELSE
      ok := zk_mutex_acquire(p, '2s');
    END IF;
    IF NOT ok THEN RETURN 'timeout'; END IF;
    sect := soak_section(ARRAY[soak_k(p)], false, hold);
    RETURN soak_end(sect, zk_mutex_release(p));

  ELSIF what = 'xact' THEN
    IF NOT zk_mutex_acquire_xact(p, '2s') THEN RETURN 'timeout'; END IF;
    sect := soak_section(ARRAY[soak_k(p)], false, hold);
    RETURN soak_end(sect, true);

  ELSIF what = 'read' THEN
    IF NOT zk_read_lock_acquire('/soak/rw', '2s') THEN RETURN 'timeout'; END IF;
    sect := soak_section(ARRAY[soak_k('/soak/rw')], true, hold);
    RETURN soak_end(sect, zk_read_lock_release('/soak/rw'));

  ELSIF what = 'write' THEN
    IF NOT zk_write_lock_acquire('/soak/rw', '2s') THEN RETURN 'timeout'; END IF;
    sect := soak_section(ARRAY[soak_k('/soak/rw')], false, hold);
    IF v % 2 = 0 THEN
      -- downgrade: the write holder gets the read lock at once
      st := soak_state('/soak/rw', 'write');
      ok := zk_read_lock_acquire('/soak/rw', '2s');
      st2 := soak_state('/soak/rw', 'write');
      ok2 := zk_write_lock_release('/soak/rw');
      IF NOT ok THEN
        RETURN CASE WHEN st = 'held' AND st2 = 'held' THEN 'wrong: downgrade not granted' ELSE 'lost' END;
      END IF;
      ok := zk_read_lock_release('/soak/rw');
      RETURN soak_end(sect, ok AND ok2);
    END IF;
    RETURN soak_end(sect, zk_write_lock_release('/soak/rw'));

  ELSIF what = 'semmutex' THEN
    IF NOT zk_semaphore_mutex_acquire('/soak/sm', '2s') THEN RETURN 'timeout'; END IF;
    sect := soak_section(ARRAY[soak_k('/soak/sm')], false, hold);
    RETURN soak_end(sect, zk_semaphore_mutex_release('/soak/sm'));

  ELSIF what = 'multi' THEN
    ps := CASE WHEN v % 2 = 0 THEN ARRAY['/soak/m1', '/soak/m2'] ELSE ARRAY['/soak/m2', '/soak/m1'] END;
    IF NOT zk_multi_lock_acquire(ps, '2s') THEN RETURN 'timeout'; END IF;
    sect := soak_section(ARRAY[soak_k('/soak/m1'), soak_k('/soak/m2')], false, hold);
    RETURN soak_end(sect, zk_multi_lock_release(ps));

  ELSIF what = 'lease' THEN
    n := 1 + v % 2;
    leases := zk_semaphore_acquire('/soak/sem', 3, n, '2s');
    IF leases IS NULL THEN RETURN 'timeout'; END IF;
    IF coalesce(array_length(leases, 1), 0) <> n THEN
      PERFORM zk_semaphore_release_all('/soak/sem');
      RETURN format('wrong: %s leases granted for %s', coalesce(array_length(leases, 1), 0), n);
    END IF;
    sect := soak_sem_section(n, hold);
    IF n = 1 THEN
      ok := zk_semaphore_release('/soak/sem', leases[1]);
    ELSE
      i := zk_semaphore_release_all('/soak/sem');
      IF i > n THEN RETURN format('wrong: released %s leases, held %s', i, n); END IF;
      ok := i = n;
    END IF;
    RETURN soak_end(sect, ok);

  ELSIF what = 'barrier' THEN
    IF v % 3 = 0 THEN
      ok := zk_barrier_set('/soak/b');
    ELSIF v % 3 = 1 THEN
      ok := zk_barrier_remove('/soak/b');
    ELSE
      ok := zk_barrier_wait('/soak/b', '300ms');
      IF NOT ok THEN RETURN 'timeout'; END IF;
    END IF;
    RETURN CASE WHEN ok THEN 'ok' ELSE 'false' END;

  ELSIF what = 'dbarrier' THEN
    IF NOT zk_double_barrier_enter('/soak/db', 2, '2s') THEN RETURN 'timeout'; END IF;
    PERFORM pg_sleep(hold);
    IF zk_double_barrier_leave('/soak/db', '2s') THEN RETURN 'ok'; END IF;
    RETURN 'leave-timeout';

  ELSIF what = 'participants' THEN
    IF NOT zk_mutex_acquire(p, '2s') THEN RETURN 'timeout'; END IF;
    SELECT l.node, l.state INTO mine, st FROM zk_locks l
      WHERE l.pid = pg_backend_pid() AND l.path = p AND l.recipe = 'mutex';
    SELECT regexp_replace(z.node, '^.*/', ''), z.holds INTO first_node, first_holds
      FROM zk_participants(p) z ORDER BY z.position LIMIT 1;
    st2 := soak_state(p, 'mutex');
    sect := soak_section(ARRAY[soak_k(p)], false, hold);
    ok := zk_mutex_release(p);
    IF st = 'held' AND st2 = 'held' AND (first_node IS DISTINCT FROM mine OR first_holds IS NOT TRUE) THEN
      RETURN format('wrong: holder %s, zk_participants shows %s first (holds %s)', mine, first_node, first_holds);
    END IF;
    RETURN soak_end(sect, ok);

  ELSIF what = 'revoke' THEN
    IF v % 2 = 1 THEN
      n := zk_revoke('/soak/m1');
      IF n > 1 THEN RETURN format('wrong: zk_revoke asked %s holders of a mutex', n); END IF;
      RETURN 'asked';
    END IF;
    IF NOT zk_mutex_acquire('/soak/m1', '2s', true) THEN RETURN 'timeout'; END IF;
    st := soak_state('/soak/m1', 'mutex');
    n := zk_revoke('/soak/m1');
    st2 := soak_state('/soak/m1', 'mutex');
    IF n <> 1 AND st = 'held' AND st2 = 'held' THEN
      PERFORM zk_mutex_release('/soak/m1');
      RETURN format('wrong: zk_revoke asked %s holders of the mutex this session holds', n);
    END IF;
    FOR i IN 1..20 LOOP
      seen := EXISTS (SELECT 1 FROM zk_revocation_requested() r WHERE r = '/soak/m1');
      EXIT WHEN seen;
      PERFORM pg_sleep(0.05);
    END LOOP;
    sect := soak_section(ARRAY[soak_k('/soak/m1')], false, hold);
    ok := zk_mutex_release('/soak/m1');
    IF sect AND ok AND NOT seen THEN RETURN 'unseen'; END IF;
    RETURN soak_end(sect, ok);
  END IF;
  RAISE EXCEPTION 'unknown recipe %', what;
END $$;
});

my $peer = new_peer($zk, 'curator');

############################################################################
# The SQL sessions
############################################################################
my @cl = map { { name => sprintf('soak%02d', $_), sess => undef, retry_at => 0, next_at => 0 } } 1 .. $SESSIONS;
my %stat;          # recipe => { iter, ok, timeout, out => {..}, err => {..}, dead, hang, warn => {..}, maxdur, calm_ok }
my @wrong;         # wrong answers, as text
my @hangs;
my %cleanup;       # outcome of the cleanup statements => count
my $stopping = 0;
my $phase = 'faults';
my $t0 = time;     # start of the load (set again when it starts)
my $db_lost = 0;   # double barrier memberships lost to a fault (may strand P/ready, as in Curator)
my %last_err;      # sqlstate => an example message
my %failed;        # backend pid => [ "START-END s RECIPE OUTCOME", ... ] (iterations that failed)

sub iteration_sql
{
	my ($recipe, $v, $hold) = @_;
	my $call = sprintf("SELECT soak_iter('%s', %d, %.3f)", $recipe, $v, $hold);
	return $recipe eq 'xact' ? "BEGIN;\n$call;\nCOMMIT;" : $call;
}

my $CLEANUP_SQL = "SELECT pg_advisory_unlock_all();\nSELECT zk_release_all()";

# in_multi_cycle($pid, $err): is the 40P01 of process $pid, which waited
# for a plain mutex of /soak/m1 or /soak/m2, that of a real member of the
# cycle two multi-locks in opposite orders closed?  Such a waiter holds
# nothing, so it is in a cycle only when a multi-lock's node waits behind
# its node in the mutex's queue (the edge into it says "which waits ahead
# of it in the queue"), and the cycle is mutex waits on the two paths only,
# three or more of them (it, and the two multi-locks).
sub in_multi_cycle
{
	my ($pid, $err) = @_;
	my @lines = $err =~ /(Process \d+ waits for [^\n]*)/g;
	return 0 if @lines < 3;
	for (@lines)
	{
		return 0 unless m{^Process \d+ waits for zookeeper lock "/soak/m[12]"; blocked by process \d+(?:, which waits ahead of it in the queue)?\.$};
	}
	return 0 unless $lines[0] =~ /^Process $pid /;
	return scalar grep { /; blocked by process $pid, which waits ahead of it in the queue\.$/ } @lines;
}

sub account
{
	my ($c, $r, $dur) = @_;
	my $what = $c->{what};
	my $err = $r->{err} // '';
	if ($what eq 'cleanup')
	{
		my $k = $r->{dead} ? 'dead' : defined $r->{sqlstate} ? "error $r->{sqlstate}" : 'ok';
		$cleanup{$k}++;
		$c->{need_cleanup} = 0 if $k eq 'ok' || $r->{dead};
		$last_err{ $r->{sqlstate} } //= $err if defined $r->{sqlstate};
		return;
	}
	my $s = $stat{$what} //= {};
	$s->{iter}++;
	$s->{maxdur} = $dur if $dur > ($s->{maxdur} // 0);
	$s->{warn}{lost}++ if $err =~ /WARNING:.*was lost when the zookeeper session ended/;
	if ($err =~ /WARNING:.*(is not held by this session)/)
	{
		push @wrong, "$c->{name} $what: $1 after its own acquire: $err";
	}
	$db_lost++ if $what eq 'dbarrier' && ($r->{dead} || defined $r->{sqlstate} || $err =~ /membership .* was lost/);
	push @{ $failed{ $c->{sess}->pid } }, sprintf('%.1f-%.1f s %s %s', $c->{since} - $t0, time - $t0, $what,
		$r->{sqlstate} // 'connection lost')
	  if defined $r->{sqlstate} || $r->{dead};
	if (defined $r->{sqlstate})
	{
		my $key = $r->{sqlstate};

		$key = '40P01 queued' if $key eq '40P01' && $what ne 'multi' && in_multi_cycle($c->{sess}->pid, $err);
		$s->{err}{$key}++;
		$last_err{$key} //= "$what: $err";
		$c->{need_cleanup} = 1;
	}
	if ($r->{dead})
	{
		$s->{dead}++;
		return;
	}
	return if defined $r->{sqlstate};
	my ($out) = $r->{out} =~ /([^\n]*)\z/;
	$out //= '';
	if ($out eq 'ok')
	{
		$s->{ok}++;
		$s->{calm_ok}++ if $phase eq 'calm';
	}
	elsif ($out eq 'timeout')
	{
		$s->{timeout}++;
	}
	else
	{
		$s->{out}{ $out =~ /^wrong/ ? 'wrong' : $out }++;
		push @wrong, "$c->{name} (pid " . $c->{sess}->pid . ") $what: [$c->{sql}] -> out=[$r->{out}] err=[$err]"
		  if $out =~ /^(overlap|wrong)/ || $out eq '';
		$c->{need_cleanup} = 1 if $out eq '' || $out =~ /^wrong/;
	}
	return;
}

# One pass over the sessions: collect what finished, start what is due,
# reconnect the sessions whose backend died.
sub pump_sessions
{
	for my $c (@cl)
	{
		if (!$c->{sess})
		{
			next if $stopping || time < $c->{retry_at};
			my $s = eval { ZklockTest::Session->new($node, $c->{name}) };
			if (!$s)
			{
				$c->{retry_at} = time + 0.3;
				next;
			}
			$c->{sess} = $s;
			$c->{connects}++;
			$c->{need_cleanup} = 0;
		}
		if ($c->{busy})
		{
			if (!$c->{sess}->done)
			{
				if (!$c->{hung} && time - $c->{since} > $HANG_SECS)
				{
					$c->{hung} = 1;
					$stat{ $c->{what} }{hang}++ unless $c->{what} eq 'cleanup';
					push @hangs, sprintf('%s (pid %d) %s: [%s] still running after %ds',
						$c->{name}, $c->{sess}->pid, $c->{what}, $c->{sql}, $HANG_SECS);
					diag($hangs[-1]);
				}
				next;
			}
			my $r = $c->{sess}->result(5);
			next unless $r->{done} || $r->{dead};
			$c->{busy} = 0;
			# psql runs the banners even after its connection broke (the
			# crash-restart): such a session is as good as dead
			if (!$r->{dead} && $r->{err} =~ /server closed the connection unexpectedly|connection to server was lost|57P02:/)
			{
				$r->{dead} = 1;
				$c->{sess}->quit;
			}
			account($c, $r, time - $c->{since});
			if ($r->{dead})
			{
				$c->{sess} = undef;
				$c->{retry_at} = time + 0.2;
				next;
			}
			$c->{next_at} = time + rand(0.03);
		}
		next if $stopping || time < $c->{next_at};
		if ($c->{need_cleanup})
		{
			$c->{what} = 'cleanup';
			$c->{sql} = $CLEANUP_SQL;
		}
		else
		{
			$c->{what} = $RECIPES[ int(rand(@RECIPES)) ];
			$c->{sql} = iteration_sql($c->{what}, int(rand(6)), 0.01 + rand(0.02));
		}
		$c->{sess}->start($c->{sql});
		$c->{busy} = 1;
		$c->{hung} = 0;
		$c->{since} = time;
	}
	return;
}

############################################################################
# The Curator client: loops on their own threads, and actors driven from
# here (one thread each in the peer, replies read without blocking).
############################################################################
my @actors = (
	{ id => 'crw', kind => 'lock', cmd => sub { ($_[0]{n} % 3 ? 'read' : 'write') . ' crw /soak/rw 2000' } },
	{ id => 'csm', kind => 'lock', cmd => sub { 'semmutex csm /soak/sm 2000' } },
	{ id => 'cmx', kind => 'lock', cmd => sub { 'mutex cmx /soak/m1 2000 revocable-notify' } },
	{ id => 'cls', kind => 'lease', cmd => sub { 'lease cls /soak/sem 3 1 2000' } },
	{ id => 'cdb', kind => 'dbarrier', cmd => sub { 'denter cdb /soak/db 2 2000' }, calm_only => 1 },
	{ id => 'cbw', kind => 'barrier', cmd => sub { 'barrier_wait cbw /soak/b 300' } },
);
my %actor = map { $_->{id} => $_ } @actors;
$_->{state} = 'idle', $_->{n} = 0, $_->{next_at} = 0 for @actors;
my %cur;           # id => { ops, ok, timeout, errors => { class => n }, revoked, maxdur }
my @peer_other;    # reply lines that are not an actor's

sub actor_reply
{
	my ($a, $verb, $rest) = @_;
	my $c = $cur{ $a->{id} } //= {};
	my $dur = time - $a->{since};
	$c->{maxdur} = $dur if $dur > ($c->{maxdur} // 0);
	my $err_class = sub { my ($m) = ($rest // '') =~ /^(\S+)/; $c->{errors}{ $_[0] . ($m // '?') }++; };
	if ($a->{state} eq 'acq')
	{
		$c->{ops}++;
		my $got = ($verb eq 'acquired' || $verb eq 'leased' || ($verb =~ /^(entered|barrier)$/ && $rest eq 'true'));
		if ($verb eq 'error')
		{
			$err_class->('');
			$db_lost++ if $a->{kind} eq 'dbarrier';
		}
		elsif ($got) { $c->{ok}++; }
		else { $c->{timeout}++; }
		# Debian's Curator (before GH-1290) can wait for ever in a timed
		# enter; the peer names that state, interrupts it and answers false
		$c->{gh1290}++ if $verb eq 'entered' && ($rest // '') =~ /curator-GH-1290/;
		# A double barrier is always left (a timed-out Curator enter keeps its
		# node), without a timeout: Curator 5.4's lowest member keeps its node
		# when its leave times out, which would stall every later leave on
		# the path for as long as the peer's session lives.  (For the same
		# reason Curator's double barrier runs in the calm phase only: an
		# enter or leave that a connection loss interrupts leaves its member
		# node behind until its session ends.)
		if ($a->{kind} eq 'dbarrier' || ($got && $a->{kind} ne 'barrier'))
		{
			$a->{state} = 'held';
			$a->{until} = time + 0.01 + rand(0.02);
		}
		else
		{
			$a->{state} = 'idle';
			$a->{next_at} = time + rand(0.05);
		}
	}
	elsif ($a->{state} eq 'rel')
	{
		if ($verb eq 'error')
		{
			$err_class->('release:');
			$db_lost++ if $a->{kind} eq 'dbarrier';
		}
		$c->{left_false}++ if $verb eq 'left' && $rest ne 'true';
		$a->{state} = 'idle';
		$a->{next_at} = time + rand(0.05);
	}
	else
	{
		push @peer_other, "$verb $a->{id} " . ($rest // '') . " (in state $a->{state})";
	}
	return;
}

sub pump_peer
{
	for my $l (peer_read($peer))
	{
		my ($verb, $id, $rest) = $l =~ /^(\S+) (\S+)(?: (.*))?$/;
		if (defined $id && $actor{$id} && $verb ne 'stopping')
		{
			if ($verb eq 'revoked')
			{
				$cur{$id}{revoked}++;
				next;
			}
			actor_reply($actor{$id}, $verb, $rest);
		}
		else
		{
			push @peer_other, $l;
		}
	}
	for my $a (@actors)
	{
		if ($a->{state} eq 'held' && time >= $a->{until})
		{
			$peer->{in} .= ($a->{kind} eq 'lease' ? "release $a->{id} lease"
				  : $a->{kind} eq 'dbarrier' ? "dleave $a->{id} -1"
				  : "release $a->{id}") . "\n";
			$a->{state} = 'rel';
			$a->{since} = time;
		}
		elsif ($a->{state} eq 'idle' && !$stopping && time >= $a->{next_at} && (!$a->{calm_only} || $phase eq 'calm'))
		{
			$peer->{in} .= $a->{cmd}->($a) . "\n";
			$a->{n}++;
			$a->{state} = 'acq';
			$a->{since} = time;
		}
	}
	peer_flush($peer);
	return;
}

############################################################################
# Driving
############################################################################

# both kinds of clients take their next step
sub pump_all { pump_sessions(); pump_peer(); return; }

# drive_for($secs) and drive_until($cond, $timeout, $what) (ZklockLoad)
# run both kinds of clients; a condition is evaluated every 0.25 s.
load_driver(pump => \&pump_all, us => 4_000, every => 0.25);

# connected(): zk_status() once zklock is connected, else 0 (try_status and
# try_sql, from ZklockLoad, answer undef while the cluster does not).
sub connected { my $s = try_status($node); return $s && $s->{state} eq 'connected' ? $s : 0; }

# proc_mem($pid): { VmRSS, VmHWM, RssAnon } in kB from /proc.
sub proc_mem
{
	my ($pid) = @_;
	my %m;
	open(my $fh, '<', "/proc/$pid/status") or return undef;
	while (<$fh>)
	{
		$m{$1} = $2 if /^(VmRSS|VmHWM|RssAnon):\s+(\d+) kB/;
	}
	close $fh;
	return \%m;
}

# victims($n): up to $n of our sessions that hold or wait in zk_locks, a
# holder and a waiter first when there are both: [ pid, state, recipe ].
sub victims
{
	my ($n) = @_;
	my $out = try_sql($node, q{SELECT l.pid, l.state, l.recipe FROM zk_locks l
		JOIN pg_stat_activity a ON a.pid = l.pid
		WHERE a.application_name ~ '^soak[0-9]+$' AND l.state IN ('held', 'waiting')
		ORDER BY random()}) // '';
	my (%seen, @held, @waiting);
	for (split /\n/, $out)
	{
		my ($pid, $state, $recipe) = split /\|/;
		next if $seen{$pid}++;
		push @{ $state eq 'held' ? \@held : \@waiting }, [ $pid, $state, $recipe ];
	}
	my @v;
	push @v, shift @held if @held;
	push @v, shift @waiting if @waiting;
	push @v, splice(@held, 0, 1), splice(@waiting, 0, 1) while @v < $n && (@held || @waiting);
	return @v > $n ? @v[ 0 .. $n - 1 ] : @v;
}

############################################################################
# The faults
############################################################################
# fault_note($what) (ZklockLoad) keeps the faults: faults().
my (%sigterm_workers, %cancel_workers, %terminated, %cancelled, $killed_pid, $t_kill);
# how many times a ZooKeeper outage ended the worker's session (by design:
# expected, or ZooKeeper back too late for the lease); the requests that
# waited with a node then fail with 08006 "zookeeper session ... while
# waiting for lock"
my $sessions_given_up = 0;

# worker_restart($how, $label, $connected): the worker exits (SIGTERM, or
# pg_cancel_backend); the postmaster starts a new one about 1 s later and
# it resumes the ZooKeeper session.  Without $connected (ZooKeeper is down)
# only the new worker is waited for.
sub worker_restart
{
	my ($how, $label, $connected) = @_;
	my $before = try_status($node) // status_row($node);
	my $old = $before->{worker_pid};
	if ($how eq 'SIGTERM')
	{
		$sigterm_workers{$old} = 1;
		ok(kill('TERM', $old), "$label: SIGTERM sent to the worker (pid $old)");
	}
	else
	{
		$cancel_workers{$old} = 1;
		is(try_sql($node, "SELECT pg_cancel_backend($old)"), 't', "$label: pg_cancel_backend of the worker (pid $old)");
	}
	fault_note("$label: worker $how (pid $old)");
	my $st = drive_until(
		sub {
			my $s = try_status($node);
			$s && $s->{worker_pid} && $s->{worker_pid} != $old && (!$connected || $s->{state} eq 'connected') ? $s : 0;
		},
		30, 'a new worker');
	ok($st, "$label: a new worker runs (pid " . ($st ? $st->{worker_pid} : '?') . ')'
		  . ($connected ? ' and is connected' : ''));
	is($st ? $st->{session_id} : '', $before->{session_id},
		"$label: the new worker resumed the ZooKeeper session $before->{session_id}") if $connected;
	return;
}

# terminate($label, $n, $how): pg_terminate_backend (or pg_cancel_backend)
# of up to $n sessions that hold or wait, all in one statement.
sub terminate
{
	my ($label, $n, $how) = @_;
	$how //= 'pg_terminate_backend';
	my @v;
	drive_until(sub { @v = victims($n); scalar @v }, 15, 'sessions that hold or wait');
	my $what = join(', ', map { "$_->[0] ($_->[1] $_->[2])" } @v);
	ok(scalar @v, "$label: found sessions that hold or wait: $what");
	return () unless @v;
	for my $v (@v)
	{
		if ($how eq 'pg_terminate_backend')
		{
			$terminated{ $v->[0] } = 1;
			$db_lost++ if $v->[2] eq 'double_barrier';
		}
		else
		{
			$cancelled{ $v->[0] } = 1;
		}
	}
	my $list = join(',', map { $_->[0] } @v);
	my $r = try_sql($node, "SELECT string_agg($how(p)::text, ',') FROM unnest(ARRAY[$list]) p") // '';
	push @{ $failed{ $_->[0] } }, sprintf('%.1f s %s (%s %s)', time - $t0, $how, $_->[1], $_->[2]) for @v;
	is($r, join(',', map { 'true' } @v), "$label: $how of $what");
	fault_note("$label: $how of $what");
	return @v;
}

# gone_from_zk_locks($label, @victims): the terminated sessions' holds were
# released and their waits withdrawn (zklock's registry; ZooKeeper's side
# is checked at the end).
sub gone_from_zk_locks
{
	my ($label, @v) = @_;
	my $list = join(',', map { $_->[0] } @v) || '0';
	ok(drive_until(sub { (try_sql($node, "SELECT count(*) FROM zk_locks WHERE pid IN ($list)") // '') eq '0' }, 30,
			'the terminated sessions to leave zk_locks'),
		"$label: the terminated sessions left zk_locks");
	return;
}

# zk_down($label) / zk_up($label, $before, $t_down, $expect_expiry)
# The end of the worker's lease (epoch seconds) as the outage starts: the
# session is given up by design when no answer comes before it.
sub zk_down
{
	my ($label, $secs) = @_;
	my $before = try_status($node) // status_row($node);
	my $lease_end = try_sql($node, 'SELECT extract(epoch FROM lease_until) FROM zk_status()') // '';
	$before->{log_offset} = length(log_contents($node));
	my $t = time;
	stop_zk($zk);
	fault_note("$label: ZooKeeper stopped" . ($secs ? " for ${secs}s" : ''));
	return ($before, $t, $lease_end =~ /^[\d.]+$/ ? $lease_end : $t);
}

sub zk_up
{
	my ($label, $before, $t, $lease_end, $expect_expiry) = @_;
	restart_zk($zk);
	my $down = time - $t;
	my $margin = $lease_end - time;    # time left to reconnect before the lease runs out
	my $st = drive_until(
		sub { my $s = connected(); $s && (!$expect_expiry || $s->{session_id} ne $before->{session_id}) ? $s : 0 },
		60, 'zklock connected after the ZooKeeper restart');
	ok($st, sprintf('%s: zklock connected again after an outage of %.1f s', $label, $down));
	$st ||= status_row($node);
	$sessions_given_up++ if $st->{session_id} ne $before->{session_id};
	if ($expect_expiry)
	{
		isnt($st->{session_id}, $before->{session_id},
			"$label: a new session after the outage ($before->{session_id} -> $st->{session_id})");
		cmp_ok($st->{expired_count} + $st->{leases_expired}, '>', $before->{expired_count} + $before->{leases_expired},
			"$label: the session counted as expired");
		return;
	}
	cmp_ok($st->{suspended_count} + $st->{expired_count}, '>', $before->{suspended_count} + $before->{expired_count},
		"$label: zklock saw the connection go");
	# ZooKeeper serves again (restart_zk waited for it) $margin seconds
	# before the lease runs out: a reconnect takes a fraction of a second, so
	# with 2 s or more left the session must be resumed.
	if ($margin >= 2)
	{
		is($st->{session_id}, $before->{session_id},
			sprintf('%s: the session was resumed (outage %.1f s; ZooKeeper back %.1f s before the lease ran out)',
				$label, $down, $margin))
		  or diag("the worker's log since the outage began:\n"
			  . join("\n", grep { /zklock|worker/ && !/ERROR|DETAIL|HINT|CONTEXT|STATEMENT/ }
				  split /\n/, substr(log_contents($node), $before->{log_offset})));
	}
	else
	{
		note(sprintf('%s: ZooKeeper was back only %.1f s before the lease ran out (outage %.1f s): the session may be given up by design',
				$label, $margin, $down));
	}
	return;
}

sub sigkill_holder
{
	my ($label) = @_;
	my $before = status_row($node);
	my @v;
	drive_until(sub { @v = grep { $_->[1] eq 'held' } victims(24); scalar @v }, 15, 'a holding session');
	ok(scalar @v, "$label: found a holding session: " . (@v ? "$v[0][0] ($v[0][2])" : 'none'));
	return unless @v;
	$db_lost++ if grep { ($_->{what} // '') eq 'dbarrier' && $_->{busy} } @cl;
	$killed_pid = $v[0][0];
	ok(kill('KILL', $killed_pid), "$label: SIGKILL sent to backend $killed_pid ($v[0][2] holder)");
	$t_kill = time;
	fault_note("$label: SIGKILL of backend $killed_pid ($v[0][2] holder): crash-restart");
	my $st = drive_until(sub { my $s = connected(); $s && $s->{session_id} ne $before->{session_id} ? $s : 0 },
		60, 'the cluster back, in a new session');
	ok($st, sprintf('%s: the cluster is back after the crash-restart (%.1f s), in a new session', $label, time - $t_kill));
	isnt($st ? $st->{worker_pid} : $before->{worker_pid}, $before->{worker_pid}, "$label: a new worker runs");
	return;
}

# stop_clients(): no new iteration; what runs ends (bounded), Curator's
# threads too.
sub stop_clients
{
	my ($label) = @_;
	$stopping = 1;
	ok(drive_until(sub { !grep { $_->{busy} } @cl }, $HANG_SECS + 5, 'the SQL sessions to finish'),
		"$label: every SQL statement ended");
	ok(drive_until(sub { !grep { $_->{state} ne 'idle' } @actors }, 30, "Curator's threads to finish"),
		"$label: Curator's threads finished and released")
	  or diag(join("\n", map { sprintf('Curator %s: %s for %.0f s', $_->{id}, $_->{state}, time - $_->{since}) }
		  grep { $_->{state} ne 'idle' } @actors));
	return;
}

# release_all($label): every session releases what it may hold; the ones
# whose iterations all ended normally must hold nothing.
sub release_all
{
	my ($label) = @_;
	my @dirty;
	for my $c (@cl)
	{
		next unless $c->{sess};
		my $r = eval { $c->{sess}->query("SELECT pg_advisory_unlock_all();\nSELECT zk_release_all()", 30) }
		  // { out => '', err => "no answer: $@", dead => 0 };
		my $n = ($r->{out} =~ /(\d+)\s*\z/)[0] // -1;
		if ($r->{dead} || $r->{err} =~ /server closed|connection to server was lost/)
		{
			$c->{sess}->quit;
			$c->{sess} = undef;
		}
		elsif ($c->{need_cleanup})
		{
			note("$label: $c->{name}: zk_release_all() after a failed iteration released $n");
			$c->{need_cleanup} = 0;
		}
		elsif ($n != 0)
		{
			push @dirty, "$c->{name} ($r->{out} $r->{err})";
		}
	}
	is(scalar @dirty, 0, "$label: every session whose iterations ended normally held nothing (zk_release_all() = 0)")
	  or diag("@dirty");
	ok(wait_sql($node, 'SELECT count(*) FROM zk_locks', '0', 30), "$label: zk_locks is empty once every session released")
	  or diag($node->safe_psql('postgres', 'SELECT * FROM zk_locks'));
	return;
}

# The recipe directories (containers, which ZooKeeper reaps in its own time);
# any other node under /soak was left by somebody.
my %dir = map { $_ => 1 } ('/soak', @PATHS, map { ("$_/locks", "$_/leases") } @PATHS);
sub leftovers
{
	my $tree = zk_tree($zk, '/soak');
	return undef unless defined $tree;
	return [ grep { $_ ne '' && !$dir{$_} } @$tree ];
}

sub hexnum { my ($h) = @_; $h = lc($h // ''); $h =~ s/^0x//; $h =~ s/^0+//; return $h; }

# quiesce_check($label): between fault cycles (only in longer runs): the
# clients stop and release, and no lock, lease or member node of zklock's
# current session is left (the next cycle's session expiry would remove
# them and hide the leak).  Nodes of other sessions (Curator's, a session
# zklock gave up that the server has not expired yet) are not looked at.
sub quiesce_check
{
	my ($label) = @_;
	stop_clients($label);
	release_all($label);
	my $sid = hexnum(status_row($node)->{session_id});
	my @mine;
	my $ok = wait_until(
		sub {
			my $left = leftovers() or return 0;
			@mine = grep { my $s = zk_stat($zk, $_); $s && hexnum($s->{owner}) eq $sid } grep { !m{^/soak/(db/ready|b)$} } @$left;
			return !@mine;
		},
		30, "no node of zklock's session left");
	ok($ok, "$label: no lock, lease or member node of zklock's session $sid is left") or diag("left: @mine");
	$stopping = 0;
	return;
}

############################################################################
# Run
############################################################################
my ($mem0, $mem1, $calm_worker, $calm_iters);
quietly(sub {
	$t0 = time;
	fault_clock($t0);
	my $cap = int(($SOAK_SECS + 200) * 1000);
	$peer->send("mxloop cmxl /soak/m1 $cap 20");
	$peer->send("semloop csml /soak/sem 3 $cap 20");
	drive_for(5);
	my $n0 = 0;
	$n0 += $_->{iter} // 0 for values %stat;
	cmp_ok($n0, '>', $SESSIONS, "warm-up: $n0 iterations in 5 s before the first fault");

	# The faults that end zklock's session come first in a cycle, so that a
	# node the others leave behind stays in ZooKeeper until the checks.
	my $cycle = 0;
	my $cycle_len;
	while (1)
	{
		my $tc = time;
		$cycle++;
		my $c = "cycle $cycle";
		quiesce_check("$c, before") if $cycle > 1;

		# ZooKeeper down longer than the session timeout: the session expires.
		my @zk = zk_down("$c, long ZooKeeper outage", $LONG_OUTAGE);
		drive_for($LONG_OUTAGE - (time - $zk[1]));
		zk_up("$c, long ZooKeeper outage", @zk, 1);
		drive_for(4);

		if ($cycle == 1)
		{
			sigkill_holder("$c, SIGKILL");
			drive_for(4);
		}

		worker_restart('SIGTERM', "$c, worker SIGTERM", 1);
		drive_for(4);

		gone_from_zk_locks("$c, terminate", terminate("$c, terminate", 3));
		terminate("$c, cancel", 2, 'pg_cancel_backend');
		drive_for(4);

		@zk = zk_down("$c, short ZooKeeper outage", $SHORT_OUTAGE);
		drive_for($SHORT_OUTAGE - (time - $zk[1]));
		zk_up("$c, short ZooKeeper outage", @zk, 0);
		drive_for(4);

		worker_restart('pg_cancel_backend', "$c, worker cancel", 1);
		drive_for(4);

		# While ZooKeeper is down, holders are terminated (their deletes
		# cannot be sent) and the worker restarts before they are.
		@zk = zk_down("$c, ZooKeeper outage with a worker restart");
		drive_for(1);
		my @v = terminate("$c, terminate while ZooKeeper is down", 3);
		worker_restart('SIGTERM', "$c, worker SIGTERM while ZooKeeper is down", 0);
		zk_up("$c, ZooKeeper outage with a worker restart", @zk, 0);
		gone_from_zk_locks("$c, terminate while ZooKeeper is down", @v);
		drive_for(4);

		# Terminated holders and waiters, and the worker restarts at once.
		@v = terminate("$c, terminate and restart", 3);
		worker_restart('SIGTERM', "$c, worker SIGTERM right after the terminations", 1);
		gone_from_zk_locks("$c, terminate and restart", @v);
		drive_for(4);

		$cycle_len //= time - $tc;
		last if time - $t0 + $cycle_len + $CALM_SECS > $SOAK_SECS;
	}

	# Calm: load without faults, over one worker lifetime.
	$phase = 'calm';
	healthy(\&connected, 60, 'zklock connected', 'before the calm phase: zklock is connected again');
	my $calm = $SOAK_SECS - (time - $t0);
	$calm = $CALM_SECS if $calm < $CALM_SECS;
	drive_for(2);
	$calm_worker = worker_pid($node);
	$mem0 = proc_mem($calm_worker);
	my $i0 = 0;
	$i0 += $_->{iter} // 0 for values %stat;
	drive_for($calm - 2);
	$mem1 = proc_mem($calm_worker);
	$calm_iters = -$i0;
	$calm_iters += $_->{iter} // 0 for values %stat;
	is(worker_pid($node), $calm_worker, "calm phase: one worker (pid $calm_worker) throughout");

	stop_clients('the end');
});
my $t_load_end = time;

############################################################################
# Counts
############################################################################
note(sprintf('load: %.0f s; faults: %s', $t_load_end - $t0, join('; ', map { sprintf('%.1f s %s', $_->[1], $_->[0]) } faults())));
my %all_err;
for my $r (@RECIPES)
{
	my $s = $stat{$r} // {};
	my $errs = join(' ', map { "$_=$s->{err}{$_}" } sort keys %{ $s->{err} // {} }) || '-';
	my $outs = join(' ', map { "$_=$s->{out}{$_}" } sort keys %{ $s->{out} // {} }) || '-';
	note(sprintf('%-12s iterations %5d  ok %5d (calm %4d)  timeouts %5d  errors %-22s  other %-28s  dead %d  lost-warnings %d  longest %.1f s',
			$r, $s->{iter} // 0, $s->{ok} // 0, $s->{calm_ok} // 0, $s->{timeout} // 0, $errs, $outs,
			$s->{dead} // 0, $s->{warn}{lost} // 0, $s->{maxdur} // 0));
	$all_err{$_} += $s->{err}{$_} for keys %{ $s->{err} // {} };
}
note('cleanup statements after an error: ' . join(' ', map { "$_=$cleanup{$_}" } sort keys %cleanup));
note('reconnects: ' . join(' ', map { "$_->{name}=" . (($_->{connects} // 1) - 1) } grep { ($_->{connects} // 1) > 1 } @cl));
note("example message of $_: $last_err{$_}") for sort keys %last_err;
for my $id (sort keys %cur)
{
	my $c = $cur{$id};
	note(sprintf('Curator %-4s ops %4d  ok %4d  timeouts %4d  errors %s  revoked %d  left-false %d  longest %.1f s%s',
			$id, $c->{ops} // 0, $c->{ok} // 0, $c->{timeout} // 0,
			join(' ', map { "$_=$c->{errors}{$_}" } sort keys %{ $c->{errors} // {} }) || '-',
			$c->{revoked} // 0, $c->{left_false} // 0, $c->{maxdur} // 0,
			$c->{gh1290} ? "  (of the timeouts, enters Curator's GH-1290 hung: $c->{gh1290})" : ''));
}

############################################################################
# Wrong answers, hangs, SQLSTATEs, progress
############################################################################
subtest 'no wrong answer, no hang, only the SQLSTATEs the faults explain, every recipe works again after the faults' => sub {
	is(scalar @wrong, 0, 'no wrong answer (oracle overlaps, downgrade, participants, revoke, lease counts, releases)')
	  or diag(join("\n", @wrong > 20 ? (@wrong[ 0 .. 19 ], '...') : @wrong));
	is(scalar @hangs, 0, "no SQL statement ran longer than ${HANG_SECS}s") or diag(join("\n", @hangs));
	my @bad = grep { !$EXPECTED_SQLSTATE{$_} } sort keys %all_err;
	is(scalar @bad, 0, 'every error carries an SQLSTATE the faults explain ('
		  . join(', ', map { "$_ x$all_err{$_}" } sort keys %all_err) . ')')
	  or diag(join("\n", map { "$_: $last_err{$_}" } @bad));
	my @deadlocked = grep { $_ ne 'multi' && ($stat{$_}{err}{'40P01'} // 0) > 0 } @RECIPES;
	is(scalar @deadlocked, 0, '40P01 (deadlock detected) only for multi-locks, whose two orders close real cycles')
	  or diag("40P01 in: @deadlocked");
	my @bad_cleanup = grep { !/^(ok|dead|error (08006|57P01))$/ } keys %cleanup;
	is(scalar @bad_cleanup, 0, 'the cleanup statements (zk_release_all) did not fail') or diag("@bad_cleanup");
	for my $r (@RECIPES)
	{
		cmp_ok($stat{$r}{ok} // 0, '>=', $MIN_OK, "$r: real work ($MIN_OK or more successful iterations)");
		cmp_ok($stat{$r}{calm_ok} // 0, '>', 0, "$r: works again after the faults (successes in the calm phase)");
	}
	cmp_ok($stat{revoke}{ok} // 0, '>', 0, 'revocation: a revocable holder was told of its revocation');
	cmp_ok(($cur{$_}{ok} // 0), '>', 0, "Curator $_: got through") for map { $_->{id} } @actors;
};

############################################################################
# Memory of the worker over the calm phase
############################################################################
subtest 'the worker\'s memory stays flat over the calm phase' => sub {
	ok($mem0 && $mem1, "the worker's memory was read from /proc/$calm_worker/status");
	if ($mem0 && $mem1)
	{
		my $grow = $mem1->{VmRSS} - $mem0->{VmRSS};
		note(sprintf('worker %d over the calm phase (%d iterations): VmRSS %d -> %d kB, RssAnon %d -> %d kB, VmHWM %d -> %d kB',
				$calm_worker, $calm_iters, $mem0->{VmRSS}, $mem1->{VmRSS}, $mem0->{RssAnon} // -1, $mem1->{RssAnon} // -1,
				$mem0->{VmHWM}, $mem1->{VmHWM}));
		# The worker allocates its request table once; per request it keeps only
		# short-lived copies of node lists.  32 MB is far above any working set it
		# should need and far below what a per-request leak over thousands of
		# requests adds.
		cmp_ok($grow, '<=', $MEM_BOUND_KB, "the worker's VmRSS grew by $grow kB over the calm phase (bound $MEM_BOUND_KB kB)");
		cmp_ok($mem1->{VmHWM} - $mem0->{VmRSS}, '<=', $MEM_BOUND_KB,
			"the worker's peak (VmHWM $mem1->{VmHWM} kB) stayed within $MEM_BOUND_KB kB of its size at the start of the calm phase");
	}
};

############################################################################
# The end: every client releases; nothing is left behind
############################################################################
subtest 'at the end every client releases and Curator\'s loops end with completed sections' => sub {
	quietly(sub { release_all('the end') });

	# Curator's loops end and report; then the peer closes its session.
	my %loop_done;
	for my $l ([ 'mxloop', 'cmxl' ], [ 'semloop', 'csml' ])
	{
		my ($cmd, $id) = @$l;
		$peer->send("stoploop $id");
		my $line = quietly(sub {
			my $deadline = time + 60;
			while (time < $deadline)
			{
				pump_peer();
				my ($i) = grep { $peer_other[$_] =~ /^(\Q$cmd\E|error) \Q$id\E(\s|$)/ } 0 .. $#peer_other;
				return splice(@peer_other, $i, 1) if defined $i;
				usleep(20_000);
			}
			return undef;
		});
		$loop_done{$id} = $line // 'no reply';
		my ($n) = ($line // '') =~ /^\Q$cmd $id\E done (\d+)/;
		cmp_ok($n // 0, '>', 0, "Curator $cmd ran to its end with completed sections: " . ($line // 'no reply'));
	}
	my @stray = grep { !/^(mxev|semev|stopping) / } @peer_other;
	note('other Curator replies: ' . join(' | ', @stray)) if @stray;
	$peer->quit;
};

# (1) No lock, lease, locks/ or member node: ephemeral nodes of an expired
# session go when the server expires it (session timeout 10 s).
subtest 'nothing is left behind: no node of any recipe, nothing in zk_status' => sub {
	my $left;
	my $ok = wait_until(sub { $left = leftovers(); $left && !grep { !m{^/soak/(db/ready|b)$} } @$left }, 30,
		'no lock, lease or member node left');
	ok($ok, 'no lock, lease, locks/ or member node is left under ' . join(' ', @PATHS))
	  or diag_nodes(grep { !m{^/soak/(db/ready|b)$} } @{ $left // [] });

	# diag_nodes(@paths): who left these nodes: owner session, creation zxid and
	# the data the creator wrote (zklock writes its backend's identity).
	sub diag_nodes
	{
		my @paths = @_;
		my $p = eval { new_peer($zk, 'diag') };
		diag("zklock's session: " . status_row($node)->{session_id} . '; faults: '
			  . join('; ', map { sprintf('%.1f s %s', $_->[1], $_->[0]) } faults()));
		for my $path (@paths)
		{
			my $s = zk_stat($zk, $path);
			my $data = $p ? ($p->get($path) // '(gone)') : '?';
			diag("left: $path owner " . ($s ? "$s->{owner} czxid $s->{czxid}" : 'gone') . " data $data");
			my ($pid) = $data =~ /"pid":(\d+)/;
			diag("    failed iterations of its creator, backend $pid: " . join('; ', @{ $failed{$pid} // ['none'] }))
			  if defined $pid;
		}
		$p->quit if $p;
		return;
	}

	# (2) P/ready is persistent and only the last member to leave deletes it
	# (Curator's protocol): it may stay only when a membership was lost to a
	# fault (a member terminated or crashed, its session expired).
	my $ready = grep { $_ eq '/soak/db/ready' } @{ $left // [] };
	if ($ready)
	{
		cmp_ok($db_lost, '>', 0, "/soak/db/ready was left: a double barrier membership was lost to a fault ($db_lost)");
	}
	else
	{
		note("/soak/db/ready is not left (memberships lost to faults: $db_lost)");
	}

	# (3) A last round: two members enter and leave, and the barrier is removed;
	# then nothing but the directories is left.
	{
		my @s = map { ZklockTest::Session->new($node, "closing$_") } 1 .. 2;
		$_->start(q{SELECT zk_double_barrier_enter('/soak/db', 2, '10s')}) for @s;
		is(join(',', map { $_->result(30)->{out} } @s), 't,t', 'closing round: two members enter the double barrier');
		$_->start(q{SELECT zk_double_barrier_leave('/soak/db', '10s')}) for @s;
		is(join(',', map { $_->result(30)->{out} } @s), 't,t', 'closing round: and leave it');
		my $r = $s[0]->query(q{SELECT zk_barrier_remove('/soak/b')});
		like($r->{out}, qr/^[tf]$/, "closing round: the barrier is removed ($r->{out})");
		$_->quit for @s;
	}
	# (after a failure of (1) one look is enough: the nodes are there to stay)
	$ok = wait_until(sub { $left = leftovers(); $left && !@$left }, $ok ? 30 : 0.1, 'an empty tree');
	ok($ok, 'every recipe directory is empty at the end') or diag('left: ' . join(' ', @{ $left // ['?'] }));

	my $st = status_row($node);
	is("$st->{locks_held} $st->{slots_used}", '0 0', 'zk_status: no lock held, no slot of the request table in use');
};

############################################################################
# The server log
############################################################################
subtest 'the server log has no unexpected ERROR or FATAL, no crash but the test\'s SIGKILL' => sub {
	my $log = log_contents($node);
	my (@unexpected, %log_count);
	for my $line (split /\n/, $log)
	{
		if ($line =~ /was terminated by signal (\d+)/)
		{
			push @unexpected, $line unless $1 == 9 && defined $killed_pid && $line =~ /\(PID $killed_pid\)/;
			next;
		}
		if ($line =~ /\bTRAP:|\bPANIC:/)
		{
			push @unexpected, $line;
			next;
		}
		next unless $line =~ /\[(\d+)\] ([0-9A-Z]{5}) (?:\S+ )?(ERROR|FATAL):\s+(.*)$/;
		my ($pid, $code, $level, $msg) = ($1, $2, $3, $4);
		my $ok = 0;
		if ($level eq 'ERROR')
		{
			$ok = 1 if $code eq '08006' && $msg =~ /^zookeeper is not reachable$|^zookeeper lock ".*" was (lost as it was granted|granted but cannot be proven held)$/;
			$ok = 1 if $code eq '08006' && $sessions_given_up && $msg =~ /^zookeeper session .* while waiting for lock ".*"$/;
			$ok = 1 if $code eq '40000' && $msg =~ /^zookeeper lock ".*" was lost before commit$|^zookeeper locks of this transaction cannot be proven held at commit$/;
			$ok = 1 if $code eq '55P03' && $msg =~ /^canceling statement due to lock timeout$/;
			$ok = 1 if $code eq '40P01' && $msg =~ /^deadlock detected$/;
			$ok = 1 if $code eq '57014' && $msg =~ /^canceling statement due to user request$/ && ($cancel_workers{$pid} || $cancelled{$pid});
		}
		else
		{
			$ok = 1 if $code eq '57P01' && $msg =~ /^terminating connection due to administrator command$/ && $terminated{$pid};
			$ok = 1 if $code eq '57P01' && $msg =~ /^terminating background worker "zklock.*" due to administrator command$/ && $sigterm_workers{$pid};
			$ok = 1 if $code eq '57P03' && defined $t_kill && $msg =~ /^the database system is (starting up|in recovery mode|not yet accepting connections)$/;
		}
		if ($ok)
		{
			$log_count{"$level $code $msg" =~ s/"[^"]*"/"..."/gr}++;
		}
		else
		{
			push @unexpected, $line;
		}
	}
	note("expected ERROR/FATAL lines in the log:\n" . join("\n", map { "  $log_count{$_} x $_" } sort keys %log_count));
	is(scalar @unexpected, 0, 'the server log has no unexpected ERROR or FATAL, no crash but the SIGKILL of the test')
	  or diag(join("\n", @unexpected > 40 ? (@unexpected[ 0 .. 39 ], '... ' . (@unexpected - 40) . ' more') : @unexpected));
	if (defined $killed_pid)
	{
		like($log, qr/\(PID $killed_pid\) was terminated by signal 9/, 'the log shows the SIGKILL of the test');
	}
	# the worker compares its index of lock paths with the table every second
	unlike($log, qr/zklock: path index/, 'no worker found its index of lock paths disagreeing with the request table');
};

for my $c (@cl)
{
	$c->{sess}->quit if $c->{sess};
}
$node->stop;
stop_zk($zk);
note(sprintf('901_soak took %.0f s (seed %d)', time - $t_begin, $SEED));
done_testing();


# 905_adversary: one seeded, randomized adversary for the whole product.
#
# What users rely on: whatever SQL sessions of two PostgreSQL clusters and a
# Java service (Apache Curator) do on shared paths with every recipe, and
# whatever fails or is changed meanwhile, zklock never grants what another
# client holds, never answers a counter write wrongly, never hangs and fails
# only with documented SQLSTATEs.  Nothing here is written for one bug: the
# operations, the faults and the operator actions are drawn at random from a
# seed, and the checks look only at what the clients saw and committed.
#
# The operations (8 SQL sessions per cluster, each drawing one at a time; a
# Curator peer with one thread per actor on the same paths):
#   mutex: _xact, session, try, reentrant (acquired twice, released once
#     before its section: still held), revocable (and
#     zk_revoke of the held path, which must ask exactly one holder), a bare
#     zk_revoke; semaphore mutex (_xact and session); multi-lock over the two
#     mutex paths (either order); read/write lock: read _xact, write _xact, a
#     write held then downgraded (zk_read_lock_acquire on the same path while
#     the write lock is held, then the write released, the read section in a
#     transaction of its own), a failed upgrade (a reader's write acquire with
#     a timeout must say false); semaphore of 3 (1 or 2 leases, _xact);
#     barrier set / remove / wait; double barrier of 2 (enter, hold, leave);
#     leader latch (join, await, zk_leader_xact section, sometimes leave);
#     counters: zk_atomic_long_add (+1), compare-and-set and try-set to values
#     unique to the operation, set.  Curator: an InterProcessMutex loop with
#     fencing tokens, a revocable mutex, two read/write lock actors on each of
#     the two read/write lock paths (writes and reads, some held for
#     seconds), a semaphore mutex, a semaphore lease, a barrier waiter, a
#     LeaderLatch that joins and closes, atomic adds, a multi-lock over the
#     two mutex paths (in SQL's order), a member of the double barrier
#     (enter, hold, leave), and DistributedAtomicLong's compare-and-set and
#     SharedCount's trySetCount on SQL's counters, to values of their own.
#   Sections are held mostly briefly, sometimes for seconds, sometimes for
#   8 s to twice the session timeout (at least 30 s, at most 40 s: longer
#   than any cut-off; long enough for a session to expire under them); between the
#   transactions of an operation (a session lock's section and its release,
#   a write section and its downgrade) the session may idle as long.  A SQL section
#   is one transaction that holds the lock and inserts a row (enter and exit
#   from clock_timestamp(), the machine's CLOCK_REALTIME, as Curator's
#   sections, timed here from when its acquire was answered to when its
#   release was asked); zklock.check_session_locks_at_commit is on, so a row
#   exists only if COMMIT accepted the lock as held throughout.  30% of the
#   transactions set zklock.commit_confirm.  zklock.lock_cache is on (kept
#   nodes idle for 3 s, paths cool down for 2 s): half of the mutex
#   operations go to a path of their two client pairs (/adv/own/I, for AI,
#   A(I+4), BI and B(I+4) only, and Curator's actor cown now and then; the
#   local handover passes the lock between AI and A(I+4)), where a session's next
#   mutex is often granted from the node its last one kept, and the other
#   cluster, Curator and the faults meet kept nodes; half of the mutex
#   sections ask for their fencing token (those leave no node to keep).
#
# The faults and operator actions, drawn from the seed (a schedule fixed
# before the run: the seed repeats it), every 1.5-6 s or, in a storm, 0.2-1.5 s
# after the last one, several at once, most on the cluster the last one
# struck (the ensemble's below):
#   black hole of a cluster's connections or only their replies lost
#   (at once, or from the next write on: its reply is the first lost) or
#   held back and handed on late (a slow path),
#   reset connections, worker SIGSTOP then SIGCONT (a black hole or a stall
#   lasts 0.3-2 times the session timeout its cluster is set to when it
#   strikes, 1-30 s), worker SIGTERM, worker SIGKILL (a third of the
#   faults that cut a cluster off or stop its worker wait up to 5 s for a
#   moment when a SQL session of the cluster holds a lock another client
#   waits for, a third for a SQL transaction that holds a lock with enough
#   of its hold to go for its COMMIT to come after the fault: the fault's
#   length for a cut-off or a stall, else the session timeout (10 s at
#   most); a reload that changes the session timeout always waits for the
#   latter),
#   pg_terminate_backend and SIGKILL of a backend that holds or waits,
#   PostgreSQL stopped -m immediate and started, the standalone ZooKeeper
#   server stopped for 2-10 s and started again, ZooKeeper expiring zklock's
#   session (ZkTool), and reloads that change zklock.session_timeout (10 s,
#   20 s, 60 s), zklock.hosts (the same server through another proxy),
#   zklock.lease_margin, zklock.server_tick_time and zklock.lock_cache (off,
#   and on again), a lock node of a SQL waiter on a mutex path deleted from
#   outside (never the lowest: the peer checks the lowest is there in the
#   same transaction; a local handover may give the lock to that waiter at
#   once, which must then lose it before anyone else gets it), the Curator
#   client's JVM stopped (SIGSTOP) for 0.3-2 times its session timeout of
#   10 s and continued (its holders go on holding while the server expires
#   its session), and steps of the wall clock (below).
#
# The checks, from outside, per recipe:
#   - no two committed sections of a mutex, semaphore mutex, write lock or
#     leader overlap, Curator's included, and no reader beside a writer;
#   - fencing tokens strictly increase per mutex path in order of entering;
#   - never more than 3 semaphore leases held at once;
#   - counters: each value from initial + 1 to final was made by one add:
#     the add that answered it (no value answered twice), or an add in
#     doubt (a dead backend, the 08006 that says the write left, a cancel)
#     running when it can have been written, each used once (a Curator add
#     that took a retry may make several values, inside its own run); a
#     refused add (any other error: never sent) makes none; compare-and-set and try-set: following the
#     chain of unique values back from the final one, every write on it was
#     applied, so none of them may have answered false, and every true
#     answer must be on it (Curator's writes are on the same chains; a
#     Curator write that answered false is excused only when its client's
#     connection changed state meanwhile, as Curator sends a write again
#     after a lost answer);  set: the final value is one a set wrote;
#   - a barrier wait never passes while the barrier was certainly set, a
#     double barrier enter never passes alone (Curator's member included);
#   - revocation: a zk_revoke that answered 1 while Curator's revocable
#     holder of /adv/m2 held it steadily was reported by Curator, and a SQL
#     holder that revoked its own hold and held on is told by
#     zk_revocation_requested() (when no fault touched its cluster);
#   - zk_revoke never asks more than one holder of a mutex; a reentrant
#     acquire and a downgrade are granted; an upgrade is never granted;
#   - no statement runs past its timeouts plus the holds it asked for plus
#     75 s (a session timeout and zklock.connect_timeout), counted from its
#     start and from the last fault on its cluster or ZooKeeper, every
#     error carries a documented SQLSTATE, and none is 40P01 (deadlock
#     detected): the multi-locks take their paths in one order, so however
#     long the waits no cycle closes (with ZKLOCK_ADVERSARY_CYCLES=1 they
#     take both orders, and 40P01 is allowed for them only, and for a mutex
#     waiter queued ahead of one in their cycle: queued_in_multi_cycle),
#     but for the cycles an upgrade closes with the nodes queued between
#     its read node and its write node: allowed only when the DETAIL is a
#     closed chain of read/write lock waits on the path whose members ran
#     ops there, one an upgrade (upgrade_cycle);
#   - no COMMIT of a section returned after ZooKeeper's transaction log
#     says the server ended (expired or closed) the session its lock was
#     in, whether or not anyone else took the lock (the lease, checked
#     directly), and after the load a lease probe asks one COMMIT across a
#     cut-off that outlasts the session timeout, for certain (it must
#     fail, and at least one such COMMIT must have been asked);
#   - after the load, probes make certain what the load leaves to chance
#     (each a check of its own, and their sections and answers go through
#     the checks above): COMMITs asked from 600 ms to 5 ms before the
#     lease's end with a commit that takes 100 ms (none asked under
#     zklock.commit_min_lease succeeds, none returns after the lease's
#     end), a multi-lock whose second mutex is held (it says false), an
#     add whose write's reply is lost (in doubt or answered, and counted
#     exactly), an add whose read is answered late, after Curator added
#     to the counter (it answers a value of its own), a local handover to a waiter whose node was deleted from
#     outside with a waiter of the other cluster behind it, a client of
#     the other cluster queued behind a kept node while its first listing
#     is held back (it gets the lock within 4 s), and the worker stopped
#     past its session timeout with a downgrade asked in the stall (not
#     granted), a statement under zklock.cancel_on_loss (cancelled, ZK001,
#     before the worker runs again) and an idle transaction whose COMMIT
#     comes after the wall clock was stepped back 30 s (40000);
#   - once everything is released no lock, lease, member or latch node is
#     left in ZooKeeper.
# A session closed from outside by ZkTool (with its password) is not an
# expiry the lease can see (the failure model: only commit_confirm catches
# nodes gone from outside), so a SQL section that ran while its cluster's
# session was being closed that way, without commit_confirm, is excused
# from the checks (and counted).  So is a pair with a Curator section
# whose session (the Curator client's when its acquire was asked) the
# server ended before its exit, from the end that ZooKeeper's transaction
# log records on (Curator's recipes do not stop the holder, and an acquire
# waiting through LOST can return on a node of the session it gave up):
# the faults reach its session too.  Every excused pair is printed.
# On a violation it prints the seed, the schedule of faults, and the history
# around the violating pair: the operations on its path and the faults from
# 30 s before the first section to the end of the second, with times.
#
# Two modes: standalone (one ZooKeeper server) and ensemble (3 servers, each
# in a network namespace of its own, test/perl/ZklockNet.pm, as in 502 and
# 900), where the faults also include a follower cut off from the other
# servers while its clients keep their link, the leader killed and the
# leader cut off in a minority.
#
# Both clusters run under libfaketime (test/perl/ZklockClock.pm, as in 503),
# and the schedule also steps the wall clock of PostgreSQL's processes,
# forward or back, by 1-10 s or 30-300 s.  The sections are timed in real
# time all the same (adv_us() takes the offset in force off the clock).  A
# wait's timeout follows the wall clock, as lock_timeout does, so the steps
# back during a statement lengthen what it may take.
#
# ZKLOCK_ADVERSARY_SEED repeats a run (the mode, the fault schedule and each
# client's draws; the interleaving depends on timing), ZKLOCK_ADVERSARY_MODE
# (standalone or ensemble) overrides the mode the seed draws (odd seeds:
# ensemble), ZKLOCK_ADVERSARY_SECONDS sets the length of the load (default
# 120; CI runs the default, so each CI run draws a seed and a mode).
# `bash test/all.sh adversary --minutes N [--seed S] [--mode M]` runs only
# this test for N minutes.
use strict;
use warnings;
my ($SEED, $ENSEMBLE);
BEGIN
{
	# the seed also draws the mode (odd: ensemble), unless it is set; both
	# are kept in the environment for the re-execution in the namespaces
	require Time::HiRes;
	$SEED = $ENV{ZKLOCK_ADVERSARY_SEED} //= int(Time::HiRes::time() * 1000) % 1000000;
	$ENV{ZKLOCK_ADVERSARY_MODE} //= $SEED % 2 ? 'ensemble' : 'standalone';
	die "ZKLOCK_ADVERSARY_MODE must be standalone or ensemble\n" unless $ENV{ZKLOCK_ADVERSARY_MODE} =~ /^(standalone|ensemble)$/;
	$ENSEMBLE = $ENV{ZKLOCK_ADVERSARY_MODE} eq 'ensemble';
	if ($ENSEMBLE) { require ZklockNet; ZklockNet::enter_private_network(); }
}
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use List::Util qw(max);
use IPC::Run;
use ZklockTest;
use ZklockFault;
use ZklockProxy;
use ZklockLoad;
use ZklockNet;
use ZklockClock;

my $SECONDS = $ENV{ZKLOCK_ADVERSARY_SECONDS} // 120;
# multi-locks in both orders (ZKLOCK_ADVERSARY_CYCLES=1): real cycles, each
# to be broken with 40P01; by default one order, so no cycle can close and
# no session may ever get 40P01 (the deadlock detector's load run)
my $CYCLES = $ENV{ZKLOCK_ADVERSARY_CYCLES} // 0;
my $SESSIONS = 8;            # per cluster
my $HANG_SLACK = 75;         # a statement may run its waits and holds plus this (the longest
                             # session timeout, 60 s, + zklock.connect_timeout, 15 s), counted
                             # from its start or from the last fault on its cluster or on
                             # ZooKeeper during it, whichever is later (last_fault)
my $CALM_SECS = 10;
my @CLUSTERS = ('A', 'B');
# the lease probe's read/write lock (below), used by nothing else
my $PROBE_PATH = '/adv/probe';
my %PATH = (m1 => '/adv/m1', m2 => '/adv/m2', sm => '/adv/sm', rw => '/adv/rw', rw2 => '/adv/rw2', sem => '/adv/sem',
	b => '/adv/b', db => '/adv/db', lead => '/adv/lead', cnt => '/adv/cnt', cas => '/adv/cas',
	ts => '/adv/ts', set => '/adv/set');
# mutex paths of two client pairs each: /adv/own/I is taken by clients AI,
# A(I+4), BI and B(I+4) only (and now and then by Curator's actor cown), so
# the lock cache keeps its nodes and grants from them, other clients meet
# them, and two sessions of one cluster hand the lock to each other
my $N_OWN = 4;
my @OWN = map { "/adv/own/$_" } 1 .. $N_OWN;
my $SEM_MAX = 3;
my $N_CNT = 12;              # add counters /adv/cnt/0.. (an overrun is seen per counter)
my @CNT = map { "/adv/cnt/$_" } 0 .. $N_CNT - 1;
# 40P01: a deadlock broken; only a multi-lock against one taken in the other
# order closes a cycle here (checked below)
my %DOCUMENTED = map { $_ => 1 } qw(08006 40000 40P01 55P03 57014 57P01 57P02 57P03 55000 55006 ZK001);

alarm($SECONDS + 240) if !defined $ENV{ZKLOCK_TEST_ALARM} && $SECONDS + 240 > 300;
my $MODE = $ENSEMBLE ? 'ensemble' : 'standalone';
note("905_adversary: seed $SEED, $MODE, load for ${SECONDS}s (ZKLOCK_ADVERSARY_SEED=$SEED repeats it)");
diag("905_adversary: seed $SEED, $MODE, ${SECONDS}s");
my $t_begin = time;

############################################################################
# Random streams: one for the schedule, one per client, all from the seed
# (a 31-bit LCG each, so one stream's draws do not depend on the others').
############################################################################
sub stream { my ($k) = @_; return { s => (($SEED * 7919 + $k * 104729 + 12345) % 2147483647) || 1 }; }
sub r01 { my ($st) = @_; $st->{s} = ($st->{s} * 1103515245 + 12345) % 2147483648; return $st->{s} / 2147483648; }
sub runi { my ($st, $lo, $hi) = @_; return $lo + ($hi - $lo) * r01($st); }
sub rpick { my ($st, @a) = @_; return $a[ int(r01($st) * @a) ]; }
sub rweighted
{
	my ($st, $w) = @_;    # [ [ item, weight ], ... ]
	my $sum = 0;
	$sum += $_->[1] for @$w;
	my $x = r01($st) * $sum;
	for (@$w) { return $_->[0] if ($x -= $_->[1]) < 0; }
	return $w->[-1][0];
}
# hold times: mostly short, sometimes seconds, sometimes long enough for a
# session to expire under the section: up to $long s (default 30)
sub rhold
{
	my ($st, $long) = @_;
	my $x = r01($st);
	return runi($st, 0.005, 0.08) if $x < 0.72;
	return runi($st, 0.2, 3) if $x < 0.90;
	return runi($st, 8, $long // 30);
}

############################################################################
# ZooKeeper, proxies, clusters, Curator
############################################################################
# standalone: one server; ensemble: 3 servers, each in a network namespace
# of its own (test/perl/ZklockNet.pm), so that one can be cut off from the
# others while its clients keep their link.  Each cluster reaches the
# servers through two sets of proxies (one per server): zklock.hosts names
# one set, a reload may switch to the other (the same servers).
my $zk = $ENSEMBLE ? start_netns_ensemble(tick => 500, sync_limit => 20) : start_zk();
my @members = $ENSEMBLE ? netns_members() : ();
my @upstreams = $ENSEMBLE ? map { $_->{connect} } @members : ($zk);
my (%node, %proxies, %hosts_ix);
sub hosts_of { my ($c, $i) = @_; return join(',', map { $_->connect } @{ $proxies{$c}[$i] }); }
my $sched = stream(0);
my %conf_now;    # cluster => { session_timeout, lease_margin, server_tick_time, hosts }
for my $c (@CLUSTERS)
{
	$proxies{$c} = [ map { [ map { ZklockProxy->start($_) } @upstreams ] } 0 .. 1 ];
	$hosts_ix{$c} = 0;
	my $to = rpick($sched, '10s', '60s');
	$conf_now{$c} = { session_timeout => $to, lease_margin => '1s', server_tick_time => '500', hosts => 0,
		lock_cache => 'on' };
	# under libfaketime: the schedule steps the wall clock of its processes
	$node{$c} = new_faketime_node("adv$c", hosts_of($c, 0), qq{zklock.session_timeout = '$to'
zklock.connect_timeout = '15s'
zklock.check_session_locks_at_commit = on
zklock.lock_cache = on
zklock.lock_cache_idle = '3s'
zklock.lock_cache_backoff = '2s'
max_connections = 40
restart_after_crash = on
log_min_messages = warning
log_statement = none
log_line_prefix = '%m [%p] %e %q%a '
});
	note("cluster $c: session_timeout $to, hosts " . hosts_of($c, 0) . ' (or ' . hosts_of($c, 1) . ')');
}

my $setup = q{
CREATE TABLE adv_sections(client text, op bigint, recipe text, path text, mode text, token bigint, qty int,
  enter_us bigint, exit_us bigint, sid_enter text, sid_exit text,
  confirm text DEFAULT current_setting('zklock.commit_confirm', true));
-- the worker's ZooKeeper session now (the session a lock granted now is in)
CREATE FUNCTION adv_sid() RETURNS text LANGUAGE sql VOLATILE AS $$ SELECT session_id FROM zk_status() $$;
-- the real time (µs): the cluster's wall clock, which the schedule steps,
-- less the offset in force (read around the clock, again if a step came
-- between)
CREATE FUNCTION adv_us() RETURNS bigint LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  o1 text;
  o2 text;
  t numeric;
BEGIN
  LOOP
    o1 := pg_read_file('OFFSET_FILE');
    t := extract(epoch FROM clock_timestamp());
    o2 := pg_read_file('OFFSET_FILE');
    EXIT WHEN o1 = o2;
  END LOOP;
  RETURN ((t - btrim(o1, E' \n')::numeric) * 1000000)::bigint;
END $$;

-- One lock section in the caller's transaction: acquire, hold, row.
-- 'ok', 'timeout' or 'wrong: ...'.  Session locks stay held: the caller
-- releases them after COMMIT.
CREATE FUNCTION adv_lock(op bigint, client text, kind text, p text, hold float8, wait interval, q int DEFAULT 1)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  ok boolean;
  t0 bigint;
  sid0 text;
  tok bigint;
  ls text[];
  n int;
  ps text[];
  x text;
  mode text := 'x';
  recipe text := 'mutex';
BEGIN
  IF kind = 'mutex_xact' THEN ok := zk_mutex_acquire_xact(p, wait);
  ELSIF kind = 'mutex' THEN ok := zk_mutex_acquire(p, wait);
  ELSIF kind = 'mutex_try' THEN ok := zk_mutex_try_acquire(p);
  ELSIF kind = 'mutex_reentrant' THEN
    ok := zk_mutex_acquire(p, wait);
    -- a reentrant acquire waits only while the lease is not valid: with
    -- the lease valid at the call it says true at once
    x := (SELECT (lease_remaining IS NOT NULL AND lease_remaining > interval '1s')::text FROM zk_status());
    IF ok AND NOT zk_mutex_acquire(p, wait) THEN
      IF x = 'true' AND EXISTS (SELECT 1 FROM zk_locks WHERE pid = pg_backend_pid() AND path = p AND state = 'held') THEN
        RETURN 'wrong: reentrant acquire refused with the lease valid';
      END IF;
    ELSIF ok THEN
      -- held twice: one release of the two leaves it held (as
      -- pg_advisory_lock and Curator's InterProcessMutex count holds), and
      -- the section below runs on the hold left.  A release that says
      -- false found the lock lost; one that says true dropped one hold, and
      -- the lock is still this backend's, held or lost since (its row says
      -- so), not being given up
      IF zk_mutex_release(p) AND NOT EXISTS (SELECT 1 FROM zk_locks
          WHERE pid = pg_backend_pid() AND path = p AND state IN ('held', 'lost')) THEN
        RETURN 'wrong: the first of two releases of a reentrant mutex gave it up';
      END IF;
    END IF;
  ELSIF kind = 'mutex_revocable' THEN ok := zk_mutex_acquire(p, wait, true);
  ELSIF kind = 'semmutex_xact' THEN ok := zk_semaphore_mutex_acquire_xact(p, wait);
  ELSIF kind = 'semmutex' THEN ok := zk_semaphore_mutex_acquire(p, wait);
  ELSIF kind = 'read_xact' OR kind = 'upgrade' THEN ok := zk_read_lock_acquire_xact(p, wait); mode := 'r'; recipe := 'rw';
  ELSIF kind = 'write_xact' THEN ok := zk_write_lock_acquire_xact(p, wait); mode := 'w'; recipe := 'rw';
  ELSIF kind = 'write' THEN ok := zk_write_lock_acquire(p, wait); mode := 'w'; recipe := 'rw';
  ELSIF kind = 'multi' THEN
    ps := CASE WHEN NOT MULTI_CYCLES OR hashtext(client || op) % 2 = 0 THEN ARRAY['/adv/m1', '/adv/m2'] ELSE ARRAY['/adv/m2', '/adv/m1'] END;
    ok := zk_multi_lock_acquire(ps, wait);
  ELSIF kind = 'semaphore' THEN
    ls := zk_semaphore_acquire_xact(p, 3, q, wait);
    ok := ls IS NOT NULL;
    IF ok AND coalesce(array_length(ls, 1), 0) <> q THEN
      RETURN format('wrong: %s leases granted for %s', coalesce(array_length(ls, 1), 0), q);
    END IF;
    mode := 's'; recipe := 'semaphore';
  ELSE
    RAISE EXCEPTION 'unknown kind %', kind;
  END IF;
  IF NOT ok THEN RETURN 'timeout'; END IF;
  t0 := adv_us();
  sid0 := adv_sid();
  -- half of the mutex sections ask for their token: a holder that asks
  -- leaves a node the lock cache does not keep, the others may be granted
  -- from kept nodes (zklock.lock_cache is on)
  IF kind LIKE 'mutex%' AND hashtext(client || op || 'token') % 2 = 0 THEN
    tok := zk_lock_token(p);
  END IF;
  IF kind = 'mutex_revocable' THEN
    n := zk_revoke(p);
    IF n > 1 THEN RETURN format('wrong: zk_revoke asked %s holders of a mutex', n); END IF;
  END IF;
  PERFORM pg_sleep(hold);
  -- the revocable holder asked itself to give the lock up: is it told?
  IF kind = 'mutex_revocable' THEN
    RAISE NOTICE 'adv_revoke % %', n, p IN (SELECT zk_revocation_requested());
  END IF;
  IF kind = 'upgrade' THEN
    IF zk_write_lock_acquire(p, '200ms') THEN
      -- (qualified: adv_lock has a variable recipe of its own)
      x := (SELECT string_agg(l.state, ',') FROM zk_locks l WHERE l.pid = pg_backend_pid() AND l.path = p AND l.recipe = 'read');
      PERFORM zk_write_lock_release(p);
      IF x = 'held' THEN
        RETURN 'wrong: a reader''s write acquire (upgrade) was granted';
      END IF;
      RETURN 'upgrade-after-loss';
    END IF;
  END IF;
  IF kind = 'multi' THEN
    INSERT INTO adv_sections VALUES (client, op, 'mutex', '/adv/m1', 'x', NULL, 1, t0, adv_us(), sid0, adv_sid()),
                                    (client, op, 'mutex', '/adv/m2', 'x', NULL, 1, t0, adv_us(), sid0, adv_sid());
  ELSE
    INSERT INTO adv_sections VALUES (client, op, recipe, p, mode, tok, q, t0, adv_us(), sid0, adv_sid());
  END IF;
  RAISE NOTICE 'adv_section % % %', sid0, t0, adv_us();
  RETURN 'ok';
END $$;

-- The downgrade: in a transaction of its own, after this session took the
-- write lock (a session lock, in the transaction before), the read lock on
-- the same path, then the write released, then the read section.
CREATE FUNCTION adv_downgrade(op bigint, client text, p text, hold float8, wait interval)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  t1 bigint;
  sid1 text;
  st text;
BEGIN
  -- as a user would: right after the write acquire said true, whatever
  -- happened to the lock since (zk_locks is only looked at to know
  -- whether the write acquire of this operation succeeded)
  SELECT string_agg(state, ',') INTO st FROM zk_locks
    WHERE pid = pg_backend_pid() AND path = p AND recipe = 'write';
  IF st IS NULL THEN RETURN 'no-write'; END IF;
  IF NOT zk_read_lock_acquire(p, wait) THEN RETURN 'downgrade-false'; END IF;
  t1 := adv_us();
  sid1 := adv_sid();
  PERFORM zk_write_lock_release(p);
  PERFORM pg_sleep(hold);
  INSERT INTO adv_sections VALUES (client, op, 'rw', p, 'r', NULL, 1, t1, adv_us(), sid1, adv_sid());
  RAISE NOTICE 'adv_section % % %', sid1, t1, adv_us();
  RETURN 'ok';
END $$;

CREATE FUNCTION adv_leader(op bigint, client text, hold float8, wait interval)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  t0 bigint;
  sid0 text;
BEGIN
  IF NOT EXISTS (SELECT 1 FROM zk_locks WHERE pid = pg_backend_pid() AND recipe = 'leader_latch') THEN
    PERFORM zk_leader_join('/adv/lead', client);
  END IF;
  IF NOT zk_leader_await('/adv/lead', wait) THEN RETURN 'notleader'; END IF;
  IF NOT zk_leader_xact('/adv/lead') THEN RETURN 'notleader'; END IF;
  t0 := adv_us();
  sid0 := adv_sid();
  PERFORM pg_sleep(hold);
  INSERT INTO adv_sections VALUES (client, op, 'leader', '/adv/lead', 'x', NULL, 1, t0, adv_us(), sid0, adv_sid());
  RAISE NOTICE 'adv_section % % %', sid0, t0, adv_us();
  RETURN 'ok';
END $$;

CREATE FUNCTION adv_dbarrier(hold float8, wait interval) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  t bigint;
BEGIN
  IF NOT zk_double_barrier_enter('/adv/db', 2, wait) THEN RETURN 'timeout'; END IF;
  t := adv_us();
  PERFORM pg_sleep(hold);
  RETURN CASE WHEN zk_double_barrier_leave('/adv/db', wait) THEN 'ok ' ELSE 'leave-timeout ' END || t;
END $$;

CREATE FUNCTION adv_barrier_wait(wait interval) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  RETURN CASE WHEN zk_barrier_wait('/adv/b', wait) THEN 'true ' || adv_us() ELSE 'false' END;
END $$;

-- the value read is also said in a NOTICE: when the write then fails, it
-- is still known (the chain of values goes through writes in doubt)
CREATE FUNCTION adv_cas(newv bigint) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  v bigint := zk_atomic_long_get('/adv/cas');
BEGIN
  RAISE NOTICE 'adv_read %', v;
  RETURN v || ' ' || zk_atomic_long_compare_and_set('/adv/cas', v, newv);
END $$;

CREATE FUNCTION adv_tryset(newv int) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  v int;
  ver int;
BEGIN
  SELECT value, version INTO v, ver FROM zk_shared_count_get_versioned('/adv/ts');
  RAISE NOTICE 'adv_read %', v;
  RETURN v || ' ' || ver || ' ' || zk_shared_count_try_set('/adv/ts', newv, ver);
END $$;
};
for my $c (@CLUSTERS)
{
	my $f = clock_offset_file($node{$c});
	$node{$c}->safe_psql('postgres',
		$setup =~ s/OFFSET_FILE/$f/gr =~ s/MULTI_CYCLES/$CYCLES ? 'true' : 'false'/ger);
}

# counters start at known values
$node{A}->safe_psql('postgres', q{SELECT zk_atomic_long_set('/adv/cnt/' || k, 0) FROM generate_series(0, } . ($N_CNT - 1) . q{) k});
$node{A}->safe_psql('postgres', q{SELECT zk_atomic_long_set('/adv/cas', 0),
	zk_shared_count_set('/adv/ts', 0), zk_atomic_long_set('/adv/set', 0)});
my $cnt0 = $node{B}->safe_psql('postgres', q{SELECT sum(zk_atomic_long_get('/adv/cnt/' || k)) FROM generate_series(0, } . ($N_CNT - 1) . q{) k});
is($cnt0, '0', 'the counters start at 0 (seen from cluster B)');

my $peer = new_peer($zk, 'curator');    # straight to the server(s), never faulted
# the ensemble's faults reach Curator too: it reports its connection states
$peer->send('states');
my $states_on = $peer->wait_reply(qr/^states on/, 30) // '';
like($states_on, qr/^states on 0x[0-9a-f]{16}$/, 'the Curator client reports its connection states and its session');
# [ time (epoch s), session id ] of the Curator client, as it reported them
my @cur_sids = ([ time, $states_on =~ /(0x[0-9a-f]{16})/ ? $1 : 'none' ]);

############################################################################
# The history
############################################################################
my $t0;              # start of the load
my @ops;             # every SQL and Curator operation: { id, who, client, kind, path, start, end, out, sqlstate, ... }
my $op_seq = 0;
my @wrong;           # wrong answers seen by the clients, as [ text, op ]
my @hangs;
my %err_count;       # sqlstate => n
my %err_example;
my $stopping = 0;

sub rel { my ($t) = @_; return defined $t ? sprintf('%.3f', $t - $t0) : '?'; }

############################################################################
# The SQL sessions
############################################################################
my @KINDS = (
	[ mutex_xact => 10 ], [ mutex => 4 ], [ mutex_try => 3 ], [ mutex_reentrant => 2 ], [ mutex_revocable => 2 ],
	[ revoke => 1 ], [ semmutex_xact => 3 ], [ semmutex => 1 ], [ multi => 3 ], [ read_xact => 5 ],
	[ write_xact => 5 ], [ downgrade => 14 ], [ upgrade => 3 ], [ semaphore => 4 ], [ barrier_set => 1 ],
	[ barrier_remove => 1 ], [ barrier_wait => 2 ], [ dbarrier => 2 ], [ leader => 4 ], [ leader_leave => 1 ],
	[ add => 10 ], [ cas => 6 ], [ tryset => 6 ], [ set => 2 ]);
my %COUNTER_KIND = map { $_ => 1 } qw(add cas tryset set);

my @cl;
for my $c (@CLUSTERS)
{
	for my $i (1 .. $SESSIONS)
	{
		push @cl, { name => "$c$i", cluster => $c, rng => stream(100 * ($c eq 'A' ? 1 : 2) + $i),
			sess => undef, retry_at => 0, next_at => 0 };
	}
}

sub ival { my ($s) = @_; return sprintf("'%.3fs'", $s); }

# A wait's timeout is measured on the wall clock, as PostgreSQL's own
# lock_timeout and statement_timeout are: a step back lengthens the
# waits under way by its size.  steps_back($cluster, $since): the seconds
# the clock of $cluster was stepped back since $since.
my @clock_steps;    # [ time, cluster, delta ]
# last_fault($c, $since): when (epoch) the latest fault that touched cluster
# $c (its own, or one of ZooKeeper's servers) was noted since $since, its
# end for a fault that lasts (a black hole healed, a worker continued, a
# server back), or 0.  Every fault lasts at most 30 s, and after it a
# request waits at most for the lease to run out (a session timeout) and
# zklock.connect_timeout: a statement still running later than its bound
# after both its start and that fault hangs.
# fault_touches($f, $c): the noted fault $f ([ what, seconds, detail ])
# touched cluster $c: its own, or one of ZooKeeper's servers (not a fault
# skipped or only announced)
sub fault_touches
{
	my ($f, $c) = @_;
	return $f->[0] =~ /^(\Q$c\E|ZooKeeper): / && $f->[0] !~ /skipped|aimed|already|nothing to change/;
}

# wait_cluster_connected($c): wait (up to 60 s) until cluster $c's worker is
# connected again
sub wait_cluster_connected
{
	my ($c) = @_;
	return wait_until(sub { my $s = try_status($node{$c}); return $s && $s->{state} eq 'connected'; }, 60, "cluster $c connected again");
}

sub last_fault
{
	my ($c, $since) = @_;
	for my $f (reverse faults())
	{
		my $at = $t0 + $f->[1];
		last if $at < $since;
		return $at if fault_touches($f, $c);
	}
	return 0;
}

sub steps_back
{
	my ($c, $since) = @_;
	my $back = 0;
	$back -= $_->[2] for grep { $_->[1] eq $c && $_->[0] >= $since && $_->[2] < 0 } @clock_steps;
	return $back;
}

# with_commit_times($sql): $sql with each COMMIT followed by a statement
# that says when it returned, "committed <µs>" in real time as adv_us(),
# only when it succeeded (psql's ERROR is the COMMIT's).  A COMMIT of a
# transaction an error aborted succeeds as a ROLLBACK and is said too; it
# wrote no section row, so no section is paired with it.
sub with_commit_times
{
	my ($sql) = @_;
	$sql =~ s/^COMMIT;/COMMIT;\nSELECT 'committed ' || adv_us() WHERE :'ERROR' = 'false';/mg;
	return $sql;
}

# op_sql($c, $op): the statements of one operation.
sub op_sql
{
	my ($c, $op) = @_;
	my $k = $op->{kind};
	my ($id, $n, $h, $w, $p) = ($op->{id}, $c->{name}, $op->{hold}, $op->{wait}, $op->{path});
	my $lock = sub { my ($kind, $q) = @_; sprintf("SELECT adv_lock(%d, '%s', '%s', '%s', %.3f, %s, %d)", $id, $n, $kind, $p, $h, ival($w), $q // 1) };
	# some transactions have COMMIT confirm their locks with ZooKeeper
	my $confirm = $op->{confirm} ? "\nSET LOCAL zklock.commit_confirm = on;" : '';
	return "BEGIN;$confirm\n" . $lock->($k) . ";\nCOMMIT;" if $k =~ /^(mutex_xact|semmutex_xact|read_xact|write_xact|upgrade)$/;
	return "BEGIN;$confirm\n" . $lock->($k, $op->{qty}) . ";\nCOMMIT;" if $k eq 'semaphore';
	# between the transactions of an operation the session may do other
	# work for a while, its session locks still held
	my $think = $op->{think} ? sprintf("\nSELECT pg_sleep(%.3f);", $op->{think}) : '';
	return "BEGIN;$confirm\n" . $lock->($k) . ";\nCOMMIT;$think\nSELECT zk_release_all();" if $k =~ /^(mutex|mutex_try|mutex_reentrant|mutex_revocable|semmutex|multi)$/;
	if ($k eq 'downgrade')
	{
		return "BEGIN;$confirm\n" . $lock->('write') . ";\nCOMMIT;$think\nBEGIN;$confirm\n"
		  . sprintf("SELECT adv_downgrade(%d, '%s', '%s', %.3f, %s)", $id, $n, $p, $op->{hold2}, $op->{dg_nowait} ? 'NULL' : ival($w))
		  . ";\nCOMMIT;\nSELECT zk_release_all();";
	}
	return "SELECT zk_revoke('$p');" if $k eq 'revoke';
	return "SELECT zk_barrier_set('$p');" if $k eq 'barrier_set';
	return "SELECT zk_barrier_remove('$p');" if $k eq 'barrier_remove';
	return 'SELECT adv_barrier_wait(' . ival($w) . ');' if $k eq 'barrier_wait';
	return sprintf('SELECT adv_dbarrier(%.3f, %s);', $h, ival($w)) if $k eq 'dbarrier';
	return sprintf("BEGIN;$confirm\nSELECT adv_leader(%d, '%s', %.3f, %s);\nCOMMIT;%s", $id, $n, $h, ival($w),
		$op->{leave} ? "\nSELECT zk_leader_leave('$p');" : '') if $k eq 'leader';
	return "SELECT zk_leader_leave('$p');" if $k eq 'leader_leave';
	return "SELECT zk_atomic_long_add('$p', 1);" if $k eq 'add';
	return "SELECT adv_cas($op->{newv});" if $k eq 'cas';
	return "SELECT adv_tryset($op->{newv});" if $k eq 'tryset';
	return "SELECT zk_atomic_long_set('$p', $op->{newv});" if $k eq 'set';
	die "unknown kind $k";
}

sub new_sql_op
{
	my ($c) = @_;
	my $g = $c->{rng};
	my $k = rweighted($g, \@KINDS);
	# a section may be held up to twice the session timeout its cluster is
	# set to (30 s at least, 40 s at most: longer than any cut-off, which
	# lasts 30 s at most)
	my ($to) = $conf_now{ $c->{cluster} }{session_timeout} =~ /^(\d+)s$/;
	my $long = 2 * $to < 30 ? 30 : 2 * $to > 40 ? 40 : 2 * $to;
	my $op = { id => ++$op_seq, who => $c->{cluster}, client => $c->{name}, kind => $k,
		hold => rhold($g, $long), hold2 => rhold($g, $long), wait => r01($g) < 0.7 ? runi($g, 0.3, 5) : runi($g, 5, 15),
		qty => 1 + int(r01($g) * 2) };
	my ($own) = $c->{name} =~ /(\d+)$/;
	$op->{path} =
	    $k =~ /^(mutex|revoke)/ ? rpick($g, $PATH{m1}, $PATH{m2}, $OWN[ ($own - 1) % $N_OWN ], $OWN[ ($own - 1) % $N_OWN ])
	  : $k =~ /^semmutex/ ? $PATH{sm}
	  : $k =~ /^(read_xact|write_xact|downgrade|upgrade)$/ ? rpick($g, $PATH{rw}, $PATH{rw2})
	  : $k eq 'multi' ? '/adv/m1+m2'
	  : $k eq 'semaphore' ? $PATH{sem}
	  : $k =~ /^barrier/ ? $PATH{b}
	  : $k eq 'dbarrier' ? $PATH{db}
	  : $k =~ /^leader/ ? $PATH{lead}
	  : $k eq 'add' ? rpick($g, @CNT)
	  : $PATH{ { cas => 'cas', tryset => 'ts', set => 'set' }->{$k} };
	$op->{newv} = 1000 + $op->{id} if $COUNTER_KIND{$k};
	$op->{leave} = r01($g) < 0.6 if $k eq 'leader';
	$op->{confirm} = r01($g) < 0.3;
	# a downgrade is granted at once: users ask it without a timeout
	$op->{dg_nowait} = r01($g) < 0.5 if $k eq 'downgrade';
	$op->{think} = r01($g) < 0.5 ? 0 : rhold($g) if $k =~ /^(mutex|mutex_try|mutex_reentrant|mutex_revocable|semmutex|multi|downgrade)$/;
	# the waits and holds it asks for: what a statement may take, plus slack
	$op->{bound} = $op->{wait} * 2 + $op->{hold} + ($op->{think} // 0) + ($k eq 'downgrade' ? $op->{hold2} : 0) + $HANG_SLACK;
	# a wait without a timeout ends at the latest zklock.connect_timeout
	# after the lease (up to a session timeout) ran out
	$op->{bound} += 75 if $op->{dg_nowait};
	return $op;
}

my $CLEANUP_SQL = 'SELECT zk_release_all();';

sub finish_sql_op
{
	my ($c, $r) = @_;
	my $op = $c->{op};
	$op->{end} = time;
	$op->{dead} = $r->{dead} ? 1 : 0;
	my @lines = grep { $_ ne '' } split /\n/, $r->{out} // '';
	# its sections, whether or not their COMMIT then succeeded: the session
	# at the grant, the entry and the exit (µs), just before the COMMIT
	$op->{held} = [ map { [ split / / ] } ($r->{err} // '') =~ /NOTICE:\s+(?:00000:\s+)?adv_section (\S+ \d+ \d+)/g ];
	# when its COMMITs returned (with_commit_times), apart from its answers
	$op->{commits} = [ map { /^committed (\d+)$/ ? $1 : () } @lines ];
	@lines = grep { !/^committed \d+$/ } @lines;
	$op->{lines} = \@lines;
	$op->{out} = $lines[0] // '';
	my @states = ($r->{err} // '') =~ /(?:ERROR|FATAL):\s+([0-9A-Z]{5}):/g;
	$op->{sqlstate} = $states[0];
	$op->{states} = \@states;
	($op->{errmsg}) = ($r->{err} // '') =~ /((?:ERROR|FATAL):\s+[0-9A-Z]{5}:[^\n]*)/;
	$op->{err} = substr($r->{err} // '', 0, 300);
	# a deadlock's DETAIL, whole, for upgrade_cycle below
	$op->{detail} = $r->{err} if ($op->{sqlstate} // '') eq '40P01';
	($op->{read}) = ($r->{err} // '') =~ /NOTICE:\s+(?:00000:\s+)?adv_read (-?\d+)/;
	@$op{qw(revoke_n revoke_told)} = ($r->{err} // '') =~ /NOTICE:\s+(?:00000:\s+)?adv_revoke (\d+) ([tf])/;
	for my $s (@states)
	{
		$err_count{$s}++;
		$err_example{$s} //= "$op->{kind}: " . ($op->{errmsg} // '');
	}
	if ($op->{out} =~ /^wrong/ || grep { /^wrong/ } @lines)
	{
		push @wrong, [ "$op->{client} $op->{kind} $op->{path}: " . join(' | ', @lines), $op ];
	}
	$op->{wrong_warn} = 1 if ($r->{err} // '') =~ /is not held by this session/ && !@states;
	$c->{need_cleanup} = 1 if @states || $op->{dead} || $op->{kind} eq 'leader_leave';
	return;
}

sub pump_sessions
{
	for my $c (@cl)
	{
		if (!$c->{sess})
		{
			next if $stopping || time < $c->{retry_at};
			my $s = eval { ZklockTest::Session->new($node{ $c->{cluster} }, $c->{name}) };
			if (!$s) { $c->{retry_at} = time + 0.5; next; }
			$c->{sess} = $s;
			$c->{need_cleanup} = 0;
		}
		if ($c->{busy})
		{
			if (!$c->{sess}->done)
			{
				if (!$c->{hung} && $c->{op} && time - $c->{op}{start} > $c->{op}{bound} + steps_back($c->{cluster}, $c->{op}{start})
					&& time - last_fault($c->{cluster}, $c->{op}{start}) > $c->{op}{bound} + steps_back($c->{cluster}, $c->{op}{start}))
				{
					my $lf = last_fault($c->{cluster}, $c->{op}{start});
					$c->{hung} = 1;
					push @hangs, sprintf('%s (pid %d) op %d %s on %s: still running after %.0f s (bound %.0f s%s)',
						$c->{name}, $c->{sess}->pid, $c->{op}{id}, $c->{op}{kind}, $c->{op}{path},
						time - $c->{op}{start}, $c->{op}{bound},
						$lf ? sprintf(', %.0f s after the last fault on its cluster', time - $lf) : '');
					diag($hangs[-1]);
				}
				next;
			}
			my $r = $c->{sess}->result(5);
			next unless $r->{done} || $r->{dead};
			$c->{busy} = 0;
			if (!$r->{dead} && ($r->{err} // '') =~ /server closed the connection unexpectedly|connection to server was lost|57P02:|57P01:.*terminating connection/)
			{
				$r->{dead} = 1;
			}
			if ($c->{op}) { finish_sql_op($c, $r); }
			elsif (($r->{err} // '') !~ /ERROR|FATAL/ && !$r->{dead}) { $c->{need_cleanup} = 0; }
			$c->{op} = undef;
			if ($r->{dead})
			{
				$c->{sess}->quit;
				$c->{sess} = undef;
				$c->{retry_at} = time + 0.3;
				next;
			}
			$c->{next_at} = time + runi($c->{rng}, 0, 0.05);
		}
		next if $stopping || time < $c->{next_at};
		if ($c->{need_cleanup})
		{
			$c->{op} = undef;
			$c->{sess}->start($CLEANUP_SQL);
		}
		else
		{
			my $op = new_sql_op($c);
			$op->{pid} = $c->{sess}->pid;
			$op->{start} = time;
			push @ops, $op;
			$c->{op} = $op;
			$c->{sess}->start(with_commit_times(op_sql($c, $op)));
		}
		$c->{busy} = 1;
		$c->{hung} = 0;
	}
	return;
}

############################################################################
# Curator: one thread per actor in the peer; replies read without blocking
############################################################################
my $crng = stream(7);
my @actors = (
	{ id => 'cm2', kind => 'lock', path => $PATH{m2}, cmd => sub { "mutex cm2 $PATH{m2} 3000 revocable-notify" } },
	# read/write lock actors, two on each path: 60% writes
	(map { my ($id, $p) = @$_; { id => $id, kind => 'lock', path => $p,
		cmd => sub { $_[0]{mode} = r01($crng) < 0.6 ? 'write' : 'read'; "$_[0]{mode} $id $p 5000" } } }
	  ([ crw1 => $PATH{rw} ], [ crw2 => $PATH{rw} ], [ crw3 => $PATH{rw2} ], [ crw4 => $PATH{rw2} ])),
	{ id => 'csm', kind => 'lock', path => $PATH{sm}, cmd => sub { "semmutex csm $PATH{sm} 3000" } },
	{ id => 'cls', kind => 'lease', path => $PATH{sem}, cmd => sub { "lease cls $PATH{sem} 3 1 3000" } },
	{ id => 'cbw', kind => 'barrier', path => $PATH{b}, cmd => sub { "barrier_wait cbw $PATH{b} 1000" } },
	# a Curator client arriving on a path the lock cache may keep a node of
	{ id => 'cown', kind => 'lock', path => $OWN[0],
		cmd => sub { $_[0]{path} = rpick($crng, @OWN); "mutex cown $_[0]{path} 3000" } },
	# Curator's multi-lock over the two mutex paths, in SQL's order
	{ id => 'cmulti', kind => 'multi', path => '/adv/m1+m2', cmd => sub { "multi cmulti $PATH{m1},$PATH{m2} 3000" } },
	# a member of the double barrier of 2: enter, hold, leave (a member
	# whose enter failed leaves too: Curator's enter leaves its node)
	{ id => 'cdb', kind => 'dbarrier', path => $PATH{db}, cmd => sub { "denter cdb $PATH{db} 2 5000" } },
	# DistributedAtomicLong's compare-and-set and SharedCount's trySetCount
	# on SQL's counters, to values unique to the operation (NEWV)
	{ id => 'ccas', kind => 'cas', path => $PATH{cas}, cmd => sub { "tcas ccas $PATH{cas} NEWV" } },
	{ id => 'cts', kind => 'tryset', path => $PATH{ts}, cmd => sub { "tcount cts $PATH{ts} NEWV" } },
);
my %actor = map { $_->{id} => $_ } @actors;
$_->{state} = 'idle', $_->{next_at} = 0 for @actors;
my %latch = (state => 'idle', next_at => 0);       # Curator's LeaderLatch: joins and closes
my %cadd = (state => 'idle', next_at => 0);        # Curator's atomic adds
my @peer_other;
my $deleted_waiters = 0;    # SQL waiters' nodes the peer deleted (delete_waiter)
my @cur_revoked;            # [ actor id, epoch s ]: Curator's holder was asked to give its lock up
my @cur_stalls;             # [ from, to ] (epoch s): the Curator client's JVM stopped (curator_stall)

sub curator_op
{
	my ($a) = @_;
	my $op = { id => ++$op_seq, who => 'cur', client => $a->{id}, kind => 'curator ' . ($a->{mode} // $a->{kind}),
		path => $a->{path}, start => time };
	$op->{newv} = 1000 + $op->{id} if $a->{kind} =~ /^(cas|tryset)$/;
	push @ops, $op;
	return $op;
}

sub actor_reply
{
	my ($a, $verb, $rest) = @_;
	my $op = $a->{op};
	if ($a->{state} eq 'acq' && $verb =~ /^(tcasread|tcountread)$/)
	{
		# the value read, said before the write: when the write then
		# fails, the chain of values still goes through it
		($op->{read}) = ($rest // '') =~ /^(-?\d+)/;
	}
	elsif ($a->{state} eq 'acq' && $a->{kind} =~ /^(cas|tryset)$/)
	{
		# "READ [VERSION] true|false", as SQL's adv_cas and adv_tryset say
		$op->{end} = time;
		$op->{out} = $verb =~ /^(tcas|tcount)$/ ? $rest // '' : "$verb " . ($rest // '');
		$op->{cur_error} = 1 if $verb !~ /^(tcas|tcount)$/;
		$a->{state} = 'idle';
		$a->{next_at} = time + runi($crng, 0.2, 2);
	}
	elsif ($a->{state} eq 'acq' && $a->{kind} eq 'dbarrier' && !($verb eq 'entered' && ($rest // '') eq 'true'))
	{
		# not entered (a timeout or an error): its node may stay, so the
		# member leaves as well; the round ends with the leave
		$op->{out} = $verb eq 'entered' ? 'timeout' : "$verb " . ($rest // '');
		$peer->{in} .= "dleave cdb 2000\n";
		$a->{state} = 'rel';
	}
	elsif ($a->{state} eq 'acq')
	{
		$op->{end} = time;
		my $got = $verb eq 'acquired' || $verb eq 'leased' || ($verb eq 'barrier' && ($rest // '') eq 'true')
		  || ($verb eq 'entered' && ($rest // '') eq 'true');
		$op->{out} = $verb . (defined $rest ? " $rest" : '');
		if ($got && $a->{kind} ne 'barrier')
		{
			$op->{enter} = time;    # after the acquire returned
			$a->{state} = 'held';
			# Curator's read/write holders hold longer: a writer waiting behind
			# a SQL holder keeps the lock for a while once it gets it
			$a->{until} = time + ($a->{path} =~ /^\/adv\/rw/ ? rpick($crng, 0.02, 0.05, runi($crng, 0.5, 4), runi($crng, 3, 15)) : rhold($crng));
		}
		else
		{
			$op->{pass_us} = int(time * 1e6) if $got;    # a barrier passed
			$a->{state} = 'idle';
			$a->{next_at} = time + runi($crng, 0, 0.1);
		}
	}
	elsif ($a->{state} eq 'rel')
	{
		$op->{rel_out} = $verb . (defined $rest ? " $rest" : '');
		if ($a->{kind} eq 'dbarrier')
		{
			# the double barrier's round, as SQL's adv_dbarrier says it:
			# 'ok' or 'leave-timeout' and when it entered (µs)
			$op->{end} = time;
			$op->{out} = ($verb eq 'left' && ($rest // '') eq 'true' ? 'ok ' : 'leave-timeout ') . int($op->{enter} * 1e6)
			  if defined $op->{enter};
		}
		$a->{state} = 'idle';
		$a->{next_at} = time + runi($crng, 0, 0.1);
	}
	else
	{
		push @peer_other, "$verb $a->{id} " . ($rest // '') . " (in state $a->{state})";
	}
	return;
}

my $curator_add = { ok => 0, doubt => 0, fail => 0 };
my @cur_states;    # [ SUSPENDED|RECONNECTED|LOST|..., epoch s ] as the Curator client reported them
my (@cur_lead, $cur_lead_from);    # Curator's leadership sections; the start of the one open (µs)

sub pump_peer
{
	for my $l (peer_read($peer))
	{
		my ($verb, $id, $rest) = $l =~ /^(\S+) (\S+)(?: (.*))?$/;
		$verb //= $l;
		if (defined $id && $actor{$id} && $verb ne 'stopping')
		{
			if ($verb eq 'revoked') { push @cur_revoked, [ $id, time ]; next; }
			actor_reply($actor{$id}, $verb, $rest);
		}
		elsif ($verb eq 'state' && defined $id)
		{
			my ($us, $sid) = split / /, $rest // '0';
			push @cur_states, [ $id, $us / 1e6 ];
			push @cur_sids, [ $us / 1e6, $sid ] if ($sid // '') =~ /^0x[0-9a-f]{16}$/ && $sid ne $cur_sids[-1][1];
		}
		elsif ($verb eq 'latch' && defined $id && $id eq 'clatch')
		{
			$latch{state} = ($rest // '') eq 'started' ? 'member' : 'idle';
			$latch{next_at} = time + runi($crng, 1, 10);
		}
		elsif ($verb eq 'leadership' && ($id // '') eq 'clatch' && ($rest // '') =~ /^(on|off|closed) (\d+)$/)
		{
			# Curator's leadership as a section: from isLeader to notLeader
			# or the latch's close, on Curator's clock
			if ($1 eq 'on') { $cur_lead_from //= $2; }
			elsif (defined $cur_lead_from)
			{
				push @cur_lead, { who => 'cur', client => 'clatch', op => 'lead' . scalar(@cur_lead), recipe => 'leader', path => $PATH{lead},
					mode => 'x', token => -1, qty => 1, enter => $cur_lead_from, exit => $2, asked => $cur_lead_from };
				$cur_lead_from = undef;
			}
		}
		elsif ($verb =~ /^(isleader|notleader)$/ && ($id // '') eq 'clatch')
		{
			push @ops, { id => ++$op_seq, who => 'cur', client => 'clatch', kind => "curator $verb", path => $PATH{lead},
				start => time, end => time, out => $verb };
		}
		elsif ($verb eq 'longadd' || ($verb eq 'error' && ($id // '') eq 'long_add'))
		{
			my $op = $cadd{op};
			$op->{end} = time;
			$op->{out} = $l;
			if ($verb eq 'longadd' && $l =~ / true /) { $curator_add->{ok}++; $op->{cur_ok} = 1; }
			elsif ($verb eq 'longadd') { $curator_add->{fail}++; }
			else { $curator_add->{doubt}++; $op->{cur_doubt} = 1; }
			$cadd{state} = 'idle';
			$cadd{next_at} = time + runi($crng, 0.1, 1.5);
		}
		elsif ($verb eq 'deleted_waiter' || $verb eq 'nowaiter')
		{
			$deleted_waiters++ if $verb eq 'deleted_waiter';
			note("Curator peer: $l");
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
			$a->{op}{exit} = time;    # before the release is asked
			$peer->{in} .= ($a->{kind} eq 'lease' ? "release $a->{id} lease" : $a->{kind} eq 'dbarrier' ? "dleave $a->{id} 5000"
				: "release $a->{id}") . "\n";
			$a->{state} = 'rel';
		}
		elsif ($a->{state} eq 'idle' && !$stopping && time >= $a->{next_at})
		{
			my $cmd = $a->{cmd}->($a);
			$a->{op} = curator_op($a);
			$cmd =~ s/NEWV/$a->{op}{newv}/;
			$peer->{in} .= "$cmd\n";
			$a->{state} = 'acq';
		}
	}
	if (!$stopping && time >= $latch{next_at} && $latch{state} =~ /^(idle|member)$/)
	{
		$peer->{in} .= $latch{state} eq 'idle' ? "latch_start clatch $PATH{lead} curator-latch\n" : "latch_close clatch\n";
		$latch{state} = 'asked';
	}
	if (!$stopping && time >= $cadd{next_at} && $cadd{state} eq 'idle')
	{
		$cadd{op} = { id => ++$op_seq, who => 'cur', client => 'cadd', kind => 'curator add', path => rpick($crng, @CNT), start => time };
		push @ops, $cadd{op};
		$peer->{in} .= "long_add $cadd{op}{path} 1\n";
		$cadd{state} = 'asked';
	}
	peer_flush($peer);
	return;
}

############################################################################
# The faults and operator actions
############################################################################
my @FAULTS = (
	[ reload => 24 ], [ blackhole => 16 ], [ stall => 14 ], [ reset => 7 ], [ sigterm => 13 ], [ expire => 6 ],
	[ terminate => 8 ], [ worker_kill => 3 ], [ backend_kill => 2 ], [ restart => 2 ], [ clock_step => 4 ],
	[ delete_waiter => 12 ],
	# the Curator client's JVM stopped (SIGSTOP) for 0.3-2 times its
	# session timeout (10 s), then continued: its holders go on holding
	# while the server expires its session
	[ curator_stall => 4 ],
	# the ensemble's own: a follower cut off from the others (its clients
	# keep their link), the leader killed, the leader in a minority
	$ENSEMBLE ? ([ follower_cut => 8 ], [ leader_kill => 5 ], [ minority => 5 ])
	# the standalone server's own: stopped (SIGTERM) and started again on
	# its data, its sessions restored
	  : ([ zk_restart => 4 ]));
my @schedule;    # [ at (s), fault, cluster, params ]
{
	my $t = 4;
	my $last_c;
	while ($t < $SECONDS - 8)
	{
		my $f = rweighted($sched, \@FAULTS);
		my %p = (dur => $f =~ /^(follower_cut|minority)$/ ? runi($sched, 2, 20) : $f =~ /^(leader_kill|zk_restart)$/ ? runi($sched, 2, 10) : runi($sched, 0.3, 2));
		# a black hole or a stall lasts a multiple of the session timeout
		# its cluster has when it strikes: just short of it and just past it
		# are the boundaries that matter, whatever the timeout is then
		$p{rel} = runi($sched, 0.3, 2) if $f =~ /^(blackhole|stall|curator_stall)$/;
		# two thirds of the faults that cut a cluster off or stop its worker
		# wait (up to 5 s) for a moment that hurts: a SQL session of the
		# cluster holds a lock that another client waits for (contested),
		# or a SQL transaction of the cluster holds a lock with a session
		# timeout of its hold still to go (long: its COMMIT comes after the
		# fault, and a cut-off that outlasts the timeout must fail it: see
		# long_held)
		$p{aim} = rpick($sched, '', 'contested', 'long')
		  if $f =~ /^(blackhole|stall|reset|sigterm|worker_kill|expire|restart|clock_step)$/;
		# a step of the wall clock, forward or back: a few seconds (NTP) or
		# minutes (an operator, a VM resumed)
		$p{delta} = rpick($sched, -1, 1) * (r01($sched) < 0.5 ? runi($sched, 1, 10) : runi($sched, 30, 300)) if $f eq 'clock_step';
		# nothing gets through, or the replies are lost (from now on, or
		# from the next write on: its reply is the first one lost), or
		# they are held back and handed on late, all at once, in order (a
		# slow path: a reply proves the session alive when its request
		# left, not when it arrives)
		$p{mode} = rpick($sched, 'blackhole', 'blackhole', 'drop_replies', 'drop_set_replies', 'hold_replies') if $f eq 'blackhole';
		if ($f eq 'reload')
		{
			my $x = r01($sched);
			$p{session_timeout} = $x < 0.5 ? '10s' : $x < 0.93 ? '60s' : '20s' if r01($sched) < 0.85;
			$p{hosts} = 1 if r01($sched) < 0.5;
			$p{lease_margin} = rpick($sched, '1s', '2s', '500ms', '4s') if r01($sched) < 0.3;
			$p{server_tick_time} = rpick($sched, '500', '1000', '2000') if r01($sched) < 0.25;
			# lock caching turned off (its kept nodes go) or on again
			$p{lock_cache} = rpick($sched, 'off', 'on', 'on') if r01($sched) < 0.3;
			# a change of the session timeout, either way, waits for a held
			# lock with a session timeout of hold to go
			$p{aim} = 'long' if defined $p{session_timeout};
		}
		# faults come in storms: most strike the cluster the last one struck,
		# some right after it (an operator action, then a failure on top)
		my $c = defined $last_c && r01($sched) < 0.6 ? $last_c : rpick($sched, @CLUSTERS);
		push @schedule, [ $t, $f, $c, \%p ];
		$last_c = $c;
		$t += r01($sched) < 0.3 ? runi($sched, 0.2, 1.5) : runi($sched, 1.5, 6);
	}
}
note('schedule of faults: ' . join('; ', map { sprintf('%.1f %s %s', $_->[0], $_->[1], $_->[2]) } @schedule));

my %active;      # "cluster fault" => { until, ... } (black holes, stalls, resets)
my @zktool_jobs; # asynchronous ZkTool expiries

sub wpid
{
	my ($c) = @_;
	my $out = try_sql($node{$c}, q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'zklock worker'}) // '';
	return $out =~ /^(\d+)$/ ? $1 : undef;
}

sub set_proxies { my ($c, $mode) = @_; $_->set_mode($mode) for map { @$_ } @{ $proxies{$c} }; return; }

# victim($c): a backend of cluster $c's SQL clients that holds or waits for
# a lock, drawn from a stream of the seed's own (not SQL's random(), so a
# seed replays its choices; nor the schedule's, which stays fixed)
my $victim_rng = stream(9);
sub victim
{
	my ($c) = @_;
	my $out = try_sql($node{$c}, q{SELECT DISTINCT l.pid FROM zk_locks l JOIN pg_stat_activity a ON a.pid = l.pid
		WHERE a.application_name ~ '^[AB][0-9]+$' AND l.state IN ('held', 'waiting') ORDER BY l.pid}) // '';
	my @pids = $out =~ /^(\d+)$/mg;
	return @pids ? rpick($victim_rng, @pids) : undef;
}

# fault_secs($c, $p): how long a black hole or a stall on cluster $c lasts:
# its factor of the session timeout $c is set to now (1-30 s)
sub fault_secs
{
	my ($c, $p) = @_;
	my ($to) = $conf_now{$c}{session_timeout} =~ /^(\d+)s$/ or die "session_timeout $conf_now{$c}{session_timeout}";
	my $d = $p->{rel} * $to;
	return $d < 1 ? 1 : $d > 30 ? 30 : $d;
}

sub do_fault
{
	my ($f, $c, $p) = @_;
	my $n = $node{$c};
	$p->{dur} = fault_secs($c, $p) if defined $p->{rel};
	if ($f eq 'blackhole')
	{
		return fault_note("$c: already black-holed") if $active{"$c blackhole"};
		set_proxies($c, $p->{mode});
		$active{"$c blackhole"} = { until => time + $p->{dur} };
		return fault_note("$c: " . ($p->{mode} eq 'blackhole' ? 'black hole' : $p->{mode} eq 'drop_replies' ? 'replies lost (drop_replies)'
				: $p->{mode} eq 'hold_replies' ? 'replies held back, then handed on late (hold_replies)'
				: 'replies lost from the next write on (drop_set_replies)'), sprintf('%.1f s', $p->{dur}));
	}
	if ($f eq 'reset')
	{
		return fault_note("$c: reset skipped (black hole)") if $active{"$c blackhole"} || $active{"$c reset"};
		set_proxies($c, 'cut');
		$active{"$c reset"} = { until => time + $p->{dur} };
		return fault_note("$c: connections reset", sprintf('refused for %.1f s', $p->{dur}));
	}
	if ($f eq 'stall')
	{
		return fault_note("$c: already stalled") if $active{"$c stall"};
		my $w = wpid($c) or return fault_note("$c: stall skipped (no worker)");
		kill 'STOP', $w;
		$active{"$c stall"} = { until => time + $p->{dur}, pid => $w };
		return fault_note("$c: worker SIGSTOP", sprintf('pid %d for %.1f s', $w, $p->{dur}));
	}
	if ($f eq 'sigterm' || $f eq 'worker_kill')
	{
		return fault_note("$c: $f skipped (worker stalled)") if $f eq 'worker_kill' && $active{"$c stall"};
		my $w = wpid($c) or return fault_note("$c: $f skipped (no worker)");
		kill($f eq 'sigterm' ? 'TERM' : 'KILL', $w);
		return fault_note("$c: worker " . ($f eq 'sigterm' ? 'SIGTERM' : 'SIGKILL'), "pid $w");
	}
	if ($f eq 'terminate' || $f eq 'backend_kill')
	{
		return fault_note("$c: $f skipped (worker stalled)") if $f eq 'backend_kill' && $active{"$c stall"};
		my $v = victim($c) or return fault_note("$c: $f skipped (nobody holds or waits)");
		if ($f eq 'terminate') { try_sql($n, "SELECT pg_terminate_backend($v)"); }
		else { kill 'KILL', $v; }
		return fault_note("$c: backend " . ($f eq 'terminate' ? 'pg_terminate_backend' : 'SIGKILL'), "pid $v");
	}
	if ($f eq 'restart')
	{
		return fault_note("$c: restart skipped (worker stalled)") if $active{"$c stall"};
		fault_note("$c: PostgreSQL stop -m immediate, start");
		eval { $n->stop('immediate'); 1 } or diag("stop: $@");
		eval { faketime_start($n); 1 } or diag("start: $@");
		return;
	}
	if ($f eq 'clock_step')
	{
		step_clock($n, int($p->{delta}));
		push @clock_steps, [ time, $c, int($p->{delta}) ];
		return fault_note("$c: wall clock of PostgreSQL's processes stepped", sprintf('%+d s, offset now %+d s', int($p->{delta}), clock_offset($n)));
	}
	if ($f eq 'expire')
	{
		my ($id, $pw) = session_file($n);
		return fault_note("$c: expire skipped (no session file)") unless $id;
		my ($out, $err) = ('', '');
		my $dir = ZklockTest::java_classes();
		my $h = IPC::Run::start([ 'java', '-Xmx128m', '-cp', "$dir:$ZklockTest::CURATOR_JAR", 'ZkTool', 'expire', $zk, $id, $pw ],
			'>', \$out, '2>', \$err, IPC::Run::timeout(60));
		push @zktool_jobs, { h => $h, out => \$out, cluster => $c, t_start => time, sid => "0x$id" };
		return fault_note("$c: ZooKeeper expires zklock's session", "0x$id");
	}
	if ($f eq 'curator_stall')
	{
		return fault_note('Curator: already stalled') if $active{'Curator stall'};
		my $pid = $peer->{h}{KIDS}[0]{PID} or return fault_note('Curator: stall skipped (no pid)');
		my $dur = $p->{rel} * 10;    # CuratorPeer's session timeout is 10 s
		kill 'STOP', $pid;
		$active{'Curator stall'} = { until => time + $dur, pid => $pid };
		push @cur_stalls, [ time, time + $dur ];
		return fault_note('Curator: client JVM SIGSTOP', sprintf('pid %d for %.1f s (its session timeout is 10 s)', $pid, $dur));
	}
	if ($f eq 'zk_restart')
	{
		return fault_note('ZooKeeper: restart skipped (already down)') if $active{'ZooKeeper down'};
		stop_zk($zk);
		$active{'ZooKeeper down'} = { until => time + $p->{dur} };
		return fault_note('ZooKeeper: server stopped', sprintf('for %.1f s', $p->{dur}));
	}
	if ($f =~ /^(follower_cut|minority|leader_kill)$/)
	{
		return fault_note("ZooKeeper: $f skipped (a server fault is in place)") if $active{'Z server'};
		my $e = $f eq 'follower_cut' ? rpick($sched, netns_followers()) : netns_leader();
		return fault_note("ZooKeeper: $f skipped (no " . ($f eq 'follower_cut' ? 'follower' : 'leader') . ')') unless $e;
		if ($f eq 'leader_kill') { kill_netns_member($e, 'KILL'); }
		else { isolate_member($e); }
		$active{'Z server'} = { until => time + $p->{dur}, member => $e, how => $f };
		return fault_note('ZooKeeper: ' . ($f eq 'leader_kill' ? "leader (server $e->{id}) killed"
				: $f eq 'minority' ? "leader (server $e->{id}) cut off from the others (minority)"
				: "follower (server $e->{id}) cut off from the others"), sprintf('%.1f s', $p->{dur}));
	}
	if ($f eq 'delete_waiter')
	{
		# the Curator peer deletes a lock node of a SQL session that is not
		# the lowest (checked in the same transaction), so never a holder's
		# by ZooKeeper's queue; a waiter a local handover gives the lock to
		# at that moment must not keep it (its COMMIT fails)
		$peer->{in} .= "delete_waiter $PATH{m1} $PATH{m2} @OWN\n";
		peer_flush($peer);
		return fault_note('delete_waiter');
	}
	if ($f eq 'reload')
	{
		my @set;
		my $cn = $conf_now{$c};
		for my $k (qw(session_timeout lease_margin server_tick_time lock_cache))
		{
			push @set, "zklock.$k = '$p->{$k}'" if defined $p->{$k} && $p->{$k} ne $cn->{$k};
		}
		if ($p->{hosts})
		{
			$hosts_ix{$c} = 1 - $hosts_ix{$c};
			push @set, "zklock.hosts = '" . hosts_of($c, $hosts_ix{$c}) . "'";
		}
		return fault_note("$c: reload with nothing to change") unless @set;
		my $sql = join(";\n", map { "ALTER SYSTEM SET $_" } @set) . ";\nSELECT pg_reload_conf();";
		my $r = try_sql($n, $sql);
		if (defined $r)
		{
			for my $k (qw(session_timeout lease_margin server_tick_time lock_cache)) { $cn->{$k} = $p->{$k} if defined $p->{$k}; }
		}
		return fault_note("$c: reload", join(', ', @set) . (defined $r ? '' : ' (failed: cluster not answering)'));
	}
	die "unknown fault $f";
}

sub heal_due
{
	my ($all) = @_;
	for my $k (sort keys %active)
	{
		my $a = $active{$k};
		next unless $all || time >= $a->{until};
		my ($c, $f) = split / /, $k;
		delete $active{$k};
		if ($f eq 'blackhole' || $f eq 'reset') { set_proxies($c, 'pass'); fault_note("$c: $f healed"); }
		elsif ($f eq 'stall')
		{
			kill 'CONT', $a->{pid};
			$cur_stalls[-1][1] = time if $c eq 'Curator';
			fault_note($c eq 'Curator' ? 'Curator: client JVM SIGCONT' : "$c: worker SIGCONT", "pid $a->{pid}");
		}
		elsif ($f eq 'down') { restart_zk($zk); fault_note('ZooKeeper: server started again (it serves)'); }
		elsif ($f eq 'server')
		{
			if ($a->{how} eq 'leader_kill') { restart_netns_member($a->{member}, 0); fault_note("ZooKeeper: server $a->{member}{id} started again"); }
			else { heal_member($a->{member}); fault_note("ZooKeeper: server $a->{member}{id} reaches the others again"); }
		}
	}
	for my $j (@zktool_jobs)
	{
		next if $j->{done};
		eval { $j->{h}->pump_nb if $j->{h}->pumpable; };
		if (!$j->{h}->pumpable) { eval { $j->{h}->finish; }; $j->{done} = 1; $j->{t_done} = time; }
	}
	return;
}

# contested($c): a path a SQL session of cluster $c holds a lock on while a
# Curator client or a session of the other cluster waits there ('' when
# none); asked at most every 0.25 s
my %aim;    # the fault that waits for its moment: { until, next_check }
sub contested
{
	my ($c) = @_;
	return '' if time < ($aim{next_check} // 0);
	$aim{next_check} = time + 0.25;
	my $held = try_sql($node{$c}, q{SELECT string_agg(DISTINCT l.path, ' ') FROM zk_locks l JOIN pg_stat_activity a ON a.pid = l.pid
		WHERE a.application_name ~ '^[AB][0-9]+$' AND l.state = 'held'
		  AND l.recipe IN ('mutex', 'write', 'read', 'semaphore_mutex', 'semaphore')}) // '';
	my %wanted = ($PATH{m1} => 1);    # Curator's mutex loop always wants it
	$wanted{ $_->{path} } = 1 for grep { $_->{state} eq 'acq' } @actors;
	$wanted{ $_->{op}{path} } = 1 for grep { $_->{busy} && $_->{op} && $_->{cluster} ne $c } @cl;
	$wanted{$_} = 1 for grep { $wanted{'/adv/m1+m2'} } ($PATH{m1}, $PATH{m2});
	my ($p) = grep { $wanted{$_} } split ' ', $held;
	return $p // '';
}

# long_held($c, $p): a SQL transaction of cluster $c that holds a lock and
# has enough of the hold it asked for left for its COMMIT to come after
# the fault $p: the fault's length for a cut-off or a stall, else the
# session timeout $c is set to (10 s at most) ('' when none); asked at
# most every 0.25 s
sub long_held
{
	my ($c, $p) = @_;
	return '' if time < ($aim{next_check} // 0);
	$aim{next_check} = time + 0.25;
	my ($to) = $conf_now{$c}{session_timeout} =~ /^(\d+)s$/;
	$to = defined $p->{rel} ? fault_secs($c, $p) : $to > 10 ? 10 : $to;
	my $held = try_sql($node{$c}, q{SELECT a.application_name || ' ' || l.path || ' ' || extract(epoch FROM clock_timestamp() - l.since)
		FROM zk_locks l JOIN pg_stat_activity a ON a.pid = l.pid
		WHERE a.application_name ~ '^[AB][0-9]+$' AND l.state = 'held' AND a.state = 'active'
		  AND l.recipe IN ('mutex', 'write', 'read', 'semaphore_mutex', 'semaphore')}) // '';
	for (split /\n/, $held)
	{
		my ($name, $path, $since) = split / /;
		my ($cl) = grep { $_->{name} eq $name && $_->{busy} && $_->{op} } @cl;
		next unless $cl && defined $since;
		my $left = $cl->{op}{hold} - $since;
		return sprintf('%s holds %s with %.1f s of its hold to go', $name, $path, $left) if $left >= $to;
	}
	return '';
}

my $next_fault = 0;
sub pump_faults
{
	heal_due(0);
	return if $stopping;
	while ($next_fault < @schedule && time - $t0 >= $schedule[$next_fault][0])
	{
		my ($at, $f, $c, $p) = @{ $schedule[$next_fault] };
		if ($p->{aim})
		{
			$aim{until} //= time + 5;
			my $hit = $p->{aim} eq 'long' ? long_held($c, $p) : contested($c);
			return if $hit eq '' && time < $aim{until};
			fault_note("$c: $f aimed", $hit eq '' ? "nothing $p->{aim} within 5 s" : $p->{aim} eq 'long' ? $hit : "$hit held and wanted");
			%aim = ();
		}
		$next_fault++;
		do_fault($f, $c, $p);
	}
	return;
}

sub pump_all { pump_sessions(); pump_peer(); pump_faults(); return; }
load_driver(pump => \&pump_all, us => 4_000, every => 0.5);

sub connected_all
{
	if ($ENSEMBLE)
	{
		my $m = netns_modes();
		return 0 unless (grep { defined $m->{ $_->{id} } } @members) == @members;
	}
	for my $c (@CLUSTERS)
	{
		my $s = try_status($node{$c});
		return 0 unless $s && $s->{state} eq 'connected';
	}
	return 1;
}

############################################################################
# Run
############################################################################
my $cap = int(($SECONDS + 200) * 1000);
quietly(sub {
	$t0 = time;
	fault_clock($t0);
	$peer->send("mxloop cmx1 $PATH{m1} $cap 50 300");
	drive_for($SECONDS);
	$stopping = 1;
	heal_due(1);
	# what the faults left (a stalled worker's SIGTERM) settles
	ok(drive_until(\&connected_all, 120, 'both clusters connected'), 'after the faults both clusters are connected again');
});
my $t_load_end = time;
note(sprintf('load: %.0f s; faults: %d; aimed: %d at a contested lock, %d at a transaction with a session timeout of hold to go, %d found nothing within 5 s',
	$t_load_end - $t0, scalar(faults()), scalar(grep { $_->[0] =~ / aimed$/ && ($_->[2] // '') =~ /held and wanted$/ } faults()),
	scalar(grep { $_->[0] =~ / aimed$/ && ($_->[2] // '') =~ /of its hold to go$/ } faults()),
	scalar(grep { $_->[0] =~ / aimed$/ && ($_->[2] // '') =~ /^nothing/ } faults())));

# every running statement ends: within 240 s, and longer by what the
# clocks were stepped back (a wait's timeout runs on the wall clock, as
# PostgreSQL's lock_timeout does: a step back of 300 s makes a 15 s wait
# last 315 s); the watchdog is set again for what is left
my $finish_secs = 240 + max(map { steps_back($_, $t0) } @CLUSTERS);
alarm($finish_secs + 240) if !defined $ENV{ZKLOCK_TEST_ALARM};
quietly(sub {
	ok(drive_until(sub { !grep { $_->{busy} } @cl }, $finish_secs, 'the SQL sessions to finish'), 'every SQL statement ended');
	ok(drive_until(sub { !grep { $_->{state} ne 'idle' } @actors }, 60, "Curator's actors to finish")
		  && drive_until(sub { $cadd{state} eq 'idle' && $latch{state} =~ /^(idle|member)$/ }, 60, 'Curator add and latch'),
		"Curator's actors finished and released");
});

############################################################################
# The lease probe: one COMMIT asked across a cut-off that outlasted the
# session timeout, for certain
############################################################################
# Under the load it is left to chance whether a section is open when a
# cut-off outlasts its session's timeout.  The probe makes one on cluster
# $PROBE_C, with nothing else running: its worker gets a session timeout
# of 10 s (a reload that lowers zklock.session_timeout and switches
# zklock.hosts to the other proxies, so the worker restarts and its new
# handle asks the server for it as it resumes the session), a SQL session of its own takes the write lock $PROBE_PATH in a
# transaction (no fencing token asked: nothing of the section waits on
# ZooKeeper) and holds it for the negotiated timeout + 2 s, and as soon
# as it holds it every connection of the cluster becomes a black hole for
# the timeout + 3 s.  The server expires the session while the section is
# open; the COMMIT is asked after that and must fail (the lease ran out:
# 40000), which the direct check below sees from ZooKeeper's record too.
#
# The same black hole tests COMMIT's floor (zklock.commit_min_lease): ten
# more sessions hold a read lock on $FLOOR_PATH in a transaction, with
# commit_delay 100 ms (and fsync on for the probe, which commit_delay
# needs): their commits take 100 ms after the lease check, as a slow
# commit would.  Once the lease stands still (no proof comes through the
# black hole), each asks its COMMIT at a set time before the lease's end,
# from 600 ms to 5 ms, and says how much lease was left when it asked and
# when the COMMIT returned.  A COMMIT asked with less than the floor left
# must fail with 40000, and one that succeeded must have returned with
# lease left.  Then the timeout is raised back by a reload.
my $PROBE_C = $SEED % 4 < 2 ? 'A' : 'B';
my $FLOOR_PATH = '/adv/probe-floor';
my @FLOOR_MS = (600, 450, 300, 200, 120, 80, 50, 30, 15, 5);
my $COMMIT_DELAY_MS = 100;
my (%probe, @floor);
{
	my $n = $node{$PROBE_C};
	# the reload restarts the worker: under a negative clock offset the
	# PostgreSQL 15 postmaster would restart it up to a minute late
	# (ZklockClock, pitfall 3), and its session could end meanwhile
	if (clock_offset($n) != 0)
	{
		push @clock_steps, [ time, $PROBE_C, -clock_offset($n) ];
		set_clock_offset($n, 0);
	}
	my $to_before = $conf_now{$PROBE_C}{session_timeout};
	$hosts_ix{$PROBE_C} = 1 - $hosts_ix{$PROBE_C};
	try_sql($n, "ALTER SYSTEM SET zklock.session_timeout = '10s';\nALTER SYSTEM SET fsync = on;\nALTER SYSTEM SET zklock.lock_cache = on;\nALTER SYSTEM SET zklock.hosts = '"
		  . hosts_of($PROBE_C, $hosts_ix{$PROBE_C}) . "';\nSELECT pg_reload_conf();");
	$conf_now{$PROBE_C}{session_timeout} = '10s';
	$conf_now{$PROBE_C}{lock_cache} = 'on';    # (the lock cache probe below needs it)
	# the worker restarts for the new hosts and resumes its session there
	# (or starts one, when it ended meanwhile): either way the server
	# negotiates the timeout the handshake asks for
	my $st;
	wait_until(sub { $st = try_status($n); return $st && $st->{state} eq 'connected' && $st->{session_timeout} == 10000; },
		60, "cluster $PROBE_C connected with a session timeout of 10 s");
	$st = try_status($n);
	die "the lease probe: cluster $PROBE_C is not connected" unless $st && $st->{state} eq 'connected';
	my $to = $st->{session_timeout};
	my $pc = { name => "P$PROBE_C", cluster => $PROBE_C };
	my $sess = ZklockTest::Session->new($n, $pc->{name});
	my $op = { id => ++$op_seq, who => $PROBE_C, client => $pc->{name}, kind => 'write_xact', path => $PROBE_PATH,
		hold => $to / 1000 + 2, hold2 => 0, wait => 5, qty => 1, confirm => 0, pid => $sess->pid, start => time, probe => 1,
		bound => 1e9 };
	push @ops, $op;
	$pc->{op} = $op;
	$sess->start(with_commit_times(op_sql($pc, $op)));
	# the floor's sessions: a read lock each, a row written (their COMMIT
	# flushes), a slow commit
	$probe{commit_min_lease} = try_sql($n, "SELECT (extract(epoch FROM setting::interval) * 1000)::int FROM (SELECT current_setting('zklock.commit_min_lease') AS setting) s") // '';
	# the first flush with fsync on (the WAL written so far), and the
	# table their transactions write to: a commit flushes, and so waits
	# commit_delay, only when its transaction wrote WAL (a transaction id
	# alone commits without a flush)
	try_sql($n, 'CREATE TABLE IF NOT EXISTS adv_floor (k int); INSERT INTO adv_floor VALUES (-1)');
	for my $k (0 .. $#FLOOR_MS)
	{
		my $fs = ZklockTest::Session->new($n, "F$PROBE_C$k");
		$fs->query("SET commit_delay = ${\($COMMIT_DELAY_MS * 1000)};\nSET commit_siblings = 0;", 10);
		my $r = $fs->query("BEGIN;\nSELECT zk_read_lock_acquire_xact('$FLOOR_PATH', '10s');\nINSERT INTO adv_floor VALUES ($k);", 20);
		push @floor, { k => $k, ms => $FLOOR_MS[$k], sess => $fs, held => ($r->{out} // '') eq 't' && ($r->{err} // '') !~ /ERROR/ ? 1 : 0, err => $r->{err} };
	}
	my $held = wait_until(sub {
			(try_sql($n, "SELECT state FROM zk_locks WHERE pid = $op->{pid} AND path = '$PROBE_PATH'") // '') eq 'held' },
		10, 'the probe holds its lock');
	$probe{t_cut} = time;
	set_proxies($PROBE_C, 'blackhole');
	fault_note("$PROBE_C: black hole (the lease probe)", sprintf('%.1f s', $to / 1000 + 3));
	# the lease stands still once no reply comes through: the floor's
	# COMMITs are timed from what is left of it then
	usleep(500_000);
	$probe{floor_until} = try_sql($n, 'SELECT extract(epoch FROM lease_until) FROM zk_status()') // '';
	for my $f (grep { $_->{held} } @floor)
	{
		$f->{sess}->start(sprintf("SELECT pg_sleep(greatest(0, extract(epoch FROM lease_remaining) - %.3f)) FROM zk_status();\n"
				. "SELECT 'asked ' || coalesce((extract(epoch FROM lease_remaining) * 1000)::bigint::text, 'none') FROM zk_status();\n"
				. "COMMIT;\n"
				. "SELECT 'returned ' || coalesce((extract(epoch FROM lease_remaining) * 1000)::bigint::text, 'none') FROM zk_status() WHERE :'ERROR' = 'false';",
				$f->{ms} / 1000));
	}
	usleep(300_000);
	$probe{floor_until_after} = try_sql($n, 'SELECT extract(epoch FROM lease_until) FROM zk_status()') // '';
	usleep(int(($to / 1000 + 3 - 0.8) * 1e6));
	for my $f (grep { $_->{held} } @floor)
	{
		my $r = $f->{sess}->result(30);
		$f->{done} = $r->{done};
		($f->{asked}) = ($r->{out} // '') =~ /^asked (\S+)$/m;
		($f->{returned}) = ($r->{out} // '') =~ /^returned (\S+)$/m;
		$f->{sqlstate} = $r->{sqlstate};
		($f->{errmsg}) = ($r->{err} // '') =~ /((?:ERROR|FATAL):\s+[0-9A-Z]{5}:[^\n]*)/;
	}
	$_->{sess}->quit for @floor;
	delete $_->{sess} for @floor;
	set_proxies($PROBE_C, 'pass');
	fault_note("$PROBE_C: black hole healed (the lease probe)");
	my $r = $sess->result(60);
	finish_sql_op($pc, $r) if $r->{done};
	$sess->quit;
	wait_cluster_connected($PROBE_C);
	try_sql($n, "ALTER SYSTEM SET zklock.session_timeout = '$to_before';\nALTER SYSTEM RESET fsync;\nSELECT pg_reload_conf();");
	$conf_now{$PROBE_C}{session_timeout} = $to_before;
	%probe = (%probe, op => $op, held => $held, done => $r->{done}, timeout => $to);
	note(sprintf('the lease probe on cluster %s: session timeout %d ms, lock %s, cut off at %s s, COMMIT: %s',
			$PROBE_C, $to, $held ? 'held' : 'not held', rel($probe{t_cut}),
			!$r->{done} ? 'still running' : $op->{errmsg} // (@{ $op->{commits} // [] } ? 'committed' : 'no answer')));
	note(sprintf('the floor: COMMIT asked %s ms before the lease ran out: %s', $_->{ms}, show_floor($_))) for @floor;
}

# show_floor($f): one of the floor's COMMITs, as the checks print it
sub show_floor
{
	my ($f) = @_;
	return 'no read lock (' . substr($f->{err} // '', 0, 200) . ')' unless $f->{held};
	return 'no answer' unless $f->{done};
	return sprintf('asked with %s ms of lease left, %s', $f->{asked} // '?',
		defined $f->{returned} ? "committed, returned with $f->{returned} ms left" : 'failed: ' . ($f->{errmsg} // 'no error'));
}

# Two more probes on cluster $PROBE_C, made certain rather than left to the
# load's chance, each an operation like the load's (its sections and its
# answer go through the same checks):
# - the multi-lock's all-or-nothing: another client holds the multi-lock's
#   second mutex for 3 s while a multi-lock of both asks with a 1 s
#   timeout; it must say false (a true is also two holders of one mutex);
# - a counter write whose reply is lost: the proxies lose every reply of
#   a connection from its first setData on, an add is asked, and once its
#   write went to the server and a reply was lost the connection is
#   closed.  The write may have been applied: the add fails in doubt
#   (08006) or answers, and the counter's value must be explained by the
#   adds (a write tried again as if refused adds twice).
my %probe2;
# probe_op($name, %op): a session of its own on cluster $op{cluster}
# (default $PROBE_C) and an operation like the load's, in @ops
sub probe_op
{
	my ($name, %op) = @_;
	my $c = delete $op{cluster} // $PROBE_C;
	my $pc = { name => $name, cluster => $c };
	my $sess = ZklockTest::Session->new($node{$c}, $name);
	my $op = { id => ++$op_seq, who => $c, client => $name, hold => 0, hold2 => 0, wait => 5, qty => 1, confirm => 0,
		pid => $sess->pid, start => time, probe => 1, bound => 1e9, %op };
	push @ops, $op;
	$pc->{op} = $op;
	$pc->{sess} = $sess;
	return $pc;
}

sub probe_finish
{
	my ($pc, $timeout) = @_;
	my $r = $pc->{sess}->result($timeout);
	finish_sql_op($pc, $r) if $r->{done};
	$pc->{sess}->quit;
	return $r->{done};
}
{
	my $n = $node{$PROBE_C};
	# the multi-lock, on paths of its own (the load's mutex paths may still
	# have a kept node or Curator's loop): another client holds the second
	# while a multi-lock of both asks with a 1 s timeout
	my ($pm1, $pm2) = ('/adv/probe-m1', '/adv/probe-m2');
	my $hc = probe_op("H$PROBE_C", kind => 'mutex_xact', path => $pm2, hold => 4, wait => 20);
	$hc->{sess}->start(with_commit_times(op_sql($hc, $hc->{op})));
	my $held = wait_until(sub {
			(try_sql($n, "SELECT state FROM zk_locks WHERE pid = $hc->{op}{pid} AND path = '$pm2'") // '') eq 'held' },
		20, "the multi-lock probe's holder of $pm2");
	my $mc = ZklockTest::Session->new($n, "M$PROBE_C");
	my $mr = $mc->query("SELECT zk_multi_lock_acquire(ARRAY['$pm1', '$pm2'], '1s');\nSELECT zk_release_all();", 30);
	$mc->quit;
	probe_finish($hc, 30);
	%probe2 = (multi_held => $held, multi_out => ($mr->{out} // '') =~ /^([tf])/ ? $1 : '', multi_err => $mr->{err} // '',
		multi_second => $pm2, multi_rows => $held ? '' : try_sql($n, "SELECT string_agg(pid || ' ' || state, ', ') FROM zk_locks WHERE path = '$pm2'") // '');
	note(sprintf('the multi-lock probe: %s held by %s: %s; the multi-lock said %s', $pm2, $hc->{name}, $held ? 'held' : 'not held',
			$probe2{multi_out} || substr($probe2{multi_err}, 0, 200)));

	# the counter write
	my @px = map { @$_ } @{ $proxies{$PROBE_C} };
	my $sum = sub { my ($k) = @_; my $t = 0; $t += $_->stats->{$k} // 0 for @px; return $t; };
	my $cc = probe_op("C$PROBE_C", kind => 'add', path => $CNT[0]);
	my ($sets, $dropped) = ($sum->('set_requests'), $sum->('dropped_s2c'));
	set_proxies($PROBE_C, 'drop_set_replies');
	fault_note("$PROBE_C: replies lost from the next write on (drop_set_replies, the counter probe)");
	$cc->{sess}->start(op_sql($cc, $cc->{op}));
	my $lost = wait_until(sub { $sum->('set_requests') > $sets && $sum->('dropped_s2c') > $dropped }, 20,
		"the counter probe's write relayed and a reply lost");
	set_proxies($PROBE_C, 'pass');
	fault_note("$PROBE_C: connections that lost replies closed (the counter probe)");
	my $done = probe_finish($cc, 60);
	%probe2 = (%probe2, add_lost => $lost, add_done => $done, add => $cc->{op});
	note(sprintf('the counter probe on %s: write relayed and reply lost: %s; the add said %s', $CNT[0], $lost ? 'yes' : 'no',
			$done ? ($cc->{op}{errmsg} // $cc->{op}{out}) : 'nothing (no answer)'));
	wait_cluster_connected($PROBE_C);

	# an add whose read is answered late: the proxies hold every reply back
	# while an add is asked; once its getData went to the server, Curator
	# (straight to the server) adds to the same counter; then the replies
	# are handed on, so the add writes on a value read before Curator's.
	# Its write must fail on the version Curator moved and be made again:
	# the two adds answer different values (an unversioned write would
	# overwrite Curator's add, and both would answer one value)
	{
		my $gets = $sum->('get_requests');
		my $ca = probe_op("CV$PROBE_C", kind => 'add', path => $CNT[1]);
		set_proxies($PROBE_C, 'hold_replies');
		fault_note("$PROBE_C: replies held back (the stale read probe)");
		$ca->{sess}->start(op_sql($ca, $ca->{op}));
		my $read = wait_until(sub { $sum->('get_requests') > $gets }, 10, "the stale read probe's getData relayed");
		my $cop = { id => ++$op_seq, who => 'cur', client => 'cadd', kind => 'curator add', path => $CNT[1], start => time };
		push @ops, $cop;
		my $cl = quietly(sub { $peer->send("long_add $CNT[1] 1"); $peer->wait_reply(qr/^(longadd \Q$CNT[1]\E |error long_add)/, 20) }) // '';
		$cop->{end} = time;
		$cop->{out} = $cl;
		$cop->{cur_ok} = 1 if $cl =~ / true \d+$/;
		set_proxies($PROBE_C, 'pass');
		fault_note("$PROBE_C: held replies handed on (the stale read probe)");
		my $vdone = probe_finish($ca, 60);
		my ($cv) = $cl =~ / true (\d+)$/;
		%probe2 = (%probe2, stale_ready => $read && defined $cv, stale_cur => $cv // '', stale_done => $vdone, stale_add => $ca->{op});
		note(sprintf('the stale read probe on %s: getData relayed while replies were held: %s; Curator\'s add said %s; the add said %s',
				$CNT[1], $read ? 'yes' : 'no', $cl || 'nothing', $vdone ? ($ca->{op}{errmsg} // $ca->{op}{out}) : 'nothing (no answer)'));
		wait_cluster_connected($PROBE_C);
	}

	# the local handover: a holder and a waiter of this cluster, a waiter
	# of the other behind them; the first waiter's node is deleted from
	# outside; at the holder's COMMIT the lock must not go to both waiters
	my $o = $PROBE_C eq 'A' ? 'B' : 'A';
	my $state = sub {
		my ($c, $pid, $p) = @_;
		return try_sql($node{$c}, "SELECT state || ' ' || coalesce(node, '') FROM zk_locks WHERE pid = $pid AND path = '$p'") // '';
	};
	my $hp = '/adv/probe-h';
	my $h1 = probe_op("H1$PROBE_C", kind => 'mutex_xact', path => $hp, hold => 10);
	$h1->{sess}->start(with_commit_times(op_sql($h1, $h1->{op})));
	my $ok = wait_until(sub { $state->($PROBE_C, $h1->{op}{pid}, $hp) =~ /^held/ }, 10, "the handover probe's holder");
	my $h2 = probe_op("H2$PROBE_C", kind => 'mutex_xact', path => $hp, hold => 1, wait => 20);
	$h2->{sess}->start(with_commit_times(op_sql($h2, $h2->{op})));
	my $n2;
	$ok &&= wait_until(sub { ($n2) = $state->($PROBE_C, $h2->{op}{pid}, $hp) =~ /^waiting (\S+)/; $n2 }, 10, "the handover probe's first waiter");
	my $h3 = probe_op("H3$o", cluster => $o, kind => 'mutex_xact', path => $hp, hold => 2, wait => 20);
	$h3->{sess}->start(with_commit_times(op_sql($h3, $h3->{op})));
	$ok &&= wait_until(sub { $state->($o, $h3->{op}{pid}, $hp) =~ /^waiting \S/ }, 10, "the handover probe's waiter of cluster $o");
	my ($rc, $lines) = $ok ? zktool('delete', $zk, "$hp/$n2") : (-1, []);
	$rc = -1 unless grep { /^deleted / } @{ $lines // [] };
	fault_note("ZooKeeper: the node of a SQL waiter deleted from outside (the handover probe: $hp/" . ($n2 // '?') . ", rc $rc)");
	my $h1_held = $state->($PROBE_C, $h1->{op}{pid}, $hp) =~ /^held/;
	probe_finish($_, 60) for $h1, $h2, $h3;
	%probe2 = (%probe2, handover_ready => $ok && $rc == 0 && $h1_held, handover => [ map { $_->{op} } $h1, $h2, $h3 ]);
	note(sprintf('the handover probe: waiters queued %s, node of %s deleted: rc %s, holder still held then: %s; answers: %s',
			$ok ? 'yes' : 'no', $h2->{name}, $rc, $h1_held ? 'yes' : 'no',
			join(', ', map { "$_->{client} " . ($_->{errmsg} // $_->{out} // '?') } map { $_->{op} } $h1, $h2, $h3)));

	# the lock cache: a backend holds a mutex while a client of the other
	# cluster queues behind it; the backend gives it back (its worker may
	# keep the node: the listing it then makes shows the other client's
	# node, so it must let the node go) and takes it again and again; the
	# other client must get the lock within 4 s
	my $cp = '/adv/probe-cache';
	my $lc = ZklockTest::Session->new($n, "L$PROBE_C");
	my $first = $lc->query("SELECT zk_mutex_acquire('$cp', '5s');", 20)->{out};
	my $wc = ZklockTest::Session->new($node{$o}, "W$o");
	my $t_ask = time;
	$wc->start("SELECT zk_mutex_acquire('$cp', '4s');\nSELECT zk_mutex_release('$cp') WHERE :'ERROR' = 'false';");
	my $queued = wait_until(sub { $state->($o, $wc->pid, $cp) =~ /^waiting \S/ }, 10, 'the lock cache probe\'s waiter');
	$lc->start("SELECT zk_mutex_release('$cp');\n"
		  . "DO \$\$ BEGIN FOR i IN 1 .. 80 LOOP PERFORM zk_mutex_acquire('$cp', '10s'); PERFORM pg_sleep(0.05); "
		  . "PERFORM zk_mutex_release('$cp'); PERFORM pg_sleep(0.02); END LOOP; END \$\$;");
	my $wr = $wc->result(30);
	my $t_got = time;
	my $lr = $lc->result(60);
	$_->quit for $wc, $lc;
	$probe2{cache_rows} = join('; ', map { "$_: " . (try_sql($node{$_}, "SELECT string_agg(coalesce(pid::text, '-') || ' ' || state, ', ') FROM zk_locks WHERE path = '$cp'") // '?') } $PROBE_C, $o)
	  unless $first eq 't' && $queued;
	%probe2 = (%probe2, cache_ready => $first eq 't' && $queued, cache_got => ($wr->{out} // '') =~ /^t/ ? 1 : 0,
		cache_secs => $t_got - $t_ask, cache_err => $wr->{err} // '');
	note(sprintf('the lock cache probe: waiter queued %s, waiter got the lock: %s after %.1f s (%s); the loop: %s',
			$queued ? 'yes' : 'no', $probe2{cache_got} ? 'yes' : 'no', $t_got - $t_ask,
			substr($wr->{err} // '', 0, 200), $lr->{sqlstate} // 'ok'));
	wait_cluster_connected($PROBE_C);

	# Revocation with a waiter queued behind the holder: zk_revoke of the
	# other cluster asks a SQL holder of a revocable mutex, with a waiter
	# of the asking cluster behind it (the holder must be told within 5 s:
	# zk_revocation_requested()), and a SQL zk_revoke asks Curator's
	# revocable holder, with a SQL waiter behind it (Curator must report
	# the request within 5 s).  Each zk_revoke must answer 1.
	{
		my $rp = '/adv/probe-rv';
		my $rh = ZklockTest::Session->new($n, "R$PROBE_C");
		my $rheld = $rh->query("SELECT zk_mutex_acquire('$rp', '5s', true);", 20)->{out} // '';
		my $rw = ZklockTest::Session->new($node{$o}, "RW$o");
		$rw->start("SELECT zk_mutex_acquire('$rp', '20s');\nSELECT zk_release_all();");
		my $rq = wait_until(sub { $state->($o, $rw->pid, $rp) =~ /^waiting \S/ }, 10, 'the revocation probe\'s waiter');
		my $rn = try_sql($node{$o}, "SELECT zk_revoke('$rp')") // '';
		my $t_rv = time;
		my $told = wait_until(sub { ($rh->query("SELECT '$rp' IN (SELECT zk_revocation_requested());", 10)->{out} // '') eq 't' },
			5, 'the revoked SQL holder told');
		$probe2{rv_sql_secs} = time - $t_rv;
		$rh->query("SELECT zk_mutex_release('$rp');", 20);
		my $rwr = $rw->result(30);
		$_->quit for $rh, $rw;
		%probe2 = (%probe2, rv_sql_ready => $rheld eq 't' && $rq, rv_sql_n => $rn, rv_sql_told => $told);

		my $cp2 = '/adv/probe-rv2';
		my $cl = quietly(sub { $peer->send("mutex crv $cp2 5000 revocable-notify"); $peer->wait_reply(qr/^(acquired|timeout|error) crv(\s|$)/, 30) }) // '';
		my $cw = ZklockTest::Session->new($n, "RC$PROBE_C");
		$cw->start("SELECT zk_mutex_acquire('$cp2', '20s');\nSELECT zk_release_all();");
		my $cq = wait_until(sub { $state->($PROBE_C, $cw->pid, $cp2) =~ /^waiting \S/ }, 10, 'the revocation probe\'s waiter behind Curator');
		my $cn = try_sql($n, "SELECT zk_revoke('$cp2')") // '';
		my $crev = quietly(sub { $peer->wait_reply(qr/^revoked crv$/, 5) });
		quietly(sub { $peer->send('release crv'); $peer->wait_reply(qr/^(released|error) crv(\s|$)/, 30) });
		my $cwr = $cw->result(30);
		$cw->quit;
		%probe2 = (%probe2, rv_cur_ready => $cl eq 'acquired crv' && $cq, rv_cur_n => $cn, rv_cur_told => defined $crev);
		note(sprintf('the revocation probe: SQL holder of %s held %s, waiter of %s queued %s, zk_revoke said %s, holder told: %s (%.1f s), the waiter then: %s; '
				. 'Curator holder of %s: %s, SQL waiter queued %s, zk_revoke said %s, Curator reported it: %s, the waiter then: %s',
				$rp, $rheld, $o, $rq ? 'yes' : 'no', $rn, $told ? 'yes' : 'no', $probe2{rv_sql_secs}, $rwr->{out} // $rwr->{err} // '?',
				$cp2, $cl, $cq ? 'yes' : 'no', $cn, defined $crev ? 'yes' : 'no', $cwr->{out} // $cwr->{err} // '?'));
	}

	# The worker stopped past its session timeout (SIGSTOP), with:
	# - a downgrade asked while its write lock was held (the write section
	#   committed, the worker stopped, then the read lock asked), while a
	#   writer of the other cluster waits for the same path: once the
	#   server expired the session the other writer holds the lock, and
	#   the downgrade must not be granted beside it;
	# - a statement running under a lock with zklock.cancel_on_loss on: it
	#   must be cancelled (ZK001) when the lease runs out, before the
	#   worker runs again;
	# - a transaction holding a lock, idle, and the wall clock of the
	#   cluster stepped back 30 s once the others asked: its COMMIT, asked
	#   after the server expired the session, must fail with 40000.
	my $w = wpid($PROBE_C);
	my $to = try_status($n)->{session_timeout} / 1000;
	my $dp = '/adv/probe-dg';
	my $d = probe_op("D$PROBE_C", kind => 'downgrade', path => $dp, hold => 0.3, hold2 => 2, wait => 5, think => 2, dg_nowait => 0);
	$d->{op}{wait} = 40;    # the downgrade's own wait (asked in the stall)
	my $k = ZklockTest::Session->new($n, "K$PROBE_C");
	my $kr = $k->query("SET zklock.cancel_on_loss = on;\nBEGIN;\nSELECT zk_mutex_acquire_xact('/adv/probe-cancel', '10s');", 20);
	my $sc = ZklockTest::Session->new($n, "S$PROBE_C");
	my $sr = $sc->query("BEGIN;\nSELECT zk_mutex_acquire_xact('/adv/probe-clock', '10s');", 20);
	$d->{sess}->start(with_commit_times(op_sql($d, $d->{op})));
	my $dw = wait_until(sub { (try_sql($n, "SELECT state FROM zk_locks WHERE pid = $d->{op}{pid} AND path = '$dp' AND recipe = 'write'") // '') eq 'held' },
		10, "the downgrade probe's write lock");
	usleep(800_000);    # its write section (0.3 s) committed; it thinks 2 s before the downgrade
	$k->start('SELECT pg_sleep(60);');
	my $bw = probe_op("X$o", cluster => $o, kind => 'write_xact', path => $dp, hold => 8, wait => 40);
	$bw->{sess}->start(with_commit_times(op_sql($bw, $bw->{op})));
	usleep(300_000);
	my $t_stop = time;
	kill 'STOP', $w;
	fault_note("$PROBE_C: worker SIGSTOP (the stall probe)", sprintf('pid %d for %.1f s', $w, $to + 4));
	usleep(2_500_000);    # the downgrade is asked now
	step_clock($n, -30);
	push @clock_steps, [ time, $PROBE_C, -30 ];
	fault_note("$PROBE_C: wall clock of PostgreSQL's processes stepped (the stall probe)", sprintf('-30 s, offset now %+d s', clock_offset($n)));
	my ($k_done, $k_at, $b_held, $next_look);
	my $look = sub {
		if (!$k_done && $k->done) { $k_done = 1; $k_at = time - $t_stop; }
		if (!$b_held && time >= ($next_look // 0))
		{
			$b_held = 1 if $state->($o, $bw->{op}{pid}, $dp) =~ /^held/;
			$next_look = time + 0.5;
		}
	};
	while (time < $t_stop + $to + 2)
	{
		$look->();
		usleep(100_000);
	}
	$sc->start("COMMIT;\nSELECT 'committed' WHERE :'ERROR' = 'false';");
	while (time < $t_stop + $to + 4)
	{
		$look->();
		usleep(100_000);
	}
	my $dg_pending = !$d->{sess}->done;
	kill 'CONT', $w;
	fault_note("$PROBE_C: worker SIGCONT (the stall probe)");
	my $scr = $sc->result(30);
	my $kres = $k->result(60);
	probe_finish($_, 90) for $d, $bw;
	step_clock($n, 30);
	push @clock_steps, [ time, $PROBE_C, 30 ];
	fault_note("$PROBE_C: wall clock of PostgreSQL's processes stepped (the stall probe)", sprintf('+30 s, offset now %+d s', clock_offset($n)));
	$_->quit for $k, $sc;
	%probe2 = (%probe2, stall => $to + 4, dg_write => $dw, dg_pending => $dg_pending, dg_other => $b_held, downgrade => $d->{op}, other_writer => $bw->{op},
		cancel_ready => ($kr->{out} // '') eq 't', cancel_at => $k_at, cancel_state => $kres->{sqlstate} // '', cancel_err => $kres->{err} // '',
		clock_ready => ($sr->{out} // '') eq 't', clock_state => $scr->{sqlstate} // '', clock_out => $scr->{out} // '', clock_err => $scr->{err} // '');
	note(sprintf('the stall probe (%.1f s): downgrade asked in the stall with its write held: %s, the other writer held in the stall: %s, '
			. 'the downgrade said %s; the statement under cancel_on_loss ended %s (%s); the COMMIT after the clock step: %s',
			$to + 4, $dw && $dg_pending ? 'yes' : 'no', $b_held ? 'yes' : 'no', $d->{op}{errmsg} // $d->{op}{out} // '?',
			defined $k_at ? sprintf('%.1f s into the stall', $k_at) : 'after it', $kres->{sqlstate} // 'no error',
			$scr->{sqlstate} // ($scr->{out} eq 'committed' ? 'committed' : '?')));
	wait_cluster_connected($PROBE_C);
}

# Curator's mutex loop and its sections
my @cur_mx;
{
	$peer->send('stoploop cmx1');
	my $line = quietly(sub { $peer->wait_reply(qr/^(mxloop|error) cmx1(\s|$)/, 60) });
	note('Curator mxloop: ' . ($line // 'no reply'));
	my @rest;
	for my $e (@{ $peer->{lines} }, @peer_other)
	{
		if ($e =~ /^mxev cmx1 (-?\d+) (\d+) (\d+) (\d+)$/)
		{
			push @cur_mx, { who => 'cur', client => 'cmx1', recipe => 'mutex', path => $PATH{m1}, mode => 'x',
				token => $1, enter => $2, exit => $3, qty => 1 };
		}
		else { push @rest, $e; }
	}
	$peer->{lines} = [];
	@peer_other = @rest;
	quietly(sub { $peer->send('latch_close clatch') if $latch{state} eq 'member'; });
}

# the SQL sessions release what they hold, and quit
quietly(sub {
	for my $c (@cl)
	{
		next unless $c->{sess};
		eval { $c->{sess}->query('SELECT zk_release_all(); SELECT zk_leader_leave(\'/adv/lead\') FROM zk_locks WHERE pid = pg_backend_pid() AND recipe = \'leader_latch\'', 60) };
		$c->{sess}->quit;
		$c->{sess} = undef;
	}
});

############################################################################
# The sections
############################################################################
my @sections;
for my $c (@CLUSTERS)
{
	my $out = $node{$c}->safe_psql('postgres',
		q{SELECT client, op, recipe, path, mode, coalesce(token, -1), qty, enter_us, exit_us, coalesce(confirm, 'off'),
		    coalesce(sid_enter, '-'), coalesce(sid_exit, '-') FROM adv_sections});
	for (split /\n/, $out)
	{
		my ($client, $op, $recipe, $path, $mode, $tok, $qty, $enter, $exit, $confirm, $sid_enter, $sid_exit) = split /\|/;
		push @sections, { who => $c, client => $client, op => $op, recipe => $recipe, path => $path, mode => $mode,
			token => $tok, qty => $qty, enter => $enter, exit => $exit, confirm => $confirm,
			sid_enter => $sid_enter, sid_exit => $sid_exit };
	}
}
my %op_by_id = map { $_->{id} => $_ } @ops;
for my $op (grep { $_->{who} eq 'cur' && defined $_->{enter} && $_->{kind} ne 'curator dbarrier' } @ops)
{
	my $k = $op->{kind};
	my ($recipe, $mode) = $k =~ /write/ ? ('rw', 'w') : $k =~ /read/ ? ('rw', 'r') : $k =~ /lease/ ? ('semaphore', 's') : ('mutex', 'x');
	# a multi-lock holds both mutexes
	for my $path ($k eq 'curator multi' ? ($PATH{m1}, $PATH{m2}) : ($op->{path}))
	{
		push @sections, { who => 'cur', client => $op->{client}, op => $op->{id}, recipe => $recipe, path => $path,
			mode => $mode, token => -1, qty => 1, enter => int($op->{enter} * 1e6), exit => int(($op->{exit} // $op->{enter}) * 1e6),
			asked => int($op->{start} * 1e6) };
	}
}
push @sections, @cur_mx;
# Curator's leadership still open at the end (its latch not closed yet)
push @sections, @cur_lead, defined $cur_lead_from
  ? { who => 'cur', client => 'clatch', op => 'lead-open', recipe => 'leader', path => $PATH{lead}, mode => 'x', token => -1, qty => 1,
	enter => $cur_lead_from, exit => int(time * 1e6), asked => $cur_lead_from }
  : ();
# when each SQL section's COMMIT returned (with_commit_times), when said
for my $x (grep { $_->{who} ne 'cur' } @sections)
{
	my $o = $op_by_id{ $x->{op} } or next;
	($x->{ret}) = grep { $_ >= $x->{exit} } @{ $o->{commits} // [] };
}
# ZooKeeper's own record of the sessions (zk_sessions): when the server
# ended each, for the direct check of the lease and closed_at below
my $zk_sessions = zk_sessions($ENSEMBLE ? 2 : 1,
	$ENSEMBLE ? (map { "$_->{dir}/data" } ZklockNet::netns_members()) : (zk_dir($zk) . '/data'));
note(sprintf('sections: %d committed SQL, %d Curator', scalar(grep { $_->{who} ne 'cur' } @sections), scalar(grep { $_->{who} eq 'cur' } @sections)));

############################################################################
# Reporting a violation: the seed, the schedule, the history around it
############################################################################
sub show_section
{
	my ($s) = @_;
	my $o = defined $s->{op} ? $op_by_id{ $s->{op} } : undef;
	return sprintf('%s %s op %s (%s) %s %s%s%s [%s, %s]', $s->{who}, $s->{client}, $s->{op} // '-', $o ? $o->{kind} : 'loop',
		$s->{path}, $s->{mode}, $s->{mode} eq 's' ? " x$s->{qty}" : '',
		($s->{token} // -1) >= 0 ? " token $s->{token}" : '', rel($s->{enter} / 1e6), rel($s->{exit} / 1e6));
}

sub show_op
{
	my ($o) = @_;
	return sprintf('  %8s..%-8s %-3s %-6s op %-6d %-18s %-12s -> %s%s%s', rel($o->{start}), rel($o->{end}), $o->{who}, $o->{client},
		$o->{id}, $o->{kind}, $o->{path} // '', join(' | ', @{ $o->{lines} // [ $o->{out} // '(running)' ] }),
		$o->{errmsg} ? " [$o->{errmsg}]" : '', $o->{dead} ? ' [backend died]' : '');
}

# A session closed from outside (ZkTool, with the session's password) is
# not an expiry the lease can see: only zklock.commit_confirm confirms the
# nodes at COMMIT (see the failure model).  A SQL section whose lock was in
# a session ZkTool closed while the section was open or its COMMIT not yet
# returned, in a transaction without commit_confirm, is excused: left out
# of the checks, and shown.  closed_at($s): when the server closed that
# session (ZooKeeper's transaction log: the close by a client, cxid not 0,
# of a session a ZkTool job of $s's cluster was closing, inside that job's
# run), undef when no such close fell inside $s or $s set commit_confirm.
# Another holder that entered after that instant may owe its lock to the
# close; one that entered before may not.
sub zktool_close_of
{
	my ($c, $sid) = @_;
	my $e = $zk_sessions->{$sid};
	return undef unless $e && defined $e->{ended} && $e->{cxid} != 0;
	my $t = $e->{ended} / 1000;
	return scalar(grep {
			$_->{cluster} eq $c && $_->{sid} eq $sid && $t >= $_->{t_start} - 1 && $t <= ($_->{t_done} // $_->{t_start} + 60) + 1
		} @zktool_jobs) ? $t : undef;
}

sub closed_at
{
	my ($s) = @_;
	return undef if $s->{who} eq 'cur' || ($s->{confirm} // 'off') eq 'on';
	my $at;
	for my $sid (grep { defined } $s->{sid_enter}, $s->{sid_exit})
	{
		my $t = zktool_close_of($s->{who}, $sid) // next;
		$at = $t if $t >= $s->{enter} / 1e6 - 1 && $t <= ($s->{ret} // $s->{exit}) / 1e6 + 1 && (!defined $at || $t < $at);
	}
	return $at;
}

# Curator's own rule for its locks: from a SUSPENDED connection state on it
# cannot be certain that it holds a lock, and at LOST it certainly does not
# (its session is gone, or Curator gave it up after a session timeout of
# SUSPENDED).  Under the ensemble's faults the Curator client loses its
# session too; its section then goes on, as Curator's recipes do not stop
# a holder.  The same holds for an acquire that was waiting when LOST came:
# Curator gives a session up after a session timeout of SUSPENDED on its
# own clock and starts a new one, while the server keeps the old session
# (and the lock node the acquire made in it) until its own timeout; the
# acquire then finds that node again and returns "acquired" on a node of
# a session the client no longer has, which the server deletes when it
# expires the session.  (Seen with seed 4001 on forky, Curator 5.7.1: two
# write acquires waiting through LOST returned at 1481.6 s and 1482.4 s;
# at 1490.9 s zklock's writers entered both paths at once, and at 1491.0 s
# another thread of the same Curator client took one of them while the
# first still "held" it, which Curator's queue allows only once that
# node is gone.)  While the server keeps the session, its nodes keep
# everyone else out, whatever Curator reported: the excuse starts when
# ZooKeeper's own record (zk_sessions) says the server ended the session,
# not at SUSPENDED or LOST.  cur_lost_at($s): for a Curator section $s,
# the time the server ended the session the Curator client had when the
# section's acquire was asked (@cur_sids, from its state reports), when
# that was before the section's exit; undef otherwise.
sub cur_session_at
{
	my ($t) = @_;
	my $sid;
	for my $x (@cur_sids)
	{
		last if $x->[0] > $t;
		$sid = $x->[1];
	}
	return $sid;
}

sub cur_lost_at
{
	my ($s) = @_;
	return undef unless $s->{who} eq 'cur';
	my $sid = cur_session_at(($s->{asked} // $s->{enter}) / 1e6) // return undef;
	my $e = $zk_sessions->{$sid} or return undef;
	return undef unless defined $e->{ended};
	my $end = $e->{ended} / 1000;
	return $end <= $s->{exit} / 1e6 ? $end : undef;
}

# cur_disturbed($op): the Curator client reported a change of its
# connection's state (SUSPENDED, LOST, RECONNECTED, from a thread of its
# own, so up to 5 s late) during Curator's operation $op, or its JVM was
# stopped meanwhile: its client may have sent a write again
sub cur_disturbed
{
	my ($op) = @_;
	my ($from, $to) = ($op->{start} - 1, ($op->{end} // time) + 5);
	return 1 if grep { $_->[1] >= $from && $_->[1] <= $to } @cur_states;
	return scalar grep { $_->[0] <= $to && $_->[1] >= $from } @cur_stalls;
}

# excused_pair($x, $y): the overlap of $x and $y is explained by a session
# lost on the other side: one of them ran in a session being closed from
# outside (closed_at) or a Curator session that was lost (cur_lost_at), and
# the other entered after that began.
sub excused_pair
{
	my ($x, $y) = @_;
	for ([ $x, $y ], [ $y, $x ])
	{
		my ($a, $b) = @$_;
		my $at = closed_at($a) // cur_lost_at($a);
		return 1 if defined $at && $b->{enter} / 1e6 >= $at - 0.5;
	}
	return 0;
}

my $violations = 0;
sub history
{
	my ($what, $from, $to, $path_re) = @_;
	$violations++;
	my @h = ("VIOLATION: $what", "seed $SEED (ZKLOCK_ADVERSARY_SEED=$SEED ZKLOCK_ADVERSARY_MODE=$MODE ZKLOCK_ADVERSARY_SECONDS=$SECONDS); times in s since the load began");
	push @h, 'faults from ' . rel($from - 30) . ' s to ' . rel($to) . ' s:';
	push @h, map { sprintf('  %8.3f %s%s', $_->[1], $_->[0], defined $_->[2] ? " ($_->[2])" : '') }
	  grep { $_->[1] >= $from - 30 - $t0 && $_->[1] <= $to - $t0 + 1 } faults();
	push @h, 'operations on the path in that window:';
	my @o = grep { ($_->{path} // '') =~ $path_re && ($_->{end} // $to) >= $from - 5 && ($_->{start} // 0) <= $to + 1 } @ops;
	@o = @o[ -60 .. -1 ] if @o > 60;
	push @h, map { show_op($_) } sort { $a->{start} <=> $b->{start} } @o;
	diag(join("\n", @h));
	return;
}

############################################################################
# Checks
############################################################################
# Exclusive sections: mutex paths, semaphore mutex, write lock vs any, leader.
subtest 'no two holders of a mutex, semaphore mutex, write lock or leadership overlap; no reader beside a writer' => sub {
	my %by_path;
	push @{ $by_path{ $_->{path} } }, $_ for grep { $_->{recipe} =~ /^(mutex|rw|leader)$/ } @sections;
	my $n_over = 0;
	my $n_excused = 0;
	for my $p (sort keys %by_path)
	{
		my @s = sort { $a->{enter} <=> $b->{enter} } @{ $by_path{$p} };
		my @bad;
		for my $i (0 .. $#s)
		{
			for my $j ($i + 1 .. $#s)
			{
				last if $s[$j]{enter} > $s[$i]{exit};
				next if $s[$i]{mode} eq 'r' && $s[$j]{mode} eq 'r';
				# the same client's own sections (a downgrade: the write
				# section ends before its read section begins)
				next if $s[$i]{who} eq $s[$j]{who} && $s[$i]{client} eq $s[$j]{client} && $s[$i]{op} eq $s[$j]{op};
				if (excused_pair($s[$i], $s[$j]))
				{
					$n_excused++;
					note('excused: ' . show_section($s[$i]) . ' and ' . show_section($s[$j]));
					next;
				}
				push @bad, [ $s[$i], $s[$j] ];
			}
		}
		$n_over += @bad;
		ok(!@bad, "$p: no two committed sections overlap where one excludes the other (" . scalar(@s) . ' sections)')
		  or do {
			diag(scalar(@bad) . " overlapping pairs on $p:");
			diag('  ' . show_section($_->[0]) . "\n    and " . show_section($_->[1])) for @bad[ 0 .. ($#bad > 19 ? 19 : $#bad) ];
			# the history of the first pair, and of the next ones that
			# begin well after it (another occurrence)
			my $last = -1e18;
			my $shown = 0;
			for my $pair (@bad)
			{
				my ($x, $y) = @$pair;
				next if $x->{enter} < $last + 60e6;
				$last = $x->{enter};
				history("overlap on $p: " . show_section($x) . ' and ' . show_section($y),
					$x->{enter} / 1e6, ($x->{exit} > $y->{exit} ? $x->{exit} : $y->{exit}) / 1e6, qr/^\Q$p\E$|^\/adv\/m1\+m2$/);
				last if ++$shown >= 4;
			}
		  };
	}
	note("overlapping pairs excused (a SQL side whose session was closed from outside meanwhile, without commit_confirm, or a Curator side whose session was lost): $n_excused");
	note('Curator connection states: ' . join(' ', map { sprintf('%s@%s', $_->[0], rel($_->[1])) } @cur_states));
};

# The lease, checked directly.  ZooKeeper's own record says when the
# server ended each session: the closeSession transaction in its
# transaction logs, stamped with the leader's clock when it was proposed
# (before the session's nodes go).  A SQL section's locks were in the
# session its cluster's worker had when the lock was granted and when the
# row was written; its COMMIT returned at the time with_commit_times took
# right after it (or, when that was not said, later than the section's
# exit).  A COMMIT that returned after the server ended either session
# relied on a lock nobody held any more, whether or not anyone else took
# it: the lease (zklock.lease_margin and zklock.commit_min_lease before
# the earliest expiry) must have stopped it.  A close from outside (ZkTool,
# with the session's password) is the one end the lease cannot see: it is
# excused for a transaction without zklock.commit_confirm (closed_at's
# rule), and counted.

subtest 'no COMMIT returned after ZooKeeper ended the session its locks were in' => sub {
	my (@late, $n_timed, $n_excused, %ends);
	my @s = grep { $_->{who} ne 'cur' } @sections;
	for my $x (@s)
	{
		my $ret = $x->{ret};
		$n_timed++ if defined $ret;
		my $at = $ret // $x->{exit};
		my %seen;
		for my $sid (grep { !$seen{$_}++ } $x->{sid_enter}, $x->{sid_exit})
		{
			my $e = $zk_sessions->{$sid};
			if (!$e)
			{
				push @late, [ $x, $sid, 'a session ZooKeeper has no record of', $at ];
				next;
			}
			next unless defined $e->{ended};
			$ends{$sid} = 1;
			next if $e->{ended} * 1000 > $at;
			if (($x->{confirm} // 'off') ne 'on' && defined zktool_close_of($x->{who}, $sid))
			{
				$n_excused++;
				next;
			}
			push @late, [ $x, $sid, sprintf('ended by the server at %s (%s)', rel($e->{ended} / 1000), $e->{cxid} ? 'closed' : 'expired'), $at ];
		}
	}
	ok(!@late, 'no COMMIT returned after the server ended the session of its locks (' . scalar(@s)
		  . " sections, $n_timed with the COMMIT's return timed)")
	  or do {
		diag(sprintf('%s: session %s, %s; COMMIT returned %s', show_section($_->[0]), $_->[1], $_->[2], rel($_->[3] / 1e6)))
		  for @late[ 0 .. ($#late > 19 ? 19 : $#late) ];
		history('a COMMIT after its session ended: ' . show_section($late[0][0]), $late[0][0]{enter} / 1e6, $late[0][3] / 1e6,
			qr/^\Q$late[0][0]{path}\E$/);
	  };
	note(sprintf('sessions the servers ended under zklock: %d; COMMITs after a close from outside without commit_confirm (excused): %d',
			scalar(keys %ends), $n_excused // 0));
	# what the run covered: COMMITs asked after the server expired the
	# session of their section's lock, the section begun before (a cut-off
	# that outlasted the session timeout under a held lock), and COMMITs
	# asked in the last 2 s before such an expiry
	my ($after, $before) = (0, 0);
	for my $o (grep { $_->{held} } @ops)
	{
		for my $h (@{ $o->{held} })
		{
			my ($sid, $enter, $exit) = @$h;
			my $e = $zk_sessions->{$sid} or next;
			next unless defined $e->{ended} && !$e->{cxid};
			my $end_us = $e->{ended} * 1000;
			$after++ if $enter < $end_us && $exit >= $end_us;
			$before++ if $exit < $end_us && $exit >= $end_us - 2e6;
		}
	}
	note("COMMITs asked after the server expired the session their section began in: $after; in the 2 s before such an expiry: $before");
	my $po = $probe{op} // {};
	ok($probe{held} && $probe{done} && ($po->{sqlstate} // '') eq '40000' && !@{ $po->{commits} // [] },
		"the lease probe's COMMIT, asked after its cluster was cut off for its session timeout + 3 s, failed with 40000 (got "
		  . ($po->{errmsg} // ($probe{done} ? 'no error' : 'no answer')) . ", session timeout $probe{timeout} ms)");
	cmp_ok($after, '>=', 1, 'a COMMIT was asked after the server expired the session its section began in (the probe at least)');

	# COMMIT's floor: the lease stood still while the floor's COMMITs were
	# asked, one was asked with less than its commit's 100 ms left, none
	# asked under the floor succeeded, none that succeeded returned late
	my $min = $probe{commit_min_lease} // '';
	my $left = sub { my ($v) = @_; return defined $v && $v =~ /^\d+$/ ? $v : 0; };
	# (lease_until is the monotonic end shown on the wall clock: the two
	# readings differ by the microseconds between their clock readings)
	ok($probe{floor_until} =~ /^[\d.]+$/ && $probe{floor_until_after} =~ /^[\d.]+$/
		  && abs($probe{floor_until} - $probe{floor_until_after}) < 0.005,
		"the lease stood still in the black hole while the floor's COMMITs were set off (it ends at $probe{floor_until}, then at $probe{floor_until_after})");
	my @asked = grep { $_->{held} && $_->{done} && $left->($_->{asked}) > 0 } @floor;
	cmp_ok(scalar(grep { $_->{asked} < $COMMIT_DELAY_MS } @asked), '>=', 1,
		"a COMMIT of the floor was asked with lease left, but less than its commit takes (commit_delay $COMMIT_DELAY_MS ms): "
		  . join('; ', map { show_floor($_) } @floor));
	my @under = grep { $min =~ /^\d+$/ && $_->{asked} < $min && ($_->{sqlstate} // '') ne '40000' } @asked;
	ok($min =~ /^\d+$/ && !@under,
		"every COMMIT asked with less than zklock.commit_min_lease ($min ms) of lease left failed with 40000"
		  . (@under ? ': ' . join('; ', map { show_floor($_) } @under) : ''));
	my @late_floor = grep { defined $_->{returned} && $left->($_->{returned}) <= 0 } @floor;
	ok(!@late_floor, 'every COMMIT of the floor that succeeded returned before the lease ran out'
		  . (@late_floor ? ": " . join("; ", map { show_floor($_) } @late_floor) : ''));
};

subtest 'the probes: multi-lock, lost counter reply, stale read, handover, lock cache, revocation, downgrade, cancel_on_loss and a clock step back' => sub {
	ok($probe2{multi_held}, "the multi-lock probe: another client held $probe2{multi_second}"
		  . ($probe2{multi_held} ? '' : " (zk_locks there: $probe2{multi_rows})"));
	is($probe2{multi_out}, 'f', "a multi-lock asked with a 1 s timeout while another client held one of its mutexes said false"
		  . ($probe2{multi_out} ? '' : ' (' . substr($probe2{multi_err}, 0, 200) . ')'));
	my $a = $probe2{add} // {};
	ok($probe2{add_lost}, "the counter probe's write reached the server and a reply of its connection was lost");
	ok($probe2{add_done} && (in_doubt($a) || (!defined $a->{sqlstate} && ($a->{out} // '') =~ /^\d+$/)),
		'the add whose reply was lost failed in doubt (08006 "may or may not have been applied") or answered its value (got '
		  . ($a->{errmsg} // $a->{out} // 'no answer') . ')');
	my $sa = $probe2{stale_add} // {};
	ok($probe2{stale_ready}, "the stale read probe: an add's getData left while replies were held back, and Curator added meanwhile (said $probe2{stale_cur})");
	ok($probe2{stale_done} && !defined $sa->{sqlstate} && ($sa->{out} // '') =~ /^\d+$/ && $sa->{out} ne $probe2{stale_cur},
		"an add that read the counter before Curator's add answered a value of its own, not Curator's (got "
		  . ($sa->{errmsg} // $sa->{out} // 'no answer') . ')');
	# the handover: whether both waiters entered is for the overlap check
	ok($probe2{handover_ready},
		"the handover probe: a holder and a waiter of cluster $PROBE_C and a waiter of the other queued, the first waiter's node deleted from outside while the lock was held ("
		  . join(', ', map { "$_->{client} " . ($_->{errmsg} // $_->{out} // '?') } @{ $probe2{handover} // [] }) . ')');
	ok($probe2{cache_ready}, 'the lock cache probe: a client of the other cluster queued behind a backend that holds the mutex'
		  . ($probe2{cache_ready} ? '' : " (zk_locks after: $probe2{cache_rows})"));
	ok($probe2{cache_got},
		sprintf('a client of the other cluster that queued behind a kept node got the lock within 4 s while one backend took it again and again (%s after %.1f s%s)',
			$probe2{cache_got} ? 'got it' : 'not', $probe2{cache_secs} // 0, $probe2{cache_got} ? '' : ': ' . substr($probe2{cache_err} // '', 0, 200)));
	my $dg = $probe2{downgrade} // {};
	# (whether the downgrade was still waiting when the worker ran again,
	# and the other writer held by then, depends on timing: both outcomes
	# are safe, and the answer is checked either way)
	ok($probe2{dg_write}, 'the stall probe: a downgrade asked while its write lock was held and the worker stopped'
		  . sprintf(' (still waiting when the worker ran again: %s; the other cluster\'s writer held by then: %s)',
			$probe2{dg_pending} ? 'yes' : 'no', $probe2{dg_other} ? 'yes' : 'no'));
	# (its first answer is the write section's; a granted downgrade says ok next)
	my @dl = @{ $dg->{lines} // [] };
	ok($probe2{downgrade} && defined $dg->{end} && !grep({ $_ eq 'ok' } @dl[ 1 .. $#dl ]),
		'a downgrade asked before the session was lost was not granted (got ' . ($dg->{errmsg} // $dg->{out} // 'no answer') . ')');
	ok($probe2{cancel_ready} && defined $probe2{cancel_at} && $probe2{cancel_state} eq 'ZK001',
		sprintf('with zklock.cancel_on_loss on, a statement under a lock was cancelled with ZK001 while the worker was stopped (%s a %.1f s stall; %s)',
			defined $probe2{cancel_at} ? sprintf('%.1f s into', $probe2{cancel_at}) : 'not in', $probe2{stall} // 0,
			$probe2{cancel_state} || substr($probe2{cancel_err} // '', 0, 200) || 'no error'));
	ok($probe2{rv_sql_ready}, 'the revocation probe: a SQL holder of a revocable mutex and a waiter of the other cluster behind it');
	ok($probe2{rv_sql_n} eq '1' && $probe2{rv_sql_told},
		"a zk_revoke of the other cluster asked the SQL holder, not its waiter (said $probe2{rv_sql_n}; the holder told within 5 s: "
		  . ($probe2{rv_sql_told} ? 'yes' : 'no') . ')');
	ok($probe2{rv_cur_ready}, 'the revocation probe: Curator\'s revocable holder and a SQL waiter behind it');
	ok($probe2{rv_cur_n} eq '1' && $probe2{rv_cur_told},
		"a SQL zk_revoke asked Curator's holder, not its waiter (said $probe2{rv_cur_n}; Curator reported the request within 5 s: "
		  . ($probe2{rv_cur_told} ? 'yes' : 'no') . ')');
	ok($probe2{clock_ready} && $probe2{clock_state} eq '40000',
		'a COMMIT asked after the server expired its session, the wall clock stepped back 30 s meanwhile, failed with 40000 (got '
		  . ($probe2{clock_state} || ($probe2{clock_out} eq 'committed' ? 'committed' : substr($probe2{clock_err} // '', 0, 200))) . ')');
};

subtest 'fencing tokens strictly increase per mutex path' => sub {
	for my $p ($PATH{m1}, $PATH{m2}, @OWN)
	{
		my @s = sort { $a->{enter} <=> $b->{enter} } grep { $_->{path} eq $p && $_->{recipe} eq 'mutex' && $_->{token} >= 0 && !defined closed_at($_) } @sections;
		my @bad;
		for my $i (1 .. $#s)
		{
			push @bad, [ $s[ $i - 1 ], $s[$i] ] if $s[$i]{token} <= $s[ $i - 1 ]{token};
		}
		ok(!@bad, "$p: " . scalar(@s) . ' tokens strictly increase in order of entering')
		  or history("token order on $p: " . show_section($bad[0][0]) . ' then ' . show_section($bad[0][1]),
			$bad[0][0]{enter} / 1e6, $bad[0][1]{exit} / 1e6, qr/^\Q$p\E$/);
	}
};

subtest 'never more than 3 semaphore leases at once' => sub {
	my @s = grep { $_->{recipe} eq 'semaphore' } @sections;
	my $n_excused = 0;
	my @pts = sort { $a->[0] <=> $b->[0] || $b->[1] <=> $a->[1] } map { ([ $_->{enter}, $_->{qty}, $_ ], [ $_->{exit}, -$_->{qty}, $_ ]) } @s;
	my ($open, $most, $at) = (0, 0, undef);
	my %open;
	for my $pt (@pts)
	{
		$open += $pt->[1];
		if ($pt->[1] > 0) { $open{ $pt->[2] } = $pt->[2]; } else { delete $open{ $pt->[2] }; }
		my $now = $open;
		if ($open > $SEM_MAX)
		{
			# leases of a session being closed from outside, or of a
			# Curator session that was lost, since before this instant do
			# not count
			$now = 0;
			for my $x (values %open)
			{
				my $c = closed_at($x) // cur_lost_at($x);
				$now += $x->{qty} unless defined $c && $pt->[0] / 1e6 >= $c - 0.5;
			}
			$n_excused++ if $now <= $SEM_MAX;
		}
		if ($now > $most) { $most = $now; $at = [ values %open ] if $now > $SEM_MAX; }
	}
	note("instants over $SEM_MAX excused (leases of a session being closed from outside): $n_excused");
	cmp_ok($most, '<=', $SEM_MAX, "at most $SEM_MAX leases held at once (most: $most, " . scalar(@s) . ' sections)')
	  or history("more than $SEM_MAX leases: " . join('; ', map { show_section($_) } @$at),
		(sort { $a <=> $b } map { $_->{enter} } @$at)[-1] / 1e6 - 5, (sort { $a <=> $b } map { $_->{exit} } @$at)[0] / 1e6, qr/^\/adv\/sem$/);
};

# the final values of the counters
my %final;
{
	for my $p (@CNT) { $final{$p} = $node{A}->safe_psql('postgres', "SELECT zk_atomic_long_get('$p')"); }
	my $v = $node{A}->safe_psql('postgres', q{SELECT 0 || ' ' || zk_atomic_long_get('/adv/cas') || ' '
		|| (SELECT value || ' ' || version FROM zk_shared_count_get_versioned('/adv/ts')) || ' ' || zk_atomic_long_get('/adv/set')});
	@final{qw(cnt cas ts ts_version set)} = split / /, $v;
	note('final counters: adds ' . join(' ', map { $final{$_} } @CNT) . ", cas $final{cas}, try-set $final{ts} (version $final{ts_version}), set $final{set}");
}

# in doubt: an error that may come after the write left (08006, a dead or
# terminated backend, a cancel), not 40000 (refused before sending)
# in_doubt($o): an add of SQL's that may have been applied without its
# caller knowing: its backend died or never answered, it failed with the
# 08006 that says its write left ("may or may not have been applied"), or
# its backend gave up (a cancel, a termination, a shutdown) after the
# write may have left.  Any other error is a refusal: the write was never
# sent (08006 "not reachable", a lock lost, bad input), and the add must
# not be in the counter.
sub in_doubt
{
	my ($o) = @_;
	return 1 if $o->{dead} || !defined $o->{end};
	return 0 unless defined $o->{sqlstate};
	return 1 if $o->{sqlstate} =~ /^57/;
	return 1 if $o->{sqlstate} eq '08006' && ($o->{errmsg} // $o->{err} // '') =~ /may or may not have been applied/;
	return 0;
}

# explain_adds($grew, \@answered, \@doubt, \@multi): the values 1 .. $grew
# a counter took, each made by one applied add.  An answered add made the
# value it answered (none twice, none above $grew); each other value must
# be made by an add that may have been applied ($doubt, each once) or by
# an add of Curator's that took a retry ($multi: Curator's
# DistributedAtomicLong tries a setData again after a lost answer, so it
# may have been applied more than once), running when that value can have
# been written: after the start of the add that answered the value below
# it, before the end of the add that answered the value above it.  Returns
# the values nothing explains (with the reason).
sub explain_adds
{
	my ($grew, $answered, $doubt, $multi) = @_;
	my (%by_value, @bad);
	for my $o (@$answered)
	{
		my $v = $o->{value};
		push @bad, "value $v answered twice" if $by_value{$v};
		push @bad, "value $v answered, above the final $grew" if $v > $grew || $v < 1;
		$by_value{$v} = $o;
	}
	my @known = sort { $a <=> $b } keys %by_value;
	my %used;
	my ($k, $lo) = (0, -1e18);
	for my $v (1 .. $grew)
	{
		if ($by_value{$v})
		{
			$lo = $by_value{$v}{start};
			$k++;
			next;
		}
		my $hi = $k <= $#known ? $by_value{ $known[$k] }{end} // 1e18 : 1e18;
		my $fits = sub { my ($o) = @_; return $o->{start} <= $hi && ($o->{end} // 1e18) >= $lo; };
		next if grep { $fits->($_) } @$multi;
		my ($best) = sort { ($a->{end} // 1e18) <=> ($b->{end} // 1e18) } grep { !$used{$_} && $fits->($_) } @$doubt;
		if ($best) { $used{$best} = 1; next; }
		push @bad, "value $v: no add in doubt ran when it can have been written";
	}
	return @bad;
}

subtest 'counters: every add counted once, compare-and-set and try-set answers agree with the history, set wrote the final value' => sub {
	for my $path (@CNT)
	{
	my @add = grep { $_->{kind} eq 'add' && $_->{path} eq $path } @ops;
	my @cur = grep { $_->{kind} eq 'curator add' && $_->{path} eq $path } @ops;
	$_->{value} = $_->{out} for grep { !defined $_->{sqlstate} && !$_->{dead} && ($_->{out} // '') =~ /^\d+$/ } @add;
	for (@cur) { $_->{value} = $1 if $_->{cur_ok} && ($_->{out} // '') =~ / true (\d+)$/; }
	my @answered = grep { defined $_->{value} } @add, @cur;
	my $ok = @answered;
	# Curator's DistributedAtomicLong is not exactly-once: a setData whose
	# reply a connection loss took is tried again by its retry loop, fails
	# on the version it already moved, and the add is made again on the
	# new value.  An add of Curator's that took a retry (over a second)
	# may so have been applied more than once, inside its own run only.
	my @multi = grep { defined $_->{end} && $_->{end} - $_->{start} > 1 } @cur;
	my %is_multi = map { $_ => 1 } @multi;
	my @doubt = ((grep { !defined $_->{value} && in_doubt($_) } @add),
		(grep { !defined $_->{value} && !$is_multi{$_} } @cur));
	my $doubt = @doubt;
	my $refused = grep { !defined $_->{value} && !in_doubt($_) } @add;
	my $grew = $final{$path} - 0;
	my @gaps = grep { my $v = $_; !grep { $_->{value} == $v } @answered } 1 .. $grew;
	my @bad = explain_adds($grew, \@answered, \@doubt, \@multi);
	ok(!@bad,
		"add: $path grew by $grew; $ok adds answered, $doubt in doubt, $refused refused (SQL " . scalar(@add) . ', Curator ' . scalar(@cur)
		  . (@multi ? ', ' . scalar(@multi) . " of Curator's retried, each may explain values in its own run" : '') . ')')
	  or do {
		# the shortest history that shows it: the adds a fault hit (in
		# flight when a fault of their cluster began), and those faults
		my @hit;
		for my $f (faults())
		{
			my ($c) = $f->[0] =~ /^([AB]):/ or next;
			my $at = $t0 + $f->[1];
			push @hit, [ $f, grep { $_->{who} eq $c && $_->{start} <= $at && ($_->{end} // 1e12) >= $at } @add ];
		}
		@hit = grep { @$_ > 1 } @hit;
		my @h = ("VIOLATION: counter $path grew by $grew for $ok answered adds and $doubt in doubt: " . join('; ', @bad[ 0 .. ($#bad > 5 ? 5 : $#bad) ]),
			"seed $SEED (ZKLOCK_ADVERSARY_SEED=$SEED ZKLOCK_ADVERSARY_MODE=$MODE ZKLOCK_ADVERSARY_SECONDS=$SECONDS); times in s since the load began",
			'the adds in flight when a fault of their cluster began:');
		for my $x (@hit)
		{
			my ($f, @a) = @$x;
			push @h, sprintf('  fault %8.3f %s%s', $f->[1], $f->[0], defined $f->[2] ? " ($f->[2])" : ''), map { show_op($_) } @a;
		}
		push @h, 'the adds in doubt on the counter:', map { show_op($_) } sort { $a->{start} <=> $b->{start} } @doubt, @multi;
		push @h, 'values of the counter no add answered (' . scalar(@gaps) . '), with the adds that answered the values around each:';
		for my $g (@gaps[ 0 .. ($#gaps > 5 ? 5 : $#gaps) ])
		{
			push @h, "  value $g:", map { show_op($_) } grep { $_->{value} >= $g - 2 && $_->{value} <= $g + 2 } @answered;
		}
		$violations++;
		diag(join("\n", @h));
	  };
	}

	# the chains of unique values: from the final one back to 0
	for my $ch ([ 'cas', $final{cas} ], [ 'tryset', $final{ts} ])
	{
		my ($kind, $v) = @$ch;
		my @o = grep { ($_->{kind} eq $kind || $_->{kind} eq "curator $kind") && defined $_->{end} } @ops;
		my %by_new = map { $_->{newv} => $_ } @o;
		my (%on, $steps);
		while ($v != 0 && $by_new{$v} && !$on{$v})
		{
			my $x = $by_new{$v};
			$on{$v} = 1;
			$steps++;
			my ($expected) = ($x->{out} // '') =~ /^(-?\d+)/;
			$expected //= $x->{read};
			last unless defined $expected;
			$v = $expected;
		}
		my (@false_on, @true_off);
		my $cur_retry = 0;
		for my $x (@o)
		{
			next if defined $x->{sqlstate} || $x->{dead} || $x->{cur_error};
			my ($answer) = ($x->{out} // '') =~ /(true|false)$/ or next;
			# Curator's client sends a write again after a lost answer:
			# when the first was applied, the second's version no longer
			# matches and Curator answers false.  Only a Curator write
			# during which its connection changed state is excused.
			if ($answer eq 'false' && $on{ $x->{newv} } && $x->{who} eq 'cur' && cur_disturbed($x))
			{
				$cur_retry++;
				next;
			}
			push @false_on, $x if $answer eq 'false' && $on{ $x->{newv} };
			push @true_off, $x if $answer eq 'true' && !$on{ $x->{newv} };
		}
		my $chain_ok = $v == 0;
		note(sprintf('%s: %d operations of SQL, %d of Curator, %d Curator writes on the chain; %d Curator false answers on the chain excused (its connection changed state)',
			$kind, scalar(grep { $_->{who} ne 'cur' } @o), scalar(grep { $_->{who} eq 'cur' } @o),
			scalar(grep { $_->{who} eq 'cur' && $on{ $_->{newv} } } @o), $cur_retry));
		ok($chain_ok, "$kind: the chain of values leads back to the initial 0 ($steps writes)")
		  or diag("$kind: the chain stops at $v");
		ok(!@false_on, "$kind: no write on the chain answered false (" . scalar(@o) . ' operations)')
		  or history("$kind op $false_on[0]{id} answered false but its value $false_on[0]{newv} was applied",
			$false_on[0]{start} - 5, $false_on[0]{end} + 5, qr/^\Q$PATH{ $kind eq 'cas' ? 'cas' : 'ts' }\E$/);
		ok(!@true_off, "$kind: every true answer is on the chain")
		  or history("$kind op $true_off[0]{id} answered true but its value $true_off[0]{newv} was never applied",
			$true_off[0]{start} - 5, $true_off[0]{end} + 5, qr/^\Q$PATH{ $kind eq 'cas' ? 'cas' : 'ts' }\E$/);
	}
	my %wrote = map { $_->{newv} => 1 } grep { $_->{kind} eq 'set' && (!defined $_->{sqlstate} || in_doubt($_)) } @ops;
	ok($final{set} == 0 || $wrote{ $final{set} }, "set: the final value $final{set} was written by a set that did not fail before sending");
};

subtest 'barriers: no wait passes while the barrier was certainly set; no double barrier enter passes alone' => sub {
	my @set = grep { $_->{kind} eq 'barrier_set' && ($_->{out} // '') eq 't' && defined $_->{end} } @ops;
	my @rm = grep { $_->{kind} eq 'barrier_remove' } @ops;
	my @early;
	for my $w (grep { ($_->{kind} eq 'barrier_wait' && ($_->{out} // '') =~ /^true/) || ($_->{kind} eq 'curator barrier' && $_->{pass_us}) } @ops)
	{
		# the latest set that created the barrier before the wait began
		my ($s) = sort { $b->{end} <=> $a->{end} } grep { $_->{end} < $w->{start} } @set;
		next unless $s;
		# any remove that may have run since (whatever it answered) explains a pass
		next if grep { ($_->{end} // 1e12) > $s->{start} && $_->{start} < $w->{end} } @rm;
		push @early, $w;
	}
	ok(!@early, 'no barrier wait passed while the barrier was set and nobody removed it ('
		  . scalar(grep { $_->{kind} =~ /barrier_wait|curator barrier/ } @ops) . ' waits)')
	  or history("barrier wait op $early[0]{id} passed early", $early[0]{start} - 10, $early[0]{end}, qr/^\/adv\/b$/);
	# SQL's members and Curator's (DistributedDoubleBarrier)
	my @db = grep { $_->{kind} =~ /^(curator )?dbarrier$/ && defined $_->{end} } @ops;
	my @alone;
	for my $d (grep { ($_->{out} // '') =~ /^(ok|leave-timeout) (\d+)/ } @db)
	{
		# a round a member left uncleanly may leave P/ready behind (as in
		# Curator's protocol, only the last member to leave deletes it): an
		# enter after such a round passes at once
		# (until a round ends cleanly after it)
		my ($last_unclean) = sort { $b <=> $a } map { $_->{end} }
		  grep { $_->{end} < $d->{start} && ($_->{dead} || defined $_->{sqlstate} || ($_->{out} // '') !~ /^ok /) } @db;
		next if defined $last_unclean
		  && !grep { $_->{end} > $last_unclean && $_->{end} < $d->{start} && ($_->{out} // '') =~ /^ok / && !defined $_->{sqlstate} } @db;
		my ($t_in) = $d->{out} =~ / (\d+)$/;
		# a member node may stay after its call returned, until its
		# cluster's worker can delete it or its session ends (a black
		# hole, a stall): up to a session timeout
		push @alone, $d unless grep {
			$_ != $d && $_->{start} <= $t_in / 1e6 && ($_->{end} // 1e12) >= $d->{start} - 70
		} @db;
	}
	ok(!@alone, 'no double barrier enter of 2 passed without another member (' . scalar(@db) . ' rounds, '
		  . scalar(grep { $_->{who} eq 'cur' } @db) . " of them Curator's)")
	  or history("double barrier op $alone[0]{id} entered alone", $alone[0]{start} - 10, $alone[0]{end}, qr/^\/adv\/db$/);
};

# faults_on($c, $from, $to): the faults noted on cluster $c or on ZooKeeper
# between $from and $to (epoch s)
sub faults_on
{
	my ($c, $from, $to) = @_;
	return grep {
		my $at = $t0 + $_->[1];
		$at >= $from && $at <= $to && fault_touches($_, $c)
	} faults();
}

# Revocation (Curator's Revocable and Revoker): a holder that zk_revoke
# asked is told.  Curator's actor cm2 holds /adv/m2 revocable (it reports
# a request, it does not give the lock up): a zk_revoke of /adv/m2 that
# answered 1 while cm2 held it (asked after cm2's acquire returned,
# answered 2 s or more before its release was asked, its connection
# steady throughout) wrote into cm2's node, the first of the queue, and
# Curator must report the request.  A SQL holder of a revocable mutex
# that asked its own node (zk_revoke answered 1) and held on for a second
# or more must find the path in zk_revocation_requested(), when its
# section committed and no fault was noted on its cluster meanwhile (the
# watch's event comes on the connection that answered the zk_revoke; a
# fault may delay the read of the node that follows it).
subtest 'revocation: a holder that zk_revoke asked is told, Curator\'s and SQL\'s' => sub {
	my @cm2 = grep { $_->{client} eq 'cm2' && defined $_->{enter} && defined $_->{exit} } @ops;
	my ($asked, @untold) = (0);
	for my $r (grep { $_->{kind} eq 'revoke' && $_->{path} eq $PATH{m2} && ($_->{out} // '') eq '1' && !defined $_->{sqlstate} } @ops)
	{
		my ($h) = grep {
			$_->{enter} <= $r->{start} && $_->{exit} >= $r->{end} + 2 && !cur_disturbed({ start => $_->{enter}, end => $_->{exit} })
		} @cm2;
		next unless $h;
		$asked++;
		push @untold, [ $r, $h ] unless grep { $_->[0] eq 'cm2' && $_->[1] >= $r->{start} && $_->[1] <= $h->{exit} + 5 } @cur_revoked;
	}
	my ($self_asked, @self_untold) = (0);
	for my $x (grep { $_->{who} ne 'cur' } @sections)
	{
		my $o = $op_by_id{ $x->{op} } or next;
		next unless $o->{kind} eq 'mutex_revocable' && ($o->{revoke_n} // 0) == 1 && $o->{hold} >= 1;
		# (a cut-off or a stall over the whole section is excluded already:
		# the zk_revoke in it was answered through the same worker)
		next if faults_on($o->{who}, $x->{enter} / 1e6 - 1, $x->{exit} / 1e6 + 1);
		$self_asked++;
		push @self_untold, $o unless ($o->{revoke_told} // '') eq 't';
	}
	note(sprintf('revocation: %d zk_revoke of /adv/m2 answered 1 inside a steady hold of Curator\'s cm2; %d requests Curator reported in all; '
			. '%d SQL holders asked themselves and held on, with no fault; %d revocable sections committed',
			$asked, scalar(@cur_revoked), $self_asked,
			scalar(grep { ($op_by_id{ $_->{op} }{kind} // '') eq 'mutex_revocable' } grep { $_->{who} ne 'cur' } @sections)));
	ok(!@untold, "Curator's holder was told of every zk_revoke that asked it ($asked)")
	  or history("zk_revoke op $untold[0][0]{id} answered 1 during cm2's hold (op $untold[0][1]{id}); Curator reported no request",
		$untold[0][1]{start} - 5, $untold[0][1]{exit} + 5, qr/^\/adv\/m2$/);
	ok(!@self_untold, "every SQL holder that asked itself found its path in zk_revocation_requested() ($self_asked)")
	  or history("op $self_untold[0]{id} ($self_untold[0]{client}) revoked its own hold of $self_untold[0]{path}, and was not told",
		$self_untold[0]{start} - 5, $self_untold[0]{end} + 5, qr/^\Q$self_untold[0]{path}\E$/);
};

# upgrade_cycle($op): is $op's 40P01 a real cycle an upgrade op closes?
# A reader asking for the write lock of its path (an upgrade) queues its
# write node behind the writers already queued behind its read node: each
# of them waits for the reader's read lock, the reader for every node ahead
# of its own, and no queue can be reordered.  The first member to check
# (mostly a writer, since the upgrade gives up after 200 ms, unless a step
# of the clock brings the upgrade's check forward) finds a cycle and fails
# itself: of two (the reader and one writer), or longer when it goes
# through a node waiting ahead of another ("W2 waits for W1, which waits
# ahead of it; W1 for the reader; the reader for W2"; a reader queued
# behind W1 and ahead of the upgrade's write node is in it the same way),
# or two upgrades each waiting for the other's read lock.  Without an
# upgrade no op here closes a cycle on a read/write lock: a writer or a
# reader holds nothing while it waits, and a downgrade's read lock is
# granted at once.  True only when the DETAIL, from the failed op's own
# process, is a closed chain of waits for the read or write lock of the
# op's path, each member's process ran an op on that path at the time (of
# either cluster: a cycle across clusters names them "of cluster ..."),
# and one of them an upgrade.
sub upgrade_cycle
{
	my ($o) = @_;
	return 0 unless $o->{kind} =~ /^(read_xact|write_xact|downgrade|upgrade)$/ && defined $o->{detail};
	my $p = quotemeta $o->{path};
	my @lines = $o->{detail} =~ /(Process \d+ (?:of cluster \S+ )?waits for [^\n]*)/g;
	return 0 if @lines < 2;
	my (@who, @by);
	for (@lines)
	{
		my ($w, $b) = /^Process (\d+)(?: of cluster \S+)? waits for zookeeper (?:read|write) lock "$p"; blocked by process (\d+)(?: of cluster \S+)?(?:, which waits ahead of it in the queue)?\.$/
		  or return 0;
		push @who, $w;
		push @by, $b;
	}
	return 0 unless $who[0] == ($o->{pid} // 0);
	for my $i (0 .. $#who)
	{
		return 0 unless $by[$i] == $who[ ($i + 1) % @who ];
	}
	my $upgrades = 0;
	for my $pid (@who)
	{
		my @m = grep {
			($_->{pid} // 0) == $pid && ($_->{path} // '') eq $o->{path} && $_->{kind} =~ /^(read_xact|write_xact|downgrade|upgrade)$/
			  && $_->{start} <= $o->{end} && ($_->{end} // $o->{end}) >= $o->{start}
		} @ops;
		return 0 unless @m;
		$upgrades++ if grep { $_->{kind} eq 'upgrade' } @m;
	}
	return $upgrades > 0;
}

# queued_in_multi_cycle($op): with ZKLOCK_ADVERSARY_CYCLES, is $op's 40P01
# that of a mutex waiter of /adv/m1 or /adv/m2 whose node waited ahead of a
# multi-lock's in the cycle of two multi-locks in opposite orders?  Such a
# waiter holds nothing, so it is in a cycle only when a multi-lock waits
# behind it (an edge "blocked by process <it>, which waits ahead of it in
# the queue"); the DETAIL, from its process, is mutex waits on the two
# paths only, three or more of them.
sub queued_in_multi_cycle
{
	my ($o) = @_;
	return 0 unless $o->{kind} =~ /^mutex/ && defined $o->{detail};
	my $me = $o->{pid} // 0;
	my @lines = $o->{detail} =~ /(Process \d+ waits for [^\n]*)/g;
	return 0 if @lines < 3 || $lines[0] !~ /^Process $me /;
	for (@lines)
	{
		return 0 unless m{^Process \d+ waits for zookeeper lock "/adv/m[12]"; blocked by process \d+(?:, which waits ahead of it in the queue)?\.$};
	}
	return scalar grep { /; blocked by process $me, which waits ahead of it in the queue\.$/ } @lines;
}

subtest 'no wrong answer, no hang, every error a documented SQLSTATE' => sub {
	is(scalar @wrong, 0, 'no wrong answer (reentrant, downgrade, upgrade, revoke, leases)')
	  or do { history("wrong answer: $wrong[0][0]", $wrong[0][1]{start} - 20, $wrong[0][1]{end}, qr/^\Q$wrong[0][1]{path}\E$/); };
	my @not_granted = grep { $_->{kind} eq 'downgrade' && ($_->{lines}[1] // '') eq 'downgrade-false' && !defined $_->{sqlstate} } @ops;
	note('downgrades that said false (the write lock lost meanwhile): ' . scalar(@not_granted));
	is(scalar @hangs, 0, 'no statement ran past its timeouts and holds plus ' . $HANG_SLACK . ' s after its start and after the last fault on its cluster (and the steps back of its clock)') or diag(join("\n", @hangs));
	my @bad = grep { !$DOCUMENTED{$_} } sort keys %err_count;
	is(scalar @bad, 0, 'every error carries a documented SQLSTATE (' . join(', ', map { "$_ x$err_count{$_}" } sort keys %err_count) . ')')
	  or diag(join("\n", map { "$_: $err_example{$_}" } @bad));
	my @upgrade_cycles = grep { ($_->{sqlstate} // '') eq '40P01' && upgrade_cycle($_) } @ops;
	note('writers failed in the cycle of a reader\'s upgrade (real, broken with 40P01): ' . scalar(@upgrade_cycles));
	my @deadlocked = grep {
		($_->{sqlstate} // '') eq '40P01' && !($CYCLES && ($_->{kind} eq 'multi' || queued_in_multi_cycle($_)))
		  && !upgrade_cycle($_)
	} @ops;
	is(scalar @deadlocked, 0, $CYCLES
		? '40P01 (deadlock detected) only for multi-locks, whose two orders close real cycles'
		: 'no 40P01 (deadlock detected): nothing here closes a cycle, however long the waits')
	  or diag(join("\n", map { "$_->{client} $_->{kind} $_->{path}: " . ($_->{errmsg} // '') } @deadlocked));
	note("example of $_: $err_example{$_}") for sort keys %err_example;
};

############################################################################
# Nothing left behind
############################################################################
$peer->quit;
my %dir = map { $_ => 1 } ('/adv', values %PATH, @CNT, '/adv/own', @OWN, $PROBE_PATH, map { ("$_/locks", "$_/leases") } values %PATH);
subtest 'once everything is released, no lock, lease, member or latch node is left' => sub {
	my $left;
	# a session a lease ran out on is expired by the server one session
	# timeout (up to 60 s here) after its last answer
	my $ok = wait_until(sub {
			my $tree = zk_tree($zk, '/adv') or return 0;
			$left = [ grep { $_ ne '' && !$dir{$_} && $_ ne '/adv/db/ready' } @$tree ];
			return !@$left;
		}, 90, 'no node left under /adv');
	ok($ok, 'no node is left under /adv but the recipes\' directories, the counters and the barrier')
	  or diag('left: ' . join(' ', @{ $left // [] }));
	for my $c (@CLUSTERS)
	{
		my $st = status_row($node{$c});
		is("$st->{locks_held} $st->{slots_used}", '0 0', "cluster $c: zk_status says no lock held, no slot in use");
	}
};

############################################################################
# Summary
############################################################################
{
	my %k;
	for my $o (@ops)
	{
		my $what = (split ' ', ($o->{out} // '?'))[0] // 'void';
		$what = 'value' if $what =~ /^-?\d+$/;
		$what = $o->{dead} ? 'died' : defined $o->{sqlstate} ? $o->{sqlstate} : $what;
		$k{ $o->{kind} }{$what}++;
		note("example: op $o->{id} $o->{kind} -> " . join(' | ', @{ $o->{lines} // [] }) . " err=[" . ($o->{err} // '') . ']')
		  if $what eq 'value' && $o->{kind} !~ /^(add|cas|tryset|revoke)$/ && $k{ $o->{kind} }{$what} == 1;
	}
	note('operations (outcomes): ' . join('; ', map { my $x = $_; "$x " . join(' ', map { "$_=$k{$x}{$_}" } sort keys %{ $k{$x} }) } sort keys %k));
	my %f;
	$f{ $_->[0] =~ s/^[AB]: //r }++ for faults();
	note('faults and actions: ' . join(', ', map { "$_ x$f{$_}" } sort keys %f));
	note('schedule: ' . join('; ', map { sprintf('%.1f %s%s', $_->[1], $_->[0], defined $_->[2] ? " ($_->[2])" : '') } faults()));
	note("SQL waiters' nodes deleted from outside: $deleted_waiters");
	for my $c (@CLUSTERS)
	{
		# what the runs covered: local handovers, and handed locks found
		# lost because their node had been deleted from outside
		my $log = slurp_file($node{$c}->logfile);
		my $lost = () = $log =~ /deleted by another client (?:before|while) the lock was handed to it/g;
		note("cluster $c: " . status_row($node{$c})->{handovers} . " local handovers, $lost handed locks lost to a deleted node");
	}
	note("other Curator replies: @peer_other[0 .. ($#peer_other > 20 ? 20 : $#peer_other)]") if @peer_other;
	diag(sprintf('905_adversary: seed %d, %.0f s of load, %d operations, %d faults, %d violations; took %.0f s',
			$SEED, $t_load_end - $t0, scalar(@ops), scalar(faults()), $violations, time - $t_begin));
}

$node{$_}->stop for @CLUSTERS;
$_->stop for map { @$_ } map { @$_ } values %proxies;
if ($ENSEMBLE) { stop_netns_ensemble(); } else { stop_zk($zk); }
done_testing();

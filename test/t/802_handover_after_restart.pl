
# 802_handover_after_restart: queues of local waiters that a restarted
# worker takes over are still handed the lock in their order.
#
# What users rely on: when the zklock worker exits (here: SIGTERM) while
# sessions hold and wait for locks on a few paths (mutexes, a read/write
# lock, a semaphore's P/locks), the next worker takes every hold and every
# wait over in the same ZooKeeper session, and the releases that follow
# give each lock to the next waiter in ZooKeeper's queue order, by a local
# handover (zk_status().handovers) as before the restart: the new worker
# finds its own nodes of each lock path again (its index of the slots by
# lock path is rebuilt from the request table).  No two holders of a mutex
# overlap, a Curator waiter at the back of a queue gets its turn after the
# local waiters ahead of it, no node is left behind, and the worker never
# logs that its index disagrees with the table.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use ZklockTest;
use ZklockFault;

my $zk = start_zk();
my $node = new_zklock_node('handover_restart', $zk);
my $peer = new_peer($zk);

sub handovers { return status_row($node)->{handovers}; }


# queued($s): the worker decided where $s waits (zk_locks.waiting_for)
sub queued
{
	my ($s) = @_;
	return wait_until(
		sub {
			$node->safe_psql('postgres',
				'SELECT coalesce(max(waiting_for), \'\') FROM zk_locks WHERE pid = '
				  . $s->pid) ne '';
		},
		10, $s->name . ' to be queued');
}

my $NW = 5;    # local waiters behind each mutex holder
my @M = ('/t802/m1', '/t802/m2');
my $RW = '/t802/rw';
my $SEM = '/t802/sem';
my (%holder, %waiters);

# Two mutexes: a holder and $NW waiters each; a Curator waiter at the back
# of the first.
for my $p (@M)
{
	my $tag = (split m{/}, $p)[-1];
	$holder{$p} = ZklockTest::Session->new($node, "$tag-h");
	is($holder{$p}->value("SELECT zk_mutex_acquire('$p')"), 't', "$p: the holder acquires");
	my $n = 1;
	for my $k (1 .. $NW)
	{
		my $s = ZklockTest::Session->new($node, "$tag-w$k");
		$s->start("SELECT zk_mutex_acquire('$p', '60s')");
		$n++;
		wait_children_count($peer, $p, $n) or BAIL_OUT("$p: no node for " . $s->name);
		queued($s) or BAIL_OUT("$p: " . $s->name . ' not queued');
		push @{ $waiters{$p} }, $s;
	}
}
$peer->acquire('c1', $M[0], -1);
wait_children_count($peer, $M[0], $NW + 2) or BAIL_OUT('Curator c1 is not queued');

# A read/write lock: a writer holds, three readers and a writer wait.
my $w1 = ZklockTest::Session->new($node, 'rw-w1');
is($w1->value("SELECT zk_write_lock_acquire('$RW')"), 't', "$RW: the writer holds");
my @rw;
for my $k (1 .. 4)
{
	my $mode = $k <= 3 ? 'read' : 'write';
	my $s = ZklockTest::Session->new($node, "rw-$mode$k");
	$s->start("SELECT zk_${mode}_lock_acquire('$RW', '60s')");
	wait_children_count($peer, $RW, $k + 1) or BAIL_OUT("$RW: no node for " . $s->name);
	queued($s) or BAIL_OUT("$RW: " . $s->name . ' not queued');
	push @rw, $s;
}

# A semaphore of one lease: s1 has it, s2 holds P/locks waiting for a
# lease, s3 and s4 wait on P/locks.
my @sem = map { ZklockTest::Session->new($node, "sem$_") } 1 .. 4;
isnt($sem[0]->value("SELECT zk_semaphore_acquire('$SEM', 1, 1, '10s')"), '',
	"$SEM: s1 has the only lease");
$sem[1]->start("SELECT zk_semaphore_acquire('$SEM', 1, 1, '60s') IS NOT NULL");
wait_children_count($peer, "$SEM/leases", 2) or BAIL_OUT('s2 has no lease node');
for my $k (2, 3)
{
	$sem[$k]->start("SELECT zk_semaphore_acquire('$SEM', 1, 1, '60s') IS NOT NULL");
	wait_children_count($peer, "$SEM/locks", $k) or BAIL_OUT('sem' . ($k + 1) . ' not on P/locks');
	queued($sem[$k]) or BAIL_OUT('sem' . ($k + 1) . ' not queued');
}

my %before = map { $_ => lock_children($peer, $_) } (@M, $RW, "$SEM/locks", "$SEM/leases");
my $session = $node->safe_psql('postgres', 'SELECT session_id FROM zk_status()');
my $log_at = -s $node->logfile;

############################################################################
# The worker restarts with all of that held and waiting.
############################################################################
my ($old, $new) = restart_worker($node, 'TERM');
isnt($new, '', "a new worker ($new) replaced $old");
ok(wait_connected($node, 20), 'the new worker is connected');
is($node->safe_psql('postgres', 'SELECT session_id FROM zk_status()'),
	$session, 'in the same ZooKeeper session');
is_deeply({ map { $_ => lock_children($peer, $_) } keys %before },
	\%before, 'ZooKeeper shows the same nodes under every lock path');
for my $p (@M)
{
	is(zk_holders($node, $p), $holder{$p}->pid, "$p: zk_locks still shows the holder");
	queued($_) for @{ $waiters{$p} };
}
queued($_) for (@rw, @sem[2, 3]);

# zk_locks.waiting_for is what the earlier worker decided.  The new one
# lists for each wait it took over once connected; the server answers one
# session's requests in order, so two mutex cycles on another path, one
# after the other (the second taken on after the first's answer, in a
# later pass), are answered after those listings.
my $probe = ZklockTest::Session->new($node, 'probe');
for my $k (1, 2)
{
	is($probe->value("SELECT zk_mutex_acquire('/t802/probe', '10s') AND zk_mutex_release('/t802/probe')"),
		't', "probe $k: a mutex cycle through the new worker");
}
my $h0 = handovers();

############################################################################
# Releases after the restart: each mutex goes down its queue, one holder at
# a time, each by a local handover; then Curator c1.
############################################################################
for my $p (@M)
{
	my @chain = ($holder{$p}, @{ $waiters{$p} });
	for my $k (0 .. $#chain - 1)
	{
		my ($cur, $next) = @chain[ $k, $k + 1 ];
		my $r;
		is($cur->value("SELECT zk_mutex_release('$p')"), 't', "$p: " . $cur->name . ' releases');
		$r = $next->result(10);
		is($r->{out}, 't', "$p: " . $next->name . ' gets the lock next') or diag($r->{err});
		is(zk_holders($node, $p), $next->pid, "$p: zk_locks shows only " . $next->name . ' holding');
		# the released node goes one round trip after the grant (the
		# local handover does not wait for its delete: the failure model)
		my $lowest;
		wait_until(sub { $lowest = lock_children($peer, $p)->[0] // ''; $lowest eq $before{$p}[ $k + 1 ] },
			10, "$p: the released node to go");
		is($lowest, $before{$p}[ $k + 1 ],
			"$p: the lowest node in ZooKeeper is " . $next->name . "'s");
		ok(!$_->done, "$p: " . $_->name . ' still waits') for @chain[ $k + 2 .. $#chain ];
	}
}
ok(!$peer->has_reply(qr/^(acquired|error) c1\b/), 'Curator c1 still waits behind the last local holder');
is(handovers(), $h0 + 2 * $NW, 'every step down the mutex queues was a local handover');
my $last = $waiters{ $M[0] }[-1];
is($last->value("SELECT zk_mutex_release('$M[0]')"), 't', 'the last local holder of m1 releases');
is($peer->acquire_result('c1', 10), 'acquired', 'then Curator c1, at the back, gets the lock');
is($peer->release('c1'), 'released', 'Curator c1 releases');
is($waiters{ $M[1] }[-1]->value("SELECT zk_mutex_release('$M[1]')"), 't', 'the last holder of m2 releases');

############################################################################
# The read/write lock: the writer's release gives the three readers the
# lock, the last reader's the writer behind them.
############################################################################
$h0 = handovers();
is($w1->value("SELECT zk_write_lock_release('$RW')"), 't', "$RW: the writer releases");
for my $s (@rw[ 0 .. 2 ])
{
	my $r = $s->result(10);
	is($r->{out}, 't', "$RW: " . $s->name . ' gets the read lock') or diag($r->{err});
}
is(handovers(), $h0 + 3, "$RW: the three readers by a local handover");
ok(!$rw[3]->done, "$RW: the writer behind them waits");
for my $s (@rw[ 0 .. 2 ])
{
	is($s->value("SELECT zk_read_lock_release('$RW')"), 't', "$RW: " . $s->name . ' releases');
}
my $r = $rw[3]->result(10);
is($r->{out}, 't', "$RW: then the writer gets the lock") or diag($r->{err});
is($rw[3]->value("SELECT zk_write_lock_release('$RW')"), 't', "$RW: and releases it");

############################################################################
# The semaphore: leases in turn, P/locks handed along its queue.
############################################################################
for my $k (0 .. 2)
{
	is($sem[$k]->value("SELECT zk_semaphore_release_all('$SEM')"), '1',
		'sem' . ($k + 1) . ' returns its lease');
	$r = $sem[ $k + 1 ]->result(10);
	is($r->{out}, 't', 'sem' . ($k + 2) . ' gets the lease') or diag($r->{err});
}
is($sem[3]->value("SELECT zk_semaphore_release_all('$SEM')"), '1', 'sem4 returns its lease');

############################################################################
# Nothing left, and the index never disagreed with the table.
############################################################################
for my $p (@M, $RW, "$SEM/locks", "$SEM/leases")
{
	ok(wait_children_count($peer, $p, 0), "no node left under $p");
}
ok(wait_no_zklock_rows($node), 'zk_locks is empty');
my $log = substr(slurp_file($node->logfile), $log_at);
unlike($log, qr/zklock: path index/, 'the worker never found its path index disagreeing with the table');

$_->quit for (values %holder, map { @$_ } values %waiters);
$_->quit for ($w1, @rw, @sem, $probe);
$peer->quit;
$node->stop;
stop_zk($zk);
done_testing();

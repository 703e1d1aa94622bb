
# 801_handover_outside: a lock released to a local waiter is never held by
# anyone but the holder that ZooKeeper's queue names, as seen from outside.
#
# What users rely on:
#   1. While the released node is still in ZooKeeper (its delete held back by
#      a connection that lets nothing through), no zklock session holds the
#      lock: a Curator client or another zklock cluster reading the
#      participants sees the released node first and nobody else holding,
#      and a Curator Revoker.attemptRevoke written into it asks no one who
#      holds.  Once the delete is applied the local waiter holds, the
#      participants name its node, and a revocation written into that node
#      reaches it (zk_revocation_requested).  A waiter that is not
#      revocable holds at once instead: the released node keeps everyone
#      else out until it goes (its delete is guarded by a check of the
#      waiter's node), and a COMMIT meanwhile keeps what it wrote.
#   2. A waiter whose node was deleted from outside (by another client)
#      before the release reached ZooKeeper is never believed to hold the
#      lock, across a connection loss or a restart of the worker right at
#      the release: the Curator waiter behind it gets the lock while the
#      zklock waiter does not hold (zk_locks), and work done in a
#      transaction is committed only when its lock was really held (a COMMIT
#      under a lock called lost fails with 40000 and keeps nothing).
#   3. A semaphore lease request handed P/locks although its node there was
#      deleted from outside fails (38000) rather than take a lease.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use ZklockTest;
use ZklockFault;
use ZklockProxy;

my $zk = start_zk();
my $proxy = ZklockProxy->start($zk);
my $node = new_zklock_node('hand', $proxy->connect,
	"zklock.session_timeout = '8s'\nzklock.connect_timeout = '30s'\nzklock.lease_margin = '1s'\n");
my $other = new_zklock_node('other', $zk);    # another cluster, straight to ZooKeeper
my $peer = new_peer($zk);                      # Curator, straight to ZooKeeper

$node->safe_psql('postgres', 'CREATE TABLE work_done(tag text PRIMARY KEY)');
my ($sa, $sb) = map { ZklockTest::Session->new($node, $_) } qw(a b);


# waiting_for($s): zk_locks.waiting_for of session $s ('' before it queued)
sub waiting_for
{
	my ($s) = @_;
	return $node->safe_psql('postgres',
		'SELECT coalesce(max(waiting_for), \'\') FROM zk_locks WHERE pid = ' . $s->pid);
}

# requested($s): zk_revocation_requested() in session $s
sub requested
{
	my ($s) = @_;
	return $s->value(q{SELECT coalesce(string_agg(p, ','), '') FROM zk_revocation_requested() p});
}

# release_taken($s, $path): the worker has taken $s's release of $path
# (its row left zk_locks: the release was withdrawn, its delete queued)
sub release_taken
{
	my ($s, $path) = @_;
	return wait_until(sub { !exists zk_lock_rows($node, $path)->{ $s->pid } }, 10,
		$s->name . "'s release of $path to be taken");
}

# other_holder($path): the node another cluster's zk_participants says holds
sub other_holder
{
	my ($path) = @_;
	my @h = map { $_->{node} =~ s{^.*/}{}r } grep { $_->{holds} eq 't' } @{ participants_rows($other, $path) };
	return join(',', @h);
}

############################################################################
# 1. The released node's delete is held back: nobody holds while it exists;
#    revocation and participants name the real holder.
############################################################################
subtest 'while the released node\'s delete is held back nobody holds; revocation and participants name the real holder' => sub {
	my $P = '/t801/revoke';
	my $s0 = status_row($node)->{session_id};
	is($sa->value(qq{SELECT zk_mutex_acquire('$P', NULL, true)}), 't', 'a holds a revocable mutex');
	$sb->start(qq{SELECT zk_mutex_acquire('$P', '60s', true)});
	wait_children_count($peer, $P, 2) or BAIL_OUT('b is not queued');
	wait_until(sub { waiting_for($sb) ne '' }, 10, 'b to be queued') or BAIL_OUT('b is not queued');
	my $kids = lock_children($peer, $P);
	my ($na, $nb) = @$kids;
	is(waiting_for($sb), $na, "b waits behind a's node");

	$proxy->set_mode('blackhole');
	is($sa->value(qq{SELECT zk_mutex_release('$P')}), 't', 'a releases, its delete held back');
	ok(release_taken($sa, $P), "the worker took a's release");
	is_deeply(lock_children($peer, $P), [ $na, $nb ], "a's node is still first in ZooKeeper's queue");
	is($peer->participants($P)->[0], "$P/$na", "Curator's participants: a's node comes first");
	is(other_holder($P), $na, "another cluster's zk_participants: a's node holds");
	is(zk_holders($node, $P), '', '... and no zklock session holds meanwhile');
	ok($peer->revoke("$P/$na"), "Curator's Revoker.attemptRevoke on the first node (a's)");
	is(lock_state($node, $sb->pid, $P), 'waiting', 'b still does not hold: nobody was asked while holding');

	reconnect_after($node, $proxy, 'cut', $s0);
	my $r = $sb->result(10);
	is($r->{out}, 't', 'b gets the lock once the delete is applied');
	is_deeply(lock_children($peer, $P), [$nb], "a's node is gone, b's is first");
	is($peer->participants($P)->[0], "$P/$nb", "Curator's participants: b's node comes first");
	is(other_holder($P), $nb, "another cluster's zk_participants: b's node holds");
	is(zk_holders($node, $P), $sb->pid, 'zk_locks: b holds');
	is(requested($sb), '', "the revocation written into a's node asks nothing of b");
	ok($peer->revoke("$P/$nb"), "Curator's Revoker.attemptRevoke on the first node (b's)");
	ok(wait_until(sub { requested($sb) eq $P }, 10, "b's revocation"),
		'the revocation reaches b, the holder (zk_revocation_requested)');
	is($sb->value(qq{SELECT zk_mutex_release('$P')}), 't', 'b releases');
	ok(wait_children_count($peer, $P, 0), 'nothing left');
};

############################################################################
# 1b. The same with a waiter that is not revocable: it holds at once (a
#     handover at memory speed), while the released node, still first in
#     ZooKeeper's queue, keeps the Curator waiter behind it out; Curator's
#     participants name the released node until its delete is applied (one
#     round trip once the connection lets it through), then b's; a
#     revocation written into the released node asks nothing of b, as it
#     asks nothing of a Curator holder that did not make its lock revocable.
############################################################################
subtest 'a waiter that is not revocable holds at once; the released node keeps Curator out until it goes' => sub {
	my $P = '/t801/fast';
	my $s0 = status_row($node)->{session_id};
	$node->safe_psql('postgres', 'DELETE FROM work_done');
	is($sa->value(qq{SELECT zk_mutex_acquire('$P')}), 't', 'a holds the mutex');
	$sb->value('BEGIN');
	$sb->start(qq{SELECT zk_mutex_acquire_xact('$P', '60s')});
	wait_children_count($peer, $P, 2) or BAIL_OUT('b is not queued');
	wait_until(sub { waiting_for($sb) ne '' }, 10, 'b to be queued') or BAIL_OUT('b is not queued');
	$peer->acquire('c_fast', $P, -1);
	wait_children_count($peer, $P, 3) or BAIL_OUT('Curator is not queued');
	my ($na, $nb, $nc) = @{ lock_children($peer, $P) };

	$proxy->set_mode('blackhole');
	is($sa->value(qq{SELECT zk_mutex_release('$P')}), 't', 'a releases, its delete held back');
	my $r = $sb->result(10);
	is($r->{out}, 't', 'b holds at once');
	is(zk_holders($node, $P), $sb->pid, 'zk_locks: b holds');
	$sb->query(q{INSERT INTO work_done VALUES ('fast')});
	is_deeply(lock_children($peer, $P), [ $na, $nb, $nc ], "a's node is still first in ZooKeeper's queue");
	is($peer->participants($P)->[0], "$P/$na", "Curator's participants: a's node comes first while its delete is held back");
	ok($peer->revoke("$P/$na"), "Curator's Revoker.attemptRevoke on the first node (a's)");
	ok(!$peer->has_reply(qr/^(acquired|error) c_fast\b/), 'the Curator waiter behind b waits');

	reconnect_after($node, $proxy, 'cut', $s0);
	ok(wait_children_count($peer, $P, 2), "a's node goes once the connection is back");
	is_deeply(lock_children($peer, $P), [ $nb, $nc ], "b's node is first");
	is($peer->participants($P)->[0], "$P/$nb", "Curator's participants: b's node comes first");
	is(other_holder($P), $nb, "another cluster's zk_participants: b's node holds");
	is(requested($sb), '', 'nothing was asked of b');
	ok(!$peer->has_reply(qr/^(acquired|error) c_fast\b/), 'the Curator waiter still waits while b holds');
	$r = $sb->query('COMMIT');
	is($r->{err}, '', "b's COMMIT succeeds (and ends its transaction-level lock)");
	is(committed($node, 'fast'), '1', 'what b wrote under the lock is committed');
	is($peer->acquire_result('c_fast', 10), 'acquired', 'then the Curator waiter gets the lock');
	is($peer->release('c_fast'), 'released', 'Curator releases');
	ok(wait_children_count($peer, $P, 0), 'nothing left');
};

############################################################################
# 2. The waiter's node is deleted from outside, then the release is held
#    back and the connection drops (or the worker restarts): the waiter is
#    never believed to hold while Curator does.
############################################################################
subtest 'a waiter whose node was deleted from outside is never believed to hold across a connection loss or worker restart while Curator holds' => sub {
	for my $how (qw(cut restart))
	{
		my $P = "/t801/gone_$how";
		my $s0 = status_row($node)->{session_id};
		is($sa->value(qq{SELECT zk_mutex_acquire('$P')}), 't', "$how: a holds the mutex");
		$sb->value('BEGIN');
		$sb->start(qq{SELECT zk_mutex_acquire_xact('$P', '60s')});
		wait_children_count($peer, $P, 2) or BAIL_OUT("$how: b is not queued");
		wait_until(sub { waiting_for($sb) ne '' }, 10, 'b to be queued') or BAIL_OUT('b is not queued');
		$peer->acquire("c_$how", $P, -1);
		wait_children_count($peer, $P, 3) or BAIL_OUT("$how: Curator is not queued");
		my $kids = lock_children($peer, $P);
		like($peer->delete("$P/$kids->[1]"), qr/^deleted /, "$how: b's node is deleted from outside");
		ok(wait_children_count($peer, $P, 2), "$how: a and Curator are left in the queue");

		$proxy->set_mode('blackhole');
		is($sa->value(qq{SELECT zk_mutex_release('$P')}), 't', "$how: a releases, its delete held back");
		ok(release_taken($sa, $P), "$how: the worker took a's release");
		reconnect_after($node, $proxy, $how, $s0);
		is($peer->acquire_result("c_$how", 15), 'acquired', "$how: the Curator waiter gets the lock");
		isnt(lock_state($node, $sb->pid, $P), 'held', "$how: zk_locks: b does not hold while Curator does");
		if ($sb->done)
		{
			# the lock was handed to b and then called lost
			is(lock_state($node, $sb->pid, $P), 'lost', "$how: b's lock is called lost");
			$sb->result(1);
			$sb->query(qq{INSERT INTO work_done VALUES ('$how')});
			my $r = $sb->query('COMMIT');
			is($r->{sqlstate}, '40000', "$how: b's COMMIT fails with 40000") or diag($r->{err});
			is($peer->release("c_$how"), 'released', "$how: Curator releases");
			is(committed($node, $how), '0', "$how: nothing b wrote is committed");
		}
		else
		{
			is(lock_state($node, $sb->pid, $P), 'waiting', "$how: b waits (queued again, behind Curator)");
			is($peer->release("c_$how"), 'released', "$how: Curator releases");
			my $r = $sb->result(10);
			is($r->{out}, 't', "$how: then b gets the lock");
			$sb->query(qq{INSERT INTO work_done VALUES ('$how')});
			$r = $sb->query('COMMIT');
			is($r->{err}, '', "$how: b's COMMIT succeeds");
			is(committed($node, $how), '1', "$how: what b wrote under the lock is committed");
		}
		ok(wait_children_count($peer, $P, 0), "$how: nothing left");
	}
};

############################################################################
# 3. The semaphore: a lease request whose P/locks node was deleted from
#    outside waits behind the request that holds P/locks while it waits for
#    a lease; when that one gets its lease, P/locks is handed to it at once,
#    the guarded delete finds its node gone, and the request fails (38000)
#    instead of counting leases under a lock nobody gave it; the released
#    P/locks node goes after that, and nothing is left.
############################################################################
subtest 'a lease request whose P/locks node was deleted from outside fails instead of taking a lease' => sub {
	my $P = '/t801/sem';
	my ($s1, $s2, $s3) = map { ZklockTest::Session->new($node, $_) } qw(s1 s2 s3);
	isnt($s1->value(qq{SELECT zk_semaphore_acquire('$P', 1, 1, '10s')}), '', 's1 has the only lease');
	$s2->start(qq{SELECT zk_semaphore_acquire('$P', 1, 1, '60s') IS NOT NULL});
	wait_children_count($peer, "$P/leases", 2) or BAIL_OUT('s2 has no lease node');
	$s3->start(qq{SELECT zk_semaphore_acquire('$P', 1, 1, '60s') IS NOT NULL});
	wait_children_count($peer, "$P/locks", 2) or BAIL_OUT('s3 does not wait on P/locks');
	wait_until(sub { waiting_for($s3) ne '' }, 10, 's3 to be queued') or BAIL_OUT('s3 is not queued');
	my $locks = lock_children($peer, "$P/locks");
	like($peer->delete("$P/locks/$locks->[1]"), qr/^deleted /, "s3's P/locks node is deleted from outside");
	is($s1->value(qq{SELECT zk_semaphore_release_all('$P')}), '1', 's1 returns its lease');
	is($s2->result(10)->{out}, 't', 's2 gets the lease (and hands P/locks on)');
	my $r = $s3->result(10);
	is($r->{sqlstate}, '38000', "s3's acquire fails with 38000") or diag($r->{err});
	like($r->{err}, qr/deleted by another client while the lock was handed to it/, '... saying why');
	is($s2->value(qq{SELECT zk_semaphore_release_all('$P')}), '1', 's2 returns its lease');
	ok(wait_children_count($peer, "$P/leases", 0), 'no lease node left');
	ok(wait_children_count($peer, "$P/locks", 0), 'no P/locks node left');
	is($s3->value(qq{SELECT zk_semaphore_acquire('$P', 1, 1, '10s') IS NOT NULL}), 't', 's3 gets a lease when it asks again');
	is($s3->value(qq{SELECT zk_semaphore_release_all('$P')}), '1', 's3 returns it');
	$_->quit for ($s1, $s2, $s3);
};

$_->quit for ($sa, $sb);
$peer->quit;
$proxy->stop;
stop_zk($zk);
done_testing();

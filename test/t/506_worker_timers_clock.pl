
# 506_worker_timers_clock: the worker's own timers do not follow the wall
# clock either.
#
# What users rely on: a node the worker owes ZooKeeper a delete for goes
# when its time comes, however the database host's wall clock is stepped
# meanwhile: neither later (a client elsewhere would wait behind a node
# nobody holds) nor sooner (a pause that protects a COMMIT would be cut
# short).  With the wall clock of the PostgreSQL processes stepped by
# 120 s (libfaketime, test/perl/ZklockClock.pm; ZooKeeper and Curator keep
# the real clock):
#   1. back: a node kept by zklock.lock_cache (idle 2 s) after its release
#      is deleted about zklock.lock_cache_idle later, not 120 s later;
#   2. forward: the released node of a handover to a local waiter whose
#      node was deleted from outside (its guarded delete finds the guard
#      gone, worker/deletes/deletes.c) is kept zklock.commit_min_lease (5 s), the
#      time a COMMIT that checked the handed lock just before may still
#      take, and only then deleted: the Curator client queued behind gets
#      the lock after those 5 s, not at the step (which comes inside
#      them, once the guarded delete's answer has begun the pause).
# Each step is read back in a new backend and in the worker (its stamp on
# a grant), so "the node went" is not a clock that did not move.
#
# Before the fix (the cache's idle and backoff times, the worker's
# periodic checks and the pauses of pending deletes on
# GetCurrentTimestamp): part 1's node stayed about 122 s (the adversary,
# 905, found such nodes left under /adv after steps back of its clocks),
# and in part 2 a's node went at the step, and Curator got the lock then.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use ZklockTest;
use Time::HiRes qw(time);
use ZklockClock;

my $zk = start_zk();
my $node = new_faketime_node('timers', $zk,
	"zklock.lock_cache = on\nzklock.lock_cache_idle = '2s'\nzklock.lock_cache_backoff = '2s'\n"
	  . "zklock.commit_min_lease = '5s'\n");
my $peer = new_peer($zk);
my ($sa, $sb, $probe) = map { ZklockTest::Session->new($node, $_) } qw(a b probe);

# step($what, $delta): step the clock by $delta s and read the step back
sub step
{
	my ($what, $delta) = @_;
	step_clock($node, $delta);
	my $want = clock_offset($node);
	my $b = backend_clock_offset($node);
	ok(abs($b - $want) < 2, sprintf('%s: a new backend\'s clock reads %+.1f s off (offset %+d s)', $what, $b, $want));
	my $w = worker_clock_offset($probe, "/t506/probe");
	ok(defined $w && abs($w - $want) < 2,
		sprintf('%s: the worker\'s clock reads %s s off', $what, defined $w ? sprintf('%+.1f', $w) : 'nothing'));
	return;
}

subtest 'a kept node goes after zklock.lock_cache_idle though the clock went back' => sub {
	my $P = '/t506/kept';
	is($sa->value(qq{SELECT zk_mutex_acquire('$P')}), 't', 'a takes the mutex');
	is($sa->value(qq{SELECT zk_mutex_release('$P')}), 't', 'and gives it back');
	is($node->safe_psql('postgres', qq{SELECT state FROM zk_locks WHERE path = '$P'}), 'cached',
		'zk_locks: the worker keeps the node');
	is(scalar @{ $peer->children($P) // [] }, 1, 'ZooKeeper has it');
	step('part 1', -120);
	# 2 s of idle time, the worker's check every 250 ms, the delete's round trip
	ok(wait_children_count($peer, $P, 0, 15), 'the kept node is deleted within 15 s of the step');
	is($node->safe_psql('postgres', qq{SELECT count(*) FROM zk_locks WHERE path = '$P'}), '0',
		'zk_locks shows it no more');
};

subtest 'a released node whose handover failed goes after zklock.commit_min_lease though the clock went back' => sub {
	my $P = '/t506/hand';
	is($sa->value(qq{SELECT zk_mutex_acquire('$P')}), 't', 'a holds the mutex');
	$sb->start(qq{SELECT zk_mutex_acquire('$P', '60s')});
	ok(wait_children_count($peer, $P, 2), 'b waits behind a');
	$peer->acquire('c1', $P, -1);
	ok(wait_children_count($peer, $P, 3), 'a Curator client waits behind b');
	my $kids = lock_children($peer, $P);
	like($peer->delete("$P/$kids->[1]"), qr/^deleted /, 'b\'s node is deleted from outside');
	ok(wait_children_count($peer, $P, 2), 'a and Curator are left in the queue');
	is($sa->value(qq{SELECT zk_mutex_release('$P')}), 't', 'a releases (handed to b, whose node is gone)');
	my $t_release = time;
	# the guarded delete's answer came (b's lock is called lost, its row
	# gone or lost): the pause of a's node has begun; the step comes
	# inside its 5 s
	ok(wait_until(sub { lock_state($node, $sb->pid, $P) =~ /^(lost|none)$/ }, 3),
		'b was handed the lock and it is called lost (the guard found b\'s node gone)');
	step('part 2', 120);
	my $early = nothing_within($t_release + 3.5 - time, sub { $peer->has_reply(qr/^(acquired|error) c1\b/) });
	ok(!$early, sprintf('the Curator client still waits 3.5 s after the release (a\'s node kept zklock.commit_min_lease)%s',
			$early ? sprintf(': it got the lock %.1f s after it', time - $t_release) : ''));
	is($peer->acquire_result('c1', 20), 'acquired', 'the Curator client gets the lock within 20 s');
	isnt(lock_state($node, $sb->pid, $P), 'held', 'zk_locks: b does not hold while Curator does');
	is($peer->release('c1'), 'released', 'Curator releases');
	# b was handed the lock and told it is lost, or queued again: either way
	# it ends, and nothing of it is left
	my $r = $sb->result(70);
	note('b said: ' . ($r->{out} || $r->{err}));
	$sb->query('SELECT zk_release_all()');
	ok(wait_children_count($peer, $P, 0, 15), 'nothing left under the path');
};

$peer->quit;
$_->quit for $sa, $sb, $probe;
$node->stop;
stop_zk($zk);
done_testing();

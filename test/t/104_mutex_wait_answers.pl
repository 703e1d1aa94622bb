
# 104_mutex_wait_answers: a waiting call ends with the right answer.
#
# What users rely on:
#   1. A timeout of any size the interval type allows is a timeout, not an
#      overflow: with '290000 years' the call waits like one without a
#      timeout and gets the lock when its holder (a Curator client)
#      releases it.  (Before: the deadline overflowed into the past and the
#      call returned false at once.)
#   2. A call without a timeout that waits while the worker itself is
#      stalled (SIGSTOP) ends with 08006 once the worker's session lease
#      has run out and zklock.connect_timeout has passed: the backend checks
#      the lease in shared memory itself, because a stopped worker cannot
#      tell it anything.  It leaves nothing behind once the worker runs
#      again.  (Before: it waited until the worker came back.)
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use ZklockTest;
use ZklockFault;

my $zk = start_zk();
my $node = new_zklock_node('answers', $zk,
	"zklock.session_timeout = '4s'\nzklock.connect_timeout = '2s'\n");
my $peer = new_peer($zk);

my $w;    # the waiting session, in both parts

############################################################################
# 1. A timeout of 290000 years
############################################################################
subtest 'a timeout of 290000 years is a timeout, not an overflow into the past' => sub {
	my $p = '/t104/long';
	$peer->acquire('c1', $p, -1);
	is($peer->acquire_result('c1'), 'acquired', "Curator holds $p");
	$w = ZklockTest::Session->new($node, 'w');
	$w->start(qq{SELECT zk_mutex_acquire('$p', '290000 years')});
	ok(wait_waiting($node, $w->pid, $p), 'the call waits in the queue');
	my $r = $w->result(2);
	ok(!$r->{done}, 'and is still waiting 2 s later (the timeout did not overflow into the past)')
	  or diag("out=[$r->{out}] err=[$r->{err}]");
	is($peer->release('c1'), 'released', 'Curator releases');
	$r = $w->result(20);
	is($r->{out}, 't', 'the waiter gets the lock') or diag("err=[$r->{err}]");
	is($w->value(qq{SELECT zk_mutex_release('$p')}), 't', 'and releases it');
	ok(wait_children_count($peer, $p, 0), "$p: nothing left");

};
############################################################################
# 2. A wait without timeout while the worker is stopped
############################################################################
subtest 'a wait without timeout while the worker is stopped ends with 08006 once the lease ran out' => sub {
	my $q = '/t104/stall';
	$peer->acquire('c2', $q, -1);
	is($peer->acquire_result('c2'), 'acquired', "Curator holds $q");
	$w->start(qq{SELECT zk_mutex_acquire('$q')});
	ok(wait_waiting($node, $w->pid, $q), 'a call without timeout waits in the queue');
	my $wpid = worker_pid($node);
	my $t0 = time;
	kill 'STOP', $wpid;
	my $r = $w->result(20);
	my $el = time - $t0;
	kill 'CONT', $wpid;
	ok($r->{done}, sprintf('with the worker stopped, the call ends (after %.1f s)', $el));
	is($r->{sqlstate}, '08006', 'with 08006') or diag("out=[$r->{out}] err=[$r->{err}]");
	like($r->{err}, qr/lease ran out/, 'saying the session cannot be proven alive');
	ok(wait_until(sub { status_row($node)->{state} eq 'connected' }, 30, 'reconnect'),
		'the worker runs again and connects');
	ok(wait_no_zklock_rows($node, $q), "zk_locks has no row for $q");
	ok(wait_until(sub { my $k = lock_children($peer, $q); @$k == 1 }, 20),
		"$q: only Curator's node is left");
	is($peer->release('c2'), 'released', 'Curator releases');
	is($w->value(qq{SELECT zk_mutex_acquire('$q', '10s')}), 't', 'the session can lock again');
	is($w->value(qq{SELECT zk_mutex_release('$q')}), 't', '... and release');
	ok(wait_children_count($peer, $q, 0), "$q: nothing left");

};
$w->quit;
$peer->quit;
$node->stop;
stop_zk($zk);
done_testing();


# 183_status_states: zk_status() says what the worker's connection is, in the
# two states no other test sees, and an acquire in them fails clearly.
#
# What users rely on:
#   1. 'no worker': while no zklock worker runs (it exited and the
#      postmaster has not started the next one; here the postmaster is
#      stalled so it cannot), zk_status() says so and an acquire fails
#      with 08006 within zklock.connect_timeout instead of hanging; the
#      next worker, back within the session timeout, resumes the session.
#   2. 'expired': after the session was lost (ZooKeeper down for longer
#      than the session timeout), zk_status() says 'expired' until a new
#      session is made, and the lost lock is reported lost; then
#      'connected' with a new session id.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use ZklockTest;
use ZklockFault;

my $zk = start_zk();
my $peer = new_peer($zk);
my $node = new_zklock_node('states', $zk,
	"zklock.session_timeout = '6s'\nzklock.connect_timeout = '1s'\n");
my $s = ZklockTest::Session->new($node, 's');
my $session = status_row($node)->{session_id};

sub state_in { my ($sess) = @_; return $sess->value('SELECT state FROM zk_status()'); }

############################################################################
# 1. no worker
############################################################################
# (no new connection can be made while the postmaster is stalled: the
# session s, connected before, asks everything)
subtest '\'no worker\' while no worker runs, and an acquire fails with 08006' => sub {
	my ($postmaster) = split /\n/, slurp_file($node->data_dir . '/postmaster.pid');
	my $worker = worker_pid($node);
	ok(kill('STOP', $postmaster), "the postmaster (pid $postmaster) is stalled");
	ok(kill('TERM', $worker), "the worker (pid $worker) is told to exit");
	ok(wait_until(sub { state_in($s) eq 'no worker' }, 10, "'no worker'"), "zk_status() says 'no worker'");
	my $r = $s->query(q{SELECT zk_mutex_acquire('/t183/a', '1min')});
	is($r->{sqlstate}, '08006', 'an acquire fails with 08006 (within connect_timeout, not its 1 min)');
	like($r->{err}, qr/no worker/, '... saying no worker runs');
	ok(kill('CONT', $postmaster), 'the postmaster goes on');
	ok(wait_until(sub { state_in($s) eq 'connected' }, 20, 'connected'), 'the next worker connects');
	is($s->value('SELECT session_id FROM zk_status()'), $session, '... in the same session');
};

############################################################################
# 2. expired
############################################################################
subtest '\'expired\' after the session was lost, and an acquire works again once reconnected' => sub {
	is($s->value(q{SELECT zk_mutex_acquire('/t183/b')}), 't', 's holds /t183/b');
	stop_zk($zk);
	ok(wait_until(sub { state_in($s) eq 'expired' }, 15, "'expired'"),
		"with ZooKeeper down longer than the session timeout, zk_status() says 'expired'");
	is($s->value(q{SELECT state FROM zk_locks WHERE path = '/t183/b'}), 'lost', 'the lock is lost');
	hold_for(2, "ZooKeeper still down: the state stays 'expired'");
	is(state_in($s), 'expired', "... and stays 'expired' while no new session can be made");
	restart_zk($zk);
	ok(wait_until(sub { state_in($s) eq 'connected' }, 20, 'connected'), 'once ZooKeeper is back, zklock connects');
	isnt($s->value('SELECT session_id FROM zk_status()'), $session, '... in a new session');
	my $r = $s->query(q{SELECT zk_mutex_release('/t183/b')});
	is($r->{out}, 'f', 'releasing the lost lock returns false');
	like($r->{err}, qr/was lost/, '... and says it was lost');
	is($s->value(q{SELECT zk_mutex_acquire('/t183/b', '10s')}), 't', 'the lock can be taken again');
	is($s->value(q{SELECT zk_mutex_release('/t183/b')}), 't', '... and released');

};
$s->quit;
$peer->quit;
$node->stop;
stop_zk($zk);
done_testing();

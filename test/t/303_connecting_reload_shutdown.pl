
# 303_connecting_reload_shutdown: the worker's connection across a wrong
# zklock.hosts, a reload of it, a worker restart and a smart shutdown.
#
# What users rely on:
#   1. zk_status() says 'connecting' while no server of zklock.hosts answers,
#      and a reload (no restart of the server) with a corrected zklock.hosts
#      connects.
#   2. A reload of zklock.hosts moves a live session: the worker restarts on
#      the new hosts and resumes the SAME session, so a held lock stays held
#      (Curator stays excluded) and a waiter keeps its place and gets the
#      lock, while the old address is gone.
#   3. Waiters carry on across a worker restart: a SQL waiter queued behind
#      a Curator holder keeps its place while the worker is restarted
#      (SIGTERM) and gets the lock when Curator releases it.
#   4. A smart shutdown (pg_ctl stop -m smart, which waits for the sessions
#      to end) closes the ZooKeeper session at once: the nodes of the
#      cluster are gone right after it, not a session timeout later.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use ZklockTest;
use ZklockFault;
use ZklockProxy;

my $zk = start_zk();
my $peer = new_peer($zk);
my $p1 = ZklockProxy->start($zk);
my $p2 = ZklockProxy->start($zk);

my ($node, $session, $w);    # shared by the parts below

############################################################################
# 1. 'connecting', then a reload of zklock.hosts connects
############################################################################
subtest '\'connecting\' while no server answers, and a reload of zklock.hosts connects' => sub {
	my $dead_port = PostgreSQL::Test::Cluster::get_free_port();
	$node = new_zklock_node('promises', "127.0.0.1:$dead_port",
		"zklock.session_timeout = '30s'\nzklock.connect_timeout = '5s'\n", wait_connected => 0);
	ok(wait_sql($node, 'SELECT state FROM zk_status()', 'connecting', 20),
		"zk_status() says 'connecting' while nothing answers at 127.0.0.1:$dead_port");
	$node->append_conf('postgresql.conf', "zklock.hosts = '" . $p1->connect . "'\n");
	$node->reload;
	ok(wait_connected($node, 30), 'after a reload with a live zklock.hosts, zklock connects (no server restart)');
	$session = status_row($node)->{session_id};
};

############################################################################
# 2. A reload moves the live session to the new address
############################################################################
subtest 'a reload of zklock.hosts moves the live session: the held lock and the waiter carry on' => sub {
	my $h = ZklockTest::Session->new($node, 'h');
	is($h->value(q{SELECT zk_mutex_acquire('/t303/a')}), 't', 'h holds /t303/a');
	$peer->acquire('c1', '/t303/v', -1);
	is($peer->acquire_result('c1'), 'acquired', 'Curator holds /t303/v');
	my $v = ZklockTest::Session->new($node, 'v');
	$v->start(q{SELECT zk_mutex_acquire('/t303/v')});
	ok(wait_waiting($node, $v->pid, '/t303/v'), 'v waits behind Curator');
	my $vnode = zk_lock_rows($node, '/t303/v')->{ $v->pid }{node};
	my $worker_before = worker_pid($node);
	$node->append_conf('postgresql.conf', "zklock.hosts = '" . $p2->connect . "'\n");
	$node->reload;
	ok(wait_sql($node, q{SHOW zklock.hosts}, $p2->connect, 10), 'zklock.hosts is reloaded');
	$p1->set_mode('cut');    # the old address goes away
	ok( wait_until(
			sub {
				my $s = status_row($node);
				$s->{state} eq 'connected' && $p2->stats->{accepted} > 0;
			},
			30, 'a connection through the new address'),
		'the worker connects through the new address');
	isnt(worker_pid($node), $worker_before, '... from a restarted worker');
	like(slurp_file($node->logfile), qr/zklock\.hosts changed to "\Q${\ $p2->connect }\E"/,
		'the log says why the worker restarted');
	is(status_row($node)->{session_id}, $session, '... in the same session');
	is(zk_lock_rows($node, '/t303/a')->{ $h->pid }{state}, 'held', 'h still holds /t303/a');
	$peer->acquire('c3', '/t303/a', 500);
	is($peer->acquire_result('c3'), 'timeout', 'Curator is still excluded from /t303/a');
	ok(!$v->done, 'v is still waiting');
	is($peer->release('c1'), 'released', 'Curator releases /t303/v');
	my $vr = $v->result(20);
	is($vr->{out}, 't', 'v gets the lock') or diag("err=[$vr->{err}]");
	is(zk_lock_rows($node, '/t303/v')->{ $v->pid }{node}, $vnode, '... with the node it queued with');
	is($h->value(q{SELECT zk_mutex_release('/t303/a')}), 't', 'h releases /t303/a');
	is($v->value(q{SELECT zk_mutex_release('/t303/v')}), 't', 'v releases /t303/v');
	ok(wait_children_count($peer, '/t303/a', 0), 'nothing left under /t303/a');
	ok(wait_children_count($peer, '/t303/v', 0), 'nothing left under /t303/v');
	$h->quit;
	$v->quit;
};

############################################################################
# 3. A waiter carries on across a worker restart
############################################################################
subtest 'a waiter carries on across a worker restart' => sub {
	$peer->acquire('c2', '/t303/w', -1);
	is($peer->acquire_result('c2'), 'acquired', 'Curator holds /t303/w');
	my ($cnode) = @{ lock_children($peer, '/t303/w') };
	$w = ZklockTest::Session->new($node, 'w');
	$w->start(q{SELECT zk_mutex_acquire('/t303/w')});
	ok(wait_waiting($node, $w->pid, '/t303/w'), 'w waits behind Curator');
	my $wnode = zk_lock_rows($node, '/t303/w')->{ $w->pid }{node};
	my $old = worker_pid($node);
	ok(kill('TERM', $old), "SIGTERM to the worker (pid $old)");
	my $new;
	ok(wait_until(sub { $new = worker_pid($node); $new ne '' && $new ne $old }, 20, 'a new worker'),
		'the postmaster started a new worker');
	ok(wait_connected($node, 20), 'the new worker is connected');
	is(status_row($node)->{session_id}, $session, '... in the same session');
	ok(!$w->done, 'w is still waiting');
	is_deeply([ sort @{ lock_children($peer, '/t303/w') } ], [ sort($cnode, $wnode) ],
		"the queue still holds Curator's node and w's node");
	is($peer->release('c2'), 'released', 'Curator releases');
	my $r = $w->result(20);
	is($r->{out}, 't', 'w gets the lock') or diag("err=[$r->{err}]");
	is(zk_lock_rows($node, '/t303/w')->{ $w->pid }{node}, $wnode, '... with the node it queued with');
};

############################################################################
# 4. Smart shutdown closes the session at once
############################################################################
subtest 'a smart shutdown closes the session at once' => sub {
	ok(wait_children_count($peer, '/t303/w', 1), 'w holds /t303/w (one node)');
	# pg_ctl stop -m smart waits until the last session ends: end w meanwhile
	my $stopper = IPC::Run::start([ 'pg_ctl', '-D', $node->data_dir, '-m', 'smart', '-w', '-t', '60', 'stop' ],
		'>', \my $so, '2>', \my $se);
	$w->quit;
	ok(wait_until(sub { !-f $node->data_dir . '/postmaster.pid' }, 60, 'the postmaster to exit'),
		'the smart shutdown completes once the last session ended');
	my $t0 = time;
	$stopper->finish;
	ok(wait_children_count($peer, '/t303/w', 0, 5),
		sprintf('its nodes are gone %.1f s after the shutdown (session timeout 30 s)', time - $t0));
	$node->_update_pid(0);
};

$peer->quit;
$p1->stop;
$p2->stop;
stop_zk($zk);
done_testing();


# 051_promises: promises of the README that no other test checked.
#
# What users rely on:
#   1. zk_status() says 'connecting' while no server of zklock.hosts answers
#      (and an acquire fails, as 006 checks; a restart with a correct
#      zklock.hosts connects).
#   2. Waiters carry on across a worker restart: a SQL waiter queued behind
#      a Curator holder keeps its place while the worker is restarted
#      (SIGTERM) and gets the lock when Curator releases it.
#   3. A smart shutdown (pg_ctl stop -m smart, which waits for the sessions
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

############################################################################
# 1. 'connecting', then a restart with a live zklock.hosts connects
############################################################################
my $dead_port = PostgreSQL::Test::Cluster::get_free_port();
my $node = new_zklock_node('promises', "127.0.0.1:$dead_port",
	"zklock.session_timeout = '30s'\nzklock.connect_timeout = '5s'\n", wait_connected => 0);
ok(wait_sql($node, 'SELECT state FROM zk_status()', 'connecting', 20),
	"zk_status() says 'connecting' while nothing answers at 127.0.0.1:$dead_port");
$node->append_conf('postgresql.conf', "zklock.hosts = '" . $p1->connect . "'\n");
$node->restart;
ok(wait_connected($node, 30), 'after a restart with a live zklock.hosts, zklock connects');
my $session = status_row($node)->{session_id};

############################################################################
# 2. A waiter carries on across a worker restart
############################################################################
$peer->acquire('c2', '/t051/w', -1);
is($peer->acquire_result('c2'), 'acquired', 'Curator holds /t051/w');
my ($cnode) = @{ lock_children($peer, '/t051/w') };
my $w = ZklockTest::Session->new($node, 'w');
$w->start(q{SELECT zk_mutex_acquire('/t051/w')});
ok(wait_waiting($node, $w->pid, '/t051/w'), 'w waits behind Curator');
my $wnode = zk_lock_rows($node, '/t051/w')->{ $w->pid }{node};
my $old = worker_pid($node);
ok(kill('TERM', $old), "SIGTERM to the worker (pid $old)");
my $new;
ok(wait_until(sub { $new = worker_pid($node); $new ne '' && $new ne $old }, 20, 'a new worker'),
	'the postmaster started a new worker');
ok(wait_connected($node, 20), 'the new worker is connected');
is(status_row($node)->{session_id}, $session, '... in the same session');
ok(!$w->done, 'w is still waiting');
is_deeply([ sort @{ lock_children($peer, '/t051/w') } ], [ sort($cnode, $wnode) ],
	"the queue still holds Curator's node and w's node");
is($peer->release('c2'), 'released', 'Curator releases');
my $r = $w->result(20);
is($r->{out}, 't', 'w gets the lock') or diag("err=[$r->{err}]");
is(zk_lock_rows($node, '/t051/w')->{ $w->pid }{node}, $wnode, '... with the node it queued with');

############################################################################
# 3. Smart shutdown closes the session at once
############################################################################
ok(wait_children_count($peer, '/t051/w', 1), 'w holds /t051/w (one node)');
# pg_ctl stop -m smart waits until the last session ends: end w meanwhile
my $stopper = IPC::Run::start([ 'pg_ctl', '-D', $node->data_dir, '-m', 'smart', '-w', '-t', '60', 'stop' ],
	'>', \my $so, '2>', \my $se);
$w->quit;
ok(wait_until(sub { !-f $node->data_dir . '/postmaster.pid' }, 60, 'the postmaster to exit'),
	'the smart shutdown completes once the last session ended');
my $t0 = time;
$stopper->finish;
ok(wait_children_count($peer, '/t051/w', 0, 5),
	sprintf('its nodes are gone %.1f s after the shutdown (session timeout 30 s)', time - $t0));
$node->_update_pid(0);

$peer->quit;
$p1->stop;
stop_zk($zk);
done_testing();

# 216_tls_stuck_handshake: a server that takes the TCP connection and never
# answers the TLS handshake does not stall the worker.
#
# What users rely on: with zklock.tls on, a reconnection attempt that
# reaches a server (or a path) that accepts the connection and never
# answers the handshake is given up like a plaintext one (302): the worker
# goes on answering (a SQL call fails with 08006 within
# zklock.connect_timeout instead of hanging), tries again, and resumes the
# same session once a server answers, held locks still held.  The C client
# alone loops on SSL_connect() for as long as the server keeps silent,
# blocking the worker (zk-client-build/patches/tls-handshake-nonblocking.patch
# makes the handshake wait in the worker's event loop instead).
#
# Fault: the worker's TLS connection goes through a proxy, which cuts it,
# refuses new connections for a while, then takes the next connection and
# never relays it (stall_new), then passes new connections again.  Then
# zklock.hosts names a listener that never accepts (the kernel completes
# the TCP handshake, nobody answers): the worker stays in its event loop,
# a SQL call fails with 08006 within zklock.connect_timeout, and with the
# real server added to zklock.hosts the worker connects to it.
use strict;
use warnings;
use File::Spec;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use ZklockTest;
use ZklockFault;
use ZklockPki;
use ZklockProxy;
use IO::Socket::INET;
use Time::HiRes qw(time);

my $pki = File::Spec->rel2abs(PostgreSQL::Test::Utils::tempdir('pki'));
my $tls = tls_setup($pki);
my ($zk, $zk_tls) = ($tls->{zk}, $tls->{zk_tls});
my $proxy = ZklockProxy->start($zk_tls);
my $node = new_zklock_node('tls_stuck', $proxy->connect,
	$tls->{conf}->($proxy->connect)
	  . "zklock.session_timeout = '10s'\nzklock.connect_timeout = '2s'\nlog_min_messages = debug1\n",
	wait_connected => 0);
ok(wait_connected($node, 60), 'connected over TLS through the proxy');
my $peer = new_peer($zk_tls, 'tls-peer', @{ $tls->{peer_options} });

my $s = ZklockTest::Session->new($node, 's');
is($s->value(q{SELECT zk_mutex_acquire('/t216/a')}), 't', 's holds /t216/a');
my $session = status_row($node)->{session_id};

$proxy->set_mode('cut');
# (the attempts the proxy refuses end in the TLS handshake: tls_failed)
ok(wait_until(sub { status_row($node)->{state} ne 'connected' }, 10, 'the drop to be seen'),
	'the connection is lost');
hold_for(1, 'new connections refused');
$proxy->set_mode('stall_new');
ok(wait_until(sub { $proxy->stats->{stalled} >= 1 }, 10, 'an attempt to be stalled'),
	'a reconnection attempt reaches a server that never answers the TLS handshake');
my $wpid = worker_pid($node);
my $in_loop = expected_wait_event($node, 'ZkLockWorkerMain');
ok(wait_until(sub {
			$node->safe_psql('postgres',
				"SELECT wait_event FROM pg_stat_activity WHERE pid = $wpid") eq $in_loop;
		}, 5, 'the worker to wait in its event loop'),
	"meanwhile the worker waits in its event loop ($in_loop), not inside the handshake");
my $r = ZklockTest::Session->new($node, 'n')->query(q{SELECT zk_mutex_acquire('/t216/b', '30s')});
is($r->{sqlstate}, '08006', 'a SQL call fails with 08006 instead of waiting') or diag($r->{err});

$proxy->set_mode('pass');
ok(wait_sql($node, 'SELECT state FROM zk_status()', 'connected', 20), 'the worker connects again');
like(slurp_file($node->logfile), qr/no answer to a connection attempt within \d+ ms: trying again/,
	'the worker gave up the unanswered handshake');
is($node->safe_psql('postgres', 'SELECT tls, session_id FROM zk_status()'), "t|$session",
	'over TLS, the same session resumed');
is(status_row($node)->{locks_lost}, 0, 'no lock was lost');
$peer->acquire('c', '/t216/a', 500);
is($peer->acquire_result('c'), 'timeout', 'Curator over TLS is still excluded');
is($s->value(q{SELECT zk_mutex_release('/t216/a')}), 't', 's releases');
ok(wait_children_count($peer, '/t216/a', 0), 'nothing left under /t216/a');

# in_event_loop(): the worker waits in its event loop (a few samples)
sub in_event_loop
{
	my $want = expected_wait_event($node, 'ZkLockWorkerMain');
	return wait_until(sub {
			$node->safe_psql('postgres',
				q{SELECT wait_event FROM pg_stat_activity WHERE backend_type = 'zklock worker'}) eq $want;
		}, 5, 'the worker to wait in its event loop');
}

subtest 'a server that accepts the connection and never answers the TLS handshake' => sub {
	my $silent = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => 0, Listen => 5, ReuseAddr => 1)
	  or die "listen: $!";
	my $silent_hosts = '127.0.0.1:' . $silent->sockport;
	$node->append_conf('postgresql.conf', "zklock.hosts = '$silent_hosts'\n");
	$node->reload;
	ok(wait_until(sub { status_row($node)->{state} ne 'connected' }, 20, 'the reload'),
		'zklock.hosts names only the silent server: not connected');
	ok(in_event_loop(), 'the worker waits in its event loop, not inside the handshake');
	my $t0 = time;
	my $r = ZklockTest::Session->new($node, 'm')->query(q{SELECT zk_mutex_acquire('/t216/c', '60s')});
	my $took = time - $t0;
	is($r->{sqlstate}, '08006', 'a SQL call fails with 08006') or diag($r->{err});
	cmp_ok($took, '<', 2 + 3, sprintf('within zklock.connect_timeout (2 s) and some slack (%.1f s)', $took));
	$node->append_conf('postgresql.conf', "zklock.hosts = '$silent_hosts," . $proxy->connect . "'\n");
	$node->reload;
	ok(wait_sql($node, 'SELECT state FROM zk_status()', 'connected', 30), 'with the real server added, the worker connects to it');
	is($node->safe_psql('postgres', 'SELECT tls FROM zk_status()'), 't', 'over TLS');
	close $silent;
};

$s->quit;
$peer->quit;
$node->stop;
$proxy->stop;
done_testing();

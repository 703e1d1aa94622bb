
# 211_auth_failed: ZooKeeper rejects zklock.auth.
#
# What users rely on: when the ZooKeeper servers reject the credentials in
# zklock.auth (a digest the servers do not accept, an authentication
# provider that refuses), zklock says so clearly instead of treating it as
# a session expiry and opening a new session every second:
#   - zk_status() says 'auth_failed';
#   - the server log says it once per episode (never the password);
#   - a request fails at once with SQLSTATE 28000 naming zklock.auth, and a
#     request that was waiting fails the same way and deletes its node once
#     the credentials pass again;
#   - the worker tries again every zklock.connect_timeout (not more often),
#     resuming the same session (no new session per try), and at once after
#     a configuration reload;
#   - it is not the end of the session: a lock held when it happens stays
#     held (while the lease lasts) and Curator stays excluded.
# The rejection is real: a stock ZooKeeper started with
# -Dzookeeper.DigestAuthenticationProvider.enabled=false has no digest
# provider, so it answers every digest credential with AUTH_FAILED and
# closes the connection; restarting it without that option makes it accept
# them again.  The worker reaches ZooKeeper through a TCP proxy, which
# counts its connections (the server itself logs nothing).
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use ZklockTest;
use ZklockFault;
use ZklockProxy;

my @reject = ('-Dzookeeper.DigestAuthenticationProvider.enabled=false');
my $secret_pw = 'pw050-never-logged';
my $connect_timeout = 4;    # seconds

my $zk = start_zk_with_jvm_options(@reject);
my $proxy = ZklockProxy->start($zk);
my $peer = new_peer($zk);    # Curator uses no credentials: not rejected
my $node = new_zklock_node('auth_failed', $proxy->connect,
	"zklock.auth = 'user050:$secret_pw'\n"
	  . "zklock.connect_timeout = '${connect_timeout}s'\n"
	  . "zklock.session_timeout = '60s'\n",
	wait_connected => 0);

# rejections(): how many times the worker logged that the credentials were
# rejected (backends' errors say it too, but are not counted)
sub rejections
{
	my @m = slurp_file($node->logfile) =~ /LOG:  zklock: zookeeper server \S+ rejected the credentials of zklock\.auth/g;
	return scalar @m;
}

my ($session, $s, $h, $w);    # shared by the parts below and the end

############################################################################
# 1. Rejected from the start.
############################################################################
subtest 'rejected from the start: auth_failed, 28000, logged once, retried per connect_timeout' => sub {
	ok(wait_sql($node, 'SELECT state FROM zk_status()', 'auth_failed', 30),
		"zk_status() says 'auth_failed'");
	$session = status_row($node)->{session_id};
	note("session $session (made by the handshake before the credentials were refused)");

	my ($state, $err, $out, $secs) = psql_error($node, q{SELECT zk_mutex_acquire('/t211/a', '30s')});
	is($state, '28000', 'an acquire fails with SQLSTATE 28000') or diag($err);
	like($err, qr/rejected the credentials of zklock\.auth/, '... saying that zklock.auth was rejected');
	cmp_ok($secs, '<', 10, sprintf('... at once (%.1f s), not after its 30 s timeout', $secs));

	# The worker tries again every zklock.connect_timeout: time three tries,
	# counted as the handles it opens (zk_stat_worker.connection_attempts).
	# Each try resumes its session at the proxy (hs_0x<session>), once or
	# more: a client that reads the server's close before the rejection
	# calls again by itself within the same try.
	my $tries = sub { return $node->safe_psql('postgres', 'SELECT connection_attempts FROM zk_stat_worker') };
	my $handshakes = sub { return $proxy->stats->{"hs_$session"} // 0; };
	my ($a0, $h0) = ($tries->(), $handshakes->());
	my ($t1, $t3);
	ok(wait_until(sub { $tries->() >= $a0 + 1 }, 20, 'a try'), 'the worker tries again');
	$t1 = time;
	ok(wait_until(sub { $tries->() >= $a0 + 3 }, 30, 'two more tries'),
		'... and again, twice');
	$t3 = time;
	my $gap = $t3 - $t1;
	cmp_ok($gap, '>=', 2 * $connect_timeout * 0.75,
		sprintf('two tries took %.1f s: not more often than every zklock.connect_timeout (%d s)',
			$gap, $connect_timeout));
	ok(wait_until(sub { $handshakes->() >= $h0 + 3 }, 10, 'the handshakes of three tries'),
		sprintf('each try resumed the session at the proxy (%d handshakes since the count began)',
			$handshakes->() - $h0));
	is(status_row($node)->{state}, 'auth_failed', 'zk_status() still says auth_failed');
	is(status_row($node)->{session_id}, $session, 'every try resumes the same session (no new session per try)');
	is(rejections(), 1, 'the log says it once for the whole episode');
	like(slurp_file($node->logfile), qr/HINT:.*zklock\.auth/, 'with a hint naming zklock.auth');
	unlike(slurp_file($node->logfile), qr/\Q$secret_pw\E/, 'the password is never logged');

	# The servers accept digest credentials again: the next try gets through.
	stop_zk($zk);
	restart_zk_with_jvm_options($zk);
	ok(wait_sql($node, 'SELECT state FROM zk_status()', 'connected', 30),
		'once the servers accept the credentials, the worker connects by itself');
	like(slurp_file($node->logfile), qr/accepted the credentials of zklock\.auth/, 'the log says so');
	$s = ZklockTest::Session->new($node, 's');
	is($s->value(q{SELECT zk_mutex_acquire('/t211/a', '10s')}), 't', 'acquires work');
	is(scalar @{ lock_children($peer, '/t211/a') }, 1, 'Curator sees the lock node');
	is($s->value(q{SELECT zk_mutex_release('/t211/a')}), 't', '... and releases');
	ok(wait_children_count($peer, '/t211/a', 0), 'nothing left under /t211/a');
};

############################################################################
# 2. Rejected on a reconnect, while a lock is held and a request waits;
#    fixed, then a reload makes the worker try at once.
############################################################################
subtest 'rejected on a reconnect: a held lock is kept, a waiter waits; fixed, a reload tries at once' => sub {
	# a back-off far longer than this part: only the reload can bring it back
	$node->append_conf('postgresql.conf', "zklock.connect_timeout = '300s'\n");
	$node->reload;
	ok(wait_sql($node, 'SHOW zklock.connect_timeout', '5min', 10), 'zklock.connect_timeout is now 5 min');
	$session = status_row($node)->{session_id};

	$h = ZklockTest::Session->new($node, 'holder');
	is($h->value(q{SELECT zk_mutex_acquire('/t211/h')}), 't', 'holder takes /t211/h');
	my $hnode = zk_lock_rows($node, '/t211/h')->{ $h->pid }{node};
	$peer->acquire('cw', '/t211/w', -1);
	is($peer->acquire_result('cw'), 'acquired', 'Curator holds /t211/w');
	my ($cnode) = @{ lock_children($peer, '/t211/w') };
	$w = ZklockTest::Session->new($node, 'waiter');
	$w->start(q{SELECT zk_mutex_acquire('/t211/w')});
	ok(wait_waiting($node, $w->pid, '/t211/w'), 'a SQL waiter queues behind Curator');
	my $wnode = zk_lock_rows($node, '/t211/w')->{ $w->pid }{node};

	# ZooKeeper restarts and rejects digest credentials: the worker reconnects,
	# resumes its session and has its credentials refused.
	stop_zk($zk);
	restart_zk_with_jvm_options($zk, @reject);
	ok(wait_sql($node, 'SELECT state FROM zk_status()', 'auth_failed', 30),
		"zk_status() says 'auth_failed' after the reconnect");
	my $r = $w->result(20);
	is($r->{sqlstate}, '28000', 'the waiting request fails with 28000') or diag($r->{err});
	like($r->{err}, qr/zklock\.auth/, '... naming zklock.auth');
	is(rejections(), 2, 'the log says it once more (a second episode)');
	is($node->safe_psql('postgres', q{SELECT state FROM zk_locks WHERE path = '/t211/h'}), 'held',
		'the held lock is not lost: the session lives on');
	cmp_ok($node->safe_psql('postgres', 'SELECT deletes_pending FROM zk_status()'), '>=', 1,
		"the failed waiter's node waits to be deleted");
	is_deeply(lock_children($peer, '/t211/w'), [ $cnode, $wnode ], '(its node is still in ZooKeeper)');

	# Fixed on the servers' side; the reload makes the worker try at once.
	stop_zk($zk);
	restart_zk_with_jvm_options($zk);
	my $t_reload = time;
	$node->safe_psql('postgres', 'SELECT pg_reload_conf()');
	ok(wait_sql($node, 'SELECT state FROM zk_status()', 'connected', 60), 'after the reload the worker connects');
	my $took = time - $t_reload;
	cmp_ok($took, '<', 60, sprintf('%.1f s after the reload, long before the 300 s back-off', $took));
	is(status_row($node)->{session_id}, $session, '... in the same session');
	is($node->safe_psql('postgres', q{SELECT state FROM zk_locks WHERE path = '/t211/h'}), 'held',
		'the lock is still held');
	is_deeply(lock_children($peer, '/t211/h'), [$hnode], "its node $hnode is still the holder's");
	$peer->acquire('ch', '/t211/h', 500);
	is($peer->acquire_result('ch'), 'timeout', 'Curator is still excluded');
	ok(wait_until(sub { my $k = lock_children($peer, '/t211/w'); "@$k" eq $cnode }, 15,
			"the waiter's node to go"),
		"the failed waiter's node is deleted once the credentials pass");
	ok(wait_sql($node, 'SELECT deletes_pending FROM zk_status()', '0', 10), 'deletes_pending is 0');
	is($h->value(q{SELECT zk_mutex_release('/t211/h')}), 't', 'the holder releases');
	$peer->acquire('ch2', '/t211/h', 5000);
	is($peer->acquire_result('ch2'), 'acquired', 'then Curator gets /t211/h');
	is($peer->release('ch2'), 'released', 'Curator releases /t211/h');
	is($peer->release('cw'), 'released', 'Curator releases /t211/w');
	unlike(slurp_file($node->logfile), qr/\Q$secret_pw\E/, 'the password was never logged');
};

$_->quit for ($s, $h, $w);
$peer->quit;
$node->stop;
$proxy->stop;
stop_zk($zk);
done_testing();

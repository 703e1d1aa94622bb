
# 305_down_answers: what a DBA meets when ZooKeeper cannot be reached, and
# settings that are checked when they are set.
#
# What users rely on:
#   - a call that waits for no other client (a try, a counter read, a
#     participants or leader read, a barrier's set) fails at once with
#     SQLSTATE 08006 while the worker is not connected, its DETAIL the
#     worker's last failure; a timed acquire still waits up to its timeout
#     and is granted when ZooKeeper comes back within it; a release
#     answers at once, and its node goes when the worker reconnects;
#   - zk_status()'s connection_failure says why for a refused connection
#     and for a name that does not resolve, and the log says it once, not
#     at every retry;
#   - a bad zklock.hosts, or a session timeout too short for the lease
#     rule, is refused when it is set (ALTER SYSTEM) or reloaded, the value
#     in effect is kept, and SHOW says the value in effect;
#   - the default session timeout (30 s) fits a server with Debian's sample
#     tickTime (2 s, so at most 40 s): a default setup logs no WARNING; a
#     shorter negotiated timeout is logged once, not at every new handle.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use ZklockTest;

# zklock.connect_timeout in the first part: far above "at once"
my $CONNECT_TIMEOUT = 60;

# log_lines($node, $re, $from): the LOG lines after byte $from matching $re
sub log_lines
{
	my ($node, $re, $from) = @_;
	my $log = substr(slurp_file($node->logfile), $from // 0);
	return scalar(() = $log =~ /^.*LOG:  zklock: .*$re.*$/mg);
}

# fails_at_once($node, $sql, $re, $what): $sql fails with 08006, its
# message or DETAIL matching $re, well before zklock.connect_timeout.
sub fails_at_once
{
	my ($node, $sql, $re, $what) = @_;
	my ($state, $err, $out, $secs) = psql_error($node, $sql, $CONNECT_TIMEOUT + 30);
	is($state, '08006', "$what: fails with SQLSTATE 08006") or diag($err);
	like($err, $re, "$what: ... saying why");
	cmp_ok($secs, '<', $CONNECT_TIMEOUT / 2,
		sprintf('%s: ... at once (%.1f s), not after zklock.connect_timeout (%d s)', $what, $secs, $CONNECT_TIMEOUT));
	return;
}

my $zk = start_zk();
stop_zk($zk);
my $port = zk_port($zk);

subtest 'nothing listens: calls that wait for no one fail at once, with the reason' => sub {
	my $node = new_zklock_node('refused', $zk, "zklock.connect_timeout = '${CONNECT_TIMEOUT}s'\n",
		wait_connected => 0);
	ok(wait_sql($node, q{SELECT connection_failure ~ 'refused' FROM zk_status()}, 't', 30),
		'zk_status() connection_failure says the connection was refused')
	  or diag($node->safe_psql('postgres', 'SELECT state, connection_failure FROM zk_status()'));
	like($node->safe_psql('postgres', 'SELECT connection_failure FROM zk_status()'),
		qr/connection to zookeeper server 127\.0\.0\.1:$port refused/, '... naming the server');

	my $refused = qr/refused/;
	fails_at_once($node, "SELECT zk_mutex_try_acquire('/t305/m')", $refused, 'zk_mutex_try_acquire');
	fails_at_once($node, "SELECT zk_mutex_acquire('/t305/m', '0s')", $refused, 'zk_mutex_acquire with a zero timeout');
	fails_at_once($node, "SELECT zk_atomic_long_get('/t305/c')", $refused, 'zk_atomic_long_get');
	fails_at_once($node, "SELECT * FROM zk_participants('/t305/l')", $refused, 'zk_participants');
	fails_at_once($node, "SELECT zk_leader('/t305/l')", $refused, 'zk_leader');
	fails_at_once($node, "SELECT zk_barrier_set('/t305/b')", $refused, 'zk_barrier_set');

	# the worker keeps trying; the reason is logged once (again at DEBUG1)
	ok(wait_until(sub { (() = slurp_file($node->logfile) =~ /DEBUG:  zklock: again: .*refused/g) >= 3 }, 30, 'retries'),
		'the worker goes on trying (DEBUG1: "again")');
	is(log_lines($node, qr/refused/), 1, 'the refusal is logged once, not at every retry');

	# a timed acquire waits up to its timeout ...
	my ($state, $err, $out, $secs) = psql_error($node, "SELECT zk_mutex_acquire('/t305/m', '2s')", 60);
	is($state, '08006', 'a timed acquire fails with 08006 ...') or diag($err);
	cmp_ok($secs, '>=', 1.9, sprintf('... after waiting its 2 s timeout (%.1f s) for a connection', $secs));

	# ... and is granted when ZooKeeper comes back within it
	my $s = ZklockTest::Session->new($node, 'waiter');
	$s->start("SELECT zk_mutex_acquire('/t305/m', '50s')");
	ok(wait_until(sub { $node->safe_psql('postgres', q{SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%/t305/m%50s%' AND wait_event_type = 'Extension'}) eq '1' }, 20, 'the waiter'),
		'a timed acquire waits');
	restart_zk($zk);
	my $r = $s->result(60);
	is($r->{out} // '', 't', 'the timed acquire is granted once ZooKeeper is back')
	  or diag(explain($r));
	is($node->safe_psql('postgres', 'SELECT connection_failure IS NULL FROM zk_status()'), 't',
		'connected: connection_failure is cleared');
	my $peer = new_peer($zk);
	$peer->acquire('j', '/t305/m', 500);
	is($peer->acquire_result('j'), 'timeout', 'the lock excludes a Curator client');

	# a release needs no answer: it returns at once, and the worker deletes
	# the node once it is connected again
	stop_zk($zk);
	ok(wait_sql($node, q{SELECT state <> 'connected' FROM zk_status()}, 't', 20), 'ZooKeeper stopped again');
	my $t0 = time;
	is($s->value("SELECT zk_mutex_release('/t305/m')"), 't', 'zk_mutex_release while ZooKeeper is down answers true');
	cmp_ok(time - $t0, '<', $CONNECT_TIMEOUT / 2, sprintf('... at once (%.1f s)', time - $t0));
	restart_zk($zk);
	ok(wait_connected($node, 30), 'connected again');
	$peer->acquire('k', '/t305/m', 20000);
	is($peer->acquire_result('k'), 'acquired', 'the released node was deleted: a Curator client takes the lock');
	$peer->release('k');
	$s->quit;
	$peer->quit;
	$node->stop;
	stop_zk($zk);
};

subtest 'a name that does not resolve: the reason, once' => sub {
	my $node = new_zklock_node('noname', 'no-such-host.invalid:2181',
		"zklock.connect_timeout = '${CONNECT_TIMEOUT}s'\n", wait_connected => 0);
	ok(wait_sql($node, q{SELECT connection_failure ~ 'could not resolve' FROM zk_status()}, 't', 30),
		'connection_failure says the name does not resolve')
	  or diag($node->safe_psql('postgres', 'SELECT state, connection_failure FROM zk_status()'));
	fails_at_once($node, "SELECT zk_mutex_try_acquire('/t305/m')", qr/could not resolve/, 'a try');
	ok(wait_until(sub { (() = slurp_file($node->logfile) =~ /DEBUG:  zklock: again: could not resolve/g) >= 3 }, 30, 'retries'),
		'the worker goes on trying');
	is(log_lines($node, qr/could not resolve/), 1, 'logged once');
	$node->stop;
};

subtest 'settings are checked when set: the value in effect is kept and shown' => sub {
	restart_zk($zk);
	my $node = new_zklock_node('settings', $zk);
	my ($state, $err) = psql_error($node, "ALTER SYSTEM SET zklock.hosts = 'nonsense'");
	is($state, '22023', 'ALTER SYSTEM SET zklock.hosts = nonsense is refused with 22023') or diag($err);
	like($err, qr/not host:port/, '... saying why');
	($state, $err) = psql_error($node, "ALTER SYSTEM SET zklock.hosts = '127.0.0.1:99999'");
	is($state, '22023', 'a port above 65535 is refused');
	($state, $err) = psql_error($node, "ALTER SYSTEM SET zklock.hosts = '127.0.0.1:2181,'");
	is($state, '22023', 'an empty server after a comma is refused');
	($state, $err) = psql_error($node, "ALTER SYSTEM SET zklock.hosts = 'h1:2181,[::1]:2182,h-3.example:2183/app'");
	is($state, undef, 'names, a bracketed IPv6 address and a chroot are accepted') or diag($err);
	$node->safe_psql('postgres', 'ALTER SYSTEM RESET zklock.hosts');

	my $from = -s $node->logfile;
	$node->append_conf('postgresql.conf', "zklock.hosts = 'nonsense'\n");
	$node->reload;
	ok(wait_until(sub { substr(slurp_file($node->logfile), $from) =~ /invalid value for parameter "zklock.hosts": "nonsense"/ }, 20, 'the log'),
		'a reload to zklock.hosts = nonsense is refused in the log');
	is($node->safe_psql('postgres', 'SHOW zklock.hosts'), $zk, 'SHOW zklock.hosts says the value in effect');
	ok(wait_connected($node, 10), 'the worker stays connected');

	$node->append_conf('postgresql.conf', "zklock.session_timeout = '2s'\n");
	$node->reload;
	ok(wait_until(sub { substr(slurp_file($node->logfile), $from) =~ /invalid value for parameter "zklock.session_timeout"/ }, 20, 'the log'),
		'a reload to a session timeout below the lease rule is refused');
	is($node->safe_psql('postgres', 'SHOW zklock.session_timeout'), '10s', 'SHOW zklock.session_timeout says the value in effect');

	($state, $err) = psql_error($node, "ALTER SYSTEM SET zklock.commit_min_lease = '9s'");
	is($state, '22023', 'ALTER SYSTEM SET zklock.commit_min_lease beyond the rule is refused') or diag($err);
	like($err, qr/must be at least/, '... with the rule');
	($state, $err) = psql_error($node, "SET zklock.commit_min_lease = '9s'");
	is($state, undef, "a session's own higher zklock.commit_min_lease (stricter COMMITs) is taken") or diag($err);

	# a valid new timeout is pending until the next handle asks for it
	is($node->safe_psql('postgres', 'SELECT session_timeout_asked, pending IS NULL FROM zk_status()'), '10000|t',
		'zk_status(): the handle asked for 10 s, nothing pending');
	$node->append_conf('postgresql.conf', "zklock.session_timeout = '20s'\n");
	$node->reload;
	ok(wait_sql($node, q{SELECT pending FROM zk_status()}, 'zklock.session_timeout = 20000 ms, asked for at the next connection', 20),
		'a reload to 20 s: zk_status() says it is pending')
	  or diag($node->safe_psql('postgres', 'SELECT session_timeout_asked, pending FROM zk_status()'));
	restart_worker($node);
	ok(wait_sql($node, q{SELECT session_timeout_asked || ' ' || session_timeout || ' ' || (pending IS NULL) FROM zk_status() WHERE state = 'connected'}, '20000 20000 true', 30),
		'the next handle asks for 20 s and gets it; nothing pending');
	$node->stop;
};

subtest 'the default session timeout fits a default ensemble; a shorter one is logged once' => sub {
	# Debian's sample zoo.cfg: tickTime 2 s, so sessions of 4 s to 40 s
	my $dzk = start_zk_with_config("tickTime=2000\nmaxSessionTimeout=40000\n");
	my $node = new_zklock_node('defaults', $dzk, '', wait_connected => 0);
	$node->adjust_conf('postgresql.conf', 'zklock.session_timeout', undef);
	$node->adjust_conf('postgresql.conf', 'zklock.server_tick_time', undef);
	$node->restart;
	ok(wait_connected($node, 30), 'connected with the default settings');
	is($node->safe_psql('postgres', 'SHOW zklock.session_timeout'), '30s', 'the default asks for 30 s');
	is($node->safe_psql('postgres', 'SELECT session_timeout FROM zk_status()'), '30000', 'and gets 30 s');
	my $warnings = () = slurp_file($node->logfile) =~ /WARNING: .*(?:zklock|zookeeper)/g;
	is($warnings, 0, 'a default setup logs no WARNING');

	# asking for more than the server gives: one WARNING, not one per handle
	$node->append_conf('postgresql.conf', "zklock.session_timeout = '60s'\n");
	$node->restart;
	ok(wait_connected($node, 30), 'connected asking for 60 s');
	is($node->safe_psql('postgres', 'SELECT session_timeout FROM zk_status()'), '40000', 'the server gives 40 s');
	restart_worker($node) for 1 .. 2;
	ok(wait_connected($node, 30), 'connected again after two worker restarts');
	my $n = () = slurp_file($node->logfile) =~ /negotiated a session timeout of 40000 ms, less than the 60000 ms asked for/g;
	is($n, 1, 'the shorter timeout is logged once, not at every new handle');
	$node->stop;
	stop_zk($dzk);
};

stop_zk($zk);
done_testing();

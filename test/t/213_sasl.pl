# 213_sasl: zklock logs in to ZooKeeper with SASL DIGEST-MD5.
#
# What users rely on: with zklock.sasl_mechanism = 'DIGEST-MD5' the worker
# logs in as zklock.sasl_user, a Curator client logged in through JAAS on
# the same path excludes SQL and is excluded by it, and the password is
# never shown.  A refused login gives a log line saying so, zk_status()
# says 'sasl_failed', and a SQL call fails at once with SQLSTATE 08006
# and the reason, leaving nothing behind; the right password connects
# again (at server start: zklock.sasl_password, like zklock.auth, is not
# reloaded, since the postmaster would log the new value).
# The parts are real: a ZooKeeper server with the SASL authentication
# provider and a JAAS file of its users, Cyrus SASL's DIGEST-MD5 plugin
# (libsasl2-modules) in the worker.
use strict;
use warnings;
use File::Spec;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use ZklockTest;
use ZklockSasl;

# absolute: the server and the peer read the JAAS files from elsewhere
my $dir = File::Spec->rel2abs(PostgreSQL::Test::Utils::tempdir('sasl'));
my $secret = 'pw213-never-shown';

my $zk = sasl_zk($dir, zklock => $secret, curator => 'curator-pw');
my $peer = new_peer($zk, 'sasl-peer', sasl_jvm_options(sasl_client_jaas($dir, 'curator', 'curator-pw')));

sub sasl_conf
{
	my ($password) = @_;
	return "zklock.sasl_mechanism = 'DIGEST-MD5'\n"
	  . "zklock.sasl_user = 'zklock'\n"
	  . "zklock.sasl_password = '$password'\n";
}

my $node = new_zklock_node('sasl', $zk,
	sasl_conf($secret) . "zklock.connect_timeout = '2s'\n",
	wait_connected => 0);

subtest 'DIGEST-MD5: connected; SQL and Curator exclude each other; the password is hidden' => sub {
	ok(wait_connected($node, 60), 'zk_status() says connected');
	is($node->safe_psql('postgres', 'SELECT tls, sasl_identity FROM zk_status()'), 'f|zklock',
		'zk_status() shows the SASL identity (and no TLS)');
	is($node->safe_psql('postgres', 'SHOW zklock.sasl_password'), '********',
		'SHOW hides zklock.sasl_password');
	unlike(slurp_file($node->logfile), qr/\Q$secret\E/, 'the log never has the password');
	sql_and_peer_exclude_ok($node, $peer, '/t213/m');
};

subtest 'a refused login: sasl_failed, a log line, 08006 with the reason' => sub {
	my $log_from = -s $node->logfile;
	# (zklock.sasl_password is read at server start only: a reload would
	# have the postmaster log the new value)
	$node->append_conf('postgresql.conf', sasl_conf('not-the-password'));
	$node->restart;
	connection_failure_ok($node, 'refused login', 'sasl_failed',
		qr/refused the SASL DIGEST-MD5 login of "zklock"/, $log_from, $peer, '/t213/f');
	unlike(slurp_file($node->logfile), qr/not-the-password/, 'the log never has the password');
};

subtest 'fixed and restarted: connected again' => sub {
	$node->append_conf('postgresql.conf', sasl_conf($secret));
	$node->restart;
	ok(wait_connected($node, 60), 'connected again');
	is($node->safe_psql('postgres', "SELECT zk_mutex_acquire('/t213/m', '10s'), zk_mutex_release('/t213/m')"),
		't|t', 'a lock is taken and released');
};

$peer->quit;
$node->stop;
done_testing();

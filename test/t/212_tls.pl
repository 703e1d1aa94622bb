# 212_tls: zklock connects to ZooKeeper over TLS, with a client certificate.
#
# What users rely on: with zklock.tls on, the worker talks to the servers'
# secureClientPort only over TLS, showing its client certificate, and a
# Curator client over TLS on the same path excludes SQL and is excluded by
# it.  When the TLS connection cannot be made, zklock says why instead of
# connecting otherwise:
#   - a CA that did not sign the server's certificate, a client certificate
#     the server does not trust, an expired client certificate, TLS asked
#     of a plaintext port: each gives a log line saying why, zk_status()
#     says 'tls_failed', and a SQL call fails at once with SQLSTATE 08006
#     and the reason;
#   - nothing is sent in plaintext: against the plaintext port no session
#     is made;
#   - nothing is left behind (no node of a failed call), and a reload that
#     fixes the setting connects again;
#   - with zklock.acl = 'creator' the nodes belong to the client
#     certificate's identity, which ZooKeeper's X509AuthenticationProvider
#     (registered by default with a secureClientPort) maps to
#     x509:<subject DN>: a Curator client with the same certificate shares
#     the path and may delete zklock's node, one with another certificate
#     of the same CA cannot list the path, delete or write the node (NoAuth).
# The parts are real: a ZooKeeper 3.8/3.9 server with the Netty connection
# factory, a secureClientPort on 127.0.0.1 and ssl.clientAuth=need, its
# keystore and truststore made here with openssl and keytool from a CA made
# here; the Curator peer uses the Java client's zookeeper.ssl.* properties.
use strict;
use warnings;
use File::Spec;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use ZklockTest;
use ZklockFault qw(status_row zk_acl stranger_noauth_ok same_identity_shares_ok);
use ZklockPki;

# absolute: the server reads the files from its data directory
my $pki = File::Spec->rel2abs(PostgreSQL::Test::Utils::tempdir('pki'));
pki_ca($pki, 'ca');
pki_ca($pki, 'other_ca');
pki_cert($pki, 'server', 'ca');
pki_cert($pki, 'client', 'ca');
pki_cert($pki, 'client2', 'ca');
pki_cert($pki, 'stranger', 'other_ca');
pki_cert($pki, 'expired', 'ca', 'faketime', '-3 days');
my $server_ks = pki_p12($pki, 'server');
my $client_ks = pki_p12($pki, 'client');
my $client2_ks = pki_p12($pki, 'client2');
my $trust = pki_truststore($pki, 'trust', 'ca');

my ($zk, $zk_tls) = start_zk_with_config(tls_server_config($server_ks, $trust));
ok(defined $zk_tls, "the server has a secure client port ($zk_tls)");

# the Curator peers: one over TLS (the client's certificate), one plaintext
my $peer = new_peer($zk_tls, 'tls-peer', tls_peer_options($client_ks, $trust));
my $plain_peer = new_peer($zk, 'plain-peer');

my $node = new_zklock_node('tls', $zk_tls,
	tls_conf($pki, 'ca', 'client', $zk_tls) . "zklock.connect_timeout = '2s'\n",
	wait_connected => 0);

# set_tls($ca, $cert, $hosts): change the settings, reload (the worker
# restarts to use them)
sub set_tls
{
	my ($ca, $cert, $hosts) = @_;
	my $log_from = -s $node->logfile;
	$node->append_conf('postgresql.conf', tls_conf($pki, $ca, $cert, $hosts));
	$node->reload;
	return $log_from;
}

# failure($what, $re, $log_from): tls_failed, and the log and a call say
# why ($re), the call leaving nothing (ZklockTest::connection_failure_ok)
sub failure
{
	my ($what, $re, $log_from) = @_;
	connection_failure_ok($node, $what, 'tls_failed', $re, $log_from, $plain_peer, '/t212/f');
	return;
}

subtest 'over TLS: zklock connects with its client certificate; SQL and Curator over TLS exclude each other' => sub {
	ok(wait_connected($node, 60), 'zk_status() says connected over the secure port');
	like(slurp_file($node->logfile), qr/LOG:  zklock: connected to zookeeper 127\.0\.0\.1:\d+/,
		'the log says connected');
	is($node->safe_psql('postgres',
			'SELECT tls, sasl_identity IS NULL, connection_failure IS NULL FROM zk_status()'),
		't|t|t', 'zk_status() says the connection is TLS, with no SASL identity and no failure');
	my $s = ZklockTest::Session->new($node, 's');
	is($s->value("SELECT zk_mutex_acquire('/t212/m')"), 't', 'SQL acquires /t212/m over TLS');
	$peer->acquire('c1', '/t212/m', 1000);
	is($peer->acquire_result('c1'), 'timeout', 'Curator over TLS times out while SQL holds');
	$peer->acquire('c2', '/t212/m', 20000);
	ok(wait_until(sub { @{ $peer->children('/t212/m') } == 2 }, 10), 'Curator queues behind SQL');
	is($s->value("SELECT zk_mutex_release('/t212/m')"), 't', 'SQL releases');
	is($peer->acquire_result('c2'), 'acquired', 'Curator gets the lock');
	is($s->value("SELECT zk_mutex_acquire('/t212/m', '700ms')"), 'f',
		'SQL times out while Curator holds');
	is($peer->release('c2'), 'released', 'Curator releases');
	is($s->value("SELECT zk_mutex_acquire('/t212/m', '20s')"), 't', 'SQL acquires again');
	is($s->value("SELECT zk_mutex_release('/t212/m')"), 't', 'and releases');
	ok(wait_until(sub { @{ $peer->children('/t212/m') } == 0 }, 10), 'no lock node is left');
	$s->quit;
};

subtest 'a CA that did not sign the server certificate' => sub {
	failure('wrong CA', qr/certificate verify failed/, set_tls('other_ca', 'client', $zk_tls));
};

subtest 'a client certificate the server does not trust' => sub {
	failure('untrusted client certificate', qr/TLS handshake with zookeeper server 127\.0\.0\.1:\d+ failed: \S/,
		set_tls('ca', 'stranger', $zk_tls));
};

subtest 'an expired client certificate' => sub {
	failure('expired client certificate', qr/the client certificate of zklock\.tls_cert_file "[^"]*expired\.pem" has expired/,
		set_tls('ca', 'expired', $zk_tls));
};

subtest 'TLS asked of the plaintext port: no plaintext, no session' => sub {
	failure('plaintext port', qr/TLS handshake with zookeeper server 127\.0\.0\.1:\d+ failed/,
		set_tls('ca', 'client', $zk));
	is(status_row($node)->{server} // '', '', 'zk_status() names no server');
};

subtest 'fixed by a reload: connected again, and the lock works' => sub {
	set_tls('ca', 'client', $zk_tls);
	ok(wait_connected($node, 60), 'connected again over TLS');
	is($node->safe_psql('postgres', 'SELECT tls, connection_failure IS NULL FROM zk_status()'),
		't|t', 'zk_status(): TLS, and the failure is gone');
	is($node->safe_psql('postgres', "SELECT zk_mutex_acquire('/t212/m', '10s'), zk_mutex_release('/t212/m')"),
		't|t', 'a lock is taken and released');
	my $kids = $plain_peer->children('/t212/f');
	ok(!defined $kids || !@$kids, 'none of the failed calls left a node');
};

subtest "zklock.acl = 'creator': the nodes belong to x509:<the certificate's subject>" => sub {
	$node->append_conf('postgresql.conf', "zklock.acl = 'creator'\nzklock.namespace = '/ns212'\n");
	$node->reload;
	ok(wait_sql($node, 'SHOW zklock.namespace', '/ns212', 10), 'creator ACL and namespace /ns212 set');
	my $s = ZklockTest::Session->new($node, 'x509');
	is($s->value(q{SELECT zk_mutex_acquire('/t212/acl', '10s')}), 't', 'SQL acquires /t212/acl');
	my $name = $node->safe_psql('postgres', q{SELECT node FROM zk_locks WHERE path = '/t212/acl'});
	like($name, qr/^_c_.*-lock-\d{10}$/, 'zk_locks names its node');
	my $lock_node = "/ns212/t212/acl/$name";
	{
		local $ENV{JAVA_TOOL_OPTIONS} = join(' ', tls_peer_options($client_ks, $trust));
		for my $p ($lock_node, '/ns212/t212/acl', '/ns212')
		{
			my $acl = zk_acl($zk_tls, $p);
			is(ref $acl ? "@$acl" : $acl // 'none', 'x509:CN=client:rwcda',
				"$p belongs to the certificate's subject only");
		}
	}
	my $stranger = new_peer($zk_tls, 'client2-peer', tls_peer_options($client2_ks, $trust));
	stranger_noauth_ok($stranger, '/ns212/t212/acl', $lock_node, 'a Curator client with another certificate of the CA');
	my $d = $plain_peer->delete($lock_node) // '';
	like($d, qr/^error.*NoAuth/i, "nor can a plaintext client without credentials ($d)");
	$stranger->quit;
	same_identity_shares_ok($node, $s, '/t212/acl', '/ns212/t212/acl', $peer, 'a Curator client with the same certificate');
	$s->quit;
};

$peer->quit;
$plain_peer->quit;
$node->stop;
done_testing();

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
#     fixes the setting connects again.
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
use ZklockFault qw(status_row);

# absolute: the server reads the files from its data directory
my $pki = File::Spec->rel2abs(PostgreSQL::Test::Utils::tempdir('pki'));
my $pass = 'zk212pass';

# run(@cmd): run a command of the PKI's making, die with its output if it fails
sub run
{
	my (@cmd) = @_;
	my ($out, $err) = ('', '');
	IPC::Run::run(\@cmd, '>', \$out, '2>', \$err)
	  or die "@cmd failed: $err$out";
	return;
}

# ca($name): a self-signed CA, $pki/$name.pem and .key
sub ca
{
	my ($name) = @_;
	run('openssl', 'req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '2',
		'-subj', "/CN=zklock 212 $name", '-keyout', "$pki/$name.key", '-out', "$pki/$name.pem");
	return;
}

# cert($name, $ca, @faketime): a certificate for 127.0.0.1 signed by $ca,
# $pki/$name.pem and .key; with @faketime (faketime's arguments) it is
# signed at that time, valid for a day
sub cert
{
	my ($name, $ca, @faketime) = @_;
	open(my $fh, '>', "$pki/$name.ext") or die $!;
	print $fh "subjectAltName = IP:127.0.0.1, DNS:localhost\n"
	  . "extendedKeyUsage = serverAuth, clientAuth\n";
	close $fh;
	run('openssl', 'req', '-newkey', 'rsa:2048', '-nodes', '-subj', "/CN=$name",
		'-keyout', "$pki/$name.key", '-out', "$pki/$name.csr");
	run(@faketime, 'openssl', 'x509', '-req', '-in', "$pki/$name.csr", '-CA', "$pki/$ca.pem",
		'-CAkey', "$pki/$ca.key", '-CAcreateserial', '-days', '1',
		'-extfile', "$pki/$name.ext", '-out', "$pki/$name.pem");
	return;
}

# p12($name): $pki/$name.p12, the certificate and key as a PKCS#12 keystore
sub p12
{
	my ($name) = @_;
	run('openssl', 'pkcs12', '-export', '-in', "$pki/$name.pem", '-inkey', "$pki/$name.key",
		'-name', $name, '-passout', "pass:$pass", '-out', "$pki/$name.p12");
	return "$pki/$name.p12";
}

# truststore($name, $ca): $pki/$name.p12 trusting $ca, made with keytool
sub truststore
{
	my ($name, $ca) = @_;
	run('keytool', '-importcert', '-noprompt', '-alias', $ca, '-file', "$pki/$ca.pem",
		'-keystore', "$pki/$name.p12", '-storetype', 'PKCS12', '-storepass', $pass);
	return "$pki/$name.p12";
}

ca('ca');
ca('other_ca');
cert('server', 'ca');
cert('client', 'ca');
cert('stranger', 'other_ca');
cert('expired', 'ca', 'faketime', '-3 days');
my $server_ks = p12('server');
my $client_ks = p12('client');
my $trust = truststore('trust', 'ca');

my ($zk, $zk_tls) = start_zk_with_config(<<"EOF");
serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory
secureClientPort=\@SECURE_PORT\@
secureClientPortAddress=127.0.0.1
ssl.keyStore.location=$server_ks
ssl.keyStore.password=$pass
ssl.keyStore.type=PKCS12
ssl.trustStore.location=$trust
ssl.trustStore.password=$pass
ssl.trustStore.type=PKCS12
ssl.clientAuth=need
EOF
ok(defined $zk_tls, "the server has a secure client port ($zk_tls)");

# the Curator peers: one over TLS (the client's certificate), one plaintext
my $peer = new_peer($zk_tls, 'tls-peer',
	'-Dzookeeper.client.secure=true',
	'-Dzookeeper.clientCnxnSocket=org.apache.zookeeper.ClientCnxnSocketNetty',
	"-Dzookeeper.ssl.keyStore.location=$client_ks",
	"-Dzookeeper.ssl.keyStore.password=$pass",
	'-Dzookeeper.ssl.keyStore.type=PKCS12',
	"-Dzookeeper.ssl.trustStore.location=$trust",
	"-Dzookeeper.ssl.trustStore.password=$pass",
	'-Dzookeeper.ssl.trustStore.type=PKCS12');
my $plain_peer = new_peer($zk, 'plain-peer');

# tls_conf($ca, $cert, $hosts): the TLS settings, with the client
# certificate $cert and the CA file of $ca
sub tls_conf
{
	my ($ca, $cert, $hosts) = @_;
	return "zklock.hosts = '$hosts'\n"
	  . "zklock.tls = on\n"
	  . "zklock.tls_ca_file = '$pki/$ca.pem'\n"
	  . "zklock.tls_cert_file = '$pki/$cert.pem'\n"
	  . "zklock.tls_key_file = '$pki/$cert.key'\n";
}

my $node = new_zklock_node('tls', $zk_tls,
	tls_conf('ca', 'client', $zk_tls) . "zklock.connect_timeout = '2s'\n",
	wait_connected => 0);

# set_tls($ca, $cert, $hosts): change the settings, reload (the worker
# restarts to use them)
sub set_tls
{
	my ($ca, $cert, $hosts) = @_;
	my $log_from = -s $node->logfile;
	$node->append_conf('postgresql.conf', tls_conf($ca, $cert, $hosts));
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

$peer->quit;
$plain_peer->quit;
$node->stop;
done_testing();

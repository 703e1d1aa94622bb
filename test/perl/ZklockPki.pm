# ZklockPki: the certificates, keystores and settings of the TLS tests
# (212, 215): a CA made here with openssl, certificates for 127.0.0.1
# signed by it, PKCS#12 keystores and a truststore made with keytool, the
# server's secureClientPort configuration, the Java client's properties
# and zklock's settings.
package ZklockPki;
use strict;
use warnings;
use IPC::Run;
use Exporter 'import';
our @EXPORT = qw(pki_ca pki_cert pki_p12 pki_truststore tls_server_config
  tls_peer_options tls_conf tls_setup);

our $PASS = 'zk212pass';

# run(@cmd): run a command of the PKI's making, die with its output if it fails
sub run
{
	my (@cmd) = @_;
	my ($out, $err) = ('', '');
	IPC::Run::run(\@cmd, '>', \$out, '2>', \$err)
	  or die "@cmd failed: $err$out";
	return;
}

# pki_ca($pki, $name): a self-signed CA, $pki/$name.pem and .key
sub pki_ca
{
	my ($pki, $name) = @_;
	run('openssl', 'req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '2',
		'-subj', "/CN=zklock test $name", '-keyout', "$pki/$name.key", '-out', "$pki/$name.pem");
	return;
}

# pki_cert($pki, $name, $ca, @faketime): a certificate for 127.0.0.1 with
# the subject CN=$name signed by $ca, $pki/$name.pem and .key; with
# @faketime (faketime's arguments) it is signed at that time, valid for a day
sub pki_cert
{
	my ($pki, $name, $ca, @faketime) = @_;
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

# pki_p12($pki, $name): $pki/$name.p12, the certificate and key as a
# PKCS#12 keystore
sub pki_p12
{
	my ($pki, $name) = @_;
	run('openssl', 'pkcs12', '-export', '-in', "$pki/$name.pem", '-inkey', "$pki/$name.key",
		'-name', $name, '-passout', "pass:$PASS", '-out', "$pki/$name.p12");
	return "$pki/$name.p12";
}

# pki_truststore($pki, $name, $ca): $pki/$name.p12 trusting $ca, made with
# keytool
sub pki_truststore
{
	my ($pki, $name, $ca) = @_;
	run('keytool', '-importcert', '-noprompt', '-alias', $ca, '-file', "$pki/$ca.pem",
		'-keystore', "$pki/$name.p12", '-storetype', 'PKCS12', '-storepass', $PASS);
	return "$pki/$name.p12";
}

# tls_server_config($keystore, $truststore): the zoo.cfg lines of a Netty
# secureClientPort on 127.0.0.1 that needs client certificates
# (start_zk_with_config fills in @SECURE_PORT@)
sub tls_server_config
{
	my ($ks, $trust) = @_;
	return <<"EOF2";
serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory
secureClientPort=\@SECURE_PORT\@
secureClientPortAddress=127.0.0.1
ssl.keyStore.location=$ks
ssl.keyStore.password=$PASS
ssl.keyStore.type=PKCS12
ssl.trustStore.location=$trust
ssl.trustStore.password=$PASS
ssl.trustStore.type=PKCS12
ssl.clientAuth=need
EOF2
}

# tls_peer_options($keystore, $truststore): the Java client's TLS
# properties (a Curator peer's JVM options)
sub tls_peer_options
{
	my ($ks, $trust) = @_;
	return ('-Dzookeeper.client.secure=true',
		'-Dzookeeper.clientCnxnSocket=org.apache.zookeeper.ClientCnxnSocketNetty',
		"-Dzookeeper.ssl.keyStore.location=$ks",
		"-Dzookeeper.ssl.keyStore.password=$PASS",
		'-Dzookeeper.ssl.keyStore.type=PKCS12',
		"-Dzookeeper.ssl.trustStore.location=$trust",
		"-Dzookeeper.ssl.trustStore.password=$PASS",
		'-Dzookeeper.ssl.trustStore.type=PKCS12');
}

# tls_conf($pki, $ca, $cert, $hosts): zklock's TLS settings, with the
# client certificate $cert and the CA file of $ca
sub tls_conf
{
	my ($pki, $ca, $cert, $hosts) = @_;
	return "zklock.hosts = '$hosts'\n"
	  . "zklock.tls = on\n"
	  . "zklock.tls_ca_file = '$pki/$ca.pem'\n"
	  . "zklock.tls_cert_file = '$pki/$cert.pem'\n"
	  . "zklock.tls_key_file = '$pki/$cert.key'\n";
}

# tls_setup($pki): a CA, server and client certificates signed by it, and
# a ZooKeeper server with a secureClientPort that needs client
# certificates; returns { zk (plaintext port), zk_tls, peer_options (a
# Curator peer over TLS with the client certificate), conf($hosts) (zklock's
# settings for it) }
sub tls_setup
{
	my ($pki) = @_;
	pki_ca($pki, 'ca');
	pki_cert($pki, 'server', 'ca');
	pki_cert($pki, 'client', 'ca');
	my $server_ks = pki_p12($pki, 'server');
	my $client_ks = pki_p12($pki, 'client');
	my $trust = pki_truststore($pki, 'trust', 'ca');
	my ($zk, $zk_tls) = ZklockTest::start_zk_with_config(tls_server_config($server_ks, $trust));
	return {
		zk => $zk,
		zk_tls => $zk_tls,
		peer_options => [ tls_peer_options($client_ks, $trust) ],
		conf => sub { return tls_conf($pki, 'ca', 'client', $_[0]); },
	};
}

1;

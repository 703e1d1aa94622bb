# ZklockPki: the certificates, keystores and settings of the TLS tests
# (212, 215, 216, 218): a CA made here with openssl, certificates for
# 127.0.0.1 signed by it (or, for 218, naming whatever host, CN and
# extendedKeyUsage a test asks), certificate revocation lists of the CA,
# PKCS#12 keystores and a truststore made with keytool, the server's
# secureClientPort configuration, the Java client's properties and
# zklock's settings.
package ZklockPki;
use strict;
use warnings;
use File::Copy ();
use IPC::Run;
use Exporter 'import';
our @EXPORT = qw(pki_ca pki_cert pki_revoke pki_crl pki_p12 pki_truststore
  tls_server_config tls_peer_options tls_conf tls_setup);

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

# pki_cert($pki, $name, $ca, \%opts, @faketime): a certificate signed by
# $ca, $pki/$name.pem and .key.  By default it names 127.0.0.1 and
# localhost (subjectAltName IP:127.0.0.1, DNS:localhost), its subject is
# CN=$name and its extendedKeyUsage serverAuth, clientAuth.  \%opts
# (optional) changes that:
#   san => [ 'DNS:evil.example', 'IP:127.0.0.2' ]   the subjectAltNames;
#          [] for a certificate without the extension
#   cn  => 'localhost'                               the subject's CN
#   eku => 'clientAuth'                              the extendedKeyUsage;
#          '' for a certificate without the extension
#   key => 'server'                                  the key of $pki/server.key
#          (copied to $pki/$name.key) instead of a new one: RSA keys are
#          slow to make, and a test of names needs no key of its own
# With @faketime (faketime's arguments) it is signed at that time, valid
# for a day.
sub pki_cert
{
	my ($pki, $name, $ca, @rest) = @_;
	my $o = ref $rest[0] eq 'HASH' ? shift @rest : {};
	my @faketime = @rest;
	my $san = exists $o->{san} ? join(', ', @{ $o->{san} }) : 'IP:127.0.0.1, DNS:localhost';
	my $eku = $o->{eku} // 'serverAuth, clientAuth';
	my $cn = $o->{cn} // $name;
	open(my $fh, '>', "$pki/$name.ext") or die $!;
	print $fh "subjectAltName = $san\n" if $san ne '';
	print $fh "extendedKeyUsage = $eku\n" if $eku ne '';
	close $fh;
	if (defined $o->{key})
	{
		File::Copy::copy("$pki/$o->{key}.key", "$pki/$name.key")
		  or die "cannot copy $pki/$o->{key}.key: $!";
		run('openssl', 'req', '-new', '-key', "$pki/$name.key", '-subj', "/CN=$cn",
			'-out', "$pki/$name.csr");
	}
	else
	{
		run('openssl', 'req', '-newkey', 'rsa:2048', '-nodes', '-subj', "/CN=$cn",
			'-keyout', "$pki/$name.key", '-out', "$pki/$name.csr");
	}
	run(@faketime, 'openssl', 'x509', '-req', '-in', "$pki/$name.csr", '-CA', "$pki/$ca.pem",
		'-CAkey', "$pki/$ca.key", '-CAcreateserial', '-days', '1',
		'-extfile', "$pki/$name.ext", '-out', "$pki/$name.pem");
	return;
}

# _ca_config($pki, $ca): the openssl ca configuration of $ca (its database
# of revoked certificates, $pki/$ca.index, made empty on first use), the
# least `openssl ca -revoke` and `-gencrl` need; returns its path
sub _ca_config
{
	my ($pki, $ca) = @_;
	my $cnf = "$pki/$ca.ca.cnf";
	return $cnf if -f $cnf;
	open(my $ix, '>', "$pki/$ca.index") or die $!;
	close $ix;
	open(my $fh, '>', $cnf) or die $!;
	print $fh <<"EOF2";
[ ca ]
default_ca = zklock_test_ca

[ zklock_test_ca ]
database = $pki/$ca.index
unique_subject = no
certificate = $pki/$ca.pem
private_key = $pki/$ca.key
crlnumber = $pki/$ca.crlnumber
default_md = sha256
default_crl_days = 1
EOF2
	close $fh;
	open(my $num, '>', "$pki/$ca.crlnumber") or die $!;
	print $num "01\n";
	close $num;
	return $cnf;
}

# pki_revoke($pki, $ca, $name): $ca revokes the certificate $pki/$name.pem
# (in its database: the next pki_crl lists it)
sub pki_revoke
{
	my ($pki, $ca, $name) = @_;
	run('openssl', 'ca', '-config', _ca_config($pki, $ca), '-revoke', "$pki/$name.pem");
	return;
}

# pki_crl($pki, $ca, $name): $pki/$name.pem, a CRL of $ca (valid for a day)
# listing the certificates pki_revoke revoked so far; returns its path
sub pki_crl
{
	my ($pki, $ca, $name) = @_;
	run('openssl', 'ca', '-config', _ca_config($pki, $ca), '-gencrl', '-out', "$pki/$name.pem");
	return "$pki/$name.pem";
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

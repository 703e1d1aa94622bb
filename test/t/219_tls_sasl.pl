# 219_tls_sasl: zklock logs in with SASL inside its TLS connection, to
# ZooKeeper servers whose secure port lets no session without a SASL login
# do anything.
#
# What users rely on: with zklock.tls on and zklock.sasl_mechanism set,
# the worker makes its TLS handshake with the servers' secureClientPort
# and then its SASL login over that connection, so a server that demands
# both (TLS for the wire, SASL for who the client is) takes zklock's
# requests:
#   - DIGEST-MD5 (zklock.sasl_user, zklock.sasl_password), without a
#     client certificate (zklock.tls_cert_file and zklock.tls_key_file
#     empty, the server's ssl.clientAuth=want): zk_status() says tls = t
#     and sasl_identity = 'zklock'; a Curator client over TLS and SASL on
#     the same path excludes SQL and is excluded by it; with zklock.acl =
#     'creator' the nodes belong to sasl:zklock and nothing else (a Curator
#     client logged in as zklock shares them, one logged in as another user
#     cannot touch them); a wrong password gives a log line, zk_status()
#     says 'sasl_failed', a SQL call fails at once with SQLSTATE 08006 and
#     the reason, nothing is left behind, and the right password (at server
#     start) connects again;
#   - GSSAPI (zklock.sasl_keytab, zklock.sasl_principal) with a client
#     certificate (ssl.clientAuth=need): zk_status() says tls = t and
#     sasl_identity = the keytab's principal, and a Curator client over TLS
#     logged in with Kerberos excludes SQL and is excluded by it; with
#     zklock.acl = 'creator' the nodes belong to both ids the session has,
#     the certificate's x509:CN=client and sasl:<principal>.
# That the servers enforce SASL is shown from outside: a Curator client
# over TLS, with a client certificate of the CA but no SASL login, has its
# session closed at its first request (SessionClosedRequireAuth) and makes
# no node; zklock over TLS with zklock.sasl_mechanism = '' gets no lock
# and makes no node, and says why: the log (once, though the worker tries
# again every zklock.connect_timeout), zk_status() ('sasl_failed') and the
# SQL error (08006) say the server requires a SASL login that
# zklock.sasl_mechanism does not ask for.  So every lock zklock takes here
# went through a SASL login the server accepted.
# The parts are real: ZooKeeper 3.8/3.9 servers with the Netty connection
# factory, a secureClientPort on 127.0.0.1 (keystores made here with
# openssl and keytool from a CA made here, ZklockPki), the SASL
# authentication provider and a JAAS Server section: DigestLoginModule's
# users on one (enforce.auth.enabled=true, enforce.auth.schemes=sasl),
# Java's Krb5LoginModule with a keytab of the test's own KDC (MIT's, as in
# 217, ZklockKrb5) on the other (sessionRequireClientSASLAuth=true, the
# older spelling of the same); in the worker the C client's TLS (OpenSSL)
# and Cyrus SASL's DIGEST-MD5 and GSSAPI plugins.
use strict;
use warnings;
use File::Spec;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use ZklockTest;
use ZklockFault;
use ZklockPki;
use ZklockSasl;
use ZklockKrb5;

# absolute: the servers, the peers and the worker read these files from elsewhere
my $dir = File::Spec->rel2abs(PostgreSQL::Test::Utils::tempdir('tls_sasl'));
my $krb = File::Spec->rel2abs(PostgreSQL::Test::Utils::tempdir('krb5'));
my $secret = 'pw219-never-shown';

pki_ca($dir, 'ca');
pki_cert($dir, 'server', 'ca');
pki_cert($dir, 'client', 'ca');
my $server_ks = pki_p12($dir, 'server');
my $client_ks = pki_p12($dir, 'client');
my $trust = pki_truststore($dir, 'trust', 'ca');
my @tls_java = tls_peer_options($client_ks, $trust);

# The DIGEST-MD5 server: TLS with the client certificate optional, SASL
# demanded of every session (ZooKeeper >= 3.7's enforce.auth.*: a
# session whose logins are not of these schemes is closed at its first
# request; the x509 identity of a client certificate does not count)
(my $tls_want = tls_server_config($server_ks, $trust)) =~ s/^ssl\.clientAuth=need$/ssl.clientAuth=want/m
  or die 'tls_server_config has no ssl.clientAuth=need line';
my ($zk, $zk_tls) = start_zk_with_config(
	$SASL_PROVIDER . $tls_want . "enforce.auth.enabled=true\nenforce.auth.schemes=sasl\n",
	sasl_jvm_options(sasl_server_jaas($dir, zklock => $secret, curator => 'curator-pw')));
ok(defined $zk_tls, "the DIGEST-MD5 server has a secure client port ($zk_tls)");

# The GSSAPI server: TLS with a client certificate needed, SASL demanded
# (sessionRequireClientSASLAuth, which ZooKeeper reads as enforce.auth.*
# with the scheme sasl)
krb5_realm($krb);
my $me = "zklock\@$REALM";
my $keytab = krb5_keytab($me, 'zklock.keytab');
my $curator = "curator\@$REALM";
my $curator_keytab = krb5_keytab($curator, 'curator.keytab');
my ($kzk, $kzk_tls) = krb5_zk(tls_server_config($server_ks, $trust) . "sessionRequireClientSASLAuth=true\n");
ok(defined $kzk_tls, "the GSSAPI server has a secure client port ($kzk_tls)");

# The Curator peers, over TLS (the client certificate) and SASL: as
# another user (curator), as zklock itself, and as another Kerberos principal
my $same_jaas = sasl_client_jaas($dir, 'zklock', $secret);
my $curator_jaas = sasl_client_jaas($dir, 'curator', 'curator-pw');
my $peer = new_peer($zk_tls, 'curator-peer', @tls_java, sasl_jvm_options($curator_jaas));
my $same = new_peer($zk_tls, 'zklock-peer', @tls_java, sasl_jvm_options($same_jaas));
my $kpeer = new_peer($kzk_tls, 'krb5-peer', @tls_java, krb5_jvm_options(krb5_client_jaas($curator, $curator_keytab)));

# md5_conf($password): zklock's settings for the DIGEST-MD5 server: TLS
# without a client certificate, the login of zklock with $password
sub md5_conf
{
	my ($password) = @_;
	return "zklock.hosts = '$zk_tls'\n"
	  . "zklock.tls = on\n"
	  . "zklock.tls_ca_file = '$dir/ca.pem'\n"
	  . "zklock.tls_cert_file = ''\n"
	  . "zklock.tls_key_file = ''\n"
	  . "zklock.sasl_mechanism = 'DIGEST-MD5'\n"
	  . "zklock.sasl_user = 'zklock'\n"
	  . "zklock.sasl_password = '$password'\n";
}

# gssapi_conf(): zklock's settings for the GSSAPI server: TLS with the
# client certificate, the login of $me with its keytab, the servers asked
# for as zookeeper/localhost
sub gssapi_conf
{
	return tls_conf($dir, 'ca', 'client', $kzk_tls)
	  . "zklock.sasl_mechanism = 'GSSAPI'\n"
	  . "zklock.sasl_principal = '$me'\n"
	  . "zklock.sasl_keytab = '$keytab'\n"
	  . "zklock.sasl_service = 'zookeeper'\n"
	  . "zklock.sasl_host = 'localhost'\n";
}

# KRB5_CONFIG (set by krb5_realm) reaches the postmaster and so the worker
my $node = new_zklock_node('tls_sasl', $zk_tls, md5_conf($secret) . "zklock.connect_timeout = '2s'\n",
	wait_connected => 0);

subtest 'DIGEST-MD5 inside TLS: connected as zklock; SQL and Curator over TLS and SASL exclude each other' => sub {
	ok(wait_connected($node, 60), 'zk_status() says connected to the secure port');
	is($node->safe_psql('postgres',
			'SELECT tls, sasl_identity, server, connection_failure IS NULL FROM zk_status()'),
		"t|zklock|$zk_tls|t",
		'zk_status(): TLS, the SASL identity zklock, the secure port, no failure');
	is($node->safe_psql('postgres', 'SHOW zklock.sasl_password'), '********',
		'SHOW hides zklock.sasl_password');
	unlike(slurp_file($node->logfile), qr/\Q$secret\E/, 'the log never has the password');
	sql_and_peer_exclude_ok($node, $peer, '/t219/m');
};

subtest "zklock.acl = 'creator': over TLS the nodes belong to sasl:zklock" => sub {
	$node->append_conf('postgresql.conf', "zklock.acl = 'creator'\n");
	$node->reload;
	ok(wait_sql($node, 'SHOW zklock.acl', 'creator'), 'zklock.acl = creator (reload)');
	ok(wait_connected($node, 60), 'connected');
	my $s = ZklockTest::Session->new($node, 's');
	# zklock shows no certificate: the x509 identity of the peers' and
	# ZkTool's certificate is none of its nodes' owners
	creator_acl_ok(
		node => $node, s => $s, path => '/t219acl/m', lock_path => '/t219acl/m',
		id => 'sasl:zklock',
		zk => $zk_tls,
		same_jvm => [ @tls_java, sasl_jvm_options($same_jaas) ],
		other_jvm => [ @tls_java, sasl_jvm_options($curator_jaas) ],
		other => $peer, other_who => 'a Curator client over TLS logged in as curator',
		same => $same, same_who => 'a Curator client over TLS logged in as zklock');
	$s->quit;
	$node->append_conf('postgresql.conf', "zklock.acl = 'open'\n");
	$node->reload;
	ok(wait_sql($node, 'SHOW zklock.acl', 'open'), 'zklock.acl = open again');
};

subtest 'the server enforces SASL: a Curator client over TLS with a certificate but no SASL login makes no node' => sub {
	my $bare = new_peer($zk_tls, 'tls-only-peer', @tls_java);
	my $r = $bare->cmd('ephemeral /t219/bare', qr/^(?:ephemeral|error ephemeral) /) // 'no reply';
	like($r, qr/^error ephemeral SessionClosedRequireAuthException/,
		"its create is refused and its session closed ($r)");
	is($peer->exists('/t219/bare'), 0, 'a client logged in sees no such node');
	$bare->quit;
};

subtest 'a wrong password inside TLS: sasl_failed, a log line, 08006 with the reason' => sub {
	my $log_from = -s $node->logfile;
	# (zklock.sasl_password is read at server start only)
	$node->append_conf('postgresql.conf', md5_conf('not-the-password'));
	$node->restart;
	connection_failure_ok($node, 'refused login inside TLS', 'sasl_failed',
		qr/refused the SASL DIGEST-MD5 login of "zklock"/, $log_from, $peer, '/t219/f');
	unlike(slurp_file($node->logfile), qr/not-the-password/, 'the log never has the password');
};

subtest 'the right password again (server start): connected again' => sub {
	$node->append_conf('postgresql.conf', md5_conf($secret));
	$node->restart;
	ok(wait_connected($node, 60), 'connected again');
	is($node->safe_psql('postgres', 'SELECT tls, sasl_identity FROM zk_status()'), 't|zklock', 'over TLS, as zklock');
	is($node->safe_psql('postgres', "SELECT zk_mutex_acquire('/t219/m', '10s'), zk_mutex_release('/t219/m')"),
		't|t', 'a lock is taken and released');
};

subtest 'GSSAPI inside TLS: connected as the principal; SQL and Curator over TLS with Kerberos exclude each other' => sub {
	$node->append_conf('postgresql.conf', gssapi_conf());
	$node->reload;
	ok(wait_sql($node, 'SELECT server, sasl_identity FROM zk_status()', "$kzk_tls|$me", 60),
		"zk_status(): connected to the GSSAPI server's secure port as $me");
	ok(wait_connected($node, 60), 'zk_status() says connected');
	is($node->safe_psql('postgres', 'SELECT tls, sasl_identity, connection_failure IS NULL FROM zk_status()'),
		"t|$me|t", 'zk_status(): TLS, the Kerberos principal, no failure');
	sql_and_peer_exclude_ok($node, $kpeer, '/t219/k');
};

subtest "zklock.acl = 'creator' with a client certificate and GSSAPI: the nodes belong to both identities" => sub {
	# ZooKeeper fills the creator with every id the session has: the
	# certificate's x509 one and the SASL login's
	$node->append_conf('postgresql.conf', "zklock.acl = 'creator'\n");
	$node->reload;
	ok(wait_sql($node, 'SHOW zklock.acl', 'creator'), 'zklock.acl = creator (reload)');
	ok(wait_connected($node, 60), 'connected');
	my $s = ZklockTest::Session->new($node, 's');
	is($s->value("SELECT zk_mutex_acquire('/t219kacl/m', '10s')"), 't', 'SQL acquires /t219kacl/m');
	my $name = $node->safe_psql('postgres', "SELECT node FROM zk_locks WHERE path = '/t219kacl/m'");
	my $acl;
	{
		local $ENV{JAVA_TOOL_OPTIONS} = join(' ', @tls_java, krb5_jvm_options(krb5_client_jaas($me, $keytab)));
		$acl = zk_acl($kzk_tls, "/t219kacl/m/$name");
	}
	is(ref $acl ? join(' ', sort @$acl) : $acl // 'none', "sasl:$me:rwcda x509:CN=client:rwcda",
		"the lock node is sasl:${me}'s and x509:CN=client's, no one else's");
	is($s->value("SELECT zk_mutex_release('/t219kacl/m')"), 't', 'SQL releases');
	$s->quit;
	$node->append_conf('postgresql.conf', "zklock.acl = 'open'\n");
	$node->reload;
	ok(wait_sql($node, 'SHOW zklock.acl', 'open'), 'zklock.acl = open again');
};

subtest "the server enforces SASL: zklock over TLS with zklock.sasl_mechanism = '' says why, once, and gets no lock" => sub {
	my $log_from = -s $node->logfile;
	$node->append_conf('postgresql.conf', "zklock.sasl_mechanism = ''\n");
	$node->restart;
	# the server takes the connection and closes it at its first request
	# (ZSESSIONCLOSEDREQUIRESASLAUTH): a failure stands, said once, and the
	# worker tries again every zklock.connect_timeout (2 s), not at once
	my $why = qr/zookeeper server 127\.0\.0\.1:\d+ requires a SASL login \(zookeeper\.enforce\.auth\.enabled, or sessionRequireClientSASLAuth\) and closed the connection: zklock\.sasl_mechanism is not set/;
	ok(wait_until(sub { substr(slurp_file($node->logfile), $log_from) =~ /LOG:  zklock: $why/ }, 30),
		'the log says the server requires a SASL login');
	ok(wait_sql($node, q{SELECT state = 'sasl_failed' AND connection_failure ~ 'requires a SASL login' FROM zk_status()}, 't', 10),
		"zk_status() says sasl_failed, and why");
	my ($sqlstate, $err, $out) = psql_error($node, "SELECT zk_mutex_acquire('/t219/nosasl', '30s')");
	is($sqlstate, '08006', 'an acquire fails with SQLSTATE 08006') or diag($err);
	like($err, qr/zookeeper connection failed: $why/, '... with the reason');
	my $kids = $kpeer->children('/t219/nosasl');
	ok(!defined $kids || !@$kids, 'it left no node');
	my $tries = $node->safe_psql('postgres', 'SELECT connected_count FROM zk_status()');
	ok(wait_until(sub { $node->safe_psql('postgres', 'SELECT connected_count FROM zk_status()') >= $tries + 2 }, 30),
		'the worker tried again (two more connections)');
	my @said = (substr(slurp_file($node->logfile), $log_from) =~ /LOG:  zklock: $why/g);
	is(scalar @said, 1, 'the reason is in the log once, not at every try');
};

$peer->quit;
$same->quit;
$kpeer->quit;
$node->stop;
stop_kdc();
done_testing();

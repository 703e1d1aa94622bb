# 220_tls_rotation: new TLS files take effect at a reload, with the
# session and its locks kept; certificates about to expire are warned of.
#
# What users rely on: an operator who renews zklock's client certificate —
# by writing new files over the old ones, or by pointing
# zklock.tls_cert_file and zklock.tls_key_file at new files — and reloads
# gets a worker that reconnects at once with the new certificate and
# resumes its ZooKeeper session: a lock held across the rotation stays
# held (the same session, the same node, a Curator client still excluded)
# and is released normally afterwards; the server sees the new
# certificate (with zklock.acl = 'creator' a node made after the rotation
# belongs to x509:<the new subject>).  zk_status() shows when both
# certificates expire; one that expires within zklock.tls_expiry_warning
# days is warned of in the log when the worker connects and in
# zk_status().tls_warning; 0 turns the warning off.
# The parts are real: a ZooKeeper server with a Netty secureClientPort
# that needs client certificates, certificates made here with openssl
# (valid for a day, so inside the default 30-day warning), a Curator
# client over TLS.
use strict;
use warnings;
use File::Copy qw(copy);
use File::Spec;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use ZklockTest;
use ZklockFault qw(status_row zk_acl);
use ZklockPki;

my $pki = File::Spec->rel2abs(PostgreSQL::Test::Utils::tempdir('pki'));
pki_ca($pki, 'ca');
pki_cert($pki, 'server', 'ca');
pki_cert($pki, 'client', 'ca');
pki_cert($pki, 'renewed', 'ca');
pki_cert($pki, 'moved', 'ca');
my $client_ks = pki_p12($pki, 'client');
my $server_ks = pki_p12($pki, 'server');
my $trust = pki_truststore($pki, 'trust', 'ca');
my ($zk, $zk_tls) = start_zk_with_config(tls_server_config($server_ks, $trust));

# zklock's files: a copy of 'client' that the rotation overwrites in place
copy("$pki/client.pem", "$pki/live.pem") or die $!;
copy("$pki/client.key", "$pki/live.key") or die $!;
chmod(0600, "$pki/live.key");

my $peer = new_peer($zk_tls, 'tls-peer', tls_peer_options($client_ks, $trust));
my $node = new_zklock_node('rot', $zk_tls, tls_conf($pki, 'ca', 'live', $zk_tls));

# session_id(): zk_status()'s session
sub session_id
{
	return status_row($node)->{session_id};
}

# reconnected_ok($log_from, $what): the reload made the worker reconnect
# with the new files (its log says so) and it is connected again
sub reconnected_ok
{
	my ($log_from, $what) = @_;
	ok(wait_until(sub {
				substr(slurp_file($node->logfile), $log_from) =~
				  /a TLS or SASL setting or a TLS file changed: the worker restarts to use it/
			}, 30), "$what: the worker says it reconnects to use the new files");
	ok(wait_until(sub {
				substr(slurp_file($node->logfile), $log_from) =~ /zklock: connected to zookeeper/
			}, 60), "$what: it connected again");
	ok(wait_connected($node, 60), "$what: zk_status() says connected");
	return;
}

my $held_checks = 0;

# held_ok($s, $path, $lock_node, $sid, $what): $s still holds $path on
# the same node in the same session, and a Curator client is excluded
sub held_ok
{
	my ($s, $path, $lock_node, $sid, $what) = @_;
	is(session_id(), $sid, "$what: the same ZooKeeper session was resumed");
	is($node->safe_psql('postgres', "SELECT node FROM zk_locks WHERE path = '$path' AND state = 'held'"),
		$lock_node, "$what: zk_locks shows the lock held on the same node");
	is_deeply($peer->children($path), [$lock_node], "$what: the server still has that node, and only it");
	my $id = 'c' . (++$held_checks);
	$peer->acquire($id, $path, 1000);
	is($peer->acquire_result($id), 'timeout', "$what: a Curator client over TLS is still excluded");
	return;
}

subtest 'certificate files replaced in place and a reload: the lock is kept' => sub {
	my $s = ZklockTest::Session->new($node, 's');
	is($s->value("SELECT zk_mutex_acquire('/t220/m')"), 't', 'SQL acquires /t220/m');
	my $lock_node = $node->safe_psql('postgres', "SELECT node FROM zk_locks WHERE path = '/t220/m'");
	my $sid = session_id();
	my $pid = worker_pid($node);
	my $log_from = -s $node->logfile;
	copy("$pki/renewed.pem", "$pki/live.pem") or die $!;
	copy("$pki/renewed.key", "$pki/live.key") or die $!;
	$node->reload;
	reconnected_ok($log_from, 'files replaced');
	isnt(worker_pid($node), $pid, 'a new worker made the connection');
	held_ok($s, '/t220/m', $lock_node, $sid, 'files replaced');
	is($s->value("SELECT zk_mutex_release('/t220/m')"), 't', 'the holder releases normally');
	ok(wait_until(sub { @{ $peer->children('/t220/m') // [] } == 0 }, 10), 'and its node is gone');
	$s->quit;
};

subtest 'zklock.tls_cert_file and zklock.tls_key_file moved to new files and a reload: the lock is kept' => sub {
	my $s = ZklockTest::Session->new($node, 's');
	is($s->value("SELECT zk_mutex_acquire('/t220/n')"), 't', 'SQL acquires /t220/n');
	my $lock_node = $node->safe_psql('postgres', "SELECT node FROM zk_locks WHERE path = '/t220/n'");
	my $sid = session_id();
	my $log_from = -s $node->logfile;
	$node->append_conf('postgresql.conf', tls_conf($pki, 'ca', 'moved', $zk_tls));
	$node->reload;
	reconnected_ok($log_from, 'files moved');
	is($node->safe_psql('postgres', 'SHOW zklock.tls_cert_file'), "$pki/moved.pem", 'SHOW names the new file');
	held_ok($s, '/t220/n', $lock_node, $sid, 'files moved');
	is($s->value("SELECT zk_mutex_release('/t220/n')"), 't', 'the holder releases normally');
	$s->quit;
};

subtest "the server sees the new certificate: zklock.acl = 'creator' gives a new node to x509:CN=moved" => sub {
	$node->append_conf('postgresql.conf', "zklock.acl = 'creator'\nzklock.namespace = '/ns220'\n");
	$node->reload;
	ok(wait_sql($node, 'SHOW zklock.namespace', '/ns220', 10), 'creator ACL and namespace /ns220 set');
	my $s = ZklockTest::Session->new($node, 's');
	is($s->value("SELECT zk_mutex_acquire('/t220/acl', '10s')"), 't', 'SQL acquires /t220/acl');
	my $name = $node->safe_psql('postgres', "SELECT node FROM zk_locks WHERE path = '/t220/acl'");
	{
		local $ENV{JAVA_TOOL_OPTIONS} = join(' ', tls_peer_options(pki_p12($pki, 'moved'), $trust));
		my $acl = zk_acl($zk_tls, "/ns220/t220/acl/$name");
		is(ref $acl ? "@$acl" : $acl // 'none', 'x509:CN=moved:rwcda',
			'the lock node belongs to the new certificate\'s subject');
	}
	is($s->value("SELECT zk_mutex_release('/t220/acl')"), 't', 'SQL releases');
	$s->quit;
};

subtest 'certificates that expire within zklock.tls_expiry_warning days are warned of' => sub {
	# every certificate here is valid for a day: inside the default 30
	my $log = slurp_file($node->logfile);
	like($log, qr/WARNING:  zklock: the client certificate of zklock\.tls_cert_file "\Q$pki\E\/moved\.pem" expires in 0 days/,
		'the client certificate (default 30 days)');
	like($log, qr/WARNING:  zklock: the certificate of zookeeper server 127\.0\.0\.1:\d+ \([^)]*CN=server\) expires in 0 days/,
		'the server certificate');
	# zk_status(): when both expire (within the day they were made for), and the warning
	is($node->safe_psql('postgres',
			q{SELECT tls_cert_expires BETWEEN now() AND now() + interval '1 day 1 hour',
					 tls_server_cert_expires BETWEEN now() AND now() + interval '1 day 1 hour'
			  FROM zk_status()}),
		't|t', 'zk_status() shows when the client and the server certificates expire');
	like($node->safe_psql('postgres', 'SELECT tls_warning FROM zk_status()'),
		qr/^the client certificate of zklock\.tls_cert_file "[^"]*moved\.pem" expires in 0 days; the certificate of zookeeper server 127\.0\.0\.1:\d+ \([^)]*CN=server\) expires in 0 days$/,
		'zk_status().tls_warning names both');
	# 0 turns it off: a reload that changes it reconnects, and warns of nothing
	my $log_from = -s $node->logfile;
	$node->append_conf('postgresql.conf', "zklock.tls_expiry_warning = 0\n");
	$node->reload;
	reconnected_ok($log_from, 'warning off');
	unlike(substr(slurp_file($node->logfile), $log_from), qr/expires in/, 'no warning with 0');
	is($node->safe_psql('postgres',
			'SELECT tls_warning IS NULL, tls_cert_expires IS NOT NULL, tls_server_cert_expires IS NOT NULL FROM zk_status()'),
		't|t|t', 'zk_status(): no warning, the expiry still shown');
};

$peer->quit;
$node->stop;
done_testing();

# 217_sasl_gssapi: zklock logs in to ZooKeeper with SASL GSSAPI (Kerberos).
#
# What users rely on: with zklock.sasl_mechanism = 'GSSAPI' the worker
# logs in as the principal of its client keytab (zklock.sasl_keytab,
# zklock.sasl_principal), asking for the servers' principal
# zklock.sasl_service/zklock.sasl_host, and zk_status() names it (the
# principal the login was made as, with a WARNING when the setting names
# another); a
# Curator client logged in through JAAS (Java's Krb5LoginModule) on the
# same path excludes SQL and is excluded by it.  With zklock.acl =
# 'creator' the nodes belong to sasl:<principal>: a Curator client of the
# same principal shares the paths, one of another principal cannot touch
# them.  A login that cannot be made (a keytab whose keys the KDC changed
# since, a principal the KDC does not know, servers asked for under a
# name the KDC does not know, no KDC to ask) gives a log
# line saying why in Kerberos' words, zk_status() says 'sasl_failed', and
# a SQL call fails at once with SQLSTATE 08006 and the reason, leaving
# nothing behind; a good keytab, or the KDC back, connects again.
# The parts are real: MIT's KDC of Debian's krb5-kdc run by the test user
# in the test's directory (ZklockKrb5), a ZooKeeper server with the SASL
# authentication provider and Java's Krb5LoginModule, Cyrus SASL's GSSAPI
# plugin (libsasl2-modules-gssapi-mit) and MIT's Kerberos library in the
# worker, which finds the realm through KRB5_CONFIG of the postmaster.
use strict;
use warnings;
use File::Spec;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use ZklockTest;
use ZklockFault;
use ZklockSasl;
use ZklockKrb5;

# absolute: the KDC, the servers and the worker read these files from elsewhere
my $dir = File::Spec->rel2abs(PostgreSQL::Test::Utils::tempdir('krb5'));
krb5_realm($dir);
my $zk = krb5_zk();
my $me = "zklock\@$REALM";
my $keytab = krb5_keytab($me, 'zklock.keytab');
my $curator = "curator\@$REALM";
my $curator_keytab = krb5_keytab($curator, 'curator.keytab');
# a keytab the KDC no longer takes: its keys were changed after ktadd
my $stale_keytab = krb5_keytab("stale\@$REALM", 'stale.keytab');
krb5_admin("cpw -randkey stale\@$REALM");
# a keytab of a principal the KDC no longer knows
my $ghost_keytab = krb5_keytab("ghost\@$REALM", 'ghost.keytab');
krb5_admin("delprinc -force ghost\@$REALM");

my $me_jaas = krb5_client_jaas($me, $keytab);
my $curator_jaas = krb5_client_jaas($curator, $curator_keytab);
my $peer = new_peer($zk, 'curator-peer', krb5_jvm_options($curator_jaas));
my $same = new_peer($zk, 'same-peer', krb5_jvm_options($me_jaas));

# gssapi_conf($principal, $keytab): zklock's settings to log in as
# $principal with $keytab
sub gssapi_conf
{
	my ($principal, $kt) = @_;
	return "zklock.sasl_mechanism = 'GSSAPI'\n"
	  . "zklock.sasl_principal = '$principal'\n"
	  . "zklock.sasl_keytab = '$kt'\n"
	  . "zklock.sasl_service = 'zookeeper'\n"
	  . "zklock.sasl_host = 'localhost'\n";
}

# KRB5_CONFIG (set by krb5_realm) reaches the postmaster and so the worker
my $node = new_zklock_node('krb5', $zk,
	gssapi_conf($me, $keytab) . "zklock.connect_timeout = '2s'\n",
	wait_connected => 0);

subtest 'GSSAPI: connected as the principal; SQL and Curator exclude each other' => sub {
	ok(wait_connected($node, 60), 'zk_status() says connected');
	is($node->safe_psql('postgres', 'SELECT tls, sasl_identity FROM zk_status()'), "f|$me",
		'zk_status() shows the Kerberos principal (and no TLS)');
	sql_and_peer_exclude_ok($node, $peer, '/t217/m');
};

subtest "zklock.acl = 'creator': the nodes belong to sasl:<principal>" => sub {
	$node->append_conf('postgresql.conf', "zklock.acl = 'creator'\n");
	$node->reload;
	ok(wait_sql($node, 'SHOW zklock.acl', 'creator'), 'zklock.acl = creator (reload)');
	my $s = ZklockTest::Session->new($node, 's');
	creator_acl_ok(
		node => $node, s => $s, path => '/t217acl/m', lock_path => '/t217acl/m',
		id => "sasl:$me",
		zk => $zk,
		same_jvm => [ krb5_jvm_options($me_jaas) ], other_jvm => [ krb5_jvm_options($curator_jaas) ],
		other => $peer, other_who => "a Curator client logged in as $curator",
		same => $same, same_who => "a Curator client logged in as $me");
	$s->quit;
	$node->append_conf('postgresql.conf', "zklock.acl = 'open'\n");
	$node->reload;
	ok(wait_sql($node, 'SHOW zklock.acl', 'open'), 'zklock.acl = open again');
};

# refused_ok($what, $conf, $re, $path): with the settings $conf (a
# reload: the worker restarts on them), the login fails as
# connection_failure_ok wants, the log and the reason matching $re
sub refused_ok
{
	my ($what, $conf, $re, $path) = @_;
	my $log_from = -s $node->logfile;
	$node->append_conf('postgresql.conf', $conf);
	$node->reload;
	connection_failure_ok($node, $what, 'sasl_failed', $re, $log_from, $peer, $path);
	return;
}

subtest 'a login that cannot be made: sasl_failed, a log line, 08006 with the reason' => sub {
	refused_ok('a stale keytab', gssapi_conf("stale\@$REALM", $stale_keytab),
		qr/the SASL GSSAPI login of "stale\@ZKLOCK\.TEST" to zookeeper server 127\.0\.0\.1:\d+ failed: .*Preauthentication failed/,
		'/t217/stale');
	refused_ok('a principal the KDC does not know', gssapi_conf("ghost\@$REALM", $ghost_keytab),
		qr/the SASL GSSAPI login of "ghost\@ZKLOCK\.TEST" to zookeeper server 127\.0\.0\.1:\d+ failed: .*not found in Kerberos database/,
		'/t217/ghost');
	refused_ok('the servers asked for as DIGEST-MD5 names them (zklock.sasl_host left at its default)',
		gssapi_conf($me, $keytab) . "zklock.sasl_host = 'zk-sasl-md5'\n",
		qr/the SASL GSSAPI login of "zklock\@ZKLOCK\.TEST" to zookeeper server 127\.0\.0\.1:\d+ failed: .*Server zookeeper\/zk-sasl-md5\@ZKLOCK\.TEST not found in Kerberos database/,
		'/t217/host');
	stop_kdc();
	refused_ok('no KDC to ask', gssapi_conf($me, $keytab),
		qr/the SASL GSSAPI login of "zklock\@ZKLOCK\.TEST" to zookeeper server 127\.0\.0\.1:\d+ failed: .*Cannot contact any KDC/,
		'/t217/nokdc');
};

subtest 'the KDC back: connected again' => sub {
	start_kdc();
	ok(wait_connected($node, 60), 'connected again (the worker tries again by itself)');
	is($node->safe_psql('postgres', 'SELECT sasl_identity FROM zk_status()'), $me, "as $me");
	is($node->safe_psql('postgres', "SELECT zk_mutex_acquire('/t217/m', '10s'), zk_mutex_release('/t217/m')"),
		't|t', 'a lock is taken and released');
};

subtest "zklock.sasl_principal other than the keytab's: zk_status() names who logged in" => sub {
	# MIT's library logs in as the keytab's first principal whatever the
	# setting names; the servers know the session by that one
	my $log_from = -s $node->logfile;
	$node->append_conf('postgresql.conf', gssapi_conf("someone-else\@$REALM", $keytab));
	$node->reload;
	ok(wait_until(sub { substr(slurp_file($node->logfile), $log_from)
			  =~ /WARNING:  zklock: logged in to zookeeper as "\Q$me\E", not as "someone-else\@ZKLOCK\.TEST"/ },
			60, 'the warning'),
		'a warning names both');
	ok(wait_connected($node, 60), 'connected');
	is($node->safe_psql('postgres', 'SELECT sasl_identity FROM zk_status()'), $me,
		"zk_status() says $me, as the servers do");
	$node->append_conf('postgresql.conf', gssapi_conf($me, $keytab));
	$node->reload;
};

$peer->quit;
$same->quit;
$node->stop;
stop_kdc();
done_testing();

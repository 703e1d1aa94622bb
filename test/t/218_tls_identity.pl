# 218_tls_identity: over TLS zklock connects only to the ZooKeeper server
# it was told to, as libpq's sslmode=verify-full and ZooKeeper's Java
# client do.
#
# What users rely on: with zklock.tls on and the default
# zklock.tls_verify = 'verify-full', the certificate of the server the
# worker reaches must be signed by a CA of zklock.tls_ca_file (and by no
# other: a CA named by SSL_CERT_FILE, OpenSSL's default trust, does not
# count), must be valid now, must allow serverAuth when it has an
# extendedKeyUsage, must not be revoked by zklock.tls_crl_file when that is
# set, and must name the host of zklock.hosts the worker connected to:
#   - an IP literal of zklock.hosts only by an IP subjectAltName;
#   - a host name only by a DNS subjectAltName (a wildcard standing for a
#     whole leftmost label: *.zklock.test names zk.zklock.test, not
#     a.b.zklock.test nor zk.other.test; z*.zklock.test and zk.*.test
#     name nothing), or by the CN when the certificate has no DNS
#     subjectAltName; a CN is not looked at when a DNS subjectAltName
#     is there;
#   - of several entries, the one whose address and port the worker
#     connected to.
# A refusal: zk_status() says 'tls_failed' and its connection_failure, a LOG
# line and every SQL call (at once, SQLSTATE 08006) say why ("certificate
# verify failed: the server certificate does not name "HOST"
# (zklock.tls_verify = verify-full); it names DNS:..., IP:..." or OpenSSL's
# reason), no node is made, and a server zklock never connected to has no
# session of zklock's.  An accepted server: connected over TLS, and a lock
# works (a Curator client over TLS excluding SQL under verify-full, on the
# same certificate as the default server's here, is 212's first case).
# zklock.tls_verify = 'verify-ca' (unsafe) checks the CA
# and not the name; a bad value of it or of zklock.tls_min_version is
# refused.  zklock.tls_min_version = 'TLSv1.3' refuses a server that only
# speaks TLS 1.2 and connects to one that speaks 1.3; the default, TLSv1.2,
# connects to the former.  With zklock.tls_cert_file and zklock.tls_key_file
# both empty, zklock shows no client certificate: servers with
# ssl.clientAuth=none or want take it, one with need (the default) refuses
# it.  Every setting takes effect on a reload.
#
# The parts are real: ZooKeeper 3.8/3.9 servers (Netty, a secureClientPort
# on 127.0.0.1), one per server certificate (and per ssl.clientAuth),
# started together before the cases (their JVMs with C1 only: they start
# in half the CPU time); certificates, a second CA and CRLs made here with
# openssl (test/perl/ZklockPki.pm), keystores and a truststore with
# keytool; Curator clients (plaintext ones, to look at each server's
# nodes, and one over TLS).  The host names: the test runs in its own
# user, network and mount namespaces (test/perl/ZklockNet.pm:
# enter_private_network, everything on the namespace's own 127.0.0.1)
# and bind-mounts a hosts file of its own over /etc/hosts there, in which
# localhost, zk.zklock.test, a.b.zklock.test and zk.other.test are
# 127.0.0.1 (and localhost nothing else); nothing outside the namespaces
# sees it.  When the mount cannot be made the test fails saying why.
use strict;
use warnings;
BEGIN { require ZklockNet; ZklockNet::enter_private_network(); }
use File::Spec;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use ZklockTest;
use ZklockFault qw(four_letter);
use ZklockPki;

my $t_begin = time;

############################################################################
# The host names: a hosts file of the test's own over /etc/hosts
############################################################################

my %NAMES = (
	'localhost' => '127.0.0.1',
	'zk.zklock.test' => '127.0.0.1',
	'a.b.zklock.test' => '127.0.0.1',
	'zk.other.test' => '127.0.0.1');
{
	my $etc = File::Spec->rel2abs(PostgreSQL::Test::Utils::tempdir('etc'));
	my $me = `hostname 2>/dev/null` // '';
	chomp $me;
	open(my $fh, '>', "$etc/hosts") or die "cannot write $etc/hosts: $!";
	print $fh "127.0.0.1 localhost\n";
	print $fh "127.0.0.1 $_\n" for grep { $_ ne 'localhost' } sort keys %NAMES;
	# the machine's own name (Java asks for it)
	print $fh "127.0.0.1 $me\n" if $me =~ /^[A-Za-z0-9.-]+$/ && !exists $NAMES{$me};
	close $fh;
	my $out = `mount --bind $etc/hosts /etc/hosts 2>&1`;
	ok($? == 0, 'a hosts file of the test\'s own over /etc/hosts (mount --bind in the test\'s mount namespace)')
	  or die "cannot bind-mount $etc/hosts over /etc/hosts in the test's namespaces: $out\n";
	for my $name (sort keys %NAMES)
	{
		my $all = `getent ahosts $name 2>&1`;
		my %addr = map { (split ' ')[0] => 1 } grep { /\S/ } split /\n/, $all;
		is(join(' ', sort keys %addr), $NAMES{$name}, "$name resolves to $NAMES{$name} only")
		  or die "the host names do not resolve as the test needs: $all\n";
	}
}

############################################################################
# Certificates
############################################################################

# absolute: the servers read the files from their own directories
my $pki = File::Spec->rel2abs(PostgreSQL::Test::Utils::tempdir('pki'));
pki_ca($pki, 'ca');
pki_ca($pki, 'other_ca');
# names 127.0.0.1 and localhost (IP and DNS), extendedKeyUsage serverAuth
# and clientAuth: the certificate 212 uses
pki_cert($pki, 'server', 'ca');
pki_cert($pki, 'client', 'ca');
# the server certificates of the cases, by name: pki_cert's options (all
# with the key of 'server': a new RSA key takes half a second here)
my %CERT = (
	ip_evil => { san => ['IP:127.0.0.2'] },
	dns_evil => { san => ['DNS:evil.example'] },
	cn_evil => { san => [], cn => 'evil.example' },
	san_over_cn => { san => ['DNS:zk.elsewhere.example'], cn => 'localhost' },
	ip_good => { san => ['IP:127.0.0.1'] },
	dns_good => { san => ['DNS:localhost'] },
	cn_good => { san => [], cn => 'localhost' },
	wildcard => { san => ['DNS:*.zklock.test'] },
	# wildcards that are not a whole leftmost label
	partial => { san => [ 'DNS:z*.zklock.test', 'DNS:zk.*.test' ] },
	client_only => { eku => 'clientAuth' },
);
pki_cert($pki, $_, 'ca', { %{ $CERT{$_} }, key => 'server' }) for sort keys %CERT;
# names 127.0.0.1 and localhost, but expired / signed by another CA
pki_cert($pki, 'expired', 'ca', { key => 'server' }, 'faketime', '-3 days');
pki_cert($pki, 'foreign', 'other_ca', { key => 'server' });
my $trust = pki_truststore($pki, 'trust', 'ca');

# TLS versions of the servers, said in full: ZooKeeper 3.8 speaks TLS 1.2
# only unless told otherwise (none of its default cipher suites is one of
# TLS 1.3), later versions may prefer 1.3
my $ONLY_TLS12 = "ssl.protocol=TLSv1.2\nssl.enabledProtocols=TLSv1.2\n";
my $TLS13_TOO = "ssl.protocol=TLSv1.3\nssl.enabledProtocols=TLSv1.3,TLSv1.2\n"
  . "ssl.ciphersuites=TLS_AES_128_GCM_SHA256,TLS_AES_256_GCM_SHA384,"
  . "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384\n";

############################################################################
# Servers
############################################################################

# The servers: one per server certificate (and per ssl.clientAuth), each
# certificate's name a key of %SRV.  They are started together (one zk.sh
# start each, in parallel: a JVM takes seconds to start) before the cases,
# and stopped together after them.
my $ZK_SH = "$ZklockTest::REPO/test/zk/zk.sh";
my @zk_dirs;    # the servers' directories, until stopped (END too)

# Their JVMs, and the Curator peers', compile with C1 only and collect
# with the serial collector: each starts and makes its first TLS handshake
# in about half the CPU time (ZooKeeper and Curator do the same), which
# 15 servers and as many peers on a 2-CPU machine need.
my @FAST_JVM = ('-XX:TieredStopAtLevel=1', '-XX:+UseSerialGC');
my $zk_java = File::Spec->rel2abs(PostgreSQL::Test::Utils::tempdir('java')) . '/java-fast.sh';
PostgreSQL::Test::Utils::append_to_file($zk_java,
	"#!/bin/sh\nexec '" . ($ENV{JAVA} // 'java') . "' @FAST_JVM \"\$@\"\n");
chmod(0755, $zk_java) or die "chmod $zk_java: $!";

# start_servers(key => [ $cert, %o ], ...): the servers whose
# secureClientPort shows the certificate $cert (their truststore: ca),
# ssl.clientAuth $o{client_auth} (default need), more zoo.cfg lines
# $o{extra}; returns { key => { name, dir, zk, tls, port (of tls), peer (a
# plaintext Curator client of it) } }
sub start_servers
{
	my (@specs) = @_;
	my (%p12, @run);
	# every keystore is written before any server reads one
	for (my $i = 1; $i < @specs; $i += 2)
	{
		my $cert = $specs[$i][0];
		$p12{$cert} //= pki_p12($pki, $cert);
	}
	local $ENV{ZK_START_TIMEOUT} = 90;
	local $ENV{JAVA} = $zk_java;
	while (my ($key, $spec) = splice(@specs, 0, 2))
	{
		my ($cert, %o) = @$spec;
		my $conf = tls_server_config($p12{$cert}, $trust);
		$conf =~ s/^ssl\.clientAuth=need$/ssl.clientAuth=$o{client_auth}/m if $o{client_auth};
		$conf .= $o{extra} // '';
		my $dir = PostgreSQL::Test::Utils::tempdir('zk');
		PostgreSQL::Test::Utils::append_to_file("$dir/zoo-extra.cfg", $conf);
		my $r = { key => $key, name => $cert, dir => $dir, out => '', err => '' };
		$r->{h} = IPC::Run::start([ $ZK_SH, 'start', $dir ],
			'>', \$r->{out}, '2>', \$r->{err}, IPC::Run::timeout(120));
		push @run, $r;
		push @zk_dirs, $dir;
	}
	my %srv;
	for my $r (@run)
	{
		my $ok = eval { $r->{h}->finish };
		# the reason first: the JVM's SLF4J notices say nothing of it
		BAIL_OUT("zk.sh start of the server of $r->{key} failed: " . ($@ || '') . ' '
			  . join(' | ', grep { !/^SLF4J/ } split /\n/, $r->{err}))
		  unless $ok && $r->{out} =~ /^(\d+)\s*$/;
		my $plain = "127.0.0.1:$1";
		my $secure = slurp_file("$r->{dir}/zk.secure_port");
		chomp $secure;
		note("ZooKeeper server $r->{key} (certificate $r->{name}): $plain, secure port 127.0.0.1:$secure (dir $r->{dir})");
		$srv{ $r->{key} } = {
			name => $r->{key},
			dir => $r->{dir},
			zk => $plain,
			tls => "127.0.0.1:$secure",
			port => $secure,
		};
	}
	# a JVM's first TLS handshake takes it a second or more (its crypto
	# warms up): one handshake with each server now, all at once and in
	# the background, so that zklock's first one is not slowed down by it
	for my $r (values %srv)
	{
		my ($in, $out, $err) = ('', '', '');
		$r->{warm} = IPC::Run::start(
			[
				'openssl', 's_client', '-connect', $r->{tls}, '-CAfile', "$pki/ca.pem",
				'-cert', "$pki/client.pem", '-key', "$pki/client.key"
			],
			'<', \$in, '>', \$out, '2>', \$err, IPC::Run::timeout(30));
	}
	# the plaintext peers, their JVMs started together too: new_peer waits
	# for each one's "ready" before it returns, so that wait is left out
	# while they start and done here once all are started
	{
		no warnings 'redefine';
		local *ZklockTest::Peer::wait_reply = sub { return 'ready'; };
		$srv{$_}{peer} = new_peer($srv{$_}{zk}, "plain-$_", @FAST_JVM) for sort keys %srv;
	}
	for my $key (sort keys %srv)
	{
		my $l = $srv{$key}{peer}->wait_reply(qr/^(ready|error connect)/, 90);
		BAIL_OUT("the plaintext Curator peer of server $key did not connect: " . ($l // 'no reply'))
		  unless defined $l && $l eq 'ready';
	}
	return \%srv;
}

# stop_servers(@srv): their peers quit, then the servers are told to stop,
# together; returns a sub that waits (bounded) until they have
sub stop_servers
{
	my (@srv) = @_;
	for my $r (grep { $_->{warm} } @srv)
	{
		eval { $r->{warm}->finish } or eval { $r->{warm}->kill_kill };
	}
	$_->{peer}->quit for @srv;
	my @run = map {
		my ($out, $err) = ('', '');
		IPC::Run::start([ $ZK_SH, 'stop', $_->{dir} ], '>', \$out, '2>', \$err, IPC::Run::timeout(60));
	} @srv;
	my %gone = map { $_->{dir} => 1 } @srv;
	return sub {
		for my $h (@run)
		{
			eval { $h->finish } or diag("zk.sh stop failed: $@");
		}
		@zk_dirs = grep { !$gone{$_} } @zk_dirs;
	};
}

END
{
	local ($?, $!);
	for my $dir (@zk_dirs)
	{
		open(my $fh, '<', "$dir/zk.pid") or next;
		my $pid = <$fh> // '';
		chomp $pid;
		kill('KILL', $pid) if $pid =~ /^\d+$/;
	}
}

# the default server (key D): certificate 'server', clientAuth need, TLS
# 1.2 only; the others named by their certificates
my $SRV = start_servers(
	D => [ 'server', extra => $ONLY_TLS12 ],
	(map { $_ => [$_] } sort keys %CERT),
	expired => ['expired'],
	foreign => ['foreign'],
	none => [ 'server', client_auth => 'none' ],
	want => [ 'server', client_auth => 'want', extra => $TLS13_TOO ]);
my $D = $SRV->{D};

my $node = new_zklock_node('ident', $D->{tls},
	tls_conf($pki, 'ca', 'client', $D->{tls}) . "zklock.connect_timeout = '2s'\n",
	wait_connected => 0);

############################################################################
# Helpers
############################################################################

# set_conf($lines): add $lines to postgresql.conf and reload (a TLS setting
# that changes restarts the worker); returns the log's size before
sub set_conf
{
	my ($lines) = @_;
	my $log_from = -s $node->logfile;
	$node->append_conf('postgresql.conf', $lines);
	$node->reload;
	return $log_from;
}

# to($srv, $host, $more): zklock.hosts = '$host:<$srv's secure port>', and
# $more settings; reload
sub to
{
	my ($srv, $host, $more) = @_;
	return set_conf("zklock.hosts = '$host:$srv->{port}'\n" . ($more // ''));
}

# alter_system($sql): ALTER SYSTEM ... and reload; returns the log's size
# before
sub alter_system
{
	my ($sql) = @_;
	my $log_from = -s $node->logfile;
	$node->safe_psql('postgres', $sql);
	$node->safe_psql('postgres', 'SELECT pg_reload_conf()');
	return $log_from;
}

# handshake_re($srv, $why): the start of every refusal's reason, then $why
sub handshake_re
{
	my ($srv, $why) = @_;
	return qr/TLS handshake with zookeeper server 127\.0\.0\.1:$srv->{port} failed: $why/;
}

# name_re($srv, $host, $names): the reason of a certificate that does not
# name $host, naming $names (all of them, in that order) instead
sub name_re
{
	my ($srv, $host, $names) = @_;
	return handshake_re($srv,
		qr/certificate verify failed: the server certificate does not name "\Q$host\E" \(zklock\.tls_verify = verify-full\); it names \Q$names\E(?:\n|\z)/
	);
}

# verify_re($srv, $why): OpenSSL's verification said $why
sub verify_re
{
	my ($srv, $why) = @_;
	return handshake_re($srv, qr/certificate verify failed: $why(?:\n|\z)/);
}

# refused($what, $srv, $re, $log_from): tls_failed, the log, zk_status()
# and a call say why ($re), nothing left (connection_failure_ok), and a
# server zklock never connected to has no session but its plaintext
# peer's
sub refused
{
	my ($what, $srv, $re, $log_from) = @_;
	connection_failure_ok($node, $what, 'tls_failed', $re, $log_from, $srv->{peer}, '/t218/f');
	# (a server zklock had a session with may still hold it: a worker
	# restart keeps the session to resume it)
	like(four_letter($srv->{zk}, 'mntr'), qr/^zk_global_sessions\s+1$/m,
		"$what: the server has no session of zklock's (its one session is the plaintext peer's)")
	  unless $srv->{had_zklock};
	return;
}

# accepted($what, $srv, $log_from): the log says connected to $srv (after
# $log_from), zk_status() says connected to it over TLS with no failure
sub accepted
{
	my ($what, $srv, $log_from) = @_;
	ok(wait_until(
			sub {
				substr(slurp_file($node->logfile), $log_from) =~
				  /LOG:  zklock: connected to zookeeper 127\.0\.0\.1:$srv->{port}, /;
			},
			30, "the log line of a connection to $srv->{tls}"),
		"$what: the log says connected to $srv->{tls}")
	  or diag('the log since the change: ' . substr(slurp_file($node->logfile), $log_from, 3000));
	ok(wait_sql($node, q{SELECT state, server, tls, connection_failure IS NULL FROM zk_status()},
			"connected|$srv->{tls}|t|t", 30),
		"$what: zk_status() says connected to $srv->{tls} over TLS, no failure");
	$srv->{had_zklock} = 1;
	return;
}

# lock_works($what, $srv, $path): a session takes $path, the server holds
# its lock node (the plaintext peer sees it), it is released and gone
sub lock_works
{
	my ($what, $srv, $path) = @_;
	my $s = ZklockTest::Session->new($node, 'lk');
	is($s->value("SELECT zk_mutex_acquire('$path', '10s')"), 't', "$what: SQL acquires $path");
	my $kids = $srv->{peer}->children($path) // [];
	ok(@$kids == 1 && $kids->[0] =~ $CURATOR_NODE_RE, "$what: ... its lock node is on that server (@$kids)");
	is($s->value("SELECT zk_mutex_release('$path')"), 't', "$what: and releases it");
	ok(wait_until(sub { @{ $srv->{peer}->children($path) // [] } == 0 }, 10),
		"$what: no lock node is left");
	$s->quit;
	return;
}

############################################################################
# The cases
############################################################################

subtest 'the defaults: verify-full, TLSv1.2, no CRL; the default server certificate is accepted' => sub {
	accepted('default server', $D, 0);
	is($node->safe_psql('postgres', 'SHOW zklock.tls_verify'), 'verify-full', 'zklock.tls_verify is verify-full');
	is($node->safe_psql('postgres', 'SHOW zklock.tls_min_version'), 'TLSv1.2', 'zklock.tls_min_version is TLSv1.2');
	is($node->safe_psql('postgres', 'SHOW zklock.tls_crl_file'), '', 'zklock.tls_crl_file is empty');
	is($node->safe_psql('postgres',
			q{SELECT count(*), string_agg(DISTINCT context, ',') FROM pg_settings
			  WHERE name IN ('zklock.tls_verify', 'zklock.tls_min_version', 'zklock.tls_crl_file')}),
		'3|sighup', 'the three are set in the server configuration (reloadable), not by a session');
	lock_works('default server', $D, '/t218/d');
};

subtest 'bad values of zklock.tls_verify and zklock.tls_min_version are refused' => sub {
	for my $bad ([ 'zklock.tls_verify', 'none' ], [ 'zklock.tls_verify', 'verify-fulll' ],
		[ 'zklock.tls_min_version', 'TLSv1.1' ], [ 'zklock.tls_min_version', 'TLSv1.4' ])
	{
		my ($name, $v) = @$bad;
		my ($state, $err) = psql_error($node, "ALTER SYSTEM SET $name = '$v'");
		is($state, '22023', "ALTER SYSTEM SET $name = '$v' fails with 22023") or diag($err);
		like($err, qr/invalid value for parameter "\Q$name\E": "\Q$v\E"/, '... saying the value is invalid');
	}
	my ($state, $err) = psql_error($node, "SET zklock.tls_verify = 'verify-ca'");
	is($state, '55P02', 'SET zklock.tls_verify in a session fails (55P02: only the server configuration sets it)')
	  or diag($err);
	($state, $err) = psql_error($node, "SET zklock.tls_verify = 'bogus'");
	ok(defined $state && $state =~ /^(22023|55P02)$/, "SET zklock.tls_verify = 'bogus' fails (" . ($state // 'no error') . ')')
	  or diag($err);
	# a typo in postgresql.conf leaves verification as it was
	my $log_from = set_conf("zklock.tls_verify = 'verfy-ca'\n");
	ok(wait_until(sub { substr(slurp_file($node->logfile), $log_from) =~ /invalid value for parameter "zklock\.tls_verify": "verfy-ca"/ }, 20),
		'a reload with zklock.tls_verify = \'verfy-ca\' logs the invalid value');
	is($node->safe_psql('postgres', 'SHOW zklock.tls_verify'), 'verify-full', '... and verification stays verify-full');
	# the bad line goes (the default stays the built-in one for the cases)
	$node->adjust_conf('postgresql.conf', 'zklock.tls_verify', undef);
	$node->reload;
	is($node->safe_psql('postgres', q{SELECT setting, source FROM pg_settings WHERE name = 'zklock.tls_verify'}),
		'verify-full|default', 'the line removed: verify-full, the default');
};

subtest 'a certificate naming another address: IP:127.0.0.2 for hosts 127.0.0.1 is refused' => sub {
	my $srv = $SRV->{ip_evil};
	refused('IP subjectAltName of another address', $srv, name_re($srv, '127.0.0.1', 'IP:127.0.0.2'),
		to($srv, '127.0.0.1'));

	# verify-ca: the CA only (unsafe, as documented)
	my $log_from = alter_system(q{ALTER SYSTEM SET zklock.tls_verify = 'verify-ca'});
	accepted("verify-ca", $srv, $log_from);
	is($node->safe_psql('postgres', 'SHOW zklock.tls_verify'), 'verify-ca', 'SHOW zklock.tls_verify says verify-ca');
	lock_works('verify-ca', $srv, '/t218/ca');

	# back to the default: refused again
	$log_from = alter_system(q{ALTER SYSTEM RESET zklock.tls_verify});
	refused('verify-full again (ALTER SYSTEM RESET)', $srv, name_re($srv, '127.0.0.1', 'IP:127.0.0.2'), $log_from);
	is($node->safe_psql('postgres', 'SHOW zklock.tls_verify'), 'verify-full', 'SHOW zklock.tls_verify says verify-full');
};

subtest 'a certificate naming only DNS:evil.example: refused for hosts 127.0.0.1 (the issue) and for localhost' => sub {
	my $srv = $SRV->{dns_evil};
	refused('DNS:evil.example for 127.0.0.1', $srv, name_re($srv, '127.0.0.1', 'DNS:evil.example'),
		to($srv, '127.0.0.1'));
	refused('DNS:evil.example for localhost', $srv, name_re($srv, 'localhost', 'DNS:evil.example'),
		to($srv, 'localhost'));
};

subtest 'a certificate without subjectAltName whose CN is evil.example: refused for localhost' => sub {
	my $srv = $SRV->{cn_evil};
	refused('CN=evil.example for localhost', $srv, name_re($srv, 'localhost', 'CN=evil.example'),
		to($srv, 'localhost'));
};

subtest 'a subjectAltName that does not match, with CN=localhost: refused for localhost (the CN is not looked at)' => sub {
	my $srv = $SRV->{san_over_cn};
	refused('DNS:zk.elsewhere.example with CN=localhost', $srv,
		name_re($srv, 'localhost', 'DNS:zk.elsewhere.example'), to($srv, 'localhost'));
};

subtest 'IP:127.0.0.1 for hosts 127.0.0.1: accepted, a lock works; for localhost refused' => sub {
	my $srv = $SRV->{ip_good};
	accepted('IP:127.0.0.1 for 127.0.0.1', $srv, to($srv, '127.0.0.1'));
	lock_works('IP:127.0.0.1', $srv, '/t218/ip');
	# a host name is not matched against IP subjectAltNames
	refused('IP:127.0.0.1 only, for localhost', $srv, name_re($srv, 'localhost', 'IP:127.0.0.1'),
		to($srv, 'localhost'));
};

subtest 'DNS:localhost for hosts localhost: accepted, a lock works; for 127.0.0.1 refused' => sub {
	my $srv = $SRV->{dns_good};
	accepted('DNS:localhost for localhost', $srv, to($srv, 'localhost'));
	lock_works('DNS:localhost', $srv, '/t218/dns');
	# an IP literal is not matched against DNS subjectAltNames
	refused('DNS:localhost only, for 127.0.0.1', $srv, name_re($srv, '127.0.0.1', 'DNS:localhost'),
		to($srv, '127.0.0.1'));
};

subtest 'no subjectAltName and CN=localhost for hosts localhost: accepted, a lock works' => sub {
	my $srv = $SRV->{cn_good};
	accepted('CN=localhost for localhost', $srv, to($srv, 'localhost'));
	lock_works('CN=localhost', $srv, '/t218/cn');
};

subtest 'DNS:*.zklock.test: accepted for zk.zklock.test (beside another entry too), refused for zk.other.test and a.b.zklock.test' => sub {
	my $srv = $SRV->{wildcard};
	accepted('*.zklock.test for zk.zklock.test', $srv, to($srv, 'zk.zklock.test'));
	lock_works('*.zklock.test', $srv, '/t218/wild');
	# with two entries the name is that of the entry connected to (its
	# address and port), first or last; nothing listens on port 1
	accepted('zklock.hosts localhost:1,zk.zklock.test:PORT', $srv,
		set_conf("zklock.hosts = 'localhost:1,zk.zklock.test:$srv->{port}'\n"));
	accepted('zklock.hosts zk.zklock.test:PORT,localhost:1', $srv,
		set_conf("zklock.hosts = 'zk.zklock.test:$srv->{port},localhost:1'\n"));
	refused('*.zklock.test for zk.other.test', $srv, name_re($srv, 'zk.other.test', 'DNS:*.zklock.test'),
		to($srv, 'zk.other.test'));
	refused('*.zklock.test for a.b.zklock.test', $srv, name_re($srv, 'a.b.zklock.test', 'DNS:*.zklock.test'),
		to($srv, 'a.b.zklock.test'));
};

subtest 'DNS:z*.zklock.test and DNS:zk.*.test (no whole leftmost label): refused for zk.zklock.test' => sub {
	my $srv = $SRV->{partial};
	refused('z*.zklock.test, zk.*.test for zk.zklock.test', $srv,
		name_re($srv, 'zk.zklock.test', 'DNS:z*.zklock.test, DNS:zk.*.test'), to($srv, 'zk.zklock.test'));
};

subtest 'a server certificate whose extendedKeyUsage is clientAuth only: refused' => sub {
	my $srv = $SRV->{client_only};
	# X509_V_ERR_INVALID_PURPOSE: "unsuitable certificate purpose" from
	# OpenSSL 3.0 on, "unsupported certificate purpose" before
	refused('extendedKeyUsage clientAuth', $srv, verify_re($srv, qr/(?:unsuitable|unsupported) certificate purpose/),
		to($srv, '127.0.0.1'));
};

subtest 'an expired server certificate: refused' => sub {
	my $srv = $SRV->{expired};
	refused('expired', $srv, verify_re($srv, qr/certificate has expired/), to($srv, '127.0.0.1'));
};

subtest 'zklock.tls_crl_file: a CRL revoking the server certificate refuses it, one that does not accepts it' => sub {
	my $empty = pki_crl($pki, 'ca', 'crl_empty');
	pki_revoke($pki, 'ca', 'server');
	my $revoked = pki_crl($pki, 'ca', 'crl_revoked');
	accepted('a CRL of the CA revoking nothing', $D, to($D, '127.0.0.1', "zklock.tls_crl_file = '$empty'\n"));
	is($node->safe_psql('postgres', 'SHOW zklock.tls_crl_file'), $empty, 'SHOW zklock.tls_crl_file names it');
	refused('revoked', $D, verify_re($D, qr/certificate revoked/), set_conf("zklock.tls_crl_file = '$revoked'\n"));
	my $missing = "$pki/no-such-crl.pem";
	refused('a CRL file that does not exist', $D, qr/zklock\.tls_crl_file "\Q$missing\E".*No such file or directory/,
		set_conf("zklock.tls_crl_file = '$missing'\n"));
	my $garbage = "$pki/garbage-crl.pem";
	PostgreSQL::Test::Utils::append_to_file($garbage, "-----BEGIN X509 CRL-----\nnot a CRL\n-----END X509 CRL-----\n");
	refused('a CRL file that does not parse', $D,
		qr/zklock\.tls_crl_file "\Q$garbage\E".*(?:no PEM certificate revocation list|not a (?:PEM )?(?:CRL|certificate revocation list)|could not (?:parse|read|load))/i,
		set_conf("zklock.tls_crl_file = '$garbage'\n"));
	accepted('without a CRL', $D, set_conf("zklock.tls_crl_file = ''\n"));
	lock_works('without a CRL', $D, '/t218/crl');
};

subtest 'no client certificate: taken by ssl.clientAuth=none and want, refused by need' => sub {
	my $log_from = set_conf("zklock.tls_cert_file = ''\nzklock.tls_key_file = ''\n");
	refused('no client certificate, clientAuth=need', $D, handshake_re($D, qr/\S/), $log_from);
	my $none = $SRV->{none};
	accepted('no client certificate, clientAuth=none', $none, to($none, '127.0.0.1'));
	lock_works('clientAuth=none', $none, '/t218/none');
	my $want = $SRV->{want};
	accepted('no client certificate, clientAuth=want', $want, to($want, '127.0.0.1'));
	lock_works('clientAuth=want', $want, '/t218/want');
};

subtest "zklock.tls_min_version = 'TLSv1.3': refused by a server speaking only TLS 1.2, connects to one speaking 1.3" => sub {
	my $log_from = alter_system(q{ALTER SYSTEM SET zklock.tls_min_version = 'TLSv1.3'});
	my $want = $SRV->{want};
	accepted('TLSv1.3 to a server speaking 1.3 and 1.2', $want, $log_from);
	is($node->safe_psql('postgres', 'SHOW zklock.tls_min_version'), 'TLSv1.3', 'SHOW zklock.tls_min_version says TLSv1.3');
	refused('TLSv1.3 to a server speaking only 1.2', $D,
		handshake_re($D, qr/.*(?:unsupported protocol|protocol version)/i),
		set_conf(tls_conf($pki, 'ca', 'client', "127.0.0.1:$D->{port}")));
	$log_from = alter_system(q{ALTER SYSTEM RESET zklock.tls_min_version});
	accepted('the default TLSv1.2 to it', $D, $log_from);
	is($node->safe_psql('postgres', 'SHOW zklock.tls_min_version'), 'TLSv1.2', 'SHOW zklock.tls_min_version says TLSv1.2');
};

subtest 'only zklock.tls_ca_file is trusted: a CA named by SSL_CERT_FILE is not, under verify-ca neither' => sub {
	my $srv = $SRV->{foreign};
	$node->append_conf('postgresql.conf', "zklock.hosts = '127.0.0.1:$srv->{port}'\n");
	my $log_from = -s $node->logfile;
	{
		local $ENV{SSL_CERT_FILE} = "$pki/other_ca.pem";
		$node->restart;
	}
	# the server's processes have it (a program a backend starts inherits
	# their environment; /proc/PID/environ of a postgres process holds its
	# ps display instead)
	is($node->safe_psql('postgres',
			q{CREATE TEMP TABLE env (v text); COPY env FROM PROGRAM 'printf "%s\\n" "$SSL_CERT_FILE"'; SELECT v FROM env}),
		"$pki/other_ca.pem", 'the server runs with SSL_CERT_FILE naming the CA that signed the server certificate');
	refused('signed by the CA of SSL_CERT_FILE', $srv, verify_re($srv, qr/unable to get local issuer certificate/),
		$log_from);
	# verify-ca checks the CA all the same
	refused('verify-ca, signed by the CA of SSL_CERT_FILE', $srv,
		verify_re($srv, qr/unable to get local issuer certificate/),
		alter_system(q{ALTER SYSTEM SET zklock.tls_verify = 'verify-ca'}));
	# the server is fine for a client that trusts its CA (verify-full again)
	$node->safe_psql('postgres', 'ALTER SYSTEM RESET zklock.tls_verify');
	accepted('zklock.tls_ca_file naming that CA', $srv, set_conf("zklock.tls_ca_file = '$pki/other_ca.pem'\n"));
	is($node->safe_psql('postgres', 'SHOW zklock.tls_verify'), 'verify-full', '... with verify-full');
	lock_works('the other CA', $srv, '/t218/foreign');
};

note(sprintf('218 took %.0f s', time - $t_begin));

# the servers and the cluster stop at the same time
my $stopped = stop_servers(values %$SRV);
$node->stop;
$stopped->();
done_testing();

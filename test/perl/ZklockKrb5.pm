# ZklockKrb5: a Kerberos realm of the test's own (217, 219): MIT's KDC of
# Debian's krb5-kdc run by the test user in a temporary directory, with
# its own krb5.conf and kdc.conf, a database made with kdb5_util and
# principals and keytabs made with kadmin.local (krb5-admin-server); a
# ZooKeeper server logging clients in with SASL GSSAPI (a JAAS Server
# section of Java's Krb5LoginModule), and the JAAS Client files and JVM
# options of Java clients logging in with a keytab.
package ZklockKrb5;
use strict;
use warnings;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use ZklockTest;
use ZklockSasl;
use Exporter 'import';
our @EXPORT = qw(krb5_realm krb5_admin krb5_keytab stop_kdc start_kdc
  krb5_zk krb5_client_jaas krb5_jvm_options $REALM $ZK_PRINCIPAL);

our $REALM = 'ZKLOCK.TEST';

# what the servers are known as: the C client (Cyrus SASL) asks for
# zklock.sasl_service/zklock.sasl_host, the Java client for
# zookeeper.server.principal
our $ZK_PRINCIPAL = "zookeeper/localhost\@$REALM";

my ($dir, $kdc, $kdc_log_from);

# run(@cmd): run a Kerberos tool, die with its output if it fails
sub run
{
	my (@cmd) = @_;
	my ($out, $err) = ('', '');
	IPC::Run::run(\@cmd, '<', \undef, '>', \$out, '2>', \$err, IPC::Run::timeout(60))
	  or die "@cmd failed: $err$out";
	return $out;
}

# krb5_realm($dir): a realm $REALM in $dir (absolute): krb5.conf (whose
# path goes to KRB5_CONFIG of this process and so of every server and
# client it starts: the postmaster, ZooKeeper, Java, kadmin.local), kdc.conf
# (KRB5_KDC_PROFILE), the database; its KDC started on 127.0.0.1 at a
# free port, TCP only, and no name looked up in DNS.  Returns the path of
# krb5.conf.
sub krb5_realm
{
	($dir) = @_;
	my $port = PostgreSQL::Test::Cluster::get_free_port();
	$ENV{KRB5_CONFIG} = ZklockSasl::write_file("$dir/krb5.conf", <<"EOF2");
[libdefaults]
  default_realm = $REALM
  dns_lookup_kdc = false
  dns_lookup_realm = false
  dns_canonicalize_hostname = false
  rdns = false
  udp_preference_limit = 1
[realms]
  $REALM = {
    kdc = 127.0.0.1:$port
  }
EOF2
	$ENV{KRB5_KDC_PROFILE} = ZklockSasl::write_file("$dir/kdc.conf", <<"EOF2");
[kdcdefaults]
  kdc_listen = 127.0.0.1:$port
  kdc_tcp_listen = 127.0.0.1:$port
[realms]
  $REALM = {
    database_name = $dir/principal
    key_stash_file = $dir/stash
    acl_file = $dir/kadm5.acl
    kdc_listen = 127.0.0.1:$port
    kdc_tcp_listen = 127.0.0.1:$port
  }
[logging]
  kdc = FILE:$dir/kdc.log
EOF2
	ZklockSasl::write_file("$dir/kadm5.acl", '');
	# never a credential cache of the user's
	$ENV{KRB5CCNAME} = "FILE:$dir/ccache";
	run('kdb5_util', 'create', '-s', '-r', $REALM, '-P', 'zklock-test-master');
	$kdc_log_from = 0;
	start_kdc();
	return $ENV{KRB5_CONFIG};
}

# start_kdc(): start the KDC (krb5kdc -n, in the foreground of a child
# process) and wait until it listens
sub start_kdc
{
	die 'the KDC is running' if $kdc;
	$kdc_log_from = -s "$dir/kdc.log" // 0;
	my ($out, $err) = ('', '');
	$kdc = IPC::Run::start([ 'krb5kdc', '-n', '-r', $REALM ], '<', \undef, '>', \$out, '2>', \$err);
	my $up = ZklockTest::wait_until(
		sub {
			return 1 if -f "$dir/kdc.log"
			  && (substr(slurp_file("$dir/kdc.log"), $kdc_log_from) // '') =~ /commencing operation/;
			$kdc->pump_nb;
			die "krb5kdc exited: $err$out" unless $kdc->pumpable;
			return 0;
		},
		30, 'the KDC to start');
	die "krb5kdc did not start: $err$out" unless $up;
	note "KDC of $REALM started";
	return;
}

# stop_kdc(): stop the KDC (and wait for it to exit)
sub stop_kdc
{
	return unless $kdc;
	$kdc->signal('TERM');
	eval { $kdc->finish; 1 } or $kdc->kill_kill;
	undef $kdc;
	note "KDC of $REALM stopped";
	return;
}

# krb5_admin($query): run a kadmin.local query on the realm's database
sub krb5_admin
{
	my ($query) = @_;
	return run('kadmin.local', '-r', $REALM, '-q', $query);
}

# krb5_keytab($principal, $file): a new principal with random keys that
# needs preauthentication (as a realm's principals usually do), and a
# keytab holding them ($dir/$file; the test user runs PostgreSQL and Java)
sub krb5_keytab
{
	my ($principal, $file) = @_;
	krb5_admin("addprinc -randkey +requires_preauth $principal");
	krb5_admin("ktadd -k $dir/$file $principal");
	return "$dir/$file";
}

# jaas($file, $section, $principal, $keytab): a JAAS file $dir/$file
# whose $section (Server, Client) logs in as $principal with $keytab
sub jaas
{
	my ($file, $section, $principal, $keytab) = @_;
	return ZklockSasl::write_file("$dir/$file", <<"EOF2");
$section {
  com.sun.security.auth.module.Krb5LoginModule required
  useKeyTab=true
  keyTab="$keytab"
  storeKey=true
  useTicketCache=false
  principal="$principal";
};
EOF2
}

# krb5_zk($extra): a ZooKeeper server with the SASL authentication
# provider and a JAAS Server section logging in as $ZK_PRINCIPAL from its
# keytab; the zoo.cfg lines $extra (optional: a secureClientPort, ...)
# added, as start_zk_with_config returns it.
# (GSSAPI works in the "FIPS mode" of ZooKeeper 3.9.6, which refuses only
# DIGEST-MD5: no -Dzookeeper.fips-mode=false here.)
sub krb5_zk
{
	my ($extra) = @_;
	my $jaas = jaas('server.jaas', 'Server', $ZK_PRINCIPAL,
		krb5_keytab($ZK_PRINCIPAL, 'zookeeper.keytab'));
	return ZklockTest::start_zk_with_config(
		$ZklockSasl::SASL_PROVIDER . ($extra // ''),
		"-Djava.security.auth.login.config=$jaas",
		"-Djava.security.krb5.conf=$ENV{KRB5_CONFIG}");
}

# krb5_client_jaas($principal, $keytab): a JAAS Client file logging in as
# $principal with $keytab
sub krb5_client_jaas
{
	my ($principal, $keytab) = @_;
	(my $name = $principal) =~ s/\W/_/g;
	return jaas("$name.jaas", 'Client', $principal, $keytab);
}

# krb5_jvm_options($jaas): a Java client's options to log in with $jaas
# to the servers of krb5_zk
sub krb5_jvm_options
{
	my ($jaas) = @_;
	return ("-Djava.security.auth.login.config=$jaas",
		"-Djava.security.krb5.conf=$ENV{KRB5_CONFIG}",
		"-Dzookeeper.server.principal=$ZK_PRINCIPAL");
}

# Leave no KDC behind, even when a test dies half-way.
END
{
	local $?;
	stop_kdc();
}

1;

# ZklockSasl: a ZooKeeper server that logs clients in with SASL DIGEST-MD5
# (its JAAS Server section) and the JAAS Client files of Curator peers and
# ZkTool (213, 214, 219); what a SASL login lets SQL and Curator share
# (213, 217, 219).
package ZklockSasl;
use strict;
use warnings;
use Exporter 'import';
our @EXPORT = qw(sasl_zk sasl_server_jaas sasl_client_jaas sasl_jvm_options
  sql_and_peer_exclude_ok $SASL_PROVIDER);

# the zoo.cfg line of the SASL authentication provider
our $SASL_PROVIDER = "authProvider.1=org.apache.zookeeper.server.auth.SASLAuthenticationProvider\n";

# ZooKeeper 3.9.6 (forky) runs in "FIPS mode" by default, in which its
# server refuses DIGEST-MD5 (SaslServer is not made: every login fails);
# 3.8.0 and 3.9.3 do not know the property
our @NO_FIPS = ('-Dzookeeper.fips-mode=false');

# write_file($path, $text): $path
sub write_file
{
	my ($path, $text) = @_;
	open(my $fh, '>', $path) or die "cannot write $path: $!";
	print $fh $text;
	close $fh;
	return $path;
}

# sasl_server_jaas($dir, user => password, ...): a JAAS Server file of
# these users ($dir/server.jaas, $dir an absolute path), for a server's
# -Djava.security.auth.login.config (sasl_jvm_options)
sub sasl_server_jaas
{
	my ($dir, %users) = @_;
	my $list = join("\n", map { qq{  user_$_="$users{$_}"} } sort keys %users);
	return write_file("$dir/server.jaas", <<"EOF2");
Server {
  org.apache.zookeeper.server.auth.DigestLoginModule required
$list;
};
EOF2
}

# sasl_zk($dir, user => password, ...): a ZooKeeper server with the SASL
# authentication provider and a JAAS Server section of these users
# (written in $dir, an absolute path)
sub sasl_zk
{
	my ($dir, %users) = @_;
	return ZklockTest::start_zk_with_config($SASL_PROVIDER,
		sasl_jvm_options(sasl_server_jaas($dir, %users)));
}

# sasl_client_jaas($dir, $user, $password): a JAAS Client file logging in
# as $user
sub sasl_client_jaas
{
	my ($dir, $user, $password) = @_;
	return write_file("$dir/$user.jaas", <<"EOF2");
Client {
  org.apache.zookeeper.server.auth.DigestLoginModule required
  username="$user"
  password="$password";
};
EOF2
}

# sasl_jvm_options($jaas): a Java client's options to log in with $jaas
sub sasl_jvm_options
{
	my ($jaas) = @_;
	return ("-Djava.security.auth.login.config=$jaas", @NO_FIPS);
}

# sql_and_peer_exclude_ok($node, $peer, $path): on $path, SQL and the
# Curator client $peer (logged in as another identity, the path's ACL
# open) exclude each other both ways
sub sql_and_peer_exclude_ok
{
	my ($node, $peer, $path) = @_;
	my $s = ZklockTest::Session->new($node, 's');
	Test::More::is($s->value("SELECT zk_mutex_acquire('$path')"), 't', 'SQL acquires');
	$peer->acquire('c1', $path, 1000);
	Test::More::is($peer->acquire_result('c1'), 'timeout', 'Curator times out while SQL holds');
	Test::More::is($s->value("SELECT zk_mutex_release('$path')"), 't', 'SQL releases');
	$peer->acquire('c2', $path, 10000);
	Test::More::is($peer->acquire_result('c2'), 'acquired', 'Curator acquires');
	Test::More::is($s->value("SELECT zk_mutex_acquire('$path', '700ms')"), 'f', 'SQL times out while Curator holds');
	Test::More::is($peer->release('c2'), 'released', 'Curator releases');
	$s->quit;
	return;
}

1;

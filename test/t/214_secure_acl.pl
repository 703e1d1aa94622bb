# 214_secure_acl: with SASL, zklock.acl = 'creator' gives zklock's nodes to
# the SASL identity the worker logged in as.
#
# What users rely on: ZooKeeper maps the creator of ZOO_CREATOR_ALL_ACL to
# the ids the session authenticated as; with zklock.sasl_mechanism =
# 'DIGEST-MD5' that is sasl:<zklock.sasl_user> (zklock.auth is not needed).
# So every node zklock creates, the lock path included, reads
# sasl:zklock:rwcda and nothing else; a Curator client logged in (JAAS) as
# the same user shares the paths: it queues behind SQL, gets the lock when
# SQL releases, SQL waits behind it, and it can delete zklock's nodes; a
# Curator client logged in as another SASL user cannot list the lock path,
# delete zklock's lock node or write into it (NoAuth), so it cannot break a
# lock.  (The x509 case, client certificates: test 212.)
# The parts are real, as in 213: a ZooKeeper server with the SASL
# authentication provider and a JAAS file, Cyrus SASL's DIGEST-MD5 plugin.
use strict;
use warnings;
use File::Spec;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use ZklockTest;
use ZklockFault;

my $dir = File::Spec->rel2abs(PostgreSQL::Test::Utils::tempdir('sasl_acl'));
my $secret = 'pw214-never-shown';

# write_file($path, $text)
sub write_file
{
	my ($path, $text) = @_;
	open(my $fh, '>', $path) or die "cannot write $path: $!";
	print $fh $text;
	close $fh;
	return $path;
}

# client_jaas($user, $password): a JAAS Client section logging in as $user
sub client_jaas
{
	my ($user, $password) = @_;
	return write_file("$dir/$user.jaas", <<"EOF2");
Client {
  org.apache.zookeeper.server.auth.DigestLoginModule required
  username="$user"
  password="$password";
};
EOF2
}

my $server_jaas = write_file("$dir/server.jaas", <<"EOF2");
Server {
  org.apache.zookeeper.server.auth.DigestLoginModule required
  user_zklock="$secret"
  user_other="other-pw";
};
EOF2
my $same_jaas = client_jaas('zklock', $secret);
my $other_jaas = client_jaas('other', 'other-pw');

my @no_fips = ('-Dzookeeper.fips-mode=false');
my $zk = start_zk_with_config(
	"authProvider.1=org.apache.zookeeper.server.auth.SASLAuthenticationProvider\n",
	"-Djava.security.auth.login.config=$server_jaas", @no_fips);
my $same = new_peer($zk, 'same-peer', "-Djava.security.auth.login.config=$same_jaas", @no_fips);
my $other = new_peer($zk, 'other-peer', "-Djava.security.auth.login.config=$other_jaas", @no_fips);

my $node = new_zklock_node('sasl_acl', $zk,
	"zklock.sasl_mechanism = 'DIGEST-MD5'\n"
	  . "zklock.sasl_user = 'zklock'\n"
	  . "zklock.sasl_password = '$secret'\n"
	  . "zklock.acl = 'creator'\n"
	  . "zklock.namespace = '/ns214'\n",
	wait_connected => 0);

# acl_as($jaas, $path): zk_acl of $path read by ZkTool logged in with $jaas
sub acl_as
{
	my ($jaas, $path) = @_;
	local $ENV{JAVA_TOOL_OPTIONS} = "-Djava.security.auth.login.config=$jaas @no_fips";
	return zk_acl($zk, $path);
}

subtest 'the nodes belong to the SASL identity' => sub {
	ok(wait_connected($node, 60), 'connected with SASL and zklock.acl = creator');
	is($node->safe_psql('postgres', 'SELECT sasl_identity FROM zk_status()'), 'zklock', 'logged in as zklock');
	my $s = ZklockTest::Session->new($node, 's');
	is($s->value(q{SELECT zk_mutex_acquire('/t214/m', '10s')}), 't', 'SQL acquires /t214/m');
	my $name = $node->safe_psql('postgres', q{SELECT node FROM zk_locks WHERE path = '/t214/m'});
	like($name, qr/^_c_.*-lock-\d{10}$/, 'zk_locks names its node');
	my $lock_node = "/ns214/t214/m/$name";
	for my $p ($lock_node, '/ns214/t214/m', '/ns214')
	{
		my $acl = acl_as($same_jaas, $p);
		is(ref $acl ? "@$acl" : $acl // 'none', 'sasl:zklock:rwcda', "$p is sasl:zklock only");
	}
	is(acl_as($other_jaas, $lock_node), 'noauth', 'another SASL user cannot even read its ACL');

	# another SASL user: NoAuth on everything that would break the lock
	my $listing = $other->cmd('children /ns214/t214/m', qr/^(?:children|error children|nonode) /) // '';
	like($listing, qr/NoAuth/i, "another SASL user cannot list the lock path ($listing)");
	my $d = $other->delete($lock_node) // '';
	like($d, qr/^error.*NoAuth/i, "another SASL user cannot delete the lock node ($d)");
	my $w = $other->cmd("set $lock_node __REVOKE__", qr/^(?:set|error set|nonode) /) // '';
	like($w, qr/NoAuth/i, "nor write into it ($w)");
	is(ref acl_as($same_jaas, $lock_node), 'ARRAY', 'the lock node is still there');

	# the same SASL user shares the path
	$same->acquire('c1', '/ns214/t214/m', 20000);
	ok(wait_until(sub { @{ $same->children('/ns214/t214/m') // [] } == 2 }, 10),
		'a Curator client logged in as zklock queues behind SQL');
	is($s->value(q{SELECT zk_mutex_release('/t214/m')}), 't', 'SQL releases');
	is($same->acquire_result('c1'), 'acquired', 'the Curator client gets the lock');
	is($s->value(q{SELECT zk_mutex_acquire('/t214/m', '700ms')}), 'f', 'SQL times out while it holds');
	is($same->release('c1'), 'released', 'it releases');
	is($s->value(q{SELECT zk_mutex_acquire('/t214/m', '10s')}), 't', 'SQL acquires again');
	$name = $node->safe_psql('postgres', q{SELECT node FROM zk_locks WHERE path = '/t214/m'});
	$d = $same->delete("/ns214/t214/m/$name") // '';
	is($d, "deleted /ns214/t214/m/$name", 'the same SASL user may delete zklock\'s node (clean up)');
	$s->quit;
};

$same->quit;
$other->quit;
$node->stop;
done_testing();

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
use ZklockSasl;

my $dir = File::Spec->rel2abs(PostgreSQL::Test::Utils::tempdir('sasl_acl'));
my $secret = 'pw214-never-shown';

my $zk = sasl_zk($dir, zklock => $secret, other => 'other-pw');
my $same_jaas = sasl_client_jaas($dir, 'zklock', $secret);
my $other_jaas = sasl_client_jaas($dir, 'other', 'other-pw');
my $same = new_peer($zk, 'same-peer', sasl_jvm_options($same_jaas));
my $other = new_peer($zk, 'other-peer', sasl_jvm_options($other_jaas));

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
	local $ENV{JAVA_TOOL_OPTIONS} = join(' ', sasl_jvm_options($jaas));
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

	stranger_noauth_ok($other, '/ns214/t214/m', $lock_node, 'a Curator client logged in as another SASL user');
	is(ref acl_as($same_jaas, $lock_node), 'ARRAY', 'the lock node is still there');
	same_identity_shares_ok($node, $s, '/t214/m', '/ns214/t214/m', $same, 'a Curator client logged in as zklock');
	$s->quit;
};

$same->quit;
$other->quit;
$node->stop;
done_testing();

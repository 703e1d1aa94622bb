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

subtest 'the nodes belong to the SASL identity' => sub {
	ok(wait_connected($node, 60), 'connected with SASL and zklock.acl = creator');
	is($node->safe_psql('postgres', 'SELECT sasl_identity FROM zk_status()'), 'zklock', 'logged in as zklock');
	my $s = ZklockTest::Session->new($node, 's');
	creator_acl_ok(
		node => $node, s => $s, path => '/t214/m', lock_path => '/ns214/t214/m',
		id => 'sasl:zklock',
		zk => $zk,
		same_jvm => [ sasl_jvm_options($same_jaas) ], other_jvm => [ sasl_jvm_options($other_jaas) ],
		other => $other, other_who => 'a Curator client logged in as another SASL user',
		same => $same, same_who => 'a Curator client logged in as zklock');
	$s->quit;
};

$same->quit;
$other->quit;
$node->stop;
done_testing();

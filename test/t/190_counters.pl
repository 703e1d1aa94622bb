
# 190_counters: shared counters (Curator's SharedCount and
# DistributedAtomicLong), from SQL and from Curator on the same paths.
#
# What users rely on: a SharedCount read from SQL is created with its seed
# the way Curator creates it, and both sides read and write the same 4-byte
# value and version; try_set succeeds only at the version last read; a
# DistributedAtomicLong's adds from SQL sessions and Curator threads lose
# no increment; compare_and_set is false on a counter with no value
# (missing, or an empty node) as Curator's, and on a value that changed; bad input and a node of another shape get a clear error
# and leave nothing behind.  With two PostgreSQL clusters on the same
# ZooKeeper (each its own session) the counter is one: adds from both
# clusters' sessions and two Curator clients lose no increment, and
# try_set races between the clusters let exactly one writer win each
# version.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use ZklockTest;

my $zk = start_zk();
my $node = new_zklock_node('counters', $zk);
require_functions($node, qw(zk_shared_count_get zk_shared_count_get_versioned
	  zk_shared_count_set zk_shared_count_try_set zk_atomic_long_get
	  zk_atomic_long_add zk_atomic_long_compare_and_set zk_atomic_long_set));
my $peer = new_peer($zk);

sub sql { return $node->safe_psql('postgres', $_[0]); }

sub peer_count { return $peer->count_get(@_); }
sub peer_long { return $peer->long_get(@_); }

subtest 'SharedCount: created with its seed, and Curator reads what SQL reads' => sub {
	my $p = '/t190/count/a';
	is(sql("SELECT zk_shared_count_get('$p', 5)"), '5', 'SQL get creates the count with the seed');
	is(join(' ', peer_count($p, 9)), '5 0', 'Curator reads 5 at version 0 (its seed is not used)');
	is(sql("SELECT value || ' ' || version FROM zk_shared_count_get_versioned('$p')"), '5 0',
		'get_versioned: value and version');
	is($peer->cmd("count_set $p 42", qr/^countset \Q$p\E|^error/), "countset $p", 'Curator sets 42');
	is(sql("SELECT value || ' ' || version FROM zk_shared_count_get_versioned('$p')"), '42 1',
		'SQL reads 42 at version 1');
	is(sql("SELECT zk_shared_count_try_set('$p', 43, 0)"), 'f', 'try_set at a stale version: false');
	is(sql("SELECT zk_shared_count_try_set('$p', 43, 1)"), 't', 'try_set at the version read: true');
	is(join(' ', peer_count($p)), '43 2', 'Curator reads 43 at version 2');
	my $l = $peer->cmd("count_tryset $p 44 1", qr/^counttry \Q$p\E|^error/);
	is($l, "counttry $p false", "Curator's trySetCount at the stale version fails too");
	sql("SELECT zk_shared_count_set('$p', -7)");
	is(join(' ', peer_count($p)), '-7 3', 'SQL set: Curator reads -7 at version 3');
};

subtest 'DistributedAtomicLong: the same 8-byte value on both sides' => sub {
	my $p = '/t190/long/a';
	is(sql("SELECT zk_atomic_long_get('$p')"), '0', 'a missing long reads 0');
	is($peer->exists($p), 0, '... and reading creates nothing');
	is(sql("SELECT zk_atomic_long_compare_and_set('$p', 0, 5)"), 'f',
		'compare_and_set on a missing node: false, as Curator');
	is(sql("SELECT zk_atomic_long_add('$p', 5)"), '5', 'add creates it: 5');
	my $l = $peer->cmd("long_add $p 10", qr/^longadd \Q$p\E|^error/);
	is($l, "longadd $p true 15", 'Curator adds 10: 15');
	is(sql("SELECT zk_atomic_long_get('$p')"), '15', 'SQL reads 15');
	is(sql("SELECT zk_atomic_long_compare_and_set('$p', 14, 20)"), 'f', 'compare_and_set with a wrong expected value: false');
	is(sql("SELECT zk_atomic_long_compare_and_set('$p', 15, 20)"), 't', 'with the right one: true');
	is(peer_long($p), '20', 'Curator reads 20');
	$l = $peer->cmd("long_cas $p 20 -3", qr/^longcas \Q$p\E|^error/);
	is($l, "longcas $p true", "Curator's compareAndSet");
	is(sql("SELECT zk_atomic_long_get('$p')"), '-3', 'SQL reads -3');
	sql("SELECT zk_atomic_long_set('$p', 9223372036854775806)");
	is(peer_long($p), '9223372036854775806', 'set: Curator reads the big value');
	is(sql("SELECT zk_atomic_long_add('$p', 1)"), '9223372036854775807', 'add up to the maximum');
	my ($state) = psql_error($node, "SELECT zk_atomic_long_add('$p', 1)");
	is($state, '22003', 'an add past bigint is 22003, not a wrapped value');
	is(peer_long($p), '9223372036854775807', '... and nothing was written');
};

# issue 44 (6): a counter with no value, missing or an empty node (a
# container Curator or zklock made as a parent), answers the same way from
# both sides: get reads 0, compare_and_set is false whatever it expects
# (Curator's DistributedAtomicValue compares the bytes it read with the
# expected value's 8: none never match, and it creates nothing); add and set
# give it a value, after which compare_and_set(0, x) succeeds
subtest 'a counter with no value: get 0 and compare_and_set false, from SQL and from Curator' => sub {
	my $p = '/t190/none/missing';
	is(peer_long($p), '0', "Curator's get of a missing counter succeeds with 0");
	is(sql("SELECT zk_atomic_long_get('$p')"), '0', 'so does SQL');
	is($peer->cmd("long_cas $p 0 5", qr/^longcas \Q$p\E|^error/), "longcas $p false",
		"Curator's compareAndSet(0, 5) on it: false");
	is(sql("SELECT zk_atomic_long_compare_and_set('$p', 0, 5)"), 'f', 'so is SQL');
	is($peer->exists($p), 0, 'neither created it');

	my $e = '/t190/none/empty';
	is(sql("SELECT zk_atomic_long_add('$e/child', 1)"), '1', "a counter below $e makes $e a container with no data");
	is($peer->get($e), '', "$e is there, empty");
	is(peer_long($e), '0', "Curator's get of the empty node: 0");
	is(sql("SELECT zk_atomic_long_get('$e')"), '0', 'SQL: 0');
	is($peer->cmd("long_cas $e 0 5", qr/^longcas \Q$e\E|^error/), "longcas $e false",
		"Curator's compareAndSet(0, 5) on it: false");
	is(sql("SELECT zk_atomic_long_compare_and_set('$e', 0, 5)"), 'f', 'SQL: false too');
	is($peer->get($e), '', 'and nothing was written into it');
	is(sql("SELECT zk_atomic_long_add('$e', 0)"), '0', 'add(0) gives the empty node the value 0');
	is(sql("SELECT zk_atomic_long_compare_and_set('$e', 0, 5)"), 't', 'then compare_and_set(0, 5) succeeds');
	is(peer_long($e), '5', 'Curator reads 5');

	is(sql("SELECT zk_atomic_long_add('$p', 0)"), '0', 'add(0) gives the missing counter the value 0');
	is($peer->cmd("long_cas $p 0 5", qr/^longcas \Q$p\E|^error/), "longcas $p true",
		"then Curator's compareAndSet(0, 5) succeeds");
	is(sql("SELECT zk_atomic_long_compare_and_set('$p', 5, 6)"), 't', "and SQL's (5, 6)");
	is(peer_long($p), '6', 'Curator reads 6');
};

subtest 'concurrent adds from SQL sessions and a Curator thread lose no increment' => sub {
	my $p = '/t190/long/many';
	my @s = map { ZklockTest::Session->new($node, "add$_") } 1 .. 4;
	my $n = 40;
	$_->start("SELECT count(zk_atomic_long_add('$p', 1)) FROM generate_series(1, $n)") for @s;
	$peer->send("long_addloop $p 60");
	is($_->result(120)->{out}, $n, $_->name . " made $n adds") for @s;
	like($peer->wait_reply(qr/^longloop \Q$p\E/, 120) // '', qr/ 60$/, 'Curator made 60 adds');
	is(sql("SELECT zk_atomic_long_get('$p')"), 4 * $n + 60, 'the total is every add');
	$_->quit for @s;
};

subtest 'two clusters and Curator: adds lose nothing, try_set has one winner per version' => sub {
	my $node_b = new_zklock_node('counters_b', $zk);
	my $peer_b = new_peer($zk);
	isnt(sql('SELECT session_id FROM zk_status()'),
		$node_b->safe_psql('postgres', 'SELECT session_id FROM zk_status()'),
		'each cluster has its own ZooKeeper session');

	my $p = '/t190/long/two';
	my @s = map { ZklockTest::Session->new($node, "a$_"), ZklockTest::Session->new($node_b, "b$_") } 1 .. 2;
	my $n = 30;
	$_->start("SELECT count(zk_atomic_long_add('$p', 1)) FROM generate_series(1, $n)") for @s;
	$peer->send("long_addloop $p 40");
	$peer_b->send("long_addloop $p 40");
	is($_->result(120)->{out}, $n, $_->name . " made $n adds") for @s;
	like($peer->wait_reply(qr/^longloop \Q$p\E/, 120) // '', qr/ 40$/, 'Curator client 1 made 40 adds');
	like($peer_b->wait_reply(qr/^longloop \Q$p\E/, 120) // '', qr/ 40$/, 'Curator client 2 made 40 adds');
	my $sum = @s * $n + 80;
	is(peer_long($p), $sum, "Curator reads $sum: every add of both clusters and both clients");
	is($node_b->safe_psql('postgres', "SELECT zk_atomic_long_get('$p')"), $sum, 'cluster B reads the same');

	# each racer reads the version and tries to write at it, again and
	# again; it reports the versions it won
	my $race = q{CREATE FUNCTION race(p text, tag int, n int) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	r record;
	won int[] := '{}';
BEGIN
	FOR i IN 1 .. n LOOP
		SELECT * INTO r FROM zk_shared_count_get_versioned(p);
		IF zk_shared_count_try_set(p, tag, r.version) THEN
			won := won || r.version;
		END IF;
	END LOOP;
	RETURN array_to_string(won, ' ');
END $$};
	sql($race);
	$node_b->safe_psql('postgres', $race);
	my $c = '/t190/count/race';
	sql("SELECT zk_shared_count_get('$c', 0)");
	my $tries = 25;
	my $tag = 0;
	$_->start('SELECT race(' . "'$c', " . ++$tag . ", $tries)") for @s;
	my @won;
	for my $x (@s)
	{
		my $r = $x->result(120);
		is($r->{err}, '', $x->name . ' raced without error') or diag($r->{err});
		my @v = split ' ', $r->{out};
		note($x->name . " won versions @v");
		push @won, @v;
	}
	my ($value, $version) = peer_count($c);
	my %seen;
	my @dup = grep { $seen{$_}++ } @won;
	is("@dup", '', 'no version was won twice');
	is(scalar @won, $version, "the wins ($version) are the versions written: one winner per version");
	is(join(' ', sort { $a <=> $b } @won), join(' ', 0 .. $version - 1), 'every version from 0 was won once');
	cmp_ok($version, '>=', $tries, 'at least one write won per round');
	ok($value >= 1 && $value <= @s, "the value ($value) is a racer's");
	$_->quit for @s;
	$peer_b->quit;
	$node_b->stop;
};

subtest 'bad input and foreign nodes: clear errors, nothing left behind' => sub {
	my ($state) = psql_error($node, "SELECT zk_shared_count_get('/t190/bad/seed', -1)");
	is($state, '22023', 'a negative seed: 22023');
	is($peer->exists('/t190/bad/seed'), 0, '... and nothing is created');
	($state) = psql_error($node, "SELECT zk_shared_count_try_set('/t190/bad/v', 1, -1)");
	is($state, '22023', 'a negative version: 22023');
	($state) = psql_error($node, "SELECT zk_atomic_long_add('/t190/bad/n', NULL)");
	is($state, '22004', 'a NULL delta: 22004');
	($state) = psql_error($node,
		"SELECT zk_atomic_long_get('/t190/bad/_c_7c1a5f3e-1f9c-4b7c-9a51-0a2f6b1c3d4e-lock-0000000001')");
	is($state, '22023', 'a path naming a lock node: 22023');
	# three bytes of text: neither a SharedCount nor a DistributedAtomicLong
	$peer->cmd('count_set /t190/bad/text 1', qr/^countset|^error/);
	$peer->cmd('set /t190/bad/text abc', qr/^set |^nonode|^error/);
	($state) = psql_error($node, "SELECT zk_shared_count_get('/t190/bad/text')");
	is($state, '22P03', 'a node of 3 bytes read as a SharedCount: 22P03');
	($state) = psql_error($node, "SELECT zk_atomic_long_add('/t190/bad/text', 1)");
	is($state, '22P03', '... and as a DistributedAtomicLong: 22P03');
	is($peer->get('/t190/bad/text'), 'abc', '... and the node is left as it was');
	$peer->cmd('ephemeral /t190/bad/eph', qr/^ephemeral|^error/);
	($state) = psql_error($node, "SELECT zk_atomic_long_get('/t190/bad/eph')");
	is($state, '42809', 'an ephemeral node is not a counter: 42809');
	is(sql('SELECT count(*) FROM zk_locks'), '0', 'no request is left in zk_locks');
};

$peer->quit;
done_testing();

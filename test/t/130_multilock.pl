
# 130_multilock: all-or-nothing acquisition of several mutexes (Curator's
# InterProcessMultiLock).
#
# What users rely on: when one of the paths cannot be had in time, the call
# returns false and gives back every path it already took (nothing stays
# held, others can take them at once); while it waits it does hold the
# paths it got; a success holds them all; bad arrays are refused.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use ZklockTest;

my $zk = start_zk();
my $node = new_zklock_node('multilock', $zk);
require_functions($node, qw(zk_multi_lock_acquire zk_multi_lock_release));
my $peer = new_peer($zk);

my ($pa, $pb) = ('/t130/a', '/t130/b');
my $s1 = ZklockTest::Session->new($node, 's1');

# 1. The second path is held by Curator: false, and the first is given back.
subtest 'all or nothing: with the second path held elsewhere the call returns false and gives the first back' => sub {
	$peer->acquire('cb', $pb, -1);
	is($peer->acquire_result('cb'), 'acquired', 'Curator holds the second path');
	is($s1->value("SELECT zk_multi_lock_acquire(ARRAY['$pa', '$pb'], '800ms')"), 'f',
		'multi-lock with a timeout returns false');
	ok(wait_sql($node, 'SELECT count(*) FROM zk_locks', '0', 10), 'zk_locks: nothing left held or waiting');
	ok(wait_children_count($peer, $pa, 0), 'no node left on the first path');
	ok(wait_children_count($peer, $pb, 1), "only Curator's node on the second path");
	$peer->acquire('ca', $pa, 1000);
	is($peer->acquire_result('ca'), 'acquired', 'Curator can take the first path at once');
	is($peer->release('ca'), 'released', 'Curator releases the first path');
};

# 2. While waiting for the second path it holds the first; granted when
#    Curator releases; then holds both until released.
subtest 'while waiting for the second path it holds the first; granted, it holds both until released' => sub {
	$s1->start("SELECT zk_multi_lock_acquire(ARRAY['$pa', '$pb'])");
	ok(wait_held($node, $s1->pid, $pa), 'while waiting, s1 holds the first path');
	ok(wait_waiting($node, $s1->pid, $pb), '... and waits for the second');
	$peer->acquire('ca', $pa, 300);
	is($peer->acquire_result('ca'), 'timeout', 'Curator cannot take the first path meanwhile');
	is($peer->release('cb'), 'released', 'Curator releases the second path');
	my $r = $s1->result;
	is($r->{out}, 't', 'the multi-lock is granted') or diag($r->{err});
	is( $node->safe_psql('postgres', "SELECT string_agg(path || ':' || state, ',' ORDER BY path) FROM zk_locks"),
		"$pa:held,$pb:held", 'zk_locks: both paths held');
	$peer->acquire('cb', $pb, 300);
	is($peer->acquire_result('cb'), 'timeout', 'Curator is excluded from the second path');
	is($s1->value("SELECT zk_multi_lock_release(ARRAY['$pa', '$pb'])"), 't', 'multi-lock released');
	ok(wait_sql($node, 'SELECT count(*) FROM zk_locks', '0', 10), 'zk_locks empty');
	$peer->acquire('ca', $pa, 2000);
	is($peer->acquire_result('ca'), 'acquired', 'Curator takes the first path');
	$peer->acquire('cb', $pb, 2000);
	is($peer->acquire_result('cb'), 'acquired', 'and the second');
	is($peer->release($_), 'released', "$_ releases") for qw(ca cb);
};

# 3. The timeout covers the whole call: first path free, second held.
subtest 'the timeout covers the whole call' => sub {
	$peer->acquire('cb', $pb, -1);
	is($peer->acquire_result('cb'), 'acquired', 'Curator holds the second path again');
	my $t0 = Time::HiRes::time();
	is($s1->value("SELECT zk_multi_lock_acquire(ARRAY['$pa', '$pb'], '1s')"), 'f', 'false again');
	my $el = Time::HiRes::time() - $t0;
	cmp_ok($el, '>=', 0.95, "it waited the timeout ($el s)");
	cmp_ok($el, '<', 5, 'one timeout for the whole call');
	is($peer->release('cb'), 'released', 'Curator releases');
};

# 4. Bad arrays.
subtest 'bad arrays are refused with 22004/22023 and leave nothing' => sub {
	for my $case (
		[ 'NULL element', "ARRAY['$pa', NULL]" ],
		[ 'empty array', "ARRAY[]::text[]" ],
		[ 'duplicate path', "ARRAY['$pa', '$pb', '$pa']" ],
		[ 'NULL array', "NULL::text[]" ],
		[ 'two-dimensional array', "ARRAY[['$pa'], ['$pb']]" ])
	{
		my ($what, $arr) = @$case;
		my $r = $s1->query("SELECT zk_multi_lock_acquire($arr, '1s')");
		like($r->{sqlstate} // 'none', qr/^(22004|22023)$/, "$what: ERROR 22004/22023")
		  or diag("out=[$r->{out}] err=[$r->{err}]");
	}
	ok(wait_sql($node, 'SELECT count(*) FROM zk_locks', '0', 10), 'the refused calls left nothing in zk_locks');
	ok(wait_children_count($peer, $pa, 0) && wait_children_count($peer, $pb, 0), 'and no node');
};

$s1->quit;
$peer->quit;
$node->stop;
stop_zk($zk);
done_testing();

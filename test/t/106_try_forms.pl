
# 106_try_forms: the try forms of every lock and their _xact forms, and
# timeouts written as integer milliseconds.
#
# What users rely on: like pg_try_advisory_lock and
# pg_try_advisory_xact_lock, zk_read_lock_try_acquire,
# zk_write_lock_try_acquire, zk_semaphore_mutex_try_acquire and
# zk_semaphore_try_acquire (and zk_mutex_try_acquire) answer at once: true
# with the lock, or false (the semaphore: NULL) while a Curator peer holds
# the path, leaving no node behind; each has an _xact form whose lock is
# given back at COMMIT and at ROLLBACK.  Every timeout can be written as
# integer milliseconds (as lock_timeout): zk_mutex_acquire('/x', 10) is a
# call, not "function does not exist"; a negative one is the error a
# negative interval gets; '10 s' and NULL still mean what they meant.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use ZklockTest;

my $zk = start_zk();
my $node = new_zklock_node('tryforms', $zk);
require_functions($node, qw(zk_read_lock_try_acquire zk_read_lock_try_acquire_xact
	  zk_write_lock_try_acquire zk_write_lock_try_acquire_xact
	  zk_semaphore_mutex_try_acquire zk_semaphore_mutex_try_acquire_xact
	  zk_semaphore_try_acquire zk_semaphore_try_acquire_xact zk_mutex_try_acquire_xact));
my $peer = new_peer($zk);
my $s = ZklockTest::Session->new($node, 's');

# try($sql): the answer of a try form and how long it took, in seconds.
sub try
{
	my ($sql) = @_;
	my $t0 = time;
	my $r = $s->query("SELECT $sql");
	return ($r->{sqlstate} ? "error $r->{sqlstate}: $r->{err}" : $r->{out}, time - $t0);
}

# a false try: answered at once (well inside the few seconds a wait for
# the Curator holder would last: the holder never lets go) and leaving only
# $left nodes under $dir
sub refused
{
	my ($sql, $want, $dir, $left, $what) = @_;
	my ($out, $secs) = try($sql);
	is($out, $want, "$what: $sql answers $want");
	cmp_ok($secs, '<', 5, "$what: at once (${\ sprintf('%.2f', $secs)} s)");
	ok(wait_children_count($peer, $dir, $left), "$what: the try left no node under $dir");
}

subtest 'read and write try forms against Curator' => sub {
	my $p = '/t106/rw';
	$peer->lock('write', 'cw', $p, -1);
	is($peer->acquire_result('cw'), 'acquired', 'Curator takes the write lock');
	refused("zk_read_lock_try_acquire('$p')", 'f', $p, 1, 'Curator writes');
	refused("zk_write_lock_try_acquire('$p')", 'f', $p, 1, 'Curator writes');
	is($peer->release('cw', 'write'), 'released', 'Curator releases');
	ok(wait_children_count($peer, $p, 0), 'no node left');

	$peer->lock('read', 'cr', $p . 'r', -1);
	is($peer->acquire_result('cr'), 'acquired', 'Curator takes a read lock on another path');
	is((try("zk_read_lock_try_acquire('${p}r')"))[0], 't', 'a read try joins a Curator reader');
	refused("zk_write_lock_try_acquire('${p}r')", 'f', "${p}r", 2, 'Curator and SQL read');
	is($s->value("SELECT zk_read_lock_release('${p}r')"), 't', 'SQL releases its read lock');
	is($peer->release('cr', 'read'), 'released', 'Curator releases');

	is((try("zk_write_lock_try_acquire('$p')"))[0], 't', 'the write try takes the free lock');
	$peer->lock('read', 'cr2', $p, 500);
	is($peer->acquire_result('cr2'), 'timeout', 'a Curator reader is excluded');
	is($s->value("SELECT zk_write_lock_release('$p')"), 't', 'released');
	is((try("zk_read_lock_try_acquire('$p')"))[0], 't', 'the read try takes the free lock');
	$peer->lock('write', 'cw2', $p, 500);
	is($peer->acquire_result('cw2'), 'timeout', 'a Curator writer is excluded');
	refused("zk_write_lock_try_acquire('$p')", 'f', $p, 1,
		'its own read lock ahead (no upgrade, no wait)');
	is($s->value("SELECT zk_read_lock_release('$p')"), 't', 'released');
	ok(wait_children_count($peer, $p, 0), 'no node left');
};

subtest 'semaphore mutex and semaphore try forms against Curator' => sub {
	my $p = '/t106/semmutex';
	$peer->lock('semmutex', 'cs', $p, -1);
	is($peer->acquire_result('cs'), 'acquired', 'Curator takes the semaphore mutex');
	refused("zk_semaphore_mutex_try_acquire('$p')", 'f', "$p/leases", 1, 'Curator holds');
	ok(wait_children_count($peer, "$p/locks", 0), 'and nothing under locks');
	is($peer->release('cs', 'semmutex'), 'released', 'Curator releases');
	is((try("zk_semaphore_mutex_try_acquire('$p')"))[0], 't', 'the try takes the free semaphore mutex');
	$peer->lock('semmutex', 'cs2', $p, 500);
	is($peer->acquire_result('cs2'), 'timeout', 'Curator is excluded');
	is($s->value("SELECT zk_semaphore_mutex_release('$p')"), 't', 'released');

	my $q = '/t106/sem';
	$peer->lease('cl', $q, 2, 1, -1);
	is(ref $peer->lease_result('cl'), 'ARRAY', 'Curator takes 1 lease of 2');
	refused("zk_semaphore_try_acquire('$q', 2, 2) IS NULL", 't', "$q/leases", 1,
		'one lease of 2 left, 2 asked');
	my ($names) = try("array_length(zk_semaphore_try_acquire('$q', 2), 1)");
	is($names, '1', 'the try takes the lease left');
	refused("zk_semaphore_try_acquire('$q', 2) IS NULL", 't', "$q/leases", 2, 'both leases held');
	$peer->lease('cl2', $q, 2, 1, 500);
	is($peer->lease_result('cl2'), 'timeout', 'a Curator lease waits out its timeout');
	is($s->value("SELECT zk_semaphore_release_all('$q')"), '1', 'SQL returns its lease');
	is($peer->release('cl', 'lease'), 'released', 'Curator returns its lease');
	ok(wait_children_count($peer, "$q/leases", 0), 'no lease left');
};

subtest 'the try _xact forms hold until COMMIT or ROLLBACK' => sub {
	my @forms = (
		[ 'zk_mutex_try_acquire_xact', '/t106/x/m', 'mutex', 't' ],
		[ 'zk_read_lock_try_acquire_xact', '/t106/x/r', 'read', 't' ],
		[ 'zk_write_lock_try_acquire_xact', '/t106/x/w', 'write', 't' ],
		[ 'zk_semaphore_mutex_try_acquire_xact', '/t106/x/sm', 'semmutex', 't' ],
	);
	for my $end ('COMMIT', 'ROLLBACK')
	{
		$s->value('BEGIN');
		for my $f (@forms)
		{
			my ($fn, $p) = @$f;
			is($s->value("SELECT $fn('$p')"), 't', "$fn takes $p");
		}
		is($s->value(q{SELECT array_length(zk_semaphore_try_acquire_xact('/t106/x/s', 3, 2), 1)}), '2',
			'zk_semaphore_try_acquire_xact takes 2 leases');
		is($node->safe_psql('postgres',
				q{SELECT count(*) || ' ' || min(scope) || ' ' || max(scope) FROM zk_locks WHERE path LIKE '/t106/x/%' AND state = 'held'}),
			'6 xact xact', 'zk_locks: six holds of transaction scope (xact)');
		$peer->acquire('cx', '/t106/x/m', 300);
		is($peer->acquire_result('cx'), 'timeout', 'Curator cannot take the mutex meanwhile');
		$s->value($end);
		ok(wait_sql($node, q{SELECT count(*) FROM zk_locks WHERE path LIKE '/t106/x/%'}, '0'),
			"$end gives every one back")
		  or diag($node->safe_psql('postgres', 'SELECT * FROM zk_locks'));
		ok(wait_children_count($peer, '/t106/x/m', 0), "$end: no mutex node left");
		ok(wait_children_count($peer, '/t106/x/s/leases', 0), "$end: no lease left");
	}

	# a false try in a transaction: nothing held, nothing left
	$peer->acquire('cy', '/t106/x/m', -1);
	is($peer->acquire_result('cy'), 'acquired', 'Curator takes the mutex');
	$s->value('BEGIN');
	refused("zk_mutex_try_acquire_xact('/t106/x/m')", 'f', '/t106/x/m', 1, 'Curator holds');
	is($node->safe_psql('postgres', q{SELECT count(*) FROM zk_locks WHERE path = '/t106/x/m'}), '0',
		'zk_locks shows nothing for the false try');
	$s->value('COMMIT');
	is($peer->release('cy'), 'released', 'Curator releases');
};

subtest 'timeouts in integer milliseconds' => sub {
	my $p = '/t106/ms';
	is($s->value("SELECT zk_mutex_acquire('$p', 10000)"), 't',
		"zk_mutex_acquire('/x', 10000): milliseconds, a call (not 'function does not exist')");
	is($s->value("SELECT zk_mutex_release('$p')"), 't', 'released');
	$peer->acquire('cm', $p, -1);
	is($peer->acquire_result('cm'), 'acquired', 'Curator takes the mutex');
	my $t0 = time;
	is($s->value("SELECT zk_mutex_acquire('$p', 400)"), 'f', '400 ms against a Curator holder: false');
	my $secs = time - $t0;
	cmp_ok($secs, '>=', 0.4, sprintf('after its 400 ms (%.2f s)', $secs));
	cmp_ok($secs, '<', 5, '... milliseconds, not seconds');
	ok(wait_children_count($peer, $p, 1), 'the timed-out acquire left no node');
	is($s->value("SELECT zk_mutex_acquire('$p', '400 ms')"), 'f', "a quoted '400 ms' still is an interval");
	is($s->value("SELECT zk_mutex_acquire('$p', 400, true)"), 'f', 'with revocable after it');
	is($s->value("SELECT zk_read_lock_acquire('$p/rw', 0) AND zk_read_lock_release('$p/rw')"), 't',
		'0 ms is a try');
	is($s->value("SELECT zk_semaphore_acquire('$p/s', 1, 1, 300) IS NOT NULL"), 't', 'semaphore with ms');
	is($s->value("SELECT zk_semaphore_acquire_xact('$p/s', 1, 1, 300) IS NULL"), 't',
		'and a second lease of 1 waits its 300 ms');
	is($s->value("SELECT zk_semaphore_release_all('$p/s')"), '1', 'returned');
	is($s->value("SELECT zk_barrier_set('$p/b') AND NOT zk_barrier_wait('$p/b', 300)"), 't',
		'barrier_wait with ms times out on a set barrier');
	is($s->value("SELECT zk_barrier_remove('$p/b') AND zk_barrier_wait('$p/b', 300)"), 't',
		'and passes a removed one');
	is($s->value("SELECT zk_multi_lock_acquire(ARRAY['$p/a', '$p'], 300)"), 'f',
		'multi-lock with ms: false while Curator holds one');
	ok(wait_children_count($peer, "$p/a", 0), 'and its first mutex was given back');

	# a negative integer is the negative interval's error
	my $ri = $s->query("SELECT zk_mutex_acquire('$p', -1)");
	my $rv = $s->query("SELECT zk_mutex_acquire('$p', interval '-1 ms')");
	is($ri->{sqlstate}, '22023', 'a negative integer timeout is 22023');
	my ($mi) = $ri->{err} =~ /ERROR:\s+\S+\s+(.*)/;
	my ($mv) = $rv->{err} =~ /ERROR:\s+\S+\s+(.*)/;
	is($mi, $mv, "the negative interval's message: $mv");
	my $rt = $s->query("SELECT zk_mutex_acquire('$p', '-1 ms')");
	is($rt->{sqlstate}, '22023', 'so is a negative quoted interval');
	$rt = $s->query("SELECT zk_mutex_acquire('$p', 'soon')");
	is($rt->{sqlstate}, '22007', 'a quoted value that is no interval is the interval input error');
	is($peer->release('cm'), 'released', 'Curator releases');
	is($s->value("SELECT zk_mutex_acquire('$p', NULL) AND zk_mutex_release('$p')"), 't',
		'NULL still waits until granted (here at once)');
};

$s->quit;
$peer->quit;
$node->stop;
stop_zk($zk);
done_testing();

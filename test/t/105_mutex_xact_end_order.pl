
# 105_mutex_xact_end_order: what the next holder of an _xact lock, and PREPARE,
# can rely on.
#
# What users rely on:
#   1. The next holder finds the previous holder's transaction over.  An
#      _xact lock is released after PostgreSQL has released the
#      transaction's own locks (heavyweight and advisory), at COMMIT, at
#      ROLLBACK and at ROLLBACK TO SAVEPOINT: "I hold the mutex, so nothing
#      else of that job holds anything" — a backend granted the mutex never
#      finds the previous holder's advisory lock or table lock still held.
#      A: BEGIN; acquire_xact; pg_advisory_xact_lock(42); LOCK t; end
#      B: BEGIN; acquire_xact; pg_try_advisory_xact_lock(42);
#         LOCK t NOWAIT; COMMIT
#      run side by side (pgbench, 1,000 cycles each, for each way A ends):
#      B never misses either lock.
#   2. PREPARE TRANSACTION is refused (0A000) when the transaction relies
#      on a zklock lock — here a session lock taken in it under
#      zklock.check_session_locks_at_commit — since COMMIT PREPARED may run
#      after the lock was released and a Curator client took it: nothing
#      is prepared, and the row it wrote never becomes visible.
#   3. On a server that can prepare transactions (max_prepared_transactions
#      above 0, which the pg_regress suite's server, with PostgreSQL's
#      defaults, is not): a transaction holding an _xact lock is refused
#      PREPARE and nothing is prepared, its lock gone with it; a session
#      lock taken before the transaction does not stop PREPARE: the
#      transaction is prepared and committed, and the lock stays held
#      until it is released.  (The refusals' messages are checked by
#      sql/zklock_mutex.sql too.)
#
# Without the features: 1. the _xact hold was released from the
# transaction callback, before PostgreSQL released its locks; with the
# local handover B was granted within microseconds and its try of 42
# failed 3-20 times per 1,000 cycles.  2. PREPARE succeeded, the lock was
# released, Curator took it, and COMMIT PREPARED made the row visible.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use ZklockTest;

my $zk = start_zk();
my $node = new_zklock_node('xact_end', $zk, "max_prepared_transactions = 2\n");
my $peer = new_peer($zk);
$node->safe_psql('postgres', q{
	CREATE TABLE t(x int);
	CREATE TABLE misses(way text, what text);
	CREATE TABLE work_done(tag text);
	CREATE FUNCTION try_table_lock() RETURNS boolean LANGUAGE plpgsql AS $$
	BEGIN
		LOCK t IN EXCLUSIVE MODE NOWAIT;
		RETURN true;
	EXCEPTION WHEN lock_not_available THEN
		RETURN false;
	END $$;
});

# pgbench_run(name => script text, ...): run the scripts side by side,
# one client each, $cycles transactions each; returns pgbench's stderr.
sub pgbench_run
{
	my ($cycles, %scripts) = @_;
	my (@h, %err);
	for my $name (sort keys %scripts)
	{
		my $f = $node->basedir . "/$name.sql";
		open(my $fh, '>', $f) or die "$f: $!";
		print $fh $scripts{$name};
		close $fh;
		local %ENV = $node->_get_env();
		$err{$name} = '';
		push @h, IPC::Run::start(
			[
				$node->installed_command('pgbench'), '-n', '-c', '1', '-t', $cycles,
				'-f', $f, '-h', $node->host, '-p', $node->port, 'postgres'
			],
			'>', \my $out, '2>', \$err{$name}, IPC::Run::timeout(300));
	}
	$_->finish for @h;
	return join('', map { "[$_] $err{$_}" } sort keys %err);
}

my $b_script = q{
BEGIN;
SELECT zk_mutex_acquire_xact('/t105/m', '60s');
INSERT INTO misses SELECT :'way', 'advisory 42' WHERE NOT pg_try_advisory_xact_lock(42);
INSERT INTO misses SELECT :'way', 'table t' WHERE NOT try_table_lock();
COMMIT;
};

my %a_end = (
	commit => "BEGIN;\nSELECT zk_mutex_acquire_xact('/t105/m', '60s');\nSELECT pg_advisory_xact_lock(42);\nLOCK t IN EXCLUSIVE MODE;\nCOMMIT;\n",
	rollback => "BEGIN;\nSELECT zk_mutex_acquire_xact('/t105/m', '60s');\nSELECT pg_advisory_xact_lock(42);\nLOCK t IN EXCLUSIVE MODE;\nROLLBACK;\n",
	savepoint => "BEGIN;\nSAVEPOINT s;\nSELECT zk_mutex_acquire_xact('/t105/m', '60s');\nSELECT pg_advisory_xact_lock(42);\nLOCK t IN EXCLUSIVE MODE;\nROLLBACK TO SAVEPOINT s;\nCOMMIT;\n",
);
subtest 'the next holder never finds the previous _xact holder\'s advisory or table lock still held (COMMIT, ROLLBACK, ROLLBACK TO SAVEPOINT; local handover)' => sub {
	my $handovers0 = $node->safe_psql('postgres', 'SELECT handovers FROM zk_status()');
	for my $way (qw(commit rollback savepoint))
	{
		(my $b = $b_script) =~ s/:'way'/'$way'/g;
		my $err = pgbench_run(1000, a => $a_end{$way}, b => $b);
		unlike($err, qr/aborted|ERROR/, "$way: both pgbench clients ran 1,000 cycles without an error")
		  or diag($err);
		is($node->safe_psql('postgres', "SELECT count(*) FROM misses WHERE way = '$way'"), '0',
			"$way: B, holding the mutex, never found A's advisory or table lock still held");
		diag($node->safe_psql('postgres', "SELECT what, count(*) FROM misses WHERE way = '$way' GROUP BY 1"))
		  if $node->safe_psql('postgres', "SELECT count(*) FROM misses WHERE way = '$way'") ne '0';
	}
	cmp_ok($node->safe_psql('postgres', 'SELECT handovers FROM zk_status()') - $handovers0, '>', 0,
		'the mutex went from A to B by local handover (the fast path the order matters for)');
	ok(wait_until(sub { @{ lock_children($peer, '/t105/m') } == 0 }, 10), 'no node left under /t105/m');
};

my $p;    # the session of part 2

# 2. PREPARE TRANSACTION of a transaction relying on a session lock.
subtest 'PREPARE of a transaction relying on a session lock is refused, and its row never becomes visible' => sub {
	$p = ZklockTest::Session->new($node, 'p');
	$p->value('SET zklock.check_session_locks_at_commit = on');
	$p->value('BEGIN');
	is($p->value(q{SELECT zk_mutex_acquire('/t105/p')}), 't', 'p takes a session lock in its transaction');
	$p->value(q{INSERT INTO work_done VALUES ('prepared')});
	my $r = $p->query(q{PREPARE TRANSACTION 't064'});
	is($r->{sqlstate}, '0A000', 'PREPARE TRANSACTION is refused with 0A000') or diag($r->{err});
	like($r->{err}, qr/relies on a zookeeper lock/, '... saying that it relies on a zookeeper lock');
	is($node->safe_psql('postgres', q{SELECT count(*) FROM pg_prepared_xacts}), '0', '... nothing is prepared');
	is($p->value(q{SELECT zk_mutex_release('/t105/p')}), 't', 'p releases the session lock');
	$peer->acquire('cp', '/t105/p', 5000);
	is($peer->acquire_result('cp'), 'acquired', 'a Curator client takes /t105/p');
	$r = $node->psql('postgres', q{COMMIT PREPARED 't064'});
	isnt($r, 0, 'COMMIT PREPARED has nothing to commit');
	is($node->safe_psql('postgres', q{SELECT count(*) FROM work_done WHERE tag = 'prepared'}), '0',
		'the row written under the lock never becomes visible');
	$peer->release('cp');
};

# 3. PREPARE on a server that prepares transactions (from
#    sql/zklock_mutex.sql, whose server does not).
subtest 'an _xact lock refuses PREPARE, nothing prepared; a session lock taken before the transaction does not stop PREPARE and stays held' => sub {
	my $q = ZklockTest::Session->new($node, 'q');
	$q->value('BEGIN');
	is($q->value(q{SELECT zk_mutex_acquire_xact('/t105/x')}), 't', 'q takes an _xact lock in its transaction');
	my $r = $q->query(q{PREPARE TRANSACTION 't064x'});
	is($r->{sqlstate}, '0A000', 'PREPARE TRANSACTION is refused with 0A000') or diag($r->{err});
	like($r->{err}, qr/It holds a zklock transaction-level lock/, '... saying that it holds a transaction-level lock');
	is($node->safe_psql('postgres', q{SELECT count(*) FROM pg_prepared_xacts}), '0', '... nothing is prepared');
	is($q->value(q{SELECT count(*) FROM zk_locks WHERE pid = pg_backend_pid()}), '0',
		'the _xact lock went with the transaction');

	is($q->value(q{SELECT zk_mutex_acquire('/t105/s')}), 't', 'q takes a session lock, then begins a transaction');
	$q->value('BEGIN');
	$q->value(q{INSERT INTO work_done VALUES ('prepared-ok')});
	$r = $q->query(q{PREPARE TRANSACTION 't064s'});
	unlike($r->{err}, qr/ERROR/, 'PREPARE TRANSACTION succeeds: the transaction does not rely on the session lock')
	  or diag($r->{err});
	is($node->safe_psql('postgres', q{SELECT gid FROM pg_prepared_xacts}), 't064s', '... it is prepared');
	$r = $q->query(q{COMMIT PREPARED 't064s'});
	unlike($r->{err}, qr/ERROR/, 'COMMIT PREPARED commits it') or diag($r->{err});
	is($node->safe_psql('postgres', q{SELECT count(*) FROM work_done WHERE tag = 'prepared-ok'}), '1',
		'... its row is visible');
	is($q->value(q{SELECT path || ' ' || scope || ' ' || state FROM zk_locks WHERE pid = pg_backend_pid()}),
		'/t105/s session held', 'the session lock is still held');
	is($q->value(q{SELECT zk_mutex_release('/t105/s')}), 't', '... and released by zk_mutex_release');
	is($q->value(q{SELECT count(*) FROM zk_locks WHERE pid = pg_backend_pid()}), '0', 'q holds nothing');
	$q->quit;
	ok(wait_until(sub { @{ lock_children($peer, '/t105/x') } == 0 && @{ lock_children($peer, '/t105/s') } == 0 }, 10),
		'no node left under /t105/x or /t105/s');
};

$p->quit;
$peer->quit;
$node->stop;
done_testing();

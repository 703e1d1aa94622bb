
# 184_blockers: zklock's blockers where a DBA looks for them, and the
# worker's counters shaped like pg_stat_*.
#
# What users rely on:
#   1. zk_status().requests_queued counts requests only: a held leader
#      latch membership of scope 'cluster' (and one of scope 'session')
#      leaves it at 0 on a quiet system, while a waiting acquire counts;
#      doc/operations.md's alert queries run, and the one on queued
#      requests is quiet then;
#   2. zk_locks shows each lock's database and role (datid, datname,
#      usesysid, usename, as pg_stat_activity names them) and, for a
#      waiter, the pids it waits behind (blocking_pids: the holder, and a
#      waiter queued ahead), at once, long before deadlock_timeout
#      (waits_for is still NULL); zklock locks are cluster-wide: a session
#      of another database waits for the same path, and zk_locks read from
#      either database says the same; zk_blocking_pids(pid) says what
#      blocking_pids says, while pg_blocking_pids() sees nothing;
#      doc/operations.md's "who blocks whom" query shows the zklock blocker
#      and a PostgreSQL advisory lock blocker side by side; a reader waits
#      behind the writer that holds, a writer behind both, and a waiter
#      for a lease of a full semaphore behind every holder of a lease;
#   3. zk_stat_worker has the worker's counters and stats_reset;
#      zk_stat_reset() (superuser only) zeroes them and moves stats_reset,
#      while zk_status() keeps counting from the start; a later event
#      counts again from zero.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use ZklockTest;

my $path = '/t184/m';
my $zk = start_zk();
# deadlock_timeout far away: blocking_pids must not wait for it
my $node = new_zklock_node('blockers', $zk, "deadlock_timeout = '10min'\n");
$node->safe_psql('postgres', 'CREATE DATABASE other');
$node->safe_psql('other', 'CREATE EXTENSION zklock');
$node->safe_psql('postgres', 'CREATE ROLE alice LOGIN');
$node->safe_psql('postgres', 'GRANT zklock_user TO alice');

sub sql { my ($db, $q) = @_; return $node->safe_psql($db, $q); }

# ordered(@pids): the pids in ascending order, comma-separated
sub ordered { return join(',', sort { $a <=> $b } @_); }

# the SQL blocks of doc/operations.md's section $title (### heading)
sub doc_queries
{
	my ($title) = @_;
	my $doc = slurp_file("$ZklockTest::REPO/doc/operations.md");
	my ($section) = $doc =~ /^### \Q$title\E\n(.*?)(?=^#)/ms;
	die "no section '$title' in doc/operations.md" unless defined $section;
	my @q = $section =~ /^```sql\n(.*?)^```/msg;
	die "no SQL in section '$title'" unless @q;
	return @q;
}

############################################################################
# 1. requests_queued counts requests only
############################################################################
subtest 'requests_queued: a held cluster-scope leadership is no request, a waiting acquire is' => sub {
	my $sa = ZklockTest::Session->new($node, 'a');
	my $sb = ZklockTest::Session->new($node, 'b');
	is($sa->value(q{SELECT zk_leader_join('/t184/leader', 'cl', 'cluster')}), 't',
		'a cluster-scope membership is joined');
	ok(wait_until(sub { $sa->value(q{SELECT zk_has_leadership('/t184/leader')}) eq 't' }, 20, 'leadership'),
		'... and leads');
	is($sb->value(q{SELECT zk_leader_join('/t184/leader', 'se', 'session')}), 't',
		'a session-scope membership is joined behind it');
	is(sql('postgres', q{SELECT string_agg(scope || ':' || mode, ',' ORDER BY scope) FROM zk_locks WHERE path = '/t184/leader'}),
		'cluster:leader,session:member', 'zk_locks shows both memberships');
	is(sql('postgres', 'SELECT requests_queued FROM zk_status()'), '0',
		'requests_queued is 0 on a quiet system with the memberships held');
	for my $q (doc_queries('Alert queries'))
	{
		my ($rc, $out, $err) = $node->psql('postgres', $q);
		is($rc, 0, 'an alert query of doc/operations.md runs: ' . (split /\n/, $q)[0]) or diag($err);
		is($out, '', '... and is quiet') if $q =~ /requests_queued > 100/;
	}
	is($sa->value("SELECT zk_mutex_acquire('$path')"), 't', 'a takes the mutex');
	$sb->start("SELECT zk_mutex_acquire('$path')");
	ok(wait_waiting($node, $sb->pid, $path), 'b waits for it');
	is(sql('postgres', 'SELECT requests_queued FROM zk_status()'), '1', 'the waiting acquire counts');
	is($sa->value("SELECT zk_mutex_release('$path')"), 't', 'a releases');
	is($sb->result->{out}, 't', 'b gets it');
	is($sb->value("SELECT zk_mutex_release('$path')"), 't', 'b releases');
	is($sa->value(q{SELECT zk_leader_leave('/t184/leader')}), 't', 'the cluster membership is left');
	is($sb->value(q{SELECT zk_leader_leave('/t184/leader')}), 't', 'the session membership is left');
	ok(wait_no_zklock_rows($node, '/t184/leader'), 'no membership is left');
	$sa->quit;
	$sb->quit;
};

############################################################################
# 2. the database, the role and the blockers of each lock
############################################################################
subtest 'zk_locks: database, role and blocking_pids across databases; zk_blocking_pids; the doc query' => sub {
	my $sa = ZklockTest::Session->new($node, 'a');
	my $sb = ZklockTest::Session->new($node, 'b', dbname => 'other', user => 'alice');
	my $sc = ZklockTest::Session->new($node, 'c');
	my ($pa, $pb, $pc) = ($sa->pid, $sb->pid, $sc->pid);
	my $super = sql('postgres', 'SELECT current_user');
	is($sa->value("SELECT zk_mutex_acquire('$path')"), 't', 'a (database postgres) takes the mutex');
	$sb->start("SELECT zk_mutex_acquire('$path')");
	ok(wait_waiting($node, $pb, $path), 'b (database other, role alice) waits for the same path: one lock across databases');
	$sc->start("SELECT zk_mutex_acquire('$path')");
	ok(wait_waiting($node, $pc, $path), 'c (database postgres) waits behind b');

	my $rows = q{SELECT pid, state, datname, datid = (SELECT oid FROM pg_database WHERE datname = z.datname),
		usename, usesysid = (SELECT oid FROM pg_roles WHERE rolname = z.usename),
		blocking_pids, waits_for IS NULL
		FROM zk_locks z WHERE path = '/t184/m' ORDER BY since, pid};
	my $want = join("\n",
		"$pa|held|postgres|t|$super|t|{}|t",
		"$pb|waiting|other|t|alice|t|{$pa}|t",
		"$pc|waiting|postgres|t|$super|t|{" . join(',', ordered($pa, $pb)) . "}|t");
	is(sql('postgres', $rows), $want,
		'zk_locks: the holder blocks b; c waits behind both; each with its database and role; waits_for still NULL');
	is(sql('other', $rows), $want, 'zk_locks read from the other database says the same');
	is(sql('postgres', "SELECT zk_blocking_pids($pb)"), "{$pa}", 'zk_blocking_pids(b) is the holder');
	is(sql('other', "SELECT zk_blocking_pids($pc)"),
		'{' . ordered($pa, $pb) . '}', 'zk_blocking_pids(c) is the holder and b');
	is(sql('postgres', "SELECT zk_blocking_pids($pa)"), '{}', 'zk_blocking_pids of the holder is empty');
	is(sql('postgres', "SELECT pg_blocking_pids($pb)"), '{}', 'pg_blocking_pids cannot see the zklock wait');
	is(sql('postgres', q{SELECT zk_blocking_pids(NULL) IS NULL}), 't', 'zk_blocking_pids(NULL) is NULL');

	# a PostgreSQL lock wait beside it: a holds an advisory lock d waits for
	my $sd = ZklockTest::Session->new($node, 'd');
	$sa->value('SELECT pg_advisory_lock(184)');
	$sd->start('SELECT pg_advisory_lock(184)');
	ok(wait_sql($node, "SELECT wait_event_type FROM pg_stat_activity WHERE pid = " . $sd->pid, 'Lock'),
		'd waits for a advisory lock a holds');
	my ($q) = doc_queries('Who blocks whom');
	$q =~ s/;\s*$//;
	my $shown = sql('postgres', "SELECT waiting_pid, waiting_db, waiting_role, waits_on, blocking_pid, blocking_db, blocking_role FROM ($q) q");
	like($shown, qr/^$pb\|other\|alice\|zklock mutex \/t184\/m\|$pa\|postgres\|\Q$super\E$/m,
		"operations.md's query: b (other, alice) waits for the zklock mutex behind a (postgres)");
	like($shown, qr/^$pc\|postgres\|\Q$super\E\|zklock mutex \/t184\/m\|$pb\|other\|alice$/m,
		'... c behind b, queued ahead of it');
	like($shown, qr/^${\ $sd->pid}\|postgres\|\Q$super\E\|advisory ExclusiveLock\|$pa\|postgres\|/m,
		'... and d behind a for the advisory lock');
	is(sql('other', "SELECT count(*) FROM ($q) q"), '4', 'the query run in the other database shows the same 4 edges');
	$sa->value('SELECT pg_advisory_unlock(184)');
	my $r = $sd->result;
	ok($r->{done} && $r->{err} eq '', 'd gets the advisory lock');

	is($sa->value("SELECT zk_mutex_release('$path')"), 't', 'a releases the mutex');
	is($sb->result->{out}, 't', 'b gets it');
	is(sql('postgres', "SELECT zk_blocking_pids($pc)"), "{$pb}", 'c now waits behind b alone');
	is(sql('postgres', "SELECT blocking_pids FROM zk_locks WHERE pid = $pb"), '{}', 'b, holding, is blocked by nobody');
	is($sb->value("SELECT zk_mutex_release('$path')"), 't', 'b releases');
	is($sc->result->{out}, 't', 'c gets it');
	is($sc->value("SELECT zk_mutex_release('$path')"), 't', 'c releases');
	$_->quit for ($sa, $sb, $sc, $sd);
};

subtest 'blocking_pids of a read/write lock and of a semaphore' => sub {
	my ($w1, $r, $w2, $h1, $h2, $s3) =
	  map { ZklockTest::Session->new($node, $_) } qw(w1 r w2 h1 h2 s3);
	my ($rw, $sem) = ('/t184/rw', '/t184/sem');
	is($w1->value("SELECT zk_write_lock_acquire('$rw')"), 't', 'w1 takes the write lock');
	$r->start("SELECT zk_read_lock_acquire('$rw')");
	ok(wait_waiting($node, $r->pid, $rw), 'a reader waits');
	$w2->start("SELECT zk_write_lock_acquire('$rw')");
	ok(wait_waiting($node, $w2->pid, $rw), 'a second writer waits behind it');
	is(sql('postgres', 'SELECT zk_blocking_pids(' . $r->pid . ')'), '{' . $w1->pid . '}',
		'the reader waits behind the writer that holds');
	is(sql('postgres', 'SELECT zk_blocking_pids(' . $w2->pid . ')'), '{' . ordered($w1->pid, $r->pid) . '}',
		'the second writer waits behind the writer and the reader queued ahead');
	like($h1->value("SELECT zk_semaphore_acquire('$sem', 2)"), qr/^\{.+\}$/, 'h1 takes a lease of 2');
	like($h2->value("SELECT zk_semaphore_acquire('$sem', 2)"), qr/^\{.+\}$/, 'h2 takes the other');
	$s3->start("SELECT zk_semaphore_acquire('$sem', 2)");
	ok(wait_sql($node, "SELECT state FROM zk_locks WHERE path = '$sem' AND pid = " . $s3->pid, 'waiting'),
		's3 waits for a lease');
	ok(wait_sql($node, 'SELECT zk_blocking_pids(' . $s3->pid . ')', '{' . ordered($h1->pid, $h2->pid) . '}'),
		's3 waits behind both holders of a lease (either one lets it in)');
	is($w1->value("SELECT zk_write_lock_release('$rw')"), 't', 'w1 releases');
	is($r->result->{out}, 't', 'the reader gets the read lock');
	is($r->value("SELECT zk_read_lock_release('$rw')"), 't', 'the reader releases');
	is($w2->result->{out}, 't', 'the second writer gets the write lock');
	$h1->quit;
	like($s3->result->{out}, qr/^\{.+\}$/, 's3 gets a lease once h1 is gone');
	$_->quit for ($w1, $r, $w2, $h2, $s3);
	ok(wait_no_zklock_rows($node, $rw) && wait_no_zklock_rows($node, $sem), 'nothing is left');
};

############################################################################
# 3. zk_stat_worker and zk_stat_reset
############################################################################
subtest 'zk_stat_worker: the counters since stats_reset; zk_stat_reset for superusers only' => sub {
	my @cols = qw(connected_count suspended_count expired_count locks_lost
	  leases_expired handovers read_joins listings_skipped batches
	  batched_deletes batched_creates batches_failed cache_grants connection_attempts stats_reset);
	is(sql('postgres', q{SELECT string_agg(attname, ',' ORDER BY attnum) FROM pg_attribute WHERE attrelid = 'zk_stat_worker'::regclass AND attnum > 0}),
		join(',', @cols), 'zk_stat_worker has the counters and stats_reset');
	my $t0 = sql('postgres', 'SELECT stats_reset FROM zk_stat_worker');
	isnt($t0, '', 'stats_reset is set from the start');
	is(sql('postgres', 'SELECT connected_count >= 1 AND connected_count = (SELECT connected_count FROM zk_status()) FROM zk_stat_worker'),
		't', 'before any reset its counters are zk_status()\'s');
	my ($st) = psql_error($node, q{SET ROLE alice; SELECT zk_stat_reset()});
	is($st, '42501', 'a role that is not a superuser cannot reset');
	is(sql('postgres', q{SET ROLE alice; SELECT count(*) FROM zk_stat_worker}), '1', '... but reads the view');
	my $before = sql('postgres', 'SELECT connected_count FROM zk_status()');
	sql('postgres', 'SELECT zk_stat_reset()');
	is(sql('postgres', 'SELECT ' . join(' + ', @cols[ 0 .. $#cols - 1 ]) . ' FROM zk_stat_worker'), '0',
		'after zk_stat_reset() every counter is 0');
	is(sql('postgres', qq{SELECT stats_reset > '$t0' FROM zk_stat_worker}), 't', 'stats_reset moved');
	is(sql('postgres', 'SELECT connected_count FROM zk_status()'), $before, 'zk_status() keeps counting from the start');
	my ($old, $new) = restart_worker($node);
	isnt($new, '', "the worker is restarted ($old -> $new)");
	ok(wait_sql($node, 'SELECT connected_count FROM zk_stat_worker', '1'),
		'its connection counts 1 in zk_stat_worker');
	is(sql('postgres', 'SELECT connected_count FROM zk_status()'), $before + 1, '... and one more in zk_status()');
};

$node->stop;
stop_zk($zk);
done_testing();


# 602_deadlock_specs: PostgreSQL's five deadlock isolation specs, and
# cycles that mix zklock locks with PostgreSQL's, run with PostgreSQL's own
# isolation tester (issue 41, item 4).
#
# What users rely on: a cycle of waits through zklock locks, alone or with
# row, table and advisory locks and parallel workers, ends as PostgreSQL
# ends its own: exactly one session fails with 40P01 "deadlock detected"
# within deadlock_timeout + 2 s, and every other session completes, in a
# fixed order.
#
# How this file checks it:
#   - test/isolation/specs/: deadlock-simple, deadlock-hard, deadlock-soft,
#     deadlock-soft-2 and deadlock-parallel, PostgreSQL's specs with zklock
#     locks in place of table and advisory locks (each says what it adapts
#     and what it changes), and deadlock-mixed-kinds (a zklock mutex, a
#     row, a table and an advisory lock in one cycle), -mixed-upgrade (a
#     read->write upgrade against a row lock) and -mixed-semaphore
#     (semaphore mutexes, a waiter at each of their two steps);
#     test/isolation/expected/: what isolationtester prints for each.
#     Each spec gives its victim the shortest deadlock_timeout (1 s) and a
#     statement_timeout of deadlock_timeout + 2 s, so a cycle that is not
#     detected in time shows in the output as a statement timeout, not as
#     a hang; the other sessions' waits end after 15 s at most.
#   - PostgreSQL's isolationtester asks pg_isolation_test_session_is_blocked
#     whether a step waits, and that asks the lock manager only: it is
#     taught to see a zklock wait in the test database
#     (test/isolation/teach.sql; doc/testing.md), and the first subtest
#     checks that it does.
#   - pg_isolation_regress (shipped with postgresql-client-NN in
#     pgxs/src/test/isolation, as isolationtester) runs every spec against
#     this file's cluster (--use-existing); a spec whose output differs
#     fails with its diff shown.
#   - From outside: pg_stat_database.deadlocks of the test database grows
#     by exactly the number of 40P01 lines of the expected outputs (one
#     victim per spec).
# ZKLOCK_602_SPECS='deadlock-hard deadlock-soft' runs only the specs named.
# The isolation tester gives up on a step after PGISOLATIONTIMEOUT
# (PostgreSQL 15) or twice PG_TEST_TIMEOUT_DEFAULT (16 and later), set
# here to 20 s, so nothing hangs.
use strict;
use warnings;
use File::Basename qw(basename dirname);
use File::Path qw(rmtree);
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use ZklockTest;

my $DB = 'zklock_isolation';
my $ISO = "$ZklockTest::REPO/test/isolation";
# ZKLOCK_602_SPECS='deadlock-hard deadlock-soft' runs only those specs
my @specs = sort map { basename($_, '.spec') } glob("$ISO/specs/*.spec");
if ($ENV{ZKLOCK_602_SPECS})
{
	my %want = map { $_ => 1 } split ' ', $ENV{ZKLOCK_602_SPECS};
	@specs = grep { $want{$_} } @specs;
	BAIL_OUT("no spec of test/isolation/specs is named in ZKLOCK_602_SPECS") unless @specs;
}

# the victims the expected outputs show
my $victims = 0;
for my $spec (@specs)
{
	my $expected = slurp_file("$ISO/expected/$spec.out");
	$victims += () = $expected =~ /^ERROR:  deadlock detected$/mg;
}
note("specs: @specs; victims expected: $victims");

# pg_isolation_regress and isolationtester, beside pg_regress in pgxs
my $pgxs = `"$ZklockTest::PGBIN/pg_config" --pgxs`;
chomp $pgxs;
my $isolation_regress = dirname(dirname($pgxs)) . '/test/isolation/pg_isolation_regress';
-x $isolation_regress
  or BAIL_OUT("no $isolation_regress (postgresql-client-NN ships it; test/install-deps.sh installs that)");

my $zk = start_zk();
# the parallel spec runs two Gathers of three workers at once
my $node = new_zklock_node('specs', $zk, "max_worker_processes = 16\nmax_parallel_workers = 8\n");
$node->safe_psql('postgres', "CREATE DATABASE $DB");
$node->safe_psql($DB, 'CREATE EXTENSION zklock');
$node->safe_psql($DB, slurp_file("$ISO/teach.sql"));

my $deadlocks = "SELECT deadlocks FROM pg_stat_database WHERE datname = '$DB'";

############################################################################
# the tester is taught
############################################################################
subtest 'the isolation tester sees a zklock waiter as blocked, and only it' => sub {
	my $h = ZklockTest::Session->new($node, 'holder', dbname => $DB);
	my $w = ZklockTest::Session->new($node, 'waiter', dbname => $DB);
	my $pids = 'ARRAY[' . $h->pid . ', ' . $w->pid . ']';
	is($h->value(q{SELECT zk_mutex_acquire('/t602/teach', '20s')}), 't', 'holder takes /t602/teach');
	$w->start(q{SELECT zk_mutex_acquire('/t602/teach', '20s')});
	ok(wait_waiting($node, $w->pid, '/t602/teach'), 'waiter queues behind it');
	my $blocked = sub {
		my ($fn, $pid) = @_;
		return $node->safe_psql($DB, "SELECT $fn($pid, $pids)");
	};
	is($blocked->('zklock_test_lock_manager_blocked', $w->pid), 'f',
		'the lock manager alone does not see the zklock waiter');
	is($blocked->('pg_catalog.pg_isolation_test_session_is_blocked', $w->pid), 't',
		'the taught function sees it');
	is($blocked->('pg_catalog.pg_isolation_test_session_is_blocked', $h->pid), 'f',
		'the holder is not blocked');
	like($node->safe_psql($DB,
			'EXPLAIN (VERBOSE, COSTS OFF) SELECT pg_catalog.pg_isolation_test_session_is_blocked(1, ARRAY[1])'),
		qr/zklock_test_zklock_blocked/, 'the call is planned into the replacement (inlined)');
	is($h->value(q{SELECT zk_mutex_release('/t602/teach')}), 't', 'holder releases');
	my $r = $w->result(20);
	is($r->{out}, 't', 'waiter gets the lock') or diag($r->{err});
	is($blocked->('pg_catalog.pg_isolation_test_session_is_blocked', $w->pid), 'f',
		'a holder that was granted is not blocked');
	is($w->value(q{SELECT zk_mutex_release('/t602/teach')}), 't', 'waiter releases');
	$_->quit for ($h, $w);
};

############################################################################
# the specs
############################################################################
my $before = $node->safe_psql('postgres', $deadlocks);
my $out = "$PostgreSQL::Test::Utils::tmp_check/isolation";
rmtree($out);
mkdir $out or die "mkdir $out: $!";
my ($stdout, $stderr) = ('', '');
my $t0 = time;
my $ran;
{
	# a step still running after 20 s is cancelled, after 40 s the tester
	# gives up (PostgreSQL 15 reads the first, 16 and later the second)
	local $ENV{PGISOLATIONTIMEOUT} = 20;
	local $ENV{PG_TEST_TIMEOUT_DEFAULT} = 10;
	$ran = IPC::Run::run(
		[
			$isolation_regress, '--use-existing',
			'--host=' . $node->host, '--port=' . $node->port,
			"--dbname=$DB", "--inputdir=$ISO", "--outputdir=$out",
			"--bindir=$ZklockTest::PGBIN", @specs
		],
		'>', \$stdout, '2>', \$stderr,
		IPC::Run::timeout(150));
}
my $elapsed = time - $t0;
note($stdout);
note(sprintf('pg_isolation_regress took %.1f s', $elapsed));
diag("pg_isolation_regress: $stderr") if $stderr ne '';

subtest 'every spec prints what its expected output says' => sub {
	ok($ran, 'pg_isolation_regress passes') or diag($stdout);
	for my $spec (@specs)
	{
		my $result = "$out/results/$spec.out";
		my $got = -f $result ? slurp_file($result) : '';
		my $want = slurp_file("$ISO/expected/$spec.out");
		next if ok($got eq $want, "$spec: the tester's output is the expected one");
		my ($diff, $err) = ('', '');
		IPC::Run::run([ 'diff', '-U3', "$ISO/expected/$spec.out", $result ], '>', \$diff, '2>', \$err);
		diag("$spec: expected (-) against the tester's output (+):\n$diff$err");
	}
};

subtest 'pg_stat_database.deadlocks counts exactly one victim per spec' => sub {
	# a backend's counts reach the view at the latest when it exits: wait
	# until the tester's sessions are gone, then for the count
	my $want = $before + $victims;
	ok(wait_sql($node, "SELECT count(*) FROM pg_stat_activity WHERE datname = '$DB'", '0', 15),
		'the sessions of the specs have exited');
	ok(wait_until(sub { $node->safe_psql('postgres', $deadlocks) >= $want }, 10,
			"deadlocks >= $want"), "deadlocks grew by $victims");
	is($node->safe_psql('postgres', $deadlocks) - $before, $victims,
		"exactly $victims: no session but each spec's victim failed with 40P01");
};

$node->stop;
stop_zk($zk);
done_testing();

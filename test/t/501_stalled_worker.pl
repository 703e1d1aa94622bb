
# 501_stalled_worker: a stalled worker never hangs a backend.
#
# What users rely on: whatever the zklock worker does — stopped by a
# debugger or SIGSTOP, blocked writing its log — a backend's zklock call
# ends the way every PostgreSQL wait ends: statement_timeout and
# pg_cancel_backend cancel it, pg_terminate_backend (and so a fast
# shutdown) ends the backend, COMMIT of a transaction holding an _xact
# lock returns (its release does not wait for the worker), and a call
# with no timeout fails with 08006 once the worker's lease has run out
# for zklock.connect_timeout.  When the
# worker runs again, what those backends held or waited for is given back
# and nothing is left in ZooKeeper.
#
# The fault: 24 pgbench clients acquire and release one path, so the
# worker spends much of its time inside the shared table's lock; the test
# stops it (SIGSTOP) and checks, from a fresh session with a 1 s
# statement_timeout, whether it stopped inside the lock (zk_status() then
# cannot read the table); if not, it continues it and tries again, for at
# most 90 s.  The checks below run only on a stop that landed inside the
# lock.  The chance that a stop lands there is the share of its time the
# worker spends in the lock, which falls with the rate of requests that
# pgbench gets through: on an idle machine a few dozen tries suffice, on a
# loaded one (another test beside this one) a hundred tries often did not.
#
# Without the feature: backends waited for the shared lock with
# LWLockAcquire, which ignores cancel and terminate: zk_status() ignored
# its statement_timeout, the cancelled waiter, the terminated pgbench
# backends and the COMMIT all stayed stuck until the worker was continued.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use IPC::Run;
use ZklockTest;

my $hot = '/t501/hot';
my $zk = start_zk();
my $node = new_zklock_node('stalled', $zk, "max_connections = 40\nzklock.connect_timeout = '2s'\n");
my $peer = new_peer($zk);
$node->safe_psql('postgres', 'CREATE TABLE work_done(tag text)');

# The load: pgbench clients on one path.
my $script = $node->basedir . '/hot.sql';
open(my $fh, '>', $script) or die "$script: $!";
print $fh "SELECT zk_mutex_acquire('$hot', '30s');\nSELECT zk_mutex_release('$hot');\n";
close $fh;
my ($pb_out, $pb_err) = ('', '');
my $pgbench;
{
	local %ENV = $node->_get_env(PGAPPNAME => 'pgbench');
	$pgbench = IPC::Run::start(
		[
			$node->installed_command('pgbench'), '-n', '-c', '24', '-j', '2', '-T', '120',
			'-f', $script, '-h', $node->host, '-p', $node->port, 'postgres'
		],
		'>', \$pb_out, '2>', \$pb_err, IPC::Run::timeout(180));
}
ok(wait_sql($node, q{SELECT count(*) >= 24 FROM pg_stat_activity WHERE application_name = 'pgbench'}, 't', 30),
	'24 pgbench clients run acquire/release on one path')
  or BAIL_OUT("no load: $pb_err");

# S holds an _xact lock on its own path; W waits behind Curator on another.
my $s = ZklockTest::Session->new($node, 's');
$s->value('BEGIN');
is($s->value(q{SELECT zk_mutex_acquire_xact('/t501/s')}), 't', 's holds /t501/s for its transaction');
$s->value(q{INSERT INTO work_done VALUES ('s')});
$peer->acquire('cw', '/t501/w', 5000);
is($peer->acquire_result('cw'), 'acquired', 'Curator holds /t501/w');
my $w = ZklockTest::Session->new($node, 'w');
$w->start(q{SELECT zk_mutex_acquire('/t501/w')});
ok(wait_waiting($node, $w->pid, '/t501/w'), 'w waits for /t501/w behind Curator');

my $worker = worker_pid($node);
like($worker, qr/^\d+$/, 'the zklock worker runs');

# zk_status() in the probe session (statement_timeout 1 s), bounded at
# 15 s from outside: (sqlstate, seconds taken); sqlstate '' when it
# worked, 'hung' when it had not ended after 15 s.
my $probe = ZklockTest::Session->new($node, 'probe');
$probe->value(q{SET statement_timeout = '1s'});
sub timed_status
{
	my $t0 = time;
	$probe->start(q{SELECT state FROM zk_status()});
	my $r = $probe->result(15);
	my $took = time - $t0;
	return (!$r->{done} ? 'hung' : ($r->{sqlstate} // ''), $took);
}

my ($landed, $rounds, $state, $took) = (0, 0);
my $give_up = time + 90;
while (!$landed && time < $give_up)
{
	$rounds++;
	kill('STOP', $worker) or die "kill STOP $worker: $!";
	usleep(20_000);
	($state, $took) = timed_status();
	if ($state eq '')
	{
		kill('CONT', $worker);
		usleep(20_000 + int(rand(50_000)));
		next;
	}
	$landed = 1;
}
note("stopped the worker inside the shared lock after $rounds rounds") if $landed;
ok($landed, "the worker was stopped while it held the shared lock (within 90 s: $rounds tries)");

my $commit_state = 'not run';
if ($landed)
{
	is($state, '57014', 'zk_status() is ended by its statement_timeout (57014)');
	cmp_ok($took, '<', 5, sprintf('... within 5 s (%.1f s)', $took));

	# the waiter: pg_cancel_backend ends its wait
	my $c = $node->safe_psql('postgres', 'SELECT pg_cancel_backend(' . $w->pid . ')');
	my $r = $w->result(5);
	ok($r->{done} && ($r->{sqlstate} // '') eq '57014', 'the waiter w is cancelled (57014) within 5 s')
	  or diag(explain $r);

	# S's COMMIT returns: its release does not wait for the worker
	my $t0 = time;
	$s->start('COMMIT');
	$r = $s->result(5);
	ok($r->{done}, sprintf("s's COMMIT returns within 5 s (%.1f s): %s", time - $t0, $r->{err} // ''));
	$commit_state = $r->{done} ? ($r->{sqlstate} // 'ok') : 'hung';

	# pg_terminate_backend ends every pgbench backend
	my @pids = split /\n/, $node->safe_psql('postgres',
		q{SELECT pid FROM pg_stat_activity WHERE application_name = 'pgbench'});
	$node->safe_psql('postgres', "SELECT pg_terminate_backend($_)") for @pids;
	my $gone = wait_sql($node,
		q{SELECT count(*) FROM pg_stat_activity WHERE application_name = 'pgbench'}, '0', 5);
	ok($gone, scalar(@pids) . ' pgbench backends are gone within 5 s of pg_terminate_backend');

	# a new zklock call is ended by its statement_timeout too
	my $n = ZklockTest::Session->new($node, 'n');
	$n->value(q{SET statement_timeout = '1s'});
	$t0 = time;
	$n->start(q{SELECT zk_mutex_acquire('/t501/n')});
	$r = $n->result(10);
	ok($r->{done} && ($r->{sqlstate} // '') eq '57014',
		sprintf('a new zk_mutex_acquire is ended by statement_timeout (%.1f s)', time - $t0))
	  or diag(explain $r);
	$n->quit if $r->{done};

	# without any timeout: once the lease has run out (a 10 s session less
	# the 1 s margin, from the last proof before the stop), the wait fails
	# with 08006 after zklock.connect_timeout (2 s)
	my $z = ZklockTest::Session->new($node, 'z');
	$t0 = time;
	$z->start(q{SELECT zk_mutex_acquire('/t501/z')});
	$r = $z->result(25);
	ok($r->{done} && ($r->{sqlstate} // '') eq '08006',
		sprintf('an acquire with no timeout fails with 08006 once the lease ran out (%.1f s)', time - $t0))
	  or diag(explain $r);
	$z->quit if $r->{done};

	# still stopped all along
	my $st = (split /\s+/, `ps -o stat= -p $worker 2>/dev/null`)[0] // '';
	like($st, qr/^T/, 'the worker was stopped throughout');
}
kill('CONT', $worker);

# The worker runs again: everything given back, nothing left behind.
eval { $pgbench->finish; 1 } or eval { $pgbench->kill_kill; };
$probe->result(30) if $state eq 'hung';
my $r = $w->done ? undef : $w->result(30);
ok(wait_sql($node, q{SELECT count(*) FROM zk_locks WHERE path IN ('/t501/hot', '/t501/s', '/t501/w')}, '0', 30),
	'zk_locks lists nothing of the stopped round once the worker runs');
is($peer->release('cw'), 'released', 'Curator releases /t501/w');
for my $p ($hot, '/t501/s', '/t501/w')
{
	ok(wait_until(sub { @{ lock_children($peer, $p) } == 0 }, 30), "no node left under $p");
}
$peer->acquire('ch', $hot, 5000);
is($peer->acquire_result('ch'), 'acquired', 'Curator acquires the hot path');
$peer->release('ch');
# COMMIT commits while the lease still proves the session alive, and fails
# with 40000 once it ran out: the row follows what COMMIT said.
$s->result(30) if $commit_state eq 'hung';
is($node->safe_psql('postgres', q{SELECT count(*) FROM work_done WHERE tag = 's'}),
	$commit_state eq 'ok' ? '1' : '0',
	"s's row is committed exactly when its COMMIT succeeded ($commit_state)");

$_->quit for ($s, $w, $probe);
$peer->quit;
$node->stop;
done_testing();

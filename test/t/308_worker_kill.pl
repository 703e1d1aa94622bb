
# 308_worker_kill: crashes and shutdowns release the cluster's locks quickly.
#
# What users rely on: when PostgreSQL crash-restarts (the zklock worker or
# any backend killed with SIGKILL) or is shut down, the locks its backends
# held do not stay blocked in ZooKeeper until the session times out (30 s
# here, often minutes in production): the restarted worker closes the
# previous session at once, and a shutdown closes it on the way out, so
# every node of the old session is gone within a few seconds and another
# client can take the locks.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use ZklockTest;
use ZklockFault;

my $bound = 5;    # seconds after the cluster is back (session timeout: 30 s)

my $zk = start_zk();
my $node = new_zklock_node('kill', $zk,
	"zklock.session_timeout = '30s'\nrestart_after_crash = on\n");
my $peer = new_peer($zk);
is(status_row($node)->{session_timeout}, 30000, 'negotiated session timeout is 30 s');

# The crash-restart session close needs the session in $PGDATA/zklock.session.
ok(defined((session_file($node))[0]), 'the worker keeps its session in $PGDATA/zklock.session');

# hold($tag, @paths): a fresh session holding each path, and the nodes it
# created as Curator lists them.
sub hold
{
	my ($tag, @paths) = @_;
	my $s = ZklockTest::Session->new($node, $tag);
	my %nodes;
	for my $p (@paths)
	{
		is($s->value("SELECT zk_mutex_acquire('$p')"), 't', "$tag holds $p");
		$nodes{$p} = lock_children($peer, $p);
		is(scalar @{ $nodes{$p} }, 1, "one node under $p");
	}
	return ($s, \%nodes);
}

# crash_case($what, $kill_sub, @paths): hold @paths, crash, measure how long
# after the cluster is back the old nodes are gone, then check that Curator
# can take the locks and that zklock works on its new session.
sub crash_case
{
	my ($what, $kill, @paths) = @_;
	my ($s, $nodes) = hold($what, @paths);
	my $old_session = status_row($node)->{session_id};
	my $old_worker = worker_pid($node);

	my $log_from = -s $node->logfile;
	$kill->($s);
	ok(wait_back($node, 60, $log_from), "$what: the cluster is back after the crash-restart");
	my $t_back = time;
	isnt(worker_pid($node), $old_worker, "$what: a new worker runs");

	my $gone_in;
	{
		my $gone = wait_until(
			sub {
				for my $p (@paths)
				{
					return 0 if @{ lock_children($peer, $p) };
				}
				return 1;
			},
			$bound, "the old session's nodes to go");
		$gone_in = time - $t_back;
		ok($gone, sprintf("$what: every node of the old session is gone %.1f s after the cluster is back (bound %d s)",
				$gone_in, $bound));
	}
	$peer->acquire("c-$what", $paths[0], 5000);
	is($peer->acquire_result("c-$what"), 'acquired', "$what: Curator takes $paths[0]");
	is($peer->release("c-$what"), 'released', "$what: Curator releases it");

	ok(wait_connected($node, 20), "$what: zklock is connected again");
	my $new_session = status_row($node)->{session_id};
	isnt($new_session, $old_session, "$what: on a new session ($new_session)");
	is($node->safe_psql('postgres', 'SELECT count(*) FROM zk_locks'), '0',
		"$what: zk_locks starts empty after the crash-restart");
	my $t = ZklockTest::Session->new($node, "after-$what");
	is($t->value("SELECT zk_mutex_acquire('$paths[0]', '5s')"), 't', "$what: new acquires work");
	is($t->value("SELECT zk_mutex_release('$paths[0]')"), 't', "$what: and release");
	$t->quit;
	$s->quit;
	ok(wait_children_count($peer, $paths[0], 0), "$what: nothing left under $paths[0]");
	return;
}

# 1. SIGKILL of the zklock worker: the postmaster crash-restarts everything.
subtest 'SIGKILL of the zklock worker: the crash-restart releases the cluster\'s locks at once' => sub {
	crash_case('worker-SIGKILL', sub { kill('KILL', worker_pid($node)) },
		'/t308/w1', '/t308/w2');
};

# 2. SIGKILL of a backend (here: the holder itself).
subtest 'SIGKILL of a holding backend: the crash-restart releases the cluster\'s locks at once' => sub {
	crash_case('backend-SIGKILL', sub { kill('KILL', $_[0]->pid) },
		'/t308/b1', '/t308/b2');
};

# 3. SIGKILL of an unrelated backend that holds nothing.
subtest 'SIGKILL of a backend holding nothing: the same' => sub {
	my $bystander = ZklockTest::Session->new($node, 'bystander');
	crash_case('bystander-SIGKILL', sub { kill('KILL', $bystander->pid) }, '/t308/x1');
	$bystander->quit;
};

# No crash happened without being noticed in the log (sanity: the crash
# cases above really were crash-restarts).
subtest 'the server log shows the three crash-restarts' => sub {
	my $log = log_contents($node);
	my $n_crash = () = $log =~ /terminated by signal 9/g;
	cmp_ok($n_crash, '>=', 3, "the server log shows the three SIGKILLs ($n_crash)");
};

# 4. pg_ctl stop -m fast while a lock is held: nodes gone within a few
#    seconds of the stop.
subtest 'pg_ctl stop -m fast while a lock is held: its nodes go within seconds of the stop' => sub {
	{
		my ($s, $nodes) = hold('fast-stop', '/t308/f1', '/t308/f2');
		$node->stop('fast');
		my $t_stop = time;
		{
			ok( wait_until(
					sub { !grep { @{ lock_children($peer, $_) } } ('/t308/f1', '/t308/f2') },
					$bound, 'nodes to go after the fast shutdown'),
				sprintf('fast shutdown: nodes gone %.1f s after pg_ctl stop returned', time - $t_stop));
		}
		$peer->acquire('c-fast', '/t308/f1', 5000);
		is($peer->acquire_result('c-fast', 40), 'acquired', 'fast shutdown: Curator takes the lock');
		is($peer->release('c-fast'), 'released', 'and releases it');
	}

};
$peer->quit;
stop_zk($zk);
done_testing();

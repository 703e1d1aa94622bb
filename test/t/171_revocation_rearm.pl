
# 171_revocation_rearm: a revocable lock hears a revocation request also after
# the zklock worker was restarted, and after its watch could not be set.
#
# What users rely on: a SQL session holding a revocable lock (mutex or
# write lock, revocable => true) learns — through zk_revocation_requested()
# and zk_locks.revocation_requested — that a Curator client asked for it
# (Revoker.attemptRevoke writes "__REVOKE__" into the holder's node).  The
# worker sees that through a getData watch on the node.  That watch lives
# in the worker's ZooKeeper connection: when the worker is restarted (the
# postmaster starts a new one, which resumes the same session) the watch is
# gone with the old process, and when a getData fails no watch is set at
# all.  In both cases the worker must watch (and read) the node again, or
# the holder never hears the request.
#
# Cases:
#   1. control: revocation seen without any fault;
#   2. the worker is restarted (SIGTERM) while a revocable mutex and a
#      revocable write lock are held; Curator then revokes both;
#   3. the worker's getData on the node fails once: the holder's node is
#      made unreadable (ACL world:anyone:wa) and the worker restarted, so
#      the getData with which the new worker arms the watch fails with
#      NOAUTH (the log says so); the ACL is opened again, Curator revokes,
#      and the connection is cut (TCP proxy) so that the worker resumes its
#      session and looks at every lock again.
# Without the re-arm, zk_revocation_requested() stays empty in cases 2 and
# 3 (wait_requested times out): nothing watches the node any more and the
# request written into it is never read.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use ZklockTest;
use ZklockFault;
use ZklockProxy;

my $zk = start_zk();
my $proxy = ZklockProxy->start($zk);
# The worker reaches ZooKeeper through the proxy (case 3 cuts it); Curator
# and ZkTool talk to ZooKeeper directly.
# (session timeout 20 s: the fault of case 3 drops replies for a second or two)
my $node = new_zklock_node('revoke_rearm', $proxy->connect,
	"zklock.session_timeout = '20s'\nzklock.connect_timeout = '30s'\n");
my $peer = new_peer($zk);

# requested($s): the paths zk_revocation_requested() lists in session $s.
sub requested
{
	my ($s) = @_;
	return $s->value(q{SELECT coalesce(string_agg(r, ',' ORDER BY r), '') FROM zk_revocation_requested() r});
}

# wait_requested($s, $expected): bounded wait until requested($s) is $expected.
sub wait_requested
{
	my ($s, $expected, $timeout) = @_;
	my $last;
	my $ok = wait_until(sub { $last = requested($s); $last eq $expected },
		$timeout // 10, "revocation of $expected");
	diag('zk_revocation_requested() in ' . $s->name . ": [$last]") unless $ok;
	return $ok;
}

# flags($path): "state|revocation_requested" (t/f) of the zk_locks row of $path.
sub flags
{
	my ($path) = @_;
	return $node->safe_psql('postgres',
		"SELECT state, revocation_requested FROM zk_locks WHERE path = '$path'");
}

my $n_try = 0;

# curator_excluded($path): a Curator acquire with a short timeout times out
# (the revocation is a request: the holder keeps the lock).
sub curator_excluded
{
	my ($path) = @_;
	my $id = 'c' . ++$n_try;
	$peer->acquire($id, $path, 500);
	return ($peer->acquire_result($id) // '') eq 'timeout';
}

my ($s1, $s2, $pc, $pm, $pw, $session, $old, $new);    # shared by the parts below and the end

############################################################################
# 1. Control: no fault.
############################################################################
subtest 'control: a revocation is seen without any fault' => sub {
	$s1 = ZklockTest::Session->new($node, 's1');
	$pc = '/t171/control';
	is($s1->value("SELECT zk_mutex_acquire('$pc', NULL, true)"), 't', 's1 holds a revocable mutex');
	my $nc = zk_lock_rows($node, $pc)->{ $s1->pid }{node};
	is(requested($s1), '', 'no revocation requested yet');
	ok($peer->revoke("$pc/$nc"), 'Curator revokes it');
	ok(wait_requested($s1, $pc), 'zk_revocation_requested() lists it');
	is(flags($pc), 'held|t', 'zk_locks: held, revocation_requested');
	is($s1->value("SELECT zk_mutex_release('$pc')"), 't', 's1 releases');
};

############################################################################
# 2. The worker is restarted while revocable locks are held.
############################################################################
subtest 'a revocation is still seen after a worker restart' => sub {
	$s2 = ZklockTest::Session->new($node, 's2');
	($pm, $pw) = ('/t171/mutex', '/t171/write');
	is($s2->value("SELECT zk_mutex_acquire('$pm', NULL, true)"), 't', 's2 holds a revocable mutex');
	is($s2->value("SELECT zk_write_lock_acquire('$pw', NULL, true)"), 't', 's2 holds a revocable write lock');
	my $nm = zk_lock_rows($node, $pm)->{ $s2->pid }{node};
	my $nw = zk_lock_rows($node, $pw)->{ $s2->pid }{node};
	like($nw, qr/__WRIT__/, "the write lock's node is $nw");

	$session = status_row($node)->{session_id};
	$old = worker_pid($node);
	ok(kill('TERM', $old), "SIGTERM to the worker (pid $old)");
	ok(wait_until(sub { $new = worker_pid($node); $new ne '' && $new ne $old }, 20, 'a new worker'),
		'the postmaster started a new worker');
	ok(wait_connected($node, 20), "the new worker (pid $new) is connected");
	is(status_row($node)->{session_id}, $session, "... in the same ZooKeeper session $session");
	is(flags($pm), 'held|f', 'the mutex is still held, no revocation requested');
	is(flags($pw), 'held|f', 'the write lock is still held, no revocation requested');

	ok($peer->revoke("$pm/$nm"), 'Curator revokes the mutex');
	ok($peer->revoke("$pw/$nw"), 'Curator revokes the write lock');
	is($peer->get("$pm/$nm"), '__REVOKE__', "the mutex node holds Curator's revocation message");
	ok(wait_requested($s2, "$pm,$pw"), 'zk_revocation_requested() lists both after the worker restart');
	is(flags($pm), 'held|t', 'zk_locks: the mutex is held, revocation_requested');
	is(flags($pw), 'held|t', 'zk_locks: the write lock is held, revocation_requested');
	ok(curator_excluded($pm), 'the mutex is not released behind the holder\'s back');
	is($s2->value("SELECT zk_mutex_release('$pm')"), 't', 's2 releases the mutex');
	is($s2->value("SELECT zk_write_lock_release('$pw')"), 't', 's2 releases the write lock');
};

############################################################################
# 3. The worker's getData on the node fails once (NOAUTH).
#
# The getData is made to fail where the worker arms the watch: a restarted
# worker arms it for every revocable lock it takes over.  s3 holds a
# revocable mutex; its node's ACL is set to world:anyone:wa (nobody may
# read it) and the worker is restarted: the new worker's getData fails with
# NOAUTH (logged).  The ACL is opened again, Curator revokes, and the
# connection is cut: the worker resumes its session and looks at every lock
# again, reading the node this time.  (Denying READ while the watch is
# armed does not work: a ZooKeeper with the fix of CVE-2024-23944 then
# suppresses the notification instead of letting a read fail.  And an
# adopted node cannot be used on ZooKeeper 3.9, whose exists also checks
# READ.)
############################################################################
subtest 'a revocation is still seen after a failed read of the node' => sub {
	my $s3 = ZklockTest::Session->new($node, 's3');
	my $pa = '/t171/acl';
	is($s3->value("SELECT zk_mutex_acquire('$pa', NULL, true)"), 't', 's3 holds a revocable mutex');
	my $na = zk_lock_rows($node, $pa)->{ $s3->pid }{node};
	my ($rc, $lines) = zktool('setacl', $zk, "$pa/" . ($na // 'none'), 'wa');
	is($lines->[0], "setacl $pa/" . ($na // 'none'), "the node's ACL is now world:anyone:wa (nobody may read it)");
	my $log_at = -s $node->logfile;
	$old = worker_pid($node);
	ok(kill('TERM', $old), "SIGTERM to the worker (pid $old)");
	ok(wait_until(sub { $new = worker_pid($node); $new ne '' && $new ne $old }, 20, 'a new worker'),
		'the postmaster started a new worker');
	ok(wait_connected($node, 20), "the new worker (pid $new) is connected");
	is(status_row($node)->{session_id}, $session, "... in the same ZooKeeper session $session");
	my $failed;
	ok( wait_until(
			sub {
				my $l = substr(slurp_file($node->logfile), $log_at);
				$failed = $1 if $l =~ /(cannot watch lock node of "[^"]*\Q$pa\E" for revocation: [^\n]*)/;
				return defined $failed;
			},
			10, 'the failed getData in the log'),
		"the new worker's getData on the node failed: " . ($failed // 'no log line'));
	is_deeply(zk_acl($zk, "$pa/$na"), ['world:anyone:wa'], '(the ACL still denied reading then)');
	is(flags($pa), 'held|f', 's3 still holds the lock');

	($rc, $lines) = zktool('setacl', $zk, "$pa/$na", 'cdrwa');
	is($lines->[0], "setacl $pa/$na", "the node's ACL is open again");
	ok($peer->revoke("$pa/$na"), 'Curator revokes s3\'s lock');

	my $st = status_row($node);
	$proxy->set_mode('cut');
	$proxy->set_mode('pass');
	ok( wait_until(
			sub {
				my $s = status_row($node);
				$s->{state} eq 'connected' && $s->{connected_count} > $st->{connected_count};
			},
			20, 'the worker to reconnect'),
		'the connection was cut and the worker reconnected');
	is(status_row($node)->{session_id}, $st->{session_id}, '... resuming the same session');
	ok(wait_requested($s3, $pa), 'the worker watched and read the node again: the revocation is seen');
	is(flags($pa), 'held|t', 'zk_locks: held, revocation_requested');
	ok(curator_excluded($pa), 'the lock is still held');
	is($s3->value("SELECT zk_mutex_release('$pa')"), 't', 's3 releases');

	# Nothing left behind.
	ok(wait_children_count($peer, $_, 0), "no node left under $_") for ($pc, $pm, $pw, $pa);
	is($node->safe_psql('postgres', 'SELECT count(*) FROM zk_locks'), '0', 'zk_locks is empty');

	$_->quit for ($s1, $s2, $s3);
};
$peer->quit;
$node->stop;
$proxy->stop;
stop_zk($zk);
done_testing();

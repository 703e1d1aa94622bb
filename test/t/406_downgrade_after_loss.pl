
# 406_downgrade_after_loss: a downgrade never outlives the loss of its
# write lock (issue 29, item 2).
#
# What users rely on: a backend that holds the write lock on P and asks for
# the read lock gets it at once, its read node made with the writer's
# sequence number, so it keeps the place the writer has in the queue.  That
# place is only the backend's while its write node exists.  If the
# ZooKeeper session that held the write lock is lost (the server expired
# it, or the lease ran out) before the downgrade's node is made, the
# downgrade must fail (08006, as every wait the loss of the session cuts
# short): a read node made in the next session with the lost writer's
# number would sort ahead of the writer that holds the lock now.
#
# The faults are real: the worker is stopped (SIGSTOP) while the downgrade
# is asked for, so it meets the loss with the request not yet taken on
# (NEW); the connection is cut so that the worker takes the request on and
# parks it, then the worker is restarted (SIGTERM) and the new worker takes
# the parked request over before the session is lost (and, healed in
# time, the same in one session: that downgrade is granted).  Checked from
# outside: the Curator writer gets the lock, the SQL read acquire does not
# return true, zk_locks never says the read lock is held while Curator
# holds, Curator's node is the first of the queue, nothing is left; a
# downgrade in a healthy session still works, before and after.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use ZklockTest;
use ZklockFault;
use ZklockProxy;

my $zk = start_zk();

# A: 4 s sessions, a lease of 2 s (margin 2 s): stopped 2.5 s, the lease
# has run out while the server still counts the session alive.
my $node = new_zklock_node('down', $zk,
	"zklock.session_timeout = '4s'\nzklock.lease_margin = '2s'\nzklock.connect_timeout = '20s'\n");
my $peer = new_peer($zk);
my $timeout_s = status_row($node)->{session_timeout} / 1000;

# $s holds and downgrades; the second session only looks.
my $s = ZklockTest::Session->new($node, 's');

# rw_state($node, $pid, $path, $recipe): zk_locks' state of pid's read or
# write lock on path, 'none' without a row.
sub rw_state
{
	my ($n, $pid, $path, $recipe) = @_;
	return $n->safe_psql('postgres',
		qq{SELECT coalesce(max(state), 'none') FROM zk_locks
		   WHERE pid = $pid AND path = '$path' AND recipe = '$recipe'});
}

# rw_children($path): the read/write lock nodes under $path in queue order
# (by the sequence number after __READ__ or __WRIT__), [] without the node.
sub rw_children
{
	my ($path) = @_;
	my $kids = $peer->children($path) // [];
	my $key = sub { $_[0] =~ /__(?:READ|WRIT)__(.*)$/ ? $1 : $_[0] };
	return [ sort { $key->($a) cmp $key->($b) } @$kids ];
}

# healthy_downgrade($n, $sess, $path): write, read (downgrade), a Curator
# writer queued behind stays out until the read lock is released.
sub healthy_downgrade
{
	my ($n, $sess, $path, $tag) = @_;
	is($sess->value("SELECT zk_write_lock_acquire('$path', '10s')"), 't', "$tag: write lock");
	my $wnode = zk_lock_rows($n, $path)->{ $sess->pid }{node};
	my ($wseq) = ($wnode // '') =~ /(\d{10})$/;
	$peer->lock('write', "hw$tag", $path, -1);
	ok(wait_children_count($peer, $path, 2), "$tag: a Curator writer queues behind");
	is($sess->value("SELECT zk_read_lock_acquire('$path', '5s')"), 't', "$tag: the downgrade is granted");
	ok((grep { /__READ__\Q$wseq\E$/ } @{ $peer->children($path) // [] }),
		"$tag: its read node carries the writer's sequence $wseq");
	is($sess->value("SELECT zk_write_lock_release('$path')"), 't', "$tag: write released");
	ok(!wait_until(sub { $peer->has_reply(qr/^(acquired|timeout|error) hw\Q$tag\E\b/) }, 1,
			'(expected) no grant'),
		"$tag: the Curator writer stays out while the downgraded read lock is held");
	is($sess->value("SELECT zk_read_lock_release('$path')"), 't', "$tag: read released");
	is($peer->acquire_result("hw$tag"), 'acquired', "$tag: then Curator's writer gets the lock");
	is($peer->release("hw$tag"), 'released', "$tag: Curator releases");
	ok(wait_children_count($peer, $path, 0), "$tag: no node left");
}

# after_loss($n, $sess, $path, $cid, $what): the downgrade statement of
# $sess is running (or about to fail) while Curator ($cid) got the write
# lock; sample zk_locks until the statement ends: the read lock is never
# 'held' while Curator holds, the acquire is not true but a documented
# error, Curator's node is first and alone, nothing is left after.
sub after_loss
{
	my ($n, $sess, $path, $cid, $what) = @_;
	my ($samples, $held) = (0, 0);
	my $t0 = time;
	while (!$sess->done && time - $t0 < 30)
	{
		$samples++;
		$held++ if rw_state($n, $sess->pid, $path, 'read') eq 'held';
		usleep(20_000);
	}
	my $r = $sess->result(5);
	# and once more now that it returned
	$samples++;
	$held++ if rw_state($n, $sess->pid, $path, 'read') eq 'held';
	is($held, 0, "$what: zk_locks never says the read lock is held while Curator holds ($samples samples)");
	isnt($r->{out}, 't', "$what: the read acquire does not return true")
	  or diag("out=[$r->{out}] err=[$r->{err}]");
	ok(defined $r->{sqlstate} && $r->{sqlstate} =~ /^(08006|40000)$/,
		"$what: it fails with a documented SQLSTATE (" . ($r->{sqlstate} // 'none') . ')')
	  or diag("err=[$r->{err}]");
	is($r->{sqlstate}, '08006', "$what: 08006, as a wait the end of the session cut short");
	my $kids = rw_children($path);
	is(scalar @$kids, 1, "$what: ZooKeeper has one node under $path") or diag("@$kids");
	like($kids->[0] // '', qr/__WRIT__/, "$what: Curator's write node, first in the queue");
	ok(!$peer->has_reply(qr/^(released|error) \Q$cid\E/), "$what: Curator still holds");

	# clean up: the lost write lock (and a wrongly granted read lock)
	$sess->query('SELECT zk_release_all()');
	is($peer->release($cid), 'released', "$what: Curator releases");
	ok(wait_children_count($peer, $path, 0), "$what: no node left under $path");
	ok(wait_no_zklock_rows($n, $path), "$what: no zk_locks row left for $path");
}

subtest 'a downgrade in a healthy session keeps the writer\'s place' => sub {
	healthy_downgrade($node, $s, '/t406/ok', 'before');
};

############################################################################
# 1. The worker stopped past the session timeout: the server expires the
#    session, Curator takes the write lock; the downgrade was asked for
#    while the worker was stopped (NEW when the session is swept).
############################################################################
subtest 'worker stopped past the session timeout: a downgrade asked meanwhile fails' => sub {
	my $p = '/t406/expiry';
	is($s->value("SELECT zk_write_lock_acquire('$p')"), 't', 's holds the write lock');
	$peer->lock('write', 'cw1', $p, -1);
	ok(wait_children_count($peer, $p, 2), 'a Curator writer waits behind it');

	my $wpid = worker_pid($node);
	ok(kill('STOP', $wpid), "worker $wpid stopped (SIGSTOP)");
	$s->start("SELECT zk_read_lock_acquire('$p')");
	is($peer->acquire_result('cw1', $timeout_s + 20), 'acquired',
		'the server expired the session: Curator has the write lock');
	ok(kill('CONT', $wpid), 'worker continued (SIGCONT)');
	after_loss($node, $s, $p, 'cw1', 'expiry');
};

############################################################################
# 2. The lease runs out, the server not yet expired the session: the
#    worker ends it itself when continued (closes it), Curator takes over.
############################################################################
subtest 'the lease runs out (worker stopped shorter than the session timeout): the downgrade fails' => sub {
	my $p = '/t406/lease';
	ok(wait_connected($node), 'connected again');
	is($s->value("SELECT zk_write_lock_acquire('$p', '10s')"), 't', 's holds the write lock');
	$peer->lock('write', 'cw2', $p, -1);
	ok(wait_children_count($peer, $p, 2), 'a Curator writer waits behind it');
	my $expired0 = status_row($node)->{leases_expired} // 0;

	my $wpid = worker_pid($node);
	ok(kill('STOP', $wpid), "worker $wpid stopped (SIGSTOP)");
	my $t0 = time;
	$s->start("SELECT zk_read_lock_acquire('$p')");
	hold_for(2.5 - (time - $t0), 'past the 2 s lease, short of the 4 s session');
	ok(kill('CONT', $wpid), 'worker continued (SIGCONT)');
	is($peer->acquire_result('cw2', 20), 'acquired',
		'the worker ended the session: Curator has the write lock');
	note(sprintf('Curator got the lock %.1f s after SIGSTOP (the session timeout is %d s)',
			time - $t0, $timeout_s));
	after_loss($node, $s, $p, 'cw2', 'lease');
	cmp_ok(status_row($node)->{leases_expired} // 0, '>', $expired0,
		'zk_status counted a lease that ran out');
};

############################################################################
# 3. Taken over by a new worker: the connection is cut, the worker takes
#    the downgrade on and parks it; the worker is restarted (SIGTERM) and
#    the new one takes the parked request over while the session is still
#    its own; then the session is lost (the lease runs out, the server
#    expires it) and Curator takes the write lock.  A cluster of its own
#    with 10 s sessions, so that the restart fits in the lease.
############################################################################
my $proxy = ZklockProxy->start($zk);
my $nb = new_zklock_node('down_b', $proxy->connect, "zklock.connect_timeout = '30s'\n");
my $sb = ZklockTest::Session->new($nb, 'sb');

# parked_and_taken_over($p, $cid): sb holds the write lock on $p, Curator
# ($cid) queues a writer behind it, the connection is cut, sb asks for the
# read lock (the worker takes it on and parks it), the worker is restarted
# (SIGTERM); sb's statement is left running.  Returns the write node's
# sequence number.
sub parked_and_taken_over
{
	my ($p, $cid) = @_;
	is($sb->value("SELECT zk_write_lock_acquire('$p')"), 't', 'sb holds the write lock');
	my ($wseq) = (zk_lock_rows($nb, $p)->{ $sb->pid }{node} // '') =~ /(\d{10})$/;
	$peer->lock('write', $cid, $p, -1);
	ok(wait_children_count($peer, $p, 2), 'a Curator writer waits behind it');

	$proxy->set_mode('cut');
	ok(wait_until(sub { status_row($nb)->{state} ne 'connected' }, 10, 'the cut to be seen'),
		'the worker lost its connection');
	$sb->start("SELECT zk_read_lock_acquire('$p')");
	ok(wait_until(sub { rw_state($nb, $sb->pid, $p, 'read') eq 'waiting' }, 5, 'the downgrade queued'),
		'the downgrade waits (no connection)');
	usleep(300_000);    # the worker takes it on (and parks it)
	my ($old, $new) = restart_worker($nb, 'TERM');
	isnt($new, '', "the worker restarted ($old -> $new)");
	return $wseq // '';
}

# The same, healed before the session is lost: the write node still
# exists, so the downgrade resumed by the new worker is made and granted.
subtest 'same session: a parked downgrade taken over by a restarted worker is granted once connected again' => sub {
	my $p = '/t406/same';
	my $s0 = status_row($nb)->{session_id};
	my $wseq = parked_and_taken_over($p, 'cws');
	$proxy->set_mode('pass');
	my $r = $sb->result(20);
	is($r->{out}, 't', 'the downgrade is granted') or diag("err=[$r->{err}]");
	is(status_row($nb)->{session_id}, $s0, 'in the same session');
	ok((grep { /__READ__\Q$wseq\E$/ } @{ $peer->children($p) // [] }),
		"its read node carries the writer's sequence $wseq");
	is($sb->value("SELECT zk_write_lock_release('$p')"), 't', 'write released');
	ok(!wait_until(sub { $peer->has_reply(qr/^(acquired|timeout|error) cws\b/) }, 1,
			'(expected) no grant'),
		'the Curator writer stays out while the downgraded read lock is held');
	is($sb->value("SELECT zk_read_lock_release('$p')"), 't', 'read released');
	is($peer->acquire_result('cws'), 'acquired', "then Curator's writer gets the lock");
	is($peer->release('cws'), 'released', 'Curator releases');
	ok(wait_children_count($peer, $p, 0), 'no node left');
};

subtest 'a parked downgrade taken over by a restarted worker fails once the session is lost' => sub {
	my $p = '/t406/takeover';
	my $s0 = status_row($nb)->{session_id};

	parked_and_taken_over($p, 'cw3');
	is(rw_state($nb, $sb->pid, $p, 'write'), 'held',
		'the new worker found the write lock held (the session not lost yet)');
	is(rw_state($nb, $sb->pid, $p, 'read'), 'waiting', '... and took the downgrade over');

	is($peer->acquire_result('cw3', 30), 'acquired',
		'the server expired the session: Curator has the write lock');
	ok(wait_until(sub { rw_state($nb, $sb->pid, $p, 'write') eq 'lost' }, 15, 'the write lock lost'),
		'zk_locks: the write lock is lost');
	$proxy->set_mode('pass');
	ok(wait_until(sub {
				my $st = status_row($nb);
				$st->{state} eq 'connected' && $st->{session_id} ne $s0;
			}, 30, 'a new session'),
		'the worker connected in a new session');
	after_loss($nb, $sb, $p, 'cw3', 'takeover');
	unlike(log_contents($nb), qr/zklock: path index/, 'the path index never disagreed with the table');

	healthy_downgrade($nb, $sb, '/t406/ok_b', 'afterb');
};
$sb->quit;
$nb->stop;
$proxy->stop;

subtest 'a downgrade in a healthy session still works after the faults' => sub {
	ok(wait_connected($node), 'connected');
	healthy_downgrade($node, $s, '/t406/ok', 'after');
	unlike(log_contents($node), qr/zklock: path index/, 'the path index never disagreed with the table');
	is($node->safe_psql('postgres', 'SELECT count(*) FROM zk_locks'), '0', 'zk_locks is empty');
	for my $p (qw(/t406/ok /t406/expiry /t406/lease /t406/same /t406/takeover /t406/ok_b))
	{
		is(scalar @{ lock_children($peer, $p) }, 0, "no node left under $p");
	}
};

$s->quit;
$peer->quit;
$node->stop;
stop_zk($zk);
done_testing();


# 504_lease_timeout_reload: the lease follows the session timeout the
# leader applies now, never a longer one negotiated earlier.
#
# What users rely on: ZooKeeper negotiates the session timeout again on
# every (re)connect, and the leader's revalidation and every later touch
# set the session's expiry to now + that timeout: a shorter timeout
# replaces the expiry, it does not keep the later one.  So when an operator
# lowers zklock.session_timeout (a reload, then a new handle: a changed
# zklock.hosts or a worker restart), zklock must trust its locks only as
# long as the shorter timeout allows.  Checked from outside: a transaction
# holds a lock and writes a row, the timeout is lowered from 60 s to 10 s,
# the connection becomes a black hole, ZooKeeper expires the session and a
# Curator client takes the lock; the transaction's COMMIT must then fail
# (40000) and its row must not be there.  Before the fix the lease kept the
# 60 s (zk_status() showed 57 s left) and COMMIT succeeded after Curator
# held the lock.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use ZklockTest;
use ZklockFault;
use ZklockProxy;

my $zk = start_zk();
my $p1 = ZklockProxy->start($zk);
my $p2 = ZklockProxy->start($zk);
my $node = new_zklock_node('reload', $p1->connect,
	"zklock.session_timeout = '60s'\nzklock.connect_timeout = '60s'\nzklock.lease_margin = '1s'\n");
my $peer = new_peer($zk);    # Curator talks to ZooKeeper directly
$node->safe_psql('postgres', 'CREATE TABLE work_done(tag text PRIMARY KEY)');

# set_conf(%gucs): ALTER SYSTEM each setting, then reload
sub set_conf
{
	my (%g) = @_;
	$node->safe_psql('postgres', "ALTER SYSTEM SET $_ = '$g{$_}'") for sort keys %g;
	$node->reload;
	return;
}

# reset_conf(): back to the file's settings (60 s on $p1)
sub reset_conf
{
	$node->safe_psql('postgres', 'ALTER SYSTEM RESET ALL');
	$node->reload;
	return;
}

# hold_and_lose($tag, $path, $proxy, $change): a transaction takes $path
# and writes row $tag; $change->() lowers the timeout; then $proxy becomes
# a black hole, Curator takes $path once ZooKeeper expired the session,
# and the COMMIT that follows must fail with no row written.  Heals and
# cleans up after itself.
sub hold_and_lose
{
	my ($tag, $path, $proxy, $change) = @_;
	my $x = ZklockTest::Session->new($node, "x$tag");
	$x->value('BEGIN');
	is($x->value(qq{SELECT zk_mutex_acquire_xact('$path')}), 't', "x holds $path for its transaction");
	$x->value(qq{INSERT INTO work_done VALUES ('$tag')});
	my $st = status_row($node);
	is($st->{session_timeout}, '60000', 'the session was negotiated with 60 s');
	cmp_ok(lease_left($node), '>', 30, 'so the lease has more than 30 s left');
	my $s0 = $st->{session_id};

	$change->();
	ok(wait_until(sub { my $s = status_row($node);
				$s->{state} eq 'connected' && $s->{session_timeout} eq '10000' },
			30, 'the new handle'),
		'the worker reconnected with a 10 s session timeout');
	is(status_row($node)->{session_id}, $s0, '... in the same session (the lock is still held)');
	is(lock_state($node, $x->pid, $path), 'held', '... and zk_locks says held');
	my $left = lease_left($node);
	cmp_ok($left, '<=', 9.05, "the lease follows the 10 s timeout at once (${left}s left)");

	$peer->acquire("c$tag", $path, -1);
	ok(wait_children_count($peer, $path, 2), 'Curator waits behind x');
	$proxy->set_mode('blackhole');
	is($peer->acquire_result("c$tag", 40), 'acquired',
		'the connection is a black hole: ZooKeeper expires the session and Curator gets the lock');
	my $r = $x->query('COMMIT');
	is($r->{sqlstate}, '40000', 'COMMIT of the transaction that relied on the lock fails with 40000')
	  or diag("COMMIT said: $r->{err}");
	is(committed_row($tag), '0', '... and its row is not there');

	$proxy->set_mode('pass');
	is($peer->release("c$tag"), 'released', 'Curator releases the lock');
	ok(wait_until(sub { my $s = status_row($node);
				$s->{state} eq 'connected' && $s->{session_id} ne $s0 }, 60, 'a new session'),
		'healed: the worker is connected in a new session');
	$x->quit;
	return;
}

# new_session(): close the worker's session from outside and wait for the
# next one, whose lease follows its own (60 s) timeout
sub new_session
{
	my $s0 = status_row($node)->{session_id};
	my ($id, $pw) = session_file($node);
	ok(expire_session($zk, $id, $pw), 'the session is closed from outside');
	ok(wait_until(sub { my $s = status_row($node);
				$s->{state} eq 'connected' && $s->{session_id} ne $s0 }, 60, 'a new session'),
		'a new session');
	ok(wait_until(sub { lease_left($node) > 30 }, 20, 'a 60 s lease'),
		'a new session has the lease of its own timeout');
	return;
}

sub committed_row
{
	my ($tag) = @_;
	return $node->safe_psql('postgres', qq{SELECT count(*) FROM work_done WHERE tag = '$tag'});
}

############################################################################
subtest 'a lower zklock.session_timeout and a new zklock.hosts: the lease follows the 10 s at once, COMMIT fails once Curator holds' => sub {
	hold_and_lose('a', '/t504/a', $p2, sub {
			set_conf('zklock.session_timeout' => '10s', 'zklock.hosts' => $p2->connect);
		});
	reset_conf();
	ok(wait_until(sub { status_row($node)->{session_timeout} eq '60000' }, 60, 'back to 60 s on p1'),
		'back on the first proxy with 60 s');
	new_session();
};

############################################################################
subtest 'a lower zklock.session_timeout, then a worker restart (SIGTERM): the same' => sub {
	hold_and_lose('b', '/t504/b', $p1, sub {
			set_conf('zklock.session_timeout' => '10s');
			# the reload alone already shortens the lease: the handle still
			# has 60 s, but the next one may be revalidated with 10 s
			ok(wait_until(sub { lease_left($node) <= 9.05 }, 10, 'the reload'),
				'the reload alone shortens the lease to the new timeout');
			is(status_row($node)->{session_timeout}, '60000', '... while the handle still has 60 s');
			restart_worker($node, 'TERM');
		});
	reset_conf();
	restart_worker($node, 'TERM');    # a new handle asks for 60 s again
	ok(wait_until(sub { status_row($node)->{session_timeout} eq '60000' }, 60, 'back to 60 s'),
		'a 60 s session again');
};

############################################################################
subtest 'a timeout raised again does not lengthen the lease within the session; a new session does' => sub {
	set_conf('zklock.session_timeout' => '10s');
	my $s0 = status_row($node)->{session_id};
	restart_worker($node, 'TERM');
	ok(wait_until(sub { my $s = status_row($node);
				$s->{state} eq 'connected' && $s->{session_timeout} eq '10000' }, 30, '10 s'),
		'resumed with 10 s');
	reset_conf();
	restart_worker($node, 'TERM');
	ok(wait_until(sub { my $s = status_row($node);
				$s->{state} eq 'connected' && $s->{session_timeout} eq '60000' }, 30, '60 s'),
		'resumed with 60 s again');
	is(status_row($node)->{session_id}, $s0, '... in the same session');
	# a late touch of the 10 s connection may still reach the leader
	cmp_ok(lease_left($node), '<=', 9.05, 'the lease still follows the shortest timeout of the session');
	new_session();
	is($node->safe_psql('postgres', q{SELECT zk_mutex_acquire('/t504/c', '10s')}), 't',
		'locks work');
	ok(wait_no_zklock_rows($node, '/t504/c'), 'and nothing is left');
};

unlike(slurp_file($node->logfile), qr/times zklock.server_tick_time/,
	'a standalone server proves the lease without ticks: no tickTime WARNING for its 60 s timeout');

my @left = grep { $_ ne '/t504' } @{ zk_tree($zk, '/t504') // [] };
my @lock_nodes = grep { m{/_c_} } @left;
is(scalar(@lock_nodes), 0, 'no lock node left in ZooKeeper') or diag("@lock_nodes");

$peer->quit;
$node->stop;
$p1->stop;
$p2->stop;
stop_zk();
done_testing();

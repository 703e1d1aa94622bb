
# 101_mutex_timeout_cancel: every way a wait can end early leaves nothing
# behind.
#
# What users rely on: acquire with a timeout returns false when the lock is
# held elsewhere; pg_cancel_backend, statement_timeout and lock_timeout end a
# wait with PostgreSQL's usual SQLSTATEs; in every case the waiter's node is
# deleted from ZooKeeper so it never blocks the queue.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use ZklockTest;

my $path = '/t101/mutex';

my $zk = start_zk();
my $node = new_zklock_node('timeout', $zk);
my $peer = new_peer($zk);

my $holder = ZklockTest::Session->new($node, 'holder');
is($holder->value("SELECT zk_mutex_acquire('$path')"), 't', 'holder acquires');
my $holder_node = zk_lock_rows($node, $path)->{ $holder->pid }{node};
is_deeply(lock_children($peer, $path), [$holder_node], 'only the holder node exists');

# Only the holder's node is left in ZooKeeper, and zk_locks shows only it.
sub only_holder_left
{
	my ($what, $pid) = @_;
	ok( wait_until(
			sub { my $c = lock_children($peer, $path); @$c == 1 && $c->[0] eq $holder_node },
			10, "only the holder node after $what"),
		"$what: the waiter's node is gone from ZooKeeper");
	ok( wait_sql($node, qq{SELECT count(*) FROM zk_locks WHERE pid = $pid}, '0', 10),
		"$what: zk_locks has no row left for the waiter");
}

my $s = ZklockTest::Session->new($node, 'waiter');

# 1. Timeout: false after about the timeout, not before.
subtest 'a wait with a timeout returns false after about the timeout and leaves no node' => sub {
	my $t0 = time;
	is($s->value("SELECT zk_mutex_acquire('$path', '800ms')"), 'f',
		'acquire with timeout returns false while the lock is held elsewhere');
	my $el = time - $t0;
	cmp_ok($el, '>=', 0.75, "it waited the timeout ($el s)");
	cmp_ok($el, '<', 10, 'and returned promptly after it');
	only_holder_left('timeout', $s->pid);
};

# try_acquire: one round, false, no node.
subtest 'try_acquire returns false at once and leaves no node' => sub {
	is($s->value("SELECT zk_mutex_try_acquire('$path')"), 'f', 'try_acquire returns false');
	only_holder_left('try_acquire', $s->pid);
};

# 2. pg_cancel_backend of a waiter: 57014 and its node is deleted.
subtest 'pg_cancel_backend of a waiter: 57014, its node is deleted, the session stays usable' => sub {
	$s->start("SELECT zk_mutex_acquire('$path')");
	ok(wait_waiting($node, $s->pid, $path), 'waiter queued');
	my $waiter_node = zk_lock_rows($node, $path)->{ $s->pid }{node};
	is(scalar @{ lock_children($peer, $path) }, 2, 'waiter node exists in ZooKeeper');
	is($node->safe_psql('postgres', 'SELECT pg_cancel_backend(' . $s->pid . ')'), 't', 'cancel sent');
	my $r = $s->result;
	is($r->{sqlstate}, '57014', 'cancelled wait fails with SQLSTATE 57014') or diag($r->{err});
	only_holder_left('pg_cancel_backend', $s->pid);
	ok(!grep({ $_ eq $waiter_node } @{ $peer->children($path) // [] }),
		"the cancelled waiter's own node $waiter_node is gone");

	# The session is still usable after the cancel.
	is($s->value("SELECT zk_mutex_acquire('$path', '100ms')"), 'f', 'session still works after cancel');
};

# 3. statement_timeout: 57014 and no node.
subtest 'statement_timeout ends a wait with 57014 and leaves no node' => sub {
	$s->value("SET statement_timeout = '700ms'");
	my $t0 = time;
	my $r = $s->query("SELECT zk_mutex_acquire('$path')");
	is($r->{sqlstate}, '57014', 'statement_timeout ends the wait with SQLSTATE 57014') or diag($r->{err});
	like($r->{err}, qr/statement timeout/, 'the error says statement timeout');
	cmp_ok(time - $t0, '<', 10, 'statement_timeout honoured promptly');
	only_holder_left('statement_timeout', $s->pid);
	$s->value('RESET statement_timeout');
};

# 4. lock_timeout: 55P03 and no node.
subtest 'lock_timeout ends a wait with 55P03 and leaves no node' => sub {
	$s->value("SET lock_timeout = '700ms'");
	my $t0 = time;
	my $r = $s->query("SELECT zk_mutex_acquire('$path')");
	is($r->{sqlstate}, '55P03', 'lock_timeout ends the wait with SQLSTATE 55P03') or diag($r->{err});
	cmp_ok(time - $t0, '<', 10, 'lock_timeout honoured promptly');
	only_holder_left('lock_timeout', $s->pid);
	$s->value('RESET lock_timeout');
};

# 5. Bad input is rejected with 22023 before anything reaches ZooKeeper.
subtest 'bad input is rejected with 22023 before anything reaches ZooKeeper' => sub {
	my $r = $s->query("SELECT zk_mutex_acquire('$path', '-1s')");
	is($r->{sqlstate}, '22023', 'negative timeout: SQLSTATE 22023');
	$r = $s->query("SELECT zk_mutex_acquire('t101/no-slash')");
	is($r->{sqlstate}, '22023', 'path without leading slash: SQLSTATE 22023');
	only_holder_left('invalid input', $s->pid);
};

# After all those abandoned waits the queue still works: the holder
# releases and the next acquire gets the lock at once.
subtest 'after the abandoned waits the lock passes on at once and no node is left' => sub {
	is($holder->value("SELECT zk_mutex_release('$path')"), 't', 'holder releases');
	is($s->value("SELECT zk_mutex_acquire('$path', '5s')"), 't', 'the lock is free for the next acquirer');
	is($s->value("SELECT zk_mutex_release('$path')"), 't', 'released');
	ok(wait_until(sub { @{ lock_children($peer, $path) } == 0 }, 10, 'no nodes'),
		'no lock node left in ZooKeeper');
};

$_->quit for ($holder, $s);
$peer->quit;
$node->stop;
stop_zk($zk);
done_testing();

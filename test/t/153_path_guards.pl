
# 153_path_guards: a call on a path that another recipe's nodes hold fails.
#
# What users rely on: a leader latch, a read/write lock, a semaphore (or
# semaphore mutex) or a double barrier on a path whose nodes are a mutex's (zklock's or Curator's), a mutex on a
# path a leader latch holds (or a semaphore's leases and locks), a counter
# or a barrier on a lock's parent node: the call fails with 22023 naming what the path holds, leaves no
# node behind, and the holder keeps what it holds (a Curator client still
# cannot take the lock; the leader still leads).  Curator clients on the
# same paths are refused nothing (a Curator mutex on a zklock latch's path
# works as before), and a zklock mutex on a Curator LeaderSelector's path
# is the same recipe and still works.  Before the guard each of these
# calls was granted (or said the barrier was up, or wrote a counter into
# the lock's parent).
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use ZklockTest;

my $zk = start_zk();
my $node = new_zklock_node('pathguards', $zk);
my $peer = new_peer($zk);
my $s1 = ZklockTest::Session->new($node, 's1');
my $s2 = ZklockTest::Session->new($node, 's2');

# refused($sql, $holds, $not, $what): $sql (in s2) fails with 22023 naming
# what the path holds and what the call asked for
sub refused
{
	my ($sql, $holds, $not, $what) = @_;
	my $r = $s2->query($sql);
	is($r->{sqlstate}, '22023', "$what: refused with 22023") or diag($r->{out} . $r->{err});
	like($r->{err}, qr/holds \Q$holds\E, not \Q$not\E/, "$what: the error names what the path holds");
}

# nothing_left($path, $n, $what): $path has exactly $n children (the
# holder's), waited for a moment since a refused call's delete is owed
sub nothing_left
{
	my ($path, $n, $what) = @_;
	ok(wait_children_count($peer, $path, $n), "$what: no node left under $path");
}

# curator_cannot_take($path, $id): a Curator mutex times out on $path
sub curator_cannot_take
{
	my ($path, $id) = @_;
	$peer->lock('mutex', $id, $path, 300);
	is($peer->acquire_result($id), 'timeout', "a Curator mutex still cannot take $path");
}

subtest 'a zklock mutex holds the path' => sub {
	my $p = '/t153/m';
	is($s1->value(qq{SELECT zk_mutex_acquire('$p')}), 't', 's1 holds a mutex');
	refused(qq{SELECT zk_leader_join('$p', 'sql-l')}, "a mutex's lock nodes", "a leader latch's",
		'a leader latch');
	nothing_left($p, 1, 'the latch');
	is($s2->value(qq{SELECT zk_has_leadership('$p')}), 'f', 'nobody leads');
	is($s2->value(qq{SELECT zk_leader('$p') IS NULL}), 't', 'zk_leader names nobody');
	refused(qq{SELECT zk_read_lock_acquire('$p', '5s')}, "a mutex's lock nodes", "a read/write lock's",
		'a read lock');
	nothing_left($p, 1, 'the read lock');
	refused(qq{SELECT zk_write_lock_acquire('$p', '5s')}, "a mutex's lock nodes", "a read/write lock's",
		'a write lock');
	nothing_left($p, 1, 'the write lock');
	refused(qq{SELECT zk_double_barrier_enter('$p', 2, '5s')}, "a mutex's lock nodes",
		"a double barrier's", 'a double barrier');
	nothing_left($p, 1, 'the double barrier');
	refused(qq{SELECT zk_atomic_long_add('$p', 5)}, "a mutex's lock nodes", "a counter's",
		'a counter add');
	refused(qq{SELECT zk_atomic_long_get('$p')}, "a mutex's lock nodes", "a counter's",
		'a counter read');
	is($peer->cmd("get $p", qr/^(data|nonode) \Q$p\E/), "data $p ", 'nothing was written into the lock\'s parent');
	refused(qq{SELECT zk_barrier_wait('$p', '0s')}, "a mutex's lock nodes", "a barrier's",
		'a barrier wait');
	refused(qq{SELECT zk_barrier_set('$p')}, "a mutex's lock nodes", "a barrier's",
		'a barrier set (the lock\'s parent is not a barrier that is up)');
	# a semaphore's nodes are under P/locks and P/leases: none is made
	refused(qq{SELECT zk_semaphore_acquire('$p', 2, 1, '5s')}, "a mutex's lock nodes", "a semaphore's",
		'a semaphore');
	refused(qq{SELECT zk_semaphore_try_acquire('$p', 2)}, "a mutex's lock nodes", "a semaphore's",
		'a semaphore try');
	refused(qq{SELECT zk_semaphore_mutex_acquire_xact('$p', '5s')}, "a mutex's lock nodes", "a semaphore's",
		'a semaphore mutex');
	is($s2->value(qq{SELECT count(*) FROM zk_locks WHERE pid = pg_backend_pid()}), '0', 's2 holds and waits for nothing');
	nothing_left($p, 1, 'everything refused');
	curator_cannot_take($p, 'c1');
	is($s1->value(qq{SELECT zk_mutex_release('$p')}), 't', 's1 still held it and releases it');
};

subtest 'a zklock leader latch holds the path' => sub {
	my $p = '/t153/l';
	is($s1->value(qq{SELECT zk_leader_join('$p', 'sql-l')}), 't', 's1 joins');
	ok(wait_until(sub { $s1->value(qq{SELECT zk_has_leadership('$p')}) eq 't' }, 10), 's1 leads');
	refused(qq{SELECT zk_mutex_acquire('$p', '5s')}, "a leader latch's nodes", "a mutex's", 'a mutex');
	refused(qq{SELECT zk_mutex_try_acquire('$p')}, "a leader latch's nodes", "a mutex's", 'a mutex try');
	refused(qq{SELECT zk_write_lock_acquire('$p', '5s')}, "a leader latch's nodes", "a read/write lock's",
		'a write lock');
	refused(qq{SELECT zk_semaphore_acquire('$p', 3)}, "a leader latch's nodes", "a semaphore's",
		'a semaphore');
	nothing_left($p, 1, 'the locks');
	is($s1->value(qq{SELECT zk_has_leadership('$p')}), 't', 's1 still leads');
	is($s2->value(qq{SELECT zk_leader('$p')}), 'sql-l', 'zk_leader names it');
	is($s2->value(qq{SELECT count(*) FROM zk_participants('$p')}), '1', 'zk_participants shows it alone');

	# Curator is refused nothing: its mutex ignores the latch's node
	$peer->lock('mutex', 'c2', $p, 5000);
	is($peer->acquire_result('c2'), 'acquired', 'a Curator mutex on the latch path is acquired as before');
	is($peer->release('c2'), 'released', 'and released');
	is($s1->value(qq{SELECT zk_has_leadership('$p')}), 't', 's1 still leads');
	is($s1->value(qq{SELECT zk_leader_leave('$p')}), 't', 's1 leaves');
	nothing_left($p, 0, 'the election');
};

subtest 'a Curator LeaderLatch holds the path' => sub {
	my $p = '/t153/cl';
	$peer->cmd("latch_start ja $p java-a", qr/^latch ja started/);
	ok($peer->wait_reply(qr/^isleader ja$/, 10), 'the Curator latch leads');
	refused(qq{SELECT zk_mutex_acquire('$p', '5s')}, "a leader latch's nodes", "a mutex's", 'a mutex');
	nothing_left($p, 1, 'the mutex');
	is($peer->cmd('latch_has ja', qr/^latchhas ja/), 'latchhas ja true', 'Curator still leads');
	$peer->cmd('latch_close ja', qr/^latch ja closed/);
};

subtest 'a Curator mutex holds the path' => sub {
	my $p = '/t153/cm';
	$peer->lock('mutex', 'c3', $p, 5000);
	is($peer->acquire_result('c3'), 'acquired', 'Curator holds a mutex');
	refused(qq{SELECT zk_leader_join('$p', 'sql-x')}, "a mutex's lock nodes", "a leader latch's",
		'a leader latch');
	refused(qq{SELECT zk_read_lock_acquire('$p', '5s')}, "a mutex's lock nodes", "a read/write lock's",
		'a read lock');
	refused(qq{SELECT zk_semaphore_mutex_acquire('$p', '5s')}, "a mutex's lock nodes", "a semaphore's",
		'a semaphore mutex');
	nothing_left($p, 1, 'the refused calls');
	is($peer->release('c3'), 'released', 'Curator still held it and releases it');
};

subtest 'a zklock semaphore holds the path' => sub {
	my $p = '/t153/s';
	is($s1->value(qq{SELECT array_length(zk_semaphore_acquire('$p', 1), 1)}), '1', 's1 holds the only lease');
	refused(qq{SELECT zk_mutex_acquire('$p', '5s')}, "a semaphore's leases and locks", "a mutex's", 'a mutex');
	refused(qq{SELECT zk_leader_join('$p', 'sql-s')}, "a semaphore's leases and locks", "a leader latch's",
		'a leader latch');
	nothing_left($p, 2, 'the refused calls (P has leases and locks only)');
	$peer->lease('c4', $p, 1, 1, 300);
	is($peer->lease_result('c4'), 'timeout', 'a Curator semaphore still gets no lease');
	is($s1->value(qq{SELECT zk_semaphore_release_all('$p')}), '1', 's1 still had its lease and returns it');
};

subtest 'a zklock mutex on a Curator LeaderSelector path is the same recipe' => sub {
	my $p = '/t153/sel';
	$peer->cmd("selector_start ka $p java-sel", qr/^selector ka started/);
	ok($peer->wait_reply(qr/^selected ka$/, 10), 'the Curator selector is selected');
	is($s2->value(qq{SELECT zk_mutex_try_acquire('$p')}), 'f', 'a try finds it held (not refused)');
	$s2->start(qq{SELECT zk_mutex_acquire('$p', '20s')});
	ok(wait_waiting($node, $s2->pid, $p), 'SQL waits behind the selector');
	$peer->send('selector_yield ka');
	is($s2->result(20)->{out}, 't', 'SQL takes the lock once the selector yields');
	is($s2->value(qq{SELECT zk_mutex_release('$p')}), 't', 'and releases it');
	$peer->cmd('selector_close ka', qr/^selector ka closed/);
};

# Only nodes older than the call's own count: a mutex waiter that lists
# again after a Curator latch joined the path (a node younger than its
# own) is not failed, and takes the lock when the holder lets go.
subtest 'a waiter is not refused for a node that came after its own' => sub {
	my $p = '/t153/w';
	# a Curator holder: s2 watches its node and lists again when it goes
	$peer->lock('mutex', 'c6', $p, 5000);
	is($peer->acquire_result('c6'), 'acquired', 'Curator holds a mutex');
	$s2->start(qq{SELECT zk_mutex_acquire('$p', '20s')});
	ok(wait_waiting($node, $s2->pid, $p), 's2 waits behind it');
	$peer->cmd("latch_start jw $p java-w", qr/^latch jw started/);
	ok(wait_children_count($peer, $p, 3), 'a Curator latch joined after s2 (not refused: Curator)');
	is($peer->release('c6'), 'released', 'Curator releases');
	is($s2->result(20)->{out}, 't', 's2 lists again, sees the younger latch node, and takes the lock');
	is($s2->value(qq{SELECT zk_mutex_release('$p')}), 't', 's2 releases');
	$peer->cmd('latch_close jw', qr/^latch jw closed/);
	nothing_left($p, 0, 'the path');
};

# Curator is not refused: a Curator mutex on a zklock latch's path with
# Curator latches joining after it.  zk_leader and zk_participants still
# follow the election (latch nodes in their sequence order, which the
# mutex node in between does not disturb); before, the latch rows were
# sorted by name, that is by their random UUIDs.
subtest 'a Curator mutex among the members of an election' => sub {
	my $p = '/t153/mix';
	is($s1->value(qq{SELECT zk_leader_join('$p', 'sql-l')}), 't', 's1 joins');
	ok(wait_until(sub { $s1->value(qq{SELECT zk_has_leadership('$p')}) eq 't' }, 10), 's1 leads');
	$peer->lock('mutex', 'c5', $p, 5000);
	is($peer->acquire_result('c5'), 'acquired', 'a Curator mutex is acquired on the path');
	for my $i (1 .. 4)
	{
		$peer->cmd("latch_start jm$i $p java-$i", qr/^latch jm$i started/);
		ok(wait_children_count($peer, $p, 2 + $i), "Curator latch java-$i joined");
	}
	is($s2->value(qq{SELECT zk_leader('$p')}), 'sql-l', 'zk_leader names the leader');
	is($s2->value(qq{SELECT string_agg(data || ':' || holds, ' ' ORDER BY position) FROM zk_participants('$p') WHERE kind = 'latch'}),
		'sql-l:true java-1:false java-2:false java-3:false java-4:false',
		'zk_participants lists the members in their order, the leader first');
	is($peer->cmd('latch_leader jm1', qr/^latchleader jm1/), 'latchleader jm1 sql-l', 'Curator names the same leader');
	is($s1->value(qq{SELECT zk_has_leadership('$p')}), 't', 's1 still leads');
	$peer->cmd("latch_close jm$_", qr/^latch jm$_ closed/) for 1 .. 4;
	is($peer->release('c5'), 'released', 'the Curator mutex is released');
	is($s1->value(qq{SELECT zk_leader_leave('$p')}), 't', 's1 leaves');
	nothing_left($p, 0, 'the election');
};

is($node->safe_psql('postgres', 'SELECT count(*) FROM zk_locks'), '0', 'zk_locks is empty');
$_->quit for ($s1, $s2);
$peer->quit;
$node->stop;
stop_zk($zk);
done_testing();

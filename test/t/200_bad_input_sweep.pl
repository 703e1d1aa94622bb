
# 200_bad_input_sweep: every zk_* function against a table of invalid input.
#
# What users rely on: a wrong argument (bad path, bad count, bad timeout,
# bad array, bad lease name) is a clear ERROR with a specific SQLSTATE —
# never XX000 (internal error), never a crash of the backend or of the
# cluster — and nothing of it reaches ZooKeeper.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use ZklockTest;
use ZklockFault;

my $zk = start_zk();
my $node = new_zklock_node('badinput', $zk);
my $peer = new_peer($zk);

my $tree_before = zk_tree($zk, '/');
ok(defined $tree_before, 'ZooKeeper tree listed before the sweep: ' . join(' ', @{ $tree_before // [] }));

# Invalid values, as SQL expressions.
my @bad_paths = (
	'NULL::text', q{''}, q{'x'}, q{'a/b'}, q{'/'}, q{'/a/'}, q{'//'}, q{'/a//b'},
	q{'/a/../b'}, q{'/..'}, q{'/.'}, q{'/a/.'}, q{E'/a\\x01b'}, q{E'/a\\nb'},
	q{E'/a\\tb'}, q{E'/a\\x7f'}, q{E'/a\\u0085'}, q{E'/a\\uFFFE'},
	q{'/' || repeat('x', 10 * 1024 * 1024)}, q{'/' || repeat('x', 481)},
	q{'/zookeeper'}, q{'/zookeeper/x'}, q{'/zookeeper/quota/x'},
);
my @bad_timeouts = (
	q{'-1 second'::interval}, q{'-1 month'::interval}, q{'1 day -25 hours'::interval},
	q{'-1 microsecond'::interval}, q{'178000000 years'::interval}, q{'-178000000 years'::interval},
	# integer milliseconds, and a quoted interval (the text overloads)
	'-1', '-2147483648', q{'-1 second'}, q{'-1 second'::text}, q{'178000000 years'},
);
my @bad_counts = ('0', '-1', '-2147483648', 'NULL::integer');
my @bad_arrays = (
	'NULL::text[]', q{'{}'::text[]}, q{ARRAY[NULL]::text[]}, q{ARRAY['/a', NULL]},
	q{ARRAY['/a', '/b', '/a']}, q{ARRAY[['/a'], ['/b']]}, q{'{{/a,/b},{/c,/d}}'::text[]},
	q{ARRAY['/a', 'b']}, q{ARRAY['/a', '/a/../a']}, q{ARRAY['/zookeeper']},
	q{ARRAY['/' || repeat('x', 10 * 1024 * 1024)]},
);
my @bad_leases = ('NULL::text', q{repeat('x', 200)}, q{'a/b'}, q{'../../x'}, q{E'a\\x01'}, q{'/'});

my @calls;
for my $p (@bad_paths)
{
	push @calls,
	  "zk_mutex_acquire($p)", "zk_mutex_acquire($p, '1s', true)", "zk_mutex_try_acquire($p)",
	  "zk_mutex_release($p)", "zk_mutex_acquire_xact($p, '1s')",
	  "zk_read_lock_acquire($p, '1s')", "zk_read_lock_acquire_xact($p)", "zk_read_lock_release($p)",
	  "zk_write_lock_acquire($p, '1s')", "zk_write_lock_acquire_xact($p)", "zk_write_lock_release($p)",
	  "zk_semaphore_mutex_acquire($p, '1s')", "zk_semaphore_mutex_acquire_xact($p)",
	  "zk_semaphore_mutex_release($p)",
	  "zk_mutex_try_acquire_xact($p)", "zk_read_lock_try_acquire($p)",
	  "zk_read_lock_try_acquire_xact($p)", "zk_write_lock_try_acquire($p)",
	  "zk_write_lock_try_acquire_xact($p)", "zk_semaphore_mutex_try_acquire($p)",
	  "zk_semaphore_mutex_try_acquire_xact($p)", "zk_semaphore_try_acquire($p, 2)",
	  "zk_semaphore_try_acquire_xact($p, 2, 1)",
	  "zk_multi_lock_acquire(ARRAY[$p], '1s')", "zk_multi_lock_acquire(ARRAY['/ok1', $p])",
	  "zk_multi_lock_release(ARRAY[$p])",
	  "zk_semaphore_acquire($p, 2)", "zk_semaphore_acquire_xact($p, 2, 1, '1s')",
	  "zk_semaphore_release($p, '_c_00000000-0000-4000-8000-000000000000-lease-0000000000')",
	  "zk_semaphore_release_all($p)",
	  "zk_barrier_set($p)", "zk_barrier_remove($p)", "zk_barrier_wait($p, '1s')",
	  "zk_double_barrier_enter($p, 2, '1s')", "zk_double_barrier_leave($p)",
	  "zk_revoke($p)", "zk_participants($p)", "zk_lock_token($p)",
	  "zk_shared_count_get($p)", "zk_shared_count_get_versioned($p, 1)",
	  "zk_shared_count_set($p, 1)", "zk_shared_count_try_set($p, 1, 0)",
	  "zk_atomic_long_get($p)", "zk_atomic_long_add($p, 1)",
	  "zk_atomic_long_compare_and_set($p, 0, 1)", "zk_atomic_long_set($p, 1)",
	  "zk_leader_join($p)", "zk_leader_join($p, 'id', 'cluster')", "zk_leader_leave($p)",
	  "zk_has_leadership($p)", "zk_leader_await($p, '1s')", "zk_leader_xact($p)",
	  "zk_leader($p)";
}
for my $t (@bad_timeouts)
{
	push @calls,
	  "zk_mutex_acquire('/ok', $t)", "zk_mutex_acquire_xact('/ok', $t)",
	  "zk_read_lock_acquire('/ok', $t)", "zk_read_lock_acquire_xact('/ok', $t)",
	  "zk_write_lock_acquire('/ok', $t)", "zk_write_lock_acquire_xact('/ok', $t)",
	  "zk_semaphore_mutex_acquire('/ok', $t)", "zk_semaphore_mutex_acquire_xact('/ok', $t)",
	  "zk_multi_lock_acquire(ARRAY['/ok'], $t)", "zk_semaphore_acquire('/ok', 2, 1, $t)",
	  "zk_semaphore_acquire_xact('/ok', 2, 1, $t)", "zk_barrier_wait('/ok', $t)",
	  "zk_double_barrier_enter('/ok', 2, $t)", "zk_double_barrier_leave('/ok', $t)",
	  "zk_leader_await('/ok', $t)";
}
for my $n (@bad_counts)
{
	push @calls,
	  "zk_semaphore_acquire('/ok', $n)", "zk_semaphore_acquire('/ok', 3, $n)",
	  "zk_semaphore_acquire_xact('/ok', $n)", "zk_semaphore_acquire_xact('/ok', 3, $n)",
	  "zk_double_barrier_enter('/ok', $n)",
	  "zk_semaphore_try_acquire('/ok', $n)", "zk_semaphore_try_acquire('/ok', 3, $n)",
	  "zk_semaphore_try_acquire_xact('/ok', $n)";
}
push @calls,
  "zk_shared_count_get('/ok', -1)", "zk_shared_count_get_versioned('/ok', -2147483648)",
  "zk_shared_count_set('/ok', NULL)", "zk_shared_count_try_set('/ok', 1, -1)",
  "zk_shared_count_try_set('/ok', NULL, 0)", "zk_shared_count_try_set('/ok', 1, NULL)",
  "zk_atomic_long_add('/ok', NULL)", "zk_atomic_long_compare_and_set('/ok', NULL, 1)",
  "zk_atomic_long_compare_and_set('/ok', 0, NULL)", "zk_atomic_long_set('/ok', NULL)",
  "zk_leader_join('/ok', 'id', NULL)", "zk_leader_join('/ok', 'id', 'global')",
  "zk_leader_join('/ok', 'id', '')";
push @calls,
  "zk_semaphore_acquire('/ok', 2, 2147483647)", "zk_semaphore_acquire('/ok', 1, 2)",
  "zk_semaphore_acquire_xact('/ok', 2, 2147483647)", "zk_semaphore_try_acquire('/ok', 1, 2)";
for my $a (@bad_arrays)
{
	push @calls, "zk_multi_lock_acquire($a)", "zk_multi_lock_acquire($a, '1s')",
	  "zk_multi_lock_release($a)";
}
for my $l (@bad_leases)
{
	push @calls, "zk_semaphore_release('/ok', $l)";
}

my $s = ZklockTest::Session->new($node, 'sweep');
my $pid = $s->pid;
my (@no_error, @bad_state, @dead, %states);
# The SQLSTATEs invalid input may get, and nothing else: invalid parameter
# value (22023), null value not allowed (22004), and interval out of range
# (22008, raised by PostgreSQL when it computes an interval argument).
my %expected_state = map { $_ => 1 } qw(22023 22004 22008);
for my $c (@calls)
{
	my $r = $s->query("SELECT $c", 60);
	if ($r->{dead} || !$s->alive)
	{
		push @dead, $c;
		last;
	}
	my $st = $r->{sqlstate};
	if (!defined $st)
	{
		push @no_error, "$c -> out=[$r->{out}] err=[" . substr($r->{err}, 0, 300) . "]";
	}
	elsif (!$expected_state{$st})
	{
		push @bad_state, "$c -> $st: " . substr($r->{err}, 0, 300);
	}
	$states{$st // 'none'}++;
}
note(scalar(@calls) . ' invalid calls tried; SQLSTATEs: '
	  . join(', ', map { "$_ x$states{$_}" } sort keys %states));
is(scalar @dead, 0, 'the backend survived every call') or diag("died at: @dead");
is(scalar @no_error, 0, 'every invalid call raised an ERROR')
  or diag(join("\n", @no_error));
is(scalar @bad_state, 0, 'every error has the SQLSTATE of invalid input (22023, 22004 or 22008)')
  or diag(join("\n", @bad_state));
is($s->value('SELECT pg_backend_pid()'), $pid, 'still the same backend');

# Setting the namespace to something that is not a path is refused, and a
# namespace does not open a way around the checks.
for my $ns (q{'x'}, q{'/a/'}, q{'/a/../b'}, q{'/zookeeper'}, q{E'/a\\x01'})
{
	my $r = $s->query("SET zklock.namespace = $ns");
	ok(defined $r->{sqlstate} && $r->{sqlstate} ne 'XX000', "SET zklock.namespace = $ns is refused ("
		  . ($r->{sqlstate} // 'no error') . ')');
}
$s->value(q{SET zklock.namespace = '/ns200'});
for my $p (q{'/../x'}, q{'/a/../../x'}, q{'/..'}, q{'//x'})
{
	my $r = $s->query("SELECT zk_mutex_acquire($p, '1s')");
	is($r->{sqlstate}, '22023', "under a namespace, zk_mutex_acquire($p) is refused with 22023");
}
$s->value('RESET zklock.namespace');

# Nothing was queued, held or sent.
is($node->safe_psql('postgres', q{SELECT requests_queued || '/' || locks_held FROM zk_status()}),
	'0/0', 'zk_status: nothing queued or held');
is($node->safe_psql('postgres', 'SELECT count(*) FROM zk_locks'), '0', 'zk_locks is empty');
my $tree_after = zk_tree($zk, '/');
is_deeply($tree_after, $tree_before, 'no node was created in ZooKeeper by any invalid call')
  or diag('after: ' . join(' ', @{ $tree_after // [] }));

# The cluster never crashed.
my $log = log_contents($node);
unlike($log, qr/terminated by signal|was terminated by exception|TRAP:|PANIC:/,
	'the server log shows no crashed process');
ok(wait_connected($node, 5), 'zklock is still connected');
is($s->value(q{SELECT zk_mutex_acquire('/t200/ok', '5s') AND zk_mutex_release('/t200/ok')}), 't',
	'a valid call still works afterwards');

# A lease name that is not a node name can never release anything else,
# even while this backend holds a lease on the semaphore.
my $lease = $s->value(q{SELECT (zk_semaphore_acquire('/t200/s', 2))[1]});
like($lease, $CURATOR_LEASE_NODE_RE, "holding lease $lease");
for my $l (q{'../../x'}, q{'a/b'}, q{'/'}, q{'..'}, qq{'../leases/$lease'}, qq{'$lease/..'})
{
	my $r = $s->query("SELECT zk_semaphore_release('/t200/s', $l)");
	isnt($r->{out}, 't', "zk_semaphore_release('/t200/s', $l) releases nothing ("
		  . ($r->{sqlstate} // "out=$r->{out}") . ')');
}
is_deeply($peer->children('/t200/s/leases'), [$lease], 'the held lease node is untouched');
is($s->value(qq{SELECT zk_semaphore_release('/t200/s', '$lease')}), 't', 'the real name releases it');
ok(wait_children_count($peer, '/t200/s/leases', 0), 'no lease left');

$s->quit;
$peer->quit;
$node->stop;
stop_zk($zk);
done_testing();

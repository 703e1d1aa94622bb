
# 200_bad_input_sweep: every zk_* function against a table of invalid input.
#
# What users rely on: a wrong argument (bad path, bad count, bad timeout,
# bad array, bad lease name) is a clear ERROR with a specific SQLSTATE —
# never XX000 (internal error), never a crash of the backend or of the
# cluster — and nothing of it reaches ZooKeeper.
#
# The calls are of two kinds.  Derived from the catalog: every function of
# the extension (pg_depend) with a path argument is called with each bad
# path, one with an array of paths with each bad path in an array and each
# bad array, one with a timeout with each bad timeout of its type, every
# other argument given a valid value by its name or type (a type the sweep
# has no valid value for fails the test: add one).  Hand-written: the
# counts, arrays, leases, scopes and NULLs whose meaning the catalog does
# not tell, and the shorter forms (defaults, unknown-typed literals).  At
# the end every function of the extension that takes an argument must have
# been called by one of them (functions without invalid input listed in
# %no_invalid_input, called with odd but valid input).
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
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
# The same by the type of the timeout argument, for the derived calls: an
# interval, integer milliseconds, or text read as an interval (args.c).
my @bad_interval_texts = ('-1 second', '-1 month', '1 day -25 hours', '-1 microsecond',
	'178000000 years', '-178000000 years');
my %bad_timeouts_of_type = (
	interval => [ map { "'$_'::interval" } @bad_interval_texts ],
	integer => [ '-1', '-2147483648' ],
	text => [ map { "'$_'::text" } @bad_interval_texts ],
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

# Functions without invalid input: each is called with odd but valid input
# below, and must answer without an error.
my %no_invalid_input = (
	'zk_blocking_pids(integer)' => [ 'zk_blocking_pids(NULL)', 'zk_blocking_pids(-1)',
		'zk_blocking_pids(0)', 'zk_blocking_pids(2147483647)' ],
);

# The derived calls.  Every function of the extension with its input
# arguments (name and type), from the catalog.
my %funcs;    # signature (regprocedure) => [ [ name, type ], ... ]
for my $row (split /\n/, $node->safe_psql('postgres', q{
	SELECT p.oid::regprocedure, p.proname,
	       coalesce((SELECT string_agg(coalesce(a.n, '') || ' ' || format_type(a.t, NULL), ';' ORDER BY a.o)
	                   FROM unnest(coalesce(p.proallargtypes, p.proargtypes::oid[]), p.proargnames, p.proargmodes)
	                        WITH ORDINALITY AS a(t, n, m, o)
	                  WHERE coalesce(a.m, 'i') IN ('i', 'b', 'v')), '')
	  FROM pg_proc p
	  JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
	  JOIN pg_extension e ON d.refclassid = 'pg_extension'::regclass AND d.refobjid = e.oid
	 WHERE e.extname = 'zklock'}))
{
	my ($sig, $name, $args) = split /\|/, $row, 3;
	$funcs{$sig} = { name => $name, args => [ map { [ split / /, $_, 2 ] } grep { length } split /;/, $args ] };
}
cmp_ok(scalar keys %funcs, '>', 0, 'the catalog lists ' . scalar(keys %funcs) . ' functions of the extension');
is(join(' ', grep { !$funcs{$_} } sort keys %no_invalid_input), '',
	'every function %no_invalid_input lists is a function of the extension');

# A path argument (text named path or ..._path), an array of paths (text[]
# named paths or ..._paths), a timeout (named timeout or timeout_...).
sub is_path { my ($n, $t) = @{ $_[0] }; return $t eq 'text' && $n =~ /(^|_)path$/; }
sub is_paths { my ($n, $t) = @{ $_[0] }; return $t eq 'text[]' && $n =~ /(^|_)paths$/; }
sub is_timeout { my ($n, $t) = @{ $_[0] }; return $n =~ /^timeout(_|$)/; }
# Valid values of the other arguments, by "name type", else by type.
my %valid_of_arg = (
	'max_leases integer' => '2',
	'member_qty integer' => '2',
	'lease text' => q{'_c_00000000-0000-4000-8000-000000000000-lease-0000000000'},
	'id text' => q{'id'},
	'scope text' => q{'session'},
);
my %valid_of_type = (
	integer => '1', bigint => '1', boolean => 'false', interval => q{'1s'},
	text => q{'x'}, 'text[]' => q{ARRAY['/ok']},
);
my %valid_timeout_of_type = (interval => q{'1s'}, integer => '1000', text => q{'1s'});
my (@no_value, @derived, %derived_of);
for my $sig (sort keys %funcs)
{
	my @args = @{ $funcs{$sig}{args} };
	my @valid;
	for my $a (@args)
	{
		my ($n, $t) = @$a;
		my $v = is_path($a) ? q{'/ok'} : is_paths($a) ? q{ARRAY['/ok']} : is_timeout($a) ? $valid_timeout_of_type{$t}
		  : $valid_of_arg{"$n $t"} // $valid_of_type{$t};
		push @no_value, "the sweep has no valid value for argument $n ($t) of $sig: add one"
		  unless defined $v;
		push @valid, $v;
	}
	next if grep { !defined } @valid;
	for my $i (0 .. $#args)
	{
		my ($n, $t) = @{ $args[$i] };
		my ($kind, @bad);
		if (is_path($args[$i]))
		{
			($kind, @bad) = ('path', @bad_paths);
		}
		elsif (is_paths($args[$i]))
		{
			($kind, @bad) = ('path', (map { "ARRAY[$_]" } @bad_paths), @bad_arrays);
		}
		elsif (is_timeout($args[$i]))
		{
			$kind = 'timeout';
			@bad = @{ $bad_timeouts_of_type{$t} // [] };
			push @no_value, "the sweep has no bad timeout of type $t for argument $n of $sig: add some"
			  unless @bad;
		}
		next unless $kind;
		for my $b (@bad)
		{
			my @v = @valid;
			$v[$i] = $b;
			my $call = "$funcs{$sig}{name}("
			  . join(', ', map { '(' . ($v[$_] // 'NULL') . ")::$args[$_][1]" } 0 .. $#args) . ')';
			push @derived, { call => $call, sig => $sig, kind => $kind, arg => $n };
			push @{ $derived_of{$sig} }, $call;
		}
	}
}
is(scalar @no_value, 0, 'the sweep has a valid value for every argument of the functions it calls')
  or diag(join("\n", @no_value));
note(scalar(@derived) . ' derived calls of ' . scalar(keys %derived_of) . ' functions');

my $s = ZklockTest::Session->new($node, 'sweep');
my $pid = $s->pid;
my (@no_error, @bad_state, @dead, %states, @wrong_reason);
# The SQLSTATEs invalid input may get, and nothing else: invalid parameter
# value (22023), null value not allowed (22004), and interval out of range
# (22008, raised by PostgreSQL when it computes an interval argument).
my %expected_state = map { $_ => 1 } qw(22023 22004 22008);
# What the error of a derived call is about: the argument it varies.
my %reason_re = (path => qr/zookeeper path/, timeout => qr/timeout|interval/);
my $t0 = time;
for my $d ((map { { call => $_ } } @calls), @derived)
{
	my $c = $d->{call};
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
	elsif ($d->{kind} && $r->{err} !~ $reason_re{ $d->{kind} })
	{
		push @wrong_reason, "$c (bad $d->{arg}) -> $st: " . substr($r->{err}, 0, 300);
	}
	$states{$st // 'none'}++;
}
note(scalar(@calls) . ' hand-written and ' . scalar(@derived) . ' derived invalid calls tried in '
	  . sprintf('%.1f s', time - $t0) . '; SQLSTATEs: '
	  . join(', ', map { "$_ x$states{$_}" } sort keys %states));
is(scalar @dead, 0, 'the backend survived every call') or diag("died at: @dead");
is(scalar @no_error, 0, 'every invalid call raised an ERROR')
  or diag(join("\n", @no_error));
is(scalar @bad_state, 0, 'every error has the SQLSTATE of invalid input (22023, 22004 or 22008)')
  or diag(join("\n", @bad_state));
is(scalar @wrong_reason, 0, 'every derived call fails on the argument it makes invalid (the others are valid)')
  or diag(join("\n", @wrong_reason));
is($s->value('SELECT pg_backend_pid()'), $pid, 'still the same backend');

# The functions without invalid input answer odd input without an error.
my @odd = map { @{ $no_invalid_input{$_} } } sort keys %no_invalid_input;
for my $c (@odd)
{
	my $r = $s->query("SELECT $c");
	is($r->{err}, '', "$c answers without an error (" . ($r->{out} eq '' ? 'NULL' : $r->{out}) . ')');
}

# Which functions the calls resolve to, as PostgreSQL resolves them: the
# functions a temporary view of the calls depends on (a call that fails as
# it is parsed, such as a cast of an interval out of range, reaches none).
my $cov = ZklockTest::Session->new($node, 'coverage');
my $nview = 0;
sub called_functions
{
	my @c = @_;
	my %got;
	my @views;
	while (my @chunk = splice(@c, 0, 100))
	{
		my @try = (\@chunk);
		while (my $set = shift @try)
		{
			my $v = 'zk200_cov_' . $nview++;
			my $r = $cov->query("CREATE TEMP VIEW $v AS SELECT "
				  . join(', ', map { "($set->[$_]) IS NULL AS c$_" } 0 .. $#$set));
			if ($r->{err} eq '') { push @views, $v; }
			elsif (@$set > 1)
			{
				my $h = int(@$set / 2);
				push @try, [ @$set[ 0 .. $h - 1 ] ], [ @$set[ $h .. $#$set ] ];
			}
		}
	}
	return {} unless @views;
	my $in = join(', ', map { "'$_'" } @views);
	for (split /\n/, $cov->value(qq{
		SELECT DISTINCT d.refobjid::regprocedure FROM pg_depend d JOIN pg_rewrite r ON d.objid = r.oid
		 WHERE d.classid = 'pg_rewrite'::regclass AND d.refclassid = 'pg_proc'::regclass
		   AND r.ev_class IN (SELECT oid FROM pg_class WHERE relname IN ($in) AND relpersistence = 't')}))
	{
		$got{$_} = 1 if $funcs{$_};
	}
	$cov->value('DROP VIEW ' . join(', ', @views));
	return \%got;
}
# Each derived call calls the function it was derived from.
my (@misresolved, %called);
for my $sig (sort keys %derived_of)
{
	my @got = sort keys %{ called_functions(@{ $derived_of{$sig} }) };
	push @misresolved, "derived for $sig, calls " . (join(', ', @got) || 'nothing')
	  unless "@got" eq $sig;
	$called{$_} = 1 for @got;
}
is(scalar @misresolved, 0, 'every derived call calls the function it was derived from')
  or diag(join("\n", @misresolved));
# Every function of the extension that takes an argument was called.
my $by_hand = called_functions(@calls, @odd);
note('functions only the derived calls reach: '
	  . join(', ', grep { @{ $funcs{$_}{args} } && !$by_hand->{$_} } sort keys %funcs));
%called = (%called, %$by_hand);
my @not_called = grep { @{ $funcs{$_}{args} } && !$called{$_} } sort keys %funcs;
is(scalar @not_called, 0, 'the sweep called every function of the extension that takes an argument ('
	  . scalar(grep { @{ $funcs{$_}{args} } } keys %funcs) . ')')
  or diag('not called: ' . join(', ', @not_called));
$cov->quit;

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

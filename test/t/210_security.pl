
# 210_security: who may use zklock, the namespace boundary, the ZooKeeper
# credentials.
#
# What users rely on:
#   - a role without grants cannot take, release or write anything through
#     zklock (42501); GRANT zklock_user TO role gives exactly that right,
#     while zk_status() and zk_locks stay readable by everyone;
#   - a non-superuser cannot move zklock.namespace (SET, set_config,
#     connection options: 42501) nor leave it with '..' (22023), so it can
#     only touch nodes under the namespace;
#   - the ZooKeeper digest secret (zklock.auth) is never shown: not by SHOW
#     (a superuser's says ********), not in pg_settings (no row; setting,
#     reset_val, boot_val), not in the server log, not even when it is set
#     by a reload (sql/zklock_security.sql's server has no secret: the
#     superuser's SHOW is checked here);
#   - with zklock.acl = 'creator', a ZooKeeper or Curator client without the
#     credentials cannot delete (or write into) zklock's lock nodes: NoAuth.
# A missing feature (role, GUC) fails its own assertion.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use ZklockTest;
use ZklockFault;

my $secret_pw = 'S3cr3t-036-pw';
my $secret = "zkuser036:$secret_pw";

my $zk = start_zk();
my $node = new_zklock_node('security', $zk);
my $peer = new_peer($zk);

my $have_role = $node->safe_psql('postgres',
	q{SELECT count(*) FROM pg_roles WHERE rolname = 'zklock_user'}) eq '1';
# zklock.auth may be hidden from pg_settings (GUC_NO_SHOW_ALL): SHOW tells.
my $have_auth = !defined((psql_error($node, 'SHOW zklock.auth'))[0]);
my $have_acl = $node->safe_psql('postgres',
	q{SELECT count(*) FROM pg_settings WHERE name = 'zklock.acl'}) eq '1';
ok($have_role, 'the extension creates the role zklock_user');
ok($have_auth, 'zklock.auth exists');
ok($have_acl, 'zklock.acl exists');

$node->safe_psql('postgres', q{
	CREATE ROLE app LOGIN;
	CREATE ROLE app2 LOGIN;
});

# as($role, $sql): run $sql as $role in a fresh connection; returns
# ($sqlstate, $stdout, $stderr).
sub as_role
{
	my ($role, $sql, $extra) = @_;
	my ($out, $err) = ('', '');
	$node->psql('postgres', $sql,
		stdout => \$out, stderr => \$err,
		connstr => $node->connstr('postgres') . " user=$role" . ($extra // ''),
		extra_params => [ '-v', 'VERBOSITY=verbose' ],
		timeout => 30);
	return (sqlstate_of($err), $out, $err);
}

# A valid call of every function that changes shared state or reads
# ZooKeeper (the EXECUTE privilege is checked before the arguments).
my @state_calls = (
	q{zk_mutex_acquire('/t210/m', '1s')}, q{zk_mutex_try_acquire('/t210/m')},
	q{zk_mutex_release('/t210/m')}, q{zk_mutex_acquire_xact('/t210/m', '1s')},
	q{zk_release_all()},
	q{zk_read_lock_acquire('/t210/rw', '1s')}, q{zk_read_lock_acquire_xact('/t210/rw', '1s')},
	q{zk_read_lock_release('/t210/rw')},
	q{zk_write_lock_acquire('/t210/rw', '1s')}, q{zk_write_lock_acquire_xact('/t210/rw', '1s')},
	q{zk_write_lock_release('/t210/rw')},
	q{zk_semaphore_mutex_acquire('/t210/sm', '1s')}, q{zk_semaphore_mutex_acquire_xact('/t210/sm', '1s')},
	q{zk_semaphore_mutex_release('/t210/sm')},
	q{zk_multi_lock_acquire(ARRAY['/t210/m1', '/t210/m2'], '1s')},
	q{zk_multi_lock_release(ARRAY['/t210/m1', '/t210/m2'])},
	q{zk_semaphore_acquire('/t210/s', 2, 1, '1s')}, q{zk_semaphore_acquire_xact('/t210/s', 2, 1, '1s')},
	q{zk_semaphore_release('/t210/s', 'x')}, q{zk_semaphore_release_all('/t210/s')},
	q{zk_barrier_set('/t210/b')}, q{zk_barrier_remove('/t210/b')},
	q{zk_barrier_wait('/t210/b', '1s')},
	q{zk_double_barrier_enter('/t210/d', 2, '1s')}, q{zk_double_barrier_leave('/t210/d', '1s')},
	q{zk_revoke('/t210/m')}, q{zk_participants('/t210/m')},
	q{zk_mutex_try_acquire_xact('/t210/m')}, q{zk_read_lock_try_acquire('/t210/rw')},
	q{zk_read_lock_try_acquire_xact('/t210/rw')}, q{zk_write_lock_try_acquire('/t210/rw')},
	q{zk_write_lock_try_acquire_xact('/t210/rw')}, q{zk_semaphore_mutex_try_acquire('/t210/sm')},
	q{zk_semaphore_mutex_try_acquire_xact('/t210/sm')}, q{zk_semaphore_try_acquire('/t210/s', 2)},
	q{zk_semaphore_try_acquire_xact('/t210/s', 2)},
	q{zk_mutex_acquire('/t210/m', 1000)}, q{zk_semaphore_acquire('/t210/s', 2, 1, 1000)},
	q{zk_barrier_wait('/t210/b', 1000)}, q{zk_leader_await('/t210/l', 1000)},
);

############################################################################
# 1. Privileges
############################################################################
subtest 'privileges: only the granted roles may use zklock' => sub {
	{

		my @allowed;
		for my $c (@state_calls)
		{
			my ($st, $out, $err) = as_role('app', "SELECT $c");
			push @allowed, "$c -> " . ($st // "no error: $out") unless ($st // '') eq '42501';
		}
		is(scalar @allowed, 0, 'a role without grants gets 42501 from every state-changing function')
		  or diag(join("\n", @allowed));
		my $open = $node->safe_psql('postgres', q{
		SELECT string_agg(p.oid::regprocedure::text, ', ' ORDER BY 1)
		  FROM pg_proc p
		 WHERE p.proname LIKE 'zk\_%'
		   AND p.proname NOT IN ('zk_status', 'zk_locks', 'zk_lock_token', 'zk_revocation_requested',
		                         'zk_blocking_pids', 'zk_stat_worker')
		   AND has_function_privilege('app', p.oid, 'EXECUTE')});
		is($open, '', 'no other zk_* function is executable by PUBLIC');
		my ($st, $out) = as_role('app', q{SELECT state FROM zk_status()});
		is($out, 'connected', 'zk_status() is readable without grants');
		($st, $out) = as_role('app', q{SELECT count(*) FROM zk_locks});
		is($out, '0', 'zk_locks is readable without grants');
		is($peer->children('/t210/m'), undef, 'the refused calls created nothing in ZooKeeper');

		$node->safe_psql('postgres', 'GRANT zklock_user TO app');
		($st, $out) = as_role('app',
			q{SELECT zk_mutex_acquire('/t210/m', '5s'), zk_lock_token('/t210/m') > 0, zk_mutex_release('/t210/m')});
		is($out, 't|t|t', 'with GRANT zklock_user the role can acquire and release') or diag("$st");
		($st, $out) = as_role('app',
			q{SELECT zk_semaphore_acquire('/t210/s', 2, 1, '5s') IS NOT NULL, zk_semaphore_release_all('/t210/s')});
		is($out, 't|1', 'and use the other recipes');
		($st) = as_role('app2', q{SELECT zk_mutex_acquire('/t210/m', '1s')});
		is($st, '42501', 'another role without the grant is still refused');
		$node->safe_psql('postgres', 'REVOKE zklock_user FROM app');
		($st) = as_role('app', q{SELECT zk_mutex_acquire('/t210/m', '1s')});
		is($st, '42501', 'after REVOKE zklock_user the role is refused again');
		$node->safe_psql('postgres', 'GRANT zklock_user TO app');
	}
};

############################################################################
# 2. The namespace boundary
############################################################################
subtest 'the namespace boundary: no path reaches outside zklock.namespace' => sub {
	$node->append_conf('postgresql.conf', "zklock.namespace = '/ns210'\n");
	$node->reload;
	ok(wait_sql($node, 'SHOW zklock.namespace', '/ns210', 10), 'namespace /ns210 set by the superuser');
	{
		my $tree0 = zk_tree($zk, '/');
		my ($st, $out, $err) = as_role('app', q{SET zklock.namespace = '/'});
		is($st, '42501', 'a non-superuser cannot SET zklock.namespace') or diag($err);
		($st, $out, $err) = as_role('app', q{SELECT set_config('zklock.namespace', '/other', false)});
		is($st, '42501', 'nor with set_config()') or diag($err);
		($st, $out, $err) = as_role('app', q{BEGIN; SET LOCAL zklock.namespace = '/other'; COMMIT;});
		is($st, '42501', 'nor with SET LOCAL') or diag($err);
		($st, $out, $err) = as_role('app', q{SHOW zklock.namespace}, q{ options='-c zklock.namespace=/other'});
		isnt($out, '/other', 'nor as a connection option (' . ($st // 'no error') . ')');
		($st, $out, $err) = as_role('app', q{ALTER ROLE app SET zklock.namespace = '/other'});
		is($st, '42501', 'nor with ALTER ROLE ... SET') or diag($err);

		for my $p ('/../x', '/a/../../x', '/..', '/./x')
		{
			($st) = as_role('app', "SELECT zk_mutex_acquire('$p', '1s')");
			is($st, '22023', "path $p is refused (22023): no way out of the namespace");
		}
		($st, $out, $err) = as_role('app',
			q{SELECT zk_mutex_acquire('/t210/in', '5s'), (SELECT count(*) FROM zk_participants('/t210/in'))});
		is($out, 't|1', 'a path inside works') or diag($err);
		# the worker deletes an exiting backend's nodes after the backend is gone
		ok(wait_until(sub { @{ lock_children($peer, '/ns210/t210/in') } == 0 }, 10),
			'its node was released when the session ended');
		my $tree = zk_tree($zk, '/');
		my %before = map { $_ => 1 } @{ $tree0 // [] };
		my @outside = grep { !$before{$_} && $_ !~ m{^/ns210(/|$)} } @{ $tree // [] };
		is_deeply(\@outside, [], 'every node zklock created under the namespace setting is under /ns210')
		  or diag("outside: @outside");
	}
};

############################################################################
# 3. The ZooKeeper credentials and creator-only ACL
############################################################################
subtest 'the ZooKeeper credentials and the creator-only ACL keep other clients out' => sub {
	{

		# Set the secret by a reload first: PostgreSQL logs changed parameters
		# with their new value, which must not print the secret.
		$node->append_conf('postgresql.conf', "zklock.auth = '$secret'\n");
		$node->reload;
		if (!wait_sql($node, q{SELECT current_setting('zklock.auth') <> ''}, 't', 5))
		{
			note('zklock.auth did not change on reload (postmaster-only?): restarting');
			$node->restart;
		}
		is($node->safe_psql('postgres', q{SELECT current_setting('zklock.auth') <> ''}), 't',
			'zklock.auth is set');
		is($node->safe_psql('postgres', 'SHOW zklock.auth'), '********', 'SHOW zklock.auth masks the secret');
		is($node->safe_psql('postgres', q{SELECT count(*) FROM pg_settings WHERE name = 'zklock.auth'}), '0',
			'pg_settings does not list zklock.auth');
		my $row = $node->safe_psql('postgres',
			q{SELECT concat_ws('|', current_setting('zklock.auth'),
		    (SELECT concat_ws('|', setting, reset_val, boot_val) FROM pg_settings WHERE name = 'zklock.auth'))});
		unlike($row, qr/\Q$secret_pw\E/, "pg_settings (setting, reset_val, boot_val) and current_setting do not show it: [$row]");
		my $all = $node->safe_psql('postgres', q{SELECT string_agg(setting, ' ') FROM pg_show_all_settings()});
		unlike($all, qr/\Q$secret_pw\E/, 'SHOW ALL / pg_show_all_settings() does not show it');
		my ($st, $out, $err) = as_role('app', 'SHOW zklock.auth');
		unlike("$out $err", qr/\Q$secret_pw\E/, 'a non-superuser does not see it either (' . ($st // $out) . ')');
		($st, $out, $err) = as_role('app', q{SET zklock.auth = 'evil:pw'});
		ok(defined $st && $st ne 'XX000', "a non-superuser cannot set zklock.auth ($st)");

		$node->append_conf('postgresql.conf', "zklock.acl = 'creator'\n");
		$node->restart;    # the new session carries the credentials from its start
		ok(wait_connected($node, 20), 'connected with credentials and creator-only ACL');

		my $s = ZklockTest::Session->new($node, 'acl');
		is($s->value(q{SELECT zk_mutex_acquire('/t210/acl', '5s')}), 't', 'a lock taken with zklock.acl = creator');
		# A stranger cannot even list the lock path: take the node from zk_locks.
		my $listing = $peer->cmd('children /ns210/t210/acl', qr/^(?:children|error children|nonode) /) // '';
		like($listing, qr/NoAuth/i, "a client without credentials cannot list the lock path ($listing)");
		my $name = $node->safe_psql('postgres', q{SELECT node FROM zk_locks WHERE path = '/t210/acl'});
		like($name, qr/^_c_.*-lock-\d{10}$/, 'zk_locks names its node');
		my $lock_node = "/ns210/t210/acl/$name";
		is(zk_acl($zk, $lock_node), 'noauth', 'a client without credentials cannot even read its ACL');
		my $acl = zk_acl($zk, $lock_node, $secret);
		ok((ref $acl && @$acl && !grep { !/^digest:zkuser036:/ } @$acl),
			'with the credentials, its ACL reads creator-only: ' . (ref $acl ? "@$acl" : $acl // 'none'));
		# Deleting a node needs DELETE on its parent, creating one CREATE on the
		# parent: the lock path's own ACL must keep strangers out too.
		my $pacl = zk_acl($zk, '/ns210/t210/acl', $secret);
		ok((ref $pacl && @$pacl && !grep { !/^digest:zkuser036:/ } @$pacl),
			'the lock path /ns210/t210/acl is creator-only too: ' . (ref $pacl ? "@$pacl" : $pacl // 'none'));
		my ($rc, $lines) = zktool('setdata', $zk, $lock_node, '__REVOKE__');
		is($lines->[0], "noauth $lock_node", 'a client without credentials cannot write into it (no revocation by strangers)');
		my $fake = '/ns210/t210/acl/_c_00000000-0000-4000-8000-000000000000-lock-0000000000';
		($rc, $lines) = zktool('create', $zk, $fake);
		is($lines->[0], "noauth $fake", 'nor plant a fake lock node that would sort first');
		($rc, $lines) = zktool('delete', $zk, $lock_node, 'zkuser036:wrong');
		is($lines->[0], "noauth $lock_node", 'a client with a wrong password cannot delete the lock node (NoAuth)');
		($rc, $lines) = zktool('delete', $zk, $lock_node);
		is($lines->[0], "noauth $lock_node", 'a ZooKeeper client without credentials cannot delete it (NoAuth)');
		my $d = $peer->delete($lock_node) // '';
		like($d, qr/^error.*NoAuth/i, "a Curator client without credentials cannot delete it ($d)");
		ok(ref zk_acl($zk, $lock_node, $secret), 'the lock node is still there');
		is($s->value(q{SELECT zk_mutex_release('/t210/acl')}), 't', 'zklock itself releases it');
		ok(wait_until(sub { !defined zk_acl($zk, $lock_node, $secret) }, 10), 'and it is gone');
		$s->quit;
	}
};

# The secret never reached the server log (reload, restart, connects).
subtest 'the secret never reaches the server log' => sub {
	my $log = log_contents($node);
	unlike($log, qr/\Q$secret_pw\E/, 'the server log never contains the secret');
};

$peer->quit;
$node->stop;
stop_zk($zk);
done_testing();

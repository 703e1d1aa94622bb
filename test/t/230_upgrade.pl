
# 230_upgrade: zklock installs and updates like an extension a DBA trusts.
#
# What users rely on:
#   - every version ever released still installs (CREATE EXTENSION zklock
#     VERSION 'x'), and the one library this tree builds serves it: each
#     recipe family of 0.1 works;
#   - ALTER EXTENSION zklock UPDATE runs while sessions hold zklock locks,
#     without waiting for them, and takes nothing from them: a Curator
#     peer still cannot take what they hold, zk_locks shows the same nodes,
#     the holders release through the updated functions, an open
#     transaction commits and gives back its _xact lock, and a role
#     granted zklock_user uses the updated functions;
#   - an updated database is the database a fresh install of the same
#     version makes: every member of the extension, its definition
#     (signature, defaults, result, volatility, parallel label,
#     strictness, language, symbol), privileges, initial privileges,
#     owner and description, the view, the extension's row, and the role
#     zklock_user (compared by test/perl/ZklockCatalog.pm, which is shown
#     here to catch a changed comment, grant, default, volatility label,
#     view privilege and a lost member one at a time); pg_dump, plain and
#     as pg_upgrade runs it (--binary-upgrade, OIDs masked), writes the
#     same for both;
#   - 0.2 updated is a fresh install too, and zk_locks of both versions
#     reads the one library (0.3 adds the column waits_for); likewise 0.3
#     updated, and zk_status of both (0.4 adds tls, sasl_identity and
#     connection_failure), and 0.4 updated (0.5 adds tls_cert_expires,
#     tls_server_cert_expires and tls_warning), and 0.5 updated, and
#     zk_locks and zk_status of both (0.6 adds session_timeout_asked and
#     pending to zk_status, datid, datname, usesysid, usename and
#     blocking_pids to zk_locks, the view zk_stat_worker, the try forms
#     and the integer and text timeout overloads);
#   - from 0.2 on, zk_leader works whatever the caller's search_path (0.1
#     called zk_participants unqualified), and CREATE EXTENSION grants and
#     revokes on the extension's own functions only (0.1 took PUBLIC's
#     EXECUTE from any zk_ function already in the schema).
# Every version and every update path is listed in @VERSIONS below; the
# first part fails when the installed scripts offer one it does not list.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use ZklockTest;
use ZklockCatalog;

# Every released version, oldest first; the last is default_version.  A
# new version is added here, with its full script and an update script
# from the one before it (src/README, "Versions and upgrades").
my @VERSIONS = ('0.1', '0.2', '0.3', '0.4', '0.5', '0.6');
my $CURRENT = $VERSIONS[-1];

my $zk = start_zk();
my $node = new_zklock_node('upgrade', $zk);
my $peer = new_peer($zk);

$node->safe_psql('postgres', 'CREATE ROLE app LOGIN');
$node->safe_psql('postgres', 'GRANT zklock_user TO app');
# a: 0.1, then updated with locks held; b: fresh default; c: fresh default
# for the planted differences; d: 0.1 in a schema of its own; e and f: a
# user's own zk_ function beside a fresh install of the default and of 0.1;
# g, h, i and j: 0.2, 0.3, 0.4 and 0.5 updated
$node->safe_psql('postgres', "CREATE DATABASE $_") for qw(a b c d e f g h i j);

sub sql { my ($db, $q) = @_; return $node->safe_psql($db, $q); }

subtest 'the installed scripts offer exactly the versions this test lists, each with a way to the default' => sub {
	is(sql('postgres', q{SELECT default_version FROM pg_available_extensions WHERE name = 'zklock'}),
		$CURRENT, "default_version is $CURRENT");
	is(sql('postgres', q{SELECT string_agg(version, ' ' ORDER BY version) FROM pg_available_extension_versions WHERE name = 'zklock'}),
		join(' ', sort @VERSIONS), 'the versions installed are the versions listed here');
	for my $v (@VERSIONS[ 0 .. $#VERSIONS - 1 ])
	{
		isnt(sql('postgres', qq{SELECT coalesce(path, 'none') FROM pg_extension_update_paths('zklock') WHERE source = '$v' AND target = '$CURRENT'}),
			'none', "ALTER EXTENSION UPDATE has a path from $v to $CURRENT");
	}
	is(sql('postgres', q{SELECT path FROM pg_extension_update_paths('zklock') WHERE source = '0.1' AND target = '0.2'}),
		'0.1--0.2', '0.1 goes to 0.2 by zklock--0.1--0.2.sql');
	is(sql('postgres', q{SELECT path FROM pg_extension_update_paths('zklock') WHERE source = '0.2' AND target = '0.3'}),
		'0.2--0.3', '0.2 goes to 0.3 by zklock--0.2--0.3.sql');
	is(sql('postgres', q{SELECT path FROM pg_extension_update_paths('zklock') WHERE source = '0.3' AND target = '0.4'}),
		'0.3--0.4', '0.3 goes to 0.4 by zklock--0.3--0.4.sql');
	is(sql('postgres', q{SELECT path FROM pg_extension_update_paths('zklock') WHERE source = '0.4' AND target = '0.5'}),
		'0.4--0.5', '0.4 goes to 0.5 by zklock--0.4--0.5.sql');
	is(sql('postgres', q{SELECT path FROM pg_extension_update_paths('zklock') WHERE source = '0.5' AND target = '0.6'}),
		'0.5--0.6', '0.5 goes to 0.6 by zklock--0.5--0.6.sql');
	is(sql('postgres', q{SELECT extversion FROM pg_extension WHERE extname = 'zklock'}),
		$CURRENT, 'CREATE EXTENSION zklock installs the default version');
};

# The sessions of role app in database a that hold locks across the update.
my ($s_mutex, $s_xact, $s_read, $s_sem, $s_leader);
my (%held_before, $role_before, $leases);

subtest 'version 0.1 still installs, and each recipe family of 0.1 works with this library' => sub {
	sql('a', q{CREATE EXTENSION zklock VERSION '0.1'});
	is(sql('a', q{SELECT extversion FROM pg_extension WHERE extname = 'zklock'}), '0.1',
		"CREATE EXTENSION zklock VERSION '0.1' installs 0.1");
	my $s = ZklockTest::Session->new($node, 'sweep', dbname => 'a', user => 'app');
	my $f = '/t230/family';
	my @calls = (
		[ 'mutex', qq{SELECT zk_mutex_try_acquire('$f/m'), zk_mutex_acquire('$f/m', '5s'), zk_release_all()}, 't|t|1' ],
		[ 'read/write lock', qq{SELECT zk_write_lock_acquire('$f/rw', '5s'), zk_read_lock_acquire('$f/rw', '5s'), zk_read_lock_release('$f/rw'), zk_write_lock_release('$f/rw')}, 't|t|t|t' ],
		[ 'semaphore mutex', qq{SELECT zk_semaphore_mutex_acquire('$f/sm', '5s'), zk_semaphore_mutex_release('$f/sm')}, 't|t' ],
		[ 'multi-lock', qq{SELECT zk_multi_lock_acquire(ARRAY['$f/m1', '$f/m2'], '5s'), zk_multi_lock_release(ARRAY['$f/m1', '$f/m2'])}, 't|t' ],
		[ 'semaphore', qq{SELECT cardinality(zk_semaphore_acquire('$f/sem', 3, 2, '5s')), zk_semaphore_release_all('$f/sem')}, '2|2' ],
		[ 'barrier', qq{SELECT zk_barrier_set('$f/b'), zk_barrier_wait('$f/b', '0'), zk_barrier_remove('$f/b'), zk_barrier_wait('$f/b', '0')}, 't|f|t|t' ],
		[ 'double barrier', qq{SELECT zk_double_barrier_enter('$f/db', 1, '5s'), zk_double_barrier_leave('$f/db', '5s')}, 't|t' ],
		[ 'shared count', qq{SELECT zk_shared_count_get('$f/sc', 5), zk_shared_count_set('$f/sc', 7), (zk_shared_count_get_versioned('$f/sc')).value}, '5||7' ],
		[ 'shared count try_set', qq{SELECT zk_shared_count_try_set('$f/sc', 8, (zk_shared_count_get_versioned('$f/sc')).version), zk_shared_count_get('$f/sc')}, 't|8' ],
		[ 'atomic long', qq{SELECT zk_atomic_long_add('$f/al', 3), zk_atomic_long_compare_and_set('$f/al', 3, 10), zk_atomic_long_set('$f/al', 11), zk_atomic_long_get('$f/al')}, '3|t||11' ],
		[ 'participants and token', qq{SELECT zk_mutex_acquire('$f/t', '5s'), (SELECT count(*) FROM zk_participants('$f/t')), zk_lock_token('$f/t') > 0, zk_mutex_release('$f/t')}, 't|1|t|t' ],
		[ 'introspection', qq{SELECT state, (SELECT count(*) FROM zk_locks WHERE pid = pg_backend_pid()) FROM zk_status()}, 'connected|0' ],
		[ 'leader election', qq{SELECT zk_leader_join('$f/e', 'sweep'), zk_leader_await('$f/e', '5s'), zk_has_leadership('$f/e'), zk_leader('$f/e'), zk_leader_leave('$f/e')}, 't|t|t|sweep|t' ],
	);
	for my $c (@calls)
	{
		my $r = $s->query($c->[1]);
		is($r->{out}, $c->[2], "0.1's $c->[0] functions work") or diag($r->{err});
	}
	# revocation: the holder is asked, through the worker's watch
	is($s->value(qq{SELECT zk_mutex_acquire('$f/rv', '5s', true), zk_revoke('$f/rv')}), 't|1',
		"0.1's zk_revoke asks the holder of a revocable mutex");
	ok(wait_until(sub { $s->value(q{SELECT coalesce(string_agg(r, ','), '') FROM zk_revocation_requested() r}) eq "$f/rv" }, 30,
			'zk_revocation_requested lists the path'),
		"0.1's zk_revocation_requested shows the request");
	is($s->value(qq{SELECT zk_mutex_release('$f/rv')}), 't', 'the revoked holder releases');
	$s->quit;
};

subtest 'sessions of a role granted zklock_user hold locks through 0.1; Curator sees them held' => sub {
	my %o = (dbname => 'a', user => 'app');
	$s_mutex = ZklockTest::Session->new($node, 'mutex', %o);
	$s_xact = ZklockTest::Session->new($node, 'xact', %o);
	$s_read = ZklockTest::Session->new($node, 'read', %o);
	$s_sem = ZklockTest::Session->new($node, 'sem', %o);
	$s_leader = ZklockTest::Session->new($node, 'leader', %o);
	is($s_mutex->value(q{SELECT zk_mutex_acquire('/t230/mutex', '10s')}), 't', 'a session-level mutex');
	$s_xact->value('BEGIN');
	is($s_xact->value(q{SELECT zk_mutex_acquire_xact('/t230/xact', '10s')}), 't',
		'an _xact mutex inside a transaction that stays open');
	is($s_read->value(q{SELECT zk_read_lock_acquire('/t230/rw', '10s')}), 't', 'a read lock');
	$leases = $s_sem->value(q{SELECT array_to_string(zk_semaphore_acquire('/t230/sem', 2, 2, '10s'), ',')});
	like($leases, qr/^[^,]+,[^,]+$/, 'both leases of a semaphore of 2');
	is($s_leader->value(q{SELECT zk_leader_join('/t230/election', 'sql-a'), zk_leader_await('/t230/election', '10s')}),
		't|t', 'a leader latch member that leads');

	%held_before = held_rows();
	is(scalar keys %held_before, 5, 'zk_locks shows the five')
	  or diag(explain \%held_before);
	curator_sees_held('before the update');
	$role_before = role_facts();
};

# held_rows(): { "pid path" => "recipe mode scope state node" } of the
# locks zk_locks shows under /t230/ (not the sweep's)
sub held_rows
{
	my %h;
	for (split /\n/, sql('a', q{SELECT pid, path, recipe, mode, scope, state, coalesce(node, '')
	                            FROM zk_locks WHERE path LIKE '/t230/%' AND path NOT LIKE '/t230/family/%'}))
	{
		my ($pid, $path, @rest) = split /\|/, $_, -1;
		$h{"$pid $path"} = join(' ', @rest);
	}
	return %h;
}

sub role_facts
{
	my $s = ZklockCatalog::snapshot($node, 'a');
	return join("\n", map { "$_ = $s->{$_}" } grep { /^role / } sort keys %$s);
}

# curator_sees_held($when): a Curator client cannot take any of the five
my $cid = 0;
sub curator_sees_held
{
	my ($when) = @_;
	my $id = 'c' . ++$cid;
	$peer->acquire($id, '/t230/mutex', 500);
	is($peer->acquire_result($id), 'timeout', "Curator cannot take the session mutex $when");
	$id = 'c' . ++$cid;
	$peer->acquire($id, '/t230/xact', 500);
	is($peer->acquire_result($id), 'timeout', "Curator cannot take the _xact mutex $when");
	$id = 'c' . ++$cid;
	$peer->lock('write', $id, '/t230/rw', 500);
	is($peer->acquire_result($id), 'timeout', "Curator cannot take the write lock behind the reader $when");
	$id = 'c' . ++$cid;
	$peer->lease($id, '/t230/sem', 2, 1, 500);
	is($peer->lease_result($id), 'timeout', "Curator gets no lease of the full semaphore $when");
	$id = 'j' . ++$cid;
	$peer->cmd("latch_start $id /t230/election java-$id", qr/^latch $id started/);
	is($peer->cmd("latch_leader $id", qr/^latchleader $id/), "latchleader $id sql-a",
		"Curator's LeaderLatch names the SQL member leader $when");
	$peer->cmd("latch_close $id", qr/^latch $id closed/);
	return;
}

subtest 'ALTER EXTENSION zklock UPDATE runs while the locks are held, and they stay held' => sub {
	# bounded: an update that waited for a holder would fail here
	my ($rc, $out, $err) = $node->psql('a',
		q{SET lock_timeout = '10s'; SET statement_timeout = '30s'; ALTER EXTENSION zklock UPDATE},
		timeout => 60);
	is($rc, 0, "ALTER EXTENSION zklock UPDATE succeeds in another session") or diag($err);
	is(sql('a', q{SELECT extversion FROM pg_extension WHERE extname = 'zklock'}), $CURRENT,
		"the extension is at $CURRENT");
	my %after = held_rows();
	is_deeply(\%after, \%held_before, 'zk_locks shows the same holders, nodes and states after the update');
	curator_sees_held('after the update');
	is(role_facts(), $role_before, 'zklock_user and its members are as before the update');
};

subtest 'after the update the holders release through the updated functions, and Curator gets what they gave back' => sub {
	is($s_mutex->value(q{SELECT zk_mutex_release('/t230/mutex')}), 't', 'the session mutex is released');
	$peer->acquire('m1', '/t230/mutex', 10000);
	is($peer->acquire_result('m1'), 'acquired', 'Curator takes the mutex the SQL session gave back');
	is($peer->release('m1'), 'released', 'Curator releases it');

	my $r = $s_xact->query('COMMIT');
	is($r->{err}, '', 'the transaction that was open across the update commits') or diag($r->{err});
	ok(wait_no_zklock_rows($node, '/t230/xact'), 'its _xact lock is gone from zk_locks');
	$peer->acquire('m2', '/t230/xact', 10000);
	is($peer->acquire_result('m2'), 'acquired', 'Curator takes the _xact mutex after the COMMIT');
	is($peer->release('m2'), 'released', 'Curator releases it');

	is($s_read->value(q{SELECT zk_read_lock_release('/t230/rw')}), 't', 'the read lock is released');
	$peer->lock('write', 'w1', '/t230/rw', 10000);
	is($peer->acquire_result('w1'), 'acquired', 'Curator takes the write lock');
	is($peer->release('w1', 'write'), 'released', 'Curator releases it');

	is($s_sem->value(q{SELECT zk_semaphore_release_all('/t230/sem')}), '2', 'both leases are returned');
	$peer->lease('l1', '/t230/sem', 2, 2, 10000);
	is(ref $peer->lease_result('l1'), 'ARRAY', 'Curator gets both leases');
	is($peer->release('l1', 'lease'), 'released', 'Curator returns them');

	is($s_leader->value(q{SELECT zk_has_leadership('/t230/election'), zk_leader('/t230/election')}), 't|sql-a',
		'the member still leads, and the updated zk_leader names it');
	$s_leader->value('BEGIN');
	is($s_leader->value(q{SELECT zk_leader_xact('/t230/election')}), 't', 'zk_leader_xact in a transaction');
	$r = $s_leader->query('COMMIT');
	is($r->{err}, '', 'which commits') or diag($r->{err});
	$peer->cmd('latch_start jz /t230/election java-z', qr/^latch jz started/);
	is($s_leader->value(q{SELECT zk_leader_leave('/t230/election')}), 't', 'the SQL member leaves');
	ok(defined $peer->wait_reply(qr/^isleader jz$/, 30), "Curator's LeaderLatch leads next");
	$peer->cmd('latch_close jz', qr/^latch jz closed/);
	is(scalar(() = held_rows()), 0, 'nothing of the five is left in zk_locks');
	$_->quit for ($s_mutex, $s_xact, $s_read, $s_sem, $s_leader);
};

subtest 'a new session of a role granted zklock_user uses the updated extension' => sub {
	my $s = ZklockTest::Session->new($node, 'new', dbname => 'a', user => 'app');
	is($s->value(q{SELECT zk_mutex_acquire('/t230/new', '10s'), zk_mutex_release('/t230/new')}), 't|t',
		'it takes and releases a mutex');
	is($s->value(q{SELECT count(*) FROM pg_proc p JOIN pg_depend d ON d.objid = p.oid AND d.classid = 'pg_proc'::regclass
	                 JOIN pg_extension e ON d.refobjid = e.oid AND d.refclassid = 'pg_extension'::regclass
	                WHERE e.extname = 'zklock' AND d.deptype = 'e' AND obj_description(p.oid, 'pg_proc') IS NULL}), '0',
		'every function of the extension has a description (\df+)');
	$s->quit;
};

subtest "the updated database's catalog is a fresh ${CURRENT}'s, object by object" => sub {
	sql('b', 'CREATE EXTENSION zklock');
	my $snap_a = ZklockCatalog::snapshot($node, 'a');
	my $snap_b = ZklockCatalog::snapshot($node, 'b');
	my $funcs = grep { /^member function / } keys %$snap_b;
	# as many as the current version's full script creates (a statement
	# CREATE [OR REPLACE] FUNCTION at the start of a line, so not the
	# comments), so that a new function needs no edit here and a snapshot
	# that misses one still fails
	my $script = "$ZklockTest::REPO/zklock--$CURRENT.sql";
	my $created = () = slurp_file($script) =~ /^[ \t]*CREATE\s+(?:OR\s+REPLACE\s+)?FUNCTION\s/gmi;
	cmp_ok($created, '>', 0, "zklock--$CURRENT.sql creates $created functions");
	is($funcs, $created,
		"the snapshot holds $funcs member functions, the $created functions zklock--$CURRENT.sql creates");
	ok(exists $snap_b->{'member view zk_locks'} && exists $snap_b->{'member view zk_stat_worker'},
		'and the views');
	my @diff = ZklockCatalog::compare($snap_a, $snap_b, 'updated', 'fresh');
	is(scalar @diff, 0, 'updated and fresh databases hold the same catalog facts')
	  or diag(join("\n", @diff));

	# pg_dump: without --binary-upgrade only CREATE EXTENSION and privileges
	# that differ from the extension's initial ones; with it, every member,
	# its comment and privileges, as pg_upgrade recreates them
	for my $bu (0, 1)
	{
		my $what = $bu ? 'pg_dump --binary-upgrade (OIDs masked)' : 'pg_dump --schema-only';
		my @d = ZklockCatalog::compare_text(
			ZklockCatalog::dump_text($node, 'a', binary_upgrade => $bu),
			ZklockCatalog::dump_text($node, 'b', binary_upgrade => $bu));
		is(scalar @d, 0, "$what writes the same for both") or diag(join("\n", @d[ 0 .. ($#d > 20 ? 20 : $#d) ]));
	}
	my $bu_b = ZklockCatalog::dump_text($node, 'b', binary_upgrade => 1);
	like($bu_b, qr/COMMENT ON FUNCTION public\.zk_barrier_set/,
		'the binary-upgrade dump carries the members\' comments (so it compares them)');
	like($bu_b, qr/GRANT (ALL|EXECUTE) ON FUNCTION public\.zk_mutex_acquire\(.*\) TO zklock_user/,
		'and their privileges, recorded as the extension\'s initial ones');
	unlike(ZklockCatalog::dump_text($node, 'a'), qr/GRANT|REVOKE/,
		'a plain dump of the updated database has no GRANT or REVOKE: the update recorded its privileges as the extension\'s own');
};

# same_as_fresh($db, $from): database $db, updated from $from, holds the
# catalog facts of a fresh install (database b), and pg_dump
# --binary-upgrade writes the same for both.
sub same_as_fresh
{
	my ($db, $from) = @_;
	my @diff = ZklockCatalog::compare(ZklockCatalog::snapshot($node, $db),
		ZklockCatalog::snapshot($node, 'b'), "updated from $from", 'fresh');
	is(scalar @diff, 0, "$from updated and a fresh install hold the same catalog facts")
	  or diag(join("\n", @diff));
	my @d = ZklockCatalog::compare_text(
		ZklockCatalog::dump_text($node, $db, binary_upgrade => 1),
		ZklockCatalog::dump_text($node, 'b', binary_upgrade => 1));
	is(scalar @d, 0, 'pg_dump --binary-upgrade writes the same for both')
	  or diag(join("\n", @d[ 0 .. ($#d > 20 ? 20 : $#d) ]));
	return;
}

subtest '0.2 updated is a fresh install; zk_locks of 0.2 and of the default read the same library' => sub {
	sql('g', q{CREATE EXTENSION zklock VERSION '0.2'});
	is(sql('g', q{SELECT count(*) FROM pg_attribute WHERE attrelid = 'zk_locks'::regclass AND attnum > 0}),
		'12', "0.2's zk_locks has 12 columns");
	is(sql('g', q{SELECT count(*) FROM zk_locks}), '0', "0.2's zk_locks reads this library");
	sql('g', 'ALTER EXTENSION zklock UPDATE');
	is(sql('g', q{SELECT extversion FROM pg_extension WHERE extname = 'zklock'}), $CURRENT, "updated to $CURRENT");
	is(sql('g', q{SELECT string_agg(attname, ',' ORDER BY attnum) FROM pg_attribute WHERE attrelid = 'zk_locks'::regclass AND attnum BETWEEN 11 AND 13}),
		'revocation_requested,waiting_for,waits_for', "from 0.3 zk_locks has waits_for after waiting_for");
	same_as_fresh('g', '0.2');
};

subtest '0.3 updated to 0.4 is a fresh 0.4; zk_status of 0.3 and of 0.4 read the same library' => sub {
	sql('h', q{CREATE EXTENSION zklock VERSION '0.3'});
	is(sql('h', q{SELECT array_length(proallargtypes, 1) FROM pg_proc WHERE oid = 'zk_status()'::regprocedure}),
		'25', "0.3's zk_status() has 25 columns");
	is(sql('h', q{SELECT state IS NOT NULL FROM zk_status()}), 't', "0.3's zk_status() reads this library");
	sql('h', 'ALTER EXTENSION zklock UPDATE');
	is(sql('h', q{SELECT extversion FROM pg_extension WHERE extname = 'zklock'}), $CURRENT, "updated to $CURRENT");
	is(sql('h', q{SELECT array_to_string(proargnames[25:28], ',') FROM pg_proc WHERE oid = 'zk_status()'::regprocedure}),
		'batches_failed,tls,sasl_identity,connection_failure', "from 0.4 zk_status() has tls, sasl_identity, connection_failure after batches_failed");
	is(sql('h', q{SELECT tls::text FROM zk_status()}), 'false', "zk_status() says the connection is not TLS");
	same_as_fresh('h', '0.3');
};

subtest '0.4 updated to 0.5 is a fresh 0.5; zk_status of 0.4 and of 0.5 read the same library' => sub {
	sql('i', q{CREATE EXTENSION zklock VERSION '0.4'});
	is(sql('i', q{SELECT array_length(proallargtypes, 1) FROM pg_proc WHERE oid = 'zk_status()'::regprocedure}),
		'28', "0.4's zk_status() has 28 columns");
	is(sql('i', q{SELECT tls::text, connection_failure IS NULL FROM zk_status()}), 'false|t', "0.4's zk_status() reads this library");
	sql('i', 'ALTER EXTENSION zklock UPDATE');
	is(sql('i', q{SELECT extversion FROM pg_extension WHERE extname = 'zklock'}), $CURRENT, "updated to $CURRENT");
	is(sql('i', q{SELECT array_to_string(proargnames[28:31], ',') FROM pg_proc WHERE oid = 'zk_status()'::regprocedure}),
		'connection_failure,tls_cert_expires,tls_server_cert_expires,tls_warning',
		"0.5's zk_status() ends with the certificates' expiry and the warning");
	is(sql('i', q{SELECT tls_cert_expires IS NULL AND tls_server_cert_expires IS NULL AND tls_warning IS NULL FROM zk_status()}),
		't', "0.5's zk_status(): no certificate on a plaintext connection");
	same_as_fresh('i', '0.4');
};

subtest '0.5 updated to 0.6 is a fresh 0.6; zk_locks and zk_status of 0.5 and 0.6 read the same library; its try forms and integer timeouts work' => sub {
	sql('j', q{CREATE EXTENSION zklock VERSION '0.5'});
	is(sql('j', q{SELECT array_length(proallargtypes, 1) FROM pg_proc WHERE oid = 'zk_status()'::regprocedure}),
		'31', "0.5's zk_status() has 31 columns");
	is(sql('j', q{SELECT tls_warning IS NULL FROM zk_status()}), 't', "0.5's zk_status() reads this library");
	is(sql('j', q{SELECT count(*) FROM pg_attribute WHERE attrelid = 'zk_locks'::regclass AND attnum > 0}),
		'13', "0.5's zk_locks has 13 columns");
	is(sql('j', q{SELECT count(*) FROM zk_locks}), '0', "0.5's zk_locks reads this library");
	my ($rc, $out, $err) = $node->psql('j', q{SELECT zk_read_lock_try_acquire('/t230/j')},
		extra_params => [ '-v', 'VERBOSITY=verbose' ], timeout => 30);
	is(sqlstate_of($err), '42883', '0.5 has no zk_read_lock_try_acquire');
	sql('j', 'ALTER EXTENSION zklock UPDATE');
	is(sql('j', q{SELECT extversion FROM pg_extension WHERE extname = 'zklock'}), $CURRENT, "updated to $CURRENT");
	is(sql('j', q{SELECT string_agg(attname, ',' ORDER BY attnum) FROM pg_attribute WHERE attrelid = 'zk_locks'::regclass AND attnum > 12}),
		'waits_for,datid,datname,usesysid,usename,blocking_pids',
		"0.6's zk_locks ends with the database, the role and blocking_pids");
	is(sql('j', q{SELECT count(*) FROM zk_stat_worker WHERE stats_reset IS NOT NULL}), '1', "0.6's zk_stat_worker reads this library");
	is(sql('j', q{SELECT array_to_string(proargnames[31:33], ',') FROM pg_proc WHERE oid = 'zk_status()'::regprocedure}),
		'tls_warning,session_timeout_asked,pending',
		"0.6's zk_status() ends with the session timeout asked for and a setting pending");
	is(sql('j', q{SELECT session_timeout_asked > 0 AND pending IS NULL FROM zk_status()}), 't',
		"0.6's zk_status() reads this library");
	is(sql('j', q{SELECT zk_read_lock_try_acquire('/t230/j') AND zk_read_lock_release('/t230/j')
	              AND zk_mutex_acquire('/t230/j', 5000) AND zk_mutex_release('/t230/j')}),
		't', 'the updated functions: a try form and a timeout in milliseconds');
	same_as_fresh('j', '0.5');
};

subtest 'the comparison reports each planted difference, and nothing once it is undone' => sub {
	sql('c', 'CREATE EXTENSION zklock');
	my $ref = ZklockCatalog::snapshot($node, 'b');
	my @diff = ZklockCatalog::compare(ZklockCatalog::snapshot($node, 'c'), $ref);
	is(scalar @diff, 0, 'two fresh installs are the same') or diag(join("\n", @diff));
	my $comment = sql('c', q{SELECT obj_description('zk_barrier_set(text)'::regprocedure, 'pg_proc')});
	$comment =~ s/'/''/g;
	my @plants = (
		[ 'a changed comment', qr/^function zk_barrier_set\(text\) description:/,
		  q{COMMENT ON FUNCTION zk_barrier_set(text) IS 'something else'},
		  qq{COMMENT ON FUNCTION zk_barrier_set(text) IS '$comment'} ],
		[ 'EXECUTE revoked from zklock_user', qr/^function zk_semaphore_release_all\(text\) (acl|execute by zklock_user):/,
		  q{REVOKE EXECUTE ON FUNCTION zk_semaphore_release_all(text) FROM zklock_user},
		  q{GRANT EXECUTE ON FUNCTION zk_semaphore_release_all(text) TO zklock_user} ],
		[ 'EXECUTE granted to PUBLIC', qr/^function zk_revoke\(text\) (acl|execute by PUBLIC):/,
		  q{GRANT EXECUTE ON FUNCTION zk_revoke(text) TO PUBLIC},
		  q{REVOKE EXECUTE ON FUNCTION zk_revoke(text) FROM PUBLIC} ],
		[ 'a changed default', qr/^function zk_barrier_wait\(text,interval\) def:/,
		  q{CREATE OR REPLACE FUNCTION zk_barrier_wait(path text, timeout interval DEFAULT '5s') RETURNS boolean
		    AS '$libdir/zklock', 'zk_barrier_wait' LANGUAGE C VOLATILE PARALLEL UNSAFE},
		  q{CREATE OR REPLACE FUNCTION zk_barrier_wait(path text, timeout interval DEFAULT NULL) RETURNS boolean
		    AS '$libdir/zklock', 'zk_barrier_wait' LANGUAGE C VOLATILE PARALLEL UNSAFE} ],
		[ 'a changed volatility label', qr/^function zk_status\(\) def:/,
		  q{ALTER FUNCTION zk_status() STABLE}, q{ALTER FUNCTION zk_status() VOLATILE} ],
		[ 'a changed parallel label', qr/^function zk_lock_token\(text\) def:/,
		  q{ALTER FUNCTION zk_lock_token(text) PARALLEL SAFE}, q{ALTER FUNCTION zk_lock_token(text) PARALLEL UNSAFE} ],
		[ 'STRICT added', qr/^function zk_leader_join\(text,text,text\) def:/,
		  q{ALTER FUNCTION zk_leader_join(text, text, text) STRICT}, q{ALTER FUNCTION zk_leader_join(text, text, text) CALLED ON NULL INPUT} ],
		[ 'the view revoked from PUBLIC', qr/^view zk_locks (acl|select by PUBLIC):/,
		  q{REVOKE SELECT ON zk_locks FROM PUBLIC}, q{GRANT SELECT ON zk_locks TO PUBLIC} ],
		[ 'a function no longer a member', qr/^(member function zk_leader\(text\)|schema function zk_leader\(text\)):/,
		  q{ALTER EXTENSION zklock DROP FUNCTION zk_leader(text)}, q{ALTER EXTENSION zklock ADD FUNCTION zk_leader(text)} ],
	);
	for my $p (@plants)
	{
		my ($what, $re, $plant, $undo) = @$p;
		sql('c', $plant);
		my @d = ZklockCatalog::compare(ZklockCatalog::snapshot($node, 'c'), $ref, 'planted', 'fresh');
		ok(scalar(grep { $_ =~ $re } @d), "the comparison reports $what")
		  or diag(join("\n", 'reported:', @d));
		sql('c', $undo);
		@d = ZklockCatalog::compare(ZklockCatalog::snapshot($node, 'c'), $ref, 'undone', 'fresh');
		is(scalar @d, 0, "and nothing once $what is undone") or diag(join("\n", @d));
	}
	# the dump comparison catches a changed comment too
	sql('c', q{COMMENT ON FUNCTION zk_barrier_set(text) IS 'something else'});
	my @d = ZklockCatalog::compare_text(ZklockCatalog::dump_text($node, 'c', binary_upgrade => 1),
		ZklockCatalog::dump_text($node, 'b', binary_upgrade => 1));
	ok(scalar(grep { /zk_barrier_set/ } @d), 'the binary-upgrade dump comparison reports a changed comment')
	  or diag(join("\n", @d));
};

subtest 'from 0.2 on zk_leader works whatever the search_path; 0.1 in a schema of its own updates too' => sub {
	sql('d', q{CREATE SCHEMA zk; CREATE EXTENSION zklock VERSION '0.1' SCHEMA zk});
	my ($rc, $out, $err) = $node->psql('d', q{SET search_path = public; SELECT zk.zk_leader('/t230/none')},
		extra_params => [ '-v', 'VERBOSITY=verbose' ], timeout => 30);
	is(sqlstate_of($err), '42883', "0.1's zk_leader fails when its schema is not on the search_path")
	  or diag("rc $rc out [$out] err [$err]");
	sql('d', 'ALTER EXTENSION zklock UPDATE');
	is(sql('d', q{SELECT extversion FROM pg_extension WHERE extname = 'zklock'}), $CURRENT, "updated to $CURRENT");
	($rc, $out, $err) = $node->psql('d', q{SET search_path = public; SELECT coalesce(zk.zk_leader('/t230/none'), 'no leader')},
		timeout => 30);
	is($err, '', 'the updated zk_leader works with another search_path');
	is($out, 'no leader', 'and says there is no leader');
};

subtest "from 0.2 on CREATE EXTENSION leaves the privileges of a user's own zk_ function alone" => sub {
	sql('e', q{CREATE FUNCTION zk_own_report() RETURNS int LANGUAGE sql AS 'SELECT 1'});
	sql('e', 'CREATE EXTENSION zklock');
	is(sql('e', q{SELECT has_function_privilege('public', 'zk_own_report()', 'EXECUTE'),
	                     has_function_privilege('zklock_user', 'zk_mutex_acquire(text, interval, boolean)', 'EXECUTE'),
	                     has_function_privilege('public', 'zk_mutex_acquire(text, interval, boolean)', 'EXECUTE')}),
		't|t|f', "PUBLIC keeps EXECUTE on the user's function; the extension's own are granted as always");
	sql('f', q{CREATE FUNCTION zk_own_report() RETURNS int LANGUAGE sql AS 'SELECT 1'});
	sql('f', q{CREATE EXTENSION zklock VERSION '0.1'});
	is(sql('f', q{SELECT has_function_privilege('public', 'zk_own_report()', 'EXECUTE')}), 'f',
		'(0.1 took it away: the defect 0.2 fixes)');
};

$peer->quit;
$node->stop;
stop_zk($zk);
done_testing();


# 232_extension_schema: CREATE EXTENSION zklock SCHEMA s.
#
# What users rely on (doc/sql-reference.md, "Schema"): the extension
# installs into a schema of the DBA's choice and nothing of it lands in
# public; a role granted zklock_user (and USAGE on the schema) calls every
# kind of function schema-qualified with a search_path that does not hold
# the schema: locks, their try, _xact and millisecond forms, a leader
# election (zk_leader reads zk_participants through the extension's schema)
# and the view; a lock taken so excludes a Curator peer and zk_locks shows
# it; unqualified, the functions are not found.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use ZklockTest;

my $zk = start_zk();
my $node = new_zklock_node('schema', $zk);
my $peer = new_peer($zk);

$node->safe_psql('postgres', 'CREATE DATABASE sdb');
$node->safe_psql('sdb', q{CREATE SCHEMA coord;
	CREATE EXTENSION zklock SCHEMA coord;
	CREATE ROLE app LOGIN;
	GRANT zklock_user TO app;
	GRANT USAGE ON SCHEMA coord TO zklock_user});

is($node->safe_psql('sdb', q{SELECT count(*) FROM pg_proc WHERE proname LIKE 'zk\_%' AND pronamespace = 'public'::regnamespace}),
	'0', 'no zklock function in public');
is($node->safe_psql('sdb', q{SELECT extnamespace::regnamespace FROM pg_extension WHERE extname = 'zklock'}),
	'coord', 'the extension lives in coord');

my $s = ZklockTest::Session->new($node, 'app', dbname => 'sdb', user => 'app');
$s->value('SET search_path = public');
my $r = $s->query(q{SELECT zk_mutex_acquire('/t232/m')});
is($r->{sqlstate}, '42883', 'unqualified, zk_mutex_acquire is not found (coord is not on the search_path)');

is($s->value(q{SELECT coord.zk_mutex_acquire('/t232/m', 5000)}), 't',
	'coord.zk_mutex_acquire with a timeout in milliseconds');
is($s->value(q{SELECT coord.zk_mutex_acquire('/t232/m', '5 s')}), 't',
	"and with a quoted interval (a reentrant hold)");
is($s->value(q{SELECT coord.zk_read_lock_try_acquire('/t232/r')}), 't', 'coord.zk_read_lock_try_acquire');
my $locks = $node->safe_psql('sdb',
	q{SELECT recipe || ' ' || path || ' ' || count || ' ' || state FROM coord.zk_locks ORDER BY path});
is($locks, "mutex /t232/m 2 held\nread /t232/r 1 held", 'coord.zk_locks shows both, the mutex held twice');
$peer->acquire('c', '/t232/m', 500);
is($peer->acquire_result('c'), 'timeout', 'a Curator peer cannot take the mutex');

$s->value('BEGIN');
is($s->value(q{SELECT coord.zk_write_lock_try_acquire_xact('/t232/w')}), 't',
	'coord.zk_write_lock_try_acquire_xact');
is($s->value(q{SELECT array_length(coord.zk_semaphore_acquire_xact('/t232/s', 2, 1, 5000), 1)}), '1',
	'coord.zk_semaphore_acquire_xact with milliseconds');
$s->value('COMMIT');
ok(wait_sql($node, q{SELECT count(*) FROM zk_locks WHERE path IN ('/t232/w', '/t232/s')}, '0'),
	'COMMIT gives the _xact locks back');

is($s->value(q{SELECT coord.zk_leader_join('/t232/l', 'me')}), 't', 'coord.zk_leader_join');
ok(wait_until(sub { $s->value(q{SELECT coord.zk_has_leadership('/t232/l')}) eq 't' }, 10, 'leadership'),
	'coord.zk_has_leadership');
is($s->value(q{SELECT coord.zk_leader('/t232/l')}), 'me', 'coord.zk_leader names the leader');
is($s->value(q{SELECT coord.zk_leader_leave('/t232/l')}), 't', 'coord.zk_leader_leave');
is($s->value(q{SELECT state FROM coord.zk_status()}), 'connected', 'coord.zk_status()');
is($s->value(q{SELECT coord.zk_release_all()}), '2', 'coord.zk_release_all gives back the two session locks');
ok(wait_children_count($peer, '/t232/m', 0), 'no node left');

$s->quit;
$peer->quit;
$node->stop;
stop_zk($zk);
done_testing();

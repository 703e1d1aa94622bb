
# 231_drop_extension: zklock leaves a database only when nothing of it is
# held there.
#
# What users rely on:
#   - DROP EXTENSION zklock in database D while a session connected to D
#     holds or waits for a zklock lock is refused with 55006
#     (object_in_use), naming each such session (pid, what, path) and
#     hinting how to end them; nothing is released: the holder still
#     holds, a Curator peer still cannot take the path;
#   - the same for the ways a drop reaches the extension without naming
#     it: DROP SCHEMA ... CASCADE of the extension's schema, DROP OWNED BY
#     its owner;
#   - a session of another database does not block the drop (it uses its
#     own database's extension; zklock locks are cluster-wide, the
#     extension is not), and keeps its lock through the drop;
#   - once the holders released, the drop goes through, no lock node is
#     left in ZooKeeper, and a Curator peer takes the paths;
#   - the role zklock_user stays (roles are the cluster's): DROP ROLE is
#     refused while a database has zklock, naming it, and goes through
#     once none has;
#   - DISCARD ALL (a pooler's reset query) keeps zklock locks, and
#     zk_release_all() gives them back;
#   - with zklock removed from shared_preload_libraries, a zklock function
#     or the view zk_locks fails with 55000 saying how to load it, and
#     DROP EXTENSION works.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use ZklockTest;

my $held = '/t231/held';
my $other = '/t231/other';
my $schema_path = '/t231/schema';

my $zk = start_zk();
my $node = new_zklock_node('drop_extension', $zk);
my $peer = new_peer($zk);

$node->safe_psql('postgres', 'CREATE DATABASE a');
$node->safe_psql('postgres', 'CREATE DATABASE b');
$node->safe_psql('a', 'CREATE EXTENSION zklock');
$node->safe_psql('postgres', 'CREATE ROLE dba SUPERUSER');
$node->safe_psql('b',
	'CREATE SCHEMA s; SET ROLE dba; CREATE EXTENSION zklock SCHEMA s');

# the extension's row in database $db: 1 or 0
sub installed
{
	my ($db) = @_;
	return $node->safe_psql($db,
		q{SELECT count(*) FROM pg_extension WHERE extname = 'zklock'});
}

# run $sql in a fresh session of database $db: (sqlstate, stderr)
sub refused
{
	my ($db, $sql) = @_;
	my ($stdout, $stderr) = ('', '');
	$node->psql($db, "\\set VERBOSITY verbose\n$sql",
		stdout => \$stdout, stderr => \$stderr);
	return (sqlstate_of($stderr), $stderr);
}

# a Curator lock of its own for each try (a peer's ID is bound to one path)
my $curator_ids = 0;

# Curator cannot take $path within a second (someone holds it)
sub curator_excluded
{
	my ($path, $what) = @_;
	my $id = 'c' . ++$curator_ids;
	$peer->acquire($id, $path, 1000);
	is($peer->acquire_result($id), 'timeout', "$what: Curator cannot take $path");
}

# Curator takes and gives back $path
sub curator_takes
{
	my ($path) = @_;
	my $id = 'c' . ++$curator_ids;
	$peer->acquire($id, $path, 5000);
	is($peer->acquire_result($id), 'acquired', "Curator takes $path");
	is($peer->release($id), 'released', "Curator releases $path");
}

my $h = ZklockTest::Session->new($node, 'h', dbname => 'a');
my $o = ZklockTest::Session->new($node, 'o', dbname => 'postgres');
my $w = ZklockTest::Session->new($node, 'w', dbname => 'a');
my $hp = $h->pid;
my $wp = $w->pid;

subtest 'a holder in the database: DROP EXTENSION refused, naming it' => sub {
	is($h->value("SELECT zk_mutex_acquire('$held')"), 't', 'h (database a) holds');
	my ($state, $err) = refused('a', 'DROP EXTENSION zklock');
	is($state, '55006', 'DROP EXTENSION is refused with object_in_use') or diag($err);
	like($err, qr/cannot drop extension "zklock" because sessions of this database hold or wait for zklock locks/,
		'the message says why');
	like($err, qr/Process $hp holds mutex "\Q$held\E"/, 'the detail names the holder and its path');
	like($err, qr/HINT:.*zk_release_all\(\).*pg_terminate_backend/s, 'the hint says how to end them');
	is(installed('a'), '1', 'the extension is still installed');
	ok(wait_held($node, $hp, $held), 'h still holds');
	curator_excluded($held, 'after the refused drop');

	# the dropping session's own lock counts too
	my $r = $h->query('DROP EXTENSION zklock');
	is($r->{sqlstate}, '55006', "the holder's own DROP EXTENSION is refused") or diag($r->{err});
	like($r->{err}, qr/Process $hp holds mutex "\Q$held\E"/, 'naming itself');
};

subtest 'a waiter in the database: DROP EXTENSION refused, naming it' => sub {
	is($o->value("SELECT zk_mutex_acquire('$other')"), 't', 'o (database postgres) holds');
	$w->start("SELECT zk_mutex_acquire('$other')");
	ok(wait_waiting($node, $wp, $other), 'w (database a) waits behind o');
	is($h->value("SELECT zk_mutex_release('$held')"), 't', 'h releases');
	my ($state, $err) = refused('a', 'DROP EXTENSION zklock');
	is($state, '55006', 'DROP EXTENSION is refused') or diag($err);
	like($err, qr/Process $wp waits for mutex "\Q$other\E"/, 'the detail names the waiter and its path');
	unlike($err, qr/Process ${\ $o->pid }/, 'not the holder of database postgres');
	unlike($err, qr/Process $hp/, 'not h, which released');
	is(installed('a'), '1', 'the extension is still installed');
	ok(wait_waiting($node, $wp, $other), 'w still waits');

	is($node->safe_psql('postgres', "SELECT pg_cancel_backend($wp)"), 't', 'cancel w');
	my $rw = $w->result;
	is($rw->{sqlstate}, '57014', 'w gave up its wait') or diag($rw->{err});
};

subtest 'a holder in another database does not block; after release the drop goes through' => sub {
	my ($state, $err) = refused('a', 'DROP EXTENSION zklock');
	is($state, undef, 'DROP EXTENSION in a succeeds') or diag($err);
	is(installed('a'), '0', 'the extension is gone from a');
	ok(wait_held($node, $o->pid, $other), 'o (database postgres) still holds');
	curator_excluded($other, 'after the drop in a');
	# what a pooler's reset query does (doc/operations.md, connection poolers)
	$o->value('DISCARD ALL');
	ok(wait_held($node, $o->pid, $other), 'DISCARD ALL does not release a zklock lock');
	is($o->value('SELECT zk_release_all()'), '1', 'zk_release_all() releases it');
	ok(wait_until(sub { @{ lock_children($peer, $held) } == 0 && @{ lock_children($peer, $other) } == 0 }, 10),
		'no lock node left in ZooKeeper');
	curator_takes($held);
	curator_takes($other);
};

subtest 'DROP SCHEMA CASCADE and DROP OWNED reach the extension: refused too' => sub {
	my $s = ZklockTest::Session->new($node, 's', dbname => 'b');
	my $sp = $s->pid;
	is($s->value("SELECT s.zk_mutex_acquire('$schema_path')"), 't', 's (database b) holds');
	my ($state, $err) = refused('b', 'DROP SCHEMA s CASCADE');
	is($state, '55006', 'DROP SCHEMA s CASCADE is refused') or diag($err);
	like($err, qr/Process $sp holds mutex "\Q$schema_path\E"/, 'naming the holder');
	($state, $err) = refused('b', 'DROP OWNED BY dba');
	is($state, '55006', 'DROP OWNED BY the extension owner is refused') or diag($err);
	like($err, qr/Process $sp holds mutex "\Q$schema_path\E"/, 'naming the holder');
	is(installed('b'), '1', 'the extension is still installed');
	curator_excluded($schema_path, 'after the refused drops');

	is($s->value("SELECT s.zk_mutex_release('$schema_path')"), 't', 's releases');
	($state, $err) = refused('b', 'DROP SCHEMA s CASCADE');
	is($state, undef, 'DROP SCHEMA s CASCADE succeeds') or diag($err);
	is(installed('b'), '0', 'the extension is gone from b');
	ok(wait_until(sub { @{ lock_children($peer, $schema_path) } == 0 }, 10),
		'no lock node left in ZooKeeper');
	curator_takes($schema_path);
	$s->quit;

	# the role is the cluster's: database postgres still grants it
	($state, $err) = refused('a', 'DROP ROLE zklock_user');
	is($state, '2BP01', 'DROP ROLE zklock_user is refused while a database has zklock') or diag($err);
	like($err, qr/in database postgres/, 'naming that database');
};

subtest 'without shared_preload_libraries: a clear error, and DROP EXTENSION works' => sub {
	$_->quit for ($h, $o, $w);
	$node->adjust_conf('postgresql.conf', 'shared_preload_libraries', "''");
	$node->restart;
	my ($state, $err) = refused('postgres', "SELECT zk_mutex_acquire('$held')");
	is($state, '55000', 'a zklock function fails with 55000') or diag($err);
	like($err, qr/zklock must be loaded via shared_preload_libraries/, 'saying what is missing');
	like($err, qr/HINT:.*shared_preload_libraries.*restart/, 'and how to load it');
	($state, $err) = refused('postgres', 'SELECT count(*) FROM zk_locks');
	is($state, '55000', 'so does the view zk_locks') or diag($err);
	($state, $err) = refused('postgres', 'DROP EXTENSION zklock');
	is($state, undef, 'DROP EXTENSION works with the library not loaded') or diag($err);
	is(installed('postgres'), '0', 'the extension is gone');
	($state, $err) = refused('postgres', 'DROP ROLE zklock_user');
	is($state, undef, 'once no database has zklock, DROP ROLE zklock_user goes through') or diag($err);
};

$peer->quit;
$node->stop;
stop_zk($zk);
done_testing();

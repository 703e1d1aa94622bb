
# 170_revocation: cooperative revocation (Curator's Revocable / Revoker).
#
# What users rely on: a revocable zklock holder learns that somebody (a
# Curator client's Revoker.attemptRevoke, or zk_revoke) asked for its lock,
# but keeps the lock until it releases it itself; zk_revoke asks every
# current holder (Curator or zklock, mutex or read/write lock) and only the
# holders, and a revocable Curator holder then releases, letting a SQL
# waiter in.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use ZklockTest;

my $zk = start_zk();
my $node = new_zklock_node('revocation', $zk);
require_functions($node, qw(zk_revoke zk_revocation_requested zk_mutex_acquire zk_read_lock_acquire
  zk_write_lock_acquire));
my $peer = new_peer($zk);

# every zk_locks row of path as { pid, node, mode, state }
sub all_lock_rows
{
	my ($n, $path) = @_;
	my $out = $n->safe_psql('postgres',
		"SELECT pid, node, mode, state FROM zk_locks WHERE path = '$path' ORDER BY node");
	return map { my @f = split /\|/; { pid => $f[0], node => $f[1], mode => $f[2], state => $f[3] } }
	  grep { $_ ne '' } split /\n/, $out;
}

my ($s1, $s2, $s3) = map { ZklockTest::Session->new($node, "s$_") } 1 .. 3;

sub requested
{
	my ($s) = @_;
	return $s->value(q{SELECT coalesce(string_agg(r, ',' ORDER BY r), '') FROM zk_revocation_requested() r});
}

sub wait_requested
{
	my ($s, $expected) = @_;
	my $last;
	my $ok = wait_until(sub { $last = requested($s); $last eq $expected }, 10, "revocation of $expected");
	diag("zk_revocation_requested() in " . $s->name . ": [$last]") unless $ok;
	return $ok;
}

# 1. Curator revokes a revocable SQL mutex holder.
subtest 'Curator revokes a revocable SQL mutex holder, which is told' => sub {
	my $p1 = '/t170/sql_holder';
	is($s1->value("SELECT zk_mutex_acquire('$p1', NULL, true)"), 't', 's1 takes a revocable mutex');
	my $n1 = zk_lock_rows($node, $p1)->{ $s1->pid }{node};
	is($peer->get("$p1/$n1"), '', "a revocable holder's node has empty data (Curator's convention)");
	is(requested($s1), '', 'no revocation requested yet');
	ok($peer->revoke("$p1/$n1"), "Curator's Revoker.attemptRevoke on s1's node");
	ok(wait_requested($s1, $p1), 'zk_revocation_requested() lists the path');
	is( $node->safe_psql('postgres',
			"SELECT state, revocation_requested FROM zk_locks WHERE pid = " . $s1->pid),
		'held|t', 'zk_locks: still held, revocation_requested = true');
	$peer->acquire('c1', $p1, 500);
	is($peer->acquire_result('c1'), 'timeout', 'the lock is not released behind the holder\'s back');
	is($s1->value("SELECT zk_mutex_release('$p1')"), 't', 's1 releases when it decides to');
	$peer->acquire('c1', $p1, 5000);
	is($peer->acquire_result('c1'), 'acquired', 'then Curator gets the lock');
	is($peer->release('c1'), 'released', 'Curator releases');
	is(requested($s1), '', 'the released lock is no longer listed');
};

# 2. zk_revoke asks a revocable Curator holder, which releases; the SQL
#    waiter gets the lock. The waiter's own node is not written.
subtest 'zk_revoke asks a revocable Curator holder, which releases; the SQL waiter gets the lock' => sub {
	my $p2 = '/t170/curator_holder';
	$peer->lock('mutex', 'c2', $p2, -1, 'revocable');
	is($peer->acquire_result('c2'), 'acquired', 'Curator holds a revocable mutex');
	$s2->start("SELECT zk_mutex_acquire('$p2')");
	ok(wait_waiting($node, $s2->pid, $p2), 'SQL waiter queued');
	my $n2 = zk_lock_rows($node, $p2)->{ $s2->pid }{node};
	is($s3->value("SELECT zk_revoke('$p2')"), '1', 'zk_revoke writes the one holder node');
	ok($peer->wait_reply(qr/^revoked c2$/), 'Curator got the revocation request');
	ok($peer->wait_reply(qr/^released c2$/), 'and released');
	my $r = $s2->result;
	is($r->{out}, 't', 'the SQL waiter gets the lock') or diag($r->{err});
	isnt($peer->get("$p2/$n2"), '__REVOKE__', "the waiter's node was not marked");
	is(requested($s2), '', 's2 (not revocable) has no revocation listed');
	is($s2->value("SELECT zk_mutex_release('$p2')"), 't', 's2 releases');
};

# 3. Read/write lock: two revocable Curator readers and a revocable SQL
#    reader; zk_revoke asks all three; the Curator readers release, the SQL
#    reader is told, and a SQL writer gets in once it releases too.
subtest 'zk_revoke on a read lock asks every reader; a SQL writer gets in once they released' => sub {
	my $p3 = '/t170/rw';
	$peer->lock('read', "cr$_", $p3, 5000, 'revocable') for 1 .. 2;
	is($peer->acquire_result("cr$_"), 'acquired', "Curator revocable reader cr$_") for 1 .. 2;
	is($s1->value("SELECT zk_read_lock_acquire('$p3', '5s', true)"), 't', 's1 takes a revocable read lock');
	$s2->start("SELECT zk_write_lock_acquire('$p3')");
	ok(wait_waiting($node, $s2->pid, $p3), 'SQL writer queued');
	is($s3->value("SELECT zk_revoke('$p3')"), '3', 'zk_revoke writes the three reader nodes');
	ok($peer->wait_reply(qr/^released cr$_$/), "cr$_ released on request") for 1 .. 2;
	ok(wait_requested($s1, $p3), 's1 sees its read lock revocation requested');
	ok(!$s2->done, 'the writer still waits for s1');
	is($s1->value("SELECT zk_read_lock_release('$p3')"), 't', 's1 releases');
	my $r = $s2->result;
	is($r->{out}, 't', 'the SQL writer gets the lock') or diag($r->{err});
	is($s2->value("SELECT zk_write_lock_release('$p3')"), 't', 's2 releases');
};

# 4. zk_revoke on a zklock holder from another SQL session.
subtest 'zk_revoke reaches a zklock holder from another SQL session' => sub {
	my $p4 = '/t170/sql_to_sql';
	is($s1->value("SELECT zk_mutex_acquire('$p4', '5s', true)"), 't', 's1 takes a revocable mutex');
	is($s3->value("SELECT zk_revoke('$p4')"), '1', 's3 revokes it');
	ok(wait_requested($s1, $p4), 's1 sees the request');
	is($s3->value("SELECT zk_revoke('/t170/nobody')"), '0', 'zk_revoke on a path with no holder returns 0');
	is($s1->value('SELECT zk_release_all()'), '1', 's1 releases everything');
	ok(wait_sql($node, 'SELECT count(*) FROM zk_locks', '0', 10), 'zk_locks is empty');
};

# 5. A write holder that downgraded holds two nodes (its write node and a
#    read node with the same sequence number): zk_revoke asks both, and
#    not the reader queued behind.
subtest 'a downgraded write holder is asked on both of its nodes, the reader queued behind is not' => sub {
	my $p5 = '/t170/downgrade';
	is($s1->value("SELECT zk_write_lock_acquire('$p5', '5s', true)"), 't', 's1 takes a revocable write lock');
	is($s1->value("SELECT zk_read_lock_acquire('$p5', '5s', true)"), 't', '... and downgrades (read lock too)');
	$s2->start("SELECT zk_read_lock_acquire('$p5')");
	ok(wait_waiting($node, $s2->pid, $p5), 'a SQL reader queues behind the writer');
	my @held = sort map { $_->{node} } grep { $_->{pid} == $s1->pid } all_lock_rows($node, $p5);
	is(scalar @held, 2, 's1 holds two nodes');
	is($s3->value("SELECT zk_revoke('$p5')"), '2', 'zk_revoke writes both nodes of the downgraded holder');
	is($peer->get("$p5/$_"), '__REVOKE__', "node $_ was asked") for @held;
	my ($queued) = grep { my $n = $_; !grep { $_ eq $n } @held } @{ $peer->children($p5) // [] };
	isnt($peer->get("$p5/$queued"), '__REVOKE__', "the queued reader's node was not");
	ok(wait_requested($s1, $p5), 's1 sees the request (its path listed once)');
	is($s1->value('SELECT zk_release_all()'), '2', 's1 releases both');
	is($s2->result->{out}, 't', 'the queued reader gets the lock');
	is($s2->value('SELECT zk_release_all()'), '1', 's2 releases');
	ok(wait_sql($node, 'SELECT count(*) FROM zk_locks', '0', 10), 'zk_locks is empty again');

};
$_->quit for ($s1, $s2, $s3);
$peer->quit;
$node->stop;
stop_zk($zk);
done_testing();

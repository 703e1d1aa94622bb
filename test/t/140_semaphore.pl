
# 140_semaphore: counting semaphore (Curator's InterProcessSemaphoreV2).
#
# What users rely on: with max_leases = N at most N leases are out at any
# time across SQL sessions and Curator clients, and every client
# eventually gets one; an acquire with a timeout returns NULL while the
# semaphore is full; a waiter cancelled mid-wait leaves no lease behind; a
# lease node deleted from outside does not wedge the semaphore.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use ZklockTest;

my $zk = start_zk();
my $node = new_zklock_node('semaphore', $zk);
require_functions($node, qw(zk_semaphore_acquire zk_semaphore_release zk_semaphore_release_all
  zk_semaphore_acquire_xact));
my $peer = new_peer($zk);

# "{name}" / "{a,b}" -> [names]; '' (NULL) -> undef
sub leases_of
{
	my ($out) = @_;
	return undef if !defined $out || $out eq '';
	return [ split /,/, ($out =~ s/^\{|\}$//gr) ];
}

############################################################################
# 1. 10 clients (5 SQL, 5 Curator), max 5 leases. Holders keep their lease
#    until the test returns it, so leases out = granted - returned, exactly;
#    it is checked every time a grant is seen.
############################################################################
subtest '10 clients (SQL and Curator) on a semaphore of 5: every one gets a lease, never more than 5 out' => sub {
	my $p1 = '/t140/ten';
	my @clients;
	for my $i (1 .. 5)
	{
		my $s = ZklockTest::Session->new($node, "sa$i");
		push @clients, { kind => 'sql', s => $s, name => "sa$i" };
		push @clients, { kind => 'curator', id => "ca$i", name => "ca$i" };
	}
	for my $c (@clients)
	{
		if ($c->{kind} eq 'sql') { $c->{s}->start("SELECT zk_semaphore_acquire('$p1', 5, 1, '30s')"); }
		else { $peer->lease($c->{id}, $p1, 5, 1, 30000); }
	}
	sub granted
	{
		my ($c) = @_;
		return 1 if $c->{granted};
		my $done = $c->{kind} eq 'sql'
		  ? $c->{s}->done
		  : $peer->has_reply(qr/^(leased|timeout|error) \Q$c->{id}\E\b/);
		return 0 unless $done;
		if ($c->{kind} eq 'sql')
		{
			my $r = $c->{s}->result;
			$c->{lease} = leases_of($r->{out});
			diag("$c->{name}: $r->{err}") if $r->{err} =~ /ERROR/;
		}
		else
		{
			my $l = $peer->lease_result($c->{id});
			$c->{lease} = ref $l ? $l : undef;
			diag("$c->{name}: $l") unless ref $l;
		}
		$c->{granted} = 1;
		return 1;
	}
	my ($returned, $peak, $all_ok) = (0, 0, 1);
	my @names;
	while (1)
	{
		my $want = $returned + 5 > 10 ? 10 : $returned + 5;
		wait_until(sub { (grep { granted($_) } @clients) >= $want }, 20, "$want grants");
		my @g = grep { $_->{granted} } @clients;
		my $out = @g - $returned;
		$peak = $out if $out > $peak;
		if (@g < $want) { $all_ok = 0; last; }
		last if $returned == 10;
		my ($c) = grep { $_->{granted} && !$_->{returned} } @clients;
		unless ($c->{lease} && @{ $c->{lease} } == 1)
		{
			$all_ok = 0;
			diag("$c->{name} got no lease");
			last;
		}
		push @names, $c->{lease}[0];
		if ($c->{kind} eq 'sql')
		{
			$all_ok = 0 unless $c->{s}->value("SELECT zk_semaphore_release('$p1', '$c->{lease}[0]')") eq 't';
		}
		else
		{
			$all_ok = 0 unless ($peer->release($c->{id}) // '') eq 'released';
		}
		$c->{returned} = 1;
		$returned++;
	}
	ok($all_ok && $returned == 10, 'all 10 clients got a lease (and returned it)');
	is($peak, 5, 'at most 5 leases were out at any time, and 5 were out while clients waited');
	like($_, $CURATOR_LEASE_NODE_RE, "lease $_ is named as Curator names it") for @names[ 0 .. 1 ];
	ok(wait_children_count($peer, "$p1/leases", 0), 'no lease left');
	$_->{s}->quit for grep { $_->{kind} eq 'sql' } @clients;
};

my ($p2, $s1, $s2, $s3, $s4, $l1, $l2);    # shared by the parts below and the end

############################################################################
# 2. max 3: the 4th acquire is NULL until a lease is returned.
############################################################################
subtest 'max_leases is a bound: the 4th lease of 3 is NULL until one is returned' => sub {
	$p2 = '/t140/three';
	($s1, $s2, $s3, $s4) = map { ZklockTest::Session->new($node, "s$_") } 1 .. 4;
	$l1 = leases_of($s1->value("SELECT zk_semaphore_acquire('$p2', 3)"));
	is(scalar @{ $l1 // [] }, 1, 's1 takes one lease');
	$peer->lease('cq', $p2, 3, 2, 5000);
	my $lq = $peer->lease_result('cq');
	is(ref $lq ? scalar @$lq : $lq, 2, 'Curator takes two leases');
	{
		my $parts = participants_rows($node, $p2);
		is_deeply([ sort map { $_->{node} =~ s{^.*/}{}r } @$parts ], [ sort @{ $peer->children("$p2/leases") } ],
			'zk_participants lists the 3 lease nodes');
		is(join(',', map { $_->{kind} } @$parts), 'lease,lease,lease', "kind 'lease'");
		is(join(',', map { $_->{holds} } @$parts), 'null,null,null', 'holds is NULL for leases');
	}
	is($s2->value("SELECT zk_semaphore_acquire('$p2', 3, 1, '500ms')"), '',
		'the 4th lease: NULL after the timeout');
	ok(wait_children_count($peer, "$p2/leases", 3), 'the timed-out attempt left no lease node');
	is($peer->release('cq'), 'released', 'Curator returns its two leases');
	$l2 = leases_of($s2->value("SELECT zk_semaphore_acquire('$p2', 3, 1, '5s')"));
	is(scalar @{ $l2 // [] }, 1, 'now s2 gets a lease');
	is( $node->safe_psql('postgres', 'SELECT recipe, mode, state FROM zk_locks WHERE pid = ' . $s2->pid),
		'semaphore|lease|held', 'zk_locks: recipe semaphore, mode lease, held');
};

############################################################################
# 3. A waiter cancelled mid-wait leaves no lease node.
############################################################################
subtest 'a waiter cancelled mid-wait leaves no lease node' => sub {
	$peer->lease('cq2', $p2, 3, 1, 5000);
	is(ref($peer->lease_result('cq2')), 'ARRAY', 'Curator takes the third lease');
	$s3->start("SELECT zk_semaphore_acquire('$p2', 3)");
	ok(wait_children_count($peer, "$p2/leases", 4), 's3 waits with its lease node created');
	ok(wait_sql($node, 'SELECT wait_event FROM pg_stat_activity WHERE pid = ' . $s3->pid,
			expected_wait_event($node, 'ZkLockAcquire'), 10),
		's3 is waiting in zklock');
	is($node->safe_psql('postgres', 'SELECT pg_cancel_backend(' . $s3->pid . ')'), 't', 'cancel s3');
	my $r = $s3->result;
	is($r->{sqlstate}, '57014', 'the cancelled acquire fails with 57014') or diag($r->{err});
	ok(wait_children_count($peer, "$p2/leases", 3), "the cancelled waiter's lease node is gone");
	ok(wait_children_count($peer, "$p2/locks", 0), 'and nothing is left in P/locks');
	ok(wait_sql($node, 'SELECT count(*) FROM zk_locks WHERE pid = ' . $s3->pid, '0', 10),
		'zk_locks has no row for s3');
	is($s1->value("SELECT zk_semaphore_release('$p2', '$l1->[0]')"), 't', 's1 returns its lease');
	my $l3 = leases_of($s3->value("SELECT zk_semaphore_acquire('$p2', 3, 1, '2s')"));
	is(scalar @{ $l3 // [] }, 1, 'the freed lease goes to the next acquirer (no ghost lease)');
};

############################################################################
# 4. A lease node deleted from outside does not wedge the semaphore.
############################################################################
subtest 'a lease node deleted from outside does not wedge the semaphore' => sub {
	$s4->start("SELECT zk_semaphore_acquire('$p2', 3, 1, '20s')");
	ok(wait_children_count($peer, "$p2/leases", 4), 's4 waits with its lease node created');
	ok(!$s4->done, 's4 is blocked (3 leases out)');
	$peer->delete("$p2/leases/$l2->[0]");
	my $r = $s4->result;
	is(scalar @{ leases_of($r->{out}) // [] }, 1, "s4 gets a lease once s2's lease node was deleted from outside")
	  or diag($r->{err});
	$r = $s2->query('SELECT zk_semaphore_release_all(' . "'$p2')");
	unlike($r->{err}, qr/ERROR/, 's2 can still release (its lease is already gone): no error');
	is($peer->release('cq2'), 'released', 'Curator returns its lease');
	is($s3->value("SELECT zk_semaphore_release_all('$p2')"), '1', 's3 returns its lease (release_all = 1)');
	is($s4->value("SELECT zk_semaphore_release_all('$p2')"), '1', 's4 returns its lease');
	ok(wait_children_count($peer, "$p2/leases", 0), 'no lease left');
	is($node->safe_psql('postgres', 'SELECT count(*) FROM zk_locks'), '0', 'zk_locks is empty');
};

############################################################################
# 5. The _xact variant returns its lease at commit.
############################################################################
subtest 'the _xact variant returns its lease at commit' => sub {
	my $px = '/t140/xact';
	$s1->value('BEGIN');
	is(scalar @{ leases_of($s1->value("SELECT zk_semaphore_acquire_xact('$px', 1, 1, '5s')")) // [] }, 1,
		'a lease for the transaction');
	$peer->lease('cx', $px, 1, 1, 300);
	is($peer->lease_result('cx'), 'timeout', 'Curator gets no lease meanwhile (max 1)');
	$s1->value('COMMIT');
	$peer->lease('cx', $px, 1, 1, 5000);
	is(ref($peer->lease_result('cx')), 'ARRAY', 'the commit returned the lease: Curator gets it');
	is($peer->release('cx'), 'released', 'Curator returns it');
};

############################################################################
# 6. Several leases in one call: all or none.
############################################################################
subtest 'several leases in one call: all or none' => sub {
	my $pq = '/t140/qty';
	$peer->lease('cm', $pq, 3, 2, 5000);
	is(ref($peer->lease_result('cm')), 'ARRAY', 'Curator takes 2 of 3 leases');
	is($s1->value("SELECT zk_semaphore_acquire('$pq', 3, 2, '700ms')"), '',
		'asking for 2 when 1 is free: NULL after the timeout');
	ok(wait_children_count($peer, "$pq/leases", 2), 'the one lease it could take was given back');
	is($peer->release('cm'), 'released', 'Curator returns its leases');
	my $two = leases_of($s1->value("SELECT zk_semaphore_acquire('$pq', 3, 2, '5s')"));
	is(scalar @{ $two // [] }, 2, 'now 2 leases in one call');
	isnt($two->[0], $two->[1], 'two different lease nodes');
	is($s1->value("SELECT zk_semaphore_release('$pq', '$two->[0]')"), 't', 'one lease returned by name');
	ok(wait_children_count($peer, "$pq/leases", 1), 'one lease node left');
	is($s1->value("SELECT zk_semaphore_release_all('$pq')"), '1', 'release_all returns the other one');
	ok(wait_children_count($peer, "$pq/leases", 0), 'no lease node left');
};

############################################################################
# 7. zk_release_all gives back every kind of hold of the session.
############################################################################
subtest 'zk_release_all gives back every kind of hold of the session' => sub {
	is($s1->value("SELECT zk_mutex_acquire('/t140/all/mutex', '5s')"), 't', 'a mutex');
	is($s1->value("SELECT zk_read_lock_acquire('/t140/all/rw', '5s')"), 't', 'a read lock');
	is($s1->value("SELECT zk_semaphore_mutex_acquire('/t140/all/sm', '5s')"), 't', 'a semaphore mutex');
	is(scalar @{ leases_of($s1->value("SELECT zk_semaphore_acquire('/t140/all/sem', 2, 2, '5s')")) // [] }, 2,
		'two semaphore leases');
	is($s1->value('SELECT zk_release_all()'), '5', 'zk_release_all releases them all: mutex, read lock, semaphore mutex, two leases');
	ok(wait_sql($node, 'SELECT count(*) FROM zk_locks', '0', 10), 'zk_locks is empty');
	ok(wait_children_count($peer, '/t140/all/mutex', 0), 'no mutex node');
	ok(wait_children_count($peer, '/t140/all/rw', 0), 'no read lock node');
	ok(wait_children_count($peer, '/t140/all/sm/leases', 0), 'no semaphore mutex lease');
	ok(wait_children_count($peer, '/t140/all/sem/leases', 0), 'no semaphore lease');
};

############################################################################
# 8. The leases of a backend that exits are returned.
############################################################################
subtest 'the leases of a backend that exits are returned' => sub {
	my $pe = '/t140/exit';
	my $s5 = ZklockTest::Session->new($node, 's5');
	is(scalar @{ leases_of($s5->value("SELECT zk_semaphore_acquire('$pe', 2, 2)")) // [] }, 2,
		's5 takes both leases');
	$s4->start("SELECT zk_semaphore_acquire('$pe', 2, 1, '20s')");
	ok(wait_children_count($peer, "$pe/leases", 3), 's4 waits');
	$node->safe_psql('postgres', 'SELECT pg_terminate_backend(' . $s5->pid . ')');
	my $r = $s4->result;
	is(scalar @{ leases_of($r->{out}) // [] }, 1, "s4 gets a lease once s5's backend exited") or diag($r->{err});
	ok(wait_children_count($peer, "$pe/leases", 1), "s5's leases are gone");
	is($s4->value("SELECT zk_semaphore_release_all('$pe')"), '1', 's4 returns its lease');
};

############################################################################
# 9. Bad arguments.
############################################################################
subtest 'bad arguments are refused with 22023' => sub {
	for my $case ([ 'max_leases 0', '0, 1' ], [ 'qty 0', '3, 0' ], [ 'qty > max_leases', '2, 3' ])
	{
		my $r = $s1->query("SELECT zk_semaphore_acquire('$p2', $case->[1], '1s')");
		is($r->{sqlstate}, '22023', "$case->[0]: ERROR 22023") or diag("out=[$r->{out}] err=[$r->{err}]");
	}
};

$_->quit for ($s1, $s2, $s3, $s4);
$peer->quit;
$node->stop;
stop_zk($zk);
done_testing();


# 810_listing_skip: a lock acquired without a listing, because the parent's
# sequence numbers prove nobody else is there, is never held while anybody
# else holds it.
#
# What users rely on:
#   1. A lock used by one cluster alone (a job's own mutex, a write lock, a
#      read lock, a semaphore's P/locks) costs one create and one delete per
#      cycle once the worker has listed the path twice (the second listing
#      sets an exists watch on the parent; a path locked once costs no
#      watch): zk_status().listings_skipped counts the acquires granted that
#      way, and the nodes are Curator's.
#   2. A Curator client that holds the lock between two SQL acquires keeps
#      it: the SQL acquire's create gets a number that shows a foreign
#      create, so it lists and waits (zk_mutex_acquire times out), and gets
#      the lock once Curator releases it.
#   3. The lock's parent deleted and made again by other clients, whose
#      numbers then happen to meet the one zklock expects next, with a
#      Curator holder in it: the SQL acquire still waits (the worker's watch
#      on the parent forgot what it knew).
#   4. A SQL session and a Curator loop on one mutex, with a connection cut,
#      a worker restart and a session expiry in the middle: no two sections
#      overlap (SQL's by the rows their COMMITs wrote, Curator's by its own
#      clock), fencing tokens grow, and no node is left behind.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use ZklockTest;
use ZklockFault;
use ZklockProxy;

my $zk = start_zk();
my $proxy = ZklockProxy->start($zk);
my $node = new_zklock_node('known', $proxy->connect,
	"zklock.session_timeout = '6s'\nzklock.connect_timeout = '30s'\nzklock.lease_margin = '1s'\n");
my $peer = new_peer($zk);    # Curator, straight to ZooKeeper
my $s = ZklockTest::Session->new($node, 'a');

# skipped(): zk_status().listings_skipped
sub skipped
{
	return $node->safe_psql('postgres', 'SELECT listings_skipped FROM zk_status()');
}

# cycles($n, $acquire, $release): run $n acquire/release pairs in session a;
# returns how many acquires and releases said true.
sub cycles
{
	my ($n, $acquire, $release) = @_;
	my $ok = 0;
	quietly(sub {
		for (1 .. $n)
		{
			$ok++ if $s->value("SELECT $acquire") eq 't';
			$ok++ if $s->value("SELECT $release") eq 't';
		}
	});
	return $ok;
}

############################################################################
# 1. One cluster alone on a lock: no listing once the path is known.
############################################################################
subtest 'a lock used by one cluster alone is acquired without a listing' => sub {
	# a path locked once costs nothing more than Curator's protocol; its
	# second listing sets the exists watch on the parent (the server's wchp)
	my $once = '/t810/once';
	is(cycles(1, "zk_mutex_acquire('$once')", "zk_mutex_release('$once')"), 2, 'a path locked once');
	unlike(four_letter($zk, 'wchp'), qr{^\Q$once\E$}m, '... has no watch on its parent');
	is(cycles(1, "zk_mutex_acquire('$once')", "zk_mutex_release('$once')"), 2, 'locked a second time');
	ok(wait_until(sub { four_letter($zk, 'wchp') =~ m{^\Q$once\E$}m }, 10, 'the watch'),
		'... its parent is watched');
	my @kinds = (
		[ 'mutex', "zk_mutex_acquire('/t810/own')", "zk_mutex_release('/t810/own')", '/t810/own' ],
		[ 'write lock', "zk_write_lock_acquire('/t810/wr')", "zk_write_lock_release('/t810/wr')", '/t810/wr' ],
		[ 'read lock', "zk_read_lock_acquire('/t810/rd')", "zk_read_lock_release('/t810/rd')", '/t810/rd' ],
		[ 'semaphore lease', "zk_semaphore_acquire('/t810/sem', 2) IS NOT NULL", "zk_semaphore_release_all('/t810/sem') = 1", '/t810/sem/locks' ]);
	for my $k (@kinds)
	{
		my ($what, $acq, $rel, $parent) = @$k;
		my $before = skipped();
		is(cycles(2, $acq, $rel), 4, "$what: two acquires and releases");
		is(skipped() - $before, 0, "$what: both list (the second sets the parent's watch)");
		# the third may still list: the watch's answer may not be back yet
		is(cycles(1, $acq, $rel), 2, "$what: a third");
		$before = skipped();
		is(cycles(17, $acq, $rel), 34, "$what: 17 more acquires and releases");
		is(skipped() - $before, 17, "$what: each of them granted without a listing");
		ok(wait_children_count($peer, $parent, 0), "$what: no node left under $parent");
	}
	# the nodes are Curator's: a Curator waiter queues behind a SQL holder
	is($s->value(q{SELECT zk_mutex_acquire('/t810/own')}), 't', 'SQL holds the mutex again');
	$peer->acquire('c1', '/t810/own', 5000);
	ok(wait_children_count($peer, '/t810/own', 2), 'Curator queued behind it');
	is($peer->acquire_result('c1', 1), undef, 'Curator waits while SQL holds');
	is($s->value(q{SELECT zk_mutex_release('/t810/own')}), 't', 'SQL releases');
	is($peer->acquire_result('c1', 10), 'acquired', 'Curator gets it');
	$peer->cmd('release c1', qr/^released c1/, 10);
};

############################################################################
# 2. A Curator holder between two SQL acquires: the SQL acquire waits.
############################################################################
subtest 'a Curator holder between two SQL acquires keeps the lock' => sub {
	my $P = '/t810/mixed';
	is(cycles(5, "zk_mutex_acquire('$P')", "zk_mutex_release('$P')"), 10, 'SQL cycles on the mutex');
	$peer->acquire('c2', $P, 5000);
	is($peer->acquire_result('c2', 10), 'acquired', 'then Curator holds it');
	my $before = skipped();
	is($s->value(qq{SELECT zk_mutex_acquire('$P', '1s')}), 'f',
		'the SQL acquire times out while Curator holds');
	is(skipped(), $before, 'it was not granted without a listing');
	ok(wait_children_count($peer, $P, 1), 'its node is gone again, Curator\'s stays');
	$s->start(qq{SELECT zk_mutex_acquire('$P', '20s')});
	ok(wait_children_count($peer, $P, 2), 'a second SQL acquire queues');
	ok(!$s->done, 'and waits');
	$peer->cmd('release c2', qr/^released c2/, 10);
	is($s->result(20)->{out}, 't', 'SQL gets the mutex once Curator releases it');
	is($s->value(qq{SELECT zk_mutex_release('$P')}), 't', 'SQL releases');
	ok(wait_children_count($peer, $P, 0), 'no node left');
};

############################################################################
# 3. The parent deleted and made again, numbers meeting by chance.
############################################################################
subtest 'a parent made again whose numbers meet the expected one proves nothing' => sub {
	my $P = '/t810/again';
	my $before = skipped();
	is(cycles(4, "zk_mutex_acquire('$P')", "zk_mutex_release('$P')"), 8, 'four SQL cycles: numbers 0 to 3');
	cmp_ok(skipped() - $before, '>=', 1, 'the last of them went without a listing');
	my $kids = $peer->children($P);
	is(scalar @{ $kids // ['x'] }, 0, 'the parent is empty');
	my ($rc, $lines) = zktool('delete', $zk, $P);
	is($lines->[0], "deleted $P", 'another client deletes the parent');
	# Curator makes it again: three rounds (numbers 0 to 2) and a holder
	# (3), so the next number there is 4, the one zklock would expect
	for my $r (1 .. 3)
	{
		$peer->acquire("r$r", $P, 5000);
		is($peer->acquire_result("r$r", 10), 'acquired', "Curator round $r");
		$peer->cmd("release r$r", qr/^released r$r/, 10);
	}
	$peer->acquire('r4', $P, 5000);
	is($peer->acquire_result('r4', 10), 'acquired', 'Curator holds the new parent\'s lock');
	my $ck = lock_children($peer, $P);
	like($ck->[0] // '', qr/0000000003$/, 'its node has number 3');
	$before = skipped();
	is($s->value(qq{SELECT zk_mutex_acquire('$P', '1s')}), 'f',
		'the SQL acquire (number 4) times out while Curator holds');
	is(skipped(), $before, 'nothing was granted without a listing');
	$peer->cmd('release r4', qr/^released r4/, 10);
	is(cycles(2, "zk_mutex_acquire('$P')", "zk_mutex_release('$P')"), 4, 'SQL cycles again once Curator is done');
	ok(wait_children_count($peer, $P, 0), 'no node left');
};

############################################################################
# 4. SQL sessions and a Curator loop, with faults: no overlap, no node left.
############################################################################
$node->safe_psql('postgres', q{
CREATE TABLE history(client text, token bigint, enter_us bigint, exit_us bigint);
CREATE FUNCTION us(t timestamptz) RETURNS bigint LANGUAGE sql
  AS $$ SELECT (extract(epoch FROM t) * 1000000)::bigint $$;
CREATE PROCEDURE sections(client text, stop_at timestamptz, hold float8)
LANGUAGE plpgsql AS $$
DECLARE
  t0 timestamptz;
  tok bigint;
BEGIN
  WHILE clock_timestamp() < stop_at LOOP
    IF zk_mutex_acquire_xact('/t810/load', '3s') THEN
      t0 := clock_timestamp();
      tok := zk_lock_token('/t810/load');
      PERFORM pg_sleep(hold);
      INSERT INTO history VALUES (client, tok, us(t0), us(clock_timestamp()));
    END IF;
    COMMIT;
  END LOOP;
END $$;
});

# load_with($fault, $inject): a SQL session and a Curator loop (pausing
# between its rounds, so SQL cycles alone in between and skips listings)
# on one mutex for 8 s, $inject run 2 s in; then the sections are checked.
# (Two SQL sessions on one mutex hand it over locally: 800 tests that.)
sub load_with
{
	my ($fault, $inject) = @_;
	my $SECS = 8;
	$node->safe_psql('postgres', 'TRUNCATE history');
	my $skip0 = skipped();
	my $stop = $node->safe_psql('postgres', "SELECT clock_timestamp() + interval '$SECS s'");
	$peer->send('mxloop cl /t810/load ' . ($SECS * 1000) . ' 5 40');
	my @l = map { ZklockTest::Session->new($node, "l$_") } 1 .. 1;
	my %calls;
	my $call = sub {
		my ($x) = @_;
		$calls{ $x->name }++;
		$x->start("CALL sections('" . $x->name . "', '$stop', 0.002)");
	};
	$call->($_) for @l;
	sleep 2;
	$inject->();
	# a CALL a fault ended (its COMMIT failed: 40000, 08006) starts again
	my $deadline = time + $SECS + 40;
	my %errs;
	for my $x (@l)
	{
		while (time < $deadline)
		{
			my $r = $x->result(5);
			next unless $r->{done};
			last if $r->{err} eq '';
			$errs{ $r->{sqlstate} // 'none' }++;
			last if $node->safe_psql('postgres', "SELECT clock_timestamp() >= '$stop'") eq 't';
			$call->($x);
		}
	}
	note("$fault: CALLs ended by errors: " . join(', ', map { "$_=$errs{$_}" } sort keys %errs));
	my $done = $peer->wait_reply(qr/^(mxloop|error) cl\b/, 30);
	like($done // '', qr/^mxloop cl done \d+/, "$fault: the Curator loop ran to its end") or diag($done);
	my @sections = curator_mx_sections($peer, 'cl');
	my $ncur = scalar @sections;
	push @sections, history_sections($node);
	my $nsql = @sections - $ncur;
	my $nskip = skipped() - $skip0;
	note("$fault: $nsql SQL sections, $ncur Curator sections, $nskip acquires without a listing");
	cmp_ok($nsql, '>=', 10, "$fault: the SQL session completed sections ($nsql)");
	cmp_ok($ncur, '>=', 5, "$fault: Curator completed sections ($ncur)");
	cmp_ok($nskip, '>', 0, "$fault: some SQL acquires went without a listing ($nskip)");
	my ($overlaps, $backwards) = mutex_section_faults(\@sections);
	is($overlaps, 0, "$fault: no two sections overlap (SQL's committed rows, Curator's clock)");
	is($backwards, 0, "$fault: fencing tokens strictly increase in section order");
	ok(wait_children_count($peer, '/t810/load', 0, 30), "$fault: nothing left under the mutex");
	$_->quit for @l;
	return;
}

subtest 'the connection cut under load' => sub {
	load_with('cut', sub {
		$proxy->set_mode('cut');
		select(undef, undef, undef, 0.5);
		$proxy->set_mode('pass');
	});
	ok(wait_connected($node), 'connected again');
};

subtest 'the worker restarted under load' => sub {
	load_with('worker restart', sub { restart_worker($node) });
	ok(wait_connected($node), 'connected again');
};

subtest 'the session expired under load' => sub {
	load_with('session expiry', sub {
		my ($id, $pw) = session_file($node);
		ok(expire_session($zk, $id, $pw), 'the session is expired from outside');
	});
	ok(wait_connected($node), 'connected again');
};

$peer->quit;
$node->stop;
stop_zk($zk);
done_testing();

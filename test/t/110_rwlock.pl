
# 110_rwlock: the read/write lock (Curator's InterProcessReadWriteLock).
#
# What users rely on: many readers share the lock, SQL and Curator alike,
# while writers queue behind them and then run one at a time; a backend
# cannot upgrade read to write (it would deadlock) but can downgrade write
# to read, and a writer queued behind the downgrading backend stays behind
# its read lock (as with Curator 5.5+; part 3b shows what each Curator
# version does itself); under a mixed load no writer ever overlaps anybody, while
# readers do overlap each other.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use ZklockTest;

my $zk = start_zk();
my $node = new_zklock_node('rwlock', $zk, "max_connections = 40\n");
require_functions($node, qw(zk_read_lock_acquire zk_read_lock_release
  zk_write_lock_acquire zk_write_lock_release zk_read_lock_acquire_xact zk_write_lock_acquire_xact));
my $peer = new_peer($zk);

sub base { my ($p) = @_; return $p =~ s{^.*/}{}r; }

############################################################################
# 1. 20 readers (10 SQL, 10 Curator) hold; 8 writers (4 SQL, 4 Curator) wait.
############################################################################
subtest '20 readers (SQL and Curator) hold together while 8 writers wait; the writers are then served one at a time' => sub {
	my $p1 = '/t110/many';
	my (@sql_readers, @sql_writers);
	for my $i (1 .. 10)
	{
		my $s = ZklockTest::Session->new($node, "r$i");
		is($s->value("SELECT zk_read_lock_acquire('$p1', '10s')"), 't', "SQL reader r$i acquires");
		push @sql_readers, $s;
		$peer->lock('read', "cr$i", $p1, 10000);
		is($peer->acquire_result("cr$i"), 'acquired', "Curator reader cr$i acquires");
	}
	ok(wait_children_count($peer, $p1, 20), '20 reader nodes in ZooKeeper');

	my $rows = zk_lock_rows($node, $p1);
	is(scalar(grep { $_->{state} eq 'held' } values %$rows), 10, 'zk_locks: the 10 SQL readers hold');
	like($rows->{ $sql_readers[0]->pid }{node}, qr/-__READ__\d{10}$/, 'SQL reader node is a __READ__ node');
	like($rows->{ $sql_readers[0]->pid }{node}, $CURATOR_RW_NODE_RE, "... named as Curator names it");
	is( $node->safe_psql('postgres',
			qq{SELECT recipe || '/' || mode FROM zk_locks WHERE pid = } . $sql_readers[0]->pid),
		'read/shared', 'zk_locks: recipe read, mode shared');

	for my $i (1 .. 4)
	{
		my $s = ZklockTest::Session->new($node, "w$i");
		$s->start("SELECT zk_write_lock_acquire('$p1')");
		ok(wait_waiting($node, $s->pid, $p1), "SQL writer w$i queued");
		push @sql_writers, $s;
		$peer->lock('write', "cw$i", $p1, -1);
		ok(wait_children_count($peer, $p1, 20 + 2 * $i), "Curator writer cw$i queued");
	}
	ok(!$_->done, $_->name . ' (SQL writer) is blocked by the readers') for @sql_writers;
	ok(!$peer->has_reply(qr/^(acquired|timeout|error) cw\d\b/), 'the Curator writers are blocked too');

	my $cur_parts = $peer->rwparticipants($p1);
	is(join(',', map { /__READ__/ ? 'read' : /__WRIT__/ ? 'write' : '?' } @$cur_parts),
		join(',', ('read') x 20, ('write') x 8),
		"Curator's view: 20 read participants, then 8 write participants");
	{
		my $parts = participants_rows($node, $p1);
		is(scalar @$parts, 28, 'zk_participants lists 28 nodes');
		is(scalar(grep { $_->{kind} eq 'read' && $_->{holds} eq 't' } @$parts), 20,
			'zk_participants: 20 readers holding');
		is(scalar(grep { $_->{kind} eq 'write' && $_->{holds} eq 'f' } @$parts), 8,
			'zk_participants: 8 writers not holding');
		is(join(',', map { $_->{kind} } @$parts), join(',', ('read') x 20, ('write') x 8),
			'zk_participants: readers first, then the writers (queue order)');
		is_deeply([ map { base($_->{node}) } @$parts ], [ map { base($_) } @{ $peer->rwparticipants($p1) } ],
			"zk_participants agrees with Curator's participant nodes, in order");
		my ($json) = grep { $_->{node} =~ /\Q$rows->{ $sql_readers[0]->pid }{node}\E$/ } @$parts;
		like($json->{data} // '', qr/"pid"\s*:\s*@{[ $sql_readers[0]->pid ]}\b/,
			"zk_participants: a zklock node's data names its backend");
	}

	# The readers go; the 8 writers are then served one at a time.
	is($_->value("SELECT zk_read_lock_release('$p1')"), 't', $_->name . ' releases read') for @sql_readers;
	is($peer->release("cr$_"), 'released', "cr$_ releases read") for 1 .. 10;

	my @pending = ((map { [ 'sql', $_ ] } @sql_writers), (map { [ 'curator', "cw$_" ] } 1 .. 4));
	sub writer_granted
	{
		my ($w) = @_;
		return $w->[1]->done if $w->[0] eq 'sql';
		return $peer->has_reply(qr/^(acquired|timeout|error) \Q$w->[1]\E\b/);
	}
	my $serial_ok = 1;
	for my $round (1 .. 8)
	{
		my @got;
		wait_until(sub { @got = grep { writer_granted($_) } @pending; @got > 0 }, 20, "writer round $round");
		if (@got != 1)
		{
			$serial_ok = 0;
			diag("round $round: " . scalar(@got) . ' writers granted at once');
			last unless @got;
		}
		my $w = $got[0];
		if ($w->[0] eq 'sql')
		{
			my $r = $w->[1]->result;
			is($r->{out}, 't', 'SQL writer ' . $w->[1]->name . " granted (round $round)") or diag($r->{err});
			is($w->[1]->value("SELECT zk_write_lock_release('$p1')"), 't', '... and releases');
		}
		else
		{
			is($peer->acquire_result($w->[1]), 'acquired', "Curator writer $w->[1] granted (round $round)");
			is($peer->release($w->[1]), 'released', '... and releases');
		}
		@pending = grep { $_ != $w } @pending;
	}
	ok($serial_ok && !@pending, 'the 8 writers were granted one at a time, all of them');
	ok(wait_children_count($peer, $p1, 0), 'no node left');
	$_->quit for @sql_readers, @sql_writers;
};

my ($s1, $s2, $p2, $p3, @loaders);    # shared by the parts below and the end

############################################################################
# 2. No upgrade; a read held elsewhere blocks a writer.
############################################################################
subtest 'no upgrade: a reader\'s write acquire times out or fails with 55006; a read held elsewhere blocks a writer' => sub {
	$p2 = '/t110/upgrade';
	$s1 = ZklockTest::Session->new($node, 's1');
	$s2 = ZklockTest::Session->new($node, 's2');
	is($s1->value("SELECT zk_read_lock_acquire('$p2')"), 't', 's1 takes the read lock');
	my $t0 = time;
	is($s1->value("SELECT zk_write_lock_acquire('$p2', '500ms')"), 'f',
		'upgrade with a timeout: the write lock is not granted (false)');
	cmp_ok(time - $t0, '>=', 0.45, '... after waiting the timeout');
	my $r = $s1->query("SELECT zk_write_lock_acquire('$p2')");
	is($r->{sqlstate}, '55006', 'upgrade without a timeout: ERROR 55006 at once') or diag($r->{err});
	ok(wait_children_count($peer, $p2, 1), 'the refused upgrades left no write node');
	is( $node->safe_psql('postgres', "SELECT state FROM zk_locks WHERE pid = " . $s1->pid),
		'held', 's1 still holds its read lock');

	is($s2->value("SELECT zk_write_lock_acquire('$p2', '500ms')"), 'f',
		"a writer times out while another backend holds the read lock");
	$s2->start("SELECT zk_write_lock_acquire('$p2')");
	ok(wait_waiting($node, $s2->pid, $p2), 's2 queues for the write lock');
	ok(!$s2->done, "s2 is blocked by s1's read lock");
	is($s1->value("SELECT zk_read_lock_release('$p2')"), 't', 's1 releases read');
	$r = $s2->result;
	is($r->{out}, 't', 's2 gets the write lock once the reader left') or diag($r->{err});
	$peer->lock('read', 'cr_up', $p2, 500);
	is($peer->acquire_result('cr_up'), 'timeout', 'a Curator reader is blocked by the SQL writer');
	is($s2->value("SELECT zk_write_lock_release('$p2')"), 't', 's2 releases write');
};

# No writer starvation: a reader arriving after a queued writer waits
# behind it, although the lock is only read-held.
subtest 'no writer starvation: a reader arriving after a queued writer waits behind it' => sub {
	$peer->lock('read', 'cr_first', $p2, 5000);
	is($peer->acquire_result('cr_first'), 'acquired', 'Curator reads');
	$peer->lock('write', 'cw_q', $p2, -1);
	ok(wait_children_count($peer, $p2, 2), 'a Curator writer queues behind it');
	is($s1->value("SELECT zk_read_lock_acquire('$p2', '500ms')"), 'f',
		'a later SQL reader is not let past the queued writer');
	ok(wait_children_count($peer, $p2, 2), '... and left no node');
	$s1->start("SELECT zk_read_lock_acquire('$p2', '20s')");
	ok(wait_waiting($node, $s1->pid, $p2), 'the SQL reader queues');
	is($peer->release('cr_first'), 'released', 'the first reader leaves');
	is($peer->acquire_result('cw_q'), 'acquired', 'the writer goes first');
	ok(!$s1->done, 'the SQL reader still waits for the writer');
	is($peer->release('cw_q'), 'released', 'the writer releases');
	my $r = $s1->result;
	is($r->{out}, 't', 'then the SQL reader gets in') or diag($r->{err});
	is($s1->value("SELECT zk_read_lock_release('$p2')"), 't', 'and releases');
};

############################################################################
# 3. Downgrade: write then read by the same backend; a queued writer stays
#    blocked until the downgraded read lock is released.
############################################################################
subtest 'a downgrade (write, then read) keeps the queued writers out until the read lock is released' => sub {
	$p3 = '/t110/downgrade';
	is($s1->value("SELECT zk_write_lock_acquire('$p3')"), 't', 's1 takes the write lock');
	my $wnode = zk_lock_rows($node, $p3)->{ $s1->pid }{node};
	my $t0 = time;
	is($s1->value("SELECT zk_read_lock_acquire('$p3', '5s')"), 't', 's1 (writer) gets the read lock');
	cmp_ok(time - $t0, '<', 2, '... at once');
	my ($wseq) = $wnode =~ /(\d{10})$/;
	my @kids = @{ $peer->children($p3) };
	is(scalar @kids, 2, 'write node and read node');
	ok((grep { /^_c_[0-9a-f-]{36}-__READ__\Q$wseq\E$/ } @kids),
		"the downgrade read node carries the writer's sequence $wseq (Curator 5.5)");

	# A Curator writer and an SQL writer queue behind.
	$peer->lock('write', 'cw_dg', $p3, -1);
	ok(wait_children_count($peer, $p3, 3), 'Curator writer queued');
	$s2->start("SELECT zk_write_lock_acquire('$p3')");
	ok(wait_waiting($node, $s2->pid, $p3), 'SQL writer s2 queued');

	is($s1->value("SELECT zk_write_lock_release('$p3')"), 't', 's1 releases its write lock (keeps read)');
	ok(wait_until(sub { !grep { $_ eq $wnode } @{ $peer->children($p3) } }, 10), "s1's write node is gone");
	# Absence of a grant can only be observed for a while: 1.5 s of polling.
	ok(!wait_until(sub { $peer->has_reply(qr/^(acquired|timeout|error) cw_dg\b/) || $s2->done }, 1.5,
			'(expected) no writer granted'),
		'the queued writers stay blocked while s1 holds the downgraded read lock');
	is( $node->safe_psql('postgres', "SELECT recipe || '/' || state FROM zk_locks WHERE pid = " . $s1->pid),
		'read/held', 'zk_locks: s1 holds only the read lock now');
	is($s1->value("SELECT zk_read_lock_release('$p3')"), 't', 's1 releases read');
	is($peer->acquire_result('cw_dg'), 'acquired', 'the first queued writer (Curator) gets the lock');
	ok(!$s2->done, 'the second one (SQL) still waits');
	is($peer->release('cw_dg'), 'released', 'Curator writer releases');
	my $r = $s2->result;
	is($r->{out}, 't', 'then the SQL writer gets it') or diag($r->{err});
	is($s2->value("SELECT zk_write_lock_release('$p3')"), 't', 's2 releases');
};

############################################################################
# 3b. Curator's own downgrade, which differs by Curator version; zklock
#     follows the queue it finds on the wire.
#     - Curator 5.5 and later (Debian 13 ships 5.7.1) create the downgraded
#       read node EPHEMERAL, named with the writer's own sequence, so it
#       sorts at the writer's place: a writer queued behind stays behind
#       the read lock.  zklock downgrades this way on every platform (3.).
#     - Curator 5.4 (Debian 12) creates a new EPHEMERAL_SEQUENTIAL read
#       node, which sorts after a writer that queued before the downgrade:
#       once the Curator client lets go of its write lock, that writer is
#       first in the queue and gets the lock while the Curator client still
#       holds its read lock.  That is Curator 5.4's flaw, fixed in 5.5; a
#       zklock writer cannot tell it from a legitimate grant.
############################################################################
subtest 'Curator\'s own downgrade: zklock follows the queue it finds (Curator 5.4 and 5.5+ differ)' => sub {
	my @cv = curator_version();
	my $cv = join('.', @cv);
	my $new_downgrade = $cv[0] > 5 || ($cv[0] == 5 && $cv[1] >= 5);
	note("Curator $cv: " . ($new_downgrade ? 'read node at the writer\'s sequence' : 'new sequential read node'));
	my $p3b = '/t110/curator_downgrade';
	$peer->lock('write', 'cdg', $p3b, 5000);
	is($peer->acquire_result('cdg'), 'acquired', 'Curator takes the write lock');
	my ($cw) = @{ $peer->children($p3b) };
	my ($cwseq) = $cw =~ /(\d{10})$/;
	$s2->start("SELECT zk_write_lock_acquire('$p3b')");
	ok(wait_waiting($node, $s2->pid, $p3b), 'an SQL writer queues behind it');
	my ($s2seq) = zk_lock_rows($node, $p3b)->{ $s2->pid }{node} =~ /(\d{10})$/;
	$peer->lock('read', 'cdg', $p3b, 5000);
	is($peer->acquire_result('cdg'), 'acquired', 'Curator downgrades: its read lock is granted at once');
	my ($crnode) = grep { /__READ__/ } @{ $peer->children($p3b) };
	my ($crseq) = ($crnode // '') =~ /(\d{10})$/;
	if ($new_downgrade)
	{
		is($crseq, $cwseq, "Curator $cv: the read node carries the writer's sequence $cwseq");
		is($peer->release('cdg', 'write'), 'released', 'Curator releases its write lock (keeps read)');
		ok(!wait_until(sub { $s2->done }, 1.5, '(expected) no grant'),
			"the queued SQL writer stays behind Curator's read lock");
		is($peer->release('cdg', 'read'), 'released', 'Curator releases its read lock');
		my $r = $s2->result;
		is($r->{out}, 't', 'then the SQL writer gets the lock') or diag($r->{err});
	}
	else
	{
		cmp_ok($crseq, '>', $s2seq,
			"Curator $cv: the read node takes a new sequence, after the queued SQL writer's");
		is($peer->release('cdg', 'write'), 'released', 'Curator releases its write lock (keeps read)');
		my $r = $s2->result;
		is($r->{out}, 't', "the SQL writer, first in the queue now, gets the lock (Curator ${cv}'s flaw)")
		  or diag($r->{err});
		is($peer->release('cdg', 'read'), 'released', 'Curator releases its read lock');
	}
	is($s2->value("SELECT zk_write_lock_release('$p3b')"), 't', 's2 releases');
	ok(wait_children_count($peer, $p3b, 0), 'nothing left under the lock');
};

# Reentrancy: each acquire needs its release; a downgraded backend may
# also give its read lock back first and keep the write lock.
subtest 'reentrancy: each acquire needs its release, also after a downgrade' => sub {
	my $pr = '/t110/reentrant';
	is($s1->value("SELECT zk_read_lock_acquire('$pr')"), 't', 'read');
	is($s1->value("SELECT zk_read_lock_acquire('$pr')"), 't', 'read again (reentrant)');
	is(scalar @{ $peer->children($pr) }, 1, 'one read node for both');
	is($s1->value("SELECT zk_read_lock_release('$pr')"), 't', 'first read release');
	$peer->lock('write', 'cw_re', $pr, 300);
	is($peer->acquire_result('cw_re'), 'timeout', 'still held after one release');
	is($s1->value("SELECT zk_read_lock_release('$pr')"), 't', 'second read release');
	ok(wait_children_count($peer, $pr, 0), 'now the read node is gone');
	is($s1->value("SELECT zk_write_lock_acquire('$pr')"), 't', 'write');
	is($s1->value("SELECT zk_write_lock_acquire('$pr')"), 't', 'write again (reentrant)');
	is($s1->value("SELECT zk_read_lock_acquire('$pr')"), 't', 'and read (downgrade)');
	$peer->lock('write', 'cw_re', $pr, -1);
	ok(wait_children_count($peer, $pr, 3), 'a Curator writer queues');
	is($s1->value("SELECT zk_read_lock_release('$pr')"), 't', 'read released first');
	is($s1->value("SELECT zk_write_lock_release('$pr')"), 't', 'one write release');
	ok(!wait_until(sub { $peer->has_reply(qr/^(acquired|timeout|error) cw_re\b/) }, 1.0,
			'(expected) no grant'),
		'the Curator writer still waits: one write hold is left');
	is($s1->value("SELECT zk_write_lock_release('$pr')"), 't', 'last write release');
	is($peer->acquire_result('cw_re'), 'acquired', 'now the Curator writer gets it');
	is($peer->release('cw_re'), 'released', 'Curator releases');
};

# A reader that exits (terminated) lets the queued writer in.
subtest 'a reader that exits lets the queued writer in' => sub {
	my $s3 = ZklockTest::Session->new($node, 's3');
	is($s3->value("SELECT zk_read_lock_acquire('$p3')"), 't', 's3 takes the read lock');
	$s2->start("SELECT zk_write_lock_acquire('$p3', '20s')");
	ok(wait_waiting($node, $s2->pid, $p3), 's2 queues for the write lock');
	$node->safe_psql('postgres', 'SELECT pg_terminate_backend(' . $s3->pid . ')');
	my $r = $s2->result;
	is($r->{out}, 't', 'the writer gets the lock once the reading backend exited') or diag($r->{err});
	is($s2->value("SELECT zk_write_lock_release('$p3')"), 't', 's2 releases');
	ok(wait_children_count($peer, $p3, 0), "no node left (the exited reader's is gone)");
};

# The _xact variants are released at the end of the transaction.
subtest 'the _xact variants are released at the end of the transaction' => sub {
	my $px = '/t110/xact';
	$s1->value('BEGIN');
	is($s1->value("SELECT zk_write_lock_acquire_xact('$px', '5s')"), 't', 'write lock for the transaction');
	$peer->lock('read', 'cx', $px, 300);
	is($peer->acquire_result('cx'), 'timeout', 'a Curator reader is excluded meanwhile');
	$s1->value('COMMIT');
	$peer->lock('read', 'cx', $px, 5000);
	is($peer->acquire_result('cx'), 'acquired', 'the commit released the write lock: Curator reads');
	$s1->value('BEGIN');
	is($s1->value("SELECT zk_read_lock_acquire_xact('$px', '5s')"), 't', 'a transaction-level read lock shares with it');
	$s1->value('ROLLBACK');
	ok(wait_sql($node, 'SELECT count(*) FROM zk_locks WHERE pid = ' . $s1->pid, '0', 10),
		'the rollback released the read lock');
	is($peer->release('cx'), 'released', 'Curator releases');
	ok(wait_children_count($peer, $px, 0), 'no node left');
};
$s1->quit;
$s2->quit;

############################################################################
# 4. Mixed load: 4 SQL sessions and 4 Curator threads, 100 operations each,
#    10% writes. Every operation records when it entered and left its
#    critical section (taken inside the hold, so the recorded interval lies
#    within the real one); no write may overlap any other operation.
############################################################################
subtest 'mixed load of SQL and Curator: no write overlaps any other operation, readers share' => sub {
	my $p4 = '/t110/load';
	my $nops = 100;
	my $hold_ms = 2;    # the work done inside each critical section
	$node->safe_psql('postgres',
		'CREATE TABLE rw_ev (client text, i int, kind text, t_enter bigint, t_exit bigint)');
	@loaders = ();
	for my $c (0 .. 3)
	{
		my $s = ZklockTest::Session->new($node, "load$c");
		push @loaders, $s;
	}
	my $tload = time;
	for my $c (0 .. 3)
	{
		$peer->rwloop("cl$c", $p4, $nops, $c + 4, $hold_ms);
		$loaders[$c]->start(qq{
DO \$\$
DECLARE w boolean; t0 bigint; t1 bigint;
BEGIN
  FOR i IN 0..$nops - 1 LOOP
    w := (7 * i + $c) % 10 = 0;
    IF w THEN
      IF NOT zk_write_lock_acquire('$p4', '30s') THEN RAISE EXCEPTION 'write % not granted', i; END IF;
    ELSE
      IF NOT zk_read_lock_acquire('$p4', '30s') THEN RAISE EXCEPTION 'read % not granted', i; END IF;
    END IF;
    t0 := (extract(epoch FROM clock_timestamp()) * 1000000)::bigint;
    PERFORM pg_sleep($hold_ms / 1000.0);
    t1 := (extract(epoch FROM clock_timestamp()) * 1000000)::bigint;
    IF w THEN
      IF NOT zk_write_lock_release('$p4') THEN RAISE EXCEPTION 'write release % failed', i; END IF;
    ELSE
      IF NOT zk_read_lock_release('$p4') THEN RAISE EXCEPTION 'read release % failed', i; END IF;
    END IF;
    INSERT INTO rw_ev VALUES ('sql$c', i, CASE WHEN w THEN 'write' ELSE 'read' END, t0, t1);
  END LOOP;
END \$\$});
	}
	my @ev;    # [client, i, kind, enter, exit]
	for my $c (0 .. 3)
	{
		my $r = $loaders[$c]->result(40);
		ok($r->{done} && $r->{err} !~ /ERROR/, "SQL loader $c finished its $nops operations")
		  or diag($r->{err});
		my $e = $peer->rwloop_result("cl$c", 40);
		ok(ref $e && @$e == $nops, "Curator loader cl$c finished its $nops operations")
		  or diag($e // 'no reply');
		push @ev, map { [ "cl$c", @$_ ] } @$e if ref $e;
	}
	note sprintf('mixed load took %.1f s', time - $tload);
	for my $line (split /\n/,
		$node->safe_psql('postgres', 'SELECT client, i, kind, t_enter, t_exit FROM rw_ev'))
	{
		push @ev, [ split /\|/, $line ];
	}
	is(scalar @ev, 8 * $nops, 'all 800 operations recorded');
	my @writes = grep { $_->[2] eq 'write' } @ev;
	is(scalar @writes, 80, '80 of them writes');

	my ($read_overlaps, $mixed_overlaps) = (0, 0);
	is(write_overlaps([ map { [ "$_->[0]#$_->[1]", @$_[ 2 .. 4 ] ] } @ev ]), 0,
		'no write overlapped any other operation');
	my @reads = sort { $a->[3] <=> $b->[3] } grep { $_->[2] eq 'read' } @ev;
	for my $i (0 .. $#reads)
	{
		for my $j ($i + 1 .. $#reads)
		{
			last if $reads[$j][3] >= $reads[$i][4];
			next if $reads[$j][0] eq $reads[$i][0];
			$read_overlaps++;
			$mixed_overlaps++ if substr($reads[$j][0], 0, 1) ne substr($reads[$i][0], 0, 1);
		}
	}
	cmp_ok($read_overlaps, '>', 0, "readers of different clients overlapped ($read_overlaps pairs)");
	cmp_ok($mixed_overlaps, '>', 0, "SQL and Curator readers overlapped ($mixed_overlaps pairs)");
	ok(wait_children_count($peer, $p4, 0), 'no node left after the load');
	is($node->safe_psql('postgres', "SELECT count(*) FROM zk_locks"), '0', 'zk_locks is empty');
};

$_->quit for @loaders;
$peer->quit;
$node->stop;
stop_zk($zk);
done_testing();


# 304_ensemble_leader_loss: mutual exclusion holds through a ZooKeeper leader
# failure.
#
# What users rely on: with a real 3-server ensemble, two PostgreSQL clusters
# and a Curator service hammering the same mutex (and a 3-lease semaphore)
# for ~40 s while the ZooKeeper leader is killed half-way:
#   - no two holders of the mutex ever overlap (SQL and Curator together);
#   - fencing tokens (zk_lock_token / the lock node's czxid) strictly
#     increase in acquisition order;
#   - never more than 3 semaphore leases are held at once;
#   - everybody keeps making progress after the new leader is elected, and
#     nothing is left behind at the end.
# Every client records each hold as (who, token, start, end) with start
# taken after the acquire returned and end before the release is called,
# on the same machine clock, so a true mutex gives disjoint intervals.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use IPC::Run;
use ZklockTest;
use ZklockFault;

my $dur = 40;          # seconds of hammering
my $kill_at = 14;      # seconds into the run when the leader is killed
my $mutex = '/t304/mutex';
my $sem = '/t304/sem';
my $max_leases = 3;

my $zk = start_ensemble(3);
note("ensemble: $zk; modes: " . join(' ', map { "$_=" . ($_ // '?') } %{ ensemble_modes() }));

my $conf = "zklock.session_timeout = '15s'\nzklock.connect_timeout = '10s'\nlog_min_messages = warning\nlog_statement = none\n";
my @nodes = map { new_zklock_node("ens$_", $zk, $conf) } ('A', 'B');

my $setup = q{
CREATE TABLE ev(who text, kind text, token bigint, t0 bigint, t1 bigint);
CREATE TABLE errs(who text, at bigint, state text, msg text);
CREATE FUNCTION us(t timestamptz) RETURNS bigint LANGUAGE sql
  AS $$ SELECT (extract(epoch FROM t) * 1000000)::bigint $$;
CREATE PROCEDURE hammer(who text, kind text, p text, secs float8, hold float8)
LANGUAGE plpgsql AS $$
DECLARE
  stop timestamptz := clock_timestamp() + make_interval(secs => secs);
  got boolean;
  lease text[];
  tok bigint;
  t0 timestamptz;
  t1 timestamptz;
BEGIN
  WHILE clock_timestamp() < stop LOOP
    t0 := NULL; t1 := NULL; tok := NULL;
    BEGIN
      IF kind = 'mutex' THEN
        got := zk_mutex_acquire(p, '2s');
        IF got THEN
          t0 := clock_timestamp();
          tok := zk_lock_token(p);
          PERFORM pg_sleep(hold);
          t1 := clock_timestamp();
          PERFORM zk_mutex_release(p);
        END IF;
      ELSE
        lease := zk_semaphore_acquire(p, 3, 1, '2s');
        IF lease IS NOT NULL THEN
          t0 := clock_timestamp();
          PERFORM pg_sleep(hold);
          t1 := clock_timestamp();
          PERFORM zk_semaphore_release(p, lease[1]);
        END IF;
      END IF;
    EXCEPTION WHEN OTHERS THEN
      INSERT INTO errs VALUES (who, us(clock_timestamp()), SQLSTATE, SQLERRM);
      -- a hold whose release failed has no known end: give everything back
      BEGIN
        PERFORM zk_release_all();
      EXCEPTION WHEN OTHERS THEN
        INSERT INTO errs VALUES (who, us(clock_timestamp()), SQLSTATE, 'release_all: ' || SQLERRM);
      END;
      t1 := NULL;
    END;
    IF t0 IS NOT NULL THEN
      -- t1 NULL: the release failed; the hold ended at some unknown time
      INSERT INTO ev VALUES (who, kind, tok, us(t0), us(coalesce(t1, clock_timestamp())));
      IF t1 IS NULL THEN
        INSERT INTO errs VALUES (who, us(clock_timestamp()), 'NOEND', 'hold without a known end');
      END IF;
    END IF;
    COMMIT;
  END LOOP;
END $$;
};
$_->safe_psql('postgres', $setup) for @nodes;

# Curator: 2 threads on the mutex, 2 on the semaphore (ZkTool hammer).
my $outdir = PostgreSQL::Test::Utils::tempdir('hammer');
zktool('tree', $zk, '/t304');    # compiles ZkTool before the clock starts
my %cur;
for my $kind ('mutex', 'semaphore')
{
	my $p = $kind eq 'mutex' ? $mutex : $sem;
	my ($out, $err) = ('', '');
	$cur{$kind} = {
		out => \$out, err => \$err, file => "$outdir/curator-$kind.txt",
	};
	$cur{$kind}{h} = IPC::Run::start(
		[
			'java', '-Xmx128m', '-cp',
			ZklockTest::java_classes() . ":$ZklockTest::CURATOR_JAR",
			'ZkTool', 'hammer', $zk, $kind, $p, 2, $dur * 1000,
			$kind eq 'mutex' ? 20 : 50, $max_leases, $cur{$kind}{file}
		],
		'>', \$out, '2>', \$err, IPC::Run::timeout($dur + 60));
}

# SQL: per cluster 2 sessions on the mutex and 2 on the semaphore.
my @sess;
for my $i (0 .. $#nodes)
{
	my $c = ('A', 'B')[$i];
	for my $k (1 .. 2)
	{
		for my $kind ('mutex', 'semaphore')
		{
			my $who = "$c-$kind$k";
			my $s = ZklockTest::Session->new($nodes[$i], $who);
			my $p = $kind eq 'mutex' ? $mutex : $sem;
			my $hold = $kind eq 'mutex' ? 0.02 : 0.05;
			$s->start("CALL hammer('$who', '$kind', '$p', $dur, $hold)");
			push @sess, $s;
		}
	}
}
my $t_start = time;

# Kill the leader part-way through.
hold_for($kill_at - (time - $t_start), 'load before the leader failure') if time - $t_start < $kill_at;
my @before = map { status_row($_) } @nodes;
note('zklock sessions before the failure: '
	  . join('; ', map { "$_->{session_id} on $_->{server}" } @before));
my $leader = ensemble_leader();
ok(defined $leader, 'found the leader with srvr: server ' . ($leader ? $leader->{id} : '?'));
my $t_kill = time;
kill_ensemble_member($leader, 'KILL') if $leader;
my $new_leader;
ok(wait_until(sub { $new_leader = ensemble_leader() }, 30, 'a new leader'),
	'a new leader was elected: server ' . ($new_leader ? $new_leader->{id} : '?'));
note(sprintf('election took %.1f s', time - $t_kill));

# Collect.
for my $s (@sess)
{
	my $r = $s->result($dur + 40);
	ok($r->{done} && !defined $r->{sqlstate}, $s->name . ': the hammer loop ran to its end')
	  or diag($s->name . ": out=[$r->{out}] err=[" . ($r->{err} // '') . ']');
}
for my $kind (sort keys %cur)
{
	my $ok = eval { $cur{$kind}{h}->finish; 1 };
	like(${ $cur{$kind}{out} }, qr/^hammer done/m, "Curator $kind hammer finished")
	  or diag("Curator $kind: " . ${ $cur{$kind}{out} } . ' ' . substr(${ $cur{$kind}{err} }, -2000));
	note("Curator $kind: " . ${ $cur{$kind}{out} });
}

# (who, kind, token, t0, t1) from both clusters and Curator.
my @ev;
for my $i (0 .. $#nodes)
{
	my $out = $nodes[$i]->safe_psql('postgres',
		q{SELECT who, kind, coalesce(token, -1), t0, t1 FROM ev});
	push @ev, map { [ split /\|/ ] } split /\n/, $out;
	my $errs = $nodes[$i]->safe_psql('postgres',
		q{SELECT state || ' x' || count(*) || ': ' || min(msg) FROM errs GROUP BY state ORDER BY state});
	note("cluster " . ('A', 'B')[$i] . " errors during the run: " . ($errs || 'none'));
	is($nodes[$i]->safe_psql('postgres', q{SELECT count(*) FROM errs WHERE state IN ('XX000', 'NOEND')}),
		'0', 'cluster ' . ('A', 'B')[$i] . ': no internal error and no failed release');
}
for my $kind (sort keys %cur)
{
	open(my $fh, '<', $cur{$kind}{file}) or next;
	while (<$fh>)
	{
		chomp;
		my ($who, $tok, $t0, $t1) = split ' ';
		push @ev, [ $who, $kind, $tok, $t0, $t1 ];
	}
	close $fh;
}

# Mutex: disjoint intervals, increasing tokens.
my @m = sort { $a->[3] <=> $b->[3] } grep { $_->[1] eq 'mutex' } @ev;
subtest 'mutex: no two holders ever overlap, fencing tokens strictly increase' => sub {
	my %by = ();
	$by{ $_->[0] =~ /^curator/ ? 'curator' : substr($_->[0], 0, 1) }++ for @m;
	note(sprintf('mutex holds: %d (A %d, B %d, Curator %d)', scalar @m, $by{A} // 0, $by{B} // 0, $by{curator} // 0));
	my (@overlap, @tokbad);
	my ($max_end, $max_end_who) = (0, '');
	my ($last_tok, $last_tok_who) = (-1, '');
	for my $e (@m)
	{
		my ($who, undef, $tok, $t0, $t1) = @$e;
		push @overlap, "$who [$t0, $t1] starts before $max_end_who ended ($max_end)" if $t0 < $max_end;
		($max_end, $max_end_who) = ($t1, $who) if $t1 > $max_end;
		next if $tok < 0;
		push @tokbad, "$who token $tok after $last_tok_who token $last_tok" if $tok <= $last_tok;
		($last_tok, $last_tok_who) = ($tok, $who);
	}
	cmp_ok(scalar @m, '>=', 50, 'the mutex was really contended (' . scalar(@m) . ' holds)');
	is(scalar @overlap, 0, 'no two mutex holders ever overlapped (SQL on A and B, and Curator)')
	  or diag(join("\n", @overlap[ 0 .. ($#overlap < 9 ? $#overlap : 9) ]));
	is(scalar @tokbad, 0, 'fencing tokens strictly increase in acquisition order')
	  or diag(join("\n", @tokbad[ 0 .. ($#tokbad < 9 ? $#tokbad : 9) ]));
	my $no_tok = grep { $_->[2] < 0 } @m;
	note("holds without a token (Curator could not stat during the failover): $no_tok");
};

# Progress after the failover, from every kind of client.
my $after = int(($t_kill + 5) * 1e6);
subtest 'every kind of client acquires the mutex after the leader failure' => sub {
	for my $c ('A', 'B', 'curator')
	{
		my $n = grep { $_->[3] > $after && ($c eq 'curator' ? $_->[0] =~ /^curator/ : $_->[0] =~ /^\Q$c\E-/) } @m;
		cmp_ok($n, '>', 0, "$c acquired the mutex after the leader failure ($n holds)");
	}
};

# Semaphore: never more than $max_leases at once.
subtest 'semaphore: never more than max_leases at once, leases granted after the leader failure' => sub {
	my @s = grep { $_->[1] eq 'semaphore' } @ev;
	my @pts = sort { $a->[0] <=> $b->[0] || $a->[1] <=> $b->[1] }
	  ((map { [ $_->[3], 1 ] } @s), (map { [ $_->[4], -1 ] } @s));
	my ($cur, $max) = (0, 0);
	for my $p (@pts)
	{
		$cur += $p->[1];
		$max = $cur if $cur > $max;
	}
	note('semaphore holds: ' . scalar(@s) . ", most at once: $max");
	cmp_ok(scalar @s, '>=', 50, 'the semaphore was really contended');
	cmp_ok($max, '<=', $max_leases, "never more than $max_leases semaphore leases at once");
	cmp_ok($max, '>=', 2, 'the semaphore did grant concurrent leases');
	my $s_after = grep { $_->[3] > $after } @s;
	cmp_ok($s_after, '>', 0, "semaphore leases were granted after the leader failure ($s_after)");
};

# Everything is clean afterwards. Losing the leader drops every client
# connection of the ensemble (followers leave service until the election
# ends), so both clusters went through a suspension and kept their session.
subtest 'both clusters keep their session through the failover and end with zk_locks empty' => sub {
	for my $i (0 .. $#nodes)
	{
		my $n = $nodes[$i];
		ok(wait_connected($n, 20), $n->name . ': connected at the end');
		my $st = status_row($n);
		is($st->{session_id}, $before[$i]{session_id}, $n->name . ': the same session survived the failover');
		cmp_ok($st->{suspended_count}, '>', $before[$i]{suspended_count},
			$n->name . ": zk_status counted the suspension (now on $st->{server})")
		  if exists $st->{suspended_count};
		ok(wait_sql($n, 'SELECT count(*) FROM zk_locks', '0', 10), $n->name . ': zk_locks empty');
	}
};
my $peer = new_peer($zk);
subtest 'no mutex, lease or lock node is left' => sub {
	ok(wait_children_count($peer, $mutex, 0, 20), 'no mutex node left');
	ok(wait_children_count($peer, "$sem/leases", 0, 20), 'no lease node left');
	ok(wait_children_count($peer, "$sem/locks", 0, 20), 'no semaphore lock node left');
};

$_->quit for @sess;
$peer->quit;
$_->stop for @nodes;
# zklock cannot read the servers' tickTime; the common sign of one larger
# than zklock.server_tick_time is a negotiated timeout above 20 of it
# (ZooKeeper's default maxSessionTimeout).  Here the servers' tickTime is
# 500 ms like zklock.server_tick_time, but maxSessionTimeout was raised by
# hand: the 15 s timeout is above 20 x 500 ms, and only the operator can
# tell which it is, so it is said.
subtest 'a timeout above 20 x zklock.server_tick_time through an ensemble is logged' => sub {
	for my $n (@nodes)
	{
		like(slurp_file($n->logfile),
			qr/WARNING:  zklock: the ensemble negotiated a session timeout of 15000 ms, more than 20 times zklock.server_tick_time \(500 ms\)/,
			$n->name . ': the log has the WARNING');
	}
};

stop_ensemble();
done_testing();

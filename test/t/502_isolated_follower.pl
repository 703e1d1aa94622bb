
# 502_isolated_follower: a lock is not kept on the word of a follower that
# has lost its leader (issue 18).
#
# What users rely on: in a 3-server ZooKeeper ensemble, only the leader
# expires sessions.  A follower cut off from the other two servers (its
# quorum and election traffic lost) while its clients still reach it keeps
# answering reads and pings from its own stale state for syncLimit x
# tickTime, while the leader, which hears nothing more of zklock's session,
# expires it after the session timeout and gives zklock's lock to a Curator
# client connected to the majority.  zklock, connected to that follower
# only, must have given the lock up by then:
#   - the COMMIT of a transaction that holds the lock (zk_mutex_acquire_xact)
#     and is attempted as soon as Curator reports that it got the lock fails
#     with 40000, and its row is not committed;
#   - zk_locks never says 'held' for that lock once Curator has it (zklock
#     called it lost before Curator got it);
#   - no new acquire succeeds while the follower is cut off;
#   - once the follower reaches the others again, zklock is connected again
#     (in a new session), a new acquire works, and nothing is left behind
#     (zk_locks empty, no lock node in ZooKeeper).
# The same again with zklock.commit_confirm = on (COMMIT asks ZooKeeper):
# the follower's stale answer must not let the COMMIT through either.
#
# The ensemble: tickTime 500 ms, syncLimit 20 (the cut-off follower serves
# its stale state for 10 s), zklock.session_timeout 4 s: Curator gets the
# lock about 4.5 s after the cut, well inside the stale window, which the
# test checks (the follower still says 'follower' when Curator has the
# lock).  zklock sends nothing but its own heartbeats during the cut until
# the COMMIT: a server answers a session's requests in order, so a write
# waiting for the leader would hold back its answers to the session, and
# an idle holder is the case the stale follower keeps answering.  Before
# issue 18 the lease was renewed by any answer of the connected server, so
# the COMMIT succeeded about 4 s after the cut, after Curator had the lock,
# zk_locks said 'held' and zk_status 'connected' (2ab9e3f: both parts).
#
# Each server runs in its own network namespace and the test in its own
# (test/perl/ZklockNet.pm): the cut drops only the traffic between servers.
use strict;
use warnings;
BEGIN { require ZklockNet; ZklockNet::enter_private_network(); }
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use ZklockTest;
use ZklockFault;
use ZklockNet;

my $TICK = 500;
my $SYNC_LIMIT = 20;
my $SESSION_MS = 4000;
my $t_begin = time;

start_netns_ensemble(tick => $TICK, sync_limit => $SYNC_LIMIT);
my ($F) = netns_followers();
BAIL_OUT('no follower in the ensemble') unless $F;

my $node = new_zklock_node('iso', netns_connect($F->{id}), qq{zklock.session_timeout = '${SESSION_MS}ms'
zklock.server_tick_time = $TICK
zklock.connect_timeout = '2s'
});
$node->safe_psql('postgres', q{CREATE TABLE work_done(tag text, pid int)});

# ensure_on_follower(): zklock's only server must be a follower of the
# ensemble; if the one it uses no longer is, move zklock to one (reload).
sub ensure_on_follower
{
	my $mode = netns_mode($F) // 'not serving';
	if ($mode ne 'follower')
	{
		my ($f) = netns_followers();
		die "no follower to connect zklock to\n" unless $f;
		note("server $F->{id} is $mode now: zklock moves to follower $f->{id}");
		$F = $f;
		$node->safe_psql('postgres', "ALTER SYSTEM SET zklock.hosts = '$F->{connect}'");
		$node->reload;
	}
	return wait_until(
		sub {
			my $st = status_row($node);
			return $st->{state} eq 'connected' && ($st->{server} // '') eq $F->{connect};
		},
		30, "zklock connected to follower $F->{id}");
}

subtest 'zklock runs on a follower of a 3-server ensemble' => sub {
	ok(ensure_on_follower(), "zklock is connected to follower $F->{id} ($F->{connect}) only");
	my $st = status_row($node);
	is($st->{session_timeout}, $SESSION_MS, "negotiated session timeout $SESSION_MS ms");
	is($st->{server_mode}, 'ensemble', "zk_status().server_mode says 'ensemble'");
	my $l = netns_leader();
	ok($l && $l->{id} != $F->{id}, 'the leader is another server: ' . ($l ? $l->{id} : '?'));
};

# cut_off($tag, $confirm): the scenario of issue 18; returns what the heal
# part needs.
sub cut_off
{
	my ($tag, $confirm) = @_;
	my $path = "/iso/$tag";
	my %r = (tag => $tag, path => $path);
	ok(ensure_on_follower(), "zklock is on follower $F->{id}, the leader is another server");
	my @majority = grep { $_->{id} != $F->{id} } netns_members();
	my $peer = $r{peer} = new_peer(netns_connect(map { $_->{id} } @majority), "curator-$tag");
	my $s = ZklockTest::Session->new($node, "holder-$tag");
	my $m = ZklockTest::Session->new($node, "monitor-$tag");
	my $spid = $s->pid;
	$s->value('SET zklock.commit_confirm = ' . ($confirm ? 'on' : 'off'));
	$s->value('BEGIN');
	is($s->value("SELECT zk_mutex_acquire_xact('$path')"), 't', "the SQL session holds $path for its transaction");
	$s->value("INSERT INTO work_done VALUES ('$tag', pg_backend_pid())");
	$peer->acquire('c', $path, 60_000);
	ok(wait_children_count($peer, $path, 2, 10), 'a Curator client on the two other servers waits for it');
	my $before = status_row($node);
	$r{session} = $before->{session_id};
	my $drops0 = netns_dropped();

	# cut the follower off; watch zklock's view of the lock until Curator
	# says it has the lock
	my $t_iso = time;
	isolate_member($F);
	my (@polls, $t_grant, $grant, $t_lost);
	my $look_sql = "SELECT coalesce((SELECT state FROM zk_locks WHERE pid = $spid AND path = '$path'), 'none')"
	  . " || ' ' || (SELECT state FROM zk_status())";
	my ($lock_then, $conn_then);
	quietly(sub {
		while (time - $t_iso < 30)
		{
			if ($peer->has_reply(qr/^(acquired|timeout|error) c(\s|$)/))
			{
				$t_grant = time;
				last;
			}
			my $t = time;
			my ($lock, $conn) = split ' ', $m->value($look_sql);
			push @polls, [ $t - $t_iso, $lock, $conn ];
			$t_lost //= $t - $t_iso if $lock ne 'held';
			usleep(20_000);
		}
		# the moment Curator has it: what zk_locks says, then COMMIT
		if (defined $t_grant)
		{
			my $t = time;
			($lock_then, $conn_then) = split ' ', $m->value($look_sql);
			push @polls, [ $t - $t_iso, $lock_then, $conn_then ];
		}
	});
	my $t_commit = time;
	my $c = $s->query('COMMIT', 30);
	my $t_commit_end = time;
	$grant = $peer->acquire_result('c', 1);
	my $f_mode = netns_mode($F) // 'not serving';
	my $rel = sub { defined $_[0] ? sprintf('%.2f s', $_[0]) : 'never' };
	my $g = defined $t_grant ? $t_grant - $t_iso : undef;
	note(sprintf('cut at 0; zklock saw the lock lost: %s; Curator had it: %s; COMMIT %s..%s: %s; '
			  . 'the follower then said: %s', $rel->($t_lost), $rel->($g), $rel->($t_commit - $t_iso),
			$rel->($t_commit_end - $t_iso), $c->{sqlstate} // 'committed', $f_mode));
	my %seen;
	$seen{"$_->[1]/$_->[2]"} //= sprintf('%.2f', $_->[0]) for @polls;
	note('zk_locks/zk_status during the cut (first seen at, s): '
		  . join(', ', map { "$_ at $seen{$_}" } sort { $seen{$a} <=> $seen{$b} } keys %seen));

	is($grant, 'acquired', 'Curator, on the majority, got the lock while the follower was cut off (after '
		  . $rel->($g) . ')');
	cmp_ok(netns_dropped(), '>', $drops0, 'the cut dropped traffic between the servers');
	is($f_mode, 'follower', "zklock's server still served as a follower when Curator had the lock (the stale window)");
	is($c->{sqlstate}, '40000',
		'COMMIT, attempted as Curator got the lock (' . $rel->($t_commit - $t_iso) . ' after the cut), fails with 40000')
	  or diag("COMMIT: out=[$c->{out}] err=[$c->{err}]");
	ok(defined $t_lost && defined $g && $t_lost < $g,
		'zklock called the lock lost (' . $rel->($t_lost) . ') before Curator got it (' . $rel->($g) . ')');
	my @held_after = grep { defined $g && $_->[0] >= $g && $_->[1] eq 'held' } @polls;
	is(scalar @held_after, 0, "zk_locks never said 'held' once Curator had the lock (then: "
		  . ($lock_then // '?') . ', zk_status ' . ($conn_then // '?') . ')');
	is(committed($node, $tag), '0', 'the row of that transaction is not committed');
	is($node->safe_psql('postgres', "SELECT count(*) FROM zk_locks WHERE path = '$path' AND state = 'held'"),
		'0', "zk_locks shows no holder of $path");

	# a new acquire while still cut off
	my $n = ZklockTest::Session->new($node, "new-$tag");
	my $t_a = time;
	my $a = $n->query("SELECT zk_mutex_acquire('$path-other', '3s')", 30);
	my $answer = $a->{sqlstate} // ($a->{out} eq '' ? 'nothing' : $a->{out});
	isnt($answer, 't', "no new acquire succeeds while the follower is cut off (answer: $answer after "
		  . sprintf('%.1f s', time - $t_a) . ')');
	ok(scalar(isolated_members()) == 1 && (isolated_members())[0] == $F, '... and the follower was still cut off');
	$n->quit;
	$s->quit;
	$m->quit;
	return \%r;
}

# healed(\%r): the follower reaches the others again; zklock recovers.
sub healed
{
	my ($r) = @_;
	my ($tag, $path, $peer) = @$r{qw(tag path peer)};
	my $t_heal = time;
	heal_member($F);
	ok(wait_until(sub { my $mm = netns_modes(); (grep { defined $mm->{$_} } keys %$mm) == 3 }, 60,
			'every server to serve'),
		"every server serves again (server $F->{id} as " . (netns_mode($F) // '?') . ')');
	my $st;
	ok(wait_until(sub { $st = status_row($node); $st->{state} eq 'connected' }, 60, 'zklock connected'),
		sprintf("zk_status() says connected again (%.1f s after the heal)", time - $t_heal));
	isnt($st->{session_id}, $r->{session}, "in a new session ($r->{session} -> $st->{session_id})");
	is($peer->release('c'), 'released', 'Curator releases the lock');
	my $s = ZklockTest::Session->new($node, "after-$tag");
	is($s->value("SELECT zk_mutex_acquire('$path', '10s')"), 't', "a new acquire of $path succeeds");
	ok(wait_children_count($peer, $path, 1, 10), '... with its one node in ZooKeeper');
	is($s->value("SELECT zk_mutex_release('$path')"), 't', '... and its release');
	$s->quit;
	ok(wait_sql($node, 'SELECT count(*) FROM zk_locks', '0', 20), 'zk_locks is empty');
	ok(wait_children_count($peer, $path, 0, 20), "no node left under $path");
	ok(wait_children_count($peer, "$path-other", 0, 20), "no node left under $path-other");
	ok(wait_sql($node, 'SELECT locks_held || \' \' || deletes_pending FROM zk_status()', '0 0', 20),
		'zk_status: no lock held, no delete pending');
	$peer->quit;
	return;
}

my $a;
subtest 'a follower cut off from the leader: COMMIT fails (40000) no later than Curator gets the lock, nothing commits' => sub {
	$a = cut_off('a', 0);
};
subtest 'after the heal: connected again, a new acquire works, nothing left behind' => sub {
	healed($a);
};
my $b;
subtest 'with zklock.commit_confirm = on: the stale follower\'s answer does not let COMMIT through either' => sub {
	$b = cut_off('b', 1);
};
subtest 'after the heal (commit_confirm = on): connected again, a new acquire works, nothing left behind' => sub {
	healed($b);
};

$node->stop;
stop_netns_ensemble();
note(sprintf('502_isolated_follower took %.0f s', time - $t_begin));
done_testing();


# 721_create_batch: acquires of many sessions that reach the worker at once
# are created in ZooKeeper together, and each one still ends exactly as it
# would alone, whatever happens to the batch on the way.
#
# What users rely on:
#   1. Sessions acquiring locks on paths the worker knows, all at once (the
#      worker stopped for a moment while they ask, so they reach it in one
#      pass), all get their locks; the creates went as one ZooKeeper multi
#      (zk_status().batched_creates), and each fencing token
#      (zk_lock_token) is the creation zxid Curator reads from the
#      session's own node.
#   2. Sessions queueing on one mutex at once get tokens that strictly grow
#      in the order they hold it: two creates under one parent never share
#      a multi (they would share a creation zxid).
#   3. The batch on its way when the connection drops (its reply lost: the
#      nodes were made) or when the worker restarts: every session still
#      gets its lock exactly once, on the node the batch made (a Curator
#      client does not get a path while its session holds it), tokens are
#      the nodes' creation zxids, and no node is left behind after the
#      releases.  When the session expires instead, the waits end with
#      08006 as any wait does, the nodes go with the session, and the
#      sessions lock again in the new one.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use ZklockTest;
use ZklockFault;
use ZklockProxy;

my $K = 8;    # sessions acquiring at once

my $zk = start_zk();
my $proxy = ZklockProxy->start($zk);
my $node = new_zklock_node('cbatch', $proxy->connect,
	"zklock.session_timeout = '8s'\nzklock.connect_timeout = '30s'\nzklock.lease_margin = '1s'\n");
my $peer = new_peer($zk);    # Curator, straight to ZooKeeper
my @s = map { ZklockTest::Session->new($node, "s$_") } 1 .. $K;

# counter($name): a zk_status() column
sub counter { return status_row($node)->{ $_[0] }; }

# warm_up($base): each session takes and gives back its own mutex
# $base/p<k> twice, so the worker knows each path (its next create goes
# without a listing)
sub warm_up
{
	my ($base) = @_;
	quietly(sub {
		for my $k (1 .. $K)
		{
			for (1 .. 2)
			{
				$s[ $k - 1 ]->value("SELECT zk_mutex_acquire('$base/p$k')");
				$s[ $k - 1 ]->value("SELECT zk_mutex_release('$base/p$k')");
			}
		}
	});
	return;
}

# at_once($paths, $during): stop the worker, start one acquire per session
# (session k on $paths->[k-1]), wait until all of them are posted, run
# $during (a fault to arm, or nothing), let the worker go on
sub at_once
{
	my ($paths, $during) = @_;
	my $wpid = worker_pid($node);
	ok(kill('STOP', $wpid), "the worker (pid $wpid) is stopped for a moment");
	$s[$_]->start("SELECT zk_mutex_acquire('$paths->[$_]', '60s')") for 0 .. $#$paths;
	my $n = scalar @$paths;
	my $posted = wait_sql($node,
		q{SELECT count(*) FROM zk_locks WHERE state = 'waiting' AND pid IN (}
		  . join(',', map { $s[$_]->pid } 0 .. $#$paths) . ')',
		"$n", 10);
	$during->() if $during;
	ok(kill('CONT', $wpid), "the worker goes on ($n acquires posted: " . ($posted ? 'yes' : 'no') . ')');
	ok($posted, "all $n acquires reached the worker while it was stopped");
	return;
}

# token_is_czxid($k, $path): session k's token is its node's creation zxid
# as Curator reads it
sub token_is_czxid
{
	my ($k, $path, $what) = @_;
	my $kids = lock_children($peer, $path);
	my $tok = $s[ $k - 1 ]->value("SELECT zk_lock_token('$path')");
	my $st = @$kids ? $peer->cmd("stat $path/$kids->[0]", qr/^(stat|nonode) /) : 'none';
	my ($cz) = ($st // '') =~ /^stat \S+ (-?\d+)$/;
	is($tok, $cz // 'none', "$what: s${k}'s token is its node's creation zxid");
	return $tok;
}

# release_all($paths): each session releases its path; nothing is left
sub release_all
{
	my ($paths, $what) = @_;
	my $ok = 0;
	for my $k (1 .. @$paths)
	{
		$ok++ if $s[ $k - 1 ]->value("SELECT zk_mutex_release('$paths->[$k-1]')") eq 't';
	}
	is($ok, scalar @$paths, "$what: every session releases");
	my $left = 0;
	$left += scalar @{ lock_children($peer, $_) } for @$paths;
	ok(wait_until(sub { my $l = 0; $l += scalar @{ lock_children($peer, $_) } for @$paths; $left = $l; $l == 0 },
			15, 'no node left'),
		"$what: no node is left ($left)");
	return;
}

############################################################################
# 1. Distinct paths at once: one multi, tokens are the creation zxids.
############################################################################
subtest 'acquires on known paths at once are created together; tokens are the creation zxids' => sub {
	my $B = '/t721/each';
	warm_up($B);
	my @paths = map { "$B/p$_" } 1 .. $K;
	my $c0 = counter('batched_creates');
	my $b0 = counter('batches');
	at_once(\@paths);
	my $got = 0;
	for my $k (1 .. $K)
	{
		my $r = $s[ $k - 1 ]->result(20);
		$got++ if $r->{out} eq 't';
	}
	is($got, $K, "all $K sessions hold their locks");
	my $nc = counter('batched_creates') - $c0;
	my $nb = counter('batches') - $b0;
	note("$nc creates went in $nb multis");
	cmp_ok($nc, '>=', 2, "creates went to ZooKeeper together in a multi ($nc in $nb)");
	my %tok;
	$tok{ token_is_czxid($_, $paths[ $_ - 1 ], 'batched') }++ for 1 .. $K;
	note('tokens: ' . join(', ', map { "$_ x$tok{$_}" } sort keys %tok));
	$peer->acquire('c1', $paths[0], 1000);
	is($peer->acquire_result('c1', 10), 'timeout', 'Curator cannot take a path a session holds');
	release_all(\@paths, 'batched');
};

############################################################################
# 2. One mutex, several sessions at once: tokens strictly grow.
############################################################################
subtest 'sessions queueing on one mutex at once: tokens strictly grow in holding order' => sub {
	my $P = '/t721/one';
	warm_up('/t721/onewarm');
	is($s[0]->value("SELECT zk_mutex_acquire('$P')"), 't', 's1 holds the mutex');
	my @w = (1 .. 4);
	my $wpid = worker_pid($node);
	ok(kill('STOP', $wpid), 'the worker is stopped for a moment');
	$s[$_]->start("SELECT zk_mutex_acquire('$P', '60s')") for @w;
	ok(wait_sql($node, qq{SELECT count(*) FROM zk_locks WHERE path = '$P' AND state = 'waiting'}, '4', 10),
		'four sessions ask for it while the worker is stopped');
	ok(kill('CONT', $wpid), 'the worker goes on');
	ok(wait_children_count($peer, $P, 5), 'five nodes queue');
	my @toks = ($s[0]->value("SELECT zk_lock_token('$P')"));
	my $holder = 0;
	for (1 .. 4)
	{
		is($s[$holder]->value("SELECT zk_mutex_release('$P')"), 't', "s" . ($holder + 1) . ' releases');
		my ($next) = grep { $s[$_]->done } grep { $s[$_]->{pending} } @w;
		ok(wait_until(sub { ($next) = grep { $s[$_]->{pending} && $s[$_]->done } @w; defined $next }, 15,
				'the next holder'), 'the next session holds it');
		last unless defined $next;
		is($s[$next]->result(5)->{out}, 't', 's' . ($next + 1) . ' holds');
		push @toks, $s[$next]->value("SELECT zk_lock_token('$P')");
		$holder = $next;
	}
	is($s[$holder]->value("SELECT zk_mutex_release('$P')"), 't', 'the last one releases');
	my $grow = 1;
	$grow &&= ($toks[$_] > $toks[ $_ - 1 ]) for 1 .. $#toks;
	ok($grow, 'tokens strictly grow in holding order: ' . join(' < ', @toks));
	ok(wait_children_count($peer, $P, 0), 'no node left');
};

############################################################################
# 3. Faults with a batch on its way.
############################################################################
for my $fault ('reply lost, connection cut', 'worker restart', 'session expiry')
{
	subtest "a batch on its way, $fault: every session holds once, nothing is left" => sub {
		(my $tag = $fault) =~ s/\W+/_/g;
		my $B = "/t721/$tag";
		warm_up($B);
		my @paths = map { "$B/p$_" } 1 .. $K;
		my $sid0 = status_row($node)->{session_id};
		$peer->acquire("cw_$tag", $paths[2], -1);
		ok(wait_children_count($peer, $paths[2], 1), 'a Curator client takes p3 first');
		is($peer->acquire_result("cw_$tag", 10), 'acquired', '... and holds it');
		my $c0 = counter('batched_creates');
		# the server applies what it is sent; its answers are lost
		at_once(\@paths, sub { $proxy->set_mode('drop_replies') });
		ok(wait_until(sub { counter('batched_creates') > $c0 }, 10, 'the multi to leave'),
			'the creates left as a multi');
		ok(wait_until(sub { scalar @{ lock_children($peer, $paths[0]) } == 1 }, 10, 'the multi applied'),
			'ZooKeeper applied it (p1 has its node)');
		if ($fault eq 'worker restart')
		{
			my ($old, $new) = restart_worker($node, 'TERM');
			isnt($new, '', "the worker restarted ($old -> $new)");
			$proxy->set_mode('cut');
		}
		elsif ($fault eq 'session expiry')
		{
			my ($id, $pw) = session_file($node);
			ok(expire_session($zk, $id, $pw), 'the session is expired from outside');
			$proxy->set_mode('cut');
		}
		else
		{
			$proxy->set_mode('cut');
		}
		$proxy->set_mode('pass');
		ok(wait_connected($node, 30), 'connected again');
		is(status_row($node)->{session_id} eq $sid0 ? 'same' : 'new',
			$fault eq 'session expiry' ? 'new' : 'same', 'in the session expected');
		is($peer->release("cw_$tag"), 'released', 'Curator gives p3 up');
		if ($fault eq 'session expiry')
		{
			# a wait ends with the session that carried it (the failure
			# model): the nodes went with the session; the acquire again
			my $expired = 0;
			for my $k (1 .. $K)
			{
				my $r = $s[ $k - 1 ]->result(40);
				$expired++ if ($r->{sqlstate} // '') eq '08006';
				diag("s$k: out=$r->{out} err=$r->{err}") if ($r->{sqlstate} // '') ne '08006';
			}
			is($expired, $K, "the $K waits ended with 08006 (session expired)");
			for my $k (1 .. $K)
			{
				ok(wait_children_count($peer, $paths[ $k - 1 ], 0), "p$k: the expired session's node is gone");
			}
			$s[$_]->start("SELECT zk_mutex_acquire('$paths[$_]', '60s')") for 0 .. $K - 1;
		}
		my $got = 0;
		for my $k (1 .. $K)
		{
			my $r = $s[ $k - 1 ]->result(40);
			$got++ if $r->{out} eq 't';
			diag("s$k: err=$r->{err}") if $r->{err} ne '';
		}
		is($got, $K, "all $K sessions hold their locks");
		for my $k (1 .. $K)
		{
			is(scalar @{ lock_children($peer, $paths[ $k - 1 ]) }, 1, "p$k has exactly one node");
		}
		token_is_czxid($_, $paths[ $_ - 1 ], $fault) for (1, 3, $K);
		$peer->acquire("c3_$tag", $paths[2], 1000);
		is($peer->acquire_result("c3_$tag", 10), 'timeout', 'Curator cannot take p3 back while s3 holds it');
		release_all(\@paths, $fault);
	};
}

############################################################################
# 4. Every node of an applied multi deleted from outside before the worker
#    reads their token.
############################################################################
# The creates of an applied multi learn their token from an exists of a
# node it made.  When an operator (here Curator) deleted every one of them
# before that exists, a session must not be told it holds a lock with no
# node and no token: it finds out its node is gone and makes a new one.
# The multi's replies are held back by the proxy while the nodes go.
subtest 'a multi whose nodes were all deleted before its token was read: no lock without a node, each session makes a new one' => sub {
	my $B = '/t721/gone';
	warm_up($B);
	my @paths = map { "$B/p$_" } 1 .. $K;
	my $m0 = $proxy->stats->{multi_requests};
	at_once(\@paths, sub { $proxy->set_mode('hold_replies') });
	ok(wait_until(sub { $proxy->stats->{multi_requests} > $m0 }, 15, 'the multi'),
		'the creates left in a multi (its reply held back)');
	my $gone = 0;
	ok(wait_until(sub {
				for my $path (@paths)
				{
					for my $kid (@{ lock_children($peer, $path) })
					{
						$gone++ if ($peer->delete("$path/$kid") // '') =~ /^deleted/;
					}
				}
				return $gone >= $K;
			}, 15, 'the nodes made by the multi'),
		"every node the multi made is deleted from outside ($gone)");
	$proxy->set_mode('pass');
	my $got = 0;
	for my $k (1 .. $K)
	{
		my $r = $s[ $k - 1 ]->result(30);
		$got++ if $r->{out} eq 't';
	}
	is($got, $K, "all $K sessions hold their locks");
	for my $k (1 .. $K)
	{
		is(scalar @{ lock_children($peer, $paths[ $k - 1 ]) }, 1, "p$k has a node again");
	}
	token_is_czxid($_, $paths[ $_ - 1 ], 'made again') for 1 .. $K;
	$peer->acquire('cg', $paths[0], 1000);
	is($peer->acquire_result('cg', 10), 'timeout', 'Curator cannot take a path a session holds');
	release_all(\@paths, 'made again');
};

$_->quit for @s;
$peer->quit;
$proxy->stop;
stop_zk($zk);
done_testing();

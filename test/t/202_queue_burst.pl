
# 202_queue_burst: more concurrent requests than zklock.max_requests.
#
# What users rely on: with zklock.max_requests = 8, a burst of 20 backends
# acquiring one lock at once (all have to wait: Curator holds it) never
# hangs: 8 wait, the other 12 get SQLSTATE 53400 naming
# zklock.max_requests at once; the 8 waiters then get the lock in turn when
# it is free. Afterwards the worker is healthy, every slot is free again
# (exactly 8 locks can be held), and no node is left in ZooKeeper.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use ZklockTest;
use ZklockFault;

my $path = '/t202/m';
my $slots = 8;
my $burst = 20;

my $zk = start_zk();
my $node = new_zklock_node('burst', $zk, "zklock.max_requests = $slots\n");
my $peer = new_peer($zk);

$peer->acquire('c', $path, -1);
is($peer->acquire_result('c'), 'acquired', 'Curator holds the lock: every SQL acquire must wait');

my @s = map { ZklockTest::Session->new($node, "b$_") } 1 .. $burst;
my $t0 = time;
# Each statement takes the lock and gives it back, so that all waiters can
# finish one after the other once Curator releases it.
$_->start("SELECT zk_mutex_acquire('$path', '60s') AND zk_mutex_release('$path')") for @s;

# Every request is either refused or queued within a few seconds.
my (%res, %when);
ok( wait_until(
		sub {
			for my $x (@s)
			{
				next if exists $res{ $x->name } || !$x->done;
				$res{ $x->name } = $x->result(5);
				$when{ $x->name } = time - $t0;
			}
			my $waiting = $node->safe_psql('postgres',
				qq{SELECT count(*) FROM zk_locks WHERE path = '$path' AND state = 'waiting'});
			return keys(%res) + $waiting == $burst;
		},
		20, 'every request refused or waiting'),
	'every request of the burst is refused or waiting');
my @refused = grep { ($res{$_}{sqlstate} // '') eq '53400' } keys %res;
my @other = grep { ($res{$_}{sqlstate} // '') ne '53400' } keys %res;
is(scalar @refused, $burst - $slots, ($burst - $slots) . " requests refused with 53400");
is(scalar @other, 0, 'no other outcome while the lock is held')
  or diag(join "\n", map { "$_: out=[$res{$_}{out}] err=[$res{$_}{err}]" } @other);
is(scalar(grep { $res{$_}{err} =~ /zklock\.max_requests/ } @refused), scalar @refused,
	'every refusal names zklock.max_requests');
my $slowest = 0;
$slowest = $when{$_} > $slowest ? $when{$_} : $slowest for @refused;
cmp_ok($slowest, '<', 10, sprintf('refusals come promptly (slowest after %.1f s)', $slowest));
my $st = status_row($node);
is($st->{slots_used}, $slots, "zk_status: all $slots slots in use") if exists $st->{slots_used};
is(scalar @{ lock_children($peer, $path) }, 1 + $slots,
	"ZooKeeper: Curator's node and $slots waiter nodes, nothing from the refused requests");

# Curator lets go: the 8 waiters get the lock one after the other.
is($peer->release('c'), 'released', 'Curator releases');
my @waiters = grep { !exists $res{ $_->name } } @s;
is(scalar @waiters, $slots, "$slots waiters pending");
my $granted = 0;
for my $x (@waiters)
{
	my $r = $x->result(30);
	$granted++ if $r->{done} && $r->{out} eq 't';
	diag($x->name . ": out=[$r->{out}] err=[$r->{err}]") unless $r->{done} && $r->{out} eq 't';
}
is($granted, $slots, 'every waiter got the lock (and released it); nobody hung');

# The worker is healthy and every slot is free again.
ok(wait_connected($node, 10), 'zk_status: connected');
ok(wait_sql($node, q{SELECT requests_queued || '/' || locks_held FROM zk_status()}, '0/0', 10),
	'zk_status: nothing queued, nothing held');
ok(wait_sql($node, q{SELECT slots_used FROM zk_status()}, '0', 10), 'zk_status: no slot used')
  if exists $st->{slots_used};
ok(wait_children_count($peer, $path, 0), "no node left under $path");

my $one = $s[0];
my @paths = map { "/t202/p$_" } 1 .. $slots;
is($one->value('SELECT ' . join(' AND ', map { "zk_mutex_acquire('$_', '5s')" } @paths)), 't',
	"one backend can hold $slots locks: no slot leaked");
my $r = $one->query(q{SELECT zk_mutex_acquire('/t202/p9', '1s')});
is($r->{sqlstate}, '53400', 'a 9th is refused with 53400 (the limit still holds)');
is($one->value('SELECT zk_release_all()'), $slots, "zk_release_all releases $slots");
is($s[1]->value(qq{SELECT zk_mutex_acquire('$path', '5s') AND zk_mutex_release('$path')}), 't',
	'another backend acquires and releases');
ok(wait_children_count($peer, $_, 0), "no node left under $_") for (@paths, $path);

$_->quit for @s;
$peer->quit;
$node->stop;
stop_zk($zk);
done_testing();

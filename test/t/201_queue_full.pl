
# 201_queue_full: the shared request table has zklock.max_requests slots.
#
# What users rely on: when every slot is taken (held or waiting locks), a new
# request fails at once with SQLSTATE 53400 naming zklock.max_requests — it
# never hangs — and once slots are freed acquires work again.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use ZklockTest;

my $path = '/t201/mutex';

my $zk = start_zk();
my $node = new_zklock_node('queue_full', $zk, "zklock.max_requests = 4\n");

# Four sessions take the four slots: one holds, three wait.
my @s = map { ZklockTest::Session->new($node, "s$_") } 1 .. 5;
is($s[0]->value("SELECT zk_mutex_acquire('$path')"), 't', 's1 holds the lock');
for my $i (1 .. 3)
{
	$s[$i]->start("SELECT zk_mutex_acquire('$path')");
	ok(wait_waiting($node, $s[$i]->pid, $path), $s[$i]->name . ' waits');
}

# The fifth request, on the same path or another one, fails at once.
for my $p ($path, '/t201/other')
{
	my $t0 = time;
	my $r = $s[4]->query("SELECT zk_mutex_acquire('$p', '5s')", 15);
	my $el = time - $t0;
	is($r->{sqlstate}, '53400', "5th request ($p) fails with SQLSTATE 53400") or diag($r->{err});
	like($r->{err}, qr/zklock\.max_requests/, 'the error names zklock.max_requests');
	cmp_ok($el, '<', 4, "it failed without waiting for its timeout ($el s)");
}
my $t0 = time;
my $r = $s[4]->query("SELECT zk_mutex_try_acquire('/t201/other')", 15);
is($r->{sqlstate}, '53400', 'try_acquire also fails with 53400 when the table is full');
cmp_ok(time - $t0, '<', 4, 'without hanging');

# The failed requests did not take a slot or disturb the queue.
is( $node->safe_psql('postgres', qq{SELECT count(*) FROM zk_locks}),
	'4', 'zk_locks still shows the 4 requests');

# Release the chain: each release hands the lock to the next waiter.
for my $i (0 .. 2)
{
	is($s[$i]->value("SELECT zk_mutex_release('$path')"), 't', $s[$i]->name . ' releases');
	$r = $s[ $i + 1 ]->result;
	is($r->{out}, 't', $s[ $i + 1 ]->name . ' gets the lock') or diag($r->{err});
}
is($s[3]->value("SELECT zk_mutex_release('$path')"), 't', 's4 releases');
ok(wait_sql($node, 'SELECT count(*) FROM zk_locks', '0', 10), 'all slots are free');

# Slots are reusable: the fifth session acquires, and four locks can be
# held at once again.
is($s[4]->value("SELECT zk_mutex_acquire('$path', '5s')"), 't', 's5 acquires after the releases');
for my $i (0 .. 2)
{
	is($s[$i]->value("SELECT zk_mutex_acquire('/t201/p$i', '5s')"), 't',
		$s[$i]->name . " acquires /t201/p$i (slot " . ($i + 2) . ')');
}
$r = $s[3]->query("SELECT zk_mutex_acquire('/t201/p3', '5s')", 15);
is($r->{sqlstate}, '53400', 'the table is full again at 4 held locks');
is($s[0]->value('SELECT zk_release_all()'), '1', 'zk_release_all releases one lock');
is($s[3]->value("SELECT zk_mutex_acquire('/t201/p3', '5s')"), 't', 'a freed slot is usable at once');

$_->quit for @s;
ok(wait_sql($node, 'SELECT count(*) FROM zk_locks', '0', 10), 'sessions ended: all slots free');
$node->stop;
stop_zk($zk);
done_testing();


# 181_participants_answers: zk_participants answers for every node, however
# large the answer, and says who holds as the lock itself decides.
#
# What users rely on:
#   1. An answer larger than the first buffer (64 kB) is read whole: every
#      node with its own data, none missing and no data on the wrong node.
#   2. holds is true for every holder of a read/write lock: the readers
#      ahead of the first writer, and a write holder's downgraded read node
#      (same sequence number) whichever of the two sorts first; a reader
#      queued behind the writer does not hold.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use ZklockTest;

my $zk = start_zk();
my $node = new_zklock_node('panswers', $zk);
my $peer = new_peer($zk);

# make an ephemeral node of the peer's session with the given text as data
sub make_node
{
	my ($path, $text) = @_;
	$peer->ephemeral($path);
	my $l = $peer->cmd("set $path $text", qr/^(set|nonode) \Q$path\E$|^error set/);
	die "set $path: " . ($l // 'no reply') unless defined $l && $l =~ /^set /;
}

############################################################################
# 1. three lock nodes of 40 kB each: 120 kB of answer
############################################################################
subtest 'an answer over the first 64 kB buffer comes whole, each node with its own data' => sub {
	my $p = '/t181/big';
	my @names = map { sprintf('_c_%08d-0000-4000-8000-000000000000-lock-%010d', $_, $_) } 1 .. 3;
	for my $i (0 .. $#names)
	{
		# each node's data names the node, padded to 40 kB
		make_node("$p/$names[$i]", $names[$i] . ('x' x (40 * 1024)));
	}
	my $rows = participants_rows($node, $p);
	is(scalar @$rows, 3, 'all three nodes are listed (the answer is over 64 kB)');
	is_deeply([ map { $_->{node} =~ s{^.*/}{}r } @$rows ], \@names, '... in queue order');
	for my $r (@$rows)
	{
		my $n = $r->{node} =~ s{^.*/}{}r;
		is(length($r->{data}), length($n) + 40 * 1024, "$n: its whole data");
		is(substr($r->{data}, 0, length($n)), $n, "$n: its own data, not another node's");
	}
	is(join(',', map { $_->{holds} } @$rows), 't,f,f', 'the first node holds the mutex');
};

############################################################################
# 2. a downgraded write holder: both of its nodes hold, whatever the order
############################################################################
subtest 'both nodes of a downgraded write holder hold, whatever the order' => sub {
	for my $case ([ 'writer_first', 'a', 'b' ], [ 'reader_first', 'b', 'a' ])
	{
		my ($name, $wl, $rl) = @$case;
		my $q = "/t181/$name";
		# the writer's and its downgraded read node share sequence number 7;
		# the first letter of their ids decides which sorts first
		my $w = "_c_${wl}aaaaaaa-0000-4000-8000-000000000000-__WRIT__0000000007";
		my $d = "_c_${rl}bbbbbbb-0000-4000-8000-000000000000-__READ__0000000007";
		my $r = '_c_cccccccc-0000-4000-8000-000000000000-__READ__0000000008';
		make_node("$q/$_", 'n') for ($w, $d, $r);
		my %holds = map { (($_->{node} =~ s{^.*/}{}r) => $_->{holds}) } @{ participants_rows($node, $q) };
		is($holds{$w}, 't', "$name: the write node holds");
		is($holds{$d}, 't', "$name: the downgraded read node (same sequence number) holds");
		is($holds{$r}, 'f', "$name: the reader queued behind the writer does not");
	}
};

$peer->quit;
$node->stop;
stop_zk($zk);
done_testing();

#!/usr/bin/perl
# callgraph.pl — the call graph between zklock's C files, from the built
# objects (nm): which file calls a function another file defines (calls
# only: reading a GUC or a worker-wide variable is not counted).  It
# prints the groups of files that call each other in a circle (the strongly
# connected components of more than one file) and fails when the graph has
# a cycle that is not listed in KNOWN below: a new call that runs back up
# the layering (src/README, "Layers") fails CI.  KNOWN is the debt of
# issue 20, to shrink to nothing; a group that shrinks passes, one that
# grows or a new one fails.
#
#   perl test/callgraph.pl [objdir]     (default: src, after make)
use strict;
use warnings;

my $dir = shift // 'src';

# Cycles known when the check was added (issue 20), by their files.
my @KNOWN = (
	[qw(zklock zklock_loss zklock_shmem)],
	[qw(zklock_args zklock_backend zklock_confirm zklock_deletes zklock_ghosts
		zklock_local zklock_lockeng zklock_rcp_barrier zklock_rcp_dbarrier
		zklock_rcp_mutex zklock_rcp_participants zklock_rcp_revoke
		zklock_rcp_rwlock zklock_rcp_semaphore zklock_recipes zklock_request
		zklock_views zklock_wait zklock_zkio)],
);

my (%defines, %uses);
opendir(my $dh, $dir) or die "$dir: $!";
my @objs = sort grep { /^zklock.*\.o$/ } readdir($dh);
closedir($dh);
die "no zklock objects in $dir: run make first\n" unless @objs;
for my $o (@objs)
{
	(my $f = $o) =~ s/\.o$//;
	for (`nm -g --defined-only "$dir/$o"`)
	{
		$defines{$1} = $f if /\sT\s+(\S+)$/;
	}
	$uses{$f} = [ map { /\sU\s+(\S+)$/ ? $1 : () } `nm -u "$dir/$o"` ];
}
my %edge;
for my $f (keys %uses)
{
	for my $sym (@{ $uses{$f} })
	{
		my $to = $defines{$sym} // next;
		$edge{$f}{$to} = 1 unless $to eq $f;
	}
}

# Tarjan's strongly connected components
my ($index, @stack, %idx, %low, %on, @sccs) = (0);
my $strong;
$strong = sub {
	my ($v) = @_;
	$idx{$v} = $low{$v} = $index++;
	push @stack, $v;
	$on{$v} = 1;
	for my $w (sort keys %{ $edge{$v} // {} })
	{
		if (!exists $idx{$w}) { $strong->($w); $low{$v} = $low{$w} if $low{$w} < $low{$v}; }
		elsif ($on{$w}) { $low{$v} = $idx{$w} if $idx{$w} < $low{$v}; }
	}
	if ($low{$v} == $idx{$v})
	{
		my @c;
		my $w;
		do { $w = pop @stack; $on{$w} = 0; push @c, $w; } while ($w ne $v);
		push @sccs, [ sort @c ] if @c > 1;
	}
};
$strong->($_) for sort keys %uses;

my $fail = 0;
for my $c (@sccs)
{
	my %in = map { $_ => 1 } @$c;
	my ($home) = grep { my %k = map { $_ => 1 } @$_; !grep { !$k{$_} } @$c } @KNOWN;
	printf "%s cycle of %d files: %s\n", $home ? 'known' : 'NEW', scalar(@$c), join(' ', @$c);
	$fail = 1 unless $home;
}
my $edges = 0;
$edges += keys %{ $edge{$_} } for keys %edge;
printf "%d files, %d calls between files, %d cycle group(s)\n", scalar(keys %uses), $edges, scalar(@sccs);
if ($fail)
{
	print "callgraph: a call cycle not known before; make the call go one way (src/README, Layers)\n";
	exit 1;
}
exit 0;

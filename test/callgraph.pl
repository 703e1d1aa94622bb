#!/usr/bin/perl
# callgraph.pl — the call graph between zklock's C files, from the built
# objects (nm): which file calls a function another file defines (calls
# only: reading a GUC, a worker-wide variable or a table of hooks is not
# counted).  A file is named by its path under src/ (worker/batch, worker/locks/handover).
# It fails when
#   - files call each other in a circle (a strongly connected component of
#     more than one file): a call that runs back up the layering
#     (src/README, "Layers") fails CI; the way up is a hook read from data
#     (the recipe registry, the handover layer's table,
#     zklock_node_gone_hook);
#   - a file calls or reads (functions and variables alike) a file of a
#     folder its own folder may not use (%MAY_USE below): core/ uses
#     nothing of ours, common/ only core/, backend/ and worker/ never use
#     each other, only recipes/ (and src/zklock.c, the module's entry)
#     sees both sides;
#   - a file exports a function or variable no other file uses (it should
#     be static), SQL functions and the worker's entry point aside;
#   - a file uses a zklock_ symbol no file defines (an object missing
#     from the Makefile's OBJS would only fail when the library loads);
#   - a file (.c or .h) includes a header of ours that its folder may not
#     use: the same %MAY_USE, read from the #include "..." lines of the
#     sources rather than from the objects.  The top-level headers
#     (zklock.h, compat.h) are everyone's but core/'s: the pure cores
#     include core/ headers only.  Of recipes/, the two sides include the
#     contract, recipes/recipe.h, which declares the registry's lookups,
#     and each its own half of it: worker/ recipes/recipe_worker.h,
#     backend/ recipes/recipe_sql.h, never the other's (%MAY_INCLUDE
#     below);
#   - a file of backend/ reaches the ZooKeeper client's header
#     (<zookeeper/...>) through the headers of ours it includes, followed
#     transitively: only the worker process sees the client;
#   - a file includes a module's internal header (a *_int.h, such as
#     worker/locks/locks_int.h) from outside that module's folder: what
#     the module's files call of each other is theirs alone, the rest of
#     the worker includes the module's own header (worker/locks/locks.h).
# A folder's subfolders (worker/connection/, worker/deletes/,
# worker/locks/: the worker's modules) belong to its layer: the rules of
# %MAY_USE and %MAY_INCLUDE go by the first component of a path.
#
#   perl test/callgraph.pl [srcdir]     (default: src, after make)
use strict;
use warnings;

my $dir = shift // 'src';

# Cycles allowed, by their files: none (issue 20 broke the last ones).
my @KNOWN = ();

# exported by necessity though no file of ours calls them: SQL functions,
# their info functions, the module's entry points, the worker's main
my $ENTRY = qr/^(zk_\w+|pg_finfo_\w+|_PG_init|Pg_magic_func|zklock_worker_main)$/;
# the pure cores: their functions are also the unit tests' interface
# (test/unit), and an assertion's use vanishes from a build without them
my $PURE = qr{^core/};

# The folders a file of each folder may use (besides its own).  The
# registry (recipes/registry: the ops and kind tables, read by both sides)
# is the one file of recipes/ the two sides may use.
my %MAY_USE = (
	core => [],
	common => ['core'],
	backend => [ 'core', 'common', 'recipes/registry' ],
	worker => [ 'core', 'common', 'recipes/registry' ],
	recipes => [ 'core', 'common', 'backend', 'worker' ],
	'.' => [ 'core', 'common', 'backend', 'worker', 'recipes' ],
);

# The headers a file of a folder may include besides those of the folders
# %MAY_USE allows it: recipes/recipe.h declares the registry's lookups
# that backend/ and worker/ call, and the descriptor they read; each side
# includes the half of the contract it offers the recipes.
my %MAY_INCLUDE = (
	backend => [ 'recipes/recipe.h', 'recipes/recipe_sql.h' ],
	worker => [ 'recipes/recipe.h', 'recipes/recipe_worker.h' ],
);

# folders whose files must not reach the ZooKeeper client's header
my @NO_ZOOKEEPER = ('backend');

# folder_of($file): the layer of a file named by its path under src/: its
# first folder (worker/locks/handover -> worker), '.' at the top
sub folder_of { return $_[0] =~ m{^(\w+)/} ? $1 : '.'; }

# may_use($from, $to): whether file $from may call or read file $to
sub may_use
{
	my ($from, $to) = @_;
	my ($ff, $tf) = (folder_of($from), folder_of($to));
	return 1 if $ff eq $tf;
	return scalar grep { $_ eq $tf || $_ eq $to } @{ $MAY_USE{$ff} // [] };
}

# may_include($from, $header): whether file $from may include $header (both
# by their paths under src/)
sub may_include
{
	my ($from, $hdr) = @_;
	my ($ff, $hf) = (folder_of($from), folder_of($hdr));
	return 1 if $ff eq $hf;
	return $ff ne 'core' if $hf eq '.';
	return 1 if grep { $_ eq $hdr } @{ $MAY_INCLUDE{$ff} // [] };
	return may_use($from, $hdr =~ s/\.h$//r);
}

my (%defines, %uses, %exported, %used_by);
my @objs = sort map { s{^\Q$dir\E/}{}r } split /\n/, `find "$dir" -name '*.o' | sort`;
die "no zklock objects in $dir: run make first\n" unless @objs;
for my $o (@objs)
{
	(my $f = $o) =~ s/\.o$//;
	for (`nm -g --defined-only "$dir/$o"`)
	{
		$defines{$1} = $f if /\sT\s+(\S+)$/;
		$exported{$1} = $f if /\s[TDRBC]\s+(\S+)$/;
	}
	$uses{$f} = [ map { /\sU\s+(\S+)$/ ? $1 : () } `nm -u "$dir/$o"` ];
	$used_by{$_}{$f} = 1 for @{ $uses{$f} };
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
for my $f (sort keys %uses)
{
	for my $sym (sort @{ $uses{$f} })
	{
		my $to = $exported{$sym} // next;
		next if $to eq $f || may_use($f, $to);
		printf "%s uses %s of %s: folder %s/ may not use %s\n", $f, $sym, $to, folder_of($f), $to;
		$fail = 1;
	}
}
for my $sym (sort keys %exported)
{
	next if $sym =~ $ENTRY || $exported{$sym} =~ $PURE || grep { $_ ne $exported{$sym} } keys %{ $used_by{$sym} // {} };
	print "$exported{$sym}: $sym is used by no other file: make it static\n";
	$fail = 1;
}
for my $sym (sort keys %used_by)
{
	next if $sym !~ /^zklock_/ || exists $exported{$sym};
	printf "%s: uses %s, which no file defines (missing from OBJS?)\n",
	  join(',', sort keys %{ $used_by{$sym} }), $sym;
	$fail = 1;
}
# the #include "..." lines of every source: a header is ours when it is
# a file under $dir (by its path there, or beside the including file)
my @sources = sort map { s{^\Q$dir\E/}{}r } split /\n/,
  `find "$dir" -name '*.[ch]' | sort`;
my $includes = 0;
my $int_includes = 0;
my (%ours, %zk_direct);			# headers of ours each source includes;
								# whether it includes <zookeeper/...>
for my $src (@sources)
{
	open my $fh, '<', "$dir/$src" or die "$dir/$src: $!\n";
	$ours{$src} = [];
	while (<$fh>)
	{
		$zk_direct{$src} = $. if /^\s*#\s*include\s+<zookeeper\//;
		next unless /^\s*#\s*include\s+"([^"]+)"/;
		my $inc = $1;
		(my $here = $src) =~ s{[^/]*$}{};
		my $hdr = -f "$dir/$inc" ? $inc : -f "$dir/$here$inc" ? "$here$inc" : next;
		$includes++;
		push @{ $ours{$src} }, $hdr;
		# a module's internal header: only files of its folder (or below)
		if ($hdr =~ m{^(.*/)[^/]*_int\.h$})
		{
			my $module = $1;
			$int_includes++;
			if (substr($src, 0, length $module) ne $module)
			{
				printf "%s:%d includes \"%s\": only the files of %s may include that module's internal header\n",
				  $src, $., $inc, $module;
				$fail = 1;
			}
		}
		next if may_include($src, $hdr);
		printf "%s:%d includes \"%s\": folder %s/ may not include %s\n",
		  $src, $., $inc, folder_of($src), $hdr;
		$fail = 1;
	}
	close $fh;
}
# zk_path($src): the chain of our headers by which $src reaches
# <zookeeper/...> (ending in the one that includes it), or () if none
sub zk_path
{
	my ($src, $seen) = @_;
	$seen //= {};
	return () if $seen->{$src}++;
	return ($src) if $zk_direct{$src};
	for my $h (@{ $ours{$src} // [] })
	{
		my @p = zk_path($h, $seen);
		return ($src, @p) if @p;
	}
	return ();
}
for my $src (@sources)
{
	next unless grep { folder_of($src) eq $_ } @NO_ZOOKEEPER;
	my @p = zk_path($src);
	next unless @p;
	printf "%s reaches <zookeeper/...> through %s: folder %s/ must not see the ZooKeeper client\n",
	  $src, join(' -> ', @p), folder_of($src);
	$fail = 1;
}

my $edges = 0;
$edges += keys %{ $edge{$_} } for keys %edge;
printf "%d files, %d calls between files, %d cycle group(s); %d sources, %d includes of ours (%d of a module's _int.h)\n",
  scalar(keys %uses), $edges, scalar(@sccs), scalar(@sources), $includes, $int_includes;
if ($fail)
{
	print "callgraph: failed; make calls and includes go one way and only to the folders allowed (src/README, Layers) and keep file-local names static; include a module's _int.h only in its own files\n";
	exit 1;
}
exit 0;

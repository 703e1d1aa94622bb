#!/usr/bin/perl
# check-mutants.pl — check that every mutant of test/mutants still applies
# to src/ as it is (issue 45, item 5).
#
#   perl test/meta/check-mutants.pl [TREE]     (default: the tree it is in)
#   perl test/meta/check-mutants.pl --self-test [TREE]
#
# test/mutants/run.sh applies each patch to a copy of the tree with
# `git apply`, which, like `patch --fuzz=0`, refuses a hunk whose context
# lines no longer match: a change of src/ near a mutated spot stops the
# mutant from applying, and the run would only find out hours later (one
# once stopped applying unnoticed).  This checks each patch in seconds:
# `git apply --check` in TREE, as run.sh does; where git is missing (the
# fresh roots of CI have none) `patch -p1 --dry-run --fuzz=0`.  Outside a
# git repository too (a copy of the tracked files, as test/root-lib.sh
# makes): git looks for no repository above TREE (GIT_CEILING_DIRECTORIES),
# so the patch's paths are taken from TREE whatever it lies in.  A patch
# that does not apply is named, with what git or patch said, and the exit
# status is 1.
#
# --self-test first plants a broken patch, a copy of the first mutant with
# one context line changed, and one that names a file src/ does not have,
# each in a temporary folder, and fails unless both are refused; then it
# checks the real patches.
#
# Perl's core modules, git or patch: runs in the inner loop without root
# (make check-meta) as well as in test/all.sh.
use strict;
use warnings;
use File::Basename qw(dirname basename);
use File::Spec;
use File::Temp qw(tempdir);
use Cwd qw(abs_path);

my $self_test = @ARGV && $ARGV[0] eq '--self-test' ? shift @ARGV : undef;
my $tree = abs_path(shift(@ARGV) // File::Spec->catdir(dirname(File::Spec->rel2abs($0)), "..", ".."));
my $mut_dir = File::Spec->catdir($tree, 'test', 'mutants');

# slurp FILE: its contents, or die
sub slurp {
	my ($file) = @_;
	open(my $fh, '<', $file) or die "check-mutants: cannot read $file: $!\n";
	local $/;
	return scalar <$fh>;
}

# spew FILE TEXT: write TEXT to FILE, or die
sub spew {
	my ($file, $text) = @_;
	open(my $fh, '>', $file) or die "check-mutants: cannot write $file: $!\n";
	print $fh $text;
	close($fh) or die "check-mutants: cannot write $file: $!\n";
}

# the tool: git when it runs, else patch
my $have_git = system('git --version >/dev/null 2>&1') == 0;
my $have_patch = system('patch --version >/dev/null 2>&1') == 0;
die "check-mutants: neither git nor patch is installed\n" unless $have_git || $have_patch;
my $how = $have_git ? 'git apply --check' : 'patch -p1 --dry-run --fuzz=0';

# applies PATCH: undef when PATCH (an absolute path) applies to TREE, else
# what the tool said
sub applies {
	my ($patch) = @_;
	my @cmd = $have_git
		? ('git', 'apply', '--check', '--whitespace=nowarn', $patch)
		: ('patch', '-p1', '--dry-run', '--fuzz=0', '--force', '-i', $patch);
	my $pid = open(my $out, '-|') // die "check-mutants: cannot fork: $!\n";
	if (!$pid) {
		open(STDERR, '>&', \*STDOUT);
		chdir($tree) or die "check-mutants: cannot enter $tree: $!\n";
		# no repository above TREE: a copy of the files inside another
		# repository is still its own tree
		$ENV{GIT_CEILING_DIRECTORIES} = dirname($tree);
		exec(@cmd) or die "check-mutants: cannot run $cmd[0]: $!\n";
	}
	local $/;
	my $said = <$out> // '';
	close($out);
	return undef if $? == 0;
	# (patch quotes the patch's header, each line after a "|")
	$said = join("\n", grep { !/^(?:\||-{5,}$|The text leading up to this was:)/ } split /\n/, $said);
	$said =~ s/\s+$//;
	return $said eq '' ? "exit status " . ($? >> 8) : $said;
}

my @patches = sort glob(File::Spec->catfile($mut_dir, '*.patch'));
die "check-mutants: no patch in $mut_dir\n" unless @patches;

if ($self_test) {
	my $tmp = tempdir('check-mutants.XXXXXX', TMPDIR => 1, CLEANUP => 1);
	my $text = slurp($patches[0]);
	# plant NAME CODE: CODE changes the text of a copy of the first
	# patch; the copy must then be refused
	my @plants = (
		['a context line changed' => sub {
			my ($t) = @_;
			# the first context line of the first hunk
			return $t =~ s/^(\@\@ [^\n]*\n(?:[-+][^\n]*\n)*) ([^\n]*)$/$1 $2 zklock-planted/m ? $t : undef;
		}],
		['a file src/ does not have' => sub {
			my ($t) = @_;
			my ($file) = $t =~ m{^\+\+\+ b/(src/\S+)}m or return undef;
			return $t =~ s{\Q$file\E}{src/no-such-file.c}g ? $t : undef;
		}],
	);
	my $missed = 0;
	for my $p (@plants) {
		my $t = $p->[1]->($text);
		die "check-mutants: self-test: cannot plant '$p->[0]' in " . basename($patches[0]) . "\n"
			unless defined $t;
		my $file = File::Spec->catfile($tmp, 'planted.patch');
		spew($file, $t);
		if (defined(my $said = applies($file))) {
			print "self-test: planted '$p->[0]': caught ($said)\n" if $ENV{CHECK_META_VERBOSE};
		} else {
			print "self-test: planted '$p->[0]': NOT caught\n";
			$missed++;
		}
	}
	die "check-mutants: the self-test missed $missed planted errors\n" if $missed;
	print "check-mutants: self-test: all " . scalar(@plants) . " planted errors caught\n";
}

my $failed = 0;
for my $patch (@patches) {
	my $said = applies($patch);
	next unless defined $said;
	my $name = File::Spec->abs2rel($patch, $tree);
	print STDERR "check-mutants: $name no longer applies to src/ ($how):\n";
	print STDERR "  $_\n" for split /\n/, $said;
	$failed++;
}
if ($failed) {
	print STDERR "check-mutants: $failed of " . scalar(@patches) . " mutants no longer apply; "
		. "update each to the code it mutates (doc/testing.md, Mutants)\n";
	exit 1;
}
print "check-mutants: all " . scalar(@patches) . " mutants of test/mutants apply to src/ ($how)\n";
exit 0;

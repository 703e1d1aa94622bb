#!/usr/bin/perl
# check-meta.pl — check zklock's META.json against the PGXN Meta Spec 1.0.0
# (https://pgxn.org/spec/) and against the versions the tree states.
#
#   perl test/meta/check-meta.pl [TREE]     (default: the tree it is in)
#   perl test/meta/check-meta.pl --self-test [TREE]
#
# The spec's rules, as this checker applies them: the required keys (name,
# abstract, maintainer, license, provides, meta-spec, version) are there;
# name is at least two characters, none of them "/", "\", a blank or a
# control character; every version (the distribution's, each extension's
# in provides, the prerequisites') is a Semantic Version 1.0.0 (X.Y.Z, an
# optional special part -[a-zA-Z][0-9A-Za-z-]*) or, for a prerequisite, 0
# or a range of them; license is one of the spec's names (or a list of
# them, or an object of name => URL); meta-spec.version is 1.0.0; provides
# gives each extension a file and a version, and its file and docfile exist
# in the tree; prereqs has only the spec's phases and relations;
# release_status is stable, testing or unstable; tags are strings of at
# most 255 characters; resources has only the spec's keys, with http(s)
# URLs; any other top-level key starts with x_ or X_.
#
# And the tree agrees with itself: META.json's version equals zklock.control's
# default_version, which equals the upstream version of the first entry
# of debian/changelog (a version of two numbers, 0.2, is the Semantic
# Version 0.2.0), and provides.zklock.version equals META.json's version.
#
# --self-test plants one error at a time in a copy of the parsed META.json
# (and in the versions read from the tree) and fails unless the checker
# reports every one of them; then it checks the real file.
#
# Perl with its core JSON::PP only: no package to install, so it runs in the
# inner loop without root (make check-meta) as well as in test/all.sh.
use strict;
use warnings;
use JSON::PP ();
use File::Basename qw(dirname);
use File::Spec;
use Cwd qw(abs_path);

my $self_test = @ARGV && $ARGV[0] eq '--self-test' ? shift @ARGV : undef;
my $tree = abs_path(shift(@ARGV) // File::Spec->catdir(dirname(File::Spec->rel2abs($0)), "..", ".."));

my @LICENSES = qw(agpl_3 apache_1_1 apache_2_0 artistic_1 artistic_2 bsd
	freebsd gfdl_1_2 gfdl_1_3 gpl_1 gpl_2 gpl_3 lgpl_2_1 lgpl_3_0 mit
	mozilla_1_0 mozilla_1_1 openssl perl_5 postgresql qpl_1_0 ssleay sun zlib
	open_source restricted unrestricted unknown);
my %LICENSE = map { $_ => 1 } @LICENSES;
my %PHASE = map { $_ => 1 } qw(configure build test runtime develop);
my %RELATION = map { $_ => 1 } qw(requires recommends suggests conflicts);
my %STATUS = map { $_ => 1 } qw(stable testing unstable);
my %TOPKEY = map { $_ => 1 } qw(name abstract description version maintainer
	license provides prereqs resources generated_by meta-spec tags no_index
	release_status);
my $SEMVER = qr/^(?:0|[1-9][0-9]*)\.(?:0|[1-9][0-9]*)\.(?:0|[1-9][0-9]*)(?:-[a-zA-Z][0-9A-Za-z-]*)?$/;

# slurp FILE: its contents, or die
sub slurp {
	my ($file) = @_;
	open(my $fh, '<', $file) or die "check-meta: cannot read $file: $!\n";
	local $/;
	return scalar <$fh>;
}

# as_semver VERSION: a version of two numbers (0.2) as the Semantic Version
# it stands for (0.2.0); any other string unchanged
sub as_semver {
	my ($v) = @_;
	return defined $v && $v =~ /^[0-9]+\.[0-9]+$/ ? "$v.0" : $v;
}

# is_string VALUE: a defined, non-empty string (not a reference)
sub is_string { my ($v) = @_; return defined $v && !ref $v && $v ne ''; }

# check_prereq_version VALUE: 0, a Semantic Version, or a range of them
sub ok_prereq_version {
	my ($v) = @_;
	return 0 unless is_string($v);
	return 1 if $v eq '0' || $v =~ $SEMVER;
	for my $part (split /\s*,\s*/, $v) {
		return 0 unless $part =~ /^(?:>=|<=|>|<|==|!=)\s*(.+)$/ && ($1 eq '0' || $1 =~ $SEMVER);
	}
	return 1;
}

# check META TREE_VERSIONS: the list of problems of the parsed META.json
# (hash) given the versions the tree states ({control => ..., changelog => ...})
sub check {
	my ($m, $tv) = @_;
	my @e;
	return ('META.json is not a JSON object') unless ref $m eq 'HASH';
	for my $k (qw(name abstract maintainer license provides meta-spec version)) {
		push @e, "required key $k is missing" unless exists $m->{$k};
	}
	for my $k (sort keys %$m) {
		push @e, "unknown top-level key $k (custom keys start with x_ or X_)"
			unless $TOPKEY{$k} || $k =~ /^[xX]_/;
	}
	push @e, "name must be at least two characters, without /, \\, blanks or control characters"
		if exists $m->{name} && !(is_string($m->{name}) && $m->{name} =~ /^[^\/\\\s\x00-\x1f\x7f]{2,}$/);
	for my $k (qw(abstract description generated_by)) {
		push @e, "$k must be a non-empty string" if exists $m->{$k} && !is_string($m->{$k});
	}
	push @e, "version '" . ($m->{version} // '') . "' is not a Semantic Version (X.Y.Z)"
		if exists $m->{version} && !(is_string($m->{version}) && $m->{version} =~ $SEMVER);
	if (exists $m->{maintainer}) {
		my $mt = $m->{maintainer};
		push @e, 'maintainer must be a string or a non-empty list of strings'
			unless is_string($mt) || (ref $mt eq 'ARRAY' && @$mt && !grep { !is_string($_) } @$mt);
	}
	if (exists $m->{license}) {
		my $l = $m->{license};
		if (ref $l eq 'HASH') {
			push @e, 'license object must map names to http(s) URLs'
				unless %$l && !grep { !is_string($l->{$_}) || $l->{$_} !~ m{^https?://} } keys %$l;
		} else {
			my @names = ref $l eq 'ARRAY' ? @$l : ($l);
			push @e, 'license must be one of the spec\'s names: ' . join(' ', @LICENSES) . ' (got: '
				. join(', ', map { $_ // 'null' } @names) . ')'
				if !@names || grep { !is_string($_) || !$LICENSE{$_} } @names;
		}
	}
	if (exists $m->{'meta-spec'}) {
		my $s = $m->{'meta-spec'};
		push @e, 'meta-spec must be an object whose version is 1.0.0'
			unless ref $s eq 'HASH' && ($s->{version} // '') eq '1.0.0';
		push @e, 'meta-spec.url must be an http(s) URL'
			if ref $s eq 'HASH' && exists $s->{url} && !(is_string($s->{url}) && $s->{url} =~ m{^https?://});
	}
	if (exists $m->{provides}) {
		my $p = $m->{provides};
		if (ref $p ne 'HASH' || !%$p) {
			push @e, 'provides must be an object with at least one extension';
		} else {
			for my $ext (sort keys %$p) {
				my $x = $p->{$ext};
				if (ref $x ne 'HASH') { push @e, "provides.$ext must be an object"; next; }
				push @e, "provides.$ext.file is required" unless is_string($x->{file});
				push @e, "provides.$ext.version '" . ($x->{version} // '') . "' is not a Semantic Version"
					unless is_string($x->{version}) && $x->{version} =~ $SEMVER;
				for my $f (qw(file docfile)) {
					next unless is_string($x->{$f});
					push @e, "provides.$ext.$f: no file $x->{$f} in the tree"
						unless -f File::Spec->catfile($tree, $x->{$f});
				}
				for my $k (sort keys %$x) {
					push @e, "provides.$ext has an unknown key $k"
						unless $k =~ /^(?:file|version|abstract|docfile)$/ || $k =~ /^[xX]_/;
				}
			}
		}
	}
	if (exists $m->{prereqs}) {
		my $pr = $m->{prereqs};
		if (ref $pr ne 'HASH') {
			push @e, 'prereqs must be an object';
		} else {
			for my $phase (sort keys %$pr) {
				if (!$PHASE{$phase}) { push @e, "prereqs: unknown phase $phase"; next; }
				my $rels = $pr->{$phase};
				if (ref $rels ne 'HASH') { push @e, "prereqs.$phase must be an object"; next; }
				for my $rel (sort keys %$rels) {
					if (!$RELATION{$rel}) { push @e, "prereqs.$phase: unknown relation $rel"; next; }
					my $req = $rels->{$rel};
					if (ref $req ne 'HASH') { push @e, "prereqs.$phase.$rel must be an object"; next; }
					for my $name (sort keys %$req) {
						push @e, "prereqs.$phase.$rel.$name: '" . ($req->{$name} // '') . "' is not 0, a Semantic Version or a range"
							unless ok_prereq_version($req->{$name});
					}
				}
			}
		}
	}
	push @e, 'release_status must be stable, testing or unstable'
		if exists $m->{release_status} && !(is_string($m->{release_status}) && $STATUS{$m->{release_status}});
	if (exists $m->{tags}) {
		my $t = $m->{tags};
		push @e, 'tags must be a list of non-empty strings of at most 255 characters'
			unless ref $t eq 'ARRAY' && !grep { !is_string($_) || length($_) > 255 } @$t;
	}
	if (exists $m->{resources}) {
		my $r = $m->{resources};
		if (ref $r ne 'HASH') {
			push @e, 'resources must be an object';
		} else {
			for my $k (sort keys %$r) {
				push @e, "resources: unknown key $k" unless $k =~ /^(?:homepage|bugtracker|repository)$/ || $k =~ /^[xX]_/;
			}
			my @urls = ($r->{homepage});
			push @urls, @{$r->{bugtracker}}{qw(web)} if ref $r->{bugtracker} eq 'HASH';
			push @urls, @{$r->{repository}}{qw(url web)} if ref $r->{repository} eq 'HASH';
			push @e, 'resources: every URL must be a string starting with http(s):// (or git:// for repository.url)'
				if grep { defined $_ && !(is_string($_) && m{^(?:https?|git)://}) } @urls;
		}
	}
	# the tree agrees with itself
	my $v = $m->{version} // '';
	push @e, "META.json's version $v is not zklock.control's default_version " . ($tv->{control} // '(none)')
		. ' (' . (as_semver($tv->{control}) // '(none)') . ')'
		unless defined $tv->{control} && as_semver($tv->{control}) eq $v;
	push @e, "META.json's version $v is not the upstream version of debian/changelog " . ($tv->{changelog} // '(none)')
		. ' (' . (as_semver($tv->{changelog}) // '(none)') . ')'
		unless defined $tv->{changelog} && as_semver($tv->{changelog}) eq $v;
	my $pv = ref $m->{provides} eq 'HASH' && ref $m->{provides}{zklock} eq 'HASH' ? $m->{provides}{zklock}{version} : undef;
	push @e, "provides.zklock.version " . ($pv // '(none)') . " is not META.json's version $v"
		unless defined $pv && $pv eq $v;
	return @e;
}

# tree_versions: zklock.control's default_version and debian/changelog's
# upstream version
sub tree_versions {
	my %tv;
	($tv{control}) = slurp(File::Spec->catfile($tree, 'zklock.control')) =~ /^\s*default_version\s*=\s*'([^']*)'/m;
	my ($first) = split /\n/, slurp(File::Spec->catfile($tree, 'debian', 'changelog'));
	($tv{changelog}) = $first =~ /^zklock \((?:[0-9]+:)?(.+?)(?:-[^-)]+)?\)/;
	return \%tv;
}

my $meta_file = File::Spec->catfile($tree, 'META.json');
my $meta = eval { JSON::PP->new->decode(slurp($meta_file)) };
die "check-meta: $meta_file is not valid JSON: $@" unless defined $meta;
my $tv = tree_versions();

if ($self_test) {
	my $json = JSON::PP->new;
	# plant NAME CODE: apply CODE to a copy of META.json and of the tree's
	# versions; the checker must then report a problem
	my @plants = (
		['version not semver' => sub { $_[0]{version} = '0.2' }],
		['version missing' => sub { delete $_[0]{version} }],
		['abstract missing' => sub { delete $_[0]{abstract} }],
		['license not in the list' => sub { $_[0]{license} = 'GPL-2+' }],
		['meta-spec version' => sub { $_[0]{'meta-spec'}{version} = '2.0.0' }],
		['name with a slash' => sub { $_[0]{name} = 'zk/lock' }],
		['provides file missing' => sub { $_[0]{provides}{zklock}{file} = 'no-such-file.sql' }],
		['provides version differs' => sub { $_[0]{provides}{zklock}{version} = '9.9.9' }],
		['prereq version' => sub { $_[0]{prereqs}{runtime}{requires}{PostgreSQL} = '15' }],
		['unknown phase' => sub { $_[0]{prereqs}{install} = {} }],
		['release_status' => sub { $_[0]{release_status} = 'beta' }],
		['unknown top key' => sub { $_[0]{homepage} = 'https://example.org' }],
		['control default_version differs' => sub { $_[1]{control} = '9.8' }],
		['changelog version differs' => sub { $_[1]{changelog} = '9.7' }],
	);
	my $missed = 0;
	for my $p (@plants) {
		my $m = $json->decode($json->encode($meta));
		my %t = %$tv;
		$p->[1]->($m, \%t);
		my @e = check($m, \%t);
		# a planted error must add a problem to those of the real file
		my %known = map { $_ => 1 } check($json->decode($json->encode($meta)), {%$tv});
		my @new = grep { !$known{$_} } @e;
		if (@new) {
			print "self-test: planted '$p->[0]': caught ($new[0])\n" if $ENV{CHECK_META_VERBOSE};
		} else {
			print "self-test: planted '$p->[0]': NOT caught\n";
			$missed++;
		}
	}
	die "check-meta: the self-test missed $missed planted errors\n" if $missed;
	print "check-meta: self-test: all " . scalar(@plants) . " planted errors caught\n";
}

my @problems = check($meta, $tv);
if (@problems) {
	print STDERR "check-meta: $meta_file: $_\n" for @problems;
	exit 1;
}
print "check-meta: META.json follows the PGXN Meta Spec 1.0.0; version $meta->{version} "
	. "= zklock.control $tv->{control} = debian/changelog $tv->{changelog}\n";
exit 0;

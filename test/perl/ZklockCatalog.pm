
# ZklockCatalog — what the extension zklock put into one database's
# catalog, as a flat list of facts, and the comparison of two such lists.
#
# The upgrade test (test/t/230_upgrade.pl) takes a snapshot of a database
# updated with ALTER EXTENSION zklock UPDATE and of one where the same
# version was created fresh, and asserts that they hold the same facts: a
# DBA who updated has exactly what one who installed has.
#
#   my $snap = ZklockCatalog::snapshot($node, $dbname);  # { key => value }
#   my @diff = ZklockCatalog::compare($snap_a, $snap_b); # [] when identical
#   my $txt  = ZklockCatalog::dump_text($node, $dbname, binary_upgrade => 1);
#   my @diff = ZklockCatalog::compare_text($txt_a, $txt_b);
#
# A snapshot's keys name the object (pg_describe_object) and the fact:
#   member <object>                     every member of the extension
#                                       (pg_depend deptype 'e')
#   <function> def                      pg_get_functiondef: signature,
#                                       defaults, result, language, symbol,
#                                       volatility, parallel, strictness,
#                                       security, cost, rows, settings
#   <function> acl, <relation> acl      proacl / relacl as stored
#   <object> owner                      the owning role
#   <object> description                obj_description
#   <object> init privs                 pg_init_privs (what pg_dump and
#                                       pg_upgrade take as the extension's
#                                       own privileges)
#   <function> execute by <role>        has_function_privilege for PUBLIC
#                                       and zklock_user
#   <relation> def, <relation> kind     pg_get_viewdef, relkind
#   <relation> select by <role>         has_table_privilege
#   <relation> column <n>               name and type of each column
#   extension <field>                   extversion, extconfig,
#                                       extcondition, extrelocatable,
#                                       schema, owner, description
#   schema function <signature>         every zk% function of the
#                                       extension's schema, member or not
#                                       (a function the update script
#                                       created outside the extension)
#   role zklock_user                    its attributes
#   role zklock_user members            the roles granted it
# Roles belong to the cluster, not to a database: two databases of one
# cluster always agree on the last two; the test compares them before and
# after an update instead.
package ZklockCatalog;

use strict;
use warnings;

# The queries, each returning (key, value) rows; every value is text, NULL
# shown as '<null>'.  One psql call per query; rows are separated by
# newlines and the two columns by a unit separator (neither occurs in
# function definitions as zklock writes them, checked below).
my $SEP = "\x1f";

my @QUERIES = (
	# the members
	q{SELECT 'member ' || pg_describe_object(d.classid, d.objid, d.objsubid), 'yes'
	    FROM pg_depend d JOIN pg_extension e ON d.refobjid = e.oid
	   WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
	     AND e.extname = 'zklock'},
	# functions
	q{WITH f AS (
	    SELECT p.oid, p.proacl, p.proowner,
	           pg_describe_object('pg_proc'::regclass, p.oid, 0) AS obj
	      FROM pg_depend d JOIN pg_extension e ON d.refobjid = e.oid
	      JOIN pg_proc p ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid
	     WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
	       AND e.extname = 'zklock')
	  SELECT obj || ' def', pg_get_functiondef(oid) FROM f
	  UNION ALL SELECT obj || ' acl', coalesce(proacl::text, '<null>') FROM f
	  UNION ALL SELECT obj || ' owner', proowner::regrole::text FROM f
	  UNION ALL SELECT obj || ' description', coalesce(obj_description(oid, 'pg_proc'), '<null>') FROM f
	  UNION ALL SELECT obj || ' execute by PUBLIC', has_function_privilege('public', oid, 'EXECUTE')::text FROM f
	  UNION ALL SELECT obj || ' execute by zklock_user', has_function_privilege('zklock_user', oid, 'EXECUTE')::text FROM f},
	# relations (the view zk_locks)
	q{WITH r AS (
	    SELECT c.oid, c.relacl, c.relowner, c.relkind,
	           pg_describe_object('pg_class'::regclass, c.oid, 0) AS obj
	      FROM pg_depend d JOIN pg_extension e ON d.refobjid = e.oid
	      JOIN pg_class c ON d.classid = 'pg_class'::regclass AND d.objid = c.oid
	     WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
	       AND e.extname = 'zklock')
	  SELECT obj || ' kind', relkind::text FROM r
	  UNION ALL SELECT obj || ' def', coalesce(pg_get_viewdef(oid), '<null>') FROM r
	  UNION ALL SELECT obj || ' acl', coalesce(relacl::text, '<null>') FROM r
	  UNION ALL SELECT obj || ' owner', relowner::regrole::text FROM r
	  UNION ALL SELECT obj || ' description', coalesce(obj_description(oid, 'pg_class'), '<null>') FROM r
	  UNION ALL SELECT obj || ' select by PUBLIC', has_table_privilege('public', oid, 'SELECT')::text FROM r
	  UNION ALL SELECT obj || ' select by zklock_user', has_table_privilege('zklock_user', oid, 'SELECT')::text FROM r
	  UNION ALL SELECT obj || ' column ' || a.attnum, a.attname || ' ' || format_type(a.atttypid, a.atttypmod)
	    FROM r JOIN pg_attribute a ON a.attrelid = r.oid AND a.attnum > 0 AND NOT a.attisdropped},
	# the extension's initial privileges, any class of member
	q{SELECT pg_describe_object(i.classoid, i.objoid, i.objsubid) || ' init privs',
	         i.privtype::text || ' ' || i.initprivs::text
	    FROM pg_init_privs i
	    JOIN pg_depend d ON d.classid = i.classoid AND d.objid = i.objoid
	    JOIN pg_extension e ON d.refobjid = e.oid
	   WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
	     AND e.extname = 'zklock'},
	# the extension's own row
	q{SELECT 'extension ' || k, v FROM pg_extension e,
	  LATERAL (VALUES
	    ('version', e.extversion),
	    ('relocatable', e.extrelocatable::text),
	    ('schema', e.extnamespace::regnamespace::text),
	    ('owner', e.extowner::regrole::text),
	    ('config', coalesce(e.extconfig::regclass[]::text, '<null>')),
	    ('condition', coalesce(e.extcondition::text, '<null>')),
	    ('description', coalesce(obj_description(e.oid, 'pg_extension'), '<null>'))) AS x(k, v)
	   WHERE e.extname = 'zklock'},
	# every zk% function in the extension's schema, member or not
	q{SELECT 'schema function ' || p.oid::regprocedure::text,
	         CASE WHEN EXISTS (SELECT FROM pg_depend d
	                            WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid
	                              AND d.refclassid = 'pg_extension'::regclass
	                              AND d.deptype = 'e')
	              THEN 'member' ELSE 'not a member' END
	    FROM pg_proc p JOIN pg_extension e ON p.pronamespace = e.extnamespace
	   WHERE e.extname = 'zklock' AND p.proname LIKE 'zk%'},
	# the role (a cluster object)
	q{SELECT 'role zklock_user', format('login=%s inherit=%s super=%s createdb=%s createrole=%s replication=%s bypassrls=%s',
	         rolcanlogin, rolinherit, rolsuper, rolcreatedb, rolcreaterole, rolreplication, rolbypassrls)
	    FROM pg_roles WHERE rolname = 'zklock_user'
	  UNION ALL
	  SELECT 'role zklock_user members', coalesce(string_agg(m.member::regrole::text, ',' ORDER BY m.member::regrole::text), '')
	    FROM pg_auth_members m WHERE m.roleid = 'zklock_user'::regrole},
);

# snapshot($node, $dbname): { key => value } of the facts above.  Dies when
# a key comes twice (two facts would hide each other) or a value holds the
# separator.
sub snapshot
{
	my ($node, $dbname) = @_;
	my %snap;
	for my $q (@QUERIES)
	{
		my $sql = "SELECT k || E'\\x1f' || replace(v, E'\\n', E'\\\\n') FROM ($q) AS s(k, v) ORDER BY 1";
		my $out = $node->safe_psql($dbname, $sql);
		for my $line (split /\n/, $out)
		{
			my ($k, $v, @rest) = split /$SEP/, $line, -1;
			die "ZklockCatalog: unexpected row '$line'" if @rest || !defined $v;
			die "ZklockCatalog: key '$k' twice in $dbname" if exists $snap{$k};
			$snap{$k} = $v;
		}
	}
	return \%snap;
}

# compare($a, $b, $name_a, $name_b): the differences between two
# snapshots, one line each ("key: A has ..., B has ..."), sorted; () when
# they hold the same facts.
sub compare
{
	my ($x, $y, $nx, $ny) = @_;
	$nx //= 'A';
	$ny //= 'B';
	my %keys = map { $_ => 1 } (keys %$x, keys %$y);
	my @diff;
	for my $k (sort keys %keys)
	{
		my $vx = $x->{$k};
		my $vy = $y->{$k};
		next if defined $vx && defined $vy && $vx eq $vy;
		push @diff, sprintf("%s: %s has %s, %s has %s", $k,
			$nx, _short($vx), $ny, _short($vy));
	}
	return @diff;
}

sub _short
{
	my ($v) = @_;
	return 'nothing' unless defined $v;
	$v = substr($v, 0, 300) . '...' if length($v) > 300;
	return "'$v'";
}

# dump_text($node, $dbname, binary_upgrade => 0|1): pg_dump --schema-only
# of the database, with what always differs between two databases taken
# out: the comment lines pg_dump writes (version banners; the "Name: ...;
# Type: ..." lines are dropped too, to compare statements only), the
# \restrict and \unrestrict lines of newer pg_dumps (a random key each
# run) and, with binary_upgrade, the arguments of the
# binary_upgrade_set_next_*() calls: the OIDs (and, where the server has
# them, LSNs) pg_upgrade would preserve, which differ between any two
# databases.
# Without binary_upgrade, pg_dump writes a member of an extension only as
# CREATE EXTENSION (plus privileges that differ from pg_init_privs);
# with it, every member, its comment and privileges, as pg_upgrade
# recreates them.
sub dump_text
{
	my ($node, $dbname, %opts) = @_;
	my @cmd = ($node->installed_command('pg_dump'), '--schema-only', '--no-sync',
		($opts{binary_upgrade} ? ('--binary-upgrade') : ()),
		'-d', $node->connstr($dbname));
	my ($out, $err) = ('', '');
	IPC::Run::run(\@cmd, '>', \$out, '2>', \$err, IPC::Run::timeout(60))
	  or die "pg_dump of $dbname failed: $err";
	my @lines = grep { !/^--/ && !/^\s*$/ && !/^\\(un)?restrict / } split /\n/, $out;
	s/(binary_upgrade_set_next_\w+)\(.*\);$/$1(...);/ for @lines;
	return join("\n", @lines) . "\n";
}

# compare_text($a, $b): the lines only one of two dump texts has, each
# prefixed '-' (only in $a) or '+' (only in $b), in the order met; () when
# the texts are equal.
sub compare_text
{
	my ($x, $y) = @_;
	return () if $x eq $y;
	my %cx;
	my %cy;
	$cx{$_}++ for split /\n/, $x;
	$cy{$_}++ for split /\n/, $y;
	my @diff;
	for my $l (split /\n/, $x)
	{
		push @diff, "- $l" if ($cx{$l} // 0) > ($cy{$l} // 0);
	}
	for my $l (split /\n/, $y)
	{
		push @diff, "+ $l" if ($cy{$l} // 0) > ($cx{$l} // 0);
	}
	# same lines, another order
	push @diff, '(the same lines in another order)' unless @diff;
	return @diff;
}

1;

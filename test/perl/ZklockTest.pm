
# ZklockTest — helpers for zklock's TAP tests.
#
# Built on PostgreSQL's own TAP framework (PostgreSQL::Test::Cluster and
# PostgreSQL::Test::Utils, shipped by Debian under
# /usr/lib/postgresql/<major>/lib/pgxs/src/test/perl: 15 on Debian 12, 17 on
# Debian 13). Run the tests with, from the repository root and as a non-root
# user (initdb refuses root):
#
#   PATH=/usr/lib/postgresql/15/bin:$PATH \
#   prove -I /usr/lib/postgresql/15/lib/pgxs/src/test/perl -I test/perl test/t/
#
# (test/run-user-tests.sh does that for the platform's version.)
#
# Environment the PostgreSQL modules need, defaulted here when unset:
#   PG_REGRESS  pg_regress binary (Cluster->init runs "pg_regress --config-auth");
#               Debian: <pgxs dir>/src/test/regress/pg_regress
#   TESTDIR     base of tmp_check/ (logs, data dirs); default: <repo>/test
#   PATH        must reach the PostgreSQL binaries (initdb, pg_ctl, psql,
#               pg_config); when pg_config is absent, $PGBIN or else the
#               newest /usr/lib/postgresql/*/bin is prepended
# Optional: PG_TEST_NOCLEAN=1 keeps the data directories and ZooKeeper dirs,
# PG_TEST_TIMEOUT_DEFAULT (seconds) bounds PostgreSQL's own waits.
#
# What this module gives:
#   start_zk() / stop_zk($connect) / restart_zk($connect)
#                                     a standalone ZooKeeper via test/zk/zk.sh
#   new_zklock_node($name, $zk, $extra_conf, %opts)
#                                     a started cluster with zklock loaded and
#                                     connected to ZooKeeper (pg_cron => 1:
#                                     with pg_cron preloaded too)
#   ZklockTest::Session               a psql session that can leave a statement
#                                     running (a waiter) and collect it later
#                                     (test/perl/ZklockTest/Session.pm)
#   ZklockTest::Peer                  a Curator 5.4 peer (test/java/CuratorPeer.java;
#                                     test/perl/ZklockTest/Peer.pm)
#   wait_until(), wait_waiting(), wait_held(), sqlstate_of(), seq_of(), ...
package ZklockTest;

use strict;
use warnings;

use Cwd qw(abs_path);
use File::Basename qw(dirname);
use File::Path ();
use Config;

our ($REPO, $PGBIN);

BEGIN
{
	# Repository root: this file is <repo>/test/perl/ZklockTest.pm.
	$REPO = abs_path(dirname(__FILE__) . '/../..');

	# Find the PostgreSQL binaries: pg_config on PATH, else $PGBIN (set by
	# test/env.sh), else the newest version installed.
	my ($on_path) = grep { -x "$_/pg_config" } split /:/, ($ENV{PATH} // '');
	if ($on_path)
	{
		$PGBIN = $on_path;
	}
	else
	{
		my @bins = sort { ($a =~ m{/(\d+)/bin$})[0] <=> ($b =~ m{/(\d+)/bin$})[0] }
		  glob('/usr/lib/postgresql/*/bin');
		$PGBIN = $ENV{PGBIN} // $bins[-1] // '/usr/lib/postgresql/15/bin';
		$ENV{PATH} = "$PGBIN:" . ($ENV{PATH} // '/usr/bin:/bin');
	}

	if (!defined $ENV{PG_REGRESS})
	{
		my $pgxs = `"$PGBIN/pg_config" --pgxs 2>/dev/null`;
		chomp $pgxs;
		my $regress = dirname(dirname($pgxs // '')) . '/test/regress/pg_regress';
		$ENV{PG_REGRESS} = $regress;
	}

	# tmp_check/ (logs, data directories) goes under <repo>/test.
	$ENV{TESTDIR} //= "$REPO/test";
}

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use IPC::Run;
use Time::HiRes qw(time usleep);
use Test::More;

use Exporter 'import';
# the session and the Curator peer, each in a file of its own
use ZklockTest::Session;
use ZklockTest::Peer;
our @EXPORT = qw(
  start_zk start_zk_with_config stop_zk restart_zk wipe_zk zk_port zk_dir
  new_zklock_node wait_connected
  new_peer
  wait_until wait_sql wait_waiting wait_held wait_no_zklock_rows
  sqlstate_of psql_error connection_failure_ok seq_of sort_by_seq lock_children
  zk_lock_rows worker_pid expected_wait_event curator_version
  missing_functions require_functions participants_rows wait_children_count
  $CURATOR_NODE_RE $CURATOR_RW_NODE_RE $CURATOR_LEASE_NODE_RE $DEFAULT_TIMEOUT
);

# Bound of every wait in these helpers (seconds). Tests stay under a minute
# when all goes well; a broken extension makes a wait fail after this long
# instead of hanging.
our $DEFAULT_TIMEOUT = 30;

# Watchdog: a test file that runs longer than this (seconds) dies, so that
# END blocks stop its ZooKeeper and clusters, instead of hanging prove.
# Override with ZKLOCK_TEST_ALARM (0 disables).
my $alarm = $ENV{ZKLOCK_TEST_ALARM} // 300;
if ($alarm > 0)
{
	$SIG{ALRM} = sub { die "zklock test watchdog: $0 exceeded ${alarm}s\n"; };
	alarm($alarm);
}

# A Curator InterProcessMutex node name: protected prefix with a version-4
# UUID as Java prints it, then "lock-" and the 10-digit sequence.
our $CURATOR_NODE_RE =
  qr/^_c_[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}-lock-\d{10}$/;

# Read/write lock nodes (_c_<uuid4>-__READ__<seq10> / -__WRIT__<seq10>) and
# semaphore lease nodes (_c_<uuid4>-lease-<seq10>), as Curator names them.
our $CURATOR_RW_NODE_RE =
  qr/^_c_[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}-__(READ|WRIT)__\d{10}$/;
our $CURATOR_LEASE_NODE_RE =
  qr/^_c_[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}-lease-\d{10}$/;

############################################################################
# ZooKeeper
############################################################################

my $ZK_SH = "$REPO/test/zk/zk.sh";
my %zk_dirs;    # connect string => server directory
my %zk_running; # connect string => 1 while started

# start_zk(@jvm_options): start a standalone ZooKeeper on a free 127.0.0.1
# port, return its connect string "127.0.0.1:PORT". Bails out of the test
# if it fails. @jvm_options (optional) go to the server's JVM, see
# start_zk_with_jvm_options.
sub start_zk
{
	return _start_zk(undef, @_);
}

# start_zk_with_config($extra, @jvm_options): start_zk, with the lines
# $extra added to the server's zoo.cfg (test/zk/zk.sh, zoo-extra.cfg): a
# secureClientPort, ssl.*, authProvider.*; a @SECURE_PORT@ in them
# becomes a free port.  Returns the connect string of the plaintext port
# and, with @SECURE_PORT@, that of the secure one.
sub start_zk_with_config
{
	my ($extra, @opts) = @_;
	return _start_zk($extra, @opts);
}

sub _start_zk
{
	my ($extra, @opts) = @_;
	my $dir = PostgreSQL::Test::Utils::tempdir('zk');
	if (defined $extra)
	{
		open(my $fh, '>', "$dir/zoo-extra.cfg") or die "cannot write $dir/zoo-extra.cfg: $!";
		print $fh $extra;
		close $fh;
	}
	local $ENV{JAVA} = @opts ? _zk_java_wrapper($dir, @opts) : $ENV{JAVA};
	delete $ENV{JAVA} unless defined $ENV{JAVA};
	my ($out, $err) = ('', '');
	IPC::Run::run([ $ZK_SH, 'start', $dir ], '>', \$out, '2>', \$err,
		IPC::Run::timeout(90))
	  or BAIL_OUT("zk.sh start failed: $err");
	chomp $out;
	BAIL_OUT("zk.sh start printed no port: '$out' $err") unless $out =~ /^(\d+)$/;
	my $connect = "127.0.0.1:$1";
	$zk_dirs{$connect} = $dir;
	$zk_running{$connect} = 1;
	note "ZooKeeper started at $connect (dir $dir)" . (@opts ? " with JVM options @opts" : '');
	return $connect unless -f "$dir/zk.secure_port";
	my $secure = '127.0.0.1:' . PostgreSQL::Test::Utils::slurp_file("$dir/zk.secure_port");
	chomp $secure;
	note "... and its secure port at $secure";
	return ($connect, $secure);
}

# stop_zk($connect): stop the server started by start_zk (all of them when
# no argument). The directory is kept so restart_zk can reuse it.
sub stop_zk
{
	my @which = @_ ? @_ : keys %zk_running;
	for my $c (@which)
	{
		my $dir = $zk_dirs{$c} or next;
		delete $zk_running{$c};
		my ($out, $err) = ('', '');
		IPC::Run::run([ $ZK_SH, 'stop', $dir ], '>', \$out, '2>', \$err,
			IPC::Run::timeout(30))
		  or diag("zk.sh stop $dir failed: $err");
		note "ZooKeeper at $c stopped";
	}
	return;
}

# restart_zk($connect): start again a stopped server on the same port and data.
sub restart_zk
{
	my ($c) = @_;
	my $dir = $zk_dirs{$c} or die "unknown ZooKeeper $c";
	my ($port) = $c =~ /:(\d+)$/;
	my ($out, $err) = ('', '');
	IPC::Run::run([ $ZK_SH, 'start', $dir, $port ], '>', \$out, '2>', \$err,
		IPC::Run::timeout(90))
	  or die "zk.sh restart failed: $err";
	$zk_running{$c} = 1;
	note "ZooKeeper at $c restarted";
	return $c;
}

# wipe_zk($connect): stop the server and remove its data, so that
# restart_zk starts an ensemble rebuilt from nothing on the same port (its
# zxids numbered from the start again).
sub wipe_zk
{
	my ($c) = @_;
	my $dir = $zk_dirs{$c} or die "unknown ZooKeeper $c";
	stop_zk($c) if $zk_running{$c};
	File::Path::rmtree("$dir/data");
	note "ZooKeeper at $c: data removed";
	return;
}

sub zk_port { my ($c) = @_; return ($c =~ /:(\d+)$/)[0]; }

# zk_dir($connect): the directory of the server start_zk started at
# $connect (its data under data/, its log in zk.log)
sub zk_dir { my ($c) = @_; return $zk_dirs{$c} // die "unknown ZooKeeper $c"; }

# start_zk_with_jvm_options(@opts): start_zk, but the server's JVM also
# gets @opts (system properties such as
# '-Dzookeeper.DigestAuthenticationProvider.enabled=false', which makes a
# stock server reject every digest credential). zk.sh is run with JAVA
# set to a small wrapper that adds them.
sub start_zk_with_jvm_options
{
	return start_zk(@_);
}

# restart_zk_with_jvm_options($connect, @opts): restart_zk (same port, same
# data) with the JVM options @opts instead of those it ran with.
sub restart_zk_with_jvm_options
{
	my ($c, @opts) = @_;
	my $dir = $zk_dirs{$c} or die "unknown ZooKeeper $c";
	local $ENV{JAVA} = _zk_java_wrapper($dir, @opts);
	note "ZooKeeper at $c restarts with JVM options [@opts]";
	return restart_zk($c);
}

# A java launcher for zk.sh that adds @opts; returns its path.
my $zk_wrapper_n = 0;
sub _zk_java_wrapper
{
	my ($dir, @opts) = @_;
	my $f = "$dir/java-" . ++$zk_wrapper_n . '.sh';
	my $java = $ENV{JAVA} // 'java';
	open(my $fh, '>', $f) or die "cannot write $f: $!";
	print $fh "#!/bin/sh\nexec " . join(' ', map { "'$_'" } $java, @opts) . ' "$@"' . "\n";
	close $fh;
	chmod 0755, $f;
	return $f;
}

# deletes_pending($node): zk_status().deletes_pending, the nodes the worker
# still has to delete.
sub deletes_pending
{
	my ($node) = @_;
	return $node->safe_psql('postgres', 'SELECT deletes_pending FROM zk_status()');
}

# restart_worker($node, $how): make the zklock worker exit, with SIGTERM
# ($how 'TERM') or pg_cancel_backend ($how 'cancel'), and wait (bounded)
# until the postmaster has started the next one and that one has been
# through its first round (it waits for events). Returns (old pid, new
# pid); the new pid is '' when none came.
sub restart_worker
{
	my ($node, $how) = @_;
	my $old = worker_pid($node);
	die "no zklock worker to restart" unless $old =~ /^\d+$/;
	if (($how // 'TERM') eq 'cancel')
	{
		$node->safe_psql('postgres', "SELECT pg_cancel_backend($old)");
	}
	else
	{
		kill('TERM', $old) or die "kill TERM $old: $!";
	}
	my $new = '';
	wait_until(
		sub {
			$new = $node->safe_psql('postgres',
				q{SELECT coalesce(max(pid)::text, '') FROM pg_stat_activity
				  WHERE backend_type = 'zklock worker' AND wait_event_type = 'Extension'});
			return $new ne '' && $new ne $old;
		},
		30, "a new zklock worker after $old");
	$new = '' if $new eq $old;
	return ($old, $new);
}

push @EXPORT, qw(start_zk_with_jvm_options restart_zk_with_jvm_options
  deletes_pending restart_worker);

# lease_left($node): zk_status().lease_remaining in seconds, -1 without one.
sub lease_left
{
	my ($node) = @_;
	return $node->safe_psql('postgres', q{SELECT coalesce(extract(epoch FROM lease_remaining), -1) FROM zk_status()});
}

# lock_state($node, $pid, $path): what zk_locks says of pid's lock on path
# ('held', 'lost', 'waiting', ...), 'none' when it lists none.
sub lock_state
{
	my ($node, $pid, $path) = @_;
	return $node->safe_psql('postgres', qq{SELECT coalesce(max(state), 'none') FROM zk_locks WHERE pid = $pid AND path = '$path'});
}

# committed($node, $tag): how many rows of table work_done carry $tag (the
# work a transaction wrote under a lock, and COMMIT did or did not keep).
sub committed
{
	my ($node, $tag) = @_;
	return $node->safe_psql('postgres', qq{SELECT count(*) FROM work_done WHERE tag = '$tag'});
}

# finish_statement($node, $session, $timeout): the result of the statement
# $session runs, collected within $timeout seconds; one that still runs
# then is cancelled, collected, and marked {hung} = 1.
sub finish_statement
{
	my ($node, $s, $timeout) = @_;
	my $r = $s->result($timeout);
	return $r if $r->{done};
	diag('[' . $s->name . "] still running after ${timeout}s: cancelled");
	$node->safe_psql('postgres', 'SELECT pg_cancel_backend(' . $s->pid . ')');
	$r = $s->result(10);
	$r->{hung} = 1;
	return $r;
}

push @EXPORT, qw(lease_left lock_state committed finish_statement);

# outcomes(\@sessions, $t0, $only_first): wait (bounded, 25 s) for the
# pending statements of sessions (only the first to end, with
# $only_first); returns their results by session name, each with
# {elapsed}: seconds since $t0 when the result was seen (polled every
# 20 ms), and {session}.  For tests where one of several waits must end
# first (a deadlock's victim, 600 and 601).
sub outcomes
{
	my ($ss, $t0, $only_first) = @_;
	my %res;
	my $deadline = Time::HiRes::time() + 25;
	while (Time::HiRes::time() < $deadline && keys %res < ($only_first ? 1 : @$ss))
	{
		for my $s (@$ss)
		{
			next if exists $res{ $s->name } || !$s->done;
			my $r = $s->result(5);
			$r->{elapsed} = Time::HiRes::time() - $t0;
			$r->{session} = $s;
			$res{ $s->name } = $r;
			last if $only_first;
		}
		Time::HiRes::usleep(20_000);
	}
	return \%res;
}
# until_victim(\@sessions, $t0): wait (bounded, 25 s) until one of the
# pending statements fails with 40P01, or all ended; returns the results
# seen by then, by session name, each with {elapsed} since $t0.  (When the
# victim's transaction aborts, another member may get its lock at once:
# which one the poll sees first is no matter, the 40P01 is.)
sub until_victim
{
	my ($ss, $t0) = @_;
	my %res;
	my $deadline = Time::HiRes::time() + 25;
	while (Time::HiRes::time() < $deadline)
	{
		for my $s (@$ss)
		{
			next if exists $res{ $s->name } || !$s->done;
			my $r = $s->result(5);
			$r->{elapsed} = Time::HiRes::time() - $t0;
			$res{ $s->name } = $r;
		}
		last if keys %res == @$ss || grep { ($_->{sqlstate} // '') eq '40P01' } values %res;
		Time::HiRes::usleep(20_000);
	}
	return \%res;
}

push @EXPORT, qw(outcomes until_victim);

# Leave no server behind, even when a test dies half-way.
END
{
	local $?;
	stop_zk() if %zk_running;
}

############################################################################
# PostgreSQL clusters
############################################################################

# new_zklock_node($name, $zk_connect, $extra_conf): a started cluster with
# shared_preload_libraries = 'zklock', zklock.hosts = $zk_connect,
# zklock.session_timeout = '10s' plus $extra_conf lines, the extension
# created in database postgres, and zk_status() reporting 'connected'.
# Options: wait_connected => 0 skips the wait (for a ZooKeeper that is down);
# allows_streaming => 1 makes the cluster able to serve pg_basebackup
# ($node->backup), as PostgreSQL::Test::Cluster's init option of that name
# (default: off, as before); pg_cron => 1 preloads pg_cron too
# (shared_preload_libraries = 'zklock,pg_cron', its metadata in database
# postgres, its jobs connecting through the cluster's socket directory as
# in pg_cron's default libpq mode) and creates the extension pg_cron.
sub new_zklock_node
{
	my ($name, $zk, $extra_conf, %opts) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name);
	# explicit encoding and locale: nothing depends on the caller's LANG
	$node->init(
		extra => [ '--encoding=UTF8', '--no-locale' ],
		allows_streaming => $opts{allows_streaming} ? 1 : 0);
	my $preload = $opts{pg_cron} ? 'zklock,pg_cron' : 'zklock';
	my $cron = $opts{pg_cron} ? qq{cron.database_name = 'postgres'
cron.host = '} . $node->host . qq{'
} : '';
	$node->append_conf(
		'postgresql.conf', qq{
shared_preload_libraries = '$preload'
${cron}zklock.hosts = '$zk'
zklock.session_timeout = '10s'
zklock.server_tick_time = 500
max_connections = 30
log_min_messages = debug1
} . ($extra_conf // ''));
	$node->start;
	$node->safe_psql('postgres', 'CREATE EXTENSION zklock');
	$node->safe_psql('postgres', 'CREATE EXTENSION pg_cron') if $opts{pg_cron};
	return $node if defined $opts{wait_connected} && !$opts{wait_connected};
	wait_connected($node)
	  or BAIL_OUT("zklock on node $name did not connect to ZooKeeper $zk");
	return $node;
}

# wait_connected($node, $timeout): true once zk_status() says 'connected'.
sub wait_connected
{
	my ($node, $timeout) = @_;
	return wait_sql($node, q{SELECT state FROM zk_status()}, 'connected', $timeout);
}

############################################################################
# Waiting for conditions (bounded polling; never a blind sleep)
############################################################################

# wait_until(sub { ... }, $timeout, $what): call the sub every 50 ms until
# it returns true or $timeout seconds pass. Returns the last value.
sub wait_until
{
	my ($cond, $timeout, $what) = @_;
	$timeout //= $DEFAULT_TIMEOUT;
	my $deadline = time + $timeout;
	while (1)
	{
		my $v = $cond->();
		return $v if $v;
		if (time >= $deadline)
		{
			diag("timed out after ${timeout}s waiting for " . ($what // 'condition'));
			return $v;
		}
		usleep(50_000);
	}
}

# wait_sql($node, $sql, $expected, $timeout): poll $sql (one psql call each)
# until its output equals $expected. Returns true on success.
sub wait_sql
{
	my ($node, $sql, $expected, $timeout) = @_;
	my $last;
	my $ok = wait_until(
		sub {
			my ($stdout, $stderr, $to) = ('', '', 0);
			$node->psql('postgres', $sql, stdout => \$stdout, stderr => \$stderr,
				timeout => 15, timed_out => \$to);
			$last = $stdout;
			return $stdout eq $expected;
		},
		$timeout,
		"[$sql] = [$expected]");
	diag("last result of [$sql]: [" . ($last // '') . "]") unless $ok;
	return $ok;
}

# wait_waiting($node, $pid, $path): true once backend $pid shows in zk_locks
# as waiting on $path with its ZooKeeper node created. This is how tests
# establish arrival order before starting the next waiter.
sub wait_waiting
{
	my ($node, $pid, $path, $timeout) = @_;
	return wait_sql($node,
		qq{SELECT count(*) FROM zk_locks WHERE pid = $pid AND path = '$path'
		   AND state = 'waiting' AND node IS NOT NULL},
		'1', $timeout);
}

# wait_held($node, $pid, $path): true once backend $pid holds $path.
sub wait_held
{
	my ($node, $pid, $path, $timeout) = @_;
	return wait_sql($node,
		qq{SELECT count(*) FROM zk_locks WHERE pid = $pid AND path = '$path'
		   AND state = 'held'},
		'1', $timeout);
}

# wait_no_zklock_rows($node, $path): true once zk_locks has no row for $path.
sub wait_no_zklock_rows
{
	my ($node, $path, $timeout) = @_;
	return wait_sql($node, qq{SELECT count(*) FROM zk_locks WHERE path = '$path'},
		'0', $timeout);
}

############################################################################
# Errors and node names
############################################################################

# sqlstate_of($stderr): the SQLSTATE of the first ERROR/FATAL in psql's
# verbose output ("ERROR:  57014: canceling statement ..."), or undef.
sub sqlstate_of
{
	my ($stderr) = @_;
	return undef unless defined $stderr;
	return $1 if $stderr =~ /(?:ERROR|FATAL|PANIC):\s+([0-9A-Z]{5}):/;
	return undef;
}

# psql_error($node, $sql, $timeout): run $sql in a fresh psql with verbose
# errors; returns ($sqlstate, $stderr, $stdout, $elapsed_seconds).
sub psql_error
{
	my ($node, $sql, $timeout) = @_;
	my ($stdout, $stderr, $timed_out) = ('', '', 0);
	my $t0 = time;
	$node->psql(
		'postgres', $sql,
		stdout => \$stdout,
		stderr => \$stderr,
		extra_params => [ '-v', 'VERBOSITY=verbose' ],
		timeout => $timeout // $DEFAULT_TIMEOUT,
		timed_out => \$timed_out);
	# A statement still running at $timeout is reported as SQLSTATE 'HANG!'.
	return ($timed_out ? 'HANG!' : sqlstate_of($stderr), $stderr, $stdout, time - $t0);
}

# connection_failure_ok($node, $what, $state, $re, $log_from, $peer, $path):
# what a TLS or SASL failure must look like to a user (tests 212, 213): the
# log, after its byte $log_from, says why ($re), zk_status() says $state
# (and, from 0.4, the reason in connection_failure), a
# call on $path fails at once with 08006 and the reason, and leaves no
# node there ($peer lists $path).  Test points named "$what: ...".
sub connection_failure_ok
{
	my ($node, $what, $state, $re, $log_from, $peer, $path) = @_;
	ok(wait_until(sub { substr(PostgreSQL::Test::Utils::slurp_file($node->logfile), $log_from) =~ /LOG:  zklock: .*$re/ },
			30, 'the log line'),
		"$what: the log says why");
	is($node->safe_psql('postgres', 'SELECT state FROM zk_status()'), $state,
		"$what: zk_status() says '$state'");
	like($node->safe_psql('postgres', 'SELECT connection_failure FROM zk_status()'), $re,
		"$what: ... and its connection_failure why");
	my ($sqlstate, $err, $out, $secs) = psql_error($node, "SELECT zk_mutex_acquire('$path', '30s')");
	is($sqlstate, '08006', "$what: an acquire fails with SQLSTATE 08006") or diag($err);
	like($err, qr/zookeeper connection failed: .*$re/, "$what: ... with the reason");
	cmp_ok($secs, '<', 15, sprintf("$what: ... at once (%.1f s), not after its 30 s timeout", $secs));
	my $kids = $peer->children($path);
	ok(!defined $kids || !@$kids, "$what: the failed call left no node");
	return;
}

# seq_of($node_name): the sequence number of a lock node (the text after
# the last "lock-"), as Curator sorts them.
sub seq_of
{
	my ($name) = @_;
	return $name =~ /.*lock-(.*)$/ ? $1 : $name;
}

# write_overlaps(\@sections): how many (write, other section) pairs overlap
# in time, among sections [label, kind ('read' or 'write'), enter, exit]
# (times from inside each section); the first five are shown with diag.
sub write_overlaps
{
	my ($sections) = @_;
	my $bad = 0;
	for my $w (grep { $_->[1] eq 'write' } @$sections)
	{
		for my $x (@$sections)
		{
			next if $x == $w;
			next unless $x->[2] < $w->[3] && $w->[2] < $x->[3];
			Test::More::diag("overlap: write $w->[0] [$w->[2],$w->[3]] with $x->[1] $x->[0] [$x->[2],$x->[3]]")
			  if $bad++ < 5;
		}
	}
	return $bad;
}
push @EXPORT, 'write_overlaps';

# curator_mx_sections($peer, $id): the sections a CuratorPeer mxloop $id
# reported ({ who => 'curator', token, enter, exit }), taken out of the
# peer's lines.
sub curator_mx_sections
{
	my ($peer, $id) = @_;
	my @sections;
	for my $e (@{ $peer->{lines} })
	{
		push @sections, { who => 'curator', token => $1, enter => $2, exit => $3 }
		  if $e =~ /^mxev \Q$id\E (-?\d+) (\d+) (\d+) \d+$/;
	}
	$peer->{lines} = [ grep { !/^mxev \Q$id\E / } @{ $peer->{lines} } ];
	return @sections;
}

# mutex_section_faults(\@sections): ($overlaps, $backwards) among mutex
# sections ({ who, token, enter, exit }, times from inside each section):
# pairs that overlap in time, and tokens that do not grow in section order
# (each shown with diag).
sub mutex_section_faults
{
	my ($sections) = @_;
	my @s = sort { $a->{enter} <=> $b->{enter} } @$sections;
	my ($overlaps, $backwards) = (0, 0);
	for my $i (1 .. $#s)
	{
		my ($p, $c) = @s[ $i - 1, $i ];
		if ($c->{enter} <= $p->{exit})
		{
			$overlaps++;
			Test::More::diag("overlap: $p->{who} [$p->{enter}, $p->{exit}] and $c->{who} [$c->{enter}, $c->{exit}]");
		}
		if ($c->{token} <= $p->{token})
		{
			$backwards++;
			Test::More::diag("token did not grow: $p->{who} $p->{token} then $c->{who} $c->{token}");
		}
	}
	return ($overlaps, $backwards);
}

# history_sections($node): the sections SQL sessions recorded in table
# history(client, token, enter_us, exit_us), committed rows only, in the
# shape of curator_mx_sections
sub history_sections
{
	my ($node) = @_;
	my @sections;
	for (split /\n/, $node->safe_psql('postgres', 'SELECT client, token, enter_us, exit_us FROM history'))
	{
		my ($who, $tok, $enter, $exit) = split /\|/;
		push @sections, { who => $who, token => $tok, enter => $enter, exit => $exit };
	}
	return @sections;
}

# zk_holders($node, $path): pids of the sessions zk_locks of $node shows
# holding $path, comma-separated in order ('' for none)
sub zk_holders
{
	my ($node, $path) = @_;
	my $rows = zk_lock_rows($node, $path);
	return join(',', sort grep { $rows->{$_}{state} eq 'held' } keys %$rows);
}
push @EXPORT, qw(curator_mx_sections mutex_section_faults history_sections zk_holders);

# sort_by_seq(@names): lock nodes in queue order (Curator's fixForSorting).
sub sort_by_seq
{
	return sort { seq_of($a) cmp seq_of($b) } @_;
}

# lock_children($peer, $path): the lock nodes under $path in queue order
# ([] when the node does not exist), read by the Curator peer.
sub lock_children
{
	my ($peer, $path) = @_;
	my $kids = $peer->children($path);
	return [] unless defined $kids;
	return [ sort_by_seq(@$kids) ];
}

# zk_lock_rows($node, $path): { pid => { node, state, scope, count } } from
# the zk_locks view of $node for $path.
sub zk_lock_rows
{
	my ($node, $path) = @_;
	my $out = $node->safe_psql('postgres',
		qq{SELECT pid, coalesce(node, ''), state, scope, count FROM zk_locks
		   WHERE path = '$path' ORDER BY pid});
	my %rows;
	for my $line (split /\n/, $out)
	{
		my ($pid, $n, $state, $scope, $count) = split /\|/, $line;
		$rows{$pid} = { node => $n, state => $state, scope => $scope, count => $count };
	}
	return \%rows;
}

# worker_pid($node): pid of the zklock background worker ('' if none).
sub worker_pid
{
	my ($node) = @_;
	return $node->safe_psql('postgres',
		q{SELECT coalesce(max(pid)::text, '') FROM pg_stat_activity
		  WHERE backend_type = 'zklock worker'});
}

# expected_wait_event($node, $name): the wait_event pg_stat_activity shows
# for zklock's wait called $name (ZkLockAcquire, ZkLockRequest,
# ZkLockWorkerMain): $name itself from PostgreSQL 17 on, which names
# extension wait events, and 'Extension' before.  The wait_event_type is
# 'Extension' on every version.
sub expected_wait_event
{
	my ($node, $name) = @_;
	my $num = $node->safe_psql('postgres', q{SHOW server_version_num});
	return $num >= 170000 ? $name : 'Extension';
}

# curator_version(): the version of the Curator the peers run, as a list
# (major, minor, patch), from the versioned jar Debian installs beside
# $CURATOR_JAR (curator-recipes-5.4.0.jar on Debian 12, -5.7.1 on 13) that
# is the same file.  Dies when it cannot tell: a test that depends on the
# version must not guess.
sub curator_version
{
	my $real = abs_path($ZklockTest::CURATOR_JAR) // die "no Curator jar at $ZklockTest::CURATOR_JAR";
	for my $jar (glob(dirname($ZklockTest::CURATOR_JAR) . '/curator-recipes-*.jar'))
	{
		next unless (abs_path($jar) // '') eq $real;
		return ($1, $2, $3) if $jar =~ /curator-recipes-(\d+)\.(\d+)\.(\d+)\.jar$/;
	}
	die "cannot tell the version of $ZklockTest::CURATOR_JAR";
}

sub new_peer { return ZklockTest::Peer->new(@_); }

# java_classes(): the folder of the compiled Java peers of test/java
# (CuratorPeer, and ZkTool that it includes).  test/run-user-tests.sh
# compiles them once for all TAP files and names the folder in
# ZKLOCK_JAVA_CLASSES; a test file run on its own compiles them itself, once
# per process.
my $java_classes;

sub java_classes
{
	return $java_classes if defined $java_classes;
	my $pre = $ENV{ZKLOCK_JAVA_CLASSES};
	return $java_classes = $pre
	  if defined $pre && -f "$pre/CuratorPeer.class" && -f "$pre/ZkTool.class";
	my $dir = PostgreSQL::Test::Utils::tempdir('java');
	my ($out, $err) = ('', '');
	IPC::Run::run(
		[ 'bash', "$ZklockTest::REPO/test/java/build.sh", $dir ],
		'>', \$out, '2>', \$err, IPC::Run::timeout(120))
	  or BAIL_OUT("javac of test/java failed: $out $err");
	return $java_classes = $dir;
}

# missing_functions($node, @names): the names among @names that no function
# in the installed extension has (the C side may still be incomplete).
sub missing_functions
{
	my ($node, @names) = @_;
	my $list = join(',', map { "'$_'" } @names);
	my $have = $node->safe_psql('postgres',
		qq{SELECT string_agg(DISTINCT proname, ' ') FROM pg_proc WHERE proname IN ($list)});
	my %have = map { $_ => 1 } split ' ', $have;
	return grep { !$have{$_} } @names;
}

# require_functions($node, @names): the test file fails at once (it dies,
# naming what is missing) unless every function exists: a missing feature
# fails the test file.
sub require_functions
{
	my ($node, @names) = @_;
	my @missing = missing_functions($node, @names);
	return 1 unless @missing;
	die "zklock does not provide: @missing\n";
}

# participants_rows($node, $path): [ { position, node, kind, data, holds } ]
# from zk_participants($path), in its order.
sub participants_rows
{
	my ($node, $path) = @_;
	my $out = $node->safe_psql('postgres',
		qq{SELECT position, node, kind,
		          CASE holds WHEN true THEN 't' WHEN false THEN 'f' ELSE 'null' END, coalesce(data, '')
		   FROM zk_participants('$path') ORDER BY position});
	my @rows;
	for my $line (split /\n/, $out)
	{
		my ($pos, $n, $kind, $holds, $data) = split /\|/, $line, 5;
		push @rows, { position => $pos, node => $n, kind => $kind, holds => $holds, data => $data };
	}
	return \@rows;
}

# wait_children_count($peer, $path, $n, $timeout): true once $path has
# exactly $n children (a missing node counts as 0), as Curator sees them.
sub wait_children_count
{
	my ($peer, $path, $n, $timeout) = @_;
	my $last;
	my $ok = wait_until(
		sub { my $k = $peer->children($path) // []; $last = scalar @$k; $last == $n },
		$timeout // 10, "$n children under $path");
	diag("children of $path: $last, expected $n") unless $ok;
	return $ok;
}


our $CURATOR_JAR = $ENV{CURATOR_JAR} // '/usr/share/java/curator-recipes.jar';
# what the Java client's Netty socket (TLS) needs and the manifests of
# Debian's jars leave out
our $NETTY_JARS = '/usr/share/java/netty-codec.jar:/usr/share/java/netty-resolver.jar';

1;

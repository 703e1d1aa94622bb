
# ZklockClock — step the wall clock of a zklock cluster (libfaketime).
#
# A cluster started with new_faketime_node runs its postmaster, and so
# every backend and the zklock worker, under libfaketime
# (/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1, Debian package
# libfaketime, pulled in by `faketime`).  Its wall clock (time(),
# gettimeofday(), clock_gettime(CLOCK_REALTIME)) is the real one plus an
# offset read from a file at every call (FAKETIME_TIMESTAMP_FILE,
# FAKETIME_NO_CACHE=1), so the test steps it at run time by rewriting the
# file.  Monotonic clocks (CLOCK_MONOTONIC, _RAW, _COARSE, CLOCK_BOOTTIME)
# are left alone (FAKETIME_DONT_FAKE_MONOTONIC=1), as a real clock step
# leaves them.  ZooKeeper, Curator, psql and the test itself are not
# faked: only the PostgreSQL side sees the step, as when an operator or
# NTP steps the clock of the database host.
#
#   new_faketime_node($name, $zk, $extra_conf, %opts)
#                         new_zklock_node under libfaketime (offset 0), then
#                         the worker restarted once (see below); returns
#                         the node
#   faketime_start($node) start a stopped node under libfaketime again (its
#                         offset file, the offset in force); its first
#                         worker does not follow the file (the pitfall
#                         below) until restart_worker
#   clock_offset_file($node)
#                         the file that holds the offset (for the server
#                         itself to read: pg_read_file)
#   clock_offset($node)   the offset in force now (seconds)
#   set_clock_offset($node, $secs)
#                         the faked clock reads real + $secs from now on
#   step_clock($node, $delta)
#                         step it by $delta seconds (negative: back)
#   backend_clock_offset($node)
#                         read back: how far a new backend's clock_timestamp()
#                         is off the real clock (seconds, float)
#   session_clock_offset($session)
#                         the same, in the backend of a ZklockTest::Session
#                         (whose statements the test relies on)
#   worker_clock_offset($session, $path)
#                         read back the worker's clock: $session takes (and
#                         releases) a mutex on $path; the worker stamps the
#                         grant (zk_locks.since) with its own clock.  Returns
#                         the offset (seconds, float), undef when the
#                         acquire did not succeed within 10 s
#   nothing_within($secs, $cond)
#                         watch for $secs seconds (the window in which a
#                         fault would show) whether $cond returns something
#                         true; returns its first true value, or undef when
#                         it never did.  Unlike wait_until, timing out is
#                         the good outcome here, so it says nothing then.
#
# Pitfall (PostgreSQL 15): the postmaster starts the first zklock worker
# from a signal handler that interrupted its select(), inside libfaketime's
# select() wrapper, and a process forked there never reads the offset
# file: its clock stays real.  A worker the postmaster starts later from
# its main loop (restart_worker) follows the file like the backends do.
# So new_faketime_node restarts the worker once; worker_clock_offset
# checks it.
#
# Pitfall 2, the same cause: libfaketime stops faking while a process is
# inside its wrappers of select(), poll(), epoll_wait() (its DONT_FAKE_TIME
# flag), so a signal handler that interrupts a process waiting there (a
# backend in pg_sleep, waiting on its latch or for the client) reads the
# real clock, not the faked one, and PostgreSQL's timeouts (SIGALRM,
# utils/misc/timeout.c) then compare a faked deadline with the real time.
# A real clock step has no such split.  A test of what a signal handler
# does after a step must catch the backend computing (an endless PL/pgSQL
# loop), not sleeping.
#
# Pitfall 3, the same cause: the PostgreSQL 15 postmaster notes when a
# background worker exited in its SIGCHLD handler (the real clock) and
# restarts it from its main loop once bgw_restart_time has passed on the
# faked clock.  Under a negative offset the restart waits until a signal
# handler looks again (the autovacuum launcher's every naptime, 60 s), so
# a worker restarted there (a new zklock.hosts, a SIGTERM) stays away for
# up to a minute.  PostgreSQL 16 and later do this outside signal
# handlers.  A test that restarts the worker and waits for it sets the
# offset to 0 first.
package ZklockClock;

use strict;
use warnings;

use ZklockTest;
use PostgreSQL::Test::Utils;
use File::Spec;
use Time::HiRes qw(time usleep);
use Test::More;

use Exporter 'import';
our @EXPORT = qw(
  new_faketime_node faketime_start clock_offset_file clock_offset set_clock_offset step_clock
  backend_clock_offset session_clock_offset worker_clock_offset nothing_within
);

our $LIBFAKETIME = $ENV{LIBFAKETIME}
  // '/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1';

my %offset_file;    # node name => offset file
my %offset;         # node name => seconds

sub _write_offset
{
	my ($file, $secs) = @_;
	my $tmp = "$file.tmp";
	open(my $fh, '>', $tmp) or die "cannot write $tmp: $!";
	# libfaketime: a leading + or - is an offset in seconds from the real time
	printf $fh "%s%d\n", $secs < 0 ? '-' : '+', abs($secs);
	close $fh or die "cannot write $tmp: $!";
	# rename: a process reading the file never sees it half written
	rename($tmp, $file) or die "cannot rename $tmp: $!";
	return;
}

sub new_faketime_node
{
	my ($name, $zk, $extra_conf, %opts) = @_;
	# A missing libfaketime fails the test: it is a dependency
	# (test/install-deps.sh installs it).
	die "libfaketime not found at $LIBFAKETIME (Debian package libfaketime)\n"
	  unless -r $LIBFAKETIME;
	# absolute: PostgreSQL 17's tempdir() may be relative to the test's
	# directory, and the postmaster runs in its data directory
	my $file = File::Spec->rel2abs(PostgreSQL::Test::Utils::tempdir('faketime') . '/offset');
	_write_offset($file, 0);
	my $node = _under_faketime($file, sub { new_zklock_node($name, $zk, $extra_conf, %opts) });
	$offset_file{ $node->name } = $file;
	$offset{ $node->name } = 0;
	my ($old, $new) = _worker_follows_clock($node);
	note("node $name runs under libfaketime (offset file $file); worker $old restarted as $new");
	return $node;
}

# _under_faketime($file, $start): run $start with the preload in the
# environment.  Only the processes started there (initdb, pg_ctl, hence
# the postmaster and everything it forks) get it; sessions and peers
# started later do not.
sub _under_faketime
{
	my ($file, $start) = @_;
	local $ENV{LD_PRELOAD} = join(' ', grep { defined && length } $LIBFAKETIME, $ENV{LD_PRELOAD});
	local $ENV{FAKETIME_TIMESTAMP_FILE} = $file;
	local $ENV{FAKETIME_NO_CACHE} = '1';
	local $ENV{FAKETIME_DONT_FAKE_MONOTONIC} = '1';
	local $ENV{DONT_FAKE_MONOTONIC} = '1';    # the name before libfaketime 0.9.8
	return $start->();
}

# the first worker of a postmaster does not follow the file (the pitfall
# above): restart it once
sub _worker_follows_clock
{
	my ($node) = @_;
	my ($old, $new) = restart_worker($node);
	die 'the zklock worker of ' . $node->name . " did not come back after a restart\n" unless $new;
	wait_connected($node) or die 'zklock on ' . $node->name . " did not connect again after the worker restart\n";
	return ($old, $new);
}

sub faketime_start
{
	my ($node) = @_;
	my $file = clock_offset_file($node);
	_under_faketime($file, sub { $node->start });
	return;
}

sub clock_offset_file
{
	my ($node) = @_;
	return $offset_file{ $node->name } // die 'node ' . $node->name . ' was not started by new_faketime_node';
}

sub clock_offset
{
	my ($node) = @_;
	die "node " . $node->name . " was not started by new_faketime_node" unless exists $offset{ $node->name };
	return $offset{ $node->name };
}

sub set_clock_offset
{
	my ($node, $secs) = @_;
	my $file = $offset_file{ $node->name }
	  or die "node " . $node->name . " was not started by new_faketime_node";
	_write_offset($file, $secs);
	note(sprintf('clock of node %s: offset %+d s (was %+d s)', $node->name, $secs, $offset{ $node->name }));
	$offset{ $node->name } = $secs;
	return;
}

sub step_clock
{
	my ($node, $delta) = @_;
	set_clock_offset($node, clock_offset($node) + $delta);
	return;
}

sub backend_clock_offset
{
	my ($node) = @_;
	my $t0 = time;
	my $v = $node->safe_psql('postgres', q{SELECT extract(epoch FROM clock_timestamp())});
	my $t1 = time;
	return $v - ($t0 + $t1) / 2;
}

sub session_clock_offset
{
	my ($session) = @_;
	my $t0 = time;
	my $v = $session->value(q{SELECT extract(epoch FROM clock_timestamp())});
	my $t1 = time;
	return $v - ($t0 + $t1) / 2;
}

sub worker_clock_offset
{
	my ($session, $path) = @_;
	my $t0 = time;
	my $r = $session->query(qq{SELECT zk_mutex_acquire('$path', '10s')}, 20);
	my $t1 = time;
	unless ($r->{out} eq 't')
	{
		diag("worker_clock_offset: acquire of $path: out=[$r->{out}] err=[$r->{err}]");
		return undef;
	}
	my $pid = $session->pid;
	my $since = $session->value(
		qq{SELECT extract(epoch FROM since) FROM zk_locks WHERE pid = $pid AND path = '$path'});
	$session->query(qq{SELECT zk_mutex_release('$path')});
	return undef unless $since =~ /^-?[\d.]+$/;
	return $since - ($t0 + $t1) / 2;
}

sub nothing_within
{
	my ($secs, $cond) = @_;
	my $deadline = time + $secs;
	while (1)
	{
		my $v = $cond->();
		return $v if $v;
		return undef if time >= $deadline;
		usleep(50_000);
	}
}

1;


# ZklockLoad — the load harness of zklock's long TAP tests: the checker
# (test/t/900_checker_jepsen.pl), the soak test (test/t/901_soak.pl) and
# the adversary (test/t/905_adversary.pl).
#
# Such a test keeps many clients (SQL sessions, Curator threads) busy from
# one loop, without blocking: its "pump" collects what finished and starts
# what is due.  While a fault is injected and healed, every wait of the test
# keeps pumping, so the load never stops.  What the clients do and how
# their outcomes are judged stays in the test; the harness only drives.
#
#   load_driver(pump => \&pump, us => $us, every => $secs)
#                                 the test's pump, called every $us
#                                 microseconds; a drive_until condition is
#                                 evaluated every $secs seconds
#   drive_for($secs)              the clients run for $secs seconds (load
#                                 time; it decides nothing)
#   drive_until($cond, $timeout, $what)
#                                 wait_until with the clients running;
#                                 returns $cond's last value
#   pump_for($secs, $pump, $us) / wait_pumping($cond, $timeout, $what,
#                                 $pump, $every, $us)
#                                 the same with an explicit pump
#   healthy($cond, $timeout, $what, $name)
#                                 ok(drive_until(...), $name): the system is
#                                 back after a fault
#   try_sql($node, $sql)          the output of $sql, undef while the
#                                 cluster does not answer (crash-restart)
#   try_status($node)             zk_status() as a hash, undef likewise
#   connected_in_new_session($node, $old_session_id)
#                                 the status once connected in a session
#                                 other than $old_session_id, else 0
#   fault_clock($t0)              faults are noted in seconds since $t0
#   fault_note($what, $detail)    note a fault ($detail optional) and keep it
#   faults()                      the faults noted: [ what, seconds, detail ]
#   log_since($node, $offset)     the server log from byte $offset on
#   peer_read($peer)              the lines a Curator peer (new_peer) wrote
#                                 since the last call, read without blocking
#   peer_flush($peer)             send what the test queued in $peer->{in},
#                                 without blocking
package ZklockLoad;

use strict;
use warnings;

use ZklockTest;
use ZklockFault;
use PostgreSQL::Test::Utils;
use Time::HiRes qw(time usleep);
use Test::More;

use Exporter 'import';
our @EXPORT = qw(
  load_driver drive_for drive_until pump_for wait_pumping healthy
  try_sql try_status connected_in_new_session
  fault_clock fault_note faults log_since
  peer_read peer_flush
);

############################################################################
# Driving the clients
############################################################################

my ($pump, $pump_us, $cond_every);    # set by load_driver

# load_driver(pump => \&pump, us => $us, every => $secs): the test's pump
# and how often drive_for and drive_until call it.
sub load_driver
{
	my (%o) = @_;
	($pump, $pump_us, $cond_every) = @o{qw(pump us every)};
	die 'load_driver: pump, us and every are required'
	  unless $pump && $pump_us && $cond_every;
	return;
}

# pump_for($secs, $pump, $us): let the test's clients run for $secs seconds
# ($pump is called every $us microseconds; it decides nothing).
sub pump_for
{
	my ($secs, $pump, $us) = @_;
	my $end = time + $secs;
	while (time < $end)
	{
		$pump->();
		usleep($us);
	}
	return;
}

# wait_pumping($cond, $timeout, $what, $pump, $every, $us): wait (bounded)
# until $cond returns true, calling $pump every $us microseconds meanwhile
# and $cond every $every seconds; returns $cond's last value.
sub wait_pumping
{
	my ($cond, $timeout, $what, $pump, $every, $us) = @_;
	my $deadline = time + $timeout;
	my $next = 0;
	my $v;
	while (1)
	{
		$pump->();
		if (time >= $next)
		{
			$v = $cond->();
			return $v if $v;
			$next = time + $every;
		}
		if (time >= $deadline)
		{
			diag("timed out after ${timeout}s waiting for $what");
			return $v;
		}
		usleep($us);
	}
}

# drive_for($secs): the clients run (load time; it decides nothing).
sub drive_for
{
	my ($secs) = @_;
	return pump_for($secs, $pump, $pump_us);
}

# drive_until($cond, $timeout, $what): wait_until with the clients running;
# $cond is evaluated every load_driver's "every" seconds.
sub drive_until
{
	my ($cond, $timeout, $what) = @_;
	return wait_pumping($cond, $timeout, $what, $pump, $cond_every, $pump_us);
}

# healthy($cond, $timeout, $what, $name): one assertion, named $name, that
# $cond holds within $timeout seconds while the clients run.
sub healthy
{
	my ($cond, $timeout, $what, $name) = @_;
	return ok(drive_until($cond, $timeout, $what), $name);
}

############################################################################
# Asking a cluster that may be restarting
############################################################################

# try_sql($node, $sql): output of $sql, undef while the cluster does not
# answer.
sub try_sql
{
	my ($node, $sql) = @_;
	my ($out, $err, $to) = ('', '', 0);
	eval {
		$node->psql('postgres', $sql, stdout => \$out, stderr => \$err, timeout => 10, timed_out => \$to);
	};
	return undef if $@ || $to || $err =~ /ERROR|FATAL|could not connect|server closed/;
	return $out;
}

# try_status($node): zk_status() as a hash, undef while the cluster does
# not answer (crash-restart).
sub try_status
{
	my ($node) = @_;
	my $out = try_sql($node, q{SELECT row_to_json(s)::text FROM zk_status() s});
	return undef unless defined $out && $out =~ /^\{/;
	return row_from_json($out);
}

# connected_in_new_session($node, $old_session): the status once the
# cluster is connected in a session other than $old_session, else 0.
sub connected_in_new_session
{
	my ($node, $old_session) = @_;
	my $st = try_status($node) or return 0;
	return $st->{state} eq 'connected' && $st->{session_id} ne $old_session ? $st : 0;
}

# log_since($node, $offset): the server log from byte $offset on.
sub log_since
{
	my ($node, $offset) = @_;
	my $log = log_contents($node);
	return substr($log, $offset);
}

############################################################################
# The faults of a run
############################################################################

my $fault_t0 = time;
my @faults;    # [ what, seconds since fault_clock, detail ]

# fault_clock($t0): the start of the run; faults are noted in seconds since.
sub fault_clock
{
	($fault_t0) = @_;
	return;
}

# fault_note($what, $detail): note a fault as it is injected ($detail is
# optional) and keep it for the run's summary.
sub fault_note
{
	my ($what, $detail) = @_;
	my $t = time - $fault_t0;
	push @faults, [ $what, $t, $detail ];
	note(defined $detail
		? sprintf('fault at %.1f s: %s (%s)', $t, $what, $detail)
		: sprintf('fault at %.1f s: %s', $t, $what));
	return;
}

# faults(): the faults noted so far, in order: [ what, seconds, detail ].
sub faults
{
	return @faults;
}

############################################################################
# A Curator peer driven from the pump
############################################################################

# peer_flush($peer): move what the test queued in $peer->{in} to the peer
# and what it wrote to its buffer, without blocking.
sub peer_flush
{
	my ($peer) = @_;
	eval { $peer->{h}->pump_nb if $peer->{h}->pumpable; };
	return;
}

# peer_read($peer): the complete lines the peer wrote since the last call
# (taken out of $peer->{lines}).
sub peer_read
{
	my ($peer) = @_;
	peer_flush($peer);
	$peer->_split;
	my @lines = @{ $peer->{lines} };
	$peer->{lines} = [];
	return @lines;
}

1;


# ZklockProxy — a small TCP fault-injection proxy for zklock's TAP tests.
#
# A forked child listens on 127.0.0.1 (a port the kernel hands out, so it is
# free) and relays every accepted connection to one upstream "host:port"
# (a real ZooKeeper). The test switches the child's mode through a pipe and
# waits for its acknowledgement, so a mode is in force when set_mode returns.
#
#   my $proxy = ZklockProxy->start('127.0.0.1:2181');
#   $proxy->port / $proxy->connect        "127.0.0.1:<proxy port>"
#   $proxy->set_mode('drop_replies');     returns the stats after the switch
#   $proxy->stats                         { mode, conns, accepted, c2s, s2c,
#                                           dropped_c2s, dropped_s2c,
#                                           refused, hs_0x<session>: the
#                                           handshakes relayed that resume
#                                           that session }
#   $proxy->stop
#
# Modes (they apply to every relayed byte from the moment they are set):
#   pass          forward both ways. Switching to pass closes the connections
#                 that lost bytes in an earlier mode (their byte stream is
#                 corrupt: a real broken path would end them too), so the
#                 client reconnects on a clean path.
#   drop_replies  forward client->server; read and silently discard
#                 server->client bytes. New connections are relayed the same
#                 way (their replies are lost too).
#   blackhole     nothing gets through: bytes of existing connections are
#                 read and discarded both ways; new connections are accepted
#                 but never relayed (held open, their bytes discarded).
#   cut           close every current connection (both ends) at once; until
#                 the next mode, new connections are closed as soon as they
#                 are accepted.
#   drop_set_replies
#                 forward both ways until a connection carries a client's
#                 setData request (ZooKeeper opcode 5); that request is
#                 relayed (the server applies it) and from then on every
#                 server->client byte of that connection is discarded, as
#                 in drop_replies: the write's reply is lost.  Other
#                 connections, and new ones, are relayed until they carry
#                 a setData of their own.  stats' set_requests counts the
#                 setData requests relayed (in any mode), multi_requests
#                 the multis (opcode 14), get_requests the getData
#                 requests (opcode 4).
#   hold_replies  forward client->server; keep server->client bytes back
#                 (in order, none lost) until the next mode, which hands
#                 them on first: replies arrive late, as from a slow path.
#                 stats' held_s2c counts the bytes kept back.
#   stall_new     current connections are relayed as in pass; new ones are
#                 accepted and stalled for good: never relayed, never
#                 answered, and left open by later modes (a server that
#                 takes a connection and never answers the handshake, as a
#                 starting or stopping one may); only the client's giving up
#                 (or cut) ends them.
#
# Why new connections are accepted (held or closed) rather than left in the
# kernel's listen backlog: a handshake left queued there would be relayed
# later, long after the client gave up on it, and ZooKeeper moves a session
# onto the connection that presents it — a stale replay could steal the
# session from the client's live connection.
package ZklockProxy;

use strict;
use warnings;

use IO::Socket::INET;
use IO::Select;
use IO::Handle;
use Socket qw(IPPROTO_TCP TCP_NODELAY);
use POSIX ();
use Time::HiRes qw(time);
use Test::More;

my %MODES = map { $_ => 1 } qw(pass drop_replies drop_set_replies hold_replies blackhole cut stall_new);

sub start
{
	my ($class, $upstream, %opts) = @_;
	my ($uhost, $uport) = $upstream =~ /^(.*):(\d+)$/
	  or die "ZklockProxy: bad upstream '$upstream'";
	my $listen = IO::Socket::INET->new(
		LocalAddr => '127.0.0.1',
		LocalPort => 0,
		Proto => 'tcp',
		Listen => 16,
		ReuseAddr => 1) or die "ZklockProxy: listen: $!";
	my $port = $listen->sockport;

	pipe(my $cmd_r, my $cmd_w) or die "pipe: $!";
	pipe(my $ack_r, my $ack_w) or die "pipe: $!";
	my $pid = fork();
	die "ZklockProxy: fork: $!" unless defined $pid;
	if ($pid == 0)
	{
		close $cmd_w;
		close $ack_r;
		my $rc = eval { _child($listen, $uhost, $uport, $cmd_r, $ack_w, $opts{log}); 0 } // 1;
		print STDERR "ZklockProxy child: $@" if $@;
		POSIX::_exit($rc);
	}
	close $cmd_r;
	close $ack_w;
	close $listen;
	$cmd_w->autoflush(1);
	my $self = bless {
		pid => $pid,
		port => $port,
		upstream => $upstream,
		cmd => $cmd_w,
		ack => $ack_r,
		ackbuf => '',
		owner => $$,
	}, $class;
	my $st = $self->stats;
	die "ZklockProxy: child did not answer" unless $st;
	note("proxy 127.0.0.1:$port -> $upstream started (pid $pid)");
	return $self;
}

sub port { return $_[0]{port}; }
sub connect { return "127.0.0.1:$_[0]{port}"; }

# Send one command line and wait (bounded, 10 s) for the child's answer
# line "ok k=v k=v ...". Returns the answer as a hash, dies on no answer.
sub _cmd
{
	my ($self, $line) = @_;
	syswrite($self->{cmd}, "$line\n") or die "ZklockProxy: write to child: $!";
	my $sel = IO::Select->new($self->{ack});
	my $deadline = time + 10;
	while ($self->{ackbuf} !~ /\n/)
	{
		my $left = $deadline - time;
		die "ZklockProxy: no answer to '$line'" if $left <= 0;
		next unless $sel->can_read($left);
		my $n = sysread($self->{ack}, my $buf, 4096);
		die "ZklockProxy: child gone" unless $n;
		$self->{ackbuf} .= $buf;
	}
	$self->{ackbuf} =~ s/^([^\n]*)\n//;
	my $ans = $1;
	die "ZklockProxy: '$line' -> '$ans'" unless $ans =~ s/^ok\s*//;
	my %h = $ans =~ /(\w+)=(\S+)/g;
	return \%h;
}

# set_mode($mode): switch; returns the stats once the child applied it.
sub set_mode
{
	my ($self, $mode) = @_;
	die "ZklockProxy: unknown mode '$mode'" unless $MODES{$mode};
	my $st = $self->_cmd("mode $mode");
	note("proxy -> $mode (" . join(' ', map { "$_=$st->{$_}" } sort keys %$st) . ')');
	return $st;
}

sub stats { return $_[0]->_cmd('stats'); }

sub stop
{
	my ($self) = @_;
	return unless $self->{pid} && $$ == $self->{owner};
	my $pid = delete $self->{pid};
	kill('TERM', $pid);
	my $deadline = time + 5;
	while (waitpid($pid, POSIX::WNOHANG()) == 0)
	{
		if (time > $deadline)
		{
			kill('KILL', $pid);
			waitpid($pid, 0);
			last;
		}
		select(undef, undef, undef, 0.05);
	}
	close $self->{cmd};
	close $self->{ack};
	return;
}

sub DESTROY
{
	my ($self) = @_;
	local ($@, $?, $!);
	eval { $self->stop; };
}

############################################################################
# The child: one select loop.
############################################################################

sub _child
{
	my ($listen, $uhost, $uport, $cmd_r, $ack_w, $log) = @_;
	$SIG{TERM} = sub { POSIX::_exit(0); };
	$SIG{PIPE} = 'IGNORE';
	$ack_w->autoflush(1);
	$listen->blocking(0);

	my $mode = 'pass';
	my %st = (accepted => 0, c2s => 0, s2c => 0, dropped_c2s => 0, dropped_s2c => 0,
		refused => 0, closed_tainted => 0, stalled => 0, set_requests => 0,
		multi_requests => 0, held_s2c => 0);
	my @pairs;    # { c => client sock, s => server sock or undef, tainted => 0|1 }
	my %peer;     # fileno => [pair, 'c'|'s']
	my $cmdbuf = '';

	my $close_pair = sub {
		my ($p) = @_;
		for my $k (qw(c s))
		{
			next unless $p->{$k};
			delete $peer{ fileno($p->{$k}) };
			close $p->{$k};
			$p->{$k} = undef;
		}
		@pairs = grep { $_ != $p } @pairs;
	};

	# The client's requests on a connection, frame by frame (a 4-byte
	# length, then, after the handshake's frame, xid and opcode): a setData
	# (opcode 5) relayed in drop_set_replies mode marks the connection.  The
	# handshakes relayed are counted by the session they ask for
	# (hs_0x<session id>), so a test counts its own client's connections
	# and no stray one (a client of another test still calling at a port
	# this proxy was given after that test's server let it go).
	my $_frames = sub {
		my ($p, $buf, $m, $stats) = @_;
		$p->{cq} .= $buf;
		while (length($p->{cq}) >= 4)
		{
			my $len = unpack('N', $p->{cq});
			last if length($p->{cq}) < 4 + $len;
			my $frame = substr($p->{cq}, 4, $len);
			substr($p->{cq}, 0, 4 + $len) = '';
			if ($p->{handshake})
			{
				# the ConnectRequest: protocol version, last zxid seen,
				# timeout, then the session it resumes (0: a new one)
				$p->{handshake} = 0;
				$stats->{ sprintf('hs_0x%016x', unpack('Q>', substr($frame, 16, 8))) }++
				  if $len >= 24;
				next;
			}
			next unless $len >= 8;
			my (undef, $op) = unpack('l> l>', $frame);
			$stats->{multi_requests}++ if $op == 14;
			$stats->{get_requests}++ if $op == 4;
			next unless $op == 5;
			$stats->{set_requests}++;
			$p->{set_seen} = 1 if $m eq 'drop_set_replies';
		}
	};

	# hand on what hold_replies kept back, in order
	my $flush_held = sub {
		for my $p (@pairs)
		{
			next unless defined $p->{held} && length $p->{held} && $p->{c};
			my ($buf, $off) = ($p->{held}, 0);
			$p->{held} = '';
			$p->{c}->blocking(1);
			while ($off < length $buf)
			{
				my $w = syswrite($p->{c}, $buf, length($buf) - $off, $off);
				last unless defined $w;
				$off += $w;
			}
			$st{s2c} += $off;
		}
	};

	my $answer = sub {
		my %a = (%st, mode => $mode, conns => scalar @pairs);
		syswrite($ack_w, 'ok ' . join(' ', map { "$_=$a{$_}" } sort keys %a) . "\n");
	};

	while (1)
	{
		my $sel = IO::Select->new($listen, $cmd_r);
		for my $p (@pairs)
		{
			$sel->add($p->{c}) if $p->{c};
			$sel->add($p->{s}) if $p->{s};
		}
		my @ready = $sel->can_read(1);
		for my $fh (@ready)
		{
			if ($fh == $cmd_r)
			{
				my $n = sysread($cmd_r, my $buf, 4096);
				POSIX::_exit(0) unless $n;    # the test process went away
				$cmdbuf .= $buf;
				while ($cmdbuf =~ s/^([^\n]*)\n//)
				{
					my $c = $1;
					if ($c =~ /^mode (\w+)$/ && $MODES{$1})
					{
						$mode = $1;
						$flush_held->() unless $mode eq 'hold_replies';
						# (over copies: $close_pair rebuilds @pairs, which
						# frees the elements a loop over it would alias)
						if ($mode eq 'cut')
						{
							my @all = @pairs;
							$close_pair->($_) for @all;
						}
						elsif ($mode eq 'pass')
						{
							my @tainted = grep { $_->{tainted} } @pairs;
							for my $p (@tainted)
							{
								$close_pair->($p);
								$st{closed_tainted}++;
							}
						}
						$answer->();
					}
					elsif ($c eq 'stats')
					{
						$answer->();
					}
					else
					{
						syswrite($ack_w, "error unknown command '$c'\n");
					}
				}
			}
			elsif ($fh == $listen)
			{
				my $c = $listen->accept or next;
				$st{accepted}++;
				if ($mode eq 'cut')
				{
					close $c;
					$st{refused}++;
					next;
				}
				my $p = { c => $c, s => undef, tainted => 0, stalled => 0,
					cq => '', handshake => 1, set_seen => 0 };
				if ($mode eq 'stall_new')
				{
					$p->{stalled} = 1;
					$st{stalled}++;
				}
				elsif ($mode ne 'blackhole')
				{
					my $s = IO::Socket::INET->new(PeerAddr => $uhost, PeerPort => $uport,
						Proto => 'tcp', Timeout => 5);
					if (!$s)
					{
						close $c;
						$st{refused}++;
						next;
					}
					$s->setsockopt(IPPROTO_TCP, TCP_NODELAY, 1);
					$p->{s} = $s;
					$peer{ fileno($s) } = [ $p, 's' ];
				}
				else
				{
					$p->{tainted} = 1;
				}
				$c->setsockopt(IPPROTO_TCP, TCP_NODELAY, 1);
				$peer{ fileno($c) } = [ $p, 'c' ];
				push @pairs, $p;
			}
			else
			{
				my $fd = fileno($fh);
				next unless defined $fd;    # closed earlier in this round
				my $e = $peer{$fd} or next;
				my ($p, $side) = @$e;
				my $n = sysread($fh, my $buf, 65536);
				if (!$n)
				{
					$close_pair->($p);    # EOF or error on either end ends both
					next;
				}
				my $to = $side eq 'c' ? $p->{s} : $p->{c};
				my $dir = $side eq 'c' ? 'c2s' : 's2c';
				if ($p->{stalled})
				{
					$st{"dropped_$dir"} += $n;    # never relayed, never closed
					next;
				}
				my $drop = $mode eq 'blackhole'
				  || ($mode eq 'drop_replies' && $side eq 's')
				  || ($mode eq 'drop_set_replies' && $side eq 's' && $p->{set_seen})
				  || !$to;
				if (!$drop && $mode eq 'hold_replies' && $side eq 's')
				{
					$p->{held} .= $buf;
					$st{held_s2c} += $n;
					next;
				}
				if ($drop)
				{
					$st{"dropped_$dir"} += $n;
					$p->{tainted} = 1;
					next;
				}
				$_frames->($p, $buf, $mode, \%st) if $side eq 'c';
				my $off = 0;
				while ($off < $n)
				{
					my $w = syswrite($to, $buf, $n - $off, $off);
					if (!defined $w)
					{
						next if $!{EINTR} || $!{EAGAIN};
						$close_pair->($p);
						last;
					}
					$off += $w;
				}
				$st{$dir} += $off;
			}
		}
	}
}

1;

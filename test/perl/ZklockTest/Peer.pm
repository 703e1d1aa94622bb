############################################################################
# ZklockTest::Peer — a Curator 5.4 client (test/java/CuratorPeer.java)
############################################################################
#
#   my $peer = ZklockTest::Peer->new($zk_connect);
#   ZklockTest::Peer->new($zk_connect, $name, @jvm_options)  with system
#                                              properties (zookeeper.ssl.*)
#   $peer->acquire('c1', '/p', 1000);          async
#   $peer->wait_reply(qr/^(acquired|timeout|error) c1\b/)   -> the line
#   $peer->release('c1');                      waits for "released c1"
#   $peer->children('/p')                      -> [names] or undef (no node)
#   $peer->long_get('/c'), count_get('/c')   -> a counter as Curator reads it
#   $peer->quit;
package ZklockTest::Peer;

use strict;
use warnings;
use IPC::Run;
use Test::More;
use File::Path qw(make_path);

sub new
{
	my ($class, $connect, $name, @jvm_options) = @_;
	my $dir = ZklockTest::java_classes();
	my $self = bless {
		name => $name // 'peer',
		in => '',
		out => '',
		err => '',
		lines => [],
	}, $class;
	$self->{timer} = IPC::Run::timer($ZklockTest::DEFAULT_TIMEOUT);
	$self->{h} = IPC::Run::start(
		[
			'java', '-Xmx128m', @jvm_options, '-cp',
			"$dir:$ZklockTest::CURATOR_JAR:$ZklockTest::NETTY_JARS",
			'CuratorPeer', $connect
		],
		'<', \$self->{in}, '>', \$self->{out}, '2>', \$self->{err},
		$self->{timer});
	my $l = $self->wait_reply(qr/^(ready|error connect)/, 60);
	die "Curator peer did not connect to $connect: " . ($l // 'no reply') . " $self->{err}"
	  unless defined $l && $l eq 'ready';
	return $self;
}

# send($line): send one command, do not wait.
sub send
{
	my ($self, $line) = @_;
	Test::More::note("[$self->{name}] << $line");
	$self->{in} .= "$line\n";
	eval { $self->{h}->pump_nb; };
	return;
}

# Move complete lines from the output buffer into the line queue.
sub _split
{
	my ($self) = @_;
	while ($self->{out} =~ s/^([^\n]*)\n//)
	{
		push @{ $self->{lines} }, $1;
		Test::More::note("[$self->{name}] >> $1") unless $1 =~ /^rwev /;
	}
}

# wait_reply($re, $timeout): remove and return the first reply line that
# matches $re, waiting at most $timeout seconds; undef on timeout. Lines
# that do not match stay queued for later waits (replies of concurrent
# acquires arrive in any order).
sub wait_reply
{
	my ($self, $re, $timeout) = @_;
	$self->{timer}->start($timeout // $ZklockTest::DEFAULT_TIMEOUT);
	while (1)
	{
		$self->_split;
		for my $i (0 .. $#{ $self->{lines} })
		{
			if ($self->{lines}[$i] =~ $re)
			{
				return splice(@{ $self->{lines} }, $i, 1);
			}
		}
		last if $self->{timer}->is_expired || !$self->{h}->pumpable;
		eval { $self->{h}->pump; };
	}
	$self->_split;
	diag("[$self->{name}] no reply matching $re; queued: [@{$self->{lines}}] stderr: $self->{err}");
	return undef;
}

# has_reply($re): non-blocking check whether a matching reply arrived
# (the line stays queued).
sub has_reply
{
	my ($self, $re) = @_;
	eval { $self->{h}->pump_nb if $self->{h}->pumpable; };
	$self->_split;
	return scalar grep { $_ =~ $re } @{ $self->{lines} };
}

# cmd($line, $re, $timeout): send and wait for the matching reply.
sub cmd
{
	my ($self, $line, $re, $timeout) = @_;
	$self->send($line);
	return $self->wait_reply($re, $timeout);
}

# acquire($id, $path, $timeout_ms): start an acquire on ID's thread (async).
sub acquire
{
	my ($self, $id, $path, $ms) = @_;
	$self->send("acquire $id $path " . ($ms // -1));
	return;
}

# acquire_result($id, $timeout): 'acquired' | 'timeout' | 'error ...' | undef.
sub acquire_result
{
	my ($self, $id, $timeout) = @_;
	my $l = $self->wait_reply(qr/^(acquired|timeout|error) \Q$id\E(\s|$)/, $timeout);
	return undef unless defined $l;
	$l =~ s/^(acquired|timeout) \Q$id\E$/$1/;
	return $l;
}

# lock($kind, $id, $path, $timeout_ms, $revocable): start a read, write,
# mutex or semmutex acquire on ID's thread (async; collect it with
# acquire_result). $revocable: undef, 'revocable' (release when asked) or
# 'revocable-notify' (only print "revoked ID").
sub lock
{
	my ($self, $kind, $id, $path, $ms, $rev) = @_;
	$self->send("$kind $id $path " . ($ms // -1) . (defined $rev ? " $rev" : ''));
	return;
}

# lease($id, $path, $max, $qty, $timeout_ms): start a semaphore acquire (async).
sub lease
{
	my ($self, $id, $path, $max, $qty, $ms) = @_;
	$self->send("lease $id $path $max " . ($qty // 1) . ' ' . ($ms // -1));
	return;
}

# lease_result($id, $timeout): [lease names] | 'timeout' | 'error ...' | undef
sub lease_result
{
	my ($self, $id, $timeout) = @_;
	my $l = $self->wait_reply(qr/^(leased|timeout|error) \Q$id\E(\s|$)/, $timeout);
	return undef unless defined $l;
	return 'timeout' if $l eq "timeout $id";
	return $l if $l =~ /^error/;
	my @w = split ' ', $l;
	splice(@w, 0, 2);
	return \@w;
}

# revoke($node_path): Revoker.attemptRevoke; true when done.
sub revoke
{
	my ($self, $path) = @_;
	my $l = $self->cmd("revoke $path", qr/^revoke \Q$path\E ok$|^error revoke/);
	return defined $l && $l =~ /ok$/ ? 1 : 0;
}

sub barrier_set
{
	my ($self, $path) = @_;
	my $l = $self->cmd("barrier_set $path", qr/^barrier_set \Q$path\E$|^error barrier_set/);
	return defined $l && $l !~ /^error/ ? 1 : 0;
}

sub barrier_remove
{
	my ($self, $path) = @_;
	my $l = $self->cmd("barrier_remove $path", qr/^barrier_removed \Q$path\E$|^error barrier_remove/);
	return defined $l && $l !~ /^error/ ? 1 : 0;
}

# barrier_wait($id, $path, $ms) async; barrier_result($id): 'true'|'false'|'error ...'|undef
sub barrier_wait
{
	my ($self, $id, $path, $ms) = @_;
	$self->send("barrier_wait $id $path " . ($ms // -1));
	return;
}

sub barrier_result
{
	my ($self, $id, $timeout) = @_;
	my $l = $self->wait_reply(qr/^(barrier|error) \Q$id\E(\s|$)/, $timeout);
	return undef unless defined $l;
	return $1 if $l =~ /^barrier \Q$id\E (true|false)$/;
	return $l;
}

# denter($id, $path, $qty, $ms) / dleave($id, $ms): async double barrier
# enter / leave; entered_result / left_result: 'true'|'false'|'error ...'|undef
sub denter
{
	my ($self, $id, $path, $qty, $ms) = @_;
	$self->send("denter $id $path $qty " . ($ms // -1));
	return;
}

sub dleave
{
	my ($self, $id, $ms) = @_;
	$self->send("dleave $id " . ($ms // -1));
	return;
}

sub entered_result
{
	my ($self, $id, $timeout) = @_;
	my $l = $self->wait_reply(qr/^(entered|error) \Q$id\E(\s|$)/, $timeout);
	return undef unless defined $l;
	return $1 if $l =~ /^entered \Q$id\E (true|false)$/;
	return $l;
}

sub left_result
{
	my ($self, $id, $timeout) = @_;
	my $l = $self->wait_reply(qr/^(left|error) \Q$id\E(\s|$)/, $timeout);
	return undef unless defined $l;
	return $1 if $l =~ /^left \Q$id\E (true|false)$/;
	return $l;
}

# czxid($path): the creation zxid of $path (a decimal string), undef if absent.
sub czxid
{
	my ($self, $path) = @_;
	my $l = $self->cmd("stat $path", qr/^(stat|nonode) \Q$path\E(\s|$)|^error stat/);
	die "stat $path: " . ($l // 'no reply') unless defined $l && $l !~ /^error/;
	return undef if $l =~ /^nonode/;
	return (split ' ', $l)[2];
}

# rwparticipants($path): [full paths] of the read and write lock
# participants, merged in Curator's queue order.
sub rwparticipants
{
	my ($self, $path) = @_;
	my $l = $self->cmd("rwparticipants $path", qr/^rwparticipants \Q$path\E(\s|$)|^error rwparticipants/);
	die "rwparticipants $path: " . ($l // 'no reply') unless defined $l && $l =~ /^rwparticipants/;
	my @w = split ' ', $l;
	splice(@w, 0, 2);
	return \@w;
}

# rwloop($id, $path, $n, $seed, $hold_ms): start the read/write stress loop
# (async); rwloop_result($id, $timeout): [ [i, kind, enter_us, exit_us], ... ]
# or the error line / undef.
sub rwloop
{
	my ($self, $id, $path, $n, $seed, $hold) = @_;
	$self->send("rwloop $id $path $n $seed $hold");
	return;
}

sub rwloop_result
{
	my ($self, $id, $timeout) = @_;
	my $l = $self->wait_reply(qr/^(rwloop|error) \Q$id\E(\s|$)/, $timeout);
	return undef unless defined $l;
	return $l if $l =~ /^error/;
	# The peer prints all event lines before "rwloop ID done": they are queued.
	$self->_split;
	my (@ev, @rest);
	for my $e (@{ $self->{lines} })
	{
		if ($e =~ /^rwev \Q$id\E /)
		{
			my (undef, undef, $i, $kind, $enter, $exit) = split ' ', $e;
			push @ev, [ $i, $kind, $enter, $exit ];
		}
		else
		{
			push @rest, $e;
		}
	}
	$self->{lines} = \@rest;
	return \@ev;
}

# release($id, $kind): 'released' or the error line. Releases ID's most
# recent hold (of $kind: mutex, read, write, semmutex, lease).
sub release
{
	my ($self, $id, $kind) = @_;
	my $l = $self->cmd("release $id" . (defined $kind ? " $kind" : ''),
		qr/^(released|error) \Q$id\E(\s|$)/);
	return undef unless defined $l;
	return $l eq "released $id" ? 'released' : $l;
}

# children($path): [names sorted as strings], undef when $path does not exist.
sub children
{
	my ($self, $path) = @_;
	my $l = $self->cmd("children $path", qr/^(children|nonode|error children)\s+\Q$path\E(\s|$)|^error children/);
	die "children $path: no reply" unless defined $l;
	return undef if $l =~ /^nonode/;
	die "children $path: $l" if $l =~ /^error/;
	my @w = split ' ', $l;
	splice(@w, 0, 2);
	return \@w;
}

# participants($path): [full paths] in Curator's queue order.
sub participants
{
	my ($self, $path) = @_;
	my $l = $self->cmd("participants $path", qr/^participants \Q$path\E(\s|$)|^error participants/);
	die "participants $path: " . ($l // 'no reply') unless defined $l && $l =~ /^participants/;
	my @w = split ' ', $l;
	splice(@w, 0, 2);
	return \@w;
}

# ephemeral($path): create $path as an EPHEMERAL node of the peer's session.
sub ephemeral
{
	my ($self, $path) = @_;
	my $l = $self->cmd("ephemeral $path", qr/^ephemeral \Q$path\E$|^error ephemeral/);
	die "ephemeral $path: " . ($l // 'no reply') unless defined $l && $l =~ /^ephemeral /;
	return 1;
}

sub exists
{
	my ($self, $path) = @_;
	my $l = $self->cmd("exists $path", qr/^exists \Q$path\E |^error exists/);
	die "exists $path: " . ($l // 'no reply') unless defined $l && $l =~ /^exists/;
	return $l =~ / true$/ ? 1 : 0;
}

sub get
{
	my ($self, $path) = @_;
	my $l = $self->cmd("get $path", qr/^(data|nonode) \Q$path\E(\s|$)|^error get/);
	return undef unless defined $l && $l =~ /^data/;
	$l =~ s/^data \Q$path\E ?//;
	return $l;
}

sub delete
{
	my ($self, $path) = @_;
	return $self->cmd("delete $path", qr/^deleted \Q$path\E$|^error delete/);
}

# long_get($path): the value Curator's DistributedAtomicLong.get reads,
# undef when it could not read one.
sub long_get
{
	my ($self, $path) = @_;
	my $l = $self->cmd("long_get $path", qr/^long \Q$path\E |^error long_get/);
	return $l && $l =~ /^long \S+ true (-?\d+)$/ ? $1 : undef;
}

# count_get($path, $seed): (value, version) of Curator's SharedCount (a
# missing node is made holding $seed, 0 by default), () on an error.
sub count_get
{
	my ($self, $path, $seed) = @_;
	my $l = $self->cmd("count_get $path " . ($seed // 0), qr/^count \Q$path\E |^error count_get/);
	return $l && $l =~ /^count \S+ (-?\d+) (-?\d+)$/ ? ($1, $2) : ();
}

sub ping { my ($self) = @_; return $self->cmd('ping', qr/^pong$/, 10); }

# quit(): close Curator (its session and nodes go at once) and wait (bounded).
sub quit
{
	my ($self) = @_;
	return if $self->{closed};
	$self->{closed} = 1;
	$self->{in} .= "quit\n";
	$self->{timer}->start(20);
	eval { $self->{h}->finish; 1 } or eval { $self->{h}->kill_kill; };
	return;
}

sub DESTROY
{
	my ($self) = @_;
	local ($@, $?);
	eval { $self->{h}->kill_kill if !$self->{closed} && $self->{h}->pumpable; };
}

1;

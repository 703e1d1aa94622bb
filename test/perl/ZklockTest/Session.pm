############################################################################
# ZklockTest::Session — a psql session for holders and waiters
############################################################################
#
#   my $s = ZklockTest::Session->new($node, 'name');
#   my $s = ZklockTest::Session->new($node, 'name', dbname => 'a', user => 'app');
#   $s->pid;                              backend pid
#   my $r = $s->query($sql);              run and wait (bounded)
#   $s->start($sql); ... $r = $s->result; leave a statement running, collect later
#   $r = { out => stdout, err => stderr, sqlstate => ..., done => 1, dead => 0|1 }
#
# psql runs with -XAtq, ON_ERROR_STOP off and VERBOSITY=verbose so that
# errors carry their SQLSTATE and the session survives them.
package ZklockTest::Session;

use strict;
use warnings;
use IPC::Run;
use Test::More;
use Time::HiRes qw(time);

sub new
{
	my ($class, $node, $name, %opts) = @_;
	my $self = bless {
		node => $node,
		name => $name // 'session',
		in => '',
		out => '',
		err => '',
		n => 0,
		pending => undef,
	}, $class;
	local %ENV = $node->_get_env();
	$self->{timer} = IPC::Run::timer($ZklockTest::DEFAULT_TIMEOUT);
	$self->{h} = IPC::Run::start(
		[
			$node->installed_command('psql'), '-XAtq',
			'-v', 'ON_ERROR_STOP=0',
			'-v', 'VERBOSITY=verbose',
			'-v', "PROMPT1=", '-d', $node->connstr($opts{dbname} // 'postgres')
			  . (defined $opts{user} ? " user=$opts{user}" : '')
			  . " application_name=$self->{name}",
			'-f', '-'
		],
		'<', \$self->{in}, '>', \$self->{out}, '2>', \$self->{err},
		$self->{timer});
	my $r = $self->query('SELECT pg_backend_pid()');
	die "session $self->{name}: could not connect: $r->{err}"
	  unless $r->{done} && $r->{out} =~ /^(\d+)$/;
	$self->{pid} = $1;
	return $self;
}

sub pid { return $_[0]{pid}; }
sub name { return $_[0]{name}; }

# start($sql): send $sql and return at once; the statement may block.
sub start
{
	my ($self, $sql) = @_;
	die "session $self->{name}: a statement is still pending" if defined $self->{pending};
	my $n = ++$self->{n};
	my $banner = "__zklock_done_$self->{name}_$n";
	$self->{pending} = $banner;
	Test::More::note("[$self->{name} pid " . ($self->{pid} // '?') . "] $sql");
	$self->{in} .= "$sql\n;\n\\echo $banner\n\\warn $banner\n";
	eval { $self->{h}->pump_nb; };
	return;
}

# done(): true when the pending statement has finished (or psql died).
sub done
{
	my ($self) = @_;
	return 1 unless defined $self->{pending};
	eval { $self->{h}->pump_nb if $self->{h}->pumpable; };
	my $b = $self->{pending};
	# the banner's whole line: a banner read without its newline yet would
	# stay in the output
	return 1 if $self->{out} =~ /^$b\n/m && $self->{err} =~ /^$b\n/m;
	return 1 unless $self->{h}->pumpable;
	return 0;
}

# result($timeout): wait (bounded) for the pending statement; returns
# { out, err, sqlstate, done, dead }. done = 0 means it is still running
# after $timeout seconds (it stays pending: call result again later).
sub result
{
	my ($self, $timeout) = @_;
	my $b = $self->{pending};
	die "session $self->{name}: nothing pending" unless defined $b;
	$timeout //= $ZklockTest::DEFAULT_TIMEOUT;
	$self->{timer}->start($timeout);
	my $finished = sub {
		$self->{out} =~ /^$b\n/m && $self->{err} =~ /^$b\n/m;
	};
	while (!$finished->() && $self->{h}->pumpable && !$self->{timer}->is_expired)
	{
		eval { $self->{h}->pump; };
		last if $@ && !$self->{h}->pumpable;
	}
	my $done = $finished->();
	my $dead = !$done && !$self->{h}->pumpable;
	if (!$done && !$dead)
	{
		return { done => 0, dead => 0, out => $self->{out}, err => $self->{err} };
	}
	my ($out, $err) = ($self->{out}, $self->{err});
	$out =~ s/\n?^$b\n//m;
	$err =~ s/\n?^$b\n//m;
	chomp $out;
	$self->{out} = $self->{err} = '';
	$self->{pending} = undef;
	Test::More::note("[$self->{name}] -> out=[$out] err=[$err]" . ($dead ? ' (psql exited)' : ''));
	return {
		done => 1,
		dead => $dead ? 1 : 0,
		out => $out,
		err => $err,
		sqlstate => ZklockTest::sqlstate_of($err),
	};
}

# query($sql, $timeout): start + result. Dies if the statement does not
# finish within $timeout (a hang is a test failure, not a wait forever).
sub query
{
	my ($self, $sql, $timeout) = @_;
	$self->start($sql);
	my $r = $self->result($timeout);
	die "session $self->{name}: [$sql] did not finish within "
	  . ($timeout // $ZklockTest::DEFAULT_TIMEOUT) . "s"
	  unless $r->{done};
	return $r;
}

# value($sql): query and return stdout; dies on an error.
sub value
{
	my ($self, $sql, $timeout) = @_;
	my $r = $self->query($sql, $timeout);
	die "session $self->{name}: [$sql] failed: $r->{err}" if $r->{err} =~ /ERROR|FATAL/;
	return $r->{out};
}

# alive(): psql still running (its backend was not terminated).
sub alive
{
	my ($self) = @_;
	eval { $self->{h}->pump_nb if $self->{h}->pumpable; };
	return $self->{h}->pumpable ? 1 : 0;
}

# quit(): end psql (and so the backend) normally; bounded.
sub quit
{
	my ($self) = @_;
	return if $self->{closed};
	$self->{closed} = 1;
	if ($self->{h}->pumpable)
	{
		$self->{in} .= "\\q\n";
		$self->{timer}->start(15);
		eval { $self->{h}->finish; 1 } or eval { $self->{h}->kill_kill; };
	}
	else
	{
		eval { $self->{h}->finish; };
	}
	return;
}

sub DESTROY
{
	my ($self) = @_;
	local ($@, $?);
	eval { $self->{h}->kill_kill if !$self->{closed} && $self->{h}->pumpable; };
}

1;

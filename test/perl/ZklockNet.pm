
# ZklockNet — a 3-server ZooKeeper ensemble whose servers each live in
# their own network namespace, so that a test can cut the servers off from
# one another (quorum and election traffic) while every client keeps its
# connection, as happens when a follower loses its leader but not its
# clients.  For zklock's TAP tests; built on ZklockTest and ZklockFault.
#
# The network.  A test file that uses this module first re-executes itself
# inside private user, network and mount namespaces:
#
#   use strict;
#   use warnings;
#   BEGIN { require ZklockNet; ZklockNet::enter_private_network(); }
#   use ZklockTest; use ZklockFault; use ZklockNet; ...
#
# enter_private_network() runs `unshare --user --map-current-user --net
# --mount --keep-caps` and execs the same test there (same pid, same
# arguments, @INC passed on in PERL5LIB).  The user id stays what it was
# (initdb and postgres refuse root, and they see no change), and the test
# holds CAP_NET_ADMIN and CAP_SYS_ADMIN over its own namespaces only: it can
# make interfaces, routes and nftables rules there and nowhere else.  That
# namespace, the "test namespace", brings lo up and routes between its
# interfaces (ip_forward); PostgreSQL, the Curator peers and the test run
# there.  Each ZooKeeper server k runs in a network namespace of its own,
# nested in it (a "holder" process made by `unshare --net`, the server
# started there with `nsenter --net=/proc/HOLDER/ns/net`: /run/netns is not
# writable, and nothing here needs a name), joined to the test namespace by
# a veth pair:
#
#   test namespace                       server k's namespace
#   zkvK 10.201.K.1/24  <--- veth --->   eth0 10.201.K.2/24, default via .1
#
# Every server listens on its own address, ports 2181 (clients), 2888
# (quorum) and 3888 (election): no free-port races, and the test reaches
# every client port directly.  Traffic between two servers crosses the
# test namespace's FORWARD hook, client traffic (from the test namespace
# to a server) does not: isolate_member($e) adds the server's interface to
# an nftables set whose members' forwarded packets are dropped (both ways),
# which cuts the server off from the other servers and from nobody else;
# heal_member($e) takes it out again.  The rules live in table
# "inet zklock_net" of the test namespace.
#
# Where it works.  Unprivileged user namespaces (Debian 12 and 13 allow
# them by default).  Not inside a chroot: the kernel refuses a new user
# namespace to a chrooted process (EPERM), which is why test/debian-root.sh
# enters its root with pivot_root.  When the namespaces cannot be made, the
# test reports one failing test point saying why (it is not skipped).
#
# Nothing is left behind.  Every process this module starts (the holders
# and the servers) gets SIGKILL from the kernel when the test process ends
# however it ends (setpriv --pdeathsig), a server's namespace goes with its
# last process and its veth pair with it, and the test namespace, with its
# interfaces and nftables rules, goes with the last process in it.
# stop_netns_ensemble() and an END block also stop them explicitly.  Every
# wait is bounded.
#
# What this module gives:
#   enter_private_network()     re-exec the test in its own namespaces (see above)
#   start_netns_ensemble(%opts) start the ensemble; returns the connect string
#                               of all servers once one leads and the others
#                               follow.  Options: tick (tickTime, ms, default
#                               500), sync_limit (default 5), init_limit
#                               (default 10), servers (default 3)
#   netns_members()             the servers: { id, ip, port, connect ("ip:port"),
#                               pid (undef while stopped), holder, dir, ifname }
#   netns_member($id)           one of them
#   netns_connect(@ids)         connect string of those servers (all without @ids)
#   netns_modes()               { id => 'leader' | 'follower' | undef } (srvr)
#   netns_mode($e)              one server's mode
#   netns_leader()              the leader's member hash, or undef
#   netns_followers()           the members that say 'follower'
#   isolate_member($e) / heal_member($e) / heal_all()
#                               cut a server off from the others (quorum and
#                               election traffic), and back; clients untouched
#   isolated_members()          the members cut off now
#   netns_dropped()             packets the cuts have dropped so far (all of
#                               them: a number above the one read before a
#                               cut says that cut bit)
#   kill_netns_member($e, $sig) signal one server (default KILL) and reap it
#   restart_netns_member($e, $timeout)
#                               start a stopped server again (same address and
#                               data); true once it serves (0: start only)
#   stop_netns_ensemble()       stop every server and holder, drop the rules
#   netns_log_tail($e, $n)      the last $n lines of a server's log
package ZklockNet;

use strict;
use warnings;

use Cwd qw(abs_path);
use POSIX ();
use Time::HiRes qw(time usleep);

use Exporter 'import';
our @EXPORT = qw(
  enter_private_network start_netns_ensemble netns_members netns_member
  netns_connect netns_modes netns_mode netns_leader netns_followers
  isolate_member heal_member heal_all isolated_members netns_dropped
  kill_netns_member restart_netns_member stop_netns_ensemble netns_log_tail
);

my @UNSHARE = ('unshare', '--user', '--map-current-user', '--net', '--mount', '--keep-caps');
my $INNER_ENV = 'ZKLOCK_NETNS_TEST';
my $SUBNET = '10.201';          # server k: $SUBNET.k.2, its gateway $SUBNET.k.1
my $TABLE = 'zklock_net';       # nftables table (family inet) of the test namespace
my $CLIENT_PORT = 2181;
my $inside = 0;                 # set once this process runs in its namespaces

############################################################################
# The test namespace
############################################################################

# _tap_fail($why): the test cannot run here; say so as TAP and end.
sub _tap_fail
{
	my ($why) = @_;
	$why =~ s/\s+$//;
	$why =~ s/\n/\n# /g;
	print "1..1\nnot ok 1 - a private network namespace for the test (unshare --user --net)\n# $why\n";
	exit 1;
}

sub _standard_path
{
	my %have = map { $_ => 1 } split /:/, ($ENV{PATH} // '');
	$ENV{PATH} = join(':', ($ENV{PATH} // ()), grep { !$have{$_} } qw(/usr/sbin /usr/bin /sbin /bin));
	return;
}

# enter_private_network(): re-execute this test inside new user, network
# and mount namespaces (nothing happens when it already runs there), then
# set the test namespace up: lo up, forwarding on.  Call it from a BEGIN
# block before anything starts (it execs).  Under perl -c it does nothing.
sub enter_private_network
{
	return 0 if $^C;    # perl -c: compile only, start nothing
	_standard_path();
	if (($ENV{$INNER_ENV} // '') eq "$$")
	{
		delete $ENV{$INNER_ENV};
		_setup_test_namespace();
		$inside = 1;
		return 1;
	}
	# can this user make the namespaces here?  (EPERM in a chroot, or where
	# unprivileged user namespaces are switched off)
	my $probe = `@UNSHARE -- true 2>&1`;
	_tap_fail("'@UNSHARE' fails here: $probe(unprivileged user namespaces off, or a chroot?)")
	  if $? != 0;
	$ENV{$INNER_ENV} = "$$";    # unshare execs: the pid stays
	$ENV{PERL5LIB} = join(':', grep { !ref $_ } @INC);
	my $script = abs_path($0) // $0;
	exec(@UNSHARE, '--', $^X, $script, @ARGV)
	  or _tap_fail("exec unshare: $!");
	return 0;
}

sub _setup_test_namespace
{
	my @links = `ip -o link show 2>&1`;
	_tap_fail("not in a new network namespace: @links") if $? != 0 || @links != 1;
	_run_or_fail([ 'ip', 'link', 'set', 'lo', 'up' ]);
	open(my $fh, '>', '/proc/sys/net/ipv4/ip_forward')
	  or _tap_fail("cannot switch on forwarding in the test namespace: $!");
	print $fh "1\n";
	close $fh or _tap_fail("cannot switch on forwarding in the test namespace: $!");
	return;
}

sub _run_or_fail
{
	my ($cmd) = @_;
	my $out = `@$cmd 2>&1`;
	_tap_fail("@$cmd: $out") if $? != 0;
	return;
}

############################################################################
# Commands (bounded)
############################################################################

# _run(\@cmd, $stdin): run a command with a 20 s bound; dies with its
# output when it fails.  Returns its stdout.
sub _run
{
	my ($cmd, $in) = @_;
	require IPC::Run;
	my ($out, $err) = ('', '');
	my $ok = eval {
		IPC::Run::run($cmd, '<', \($in // ''), '>', \$out, '2>', \$err, IPC::Run::timeout(20));
	};
	die "ZklockNet: '@$cmd' failed: " . ($@ || "exit " . ($? >> 8)) . " $out $err\n" unless $ok;
	return $out;
}

sub _nft { my ($script) = @_; return _run([ 'nft', '-f', '-' ], $script); }

sub _in_ns
{
	my ($e, @cmd) = @_;
	return _run([ 'nsenter', "--net=/proc/$e->{holder}/ns/net", '--', @cmd ]);
}

# _spawn($log, @cmd): fork and exec @cmd in a session of its own, stdin
# from /dev/null, output to $log, with SIGKILL from the kernel should this
# process end first (setpriv --pdeathsig).  Returns the pid.
sub _spawn
{
	my ($log, @cmd) = @_;
	my $pid = fork();
	die "ZklockNet: fork: $!" unless defined $pid;
	if ($pid == 0)
	{
		POSIX::setsid();
		open(STDIN, '<', '/dev/null');
		open(STDOUT, '>>', $log);
		open(STDERR, '>&', \*STDOUT);
		exec('setpriv', '--pdeathsig', 'KILL', '--', @cmd) or POSIX::_exit(127);
	}
	return $pid;
}

sub _reap
{
	my ($pid, $timeout) = @_;
	my $end = time + $timeout;
	while (time < $end)
	{
		my $r = waitpid($pid, POSIX::WNOHANG());
		return 1 if $r == $pid || $r == -1;
		usleep(20_000);
	}
	return 0;
}

sub _stop_pid
{
	my ($pid, $sig) = @_;
	return unless $pid;
	kill($sig // 'TERM', $pid);
	return if _reap($pid, 15);
	kill('KILL', $pid);
	_reap($pid, 5);
	return;
}

############################################################################
# The ensemble
############################################################################

my @members;
my %isolated;    # id => 1 while cut off
my $nft_ready = 0;

sub _member_ip { my ($id) = @_; return "$SUBNET.$id.2"; }

sub _ns_of { my ($pid) = @_; return readlink("/proc/$pid/ns/net") // ''; }

# _make_holder($e): a process in a new network namespace, a veth pair
# between it and the test namespace, addresses and routes.
sub _make_holder
{
	my ($e) = @_;
	my $self_ns = _ns_of($$);
	$e->{holder} = _spawn("$e->{dir}/holder.log", 'unshare', '--net', '--', 'sleep', 'infinity');
	my $end = time + 10;
	usleep(10_000) while time < $end && !(_ns_of($e->{holder}) ne '' && _ns_of($e->{holder}) ne $self_ns
		&& (readlink("/proc/$e->{holder}/exe") // '') =~ m{/sleep$});
	die "ZklockNet: the namespace holder of server $e->{id} did not start (see $e->{dir}/holder.log)\n"
	  unless _ns_of($e->{holder}) ne $self_ns;
	my ($if, $gw, $ip) = ($e->{ifname}, "$SUBNET.$e->{id}.1", $e->{ip});
	_run([ 'ip', 'link', 'add', $if, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', $e->{holder} ]);
	_run([ 'ip', 'addr', 'add', "$gw/24", 'dev', $if ]);
	_run([ 'ip', 'link', 'set', $if, 'up' ]);
	_in_ns($e, 'sh', '-c',
		"ip link set lo up && ip addr add $ip/24 dev eth0 && ip link set eth0 up && ip route add default via $gw");
	return;
}

sub _launch
{
	my ($e) = @_;
	$e->{pid} = _spawn(
		"$e->{dir}/zk.log",
		'nsenter', "--net=/proc/$e->{holder}/ns/net", '--',
		'java', '-Xmx192m',
		'-Dzookeeper.admin.enableServer=false',
		'-Dzookeeper.jmx.log4j.disable=true',
		# a server cut off keeps trying to reach the others: short connect
		# attempts and notification rounds, so it is back soon after a heal
		'-Dzookeeper.cnxTimeout=1000',
		'-Dzookeeper.fastleader.maxNotificationInterval=1000',
		'-cp', $ENV{ZK_JAR} // '/usr/share/java/zookeeper.jar',
		'org.apache.zookeeper.server.quorum.QuorumPeerMain',
		"$e->{dir}/zoo.cfg");
	Test::More::note("ZooKeeper server $e->{id} (netns): pid $e->{pid}, $e->{connect}");
	return;
}

sub start_netns_ensemble
{
	my (%o) = @_;
	my $n = $o{servers} // 3;
	my $tick = $o{tick} // 500;
	my $sync = $o{sync_limit} // 5;
	my $init = $o{init_limit} // 10;
	die "ZklockNet: an ensemble runs already\n" if @members;
	die "ZklockNet: not in the test's own namespaces (call enter_private_network in BEGIN)\n"
	  unless $inside;
	_deps();
	my $base = PostgreSQL::Test::Utils::tempdir('netzk');
	for my $id (1 .. $n)
	{
		push @members, {
			id => $id,
			ip => _member_ip($id),
			port => $CLIENT_PORT,
			connect => _member_ip($id) . ":$CLIENT_PORT",
			ifname => "zkv$id",
			dir => "$base/zk$id",
		};
	}
	_nft(qq{table inet $TABLE {
	set isolated { type ifname; }
	chain partition {
		type filter hook forward priority 0; policy accept;
		iifname \@isolated counter drop
		oifname \@isolated counter drop
	}
}
});
	$nft_ready = 1;
	my $servers = join('', map { "server.$_->{id}=$_->{ip}:2888:3888\n" } @members);
	for my $e (@members)
	{
		File::Path::make_path("$e->{dir}/data");
		PostgreSQL::Test::Utils::append_to_file("$e->{dir}/data/myid", "$e->{id}\n");
		PostgreSQL::Test::Utils::append_to_file(
			"$e->{dir}/zoo.cfg", qq{tickTime=$tick
initLimit=$init
syncLimit=$sync
dataDir=$e->{dir}/data
clientPort=$CLIENT_PORT
clientPortAddress=$e->{ip}
admin.enableServer=false
4lw.commands.whitelist=*
maxSessionTimeout=120000
maxClientCnxns=0
$servers});
		_make_holder($e);
	}
	_launch($_) for @members;
	my $ok = ZklockTest::wait_until(
		sub {
			my $m = netns_modes();
			(grep { defined $m->{ $_->{id} } } @members) == $n
			  && (grep { ($m->{ $_->{id} } // '') eq 'leader' } @members) == 1;
		},
		90, "a $n-server ensemble (one server per network namespace) to form");
	unless ($ok)
	{
		Test::More::diag("zk$_->{id} log tail:\n" . netns_log_tail($_, 15)) for @members;
		Test::More::BAIL_OUT('ZooKeeper ensemble (network namespaces) did not form');
	}
	my $m = netns_modes();
	Test::More::note("ensemble (tickTime $tick, syncLimit $sync): "
		  . join(', ', map { "$_->{id}=$_->{connect} " . ($m->{ $_->{id} } // '?') } @members));
	return netns_connect();
}

sub netns_members { return @members; }

sub netns_member
{
	my ($id) = @_;
	my ($e) = grep { $_->{id} == $id } @members;
	die "ZklockNet: no server $id\n" unless $e;
	return $e;
}

sub netns_connect
{
	my (@ids) = @_;
	my @which = @ids ? map { netns_member($_) } @ids : @members;
	return join(',', map { $_->{connect} } @which);
}

sub netns_mode
{
	my ($e) = @_;
	return undef unless $e->{pid};
	my $a = ZklockFault::four_letter($e->{connect}, 'srvr');
	return $a =~ /^Mode: (leader|follower|standalone)/m ? $1 : undef;
}

sub netns_modes { return { map { $_->{id} => netns_mode($_) } @members }; }

sub netns_leader
{
	my $m = netns_modes();
	my ($l) = grep { ($m->{ $_->{id} } // '') eq 'leader' } @members;
	return $l;
}

sub netns_followers
{
	my $m = netns_modes();
	return grep { ($m->{ $_->{id} } // '') eq 'follower' } @members;
}

sub isolate_member
{
	my ($e) = @_;
	_nft(qq{add element inet $TABLE isolated { "$e->{ifname}" }\n});
	$isolated{ $e->{id} } = 1;
	Test::More::note("server $e->{id} cut off from the other servers (its clients keep their link)");
	return;
}

sub heal_member
{
	my ($e) = @_;
	return unless $isolated{ $e->{id} };
	_nft(qq{delete element inet $TABLE isolated { "$e->{ifname}" }\n});
	delete $isolated{ $e->{id} };
	Test::More::note("server $e->{id} reaches the other servers again");
	return;
}

sub heal_all { heal_member($_) for grep { $isolated{ $_->{id} } } @members; return; }

sub isolated_members { return grep { $isolated{ $_->{id} } } @members; }

# netns_dropped(): packets the cuts have dropped so far, every server's
# together (the counters of the two rules).
sub netns_dropped
{
	my $rules = _run([ 'nft', 'list', 'chain', 'inet', $TABLE, 'partition' ]);
	my $n = 0;
	$n += $1 while $rules =~ /counter packets (\d+)/g;
	return $n;
}

sub kill_netns_member
{
	my ($e, $sig) = @_;
	return unless $e->{pid};
	my $pid = $e->{pid};
	_stop_pid($pid, $sig // 'KILL');
	$e->{pid} = undef;
	Test::More::note("ZooKeeper server $e->{id} (pid $pid) stopped by " . ($sig // 'KILL'));
	return;
}

sub restart_netns_member
{
	my ($e, $timeout) = @_;
	die "ZklockNet: server $e->{id} still runs (pid $e->{pid})\n" if $e->{pid};
	_launch($e);
	return 1 if defined $timeout && $timeout == 0;
	my $ok = ZklockTest::wait_until(sub { defined netns_mode($e) }, $timeout // 60,
		"server $e->{id} to serve again");
	Test::More::diag("zk$e->{id} log tail:\n" . netns_log_tail($e, 15)) unless $ok;
	return $ok ? 1 : 0;
}

sub netns_log_tail
{
	my ($e, $n) = @_;
	open(my $fh, '<', "$e->{dir}/zk.log") or return '';
	my @l = <$fh>;
	close $fh;
	$n //= 20;
	return join('', @l > $n ? @l[ -$n .. -1 ] : @l);
}

sub stop_netns_ensemble
{
	for my $e (@members)
	{
		kill_netns_member($e, 'TERM') if $e->{pid};
	}
	for my $e (@members)
	{
		_stop_pid($e->{holder}, 'KILL') if $e->{holder};
		$e->{holder} = undef;
		# the veth pair went with the holder's namespace
		system("ip link del $e->{ifname} >/dev/null 2>&1");
	}
	if ($nft_ready)
	{
		eval { _run([ 'nft', 'delete', 'table', 'inet', $TABLE ]) };
		$nft_ready = 0;
	}
	%isolated = ();
	@members = ();
	return;
}

END
{
	local ($?, $@);
	for my $e (@members)
	{
		kill('KILL', $e->{pid}) if $e->{pid};
		kill('KILL', $e->{holder}) if $e->{holder};
	}
	if ($nft_ready)
	{
		system("nft delete table inet $TABLE >/dev/null 2>&1");
	}
}

# What the ensemble needs, loaded once the test runs in its namespaces
# (enter_private_network execs before anything heavy is loaded).
sub _deps
{
	require File::Path;
	require Test::More;
	require PostgreSQL::Test::Utils;
	require ZklockTest;
	require ZklockFault;
	return;
}

1;


# ZklockFault — helpers for zklock's fault-injection and security TAP tests
# (test/t/2xx-9xx), on top of ZklockTest.
#
#   zktool(@args)                 run test/java/ZkTool.java (plain ZooKeeper
#                                 client: expire a session, list a tree, stat,
#                                 ACL, delete without credentials, Curator
#                                 hammer loops); returns ($rc, [lines])
#   zk_tree($connect, $path)      [every node under $path], undef on error
#   zk_stat($connect, $path)      { czxid, owner, children } or undef (no node)
#   session_file($node)           ($id_hex16, $passwd_hex32) from
#                                 $PGDATA/zklock.session, () when absent
#   expire_session($connect, $id, $pw)
#                                 close that session from a second handle
#   four_letter($hostport, $cmd)  a ZooKeeper four-letter word's answer
#   start_ensemble($n, %opts) / ensemble_connect / ensemble_leader /
#   kill_ensemble_member / stop_ensemble
#                                 an $n-node ZooKeeper ensemble on 127.0.0.1
#                                 (observers => $k: $k more, as observers)
#   ensemble_members()            the servers of that ensemble ({ id, pid,
#                                 client }; pid undef while stopped)
#   restart_ensemble_member($e, $timeout)
#                                 start a stopped server again (same port, same
#                                 data); true once it serves again (timeout 0:
#                                 start only)
#   hold_for($seconds, $what)     keep an injected fault in place on purpose
#   reconnect_after($node, $proxy, $how, $s0)
#                                 after a black hole: cut or worker restart,
#                                 then connected again in session $s0
#   log_contents($node)           the server log of a cluster
#   status_row($node)             zk_status() as a hash
#   row_from_json($text)          a row_to_json() object as a hash
#   quietly($code)                run $code without the notes ZklockTest's
#                                 sessions and peers write for every
#                                 statement (the caller's own note/diag,
#                                 bound at import, still print)
#   wait_back($node, $timeout, $log_from)
#                                 poll until the cluster accepts queries again
#                                 (after a crash-restart: pass the log's size
#                                 taken before the kill)
#   drop_create_reply(...)        a create whose reply the proxy drops
#   drop_set_reply($proxy, $session, $sql)
#                                 a setData whose reply the proxy drops
package ZklockFault;

use strict;
use warnings;

use ZklockTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use IPC::Run;
use IO::Socket::INET;
use IO::Select;
use POSIX ();
use File::Path qw(make_path);
use Time::HiRes qw(time usleep);
use Test::More;

use Exporter 'import';
our @EXPORT = qw(
  zktool zk_tree zk_stat zk_acl zk_sessions session_file expire_session four_letter
  start_ensemble ensemble_connect ensemble_leader ensemble_modes
  kill_ensemble_member stop_ensemble ensemble_members restart_ensemble_member
  hold_for log_contents status_row wait_back status_has_column
  drop_create_reply drop_set_reply row_from_json quietly reconnect_after
  stranger_noauth_ok same_identity_shares_ok creator_acl_ok
);

############################################################################
# ZkTool (test/java/ZkTool.java)
############################################################################

# zktool(@args): run ZkTool with @args (bounded by $opts{timeout}, default
# 60 s when the last argument is a hash ref { timeout => N }). Returns
# ($rc, [stdout lines], $stderr). A timeout gives rc -1.  Netty is on the
# class path: with the Java client's TLS properties in JAVA_TOOL_OPTIONS it
# talks to a secureClientPort.
sub zktool
{
	my @args = @_;
	my $opts = ref $args[-1] eq 'HASH' ? pop @args : {};
	my $dir = ZklockTest::java_classes();
	my ($out, $err) = ('', '');
	my $ok = eval {
		IPC::Run::run(
			[
				'java', '-Xmx128m', '-cp',
				"$dir:$ZklockTest::CURATOR_JAR:$ZklockTest::NETTY_JARS",
				'ZkTool', @args
			],
			'>', \$out, '2>', \$err, IPC::Run::timeout($opts->{timeout} // 60));
		1;
	};
	my $rc = $ok ? $? >> 8 : -1;
	my @lines = split /\n/, $out;
	note("zktool @args[0..($#args < 2 ? $#args : 2)] -> rc $rc: "
		  . join(' | ', @lines > 6 ? (@lines[0 .. 5], '...') : @lines));
	return ($rc, \@lines, $err);
}

# zk_tree($connect, $path): [all node paths under $path, $path included,
# /zookeeper skipped]; undef when ZkTool failed.
sub zk_tree
{
	my ($c, $path) = @_;
	my ($rc, $lines, $err) = zktool('tree', $c, $path // '/');
	return undef unless $rc == 0 && @$lines && $lines->[-1] =~ /^end \d+$/;
	return [ @$lines[ 0 .. $#$lines - 1 ] ];
}

# zk_sessions($quorum, @data_dirs): ZooKeeper's own record of its sessions,
# read from the servers' transaction logs (ZkTool sessions): { '0x<16 hex>'
# => { created => ms, timeout => ms, ended => ms, cxid => n } }, ended the
# leader's wall clock when it proposed the session's closeSession (an
# expiry has cxid 0, a close by a client its own), absent while the
# session lives.  A transaction counts when $quorum of the logs hold it
# (2 of an ensemble of 3).  Dies when ZkTool fails.
sub zk_sessions
{
	my ($quorum, @dirs) = @_;
	my ($rc, $lines, $err) = zktool('sessions', $quorum, @dirs);
	die "zktool sessions failed: @$lines $err" unless $rc == 0 && @$lines && $lines->[-1] =~ /^end \d+$/;
	my %s;
	for (@$lines)
	{
		if (/^create (0x[0-9a-f]{16}) (\d+) [0-9a-f]+ (-?\d+)$/) { $s{$1}{created} = $2; $s{$1}{timeout} = $3; }
		elsif (/^close (0x[0-9a-f]{16}) (\d+) [0-9a-f]+ (-?\d+)$/) { $s{$1}{ended} //= $2; $s{$1}{cxid} //= $3; }
	}
	return \%s;
}

# zk_stat($connect, $path): { czxid, owner (0x...), children } | undef (no node)
sub zk_stat
{
	my ($c, $path) = @_;
	my ($rc, $lines, $err) = zktool('stat', $c, $path);
	die "zktool stat $path failed: @$lines $err" unless $rc == 0;
	return undef if $lines->[0] =~ /^nonode /;
	my %h = $lines->[0] =~ /(\w+)=(\S+)/g;
	return { czxid => $h{czxid}, owner => $h{ephemeralOwner}, children => $h{numChildren} };
}

# zk_acl($connect, $path, $auth): the ACL line's entries
# ["digest:user:hash:rwcda", ...], undef when there is no such node,
# 'noauth' when reading the ACL needs credentials ($auth: "user:password").
sub zk_acl
{
	my ($c, $path, $auth) = @_;
	my ($rc, $lines, $err) = zktool('acl', $c, $path, defined $auth ? ($auth) : ());
	die "zktool acl $path failed: @$lines $err" unless $rc == 0;
	return undef if $lines->[0] =~ /^nonode /;
	return 'noauth' if $lines->[0] =~ /^noauth /;
	my @w = split ' ', $lines->[0];
	splice(@w, 0, 2);
	return \@w;
}

# stranger_noauth_ok($peer, $lock_path, $lock_node, $who): a Curator peer
# of another identity ($who) gets NoAuth listing the lock path (ZooKeeper
# path), deleting the lock node or writing into it (zklock.acl = creator)
sub stranger_noauth_ok
{
	my ($peer, $lock_path, $lock_node, $who) = @_;
	my $listing = $peer->cmd("children $lock_path", qr/^(?:children|error children|nonode) /) // '';
	Test::More::like($listing, qr/NoAuth/i, "$who cannot list the lock path ($listing)");
	my $d = $peer->delete($lock_node) // '';
	Test::More::like($d, qr/^error.*NoAuth/i, "$who cannot delete the lock node ($d)");
	my $w = $peer->cmd("set $lock_node __REVOKE__", qr/^(?:set|error set|nonode) /) // '';
	Test::More::like($w, qr/NoAuth/i, "$who cannot write into it ($w)");
	return;
}

# same_identity_shares_ok($node, $s, $path, $lock_path, $peer, $who): while
# session $s holds $path (ZooKeeper path $lock_path), a Curator peer of
# zklock's identity ($who) queues behind it, gets the lock when $s
# releases, excludes $s, and may delete the node $s then takes (cleanup);
# $s holds $path at the end
sub same_identity_shares_ok
{
	my ($node, $s, $path, $lock_path, $peer, $who) = @_;
	$peer->acquire('same1', $lock_path, 20000);
	Test::More::ok(ZklockTest::wait_until(sub { @{ $peer->children($lock_path) // [] } == 2 }, 10),
		"$who queues behind SQL");
	Test::More::is($s->value("SELECT zk_mutex_release('$path')"), 't', 'SQL releases');
	Test::More::is($peer->acquire_result('same1'), 'acquired', "$who gets the lock");
	Test::More::is($s->value("SELECT zk_mutex_acquire('$path', '700ms')"), 'f', 'SQL times out while it holds');
	Test::More::is($peer->release('same1'), 'released', 'it releases');
	Test::More::is($s->value("SELECT zk_mutex_acquire('$path', '10s')"), 't', 'SQL acquires again');
	my $name = $node->safe_psql('postgres', "SELECT node FROM zk_locks WHERE path = '$path'");
	my $d = $peer->delete("$lock_path/$name") // '';
	Test::More::is($d, "deleted $lock_path/$name", "$who may delete zklock's node (clean up)");
	return;
}

# creator_acl_ok(%a): with zklock.acl = 'creator' and the identity $a{id}
# (sasl:...), session $a{s} of $a{node} takes $a{path} (ZooKeeper path
# $a{lock_path} of server $a{zk}); its lock node, the lock path and the top
# node above read $a{id}:rwcda and nothing else, as ZkTool logged in as
# that identity reads them (the Java client's options @{$a{same_jvm}}); a
# client of another identity (@{$a{other_jvm}}) cannot read the lock
# node's ACL, nor list, delete or write (Curator peer $a{other}, named
# $a{other_who}); one of the same identity ($a{same}, $a{same_who}) shares
# the path (same_identity_shares_ok: $s holds $path at the end) (214, 217)
sub creator_acl_ok
{
	my (%a) = @_;
	my ($node, $s, $path, $lock_path) = @a{qw(node s path lock_path)};
	Test::More::is($s->value("SELECT zk_mutex_acquire('$path', '10s')"), 't', "SQL acquires $path");
	my $name = $node->safe_psql('postgres', "SELECT node FROM zk_locks WHERE path = '$path'");
	Test::More::like($name, qr/^_c_.*-lock-\d{10}$/, 'zk_locks names its node');
	my $lock_node = "$lock_path/$name";
	my ($top) = $lock_path =~ m{^(/[^/]+)};
	my $acl_as = sub {
		my ($jvm, $p) = @_;
		local $ENV{JAVA_TOOL_OPTIONS} = join(' ', @$jvm);
		return zk_acl($a{zk}, $p);
	};
	for my $p ($lock_node, $lock_path, $top)
	{
		my $acl = $acl_as->($a{same_jvm}, $p);
		Test::More::is(ref $acl ? "@$acl" : $acl // 'none', "$a{id}:rwcda", "$p is $a{id} only");
	}
	Test::More::is($acl_as->($a{other_jvm}, $lock_node), 'noauth', 'another identity cannot even read its ACL');
	stranger_noauth_ok($a{other}, $lock_path, $lock_node, $a{other_who});
	Test::More::is(ref $acl_as->($a{same_jvm}, $lock_node), 'ARRAY', 'the lock node is still there');
	same_identity_shares_ok($node, $s, $path, $lock_path, $a{same}, $a{same_who});
	return;
}

# session_file($node): the worker's session id and password as the lead
# writes them to $PGDATA/zklock.session ("<16 hex> <32 hex>"); () if absent.
sub session_file
{
	my ($node) = @_;
	my $f = $node->data_dir . '/zklock.session';
	return () unless -f $f;
	open(my $fh, '<', $f) or return ();
	my $line = <$fh>;
	close $fh;
	return () unless defined $line && $line =~ /^\s*(?:0x)?([0-9a-fA-F]{16})\s+([0-9a-fA-F]{32})\s*$/;
	return (lc $1, lc $2);
}

# expirer($connect): a Curator peer connected to $connect that closes
# sessions for expire_session, started on first use and kept.  A session
# is closed from a running JVM within a fraction of a second; starting one
# takes seconds, more under load: longer than the session timeout of a
# test that stops the worker first (it expires by itself meanwhile, and
# the test no longer shows what it meant to).  Such a test calls this
# before it stops the worker.
my %expirer;

sub expirer
{
	my ($c) = @_;
	return $expirer{$c} //= ZklockTest::new_peer($c);
}

# expire_session($connect, $id_hex, $passwd_hex): attach to the session
# from a second handle and close it (the peer's expire, ZkTool's code).
# True when it says so.
sub expire_session
{
	my ($c, $id, $pw) = @_;
	my $answer = expirer($c)->cmd("expire $id $pw", qr/^(expired|error)/, 60) // 'no answer';
	diag("expire failed: $answer") unless $answer =~ /^expired 0x/;
	return $answer =~ /^expired 0x/;
}

# reconnect_after($node, $proxy, $how, $s0): after a black hole in $proxy,
# get the worker of $node connected again in session $s0: 'cut' drops the
# connection, 'restart' restarts the worker (tests: each step)
sub reconnect_after
{
	my ($node, $proxy, $how, $s0) = @_;
	if ($how eq 'restart')
	{
		my ($old, $new) = ZklockTest::restart_worker($node, 'TERM');
		Test::More::isnt($new, '', "the worker restarted ($old -> $new)");
	}
	else
	{
		$proxy->set_mode('cut');
		Test::More::ok(ZklockTest::wait_until(sub { status_row($node)->{state} ne 'connected' }, 15,
				'the drop to be seen'),
			'the worker sees the connection drop');
	}
	$proxy->set_mode('pass');
	Test::More::ok(ZklockTest::wait_until(sub { status_row($node)->{state} eq 'connected' }, 15, 'reconnect'),
		'it reconnects');
	Test::More::is(status_row($node)->{session_id}, $s0, '... in the same session');
	return;
}

############################################################################
# Four-letter words
############################################################################

# four_letter("127.0.0.1:PORT", 'srvr'): the answer ('' when the server does
# not answer within 3 s).
sub four_letter
{
	my ($hp, $cmd) = @_;
	my ($host, $port) = $hp =~ /^(.*):(\d+)$/;
	my $s = IO::Socket::INET->new(PeerAddr => $host, PeerPort => $port,
		Proto => 'tcp', Timeout => 3) or return '';
	print $s $cmd;
	$s->flush;
	my $sel = IO::Select->new($s);
	my $ans = '';
	my $deadline = time + 3;
	while (time < $deadline)
	{
		last unless $sel->can_read($deadline - time);
		my $n = sysread($s, my $buf, 65536);
		last unless $n;
		$ans .= $buf;
	}
	close $s;
	return $ans;
}

############################################################################
# A ZooKeeper ensemble (QuorumPeerMain) on 127.0.0.1
############################################################################

my @ens;    # { id, dir, client, quorum, election, pid, observer, qhost }

# start_ensemble($n, %opts): start an $n-server ensemble; returns its
# connect string once every server serves (Mode: leader or follower).
# Bails out when it does not form within 60 s. Options:
#   observers => $k       $k more servers (ids $n+1 ...), observers: every
#                         server line gives its role and client address
#                         ("server.N=...:observer;127.0.0.1:port")
#   observer_master => 1  the participants feed the observers through an
#                         ObserverMaster (observerMasterPort, ZooKeeper
#                         3.6+); each server's quorum address is then
#                         127.0.0.(id + 1), as every ObserverMaster listens
#                         on the same port (each member's hash has it as
#                         observer_master_port)
sub start_ensemble
{
	my ($n, %opts) = @_;
	$n //= 3;
	my $k = $opts{observers} // 0;
	my $base = PostgreSQL::Test::Utils::tempdir('ensemble');
	@ens = ();
	for my $i (1 .. $n + $k)
	{
		push @ens, {
			id => $i,
			dir => "$base/zk$i",
			client => PostgreSQL::Test::Cluster::get_free_port(),
			quorum => PostgreSQL::Test::Cluster::get_free_port(),
			election => PostgreSQL::Test::Cluster::get_free_port(),
			observer => $i > $n ? 1 : 0,
			qhost => $opts{observer_master} ? '127.0.0.' . ($i + 1) : '127.0.0.1',
		};
	}
	my $servers = join('',
		map {
			"server.$_->{id}=$_->{qhost}:$_->{quorum}:$_->{election}"
			  . ($k ? ($_->{observer} ? ':observer' : ':participant') . ";127.0.0.1:$_->{client}" : '')
			  . "\n"
		} @ens);
	my $extra = '';
	if ($opts{observer_master})
	{
		my $om = PostgreSQL::Test::Cluster::get_free_port();
		$_->{observer_master_port} = $om for @ens;
		$extra .= "observerMasterPort=$om\n";
	}
	for my $e (@ens)
	{
		my $peer_type = $e->{observer} ? "peerType=observer\n" : '';
		make_path("$e->{dir}/data");
		PostgreSQL::Test::Utils::append_to_file("$e->{dir}/data/myid", "$e->{id}\n");
		PostgreSQL::Test::Utils::append_to_file(
			"$e->{dir}/zoo.cfg", qq{tickTime=500
initLimit=10
syncLimit=5
dataDir=$e->{dir}/data
clientPort=$e->{client}
clientPortAddress=127.0.0.1
admin.enableServer=false
4lw.commands.whitelist=*
minSessionTimeout=1000
maxSessionTimeout=120000
maxClientCnxns=0
$peer_type$extra$servers});
		_launch($e);
	}
	my $ok = wait_until(sub { scalar(grep { $_ } values %{ ensemble_modes() }) == $n + $k },
		60, "a " . ($n + $k) . "-server ensemble to form");
	unless ($ok)
	{
		for my $e (@ens)
		{
			diag("zk$e->{id} log tail:\n" . _tail("$e->{dir}/zk.log", 15));
		}
		BAIL_OUT('ZooKeeper ensemble did not form');
	}
	return ensemble_connect();
}

sub _launch
{
	my ($e) = @_;
	my $pid = fork();
	die "fork: $!" unless defined $pid;
	if ($pid == 0)
	{
		POSIX::setsid();
		open(STDIN, '<', '/dev/null');
		open(STDOUT, '>>', "$e->{dir}/zk.log");
		open(STDERR, '>&', \*STDOUT);
		exec('java', '-Xmx192m', '-Dzookeeper.admin.enableServer=false',
			'-Dzookeeper.jmx.log4j.disable=true',
			'-cp', $ENV{ZK_JAR} // '/usr/share/java/zookeeper.jar',
			'org.apache.zookeeper.server.quorum.QuorumPeerMain',
			"$e->{dir}/zoo.cfg")
		  or POSIX::_exit(127);
	}
	$e->{pid} = $pid;
	note("ZooKeeper ensemble server $e->{id}: pid $pid, client port $e->{client}");
	return;
}

sub _tail
{
	my ($f, $n) = @_;
	open(my $fh, '<', $f) or return '';
	my @l = <$fh>;
	close $fh;
	return join('', @l > $n ? @l[ -$n .. -1 ] : @l);
}

sub ensemble_connect
{
	return join(',', map { "127.0.0.1:$_->{client}" } @ens);
}

# ensemble_modes(): { id => 'leader' | 'follower' | 'observer' | undef } of
# running servers.
sub ensemble_modes
{
	my %m;
	for my $e (@ens)
	{
		next unless $e->{pid};
		my $a = four_letter("127.0.0.1:$e->{client}", 'srvr');
		$m{ $e->{id} } = $a =~ /^Mode: (leader|follower|observer)/m ? $1 : undef;
	}
	return \%m;
}

# ensemble_leader(): { id, pid, client } of the current leader, or undef.
sub ensemble_leader
{
	my $m = ensemble_modes();
	for my $e (@ens)
	{
		return $e if $e->{pid} && ($m->{ $e->{id} } // '') eq 'leader';
	}
	return undef;
}

# kill_ensemble_member($e, $signal): signal one server and reap it.
sub kill_ensemble_member
{
	my ($e, $sig) = @_;
	return unless $e->{pid};
	kill($sig // 'KILL', $e->{pid});
	my $pid = $e->{pid};
	wait_until(sub { waitpid($pid, POSIX::WNOHANG()) != 0 }, 15, "server $e->{id} to exit")
	  or kill('KILL', $pid);
	$e->{pid} = undef;
	note("ZooKeeper ensemble server $e->{id} (pid $pid) stopped by $sig");
	return;
}

# ensemble_members(): the servers of the ensemble, in id order (the same
# hashes ensemble_leader returns; pid is undef while a server is stopped).
sub ensemble_members
{
	return @ens;
}

# restart_ensemble_member($e, $timeout): start again a server stopped by
# kill_ensemble_member, on the same ports and data directory. Returns true
# once it serves again (srvr says leader or follower) within $timeout
# seconds (default 60). $timeout 0: only start it (the caller polls
# ensemble_modes() itself) and return true.
sub restart_ensemble_member
{
	my ($e, $timeout) = @_;
	die "ZooKeeper server $e->{id} still runs (pid $e->{pid})" if $e->{pid};
	_launch($e);
	return 1 if defined $timeout && $timeout == 0;
	my $ok = wait_until(
		sub { four_letter("127.0.0.1:$e->{client}", 'srvr') =~ /^Mode: (leader|follower|observer)/m },
		$timeout // 60, "server $e->{id} to serve again");
	diag("zk$e->{id} log tail:\n" . _tail("$e->{dir}/zk.log", 15)) unless $ok;
	return $ok ? 1 : 0;
}

sub stop_ensemble
{
	kill_ensemble_member($_, 'TERM') for grep { $_->{pid} } @ens;
	return;
}

END
{
	local $?;
	for my $e (@ens)
	{
		kill('KILL', $e->{pid}) if $e->{pid};
	}
}

############################################################################
# Misc
############################################################################

# hold_for($seconds, $what): keep an injected fault in place for a set time.
# This is the fault's duration (part of the scenario), not a wait for some
# other event: it polls nothing and decides nothing.
sub hold_for
{
	my ($secs, $what) = @_;
	note("holding the fault for ${secs}s: " . ($what // ''));
	my $end = time + $secs;
	usleep(50_000) while time < $end;
	return;
}

sub log_contents
{
	my ($node) = @_;
	return PostgreSQL::Test::Utils::slurp_file($node->logfile);
}

# row_from_json($text): a flat row_to_json() object as { column => value }
# (JSON null is undef).
sub row_from_json
{
	my ($out) = @_;
	my %h;
	while ($out =~ /"(\w+)":("(?:[^"\\]|\\.)*"|[^,}]+)/g)
	{
		my ($k, $v) = ($1, $2);
		$v =~ s/^"(.*)"$/$1/;
		$v = undef if $v eq 'null';
		$h{$k} = $v;
	}
	return \%h;
}

# status_row($node): zk_status() as { column => value }.
sub status_row
{
	my ($node) = @_;
	return row_from_json($node->safe_psql('postgres',
		q{SELECT row_to_json(s)::text FROM zk_status() s}));
}

# quietly($code): run $code with Test::More::note silenced (the sessions
# and peers of ZklockTest note every statement and reply line).
sub quietly
{
	my ($code) = @_;
	no warnings 'redefine';
	local *Test::More::note = sub { };
	return $code->();
}

sub status_has_column
{
	my ($node, $col) = @_;
	return exists status_row($node)->{$col};
}

# wait_back($node, $timeout, $log_from): true once the cluster answers a
# query again (after a crash-restart, during which connections are
# refused).  With $log_from (the log's size taken before the kill), it
# first waits until the log past it shows the postmaster reinitialising:
# a kill is delivered at once but the postmaster reaps the child a moment
# later, and until then the old processes still answer queries.
sub wait_back
{
	my ($node, $timeout, $log_from) = @_;
	my $end = time + ($timeout // 30);
	if (defined $log_from)
	{
		return 0
		  unless wait_until(
			sub {
				substr(log_contents($node), $log_from) =~
				  /all server processes terminated; reinitializing/;
			},
			$end - time, 'the postmaster to reinitialise after the crash');
	}
	return wait_until(
		sub {
			my ($out, $err) = ('', '');
			my $to = 0;
			$node->psql('postgres', 'SELECT 1', stdout => \$out, stderr => \$err,
				timeout => 5, timed_out => \$to);
			return $out eq '1';
		},
		$end - time, 'the cluster to accept queries again');
}

############################################################################
# A create whose reply is lost on the wire
############################################################################

# drop_create_reply($peer, $proxy, $session, $sql, $dir, $other): with the
# proxy dropping every reply of the server, start $sql in $session and wait
# (bounded, 5 s) for the one node it makes under $dir beside $other (the
# node another client holds there).  Returns that node (undef if none came)
# and whether the proxy really dropped reply bytes.  The caller makes a
# round trip just before, so the client's receive timer starts afresh.
sub drop_create_reply
{
	my ($peer, $proxy, $session, $sql, $dir, $other) = @_;
	my $before = $proxy->set_mode('drop_replies');
	$session->start($sql);
	my $mine;
	ZklockTest::wait_until(
		sub {
			my @o = grep { $_ ne $other } @{ ZklockTest::lock_children($peer, $dir) };
			$mine = $o[0] if @o == 1;
			return defined $mine;
		},
		5, "the new node under $dir");
	my $dropped = ZklockTest::wait_until(sub { $proxy->stats->{dropped_s2c} > $before->{dropped_s2c} },
		5, 'the reply bytes');
	return ($mine, $dropped);
}

# drop_set_reply($proxy, $session, $sql): with the proxy in
# drop_set_replies mode, start $sql in $session and wait (bounded, 10 s)
# until the proxy relayed its setData request and then dropped reply bytes
# of that connection.  Returns whether both happened; the statement is
# left pending (its reply never comes: the client's connection times out).
sub drop_set_reply
{
	my ($proxy, $session, $sql) = @_;
	my $before = $proxy->set_mode('drop_set_replies');
	$session->start($sql);
	my $sent = ZklockTest::wait_until(
		sub { $proxy->stats->{set_requests} > $before->{set_requests} },
		10, 'the setData request');
	my $dropped = $sent && ZklockTest::wait_until(
		sub { $proxy->stats->{dropped_s2c} > $before->{dropped_s2c} },
		10, 'its reply bytes');
	return $sent && $dropped;
}

1;

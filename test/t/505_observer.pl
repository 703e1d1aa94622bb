
# 505_observer: no lease is proven through a ZooKeeper observer.
#
# What users rely on: an observer fed by a follower's ObserverMaster
# (observerMasterPort, ZooKeeper 3.6+) passes the session's touches on to
# the leader one ping of that follower late, so the answers of an observer
# cannot prove that the leader still counts the session alive. With a real
# ensemble of 3 participants and 1 observer (ObserverMaster on):
#   1. zklock.hosts = the observer only: zklock connects, zk_status() says
#      server_mode 'observer', the log has a WARNING naming the observer,
#      no lease is ever shown, the worker stays on it (every listed server
#      is an observer), and an acquire is never granted: it fails with
#      08006 after zklock.connect_timeout;
#   2. zklock.hosts = the observer, then a participant (the participant
#      stopped at first, so the observer is where zklock lands): the WARNING
#      says the worker moves on; once the participant is back zklock ends
#      up connected to it with a lease, locks work, and a Curator client on
#      the same path is kept out until zklock releases.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use ZklockTest;
use ZklockFault;

my $zk = start_ensemble(3, observers => 1, observer_master => 1);
my @members = ensemble_members();
my ($obs) = grep { $_->{observer} } @members;
my $modes = ensemble_modes();
note('ensemble: ' . join(' ', map { "$_->{id}=" . ($modes->{ $_->{id} } // '?') . ":$_->{client}" } @members));
is($modes->{ $obs->{id} }, 'observer', "server $obs->{id} is an observer");
# a follower as the participant, so stopping it keeps the leader
my ($part) = grep { !$_->{observer} && ($modes->{ $_->{id} } // '') eq 'follower' } @members;
my $obs_hp = "127.0.0.1:$obs->{client}";
my $part_hp = "127.0.0.1:$part->{client}";
my $peer = new_peer(join(',', map { "127.0.0.1:$_->{client}" } grep { !$_->{observer} } @members));
# the observer's learner link goes to a follower's ObserverMaster port
my %followers = map { ($_->{qhost} => $_->{id}) }
  grep { ($modes->{ $_->{id} } // '') eq 'follower' } @members;
my $om = $obs->{observer_master_port};
my $fed_by;
ok(wait_until(sub {
			for my $l (split /\n/, `ss -Htn state established '( dport = :$om )'`)
			{
				# "127.0.0.3:PORT" or "[::ffff:127.0.0.3]:PORT"
				($fed_by) = grep { $l =~ /[\s:]\Q$_\E\]?:$om\s*$/ } keys %followers;
				return 1 if defined $fed_by;
			}
			return 0;
		}, 15, 'a link to an ObserverMaster'),
	'the observer is fed by a follower\'s ObserverMaster (observerMasterPort)')
  or diag(`ss -Htn state established`);
note("the observer's ObserverMaster: server $followers{$fed_by}") if defined $fed_by;

my $node = new_zklock_node('obs', $obs_hp,
	"zklock.connect_timeout = '3s'\nzklock.session_timeout = '6s'\n");

# warnings($node): the observer WARNINGs of the log so far
sub warnings
{
	my @w = log_contents($node) =~ /(WARNING:\s+zklock: zookeeper server \S+ is an observer[^\n]*\n(?:[^\n]*\n){0,3})/g;
	return @w;
}

############################################################################
# 1. The observer alone.
############################################################################
subtest 'zklock.hosts = the observer only: no lease, no lock, a WARNING' => sub {
	ok(wait_sql($node, q{SELECT server_mode FROM zk_status()}, 'observer', 15),
		"zk_status().server_mode says 'observer'");
	my $st = status_row($node);
	is($st->{server}, $obs_hp, "zk_status().server is the observer $obs_hp");
	my @w = warnings();
	ok(scalar(@w), 'the log has a WARNING naming the observer') or diag(log_contents($node));
	like($w[0] // '', qr/\Q$obs_hp\E.*lease cannot be proven/s, '... saying the lease cannot be proven through it');
	like($w[0] // '', qr/Every server of zklock.hosts is an observer/, '... and that the worker stays, every listed server being one');

	my ($state, $err, $out, $secs) =
	  psql_error($node, q{SELECT zk_mutex_acquire('/t505/m', '20s')}, 40);
	is($state, '08006', 'an acquire through the observer is never granted: 08006')
	  or diag("stdout: $out stderr: $err");
	note(sprintf('the acquire failed after %.1f s', $secs));
	$st = status_row($node);
	ok(!defined $st->{lease_until}, 'zk_status() shows no lease');
	is($st->{connected_count}, '1', 'the worker stayed on the observer (one connection)');
	is($st->{server}, $obs_hp, '... still connected to it');
	is($peer->cmd('acquire c1 /t505/m 5000', qr/^(acquired|timeout|error) c1/), 'acquired c1',
		'Curator gets the lock: zklock holds nothing');
	$peer->cmd('release c1', qr/^(released|error) c1/);
};

############################################################################
# 2. The observer, then a participant.
############################################################################
subtest 'zklock.hosts = the observer, then a participant: zklock ends up on the participant' => sub {
	kill_ensemble_member($part, 'TERM');
	my $nw = scalar(warnings());
	$node->append_conf('postgresql.conf', "zklock.hosts = '$obs_hp,$part_hp'\n");
	$node->reload;
	ok(wait_until(sub { scalar(warnings()) > $nw }, 20, 'a WARNING after the reload'),
		'the worker lands on the observer while the participant is down, and warns')
	  or diag(log_contents($node));
	my @w = warnings();
	like($w[-1] // '', qr/moves on to the next server of zklock.hosts/, '... saying it moves on');

	ok(restart_ensemble_member($part, 60), "participant $part->{id} serves again");
	ok(wait_until(sub {
				my $st = status_row($node);
				return ($st->{server} // '') eq $part_hp && ($st->{server_mode} // '') eq 'ensemble'
				  && defined $st->{lease_until};
			}, 30, 'zklock on the participant with a lease'),
		"zklock ends up connected to the participant $part_hp, server_mode 'ensemble', with a lease")
	  or diag(explain(status_row($node)));

	my $s = ZklockTest::Session->new($node, 's');
	is($s->value(q{SELECT zk_mutex_acquire('/t505/m', '10s')}), 't', 'zklock takes the lock');
	$peer->acquire('c2', '/t505/m', 3000);
	is($peer->acquire_result('c2', 10), 'timeout', 'a Curator client on the same path is kept out');
	is($s->value(q{SELECT zk_mutex_release('/t505/m')}), 't', 'zklock releases');
	is($peer->cmd('acquire c3 /t505/m 10000', qr/^(acquired|timeout|error) c3/), 'acquired c3',
		'then Curator gets it');
	$peer->cmd('release c3', qr/^(released|error) c3/);
	$s->quit;
};

$peer->quit;
$node->stop;
stop_ensemble();
done_testing();

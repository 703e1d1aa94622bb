# 215_tls_faults: the lease, the heartbeat and the fault handling hold when
# the connection to ZooKeeper is TLS.
#
# What users rely on (as 400, 500 and 307 check over plaintext): over TLS,
#   - heartbeats renew the lease while idle;
#   - when the connection becomes a black hole (a TCP proxy in front of
#     the secureClientPort stops passing bytes: TLS records go through it
#     untouched until then), zklock calls its locks lost before ZooKeeper
#     expires the session and a Curator client over TLS gets the lock; a
#     COMMIT relying on an _xact lock that was lost fails with 40000, a new
#     acquire fails with 08006 until the path heals, then a new TLS session
#     is made and locks work again;
#   - a worker stalled (SIGSTOP) past the session timeout: the same, and a
#     new TLS session after SIGCONT;
#   - a session expired by the server (closed from a second handle): the
#     locks are lost, COMMIT fails with 40000, a new TLS session;
#   - a worker restart resumes the same session over TLS: the lock stays
#     held (a Curator client over TLS cannot take it) and is released.
use strict;
use warnings;
use File::Spec;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use ZklockTest;
use ZklockFault;
use ZklockPki;
use ZklockProxy;

my $pki = File::Spec->rel2abs(PostgreSQL::Test::Utils::tempdir('pki'));
my $tls = tls_setup($pki);
my ($zk, $zk_tls) = ($tls->{zk}, $tls->{zk_tls});
my $proxy = ZklockProxy->start($zk_tls);
my $node = new_zklock_node('tls_faults', $proxy->connect,
	$tls->{conf}->($proxy->connect)
	  . "zklock.session_timeout = '4s'\nzklock.connect_timeout = '2s'\nzklock.lease_margin = '1s'\n",
	wait_connected => 0);
ok(wait_connected($node, 60), 'connected over TLS through the proxy');
# Curator talks to the secure port directly, over TLS
my $peer = new_peer($zk_tls, 'tls-peer', @{ $tls->{peer_options} });

# tls_session(): "tls|session_id" of zk_status()
sub tls_session
{
	return $node->safe_psql('postgres', q{SELECT tls, session_id FROM zk_status()});
}

# lost_rows(@paths): how many zk_locks rows of @paths say 'lost'
sub lost_rows
{
	my $in = join(',', map { "'$_'" } @_);
	return $node->safe_psql('postgres',
		"SELECT count(*) FROM zk_locks WHERE path IN ($in) AND state = 'lost'");
}

# new_tls_session($before): wait for a connected TLS session other than $before
sub new_tls_session
{
	my ($before) = @_;
	return wait_until(
		sub {
			status_row($node)->{state} eq 'connected' && tls_session() =~ /^t\|(.+)$/ && $1 ne $before;
		},
		30, 'a new TLS session');
}

my $s0 = status_row($node)->{session_id};
is(tls_session(), "t|$s0", 'zk_status() says the connection is TLS');
my $left = $node->safe_psql('postgres', q{SELECT extract(epoch FROM lease_remaining) FROM zk_status()});
# renewed: the lease's end moves on (not what is left, which a slower
# round trip may make shorter than at the first reading)
my $until = $node->safe_psql('postgres', q{SELECT extract(epoch FROM lease_until) FROM zk_status()});
ok(wait_until(sub {
			$node->safe_psql('postgres', q{SELECT extract(epoch FROM lease_until) FROM zk_status()}) > $until + 0.1;
		}, 10, 'the lease to be renewed'),
	"heartbeats over TLS renew the lease while idle (${left}s left before)");

my $x = ZklockTest::Session->new($node, 'x');    # _xact holder
my $h = ZklockTest::Session->new($node, 'h');    # session holder

subtest 'a black-holed TLS connection: lost before Curator gets the lock, COMMIT 40000, 08006 until healed' => sub {
	$x->value('BEGIN');
	is($x->value(q{SELECT zk_mutex_acquire_xact('/t215/p')}), 't', 'x holds /t215/p for its transaction');
	is($h->value(q{SELECT zk_mutex_acquire('/t215/q')}), 't', 'h holds /t215/q');
	$peer->acquire('cp', '/t215/p', -1);
	ok(wait_children_count($peer, '/t215/p', 2), 'Curator over TLS waits behind x');
	my $t0 = time;
	$proxy->set_mode('blackhole');
	ok(wait_until(sub { lost_rows('/t215/p', '/t215/q') eq '2' }, 15, 'zk_locks to say lost'),
		'zk_locks says lost for both locks');
	my $t_lost = time - $t0;
	ok(!$peer->has_reply(qr/^(acquired|error) cp\b/), '... while Curator still waits');
	is($peer->acquire_result('cp', 20), 'acquired', 'then the session expires: Curator over TLS gets /t215/p');
	cmp_ok($t_lost, '<', time - $t0, 'zklock knew first');
	my $r = $x->query('COMMIT');
	is($r->{sqlstate}, '40000', 'COMMIT of the transaction that relied on /t215/p fails with 40000')
	  or diag($r->{err});
	my $st = status_row($node);
	cmp_ok($st->{locks_lost}, '>=', 2, 'zk_status() counts the lost locks') or diag(explain($st));
	$r = $x->query(q{SELECT zk_mutex_acquire('/t215/r', '1s')});
	is($r->{sqlstate}, '08006', 'a new acquire fails with 08006 while the path is a black hole')
	  or diag($r->{err});
	$proxy->set_mode('pass');
	ok(new_tls_session($s0), 'healed: a new session, over TLS');
	$r = $h->query(q{SELECT zk_mutex_release('/t215/q')});
	is($r->{out}, 'f', 'releasing the lost session lock returns false');
	is($peer->release('cp'), 'released', 'Curator releases /t215/p');
	$x->value('BEGIN');
	is($x->value(q{SELECT zk_mutex_acquire_xact('/t215/p', '10s')}), 't', 'x takes /t215/p again');
	is($x->query('COMMIT')->{err}, '', 'and this time COMMIT succeeds');
};

subtest 'a worker stalled past the session timeout over TLS: COMMIT fails, a new TLS session' => sub {
	my $s1 = status_row($node)->{session_id};
	$x->value('BEGIN');
	is($x->value(q{SELECT zk_mutex_acquire_xact('/t215/s')}), 't', 'x holds /t215/s for its transaction');
	$peer->acquire('cs', '/t215/s', -1);
	ok(wait_children_count($peer, '/t215/s', 2), 'Curator waits behind x');
	my $wpid = worker_pid($node);
	kill 'STOP', $wpid;
	is($peer->acquire_result('cs', 20), 'acquired',
		'with the worker stopped, the session expires: Curator gets /t215/s');
	my $r = $x->query('COMMIT');
	kill 'CONT', $wpid;
	is($r->{sqlstate}, '40000', 'a COMMIT issued during the stall fails with 40000') or diag($r->{err});
	ok(new_tls_session($s1), 'after SIGCONT the worker opens a new session over TLS');
	is($peer->release('cs'), 'released', 'Curator releases /t215/s');
	is($x->value(q{SELECT zk_mutex_acquire('/t215/s', '10s'), zk_mutex_release('/t215/s')}), 't|t',
		'x takes and releases /t215/s');
};

subtest 'a TLS session expired by the server: locks lost, COMMIT 40000, a new TLS session' => sub {
	my ($id, $pw) = session_file($node);
	ok(defined $pw, 'the worker keeps its session in zklock.session');
	$x->value('BEGIN');
	is($x->value(q{SELECT zk_mutex_acquire_xact('/t215/e')}), 't', 'x holds /t215/e for its transaction');
	# the session is the server's: it is closed from a plaintext handle
	ok(expire_session($zk, $id, $pw), 'the session is closed from a second handle');
	ok(wait_until(sub { lost_rows('/t215/e') eq '1' }, 15, 'zk_locks to say lost'), 'zk_locks says lost');
	$peer->acquire('ce', '/t215/e', 10000);
	is($peer->acquire_result('ce'), 'acquired', 'Curator over TLS gets /t215/e');
	my $r = $x->query('COMMIT');
	is($r->{sqlstate}, '40000', 'COMMIT fails with 40000') or diag($r->{err});
	ok(new_tls_session("0x$id"), 'a new session over TLS')
	  or diag(tls_session());
	is($peer->release('ce'), 'released', 'Curator releases /t215/e');
};

subtest 'a worker restart resumes the session over TLS; the lock stays held' => sub {
	is($h->value(q{SELECT zk_mutex_acquire('/t215/w', '10s')}), 't', 'h holds /t215/w');
	my $before = tls_session();
	my ($old, $new) = restart_worker($node, 'TERM');
	isnt($new, '', "the worker restarted ($old -> $new)");
	ok(wait_connected($node, 20), 'the new worker is connected');
	is(tls_session(), $before, 'over TLS, in the same session');
	is(lock_state($node, $h->pid, '/t215/w'), 'held', 'zk_locks still says held');
	$peer->acquire('cw', '/t215/w', 1000);
	is($peer->acquire_result('cw'), 'timeout', 'Curator over TLS cannot take it');
	is($h->value(q{SELECT zk_mutex_release('/t215/w')}), 't', 'h releases');
	$peer->acquire('cw2', '/t215/w', 10000);
	is($peer->acquire_result('cw2'), 'acquired', 'then Curator gets it');
	is($peer->release('cw2'), 'released', 'and releases');
};

$x->quit;
$h->quit;
$peer->quit;
$node->stop;
$proxy->stop;
done_testing();


# 403_session_file_copy: a copy of the data directory never closes the
# ZooKeeper session of the server it was copied from.
#
# What users rely on: zklock keeps its session id and password in
# $PGDATA/zklock.session, so that after a crash-restart the new worker can
# close the session of the crashed run at once.  A base backup
# (pg_basebackup, the usual way to make a standby or a test copy) carries
# that file too, but the session it names belongs to the origin, which is
# alive and holds its users' locks.  A server started from the copy must
# not close it: it logs "ignoring a zookeeper session file written by
# another server run", removes the file and opens a session of its own.
# The origin's locks stay held the whole time — zklock says so, the nodes
# stay in ZooKeeper under the origin's session, and a Curator client cannot
# take them — also after the copy shuts down (its postmaster closes only
# its own session).
#
# Without the feature (a session file that does not say which server run
# wrote it), the copy's worker finds fresh shared memory and a session
# file, takes it for a crash-restart and closes the origin's session: the
# origin's nodes vanish, Curator takes both locks at once, zk_locks on the
# origin turns 'lost' and its open transaction cannot commit; the log line
# checked below is not there either.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use ZklockTest;
use ZklockFault;

my $pm = '/t403/m';    # session-level mutex of the origin
my $px = '/t403/x';    # transaction-level mutex of the origin

my $zk = start_zk();
my $primary = new_zklock_node('origin', $zk, '', allows_streaming => 1);
my $peer = new_peer($zk);

my $s_origin = status_row($primary)->{session_id};
like($s_origin, qr/^0x[0-9a-f]{16}$/, "the origin is connected in session $s_origin");

# The origin holds a session lock (open psql session) and an _xact lock
# (open transaction).
my $h = ZklockTest::Session->new($primary, 'h');
my $x = ZklockTest::Session->new($primary, 'x');
is($h->value("SELECT zk_mutex_acquire('$pm')"), 't', "h holds $pm");
$x->value('BEGIN');
is($x->value("SELECT zk_mutex_acquire_xact('$px')"), 't', "x holds $px for its open transaction");
my $node_m = zk_lock_rows($primary, $pm)->{ $h->pid }{node};
my $node_x = zk_lock_rows($primary, $px)->{ $x->pid }{node};

# origin_untouched($when): the origin's locks are held, by zklock's account
# and by ZooKeeper's (the nodes exist, owned by the origin's session), and
# a Curator client cannot take either.
my $attempt = 0;

sub origin_untouched
{
	my ($when) = @_;
	is(status_row($primary)->{session_id}, $s_origin, "$when: the origin is still in session $s_origin");
	is(zk_lock_rows($primary, $pm)->{ $h->pid }{state}, 'held', "$when: zk_locks on the origin: $pm held");
	is(zk_lock_rows($primary, $px)->{ $x->pid }{state}, 'held', "$when: zk_locks on the origin: $px held");
	for my $c ([ $pm, $node_m ], [ $px, $node_x ])
	{
		my ($path, $n) = @$c;
		is_deeply(lock_children($peer, $path), [$n], "$when: the origin's node is still the only one under $path");
		my $st = zk_stat($zk, "$path/$n");
		is(defined $st ? $st->{owner} : 'no node', $s_origin,
			"$when: ... owned by the origin's session");
		my $id = 'c' . ++$attempt;    # a Curator lock object is bound to one path
		$peer->acquire($id, $path, 1000);
		is($peer->acquire_result($id), 'timeout', "$when: Curator cannot take $path");
	}
	return;
}

origin_untouched('before the copy');

# A base backup while the locks are held: it carries the origin's session file.
$primary->backup('copy');
my $bfile = $primary->backup_dir . '/copy/zklock.session';
ok(-f $bfile, 'the base backup contains zklock.session');
my $bcontent = -f $bfile ? slurp_file($bfile) : '';
my ($bid) = $bcontent =~ /^([0-9a-f]{16}) [0-9a-f]{32}$/m;
is('0x' . ($bid // ''), $s_origin, "... naming the origin's live session");
like($bcontent, qr/\Q${\ $primary->data_dir }\E/, "... written by the origin's server run (its data directory)");

# A server started from the copy: another port, the same ZooKeeper.
my $copy = PostgreSQL::Test::Cluster->new('copy');
$copy->init_from_backup($primary, 'copy');
$copy->start;
ok(wait_connected($copy, 30), 'the copy is connected to ZooKeeper');
my $s_copy = status_row($copy)->{session_id};
like($s_copy, qr/^0x[0-9a-f]{16}$/, "the copy has session $s_copy");
isnt($s_copy, $s_origin, "... a new one, not the origin's");
my $clog = slurp_file($copy->logfile);
like($clog, qr/ignoring a zookeeper session file written by another server run/,
	"the copy's log says it ignored the origin's session file");
unlike($clog, qr/the zookeeper session 0x\S+ of this server's previous worker/,
	'... and it did not try to close that session');
my ($cid) = session_file($copy);
is('0x' . ($cid // ''), $s_copy, "the copy's zklock.session now names the copy's own session");

origin_untouched('with the copy running');

# The copy shuts down: its postmaster closes its own session (and removes
# its session file once the session is gone), nothing of the origin's.
$copy->stop('fast');
ok(!-e $copy->data_dir . '/zklock.session',
	"the copy's postmaster closed its own session at shutdown (its session file is gone)");

origin_untouched('after the copy stopped');

# The origin releases; nothing is left anywhere.
is($h->value("SELECT zk_mutex_release('$pm')"), 't', "h releases $pm");
my $r = $x->query('COMMIT');
is($r->{err}, '', "x's transaction commits (its lock was never lost)");
ok(wait_no_zklock_rows($primary, $_), "no zk_locks row left for $_") for ($pm, $px);
ok(wait_children_count($peer, $_, 0), "no node left under $_") for ($pm, $px);
is($primary->safe_psql('postgres', 'SELECT count(*) FROM zk_locks'), '0', 'zk_locks on the origin is empty');

$_->quit for ($h, $x);
$peer->quit;
$primary->stop;
stop_zk($zk);
done_testing();

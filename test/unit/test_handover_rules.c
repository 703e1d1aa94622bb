/*
 * Unit tests of the handover layer's pure decisions (src/core/handover_rules.c):
 * where a lock node created behind a node of this worker goes without a
 * listing, which nodes of this worker may decide for a new one (the
 * reader predicate, the downgrade twin), when a create skips its listing,
 * and which local waiters a release hands the lock to.  The cases
 * are the ones src/README's "Local handover" names.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "core/handover_rules.h"

#define MAX 64

/* no node of this worker right ahead: list, as Curator does */
static void
test_place_no_owner_lists(void **state)
{
	(void) state;
	assert_int_equal(zklock_placement(false, false, false, false, false), ZKLOCK_PLACE_LIST);
	assert_int_equal(zklock_placement(false, false, false, false, true), ZKLOCK_PLACE_LIST);
	assert_int_equal(zklock_placement(false, false, true, false, false), ZKLOCK_PLACE_LIST);
}

/* a read node right after a reader released after our create left: granted */
static void
test_place_after_released_reader_joins(void **state)
{
	(void) state;
	assert_int_equal(zklock_placement(false, false, true, true, false), ZKLOCK_PLACE_JOIN_READER);
	/* a mutex node never joins anything */
	assert_int_equal(zklock_placement(false, false, false, true, false), ZKLOCK_PLACE_LIST);
}

/* a read node behind a reader that holds joins it; behind a deciding one it follows */
static void
test_place_behind_reader(void **state)
{
	(void) state;
	assert_int_equal(zklock_placement(true, false, true, false, false), ZKLOCK_PLACE_JOIN_READER);
	assert_int_equal(zklock_placement(true, true, true, false, false), ZKLOCK_PLACE_FOLLOW_READER);
	/* a read try behind a deciding reader shares its decision too */
	assert_int_equal(zklock_placement(true, true, true, false, true), ZKLOCK_PLACE_FOLLOW_READER);
}

/* a mutex node behind one of this worker: not first; a try gives up */
static void
test_place_mutex_behind_local_node(void **state)
{
	(void) state;
	assert_int_equal(zklock_placement(true, true, false, false, false), ZKLOCK_PLACE_WAIT_BEHIND);
	assert_int_equal(zklock_placement(true, false, false, false, false), ZKLOCK_PLACE_WAIT_BEHIND);
	assert_int_equal(zklock_placement(true, false, false, false, true), ZKLOCK_PLACE_GIVE_UP_TRY);
}

/* a released mutex goes to its one waiter */
static void
test_handover_mutex_waiter(void **state)
{
	ZklockHandoverCandidate c[1] = {{false, false, false}};
	bool		take[1];

	(void) state;
	assert_int_equal(zklock_handover_choice(c, 1, true, false, MAX, take), 1);
	assert_true(take[0]);
}

/* a node that was not a held plain mutex (a lease's node...) hands nothing to a mutex waiter */
static void
test_handover_not_held_mutex(void **state)
{
	ZklockHandoverCandidate c[1] = {{false, false, false}};
	bool		take[1];

	(void) state;
	assert_int_equal(zklock_handover_choice(c, 1, false, false, MAX, take), 0);
	assert_false(take[0]);
}

/* readers behind a released writer that was the only writer ahead: all of them */
static void
test_handover_readers_together(void **state)
{
	ZklockHandoverCandidate c[3] = {{true, true, true}, {true, true, true}, {true, true, false}};
	bool		take[3];

	(void) state;
	assert_int_equal(zklock_handover_choice(c, 3, false, false, MAX, take), 2);
	assert_true(take[0]);
	assert_true(take[1]);
	assert_false(take[2]);		/* another writer keeps it out */
}

/* a writer right behind the released node: alone, and only without a downgrade twin */
static void
test_handover_writer(void **state)
{
	ZklockHandoverCandidate w[1] = {{true, false, true}};
	ZklockHandoverCandidate wr[2] = {{true, false, true}, {true, true, true}};
	bool		take[2];

	(void) state;
	assert_int_equal(zklock_handover_choice(w, 1, false, false, MAX, take), 1);
	assert_true(take[0]);
	/* the releasing writer's read node (same sequence) still sorts ahead */
	assert_int_equal(zklock_handover_choice(w, 1, false, true, MAX, take), 0);
	assert_false(take[0]);
	/* a writer is never handed the lock together with anyone */
	assert_int_equal(zklock_handover_choice(wr, 2, false, false, MAX, take), 0);
	assert_false(take[0]);
	assert_false(take[1]);
}

/* a twin matters only to writers: readers behind a downgrading writer's release still read */
static void
test_handover_twin_readers(void **state)
{
	ZklockHandoverCandidate c[2] = {{true, true, true}, {true, true, true}};
	bool		take[2];

	(void) state;
	assert_int_equal(zklock_handover_choice(c, 2, false, true, MAX, take), 2);
}

/* a read/write waiter whose listing saw more than the released node ahead: not handed */
static void
test_handover_rw_not_last(void **state)
{
	ZklockHandoverCandidate c[1] = {{true, true, false}};
	bool		take[1];

	(void) state;
	assert_int_equal(zklock_handover_choice(c, 1, true, false, MAX, take), 0);
}

/* more eligible waiters than the protocol allows: nobody (be safe) */
static void
test_handover_over_max(void **state)
{
	ZklockHandoverCandidate c[3] = {{true, true, true}, {true, true, true}, {true, true, true}};
	bool		take[3];

	(void) state;
	assert_int_equal(zklock_handover_choice(c, 3, false, false, 2, take), 0);
	assert_false(take[0] || take[1] || take[2]);
	assert_int_equal(zklock_handover_choice(c, 0, true, false, 2, take), 0);
}

/* a create goes without its listing only behind a node of this worker, never a writer's */
static void
test_create_alone(void **state)
{
	(void) state;
	/* mutex behind a local mutex node; read behind a local reader */
	assert_true(zklock_create_alone(false, false, true));
	assert_true(zklock_create_alone(true, true, true));
	/* nothing of ours at the tail: list, as Curator does */
	assert_false(zklock_create_alone(false, false, false));
	assert_false(zklock_create_alone(true, true, false));
	/* a write node always lists, whatever is at the tail */
	assert_false(zklock_create_alone(true, false, true));
	assert_false(zklock_create_alone(true, false, false));
}

/* a node that may guide: of this session, run by this worker, waiting or holding */
static ZklockTailNode
tail_node(ZklockTailState st, bool rw, bool read)
{
	ZklockTailNode n;

	n.state = st;
	n.current_session = true;
	n.known = true;
	n.parked = false;
	n.decided_to_wait = false;
	n.rw = rw;
	n.read = read;
	n.downgrade = false;
	n.has_node = true;
	n.create_sent = false;
	return n;
}

/* a mutex waiter or holder guides a mutex node; nothing else does */
static void
test_tail_mutex(void **state)
{
	ZklockTailNode n = tail_node(ZKLOCK_TAIL_WAITING, false, false);

	(void) state;
	assert_true(zklock_tail_candidate(&n, false, false));
	n.state = ZKLOCK_TAIL_HOLDING;
	assert_true(zklock_tail_candidate(&n, false, true));
	/* a released mutex node is being handed over or deleted: no guide */
	n.state = ZKLOCK_TAIL_RELEASED;
	assert_false(zklock_tail_candidate(&n, false, false));
	n.state = ZKLOCK_TAIL_OTHER;
	assert_false(zklock_tail_candidate(&n, false, false));
	/* a read/write node never guides a mutex node, nor a mutex a reader */
	n = tail_node(ZKLOCK_TAIL_HOLDING, true, true);
	assert_false(zklock_tail_candidate(&n, false, false));
	n = tail_node(ZKLOCK_TAIL_HOLDING, false, false);
	assert_false(zklock_tail_candidate(&n, true, false));
}

/* a session change, a parked request or an unknown node guide nobody */
static void
test_tail_session_and_parked(void **state)
{
	ZklockTailNode n = tail_node(ZKLOCK_TAIL_HOLDING, false, false);

	(void) state;
	n.current_session = false;
	assert_false(zklock_tail_candidate(&n, false, false));
	n = tail_node(ZKLOCK_TAIL_WAITING, false, false);
	n.parked = true;
	assert_false(zklock_tail_candidate(&n, false, false));
	n = tail_node(ZKLOCK_TAIL_WAITING, false, false);
	n.has_node = false;
	n.create_sent = true;
	/* a mutex create on its way is no guide, even before ours */
	assert_false(zklock_tail_candidate(&n, false, true));
}

/* readers: the reader predicate (held, released not withdrawn, still deciding) */
static void
test_tail_reader(void **state)
{
	ZklockTailNode n = tail_node(ZKLOCK_TAIL_HOLDING, true, true);

	(void) state;
	assert_true(zklock_tail_candidate(&n, true, false));
	/* released, its delete not yet left: still sorts ahead */
	n.state = ZKLOCK_TAIL_RELEASED;
	assert_true(zklock_tail_candidate(&n, true, false));
	n.known = false;
	assert_false(zklock_tail_candidate(&n, true, false));
	/* still deciding: guides (its answer is shared) */
	n = tail_node(ZKLOCK_TAIL_WAITING, true, true);
	assert_true(zklock_tail_candidate(&n, true, false));
	/* decided to wait on a writer: guides nobody */
	n.decided_to_wait = true;
	assert_false(zklock_tail_candidate(&n, true, false));
	/* left by an earlier worker: not known, no guide */
	n = tail_node(ZKLOCK_TAIL_WAITING, true, true);
	n.known = false;
	assert_false(zklock_tail_candidate(&n, true, false));
	/* a write node is no guide for a reader */
	n = tail_node(ZKLOCK_TAIL_HOLDING, true, false);
	assert_false(zklock_tail_candidate(&n, true, false));
}

/* the downgrade twin: a write holder's read node carries the writer's number */
static void
test_tail_downgrade_twin(void **state)
{
	ZklockTailNode n = tail_node(ZKLOCK_TAIL_HOLDING, true, true);

	(void) state;
	n.downgrade = true;
	assert_false(zklock_tail_candidate(&n, true, false));
	assert_false(zklock_tail_candidate(&n, true, true));
}

/* before a reader's create, a reader whose create is on its way counts */
static void
test_tail_reader_create_on_its_way(void **state)
{
	ZklockTailNode n = tail_node(ZKLOCK_TAIL_WAITING, true, true);

	(void) state;
	n.has_node = false;
	n.create_sent = true;
	assert_true(zklock_tail_candidate(&n, true, true));
	/* but not as the node right before a given one (its name is unknown) */
	assert_false(zklock_tail_candidate(&n, true, false));
	/* nor when nothing was sent */
	n.create_sent = false;
	assert_false(zklock_tail_candidate(&n, true, true));
	/* nor once it holds without a known node (cannot happen, but no guess) */
	n.state = ZKLOCK_TAIL_HOLDING;
	n.create_sent = true;
	assert_false(zklock_tail_candidate(&n, true, true));
}

/* the wait state's moves: what the worker's setter asserts */
static void
test_wait_moves(void **state)
{
	int			s;

	(void) state;
	/* any wait may end, and from no wait any may start */
	for (s = ZKWS_NONE; s <= ZKWS_PARKED_RECOVER; s++)
	{
		assert_true(zklock_wait_move_ok((ZklockWaitState) s, ZKWS_NONE));
		assert_true(zklock_wait_move_ok(ZKWS_NONE, (ZklockWaitState) s));
	}
	/* a waiter on a node may be chosen for a handover, or parked */
	assert_true(zklock_wait_move_ok(ZKWS_WATCHING, ZKWS_HANDOVER));
	assert_true(zklock_wait_move_ok(ZKWS_LOCAL, ZKWS_HANDOVER));
	assert_true(zklock_wait_move_ok(ZKWS_LOCAL, ZKWS_PARKED));
	assert_true(zklock_wait_move_ok(ZKWS_FOLLOWING, ZKWS_PARKED_RECOVER));
	assert_true(zklock_wait_move_ok(ZKWS_WATCHING, ZKWS_WATCHING));
	/* a handover never becomes a plain wait without looking again */
	assert_false(zklock_wait_move_ok(ZKWS_HANDOVER, ZKWS_WATCHING));
	assert_false(zklock_wait_move_ok(ZKWS_HANDOVER, ZKWS_LOCAL));
	assert_false(zklock_wait_move_ok(ZKWS_HANDOVER, ZKWS_FOLLOWING));
	/* a local wait does not turn into a watch (no watch was set) */
	assert_false(zklock_wait_move_ok(ZKWS_LOCAL, ZKWS_WATCHING));
	assert_false(zklock_wait_move_ok(ZKWS_FOLLOWING, ZKWS_LOCAL));
	/* parked: only resume; once it must look for its node, it keeps that */
	assert_false(zklock_wait_move_ok(ZKWS_PARKED, ZKWS_WATCHING));
	assert_false(zklock_wait_move_ok(ZKWS_PARKED, ZKWS_HANDOVER));
	assert_true(zklock_wait_move_ok(ZKWS_PARKED, ZKWS_PARKED_RECOVER));
	assert_false(zklock_wait_move_ok(ZKWS_PARKED_RECOVER, ZKWS_PARKED));
	/* which waits a fired watch moves on */
	assert_true(zklock_wait_for_event(ZKWS_WATCHING));
	assert_true(zklock_wait_for_event(ZKWS_LOCAL));
	assert_true(zklock_wait_for_event(ZKWS_FOLLOWING));
	assert_false(zklock_wait_for_event(ZKWS_HANDOVER));
	assert_false(zklock_wait_for_event(ZKWS_PARKED));
	assert_false(zklock_wait_for_event(ZKWS_NONE));
}

/* ---------------------------------------------------------------------
 * Skipping a listing by sequence numbers.  A small model of a ZooKeeper
 * parent: its creates (the internal cversion, which numbers sequential
 * children), its children and its incarnation (czxid), and the Stat a
 * listing shows (cversion = 2 * creates - children, DataNode.copyStat).
 * ---------------------------------------------------------------------
 */
typedef struct SimParent
{
	long long	czxid;
	int			creates;
	int			children;
} SimParent;

static long long
sim_create(SimParent *p)
{
	p->children++;
	return p->creates++;
}

static void
sim_delete(SimParent *p)
{
	p->children--;
}

static int
sim_cversion(const SimParent *p)
{
	return 2 * p->creates - p->children;
}

/* the worker lists (only its own nodes there) and its parent watch is answered */
static void
sim_learn(ZklockPathSeq *k, const SimParent *p, unsigned long long conn)
{
	zklock_seq_listed(k, conn, p->czxid, sim_cversion(p), p->children, true);
	assert_true(zklock_seq_watch_answered(k, conn, true, p->czxid));
}

/* what zkCli showed on ZooKeeper 3.8.0: cversion 1,2,3,4 and nodes 0,1,2,3 */
static void
test_next_seq_from_stat(void **state)
{
	(void) state;
	assert_int_equal(zklock_next_seq_from_stat(1, 1), 1);
	assert_int_equal(zklock_next_seq_from_stat(2, 2), 2);
	assert_int_equal(zklock_next_seq_from_stat(3, 1), 2);	/* after a delete */
	assert_int_equal(zklock_next_seq_from_stat(4, 2), 3);
	assert_int_equal(zklock_next_seq_from_stat(6, 0), 3);	/* node 3 came next */
	assert_int_equal(zklock_next_seq_from_stat(0, 0), 0);
	/* not the arithmetic of any server we know: it proves nothing */
	assert_int_equal(zklock_next_seq_from_stat(3, 0), -1);
	assert_int_equal(zklock_next_seq_from_stat(-2, 0), -1);
	assert_int_equal(zklock_node_seq("_c_x-lock-0000000042"), 42);
	assert_int_equal(zklock_node_seq("_c_x-lock-000000004"), -1);
	assert_int_equal(zklock_node_seq("_c_x-lock--000000001"), -1);
	assert_int_equal(zklock_node_seq("abc"), -1);
}

/* one job's own path: create, delete, create... each create proves itself */
static void
test_skip_steady_state(void **state)
{
	SimParent	p = {100, 0, 0};
	ZklockPathSeq k = {0};
	int			cycle;

	(void) state;
	/* first acquire: create and list */
	assert_false(zklock_seq_created(&k, 1, sim_create(&p)));
	sim_learn(&k, &p, 1);
	sim_delete(&p);
	for (cycle = 0; cycle < 5; cycle++)
	{
		bool		proven;

		assert_true(zklock_seq_usable(&k, 1));
		proven = zklock_seq_created(&k, 1, sim_create(&p));
		assert_true(proven);
		assert_true(zklock_first_unlisted(proven, false, false));
		sim_delete(&p);
	}
	/* two of ours in flight, answered in the order sent: both proven */
	assert_true(zklock_seq_created(&k, 1, sim_create(&p)));
	assert_true(zklock_seq_created(&k, 1, sim_create(&p)));
	/* the second is behind the first, a node of this worker: not first */
	assert_false(zklock_first_unlisted(true, true, false));
}

/* a foreign create between ours: not proven, and the knowledge is gone */
static void
test_skip_foreign_create(void **state)
{
	SimParent	p = {100, 0, 0};
	ZklockPathSeq k = {0};

	(void) state;
	(void) sim_create(&p);
	sim_learn(&k, &p, 1);
	sim_delete(&p);
	(void) sim_create(&p);		/* Curator's node */
	assert_false(zklock_seq_created(&k, 1, sim_create(&p)));
	assert_false(zklock_seq_usable(&k, 1));
	/* even when the foreign node is gone again by the next create */
	sim_delete(&p);
	assert_false(zklock_seq_created(&k, 1, sim_create(&p)));
	/* a listing that shows a foreign node teaches nothing usable */
	zklock_seq_listed(&k, 1, p.czxid, sim_cversion(&p), p.children, false);
	assert_true(zklock_seq_watch_answered(&k, 1, true, p.czxid) == false);
	/* created and deleted by someone else before our listing: next is exact */
	p.children = 0;
	(void) sim_create(&p);
	sim_delete(&p);
	sim_learn(&k, &p, 1);
	assert_true(zklock_seq_created(&k, 1, sim_create(&p)));
}

/* a foreign delete between ours: the proof holds, it only took a node away */
static void
test_skip_foreign_delete(void **state)
{
	SimParent	p = {100, 0, 0};
	ZklockPathSeq k = {0};
	bool		proven;

	(void) state;
	(void) sim_create(&p);		/* ours, still held */
	sim_learn(&k, &p, 1);
	sim_delete(&p);				/* deleted from outside */
	proven = zklock_seq_created(&k, 1, sim_create(&p));
	assert_true(proven);
	/* the worker still counts its held node ahead: it lists, never wrongly first */
	assert_false(zklock_first_unlisted(proven, true, false));
	/* a delete of ours not answered yet: its node may be there */
	assert_false(zklock_first_unlisted(proven, false, true));
}

/* the container reaped and made again numbers from 0: its watch forgets */
static void
test_skip_container_recreated(void **state)
{
	SimParent	p = {100, 0, 0};
	SimParent	again = {200, 0, 0};
	ZklockPathSeq k = {0};
	long long	seq;

	(void) state;
	(void) sim_create(&p);
	sim_learn(&k, &p, 1);
	sim_delete(&p);
	/* reaped; someone else makes it again and one child: number 0 taken */
	(void) sim_create(&again);
	zklock_seq_forget(&k);		/* the parent's watch fired */
	seq = sim_create(&again);
	assert_int_equal(seq, k.next);	/* the numbers meet by chance... */
	assert_false(zklock_seq_created(&k, 1, seq));	/* ...and prove nothing */
	/* a watch answered for another incarnation than the one listed */
	zklock_seq_listed(&k, 1, p.czxid, sim_cversion(&p), p.children, true);
	assert_false(zklock_seq_watch_answered(&k, 1, true, again.czxid));
	assert_false(zklock_seq_usable(&k, 1));
	/* the parent gone when the watch was set */
	zklock_seq_listed(&k, 1, p.czxid, sim_cversion(&p), p.children, true);
	assert_false(zklock_seq_watch_answered(&k, 1, false, 0));
	/* a new listing learns the new parent */
	sim_learn(&k, &again, 1);
	assert_true(zklock_seq_created(&k, 1, sim_create(&again)));
}

/* a reconnect, a new session or a new worker process: list again */
static void
test_skip_connection_change(void **state)
{
	SimParent	p = {100, 0, 0};
	ZklockPathSeq k = {0};
	ZklockPathSeq fresh = {0};

	(void) state;
	(void) sim_create(&p);
	sim_learn(&k, &p, 1);
	sim_delete(&p);
	assert_false(zklock_seq_usable(&k, 2));
	assert_false(zklock_seq_created(&k, 2, sim_create(&p)));
	/* a watch answered on an earlier connection does not carry over */
	zklock_seq_listed(&k, 1, p.czxid, sim_cversion(&p), p.children, true);
	assert_true(k.watched == false);
	assert_false(zklock_seq_watch_answered(&k, 2, true, p.czxid));
	/* a worker that starts knows nothing */
	assert_false(zklock_seq_usable(&fresh, 0));
	assert_false(zklock_seq_created(&fresh, 0, 0));
	/* answers out of the order sent (never on one session) prove nothing */
	sim_learn(&k, &p, 3);
	assert_false(zklock_seq_created(&k, 3, k.next + 1));
}

/* a multi never holds two creates under one parent: they would share a token */
static void
test_batch_take(void **state)
{
	const char *const mixed[] = {NULL, "/a", NULL, "/b", "/c", NULL};
	const char *const twice[] = {"/a", NULL, "/b", "/a", "/c"};
	const char *const deletes[] = {NULL, NULL, NULL, NULL};
	const char *const same[] = {"/a", "/a"};

	(void) state;
	assert_int_equal(zklock_batch_take(mixed, 6, 16), 6);
	assert_int_equal(zklock_batch_take(mixed, 6, 4), 4);
	assert_int_equal(zklock_batch_take(twice, 5, 16), 3);	/* the second /a waits */
	assert_int_equal(zklock_batch_take(twice + 3, 2, 16), 2);
	assert_int_equal(zklock_batch_take(deletes, 4, 16), 4);
	assert_int_equal(zklock_batch_take(same, 2, 16), 1);
	assert_int_equal(zklock_batch_take(same, 0, 16), 0);
}

/* lock caching: a fresh plain mutex of the node's backend takes it */
static void
test_cache_take(void **state)
{
	ZklockCacheTakeFacts ok = {
		.enabled = true, .mutex = true, .fresh = true, .revocable = false,
		.downgrade = false, .contended = false, .same_session = true,
		.lease_valid = true, .same_identity = true,
	};
	ZklockCacheTakeFacts f;

	(void) state;
	assert_true(zklock_cache_may_take(&ok));
	f = ok; f.enabled = false;
	assert_false(zklock_cache_may_take(&f));
	f = ok; f.mutex = false;			/* a write lock, a lease, a latch */
	assert_false(zklock_cache_may_take(&f));
	f = ok; f.fresh = false;			/* a create of its own in doubt */
	assert_false(zklock_cache_may_take(&f));
	f = ok; f.revocable = true;
	assert_false(zklock_cache_may_take(&f));
	f = ok; f.downgrade = true;
	assert_false(zklock_cache_may_take(&f));
	f = ok; f.contended = true;			/* someone else may be queued */
	assert_false(zklock_cache_may_take(&f));
	f = ok; f.same_session = false;		/* the node went with its session */
	assert_false(zklock_cache_may_take(&f));
	f = ok; f.lease_valid = false;		/* nothing proves the session alive */
	assert_false(zklock_cache_may_take(&f));
	f = ok; f.same_identity = false;	/* the data would name another backend */
	assert_false(zklock_cache_may_take(&f));
}

/* lock caching: what a release does with its node */
static void
test_cache_keep(void **state)
{
	ZklockCacheKeepFacts ok = {
		.enabled = true, .mutex = true, .handed_over = 0, .contended = false,
		.revocable = false, .token_asked = false, .downgrade = false,
		.has_node = true, .connected = true, .same_session = true,
		.parked = false, .alone = true, .cooling = false,
	};
	ZklockCacheKeepFacts f;

	(void) state;
	assert_int_equal(zklock_cache_keep_decide(&ok), ZKLOCK_CACHE_KEEP);
	/* handed over locally: deleted, and no cooling (nobody else came) */
	f = ok; f.handed_over = 1;
	assert_int_equal(zklock_cache_keep_decide(&f), ZKLOCK_CACHE_DELETE);
	f = ok; f.handed_over = 1; f.contended = true;
	assert_int_equal(zklock_cache_keep_decide(&f), ZKLOCK_CACHE_DELETE);
	/* someone else queued behind it and nobody of ours takes over */
	f = ok; f.contended = true;
	assert_int_equal(zklock_cache_keep_decide(&f), ZKLOCK_CACHE_DELETE_COOL);
	f = ok; f.enabled = false;
	assert_int_equal(zklock_cache_keep_decide(&f), ZKLOCK_CACHE_DELETE);
	f = ok; f.mutex = false;
	assert_int_equal(zklock_cache_keep_decide(&f), ZKLOCK_CACHE_DELETE);
	f = ok; f.revocable = true;
	assert_int_equal(zklock_cache_keep_decide(&f), ZKLOCK_CACHE_DELETE);
	f = ok; f.token_asked = true;		/* tokens grow from holder to holder */
	assert_int_equal(zklock_cache_keep_decide(&f), ZKLOCK_CACHE_DELETE);
	f = ok; f.downgrade = true;
	assert_int_equal(zklock_cache_keep_decide(&f), ZKLOCK_CACHE_DELETE);
	f = ok; f.has_node = false;
	assert_int_equal(zklock_cache_keep_decide(&f), ZKLOCK_CACHE_DELETE);
	f = ok; f.connected = false;
	assert_int_equal(zklock_cache_keep_decide(&f), ZKLOCK_CACHE_DELETE);
	f = ok; f.same_session = false;
	assert_int_equal(zklock_cache_keep_decide(&f), ZKLOCK_CACHE_DELETE);
	f = ok; f.parked = true;
	assert_int_equal(zklock_cache_keep_decide(&f), ZKLOCK_CACHE_DELETE);
	/* another request of ours on the path: its create may be on its way */
	f = ok; f.alone = false;
	assert_int_equal(zklock_cache_keep_decide(&f), ZKLOCK_CACHE_DELETE);
	f = ok; f.cooling = true;
	assert_int_equal(zklock_cache_keep_decide(&f), ZKLOCK_CACHE_DELETE);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_place_no_owner_lists),
		cmocka_unit_test(test_place_after_released_reader_joins),
		cmocka_unit_test(test_place_behind_reader),
		cmocka_unit_test(test_place_mutex_behind_local_node),
		cmocka_unit_test(test_handover_mutex_waiter),
		cmocka_unit_test(test_handover_not_held_mutex),
		cmocka_unit_test(test_handover_readers_together),
		cmocka_unit_test(test_handover_writer),
		cmocka_unit_test(test_handover_twin_readers),
		cmocka_unit_test(test_handover_rw_not_last),
		cmocka_unit_test(test_handover_over_max),
		cmocka_unit_test(test_create_alone),
		cmocka_unit_test(test_tail_mutex),
		cmocka_unit_test(test_tail_session_and_parked),
		cmocka_unit_test(test_tail_reader),
		cmocka_unit_test(test_tail_downgrade_twin),
		cmocka_unit_test(test_tail_reader_create_on_its_way),
		cmocka_unit_test(test_wait_moves),
		cmocka_unit_test(test_next_seq_from_stat),
		cmocka_unit_test(test_skip_steady_state),
		cmocka_unit_test(test_skip_foreign_create),
		cmocka_unit_test(test_skip_foreign_delete),
		cmocka_unit_test(test_skip_container_recreated),
		cmocka_unit_test(test_skip_connection_change),
		cmocka_unit_test(test_batch_take),
		cmocka_unit_test(test_cache_take),
		cmocka_unit_test(test_cache_keep),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

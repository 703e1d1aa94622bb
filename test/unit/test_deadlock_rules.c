/*
 * Unit tests of the deadlock detector's rules (src/core/deadlock_rules.c),
 * with cmocka.
 *
 * What users rely on: a cycle of waits among zklock locks (and
 * PostgreSQL's own locks) is broken by failing exactly one of its
 * waiters, and a chain of waits that is no cycle fails nobody.  These
 * tests pin down which holds block which waits, that a cycle is found
 * only when it comes back to the checking process, and that two members
 * of one cycle checking at once cannot both be the victim.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <string.h>
#include <cmocka.h>

#include "core/deadlock_rules.h"

#define MAXE 16

/* a zklock edge: waiter's request in slot ws, holder's hold in slot hs */
static ZklockWaitEdge
zk_edge(int32_t waiter, int32_t holder, int ws, int hs)
{
	ZklockWaitEdge e;

	e.waiter = waiter;
	e.holder = holder;
	e.wait_key = ZKLOCK_DL_KEY(ws, 1);
	e.hold_key = ZKLOCK_DL_KEY(hs, 1);
	e.behind_waiting = false;
	return e;
}

/* a heavyweight edge (no keys) */
static ZklockWaitEdge
hw_edge(int32_t waiter, int32_t holder)
{
	ZklockWaitEdge e;

	e.waiter = waiter;
	e.holder = holder;
	e.wait_key = 0;
	e.hold_key = 0;
	e.behind_waiting = false;
	return e;
}

static int
find(const ZklockWaitEdge *edges, int n, int32_t start, int *cycle)
{
	int			work[2 * MAXE];

	return zklock_wait_cycle(edges, n, start, work, cycle, MAXE);
}

static void
test_blocks(void **state)
{
	(void) state;
	assert_true(zklock_deadlock_blocks(ZKDL_MUTEX, ZKDL_MUTEX));
	assert_false(zklock_deadlock_blocks(ZKDL_MUTEX, ZKDL_WRITE));
	/* a reader waits for writers only */
	assert_true(zklock_deadlock_blocks(ZKDL_READ, ZKDL_WRITE));
	assert_false(zklock_deadlock_blocks(ZKDL_READ, ZKDL_READ));
	/* a writer for everyone of its lock */
	assert_true(zklock_deadlock_blocks(ZKDL_WRITE, ZKDL_READ));
	assert_true(zklock_deadlock_blocks(ZKDL_WRITE, ZKDL_WRITE));
	assert_false(zklock_deadlock_blocks(ZKDL_WRITE, ZKDL_MUTEX));
	/* a semaphore of one lease waits for every lease held */
	assert_true(zklock_deadlock_blocks(ZKDL_LEASE_ONE, ZKDL_LEASE_ONE));
	assert_true(zklock_deadlock_blocks(ZKDL_LEASE_ONE, ZKDL_LEASE));
	/* a larger semaphore's waiter needs any one of them: no edge */
	assert_false(zklock_deadlock_blocks(ZKDL_LEASE, ZKDL_LEASE));
	assert_false(zklock_deadlock_blocks(ZKDL_LEASE, ZKDL_LEASE_ONE));
	assert_false(zklock_deadlock_blocks(ZKDL_NONE, ZKDL_MUTEX));
	assert_false(zklock_deadlock_blocks(ZKDL_MUTEX, ZKDL_NONE));
	/* whose waits are worth a check */
	assert_true(zklock_deadlock_waits(ZKDL_MUTEX));
	assert_true(zklock_deadlock_waits(ZKDL_READ));
	assert_true(zklock_deadlock_waits(ZKDL_WRITE));
	assert_true(zklock_deadlock_waits(ZKDL_LEASE_ONE));
	/* a larger semaphore's acquirer queues in the P/locks gate first */
	assert_true(zklock_deadlock_waits(ZKDL_LEASE));
	assert_false(zklock_deadlock_waits(ZKDL_NONE));
}

/* /a then /b against /b then /a */
static void
test_two_party_cycle(void **state)
{
	ZklockWaitEdge e[2];
	int			cycle[MAXE];

	(void) state;
	e[0] = zk_edge(100, 200, 1, 2);
	e[1] = zk_edge(200, 100, 3, 0);
	assert_int_equal(find(e, 2, 100, cycle), 2);
	assert_int_equal(cycle[0], 0);
	assert_int_equal(cycle[1], 1);
	/* the other member finds the same cycle from its side */
	assert_int_equal(find(e, 2, 200, cycle), 2);
	assert_int_equal(cycle[0], 1);
	assert_int_equal(cycle[1], 0);
}

/* a zklock wait and a row lock: S1 -> S2 by zklock, S2 -> S1 by a row */
static void
test_mixed_cycle(void **state)
{
	ZklockWaitEdge e[2];
	int			cycle[MAXE];

	(void) state;
	e[0] = hw_edge(200, 100);
	e[1] = zk_edge(100, 200, 1, 2);
	assert_int_equal(find(e, 2, 100, cycle), 2);
	assert_int_equal(cycle[0], 1);
	assert_int_equal(cycle[1], 0);
}

/* x -> y -> z -> x, with a branch that leads nowhere */
static void
test_three_party_cycle_and_branches(void **state)
{
	ZklockWaitEdge e[5];
	int			cycle[MAXE];

	(void) state;
	e[0] = zk_edge(1, 4, 10, 40);	/* 1 also waits for 4, who waits for nothing */
	e[1] = zk_edge(1, 2, 10, 20);
	e[2] = zk_edge(2, 3, 21, 30);
	e[3] = hw_edge(3, 5);
	e[4] = zk_edge(3, 1, 31, 11);
	assert_int_equal(find(e, 5, 1, cycle), 3);
	assert_int_equal(cycle[0], 1);
	assert_int_equal(cycle[1], 2);
	assert_int_equal(cycle[2], 4);
}

/* a chain that is no cycle, and a cycle that does not pass the checker */
static void
test_no_cycle_through_me(void **state)
{
	ZklockWaitEdge e[4];
	int			cycle[MAXE];

	(void) state;
	/* 1 -> 2 -> 3, 3 waits for nothing (merely slow) */
	e[0] = zk_edge(1, 2, 10, 20);
	e[1] = hw_edge(2, 3);
	assert_int_equal(find(e, 2, 1, cycle), 0);
	/* 1 -> 2, and 2 <-> 3 deadlocked among themselves: not 1's to break */
	e[2] = hw_edge(3, 2);
	assert_int_equal(find(e, 3, 1, cycle), 0);
	/* no edges at all */
	assert_int_equal(find(e, 0, 1, cycle), 0);
	/* an edge of a process to itself is never a cycle */
	e[3] = zk_edge(1, 1, 10, 11);
	assert_int_equal(find(&e[3], 1, 1, cycle), 0);
}

/* the shortest cycle is the one reported, and a too long one none */
static void
test_shortest_and_maxlen(void **state)
{
	ZklockWaitEdge e[4];
	int			cycle[MAXE];
	int			work[8];

	(void) state;
	e[0] = zk_edge(1, 2, 10, 20);
	e[1] = zk_edge(2, 3, 21, 30);
	e[2] = zk_edge(3, 1, 31, 11);
	e[3] = hw_edge(2, 1);
	assert_int_equal(find(e, 4, 1, cycle), 2);
	assert_int_equal(cycle[0], 0);
	assert_int_equal(cycle[1], 3);
	/* only the three-edge cycle, with room for two: none reported */
	assert_int_equal(zklock_wait_cycle(e, 3, 1, work, cycle, 2), 0);
	assert_int_equal(zklock_wait_cycle(e, 3, 1, work, cycle, 3), 3);
}

/* what a checker's re-check sees: the keys of the zklock edges still live */
typedef struct LiveSet
{
	uint64_t	withdrawn[4];	/* wait keys withdrawn */
	int			n;
} LiveSet;

static bool
live_edge(const ZklockWaitEdge *e, void *arg)
{
	LiveSet    *set = arg;
	int			i;

	for (i = 0; i < set->n; i++)
		if (set->withdrawn[i] == e->wait_key)
			return false;
	return true;
}

/*
 * Two members of one cycle check at once: the first to re-check under the
 * lock withdraws its wait; the second's re-check then finds the cycle
 * broken.  Exactly one victim.
 */
static void
test_one_victim(void **state)
{
	ZklockWaitEdge e[2];
	int			c1[MAXE];
	int			c2[MAXE];
	int			n1;
	int			n2;
	LiveSet		set = {{0}, 0};

	(void) state;
	e[0] = zk_edge(100, 200, 1, 2);
	e[1] = zk_edge(200, 100, 3, 0);
	n1 = find(e, 2, 100, c1);
	n2 = find(e, 2, 200, c2);
	assert_int_equal(n1, 2);
	assert_int_equal(n2, 2);

	/* 100 re-checks first: the cycle stands, it withdraws its wait */
	assert_true(zklock_cycle_stands(e, c1, n1, live_edge, &set));
	set.withdrawn[set.n++] = e[c1[0]].wait_key;
	/* 200 re-checks next: 100's edge is gone, no victim */
	assert_false(zklock_cycle_stands(e, c2, n2, live_edge, &set));
}

/* heavyweight edges are not re-checked here; an empty cycle never stands */
static void
test_stands_edges(void **state)
{
	ZklockWaitEdge e[2];
	int			c[2] = {1, 0};
	LiveSet		set = {{0}, 0};

	(void) state;
	e[0] = hw_edge(200, 100);
	e[1] = zk_edge(100, 200, 1, 2);
	assert_true(zklock_cycle_stands(e, c, 2, live_edge, &set));
	set.withdrawn[set.n++] = e[1].wait_key;
	assert_false(zklock_cycle_stands(e, c, 2, live_edge, &set));
	assert_false(zklock_cycle_stands(e, c, 0, live_edge, &set));
}

static void
test_keys(void **state)
{
	uint64_t	k = ZKLOCK_DL_KEY(999999, 0xfffffffeU);

	(void) state;
	assert_int_equal(ZKLOCK_DL_KEY_IDX(k), 999999);
	assert_int_equal(ZKLOCK_DL_KEY_SERIAL(k), 0xfffffffeU);
	assert_true(ZKLOCK_DL_KEY(0, 1) != 0);
}

/*
 * Across clusters: two clusters' records in opposite order (A holds /a's
 * node and waits behind /b's; B the other way) give a cycle that crosses
 * sessions; a chain that ends at a record waiting for nothing, or at a
 * node nobody's record holds, gives none; a cycle of one session's
 * records is left to its own detector.
 */
static void
test_record_edges(void **state)
{
	const char *a_ahead[] = {"/b/n1"};
	const char *a_holds[] = {"/a/n1", "/x/n3"};
	const char *b_ahead[] = {"/c/n0", "/a/n1"};
	const char *b_holds[] = {"/b/n1"};
	const char *c_ahead[] = {"/gone/n9"};
	const char *c_holds[] = {"/c/n0"};
	ZklockWaitRecord recs[3];
	ZklockWaitEdge edges[MAXE];
	int			cycle[MAXE];
	int			n;
	int			len;

	(void) state;
	recs[0] = (ZklockWaitRecord) {"s1", a_ahead, 1, a_holds, 2, "/b/n2"};
	recs[1] = (ZklockWaitRecord) {"s2", b_ahead, 2, b_holds, 1, "/a/n5"};
	recs[2] = (ZklockWaitRecord) {"s2", c_ahead, 1, c_holds, 1, "/gone/n10"};
	n = zklock_record_edges(recs, 3, edges, MAXE);
	/* 0 -> 1 (/b/n1), 1 -> 0 (/a/n1, its second node ahead), 1 -> 2 (/c/n0) */
	assert_int_equal(n, 3);
	assert_int_equal(edges[0].waiter, 0);
	assert_int_equal(edges[0].holder, 1);
	assert_int_equal((int) edges[0].hold_key, 0);
	assert_int_equal(edges[1].waiter, 1);
	assert_int_equal(edges[1].holder, 0);
	assert_int_equal((int) edges[1].hold_key, 1);
	assert_int_equal(edges[2].holder, 2);
	len = find(edges, n, 0, cycle);
	assert_int_equal(len, 2);
	assert_true(zklock_cycle_crosses(recs, edges, cycle, len));
	/* record 2 waits behind a node nobody holds: no cycle through it */
	assert_int_equal(find(edges, n, 2, cycle), 0);

	/* the same cycle published by one session: its cluster's own */
	recs[1].session = "s1";
	len = find(edges, n, 1, cycle);
	assert_int_equal(len, 2);
	assert_false(zklock_cycle_crosses(recs, edges, cycle, len));

	/* a holder that released (its record no longer lists the node) */
	recs[1].nholds = 0;
	n = zklock_record_edges(recs, 3, edges, MAXE);
	assert_int_equal(find(edges, n, 0, cycle), 0);
	/* maxedges bounds the answer */
	recs[1].nholds = 1;
	assert_int_equal(zklock_record_edges(recs, 3, edges, 1), 1);
}

/* a node of a request in a lock's queue */
static ZklockQueueNode
qn(ZklockDeadlockMode mode, ZklockQueue queue, int64_t seq, bool waits)
{
	ZklockQueueNode n;

	n.mode = mode;
	n.queue = queue;
	n.seq = seq;
	n.waits = waits;
	return n;
}

/*
 * Which node of the queue a waiter waits for: every node ahead of it that
 * keeps it out by Curator's rule, whether its request holds or waits; no
 * node behind it, none of the other family, none of another queue.
 */
static void
test_queue_blocks(void **state)
{
	ZklockQueueNode reader = qn(ZKDL_READ, ZKQ_LOCK, 7, true);
	ZklockQueueNode writer = qn(ZKDL_WRITE, ZKQ_LOCK, 7, true);
	ZklockQueueNode mutex = qn(ZKDL_MUTEX, ZKQ_LOCK, 7, true);
	ZklockQueueNode n;

	(void) state;
	/* a reader: the write nodes ahead, held or waiting, only */
	n = qn(ZKDL_WRITE, ZKQ_LOCK, 5, true);
	assert_true(zklock_queue_blocks(&reader, &n));
	n.waits = false;
	assert_true(zklock_queue_blocks(&reader, &n));
	n = qn(ZKDL_READ, ZKQ_LOCK, 5, true);
	assert_false(zklock_queue_blocks(&reader, &n));
	n = qn(ZKDL_WRITE, ZKQ_LOCK, 9, true);	/* behind it */
	assert_false(zklock_queue_blocks(&reader, &n));
	n = qn(ZKDL_WRITE, ZKQ_LOCK, 7, false);	/* a downgrade's own place */
	assert_false(zklock_queue_blocks(&reader, &n));

	/* a writer: every node ahead; a held read node behind it does not */
	n = qn(ZKDL_READ, ZKQ_LOCK, 5, true);
	assert_true(zklock_queue_blocks(&writer, &n));
	n = qn(ZKDL_WRITE, ZKQ_LOCK, 6, true);
	assert_true(zklock_queue_blocks(&writer, &n));
	n = qn(ZKDL_READ, ZKQ_LOCK, 9, false);
	assert_false(zklock_queue_blocks(&writer, &n));

	/* a mutex: the mutex nodes ahead; no edge to the other family */
	n = qn(ZKDL_MUTEX, ZKQ_LOCK, 3, true);
	assert_true(zklock_queue_blocks(&mutex, &n));
	n = qn(ZKDL_WRITE, ZKQ_LOCK, 3, false);
	assert_false(zklock_queue_blocks(&mutex, &n));
	n = qn(ZKDL_MUTEX, ZKQ_LOCK, -1, true);	/* not placed yet: behind */
	assert_false(zklock_queue_blocks(&mutex, &n));

	/* a holder waits for nobody */
	n = qn(ZKDL_MUTEX, ZKQ_LOCK, 3, true);
	mutex.waits = false;
	assert_false(zklock_queue_blocks(&mutex, &n));
	mutex.waits = true;

	/* not placed yet (its create unanswered): holders only */
	mutex.seq = -1;
	n = qn(ZKDL_MUTEX, ZKQ_LOCK, 3, false);
	assert_true(zklock_queue_blocks(&mutex, &n));
	n.waits = true;
	assert_false(zklock_queue_blocks(&mutex, &n));
	mutex.seq = 7;

	/* the P/locks gate: every gate node ahead, of either semaphore kind */
	n = qn(ZKDL_LEASE, ZKQ_GATE, 2, true);
	{
		ZklockQueueNode g1 = qn(ZKDL_LEASE_ONE, ZKQ_GATE, 4, true);
		ZklockQueueNode g2 = qn(ZKDL_LEASE, ZKQ_GATE, 4, true);

		assert_true(zklock_queue_blocks(&g1, &n));
		assert_true(zklock_queue_blocks(&g2, &n));
		assert_false(zklock_queue_blocks(&n, &g1));
		/* another queue of the same path */
		n.queue = ZKQ_LEASES;
		assert_false(zklock_queue_blocks(&g1, &n));
	}

	/* leases: one lease waits for every lease held, more leases for none */
	{
		ZklockQueueNode one = qn(ZKDL_LEASE_ONE, ZKQ_LEASES, 8, true);
		ZklockQueueNode many = qn(ZKDL_LEASE, ZKQ_LEASES, 8, true);

		n = qn(ZKDL_LEASE, ZKQ_LEASES, 9, false);
		assert_true(zklock_queue_blocks(&one, &n));
		n.mode = ZKDL_LEASE_ONE;
		assert_true(zklock_queue_blocks(&one, &n));
		assert_false(zklock_queue_blocks(&many, &n));
		n.waits = true;
		assert_false(zklock_queue_blocks(&one, &n));
	}
}

/*
 * The soft cycle of PostgreSQL's deadlock-soft spec, in zklock queues:
 * d1 holds a read node of /a1 and d2 one of /a2; e1 and e2 queue writers
 * behind them; d1 asks to read /a2 behind e2's waiting writer, d2 to read
 * /a1 behind e1's.  Every edge stands, two of them behind a waiting node:
 * a cycle of four, found from each member.
 */
static void
test_soft_cycle(void **state)
{
	/* pids: d1 = 1, d2 = 2, e1 = 3, e2 = 4; sequences per path */
	ZklockQueueNode d1_a1 = qn(ZKDL_READ, ZKQ_LOCK, 0, false);
	ZklockQueueNode e1_a1 = qn(ZKDL_WRITE, ZKQ_LOCK, 1, true);
	ZklockQueueNode d2_a1 = qn(ZKDL_READ, ZKQ_LOCK, 2, true);
	ZklockQueueNode d2_a2 = qn(ZKDL_READ, ZKQ_LOCK, 0, false);
	ZklockQueueNode e2_a2 = qn(ZKDL_WRITE, ZKQ_LOCK, 1, true);
	ZklockQueueNode d1_a2 = qn(ZKDL_READ, ZKQ_LOCK, 2, true);
	ZklockWaitEdge edges[MAXE];
	int			cycle[MAXE];
	int			n = 0;
	int			start;

	(void) state;
	/* /a1: e1 -> d1 (held), d2 -> e1 (waiting); d2 is not behind d1 */
	assert_true(zklock_queue_blocks(&e1_a1, &d1_a1));
	assert_true(zklock_queue_blocks(&d2_a1, &e1_a1));
	assert_false(zklock_queue_blocks(&d2_a1, &d1_a1));
	/* /a2 likewise */
	assert_true(zklock_queue_blocks(&e2_a2, &d2_a2));
	assert_true(zklock_queue_blocks(&d1_a2, &e2_a2));

	edges[n++] = zk_edge(3, 1, 3, 1);	/* e1 -> d1 */
	edges[n] = zk_edge(2, 3, 2, 3);		/* d2 -> e1, behind a waiting node */
	edges[n++].behind_waiting = true;
	edges[n++] = zk_edge(4, 2, 4, 2);	/* e2 -> d2 */
	edges[n] = zk_edge(1, 4, 1, 4);		/* d1 -> e2, behind a waiting node */
	edges[n++].behind_waiting = true;
	for (start = 1; start <= 4; start++)
		assert_int_equal(find(edges, n, start, cycle), 4);

	/* without the edges behind waiting nodes (the rule before): none */
	edges[0] = edges[2];
	assert_int_equal(find(edges, 2, 1, cycle), 0);
}

/*
 * Across clusters, an edge rests on another record's waiting node too: a
 * reader of cluster A queued behind a waiting writer of cluster B, that
 * writer behind a read node B holds, B's holder waiting for A's mutex.
 */
static void
test_record_edges_waiting(void **state)
{
	const char *a_ahead[] = {"/r/w1"};
	const char *a_holds[] = {"/m/l0"};
	const char *w_ahead[] = {"/r/r0"};
	const char *b_ahead[] = {"/m/l0"};
	const char *b_holds[] = {"/r/r0"};
	ZklockWaitRecord recs[3];
	ZklockWaitEdge edges[MAXE];
	int			cycle[MAXE];
	int			n;
	int			len;
	int			i;
	bool		seen_waiting = false;

	(void) state;
	recs[0] = (ZklockWaitRecord) {"sA", a_ahead, 1, a_holds, 1, "/r/r2"};
	recs[1] = (ZklockWaitRecord) {"sB", w_ahead, 1, NULL, 0, "/r/w1"};
	recs[2] = (ZklockWaitRecord) {"sB", b_ahead, 1, b_holds, 1, "/m/l1"};
	n = zklock_record_edges(recs, 3, edges, MAXE);
	assert_int_equal(n, 3);
	for (i = 0; i < n; i++)
	{
		if (edges[i].waiter == 0)
		{
			assert_int_equal(edges[i].holder, 1);
			assert_true(edges[i].behind_waiting);
			seen_waiting = true;
		}
		else
			assert_false(edges[i].behind_waiting);
	}
	assert_true(seen_waiting);
	len = find(edges, n, 0, cycle);
	assert_int_equal(len, 3);
	assert_true(zklock_cycle_crosses(recs, edges, cycle, len));

	/* the writer's record left out (a victim's, or gone): no cycle */
	recs[1].node = NULL;
	recs[1].nahead = 0;
	n = zklock_record_edges(recs, 3, edges, MAXE);
	assert_int_equal(find(edges, n, 0, cycle), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_blocks),
		cmocka_unit_test(test_two_party_cycle),
		cmocka_unit_test(test_mixed_cycle),
		cmocka_unit_test(test_three_party_cycle_and_branches),
		cmocka_unit_test(test_no_cycle_through_me),
		cmocka_unit_test(test_shortest_and_maxlen),
		cmocka_unit_test(test_one_victim),
		cmocka_unit_test(test_stands_edges),
		cmocka_unit_test(test_keys),
		cmocka_unit_test(test_record_edges),
		cmocka_unit_test(test_queue_blocks),
		cmocka_unit_test(test_soft_cycle),
		cmocka_unit_test(test_record_edges_waiting),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

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
	assert_false(zklock_deadlock_waits(ZKDL_LEASE));
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
	recs[0] = (ZklockWaitRecord) {"s1", a_ahead, 1, a_holds, 2};
	recs[1] = (ZklockWaitRecord) {"s2", b_ahead, 2, b_holds, 1};
	recs[2] = (ZklockWaitRecord) {"s2", c_ahead, 1, c_holds, 1};
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
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/*-------------------------------------------------------------------------
 *
 * test_ghosts.c
 *		cmocka unit tests of zklock_find_ghosts (src/core/names.c): which
 *		children of a lock's listing carry the protection prefix of one of
 *		the worker's live requests without being its node.
 *
 * test/unit/test_ghosts.c
 *
 *-------------------------------------------------------------------------
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/curator_rules.h"

#define U1 "53345f98-9423-4e0c-a7b5-9f819e3ec2e1"
#define U2 "0b1e2c3d-4f5a-4b6c-8d7e-9f0a1b2c3d4e"
#define U3 "ffeeddcc-bbaa-4998-8877-665544332211"
#define CUR "9e1d7a3c-55b0-4c8e-9a61-2f4b8d0c7e15"	/* a Curator client */

#define LOCK(u, seq) "_c_" u "-lock-" seq

/* ghosts of children given the live ids; returns the count, fills out */
static int
ghosts_of(char **children, int n, ZklockLiveId *live, int nlive, int *out)
{
	return zklock_find_ghosts(children, n, live, nlive, out);
}

static void
test_own_node_kept(void **state)
{
	char	   *kids[] = {LOCK(CUR, "0000000001"), LOCK(U1, "0000000002")};
	ZklockLiveId live[] = {{U1, LOCK(U1, "0000000002")}};
	int			g[2];

	(void) state;
	assert_int_equal(ghosts_of(kids, 2, live, 1, g), 0);
}

static void
test_ghost_lower_sequence_deleted(void **state)
{
	/* the late create landed first: it sorts ahead of everybody */
	char	   *kids[] = {LOCK(U1, "0000000003"), LOCK(U1, "0000000000"),
	LOCK(CUR, "0000000001")};
	ZklockLiveId live[] = {{U1, LOCK(U1, "0000000003")}};
	int			g[3];

	(void) state;
	assert_int_equal(ghosts_of(kids, 3, live, 1, g), 1);
	assert_int_equal(g[0], 1);
}

static void
test_ghost_higher_sequence_deleted(void **state)
{
	char	   *kids[] = {LOCK(U1, "0000000002"), LOCK(CUR, "0000000003"),
	LOCK(U1, "0000000007")};
	ZklockLiveId live[] = {{U1, LOCK(U1, "0000000002")}};
	int			g[3];

	(void) state;
	assert_int_equal(ghosts_of(kids, 3, live, 1, g), 1);
	assert_int_equal(g[0], 2);
}

static void
test_create_in_flight_kept(void **state)
{
	/* no node known yet: either may be the one the request adopts */
	char	   *kids[] = {LOCK(U1, "0000000000"), LOCK(U1, "0000000004")};
	ZklockLiveId live_empty[] = {{U1, ""}};
	ZklockLiveId live_null[] = {{U1, NULL}};
	int			g[2];

	(void) state;
	assert_int_equal(ghosts_of(kids, 2, live_empty, 1, g), 0);
	assert_int_equal(ghosts_of(kids, 2, live_null, 1, g), 0);
}

static void
test_foreign_nodes_never_touched(void **state)
{
	/* Curator's protected nodes, unprotected names, odd near-misses */
	char	   *kids[] = {
		LOCK(CUR, "0000000000"),
		"lock-0000000001",
		"_c_" U1 "lock-0000000002",		/* no dash after the id */
		"_c_" "53345F98-9423-4e0c-a7b5-9f819e3ec2e1" "-lock-0000000003",	/* not as Java prints */
		"_c_53345f98",
		"ready",
		U1,						/* a double barrier member named by our id */
		"_x_" U1 "-lock-0000000004",
	};
	ZklockLiveId live[] = {{U1, LOCK(U1, "0000000009")}};
	int			g[8];

	(void) state;
	assert_int_equal(ghosts_of(kids, 8, live, 1, g), 0);
}

static void
test_two_ghosts(void **state)
{
	char	   *kids[] = {LOCK(U1, "0000000000"), LOCK(CUR, "0000000001"),
		LOCK(U1, "0000000002"), LOCK(U1, "0000000005"), LOCK(U2, "0000000006")};
	ZklockLiveId live[] = {{U2, LOCK(U2, "0000000006")}, {U1, LOCK(U1, "0000000002")}};
	int			g[5];

	(void) state;
	assert_int_equal(ghosts_of(kids, 5, live, 2, g), 2);
	assert_int_equal(g[0], 0);
	assert_int_equal(g[1], 3);
}

static void
test_many_requests_lookup(void **state)
{
	/* several live ids, unsorted; each child is matched to its own id */
	char	   *kids[] = {LOCK(U3, "0000000001"), LOCK(U2, "0000000002"),
		LOCK(U1, "0000000003"), LOCK(U3, "0000000004"), LOCK(U2, "0000000005")};
	ZklockLiveId live[] = {
		{U3, LOCK(U3, "0000000004")},
		{U1, ""},				/* in flight: keeps its U1 node */
		{U2, LOCK(U2, "0000000002")},
	};
	int			g[5];

	(void) state;
	assert_int_equal(ghosts_of(kids, 5, live, 3, g), 2);
	assert_int_equal(g[0], 0);
	assert_int_equal(g[1], 4);
}

static void
test_same_id_twice(void **state)
{
	/*
	 * An id in two entries (a lease's node and its P/locks node are told
	 * apart by their own ids, but be safe): a child named by either entry
	 * is kept, and an entry without a node keeps all.
	 */
	char	   *kids[] = {"_c_" U1 "-lease-0000000001", LOCK(U1, "0000000002"),
	LOCK(U1, "0000000000")};
	ZklockLiveId both[] = {{U1, LOCK(U1, "0000000002")}, {U1, "_c_" U1 "-lease-0000000001"}};
	ZklockLiveId one_unknown[] = {{U1, LOCK(U1, "0000000002")}, {U1, ""}};
	int			g[3];

	(void) state;
	assert_int_equal(ghosts_of(kids, 3, both, 2, g), 1);
	assert_int_equal(g[0], 2);
	assert_int_equal(ghosts_of(kids, 3, one_unknown, 2, g), 0);
}

static void
test_rw_and_lease_names(void **state)
{
	char	   *kids[] = {"_c_" U1 "-__WRIT__0000000000", "_c_" U1 "-__READ__0000000003",
	"_c_" U2 "-lease-0000000001", "_c_" U2 "-lease-0000000000"};
	ZklockLiveId live[] = {{U1, "_c_" U1 "-__READ__0000000003"},
	{U2, "_c_" U2 "-lease-0000000001"}};
	int			g[4];

	(void) state;
	assert_int_equal(ghosts_of(kids, 4, live, 2, g), 2);
	assert_int_equal(g[0], 0);
	assert_int_equal(g[1], 3);
}

static void
test_empty_inputs(void **state)
{
	char	   *kids[] = {LOCK(U1, "0000000000")};
	ZklockLiveId live[] = {{U1, LOCK(U1, "0000000001")}};
	int			g[1];

	(void) state;
	assert_int_equal(ghosts_of(kids, 0, live, 1, g), 0);
	assert_int_equal(ghosts_of(kids, 1, live, 0, g), 0);
	assert_int_equal(ghosts_of(kids, 1, live, 1, g), 1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_own_node_kept),
		cmocka_unit_test(test_ghost_lower_sequence_deleted),
		cmocka_unit_test(test_ghost_higher_sequence_deleted),
		cmocka_unit_test(test_create_in_flight_kept),
		cmocka_unit_test(test_foreign_nodes_never_touched),
		cmocka_unit_test(test_two_ghosts),
		cmocka_unit_test(test_many_requests_lookup),
		cmocka_unit_test(test_same_id_twice),
		cmocka_unit_test(test_rw_and_lease_names),
		cmocka_unit_test(test_empty_inputs),
	};

	return cmocka_run_group_tests_name("zklock ghost nodes", tests, NULL, NULL);
}

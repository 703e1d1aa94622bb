/*
 * Unit tests of the local layer's pure decisions (src/zklock_local_rules.c):
 * where a lock node created behind a node of this worker goes without a
 * listing, and which local waiters a release hands the lock to.  The cases
 * are the ones the README's failure model names.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "zklock_local_rules.h"

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
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

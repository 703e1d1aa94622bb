/*-------------------------------------------------------------------------
 *
 * test_recipe_guard.c
 *		cmocka unit tests of the path guard (src/core/recipe_guard.c):
 *		which other recipe the children or the Stat of a path show, for a
 *		call of a given recipe.
 *
 * test/unit/test_recipe_guard.c
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

#include "core/recipe_guard.h"

#define U1 "53345f98-9423-4e0c-a7b5-9f819e3ec2e1"
#define U2 "0b1e2c3d-4f5a-4b6c-8d7e-9f0a1b2c3d4e"

#define P(u, marker, seq) "_c_" u "-" marker seq

static void
test_latch_meets_mutex(void **state)
{
	char	   *kids[] = {P(U1, "lock-", "0000000000"), P(U2, "latch-", "0000000001")};

	(void) state;
	assert_string_equal(zklock_guard_children(ZKG_LATCH, kids, 2, kids[1]),
						"a mutex's lock nodes");
	/* the mutex's node is older: the mutex keeps the path */
	assert_null(zklock_guard_children(ZKG_MUTEX, kids, 2, kids[0]));
}

static void
test_mutex_meets_latch(void **state)
{
	char	   *kids[] = {P(U1, "latch-", "0000000007"), P(U2, "lock-", "0000000008")};

	(void) state;
	assert_string_equal(zklock_guard_children(ZKG_MUTEX, kids, 2, kids[1]),
						"a leader latch's nodes");
	assert_null(zklock_guard_children(ZKG_LATCH, kids, 2, kids[0]));
	/* an unprotected Curator name is the same recipe's shape */
	kids[0] = "latch-0000000007";
	assert_string_equal(zklock_guard_children(ZKG_MUTEX, kids, 2, kids[1]),
						"a leader latch's nodes");
}

static void
test_read_write_nodes(void **state)
{
	char	   *kids[] = {P(U1, "__WRIT__", "0000000003"), P(U2, "lock-", "0000000004"),
	P(U2, "__READ__", "0000000005")};

	(void) state;
	assert_string_equal(zklock_guard_children(ZKG_MUTEX, kids, 2, kids[1]),
						"a read/write lock's nodes");
	assert_null(zklock_guard_children(ZKG_RWLOCK, kids + 2, 1, kids[2]));
	/* the read lock after a mutex node */
	assert_string_equal(zklock_guard_children(ZKG_RWLOCK, kids, 3, kids[2]),
						"a mutex's lock nodes");
}

static void
test_sequence_compares_across_recipes(void **state)
{
	/* a newer latch node does not refuse an older mutex waiter */
	char	   *kids[] = {P(U1, "lock-", "0000000010"), P(U2, "lock-", "0000000011"),
	P(U2, "latch-", "0000000012")};

	(void) state;
	assert_null(zklock_guard_children(ZKG_MUTEX, kids, 3, kids[1]));
	/* without a node of its own, any other recipe's node counts */
	assert_string_equal(zklock_guard_children(ZKG_MUTEX, kids, 3, NULL),
						"a leader latch's nodes");
}

static void
test_same_recipe_and_user_children(void **state)
{
	/* /a locked and /a/b locked: "b" is nobody's */
	char	   *kids[] = {"b", "lock", "ready", U1, P(U1, "lock-", "0000000001"),
		"mylock-0000000000", "lock-000000001", "lock-00000000012",
		P(U1, "lease-", "0000000000"), "_c_not-a-uuid-latch-0000000000",
	"latch-000000000x"};

	(void) state;
	assert_null(zklock_guard_children(ZKG_MUTEX, kids, 11, kids[4]));
	assert_null(zklock_guard_children(ZKG_DOUBLE_BARRIER, kids, 4, NULL));
	assert_null(zklock_guard_children(ZKG_LATCH, kids + 5, 6, NULL));
}

static void
test_semaphore_dirs(void **state)
{
	char	   *both[] = {"leases", "locks"};
	char	   *one[] = {"leases", "x"};

	(void) state;
	assert_string_equal(zklock_guard_children(ZKG_MUTEX, both, 2, P(U1, "lock-", "0000000002")),
						"a semaphore's leases and locks");
	assert_string_equal(zklock_guard_children(ZKG_LATCH, both, 2, NULL),
						"a semaphore's leases and locks");
	assert_null(zklock_guard_children(ZKG_MUTEX, one, 2, NULL));
}

/* a semaphore making P/locks and P/leases: P's children, no node of its own */
static void
test_semaphore_meets_locks(void **state)
{
	char	   *mutex[] = {"x", P(U1, "lock-", "0000000007")};
	char	   *rw[] = {"__READ__0000000003"};
	char	   *latch[] = {P(U2, "latch-", "0000000001")};
	char	   *own[] = {"leases", "locks"};
	char	   *user[] = {"x", U1, "ready"};

	(void) state;
	assert_string_equal(zklock_guard_children(ZKG_SEMAPHORE, mutex, 2, NULL),
						"a mutex's lock nodes");
	assert_string_equal(zklock_guard_children(ZKG_SEMAPHORE, rw, 1, NULL),
						"a read/write lock's nodes");
	assert_string_equal(zklock_guard_children(ZKG_SEMAPHORE, latch, 1, NULL),
						"a leader latch's nodes");
	/* its own directories (another semaphore's) and the user's: nobody's */
	assert_null(zklock_guard_children(ZKG_SEMAPHORE, own, 2, NULL));
	assert_null(zklock_guard_children(ZKG_SEMAPHORE, user, 3, NULL));
	assert_string_equal(zklock_guard_recipe_name(ZKG_SEMAPHORE), "a semaphore's");
}

static void
test_double_barrier(void **state)
{
	char	   *kids[] = {U2, P(U1, "lock-", "0000000000"), "ready"};
	char	   *rw[] = {U2, "__WRIT__0000000000"};

	(void) state;
	assert_string_equal(zklock_guard_children(ZKG_DOUBLE_BARRIER, kids, 3, NULL),
						"a mutex's lock nodes");
	assert_string_equal(zklock_guard_children(ZKG_DOUBLE_BARRIER, rw, 2, NULL),
						"a read/write lock's nodes");
	/* a mutex does not refuse on bare UUIDs: too plain a name */
	assert_null(zklock_guard_children(ZKG_MUTEX, kids, 3, kids[1]));
}

static void
test_barrier_and_counter(void **state)
{
	char	   *lock[] = {P(U1, "lock-", "0000000000")};
	char	   *latch[] = {"b", P(U1, "latch-", "0000000004")};
	char	   *user[] = {"b", "c", U1, "ready"};

	(void) state;
	assert_string_equal(zklock_guard_children(ZKG_BARRIER, lock, 1, NULL),
						"a mutex's lock nodes");
	assert_string_equal(zklock_guard_children(ZKG_COUNTER, latch, 2, NULL),
						"a leader latch's nodes");
	/* the user's own nodes below a barrier: nobody's */
	assert_null(zklock_guard_children(ZKG_BARRIER, user, 4, NULL));
	assert_null(zklock_guard_children(ZKG_COUNTER, NULL, 0, NULL));
	assert_null(zklock_guard_children(ZKG_NONE, lock, 1, NULL));
}

static void
test_names(void **state)
{
	(void) state;
	assert_string_equal(zklock_guard_recipe_name(ZKG_LATCH), "a leader latch's");
	assert_string_equal(zklock_guard_recipe_name(ZKG_COUNTER), "a counter's");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_latch_meets_mutex),
		cmocka_unit_test(test_mutex_meets_latch),
		cmocka_unit_test(test_read_write_nodes),
		cmocka_unit_test(test_sequence_compares_across_recipes),
		cmocka_unit_test(test_same_recipe_and_user_children),
		cmocka_unit_test(test_semaphore_dirs),
		cmocka_unit_test(test_semaphore_meets_locks),
		cmocka_unit_test(test_double_barrier),
		cmocka_unit_test(test_barrier_and_counter),
		cmocka_unit_test(test_names),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

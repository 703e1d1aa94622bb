/*
 * Unit tests of the lease rules (src/zklock_lease_rules.c), with cmocka.
 *
 * What users rely on: a lock is trusted only for as long as the ZooKeeper
 * leader provably counts the session alive.  Through an ensemble that
 * proof is the chain of three syncs (i, m, j with m sent at least G after
 * i was answered, and j sent after m was answered); these tests pin down
 * which send time a chain proves, and that nothing shorter proves anything.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <string.h>
#include <cmocka.h>

#include "zklock_lease_rules.h"

#define MS(x) ((int64_t) (x) * 1000)

/* one sync every 100 ms answered 5 ms later, G = 500 ms */
static void
test_chain_proves_sync_g_before(void **state)
{
	ZklockSyncAnswer a[20];
	int			n;
	int64_t		proven;

	(void) state;
	for (n = 0; n < 20; n++)
	{
		a[n].sent = MS(1000 + 100 * n);
		a[n].answered = a[n].sent + MS(5);
	}
	/* sync 20 is sent at 3000 ms: m = 19 (sent 2900); i answered <= 2400 */
	proven = zklock_sync_proof(a, 20, MS(3000), MS(500));
	assert_int_equal(proven, MS(2300));
}

static void
test_no_proof_without_three_links(void **state)
{
	ZklockSyncAnswer a[2] = {{MS(0), MS(5)}, {MS(600), MS(605)}};

	(void) state;
	/* nothing answered yet */
	assert_int_equal(zklock_sync_proof(a, 0, MS(10), MS(500)), -1);
	/* one link: m exists but no i before it */
	assert_int_equal(zklock_sync_proof(a, 1, MS(10), MS(500)), -1);
	/* two links: i = 0, m = 1 spaced by G, j sent after m answered */
	assert_int_equal(zklock_sync_proof(a, 2, MS(610), MS(500)), MS(0));
	/* j sent before m was answered (pipelined): m cannot be the middle */
	assert_int_equal(zklock_sync_proof(a, 2, MS(602), MS(500)), -1);
}

static void
test_links_closer_than_g_prove_nothing(void **state)
{
	/* syncs answered quickly but all within G of each other */
	ZklockSyncAnswer a[4] = {
		{MS(0), MS(10)}, {MS(100), MS(110)}, {MS(200), MS(210)}, {MS(300), MS(310)}
	};

	(void) state;
	assert_int_equal(zklock_sync_proof(a, 4, MS(400), MS(500)), -1);
}

static void
test_slow_answers_push_the_proof_back(void **state)
{
	/*
	 * A follower that holds syncs back (its leader link is slow): i must
	 * have been answered G before m was sent, whatever its send time.
	 */
	ZklockSyncAnswer a[4] = {
		{MS(0), MS(900)}, {MS(100), MS(950)}, {MS(1000), MS(1010)}, {MS(1500), MS(1505)}
	};

	(void) state;
	/* j at 1510: m = 3 (sent 1500), i answered <= 1000: i = 1 (sent 100) */
	assert_int_equal(zklock_sync_proof(a, 4, MS(1510), MS(500)), MS(100));
	/* j at 1502: m = 2 (answered 1010, sent 1000): i answered <= 500: none */
	assert_int_equal(zklock_sync_proof(a, 4, MS(1502), MS(500)), -1);
}

static void
test_server_mode_from_config(void **state)
{
	const char *ens = "server.1=127.0.0.1:2888:3888:participant;127.0.0.1:2181\n"
		"server.2=127.0.0.1:2889:3889:participant;127.0.0.1:2182\nversion=100000000";
	const char *odd = "version=0";

	(void) state;
	assert_int_equal(zklock_server_mode_from_config(NULL, 0), ZKLOCK_SERVER_STANDALONE);
	assert_int_equal(zklock_server_mode_from_config("", 0), ZKLOCK_SERVER_STANDALONE);
	assert_int_equal(zklock_server_mode_from_config("\n", 1), ZKLOCK_SERVER_STANDALONE);
	assert_int_equal(zklock_server_mode_from_config(ens, (int) strlen(ens)),
					 ZKLOCK_SERVER_ENSEMBLE);
	/* anything else that is not clearly empty is the safe side */
	assert_int_equal(zklock_server_mode_from_config(odd, (int) strlen(odd)),
					 ZKLOCK_SERVER_ENSEMBLE);
	/* a length of -1 (no data) is standalone; a NUL-free prefix counts */
	assert_int_equal(zklock_server_mode_from_config(ens, -1), ZKLOCK_SERVER_STANDALONE);
	assert_int_equal(zklock_server_mode_from_config(ens, 7), ZKLOCK_SERVER_ENSEMBLE);
}

static void
test_lease_length_and_margin(void **state)
{
	(void) state;
	assert_int_equal(zklock_lease_length_ms(10000, 1000), 9000);
	/* the margin is at most half the timeout */
	assert_int_equal(zklock_lease_length_ms(1000, 900), 500);
}

static void
test_heartbeat_interval(void **state)
{
	(void) state;
	/* standalone: a quarter of the timeout */
	assert_int_equal(zklock_heartbeat_interval_ms(60000, 2000, ZKLOCK_SERVER_STANDALONE), 15000);
	/* ensemble or unknown: a quarter of G when shorter */
	assert_int_equal(zklock_heartbeat_interval_ms(60000, 2000, ZKLOCK_SERVER_ENSEMBLE), 500);
	assert_int_equal(zklock_heartbeat_interval_ms(60000, 2000, ZKLOCK_SERVER_UNKNOWN), 500);
	assert_int_equal(zklock_heartbeat_interval_ms(1000, 2000, ZKLOCK_SERVER_ENSEMBLE), 250);
	/* never below 20 ms */
	assert_int_equal(zklock_heartbeat_interval_ms(40, 10, ZKLOCK_SERVER_ENSEMBLE), 20);
}

static void
test_min_session_timeout(void **state)
{
	(void) state;
	/* defaults: margin 1 s, floor 0.5 s, tick 3 s */
	assert_int_equal(zklock_min_session_timeout_ms(1000, 500, 3000), 7500);
	assert_int_equal(zklock_min_session_timeout_ms(100, 10, 500), 1110);
}

static void
test_lease_covers_floor(void **state)
{
	(void) state;
	assert_false(zklock_lease_covers(MS(100), 0, 0));	/* no lease */
	assert_true(zklock_lease_covers(MS(100), MS(101), 0));
	assert_false(zklock_lease_covers(MS(100), MS(100), 0));
	/* 1 ms left does not cover a 500 ms floor */
	assert_false(zklock_lease_covers(MS(100), MS(101), MS(500)));
	assert_true(zklock_lease_covers(MS(100), MS(601), MS(500)));
	assert_false(zklock_lease_covers(MS(100), MS(600), MS(500)));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_chain_proves_sync_g_before),
		cmocka_unit_test(test_no_proof_without_three_links),
		cmocka_unit_test(test_links_closer_than_g_prove_nothing),
		cmocka_unit_test(test_slow_answers_push_the_proof_back),
		cmocka_unit_test(test_server_mode_from_config),
		cmocka_unit_test(test_lease_length_and_margin),
		cmocka_unit_test(test_heartbeat_interval),
		cmocka_unit_test(test_min_session_timeout),
		cmocka_unit_test(test_lease_covers_floor),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

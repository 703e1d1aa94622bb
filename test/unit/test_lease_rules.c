/*
 * Unit tests of the lease rules (src/core/lease_rules.c), with cmocka.
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

#include "core/lease_rules.h"

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

/* the 3+1 ensemble of test 505: client addresses given, one observer */
static const char obs_config[] =
"server.1=127.0.0.1:3001:4001:participant;127.0.0.1:2181\n"
"server.2=127.0.0.1:3002:4002:participant;0.0.0.0:2182\n"
"server.3=127.0.0.1:3003:4003:participant;2183\n"
"server.4=127.0.0.1:3004:4004:observer;0.0.0.0:2184\n"
"version=100000000";

#define IS_OBS(conf, host, port) \
	zklock_server_is_observer((conf), (int) strlen(conf), (host), (port))

static void
test_observer_by_client_address(void **state)
{
	(void) state;
	assert_true(IS_OBS(obs_config, "127.0.0.1", 2184));
	/* a name where the line has an address: cannot be placed */
	assert_true(IS_OBS(obs_config, "localhost", 2181));
	/* the participants, whatever form their client address has */
	assert_false(IS_OBS(obs_config, "127.0.0.1", 2181));
	assert_false(IS_OBS(obs_config, "127.0.0.1", 2182));
	assert_false(IS_OBS(obs_config, "127.0.0.1", 2183));
	/* a server no line names may be an observer */
	assert_true(IS_OBS(obs_config, "127.0.0.1", 2999));
	assert_true(IS_OBS(obs_config, "10.0.0.9", 2181));
	/* no observer in the configuration: never one */
	{
		const char *c = "server.1=127.0.0.1:3001:4001:participant;2181\n"
		"server.2=127.0.0.1:3002:4002:participant;2182\nversion=1";

		assert_false(IS_OBS(c, "127.0.0.1", 2181));
		assert_false(IS_OBS(c, "10.0.0.9", 2999));
	}
	/* standalone (empty) */
	assert_false(zklock_server_is_observer("", 0, "127.0.0.1", 2181));
	assert_false(zklock_server_is_observer(NULL, 0, "127.0.0.1", 2181));
}

/* one machine per server, the same client port on all: hosts decide */
static void
test_observer_same_port_everywhere(void **state)
{
	const char *c =
	"server.1=10.0.0.1:2888:3888:participant;0.0.0.0:2181\r\n"
	"server.2=10.0.0.2:2888:3888:participant;0.0.0.0:2181\n"
	"server.3=10.0.0.3:2888:3888:participant;10.0.1.3:2181\n"
	"server.4=[fd00::4]:2888:3888:OBSERVER;[::]:2181\n"
	"server.5=10.0.0.5:2888:3888|10.0.2.5:2888:3888:observer;2181\n"
	"version=2";

	(void) state;
	assert_false(IS_OBS(c, "10.0.0.1", 2181));
	assert_false(IS_OBS(c, "10.0.0.2", 2181));
	/* an explicit client address is the one to match */
	assert_false(IS_OBS(c, "10.0.1.3", 2181));
	assert_true(IS_OBS(c, "10.0.0.3", 2181));
	assert_true(IS_OBS(c, "fd00::4", 2181));
	assert_true(IS_OBS(c, "FD00::4", 2181));
	assert_true(IS_OBS(c, "10.0.0.5", 2181));
	assert_true(IS_OBS(c, "10.0.2.5", 2181));
	/* the right host, another port: cannot be placed */
	assert_true(IS_OBS(c, "10.0.0.1", 2182));
}

/* servers whose clientPort came from the static file: no client address */
static void
test_observer_without_client_addresses(void **state)
{
	const char *c =
	"server.1=127.0.0.1:3001:4001:participant\n"
	"server.2=127.0.0.1:3002:4002:participant\n"
	"server.4=127.0.0.1:3004:4004:observer\n"
	"version=0";
	const char *d =
	"server.1=zk1:2888:3888:participant\n"
	"server.2=zk2:2888:3888:participant\n"
	"server.4=zk4:2888:3888:observer\n";

	(void) state;
	/* one host for all: the observer's line matches every port */
	assert_true(IS_OBS(c, "127.0.0.1", 2181));
	/* a host per server: the host decides */
	assert_false(IS_OBS(d, "zk1", 2181));
	assert_true(IS_OBS(d, "zk4", 2181));
	/* names in the file, an address from the client: cannot be placed */
	assert_true(IS_OBS(d, "10.0.0.1", 2181));
}

static void
test_split_host_port(void **state)
{
	char		host[64];
	int			port = 0;

	(void) state;
	assert_true(zklock_split_host_port("127.0.0.1:2181", host, sizeof(host), &port));
	assert_string_equal(host, "127.0.0.1");
	assert_int_equal(port, 2181);
	assert_true(zklock_split_host_port("::1:2182", host, sizeof(host), &port));
	assert_string_equal(host, "::1");
	assert_int_equal(port, 2182);
	assert_true(zklock_split_host_port("[fd00::4]:2183", host, sizeof(host), &port));
	assert_string_equal(host, "fd00::4");
	assert_int_equal(port, 2183);
	assert_false(zklock_split_host_port("127.0.0.1", host, sizeof(host), &port));
	assert_false(zklock_split_host_port("127.0.0.1:", host, sizeof(host), &port));
	assert_false(zklock_split_host_port(":2181", host, sizeof(host), &port));
	assert_false(zklock_split_host_port("h:21x", host, sizeof(host), &port));
	assert_false(zklock_split_host_port("averyveryverylonghostname:1", host, 8, &port));
}

static void
test_hosts_all_observers(void **state)
{
	int			len = (int) strlen(obs_config);

	(void) state;
	assert_true(zklock_hosts_all_observers(obs_config, len, "127.0.0.1:2184"));
	assert_true(zklock_hosts_all_observers(obs_config, len, "127.0.0.1:2184/chroot/x"));
	/* an unknown server may be an observer too */
	assert_true(zklock_hosts_all_observers(obs_config, len, "127.0.0.1:2184, 127.0.0.1:2999"));
	assert_false(zklock_hosts_all_observers(obs_config, len, "127.0.0.1:2184,127.0.0.1:2181"));
	assert_false(zklock_hosts_all_observers(obs_config, len, "127.0.0.1:2181,127.0.0.1:2184"));
	/* an entry that cannot be read may be a participant */
	assert_false(zklock_hosts_all_observers(obs_config, len, "127.0.0.1:2184,zk"));
	assert_false(zklock_hosts_all_observers(obs_config, len, ""));
	assert_false(zklock_hosts_all_observers(obs_config, len, "/chroot"));
	assert_false(zklock_hosts_all_observers(obs_config, len, NULL));
	/* no observer in the configuration */
	assert_false(zklock_hosts_all_observers("", 0, "127.0.0.1:2184"));
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
		cmocka_unit_test(test_observer_by_client_address),
		cmocka_unit_test(test_observer_same_port_everywhere),
		cmocka_unit_test(test_observer_without_client_addresses),
		cmocka_unit_test(test_split_host_port),
		cmocka_unit_test(test_hosts_all_observers),
		cmocka_unit_test(test_lease_length_and_margin),
		cmocka_unit_test(test_heartbeat_interval),
		cmocka_unit_test(test_min_session_timeout),
		cmocka_unit_test(test_lease_covers_floor),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/*-------------------------------------------------------------------------
 *
 * core/lease_rules.h
 *		Pure rules of the lease: what an answered request proves about the
 *		ZooKeeper leader's view of the session, and how long a lock may be
 *		trusted after it; the heartbeat interval, the least session
 *		timeout that leaves room for a lease, the server's mode from its
 *		/zookeeper/config and whether it (or every host of zklock.hosts)
 *		is an observer, and the parsing of host:port.
 *
 * Like core/curator_rules.h, libc only, no PostgreSQL or ZooKeeper calls, so the
 * rules are unit-tested on their own (test/unit/test_lease_rules.c).  Times
 * are microseconds of one monotonic clock (CLOCK_BOOTTIME in the server);
 * durations given in milliseconds are named *_ms.
 *
 * src/core/lease_rules.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZKLOCK_LEASE_RULES_H
#define ZKLOCK_LEASE_RULES_H

#include <stdbool.h>
#include <stdint.h>

/*
 * One answered sync heartbeat of a connection: when it was sent and when
 * its answer arrived, on the worker's monotonic clock.
 */
typedef struct ZklockSyncAnswer
{
	int64_t		sent;
	int64_t		answered;
} ZklockSyncAnswer;

/* what kind of server the connection is to, from its /zookeeper/config */
typedef enum ZklockServerMode
{
	ZKLOCK_SERVER_UNKNOWN = 0,	/* not read yet: treated as an ensemble */
	ZKLOCK_SERVER_STANDALONE,	/* no quorum: the server expires sessions */
	ZKLOCK_SERVER_ENSEMBLE,		/* maybe a follower: prove via the leader */
	ZKLOCK_SERVER_OBSERVER		/* an observer (or maybe one): no proof */
} ZklockServerMode;

extern ZklockServerMode zklock_server_mode_from_config(const char *data, int len);
extern bool zklock_split_host_port(const char *addr, char *host, int hostlen,
								   int *port);
extern bool zklock_server_is_observer(const char *config, int len,
									  const char *host, int port);
extern bool zklock_hosts_all_observers(const char *config, int len,
									   const char *hosts);

extern int64_t zklock_sync_proof(const ZklockSyncAnswer *answers, int n,
								 int64_t sent_now, int64_t ping_gap);

extern int	zklock_lease_length_ms(int timeout_ms, int margin_ms);
extern int	zklock_heartbeat_interval_ms(int timeout_ms, int tick_ms,
										 ZklockServerMode mode);
extern int	zklock_min_session_timeout_ms(int margin_ms, int commit_min_ms,
										  int tick_ms);
extern bool zklock_lease_covers(int64_t now, int64_t until, int64_t floor);

#endif							/* ZKLOCK_LEASE_RULES_H */

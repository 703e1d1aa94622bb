/*-------------------------------------------------------------------------
 *
 * worker/connection/lease.c
 *	  The session's lease (ZklockShared.lease_until): what proves that the
 *	  ZooKeeper leader counts the session alive (the handshake, heartbeats
 *	  and the chain of syncs through an ensemble), the kind of server it is
 *	  proven through (standalone, ensemble, observer), and its end when
 *	  nothing proves it in time.  core/lease_rules.c decides; this file
 *	  sends, times and applies.
 *
 *	  zklock_lease_connected			a connection was made: its first steps
 *	  zklock_lease_forget				the session is lost or replaced
 *	  zklock_lease_timeout_seen			a connection negotiated a session
 *										timeout
 *	  zklock_lease_settings_changed		the lease's settings may have changed
 *	  zklock_lease_track_handshake		follow the client's handshake after a
 *										call
 *	  zklock_lease_heartbeat			send a heartbeat when one is due
 *	  zklock_lease_wakeup_ms			ms until the next heartbeat or the
 *										lease's end
 *	  zklock_lease_check				the lease ran out: the session is
 *										expired
 *	  zklock_lease_cut_stuck_attempt	cut a connection attempt without an
 *										answer, or a connection to an observer
 *	  zklock_lease_attempt_cut			the current attempt was cut for no
 *										answer (its TLS handshake's failure is
 *										not the configuration's)
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <sys/socket.h>

#include "zklock.h"
#include "core/lease_rules.h"
#include "common/shmem.h"
#include "common/settings.h"
#include "common/session_file.h"
#include "worker/connection/connection_int.h"

/* ZooKeeper's default maxSessionTimeout, in tickTimes */
#define ZKLOCK_DEFAULT_MAX_TICKS	20

/*
 * Heartbeats keep the lease (ZklockShared.lease_until) fresh: a sync of
 * "/" every zklock_heartbeat_interval_ms.  A sync, not a read: a follower
 * answers a read from its own copy even when it is cut off from the
 * leader, but it passes a sync to the leader and answers only when the
 * leader did (core/lease_rules.c says what that proves).  The send time
 * of each one in flight is kept in a small ring; the completion's data is
 * its ticket (a counter), so a late or stale reply finds its own send time
 * or none.  Each entry also remembers the connection it was sent on: a
 * chain of syncs proves something only within one connection.
 */
#define HEARTBEAT_RING	64
static ZklockMonoTime hb_sent[HEARTBEAT_RING];
static uint32 hb_ticket[HEARTBEAT_RING];
static uint32 hb_conn[HEARTBEAT_RING];
static uint32 hb_next_ticket = 1;
static ZklockMonoTime hb_last_sent = 0;

/*
 * The answered syncs of the current connection, oldest first: the links
 * of the chain.  Only the last few matter (the chain spans about 1.5 x
 * zklock.server_tick_time).
 */
#define CHAIN_KEEP		32
static ZklockSyncAnswer chain[CHAIN_KEEP];
static int	chain_len = 0;

/*
 * The handshake: a lower bound of the send time of the connection request
 * in flight, 0 when none is known.  Set by zklock_lease_track_handshake from
 * the client's state, used once when the connection is made.
 */
static ZklockMonoTime handshake_sent_after = 0;
static int	handshake_last_state = 0;

/*
 * The handshake's proof of the current connection, waiting for the kind
 * of server: applied once its /zookeeper/config says it is no observer
 * (config_done), 0 when none waits.
 */
static ZklockMonoTime handshake_proof = 0;

/*
 * The C client's SSL_CONNECTING_STATE_DEF (zookeeper.h does not export
 * ZOO_SSL_CONNECTING_STATE): the TLS handshake of a connection attempt,
 * which with zk-client-build/patches/tls-handshake-nonblocking.patch waits
 * in the event loop like the connection request does.
 */
#define ZKLOCK_SSL_CONNECTING_STATE 7

/*
 * zklock_lease_cut_stuck_attempt shut the current connection attempt down (no
 * answer): the TLS handshake it cut failed for that reason, not for one of
 * the configuration (zklock_secure_call_failed).  Reset by the next attempt.
 */
bool		zklock_lease_attempt_cut = false;

/*
 * Observers: the connection (zklock_conn_serial) that
 * zklock_lease_cut_stuck_attempt is to shut down, 0 for none; and the last
 * observer warned about since the last connection to another kind of server
 * ("" for none), so that going round zklock.hosts warns once per observer.
 */
static uint32 observer_cut_serial = 0;
static char observer_warned[128] = "";

static void lease_publish(void);
static void lease_extend(ZklockMonoTime proven);
static int	heartbeat_interval_ms(void);
static void chain_append(ZklockMonoTime sent, ZklockMonoTime answered);
static void heartbeat_done(int rc, const char *value, const void *data);
static void config_done(int rc, const char *value, int value_len,
						const struct Stat *stat, const void *data);
static void warn_tick_time(int timeout_ms);
static void observer_found(const char *config, int len);

/*
 * Publish the lease for backends: the proven instant plus the lease length
 * of the shortest timeout the leader may apply now (ZklockShared says
 * why), 0 when nothing is proven.  It moves back when that timeout
 * shrinks.  Worker only; no lock needed (one atomic write).
 */
static void
lease_publish(void)
{
	ZklockShared *sh = zklock_shared;
	ZklockMonoTime until = 0;

	if (sh->lease_proven != 0 && sh->lease_timeout > 0)
		until = ZKLOCK_MONO_PLUS_MS(sh->lease_proven,
									zklock_lease_length_ms(sh->lease_timeout,
														   zklock_lease_margin));
	pg_atomic_write_u64(&sh->lease_until, (uint64) until);
}

/*
 * The leader is proven to have touched the current session at the
 * monotonic instant proven or later.
 */
static void
lease_extend(ZklockMonoTime proven)
{
	if (proven > zklock_shared->lease_proven)
		zklock_shared->lease_proven = proven;
	lease_publish();
}

/*
 * The session is lost or replaced: nothing about it proves anything now.
 */
void
zklock_lease_forget(void)
{
	zklock_shared->lease_proven = 0;
	zklock_shared->lease_timeout = 0;
	pg_atomic_write_u64(&zklock_shared->lease_until, 0);
}

/*
 * A connection of the session negotiated timeout_ms: the leader applies
 * it from the handshake on, to every touch, and an earlier connection's
 * late touch may still apply its own, so the lease keeps the smallest.
 */
void
zklock_lease_timeout_seen(int timeout_ms)
{
	ZklockShared *sh = zklock_shared;

	if (sh->lease_timeout == 0 || timeout_ms < sh->lease_timeout)
		sh->lease_timeout = timeout_ms;
	lease_publish();
}

/*
 * The lease settings may have changed (a reload, or a new handle that
 * will ask for zklock.session_timeout): the next handshake may revalidate
 * the session with a timeout as short as zklock.session_timeout (a server
 * negotiates less only when its maxSessionTimeout is lower, which
 * doc/failure-model.md tells the operator to avoid and the watcher logs),
 * so the lease
 * is derived from it at once, before any handshake can leave, and the
 * margin is applied anew.  Worker only.
 */
void
zklock_lease_settings_changed(void)
{
	ZklockShared *sh = zklock_shared;

	if (sh->lease_timeout > zklock_session_timeout)
		sh->lease_timeout = zklock_session_timeout;
	lease_publish();
}

/*
 * Remember an answered sync of this connection as a link of the chain,
 * dropping the oldest when full.
 */
static void
chain_append(ZklockMonoTime sent, ZklockMonoTime answered)
{
	if (chain_len == CHAIN_KEEP)
	{
		memmove(&chain[0], &chain[1], sizeof(chain[0]) * (CHAIN_KEEP - 1));
		chain_len--;
	}
	chain[chain_len].sent = sent;
	chain[chain_len].answered = answered;
	chain_len++;
}

/*
 * Follow the client's connection state after a call into it (before is the
 * monotonic time just before the call): the call in which the state first
 * turns to associating is the one that sent the connection request, so
 * the request left after before.  An earlier bound than the real one only
 * makes the lease shorter.
 */
void
zklock_lease_track_handshake(ZklockMonoTime before)
{
	int			state = zklock_zh ? zoo_state(zklock_zh) : 0;

	if (state == ZOO_ASSOCIATING_STATE && handshake_last_state != ZOO_ASSOCIATING_STATE)
		handshake_sent_after = before;
	else if (state != ZOO_ASSOCIATING_STATE && state != ZOO_CONNECTED_STATE)
		handshake_sent_after = 0;
	handshake_last_state = state;
}

/*
 * A connection was made (zklock_conn_serial is new).  A new chain, and a
 * server of unknown kind until its /zookeeper/config is read.  The
 * handshake itself went through the leader (a new session is created by
 * it, a resumed one revalidated and touched by it), after it was sent;
 * that proof counts once the server is known not to be an observer
 * (config_done), whose answer comes before any other.  The first requests
 * of the connection: what kind of server it is, then a heartbeat.  Their
 * answers arrive before the answer of any request sent after them.
 * Caller holds the lock.
 */
void
zklock_lease_connected(zhandle_t *zzh)
{
	ZklockShared *sh = zklock_shared;

	chain_len = 0;
	sh->server_mode = ZKLOCK_SERVER_UNKNOWN;
	handshake_proof = handshake_sent_after;
	handshake_sent_after = 0;
	hb_last_sent = 0;			/* heartbeat before any request */
	if (zoo_agetconfig(zzh, 0, config_done, (const void *) (uintptr_t) zklock_conn_serial) != ZOK)
	{
		sh->server_mode = ZKLOCK_SERVER_ENSEMBLE;
		if (handshake_proof != 0)
			lease_extend(handshake_proof);
		handshake_proof = 0;
	}
	zklock_lease_heartbeat(zklock_mono_now());
}

/*
 * Completion of a heartbeat (a sync).  Any answer from the server in our
 * session counts; connection loss or a closing handle is no answer.  What
 * the answer proves depends on the server: a standalone server touched
 * the session when it read the sync; through an ensemble the chain of
 * syncs decides (zklock_sync_proof); through an observer nothing is
 * proven.  While the servers reject zklock.auth, an answer also proves
 * the credentials passed: they went ahead of the heartbeat on its
 * connection, and a server that rejects them closes it.
 */
static void
heartbeat_done(int rc, const char *value, const void *data)
{
	uint32		ticket = (uint32) (uintptr_t) data;
	int			pos = ticket % HEARTBEAT_RING;
	ZklockMonoTime now;
	ZklockMonoTime proven;

	if (hb_ticket[pos] != ticket)
		return;					/* too old: its send time was overwritten */
	hb_ticket[pos] = 0;
	if (hb_conn[pos] != zklock_conn_serial)
		return;					/* sent on an earlier connection */
	if (rc == ZSESSIONCLOSEDREQUIRESASLAUTH)
		zklock_secure_sasl_required(zklock_zh);
	if (rc != ZOK && rc != ZNONODE && rc != ZNOAUTH)
		return;
	zklock_secure_proven();

	now = zklock_mono_now();
	if (zklock_shared->server_mode == ZKLOCK_SERVER_STANDALONE)
		proven = hb_sent[pos];
	else if (zklock_shared->server_mode == ZKLOCK_SERVER_OBSERVER)
		proven = -1;			/* see observer_found */
	else
		proven = zklock_sync_proof(chain, chain_len, hb_sent[pos],
								   (int64) zklock_server_tick_time * 1000);
	chain_append(hb_sent[pos], now);
	if (proven > 0)
		lease_extend(proven);
	if (zklock_auth_failed_at != 0)
	{
		LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
		zklock_auth_credentials_accepted();
		LWLockRelease(zklock_shared->lock);
	}
}

/*
 * Completion of the read of /zookeeper/config sent when a connection is
 * made: a standalone server leaves it empty, a server of an ensemble lists
 * the members, observers marked as such.  Until it is known, and when the
 * read fails, the connection counts as one to a follower (the chain of
 * syncs).  The handshake's proof counts from here on, unless the server
 * is an observer, or cannot be told from one (observer_found).  Worker
 * only; takes the shared lock for a moment.
 */
static void
config_done(int rc, const char *value, int value_len, const struct Stat *stat,
			const void *data)
{
	ZklockServerMode mode;
	char		host[128];
	int			port;

	if ((uint32) (uintptr_t) data != zklock_conn_serial)
		return;
	if (rc == ZSESSIONCLOSEDREQUIRESASLAUTH)
	{
		/* the first request of the connection: the server wants a login */
		zklock_secure_sasl_required(zklock_zh);
		return;
	}
	if (rc == ZOK)
	{
		mode = zklock_server_mode_from_config(value, value_len);
		/* an address that cannot be read matches no member */
		if (!zklock_split_host_port(zklock_shared->server, host, sizeof(host), &port))
		{
			host[0] = '\0';
			port = 0;
		}
		if (mode == ZKLOCK_SERVER_ENSEMBLE &&
			zklock_server_is_observer(value, value_len, host, port))
			mode = ZKLOCK_SERVER_OBSERVER;
	}
	else if (rc == ZCONNECTIONLOSS || rc == ZCLOSING || rc == ZSESSIONEXPIRED)
	{
		handshake_proof = 0;
		return;
	}
	else
		mode = ZKLOCK_SERVER_ENSEMBLE;
	LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
	zklock_shared->server_mode = mode;
	LWLockRelease(zklock_shared->lock);
	if (mode == ZKLOCK_SERVER_OBSERVER)
	{
		handshake_proof = 0;
		observer_found(value, value_len);
		return;
	}
	observer_warned[0] = '\0';
	if (handshake_proof != 0)
		lease_extend(handshake_proof);
	handshake_proof = 0;
	if (mode == ZKLOCK_SERVER_ENSEMBLE)
		warn_tick_time(zklock_shared->negotiated_timeout);
}

/*
 * The connection is to an observer, or to a server that /zookeeper/config
 * (config, len bytes) cannot tell from one.  Fed by a follower's
 * ObserverMaster, an observer passes our touches on to the leader one
 * ping of that follower late, so the chain of syncs proves too much
 * through it (core/lease_rules.c); and although its handshake did go
 * through the leader, a lease from handshakes alone would grant locks for
 * one session timeout and then lose them.  So nothing is proven through
 * it: no lock is granted while connected to it, and held ones are lost
 * when the lease runs out.  The worker moves on to the next server of
 * zklock.hosts (zklock_lease_cut_stuck_attempt cuts the connection), unless
 * every one of them is an observer too: then it stays, and the log says
 * so.  Warned once per observer until a connection to another server.
 * Worker only, without the shared lock.
 */
static void
observer_found(const char *config, int len)
{
	const char *server = zklock_shared->server;
	const char *hosts = zklock_connected_hosts ? zklock_connected_hosts : zklock_hosts;
	bool		stay = zklock_hosts_all_observers(config, len, hosts);
	int			elevel = WARNING;

	if (strcmp(observer_warned, server) == 0)
		elevel = DEBUG1;
	strlcpy(observer_warned, server, sizeof(observer_warned));
	ereport(elevel,
			(errmsg("zklock: zookeeper server %s is an observer, or cannot be told from one: the session's lease cannot be proven through it",
					server),
			 errdetail("An observer passes the session's touches and syncs on to the leader later than a follower does (through a follower, with observerMasterPort), so its answers prove nothing about the leader's view of the session, and no lock is granted while connected to it. zklock tells observers by the server lines of /zookeeper/config, matching this server's address to their client addresses (\"server.N=...;host:port\"), or to their quorum addresses when the lines give none or a wildcard."),
			 stay ?
			 errhint("Every server of zklock.hosts is an observer, or cannot be told from one: the worker stays connected, and locks fail until zklock.hosts names a participant (a follower or the leader).") :
			 errhint("The worker moves on to the next server of zklock.hosts. List only participants (followers and the leader) in zklock.hosts.")));
	if (!stay)
		observer_cut_serial = zklock_conn_serial;
}

/*
 * Through an ensemble the proof spaces its syncs by zklock.server_tick_time,
 * which must be at least the servers' tickTime.  ZooKeeper's default
 * maxSessionTimeout is 20 tickTimes, so a timeout above 20 x
 * zklock.server_tick_time is the common sign of a tickTime larger than
 * zklock.server_tick_time (or of a maxSessionTimeout raised by hand):
 * said once per value, since only the operator can tell which.
 */
static void
warn_tick_time(int timeout_ms)
{
	static int	warned_timeout = 0;
	static int	warned_tick = 0;

	if ((int64) timeout_ms <= (int64) ZKLOCK_DEFAULT_MAX_TICKS * zklock_server_tick_time)
		return;
	if (warned_timeout == timeout_ms && warned_tick == zklock_server_tick_time)
		return;
	warned_timeout = timeout_ms;
	warned_tick = zklock_server_tick_time;
	ereport(WARNING,
			(errmsg("zklock: the ensemble negotiated a session timeout of %d ms, more than %d times zklock.server_tick_time (%d ms)",
					timeout_ms, ZKLOCK_DEFAULT_MAX_TICKS, zklock_server_tick_time),
			 errdetail("With ZooKeeper's default maxSessionTimeout of %d tickTimes this means the servers' tickTime is larger than zklock.server_tick_time, and then the lease's proof through an ensemble does not hold.",
					   ZKLOCK_DEFAULT_MAX_TICKS),
			 errhint("Set zklock.server_tick_time to at least the servers' tickTime (it may be larger; that only shortens the lease).")));
}

/*
 * Time between heartbeats on the current connection (core/lease_rules.c).
 */
static int
heartbeat_interval_ms(void)
{
	return zklock_heartbeat_interval_ms(zklock_shared->negotiated_timeout,
										zklock_server_tick_time,
										(ZklockServerMode) zklock_shared->server_mode);
}

/*
 * Send a heartbeat when an interval passed since the last one (at once
 * after connecting: hb_last_sent is reset then).
 */
void
zklock_lease_heartbeat(ZklockMonoTime now)
{
	int			interval;
	uint32		ticket;
	int			pos;

	if (!zklock_connected || zklock_zh == NULL)
		return;
	interval = heartbeat_interval_ms();
	if (hb_last_sent != 0 && now < ZKLOCK_MONO_PLUS_MS(hb_last_sent, interval))
		return;
	ticket = hb_next_ticket++;
	if (ticket == 0)
		ticket = hb_next_ticket++;	/* 0 marks a free ring entry */
	pos = ticket % HEARTBEAT_RING;
	if (zoo_async(zklock_zh, "/", heartbeat_done, (const void *) (uintptr_t) ticket) == ZOK)
	{
		hb_ticket[pos] = ticket;
		hb_sent[pos] = now;
		hb_conn[pos] = zklock_conn_serial;
		hb_last_sent = now;
	}
}

/*
 * Milliseconds until the worker must look at the lease again: the next
 * heartbeat or the end of the lease, whichever comes first (at most
 * max_ms).
 */
long
zklock_lease_wakeup_ms(ZklockMonoTime now, long max_ms)
{
	ZklockMonoTime until;
	long		ms = max_ms;

	if (zklock_connected)
	{
		ZklockMonoTime next = ZKLOCK_MONO_PLUS_MS(hb_last_sent, heartbeat_interval_ms());

		ms = Min(ms, (long) ((next - now) / 1000) + 1);
	}
	(void) zklock_lease_valid(now, &until);
	if (until != 0)
		ms = Min(ms, (long) ((until - now) / 1000) + 1);
	return Max(ms, 1);
}

/*
 * The lease ran out without proof: ZooKeeper may expire the session (or
 * has expired it) and give our locks to others, so every lock is lost
 * now, every wait fails, and the session is treated as expired: the
 * handle is closed (which ends the session at once when the server can
 * still be reached) and a new session is made.  Runs before anything
 * else the worker does once it notices, so a worker that was stalled
 * grants nothing on stale replies.
 */
void
zklock_lease_check(ZklockMonoTime now)
{
	ZklockShared *sh = zklock_shared;
	ZklockMonoTime until;
	int			lease_timeout;

	if (zklock_lease_valid(now, &until) || until == 0)
		return;

	LWLockAcquire(sh->lock, LW_EXCLUSIVE);
	lease_timeout = sh->lease_timeout;
	zklock_lease_forget();
	sh->counters.leases_expired++;
	zklock_connected = false;
	zklock_dispatch_sweep_lost_session("lease ran out");
	if (sh->have_session)
		sh->counters.expired_count++;
	sh->have_session = false;
	zklock_session_forget();
	sh->conn_state = zklock_auth_failed_at != 0 ? ZKC_AUTH_FAILED :
		zklock_secure_failed_state(ZKC_EXPIRED);
	sh->state_since = GetCurrentTimestamp();
	zklock_request_reconnect();
	LWLockRelease(sh->lock);

	/* said after letting go of the lock: a slow log must not stall backends */
	ereport(LOG,
			(errmsg("zklock: the zookeeper session's lease ran out %ld ms ago without proof from the leader; treating the session as expired",
					(long) ((now - until) / 1000)),
			 errdetail("No heartbeat proved the session alive on the leader in time (session timeout %d ms, zklock.lease_margin %d ms, zklock.server_tick_time %d ms, server %s).",
					   lease_timeout, zklock_lease_margin, zklock_server_tick_time,
					   sh->server_mode == ZKLOCK_SERVER_STANDALONE ? "standalone" :
					   sh->server_mode == ZKLOCK_SERVER_OBSERVER ? "an observer" : "of an ensemble")));
}

/*
 * Cut short a connection attempt that gets no answer.  The client gives
 * the server two thirds of the session timeout to answer its handshake,
 * and a server that is starting or stopping may take the connection and
 * never answer: a suspended session's lease would run out meanwhile,
 * although the servers were back in time.  An attempt without an answer
 * after a sixth of the session timeout (at least a second) is shut down,
 * and the client tries again at once.  A connection to an observer
 * (observer_found) is shut down too, for the client to try the next
 * server.  fd is the client's socket (-1 when it has none).  Worker only.
 */
void
zklock_lease_cut_stuck_attempt(int fd, ZklockMonoTime now)
{
	static int	attempt_fd = -1;
	static ZklockMonoTime attempt_start = 0;
	int			state = zoo_state(zklock_zh);
	int			timeout = zklock_shared->negotiated_timeout > 0 ?
		zklock_shared->negotiated_timeout : zklock_session_timeout;

	if (observer_cut_serial != 0 && observer_cut_serial != zklock_conn_serial)
		observer_cut_serial = 0;
	if (observer_cut_serial != 0 && fd >= 0 && state == ZOO_CONNECTED_STATE)
	{
		elog(DEBUG1, "zklock: leaving observer %s for the next server of zklock.hosts",
			 zklock_shared->server);
		(void) shutdown(fd, SHUT_RDWR);
		observer_cut_serial = 0;
		attempt_fd = -1;
		return;
	}
	if (fd < 0 ||
		(state != ZOO_CONNECTING_STATE && state != ZOO_ASSOCIATING_STATE &&
		 state != ZKLOCK_SSL_CONNECTING_STATE))
	{
		attempt_fd = -1;
		return;
	}
	if (fd != attempt_fd)
	{
		attempt_fd = fd;
		attempt_start = now;
		zklock_lease_attempt_cut = false;
		return;
	}
	if (now >= ZKLOCK_MONO_PLUS_MS(attempt_start, Max(1000, timeout / 6)))
	{
		elog(DEBUG1, "zklock: no answer to a connection attempt within %d ms: trying again",
			 Max(1000, timeout / 6));
		(void) shutdown(fd, SHUT_RDWR);
		attempt_fd = -1;
		zklock_lease_attempt_cut = (state == ZKLOCK_SSL_CONNECTING_STATE);
	}
}

/*-------------------------------------------------------------------------
 *
 * worker/connection/connection.c
 *	  The worker's connection: opening the handle (resuming the session in
 *	  shared memory), the session watcher that follows the client's
 *	  connection and session states into zk_status and the lease
 *	  (worker/connection/lease.c), and the answer to the credentials
 *	  (worker/connection/auth.c).  TLS and SASL are
 *	  worker/connection/secure.c's.
 *
 *	  zklock_conn_open		open a handle, resuming the session if any
 *	  zklock_conn_failed		an attempt failed before a session was made
 *	  zklock_zh, zklock_connected, zklock_conn_serial,
 *	  zklock_connected_hosts	the handle and its connection's state
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <errno.h>

#include "utils/memutils.h"

#include "zklock.h"
#include "core/lease_rules.h"
#include "common/shmem.h"
#include "common/settings.h"
#include "common/session_file.h"
#include "worker/connection/connection_int.h"
#include "worker/locks/locks.h"

/*
 * The handle (NULL: none; the event loop closes it to reconnect), whether
 * its session is connected, which connection it is (bumped for every
 * connection made) and the zklock.hosts it was opened with.
 */
zhandle_t *zklock_zh = NULL;
bool zklock_connected = false;
uint32		zklock_conn_serial = 0;
char *zklock_connected_hosts = NULL;

static uint32 handle_gen = 0;	/* bumped for every handle opened */

/*
 * The session timeout the next handshake asks for: zklock.session_timeout
 * for a new handle, then what the last connection negotiated (the C client
 * asks for that when it reconnects).
 */
static int	conn_requested_timeout = 0;

/*
 * The reasons of failed attempts logged since the last connection: each is
 * logged once, however often the client tries (servers taken in turn give
 * one reason each).
 */
#define FAILURES_LOGGED	8
static char failures_logged[FAILURES_LOGGED][ZKLOCK_CONN_FAILURE_LEN];
static int	nfailures_logged = 0;

static void auth_done(int rc, const void *data);
static void note_failure(const char *why);
static void session_watcher(zhandle_t *zzh, int type, int state,
							const char *path, void *ctx);

/*
 * Completion of zoo_add_auth on the handle of generation data.  It comes
 * with the first answer of a server to the credentials (or with the loss
 * of the first connection, after which later answers call nothing, so the
 * heartbeat also tells: see heartbeat_done, worker/connection/lease.c).
 */
static void
auth_done(int rc, const void *data)
{
	if (rc != ZOK || (uint32) (uintptr_t) data != handle_gen || zklock_auth_failed_at == 0)
		return;
	LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
	zklock_auth_credentials_accepted();
	LWLockRelease(zklock_shared->lock);
}

/*
 * Global watcher: connection and session state changes.
 */
static void
session_watcher(zhandle_t *zzh, int type, int state, const char *path, void *ctx)
{
	ZklockShared *sh = zklock_shared;
	bool		save_session = false;
	clientid_t	saved = {0};

	if (type != ZOO_SESSION_EVENT)
		return;

	zklock_request_wait_set_rebuild();
	LWLockAcquire(sh->lock, LW_EXCLUSIVE);
	if (state == ZOO_CONNECTED_STATE)
	{
		const clientid_t *cid = zoo_client_id(zzh);
		const char *server = zoo_get_current_server(zzh);
		TimestampTz now = GetCurrentTimestamp();

		/* while the servers reject zklock.auth, retries log quietly */
		int			elevel = zklock_auth_failed_at != 0 ? DEBUG1 : LOG;

		if (!sh->have_session || sh->session_id != cid->client_id)
		{
			if (sh->have_session)
				zklock_dispatch_sweep_lost_session("was replaced");
			/* what was known about an earlier session says nothing now */
			zklock_lease_forget();
			sh->session_gen++;
			sh->session_id = cid->client_id;
			memcpy(sh->session_passwd, cid->passwd, sizeof(sh->session_passwd));
			sh->have_session = true;
			/* written (fsync'ed) once the shared lock is released */
			save_session = true;
			saved = *cid;
			ereport(elevel,
					(errmsg("zklock: connected to zookeeper %s, new session 0x%llx",
							server ? server : "?",
							(unsigned long long) cid->client_id)));
		}
		else
			ereport(elevel,
					(errmsg("zklock: connected to zookeeper %s, session 0x%llx resumed",
							server ? server : "?",
							(unsigned long long) cid->client_id)));
		sh->negotiated_timeout = zoo_recv_timeout(zzh);
		strlcpy(sh->server, server ? server : "", sizeof(sh->server));
		/* once per change of what was asked or given, across restarts */
		if (sh->negotiated_timeout < conn_requested_timeout &&
			(sh->timeout_warned_asked != conn_requested_timeout ||
			 sh->timeout_warned_got != sh->negotiated_timeout))
		{
			sh->timeout_warned_asked = conn_requested_timeout;
			sh->timeout_warned_got = sh->negotiated_timeout;
			ereport(WARNING,
					(errmsg("zklock: zookeeper server %s negotiated a session timeout of %d ms, less than the %d ms asked for",
							server ? server : "?", sh->negotiated_timeout,
							conn_requested_timeout),
					 errdetail("The lease follows the shorter timeout from now on, but a worker stalled while it reconnects to such a server can trust the longer one."),
					 errhint("Set zklock.session_timeout to at most the lowest maxSessionTimeout of the ensemble's servers.")));
		}
		/* the client asks for the timeout it was given last on reconnects */
		conn_requested_timeout = sh->negotiated_timeout;
		zklock_lease_timeout_seen(sh->negotiated_timeout);
		if (sh->negotiated_timeout < zklock_min_session_timeout_ms(zklock_lease_margin,
																  zklock_commit_min_lease,
																  zklock_server_tick_time))
			ereport(elevel,
					(errmsg("zklock: the server negotiated a session timeout of %d ms, too short for COMMIT to find zklock.commit_min_lease of lease left through an ensemble",
							sh->negotiated_timeout),
					 errhint("Raise the servers' maxSessionTimeout or lower zklock.commit_min_lease or zklock.server_tick_time.")));
		zklock_conn_serial++;
		zklock_secure_connected();
		nfailures_logged = 0;
		if (zklock_auth_failed_at == 0)
		{
			sh->conn_state = ZKC_CONNECTED;
			sh->counters.connected_count++;
			sh->state_since = now;
		}
		/* else the first answer tells whether the credentials pass now */
		zklock_connected = true;
		zklock_request_rescan();
		zklock_request_deletes_scan();
		/* the lease's first steps on it, ahead of any request */
		zklock_lease_connected(zzh);
	}
	else if (state == ZOO_CONNECTING_STATE || state == ZOO_ASSOCIATING_STATE)
	{
		if (zklock_connected)
			ereport(LOG, (errmsg("zklock: connection to zookeeper lost, session may still be alive")));
		if (zklock_connected)
			sh->counters.suspended_count++;
		zklock_connected = false;
		/* kept nodes are watched no more (worker/locks/lock_cache.c) */
		zklock_cache_connection_lost();
		if (zklock_auth_failed_at == 0)
		{
			sh->conn_state = zklock_auth_not_connected_state();
			sh->state_since = GetCurrentTimestamp();
		}
	}
	else if (state == ZOO_EXPIRED_SESSION_STATE)
	{
		ereport(LOG, (errmsg("zklock: zookeeper session expired")));
		zklock_connected = false;
		zklock_lease_forget();
		zklock_dispatch_sweep_lost_session("expired");
		sh->have_session = false;
		zklock_session_forget();
		sh->conn_state = zklock_auth_failed_at != 0 ? ZKC_AUTH_FAILED :
			zklock_secure_failed_state(ZKC_EXPIRED);
		sh->counters.expired_count++;
		sh->state_since = GetCurrentTimestamp();
		zklock_request_reconnect();
	}
	else if (state == ZOO_AUTH_FAILED_STATE && zklock_secure_uses_sasl())
		zklock_secure_login_refused(zzh);
	else if (state == ZOO_AUTH_FAILED_STATE)
		zklock_auth_credentials_rejected(zzh);
	LWLockRelease(sh->lock);
	if (save_session)
		zklock_session_save(saved.client_id, saved.passwd);
}

/*
 * Open a ZooKeeper handle, resuming the session in shared memory when
 * there is one (the worker was restarted, the cluster was not).
 */
void
zklock_conn_open(void)
{
	ZklockShared *sh = zklock_shared;
	clientid_t	cid;
	bool		resume_session;

	LWLockAcquire(sh->lock, LW_EXCLUSIVE);
	resume_session = sh->have_session;
	if (resume_session)
	{
		cid.client_id = sh->session_id;
		memcpy(cid.passwd, sh->session_passwd, sizeof(cid.passwd));
	}
	if (zklock_auth_failed_at == 0)
	{
		sh->conn_state = zklock_auth_not_connected_state();
		sh->state_since = GetCurrentTimestamp();
	}
	else
	{
		/* one try per zklock.connect_timeout while the servers reject us */
		zklock_auth_retry_later();
	}
	handle_gen++;
	sh->counters.connection_attempts++;
	sh->timeout_asked = zklock_session_timeout;
	LWLockRelease(sh->lock);

	/* the handshakes of this handle ask for zklock.session_timeout */
	conn_requested_timeout = zklock_session_timeout;
	zklock_lease_settings_changed();
	zklock_connected = false;
	zklock_zh = zklock_secure_init_handle(session_watcher, zklock_session_timeout,
										  resume_session ? &cid : NULL);
	if (zklock_zh == NULL)
	{
		int			err = errno;
		char		why[ZKLOCK_CONN_FAILURE_LEN];

		/* a TLS or SASL failure said why already (connection/secure.c) */
		if (!zklock_secure_failed())
		{
			/* the client maps getaddrinfo's EAI_NONAME to ENOENT */
			if (err == ENOENT)
				snprintf(why, sizeof(why),
						 "could not resolve the host names of zklock.hosts = \"%s\"",
						 zklock_hosts);
			else
				snprintf(why, sizeof(why),
						 "could not create a zookeeper handle for zklock.hosts = \"%s\": %s",
						 zklock_hosts, strerror(err));
			note_failure(why);
		}
	}
	else
	{
		/*
		 * By default the client resolves zklock.hosts again every time it is
		 * asked what to wait for (a netlink socket and a read of /etc/hosts
		 * on every pass of the worker): resolve when a connection is made,
		 * as Curator's client does.
		 */
		(void) zoo_set_servers_resolution_delay(zklock_zh, -1);
	}
	if (zklock_zh != NULL && zklock_auth != NULL && zklock_auth[0] != '\0')
	{
		int			rc = zoo_add_auth(zklock_zh, "digest", zklock_auth, strlen(zklock_auth),
									  auth_done, (const void *) (uintptr_t) handle_gen);

		if (rc != ZOK)
			ereport(LOG,
					(errmsg("zklock: could not add zookeeper credentials: %s", zerror(rc))));
	}
	if (zklock_connected_hosts)
		pfree(zklock_connected_hosts);
	zklock_connected_hosts = MemoryContextStrdup(TopMemoryContext, zklock_hosts);
	zklock_request_wait_set_rebuild();
}


/*
 * Keep why as zk_status's connection_failure and log it, once per reason
 * since the last connection (again at DEBUG1).  Takes the lock.
 */
static void
note_failure(const char *why)
{
	ZklockShared *sh = zklock_shared;
	int			i;

	for (i = 0; i < nfailures_logged; i++)
		if (strcmp(failures_logged[i], why) == 0)
			break;
	if (i < nfailures_logged)
		elog(DEBUG1, "zklock: again: %s", why);
	else
	{
		ereport(LOG,
				(errmsg("zklock: %s", why),
				 errdetail("Calls that wait for no other client fail with SQLSTATE 08006 at once, others after their timeout or zklock.connect_timeout; the worker keeps trying, and logs each other reason once until it connects.")));
		strlcpy(failures_logged[nfailures_logged % FAILURES_LOGGED], why,
				ZKLOCK_CONN_FAILURE_LEN);
		if (nfailures_logged < FAILURES_LOGGED)
			nfailures_logged++;
	}
	LWLockAcquire(sh->lock, LW_EXCLUSIVE);
	strlcpy(sh->conn_failure, why, sizeof(sh->conn_failure));
	LWLockRelease(sh->lock);
}

/*
 * The client's zookeeper_interest or zookeeper_process returned rc (not
 * ZOK), errno err, before a session was made on this connection: say why
 * in zk_status's connection_failure and the log (note_failure).  A TLS or
 * SASL failure stands on its own (worker/connection/secure.c); a loss after
 * the connection was made is the session watcher's.
 */
void
zklock_conn_failed(int rc, int err)
{
	const char *server;
	char		why[ZKLOCK_CONN_FAILURE_LEN];

	/* an expired or closed handle says nothing of the servers */
	if (zklock_connected || zklock_zh == NULL || zklock_secure_failed() ||
		rc == ZNOTHING || rc == ZINVALIDSTATE)
		return;
	server = zoo_get_current_server(zklock_zh);
	if (server == NULL)
		server = "?";
	if (err == ECONNREFUSED)
		snprintf(why, sizeof(why), "connection to zookeeper server %s refused", server);
	else if (rc == ZOPERATIONTIMEOUT || err == ETIMEDOUT)
		snprintf(why, sizeof(why), "zookeeper server %s did not answer in time (zklock.session_timeout = %d ms)",
				 server, zklock_session_timeout);
	else if (err == EHOSTUNREACH || err == ENETUNREACH)
		snprintf(why, sizeof(why), "zookeeper server %s cannot be reached: %s",
				 server, strerror(err));
	else if (rc == ZCONNECTIONLOSS && err == 0)
		snprintf(why, sizeof(why), "zookeeper server %s closed the connection before a session was made",
				 server);
	else
		snprintf(why, sizeof(why), "could not connect to zookeeper server %s: %s%s%s",
				 server, zerror(rc), err != 0 ? ": " : "", err != 0 ? strerror(err) : "");
	note_failure(why);
}

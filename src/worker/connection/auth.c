/*-------------------------------------------------------------------------
 *
 * worker/connection/auth.c
 *	  Credentials the servers reject (zklock.auth), and what zk_status says
 *	  of the connection while the worker is not connected, which they
 *	  decide too.  Below worker/connection/lease.c (a heartbeat's answer proves
 *	  the credentials passed) and worker/connection/connection.c.
 *
 *	  zklock_auth_failed_at				when the servers began to reject them
 *										(0: no)
 *	  zklock_auth_credentials_rejected	a server rejected them: say so, fail
 *										requests
 *	  zklock_auth_credentials_accepted	a server accepted them again
 *	  zklock_auth_not_connected_state	zk_status's state while not connected
 *	  zklock_auth_may_open				may a new handle be opened now?
 *	  zklock_auth_retry_later			the next try only after AUTH_RETRY_MS
 *	  zklock_auth_retry_now				a reload: try again at once
 *	  zklock_auth_wakeup_ms				ms until the next try is due
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "zklock.h"
#include "common/shmem.h"
#include "common/settings.h"
#include "worker/connection/connection_int.h"

/*
 * The servers rejected zklock.auth: when that began (0: they did not; see
 * worker/connection/connection.h), and when the next handle may be opened.
 */
TimestampTz zklock_auth_failed_at = 0;
static ZklockMonoTime auth_retry_at = 0;	/* monotonic: a step of the
												 * wall clock puts off nothing */

/* ms between two tries while the servers reject zklock.auth */
#define AUTH_RETRY_MS	Max(zklock_connect_timeout, 1000)

/*
 * What zk_status says while the worker is not connected: tls_failed or
 * sasl_failed while such a failure stands (worker/connection/secure.c),
 * suspended while it has a session to resume, expired from the loss of a
 * session until the next one is made, connecting before the first.  Caller
 * holds the lock.
 */
ZklockConnState
zklock_auth_not_connected_state(void)
{
	if (zklock_secure_failed())
		return zklock_secure_failed_state(ZKC_CONNECTING);
	if (zklock_shared->have_session)
		return ZKC_SUSPENDED;
	if (zklock_shared->counters.expired_count > 0 || zklock_shared->counters.leases_expired > 0)
		return ZKC_EXPIRED;
	return ZKC_CONNECTING;
}

/*
 * A server accepted zklock.auth after a rejection: the connection counts
 * as made from now on.  Caller holds the lock.
 */
void
zklock_auth_credentials_accepted(void)
{
	ZklockShared *sh = zklock_shared;
	const char *server = zklock_zh ? zoo_get_current_server(zklock_zh) : NULL;

	if (zklock_auth_failed_at == 0)
		return;
	zklock_auth_failed_at = 0;
	auth_retry_at = 0;
	ereport(LOG,
			(errmsg("zklock: zookeeper server %s accepted the credentials of zklock.auth, session 0x%llx",
					server ? server : "?",
					(unsigned long long) sh->session_id)));
	if (zklock_connected)
	{
		sh->conn_state = ZKC_CONNECTED;
		sh->counters.connected_count++;
	}
	else
		sh->conn_state = zklock_auth_not_connected_state();
	sh->state_since = GetCurrentTimestamp();
	zklock_request_rescan();
}

/*
 * A server rejected zklock.auth and closed the connection; the handle is
 * dead.  This is not the end of the session: it lives on the server, its
 * locks stay held while the lease lasts, and the next handle resumes it.
 * Said once in the log (until the credentials pass again); every waiting
 * request fails with 28000, and so does every new one until then; a new
 * handle is opened every zklock.connect_timeout, or at once after a
 * configuration reload.  Caller holds the lock.
 */
void
zklock_auth_credentials_rejected(zhandle_t *zzh)
{
	ZklockShared *sh = zklock_shared;
	TimestampTz now = GetCurrentTimestamp();
	const char *server = zoo_get_current_server(zzh);
	int			i;

	zklock_connected = false;
	zklock_request_reconnect();
	auth_retry_at = ZKLOCK_MONO_PLUS_MS(zklock_mono_now(), AUTH_RETRY_MS);
	if (zklock_auth_failed_at == 0)
	{
		zklock_auth_failed_at = now;
		ereport(LOG,
				(errmsg("zklock: zookeeper server %s rejected the credentials of zklock.auth",
						server ? server : "?"),
				 errdetail("Requests fail with SQLSTATE 28000 until a server accepts them; the worker tries again every %d ms (zklock.connect_timeout, at least 1 s) and at every configuration reload.",
						   AUTH_RETRY_MS),
				 errhint("Check zklock.auth (digest \"user:password\") and the authentication providers of the ZooKeeper servers.")));
	}
	else
		ereport(DEBUG1,
				(errmsg("zklock: zookeeper server %s still rejects the credentials of zklock.auth",
						server ? server : "?")));
	if (sh->conn_state != ZKC_AUTH_FAILED)
	{
		sh->conn_state = ZKC_AUTH_FAILED;
		sh->state_since = now;
	}
	for (i = 0; i < sh->nslots; i++)
	{
		ZklockSlotState st = sh->slots[i].state;

		if (st == ZKS_NEW || st == ZKS_ACTIVE)
			zklock_dispatch_fail_auth_rejected(i);
	}
}

/*
 * A handle is being opened while the servers reject zklock.auth: one try
 * per zklock.connect_timeout (at least a second).  Caller holds the lock.
 */
void
zklock_auth_retry_later(void)
{
	auth_retry_at = ZKLOCK_MONO_PLUS_MS(zklock_mono_now(), AUTH_RETRY_MS);
}

/*
 * May a new handle be opened now?  Always, except while the servers reject
 * zklock.auth: then once every AUTH_RETRY_MS, and while a TLS or SASL
 * failure stands (worker/connection/secure.c).
 */
bool
zklock_auth_may_open(void)
{
	if (!zklock_secure_may_open())
		return false;
	return zklock_auth_failed_at == 0 || zklock_mono_now() >= auth_retry_at;
}

/*
 * The configuration was reloaded: the servers' side may have been fixed,
 * so rejected credentials are tried again at once.
 */
void
zklock_auth_retry_now(void)
{
	if (zklock_auth_failed_at != 0)
		auth_retry_at = 0;
}

/*
 * Milliseconds until the next handle may be opened while the servers
 * reject zklock.auth (at most max_ms); now is on the monotonic clock.
 */
long
zklock_auth_wakeup_ms(ZklockMonoTime now, long max_ms)
{
	if (zklock_auth_failed_at == 0)
		return max_ms;
	return Min(max_ms, Max((long) ((auth_retry_at - now) / 1000) + 1, 1));
}

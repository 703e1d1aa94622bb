/*-------------------------------------------------------------------------
 *
 * worker/connection/connection.h
 *	  The connection module of the worker as the rest of the worker calls
 *	  it: the handle's opening and failures (connection.c), the
 *	  credentials the servers reject (auth.c), TLS and SASL (secure.c),
 *	  the lease and its heartbeats (lease.c).  tls_context.c is called by
 *	  secure.c alone.  What the module's files call of each other is in
 *	  connection_int.h; the handle itself (zklock_zh, zklock_connected) is
 *	  in recipes/recipe_worker.h, which the recipes read too.
 *
 *	  Interface: zklock_conn_serial, zklock_connected_hosts,
 *	  zklock_auth_failed_at, zklock_auth_rejected, and the functions
 *	  below.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZKLOCK_WORKER_CONNECTION_H
#define ZKLOCK_WORKER_CONNECTION_H

#include "worker/worker.h"

/*
 * The open handle's hosts and serial (defined in
 * worker/connection/connection.c).
 */
extern char *zklock_connected_hosts;	/* zklock.hosts of the open handle */
extern uint32 zklock_conn_serial;	/* which connection: bumped for each */

/*
 * The servers rejected zklock.auth: when that began, 0 when they did not
 * (worker/connection/auth.c).  Until a server accepts the credentials
 * again, zk_status() says auth_failed and requests fail.
 */
extern TimestampTz zklock_auth_failed_at;

static inline bool
zklock_auth_rejected(void)
{
	return zklock_auth_failed_at != 0;
}

/* worker/connection/auth.c: credentials the servers reject */
extern bool zklock_auth_may_open(void);
extern void zklock_auth_retry_now(void);
extern long zklock_auth_wakeup_ms(ZklockMonoTime now, long max_ms);

/* worker/connection/connection.c: the handle */
extern void zklock_conn_open(void);
extern void zklock_conn_failed(int rc, int err);

/* worker/connection/secure.c: TLS and SASL */
extern void zklock_secure_call_failed(zhandle_t *zzh, int rc);
extern bool zklock_secure_failed(void);
extern void zklock_secure_fail_request(int idx);
extern void zklock_secure_retry_now(void);
extern bool zklock_secure_settings_changed(void);

/* worker/connection/lease.c: the lease, its heartbeats, the kind of server */
extern void zklock_lease_settings_changed(void);
extern void zklock_lease_track_handshake(ZklockMonoTime before);
extern void zklock_lease_heartbeat(ZklockMonoTime now);
extern long zklock_lease_wakeup_ms(ZklockMonoTime now, long max_ms);
extern void zklock_lease_check(ZklockMonoTime now);
extern void zklock_lease_cut_stuck_attempt(int fd, ZklockMonoTime now);

#endif							/* ZKLOCK_WORKER_CONNECTION_H */

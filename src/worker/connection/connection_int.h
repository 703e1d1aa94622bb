/*-------------------------------------------------------------------------
 *
 * worker/connection/connection_int.h
 *	  What the files of the connection module call of each other and no
 *	  other file of the worker calls: the credentials' verdicts (auth.c),
 *	  the steps of TLS and SASL (secure.c), each TLS connection's context
 *	  (tls_context.c), the lease's view of a new handle (lease.c).  Only
 *	  the files of worker/connection/ include it (test/callgraph.pl checks
 *	  that); the rest of the worker reads connection.h.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZKLOCK_WORKER_CONNECTION_INT_H
#define ZKLOCK_WORKER_CONNECTION_INT_H

#include "worker/connection/connection.h"

/* worker/connection/auth.c: credentials the servers reject */
extern void zklock_auth_credentials_rejected(zhandle_t *zzh);
extern void zklock_auth_credentials_accepted(void);
extern ZklockConnState zklock_auth_not_connected_state(void);
extern void zklock_auth_retry_later(void);

/* worker/connection/secure.c: TLS and SASL */
extern zhandle_t *zklock_secure_init_handle(watcher_fn watcher, int timeout,
											const clientid_t *cid);
extern void zklock_secure_login_refused(zhandle_t *zzh);
extern void zklock_secure_sasl_required(zhandle_t *zzh);
extern void zklock_secure_proven(void);
extern void zklock_secure_connected(void);
extern ZklockConnState zklock_secure_failed_state(ZklockConnState otherwise);
extern bool zklock_secure_may_open(void);
extern bool zklock_secure_uses_sasl(void);

/* worker/connection/tls_context.c: each TLS connection's context */
#if ZKLOCK_HAVE_ZK_TLS
extern void *zklock_tls_connection_context(zhandle_t *zh, int sock, void *arg);
extern bool zklock_tls_files_ok(char *why, size_t len);
extern const char *zklock_tls_refusal(void);
extern void zklock_tls_refusal_clear(void);
extern void zklock_tls_connected(const char *server);
#endif

/* worker/connection/lease.c: the lease of a new handle */
extern void zklock_lease_connected(zhandle_t *zzh);
extern void zklock_lease_forget(void);
extern void zklock_lease_timeout_seen(int timeout_ms);
extern bool zklock_lease_attempt_cut;

#endif							/* ZKLOCK_WORKER_CONNECTION_INT_H */

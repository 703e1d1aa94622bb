/*-------------------------------------------------------------------------
 *
 * worker/connection/secure.c
 *	  TLS and SASL of the worker's connection (zklock.tls*, zklock.sasl_*):
 *	  the handle opened with zookeeper_init_ssl_ctx (TLS, with a SASL login
 *	  inside it when one is asked; worker/connection/tls_context.c makes each
 *	  connection's context) or zookeeper_init_sasl as the settings ask, the
 *	  client's files checked before, why a handshake failed or a login was
 *	  refused, and what zk_status shows of it.  Never
 *	  a fallback: when TLS or SASL is asked and cannot be had, no handle is
 *	  opened, the log and zk_status say why, and requests fail with 08006
 *	  and that reason until a connection is made.  Below worker/dispatch.c
 *	  (a pickup fails while a failure stands) and
 *	  worker/connection/connection.c.
 *
 *	  zklock_secure_init_handle		open a handle as the settings ask
 *	  zklock_secure_call_failed	a call of the client failed: a TLS
 *									handshake failed or a SASL login was
 *									refused?  say why
 *	  zklock_secure_login_refused	the servers refused the SASL login
 *	  zklock_secure_sasl_required	a server requires a SASL login not made
 *	  zklock_secure_connected		a connection was made: what it is
 *	  zklock_secure_proven			a server answered on it: a failure said
 *									before is over
 *	  zklock_secure_failed			does a failure stand?
 *	  zklock_secure_failed_state	zk_status's state while it stands
 *	  zklock_secure_fail_request	fail a request with 08006 and the reason
 *	  zklock_secure_may_open		may a new handle be opened now?
 *	  zklock_secure_retry_now		a reload: try again at once
 *	  zklock_secure_settings_changed	did a reload change a TLS or SASL
 *									setting or a TLS file's contents (the
 *									worker then restarts)?
 *	  zklock_secure_uses_sasl		is a SASL login asked?
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/memutils.h"

#include "zklock.h"
#include "compat.h"
#include "common/shmem.h"
#include "common/settings.h"
#include "worker/connection/connection_int.h"

#include "common/hashfn.h"

#if ZKLOCK_HAVE_ZK_TLS
#include <openssl/err.h>
#include <openssl/ssl.h>
#endif

/* ms between two tries while a TLS or SASL failure stands */
#define SECURE_RETRY_MS	Max(zklock_connect_timeout, 1000)

/* the failure that stands (empty: none), and its state for zk_status */
static char secure_failure[ZKLOCK_CONN_FAILURE_LEN] = "";

/*
 * The failure last said in the log, until a connection proves itself (its
 * first answer to a request): a server that takes the connection and cuts
 * it at the first request (one that requires a SASL login) is not said
 * again at every try.
 */
static char secure_logged[ZKLOCK_CONN_FAILURE_LEN] = "";
static ZklockConnState secure_failed_state = ZKC_NONE;
static ZklockMonoTime secure_retry_at = 0;	/* monotonic */

/* the TLS and SASL settings the open handle was made with */
static char *secure_settings_seen = NULL;

/*
 * Why Cyrus SASL or its mechanism last failed in this handle's login, as
 * it logged it (GSSAPI: the Kerberos library's words, such as a KDC's
 * refusal); empty when it did not.  The C client logs it at a level we
 * keep off, and returns only a code.
 */
static char sasl_why[ZKLOCK_CONN_FAILURE_LEN / 2] = "";

/*
 * The name this handle's SASL login authenticated as, as the mechanism
 * gave it to Cyrus SASL (GSSAPI: the principal of the keytab's ticket,
 * whatever zklock.sasl_principal says); empty until a login got that far.
 */
static char sasl_authid[sizeof(((ZklockShared *) NULL)->sasl_identity)] = "";

static char *secure_settings_string(void);
static void login_refused(zhandle_t *zzh, bool locked);
static void secure_fail(bool locked, ZklockConnState state, const char *fmt,...) pg_attribute_printf(3, 4);

/*
 * A fingerprint of a file's contents (0: empty name, or not readable), so
 * that certificate files replaced in place count as a change at a reload.
 */
static uint32
file_fingerprint(const char *path)
{
	FILE	   *f;
	char		buf[8192];
	size_t		n;
	uint32		h = 1;

	if (path == NULL || path[0] == '\0' || (f = fopen(path, "rb")) == NULL)
		return 0;
	while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
		h = hash_combine(h, hash_bytes((const unsigned char *) buf, (int) n));
	fclose(f);
	return h;
}

/*
 * The TLS and SASL settings as one string, with the fingerprints of the
 * TLS files, to tell whether a reload changed one (palloc'd).
 */
static char *
secure_settings_string(void)
{
	return psprintf("%d|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|%d|%d|%s|%d|%08x|%08x|%08x|%08x",
					(int) zklock_tls, zklock_tls_ca_file, zklock_tls_cert_file,
					zklock_tls_key_file, zklock_sasl_mechanism,
					zklock_sasl_user, zklock_sasl_password,
					zklock_sasl_service, zklock_sasl_host,
					zklock_sasl_keytab, zklock_sasl_principal,
					zklock_tls_verify, zklock_tls_min_version,
					zklock_tls_crl_file, zklock_tls_expiry_warning,
					zklock_tls ? file_fingerprint(zklock_tls_ca_file) : 0,
					zklock_tls ? file_fingerprint(zklock_tls_cert_file) : 0,
					zklock_tls ? file_fingerprint(zklock_tls_key_file) : 0,
					zklock_tls ? file_fingerprint(zklock_tls_crl_file) : 0);
}

/*
 * Did a reload change a TLS or SASL setting, or the contents of a TLS
 * file, since the handle was opened?
 */
bool
zklock_secure_settings_changed(void)
{
	char	   *now;
	bool		changed;

	if (secure_settings_seen == NULL)
		return false;
	now = secure_settings_string();
	changed = strcmp(now, secure_settings_seen) != 0;
	pfree(now);
	return changed;
}

/*
 * Is a SASL login asked (zklock.sasl_mechanism set)?
 */
bool
zklock_secure_uses_sasl(void)
{
	return zklock_sasl_mechanism != NULL && zklock_sasl_mechanism[0] != '\0';
}

/*
 * A failure stands from now: said in the log (once per reason, until a
 * connection is made), shown by zk_status (state and reason), and every
 * request waiting or posted fails with 08006 and the reason.  No handle is
 * of use: it is closed, and the next one opened after SECURE_RETRY_MS or
 * at a reload.  locked: the caller holds the lock.
 */
static void
secure_fail(bool locked, ZklockConnState state, const char *fmt,...)
{
	ZklockShared *sh = zklock_shared;
	char		why[ZKLOCK_CONN_FAILURE_LEN];
	va_list		ap;
	int			i;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);

	ereport(strcmp(why, secure_logged) == 0 ? DEBUG1 : LOG,
			(errmsg("zklock: %s", why),
			 errdetail("Requests fail with SQLSTATE 08006 until a connection is made; the worker tries again every %d ms (zklock.connect_timeout, at least 1 s) and at every configuration reload.",
					   SECURE_RETRY_MS)));
	strlcpy(secure_failure, why, sizeof(secure_failure));
	strlcpy(secure_logged, why, sizeof(secure_logged));
	secure_failed_state = state;
	secure_retry_at = ZKLOCK_MONO_PLUS_MS(zklock_mono_now(), SECURE_RETRY_MS);
	zklock_connected = false;
	/* the handle of a failed handshake or login is of no more use */
	if (zklock_zh != NULL)
		zklock_request_reconnect();

	if (!locked)
		LWLockAcquire(sh->lock, LW_EXCLUSIVE);
	if (sh->conn_state != state || strcmp(sh->conn_failure, why) != 0)
	{
		sh->conn_state = state;
		sh->state_since = GetCurrentTimestamp();
	}
	strlcpy(sh->conn_failure, why, sizeof(sh->conn_failure));
	sh->conn_tls = false;
	sh->sasl_identity[0] = '\0';
	for (i = 0; i < sh->nslots; i++)
	{
		ZklockSlotState st = sh->slots[i].state;

		if (st == ZKS_NEW || st == ZKS_ACTIVE)
			zklock_secure_fail_request(i);
	}
	if (!locked)
		LWLockRelease(sh->lock);
}

/*
 * The configuration was reloaded: the files or the servers may have been
 * fixed, so a failure standing is tried again at once.
 */
void
zklock_secure_retry_now(void)
{
	secure_retry_at = 0;
}

/*
 * Does a TLS or SASL failure stand (until the next connection)?
 */
bool
zklock_secure_failed(void)
{
	return secure_failure[0] != '\0';
}

/*
 * zk_status's state: that of the failure standing (tls_failed,
 * sasl_failed), otherwise when none does.
 */
ZklockConnState
zklock_secure_failed_state(ZklockConnState otherwise)
{
	return zklock_secure_failed() ? secure_failed_state : otherwise;
}

/*
 * Fail request idx with 08006 and the standing failure (it deletes what
 * it made, as any failed request).  Caller holds the lock.
 */
void
zklock_secure_fail_request(int idx)
{
	zklock_reqs[idx].serial = zklock_shared->slots[idx].serial;
	zklock_req_fail(idx, ERRCODE_CONNECTION_FAILURE,
					"zookeeper connection failed: %s", secure_failure);
}

/*
 * May a new handle be opened now?  Always, except while a failure stands:
 * then once every SECURE_RETRY_MS.
 */
bool
zklock_secure_may_open(void)
{
	return !zklock_secure_failed() || zklock_mono_now() >= secure_retry_at;
}

/*
 * A connection was made: no failure stands any more; zk_status shows
 * whether it is TLS and the SASL identity.  Caller holds the lock.
 */
void
zklock_secure_connected(void)
{
	ZklockShared *sh = zklock_shared;

	secure_failure[0] = '\0';
	secure_failed_state = ZKC_NONE;
	sasl_why[0] = '\0';
	sh->conn_failure[0] = '\0';
	sh->conn_tls = zklock_tls;
	sh->tls_cert_expires = 0;
	sh->tls_server_cert_expires = 0;
	sh->tls_warning[0] = '\0';
#if ZKLOCK_HAVE_ZK_TLS
	if (zklock_tls)
		zklock_tls_connected(zklock_zh ? zoo_get_current_server(zklock_zh) : NULL);
#endif
	if (zklock_secure_uses_sasl())
	{
		const char *asked = zklock_sasl_principal[0] != '\0' ?
			zklock_sasl_principal : zklock_sasl_user;

		if (sasl_authid[0] == '\0')
			strlcpy(sh->sasl_identity, asked, sizeof(sh->sasl_identity));
		else
		{
			strlcpy(sh->sasl_identity, sasl_authid, sizeof(sh->sasl_identity));
			if (strcmp(sasl_authid, asked) != 0)
				ereport(WARNING,
						(errmsg("zklock: logged in to zookeeper as \"%s\", not as \"%s\"",
								sasl_authid, asked),
						 errdetail("With GSSAPI the login is made as the first principal of zklock.sasl_keytab; the servers know this session by it, and zklock.acl = 'creator' gives it the nodes."),
						 errhint("Set zklock.sasl_principal to the keytab's principal, with its realm.")));
		}
	}
	else
		sh->sasl_identity[0] = '\0';
}

/*
 * A server answered a request of this connection: a failure said before
 * is over, and said so.
 */
void
zklock_secure_proven(void)
{
	if (secure_logged[0] == '\0')
		return;
	ereport(LOG,
			(errmsg("zklock: connected to zookeeper again after: %s",
					secure_logged)));
	secure_logged[0] = '\0';
}

/*
 * Did the servers refuse the SASL login?  The single-threaded client
 * tells no watcher: the call that read the refusal returns it
 * (ZAUTHFAILED) and leaves the handle in ZOO_AUTH_FAILED_STATE.  Says so
 * and returns true if they did.
 */
static bool
sasl_refused(zhandle_t *zzh, int rc)
{
	if (!zklock_secure_uses_sasl() || zzh == NULL || zklock_connected ||
		(rc != ZAUTHFAILED && zoo_state(zzh) != ZOO_AUTH_FAILED_STATE))
		return false;
	login_refused(zzh, false);
	return true;
}

#if ZKLOCK_HAVE_ZK_TLS
/*
 * zookeeper_interest or zookeeper_process returned rc (not ZOK): a SASL
 * login refused (sasl_refused), or, when the connection is TLS and not
 * made yet, a handshake failed if the client
 * says so (ZSSLCONNECTIONERROR) or OpenSSL queued an error (with TLS 1.3
 * the server refuses a client certificate after the client's side of the
 * handshake is done: the client then sees its alert as a lost
 * connection).  Why, from OpenSSL's errors, which the client leaves
 * queued.  A handshake zklock_lease_cut_stuck_attempt cut (no answer) is no
 * such failure: the client tries the next server.
 */
void
zklock_secure_call_failed(zhandle_t *zzh, int rc)
{
	const char *server = zzh ? zoo_get_current_server(zzh) : NULL;
	unsigned long e;
	unsigned long last = 0;
	const char *data;
	int			flags;
	char		detail[256] = "";

	if (sasl_refused(zzh, rc))
		return;
	if (!zklock_tls || zklock_connected)
	{
		ERR_clear_error();
		return;
	}
	if (zklock_lease_attempt_cut)
	{
		/* no answer: the client goes on with the next server */
		elog(DEBUG1, "zklock: the TLS handshake with zookeeper server %s was cut: no answer",
			 server ? server : "?");
		zklock_lease_attempt_cut = false;
		ERR_clear_error();
		return;
	}
	if (rc != ZSSLCONNECTIONERROR && ERR_peek_error() == 0)
		return;
	if (zklock_tls_refusal()[0] != '\0')
	{
		/* the context or the verification of the server's chain said why */
		ERR_clear_error();
		secure_fail(false, ZKC_TLS_FAILED,
					"TLS handshake with zookeeper server %s failed: %s",
					server ? server : "?", zklock_tls_refusal());
		zklock_tls_refusal_clear();
		return;
	}
	while ((e = ERR_get_error_all(NULL, NULL, NULL, &data, &flags)) != 0)
	{
		last = e;
		if ((flags & ERR_TXT_STRING) && data != NULL && data[0] != '\0')
			strlcpy(detail, data, sizeof(detail));
		else
			detail[0] = '\0';
	}
	if (last == 0)
		secure_fail(false, ZKC_TLS_FAILED,
					"TLS handshake with zookeeper server %s failed: the server closed the connection (is it a TLS port, and does it take zklock.tls_cert_file?)",
					server ? server : "?");
	else
		secure_fail(false, ZKC_TLS_FAILED,
					"TLS handshake with zookeeper server %s failed: %s%s%s%s",
					server ? server : "?",
					ERR_reason_error_string(last) ? ERR_reason_error_string(last) : "unknown error",
					detail[0] ? " (" : "", detail, detail[0] ? ")" : "");
}
#else
/*
 * Without a TLS-capable client no handshake is ever made.
 */
void
zklock_secure_call_failed(zhandle_t *zzh, int rc)
{
	(void) sasl_refused(zzh, rc);
}
#endif

#if ZKLOCK_HAVE_ZK_SASL
#include <sasl/sasl.h>

/* what the SASL callbacks answer: the settings, copied at handle time */
static char *sasl_user = NULL;
static sasl_secret_t *sasl_secret = NULL;

/*
 * SASL_CB_USER and SASL_CB_AUTHNAME: the user name.
 */
static int
sasl_get_user(void *context, int id, const char **result, unsigned *len)
{
	if (id != SASL_CB_USER && id != SASL_CB_AUTHNAME)
		return SASL_BADPARAM;
	*result = sasl_user;
	if (len)
		*len = strlen(sasl_user);
	return SASL_OK;
}

/*
 * SASL_CB_PASS: zklock.sasl_password.
 */
static int
sasl_get_secret(sasl_conn_t *conn, void *context, int id, sasl_secret_t **psecret)
{
	if (id != SASL_CB_PASS || sasl_secret == NULL)
		return SASL_BADPARAM;
	*psecret = sasl_secret;
	return SASL_OK;
}

/*
 * SASL_CB_GETREALM: the first realm the server offers (DIGEST-MD5).
 */
static int
sasl_get_realm(void *context, int id, const char **availrealms, const char **result)
{
	*result = (availrealms && availrealms[0]) ? availrealms[0] : "";
	return SASL_OK;
}

/*
 * SASL_CB_LOG: what Cyrus SASL and its plugins log.  A failure (the
 * message of sasl_seterror, such as GSSAPI's "Minor code may provide more
 * information (Preauthentication failed)") is kept for the log line of
 * the refused login; the rest goes to the debug log.
 */
static int
sasl_log(void *context, int level, const char *message)
{
	if (message == NULL)
		return SASL_OK;
	if (level == SASL_LOG_ERR || level == SASL_LOG_FAIL)
		strlcpy(sasl_why, message, sizeof(sasl_why));
	elog(DEBUG2, "zklock: cyrus sasl: %s", message);
	return SASL_OK;
}

/*
 * SASL_CB_CANON_USER: passes every name on unchanged, and keeps the one
 * the login authenticates as (GSSAPI: the principal of the ticket the
 * keytab gave), which zk_status shows.
 */
static int
sasl_canon_user(sasl_conn_t *conn, void *context, const char *in, unsigned inlen,
				unsigned flags, const char *user_realm, char *out, unsigned out_max,
				unsigned *out_len)
{
	if (inlen >= out_max)
		return SASL_BUFOVER;
	memmove(out, in, inlen);
	out[inlen] = '\0';
	*out_len = inlen;
	if (flags & SASL_CU_AUTHID)
		strlcpy(sasl_authid, out, sizeof(sasl_authid));
	return SASL_OK;
}

/* Cyrus SASL's generic callback type, through void (*)(void) as C allows */
#define ZKLOCK_SASL_CB(f)	((int (*) (void)) (void (*) (void)) (f))

static sasl_callback_t sasl_callbacks[] = {
	{SASL_CB_USER, ZKLOCK_SASL_CB(sasl_get_user), NULL},
	{SASL_CB_AUTHNAME, ZKLOCK_SASL_CB(sasl_get_user), NULL},
	{SASL_CB_PASS, ZKLOCK_SASL_CB(sasl_get_secret), NULL},
	{SASL_CB_GETREALM, ZKLOCK_SASL_CB(sasl_get_realm), NULL},
	{SASL_CB_LOG, ZKLOCK_SASL_CB(sasl_log), NULL},
	{SASL_CB_CANON_USER, ZKLOCK_SASL_CB(sasl_canon_user), NULL},
	{SASL_CB_LIST_END, NULL, NULL}
};

/*
 * The SASL parameters of a handle (the callbacks answer from copies of
 * the settings made here).  NULL and a failure when Cyrus SASL cannot
 * start.
 */
static zoo_sasl_params_t *
sasl_params(void)
{
	static bool sasl_started = false;
	static zoo_sasl_params_t params;
	size_t		plen = strlen(zklock_sasl_password);
	int			rc;

	if (!sasl_started)
	{
		rc = sasl_client_init(NULL);
		if (rc != SASL_OK)
		{
			secure_fail(false, ZKC_SASL_FAILED, "could not start Cyrus SASL: %s",
						sasl_errstring(rc, NULL, NULL));
			return NULL;
		}
		sasl_started = true;
	}
	sasl_why[0] = '\0';
	sasl_authid[0] = '\0';
	/* GSSAPI: the client keytab, and a credential cache of our own */
	if (zklock_sasl_keytab[0] != '\0')
	{
		setenv("KRB5_CLIENT_KTNAME", zklock_sasl_keytab, 1);
		setenv("KRB5CCNAME", "MEMORY:zklock", 1);
	}
	if (sasl_user)
		free(sasl_user);
	sasl_user = strdup(zklock_sasl_principal[0] != '\0' ? zklock_sasl_principal : zklock_sasl_user);
	if (sasl_secret)
		free(sasl_secret);
	sasl_secret = malloc(sizeof(sasl_secret_t) + plen + 1);
	if (sasl_user == NULL || sasl_secret == NULL)
		ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY), errmsg("out of memory")));
	sasl_secret->len = plen;
	memcpy(sasl_secret->data, zklock_sasl_password, plen + 1);

	params.service = zklock_sasl_service;
	params.host = zklock_sasl_host;
	params.mechlist = zklock_sasl_mechanism;
	params.callbacks = sasl_callbacks;
	return &params;
}
#endif

/*
 * The SASL login failed: the handle says ZOO_AUTH_FAILED_STATE.  Either
 * our side gave up, and Cyrus SASL logged why (GSSAPI: no ticket could
 * be had from the KDC, for an unknown principal, a stale keytab, a KDC
 * out of reach), or the servers refused it.  locked: the caller holds
 * the lock.
 */
static void
login_refused(zhandle_t *zzh, bool locked)
{
	const char *server = zzh ? zoo_get_current_server(zzh) : NULL;
	const char *who = zklock_sasl_principal[0] != '\0' ? zklock_sasl_principal : zklock_sasl_user;

	if (sasl_why[0] != '\0')
		secure_fail(locked, ZKC_SASL_FAILED,
					"the SASL %s login of \"%s\" to zookeeper server %s failed: %s",
					zklock_sasl_mechanism, who, server ? server : "?", sasl_why);
	else
		secure_fail(locked, ZKC_SASL_FAILED,
					"zookeeper server %s refused the SASL %s login of \"%s\"",
					server ? server : "?", zklock_sasl_mechanism, who);
}

/*
 * A server answered ZSESSIONCLOSEDREQUIRESASLAUTH and closed the
 * connection: it requires a SASL login (zookeeper.enforce.auth.enabled
 * with sasl, or sessionRequireClientSASLAuth) that this session has not
 * made.  A failure stands, so that the worker does not reconnect in a
 * loop the server cuts at its first request, and requests fail with 08006
 * saying why.  Caller does not hold the lock.
 */
void
zklock_secure_sasl_required(zhandle_t *zzh)
{
	const char *server = zzh ? zoo_get_current_server(zzh) : NULL;

	if (zklock_secure_uses_sasl())
		secure_fail(false, ZKC_SASL_FAILED,
					"zookeeper server %s requires a SASL login and closed the connection: it did not count the SASL %s login of \"%s\"",
					server ? server : "?", zklock_sasl_mechanism,
					zklock_sasl_principal[0] != '\0' ? zklock_sasl_principal : zklock_sasl_user);
	else
		secure_fail(false, ZKC_SASL_FAILED,
					"zookeeper server %s requires a SASL login (zookeeper.enforce.auth.enabled, or sessionRequireClientSASLAuth) and closed the connection: zklock.sasl_mechanism is not set",
					server ? server : "?");
}

/*
 * The session watcher was told ZOO_AUTH_FAILED_STATE with a SASL login
 * asked: the servers refused it.  Caller holds the lock.
 */
void
zklock_secure_login_refused(zhandle_t *zzh)
{
	login_refused(zzh, true);
}

/*
 * Open a handle as zklock.tls and zklock.sasl_mechanism ask: plain
 * zookeeper_init, zookeeper_init_ssl_ctx with the context each connection
 * is to have (and a SASL login inside TLS when one is asked), or
 * zookeeper_init_sasl.  NULL when it cannot be had: a failure
 * then stands (said in the log and zk_status), and nothing is sent.
 */
zhandle_t *
zklock_secure_init_handle(watcher_fn watcher, int timeout, const clientid_t *cid)
{
	zhandle_t  *zh = NULL;
	MemoryContext old;

	old = MemoryContextSwitchTo(TopMemoryContext);
	if (secure_settings_seen != NULL)
		pfree(secure_settings_seen);
	secure_settings_seen = secure_settings_string();
	MemoryContextSwitchTo(old);

	if (zklock_tls)
	{
#if ZKLOCK_HAVE_ZK_TLS
		char		why[ZKLOCK_CONN_FAILURE_LEN];
		void	   *sasl = NULL;

		if (!zklock_tls_files_ok(why, sizeof(why)))
		{
			secure_fail(false, ZKC_TLS_FAILED, "%s", why);
			return NULL;
		}
		if (zklock_secure_uses_sasl())
		{
#if ZKLOCK_HAVE_ZK_SASL
			/* the SASL login is made inside the TLS connection */
			if ((sasl = sasl_params()) == NULL)
				return NULL;
#else
			secure_fail(false, ZKC_SASL_FAILED,
						"zklock.sasl_mechanism is set but zklock was built with a zookeeper C client without SASL (see README, \"TLS and SASL\")");
			return NULL;
#endif
		}
		ERR_clear_error();
		zh = zookeeper_init_ssl_ctx(zklock_hosts, zklock_tls_connection_context, NULL,
									watcher, timeout, cid, NULL, 0, sasl);
#else
		secure_fail(false, ZKC_TLS_FAILED,
					"zklock.tls is on but zklock was built with a zookeeper C client without TLS (see README, \"TLS and SASL\")");
		return NULL;
#endif
	}
	else if (zklock_secure_uses_sasl())
	{
#if ZKLOCK_HAVE_ZK_SASL
		zoo_sasl_params_t *params = sasl_params();

		if (params == NULL)
			return NULL;
		zh = zookeeper_init_sasl(zklock_hosts, watcher, timeout, cid, NULL, 0,
								 NULL, params);
#else
		secure_fail(false, ZKC_SASL_FAILED,
					"zklock.sasl_mechanism is set but zklock was built with a zookeeper C client without SASL (see README, \"TLS and SASL\")");
		return NULL;
#endif
	}
	else
		zh = zookeeper_init(zklock_hosts, watcher, timeout, cid, NULL, 0);
	return zh;
}

/*-------------------------------------------------------------------------
 *
 * common/settings.c
 *	  zklock's configuration: the GUC variables, their check and show
 *	  hooks (zklock.hosts parsed, the lease rule kept by every change), and
 *	  the check that the session timeout leaves room for a lease.  Every folder reads the variables; core/ takes values as
 *	  arguments instead.
 *
 *	  zklock_define_settings		define every zklock.* GUC (_PG_init)
 *	  zklock_session_timeout_ok		zklock.session_timeout is long enough
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <ctype.h>
#include <stdlib.h>

#include "miscadmin.h"
#include "utils/guc.h"

#include "zklock.h"
#include "core/lease_rules.h"
#include "common/shmem.h"
#include "common/settings.h"

char	   *zklock_hosts = NULL;
int			zklock_session_timeout = 30000;
int			zklock_connect_timeout = 15000;
int			zklock_lease_margin = 1000;
char	   *zklock_namespace = NULL;
int			zklock_max_requests = 1024;
char	   *zklock_auth = NULL;
char	   *zklock_participant_id = NULL;
int			zklock_acl = ZKLOCK_ACL_OPEN;
bool		zklock_check_session_locks = false;
bool		zklock_commit_confirm = false;
int			zklock_server_tick_time = 3000;
int			zklock_commit_min_lease = 500;
bool		zklock_cancel_on_loss = false;
bool		zklock_lock_cache = false;
int			zklock_lock_cache_size = 64;
int			zklock_lock_cache_idle = 30000;
int			zklock_lock_cache_backoff = 60000;
bool		zklock_deadlock_records = true;
bool		zklock_tls = false;
char	   *zklock_tls_ca_file = NULL;
char	   *zklock_tls_cert_file = NULL;
char	   *zklock_tls_key_file = NULL;
int			zklock_tls_verify = ZKLOCK_TLS_VERIFY_FULL;
int			zklock_tls_min_version = ZKLOCK_TLS_MIN_1_2;
char	   *zklock_tls_crl_file = NULL;
int			zklock_tls_expiry_warning = 30;
char	   *zklock_sasl_mechanism = NULL;
char	   *zklock_sasl_user = NULL;
char	   *zklock_sasl_password = NULL;
char	   *zklock_sasl_service = NULL;
char	   *zklock_sasl_host = NULL;
char	   *zklock_sasl_keytab = NULL;
char	   *zklock_sasl_principal = NULL;

static const struct config_enum_entry acl_options[] = {
	{"open", ZKLOCK_ACL_OPEN, false},
	{"creator", ZKLOCK_ACL_CREATOR, false},
	{NULL, 0, false}
};

static const struct config_enum_entry tls_verify_options[] = {
	{"verify-full", ZKLOCK_TLS_VERIFY_FULL, false},
	{"verify-ca", ZKLOCK_TLS_VERIFY_CA, false},
	{NULL, 0, false}
};

static const struct config_enum_entry tls_min_version_options[] = {
	{"TLSv1.2", ZKLOCK_TLS_MIN_1_2, false},
	{"TLSv1.3", ZKLOCK_TLS_MIN_1_3, false},
	{NULL, 0, false}
};

/*
 * Check a new value of zklock.namespace: empty, or a valid path without a
 * trailing slash, short enough to leave room for lock paths.
 */
static bool
check_namespace(char **newval, void **extra, GucSource source)
{
	size_t		len = strlen(*newval);
	ZklockPathError err;

	if (len == 0)
		return true;
	if (len > ZKLOCK_MAX_NAMESPACE_LEN)
	{
		GUC_check_errdetail("zklock.namespace is longer than %d bytes.",
							ZKLOCK_MAX_NAMESPACE_LEN);
		return false;
	}
	err = zklock_validate_path(*newval, len, ZKLOCK_MAX_NAMESPACE_LEN, NULL);
	if (err != ZKLOCK_PATH_OK)
	{
		GUC_check_errdetail("zklock.namespace is not a valid ZooKeeper path: %s.",
							zklock_path_error_message(err));
		return false;
	}
	return true;
}

/*
 * Check a new value of zklock.hosts: a ZooKeeper connect string,
 * "host:port[,host:port...]" with an optional chroot path after the last
 * port; a host is a name, an IPv4 address or a bracketed IPv6 address.
 * Names are resolved at each connection, not here (a name that does not
 * resolve is a failure zk_status() shows).
 */
static bool
check_hosts(char **newval, void **extra, GucSource source)
{
	const char *s = *newval;
	const char *chroot = NULL;
	int			n = 0;

	if (s[0] == '\0')
	{
		GUC_check_errdetail("zklock.hosts is empty: it must name at least one server as host:port.");
		return false;
	}
	while (*s != '\0' && *s != '/')
	{
		const char *start = s;
		const char *colon = NULL;
		const char *end;
		long		port = 0;
		int			digits = 0;

		if (*s == '[')
		{
			end = strchr(s, ']');
			if (end == NULL || end == s + 1)
			{
				GUC_check_errdetail("Server %d of zklock.hosts opens an IPv6 address with \"[\" and does not close it.", n + 1);
				return false;
			}
			s = end + 1;
			if (*s == ':')
				colon = s;
		}
		else
		{
			while (*s != '\0' && *s != ',' && *s != '/')
			{
				if (*s == ':')
					colon = s;
				else if (!(isalnum((unsigned char) *s) || *s == '.' || *s == '-' || *s == '_'))
				{
					GUC_check_errdetail("Server %d of zklock.hosts has the character \"%c\", which no host name or address has.",
										n + 1, *s);
					return false;
				}
				s++;
			}
			if (colon != NULL)
				s = colon;
		}
		if (colon == NULL || colon == start)
		{
			GUC_check_errdetail("Server %d of zklock.hosts (\"%.*s\") is not host:port.",
								n + 1, (int) strcspn(start, ",/"), start);
			return false;
		}
		for (s = colon + 1; isdigit((unsigned char) *s); s++)
		{
			if (++digits <= 5)
				port = port * 10 + (*s - '0');
		}
		if (digits == 0 || digits > 5 || port < 1 || port > 65535 ||
			(*s != '\0' && *s != ',' && *s != '/'))
		{
			GUC_check_errdetail("Server %d of zklock.hosts (\"%.*s\") has no port between 1 and 65535.",
								n + 1, (int) strcspn(start, ",/"), start);
			return false;
		}
		n++;
		if (*s == ',')
		{
			s++;
			if (*s == '\0' || *s == ',' || *s == '/')
			{
				GUC_check_errdetail("zklock.hosts has an empty server after a comma.");
				return false;
			}
		}
	}
	if (*s == '/')
		chroot = s;
	if (chroot != NULL && chroot[1] != '\0')
	{
		ZklockPathError err = zklock_validate_path(chroot, strlen(chroot),
												   ZKLOCK_MAX_NAMESPACE_LEN, NULL);

		if (err != ZKLOCK_PATH_OK)
		{
			GUC_check_errdetail("The chroot path of zklock.hosts is not a valid ZooKeeper path: %s.",
								zklock_path_error_message(err));
			return false;
		}
	}
	return true;
}

/*
 * The server's zklock.commit_min_lease (its value from the configuration,
 * not one a session SET: a session that raises it only makes its own
 * COMMITs stricter).
 */
static int
server_commit_min_lease(void)
{
	const char *reset = GetConfigOptionResetString("zklock.commit_min_lease");

	return reset != NULL ? atoi(reset) : zklock_commit_min_lease;
}

/*
 * Is a session timeout of timeout ms long enough, with the lease settings
 * given (commit_min -1: the server's), to prove locks through an ensemble
 * (zklock_min_session_timeout_ms)?
 * Otherwise the check fails with the rule in its DETAIL.  While the
 * postmaster loads the library the settings arrive one by one: _PG_init
 * checks them together once they all have (zklock_session_timeout_ok).
 */
static bool
check_lease_rule(int timeout, int margin, int commit_min, int tick)
{
	int			need;

	if (process_shared_preload_libraries_in_progress)
		return true;
	if (commit_min < 0)
		commit_min = server_commit_min_lease();
	need = zklock_min_session_timeout_ms(margin, commit_min, tick);
	if (timeout >= need)
		return true;
	GUC_check_errdetail("zklock.session_timeout (%d ms) must be at least zklock.lease_margin (%d ms) + zklock.commit_min_lease (%d ms) + 2 x zklock.server_tick_time (%d ms) = %d ms; the values in effect are kept.",
						timeout, margin, commit_min, tick, need);
	GUC_check_errhint("Change them in an order that keeps the rule (raise the timeout first, lower it last), or reload again after the first setting was taken.");
	return false;
}

/* The lease rule with a new zklock.session_timeout */
static bool
check_session_timeout(int *newval, void **extra, GucSource source)
{
	return check_lease_rule(*newval, zklock_lease_margin, -1,
							zklock_server_tick_time);
}

/* The lease rule with a new zklock.lease_margin */
static bool
check_lease_margin(int *newval, void **extra, GucSource source)
{
	return check_lease_rule(zklock_session_timeout, *newval, -1,
							zklock_server_tick_time);
}

/*
 * The lease rule with a new server-wide zklock.commit_min_lease (the
 * configuration file, ALTER SYSTEM).  A higher value for a database, a
 * role or a session only makes those COMMITs stricter: it is not checked.
 */
static bool
check_commit_min_lease(int *newval, void **extra, GucSource source)
{
	if (source > PGC_S_ARGV)
		return true;
	return check_lease_rule(zklock_session_timeout, zklock_lease_margin, *newval,
							zklock_server_tick_time);
}

/* The lease rule with a new zklock.server_tick_time */
static bool
check_server_tick_time(int *newval, void **extra, GucSource source)
{
	return check_lease_rule(zklock_session_timeout, zklock_lease_margin,
							-1, *newval);
}

/*
 * Check a new value of zklock.participant_id: it must fit in a node's
 * data (the limit is in bytes of the server encoding; the UTF-8 form is
 * checked again when it is written).
 */
static bool
check_participant_id(char **newval, void **extra, GucSource source)
{
	if (strlen(*newval) >= ZKLOCK_NODE_DATA_SIZE)
	{
		GUC_check_errdetail("zklock.participant_id is longer than %d bytes.",
							ZKLOCK_NODE_DATA_SIZE - 1);
		return false;
	}
	return true;
}

/*
 * What SHOW and pg_settings say of zklock.auth: never the secret.
 */
static const char *
show_auth(void)
{
	return (zklock_auth && zklock_auth[0] != '\0') ? "********" : "";
}

/*
 * Check a new value of zklock.auth: empty, or "user:password".
 */
static bool
check_auth(char **newval, void **extra, GucSource source)
{
	if ((*newval)[0] != '\0' && strchr(*newval, ':') == NULL)
	{
		GUC_check_errdetail("zklock.auth must look like \"user:password\".");
		return false;
	}
	return true;
}

/*
 * What SHOW and pg_settings say of zklock.sasl_password: never the secret.
 */
static const char *
show_sasl_password(void)
{
	return (zklock_sasl_password && zklock_sasl_password[0] != '\0') ? "********" : "";
}

/*
 * Define the TLS and SASL GUCs: superuser-only, read from the server's
 * configuration; a reload that changes one restarts the worker, as
 * zklock.hosts does (worker/connection/secure.c).  The password, like
 * zklock.auth, is read at server start only: on a reload the postmaster logs
 * "parameter ... changed to" with the new value of every setting that changed.
 */
static void
define_secure_settings(void)
{
	int			flags = GUC_SUPERUSER_ONLY;

	DefineCustomBoolVariable("zklock.tls",
							 "Connect to ZooKeeper over TLS (the servers' secureClientPort).",
							 "Never falls back to plaintext: without a TLS-capable zookeeper C client, or with a file that cannot be used, the worker does not connect.",
							 &zklock_tls,
							 false,
							 PGC_SIGHUP, flags,
							 NULL, NULL, NULL);
	DefineCustomStringVariable("zklock.tls_ca_file",
							   "PEM file of the certificate authorities that sign the ZooKeeper servers' certificates.",
							   NULL,
							   &zklock_tls_ca_file,
							   "",
							   PGC_SIGHUP, flags,
							   NULL, NULL, NULL);
	DefineCustomStringVariable("zklock.tls_cert_file",
							   "PEM file of the client certificate (and its chain) zklock shows the ZooKeeper servers.",
							   "Empty (with zklock.tls_key_file empty too): no client certificate, for servers with ssl.clientAuth = none or want.",
							   &zklock_tls_cert_file,
							   "",
							   PGC_SIGHUP, flags,
							   NULL, NULL, NULL);
	DefineCustomStringVariable("zklock.tls_key_file",
							   "PEM file of the client certificate's private key (not encrypted).",
							   NULL,
							   &zklock_tls_key_file,
							   "",
							   PGC_SIGHUP, flags,
							   NULL, NULL, NULL);
	DefineCustomEnumVariable("zklock.tls_verify",
							 "What zklock checks of a ZooKeeper server's certificate: verify-full, that zklock.tls_ca_file signed it and that it names the zklock.hosts entry connected to; verify-ca, only the signature (unsafe: any certificate of the CA passes).",
							 NULL,
							 &zklock_tls_verify,
							 ZKLOCK_TLS_VERIFY_FULL,
							 tls_verify_options,
							 PGC_SIGHUP, flags,
							 NULL, NULL, NULL);
	DefineCustomEnumVariable("zklock.tls_min_version",
							 "Lowest TLS version zklock accepts from a ZooKeeper server.",
							 NULL,
							 &zklock_tls_min_version,
							 ZKLOCK_TLS_MIN_1_2,
							 tls_min_version_options,
							 PGC_SIGHUP, flags,
							 NULL, NULL, NULL);
	DefineCustomStringVariable("zklock.tls_crl_file",
							   "PEM file of certificate revocation lists checked against the ZooKeeper servers' certificates; empty: none.",
							   "It must hold the CRL of every certificate authority of the server's chain.",
							   &zklock_tls_crl_file,
							   "",
							   PGC_SIGHUP, flags,
							   NULL, NULL, NULL);
	DefineCustomIntVariable("zklock.tls_expiry_warning",
							"Warn when zklock's or a ZooKeeper server's certificate expires within this many days (0: never).",
							NULL,
							&zklock_tls_expiry_warning,
							30, 0, 3650,
							PGC_SIGHUP, flags,
							NULL, NULL, NULL);
	DefineCustomStringVariable("zklock.sasl_mechanism",
							   "SASL mechanism of the worker's ZooKeeper login (DIGEST-MD5 or GSSAPI); empty: no SASL.",
							   NULL,
							   &zklock_sasl_mechanism,
							   "",
							   PGC_SIGHUP, flags,
							   NULL, NULL, NULL);
	DefineCustomStringVariable("zklock.sasl_user",
							   "SASL user name (DIGEST-MD5) of the worker's ZooKeeper login.",
							   NULL,
							   &zklock_sasl_user,
							   "",
							   PGC_SIGHUP, flags,
							   NULL, NULL, NULL);
	DefineCustomStringVariable("zklock.sasl_password",
							   "SASL password (DIGEST-MD5) of the worker's ZooKeeper login.",
							   "Set in postgresql.conf; never shown by SHOW or pg_settings.  Read at server start only: the postmaster logs the new value of a setting a reload changes.",
							   &zklock_sasl_password,
							   "",
							   PGC_POSTMASTER,
							   GUC_SUPERUSER_ONLY | GUC_NO_SHOW_ALL | GUC_NOT_IN_SAMPLE,
							   NULL, NULL, show_sasl_password);
	DefineCustomStringVariable("zklock.sasl_service",
							   "SASL service name of the ZooKeeper servers (their principal's first part for GSSAPI).",
							   NULL,
							   &zklock_sasl_service,
							   "zookeeper",
							   PGC_SIGHUP, flags,
							   NULL, NULL, NULL);
	DefineCustomStringVariable("zklock.sasl_host",
							   "SASL host name of the ZooKeeper servers: zk-sasl-md5 for DIGEST-MD5, the host of their principal for GSSAPI.",
							   NULL,
							   &zklock_sasl_host,
							   "zk-sasl-md5",
							   PGC_SIGHUP, flags,
							   NULL, NULL, NULL);
	DefineCustomStringVariable("zklock.sasl_keytab",
							   "Kerberos keytab of the worker's GSSAPI login (the client keytab, KRB5_CLIENT_KTNAME).",
							   NULL,
							   &zklock_sasl_keytab,
							   "",
							   PGC_SIGHUP, flags,
							   NULL, NULL, NULL);
	DefineCustomStringVariable("zklock.sasl_principal",
							   "Kerberos principal of the worker's GSSAPI login.",
							   NULL,
							   &zklock_sasl_principal,
							   "",
							   PGC_SIGHUP, flags,
							   NULL, NULL, NULL);
}

/*
 * Define the GUCs of zklock.
 */
void
zklock_define_settings(void)
{
	DefineCustomStringVariable("zklock.hosts",
							   "ZooKeeper connect string (host:port,host:port...).",
							   NULL,
							   &zklock_hosts,
							   "127.0.0.1:2181",
							   PGC_SIGHUP,
							   0,
							   check_hosts, NULL, NULL);

	/*
	 * 30 s: below the maxSessionTimeout (20 ticks) of a server with
	 * Debian's sample tickTime of 2 s, so a default setup gets what it asks.
	 */
	DefineCustomIntVariable("zklock.session_timeout",
							"ZooKeeper session timeout requested by the worker.",
							"The server may negotiate a different value; zk_status() shows it.",
							&zklock_session_timeout,
							30000, 1000, 3600 * 1000,
							PGC_SIGHUP,
							GUC_UNIT_MS,
							check_session_timeout, NULL, NULL);

	DefineCustomIntVariable("zklock.lease_margin",
							"Safety margin taken off the session timeout when deciding how long a lock is known to be held.",
							"A lock is valid until the send time of the latest request ZooKeeper answered plus the negotiated session timeout minus this margin (at most half the timeout). It covers clock rate differences between this host and the servers and the time a commit takes.",
							&zklock_lease_margin,
							1000, 100, 60 * 1000,
							PGC_SIGHUP,
							GUC_UNIT_MS,
							check_lease_margin, NULL, NULL);
	DefineCustomIntVariable("zklock.connect_timeout",
							"How long a call waits for a missing ZooKeeper connection before it fails.",
							NULL,
							&zklock_connect_timeout,
							15000, 100, 3600 * 1000,
							PGC_SIGHUP,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomStringVariable("zklock.namespace",
							   "Path prefix applied to every zklock path.",
							   "Like Curator's namespace; SQL paths cannot leave it.",
							   &zklock_namespace,
							   "",
							   PGC_SUSET,
							   0,
							   check_namespace, NULL, NULL);

	DefineCustomIntVariable("zklock.max_requests",
							"Size of the shared table of zklock requests.",
							"Every lock waited for or held by any backend takes one entry.",
							&zklock_max_requests,
							1024, 4, ZKLOCK_MAX_REQUESTS_LIMIT,
							PGC_POSTMASTER,
							0,
							NULL, NULL, NULL);

	DefineCustomStringVariable("zklock.participant_id",
							   "Data written into this session's lock nodes instead of its identity.",
							   "A Curator LeaderSelector on the same path reads it as the participant's id; empty: the JSON identity.",
							   &zklock_participant_id,
							   "",
							   PGC_USERSET,
							   0,
							   check_participant_id, NULL, NULL);

	DefineCustomStringVariable("zklock.auth",
							   "ZooKeeper digest credentials (user:password) of the worker's session.",
							   "Set in postgresql.conf; never shown by SHOW or pg_settings.",
							   &zklock_auth,
							   "",
							   PGC_POSTMASTER,
							   GUC_SUPERUSER_ONLY | GUC_NO_SHOW_ALL | GUC_NOT_IN_SAMPLE,
							   check_auth, NULL, show_auth);

	DefineCustomEnumVariable("zklock.acl",
							 "ACL of the nodes zklock creates: open, or creator-only (needs zklock.auth, a SASL login or a client certificate).",
							 NULL,
							 &zklock_acl,
							 ZKLOCK_ACL_OPEN,
							 acl_options,
							 PGC_SIGHUP,
							 0,
							 NULL, NULL, NULL);

	DefineCustomBoolVariable("zklock.check_session_locks_at_commit",
							 "Also fail COMMIT when a session-level lock taken in the transaction was lost.",
							 NULL,
							 &zklock_check_session_locks,
							 false,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);

	DefineCustomBoolVariable("zklock.commit_confirm",
							 "Have COMMIT confirm with ZooKeeper that every lock the transaction relies on still exists.",
							 "One round trip per lock at COMMIT: the node must still exist and belong to the worker's session.  Without it, COMMIT relies on the session's lease alone.",
							 &zklock_commit_confirm,
							 false,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);

	DefineCustomIntVariable("zklock.server_tick_time",
							"The ZooKeeper servers' tickTime, or more.",
							"Through an ensemble, the lease is proven by syncs that go through the leader, spaced by this much: the leader pings its followers every tickTime / 2.  Too small is unsafe, larger only shortens the lease.",
							&zklock_server_tick_time,
							3000, 10, 60 * 1000,
							PGC_SIGHUP,
							GUC_UNIT_MS,
							check_server_tick_time, NULL, NULL);

	DefineCustomIntVariable("zklock.commit_min_lease",
							"Lease that must be left for COMMIT or PREPARE of a transaction relying on zklock locks.",
							"Everything after the check (the commit record, its WAL flush, synchronous replication) must fit in it.",
							&zklock_commit_min_lease,
							500, 10, 3600 * 1000,
							PGC_SUSET,
							GUC_UNIT_MS,
							check_commit_min_lease, NULL, NULL);

	DefineCustomBoolVariable("zklock.cancel_on_loss",
							 "Cancel the running statement of a session whose zklock lock is lost.",
							 "The statement fails with SQLSTATE ZK001 naming the path, as soon as the lease runs out or the lock is found lost.",
							 &zklock_cancel_on_loss,
							 false,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);

	DefineCustomBoolVariable("zklock.lock_cache",
							 "Keep a mutex node after its last local release and grant the next local acquire from it without a ZooKeeper request.",
							 "A node of another client queued behind it, an idle time or a full cache gives the node up.",
							 &zklock_lock_cache,
							 false,
							 PGC_SIGHUP,
							 0,
							 NULL, NULL, NULL);

	DefineCustomIntVariable("zklock.lock_cache_size",
							"Most lock paths whose nodes are kept at once (the least recently used goes first).",
							NULL,
							&zklock_lock_cache_size,
							64, 1, ZKLOCK_CACHE_MAX,
							PGC_SIGHUP,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("zklock.lock_cache_idle",
							"How long a kept lock node waits for the next local acquire before it is deleted.",
							NULL,
							&zklock_lock_cache_idle,
							30000, 100, 3600 * 1000,
							PGC_SIGHUP,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("zklock.lock_cache_backoff",
							"How long a lock path that another client wanted is not cached.",
							NULL,
							&zklock_lock_cache_backoff,
							60000, 0, 3600 * 1000,
							PGC_SIGHUP,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	/*
	 * On by default: a cycle across clusters is a deadlock as much as one
	 * inside a cluster, and the records cost nothing before deadlock_timeout.
	 * Superuser: a session that turns it off hides its waits from every
	 * other cluster's detection, which is not its own business only.
	 */
	DefineCustomBoolVariable("zklock.deadlock_records",
							 "Publish lock waits that lasted deadlock_timeout in ZooKeeper, for the deadlock detection across clusters.",
							 "Off: only cycles inside this cluster are detected.",
							 &zklock_deadlock_records,
							 true,
							 PGC_SUSET,
							 0,
							 NULL, NULL, NULL);

	define_secure_settings();
	MarkGUCPrefixReserved("zklock");
}

/*
 * Is zklock.session_timeout long enough for the lease to cover a COMMIT
 * through an ensemble (zklock_min_session_timeout_ms)?  Otherwise says so
 * at elevel and returns false.
 */
bool
zklock_session_timeout_ok(int elevel)
{
	int			need = zklock_min_session_timeout_ms(zklock_lease_margin,
													 zklock_commit_min_lease,
													 zklock_server_tick_time);

	if (zklock_session_timeout >= need)
		return true;
	ereport(elevel,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("zklock.session_timeout (%d ms) is too short to prove locks through a zookeeper ensemble",
					zklock_session_timeout),
			 errdetail("It must be at least zklock.lease_margin (%d ms) + zklock.commit_min_lease (%d ms) + 2 x zklock.server_tick_time (%d ms) = %d ms.",
					   zklock_lease_margin, zklock_commit_min_lease,
					   zklock_server_tick_time, need),
			 errhint("Raise zklock.session_timeout, or lower zklock.server_tick_time to the servers' tickTime.")));
	return false;
}

/*-------------------------------------------------------------------------
 *
 * common/settings.h
 *	  zklock's settings (common/settings.c): the variables of its GUCs,
 *	  the values of its enum GUCs, their definition at load, and the check
 *	  of the session timeout.  Its readers are the files that read a
 *	  setting.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZKLOCK_SETTINGS_H
#define ZKLOCK_SETTINGS_H

/* common/settings.c: the GUCs */
extern char *zklock_hosts;
extern int	zklock_session_timeout;
extern int	zklock_connect_timeout;
extern int	zklock_lease_margin;
extern char *zklock_namespace;
extern int	zklock_max_requests;
extern char *zklock_auth;
extern char *zklock_participant_id;
extern int	zklock_acl;
extern bool zklock_check_session_locks;
extern bool zklock_commit_confirm;
extern int	zklock_server_tick_time;
extern int	zklock_commit_min_lease;
extern bool zklock_cancel_on_loss;
extern bool zklock_lock_cache;
extern int	zklock_lock_cache_size;
extern int	zklock_lock_cache_idle;
extern int	zklock_lock_cache_backoff;
extern bool zklock_deadlock_records;
extern bool zklock_tls;
extern char *zklock_tls_ca_file;
extern char *zklock_tls_cert_file;
extern char *zklock_tls_key_file;
extern int	zklock_tls_verify;
extern int	zklock_tls_min_version;
extern char *zklock_tls_crl_file;
extern int	zklock_tls_expiry_warning;
extern char *zklock_sasl_mechanism;
extern char *zklock_sasl_user;
extern char *zklock_sasl_password;
extern char *zklock_sasl_service;
extern char *zklock_sasl_host;
extern char *zklock_sasl_keytab;
extern char *zklock_sasl_principal;
extern void zklock_define_settings(void);
extern bool zklock_session_timeout_ok(int elevel);

/* zklock.tls_verify and zklock.tls_min_version */
typedef enum ZklockTlsVerify
{
	ZKLOCK_TLS_VERIFY_FULL = 0,
	ZKLOCK_TLS_VERIFY_CA
} ZklockTlsVerify;

typedef enum ZklockTlsMinVersion
{
	ZKLOCK_TLS_MIN_1_2 = 0,
	ZKLOCK_TLS_MIN_1_3
} ZklockTlsMinVersion;

/* zklock.acl */
typedef enum ZklockAclMode
{
	ZKLOCK_ACL_OPEN = 0,
	ZKLOCK_ACL_CREATOR
} ZklockAclMode;

#endif							/* ZKLOCK_SETTINGS_H */

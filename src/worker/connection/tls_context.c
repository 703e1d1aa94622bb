/*-------------------------------------------------------------------------
 *
 * worker/connection/tls_context.c
 *	  The TLS context of each connection the worker makes, and what it
 *	  checks of the server: zklock.tls_ca_file as the only trust anchors,
 *	  zklock.tls_crl_file, zklock.tls_min_version, the client certificate
 *	  when one is set, a TLS server's certificate (extended key usage), and
 *	  with zklock.tls_verify = verify-full the name or address of the
 *	  zklock.hosts entry connected to, which OpenSSL matches against the
 *	  certificate.  The C client asks for the context with the connection's
 *	  socket connected (zk-client-build/patches/tls-context-and-sasl.patch);
 *	  OpenSSL decides, this file only says why it refused, and what the
 *	  certificates' expiry is.  Below worker/connection/secure.c, which opens
 *	  the handle and reports failures.
 *
 *	  zklock_tls_connection_context	the context of a connection (the
 *									client's ctx_fn)
 *	  zklock_tls_files_ok			the files load; the client certificate
 *									is in its validity period
 *	  zklock_tls_refusal			why the last context could not be made
 *									or its server's certificate was refused
 *	  zklock_tls_refusal_clear		forget it
 *	  zklock_tls_connected			a connection was made: the expiry of its
 *									certificates, warned of
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <netdb.h>
#include <sys/socket.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include "utils/timestamp.h"

#include "zklock.h"
#include "compat.h"
#include "common/shmem.h"
#include "common/settings.h"
#include "worker/connection/connection_int.h"

#if ZKLOCK_HAVE_ZK_TLS
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

/*
 * Why the TLS context of the connection being made could not be made, or
 * why its server's certificate was refused (the first failure the
 * verification met); empty: neither.  Set by the context the C client asks
 * for at each connection (tls_connection_context) and its verification,
 * read when the handshake failed (zklock_tls_refusal).  The worker
 * opens its handle without ZOO_READONLY, so the client never makes a
 * second TLS connection (its read-write probe) beside the handle's.
 */
static char tls_why[ZKLOCK_CONN_FAILURE_LEN / 2] = "";

/* the zklock.hosts entry the connection being made is to (verify-full) */
static char tls_expected[NI_MAXHOST] = "";

/*
 * When the certificates expire (0: none or not known), and how many days
 * are left then (-1: none): zklock's own, the server's of the connection
 * being made.
 */
static TimestampTz tls_own_expires = 0;
static int	tls_own_days = -1;
static TimestampTz tls_server_expires = 0;
static int	tls_server_days = -1;
static char tls_server_subject[256] = "";

/*
 * Days from now until an ASN.1 time (negative: past), and that time as a
 * timestamp into *ts (0 if it cannot be read).
 */
static int
days_until(const ASN1_TIME *t, TimestampTz *ts)
{
	int			days = 0;
	int			secs = 0;
	struct tm	tm;

	*ts = 0;
	if (t == NULL || ASN1_TIME_diff(&days, &secs, NULL, t) != 1)
		return -1;
	if (ASN1_TIME_to_tm(t, &tm) == 1)
		*ts = time_t_to_timestamptz(timegm(&tm));
	return days;
}

/*
 * What a certificate names, for a refusal's reason: its subjectAltNames
 * as "DNS:name" and "IP:address", or, when it has none, "CN=name".
 */
static void
cert_names(X509 *cert, char *buf, size_t len)
{
	GENERAL_NAMES *names;
	size_t		used = 0;
	int			i;

	buf[0] = '\0';
	names = X509_get_ext_d2i(cert, NID_subject_alt_name, NULL, NULL);
	for (i = 0; names != NULL && i < sk_GENERAL_NAME_num(names); i++)
	{
		const GENERAL_NAME *gn = sk_GENERAL_NAME_value(names, i);
		char		one[NI_MAXHOST + 8] = "";

		if (gn->type == GEN_DNS)
			snprintf(one, sizeof(one), "DNS:%.*s",
					 Min(ASN1_STRING_length(gn->d.dNSName), NI_MAXHOST),
					 (const char *) ASN1_STRING_get0_data(gn->d.dNSName));
		else if (gn->type == GEN_IPADD)
		{
			const unsigned char *ip = ASN1_STRING_get0_data(gn->d.iPAddress);
			int			iplen = ASN1_STRING_length(gn->d.iPAddress);
			char		text[INET6_ADDRSTRLEN] = "?";

			if (iplen == 4 || iplen == 16)
				inet_ntop(iplen == 4 ? AF_INET : AF_INET6, ip, text, sizeof(text));
			snprintf(one, sizeof(one), "IP:%s", text);
		}
		if (one[0] != '\0' && used < len)
			used += snprintf(buf + used, len - used, "%s%s", used ? ", " : "", one);
	}
	if (names != NULL)
		GENERAL_NAMES_free(names);
	if (buf[0] == '\0')
	{
		char		cn[256] = "";

		if (X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName,
									  cn, sizeof(cn)) > 0)
			snprintf(buf, len, "CN=%s", cn);
		else
			snprintf(buf, len, "no name at all");
	}
}

/*
 * OpenSSL's verification of the server's chain calls this for each
 * certificate: the first failure is kept with its reason (for a name
 * that does not match, what the certificate names), and the server
 * certificate's expiry is noted.  OpenSSL decides; this only watches.
 */
static int
tls_verify_cb(int ok, X509_STORE_CTX *sctx)
{
	int			err = X509_STORE_CTX_get_error(sctx);
	X509	   *cert = X509_STORE_CTX_get_current_cert(sctx);

	if (!ok && tls_why[0] == '\0')
	{
		if ((err == X509_V_ERR_HOSTNAME_MISMATCH || err == X509_V_ERR_IP_ADDRESS_MISMATCH) &&
			cert != NULL)
		{
			char		names[ZKLOCK_CONN_FAILURE_LEN / 4];

			cert_names(cert, names, sizeof(names));
			snprintf(tls_why, sizeof(tls_why),
					 "certificate verify failed: the server certificate does not name \"%s\" (zklock.tls_verify = verify-full); it names %s",
					 tls_expected, names);
		}
		else
			snprintf(tls_why, sizeof(tls_why), "certificate verify failed: %s",
					 X509_verify_cert_error_string(err));
	}
	if (ok && X509_STORE_CTX_get_error_depth(sctx) == 0 && cert != NULL)
	{
		tls_server_days = days_until(X509_get0_notAfter(cert), &tls_server_expires);
		X509_NAME_oneline(X509_get_subject_name(cert), tls_server_subject,
						  sizeof(tls_server_subject));
	}
	return ok;
}

/*
 * Load zklock.tls_crl_file's certificate revocation lists into ctx's
 * store and check every certificate of the server's chain against them,
 * as libpq does with sslcrl.  On failure fills why and returns false.
 */
static bool
tls_load_crl(SSL_CTX *ctx, char *why, size_t len)
{
	X509_STORE *store = SSL_CTX_get_cert_store(ctx);
	BIO		   *bio;
	X509_CRL   *crl;
	int			n = 0;

	bio = BIO_new_file(zklock_tls_crl_file, "r");
	if (bio == NULL)
	{
		snprintf(why, len, "could not open zklock.tls_crl_file \"%s\": %s",
				 zklock_tls_crl_file, strerror(errno));
		ERR_clear_error();		/* OpenSSL's words would say it again */
		return false;
	}
	while ((crl = PEM_read_bio_X509_CRL(bio, NULL, NULL, NULL)) != NULL)
	{
		X509_STORE_add_crl(store, crl);
		X509_CRL_free(crl);
		n++;
	}
	BIO_free(bio);
	ERR_clear_error();
	if (n == 0)
	{
		snprintf(why, len, "zklock.tls_crl_file \"%s\" holds no PEM certificate revocation list",
				 zklock_tls_crl_file);
		return false;
	}
	X509_STORE_set_flags(store, X509_V_FLAG_CRL_CHECK | X509_V_FLAG_CRL_CHECK_ALL);
	return true;
}

/*
 * The TLS context of one connection, as the settings ask: the lowest TLS
 * version, zklock.tls_ca_file as the only trust anchors (not OpenSSL's
 * default paths), the CRLs, the client certificate when one is set, the
 * server's certificate made for a TLS server (its extended key usage,
 * when present, allows serverAuth), and with expected (not NULL) the name
 * or address it must bear.  NULL with why filled when it cannot be made.
 */
static SSL_CTX *
tls_make_context(const char *expected, char *why, size_t len)
{
	SSL_CTX    *ctx;
	X509_VERIFY_PARAM *param;
	char		what[ZKLOCK_CONN_FAILURE_LEN / 2] = "";
	unsigned long e;
	const char *reason;
	unsigned char ip[16];

	why[0] = '\0';
	ERR_clear_error();
	ctx = SSL_CTX_new(TLS_client_method());
	if (ctx == NULL)
	{
		snprintf(why, len, "could not make a TLS context");
		return NULL;
	}
	param = SSL_CTX_get0_param(ctx);
	if (SSL_CTX_set_min_proto_version(ctx, zklock_tls_min_version == ZKLOCK_TLS_MIN_1_3 ?
									  TLS1_3_VERSION : TLS1_2_VERSION) != 1)
		snprintf(what, sizeof(what), "could not set zklock.tls_min_version");
	else if (SSL_CTX_load_verify_locations(ctx, zklock_tls_ca_file, NULL) != 1)
		snprintf(what, sizeof(what), "could not load zklock.tls_ca_file \"%s\"",
				 zklock_tls_ca_file);
	else if (zklock_tls_crl_file[0] != '\0' && !tls_load_crl(ctx, what, sizeof(what)))
		 /* what says why */ ;
	else if (zklock_tls_cert_file[0] != '\0' &&
			 SSL_CTX_use_certificate_chain_file(ctx, zklock_tls_cert_file) != 1)
		snprintf(what, sizeof(what), "could not load zklock.tls_cert_file \"%s\"",
				 zklock_tls_cert_file);
	else if (zklock_tls_key_file[0] != '\0' &&
			 SSL_CTX_use_PrivateKey_file(ctx, zklock_tls_key_file, SSL_FILETYPE_PEM) != 1)
		snprintf(what, sizeof(what), "could not load zklock.tls_key_file \"%s\"",
				 zklock_tls_key_file);
	else if (zklock_tls_cert_file[0] != '\0' && SSL_CTX_check_private_key(ctx) != 1)
		snprintf(what, sizeof(what), "zklock.tls_key_file \"%s\" is not the key of zklock.tls_cert_file \"%s\"",
				 zklock_tls_key_file, zklock_tls_cert_file);
	else if (SSL_CTX_set_purpose(ctx, X509_PURPOSE_SSL_SERVER) != 1)
		snprintf(what, sizeof(what), "could not ask for a TLS server's certificate");
	else if (expected != NULL)
	{
		/* an address is matched against IP names, a name against DNS names */
		bool		is_ip = inet_pton(AF_INET, expected, ip) == 1 ||
			inet_pton(AF_INET6, expected, ip) == 1;

		X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
		if ((is_ip ? X509_VERIFY_PARAM_set1_ip_asc(param, expected) :
			 X509_VERIFY_PARAM_set1_host(param, expected, 0)) != 1)
			snprintf(what, sizeof(what), "could not ask for the name \"%s\" in the server certificate",
					 expected);
	}
	if (what[0] != '\0')
	{
		e = ERR_peek_last_error();
		reason = e != 0 ? ERR_reason_error_string(e) : NULL;
		snprintf(why, len, "%s%s%s", what, reason ? ": " : "", reason ? reason : "");
		ERR_clear_error();
		SSL_CTX_free(ctx);
		return NULL;
	}
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, tls_verify_cb);
	SSL_CTX_set_mode(ctx, SSL_MODE_AUTO_RETRY);
	return ctx;
}

/*
 * Is the address of sa (with its port) that of host:port?  A host that
 * is no address literal is resolved now, as the C client resolves it.
 */
static bool
entry_has_address(const char *host, const char *port, const struct sockaddr *sa)
{
	struct addrinfo hints;
	struct addrinfo *res;
	struct addrinfo *ai;
	bool		found = false;

	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	if (getaddrinfo(host, port, &hints, &res) != 0)
		return false;
	for (ai = res; ai != NULL && !found; ai = ai->ai_next)
	{
		if (ai->ai_family != sa->sa_family)
			continue;
		if (sa->sa_family == AF_INET)
		{
			const struct sockaddr_in *a = (const struct sockaddr_in *) ai->ai_addr;
			const struct sockaddr_in *b = (const struct sockaddr_in *) sa;

			found = a->sin_port == b->sin_port &&
				a->sin_addr.s_addr == b->sin_addr.s_addr;
		}
		else if (sa->sa_family == AF_INET6)
		{
			const struct sockaddr_in6 *a = (const struct sockaddr_in6 *) ai->ai_addr;
			const struct sockaddr_in6 *b = (const struct sockaddr_in6 *) sa;

			found = a->sin6_port == b->sin6_port &&
				memcmp(&a->sin6_addr, &b->sin6_addr, sizeof(a->sin6_addr)) == 0;
		}
	}
	freeaddrinfo(res);
	return found;
}

/*
 * The zklock.hosts entry whose address (resolved now) is the server's the
 * socket is connected to: its host name or address literal, into host.
 * Address literals are tried before names.  False when none is.
 */
static bool
tls_host_of_socket(int sock, char *host, size_t len)
{
	struct sockaddr_storage ss;
	socklen_t	sslen = sizeof(ss);
	char	   *hosts;
	char	   *p;
	int			pass;
	bool		found = false;

	if (getpeername(sock, (struct sockaddr *) &ss, &sslen) != 0)
		return false;
	hosts = pstrdup(zklock_hosts);
	if ((p = strchr(hosts, '/')) != NULL)
		*p = '\0';				/* a chroot suffix */
	for (pass = 0; pass < 2 && !found; pass++)
	{
		char	   *copy = pstrdup(hosts);
		char	   *save = NULL;
		char	   *entry;

		for (entry = strtok_r(copy, ",", &save); entry != NULL && !found;
			 entry = strtok_r(NULL, ",", &save))
		{
			char	   *name = entry;
			char	   *port;
			unsigned char ip[16];
			bool		literal;

			while (*name == ' ' || *name == '\t')
				name++;
			if (*name == '[')
			{
				/* [IPv6 address]:port */
				name++;
				if ((port = strchr(name, ']')) == NULL)
					continue;
				*port++ = '\0';
				if (*port == ':')
					port++;
			}
			else if ((port = strrchr(name, ':')) != NULL)
				*port++ = '\0';
			if (port == NULL || *port == '\0')
				continue;
			literal = inet_pton(AF_INET, name, ip) == 1 || inet_pton(AF_INET6, name, ip) == 1;
			if (literal != (pass == 0))
				continue;
			if (entry_has_address(name, port, (struct sockaddr *) &ss))
			{
				strlcpy(host, name, len);
				found = true;
			}
		}
		pfree(copy);
	}
	pfree(hosts);
	return found;
}

/*
 * The C client asks for the TLS context of each connection it makes, its
 * socket connected (tls-context-and-sasl.patch): with verify-full, the
 * name the certificate must bear is the zklock.hosts entry of that
 * address.  NULL (and tls_why says why) when it cannot be made.
 */
void *
zklock_tls_connection_context(zhandle_t *zh, int sock, void *arg)
{
	SSL_CTX    *ctx;
	char		why[ZKLOCK_CONN_FAILURE_LEN / 2];

	tls_why[0] = '\0';
	tls_expected[0] = '\0';
	tls_server_days = -1;
	tls_server_expires = 0;
	tls_server_subject[0] = '\0';
	if (zklock_tls_verify == ZKLOCK_TLS_VERIFY_FULL &&
		!tls_host_of_socket(sock, tls_expected, sizeof(tls_expected)))
	{
		snprintf(tls_why, sizeof(tls_why),
				 "no entry of zklock.hosts resolves to the address connected to, so its certificate cannot be checked for a name");
		return NULL;
	}
	ctx = tls_make_context(zklock_tls_verify == ZKLOCK_TLS_VERIFY_FULL ?
						   tls_expected : NULL, why, sizeof(why));
	if (ctx == NULL)
		strlcpy(tls_why, why, sizeof(tls_why));
	return ctx;
}

/*
 * Check that the TLS files load as each connection loads them (the same
 * context) and that the client certificate, if any, is in its validity
 * period, so that a wrong file is named here rather than found by a
 * handshake that only says it failed.  On failure fills why and returns
 * false.
 */
bool
zklock_tls_files_ok(char *why, size_t len)
{
	SSL_CTX    *ctx;
	X509	   *cert;

	tls_own_days = -1;
	tls_own_expires = 0;
	if (zklock_tls_ca_file[0] == '\0')
	{
		snprintf(why, len, "zklock.tls is on but zklock.tls_ca_file is empty");
		return false;
	}
	if ((zklock_tls_cert_file[0] == '\0') != (zklock_tls_key_file[0] == '\0'))
	{
		snprintf(why, len, "zklock.tls_cert_file and zklock.tls_key_file must be set both (a client certificate) or neither (none)");
		return false;
	}
	if ((ctx = tls_make_context(NULL, why, len)) == NULL)
		return false;
	cert = SSL_CTX_get0_certificate(ctx);
	if (cert != NULL && X509_cmp_current_time(X509_get0_notAfter(cert)) <= 0)
		snprintf(why, len, "the client certificate of zklock.tls_cert_file \"%s\" has expired",
				 zklock_tls_cert_file);
	else if (cert != NULL && X509_cmp_current_time(X509_get0_notBefore(cert)) >= 0)
		snprintf(why, len, "the client certificate of zklock.tls_cert_file \"%s\" is not valid yet",
				 zklock_tls_cert_file);
	else if (cert != NULL)
		tls_own_days = days_until(X509_get0_notAfter(cert), &tls_own_expires);
	SSL_CTX_free(ctx);
	return why[0] == '\0';
}

/*
 * A TLS connection was made: zk_status shows when its certificates
 * expire, and a certificate (zklock's or the server's) that expires
 * within zklock.tls_expiry_warning days is warned of in the log, once per
 * certificate and day, and in zk_status.tls_warning.  Caller holds the
 * lock.
 */
void
zklock_tls_connected(const char *server)
{
	static char warned_own[MAXPGPATH + 16] = "";
	static char warned_server[320] = "";
	ZklockShared *sh = zklock_shared;
	char		key[MAXPGPATH + 16];
	char		own[ZKLOCK_CONN_FAILURE_LEN / 2] = "";
	char		theirs[ZKLOCK_CONN_FAILURE_LEN / 2] = "";

	sh->tls_cert_expires = tls_own_expires;
	sh->tls_server_cert_expires = tls_server_expires;
	sh->tls_warning[0] = '\0';
	if (zklock_tls_expiry_warning <= 0)
		return;
	if (tls_own_days >= 0 && tls_own_days < zklock_tls_expiry_warning)
	{
		snprintf(own, sizeof(own), "the client certificate of zklock.tls_cert_file \"%s\" expires in %d days",
				 zklock_tls_cert_file, tls_own_days);
		snprintf(key, sizeof(key), "%s|%d", zklock_tls_cert_file, tls_own_days);
		if (strcmp(key, warned_own) != 0)
			ereport(WARNING,
					(errmsg("zklock: %s", own),
					 errhint("Replace the file (or set zklock.tls_cert_file and zklock.tls_key_file to new ones) and reload: the worker reconnects with it, keeping its session and locks.")));
		strlcpy(warned_own, key, sizeof(warned_own));
	}
	if (tls_server_days >= 0 && tls_server_days < zklock_tls_expiry_warning)
	{
		snprintf(theirs, sizeof(theirs), "the certificate of zookeeper server %s (%s) expires in %d days",
				 server ? server : "?", tls_server_subject, tls_server_days);
		snprintf(key, sizeof(key), "%s|%d", tls_server_subject, tls_server_days);
		if (strcmp(key, warned_server) != 0)
			ereport(WARNING, (errmsg("zklock: %s", theirs)));
		strlcpy(warned_server, key, sizeof(warned_server));
	}
	snprintf(sh->tls_warning, sizeof(sh->tls_warning), "%s%s%s",
			 own, own[0] && theirs[0] ? "; " : "", theirs);
}

/*
 * Why the last connection's context could not be made or its server's
 * certificate was refused; empty: neither.
 */
const char *
zklock_tls_refusal(void)
{
	return tls_why;
}

/*
 * Forget the refusal (it was reported).
 */
void
zklock_tls_refusal_clear(void)
{
	tls_why[0] = '\0';
}
#endif							/* ZKLOCK_HAVE_ZK_TLS */

/*-------------------------------------------------------------------------
 *
 * common/session_file.c
 *	  Keeping the worker's ZooKeeper session across process boundaries:
 *	  the session file in the data directory, closing a session left by an
 *	  earlier run of the cluster, and closing the session when the
 *	  postmaster shuts down.
 *
 * A restarted worker (shared memory intact) resumes the session from
 * shared memory, so locks survive.  After a crash-restart of the cluster
 * (shared memory reinitialised) the backends that held the locks are gone,
 * so the old session is closed at once: its ephemeral nodes vanish now
 * instead of after the session timeout.  The same happens at shutdown.
 *
 * The file belongs to one server run.  It records who wrote it: the
 * postmaster's pid and start time, the host name and the data directory.
 * A copy of the data directory (pg_basebackup, pg_rewind, a file-level
 * copy, a standby) carries the file of its origin, whose session is alive
 * and holds the origin's locks; a server that did not write the file must
 * never close that session, so only a file written by this very server run
 * (same postmaster, same start, same host and directory: the crash-restart
 * case) is acted on.  Anything else is removed unread.  A clean start never
 * needs the file: a clean shutdown closed the session already.
 *
 * Beside it, zklock.deletes keeps the pending deletes of persistent nodes
 * (P/ready of a double barrier), which no session end removes and which
 * must outlive shared memory (worker/deletes/delete_table.c writes it and
 * worker/deletes/deletes.c reads it, through the functions at the end of
 * this file).  Unlike the session file it
 * is acted on by any later server run: a delete names the node's creation
 * zxid, so only that very node is deleted (one that does not is applied
 * only with the same zklock.hosts).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>
#include <sys/stat.h>

#include <zookeeper/zookeeper.h>

#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "port/pg_crc32c.h"
#include "storage/fd.h"
#include "utils/timestamp.h"

#include "postmaster/postmaster.h"

#include "zklock.h"
#include "common/settings.h"
#include "common/session_file.h"

/* relative to the data directory, which is every process's cwd */
#define SESSION_FILE		"zklock.session"
#define SESSION_FILE_TMP	"zklock.session.tmp"
#define DELETES_FILE		"zklock.deletes"
#define DELETES_FILE_TMP	"zklock.deletes.tmp"
#define DELETES_MAGIC		"zklock pending deletes 1"

/*
 * Who this server run is, as one line of text: postmaster pid, postmaster
 * start time, host name, data directory (last: it may contain spaces).
 */
static void
server_run_identity(char *buf, size_t len)
{
	char		host[256];

	if (gethostname(host, sizeof(host)) != 0)
		strlcpy(host, "?", sizeof(host));
	host[sizeof(host) - 1] = '\0';
	snprintf(buf, len, "%d %lld %s %s", (int) PostmasterPid,
			 (long long) PgStartTime, host, DataDir ? DataDir : "?");
}

/*
 * Remember the session id and password in the data directory (mode 0600),
 * with the identity of the server run that opened the session, written to
 * a temporary file and renamed into place durably.
 */
void
zklock_session_save(int64 session_id, const char *passwd)
{
	char		buf[MAXPGPATH + 400];
	char		ident[MAXPGPATH + 300];
	int			len;
	int			fd;
	int			i;

	len = snprintf(buf, sizeof(buf), "%016llx ", (unsigned long long) session_id);
	for (i = 0; i < 16; i++)
		len += snprintf(buf + len, sizeof(buf) - len, "%02x", (unsigned char) passwd[i]);
	server_run_identity(ident, sizeof(ident));
	len += snprintf(buf + len, sizeof(buf) - len, "\n%s\n", ident);
	if (len >= (int) sizeof(buf))
		len = sizeof(buf) - 1;

	fd = open(SESSION_FILE_TMP, O_WRONLY | O_CREAT | O_TRUNC | PG_BINARY, S_IRUSR | S_IWUSR);
	if (fd < 0)
	{
		ereport(LOG,
				(errcode_for_file_access(),
				 errmsg("zklock: could not create \"%s\": %m", SESSION_FILE_TMP)));
		return;
	}
	if (write(fd, buf, len) != len)
	{
		ereport(LOG,
				(errcode_for_file_access(),
				 errmsg("zklock: could not write \"%s\": %m", SESSION_FILE_TMP)));
		close(fd);
		unlink(SESSION_FILE_TMP);
		return;
	}
	close(fd);
	/* fsyncs the file, renames it, fsyncs the directory */
	(void) durable_rename(SESSION_FILE_TMP, SESSION_FILE, LOG);
}

/*
 * Read the session file.  Returns false when there is none, it cannot be
 * read, or it was written by another server run (see the file's banner);
 * *foreign says which of the last two it was, so the caller can remove
 * the file without touching the session it names.
 */
bool
zklock_session_load(int64 *session_id, char *passwd, bool *foreign)
{
	char		buf[MAXPGPATH + 400];
	char		ident[MAXPGPATH + 300];
	unsigned long long id;
	char	   *nl;
	int			fd;
	ssize_t		n;
	int			i;

	*foreign = false;
	fd = open(SESSION_FILE, O_RDONLY | PG_BINARY, 0);
	if (fd < 0)
		return false;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n < 16 + 1 + 32)
		return false;
	buf[n] = '\0';
	if (sscanf(buf, "%16llx", &id) != 1)
		return false;
	for (i = 0; i < 16; i++)
	{
		unsigned int b;

		if (sscanf(buf + 17 + 2 * i, "%2x", &b) != 1)
			return false;
		passwd[i] = (char) b;
	}

	/* the second line must be this server run, exactly */
	server_run_identity(ident, sizeof(ident));
	nl = strchr(buf, '\n');
	if (nl == NULL || strncmp(nl + 1, ident, strlen(ident)) != 0 ||
		nl[1 + strlen(ident)] != '\n')
	{
		*foreign = true;
		return false;
	}
	*session_id = (int64) id;
	return true;
}

/*
 * Remove the session file: the session it names is over.
 */
void
zklock_session_forget(void)
{
	if (unlink(SESSION_FILE) != 0 && errno != ENOENT)
		ereport(LOG,
				(errcode_for_file_access(),
				 errmsg("zklock: could not remove \"%s\": %m", SESSION_FILE)));
}

static int	close_state = 0;

/*
 * Watcher of the short-lived handle that closes an old session.
 */
static void
close_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
	if (type == ZOO_SESSION_EVENT)
		close_state = state;
}

/*
 * Attach to a session by id and password and close it, so the server
 * deletes its ephemeral nodes now.  Bounded by timeout_ms; a session that
 * has already expired is simply gone.  Runs its own small event loop, so
 * it works in the worker before its main loop and in the postmaster at
 * exit.  Returns true when the session is known to be gone.
 */
bool
zklock_session_close(int64 session_id, const char *passwd, int timeout_ms)
{
	clientid_t	cid;
	zhandle_t  *h;
	TimestampTz deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), timeout_ms);
	bool		gone = false;

	if (zklock_hosts == NULL || zklock_hosts[0] == '\0')
		return false;
	cid.client_id = session_id;
	memcpy(cid.passwd, passwd, sizeof(cid.passwd));
	close_state = 0;
	zoo_set_debug_level(0);
	h = zookeeper_init(zklock_hosts, close_watcher, zklock_session_timeout, &cid, NULL, 0);
	if (h == NULL)
		return false;

	while (GetCurrentTimestamp() < deadline)
	{
		int			fd = -1;
		int			interest = 0;
		struct timeval tv = {0};
		struct pollfd pfd;
		int			events = 0;
		long		wait_ms;

		if (close_state == ZOO_CONNECTED_STATE ||
			close_state == ZOO_EXPIRED_SESSION_STATE ||
			close_state == ZOO_AUTH_FAILED_STATE)
			break;
		if (zookeeper_interest(h, &fd, &interest, &tv) == ZINVALIDSTATE)
			break;
		wait_ms = tv.tv_sec * 1000L + tv.tv_usec / 1000;
		wait_ms = Max(1, Min(wait_ms, 100));
		if (fd >= 0)
		{
			pfd.fd = fd;
			pfd.events = ((interest & ZOOKEEPER_READ) ? POLLIN : 0) |
				((interest & ZOOKEEPER_WRITE) ? POLLOUT : 0);
			pfd.revents = 0;
			if (poll(&pfd, 1, (int) wait_ms) > 0)
			{
				if (pfd.revents & (POLLIN | POLLHUP | POLLERR))
					events |= ZOOKEEPER_READ;
				if (pfd.revents & POLLOUT)
					events |= ZOOKEEPER_WRITE;
			}
		}
		else
			pg_usleep(wait_ms * 1000L);
		(void) zookeeper_process(h, events);
	}

	if (close_state == ZOO_CONNECTED_STATE)
	{
		const clientid_t *now = zoo_client_id(h);

		/* the server handed us the old session: closing it ends it */
		gone = (now->client_id == session_id);
	}
	else if (close_state == ZOO_EXPIRED_SESSION_STATE)
		gone = true;
	zookeeper_close(h);
	return gone;
}

/*
 * Postmaster exit (shutdown): close the session the worker of this server
 * run left, so what this cluster held is released at once.
 */
void
zklock_postmaster_exit(int code, Datum arg)
{
	int64		id;
	char		passwd[16];

	bool		foreign;

	if (IsUnderPostmaster || MyProcPid != PostmasterPid)
		return;
	if (!zklock_session_load(&id, passwd, &foreign))
		return;
	if (zklock_session_close(id, passwd, 3000))
		zklock_session_forget();
}

/* ---------------------------------------------------------------------
 * The pending deletes of persistent nodes: $PGDATA/zklock.deletes.
 *
 *   zklock pending deletes 1 <crc32c of the rest, 8 hex digits>
 *   hosts <zklock.hosts>
 *   <czxid>[,<ctime>]\t<prefix>\t<path> one line a node ("" prefix: by
 *                                       name; no ctime: written before it
 *                                       was kept, 0)
 *
 * ZooKeeper paths hold no control characters, so tabs and newlines
 * separate safely.  The file is bounded: at most one line per entry of the
 * table.  One that is damaged (checksum, syntax, size) is ignored with a
 * WARNING.  The caller compares the hosts: an entry without a creation
 * zxid and time recorded for another zklock.hosts (another ensemble or
 * chroot: its path may name another node) is not applied.
 * ---------------------------------------------------------------------
 */

/* longest line of one entry */
#define DELETES_LINE_MAX	(21 + 1 + 21 + 1 + ZKLOCK_PROTECTED_PREFIX_LEN + 1 + ZKLOCK_NODE_PATH_SIZE + 1)

/*
 * Write the n entries (persistent, by name or by prefix) to the file,
 * durably (a temporary file, fsynced and renamed into place); none: remove
 * the file.  Problems are reported at elevel.  Returns false when the file
 * may not say what was asked.
 */
bool
zklock_persistent_deletes_save(const ZklockDelete *entries, int n, int elevel)
{
	StringInfoData body;
	char		head[64];
	pg_crc32c	crc;
	int			hlen;
	int			fd;
	int			i;
	bool		ok = false;

	if (n == 0)
	{
		struct stat st;

		if (stat(DELETES_FILE, &st) != 0 && errno == ENOENT)
			return true;
		return durable_unlink(DELETES_FILE, elevel) == 0;
	}

	initStringInfo(&body);
	appendStringInfo(&body, "hosts %s\n", zklock_hosts ? zklock_hosts : "");
	for (i = 0; i < n; i++)
		appendStringInfo(&body, "%lld,%lld\t%s\t%s\n", (long long) entries[i].czxid,
						 (long long) entries[i].ctime,
						 entries[i].by_prefix ? entries[i].prefix : "",
						 entries[i].path);
	INIT_CRC32C(crc);
	COMP_CRC32C(crc, body.data, body.len);
	FIN_CRC32C(crc);
	hlen = snprintf(head, sizeof(head), "%s %08x\n", DELETES_MAGIC, (unsigned int) crc);

	fd = open(DELETES_FILE_TMP, O_WRONLY | O_CREAT | O_TRUNC | PG_BINARY, S_IRUSR | S_IWUSR);
	if (fd < 0)
		ereport(elevel,
				(errcode_for_file_access(),
				 errmsg("zklock: could not create \"%s\": %m", DELETES_FILE_TMP)));
	else if ((errno = 0, write(fd, head, hlen) != hlen) ||
			 write(fd, body.data, body.len) != body.len)
	{
		if (errno == 0)
			errno = ENOSPC;
		ereport(elevel,
				(errcode_for_file_access(),
				 errmsg("zklock: could not write \"%s\": %m", DELETES_FILE_TMP)));
		close(fd);
		unlink(DELETES_FILE_TMP);
	}
	else
	{
		close(fd);
		/* fsyncs the file, renames it, fsyncs the directory */
		ok = (durable_rename(DELETES_FILE_TMP, DELETES_FILE, elevel) == 0);
	}
	pfree(body.data);
	return ok;
}

/*
 * Parse one entry line (NUL-terminated, without its newline) into e.
 */
static bool
parse_delete_line(char *line, ZklockDelete *e)
{
	char	   *tab1 = strchr(line, '\t');
	char	   *tab2 = tab1 ? strchr(tab1 + 1, '\t') : NULL;
	char	   *end;
	long long	czxid;
	long long	ctime = 0;
	const char *p;

	if (tab2 == NULL)
		return false;
	*tab1 = *tab2 = '\0';
	errno = 0;
	czxid = strtoll(line, &end, 10);
	if (errno == 0 && end != line && *end == ',')
	{
		char	   *t = end + 1;

		ctime = strtoll(t, &end, 10);
		if (end == t || ctime < 0)
			return false;
	}
	if (errno != 0 || end == line || *end != '\0' || czxid < 0)
		return false;
	if (strlen(tab1 + 1) > ZKLOCK_PROTECTED_PREFIX_LEN ||
		tab2[1] != '/' || strlen(tab2 + 1) >= ZKLOCK_NODE_PATH_SIZE)
		return false;
	for (p = tab1 + 1; *p; p++)
		if ((unsigned char) *p < 0x20 || *p == 0x7f)
			return false;
	memset(e, 0, sizeof(*e));
	e->persistent = true;
	e->czxid = (int64) czxid;
	e->ctime = (int64) ctime;
	e->by_prefix = (tab1[1] != '\0');
	strlcpy(e->prefix, tab1 + 1, sizeof(e->prefix));
	strlcpy(e->path, tab2 + 1, sizeof(e->path));
	return true;
}

/*
 * Read the file into out (at most max entries).  Returns how many entries
 * it holds (0 when there is none, or it is damaged: said in the log), and
 * in *hosts (palloc'd) the zklock.hosts they were recorded for.
 */
int
zklock_persistent_deletes_read(ZklockDelete *out, int max, char **file_hosts)
{
	Size		limit = 64 + 7 + MAXPGPATH + (Size) max * DELETES_LINE_MAX;
	char	   *buf;
	char	   *body;
	char	   *line;
	char	   *next;
	unsigned int want;
	pg_crc32c	crc;
	ssize_t		len = 0;
	ssize_t		r;
	int			fd;
	int			n = 0;
	const char *bad = NULL;

	*file_hosts = NULL;
	fd = open(DELETES_FILE, O_RDONLY | PG_BINARY, 0);
	if (fd < 0)
	{
		if (errno != ENOENT)
			ereport(WARNING,
					(errcode_for_file_access(),
					 errmsg("zklock: could not open \"%s\": %m", DELETES_FILE),
					 errdetail("Deletes of persistent zookeeper nodes (double barriers' ready nodes) recorded before the restart are not applied.")));
		return 0;
	}
	buf = palloc(limit + 2);
	while (len <= (ssize_t) limit &&
		   (r = read(fd, buf + len, limit + 1 - len)) > 0)
		len += r;
	close(fd);
	buf[len] = '\0';

	body = strchr(buf, '\n');
	if (len > (ssize_t) limit)
		bad = "it is too large";
	else if (strlen(buf) != (size_t) len)
		bad = "it holds a NUL byte";
	else if (body == NULL || len == 0 || buf[len - 1] != '\n')
		bad = "it is truncated";
	else if (strncmp(buf, DELETES_MAGIC " ", strlen(DELETES_MAGIC) + 1) != 0 ||
			 sscanf(buf + strlen(DELETES_MAGIC) + 1, "%8x", &want) != 1 ||
			 body != buf + strlen(DELETES_MAGIC) + 1 + 8)
		bad = "its first line is not that of the file";
	else
	{
		body++;
		INIT_CRC32C(crc);
		COMP_CRC32C(crc, body, len - (body - buf));
		FIN_CRC32C(crc);
		if (crc != (pg_crc32c) want)
			bad = "its checksum does not match";
		else if (strncmp(body, "hosts ", 6) != 0)
			bad = "it names no zklock.hosts";
	}

	*file_hosts = NULL;
	if (bad == NULL)
	{
		char	   *nl = strchr(body, '\n');

		*nl = '\0';
		*file_hosts = pstrdup(body + 6);
		for (line = nl + 1; *line != '\0' && bad == NULL; line = next)
		{
			next = strchr(line, '\n');
			*next++ = '\0';
			if (n >= max)
				bad = "it holds more entries than the table";
			else if (!parse_delete_line(line, &out[n]))
				bad = "an entry is malformed";
			else
				n++;
		}
	}
	if (bad != NULL)
	{
		ereport(WARNING,
				(errmsg("zklock: ignoring \"%s\": %s", DELETES_FILE, bad),
				 errdetail("Deletes of persistent zookeeper nodes (double barriers' ready nodes) recorded before the restart are not applied; such a node left behind must be deleted by hand.")));
		n = 0;
		if (*file_hosts != NULL)
			pfree(*file_hosts);
		*file_hosts = NULL;
	}
	pfree(buf);
	return n;
}

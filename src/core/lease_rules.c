/*-------------------------------------------------------------------------
 *
 * core/lease_rules.c
 *		Pure rules of the lease (see core/lease_rules.h).
 *
 * What ZooKeeper does (3.5 to 3.9, global sessions, the default):
 *
 * - Only the leader (or a standalone server) expires sessions.  Its session
 *   tracker moves a session's expiry to now + timeout, rounded up to the
 *   next tick, every time it *touches* the session; the rounding only ever
 *   makes the expiry later.
 * - A client of the leader or of a standalone server touches its session
 *   with every request the server receives.
 * - A client of a follower (or observer) touches it only in the follower's
 *   own table.  The leader pings each follower every tickTime / 2; the
 *   follower answers with that table, and the leader touches what it lists
 *   when it reads the answer.  A follower cut off from the leader keeps
 *   answering reads and pings from its stale copy for up to syncLimit x
 *   tickTime, while the leader expires the session one timeout after the
 *   last table it got: so an answer from a follower proves nothing.
 * - A sync is forwarded by the follower to the leader on the same TCP
 *   stream as its ping answers, and answered by the leader on the same
 *   stream as its pings; the follower reads that stream in one thread, in
 *   order, and answers pings as it reads them.
 * - Opening or resuming a session goes through the leader (createSession
 *   is a transaction; a resumed session is revalidated, and touched, by
 *   the leader) before the client hears CONNECTED.
 * - An observer is a learner like a follower, but since 3.6 it may be fed
 *   by a follower's ObserverMaster (observerMasterPort) instead of the
 *   leader: its touches and syncs then reach that follower first, and the
 *   leader only with the follower's next ping answer, so the chain below
 *   would prove up to about tickTime / 2 more than holds.  Its handshake
 *   does go through the leader (an ObserverMaster passes createSession on
 *   to the leader, and a revalidation too, and answers the observer only
 *   once the leader answered), but zklock takes no proof through an
 *   observer at all (zklock_server_is_observer; worker/connection/lease.c
 *   says why and what the worker does instead).
 *
 * The chain of three syncs (zklock_sync_proof).  Let syncs i, m, j of one
 * connection have been sent at s_i < s_m < s_j and answered at r_i, r_m,
 * r_j, with s_m - r_i >= G (G larger than the leader's ping period,
 * tickTime / 2) and s_j >= r_m.  The follower touched the session when it
 * received sync i, before forwarding it; the leader read sync i at some
 * t_i <= r_i and sync m at some t_m >= s_m, so t_m - t_i >= G and the
 * leader sent the follower a ping P in between.  P reached the follower
 * after the touch of sync i and before the answer to sync m (one stream, in
 * order), so the follower answered P, with a touch at least as recent as
 * sync i's, before it answered sync m, hence before we sent sync j, hence
 * before it forwarded sync j.  The leader answered sync j, so it had read
 * the ping answer before it: it touched the session after t_i >= s_i.  So
 * at r_j the leader's expiry is proven later than s_i + timeout.  A
 * reconnect starts the chain anew (one follower, one leader, one stream).
 *
 * Assumptions, stated in doc/failure-model.md: the leader's ping loop is not paused
 * for longer than G - tickTime / 2 (zklock.server_tick_time = G >= the
 * ensemble's tickTime gives that much slack), the two clocks run at rates
 * that differ by less than zklock.lease_margin over one timeout, and
 * sessions are global (localSessionsEnabled = false).
 *
 *-------------------------------------------------------------------------
 */
#include "core/lease_rules.h"

#include <ctype.h>
#include <string.h>

/*
 * The kind of server a connection is to, from the data of its
 * /zookeeper/config node: a server in a quorum lists its members there
 * ("server.N=..." lines); a standalone server leaves it empty.  Anything
 * that is not clearly standalone counts as an ensemble, the safe side.
 */
ZklockServerMode
zklock_server_mode_from_config(const char *data, int len)
{
	int			i;

	if (data == NULL || len <= 0)
		return ZKLOCK_SERVER_STANDALONE;
	for (i = 0; i < len; i++)
	{
		if ((i == 0 || data[i - 1] == '\n') &&
			len - i >= 7 && memcmp(data + i, "server.", 7) == 0)
			return ZKLOCK_SERVER_ENSEMBLE;
	}
	/* data that names no member: still no proof it is standalone */
	for (i = 0; i < len; i++)
	{
		if (data[i] != ' ' && data[i] != '\n' && data[i] != '\r' && data[i] != '\t')
			return ZKLOCK_SERVER_ENSEMBLE;
	}
	return ZKLOCK_SERVER_STANDALONE;
}

/*
 * Do the host texts a (alen bytes) and b (NUL-terminated) name the same
 * host?  Compared without case and without the brackets of an IPv6
 * address.  An empty text names nothing.
 */
static bool
host_equal(const char *a, int alen, const char *b)
{
	int			blen = (int) strlen(b);
	int			i;

	if (alen >= 2 && a[0] == '[' && a[alen - 1] == ']')
	{
		a++;
		alen -= 2;
	}
	if (blen >= 2 && b[0] == '[' && b[blen - 1] == ']')
	{
		b++;
		blen -= 2;
	}
	if (alen == 0 || alen != blen)
		return false;
	for (i = 0; i < alen; i++)
	{
		if (tolower((unsigned char) a[i]) != tolower((unsigned char) b[i]))
			return false;
	}
	return true;
}

/*
 * Is the host text h (len bytes) a wildcard address (any interface), or
 * empty?
 */
static bool
host_is_wildcard(const char *h, int len)
{
	return len == 0 || host_equal(h, len, "0.0.0.0") ||
		host_equal(h, len, "::") || host_equal(h, len, "0:0:0:0:0:0:0:0");
}

/*
 * Does one of the quorum addresses of a server line ("host:port:port",
 * several separated by '|', the last perhaps followed by ":role"; q is
 * qlen bytes) name host?
 */
static bool
quorum_host_is(const char *q, int qlen, const char *host)
{
	int			start = 0;

	while (start < qlen)
	{
		int			end = start;
		int			hend;

		while (end < qlen && q[end] != '|')
			end++;
		if (q[start] == '[')
		{
			for (hend = start; hend < end && q[hend] != ']'; hend++)
				;
			if (hend < end)
				hend++;
		}
		else
			for (hend = start; hend < end && q[hend] != ':'; hend++)
				;
		if (host_equal(q + start, hend - start, host))
			return true;
		start = end + 1;
	}
	return false;
}

/*
 * Read one "server.N=..." line's value v (vlen bytes): *observer says
 * whether the member is an observer; the result whether the member is
 * the server at host:port.  The value is
 * "quorumaddrs[:role][;[clientaddr:]clientport]".  The member matches when
 * the client port is that port (or the line gives none: the servers'
 * clientPort came from their static configuration) and the client address
 * is that host, or, when the line gives none or a wildcard (0.0.0.0: the
 * same port may then be every member's), one of its quorum addresses is.
 */
static bool
server_line_is(const char *v, int vlen, const char *host, int port,
			   bool *observer)
{
	int			qlen = 0;
	int			role = 0;

	while (qlen < vlen && v[qlen] != ';')
		qlen++;
	/* the role is the quorum part's last ':' field */
	for (role = qlen; role > 0 && v[role - 1] != ':'; role--)
		;
	*observer = host_equal(v + role, qlen - role, "observer");

	if (qlen < vlen)
	{
		const char *c = v + qlen + 1;
		int			clen = 0;
		int			colon = -1;
		int			cport = 0;
		int			i;

		while (qlen + 1 + clen < vlen && c[clen] != ';')
			clen++;
		for (i = 0; i < clen; i++)
		{
			if (c[i] == ':')
				colon = i;
		}
		if (clen - colon - 1 <= 0 || clen - colon - 1 > 5)
			return false;
		for (i = colon + 1; i < clen; i++)
		{
			if (!isdigit((unsigned char) c[i]))
				return false;
			cport = cport * 10 + (c[i] - '0');
		}
		if (cport != port)
			return false;
		if (colon > 0 && !host_is_wildcard(c, colon))
			return host_equal(c, colon, host);
	}
	return quorum_host_is(v, role > 0 ? role - 1 : qlen, host);
}

/*
 * Is the server at host:port (as the client connected to it) an observer
 * of the ensemble whose /zookeeper/config is config (len bytes), or
 * perhaps one?  When the configuration names no observer, no.  Else yes
 * when an observer's line matches it (server_line_is), and also when no
 * participant's does: a server that cannot be placed may be an observer.
 */
bool
zklock_server_is_observer(const char *config, int len, const char *host,
						  int port)
{
	bool		any_observer = false;
	bool		observer_match = false;
	bool		participant_match = false;
	int			i = 0;

	if (config == NULL || len <= 0)
		return false;
	while (i < len)
	{
		int			end = i;

		while (end < len && config[end] != '\n')
			end++;
		if (end - i > 7 && memcmp(config + i, "server.", 7) == 0)
		{
			int			eq = i;
			int			vend = end;

			while (eq < end && config[eq] != '=')
				eq++;
			while (vend > eq + 1 && isspace((unsigned char) config[vend - 1]))
				vend--;
			if (eq < end)
			{
				bool		observer;
				bool		match = server_line_is(config + eq + 1, vend - eq - 1,
												   host, port, &observer);

				if (observer)
					any_observer = true;
				if (match && observer)
					observer_match = true;
				else if (match)
					participant_match = true;
			}
		}
		i = end + 1;
	}
	if (!any_observer)
		return false;
	return observer_match || !participant_match;
}

/*
 * Split "host:port" (the last ':' ends the host, so "::1:2181" is host
 * ::1; brackets around the host are dropped) into host (hostlen bytes
 * with its NUL) and *port.  False when addr is not of that form.
 */
bool
zklock_split_host_port(const char *addr, char *host, int hostlen, int *port)
{
	const char *colon = strrchr(addr, ':');
	const char *p;
	int			n;

	if (colon == NULL || colon[1] == '\0' || strlen(colon + 1) > 5)
		return false;
	*port = 0;
	for (p = colon + 1; *p; p++)
	{
		if (!isdigit((unsigned char) *p))
			return false;
		*port = *port * 10 + (*p - '0');
	}
	n = (int) (colon - addr);
	if (n >= 2 && addr[0] == '[' && addr[n - 1] == ']')
	{
		addr++;
		n -= 2;
	}
	if (n <= 0 || n >= hostlen)
		return false;
	memcpy(host, addr, n);
	host[n] = '\0';
	return true;
}

/*
 * Is every server of the connect string hosts ("host:port,host:port",
 * perhaps with a chroot "/path" after the last) an observer, or perhaps
 * one, by zklock_server_is_observer?  False when one entry cannot be read
 * (it may be a participant) or there is none.
 */
bool
zklock_hosts_all_observers(const char *config, int len, const char *hosts)
{
	const char *p = hosts;
	int			entries = 0;

	if (hosts == NULL)
		return false;
	while (*p != '\0' && *p != '/')
	{
		char		entry[256];
		char		host[256];
		int			n = 0;
		int			port;

		while (*p == ' ' || *p == ',')
			p++;
		if (*p == '\0' || *p == '/')
			break;
		while (p[n] != '\0' && p[n] != ',' && p[n] != '/' && p[n] != ' ')
			n++;
		if (n >= (int) sizeof(entry))
			return false;
		memcpy(entry, p, n);
		entry[n] = '\0';
		p += n;
		if (!zklock_split_host_port(entry, host, sizeof(host), &port) ||
			!zklock_server_is_observer(config, len, host, port))
			return false;
		entries++;
	}
	return entries > 0;
}

/*
 * The chain of three syncs (see the banner).  answers holds the answered
 * syncs of the current connection in send order (answered times are in
 * order too: a session's requests are answered in order); sent_now is the
 * send time of the sync just answered, which is not in answers; ping_gap
 * is G.  Returns the latest send time s_i that the leader is proven to have
 * touched the session after, or -1 when nothing is proven yet.
 */
int64_t
zklock_sync_proof(const ZklockSyncAnswer *answers, int n, int64_t sent_now,
				  int64_t ping_gap)
{
	int			m;
	int			i;

	/* m: the latest sync answered before the one just answered was sent */
	for (m = n - 1; m >= 0; m--)
	{
		if (answers[m].answered <= sent_now)
			break;
	}
	if (m < 0)
		return -1;

	/* i: the latest sync answered at least G before m was sent */
	for (i = m - 1; i >= 0; i--)
	{
		if (answers[i].answered <= answers[m].sent - ping_gap)
			return answers[i].sent;
	}
	return -1;
}

/*
 * How long a lock may be trusted after the proven instant: the negotiated
 * session timeout minus zklock.lease_margin, the margin being at most half
 * the timeout.
 */
int
zklock_lease_length_ms(int timeout_ms, int margin_ms)
{
	if (margin_ms > timeout_ms / 2)
		margin_ms = timeout_ms / 2;
	return timeout_ms - margin_ms;
}

/*
 * Time between two heartbeats.  Against a standalone server each answer
 * proves the session alive from its send time: a quarter of the timeout.
 * Otherwise the chain of syncs needs them spread over G: a quarter of G
 * (when shorter), so that the proof trails the present by about 1.5 G.
 * Never below 20 ms.
 */
int
zklock_heartbeat_interval_ms(int timeout_ms, int tick_ms, ZklockServerMode mode)
{
	int			interval = timeout_ms / 4;

	if (mode != ZKLOCK_SERVER_STANDALONE && tick_ms / 4 < interval)
		interval = tick_ms / 4;
	return interval < 20 ? 20 : interval;
}

/*
 * The shortest session timeout that leaves a COMMIT at least commit_min_ms
 * of lease at all times through an ensemble: the margin, the floor, and
 * the chain's lag (1.5 G after a renewal, plus a heartbeat before the
 * next, plus room for round trips: 2 G in all).
 */
int
zklock_min_session_timeout_ms(int margin_ms, int commit_min_ms, int tick_ms)
{
	return margin_ms + commit_min_ms + 2 * tick_ms;
}

/*
 * Does a lease ending at until still cover floor from now on?  No lease
 * (until 0) covers nothing.
 */
bool
zklock_lease_covers(int64_t now, int64_t until, int64_t floor)
{
	if (until == 0)
		return false;
	return now + floor < until;
}

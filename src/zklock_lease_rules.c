/*-------------------------------------------------------------------------
 *
 * zklock_lease_rules.c
 *		Pure rules of the lease (see zklock_lease_rules.h).
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
 * Assumptions, stated in the README: the leader's ping loop is not paused
 * for longer than G - tickTime / 2 (zklock.server_tick_time = G >= the
 * ensemble's tickTime gives that much slack), the two clocks run at rates
 * that differ by less than zklock.lease_margin over one timeout, and
 * sessions are global (localSessionsEnabled = false).
 *
 *-------------------------------------------------------------------------
 */
#include "zklock_lease_rules.h"

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

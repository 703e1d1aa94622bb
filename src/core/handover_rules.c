/*-------------------------------------------------------------------------
 *
 * core/handover_rules.c
 *	  The handover layer's decisions as pure functions (no PostgreSQL or
 *	  ZooKeeper calls; unit-tested in test/unit/test_handover_rules.c),
 *	  with the sequence numbering, batching and lock cache decisions that
 *	  core/handover_rules.h lists.  Why each is safe is argued in
 *	  worker/locks/handover.c's banner (local handover), src/README ("Local
 *	  handover": the local waits), doc/failure-model.md ("Read joins") and
 *	  zklock_placement's comment below (creates placed without a listing).
 *
 *-------------------------------------------------------------------------
 */
#include <string.h>

#include "core/handover_rules.h"

/*
 * A lock node was just created right behind a node of this worker on the
 * same lock (sequence numbers one apart, so nothing sorts between them):
 * what it does instead of listing.
 *
 * owner_found: that node's request (waiting or holding) is known;
 * owner_active: it is still waiting (its listing has not decided);
 * rw: a read/write lock node, here a read node behind a read node (the
 * caller looks for a reader owner only then); follows_released_reader: no
 * owner, but the node ahead is a read lock of this worker released after
 * our create left; try_only: a mutex try, which must not wait.
 *
 * - no owner: list, unless a read node follows a released reader, which
 *   is granted as that reader was;
 * - read behind a reader that holds (or is granted already): granted too;
 * - read behind a reader still deciding: share its decision;
 * - mutex behind a node of this worker: not first, so a try gives up and
 *   a wait waits behind it without a watch.
 */
ZklockPlacement
zklock_placement(bool owner_found, bool owner_active, bool rw,
				 bool follows_released_reader, bool try_only)
{
	if (!owner_found)
		return (rw && follows_released_reader) ? ZKLOCK_PLACE_JOIN_READER :
			ZKLOCK_PLACE_LIST;
	if (rw)
		return owner_active ? ZKLOCK_PLACE_FOLLOW_READER : ZKLOCK_PLACE_JOIN_READER;
	return try_only ? ZKLOCK_PLACE_GIVE_UP_TRY : ZKLOCK_PLACE_WAIT_BEHIND;
}

/*
 * A released node: which of the n waiters of this worker whose latest
 * listing made them wait on it take the lock (take[i] set), and how many.
 *
 * A waiter may take it when it provably holds the lock once the node is
 * gone: a mutex (or P/locks) waiter when the node held a plain mutex
 * (held_mutex: no node sorted below it); a read/write waiter when its
 * listing showed the node as the only one keeping it out (pred_last).
 * Several readers may take it together; a writer only alone, and never
 * when the releasing writer has a downgrade twin in this worker (twin: a
 * read node with the writer's sequence number, which still sorts ahead).
 * More than max eligible waiters is more than the protocol allows: none.
 * Returns 0, with no take set, when nothing is handed over.
 */
int
zklock_handover_choice(const ZklockHandoverCandidate *c, int n,
					   bool held_mutex, bool twin, int max, bool *take)
{
	int			ntake = 0;
	bool		exclusive = false;
	int			i;

	for (i = 0; i < n; i++)
	{
		take[i] = c[i].rw ? c[i].pred_last : held_mutex;
		if (!take[i])
			continue;
		if (!c[i].read)
			exclusive = true;
		ntake++;
	}
	if (ntake == 0 || ntake > max || (exclusive && (ntake > 1 || twin)))
	{
		for (i = 0; i < n; i++)
			take[i] = false;
		return 0;
	}
	return ntake;
}

/*
 * May the create of a lock node go without the listing that normally
 * follows it on the session (Curator always lists)?  Only when a node of
 * this worker is the lock's tail (tail_is_ours: the caller found one with
 * zklock_tail_candidate), so the new node most likely sits right behind it
 * and it decides for the new one (zklock_placement); otherwise the
 * listing would be needed anyway.  A mutex node (rw false) may go alone
 * behind a mutex node; a read node behind a read node; a write node
 * never, because no node of this worker can decide for a writer.
 */
bool
zklock_create_alone(bool rw, bool read, bool tail_is_ours)
{
	if (rw && !read)
		return false;
	return tail_is_ours;
}

/*
 * Does node n of this worker count as the node a new node (a reader's
 * when reader, else a mutex's) would sit right behind, so that it may
 * decide for it?  any_node: the caller asks before the create (is any
 * such node the tail?), not about the node right before a given one.
 *
 * It must be of this session and the worker must run it (a parked
 * request's session may be gone; one an earlier worker left is not
 * known), waiting or holding; a reader also while released but not yet
 * withdrawn (its delete has not left, so it still sorts ahead).  A mutex
 * node counts for a mutex, a plain read node (not a downgrade's, which
 * carries its writer's number) for a reader, and a reader that waits on a
 * writer has decided and guides nobody.  Its node must be known, except
 * that before a reader's create a reader whose own create is on its way
 * counts (it is answered first).
 */
bool
zklock_tail_candidate(const ZklockTailNode *n, bool reader, bool any_node)
{
	if (!n->current_session || n->parked)
		return false;
	if (!(n->state == ZKLOCK_TAIL_WAITING || n->state == ZKLOCK_TAIL_HOLDING ||
		  (reader && n->state == ZKLOCK_TAIL_RELEASED && n->known)))
		return false;
	if (reader && n->state == ZKLOCK_TAIL_WAITING &&
		(!n->known || n->decided_to_wait))
		return false;
	if (n->rw != reader || (reader && (!n->read || n->downgrade)))
		return false;
	if (!n->has_node &&
		!(reader && any_node && n->state == ZKLOCK_TAIL_WAITING && n->create_sent))
		return false;
	return true;
}

/*
 * May a request's wait state move from from to to?  From no wait it may
 * start any wait.  A wait on a node (watching, local, following) ends (no
 * wait), is chosen for a handover (a watcher or a local waiter whose
 * predecessor is released) or is parked; a watch may be set again.  A
 * handover ends or parks.  Parked, a request resumes (no wait) or learns
 * it must look for its node first; once it must, it keeps that until it
 * resumes.  Any state may end: a grant or a failure ends whatever the
 * request waited for.
 */
bool
zklock_wait_move_ok(ZklockWaitState from, ZklockWaitState to)
{
	if (to == ZKWS_NONE || from == ZKWS_NONE)
		return true;
	switch (from)
	{
		case ZKWS_WATCHING:
			return to == ZKWS_WATCHING || to == ZKWS_HANDOVER ||
				to == ZKWS_PARKED || to == ZKWS_PARKED_RECOVER;
		case ZKWS_LOCAL:
		case ZKWS_FOLLOWING:
			return to == ZKWS_HANDOVER || to == ZKWS_PARKED ||
				to == ZKWS_PARKED_RECOVER;
		case ZKWS_HANDOVER:
			return to == ZKWS_PARKED || to == ZKWS_PARKED_RECOVER;
		case ZKWS_PARKED:
			return to == ZKWS_PARKED || to == ZKWS_PARKED_RECOVER;
		case ZKWS_PARKED_RECOVER:
			return to == ZKWS_PARKED_RECOVER;
		default:
			return false;
	}
}

/*
 * Does a request in this state move on when a watch of its fires?  A
 * watcher does; so does a local waiter or follower (a watch it set before
 * it waited locally may still fire, and looking again is always safe).
 */
bool
zklock_wait_for_event(ZklockWaitState s)
{
	return s == ZKWS_WATCHING || s == ZKWS_LOCAL || s == ZKWS_FOLLOWING;
}

/* ---------------------------------------------------------------------
 * Skipping a listing by sequence numbers (worker/locks/handover_numbering.c).
 *
 * A create of ours may decide without a listing only when the worker can
 * prove what the listing would show.  What can be under the parent when
 * our create is applied: the nodes of the last listing that still exist,
 * and the nodes created since.  The listing showed only nodes of this
 * worker (only_ours); the parent's numbering shows whether anybody else
 * created a child since (every create, sequential or not, takes a
 * number, and our create's number is next only if no create came between
 * the ones we counted); the watch on the parent shows that the parent
 * whose numbers we count is still the one listed (a container reaped and
 * made again numbers from 0, so its numbers could meet ours by chance).
 * Then every node ahead of ours is a node of this worker, and the worker
 * knows which of them still exist.  A foreign delete is never seen this
 * way and need not be: it only takes nodes away.  Everything is tied to
 * one connection: after a reconnect (or in a new session, or a new
 * worker process, which starts with nothing) the worker lists again.
 * ---------------------------------------------------------------------
 */

/*
 * The sequence number a server appended to a node's name (its last ten
 * characters), or -1 when the name does not end in ten digits.
 */
long long
zklock_node_seq(const char *name)
{
	size_t		len = strlen(name);
	long long	seq = 0;
	size_t		i;

	if (len < 10)
		return -1;
	for (i = len - 10; i < len; i++)
	{
		if (name[i] < '0' || name[i] > '9')
			return -1;
		seq = seq * 10 + (name[i] - '0');
	}
	return seq;
}

/*
 * The number the parent's next sequential create gets, from the parent's
 * Stat as a listing returns it: the Stat's cversion is twice the creates
 * less the children, so the creates are (cversion + children) / 2.  -1
 * when the Stat does not fit that (an odd sum, or a counter gone negative
 * after 2^31 creates): then nothing is ever skipped on it.
 */
long long
zklock_next_seq_from_stat(int cversion, int num_children)
{
	long long	sum = (long long) cversion + num_children;

	if (cversion < 0 || num_children < 0 || sum % 2 != 0)
		return -1;
	return sum / 2;
}

/*
 * Learn from a listing of the parent on connection conn.  The watch on the
 * parent is kept only when it was answered for this same parent (same
 * czxid) on this connection.
 */
void
zklock_seq_listed(ZklockPathSeq *k, unsigned long long conn, long long czxid,
				  int cversion, int num_children, bool only_ours)
{
	long long	next = zklock_next_seq_from_stat(cversion, num_children);

	if (k->watched && (k->conn != conn || k->czxid != czxid))
		k->watched = false;
	k->conn = conn;
	k->czxid = czxid;
	k->next = next;
	k->listed = (only_ours && next >= 0);
}

/*
 * The exists (with a watch) of the parent was answered on connection
 * conn.  The watch counts only for the parent the listing saw: same
 * connection, the parent there, same czxid.  Returns whether the
 * knowledge is usable now.
 */
bool
zklock_seq_watch_answered(ZklockPathSeq *k, unsigned long long conn, bool exists,
						  long long czxid)
{
	if (!exists || conn != k->conn || czxid != k->czxid)
	{
		zklock_seq_forget(k);
		return false;
	}
	k->watched = true;
	return zklock_seq_usable(k, conn);
}

/*
 * The parent changed (its watch fired), or a create of ours under it was
 * not what the numbering expects: list again before skipping anything.
 */
void
zklock_seq_forget(ZklockPathSeq *k)
{
	k->listed = false;
	k->watched = false;
}

/*
 * May a create on connection conn_now go without its listing?
 */
bool
zklock_seq_usable(const ZklockPathSeq *k, unsigned long long conn_now)
{
	return k->listed && k->watched && k->conn == conn_now && k->next >= 0;
}

/*
 * A create of ours under the parent was answered with number seq on
 * connection conn_now (answers come in the order the creates were sent).
 * Returns true when it proves that nobody else created a child since the
 * knowledge was learned (seq is exactly the next number), and counts it;
 * anything else forgets the knowledge.
 */
bool
zklock_seq_created(ZklockPathSeq *k, unsigned long long conn_now, long long seq)
{
	if (!zklock_seq_usable(k, conn_now) || seq < 0 || seq != k->next)
	{
		zklock_seq_forget(k);
		return false;
	}
	k->next = seq + 1;
	return true;
}

/*
 * Is a node whose number was proven (zklock_seq_created) first in line,
 * without a listing?  Only when no node of this worker sorts ahead of it
 * (nodes of other clients cannot: the proof excludes them) and no delete
 * of a node of this worker under the parent is still unanswered (its node
 * may still be there).
 */
bool
zklock_first_unlisted(bool seq_proven, bool own_node_ahead, bool own_delete_pending)
{
	return seq_proven && !own_node_ahead && !own_delete_pending;
}

/*
 * How many of the n queued ops, from the front, go to ZooKeeper as one
 * multi (a multi applies its ops in order, as one transaction with one
 * zxid): at most max, and never two creates under one parent.  Every node
 * a multi creates gets the multi's zxid as its creation zxid, the lock's
 * fencing token, and two nodes of one lock must not share a token: the
 * second create under a parent starts the next multi.  Always at least one
 * op when n > 0.
 */
int
zklock_batch_take(const char *const *create_base, int n, int max)
{
	int			take;

	for (take = 0; take < n && take < max; take++)
	{
		int			j;

		if (create_base[take] == NULL)
			continue;
		for (j = 0; j < take; j++)
		{
			if (create_base[j] != NULL && strcmp(create_base[j], create_base[take]) == 0)
				return take;
		}
	}
	return take;
}

/*
 * Lock caching: may a request be granted the kept node of its path with no
 * ZooKeeper request?  Only a fresh, plain mutex acquire of the backend
 * whose identity the node carries, while nobody else is known to be
 * queued, in the node's session, with the lease proving that session
 * alive (no round trip proves it for this grant).
 */
bool
zklock_cache_may_take(const ZklockCacheTakeFacts *f)
{
	return f->enabled && f->mutex && f->fresh && !f->revocable &&
		!f->downgrade && !f->contended && f->same_session &&
		f->lease_valid && f->same_identity;
}

/*
 * Lock caching: what a release does with its node.  Handed over to a
 * waiter of this worker, or contended (someone else came while it was
 * held from the cache), it goes; after contention with nobody of ours to
 * take over, someone else waits, so the path cools down too.  Otherwise
 * it is kept only for a plain mutex holder that never asked for its token,
 * alone on the path, connected in the node's session, and not while the
 * path cools down.
 */
ZklockCacheKeep
zklock_cache_keep_decide(const ZklockCacheKeepFacts *f)
{
	if (f->handed_over > 0)
		return ZKLOCK_CACHE_DELETE;
	if (f->contended)
		return ZKLOCK_CACHE_DELETE_COOL;
	if (!f->enabled || !f->mutex || f->revocable || f->token_asked ||
		f->downgrade || !f->has_node || !f->connected || !f->same_session ||
		f->parked || !f->alone || f->cooling)
		return ZKLOCK_CACHE_DELETE;
	return ZKLOCK_CACHE_KEEP;
}

/*-------------------------------------------------------------------------
 *
 * zklock_local_rules.c
 *	  The local layer's decisions as pure functions (no PostgreSQL or
 *	  ZooKeeper calls; unit-tested in test/unit/test_local_rules.c).  Why
 *	  each is safe is argued in zklock_local.c and the README's failure
 *	  model (local handover, read joins, creates placed without a listing).
 *
 *-------------------------------------------------------------------------
 */
#include "zklock_local_rules.h"

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

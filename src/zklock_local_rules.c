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

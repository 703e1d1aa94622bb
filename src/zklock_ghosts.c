/*-------------------------------------------------------------------------
 *
 * zklock_ghosts.c
 *	  Ghost nodes: a node that carries the protection prefix of a live
 *	  request of this worker but is not that request's node.  A create sent
 *	  on an older connection (or by an earlier worker) whose reply never
 *	  came can be applied after the request found or made its node by that
 *	  prefix; nobody knows the second node, and sorting first it would
 *	  block the lock for the life of the session.  Every listing of a lock
 *	  (the lock engine, a lease's P/leases) deletes the ghosts it shows.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "zklock.h"
#include "zklock_worker_int.h"

static bool delete_pending(const char *path);

/*
 * Is the delete of the node at path already in the pending-delete table?
 * (Two listings in flight may both show the same ghost.)  Caller holds the
 * lock.
 */
static bool
delete_pending(const char *path)
{
	ZklockShared *sh = zklock_shared;
	int			seen = 0;
	int			i;

	for (i = 0; i < sh->ndeletes && seen < sh->deletes_used; i++)
	{
		ZklockDelete *e = &zklock_deletes[i];

		if (e->serial == 0)
			continue;
		seen++;
		if (!e->by_prefix && strcmp(e->path, path) == 0)
			return true;
	}
	return false;
}

/*
 * A listing of base (its n children) came in: queue the delete of every
 * ghost among them (zklock_find_ghosts decides).  The live ids are those
 * of every slot that is not FREE: its node's id and, for a lease, its
 * P/locks node's id, each with the node's name when known.  An id without
 * a known node keeps whatever carries it: a create with it may be in
 * flight or in doubt (create_sent, or a request taken over from an
 * earlier worker, whose process-local create_sent started afresh), and
 * that node is the one the request adopts.  A known node settles it: a
 * request sends no create while it knows its node (a new attempt takes a
 * new id), so anything else with its id is a late create.  The deletes
 * are sent at once, ahead of whatever the caller sends next (a watch on
 * the ghost then finds it gone and the request lists again).  Caller
 * holds the lock.
 */
void
zklock_delete_ghosts(const char *base, char *const *children, int n)
{
	ZklockShared *sh = zklock_shared;
	ZklockLiveId *live;
	int		   *ghosts;
	int			nlive = 0;
	int			nghosts;
	int			i;

	if (n <= 0)
		return;
	live = palloc(sizeof(ZklockLiveId) * 2 * sh->nslots);
	for (i = 0; i < sh->nslots; i++)
	{
		ZklockSlot *slot = &sh->slots[i];

		if (slot->state == ZKS_FREE)
			continue;
		if (slot->uuid[0] != '\0')
		{
			live[nlive].uuid = slot->uuid;
			live[nlive].node = slot->node;
			nlive++;
		}
		if (slot->aux_uuid[0] != '\0')
		{
			live[nlive].uuid = slot->aux_uuid;
			live[nlive].node = slot->aux_node;
			nlive++;
		}
	}
	if (nlive == 0)
	{
		pfree(live);
		return;
	}
	ghosts = palloc(sizeof(int) * n);
	nghosts = zklock_find_ghosts(children, n, live, nlive, ghosts);
	for (i = 0; i < nghosts; i++)
	{
		char		path[ZKLOCK_NODE_PATH_SIZE];

		snprintf(path, sizeof(path), "%s/%s", base, children[ghosts[i]]);
		if (delete_pending(path))
			continue;
		ereport(LOG,
				(errmsg("zklock: deleting zookeeper node \"%s\": it carries the protection prefix of a request of this worker but is not that request's node",
						path),
				 errdetail("A create whose reply never came was applied after the request had found or made its node.")));
		zklock_queue_delete(path, NULL);
	}
	pfree(ghosts);
	pfree(live);
}

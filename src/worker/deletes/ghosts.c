/*-------------------------------------------------------------------------
 *
 * worker/deletes/ghosts.c
 *	  Ghost nodes: a node that carries the protection prefix of a live
 *	  request of this worker but is not that request's node.  A create sent
 *	  on an older connection (or by an earlier worker) whose reply never
 *	  came can be applied after the request found or made its node by that
 *	  prefix; nobody knows the second node, and sorting first it would
 *	  block the lock for the life of the session.  Every listing of a lock
 *	  (the lock engine, a lease's P/leases) deletes the ghosts it shows,
 *	  and a request that looked for its node by prefix deletes by prefix
 *	  when it ends (a late create after its last listing).
 *
 *	  zklock_ghosts_delete				delete the ghosts a listing shows
 *	  zklock_ghosts_note_doubt			a request looked for its node by prefix
 *	  zklock_ghosts_sweep_doubted		such a request ends: delete by its
 *										prefix
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "zklock.h"
#include "common/shmem.h"
#include "worker/deletes/deletes.h"


/*
 * A listing of base (its n children) came in: queue the delete of every
 * ghost among them (zklock_find_ghosts decides).  The live ids are those
 * of the slots that are not FREE and whose nodes live under base: a
 * slot's node's id (under P, or P/leases for a lease) and a lease's
 * P/locks node's id, each with the node's name when known; so the cost is
 * a pass over the slots and a lookup per child among the requests of this
 * lock.  An id without
 * a known node keeps whatever carries it: a create with it may be in
 * flight or in doubt (create_sent, or a request taken over from an
 * earlier worker, whose process-local create_sent started afresh), and
 * that node is the one the request adopts.  A known node settles it: a
 * request sends no create while it knows its node (a new attempt takes a
 * new id), so anything else with its id is a late create.  The deletes
 * are sent at once (the queue of deletes batched for the end of the pass
 * is flushed), ahead of whatever the caller sends next (a watch on the
 * ghost then finds it gone and the request lists again).  Caller
 * holds the lock.
 */
void
zklock_ghosts_delete(const char *base, char *const *children, int n)
{
	ZklockShared *sh = zklock_shared;
	ZklockLiveId *live;
	int		   *ghosts;
	int			nlive = 0;
	int			nghosts;
	int			queued = 0;
	int			i;

	if (n <= 0)
		return;
	live = palloc(sizeof(ZklockLiveId) * 2 * sh->nslots);
	for (i = 0; i < sh->nslots; i++)
	{
		ZklockSlot *slot = &sh->slots[i];
		size_t		plen = strlen(slot->path);
		const char *rest = base + plen;
		bool		in_leases;

		/* only the requests whose nodes live under base */
		if (slot->state == ZKS_FREE || strncmp(base, slot->path, plen) != 0)
			continue;
		in_leases = (zklock_worker_ops(slot->op)->flags & ZKW_NODE_IN_LEASES) != 0;
		if (slot->nodes[ZKN_MAIN].uuid[0] != '\0' &&
			strcmp(rest, in_leases ? "/leases" : "") == 0)
		{
			live[nlive].uuid = slot->nodes[ZKN_MAIN].uuid;
			live[nlive].node = slot->nodes[ZKN_MAIN].name;
			nlive++;
		}
		if (slot->nodes[ZKN_LEASE_LOCK].uuid[0] != '\0' && strcmp(rest, "/locks") == 0)
		{
			live[nlive].uuid = slot->nodes[ZKN_LEASE_LOCK].uuid;
			live[nlive].node = slot->nodes[ZKN_LEASE_LOCK].name;
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
		if (zklock_dtable_pending(path))
			continue;
		ereport(LOG,
				(errmsg("zklock: deleting zookeeper node \"%s\": it carries the protection prefix of a request of this worker but is not that request's node",
						path),
				 errdetail("A create whose reply never came was applied after the request had found or made its node.")));
		zklock_deletes_queue(path, NULL);
		queued++;
	}
	/* they leave before anything the listing's decision sends */
	if (queued > 0)
		zklock_batch_flush();
	pfree(ghosts);
	pfree(live);
}

/*
 * The request idx looked for its node (aux: a lease's P/locks node) by
 * its protection prefix: a create of it was in doubt, and such a create
 * may still be applied after every listing the request makes, beside the
 * node it adopts or makes.  Caller holds the lock.
 */
void
zklock_ghosts_note_doubt(int idx, bool aux)
{
	if (aux)
		zklock_reqs[idx].nodes[ZKN_LEASE_LOCK].doubt = true;
	else
		zklock_reqs[idx].nodes[ZKN_MAIN].doubt = true;
}

/*
 * The request idx lets go of its nodes (its deletes are being recorded;
 * aux_only: a lease lets go of its P/locks node once the lease is
 * granted).  A node whose create was ever in doubt (zklock_ghosts_note_doubt)
 * and whose name is known is deleted by name by the caller; a late create
 * with its prefix, applied after the request's last listing, would be
 * known to nobody once the request is gone (its id no longer live, no
 * listing calls it a ghost), and would block the lock for the life of
 * the session: every child with the prefix is deleted too, by a delete by
 * prefix (which lists until none is left).  Only requests that recovered
 * by prefix pay for the listing.  A node whose name is unknown is deleted
 * by prefix already (zklock_cleanup_plan).  Caller holds the lock.
 */
void
zklock_ghosts_sweep_doubted(int idx, bool aux_only)
{
	ZklockSlot *slot = &zklock_shared->slots[idx];
	WorkerReq  *req = &zklock_reqs[idx];
	char		parent[ZKLOCK_NODE_PATH_SIZE];
	char		prefix[ZKLOCK_PROTECTED_PREFIX_LEN + 1];

	if (req->serial != slot->serial)
		return;
	if (!aux_only && req->nodes[ZKN_MAIN].doubt &&
		slot->nodes[ZKN_MAIN].uuid[0] != '\0' &&
		slot->nodes[ZKN_MAIN].name[0] != '\0')
	{
		if (zklock_worker_ops(slot->op)->flags & ZKW_NODE_IN_LEASES)
			zklock_recipe_path(parent, sizeof(parent), slot->path, ZKLOCK_LEASES_DIR, NULL);
		else
			strlcpy(parent, slot->path, sizeof(parent));
		zklock_protected_prefix(slot->nodes[ZKN_MAIN].uuid, prefix);
		zklock_deletes_queue(parent, prefix);
	}
	if (req->nodes[ZKN_LEASE_LOCK].doubt &&
		slot->nodes[ZKN_LEASE_LOCK].uuid[0] != '\0' &&
		slot->nodes[ZKN_LEASE_LOCK].name[0] != '\0')
	{
		zklock_recipe_path(parent, sizeof(parent), slot->path, ZKLOCK_LOCKS_DIR, NULL);
		zklock_protected_prefix(slot->nodes[ZKN_LEASE_LOCK].uuid, prefix);
		zklock_deletes_queue(parent, prefix);
	}
	if (!aux_only)
		req->nodes[ZKN_MAIN].doubt = false;
	req->nodes[ZKN_LEASE_LOCK].doubt = false;
}

/*-------------------------------------------------------------------------
 *
 * worker/revocation_watch.c
 *	  The holder's side of revocation (Curator's Revocable): the worker
 *	  watches a revocable holder's own node with getData, and its data
 *	  becoming "__REVOKE__" tells the backend it is asked to let go.  The
 *	  lock engine arms it when it grants a revocable lock, the dispatch
 *	  re-arms it after a failed read or for a lock an earlier worker held.
 *	  The asking side (zk_revoke) is the revoke recipe,
 *	  recipes/revoke.c.  See doc/wire.md.
 *
 *	  zklock_revoke_watch				arm the revocation watch on a holder's
 *										node
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "zklock.h"
#include "common/shmem.h"
#include "worker/worker.h"

static void revoke_data_done(int rc, const char *value, int value_len,
							 const struct Stat *stat, const void *data);
static void revoke_watcher(zhandle_t *zzh, int type, int state,
						   const char *path, void *ctx);

/*
 * Completion of getData on our own revocable node.
 */
static void
revoke_data_done(int rc, const char *value, int value_len,
				 const struct Stat *stat, const void *data)
{
	int			idx;

	LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
	idx = zklock_zkio_tag_current(data);
	if (idx >= 0 && rc != ZOK)
	{
		/*
		 * No watch was registered.  The node gone means the lock is gone;
		 * otherwise arm again on the next full pass once connected.
		 */
		zklock_reqs[idx].revoke_armed = false;
		if (rc != ZNONODE && zklock_rc_retryable(rc))
			zklock_request_rescan();
		else if (rc != ZNONODE)
			ereport(LOG,
					(errmsg("zklock: cannot watch lock node of \"%s\" for revocation: %s",
							zklock_shared->slots[idx].path, zerror(rc))));
	}
	if (idx >= 0 && rc == ZOK && value != NULL &&
		value_len == (int) strlen(ZKLOCK_REVOKE_MESSAGE) &&
		memcmp(value, ZKLOCK_REVOKE_MESSAGE, value_len) == 0)
	{
		ZklockSlot *slot = &zklock_shared->slots[idx];

		if (!slot->revoke_requested)
		{
			slot->revoke_requested = true;
			zklock_wake_backend(slot);
		}
	}
	LWLockRelease(zklock_shared->lock);
}

/*
 * Watcher on our own revocable node: its data changed, read it again.
 */
static void
revoke_watcher(zhandle_t *zzh, int type, int state, const char *path, void *ctx)
{
	int			idx;

	if (type != ZOO_CHANGED_EVENT)
		return;
	LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
	idx = zklock_zkio_tag_current(ctx);
	if (idx >= 0)
	{
		ZklockSlotState st = zklock_shared->slots[idx].state;

		if (st == ZKS_ACTIVE || st == ZKS_HELD)
			zklock_revoke_watch(idx);
	}
	LWLockRelease(zklock_shared->lock);
}

/*
 * Arm the revocation watch on our node.  Caller holds the lock.
 */
void
zklock_revoke_watch(int idx)
{
	ZklockSlot *slot = &zklock_shared->slots[idx];
	char		buf[ZKLOCK_NODE_PATH_SIZE];

	zklock_zkio_node_path(slot, slot->nodes[ZKN_MAIN].name, buf, sizeof(buf));
	zklock_reqs[idx].revoke_armed =
		zoo_awget(zklock_zh, buf, revoke_watcher, (void *) zklock_zkio_slot_tag(idx),
				  revoke_data_done, zklock_zkio_slot_tag(idx)) == ZOK;
}

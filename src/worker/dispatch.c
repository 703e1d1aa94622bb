/*-------------------------------------------------------------------------
 *
 * worker/dispatch.c
 *	  The worker's pass over the request table: take what backends gave
 *	  back, pick up new requests, resume parked ones when the connection
 *	  is back, re-arm revocation watches an earlier worker left, run the
 *	  handover layer's periodic check; and the sweep when the session is lost.
 *	  This is the top of the worker's request handling: it calls the
 *	  request layer (worker/request.c), the recipes through their
 *	  descriptors (zklock_worker_ops), the lock engine and its handover
 *	  layer; nothing below calls it.
 *
 *	  zklock_dispatch_run_requests		one pass over the table (the event
 *										loop's)
 *	  zklock_dispatch_fail_auth_rejected
 *										fail a request: the servers reject
 *										zklock.auth
 *	  zklock_dispatch_sweep_lost_session
 *										the session is gone: its locks lost,
 *										its waits failed
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/memutils.h"

#include "zklock.h"
#include "common/shmem.h"
#include "worker/worker.h"
#include "worker/connection/connection.h"
#include "worker/deletes/deletes.h"
#include "worker/locks/locks.h"

static void resume(int idx);
static void pickup(int i);
static void fail_new_downgrade(int i, const char *why);

/*
 * Carry on with a parked request now that the connection is back.
 * Caller holds the lock.
 */
static void
resume(int idx)
{
	const ZklockWorkerOps *ops = zklock_worker_ops(zklock_shared->slots[idx].op);
	WorkerReq  *req = &zklock_reqs[idx];
	bool		recover = (req->wait == ZKWS_PARKED_RECOVER);

	/* the deletes queued so far (zklock_deletes_send') leave first */
	zklock_batch_flush();
	zklock_req_set_wait(idx, ZKWS_NONE);
	req->skip_lists = 0;
	if (ops->resume)
		ops->resume(idx, recover);
	else
		zklock_req_start(idx);
}

/*
 * Fail request idx because the servers reject zklock.auth (it deletes
 * what it made, as any failed request).  Caller holds the lock.
 */
void
zklock_dispatch_fail_auth_rejected(int idx)
{
	zklock_reqs[idx].serial = zklock_shared->slots[idx].serial;
	zklock_req_fail(idx, ERRCODE_INVALID_AUTHORIZATION_SPECIFICATION,
			  "zookeeper rejected the credentials of zklock.auth");
}

/*
 * Take a new request on: fresh local state, then start its recipe.
 * Caller holds the lock.
 */
static void
pickup(int i)
{
	ZklockSlot *slot = &zklock_shared->slots[i];
	WorkerReq  *req = &zklock_reqs[i];

	/*
	 * The deletes queued so far (the releases of this pass, batched) leave
	 * ahead of the new request, as they would unbatched: a backend's next
	 * acquire must not list its own released node.
	 */
	zklock_batch_flush();
	zklock_req_reset(i);
	req->serial = slot->serial;
	zklock_slot_start(slot);
	slot->token_asked = false;
	/* its lock's base, for the handover layer (before its first step) */
	zklock_pathidx_add(i);
	if (!(zklock_worker_ops(slot->op)->flags & ZKW_KEEPS_NODES))
	{
		zklock_req_clear_nodes(slot);
		slot->phase = ZKP_START;
	}
	if (zklock_auth_rejected())
		zklock_dispatch_fail_auth_rejected(i);
	else if (zklock_secure_failed())
		zklock_secure_fail_request(i);
	else
		zklock_req_start(i);
}

/*
 * Work through what backends posted, in posting order (so a release
 * reaches ZooKeeper before the same backend's next acquire).  After a
 * reconnect, a parked request or a full ring: look at every slot,
 * withdrawals first, then new requests, then requests waiting for the
 * connection.
 *
 * Withdrawn slots are freed at once, even with calls in flight: their
 * replies find the slot's serial changed; a create that succeeds after
 * all deletes its node, and the delete queued here (by name, or by
 * protection prefix) is applied after the create anyway.
 */
void
zklock_dispatch_run_requests(void)
{
	ZklockShared *sh = zklock_shared;
	static ZklockMonoTime next_local_check = 0;
	static int *given_back = NULL;
	int			ngiven;
	ZklockMonoTime now = zklock_mono_now();
	int			i;

	LWLockAcquire(sh->lock, LW_EXCLUSIVE);

	/*
	 * Slots given back without the lock (zklock_give_back) first: a backend
	 * gives back before it claims its next request, so its release reaches
	 * ZooKeeper before its next acquire.
	 */
	if (given_back == NULL)
		given_back = MemoryContextAlloc(TopMemoryContext, sizeof(int) * sh->nslots);
	ngiven = zklock_take_give_backs(given_back);
	for (i = 0; i < ngiven; i++)
		zklock_req_withdraw(given_back[i]);
	if (now >= next_local_check)
	{
		zklock_layer_check_local_waits();
		(void) zklock_pathidx_check();
		zklock_cache_tick(now);
		next_local_check = ZKLOCK_MONO_PLUS_MS(now, LOCAL_WAIT_CHECK_MS);
	}
	if (!sh->post_overflow && !zklock_loop.rescan)
	{
		while (sh->post_head != sh->post_tail)
		{
			ZklockSlot *slot;

			i = zklock_post_ring[sh->post_head];
			sh->post_head = (sh->post_head + 1) % sh->post_size;
			if (i < 0 || i >= sh->nslots)
				continue;
			slot = &sh->slots[i];
			if (slot->state == ZKS_CANCEL || slot->state == ZKS_RELEASE)
				zklock_req_withdraw(i);
			else if (slot->state == ZKS_NEW)
				pickup(i);
			else if (slot->state == ZKS_ACTIVE && slot->dlx_ask != 0)
				zklock_dlx_rec_asked(i);
		}
		zklock_dlx_check_pass();
		if (zklock_deletes_due(zklock_mono_now()))
			zklock_deletes_send();
		LWLockRelease(sh->lock);
		return;
	}

	sh->post_overflow = false;
	sh->post_head = sh->post_tail;
	zklock_rescan_done();
	for (i = 0; i < sh->nslots; i++)
	{
		ZklockSlot *slot = &sh->slots[i];

		if (slot->state == ZKS_CANCEL || slot->state == ZKS_RELEASE)
			zklock_req_withdraw(i);
	}
	if (zklock_deletes_due(zklock_mono_now()))
		zklock_deletes_send();

	for (i = 0; i < sh->nslots; i++)
	{
		ZklockSlot *slot = &sh->slots[i];
		WorkerReq  *req = &zklock_reqs[i];

		if (slot->state == ZKS_NEW)
			pickup(i);
		else if (slot->state == ZKS_ACTIVE && slot->dlx_ask != 0 &&
				 req->serial == slot->serial)
			zklock_dlx_rec_asked(i);
		else if (slot->state == ZKS_ACTIVE && req->serial != slot->serial)
		{
			/*
			 * Left by an earlier worker of this cluster: take it over.  A
			 * create of it may have been sent (the lease's P/locks node
			 * has an id of its own): look for the node by its prefix
			 * first, or a second node would queue behind the first.
			 */
			zklock_req_reset(i);
			req->serial = slot->serial;
			zklock_req_park(i, slot->nodes[ZKN_MAIN].uuid[0] != '\0' ||
							slot->nodes[ZKN_LEASE_LOCK].uuid[0] != '\0');
			if (zklock_connected)
				resume(i);
		}
		else if (slot->state == ZKS_ACTIVE && zklock_req_parked(req) && zklock_connected)
			resume(i);
		else if (slot->state == ZKS_HELD && slot->revocable && zklock_connected &&
				 !(req->serial == slot->serial && req->revoke_armed))
		{
			/*
			 * A revocable lock without its watch: the getData failed, or
			 * an earlier worker held it.  Watch (and read) it again.
			 */
			if (req->serial != slot->serial)
			{
				zklock_req_reset(i);
				req->serial = slot->serial;
			}
			zklock_revoke_watch(i);
		}
	}
	zklock_dlx_check_pass();
	LWLockRelease(sh->lock);
}

/*
 * The sweep of a lost session meets a downgrade not yet picked up (NEW):
 * the write lock it would take the place of is lost with the session, so
 * it fails now (08006, as every wait the session's end cuts short), taken
 * on and failed as a pickup would, without its first step.  Caller holds
 * the lock.
 */
static void
fail_new_downgrade(int i, const char *why)
{
	ZklockSlot *slot = &zklock_shared->slots[i];

	zklock_req_reset(i);
	zklock_reqs[i].serial = slot->serial;
	zklock_slot_start(slot);
	zklock_pathidx_add(i);
	zklock_req_fail(i, ERRCODE_CONNECTION_FAILURE,
					"zookeeper session %s before the write lock \"%s\" was downgraded to a read lock",
					why, slot->path + slot->user_path_off);
}

/*
 * The session is gone (expired, or a different one was handed out): every
 * lock it held is lost, every wait fails, nothing of it is left to
 * delete (the server removed its ephemeral nodes; a pending delete of a
 * persistent node stays).  A downgrade fails whatever its phase, also
 * one not picked up yet or parked before its create: the write lock
 * whose place it takes is lost.  Caller holds the lock.
 */
void
zklock_dispatch_sweep_lost_session(const char *why)
{
	ZklockShared *sh = zklock_shared;
	int			i;
	int			lost = 0;

	for (i = 0; i < sh->nslots; i++)
	{
		ZklockSlot *slot = &sh->slots[i];

		switch (slot->state)
		{
			case ZKS_NEW:
				if (slot->downgrade_seq[0] != '\0')
					fail_new_downgrade(i, why);
				break;
			case ZKS_HELD:
				zklock_slot_lose(slot);
				lost++;
				break;
			case ZKS_ACTIVE:
				if (zklock_worker_ops(slot->op)->session_lost != NULL)
				{
					zklock_reqs[i].serial = slot->serial;
					zklock_worker_ops(slot->op)->session_lost(i);
				}
				else if (slot->nodes[ZKN_MAIN].name[0] != '\0' ||
						 slot->nodes[ZKN_MAIN].uuid[0] != '\0' ||
					slot->nodes[ZKN_LEASE_LOCK].uuid[0] != '\0' ||
					slot->downgrade_seq[0] != '\0' ||
					(zklock_worker_ops(slot->op)->flags & ZKW_KEEPS_NODES))
				{
					zklock_reqs[i].serial = slot->serial;
					zklock_req_fail(i, ERRCODE_CONNECTION_FAILURE,
							  "zookeeper session %s while waiting for lock \"%s\"",
							  why, slot->path + slot->user_path_off);
				}
				else
					zklock_req_park(i, false);
				break;
			case ZKS_CANCEL:
			case ZKS_RELEASE:
				zklock_req_reset(i);
				zklock_slot_free(slot);
				zklock_pathidx_remove(i);
				break;
			default:
				break;
		}
		if (slot->state != ZKS_ACTIVE)
			zklock_req_reset(i);
	}
	zklock_cache_session_lost();
	zklock_dtable_drop_session();
	if (lost > 0)
	{
		sh->lost_epoch++;
		sh->counters.locks_lost += lost;
		ereport(LOG,
				(errmsg("zklock: %d lock(s) lost because the zookeeper session %s",
						lost, why)));
	}
}

/*-------------------------------------------------------------------------
 *
 * zklock_request.c
 *	  A request's life in the worker: picking it up, dispatching its steps,
 *	  parking and resuming it around connection loss, finishing, failing and
 *	  withdrawing it, and the sweep when the session is lost.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/memutils.h"

#include "zklock.h"
#include "zklock_worker_int.h"

static void reset_req(int idx);
static void clear_slot_nodes(ZklockSlot *slot);
static void withdraw(int idx);
static void resume(int idx);
static void pickup(int i);

/*
 * Forget the process-local state of a slot, freeing what it holds.
 */
static void
reset_req(int idx)
{
	WorkerReq  *req = &zklock_reqs[idx];

	zklock_free_participants(req);
	memset(req, 0, sizeof(*req));
}

/*
 * Forget the nodes of a slot whose deletes are recorded (or that went
 * with their session).  Caller holds the lock.
 */
static void
clear_slot_nodes(ZklockSlot *slot)
{
	slot->waits_on[0] = '\0';
	slot->node[0] = '\0';
	slot->uuid[0] = '\0';
	slot->aux_node[0] = '\0';
	slot->aux_uuid[0] = '\0';
}

/*
 * End a request with an error for its backend.  Every node it created or
 * may have created is deleted first, in any phase of any recipe (Curator
 * deletes its node on any exception of its lock loop).  Caller holds the
 * lock.
 */
void
zklock_slot_fail(int idx, int sqlerrcode, const char *fmt,...)
{
	ZklockSlot *slot = &zklock_shared->slots[idx];
	va_list		ap;

	(void) zklock_record_slot_deletes(idx, false);
	clear_slot_nodes(slot);
	va_start(ap, fmt);
	vsnprintf(slot->errmsg, sizeof(slot->errmsg), fmt, ap);
	va_end(ap);
	slot->sqlerrcode = sqlerrcode;
	slot->result = ZKR_ERROR;
	zklock_slot_done(slot);
	reset_req(idx);
	zklock_wake_backend(slot);
}

/*
 * End a request that does not leave a lock behind, with a result value.
 * Caller holds the lock.
 */
void
zklock_slot_finish(int idx, ZklockResult result, int64 value)
{
	ZklockSlot *slot = &zklock_shared->slots[idx];

	slot->result = result;
	slot->result_value = value;
	zklock_slot_done(slot);
	reset_req(idx);
	zklock_wake_backend(slot);
}

/*
 * Withdraw a cancelled or released request: record the deletes of its
 * nodes (by name, or by prefix when a create's reply never came) and free
 * the slot.  Calls still in flight find the slot's serial changed.  When
 * the pending-delete table has no room the slot stays as it is (the
 * intent lives in it) and the next full pass comes back to it.  Caller
 * holds the lock.
 */
static void
withdraw(int idx)
{
	ZklockSlot *slot = &zklock_shared->slots[idx];

	const ZklockWorkerOps *ops = zklock_worker_ops(slot->op);

	/* a handover first: the deletes then find nobody waiting on the node */
	if (slot->state == ZKS_RELEASE && ops->released != NULL)
		ops->released(idx);
	if (!zklock_record_slot_deletes(idx, true))
	{
		zklock_rescan = true;
		return;
	}
	reset_req(idx);
	zklock_slot_free(slot);
	clear_slot_nodes(slot);
}

/*
 * Hand the lock (lease, membership) to the backend.  Caller holds the
 * lock.
 */
void
zklock_grant(int idx)
{
	ZklockSlot *slot = &zklock_shared->slots[idx];

	zklock_reqs[idx].watching = false;
	zklock_reqs[idx].local_wait = false;
	slot->waits_on[0] = '\0';
	zklock_slot_hold(slot);
	slot->since = GetCurrentTimestamp();
	zklock_wake_backend(slot);
}

/*
 * Stop working on a request until the connection is back.  With recover,
 * the resumed request first looks for the node it may have created.
 */
void
zklock_park(int idx, bool recover)
{
	zklock_reqs[idx].parked = true;
	zklock_reqs[idx].watching = false;
	zklock_reqs[idx].pred[0] = '\0';
	zklock_reqs[idx].local_wait = false;
	zklock_rescan = true;
	if (recover)
		zklock_reqs[idx].recover = true;
}

/*
 * After any completion: if the backend gave up meanwhile, withdraw now
 * (as run_requests would: replies still in flight find the slot's serial
 * changed).  Returns true when the request is no longer active (the
 * caller must stop).
 */
bool
zklock_settle_cancel(int idx)
{
	ZklockSlot *slot = &zklock_shared->slots[idx];

	if (slot->state == ZKS_ACTIVE)
		return false;
	if (slot->state == ZKS_CANCEL || slot->state == ZKS_RELEASE)
		withdraw(idx);
	return true;
}

/*
 * Common start of a request's completion: take the lock, find the request
 * the reply belongs to, count the reply in, and stop if the backend gave
 * up meanwhile.  Returns the slot index when the request carries on, -1
 * otherwise; the caller releases the lock either way.
 */
int
zklock_completion_begin(const void *data)
{
	int			idx;

	LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
	idx = zklock_tag_current(data);
	if (idx < 0)
		return -1;
	zklock_reqs[idx].inflight--;
	if (zklock_settle_cancel(idx))
		return -1;
	return idx;
}

/*
 * Common start of the completion of a create of a request's node: like
 * zklock_completion_begin, but a node created for a request that is gone is
 * queued for deletion (it must not linger), and a cancel is left for the
 * caller to settle once it has recorded what the reply created.  Returns the
 * slot index or -1; the caller releases the lock either way.
 */
int
zklock_create_begin(int rc, const char *value, const void *data)
{
	int			idx;

	LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
	idx = zklock_tag_current(data);
	if (idx < 0)
	{
		if (rc == ZOK && value != NULL)
			zklock_queue_delete(value, NULL);
		return -1;
	}
	zklock_reqs[idx].inflight--;
	return idx;
}

/*
 * A create of a request's node succeeded: record the node's name (the last
 * part of value) in node, of size node_size, and that no create is in
 * doubt any more.
 */
void
zklock_create_took(int idx, const char *value, char *node, Size node_size,
				   bool *create_sent)
{
	const char *base = strrchr(value, '/');

	strlcpy(node, base ? base + 1 : value, node_size);
	*create_sent = false;
	zklock_reqs[idx].nonode_retries = 0;
}

/*
 * A create of a request's node failed with rc.  A create named by a
 * protection id (uuid) forgets the id when the server refused it (no node
 * carries it: a retry takes a fresh one, a failure has nothing to look
 * for) and after a missing parent is sent again; a create of a fixed name
 * (fixed_name) fails the request.  The listing pipelined behind the create
 * (listing_follows) fails the same way and is skipped.  Settles a cancel
 * first.  Returns true when the caller should send the create again.
 */
bool
zklock_create_failed(int idx, int rc, char *uuid, bool *create_sent,
					 bool fixed_name, bool listing_follows, const char *what)
{
	*create_sent = (rc != ZNONODE && zklock_rc_retryable(rc));
	if (!fixed_name && zklock_rc_refused(rc))
		uuid[0] = '\0';
	if (listing_follows)
		zklock_reqs[idx].skip_lists++;
	if (zklock_settle_cancel(idx))
		return false;
	if (rc == ZNONODE && !fixed_name)
		return zklock_retry_with_parents(idx);
	zklock_call_failed(idx, rc, what);
	return false;
}

/*
 * A create found a parent missing: have the parents created (as
 * containers) before the next try, or fail the request once a parent has
 * vanished MAX_NONODE_RETRIES times.  Returns true when the caller should
 * send its create again.
 */
bool
zklock_retry_with_parents(int idx)
{
	ZklockSlot *slot = &zklock_shared->slots[idx];
	WorkerReq  *req = &zklock_reqs[idx];

	if (++req->nonode_retries > MAX_NONODE_RETRIES)
	{
		zklock_slot_fail(idx, ERRCODE_EXTERNAL_ROUTINE_EXCEPTION,
				  "could not create the parents of zookeeper path \"%s\"",
				  slot->path + slot->user_path_off);
		return false;
	}
	req->need_parents = true;
	return true;
}

/*
 * Common handling of a failed call of a request: park on connection
 * trouble, leave session ends to the session watcher, fail otherwise.
 */
void
zklock_call_failed(int idx, int rc, const char *what)
{
	if (zklock_rc_retryable(rc))
		zklock_park(idx, true);
	else if (!zklock_rc_session_gone(rc))
		zklock_slot_fail(idx, zklock_rc_sqlstate(rc), "could not %s \"%s\": %s", what,
				  zklock_shared->slots[idx].path + zklock_shared->slots[idx].user_path_off,
				  zerror(rc));
}

/*
 * A try found the lock taken: delete what we made, report not granted.
 */
void
zklock_give_up_try(int idx)
{
	(void) zklock_record_slot_deletes(idx, false);
	clear_slot_nodes(&zklock_shared->slots[idx]);
	zklock_slot_finish(idx, ZKR_NOT_GRANTED, 0);
}

/* ---------------------------------------------------------------------
 * Request dispatch
 * ---------------------------------------------------------------------
 */

/*
 * Begin (or begin again, after a lost connection) the work of a request.
 * Caller holds the lock.
 */
void
zklock_start_request(int idx)
{
	if (!zklock_connected)
	{
		zklock_park(idx, false);
		return;
	}
	zklock_worker_ops(zklock_shared->slots[idx].op)->start(idx);
}

/*
 * A watch fired for a request: take its next look.  Caller holds the lock.
 */
void
zklock_continue_request(int idx)
{
	const ZklockWorkerOps *ops = zklock_worker_ops(zklock_shared->slots[idx].op);

	if (ops->next)
		ops->next(idx);
	else
		zklock_start_request(idx);
}

/*
 * Carry on with a parked request now that the connection is back.
 * Caller holds the lock.
 */
static void
resume(int idx)
{
	const ZklockWorkerOps *ops = zklock_worker_ops(zklock_shared->slots[idx].op);
	WorkerReq  *req = &zklock_reqs[idx];
	bool		recover = req->recover;

	req->parked = false;
	req->recover = false;
	req->skip_lists = 0;
	if (ops->resume)
		ops->resume(idx, recover);
	else
		zklock_start_request(idx);
}

/*
 * Fail request idx because the servers reject zklock.auth (it deletes
 * what it made, as any failed request).  Caller holds the lock.
 */
void
zklock_fail_auth_rejected(int idx)
{
	zklock_reqs[idx].serial = zklock_shared->slots[idx].serial;
	zklock_slot_fail(idx, ERRCODE_INVALID_AUTHORIZATION_SPECIFICATION,
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

	reset_req(i);
	req->serial = slot->serial;
	zklock_slot_start(slot);
	if (!(zklock_worker_ops(slot->op)->flags & ZKW_KEEPS_NODES))
	{
		clear_slot_nodes(slot);
		slot->phase = ZKP_START;
	}
	if (zklock_auth_failed_at != 0)
		zklock_fail_auth_rejected(i);
	else
		zklock_start_request(i);
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
zklock_run_requests(void)
{
	ZklockShared *sh = zklock_shared;
	static TimestampTz next_local_check = 0;
	static int *given_back = NULL;
	int			ngiven;
	TimestampTz now = GetCurrentTimestamp();
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
		withdraw(given_back[i]);
	if (now >= next_local_check)
	{
		zklock_lk_check_local_waits();
		next_local_check = TimestampTzPlusMilliseconds(now, LOCAL_WAIT_CHECK_MS);
	}
	if (!sh->post_overflow && !zklock_rescan)
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
				withdraw(i);
			else if (slot->state == ZKS_NEW)
				pickup(i);
		}
		if (zklock_deletes_due(GetCurrentTimestamp()))
			zklock_send_deletes();
		LWLockRelease(sh->lock);
		return;
	}

	sh->post_overflow = false;
	sh->post_head = sh->post_tail;
	zklock_rescan = false;
	for (i = 0; i < sh->nslots; i++)
	{
		ZklockSlot *slot = &sh->slots[i];

		if (slot->state == ZKS_CANCEL || slot->state == ZKS_RELEASE)
			withdraw(i);
	}
	if (zklock_deletes_due(GetCurrentTimestamp()))
		zklock_send_deletes();

	for (i = 0; i < sh->nslots; i++)
	{
		ZklockSlot *slot = &sh->slots[i];
		WorkerReq  *req = &zklock_reqs[i];

		if (slot->state == ZKS_NEW)
			pickup(i);
		else if (slot->state == ZKS_ACTIVE && req->serial != slot->serial)
		{
			/*
			 * Left by an earlier worker of this cluster: take it over.  A
			 * create of it may have been sent (the lease's P/locks node
			 * has an id of its own): look for the node by its prefix
			 * first, or a second node would queue behind the first.
			 */
			reset_req(i);
			req->serial = slot->serial;
			zklock_park(i, slot->uuid[0] != '\0' || slot->aux_uuid[0] != '\0');
			if (zklock_connected)
				resume(i);
		}
		else if (slot->state == ZKS_ACTIVE && req->parked && zklock_connected)
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
				reset_req(i);
				req->serial = slot->serial;
			}
			zklock_revoke_watch(i);
		}
	}
	LWLockRelease(sh->lock);
}

/*
 * The session is gone (expired, or a different one was handed out): every
 * lock it held is lost, every wait fails, nothing of it is left to
 * delete (the server removed its ephemeral nodes; a pending delete of a
 * persistent node stays).  Caller holds the lock.
 */
void
zklock_sweep_lost_session(const char *why)
{
	ZklockShared *sh = zklock_shared;
	int			i;
	int			lost = 0;

	for (i = 0; i < sh->nslots; i++)
	{
		ZklockSlot *slot = &sh->slots[i];

		switch (slot->state)
		{
			case ZKS_HELD:
				zklock_slot_lose(slot);
				lost++;
				break;
			case ZKS_ACTIVE:
				if (slot->node[0] != '\0' || slot->uuid[0] != '\0' ||
					slot->aux_uuid[0] != '\0' ||
					(zklock_worker_ops(slot->op)->flags & ZKW_KEEPS_NODES))
				{
					zklock_reqs[i].serial = slot->serial;
					zklock_slot_fail(i, ERRCODE_CONNECTION_FAILURE,
							  "zookeeper session %s while waiting for lock \"%s\"",
							  why, slot->path + slot->user_path_off);
				}
				else
					zklock_park(i, false);
				break;
			case ZKS_CANCEL:
			case ZKS_RELEASE:
				reset_req(i);
				zklock_slot_free(slot);
				break;
			default:
				break;
		}
		if (slot->state != ZKS_ACTIVE)
			reset_req(i);
	}
	zklock_drop_session_deletes();
	if (lost > 0)
	{
		sh->lost_epoch++;
		sh->locks_lost_count += lost;
		ereport(LOG,
				(errmsg("zklock: %d lock(s) lost because the zookeeper session %s",
						lost, why)));
	}
}

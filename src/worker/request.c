/*-------------------------------------------------------------------------
 *
 * worker/request.c
 *	  A request's bookkeeping in the worker: its calls (counted in when
 *	  sent, failed, the listing and exists helpers, the step watcher), its
 *	  wait state (WorkerReq.wait), starting and continuing its work through
 *	  its recipe's descriptor, parking, granting, finishing, failing and
 *	  withdrawing it, and the deletes it must record when it ends.  It owns
 *	  zklock_reqs, the requests' WorkerReq.  Picking a request up, resuming
 *	  a parked one and the sweep when the session is lost are
 *	  worker/dispatch.c's.
 *
 *	  zklock_reqs						each slot's process-local state
 *										(WorkerReq)
 *	  zklock_req_reset					forget a slot's state, freeing what it
 *										holds
 *	  zklock_req_memory					the memory of a request's own
 *										allocations
 *	  zklock_req_clear_nodes			forget a slot's nodes
 *	  zklock_req_start					begin (or begin again) a request's work
 *	  zklock_req_continue				a watch fired: take the next look
 *	  zklock_req_set_wait				move the wait state (WorkerReq.wait):
 *										the one place it changes
 *	  zklock_req_park					stop until the connection is back
 *	  zklock_req_grant					hand the lock to the backend
 *	  zklock_req_finish					end with a result value
 *	  zklock_req_fail					end with an error, the nodes' deletes
 *										recorded
 *	  zklock_req_give_up_try			a try found the lock taken: its nodes
 *										deleted, not granted
 *	  zklock_req_withdraw				a cancelled or released request: record
 *										its deletes, free the slot
 *	  zklock_req_settle_cancel			after a completion: withdraw if the
 *										backend gave up
 *	  zklock_req_call_sent				count in an async call just made, or
 *										park
 *	  zklock_req_call_failed			a call failed: park, leave it to the
 *										session watcher, or fail
 *	  zklock_req_completion_begin,
 *	  zklock_req_listing_begin,
 *	  zklock_req_create_begin			the common start of a completion (of
 *										any call, a listing, a create)
 *	  zklock_req_completion_end			their common end
 *	  zklock_req_create_took			a create succeeded: record its node
 *	  zklock_req_create_failed			a create failed: retry, or fail the
 *										request
 *	  zklock_req_retry_with_parents		a parent was missing: create the
 *										parents first
 *	  zklock_req_send_listing,
 *	  zklock_req_send_listing2			ask for a path's children (with the
 *										request's watch, or with the parent's
 *										Stat), or park
 *	  zklock_req_send_exists_watch		exists() with the request's watch, or
 *										park
 *	  zklock_req_step_watcher			the watcher of every recipe: look again
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/memutils.h"

#include "zklock.h"
#include "core/curator_rules.h"
#include "common/shmem.h"
#include "worker/worker.h"
#include "worker/deletes/deletes.h"
#include "worker/locks/locks.h"

/* the process-local state of each slot (worker_attach allocates it) */
WorkerReq *zklock_reqs = NULL;

static bool record_slot_deletes(int idx, bool can_wait);


/*
 * Forget the process-local state of a slot, freeing what it holds.
 */
void
zklock_req_reset(int idx)
{
	WorkerReq  *req = &zklock_reqs[idx];

	if (req->cxt != NULL)
		MemoryContextDelete(req->cxt);
	memset(req, 0, sizeof(*req));
}

/*
 * The memory of request idx's own allocations (a recipe's buffers): made
 * on first use, freed with the request's state (zklock_req_reset), so the
 * request layer frees them without knowing the recipe.
 */
MemoryContext
zklock_req_memory(int idx)
{
	WorkerReq  *req = &zklock_reqs[idx];

	if (req->cxt == NULL)
		req->cxt = AllocSetContextCreate(TopMemoryContext, "zklock request",
										 ALLOCSET_SMALL_SIZES);
	return req->cxt;
}

/*
 * Forget the nodes of a slot whose deletes are recorded (or that went
 * with their session).  Caller holds the lock.
 */
void
zklock_req_clear_nodes(ZklockSlot *slot)
{
	int			k;

	slot->waits_on[0] = '\0';
	for (k = 0; k < ZKN_COUNT; k++)
	{
		slot->nodes[k].name[0] = '\0';
		slot->nodes[k].uuid[0] = '\0';
	}
}

/*
 * End a request with an error for its backend.  Every node it created or
 * may have created is deleted first, in any phase of any recipe (Curator
 * deletes its node on any exception of its lock loop).  Caller holds the
 * lock.
 */
void
zklock_req_fail(int idx, int sqlerrcode, const char *fmt,...)
{
	ZklockSlot *slot = &zklock_shared->slots[idx];
	va_list		ap;

	(void) record_slot_deletes(idx, false);
	zklock_req_clear_nodes(slot);
	va_start(ap, fmt);
	vsnprintf(slot->errmsg, sizeof(slot->errmsg), fmt, ap);
	va_end(ap);
	slot->sqlerrcode = sqlerrcode;
	slot->result = ZKR_ERROR;
	zklock_slot_done(slot);
	zklock_req_reset(idx);
	zklock_wake_backend(slot);
}

/*
 * End a request that does not leave a lock behind, with a result value.
 * Caller holds the lock.
 */
void
zklock_req_finish(int idx, ZklockResult result, int64 value)
{
	ZklockSlot *slot = &zklock_shared->slots[idx];

	slot->result = result;
	slot->result_value = value;
	zklock_slot_done(slot);
	zklock_req_reset(idx);
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
void
zklock_req_withdraw(int idx)
{
	ZklockSlot *slot = &zklock_shared->slots[idx];

	const ZklockWorkerOps *ops = zklock_worker_ops(slot->op);

	/* a handover first: the deletes then find nobody waiting on the node */
	if (slot->state == ZKS_RELEASE && ops->released != NULL)
		ops->released(idx);
	if (!record_slot_deletes(idx, true))
	{
		zklock_request_rescan();
		return;
	}
	zklock_req_reset(idx);
	zklock_slot_free(slot);
	zklock_pathidx_remove(idx);
	zklock_req_clear_nodes(slot);
}

/*
 * Hand the lock (lease, membership) to the backend.  Caller holds the
 * lock.
 */
void
zklock_req_grant(int idx)
{
	ZklockSlot *slot = &zklock_shared->slots[idx];

	zklock_req_set_wait(idx, ZKWS_NONE);
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
zklock_req_park(int idx, bool recover)
{
	WorkerReq  *req = &zklock_reqs[idx];

	/* once it must look for its node, it does so when it resumes */
	if (req->wait == ZKWS_PARKED_RECOVER)
		recover = true;
	zklock_req_set_wait(idx, recover ? ZKWS_PARKED_RECOVER : ZKWS_PARKED);
	req->pred[0] = '\0';
	zklock_request_rescan();
}

/*
 * Move request idx's wait state (WorkerReq.wait) to to: the one place it
 * changes, checked against the moves zklock_wait_move_ok allows.
 */
void
zklock_req_set_wait(int idx, ZklockWaitState to)
{
	Assert(zklock_wait_move_ok(zklock_reqs[idx].wait, to));
	zklock_reqs[idx].wait = to;
}

/*
 * After any completion: if the backend gave up meanwhile, withdraw now
 * (as zklock_dispatch_run_requests, worker/dispatch.c, would: replies
 * still in flight find the slot's serial changed).  Returns true when the
 * request is no longer active (the caller must stop).
 */
bool
zklock_req_settle_cancel(int idx)
{
	ZklockSlot *slot = &zklock_shared->slots[idx];

	if (slot->state == ZKS_ACTIVE)
		return false;
	if (slot->state == ZKS_CANCEL || slot->state == ZKS_RELEASE)
		zklock_req_withdraw(idx);
	return true;
}

/*
 * Common start of a request's completion: take the lock, find the request
 * the reply belongs to, count the reply in, and stop if the backend gave
 * up meanwhile.  Returns the slot index when the request carries on, -1
 * otherwise; the caller ends with zklock_req_completion_end either way.
 */
int
zklock_req_completion_begin(const void *data)
{
	int			idx;

	LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
	idx = zklock_zkio_tag_current(data);
	if (idx < 0)
		return -1;
	zklock_reqs[idx].inflight--;
	if (zklock_req_settle_cancel(idx))
		return -1;
	return idx;
}

/*
 * Common start of the completion of a listing of a request: like
 * zklock_req_completion_begin, but a listing pipelined behind a create that
 * failed (zklock_req_create_failed counted it in skip_lists) is dropped: only
 * a cancel is settled.  Returns the slot index when the caller should
 * look at the answer, -1 otherwise; the caller ends with
 * zklock_req_completion_end either way.
 */
int
zklock_req_listing_begin(const void *data)
{
	int			idx;
	WorkerReq  *req;

	LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
	idx = zklock_zkio_tag_current(data);
	if (idx < 0)
		return -1;
	req = &zklock_reqs[idx];
	req->inflight--;
	if (req->skip_lists > 0)
	{
		req->skip_lists--;
		(void) zklock_req_settle_cancel(idx);
		return -1;
	}
	if (zklock_req_settle_cancel(idx))
		return -1;
	return idx;
}

/*
 * Common start of the completion of a create of a request's node: like
 * zklock_req_completion_begin, but a node created for a request that is gone
 * is queued for deletion (it must not linger), and a cancel is left for the
 * caller to settle once it has recorded what the reply created.  Returns the
 * slot index or -1; the caller ends with zklock_req_completion_end either way.
 */
int
zklock_req_create_begin(int rc, const char *value, const void *data)
{
	int			idx;

	LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
	idx = zklock_zkio_tag_current(data);
	if (idx < 0)
	{
		if (rc == ZOK && value != NULL)
			zklock_deletes_queue(value, NULL);
		return -1;
	}
	zklock_reqs[idx].inflight--;
	return idx;
}

/*
 * Common end of a completion begun with zklock_req_completion_begin,
 * zklock_req_listing_begin or zklock_req_create_begin (or a counter fold's
 * fold_completion_begin), at each of its exits: release the lock the
 * begin took.  Caller holds the lock.
 */
void
zklock_req_completion_end(void)
{
	LWLockRelease(zklock_shared->lock);
}

/*
 * A create of a request's node succeeded: record the node's name (the last
 * part of value) in node, of size node_size, and that no create is in
 * doubt any more.
 */
void
zklock_req_create_took(int idx, const char *value, char *node, Size node_size,
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
zklock_req_create_failed(int idx, int rc, char *uuid, bool *create_sent,
						 bool fixed_name, bool listing_follows, const char *what)
{
	*create_sent = (rc != ZNONODE && zklock_rc_retryable(rc));
	if (!fixed_name && zklock_rc_refused(rc))
		uuid[0] = '\0';
	if (listing_follows)
		zklock_reqs[idx].skip_lists++;
	if (zklock_req_settle_cancel(idx))
		return false;
	if (rc == ZNONODE && !fixed_name)
		return zklock_req_retry_with_parents(idx);
	zklock_req_call_failed(idx, rc, what);
	return false;
}

/*
 * A create found a parent missing: have the parents created (as
 * containers) before the next try, or fail the request once a parent has
 * vanished MAX_NONODE_RETRIES times.  Returns true when the caller should
 * send its create again.
 */
bool
zklock_req_retry_with_parents(int idx)
{
	ZklockSlot *slot = &zklock_shared->slots[idx];
	WorkerReq  *req = &zklock_reqs[idx];

	if (++req->nonode_retries > MAX_NONODE_RETRIES)
	{
		zklock_req_fail(idx, ERRCODE_EXTERNAL_ROUTINE_EXCEPTION,
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
zklock_req_call_failed(int idx, int rc, const char *what)
{
	if (zklock_rc_retryable(rc))
		zklock_req_park(idx, true);
	else if (!zklock_rc_session_gone(rc))
		zklock_req_fail(idx, zklock_rc_sqlstate(rc), "could not %s \"%s\": %s", what,
				  zklock_shared->slots[idx].path + zklock_shared->slots[idx].user_path_off,
				  zerror(rc));
}

/*
 * A try found the lock taken: delete what we made, report not granted.
 */
void
zklock_req_give_up_try(int idx)
{
	(void) record_slot_deletes(idx, false);
	zklock_req_clear_nodes(&zklock_shared->slots[idx]);
	zklock_req_finish(idx, ZKR_NOT_GRANTED, 0);
}

/* ---------------------------------------------------------------------
 * Starting and continuing a request through its recipe's descriptor
 * (zklock_worker_ops)
 * ---------------------------------------------------------------------
 */

/*
 * Begin (or begin again, after a lost connection) the work of a request.
 * Caller holds the lock.
 */
void
zklock_req_start(int idx)
{
	if (!zklock_connected)
	{
		zklock_req_park(idx, false);
		return;
	}
	zklock_worker_ops(zklock_shared->slots[idx].op)->start(idx);
}

/*
 * A watch fired for a request: take its next look.  Caller holds the lock.
 */
void
zklock_req_continue(int idx)
{
	const ZklockWorkerOps *ops = zklock_worker_ops(zklock_shared->slots[idx].op);

	if (ops->next)
		ops->next(idx);
	else
		zklock_req_start(idx);
}

/*
 * Account for an async call just made for request idx: count it in (its
 * completion will run), or park the request when the client refused to
 * send it (the connection is not there).  Caller holds the lock.
 */
void
zklock_req_call_sent(int idx, int rc)
{
	if (rc != ZOK)
		zklock_req_park(idx, false);
	else
		zklock_reqs[idx].inflight++;
}

/*
 * Watcher of every recipe: the node we wait on changed; look again.
 */
void
zklock_req_step_watcher(zhandle_t *zzh, int type, int state, const char *path, void *ctx)
{
	int			idx;

	if (type == ZOO_SESSION_EVENT)
		return;					/* the session watcher handles those */

	LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
	idx = zklock_zkio_tag_current(ctx);
	if (idx >= 0 && zklock_wait_for_event(zklock_reqs[idx].wait) &&
		zklock_reqs[idx].inflight == 0 &&
		zklock_shared->slots[idx].state == ZKS_ACTIVE)
	{
		zklock_req_set_wait(idx, ZKWS_NONE);
		zklock_req_continue(idx);
	}
	LWLockRelease(zklock_shared->lock);
}

/*
 * Ask for the children of path for a request (with the request's watch
 * when watch), or park the request when that cannot be sent now.  With
 * recover, the resumed request looks for its node by prefix first.
 * Caller holds the lock.
 */
void
zklock_req_send_listing(int idx, const char *path, strings_completion_t done, bool watch,
			 bool recover)
{
	int			rc;

	if (!zklock_connected)
	{
		zklock_req_park(idx, recover);
		return;
	}
	if (watch)
		rc = zoo_awget_children(zklock_zh, path, zklock_req_step_watcher, (void *) zklock_zkio_slot_tag(idx),
								done, zklock_zkio_slot_tag(idx));
	else
		rc = zoo_aget_children(zklock_zh, path, 0, done, zklock_zkio_slot_tag(idx));
	if (rc != ZOK)
		zklock_req_park(idx, recover);
	else
		zklock_reqs[idx].inflight++;
}

/*
 * The children of path with the parent's Stat (getChildren2, no watch);
 * parks the request when that cannot be sent now.  Caller holds the lock.
 */
void
zklock_req_send_listing2(int idx, const char *path, strings_stat_completion_t done)
{
	if (!zklock_connected ||
		zoo_aget_children2(zklock_zh, path, 0, done, zklock_zkio_slot_tag(idx)) != ZOK)
		zklock_req_park(idx, false);
	else
		zklock_reqs[idx].inflight++;
}

/*
 * exists() with the request's watch on path; parks the request when that
 * cannot be sent now.  Returns true when the call is on its way.  Caller
 * holds the lock.
 */
bool
zklock_req_send_exists_watch(int idx, const char *path, stat_completion_t done, bool recover)
{
	if (!zklock_connected ||
		zoo_awexists(zklock_zh, path, zklock_req_step_watcher, (void *) zklock_zkio_slot_tag(idx),
					 done, zklock_zkio_slot_tag(idx)) != ZOK)
	{
		zklock_req_park(idx, recover);
		return false;
	}
	zklock_reqs[idx].inflight++;
	return true;
}

/*
 * Record the deletes of every node the request in slot idx created or may
 * have created (zklock_cleanup_plan decides, from the slot alone), before
 * the slot is freed or finished.  Nodes of an earlier session went with
 * it.  A caller that can wait (a withdrawal, whose slot keeps the intent
 * meanwhile) gets false when the table lacks room and must come back; a
 * caller that cannot wait takes what room is left.  Caller holds the
 * lock.
 */
static bool
record_slot_deletes(int idx, bool can_wait)
{
	ZklockShared *sh = zklock_shared;
	ZklockSlot *slot = &sh->slots[idx];
	ZklockCleanupInput in;
	ZklockCleanupStep steps[ZKLOCK_MAX_CLEANUP_STEPS];
	int			n;
	int			k;

	if (!sh->have_session || slot->session_gen != sh->session_gen)
		return true;
	in.lease = (zklock_worker_ops(slot->op)->flags & ZKW_NODE_IN_LEASES) != 0;
	in.protected_names = !(zklock_worker_ops(slot->op)->flags & ZKW_PLAIN_NAMES);
	in.node = slot->nodes[ZKN_MAIN].name;
	in.uuid = slot->nodes[ZKN_MAIN].uuid;
	in.node_deleted = slot->nodes[ZKN_MAIN].deleted;
	in.aux_node = slot->nodes[ZKN_LEASE_LOCK].name;
	in.aux_uuid = slot->nodes[ZKN_LEASE_LOCK].uuid;
	n = zklock_cleanup_plan(&in, steps);
	if (can_wait && !zklock_dtable_have_room(n))
		return false;
	for (k = 0; k < n; k++)
	{
		char		parent[ZKLOCK_NODE_PATH_SIZE];
		char		buf[ZKLOCK_NODE_PATH_SIZE];

		switch (steps[k].parent)
		{
			case ZKLOCK_CLEANUP_IN_LEASES:
				zklock_recipe_path(parent, sizeof(parent), slot->path, ZKLOCK_LEASES_DIR, NULL);
				break;
			case ZKLOCK_CLEANUP_IN_LOCKS:
				zklock_recipe_path(parent, sizeof(parent), slot->path, ZKLOCK_LOCKS_DIR, NULL);
				break;
			default:
				strlcpy(parent, slot->path, sizeof(parent));
				break;
		}
		if (steps[k].by_prefix)
			zklock_deletes_queue(parent, steps[k].prefix);
		else
		{
			snprintf(buf, sizeof(buf), "%s/%s", parent, steps[k].name);
			zklock_deletes_queue(buf, NULL);
		}
	}
	/* late creates (worker/deletes/ghosts.c) */
	zklock_ghosts_sweep_doubted(idx, false);
	return true;
}

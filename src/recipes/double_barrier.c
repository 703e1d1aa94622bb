/*-------------------------------------------------------------------------
 *
 * recipes/double_barrier.c
 *	  The double barrier (DistributedDoubleBarrier): zk_double_barrier_enter
 *	  and zk_double_barrier_leave, and the worker's enter and leave steps
 *	  (members P/<uuid>, P/ready).  See doc/wire.md.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "zklock.h"
#include "core/curator_rules.h"
#include "common/shmem.h"
#include "recipes/recipe.h"
#include "recipes/recipe_worker.h"
#include "recipes/recipe_sql.h"

static bool denter_watch_ready(int idx);
static void leave_finish(int idx);
static void leave_list(int idx);

static void denter_ready_done(int rc, const struct Stat *stat,
							  const void *data);
static void denter_create_done(int rc, const char *value, const void *data);
static void denter_ready_created(int rc, const char *value,
								 const struct Stat *stat, const void *data);
static void denter_children_done(int rc, const struct String_vector *strings,
								 const void *data);
static void denter_list(int idx);
static void denter_give_up(int idx);
static void denter_given_up(int rc, const void *data);
static void leave_watch_done(int rc, const struct Stat *stat,
							 const void *data);
static void leave_ready_stat_done(int rc, const struct Stat *stat,
								  const void *data);
static void leave_ready_deleted(int rc, const void *data);
static void leave_member_deleted(int rc, const void *data);
static void leave_children_done(int rc, const struct String_vector *strings,
								const void *data);

/* ---------------------------------------------------------------------
 * Double barrier (DistributedDoubleBarrier): members P/<uuid>, P/ready.
 * ---------------------------------------------------------------------
 */

/*
 * Completion of exists+watch on P/ready while entering.
 */
static void
denter_ready_done(int rc, const struct Stat *stat, const void *data)
{
	int			idx = zklock_req_completion_begin(data);

	if (idx >= 0)
	{
		WorkerReq  *req = &zklock_reqs[idx];
		ZklockSlot *slot = &zklock_shared->slots[idx];

		if (rc == ZOK)
		{
			req->rcp.dbarrier.ready_seen = true;
			slot->rstate.dbarrier.ready_czxid = stat->czxid;	/* the P/ready we pass */
			slot->rstate.dbarrier.ready_ctime = stat->ctime;
			if (req->inflight == 0 && !req->nodes[ZKN_MAIN].create_sent)
				zklock_req_grant(idx);		/* member node made, barrier ready */
		}
		else if (rc == ZNONODE)
		{
			req->rcp.dbarrier.ready_seen = false;
			/* while waiting for P/ready its absence changes nothing */
			if (req->wait != ZKWS_WATCHING && req->inflight == 0 &&
				!req->nodes[ZKN_MAIN].create_sent &&
				slot->nodes[ZKN_MAIN].name[0] != '\0')
				denter_list(idx);
		}
		else
			zklock_req_call_failed(idx, rc, "watch the double barrier");
	}
	zklock_req_completion_end();
}

/*
 * Look at P/ready, with a watch that fires when it is created.  Caller
 * holds the lock.
 */
static bool
denter_watch_ready(int idx)
{
	char		ready[ZKLOCK_NODE_PATH_SIZE];

	zklock_recipe_path(ready, sizeof(ready), zklock_shared->slots[idx].path,
					   NULL, ZKLOCK_READY_NODE);
	return zklock_req_send_exists_watch(idx, ready, denter_ready_done, true);
}

/*
 * Completion of the create of our member node.
 */
static void
denter_create_done(int rc, const char *value, const void *data)
{
	int			idx;

	LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
	idx = zklock_zkio_tag_current(data);
	if (idx >= 0)
	{
		WorkerReq  *req = &zklock_reqs[idx];

		req->inflight--;
		if (rc == ZOK || rc == ZNODEEXISTS)
			req->nodes[ZKN_MAIN].create_sent = false;
		else if (zklock_rc_refused(rc))
		{
			/* no member node was made: a retry takes a fresh id */
			ZklockSlot *slot = &zklock_shared->slots[idx];

			req->nodes[ZKN_MAIN].create_sent = false;
			slot->nodes[ZKN_MAIN].name[0] = '\0';
			slot->nodes[ZKN_MAIN].uuid[0] = '\0';
		}
		if (zklock_req_settle_cancel(idx))
			;
		else if (rc == ZOK || rc == ZNODEEXISTS)
		{
			if (req->inflight == 0)
			{
				if (req->rcp.dbarrier.ready_seen)
					zklock_req_grant(idx);
				else
					denter_list(idx);
			}
		}
		else if (rc == ZNONODE)
		{
			if (zklock_req_retry_with_parents(idx))
				zklock_req_start(idx);
		}
		else
			zklock_req_call_failed(idx, rc, "enter the double barrier");
	}
	LWLockRelease(zklock_shared->lock);
}

/*
 * Completion of the create of P/ready: the barrier is open.  Made by
 * another member meanwhile: look at it (its creation zxid is what our
 * leave may delete), which grants.
 */
static void
denter_ready_created(int rc, const char *value, const struct Stat *stat,
					 const void *data)
{
	int			idx = zklock_req_completion_begin(data);

	if (idx >= 0)
	{
		if (rc == ZOK)
		{
			zklock_shared->slots[idx].rstate.dbarrier.ready_czxid = stat->czxid;
			zklock_shared->slots[idx].rstate.dbarrier.ready_ctime = stat->ctime;
			zklock_req_grant(idx);
		}
		else if (rc == ZNODEEXISTS)
			(void) denter_watch_ready(idx);
		else
			zklock_req_call_failed(idx, rc, "open the double barrier");
	}
	zklock_req_completion_end();
}

/*
 * Completion of the listing of P while entering: open the barrier when
 * enough members are in, otherwise wait for P/ready.  Another recipe's
 * nodes among them (a lock's, a leader latch's: core/recipe_guard.c)
 * would count as members: the enter fails with 22023 instead, and its
 * member node is deleted.
 */
static void
denter_children_done(int rc, const struct String_vector *strings, const void *data)
{
	int			idx = zklock_req_completion_begin(data);

	if (idx >= 0)
	{
		ZklockSlot *slot = &zklock_shared->slots[idx];
		WorkerReq  *req = &zklock_reqs[idx];
		const char *held = NULL;

		if (rc == ZOK)
			held = zklock_guard_children(ZKG_DOUBLE_BARRIER, strings->data,
										 strings->count, NULL);
		if (held != NULL)
			zklock_req_fail(idx, ERRCODE_INVALID_PARAMETER_VALUE,
							"zookeeper path \"%s\" holds %s, not %s",
							slot->path + slot->user_path_off, held,
							zklock_guard_recipe_name(ZKG_DOUBLE_BARRIER));
		else if (rc == ZOK)
		{
			if (strings->count >= slot->args.dbarrier.member_qty)
			{
				char		ready[ZKLOCK_NODE_PATH_SIZE];
				int			zrc;

				zklock_recipe_path(ready, sizeof(ready), slot->path, NULL, ZKLOCK_READY_NODE);
				zrc = zoo_acreate2(zklock_zh, ready, "", 0, &ZOO_OPEN_ACL_UNSAFE, 0,
								   denter_ready_created, zklock_zkio_slot_tag(idx));
				if (zrc != ZOK)
					zklock_req_park(idx, true);
				else
					req->inflight++;
			}
			else if (slot->try_only)
				denter_give_up(idx);	/* a look only: too few members */
			else if (denter_watch_ready(idx))
			{
				/* wait for P/ready (its watch re-armed, in case it fired) */
				zklock_req_set_wait(idx, ZKWS_WATCHING);
			}
		}
		else
			zklock_req_call_failed(idx, rc, "list the double barrier");
	}
	zklock_req_completion_end();
}

/*
 * A look (zero timeout) found too few members: delete our member node and
 * answer false only once ZooKeeper answered the delete.  A member node
 * left for a moment after the answer would be counted by another member's
 * enter, which would then pass with one member too few.  When the delete
 * cannot be sent, the pending-delete table takes it (zklock_req_give_up_try).
 * Caller holds the lock.
 */
static void
denter_give_up(int idx)
{
	ZklockSlot *slot = &zklock_shared->slots[idx];
	char		buf[ZKLOCK_NODE_PATH_SIZE];

	if (slot->nodes[ZKN_MAIN].name[0] == '\0' || !zklock_connected)
	{
		zklock_req_give_up_try(idx);
		return;
	}
	zklock_zkio_node_path(slot, slot->nodes[ZKN_MAIN].name, buf, sizeof(buf));
	if (zoo_adelete(zklock_zh, buf, -1, denter_given_up, zklock_zkio_slot_tag(idx)) != ZOK)
	{
		zklock_req_give_up_try(idx);
		return;
	}
	zklock_reqs[idx].inflight++;
}

/*
 * Completion of the delete of a look's member node: answer false.  Gone
 * (deleted, or not there), nothing is left to delete; otherwise the
 * pending-delete table takes it over.
 */
static void
denter_given_up(int rc, const void *data)
{
	int			idx = zklock_req_completion_begin(data);

	if (idx >= 0)
	{
		if (rc == ZOK || rc == ZNONODE)
			zklock_shared->slots[idx].nodes[ZKN_MAIN].deleted = true;
		zklock_req_give_up_try(idx);
	}
	zklock_req_completion_end();
}

/*
 * List P to count the members.  Caller holds the lock.
 */
static void
denter_list(int idx)
{
	zklock_req_send_listing(idx, zklock_shared->slots[idx].path, denter_children_done,
				 false, true);
}

/*
 * Start entering: exists+watch on P/ready, then create our member node,
 * pipelined.  Caller holds the lock.
 */
static void
denter_start(int idx)
{
	ZklockSlot *slot = &zklock_shared->slots[idx];
	WorkerReq  *req = &zklock_reqs[idx];
	char		buf[ZKLOCK_NODE_PATH_SIZE];
	int			rc;

	if (slot->nodes[ZKN_MAIN].uuid[0] == '\0')
	{
		slot->rstate.dbarrier.ready_czxid = 0;
		slot->rstate.dbarrier.ready_ctime = 0;
		if (!zklock_zkio_new_uuid(slot->nodes[ZKN_MAIN].uuid))
		{
			zklock_req_fail(idx, ERRCODE_INTERNAL_ERROR, "could not generate a random member id");
			return;
		}
		strlcpy(slot->nodes[ZKN_MAIN].name, slot->nodes[ZKN_MAIN].uuid,
				sizeof(slot->nodes[ZKN_MAIN].name));
	}
	if (req->need_parents)
	{
		zklock_zkio_create_containers(slot->path, true);
		req->need_parents = false;
	}
	if (!denter_watch_ready(idx))
		return;
	zklock_zkio_node_path(slot, slot->nodes[ZKN_MAIN].name, buf, sizeof(buf));
	rc = zoo_acreate(zklock_zh, buf, slot->data, strlen(slot->data), zklock_zkio_node_acl(),
					 ZOO_EPHEMERAL, denter_create_done, zklock_zkio_slot_tag(idx));
	if (rc != ZOK)
	{
		zklock_req_park(idx, true);
		return;
	}
	slot->session_gen = zklock_shared->session_gen;
	req->nodes[ZKN_MAIN].create_sent = true;
	req->inflight++;
}

/*
 * Completion of exists+watch on the member we wait for while leaving.
 */
static void
leave_watch_done(int rc, const struct Stat *stat, const void *data)
{
	int			idx = zklock_req_completion_begin(data);

	if (idx >= 0)
	{
		if (rc == ZOK)
			zklock_req_set_wait(idx, ZKWS_WATCHING);
		else if (rc == ZNONODE)
			leave_list(idx);
		else
			zklock_req_call_failed(idx, rc, "leave the double barrier");
	}
	zklock_req_completion_end();
}

/*
 * The leave is done: P/ready is gone, or is a later round's.
 */
static void
leave_done(int idx)
{
	zklock_shared->slots[idx].nodes[ZKN_MAIN].name[0] = '\0';
	zklock_req_finish(idx, ZKR_OK, 1);
}

/*
 * Completion of the look at P/ready at the end of a leave: delete it if
 * it is the one our enter passed (same creation zxid), at the version just
 * seen.  Gone (another member removed it first) or made again since by a
 * later round (another creation zxid): the leave is done, that one is not
 * ours.
 */
static void
leave_ready_stat_done(int rc, const struct Stat *stat, const void *data)
{
	int			idx = zklock_req_completion_begin(data);

	if (idx >= 0)
	{
		ZklockSlot *slot = &zklock_shared->slots[idx];
		char		buf[ZKLOCK_NODE_PATH_SIZE];

		if (rc == ZNONODE ||
			(rc == ZOK && slot->rstate.dbarrier.ready_czxid != 0 &&
			 stat->czxid != slot->rstate.dbarrier.ready_czxid))
			leave_done(idx);
		else if (rc == ZOK)
		{
			zklock_recipe_path(buf, sizeof(buf), slot->path, NULL, ZKLOCK_READY_NODE);
			zklock_req_call_sent(idx, zoo_adelete(zklock_zh, buf, stat->version,
												  leave_ready_deleted, zklock_zkio_slot_tag(idx)));
		}
		else
			zklock_req_call_failed(idx, rc, "remove the ready node of the double barrier");
	}
	zklock_req_completion_end();
}

/*
 * Completion of the delete of P/ready at the end of a leave: only now is
 * the leave done (NoNode: another member removed it first; BadVersion: it
 * changed since we looked, look again).
 */
static void
leave_ready_deleted(int rc, const void *data)
{
	int			idx = zklock_req_completion_begin(data);

	if (idx >= 0)
	{
		if (rc == ZOK || rc == ZNONODE)
			leave_done(idx);
		else if (rc == ZBADVERSION)
			leave_finish(idx);
		else
			zklock_req_call_failed(idx, rc, "remove the ready node of the double barrier");
	}
	zklock_req_completion_end();
}

/*
 * All members are gone: remove P/ready, and report the leave done once
 * the server applied that delete.  The delete is also recorded in the
 * pending-delete table first (a persistent node: it outlives the session,
 * and the entry is kept on disk too), so a leave given up or failed
 * meanwhile, even across a restart of the server, still removes it and
 * the next round cannot pass with too few members.  Both the leave and
 * the entry delete only the P/ready our enter passed (its creation zxid):
 * applied late, after a later round made P/ready again, a blind delete
 * would take that round's P/ready from under it (its late members would
 * count too few and wait).  Caller holds the lock.
 */
static void
leave_finish(int idx)
{
	ZklockSlot *slot = &zklock_shared->slots[idx];
	char		buf[ZKLOCK_NODE_PATH_SIZE];

	zklock_recipe_path(buf, sizeof(buf), slot->path, NULL, ZKLOCK_READY_NODE);
	if (slot->phase != ZKP_READY)
	{
		slot->phase = ZKP_READY;
		(void) zklock_deletes_add(buf, NULL, true, zklock_shared->session_gen,
								  slot->rstate.dbarrier.ready_czxid,
								  slot->rstate.dbarrier.ready_ctime);
	}
	if (!zklock_connected ||
		zoo_aexists(zklock_zh, buf, 0, leave_ready_stat_done, zklock_zkio_slot_tag(idx)) != ZOK)
		zklock_req_park(idx, false);
	else
		zklock_reqs[idx].inflight++;
}

/*
 * Completion of the delete of our member node while leaving.  Then, as in
 * Curator: with nobody else left we are done; otherwise we wait for the
 * lowest member to go (a try gives up instead: ours is gone, the others
 * are not).
 */
static void
leave_member_deleted(int rc, const void *data)
{
	int			idx = zklock_req_completion_begin(data);

	if (idx >= 0)
	{
		ZklockSlot *slot = &zklock_shared->slots[idx];
		WorkerReq  *req = &zklock_reqs[idx];

		if (rc == ZOK || rc == ZNONODE)
		{
			char		buf[ZKLOCK_NODE_PATH_SIZE];

			slot->nodes[ZKN_MAIN].deleted = true;
			if (req->rcp.dbarrier.leave_watch[0] == '\0')
				leave_finish(idx);
			else if (slot->try_only)
				zklock_req_give_up_try(idx);
			else
			{
				snprintf(buf, sizeof(buf), "%s/%s", slot->path, req->rcp.dbarrier.leave_watch);
				(void) zklock_req_send_exists_watch(idx, buf, leave_watch_done, false);
			}
		}
		else
			zklock_req_call_failed(idx, rc, "leave the double barrier");
	}
	zklock_req_completion_end();
}

/*
 * Completion of the listing of P while leaving: Curator's leave protocol,
 * one step at a time.  Our member node is deleted by the request itself,
 * and the watch on the lowest member is set once that delete is confirmed
 * (Curator sets the watch, then deletes); a leave that is only a try
 * (zero timeout) gives up, deleting ours, where it would wait.
 */
static void
leave_children_done(int rc, const struct String_vector *strings, const void *data)
{
	int			idx = zklock_req_completion_begin(data);

	if (idx >= 0)
	{
		ZklockSlot *slot = &zklock_shared->slots[idx];

		if (rc == ZOK || rc == ZNONODE)
		{
			char	  **children;
			int			n = rc == ZOK ? strings->count : 0;
			const char *watch = NULL;
			ZklockLeaveAction action;
			char		buf[ZKLOCK_NODE_PATH_SIZE];

			children = palloc(sizeof(char *) * Max(n, 1));
			if (n > 0)
				memcpy(children, strings->data, sizeof(char *) * n);
			action = zklock_double_barrier_leave_decide(children, n,
														slot->nodes[ZKN_MAIN].deleted ? NULL : slot->nodes[ZKN_MAIN].name,
														slot->rstate.dbarrier.own_delete_sent,
														&watch);
			switch (action)
			{
				case ZKLOCK_LEAVE_DONE:
					leave_finish(idx);
					break;
				case ZKLOCK_LEAVE_ERROR_MISSING:
					zklock_req_fail(idx, ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
							  "double barrier member node of \"%s\" is missing",
							  slot->path + slot->user_path_off);
					break;
				case ZKLOCK_LEAVE_DELETE_OURS_DONE:
				case ZKLOCK_LEAVE_DELETE_OURS_WATCH_LOWEST:
					strlcpy(zklock_reqs[idx].rcp.dbarrier.leave_watch,
							action == ZKLOCK_LEAVE_DELETE_OURS_DONE ? "" : watch,
							sizeof(zklock_reqs[idx].rcp.dbarrier.leave_watch));
					zklock_zkio_node_path(slot, slot->nodes[ZKN_MAIN].name, buf, sizeof(buf));
					slot->rstate.dbarrier.own_delete_sent = true;
					zklock_req_call_sent(idx, zoo_adelete(zklock_zh, buf, -1, leave_member_deleted,
										 zklock_zkio_slot_tag(idx)));
					break;
				case ZKLOCK_LEAVE_WATCH_HIGHEST:
				case ZKLOCK_LEAVE_WATCH_LOWEST:
					if (slot->try_only)
					{
						zklock_req_give_up_try(idx);
						break;
					}
					snprintf(buf, sizeof(buf), "%s/%s", slot->path, watch);
					(void) zklock_req_send_exists_watch(idx, buf, leave_watch_done, false);
					break;
			}
			pfree(children);
		}
		else
			zklock_req_call_failed(idx, rc, "list the double barrier");
	}
	zklock_req_completion_end();
}

/*
 * List P while leaving.  Caller holds the lock.
 */
static void
leave_list(int idx)
{
	zklock_req_send_listing(idx, zklock_shared->slots[idx].path, leave_children_done,
				 false, false);
}

/*
 * A watch of an enter fired (P/ready, or a member): look at P/ready again.
 */
static void
denter_next(int idx)
{
	(void) denter_watch_ready(idx);
}

/*
 * The connection is back during an enter: create our member node again
 * (NodeExists is fine) and look at P/ready again.
 */
static void
denter_resume(int idx, bool recover)
{
	if (zklock_shared->slots[idx].nodes[ZKN_MAIN].name[0] != '\0')
		zklock_reqs[idx].rcp.dbarrier.ready_seen = false;
	denter_start(idx);
}

/*
 * The connection is back during a leave: list again, unless only the
 * delete of P/ready was left.
 */
static void
leave_resume(int idx, bool recover)
{
	if (zklock_shared->slots[idx].phase == ZKP_READY)
		leave_finish(idx);
	else
		leave_list(idx);
}

/* ---------------------------------------------------------------------
 * SQL functions (backends)
 * ---------------------------------------------------------------------
 */

PG_FUNCTION_INFO_V1(zk_double_barrier_enter);

/*
 * zk_double_barrier_enter(path, member_qty, timeout) returns boolean
 */
Datum
zk_double_barrier_enter(PG_FUNCTION_ARGS)
{
	text	   *path = zklock_path_arg(fcinfo, 0);
	int32		member_qty = zklock_count_arg(fcinfo, 1, "member_qty");
	int64		timeout_ms = zklock_timeout_arg(fcinfo, 2);
	ZklockAsk	ask;
	BackendHoldKey key;
	int			user_off;
	int			idx;
	uint32		serial;

	zklock_make_lock_key(path, ZKK_DOUBLE_BARRIER, &key, &user_off);
	zklock_backend_setup();
	if (zklock_find_hold(&key, user_off) != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_IN_USE),
				 errmsg("this session has already entered double barrier \"%s\"",
						key.path + user_off)));
	zklock_init_ask(&ask, ZKOP_DBARRIER_ENTER, ZKK_DOUBLE_BARRIER, timeout_ms, false);
	ask.args.dbarrier.member_qty = member_qty;
	/* a zero timeout is a look: in only if the quorum is there now */
	ask.try_only = (timeout_ms == 0);
	idx = zklock_claim_slot(&ask, &key, user_off, &serial);
	if (zklock_wait_for_request(idx, serial, ask.try_only ? -1 : timeout_ms,
						 key.path + user_off, NULL, NULL) != WAIT_GRANTED)
		PG_RETURN_BOOL(false);
	(void) zklock_add_granted_hold(&key, idx, serial, false);
	PG_RETURN_BOOL(true);
}

PG_FUNCTION_INFO_V1(zk_double_barrier_leave);

/*
 * zk_double_barrier_leave(path, timeout) returns boolean: Curator's leave
 * protocol on our membership; false when the timeout passed before every
 * member left (our membership is withdrawn either way).
 */
Datum
zk_double_barrier_leave(PG_FUNCTION_ARGS)
{
	text	   *path = zklock_path_arg(fcinfo, 0);
	int64		timeout_ms = zklock_timeout_arg(fcinfo, 1);
	BackendHoldKey key;
	int			user_off;
	BackendHold *ll;
	int			idx;
	uint32		serial;
	bool		posted = false;
	WaitOutcome outcome;

	zklock_make_lock_key(path, ZKK_DOUBLE_BARRIER, &key, &user_off);
	zklock_backend_setup();
	ll = hash_search(zklock_backend_holds, &key, HASH_FIND, NULL);
	if (ll == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("this session has not entered double barrier \"%s\"",
						key.path + user_off)));
	idx = ll->slot;
	serial = ll->serial;
	hash_search(zklock_backend_holds, &key, HASH_REMOVE, NULL);
	zklock_loss_watch_update();

	/* turn the membership into a leave request */
	zklock_lock_table(LW_EXCLUSIVE);
	if (zklock_shared->slots[idx].serial == serial &&
		zklock_shared->slots[idx].state == ZKS_HELD)
	{
		zklock_shared->slots[idx].op = ZKOP_DBARRIER_LEAVE;
		/* a zero timeout is a look: our node goes, we do not wait */
		zklock_shared->slots[idx].try_only = (timeout_ms == 0);
		zklock_slot_resubmit(&zklock_shared->slots[idx]);
		zklock_post(idx);
		posted = true;
	}
	LWLockRelease(zklock_shared->lock);
	if (!posted)
	{
		ereport(WARNING,
				(errmsg("double barrier membership \"%s\" was lost when the zookeeper session ended",
						key.path + user_off)));
		(void) zklock_withdraw_request(idx, serial);
		PG_RETURN_BOOL(false);
	}
	zklock_wake_worker();
	outcome = zklock_wait_for_request(idx, serial, timeout_ms == 0 ? -1 : timeout_ms,
							   key.path + user_off, NULL, NULL);
	PG_RETURN_BOOL(outcome == WAIT_DONE);
}

/*
 * The double barrier's descriptor: enter makes a member node (no
 * protection prefix), leave works on it.
 */
static const ZklockWorkerOps dbarrier_ops[] = {
	{
		.op = ZKOP_DBARRIER_ENTER,
		.start = denter_start, .next = denter_next,
		.resume = denter_resume, .flags = ZKW_PLAIN_NAMES,
	},
	{
		.op = ZKOP_DBARRIER_LEAVE,
		.start = leave_list, .next = leave_list,
		.resume = leave_resume,
		.flags = ZKW_KEEPS_NODES | ZKW_PLAIN_NAMES, .state_name = "leaving",
	},
};

static const ZklockKindInfo dbarrier_kinds[] = {
	{.kind = ZKK_DOUBLE_BARRIER, .recipe = "double_barrier", .mode = "member"},
};

const ZklockRecipe zklock_recipe_double_barrier = {
	.name = "double_barrier",
	.ops = dbarrier_ops, .nops = lengthof(dbarrier_ops),
	.kinds = dbarrier_kinds, .nkinds = lengthof(dbarrier_kinds),
};

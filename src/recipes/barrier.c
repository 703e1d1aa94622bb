/*-------------------------------------------------------------------------
 *
 * recipes/barrier.c
 *	  The barrier (DistributedBarrier): zk_barrier_set, zk_barrier_remove and
 *	  zk_barrier_wait, and the worker's steps on node P (the barrier is up
 *	  while P exists).  See doc/wire.md.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/shmem.h"
#include "recipes/recipe.h"
#include "recipes/recipe_worker.h"
#include "recipes/recipe_sql.h"
#include "utils/builtins.h"

static void barrier_remove_stat_done(int rc, const struct Stat *stat, const void *data);
static void barrier_set_done(int rc, const char *value, const void *data);
static bool barrier_guard_failed(int idx, int rc,
								 const struct String_vector *strings);
static void barrier_set_children_done(int rc, const struct String_vector *strings,
									  const void *data);
static void barrier_wait_done(int rc, const struct Stat *stat, const void *data);
static void barrier_children_done(int rc, const struct String_vector *strings,
								  const void *data);
static void barrier_wait_start(int idx);

static void barrier_remove_done(int rc, const void *data);

/* ---------------------------------------------------------------------
 * Barrier (DistributedBarrier): the barrier is up while node P exists.
 * ---------------------------------------------------------------------
 */

/*
 * Completion of the create of a barrier node.  P there already is the
 * barrier up, unless P is another recipe's (a lock's parent, say): its
 * children are listed once to tell (the path guard), which costs a round
 * trip only when the barrier was up already.
 */
static void
barrier_set_done(int rc, const char *value, const void *data)
{
	int			idx = zklock_req_completion_begin(data);

	if (idx >= 0)
	{
		if (rc == ZOK)
			zklock_req_finish(idx, ZKR_OK, 1);
		else if (rc == ZNODEEXISTS)
			zklock_req_send_listing(idx, zklock_shared->slots[idx].path,
									barrier_set_children_done, false, false);
		else if (rc == ZNONODE)
		{
			if (zklock_req_retry_with_parents(idx))
				zklock_req_start(idx);
		}
		else
			zklock_req_call_failed(idx, rc, "set the barrier");
	}
	zklock_req_completion_end();
}

/*
 * The path guard (core/recipe_guard.c) on a listing of P: another recipe's
 * nodes there fail request idx with 22023 naming them (true).  Caller
 * holds the lock.
 */
static bool
barrier_guard_failed(int idx, int rc, const struct String_vector *strings)
{
	ZklockSlot *slot = &zklock_shared->slots[idx];
	const char *held;

	if (rc != ZOK)
		return false;
	held = zklock_guard_children(ZKG_BARRIER, strings->data, strings->count, NULL);
	if (held == NULL)
		return false;
	zklock_req_fail(idx, ERRCODE_INVALID_PARAMETER_VALUE,
					"zookeeper path \"%s\" holds %s, not %s",
					slot->path + slot->user_path_off, held,
					zklock_guard_recipe_name(ZKG_BARRIER));
	return true;
}

/*
 * Completion of the listing of a P that was there when the barrier was
 * set: another recipe's nodes (core/recipe_guard.c) fail the set with
 * 22023; otherwise the barrier was up already (P gone meanwhile: set it).
 */
static void
barrier_set_children_done(int rc, const struct String_vector *strings,
						  const void *data)
{
	int			idx = zklock_req_completion_begin(data);

	if (idx >= 0 && !barrier_guard_failed(idx, rc, strings))
	{
		if (rc == ZOK)
			zklock_req_finish(idx, ZKR_OK, 0);
		else if (rc == ZNONODE)
			zklock_req_start(idx);
		else
			zklock_req_call_failed(idx, rc, "set the barrier");
	}
	zklock_req_completion_end();
}

/*
 * Completion of the exists that comes before removing a barrier: an
 * ephemeral node belongs to a client session (a lock, a lease, a member)
 * and is never a barrier; anything else is deleted at the version seen,
 * so a node replaced in between is looked at again.
 */
static void
barrier_remove_stat_done(int rc, const struct Stat *stat, const void *data)
{
	int			idx = zklock_req_completion_begin(data);

	if (idx >= 0)
	{
		ZklockSlot *slot = &zklock_shared->slots[idx];

		if (rc == ZNONODE)
			zklock_req_finish(idx, ZKR_OK, 0);
		else if (rc != ZOK)
			zklock_req_call_failed(idx, rc, "look at the barrier");
		else if (stat->ephemeralOwner != 0)
			zklock_req_fail(idx, ERRCODE_WRONG_OBJECT_TYPE,
					  "zookeeper node \"%s\" is ephemeral and not a barrier",
					  slot->path + slot->user_path_off);
		else
		{
			rc = zoo_adelete(zklock_zh, slot->path, stat->version, barrier_remove_done,
							 zklock_zkio_slot_tag(idx));
			if (rc != ZOK)
				zklock_req_park(idx, false);	/* not connected: start over later */
			else
				zklock_reqs[idx].inflight++;
		}
	}
	zklock_req_completion_end();
}

/*
 * Completion of the delete of a barrier node.
 */
static void
barrier_remove_done(int rc, const void *data)
{
	int			idx = zklock_req_completion_begin(data);

	if (idx >= 0)
	{
		if (rc == ZOK)
			zklock_req_finish(idx, ZKR_OK, 1);
		else if (rc == ZNONODE)
			zklock_req_finish(idx, ZKR_OK, 0);
		else if (rc == ZBADVERSION)
			zklock_req_start(idx); /* changed since we looked: look again */
		else if (rc == ZNOTEMPTY)
			zklock_req_fail(idx, ERRCODE_OBJECT_IN_USE,
					  "zookeeper node \"%s\" has children and is not a barrier",
					  zklock_shared->slots[idx].path + zklock_shared->slots[idx].user_path_off);
		else
			zklock_req_call_failed(idx, rc, "remove the barrier");
	}
	zklock_req_completion_end();
}

/*
 * Completion of exists+watch on a barrier node.  A barrier node with
 * children is looked at once more (the path guard): its children are
 * listed, and another recipe's nodes there (P is then a lock's parent,
 * not a barrier) fail the wait with 22023.  An uncontended wait (P
 * without children) sends nothing more.
 */
static void
barrier_wait_done(int rc, const struct Stat *stat, const void *data)
{
	int			idx = zklock_req_completion_begin(data);

	if (idx >= 0)
	{
		if (rc == ZNONODE)
			zklock_req_finish(idx, ZKR_OK, 1);
		else if (rc == ZOK && stat->numChildren > 0 &&
				 !zklock_reqs[idx].rcp.barrier.guarded)
			zklock_req_send_listing(idx, zklock_shared->slots[idx].path,
									barrier_children_done, false, false);
		else if (rc == ZOK && zklock_shared->slots[idx].try_only)
			zklock_req_finish(idx, ZKR_OK, 0);	/* a look only: still up */
		else if (rc == ZOK)
			zklock_req_set_wait(idx, ZKWS_WATCHING);
		else
			zklock_req_call_failed(idx, rc, "wait on the barrier");
	}
	zklock_req_completion_end();
}

/*
 * Completion of the listing of a barrier node with children: another
 * recipe's nodes (core/recipe_guard.c) fail the wait with 22023; gone, the
 * barrier is down; otherwise the wait starts again, its watch set anew.
 */
static void
barrier_children_done(int rc, const struct String_vector *strings,
					  const void *data)
{
	int			idx = zklock_req_completion_begin(data);

	if (idx >= 0 && !barrier_guard_failed(idx, rc, strings))
	{
		if (rc == ZNONODE)
			zklock_req_finish(idx, ZKR_OK, 1);
		else if (rc == ZOK)
		{
			zklock_reqs[idx].rcp.barrier.guarded = true;
			barrier_wait_start(idx);
		}
		else
			zklock_req_call_failed(idx, rc, "wait on the barrier");
	}
	zklock_req_completion_end();
}

/*
 * Start setting the barrier: create P (its parents as containers once a
 * create found them missing).
 */
static void
barrier_set_start(int idx)
{
	ZklockSlot *slot = &zklock_shared->slots[idx];
	WorkerReq  *req = &zklock_reqs[idx];

	if (req->need_parents)
	{
		zklock_zkio_create_containers(slot->path, false);
		req->need_parents = false;
	}
	zklock_req_call_sent(idx, zoo_acreate(zklock_zh, slot->path, slot->data, strlen(slot->data),
						 zklock_zkio_node_acl(), 0, barrier_set_done,
						 zklock_zkio_slot_tag(idx)));
}

/*
 * Start removing the barrier: look at P first (only a persistent node
 * without children is a barrier, and only the version looked at goes).
 */
static void
barrier_remove_start(int idx)
{
	zklock_req_call_sent(idx, zoo_aexists(zklock_zh, zklock_shared->slots[idx].path, 0,
						 barrier_remove_stat_done, zklock_zkio_slot_tag(idx)));
}

/*
 * Start (or go on) waiting on the barrier: exists with a watch on P; a
 * look only (zero timeout) leaves no watch behind.
 */
static void
barrier_wait_start(int idx)
{
	ZklockSlot *slot = &zklock_shared->slots[idx];
	int			rc;

	if (slot->try_only)
		rc = zoo_aexists(zklock_zh, slot->path, 0, barrier_wait_done,
						 zklock_zkio_slot_tag(idx));
	else
		rc = zoo_awexists(zklock_zh, slot->path, zklock_req_step_watcher,
						  (void *) zklock_zkio_slot_tag(idx), barrier_wait_done,
						  zklock_zkio_slot_tag(idx));
	zklock_req_call_sent(idx, rc);
}

/* ---------------------------------------------------------------------
 * SQL functions (backends)
 * ---------------------------------------------------------------------
 */

static void check_barrier_name(FunctionCallInfo fcinfo);

/*
 * A barrier is a node the user named.  Refuse, before anything reaches
 * ZooKeeper, to set or remove a node whose name is one a recipe gives its
 * own nodes (a lock, lease or member node of zklock or Curator): removing
 * one would take a lock from its holder, and setting one would put a
 * persistent node at the head of a lock's queue.
 */
static void
check_barrier_name(FunctionCallInfo fcinfo)
{
	text	   *t = zklock_path_arg(fcinfo, 0);
	char	   *path = text_to_cstring(t);
	char	   *last = strrchr(path, '/');
	const char *kind = zklock_recipe_node_kind(last ? last + 1 : path);

	if (kind != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("zookeeper path \"%s\" names a %s, not a barrier", path, kind),
				 errdetail("Barrier calls refuse nodes named like the nodes of locks, leases and double barriers."),
				 errhint("Release the lock with its own release function, or use zk_revoke() to ask its holder.")));
	pfree(path);
}

PG_FUNCTION_INFO_V1(zk_barrier_set);

/*
 * zk_barrier_set(path) returns boolean: true when this call set it.
 */
Datum
zk_barrier_set(PG_FUNCTION_ARGS)
{
	zklock_backend_setup();
	check_barrier_name(fcinfo);
	PG_RETURN_BOOL(zklock_path_request(fcinfo, ZKOP_BARRIER_SET, ZKK_NONE, -1, true, NULL) == 1);
}

PG_FUNCTION_INFO_V1(zk_barrier_remove);

/*
 * zk_barrier_remove(path) returns boolean: true when this call removed it.
 * An ephemeral node is never a barrier: the worker refuses it too.
 */
Datum
zk_barrier_remove(PG_FUNCTION_ARGS)
{
	zklock_backend_setup();
	check_barrier_name(fcinfo);
	PG_RETURN_BOOL(zklock_path_request(fcinfo, ZKOP_BARRIER_REMOVE, ZKK_NONE, -1, true, NULL) == 1);
}

PG_FUNCTION_INFO_V1(zk_barrier_wait);

/*
 * zk_barrier_wait(path, timeout) returns boolean: true once the barrier
 * is down, false when the timeout passed first.
 */
Datum
zk_barrier_wait(PG_FUNCTION_ARGS)
{
	int64		timeout_ms = zklock_timeout_arg(fcinfo, 1);
	bool		timed_out = false;
	int64		value;

	zklock_backend_setup();
	value = zklock_path_request(fcinfo, ZKOP_BARRIER_WAIT, ZKK_BARRIER, timeout_ms, false, &timed_out);
	PG_RETURN_BOOL(!timed_out && value == 1);
}

/*
 * The barrier's descriptor: three one-step requests; a waiter is a kind
 * of hold (zk_locks shows it) that takes no lock.
 */
static const ZklockWorkerOps barrier_ops[] = {
	{.op = ZKOP_BARRIER_SET, .start = barrier_set_start},
	{.op = ZKOP_BARRIER_REMOVE, .start = barrier_remove_start},
	{.op = ZKOP_BARRIER_WAIT, .start = barrier_wait_start},
};

static const ZklockKindInfo barrier_kinds[] = {
	{.kind = ZKK_BARRIER, .recipe = "barrier", .mode = "wait"},
};

const ZklockRecipe zklock_recipe_barrier = {
	.name = "barrier",
	.ops = barrier_ops, .nops = lengthof(barrier_ops),
	.kinds = barrier_kinds, .nkinds = lengthof(barrier_kinds),
};

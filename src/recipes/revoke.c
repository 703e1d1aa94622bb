/*-------------------------------------------------------------------------
 *
 * recipes/revoke.c
 *	  Revocation, the asking side (Curator's Revoker): zk_revoke writing
 *	  __REVOKE__ into every holder's node, and zk_revocation_requested.
 *	  The holder's watch is worker/revocation_watch.c.  See doc/wire.md.
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
#include "funcapi.h"

static void revoke_children_done(int rc, const struct String_vector *strings, const void *data);

static void revoke_set_done(int rc, const struct Stat *stat, const void *data);

/* ---------------------------------------------------------------------
 * Revoke: write __REVOKE__ into every holder's node.
 * ---------------------------------------------------------------------
 */

/*
 * Completion of one setData of a revocation.
 */
static void
revoke_set_done(int rc, const struct Stat *stat, const void *data)
{
	int			idx;

	LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
	idx = zklock_zkio_tag_current(data);
	if (idx >= 0)
	{
		WorkerReq  *req = &zklock_reqs[idx];

		req->inflight--;
		if (rc == ZOK)
			req->rcp.revoke.written++;
		if (zklock_req_settle_cancel(idx))
			;
		else if (req->inflight == 0)
			zklock_req_finish(idx, ZKR_OK, req->rcp.revoke.written);
	}
	LWLockRelease(zklock_shared->lock);
}

/*
 * Completion of the listing of the lock to revoke: find the holders of
 * the mutex or read/write lock and write into their nodes.
 */
static void
revoke_children_done(int rc, const struct String_vector *strings, const void *data)
{
	int			idx = zklock_req_completion_begin(data);

	if (idx >= 0)
	{
		ZklockSlot *slot = &zklock_shared->slots[idx];
		WorkerReq  *req = &zklock_reqs[idx];

		if (rc == ZNONODE)
			zklock_req_finish(idx, ZKR_OK, 0);
		else if (rc == ZOK)
		{
			char	  **children;
			int			n = 0;
			int			i;
			int			nholders = 0;
			int		   *holders;
			int			nh;
			bool		rw = false;

			/* only lock nodes take part: mutex or read/write */
			children = palloc(sizeof(char *) * Max(strings->count, 1));
			for (i = 0; i < strings->count; i++)
			{
				const char *c = strings->data[i];

				if (zklock_is_read_node(c) || zklock_is_write_node(c))
				{
					rw = true;
					children[n++] = strings->data[i];
				}
				else if (zklock_is_lock_node(c, ZKLOCK_LOCK_NAME))
					children[n++] = strings->data[i];
			}
			if (rw)
				zklock_rw_sort_children(children, n);
			else
				zklock_sort_children(children, n, ZKLOCK_LOCK_NAME);
			holders = palloc(sizeof(int) * Max(n, 1));
			nh = zklock_lock_holders(children, n, rw, holders);
			for (i = 0; i < nh; i++)
			{
				char		buf[ZKLOCK_NODE_PATH_SIZE];

				snprintf(buf, sizeof(buf), "%s/%s", slot->path, children[holders[i]]);
				if (zoo_aset(zklock_zh, buf, ZKLOCK_REVOKE_MESSAGE, strlen(ZKLOCK_REVOKE_MESSAGE), -1,
							 revoke_set_done, zklock_zkio_slot_tag(idx)) == ZOK)
				{
					req->inflight++;
					nholders++;
				}
			}
			pfree(holders);
			pfree(children);
			if (nholders == 0)
				zklock_req_finish(idx, ZKR_OK, 0);
		}
		else
			zklock_req_call_failed(idx, rc, "list the lock to revoke");
	}
	zklock_req_completion_end();
}

/*
 * Start a revocation: list P to find its holders.
 */
static void
revoke_start(int idx)
{
	zklock_req_call_sent(idx, zoo_aget_children(zklock_zh, zklock_shared->slots[idx].path, 0,
					   revoke_children_done, zklock_zkio_slot_tag(idx)));
}

/* ---------------------------------------------------------------------
 * SQL functions (backends)
 * ---------------------------------------------------------------------
 */

PG_FUNCTION_INFO_V1(zk_revoke);

/*
 * zk_revoke(path) returns integer: ask every holder of the lock at path
 * to release it, as Curator's Revoker.attemptRevoke does.
 */
Datum
zk_revoke(PG_FUNCTION_ARGS)
{
	zklock_backend_setup();
	PG_RETURN_INT32((int32) zklock_path_request(fcinfo, ZKOP_REVOKE, ZKK_NONE, -1, true, NULL));
}

PG_FUNCTION_INFO_V1(zk_revocation_requested);

/*
 * zk_revocation_requested() returns setof text: the paths of this
 * session's revocable locks that someone asked to release, each once (a
 * write holder that downgraded holds two locks on one path).
 */
Datum
zk_revocation_requested(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	HASH_SEQ_STATUS seq;
	BackendHold *ll;
	List	   *listed = NIL;

	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	zklock_backend_setup();
	hash_seq_init(&seq, zklock_backend_holds);
	while ((ll = hash_seq_search(&seq)) != NULL)
	{
		ZklockSlot *slot = &zklock_shared->slots[ll->slot];
		bool		asked;
		char		path[ZKLOCK_FULL_PATH_SIZE];

		zklock_lock_table(LW_SHARED);
		asked = slot->serial == ll->serial && slot->revoke_requested;
		strlcpy(path, slot->path + slot->user_path_off, sizeof(path));
		LWLockRelease(zklock_shared->lock);
		if (asked)
		{
			ListCell   *lc;
			bool		seen = false;

			foreach(lc, listed)
				seen = seen || strcmp((char *) lfirst(lc), path) == 0;
			if (!seen)
			{
				Datum		v = zklock_utf8_text_datum(path);
				bool		n = false;

				tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, &v, &n);
				listed = lappend(listed, pstrdup(path));
			}
		}
	}
	list_free_deep(listed);
	return (Datum) 0;
}

/* The revoker's descriptor: one request, no hold */
static const ZklockWorkerOps revoke_ops[] = {
	{.op = ZKOP_REVOKE, .start = revoke_start},
};

const ZklockRecipe zklock_recipe_revoke = {
	.name = "revoke",
	.ops = revoke_ops, .nops = lengthof(revoke_ops),
};

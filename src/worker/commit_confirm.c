/*-------------------------------------------------------------------------
 *
 * worker/commit_confirm.c
 *	  zklock.commit_confirm's request: a sync, so the answer comes through
 *	  the leader, then an exists of the held node.  Not a recipe, but run
 *	  like one: its descriptor (zklock_recipe_commit_confirm, the file's
 *	  only export) is listed in ZKLOCK_RECIPE_LIST
 *	  (common/recipe_fields.h), which recipes/registry.c indexes.
 *
 *-------------------------------------------------------------------------
 */

#include "postgres.h"

#include "zklock.h"
#include "common/shmem.h"
#include "worker/worker.h"

static void confirm_stat_done(int rc, const struct Stat *stat, const void *data);

/*
 * Completion of the sync that goes ahead of a commit confirmation's exists:
 * an answer means the leader answered, and the exists behind it (the
 * server keeps a session's requests in order) reads what the leader had
 * at that point.  A sync that fails fails the confirmation.
 */
static void
confirm_sync_done(int rc, const char *value, const void *data)
{
	int			idx = zklock_req_completion_begin(data);

	if (idx >= 0 && rc != ZOK)
		zklock_req_call_failed(idx, rc, "sync with the zookeeper leader");
	zklock_req_completion_end();
}

/*
 * Completion of a commit confirmation (zklock.commit_confirm): the held
 * node must exist and be an ephemeral node of the session we have now.
 * The answer itself also proves the session alive: it extends nothing
 * here, the backend checks the lease after it.
 */
static void
confirm_stat_done(int rc, const struct Stat *stat, const void *data)
{
	int			idx = zklock_req_completion_begin(data);

	if (idx >= 0)
	{
		const clientid_t *cid = zklock_zh ? zoo_client_id(zklock_zh) : NULL;

		if (rc == ZOK)
			zklock_req_finish(idx, ZKR_OK,
						(cid != NULL && stat->ephemeralOwner == cid->client_id) ? 1 : 0);
		else if (rc == ZNONODE)
			zklock_req_finish(idx, ZKR_OK, 0);
		else
			zklock_req_call_failed(idx, rc, "confirm the lock");
	}
	zklock_req_completion_end();
}

/*
 * Start a commit confirmation (zklock.commit_confirm): a sync, so that
 * the answer comes through the leader (a follower cut off from it would
 * answer an exists from its stale copy), then an exists of the held node,
 * whose path below P the slot's data names.
 */
static void
confirm_start(int idx)
{
	ZklockSlot *slot = &zklock_shared->slots[idx];
	char		buf[ZKLOCK_NODE_PATH_SIZE];
	int			rc;

	snprintf(buf, sizeof(buf), "%s/%s", slot->path, slot->data);
	rc = zoo_async(zklock_zh, buf, confirm_sync_done, zklock_zkio_slot_tag(idx));
	zklock_req_call_sent(idx, rc);
	if (rc != ZOK)
		return;
	zklock_req_call_sent(idx, zoo_aexists(zklock_zh, buf, 0, confirm_stat_done,
						 zklock_zkio_slot_tag(idx)));
}

/*
 * The commit confirmation's descriptor: not a recipe, but listed with
 * them (ZKLOCK_RECIPE_LIST, common/recipe_fields.h; indexed by
 * recipes/registry.c) so the request layer runs it the same way.
 */
static const ZklockWorkerOps confirm_ops[] = {
	{.op = ZKOP_CONFIRM, .start = confirm_start},
};

const ZklockRecipe zklock_recipe_commit_confirm = {
	.name = "commit_confirm",
	.ops = confirm_ops, .nops = lengthof(confirm_ops),
};

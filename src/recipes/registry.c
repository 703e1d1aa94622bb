/*-------------------------------------------------------------------------
 *
 * recipes/registry.c
 *	  The list of the recipes, and the lookups the generic layers make in
 *	  it: which worker steps run a kind of request (zklock_worker_ops),
 *	  what the backend side says of a kind of hold (zklock_kind_info), and
 *	  zk_locks' name for a running request (zklock_op_state_name).
 *
 *	  Each recipe file ends with its descriptor; adding a recipe adds one
 *	  line to ZKLOCK_RECIPE_LIST in common/recipe_fields.h (as PostgreSQL's
 *	  rmgrlist.h lists the resource managers).  The commit confirmation's
 *	  request is not a recipe but is run the same way: its descriptor is
 *	  the worker's own (worker/commit_confirm.c) and is listed there too.
 *	  A request that is no hold (kind ZKK_NONE) is described here.
 *
 *	  The lookups are on hot paths, so the descriptors are indexed once
 *	  per process, by op and by kind (zklock_registry_check, from
 *	  _PG_init, and on first use): a duplicate entry, an op no recipe runs
 *	  or a kind no recipe gives is an ERROR then.  The descriptors are
 *	  data: the generic files reach a recipe's steps through the lookups,
 *	  never by name, and this file calls nothing of ours (the bottom of
 *	  the call graph, where the old tables were its top).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/shmem.h"
#include "recipes/recipe.h"

#define ZKLOCK_RECIPE_ENTRY(name) &zklock_recipe_##name,

static const ZklockRecipe *const recipes[] = {
	ZKLOCK_RECIPE_LIST(ZKLOCK_RECIPE_ENTRY)
};

/* a request that is no hold (zk_locks' recipe "request") */
static const ZklockKindInfo request_kind = {
	.kind = ZKK_NONE, .recipe = "request", .mode = "",
};

/* the index, built once per process */
static bool indexed = false;
static const ZklockWorkerOps *op_index[ZKOP_LAST + 1];
static const ZklockKindInfo *kind_index[ZKK_LAST + 1];

/*
 * Index the descriptors by op and by kind, checking that every op has
 * exactly one entry (with a start step) and every kind one.
 */
static void
registry_index(void)
{
	int			r;
	int			i;

	memset(op_index, 0, sizeof(op_index));
	memset(kind_index, 0, sizeof(kind_index));
	kind_index[ZKK_NONE] = &request_kind;
	for (r = 0; r < lengthof(recipes); r++)
	{
		const ZklockRecipe *rc = recipes[r];

		for (i = 0; i < rc->nops; i++)
		{
			int			op = (int) rc->ops[i].op;

			if (op <= 0 || op > ZKOP_LAST || op_index[op] != NULL ||
				rc->ops[i].start == NULL)
				elog(ERROR, "zklock: recipe %s: op %d is out of range, has no start step or is run by another recipe",
					 rc->name, op);
			op_index[op] = &rc->ops[i];
		}
		for (i = 0; i < rc->nkinds; i++)
		{
			int			kind = (int) rc->kinds[i].kind;

			if (kind <= 0 || kind > ZKK_LAST || kind_index[kind] != NULL)
				elog(ERROR, "zklock: recipe %s: kind %d is out of range or given by another recipe",
					 rc->name, kind);
			kind_index[kind] = &rc->kinds[i];
		}
	}
	for (i = 1; i <= ZKOP_LAST; i++)
		if (op_index[i] == NULL)
			elog(ERROR, "zklock: no recipe runs op %d", i);
	for (i = 0; i <= ZKK_LAST; i++)
		if (kind_index[i] == NULL)
			elog(ERROR, "zklock: no recipe gives kind %d", i);
	indexed = true;
}

/*
 * Index the descriptors now (from _PG_init): a recipe list that
 * contradicts itself fails the load, not a request.
 */
void
zklock_registry_check(void)
{
	if (!indexed)
		registry_index();
}

/*
 * The worker steps of a kind of request.  Every entry has a start step;
 * one without next or resume starts again instead.
 */
const ZklockWorkerOps *
zklock_worker_ops(ZklockOp op)
{
	if (unlikely(!indexed))
		registry_index();
	if ((int) op <= 0 || (int) op > ZKOP_LAST)
		elog(ERROR, "zklock: request of unknown kind %d", (int) op);
	return op_index[op];
}

/*
 * What the backend side says of a kind of hold (ZKK_NONE's entry for a
 * kind out of range).
 */
const ZklockKindInfo *
zklock_kind_info(ZklockKind kind)
{
	if (unlikely(!indexed))
		registry_index();
	if ((int) kind < 0 || (int) kind > ZKK_LAST)
		kind = ZKK_NONE;
	return kind_index[kind];
}

/*
 * What zk_locks says of a request of this kind while it runs, or NULL when
 * the slot's own state says it.
 */
const char *
zklock_op_state_name(ZklockOp op)
{
	if (unlikely(!indexed))
		registry_index();
	if ((int) op <= 0 || (int) op > ZKOP_LAST)
		return NULL;
	return op_index[op]->state_name;
}

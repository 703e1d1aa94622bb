/*-------------------------------------------------------------------------
 *
 * recipes/mutex.c
 *	  The mutex (InterProcessMutex) and the multi-lock
 *	  (InterProcessMultiLock): their SQL functions.  The worker's steps are
 *	  the lock engine's (worker/locks/lock_engine.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/guc.h"

#include "common/shmem.h"
#include "recipes/recipe.h"
#include "recipes/recipe_worker.h"
#include "recipes/recipe_sql.h"

static text ** multi_lock_paths(FunctionCallInfo fcinfo, int *n);
static void multi_lock_undo(text **paths, int taken);

/*
 * The body of zk_mutex_acquire(path, timeout, revocable) and its _xact
 * form.
 */
static bool
mutex_acquire(FunctionCallInfo fcinfo, bool xact)
{
	ZklockAsk	ask;
	text	   *path = zklock_path_arg(fcinfo, 0);

	zklock_init_ask(&ask, ZKOP_MUTEX, ZKK_MUTEX, zklock_timeout_arg(fcinfo, 1), xact);
	ask.revocable = zklock_bool_arg(fcinfo, 2);
	return zklock_acquire_lock(&ask, path);
}

PG_FUNCTION_INFO_V1(zk_mutex_acquire);

/*
 * zk_mutex_acquire(path, timeout, revocable) returns boolean
 */
Datum
zk_mutex_acquire(PG_FUNCTION_ARGS)
{
	zklock_backend_setup();
	PG_RETURN_BOOL(mutex_acquire(fcinfo, false));
}

PG_FUNCTION_INFO_V1(zk_mutex_try_acquire);

/*
 * zk_mutex_try_acquire(path) returns boolean
 */
Datum
zk_mutex_try_acquire(PG_FUNCTION_ARGS)
{
	ZklockAsk	ask;
	text	   *path = zklock_path_arg(fcinfo, 0);

	zklock_backend_setup();
	zklock_init_ask(&ask, ZKOP_MUTEX, ZKK_MUTEX, 0, false);
	PG_RETURN_BOOL(zklock_acquire_lock(&ask, path));
}

PG_FUNCTION_INFO_V1(zk_mutex_try_acquire_xact);

/*
 * zk_mutex_try_acquire_xact(path) returns boolean
 */
Datum
zk_mutex_try_acquire_xact(PG_FUNCTION_ARGS)
{
	ZklockAsk	ask;
	text	   *path = zklock_path_arg(fcinfo, 0);

	zklock_backend_setup();
	zklock_init_ask(&ask, ZKOP_MUTEX, ZKK_MUTEX, 0, true);
	PG_RETURN_BOOL(zklock_acquire_lock(&ask, path));
}

PG_FUNCTION_INFO_V1(zk_mutex_acquire_xact);

/*
 * zk_mutex_acquire_xact(path, timeout, revocable) returns boolean
 */
Datum
zk_mutex_acquire_xact(PG_FUNCTION_ARGS)
{
	zklock_backend_setup();
	PG_RETURN_BOOL(mutex_acquire(fcinfo, true));
}

PG_FUNCTION_INFO_V1(zk_mutex_release);

/*
 * zk_mutex_release(path) returns boolean
 */
Datum
zk_mutex_release(PG_FUNCTION_ARGS)
{
	zklock_backend_setup();
	PG_RETURN_BOOL(zklock_release_lock(ZKK_MUTEX, zklock_path_arg(fcinfo, 0)));
}

/*
 * The paths of a multi-lock, checked: a one-dimensional, non-empty array
 * without NULLs or duplicates.  Returns a palloc'd array of texts.
 */
static text **
multi_lock_paths(FunctionCallInfo fcinfo, int *n)
{
	ArrayType  *arr;
	Datum	   *elems;
	bool	   *nulls;
	int			i;
	int			j;
	text	  **paths;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("array of zookeeper paths must not be null")));
	arr = PG_GETARG_ARRAYTYPE_P(0);
	if (ARR_NDIM(arr) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("array of zookeeper paths must be one-dimensional")));
	deconstruct_array(arr, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, n);
	if (*n == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("array of zookeeper paths must not be empty")));
	paths = palloc(sizeof(text *) * *n);
	for (i = 0; i < *n; i++)
	{
		BackendHoldKey ki;
		int			off;

		if (nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("zookeeper path must not be null"),
					 errdetail("Element %d of the array is null.", i + 1)));
		paths[i] = DatumGetTextPP(elems[i]);
		zklock_make_lock_key(paths[i], ZKK_MUTEX, &ki, &off);
		for (j = 0; j < i; j++)
		{
			BackendHoldKey kj;
			int			offj;

			zklock_make_lock_key(paths[j], ZKK_MUTEX, &kj, &offj);
			if (strcmp(ki.path, kj.path) == 0)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("zookeeper path \"%s\" appears twice in the multi-lock",
								ki.path + off)));
		}
	}
	return paths;
}

/*
 * Give back, in reverse order, the first taken mutexes of a multi-lock
 * that could not be completed.
 */
static void
multi_lock_undo(text **paths, int taken)
{
	while (taken > 0)
	{
		BackendHoldKey key;
		int			off;
		BackendHold *ll;

		taken--;
		zklock_make_lock_key(paths[taken], ZKK_MUTEX, &key, &off);
		ll = hash_search(zklock_backend_holds, &key, HASH_FIND, NULL);
		if (ll != NULL && ll->session_count > 0)
			zklock_drop_hold(ll, false);
	}
}

PG_FUNCTION_INFO_V1(zk_multi_lock_acquire);

/*
 * zk_multi_lock_acquire(paths text[], timeout) returns boolean: every
 * mutex in order, or none (the ones taken are released in reverse).
 */
Datum
zk_multi_lock_acquire(PG_FUNCTION_ARGS)
{
	int			n;
	text	  **paths = multi_lock_paths(fcinfo, &n);
	int64		timeout_ms = zklock_timeout_arg(fcinfo, 1);
	TimestampTz start = GetCurrentTimestamp();
	volatile int taken = 0;
	bool		ok = true;

	zklock_backend_setup();
	PG_TRY();
	{
		while (taken < n)
		{
			ZklockAsk	ask;

			zklock_init_ask(&ask, ZKOP_MUTEX, ZKK_MUTEX, zklock_remaining_ms(timeout_ms, start), false);
			if (!zklock_acquire_lock(&ask, paths[taken]))
			{
				ok = false;
				break;
			}
			taken++;
		}
	}
	PG_CATCH();
	{
		multi_lock_undo(paths, taken);
		PG_RE_THROW();
	}
	PG_END_TRY();

	if (!ok)
		multi_lock_undo(paths, taken);
	PG_RETURN_BOOL(ok);
}

PG_FUNCTION_INFO_V1(zk_multi_lock_release);

/*
 * zk_multi_lock_release(paths text[]) returns boolean: release each mutex
 * in reverse order; false when one of them was not held.
 */
Datum
zk_multi_lock_release(PG_FUNCTION_ARGS)
{
	int			n;
	text	  **paths = multi_lock_paths(fcinfo, &n);
	bool		all = true;
	int			i;

	zklock_backend_setup();
	for (i = n - 1; i >= 0; i--)
	{
		BackendHoldKey key;
		int			off;

		zklock_make_lock_key(paths[i], ZKK_MUTEX, &key, &off);
		if (!zklock_release_key(&key, off))
			all = false;
	}
	PG_RETURN_BOOL(all);
}

/* ---------------------------------------------------------------------
 * Worker: the mutex is the lock engine's own recipe
 * ---------------------------------------------------------------------
 */

/*
 * The lock engine's part of a mutex: all of it, lock- nodes under P.
 */
static void
mutex_lock_target(int idx, LockTarget *t)
{
	zklock_lk_target_own(idx, t, ZKLOCK_LOCK_NAME, false, false);
}

/*
 * The mutex's descriptor: InterProcessMutex (and the multi-lock, which
 * takes mutexes) is the lock engine alone, with the handover layer.
 */
static const ZklockWorkerOps mutex_ops[] = {
	{
		.op = ZKOP_MUTEX,
		.start = zklock_lk_create, .next = zklock_lk_list,
		.resume = zklock_lk_resume, .lock_target = mutex_lock_target,
		.lock_granted = zklock_req_grant,
		.released = zklock_layer_released, .handover = &zklock_handover_layer,
		.flags = ZKW_CACHEABLE,
	},
};

static const ZklockKindInfo mutex_kinds[] = {
	{
		.kind = ZKK_MUTEX, .recipe = "mutex", .mode = "exclusive",
		.acquire = true, .token_rank = 1, .deadlock = ZKDL_MUTEX,
	},
};

const ZklockRecipe zklock_recipe_mutex = {
	.name = "mutex",
	.ops = mutex_ops, .nops = lengthof(mutex_ops),
	.kinds = mutex_kinds, .nkinds = lengthof(mutex_kinds),
};

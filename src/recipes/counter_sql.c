/*-------------------------------------------------------------------------
 *
 * recipes/counter_sql.c
 *	  The SQL functions of the shared counters (SharedCount and
 *	  DistributedAtomicLong): arguments, the request to the worker (whose
 *	  steps are recipes/counter.c's and counter_fold.c's, the fence
 *	  recipes/counter_fence.c's), and the detail and hint of a fenced
 *	  write.
 *
 *	  zk_shared_count_get, _get_versioned, _set, _try_set
 *	  zk_atomic_long_get, _add, _compare_and_set, _set
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "funcapi.h"

#include "common/shmem.h"
#include "recipes/recipe.h"
#include "recipes/recipe_sql.h"

static int64 counter_request(FunctionCallInfo fcinfo, ZklockCounterAction action,
							 int64 a, int64 b, int32 version);
static int32 seed_arg(FunctionCallInfo fcinfo, int argno);
static void require_arg(FunctionCallInfo fcinfo, int argno, const char *name);

#define FENCE_DETAIL "The ZooKeeper session that held the lock ended: a write sent now could land after another client took the lock."
#define FENCE_HINT "Roll back the transaction; release a session-level lock and acquire it again."
#define LEAD_FENCE_DETAIL "The transaction relied on this leadership (zk_leader_xact) and it ended: a write sent now could land after another member took over."
#define LEAD_FENCE_HINT "Roll back the transaction; the next run asks zk_leader_xact again."

/*
 * Run a counter request on the path in argument 0 and return the
 * worker's result.  The path must not name a recipe's node.  A write is
 * refused at once when this transaction relied on a lock it lost (its
 * COMMIT will fail), and by the worker's fence (recipes/counter_fence.c's
 * banner), whose 40000 gets its detail and hint here.
 */
static int64
counter_request(FunctionCallInfo fcinfo, ZklockCounterAction action, int64 a,
				int64 b, int32 version)
{
	ZklockAsk	ask;
	BackendHoldKey key;
	int			user_off;
	const char *last;
	const char *kind;
	const char *lost;
	MemoryContext cxt = CurrentMemoryContext;
	int64		r = 0;
	int			lead_slot;

	zklock_make_lock_key(zklock_path_arg(fcinfo, 0), ZKK_NONE, &key, &user_off);
	last = strrchr(key.path, '/');
	kind = zklock_recipe_node_kind(last ? last + 1 : key.path);
	if (kind != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("zookeeper path \"%s\" names a %s, not a counter",
						key.path + user_off, kind)));
	zklock_init_ask(&ask, ZKOP_COUNTER, ZKK_NONE, -1, false);
	ask.args.counter.action = action;
	ask.args.counter.a = a;
	ask.args.counter.b = b;
	ask.args.counter.version = version;
	ask.args.counter.lead_slot = -1;
	if (zklock_xact_relied_state(&lead_slot, &ask.args.counter.lead_serial,
							   &ask.args.counter.lead_epoch))
		ask.args.counter.lead_slot = lead_slot;
	if (action == ZKC_COUNT_GET || action == ZKC_LONG_GET)
	{
		/*
		 * a read waits for no one: at once 08006 while the worker is down;
		 * a write waits for the connection (up to zklock.connect_timeout),
		 * and the new session's fence decides it
		 */
		ask.answer_now = true;
		return zklock_run_request(&ask, &key, user_off, 0, 0, NULL, NULL);
	}

	lost = zklock_xact_lost_lock();
	if (lost != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_TRANSACTION_ROLLBACK),
				 errmsg("zookeeper lock \"%s\" was lost: counter \"%s\" was not written",
						lost, key.path + user_off),
				 errdetail(FENCE_DETAIL), errhint(FENCE_HINT)));
	PG_TRY();
	{
		r = zklock_run_request(&ask, &key, user_off, 0, 0, NULL, NULL);
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		if (edata->sqlerrcode != ERRCODE_TRANSACTION_ROLLBACK || edata->detail != NULL)
		{
			FreeErrorData(edata);
			PG_RE_THROW();
		}
		FlushErrorState();
		if (strncmp(edata->message, "leadership", 10) == 0)
		{
			edata->detail = pstrdup(LEAD_FENCE_DETAIL);
			edata->hint = pstrdup(LEAD_FENCE_HINT);
		}
		else
		{
			edata->detail = pstrdup(FENCE_DETAIL);
			edata->hint = pstrdup(FENCE_HINT);
		}
		ReThrowError(edata);
	}
	PG_END_TRY();
	return r;
}

/*
 * The seed in argument argno: a SharedCount starts at a value >= 0.
 */
static int32
seed_arg(FunctionCallInfo fcinfo, int argno)
{
	int32		seed = PG_ARGISNULL(argno) ? 0 : PG_GETARG_INT32(argno);

	if (seed < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("seed must not be negative")));
	return seed;
}

/*
 * A non-NULL argument, or an error naming it.
 */
static void
require_arg(FunctionCallInfo fcinfo, int argno, const char *name)
{
	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be null", name)));
}

PG_FUNCTION_INFO_V1(zk_shared_count_get);

/*
 * zk_shared_count_get(path, seed) returns integer
 */
Datum
zk_shared_count_get(PG_FUNCTION_ARGS)
{
	int32		seed;
	int64		r;

	zklock_backend_setup();
	seed = seed_arg(fcinfo, 1);
	r = counter_request(fcinfo, ZKC_COUNT_GET, seed, 0, 0);
	PG_RETURN_INT32((int32) (uint32) r);
}

PG_FUNCTION_INFO_V1(zk_shared_count_get_versioned);

/*
 * zk_shared_count_get_versioned(path, seed) returns (value, version)
 */
Datum
zk_shared_count_get_versioned(PG_FUNCTION_ARGS)
{
	TupleDesc	tupdesc;
	Datum		values[2];
	bool		nulls[2] = {false, false};
	int32		seed;
	int64		r;

	zklock_backend_setup();
	seed = seed_arg(fcinfo, 1);
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "zk_shared_count_get_versioned must return a row");
	r = counter_request(fcinfo, ZKC_COUNT_GET, seed, 0, 0);
	values[0] = Int32GetDatum((int32) (uint32) r);
	values[1] = Int32GetDatum((int32) (uint32) ((uint64) r >> 32));
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(tupdesc),
													  values, nulls)));
}

PG_FUNCTION_INFO_V1(zk_shared_count_set);

/*
 * zk_shared_count_set(path, value) returns void
 */
Datum
zk_shared_count_set(PG_FUNCTION_ARGS)
{
	zklock_backend_setup();
	require_arg(fcinfo, 1, "value");
	(void) counter_request(fcinfo, ZKC_COUNT_SET, PG_GETARG_INT32(1), 0, 0);
	PG_RETURN_VOID();
}

PG_FUNCTION_INFO_V1(zk_shared_count_try_set);

/*
 * zk_shared_count_try_set(path, value, version) returns boolean
 */
Datum
zk_shared_count_try_set(PG_FUNCTION_ARGS)
{
	zklock_backend_setup();
	require_arg(fcinfo, 1, "value");
	require_arg(fcinfo, 2, "version");
	if (PG_GETARG_INT32(2) < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("version must not be negative")));
	PG_RETURN_BOOL(counter_request(fcinfo, ZKC_COUNT_TRY_SET, PG_GETARG_INT32(1), 0,
								   PG_GETARG_INT32(2)) == 1);
}

PG_FUNCTION_INFO_V1(zk_atomic_long_get);

/*
 * zk_atomic_long_get(path) returns bigint
 */
Datum
zk_atomic_long_get(PG_FUNCTION_ARGS)
{
	zklock_backend_setup();
	PG_RETURN_INT64(counter_request(fcinfo, ZKC_LONG_GET, 0, 0, 0));
}

PG_FUNCTION_INFO_V1(zk_atomic_long_add);

/*
 * zk_atomic_long_add(path, delta) returns bigint: the new value
 */
Datum
zk_atomic_long_add(PG_FUNCTION_ARGS)
{
	zklock_backend_setup();
	require_arg(fcinfo, 1, "delta");
	PG_RETURN_INT64(counter_request(fcinfo, ZKC_LONG_ADD, PG_GETARG_INT64(1), 0, 0));
}

PG_FUNCTION_INFO_V1(zk_atomic_long_compare_and_set);

/*
 * zk_atomic_long_compare_and_set(path, expected, new_value) returns boolean
 */
Datum
zk_atomic_long_compare_and_set(PG_FUNCTION_ARGS)
{
	zklock_backend_setup();
	require_arg(fcinfo, 1, "expected");
	require_arg(fcinfo, 2, "new_value");
	PG_RETURN_BOOL(counter_request(fcinfo, ZKC_LONG_CAS, PG_GETARG_INT64(1),
								   PG_GETARG_INT64(2), 0) == 1);
}

PG_FUNCTION_INFO_V1(zk_atomic_long_set);

/*
 * zk_atomic_long_set(path, value) returns void
 */
Datum
zk_atomic_long_set(PG_FUNCTION_ARGS)
{
	zklock_backend_setup();
	require_arg(fcinfo, 1, "value");
	(void) counter_request(fcinfo, ZKC_LONG_SET, PG_GETARG_INT64(1), 0, 0);
	PG_RETURN_VOID();
}

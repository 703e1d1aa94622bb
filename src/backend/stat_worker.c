/*-------------------------------------------------------------------------
 *
 * backend/stat_worker.c
 *	  The worker's counters shaped like PostgreSQL's cumulative statistics
 *	  views: zk_stat_worker (one row, each counter since the last reset,
 *	  and stats_reset) and zk_stat_reset(), which starts them again.
 *
 * The worker keeps each counter in its own field of ZklockShared, from
 * server start, and zk_status() shows them so.  A reset does not touch
 * them: it records their values and the time (ZklockShared.stat_base,
 * stats_reset), and zk_stat_worker shows each counter less its recorded
 * value.  So zk_status() keeps counting from server start, and a reset
 * needs nothing from the worker (it works while the worker is stalled or
 * restarting).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "funcapi.h"
#include "utils/timestamp.h"

#include "common/shmem.h"
#include "backend/backend.h"

/* the columns of zk_stat_worker(): the counters, then stats_reset */
#define STAT_NCOUNTERS	(sizeof(ZklockWorkerCounters) / sizeof(int64))
#define STAT_NCOLS		(STAT_NCOUNTERS + 1)

/*
 * Error out when there is no shared table (the library was not preloaded).
 */
static ZklockShared *
stat_shared(void)
{
	if (zklock_shared == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("zklock shared memory is not initialized")));
	return zklock_shared;
}

PG_FUNCTION_INFO_V1(zk_stat_worker);

/*
 * zk_stat_worker(): one row, the worker's counters since the last
 * zk_stat_reset() (or server start) in the order of ZklockWorkerCounters,
 * and stats_reset.  Takes the table's lock in shared mode.
 */
Datum
zk_stat_worker(PG_FUNCTION_ARGS)
{
	ZklockShared *sh = stat_shared();
	TupleDesc	tupdesc;
	ZklockWorkerCounters now;
	ZklockWorkerCounters base;
	TimestampTz reset;
	const int64 *cur = (const int64 *) &now;
	const int64 *was = (const int64 *) &base;
	Datum		values[STAT_NCOLS];
	bool		nulls[STAT_NCOLS];
	int			i;

	StaticAssertStmt(sizeof(ZklockWorkerCounters) == STAT_NCOUNTERS * sizeof(int64),
					 "ZklockWorkerCounters holds int64 counters only");
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	if (tupdesc->natts != STAT_NCOLS)
		elog(ERROR, "zk_stat_worker() has %d columns, this library knows %d",
			 tupdesc->natts, (int) STAT_NCOLS);

	zklock_lock_table(LW_SHARED);
	now = sh->counters;
	base = sh->stat_base;
	reset = sh->stats_reset;
	LWLockRelease(sh->lock);

	memset(nulls, 0, sizeof(nulls));
	for (i = 0; i < (int) STAT_NCOUNTERS; i++)
		values[i] = Int64GetDatum(cur[i] - was[i]);
	values[STAT_NCOUNTERS] = TimestampTzGetDatum(reset);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}

PG_FUNCTION_INFO_V1(zk_stat_reset);

/*
 * zk_stat_reset(): zk_stat_worker's counters start again from zero now
 * (stats_reset); zk_status() keeps counting from server start.  Who may
 * call it is the function's EXECUTE privilege (superusers, and those they
 * grant it to), as for pg_stat_reset_shared().  Takes the table's lock
 * exclusively.
 */
Datum
zk_stat_reset(PG_FUNCTION_ARGS)
{
	ZklockShared *sh = stat_shared();
	TimestampTz now = GetCurrentTimestamp();

	zklock_lock_table(LW_EXCLUSIVE);
	sh->stat_base = sh->counters;
	sh->stats_reset = now;
	LWLockRelease(sh->lock);
	PG_RETURN_VOID();
}

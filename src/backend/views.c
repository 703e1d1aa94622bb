/*-------------------------------------------------------------------------
 *
 * backend/views.c
 *	  Introspection: zk_status, zk_locks, zk_lock_token, zk_release_all.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "funcapi.h"
#include "mb/pg_wchar.h"
#include "utils/builtins.h"

#include "zklock.h"
#include "core/lease_rules.h"
#include "backend/backend.h"


PG_FUNCTION_INFO_V1(zk_lock_token);

/*
 * zk_lock_token(path) returns bigint: the creation zxid of this session's
 * node of a lock it holds at path, a fencing token that grows with every
 * new holder.
 */
Datum
zk_lock_token(PG_FUNCTION_ARGS)
{
	LocalLockKey key;
	int			user_off;
	int			kind;
	int			best_rank = 0;
	int64		best_token = 0;

	zklock_make_lock_key(zklock_path_arg(fcinfo, 0), ZKK_MUTEX, &key, &user_off);
	zklock_backend_setup();
	/* of the held kinds with a token, the lowest rank (a write before its read) */
	for (kind = ZKK_NONE; kind <= ZKK_LAST; kind++)
	{
		int			rank = zklock_kind_info(kind)->token_rank;
		LocalLock  *ll;
		int64		token;

		if (rank == 0 || (best_rank != 0 && rank > best_rank))
			continue;
		key.kind = kind;
		ll = zklock_find_hold(&key, user_off);
		if (ll == NULL)
			continue;
		zklock_lock_table(LW_SHARED);
		token = zklock_shared->slots[ll->slot].czxid;
		LWLockRelease(zklock_shared->lock);
		if (token != 0)
		{
			best_rank = rank;
			best_token = token;
		}
	}
	if (best_rank != 0)
		PG_RETURN_INT64(best_token);
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("this session holds no lock on \"%s\"", key.path + user_off),
			 errhint("A fencing token exists only for a held mutex, read/write or semaphore mutex lock.")));
	PG_RETURN_NULL();
}

PG_FUNCTION_INFO_V1(zk_status);

/*
 * zk_status(): one row about the worker's ZooKeeper session.
 */
Datum
zk_status(PG_FUNCTION_ARGS)
{
	ZklockShared *sh = zklock_shared;
	TupleDesc	tupdesc;
	Datum		values[25];
	bool		nulls[25];
	int64		counts[13];
	ZklockMonoTime now = zklock_mono_now();
	ZklockMonoTime lease_until;
	bool		lease_ok = zklock_lease_valid(now, &lease_until);
	int			server_mode;
	char		sid[32];
	char		server[128];
	ZklockConnState cs;
	bool		have_session;
	int			timeout;
	int			queued = 0;
	int			held = 0;
	int			used = 0;
	int			worker_pid;
	TimestampTz since;
	int			i;

	if (sh == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("zklock shared memory is not initialized")));
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");

	zklock_lock_table(LW_SHARED);
	cs = sh->conn_state;
	have_session = sh->have_session;
	snprintf(sid, sizeof(sid), "0x%016llx", (unsigned long long) sh->session_id);
	strlcpy(server, sh->server, sizeof(server));
	timeout = sh->negotiated_timeout;
	server_mode = sh->server_mode;
	worker_pid = sh->worker_pid;
	since = sh->state_since;
	counts[0] = sh->connected_count;
	counts[1] = sh->suspended_count;
	counts[2] = sh->expired_count;
	counts[3] = sh->locks_lost_count;
	counts[4] = sh->lease_expired_count;
	counts[5] = sh->deletes_used;
	counts[6] = sh->handover_count;
	counts[7] = sh->read_join_count;
	counts[8] = sh->listing_skip_count;
	counts[9] = sh->batches;
	counts[10] = sh->batched_deletes;
	counts[11] = sh->batches_failed;
	counts[12] = sh->batched_creates;
	for (i = 0; i < sh->nslots; i++)
	{
		ZklockSlotState st = sh->slots[i].state;

		if (st != ZKS_FREE)
			used++;
		if (zklock_give_back_pending(&sh->slots[i]))
			continue;			/* given back: neither held nor queued */
		if (st == ZKS_NEW || st == ZKS_ACTIVE)
			queued++;
		else if (st == ZKS_HELD)
			held++;
	}
	LWLockRelease(sh->lock);

	memset(nulls, 0, sizeof(nulls));
	values[0] = CStringGetTextDatum(zklock_conn_state_name(cs));
	values[1] = CStringGetTextDatum(sid);
	nulls[1] = !have_session;
	values[2] = CStringGetTextDatum(server);
	nulls[2] = (cs != ZKC_CONNECTED || server[0] == '\0');
	values[3] = Int32GetDatum(timeout);
	nulls[3] = !have_session;
	values[4] = Int32GetDatum(queued);
	values[5] = Int32GetDatum(held);
	values[6] = Int32GetDatum(worker_pid);
	nulls[6] = (worker_pid == 0);
	values[7] = TimestampTzGetDatum(since);
	nulls[7] = (since == 0);
	values[8] = Int32GetDatum(used);
	values[9] = Int64GetDatum(counts[0]);
	values[10] = Int64GetDatum(counts[1]);
	values[11] = Int64GetDatum(counts[2]);
	/* shown on the wall clock; decided on the monotonic one */
	values[12] = TimestampTzGetDatum(zklock_mono_to_timestamp(lease_until));
	nulls[12] = (lease_until == 0);
	{
		Interval   *left = palloc0(sizeof(Interval));

		left->time = lease_ok ? lease_until - now : 0;
		values[13] = IntervalPGetDatum(left);
		nulls[13] = (lease_until == 0);
	}
	values[14] = Int64GetDatum(counts[3]);
	values[15] = Int64GetDatum(counts[4]);
	values[16] = Int64GetDatum(counts[5]);
	values[17] = Int64GetDatum(counts[6]);
	values[18] = Int64GetDatum(counts[7]);
	if (cs == ZKC_CONNECTED && server_mode == ZKLOCK_SERVER_STANDALONE)
		values[19] = CStringGetTextDatum("standalone");
	else if (cs == ZKC_CONNECTED && server_mode == ZKLOCK_SERVER_ENSEMBLE)
		values[19] = CStringGetTextDatum("ensemble");
	else if (cs == ZKC_CONNECTED && server_mode == ZKLOCK_SERVER_OBSERVER)
		values[19] = CStringGetTextDatum("observer");
	else
		nulls[19] = true;
	values[20] = Int64GetDatum(counts[8]);
	values[21] = Int64GetDatum(counts[9]);
	values[22] = Int64GetDatum(counts[10]);
	values[23] = Int64GetDatum(counts[12]);
	values[24] = Int64GetDatum(counts[11]);

	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}

PG_FUNCTION_INFO_V1(zk_locks);

/*
 * zk_locks(): every lock held or waited for in this cluster.
 */
Datum
zk_locks(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	ZklockShared *sh = zklock_shared;
	ZklockSlot *copy;
	int			n = 0;
	int			i;
	bool		lease_ok;

	if (sh == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("zklock shared memory is not initialized")));
	InitMaterializedSRF(fcinfo, 0);
	lease_ok = zklock_lease_valid(zklock_mono_now(), NULL);

	/* copy under the lock, build tuples after */
	/* a table of more than ~650k slots is more than 1 GB */
	copy = palloc_extended(sizeof(ZklockSlot) * (Size) sh->nslots, MCXT_ALLOC_HUGE);
	zklock_lock_table(LW_SHARED);
	for (i = 0; i < sh->nslots; i++)
	{
		ZklockSlot *s = &sh->slots[i];

		/*
		 * Holders and waiters; withdrawn entries and requests are neither,
		 * nor is one its backend gave back (the worker has yet to act).
		 */
		if ((s->state == ZKS_NEW || s->state == ZKS_ACTIVE ||
			 s->state == ZKS_HELD || s->state == ZKS_LOST) &&
			s->kind != ZKK_NONE && !zklock_give_back_pending(s))
			memcpy(&copy[n++], s, sizeof(ZklockSlot));
	}
	LWLockRelease(sh->lock);

	for (i = 0; i < n; i++)
	{
		ZklockSlot *s = &copy[i];
		Datum		values[12];
		bool		nulls[12];
		const char *scope;
		const char *recipe;
		const char *mode;
		const char *state;

		memset(nulls, 0, sizeof(nulls));
		if (s->session_count > 0 && s->xact_count > 0)
			scope = "session+xact";
		else if (s->xact_count > 0)
			scope = "xact";
		else
			scope = "session";
		recipe = zklock_kind_info(s->kind)->recipe;
		mode = zklock_kind_info(s->kind)->mode;
		state = zklock_slot_state_name(s->state);
		/* held, but not provably any more (a stalled worker cannot say so) */
		if (s->state == ZKS_HELD && !lease_ok)
			state = zklock_slot_state_name(ZKS_LOST);
		if (zklock_op_state_name(s->op) != NULL)
			state = zklock_op_state_name(s->op);
		/* an election's member: whose it is, and whether it leads now */
		if (s->kind == ZKK_LATCH)
		{
			scope = s->args.latch.cluster ? "cluster" : "session";
			mode = (s->latch.leader && lease_ok) ? "leader" : "member";
		}

		values[0] = Int32GetDatum(s->pid);
		values[1] = CStringGetTextDatum(recipe);
		values[2] = zklock_utf8_text_datum(s->path + s->user_path_off);
		values[3] = zklock_utf8_text_datum(s->node);
		nulls[3] = (s->node[0] == '\0');
		values[4] = CStringGetTextDatum(mode);
		values[5] = CStringGetTextDatum(scope);
		values[6] = Int32GetDatum(s->session_count + s->xact_count);
		values[7] = CStringGetTextDatum(state);
		values[8] = TimestampTzGetDatum(s->since);
		values[9] = Int64GetDatum(s->czxid);
		nulls[9] = (s->state != ZKS_HELD || s->czxid == 0);
		values[10] = BoolGetDatum(s->revoke_requested);
		values[11] = zklock_utf8_text_datum(s->waits_on);
		nulls[11] = (s->state != ZKS_ACTIVE || s->waits_on[0] == '\0');
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

/*-------------------------------------------------------------------------
 *
 * backend/views.c
 *	  Introspection: zk_status, zk_locks, zk_blocking_pids, zk_lock_token.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "commands/dbcommands.h"
#include "funcapi.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"

#include "zklock.h"
#include "core/lease_rules.h"
#include "common/shmem.h"
#include "common/settings.h"
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
	BackendHoldKey key;
	int			user_off;
	int			kind;
	int			best_rank = 0;
	int64		best_token = 0;

	zklock_make_lock_key(zklock_path_arg(fcinfo, 0), ZKK_NONE, &key, &user_off);
	zklock_backend_setup();
	/* of the held kinds with a token, the lowest rank (a write before its read) */
	for (kind = ZKK_NONE; kind <= ZKK_LAST; kind++)
	{
		int			rank = zklock_kind_info(kind)->token_rank;
		BackendHold *ll;
		int64		token;

		if (rank == 0 || (best_rank != 0 && rank > best_rank))
			continue;
		key.kind = kind;
		ll = zklock_find_hold(&key, user_off);
		if (ll == NULL)
			continue;
		zklock_lock_table(LW_SHARED);
		token = zklock_shared->slots[ll->slot].czxid;
		/*
		 * its node is not kept for a later holder
		 * (worker/locks/lock_cache.c)
		 */
		zklock_shared->slots[ll->slot].token_asked = true;
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

/*
 * The columns of zk_status(), in the order of its OUT parameters
 * (zklock--0.4.sql); an earlier version's zk_status() has the first ones.
 */
typedef enum StatusColumn
{
	STATUS_COL_STATE,
	STATUS_COL_SESSION_ID,
	STATUS_COL_SERVER,
	STATUS_COL_SESSION_TIMEOUT,
	STATUS_COL_REQUESTS_QUEUED,
	STATUS_COL_LOCKS_HELD,
	STATUS_COL_WORKER_PID,
	STATUS_COL_STATE_SINCE,
	STATUS_COL_SLOTS_USED,
	STATUS_COL_CONNECTED_COUNT,
	STATUS_COL_SUSPENDED_COUNT,
	STATUS_COL_EXPIRED_COUNT,
	STATUS_COL_LEASE_UNTIL,
	STATUS_COL_LEASE_REMAINING,
	STATUS_COL_LOCKS_LOST,
	STATUS_COL_LEASES_EXPIRED,
	STATUS_COL_DELETES_PENDING,
	STATUS_COL_HANDOVERS,
	STATUS_COL_READ_JOINS,
	STATUS_COL_SERVER_MODE,
	STATUS_COL_LISTINGS_SKIPPED,
	STATUS_COL_BATCHES,
	STATUS_COL_BATCHED_DELETES,
	STATUS_COL_BATCHED_CREATES,
	STATUS_COL_BATCHES_FAILED,
	STATUS_COL_TLS,
	STATUS_COL_SASL_IDENTITY,
	STATUS_COL_CONNECTION_FAILURE,
	STATUS_COL_TLS_CERT_EXPIRES,
	STATUS_COL_TLS_SERVER_CERT_EXPIRES,
	STATUS_COL_TLS_WARNING,
	STATUS_COL_SESSION_TIMEOUT_ASKED,
	STATUS_COL_PENDING,
	STATUS_NCOLS
} StatusColumn;

/* What zk_status() reads of the shared table, under its lock */
typedef struct StatusSnapshot
{
	ZklockConnState cs;
	bool		have_session;
	int64		session_id;
	char		server[128];
	int			timeout;
	int			timeout_asked;
	int			server_mode;
	int			worker_pid;
	TimestampTz since;
	ZklockWorkerCounters counters;
	int64		deletes_pending;
	bool		tls;
	char		sasl_identity[256];
	char		failure[ZKLOCK_CONN_FAILURE_LEN];
	TimestampTz tls_cert_expires;
	TimestampTz tls_server_cert_expires;
	char		tls_warning[ZKLOCK_CONN_FAILURE_LEN];
	int			queued;			/* requests new or active, not
								 * memberships */
	int			held;			/* locks held */
	int			used;			/* slots not free */
} StatusSnapshot;

/*
 * Whether an ACTIVE slot is a standing membership rather than a request
 * waiting for its answer (its op's standing hook).  Caller holds the lock.
 */
static bool
slot_standing(const ZklockSlot *slot)
{
	const ZklockWorkerOps *ops = zklock_worker_ops(slot->op);

	return ops->standing != NULL && ops->standing(slot);
}

/*
 * Copy what zk_status() shows of the shared table.  Takes the table's lock
 * in shared mode.
 */
static void
status_snapshot(ZklockShared *sh, StatusSnapshot *snap)
{
	int			i;

	memset(snap, 0, sizeof(*snap));
	zklock_lock_table(LW_SHARED);
	snap->cs = sh->conn_state;
	snap->have_session = sh->have_session;
	snap->session_id = sh->session_id;
	strlcpy(snap->server, sh->server, sizeof(snap->server));
	snap->timeout = sh->negotiated_timeout;
	snap->timeout_asked = sh->timeout_asked;
	snap->server_mode = sh->server_mode;
	snap->worker_pid = sh->worker_pid;
	snap->since = sh->state_since;
	snap->counters = sh->counters;
	snap->deletes_pending = sh->deletes_used;
	snap->tls = sh->conn_tls;
	strlcpy(snap->sasl_identity, sh->sasl_identity, sizeof(snap->sasl_identity));
	strlcpy(snap->failure, sh->conn_failure, sizeof(snap->failure));
	snap->tls_cert_expires = sh->tls_cert_expires;
	snap->tls_server_cert_expires = sh->tls_server_cert_expires;
	strlcpy(snap->tls_warning, sh->tls_warning, sizeof(snap->tls_warning));
	for (i = 0; i < sh->nslots; i++)
	{
		ZklockSlotState st = sh->slots[i].state;

		if (st != ZKS_FREE)
			snap->used++;
		if (zklock_give_back_pending(&sh->slots[i]))
			continue;			/* given back: neither held nor queued */
		/*
		 * A request waits for its answer; a leader latch's member, once its
		 * place is decided, is a standing membership (ACTIVE until it
		 * leaves), no request.
		 */
		if (st == ZKS_NEW ||
			(st == ZKS_ACTIVE && !slot_standing(&sh->slots[i])))
			snap->queued++;
		else if (st == ZKS_HELD)
			snap->held++;
	}
	LWLockRelease(sh->lock);
}

/*
 * zk_status().server_mode: what the connected server is, NULL when not
 * connected or not known.
 */
static const char *
server_mode_name(ZklockConnState cs, int server_mode)
{
	if (cs != ZKC_CONNECTED)
		return NULL;
	switch (server_mode)
	{
		case ZKLOCK_SERVER_STANDALONE:
			return "standalone";
		case ZKLOCK_SERVER_ENSEMBLE:
			return "ensemble";
		case ZKLOCK_SERVER_OBSERVER:
			return "observer";
	}
	return NULL;
}

PG_FUNCTION_INFO_V1(zk_status);
PG_FUNCTION_INFO_V1(zk_status_0_4);
PG_FUNCTION_INFO_V1(zk_status_0_5);
PG_FUNCTION_INFO_V1(zk_status_0_6);

/*
 * zk_status(): one row about the worker's ZooKeeper session.  Version
 * 0.6's SQL calls it by the symbol zk_status_0_6 (with the session timeout
 * asked for and a setting pending), 0.5's by zk_status_0_5 (with the
 * certificates' expiry and its warning), 0.4's by zk_status_0_4 (with tls,
 * sasl_identity and connection_failure), earlier versions' by zk_status
 * (the first columns only), so that a version's SQL over an older library
 * fails to find its function instead of reading columns that library
 * never fills.
 */
Datum
zk_status(PG_FUNCTION_ARGS)
{
	ZklockShared *sh = zklock_shared;
	TupleDesc	tupdesc;
	Datum		values[STATUS_NCOLS];
	bool		nulls[STATUS_NCOLS];
	ZklockMonoTime now = zklock_mono_now();
	ZklockMonoTime lease_until;
	bool		lease_ok = zklock_lease_valid(now, &lease_until);
	StatusSnapshot snap;
	char		sid[32];
	const char *mode;
	Interval   *left;

	if (sh == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("zklock shared memory is not initialized")));
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	/* the zk_status() of an earlier version has fewer columns, in order */
	if (tupdesc->natts > STATUS_NCOLS)
		elog(ERROR, "zk_status() has %d columns, this library knows %d",
			 tupdesc->natts, STATUS_NCOLS);

	status_snapshot(sh, &snap);
	snprintf(sid, sizeof(sid), "0x%016llx", (unsigned long long) snap.session_id);
	mode = server_mode_name(snap.cs, snap.server_mode);
	/* shown on the wall clock; decided on the monotonic one */
	left = palloc0(sizeof(Interval));
	left->time = lease_ok ? lease_until - now : 0;

	memset(nulls, 0, sizeof(nulls));
	values[STATUS_COL_STATE] = CStringGetTextDatum(zklock_conn_state_name(snap.cs));
	values[STATUS_COL_SESSION_ID] = CStringGetTextDatum(sid);
	nulls[STATUS_COL_SESSION_ID] = !snap.have_session;
	values[STATUS_COL_SERVER] = CStringGetTextDatum(snap.server);
	nulls[STATUS_COL_SERVER] = (snap.cs != ZKC_CONNECTED || snap.server[0] == '\0');
	values[STATUS_COL_SESSION_TIMEOUT] = Int32GetDatum(snap.timeout);
	nulls[STATUS_COL_SESSION_TIMEOUT] = !snap.have_session;
	values[STATUS_COL_REQUESTS_QUEUED] = Int32GetDatum(snap.queued);
	values[STATUS_COL_LOCKS_HELD] = Int32GetDatum(snap.held);
	values[STATUS_COL_WORKER_PID] = Int32GetDatum(snap.worker_pid);
	nulls[STATUS_COL_WORKER_PID] = (snap.worker_pid == 0);
	values[STATUS_COL_STATE_SINCE] = TimestampTzGetDatum(snap.since);
	nulls[STATUS_COL_STATE_SINCE] = (snap.since == 0);
	values[STATUS_COL_SLOTS_USED] = Int32GetDatum(snap.used);
	values[STATUS_COL_CONNECTED_COUNT] = Int64GetDatum(snap.counters.connected_count);
	values[STATUS_COL_SUSPENDED_COUNT] = Int64GetDatum(snap.counters.suspended_count);
	values[STATUS_COL_EXPIRED_COUNT] = Int64GetDatum(snap.counters.expired_count);
	values[STATUS_COL_LEASE_UNTIL] = TimestampTzGetDatum(zklock_mono_to_timestamp(lease_until));
	nulls[STATUS_COL_LEASE_UNTIL] = (lease_until == 0);
	values[STATUS_COL_LEASE_REMAINING] = IntervalPGetDatum(left);
	nulls[STATUS_COL_LEASE_REMAINING] = (lease_until == 0);
	values[STATUS_COL_LOCKS_LOST] = Int64GetDatum(snap.counters.locks_lost);
	values[STATUS_COL_LEASES_EXPIRED] = Int64GetDatum(snap.counters.leases_expired);
	values[STATUS_COL_DELETES_PENDING] = Int64GetDatum(snap.deletes_pending);
	values[STATUS_COL_HANDOVERS] = Int64GetDatum(snap.counters.handovers);
	values[STATUS_COL_READ_JOINS] = Int64GetDatum(snap.counters.read_joins);
	values[STATUS_COL_SERVER_MODE] = mode ? CStringGetTextDatum(mode) : (Datum) 0;
	nulls[STATUS_COL_SERVER_MODE] = (mode == NULL);
	values[STATUS_COL_LISTINGS_SKIPPED] = Int64GetDatum(snap.counters.listings_skipped);
	values[STATUS_COL_BATCHES] = Int64GetDatum(snap.counters.batches);
	values[STATUS_COL_BATCHED_DELETES] = Int64GetDatum(snap.counters.batched_deletes);
	values[STATUS_COL_BATCHED_CREATES] = Int64GetDatum(snap.counters.batched_creates);
	values[STATUS_COL_BATCHES_FAILED] = Int64GetDatum(snap.counters.batches_failed);
	/* TLS and SASL: of the connection made; NULL while there is none */
	values[STATUS_COL_TLS] = BoolGetDatum(snap.tls);
	nulls[STATUS_COL_TLS] = (snap.cs != ZKC_CONNECTED);
	values[STATUS_COL_SASL_IDENTITY] = CStringGetTextDatum(snap.sasl_identity);
	nulls[STATUS_COL_SASL_IDENTITY] = (snap.cs != ZKC_CONNECTED || snap.sasl_identity[0] == '\0');
	values[STATUS_COL_CONNECTION_FAILURE] = CStringGetTextDatum(snap.failure);
	nulls[STATUS_COL_CONNECTION_FAILURE] = (snap.failure[0] == '\0');
	/* the certificates of the TLS connection made; NULL while there is none */
	values[STATUS_COL_TLS_CERT_EXPIRES] = TimestampTzGetDatum(snap.tls_cert_expires);
	nulls[STATUS_COL_TLS_CERT_EXPIRES] = (snap.cs != ZKC_CONNECTED || !snap.tls ||
										  snap.tls_cert_expires == 0);
	values[STATUS_COL_TLS_SERVER_CERT_EXPIRES] = TimestampTzGetDatum(snap.tls_server_cert_expires);
	nulls[STATUS_COL_TLS_SERVER_CERT_EXPIRES] = (snap.cs != ZKC_CONNECTED || !snap.tls ||
												 snap.tls_server_cert_expires == 0);
	values[STATUS_COL_TLS_WARNING] = CStringGetTextDatum(snap.tls_warning);
	nulls[STATUS_COL_TLS_WARNING] = (snap.cs != ZKC_CONNECTED || !snap.tls ||
									 snap.tls_warning[0] == '\0');

	/*
	 * What the worker's handle asked for, and a session timeout set since
	 * then, which takes effect at its next handle (a lower one shortens
	 * the lease at once: worker/connection/lease.c).
	 */
	values[STATUS_COL_SESSION_TIMEOUT_ASKED] = Int32GetDatum(snap.timeout_asked);
	nulls[STATUS_COL_SESSION_TIMEOUT_ASKED] = (snap.timeout_asked == 0);
	if (snap.timeout_asked != 0 && snap.timeout_asked != zklock_session_timeout)
		values[STATUS_COL_PENDING] =
			CStringGetTextDatum(psprintf("zklock.session_timeout = %d ms, asked for at the next connection",
										 zklock_session_timeout));
	else
		nulls[STATUS_COL_PENDING] = true;

	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}

/*
 * zk_status_0_4(): zk_status() under the symbol version 0.4's SQL names.
 */
Datum
zk_status_0_4(PG_FUNCTION_ARGS)
{
	return zk_status(fcinfo);
}

/*
 * zk_status_0_5(): zk_status() under the symbol version 0.5's SQL names.
 */
Datum
zk_status_0_5(PG_FUNCTION_ARGS)
{
	return zk_status(fcinfo);
}

/*
 * zk_status_0_6(): zk_status() under the symbol version 0.6's SQL names.
 */
Datum
zk_status_0_6(PG_FUNCTION_ARGS)
{
	return zk_status(fcinfo);
}

PG_FUNCTION_INFO_V1(zk_locks);
PG_FUNCTION_INFO_V1(zk_locks_0_3);
PG_FUNCTION_INFO_V1(zk_locks_0_6);

/* the columns of zk_locks from 0.6 on; earlier versions' are a prefix */
#define LOCKS_NCOLS		18

/*
 * A name column of zk_locks: the name, NULL (*isnull) when the object is
 * gone.  Catalog lookups: no zklock lock held.
 */
static Datum
name_datum(const char *name, bool *isnull)
{
	NameData   *n;

	*isnull = (name == NULL);
	if (name == NULL)
		return (Datum) 0;
	n = palloc(sizeof(NameData));
	namestrcpy(n, name);
	return NameGetDatum(n);
}

/*
 * An int[] of the n pids.
 */
static Datum
pid_array(const int *pids, int n)
{
	Datum	   *elems = palloc(sizeof(Datum) * Max(n, 1));
	int			i;

	for (i = 0; i < n; i++)
		elems[i] = Int32GetDatum(pids[i]);
	return PointerGetDatum(construct_array(elems, n, INT4OID, sizeof(int32),
										   true, TYPALIGN_INT));
}

/*
 * Copy the slots of zk_locks' rows (holders and waiters, not given back)
 * into copy, which has room for every slot; returns how many.  When kept
 * is not NULL, the nodes kept with no holder go into it in the same look
 * (*nkept of them).  Takes the table's lock in shared mode.
 */
static int
copy_lock_slots(ZklockShared *sh, ZklockSlot *copy, ZklockCacheEntry *kept,
				int *nkept)
{
	int			n = 0;
	int			i;

	zklock_lock_table(LW_SHARED);
	/* nodes kept with no holder (lock caching) */
	for (i = 0; kept != NULL && i < ZKLOCK_CACHE_MAX; i++)
		if (sh->cache[i].state == ZKCE_IDLE)
			memcpy(&kept[(*nkept)++], &sh->cache[i], sizeof(ZklockCacheEntry));
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
	return n;
}

/*
 * zk_locks(): every lock held or waited for in this cluster, and every
 * node kept with no holder (state "cached", pid NULL: lock caching).
 * Version 0.6's SQL calls it by the symbol zk_locks_0_6 (18 columns: the
 * database, the role and the pids it waits behind), 0.3's by zk_locks_0_3
 * (13), 0.1's and 0.2's by zk_locks (12), so that a version's SQL over a
 * library older than it fails to find its function instead of reading
 * columns that library never fills.
 */
Datum
zk_locks(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	ZklockShared *sh = zklock_shared;
	ZklockSlot *copy;
	ZklockCacheEntry *kept;
	int		  **blockers;
	int		   *nblockers;
	int			n;
	int			nkept = 0;
	int			i;
	bool		lease_ok;

	if (sh == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("zklock shared memory is not initialized")));
	InitMaterializedSRF(fcinfo, 0);
	if (rsinfo->setDesc->natts > LOCKS_NCOLS)
		elog(ERROR, "zk_locks has %d columns, this library knows %d",
			 rsinfo->setDesc->natts, LOCKS_NCOLS);
	lease_ok = zklock_lease_valid(zklock_mono_now(), NULL);

	/* copy under the lock, build tuples after */
	/* a table of more than ~650k slots is more than 1 GB */
	copy = palloc_extended(sizeof(ZklockSlot) * (Size) sh->nslots, MCXT_ALLOC_HUGE);
	kept = palloc(sizeof(ZklockCacheEntry) * ZKLOCK_CACHE_MAX);
	n = copy_lock_slots(sh, copy, kept, &nkept);
	blockers = palloc(sizeof(int *) * Max(n, 1));
	nblockers = palloc(sizeof(int) * Max(n, 1));
	zklock_local_blockers(copy, n, blockers, nblockers);

	for (i = 0; i < n; i++)
	{
		ZklockSlot *s = &copy[i];
		Datum		values[LOCKS_NCOLS];
		bool		nulls[LOCKS_NCOLS];
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
		/* what the recipe says more (an election's member: leader or not) */
		if (zklock_kind_info(s->kind)->describe != NULL)
			zklock_kind_info(s->kind)->describe(s, lease_ok, &mode, &scope);

		values[0] = Int32GetDatum(s->pid);
		values[1] = CStringGetTextDatum(recipe);
		values[2] = zklock_utf8_text_datum(s->path + s->user_path_off);
		values[3] = zklock_utf8_text_datum(s->nodes[ZKN_MAIN].name);
		nulls[3] = (s->nodes[ZKN_MAIN].name[0] == '\0');
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
		/* from 0.3 on (a 0.2 result has 12 columns: the 13th is not read) */
		values[12] = zklock_utf8_text_datum(s->waits_for);
		nulls[12] = (s->state != ZKS_ACTIVE || s->waits_for[0] == '\0');
		/* from 0.6 on: who asked, where, and whom it waits behind here */
		values[13] = ObjectIdGetDatum(s->dbid);
		values[14] = name_datum(get_database_name(s->dbid), &nulls[14]);
		values[15] = ObjectIdGetDatum(s->roleid);
		values[16] = name_datum(GetUserNameFromId(s->roleid, true), &nulls[16]);
		values[17] = pid_array(blockers[i], nblockers[i]);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	for (i = 0; i < nkept; i++)
	{
		ZklockCacheEntry *e = &kept[i];
		Datum		values[LOCKS_NCOLS];
		bool		nulls[LOCKS_NCOLS];

		memset(nulls, 0, sizeof(nulls));
		nulls[0] = true;		/* no holder */
		values[1] = CStringGetTextDatum(zklock_kind_info(e->kind)->recipe);
		values[2] = zklock_utf8_text_datum(e->base + e->user_path_off);
		values[3] = zklock_utf8_text_datum(e->node.name);
		values[4] = CStringGetTextDatum(zklock_kind_info(e->kind)->mode);
		nulls[5] = true;		/* no scope */
		values[6] = Int32GetDatum(0);
		values[7] = CStringGetTextDatum(lease_ok ? "cached" : "lost");
		values[8] = TimestampTzGetDatum(zklock_mono_to_timestamp(e->since));
		values[9] = Int64GetDatum(e->czxid);
		nulls[9] = (e->czxid == 0);
		values[10] = BoolGetDatum(false);
		nulls[11] = true;
		nulls[12] = true;
		nulls[13] = nulls[14] = nulls[15] = nulls[16] = true;	/* nobody's */
		values[17] = pid_array(NULL, 0);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

/*
 * zk_locks_0_3(): zk_locks() under the symbol version 0.3's SQL names.
 */
Datum
zk_locks_0_3(PG_FUNCTION_ARGS)
{
	return zk_locks(fcinfo);
}

/*
 * zk_locks_0_6(): zk_locks() under the symbol version 0.6's SQL names.
 */
Datum
zk_locks_0_6(PG_FUNCTION_ARGS)
{
	return zk_locks(fcinfo);
}

PG_FUNCTION_INFO_V1(zk_blocking_pids);

/*
 * zk_blocking_pids(pid) returns int[]: the pids of the sessions of this
 * cluster that keep pid's zklock waits waiting, holding or queued ahead
 * (zklock_local_blockers), as pg_blocking_pids() does for PostgreSQL's
 * own locks; empty when pid waits for no zklock lock.
 */
Datum
zk_blocking_pids(PG_FUNCTION_ARGS)
{
	ZklockShared *sh = zklock_shared;
	int			pid = PG_GETARG_INT32(0);
	ZklockSlot *copy;
	int		  **blockers;
	int		   *nblockers;
	int		   *pids;
	int			npids = 0;
	int			n;
	int			i;
	int			j;
	int			k;

	if (sh == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("zklock shared memory is not initialized")));
	copy = palloc_extended(sizeof(ZklockSlot) * (Size) sh->nslots, MCXT_ALLOC_HUGE);
	n = copy_lock_slots(sh, copy, NULL, NULL);
	blockers = palloc(sizeof(int *) * Max(n, 1));
	nblockers = palloc(sizeof(int) * Max(n, 1));
	zklock_local_blockers(copy, n, blockers, nblockers);
	pids = palloc(sizeof(int) * Max(n, 1));
	/* a backend waits for one lock at a time; merged all the same */
	for (i = 0; i < n; i++)
		for (j = 0; copy[i].pid == pid && j < nblockers[i]; j++)
		{
			for (k = 0; k < npids && pids[k] != blockers[i][j]; k++)
				;
			if (k == npids)
				pids[npids++] = blockers[i][j];
		}
	PG_RETURN_DATUM(pid_array(pids, npids));
}

/*-------------------------------------------------------------------------
 *
 * recipes/participants.c
 *	  zk_participants: every node of a recipe at a path with its data, in
 *	  Curator's queue order; the worker lists and reads them and hands them
 *	  back through a DSM segment the backend made.
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
#include "utils/builtins.h"

static void participants_children_done(int rc, const struct String_vector *strings, const void *data);

static void forget_participants(int idx);
static void participants_deliver(int idx);
static void participants_data_done(int rc, const char *value, int value_len,
								   const struct Stat *stat, const void *data);

/*
 * Free what a participants request collected so far (all of it lives in
 * the request's memory, which zklock_req_reset also frees).
 */
static void
forget_participants(int idx)
{
	WorkerReq  *req = &zklock_reqs[idx];

	if (req->cxt != NULL)
		MemoryContextReset(req->cxt);
	req->rcp.participants.names = NULL;
	req->rcp.participants.data = NULL;
	req->rcp.participants.len = NULL;
	req->rcp.participants.n = 0;
}

/* ---------------------------------------------------------------------
 * Participants: every node of the recipe at P with its data, handed back
 * through a DSM segment the backend made.
 * ---------------------------------------------------------------------
 */

/*
 * Write the collected participants into the backend's DSM segment; if it
 * is too small, say how much is needed instead.  Caller holds the lock.
 */
static void
participants_deliver(int idx)
{
	ZklockSlot *slot = &zklock_shared->slots[idx];
	WorkerReq  *req = &zklock_reqs[idx];
	Size		need = sizeof(int32) * 2;
	dsm_segment *seg;
	char	   *p;
	int			i;

	for (i = 0; i < req->rcp.participants.n; i++)
		need += sizeof(int32) * 2 + MAXALIGN(strlen(req->rcp.participants.names[i]) + 1) +
			MAXALIGN(Max(req->rcp.participants.len[i], 0) + 1);
	if (need > slot->result_size)
	{
		slot->result_size = (uint32) need;
		zklock_req_finish(idx, ZKR_OK, -1);
		return;
	}
	seg = dsm_attach((dsm_handle) slot->result_dsm);
	if (seg == NULL)
	{
		zklock_req_finish(idx, ZKR_OK, -2);
		return;
	}
	p = dsm_segment_address(seg);
	((int32 *) p)[0] = req->rcp.participants.n;
	((int32 *) p)[1] = req->rcp.participants.kind;
	p += sizeof(int32) * 2;
	for (i = 0; i < req->rcp.participants.n; i++)
	{
		int32		nlen = strlen(req->rcp.participants.names[i]);
		int32		dlen = req->rcp.participants.len[i];

		memcpy(p, &nlen, sizeof(int32));
		memcpy(p + sizeof(int32), &dlen, sizeof(int32));
		p += sizeof(int32) * 2;
		memcpy(p, req->rcp.participants.names[i], nlen + 1);
		p += MAXALIGN(nlen + 1);
		if (dlen > 0)
			memcpy(p, req->rcp.participants.data[i], dlen);
		p[Max(dlen, 0)] = '\0';
		p += MAXALIGN(Max(dlen, 0) + 1);
	}
	dsm_detach(seg);
	zklock_req_finish(idx, ZKR_OK, req->rcp.participants.n);
}

/*
 * The context of one participant's getData: the request's tag and which
 * entry the reply fills (allocated per call, freed by its completion,
 * which the client calls exactly once, also when the handle closes).
 */
typedef struct ParticipantCall
{
	const void *tag;
	int			k;
} ParticipantCall;

/*
 * Completion of getData of one participant: fill entry k with its data.
 */
static void
participants_data_done(int rc, const char *value, int value_len,
					   const struct Stat *stat, const void *data)
{
	ParticipantCall call = *(const ParticipantCall *) data;
	int			idx;

	pfree((void *) data);
	LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
	idx = zklock_zkio_tag_current(call.tag);
	if (idx >= 0)
	{
		WorkerReq  *req = &zklock_reqs[idx];
		int			k = call.k;

		req->inflight--;
		req->rcp.participants.done++;
		if (k >= 0 && k < req->rcp.participants.n)
		{
			if (rc == ZOK && value != NULL && value_len >= 0)
			{
				req->rcp.participants.data[k] = MemoryContextAlloc(zklock_req_memory(idx), value_len + 1);
				memcpy(req->rcp.participants.data[k], value, value_len);
				req->rcp.participants.data[k][value_len] = '\0';
				req->rcp.participants.len[k] = value_len;
			}
			else
				req->rcp.participants.len[k] = -1;	/* gone meanwhile, unreadable, no data */
		}
		if (zklock_req_settle_cancel(idx))
			;
		else if (zklock_rc_retryable(rc) || zklock_req_parked(req))
		{
			/* the connection dropped: list again once it is back */
			if (!zklock_req_parked(req))
				zklock_req_park(idx, false);
		}
		else if (req->inflight == 0)
			participants_deliver(idx);
	}
	LWLockRelease(zklock_shared->lock);
}

/*
 * Completion of a participants listing: for a semaphore descend into
 * P/leases, otherwise fetch every child's data.
 */
static void
participants_children_done(int rc, const struct String_vector *strings, const void *data)
{
	int			idx = zklock_req_completion_begin(data);

	if (idx >= 0)
	{
		ZklockSlot *slot = &zklock_shared->slots[idx];
		WorkerReq  *req = &zklock_reqs[idx];

		if (rc == ZNONODE)
			participants_deliver(idx);
		else if (rc != ZOK)
			zklock_req_call_failed(idx, rc, "list the participants of");
		else if (req->rcp.participants.kind == ZKLOCK_PARTICIPANTS_LOCK &&
				 zklock_find_child(strings->data, strings->count, "leases") >= 0)
		{
			int			zrc;

			req->rcp.participants.kind = ZKLOCK_PARTICIPANTS_LEASES;
			zklock_recipe_path(req->rcp.participants.dir, sizeof(req->rcp.participants.dir), slot->path, ZKLOCK_LEASES_DIR, NULL);
			zrc = zoo_aget_children(zklock_zh, req->rcp.participants.dir, 0, participants_children_done,
									zklock_zkio_slot_tag(idx));
			zklock_req_call_sent(idx, zrc);
		}
		else
		{
			int			i;

			forget_participants(idx);	/* of a listing before a reconnect */
			req->rcp.participants.n = strings->count;
			req->rcp.participants.done = 0;
			req->rcp.participants.names = MemoryContextAllocZero(zklock_req_memory(idx), sizeof(char *) * Max(req->rcp.participants.n, 1));
			req->rcp.participants.data = MemoryContextAllocZero(zklock_req_memory(idx), sizeof(char *) * Max(req->rcp.participants.n, 1));
			req->rcp.participants.len = MemoryContextAllocZero(zklock_req_memory(idx), sizeof(int) * Max(req->rcp.participants.n, 1));
			for (i = 0; i < req->rcp.participants.n; i++)
			{
				char		buf[ZKLOCK_NODE_PATH_SIZE];

				ParticipantCall *call;

				req->rcp.participants.names[i] = MemoryContextStrdup(zklock_req_memory(idx), strings->data[i]);
				req->rcp.participants.len[i] = -1;
				snprintf(buf, sizeof(buf), "%s/%s", req->rcp.participants.dir, strings->data[i]);
				call = MemoryContextAlloc(TopMemoryContext, sizeof(ParticipantCall));
				call->tag = zklock_zkio_slot_tag(idx);
				call->k = i;
				if (zoo_aget(zklock_zh, buf, 0, participants_data_done, call) == ZOK)
					req->inflight++;
				else
				{
					pfree(call);
					req->rcp.participants.done++;
				}
			}
			if (req->inflight == 0)
				participants_deliver(idx);
		}
	}
	zklock_req_completion_end();
}

/*
 * Start collecting participants: list P (a semaphore's P/leases is listed
 * next, when P has it).
 */
static void
participants_start(int idx)
{
	ZklockSlot *slot = &zklock_shared->slots[idx];
	WorkerReq  *req = &zklock_reqs[idx];

	req->rcp.participants.kind = ZKLOCK_PARTICIPANTS_LOCK;
	strlcpy(req->rcp.participants.dir, slot->path, sizeof(req->rcp.participants.dir));
	zklock_req_call_sent(idx, zoo_aget_children(zklock_zh, slot->path, 0,
					   participants_children_done,
					   zklock_zkio_slot_tag(idx)));
}

/* ---------------------------------------------------------------------
 * SQL functions (backends)
 * ---------------------------------------------------------------------
 */

/* One node of zk_participants */
typedef struct Participant
{
	char	   *name;
	char	   *data;			/* NULL when gone or empty */
	bool		gone;			/* its data could not be read */
} Participant;

/* The order zk_participants lists the nodes in (participant_cmp's arg) */
typedef struct ParticipantOrder
{
	bool		rw;				/* read/write lock nodes: by sequence */
	bool		mixed;			/* mutex and latch nodes (a Curator mutex
								 * on a latch's path): by sequence */
	const char *lock_name;		/* else by the sequence after this name, if
								 * not NULL; else by name */
} ParticipantOrder;

static int participant_cmp(const void *a, const void *b, void *arg);
static bool *participant_holders(Participant *parts, int n, int kind, bool rw,
								 bool mutex);

/*
 * qsort_arg comparator of participants in Curator's queue order (arg is a
 * ParticipantOrder).
 */
static int
participant_cmp(const void *a, const void *b, void *arg)
{
	const ParticipantOrder *order = arg;
	const Participant *pa = a;
	const Participant *pb = b;
	const char *ka;
	const char *kb;
	int			c;

	if (order->rw)
	{
		ka = zklock_rw_sort_key(pa->name);
		kb = zklock_rw_sort_key(pb->name);
	}
	else if (order->mixed)
	{
		/* one parent numbers both kinds: each in its own Curator order */
		ka = zklock_sort_key(zklock_sort_key(pa->name, ZKLOCK_LATCH_NAME),
							 ZKLOCK_LOCK_NAME);
		kb = zklock_sort_key(zklock_sort_key(pb->name, ZKLOCK_LATCH_NAME),
							 ZKLOCK_LOCK_NAME);
	}
	else if (order->lock_name)
	{
		ka = zklock_sort_key(pa->name, order->lock_name);
		kb = zklock_sort_key(pb->name, order->lock_name);
	}
	else
	{
		ka = pa->name;
		kb = pb->name;
	}
	c = strcmp(ka, kb);
	if (c == 0 && order->rw)
	{
		/* a downgraded read node sorts at its writer's place, ahead of it */
		bool		ra = zklock_is_read_node(pa->name);
		bool		rb = zklock_is_read_node(pb->name);

		if (ra != rb)
			return ra ? -1 : 1;
	}
	return c != 0 ? c : strcmp(pa->name, pb->name);
}

/* how many times zk_participants asks for a bigger answer */
#define PARTICIPANTS_TRIES 8

/*
 * Which of the sorted participants hold the lock (zklock_lock_holders
 * decides, over the lock nodes alone): an array of n flags.
 */
static bool *
participant_holders(Participant *parts, int n, int kind, bool rw, bool mutex)
{
	bool	   *holds = palloc0(sizeof(bool) * Max(n, 1));
	char	  **names;
	int		   *map;
	int		   *h;
	int			m = 0;
	int			nh;
	int			i;

	if (kind != ZKLOCK_PARTICIPANTS_LOCK || (!rw && !mutex))
		return holds;
	names = palloc(sizeof(char *) * Max(n, 1));
	map = palloc(sizeof(int) * Max(n, 1));
	h = palloc(sizeof(int) * Max(n, 1));
	for (i = 0; i < n; i++)
	{
		bool		lock_node = rw ?
			(zklock_is_read_node(parts[i].name) ||
			 zklock_is_write_node(parts[i].name)) :
			zklock_is_lock_node(parts[i].name, ZKLOCK_LOCK_NAME);

		if (lock_node)
		{
			names[m] = parts[i].name;
			map[m++] = i;
		}
	}
	nh = zklock_lock_holders(names, m, rw, h);
	for (i = 0; i < nh; i++)
		holds[map[h[i]]] = true;
	pfree(names);
	pfree(map);
	pfree(h);
	return holds;
}

PG_FUNCTION_INFO_V1(zk_participants);

/*
 * zk_participants(path) returns table(position, node, kind, data, holds):
 * the recipe's nodes at path in queue order, with their data.
 */
Datum
zk_participants(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	BackendHoldKey key;
	int			user_off;
	uint32		size = 64 * 1024;
	int			attempt;
	bool		got = false;
	Participant *parts = NULL;
	ParticipantOrder order;
	bool	   *holds;
	int			n = 0;
	int			kind = 0;
	bool		rw = false;
	bool		mutex = false;
	bool		latch = false;
	bool		leader_seen = false;
	int			i;

	zklock_make_lock_key(zklock_path_arg(fcinfo, 0), ZKK_NONE, &key, &user_off);
	zklock_backend_setup();
	InitMaterializedSRF(fcinfo, 0);

	/*
	 * The worker says how much room the answer needs when the segment is
	 * too small; the nodes may change between two tries, so the next
	 * segment gets room to spare.  A set that outgrows every try is an
	 * error, never an empty answer.
	 */
	for (attempt = 0; attempt < PARTICIPANTS_TRIES && !got; attempt++)
	{
		ZklockAsk	ask;
		dsm_segment *seg = dsm_create(size, 0);
		uint32		needed = 0;
		int64		value;
		char	   *p;

		zklock_init_ask(&ask, ZKOP_PARTICIPANTS, ZKK_NONE, -1, false);
		ask.answer_now = true;
		value = zklock_run_request(&ask, &key, user_off, dsm_segment_handle(seg), size,
							NULL, &needed);
		if (value == -1 && needed > size)
		{
			dsm_detach(seg);
			if (needed > MaxAllocSize / 2)
				ereport(ERROR,
						(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
						 errmsg("the participants of \"%s\" need %u bytes, more than zk_participants can hand over",
								key.path + user_off, needed)));
			size = needed + needed / 2;
			continue;
		}
		if (value < 0)
			ereport(ERROR,
					(errcode(ERRCODE_INTERNAL_ERROR),
					 errmsg("zklock worker could not hand back the participants of \"%s\"",
							key.path + user_off)));
		p = dsm_segment_address(seg);
		n = ((int32 *) p)[0];
		kind = ((int32 *) p)[1];
		p += sizeof(int32) * 2;
		parts = palloc0(sizeof(Participant) * Max(n, 1));
		for (i = 0; i < n; i++)
		{
			int32		nlen;
			int32		dlen;

			memcpy(&nlen, p, sizeof(int32));
			memcpy(&dlen, p + sizeof(int32), sizeof(int32));
			p += sizeof(int32) * 2;
			parts[i].name = pstrdup(p);
			parts[i].gone = dlen < 0;
			p += MAXALIGN(nlen + 1);
			if (dlen > 0)
				parts[i].data = zklock_text_from_utf8(p, dlen);
			p += MAXALIGN(Max(dlen, 0) + 1);
		}
		dsm_detach(seg);
		got = true;
	}
	if (!got)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the participants of \"%s\" kept growing faster than they could be read",
						key.path + user_off),
				 errdetail("%d tries, the last with room for %u bytes.", PARTICIPANTS_TRIES, size),
				 errhint("Try again.")));

	for (i = 0; i < n; i++)
	{
		if (zklock_is_read_node(parts[i].name) ||
			zklock_is_write_node(parts[i].name))
			rw = true;
		else if (zklock_is_lock_node(parts[i].name, ZKLOCK_LOCK_NAME))
			mutex = true;
		else if (zklock_is_lock_node(parts[i].name, ZKLOCK_LATCH_NAME))
			latch = true;
	}
	order.rw = rw && kind == ZKLOCK_PARTICIPANTS_LOCK;
	order.mixed = mutex && latch && !rw && kind == ZKLOCK_PARTICIPANTS_LOCK;
	order.lock_name = kind == ZKLOCK_PARTICIPANTS_LEASES ? ZKLOCK_LEASE_NAME :
		(mutex && !rw) ? ZKLOCK_LOCK_NAME :
		(latch && !rw) ? ZKLOCK_LATCH_NAME : NULL;
	if (n > 1)
		qsort_arg(parts, n, sizeof(Participant), participant_cmp, &order);
	holds = participant_holders(parts, n, kind, rw, mutex);
	/* a node this cluster keeps with no holder (lock caching) holds nothing */
	if (mutex && !rw && kind == ZKLOCK_PARTICIPANTS_LOCK)
	{
		zklock_lock_table(LW_SHARED);
		for (i = 0; i < ZKLOCK_CACHE_MAX; i++)
		{
			ZklockCacheEntry *e = &zklock_shared->cache[i];
			int			j;

			if (e->state != ZKCE_IDLE || strcmp(e->base, key.path) != 0)
				continue;
			for (j = 0; j < n; j++)
				if (strcmp(parts[j].name, e->node.name) == 0)
					holds[j] = false;
		}
		LWLockRelease(zklock_shared->lock);
	}

	for (i = 0; i < n; i++)
	{
		Datum		values[5];
		bool		nulls[5];
		const char *pk;

		memset(nulls, 0, sizeof(nulls));
		nulls[4] = true;
		if (kind == ZKLOCK_PARTICIPANTS_LEASES)
			pk = "lease";
		else if (zklock_is_write_node(parts[i].name))
		{
			pk = "write";
			values[4] = BoolGetDatum(holds[i]);
			nulls[4] = false;
		}
		else if (zklock_is_read_node(parts[i].name))
		{
			pk = "read";
			values[4] = BoolGetDatum(holds[i]);
			nulls[4] = false;
		}
		else if (zklock_is_lock_node(parts[i].name, ZKLOCK_LOCK_NAME))
		{
			pk = "lock";
			values[4] = BoolGetDatum(holds[i]);
			nulls[4] = false;
		}
		else if (kind == ZKLOCK_PARTICIPANTS_LOCK &&
				 zklock_is_lock_node(parts[i].name, ZKLOCK_LATCH_NAME))
		{
			/* the leader is the first one readable (getLeader) */
			pk = "latch";
			values[4] = BoolGetDatum(!leader_seen && !parts[i].gone);
			nulls[4] = false;
			if (!parts[i].gone)
				leader_seen = true;
		}
		else if (strcmp(parts[i].name, ZKLOCK_READY_NODE) == 0)
			pk = "ready";
		else if (zklock_is_uuid(parts[i].name))
			pk = "member";
		else
			pk = "other";

		values[0] = Int32GetDatum(i + 1);
		values[1] = zklock_utf8_text_datum(parts[i].name);
		values[2] = CStringGetTextDatum(pk);
		if (parts[i].data)
			values[3] = CStringGetTextDatum(parts[i].data);
		else
			nulls[3] = true;
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

/* The participants' descriptor: one request, no hold */
static const ZklockWorkerOps participants_ops[] = {
	{.op = ZKOP_PARTICIPANTS, .start = participants_start},
};

const ZklockRecipe zklock_recipe_participants = {
	.name = "participants",
	.ops = participants_ops, .nops = lengthof(participants_ops),
};

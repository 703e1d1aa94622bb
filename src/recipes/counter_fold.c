/*-------------------------------------------------------------------------
 *
 * recipes/counter_fold.c
 *	  The adds of one DistributedAtomicLong folded into one read and one
 *	  write (the list counter_folds), for recipes/counter.c, whose first
 *	  step hands each add here.  Each add in a folded write passes the
 *	  fence and is marked as sent, as a write of its own would
 *	  (recipes/counter_fence.c).
 *
 *	  zklock_counter_fold_join(idx)   (recipes/counter.h) start add idx:
 *		join the fold of its path, or begin one with a read
 *
 *	  Adds are folded.  The adds waiting in the worker on the same path
 *	  share one getData and one setData (or create) of the sum: an add that
 *	  starts while a fold of its path has a read in flight joins it; one
 *	  that starts while the fold's write is in flight waits for the fold's
 *	  next read, sent once that write is answered.  The write is computed
 *	  from the read when its answer comes, over the adds waiting then, in
 *	  the order they joined (zklock_long_fold, core/value_codec.c): each
 *	  add's result is the value after it, as if the adds had been made one
 *	  after the other at the write's moment, which lies within each of their
 *	  calls.  An add that would overflow fails alone (22003) and the others
 *	  go on from the value before it; an add whose fence fails
 *	  (recipes/counter_fence.c) fails alone (40000) and nothing of it is
 *	  sent; an add whose backend gave up before the write was sent is left
 *	  out.  A refused write (BadVersion: a Curator peer or another writer
 *	  was first; NoNode; NodeExists for a create) reads again and computes
 *	  the whole fold again, with the adds waiting by then.  A fold lives in
 *	  the worker's memory only, one per path, for as long as a call of it is
 *	  in flight; its calls are its own (the adds' inflight counts stay 0).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "zklock.h"
#include "core/value_codec.h"
#include "common/shmem.h"
#include "recipes/recipe.h"
#include "recipes/recipe_worker.h"
#include "recipes/counter.h"

#include "utils/memutils.h"

/*
 * An add waiting in a fold: its slot, the serial it joined with, and
 * whether its add is in the fold's write in flight.  It is the fold's
 * while its WorkerReq still has that serial and points to the fold
 * (rcp.counter.fold): an add that ended, was withdrawn or started again
 * is left behind, and passed over when the fold's answer comes.
 */
typedef struct FoldMember
{
	int			idx;
	uint32		serial;
	bool		in_write;
} FoldMember;

/*
 * The adds folded on one counter path (see the banner), with the one
 * read or write of theirs in flight.  Its arrays have room for every
 * slot; members holds the adds in the order they joined.
 */
typedef struct CounterFold
{
	struct CounterFold *next;	/* in counter_folds */
	bool		listed;			/* in counter_folds: adds join it */
	char		path[ZKLOCK_FULL_PATH_SIZE];	/* the counter's node */
	int			inflight;		/* its calls whose completion is due */
	int			retries;		/* writes refused by BadVersion in a row */
	int			nonode_retries; /* creates that found a parent missing */
	bool		need_parents;	/* create the parents before the node */
	bool		guarded;		/* P's children were looked at */
	int			nmembers;
	FoldMember *members;
	int64	   *deltas;			/* fold_write's work arrays */
	int64	   *results;
	bool	   *applied;
} CounterFold;

/* the folds with a call in flight, one per path at most */
static CounterFold *counter_folds = NULL;

static void fold_children_done(int rc, const struct String_vector *strings,
							   const void *data);
static bool fold_member_current(const CounterFold *f, const FoldMember *m);
static void fold_settle(CounterFold *f);
static int	fold_disband(CounterFold *f, int *ids);
static void fold_end(CounterFold *f);
static bool fold_completion_begin(CounterFold *f);
static void fold_park(CounterFold *f);
static void fold_read(CounterFold *f, bool sync);
static void fold_write(CounterFold *f, int version, int64 cur);
static void fold_write_done(CounterFold *f, int rc, bool create);
static void fold_sync_done(int rc, const char *value, const void *data);
static void fold_data_done(int rc, const char *value, int value_len,
						   const struct Stat *stat, const void *data);
static void fold_set_done(int rc, const struct Stat *stat, const void *data);
static void fold_create_done(int rc, const char *value, const void *data);

/* ---------------------------------------------------------------------
 * Adds folded into one read and one write (see the banner)
 * ---------------------------------------------------------------------
 */

/*
 * Start add idx: join the fold of its path, or begin one with a read.
 * An add joining while the fold's read is in flight is in the write
 * computed from it; one joining while its write is in flight waits for
 * the next read.  An add started again (resumed) leaves any fold it was
 * in.  Caller holds the lock.
 */
void
zklock_counter_fold_join(int idx)
{
	ZklockShared *sh = zklock_shared;
	ZklockSlot *slot = &sh->slots[idx];
	WorkerReq  *req = &zklock_reqs[idx];
	CounterFold *f;
	FoldMember *m = NULL;
	bool		fresh = false;
	int			i;

	for (f = counter_folds; f != NULL; f = f->next)
		if (strcmp(f->path, slot->path) == 0)
			break;
	if (f == NULL)
	{
		f = MemoryContextAllocZero(TopMemoryContext, sizeof(CounterFold));
		f->members = MemoryContextAlloc(TopMemoryContext,
										sizeof(FoldMember) * sh->nslots);
		f->deltas = MemoryContextAlloc(TopMemoryContext, sizeof(int64) * sh->nslots);
		f->results = MemoryContextAlloc(TopMemoryContext, sizeof(int64) * sh->nslots);
		f->applied = MemoryContextAlloc(TopMemoryContext, sizeof(bool) * sh->nslots);
		strlcpy(f->path, slot->path, sizeof(f->path));
		f->next = counter_folds;
		f->listed = true;
		counter_folds = f;
		fresh = true;
	}
	/* the same request again keeps its place; room made by dropping leavers */
	for (i = 0; i < f->nmembers && m == NULL; i++)
		if (f->members[i].idx == idx && f->members[i].serial == req->serial)
			m = &f->members[i];
	if (m == NULL)
	{
		if (f->nmembers >= sh->nslots)
			fold_settle(f);
		Assert(f->nmembers < sh->nslots);
		m = &f->members[f->nmembers++];
		m->idx = idx;
		m->serial = req->serial;
	}
	m->in_write = false;
	req->rcp.counter.fold = f;
	if (fresh)
		fold_read(f, false);
}

/*
 * Is m still an add of fold f (see FoldMember)?  Caller holds the lock.
 */
static bool
fold_member_current(const CounterFold *f, const FoldMember *m)
{
	return zklock_reqs[m->idx].serial == m->serial &&
		zklock_shared->slots[m->idx].serial == m->serial &&
		zklock_reqs[m->idx].rcp.counter.fold == f;
}

/*
 * Keep only the members of f that are still its own, in order: drop those
 * that left, withdraw those whose backend gave up meanwhile
 * (zklock_req_settle_cancel), and let go those parked meanwhile (the sweep of
 * a lost session: they start again when resumed) unless their write is
 * in flight, whose answer is theirs.  Caller holds the lock.
 */
static void
fold_settle(CounterFold *f)
{
	int			n = 0;
	int			i;

	for (i = 0; i < f->nmembers; i++)
	{
		FoldMember	m = f->members[i];

		if (!fold_member_current(f, &m) || zklock_req_settle_cancel(m.idx))
			continue;
		if (!m.in_write && zklock_req_parked(&zklock_reqs[m.idx]))
		{
			zklock_reqs[m.idx].rcp.counter.fold = NULL;
			continue;
		}
		f->members[n++] = m;
	}
	f->nmembers = n;
}

/*
 * End fold f and hand back its members: their slots into ids (room for
 * nslots), in order; each is on its own again, with no call in flight.
 * Returns how many.  Caller holds the lock.
 */
static int
fold_disband(CounterFold *f, int *ids)
{
	int			n = 0;
	int			i;

	for (i = 0; i < f->nmembers; i++)
	{
		if (!fold_member_current(f, &f->members[i]))
			continue;
		zklock_reqs[f->members[i].idx].rcp.counter.fold = NULL;
		ids[n++] = f->members[i].idx;
	}
	f->nmembers = 0;
	fold_end(f);
	return n;
}

/*
 * Take fold f off the list (an add of its path starts a new one) and free
 * it once none of its calls is in flight (else its last completion does,
 * fold_completion_begin).  Members still pointing to it are let go.  Caller holds the
 * lock.
 */
static void
fold_end(CounterFold *f)
{
	CounterFold **p;
	int			i;

	for (i = 0; i < f->nmembers; i++)
		if (fold_member_current(f, &f->members[i]))
			zklock_reqs[f->members[i].idx].rcp.counter.fold = NULL;
	f->nmembers = 0;
	if (f->listed)
	{
		for (p = &counter_folds; *p != NULL; p = &(*p)->next)
			if (*p == f)
			{
				*p = f->next;
				break;
			}
		f->listed = false;
	}
	if (f->inflight == 0)
	{
		pfree(f->members);
		pfree(f->deltas);
		pfree(f->results);
		pfree(f->applied);
		pfree(f);
	}
}

/*
 * Common start of a completion of fold f, as zklock_req_completion_begin is
 * for a request: take the lock and count the call in.  When the fold
 * ended meanwhile, free it if that was its last call and return false;
 * else settle its members (fold_settle) and return true.  The caller
 * ends with zklock_req_completion_end either way.
 */
static bool
fold_completion_begin(CounterFold *f)
{
	LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
	f->inflight--;
	if (!f->listed)
	{
		fold_end(f);
		return false;
	}
	fold_settle(f);
	return true;
}

/*
 * The connection is not there: park every add of fold f (each starts
 * again when it is back) and end the fold.  Caller holds the lock.
 */
static void
fold_park(CounterFold *f)
{
	int		   *ids = palloc(sizeof(int) * zklock_shared->nslots);
	int			n = fold_disband(f, ids);
	int			i;

	for (i = 0; i < n; i++)
		zklock_req_park(ids[i], false);
	pfree(ids);
}

/*
 * getData of fold f's path (behind a sync through the leader with sync):
 * the adds waiting when its answer comes are folded into the write
 * computed from it.  Caller holds the lock.
 */
static void
fold_read(CounterFold *f, bool sync)
{
	if (!zklock_connected)
	{
		fold_park(f);
		return;
	}
	if (sync)
	{
		if (zoo_async(zklock_zh, f->path, fold_sync_done, f) != ZOK)
		{
			fold_park(f);
			return;
		}
		f->inflight++;
	}
	if (zoo_aget(zklock_zh, f->path, 0, fold_data_done, f) != ZOK)
	{
		fold_park(f);
		return;
	}
	f->inflight++;
}

/*
 * Fold the waiting adds of f into one write of the counter read at cur
 * with version (-1: the node is missing, create it): each add's fence
 * first (a fenced add fails alone, 40000), then the results
 * (zklock_long_fold: an add that would overflow fails alone, 22003).
 * Every add in the write is marked in its slot as sent before it leaves
 * (recipes/counter_fence.c's banner).  Caller holds the lock.
 */
static void
fold_write(CounterFold *f, int version, int64 cur)
{
	ZklockSlot *slots = zklock_shared->slots;
	unsigned char buf[8];
	int64		sum;
	int			n = 0;
	int			k = 0;
	int			rc;
	int			i;

	for (i = 0; i < f->nmembers; i++)
	{
		FoldMember	m = f->members[i];

		if (zklock_counter_write_fenced(m.idx))
			continue;
		f->deltas[n] = slots[m.idx].args.counter.a;
		f->members[n++] = m;
	}
	(void) zklock_long_fold(cur, f->deltas, n, f->results, f->applied, &sum);
	for (i = 0; i < n; i++)
	{
		FoldMember	m = f->members[i];

		if (!f->applied[i])
		{
			zklock_req_fail(m.idx, ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE,
							"bigint out of range");
			continue;
		}
		m.in_write = true;
		zklock_reqs[m.idx].rcp.counter.pending = f->results[i];
		slots[m.idx].rstate.counter.write_sent = true;
		f->members[k++] = m;
	}
	f->nmembers = k;
	if (k == 0)
	{
		fold_end(f);
		return;
	}
	zklock_long_encode(sum, buf);
	if (version < 0)
	{
		if (f->need_parents)
		{
			zklock_zkio_create_containers(f->path, false);
			f->need_parents = false;
		}
		rc = zoo_acreate(zklock_zh, f->path, (const char *) buf, 8,
						 zklock_zkio_node_acl(), 0, fold_create_done, f);
	}
	else
		rc = zoo_aset(zklock_zh, f->path, (const char *) buf, 8, version,
					  fold_set_done, f);
	if (rc != ZOK)
	{
		/* the client did not take it: nothing left */
		for (i = 0; i < k; i++)
		{
			slots[f->members[i].idx].rstate.counter.write_sent = false;
			f->members[i].in_write = false;
		}
		fold_park(f);
		return;
	}
	f->inflight++;
	elog(DEBUG2, "zklock: counter \"%s\": %d add(s) folded into one %s at version %d",
		 f->path, k, version < 0 ? "create" : "setData", version);
}

/*
 * Completion of the sync ahead of a fold's read: the getData behind it
 * answers for both.
 */
static void
fold_sync_done(int rc, const char *value, const void *data)
{
	(void) fold_completion_begin((CounterFold *) data);
	zklock_req_completion_end();
}

/*
 * Completion of a fold's getData of P: fold the adds waiting now into one
 * write at the version read (a create from 0 when P is missing), or hand
 * each add the failure of the read.
 */
static void
fold_data_done(int rc, const char *value, int value_len,
			   const struct Stat *stat, const void *data)
{
	CounterFold *f = (CounterFold *) data;
	int		   *ids;
	int			n;
	int			i;
	int64		cur = 0;
	bool		is_long;

	if (!fold_completion_begin(f))
	{
		zklock_req_completion_end();
		return;
	}
	is_long = (rc == ZOK && zklock_long_decode(value, value_len, &cur));
	if (f->nmembers == 0)
		fold_end(f);
	else if (rc == ZNONODE)
		fold_write(f, -1, 0);	/* missing: created with the sum */
	else if (rc == ZOK && stat->ephemeralOwner == 0 && stat->numChildren > 0 &&
			 !f->guarded)
	{
		/* the path guard (zklock_counter_guard): whose nodes are below P? */
		if (!zklock_connected ||
			zoo_aget_children(zklock_zh, f->path, 0, fold_children_done,
							  f) != ZOK)
			fold_park(f);
		else
			f->inflight++;
	}
	else if (rc == ZOK && stat->ephemeralOwner == 0 && is_long)
		fold_write(f, stat->version, cur);
	else
	{
		ids = palloc(sizeof(int) * zklock_shared->nslots);
		n = fold_disband(f, ids);
		for (i = 0; i < n; i++)
		{
			ZklockSlot *slot = &zklock_shared->slots[ids[i]];

			if (rc != ZOK)
				zklock_req_call_failed(ids[i], rc, "read the counter");
			else if (stat->ephemeralOwner != 0)
				zklock_req_fail(ids[i], ERRCODE_WRONG_OBJECT_TYPE,
								"zookeeper node \"%s\" is ephemeral and not a counter",
								slot->path + slot->user_path_off);
			else
				zklock_req_fail(ids[i], ERRCODE_INVALID_BINARY_REPRESENTATION,
								"zookeeper node \"%s\" holds %d bytes, not a DistributedAtomicLong (8 bytes)",
								slot->path + slot->user_path_off, Max(value_len, 0));
		}
		pfree(ids);
	}
	zklock_req_completion_end();
}

/*
 * Completion of a fold's listing of P (zklock_counter_guard): another recipe's
 * nodes fail each add with 22023; otherwise the fold reads again.
 */
static void
fold_children_done(int rc, const struct String_vector *strings,
				   const void *data)
{
	CounterFold *f = (CounterFold *) data;
	const char *held = zklock_counter_guard(rc, strings);
	int		   *ids;
	int			n;
	int			i;

	if (!fold_completion_begin(f))
	{
		zklock_req_completion_end();
		return;
	}
	if (f->nmembers == 0)
		fold_end(f);
	else if (held == NULL && (rc == ZOK || rc == ZNONODE))
	{
		f->guarded = true;
		fold_read(f, false);
	}
	else
	{
		ids = palloc(sizeof(int) * zklock_shared->nslots);
		n = fold_disband(f, ids);
		for (i = 0; i < n; i++)
		{
			ZklockSlot *slot = &zklock_shared->slots[ids[i]];

			if (held == NULL)
				zklock_req_call_failed(ids[i], rc, "list the counter's node");
			else
				zklock_req_fail(ids[i], ERRCODE_INVALID_PARAMETER_VALUE,
								"zookeeper path \"%s\" holds %s, not %s",
								slot->path + slot->user_path_off, held,
								zklock_guard_recipe_name(ZKG_COUNTER));
		}
		pfree(ids);
	}
	zklock_req_completion_end();
}

/*
 * The answer rc of fold f's write (a create with create) came: a success
 * ends each add in it with its own result; a refusal (BadVersion, NoNode,
 * NodeExists) clears their marks and the fold reads again, with the adds
 * that joined meanwhile; a lost answer fails each add in it with 08006
 * (zklock_counter_write_failed) and leaves the adds waiting for the next
 * read to the request layer (park, the session's sweep).  Takes the lock.
 */
static void
fold_write_done(CounterFold *f, int rc, bool create)
{
	bool		refused = (rc == ZBADVERSION || rc == ZNONODE || rc == ZNODEEXISTS);
	int			i;

	if (!fold_completion_begin(f))
	{
		zklock_req_completion_end();
		return;
	}
	for (i = 0; i < f->nmembers; i++)
	{
		FoldMember *m = &f->members[i];
		ZklockSlot *slot = &zklock_shared->slots[m->idx];

		if (!m->in_write)
			continue;
		if (rc == ZOK)
			zklock_req_finish(m->idx, ZKR_OK, zklock_reqs[m->idx].rcp.counter.pending);
		else if (refused)
		{
			/* a definite answer: not applied */
			slot->rstate.counter.write_sent = false;
			m->in_write = false;
		}
		else
			zklock_counter_write_failed(m->idx, rc,
										create ? "create the counter" :
										"write the counter");
	}
	/* those parked meanwhile, whose write was refused, start again alone */
	fold_settle(f);
	if (f->nmembers == 0)
		fold_end(f);
	else if (rc == ZOK)
	{
		f->retries = 0;
		f->nonode_retries = 0;
		fold_read(f, false);	/* the adds that joined meanwhile */
	}
	else if (rc == ZBADVERSION)
	{
		/* as optimistic again (Curator's retry), fresh every 4th time */
		fold_read(f, ++f->retries % 4 == 0);
	}
	else if (create && rc == ZNONODE)
	{
		/* a parent is missing: made as containers before the next create */
		if (++f->nonode_retries > MAX_NONODE_RETRIES)
		{
			int		   *ids = palloc(sizeof(int) * zklock_shared->nslots);
			int			n = fold_disband(f, ids);

			for (i = 0; i < n; i++)
				zklock_req_fail(ids[i], ERRCODE_EXTERNAL_ROUTINE_EXCEPTION,
								"could not create the parents of zookeeper path \"%s\"",
								zklock_shared->slots[ids[i]].path +
								zklock_shared->slots[ids[i]].user_path_off);
			pfree(ids);
		}
		else
		{
			f->need_parents = true;
			fold_read(f, true);
		}
	}
	else if (refused)
		fold_read(f, true);		/* deleted or made meanwhile: fresh */
	else if (zklock_rc_retryable(rc) || zklock_rc_session_gone(rc))
	{
		int		   *ids = palloc(sizeof(int) * zklock_shared->nslots);
		int			n = fold_disband(f, ids);

		for (i = 0; i < n; i++)
			zklock_req_call_failed(ids[i], rc, "read the counter");
		pfree(ids);
	}
	else
		fold_read(f, true);		/* the adds not in the failed write */
	zklock_req_completion_end();
}

/*
 * Completion of a fold's setData of P.
 */
static void
fold_set_done(int rc, const struct Stat *stat, const void *data)
{
	fold_write_done((CounterFold *) data, rc, false);
}

/*
 * Completion of a fold's create of P.
 */
static void
fold_create_done(int rc, const char *value, const void *data)
{
	fold_write_done((CounterFold *) data, rc, true);
}

/*-------------------------------------------------------------------------
 *
 * recipes/counter.c
 *	  Shared counters, Curator-compatible on the wire (see doc/wire.md):
 *	  SharedCount (a 4-byte int in node P) and DistributedAtomicLong (an
 *	  8-byte long in node P): the worker's steps.  Their SQL functions are
 *	  recipes/counter_sql.c.
 *
 *	  counter_start		first step of a counter request (ZKOP_COUNTER)
 *	  CounterFold		adds of one DistributedAtomicLong folded into one
 *						read and one write (the list counter_folds)
 *
 *	  A read goes through the leader first (sync, then getData behind it
 *	  on the session), so it is never older than a write acknowledged
 *	  before it; an add reads without the sync, as Curator's does (its
 *	  write at the version read fails on a stale value; every 4th retry
 *	  reads with the sync, so a lagging follower cannot keep it going).  A
 *	  write with a version (try_set, compare_and_set, add) is decided by
 *	  ZooKeeper.
 *
 *	  Adds are folded.  The adds waiting in the worker on the same path
 *	  share one getData and one setData (or create) of the sum: an add
 *	  that starts while a fold of its path has a read in flight joins it;
 *	  one that starts while the fold's write is in flight waits for the
 *	  fold's next read, sent once that write is answered.  The write is
 *	  computed from the read when its answer comes, over the adds waiting
 *	  then, in the order they joined (zklock_long_fold, core/value_codec.c):
 *	  each add's result is the value after it, as if the adds had been
 *	  made one after the other at the write's moment, which lies within
 *	  each of their calls.  An add that would overflow fails alone (22003)
 *	  and the others go on from the value before it; an add whose fence
 *	  fails (below) fails alone (40000) and nothing of it is sent; an add
 *	  whose backend gave up before the write was sent is left out.  A
 *	  refused write (BadVersion: a Curator peer or another writer was
 *	  first; NoNode; NodeExists for a create) reads again and computes the
 *	  whole fold again, with the adds waiting by then.  A fold lives in the
 *	  worker's memory only, one per path, for as long as a call of it is
 *	  in flight; its calls are its own (the adds' inflight counts stay 0).
 *
 *	  A write that left without an answer is never sent again: an add
 *	  could be applied twice, a versioned write report false (or the
 *	  fence "not written") after it was applied, a set undo a write made
 *	  since.  The call fails with 08006 saying its outcome is unknown
 *	  (Curator retries it).  That a write left is recorded in the slot
 *	  (slot->rstate.counter.write_sent) before it is sent and cleared by a
 *	  definite answer, so it holds whichever way the answer is lost: with
 *	  the connection (connection loss, the same session resumed: the
 *	  client sends nothing again by itself), with the session (an expiry,
 *	  or the lease running out: the handle closed answers ZCLOSING), or
 *	  with the worker (a restarted worker takes the slot over and finds
 *	  the flag where a request would otherwise be run from its start).  A
 *	  folded write sets the flag in the slot of every add folded into it,
 *	  so each of them fails with 08006 when its answer is lost.  The reads
 *	  before a write, and the next try of an add after a definite answer
 *	  (BadVersion, NoNode), are run again freely.  A SharedCount's create
 *	  with its seed is not in doubt: sent again, it is refused
 *	  (NodeExists) and the value read.  A backend that gives up after the
 *	  write left is not waited for: the write's outcome stands, as that of
 *	  any call cancelled after its request reached the server, and a
 *	  caller that stops waiting (zklock.connect_timeout) says it is in doubt
 *	  (backend/channel.c).
 *
 *	  Writes are fenced by the writer's locks: a backend that holds zklock
 *	  locks (slots of its own HELD or LOST) writes a counter only while
 *	  none of them is lost and all were made in the worker's current
 *	  session.  The worker decides it as it sends each setData or create,
 *	  for each add folded into it, on the session that holds the locks'
 *	  nodes: ZooKeeper runs a session's requests in order and refuses them
 *	  once it has expired, so such a write can only be applied while those
 *	  nodes exist.  Otherwise the call fails with 40000 naming the lock,
 *	  and nothing of it is written.  Reads (and a SharedCount's create
 *	  with its seed) are not fenced.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "zklock.h"
#include "recipes/recipe.h"

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
	int			nmembers;
	FoldMember *members;
	int64	   *deltas;			/* fold_write's work arrays */
	int64	   *results;
	bool	   *applied;
} CounterFold;

/* the folds with a call in flight, one per path at most */
static CounterFold *counter_folds = NULL;

static void counter_read(int idx);
static void counter_write(int idx, int version, int64 value);
static void counter_create(int idx, int64 value);
static void counter_sync_done(int rc, const char *value, const void *data);
static void counter_data_done(int rc, const char *value, int value_len,
							  const struct Stat *stat, const void *data);
static void counter_set_done(int rc, const struct Stat *stat, const void *data);
static void counter_create_done(int rc, const char *value, const void *data);
static bool counter_is_long(const ZklockSlot *slot);
static bool counter_write_in_doubt(const ZklockSlot *slot);
static void counter_fail_in_doubt(int idx, const char *why);
static void counter_write_failed(int idx, int rc, const char *what);
static bool counter_write_fenced(int idx);
static int64 counter_pack(int32 value, int32 version);
static int	counter_encode(const ZklockSlot *slot, int64 value, unsigned char *buf);
static void fold_join(int idx);
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
 * Worker steps
 * ---------------------------------------------------------------------
 */

/*
 * A DistributedAtomicLong request (8 bytes), else a SharedCount one (4).
 */
static bool
counter_is_long(const ZklockSlot *slot)
{
	return slot->args.counter.action >= ZKC_LONG_GET;
}

/*
 * value in Curator's bytes for the slot's counter (8 for a long, 4 for a
 * SharedCount) into buf; returns the length.
 */
static int
counter_encode(const ZklockSlot *slot, int64 value, unsigned char *buf)
{
	if (counter_is_long(slot))
	{
		zklock_long_encode(value, buf);
		return 8;
	}
	zklock_count_encode((int32) value, buf);
	return 4;
}

/*
 * A SharedCount's value and version in one result: version in the high
 * half, the value's bits in the low half.
 */
static int64
counter_pack(int32 value, int32 version)
{
	return (int64) (((uint64) (uint32) version << 32) | (uint64) (uint32) value);
}

/*
 * First step of a counter request, also when it is run again: resumed
 * after the connection or the session was lost, or taken over from an
 * earlier worker.  A request whose write left without an answer is not
 * run again (see the banner): it fails with 08006.  Caller holds the
 * lock.
 */
static void
counter_start(int idx)
{
	ZklockSlot *slot = &zklock_shared->slots[idx];

	if (counter_write_in_doubt(slot))
	{
		counter_fail_in_doubt(idx, "the answer was lost (worker restart, session end)");
		return;
	}
	switch (slot->args.counter.action)
	{
		case ZKC_COUNT_SET:
		case ZKC_LONG_SET:
			counter_write(idx, -1, slot->args.counter.a);
			break;
		case ZKC_COUNT_TRY_SET:
			counter_write(idx, slot->args.counter.version, slot->args.counter.a);
			break;
		case ZKC_LONG_ADD:
			/* folded with the adds waiting on its path */
			if (!counter_write_fenced(idx))
				fold_join(idx);
			break;
		case ZKC_LONG_CAS:
			/*
			 * fenced before its read too: a claim under a lost lock or
			 * leadership says so (40000) even when the value already moved
			 * and nothing would be written
			 */
			if (!counter_write_fenced(idx))
				counter_read(idx);
			break;
		default:
			counter_read(idx);
			break;
	}
}

/*
 * getData of P behind a sync through the leader on the session, so the
 * value is not older than a write acknowledged before (an add's reads
 * are its fold's: fold_read).  Caller holds the lock.
 */
static void
counter_read(int idx)
{
	ZklockSlot *slot = &zklock_shared->slots[idx];

	zklock_call_sent(idx, zoo_async(zklock_zh, slot->path, counter_sync_done,
									zklock_slot_tag(idx)));
	if (zklock_req_parked(&zklock_reqs[idx]))
		return;
	zklock_call_sent(idx, zoo_aget(zklock_zh, slot->path, 0, counter_data_done,
								   zklock_slot_tag(idx)));
}

/*
 * The fence of a write (see the banner): fail the request, and return
 * true, when the backend that asked for it holds a lock that is lost or
 * was made in another session than the worker's current one.  Checked as
 * the write is sent; give-backs the backend asked for are not holds.  A
 * SharedCount's read that creates it with its seed is not a write.  A
 * folded write checks it for each add in it.  Caller holds the lock.
 */
static bool
counter_write_fenced(int idx)
{
	ZklockShared *sh = zklock_shared;
	ZklockSlot *slot = &sh->slots[idx];
	uint64		current = sh->have_session ? sh->session_gen : 0;
	int			i;

	if (slot->args.counter.action == ZKC_COUNT_GET)
		return false;
	if (slot->args.counter.lead_slot >= 0 &&
		slot->args.counter.lead_slot < sh->nslots)
	{
		/* the leadership its transaction relies on, in the same epoch */
		ZklockSlot *l = &sh->slots[slot->args.counter.lead_slot];

		if (!(l->serial == slot->args.counter.lead_serial &&
			  l->state == ZKS_ACTIVE && l->op == ZKOP_LATCH &&
			  l->rstate.latch.leader &&
			  l->rstate.latch.epoch == slot->args.counter.lead_epoch &&
			  zklock_write_fence(false, l->session_gen, current) == ZKLOCK_FENCE_PASS))
		{
			zklock_req_fail(idx, ERRCODE_TRANSACTION_ROLLBACK,
							"leadership of the election at \"%s\" was lost: counter \"%s\" was not written",
							l->path + l->user_path_off, slot->path + slot->user_path_off);
			return true;
		}
	}
	for (i = 0; i < sh->nslots; i++)
	{
		ZklockSlot *h = &sh->slots[i];
		ZklockFenceVerdict v;

		if (i == idx || (h->state != ZKS_HELD && h->state != ZKS_LOST) ||
			h->pid != slot->pid || h->procno != slot->procno ||
			zklock_give_back_pending(h))
			continue;
		v = zklock_write_fence(h->state == ZKS_LOST, h->session_gen, current);
		if (v == ZKLOCK_FENCE_PASS)
			continue;
		zklock_req_fail(idx, ERRCODE_TRANSACTION_ROLLBACK,
						v == ZKLOCK_FENCE_LOST ?
						"zookeeper lock \"%s\" was lost: counter \"%s\" was not written" :
						"zookeeper lock \"%s\" is not held in the current zookeeper session: counter \"%s\" was not written",
						h->path + h->user_path_off, slot->path + slot->user_path_off);
		return true;
	}
	return false;
}

/*
 * setData of value (encoded for the counter's kind) at version (-1: any),
 * unless the fence refuses it.  That it left is recorded in the slot
 * first (see the banner).  Caller holds the lock.
 */
static void
counter_write(int idx, int version, int64 value)
{
	ZklockSlot *slot = &zklock_shared->slots[idx];
	unsigned char buf[8];
	int			len;
	int			rc;

	if (counter_write_fenced(idx))
		return;
	len = counter_encode(slot, value, buf);
	zklock_reqs[idx].rcp.counter.pending = value;
	slot->rstate.counter.write_sent = true;
	rc = zoo_aset(zklock_zh, slot->path, (const char *) buf, len, version,
				  counter_set_done, zklock_slot_tag(idx));
	if (rc != ZOK)
		slot->rstate.counter.write_sent = false;	/* the client did not take it */
	zklock_call_sent(idx, rc);
}

/*
 * create P (PERSISTENT, its parents as containers once a create found one
 * missing) holding value, unless the fence refuses it.  That it left is
 * recorded in the slot first (see the banner).  Caller holds the lock.
 */
static void
counter_create(int idx, int64 value)
{
	ZklockSlot *slot = &zklock_shared->slots[idx];
	WorkerReq  *req = &zklock_reqs[idx];
	unsigned char buf[8];
	int			len;
	int			rc;

	if (counter_write_fenced(idx))
		return;
	if (req->need_parents)
	{
		zklock_create_containers(slot->path, false);
		req->need_parents = false;
	}
	len = counter_encode(slot, value, buf);
	req->rcp.counter.pending = value;
	slot->rstate.counter.write_sent = true;
	rc = zoo_acreate(zklock_zh, slot->path, (const char *) buf, len,
					 zklock_node_acl(), 0, counter_create_done, zklock_slot_tag(idx));
	if (rc != ZOK)
		slot->rstate.counter.write_sent = false;	/* the client did not take it */
	zklock_call_sent(idx, rc);
}

/*
 * Is a write of the slot's request in doubt: it left and no answer said
 * whether it was applied?  Then it must not be sent again (see the
 * banner).  A SharedCount's create with its seed never is: sent again, it
 * cannot be applied twice.  Caller holds the lock.
 */
static bool
counter_write_in_doubt(const ZklockSlot *slot)
{
	return slot->rstate.counter.write_sent &&
		slot->args.counter.action != ZKC_COUNT_GET;
}

/*
 * End request idx with 08006: its write may or may not have been applied;
 * why says how its answer was lost.  Caller holds the lock.
 */
static void
counter_fail_in_doubt(int idx, const char *why)
{
	ZklockSlot *slot = &zklock_shared->slots[idx];

	zklock_req_fail(idx, ERRCODE_CONNECTION_FAILURE,
					"%s while writing counter \"%s\": the write may or may not have been applied",
					why, slot->path + slot->user_path_off);
}

/*
 * A write's completion brought no answer, rc saying why (the connection
 * or the session went): fail the request with 08006 when its write is in
 * doubt, else let the request layer park it or leave it to the session
 * watcher.  Caller holds the lock.
 */
static void
counter_write_failed(int idx, int rc, const char *what)
{
	if ((zklock_rc_retryable(rc) || zklock_rc_session_gone(rc)) &&
		counter_write_in_doubt(&zklock_shared->slots[idx]))
		counter_fail_in_doubt(idx, zklock_rc_retryable(rc) ?
							  "the connection to zookeeper was lost" :
							  "the zookeeper session ended");
	else
		zklock_call_failed(idx, rc, what);
}

/*
 * Completion of the sync ahead of a read: only its failure matters.
 */
static void
counter_sync_done(int rc, const char *value, const void *data)
{
	int			idx = zklock_completion_begin(data);

	if (idx >= 0 && rc != ZOK)
		zklock_call_failed(idx, rc, "sync the counter");
	LWLockRelease(zklock_shared->lock);
}

/*
 * Completion of the getData of P: answer a read, or compute the write of
 * a compare-and-set at the version read (an add's is its fold's:
 * fold_data_done).
 */
static void
counter_data_done(int rc, const char *value, int value_len,
				  const struct Stat *stat, const void *data)
{
	int			idx = zklock_completion_begin(data);
	ZklockSlot *slot;
	ZklockCounterArgs *c;
	int64		cur = 0;
	int32		cur32 = 0;

	if (idx < 0)
	{
		LWLockRelease(zklock_shared->lock);
		return;
	}
	slot = &zklock_shared->slots[idx];
	c = &slot->args.counter;
	if (rc == ZNONODE)
	{
		switch (c->action)
		{
			case ZKC_COUNT_GET:
				counter_create(idx, c->a);	/* the seed, as SharedCount.start */
				break;
			default:
				/* get: 0; compare_and_set: false, as Curator */
				zklock_req_finish(idx, ZKR_OK, 0);
				break;
		}
		LWLockRelease(zklock_shared->lock);
		return;
	}
	if (rc != ZOK)
	{
		zklock_call_failed(idx, rc, "read the counter");
		LWLockRelease(zklock_shared->lock);
		return;
	}
	if (stat->ephemeralOwner != 0)
	{
		zklock_req_fail(idx, ERRCODE_WRONG_OBJECT_TYPE,
						"zookeeper node \"%s\" is ephemeral and not a counter",
						slot->path + slot->user_path_off);
		LWLockRelease(zklock_shared->lock);
		return;
	}
	if (counter_is_long(slot) ? !zklock_long_decode(value, value_len, &cur) :
		!zklock_count_decode(value, value_len, &cur32))
	{
		zklock_req_fail(idx, ERRCODE_INVALID_BINARY_REPRESENTATION,
						"zookeeper node \"%s\" holds %d bytes, not a %s",
						slot->path + slot->user_path_off, Max(value_len, 0),
						counter_is_long(slot) ? "DistributedAtomicLong (8 bytes)" :
						"SharedCount (4 bytes)");
		LWLockRelease(zklock_shared->lock);
		return;
	}
	switch (c->action)
	{
		case ZKC_COUNT_GET:
			zklock_req_finish(idx, ZKR_OK, counter_pack(cur32, stat->version));
			break;
		case ZKC_LONG_GET:
			zklock_req_finish(idx, ZKR_OK, cur);
			break;
		case ZKC_LONG_CAS:
			if (cur != c->a)
				zklock_req_finish(idx, ZKR_OK, 0);
			else
				counter_write(idx, stat->version, c->b);
			break;
		default:
			elog(LOG, "zklock: counter read for action %d", (int) c->action);
			zklock_req_finish(idx, ZKR_OK, 0);
			break;
	}
	LWLockRelease(zklock_shared->lock);
}

/*
 * Completion of the setData of P.
 */
static void
counter_set_done(int rc, const struct Stat *stat, const void *data)
{
	int			idx = zklock_completion_begin(data);

	if (idx >= 0)
	{
		ZklockSlot *slot = &zklock_shared->slots[idx];
		WorkerReq  *req = &zklock_reqs[idx];
		ZklockCounterAction action = slot->args.counter.action;

		/* a definite answer: not applied (ZOK: done) */
		if (rc == ZBADVERSION || rc == ZNONODE)
			slot->rstate.counter.write_sent = false;
		if (rc == ZOK)
			zklock_req_finish(idx, ZKR_OK, 1);
		else if (rc == ZBADVERSION)
			zklock_req_finish(idx, ZKR_OK, 0);	/* try_set, compare_and_set */
		else if (rc == ZNONODE && (action == ZKC_COUNT_SET || action == ZKC_LONG_SET))
			counter_create(idx, req->rcp.counter.pending);
		else if (rc == ZNONODE)
			zklock_req_finish(idx, ZKR_OK, 0);	/* nothing at that version */
		else
			counter_write_failed(idx, rc, "write the counter");
	}
	LWLockRelease(zklock_shared->lock);
}

/*
 * Completion of the create of P.
 */
static void
counter_create_done(int rc, const char *value, const void *data)
{
	int			idx = zklock_completion_begin(data);

	if (idx >= 0)
	{
		ZklockSlot *slot = &zklock_shared->slots[idx];
		WorkerReq  *req = &zklock_reqs[idx];
		ZklockCounterAction action = slot->args.counter.action;

		if (rc == ZOK && action == ZKC_COUNT_GET)
			zklock_req_finish(idx, ZKR_OK, counter_pack((int32) slot->args.counter.a, 0));
		else if (rc == ZOK)
			zklock_req_finish(idx, ZKR_OK, 1);
		else if (rc == ZNODEEXISTS)
		{
			/* made meanwhile by someone else: not ours, start again */
			slot->rstate.counter.write_sent = false;
			counter_start(idx);
		}
		else if (rc == ZNONODE)
		{
			slot->rstate.counter.write_sent = false;
			if (zklock_retry_with_parents(idx))
				counter_create(idx, req->rcp.counter.pending);
		}
		else
			counter_write_failed(idx, rc, "create the counter");
	}
	LWLockRelease(zklock_shared->lock);
}

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
static void
fold_join(int idx)
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
 * (zklock_settle_cancel), and let go those parked meanwhile (the sweep of
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

		if (!fold_member_current(f, &m) || zklock_settle_cancel(m.idx))
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
 * Common start of a completion of fold f, as zklock_completion_begin is
 * for a request: take the lock and count the call in.  When the fold
 * ended meanwhile, free it if that was its last call and return false;
 * else settle its members (fold_settle) and return true.  The caller
 * releases the lock either way.
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
		zklock_park(ids[i], false);
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
 * (see the banner).  Caller holds the lock.
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

		if (counter_write_fenced(m.idx))
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
			zklock_create_containers(f->path, false);
			f->need_parents = false;
		}
		rc = zoo_acreate(zklock_zh, f->path, (const char *) buf, 8,
						 zklock_node_acl(), 0, fold_create_done, f);
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
	LWLockRelease(zklock_shared->lock);
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
		LWLockRelease(zklock_shared->lock);
		return;
	}
	is_long = (rc == ZOK && zklock_long_decode(value, value_len, &cur));
	if (f->nmembers == 0)
		fold_end(f);
	else if (rc == ZNONODE)
		fold_write(f, -1, 0);	/* missing: created with the sum */
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
				zklock_call_failed(ids[i], rc, "read the counter");
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
	LWLockRelease(zklock_shared->lock);
}

/*
 * The answer rc of fold f's write (a create with create) came: a success
 * ends each add in it with its own result; a refusal (BadVersion, NoNode,
 * NodeExists) clears their marks and the fold reads again, with the adds
 * that joined meanwhile; a lost answer fails each add in it with 08006
 * (counter_write_failed) and leaves the adds waiting for the next read to
 * the request layer (park, the session's sweep).  Takes the lock.
 */
static void
fold_write_done(CounterFold *f, int rc, bool create)
{
	bool		refused = (rc == ZBADVERSION || rc == ZNONODE || rc == ZNODEEXISTS);
	int			i;

	if (!fold_completion_begin(f))
	{
		LWLockRelease(zklock_shared->lock);
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
			counter_write_failed(m->idx, rc, create ? "create the counter" :
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
			zklock_call_failed(ids[i], rc, "read the counter");
		pfree(ids);
	}
	else
		fold_read(f, true);		/* the adds not in the failed write */
	LWLockRelease(zklock_shared->lock);
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

/*
 * The counters' descriptor: one request, no hold (its SQL functions are
 * in recipes/counter_sql.c).
 */
static const ZklockWorkerOps counter_ops[] = {
	{.op = ZKOP_COUNTER, .start = counter_start},
};

const ZklockRecipe zklock_recipe_counter = {
	.name = "counter",
	.ops = counter_ops, .nops = lengthof(counter_ops),
};

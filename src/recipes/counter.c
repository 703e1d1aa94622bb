/*-------------------------------------------------------------------------
 *
 * recipes/counter.c
 *	  Shared counters, Curator-compatible on the wire (see doc/wire.md):
 *	  SharedCount (a 4-byte int in node P) and DistributedAtomicLong (an
 *	  8-byte long in node P): the worker's steps.  Their SQL functions are
 *	  recipes/counter_sql.c.
 *
 *	  counter_start		first step of a counter request (ZKOP_COUNTER)
 *
 *	  A read goes through the leader first (sync, then getData behind it
 *	  on the session), so it is never older than a write acknowledged
 *	  before it; an add reads without the sync, as Curator's does (its
 *	  write at the version read fails on a stale value; every 4th retry
 *	  reads with the sync, so a lagging follower cannot keep it going).  A write with a version (try_set, compare_and_set, add)
 *	  is decided by ZooKeeper.
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
 *	  the flag where a request would otherwise be run from its start).
 *	  The reads before a write, and the next try of an add after a
 *	  definite answer (BadVersion, NoNode), are run again freely.  A
 *	  SharedCount's create with its seed is not in doubt: sent again, it
 *	  is refused (NodeExists) and the value read.
 *
 *	  Writes are fenced by the writer's locks: a backend that holds zklock
 *	  locks (slots of its own HELD or LOST) writes a counter only while
 *	  none of them is lost and all were made in the worker's current
 *	  session.  The worker decides it as it sends each setData or create,
 *	  on the session that holds the locks' nodes: ZooKeeper runs a
 *	  session's requests in order and refuses them once it has expired,
 *	  so such a write can only be applied while those nodes exist.
 *	  Otherwise the call fails with 40000 naming the lock, and nothing is
 *	  written.  Reads (and a SharedCount's create with its seed) are not
 *	  fenced.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "zklock.h"
#include "recipes/recipe.h"

static void counter_read(int idx, bool sync);
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
			/* optimistic: the versioned write catches a stale read */
			if (!counter_write_fenced(idx))
				counter_read(idx, false);
			break;
		case ZKC_LONG_CAS:
			/*
			 * fenced before its read too: a claim under a lost lock or
			 * leadership says so (40000) even when the value already moved
			 * and nothing would be written
			 */
			if (!counter_write_fenced(idx))
				counter_read(idx, true);
			break;
		default:
			counter_read(idx, true);
			break;
	}
}

/*
 * getData of P; with sync, behind a sync through the leader on the
 * session, so the value is not older than a write acknowledged before.
 * An add reads without it first (its versioned write fails on a stale
 * value, and then it reads again with it), as Curator's does.
 */
static void
counter_read(int idx, bool sync)
{
	ZklockSlot *slot = &zklock_shared->slots[idx];

	if (sync)
	{
		zklock_call_sent(idx, zoo_async(zklock_zh, slot->path, counter_sync_done,
										zklock_slot_tag(idx)));
		if (zklock_req_parked(&zklock_reqs[idx]))
			return;
	}
	zklock_call_sent(idx, zoo_aget(zklock_zh, slot->path, 0, counter_data_done,
								   zklock_slot_tag(idx)));
}

/*
 * The fence of a write (see the banner): fail the request, and return
 * true, when the backend that asked for it holds a lock that is lost or
 * was made in another session than the worker's current one.  Checked as
 * the write is sent; give-backs the backend asked for are not holds.  A
 * SharedCount's read that creates it with its seed is not a write.
 * Caller holds the lock.
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
 * an add or a compare-and-set at the version read.
 */
static void
counter_data_done(int rc, const char *value, int value_len,
				  const struct Stat *stat, const void *data)
{
	int			idx = zklock_completion_begin(data);
	ZklockSlot *slot;
	ZklockCounterArgs *c;
	int64		cur = 0;
	int64		sum;
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
			case ZKC_LONG_ADD:
				if (!zklock_long_add(0, c->a, &sum))
					zklock_req_fail(idx, ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE,
									"bigint out of range");
				else
					counter_create(idx, sum);
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
		case ZKC_LONG_ADD:
			if (!zklock_long_add(cur, c->a, &sum))
				zklock_req_fail(idx, ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE,
								"bigint out of range");
			else
				counter_write(idx, stat->version, sum);
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
			zklock_req_finish(idx, ZKR_OK,
							  action == ZKC_LONG_ADD ? req->rcp.counter.pending : 1);
		else if (rc == ZBADVERSION && action == ZKC_LONG_ADD)
		{
			/* as optimistic again (Curator's retry), fresh every 4th time */
			counter_read(idx, ++req->rcp.counter.retries % 4 == 0);
		}
		else if (rc == ZBADVERSION)
			zklock_req_finish(idx, ZKR_OK, 0);	/* try_set, compare_and_set */
		else if (rc == ZNONODE && (action == ZKC_COUNT_SET || action == ZKC_LONG_SET))
			counter_create(idx, req->rcp.counter.pending);
		else if (rc == ZNONODE && action == ZKC_LONG_ADD)
			counter_read(idx, true);	/* deleted meanwhile: start from 0 */
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
			zklock_req_finish(idx, ZKR_OK,
							  action == ZKC_LONG_ADD ? req->rcp.counter.pending : 1);
		else if (rc == ZNODEEXISTS)
		{
			/* made meanwhile by someone else: not ours, start again */
			slot->rstate.counter.write_sent = false;
			if (action == ZKC_LONG_ADD)
				counter_read(idx, true);	/* fresh this time */
			else
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

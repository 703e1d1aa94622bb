/*-------------------------------------------------------------------------
 *
 * recipes/counter.c
 *	  Shared counters, Curator-compatible on the wire (see doc/wire.md):
 *	  SharedCount (a 4-byte int in node P) and DistributedAtomicLong (an
 *	  8-byte long in node P): the worker's steps of a request.  Their SQL
 *	  functions are recipes/counter_sql.c; the adds, folded into one read
 *	  and one write per path, recipes/counter_fold.c; the fence every
 *	  write passes and a write whose answer was lost,
 *	  recipes/counter_fence.c.
 *
 *	  counter_start		first step of a counter request (ZKOP_COUNTER),
 *						the descriptor's one entry; an add goes on in its
 *						fold (zklock_counter_fold_join)
 *
 *	  A read goes through the leader first (sync, then getData behind it
 *	  on the session), so it is never older than a write acknowledged
 *	  before it; an add reads without the sync, as Curator's does (its
 *	  write at the version read fails on a stale value; every 4th retry
 *	  reads with the sync, so a lagging follower cannot keep it going).  A
 *	  write with a version (try_set, compare_and_set, add) is decided by
 *	  ZooKeeper.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "core/value_codec.h"
#include "common/shmem.h"
#include "recipes/recipe.h"
#include "recipes/recipe_worker.h"
#include "recipes/counter.h"

static void counter_read(int idx);
static void counter_write(int idx, int version, int64 value);
static void counter_create(int idx, int64 value);
static void counter_sync_done(int rc, const char *value, const void *data);
static void counter_data_done(int rc, const char *value, int value_len,
							  const struct Stat *stat, const void *data);
static void counter_set_done(int rc, const struct Stat *stat, const void *data);
static void counter_create_done(int rc, const char *value, const void *data);
static void counter_children_done(int rc, const struct String_vector *strings,
								  const void *data);
static bool counter_is_long(const ZklockSlot *slot);
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
 * run again (recipes/counter_fence.c's banner): it fails with 08006.
 * Caller holds the lock.
 */
static void
counter_start(int idx)
{
	ZklockSlot *slot = &zklock_shared->slots[idx];

	if (zklock_counter_write_in_doubt(slot))
	{
		zklock_counter_fail_in_doubt(idx,
									 "the answer was lost (worker restart, session end)");
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
			if (!zklock_counter_write_fenced(idx))
				zklock_counter_fold_join(idx);
			break;
		case ZKC_LONG_CAS:
			/*
			 * fenced before its read too: a claim under a lost lock or
			 * leadership says so (40000) even when the value already moved
			 * and nothing would be written
			 */
			if (!zklock_counter_write_fenced(idx))
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

	zklock_req_call_sent(idx, zoo_async(zklock_zh, slot->path, counter_sync_done,
										zklock_zkio_slot_tag(idx)));
	if (zklock_req_parked(&zklock_reqs[idx]))
		return;
	zklock_req_call_sent(idx, zoo_aget(zklock_zh, slot->path, 0, counter_data_done,
									   zklock_zkio_slot_tag(idx)));
}

/*
 * setData of value (encoded for the counter's kind) at version (-1: any),
 * unless the fence refuses it.  That it left is recorded in the slot
 * first (recipes/counter_fence.c's banner).  Caller holds the lock.
 */
static void
counter_write(int idx, int version, int64 value)
{
	ZklockSlot *slot = &zklock_shared->slots[idx];
	unsigned char buf[8];
	int			len;
	int			rc;

	if (zklock_counter_write_fenced(idx))
		return;
	len = counter_encode(slot, value, buf);
	zklock_reqs[idx].rcp.counter.pending = value;
	slot->rstate.counter.write_sent = true;
	rc = zoo_aset(zklock_zh, slot->path, (const char *) buf, len, version,
				  counter_set_done, zklock_zkio_slot_tag(idx));
	if (rc != ZOK)
		slot->rstate.counter.write_sent = false;	/* the client did not take it */
	zklock_req_call_sent(idx, rc);
}

/*
 * create P (PERSISTENT, its parents as containers once a create found one
 * missing) holding value, unless the fence refuses it.  That it left is
 * recorded in the slot first (recipes/counter_fence.c's banner).  Caller
 * holds the lock.
 */
static void
counter_create(int idx, int64 value)
{
	ZklockSlot *slot = &zklock_shared->slots[idx];
	WorkerReq  *req = &zklock_reqs[idx];
	unsigned char buf[8];
	int			len;
	int			rc;

	if (zklock_counter_write_fenced(idx))
		return;
	if (req->need_parents)
	{
		zklock_zkio_create_containers(slot->path, false);
		req->need_parents = false;
	}
	len = counter_encode(slot, value, buf);
	req->rcp.counter.pending = value;
	slot->rstate.counter.write_sent = true;
	rc = zoo_acreate(zklock_zh, slot->path, (const char *) buf, len,
					 zklock_zkio_node_acl(), 0, counter_create_done, zklock_zkio_slot_tag(idx));
	if (rc != ZOK)
		slot->rstate.counter.write_sent = false;	/* the client did not take it */
	zklock_req_call_sent(idx, rc);
}

/*
 * Completion of the sync ahead of a read: only its failure matters.
 */
static void
counter_sync_done(int rc, const char *value, const void *data)
{
	int			idx = zklock_req_completion_begin(data);

	if (idx >= 0 && rc != ZOK)
		zklock_req_call_failed(idx, rc, "sync the counter");
	zklock_req_completion_end();
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
	int			idx = zklock_req_completion_begin(data);
	ZklockSlot *slot;
	ZklockCounterArgs *c;
	int64		cur = 0;
	int32		cur32 = 0;

	if (idx < 0)
	{
		zklock_req_completion_end();
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
		zklock_req_completion_end();
		return;
	}
	if (rc != ZOK)
	{
		zklock_req_call_failed(idx, rc, "read the counter");
		zklock_req_completion_end();
		return;
	}
	if (stat->ephemeralOwner != 0)
	{
		zklock_req_fail(idx, ERRCODE_WRONG_OBJECT_TYPE,
						"zookeeper node \"%s\" is ephemeral and not a counter",
						slot->path + slot->user_path_off);
		zklock_req_completion_end();
		return;
	}
	if (stat->numChildren > 0 && !zklock_reqs[idx].rcp.counter.guarded)
	{
		/* the path guard: whose nodes are below P? (zklock_counter_guard) */
		zklock_req_send_listing(idx, slot->path, counter_children_done,
								false, false);
		zklock_req_completion_end();
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
		zklock_req_completion_end();
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
			/* no value (empty data) equals nothing: Curator compares bytes */
			if (value_len <= 0 || cur != c->a)
				zklock_req_finish(idx, ZKR_OK, 0);
			else
				counter_write(idx, stat->version, c->b);
			break;
		default:
			elog(LOG, "zklock: counter read for action %d", (int) c->action);
			zklock_req_finish(idx, ZKR_OK, 0);
			break;
	}
	zklock_req_completion_end();
}

/*
 * Completion of the listing of P by a read (not an add's: fold_children_done).
 */
static void
counter_children_done(int rc, const struct String_vector *strings,
					  const void *data)
{
	int			idx = zklock_req_completion_begin(data);
	const char *held = zklock_counter_guard(rc, strings);
	ZklockSlot *slot = idx >= 0 ? &zklock_shared->slots[idx] : NULL;

	if (idx >= 0 && held != NULL)
		zklock_req_fail(idx, ERRCODE_INVALID_PARAMETER_VALUE,
						"zookeeper path \"%s\" holds %s, not %s",
						slot->path + slot->user_path_off, held,
						zklock_guard_recipe_name(ZKG_COUNTER));
	else if (idx >= 0 && (rc == ZOK || rc == ZNONODE))
	{
		zklock_reqs[idx].rcp.counter.guarded = true;
		counter_start(idx);		/* read again */
	}
	else if (idx >= 0)
		zklock_req_call_failed(idx, rc, "list the counter's node");
	zklock_req_completion_end();
}

/*
 * Completion of the setData of P.
 */
static void
counter_set_done(int rc, const struct Stat *stat, const void *data)
{
	int			idx = zklock_req_completion_begin(data);

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
			zklock_counter_write_failed(idx, rc, "write the counter");
	}
	zklock_req_completion_end();
}

/*
 * Completion of the create of P.
 */
static void
counter_create_done(int rc, const char *value, const void *data)
{
	int			idx = zklock_req_completion_begin(data);

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
			if (zklock_req_retry_with_parents(idx))
				counter_create(idx, req->rcp.counter.pending);
		}
		else
			zklock_counter_write_failed(idx, rc, "create the counter");
	}
	zklock_req_completion_end();
}

/*
 * A counter request given up while ACTIVE: a write that left stands
 * whatever the caller does (recipes/counter_fence.c).  Backend, the lock
 * held exclusively.
 */
static bool
counter_write_stands(const ZklockSlot *slot)
{
	return slot->rstate.counter.write_sent;
}

/*
 * The counters' descriptor: one request, no hold (its SQL functions are
 * in recipes/counter_sql.c).
 */
static const ZklockWorkerOps counter_ops[] = {
	{
		.op = ZKOP_COUNTER, .start = counter_start,
		.write_stands = counter_write_stands,
	},
};

const ZklockRecipe zklock_recipe_counter = {
	.name = "counter",
	.ops = counter_ops, .nops = lengthof(counter_ops),
};

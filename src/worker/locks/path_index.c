/*-------------------------------------------------------------------------
 *
 * worker/locks/path_index.c
 *	  The worker's index of its lock engine slots by the parent of their
 *	  lock nodes (LockTarget.base: P for a mutex or a read/write lock,
 *	  P/locks for a semaphore's lock, ...), so that the handover layer finds
 *	  the nodes of this worker under one lock without looking at every
 *	  slot of the table: its cost per create, grant and release grows with
 *	  the requests on that lock, not with zklock.max_requests.
 *
 *	  A process-local hash table (dynahash, in TopMemoryContext) maps a
 *	  base to a list of slot numbers, linked through two arrays indexed by
 *	  slot number (next, prev), so a slot is in at most one list and an
 *	  insert or a removal takes no allocation.  Each list is kept in slot
 *	  order, the order of the full scans it replaces, so every decision
 *	  that takes the first match or works through the matches in turn
 *	  makes the same choice as before.
 *
 *	  What is in it.  A slot's base follows from its op and its path, and
 *	  both are fixed from the claim of the slot (FREE -> NEW) to its free.
 *	  A slot is indexed when the worker takes its request on (pickup), and
 *	  every slot of the table when the worker starts (an earlier worker's
 *	  ACTIVE, HELD, RELEASE slots, and NEW ones).  It leaves the index when
 *	  the worker frees it, or when it is indexed again (its next request).
 *	  A slot the backend freed (DONE or LOST, then FREE) stays in its list
 *	  until the iteration passes it (a FREE slot is unlinked there) or the
 *	  slot is picked up again.  So a list may hold slots that no longer
 *	  belong to it (FREE ones are skipped, and a slot claimed again is NEW
 *	  until its pickup): the handover layer's scans keep their own test of
 *	  each slot (state, serial, base, node names), and the index only has
 *	  to hold every slot that can pass them, which it does: those are
 *	  slots the worker took on or found at its start, never NEW ones it
 *	  has not picked up yet (see zklock_handover_choose on the downgrade
 *	  twin).
 *
 *	  An iteration may run while the slot it stands on, or another one, is
 *	  freed and unlinked (a grant in the loop settles a cancel): an
 *	  unlinked slot keeps its next link, so an iteration standing on it
 *	  carries on into the list.  Slots are linked only by pickups and at
 *	  the start, never inside an iteration.
 *
 *	  zklock_pathidx_check compares the index with the table, every
 *	  second, and says so in the log if they disagree (a bug): the TAP
 *	  tests look for that message.
 *
 *	  zklock_pathidx_init				create the index, filled from the table
 *	  zklock_pathidx_add				index a slot under its request's base
 *	  zklock_pathidx_remove				a slot the worker freed: out of its
 *										list
 *	  zklock_pathidx_first,
 *	  zklock_pathidx_next				iterate over the slots of a base
 *	  zklock_pathidx_check				compare the index with the table
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/hsearch.h"
#include "utils/memutils.h"

#include "zklock.h"
#include "common/shmem.h"
#include "worker/locks/locks_int.h"

typedef struct PathIdxEntry
{
	char		base[ZKLOCK_NODE_PATH_SIZE];	/* the key */
	int			head;			/* first slot of the list, -1: none */
} PathIdxEntry;

static HTAB *pathidx = NULL;
static int *pi_next = NULL;		/* by slot: next in its list, -1: last */
static int *pi_prev = NULL;		/* by slot: previous in its list, -1: first */
static PathIdxEntry **pi_ent = NULL;	/* by slot: its list, NULL: none */

static bool slot_base(int idx, char *base);
static void pathidx_unlink(int idx);

/*
 * The base of slot idx's lock nodes, into base (ZKLOCK_NODE_PATH_SIZE), or
 * false when its recipe does not use the lock engine.
 */
static bool
slot_base(int idx, char *base)
{
	const ZklockWorkerOps *ops = zklock_worker_ops(zklock_shared->slots[idx].op);
	LockTarget	t;

	if (ops->lock_target == NULL)
		return false;
	memset(&t, 0, sizeof(t));
	ops->lock_target(idx, &t);
	strlcpy(base, t.base, ZKLOCK_NODE_PATH_SIZE);
	return true;
}

/*
 * Take slot idx out of its list, if it is in one.  Its next link is kept
 * for an iteration standing on it; a list left empty is removed.
 */
static void
pathidx_unlink(int idx)
{
	PathIdxEntry *e = pi_ent[idx];

	if (e == NULL)
		return;
	if (pi_prev[idx] >= 0)
		pi_next[pi_prev[idx]] = pi_next[idx];
	else
		e->head = pi_next[idx];
	if (pi_next[idx] >= 0)
		pi_prev[pi_next[idx]] = pi_prev[idx];
	pi_prev[idx] = -1;
	pi_ent[idx] = NULL;
	if (e->head < 0)
		(void) hash_search(pathidx, e->base, HASH_REMOVE, NULL);
}

/*
 * Create the index and fill it from the slot table (the worker's start:
 * whatever an earlier worker left).  Caller holds the lock.
 */
void
zklock_pathidx_init(void)
{
	int			nslots = zklock_shared->nslots;
	HASHCTL		ctl;
	int			i;

	ctl.keysize = ZKLOCK_NODE_PATH_SIZE;
	ctl.entrysize = sizeof(PathIdxEntry);
	ctl.hcxt = TopMemoryContext;
	pathidx = hash_create("zklock path index", Max(nslots, 16), &ctl,
						  HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);
	pi_next = MemoryContextAlloc(TopMemoryContext, sizeof(int) * nslots);
	pi_prev = MemoryContextAlloc(TopMemoryContext, sizeof(int) * nslots);
	pi_ent = MemoryContextAllocZero(TopMemoryContext,
									sizeof(PathIdxEntry *) * nslots);
	for (i = 0; i < nslots; i++)
		pi_next[i] = pi_prev[i] = -1;
	for (i = 0; i < nslots; i++)
	{
		if (zklock_shared->slots[i].state != ZKS_FREE)
			zklock_pathidx_add(i);
	}
}

/*
 * Index slot idx under the base of its request (out of any list it was
 * in), in slot order; a slot whose recipe does not use the lock engine is
 * only taken out.  Never called inside an iteration.  Caller holds the
 * lock.
 */
void
zklock_pathidx_add(int idx)
{
	char		base[ZKLOCK_NODE_PATH_SIZE];
	PathIdxEntry *e;
	bool		found;
	int			prev = -1;
	int			i;

	pathidx_unlink(idx);
	pi_next[idx] = -1;
	if (!slot_base(idx, base))
		return;
	e = hash_search(pathidx, base, HASH_ENTER, &found);
	if (!found)
		e->head = -1;
	/* in slot order: after the last slot below idx */
	for (i = e->head; i >= 0 && i < idx; i = pi_next[i])
		prev = i;
	pi_prev[idx] = prev;
	pi_next[idx] = i;
	if (prev >= 0)
		pi_next[prev] = idx;
	else
		e->head = idx;
	if (i >= 0)
		pi_prev[i] = idx;
	pi_ent[idx] = e;
}

/*
 * Slot idx was freed by the worker: out of its list.  Caller holds the
 * lock.
 */
void
zklock_pathidx_remove(int idx)
{
	pathidx_unlink(idx);
}

/*
 * From slot i on (i itself included), the first slot of its list that is
 * not FREE and whose recipe uses the lock engine, or -1.  FREE ones are
 * unlinked on the way.
 */
static int
pathidx_live(int i)
{
	while (i >= 0)
	{
		ZklockSlot *slot = &zklock_shared->slots[i];
		int			next = pi_next[i];

		if (slot->state == ZKS_FREE)
			pathidx_unlink(i);
		else if (zklock_worker_ops(slot->op)->lock_target != NULL)
			return i;
		i = next;
	}
	return -1;
}

/*
 * The first slot indexed under base, or -1; zklock_pathidx_next gives the
 * others, in slot order:
 *
 *	for (i = zklock_pathidx_first(base); i >= 0; i = zklock_pathidx_next(i))
 *
 * A slot met is only likely to be under base (see the banner): the caller
 * tests it as a scan of the whole table would.  Caller holds the lock.
 */
int
zklock_pathidx_first(const char *base)
{
	PathIdxEntry *e;

	if (pathidx == NULL)
		return -1;
	e = hash_search(pathidx, base, HASH_FIND, NULL);
	return e == NULL ? -1 : pathidx_live(e->head);
}

/*
 * The slot after i in i's list (see zklock_pathidx_first), or -1.  i may
 * have been unlinked since it was returned.  Caller holds the lock.
 */
int
zklock_pathidx_next(int i)
{
	return pathidx_live(pi_next[i]);
}

/*
 * Compare the index with the slot table: every slot the worker knows
 * (neither FREE nor NEW) of a recipe that uses the lock engine must be in
 * the list of its base, and every list must be in slot order with its
 * links both ways.  A disagreement is a bug: it is logged (the TAP tests
 * look for "zklock: path index") and the slot indexed again.  Returns the
 * number of disagreements.  Run every second.  Caller holds the lock.
 */
int
zklock_pathidx_check(void)
{
	ZklockShared *sh = zklock_shared;
	HASH_SEQ_STATUS seq;
	PathIdxEntry *e;
	int			bad = 0;
	int			i;

	if (pathidx == NULL)
		return 0;
	hash_seq_init(&seq, pathidx);
	while ((e = hash_seq_search(&seq)) != NULL)
	{
		int			prev = -1;

		for (i = e->head; i >= 0; i = pi_next[i])
		{
			if (pi_ent[i] != e || pi_prev[i] != prev || i <= prev)
			{
				ereport(WARNING,
						(errcode(ERRCODE_INTERNAL_ERROR),
						 errmsg("zklock: path index: the list of \"%s\" is broken at slot %d",
								e->base, i)));
				bad++;
				hash_seq_term(&seq);
				goto rebuild;
			}
			prev = i;
		}
	}
	for (i = 0; i < sh->nslots; i++)
	{
		char		base[ZKLOCK_NODE_PATH_SIZE];

		if (sh->slots[i].state == ZKS_FREE || sh->slots[i].state == ZKS_NEW ||
			!slot_base(i, base))
			continue;
		if (pi_ent[i] == NULL || strcmp(pi_ent[i]->base, base) != 0)
		{
			ereport(WARNING,
					(errcode(ERRCODE_INTERNAL_ERROR),
					 errmsg("zklock: path index: slot %d (state %s) is not indexed under \"%s\"",
							i, zklock_slot_state_name(sh->slots[i].state), base)));
			bad++;
			zklock_pathidx_add(i);
		}
	}
	return bad;

rebuild:
	hash_destroy(pathidx);
	pfree(pi_next);
	pfree(pi_prev);
	pfree(pi_ent);
	zklock_pathidx_init();
	return bad;
}

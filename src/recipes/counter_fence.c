/*-------------------------------------------------------------------------
 *
 * recipes/counter_fence.c
 *	  What every write of a shared counter passes, in a request of its own
 *	  (recipes/counter.c) and in a fold of adds (recipes/counter_fold.c)
 *	  alike: the fence of the writer's locks, the rule of a write whose
 *	  answer was lost (in doubt), and the path guard's verdict on P's
 *	  children.
 *
 *	  Interface (recipes/counter.h), each called with the lock held:
 *	    zklock_counter_write_fenced    the fence: fails a write it refuses
 *	    zklock_counter_write_in_doubt  a write of the request left unanswered
 *	    zklock_counter_fail_in_doubt   ends the request with 08006
 *	    zklock_counter_write_failed    a write's completion without answer
 *	    zklock_counter_guard           another recipe's nodes below P
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

#include "core/curator_rules.h"
#include "common/shmem.h"
#include "recipes/recipe.h"
#include "recipes/recipe_worker.h"
#include "recipes/counter.h"

/*
 * The fence of a write (see the banner): fail the request, and return
 * true, when the backend that asked for it holds a lock that is lost or
 * was made in another session than the worker's current one.  Checked as
 * the write is sent; give-backs the backend asked for are not holds.  A
 * SharedCount's read that creates it with its seed is not a write.  A
 * folded write checks it for each add in it.  Caller holds the lock.
 */
bool
zklock_counter_write_fenced(int idx)
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
 * Is a write of the slot's request in doubt: it left and no answer said
 * whether it was applied?  Then it must not be sent again (see the
 * banner).  A SharedCount's create with its seed never is: sent again, it
 * cannot be applied twice.  Caller holds the lock.
 */
bool
zklock_counter_write_in_doubt(const ZklockSlot *slot)
{
	return slot->rstate.counter.write_sent &&
		slot->args.counter.action != ZKC_COUNT_GET;
}

/*
 * End request idx with 08006: its write may or may not have been applied;
 * why says how its answer was lost.  Caller holds the lock.
 */
void
zklock_counter_fail_in_doubt(int idx, const char *why)
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
void
zklock_counter_write_failed(int idx, int rc, const char *what)
{
	if ((zklock_rc_retryable(rc) || zklock_rc_session_gone(rc)) &&
		zklock_counter_write_in_doubt(&zklock_shared->slots[idx]))
		zklock_counter_fail_in_doubt(idx, zklock_rc_retryable(rc) ?
									 "the connection to zookeeper was lost" :
									 "the zookeeper session ended");
	else
		zklock_req_call_failed(idx, rc, what);
}

/*
 * The path guard of a counter (core/recipe_guard.c): a counter's node has
 * no children of its own, so a read that found some lists them, once per
 * request or fold; another recipe's nodes there (P is a lock's parent)
 * make it fail with 22023 naming them (NULL: none, or no listing).  An
 * uncontended counter (P without children) sends nothing more.
 */
const char *
zklock_counter_guard(int rc, const struct String_vector *strings)
{
	if (rc != ZOK)
		return NULL;
	return zklock_guard_children(ZKG_COUNTER, strings->data, strings->count,
								 NULL);
}

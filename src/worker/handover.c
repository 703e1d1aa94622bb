/*-------------------------------------------------------------------------
 *
 * worker/handover.c
 *	  The lock engine's local layer: what one worker, seeing every waiter and
 *	  holder of its cluster, may decide without Curator's round trips.  A
 *	  waiter behind a node of this worker waits without a watch (local
 *	  waits); a release hands the lock to the local waiter next in line once
 *	  ZooKeeper applied the released node's delete (local handover); a read
 *	  node right behind a read node of this worker shares its answer (read
 *	  joins, with the ring of readers released lately); a create behind a
 *	  node of this worker is placed without a listing.  src/README ("Local
 *	  handover") gives the argument for each; doc/failure-model.md what a
 *	  user may rely on.
 *
 *-------------------------------------------------------------------------
 */

#include "postgres.h"

#include "zklock.h"
#include "core/handover_rules.h"
#include "worker/worker.h"

static void lk_placed(int idx);
static int	local_node_owner(const char *base, const char *name, int except);
static void wait_locally(int idx, const char *pred, int owner, int blockers,
						 bool follow);
static int	local_tail_owner(int idx, const char *base, const char *after,
									bool reader);
static void settle_followers(int idx, bool granted);
static void lk_node_gone(const char *path);
static bool local_create_alone(int idx, const LockTarget *t);
static bool local_wait_behind(int idx, const LockTarget *t, const char *pred,
							  int blockers);
static void join_reader(int idx);
static bool follows_released_reader(int idx, const LockTarget *t);
static void end_local_wait(int idx);
static void handover_check(int idx, const LockTarget *t);
static void handover_check_done(int rc, const struct Stat *stat,
								const void *data);
static bool released_node_pending(const char *base, const char *node);

/*
 * Read locks of this worker released lately, newest last, for
 * lk_placed: a read node created right after one of them shares its
 * answer (granted) when its create left before the release did, because
 * the released node's delete left after the release, so the node still
 * sorted before ours when the server made ours.  zklock_lk_creates_sent
 * numbers the creates of lock nodes.
 */
#define RELEASED_READERS	16

typedef struct ReleasedReader
{
	uint64		creates_before; /* zklock_lk_creates_sent at its release */
	uint64		session_gen;
	char		base[ZKLOCK_NODE_PATH_SIZE];
	char		node[ZKLOCK_NODE_NAME_SIZE];
} ReleasedReader;

static ReleasedReader released_readers[RELEASED_READERS];
static int	released_readers_next = 0;

/* what the lock engine calls, for the recipes that opt in (.local) */
const ZklockLocalLayer zklock_local_layer = {
	.create_alone = local_create_alone,
	.placed = lk_placed,
	.wait_behind = local_wait_behind,
	.settle_followers = settle_followers,
	.node_gone = lk_node_gone,
	.listed = zklock_known_listed,
	.created = zklock_known_created,
	.forget = zklock_known_forget,
	.may_skip = zklock_known_may_skip,
};

/*
 * May the create of idx's node (target t) go without the listing that
 * normally follows it on the session?  Yes when the node will most likely
 * sit right behind a node of this worker that then decides for it
 * (lk_placed; the rule is zklock_create_alone).  (The lock engine asks
 * may_skip, worker/handover_numbering.c, first.)  Caller holds the lock.
 */
static bool
local_create_alone(int idx, const LockTarget *t)
{
	bool		reader = t->rw;

	/* a write lock node always lists */
	if (t->rw && !t->read)
		return false;
	return zklock_create_alone(t->rw, t->read,
							   local_tail_owner(idx, t->base, NULL, reader) >= 0);
}

/*
 * A listing put idx (target t) behind pred with blockers nodes keeping it
 * out: when pred is a mutex node of this worker, wait for it locally (no
 * watch) and say true.  Caller holds the lock.
 */
static bool
local_wait_behind(int idx, const LockTarget *t, const char *pred, int blockers)
{
	int			owner;

	if (t->rw || (owner = local_node_owner(t->base, pred, idx)) < 0)
		return false;
	wait_locally(idx, pred, owner, blockers, false);
	return true;
}

/*
 * The create of a node sent without a listing took.  When the node
 * directly follows one of this worker's nodes (no node can sort between
 * them, see zklock_seq_follows), that node decides as a listing would:
 *
 * - a mutex node waits behind the mutex node that waits or holds there.
 *   Should that node have been deleted from outside meanwhile, the wait
 *   lasts until its owner releases it or finds it gone, never less.
 * - a read lock node right behind a read lock node has the same write
 *   nodes before it: none can be created before a node that exists, and
 *   nothing sorts between the two.  So Curator's read predicate (no write
 *   node before ours) gives the same answer for both: behind a held read
 *   lock, the lock is ours at once; behind a reader whose listing has not
 *   decided yet, its decision is ours too (settle_followers): granted
 *   with it, or we list when it has to wait; behind a read lock released
 *   since our create left, the lock is ours (follows_released_reader).
 *
 * Before that, the path's numbering (worker/handover_numbering.c): a create sent alone
 * because a listing taught that only this worker has nodes there is
 * first, and holds, when its number proves that nobody else created a
 * node since and no node of this worker is ahead (zklock_known_first).  A
 * write node is sent alone only then, and otherwise lists.
 *
 * Otherwise it lists.  Caller holds the lock.
 */
static void
lk_placed(int idx)
{
	LockTarget	t;
	int			owner;
	ZklockPlacement place;

	zklock_lk_target(idx, &t);
	/* a write node (sent alone only on what a listing taught) never follows */
	owner = (t.rw && !t.read) ? -1 : local_tail_owner(idx, t.base, t.node, t.rw);
	if (owner < 0 && zklock_known_first(idx, &t, zklock_reqs[idx].seq_proven))
	{
		/* no other client created a node, none of ours is ahead: first */
		zklock_req_set_wait(idx, ZKWS_NONE);
		zklock_reqs[idx].pred[0] = '\0';
		zklock_shared->listing_skip_count++;
		zklock_lk_granted(idx);
		return;
	}
	if (t.rw && !t.read)
	{
		zklock_lk_list(idx);
		return;
	}
	place = zklock_placement(owner >= 0,
							 owner >= 0 && zklock_shared->slots[owner].state == ZKS_ACTIVE,
							 t.rw,
							 owner < 0 && t.rw && follows_released_reader(idx, &t),
							 zklock_shared->slots[idx].try_only);
	switch (place)
	{
		case ZKLOCK_PLACE_LIST:
			zklock_lk_list(idx);
			break;
		case ZKLOCK_PLACE_JOIN_READER:
			join_reader(idx);
			break;
		case ZKLOCK_PLACE_GIVE_UP_TRY:
			zklock_give_up_try(idx);
			break;
		case ZKLOCK_PLACE_FOLLOW_READER:
		case ZKLOCK_PLACE_WAIT_BEHIND:
			{
				bool		follow = (place == ZKLOCK_PLACE_FOLLOW_READER);
				LockTarget	o;

				/* a follower shares the reader's decision: nothing blocks it yet */
				zklock_lk_target(owner, &o);
				wait_locally(idx, o.node, owner, follow ? 0 : 1, follow);
				break;
			}
	}
}

/*
 * Whether the read node of idx (target t) comes right after a read lock
 * this worker held and released only after idx's create was sent (see
 * released_readers).  Caller holds the lock.
 */
static bool
follows_released_reader(int idx, const LockTarget *t)
{
	int			k;

	for (k = 0; k < RELEASED_READERS; k++)
	{
		ReleasedReader *r = &released_readers[k];

		if (r->creates_before >= zklock_reqs[idx].create_no &&
			r->session_gen == zklock_shared->slots[idx].session_gen &&
			strcmp(r->base, t->base) == 0 &&
			zklock_seq_follows(r->node, t->node, t->lock_name))
			return true;
	}
	return false;
}

/*
 * Grant a read lock that shares the answer of the read node right before
 * its own (lk_placed).  Caller holds the lock.
 */
static void
join_reader(int idx)
{
	zklock_req_set_wait(idx, ZKWS_NONE);
	zklock_reqs[idx].pred[0] = '\0';
	zklock_shared->read_join_count++;
	zklock_lk_granted(idx);
}

/*
 * Local handover: the lock engine's answer to a release, without a
 * listing.  node, a lock node under base, was released and its delete is
 * about to be queued.  A waiter of this worker whose latest listing made
 * node the node it waits on is chosen to take the lock once node is gone
 * when it provably holds the lock then:
 *
 * - held_mutex: node held a plain mutex, so no node sorted below it; every
 *   node below the waiter existed when it listed (sequence numbers only
 *   grow), node was the highest of them and is now the lowest, so it is
 *   the only one left below the waiter;
 * - otherwise the waiter's listing showed node as the only node keeping it
 *   out (pred_last: the only node ahead of a writer, the only writer ahead
 *   of a reader), and nodes ahead of it can only go away, with one
 *   exception: the writer's own read node of a downgrade, made with the
 *   writer's sequence number.  A writer is not handed a lock whose releasing
 *   writer has such a twin in this worker (no other client can make one:
 *   it would have to hold the write lock, and node is the only node ahead).
 *
 * The waiter is not granted here.  It is marked (handover_wait: no watch,
 * local wait or follower rule moves it any more) and, when node's delete
 * is queued (lk_node_gone), it sends an exists of its own node
 * behind that delete; the server answers a session's requests in order,
 * so the delete's answer (which frees its pending-delete entry) says
 * whether node is gone, and the exists then whether the waiter's node is
 * still there (not deleted from outside).  Only then is it granted
 * (handover_check_done).  So nobody holds the lock while
 * node exists: a Curator Revoker writing into node, or another client
 * reading the participants, sees a node nobody holds, never a holder that
 * is not the one named.  The check costs one round trip, not a listing;
 * an answer lost with the connection (or a worker restart) leaves an
 * ungranted, ACTIVE request, which lists again like any other.  Several
 * readers may be chosen at once; an exclusive waiter only alone.  Done
 * only while connected and within the lease.  Returns how many waiters
 * were chosen.  Caller holds the lock.
 */
int
zklock_lk_hand_over(const char *base, const char *node, bool held_mutex)
{
	ZklockShared *sh = zklock_shared;
	int			cand[ZKLOCK_HANDOVER_MAX + 1];
	ZklockHandoverCandidate c[ZKLOCK_HANDOVER_MAX + 1];
	bool		take[ZKLOCK_HANDOVER_MAX + 1];
	int			ncand = 0;
	int			ntake;
	bool		twin = false;
	int			i;
	int			k;

	if (!zklock_connected || node[0] == '\0' ||
		!zklock_lease_valid(zklock_mono_now(), NULL))
		return 0;

	/*
	 * The slots indexed under base (worker/path_index.c).  A twin's slot is a
	 * read lock of P = base, so it is there too, once the worker picked it
	 * up; a downgrade the worker has not picked up yet cannot meet a
	 * release of its writer: its backend waits for it until it is granted
	 * or given back, and gives its writer back only after that (a give-back
	 * of it is applied before any withdrawal).
	 */
	for (i = zklock_pathidx_first(base); i >= 0; i = zklock_pathidx_next(i))
	{
		ZklockSlot *slot = &sh->slots[i];
		WorkerReq  *req = &zklock_reqs[i];
		LockTarget	t;

		if (slot->state != ZKS_FREE && slot->downgrade_seq[0] != '\0' &&
			strcmp(slot->path, base) == 0 &&
			strcmp(slot->downgrade_seq, zklock_rw_sort_key(node)) == 0)
			twin = true;
		/* a call on its way (the watch's getData) would move it too */
		if (slot->state != ZKS_ACTIVE || req->serial != slot->serial ||
			zklock_req_parked(req) || req->inflight != 0 ||
			req->pred[0] == '\0' || strcmp(req->pred, node) != 0)
			continue;
		zklock_lk_target(i, &t);
		if (t.node[0] == '\0' || strcmp(t.base, base) != 0)
			continue;
		if (ncand == lengthof(cand))
			return 0;			/* more than the protocol allows: be safe */
		cand[ncand] = i;
		c[ncand].rw = t.rw;
		c[ncand].read = t.read;
		c[ncand].pred_last = req->pred_last;
		ncand++;
	}
	ntake = zklock_handover_choice(c, ncand, held_mutex, twin,
								   ZKLOCK_HANDOVER_MAX, take);
	for (k = 0; k < ncand && ntake > 0; k++)
	{
		if (!take[k])
			continue;

		/* a watch on node, when there is one, must not list again */
		zklock_req_set_wait(cand[k], ZKWS_HANDOVER);
	}
	return ntake;
}

/*
 * The delete of pred (the released node) has just been recorded, and sent
 * when connected: the waiter idx chosen by zklock_lk_hand_over asks, behind
 * it on the same session, whether its own node is still there.  The
 * delete's answer comes first and frees its entry in the pending-delete
 * table.  No recorded delete (the table was full), or no connection: the
 * waiter lists again, now or once connected (after the pending deletes).
 * Caller holds the lock.
 */
static void
handover_check(int idx, const LockTarget *t)
{
	WorkerReq  *req = &zklock_reqs[idx];
	char		buf[ZKLOCK_NODE_PATH_SIZE];
	int			rc;

	if (!zklock_connected)
	{
		zklock_park(idx, false);
		return;
	}
	snprintf(buf, sizeof(buf), "%s/%s", t->base, req->pred);
	if (!zklock_delete_pending(buf))
	{
		zklock_lk_list(idx);
		return;
	}
	snprintf(buf, sizeof(buf), "%s/%s", t->base, t->node);
	zklock_batch_flush();		/* the queued delete of pred leaves first */
	/* still ZKWS_HANDOVER while the check is on its way */
	rc = zoo_aexists(zklock_zh, buf, 0, handover_check_done, zklock_slot_tag(idx));
	zklock_call_sent(idx, rc);
}

/*
 * Completion of the exists of the node of a waiter chosen for a local
 * handover, answered after the released node's delete.  The delete
 * answered (its entry freed: the released node is gone) and our node
 * there: the lock is ours, as a listing would say, and is granted (within
 * the lease).  Our node gone (deleted from outside: Curator's waiter would
 * find it missing and queue again), the delete not confirmed (refused, or
 * never sent: it is retried from the table), or no lease: the request
 * lists, the ordinary protocol.  Anything else is a failed call
 * (connection loss: park, and list once it is back).
 */
static void
handover_check_done(int rc, const struct Stat *stat, const void *data)
{
	int			idx = zklock_completion_begin(data);

	if (idx >= 0)
	{
		WorkerReq  *req = &zklock_reqs[idx];
		LockTarget	t;
		char		buf[ZKLOCK_NODE_PATH_SIZE];

		zklock_req_set_wait(idx, ZKWS_NONE);
		zklock_lk_target(idx, &t);
		snprintf(buf, sizeof(buf), "%s/%s", t.base, req->pred);
		if (rc == ZOK && !zklock_delete_pending(buf) && zklock_connected &&
			zklock_lease_valid(zklock_mono_now(), NULL))
		{
			req->pred[0] = '\0';
			zklock_shared->handover_count++;
			zklock_lk_granted(idx);
		}
		else if (rc == ZOK || rc == ZNONODE)
			zklock_lk_list(idx);
		else
			zklock_call_failed(idx, rc, "check the lock node handed over to");
	}
	LWLockRelease(zklock_shared->lock);
}

/*
 * Whether a released lock engine request of this worker (its withdrawal
 * not done yet) still has node under base.  Caller holds the lock.
 */
static bool
released_node_pending(const char *base, const char *node)
{
	ZklockShared *sh = zklock_shared;
	int			i;

	for (i = zklock_pathidx_first(base); i >= 0; i = zklock_pathidx_next(i))
	{
		LockTarget	t;

		if (sh->slots[i].state != ZKS_RELEASE ||
			zklock_worker_ops(sh->slots[i].op)->lock_target == NULL)
			continue;
		zklock_lk_target(i, &t);
		if (strcmp(t.node, node) == 0 && strcmp(t.base, base) == 0)
			return true;
	}
	return false;
}

/*
 * The slot (other than except) whose plain mutex node under base is name,
 * waiting or holding, or -1: a node of this worker.  Caller holds the
 * lock.
 */
static int
local_node_owner(const char *base, const char *name, int except)
{
	ZklockShared *sh = zklock_shared;
	int			i;

	for (i = zklock_pathidx_first(base); i >= 0; i = zklock_pathidx_next(i))
	{
		ZklockSlot *slot = &sh->slots[i];
		LockTarget	t;

		/* a lock target's node is the slot's node or its aux node */
		if (i == except || (slot->state != ZKS_ACTIVE && slot->state != ZKS_HELD) ||
			(strcmp(slot->nodes[ZKN_MAIN].name, name) != 0 &&
			 strcmp(slot->nodes[ZKN_LEASE_LOCK].name, name) != 0) ||
			zklock_worker_ops(slot->op)->local == NULL)
			continue;
		zklock_lk_target(i, &t);
		if (!t.rw && t.node[0] != '\0' && strcmp(t.node, name) == 0 &&
			strcmp(t.base, base) == 0)
			return i;
	}
	return -1;
}

/*
 * The node a mutex waiter waits behind (pred, with blockers nodes keeping
 * it out) is owner's node: no watch.  Its release hands the lock over
 * (zklock_lk_hand_over), its loss or withdrawal makes the waiter look again
 * (lk_node_gone), as the watch would.  Caller holds the lock.
 */
static void
wait_locally(int idx, const char *pred, int owner, int blockers, bool follow)
{
	WorkerReq  *req = &zklock_reqs[idx];

	strlcpy(req->pred, pred, sizeof(req->pred));
	strlcpy(zklock_shared->slots[idx].waits_on, pred,
			sizeof(zklock_shared->slots[idx].waits_on));
	req->pred_last = (blockers == 1);
	req->local.owner = owner;
	req->local.owner_serial = zklock_shared->slots[owner].serial;
	zklock_req_set_wait(idx, follow ? ZKWS_FOLLOWING : ZKWS_LOCAL);
}

/*
 * The slot (other than idx) whose node under base was created last before
 * after (after == NULL: any such node) in the current session, or -1:
 * without reader, a mutex node that waits or holds; with reader, a read
 * lock node whose lock is held (or released, but not yet withdrawn by the
 * worker: its delete has not left), or whose listing (or the reader it
 * follows) has yet to say whether it is, and with after == NULL also a
 * reader whose create is on its way.  A node of a parked request (its
 * session may be gone) does not count.  Caller holds the lock.
 */
static int
local_tail_owner(int idx, const char *base, const char *after, bool reader)
{
	ZklockShared *sh = zklock_shared;
	int			i;

	for (i = zklock_pathidx_first(base); i >= 0; i = zklock_pathidx_next(i))
	{
		ZklockSlot *slot = &sh->slots[i];
		WorkerReq  *req = &zklock_reqs[i];
		ZklockTailNode n;
		LockTarget	t;

		if (i == idx ||
			(slot->state != ZKS_ACTIVE && slot->state != ZKS_HELD &&
			 slot->state != ZKS_RELEASE) ||
			zklock_worker_ops(slot->op)->local == NULL)
			continue;
		/* what the rule refuses anyway, before the target is worked out */
		if (slot->session_gen != sh->session_gen || zklock_req_parked(req))
			continue;
		zklock_lk_target(i, &t);
		if (strcmp(t.base, base) != 0)
			continue;
		n.state = slot->state == ZKS_ACTIVE ? ZKLOCK_TAIL_WAITING :
			slot->state == ZKS_HELD ? ZKLOCK_TAIL_HOLDING : ZKLOCK_TAIL_RELEASED;
		n.current_session = (slot->session_gen == sh->session_gen);
		n.known = (req->serial == slot->serial);
		n.parked = zklock_req_parked(req);
		n.decided_to_wait = (req->pred[0] != '\0' && req->wait != ZKWS_FOLLOWING);
		n.rw = t.rw;
		n.read = t.read;
		n.downgrade = (slot->downgrade_seq[0] != '\0');
		n.has_node = (t.node[0] != '\0');
		n.create_sent = *t.create_sent;
		if (!zklock_tail_candidate(&n, reader, after == NULL))
			continue;
		if (after == NULL || zklock_seq_follows(t.node, after, t.lock_name))
			return i;
	}
	return -1;
}

/*
 * A request waiting on a node of this worker looks again, as the firing
 * of a watch would make it.  Caller holds the lock.
 */
static void
end_local_wait(int idx)
{
	zklock_req_set_wait(idx, ZKWS_NONE);
	zklock_continue_request(idx);
}

/*
 * The read lock request idx has its answer: the readers that follow its
 * node (lk_placed) share it.  Granted, they are granted (and so are their
 * own followers, through zklock_lk_granted); made to wait (or anything else),
 * they list and decide for themselves.  Caller holds the lock.
 */
static void
settle_followers(int idx, bool granted)
{
	ZklockShared *sh = zklock_shared;
	LockTarget	o;
	int			i;

	/* a follower's node is under its reader's base (lk_placed) */
	zklock_lk_target(idx, &o);
	for (i = zklock_pathidx_first(o.base); i >= 0; i = zklock_pathidx_next(i))
	{
		WorkerReq  *req = &zklock_reqs[i];

		if (req->wait != ZKWS_FOLLOWING || req->local.owner != idx ||
			req->local.owner_serial != sh->slots[idx].serial ||
			sh->slots[i].state != ZKS_ACTIVE || req->serial != sh->slots[i].serial)
			continue;
		if (granted)
			join_reader(i);
		else
			end_local_wait(i);
	}
}

/*
 * A node of this worker (path) is going away: a delete was queued for it
 * (sent at once when connected), or it vanished.  The requests that wait
 * on it without a watch look again; those chosen to take its lock
 * (handover_wait) send their check behind the delete.  Caller holds the
 * lock.
 */
static void
lk_node_gone(const char *path)
{
	ZklockShared *sh = zklock_shared;
	const char *name = strrchr(path, '/');
	char		base[ZKLOCK_NODE_PATH_SIZE];
	int			baselen;
	int			i;

	if (name == NULL)
		return;
	baselen = name - path;
	name++;
	if (baselen >= sizeof(base))
		return;					/* longer than any lock target's base */
	memcpy(base, path, baselen);
	base[baselen] = '\0';
	for (i = zklock_pathidx_first(base); i >= 0; i = zklock_pathidx_next(i))
	{
		WorkerReq  *req = &zklock_reqs[i];
		LockTarget	t;

		if (!(req->wait == ZKWS_LOCAL || req->wait == ZKWS_FOLLOWING ||
			  req->wait == ZKWS_HANDOVER) ||
			sh->slots[i].state != ZKS_ACTIVE ||
			req->serial != sh->slots[i].serial || req->inflight != 0 ||
			strcmp(req->pred, name) != 0)
			continue;
		zklock_lk_target(i, &t);
		if (strncmp(t.base, path, baselen) != 0 || t.base[baselen] != '\0')
			continue;
		if (req->wait == ZKWS_HANDOVER)
			handover_check(i, &t);
		else
			end_local_wait(i);
	}
}

/*
 * The safety net of local waits, run every second: a request whose local
 * predecessor is no longer its owner's node (by any way this worker did
 * not announce) looks again, and so does one chosen for a handover whose
 * released node is no longer being withdrawn.  Caller holds the lock.
 */
void
zklock_lk_check_local_waits(void)
{
	ZklockShared *sh = zklock_shared;
	int			i;

	for (i = 0; i < sh->nslots; i++)
	{
		WorkerReq  *req = &zklock_reqs[i];
		ZklockSlot *owner;
		LockTarget	t;

		if (!(req->wait == ZKWS_LOCAL || req->wait == ZKWS_FOLLOWING ||
			  req->wait == ZKWS_HANDOVER) ||
			sh->slots[i].state != ZKS_ACTIVE ||
			req->serial != sh->slots[i].serial || req->inflight != 0)
			continue;
		if (req->wait == ZKWS_HANDOVER)
		{
			/*
			 * Chosen for a handover whose check was not sent: its release
			 * waits for room in the pending-delete table, or ended some
			 * way this worker did not announce.  Only the latter lists.
			 */
			zklock_lk_target(i, &t);
			if (!released_node_pending(t.base, req->pred))
			{
				zklock_lk_list(i);
			}
			continue;
		}
		owner = &sh->slots[req->local.owner];
		/* a reader followed into a held read lock holds it too */
		if (req->wait == ZKWS_FOLLOWING && owner->serial == req->local.owner_serial &&
			owner->state == ZKS_HELD)
		{
			join_reader(i);
			continue;
		}
		/*
		 * An owner being given back (RELEASE, CANCEL) still has its node:
		 * its withdrawal hands over or queues the node's delete, which ends
		 * this wait; ending it here would miss the handover.
		 */
		if (owner->serial == req->local.owner_serial &&
			(owner->state == ZKS_ACTIVE || owner->state == ZKS_HELD ||
			 owner->state == ZKS_RELEASE || owner->state == ZKS_CANCEL))
		{
			zklock_lk_target(req->local.owner, &t);
			if (strcmp(t.node, req->pred) == 0)
				continue;
		}
		end_local_wait(i);
	}
}

/*
 * A lock engine lock was released by its backend (a released hook): it
 * goes to the local waiters next in line, if there are any, and a read
 * lock is remembered for the read nodes created just behind it
 * (released_readers).  Caller holds the lock.
 */
void
zklock_lk_released(int idx)
{
	LockTarget	t;

	zklock_lk_target(idx, &t);
	/* its delete must follow (lk_node_gone sends the checks) */
	if (t.final && !zklock_req_parked(&zklock_reqs[idx]) &&
		zklock_shared->slots[idx].session_gen == zklock_shared->session_gen)
		(void) zklock_lk_hand_over(t.base, t.node, !t.rw);
	if (t.final && t.read && t.node[0] != '\0' && !zklock_req_parked(&zklock_reqs[idx]) &&
		zklock_shared->slots[idx].downgrade_seq[0] == '\0' &&
		zklock_shared->slots[idx].session_gen == zklock_shared->session_gen)
	{
		ReleasedReader *r = &released_readers[released_readers_next];

		released_readers_next = (released_readers_next + 1) % RELEASED_READERS;
		r->creates_before = zklock_lk_creates_sent;
		r->session_gen = zklock_shared->session_gen;
		strlcpy(r->base, t.base, sizeof(r->base));
		strlcpy(r->node, t.node, sizeof(r->node));
	}
}

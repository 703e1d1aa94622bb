/*-------------------------------------------------------------------------
 *
 * worker/locks/handover_layer.c
 *	  The lock engine's handover layer: what one worker, seeing every
 *	  waiter and holder of its cluster, may decide without Curator's round
 *	  trips.  A waiter behind a node of this worker waits without a watch
 *	  (local waits); a release hands the lock to the waiter next in line
 *	  once ZooKeeper applied the released node's delete (local handover,
 *	  worker/locks/handover.c, whose banner has its sequence and outcomes); a
 *	  read node right behind a read node of this worker shares its answer
 *	  (read joins, with the ring of readers released lately); a create
 *	  behind a node of this worker is placed without a listing.  Why each
 *	  is safe: src/README ("Local handover") for the local waits,
 *	  doc/failure-model.md ("Read joins") for the read joins,
 *	  zklock_placement's comment (core/handover_rules.c) for the
 *	  placements; doc/failure-model.md says what a user may rely on.
 *
 *	  zklock_handover_layer		the table the lock engine calls (.handover)
 *	  zklock_node_gone_hook		told by worker/deletes/deletes.c of a node
 *								going away (registered here, where it is
 *								defined)
 *	  zklock_guard_answer_hook	told by it of a guarded delete's answer
 *	  zklock_layer_released		a release: choose the next holder, remember
 *								a released reader
 *	  zklock_layer_check_local_waits	the safety net of local waits (and of
 *								the handover), every second
 *
 *-------------------------------------------------------------------------
 */

#include "postgres.h"

#include "zklock.h"
#include "core/handover_rules.h"
#include "core/curator_rules.h"
#include "common/shmem.h"
#include "worker/locks/locks_int.h"

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

/*
 * One of the two ways up from worker/deletes/deletes.c (the other is
 * zklock_guard_answer_hook below): told when the delete of a node of this
 * worker is queued by name, so the waiters on that node look again (or
 * send their handover check).
 */
void		(*const zklock_node_gone_hook) (const char *path) = lk_node_gone;

/*
 * Told by worker/deletes/deletes.c of the answer to a guarded delete: the
 * node the lock was handed to was there when the released node went
 * (there), or it was gone (worker/locks/handover.c).
 */
void		(*const zklock_guard_answer_hook) (const char *path, const char *guard,
											   bool there) = zklock_handover_guard_answer;

/* what the lock engine calls, for the recipes that opt in (.handover) */
const ZklockHandoverLayer zklock_handover_layer = {
	.create_alone = local_create_alone,
	.placed = lk_placed,
	.wait_behind = local_wait_behind,
	.settle_followers = settle_followers,
	.node_gone = lk_node_gone,
	.listed = zklock_numbering_listed,
	.created = zklock_numbering_created,
	.forget = zklock_numbering_forget,
	.may_skip = zklock_numbering_may_skip,
};

/*
 * May the create of idx's node (target t) go without the listing that
 * normally follows it on the session?  Yes when the node will most likely
 * sit right behind a node of this worker that then decides for it
 * (lk_placed; the rule is zklock_create_alone).  (The lock engine asks
 * may_skip, worker/locks/handover_numbering.c, first.)  Caller holds the lock.
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
 * Before that, the path's numbering (worker/locks/handover_numbering.c): a
 * create sent alone because a listing taught that only this worker has nodes
 * there is first, and holds, when its number proves that nobody else created a
 * node since and no node of this worker is ahead (zklock_numbering_first).  A
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
	if (owner < 0 &&
		zklock_numbering_first(idx, &t, zklock_reqs[idx].seq_proven))
	{
		/* no other client created a node, none of ours is ahead: first */
		zklock_req_set_wait(idx, ZKWS_NONE);
		zklock_reqs[idx].pred[0] = '\0';
		zklock_shared->counters.listings_skipped++;
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
			zklock_req_give_up_try(idx);
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
	zklock_shared->counters.read_joins++;
	zklock_lk_granted(idx);
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
			zklock_worker_ops(slot->op)->handover == NULL)
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
 * (zklock_handover_choose), its loss or withdrawal makes the waiter look again
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
	req->follow.owner = owner;
	req->follow.owner_serial = zklock_shared->slots[owner].serial;
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
			zklock_worker_ops(slot->op)->handover == NULL)
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
	zklock_req_continue(idx);
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

		if (req->wait != ZKWS_FOLLOWING || req->follow.owner != idx ||
			req->follow.owner_serial != sh->slots[idx].serial ||
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
 * (ZKWS_HANDOVER) send their check behind the delete
 * (zklock_handover_node_gone).  Caller holds the lock.
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
			zklock_handover_node_gone(i, &t);
		else
			end_local_wait(i);
	}
}

/*
 * The safety net of local waits, run every second: a request whose local
 * predecessor is no longer its owner's node (by any way this worker did
 * not announce) looks again; then the handover's own net
 * (zklock_handover_safety_net).  Caller holds the lock.
 */
void
zklock_layer_check_local_waits(void)
{
	ZklockShared *sh = zklock_shared;
	int			i;

	for (i = 0; i < sh->nslots; i++)
	{
		WorkerReq  *req = &zklock_reqs[i];
		ZklockSlot *owner;
		LockTarget	t;

		if (!(req->wait == ZKWS_LOCAL || req->wait == ZKWS_FOLLOWING) ||
			sh->slots[i].state != ZKS_ACTIVE ||
			req->serial != sh->slots[i].serial || req->inflight != 0)
			continue;
		owner = &sh->slots[req->follow.owner];
		/* a reader followed into a held read lock holds it too */
		if (req->wait == ZKWS_FOLLOWING && owner->serial == req->follow.owner_serial &&
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
		if (owner->serial == req->follow.owner_serial &&
			(owner->state == ZKS_ACTIVE || owner->state == ZKS_HELD ||
			 owner->state == ZKS_RELEASE || owner->state == ZKS_CANCEL))
		{
			zklock_lk_target(req->follow.owner, &t);
			if (strcmp(t.node, req->pred) == 0)
				continue;
		}
		end_local_wait(i);
	}
	zklock_handover_safety_net();
}

/*
 * A lock engine lock was released by its backend (a released hook): it
 * goes to the local waiters next in line, if there are any, and a read
 * lock is remembered for the read nodes created just behind it
 * (released_readers); a mutex nobody of ours takes over may keep its node
 * (worker/locks/lock_cache.c).  Caller holds the lock.
 */
void
zklock_layer_released(int idx)
{
	LockTarget	t;
	int			handed_over = 0;

	zklock_lk_target(idx, &t);
	/* its delete must follow (lk_node_gone sends the checks) */
	if (t.final && !zklock_req_parked(&zklock_reqs[idx]) &&
		zklock_shared->slots[idx].session_gen == zklock_shared->session_gen)
		handed_over = zklock_handover_choose(t.base, t.node, !t.rw);
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
	/* nobody of ours takes it over: perhaps the node is kept (lock caching) */
	if (t.final && !t.rw)
		zklock_cache_keep(idx, &t, handed_over);
}

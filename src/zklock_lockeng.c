/*-------------------------------------------------------------------------
 *
 * zklock_lockeng.c
 *	  Curator's lock engine (LockInternals): create the protected node, list,
 *	  decide, watch the predecessor, adopt a node whose create reply was lost.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "zklock.h"
#include "zklock_worker_int.h"

static void lock_target(int idx, LockTarget *t);
static void lk_granted(int idx);
static void lk_create_done(int rc, const char *value, const struct Stat *stat,
						   const void *data);
static void lk_start_fresh(int idx);
static void lk_watch_done(int rc, const char *value, int value_len,
						  const struct Stat *stat, const void *data);
static void adopt_stat_done(int rc, const struct Stat *stat, const void *data);
static void lk_decide(int idx, char **children, int n);
static void lk_children_done(int rc, const struct String_vector *strings,
							 const void *data);
static int	local_node_owner(const char *base, const char *name, int except);
static int	local_tail_owner(int idx, const char *base, const char *after,
							 bool reader);
static void wait_locally(int idx, const char *pred, int owner, int blockers);
static void lk_placed(int idx);
static void join_reader(int idx);
static bool follows_released_reader(int idx, const LockTarget *t);
static void end_local_wait(int idx);
static void settle_followers(int idx, bool granted);
static void handover_check(int idx, const LockTarget *t);
static bool delete_pending(const char *path);
static void handover_check_done(int rc, const struct Stat *stat,
								const void *data);
static bool released_node_pending(const char *base, const char *node);

/* ---------------------------------------------------------------------
 * The lock engine: Curator's LockInternals for the mutex, both sides of
 * the read/write lock and the P/locks mutex of a lease.
 * ---------------------------------------------------------------------
 */

/*
 * Read locks of this worker released lately, newest last, for lk_placed: a
 * read node created right after one of them shares its answer (granted)
 * when its create left before the release did, because the released node's
 * delete left after the release, so the node still sorted before ours when
 * the server made ours.  lk_creates_sent numbers the creates of lock nodes.
 */
#define RELEASED_READERS	16

typedef struct ReleasedReader
{
	uint64		creates_before; /* lk_creates_sent at its release */
	uint64		session_gen;
	char		base[ZKLOCK_NODE_PATH_SIZE];
	char		node[ZKLOCK_NODE_NAME_SIZE];
} ReleasedReader;

static ReleasedReader released_readers[RELEASED_READERS];
static int	released_readers_next = 0;
static uint64 lk_creates_sent = 0;

/*
 * Where the lock engine works for a slot: the recipe says (its lock_target
 * hook).
 */
static void
lock_target(int idx, LockTarget *t)
{
	memset(t, 0, sizeof(*t));
	zklock_worker_ops(zklock_shared->slots[idx].op)->lock_target(idx, t);
}

/*
 * A lock_target for recipes whose lock is the request itself: lock nodes
 * named lock_name directly under P, in the slot's main node.
 */
void
zklock_lk_target_own(int idx, LockTarget *t, const char *lock_name, bool rw,
					 bool read)
{
	ZklockSlot *slot = &zklock_shared->slots[idx];

	strlcpy(t->base, slot->path, sizeof(t->base));
	t->node = slot->node;
	t->uuid = slot->uuid;
	t->lock_name = lock_name;
	t->create_sent = &zklock_reqs[idx].create_sent;
	t->rw = rw;
	t->read = read;
	t->final = true;
}

/*
 * The lock engine got the lock: the recipe says what follows (a grant, or
 * its next step).
 */
static void
lk_granted(int idx)
{
	LockTarget	t;

	zklock_worker_ops(zklock_shared->slots[idx].op)->lock_granted(idx);
	/* only read nodes are followed (lk_placed) */
	lock_target(idx, &t);
	if (t.read)
		settle_followers(idx, zklock_shared->slots[idx].state == ZKS_HELD);
}

/*
 * The connection is back: a lock engine request looks for its node (by
 * name, or by prefix when a create's reply was lost) or creates it.  A
 * downgrade node has a fixed name: its create is simply sent again
 * (NodeExists then means our earlier create was applied).
 */
void
zklock_lk_resume(int idx, bool recover)
{
	LockTarget	t;

	lock_target(idx, &t);
	if (zklock_shared->slots[idx].downgrade_seq[0] != '\0')
		zklock_lk_create(idx);
	else if (t.node[0] != '\0' || (recover && t.uuid[0] != '\0'))
		zklock_lk_list(idx);
	else
		zklock_lk_create(idx);
}

/*
 * Completion of the create of a lock node.
 */
static void
lk_create_done(int rc, const char *value, const struct Stat *stat, const void *data)
{
	int			idx = zklock_create_begin(rc, value, data);

	if (idx >= 0)
	{
		ZklockSlot *slot = &zklock_shared->slots[idx];
		bool		downgrade = (slot->downgrade_seq[0] != '\0');
		LockTarget	t;

		lock_target(idx, &t);
		if (rc == ZNODEEXISTS && downgrade)
		{
			/* our own earlier create whose reply was lost */
			*t.create_sent = false;
			if (!zklock_settle_cancel(idx))
				zklock_grant(idx);
		}
		else if (rc == ZOK)
		{
			zklock_create_took(idx, value, t.node, ZKLOCK_NODE_NAME_SIZE,
							   t.create_sent);
			if (t.final)
				slot->czxid = stat ? stat->czxid : 0;
			if (slot->revocable && t.final && slot->state == ZKS_ACTIVE)
				zklock_revoke_watch(idx);
			if (zklock_settle_cancel(idx))
				;
			else if (downgrade)
				zklock_grant(idx);
			else if (!zklock_reqs[idx].list_piped)
				lk_placed(idx);
			/* otherwise the pipelined listing decides */
		}
		else if (zklock_create_failed(idx, rc, t.uuid, t.create_sent, downgrade,
									  zklock_reqs[idx].list_piped,
									  "create a lock node for"))
			zklock_lk_create(idx);
	}
	LWLockRelease(zklock_shared->lock);
}

/*
 * Send the create of our lock node (preceded by container creates of the
 * parents when the last attempt found one missing) and, right behind it,
 * the listing of the lock's children: the session applies them in order,
 * so the listing already contains our node and the acquire costs one
 * round trip.  A mutex node queued behind a node of this worker that
 * waits or holds, and a read lock node queued behind a read lock node of
 * this worker that holds or is about to learn whether it does, go without
 * the listing: the create's reply most likely shows the node right behind
 * that one (lk_placed), and then the listing would tell nothing new.
 * Caller holds the lock.
 */
void
zklock_lk_create(int idx)
{
	ZklockSlot *slot = &zklock_shared->slots[idx];
	WorkerReq  *req = &zklock_reqs[idx];
	LockTarget	t;
	char		name[ZKLOCK_NODE_PATH_SIZE];
	const char *data = slot->revocable ? "" : slot->data;
	int			mode = ZOO_EPHEMERAL_SEQUENTIAL;
	int			rc;

	req->pred[0] = '\0';			/* a new node waits on nothing yet */
	req->handover_wait = false;

	if (!zklock_connected)
	{
		zklock_park(idx, false);
		return;
	}
	lock_target(idx, &t);
	if (t.uuid[0] == '\0' && !zklock_new_uuid(t.uuid))
	{
		zklock_slot_fail(idx, ERRCODE_INTERNAL_ERROR, "could not generate a random lock id");
		return;
	}
	if (req->need_parents)
	{
		zklock_create_containers(t.base, true);
		req->need_parents = false;
	}

	snprintf(name, sizeof(name), "%s/", t.base);
	zklock_protected_name(t.uuid, t.lock_name, name + strlen(name),
						  sizeof(name) - strlen(name));
	if (slot->downgrade_seq[0] != '\0')
	{
		/* a write holder's read lock sorts at the writer's place */
		strlcat(name, slot->downgrade_seq, sizeof(name));
		strlcpy(slot->node, strrchr(name, '/') + 1, sizeof(slot->node));
		mode = ZOO_EPHEMERAL;
	}
	rc = zoo_acreate2(zklock_zh, name, data, strlen(data), zklock_node_acl(), mode,
					  lk_create_done, zklock_slot_tag(idx));
	if (rc != ZOK)
	{
		zklock_park(idx, false);
		return;
	}
	slot->session_gen = zklock_shared->session_gen;
	req->inflight++;
	req->create_no = ++lk_creates_sent;
	*t.create_sent = true;
	if (slot->downgrade_seq[0] != '\0')
		req->list_piped = false;
	else if (t.rw)
		req->list_piped = !t.read || local_tail_owner(idx, t.base, NULL, true) < 0;
	else
		req->list_piped = local_tail_owner(idx, t.base, NULL, false) < 0;
	if (req->list_piped)
		zklock_lk_list(idx);
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
 * Otherwise it lists.  Caller holds the lock.
 */
static void
lk_placed(int idx)
{
	LockTarget	t;
	int			owner;

	lock_target(idx, &t);
	owner = local_tail_owner(idx, t.base, t.node, t.rw);
	if (owner < 0 && t.rw && follows_released_reader(idx, &t))
		join_reader(idx);
	else if (owner < 0)
		zklock_lk_list(idx);
	else if (t.rw && zklock_shared->slots[owner].state != ZKS_ACTIVE)
		join_reader(idx);
	else if (t.rw)
	{
		LockTarget	o;

		lock_target(owner, &o);
		wait_locally(idx, o.node, owner, 0);
		zklock_reqs[idx].follow_reader = true;
	}
	else if (zklock_shared->slots[idx].try_only)
		zklock_give_up_try(idx);
	else
	{
		LockTarget	o;

		lock_target(owner, &o);
		wait_locally(idx, o.node, owner, 1);
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
	zklock_reqs[idx].follow_reader = false;
	zklock_reqs[idx].local_wait = false;
	zklock_reqs[idx].pred[0] = '\0';
	zklock_shared->read_join_count++;
	lk_granted(idx);
}

/*
 * Start a fresh attempt of the lock engine: forget the old node.
 */
static void
lk_start_fresh(int idx)
{
	LockTarget	t;

	lock_target(idx, &t);
	if (t.node[0] != '\0')
	{
		char		buf[ZKLOCK_NODE_PATH_SIZE];

		/* our node is gone: whoever waits on it locally looks again */
		snprintf(buf, sizeof(buf), "%s/%s", t.base, t.node);
		zklock_lk_node_gone(buf);
	}
	t.node[0] = '\0';
	t.uuid[0] = '\0';
	zklock_lk_create(idx);
}

/*
 * Completion of getData+watch on the predecessor.
 */
static void
lk_watch_done(int rc, const char *value, int value_len, const struct Stat *stat,
			  const void *data)
{
	int			idx = zklock_completion_begin(data);

	if (idx >= 0)
	{
		if (rc == ZOK)
			zklock_reqs[idx].watching = true;
		else if (rc == ZNONODE)
			zklock_lk_list(idx);		/* predecessor already gone */
		else
			zklock_call_failed(idx, rc, "watch the zookeeper lock");
	}
	LWLockRelease(zklock_shared->lock);
}

/*
 * Completion of the stat of a node found by its protection prefix after a
 * lost create reply.  It is adopted only when the current session owns it
 * (an ephemeral node of an earlier session is deleted, never adopted, as
 * CURATOR-498 requires); adopting it also gives us its czxid, the fencing
 * token.  Then the request carries on with a fresh listing.
 */
static void
adopt_stat_done(int rc, const struct Stat *stat, const void *data)
{
	int			idx = zklock_completion_begin(data);

	if (idx >= 0)
	{
		ZklockSlot *slot = &zklock_shared->slots[idx];
		WorkerReq  *req = &zklock_reqs[idx];
		const clientid_t *cid = zklock_zh ? zoo_client_id(zklock_zh) : NULL;
		const ZklockWorkerOps *ops = zklock_worker_ops(slot->op);
		bool		ours = (rc == ZOK && stat != NULL && cid != NULL &&
							stat->ephemeralOwner == cid->client_id);
		LockTarget	t;

		lock_target(idx, &t);
		if (rc != ZOK && rc != ZNONODE)
			zklock_call_failed(idx, rc, "check the recovered node of");
		else if (ops->adopted && ops->adopted(idx, ours ? stat : NULL, rc == ZOK))
			;					/* a step of the recipe's own took it on */
		else if (ours)
		{
			strlcpy(t.node, req->adopt_name, ZKLOCK_NODE_NAME_SIZE);
			*t.create_sent = false;
			if (t.final)
				slot->czxid = stat->czxid;
			if (slot->revocable && t.final)
				zklock_revoke_watch(idx);
			zklock_lk_list(idx);
		}
		else
		{
			/* not ours after all (or gone): delete it if it is there, start over */
			if (rc == ZOK)
			{
				char		buf[ZKLOCK_NODE_PATH_SIZE];

				snprintf(buf, sizeof(buf), "%s/%s", t.base, req->adopt_name);
				zklock_queue_delete(buf, NULL);
			}
			lk_start_fresh(idx);
		}
	}
	LWLockRelease(zklock_shared->lock);
}

/*
 * Stat a node found by its protection prefix before adopting it.  Caller
 * holds the lock.
 */
void
zklock_adopt_check(int idx, const char *base, const char *name)
{
	char		buf[ZKLOCK_NODE_PATH_SIZE];

	strlcpy(zklock_reqs[idx].adopt_name, name, sizeof(zklock_reqs[idx].adopt_name));
	snprintf(buf, sizeof(buf), "%s/%s", base, name);
	if (zoo_aexists(zklock_zh, buf, 0, adopt_stat_done, zklock_slot_tag(idx)) != ZOK)
		zklock_park(idx, true);
	else
		zklock_reqs[idx].inflight++;
}

/*
 * Decide from the lock's children: hold, wait behind the predecessor (or
 * the lowest writer, for a reader), or recreate a lost node.  Caller holds
 * the lock.
 */
static void
lk_decide(int idx, char **children, int n)
{
	ZklockSlot *slot = &zklock_shared->slots[idx];
	WorkerReq  *req = &zklock_reqs[idx];
	LockTarget	t;
	ZklockLockDecision d;
	int			owner;

	lock_target(idx, &t);
	if (t.node[0] == '\0')
	{
		/* resumed after a lost create reply: find our node by its prefix */
		char		prefix[ZKLOCK_NODE_NAME_SIZE];
		int			found;

		zklock_protected_prefix(t.uuid, prefix);
		/* a create with the prefix may still land after this listing */
		zklock_note_doubt(idx, !t.final);
		found = zklock_find_protected(children, n, prefix);
		if (found < 0)
		{
			zklock_lk_create(idx);
			return;
		}
		/* check whose it is and learn its czxid before adopting it */
		zklock_adopt_check(idx, t.base, children[found]);
		return;
	}

	if (t.rw)
		zklock_rw_sort_children(children, n);
	else
		zklock_sort_children(children, n, ZKLOCK_LOCK_NAME);
	if (t.read)
		d = zklock_read_decide(children, n, t.node);
	else
		d = zklock_lock_decide(children, n, t.node, 1);

	/* a reader's answer is its followers' too */
	if (t.read && !d.holds)
		settle_followers(idx, false);
	if (d.lost)
	{
		if (++req->lost_retries > MAX_LOST_RETRIES)
			zklock_slot_fail(idx, ERRCODE_EXTERNAL_ROUTINE_EXCEPTION,
					  "zookeeper lock node under \"%s\" keeps disappearing",
					  slot->path + slot->user_path_off);
		else
			lk_start_fresh(idx);
	}
	else if (d.holds)
		lk_granted(idx);
	else if (slot->try_only)
		zklock_give_up_try(idx);
	else if (!t.rw &&
			 (owner = local_node_owner(t.base, children[d.watch_index], idx)) >= 0)
		wait_locally(idx, children[d.watch_index], owner, d.blockers);
	else
	{
		char		wpath[ZKLOCK_NODE_PATH_SIZE];
		int			rc;

		snprintf(wpath, sizeof(wpath), "%s/%s", t.base, children[d.watch_index]);
		rc = zoo_awget(zklock_zh, wpath, zklock_step_watcher, (void *) zklock_slot_tag(idx),
					   lk_watch_done, zklock_slot_tag(idx));
		zklock_call_sent(idx, rc);
		if (rc == ZOK)
		{
			strlcpy(req->pred, children[d.watch_index], sizeof(req->pred));
			strlcpy(slot->waits_on, req->pred, sizeof(slot->waits_on));
			req->pred_last = (d.blockers == 1);
		}
	}
}

/*
 * Completion of the child listing of a lock: the ghosts it shows are
 * deleted (their deletes leave before anything the decision sends), then
 * the request decides.
 */
static void
lk_children_done(int rc, const struct String_vector *strings, const void *data)
{
	int			idx;

	LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
	idx = zklock_tag_current(data);
	if (idx >= 0)
	{
		WorkerReq  *req = &zklock_reqs[idx];

		req->inflight--;
		if (req->skip_lists > 0)
		{
			/* listing pipelined behind a create that failed */
			req->skip_lists--;
			(void) zklock_settle_cancel(idx);
		}
		else if (zklock_settle_cancel(idx))
			;
		else if (rc == ZOK)
		{
			char	  **children;
			int			n = strings->count;
			LockTarget	t;

			/* late creates of our own requests go first (zklock_ghosts.c) */
			lock_target(idx, &t);
			zklock_delete_ghosts(t.base, strings->data, n);
			/* sort a copy of the pointers; the client frees the strings */
			children = palloc(sizeof(char *) * Max(n, 1));
			memcpy(children, strings->data, sizeof(char *) * n);
			lk_decide(idx, children, n);
			pfree(children);
		}
		else if (rc == ZNONODE)
		{
			/* the parent is gone, and our node with it */
			req->need_parents = true;
			lk_start_fresh(idx);
		}
		else
			zklock_call_failed(idx, rc, "list the zookeeper lock");
	}
	LWLockRelease(zklock_shared->lock);
}

/*
 * Ask for the children of the lock.  Caller holds the lock.
 */
void
zklock_lk_list(int idx)
{
	LockTarget	t;

	zklock_reqs[idx].pred[0] = '\0';	/* the new listing decides */
	zklock_reqs[idx].local_wait = false;
	zklock_reqs[idx].handover_wait = false;
	zklock_reqs[idx].follow_reader = false;
	lock_target(idx, &t);
	zklock_send_listing(idx, t.base, lk_children_done, false, false);
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
 * is queued (zklock_lk_node_gone), it sends an exists of its own node
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
	int			take[ZKLOCK_HANDOVER_MAX];
	int			ntake = 0;
	bool		exclusive = false;
	bool		twin = false;
	int			i;
	int			k;

	if (!zklock_connected || node[0] == '\0' ||
		!zklock_lease_valid(zklock_mono_now(), NULL))
		return 0;
	for (i = 0; i < sh->nslots; i++)
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
			req->parked || req->inflight != 0 ||
			req->pred[0] == '\0' || strcmp(req->pred, node) != 0)
			continue;
		lock_target(i, &t);
		if (t.node[0] == '\0' || strcmp(t.base, base) != 0)
			continue;
		if (t.rw ? !req->pred_last : !held_mutex)
			continue;
		if (!t.read)
			exclusive = true;
		if (ntake == lengthof(take))
			return 0;			/* more than the protocol allows: be safe */
		take[ntake++] = i;
	}
	if (ntake == 0 || (exclusive && (ntake > 1 || twin)))
		return 0;
	for (k = 0; k < ntake; k++)
	{
		WorkerReq  *req = &zklock_reqs[take[k]];

		/* a watch on node, when there is one, must not list again */
		req->handover_wait = true;
		req->watching = false;
		req->local_wait = false;
		req->follow_reader = false;
	}
	return ntake;
}

/*
 * Whether the pending-delete table holds the delete of the node at path by
 * name: recorded and not yet answered by the server (an answer, OK or
 * NoNode, frees the entry: the node is gone).  Caller holds the lock.
 */
static bool
delete_pending(const char *path)
{
	ZklockShared *sh = zklock_shared;
	int			i;

	for (i = 0; i < sh->ndeletes; i++)
	{
		if (zklock_deletes[i].serial != 0 && !zklock_deletes[i].by_prefix &&
			strcmp(zklock_deletes[i].path, path) == 0)
			return true;
	}
	return false;
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

	req->handover_wait = false;
	if (!zklock_connected)
	{
		zklock_park(idx, false);
		return;
	}
	snprintf(buf, sizeof(buf), "%s/%s", t->base, req->pred);
	if (!delete_pending(buf))
	{
		zklock_lk_list(idx);
		return;
	}
	snprintf(buf, sizeof(buf), "%s/%s", t->base, t->node);
	rc = zoo_aexists(zklock_zh, buf, 0, handover_check_done, zklock_slot_tag(idx));
	if (rc == ZOK)
		req->handover_wait = true;
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

		req->handover_wait = false;
		lock_target(idx, &t);
		snprintf(buf, sizeof(buf), "%s/%s", t.base, req->pred);
		if (rc == ZOK && !delete_pending(buf) && zklock_connected &&
			zklock_lease_valid(zklock_mono_now(), NULL))
		{
			req->pred[0] = '\0';
			zklock_shared->handover_count++;
			lk_granted(idx);
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

	for (i = 0; i < sh->nslots; i++)
	{
		LockTarget	t;

		if (sh->slots[i].state != ZKS_RELEASE ||
			zklock_worker_ops(sh->slots[i].op)->lock_target == NULL)
			continue;
		lock_target(i, &t);
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

	for (i = 0; i < sh->nslots; i++)
	{
		ZklockSlot *slot = &sh->slots[i];
		LockTarget	t;

		/* a lock target's node is the slot's node or its aux node */
		if (i == except || (slot->state != ZKS_ACTIVE && slot->state != ZKS_HELD) ||
			(strcmp(slot->node, name) != 0 && strcmp(slot->aux_node, name) != 0) ||
			zklock_worker_ops(slot->op)->lock_target == NULL)
			continue;
		lock_target(i, &t);
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
 * (zklock_lk_node_gone), as the watch would.  Caller holds the lock.
 */
static void
wait_locally(int idx, const char *pred, int owner, int blockers)
{
	WorkerReq  *req = &zklock_reqs[idx];

	strlcpy(req->pred, pred, sizeof(req->pred));
	strlcpy(zklock_shared->slots[idx].waits_on, pred,
			sizeof(zklock_shared->slots[idx].waits_on));
	req->pred_last = (blockers == 1);
	req->pred_slot = owner;
	req->pred_serial = zklock_shared->slots[owner].serial;
	req->local_wait = true;
	req->watching = true;
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

	for (i = 0; i < sh->nslots; i++)
	{
		ZklockSlot *slot = &sh->slots[i];
		LockTarget	t;

		if (i == idx || slot->session_gen != sh->session_gen ||
			!(slot->state == ZKS_ACTIVE || slot->state == ZKS_HELD ||
			  (reader && slot->state == ZKS_RELEASE &&
			   zklock_reqs[i].serial == slot->serial)) ||
			zklock_reqs[i].parked ||
			zklock_worker_ops(slot->op)->lock_target == NULL)
			continue;
		/* a reader waiting on a writer has decided: it is no guide */
		if (reader && slot->state == ZKS_ACTIVE &&
			(zklock_reqs[i].serial != slot->serial ||
			 (zklock_reqs[i].pred[0] != '\0' && !zklock_reqs[i].follow_reader)))
			continue;
		lock_target(i, &t);
		/* a write holder's read node carries its writer's number */
		if (t.rw != reader || (reader && (!t.read || slot->downgrade_seq[0] != '\0')) ||
			strcmp(t.base, base) != 0)
			continue;
		/* a reader's create on its way will be answered before ours */
		if (t.node[0] == '\0' &&
			!(reader && after == NULL && slot->state == ZKS_ACTIVE && *t.create_sent))
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
	WorkerReq  *req = &zklock_reqs[idx];

	req->local_wait = false;
	req->follow_reader = false;
	req->watching = false;
	zklock_continue_request(idx);
}

/*
 * The read lock request idx has its answer: the readers that follow its
 * node (lk_placed) share it.  Granted, they are granted (and so are their
 * own followers, through lk_granted); made to wait (or anything else),
 * they list and decide for themselves.  Caller holds the lock.
 */
static void
settle_followers(int idx, bool granted)
{
	ZklockShared *sh = zklock_shared;
	int			i;

	for (i = 0; i < sh->nslots; i++)
	{
		WorkerReq  *req = &zklock_reqs[i];

		if (!req->follow_reader || !req->local_wait || req->pred_slot != idx ||
			req->pred_serial != sh->slots[idx].serial ||
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
void
zklock_lk_node_gone(const char *path)
{
	ZklockShared *sh = zklock_shared;
	const char *name = strrchr(path, '/');
	int			baselen;
	int			i;

	if (name == NULL)
		return;
	baselen = name - path;
	name++;
	for (i = 0; i < sh->nslots; i++)
	{
		WorkerReq  *req = &zklock_reqs[i];
		LockTarget	t;

		if (!(req->local_wait || req->handover_wait) ||
			sh->slots[i].state != ZKS_ACTIVE ||
			req->serial != sh->slots[i].serial || req->inflight != 0 ||
			strcmp(req->pred, name) != 0)
			continue;
		lock_target(i, &t);
		if (strncmp(t.base, path, baselen) != 0 || t.base[baselen] != '\0')
			continue;
		if (req->handover_wait)
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

		if (!(req->local_wait || req->handover_wait) ||
			sh->slots[i].state != ZKS_ACTIVE ||
			req->serial != sh->slots[i].serial || req->inflight != 0)
			continue;
		if (req->handover_wait)
		{
			/*
			 * Chosen for a handover whose check was not sent: its release
			 * waits for room in the pending-delete table, or ended some
			 * way this worker did not announce.  Only the latter lists.
			 */
			lock_target(i, &t);
			if (!released_node_pending(t.base, req->pred))
			{
				req->handover_wait = false;
				zklock_lk_list(i);
			}
			continue;
		}
		owner = &sh->slots[req->pred_slot];
		/* a reader followed into a held read lock holds it too */
		if (req->follow_reader && owner->serial == req->pred_serial &&
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
		if (owner->serial == req->pred_serial &&
			(owner->state == ZKS_ACTIVE || owner->state == ZKS_HELD ||
			 owner->state == ZKS_RELEASE || owner->state == ZKS_CANCEL))
		{
			lock_target(req->pred_slot, &t);
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

	lock_target(idx, &t);
	/* its delete must follow (zklock_lk_node_gone sends the checks) */
	if (t.final && !zklock_reqs[idx].parked &&
		zklock_shared->slots[idx].session_gen == zklock_shared->session_gen)
		(void) zklock_lk_hand_over(t.base, t.node, !t.rw);
	if (t.final && t.read && t.node[0] != '\0' && !zklock_reqs[idx].parked &&
		zklock_shared->slots[idx].downgrade_seq[0] == '\0' &&
		zklock_shared->slots[idx].session_gen == zklock_shared->session_gen)
	{
		ReleasedReader *r = &released_readers[released_readers_next];

		released_readers_next = (released_readers_next + 1) % RELEASED_READERS;
		r->creates_before = lk_creates_sent;
		r->session_gen = zklock_shared->session_gen;
		strlcpy(r->base, t.base, sizeof(r->base));
		strlcpy(r->node, t.node, sizeof(r->node));
	}
}

/*
 * Completion of the sync that goes ahead of a commit confirmation's exists:
 * an answer means the leader answered, and the exists behind it (the
 * server keeps a session's requests in order) reads what the leader had
 * at that point.  A sync that fails fails the confirmation.
 */
static void
confirm_sync_done(int rc, const char *value, const void *data)
{
	int			idx = zklock_completion_begin(data);

	if (idx >= 0 && rc != ZOK)
		zklock_call_failed(idx, rc, "sync with the zookeeper leader");
	LWLockRelease(zklock_shared->lock);
}

/*
 * Completion of a commit confirmation (zklock.commit_confirm): the held
 * node must exist and be an ephemeral node of the session we have now.
 * The answer itself also proves the session alive: it extends nothing
 * here, the backend checks the lease after it.
 */
void
zklock_confirm_stat_done(int rc, const struct Stat *stat, const void *data)
{
	int			idx = zklock_completion_begin(data);

	if (idx >= 0)
	{
		const clientid_t *cid = zklock_zh ? zoo_client_id(zklock_zh) : NULL;

		if (rc == ZOK)
			zklock_slot_finish(idx, ZKR_OK,
						(cid != NULL && stat->ephemeralOwner == cid->client_id) ? 1 : 0);
		else if (rc == ZNONODE)
			zklock_slot_finish(idx, ZKR_OK, 0);
		else
			zklock_call_failed(idx, rc, "confirm the lock");
	}
	LWLockRelease(zklock_shared->lock);
}

/*
 * Start a commit confirmation (zklock.commit_confirm): a sync, so that
 * the answer comes through the leader (a follower cut off from it would
 * answer an exists from its stale copy), then an exists of the held node,
 * whose path below P the slot's data names.
 */
void
zklock_confirm_start(int idx)
{
	ZklockSlot *slot = &zklock_shared->slots[idx];
	char		buf[ZKLOCK_NODE_PATH_SIZE];
	int			rc;

	snprintf(buf, sizeof(buf), "%s/%s", slot->path, slot->data);
	rc = zoo_async(zklock_zh, buf, confirm_sync_done, zklock_slot_tag(idx));
	zklock_call_sent(idx, rc);
	if (rc != ZOK)
		return;
	zklock_call_sent(idx, zoo_aexists(zklock_zh, buf, 0, zklock_confirm_stat_done,
					 zklock_slot_tag(idx)));
}

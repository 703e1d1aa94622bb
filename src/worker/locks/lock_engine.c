/*-------------------------------------------------------------------------
 *
 * worker/locks/lock_engine.c
 *	  Curator's lock engine (LockInternals with StandardLockInternalsDriver),
 *	  as asynchronous steps of the worker: create the protected node, list,
 *	  decide, watch the predecessor, adopt a node whose create reply was
 *	  lost.  Read it side by side with Curator:
 *
 *	  Curator (5.4/5.7)                       here
 *	  --------------------------------------  ------------------------------
 *	  LockInternals.attemptLock: loop of      zklock_lk_create, then
 *	    createsTheLock + internalLockLoop,      lk_children_done -> lk_decide;
 *	    again on NoNode                         lk_start_fresh on NoNode
 *	  StandardLockInternalsDriver             zklock_lk_create:
 *	    .createsTheLock: create()               zoo_acreate2 of _c_<uuid>-
 *	    .creatingParentContainersIfNeeded()     <lock_name>, parents as
 *	    .withProtection()                       containers once a create
 *	    .withMode(EPHEMERAL_SEQUENTIAL)         found one missing
 *	  CreateBuilderImpl protection: after     zklock_lk_resume (recover),
 *	    ConnectionLoss, find our node by        lk_decide looks by prefix,
 *	    its prefix                              zklock_lk_adopt_check adopts
 *	  internalLockLoop: getSortedChildren     lk_children_done (the listing,
 *	    (sorted by fixForSorting)               sorted by zklock_sort_children
 *	                                            or zklock_rw_sort_children)
 *	  driver.getsTheLock: ourIndex <          zklock_lock_decide /
 *	    maxLeases, else watch                   zklock_read_decide
 *	    children[ourIndex - maxLeases];         (core/curator_rules.c);
 *	    validateOurIndex: our node gone         d.lost -> lk_start_fresh
 *	  getData().usingWatcher(watcher) on      lk_decide: zoo_awget of the
 *	    the predecessor; NoNode: loop           predecessor, lk_watch_done;
 *	                                            the watch:
 *	                                            zklock_req_step_watcher
 *	  checkRevocableWatcher / revocable-      zklock_revoke_watch
 *	    Watcher (makeRevocable)                 (worker/revocation_watch.c) on grant
 *	  deleteOurPath on failure or timeout     the request layer records the
 *	                                            node's delete
 *	                                            (record_slot_deletes)
 *	  releaseLock: deleteOurPath              the same, on withdraw
 *
 *	  Where zklock does more than Curator can, it is the handover layer
 *	  (worker/locks/handover_layer.c), reached only through the recipe's ops
 *	  entry (.handover, lk_handover() below): a create sent without its listing
 *	  (create_alone, then placed; also when the path's sequence numbers
 *	  can prove it first: listed, created, forget,
 *	  worker/locks/handover_numbering.c), a wait without a watch behind a node
 *	  of this worker (wait_behind), a reader's answer shared with the readers
 *	  right behind it (settle_followers), and a node going away
 *	  (node_gone).  Without .handover this file is Curator's engine alone.
 *
 *	  zklock_lk_create					create the request's protected node
 *	  zklock_lk_list					ask for the children of the lock
 *	  zklock_lk_adopt_check				stat a node found by its protection
 *										prefix before adopting it
 *	  zklock_lk_resume					the connection is back: look for the
 *										node, or create it
 *	  zklock_lk_target					where the lock engine works for a slot
 *										(the recipe's lock_target hook)
 *	  zklock_lk_target_own				a lock_target for recipes whose lock is
 *										the request itself
 *	  zklock_lk_granted					the lock engine got the lock: the
 *										recipe's next step
 *	  zklock_lk_creates_sent			creates of lock nodes sent, ever
 *
 *-------------------------------------------------------------------------
 */

#include "postgres.h"

#include "zklock.h"
#include "core/curator_rules.h"
#include "common/shmem.h"
#include "worker/locks/locks_int.h"

static void lk_create_done(int rc, const char *value, const struct Stat *stat,
						   const void *data);
static void lk_start_fresh(int idx);
static bool lk_downgrade_allowed(int idx);
static void lk_watch_done(int rc, const char *value, int value_len,
						  const struct Stat *stat, const void *data);
static void adopt_stat_done(int rc, const struct Stat *stat, const void *data);
static void lk_decide(int idx, char **children, int n);
static const char *lk_guard(int idx, const LockTarget *t, char **children,
							int n);
static void lk_children_done(int rc, const struct String_vector *strings,
							 const struct Stat *stat, const void *data);
static void lk_parent_listed(int rc, const struct String_vector *strings,
							 const void *data);

/* creates of lock nodes sent, ever (worker/locks/handover_layer.c reads it) */
uint64		zklock_lk_creates_sent = 0;

/*
 * The handover layer of the recipe of slot idx, or NULL when the recipe did
 * not opt in (its ops entry's .handover): then this file is Curator's
 * LockInternals alone.
 */
static inline const ZklockHandoverLayer *
lk_handover(int idx)
{
	return zklock_worker_ops(zklock_shared->slots[idx].op)->handover;
}

/*
 * Where the lock engine works for a slot: the recipe says (its
 * lock_target hook).
 */
void
zklock_lk_target(int idx, LockTarget *t)
{
	memset(t, 0, sizeof(*t));
	zklock_worker_ops(zklock_shared->slots[idx].op)->lock_target(idx, t);
}

/*
 * A zklock_lk_target for recipes whose lock is the request itself: lock nodes
 * named lock_name directly under P, in the slot's main node.  Their listing
 * of P is looked at by the path guard as the mutex's, the read/write
 * lock's or the leader latch's (by lock_name).
 */
void
zklock_lk_target_own(int idx, LockTarget *t, const char *lock_name, bool rw,
					 bool read)
{
	ZklockSlot *slot = &zklock_shared->slots[idx];

	strlcpy(t->base, slot->path, sizeof(t->base));
	t->node = slot->nodes[ZKN_MAIN].name;
	t->uuid = slot->nodes[ZKN_MAIN].uuid;
	t->lock_name = lock_name;
	t->create_sent = &zklock_reqs[idx].nodes[ZKN_MAIN].create_sent;
	t->rw = rw;
	t->read = read;
	t->final = true;
	t->guard = rw ? ZKG_RWLOCK :
		strcmp(lock_name, ZKLOCK_LATCH_NAME) == 0 ? ZKG_LATCH : ZKG_MUTEX;
}

/*
 * The lock engine got the lock: the recipe says what follows (a grant, or
 * its next step).
 */
void
zklock_lk_granted(int idx)
{
	LockTarget	t;

	zklock_worker_ops(zklock_shared->slots[idx].op)->lock_granted(idx);
	/* only read nodes are followed (the handover layer's placed) */
	zklock_lk_target(idx, &t);
	if (t.read && lk_handover(idx) != NULL)
		lk_handover(idx)->settle_followers(idx, zklock_shared->slots[idx].state == ZKS_HELD);
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

	zklock_lk_target(idx, &t);
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
	int			idx = zklock_req_create_begin(rc, value, data);

	if (idx >= 0)
	{
		ZklockSlot *slot = &zklock_shared->slots[idx];
		bool		downgrade = (slot->downgrade_seq[0] != '\0');
		LockTarget	t;

		zklock_lk_target(idx, &t);
		if (rc == ZNODEEXISTS && downgrade)
		{
			/* our own earlier create whose reply was lost */
			*t.create_sent = false;
			if (!zklock_req_settle_cancel(idx))
				zklock_req_grant(idx);
		}
		else if (rc == ZOK)
		{
			zklock_req_create_took(idx, value, t.node, ZKLOCK_NODE_NAME_SIZE,
								   t.create_sent);
			/* count it in the path's numbering (a fixed name is not counted) */
			zklock_reqs[idx].seq_proven = false;
			if (lk_handover(idx) != NULL && downgrade)
				lk_handover(idx)->forget(t.base);
			else if (lk_handover(idx) != NULL)
				zklock_reqs[idx].seq_proven = lk_handover(idx)->created(t.base, t.node);
			if (t.final)
				slot->czxid = stat ? stat->czxid : 0;
			if (slot->revocable && t.final && slot->state == ZKS_ACTIVE)
				zklock_revoke_watch(idx);
			if (zklock_req_settle_cancel(idx))
				;
			else if (downgrade)
				zklock_req_grant(idx);
			else if (!zklock_reqs[idx].list_piped)
				lk_handover(idx)->placed(idx); /* only it sends a create alone */
			/* otherwise the pipelined listing decides */
		}
		else
		{
			/* the parent may be gone, or a create of ours lost: list again */
			if (lk_handover(idx) != NULL)
				lk_handover(idx)->forget(t.base);
			if (zklock_req_create_failed(idx, rc, t.uuid, t.create_sent, downgrade,
										 zklock_reqs[idx].list_piped,
										 "create a lock node for"))
				zklock_lk_create(idx);
		}
	}
	zklock_req_completion_end();
}

/*
 * May the downgrade of slot idx (a read lock with downgrade_seq) make its
 * node now?  Only while the same backend's write lock on the same path is
 * HELD, not given back, in the worker's current session, by a write node
 * ending in downgrade_seq (zklock_downgrade_may_create).  The backend
 * decided to downgrade from a write lock that looked held when it asked;
 * the session that held it may have been lost since (the lease ran out,
 * the server expired it), and a read node made in the next session with
 * the lost writer's number would sort ahead of the writer that holds the
 * lock now.  Caller holds the lock.
 */
static bool
lk_downgrade_allowed(int idx)
{
	ZklockShared *sh = zklock_shared;
	ZklockSlot *slot = &sh->slots[idx];
	uint64		current = sh->have_session ? sh->session_gen : 0;
	int			i;

	for (i = 0; i < sh->nslots; i++)
	{
		ZklockSlot *w = &sh->slots[i];

		if (i == idx || w->state != ZKS_HELD ||
			!(zklock_worker_ops(w->op)->flags & ZKW_DOWNGRADE_FROM) ||
			w->pid != slot->pid || w->procno != slot->procno ||
			strcmp(w->path, slot->path) != 0 || zklock_give_back_pending(w))
			continue;
		if (zklock_downgrade_may_create(true, w->session_gen, current,
										w->nodes[ZKN_MAIN].name,
										slot->downgrade_seq))
			return true;
	}
	return false;
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
 * that one (lk_placed), and then the listing would tell nothing new; so
 * does a create on a path whose numbering will prove it first or not
 * (worker/locks/handover_numbering.c).  A create that goes alone waits for the
 * end of the worker's pass in the batch (worker/batch.c).  Caller holds the
 * lock.
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
	bool		by_numbers;
	bool		list_piped;
	bool		batched;
	int			rc;

	req->pred[0] = '\0';			/* a new node waits on nothing yet */
	if (req->wait == ZKWS_HANDOVER)
		zklock_req_set_wait(idx, ZKWS_NONE);

	/* a downgrade takes its writer's place only while the writer holds it */
	if (slot->downgrade_seq[0] != '\0' && !lk_downgrade_allowed(idx))
	{
		zklock_req_fail(idx, ERRCODE_CONNECTION_FAILURE,
						"zookeeper write lock \"%s\" is not held in the current zookeeper session: it was not downgraded to a read lock",
						slot->path + slot->user_path_off);
		return;
	}
	if (!zklock_connected)
	{
		zklock_req_park(idx, false);
		return;
	}
	zklock_lk_target(idx, &t);
	/* a node kept on the path (locks/lock_cache.c): ours, or given up first */
	if (zklock_cache_take(idx, &t))
	{
		zklock_lk_granted(idx);
		return;
	}
	if (t.uuid[0] == '\0' && !zklock_zkio_new_uuid(t.uuid))
	{
		zklock_req_fail(idx, ERRCODE_INTERNAL_ERROR, "could not generate a random lock id");
		return;
	}
	if (req->need_parents)
	{
		/* a step under P makes P/locks: first, is P another recipe's? */
		if (t.parent_guard != ZKG_NONE && !req->parent_guarded)
		{
			char		parent[ZKLOCK_NODE_PATH_SIZE];

			strlcpy(parent, t.base, sizeof(parent));
			*strrchr(parent, '/') = '\0';
			zklock_req_send_listing(idx, parent, lk_parent_listed, false, false);
			return;
		}
		zklock_zkio_create_containers(t.base, true);
		req->need_parents = false;
	}

	snprintf(name, sizeof(name), "%s/", t.base);
	zklock_protected_name(t.uuid, t.lock_name, name + strlen(name),
						  sizeof(name) - strlen(name));
	if (slot->downgrade_seq[0] != '\0')
	{
		/* a write holder's read lock sorts at the writer's place */
		strlcat(name, slot->downgrade_seq, sizeof(name));
		strlcpy(slot->nodes[ZKN_MAIN].name, strrchr(name, '/') + 1,
				sizeof(slot->nodes[ZKN_MAIN].name));
		mode = ZOO_EPHEMERAL;
	}
	/*
	 * the path's numbering will tell whether it is first
	 * (worker/locks/handover_numbering.c)
	 */
	by_numbers = (slot->downgrade_seq[0] == '\0' && lk_handover(idx) != NULL &&
				  lk_handover(idx)->may_skip(idx, &t));
	if (slot->downgrade_seq[0] != '\0' || by_numbers)
		list_piped = false;
	else
		list_piped = (lk_handover(idx) == NULL ||
					  !lk_handover(idx)->create_alone(idx, &t));

	/*
	 * A create that goes alone on the path's numbering waits for the end
	 * of the pass, to leave in one multi with the others
	 * (worker/batch.c), unless it is a read node: a reader may share the
	 * answer of a reader released after its create left
	 * (worker/locks/handover_layer.c's released_readers), which counts on the
	 * create leaving when it is numbered.  A create alone behind a node of
	 * this worker is not batched: with no other lock's create to share the
	 * multi, the exists that gives a batch its token would only cost a round
	 * trip.  Anything else leaves now, behind the deletes queued so far (a
	 * backend's release goes ahead of its next acquire).
	 */
	batched = (by_numbers && !t.read && mode == ZOO_EPHEMERAL_SEQUENTIAL &&
			   zklock_batch_create(name, data, strlen(data), mode, zklock_zkio_node_acl(),
								   lk_create_done, zklock_zkio_slot_tag(idx)));
	if (!batched)
	{
		zklock_batch_flush();
		rc = zoo_acreate2(zklock_zh, name, data, strlen(data), zklock_zkio_node_acl(), mode,
						  lk_create_done, zklock_zkio_slot_tag(idx));
		if (rc != ZOK)
		{
			zklock_req_park(idx, false);
			return;
		}
	}
	slot->session_gen = zklock_shared->session_gen;
	req->inflight++;
	req->create_no = ++zklock_lk_creates_sent;
	*t.create_sent = true;
	req->list_piped = list_piped;
	if (req->list_piped)
		zklock_lk_list(idx);
}

/*
 * Completion of the listing of P that a step under P (a semaphore's
 * P/locks mutex) makes once, when its parents are missing: the path guard
 * (core/recipe_guard.c) looks at P's children, and the request fails with
 * 22023 naming what P holds, before anything of ours is made under P; P
 * missing or nobody's, the create goes on.  So the guard costs a round
 * trip only when the semaphore's directories are made, not per acquire.
 */
static void
lk_parent_listed(int rc, const struct String_vector *strings, const void *data)
{
	int			idx = zklock_req_listing_begin(data);

	if (idx >= 0)
	{
		ZklockSlot *slot = &zklock_shared->slots[idx];
		LockTarget	t;
		const char *held = NULL;

		zklock_lk_target(idx, &t);
		if (rc == ZOK)
			held = zklock_guard_children(t.parent_guard, strings->data,
										 strings->count, NULL);
		if (held != NULL)
			zklock_req_fail(idx, ERRCODE_INVALID_PARAMETER_VALUE,
							"zookeeper path \"%s\" holds %s, not %s",
							slot->path + slot->user_path_off, held,
							zklock_guard_recipe_name(t.parent_guard));
		else if (rc == ZOK || rc == ZNONODE)
		{
			zklock_reqs[idx].parent_guarded = true;
			zklock_lk_create(idx);
		}
		else
			zklock_req_call_failed(idx, rc, "list the parent of the lock");
	}
	zklock_req_completion_end();
}

/*
 * Start a fresh attempt of the lock engine: forget the old node.
 */
static void
lk_start_fresh(int idx)
{
	LockTarget	t;

	zklock_lk_target(idx, &t);
	if (t.node[0] != '\0')
	{
		char		buf[ZKLOCK_NODE_PATH_SIZE];

		/* our node is gone: whoever waits on it locally looks again */
		snprintf(buf, sizeof(buf), "%s/%s", t.base, t.node);
		if (lk_handover(idx) != NULL)
			lk_handover(idx)->node_gone(buf);
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
	int			idx = zklock_req_completion_begin(data);

	if (idx >= 0)
	{
		if (rc == ZOK)
			zklock_req_set_wait(idx, ZKWS_WATCHING);
		else if (rc == ZNONODE)
			zklock_lk_list(idx);		/* predecessor already gone */
		else
			zklock_req_call_failed(idx, rc, "watch the zookeeper lock");
	}
	zklock_req_completion_end();
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
	int			idx = zklock_req_completion_begin(data);

	if (idx >= 0)
	{
		ZklockSlot *slot = &zklock_shared->slots[idx];
		WorkerReq  *req = &zklock_reqs[idx];
		const clientid_t *cid = zklock_zh ? zoo_client_id(zklock_zh) : NULL;
		const ZklockWorkerOps *ops = zklock_worker_ops(slot->op);
		bool		ours = (rc == ZOK && stat != NULL && cid != NULL &&
							stat->ephemeralOwner == cid->client_id);
		LockTarget	t;

		zklock_lk_target(idx, &t);
		if (rc != ZOK && rc != ZNONODE)
			zklock_req_call_failed(idx, rc, "check the recovered node of");
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
				zklock_deletes_queue(buf, NULL);
			}
			lk_start_fresh(idx);
		}
	}
	zklock_req_completion_end();
}

/*
 * Stat a node found by its protection prefix before adopting it.  Caller
 * holds the lock.
 */
void
zklock_lk_adopt_check(int idx, const char *base, const char *name)
{
	char		buf[ZKLOCK_NODE_PATH_SIZE];

	strlcpy(zklock_reqs[idx].adopt_name, name, sizeof(zklock_reqs[idx].adopt_name));
	snprintf(buf, sizeof(buf), "%s/%s", base, name);
	if (zoo_aexists(zklock_zh, buf, 0, adopt_stat_done, zklock_zkio_slot_tag(idx)) != ZOK)
		zklock_req_park(idx, true);
	else
		zklock_reqs[idx].inflight++;
}

/*
 * The path guard (core/recipe_guard.c) on a listing of P: what another
 * recipe's nodes older than ours there show, or NULL.  lk_decide then
 * fails the request with 22023 naming it (the failure deletes our node).
 * Only a request not yet granted is looked at, and only on a listing it
 * makes anyway.  Caller holds the lock.
 */
static const char *
lk_guard(int idx, const LockTarget *t, char **children, int n)
{
	if (t->guard == ZKG_NONE || zklock_shared->slots[idx].state != ZKS_ACTIVE)
		return NULL;
	return zklock_guard_children(t->guard, children, n, t->node);
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
	const char *held;

	zklock_lk_target(idx, &t);
	if (t.node[0] == '\0')
	{
		/* resumed after a lost create reply: find our node by its prefix */
		char		prefix[ZKLOCK_NODE_NAME_SIZE];
		int			found;

		zklock_protected_prefix(t.uuid, prefix);
		/* a create with the prefix may still land after this listing */
		zklock_ghosts_note_doubt(idx, !t.final);
		found = zklock_find_protected(children, n, prefix);
		if (found < 0)
		{
			zklock_lk_create(idx);
			return;
		}
		/* check whose it is and learn its czxid before adopting it */
		zklock_lk_adopt_check(idx, t.base, children[found]);
		return;
	}

	if (t.rw)
		zklock_rw_sort_children(children, n);
	else
		zklock_sort_children(children, n, t.lock_name);
	if (t.read)
		d = zklock_read_decide(children, n, t.node);
	else
		d = zklock_lock_decide(children, n, t.node, 1);

	held = lk_guard(idx, &t, children, n);

	/* a reader's answer is its followers' too */
	if (t.read && (!d.holds || held != NULL) && lk_handover(idx) != NULL)
		lk_handover(idx)->settle_followers(idx, false);
	if (held != NULL)
		zklock_req_fail(idx, ERRCODE_INVALID_PARAMETER_VALUE,
						"zookeeper path \"%s\" holds %s, not %s",
						slot->path + slot->user_path_off, held,
						zklock_guard_recipe_name(t.guard));
	else if (d.lost)
	{
		if (++req->lost_retries > MAX_LOST_RETRIES)
			zklock_req_fail(idx, ERRCODE_EXTERNAL_ROUTINE_EXCEPTION,
					  "zookeeper lock node under \"%s\" keeps disappearing",
					  slot->path + slot->user_path_off);
		else
			lk_start_fresh(idx);
	}
	else if (d.holds)
		zklock_lk_granted(idx);
	else if (slot->try_only)
		zklock_req_give_up_try(idx);
	else if (lk_handover(idx) != NULL &&
			 lk_handover(idx)->wait_behind(idx, &t, children[d.watch_index], d.blockers))
		;						/* behind a node of this worker: no watch */
	else
	{
		char		wpath[ZKLOCK_NODE_PATH_SIZE];
		int			rc;

		snprintf(wpath, sizeof(wpath), "%s/%s", t.base, children[d.watch_index]);
		rc = zoo_awget(zklock_zh, wpath, zklock_req_step_watcher, (void *) zklock_zkio_slot_tag(idx),
					   lk_watch_done, zklock_zkio_slot_tag(idx));
		zklock_req_call_sent(idx, rc);
		if (rc == ZOK)
		{
			strlcpy(req->pred, children[d.watch_index], sizeof(req->pred));
			strlcpy(slot->waits_on, req->pred, sizeof(slot->waits_on));
			req->pred_last = (d.blockers == 1);
			if (zklock_worker_ops(slot->op)->lock_waits != NULL)
				zklock_worker_ops(slot->op)->lock_waits(idx);
		}
	}
}

/*
 * Completion of the child listing of a lock: the ghosts it shows are
 * deleted (their deletes leave before anything the decision sends), then
 * the request decides.
 */
static void
lk_children_done(int rc, const struct String_vector *strings,
				 const struct Stat *stat, const void *data)
{
	int			idx = zklock_req_listing_begin(data);

	if (idx >= 0)
	{
		WorkerReq  *req = &zklock_reqs[idx];

		if (rc == ZOK)
		{
			char	  **children;
			int			n = strings->count;
			LockTarget	t;

			/* late creates of our own requests go first (deletes/ghosts.c) */
			zklock_lk_target(idx, &t);
			zklock_ghosts_delete(t.base, strings->data, n);
			/* what the next creates may skip (locks/handover_numbering.c) */
			if (lk_handover(idx) != NULL)
				lk_handover(idx)->listed(t.base, stat, strings->data, n);
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
			zklock_req_call_failed(idx, rc, "list the zookeeper lock");
	}
	zklock_req_completion_end();
}

/*
 * Ask for the children of the lock.  Caller holds the lock.
 */
void
zklock_lk_list(int idx)
{
	LockTarget	t;

	zklock_reqs[idx].pred[0] = '\0';	/* the new listing decides */
	if (!zklock_req_parked(&zklock_reqs[idx]))
		zklock_req_set_wait(idx, ZKWS_NONE);
	zklock_lk_target(idx, &t);
	zklock_req_send_listing2(idx, t.base, lk_children_done);
}

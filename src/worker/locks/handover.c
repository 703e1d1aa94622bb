/*-------------------------------------------------------------------------
 *
 * worker/locks/handover.c
 *	  Local handover: a lock released by a session of this cluster goes to
 *	  a waiter of this cluster that ZooKeeper's queue puts next, at once
 *	  (in memory, the released node's delete guarded by a check of the
 *	  waiter's node), or for a revocable waiter with one round trip (the
 *	  released node's delete and one exists, pipelined), instead of
 *	  Curator's delete, watch event and listing.  The module owns every
 *	  step, choose -> delete -> grant (or flush -> check -> grant or list),
 *	  the guarded delete's answer, and the safety net; each step leaves a
 *	  DEBUG2 line with the slot and its serial ("zklock: handover: ...").
 *
 *	  zklock_handover_choose		choose the waiters of a released node
 *	  zklock_handover_node_gone		its delete was recorded: grant at once
 *									with the delete guarded, or flush, check
 *	  zklock_handover_guard_answer	the guarded delete's answer: confirmed,
 *									or the holder's node was gone (lost)
 *	  zklock_handover_safety_net	relist a chosen waiter whose release
 *									ended unannounced (every second)
 *
 *	  The sequence, for a released node N under lock base B:
 *
 *	  step     where                         what happens
 *	  -------  ----------------------------  -----------------------------
 *	  choose   zklock_handover_choose, from  a waiter of this worker whose
 *	           the release (lock engine's    pred is N becomes HANDOVER
 *	           released hook, or a lease     (no watch event, local wait or
 *	           giving back P/locks), before  follower rule moves it; a
 *	           N's delete is recorded        watch on N fires into nothing)
 *	  delete   the withdrawal records N's    N's pending-delete entry,
 *	           delete (pending-delete        queued; the handover layer's
 *	           table), which queues it for   node_gone hook is told
 *	           the batch
 *	  grant    zklock_handover_node_gone     not revocable, connected,
 *	                                         within the lease: N's entry
 *	                                         gets the waiter's node W as
 *	                                         its guard and leaves alone as
 *	                                         multi(check W, delete N)
 *	                                         (worker/deletes/deletes.c); the
 *	                                         waiter is granted now
 *	  confirm  zklock_handover_guard_answer  applied: W was there when N
 *	                                         went, W is the lowest; the
 *	                                         check failed (W deleted from
 *	                                         outside): W's lock is lost,
 *	                                         then N goes after
 *	                                         zklock.commit_min_lease
 *
 *	  Why a grant before N goes is safe: N is this session's and the lowest
 *	  node, so no other client holds while it exists, and no other request
 *	  of ours is given it (nothing caches it: a handover keeps nothing).
 *	  ZooKeeper applies the guarded multi all or nothing, so N goes only at
 *	  a moment when W exists, and W is then the lowest (see below); if W is
 *	  gone, N stays until the holder has been told its lock is lost and a
 *	  COMMIT that checked it just before has had commit_min_lease to end.
 *	  The guard lives in the shared entry, so a lost answer, a reconnect or
 *	  a restarted worker sends the same multi again; a session that ends
 *	  takes N and W with it (and the lease ran out first).  A revocable
 *	  waiter is not granted at once: a Curator Revoker writes into the first
 *	  node, and while N exists that is not the holder's own.  Nor is a
 *	  second reader chosen by the same release (N's entry carries one
 *	  guard).  They take the checked path, whose answers are:
 *
 *	  The server answers a session's requests in order: the delete's
 *	  answer comes first and frees N's entry (OK or NoNode: N is gone),
 *	  then the exists:
 *
 *	  entry freed, own node there,    granted (the recipe's lock_granted
 *	  connected, within the lease     hook, as if a listing had said so)
 *	  own node NoNode, entry still    the waiter lists: the ordinary
 *	  there (delete refused or never  protocol (a node deleted from
 *	  sent), or no lease              outside queues again, as Curator's
 *	                                  waiter would)
 *	  any other answer (connection    zklock_req_call_failed: park, list again
 *	  loss)                           once connected (after the deletes)
 *	  no delete recorded for N (the   the waiter lists at once
 *	  table was full)
 *	  not connected when N's delete   the waiter parks
 *	  is recorded
 *	  N's release waits for room in   the waiter stays chosen; the
 *	  the pending-delete table, or    safety net relists it once N is no
 *	  ended unannounced               longer being withdrawn
 *
 *	  Why the waiter is next: when a plain mutex's holder releases N, N is
 *	  the lowest node of the lock (a holder's node is, and sequence numbers
 *	  only grow).  Every node below the waiter existed when it listed, N
 *	  was the highest of them and is now the lowest, so N is the only node
 *	  left below it.  A Curator waiter is never passed: if N's successor is
 *	  not a waiter of this worker (its pred is not N), nobody is chosen and
 *	  the ordinary protocol runs.  Read/write locks (and any release that
 *	  was not a plain mutex's) hand over only to waiters whose listing
 *	  showed N as the only node keeping them out (pred_last); nodes ahead
 *	  of a waiter can only go away, except a downgrade read node made with
 *	  its writer's sequence number, so a writer is never handed a lock whose
 *	  releasing writer has a downgrade twin in this worker (no other client
 *	  can make one: it would need the write lock).  Several readers may be
 *	  chosen by one release (each sends its own check), an exclusive waiter
 *	  only alone.  Leases are not handed over.
 *
 *	  On the checked path no session of this cluster holds the lock while
 *	  N exists: a Curator Revoker writing into N sees a node nobody holds.
 *	  Nothing of the check lives only in the worker's memory: a chosen
 *	  waiter is ACTIVE and ungranted, so a lost answer, a worker restart or
 *	  a lost session leaves it to the paths every waiter takes
 *	  (park/resume, take-over of an ACTIVE slot, the sweep).  zklock_lk_list
 *	  and zklock_lk_create clear the mark.  The fencing token is the new
 *	  holder's own node's czxid.  zk_status().handovers counts the
 *	  handovers, both kinds (tests 800-802).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "zklock.h"
#include "core/handover_rules.h"
#include "core/curator_rules.h"
#include "common/shmem.h"
#include "worker/locks/locks_int.h"
#include "worker/deletes/deletes.h"

static void handover_check_done(int rc, const struct Stat *stat,
								const void *data);
static bool released_node_pending(const char *base, const char *node);

/*
 * Choose: the lock engine's answer to a release, without a listing.  node,
 * a lock node under base, was released and its delete is about to be
 * queued.  A waiter of this worker whose latest listing made
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
 * The waiter is not granted here.  It is marked (ZKWS_HANDOVER: no watch,
 * local wait or follower rule moves it any more); when node's delete is
 * queued (zklock_handover_node_gone) it is granted at once with that
 * delete guarded by its own node, or, revocable, it sends an exists of its
 * own node behind the delete and is granted on the answer (the banner has
 * both).  Several readers may be chosen at once; an exclusive waiter only
 * alone.  Done only while connected and within the lease.  Returns how many
 * waiters were chosen.  Caller holds the lock.
 */
int
zklock_handover_choose(const char *base, const char *node, bool held_mutex)
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
	 * The slots indexed under base (worker/locks/path_index.c).  A twin's slot
	 * is a read lock of P = base, so it is there too, once the worker picked
	 * it up; a downgrade the worker has not picked up yet cannot meet a
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
		elog(DEBUG2, "zklock: handover: slot %d serial %u chosen to take %s/%s",
			 cand[k], sh->slots[cand[k]].serial, base, node);
	}
	return ntake;
}

/*
 * Delete, flush, check: the delete of pred (the released node) has just
 * been recorded (the handover layer's node_gone hook), and sent when
 * connected: the waiter idx chosen by zklock_handover_choose asks, behind
 * it on the same session, whether its own node is still there.  The
 * delete's answer comes first and frees its entry in the pending-delete
 * table.  No recorded delete (the table was full), or no connection: the
 * waiter lists again, now or once connected (after the pending deletes).
 * Caller holds the lock.
 */
void
zklock_handover_node_gone(int idx, const LockTarget *t)
{
	WorkerReq  *req = &zklock_reqs[idx];
	char		buf[ZKLOCK_NODE_PATH_SIZE];
	int			rc;

	if (!zklock_connected)
	{
		elog(DEBUG2, "zklock: handover: slot %d serial %u parks: not connected",
			 idx, zklock_shared->slots[idx].serial);
		zklock_req_park(idx, false);
		return;
	}
	snprintf(buf, sizeof(buf), "%s/%s", t->base, req->pred);

	/*
	 * At memory speed: the released node goes only with the waiter's node
	 * there (a guarded delete), so the waiter holds from now on.  Not for a
	 * revocable waiter: a Revoker writing into the released node meanwhile
	 * would ask nobody.
	 */
	if (!zklock_shared->slots[idx].revocable &&
		zklock_lease_valid(zklock_mono_now(), NULL) &&
		zklock_deletes_guard(buf, t->node))
	{
		elog(DEBUG2, "zklock: handover: slot %d serial %u granted at once: %s goes only with %s/%s there",
			 idx, zklock_shared->slots[idx].serial, buf, t->base, t->node);
		zklock_req_set_wait(idx, ZKWS_NONE);
		req->pred[0] = '\0';
		zklock_shared->counters.handovers++;
		zklock_lk_granted(idx);
		return;
	}
	if (!zklock_dtable_pending(buf))
	{
		elog(DEBUG2, "zklock: handover: slot %d serial %u lists: no delete of %s recorded",
			 idx, zklock_shared->slots[idx].serial, buf);
		zklock_lk_list(idx);
		return;
	}
	snprintf(buf, sizeof(buf), "%s/%s", t->base, t->node);
	zklock_batch_flush();		/* the queued delete of pred leaves first */
	/* still ZKWS_HANDOVER while the check is on its way */
	rc = zoo_aexists(zklock_zh, buf, 0, handover_check_done, zklock_zkio_slot_tag(idx));
	elog(DEBUG2, "zklock: handover: slot %d serial %u checks %s behind the delete of %s (rc %d)",
		 idx, zklock_shared->slots[idx].serial, buf, req->pred, rc);
	zklock_req_call_sent(idx, rc);
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
	int			idx = zklock_req_completion_begin(data);

	if (idx >= 0)
	{
		WorkerReq  *req = &zklock_reqs[idx];
		LockTarget	t;
		char		buf[ZKLOCK_NODE_PATH_SIZE];

		zklock_req_set_wait(idx, ZKWS_NONE);
		zklock_lk_target(idx, &t);
		snprintf(buf, sizeof(buf), "%s/%s", t.base, req->pred);
		if (rc == ZOK && !zklock_dtable_pending(buf) && zklock_connected &&
			zklock_lease_valid(zklock_mono_now(), NULL))
		{
			elog(DEBUG2, "zklock: handover: slot %d serial %u granted: %s gone, own node there",
				 idx, zklock_shared->slots[idx].serial, buf);
			req->pred[0] = '\0';
			zklock_shared->counters.handovers++;
			zklock_lk_granted(idx);
		}
		else if (rc == ZOK || rc == ZNONODE)
		{
			elog(DEBUG2, "zklock: handover: slot %d serial %u lists: %s",
				 idx, zklock_shared->slots[idx].serial,
				 rc == ZNONODE ? "its own node is gone" :
				 zklock_dtable_pending(buf) ? "the delete was not confirmed" :
				 "no connection or lease");
			zklock_lk_list(idx);
		}
		else
			zklock_req_call_failed(idx, rc, "check the lock node handed over to");
	}
	zklock_req_completion_end();
}

/*
 * The answer to the guarded delete of path, the node released to a waiter
 * granted at once (zklock_guard_answer_hook, which worker/deletes/deletes.c
 * calls): guard, the node it was handed to, was there when path went (there:
 * the handover is confirmed), or it was gone, deleted by another client before
 * the handover, so ZooKeeper's queue never named it holder and path is still
 * there.  Then the lock of guard's request is lost now, before path goes
 * (worker/deletes/deletes.c deletes it only zklock.commit_min_lease later): a
 * held lock is called lost (COMMIT under it fails with 40000), a lease request
 * taking its P/locks mutex fails.  Caller holds the lock.
 */
void
zklock_handover_guard_answer(const char *path, const char *guard, bool there)
{
	ZklockShared *sh = zklock_shared;
	const char *slash = strrchr(path, '/');
	char		base[ZKLOCK_NODE_PATH_SIZE];
	int			i;

	if (slash == NULL || slash - path >= sizeof(base))
		return;
	memcpy(base, path, slash - path);
	base[slash - path] = '\0';
	elog(DEBUG2, "zklock: handover: %s/%s %s when %s went",
		 base, guard, there ? "confirmed: there" : "gone", path);
	if (there)
		return;
	for (i = zklock_pathidx_first(base); i >= 0; i = zklock_pathidx_next(i))
	{
		ZklockSlot *slot = &sh->slots[i];
		LockTarget	t;

		if ((slot->state != ZKS_HELD && slot->state != ZKS_ACTIVE) ||
			zklock_worker_ops(slot->op)->lock_target == NULL)
			continue;
		zklock_lk_target(i, &t);
		if (strcmp(t.base, base) != 0 || strcmp(t.node, guard) != 0)
			continue;
		if (slot->state == ZKS_HELD)
		{
			zklock_slot_lose(slot);
			sh->lost_epoch++;
			sh->counters.locks_lost++;
			zklock_wake_backend(slot);
			ereport(LOG,
					(errmsg("zklock: lock \"%s\" is lost: its node was deleted by another client before the lock was handed to it",
							slot->path + slot->user_path_off)));
			continue;
		}
		if (zklock_reqs[i].serial != slot->serial)
		{
			zklock_req_reset(i);
			zklock_reqs[i].serial = slot->serial;
		}
		zklock_req_fail(i, ERRCODE_EXTERNAL_ROUTINE_EXCEPTION,
						"zookeeper lock node under \"%s\" was deleted by another client while the lock was handed to it",
						slot->path + slot->user_path_off);
	}
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
 * The safety net of the handover, run every second with the local waits'
 * (zklock_layer_check_local_waits): a waiter chosen for a handover whose
 * check was not sent lists again when its released node is no longer
 * being withdrawn (its release ended some way this worker did not
 * announce); one whose release waits for room in the pending-delete table
 * stays chosen.  Caller holds the lock.
 */
void
zklock_handover_safety_net(void)
{
	ZklockShared *sh = zklock_shared;
	int			i;

	for (i = 0; i < sh->nslots; i++)
	{
		WorkerReq  *req = &zklock_reqs[i];
		LockTarget	t;

		if (req->wait != ZKWS_HANDOVER || sh->slots[i].state != ZKS_ACTIVE ||
			req->serial != sh->slots[i].serial || req->inflight != 0)
			continue;
		zklock_lk_target(i, &t);
		if (!released_node_pending(t.base, req->pred))
		{
			elog(DEBUG2, "zklock: handover: slot %d serial %u lists: %s/%s is no longer being released",
				 i, sh->slots[i].serial, t.base, req->pred);
			zklock_lk_list(i);
		}
	}
}

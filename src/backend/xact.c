/*-------------------------------------------------------------------------
 *
 * backend/xact.c
 *	  What a backend's transactions do with its zklock locks: the
 *	  transaction-level holds (released once a (sub)transaction has ended
 *	  and PostgreSQL has released its own locks), the session locks and
 *	  leaderships a transaction relies on, and the PREPARE and COMMIT
 *	  checks (with the commit confirmation's request).  Below the registry of holds (backend/holds.c): dropping a
 *	  hold is here, since the end of a transaction is what drops most.
 *
 *	  zklock_xact_register_callbacks	the (sub)transaction callbacks
 *	  zklock_xact_note_hold		a hold was taken: release or check it
 *	  zklock_xact_note_lost		a lock was found lost: fail COMMIT if relied on
 *	  zklock_xact_release_due	release the holds of ended transactions
 *	  zklock_xact_lost_lock		the lost lock this transaction relied on
 *	  zklock_rely_on_state		COMMIT is to check a recipe's state (a
 *								leadership)
 *	  zklock_xact_relied_state	the state relied on last
 *	  zklock_drop_hold			drop one hold; the last releases the lock
 *	  zklock_publish_counts		show a lock's hold counts in zk_locks
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "utils/memutils.h"
#include "utils/resowner.h"

#include "zklock.h"
#include "core/lease_rules.h"
#include "common/shmem.h"
#include "common/settings.h"
#include "backend/backend.h"

static List *xact_holds = NIL;
static List *xact_session_keys = NIL;	/* session locks taken in this xact */

/*
 * A lock this transaction relied on (an _xact lock, or a session lock
 * taken in it when zklock.check_session_locks_at_commit is on) was found
 * lost and dropped from the registry: the transaction must not commit,
 * even if the path is acquired again or released meanwhile.  Cleared when
 * the transaction ends.  xact_lost_path: its path.
 */
static bool xact_lost = false;
static char xact_lost_path[ZKLOCK_FULL_PATH_SIZE];

/*
 * A recipe's state this transaction relies on (a leadership, through
 * zk_leader_xact): the slot, its serial and kind, and the epoch seen.  Its
 * COMMIT fails unless the kind's still_relied_on hook says the slot still
 * gives it in that same epoch.
 */
typedef struct XactReliance
{
	int			slot;
	uint32		serial;
	ZklockKind	kind;
	uint64		epoch;
	char		path[ZKLOCK_FULL_PATH_SIZE];	/* the user's path */
} XactReliance;
static List *xact_reliances = NIL;

static void release_due_holds(void);
static bool xact_relies_on(BackendHold *ll);
static void check_lease_at_commit(const char *when);
static void check_locks_at_commit(void);
static void xact_callback(XactEvent event, void *arg);
static void xact_release_callback(ResourceReleasePhase phase, bool isCommit,
								  bool isTopLevel, void *arg);
static void subxact_callback(SubXactEvent event, SubTransactionId mySubid,
							 SubTransactionId parentSubid, void *arg);

/*
 * Copy the shared-table counts of a backend hold, so zk_locks can show them.
 * Without the lock: only this backend writes them (its own slot, which
 * it holds), they are aligned 32-bit stores, and they are for display.
 */
void
zklock_publish_counts(BackendHold *ll)
{
	ZklockSlot *slot = &zklock_shared->slots[ll->slot];

	if (slot->serial == ll->serial && slot->pid == MyProcPid)
	{
		slot->session_count = ll->session_count;
		slot->xact_count = ll->xact_count;
	}
}

/*
 * Drop one hold of a lock (its BackendHold); when none is left, release the lock
 * in ZooKeeper (the worker deletes the node; we do not wait for it, the
 * session applies our requests in order).
 */
void
zklock_drop_hold(BackendHold *ll, bool xact)
{
	if (xact)
		ll->xact_count--;
	else
		ll->session_count--;

	if (ll->session_count + ll->xact_count > 0)
	{
		zklock_publish_counts(ll);
		return;
	}
	{
		int			idx = ll->slot;
		uint32		serial = ll->serial;

		/* unwatched first: a lock given back is not a lock lost */
		hash_search(zklock_backend_holds, &ll->key, HASH_REMOVE, NULL);
		zklock_loss_watch_update();
		zklock_withdraw_request(idx, serial);
	}
}

/*
 * A new hold of key is taken: a transaction-level one (xact) is released
 * when its (sub)transaction ends; a session-level one taken in a
 * transaction is checked at its COMMIT when
 * zklock.check_session_locks_at_commit is on.
 */
void
zklock_xact_note_hold(const BackendHoldKey *key, bool xact)
{
	if (!xact && zklock_check_session_locks && IsTransactionState())
	{
		MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);
		BackendHoldKey *k = palloc(sizeof(BackendHoldKey));

		*k = *key;
		xact_session_keys = lappend(xact_session_keys, k);
		MemoryContextSwitchTo(old);
	}
	if (xact)
	{
		MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);
		XactHold   *h = palloc(sizeof(XactHold));

		h->key = *key;
		h->subid = GetCurrentSubTransactionId();
		h->due = false;
		xact_holds = lappend(xact_holds, h);
		MemoryContextSwitchTo(old);
	}
}

/*
 * Release the transaction-level holds whose (sub)transaction has ended
 * (marked due).  Lock-free: it runs while the transaction ends.
 */
static void
release_due_holds(void)
{
	List	   *keep = NIL;
	ListCell   *lc;
	MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);

	foreach(lc, xact_holds)
	{
		XactHold   *h = (XactHold *) lfirst(lc);
		BackendHold *ll;

		if (!h->due)
		{
			keep = lappend(keep, h);
			continue;
		}
		ll = hash_search(zklock_backend_holds, &h->key, HASH_FIND, NULL);
		if (ll != NULL && ll->xact_count > 0)
			zklock_drop_hold(ll, true);
		pfree(h);
	}
	list_free(xact_holds);
	xact_holds = keep;
	MemoryContextSwitchTo(old);
}

/*
 * Catch up with a transaction that ended without its release phase:
 * release the holds marked due.
 */
void
zklock_xact_release_due(void)
{
	if (xact_holds != NIL)
		release_due_holds();
}

/*
 * Does this transaction rely on the lock (see xact_lost)?
 */
static bool
xact_relies_on(BackendHold *ll)
{
	ListCell   *lc;

	if (ll->xact_count > 0)
		return true;
	foreach(lc, xact_session_keys)
	{
		if (memcmp(lfirst(lc), &ll->key, sizeof(BackendHoldKey)) == 0)
			return true;
	}
	return false;
}

/*
 * A lock is found lost and dropped from the registry: remember for the
 * COMMIT check whether this transaction relied on it.
 */
void
zklock_xact_note_lost(BackendHold *ll)
{
	if (IsTransactionState() && xact_relies_on(ll) && !xact_lost)
	{
		xact_lost = true;
		strlcpy(xact_lost_path, ll->key.path, sizeof(xact_lost_path));
	}
}

/*
 * The user path of a lock this transaction relied on and lost (and has
 * dropped from the registry since), or NULL.  Its COMMIT will fail, so a
 * counter write of it is refused too (recipes/counter_fence.c).
 */
const char *
zklock_xact_lost_lock(void)
{
	if (!xact_lost)
		return NULL;
	return xact_lost_path + strlen(zklock_namespace ? zklock_namespace : "");
}

/*
 * The lease must cover the rest of the commit: at least
 * zklock.commit_min_lease left on the monotonic clock, or the commit
 * fails.  when (or NULL) says what took the time before.
 */
static void
check_lease_at_commit(const char *when)
{
	ZklockMonoTime now = zklock_mono_now();
	ZklockMonoTime until;

	(void) zklock_lease_valid(now, &until);
	if (zklock_lease_covers(now, until, (int64) zklock_commit_min_lease * 1000))
		return;
	if (until == 0)
		ereport(ERROR,
				(errcode(ERRCODE_TRANSACTION_ROLLBACK),
				 errmsg("zookeeper locks of this transaction cannot be proven held at commit"),
				 errdetail("The zklock worker has no live ZooKeeper session%s%s.",
						   when ? " " : "", when ? when : ""),
				 errhint("Retry the transaction once zk_status() shows the connection again.")));
	if (until <= now)
		ereport(ERROR,
				(errcode(ERRCODE_TRANSACTION_ROLLBACK),
				 errmsg("zookeeper locks of this transaction cannot be proven held at commit"),
				 errdetail("The zklock worker's ZooKeeper session was not proven alive by the leader in time: its lease ran out %ld ms ago%s%s.",
						   (long) ((now - until) / 1000), when ? " " : "", when ? when : ""),
				 errhint("Retry the transaction once zk_status() shows the connection again.")));
	ereport(ERROR,
			(errcode(ERRCODE_TRANSACTION_ROLLBACK),
			 errmsg("zookeeper locks of this transaction cannot be proven held at commit"),
			 errdetail("Only %ld ms of the zklock worker's lease were left%s%s; zklock.commit_min_lease is %d ms.",
					   (long) ((until - now) / 1000), when ? " " : "", when ? when : "",
					   zklock_commit_min_lease),
			 errhint("Retry the transaction; if this repeats, the lease is too short for zklock.commit_min_lease (see zk_status()).")));
}

/*
 * zklock.commit_confirm: ask ZooKeeper, through the worker, whether the
 * node of the lock held in our slot slot_idx still exists in the worker's session.  Waits at
 * most zklock.connect_timeout.  Returns false, with why filled in, when it
 * does not or the answer did not come; errors of the wait are turned into
 * that answer so the caller can fail the commit with its own SQLSTATE.
 */
static bool
confirm_hold(int slot_idx, char *why, size_t whylen)
{
	ZklockSlot *slot = &zklock_shared->slots[slot_idx];
	ZklockAsk	ask;
	BackendHoldKey key;
	char		rel[ZKLOCK_NODE_NAME_SIZE + 16];
	int			user_off;
	bool		timed_out = false;
	int64		value = 0;
	MemoryContext cxt = CurrentMemoryContext;

	/* our own slot: only the worker's move to LOST can change it */
	zklock_lock_table(LW_SHARED);
	memset(&key, 0, sizeof(key));
	strlcpy(key.path, slot->path, sizeof(key.path));
	user_off = slot->user_path_off;
	snprintf(rel, sizeof(rel), "%s%s",
			 zklock_kind_info(slot->kind)->node_dir ? zklock_kind_info(slot->kind)->node_dir : "",
			 slot->nodes[ZKN_MAIN].name);
	LWLockRelease(zklock_shared->lock);

	memset(&ask, 0, sizeof(ask));
	ask.op = ZKOP_CONFIRM;
	ask.kind = ZKK_NONE;
	ask.timeout_ms = zklock_connect_timeout;
	ask.data = rel;
	PG_TRY();
	{
		value = zklock_run_request(&ask, &key, user_off, 0, 0, &timed_out, NULL);
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		strlcpy(why, edata->message, whylen);
		FreeErrorData(edata);
		return false;
	}
	PG_END_TRY();
	if (timed_out)
		snprintf(why, whylen, "ZooKeeper did not answer within zklock.connect_timeout (%d ms).",
				 zklock_connect_timeout);
	else if (value != 1)
		snprintf(why, whylen, "Its node %s no longer exists in the worker's ZooKeeper session.",
				 rel);
	return !timed_out && value == 1;
}

/*
 * The COMMIT (or PREPARE) check: a transaction that relies on a zklock
 * lock commits only while the lock is held and the worker's session is
 * provably alive (its lease).  Runs in the backend on shared memory read
 * without the lock, so a stalled worker cannot let a commit through.
 */
static void
check_locks_at_commit(void)
{
	ListCell   *lc;
	bool		relies = xact_lost;
	const char *lost_path = xact_lost ? xact_lost_path : NULL;

	foreach(lc, xact_session_keys)
	{
		BackendHold *ll = hash_search(zklock_backend_holds, lfirst(lc), HASH_FIND, NULL);

		relies = true;
		if (lost_path == NULL && ll != NULL && zklock_hold_lost(ll))
			lost_path = ((BackendHoldKey *) lfirst(lc))->path;
	}
	foreach(lc, xact_holds)
	{
		XactHold   *h = (XactHold *) lfirst(lc);
		BackendHold *ll = hash_search(zklock_backend_holds, &h->key, HASH_FIND, NULL);

		relies = true;
		if (lost_path == NULL && ll != NULL && zklock_hold_lost(ll))
			lost_path = h->key.path;
	}
	foreach(lc, xact_reliances)
	{
		XactReliance *l = (XactReliance *) lfirst(lc);
		const ZklockKindInfo *ki = zklock_kind_info(l->kind);
		ZklockSlot *slot = &zklock_shared->slots[l->slot];
		ZklockShared *sh = zklock_shared;

		relies = true;
		if (!(slot->serial == l->serial && slot->state == ZKS_ACTIVE &&
			  slot->kind == l->kind && ki->still_relied_on != NULL &&
			  ki->still_relied_on(slot, l->epoch) &&
			  sh->have_session && slot->session_gen == sh->session_gen))
			ereport(ERROR,
					(errcode(ERRCODE_TRANSACTION_ROLLBACK),
					 errmsg("%s at \"%s\" was lost before commit",
							ki->relied_on, l->path),
					 errdetail("The transaction relied on it."),
					 errhint("Retry the transaction.")));
	}
	if (!relies)
		return;
	if (lost_path != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_TRANSACTION_ROLLBACK),
				 errmsg("zookeeper lock \"%s\" was lost before commit",
						lost_path + strlen(zklock_namespace ? zklock_namespace : "")),
				 errdetail("The ZooKeeper session of this cluster ended while the transaction relied on the lock."),
				 errhint("Retry the transaction.")));
	check_lease_at_commit(NULL);

	/* zklock.commit_confirm: a round trip of proof for every lock */
	if (zklock_commit_confirm)
	{
		List	   *keys = NIL;

		foreach(lc, xact_session_keys)
			keys = lappend(keys, lfirst(lc));
		foreach(lc, xact_holds)
			keys = lappend(keys, &((XactHold *) lfirst(lc))->key);
		foreach(lc, keys)
		{
			BackendHoldKey *k = (BackendHoldKey *) lfirst(lc);
			BackendHold *ll = hash_search(zklock_backend_holds, k, HASH_FIND, NULL);
			char		why[ZKLOCK_ERRMSG_SIZE];

			if (ll == NULL || confirm_hold(ll->slot, why, sizeof(why)))
				continue;
			ereport(ERROR,
					(errcode(ERRCODE_TRANSACTION_ROLLBACK),
					 errmsg("zookeeper lock \"%s\" could not be confirmed at commit",
							k->path + strlen(zklock_namespace ? zklock_namespace : "")),
					 errdetail_internal("%s", why),
					 errhint("Retry the transaction.")));
		}
		list_free(keys);

		/* the answers took time: the lease must still hold after them */
		check_lease_at_commit("while confirming the locks");
	}
}

/*
 * Transaction callback: refuse PREPARE and commit where they would be
 * wrong; at the end, mark the transaction-level holds due, for
 * xact_release_callback to release.
 *
 * PREPARE is refused (0A000) whenever the transaction relies on a zklock
 * lock: an _xact hold, a session lock taken in it under
 * zklock.check_session_locks_at_commit, or a lock noted lost in it.
 * COMMIT PREPARED may run any time later, from any session, when nothing
 * holds or checks the lock: it cannot be made safe.
 */
static void
xact_callback(XactEvent event, void *arg)
{
	ListCell   *lc;

	switch (event)
	{
		case XACT_EVENT_PRE_PREPARE:
			if (xact_reliances != NIL)
			{
				XactReliance *l = (XactReliance *) linitial(xact_reliances);

				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("cannot PREPARE a transaction that relies on %s at \"%s\"",
								zklock_kind_info(l->kind)->relied_on, l->path),
						 errhint("COMMIT PREPARED could run after it ended; commit the transaction instead.")));
			}
			if (xact_holds != NIL || xact_session_keys != NIL || xact_lost)
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("cannot PREPARE a transaction that relies on a zookeeper lock"),
						 errdetail("%s",
								   xact_holds != NIL ?
								   "It holds a zklock transaction-level lock." :
								   xact_lost ?
								   "A zookeeper lock it relied on was lost." :
								   "It took a session lock and zklock.check_session_locks_at_commit is on."),
						 errhint("COMMIT PREPARED could run after the lock was released or lost; commit the transaction instead.")));
			break;
		case XACT_EVENT_PRE_COMMIT:
			check_locks_at_commit();
			break;
		case XACT_EVENT_PARALLEL_PRE_COMMIT:
			break;
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
		case XACT_EVENT_PREPARE:
			/*
			 * PostgreSQL gives back the transaction's own locks (heavyweight,
			 * advisory) after this callback: ours go after them
			 * (xact_release_callback), so the next holder, who may be handed
			 * the lock in microseconds, never finds this transaction still
			 * holding anything.  A backend on its way out leaves them to
			 * backend_exit, which comes after its abort as well.
			 */
			if (!proc_exit_inprogress)
				foreach(lc, xact_holds)
					((XactHold *) lfirst(lc))->due = true;
			list_free_deep(xact_session_keys);
			xact_session_keys = NIL;
			list_free_deep(xact_reliances);
			xact_reliances = NIL;
			xact_lost = false;
			break;
	}
}

/*
 * Resource release callback: once PostgreSQL has released the locks of a
 * transaction or subtransaction that ended (the after-locks phase; the
 * first one after the end callbacks marked holds due is the ending
 * transaction's own), release the zklock holds marked due.
 */
static void
xact_release_callback(ResourceReleasePhase phase, bool isCommit,
					  bool isTopLevel, void *arg)
{
	if (phase == RESOURCE_RELEASE_AFTER_LOCKS && xact_holds != NIL)
		release_due_holds();
}

/*
 * Subtransaction callback: a rolled-back savepoint releases what was taken
 * inside it (marked due, released after its locks); a released savepoint
 * hands its holds to the parent.
 */
static void
subxact_callback(SubXactEvent event, SubTransactionId mySubid,
				 SubTransactionId parentSubid, void *arg)
{
	ListCell   *lc;

	if (xact_holds == NIL)
		return;
	if (event == SUBXACT_EVENT_ABORT_SUB)
	{
		/* released after the subtransaction's own locks, as at the end */
		foreach(lc, xact_holds)
		{
			XactHold   *h = (XactHold *) lfirst(lc);

			if (h->subid == mySubid)
				h->due = true;
		}
	}
	else if (event == SUBXACT_EVENT_COMMIT_SUB)
	{
		foreach(lc, xact_holds)
		{
			XactHold   *h = (XactHold *) lfirst(lc);

			if (h->subid == mySubid)
				h->subid = parentSubid;
		}
	}
}

/*
 * Register the transaction, subtransaction and resource release callbacks
 * (once per backend, from zklock_backend_setup).
 */
void
zklock_xact_register_callbacks(void)
{
	RegisterXactCallback(xact_callback, NULL);
	RegisterSubXactCallback(subxact_callback, NULL);
	RegisterResourceReleaseCallback(xact_release_callback, NULL);
}

/*
 * The current transaction relies on the state of the slot idx (of serial
 * and kind; its kind has a still_relied_on hook) as it was in epoch (a
 * leader latch member's leadership): its COMMIT checks it is still the
 * same.
 */
void
zklock_rely_on_state(ZklockKind kind, int idx, uint32 serial, uint64 epoch,
					 const char *user_path)
{
	XactReliance *l;
	ListCell   *lc;
	MemoryContext old;

	Assert(zklock_kind_info(kind)->still_relied_on != NULL);
	foreach(lc, xact_reliances)
	{
		l = (XactReliance *) lfirst(lc);
		if (l->slot == idx && l->serial == serial && l->epoch == epoch)
			return;
	}
	old = MemoryContextSwitchTo(TopMemoryContext);
	l = palloc0(sizeof(XactReliance));
	l->slot = idx;
	l->serial = serial;
	l->kind = kind;
	l->epoch = epoch;
	strlcpy(l->path, user_path, sizeof(l->path));
	xact_reliances = lappend(xact_reliances, l);
	MemoryContextSwitchTo(old);
}

/*
 * The state the current transaction relied on last (a leadership, through
 * zk_leader_xact), for the fence of a counter write: false when it relied
 * on none.
 */
bool
zklock_xact_relied_state(int *idx, uint32 *serial, uint64 *epoch)
{
	XactReliance *l;

	if (xact_reliances == NIL)
		return false;
	l = (XactReliance *) llast(xact_reliances);
	*idx = l->slot;
	*serial = l->serial;
	*epoch = l->epoch;
	return true;
}

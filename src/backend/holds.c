/*-------------------------------------------------------------------------
 *
 * backend/holds.c
 *	  The backend's side: the registry of its holds (BackendHold: how
 *	  often this backend holds each lock, at session and transaction
 *	  level; what a transaction does with them is backend/xact.c's), the
 *	  locks lost with the session, backend exit, and zklock_backend_setup,
 *	  which every SQL entry point that sends a request or takes, releases
 *	  or asks about this backend's holds calls first (the views and
 *	  zk_stat_reset do not), and nothing below the entry points calls.
 *
 *	  zklock_backend_setup		first call of those SQL entry points
 *	  zklock_notice_lost_locks	catch up: due holds, locks lost meanwhile
 *	  zklock_add_hold			remember a new hold of a lock
 *	  zklock_add_granted_hold	the same for a lock just granted
 *	  zklock_find_hold			a lock of ours (a lost one is dropped)
 *	  zklock_release_key		drop one session-level hold
 *	  zklock_release_session_holds	drop every session-level hold
 *	  zklock_backend_holds		the registry (BackendHoldKey -> BackendHold)
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/parallel.h"
#include "pgstat.h"
#include "storage/ipc.h"
#include "storage/proc.h"

#include "compat.h"
#include "common/shmem.h"
#include "backend/backend.h"

HTAB *zklock_backend_holds = NULL;
static bool backend_ready = false;
static uint64 seen_lost_epoch = 0;	/* zklock_shared->lost_epoch last seen */

static void forget_lost_lock(BackendHold *ll);
static void backend_exit(int code, Datum arg);
static void report_lost_locks(void);

/*
 * Backend exit: every request and lock of this backend goes back to the
 * worker, which deletes the nodes.  It runs from on_shmem_exit, so after
 * PostgreSQL has aborted the backend's transaction and released its
 * advisory and other locks (ShutdownPostgres, a before_shmem_exit
 * callback): the next holder, who may be handed the lock in microseconds,
 * never finds the dying holder's work still in progress.
 */
static void
backend_exit(int code, Datum arg)
{
	int			i;

	if (zklock_shared == NULL)
		return;

	/*
	 * Without the lock (a stalled worker must not keep a terminated backend
	 * alive): a slot whose pid is ours was filled by us and only we change
	 * its serial; should it have been freed and reused meanwhile, its pid
	 * is another's and the worker ignores the wish.
	 */
	for (i = 0; i < zklock_shared->nslots; i++)
	{
		ZklockSlot *slot = &zklock_shared->slots[i];
		uint32		serial;

		if (slot->pid != MyProcPid || slot->procno != ZKLOCK_MY_PROCNO)
			continue;
		pg_read_barrier();
		serial = slot->serial;
		if (slot->state != ZKS_FREE)
			zklock_give_back(i, MyProcPid, serial);
	}
}

/*
 * Tell the session, once, which of its locks were lost with the ZooKeeper
 * session.  They stay in the registry (release says false, COMMIT of an
 * _xact one fails) until the session deals with them.
 */
static void
report_lost_locks(void)
{
	HASH_SEQ_STATUS seq;
	BackendHold *ll;
	StringInfoData names;
	int			n = 0;

	initStringInfo(&names);
	hash_seq_init(&seq, zklock_backend_holds);
	while ((ll = hash_seq_search(&seq)) != NULL)
	{
		ZklockSlot *slot = &zklock_shared->slots[ll->slot];

		if (ll->lost_reported || !zklock_hold_lost(ll))
			continue;
		ll->lost_reported = true;
		zklock_lock_table(LW_SHARED);
		appendStringInfo(&names, "%s\"%s\"", n > 0 ? ", " : "",
						 slot->serial == ll->serial ?
						 slot->path + slot->user_path_off : ll->key.path);
		LWLockRelease(zklock_shared->lock);
		n++;
	}
	if (n > 0)
		ereport(WARNING,
				(errcode(ERRCODE_CONNECTION_FAILURE),
				 errmsg_plural("%d zookeeper lock of this session was lost",
							   "%d zookeeper locks of this session were lost",
							   n, n),
				 errdetail("The ZooKeeper session of this cluster ended; lost: %s.", names.data),
				 errhint("Work done under these locks was not protected; release them and acquire again.")));
	pfree(names.data);
}

/*
 * Drop a lost lock from the registry (and its slot), remembering for the
 * COMMIT check that the transaction relied on it.
 */
static void
forget_lost_lock(BackendHold *ll)
{
	zklock_xact_note_lost(ll);
	zklock_withdraw_request(ll->slot, ll->serial);
	hash_search(zklock_backend_holds, &ll->key, HASH_REMOVE, NULL);
	zklock_loss_watch_update();
}

/*
 * Catch up with what happened since this backend's last zklock call:
 * release the holds of a transaction that ended without its release
 * phase, and report the locks the worker lost.
 */
void
zklock_notice_lost_locks(void)
{
	zklock_xact_release_due();
	/* only look through our locks when the worker lost some */
	if (zklock_shared->lost_epoch != seen_lost_epoch)
	{
		seen_lost_epoch = zklock_shared->lost_epoch;
		report_lost_locks();
	}
}

/*
 * The first thing every SQL entry point of zklock does, once (the helpers
 * below the entry points never call it): on the first call of this
 * backend, the local registry and the callbacks; on every call,
 * zklock_notice_lost_locks.
 *
 * A parallel worker is refused before anything else, whatever it asks: a
 * lock it took would be its own and go when it exits at the end of the
 * query, while its leader went on as if it held it (and a counter write's
 * fence would look at the worker's holds, not the leader's).  zklock's
 * functions are PARALLEL UNSAFE; this catches a call through a function
 * wrongly declared PARALLEL SAFE.  25000, as PostgreSQL refuses what a
 * parallel worker may not do ("cannot insert tuples in a parallel
 * worker").  Nothing is claimed or sent, so a parallel worker never waits
 * for a zklock lock, which the deadlock detection relies on.
 */
void
zklock_backend_setup(void)
{
	HASHCTL		ctl;

	if (IsParallelWorker())
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TRANSACTION_STATE),
				 errmsg("cannot use zklock in a parallel worker"),
				 errdetail("A zookeeper lock belongs to the backend that takes it; a parallel worker ends with its query."),
				 errhint("Declare a function that calls zklock PARALLEL UNSAFE, as zklock's own functions are.")));

	if (backend_ready)
	{
		zklock_notice_lost_locks();
		return;
	}
	if (zklock_shared == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("zklock shared memory is not initialized"),
				 errhint("Add zklock to shared_preload_libraries and restart the server.")));

	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = sizeof(BackendHoldKey);
	ctl.entrysize = sizeof(BackendHold);
	zklock_backend_holds = hash_create("zklock local locks", 64, &ctl,
							  HASH_ELEM | HASH_BLOBS);
	zklock_xact_register_callbacks();
	on_shmem_exit(backend_exit, (Datum) 0);
	zklock_build_node_data();
	seen_lost_epoch = zklock_shared->lost_epoch;
	backend_ready = true;
}

/*
 * Remember a new hold of a lock in the local registry (and, for a
 * transaction-level hold, in the list of them).
 */
BackendHold *
zklock_add_hold(const BackendHoldKey *key, int idx, uint32 serial, bool xact)
{
	BackendHold *ll;
	bool		found;

	ll = hash_search(zklock_backend_holds, key, HASH_ENTER, &found);
	if (!found)
	{
		ll->slot = idx;
		ll->serial = serial;
		ll->session_count = 0;
		ll->xact_count = 0;
		ll->lost_reported = false;
	}
	zklock_xact_note_hold(key, xact);
	if (xact)
		ll->xact_count++;
	else
		ll->session_count++;

	zklock_publish_counts(ll);
	if (!found)
		zklock_loss_watch_update();
	return ll;
}

/*
 * Record a lock just granted in slot idx.  Should that fail (out of
 * memory), the lock is given back at once rather than left held, unknown
 * to the registry, until the backend exits.
 */
BackendHold *
zklock_add_granted_hold(const BackendHoldKey *key, int idx, uint32 serial, bool xact)
{
	BackendHold *ll = NULL;

	PG_TRY();
	{
		ll = zklock_add_hold(key, idx, serial, xact);
	}
	PG_CATCH();
	{
		BackendHold *half = hash_search(zklock_backend_holds, key, HASH_FIND, NULL);

		if (half != NULL && half->slot == idx && half->serial == serial)
			hash_search(zklock_backend_holds, key, HASH_REMOVE, NULL);
		zklock_loss_watch_update();
		zklock_withdraw_request(idx, serial);
		PG_RE_THROW();
	}
	PG_END_TRY();
	return ll;
}

/*
 * Find a lock of ours; a lock lost with the session is dropped with a
 * WARNING and not returned.
 */
BackendHold *
zklock_find_hold(const BackendHoldKey *key, int user_off)
{
	BackendHold *ll = hash_search(zklock_backend_holds, key, HASH_FIND, NULL);

	if (ll != NULL && zklock_hold_lost(ll))
	{
		if (!ll->lost_reported)
			ereport(WARNING,
					(errmsg("zookeeper lock \"%s\" was lost when the zookeeper session ended",
							key->path + user_off)));
		forget_lost_lock(ll);
		ll = NULL;
	}
	return ll;
}

/*
 * Drop one session-level hold.  Not holding it is a WARNING and false, as
 * for pg_advisory_unlock.
 */
bool
zklock_release_key(const BackendHoldKey *key, int user_off)
{
	BackendHold *ll;

	ll = hash_search(zklock_backend_holds, key, HASH_FIND, NULL);
	if (ll == NULL || ll->session_count == 0)
	{
		ereport(WARNING,
				(errmsg("zookeeper lock \"%s\" is not held by this session",
						key->path + user_off),
				 (ll != NULL && ll->xact_count > 0) ?
				 errdetail("It is held at transaction level and is released at the end of the transaction.") : 0));
		return false;
	}
	if (zklock_hold_lost(ll))
	{
		ereport(WARNING,
				(errmsg("zookeeper lock \"%s\" was lost when the zookeeper session ended",
						key->path + user_off)));
		forget_lost_lock(ll);
		return false;
	}
	zklock_drop_hold(ll, false);
	return true;
}

/*
 * Drop every session-level hold of this backend's locks (of one kind and
 * path, when given), keeping transaction-level holds.  A lock lost with
 * the session is dropped as well, without counting.  Returns how many
 * locks were released.
 */
int
zklock_release_session_holds(ZklockKind kind, const char *path)
{
	HASH_SEQ_STATUS seq;
	BackendHold *ll;
	List	   *keys = NIL;
	ListCell   *lc;
	int			released = 0;

	/* collect first: releasing removes entries from the hash */
	hash_seq_init(&seq, zklock_backend_holds);
	while ((ll = hash_seq_search(&seq)) != NULL)
	{
		if (ll->session_count > 0 &&
			(kind == ZKK_NONE || ll->key.kind == kind) &&
			(path == NULL || strcmp(ll->key.path, path) == 0))
		{
			BackendHoldKey *k = palloc(sizeof(BackendHoldKey));

			*k = ll->key;
			keys = lappend(keys, k);
		}
	}
	foreach(lc, keys)
	{
		ll = hash_search(zklock_backend_holds, lfirst(lc), HASH_FIND, NULL);
		if (ll == NULL)
			continue;
		if (zklock_hold_lost(ll))
		{
			forget_lost_lock(ll);
			continue;
		}
		released++;
		ll->session_count = 1;
		zklock_drop_hold(ll, false);
	}
	list_free_deep(keys);
	return released;
}


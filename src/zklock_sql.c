/*-------------------------------------------------------------------------
 *
 * zklock_sql.c
 *	  SQL-callable functions: validate the input, hand a request to the
 *	  worker through the shared table, wait for the answer.
 *
 * Ownership is per backend, as for pg_advisory_lock: the backend is the
 * "thread" of Curator's model.  A backend-local hash counts how often
 * this backend holds each lock (session-level and transaction-level
 * apart); ZooKeeper sees one node per backend and lock.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <unistd.h>

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "common/int.h"
#include "commands/dbcommands.h"
#include "fmgr.h"
#include "funcapi.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/postmaster.h"
#include "storage/dsm.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/json.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "zklock.h"

PG_FUNCTION_INFO_V1(zk_mutex_acquire);
PG_FUNCTION_INFO_V1(zk_mutex_try_acquire);
PG_FUNCTION_INFO_V1(zk_mutex_acquire_xact);
PG_FUNCTION_INFO_V1(zk_mutex_release);
PG_FUNCTION_INFO_V1(zk_read_lock_acquire);
PG_FUNCTION_INFO_V1(zk_read_lock_acquire_xact);
PG_FUNCTION_INFO_V1(zk_read_lock_release);
PG_FUNCTION_INFO_V1(zk_write_lock_acquire);
PG_FUNCTION_INFO_V1(zk_write_lock_acquire_xact);
PG_FUNCTION_INFO_V1(zk_write_lock_release);
PG_FUNCTION_INFO_V1(zk_semaphore_mutex_acquire);
PG_FUNCTION_INFO_V1(zk_semaphore_mutex_acquire_xact);
PG_FUNCTION_INFO_V1(zk_semaphore_mutex_release);
PG_FUNCTION_INFO_V1(zk_multi_lock_acquire);
PG_FUNCTION_INFO_V1(zk_multi_lock_release);
PG_FUNCTION_INFO_V1(zk_semaphore_acquire);
PG_FUNCTION_INFO_V1(zk_semaphore_acquire_xact);
PG_FUNCTION_INFO_V1(zk_semaphore_release);
PG_FUNCTION_INFO_V1(zk_semaphore_release_all);
PG_FUNCTION_INFO_V1(zk_barrier_set);
PG_FUNCTION_INFO_V1(zk_barrier_remove);
PG_FUNCTION_INFO_V1(zk_barrier_wait);
PG_FUNCTION_INFO_V1(zk_double_barrier_enter);
PG_FUNCTION_INFO_V1(zk_double_barrier_leave);
PG_FUNCTION_INFO_V1(zk_revoke);
PG_FUNCTION_INFO_V1(zk_revocation_requested);
PG_FUNCTION_INFO_V1(zk_participants);
PG_FUNCTION_INFO_V1(zk_lock_token);
PG_FUNCTION_INFO_V1(zk_release_all);
PG_FUNCTION_INFO_V1(zk_status);
PG_FUNCTION_INFO_V1(zk_locks);

/* Key of a lock in the backend-local registry */
typedef struct LocalLockKey
{
	ZklockKind	kind;
	char		path[ZKLOCK_FULL_PATH_SIZE];
	char		lease[ZKLOCK_NODE_NAME_SIZE];	/* semaphore: the lease node */
} LocalLockKey;

/* What this backend holds of one lock */
typedef struct LocalLock
{
	LocalLockKey key;
	int			slot;			/* its entry in the shared table */
	uint32		serial;
	int32		session_count;
	int32		xact_count;
	bool		lost_reported;	/* the WARNING about its loss was given */
} LocalLock;

/* One transaction-level hold, remembered for commit, abort and savepoints */
typedef struct XactHold
{
	LocalLockKey key;
	SubTransactionId subid;
} XactHold;

/* What a backend asks the worker for */
typedef struct ZklockAsk
{
	ZklockOp	op;
	ZklockKind	kind;
	bool		xact;
	bool		try_only;
	bool		revocable;
	int64		timeout_ms;		/* -1: no timeout */
	int32		max_leases;
	int32		member_qty;
	const char *downgrade_seq;
	uint32		result_dsm;		/* participants: where the answer goes */
	uint32		result_size;
	const char *data;			/* slot data instead of the node identity */
} ZklockAsk;

static HTAB *local_locks = NULL;
static List *xact_holds = NIL;
static List *xact_session_keys = NIL;	/* session locks taken in this xact */
static bool backend_ready = false;
static uint64 seen_lost_epoch = 0;	/* zklock_shared->lost_epoch last seen */

/*
 * A lock this transaction relied on (an _xact lock, or a session lock
 * taken in it when zklock.check_session_locks_at_commit is on) was found
 * lost and dropped from the registry: the transaction must not commit,
 * even if the path is acquired again or released meanwhile.  Cleared when
 * the transaction ends.
 */
static bool xact_lost = false;
static char xact_lost_path[ZKLOCK_FULL_PATH_SIZE];
static char node_data[ZKLOCK_NODE_DATA_SIZE];
static char *node_data_appname = NULL;	/* application_name in node_data */

/*
 * Copy the shared-table counts of a local lock, so zk_locks can show them.
 * Caller holds the lock.
 */
static void
publish_counts(LocalLock *ll)
{
	ZklockSlot *slot = &zklock_shared->slots[ll->slot];

	if (slot->serial == ll->serial && slot->pid == MyProcPid)
	{
		slot->session_count = ll->session_count;
		slot->xact_count = ll->xact_count;
	}
}

/*
 * Give up a request the worker has not picked up yet.  It is simply freed,
 * unless its slot already owns nodes (a double barrier leave is made from
 * a held membership): deleting those is the worker's job, as for a
 * request it works on.  Returns true when the slot was handed to the
 * worker: the caller posts it and wakes the worker.  Caller holds the
 * lock exclusively.
 */
static bool
give_up_new_request(int idx)
{
	ZklockSlot *slot = &zklock_shared->slots[idx];

	if (slot->node[0] == '\0' && slot->uuid[0] == '\0' &&
		slot->aux_uuid[0] == '\0')
	{
		slot->state = ZKS_FREE;
		return false;
	}
	slot->state = ZKS_CANCEL;
	return true;
}

/*
 * Give up a request or a lock: a request the worker has not seen is
 * dropped (see give_up_new_request), one it works on is cancelled, a held
 * lock is released when release_if_held (otherwise it is kept and true is
 * returned).
 */
static bool
withdraw_request(int idx, uint32 serial, bool release_if_held)
{
	ZklockSlot *slot = &zklock_shared->slots[idx];
	bool		held = false;
	bool		wake = false;

	LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
	if (slot->serial == serial && slot->pid == MyProcPid)
	{
		switch (slot->state)
		{
			case ZKS_NEW:
				if (give_up_new_request(idx))
					wake = true;
				break;
			case ZKS_DONE:
			case ZKS_LOST:
				slot->state = ZKS_FREE;
				break;
			case ZKS_ACTIVE:
				slot->state = ZKS_CANCEL;
				wake = true;
				break;
			case ZKS_HELD:
				if (release_if_held)
				{
					slot->state = ZKS_RELEASE;
					wake = true;
				}
				else
					held = true;
				break;
			default:
				break;
		}
	}
	if (wake)
		zklock_post(idx);
	LWLockRelease(zklock_shared->lock);
	if (wake)
		zklock_wake_worker();
	return held;
}

/*
 * Drop one hold of a local lock; when none is left, release the lock in
 * ZooKeeper (the worker deletes the node; we do not wait for it, the
 * session applies our requests in order).
 */
static void
drop_hold(LocalLock *ll, bool xact)
{
	if (xact)
		ll->xact_count--;
	else
		ll->session_count--;

	if (ll->session_count + ll->xact_count > 0)
	{
		LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
		publish_counts(ll);
		LWLockRelease(zklock_shared->lock);
		return;
	}
	(void) withdraw_request(ll->slot, ll->serial, true);
	hash_search(local_locks, &ll->key, HASH_REMOVE, NULL);
}

/*
 * Release every transaction-level hold, or only those of one aborted
 * subtransaction.
 */
static void
release_xact_holds(SubTransactionId only_subid)
{
	List	   *keep = NIL;
	ListCell   *lc;
	MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);

	foreach(lc, xact_holds)
	{
		XactHold   *h = (XactHold *) lfirst(lc);
		LocalLock  *ll;

		if (only_subid != InvalidSubTransactionId && h->subid != only_subid)
		{
			keep = lappend(keep, h);
			continue;
		}
		ll = hash_search(local_locks, &h->key, HASH_FIND, NULL);
		if (ll != NULL && ll->xact_count > 0)
			drop_hold(ll, true);
		pfree(h);
	}
	list_free(xact_holds);
	xact_holds = keep;
	MemoryContextSwitchTo(old);
}

/*
 * Is a lock of ours marked lost in shared memory (its session expired)?
 */
static bool
lock_is_lost(LocalLock *ll)
{
	volatile ZklockSlot *slot = &zklock_shared->slots[ll->slot];

	/*
	 * No lock taken: the worker only ever moves a slot of ours from HELD to
	 * LOST, and a stalled worker holding the lock must not hang a COMMIT.
	 */
	return slot->serial != ll->serial || slot->state != ZKS_HELD;
}

/*
 * Does this transaction rely on the lock (see xact_lost)?
 */
static bool
xact_relies_on(LocalLock *ll)
{
	ListCell   *lc;

	if (ll->xact_count > 0)
		return true;
	foreach(lc, xact_session_keys)
	{
		if (memcmp(lfirst(lc), &ll->key, sizeof(LocalLockKey)) == 0)
			return true;
	}
	return false;
}

/*
 * Drop a lost lock from the registry (and its slot), remembering for the
 * COMMIT check that the transaction relied on it.
 */
static void
forget_lost_lock(LocalLock *ll)
{
	if (IsTransactionState() && xact_relies_on(ll) && !xact_lost)
	{
		xact_lost = true;
		strlcpy(xact_lost_path, ll->key.path, sizeof(xact_lost_path));
	}
	(void) withdraw_request(ll->slot, ll->serial, true);
	hash_search(local_locks, &ll->key, HASH_REMOVE, NULL);
}

static int64 run_request(ZklockAsk *ask, const LocalLockKey *key, int user_off,
						 uint32 dsm, uint32 dsm_size, bool *timed_out, uint32 *needed);

/*
 * zklock.commit_confirm: ask ZooKeeper, through the worker, whether the
 * node of a held lock still exists in the worker's session.  Waits at
 * most zklock.connect_timeout.  Returns false, with why filled in, when it
 * does not or the answer did not come; errors of the wait are turned into
 * that answer so the caller can fail the commit with its own SQLSTATE.
 */
static bool
confirm_lock(LocalLock *ll, char *why, size_t whylen)
{
	ZklockSlot *slot = &zklock_shared->slots[ll->slot];
	ZklockAsk	ask;
	LocalLockKey key;
	char		rel[ZKLOCK_NODE_NAME_SIZE + 16];
	int			user_off;
	bool		timed_out = false;
	int64		value = 0;
	MemoryContext cxt = CurrentMemoryContext;

	/* our own slot: only the worker's move to LOST can change it */
	LWLockAcquire(zklock_shared->lock, LW_SHARED);
	memset(&key, 0, sizeof(key));
	strlcpy(key.path, slot->path, sizeof(key.path));
	user_off = slot->user_path_off;
	snprintf(rel, sizeof(rel), "%s%s", slot->op == ZKOP_LEASE ? "leases/" : "",
			 slot->node);
	LWLockRelease(zklock_shared->lock);

	memset(&ask, 0, sizeof(ask));
	ask.op = ZKOP_CONFIRM;
	ask.kind = ZKK_NONE;
	ask.timeout_ms = zklock_connect_timeout;
	ask.max_leases = 1;
	ask.data = rel;
	PG_TRY();
	{
		value = run_request(&ask, &key, user_off, 0, 0, &timed_out, NULL);
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
	TimestampTz until;

	foreach(lc, xact_session_keys)
	{
		LocalLock  *ll = hash_search(local_locks, lfirst(lc), HASH_FIND, NULL);

		relies = true;
		if (lost_path == NULL && ll != NULL && lock_is_lost(ll))
			lost_path = ((LocalLockKey *) lfirst(lc))->path;
	}
	foreach(lc, xact_holds)
	{
		XactHold   *h = (XactHold *) lfirst(lc);
		LocalLock  *ll = hash_search(local_locks, &h->key, HASH_FIND, NULL);

		relies = true;
		if (lost_path == NULL && ll != NULL && lock_is_lost(ll))
			lost_path = h->key.path;
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
	if (!zklock_lease_valid(GetCurrentTimestamp(), &until))
		ereport(ERROR,
				(errcode(ERRCODE_TRANSACTION_ROLLBACK),
				 errmsg("zookeeper locks of this transaction cannot be proven held at commit"),
				 errdetail(until == 0 ?
						   "The zklock worker has no live ZooKeeper session." :
						   "The zklock worker's ZooKeeper session has not been heard from in time: its lease ran out %ld ms ago.",
						   (long) ((GetCurrentTimestamp() - until) / 1000)),
				 errhint("Retry the transaction once zk_status() shows the connection again.")));

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
			LocalLockKey *k = (LocalLockKey *) lfirst(lc);
			LocalLock  *ll = hash_search(local_locks, k, HASH_FIND, NULL);
			char		why[ZKLOCK_ERRMSG_SIZE];

			if (ll == NULL || confirm_lock(ll, why, sizeof(why)))
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
		if (!zklock_lease_valid(GetCurrentTimestamp(), NULL))
			ereport(ERROR,
					(errcode(ERRCODE_TRANSACTION_ROLLBACK),
					 errmsg("zookeeper locks of this transaction cannot be proven held at commit"),
					 errdetail("The zklock worker's ZooKeeper session lease ran out while confirming the locks."),
					 errhint("Retry the transaction once zk_status() shows the connection again.")));
	}
}

/*
 * Transaction callback: refuse PREPARE and commit where they would be
 * wrong, release transaction-level locks at the end.
 */
static void
xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_PRE_PREPARE:
			if (xact_holds != NIL)
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("cannot PREPARE a transaction that holds a zklock transaction-level lock"),
						 errdetail("ZooKeeper locks belong to the session's connection and cannot outlive it in a prepared transaction.")));
			check_locks_at_commit();
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
			if (xact_holds != NIL)
				release_xact_holds(InvalidSubTransactionId);
			list_free_deep(xact_session_keys);
			xact_session_keys = NIL;
			xact_lost = false;
			break;
	}
}

/*
 * Subtransaction callback: a rolled-back savepoint releases what was taken
 * inside it; a released savepoint hands its holds to the parent.
 */
static void
subxact_callback(SubXactEvent event, SubTransactionId mySubid,
				 SubTransactionId parentSubid, void *arg)
{
	ListCell   *lc;

	if (xact_holds == NIL)
		return;
	if (event == SUBXACT_EVENT_ABORT_SUB)
		release_xact_holds(mySubid);
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
 * Backend exit: every request and lock of this backend goes back to the
 * worker, which deletes the nodes.
 */
static void
backend_exit(int code, Datum arg)
{
	int			i;
	bool		wake = false;

	if (zklock_shared == NULL)
		return;
	LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
	for (i = 0; i < zklock_shared->nslots; i++)
	{
		ZklockSlot *slot = &zklock_shared->slots[i];

		if (slot->pid != MyProcPid || slot->procno != ZKLOCK_MY_PROCNO)
			continue;
		switch (slot->state)
		{
			case ZKS_NEW:
				if (give_up_new_request(i))
					wake = true;
				break;
			case ZKS_DONE:
			case ZKS_LOST:
				slot->state = ZKS_FREE;
				break;
			case ZKS_ACTIVE:
				slot->state = ZKS_CANCEL;
				wake = true;
				break;
			case ZKS_HELD:
				slot->state = ZKS_RELEASE;
				wake = true;
				break;
			default:
				break;
		}
	}
	if (wake)
		zklock_post_all();
	LWLockRelease(zklock_shared->lock);
	if (wake)
		zklock_wake_worker();
}

/*
 * Write this backend's identity, as it goes into its lock nodes: cluster
 * name, host, port, database, pid, application_name, as JSON.
 */
static void
build_node_data(void)
{
	StringInfoData buf;
	char		host[256];
	char	   *dbname = OidIsValid(MyDatabaseId) ? get_database_name(MyDatabaseId) : NULL;

	if (gethostname(host, sizeof(host)) != 0)
		strlcpy(host, "unknown", sizeof(host));
	host[sizeof(host) - 1] = '\0';

	initStringInfo(&buf);
	appendStringInfoString(&buf, "{\"cluster_name\":");
	escape_json(&buf, cluster_name ? cluster_name : "");
	appendStringInfoString(&buf, ",\"host\":");
	escape_json(&buf, host);
	appendStringInfo(&buf, ",\"port\":%d,\"database\":", PostPortNumber);
	escape_json(&buf, dbname ? dbname : "");
	appendStringInfo(&buf, ",\"pid\":%d,\"application_name\":", MyProcPid);
	escape_json(&buf, application_name ? application_name : "");
	appendStringInfoChar(&buf, '}');

	if (node_data_appname)
		pfree(node_data_appname);
	node_data_appname = MemoryContextStrdup(TopMemoryContext,
											application_name ? application_name : "");

	if (buf.len >= ZKLOCK_NODE_DATA_SIZE)
		snprintf(node_data, sizeof(node_data), "{\"port\":%d,\"pid\":%d}",
				 PostPortNumber, MyProcPid);
	else
		strlcpy(node_data, buf.data, sizeof(node_data));
	pfree(buf.data);
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
	LocalLock  *ll;
	StringInfoData names;
	int			n = 0;

	initStringInfo(&names);
	hash_seq_init(&seq, local_locks);
	while ((ll = hash_seq_search(&seq)) != NULL)
	{
		ZklockSlot *slot = &zklock_shared->slots[ll->slot];

		if (ll->lost_reported || !lock_is_lost(ll))
			continue;
		ll->lost_reported = true;
		LWLockAcquire(zklock_shared->lock, LW_SHARED);
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
 * First zklock call of this backend: local registry, callbacks.  Every
 * call: report locks lost since the last one.
 */
static void
backend_setup(void)
{
	HASHCTL		ctl;

	if (backend_ready)
	{
		/* only look through our locks when the worker lost some */
		if (zklock_shared->lost_epoch != seen_lost_epoch)
		{
			seen_lost_epoch = zklock_shared->lost_epoch;
			report_lost_locks();
		}
		return;
	}
	if (zklock_shared == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("zklock shared memory is not initialized"),
				 errhint("Add zklock to shared_preload_libraries and restart the server.")));

	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = sizeof(LocalLockKey);
	ctl.entrysize = sizeof(LocalLock);
	local_locks = hash_create("zklock local locks", 64, &ctl,
							  HASH_ELEM | HASH_BLOBS);
	RegisterXactCallback(xact_callback, NULL);
	RegisterSubXactCallback(subxact_callback, NULL);
	before_shmem_exit(backend_exit, (Datum) 0);
	build_node_data();
	seen_lost_epoch = zklock_shared->lost_epoch;
	backend_ready = true;
}

/*
 * Validate a user's path and prefix it with zklock.namespace.  Errors
 * are raised here, before anything reaches the worker.
 */
static void
make_lock_key(text *path_text, ZklockKind kind, LocalLockKey *key, int *user_off)
{
	const char *raw = VARDATA_ANY(path_text);
	int			rawlen = VARSIZE_ANY_EXHDR(path_text);
	const char *utf8;
	size_t		bad = 0;
	ZklockPathError err;
	size_t		nslen = strlen(zklock_namespace ? zklock_namespace : "");

	if (rawlen > ZKLOCK_MAX_PATH_LEN)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid zookeeper path: %s",
						zklock_path_error_message(ZKLOCK_PATH_TOO_LONG)),
				 errdetail("The path is %d bytes long; the limit is %d.",
						   rawlen, ZKLOCK_MAX_PATH_LEN)));

	utf8 = pg_server_to_any(raw, rawlen, PG_UTF8);
	if (utf8 != raw)
		rawlen = strlen(utf8);
	err = zklock_validate_path(utf8, rawlen, ZKLOCK_MAX_PATH_LEN, &bad);
	if (err != ZKLOCK_PATH_OK)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid zookeeper path: %s", zklock_path_error_message(err)),
				 errdetail("The problem is at byte %zu of the path.", bad + 1)));

	memset(key, 0, sizeof(*key));
	key->kind = kind;
	memcpy(key->path, zklock_namespace, nslen);
	memcpy(key->path + nslen, utf8, rawlen);
	key->path[nslen + rawlen] = '\0';
	*user_off = (int) nslen;
}

/*
 * The path argument, or an error when it is NULL.
 */
static text *
path_arg(FunctionCallInfo fcinfo, int argno)
{
	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("zookeeper path must not be null")));
	return PG_GETARG_TEXT_PP(argno);
}

/*
 * A boolean argument with a default; NULL counts as false.
 */
static bool
bool_arg(FunctionCallInfo fcinfo, int argno)
{
	if (PG_NARGS() <= argno || PG_ARGISNULL(argno))
		return false;
	return PG_GETARG_BOOL(argno);
}

/*
 * A count argument that must be present and at least 1.
 */
static int32
count_arg(FunctionCallInfo fcinfo, int argno, const char *name)
{
	int32		v;

	if (PG_NARGS() <= argno || PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be null", name)));
	v = PG_GETARG_INT32(argno);
	if (v < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must be at least 1", name),
				 errdetail("The value given was %d.", v)));
	return v;
}

/*
 * The timeout argument in milliseconds; -1 for NULL (wait until granted).
 * Negative intervals are an error.
 */
static int64
timeout_arg(FunctionCallInfo fcinfo, int argno)
{
	Interval   *iv;
	int64		usecs;
	int64		part;

	if (PG_NARGS() <= argno || PG_ARGISNULL(argno))
		return -1;
	iv = PG_GETARG_INTERVAL_P(argno);

	usecs = iv->time;
	if (pg_mul_s64_overflow((int64) iv->month, (int64) DAYS_PER_MONTH * USECS_PER_DAY, &part) ||
		pg_add_s64_overflow(usecs, part, &usecs) ||
		pg_mul_s64_overflow((int64) iv->day, USECS_PER_DAY, &part) ||
		pg_add_s64_overflow(usecs, part, &usecs))
		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				 errmsg("timeout is out of range")));
	if (usecs < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("timeout must not be negative"),
				 errhint("Use NULL to wait until the lock is granted.")));
	/* rounded up to the millisecond, without overflowing */
	return usecs / 1000 + (usecs % 1000 != 0);
}

/*
 * Claim a free slot of the shared table for a new request, or fail with
 * an error naming zklock.max_requests when none is free.
 */
static int
claim_slot(const ZklockAsk *ask, const LocalLockKey *key, int user_off,
		   uint32 *serial)
{
	ZklockShared *sh = zklock_shared;
	static int	hint = 0;
	int			idx = -1;
	int			i;

	/* the identity written into nodes follows SET application_name */
	if (strcmp(node_data_appname, application_name ? application_name : "") != 0)
		build_node_data();

	LWLockAcquire(sh->lock, LW_EXCLUSIVE);
	for (i = 0; i < sh->nslots; i++)
	{
		int			j = (hint + i) % sh->nslots;

		if (sh->slots[j].state == ZKS_FREE)
		{
			idx = j;
			break;
		}
	}
	if (idx >= 0)
	{
		ZklockSlot *slot = &sh->slots[idx];

		slot->op = ask->op;
		slot->kind = ask->kind;
		slot->phase = ZKP_LOCK;
		slot->try_only = ask->try_only;
		slot->revocable = ask->revocable;
		slot->revoke_requested = false;
		slot->node_deleted = false;
		slot->own_delete_sent = false;
		slot->max_leases = ask->max_leases;
		slot->member_qty = ask->member_qty;
		strlcpy(slot->downgrade_seq, ask->downgrade_seq ? ask->downgrade_seq : "",
				sizeof(slot->downgrade_seq));
		slot->result_value = 0;
		slot->result_dsm = ask->result_dsm;
		slot->result_size = ask->result_size;
		slot->procno = ZKLOCK_MY_PROCNO;
		slot->pid = MyProcPid;
		slot->serial++;
		if (slot->serial == 0)
			slot->serial = 1;
		slot->result = ZKR_NONE;
		slot->sqlerrcode = 0;
		slot->errmsg[0] = '\0';
		slot->uuid[0] = '\0';
		slot->node[0] = '\0';
		slot->aux_uuid[0] = '\0';
		slot->aux_node[0] = '\0';
		slot->czxid = 0;
		slot->session_gen = 0;
		slot->since = GetCurrentTimestamp();
		slot->session_count = (ask->kind != ZKK_NONE && !ask->xact) ? 1 : 0;
		slot->xact_count = ask->xact ? 1 : 0;
		slot->user_path_off = user_off;
		strlcpy(slot->path, key->path, sizeof(slot->path));
		strlcpy(slot->data, ask->data ? ask->data : node_data, sizeof(slot->data));
		slot->state = ZKS_NEW;
		zklock_post(idx);
		*serial = slot->serial;
		hint = idx + 1;
	}
	LWLockRelease(sh->lock);

	if (idx < 0)
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("zklock request table is full"),
				 errdetail("All %d entries (zklock.max_requests) are taken by locks held or waited for.",
						   sh->nslots),
				 errhint("Release locks, or raise zklock.max_requests and restart the server.")));
	zklock_wake_worker();
	return idx;
}

/* How a wait ended without an error */
typedef enum WaitOutcome
{
	WAIT_GRANTED,				/* the lock is ours; the slot stays */
	WAIT_NOT_GRANTED,			/* timeout or a failed try; slot gone */
	WAIT_DONE					/* a request without a lock finished */
} WaitOutcome;

/* What one look at our slot found */
typedef enum SlotLook
{
	LOOK_PENDING,				/* the worker is still on it */
	LOOK_HELD,					/* granted */
	LOOK_DONE,					/* finished; answer taken, slot freed */
	LOOK_LOST,					/* granted, then lost; slot freed */
	LOOK_WITHDRAWN				/* we gave up on it in this look */
} SlotLook;

/* The answer of a finished request */
typedef struct SlotAnswer
{
	ZklockResult result;
	int			sqlerrcode;
	char		errmsg[ZKLOCK_ERRMSG_SIZE];
	int64		value;
	uint32		needed;
} SlotAnswer;

/* Why a wait gives up on a request still pending */
typedef enum GiveUp
{
	GIVE_UP_NONE = 0,
	GIVE_UP_UNREACHABLE,		/* no provable session for connect_timeout */
	GIVE_UP_TIMEOUT,			/* the call's own timeout */
	GIVE_UP_LOCK_TIMEOUT		/* lock_timeout */
} GiveUp;

/*
 * Look at our slot, under the lock, and take what the worker finished: the
 * answer of a done request, a grant, or a grant lost with the session.
 * With give_up, a request still pending is withdrawn in the same look, so
 * an answer that arrives as the caller gives up is taken, never thrown
 * away.  *cs gets the connection state seen.
 */
static SlotLook
look_at_slot(int idx, uint32 serial, bool give_up, SlotAnswer *ans,
			 ZklockConnState *cs)
{
	ZklockSlot *slot = &zklock_shared->slots[idx];
	SlotLook	look = LOOK_PENDING;
	bool		wake = false;

	LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
	*cs = zklock_shared->conn_state;
	if (slot->serial == serial && slot->pid == MyProcPid)
	{
		switch (slot->state)
		{
			case ZKS_HELD:
				look = LOOK_HELD;
				break;
			case ZKS_DONE:
				ans->result = slot->result;
				ans->sqlerrcode = slot->sqlerrcode;
				strlcpy(ans->errmsg, slot->errmsg, sizeof(ans->errmsg));
				ans->value = slot->result_value;
				ans->needed = slot->result_size;
				slot->state = ZKS_FREE;
				look = LOOK_DONE;
				break;
			case ZKS_LOST:
				slot->state = ZKS_FREE;
				look = LOOK_LOST;
				break;
			case ZKS_NEW:
				if (give_up)
				{
					if (give_up_new_request(idx))
					{
						zklock_post(idx);
						wake = true;
					}
					look = LOOK_WITHDRAWN;
				}
				break;
			case ZKS_ACTIVE:
				if (give_up)
				{
					slot->state = ZKS_CANCEL;
					zklock_post(idx);
					wake = true;
					look = LOOK_WITHDRAWN;
				}
				break;
			default:
				break;
		}
	}
	LWLockRelease(zklock_shared->lock);
	if (wake)
		zklock_wake_worker();
	return look;
}

/*
 * The time timeout_ms after start, or 0 (never) when it is out of the
 * range of a timestamp: a timeout of thousands of years is no timeout.
 */
static TimestampTz
deadline_after(TimestampTz start, int64 timeout_ms)
{
	if (timeout_ms < 0 || timeout_ms > (PG_INT64_MAX - start) / 1000)
		return 0;
	return TimestampTzPlusMilliseconds(start, timeout_ms);
}

/*
 * Wait on our latch until the worker answers the request in slot idx, the
 * timeout (ms, -1 = none) or lock_timeout passes, the worker has had no
 * provable session (connected, with a valid lease) for
 * zklock.connect_timeout, or an interrupt arrives.  Whatever ends the wait
 * early withdraws the request, so no node is left behind; an answer that
 * is there when the wait ends is taken whatever ended it.  For WAIT_DONE,
 * *value gets the worker's result.
 */
static WaitOutcome
wait_for_request(int idx, uint32 serial, int64 timeout_ms, const char *user_path,
				 int64 *value, uint32 *needed)
{
	ZklockSlot *slot = &zklock_shared->slots[idx];
	TimestampTz start = GetCurrentTimestamp();
	TimestampTz deadline = deadline_after(start, timeout_ms);
	TimestampTz lock_deadline = LockTimeout > 0 ? TimestampTzPlusMilliseconds(start, LockTimeout) : 0;
	TimestampTz down_since = 0;
	WaitOutcome outcome = WAIT_NOT_GRANTED;
	SlotAnswer	ans;
	uint32		wait_event;

	/* the op was set by this backend when it filled the slot */
	switch (slot->op)
	{
		case ZKOP_MUTEX:
		case ZKOP_READ:
		case ZKOP_WRITE:
		case ZKOP_LEASE:
			wait_event = zklock_wait_event(ZKLOCK_WAIT_ACQUIRE);
			break;
		default:
			wait_event = zklock_wait_event(ZKLOCK_WAIT_REQUEST);
			break;
	}

	PG_TRY();
	{
		for (;;)
		{
			ZklockConnState cs;
			SlotLook	look;
			GiveUp		give_up = GIVE_UP_NONE;
			TimestampTz now;
			long		wait_ms = 1000;

			look = look_at_slot(idx, serial, false, &ans, &cs);
			if (look == LOOK_PENDING)
			{
				now = GetCurrentTimestamp();

				/*
				 * Down: not connected, or connected without proof (the
				 * lease ran out: a stalled worker cannot say so itself).
				 */
				if (cs != ZKC_CONNECTED || !zklock_lease_valid(now, NULL))
				{
					if (down_since == 0)
						down_since = now;
				}
				else
					down_since = 0;

				if (down_since != 0 &&
					(now >= TimestampTzPlusMilliseconds(down_since, zklock_connect_timeout) ||
					 (deadline != 0 && now >= deadline)))
					give_up = GIVE_UP_UNREACHABLE;
				else if (deadline != 0 && now >= deadline)
					give_up = GIVE_UP_TIMEOUT;
				else if (lock_deadline != 0 && now >= lock_deadline)
					give_up = GIVE_UP_LOCK_TIMEOUT;
				if (give_up != GIVE_UP_NONE)
					look = look_at_slot(idx, serial, true, &ans, &cs);
			}

			if (look == LOOK_HELD)
			{
				outcome = WAIT_GRANTED;
				break;
			}
			if (look == LOOK_DONE)
			{
				if (ans.result == ZKR_ERROR)
					ereport(ERROR,
							(errcode(ans.sqlerrcode),
							 errmsg("%s", ans.errmsg)));
				if (value)
					*value = ans.value;
				if (needed)
					*needed = ans.needed;
				outcome = ans.result == ZKR_OK ? WAIT_DONE : WAIT_NOT_GRANTED;
				break;
			}
			if (look == LOOK_LOST)
				ereport(ERROR,
						(errcode(ERRCODE_CONNECTION_FAILURE),
						 errmsg("zookeeper lock \"%s\" was lost as it was granted", user_path),
						 errdetail("The zklock worker's zookeeper session ended (expired, or its lease ran out) before this backend saw the grant."),
						 errhint("Retry when zk_status() shows the connection again.")));
			if (look == LOOK_WITHDRAWN)
			{
				now = GetCurrentTimestamp();
				if (give_up == GIVE_UP_UNREACHABLE)
					ereport(ERROR,
							(errcode(ERRCODE_CONNECTION_FAILURE),
							 errmsg("zookeeper is not reachable"),
							 errdetail("The zklock worker's connection is %s (zklock.hosts = \"%s\") and did not come back within %ld ms.",
									   (cs == ZKC_CONNECTED) ? "without proof of its session (lease ran out)" :
									   zklock_conn_state_name(cs), zklock_hosts,
									   (long) ((now - down_since) / 1000)),
							 errhint("Check that ZooKeeper is running and zklock.hosts is right; zk_status() shows the connection.")));
				if (give_up == GIVE_UP_LOCK_TIMEOUT)
					ereport(ERROR,
							(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
							 errmsg("canceling statement due to lock timeout"),
							 errdetail("Waiting for zookeeper path \"%s\".", user_path)));
				outcome = WAIT_NOT_GRANTED;
				break;
			}

			now = GetCurrentTimestamp();
			if (deadline != 0)
				wait_ms = Min(wait_ms, (long) ((deadline - now + 999) / 1000));
			if (lock_deadline != 0)
				wait_ms = Min(wait_ms, (long) ((lock_deadline - now + 999) / 1000));
			if (down_since != 0)
				wait_ms = Min(wait_ms,
							  (long) ((TimestampTzPlusMilliseconds(down_since, zklock_connect_timeout) - now + 999) / 1000));
			else
			{
				TimestampTz until;

				/* wake up when the lease would run out, to notice it */
				if (zklock_lease_valid(now, &until))
					wait_ms = Min(wait_ms, (long) ((until - now + 999) / 1000));
			}
			if (wait_ms < 1)
				wait_ms = 1;

			(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							 wait_ms, wait_event);
			ResetLatch(MyLatch);
			CHECK_FOR_INTERRUPTS();
		}
	}
	PG_CATCH();
	{
		/* cancel, statement_timeout, lock_timeout, errors: leave nothing */
		(void) withdraw_request(idx, serial, true);
		PG_RE_THROW();
	}
	PG_END_TRY();

	/*
	 * A lock is handed to the caller only while the session is provably
	 * alive: a grant that arrives as the lease runs out is given back.
	 */
	if (outcome == WAIT_GRANTED && !zklock_lease_valid(GetCurrentTimestamp(), NULL))
	{
		(void) withdraw_request(idx, serial, true);
		ereport(ERROR,
				(errcode(ERRCODE_CONNECTION_FAILURE),
				 errmsg("zookeeper lock \"%s\" was granted but cannot be proven held", user_path),
				 errdetail("The zklock worker's ZooKeeper session has not been heard from in time; the lock was given back."),
				 errhint("Retry when zk_status() shows the connection again.")));
	}
	return outcome;
}

/*
 * Run a request that takes no lock (barrier, revoke, participants) and
 * return the worker's result value; *timed_out says whether the timeout
 * passed first.
 */
static int64
run_request(ZklockAsk *ask, const LocalLockKey *key, int user_off,
			uint32 dsm, uint32 dsm_size, bool *timed_out, uint32 *needed)
{
	int			idx;
	uint32		serial;
	int64		value = 0;
	WaitOutcome outcome;

	/* the answer's segment is in the slot before the worker can see it */
	ask->result_dsm = dsm;
	ask->result_size = dsm_size;
	idx = claim_slot(ask, key, user_off, &serial);
	outcome = wait_for_request(idx, serial, ask->timeout_ms, key->path + user_off,
							   &value, needed);
	if (timed_out)
		*timed_out = (outcome != WAIT_DONE);
	return value;
}

/*
 * Ask the worker for a lock (mutex, read/write lock, lease) and wait for
 * it.  A zero timeout is a try: the worker looks once and gives up rather
 * than waiting.  On success *idx and *serial name the slot that now holds
 * it.
 */
static bool
request_lock(ZklockAsk *ask, const LocalLockKey *key, int user_off, int *idx,
			 uint32 *serial)
{
	if (ask->timeout_ms == 0)
		ask->try_only = true;
	*idx = claim_slot(ask, key, user_off, serial);
	return wait_for_request(*idx, *serial, ask->try_only ? -1 : ask->timeout_ms,
							key->path + user_off, NULL, NULL) == WAIT_GRANTED;
}

/*
 * Remember a new hold of a lock in the local registry (and, for a
 * transaction-level hold, in the list of them).
 */
static LocalLock *
add_hold(const LocalLockKey *key, int idx, uint32 serial, bool xact)
{
	LocalLock  *ll;
	bool		found;

	ll = hash_search(local_locks, key, HASH_ENTER, &found);
	if (!found)
	{
		ll->slot = idx;
		ll->serial = serial;
		ll->session_count = 0;
		ll->xact_count = 0;
		ll->lost_reported = false;
	}
	if (!xact && zklock_check_session_locks && IsTransactionState())
	{
		MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);
		LocalLockKey *k = palloc(sizeof(LocalLockKey));

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
		xact_holds = lappend(xact_holds, h);
		MemoryContextSwitchTo(old);
		ll->xact_count++;
	}
	else
		ll->session_count++;

	LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
	publish_counts(ll);
	LWLockRelease(zklock_shared->lock);
	return ll;
}

/*
 * Record a lock just granted in slot idx.  Should that fail (out of
 * memory), the lock is given back at once rather than left held, unknown
 * to the registry, until the backend exits.
 */
static LocalLock *
add_granted_hold(const LocalLockKey *key, int idx, uint32 serial, bool xact)
{
	LocalLock  *ll = NULL;

	PG_TRY();
	{
		ll = add_hold(key, idx, serial, xact);
	}
	PG_CATCH();
	{
		LocalLock  *half = hash_search(local_locks, key, HASH_FIND, NULL);

		if (half != NULL && half->slot == idx && half->serial == serial)
			hash_search(local_locks, key, HASH_REMOVE, NULL);
		(void) withdraw_request(idx, serial, true);
		PG_RE_THROW();
	}
	PG_END_TRY();
	return ll;
}

/*
 * Find a lock of ours; a lock lost with the session is dropped with a
 * WARNING and not returned.
 */
static LocalLock *
find_hold(const LocalLockKey *key, int user_off)
{
	LocalLock  *ll = hash_search(local_locks, key, HASH_FIND, NULL);

	if (ll != NULL && lock_is_lost(ll))
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
 * Take a lock for this backend: count one more hold if we have it
 * already (reentrant kinds), otherwise ask the worker and wait.
 */
static bool
acquire_lock(ZklockAsk *ask, text *path)
{
	LocalLockKey key;
	LocalLock  *ll;
	int			user_off;
	int			idx;
	uint32		serial;
	char		seq[12];

	make_lock_key(path, ask->kind, &key, &user_off);
	backend_setup();

	ll = find_hold(&key, user_off);
	if (ll != NULL && ask->kind == ZKK_SEMAPHORE_MUTEX)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_IN_USE),
				 errmsg("semaphore mutex \"%s\" is already held by this session",
						key.path + user_off),
				 errhint("The semaphore mutex is not reentrant; zk_mutex_acquire gives a reentrant lock.")));

	if (ll == NULL)
	{
		LocalLockKey other = key;
		LocalLock  *ol;

		if (ask->kind == ZKK_READ)
		{
			/* a write holder takes the read lock at once, at its place */
			other.kind = ZKK_WRITE;
			ol = find_hold(&other, user_off);
			if (ol != NULL)
			{
				const char *wnode = zklock_shared->slots[ol->slot].node;
				size_t		len = strlen(wnode);

				strlcpy(seq, len >= 10 ? wnode + len - 10 : wnode, sizeof(seq));
				ask->downgrade_seq = seq;
			}
		}
		else if (ask->kind == ZKK_WRITE)
		{
			other.kind = ZKK_READ;
			ol = find_hold(&other, user_off);
			if (ol != NULL && ask->timeout_ms < 0)
				ereport(ERROR,
						(errcode(ERRCODE_OBJECT_IN_USE),
						 errmsg("cannot upgrade a read lock to a write lock on \"%s\"",
								key.path + user_off),
						 errdetail("This session holds the read lock; its write request would wait behind its own read lock forever."),
						 errhint("Release the read lock first, or pass a timeout.")));
		}

		if (!request_lock(ask, &key, user_off, &idx, &serial))
			return false;
		ll = add_granted_hold(&key, idx, serial, ask->xact);
		return true;
	}

	(void) add_hold(&key, ll->slot, ll->serial, ask->xact);
	return true;
}

/*
 * Drop one session-level hold.  Not holding it is a WARNING and false, as
 * for pg_advisory_unlock.
 */
static bool
release_key(const LocalLockKey *key, int user_off)
{
	LocalLock  *ll;

	ll = hash_search(local_locks, key, HASH_FIND, NULL);
	if (ll == NULL || ll->session_count == 0)
	{
		ereport(WARNING,
				(errmsg("zookeeper lock \"%s\" is not held by this session",
						key->path + user_off),
				 (ll != NULL && ll->xact_count > 0) ?
				 errdetail("It is held at transaction level and is released at the end of the transaction.") : 0));
		return false;
	}
	if (lock_is_lost(ll))
	{
		ereport(WARNING,
				(errmsg("zookeeper lock \"%s\" was lost when the zookeeper session ended",
						key->path + user_off)));
		forget_lost_lock(ll);
		return false;
	}
	drop_hold(ll, false);
	return true;
}

/*
 * Drop every session-level hold of this backend's locks (of one kind and
 * path, when given), keeping transaction-level holds.  A lock lost with
 * the session is dropped as well, without counting.  Returns how many
 * locks were released.
 */
static int
release_session_holds(ZklockKind kind, const char *path)
{
	HASH_SEQ_STATUS seq;
	LocalLock  *ll;
	List	   *keys = NIL;
	ListCell   *lc;
	int			released = 0;

	/* collect first: releasing removes entries from the hash */
	hash_seq_init(&seq, local_locks);
	while ((ll = hash_seq_search(&seq)) != NULL)
	{
		if (ll->session_count > 0 &&
			(kind == ZKK_NONE || ll->key.kind == kind) &&
			(path == NULL || strcmp(ll->key.path, path) == 0))
		{
			LocalLockKey *k = palloc(sizeof(LocalLockKey));

			*k = ll->key;
			keys = lappend(keys, k);
		}
	}
	foreach(lc, keys)
	{
		ll = hash_search(local_locks, lfirst(lc), HASH_FIND, NULL);
		if (ll == NULL)
			continue;
		if (lock_is_lost(ll))
		{
			forget_lost_lock(ll);
			continue;
		}
		released++;
		ll->session_count = 1;
		drop_hold(ll, false);
	}
	list_free_deep(keys);
	return released;
}

/*
 * Release one session-level hold of the lock of a kind at a path.
 */
static bool
release_lock(ZklockKind kind, text *path)
{
	LocalLockKey key;
	int			user_off;

	make_lock_key(path, kind, &key, &user_off);
	backend_setup();
	return release_key(&key, user_off);
}

/*
 * Fill in an acquire request.
 */
static void
init_ask(ZklockAsk *ask, ZklockOp op, ZklockKind kind, int64 timeout_ms, bool xact)
{
	memset(ask, 0, sizeof(*ask));
	ask->op = op;
	ask->kind = kind;
	ask->timeout_ms = timeout_ms;
	ask->xact = xact;
	ask->max_leases = 1;
}

/*
 * zk_mutex_acquire(path, timeout, revocable) returns boolean
 */
Datum
zk_mutex_acquire(PG_FUNCTION_ARGS)
{
	ZklockAsk	ask;
	text	   *path = path_arg(fcinfo, 0);

	init_ask(&ask, ZKOP_MUTEX, ZKK_MUTEX, timeout_arg(fcinfo, 1), false);
	ask.revocable = bool_arg(fcinfo, 2);
	PG_RETURN_BOOL(acquire_lock(&ask, path));
}

/*
 * zk_mutex_try_acquire(path) returns boolean
 */
Datum
zk_mutex_try_acquire(PG_FUNCTION_ARGS)
{
	ZklockAsk	ask;
	text	   *path = path_arg(fcinfo, 0);

	init_ask(&ask, ZKOP_MUTEX, ZKK_MUTEX, 0, false);
	PG_RETURN_BOOL(acquire_lock(&ask, path));
}

/*
 * zk_mutex_acquire_xact(path, timeout, revocable) returns boolean
 */
Datum
zk_mutex_acquire_xact(PG_FUNCTION_ARGS)
{
	ZklockAsk	ask;
	text	   *path = path_arg(fcinfo, 0);

	init_ask(&ask, ZKOP_MUTEX, ZKK_MUTEX, timeout_arg(fcinfo, 1), true);
	ask.revocable = bool_arg(fcinfo, 2);
	PG_RETURN_BOOL(acquire_lock(&ask, path));
}

/*
 * zk_mutex_release(path) returns boolean
 */
Datum
zk_mutex_release(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(release_lock(ZKK_MUTEX, path_arg(fcinfo, 0)));
}

/*
 * Shared body of the read/write lock acquires.
 */
static bool
rw_acquire(FunctionCallInfo fcinfo, ZklockOp op, ZklockKind kind, bool xact)
{
	ZklockAsk	ask;
	text	   *path = path_arg(fcinfo, 0);

	init_ask(&ask, op, kind, timeout_arg(fcinfo, 1), xact);
	ask.revocable = bool_arg(fcinfo, 2);
	return acquire_lock(&ask, path);
}

/*
 * zk_read_lock_acquire(path, timeout, revocable) returns boolean
 */
Datum
zk_read_lock_acquire(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(rw_acquire(fcinfo, ZKOP_READ, ZKK_READ, false));
}

/*
 * zk_read_lock_acquire_xact(path, timeout, revocable) returns boolean
 */
Datum
zk_read_lock_acquire_xact(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(rw_acquire(fcinfo, ZKOP_READ, ZKK_READ, true));
}

/*
 * zk_read_lock_release(path) returns boolean
 */
Datum
zk_read_lock_release(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(release_lock(ZKK_READ, path_arg(fcinfo, 0)));
}

/*
 * zk_write_lock_acquire(path, timeout, revocable) returns boolean
 */
Datum
zk_write_lock_acquire(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(rw_acquire(fcinfo, ZKOP_WRITE, ZKK_WRITE, false));
}

/*
 * zk_write_lock_acquire_xact(path, timeout, revocable) returns boolean
 */
Datum
zk_write_lock_acquire_xact(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(rw_acquire(fcinfo, ZKOP_WRITE, ZKK_WRITE, true));
}

/*
 * zk_write_lock_release(path) returns boolean
 */
Datum
zk_write_lock_release(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(release_lock(ZKK_WRITE, path_arg(fcinfo, 0)));
}

/*
 * zk_semaphore_mutex_acquire(path, timeout) returns boolean
 */
Datum
zk_semaphore_mutex_acquire(PG_FUNCTION_ARGS)
{
	ZklockAsk	ask;
	text	   *path = path_arg(fcinfo, 0);

	init_ask(&ask, ZKOP_LEASE, ZKK_SEMAPHORE_MUTEX, timeout_arg(fcinfo, 1), false);
	PG_RETURN_BOOL(acquire_lock(&ask, path));
}

/*
 * zk_semaphore_mutex_acquire_xact(path, timeout) returns boolean
 */
Datum
zk_semaphore_mutex_acquire_xact(PG_FUNCTION_ARGS)
{
	ZklockAsk	ask;
	text	   *path = path_arg(fcinfo, 0);

	init_ask(&ask, ZKOP_LEASE, ZKK_SEMAPHORE_MUTEX, timeout_arg(fcinfo, 1), true);
	PG_RETURN_BOOL(acquire_lock(&ask, path));
}

/*
 * zk_semaphore_mutex_release(path) returns boolean
 */
Datum
zk_semaphore_mutex_release(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(release_lock(ZKK_SEMAPHORE_MUTEX, path_arg(fcinfo, 0)));
}

/*
 * The paths of a multi-lock, checked: a one-dimensional, non-empty array
 * without NULLs or duplicates.  Returns a palloc'd array of texts.
 */
static text **
multi_lock_paths(FunctionCallInfo fcinfo, int *n)
{
	ArrayType  *arr;
	Datum	   *elems;
	bool	   *nulls;
	int			i;
	int			j;
	text	  **paths;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("array of zookeeper paths must not be null")));
	arr = PG_GETARG_ARRAYTYPE_P(0);
	if (ARR_NDIM(arr) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("array of zookeeper paths must be one-dimensional")));
	deconstruct_array(arr, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, n);
	if (*n == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("array of zookeeper paths must not be empty")));
	paths = palloc(sizeof(text *) * *n);
	for (i = 0; i < *n; i++)
	{
		LocalLockKey ki;
		int			off;

		if (nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("zookeeper path must not be null"),
					 errdetail("Element %d of the array is null.", i + 1)));
		paths[i] = DatumGetTextPP(elems[i]);
		make_lock_key(paths[i], ZKK_MUTEX, &ki, &off);
		for (j = 0; j < i; j++)
		{
			LocalLockKey kj;
			int			offj;

			make_lock_key(paths[j], ZKK_MUTEX, &kj, &offj);
			if (strcmp(ki.path, kj.path) == 0)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("zookeeper path \"%s\" appears twice in the multi-lock",
								ki.path + off)));
		}
	}
	return paths;
}

/*
 * What is left of a timeout (ms, -1 = none) that started at start.
 */
static int64
remaining_ms(int64 timeout_ms, TimestampTz start)
{
	int64		left;

	if (timeout_ms < 0)
		return -1;
	left = timeout_ms - (GetCurrentTimestamp() - start) / 1000;
	return left < 0 ? 0 : left;
}

/*
 * Give back, in reverse order, the first taken mutexes of a multi-lock
 * that could not be completed.
 */
static void
multi_lock_undo(text **paths, int taken)
{
	while (taken > 0)
	{
		LocalLockKey key;
		int			off;
		LocalLock  *ll;

		taken--;
		make_lock_key(paths[taken], ZKK_MUTEX, &key, &off);
		ll = hash_search(local_locks, &key, HASH_FIND, NULL);
		if (ll != NULL && ll->session_count > 0)
			drop_hold(ll, false);
	}
}

/*
 * zk_multi_lock_acquire(paths text[], timeout) returns boolean: every
 * mutex in order, or none (the ones taken are released in reverse).
 */
Datum
zk_multi_lock_acquire(PG_FUNCTION_ARGS)
{
	int			n;
	text	  **paths = multi_lock_paths(fcinfo, &n);
	int64		timeout_ms = timeout_arg(fcinfo, 1);
	TimestampTz start = GetCurrentTimestamp();
	volatile int taken = 0;
	bool		ok = true;

	PG_TRY();
	{
		while (taken < n)
		{
			ZklockAsk	ask;

			init_ask(&ask, ZKOP_MUTEX, ZKK_MUTEX, remaining_ms(timeout_ms, start), false);
			if (!acquire_lock(&ask, paths[taken]))
			{
				ok = false;
				break;
			}
			taken++;
		}
	}
	PG_CATCH();
	{
		multi_lock_undo(paths, taken);
		PG_RE_THROW();
	}
	PG_END_TRY();

	if (!ok)
		multi_lock_undo(paths, taken);
	PG_RETURN_BOOL(ok);
}

/*
 * zk_multi_lock_release(paths text[]) returns boolean: release each mutex
 * in reverse order; false when one of them was not held.
 */
Datum
zk_multi_lock_release(PG_FUNCTION_ARGS)
{
	int			n;
	text	  **paths = multi_lock_paths(fcinfo, &n);
	bool		all = true;
	int			i;

	backend_setup();
	for (i = n - 1; i >= 0; i--)
	{
		LocalLockKey key;
		int			off;

		make_lock_key(paths[i], ZKK_MUTEX, &key, &off);
		if (!release_key(&key, off))
			all = false;
	}
	PG_RETURN_BOOL(all);
}

/*
 * Return the leases of an acquire that did not get all it asked for.
 */
static void
give_back_leases(const int *slots, const uint32 *serials, int taken)
{
	while (taken > 0)
	{
		taken--;
		(void) withdraw_request(slots[taken], serials[taken], true);
	}
}

/*
 * Shared body of the semaphore acquires: qty leases, one after the other,
 * all or none.  Returns the lease names, or NULL on timeout.
 */
static Datum
semaphore_acquire(FunctionCallInfo fcinfo, bool xact)
{
	text	   *path = path_arg(fcinfo, 0);
	int32		max_leases = count_arg(fcinfo, 1, "max_leases");
	int32		qty = count_arg(fcinfo, 2, "qty");
	int64		timeout_ms = timeout_arg(fcinfo, 3);
	LocalLockKey key;
	int			user_off;
	TimestampTz start = GetCurrentTimestamp();
	Datum	   *names;
	int		   *slots;
	uint32	   *serials;
	volatile int taken = 0;
	bool		ok = true;
	int			i;

	if (qty > max_leases)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("qty (%d) must not exceed max_leases (%d)", qty, max_leases)));
	make_lock_key(path, ZKK_SEMAPHORE, &key, &user_off);
	backend_setup();

	names = palloc(sizeof(Datum) * qty);
	slots = palloc(sizeof(int) * qty);
	serials = palloc(sizeof(uint32) * qty);
	PG_TRY();
	{
		while (taken < qty)
		{
			ZklockAsk	ask;

			init_ask(&ask, ZKOP_LEASE, ZKK_SEMAPHORE, remaining_ms(timeout_ms, start), xact);
			ask.max_leases = max_leases;
			if (!request_lock(&ask, &key, user_off, &slots[taken], &serials[taken]))
			{
				ok = false;
				break;
			}
			taken++;
		}
	}
	PG_CATCH();
	{
		give_back_leases(slots, serials, taken);
		PG_RE_THROW();
	}
	PG_END_TRY();

	if (!ok)
	{
		/* all or nothing: give back what we got */
		give_back_leases(slots, serials, taken);
		PG_RETURN_NULL();
	}

	for (i = 0; i < qty; i++)
	{
		LocalLockKey lk = key;

		strlcpy(lk.lease, zklock_shared->slots[slots[i]].node, sizeof(lk.lease));
		names[i] = CStringGetTextDatum(lk.lease);
		(void) add_granted_hold(&lk, slots[i], serials[i], xact);
	}
	PG_RETURN_ARRAYTYPE_P(construct_array(names, qty, TEXTOID, -1, false, TYPALIGN_INT));
}

/*
 * zk_semaphore_acquire(path, max_leases, qty, timeout) returns text[]
 */
Datum
zk_semaphore_acquire(PG_FUNCTION_ARGS)
{
	return semaphore_acquire(fcinfo, false);
}

/*
 * zk_semaphore_acquire_xact(path, max_leases, qty, timeout) returns text[]
 */
Datum
zk_semaphore_acquire_xact(PG_FUNCTION_ARGS)
{
	return semaphore_acquire(fcinfo, true);
}

/*
 * zk_semaphore_release(path, lease) returns boolean
 */
Datum
zk_semaphore_release(PG_FUNCTION_ARGS)
{
	LocalLockKey key;
	int			user_off;
	text	   *lease;

	make_lock_key(path_arg(fcinfo, 0), ZKK_SEMAPHORE, &key, &user_off);
	if (PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("lease must not be null")));
	lease = PG_GETARG_TEXT_PP(1);
	if (VARSIZE_ANY_EXHDR(lease) >= ZKLOCK_NODE_NAME_SIZE)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("lease name is too long")));
	text_to_cstring_buffer(lease, key.lease, sizeof(key.lease));
	{
		/* a lease is one node name: what is valid as "/<name>" */
		char		as_path[ZKLOCK_NODE_NAME_SIZE + 1];

		snprintf(as_path, sizeof(as_path), "/%s", key.lease);
		if (strchr(key.lease, '/') != NULL ||
			zklock_validate_path(as_path, strlen(as_path), ZKLOCK_NODE_NAME_SIZE, NULL) != ZKLOCK_PATH_OK)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid lease name \"%s\"", key.lease),
					 errhint("Pass a lease name returned by zk_semaphore_acquire.")));
	}
	backend_setup();
	PG_RETURN_BOOL(release_key(&key, user_off));
}

/*
 * zk_semaphore_release_all(path) returns integer: return every
 * session-level lease this session holds on the semaphore.
 */
Datum
zk_semaphore_release_all(PG_FUNCTION_ARGS)
{
	LocalLockKey key;
	int			user_off;

	make_lock_key(path_arg(fcinfo, 0), ZKK_SEMAPHORE, &key, &user_off);
	backend_setup();
	PG_RETURN_INT32(release_session_holds(ZKK_SEMAPHORE, key.path));
}

/*
 * Run a request about the path in argument 0 that takes no lock (barrier,
 * revoke) and return the worker's result; *timed_out (if given) says
 * whether the timeout passed first.
 */
static int64
path_request(FunctionCallInfo fcinfo, ZklockOp op, ZklockKind kind,
			 int64 timeout_ms, bool *timed_out)
{
	ZklockAsk	ask;
	LocalLockKey key;
	int			user_off;

	make_lock_key(path_arg(fcinfo, 0), kind, &key, &user_off);
	backend_setup();
	init_ask(&ask, op, kind, timeout_ms, false);
	if (timeout_ms == 0)
	{
		/* a zero timeout is a look: the worker answers without waiting */
		ask.try_only = true;
		ask.timeout_ms = -1;
	}
	return run_request(&ask, &key, user_off, 0, 0, timed_out, NULL);
}

/*
 * A barrier is a node the user named.  Refuse, before anything reaches
 * ZooKeeper, to set or remove a node whose name is one a recipe gives its
 * own nodes (a lock, lease or member node of zklock or Curator): removing
 * one would take a lock from its holder, and setting one would put a
 * persistent node at the head of a lock's queue.
 */
static void
check_barrier_name(FunctionCallInfo fcinfo)
{
	text	   *t = path_arg(fcinfo, 0);
	char	   *path = text_to_cstring(t);
	char	   *last = strrchr(path, '/');
	const char *kind = zklock_recipe_node_kind(last ? last + 1 : path);

	if (kind != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("zookeeper path \"%s\" names a %s, not a barrier", path, kind),
				 errdetail("Barrier calls refuse nodes named like the nodes of locks, leases and double barriers."),
				 errhint("Release the lock with its own release function, or use zk_revoke() to ask its holder.")));
	pfree(path);
}

/*
 * zk_barrier_set(path) returns boolean: true when this call set it.
 */
Datum
zk_barrier_set(PG_FUNCTION_ARGS)
{
	check_barrier_name(fcinfo);
	PG_RETURN_BOOL(path_request(fcinfo, ZKOP_BARRIER_SET, ZKK_NONE, -1, NULL) == 1);
}

/*
 * zk_barrier_remove(path) returns boolean: true when this call removed it.
 * An ephemeral node is never a barrier: the worker refuses it too.
 */
Datum
zk_barrier_remove(PG_FUNCTION_ARGS)
{
	check_barrier_name(fcinfo);
	PG_RETURN_BOOL(path_request(fcinfo, ZKOP_BARRIER_REMOVE, ZKK_NONE, -1, NULL) == 1);
}

/*
 * zk_barrier_wait(path, timeout) returns boolean: true once the barrier
 * is down, false when the timeout passed first.
 */
Datum
zk_barrier_wait(PG_FUNCTION_ARGS)
{
	int64		timeout_ms = timeout_arg(fcinfo, 1);
	bool		timed_out = false;
	int64		value;

	value = path_request(fcinfo, ZKOP_BARRIER_WAIT, ZKK_BARRIER, timeout_ms, &timed_out);
	PG_RETURN_BOOL(!timed_out && value == 1);
}

/*
 * zk_double_barrier_enter(path, member_qty, timeout) returns boolean
 */
Datum
zk_double_barrier_enter(PG_FUNCTION_ARGS)
{
	text	   *path = path_arg(fcinfo, 0);
	int32		member_qty = count_arg(fcinfo, 1, "member_qty");
	int64		timeout_ms = timeout_arg(fcinfo, 2);
	ZklockAsk	ask;
	LocalLockKey key;
	int			user_off;
	int			idx;
	uint32		serial;

	make_lock_key(path, ZKK_DOUBLE_BARRIER, &key, &user_off);
	backend_setup();
	if (find_hold(&key, user_off) != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_IN_USE),
				 errmsg("this session has already entered double barrier \"%s\"",
						key.path + user_off)));
	init_ask(&ask, ZKOP_DBARRIER_ENTER, ZKK_DOUBLE_BARRIER, timeout_ms, false);
	ask.member_qty = member_qty;
	/* a zero timeout is a look: in only if the quorum is there now */
	ask.try_only = (timeout_ms == 0);
	idx = claim_slot(&ask, &key, user_off, &serial);
	if (wait_for_request(idx, serial, ask.try_only ? -1 : timeout_ms,
						 key.path + user_off, NULL, NULL) != WAIT_GRANTED)
		PG_RETURN_BOOL(false);
	(void) add_granted_hold(&key, idx, serial, false);
	PG_RETURN_BOOL(true);
}

/*
 * zk_double_barrier_leave(path, timeout) returns boolean: Curator's leave
 * protocol on our membership; false when the timeout passed before every
 * member left (our membership is withdrawn either way).
 */
Datum
zk_double_barrier_leave(PG_FUNCTION_ARGS)
{
	text	   *path = path_arg(fcinfo, 0);
	int64		timeout_ms = timeout_arg(fcinfo, 1);
	LocalLockKey key;
	int			user_off;
	LocalLock  *ll;
	int			idx;
	uint32		serial;
	bool		posted = false;
	WaitOutcome outcome;

	make_lock_key(path, ZKK_DOUBLE_BARRIER, &key, &user_off);
	backend_setup();
	ll = hash_search(local_locks, &key, HASH_FIND, NULL);
	if (ll == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("this session has not entered double barrier \"%s\"",
						key.path + user_off)));
	idx = ll->slot;
	serial = ll->serial;
	hash_search(local_locks, &key, HASH_REMOVE, NULL);

	/* turn the membership into a leave request */
	LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
	if (zklock_shared->slots[idx].serial == serial &&
		zklock_shared->slots[idx].state == ZKS_HELD)
	{
		zklock_shared->slots[idx].op = ZKOP_DBARRIER_LEAVE;
		/* a zero timeout is a look: our node goes, we do not wait */
		zklock_shared->slots[idx].try_only = (timeout_ms == 0);
		zklock_shared->slots[idx].state = ZKS_NEW;
		zklock_post(idx);
		posted = true;
	}
	LWLockRelease(zklock_shared->lock);
	if (!posted)
	{
		ereport(WARNING,
				(errmsg("double barrier membership \"%s\" was lost when the zookeeper session ended",
						key.path + user_off)));
		(void) withdraw_request(idx, serial, true);
		PG_RETURN_BOOL(false);
	}
	zklock_wake_worker();
	outcome = wait_for_request(idx, serial, timeout_ms == 0 ? -1 : timeout_ms,
							   key.path + user_off, NULL, NULL);
	PG_RETURN_BOOL(outcome == WAIT_DONE);
}

/*
 * zk_revoke(path) returns integer: ask every holder of the lock at path
 * to release it, as Curator's Revoker.attemptRevoke does.
 */
Datum
zk_revoke(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT32((int32) path_request(fcinfo, ZKOP_REVOKE, ZKK_NONE, -1, NULL));
}

static Datum utf8_text_datum(const char *s);

/*
 * zk_revocation_requested() returns setof text: the paths of this
 * session's revocable locks that someone asked to release, each once (a
 * write holder that downgraded holds two locks on one path).
 */
Datum
zk_revocation_requested(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	HASH_SEQ_STATUS seq;
	LocalLock  *ll;
	List	   *listed = NIL;

	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	backend_setup();
	hash_seq_init(&seq, local_locks);
	while ((ll = hash_seq_search(&seq)) != NULL)
	{
		ZklockSlot *slot = &zklock_shared->slots[ll->slot];
		bool		asked;
		char		path[ZKLOCK_FULL_PATH_SIZE];

		LWLockAcquire(zklock_shared->lock, LW_SHARED);
		asked = slot->serial == ll->serial && slot->revoke_requested;
		strlcpy(path, slot->path + slot->user_path_off, sizeof(path));
		LWLockRelease(zklock_shared->lock);
		if (asked)
		{
			ListCell   *lc;
			bool		seen = false;

			foreach(lc, listed)
				seen = seen || strcmp((char *) lfirst(lc), path) == 0;
			if (!seen)
			{
				Datum		v = utf8_text_datum(path);
				bool		n = false;

				tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, &v, &n);
				listed = lappend(listed, pstrdup(path));
			}
		}
	}
	list_free_deep(listed);
	return (Datum) 0;
}

/* One node of zk_participants */
typedef struct Participant
{
	char	   *name;
	char	   *data;			/* NULL when gone or empty */
} Participant;

/*
 * Bytes as \x followed by hex, the way bytea prints them.
 */
static char *
hex_text(const char *p, int len)
{
	StringInfoData buf;
	int			i;

	initStringInfo(&buf);
	appendStringInfoString(&buf, "\\x");
	for (i = 0; i < len; i++)
		appendStringInfo(&buf, "%02x", (unsigned char) p[i]);
	return buf.data;
}

/*
 * A UTF-8 string from ZooKeeper (a path, a node name, node data) in the
 * database encoding, always as a palloc'd copy.  In a UTF8 or SQL_ASCII
 * database the bytes are kept as they are (SQL_ASCII does no conversion
 * on the way in either).  In any other encoding the string is converted;
 * when it holds a character the encoding cannot represent (a path of
 * another database, say, seen through zk_locks), the whole string is shown
 * as \x-hex rather than failing the query.  Invalid UTF-8 (another
 * client's binary data) is shown as \x-hex too.
 */
static char *
text_from_utf8(const char *p, int len)
{
	int			enc = GetDatabaseEncoding();
	MemoryContext cxt = CurrentMemoryContext;
	char	   *volatile result = NULL;

	if (!pg_verify_mbstr(PG_UTF8, p, len, true))
		return hex_text(p, len);
	if (enc == PG_UTF8 || enc == PG_SQL_ASCII)
		return pnstrdup(p, len);

	/* a conversion error has nothing to clean up but memory */
	PG_TRY();
	{
		char	   *conv = pg_any_to_server(p, len, PG_UTF8);

		result = conv == p ? pnstrdup(p, len) : conv;
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(cxt);
		FlushErrorState();
		result = hex_text(p, len);
	}
	PG_END_TRY();
	return result;
}

/*
 * text_from_utf8 as a text Datum, for a NUL-terminated string.
 */
static Datum
utf8_text_datum(const char *s)
{
	return CStringGetTextDatum(text_from_utf8(s, strlen(s)));
}

static const char *participant_sort_lock;
static bool participant_sort_rw;

/*
 * qsort comparator of participants in Curator's queue order.
 */
static int
participant_cmp(const void *a, const void *b)
{
	const Participant *pa = a;
	const Participant *pb = b;
	const char *ka;
	const char *kb;
	int			c;

	if (participant_sort_rw)
	{
		ka = zklock_rw_sort_key(pa->name);
		kb = zklock_rw_sort_key(pb->name);
	}
	else if (participant_sort_lock)
	{
		ka = zklock_sort_key(pa->name, participant_sort_lock);
		kb = zklock_sort_key(pb->name, participant_sort_lock);
	}
	else
	{
		ka = pa->name;
		kb = pb->name;
	}
	c = strcmp(ka, kb);
	if (c == 0 && participant_sort_rw)
	{
		/* a downgraded read node sorts at its writer's place, ahead of it */
		bool		ra = strstr(pa->name, ZKLOCK_READ_LOCK_NAME) != NULL;
		bool		rb = strstr(pb->name, ZKLOCK_READ_LOCK_NAME) != NULL;

		if (ra != rb)
			return ra ? -1 : 1;
	}
	return c != 0 ? c : strcmp(pa->name, pb->name);
}

/* how many times zk_participants asks for a bigger answer */
#define PARTICIPANTS_TRIES 8

/*
 * Which of the sorted participants hold the lock (zklock_lock_holders
 * decides, over the lock nodes alone): an array of n flags.
 */
static bool *
participant_holders(Participant *parts, int n, int kind, bool rw, bool mutex)
{
	bool	   *holds = palloc0(sizeof(bool) * Max(n, 1));
	char	  **names;
	int		   *map;
	int		   *h;
	int			m = 0;
	int			nh;
	int			i;

	if (kind != ZKLOCK_PARTICIPANTS_LOCK || (!rw && !mutex))
		return holds;
	names = palloc(sizeof(char *) * Max(n, 1));
	map = palloc(sizeof(int) * Max(n, 1));
	h = palloc(sizeof(int) * Max(n, 1));
	for (i = 0; i < n; i++)
	{
		bool		lock_node = rw ?
			(strstr(parts[i].name, ZKLOCK_READ_LOCK_NAME) != NULL ||
			 strstr(parts[i].name, ZKLOCK_WRITE_LOCK_NAME) != NULL) :
			strstr(parts[i].name, ZKLOCK_LOCK_NAME) != NULL;

		if (lock_node)
		{
			names[m] = parts[i].name;
			map[m++] = i;
		}
	}
	nh = zklock_lock_holders(names, m, rw, h);
	for (i = 0; i < nh; i++)
		holds[map[h[i]]] = true;
	pfree(names);
	pfree(map);
	pfree(h);
	return holds;
}

/*
 * zk_participants(path) returns table(position, node, kind, data, holds):
 * the recipe's nodes at path in queue order, with their data.
 */
Datum
zk_participants(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	LocalLockKey key;
	int			user_off;
	uint32		size = 64 * 1024;
	int			attempt;
	bool		got = false;
	Participant *parts = NULL;
	bool	   *holds;
	int			n = 0;
	int			kind = 0;
	bool		rw = false;
	bool		mutex = false;
	int			i;

	make_lock_key(path_arg(fcinfo, 0), ZKK_NONE, &key, &user_off);
	backend_setup();
	InitMaterializedSRF(fcinfo, 0);

	/*
	 * The worker says how much room the answer needs when the segment is
	 * too small; the nodes may change between two tries, so the next
	 * segment gets room to spare.  A set that outgrows every try is an
	 * error, never an empty answer.
	 */
	for (attempt = 0; attempt < PARTICIPANTS_TRIES && !got; attempt++)
	{
		ZklockAsk	ask;
		dsm_segment *seg = dsm_create(size, 0);
		uint32		needed = 0;
		int64		value;
		char	   *p;

		init_ask(&ask, ZKOP_PARTICIPANTS, ZKK_NONE, -1, false);
		value = run_request(&ask, &key, user_off, dsm_segment_handle(seg), size,
							NULL, &needed);
		if (value == -1 && needed > size)
		{
			dsm_detach(seg);
			if (needed > MaxAllocSize / 2)
				ereport(ERROR,
						(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
						 errmsg("the participants of \"%s\" need %u bytes, more than zk_participants can hand over",
								key.path + user_off, needed)));
			size = needed + needed / 2;
			continue;
		}
		if (value < 0)
			ereport(ERROR,
					(errcode(ERRCODE_INTERNAL_ERROR),
					 errmsg("zklock worker could not hand back the participants of \"%s\"",
							key.path + user_off)));
		p = dsm_segment_address(seg);
		n = ((int32 *) p)[0];
		kind = ((int32 *) p)[1];
		p += sizeof(int32) * 2;
		parts = palloc0(sizeof(Participant) * Max(n, 1));
		for (i = 0; i < n; i++)
		{
			int32		nlen;
			int32		dlen;

			memcpy(&nlen, p, sizeof(int32));
			memcpy(&dlen, p + sizeof(int32), sizeof(int32));
			p += sizeof(int32) * 2;
			parts[i].name = pstrdup(p);
			p += MAXALIGN(nlen + 1);
			if (dlen > 0)
				parts[i].data = text_from_utf8(p, dlen);
			p += MAXALIGN(Max(dlen, 0) + 1);
		}
		dsm_detach(seg);
		got = true;
	}
	if (!got)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the participants of \"%s\" kept growing faster than they could be read",
						key.path + user_off),
				 errdetail("%d tries, the last with room for %u bytes.", PARTICIPANTS_TRIES, size),
				 errhint("Try again.")));

	for (i = 0; i < n; i++)
	{
		if (strstr(parts[i].name, ZKLOCK_READ_LOCK_NAME) ||
			strstr(parts[i].name, ZKLOCK_WRITE_LOCK_NAME))
			rw = true;
		else if (strstr(parts[i].name, ZKLOCK_LOCK_NAME))
			mutex = true;
	}
	participant_sort_rw = rw && kind == ZKLOCK_PARTICIPANTS_LOCK;
	participant_sort_lock = kind == ZKLOCK_PARTICIPANTS_LEASES ? ZKLOCK_LEASE_NAME :
		(mutex && !rw) ? ZKLOCK_LOCK_NAME : NULL;
	if (n > 1)
		qsort(parts, n, sizeof(Participant), participant_cmp);
	holds = participant_holders(parts, n, kind, rw, mutex);

	for (i = 0; i < n; i++)
	{
		Datum		values[5];
		bool		nulls[5];
		const char *pk;

		memset(nulls, 0, sizeof(nulls));
		nulls[4] = true;
		if (kind == ZKLOCK_PARTICIPANTS_LEASES)
			pk = "lease";
		else if (strstr(parts[i].name, ZKLOCK_WRITE_LOCK_NAME))
		{
			pk = "write";
			values[4] = BoolGetDatum(holds[i]);
			nulls[4] = false;
		}
		else if (strstr(parts[i].name, ZKLOCK_READ_LOCK_NAME))
		{
			pk = "read";
			values[4] = BoolGetDatum(holds[i]);
			nulls[4] = false;
		}
		else if (strstr(parts[i].name, ZKLOCK_LOCK_NAME))
		{
			pk = "lock";
			values[4] = BoolGetDatum(holds[i]);
			nulls[4] = false;
		}
		else if (strcmp(parts[i].name, ZKLOCK_READY_NODE) == 0)
			pk = "ready";
		else if (zklock_is_uuid(parts[i].name))
			pk = "member";
		else
			pk = "other";

		values[0] = Int32GetDatum(i + 1);
		values[1] = utf8_text_datum(parts[i].name);
		values[2] = CStringGetTextDatum(pk);
		if (parts[i].data)
			values[3] = CStringGetTextDatum(parts[i].data);
		else
			nulls[3] = true;
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

/*
 * zk_lock_token(path) returns bigint: the creation zxid of this session's
 * node of a lock it holds at path, a fencing token that grows with every
 * new holder.
 */
Datum
zk_lock_token(PG_FUNCTION_ARGS)
{
	static const ZklockKind kinds[] = {ZKK_MUTEX, ZKK_WRITE, ZKK_READ, ZKK_SEMAPHORE_MUTEX};
	LocalLockKey key;
	int			user_off;
	int			i;

	make_lock_key(path_arg(fcinfo, 0), ZKK_MUTEX, &key, &user_off);
	backend_setup();
	for (i = 0; i < lengthof(kinds); i++)
	{
		LocalLock  *ll;

		key.kind = kinds[i];
		ll = find_hold(&key, user_off);
		if (ll != NULL)
		{
			int64		token;

			LWLockAcquire(zklock_shared->lock, LW_SHARED);
			token = zklock_shared->slots[ll->slot].czxid;
			LWLockRelease(zklock_shared->lock);
			if (token != 0)
				PG_RETURN_INT64(token);
		}
	}
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("this session holds no lock on \"%s\"", key.path + user_off),
			 errhint("A fencing token exists only for a held mutex, read/write or semaphore mutex lock.")));
	PG_RETURN_NULL();
}

/*
 * zk_release_all() returns integer: release every session-level hold of
 * this backend, of every recipe; transaction-level holds stay until the
 * transaction ends.
 */
Datum
zk_release_all(PG_FUNCTION_ARGS)
{
	backend_setup();
	PG_RETURN_INT32(release_session_holds(ZKK_NONE, NULL));
}

/*
 * zk_status(): one row about the worker's ZooKeeper session.
 */
Datum
zk_status(PG_FUNCTION_ARGS)
{
	ZklockShared *sh = zklock_shared;
	TupleDesc	tupdesc;
	Datum		values[17];
	bool		nulls[17];
	int64		counts[6];
	TimestampTz now = GetCurrentTimestamp();
	TimestampTz lease_until;
	bool		lease_ok = zklock_lease_valid(now, &lease_until);
	char		sid[32];
	char		server[128];
	ZklockConnState cs;
	bool		have_session;
	int			timeout;
	int			queued = 0;
	int			held = 0;
	int			used = 0;
	int			worker_pid;
	TimestampTz since;
	int			i;

	if (sh == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("zklock shared memory is not initialized")));
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");

	LWLockAcquire(sh->lock, LW_SHARED);
	cs = sh->conn_state;
	have_session = sh->have_session;
	snprintf(sid, sizeof(sid), "0x%016llx", (unsigned long long) sh->session_id);
	strlcpy(server, sh->server, sizeof(server));
	timeout = sh->negotiated_timeout;
	worker_pid = sh->worker_pid;
	since = sh->state_since;
	counts[0] = sh->connected_count;
	counts[1] = sh->suspended_count;
	counts[2] = sh->expired_count;
	counts[3] = sh->locks_lost_count;
	counts[4] = sh->lease_expired_count;
	counts[5] = sh->deletes_used;
	for (i = 0; i < sh->nslots; i++)
	{
		ZklockSlotState st = sh->slots[i].state;

		if (st != ZKS_FREE)
			used++;
		if (st == ZKS_NEW || st == ZKS_ACTIVE)
			queued++;
		else if (st == ZKS_HELD)
			held++;
	}
	LWLockRelease(sh->lock);

	memset(nulls, 0, sizeof(nulls));
	values[0] = CStringGetTextDatum(zklock_conn_state_name(cs));
	values[1] = CStringGetTextDatum(sid);
	nulls[1] = !have_session;
	values[2] = CStringGetTextDatum(server);
	nulls[2] = (cs != ZKC_CONNECTED || server[0] == '\0');
	values[3] = Int32GetDatum(timeout);
	nulls[3] = !have_session;
	values[4] = Int32GetDatum(queued);
	values[5] = Int32GetDatum(held);
	values[6] = Int32GetDatum(worker_pid);
	nulls[6] = (worker_pid == 0);
	values[7] = TimestampTzGetDatum(since);
	nulls[7] = (since == 0);
	values[8] = Int32GetDatum(used);
	values[9] = Int64GetDatum(counts[0]);
	values[10] = Int64GetDatum(counts[1]);
	values[11] = Int64GetDatum(counts[2]);
	values[12] = TimestampTzGetDatum(lease_until);
	nulls[12] = (lease_until == 0);
	{
		Interval   *left = palloc0(sizeof(Interval));

		left->time = lease_ok ? lease_until - now : 0;
		values[13] = IntervalPGetDatum(left);
		nulls[13] = (lease_until == 0);
	}
	values[14] = Int64GetDatum(counts[3]);
	values[15] = Int64GetDatum(counts[4]);
	values[16] = Int64GetDatum(counts[5]);

	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}

/*
 * Names of a lock kind as zk_locks shows them: recipe and mode.
 */
static void
kind_names(ZklockKind kind, const char **recipe, const char **mode)
{
	switch (kind)
	{
		case ZKK_MUTEX:
			*recipe = "mutex";
			*mode = "exclusive";
			return;
		case ZKK_READ:
			*recipe = "read";
			*mode = "shared";
			return;
		case ZKK_WRITE:
			*recipe = "write";
			*mode = "exclusive";
			return;
		case ZKK_SEMAPHORE_MUTEX:
			*recipe = "semaphore_mutex";
			*mode = "exclusive";
			return;
		case ZKK_SEMAPHORE:
			*recipe = "semaphore";
			*mode = "lease";
			return;
		case ZKK_DOUBLE_BARRIER:
			*recipe = "double_barrier";
			*mode = "member";
			return;
		case ZKK_BARRIER:
			*recipe = "barrier";
			*mode = "wait";
			return;
		case ZKK_NONE:
			break;
	}
	*recipe = "request";
	*mode = "";
}

/*
 * zk_locks(): every lock held or waited for in this cluster.
 */
Datum
zk_locks(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	ZklockShared *sh = zklock_shared;
	ZklockSlot *copy;
	int			n = 0;
	int			i;
	bool		lease_ok;

	if (sh == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("zklock shared memory is not initialized")));
	InitMaterializedSRF(fcinfo, 0);
	lease_ok = zklock_lease_valid(GetCurrentTimestamp(), NULL);

	/* copy under the lock, build tuples after */
	/* a table of more than ~650k slots is more than 1 GB */
	copy = palloc_extended(sizeof(ZklockSlot) * (Size) sh->nslots, MCXT_ALLOC_HUGE);
	LWLockAcquire(sh->lock, LW_SHARED);
	for (i = 0; i < sh->nslots; i++)
	{
		ZklockSlot *s = &sh->slots[i];

		/* holders and waiters; withdrawn entries and requests are neither */
		if ((s->state == ZKS_NEW || s->state == ZKS_ACTIVE ||
			 s->state == ZKS_HELD || s->state == ZKS_LOST) &&
			s->kind != ZKK_NONE)
			memcpy(&copy[n++], s, sizeof(ZklockSlot));
	}
	LWLockRelease(sh->lock);

	for (i = 0; i < n; i++)
	{
		ZklockSlot *s = &copy[i];
		Datum		values[11];
		bool		nulls[11];
		const char *scope;
		const char *recipe;
		const char *mode;
		const char *state;

		memset(nulls, 0, sizeof(nulls));
		if (s->session_count > 0 && s->xact_count > 0)
			scope = "session+xact";
		else if (s->xact_count > 0)
			scope = "xact";
		else
			scope = "session";
		kind_names(s->kind, &recipe, &mode);
		state = zklock_slot_state_name(s->state);
		/* held, but not provably any more (a stalled worker cannot say so) */
		if (s->state == ZKS_HELD && !lease_ok)
			state = zklock_slot_state_name(ZKS_LOST);
		if (s->kind == ZKK_DOUBLE_BARRIER && s->op == ZKOP_DBARRIER_LEAVE)
			state = "leaving";

		values[0] = Int32GetDatum(s->pid);
		values[1] = CStringGetTextDatum(recipe);
		values[2] = utf8_text_datum(s->path + s->user_path_off);
		values[3] = utf8_text_datum(s->node);
		nulls[3] = (s->node[0] == '\0');
		values[4] = CStringGetTextDatum(mode);
		values[5] = CStringGetTextDatum(scope);
		values[6] = Int32GetDatum(s->session_count + s->xact_count);
		values[7] = CStringGetTextDatum(state);
		values[8] = TimestampTzGetDatum(s->since);
		values[9] = Int64GetDatum(s->czxid);
		nulls[9] = (s->state != ZKS_HELD || s->czxid == 0);
		values[10] = BoolGetDatum(s->revoke_requested);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

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
#include "commands/dbcommands.h"
#include "fmgr.h"
#include "funcapi.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/postmaster.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
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
PG_FUNCTION_INFO_V1(zk_release_all);
PG_FUNCTION_INFO_V1(zk_status);
PG_FUNCTION_INFO_V1(zk_locks);

/* Key of a lock in the backend-local registry */
typedef struct LocalLockKey
{
	ZklockOp	op;
	char		path[ZKLOCK_FULL_PATH_SIZE];
} LocalLockKey;

/* What this backend holds of one lock */
typedef struct LocalLock
{
	LocalLockKey key;
	int			slot;			/* its entry in the shared table */
	uint32		serial;
	int32		session_count;
	int32		xact_count;
} LocalLock;

/* One transaction-level hold, remembered for commit, abort and savepoints */
typedef struct XactHold
{
	LocalLockKey key;
	SubTransactionId subid;
} XactHold;

static HTAB *local_locks = NULL;
static List *xact_holds = NIL;
static bool backend_ready = false;
static char node_data[ZKLOCK_NODE_DATA_SIZE];

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
 * Give up a request or a lock: a request the worker has not seen is
 * dropped, one it works on is cancelled, a held lock is released when
 * release_if_held (otherwise it is kept and true is returned).
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
	ZklockSlot *slot = &zklock_shared->slots[ll->slot];
	bool		lost;

	LWLockAcquire(zklock_shared->lock, LW_SHARED);
	lost = (slot->serial != ll->serial || slot->state != ZKS_HELD);
	LWLockRelease(zklock_shared->lock);
	return lost;
}

/*
 * Transaction callback: refuse PREPARE and commit where they would be
 * wrong, release transaction-level locks at the end.
 */
static void
xact_callback(XactEvent event, void *arg)
{
	ListCell   *lc;

	switch (event)
	{
		case XACT_EVENT_PRE_PREPARE:
		case XACT_EVENT_PARALLEL_PRE_COMMIT:
			if (event == XACT_EVENT_PRE_PREPARE && xact_holds != NIL)
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("cannot PREPARE a transaction that holds a zklock transaction-level lock"),
						 errdetail("ZooKeeper locks belong to the session's connection and cannot outlive it in a prepared transaction.")));
			break;
		case XACT_EVENT_PRE_COMMIT:
			foreach(lc, xact_holds)
			{
				XactHold   *h = (XactHold *) lfirst(lc);
				LocalLock  *ll = hash_search(local_locks, &h->key, HASH_FIND, NULL);

				if (ll != NULL && lock_is_lost(ll))
					ereport(ERROR,
							(errcode(ERRCODE_TRANSACTION_ROLLBACK),
							 errmsg("zookeeper lock \"%s\" was lost before commit",
									zklock_shared->slots[ll->slot].path),
							 errdetail("The ZooKeeper session of this cluster ended while the transaction held the lock."),
							 errhint("Retry the transaction.")));
			}
			break;
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
		case XACT_EVENT_PREPARE:
			if (xact_holds != NIL)
				release_xact_holds(InvalidSubTransactionId);
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

		if (slot->pid != MyProcPid || slot->procno != MyProc->pgprocno)
			continue;
		switch (slot->state)
		{
			case ZKS_NEW:
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

	if (buf.len >= ZKLOCK_NODE_DATA_SIZE)
		snprintf(node_data, sizeof(node_data), "{\"port\":%d,\"pid\":%d}",
				 PostPortNumber, MyProcPid);
	else
		strlcpy(node_data, buf.data, sizeof(node_data));
	pfree(buf.data);
}

/*
 * First zklock call of this backend: local registry, callbacks.
 */
static void
backend_setup(void)
{
	HASHCTL		ctl;

	if (backend_ready)
		return;
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
	backend_ready = true;
}

/*
 * Validate a user's path and prefix it with zklock.namespace.  Errors
 * are raised here, before anything reaches the worker.
 */
static void
make_lock_key(text *path_text, ZklockOp op, LocalLockKey *key, int *user_off)
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
	key->op = op;
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
	return (usecs + 999) / 1000;
}

/*
 * Claim a free slot of the shared table for a new request, or fail with
 * an error naming zklock.max_requests when none is free.
 */
static int
claim_slot(ZklockOp op, const LocalLockKey *key, int user_off, bool try_only,
		   bool xact, uint32 *serial)
{
	ZklockShared *sh = zklock_shared;
	static int	hint = 0;
	int			idx = -1;
	int			i;

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

		slot->op = op;
		slot->try_only = try_only;
		slot->procno = MyProc->pgprocno;
		slot->pid = MyProcPid;
		slot->serial++;
		if (slot->serial == 0)
			slot->serial = 1;
		slot->result = ZKR_NONE;
		slot->sqlerrcode = 0;
		slot->errmsg[0] = '\0';
		slot->uuid[0] = '\0';
		slot->node[0] = '\0';
		slot->czxid = 0;
		slot->session_gen = 0;
		slot->since = GetCurrentTimestamp();
		slot->session_count = xact ? 0 : 1;
		slot->xact_count = xact ? 1 : 0;
		slot->user_path_off = user_off;
		strlcpy(slot->path, key->path, sizeof(slot->path));
		strlcpy(slot->data, node_data, sizeof(slot->data));
		slot->state = ZKS_NEW;
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
	WAIT_GRANTED,
	WAIT_NOT_GRANTED
} WaitOutcome;

/*
 * Wait on our latch until the worker answers the request in slot idx, the
 * timeout (ms, -1 = none) or lock_timeout passes, the connection to
 * ZooKeeper has been missing for zklock.connect_timeout, or an interrupt
 * arrives.  Whatever ends the wait early withdraws the request, so no
 * node is left behind.
 */
static WaitOutcome
wait_for_request(int idx, uint32 serial, int64 timeout_ms, const char *user_path)
{
	ZklockSlot *slot = &zklock_shared->slots[idx];
	TimestampTz start = GetCurrentTimestamp();
	TimestampTz deadline = timeout_ms >= 0 ? TimestampTzPlusMilliseconds(start, timeout_ms) : 0;
	TimestampTz lock_deadline = LockTimeout > 0 ? TimestampTzPlusMilliseconds(start, LockTimeout) : 0;
	TimestampTz down_since = 0;
	WaitOutcome outcome = WAIT_NOT_GRANTED;
	int			fail_code = 0;
	char		fail_msg[ZKLOCK_ERRMSG_SIZE];

	PG_TRY();
	{
		for (;;)
		{
			ZklockSlotState st;
			ZklockConnState cs;
			TimestampTz now;
			long		wait_ms = 1000;

			LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
			st = slot->state;
			cs = zklock_shared->conn_state;
			if (st == ZKS_DONE && slot->serial == serial)
			{
				if (slot->result == ZKR_ERROR)
				{
					fail_code = slot->sqlerrcode;
					strlcpy(fail_msg, slot->errmsg, sizeof(fail_msg));
				}
				slot->state = ZKS_FREE;
			}
			LWLockRelease(zklock_shared->lock);

			if (st == ZKS_HELD)
			{
				outcome = WAIT_GRANTED;
				break;
			}
			if (st == ZKS_DONE)
			{
				if (fail_code != 0)
					ereport(ERROR,
							(errcode(fail_code),
							 errmsg("%s", fail_msg)));
				outcome = WAIT_NOT_GRANTED;
				break;
			}

			now = GetCurrentTimestamp();
			if (cs != ZKC_CONNECTED)
			{
				if (down_since == 0)
					down_since = now;
			}
			else
				down_since = 0;

			if (down_since != 0 &&
				(now >= TimestampTzPlusMilliseconds(down_since, zklock_connect_timeout) ||
				 (deadline != 0 && now >= deadline)))
			{
				if (withdraw_request(idx, serial, false))
				{
					outcome = WAIT_GRANTED;
					break;
				}
				ereport(ERROR,
						(errcode(ERRCODE_CONNECTION_FAILURE),
						 errmsg("zookeeper is not reachable"),
						 errdetail("The zklock worker's connection is %s (zklock.hosts = \"%s\") and did not come back within %ld ms.",
								   zklock_conn_state_name(cs), zklock_hosts,
								   (long) ((now - down_since) / 1000)),
						 errhint("Check that ZooKeeper is running and zklock.hosts is right; zk_status() shows the connection.")));
			}
			if (deadline != 0 && now >= deadline)
			{
				outcome = withdraw_request(idx, serial, false) ? WAIT_GRANTED : WAIT_NOT_GRANTED;
				break;
			}
			if (lock_deadline != 0 && now >= lock_deadline)
			{
				if (withdraw_request(idx, serial, false))
				{
					outcome = WAIT_GRANTED;
					break;
				}
				ereport(ERROR,
						(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
						 errmsg("canceling statement due to lock timeout"),
						 errdetail("Waiting for zookeeper lock \"%s\".", user_path)));
			}

			if (deadline != 0)
				wait_ms = Min(wait_ms, (long) ((deadline - now + 999) / 1000));
			if (lock_deadline != 0)
				wait_ms = Min(wait_ms, (long) ((lock_deadline - now + 999) / 1000));
			if (down_since != 0)
				wait_ms = Min(wait_ms,
							  (long) ((TimestampTzPlusMilliseconds(down_since, zklock_connect_timeout) - now + 999) / 1000));
			if (wait_ms < 1)
				wait_ms = 1;

			(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							 wait_ms, PG_WAIT_EXTENSION);
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

	return outcome;
}

/*
 * Take a lock for this backend: count one more hold if we have it
 * already, otherwise ask the worker and wait.
 */
static bool
acquire_lock(ZklockOp op, text *path, int64 timeout_ms, bool xact, bool try_only)
{
	LocalLockKey key;
	LocalLock  *ll;
	int			user_off;
	int			idx;
	uint32		serial;
	bool		found;

	make_lock_key(path, op, &key, &user_off);
	backend_setup();

	ll = hash_search(local_locks, &key, HASH_FIND, NULL);
	if (ll != NULL && lock_is_lost(ll))
	{
		ereport(WARNING,
				(errmsg("zookeeper lock \"%s\" was lost when the zookeeper session ended",
						key.path + user_off),
				 errdetail("Taking it again from the start.")));
		(void) withdraw_request(ll->slot, ll->serial, true);
		hash_search(local_locks, &key, HASH_REMOVE, NULL);
		ll = NULL;
	}

	if (ll == NULL)
	{
		WaitOutcome outcome;

		if (timeout_ms == 0)
			try_only = true;
		idx = claim_slot(op, &key, user_off, try_only, xact, &serial);
		outcome = wait_for_request(idx, serial, try_only ? -1 : timeout_ms,
								   key.path + user_off);
		if (outcome != WAIT_GRANTED)
			return false;

		ll = hash_search(local_locks, &key, HASH_ENTER, &found);
		ll->slot = idx;
		ll->serial = serial;
		ll->session_count = 0;
		ll->xact_count = 0;
	}

	if (xact)
	{
		MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);
		XactHold   *h = palloc(sizeof(XactHold));

		h->key = key;
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
	return true;
}

/*
 * Drop one session-level hold.  Not holding it is a WARNING and false, as
 * for pg_advisory_unlock.
 */
static bool
release_lock(ZklockOp op, text *path)
{
	LocalLockKey key;
	LocalLock  *ll;
	int			user_off;

	make_lock_key(path, op, &key, &user_off);
	backend_setup();

	ll = hash_search(local_locks, &key, HASH_FIND, NULL);
	if (ll == NULL || ll->session_count == 0)
	{
		ereport(WARNING,
				(errmsg("zookeeper lock \"%s\" is not held by this session",
						key.path + user_off),
				 (ll != NULL && ll->xact_count > 0) ?
				 errdetail("It is held at transaction level and is released at the end of the transaction.") : 0));
		return false;
	}
	if (lock_is_lost(ll))
	{
		ereport(WARNING,
				(errmsg("zookeeper lock \"%s\" was lost when the zookeeper session ended",
						key.path + user_off)));
		(void) withdraw_request(ll->slot, ll->serial, true);
		hash_search(local_locks, &key, HASH_REMOVE, NULL);
		return false;
	}
	drop_hold(ll, false);
	return true;
}

/*
 * zk_mutex_acquire(path text, timeout interval) returns boolean
 */
Datum
zk_mutex_acquire(PG_FUNCTION_ARGS)
{
	text	   *path = path_arg(fcinfo, 0);
	int64		timeout_ms = timeout_arg(fcinfo, 1);

	PG_RETURN_BOOL(acquire_lock(ZKOP_MUTEX, path, timeout_ms, false, false));
}

/*
 * zk_mutex_try_acquire(path text) returns boolean
 */
Datum
zk_mutex_try_acquire(PG_FUNCTION_ARGS)
{
	text	   *path = path_arg(fcinfo, 0);

	PG_RETURN_BOOL(acquire_lock(ZKOP_MUTEX, path, 0, false, true));
}

/*
 * zk_mutex_acquire_xact(path text, timeout interval) returns boolean
 */
Datum
zk_mutex_acquire_xact(PG_FUNCTION_ARGS)
{
	text	   *path = path_arg(fcinfo, 0);
	int64		timeout_ms = timeout_arg(fcinfo, 1);

	PG_RETURN_BOOL(acquire_lock(ZKOP_MUTEX, path, timeout_ms, true, false));
}

/*
 * zk_mutex_release(path text) returns boolean
 */
Datum
zk_mutex_release(PG_FUNCTION_ARGS)
{
	text	   *path = path_arg(fcinfo, 0);

	PG_RETURN_BOOL(release_lock(ZKOP_MUTEX, path));
}

/*
 * zk_release_all() returns integer: release every session-level hold of
 * this backend; transaction-level holds stay until the transaction ends.
 */
Datum
zk_release_all(PG_FUNCTION_ARGS)
{
	HASH_SEQ_STATUS seq;
	LocalLock  *ll;
	List	   *keys = NIL;
	ListCell   *lc;
	int			released = 0;

	backend_setup();
	hash_seq_init(&seq, local_locks);
	while ((ll = hash_seq_search(&seq)) != NULL)
	{
		if (ll->session_count > 0)
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
		released++;
		ll->session_count = 1;
		drop_hold(ll, false);
	}
	PG_RETURN_INT32(released);
}

/*
 * zk_status(): one row about the worker's ZooKeeper session.
 */
Datum
zk_status(PG_FUNCTION_ARGS)
{
	ZklockShared *sh = zklock_shared;
	TupleDesc	tupdesc;
	Datum		values[9];
	bool		nulls[9];
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

	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
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

	if (sh == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("zklock shared memory is not initialized")));
	InitMaterializedSRF(fcinfo, 0);

	/* copy under the lock, build tuples after */
	copy = palloc(sizeof(ZklockSlot) * sh->nslots);
	LWLockAcquire(sh->lock, LW_SHARED);
	for (i = 0; i < sh->nslots; i++)
	{
		ZklockSlotState st = sh->slots[i].state;

		/* holders and waiters; withdrawn entries are neither */
		if (st == ZKS_NEW || st == ZKS_ACTIVE || st == ZKS_HELD || st == ZKS_LOST)
			memcpy(&copy[n++], &sh->slots[i], sizeof(ZklockSlot));
	}
	LWLockRelease(sh->lock);

	for (i = 0; i < n; i++)
	{
		ZklockSlot *s = &copy[i];
		Datum		values[10];
		bool		nulls[10];
		const char *scope;

		memset(nulls, 0, sizeof(nulls));
		if (s->session_count > 0 && s->xact_count > 0)
			scope = "session+xact";
		else if (s->xact_count > 0)
			scope = "xact";
		else
			scope = "session";

		values[0] = Int32GetDatum(s->pid);
		values[1] = CStringGetTextDatum("mutex");
		values[2] = CStringGetTextDatum(s->path + s->user_path_off);
		values[3] = CStringGetTextDatum(s->node);
		nulls[3] = (s->node[0] == '\0');
		values[4] = CStringGetTextDatum("exclusive");
		values[5] = CStringGetTextDatum(scope);
		values[6] = Int32GetDatum(s->session_count + s->xact_count);
		values[7] = CStringGetTextDatum(zklock_slot_state_name(s->state));
		values[8] = TimestampTzGetDatum(s->since);
		values[9] = Int64GetDatum(s->czxid);
		nulls[9] = (s->state != ZKS_HELD || s->czxid == 0);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

/*-------------------------------------------------------------------------
 *
 * backend/acquire.c
 *	  Taking and giving back a lock from SQL: the request (backend/channel.c)
 *	  plus the hold in the backend's registry (backend/holds.c), reentrant
 *	  holds proven like first ones, and the requests about a path that take
 *	  no lock (barrier, revoke).  The SQL functions of the recipes call
 *	  these after zklock_backend_setup().
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "pgstat.h"
#include "storage/latch.h"
#include "miscadmin.h"

#include "common/shmem.h"
#include "common/settings.h"
#include "backend/backend.h"

static bool await_provable_hold(ZklockAsk *ask, const BackendHoldKey *key,
								int user_off);

/*
 * Ask the worker for a lock (mutex, read/write lock, lease) and wait for
 * it.  A zero timeout is a try: the worker looks once and gives up rather
 * than waiting.  On success *idx and *serial name the slot that now holds
 * it.
 */
bool
zklock_request_lock(ZklockAsk *ask, const BackendHoldKey *key, int user_off, int *idx,
			 uint32 *serial)
{
	if (ask->timeout_ms == 0)
		ask->try_only = true;
	*idx = zklock_claim_slot(ask, key, user_off, serial);
	return zklock_wait_for_request(*idx, *serial, ask->try_only ? -1 : ask->timeout_ms,
							key->path + user_off, NULL, NULL) == WAIT_GRANTED;
}

/*
 * A reentrant acquire counts one more hold of a lock this backend has:
 * only while the lock is provably held, like a first acquire.  While the
 * lease is not valid, wait (interruptibly) until it is again, the lock is
 * found lost (then the caller asks for it anew), the acquire's timeout
 * passes (false), or zklock.connect_timeout passes with the worker still
 * unable to prove its session (an error, as for a first acquire).
 */
static bool
await_provable_hold(ZklockAsk *ask, const BackendHoldKey *key, int user_off)
{
	TimestampTz start = GetCurrentTimestamp();
	TimestampTz deadline = zklock_deadline_after(start, ask->timeout_ms);
	TimestampTz down_deadline = TimestampTzPlusMilliseconds(start, zklock_connect_timeout);

	for (;;)
	{
		TimestampTz now;

		if (zklock_lease_valid(zklock_mono_now(), NULL))
			return true;
		zklock_notice_lost_locks();
		if (zklock_find_hold(key, user_off) == NULL)
			return true;
		now = GetCurrentTimestamp();
		if (ask->timeout_ms == 0 || (deadline != 0 && now >= deadline))
			return false;
		if (now >= down_deadline)
			ereport(ERROR,
					(errcode(ERRCODE_CONNECTION_FAILURE),
					 errmsg("zookeeper lock \"%s\" cannot be proven held",
							key->path + user_off),
					 errdetail("The zklock worker's ZooKeeper session was not proven alive for %d ms (zklock.connect_timeout).",
							   zklock_connect_timeout),
					 errhint("Retry when zk_status() shows the connection again.")));
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 10, zklock_wait_event(ZKLOCK_WAIT_ACQUIRE));
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
}

/*
 * Take a lock for this backend: count one more hold if we have it
 * already (reentrant kinds), otherwise ask the worker and wait.
 */
bool
zklock_acquire_lock(ZklockAsk *ask, text *path)
{
	BackendHoldKey key;
	BackendHold *ll;
	int			user_off;
	int			idx;
	uint32		serial;

	zklock_make_lock_key(path, ask->kind, &key, &user_off);

	ll = zklock_find_hold(&key, user_off);
	if (ll != NULL && !await_provable_hold(ask, &key, user_off))
		return false;
	/* the hold may have been found lost meanwhile */
	ll = zklock_find_hold(&key, user_off);
	if (zklock_kind_info(ask->kind)->before_acquire)
		zklock_kind_info(ask->kind)->before_acquire(ask, &key, user_off, ll);

	if (ll == NULL)
	{
		if (!zklock_request_lock(ask, &key, user_off, &idx, &serial))
			return false;
		ll = zklock_add_granted_hold(&key, idx, serial, ask->xact);
		return true;
	}

	(void) zklock_add_hold(&key, ll->slot, ll->serial, ask->xact);
	return true;
}

/*
 * Release one session-level hold of the lock of a kind at a path.
 */
bool
zklock_release_lock(ZklockKind kind, text *path)
{
	BackendHoldKey key;
	int			user_off;

	zklock_make_lock_key(path, kind, &key, &user_off);
	return zklock_release_key(&key, user_off);
}

/*
 * Run a request about the path in argument 0 that takes no lock (barrier,
 * revoke) and return the worker's result; *timed_out (if given) says
 * whether the timeout passed first.  answer_now: the request waits for no
 * other client, so it fails at once while the worker is down.
 */
int64
zklock_path_request(FunctionCallInfo fcinfo, ZklockOp op, ZklockKind kind,
			 int64 timeout_ms, bool answer_now, bool *timed_out)
{
	ZklockAsk	ask;
	BackendHoldKey key;
	int			user_off;

	zklock_make_lock_key(zklock_path_arg(fcinfo, 0), kind, &key, &user_off);
	zklock_init_ask(&ask, op, kind, timeout_ms, false);
	ask.answer_now = answer_now;
	if (timeout_ms == 0)
	{
		/* a zero timeout is a look: the worker answers without waiting */
		ask.try_only = true;
		ask.timeout_ms = -1;
	}
	return zklock_run_request(&ask, &key, user_off, 0, 0, timed_out, NULL);
}

PG_FUNCTION_INFO_V1(zk_release_all);

/*
 * zk_release_all() returns integer: release every session-level hold of
 * this backend, of every recipe; transaction-level holds stay until the
 * transaction ends.
 */
Datum
zk_release_all(PG_FUNCTION_ARGS)
{
	zklock_backend_setup();
	PG_RETURN_INT32(zklock_release_session_holds(ZKK_NONE, NULL));
}

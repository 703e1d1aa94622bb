/*-------------------------------------------------------------------------
 *
 * recipes/rwlock.c
 *	  The read/write lock (InterProcessReadWriteLock): its SQL functions.
 *	  The worker's steps are the lock engine's (worker/locks/lock_engine.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/shmem.h"
#include "recipes/recipe.h"
#include "recipes/recipe_worker.h"
#include "recipes/recipe_sql.h"

static bool rw_acquire(FunctionCallInfo fcinfo, ZklockOp op, ZklockKind kind,
					   bool xact);
static bool rw_try_acquire(FunctionCallInfo fcinfo, ZklockOp op,
						   ZklockKind kind, bool xact);

/*
 * Shared body of the read/write lock acquires.
 */
static bool
rw_acquire(FunctionCallInfo fcinfo, ZklockOp op, ZklockKind kind, bool xact)
{
	ZklockAsk	ask;
	text	   *path = zklock_path_arg(fcinfo, 0);

	zklock_init_ask(&ask, op, kind, zklock_timeout_arg(fcinfo, 1), xact);
	ask.revocable = zklock_bool_arg(fcinfo, 2);
	return zklock_acquire_lock(&ask, path);
}

/*
 * Shared body of the read/write lock try forms (path): one round, no
 * wait, as zk_mutex_try_acquire.
 */
static bool
rw_try_acquire(FunctionCallInfo fcinfo, ZklockOp op, ZklockKind kind, bool xact)
{
	ZklockAsk	ask;
	text	   *path = zklock_path_arg(fcinfo, 0);

	zklock_init_ask(&ask, op, kind, 0, xact);
	return zklock_acquire_lock(&ask, path);
}

PG_FUNCTION_INFO_V1(zk_read_lock_acquire);

/*
 * zk_read_lock_acquire(path, timeout, revocable) returns boolean
 */
Datum
zk_read_lock_acquire(PG_FUNCTION_ARGS)
{
	zklock_backend_setup();
	PG_RETURN_BOOL(rw_acquire(fcinfo, ZKOP_READ, ZKK_READ, false));
}

PG_FUNCTION_INFO_V1(zk_read_lock_acquire_xact);

/*
 * zk_read_lock_acquire_xact(path, timeout, revocable) returns boolean
 */
Datum
zk_read_lock_acquire_xact(PG_FUNCTION_ARGS)
{
	zklock_backend_setup();
	PG_RETURN_BOOL(rw_acquire(fcinfo, ZKOP_READ, ZKK_READ, true));
}

PG_FUNCTION_INFO_V1(zk_read_lock_try_acquire);

/*
 * zk_read_lock_try_acquire(path) returns boolean
 */
Datum
zk_read_lock_try_acquire(PG_FUNCTION_ARGS)
{
	zklock_backend_setup();
	PG_RETURN_BOOL(rw_try_acquire(fcinfo, ZKOP_READ, ZKK_READ, false));
}

PG_FUNCTION_INFO_V1(zk_read_lock_try_acquire_xact);

/*
 * zk_read_lock_try_acquire_xact(path) returns boolean
 */
Datum
zk_read_lock_try_acquire_xact(PG_FUNCTION_ARGS)
{
	zklock_backend_setup();
	PG_RETURN_BOOL(rw_try_acquire(fcinfo, ZKOP_READ, ZKK_READ, true));
}

PG_FUNCTION_INFO_V1(zk_read_lock_release);

/*
 * zk_read_lock_release(path) returns boolean
 */
Datum
zk_read_lock_release(PG_FUNCTION_ARGS)
{
	zklock_backend_setup();
	PG_RETURN_BOOL(zklock_release_lock(ZKK_READ, zklock_path_arg(fcinfo, 0)));
}

PG_FUNCTION_INFO_V1(zk_write_lock_acquire);

/*
 * zk_write_lock_acquire(path, timeout, revocable) returns boolean
 */
Datum
zk_write_lock_acquire(PG_FUNCTION_ARGS)
{
	zklock_backend_setup();
	PG_RETURN_BOOL(rw_acquire(fcinfo, ZKOP_WRITE, ZKK_WRITE, false));
}

PG_FUNCTION_INFO_V1(zk_write_lock_acquire_xact);

/*
 * zk_write_lock_acquire_xact(path, timeout, revocable) returns boolean
 */
Datum
zk_write_lock_acquire_xact(PG_FUNCTION_ARGS)
{
	zklock_backend_setup();
	PG_RETURN_BOOL(rw_acquire(fcinfo, ZKOP_WRITE, ZKK_WRITE, true));
}

PG_FUNCTION_INFO_V1(zk_write_lock_try_acquire);

/*
 * zk_write_lock_try_acquire(path) returns boolean
 */
Datum
zk_write_lock_try_acquire(PG_FUNCTION_ARGS)
{
	zklock_backend_setup();
	PG_RETURN_BOOL(rw_try_acquire(fcinfo, ZKOP_WRITE, ZKK_WRITE, false));
}

PG_FUNCTION_INFO_V1(zk_write_lock_try_acquire_xact);

/*
 * zk_write_lock_try_acquire_xact(path) returns boolean
 */
Datum
zk_write_lock_try_acquire_xact(PG_FUNCTION_ARGS)
{
	zklock_backend_setup();
	PG_RETURN_BOOL(rw_try_acquire(fcinfo, ZKOP_WRITE, ZKK_WRITE, true));
}

PG_FUNCTION_INFO_V1(zk_write_lock_release);

/*
 * zk_write_lock_release(path) returns boolean
 */
Datum
zk_write_lock_release(PG_FUNCTION_ARGS)
{
	zklock_backend_setup();
	PG_RETURN_BOOL(zklock_release_lock(ZKK_WRITE, zklock_path_arg(fcinfo, 0)));
}

/* ---------------------------------------------------------------------
 * Worker: both sides are the lock engine's, with their own node names
 * and, for readers, the read predicate
 * ---------------------------------------------------------------------
 */

/*
 * The lock engine's part of a read lock: __READ__ nodes under P, decided
 * by the read predicate.
 */
static void
read_lock_target(int idx, LockTarget *t)
{
	zklock_lk_target_own(idx, t, ZKLOCK_READ_LOCK_NAME, true, true);
}

/*
 * The lock engine's part of a write lock: __WRIT__ nodes under P.
 */
static void
write_lock_target(int idx, LockTarget *t)
{
	zklock_lk_target_own(idx, t, ZKLOCK_WRITE_LOCK_NAME, true, false);
}

/*
 * Before a read acquire: a write holder takes the read lock at once, at
 * its writer's place (the downgrade node carries the write node's
 * sequence number).
 */
static void
read_before_acquire(ZklockAsk *ask, const BackendHoldKey *key,
					int user_off, BackendHold *held)
{
	static char seq[12];		/* read by claim_slot within this call */
	BackendHoldKey other = *key;
	BackendHold *ol;

	if (held != NULL)
		return;
	other.kind = ZKK_WRITE;
	ol = zklock_find_hold(&other, user_off);
	if (ol != NULL)
	{
		const char *wnode = zklock_shared->slots[ol->slot].nodes[ZKN_MAIN].name;
		size_t		len = strlen(wnode);

		strlcpy(seq, len >= 10 ? wnode + len - 10 : wnode, sizeof(seq));
		ask->downgrade_seq = seq;
	}
}

/*
 * Before a write acquire: a read holder asking for the write lock without
 * a timeout would wait behind its own read lock forever; refuse it.
 */
static void
write_before_acquire(ZklockAsk *ask, const BackendHoldKey *key,
					 int user_off, BackendHold *held)
{
	BackendHoldKey other = *key;

	if (held != NULL)
		return;
	other.kind = ZKK_READ;
	if (zklock_find_hold(&other, user_off) != NULL && ask->timeout_ms < 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_IN_USE),
				 errmsg("cannot upgrade a read lock to a write lock on \"%s\"",
						key->path + user_off),
				 errdetail("This session holds the read lock; its write request would wait behind its own read lock forever."),
				 errhint("Release the read lock first, or pass a timeout.")));
}

/*
 * The read/write lock's descriptor: each side is the lock engine with its
 * own node names and predicate, with the handover layer.
 */
static const ZklockWorkerOps rw_ops[] = {
	{
		.op = ZKOP_READ,
		.start = zklock_lk_create, .next = zklock_lk_list,
		.resume = zklock_lk_resume, .lock_target = read_lock_target,
		.lock_granted = zklock_req_grant,
		.released = zklock_layer_released, .handover = &zklock_handover_layer,
	},
	{
		.op = ZKOP_WRITE,
		.start = zklock_lk_create, .next = zklock_lk_list,
		.resume = zklock_lk_resume, .lock_target = write_lock_target,
		.lock_granted = zklock_req_grant,
		.released = zklock_layer_released, .handover = &zklock_handover_layer,
		.flags = ZKW_DOWNGRADE_FROM,
	},
};

static const ZklockKindInfo rw_kinds[] = {
	{
		.kind = ZKK_READ, .recipe = "read", .mode = "shared",
		.acquire = true, .token_rank = 3, .deadlock = ZKDL_READ,
		.before_acquire = read_before_acquire,
	},
	{
		.kind = ZKK_WRITE, .recipe = "write", .mode = "exclusive",
		.acquire = true, .token_rank = 2, .deadlock = ZKDL_WRITE,
		.before_acquire = write_before_acquire,
	},
};

const ZklockRecipe zklock_recipe_read_write_lock = {
	.name = "read_write_lock",
	.ops = rw_ops, .nops = lengthof(rw_ops),
	.kinds = rw_kinds, .nkinds = lengthof(rw_kinds),
};

/*-------------------------------------------------------------------------
 *
 * recipes/semaphore.c
 *	  The semaphore (InterProcessSemaphoreV2) and the semaphore mutex
 *	  (InterProcessSemaphoreMutex, a semaphore of one lease): their SQL
 *	  functions, and the worker's lease step (a lease node under P/leases,
 *	  granted while at most max_leases exist) after the lock engine took
 *	  the P/locks mutex.  See doc/wire.md.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "zklock.h"
#include "core/curator_rules.h"
#include "common/shmem.h"
#include "recipes/recipe.h"
#include "recipes/recipe_worker.h"
#include "recipes/recipe_sql.h"
#include "utils/builtins.h"
#include "utils/guc.h"

static void lease_list(int idx);
static void lease_create(int idx);

static void lease_create_done(int rc, const char *value,
							  const struct Stat *stat, const void *data);
static void lease_children_done(int rc, const struct String_vector *strings,
								const void *data);

/* ---------------------------------------------------------------------
 * Lease (InterProcessSemaphoreV2): with the P/locks mutex held, create
 * P/leases/_c_<uuid>-lease-<seq>, wait until at most max_leases leases
 * exist, then release P/locks.
 * ---------------------------------------------------------------------
 */

/*
 * Completion of the create of a lease node.
 */
static void
lease_create_done(int rc, const char *value, const struct Stat *stat, const void *data)
{
	int			idx = zklock_req_create_begin(rc, value, data);

	if (idx >= 0)
	{
		ZklockSlot *slot = &zklock_shared->slots[idx];
		WorkerReq  *req = &zklock_reqs[idx];

		if (rc == ZOK)
		{
			zklock_req_create_took(idx, value, slot->nodes[ZKN_MAIN].name,
								   sizeof(slot->nodes[ZKN_MAIN].name),
								   &req->nodes[ZKN_MAIN].create_sent);
			slot->czxid = stat ? stat->czxid : 0;
			(void) zklock_req_settle_cancel(idx);
		}
		else if (zklock_req_create_failed(idx, rc, slot->nodes[ZKN_MAIN].uuid,
										  &req->nodes[ZKN_MAIN].create_sent,
										  false, true, "create a lease node for"))
			lease_create(idx);
	}
	zklock_req_completion_end();
}

/*
 * Create our lease node, with the pipelined watched listing of the leases
 * behind it.  Caller holds the lock.
 */
static void
lease_create(int idx)
{
	ZklockSlot *slot = &zklock_shared->slots[idx];
	WorkerReq  *req = &zklock_reqs[idx];
	char		name[ZKLOCK_NODE_PATH_SIZE];
	int			rc;

	slot->phase = ZKP_LEASE;
	if (!zklock_connected)
	{
		zklock_req_park(idx, false);
		return;
	}
	if (slot->nodes[ZKN_MAIN].uuid[0] == '\0' &&
		!zklock_zkio_new_uuid(slot->nodes[ZKN_MAIN].uuid))
	{
		zklock_req_fail(idx, ERRCODE_INTERNAL_ERROR, "could not generate a random lease id");
		return;
	}
	zklock_recipe_path(name, sizeof(name), slot->path, ZKLOCK_LEASES_DIR, NULL);
	if (req->need_parents)
	{
		zklock_zkio_create_containers(name, true);
		req->need_parents = false;
	}
	strlcat(name, "/", sizeof(name));
	zklock_protected_name(slot->nodes[ZKN_MAIN].uuid, ZKLOCK_LEASE_NAME,
						  name + strlen(name),
						  sizeof(name) - strlen(name));
	rc = zoo_acreate2(zklock_zh, name, slot->data, strlen(slot->data),
					  zklock_zkio_node_acl(), ZOO_EPHEMERAL_SEQUENTIAL,
					  lease_create_done, zklock_zkio_slot_tag(idx));
	if (rc != ZOK)
	{
		zklock_req_park(idx, false);
		return;
	}
	slot->session_gen = zklock_shared->session_gen;
	req->inflight++;
	req->nodes[ZKN_MAIN].create_sent = true;
	lease_list(idx);
}

/*
 * Completion of the watched listing of P/leases.
 */
static void
lease_children_done(int rc, const struct String_vector *strings, const void *data)
{
	int			idx = zklock_req_listing_begin(data);

	if (idx >= 0)
	{
		ZklockSlot *slot = &zklock_shared->slots[idx];
		WorkerReq  *req = &zklock_reqs[idx];

		if (rc == ZOK)
		{
			int			found = -1;
			char		leases[ZKLOCK_NODE_PATH_SIZE];

			/*
			 * A ghost lease (a late create of a request of ours) would take
			 * a lease for the life of the session: delete it.  Its delete
			 * fires the watch this listing set, and we count again.
			 */
			zklock_recipe_path(leases, sizeof(leases), slot->path, ZKLOCK_LEASES_DIR, NULL);
			zklock_ghosts_delete(leases, strings->data, strings->count);
			if (slot->nodes[ZKN_MAIN].name[0] == '\0')
			{
				char		prefix[ZKLOCK_NODE_NAME_SIZE];

				zklock_protected_prefix(slot->nodes[ZKN_MAIN].uuid, prefix);
				zklock_ghosts_note_doubt(idx, false);
				found = zklock_find_protected(strings->data, strings->count, prefix);
				if (found >= 0)
				{
					zklock_lk_adopt_check(idx, leases, strings->data[found]);
					zklock_req_completion_end();
					return;
				}
			}
			else
				found = zklock_find_child(strings->data, strings->count,
										  slot->nodes[ZKN_MAIN].name);

			if (found < 0)
			{
				/* our lease vanished (or never came): make a new one */
				if (++req->lost_retries > MAX_LOST_RETRIES)
					zklock_req_fail(idx, ERRCODE_EXTERNAL_ROUTINE_EXCEPTION,
							  "zookeeper lease node under \"%s\" keeps disappearing",
							  slot->path + slot->user_path_off);
				else
				{
					slot->nodes[ZKN_MAIN].name[0] = '\0';
					slot->nodes[ZKN_MAIN].uuid[0] = '\0';
					lease_create(idx);
				}
			}
			else if (strings->count <= slot->args.lease.max_leases)
			{
				/* granted: let the next acquirer have P/locks */
				char		buf[ZKLOCK_NODE_PATH_SIZE];

				zklock_req_grant(idx);
				/* the next acquirer of this worker may be waiting for it */
				zklock_recipe_path(buf, sizeof(buf), slot->path, ZKLOCK_LOCKS_DIR, NULL);
				(void) zklock_handover_choose(buf, slot->nodes[ZKN_LEASE_LOCK].name, true);
				zklock_recipe_path(buf, sizeof(buf), slot->path, ZKLOCK_LOCKS_DIR,
								   slot->nodes[ZKN_LEASE_LOCK].name);
				zklock_deletes_queue(buf, NULL);
				/* and a late create of it, if one was ever in doubt */
				zklock_ghosts_sweep_doubted(idx, true);
				slot->nodes[ZKN_LEASE_LOCK].name[0] = '\0';
				slot->nodes[ZKN_LEASE_LOCK].uuid[0] = '\0';
			}
			else if (slot->try_only)
				zklock_req_give_up_try(idx);
			else
				zklock_req_set_wait(idx, ZKWS_WATCHING);
		}
		else if (rc == ZNONODE)
		{
			/* P/leases went away with our node: start the lease again */
			req->need_parents = true;
			slot->nodes[ZKN_MAIN].name[0] = '\0';
			slot->nodes[ZKN_MAIN].uuid[0] = '\0';
			lease_create(idx);
		}
		else
			zklock_req_call_failed(idx, rc, "list the leases of");
	}
	zklock_req_completion_end();
}

/*
 * List P/leases with a watch.  Caller holds the lock.
 */
static void
lease_list(int idx)
{
	char		buf[ZKLOCK_NODE_PATH_SIZE];

	zklock_recipe_path(buf, sizeof(buf), zklock_shared->slots[idx].path, ZKLOCK_LEASES_DIR, NULL);
	zklock_req_send_listing(idx, buf, lease_children_done, true, false);
}

/*
 * The lock engine's part of a lease: the P/locks mutex, in the slot's aux
 * node; a step of the request, not what it asks for.
 */
static void
lease_lock_target(int idx, LockTarget *t)
{
	ZklockSlot *slot = &zklock_shared->slots[idx];

	zklock_recipe_path(t->base, sizeof(t->base), slot->path, ZKLOCK_LOCKS_DIR, NULL);
	t->node = slot->nodes[ZKN_LEASE_LOCK].name;
	t->uuid = slot->nodes[ZKN_LEASE_LOCK].uuid;
	t->lock_name = ZKLOCK_LOCK_NAME;
	t->create_sent = &zklock_reqs[idx].nodes[ZKN_LEASE_LOCK].create_sent;
	t->rw = false;
	t->read = false;
	t->final = false;
	t->parent_guard = ZKG_SEMAPHORE;
}

/*
 * First step of a lease, and its step after a watch fired: the P/locks
 * mutex (the lock engine), then the lease itself.
 */
static void
lease_start(int idx)
{
	if (zklock_shared->slots[idx].phase == ZKP_LEASE)
		lease_create(idx);
	else
		zklock_lk_create(idx);
}

/*
 * A watch of a lease request fired: list again what it waits on.
 */
static void
lease_next(int idx)
{
	if (zklock_shared->slots[idx].phase == ZKP_LEASE)
		lease_list(idx);
	else
		zklock_lk_list(idx);
}

/*
 * The connection is back: look for the node of the current step (by name,
 * or by prefix when its create's reply was lost) or create it.
 */
static void
lease_resume(int idx, bool recover)
{
	ZklockSlot *slot = &zklock_shared->slots[idx];

	if (slot->phase != ZKP_LEASE)
		zklock_lk_resume(idx, recover);
	else if (slot->nodes[ZKN_MAIN].name[0] != '\0' ||
			 (recover && slot->nodes[ZKN_MAIN].uuid[0] != '\0'))
		lease_list(idx);
	else
		lease_create(idx);
}

/*
 * A lease node found by its prefix after a lost create reply was checked
 * (ours: its Stat, else NULL; exists: it is there).  In the lease step the
 * lease is taken on or made anew here; in the P/locks step the lock
 * engine decides (false).
 */
static bool
lease_adopted(int idx, const struct Stat *ours, bool exists)
{
	ZklockSlot *slot = &zklock_shared->slots[idx];
	WorkerReq  *req = &zklock_reqs[idx];

	if (slot->phase != ZKP_LEASE)
		return false;
	if (ours)
	{
		strlcpy(slot->nodes[ZKN_MAIN].name, req->adopt_name,
				sizeof(slot->nodes[ZKN_MAIN].name));
		req->nodes[ZKN_MAIN].create_sent = false;
		slot->czxid = ours->czxid;
		lease_list(idx);
		return true;
	}
	if (exists)
	{
		char		buf[ZKLOCK_NODE_PATH_SIZE];

		zklock_recipe_path(buf, sizeof(buf), slot->path, ZKLOCK_LEASES_DIR, req->adopt_name);
		zklock_deletes_queue(buf, NULL);
	}
	slot->nodes[ZKN_MAIN].name[0] = '\0';
	slot->nodes[ZKN_MAIN].uuid[0] = '\0';
	lease_create(idx);
	return true;
}

/* ---------------------------------------------------------------------
 * SQL functions (backends)
 * ---------------------------------------------------------------------
 */

static void give_back_leases(const int *slots, const uint32 *serials,
							 int taken);
static Datum semaphore_acquire(FunctionCallInfo fcinfo, bool xact,
							   bool try_only);

/*
 * The body of zk_semaphore_mutex_acquire(path, timeout), of
 * zk_semaphore_mutex_try_acquire(path) (try_only: one round, no wait) and
 * of their _xact forms.
 */
static bool
semaphore_mutex_acquire(FunctionCallInfo fcinfo, bool xact, bool try_only)
{
	ZklockAsk	ask;
	text	   *path = zklock_path_arg(fcinfo, 0);

	zklock_init_ask(&ask, ZKOP_LEASE, ZKK_SEMAPHORE_MUTEX,
					try_only ? 0 : zklock_timeout_arg(fcinfo, 1), xact);
	ask.args.lease.max_leases = 1;	/* InterProcessSemaphoreMutex */
	return zklock_acquire_lock(&ask, path);
}

PG_FUNCTION_INFO_V1(zk_semaphore_mutex_acquire);

/*
 * zk_semaphore_mutex_acquire(path, timeout) returns boolean
 */
Datum
zk_semaphore_mutex_acquire(PG_FUNCTION_ARGS)
{
	zklock_backend_setup();
	PG_RETURN_BOOL(semaphore_mutex_acquire(fcinfo, false, false));
}

PG_FUNCTION_INFO_V1(zk_semaphore_mutex_acquire_xact);

/*
 * zk_semaphore_mutex_acquire_xact(path, timeout) returns boolean
 */
Datum
zk_semaphore_mutex_acquire_xact(PG_FUNCTION_ARGS)
{
	zklock_backend_setup();
	PG_RETURN_BOOL(semaphore_mutex_acquire(fcinfo, true, false));
}

PG_FUNCTION_INFO_V1(zk_semaphore_mutex_try_acquire);

/*
 * zk_semaphore_mutex_try_acquire(path) returns boolean
 */
Datum
zk_semaphore_mutex_try_acquire(PG_FUNCTION_ARGS)
{
	zklock_backend_setup();
	PG_RETURN_BOOL(semaphore_mutex_acquire(fcinfo, false, true));
}

PG_FUNCTION_INFO_V1(zk_semaphore_mutex_try_acquire_xact);

/*
 * zk_semaphore_mutex_try_acquire_xact(path) returns boolean
 */
Datum
zk_semaphore_mutex_try_acquire_xact(PG_FUNCTION_ARGS)
{
	zklock_backend_setup();
	PG_RETURN_BOOL(semaphore_mutex_acquire(fcinfo, true, true));
}

PG_FUNCTION_INFO_V1(zk_semaphore_mutex_release);

/*
 * zk_semaphore_mutex_release(path) returns boolean
 */
Datum
zk_semaphore_mutex_release(PG_FUNCTION_ARGS)
{
	zklock_backend_setup();
	PG_RETURN_BOOL(zklock_release_lock(ZKK_SEMAPHORE_MUTEX, zklock_path_arg(fcinfo, 0)));
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
		(void) zklock_withdraw_request(slots[taken], serials[taken]);
	}
}

/*
 * Shared body of the semaphore acquires: qty leases, one after the other,
 * all or none.  Returns the lease names, or NULL on timeout.  try_only:
 * the try forms (path, max_leases, qty), one round each, no wait.
 */
static Datum
semaphore_acquire(FunctionCallInfo fcinfo, bool xact, bool try_only)
{
	text	   *path = zklock_path_arg(fcinfo, 0);
	int32		max_leases = zklock_count_arg(fcinfo, 1, "max_leases");
	int32		qty = zklock_count_arg(fcinfo, 2, "qty");
	int64		timeout_ms = try_only ? 0 : zklock_timeout_arg(fcinfo, 3);
	BackendHoldKey key;
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
	zklock_make_lock_key(path, ZKK_SEMAPHORE, &key, &user_off);

	names = palloc(sizeof(Datum) * qty);
	slots = palloc(sizeof(int) * qty);
	serials = palloc(sizeof(uint32) * qty);
	PG_TRY();
	{
		while (taken < qty)
		{
			ZklockAsk	ask;

			zklock_init_ask(&ask, ZKOP_LEASE, ZKK_SEMAPHORE, zklock_remaining_ms(timeout_ms, start), xact);
			ask.args.lease.max_leases = max_leases;
			if (!zklock_request_lock(&ask, &key, user_off, &slots[taken], &serials[taken]))
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
		BackendHoldKey lk = key;

		strlcpy(lk.lease, zklock_shared->slots[slots[i]].nodes[ZKN_MAIN].name,
				sizeof(lk.lease));
		names[i] = CStringGetTextDatum(lk.lease);
		(void) zklock_add_granted_hold(&lk, slots[i], serials[i], xact);
	}
	PG_RETURN_ARRAYTYPE_P(construct_array(names, qty, TEXTOID, -1, false, TYPALIGN_INT));
}

PG_FUNCTION_INFO_V1(zk_semaphore_acquire);

/*
 * zk_semaphore_acquire(path, max_leases, qty, timeout) returns text[]
 */
Datum
zk_semaphore_acquire(PG_FUNCTION_ARGS)
{
	zklock_backend_setup();
	return semaphore_acquire(fcinfo, false, false);
}

PG_FUNCTION_INFO_V1(zk_semaphore_acquire_xact);

/*
 * zk_semaphore_acquire_xact(path, max_leases, qty, timeout) returns text[]
 */
Datum
zk_semaphore_acquire_xact(PG_FUNCTION_ARGS)
{
	zklock_backend_setup();
	return semaphore_acquire(fcinfo, true, false);
}

PG_FUNCTION_INFO_V1(zk_semaphore_try_acquire);

/*
 * zk_semaphore_try_acquire(path, max_leases, qty) returns text[]
 */
Datum
zk_semaphore_try_acquire(PG_FUNCTION_ARGS)
{
	zklock_backend_setup();
	return semaphore_acquire(fcinfo, false, true);
}

PG_FUNCTION_INFO_V1(zk_semaphore_try_acquire_xact);

/*
 * zk_semaphore_try_acquire_xact(path, max_leases, qty) returns text[]
 */
Datum
zk_semaphore_try_acquire_xact(PG_FUNCTION_ARGS)
{
	zklock_backend_setup();
	return semaphore_acquire(fcinfo, true, true);
}

PG_FUNCTION_INFO_V1(zk_semaphore_release);

/*
 * zk_semaphore_release(path, lease) returns boolean
 */
Datum
zk_semaphore_release(PG_FUNCTION_ARGS)
{
	BackendHoldKey key;
	int			user_off;
	text	   *lease;

	zklock_make_lock_key(zklock_path_arg(fcinfo, 0), ZKK_SEMAPHORE, &key, &user_off);
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
	zklock_backend_setup();
	PG_RETURN_BOOL(zklock_release_key(&key, user_off));
}

PG_FUNCTION_INFO_V1(zk_semaphore_release_all);

/*
 * zk_semaphore_release_all(path) returns integer: return every
 * session-level lease this session holds on the semaphore.
 */
Datum
zk_semaphore_release_all(PG_FUNCTION_ARGS)
{
	BackendHoldKey key;
	int			user_off;

	zklock_make_lock_key(zklock_path_arg(fcinfo, 0), ZKK_SEMAPHORE, &key, &user_off);
	zklock_backend_setup();
	PG_RETURN_INT32(zklock_release_session_holds(ZKK_SEMAPHORE, key.path));
}

/*
 * Before a semaphore mutex acquire: it is not reentrant, so a second
 * acquire by its holder is refused rather than waiting on itself.
 */
static void
semaphore_mutex_before_acquire(ZklockAsk *ask, const BackendHoldKey *key,
							   int user_off, BackendHold *held)
{
	if (held != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_IN_USE),
				 errmsg("semaphore mutex \"%s\" is already held by this session",
						key->path + user_off),
				 errhint("The semaphore mutex is not reentrant; zk_mutex_acquire gives a reentrant lock.")));
}

/*
 * The semaphore's descriptor: a lease is the lock engine on P/locks (with
 * the handover layer), then its own steps on P/leases.  The semaphore mutex
 * is a semaphore of one lease: the same op, a kind of its own.
 */
static const ZklockWorkerOps semaphore_ops[] = {
	{
		.op = ZKOP_LEASE,
		.start = lease_start, .next = lease_next,
		.resume = lease_resume, .lock_target = lease_lock_target,
		.lock_granted = lease_create, .adopted = lease_adopted,
		.handover = &zklock_handover_layer, .flags = ZKW_NODE_IN_LEASES,
	},
};

static const ZklockKindInfo semaphore_kinds[] = {
	{
		.kind = ZKK_SEMAPHORE_MUTEX, .recipe = "semaphore_mutex",
		.mode = "exclusive", .acquire = true,
		.node_dir = "leases/", .token_rank = 4,
		.deadlock = ZKDL_LEASE_ONE,
		.before_acquire = semaphore_mutex_before_acquire,
	},
	{
		.kind = ZKK_SEMAPHORE, .recipe = "semaphore", .mode = "lease",
		.acquire = true, .node_dir = "leases/", .deadlock = ZKDL_LEASE,
	},
};

const ZklockRecipe zklock_recipe_semaphore = {
	.name = "semaphore",
	.ops = semaphore_ops, .nops = lengthof(semaphore_ops),
	.kinds = semaphore_kinds, .nkinds = lengthof(semaphore_kinds),
};

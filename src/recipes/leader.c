/*-------------------------------------------------------------------------
 *
 * recipes/leader.c
 *	  Curator's LeaderLatch: a membership in an election, kept by the
 *	  worker as a request that never ends until it is left.  Its node is
 *	  _c_<uuid>-latch-<seq> under P (the lock engine's create with the
 *	  latch's name and the participant id as data); the participants sort
 *	  by the part after the last "latch-"; the first one leads, every
 *	  other one watches its predecessor with getData (doc/wire.md).
 *
 *	  Curator (5.4/5.7)                        here
 *	  ---------------------------------------  -----------------------------
 *	  LeaderLatch.start/reset: create of      zk_leader_join: a ZKOP_LATCH
 *	    latch- with protection, ephemeral       request; zklock_lk_create
 *	    sequential, id as data                  with lock_name "latch-"
 *	  checkLeadership: index 0 leads, else    the lock engine's decision
 *	    getData watch on the predecessor        (zklock_lock_decide, one
 *	                                            holder), latch_waits
 *	  5.7 (CURATOR-696): leadership only      latch_granted: exists
 *	    when our node's ephemeralOwner is       with a watch on our node; it
 *	    our session                             leads only if the owner is
 *	                                            this session
 *	  5.8 (CURATOR-724): a missing latch      a listing answering NoNode
 *	    path resets the latch                   creates the node again (the
 *	                                            engine's lk_start_fresh)
 *	  handleStateChange: SUSPENDED/LOST ->    zk_has_leadership is false
 *	    not leader; RECONNECTED -> reset        unless connected with a
 *	                                            valid lease; a lost session
 *	                                            joins again (session_lost)
 *	  close(): delete our node                zk_leader_leave: the request
 *	                                            is withdrawn, its node's
 *	                                            delete recorded
 *	  getLeader(): first readable             zk_leader (SQL, over
 *	    participant                             zk_participants)
 *
 *	  Safer than Curator: leadership is reported only while the worker's
 *	  lease proves the session alive on the leader, and a leader watches
 *	  its own node, so a node deleted under it ends its leadership at once.
 *
 *	  A membership of scope 'session' belongs to the backend (given back
 *	  at its exit like any request); one of scope 'cluster' belongs to
 *	  nobody (pid 0) and lives until zk_leader_leave, across backend exits,
 *	  worker restarts (an ACTIVE slot is taken over) and session expiries
 *	  (it joins again).  Its slot's rstate.latch says whether it is a
 *	  member and the leader, and holds the leadership epoch that
 *	  zk_leader_xact's COMMIT compares.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <unistd.h>

#include "miscadmin.h"
#include "mb/pg_wchar.h"
#include "postmaster/postmaster.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "utils/builtins.h"
#include "utils/guc.h"

#include "zklock.h"
#include "compat.h"
#include "core/curator_rules.h"
#include "common/shmem.h"
#include "common/settings.h"
#include "recipes/recipe.h"
#include "recipes/recipe_worker.h"
#include "recipes/recipe_sql.h"

/* how often a wait for leadership looks again without a wake-up (ms) */
#define LATCH_POLL_MS	100

static void latch_owner_done(int rc, const struct Stat *stat, const void *data);
static void latch_set_leader(int idx, bool leader);

/* ---------------------------------------------------------------------
 * Worker steps
 * ---------------------------------------------------------------------
 */

/*
 * The lock engine works for a latch member on latch nodes directly under
 * P, in the slot's main node.  The path guard looks at its listings only
 * until its join is answered: a member that joins again (a lost session)
 * is not refused.
 */
static void
latch_lock_target(int idx, LockTarget *t)
{
	zklock_lk_target_own(idx, t, ZKLOCK_LATCH_NAME, false, false);
	if (zklock_shared->slots[idx].rstate.latch.joined)
		t->guard = ZKG_NONE;
}

/*
 * Set or clear a member's leadership; every change bumps its epoch (a
 * transaction that relied on it compares the epoch at COMMIT) and wakes
 * its backend.  Caller holds the lock.
 */
static void
latch_set_leader(int idx, bool leader)
{
	ZklockSlot *slot = &zklock_shared->slots[idx];

	if (slot->rstate.latch.leader != leader)
	{
		slot->rstate.latch.leader = leader;
		slot->rstate.latch.epoch++;
		if (leader)
			slot->since = GetCurrentTimestamp();
	}
	zklock_wake_backend(slot);
}

/*
 * The lock engine found our node first.  It leads only once an exists of
 * the node shows this session as its owner (Curator 5.7's rule); the
 * exists also leaves a watch on the node, so its deletion ends the
 * leadership.  Caller holds the lock.
 */
static void
latch_granted(int idx)
{
	ZklockSlot *slot = &zklock_shared->slots[idx];
	char		path[ZKLOCK_NODE_PATH_SIZE];

	snprintf(path, sizeof(path), "%s/%s", slot->path, slot->nodes[ZKN_MAIN].name);
	(void) zklock_req_send_exists_watch(idx, path, latch_owner_done, false);
}

/*
 * Completion of the exists of our own node, as the first participant.
 */
static void
latch_owner_done(int rc, const struct Stat *stat, const void *data)
{
	int			idx = zklock_req_completion_begin(data);

	if (idx >= 0)
	{
		ZklockSlot *slot = &zklock_shared->slots[idx];
		const clientid_t *cid = zklock_zh ? zoo_client_id(zklock_zh) : NULL;

		if (rc == ZOK && stat != NULL && cid != NULL &&
			stat->ephemeralOwner == cid->client_id &&
			slot->session_gen == zklock_shared->session_gen)
		{
			slot->rstate.latch.member = true;
			slot->rstate.latch.joined = true;
			zklock_reqs[idx].lost_retries = 0;
			zklock_req_set_wait(idx, ZKWS_WATCHING);
			latch_set_leader(idx, true);
		}
		else if (rc == ZOK)
		{
			char		path[ZKLOCK_NODE_PATH_SIZE];

			/* a node of another session: not ours to lead with */
			snprintf(path, sizeof(path), "%s/%s", slot->path, slot->nodes[ZKN_MAIN].name);
			zklock_deletes_queue(path, NULL);
			latch_set_leader(idx, false);
			zklock_req_clear_nodes(slot);
			zklock_lk_create(idx);
		}
		else if (rc == ZNONODE)
		{
			latch_set_leader(idx, false);
			zklock_lk_list(idx);	/* gone: the listing starts afresh */
		}
		else
			zklock_req_call_failed(idx, rc, "check the leader latch node of");
	}
	zklock_req_completion_end();
}

/*
 * The lock engine put us behind a predecessor and watches it: we are a
 * member, not the leader.  Caller holds the lock.
 */
static void
latch_waits(int idx)
{
	zklock_shared->slots[idx].rstate.latch.member = true;
	zklock_shared->slots[idx].rstate.latch.joined = true;
	/* a membership lives long: only losses in a row count */
	zklock_reqs[idx].lost_retries = 0;
	latch_set_leader(idx, false);
}

/*
 * A watch fired (the predecessor, or our own node as leader): leadership
 * ends until a new listing and exists prove it again.  Caller holds the
 * lock.
 */
static void
latch_next(int idx)
{
	latch_set_leader(idx, false);
	zklock_lk_list(idx);
}

/*
 * The session is gone: our node went with it.  The member stays in the
 * election and joins again with a new node once a session is there
 * (LeaderLatch's reset on RECONNECTED).  Caller holds the lock.
 */
static void
latch_lost_session(int idx)
{
	ZklockSlot *slot = &zklock_shared->slots[idx];

	latch_set_leader(idx, false);
	slot->rstate.latch.member = false;
	zklock_req_clear_nodes(slot);
	slot->czxid = 0;
	zklock_req_park(idx, false);
}

/* ---------------------------------------------------------------------
 * SQL functions (backends)
 * ---------------------------------------------------------------------
 */

/*
 * The key of the election at the path in argument 0; a path that names a
 * recipe's node is refused before anything reaches ZooKeeper.
 */
static void
latch_key(FunctionCallInfo fcinfo, BackendHoldKey *key, int *user_off)
{
	const char *last;
	const char *kind;

	zklock_make_lock_key(zklock_path_arg(fcinfo, 0), ZKK_LATCH, key, user_off);
	last = strrchr(key->path, '/');
	kind = zklock_recipe_node_kind(last ? last + 1 : key->path);
	if (kind != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("zookeeper path \"%s\" names a %s, not an election",
						key->path + *user_off, kind)));
}

/*
 * Is slot a live membership of the election at path: ours (scope
 * 'session') or the cluster's?  Caller holds the lock.
 */
static bool
latch_slot_matches(const ZklockSlot *slot, const char *path, bool cluster)
{
	if (slot->op != ZKOP_LATCH ||
		(slot->state != ZKS_NEW && slot->state != ZKS_ACTIVE) ||
		strcmp(slot->path, path) != 0)
		return false;
	if (cluster)
		return slot->args.latch.cluster && slot->pid == 0 &&
			!zklock_give_back_pending(slot);
	return !slot->args.latch.cluster && slot->pid == MyProcPid &&
		slot->procno == ZKLOCK_MY_PROCNO && !zklock_give_back_pending(slot);
}

/*
 * Find the membership of the election at key: this backend's own
 * (scope 'session') first, then the cluster's, unless only one scope is
 * asked for (only: 0 either, 1 session, 2 cluster).  Returns the slot
 * index and its serial, or -1.  A membership the worker had to end with
 * an error is reported as a WARNING and forgotten.
 */
static int
latch_find(const BackendHoldKey *key, int only, uint32 *serial)
{
	ZklockShared *sh = zklock_shared;
	int			found = -1;
	int			i;

	zklock_lock_table(LW_EXCLUSIVE);
	for (i = 0; i < sh->nslots; i++)
	{
		ZklockSlot *slot = &sh->slots[i];

		if (slot->op == ZKOP_LATCH && slot->state == ZKS_DONE &&
			strcmp(slot->path, key->path) == 0 &&
			(slot->pid == 0 || slot->pid == MyProcPid))
		{
			/* ended by the worker: say why, once, and free it */
			ereport(WARNING,
					(errmsg("left the election at \"%s\": %s",
							slot->path + slot->user_path_off, slot->errmsg)));
			zklock_slot_drop(slot);
			continue;
		}
		if (only != 2 && latch_slot_matches(slot, key->path, false))
		{
			found = i;
			break;
		}
		if (only != 1 && found < 0 && latch_slot_matches(slot, key->path, true))
			found = i;
	}
	if (found >= 0)
		*serial = sh->slots[found].serial;
	LWLockRelease(sh->lock);
	return found;
}

/*
 * Does the member in slot idx (of serial) lead now, with proof: first in
 * its latest listing, its node owned by the current session, the worker
 * connected and its lease valid.  Returns its leadership epoch in *epoch.
 */
static bool
latch_leads(int idx, uint32 serial, uint64 *epoch)
{
	ZklockShared *sh = zklock_shared;
	ZklockSlot *slot = &sh->slots[idx];
	bool		leads;

	zklock_lock_table(LW_SHARED);
	leads = slot->serial == serial && slot->state == ZKS_ACTIVE &&
		slot->op == ZKOP_LATCH && slot->rstate.latch.leader &&
		sh->have_session && slot->session_gen == sh->session_gen &&
		sh->conn_state == ZKC_CONNECTED;
	if (epoch)
		*epoch = leads ? slot->rstate.latch.epoch : 0;
	LWLockRelease(sh->lock);
	return leads && zklock_lease_valid(zklock_mono_now(), NULL);
}

/*
 * The participant id of a member: the id given, in UTF-8, or this
 * cluster's name for a DBA (host:port, and /cluster_name when set).
 */
static void
latch_id(FunctionCallInfo fcinfo, int argno, char *out, size_t outlen)
{
	if (PG_ARGISNULL(argno))
	{
		char		host[256];

		if (gethostname(host, sizeof(host)) != 0)
			strlcpy(host, "localhost", sizeof(host));
		host[sizeof(host) - 1] = '\0';
		snprintf(out, outlen, "%s:%d%s%s", host, PostPortNumber,
				 cluster_name && cluster_name[0] ? "/" : "",
				 cluster_name ? cluster_name : "");
	}
	else
	{
		text	   *t = PG_GETARG_TEXT_PP(argno);
		const char *raw = VARDATA_ANY(t);
		int			len = VARSIZE_ANY_EXHDR(t);
		const char *utf8;

		/* SQL_ASCII text may hold any bytes: the id must be UTF-8 */
		if (GetDatabaseEncoding() == PG_SQL_ASCII &&
			!pg_verify_mbstr(PG_UTF8, raw, len, true))
			ereport(ERROR,
					(errcode(ERRCODE_CHARACTER_NOT_IN_REPERTOIRE),
					 errmsg("leader id is not valid UTF-8"),
					 errdetail("Curator reads a participant id as UTF-8.")));
		if (memchr(raw, '\0', len) != NULL)
			ereport(ERROR,
					(errcode(ERRCODE_CHARACTER_NOT_IN_REPERTOIRE),
					 errmsg("leader id must not contain a zero byte")));
		utf8 = pg_server_to_any(raw, len, PG_UTF8);
		if (utf8 != raw)
			len = strlen(utf8);
		if (len >= (int) outlen)
			ereport(ERROR,
					(errcode(ERRCODE_STRING_DATA_RIGHT_TRUNCATION),
					 errmsg("leader id is too long"),
					 errdetail("The id is %d bytes in UTF-8; the limit is %d.",
							   len, (int) outlen - 1)));
		memcpy(out, utf8, len);
		out[len] = '\0';
	}
}

/*
 * Wait until the worker made the new member's node and decided its place
 * (true), or ended the request with an error (raised).  Gives the request
 * back when the wait ends any other way (cancel, unreachable ZooKeeper).
 */
static void
latch_wait_joined(int idx, uint32 serial, const char *user_path, bool cluster)
{
	ZklockSlot *slot = &zklock_shared->slots[idx];
	TimestampTz down_since = 0;

	PG_TRY();
	{
		for (;;)
		{
			ZklockSlotState state;
			bool		member;
			ZklockConnState cs;
			TimestampTz now;

			zklock_lock_table(LW_EXCLUSIVE);
			state = slot->state;
			member = slot->rstate.latch.member;
			cs = zklock_shared->conn_state;
			if (slot->serial != serial)
				state = ZKS_FREE;
			else if (state == ZKS_DONE)
			{
				int			code = slot->sqlerrcode;
				char		msg[ZKLOCK_ERRMSG_SIZE];

				strlcpy(msg, slot->errmsg, sizeof(msg));
				zklock_slot_drop(slot);
				LWLockRelease(zklock_shared->lock);
				ereport(ERROR, (errcode(code ? code : ERRCODE_INTERNAL_ERROR),
								errmsg("%s", msg)));
			}
			else if (state == ZKS_ACTIVE && member && cluster)
			{
				/* from now on the cluster's: no backend gives it back */
				slot->pid = 0;
				slot->procno = -1;
			}
			LWLockRelease(zklock_shared->lock);
			if (state == ZKS_FREE)
				ereport(ERROR,
						(errcode(ERRCODE_INTERNAL_ERROR),
						 errmsg("the request to join the election at \"%s\" disappeared",
								user_path)));
			if (state == ZKS_ACTIVE && member)
				break;

			now = GetCurrentTimestamp();
			if (zklock_down_too_long(cs, now, &down_since))
				ereport(ERROR,
						(errcode(ERRCODE_CONNECTION_FAILURE),
						 errmsg("zookeeper is not reachable"),
						 errdetail("The zklock worker's connection is %s and did not come back within %d ms.",
								   zklock_down_state_name(cs), zklock_connect_timeout),
						 errhint("Join again when zk_status() shows the connection.")));
			(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							 LATCH_POLL_MS, zklock_wait_event(ZKLOCK_WAIT_REQUEST));
			ResetLatch(MyLatch);
			CHECK_FOR_INTERRUPTS();
		}
	}
	PG_CATCH();
	{
		/* whatever it made is deleted by the worker */
		zklock_give_back(idx, MyProcPid, serial);
		zklock_wake_worker();
		PG_RE_THROW();
	}
	PG_END_TRY();
}

PG_FUNCTION_INFO_V1(zk_leader_join);

/*
 * zk_leader_join(path, id, scope): join the election at path as a
 * LeaderLatch participant.  True when this call joined, false (with a
 * NOTICE) when the membership of that scope already exists.
 */
Datum
zk_leader_join(PG_FUNCTION_ARGS)
{
	BackendHoldKey key;
	int			user_off;
	char		id[ZKLOCK_NODE_DATA_SIZE];
	char	   *scope;
	bool		cluster;
	ZklockAsk	ask;
	uint32		serial;
	int			idx;

	zklock_backend_setup();
	latch_key(fcinfo, &key, &user_off);
	if (PG_ARGISNULL(2))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("scope must not be null"),
				 errhint("Use 'session' or 'cluster'.")));
	scope = text_to_cstring(PG_GETARG_TEXT_PP(2));
	if (strcmp(scope, "session") == 0)
		cluster = false;
	else if (strcmp(scope, "cluster") == 0)
		cluster = true;
	else
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid scope \"%s\"", scope),
				 errhint("Use 'session' or 'cluster'.")));
	latch_id(fcinfo, 1, id, sizeof(id));

	if (latch_find(&key, cluster ? 2 : 1, &serial) >= 0)
	{
		ereport(NOTICE,
				(errmsg("already a member of the election at \"%s\" (scope %s)",
						key.path + user_off, scope)));
		PG_RETURN_BOOL(false);
	}

	zklock_init_ask(&ask, ZKOP_LATCH, ZKK_LATCH, -1, false);
	ask.data = id;
	ask.args.latch.cluster = cluster;
	idx = zklock_claim_slot(&ask, &key, user_off, &serial);
	latch_wait_joined(idx, serial, key.path + user_off, cluster);
	PG_RETURN_BOOL(true);
}

PG_FUNCTION_INFO_V1(zk_leader_leave);

/*
 * zk_leader_leave(path): leave the election (this backend's membership,
 * else the cluster's); the worker deletes the node.  False with a WARNING
 * when there is no membership to leave.
 */
Datum
zk_leader_leave(PG_FUNCTION_ARGS)
{
	BackendHoldKey key;
	int			user_off;
	uint32		serial;
	int			idx;
	int			pid;

	zklock_backend_setup();
	latch_key(fcinfo, &key, &user_off);
	idx = latch_find(&key, 0, &serial);
	if (idx < 0)
	{
		ereport(WARNING,
				(errmsg("not a member of the election at \"%s\"",
						key.path + user_off)));
		PG_RETURN_BOOL(false);
	}
	zklock_lock_table(LW_SHARED);
	pid = zklock_shared->slots[idx].pid;
	LWLockRelease(zklock_shared->lock);
	zklock_give_back(idx, pid, serial);
	zklock_wake_worker();
	PG_RETURN_BOOL(true);
}

PG_FUNCTION_INFO_V1(zk_has_leadership);

/*
 * zk_has_leadership(path): true only while our member leads, with proof.
 */
Datum
zk_has_leadership(PG_FUNCTION_ARGS)
{
	BackendHoldKey key;
	int			user_off;
	uint32		serial;
	int			idx;

	zklock_backend_setup();
	latch_key(fcinfo, &key, &user_off);
	idx = latch_find(&key, 0, &serial);
	PG_RETURN_BOOL(idx >= 0 && latch_leads(idx, serial, NULL));
}

/*
 * The membership at the path in argument 0, or an error: waiting for or
 * relying on leadership needs one.
 */
static int
latch_member(FunctionCallInfo fcinfo, BackendHoldKey *key, int *user_off,
			 uint32 *serial)
{
	int			idx;

	latch_key(fcinfo, key, user_off);
	idx = latch_find(key, 0, serial);
	if (idx < 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("not a member of the election at \"%s\"",
						key->path + *user_off),
				 errhint("Call zk_leader_join first.")));
	return idx;
}

PG_FUNCTION_INFO_V1(zk_leader_await);

/*
 * zk_leader_await(path, timeout): wait until our member leads (true) or
 * the timeout passes (false).  Giving up leaves the membership as it is.
 */
Datum
zk_leader_await(PG_FUNCTION_ARGS)
{
	BackendHoldKey key;
	int			user_off;
	uint32		serial;
	int			idx;
	int64		timeout_ms;
	TimestampTz start = GetCurrentTimestamp();

	zklock_backend_setup();
	timeout_ms = zklock_timeout_arg(fcinfo, 1);
	idx = latch_member(fcinfo, &key, &user_off, &serial);
	for (;;)
	{
		long		wait_ms = LATCH_POLL_MS;
		bool		member;

		if (latch_leads(idx, serial, NULL))
			PG_RETURN_BOOL(true);
		zklock_lock_table(LW_SHARED);
		member = zklock_shared->slots[idx].serial == serial &&
			zklock_shared->slots[idx].state == ZKS_ACTIVE;
		LWLockRelease(zklock_shared->lock);
		if (!member)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("the membership of the election at \"%s\" ended while waiting",
							key.path + user_off)));
		if (timeout_ms >= 0)
		{
			int64		left = zklock_remaining_ms(timeout_ms, start);

			if (left <= 0)
				PG_RETURN_BOOL(false);
			wait_ms = Min(wait_ms, (long) left);
		}
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 wait_ms, zklock_wait_event(ZKLOCK_WAIT_ACQUIRE));
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
}

PG_FUNCTION_INFO_V1(zk_leader_xact);

/*
 * zk_leader_xact(path): zk_has_leadership, and when true the transaction
 * relies on it: its COMMIT fails (40000) if the leadership ended before.
 */
Datum
zk_leader_xact(PG_FUNCTION_ARGS)
{
	BackendHoldKey key;
	int			user_off;
	uint32		serial;
	uint64		epoch;
	int			idx;

	zklock_backend_setup();
	idx = latch_member(fcinfo, &key, &user_off, &serial);
	if (!latch_leads(idx, serial, &epoch))
		PG_RETURN_BOOL(false);
	zklock_rely_on_state(ZKK_LATCH, idx, serial, epoch, key.path + user_off);
	PG_RETURN_BOOL(true);
}

/*
 * An ACTIVE member whose place is decided is a standing membership (ACTIVE
 * until it leaves), no request.  Backend, the lock held shared.
 */
static bool
latch_standing(const ZklockSlot *slot)
{
	return slot->rstate.latch.member;
}

/*
 * The leader latch's descriptor: a membership is the lock engine on
 * latch- nodes, whose hooks make it a member or the leader; it outlives a
 * lost session (session_lost joins again).  No handover layer.
 */
static const ZklockWorkerOps latch_ops[] = {
	{
		.op = ZKOP_LATCH,
		.start = zklock_lk_create, .next = latch_next,
		.resume = zklock_lk_resume, .lock_target = latch_lock_target,
		.lock_granted = latch_granted, .lock_waits = latch_waits,
		.session_lost = latch_lost_session, .state_name = "member",
		.standing = latch_standing,
	},
};

/*
 * zk_locks of a member: whose it is (the cluster's or the session's), and
 * whether it leads now (proven only within the lease).  On a copy of the
 * slot taken under the shared lock (zk_locks).
 */
static void
latch_describe(const ZklockSlot *slot, bool lease_ok, const char **mode,
			   const char **scope)
{
	*scope = slot->args.latch.cluster ? "cluster" : "session";
	*mode = (slot->op == ZKOP_LATCH && slot->rstate.latch.leader && lease_ok) ?
		"leader" : "member";
}

/*
 * COMMIT of a transaction that relied on this member's leadership
 * (zk_leader_xact) in epoch: it must still lead in that same epoch (the
 * caller matched the serial, the state and the session).  Read without
 * the lock, as the COMMIT check reads the slot: epoch moves with every
 * change of leader.
 */
static bool
latch_still_leads(const ZklockSlot *slot, uint64 epoch)
{
	return slot->op == ZKOP_LATCH && slot->rstate.latch.leader &&
		slot->rstate.latch.epoch == epoch;
}

static const ZklockKindInfo latch_kinds[] = {
	{
		.kind = ZKK_LATCH, .recipe = "leader_latch", .mode = "member",
		.describe = latch_describe, .still_relied_on = latch_still_leads,
		.relied_on = "leadership of the election",
	},
};

const ZklockRecipe zklock_recipe_leader_latch = {
	.name = "leader_latch",
	.ops = latch_ops, .nops = lengthof(latch_ops),
	.kinds = latch_kinds, .nkinds = lengthof(latch_kinds),
};

/*-------------------------------------------------------------------------
 *
 * backend/channel.c
 *	  The request API every SQL function calls: claim a slot of the shared
 *	  table, wait on the latch for the worker's answer (bounded by the
 *	  call's timeout, lock_timeout and zklock.connect_timeout), give up;
 *	  and the identity written into nodes.  It knows nothing of the
 *	  registry of holds above it (backend/holds.c, backend/acquire.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <unistd.h>

#include "commands/dbcommands.h"
#include "miscadmin.h"
#include "mb/pg_wchar.h"
#include "pgstat.h"
#include "postmaster/postmaster.h"
#include "storage/proc.h"
#include "utils/guc.h"
#include "utils/json.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "zklock.h"
#include "compat.h"
#include "common/shmem.h"
#include "common/settings.h"
#include "backend/backend.h"

/* the identity written into our nodes, and the application_name in it */
static char node_data[ZKLOCK_NODE_DATA_SIZE];
static char *node_data_appname = NULL;

/* zklock.participant_id when the node data was built */
static char node_data_participant[ZKLOCK_NODE_DATA_SIZE] = "";

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
	char		errdetail[ZKLOCK_ERRDETAIL_SIZE];
	int64		value;
	uint32		needed;
	bool		write_in_doubt; /* withdrawn after its counter write left */
} SlotAnswer;

/* Why a wait gives up on a request still pending */
typedef enum GiveUp
{
	GIVE_UP_NONE = 0,
	GIVE_UP_UNREACHABLE,		/* no provable session for connect_timeout */
	GIVE_UP_TIMEOUT,			/* the call's own timeout */
	GIVE_UP_LOCK_TIMEOUT		/* lock_timeout */
} GiveUp;

static SlotLook look_at_slot(int idx, uint32 serial, bool give_up,
							 const ZklockDeadlock *dl, SlotAnswer *ans,
							 ZklockConnState *cs);
static void fail_at_once_if_down(void);
/* pause between two looks for a slot the worker is giving back (ms) */
#define CLAIM_RETRY_MS	5

/*
 * What a backend that finds the worker down says of its connection, after
 * "The zklock worker's connection is": its state, that no worker runs, or,
 * connected, that the lease ran out (a stalled worker cannot say that
 * itself).
 */
const char *
zklock_down_state_name(ZklockConnState cs)
{
	if (cs == ZKC_NONE)
		return "down (no worker is running)";
	return cs == ZKC_CONNECTED ? "without proof of its session (lease ran out)" :
		zklock_conn_state_name(cs);
}

/*
 * Fail at once, with 08006, a call that waits for no other client (a try,
 * a read, a counter read, a barrier's set or removal, a revocation) while the
 * worker has no provable session (not connected, or its lease ran out):
 * nothing is sent and no slot is taken.  The DETAIL is the worker's last
 * failure, or its state when none is known.  A call already sent when the
 * connection drops waits for its answer as any request does.  Takes the
 * shared lock.
 */
static void
fail_at_once_if_down(void)
{
	ZklockShared *sh = zklock_shared;
	ZklockConnState cs;
	TimestampTz since;
	char		failure[ZKLOCK_CONN_FAILURE_LEN];

	zklock_lock_table(LW_SHARED);
	cs = sh->conn_state;
	since = sh->state_since;
	strlcpy(failure, sh->conn_failure, sizeof(failure));
	LWLockRelease(sh->lock);
	if (cs == ZKC_CONNECTED && zklock_lease_valid(zklock_mono_now(), NULL))
		return;
	if (failure[0] == '\0')
		snprintf(failure, sizeof(failure), "zklock.hosts = \"%s\"", zklock_hosts);
	ereport(ERROR,
			(errcode(ERRCODE_CONNECTION_FAILURE),
			 errmsg("zookeeper is not reachable"),
			 errdetail("The zklock worker's connection is %s since %s: %s.",
					   zklock_down_state_name(cs),
					   since != 0 ? timestamptz_to_str(since) : "its start", failure),
			 errhint("A call that waits for no other client fails at once until the worker is connected; zk_status() shows the connection.")));
}

/*
 * Claim a free slot of the shared table for a new request, or fail with
 * an error naming zklock.max_requests when none is free (after waiting,
 * bounded, for entries the worker is giving back).  A request that waits
 * for no other client fails at once while the worker is down
 * (fail_at_once_if_down).
 */
int
zklock_claim_slot(const ZklockAsk *ask, const BackendHoldKey *key, int user_off,
		   uint32 *serial)
{
	ZklockShared *sh = zklock_shared;
	static int	hint = 0;
	int			idx = -1;
	int			i;
	TimestampTz start = GetCurrentTimestamp();

	if (ask->try_only || ask->answer_now)
		fail_at_once_if_down();

	/*
	 * the identity written into nodes follows SET application_name and SET
	 * zklock.participant_id
	 */
	if (strcmp(node_data_appname, application_name ? application_name : "") != 0 ||
		strcmp(node_data_participant, zklock_participant_id ? zklock_participant_id : "") != 0)
		zklock_build_node_data();

	for (;;)
	{
		int			withdrawing = 0;

		zklock_lock_table(LW_EXCLUSIVE);
		for (i = 0; i < sh->nslots; i++)
		{
			int			j = (hint + i) % sh->nslots;

			if (sh->slots[j].state == ZKS_FREE)
			{
				idx = j;
				break;
			}
			if (sh->slots[j].state == ZKS_CANCEL ||
				sh->slots[j].state == ZKS_RELEASE ||
				zklock_give_back_pending(&sh->slots[j]))
				withdrawing++;
		}
		if (idx >= 0 || withdrawing == 0 ||
			TimestampDifferenceExceeds(start, GetCurrentTimestamp(),
									   zklock_connect_timeout))
			break;

		/*
		 * Every entry is taken, but some are being given back (a release, a
		 * withdrawn wait): the worker frees them in its next pass.  Wait
		 * for that, as long as zklock.connect_timeout at most, rather than
		 * calling the table full.
		 */
		LWLockRelease(sh->lock);
		zklock_wake_worker();
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 CLAIM_RETRY_MS, zklock_wait_event(ZKLOCK_WAIT_REQUEST));
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
	if (idx >= 0)
	{
		ZklockSlot *slot = &sh->slots[idx];

		slot->op = ask->op;
		slot->kind = ask->kind;
		slot->phase = ZKP_START;
		slot->try_only = ask->try_only;
		slot->revocable = ask->revocable;
		slot->revoke_requested = false;
		memset(&slot->rstate, 0, sizeof(slot->rstate));
		slot->waits_on[0] = '\0';
		slot->args = ask->args;
		strlcpy(slot->downgrade_seq, ask->downgrade_seq ? ask->downgrade_seq : "",
				sizeof(slot->downgrade_seq));
		slot->result_value = 0;
		slot->result_dsm = ask->result_dsm;
		slot->result_size = ask->result_size;
		slot->procno = ZKLOCK_MY_PROCNO;
		slot->pid = MyProcPid;
		slot->dbid = MyDatabaseId;
		slot->roleid = GetSessionUserId();
		slot->serial++;
		if (slot->serial == 0)
			slot->serial = 1;
		slot->result = ZKR_NONE;
		slot->sqlerrcode = 0;
		slot->errmsg[0] = '\0';
		slot->errdetail[0] = '\0';
		slot->dlx_ask = 0;
		slot->waits_for[0] = '\0';
		memset(slot->nodes, 0, sizeof(slot->nodes));
		slot->czxid = 0;
		slot->session_gen = 0;
		slot->since = GetCurrentTimestamp();
		slot->session_count = (ask->kind != ZKK_NONE && !ask->xact) ? 1 : 0;
		slot->xact_count = ask->xact ? 1 : 0;
		slot->user_path_off = user_off;
		strlcpy(slot->path, key->path, sizeof(slot->path));
		strlcpy(slot->data, ask->data ? ask->data : node_data, sizeof(slot->data));
		zklock_slot_submit(slot);
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

/*
 * Look at our slot, under the lock, and take what the worker finished: the
 * answer of a done request, a grant, or a grant lost with the session.
 * With give_up, a request still pending is withdrawn in the same look, so
 * an answer that arrives as the caller gives up is taken, never thrown
 * away.  With a deadlock cycle dl found by our check, it is withdrawn
 * the same way if the cycle still stands (backend/deadlock.c: the victim
 * rule's re-check, in this critical section).  *cs gets the connection
 * state seen.
 */
static SlotLook
look_at_slot(int idx, uint32 serial, bool give_up, const ZklockDeadlock *dl,
			 SlotAnswer *ans, ZklockConnState *cs)
{
	ZklockSlot *slot = &zklock_shared->slots[idx];
	SlotLook	look = LOOK_PENDING;
	bool		wake = false;

	ans->write_in_doubt = false;
	zklock_lock_table(LW_EXCLUSIVE);
	*cs = zklock_shared->conn_state;
	if (slot->serial == serial && slot->pid == MyProcPid)
	{
		if (dl != NULL && (slot->state == ZKS_NEW || slot->state == ZKS_ACTIVE))
			give_up = zklock_deadlock_stands(dl);
		switch (slot->state)
		{
			case ZKS_HELD:
				look = LOOK_HELD;
				break;
			case ZKS_DONE:
				ans->result = slot->result;
				ans->sqlerrcode = slot->sqlerrcode;
				strlcpy(ans->errmsg, slot->errmsg, sizeof(ans->errmsg));
				strlcpy(ans->errdetail, slot->errdetail, sizeof(ans->errdetail));
				ans->value = slot->result_value;
				ans->needed = slot->result_size;
				zklock_slot_drop(slot);
				look = LOOK_DONE;
				break;
			case ZKS_LOST:
				zklock_slot_drop(slot);
				look = LOOK_LOST;
				break;
			case ZKS_NEW:
				if (give_up)
				{
					if (zklock_give_up_new_request(idx))
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
					bool		(*write_stands) (const ZklockSlot *s);

					/*
					 * a counter write that left stands whatever we do
					 * (recipes/counter_fence.c): our caller must not call
					 * it never sent
					 */
					write_stands = zklock_worker_ops(slot->op)->write_stands;
					ans->write_in_doubt = write_stands != NULL &&
						write_stands(slot);
					zklock_slot_cancel(slot);
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
 * Ask the worker about our request in slot idx, still waiting: publish its
 * wait in ZooKeeper, or check for a cycle across clusters through it
 * (ZKLOCK_DLX_ bits; worker/deadlock_records.c).  The bits go into the
 * slot and the slot is posted, under the lock taken as a backend takes it
 * (zklock_lock_table, never LWLockAcquire).
 */
static void
ask_worker(int idx, uint32 serial, uint8 bits)
{
	ZklockSlot *slot = &zklock_shared->slots[idx];
	bool		posted = false;

	zklock_lock_table(LW_EXCLUSIVE);
	if (slot->serial == serial && slot->pid == MyProcPid &&
		slot->state == ZKS_ACTIVE && !zklock_give_back_pending(slot))
	{
		slot->dlx_ask |= bits;
		zklock_post(idx);
		posted = true;
	}
	LWLockRelease(zklock_shared->lock);
	if (posted)
		zklock_wake_worker();
}

/*
 * The time timeout_ms after start, or 0 (never) when it is out of the
 * range of a timestamp: a timeout of thousands of years is no timeout.
 */
TimestampTz
zklock_deadline_after(TimestampTz start, int64 timeout_ms)
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
 * is there when the wait ends is taken whatever ended it.  A lock wait
 * that lasts deadlock_timeout looks for a cycle of waits through it, and
 * again every deadlock_timeout (backend/deadlock.c); one found fails the
 * wait with 40P01.  For WAIT_DONE,
 * *value gets the worker's result.
 */
WaitOutcome
zklock_wait_for_request(int idx, uint32 serial, int64 timeout_ms, const char *user_path,
				 int64 *value, uint32 *needed)
{
	ZklockSlot *slot = &zklock_shared->slots[idx];
	TimestampTz start = GetCurrentTimestamp();
	TimestampTz deadline = zklock_deadline_after(start, timeout_ms);
	TimestampTz lock_deadline = LockTimeout > 0 ? TimestampTzPlusMilliseconds(start, LockTimeout) : 0;
	TimestampTz down_since = 0;
	WaitOutcome outcome = WAIT_NOT_GRANTED;
	SlotAnswer	ans;
	uint32		wait_event;
	TimestampTz deadlock_at = 0;
	bool		published = false;

	/* the kind was set by this backend when it filled the slot */
	wait_event = zklock_wait_event(zklock_kind_info(slot->kind)->acquire ?
								   ZKLOCK_WAIT_ACQUIRE : ZKLOCK_WAIT_REQUEST);
	/* a wait that may be part of a deadlock is checked after deadlock_timeout */
	if (zklock_deadlock_waits(zklock_kind_info(slot->kind)->deadlock) &&
		!slot->try_only)
		deadlock_at = TimestampTzPlusMilliseconds(start, DeadlockTimeout);

	PG_TRY();
	{
		for (;;)
		{
			ZklockConnState cs;
			SlotLook	look;
			GiveUp		give_up = GIVE_UP_NONE;
			TimestampTz now;
			long		wait_ms = 1000;

			look = look_at_slot(idx, serial, false, NULL, &ans, &cs);
			if (look == LOOK_PENDING)
			{
				now = GetCurrentTimestamp();
				if (zklock_down_too_long(cs, now, &down_since) ||
					(down_since != 0 && deadline != 0 && now >= deadline))
					give_up = GIVE_UP_UNREACHABLE;
				else if (deadline != 0 && now >= deadline)
					give_up = GIVE_UP_TIMEOUT;
				else if (lock_deadline != 0 && now >= lock_deadline)
					give_up = GIVE_UP_LOCK_TIMEOUT;
				if (give_up != GIVE_UP_NONE)
					look = look_at_slot(idx, serial, true, NULL, &ans, &cs);
				else if (deadlock_at != 0 && now >= deadlock_at)
				{
					/* waited deadlock_timeout: look for a cycle */
					ZklockDeadlock *dl = zklock_deadlock_search(idx, serial);

					if (dl != NULL)
					{
						look = look_at_slot(idx, serial, false, dl, &ans, &cs);
						if (look == LOOK_WITHDRAWN)
							zklock_deadlock_report(dl);
						zklock_deadlock_free(dl);
					}

					/*
					 * none inside the cluster: across clusters, the first
					 * tick publishes the wait, every later one checks
					 */
					if (look == LOOK_PENDING && zklock_deadlock_records)
					{
						ask_worker(idx, serial, published ? ZKLOCK_DLX_CHECK :
								   ZKLOCK_DLX_PUBLISH);
						published = true;
					}
					deadlock_at = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
															  DeadlockTimeout);
				}
			}

			if (look == LOOK_HELD)
			{
				outcome = WAIT_GRANTED;
				break;
			}
			if (look == LOOK_DONE)
			{
				if (ans.result == ZKR_ERROR)
				{
					/* a deadlock's victim across clusters (worker/deadlock_check.c) */
					if (ans.sqlerrcode == ERRCODE_T_R_DEADLOCK_DETECTED)
						pgstat_report_deadlock();
					ereport(ERROR,
							(errcode(ans.sqlerrcode),
							 errmsg("%s", ans.errmsg),
							 ans.errdetail[0] != '\0' ?
							 errdetail_internal("%s", ans.errdetail) : 0));
				}
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
						 errdetail("The lock was lost before this backend saw the grant: the zklock worker's zookeeper session ended (expired, or its lease ran out), or another client deleted the lock node handed to it."),
						 errhint("Acquire the lock again; if the session ended, once zk_status() shows the connection again.")));
			if (look == LOOK_WITHDRAWN)
			{
				now = GetCurrentTimestamp();
				if (ans.write_in_doubt)
					ereport(ERROR,
							(errcode(ERRCODE_CONNECTION_FAILURE),
							 errmsg("zookeeper did not answer while writing counter \"%s\": the write may or may not have been applied",
									user_path),
							 errdetail("The write had been sent when this backend stopped waiting for its answer; the zklock worker's connection is %s (zklock.hosts = \"%s\").",
									   zklock_down_state_name(cs), zklock_hosts),
							 errhint("Read the counter to see whether the write was applied.")));
				if (give_up == GIVE_UP_UNREACHABLE)
					ereport(ERROR,
							(errcode(ERRCODE_CONNECTION_FAILURE),
							 errmsg("zookeeper is not reachable"),
							 errdetail("The zklock worker's connection is %s (zklock.hosts = \"%s\") and did not come back within %ld ms.",
									   zklock_down_state_name(cs), zklock_hosts,
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
			if (deadlock_at != 0)
				wait_ms = Min(wait_ms, (long) ((deadlock_at - now + 999) / 1000));
			if (down_since != 0)
				wait_ms = Min(wait_ms,
							  (long) ((TimestampTzPlusMilliseconds(down_since, zklock_connect_timeout) - now + 999) / 1000));
			else
			{
				ZklockMonoTime mono = zklock_mono_now();
				ZklockMonoTime until;

				/* wake up when the lease would run out, to notice it */
				if (zklock_lease_valid(mono, &until))
					wait_ms = Min(wait_ms, (long) ((until - mono + 999) / 1000));
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
		(void) zklock_withdraw_request(idx, serial);
		PG_RE_THROW();
	}
	PG_END_TRY();

	/*
	 * A lock is handed to the caller only while the session is provably
	 * alive: a grant that arrives as the lease runs out is given back.
	 */
	if (outcome == WAIT_GRANTED && !zklock_lease_valid(zklock_mono_now(), NULL))
	{
		(void) zklock_withdraw_request(idx, serial);
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
int64
zklock_run_request(ZklockAsk *ask, const BackendHoldKey *key, int user_off,
			uint32 dsm, uint32 dsm_size, bool *timed_out, uint32 *needed)
{
	int			idx;
	uint32		serial;
	int64		value = 0;
	WaitOutcome outcome;

	/* the answer's segment is in the slot before the worker can see it */
	ask->result_dsm = dsm;
	ask->result_size = dsm_size;
	idx = zklock_claim_slot(ask, key, user_off, &serial);
	outcome = zklock_wait_for_request(idx, serial, ask->timeout_ms, key->path + user_off,
							   &value, needed);
	if (timed_out)
		*timed_out = (outcome != WAIT_DONE);
	return value;
}

/*
 * Fill in an acquire request.
 */
void
zklock_init_ask(ZklockAsk *ask, ZklockOp op, ZklockKind kind, int64 timeout_ms, bool xact)
{
	memset(ask, 0, sizeof(*ask));
	ask->op = op;
	ask->kind = kind;
	ask->timeout_ms = timeout_ms;
	ask->xact = xact;
}

/*
 * What is left of a timeout (ms, -1 = none) that started at start.
 */
int64
zklock_remaining_ms(int64 timeout_ms, TimestampTz start)
{
	int64		left;

	if (timeout_ms < 0)
		return -1;
	left = timeout_ms - (GetCurrentTimestamp() - start) / 1000;
	return left < 0 ? 0 : left;
}

/*
 * Keep *down_since, the time since which the worker is down as a waiting
 * backend sees it (cs not connected, or connected without proof: the
 * lease ran out, which a stalled worker cannot say itself; 0 while it is
 * up), and say whether that has lasted zklock.connect_timeout: then a
 * wait gives up with "zookeeper is not reachable".
 */
bool
zklock_down_too_long(ZklockConnState cs, TimestampTz now, TimestampTz *down_since)
{
	if (cs != ZKC_CONNECTED || !zklock_lease_valid(zklock_mono_now(), NULL))
	{
		if (*down_since == 0)
			*down_since = now;
	}
	else
		*down_since = 0;
	return *down_since != 0 &&
		now >= TimestampTzPlusMilliseconds(*down_since, zklock_connect_timeout);
}

/*
 * Write this backend's identity, as it goes into its lock nodes: cluster
 * name, host, port, database, pid, application_name, as JSON.
 */
void
zklock_build_node_data(void)
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

	/* zklock.participant_id replaces it: a LeaderSelector's id, in UTF-8 */
	strlcpy(node_data_participant, zklock_participant_id ? zklock_participant_id : "",
			sizeof(node_data_participant));
	if (node_data_participant[0] != '\0')
	{
		const char *utf8 = pg_server_to_any(node_data_participant,
											strlen(node_data_participant), PG_UTF8);

		if (strlen(utf8) >= sizeof(node_data))
			ereport(ERROR,
					(errcode(ERRCODE_STRING_DATA_RIGHT_TRUNCATION),
					 errmsg("zklock.participant_id is too long in UTF-8"),
					 errdetail("The limit is %d bytes.", (int) sizeof(node_data) - 1)));
		strlcpy(node_data, utf8, sizeof(node_data));
	}
}

/*-------------------------------------------------------------------------
 *
 * common/shmem.c
 *	  The shared-memory request table, the latches that connect backends
 *	  with the ZooKeeper worker, and every change of a slot's state.
 *
 * A slot's state changes only through the functions at the end of this
 * file, always under zklock_shared->lock (held exclusively):
 *
 *   FREE -submit-> NEW -start-> ACTIVE -hold-> HELD -release-> RELEASE -free-> FREE
 *                   |               |               |
 *                   |               |               +-lose-> LOST -drop-> FREE
 *                   |               |               +-resubmit-> NEW
 *                   |               +-done-> DONE -drop-> FREE
 *                   |               +-cancel-> CANCEL -free-> FREE
 *                   +-cancel-> CANCEL (it owns nodes)
 *                   +-drop-> FREE (it owns none)
 *
 *   from     to       by       function              when
 *   FREE     NEW      backend  zklock_slot_submit    a request is filled in
 *   NEW      ACTIVE   worker   zklock_slot_start     the worker takes it on
 *   ACTIVE   HELD     worker   zklock_slot_hold      the lock is granted
 *   ACTIVE   DONE     worker   zklock_slot_done      it ended, no lock kept
 *   HELD     LOST     worker   zklock_slot_lose      the session was lost
 *   HELD     NEW      backend  zklock_slot_resubmit  a double barrier member
 *                                                    leaves (same nodes)
 *   HELD     RELEASE  backend  slot_release   the lock is released
 *   NEW      CANCEL   backend  zklock_slot_cancel    given up; it owns nodes
 *   ACTIVE   CANCEL   backend  zklock_slot_cancel    given up while worked on
 *   CANCEL   FREE     worker   zklock_slot_free      withdrawn: its deletes are
 *   RELEASE  FREE     worker   zklock_slot_free      recorded (or went with the
 *                                                    session)
 *   NEW      FREE     backend  zklock_slot_drop      given up before pickup
 *   DONE     FREE     backend  zklock_slot_drop      the answer is taken
 *   LOST     FREE     backend  zklock_slot_drop      the loss is acknowledged
 *
 * The backend that filled a slot is the only one to submit, resubmit,
 * cancel, release or drop it; the worker is the only one to start, hold,
 * finish (done), lose or free it.  One exception: a backend that gives a
 * slot back without waiting for the lock (a release, a withdrawn wait,
 * backend exit: zklock_give_back) writes its wish into the slot, and the
 * worker makes the backend's transition for it (zklock_take_give_backs).
 *
 * The lock is the worker's for as long as it is stalled (a stopped
 * process, a blocked log pipe), and an LWLock wait ignores cancel and
 * terminate.  So a backend never waits for it uninterruptibly: where it
 * may serve interrupts it takes it with zklock_lock_table (tries, and
 * sleeps serving interrupts between tries); where it may not (transaction
 * end, abort, exit) it does not take it at all (zklock_give_back).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <time.h>

#include "miscadmin.h"
#include "pgstat.h"
#include "port/pg_bitutils.h"
#include "storage/pmsignal.h"
#include "storage/ipc.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "utils/wait_event.h"
#include "utils/memutils.h"

#include "zklock.h"
#include "compat.h"
#include "core/lease_rules.h"
#include "core/curator_rules.h"
#include "common/shmem.h"
#include "common/settings.h"

static bool give_back_slot(int idx);
static void slot_release(ZklockSlot *slot);

ZklockShared *zklock_shared = NULL;
int		   *zklock_post_ring = NULL;
ZklockDelete *zklock_deletes = NULL;
static pg_atomic_uint64 *zklock_give_back_bits = NULL;

/* words of the give-back bitmap */
#define GIVE_BACK_WORDS(nslots)	(((nslots) + 63) / 64)

/*
 * Entries of the post ring: room for several posts of every slot.
 */
static int
post_queue_size(void)
{
	return zklock_max_requests * 4 + 1;
}

/*
 * Where the pending-delete table starts: after the slots and the post
 * ring, aligned.
 */
static Size
deletes_offset(void)
{
	Size		size;

	size = add_size(offsetof(ZklockShared, slots),
					mul_size(sizeof(ZklockSlot), zklock_max_requests));
	size = add_size(size, mul_size(sizeof(int), post_queue_size()));
	return MAXALIGN(size);
}

/*
 * Where the give-back bitmap starts: after the pending-delete table.
 */
static Size
give_back_offset(void)
{
	return MAXALIGN(add_size(deletes_offset(),
							 mul_size(sizeof(ZklockDelete),
									  zklock_delete_table_size(zklock_max_requests))));
}

/*
 * Bytes of shared memory the request table needs: the slots, the post
 * ring, the pending-delete table and the give-back bitmap.
 */
static Size
zklock_shmem_size(void)
{
	return add_size(give_back_offset(),
					mul_size(sizeof(pg_atomic_uint64),
							 GIVE_BACK_WORDS(zklock_max_requests)));
}

/*
 * Ask for our shared memory and one LWLock (called from
 * shmem_request_hook).
 */
void
zklock_shmem_request(void)
{
	RequestAddinShmemSpace(zklock_shmem_size());
	RequestNamedLWLockTranche("zklock", 1);
}

/*
 * Create the request table, or attach to it in a process that did not
 * create it.  A fresh table means a fresh cluster start: no session to
 * resume, every slot free.
 */
void
zklock_shmem_startup(void)
{
	bool		found;

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	zklock_shared = ShmemInitStruct("zklock", zklock_shmem_size(), &found);
	if (!found)
	{
		memset(zklock_shared, 0, zklock_shmem_size());
		zklock_shared->lock = &(GetNamedLWLockTranche("zklock"))->lock;
		zklock_shared->conn_state = ZKC_NONE;
		zklock_shared->nslots = zklock_max_requests;
		zklock_shared->post_size = post_queue_size();
		zklock_shared->ndeletes = zklock_delete_table_size(zklock_max_requests);
		pg_atomic_init_u64(&zklock_shared->lease_until, 0);
		zklock_shared->stats_reset = GetCurrentTimestamp();
	}
	zklock_post_ring = (int *) &zklock_shared->slots[zklock_shared->nslots];
	zklock_deletes = (ZklockDelete *) ((char *) zklock_shared + deletes_offset());
	zklock_give_back_bits = (pg_atomic_uint64 *) ((char *) zklock_shared + give_back_offset());
	if (!found)
	{
		int			i;

		for (i = 0; i < zklock_shared->nslots; i++)
			pg_atomic_init_u64(&zklock_shared->slots[i].give_back, 0);
		for (i = 0; i < GIVE_BACK_WORDS(zklock_shared->nslots); i++)
			pg_atomic_init_u64(&zklock_give_back_bits[i], 0);
	}
	LWLockRelease(AddinShmemInitLock);
}

/*
 * Is the worker's session provably alive at now (monotonic)?  *until (if
 * given) gets the end of the lease, 0 when there is none.  Reads shared
 * memory without the lock: safe to call from a backend whatever the worker
 * does, and from a signal handler (one atomic read).
 */
bool
zklock_lease_valid(ZklockMonoTime now, ZklockMonoTime *until)
{
	ZklockMonoTime end = (ZklockMonoTime) pg_atomic_read_u64(&zklock_shared->lease_until);

	if (until)
		*until = end;
	return zklock_lease_covers(now, end, 0);
}

/*
 * Now, on the clock that decides safety: CLOCK_BOOTTIME in microseconds.
 * Async-signal-safe.
 */
ZklockMonoTime
zklock_mono_now(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_BOOTTIME, &ts) != 0)
		(void) clock_gettime(CLOCK_MONOTONIC, &ts);
	return (ZklockMonoTime) ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/*
 * The wall-clock time that a monotonic instant corresponds to now, for
 * display only (zk_status().lease_until).  0 stays 0.
 */
TimestampTz
zklock_mono_to_timestamp(ZklockMonoTime t)
{
	if (t == 0)
		return 0;
	return GetCurrentTimestamp() + (t - zklock_mono_now());
}

/*
 * Tell the worker that slot idx needs it (new request, cancel, release).
 * Caller holds the lock.  When the ring is full the worker looks at every
 * slot instead.
 */
void
zklock_post(int idx)
{
	ZklockShared *sh = zklock_shared;
	int			next = (sh->post_tail + 1) % sh->post_size;

	if (next == sh->post_head)
		sh->post_overflow = true;
	else
	{
		zklock_post_ring[sh->post_tail] = idx;
		sh->post_tail = next;
	}
}

/*
 * Set the worker's latch, if a worker runs.
 */
void
zklock_wake_worker(void)
{
	Latch	   *latch = zklock_shared->worker_latch;

	if (latch != NULL)
		SetLatch(latch);
}

/*
 * Wake-ups the worker owes backends, set once it has let go of the shared
 * lock (zklock_flush_wakes).  Only the worker defers: see
 * zklock_defer_wakes.
 */
static int *pending_wakes = NULL;
static int	npending_wakes = 0;

/*
 * From now on, hold back the backends' wake-ups until zklock_flush_wakes.
 * A backend woken while the worker still holds the shared lock would go
 * to sleep again at once on that lock and need a second wake-up from its
 * release: two context switches instead of one, for every grant.  The
 * worker calls this once, at its start, and flushes before it waits and
 * after each stretch of work under the lock.
 */
void
zklock_defer_wakes(void)
{
	if (pending_wakes == NULL)
		pending_wakes = MemoryContextAlloc(TopMemoryContext,
										   sizeof(int) * ProcGlobal->allProcCount);
}

/*
 * Set the latch of the backend that owns a slot: at once, or, in the
 * worker, at its next zklock_flush_wakes.
 */
void
zklock_wake_backend(ZklockSlot *slot)
{
	if (slot->procno < 0 || slot->procno >= (int) ProcGlobal->allProcCount)
		return;
	if (pending_wakes != NULL && npending_wakes < (int) ProcGlobal->allProcCount)
		pending_wakes[npending_wakes++] = slot->procno;
	else
		SetLatch(&ProcGlobal->allProcs[slot->procno].procLatch);
}

/*
 * Set the latches held back since the last call.  Caller does not hold
 * the shared lock.
 */
void
zklock_flush_wakes(void)
{
	int			i;

	for (i = 0; i < npending_wakes; i++)
		SetLatch(&ProcGlobal->allProcs[pending_wakes[i]].procLatch);
	npending_wakes = 0;
}

/*
 * Name of a slot state as zk_locks shows it.
 */
const char *
zklock_slot_state_name(ZklockSlotState state)
{
	switch (state)
	{
		case ZKS_NEW:
		case ZKS_ACTIVE:
			return "waiting";
		case ZKS_HELD:
			return "held";
		case ZKS_CANCEL:
			return "cancelling";
		case ZKS_RELEASE:
			return "releasing";
		case ZKS_LOST:
			return "lost";
		case ZKS_DONE:
			return "done";
		case ZKS_FREE:
			break;
	}
	return "free";
}

/*
 * Name of a connection state as zk_status shows it.
 */
const char *
zklock_conn_state_name(ZklockConnState state)
{
	switch (state)
	{
		case ZKC_NONE:
			return "no worker";
		case ZKC_CONNECTING:
			return "connecting";
		case ZKC_CONNECTED:
			return "connected";
		case ZKC_SUSPENDED:
			return "suspended";
		case ZKC_EXPIRED:
			return "expired";
		case ZKC_AUTH_FAILED:
			return "auth_failed";
		case ZKC_TLS_FAILED:
			return "tls_failed";
		case ZKC_SASL_FAILED:
			return "sasl_failed";
	}
	return "unknown";
}

/* ---------------------------------------------------------------------
 * Slot state changes (the diagram above).  Caller holds the lock
 * exclusively.
 * ---------------------------------------------------------------------
 */

/*
 * Backend: a slot it filled is handed to the worker (FREE -> NEW).
 */
void
zklock_slot_submit(ZklockSlot *slot)
{
	Assert(slot->state == ZKS_FREE);
	slot->state = ZKS_NEW;
}

/*
 * Backend: a held slot becomes a new request on the same nodes (a double
 * barrier membership asked to leave; HELD -> NEW).
 */
void
zklock_slot_resubmit(ZklockSlot *slot)
{
	Assert(slot->state == ZKS_HELD);
	slot->state = ZKS_NEW;
}

/*
 * Backend: forget a slot the worker is done with or never saw: an answer
 * taken, a lost lock acknowledged, a request withdrawn before pickup
 * (DONE, LOST or NEW -> FREE).
 */
void
zklock_slot_drop(ZklockSlot *slot)
{
	Assert(slot->state == ZKS_DONE || slot->state == ZKS_LOST ||
		   slot->state == ZKS_NEW);
	slot->state = ZKS_FREE;
}

/*
 * Backend: give up a request; the worker deletes what it made (NEW or
 * ACTIVE -> CANCEL).
 */
void
zklock_slot_cancel(ZklockSlot *slot)
{
	Assert(slot->state == ZKS_NEW || slot->state == ZKS_ACTIVE);
	slot->state = ZKS_CANCEL;
}

/*
 * Backend: release a held lock; the worker deletes its nodes (HELD ->
 * RELEASE).
 */
static void
slot_release(ZklockSlot *slot)
{
	Assert(slot->state == ZKS_HELD);
	slot->state = ZKS_RELEASE;
}

/*
 * Worker: take a request on (NEW -> ACTIVE).
 */
void
zklock_slot_start(ZklockSlot *slot)
{
	Assert(slot->state == ZKS_NEW);
	slot->state = ZKS_ACTIVE;
}

/*
 * Worker: grant the lock (ACTIVE -> HELD).
 */
void
zklock_slot_hold(ZklockSlot *slot)
{
	Assert(slot->state == ZKS_ACTIVE);
	slot->state = ZKS_HELD;
}

/*
 * Worker: the request ended without a lock kept (its result, or its error,
 * is in the slot; ACTIVE -> DONE).
 */
void
zklock_slot_done(ZklockSlot *slot)
{
	Assert(slot->state == ZKS_ACTIVE);
	slot->state = ZKS_DONE;
}

/*
 * Worker: a held lock went with the session (HELD -> LOST).
 */
void
zklock_slot_lose(ZklockSlot *slot)
{
	Assert(slot->state == ZKS_HELD);
	slot->state = ZKS_LOST;
}

/*
 * Worker: a cancelled or released request is withdrawn, its deletes
 * recorded or gone with the session (CANCEL or RELEASE -> FREE).
 */
void
zklock_slot_free(ZklockSlot *slot)
{
	Assert(slot->state == ZKS_CANCEL || slot->state == ZKS_RELEASE);
	slot->state = ZKS_FREE;
}


/* ---------------------------------------------------------------------
 * Giving a slot back, and the backends' way of taking the lock.
 * ---------------------------------------------------------------------
 */

/*
 * Give up a request the worker has not picked up yet.  It is simply freed,
 * unless its slot already owns nodes (a double barrier leave is made from
 * a held membership): deleting those is the worker's job, as for a
 * request it works on.  Returns true when the slot was handed to the
 * worker: the caller posts it and wakes the worker.  Caller holds the
 * lock exclusively.
 */
bool
zklock_give_up_new_request(int idx)
{
	ZklockSlot *slot = &zklock_shared->slots[idx];

	if (slot->nodes[ZKN_MAIN].name[0] == '\0' &&
		slot->nodes[ZKN_MAIN].uuid[0] == '\0' &&
		slot->nodes[ZKN_LEASE_LOCK].uuid[0] == '\0')
	{
		zklock_slot_drop(slot);
		return false;
	}
	zklock_slot_cancel(slot);
	return true;
}

/*
 * Slot idx goes back, whatever state it is in: a request the worker has
 * not seen is dropped (zklock_give_up_new_request), one it works on is
 * cancelled, an answer or a lost lock is freed, a held lock is released.
 * Returns true when the worker must act on the slot: the caller posts it
 * (and, in a backend, wakes the worker).  Caller holds the lock
 * exclusively.
 */
static bool
give_back_slot(int idx)
{
	ZklockSlot *slot = &zklock_shared->slots[idx];

	switch (slot->state)
	{
		case ZKS_NEW:
			return zklock_give_up_new_request(idx);
		case ZKS_DONE:
		case ZKS_LOST:
			zklock_slot_drop(slot);
			return false;
		case ZKS_ACTIVE:
			zklock_slot_cancel(slot);
			return true;
		case ZKS_HELD:
			slot_release(slot);
			return true;
		default:
			return false;
	}
}

/*
 * Backend: give slot idx back (as give_back_slot would) without
 * taking the lock, so it works where waiting is not allowed (transaction
 * end, abort, exit) and whatever the worker does.  The wish goes into
 * the slot as (pid, serial), a slot reused meanwhile by another request
 * does not match it, and a bit tells the worker which slot to look at;
 * the worker acts on it in its next pass, before it picks up new
 * requests.  Lock-free: two atomic writes and a latch.
 */
void
zklock_give_back(int idx, int pid, uint32 serial)
{
	ZklockSlot *slot = &zklock_shared->slots[idx];

	pg_atomic_write_u64(&slot->give_back, ((uint64) (uint32) pid << 32) | serial);
	/* the wish is visible before its bit (fetch_or is a full barrier) */
	(void) pg_atomic_fetch_or_u64(&zklock_give_back_bits[idx / 64],
								  UINT64CONST(1) << (idx % 64));
	zklock_wake_worker();
}


/*
 * Give up a request or a lock of this backend: a request the worker has
 * not seen is dropped, one it works on is cancelled, a held lock is
 * released, an answer or a lost lock is freed (give_back_slot).
 * Without the lock: it runs where waiting is not allowed (transaction end,
 * abort, an error being handled) and must not wait for a stalled worker;
 * the worker acts on it in its next pass, before any request of ours that
 * follows.
 */
void
zklock_withdraw_request(int idx, uint32 serial)
{
	zklock_give_back(idx, MyProcPid, serial);
}
/*
 * Does the backend that filled slot want it back (written, not yet acted
 * on)?  zk_locks and the claim of a slot count such a slot as withdrawn.
 * Reads without the lock.
 */
bool
zklock_give_back_pending(const ZklockSlot *slot)
{
	uint64		wish = pg_atomic_read_u64(unconstify(pg_atomic_uint64 *, &slot->give_back));

	return wish != 0 &&
		(int) (uint32) (wish >> 32) == slot->pid && (uint32) wish == slot->serial;
}

/*
 * Worker: act on the slots given back since the last call: each one whose
 * wish still names its request makes the backend's transition
 * (give_back_slot); those the worker must now withdraw are put in
 * withdraw (room for every slot), and their number is returned.  Caller
 * holds the lock exclusively.
 */
int
zklock_take_give_backs(int *withdraw)
{
	ZklockShared *sh = zklock_shared;
	int			n = 0;
	int			w;

	for (w = 0; w < GIVE_BACK_WORDS(sh->nslots); w++)
	{
		uint64		bits;

		if (pg_atomic_read_u64(&zklock_give_back_bits[w]) == 0)
			continue;
		bits = pg_atomic_exchange_u64(&zklock_give_back_bits[w], 0);
		while (bits != 0)
		{
			int			b = pg_rightmost_one_pos64(bits);
			int			idx = w * 64 + b;
			ZklockSlot *slot;

			bits &= bits - 1;
			if (idx >= sh->nslots)
				continue;
			slot = &sh->slots[idx];
			if (zklock_give_back_pending(slot) && slot->state != ZKS_FREE &&
				give_back_slot(idx))
				withdraw[n++] = idx;
			pg_atomic_write_u64(&slot->give_back, 0);
		}
	}
	return n;
}

/*
 * Backend: take the shared lock in mode, serving interrupts while it
 * waits: try, and between tries sleep a little (10 us, doubling up to
 * 1 ms; a signal ends the sleep) and CHECK_FOR_INTERRUPTS, so cancel,
 * statement_timeout, terminate and a fast shutdown end the wait even
 * while a stalled worker holds the lock.  A wait that lasts
 * zklock.connect_timeout while the worker's lease is not valid (the worker
 * holds the lock and proves nothing: it is stalled) fails with 08006, as a
 * request's wait does.  Not for code that runs with interrupts held: that
 * gives slots back with zklock_give_back.
 */
void
zklock_lock_table(LWLockMode mode)
{
	long		pause_us = 10;
	ZklockMonoTime start;

	if (LWLockConditionalAcquire(zklock_shared->lock, mode))
		return;
	start = zklock_mono_now();
	pgstat_report_wait_start(zklock_wait_event(ZKLOCK_WAIT_TABLE));
	for (;;)
	{
		ZklockMonoTime now;

		CHECK_FOR_INTERRUPTS();
		if (!PostmasterIsAlive())
			proc_exit(1);
		pg_usleep(pause_us);
		if (LWLockConditionalAcquire(zklock_shared->lock, mode))
			break;
		pause_us = Min(pause_us * 2, 1000);
		now = zklock_mono_now();
		if (now - start >= (ZklockMonoTime) zklock_connect_timeout * 1000 &&
			!zklock_lease_valid(now, NULL))
		{
			pgstat_report_wait_end();
			ereport(ERROR,
					(errcode(ERRCODE_CONNECTION_FAILURE),
					 errmsg("zklock worker is not responding"),
					 errdetail("The worker has held zklock's shared table for %ld ms and its ZooKeeper session is not proven alive.",
							   (long) ((now - start) / 1000)),
					 errhint("Check the zklock worker process (zk_status() shows its pid once it responds).")));
		}
	}
	pgstat_report_wait_end();
}

/*
 * The wait event to report while waiting for the given kind of thing.
 * Where PostgreSQL registers extension wait events by name (src/compat.h),
 * the id is looked up once per process and kept; elsewhere it is the
 * generic Extension event.
 */
uint32
zklock_wait_event(ZklockWaitKind kind)
{
#if ZKLOCK_HAVE_NAMED_WAIT_EVENTS
	static const char *const names[ZKLOCK_WAIT_KINDS] = {
		[ZKLOCK_WAIT_ACQUIRE] = "ZkLockAcquire",
		[ZKLOCK_WAIT_REQUEST] = "ZkLockRequest",
		[ZKLOCK_WAIT_WORKER] = "ZkLockWorkerMain",
		[ZKLOCK_WAIT_TABLE] = "ZkLockTable",
	};
	static uint32 ids[ZKLOCK_WAIT_KINDS];

	Assert(kind >= 0 && kind < ZKLOCK_WAIT_KINDS);
	if (ids[kind] == 0)
		ids[kind] = WaitEventExtensionNew(names[kind]);
	return ids[kind];
#else
	(void) kind;
	return PG_WAIT_EXTENSION;
#endif
}

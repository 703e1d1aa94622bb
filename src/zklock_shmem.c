/*-------------------------------------------------------------------------
 *
 * zklock_shmem.c
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
 *   HELD     RELEASE  backend  zklock_slot_release   the lock is released
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
 * finish (done), lose or free it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <time.h>

#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "utils/memutils.h"

#include "zklock.h"
#include "zklock_lease_rules.h"

ZklockShared *zklock_shared = NULL;
int		   *zklock_post_ring = NULL;
ZklockDelete *zklock_deletes = NULL;

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
 * Bytes of shared memory the request table needs: the slots, the post
 * ring and the pending-delete table.
 */
static Size
zklock_shmem_size(void)
{
	return add_size(deletes_offset(),
					mul_size(sizeof(ZklockDelete),
							 zklock_delete_table_size(zklock_max_requests)));
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
	}
	zklock_post_ring = (int *) &zklock_shared->slots[zklock_shared->nslots];
	zklock_deletes = (ZklockDelete *) ((char *) zklock_shared + deletes_offset());
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
 * Ask the worker to look at every slot.  Caller holds the lock.
 */
void
zklock_post_all(void)
{
	zklock_shared->post_overflow = true;
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
void
zklock_slot_release(ZklockSlot *slot)
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

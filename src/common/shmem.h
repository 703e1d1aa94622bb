/*-------------------------------------------------------------------------
 *
 * common/shmem.h
 *	  The shared-memory request table that backends and the ZooKeeper
 *	  worker use to talk to each other (common/shmem.c): the slots and
 *	  their states, the lock cache, the worker's connection state and
 *	  counters, and the calls that change them.  Its readers are the files
 *	  that read or write the table, on either side.
 *
 * A backend never talks to ZooKeeper.  It fills a slot of the request
 * table, sets the worker's latch and waits on its own latch.  The worker
 * runs the recipe, writes the outcome into the slot and sets the
 * backend's latch.  A granted lock keeps its slot (state HELD) until it is
 * released, so the table is also the registry of every lock held or
 * waited for in this cluster: zk_locks reads it, and the worker uses it
 * to clean up after backends that exit.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZKLOCK_SHMEM_H
#define ZKLOCK_SHMEM_H

#include "port/atomics.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "utils/timestamp.h"

#include "zklock.h"
#include "common/pending_delete.h"
#include "common/recipe_fields.h"

/* what a waiting backend asks the worker (ZklockSlot.dlx_ask) */
#define ZKLOCK_DLX_PUBLISH		0x01	/* publish this wait */
#define ZKLOCK_DLX_CHECK		0x02	/* look for a cycle across clusters */

/*
 * Life of a request slot.  Transitions are made under ZklockShared->lock,
 * one named function per transition (common/shmem.c); the comment on each
 * state says who moves it on.  The diagram is in src/README, "Slot states".
 */
typedef enum ZklockSlotState
{
	ZKS_FREE = 0,				/* unused; a backend may claim it */
	ZKS_NEW,					/* filled by a backend; worker picks it up */
	ZKS_ACTIVE,					/* worker is running the recipe */
	ZKS_HELD,					/* granted; the backend owns the lock */
	ZKS_DONE,					/* finished without a lock; backend reads and
								 * frees it */
	ZKS_CANCEL,					/* backend gave up waiting; worker withdraws
								 * the node and frees the slot */
	ZKS_RELEASE,				/* backend released; worker deletes the node
								 * and frees the slot */
	ZKS_LOST					/* held lock lost with the ZooKeeper session;
								 * backend frees it */
} ZklockSlotState;

/* Outcome of a request that ended in ZKS_DONE */
typedef enum ZklockResult
{
	ZKR_NONE = 0,
	ZKR_NOT_GRANTED,			/* a try found the lock taken */
	ZKR_OK,						/* a request without a lock succeeded */
	ZKR_ERROR					/* sqlerrcode and errmsg say what */
} ZklockResult;

/* Connection state of the worker's ZooKeeper session, as zk_status shows it */
typedef enum ZklockConnState
{
	ZKC_NONE = 0,				/* no worker running */
	ZKC_CONNECTING,				/* no session established yet */
	ZKC_CONNECTED,
	ZKC_SUSPENDED,				/* connection lost, session may be alive */
	ZKC_EXPIRED,				/* session expired; a new one is being made */
	ZKC_AUTH_FAILED,			/* the servers rejected zklock.auth; retried
								 * every zklock.connect_timeout */
	ZKC_TLS_FAILED,				/* no TLS connection: a handshake failed or
								 * the client's files cannot be used
								 * (conn_failure says why) */
	ZKC_SASL_FAILED				/* the SASL login was refused or cannot be
								 * made (conn_failure says why) */
} ZklockConnState;

/*
 * A node of a request: its protection id and its name.  A slot has two
 * (ZklockSlot.nodes): its own, and the P/locks node a lease holds while
 * it waits for a lease (the semaphore's mutex, its first step).
 */
typedef struct ZklockNodeRef
{
	char		uuid[ZKLOCK_UUID_LEN + 1];	/* protection id, "" if none */
	char		name[ZKLOCK_NODE_NAME_SIZE];	/* the node's name below its
												 * parent, "" if none */
	bool		deleted;		/* known gone: a double barrier member's
								 * delete was confirmed (leave, or an enter
								 * given up); the cleanup plan skips it */
} ZklockNodeRef;

/* The nodes of a slot, by index */
typedef enum ZklockNodeIndex
{
	ZKN_MAIN = 0,				/* the request's node: a lock node, a lease,
								 * a member (below P or P/leases) */
	ZKN_LEASE_LOCK,				/* a lease's P/locks node (the semaphore's
								 * mutex) */
	ZKN_COUNT
} ZklockNodeIndex;

typedef struct ZklockSlot
{
	ZklockSlotState state;
	ZklockOp	op;
	ZklockKind	kind;
	ZklockPhase phase;			/* lease: which step */
	bool		try_only;		/* do not wait: give up if not first */
	bool		revocable;		/* watch our node for __REVOKE__ */
	bool		revoke_requested;	/* someone wrote __REVOKE__ into it */
	char		downgrade_seq[12];	/* read lock of a write holder: its seq */
	ZklockRecipeArgs args;		/* the recipe's own arguments, from the ask */
	ZklockRecipeState rstate;	/* the recipe's own state: only the
									 * member of the slot's op is valid */
	int64		result_value;	/* ZKR_OK: count or flag */
	uint32		result_dsm;		/* participants: dsm_handle for the answer */
	uint32		result_size;	/* ... its size; the worker says what it
								 * needed */
	int			procno;			/* owner's PGPROC number (for its latch) */
	int			pid;			/* owner's pid */
	Oid			dbid;			/* the database and the session user of the
								 * backend that asked (zk_locks) */
	Oid			roleid;
	uint32		serial;			/* bumped on every claim of the slot */
	ZklockResult result;
	int			sqlerrcode;
	char		errmsg[ZKLOCK_ERRMSG_SIZE];
	char		errdetail[ZKLOCK_ERRDETAIL_SIZE];	/* ZKR_ERROR: its DETAIL,
													 * "" if none */
	char		waits_for[ZKLOCK_NODE_DATA_SIZE];	/* a wait published
														 * (worker/deadlock_records.c): whom
														 * it waits for, for
														 * zk_locks; "" if not
														 * known */
	uint8		dlx_ask;		/* ZKLOCK_DLX_ bits the waiting owner set
								 * (under the lock) for the worker; the
								 * worker clears them as it takes them */
	ZklockNodeRef nodes[ZKN_COUNT];	/* its nodes: ZKN_MAIN, and a lease's
									 * P/locks node */
	int64		czxid;			/* creation zxid of our node, once created */
	uint64		session_gen;	/* worker session generation of the node */
	TimestampTz since;			/* when requested; when granted */
	int32		session_count;	/* reentrancy counts, kept by the owner */
	int32		xact_count;
	int			user_path_off;	/* where the user's path starts in path */
	char		path[ZKLOCK_FULL_PATH_SIZE];	/* full lock path in ZooKeeper */
	char		waits_on[ZKLOCK_NODE_NAME_SIZE];	/* lock engine: the node
													 * a waiter waits behind,
													 * "" if none */
	char		data[ZKLOCK_NODE_DATA_SIZE];	/* data to write into it */
	bool		token_asked;	/* its holder asked zk_lock_token: the node
								 * is not kept for a later holder (written
								 * by the owner under the shared lock) */

	/*
	 * Written by the owner without the lock: (pid << 32 | serial) of a
	 * request or lock its backend gives back (zklock_give_back), 0 when
	 * none.  The worker acts on it under the lock.
	 */
	pg_atomic_uint64 give_back;
} ZklockSlot;

/*
 * Lock caching (worker/locks/lock_cache.c): a mutex node kept after its last
 * local release, and granted to the next local acquire of the same path
 * by a backend with the same identity, with no ZooKeeper request.
 *
 *   FREE     unused
 *   IDLE     the node exists in session session_gen and nobody holds it
 *   IN_USE   slot holder (with holder_serial) holds it, granted from the
 *            cache or kept for it at its release
 *   COOLING  no node; caching of base stays off until since (someone
 *            else wanted the lock lately)
 *
 * Written by the worker only, under ZklockShared->lock; zk_locks reads
 * it.  The table outlives a worker (a restarted one deletes the IDLE
 * nodes: the watches that guarded them were the old process's).
 */
#define ZKLOCK_CACHE_MAX		128

typedef enum ZklockCacheState
{
	ZKCE_FREE = 0,
	ZKCE_IDLE,
	ZKCE_IN_USE,
	ZKCE_COOLING
} ZklockCacheState;

typedef struct ZklockCacheEntry
{
	ZklockCacheState state;
	uint32		gen;			/* bumped on every change of use: a stale
								 * watch or listing finds it changed */
	bool		watched;		/* a children watch on base is set (its
								 * listing answered) and has not fired */
	bool		listing;		/* that listing is on its way */
	bool		contended;		/* a node of anyone else may be queued, or
								 * the watch was cut: never grant from it,
								 * never keep it again */
	uint64		session_gen;	/* session of the node */
	int			holder;			/* IN_USE: the slot that holds it */
	uint32		holder_serial;	/* ... and its serial */
	int			user_path_off;	/* where the user's path starts in base */
	ZklockKind	kind;			/* the kind of the hold that kept it */
	int64		czxid;			/* the node's creation zxid */
	ZklockMonoTime since;		/* IDLE: since when; COOLING: until when
								 * (monotonic: a step of the wall clock
								 * neither keeps a node nor ends a backoff) */
	char		base[ZKLOCK_FULL_PATH_SIZE];	/* the lock path */
	ZklockNodeRef node;			/* the node below base */
	char		data[ZKLOCK_NODE_DATA_SIZE];	/* its data (the identity) */
} ZklockCacheEntry;

/*
 * The worker's counters, each counting since the server started: what
 * zk_status() and zk_stat_worker show (zk_stat_worker in this order, less
 * ZklockShared.stat_base).  Written by the worker under the table's lock.
 */
typedef struct ZklockWorkerCounters
{
	int64		connected_count;	/* transitions into each state */
	int64		suspended_count;
	int64		expired_count;
	int64		locks_lost;		/* held locks lost */
	int64		leases_expired; /* leases that ran out unanswered */
	int64		handovers;		/* locks handed over locally */
	int64		read_joins;		/* read locks granted without a listing,
								 * from the reader before them */
	int64		listings_skipped;	/* lock nodes granted without a listing
									 * because the sequence numbers proved
									 * them first */
	int64		batches;		/* multis of creates and deletes sent: each
								 * one zookeeper request (worker/batch.c) */
	int64		batched_deletes;	/* the deletes they carried */
	int64		batched_creates;	/* the creates they carried */
	int64		batches_failed; /* answered by a failed op (each op then
								 * sent alone) */
	int64		cache_grants;	/* locks granted from a cached node
								 * (worker/locks/lock_cache.c) */
	int64		connection_attempts;	/* handles the worker opened */
} ZklockWorkerCounters;

typedef struct ZklockShared
{
	LWLock	   *lock;			/* protects everything below */
	int			worker_pid;		/* 0 when no worker runs */
	Latch	   *worker_latch;
	/* ring of slot indexes posted for the worker; full: scan every slot */
	int			post_head;
	int			post_tail;
	int			post_size;
	bool		post_overflow;
	ZklockWorkerCounters counters;	/* the worker's, ever */
	ZklockConnState conn_state;
	TimestampTz state_since;
	/* why no TLS or SASL connection is made (ZKC_TLS_FAILED, _SASL_FAILED) */
	char		conn_failure[ZKLOCK_CONN_FAILURE_LEN];
	bool		conn_tls;		/* the connection made is TLS */
	char		sasl_identity[256]; /* the SASL identity it logged in as */
	/* the connection made: when its certificates expire (0: none), and the
	 * warning of zklock.tls_expiry_warning (empty: none) */
	TimestampTz tls_cert_expires;
	TimestampTz tls_server_cert_expires;
	char		tls_warning[ZKLOCK_CONN_FAILURE_LEN];
	bool		have_session;	/* session_id/passwd are valid */
	int64		session_id;
	char		session_passwd[16];
	uint64		session_gen;	/* bumped for every new session */
	uint64		lost_epoch;		/* bumped whenever held locks are lost */

	/*
	 * Lease: the instant, on the monotonic clock (ZklockMonoTime), until
	 * which the ZooKeeper leader provably counts the session alive, 0 when
	 * nothing is proven.  It is the proven instant (core/lease_rules.c:
	 * the handshake, a sync answered by a standalone server, or the chain
	 * of syncs through an ensemble's leader, lease_proven) plus the lease
	 * length of lease_timeout minus zklock.lease_margin.  Written by the
	 * worker only (it moves back when the timeout it is derived from
	 * shrinks, and drops to 0 when the session is lost); read without the
	 * lock by backends at COMMIT and by their cancel_on_loss timer, so a
	 * worker that is stalled, even while holding the lock, cannot vouch for
	 * a lock.  The clock is CLOCK_BOOTTIME: shared by every process, never
	 * stepped by NTP or an operator, and running through a suspend as the
	 * servers' clocks do.
	 *
	 * lease_proven is the latest instant the leader is proven to have
	 * touched the session at or after, 0 when nothing is proven in this
	 * session.  lease_timeout (ms) is the shortest session timeout the
	 * leader may apply at the next touch: the smallest one negotiated by
	 * any connection of this session, and never more than the
	 * zklock.session_timeout the next handle asks for (a touch replaces
	 * the expiry, it does not keep the later one).  Both are the worker's
	 * alone, kept here so that a restarted worker goes on from them.
	 */
	pg_atomic_uint64 lease_until;
	ZklockMonoTime lease_proven;
	int			lease_timeout;	/* ms, 0 when no session */
	int			negotiated_timeout; /* ms */
	int			timeout_asked;	/* zklock.session_timeout when the worker
								 * opened its handle: what it asks for */
	int			timeout_warned_asked;	/* the last shorter negotiated timeout */
	int			timeout_warned_got; /* warned about: asked, got (ms) */
	int			server_mode;	/* ZklockServerMode of the connection */
	char		server[128];
	/* the pending-delete table (zklock_deletes), after the post ring */
	int			ndeletes;		/* its size */
	int			deletes_used;	/* entries in use: zk_status().deletes_pending */
	uint32		delete_serial;	/* last serial handed to an entry */
	bool		deletes_full_logged;	/* "table full" was logged */
	/*
	 * zk_stat_worker: the counters as they were at the last
	 * zk_stat_reset() (zeros at startup), and when that was; the view shows
	 * each counter less its value here.  Written by zk_stat_reset() only.
	 */
	ZklockWorkerCounters stat_base;
	TimestampTz stats_reset;
	ZklockCacheEntry cache[ZKLOCK_CACHE_MAX];
	int			nslots;
	ZklockSlot	slots[FLEXIBLE_ARRAY_MEMBER];
} ZklockShared;

/*
 * What a process is waiting for, as pg_stat_activity shows it.  On
 * PostgreSQL 17 and later each has a wait event of its own name (type
 * Extension); on 15 and 16 all of them show as Extension/Extension.
 */
typedef enum ZklockWaitKind
{
	ZKLOCK_WAIT_ACQUIRE = 0,	/* a backend waits for a lock or lease */
	ZKLOCK_WAIT_REQUEST,		/* a backend waits for any other request */
	ZKLOCK_WAIT_WORKER,			/* the worker's main loop */
	ZKLOCK_WAIT_TABLE,			/* a backend waits for the shared lock */
	ZKLOCK_WAIT_KINDS
} ZklockWaitKind;

/* common/shmem.c */
extern ZklockShared *zklock_shared;
extern int *zklock_post_ring;	/* the post ring, after the slots */
extern ZklockDelete *zklock_deletes;	/* pending deletes, after the ring */
extern void zklock_shmem_request(void);
extern void zklock_shmem_startup(void);
/* slot state changes (common/shmem.c; caller holds the lock) */
extern void zklock_slot_submit(ZklockSlot *slot);
extern void zklock_slot_resubmit(ZklockSlot *slot);
extern void zklock_slot_drop(ZklockSlot *slot);
extern void zklock_slot_cancel(ZklockSlot *slot);
extern void zklock_slot_start(ZklockSlot *slot);
extern void zklock_slot_hold(ZklockSlot *slot);
extern void zklock_slot_done(ZklockSlot *slot);
extern void zklock_slot_lose(ZklockSlot *slot);
extern void zklock_slot_free(ZklockSlot *slot);
extern bool zklock_give_up_new_request(int idx);
extern void zklock_give_back(int idx, int pid, uint32 serial);
extern void zklock_withdraw_request(int idx, uint32 serial);
extern bool zklock_give_back_pending(const ZklockSlot *slot);
extern int	zklock_take_give_backs(int *withdraw);
extern void zklock_lock_table(LWLockMode mode);
extern void zklock_post(int idx);
extern void zklock_wake_worker(void);
extern void zklock_wake_backend(ZklockSlot *slot);
extern void zklock_defer_wakes(void);
extern void zklock_flush_wakes(void);
extern const char *zklock_slot_state_name(ZklockSlotState state);
extern const char *zklock_conn_state_name(ZklockConnState state);
extern bool zklock_lease_valid(ZklockMonoTime now, ZklockMonoTime *until);
extern ZklockMonoTime zklock_mono_now(void);
extern TimestampTz zklock_mono_to_timestamp(ZklockMonoTime t);
extern uint32 zklock_wait_event(ZklockWaitKind kind);

#endif							/* ZKLOCK_SHMEM_H */

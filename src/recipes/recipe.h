/*-------------------------------------------------------------------------
 *
 * recipes/recipe.h
 *	  The recipe contract: the whole of what a recipe may use of zklock
 *	  besides the limits (zklock.h), the shared-memory table
 *	  (common/shmem.h), the settings (common/settings.h), compat.h and the
 *	  pure cores (core/), and the descriptor by which the generic layers
 *	  reach it.  A recipe file includes postgres.h, PostgreSQL's own
 *	  headers, this header and those of the others it reads, nothing else
 *	  of ours.
 *
 * A recipe is one file (more when it is long: the counter's are counter.c,
 * counter_fold.c, counter_fence.c and counter_sql.c) that ends with its
 * descriptor,
 *
 *		const ZklockRecipe zklock_recipe_<name> = { ... };
 *
 * listed by one line of ZKLOCK_RECIPE_LIST below, which
 * recipes/registry.c indexes.  The descriptor names the
 * kinds of request the recipe runs (ZklockWorkerOps: its worker steps
 * and flags, one entry per ZklockOp) and the kinds of hold it gives
 * (ZklockKindInfo: what the backend side says of them, and its
 * before_acquire rule, one entry per ZklockKind).  Its steps and rules
 * are static in its file: the generic layers reach them only through the
 * descriptor (zklock_worker_ops(op), zklock_kind_info(kind)) and test no
 * op or kind of their own, as PostgreSQL reaches an index access method
 * through its IndexAmRoutine and Curator's LockInternals its
 * LockInternalsDriver.  src/recipes/README walks through two recipes.
 *
 * Its sections:
 *
 *	  The descriptor: ZklockKindInfo, LockTarget (what a user of the lock
 *	  engine fills in), ZklockWorkerOps and its ZKW_ flags, ZklockRecipe,
 *	  and the registry's lookups.
 *	  The worker's request record: WorkerReq (zklock_reqs[idx], beside
 *	  zklock_shared->slots[idx]), with its per-recipe union rcp, and the
 *	  worker's handle.
 *	  Request calls (worker side): the calls a recipe's worker steps may
 *	  make, by the file of worker/ that offers them.
 *	  SQL side calls: the types and calls a recipe's SQL functions may
 *	  use, by the file of backend/ that offers them.
 *
 * State a recipe keeps lives in three places, each a per-recipe member
 * the recipe owns: its arguments in ZklockRecipeArgs
 * (common/recipe_fields.h, the ask's and the slot's), its shared state in
 * ZklockRecipeState (common/recipe_fields.h, the slot's rstate: only the
 * member of the slot's op is valid), its
 * worker-only state in WorkerReq.rcp.  Its nodes are the slot's node
 * record (ZklockSlot.nodes: ZKN_MAIN, and ZKN_LEASE_LOCK for a lease).
 *
 * worker/worker.h and backend/backend.h include this header: the
 * functions declared here are theirs, and they read the descriptors'
 * types.  That a side sees the other side's declarations does not let it
 * call them: test/callgraph.pl fails a call from backend/ into worker/
 * or back.  The contract grows (a hook, a flag, a call moved here) only
 * when a recipe needs what no recipe needed before; then the generic
 * layers change too.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZKLOCK_RECIPE_H
#define ZKLOCK_RECIPE_H

#include <zookeeper/zookeeper.h>

#include "fmgr.h"
#include "utils/hsearch.h"

#include "zklock.h"
#include "core/deadlock_rules.h"
#include "core/handover_rules.h"
#include "core/recipe_guard.h"
#include "common/shmem.h"

struct ZklockAsk;
struct LocalLockKey;
struct LocalLock;

/* ---------------------------------------------------------------------
 * The descriptor
 * ---------------------------------------------------------------------
 */

/*
 * What the backend side says of a kind of hold: its names in zk_locks,
 * whether waiting for it is an acquire (the wait event ZkLockAcquire
 * rather than ZkLockRequest), and where its node lives below P.
 */
typedef struct ZklockKindInfo
{
	ZklockKind	kind;			/* the kind this entry describes */
	const char *recipe;			/* zk_locks.recipe */
	const char *mode;			/* zk_locks.mode */
	bool		acquire;		/* waiting for it is an acquire */
	const char *node_dir;		/* "leases/" or NULL: directly under P */
	int			token_rank;		/* 0: no fencing token; else zk_lock_token
								 * looks at lower ranks first */
	ZklockDeadlockMode deadlock;	/* what a waiter of this kind waits for
									 * and whom a holder blocks, for the
									 * deadlock detector
									 * (backend/deadlock.c); ZKDL_NONE: no
									 * edges */

	/*
	 * The recipe's rules before an acquire (backend, no lock held): held is
	 * this session's hold of the same lock, or NULL.  It may refuse (ERROR)
	 * or fill in the ask.
	 */
	void		(*before_acquire) (struct ZklockAsk *ask,
								   const struct LocalLockKey *key, int user_off,
								   struct LocalLock *held);

	/*
	 * zk_locks' mode and scope of a slot of this kind, when the kind says
	 * more than its mode and the hold counts (a leader latch member: leader
	 * or member, its 'cluster' or 'session' scope); lease_ok says whether
	 * the worker's lease is good.  Backend, on a copy of the slot taken
	 * under the shared lock; NULL: mode above, scope from the counts.
	 */
	void		(*describe) (const ZklockSlot *slot, bool lease_ok,
							 const char **mode, const char **scope);

	/*
	 * A transaction relied on a slot of this kind (zk_leader_xact, through
	 * zklock_rely_on_state): whether the slot, still of the serial relied
	 * on, ACTIVE and of the current session, still gives what was relied
	 * on at epoch.  Its COMMIT fails with "<relied_on> at <path> was lost
	 * before commit" otherwise.  Backend, without the shared lock, as the
	 * COMMIT check reads the slot: the worker changes epoch with every
	 * change of what is relied on, so a torn read fails the check.
	 */
	bool		(*still_relied_on) (const ZklockSlot *slot, uint64 epoch);
	const char *relied_on;		/* what it gives, for that message */
} ZklockKindInfo;

/*
 * Where the lock engine works for a slot: the mutex-like part of a recipe,
 * as the recipe's lock_target hook describes it.
 */
typedef struct LockTarget
{
	char		base[ZKLOCK_NODE_PATH_SIZE];	/* parent of the lock nodes */
	char	   *node;			/* our node's name */
	char	   *uuid;			/* our protection id */
	const char *lock_name;		/* "lock-", "__READ__", "__WRIT__" */
	bool	   *create_sent;
	bool		rw;				/* read/write lock nodes: sorted by sequence */
	bool		read;			/* decide with the read predicate */
	bool		final;			/* the lock is what the request asks for (its
								 * node gives the fencing token and may be
								 * revocable), not a step of it */
	ZklockGuardRecipe guard;	/* whose lock nodes these are, for the path
								 * guard (core/recipe_guard.c); ZKG_NONE:
								 * the listing is not looked at */
	ZklockGuardRecipe parent_guard;	/* a step under P (base is P/locks):
									 * whose P is, for the path guard, which
									 * looks at P's children once, before
									 * the parents are made; ZKG_NONE: never */
} LockTarget;

/* the handover layer (worker/handover_layer.c), which a lock recipe may opt in to */
typedef struct ZklockHandoverLayer ZklockHandoverLayer;

/*
 * What the worker does for one kind of request (ZklockOp): an entry of a
 * recipe's descriptor.  The generic files call these hooks and test no
 * op.
 */
typedef struct ZklockWorkerOps
{
	ZklockOp	op;				/* the kind of request this entry runs */
	void		(*start) (int idx);	/* first step; caller holds the lock */
	void		(*next) (int idx);	/* a watch fired: look again */
	void		(*resume) (int idx, bool recover);	/* the connection is
													 * back: redo the step */
	/* users of the lock engine */
	void		(*lock_target) (int idx, LockTarget *t);
	void		(*lock_granted) (int idx);	/* the engine got the lock */
	/* the engine waits behind a predecessor, its watch sent (NULL: nothing
	 * to do then) */
	void		(*lock_waits) (int idx);
	/*
	 * the session was lost while the request was active (its nodes went
	 * with it): NULL fails the request; a membership that outlives the
	 * session (a leader latch) joins again in the next one
	 */
	void		(*session_lost) (int idx);
	/*
	 * a node found by its prefix was checked (ours: its Stat, else NULL;
	 * exists: it is there): true when a step of the recipe's own took it
	 * on, false to leave it to the lock engine
	 */
	bool		(*adopted) (int idx, const struct Stat *ours, bool exists);
	/* a held lock was released; its deletes are recorded, not yet sent */
	void		(*released) (int idx);
	/* the handover layer, for a recipe that opts in (NULL: Curator's alone) */
	const ZklockHandoverLayer *handover;
	uint32		flags;			/* ZKW_* */
	const char *state_name;		/* zk_locks.state while it runs, or NULL
								 * for the slot's state */
} ZklockWorkerOps;

/*
 * The request works on nodes an earlier request of its slot made (a double
 * barrier leave works on its membership): pickup keeps them, and the loss
 * of the session fails the request.
 */
#define ZKW_KEEPS_NODES		0x01
/* its main node lives under P/leases */
#define ZKW_NODE_IN_LEASES	0x02
/* its nodes carry no protection prefix (double barrier members) */
#define ZKW_PLAIN_NAMES		0x04

/*
 * A recipe's descriptor: its name, the kinds of request it runs and the
 * kinds of hold it gives.  Each recipe file ends with one, named
 * zklock_recipe_<name>; ZKLOCK_RECIPE_LIST below lists them.
 */
typedef struct ZklockRecipe
{
	const char *name;
	const ZklockWorkerOps *ops; /* one entry per op it runs */
	int			nops;
	const ZklockKindInfo *kinds;	/* one entry per kind it gives (none:
									 * it holds nothing) */
	int			nkinds;
} ZklockRecipe;

/*
 * The descriptors, one line each (recipes/registry.c indexes them).  The
 * commit confirmation is the worker's own request (worker/commit_confirm.c),
 * run the same way.
 */
#define ZKLOCK_RECIPE_LIST(R) \
	R(mutex) \
	R(read_write_lock) \
	R(semaphore) \
	R(barrier) \
	R(double_barrier) \
	R(revoke) \
	R(participants) \
	R(counter) \
	R(leader_latch) \
	R(commit_confirm)

#define ZKLOCK_RECIPE_EXTERN(name) extern const ZklockRecipe zklock_recipe_##name;
ZKLOCK_RECIPE_LIST(ZKLOCK_RECIPE_EXTERN)

/* recipes/registry.c: the lookups of the generic layers */
extern const ZklockWorkerOps *zklock_worker_ops(ZklockOp op);
extern const ZklockKindInfo *zklock_kind_info(ZklockKind kind);
extern const char *zklock_op_state_name(ZklockOp op);
extern void zklock_registry_check(void);


/* ---------------------------------------------------------------------
 * The worker's request record: what a recipe's steps keep beside the
 * slot, in the worker process only
 * ---------------------------------------------------------------------
 */

/* how often a request may find its parent missing before we give up */
#define MAX_NONODE_RETRIES	5
/* how often our own node may vanish under us before we give up */
#define MAX_LOST_RETRIES	10
/*
 * Process-local state of one request slot (zklock_reqs[i], beside
 * zklock_shared->slots[i]).  What it waits for (wait, a ZklockWaitState of
 * core/handover_rules.h) is set only with zklock_req_set_wait, which
 * asserts the move is one of zklock_wait_move_ok's.
 */
typedef struct WorkerReq
{
	uint32		serial;			/* slot serial this belongs to, 0 = none */
	int			inflight;		/* async calls whose completion is due (an
								 * add in a counter fold has none: the
								 * fold's calls are the fold's) */
	ZklockWaitState wait;		/* what it waits for (zklock_req_set_wait) */
	struct						/* beside each of the slot's nodes */
	{
		bool		create_sent;	/* a create of it may have reached the
									 * server */
		bool		doubt;		/* a create of it was in doubt: a late one
								 * may make a second node with its prefix
								 * (worker/ghosts.c) */
	}			nodes[ZKN_COUNT];
	bool		need_parents;	/* create the parents before the node */
	bool		parent_guarded;	/* lock engine: P passed the path guard
								 * (LockTarget.parent_guard) */
	char		pred[ZKLOCK_NODE_NAME_SIZE];	/* lock engine: the node our
												 * latest listing made us
												 * wait on ("": none) */
	bool		pred_last;		/* pred is the only node keeping us out */
	struct						/* the handover layer's own
								 * (worker/handover_layer.c) */
	{
		int			owner;		/* waiting locally: the slot owning pred */
		uint32		owner_serial;	/* ... and its serial then */
	}			local;
	bool		revoke_armed;	/* a revocable lock: the getData watch on our
								 * node is registered (or on its way) */
	int			skip_lists;		/* pipelined listings to ignore */
	bool		list_piped;		/* lock engine: the listing went out right
								 * behind the create being answered */
	uint64		create_no;		/* lock engine: number of the create sent
								 * last (see released_readers) */
	bool		seq_proven;		/* lock engine: the last create's sequence
								 * number proved no foreign create since the
								 * path was listed (worker/handover_numbering.c) */
	int			nonode_retries;
	int			lost_retries;
	char		adopt_name[ZKLOCK_NODE_NAME_SIZE];	/* node found by prefix,
													 * being checked */
	/* per recipe: a request uses only the part of its own op */
	union
	{
		struct
		{
			bool		ready_seen; /* P/ready existed */
			char		leave_watch[ZKLOCK_NODE_NAME_SIZE]; /* leave: member to
															 * watch once ours is
															 * deleted ("": none,
															 * we are done) */
		}			dbarrier;
		struct
		{
			int64		written;	/* holders' nodes written */
		}			revoke;
		struct
		{
			bool		guarded;	/* a wait: P's children were looked at */
		}			barrier;
		struct
		{
			int64		pending;	/* the value being written (an add:
									 * its own result) */
			struct CounterFold *fold;	/* an add: the fold it waits in
										 * (recipes/counter_fold.c), or
										 * NULL */
			bool		guarded;	/* P's children were looked at */
		}			counter;
		struct					/* the listing and the data, in order */
		{
			char		dir[ZKLOCK_NODE_PATH_SIZE];
			int			kind;
			int			n;
			int			done;
			char	  **names;
			char	  **data;
			int		   *len;
		}			participants;
	}			rcp;
	MemoryContext cxt;			/* the request's own allocations
								 * (zklock_req_memory), or NULL */
} WorkerReq;

/* Is the request waiting for the connection (either parked state)? */
static inline bool
zklock_req_parked(const WorkerReq *req)
{
	return req->wait == ZKWS_PARKED || req->wait == ZKWS_PARKED_RECOVER;
}

/* the worker's handle, whether it is connected, and the request records
 * beside zklock_shared->slots (worker/event_loop.c) */
extern zhandle_t *zklock_zh;
extern bool zklock_connected;
extern WorkerReq *zklock_reqs;

/* ---------------------------------------------------------------------
 * Request calls (worker side): what a recipe's steps may call, by the
 * file that offers it.  A completion begins with zklock_completion_begin
 * (or _create_begin, _listing_begin), which takes the lock; every call
 * below expects the caller to hold it.
 * ---------------------------------------------------------------------
 */

/* worker/lock_engine.c: the steps lock recipes name in their descriptors */
extern void zklock_lk_resume(int idx, bool recover);

/* worker/zkio.c */
extern void zklock_create_containers(const char *path, bool include_self);
extern bool zklock_new_uuid(char *out);
extern struct ACL_vector *zklock_node_acl(void);
extern void zklock_node_path(ZklockSlot *slot, const char *name, char *buf,
							 size_t len);
extern const void *zklock_slot_tag(int idx);
extern int zklock_tag_current(const void *tag);
extern bool zklock_rc_refused(int rc);
extern bool zklock_rc_retryable(int rc);
extern bool zklock_rc_session_gone(int rc);

/* worker/deletes.c */
extern bool zklock_delete_add(const char *path, const char *prefix,
							  bool persistent, uint64 gen, int64 czxid,
							  int64 ctime);
extern void zklock_queue_delete(const char *path, const char *prefix);

/* worker/ghosts.c */
extern void zklock_delete_ghosts(const char *base, char *const *children,
								 int n);
extern void zklock_note_doubt(int idx, bool aux);
extern void zklock_sweep_doubted(int idx, bool aux_only);

/* worker/request.c */
extern void zklock_call_failed(int idx, int rc, const char *what);
extern void zklock_call_sent(int idx, int rc);
extern int zklock_completion_begin(const void *data);
extern int zklock_create_begin(int rc, const char *value, const void *data);
extern void zklock_create_took(int idx, const char *value, char *node,
							   Size node_size, bool *create_sent);
extern bool zklock_create_failed(int idx, int rc, char *uuid, bool *create_sent,
								 bool fixed_name, bool listing_follows,
								 const char *what);
extern void zklock_give_up_try(int idx);
extern int zklock_listing_begin(const void *data);
extern void zklock_grant(int idx);
extern void zklock_park(int idx, bool recover);
extern void zklock_req_clear_nodes(ZklockSlot *slot);
extern void zklock_req_fail(int idx, int sqlerrcode, const char *fmt,...) pg_attribute_printf(3, 4);
extern void zklock_req_finish(int idx, ZklockResult result, int64 value);
extern MemoryContext zklock_req_memory(int idx);
extern void zklock_req_set_wait(int idx, ZklockWaitState to);
extern bool zklock_retry_with_parents(int idx);
extern bool zklock_send_exists_watch(int idx, const char *path,
									 stat_completion_t done, bool recover);
extern void zklock_send_listing(int idx, const char *path,
								strings_completion_t done, bool watch,
								bool recover);
extern bool zklock_settle_cancel(int idx);
extern void zklock_start_request(int idx);
extern void zklock_step_watcher(zhandle_t *zzh, int type, int state,
								const char *path, void *ctx);

/* worker/lock_engine.c */
extern void zklock_adopt_check(int idx, const char *base, const char *name);
extern void zklock_lk_create(int idx);
extern void zklock_lk_list(int idx);
extern void zklock_lk_target_own(int idx, LockTarget *t, const char *lock_name,
								 bool rw, bool read);

/* worker/handover_layer.c */
extern const ZklockHandoverLayer zklock_handover_layer;
extern void zklock_lk_released(int idx);

/* worker/handover.c */
extern int	zklock_handover_choose(const char *base, const char *node,
								   bool held_mutex);

/* ---------------------------------------------------------------------
 * SQL side calls: what a recipe's SQL functions may use, by the file that
 * offers it.  Each SQL function calls zklock_backend_setup() first.
 * ---------------------------------------------------------------------
 */

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

/* What a backend asks the worker for */
typedef struct ZklockAsk
{
	ZklockOp	op;
	ZklockKind	kind;
	bool		xact;
	bool		try_only;
	bool		answer_now;		/* waits for no other client (a read, a
								 * counter read, a barrier's set or removal, a
								 * revocation): fails at once while the
								 * worker has no provable session */
	bool		revocable;
	int64		timeout_ms;		/* -1: no timeout */
	const char *downgrade_seq;
	uint32		result_dsm;		/* participants: where the answer goes */
	uint32		result_size;
	const char *data;			/* slot data instead of the node identity */
	ZklockRecipeArgs args;		/* the recipe's own (copied into the slot) */
} ZklockAsk;

/* How a wait ended without an error */
typedef enum WaitOutcome
{
	WAIT_GRANTED,				/* the lock is ours; the slot stays */
	WAIT_NOT_GRANTED,			/* timeout or a failed try; slot gone */
	WAIT_DONE					/* a request without a lock finished */
} WaitOutcome;

/* backend/holds.c */
extern HTAB *zklock_local_locks;	/* LocalLockKey -> LocalLock */
extern LocalLock *zklock_add_granted_hold(const LocalLockKey *key, int idx,
										  uint32 serial, bool xact);
extern void zklock_backend_setup(void);
extern LocalLock *zklock_find_hold(const LocalLockKey *key, int user_off);
extern bool zklock_release_key(const LocalLockKey *key, int user_off);
extern int zklock_release_session_holds(ZklockKind kind, const char *path);

/* backend/xact.c */
extern const char *zklock_xact_lost_lock(void);
extern void zklock_rely_on_state(ZklockKind kind, int idx, uint32 serial,
								 uint64 epoch, const char *user_path);
extern bool zklock_xact_relied_state(int *idx, uint32 *serial, uint64 *epoch);
extern void zklock_drop_hold(LocalLock *ll, bool xact);

/* backend/cancel_on_loss.c */
extern void zklock_loss_watch_update(void);

/* backend/acquire.c */
extern bool zklock_acquire_lock(ZklockAsk *ask, text *path);
extern int64 zklock_path_request(FunctionCallInfo fcinfo, ZklockOp op,
								 ZklockKind kind, int64 timeout_ms,
								 bool answer_now, bool *timed_out);
extern bool zklock_release_lock(ZklockKind kind, text *path);
extern bool zklock_request_lock(ZklockAsk *ask, const LocalLockKey *key,
								int user_off, int *idx, uint32 *serial);

/* backend/channel.c */
extern const char *zklock_down_state_name(ZklockConnState cs);
extern bool zklock_down_too_long(ZklockConnState cs, TimestampTz now,
								 TimestampTz *down_since);
extern int64 zklock_remaining_ms(int64 timeout_ms, TimestampTz start);
extern int zklock_claim_slot(const ZklockAsk *ask, const LocalLockKey *key,
							 int user_off, uint32 *serial);
extern void zklock_init_ask(ZklockAsk *ask, ZklockOp op, ZklockKind kind,
							int64 timeout_ms, bool xact);
extern int64 zklock_run_request(ZklockAsk *ask, const LocalLockKey *key,
								int user_off, uint32 dsm, uint32 dsm_size,
								bool *timed_out, uint32 *needed);
extern WaitOutcome zklock_wait_for_request(int idx, uint32 serial,
										   int64 timeout_ms,
										   const char *user_path, int64 *value,
										   uint32 *needed);

/* backend/args.c */
extern bool zklock_bool_arg(FunctionCallInfo fcinfo, int argno);
extern int32 zklock_count_arg(FunctionCallInfo fcinfo, int argno,
							  const char *name);
extern void zklock_make_lock_key(text *path_text, ZklockKind kind,
								 LocalLockKey *key, int *user_off);
extern text *zklock_path_arg(FunctionCallInfo fcinfo, int argno);
extern int64 zklock_timeout_arg(FunctionCallInfo fcinfo, int argno);
extern char *zklock_text_from_utf8(const char *p, int len);
extern Datum zklock_utf8_text_datum(const char *s);

#endif							/* ZKLOCK_RECIPE_H */

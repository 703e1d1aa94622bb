/*-------------------------------------------------------------------------
 *
 * common/recipe_fields.h
 *	  The recipes' fields of a request slot: which algorithm the worker
 *	  runs (ZklockOp), what the slot is to the user (ZklockKind), the
 *	  request's step (ZklockPhase), and the per-recipe unions of its
 *	  arguments (ZklockRecipeArgs), its shared state (ZklockRecipeState)
 *	  and its worker-only state (ZklockRecipeWork, the worker's request
 *	  record's rcp); and the list of the recipes' descriptors
 *	  (ZKLOCK_RECIPE_LIST).  A new recipe adds its line to the list, its
 *	  op, its kind and its members here.  Its reader is
 *	  the shared-memory table (common/shmem.h, whose ZklockSlot holds
 *	  them), which includes it; a file includes common/shmem.h, not this
 *	  header.
 *
 *	  They belong to the recipe contract (recipes/recipe.h) but live here
 *	  because the slot embeds them by value and common/ may not include
 *	  recipes/ (src/README, Layers): the contract's descriptor is the
 *	  only thing that gives an op or a kind a meaning.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZKLOCK_RECIPE_FIELDS_H
#define ZKLOCK_RECIPE_FIELDS_H

/*
 * The recipes, one line each: R(name) names the descriptor
 * zklock_recipe_<name> that ends the recipe's file.  recipes/recipe.h
 * declares them from this list and recipes/registry.c indexes them; the
 * list is only names, so this header needs nothing of recipes/.  The commit
 * confirmation is the worker's own request (worker/commit_confirm.c), run
 * the same way.
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

/* Which algorithm the worker runs for a slot */
typedef enum ZklockOp
{
	ZKOP_MUTEX = 1,				/* InterProcessMutex */
	ZKOP_READ,					/* read side of InterProcessReadWriteLock */
	ZKOP_WRITE,					/* write side of InterProcessReadWriteLock */
	ZKOP_LEASE,					/* one lease of InterProcessSemaphoreV2 */
	ZKOP_BARRIER_SET,			/* DistributedBarrier.setBarrier */
	ZKOP_BARRIER_REMOVE,		/* DistributedBarrier.removeBarrier */
	ZKOP_BARRIER_WAIT,			/* DistributedBarrier.waitOnBarrier */
	ZKOP_DBARRIER_ENTER,		/* DistributedDoubleBarrier.enter */
	ZKOP_DBARRIER_LEAVE,		/* DistributedDoubleBarrier.leave */
	ZKOP_REVOKE,				/* Revoker.attemptRevoke on every holder */
	ZKOP_PARTICIPANTS,			/* list nodes and their data */
	ZKOP_COUNTER,				/* SharedCount / DistributedAtomicLong */
	ZKOP_LATCH,					/* a LeaderLatch membership */
	ZKOP_CONFIRM				/* does a held node (data: its path below
								 * path) still exist in our session? */
} ZklockOp;

#define ZKOP_LAST	ZKOP_CONFIRM

/* What a counter request does (ZKOP_COUNTER) */
typedef enum ZklockCounterAction
{
	ZKC_COUNT_GET = 1,			/* SharedCount: read, create with the seed */
	ZKC_COUNT_SET,				/* SharedCount.setCount */
	ZKC_COUNT_TRY_SET,			/* SharedCount.trySetCount at a version */
	ZKC_LONG_GET,				/* DistributedAtomicLong.get */
	ZKC_LONG_ADD,				/* DistributedAtomicLong.add */
	ZKC_LONG_CAS,				/* DistributedAtomicLong.compareAndSet */
	ZKC_LONG_SET				/* DistributedAtomicLong.forceSet */
} ZklockCounterAction;

/* A counter request's arguments (the ask's and the slot's) */
typedef struct ZklockCounterArgs
{
	ZklockCounterAction action;
	int64		a;				/* seed, value, delta or expected */
	int64		b;				/* compare_and_set: the new value */
	int32		version;		/* try_set: the version read */
	/*
	 * a write's fence by leadership: the election member the asking
	 * transaction relies on (zk_leader_xact) and its leadership epoch then;
	 * lead_slot -1: none
	 */
	int32		lead_slot;
	uint32		lead_serial;
	uint64		lead_epoch;
} ZklockCounterArgs;

/*
 * A request's own arguments, by recipe: its SQL function fills them in the
 * ask, the claim copies them whole into the slot, its worker steps read
 * them.  A new recipe adds its member here and nowhere else.
 */
typedef union ZklockRecipeArgs
{
	struct
	{
		int32		max_leases; /* semaphore size */
	}			lease;
	struct
	{
		int32		member_qty; /* members to wait for */
	}			dbarrier;
	ZklockCounterArgs counter;
	struct
	{
		bool		cluster;	/* scope 'cluster': owned by no backend */
	}			latch;
} ZklockRecipeArgs;

/*
 * A request's own state in the slot, by recipe, beside its arguments
 * (ZklockRecipeArgs).  Only the member of the slot's recipe is valid:
 * latch for ZKOP_LATCH, dbarrier for ZKOP_DBARRIER_ENTER and _LEAVE (a
 * membership keeps it from its enter to its leave), counter for
 * ZKOP_COUNTER; for any other slot the bytes are another recipe's, so
 * code that reads a member of a slot it did not pick by its op tests the
 * op first (or a serial it took from a slot of that op).  The claim
 * (backend/channel.c) zeroes the whole union.  A new recipe adds its
 * member here.
 */
typedef union ZklockRecipeState
{
	struct						/* a leader latch member's state */
	{
		bool		member;		/* our node is in the election (the first
								 * listing after its create was decided) */
		bool		leader;		/* it is first and proven ours in the
								 * current session (exists: ephemeralOwner) */
		bool		joined;		/* member once: its join was answered, and
								 * the path guard no longer refuses it */
		uint64		epoch;		/* bumped whenever leader changes */
	}			latch;
	struct						/* the double barrier's state */
	{
		bool		own_delete_sent;	/* a delete of our member node was
										 * sent (its reply may be lost) */
		int64		ready_czxid;	/* creation zxid of the P/ready its enter
									 * passed, 0 if unknown; the leave
									 * deletes only that one */
		int64		ready_ctime;	/* ... and its creation time */
	}			dbarrier;
	struct						/* a counter request's state */
	{
		bool		write_sent; /* a setData or create of it left and its
								 * answer has not come: it may have been
								 * applied.  Set before it is sent, so a
								 * worker that takes the request over
								 * knows (recipes/counter.c) */
	}			counter;
} ZklockRecipeState;

/*
 * A request's worker-only state, by recipe (WorkerReq.rcp,
 * recipes/recipe_worker.h): what its steps keep in the worker process
 * beside the slot.  Only the member of the request's op is valid.  A new
 * recipe adds its member here.
 */
typedef union ZklockRecipeWork
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
} ZklockRecipeWork;

/* What a slot is to the user: zk_locks' recipe column, the local key */
typedef enum ZklockKind
{
	ZKK_NONE = 0,				/* transient request */
	ZKK_MUTEX,
	ZKK_READ,
	ZKK_WRITE,
	ZKK_SEMAPHORE_MUTEX,
	ZKK_SEMAPHORE,
	ZKK_DOUBLE_BARRIER,
	ZKK_BARRIER,				/* a barrier waiter */
	ZKK_LATCH					/* a leader latch member */
} ZklockKind;

#define ZKK_LAST	ZKK_LATCH

/*
 * Steps of a request.  Every request begins in ZKP_START; a recipe with
 * more than one step moves on: a lease takes the P/locks mutex in its first
 * step, then waits for a lease (ZKP_LEASE); a double barrier leave that saw
 * every member gone has only the delete of P/ready left (ZKP_READY).
 */
typedef enum ZklockPhase
{
	ZKP_START = 0,
	ZKP_LEASE,
	ZKP_READY
} ZklockPhase;

/* What a participants answer lists: P's children, or P/leases' */
#define ZKLOCK_PARTICIPANTS_LOCK	1
#define ZKLOCK_PARTICIPANTS_LEASES	2

#endif							/* ZKLOCK_RECIPE_FIELDS_H */

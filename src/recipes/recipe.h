/*-------------------------------------------------------------------------
 *
 * recipes/recipe.h
 *	  The recipe contract: the descriptor by which the generic layers reach
 *	  a recipe, and the registry's lookups.  What each side offers recipes
 *	  is a header of its own: recipes/recipe_worker.h (the worker's request
 *	  record and request calls; it includes the ZooKeeper client's header)
 *	  and recipes/recipe_sql.h (the SQL side's types and calls).  A recipe
 *	  file includes postgres.h, PostgreSQL's own headers, this header, the
 *	  side headers it uses, those of the others it reads (zklock.h,
 *	  common/shmem.h, common/settings.h, compat.h, core/) and a header its
 *	  own files share (counter.h), nothing else of ours.
 *
 * A recipe is one file (more when it is long: the counter's are counter.c,
 * counter_fold.c, counter_fence.c, which share counter.h, and
 * counter_sql.c) that ends with its descriptor,
 *
 *		const ZklockRecipe zklock_recipe_<name> = { ... };
 *
 * listed by one line of ZKLOCK_RECIPE_LIST (common/recipe_fields.h), which
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
 * The ops and kinds (ZklockOp, ZklockKind) and the recipes' unions
 * (ZklockRecipeArgs, ZklockRecipeState, ZklockRecipeWork) are declared in
 * common/recipe_fields.h, not here: the shared slot (common/shmem.h)
 * embeds the first two, and common/ may not include recipes/.
 *
 * State a recipe keeps lives in three places, each a per-recipe member
 * the recipe owns: its arguments in ZklockRecipeArgs (the ask's and the
 * slot's), its shared state in ZklockRecipeState (the slot's rstate: only
 * the member of the slot's op is valid), its worker-only state in
 * ZklockRecipeWork (the worker's request record's rcp,
 * recipes/recipe_worker.h), all three in common/recipe_fields.h.  Its
 * nodes are the slot's node record (ZklockSlot.nodes: ZKN_MAIN, and
 * ZKN_LEASE_LOCK for a lease).
 *
 * Both sides include this header (worker/worker.h and backend/backend.h):
 * they read the descriptors and call the lookups.  The contract grows (a
 * hook, a flag, a call offered) only when a recipe needs what no recipe
 * needed before; then the generic layers change too.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZKLOCK_RECIPE_H
#define ZKLOCK_RECIPE_H

#include "zklock.h"
#include "core/deadlock_rules.h"
#include "core/recipe_guard.h"
#include "common/shmem.h"

struct Stat;					/* the ZooKeeper client's, for the adopted hook */
struct ZklockAsk;
struct BackendHoldKey;
struct BackendHold;

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
								   const struct BackendHoldKey *key, int user_off,
								   struct BackendHold *held);

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

/*
 * the handover layer (worker/locks/handover_layer.c), which a lock recipe
 * may opt in to
 */
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
	/*
	 * a request of this op given up while ACTIVE (backend/channel.c, the
	 * lock held exclusively): whether a write it sent stands whatever the
	 * caller does, so the caller must not call it never sent (a counter's,
	 * recipes/counter_fence.c); NULL: it writes nothing of the kind
	 */
	bool		(*write_stands) (const ZklockSlot *slot);
	/*
	 * an ACTIVE slot of this op is a standing membership, no request
	 * waiting for its answer (a leader latch member once its place is
	 * decided): zk_status() counts it in neither requests_queued nor
	 * requests_held.  Backend, the lock held shared; NULL: never
	 */
	bool		(*standing) (const ZklockSlot *slot);
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
 * its final lock, not a read/write one, may be kept idle by the lock cache
 * after its release and taken by a later request (worker/locks/lock_cache.c)
 */
#define ZKW_CACHEABLE		0x08
/*
 * its held lock is a write lock a read request of the same session may
 * downgrade from (worker/locks/lock_engine.c, lk_downgrade_allowed)
 */
#define ZKW_DOWNGRADE_FROM	0x10

/*
 * A recipe's descriptor: its name, the kinds of request it runs and the
 * kinds of hold it gives.  Each recipe file ends with one, named
 * zklock_recipe_<name>; ZKLOCK_RECIPE_LIST lists them.
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
 * The descriptors, declared from ZKLOCK_RECIPE_LIST (common/recipe_fields.h,
 * beside the ops and kinds a new recipe adds in the same edit);
 * recipes/registry.c indexes them.
 */
#define ZKLOCK_RECIPE_EXTERN(name) extern const ZklockRecipe zklock_recipe_##name;
ZKLOCK_RECIPE_LIST(ZKLOCK_RECIPE_EXTERN)

/* recipes/registry.c: the lookups of the generic layers */
extern const ZklockWorkerOps *zklock_worker_ops(ZklockOp op);
extern const ZklockKindInfo *zklock_kind_info(ZklockKind kind);
extern const char *zklock_op_state_name(ZklockOp op);
extern void zklock_registry_check(void);

#endif							/* ZKLOCK_RECIPE_H */

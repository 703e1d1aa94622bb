/*-------------------------------------------------------------------------
 *
 * recipes/recipe.h
 *	  The recipe contract: everything a recipe may use of zklock besides
 *	  zklock.h, and the descriptor by which the generic layers reach it.
 *
 * A recipe is one file (two when its SQL side is long: counter.c and
 * counter_sql.c) that ends with its descriptor,
 *
 *		const ZklockRecipe zklock_recipe_<name> = { ... };
 *
 * and one line in recipes/registry.c's list.  The descriptor names the
 * kinds of request the recipe runs (ZklockWorkerOps: its worker steps and
 * flags, one entry per ZklockOp) and the kinds of hold it gives
 * (ZklockKindInfo: what the backend side says of them, and its
 * before_acquire rule, one entry per ZklockKind).  Its steps and rules
 * are static in its file: the generic layers reach them only through the
 * descriptor, read from the registry with zklock_worker_ops(op) and
 * zklock_kind_info(kind), and test no op or kind of their own.
 *
 * The descriptor
 *	  ZklockKindInfo, ZklockWorkerOps (with LockTarget, what a user of the
 *	  lock engine fills in, and the ZKW_ flags), ZklockRecipe, and the
 *	  registry's lookups.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZKLOCK_RECIPE_H
#define ZKLOCK_RECIPE_H

#include "zklock.h"

struct Stat;
struct ZklockAsk;
struct LocalLockKey;
struct LocalLock;

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

	/*
	 * The recipe's rules before an acquire (backend, no lock held): held is
	 * this session's hold of the same lock, or NULL.  It may refuse (ERROR)
	 * or fill in the ask.
	 */
	void		(*before_acquire) (struct ZklockAsk *ask,
								   const struct LocalLockKey *key, int user_off,
								   struct LocalLock *held);
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
} LockTarget;

/* the local layer (worker/handover.c), which a lock recipe may opt in to */
typedef struct ZklockLocalLayer ZklockLocalLayer;

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
	/* the local layer, for a recipe that opts in (NULL: Curator's alone) */
	const ZklockLocalLayer *local;
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
 * zklock_recipe_<name>; recipes/registry.c lists them.
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

/* recipes/registry.c: the lookups of the generic layers */
extern const ZklockWorkerOps *zklock_worker_ops(ZklockOp op);
extern const ZklockKindInfo *zklock_kind_info(ZklockKind kind);
extern const char *zklock_op_state_name(ZklockOp op);
extern void zklock_registry_check(void);

#endif							/* ZKLOCK_RECIPE_H */

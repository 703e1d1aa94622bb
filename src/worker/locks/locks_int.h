/*-------------------------------------------------------------------------
 *
 * worker/locks/locks_int.h
 *	  What the files of the lock engine call of each other and no other
 *	  file of the worker calls: the handover layer's table as the engine
 *	  calls it, the walk of the path index, the engine's grants, the
 *	  cache's take and keep, local handover (handover.c) and what a
 *	  listing taught (handover_numbering.c).  Only the files of
 *	  worker/locks/ include it (test/callgraph.pl checks that); the rest
 *	  of the worker reads locks.h.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZKLOCK_WORKER_LOCKS_INT_H
#define ZKLOCK_WORKER_LOCKS_INT_H

#include "worker/locks/locks.h"

/* most readers one release hands the lock to at once */
#define ZKLOCK_HANDOVER_MAX	64

/*
 * The handover layer as the lock engine calls it
 * (worker/locks/handover_layer.c defines zklock_handover_layer).  A recipe
 * opts in by naming it in its ops entry (.handover); without it the lock
 * engine runs Curator's protocol alone, round trip for round trip.  A new
 * recipe is off until it opts in.
 */
struct ZklockHandoverLayer
{
	/* may the create of idx's node go without the listing behind it? */
	bool		(*create_alone) (int idx, const LockTarget *t);
	/* a create sent alone took: place the node from what this worker knows */
	void		(*placed) (int idx);
	/* a listing put idx behind pred: wait without a watch (true: it does) */
	bool		(*wait_behind) (int idx, const LockTarget *t, const char *pred,
								int blockers);
	/* a read lock request has its answer: the readers following it share it */
	void		(*settle_followers) (int idx, bool granted);
	/* a node of this worker is going away: its local waiters look again */
	void		(*node_gone) (const char *path);
	/* a listing of base answered: what the next creates may skip */
	void		(*listed) (const char *base, const struct Stat *stat,
						   char **children, int n);
	/* a create of ours under base took: does its number prove it alone? */
	bool		(*created) (const char *base, const char *node);
	/* a create under base did what the numbering does not count */
	void		(*forget) (const char *base);
	/* may idx's create go alone, its number to tell whether it is first? */
	bool		(*may_skip) (int idx, const LockTarget *t);
};

/* worker/locks/path_index.c: the walk of one base's slots */
extern int	zklock_pathidx_first(const char *base);
extern int	zklock_pathidx_next(int i);

/* worker/locks/lock_engine.c */
extern uint64 zklock_lk_creates_sent;
extern void zklock_lk_granted(int idx);

/* worker/locks/lock_cache.c */
extern bool zklock_cache_take(int idx, const LockTarget *t);
extern void zklock_cache_keep(int idx, const LockTarget *t, int handed_over);

/* worker/locks/handover.c: local handover, its steps and safety net */
extern void zklock_handover_node_gone(int idx, const LockTarget *t);
extern void zklock_handover_safety_net(void);
extern void zklock_handover_guard_answer(const char *path, const char *guard,
										 bool there);

/* worker/locks/handover_numbering.c: what a listing taught */
extern void zklock_numbering_listed(const char *base, const struct Stat *stat,
								char **children, int n);
extern bool zklock_numbering_may_skip(int idx, const LockTarget *t);
extern bool zklock_numbering_created(const char *base, const char *node);
extern void zklock_numbering_forget(const char *base);
extern bool zklock_numbering_first(int idx, const LockTarget *t, bool proven);

#endif							/* ZKLOCK_WORKER_LOCKS_INT_H */

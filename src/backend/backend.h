/*-------------------------------------------------------------------------
 *
 * backend/backend.h
 *	  What the backend side of zklock shares between its files beyond what
 *	  the recipes may use.  The registry of held locks (BackendHold), what a
 *	  backend asks the worker for (ZklockAsk) and the request API every
 *	  SQL function calls are what the SQL side offers recipes,
 *	  recipes/recipe_sql.h; it and the descriptor, recipes/recipe.h, are
 *	  included here.  Nothing here reaches the ZooKeeper client's header.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZKLOCK_BACKEND_INT_H
#define ZKLOCK_BACKEND_INT_H

#include "fmgr.h"
#include "nodes/pg_list.h"
#include "utils/hsearch.h"

#include "common/shmem.h"
#include "recipes/recipe.h"
#include "recipes/recipe_sql.h"

/* One transaction-level hold, remembered for commit, abort and savepoints */
typedef struct XactHold
{
	BackendHoldKey key;
	SubTransactionId subid;
	bool		due;			/* its (sub)transaction ended: release it once
								 * PostgreSQL has released its own locks */
} XactHold;

/*
 * Is a lock of ours marked lost in shared memory (its session expired)?
 * No lock taken: the worker only ever moves a slot of ours from HELD to
 * LOST, and a stalled worker holding the lock must not hang a COMMIT.
 */
static inline bool
zklock_hold_lost(const BackendHold *ll)
{
	volatile ZklockSlot *slot = &zklock_shared->slots[ll->slot];

	return slot->serial != ll->serial || slot->state != ZKS_HELD;
}

/* backend/holds.c */
extern BackendHold *zklock_add_hold(const BackendHoldKey *key, int idx,
								  uint32 serial, bool xact);
extern void zklock_notice_lost_locks(void);

/* backend/xact.c */
extern void zklock_xact_register_callbacks(void);
extern void zklock_xact_note_hold(const BackendHoldKey *key, bool xact);
extern void zklock_xact_note_lost(BackendHold *ll);
extern void zklock_xact_release_due(void);
extern void zklock_publish_counts(BackendHold *ll);

/* backend/deadlock.c */
typedef struct ZklockDeadlock ZklockDeadlock;
extern ZklockDeadlock *zklock_deadlock_search(int idx, uint32 serial);
extern bool zklock_deadlock_stands(const ZklockDeadlock *dl);
extern void zklock_deadlock_report(const ZklockDeadlock *dl);
extern void zklock_deadlock_free(ZklockDeadlock *dl);
extern void zklock_local_blockers(const ZklockSlot *copy, int n,
								  int **blockers, int *counts);

/* backend/channel.c */
extern void zklock_build_node_data(void);
extern TimestampTz zklock_deadline_after(TimestampTz start, int64 timeout_ms);

#endif							/* ZKLOCK_BACKEND_INT_H */

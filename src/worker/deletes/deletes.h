/*-------------------------------------------------------------------------
 *
 * worker/deletes/deletes.h
 *	  The pending deletes as the rest of the worker calls them: the
 *	  entries of the shared pending-delete table (delete_table.c) and
 *	  their sending until the server confirms (deletes.c).  What the
 *	  recipes call of the module (zklock_deletes_add, zklock_deletes_queue,
 *	  the ghosts of ghosts.c) is in recipes/recipe_worker.h; what the
 *	  module's files call of each other is in deletes_int.h.
 *
 *	  Interface: DeleteProgress, zklock_dtable_progress, and the
 *	  functions below.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZKLOCK_WORKER_DELETES_H
#define ZKLOCK_WORKER_DELETES_H

#include "worker/worker.h"

/*
 * The worker's progress on an entry of the shared pending-delete table
 * (zklock_deletes), process-local: whether a call for it is on its way and
 * when it may be tried again.  It belongs to the entry's serial; a
 * restarted worker starts with none and so sends every entry again.
 */
typedef struct DeleteProgress
{
	uint32		serial;			/* entry serial this belongs to */
	bool		inflight;		/* a delete or listing is on its way */
	bool		logged;			/* a refusal by the server was logged */
	int			attempts;		/* refusals by the server so far */
	ZklockMonoTime retry_at;	/* not before this time (monotonic); 0: at
								 * once */
	bool		batched;		/* in the queue of deletes sent together at
								 * the end of the pass (worker/batch.c);
								 * inflight is set meanwhile */
} DeleteProgress;

/*
 * The process-local state beside each entry of the pending-delete table
 * (defined in worker/deletes/delete_table.c, allocated by
 * worker/event_loop.c).
 */
extern DeleteProgress *zklock_dtable_progress;	/* beside zklock_deletes */

/* worker/deletes/delete_table.c: the entries of the pending-delete table */
extern bool zklock_dtable_pending(const char *path);
extern bool zklock_dtable_pending_under(const char *path);
extern bool zklock_dtable_guarded_by(const char *base, const char *node);
extern bool zklock_dtable_have_room(int n);
extern void zklock_dtable_drop_session(void);
extern void zklock_dtable_persist(void);

/* worker/deletes/deletes.c: sending them, until the server confirms */
extern int	zklock_deletes_ready(void);
extern int	zklock_deletes_take_ready(int *idx, uint32 *serial, int max);
extern void zklock_deletes_send_alone(int i);
extern void zklock_deletes_batch_answer(int i, uint32 serial, int rc);
extern bool zklock_deletes_guard(const char *path, const char *guard);
extern bool zklock_deletes_due(ZklockMonoTime now);
extern void zklock_deletes_load(void);
extern void zklock_deletes_send(void);

#endif							/* ZKLOCK_WORKER_DELETES_H */

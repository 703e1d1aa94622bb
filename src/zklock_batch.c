/*-------------------------------------------------------------------------
 *
 * zklock_batch.c
 *	  Deletes sent together: the plain deletes by name that became due in
 *	  one pass of the worker's event loop leave at its end as one zookeeper
 *	  multi (up to ZKLOCK_DELETE_BATCH_MAX ops), or alone when only one is
 *	  there.  A multi is one request for the server: one proposal, one log
 *	  entry, one reply, where each delete alone costs all three.
 *
 *	  Nothing waits for more deletes: a pass batches what it produced.  A
 *	  delete queued this way has not left yet, so whatever must reach the
 *	  server behind it (the exists of a local handover, the watch a
 *	  listing's decision sends after deleting a ghost, a request that
 *	  starts or resumes: pickup and resume) calls zklock_batch_flush first;
 *	  everything else is at worst conservative (a node about to go is seen
 *	  a little longer, and its watch fires).  src/README, "Batched
 *	  deletes".
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/memutils.h"

#include "zklock.h"
#include "zklock_worker_int.h"

/*
 * One multi on its way: its ops and the results the client fills in, and
 * for each op the pending-delete entry and its serial when sent.  Worker
 * memory, freed by the completion.
 */
typedef struct DeleteBatch
{
	int			count;
	int			idx[ZKLOCK_DELETE_BATCH_MAX];
	uint32		serial[ZKLOCK_DELETE_BATCH_MAX];
	zoo_op_t	ops[ZKLOCK_DELETE_BATCH_MAX];
	zoo_op_result_t results[ZKLOCK_DELETE_BATCH_MAX];
	char		paths[ZKLOCK_DELETE_BATCH_MAX][ZKLOCK_NODE_PATH_SIZE];
} DeleteBatch;

static void batch_done(int rc, const void *data);

/*
 * Send every queued delete now: in multis of up to ZKLOCK_DELETE_BATCH_MAX
 * ops, a lone one as a plain delete.  Not connected, or the client refuses
 * the multi: each entry is tried again like a delete whose send failed.
 * Caller holds the lock.
 */
void
zklock_batch_flush(void)
{
	int			idx[ZKLOCK_DELETE_BATCH_MAX];
	uint32		serial[ZKLOCK_DELETE_BATCH_MAX];
	int			n;

	while ((n = zklock_deletes_take_ready(idx, serial, ZKLOCK_DELETE_BATCH_MAX)) > 0)
	{
		DeleteBatch *b;
		int			rc;
		int			k;

		if (zklock_zh == NULL || !zklock_connected)
		{
			for (k = 0; k < n; k++)
				zklock_delete_batch_answer(idx[k], serial[k], ZCONNECTIONLOSS);
			continue;
		}
		if (n == 1)
		{
			zklock_delete_send_alone(idx[0]);
			continue;
		}
		b = MemoryContextAllocZero(TopMemoryContext, sizeof(DeleteBatch));
		b->count = n;
		for (k = 0; k < n; k++)
		{
			b->idx[k] = idx[k];
			b->serial[k] = serial[k];
			strlcpy(b->paths[k], zklock_deletes[idx[k]].path, sizeof(b->paths[k]));
			zoo_delete_op_init(&b->ops[k], b->paths[k], -1);
		}
		rc = zoo_amulti(zklock_zh, n, b->ops, b->results, batch_done, b);
		if (rc != ZOK)
		{
			/* the client took nothing (its connection is going): later */
			for (k = 0; k < n; k++)
				zklock_delete_batch_answer(idx[k], serial[k], ZCONNECTIONLOSS);
			pfree(b);
			continue;
		}
		zklock_shared->delete_batches++;
		zklock_shared->delete_batch_ops += n;
	}
}

/*
 * The end of a pass of the event loop, before the worker waits: send what
 * the pass queued.  Worker only; takes the lock when there is something.
 */
void
zklock_batch_send_ready(void)
{
	if (zklock_deletes_ready() == 0)
		return;
	LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
	zklock_batch_flush();
	LWLockRelease(zklock_shared->lock);
}

/*
 * Completion of a multi of deletes.  A multi is all or nothing: ZOK, every
 * node is gone; connection trouble or a lost session, each entry is tried
 * again like a lost single delete; any other answer (one op failed, for
 * instance NoNode for a node deleted from outside, and none was applied),
 * each entry is sent again alone and gets the answer it would have had
 * alone.  Entries freed or reused meanwhile are skipped.
 */
static void
batch_done(int rc, const void *data)
{
	DeleteBatch *b = (DeleteBatch *) data;
	int			k;

	LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
	if (rc != ZOK && !zklock_rc_retryable(rc) && !zklock_rc_session_gone(rc))
		zklock_shared->delete_batches_failed++;
	for (k = 0; k < b->count; k++)
		zklock_delete_batch_answer(b->idx[k], b->serial[k], rc);
	LWLockRelease(zklock_shared->lock);
	pfree(b);
}

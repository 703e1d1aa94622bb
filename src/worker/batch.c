/*-------------------------------------------------------------------------
 *
 * worker/batch.c
 *	  Creates and deletes sent together: the plain deletes by name and the
 *	  lock node creates that became due in one pass of the worker's event
 *	  loop leave at its end as one zookeeper multi (deletes first, up to
 *	  ZKLOCK_BATCH_MAX ops), or alone when only one is there.  A multi is
 *	  one request for the server: one proposal, one log entry, one reply,
 *	  where each op alone costs all three.
 *
 *	  Concept map:
 *	    queue       zklock_deletes_add marks a delete ready
 *	                (worker/deletes/deletes.c keeps that queue);
 *	                zklock_batch_create queues a create
 *	                (the lock engine, for a create that goes without its
 *	                listing)
 *	    flush       zklock_batch_flush, mid-pass: the queued deletes only,
 *	                for a sender that must reach the server behind them;
 *	                zklock_batch_send_ready, at the end of the pass: both,
 *	                mixed (send_batch, one multi at a time)
 *	    answer      batch_done: deletes are answered at once; the creates of
 *	                an applied multi wait for an exists of one of their
 *	                nodes (batch_stat_done), which gives the creation zxid
 *	                they all share (a multi is one transaction), the fencing
 *	                token a create2 would have returned; then each create's
 *	                own completion runs as if it had been sent alone
 *	    fall back   a multi that failed (one op refused: none applied) sends
 *	                each op alone, so each gets the answer it would have had
 *	                alone; one lost with the connection answers each as a
 *	                lost reply (deletes retried from the table, creates
 *	                recovered by their protection prefix)
 *
 *	  Which deletes: a plain delete by name of an ephemeral node (not by
 *	  prefix, not limited to a czxid, not persistent, never refused by the
 *	  server); persistent entries (P/ready) and deletes by prefix are sent
 *	  at once.  Which creates: a lock node's create that goes without its
 *	  listing (the handover layer's create_alone, or a path whose
 *	  numbering proves it, worker/locks/handover_numbering.c), other than a
 *	  read node's or a downgrade's: a reader that shares the answer of a reader
 *	  released after its create left (released_readers) counts on the
 *	  create leaving when it is numbered.  Nothing waits for more ops: a
 *	  pass batches what it produced.
 *
 *	  A multi is all or nothing.  For its deletes:
 *
 *	    ZOK                        every entry is freed (its node is gone)
 *	    connection loss, session   each entry is retried like a lost single
 *	    gone, or the client        delete (delete_retry; the send, like a
 *	    refusing the send          refused single send)
 *	    any other answer (one op   each entry is sent again alone and gets
 *	    failed: NoNode of a node   the answer it would have had alone
 *	    deleted from outside, ...) (NoNode frees it); a refused entry goes
 *	                               alone from then on
 *
 *	  For its creates: every node one multi creates gets the multi's zxid
 *	  as its creation zxid, the lock's fencing token, so two creates under
 *	  one parent never share a multi (zklock_batch_take, unit-tested):
 *	  tokens of one lock must grow.  The C client has no create2 in a
 *	  multi, hence the exists of batch_stat_done.  A create queued on a
 *	  connection that has ended meanwhile never leaves and is answered as a
 *	  lost reply (after the lock is let go: each completion takes it).  The
 *	  batch (ops, results, entry indexes and serials) is worker memory; an
 *	  entry freed or reused meanwhile (its serial changed) is skipped.
 *	  zk_status() counts batches, batched_deletes, batched_creates and
 *	  batches_failed.
 *
 *	  Ordering: a queued delete has not left yet, so a request sent later
 *	  in the same pass would reach the server ahead of it.  Whatever relies
 *	  on a delete being ahead of its own request calls zklock_batch_flush
 *	  (caller holds the lock) right before sending:
 *	  zklock_handover_node_gone (its exists must be answered after the
 *	  released node's delete, worker/locks/handover.c), zklock_ghosts_delete
 *	  (the decision's watch must find the ghost gone), and a create sent at
 *	  once with its listing.  Pickup and resume flush too, so a request that
 *	  starts or restarts goes behind every delete queued before it, as
 *	  unbatched: a backend's release reaches ZooKeeper before its next
 *	  acquire (whose listing would otherwise show its own released node and
 *	  wait on it), and a request resumed after a reconnect lists after the
 *	  deletes zklock_deletes_send queued.  The give-backs of a pass are all
 *	  withdrawn before its first pickup, so they still share a multi.
 *	  Nothing else relies on the order: any other request that may overtake
 *	  a queued delete sees the node a little longer, which is conservative
 *	  (a listing that still shows it waits behind it, with a watch that
 *	  fires when the batch applies), never a node gone that is not.  A
 *	  queued create may leave after a delete queued after it (deletes go
 *	  first): it then only finds fewer nodes ahead of it, never more.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/memutils.h"

#include "zklock.h"
#include "core/handover_rules.h"
#include "common/shmem.h"
#include "worker/worker.h"
#include "worker/connection/connection.h"
#include "worker/deletes/deletes.h"

/* creates waiting for the end of the pass; more are sent alone at once */
#define CREATE_QUEUE_MAX	256

/* A create waiting for the end of the pass (worker memory) */
typedef struct QueuedCreate
{
	char		path[ZKLOCK_NODE_PATH_SIZE];	/* the server appends the number */
	char		base[ZKLOCK_NODE_PATH_SIZE];	/* its parent */
	char	   *data;
	int			len;
	int			mode;
	const struct ACL_vector *acl;
	uint32		conn;			/* zklock_conn_serial when queued */
	string_stat_completion_t done;	/* its completion, as for zoo_acreate2 */
	const void *tag;
} QueuedCreate;

/*
 * One multi on its way: its ops and the results the client fills in; for
 * each delete the pending-delete entry and its serial when sent, for each
 * create what it needs to be answered or sent again alone.  Worker
 * memory, freed once every op is answered.
 */
typedef struct Batch
{
	int			count;
	int			ndeletes;		/* ops [0, ndeletes) delete, the rest create */
	int			idx[ZKLOCK_BATCH_MAX];
	uint32		serial[ZKLOCK_BATCH_MAX];
	QueuedCreate creates[ZKLOCK_BATCH_MAX];
	char		paths[ZKLOCK_BATCH_MAX][ZKLOCK_NODE_PATH_SIZE];	/* deletes */
	char		made[ZKLOCK_BATCH_MAX][ZKLOCK_NODE_PATH_SIZE];	/* created */
	int			stat_of;		/* the create whose node is being looked at */
	zoo_op_t	ops[ZKLOCK_BATCH_MAX];
	zoo_op_result_t results[ZKLOCK_BATCH_MAX];
} Batch;

static QueuedCreate create_queue[CREATE_QUEUE_MAX];
static int	create_head = 0;
static int	create_tail = 0;

/* creates that could not be sent while the lock was held: answered later */
static QueuedCreate create_lost[CREATE_QUEUE_MAX + ZKLOCK_BATCH_MAX];
static int	nlost = 0;

static void send_batch(int ndel, const int *idx, const uint32 *serial,
					   QueuedCreate *cr, int ncr);
static void create_alone(QueuedCreate *c);
static void create_answer_later(QueuedCreate *c);
static void answer_lost_creates(void);
static void batch_done(int rc, const void *data);
static void batch_stat_done(int rc, const struct Stat *stat, const void *data);
static void batch_creates_answer(Batch *b, int rc, const struct Stat *stat);

/*
 * Queue the create of a lock node (path: the name the server appends the
 * sequence number to) to leave at the end of the pass; done is called with
 * tag as zoo_acreate2 would call it.  False when it cannot wait (the queue
 * is full, not connected): the caller sends it alone.  Caller holds the
 * lock.
 */
bool
zklock_batch_create(const char *path, const char *data, int len, int mode,
					const struct ACL_vector *acl, string_stat_completion_t done,
					const void *tag)
{
	QueuedCreate *c;
	char	   *slash;

	if (!zklock_connected || create_tail - create_head >= CREATE_QUEUE_MAX)
		return false;
	if (create_tail == CREATE_QUEUE_MAX)
	{
		memmove(create_queue, create_queue + create_head,
				sizeof(QueuedCreate) * (create_tail - create_head));
		create_tail -= create_head;
		create_head = 0;
	}
	c = &create_queue[create_tail++];
	strlcpy(c->path, path, sizeof(c->path));
	strlcpy(c->base, path, sizeof(c->base));
	if ((slash = strrchr(c->base, '/')) != NULL)
		*slash = '\0';
	c->data = MemoryContextAlloc(TopMemoryContext, len + 1);
	memcpy(c->data, data, len);
	c->data[len] = '\0';
	c->len = len;
	c->mode = mode;
	c->acl = acl;
	c->conn = zklock_conn_serial;
	c->done = done;
	c->tag = tag;
	return true;
}

/*
 * Send every queued delete now: in multis of up to ZKLOCK_DELETE_BATCH_MAX
 * ops, a lone one as a plain delete.  Not connected, or the client refuses
 * the multi: each entry is tried again like a delete whose send failed.
 * Queued creates stay for the end of the pass.  Caller holds the lock.
 */
void
zklock_batch_flush(void)
{
	int			idx[ZKLOCK_DELETE_BATCH_MAX];
	uint32		serial[ZKLOCK_DELETE_BATCH_MAX];
	int			n;

	while ((n = zklock_deletes_take_ready(idx, serial, ZKLOCK_DELETE_BATCH_MAX)) > 0)
		send_batch(n, idx, serial, NULL, 0);
}

/*
 * The end of a pass of the event loop, before the worker waits: send what
 * the pass queued, the deletes first and the creates behind them in the
 * same multis (never two creates under one parent in one multi).  Worker
 * only; takes the lock when there is something.
 */
void
zklock_batch_send_ready(void)
{
	if (zklock_deletes_ready() == 0 && create_tail == create_head && nlost == 0)
		return;
	LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
	for (;;)
	{
		int			idx[ZKLOCK_DELETE_BATCH_MAX];
		uint32		serial[ZKLOCK_DELETE_BATCH_MAX];
		const char *bases[ZKLOCK_BATCH_MAX];
		int			ndel = zklock_deletes_take_ready(idx, serial, ZKLOCK_DELETE_BATCH_MAX);
		int			avail = Min(create_tail - create_head, ZKLOCK_BATCH_MAX - ndel);
		int			ncr;
		int			k;

		for (k = 0; k < avail; k++)
			bases[k] = create_queue[create_head + k].base;
		ncr = zklock_batch_take(bases, avail, avail);
		if (ndel == 0 && ncr == 0)
			break;
		send_batch(ndel, idx, serial, &create_queue[create_head], ncr);
		create_head += ncr;
	}
	create_head = create_tail = 0;
	LWLockRelease(zklock_shared->lock);
	answer_lost_creates();
}

/*
 * Send ndel deletes (entries idx, serial) and ncr creates (cr) as one
 * multi, or a lone op alone.  Not connected (or connected anew since a
 * create was queued), or the client refuses the multi: deletes are tried
 * again like a delete whose send failed, creates answered as lost.
 * Caller holds the lock.
 */
static void
send_batch(int ndel, const int *idx, const uint32 *serial, QueuedCreate *cr, int ncr)
{
	Batch	   *b;
	int			rc;
	int			k;

	if (zklock_zh == NULL || !zklock_connected)
	{
		for (k = 0; k < ndel; k++)
			zklock_deletes_batch_answer(idx[k], serial[k], ZCONNECTIONLOSS);
		for (k = 0; k < ncr; k++)
			create_answer_later(&cr[k]);
		return;
	}
	if (ndel + ncr == 1)
	{
		if (ndel == 1)
			zklock_deletes_send_alone(idx[0]);
		else
			create_alone(&cr[0]);
		return;
	}
	b = MemoryContextAllocZero(TopMemoryContext, sizeof(Batch));
	b->count = ndel;
	b->ndeletes = ndel;
	for (k = 0; k < ndel; k++)
	{
		b->idx[k] = idx[k];
		b->serial[k] = serial[k];
		strlcpy(b->paths[k], zklock_deletes[idx[k]].path, sizeof(b->paths[k]));
		zoo_delete_op_init(&b->ops[k], b->paths[k], -1);
	}
	for (k = 0; k < ncr; k++)
	{
		QueuedCreate *c;

		if (cr[k].conn != zklock_conn_serial)
		{
			/* queued on an earlier connection: it never leaves */
			create_answer_later(&cr[k]);
			continue;
		}
		c = &b->creates[b->count];
		*c = cr[k];
		zoo_create_op_init(&b->ops[b->count], c->path, c->data, c->len,
						   c->acl, c->mode, b->made[b->count],
						   sizeof(b->made[b->count]));
		b->count++;
	}
	if (b->count == 0)
	{
		pfree(b);
		return;
	}
	rc = zoo_amulti(zklock_zh, b->count, b->ops, b->results, batch_done, b);
	if (rc != ZOK)
	{
		/* the client took nothing (its connection is going): later */
		for (k = 0; k < ndel; k++)
			zklock_deletes_batch_answer(idx[k], serial[k], ZCONNECTIONLOSS);
		for (k = ndel; k < b->count; k++)
			create_answer_later(&b->creates[k]);
		pfree(b);
		return;
	}
	zklock_shared->counters.batches++;
	zklock_shared->counters.batched_deletes += ndel;
	zklock_shared->counters.batched_creates += b->count - ndel;
}

/*
 * Send one queued create alone, as the lock engine would have (its
 * completion gets the create2 answer itself).  Caller holds the lock.
 */
static void
create_alone(QueuedCreate *c)
{
	if (c->conn != zklock_conn_serial || zklock_zh == NULL || !zklock_connected ||
		zoo_acreate2(zklock_zh, c->path, c->data, c->len, c->acl,
					 c->mode, c->done, c->tag) != ZOK)
	{
		create_answer_later(c);
		return;
	}
	pfree(c->data);
	c->data = NULL;
}

/*
 * A queued create that never left: its completion is told the reply was
 * lost (the request looks for its node by prefix once connected, finds
 * none and creates it), after the lock is let go.  Caller holds the lock.
 */
static void
create_answer_later(QueuedCreate *c)
{
	if (c->data != NULL)
	{
		pfree(c->data);
		c->data = NULL;
	}
	if (nlost >= lengthof(create_lost))
		elog(ERROR, "zklock: too many lock node creates to answer");
	create_lost[nlost++] = *c;
}

/*
 * Answer the creates that never left (create_answer_later).  Caller does
 * not hold the lock: each completion takes it.
 */
static void
answer_lost_creates(void)
{
	while (nlost > 0)
	{
		QueuedCreate c = create_lost[--nlost];

		c.done(ZCONNECTIONLOSS, NULL, NULL, c.tag);
	}
}

/*
 * Completion of a multi.  A multi is all or nothing.  Applied (ZOK): every
 * delete is done, and the creates learn their creation zxid from an exists
 * of one of their nodes before they are answered.  Connection trouble or a
 * lost session: each delete is tried again like a lost single delete, each
 * create answered as lost.  Any other answer (one op failed, none was
 * applied): each op is sent again alone and gets the answer it would have
 * had alone.  Entries freed or reused meanwhile are skipped.
 */
static void
batch_done(int rc, const void *data)
{
	Batch	   *b = (Batch *) data;
	bool		lost = (zklock_rc_retryable(rc) || zklock_rc_session_gone(rc));
	int			k;

	LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
	if (rc != ZOK && !lost)
		zklock_shared->counters.batches_failed++;
	for (k = 0; k < b->ndeletes; k++)
		zklock_deletes_batch_answer(b->idx[k], b->serial[k], rc);
	if (b->ndeletes == b->count)
	{
		LWLockRelease(zklock_shared->lock);
		pfree(b);
		return;
	}
	if (rc == ZOK)
	{
		b->stat_of = b->ndeletes;
		if (zklock_zh != NULL &&
			zoo_aexists(zklock_zh, b->made[b->stat_of], 0, batch_stat_done, b) == ZOK)
		{
			LWLockRelease(zklock_shared->lock);
			return;
		}
		rc = ZCONNECTIONLOSS;	/* made, with no token: found again by prefix */
		lost = true;
	}
	if (!lost)
	{
		/* none applied: each create alone, answered by its own completion */
		for (k = b->ndeletes; k < b->count; k++)
		{
			create_alone(&b->creates[k]);
			b->creates[k].done = NULL;
		}
	}
	LWLockRelease(zklock_shared->lock);
	answer_lost_creates();
	batch_creates_answer(b, rc, NULL);
}

/*
 * Completion of the exists of a node an applied multi created: its czxid
 * is every created node's (one transaction, one zxid).  The node deleted
 * from outside meanwhile: the next one is looked at.  None left, or
 * connection trouble: answered as lost, so each request looks for its
 * node by prefix, and makes a new one when it is gone (an answer without
 * a Stat would grant a create the numbers prove first, with no node and
 * no token).
 */
static void
batch_stat_done(int rc, const struct Stat *stat, const void *data)
{
	Batch	   *b = (Batch *) data;

	if (rc == ZNONODE && b->stat_of + 1 < b->count)
	{
		LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
		b->stat_of++;
		if (zklock_zh != NULL &&
			zoo_aexists(zklock_zh, b->made[b->stat_of], 0, batch_stat_done, b) == ZOK)
		{
			LWLockRelease(zklock_shared->lock);
			return;
		}
		LWLockRelease(zklock_shared->lock);
		rc = ZCONNECTIONLOSS;
	}
	if (rc == ZOK)
		batch_creates_answer(b, ZOK, stat);
	else
		batch_creates_answer(b, ZCONNECTIONLOSS, NULL);
}

/*
 * Answer every create of multi b still waiting (done set) with rc: ZOK
 * with its created path and stat (the shared creation zxid), otherwise
 * as a lost reply.  Frees b.  Caller does not hold the lock.
 */
static void
batch_creates_answer(Batch *b, int rc, const struct Stat *stat)
{
	int			k;

	for (k = b->ndeletes; k < b->count; k++)
	{
		QueuedCreate *c = &b->creates[k];

		if (c->done == NULL)
			continue;
		if (rc == ZOK)
			c->done(ZOK, b->made[k], stat, c->tag);
		else
			c->done(rc, NULL, NULL, c->tag);
	}
	for (k = b->ndeletes; k < b->count; k++)
	{
		if (b->creates[k].data != NULL)
			pfree(b->creates[k].data);
	}
	pfree(b);
}

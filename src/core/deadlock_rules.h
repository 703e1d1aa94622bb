/*-------------------------------------------------------------------------
 *
 * core/deadlock_rules.h
 *	  The deadlock detector's decisions (backend/deadlock.c), as pure
 *	  functions: which node of a lock's queue, held or waiting, a wait is
 *	  blocked by, the search for a cycle of waits through the checking
 *	  process, the victim rule, and for waits across clusters the edges
 *	  of the published wait records (zklock_record_edges) and whether a
 *	  cycle crosses clusters (zklock_cycle_crosses).
 *	  No PostgreSQL or ZooKeeper calls, unit-tested in
 *	  test/unit/test_deadlock_rules.c.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZKLOCK_DEADLOCK_RULES_H
#define ZKLOCK_DEADLOCK_RULES_H

#include <stdbool.h>
#include <stdint.h>

/*
 * How a kind of hold takes part in wait-for edges (ZklockKindInfo.deadlock):
 * what a waiter of it waits for, and whom a node of it keeps out.  Only
 * waits that cannot end before every blocking node is gone give edges (a
 * wait for all of them); a wait that any one of several holders ends (the
 * lease step of a semaphore of more than one lease) gives none, so no
 * edge is ever one that does not hold.
 */
typedef enum ZklockDeadlockMode
{
	ZKDL_NONE = 0,				/* neither waits for nor blocks anyone */
	ZKDL_MUTEX,					/* a mutex: waits for and blocks mutexes */
	ZKDL_READ,					/* read lock: waits for writers, blocks them */
	ZKDL_WRITE,					/* write lock: waits for and blocks both */
	ZKDL_LEASE_ONE,				/* a semaphore of one lease (a semaphore
								 * mutex): waits until no lease is held */
	ZKDL_LEASE					/* a lease of a larger semaphore: waits for
								 * nobody in particular; a holder blocks
								 * ZKDL_LEASE_ONE waiters */
} ZklockDeadlockMode;

extern bool zklock_deadlock_blocks(ZklockDeadlockMode waiting,
								   ZklockDeadlockMode held);
extern bool zklock_deadlock_waits(ZklockDeadlockMode waiting);

/*
 * The queues of one lock path P that a node can stand in: the lock nodes
 * directly under P (mutex, read/write lock), the semaphore's internal
 * mutex P/locks (the gate every acquirer of a lease passes, one at a
 * time), and its leases P/leases.
 */
typedef enum ZklockQueue
{
	ZKQ_LOCK = 0,				/* P/<lock node> */
	ZKQ_GATE,					/* P/locks/<lock node> */
	ZKQ_LEASES					/* P/leases/<lease> */
} ZklockQueue;

/*
 * A node of a request in one of those queues, as the detector sees it:
 * the mode of its kind, its sequence number (zklock_node_seq,
 * core/handover_rules.c; -1 when its name is not known yet: a create not
 * answered), and whether its request still
 * waits (else it holds).
 */
typedef struct ZklockQueueNode
{
	ZklockDeadlockMode mode;
	ZklockQueue queue;
	int64_t		seq;
	bool		waits;
} ZklockQueueNode;

extern bool zklock_queue_blocks(const ZklockQueueNode *waiter,
								const ZklockQueueNode *other);

/*
 * One wait-for edge: process waiter cannot go on before process holder
 * lets go of what it holds, or of its place in the queue ahead of waiter
 * (a zklock node that waits itself, or a heavyweight lock asked for ahead
 * in the lock's wait queue).  The keys name what the edge rests on, for
 * the re-check before anyone is failed: for a zklock wait, the waiting
 * request and the blocking node's request, each as (slot index << 32 |
 * slot serial); for a heavyweight wait both are 0.
 */
typedef struct ZklockWaitEdge
{
	int32_t		waiter;			/* pid of the waiting process */
	int32_t		holder;			/* pid it waits for */
	uint64_t	wait_key;		/* zklock: the waiting request; 0: none */
	uint64_t	hold_key;		/* zklock: the blocking node's request; 0:
								 * none */
	bool		behind_waiting; /* the blocking node's request waits
								 * itself: waiter is queued behind a
								 * waiting one */
} ZklockWaitEdge;

/* a zklock edge's key from a slot index and its serial */
#define ZKLOCK_DL_KEY(idx, serial) \
	(((uint64_t) (uint32_t) (idx) << 32) | (uint64_t) (uint32_t) (serial))
#define ZKLOCK_DL_KEY_IDX(key)		((int) ((key) >> 32))
#define ZKLOCK_DL_KEY_SERIAL(key)	((uint32_t) (key))

extern int	zklock_wait_cycle(const ZklockWaitEdge *edges, int nedges,
							  int32_t start, int *work, int *cycle,
							  int maxlen);

/*
 * The victim rule's re-check: is the zklock edge e still there, exactly
 * (the same waiting request, the same hold)?  The caller answers it under
 * the shared table's lock held exclusively.
 */
typedef bool (*ZklockEdgeLive) (const ZklockWaitEdge *e, void *arg);

extern bool zklock_cycle_stands(const ZklockWaitEdge *edges, const int *cycle,
								int ncycle, ZklockEdgeLive live, void *arg);

/*
 * A wait published for the detection across clusters
 * (worker/deadlock_records.c), as read back from ZooKeeper: which worker
 * session published it, the lock nodes ahead of its waiting node that
 * block it (held or waiting), the lock nodes its backend holds, and its
 * own waiting node (full paths).
 */
typedef struct ZklockWaitRecord
{
	const char *session;		/* the publishing session, from its name */
	const char *const *ahead;
	int			nahead;
	const char *const *holds;
	int			nholds;
	const char *node;			/* its waiting node; NULL: none in no edge */
} ZklockWaitRecord;

extern int	zklock_record_edges(const ZklockWaitRecord *recs, int nrecs,
								ZklockWaitEdge *edges, int maxedges);
extern bool zklock_cycle_crosses(const ZklockWaitRecord *recs,
								 const ZklockWaitEdge *edges,
								 const int *cycle, int ncycle);

#endif							/* ZKLOCK_DEADLOCK_RULES_H */

/*-------------------------------------------------------------------------
 *
 * core/handover_rules.h
 *	  The handover layer's decisions (worker/locks/handover_layer.c and
 *	  worker/locks/handover.c), as pure functions: no PostgreSQL or ZooKeeper
 *	  calls, unit-tested in test/unit.  Besides the wait state's moves and
 *	  the handover's choice: the sequence numbers a create placed without
 *	  a listing relies on (zklock_node_seq, zklock_seq_*,
 *	  worker/locks/handover_numbering.c), how many queued ops go as one multi
 *	  (zklock_batch_take, worker/batch.c) and the lock cache's decisions
 *	  (zklock_cache_may_take, zklock_cache_keep_decide,
 *	  worker/locks/lock_cache.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZKLOCK_LOCAL_RULES_H
#define ZKLOCK_LOCAL_RULES_H

#include <stdbool.h>

/*
 * What a request waits for in the worker (WorkerReq.wait): one state, not
 * a set of flags, so whether it lists, watches, waits locally, follows a
 * reader, is being handed a lock or is parked is one question.
 */
typedef enum ZklockWaitState
{
	ZKWS_NONE = 0,				/* no wait: its own call is on its way, or
								 * it decides now */
	ZKWS_WATCHING,				/* a ZooKeeper watch it set moves it on */
	ZKWS_LOCAL,					/* behind pred, a node of this worker, with
								 * no watch: its owner's release or loss
								 * moves it (worker/locks/handover.c) */
	ZKWS_FOLLOWING,				/* a read node right behind a reader of this
								 * worker still deciding: that answer is its
								 * own */
	ZKWS_HANDOVER,				/* chosen to take pred's lock when pred's
								 * delete is queued: at once, that delete
								 * guarded by a check of its node, or, a
								 * revocable waiter, once that delete and
								 * the check behind it are answered
								 * (worker/locks/handover.c) */
	ZKWS_PARKED,				/* waits for the connection, then resumes */
	ZKWS_PARKED_RECOVER			/* same, and first looks for a node a lost
								 * create may have made (by prefix) */
} ZklockWaitState;

extern bool zklock_wait_move_ok(ZklockWaitState from, ZklockWaitState to);
extern bool zklock_wait_for_event(ZklockWaitState s);

/* What a lock node just created does when it may skip its listing */
typedef enum ZklockPlacement
{
	ZKLOCK_PLACE_LIST,			/* list the children, as Curator does */
	ZKLOCK_PLACE_JOIN_READER,	/* read lock: granted with the reader ahead */
	ZKLOCK_PLACE_FOLLOW_READER, /* read lock: share the pending decision of
								 * the reader ahead */
	ZKLOCK_PLACE_WAIT_BEHIND,	/* mutex: wait, without a watch, behind the
								 * node of this worker ahead */
	ZKLOCK_PLACE_GIVE_UP_TRY	/* mutex try: the node ahead means not first */
} ZklockPlacement;

extern ZklockPlacement zklock_placement(bool owner_found, bool owner_active,
										bool rw, bool follows_released_reader,
										bool try_only);

/* A waiter of this worker whose latest listing made it wait on a released node */
typedef struct ZklockHandoverCandidate
{
	bool		rw;				/* a read/write lock node (else a mutex's) */
	bool		read;			/* a read node */
	bool		pred_last;		/* its listing showed the released node as the
								 * only one keeping it out */
} ZklockHandoverCandidate;

extern int	zklock_handover_choice(const ZklockHandoverCandidate *c, int n,
								   bool held_mutex, bool twin, int max,
								   bool *take);

extern bool zklock_create_alone(bool rw, bool read, bool tail_is_ours);

/* What the worker knows of one of its requests on the same lock */
typedef enum ZklockTailState
{
	ZKLOCK_TAIL_WAITING,		/* its request is running (ACTIVE) */
	ZKLOCK_TAIL_HOLDING,		/* it holds the lock (HELD) */
	ZKLOCK_TAIL_RELEASED,		/* released, not yet withdrawn: its delete
								 * has not left */
	ZKLOCK_TAIL_OTHER			/* anything else: free, lost, cancelled */
} ZklockTailState;

typedef struct ZklockTailNode
{
	ZklockTailState state;
	bool		current_session;	/* made in the worker's current session */
	bool		known;			/* the worker runs it (not left by an
								 * earlier worker) */
	bool		parked;			/* waits for the connection */
	bool		decided_to_wait;	/* its listing made it wait on a node
									 * (not following a reader) */
	bool		rw;				/* a read/write lock node */
	bool		read;			/* a read node */
	bool		downgrade;		/* a write holder's read node */
	bool		has_node;		/* its node's name is known */
	bool		create_sent;	/* its create may be on its way */
} ZklockTailNode;

extern bool zklock_tail_candidate(const ZklockTailNode *n, bool reader,
								  bool any_node);

/*
 * What the worker knows of the children of one lock path (its base) from
 * a listing of its own, kept so that a later create can go without its
 * listing (worker/locks/handover_numbering.c).  A sequential node's number is
 * the count of the creates its parent has seen (ZooKeeper's internal cversion;
 * the cversion a Stat shows counts deletes too: it is 2 * creates - children,
 * see DataNode.copyStat), so a create of ours answered with number
 * "next" proves that nobody else created a child since.
 */
typedef struct ZklockPathSeq
{
	bool		listed;			/* a listing on connection conn showed only
								 * nodes of this worker */
	bool		watched;		/* an exists watch on the parent, answered on
								 * conn with the listing's czxid, stands */
	unsigned long long conn;	/* the connection it was learned on */
	long long	czxid;			/* the parent's creation zxid (its
								 * incarnation) */
	long long	next;			/* the number the parent's next sequential
								 * create gets */
} ZklockPathSeq;

extern long long zklock_node_seq(const char *name);
extern long long zklock_next_seq_from_stat(int cversion, int num_children);
extern void zklock_seq_listed(ZklockPathSeq *k, unsigned long long conn,
							  long long czxid, int cversion, int num_children,
							  bool only_ours);
extern bool zklock_seq_watch_answered(ZklockPathSeq *k, unsigned long long conn,
									  bool exists, long long czxid);
extern void zklock_seq_forget(ZklockPathSeq *k);
extern bool zklock_seq_usable(const ZklockPathSeq *k, unsigned long long conn_now);
extern bool zklock_seq_created(ZklockPathSeq *k, unsigned long long conn_now,
							   long long seq);
extern bool zklock_first_unlisted(bool seq_proven, bool own_node_ahead,
								  bool own_delete_pending);

/*
 * Batching (worker/batch.c): how many of the n queued ops, from the front,
 * go to ZooKeeper as one multi.  create_base[i] is the parent of op i when
 * it is a create, NULL for a delete.
 */
extern int	zklock_batch_take(const char *const *create_base, int n, int max);

/*
 * Lock caching (worker/locks/lock_cache.c): what a request may take from a
 * kept node, and what a release does with its node.  Every member is a fact
 * the worker knows at that moment.
 */
typedef struct ZklockCacheTakeFacts
{
	bool		enabled;		/* zklock.lock_cache is on */
	bool		mutex;			/* the request is a mutex acquire */
	bool		fresh;			/* it has no node, no id, no create in
								 * doubt */
	bool		revocable;		/* it asks to be revocable */
	bool		downgrade;		/* it takes a writer's place */
	bool		contended;		/* someone else may be queued behind the
								 * kept node */
	bool		same_session;	/* the node is of the current session */
	bool		lease_valid;	/* the lease proves the session alive now */
	bool		same_identity;	/* the request's node data is the node's */
} ZklockCacheTakeFacts;

typedef struct ZklockCacheKeepFacts
{
	bool		enabled;		/* zklock.lock_cache is on */
	bool		mutex;			/* the released lock is a mutex's own node */
	int			handed_over;	/* waiters of this worker the release
								 * chose */
	bool		contended;		/* the node was granted from the cache and
								 * someone else may be queued behind it */
	bool		revocable;		/* its holder was revocable */
	bool		token_asked;	/* its holder asked zk_lock_token */
	bool		downgrade;		/* a downgrade's node */
	bool		has_node;		/* its name is known and it is not gone */
	bool		connected;		/* the worker is connected */
	bool		same_session;	/* the node is of the current session */
	bool		parked;			/* the request waits for the connection */
	bool		alone;			/* no other request of this worker is on
								 * the path */
	bool		cooling;		/* the path cools down after someone else
								 * wanted it */
} ZklockCacheKeepFacts;

typedef enum ZklockCacheKeep
{
	ZKLOCK_CACHE_DELETE = 0,	/* the node goes, as without caching */
	ZKLOCK_CACHE_DELETE_COOL,	/* the node goes and the path cools down */
	ZKLOCK_CACHE_KEEP			/* the node is kept */
} ZklockCacheKeep;

extern bool zklock_cache_may_take(const ZklockCacheTakeFacts *f);
extern ZklockCacheKeep zklock_cache_keep_decide(const ZklockCacheKeepFacts *f);

#endif							/* ZKLOCK_LOCAL_RULES_H */

/*-------------------------------------------------------------------------
 *
 * core/curator_rules.h
 *		Pure decision functions of Curator's recipes (core/curator_rules.c):
 *		sorting of children, "do I hold the lock", which node to watch,
 *		who holds, double-barrier leave order, what a request must delete,
 *		the pending-delete table's size and room (zklock_delete_may_add),
 *		the retry delay (zklock_retry_delay_ms), a counter write's fence
 *		(zklock_write_fence), when a downgrade's node may be created
 *		(zklock_downgrade_may_create) and LeaderLatch's participants
 *		(zklock_latch_participants).  Node names and paths are
 *		core/names.h, but for the latch's (ZKLOCK_LATCH_NAME, here).  They
 *		make no PostgreSQL or ZooKeeper calls and use only libc, so that
 *		they can be unit-tested on their own (test/unit).
 *
 * src/core/curator_rules.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZKLOCK_CURATOR_RULES_H
#define ZKLOCK_CURATOR_RULES_H

#include <stdbool.h>
#include <stddef.h>

#include <stdint.h>

#include "core/names.h"
#include "core/value_codec.h"

extern const char *zklock_sort_key(const char *name, const char *lock_name);
extern void zklock_sort_children(char **names, int n, const char *lock_name);
extern bool zklock_seq_follows(const char *prev, const char *next,
							   const char *lock_name);
extern int	zklock_find_child(char *const *names, int n, const char *own);

/* Curator's StandardLockInternalsDriver.getsTheLock on SORTED children */
typedef struct ZklockLockDecision
{
	bool		lost;			/* own node not among children: it was
								 * deleted, create a new one */
	bool		holds;			/* own index < max_leases */
	int			own_index;		/* -1 when lost */
	int			watch_index;	/* index of the node to watch (own_index -
								 * max_leases) when !holds && !lost, else -1 */
	int			blockers;		/* how many nodes ahead of ours keep us from
								 * holding (0 when holds or lost): with 1,
								 * the watched node is the only one, and we
								 * hold once it is gone (nodes ahead of ours
								 * can only go away) */
} ZklockLockDecision;

extern ZklockLockDecision zklock_lock_decide(char *const *sorted, int n,
											 const char *own, int max_leases);

/* Read/write lock */
extern const char *zklock_rw_sort_key(const char *name);
extern void zklock_rw_sort_children(char **names, int n);
extern ZklockLockDecision zklock_read_decide(char *const *sorted, int n,
											 const char *own);

/* Revocation: which children of a lock hold it */
extern int	zklock_lock_holders(char *const *sorted, int n, bool rw, int *holders);

/* Double barrier leave */
typedef enum ZklockLeaveAction
{
	ZKLOCK_LEAVE_DONE,			/* no members left */
	ZKLOCK_LEAVE_ERROR_MISSING, /* our node missing while others remain */
	ZKLOCK_LEAVE_DELETE_OURS_DONE,	/* only ours left: delete it, done */
	ZKLOCK_LEAVE_WATCH_HIGHEST, /* we are lowest: watch the highest */
	ZKLOCK_LEAVE_DELETE_OURS_WATCH_LOWEST,	/* delete ours, watch the lowest */
	ZKLOCK_LEAVE_WATCH_LOWEST	/* ours already deleted (own == NULL): watch
								 * the lowest */
} ZklockLeaveAction;

extern ZklockLeaveAction zklock_double_barrier_leave_decide(char *const *children,
															int n,
															const char *own,
															bool own_delete_sent,
															const char **watch_name);

/*
 * What a request that ends without its lock (released, withdrawn, failed,
 * a try that gave up) must delete: every node it created or may have
 * created.  Decided from what the shared request slot records alone, so a
 * restarted worker, which knows nothing of its predecessor's calls in
 * flight, decides the same.
 */
typedef enum ZklockCleanupParent
{
	ZKLOCK_CLEANUP_IN_PATH = 0, /* a child of P (mutex, read/write, member) */
	ZKLOCK_CLEANUP_IN_LEASES,	/* a child of P/leases (a lease) */
	ZKLOCK_CLEANUP_IN_LOCKS		/* a child of P/locks (a lease's mutex) */
} ZklockCleanupParent;

typedef struct ZklockCleanupInput
{
	bool		lease;			/* a semaphore lease (main node in P/leases,
								 * aux node in P/locks) */
	bool		protected_names;	/* the main node has Curator's protection
									 * prefix (false: double barrier member) */
	const char *node;			/* our main node, "" when its name is unknown */
	const char *uuid;			/* its protection id, "" when no create was
								 * made with one */
	bool		node_deleted;	/* the main node was deleted already */
	const char *aux_node;		/* lease: our P/locks node, "" when unknown */
	const char *aux_uuid;		/* lease: its protection id, "" when none */
} ZklockCleanupInput;

typedef struct ZklockCleanupStep
{
	ZklockCleanupParent parent;
	bool		by_prefix;		/* delete every child named prefix... */
	const char *name;			/* !by_prefix: the node's own name */
	char		prefix[ZKLOCK_PROTECTED_PREFIX_LEN + 1];	/* by_prefix */
} ZklockCleanupStep;

#define ZKLOCK_MAX_CLEANUP_STEPS 2

extern int	zklock_cleanup_plan(const ZklockCleanupInput *in,
								ZklockCleanupStep steps[ZKLOCK_MAX_CLEANUP_STEPS]);

/*
 * The pending-delete table: its size for a request table of max_requests
 * entries, and whether a caller may add need entries to it with used of
 * size taken.  A caller that can wait for room (a release or a withdrawn
 * wait, which keeps its request slot meanwhile) leaves the last reserve
 * entries to the callers that cannot.
 */
extern int	zklock_delete_table_size(int max_requests);
extern bool zklock_delete_may_add(int used, int size, int need, bool can_wait,
								  int reserve);

/*
 * Delay before the attempt-th retry (attempt >= 1) of a call the server
 * refused: base_ms doubled for each earlier attempt, at most cap_ms.
 */
extern int	zklock_retry_delay_ms(int attempt, int base_ms, int cap_ms);

/* a LeaderLatch member's node name, before its sequence number */
#define ZKLOCK_LATCH_NAME "latch-"

/*
 * The fence of a counter write: the worker sends a write of a backend that
 * holds zklock locks only while each of them is held in the session the
 * write goes on.  The verdict on one hold: lost (its slot is LOST), or
 * made in session generation hold_gen while the worker's session is
 * current_gen (0: it has none).
 */
typedef enum ZklockFenceVerdict
{
	ZKLOCK_FENCE_PASS = 0,		/* held in the current session */
	ZKLOCK_FENCE_LOST,			/* lost with the session that held it */
	ZKLOCK_FENCE_OTHER_SESSION	/* held in a session that is not the
								 * current one (or in an unknown one) */
} ZklockFenceVerdict;

extern ZklockFenceVerdict zklock_write_fence(bool lost, uint64_t hold_gen,
											 uint64_t current_gen);

/*
 * A downgrade's read node (the write node's sequence number seq) is
 * created only while its write lock is held in the current session by a
 * write node ending in seq.
 */
extern bool zklock_downgrade_may_create(bool held, uint64_t hold_gen,
										uint64_t current_gen,
										const char *write_node,
										const char *seq);

/*
 * LeaderLatch's participants: the children of P containing "latch-", in
 * Curator's order (sorted by the part after the last "latch-"); their
 * indexes into children go to order, the count is returned.  The first
 * one whose data can be read is the leader Curator's getLeader() names.
 */
extern int	zklock_latch_participants(char *const *children, int n, int *order);

#endif							/* ZKLOCK_CURATOR_RULES_H */

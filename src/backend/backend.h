/*-------------------------------------------------------------------------
 *
 * backend/backend.h
 *	  What the backend side of zklock shares between its files: the
 *	  backend-local registry of held locks, what a backend asks the worker
 *	  for, and the request API every SQL function calls.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZKLOCK_BACKEND_INT_H
#define ZKLOCK_BACKEND_INT_H

#include "fmgr.h"
#include "nodes/pg_list.h"
#include "utils/hsearch.h"

#include "zklock.h"
#include "recipes/recipe.h"

/* Key of a lock in the backend-local registry */
typedef struct LocalLockKey
{
	ZklockKind	kind;
	char		path[ZKLOCK_FULL_PATH_SIZE];
	char		lease[ZKLOCK_NODE_NAME_SIZE];	/* semaphore: the lease node */
} LocalLockKey;

/* What this backend holds of one lock */
typedef struct LocalLock
{
	LocalLockKey key;
	int			slot;			/* its entry in the shared table */
	uint32		serial;
	int32		session_count;
	int32		xact_count;
	bool		lost_reported;	/* the WARNING about its loss was given */
} LocalLock;

/* One transaction-level hold, remembered for commit, abort and savepoints */
typedef struct XactHold
{
	LocalLockKey key;
	SubTransactionId subid;
	bool		due;			/* its (sub)transaction ended: release it once
								 * PostgreSQL has released its own locks */
} XactHold;

/* What a backend asks the worker for */
typedef struct ZklockAsk
{
	ZklockOp	op;
	ZklockKind	kind;
	bool		xact;
	bool		try_only;
	bool		revocable;
	int64		timeout_ms;		/* -1: no timeout */
	const char *downgrade_seq;
	uint32		result_dsm;		/* participants: where the answer goes */
	uint32		result_size;
	const char *data;			/* slot data instead of the node identity */
	ZklockRecipeArgs args;		/* the recipe's own (copied into the slot) */
} ZklockAsk;

/* How a wait ended without an error */
typedef enum WaitOutcome
{
	WAIT_GRANTED,				/* the lock is ours; the slot stays */
	WAIT_NOT_GRANTED,			/* timeout or a failed try; slot gone */
	WAIT_DONE					/* a request without a lock finished */
} WaitOutcome;

/*
 * Is a lock of ours marked lost in shared memory (its session expired)?
 * No lock taken: the worker only ever moves a slot of ours from HELD to
 * LOST, and a stalled worker holding the lock must not hang a COMMIT.
 */
static inline bool
zklock_hold_lost(const LocalLock *ll)
{
	volatile ZklockSlot *slot = &zklock_shared->slots[ll->slot];

	return slot->serial != ll->serial || slot->state != ZKS_HELD;
}

/* backend/holds.c */
extern HTAB *zklock_local_locks;	/* LocalLockKey -> LocalLock */
extern LocalLock *zklock_add_granted_hold(const LocalLockKey *key, int idx,
										  uint32 serial, bool xact);
extern LocalLock *zklock_add_hold(const LocalLockKey *key, int idx,
								  uint32 serial, bool xact);
extern void zklock_backend_setup(void);
extern void zklock_notice_lost_locks(void);
extern LocalLock *zklock_find_hold(const LocalLockKey *key, int user_off);
extern bool zklock_release_key(const LocalLockKey *key, int user_off);
extern int zklock_release_session_holds(ZklockKind kind, const char *path);

/* backend/xact.c */
extern void zklock_xact_register_callbacks(void);
extern void zklock_xact_note_hold(const LocalLockKey *key, bool xact);
extern void zklock_xact_note_lost(LocalLock *ll);
extern void zklock_xact_release_due(void);
extern const char *zklock_xact_lost_lock(void);
extern void zklock_rely_on_leadership(int idx, uint32 serial, uint64 epoch,
									  const char *user_path);
extern bool zklock_xact_leadership(int *idx, uint32 *serial, uint64 *epoch);
extern void zklock_drop_hold(LocalLock *ll, bool xact);
extern void zklock_publish_counts(LocalLock *ll);

/* backend/cancel_on_loss.c */
extern void zklock_loss_watch_update(void);

/* backend/acquire.c */
extern bool zklock_acquire_lock(ZklockAsk *ask, text *path);
extern int64 zklock_path_request(FunctionCallInfo fcinfo, ZklockOp op,
								 ZklockKind kind, int64 timeout_ms,
								 bool *timed_out);
extern bool zklock_release_lock(ZklockKind kind, text *path);
extern bool zklock_request_lock(ZklockAsk *ask, const LocalLockKey *key,
								int user_off, int *idx, uint32 *serial);

/* backend/channel.c */
extern void zklock_build_node_data(void);
extern bool zklock_confirm_hold(int slot_idx, char *why, size_t whylen);
extern TimestampTz zklock_deadline_after(TimestampTz start, int64 timeout_ms);
extern bool zklock_down_too_long(ZklockConnState cs, TimestampTz now,
								 TimestampTz *down_since);
extern int64 zklock_remaining_ms(int64 timeout_ms, TimestampTz start);
extern int zklock_claim_slot(const ZklockAsk *ask, const LocalLockKey *key,
							 int user_off, uint32 *serial);
extern void zklock_init_ask(ZklockAsk *ask, ZklockOp op, ZklockKind kind,
							int64 timeout_ms, bool xact);
extern int64 zklock_run_request(ZklockAsk *ask, const LocalLockKey *key,
								int user_off, uint32 dsm, uint32 dsm_size,
								bool *timed_out, uint32 *needed);
extern WaitOutcome zklock_wait_for_request(int idx, uint32 serial,
										   int64 timeout_ms,
										   const char *user_path, int64 *value,
										   uint32 *needed);

/* backend/args.c */
extern bool zklock_bool_arg(FunctionCallInfo fcinfo, int argno);
extern int32 zklock_count_arg(FunctionCallInfo fcinfo, int argno,
							  const char *name);
extern void zklock_make_lock_key(text *path_text, ZklockKind kind,
								 LocalLockKey *key, int *user_off);
extern text *zklock_path_arg(FunctionCallInfo fcinfo, int argno);
extern int64 zklock_timeout_arg(FunctionCallInfo fcinfo, int argno);
extern char *zklock_text_from_utf8(const char *p, int len);
extern Datum zklock_utf8_text_datum(const char *s);

#endif							/* ZKLOCK_BACKEND_INT_H */

/*-------------------------------------------------------------------------
 *
 * recipes/recipe_sql.h
 *	  What the SQL side offers recipes (the recipe contract's SQL half;
 *	  recipes/recipe.h is the descriptor): the backend-local hold registry's
 *	  key and entry, the ask a backend hands the worker, how a wait ends,
 *	  and the calls a recipe's SQL functions may make, by the file of
 *	  backend/ that offers them.  backend/backend.h includes it, and a
 *	  recipe file that has SQL functions.  It does not include the
 *	  ZooKeeper client's header, nor may anything it includes.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZKLOCK_RECIPE_SQL_H
#define ZKLOCK_RECIPE_SQL_H

#include "fmgr.h"
#include "utils/hsearch.h"
#include "utils/timestamp.h"

#include "zklock.h"
#include "common/shmem.h"
#include "recipes/recipe.h"

/* ---------------------------------------------------------------------
 * SQL side calls: what a recipe's SQL functions may use, by the file that
 * offers it.  A recipe's SQL function calls zklock_backend_setup() first.
 * ---------------------------------------------------------------------
 */

/* Key of a backend hold in zklock_backend_holds */
typedef struct BackendHoldKey
{
	ZklockKind	kind;
	char		path[ZKLOCK_FULL_PATH_SIZE];
	char		lease[ZKLOCK_NODE_NAME_SIZE];	/* semaphore: the lease node */
} BackendHoldKey;

/* What this backend holds of one lock */
typedef struct BackendHold
{
	BackendHoldKey key;
	int			slot;			/* its entry in the shared table */
	uint32		serial;
	int32		session_count;
	int32		xact_count;
	bool		lost_reported;	/* the WARNING about its loss was given */
} BackendHold;

/* What a backend asks the worker for */
typedef struct ZklockAsk
{
	ZklockOp	op;
	ZklockKind	kind;
	bool		xact;
	bool		try_only;
	bool		answer_now;		/* waits for no other client (a read, a
								 * counter read, a barrier's set or removal, a
								 * revocation): fails at once while the
								 * worker has no provable session */
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

/* backend/holds.c */
extern HTAB *zklock_backend_holds;	/* BackendHoldKey -> BackendHold */
extern BackendHold *zklock_add_granted_hold(const BackendHoldKey *key, int idx,
										  uint32 serial, bool xact);
extern void zklock_backend_setup(void);
extern BackendHold *zklock_find_hold(const BackendHoldKey *key, int user_off);
extern bool zklock_release_key(const BackendHoldKey *key, int user_off);
extern int zklock_release_session_holds(ZklockKind kind, const char *path);

/* backend/xact.c */
extern const char *zklock_xact_lost_lock(void);
extern void zklock_rely_on_state(ZklockKind kind, int idx, uint32 serial,
								 uint64 epoch, const char *user_path);
extern bool zklock_xact_relied_state(int *idx, uint32 *serial, uint64 *epoch);
extern void zklock_drop_hold(BackendHold *ll, bool xact);

/* backend/cancel_on_loss.c */
extern void zklock_loss_watch_update(void);

/* backend/acquire.c */
extern bool zklock_acquire_lock(ZklockAsk *ask, text *path);
extern int64 zklock_path_request(FunctionCallInfo fcinfo, ZklockOp op,
								 ZklockKind kind, int64 timeout_ms,
								 bool answer_now, bool *timed_out);
extern bool zklock_release_lock(ZklockKind kind, text *path);
extern bool zklock_request_lock(ZklockAsk *ask, const BackendHoldKey *key,
								int user_off, int *idx, uint32 *serial);

/* backend/channel.c */
extern const char *zklock_down_state_name(ZklockConnState cs);
extern bool zklock_down_too_long(ZklockConnState cs, TimestampTz now,
								 TimestampTz *down_since);
extern int64 zklock_remaining_ms(int64 timeout_ms, TimestampTz start);
extern int zklock_claim_slot(const ZklockAsk *ask, const BackendHoldKey *key,
							 int user_off, uint32 *serial);
extern void zklock_init_ask(ZklockAsk *ask, ZklockOp op, ZklockKind kind,
							int64 timeout_ms, bool xact);
extern int64 zklock_run_request(ZklockAsk *ask, const BackendHoldKey *key,
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
								 BackendHoldKey *key, int *user_off);
extern text *zklock_path_arg(FunctionCallInfo fcinfo, int argno);
extern int64 zklock_timeout_arg(FunctionCallInfo fcinfo, int argno);
extern char *zklock_text_from_utf8(const char *p, int len);
extern Datum zklock_utf8_text_datum(const char *s);

#endif							/* ZKLOCK_RECIPE_SQL_H */

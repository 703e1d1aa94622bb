/*-------------------------------------------------------------------------
 *
 * worker/worker.h
 *	  What the files of the zklock worker share among themselves,
 *	  worker-wide: the flags of the event loop, and the functions one file
 *	  of the worker calls in another outside the three modules.  The
 *	  modules have their own headers, which include this one (a module's
 *	  files include it through theirs): worker/connection/connection.h
 *	  (the handle, credentials, TLS and SASL, the lease),
 *	  worker/deletes/deletes.h (the pending deletes), worker/locks/locks.h
 *	  (the lock engine); a file includes those whose declarations it
 *	  uses.  What the recipes may use of the worker (the request record
 *	  WorkerReq, the handle, the request calls, and what they call of the
 *	  modules: zklock_deletes_add and zklock_deletes_queue,
 *	  zklock_ghosts_*, zklock_lk_*, the handover layer's table,
 *	  zklock_layer_released, zklock_handover_choose) is declared in
 *	  recipes/recipe_worker.h instead, so a file calls it without the
 *	  module's header; it and the descriptor, recipes/recipe.h, are
 *	  included here.  Only the worker process includes it.
 *
 *	  Interface: ZKLOCK_DELETE_BATCH_MAX, ZKLOCK_BATCH_MAX, zklock_loop and
 *	  the zklock_request_* calls that set its flags, and the functions of
 *	  batch.c, request.c, dispatch.c, zkio.c, result_codes.c,
 *	  revocation_watch.c, deferred_log.c and the deadlock check declared
 *	  below.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZKLOCK_WORKER_INT_H
#define ZKLOCK_WORKER_INT_H

#include <zookeeper/zookeeper.h>

#include "storage/latch.h"
#include "utils/timestamp.h"

#include "zklock.h"
#include "compat.h"
#include "core/handover_rules.h"
#include "common/shmem.h"
#include "recipes/recipe.h"
#include "recipes/recipe_worker.h"

/* the most deletes, and ops in all, sent as one zookeeper multi (worker/batch.c) */
#define ZKLOCK_DELETE_BATCH_MAX	16
#define ZKLOCK_BATCH_MAX		32

/*
 * What the event loop is asked to do on its next pass.  worker/event_loop.c
 * owns it (zklock_loop); the files it calls set a flag only through the
 * calls below, which say why, and read it through zklock_loop.  (Inline:
 * a call into event_loop.c would run back up the call graph.)
 */
typedef struct ZklockLoopFlags
{
	bool		rescan;			/* look at every slot, not only the posted */
	bool		deletes_scan;	/* send every due pending delete */
	ZklockMonoTime deletes_next_retry;	/* earliest end of a delete's pause
										 * (monotonic), 0: none */
	bool		need_reconnect; /* close the handle, open a new one */
	bool		wes_rebuild;	/* the client's socket may have changed */
} ZklockLoopFlags;

extern ZklockLoopFlags zklock_loop;

/*
 * Look at every slot on the next pass, not only the posted ones: a request
 * waits for something no post announces (the connection, room in the
 * pending-delete table, a watch to arm again).
 */
static inline void
zklock_request_rescan(void)
{
	zklock_loop.rescan = true;
}

/*
 * The full pass over the slots asked for is being made (worker/dispatch.c).
 */
static inline void
zklock_rescan_done(void)
{
	zklock_loop.rescan = false;
}

/*
 * Send every due pending delete on the next pass: one was added or failed
 * to leave, or the connection is new.
 */
static inline void
zklock_request_deletes_scan(void)
{
	zklock_loop.deletes_scan = true;
}

/*
 * A pending delete pauses until at: wake up for it then, unless for an
 * earlier one.
 */
static inline void
zklock_request_delete_retry(ZklockMonoTime at)
{
	if (zklock_loop.deletes_next_retry == 0 || at < zklock_loop.deletes_next_retry)
		zklock_loop.deletes_next_retry = at;
}

/*
 * The pass over the pending deletes asked for is being made
 * (zklock_deletes_send); the entries still pausing ask again.
 */
static inline void
zklock_deletes_scan_done(void)
{
	zklock_loop.deletes_scan = false;
	zklock_loop.deletes_next_retry = 0;
}

/*
 * The handle is of no more use (the session expired, its lease ran out,
 * the servers rejected the credentials): close it and open a new one.
 */
static inline void
zklock_request_reconnect(void)
{
	zklock_loop.need_reconnect = true;
}

/*
 * The client's socket may have changed (a handle opened, a session event):
 * build the wait set anew before the next wait.
 */
static inline void
zklock_request_wait_set_rebuild(void)
{
	zklock_loop.wes_rebuild = true;
}

/* worker/deadlock_records.c, deadlock_check.c: deadlocks across clusters */
extern void zklock_dlx_rec_asked(int idx);
extern void zklock_dlx_check_pass(void);

/* worker/zkio.c */
extern const void *zklock_zkio_make_tag(int idx, uint32 serial);

/* worker/result_codes.c */
extern int	zklock_rc_sqlstate(int rc);

/* worker/batch.c */
extern bool zklock_batch_create(const char *path, const char *data, int len,
								int mode, const struct ACL_vector *acl,
								string_stat_completion_t done, const void *tag);
extern void zklock_batch_flush(void);
extern void zklock_batch_send_ready(void);

/* worker/request.c */
extern void zklock_req_continue(int idx);
extern void zklock_req_reset(int idx);
extern void zklock_req_withdraw(int idx);
extern void zklock_req_send_listing2(int idx, const char *path,
									 strings_stat_completion_t done);

/* worker/dispatch.c */
extern void zklock_dispatch_fail_auth_rejected(int idx);
extern void zklock_dispatch_run_requests(void);
extern void zklock_dispatch_sweep_lost_session(const char *why);

/* worker/revocation_watch.c */
extern void zklock_revoke_watch(int idx);

/* worker/deferred_log.c */
extern void zklock_worker_log_init(void);
extern void zklock_worker_log_flush(void);

#endif							/* ZKLOCK_WORKER_INT_H */

/*-------------------------------------------------------------------------
 *
 * recipes/recipe_worker.h
 *	  What the worker side offers recipes (the recipe contract's worker
 *	  half; recipes/recipe.h is the descriptor): the request record
 *	  WorkerReq (zklock_reqs[idx], beside zklock_shared->slots[idx]) with
 *	  its per-recipe union rcp (ZklockRecipeWork, common/recipe_fields.h),
 *	  the worker's handle, and the calls a recipe's worker steps may make,
 *	  by the file of worker/ that offers them.  It includes the ZooKeeper
 *	  client's header; worker/worker.h includes it, and a recipe file that
 *	  has worker steps.  backend/ never includes it (test/callgraph.pl).
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZKLOCK_RECIPE_WORKER_H
#define ZKLOCK_RECIPE_WORKER_H

#include <zookeeper/zookeeper.h>

#include "zklock.h"
#include "core/handover_rules.h"
#include "common/shmem.h"
#include "recipes/recipe.h"

/* ---------------------------------------------------------------------
 * The worker's request record: what a recipe's steps keep beside the
 * slot, in the worker process only
 * ---------------------------------------------------------------------
 */

/* how often a request may find its parent missing before we give up */
#define MAX_NONODE_RETRIES	5
/* how often our own node may vanish under us before we give up */
#define MAX_LOST_RETRIES	10
/*
 * Process-local state of one request slot (zklock_reqs[i], beside
 * zklock_shared->slots[i]).  What it waits for (wait, a ZklockWaitState of
 * core/handover_rules.h) is set only with zklock_req_set_wait, which
 * asserts the move is one of zklock_wait_move_ok's.
 */
typedef struct WorkerReq
{
	uint32		serial;			/* slot serial this belongs to, 0 = none */
	int			inflight;		/* async calls whose completion is due (an
								 * add in a counter fold has none: the
								 * fold's calls are the fold's) */
	ZklockWaitState wait;		/* what it waits for (zklock_req_set_wait) */
	struct						/* beside each of the slot's nodes */
	{
		bool		create_sent;	/* a create of it may have reached the
									 * server */
		bool		doubt;		/* a create of it was in doubt: a late one
								 * may make a second node with its prefix
								 * (worker/deletes/ghosts.c) */
	}			nodes[ZKN_COUNT];
	bool		need_parents;	/* create the parents before the node */
	bool		parent_guarded;	/* lock engine: P passed the path guard
								 * (LockTarget.parent_guard) */
	char		pred[ZKLOCK_NODE_NAME_SIZE];	/* lock engine: the node our
												 * latest listing made us
												 * wait on ("": none) */
	bool		pred_last;		/* pred is the only node keeping us out */
	struct						/* the handover layer's own
								 * (worker/locks/handover_layer.c) */
	{
		int			owner;		/* a local or following wait
								 * (ZKWS_LOCAL, ZKWS_FOLLOWING): the slot
								 * owning pred */
		uint32		owner_serial;	/* ... and its serial then */
	}			follow;
	bool		revoke_armed;	/* a revocable lock: the getData watch on our
								 * node is registered (or on its way) */
	int			skip_lists;		/* pipelined listings to ignore */
	bool		list_piped;		/* lock engine: the listing went out right
								 * behind the create being answered */
	uint64		create_no;		/* lock engine: number of the create sent
								 * last (see released_readers) */
	bool		seq_proven;		/* lock engine: the last create's sequence
								 * number proved no foreign create since the
								 * path was listed
								 * (worker/locks/handover_numbering.c) */
	int			nonode_retries;
	int			lost_retries;
	char		adopt_name[ZKLOCK_NODE_NAME_SIZE];	/* node found by prefix,
													 * being checked */
	ZklockRecipeWork rcp;		/* per recipe: a request uses only the
								 * member of its own op */
	MemoryContext cxt;			/* the request's own allocations
								 * (zklock_req_memory), or NULL */
} WorkerReq;

/* Is the request waiting for the connection (either parked state)? */
static inline bool
zklock_req_parked(const WorkerReq *req)
{
	return req->wait == ZKWS_PARKED || req->wait == ZKWS_PARKED_RECOVER;
}

/* the worker's handle and whether it is connected
 * (worker/connection/connection.c), and the request records beside
 * zklock_shared->slots (worker/request.c) */
extern zhandle_t *zklock_zh;
extern bool zklock_connected;
extern WorkerReq *zklock_reqs;

/* ---------------------------------------------------------------------
 * Request calls (worker side): what a recipe's steps may call, by the
 * file that offers it.  A completion begins with zklock_req_completion_begin
 * (or _create_begin, _listing_begin), which takes the lock, and ends at
 * each exit with zklock_req_completion_end, which releases it; every call
 * below expects the caller to hold it.
 * ---------------------------------------------------------------------
 */

/*
 * worker/locks/lock_engine.c: the steps lock recipes name in their
 * descriptors
 */
extern void zklock_lk_resume(int idx, bool recover);

/* worker/zkio.c */
extern void zklock_zkio_create_containers(const char *path, bool include_self);
extern bool zklock_zkio_new_uuid(char *out);
extern struct ACL_vector *zklock_zkio_node_acl(void);
extern void zklock_zkio_node_path(ZklockSlot *slot, const char *name, char *buf,
								  size_t len);
extern const void *zklock_zkio_slot_tag(int idx);
extern int zklock_zkio_tag_current(const void *tag);

/* worker/result_codes.c */
extern bool zklock_rc_refused(int rc);
extern bool zklock_rc_retryable(int rc);
extern bool zklock_rc_session_gone(int rc);

/* worker/deletes/deletes.c */
extern bool zklock_deletes_add(const char *path, const char *prefix,
							   bool persistent, uint64 gen, int64 czxid,
							   int64 ctime);
extern void zklock_deletes_queue(const char *path, const char *prefix);

/* worker/deletes/ghosts.c */
extern void zklock_ghosts_delete(const char *base, char *const *children,
								 int n);
extern void zklock_ghosts_note_doubt(int idx, bool aux);
extern void zklock_ghosts_sweep_doubted(int idx, bool aux_only);

/* worker/request.c */
extern void zklock_req_call_failed(int idx, int rc, const char *what);
extern void zklock_req_call_sent(int idx, int rc);
extern int zklock_req_completion_begin(const void *data);
extern void zklock_req_completion_end(void);
extern int zklock_req_create_begin(int rc, const char *value, const void *data);
extern void zklock_req_create_took(int idx, const char *value, char *node,
								   Size node_size, bool *create_sent);
extern bool zklock_req_create_failed(int idx, int rc, char *uuid, bool *create_sent,
									 bool fixed_name, bool listing_follows,
									 const char *what);
extern void zklock_req_give_up_try(int idx);
extern int zklock_req_listing_begin(const void *data);
extern void zklock_req_grant(int idx);
extern void zklock_req_park(int idx, bool recover);
extern void zklock_req_clear_nodes(ZklockSlot *slot);
extern void zklock_req_fail(int idx, int sqlerrcode, const char *fmt,...) pg_attribute_printf(3, 4);
extern void zklock_req_finish(int idx, ZklockResult result, int64 value);
extern MemoryContext zklock_req_memory(int idx);
extern void zklock_req_set_wait(int idx, ZklockWaitState to);
extern bool zklock_req_retry_with_parents(int idx);
extern bool zklock_req_send_exists_watch(int idx, const char *path,
										 stat_completion_t done, bool recover);
extern void zklock_req_send_listing(int idx, const char *path,
									strings_completion_t done, bool watch,
									bool recover);
extern bool zklock_req_settle_cancel(int idx);
extern void zklock_req_start(int idx);
extern void zklock_req_step_watcher(zhandle_t *zzh, int type, int state,
									const char *path, void *ctx);

/* worker/locks/lock_engine.c */
extern void zklock_lk_adopt_check(int idx, const char *base, const char *name);
extern void zklock_lk_create(int idx);
extern void zklock_lk_list(int idx);
extern void zklock_lk_target_own(int idx, LockTarget *t, const char *lock_name,
								 bool rw, bool read);

/* worker/locks/handover_layer.c */
extern const ZklockHandoverLayer zklock_handover_layer;
extern void zklock_layer_released(int idx);

/* worker/locks/handover.c */
extern int	zklock_handover_choose(const char *base, const char *node,
								   bool held_mutex);

#endif							/* ZKLOCK_RECIPE_WORKER_H */

/*-------------------------------------------------------------------------
 *
 * worker/worker.h
 *	  What the files of the zklock worker share among themselves: the flags
 *	  of the event loop, the handover layer's table, the pending deletes'
 *	  local state, and the functions one file of the worker calls in
 *	  another.  What the recipes may use of the worker (the request record
 *	  WorkerReq, the handle, the request calls) is declared in
 *	  recipes/recipe_worker.h; it and the descriptor, recipes/recipe.h,
 *	  are included here.  Only the worker process includes it.
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

/* most readers one release hands the lock to at once */
#define ZKLOCK_HANDOVER_MAX	64
/* how often the worker checks the waits on its own nodes (ms) */
#define LOCAL_WAIT_CHECK_MS	1000

/*
 * The worker's progress on an entry of the shared pending-delete table
 * (zklock_deletes), process-local: whether a call for it is on its way and when it may be
 * tried again.  It belongs to the entry's serial; a restarted worker
 * starts with none and so sends every entry again.
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

/* the most deletes, and ops in all, sent as one zookeeper multi (worker/batch.c) */
#define ZKLOCK_DELETE_BATCH_MAX	16
#define ZKLOCK_BATCH_MAX		32

/* pauses between tries of a pending delete (ms) */
#define DELETE_RETRY_MIN_MS		100
#define DELETE_RETRY_BASE_MS	200
#define DELETE_RETRY_MAX_MS		10000

/*
 * The handover layer as the lock engine calls it (worker/handover_layer.c defines
 * zklock_handover_layer).  A recipe opts in by naming it in its ops entry
 * (.handover); without it the lock engine runs Curator's protocol alone,
 * round trip for round trip.  A new recipe is off until it opts in.
 */
struct ZklockHandoverLayer
{
	/* may the create of idx's node go without the listing behind it? */
	bool		(*create_alone) (int idx, const LockTarget *t);
	/* a create sent alone took: place the node from what this worker knows */
	void		(*placed) (int idx);
	/* a listing put idx behind pred: wait without a watch (true: it does) */
	bool		(*wait_behind) (int idx, const LockTarget *t, const char *pred,
								int blockers);
	/* a read lock request has its answer: the readers following it share it */
	void		(*settle_followers) (int idx, bool granted);
	/* a node of this worker is going away: its local waiters look again */
	void		(*node_gone) (const char *path);
	/* a listing of base answered: what the next creates may skip */
	void		(*listed) (const char *base, const struct Stat *stat,
						   char **children, int n);
	/* a create of ours under base took: does its number prove it alone? */
	bool		(*created) (const char *base, const char *node);
	/* a create under base did what the numbering does not count */
	void		(*forget) (const char *base);
	/* may idx's create go alone, its number to tell whether it is first? */
	bool		(*may_skip) (int idx, const LockTarget *t);
};

/*
 * State of the worker process (defined in worker/event_loop.c), besides
 * what recipes/recipe_worker.h declares (the handle, whether it is connected,
 * the request records): the open handle's hosts and serial, and the
 * process-local state beside each entry of the pending-delete table.
 */
extern char *zklock_connected_hosts;	/* zklock.hosts of the open handle */
extern uint32 zklock_conn_serial;	/* which connection: bumped for each */
extern DeleteProgress *zklock_delete_progress;	/* beside zklock_deletes */

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
 * delete table, a watch to arm again).
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
 * (zklock_send_deletes); the entries still pausing ask again.
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

/*
 * The servers rejected zklock.auth: when that began, 0 when they did not
 * (worker/auth.c).  Until a server accepts the credentials again,
 * zk_status() says auth_failed and requests fail.
 */
extern TimestampTz zklock_auth_failed_at;

static inline bool
zklock_auth_rejected(void)
{
	return zklock_auth_failed_at != 0;
}

/* worker/path_index.c: the worker's lock engine slots by their lock's base */
extern void zklock_pathidx_init(void);
extern void zklock_pathidx_add(int idx);
extern void zklock_pathidx_remove(int idx);
extern int	zklock_pathidx_first(const char *base);
extern int	zklock_pathidx_next(int i);
extern int	zklock_pathidx_check(void);

/* worker/deadlock_records.c, deadlock_check.c: deadlocks across clusters */
extern void zklock_dlx_rec_asked(int idx);
extern void zklock_dlx_check_pass(void);

/* worker/zkio.c */
extern const void *zklock_make_tag(int idx, uint32 serial);
extern int zklock_rc_sqlstate(int rc);

/* worker/delete_table.c: the entries of the pending-delete table */
extern bool zklock_delete_record(const char *path, const char *prefix,
								 bool persistent, uint64 gen, int64 czxid,
								 int64 ctime, int *entry);
extern void zklock_delete_free(int i);
extern DeleteProgress *zklock_delete_progress_of(int i);
extern int	zklock_delete_tag_current(const void *tag);
extern int	zklock_delete_find_persistent(const char *path, const char *prefix,
										  int64 czxid);
extern bool zklock_delete_pending(const char *path);
extern bool zklock_delete_pending_under(const char *path);
extern int	zklock_delete_find_ephemeral(const char *path);
extern bool zklock_delete_guarded_by(const char *base, const char *node);
extern bool zklock_deletes_have_room(int n);
extern void zklock_drop_session_deletes(void);
extern void zklock_deletes_mark_dirty(void);
extern void zklock_deletes_persist(void);

/* worker/deletes.c: sending them, until the server confirms */
extern int	zklock_deletes_ready(void);
extern int	zklock_deletes_take_ready(int *idx, uint32 *serial, int max);
extern void zklock_delete_send_alone(int i);
extern void zklock_delete_batch_answer(int i, uint32 serial, int rc);
extern bool zklock_delete_guard(const char *path, const char *guard);
extern bool zklock_deletes_due(ZklockMonoTime now);
extern void zklock_deletes_load(void);
extern void zklock_send_deletes(void);

/* worker/batch.c */
extern bool zklock_batch_create(const char *path, const char *data, int len,
								int mode, const struct ACL_vector *acl,
								string_stat_completion_t done, const void *tag);
extern void zklock_batch_flush(void);
extern void zklock_batch_send_ready(void);

/* worker/request.c */
extern void zklock_continue_request(int idx);
extern void zklock_req_reset(int idx);
extern void zklock_req_withdraw(int idx);
extern void zklock_send_listing2(int idx, const char *path,
								 strings_stat_completion_t done);

/* worker/dispatch.c */
extern void zklock_fail_auth_rejected(int idx);
extern void zklock_run_requests(void);
extern void zklock_sweep_lost_session(const char *why);

/* worker/lock_engine.c */
extern uint64 zklock_lk_creates_sent;
extern void zklock_lk_target(int idx, LockTarget *t);
extern void zklock_lk_granted(int idx);

/* worker/handover_layer.c: the lock engine's handover layer */
extern void (*const zklock_node_gone_hook) (const char *path);
extern void (*const zklock_guard_answer_hook) (const char *path,
												const char *guard, bool there);
extern void zklock_lk_check_local_waits(void);

/* worker/handover.c: local handover, its steps and safety net */
extern void zklock_handover_node_gone(int idx, const LockTarget *t);
extern void zklock_handover_safety_net(void);
extern void zklock_handover_guard_answer(const char *path, const char *guard,
										 bool there);

/* worker/handover_numbering.c: what a listing taught, to skip the next ones */
extern void zklock_numbering_listed(const char *base, const struct Stat *stat,
								char **children, int n);
extern bool zklock_numbering_may_skip(int idx, const LockTarget *t);
extern bool zklock_numbering_created(const char *base, const char *node);
extern void zklock_numbering_forget(const char *base);
extern bool zklock_numbering_first(int idx, const LockTarget *t, bool proven);

/* worker/revocation_watch.c */
extern void zklock_revoke_watch(int idx);

/* worker/deferred_log.c */
extern void zklock_worker_log_init(void);
extern void zklock_worker_log_flush(void);

/* worker/tls_context.c: each TLS connection's context */
#if ZKLOCK_HAVE_ZK_TLS
extern void *zklock_tls_connection_context(zhandle_t *zh, int sock, void *arg);
extern bool zklock_tls_files_ok(char *why, size_t len);
extern const char *zklock_tls_refusal(void);
extern void zklock_tls_refusal_clear(void);
extern void zklock_tls_connected(const char *server);
#endif

/* worker/secure.c: TLS and SASL */
extern zhandle_t *zklock_secure_init_handle(watcher_fn watcher, int timeout,
											const clientid_t *cid);
extern void zklock_secure_call_failed(zhandle_t *zzh, int rc);
extern void zklock_secure_login_refused(zhandle_t *zzh);
extern void zklock_secure_sasl_required(zhandle_t *zzh);
extern void zklock_secure_proven(void);
extern void zklock_secure_connected(void);
extern bool zklock_secure_failed(void);
extern ZklockConnState zklock_secure_failed_state(ZklockConnState otherwise);
extern void zklock_secure_fail_request(int idx);
extern bool zklock_secure_may_open(void);
extern void zklock_secure_retry_now(void);
extern bool zklock_secure_settings_changed(void);
extern bool zklock_secure_uses_sasl(void);

/* worker/auth.c: credentials the servers reject */
extern void zklock_credentials_rejected(zhandle_t *zzh);
extern void zklock_credentials_accepted(void);
extern ZklockConnState zklock_not_connected_state(void);
extern bool zklock_handle_may_open(void);
extern void zklock_auth_retry_later(void);
extern void zklock_auth_retry_now(void);
extern long zklock_auth_wakeup_ms(ZklockMonoTime now, long max_ms);

/* worker/lease.c: the lease, its heartbeats and the kind of server */
extern void zklock_lease_connected(zhandle_t *zzh);
extern void zklock_lease_forget(void);
extern void zklock_lease_timeout_seen(int timeout_ms);
extern void zklock_lease_settings_changed(void);
extern void zklock_track_handshake(ZklockMonoTime before);
extern void zklock_heartbeat(ZklockMonoTime now);
extern long zklock_lease_wakeup_ms(ZklockMonoTime now, long max_ms);
extern void zklock_check_lease(ZklockMonoTime now);
extern void zklock_cut_stuck_attempt(int fd, ZklockMonoTime now);
extern bool zklock_attempt_cut;

/* worker/connection.c */
extern void zklock_open_handle(void);
extern void zklock_connect_failed(int rc, int err);

/* worker/lock_cache.c */
extern bool zklock_cache_take(int idx, const LockTarget *t);
extern void zklock_cache_keep(int idx, const LockTarget *t, int handed_over);
extern void zklock_cache_tick(ZklockMonoTime now);
extern void zklock_cache_connection_lost(void);
extern void zklock_cache_session_lost(void);
extern void zklock_cache_worker_start(void);

#endif							/* ZKLOCK_WORKER_INT_H */

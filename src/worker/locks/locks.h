/*-------------------------------------------------------------------------
 *
 * worker/locks/locks.h
 *	  The lock engine as the rest of the worker calls it: the index of its
 *	  slots by their lock's base (path_index.c), each slot's lock target
 *	  (lock_engine.c), the checks of local waits and the hooks of the
 *	  handover layer (handover_layer.c), the cache of idle lock nodes
 *	  (lock_cache.c).  What the recipes call of it is in
 *	  recipes/recipe_worker.h: zklock_lk_create, zklock_lk_list,
 *	  zklock_lk_adopt_check, zklock_lk_resume, zklock_lk_target_own, the
 *	  handover layer's table, zklock_layer_released and
 *	  zklock_handover_choose.  What the module's files call of each other
 *	  (zklock_lk_granted, zklock_lk_creates_sent, handover.c,
 *	  handover_numbering.c among them) is in locks_int.h.
 *
 *	  Interface: LOCAL_WAIT_CHECK_MS, zklock_node_gone_hook,
 *	  zklock_guard_answer_hook, and the functions below.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZKLOCK_WORKER_LOCKS_H
#define ZKLOCK_WORKER_LOCKS_H

#include "worker/worker.h"

/* how often the worker checks the waits on its own nodes (ms) */
#define LOCAL_WAIT_CHECK_MS	1000

/* worker/locks/path_index.c: the lock engine's slots by their lock's base */
extern void zklock_pathidx_init(void);
extern void zklock_pathidx_add(int idx);
extern void zklock_pathidx_remove(int idx);
extern int	zklock_pathidx_check(void);

/* worker/locks/lock_engine.c */
extern void zklock_lk_target(int idx, LockTarget *t);

/* worker/locks/handover_layer.c: the lock engine's handover layer */
extern void (*const zklock_node_gone_hook) (const char *path);
extern void (*const zklock_guard_answer_hook) (const char *path,
												const char *guard, bool there);
extern void zklock_layer_check_local_waits(void);

/* worker/locks/lock_cache.c */
extern void zklock_cache_tick(ZklockMonoTime now);
extern void zklock_cache_connection_lost(void);
extern void zklock_cache_session_lost(void);
extern void zklock_cache_worker_start(void);

#endif							/* ZKLOCK_WORKER_LOCKS_H */

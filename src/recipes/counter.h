/*-------------------------------------------------------------------------
 *
 * recipes/counter.h
 *	  What the worker's files of the shared counters share: the fence and
 *	  the write in doubt (recipes/counter_fence.c), which a request of its
 *	  own (recipes/counter.c) and a fold of adds (recipes/counter_fold.c)
 *	  both apply, and the fold's entry.  Only these three files include
 *	  it; the counters' SQL side (recipes/counter_sql.c) does not.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZKLOCK_COUNTER_H
#define ZKLOCK_COUNTER_H

#include "common/shmem.h"
#include "recipes/recipe.h"
#include "recipes/recipe_worker.h"

/* recipes/counter_fence.c: what every write passes */
extern bool zklock_counter_write_fenced(int idx);
extern bool zklock_counter_write_in_doubt(const ZklockSlot *slot);
extern void zklock_counter_fail_in_doubt(int idx, const char *why);
extern void zklock_counter_write_failed(int idx, int rc, const char *what);
extern const char *zklock_counter_guard(int rc,
										const struct String_vector *strings);

/* recipes/counter_fold.c: the adds folded into one read and one write */
extern void zklock_counter_fold_join(int idx);

#endif							/* ZKLOCK_COUNTER_H */

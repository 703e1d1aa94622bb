/*-------------------------------------------------------------------------
 *
 * core/recipe_guard.h
 *		The path guard's decision (core/recipe_guard.c): which other
 *		recipe the nodes a call meets on its path belong to.  Pure C, libc
 *		only; unit-tested (test/unit/test_recipe_guard.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZKLOCK_RECIPE_GUARD_H
#define ZKLOCK_RECIPE_GUARD_H

#include <stdbool.h>

/* the recipe of a call, as far as the path guard is concerned */
typedef enum ZklockGuardRecipe
{
	ZKG_NONE = 0,				/* nothing is looked at */
	ZKG_MUTEX,					/* "lock-" nodes under P (InterProcessMutex,
								 * LeaderSelector) */
	ZKG_RWLOCK,					/* "__READ__"/"__WRIT__" nodes under P */
	ZKG_LATCH,					/* "latch-" nodes under P (LeaderLatch) */
	ZKG_DOUBLE_BARRIER,			/* bare UUIDs and "ready" under P */
	ZKG_COUNTER,				/* P itself, persistent, with a value */
	ZKG_BARRIER,				/* P itself, persistent: its children, if
								 * any, are the user's */
	ZKG_SEMAPHORE				/* "leases" and "locks" under P: P is
								 * looked at only when they are made */
} ZklockGuardRecipe;

/* "a mutex's", "a leader latch's", ...: for "..., not <it>" */
extern const char *zklock_guard_recipe_name(ZklockGuardRecipe r);

/*
 * What the children of P show of another recipe than r ("a mutex's lock
 * nodes", ...), or NULL.  own: the caller's own sequential node among
 * them, or NULL; when given, another recipe's sequential node counts only
 * when it is older than own.
 */
extern const char *zklock_guard_children(ZklockGuardRecipe r,
										 char *const *children, int n,
										 const char *own);

#endif							/* ZKLOCK_RECIPE_GUARD_H */

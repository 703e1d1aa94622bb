/*-------------------------------------------------------------------------
 *
 * zklock_local_rules.h
 *	  The local layer's decisions (zklock_local.c), as pure functions: no
 *	  PostgreSQL or ZooKeeper calls, unit-tested in test/unit.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZKLOCK_LOCAL_RULES_H
#define ZKLOCK_LOCAL_RULES_H

#include <stdbool.h>

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

#endif							/* ZKLOCK_LOCAL_RULES_H */

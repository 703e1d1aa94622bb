/*-------------------------------------------------------------------------
 *
 * core/recipe_guard.c
 *	  The path guard: whether the nodes a call meets on its path P are
 *	  another recipe's (doc/wire.md has the layouts).  The recipes ask it
 *	  from the listing of P they make anyway (a mutex, a read/write lock, a
 *	  leader latch, a double barrier entering); a barrier's wait lists P
 *	  only when its exists showed children (numChildren), which a barrier
 *	  node normally has none of; a counter lists P only when its read
 *	  found children (recipes/counter_fence.c, zklock_counter_guard), which
 *	  its node has none of; a semaphore, whose nodes are under P/locks and
 *	  P/leases, lists P only when it has to make those (its first create
 *	  under P/locks found no parent).  The call then fails with 22023
 *	  naming what P holds, and nothing else changes (Curator clients on
 *	  the path are not refused anything).
 *
 *	  Only unambiguous shapes count.  A child is another recipe's only when
 *	  its whole name is that recipe's node name: Curator's protected name
 *	  "_c_<uuid>-<marker><10 digits>" or the bare "<marker><10 digits>";
 *	  a semaphore (InterProcessSemaphoreV2) shows as its two children
 *	  "leases" and "locks" together.  A user may lock /a and /a/b, so a
 *	  child "b" of /a is nobody's, and a bare UUID (a double barrier
 *	  member) is too plain a name to refuse a lock on.  A mutex and
 *	  Curator's LeaderSelector are one recipe ("lock-" nodes).
 *
 *	  A lock call (which has a sequential node of its own among the
 *	  children) counts only the other recipe's sequential nodes older than
 *	  its own: the older call keeps the path, and a node that appeared
 *	  after ours is the newer call's to refuse (a waiter that lists again
 *	  is not failed by a newcomer that is itself about to be refused).
 *	  ZooKeeper numbers all sequential children of one parent from one
 *	  counter, so their numbers compare across recipes.
 *
 *	  P's Stat does not tell a lock's container parent from a persistent
 *	  node: ZooKeeper keeps Long.MIN_VALUE as a container's ephemeralOwner
 *	  (EphemeralType.CONTAINER_EPHEMERAL_OWNER) but answers 0 to clients
 *	  for every node that is not a session's ephemeral
 *	  (DataNode.getClientEphemeralOwner).  Only the children tell.
 *
 *-------------------------------------------------------------------------
 */
#include <stddef.h>
#include <string.h>

#include "core/curator_rules.h"
#include "core/names.h"
#include "core/recipe_guard.h"

/*
 * Is name exactly marker followed by ten digits, bare or behind Curator's
 * protection prefix "_c_<uuid>-"?  Returns the digits, or NULL.
 */
static const char *
sequence_of(const char *name, const char *marker)
{
	size_t		mlen = strlen(marker);
	size_t		len;
	size_t		i;

	if (strncmp(name, ZKLOCK_PROTECTED_PREFIX, 3) == 0)
	{
		char		uuid[ZKLOCK_UUID_LEN + 1];

		if (strlen(name) < ZKLOCK_PROTECTED_PREFIX_LEN)
			return NULL;
		memcpy(uuid, name + 3, ZKLOCK_UUID_LEN);
		uuid[ZKLOCK_UUID_LEN] = '\0';
		if (!zklock_is_uuid(uuid) || name[3 + ZKLOCK_UUID_LEN] != '-')
			return NULL;
		name += ZKLOCK_PROTECTED_PREFIX_LEN;
	}
	len = strlen(name);
	if (len != mlen + ZKLOCK_SEQ_DIGITS || strncmp(name, marker, mlen) != 0)
		return NULL;
	for (i = mlen; i < len; i++)
		if (name[i] < '0' || name[i] > '9')
			return NULL;
	return name + mlen;
}

/*
 * The ten digits of a lock call's own node, whatever its marker, or NULL.
 */
static const char *
own_sequence(const char *own)
{
	size_t		len;
	size_t		i;

	if (own == NULL)
		return NULL;
	len = strlen(own);
	if (len < ZKLOCK_SEQ_DIGITS)
		return NULL;
	for (i = len - ZKLOCK_SEQ_DIGITS; i < len; i++)
		if (own[i] < '0' || own[i] > '9')
			return NULL;
	return own + len - ZKLOCK_SEQ_DIGITS;
}

/*
 * "a mutex's", "a read/write lock's", ...: the recipe a refused call asked
 * for, for the end of its message ("..., not a leader latch's").
 */
const char *
zklock_guard_recipe_name(ZklockGuardRecipe r)
{
	switch (r)
	{
		case ZKG_MUTEX:
			return "a mutex's";
		case ZKG_RWLOCK:
			return "a read/write lock's";
		case ZKG_LATCH:
			return "a leader latch's";
		case ZKG_DOUBLE_BARRIER:
			return "a double barrier's";
		case ZKG_COUNTER:
			return "a counter's";
		case ZKG_BARRIER:
			return "a barrier's";
		case ZKG_SEMAPHORE:
			return "a semaphore's";
		case ZKG_NONE:
			break;
	}
	return "this recipe's";
}

/*
 * What the children of P show of a recipe other than r, or NULL: the
 * first unambiguous node of another recipe (older than own, when own is
 * a sequential node), by the rules in the banner.
 */
const char *
zklock_guard_children(ZklockGuardRecipe r, char *const *children, int n,
					  const char *own)
{
	const char *mine = own_sequence(own);
	bool		leases = false;
	bool		locks = false;
	int			i;

	if (r == ZKG_NONE)
		return NULL;
	for (i = 0; i < n; i++)
	{
		const char *name = children[i];
		const char *seq = NULL;
		const char *what = NULL;

		if (name == NULL)
			continue;
		if (strcmp(name, ZKLOCK_LEASES_DIR) == 0)
			leases = true;
		else if (strcmp(name, ZKLOCK_LOCKS_DIR) == 0)
			locks = true;
		else if (r != ZKG_MUTEX &&
				 (seq = sequence_of(name, ZKLOCK_LOCK_NAME)) != NULL)
			what = "a mutex's lock nodes";
		else if (r != ZKG_RWLOCK &&
				 ((seq = sequence_of(name, ZKLOCK_READ_LOCK_NAME)) != NULL ||
				  (seq = sequence_of(name, ZKLOCK_WRITE_LOCK_NAME)) != NULL))
			what = "a read/write lock's nodes";
		else if (r != ZKG_LATCH &&
				 (seq = sequence_of(name, ZKLOCK_LATCH_NAME)) != NULL)
			what = "a leader latch's nodes";
		/* an older node of another recipe: ours came after it */
		if (what != NULL && (mine == NULL || strcmp(seq, mine) < 0))
			return what;
	}
	if (leases && locks && r != ZKG_SEMAPHORE)
		return "a semaphore's leases and locks";
	return NULL;
}

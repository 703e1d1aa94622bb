/*-------------------------------------------------------------------------
 *
 * worker/zkio.c
 *	  ZooKeeper I/O helpers of the worker: the tags that tie a reply to
 *	  its request, node paths and ACLs, parent containers, UUIDs.  What a
 *	  result code means is worker/result_codes.c's.
 *
 *	  zklock_zkio_make_tag				a slot index and serial as a tag
 *	  zklock_zkio_slot_tag				the tag of the request now in a slot
 *	  zklock_zkio_tag_current			the slot a tag names, or -1 when stale
 *	  zklock_zkio_node_path				the full path of a node of a slot
 *	  zklock_zkio_node_acl				the ACL of every node zklock creates
 *	  zklock_zkio_create_containers		a path's ancestors created as
 *										containers
 *	  zklock_zkio_new_uuid				a fresh protection id
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "zklock.h"
#include "common/shmem.h"
#include "common/settings.h"
#include "worker/worker.h"

static void container_done(int rc, const char *value, const void *data);

/*
 * Encode a slot index and serial into the opaque pointer that ZooKeeper
 * hands back to completions and watchers.
 */
const void *
zklock_zkio_make_tag(int idx, uint32 serial)
{
	return (const void *) (uintptr_t) (((uint64) serial << ZKLOCK_TAG_INDEX_BITS) | (uint64) idx);
}

/*
 * Tag of the request now running in slot idx.
 */
const void *
zklock_zkio_slot_tag(int idx)
{
	return zklock_zkio_make_tag(idx, zklock_shared->slots[idx].serial);
}

/*
 * Decode a tag.  Returns the slot index when the tag still names the
 * request running in that slot, -1 when it is stale.
 */
int
zklock_zkio_tag_current(const void *tag)
{
	uint64		v = (uint64) (uintptr_t) tag;
	int			idx = (int) (v & ZKLOCK_TAG_INDEX_MASK);
	uint32		serial = (uint32) (v >> ZKLOCK_TAG_INDEX_BITS);

	if (zklock_reqs == NULL || idx >= zklock_shared->nslots)
		return -1;
	if (zklock_reqs[idx].serial != serial || zklock_shared->slots[idx].serial != serial)
		return -1;
	return idx;
}

/*
 * Full path of a node of a slot: leases live under P/leases, everything
 * else directly under P.
 */
void
zklock_zkio_node_path(ZklockSlot *slot, const char *name, char *buf, size_t len)
{
	if (zklock_worker_ops(slot->op)->flags & ZKW_NODE_IN_LEASES)
		zklock_recipe_path(buf, len, slot->path, ZKLOCK_LEASES_DIR, name);
	else
		snprintf(buf, len, "%s/%s", slot->path, name);
}

/*
 * ACL for every node zklock creates, parents included: ZooKeeper checks a
 * delete or create against the parent's ACL, so a creator-only lock node
 * under an open parent could still be deleted by anyone.  Curator peers
 * that share such a path authenticate with the same digest credentials.
 */
struct ACL_vector *
zklock_zkio_node_acl(void)
{
	return zklock_acl == ZKLOCK_ACL_CREATOR ? &ZOO_CREATOR_ALL_ACL : &ZOO_OPEN_ACL_UNSAFE;
}

/*
 * Completion of a container create: nothing to do, the create queued right
 * behind it reports what matters.
 */
static void
container_done(int rc, const char *value, const void *data)
{
}

/*
 * Create every ancestor of path as a container node (and path itself when
 * include_self), the way Curator's creatingParentContainersIfNeeded does.
 * The calls are pipelined: the create queued right behind them finds its
 * parents in place, since one session's requests are applied in order.
 */
void
zklock_zkio_create_containers(const char *path, bool include_self)
{
	char		parent[ZKLOCK_NODE_PATH_SIZE];
	char	   *p;

	strlcpy(parent, path, sizeof(parent));
	for (p = parent + 1;; p++)
	{
		if (*p == '/' || *p == '\0')
		{
			char		saved = *p;

			if (saved == '\0' && !include_self)
				break;
			*p = '\0';
			(void) zoo_acreate(zklock_zh, parent, "", 0, zklock_zkio_node_acl(),
							   ZOO_CONTAINER, container_done, NULL);
			*p = saved;
			if (saved == '\0')
				break;
		}
	}
}

/*
 * A fresh protection id.
 */
bool
zklock_zkio_new_uuid(char *out)
{
	unsigned char bytes[16];

	if (!pg_strong_random(bytes, sizeof(bytes)))
		return false;
	zklock_format_uuid(bytes, out);
	return true;
}

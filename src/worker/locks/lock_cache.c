/*-------------------------------------------------------------------------
 *
 * worker/locks/lock_cache.c
 *	  Lock caching (zklock.lock_cache): a mutex node that this worker keeps
 *	  after its last local release, granted again to the next local acquire
 *	  of the same path with no ZooKeeper request, and given up as soon as
 *	  anyone else may want the lock.  The table is in shared memory
 *	  (ZklockShared.cache, common/shmem.h says what each state means).
 *
 *	  zklock_cache_take		the first step of a lock engine request: a
 *							grant from the kept node of its path, or the
 *							kept node given up (a request that may not
 *							take it)
 *	  zklock_cache_keep		a released mutex nobody of this worker takes
 *							over: keep its node instead of deleting it
 *	  zklock_cache_tick		the periodic pass: idle nodes, holders gone,
 *							caching turned off, the table over its size
 *	  zklock_cache_connection_lost, zklock_cache_session_lost,
 *	  zklock_cache_worker_start
 *							what the session's state does to kept nodes
 *
 *	  The two decisions, whether a request may take a kept node and what a
 *	  release does with its node, are pure functions of the facts this
 *	  file gathers (zklock_cache_may_take, zklock_cache_keep_decide in
 *	  core/handover_rules.c, unit-tested).
 *
 *	  Why a grant from a kept node is safe.  A node is kept only from a
 *	  holder of the mutex: its node was first in Curator's order of the
 *	  path's lock- children.  That order is the sequence number, and
 *	  every later node of anyone gets a larger one, so the node stays first
 *	  for as long as it exists.  It exists for as long as the session does,
 *	  unless this worker deletes it, which it does only by giving it up
 *	  (the entry then names it no more); no recipe deletes another
 *	  client's lock node (zk_barrier_remove refuses to).  So a backend
 *	  granted the kept node holds the lock exactly as the holder it was
 *	  kept from did, under the same session: the grant is made only while
 *	  connected in the node's session, and the lease, COMMIT, cancel and
 *	  lost-lock rules see an ordinary HELD slot.  The kept node is in no
 *	  slot while idle, so nothing of the handover layer may count on
 *	  knowing every node of this worker on the path: a node is kept only
 *	  when its holder is the only request this worker has taken on for the
 *	  path (another one's create may be on its way, and its answer judged
 *	  by the path's numbering, worker/locks/handover_numbering.c, as if no node
 *	  of ours were ahead); every later request of the path comes here
 *	  first (zklock_lk_create), and one that does not take the node queues
 *	  its delete before its own create leaves (deletes go first,
 *	  worker/batch.c); the numbering proves nothing while a delete of ours
 *	  under the path is unanswered.
 *
 *	  Fairness.  While a node is kept, a node of anyone else queued
 *	  behind it waits for it.  When the node is first kept, a listing of
 *	  the path with a children watch is sent; the watch fires on the first
 *	  child created or deleted afterwards.  A listing that shows another
 *	  node, a watch that fired, an error or a cut connection make the
 *	  entry contended: an idle node is deleted at once, a held one at its
 *	  release (or handed over locally as usual), and it is never granted
 *	  again.  So a client elsewhere waits at most for the local holder of
 *	  the moment and the delete's round trip; before the first listing is
 *	  answered, a grant may still be made from the node (nobody else is
 *	  known to be queued yet).  A path given up for a node of someone else
 *	  is not cached again for zklock.lock_cache_backoff.
 *
 *	  What is never kept or granted: a revocable holder's node (a
 *	  revocation written into an idle node would reach nobody), the node
 *	  of a holder that asked for its fencing token (zk_lock_token: tokens
 *	  strictly increase per holder), and a node for a backend whose
 *	  identity (the node's data) differs: the data in ZooKeeper always
 *	  names the backend that holds through the node, or held it last.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "zklock.h"
#include "common/shmem.h"
#include "common/settings.h"
#include "worker/locks/locks_int.h"
#include "worker/deletes/deletes.h"

static ZklockCacheEntry *cache_find(const char *base);
static int	cache_index(const ZklockCacheEntry *e);
static void cache_drop(ZklockCacheEntry *e, bool cool);
static bool cache_holder_valid(const ZklockCacheEntry *e);
static bool cache_path_alone(int idx, const char *base);
static ZklockCacheEntry *cache_new_entry(void);
static void cache_watch(ZklockCacheEntry *e);
static void cache_watcher(zhandle_t *zzh, int type, int state, const char *path,
						  void *ctx);
static void cache_listing_done(int rc, const struct String_vector *strings,
							   const struct Stat *stat, const void *data);
static ZklockCacheEntry *cache_from_tag(const void *tag);
static void cache_contended(ZklockCacheEntry *e, bool cool);

/*
 * The entry of lock path base that keeps or holds a node (IDLE, IN_USE)
 * or keeps it from caching (COOLING), NULL if none.  Caller holds the
 * lock.
 */
static ZklockCacheEntry *
cache_find(const char *base)
{
	int			i;

	for (i = 0; i < ZKLOCK_CACHE_MAX; i++)
	{
		ZklockCacheEntry *e = &zklock_shared->cache[i];

		if (e->state != ZKCE_FREE && strcmp(e->base, base) == 0)
			return e;
	}
	return NULL;
}

/* The index of entry e in the table. */
static int
cache_index(const ZklockCacheEntry *e)
{
	return (int) (e - zklock_shared->cache);
}

/*
 * Stop keeping e's node: an idle node of the current session is deleted
 * (a guaranteed delete, whose node_gone hook makes local waiters on it
 * look again); a held one stays its holder's, deleted at its release as
 * any node.  With cool, the path is not cached for
 * zklock.lock_cache_backoff.  Caller holds the lock.
 */
static void
cache_drop(ZklockCacheEntry *e, bool cool)
{
	ZklockShared *sh = zklock_shared;

	if (e->state == ZKCE_IDLE && sh->have_session && e->session_gen == sh->session_gen)
	{
		char		buf[ZKLOCK_NODE_PATH_SIZE];

		snprintf(buf, sizeof(buf), "%s/%s", e->base, e->node.name);
		zklock_deletes_queue(buf, NULL);
	}
	e->gen++;
	e->watched = false;
	e->listing = false;
	e->contended = false;
	e->node.name[0] = '\0';
	e->node.uuid[0] = '\0';
	e->holder = -1;
	if (cool && zklock_lock_cache_backoff > 0)
	{
		e->state = ZKCE_COOLING;
		e->since = ZKLOCK_MONO_PLUS_MS(zklock_mono_now(), zklock_lock_cache_backoff);
	}
	else
	{
		e->state = ZKCE_FREE;
		e->base[0] = '\0';
	}
}

/*
 * Does e's holder still hold its node (the slot and serial it was granted
 * to, HELD or being released)?  Caller holds the lock.
 */
static bool
cache_holder_valid(const ZklockCacheEntry *e)
{
	const ZklockSlot *slot;

	if (e->holder < 0 || e->holder >= zklock_shared->nslots)
		return false;
	slot = &zklock_shared->slots[e->holder];
	return slot->serial == e->holder_serial &&
		(slot->state == ZKS_HELD || slot->state == ZKS_RELEASE) &&
		strcmp(slot->nodes[ZKN_MAIN].name, e->node.name) == 0;
}

/*
 * Is slot idx the only request of this worker on lock path base?  Any
 * other one the worker has taken on (waiting, holding, being withdrawn)
 * may have a create on its way that left before the node was kept, whose
 * answer the handover layer would judge without knowing of a kept node
 * (worker/locks/handover_numbering.c: no node of this worker before it), so a
 * node is kept only when alone.  Requests not yet picked up come through
 * zklock_cache_take first.  The path index may list slots no longer under
 * base: they count too (keeping less is always safe).  Caller holds the
 * lock.
 */
static bool
cache_path_alone(int idx, const char *base)
{
	int			i;

	for (i = zklock_pathidx_first(base); i >= 0; i = zklock_pathidx_next(i))
	{
		ZklockSlotState st = zklock_shared->slots[i].state;

		if (i != idx && st != ZKS_FREE && st != ZKS_NEW && st != ZKS_DONE &&
			st != ZKS_LOST)
			return false;
	}
	return true;
}

/*
 * A free entry for a new kept node: a free or cooled-down one, else the
 * least recently used idle one (its node is deleted); NULL when the
 * table holds zklock.lock_cache_size nodes in use.  Caller holds the
 * lock.
 */
static ZklockCacheEntry *
cache_new_entry(void)
{
	ZklockMonoTime now = zklock_mono_now();
	ZklockCacheEntry *oldest = NULL;
	ZklockCacheEntry *free_e = NULL;
	int			used = 0;
	int			i;

	for (i = 0; i < ZKLOCK_CACHE_MAX; i++)
	{
		ZklockCacheEntry *e = &zklock_shared->cache[i];

		if (e->state == ZKCE_COOLING && now >= e->since)
			cache_drop(e, false);
		if (e->state == ZKCE_FREE)
		{
			if (free_e == NULL)
				free_e = e;
			continue;
		}
		if (e->state == ZKCE_COOLING)
			continue;
		used++;
		if (e->state == ZKCE_IDLE && (oldest == NULL || e->since < oldest->since))
			oldest = e;
	}
	if (used >= zklock_lock_cache_size || free_e == NULL)
	{
		if (oldest == NULL)
			return NULL;
		cache_drop(oldest, false);
		free_e = oldest;
	}
	return free_e;
}

/*
 * First step of a lock engine request on path t->base (zklock_lk_create,
 * connected): when an idle node is kept there and this request may take
 * it (a fresh mutex acquire, not revocable, with the node's identity,
 * while the lease proves the session alive: no round trip does it for
 * this grant), it becomes the request's node and true says the lock is
 * granted (the caller grants).  A kept idle node that this request may not take is
 * given up first: the request's own create then leaves behind its
 * delete.  Caller holds the lock.
 */
bool
zklock_cache_take(int idx, const LockTarget *t)
{
	ZklockShared *sh = zklock_shared;
	ZklockSlot *slot = &sh->slots[idx];
	ZklockCacheEntry *e = cache_find(t->base);
	ZklockCacheTakeFacts f;

	if (e == NULL || e->state != ZKCE_IDLE)
		return false;
	f.enabled = zklock_lock_cache;
	f.mutex = ((zklock_worker_ops(slot->op)->flags & ZKW_CACHEABLE) != 0 &&
			   t->final && !t->rw);
	f.fresh = (t->node[0] == '\0' && t->uuid[0] == '\0' && !*t->create_sent &&
			   !zklock_reqs[idx].nodes[ZKN_MAIN].doubt);
	f.revocable = slot->revocable;
	f.downgrade = (slot->downgrade_seq[0] != '\0');
	f.contended = e->contended;
	f.same_session = (sh->have_session && e->session_gen == sh->session_gen);
	f.lease_valid = zklock_lease_valid(zklock_mono_now(), NULL);
	f.same_identity = (strcmp(slot->data, e->data) == 0);
	if (!zklock_cache_may_take(&f))
	{
		cache_drop(e, false);
		return false;
	}
	strlcpy(slot->nodes[ZKN_MAIN].name, e->node.name, sizeof(slot->nodes[ZKN_MAIN].name));
	strlcpy(slot->nodes[ZKN_MAIN].uuid, e->node.uuid, sizeof(slot->nodes[ZKN_MAIN].uuid));
	slot->nodes[ZKN_MAIN].deleted = false;
	slot->czxid = e->czxid;
	slot->session_gen = e->session_gen;
	slot->token_asked = false;
	e->state = ZKCE_IN_USE;
	e->holder = idx;
	e->holder_serial = slot->serial;
	sh->counters.cache_grants++;
	elog(DEBUG2, "zklock: lock cache: slot %d serial %u granted %s/%s from the cache",
		 idx, slot->serial, e->base, e->node.name);
	return true;
}

/*
 * A mutex held by slot idx was released and no waiter of this worker
 * takes it over (handed_over is how many the handover chose): keep its
 * node for the next local acquire when caching is on and the node may be
 * kept; then the slot no longer names the node, so its withdrawal deletes
 * nothing.  A node the handover chose successors for, or whose entry is
 * contended, is not kept (and a contended path cools down).  Caller holds
 * the lock.
 */
void
zklock_cache_keep(int idx, const LockTarget *t, int handed_over)
{
	ZklockShared *sh = zklock_shared;
	ZklockSlot *slot = &sh->slots[idx];
	ZklockCacheEntry *e = cache_find(t->base);
	bool		was_kept = (e != NULL && e->state == ZKCE_IN_USE &&
							e->holder == idx && e->holder_serial == slot->serial);
	ZklockCacheKeepFacts f;
	ZklockCacheKeep what;

	/* an entry whose holder went without a release names nobody */
	if (e != NULL && e->state == ZKCE_IN_USE && !was_kept && !cache_holder_valid(e))
	{
		cache_drop(e, false);
		e = NULL;
	}
	if (e != NULL && e->state == ZKCE_COOLING && zklock_mono_now() >= e->since)
	{
		cache_drop(e, false);
		e = NULL;
	}
	f.enabled = zklock_lock_cache;
	f.mutex = ((zklock_worker_ops(slot->op)->flags & ZKW_CACHEABLE) != 0 &&
			   t->final && !t->rw);
	f.handed_over = handed_over;
	f.contended = (was_kept && e->contended);
	f.revocable = slot->revocable;
	f.token_asked = slot->token_asked;
	f.downgrade = (slot->downgrade_seq[0] != '\0');
	f.has_node = (slot->nodes[ZKN_MAIN].name[0] != '\0' && !slot->nodes[ZKN_MAIN].deleted);
	f.connected = zklock_connected;
	f.same_session = (sh->have_session && slot->session_gen == sh->session_gen);
	f.parked = zklock_req_parked(&zklock_reqs[idx]);
	/*
	 * alone: no other request of ours on the path, and no node handed over
	 * ahead of it still there (its guarded delete pending: the handover to
	 * this node is not confirmed, worker/locks/handover.c)
	 */
	f.alone = cache_path_alone(idx, t->base) &&
		!zklock_dtable_guarded_by(t->base, slot->nodes[ZKN_MAIN].name);
	/* cooling down, or (never seen) another node of ours kept there */
	f.cooling = (e != NULL && !was_kept);
	what = zklock_cache_keep_decide(&f);
	if (what != ZKLOCK_CACHE_KEEP)
	{
		/* the withdrawal deletes the node, as without caching */
		if (was_kept)
			cache_drop(e, what == ZKLOCK_CACHE_DELETE_COOL);
		return;
	}
	if (e == NULL)
	{
		e = cache_new_entry();
		if (e == NULL)
			return;
		e->gen++;
		e->watched = false;
		e->listing = false;
		e->contended = false;
		strlcpy(e->base, t->base, sizeof(e->base));
		e->user_path_off = slot->user_path_off;
	}
	e->kind = slot->kind;
	strlcpy(e->node.name, slot->nodes[ZKN_MAIN].name, sizeof(e->node.name));
	strlcpy(e->node.uuid, slot->nodes[ZKN_MAIN].uuid, sizeof(e->node.uuid));
	strlcpy(e->data, slot->data, sizeof(e->data));
	e->czxid = slot->czxid;
	e->session_gen = slot->session_gen;
	e->holder = -1;
	e->state = ZKCE_IDLE;
	e->since = zklock_mono_now();
	/* the slot's withdrawal deletes nothing now */
	slot->nodes[ZKN_MAIN].name[0] = '\0';
	slot->nodes[ZKN_MAIN].uuid[0] = '\0';
	elog(DEBUG2, "zklock: lock cache: kept %s/%s after the release of slot %d",
		 e->base, e->node.name, idx);
	if (!e->watched && !e->listing)
		cache_watch(e);
}

/*
 * List e's path with a children watch: the listing says whether anyone
 * else is queued now, the watch when someone comes.  Caller holds the
 * lock.
 */
static void
cache_watch(ZklockCacheEntry *e)
{
	int			rc;

	rc = zoo_awget_children2(zklock_zh, e->base, cache_watcher,
							 (void *) zklock_zkio_make_tag(cache_index(e), e->gen),
							 cache_listing_done,
							 zklock_zkio_make_tag(cache_index(e), e->gen));
	if (rc != ZOK)
		cache_contended(e, false);
	else
		e->listing = true;
}

/*
 * The entry a watch or listing tag names, if it is still the use the
 * tag was made for; NULL otherwise.  Caller holds the lock.
 */
static ZklockCacheEntry *
cache_from_tag(const void *tag)
{
	uint64		v = (uint64) (uintptr_t) tag;
	int			i = (int) (v & ZKLOCK_TAG_INDEX_MASK);
	uint32		gen = (uint32) (v >> ZKLOCK_TAG_INDEX_BITS);
	ZklockCacheEntry *e;

	if (i < 0 || i >= ZKLOCK_CACHE_MAX)
		return NULL;
	e = &zklock_shared->cache[i];
	if (e->gen != gen || (e->state != ZKCE_IDLE && e->state != ZKCE_IN_USE))
		return NULL;
	return e;
}

/*
 * Someone else may be queued behind e's node (or we cannot tell): never
 * grant from it again; an idle node goes now, and with cool (someone
 * else is there, or may be) its path cools down.  Caller holds the lock.
 */
static void
cache_contended(ZklockCacheEntry *e, bool cool)
{
	e->watched = false;
	e->listing = false;
	e->contended = true;
	if (e->state == ZKCE_IDLE)
		cache_drop(e, cool);
}

/*
 * Completion of a kept node's listing with its children watch: only the
 * node itself there means nobody else waits; anything else (another
 * node, an error) makes the entry contended.
 */
static void
cache_listing_done(int rc, const struct String_vector *strings,
				   const struct Stat *stat, const void *data)
{
	ZklockCacheEntry *e;

	LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
	e = cache_from_tag(data);
	if (e != NULL)
	{
		e->listing = false;
		if (rc == ZOK && strings->count == 1 &&
			strcmp(strings->data[0], e->node.name) == 0)
			e->watched = true;
		else
		{
			elog(DEBUG2, "zklock: lock cache: %s has %d children besides ours (rc %d): not kept",
				 e->base, rc == ZOK ? strings->count - 1 : -1, rc);
			cache_contended(e, rc == ZOK);
		}
	}
	LWLockRelease(zklock_shared->lock);
}

/*
 * The children watch of a kept node's path fired (a child came or went,
 * the path went: the path cools down) or the connection changed (the
 * watch may be gone): the entry is contended.
 */
static void
cache_watcher(zhandle_t *zzh, int type, int state, const char *path, void *ctx)
{
	ZklockCacheEntry *e;

	LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
	e = cache_from_tag(ctx);
	if (e != NULL)
	{
		elog(DEBUG2, "zklock: lock cache: the watch on %s fired (type %d, state %d)",
			 e->base, type, state);
		cache_contended(e, type != ZOO_SESSION_EVENT);
	}
	LWLockRelease(zklock_shared->lock);
}

/*
 * The periodic pass (every LOCAL_WAIT_CHECK_MS): idle nodes older than
 * zklock.lock_cache_idle, or all of them once caching is off, are
 * deleted; entries whose holder went without a release (its slot was
 * freed or reused) are forgotten; cooled-down paths are freed.  Caller
 * holds the lock.
 */
void
zklock_cache_tick(ZklockMonoTime now)
{
	int			i;

	for (i = 0; i < ZKLOCK_CACHE_MAX; i++)
	{
		ZklockCacheEntry *e = &zklock_shared->cache[i];

		switch (e->state)
		{
			case ZKCE_IDLE:
				if (!zklock_lock_cache ||
					now >= ZKLOCK_MONO_PLUS_MS(e->since, zklock_lock_cache_idle))
					cache_drop(e, false);
				break;
			case ZKCE_IN_USE:
				if (!cache_holder_valid(e))
					cache_drop(e, false);
				break;
			case ZKCE_COOLING:
				if (now >= e->since)
					cache_drop(e, false);
				break;
			case ZKCE_FREE:
				break;
		}
	}
}

/*
 * The connection dropped: the watches may miss what happens until it is
 * back, so every entry is contended (idle nodes are deleted once
 * connected again, held ones at their release).  Caller holds the lock.
 */
void
zklock_cache_connection_lost(void)
{
	int			i;

	for (i = 0; i < ZKLOCK_CACHE_MAX; i++)
	{
		ZklockCacheEntry *e = &zklock_shared->cache[i];

		if (e->state == ZKCE_IDLE || e->state == ZKCE_IN_USE)
		{
			e->watched = false;
			e->contended = true;
			if (e->state == ZKCE_IDLE)
				cache_drop(e, false);
		}
	}
}

/*
 * The session is gone, and every kept node with it.  Caller holds the
 * lock.
 */
void
zklock_cache_session_lost(void)
{
	int			i;

	for (i = 0; i < ZKLOCK_CACHE_MAX; i++)
	{
		ZklockCacheEntry *e = &zklock_shared->cache[i];

		if (e->state == ZKCE_IDLE || e->state == ZKCE_IN_USE)
		{
			e->session_gen = 0;
			cache_drop(e, false);
		}
	}
}

/*
 * A worker starts: the watches that guarded the kept nodes were the
 * earlier process's, so idle nodes are deleted (on the resumed session)
 * and held ones are left to their holders.  Caller holds the lock.
 */
void
zklock_cache_worker_start(void)
{
	int			i;

	for (i = 0; i < ZKLOCK_CACHE_MAX; i++)
	{
		ZklockCacheEntry *e = &zklock_shared->cache[i];

		if (e->state != ZKCE_FREE)
			cache_drop(e, false);
	}
}

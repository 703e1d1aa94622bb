/*-------------------------------------------------------------------------
 *
 * worker/locks/handover_numbering.c
 *	  What the worker knows of the children of a lock path, so that a
 *	  create can go without the listing that Curator sends behind every
 *	  create.  The rule is zklock_seq_* in core/handover_rules.c: a listing
 *	  that shows only nodes of this worker, an exists watch on the parent
 *	  answered for the same parent (its czxid), and then every create of
 *	  ours whose sequence number is exactly the next one proves that nobody
 *	  else created a child since.  Such a node is first in line when no node
 *	  of this worker sorts before it and no delete of ours under the path
 *	  is unanswered: it holds the lock, and the acquire cost one create.
 *
 *	  Concept map:
 *	    learn       the lock engine's listing (zklock_numbering_listed),
 *	                then, from the path's second listing on a connection,
 *	                the parent's exists watch (known_watch_done)
 *	    count       every create of ours under the path
 *	                (zklock_numbering_created); anything unexpected forgets
 *	    use         local_create_alone sends a create alone when the path
 *	                is known (zklock_numbering_may_skip); lk_placed grants
 *	                it when zklock_numbering_first says it is first
 *	    forget      the parent's watch fires (known_parent_watcher), a
 *	                create finds the parent missing, a reconnect (the
 *	                knowledge carries the connection it was learned on), a
 *	                new worker process (the table is process-local)
 *
 *	  The table is process-local, bounded (KNOWN_MAX paths) and keyed by
 *	  the lock nodes' parent (LockTarget.base).  A full table learns
 *	  nothing new until entries of earlier connections are dropped.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/hsearch.h"
#include "utils/memutils.h"

#include "zklock.h"
#include "core/handover_rules.h"
#include "common/shmem.h"
#include "worker/locks/locks_int.h"
#include "worker/connection/connection.h"
#include "worker/deletes/deletes.h"

/* paths the worker keeps knowledge of */
#define KNOWN_MAX			4096

/* a listing with more children than this is not checked for foreign nodes */
#define KNOWN_LIST_MAX		8

typedef struct KnownPath
{
	char		base[ZKLOCK_NODE_PATH_SIZE];	/* hash key */
	ZklockPathSeq seq;
} KnownPath;

/* the tag of a parent's exists: which parent, on which connection */
typedef struct KnownWatchTag
{
	uint32		conn;
	char		base[ZKLOCK_NODE_PATH_SIZE];
} KnownWatchTag;

static HTAB *known_paths = NULL;

static KnownPath *known_lookup(const char *base, bool create);
static bool known_child_ours(const char *base, const char *child);
static void known_parent_watcher(zhandle_t *zzh, int type, int state,
								 const char *path, void *ctx);
static void known_watch_done(int rc, const struct Stat *stat, const void *data);

/*
 * The entry of base, made when create is true and there is room (NULL
 * otherwise).  A full table first drops the entries of earlier
 * connections.
 */
static KnownPath *
known_lookup(const char *base, bool create)
{
	bool		found;

	if (known_paths == NULL)
	{
		HASHCTL		ctl;

		if (!create)
			return NULL;
		memset(&ctl, 0, sizeof(ctl));
		ctl.keysize = ZKLOCK_NODE_PATH_SIZE;
		ctl.entrysize = sizeof(KnownPath);
		ctl.hcxt = TopMemoryContext;
		known_paths = hash_create("zklock known lock paths", 256, &ctl,
								  HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);
	}
	if (!create)
		return hash_search(known_paths, base, HASH_FIND, NULL);
	if (hash_get_num_entries(known_paths) >= KNOWN_MAX &&
		hash_search(known_paths, base, HASH_FIND, NULL) == NULL)
	{
		HASH_SEQ_STATUS hs;
		KnownPath  *e;
		uint32		conn = zklock_conn_serial;

		hash_seq_init(&hs, known_paths);
		while ((e = hash_seq_search(&hs)) != NULL)
		{
			if (e->seq.conn != conn || !e->seq.listed)
				(void) hash_search(known_paths, e->base, HASH_REMOVE, NULL);
		}
		if (hash_get_num_entries(known_paths) >= KNOWN_MAX)
			return NULL;
	}
	{
		KnownPath  *e = hash_search(known_paths, base, HASH_ENTER, &found);

		if (!found)
			memset(&e->seq, 0, sizeof(e->seq));
		return e;
	}
}

/*
 * Is child (a node under base) a node of this worker: the node of one of
 * its requests (the slots under base: worker/locks/path_index.c), or one whose
 * delete it has recorded and not seen answered?  Caller holds the lock.
 */
static bool
known_child_ours(const char *base, const char *child)
{
	ZklockShared *sh = zklock_shared;
	char		buf[ZKLOCK_NODE_PATH_SIZE];
	int			i;

	for (i = zklock_pathidx_first(base); i >= 0; i = zklock_pathidx_next(i))
	{
		ZklockSlot *slot = &sh->slots[i];
		LockTarget	t;

		if (slot->state == ZKS_FREE || slot->state == ZKS_NEW ||
			zklock_worker_ops(slot->op)->lock_target == NULL ||
			(strcmp(slot->nodes[ZKN_MAIN].name, child) != 0 &&
			 strcmp(slot->nodes[ZKN_LEASE_LOCK].name, child) != 0))
			continue;
		zklock_lk_target(i, &t);
		if (strcmp(t.node, child) == 0 && strcmp(t.base, base) == 0)
			return true;
	}
	snprintf(buf, sizeof(buf), "%s/%s", base, child);
	return zklock_dtable_pending(buf);
}

/*
 * The lock engine listed base (the parent's Stat and its children, ghosts
 * already queued for deletion): learn where the parent's numbering stands
 * and whether only nodes of this worker are there, and set the exists
 * watch on the parent when none stands for this parent on this
 * connection and the path was listed before on it: a path locked once
 * (a lock per job run, say) costs ZooKeeper no request more than
 * Curator's protocol; from a path's second acquire on, its creates may go
 * alone.  Caller holds the lock.
 */
void
zklock_numbering_listed(const char *base, const struct Stat *stat,
						char **children, int n)
{
	KnownPath  *e;
	bool		only_ours = (n <= KNOWN_LIST_MAX);
	uint32		conn = zklock_conn_serial;
	bool		again;
	int			k;

	if (stat == NULL || !zklock_connected || (e = known_lookup(base, true)) == NULL)
		return;
	again = (e->seq.conn == conn);
	for (k = 0; k < n && only_ours; k++)
		only_ours = known_child_ours(base, children[k]);
	zklock_seq_listed(&e->seq, conn, stat->czxid, stat->cversion,
					  stat->numChildren, only_ours);
	/* a path used once costs no watch: the second listing sets it */
	if (e->seq.listed && !e->seq.watched && again)
	{
		KnownWatchTag *tag = MemoryContextAlloc(TopMemoryContext, sizeof(KnownWatchTag));

		tag->conn = conn;
		strlcpy(tag->base, base, sizeof(tag->base));
		if (zoo_awexists(zklock_zh, base, known_parent_watcher, NULL,
						 known_watch_done, tag) != ZOK)
		{
			pfree(tag);
			zklock_seq_forget(&e->seq);
		}
	}
}

/*
 * The parent's exists watch fired (deleted, made, data changed) or the
 * connection changed: what was learned of it no longer holds.
 */
static void
known_parent_watcher(zhandle_t *zzh, int type, int state, const char *path,
					 void *ctx)
{
	KnownPath  *e;

	if (type == ZOO_SESSION_EVENT || path == NULL)
		return;
	if ((e = known_lookup(path, false)) != NULL)
		zklock_seq_forget(&e->seq);
}

/*
 * Completion of the parent's exists (with the watch): the knowledge
 * becomes usable when it answers for the parent the listing saw.
 */
static void
known_watch_done(int rc, const struct Stat *stat, const void *data)
{
	KnownWatchTag *tag = (KnownWatchTag *) data;
	KnownPath  *e = known_lookup(tag->base, false);

	if (e != NULL)
	{
		if (rc == ZOK && stat != NULL)
			(void) zklock_seq_watch_answered(&e->seq, tag->conn, true, stat->czxid);
		else if (rc == ZNONODE)
			(void) zklock_seq_watch_answered(&e->seq, tag->conn, false, 0);
		else
			zklock_seq_forget(&e->seq);
	}
	pfree(tag);
}

/*
 * May the create of idx's node (target t) go without its listing, its
 * number to tell whether it is first?  When what the path's last listing
 * taught still holds and no other request of this worker waits for or
 * holds the lock there: then it most likely is first.  (Nodes whose
 * delete is recorded are gone before the create is applied: their deletes
 * leave first.)  With a request of ours there, the handover layer's own rules
 * decide, and a write node lists, as a listing behind a create costs no
 * round trip and a create alone behind a node of ours would then list.
 * Caller holds the lock.
 */
bool
zklock_numbering_may_skip(int idx, const LockTarget *t)
{
	ZklockShared *sh = zklock_shared;
	KnownPath  *e = known_lookup(t->base, false);
	int			i;

	if (e == NULL || !zklock_connected ||
		!zklock_seq_usable(&e->seq, zklock_conn_serial))
		return false;
	for (i = zklock_pathidx_first(t->base); i >= 0; i = zklock_pathidx_next(i))
	{
		ZklockSlot *slot = &sh->slots[i];
		LockTarget	o;

		if (i == idx || (slot->state != ZKS_ACTIVE && slot->state != ZKS_HELD) ||
			zklock_worker_ops(slot->op)->lock_target == NULL)
			continue;
		zklock_lk_target(i, &o);
		if (strcmp(o.base, t->base) == 0)
			return false;
	}
	return true;
}

/*
 * A create of ours under base was answered with the node name: count it.
 * Returns whether its number proves that nobody else created a child
 * since the path was listed.  Caller holds the lock.
 */
bool
zklock_numbering_created(const char *base, const char *node)
{
	KnownPath  *e = known_lookup(base, false);

	if (e == NULL)
		return false;
	if (!zklock_connected)
	{
		zklock_seq_forget(&e->seq);
		return false;
	}
	return zklock_seq_created(&e->seq, zklock_conn_serial, zklock_node_seq(node));
}

/*
 * A create of ours under base did something the numbering does not count
 * (a node without a sequence number, the parent missing): list again
 * before skipping.  Caller holds the lock.
 */
void
zklock_numbering_forget(const char *base)
{
	KnownPath  *e = known_lookup(base, false);

	if (e != NULL)
		zklock_seq_forget(&e->seq);
}

/*
 * Is idx's node (target t), whose number proved that no other client
 * created a node since the listing, first in line?  Every node ahead of
 * it is then a node of this worker: one of its requests' nodes sorting
 * before ours, or a node whose delete is recorded and unanswered.  Caller
 * holds the lock.
 */
bool
zklock_numbering_first(int idx, const LockTarget *t, bool proven)
{
	ZklockShared *sh = zklock_shared;
	long long	ours = zklock_node_seq(t->node);
	bool		ahead = false;
	bool		pending;
	int			i;

	if (!proven || ours < 0)
		return false;
	for (i = zklock_pathidx_first(t->base); i >= 0 && !ahead; i = zklock_pathidx_next(i))
	{
		ZklockSlot *slot = &sh->slots[i];
		LockTarget	o;

		if (i == idx || slot->state == ZKS_FREE || slot->state == ZKS_NEW ||
			zklock_worker_ops(slot->op)->lock_target == NULL)
			continue;
		zklock_lk_target(i, &o);
		if (strcmp(o.base, t->base) != 0)
			continue;
		/*
		 * A create of ours with no answer yet (no node) was sent after
		 * ours: the session answers in the order sent, so it is behind.
		 */
		if (o.node[0] != '\0')
		{
			long long	seq = zklock_node_seq(o.node);

			ahead = (seq < 0 || seq < ours);
		}
	}
	pending = zklock_dtable_pending_under(t->base);
	return zklock_first_unlisted(proven, ahead, pending);
}

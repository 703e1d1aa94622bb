/*-------------------------------------------------------------------------
 *
 * worker/deletes/delete_table.c
 *	  The entries of the shared pending-delete table (zklock_deletes, see
 *	  ZklockDelete) and the worker's progress on each (DeleteProgress):
 *	  recording one, freeing one, looking one up, and the copy of the
 *	  persistent ones on disk.  Sending them and their completions are
 *	  worker/deletes/deletes.c's, above it.
 *
 *	  zklock_dtable_record		record an entry (not sent yet)
 *	  zklock_dtable_free		free an entry: its node is gone
 *	  zklock_dtable_progress	the worker's progress on each entry
 *	  zklock_dtable_progress_of	the worker's progress on an entry
 *	  zklock_dtable_tag_current	the entry a completion's tag names, or -1
 *	  zklock_dtable_find_persistent	a persistent node's entry, or -1
 *	  zklock_dtable_pending		is a delete of path by name pending?
 *	  zklock_dtable_pending_under	is any delete at or under path pending?
 *	  zklock_dtable_find_ephemeral	an ephemeral node's entry by name, or -1
 *	  zklock_dtable_guarded_by	does a pending delete wait for this node?
 *	  zklock_dtable_have_room	room for n more, keeping the reserve?
 *	  zklock_dtable_drop_session	the session ended: drop its entries
 *	  zklock_dtable_mark_dirty	write the persistent entries again
 *	  zklock_dtable_persist		write them to disk if they changed
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "zklock.h"
#include "core/curator_rules.h"
#include "common/shmem.h"
#include "common/session_file.h"
#include "worker/deletes/deletes_int.h"

/* the worker's progress on each entry (worker_attach allocates it) */
DeleteProgress *zklock_dtable_progress = NULL;

static int	delete_hint = 0;	/* where to look for a free entry */

/*
 * The persistent entries changed since they were last written to disk
 * (only the worker adds or frees them); a write failed (logged once until
 * one succeeds).
 */
static bool persist_dirty = false;
static bool persist_failed = false;

/* a walk over the entries in use (delete_scan_next) */
typedef struct DeleteScan
{
	int			i;				/* the next index to look at */
	int			seen;			/* entries in use met so far */
} DeleteScan;

static void log_deletes_full(const char *consequence);
static ZklockDelete *delete_scan_next(DeleteScan *scan);
static bool delete_pending_match(const char *path, bool under);

/* ---------------------------------------------------------------------
 * What must be deleted is recorded in the shared pending-delete table in
 * the same critical section that frees or finishes the request slot that
 * owned the node, so a worker that dies at any step leaves it to the
 * next one.  Every function here but zklock_dtable_persist expects the
 * caller to hold the lock.
 * ---------------------------------------------------------------------
 */

/*
 * The worker's progress on entry i (process-local), reset when the
 * entry was reused.
 */
DeleteProgress *
zklock_dtable_progress_of(int i)
{
	DeleteProgress *dl = &zklock_dtable_progress[i];

	if (dl->serial != zklock_deletes[i].serial)
	{
		memset(dl, 0, sizeof(*dl));
		dl->serial = zklock_deletes[i].serial;
	}
	return dl;
}

/*
 * Decode the tag of a delete's completion: the entry index while the tag
 * still names the entry, -1 when it is stale.
 */
int
zklock_dtable_tag_current(const void *tag)
{
	uint64		v = (uint64) (uintptr_t) tag;
	int			i = (int) (v & ZKLOCK_TAG_INDEX_MASK);
	uint32		serial = (uint32) (v >> ZKLOCK_TAG_INDEX_BITS);

	if (zklock_dtable_progress == NULL || serial == 0 || i >= zklock_shared->ndeletes ||
		zklock_deletes[i].serial != serial)
		return -1;
	return i;
}

/*
 * Free entry i: the node is gone (or went with its session).
 */
void
zklock_dtable_free(int i)
{
	ZklockShared *sh = zklock_shared;

	if (zklock_deletes[i].persistent)
		persist_dirty = true;
	zklock_deletes[i].serial = 0;
	zklock_dtable_progress[i].serial = 0;
	sh->deletes_used--;
	if (sh->deletes_full_logged && sh->deletes_used <= sh->ndeletes / 2)
		sh->deletes_full_logged = false;
}

/*
 * Say that the table is full, once until it has emptied to half.
 */
static void
log_deletes_full(const char *consequence)
{
	ZklockShared *sh = zklock_shared;

	if (sh->deletes_full_logged)
		return;
	sh->deletes_full_logged = true;
	ereport(LOG,
			(errmsg("zklock: the table of pending zookeeper deletes is full"),
			 errdetail("%d of its %d entries (three per zklock.max_requests) hold nodes ZooKeeper has not confirmed deleted; %s.",
					   sh->deletes_used, sh->ndeletes, consequence),
			 errhint("Earlier \"could not delete\" messages name the nodes ZooKeeper refuses to delete; zk_status().deletes_pending counts the entries.")));
}

/*
 * Is there room for n more entries, keeping the reserve of the requests
 * that cannot wait (zklock_delete_may_add)?  When not, say the table is
 * full: the caller keeps its slot until there is room.
 */
bool
zklock_dtable_have_room(int n)
{
	ZklockShared *sh = zklock_shared;

	if (zklock_delete_may_add(sh->deletes_used, sh->ndeletes, n, true, sh->nslots))
		return true;
	log_deletes_full("releases and withdrawn waits keep their request slot until there is room");
	return false;
}

/*
 * Record an entry: the node at path (prefix NULL) or every child of path
 * named prefix...; a persistent node's entry survives the session (and
 * shared memory: it is written to disk), an ephemeral node's belongs to
 * session gen.  czxid, when not 0, limits the delete of a persistent node
 * to the node of that creation zxid and, when ctime is not 0, creation
 * time: one made again later is not ours, nor one that an ensemble
 * rebuilt from nothing made with the same zxid.  *entry is the entry to
 * send, -1 when a persistent node's entry was there already.  Returns
 * false when the table is full (the node is then named in the log).
 * Caller holds the lock.
 */
bool
zklock_dtable_record(const char *path, const char *prefix, bool persistent,
					 uint64 gen, int64 czxid, int64 ctime, int *entry)
{
	ZklockShared *sh = zklock_shared;
	ZklockDelete *e;
	int			n = sh->ndeletes;
	int			i;
	int			j = -1;

	/* one entry per persistent node is enough (every leave records it) */
	*entry = -1;
	if (persistent && zklock_dtable_find_persistent(path, prefix ? prefix : "", czxid) >= 0)
		return true;
	if (sh->deletes_used >= n)
	{
		log_deletes_full("nodes that must be deleted meanwhile are not recorded");
		ereport(LOG,
				(errmsg("zklock: could not record the delete of zookeeper node \"%s\": the table of pending deletes is full",
						path),
				 errdetail(persistent ?
						   "The node stays until it is deleted by hand." :
						   "The node stays until the zookeeper session ends.")));
		return false;
	}
	for (i = 0; i < n; i++)
	{
		j = (delete_hint + i) % n;
		if (zklock_deletes[j].serial == 0)
			break;
	}
	Assert(j >= 0 && zklock_deletes[j].serial == 0);
	delete_hint = j + 1;
	e = &zklock_deletes[j];
	if (++sh->delete_serial == 0)
		sh->delete_serial = 1;
	e->serial = sh->delete_serial;
	e->by_prefix = (prefix != NULL);
	e->persistent = persistent;
	e->session_gen = gen;
	e->czxid = persistent ? czxid : 0;
	e->ctime = persistent ? ctime : 0;
	strlcpy(e->prefix, prefix ? prefix : "", sizeof(e->prefix));
	strlcpy(e->path, path, sizeof(e->path));
	e->guard[0] = '\0';
	sh->deletes_used++;
	if (persistent)
		persist_dirty = true;
	*entry = j;
	return true;
}

/*
 * The entry of a persistent node with this path, prefix and creation
 * zxid, or -1.
 */
int
zklock_dtable_find_persistent(const char *path, const char *prefix, int64 czxid)
{
	DeleteScan	scan = {0, 0};
	ZklockDelete *e;

	while ((e = delete_scan_next(&scan)) != NULL)
		if (e->persistent && e->czxid == czxid &&
			strcmp(e->path, path) == 0 && strcmp(e->prefix, prefix) == 0)
			return scan.i - 1;
	return -1;
}

/*
 * Is the delete of the node at path, by name, in the pending-delete table:
 * recorded and not yet answered by the server (an answer, OK or NoNode,
 * frees the entry: the node is gone)?  A ghost already queued is not
 * queued twice; a handover grants only once its released node's delete
 * has been answered.  Caller holds the lock.
 */
bool
zklock_dtable_pending(const char *path)
{
	return delete_pending_match(path, false);
}

/*
 * Is any delete at or under path in the pending-delete table (by name or
 * by prefix), recorded and not yet answered?  A node a delete of this
 * worker is about to remove may still be there.  Caller holds the lock.
 */
bool
zklock_dtable_pending_under(const char *path)
{
	return delete_pending_match(path, true);
}

/*
 * The entry of the delete by name of an ephemeral node at path, or -1.
 * Caller holds the lock.
 */
int
zklock_dtable_find_ephemeral(const char *path)
{
	DeleteScan	scan = {0, 0};
	ZklockDelete *e;

	while ((e = delete_scan_next(&scan)) != NULL)
		if (!e->by_prefix && !e->persistent && strcmp(e->path, path) == 0)
			return scan.i - 1;
	return -1;
}

/*
 * Is a pending delete of a child of base guarded by node (a handover to
 * node not yet confirmed, worker/locks/handover.c)?  Caller holds the lock.
 */
bool
zklock_dtable_guarded_by(const char *base, const char *node)
{
	DeleteScan	scan = {0, 0};
	size_t		len = strlen(base);
	ZklockDelete *e;

	while ((e = delete_scan_next(&scan)) != NULL)
		if (e->guard[0] != '\0' && strcmp(e->guard, node) == 0 &&
			strncmp(e->path, base, len) == 0 && e->path[len] == '/' &&
			strchr(e->path + len + 1, '/') == NULL)
			return true;
	return false;
}

/*
 * The scan of both: an entry by name for exactly path, or (under) any
 * entry at or under path.
 */
static bool
delete_pending_match(const char *path, bool under)
{
	DeleteScan	scan = {0, 0};
	size_t		len = strlen(path);
	ZklockDelete *e;

	while ((e = delete_scan_next(&scan)) != NULL)
		if (under ? (strncmp(e->path, path, len) == 0 &&
					 (e->path[len] == '\0' || e->path[len] == '/')) :
			(!e->by_prefix && strcmp(e->path, path) == 0))
			return true;
	return false;
}

/*
 * The next entry in use of the walk scan (its index is scan->i - 1), or
 * NULL when every entry in use was met.  Caller holds the lock.
 */
static ZklockDelete *
delete_scan_next(DeleteScan *scan)
{
	ZklockShared *sh = zklock_shared;

	while (scan->i < sh->ndeletes && scan->seen < sh->deletes_used)
	{
		ZklockDelete *e = &zklock_deletes[scan->i++];

		if (e->serial != 0)
		{
			scan->seen++;
			return e;
		}
	}
	return NULL;
}

/*
 * The session ended: the server removed its ephemeral nodes, so their
 * deletes are done.  The deletes of persistent nodes (P/ready) stay.
 */
void
zklock_dtable_drop_session(void)
{
	ZklockShared *sh = zklock_shared;
	int			i;

	for (i = 0; i < sh->ndeletes && sh->deletes_used > 0; i++)
	{
		if (zklock_deletes[i].serial != 0 && !zklock_deletes[i].persistent)
			zklock_dtable_free(i);
	}
}

/* ---------------------------------------------------------------------
 * The entries of persistent nodes on disk ($PGDATA/zklock.deletes, see
 * common/session_file.c).  Shared memory does not outlive a crash-restart or a
 * restart of the server, and a persistent node (P/ready) left behind stays
 * for good: so the worker writes them whenever they changed, once per trip
 * around its event loop, before it waits, outside the lock (no fsync while
 * backends wait for the lock); a worker that starts puts them back into the
 * table (zklock_deletes_load), to be applied on whichever session it gets
 * (a persistent node belongs to no session).
 * ---------------------------------------------------------------------
 */

/*
 * The file is to say what the table says, whatever it was written with
 * last: write it on the next zklock_dtable_persist.
 */
void
zklock_dtable_mark_dirty(void)
{
	persist_dirty = true;
}

/*
 * Write the persistent entries to disk if they changed since the last
 * write; a failed write is tried again on the next call.  Worker only,
 * without the lock.
 */
void
zklock_dtable_persist(void)
{
	ZklockShared *sh = zklock_shared;
	ZklockDelete *copy;
	int			n = 0;
	int			seen = 0;
	int			i;

	if (!persist_dirty)
		return;
	copy = palloc(sizeof(ZklockDelete) * Max(sh->ndeletes, 1));
	LWLockAcquire(sh->lock, LW_SHARED);
	for (i = 0; i < sh->ndeletes && seen < sh->deletes_used; i++)
	{
		if (zklock_deletes[i].serial == 0)
			continue;
		seen++;
		if (zklock_deletes[i].persistent)
			copy[n++] = zklock_deletes[i];
	}
	LWLockRelease(sh->lock);
	persist_dirty = false;
	if (zklock_persistent_deletes_save(copy, n, persist_failed ? DEBUG1 : LOG))
		persist_failed = false;
	else
	{
		persist_dirty = true;
		persist_failed = true;
	}
	pfree(copy);
}

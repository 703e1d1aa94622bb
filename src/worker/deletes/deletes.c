/*-------------------------------------------------------------------------
 *
 * worker/deletes/deletes.c
 *	  Guaranteed deletes: the entries of the shared pending-delete table
 *	  (worker/deletes/delete_table.c) sent and retried for the life of the
 *	  session, and what a request records in it.  The entries of persistent
 *	  nodes (P/ready) are also kept on disk, so they outlive shared memory (a
 *	  crash-restart or a restart of the server).
 *
 *	  zklock_deletes_add			record a delete and send it
 *	  zklock_deletes_queue		the same for an ephemeral node of this session
 *	  zklock_deletes_send		send every entry that is due
 *	  zklock_deletes_due		is a pass over the entries due?
 *	  zklock_deletes_ready		deletes queued for the end of the pass
 *	  zklock_deletes_take_ready	take them for one multi (worker/batch.c)
 *	  zklock_deletes_send_alone	send one of them on its own
 *	  zklock_deletes_batch_answer	apply a multi's answer to one of them
 *	  zklock_deletes_guard		make a queued delete wait for a check of the
 *								node the lock was handed to
 *	  zklock_deletes_load		put the persistent entries on disk back
 *	  (zklock_node_gone_hook, worker/locks/handover_layer.c, is told of a
 *	  queued delete by name; zklock_guard_answer_hook of a guarded delete's
 *	  answer)
 *
 *	  A guarded delete (the released node of a handover at memory speed,
 *	  worker/locks/handover.c) is one multi of a check that the guard node is
 *	  there and the delete, sent alone: the released node goes only while
 *	  the node the lock was handed to is there, so it never goes while
 *	  nobody holds the lock by ZooKeeper's queue.  Its answers:
 *
 *	    applied, or the guard there    the entry is freed; the hook is told
 *	    and the node gone already      (the handover is confirmed)
 *	    connection loss, session gone  retried with its guard, like any
 *	                                   delete (a restarted worker too: the
 *	                                   guard is in the shared entry)
 *	    the guard gone (NoNode on the  the hook is told (the holder's lock
 *	    check)                         is lost), then the node is deleted
 *	                                   alone after zklock.commit_min_lease,
 *	                                   the time a COMMIT that checked the
 *	                                   lock just before may still take
 *	    any other refusal              retried with its guard, with
 *	                                   growing pauses
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/memutils.h"

#include "zklock.h"
#include "core/curator_rules.h"
#include "common/shmem.h"
#include "common/settings.h"
#include "common/session_file.h"
#include "worker/deletes/deletes_int.h"
#include "worker/locks/locks.h"

/*
 * The deletes by name that became due in this pass of the worker's event
 * loop, oldest first, waiting to be sent together at its end
 * (worker/batch.c): entry index and the serial it had when queued (a
 * stale one is skipped).  Process-local, like DeleteProgress.
 */
static int *ready_idx = NULL;
static uint32 *ready_serial = NULL;
static int	ready_head = 0;
static int	ready_tail = 0;
static int	ready_cap = 0;

/*
 * A guarded delete on its way: the multi's ops and the results the client
 * fills in, and the entry's tag.  Worker memory, freed by its completion.
 */
typedef struct GuardedDelete
{
	char		check[ZKLOCK_NODE_PATH_SIZE];
	char		path[ZKLOCK_NODE_PATH_SIZE];
	zoo_op_t	ops[2];
	zoo_op_result_t results[2];
	const void *tag;
} GuardedDelete;

static void delete_send(int i, ZklockMonoTime now);
static int	delete_send_guarded(int i);
static void delete_guarded_done(int rc, const void *data);
static bool delete_queue_ready(int i);
static void delete_retry(int i, int rc);
static void delete_done(int rc, const void *data);
static void delete_stat_done(int rc, const struct Stat *stat, const void *data);
static void delete_prefix_done(int rc, const struct String_vector *strings,
							   const void *data);
static void delete_prefix_child_done(int rc, const void *data);

/* ---------------------------------------------------------------------
 * Guaranteed deletes.  What must be deleted is recorded in the shared
 * pending-delete table (zklock_deletes, see ZklockDelete) in the same
 * critical section that frees or finishes the request slot that owned
 * the node, so a worker that dies at any step leaves it to the next one.
 * Every error but NoNode is tried again for as long as the session lasts,
 * like Curator's guaranteed delete.  The completions take the lock;
 * every other function here expects the caller to hold it.
 * ---------------------------------------------------------------------
 */

/*
 * Send entry i (a delete, or the listing of a delete by prefix) unless it
 * is on its way already or pausing after a refusal.  A plain delete by
 * name of an ephemeral node, never refused so far, is queued instead and
 * leaves at the end of the pass, in one multi with the others queued by
 * then (worker/batch.c); anything that must reach the server behind it
 * calls zklock_batch_flush first.
 */
static void
delete_send(int i, ZklockMonoTime now)
{
	ZklockDelete *e = &zklock_deletes[i];
	DeleteProgress *dl = zklock_dtable_progress_of(i);
	const void *tag = zklock_zkio_make_tag(i, e->serial);
	int			rc;

	if (dl->inflight || zklock_zh == NULL || !zklock_connected)
		return;
	if (dl->retry_at != 0 && now < dl->retry_at)
	{
		zklock_request_delete_retry(dl->retry_at);
		return;
	}
	if (e->by_prefix)
		rc = zoo_aget_children(zklock_zh, e->path, 0, delete_prefix_done, tag);
	else if (e->czxid != 0)
	{
		/* limited to one node: look whose it is first */
		rc = zoo_aexists(zklock_zh, e->path, 0, delete_stat_done, tag);
	}
	else if (e->guard[0] != '\0')
		rc = delete_send_guarded(i);
	else if (!e->persistent && dl->attempts == 0 && delete_queue_ready(i))
	{
		/* leaves at the end of the pass, with the others due by then */
		dl->inflight = true;
		return;
	}
	else
		rc = zoo_adelete(zklock_zh, e->path, -1, delete_done, tag);
	if (rc == ZOK)
		dl->inflight = true;
	else
	{
		/* the client took nothing (its connection is going): later */
		dl->retry_at = ZKLOCK_MONO_PLUS_MS(now, DELETE_RETRY_MIN_MS);
		zklock_request_deletes_scan();
	}
}

/*
 * Queue entry i, a plain delete by name, to be sent at the end of the
 * pass (zklock_batch_flush).  False when the queue is full (only stale
 * items can fill it): the caller sends it alone.
 */
static bool
delete_queue_ready(int i)
{
	DeleteProgress *dl = zklock_dtable_progress_of(i);

	if (ready_idx == NULL)
	{
		ready_cap = zklock_shared->ndeletes + 1;
		ready_idx = MemoryContextAlloc(TopMemoryContext, sizeof(int) * ready_cap);
		ready_serial = MemoryContextAlloc(TopMemoryContext, sizeof(uint32) * ready_cap);
	}
	if (ready_head == ready_tail)
		ready_head = ready_tail = 0;
	if (ready_tail >= ready_cap)
		return false;
	ready_idx[ready_tail] = i;
	ready_serial[ready_tail] = zklock_deletes[i].serial;
	ready_tail++;
	dl->batched = true;
	return true;
}

/*
 * How many deletes wait to be sent at the end of the pass (stale ones
 * included).  Worker only; no lock needed (process-local).
 */
int
zklock_deletes_ready(void)
{
	return ready_tail - ready_head;
}

/*
 * Take up to max of the queued deletes, oldest first, into idx and serial
 * (those whose entry was freed or reused meanwhile are dropped).  They
 * stay marked in flight: the caller sends them, or answers them with
 * zklock_deletes_batch_answer.  Caller holds the lock.
 */
int
zklock_deletes_take_ready(int *idx, uint32 *serial, int max)
{
	int			n = 0;

	while (n < max && ready_head < ready_tail)
	{
		int			i = ready_idx[ready_head];
		uint32		s = ready_serial[ready_head];

		ready_head++;
		if (zklock_deletes[i].serial != s || !zklock_dtable_progress_of(i)->batched)
			continue;
		zklock_dtable_progress[i].batched = false;
		idx[n] = i;
		serial[n] = s;
		n++;
	}
	if (ready_head == ready_tail)
		ready_head = ready_tail = 0;
	return n;
}

/*
 * Send the delete of entry i (a plain delete by name, taken from the
 * queue or answered by a failed multi) on its own, as delete_send would.
 * Caller holds the lock.
 */
void
zklock_deletes_send_alone(int i)
{
	ZklockDelete *e = &zklock_deletes[i];
	DeleteProgress *dl = zklock_dtable_progress_of(i);

	dl->inflight = true;
	if (zklock_zh == NULL || !zklock_connected ||
		zoo_adelete(zklock_zh, e->path, -1, delete_done,
					zklock_zkio_make_tag(i, e->serial)) != ZOK)
	{
		/* the client took nothing (its connection is going): later */
		dl->inflight = false;
		dl->retry_at = ZKLOCK_MONO_PLUS_MS(zklock_mono_now(), DELETE_RETRY_MIN_MS);
		zklock_request_deletes_scan();
	}
}

/*
 * The answer rc of a multi that carried entry i (serial: the entry's
 * serial when it was sent; a reused entry is left alone).  Applied (ZOK):
 * the node is gone.  Connection trouble or a lost session: tried again
 * like a lost single delete.  Anything else (one op failed, so none was
 * applied): the entry is sent again on its own, so it gets the answer it
 * would have had alone (NoNode frees it).  Caller holds the lock.
 */
void
zklock_deletes_batch_answer(int i, uint32 serial, int rc)
{
	DeleteProgress *dl;

	if (zklock_dtable_progress == NULL || zklock_deletes[i].serial != serial)
		return;
	dl = zklock_dtable_progress_of(i);
	if (rc == ZOK)
		zklock_dtable_free(i);
	else if (zklock_rc_retryable(rc) || zklock_rc_session_gone(rc))
		delete_retry(i, rc);
	else
	{
		dl->inflight = false;
		dl->retry_at = 0;
		zklock_deletes_send_alone(i);
	}
}

/*
 * Send entry i as a guarded delete: one multi, a check that its guard (a
 * sibling node) is there, then the delete.  Returns what the client said.
 * Caller holds the lock.
 */
static int
delete_send_guarded(int i)
{
	ZklockDelete *e = &zklock_deletes[i];
	GuardedDelete *g = MemoryContextAllocZero(TopMemoryContext, sizeof(GuardedDelete));
	const char *slash = strrchr(e->path, '/');
	int			rc;

	Assert(slash != NULL);
	snprintf(g->check, sizeof(g->check), "%.*s/%s",
			 (int) (slash - e->path), e->path, e->guard);
	strlcpy(g->path, e->path, sizeof(g->path));
	zoo_check_op_init(&g->ops[0], g->check, -1);
	zoo_delete_op_init(&g->ops[1], g->path, -1);
	/* an answer that fills in nothing must not read as applied */
	g->results[0].err = g->results[1].err = ZSYSTEMERROR;
	g->tag = zklock_zkio_make_tag(i, e->serial);
	rc = zoo_amulti(zklock_zh, 2, g->ops, g->results, delete_guarded_done, g);
	if (rc != ZOK)
		pfree(g);
	return rc;
}

/*
 * Completion of a guarded delete (see the banner for its answers).
 */
static void
delete_guarded_done(int rc, const void *data)
{
	GuardedDelete *g = (GuardedDelete *) data;
	int			i;

	LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
	i = zklock_dtable_tag_current(g->tag);
	if (i >= 0)
	{
		ZklockDelete *e = &zklock_deletes[i];
		DeleteProgress *dl = zklock_dtable_progress_of(i);

		if (rc == ZOK ||
			(!zklock_rc_retryable(rc) && !zklock_rc_session_gone(rc) &&
			 g->results[0].err == ZOK && g->results[1].err == ZNONODE))
		{
			zklock_guard_answer_hook(e->path, e->guard, true);
			zklock_dtable_free(i);
		}
		else if (zklock_rc_retryable(rc) || zklock_rc_session_gone(rc))
			delete_retry(i, rc);
		else if (g->results[0].err == ZNONODE)
		{
			/* the holder first learns its lock is lost; the node goes later */
			zklock_guard_answer_hook(e->path, e->guard, false);
			e->guard[0] = '\0';
			dl->inflight = false;
			dl->retry_at = ZKLOCK_MONO_PLUS_MS(zklock_mono_now(), zklock_commit_min_lease);
			zklock_request_delete_retry(dl->retry_at);
		}
		else
			delete_retry(i, rc);
	}
	LWLockRelease(zklock_shared->lock);
	pfree(g);
}

/*
 * Make the pending delete of path, an ephemeral node of this session whose
 * delete is queued for the end of the pass and has not left, a guarded
 * delete: it leaves now, in one multi with a check that guard (a sibling
 * of path) is there (see the banner).  False when it cannot be: no such
 * entry, one guarded already, or its delete left or cannot leave now (not
 * connected).  Caller holds the lock.
 */
bool
zklock_deletes_guard(const char *path, const char *guard)
{
	int			i = zklock_dtable_find_ephemeral(path);
	DeleteProgress *dl;

	if (i < 0 || zklock_deletes[i].guard[0] != '\0' || !zklock_connected)
		return false;
	dl = zklock_dtable_progress_of(i);
	if (!dl->batched)
		return false;
	/* out of the queue (take_ready skips it), then sent on its own */
	dl->batched = false;
	dl->inflight = false;
	strlcpy(zklock_deletes[i].guard, guard, sizeof(zklock_deletes[i].guard));
	delete_send(i, zklock_mono_now());
	return true;
}

/*
 * Add an entry (zklock_dtable_record says which) and send it: at once when
 * connected, or, a plain delete by name, at the end of the pass or at the
 * next zklock_batch_flush, whichever comes first: a request that must
 * reach the server behind it flushes first.  Returns false when the table
 * is full (the node is then named in the log).  Caller holds the lock.
 */
bool
zklock_deletes_add(const char *path, const char *prefix, bool persistent,
				   uint64 gen, int64 czxid, int64 ctime)
{
	int			j;

	if (!zklock_dtable_record(path, prefix, persistent, gen, czxid, ctime, &j))
		return false;
	if (j >= 0)
		delete_send(j, zklock_mono_now());
	return true;
}

/*
 * Delete an ephemeral node of the current session: by exact path, or
 * every child of path that starts with prefix (a node whose create reply
 * was lost).
 */
void
zklock_deletes_queue(const char *path, const char *prefix)
{
	(void) zklock_deletes_add(path, prefix, false, zklock_shared->session_gen, 0, 0);
	if (prefix == NULL)
	{
		/*
		 * waiters on it look again: zklock_node_gone_hook is data, defined
		 * with the handover layer (worker/locks/handover_layer.c), so the
		 * worker/deletes/ calls nothing above it by name
		 */
		zklock_node_gone_hook(path);
	}
}

/*
 * The server (or the client) did not confirm entry i: try it again, as
 * soon as connected after connection trouble, with growing pauses after
 * a refusal (logged once per entry).
 */
static void
delete_retry(int i, int rc)
{
	ZklockDelete *e = &zklock_deletes[i];
	DeleteProgress *dl = zklock_dtable_progress_of(i);
	ZklockMonoTime now = zklock_mono_now();

	dl->inflight = false;
	zklock_request_deletes_scan();
	if (zklock_rc_retryable(rc) || zklock_rc_session_gone(rc))
	{
		dl->retry_at = ZKLOCK_MONO_PLUS_MS(now, DELETE_RETRY_MIN_MS);
		return;
	}
	dl->attempts++;
	dl->retry_at = ZKLOCK_MONO_PLUS_MS(now,
									   zklock_retry_delay_ms(dl->attempts,
															 DELETE_RETRY_BASE_MS,
															 DELETE_RETRY_MAX_MS));
	if (!dl->logged)
	{
		dl->logged = true;
		if (e->by_prefix)
			ereport(LOG,
					(errmsg("zklock: could not list zookeeper node \"%s\" to delete its children named \"%s\": %s",
							e->path, e->prefix, zerror(rc)),
					 errdetail("The delete is tried again, with growing pauses, for as long as the session lasts.")));
		else
			ereport(LOG,
					(errmsg("zklock: could not delete zookeeper node \"%s\": %s",
							e->path, zerror(rc)),
					 errdetail("The delete is tried again, with growing pauses, for as long as the session lasts.")));
	}
}

/*
 * Completion of a guaranteed delete: done on success or NoNode, tried
 * again on anything else.  BadVersion (a delete limited to one creation
 * zxid, see delete_stat_done): the node changed since it was looked at,
 * so it is looked at again at once.
 */
static void
delete_done(int rc, const void *data)
{
	int			i;

	LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
	i = zklock_dtable_tag_current(data);
	if (i >= 0)
	{
		if (rc == ZOK || rc == ZNONODE)
			zklock_dtable_free(i);
		else if (rc == ZBADVERSION && zklock_deletes[i].czxid != 0)
		{
			DeleteProgress *dl = zklock_dtable_progress_of(i);

			dl->inflight = false;
			dl->retry_at = 0;
			delete_send(i, zklock_mono_now());
		}
		else
			delete_retry(i, rc);
	}
	LWLockRelease(zklock_shared->lock);
}

/*
 * Completion of the look at a persistent node whose delete is limited to
 * one creation zxid (P/ready of one round of a double barrier): gone, or
 * made again since (another czxid: a later round's, not ours), the entry
 * is done; still ours, it is deleted at the data version just seen
 * (BadVersion: looked at again).  ZooKeeper cannot make a delete depend on
 * the creation zxid itself, so a node deleted and made again within that
 * one round trip would still go: the window is one round trip, not the
 * life of the entry.
 */
static void
delete_stat_done(int rc, const struct Stat *stat, const void *data)
{
	int			i;

	LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
	i = zklock_dtable_tag_current(data);
	if (i >= 0)
	{
		ZklockDelete *e = &zklock_deletes[i];

		if (rc == ZNONODE)
			zklock_dtable_free(i);
		else if (rc == ZOK && (stat->czxid != e->czxid ||
							   (e->ctime != 0 && stat->ctime != e->ctime)))
		{
			ereport(LOG,
					(errmsg("zklock: zookeeper node \"%s\" is not deleted: it was made again since its delete was recorded",
							e->path),
					 errdetail("Its creation zxid and time are %lld and %lld, the delete was recorded for %lld and %lld, which is gone.",
							   (long long) stat->czxid, (long long) stat->ctime,
							   (long long) e->czxid, (long long) e->ctime)));
			zklock_dtable_free(i);
		}
		else if (rc == ZOK)
		{
			int			zrc = zoo_adelete(zklock_zh, e->path, stat->version,
										  delete_done, zklock_zkio_make_tag(i, e->serial));

			if (zrc != ZOK)
				delete_retry(i, ZCONNECTIONLOSS);
		}
		else
			delete_retry(i, rc);
	}
	LWLockRelease(zklock_shared->lock);
}

/*
 * Completion of the child listing of a delete by prefix: the first child
 * that carries the prefix (a node whose create reply was lost) is deleted
 * and, once that delete is applied, the parent is listed again
 * (delete_prefix_child_done), until a listing finds no child with the
 * prefix: a create sent on an older connection, or by an earlier worker,
 * may be applied after any one listing, and two nodes may carry the
 * prefix.  None, or no parent: done.  The entry stays a delete by prefix
 * throughout, so a refusal or a restarted worker lists again.
 */
static void
delete_prefix_done(int rc, const struct String_vector *strings, const void *data)
{
	int			i;

	LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
	i = zklock_dtable_tag_current(data);
	if (i >= 0 && rc == ZOK)
	{
		ZklockDelete *e = &zklock_deletes[i];
		DeleteProgress *dl = zklock_dtable_progress_of(i);
		int			first = zklock_find_protected(strings->data, strings->count,
												  e->prefix);

		if (first < 0)
			zklock_dtable_free(i);
		else
		{
			char		child[ZKLOCK_NODE_PATH_SIZE];

			snprintf(child, sizeof(child), "%s/%s", e->path, strings->data[first]);
			/* dl->inflight stays set: the delete is the entry's call now */
			if (zoo_adelete(zklock_zh, child, -1, delete_prefix_child_done,
							zklock_zkio_make_tag(i, e->serial)) != ZOK)
			{
				dl->inflight = false;
				dl->retry_at = ZKLOCK_MONO_PLUS_MS(zklock_mono_now(), DELETE_RETRY_MIN_MS);
				zklock_request_deletes_scan();
			}
		}
	}
	else if (i >= 0 && rc == ZNONODE)
		zklock_dtable_free(i);
	else if (i >= 0)
		delete_retry(i, rc);
	LWLockRelease(zklock_shared->lock);
}

/*
 * Completion of the delete of a child found by a delete by prefix: applied
 * (or gone already), the parent is listed again at once; refused, the
 * entry is tried again like any other (its next try lists first).
 */
static void
delete_prefix_child_done(int rc, const void *data)
{
	int			i;

	LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
	i = zklock_dtable_tag_current(data);
	if (i >= 0)
	{
		ZklockDelete *e = &zklock_deletes[i];
		DeleteProgress *dl = zklock_dtable_progress_of(i);

		if (rc == ZOK || rc == ZNONODE)
		{
			dl->inflight = false;
			dl->retry_at = 0;
			delete_send(i, zklock_mono_now());
		}
		else
		{
			if (!dl->logged && !zklock_rc_retryable(rc) && !zklock_rc_session_gone(rc))
			{
				dl->logged = true;
				ereport(LOG,
						(errmsg("zklock: could not delete the child of zookeeper node \"%s\" named \"%s...\": %s",
								e->path, e->prefix, zerror(rc)),
						 errdetail("The delete is tried again, with growing pauses, for as long as the session lasts.")));
			}
			delete_retry(i, rc);
		}
	}
	LWLockRelease(zklock_shared->lock);
}

/*
 * Send every entry that is due: after a reconnect, at the start of a
 * worker (which knows nothing of its predecessor's calls), after the pause
 * of a refused delete.  An entry of an ephemeral node of an earlier
 * session is dropped: that session's end removed the node.
 */
void
zklock_deletes_send(void)
{
	ZklockShared *sh = zklock_shared;
	ZklockMonoTime now = zklock_mono_now();
	int			seen = 0;
	int			i;

	zklock_deletes_scan_done();
	for (i = 0; i < sh->ndeletes && seen < sh->deletes_used; i++)
	{
		ZklockDelete *e = &zklock_deletes[i];

		if (e->serial == 0)
			continue;
		if (!e->persistent && e->session_gen != sh->session_gen)
		{
			zklock_dtable_free(i);
			continue;
		}
		seen++;
		delete_send(i, now);
	}
}

/*
 * Is a pass over the pending deletes due?
 */
bool
zklock_deletes_due(ZklockMonoTime now)
{
	return zklock_connected && zklock_shared->deletes_used > 0 &&
		(zklock_loop.deletes_scan ||
		 (zklock_loop.deletes_next_retry != 0 && now >= zklock_loop.deletes_next_retry));
}

/*
 * A worker starts: put the persistent entries on disk (written by
 * zklock_dtable_persist, worker/deletes/delete_table.c) back into the table
 * (those it does not hold already: a restarted worker finds them in shared
 * memory too).  They are sent once connected, on any session.  Takes the
 * lock.
 */
void
zklock_deletes_load(void)
{
	ZklockShared *sh = zklock_shared;
	ZklockDelete *saved;
	char	   *file_hosts;
	bool		same_hosts;
	int			n;
	int			added = 0;
	int			i;

	saved = palloc(sizeof(ZklockDelete) * Max(sh->ndeletes, 1));
	n = zklock_persistent_deletes_read(saved, sh->ndeletes, &file_hosts);
	same_hosts = (file_hosts != NULL &&
				  strcmp(file_hosts, zklock_hosts ? zklock_hosts : "") == 0);
	LWLockAcquire(sh->lock, LW_EXCLUSIVE);
	for (i = 0; i < n; i++)
	{
		ZklockDelete *e = &saved[i];

		if (zklock_dtable_find_persistent(e->path, e->prefix, e->czxid) >= 0)
			continue;			/* a restarted worker: the table has it */
		if (!same_hosts && (e->czxid == 0 || e->ctime == 0))
		{
			/*
			 * Recorded for other hosts (another ensemble or chroot, or the
			 * same one named differently) and not limited to one node: the
			 * path may name another node now.  One limited to its creation
			 * zxid and time is safe anywhere: a zxid is unique in an
			 * ensemble's history, and one rebuilt from nothing, which
			 * numbers from the start again, made its node at another time.
			 */
			ereport(LOG,
					(errmsg("zklock: not deleting zookeeper node \"%s\": its delete was recorded for another zklock.hosts",
							e->path),
					 errdetail("The delete was recorded while zklock.hosts was \"%s\"; delete the node by hand if it is still there.",
							   file_hosts)));
			continue;
		}
		if (zklock_deletes_add(e->path, e->by_prefix ? e->prefix : NULL, true,
							   sh->session_gen, e->czxid, e->ctime))
			added++;
	}
	/* the file says from now on what the table says */
	zklock_dtable_mark_dirty();
	zklock_request_deletes_scan();
	LWLockRelease(sh->lock);
	if (added > 0)
		ereport(LOG,
				(errmsg_plural("zklock: %d delete of a persistent zookeeper node recorded before the restart is pending again",
							   "zklock: %d deletes of persistent zookeeper nodes recorded before the restart are pending again",
							   added, added)));
	if (file_hosts != NULL)
		pfree(file_hosts);
	pfree(saved);
}
